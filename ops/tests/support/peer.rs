//! The reference peer: a genuine Apache Kafka 4.4 broker beside ringlog, started by
//! `scripts/kafka-peer.sh` (jars from Maven Central, cached outside the repository), so that a
//! test can run the same client, tool or request against both.
//!
//! Where Kafka cannot be had here (the script exits 3: no Java, no Maven, no repository) a test
//! is skipped with the reason printed, except under CI (`CI` set), where that is a failure:
//! CI's machines reach Maven Central.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{free_port, run_with_timeout, Output};

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

    /// Runs one of Kafka's CLI tools (by its script name) to its end.
    pub fn tool(name: &str, args: &[&str]) -> Output {
        let mut c = Command::new("bash");
        c.arg(peer_script()).args(["tool", name]).args(args);
        run_with_timeout(c, None, PEER_TOOL_TIMEOUT)
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
