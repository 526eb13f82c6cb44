//! The reference peer: a genuine Apache Kafka 4.4 broker beside ringlog, started by
//! `scripts/kafka-peer.sh` (jars from Maven Central, cached outside the repository), so that a
//! test can run the same client, tool or request against both.
//!
//! Where Kafka cannot be had here (the script exits 3: no Java, no Maven, no repository) a test
//! is skipped with the reason printed, except under CI (`CI` set), where that is a failure:
//! CI's machines reach Maven Central.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{free_port, run_with_timeout, tail, BrokerUnderTest, Output};

/// The exit status of `kafka-peer.sh` when Kafka cannot be had on this machine.
pub const PEER_UNAVAILABLE_EXIT: i32 = 3;
/// How long a peer may take to fetch its jars and start (the first fetch downloads ~130 MB).
pub const PEER_START_TIMEOUT: Duration = Duration::from_secs(300);
/// How long one of Kafka's CLI tools may run.
pub const PEER_TOOL_TIMEOUT: Duration = Duration::from_secs(120);
/// Start options that give the peer what ringlog always has: an authorizer (ACLs), with
/// ANONYMOUS (every PLAINTEXT client, the tools included) a super user, so that the ACLs a
/// test adds refuse no one.
pub const WITH_AUTHORIZER: &[&str] = &[
    "--prop",
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "--prop",
    "super.users=User:ANONYMOUS",
];
/// How many port runs are tried for a peer.
const PEER_PORT_DRAWS: usize = 50;
/// The ports a single node takes in a row (clients, controller).
const SINGLE_PORTS: u16 = 2;
/// The ports a 3-node cluster takes in a row (three client ports, three controller ports).
const CLUSTER_PORTS: u16 = 6;

/// The ids listed in `docs/kafka-differences.md` (each entry starts "- `ID`"): the
/// differences from Kafka 4.4 that the checks accept.
pub fn listed_differences() -> std::collections::BTreeSet<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/kafka-differences.md");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

/// `scripts/kafka-peer.sh`.
pub fn peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka-peer.sh")
}

/// A Kafka 4.4 single-node KRaft broker on 127.0.0.1; stopped on drop.
pub struct KafkaPeer {
    dir: tempfile::TempDir,
    port: u16,
}

impl KafkaPeer {
    /// Starts a single-node peer with `extra` start options (`--durable`, `--prop K=V`).
    /// `None` (with the reason printed) where Kafka cannot be had here, outside CI.
    pub fn start(extra: &[&str]) -> Option<KafkaPeer> {
        Self::start_mode("single", SINGLE_PORTS, extra)
    }

    fn start_mode(mode: &str, ports: u16, extra: &[&str]) -> Option<KafkaPeer> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port_run(ports);
        let mut c = Command::new("bash");
        c.arg(peer_script())
            .args(["start", mode])
            .arg(dir.path())
            .arg(port.to_string())
            .args(extra);
        let out = run_with_timeout(c, None, PEER_START_TIMEOUT);
        match out.status.code() {
            Some(0) => Some(KafkaPeer { dir, port }),
            Some(PEER_UNAVAILABLE_EXIT) => {
                let why = out.stderr.trim();
                assert!(
                    std::env::var_os("CI").is_none(),
                    "the Kafka peer must run in CI: {why}"
                );
                eprintln!("skipped: the Kafka peer cannot be had here: {why}");
                None
            }
            _ => panic!(
                "the Kafka peer did not start:\n{}\n{}",
                out.stdout, out.stderr
            ),
        }
    }

    /// A 3-node KRaft cluster (node ids 1 to 3, every one a broker and a controller); `None`
    /// as [`KafkaPeer::start`].
    pub fn start_cluster(extra: &[&str]) -> Option<KafkaPeer> {
        Self::start_mode("cluster", CLUSTER_PORTS, extra)
    }

    /// `127.0.0.1:PORT` (a cluster's first node).
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its data directory (its `kafka.log` is there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The `kafka.pid` of each node (one for a single node, three for a cluster).
    fn pid_files(&self) -> Vec<PathBuf> {
        let single = self.dir.path().join("kafka.pid");
        if single.is_file() {
            return vec![single];
        }
        (1..=3)
            .map(|i| self.dir.path().join(format!("node{i}")).join("kafka.pid"))
            .filter(|p| p.is_file())
            .collect()
    }

    /// Runs one of Kafka's CLI tools (by its script name) to its end.
    pub fn tool(name: &str, args: &[&str]) -> Output {
        let mut c = Command::new("bash");
        c.arg(peer_script()).args(["tool", name]).args(args);
        run_with_timeout(c, None, PEER_TOOL_TIMEOUT)
    }
}

impl BrokerUnderTest for KafkaPeer {
    fn kind(&self) -> &'static str {
        "kafka"
    }
    fn bootstrap(&self) -> String {
        KafkaPeer::bootstrap(self)
    }
    fn assert_alive(&mut self) {
        for pid_file in self.pid_files() {
            let pid = fs::read_to_string(&pid_file).unwrap_or_default();
            let alive = Path::new("/proc").join(pid.trim()).exists();
            assert!(
                alive,
                "the Kafka peer's node of {} exited\n--- its log (tail) ---\n{}",
                pid_file.display(),
                self.log_tail()
            );
        }
    }
    fn log_tail(&self) -> String {
        self.pid_files()
            .iter()
            .map(|p| {
                let log = p.with_file_name("kafka.log");
                let text =
                    String::from_utf8_lossy(&fs::read(&log).unwrap_or_default()).into_owned();
                format!("{}:\n{}", log.display(), tail(&text, 6_000))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for KafkaPeer {
    fn drop(&mut self) {
        let mut c = Command::new("bash");
        c.arg(peer_script()).arg("stop").arg(self.dir.path());
        let _ = run_with_timeout(c, None, Duration::from_secs(60));
    }
}

/// A port whose `n - 1` successors are free too (a peer's listeners lie in a row).
fn free_port_run(n: u16) -> u16 {
    for _ in 0..PEER_PORT_DRAWS {
        let port = free_port();
        if (1..n).all(|i| std::net::TcpListener::bind(("127.0.0.1", port + i)).is_ok()) {
            return port;
        }
    }
    panic!("no {n} free ports in a row after {PEER_PORT_DRAWS} draws")
}
