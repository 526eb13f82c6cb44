//! Shared helpers for the real-client end-to-end tests (issue #4): start and crash the
//! `ringlog` binary, find kcat, build the Python venv with the Kafka clients, and run client
//! processes with a time limit.
//!
//! Every child process is bounded in time and killed on drop; a broker never outlives its test.

#![allow(dead_code)]

pub mod cluster;
pub mod compaction;
pub mod java;
pub mod kcat_suite;
pub mod peer;
pub mod tls_certs;
pub mod wire;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Pinned client versions (newest that install from PyPI as wheels on this machine).
/// kafka-python needs python-snappy, lz4 and zstandard for those codecs (gzip is built in).
pub const PIP_PACKAGES: &[&str] = &[
    "confluent-kafka==2.16.1",
    "kafka-python==3.0.12",
    "python-snappy==0.7.3",
    "cramjam==2.14.0",
    "lz4==4.4.5",
    "zstandard==0.25.0",
];

/// How long the broker may take to print its ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The ringlog binary built by cargo for these tests.
pub fn ringlog_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ringlog"))
}

/// `<workspace>/target` (derived from the binary's path, so `CARGO_TARGET_DIR` is honoured).
pub fn target_dir() -> PathBuf {
    // .../target/<profile>/ringlog
    let bin = ringlog_bin();
    bin.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// `ops/tests/clients/`.
pub fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("clients")
}

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Path of kcat (or its old name kafkacat). Panics with the install hint when missing.
pub fn kcat() -> PathBuf {
    which("kcat")
        .or_else(|| which("kafkacat"))
        .expect("install kcat (apt-get install kcat)")
}

/// Creates `target/test-venv` once (guarded by `flock` on `target/test-venv.lock`, so parallel
/// nextest processes wait for one another) with the pinned Kafka clients, and returns the venv's
/// python. `RINGLOG_TEST_PYTHON` overrides the interpreter used to create the venv.
pub fn python_venv() -> PathBuf {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(create_venv).clone()
}

fn create_venv() -> PathBuf {
    let target = target_dir();
    fs::create_dir_all(&target).unwrap();
    let venv = target.join("test-venv");
    let python = venv.join("bin").join("python");
    let marker = venv.join(".ringlog-ready");
    let wanted = PIP_PACKAGES.join("\n");

    let lock = File::create(target.join("test-venv.lock")).expect("create venv lock file");
    // SAFETY: flock on a valid fd we own; released when `lock` is dropped.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(
        rc,
        0,
        "flock test-venv.lock: {}",
        std::io::Error::last_os_error()
    );

    if fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) && python.exists() {
        return python;
    }
    let _ = fs::remove_dir_all(&venv);
    let base = std::env::var("RINGLOG_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&base)
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap_or_else(|e| panic!("run `{base} -m venv`: {e} (install python3 and python3-venv)"));
    assert!(
        out.status.success(),
        "`{base} -m venv {}` failed (apt-get install python3-venv?):\n{}{}",
        venv.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(PIP_PACKAGES)
        .output()
        .expect("run pip");
    assert!(
        out.status.success(),
        "pip install {:?} failed:\n{}{}",
        PIP_PACKAGES,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    fs::write(&marker, &wanted).unwrap();
    python
}

// ---------------------------------------------------------------------------------------------
// Processes with a time limit
// ---------------------------------------------------------------------------------------------

/// Output of a finished client process.
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` with stdin from `stdin` (bytes, may be empty), stdout/stderr captured to temp
/// files (no pipe deadlocks), killing it after `timeout`. Panics on time-out, never on exit code.
/// Waits up to `timeout` for `child` to exit; past it, kills and reaps it and returns None.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn run_with_timeout(mut cmd: Command, stdin: Option<&[u8]>, timeout: Duration) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    let in_path = dir.path().join("stdin");
    fs::write(&in_path, stdin.unwrap_or(&[])).unwrap();
    cmd.stdin(File::open(&in_path).unwrap())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap());
    let desc = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {desc}: {e}"));
    let Some(status) = wait_child(&mut child, timeout) else {
        panic!(
            "timed out after {timeout:?}: {desc}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            tail(&fs::read_to_string(&out_path).unwrap_or_default(), 20_000),
            tail(&fs::read_to_string(&err_path).unwrap_or_default(), 20_000),
        );
    };
    Output {
        status,
        stdout: String::from_utf8_lossy(&fs::read(&out_path).unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&fs::read(&err_path).unwrap()).into_owned(),
    }
}

/// Like [`run_with_timeout`] but panics (with both outputs) unless the process exits 0.
pub fn run_ok(cmd: Command, stdin: Option<&[u8]>, timeout: Duration) -> String {
    let desc = format!("{cmd:?}");
    let out = run_with_timeout(cmd, stdin, timeout);
    if !out.status.success() {
        panic!(
            "{desc} failed ({})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            tail(&out.stdout, 20_000),
            tail(&out.stderr, 20_000)
        );
    }
    out.stdout
}

/// Last `max` bytes of `s` (on a char boundary).
pub fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut i = s.len() - max;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    &s[i..]
}

/// A `Command` for `ops/tests/clients/<script>` under the venv's python.
pub fn python_cmd(script: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(python_venv());
    cmd.arg("-u").arg(clients_dir().join(script)).args(args);
    cmd.env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

/// Runs a client script; returns its stdout; panics with stdout+stderr if it fails or hangs.
pub fn run_python(script: &str, args: &[&str], env: &[(&str, &str)], timeout: Duration) -> String {
    let mut cmd = python_cmd(script, args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_ok(cmd, None, timeout)
}

/// kafkajs major version the tests pin.
const KAFKAJS: &str = "kafkajs@2.2.4";

/// The node_modules dir with kafkajs, installed with npm into `target/test-node` once.
/// Makes SCRAM-SHA-256 user `user` through Kafka's AlterUserScramCredentials over a PLAINTEXT
/// listener at `bootstrap` (the path of `kafka-configs --entity-type users`, no admin listener
/// needed); `sasl_check.py`'s JSON answer.
pub fn scram_user_over_plaintext(bootstrap: &str, user: &str, password: &str) -> String {
    run_python(
        "sasl_check.py",
        &[
            "scram-admin-plain",
            bootstrap,
            "-",
            "-",
            "-",
            user,
            password,
        ],
        &[],
        Duration::from_secs(60),
    )
}

pub fn kafkajs_dir() -> PathBuf {
    let dir = target_dir().join("test-node");
    fs::create_dir_all(&dir).unwrap();
    let lock = File::create(target_dir().join("test-node.lock")).unwrap();
    // SAFETY: flock on a file we own; released when `lock` drops.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    if !dir.join("node_modules/kafkajs/package.json").exists() {
        let mut npm = Command::new("npm");
        npm.args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg(KAFKAJS);
        let out = run_with_timeout(npm, None, Duration::from_secs(300));
        assert!(
            out.status.success(),
            "npm install {KAFKAJS} failed (node and npm are needed: apt-get install nodejs npm): {}",
            out.stderr
        );
    }
    dir.join("node_modules")
}

/// `tests/clients/kafkajs_smoke.js` against `bootstrap`: admin, idempotent produce of 300
/// records, a consumer group reading them all and committing every partition's end.
pub fn kafkajs_smoke(bootstrap: &str) {
    let mut node = Command::new("node");
    node.arg(clients_dir().join("kafkajs_smoke.js"))
        .args([bootstrap, "kjs-topic", "kjs-group"])
        .env("NODE_PATH", kafkajs_dir())
        .env("KAFKAJS_NO_PARTITIONER_WARNING", "1");
    let out = run_ok(node, None, Duration::from_secs(120));
    let line = out.lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["consumed"], 300, "{out}");
    let committed: i64 = v["offsets"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["offset"].as_str().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(
        committed, 300,
        "the group committed every partition's end: {out}"
    );
}

/// Creates a topic through the Kafka admin API (confluent-kafka), waiting until metadata shows it.
/// The values of `topic`/`partition` from the beginning to the end, one per line (kcat).
pub fn kcat_read(broker: &Broker, topic: &str, partition: u32) -> Vec<String> {
    let mut c = Command::new(kcat());
    c.args(["-b", &broker.bootstrap(), "-C", "-t", topic, "-p"])
        .arg(partition.to_string())
        .args(["-o", "beginning", "-e", "-q", "-f", "%s\n"]);
    run_ok(c, None, Duration::from_secs(60))
        .lines()
        .map(str::to_string)
        .collect()
}

/// The sum over its series (every core, every label) of metric `name` in Prometheus text.
pub fn metric_sum(metrics: &str, name: &str) -> f64 {
    let prefix = format!("{name}{{");
    metrics
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Produces `values` (one record each) to `topic`/`partition` (kcat, acks=all).
pub fn kcat_write(broker: &Broker, topic: &str, partition: u32, values: &[&str]) {
    let mut c = Command::new(kcat());
    c.args(["-b", &broker.bootstrap(), "-P", "-t", topic, "-p"])
        .arg(partition.to_string());
    let input: String = values.iter().map(|v| format!("{v}\n")).collect();
    run_ok(c, Some(input.as_bytes()), Duration::from_secs(60));
}

pub fn create_topic(broker: &Broker, topic: &str, partitions: u32, configs: &[(&str, &str)]) {
    let mut args = vec![
        "create".to_string(),
        broker.addr().to_string(),
        topic.to_string(),
        partitions.to_string(),
    ];
    args.extend(configs.iter().map(|(k, v)| format!("{k}={v}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_python("admin.py", &args, &[], Duration::from_secs(60));
}

// ---------------------------------------------------------------------------------------------
// The broker under test
// ---------------------------------------------------------------------------------------------

/// One HTTP/1.1 request without a body to the admin listener at `addr`; the raw response.
pub fn http_request(addr: &str, method: &str, path: &str) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).expect("admin listener");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    raw
}

/// A `ringlog serve` process on a temporary data dir and a free port. Killed on drop.
pub struct Broker {
    child: Option<Child>,
    dir: tempfile::TempDir,
    data_dir: PathBuf,
    stderr_path: PathBuf,
    addr: SocketAddr,
    cores: usize,
    extra_args: Vec<String>,
    /// How long a (re)start may take to print its ready line.
    ready_timeout: Duration,
}

/// The ports [`free_port`] draws from: below the kernel's ephemeral range (32768..61000 by
/// default), so that no outgoing connection's local port takes one between its pick and
/// its bind, and wide enough that tests running side by side rarely draw the same one.
const TEST_PORT_RANGE: std::ops::Range<u16> = 12_000..32_000;
/// What [`Broker::await_ready`]'s error says of a broker that neither printed its ready line
/// nor exited within its ready timeout.
pub const READY_STALLED: &str = "did not print";
/// How many draws [`free_port`] tries before it gives up.
const FREE_PORT_MAX_DRAWS: usize = 1_000;

/// A port on 127.0.0.1 that was free a moment ago and that this test process has not
/// handed out before (a cluster's nodes each take two, which must all differ; a port the
/// kernel hands to `bind(0)` can come round again once its probe is closed).
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::Mutex;
    static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let mut handed = HANDED_OUT.lock().unwrap();
    let handed = handed.get_or_insert_with(HashSet::new);
    let span = u64::from(TEST_PORT_RANGE.end - TEST_PORT_RANGE.start);
    for _ in 0..FREE_PORT_MAX_DRAWS {
        // A fresh random draw each time (std's per-process random hash keys).
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let port = TEST_PORT_RANGE.start + (h.finish() % span) as u16;
        if handed.contains(&port) || TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        handed.insert(port);
        return port;
    }
    panic!("no free port on 127.0.0.1 in {TEST_PORT_RANGE:?} after {FREE_PORT_MAX_DRAWS} draws");
}

impl Broker {
    /// Starts a broker with `--cores cores` and waits for its ready line.
    pub fn start(cores: usize) -> Broker {
        Broker::start_with(cores, &[])
    }

    /// Like [`Broker::start`] with extra command-line arguments (e.g. `--log-requests`).
    pub fn start_with(cores: usize, extra_args: &[&str]) -> Broker {
        Broker::start_in(cores, None, extra_args)
    }

    /// Like [`Broker::start_with`] on a given data dir (e.g. on a small filesystem).
    pub fn start_on_data_dir(cores: usize, data_dir: &Path, extra_args: &[&str]) -> Broker {
        Broker::start_in(cores, Some(data_dir), extra_args)
    }

    /// Starts brokers that wait for each other (the nodes of a cluster: each one's start
    /// waits for a quorum of its peers): all are spawned, then each one's ready line awaited.
    pub fn start_together(cores: usize, extra_args: &[Vec<String>]) -> Vec<Broker> {
        Broker::try_start_together(cores, extra_args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Broker::start_together`], or the first node's early exit (its stderr): the nodes
    /// that started and those still starting are stopped.
    pub fn try_start_together(
        cores: usize,
        extra_args: &[Vec<String>],
    ) -> Result<Vec<Broker>, String> {
        let mut brokers: Vec<Broker> = extra_args
            .iter()
            .map(|args| {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                Broker::prepared(cores, None, &args)
            })
            .collect();
        let mut launched: Vec<(Child, usize)> = brokers.iter_mut().map(Broker::launch).collect();
        for (i, b) in brokers.iter_mut().enumerate() {
            let (child, start_len) = launched.remove(0);
            if let Err(e) = b.await_ready(child, start_len) {
                // The nodes still waiting for their quorum would wait in vain.
                for (mut child, _) in launched {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(format!("node {} of {}: {e}", i + 1, extra_args.len()));
            }
        }
        Ok(brokers)
    }

    fn start_in(cores: usize, data_dir: Option<&Path>, extra_args: &[&str]) -> Broker {
        let mut b = Broker::prepared(cores, data_dir, extra_args);
        b.spawn_and_wait(1);
        b
    }

    /// A broker not started yet: its temp dir, data dir and port.
    fn prepared(cores: usize, data_dir: Option<&Path>, extra_args: &[&str]) -> Broker {
        let dir = tempfile::Builder::new()
            .prefix("ringlog-e2e-")
            .tempdir()
            .expect("temp dir");
        let data_dir = data_dir.map_or_else(|| dir.path().join("data"), Path::to_path_buf);
        fs::create_dir_all(&data_dir).unwrap();
        let stderr_path = dir.path().join("broker.stderr");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        Broker {
            child: None,
            dir,
            data_dir,
            stderr_path,
            addr,
            cores,
            // `{listen}` in an argument stands for the broker's listen address (a test's
            // `--listener NAME=PROTOCOL://{listen}`).
            extra_args: extra_args
                .iter()
                .map(|s| s.replace("{listen}", &addr.to_string()))
                .collect(),
            ready_timeout: READY_TIMEOUT,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:PORT` as a string, for client bootstrap lists.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Everything the broker wrote to stderr so far (all runs of this broker, appended).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&fs::read(&self.stderr_path).unwrap_or_default()).into_owned()
    }

    /// Waits until the broker's stderr holds a line containing every one of `needles` (all
    /// runs of this broker), or panics after `timeout` naming what it waited for.
    pub fn wait_for_log_line(&self, needles: &[&str], timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.stderr_text();
            if let Some(line) = text.lines().find(|l| needles.iter().all(|n| l.contains(n))) {
                return line.to_string();
            }
            assert!(
                Instant::now() < deadline,
                "no log line with {needles:?} within {timeout:?}; log ends: {}",
                tail(&text, 3_000)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn spawn_and_wait(&mut self, attempts: usize) {
        let mut last_err = String::new();
        for attempt in 0..attempts {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(500));
            }
            match self.spawn_once() {
                Ok(()) => return,
                // A start that hangs is not retried: it is the failure.
                Err(e) if e.contains(READY_STALLED) => panic!("{e}"),
                Err(e) => last_err = e,
            }
        }
        panic!("{last_err}");
    }

    /// Spawns the process (stderr appended to the log file) and waits for the ready line that
    /// this run prints. On an early exit returns Err (so a restart can retry a busy port).
    fn spawn_once(&mut self) -> Result<(), String> {
        let (child, start_len) = self.launch();
        self.await_ready(child, start_len)
    }

    /// Spawns the process, stderr appended to the log file; returns it with the log's length
    /// before this run.
    fn launch(&mut self) -> (Child, usize) {
        assert!(self.child.is_none(), "broker already running");
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.stderr_path)
            .unwrap();
        let start_len = log.metadata().unwrap().len() as usize;
        writeln!(log, "=== test harness: starting ringlog serve ===").unwrap();
        let mut cmd = Command::new(ringlog_bin());
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--listen")
            .arg(self.addr.to_string())
            .arg("--cores")
            .arg(self.cores.to_string())
            .args(&self.extra_args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", ringlog_bin().display()));
        (child, start_len)
    }

    /// Waits for the ready line of the run that `launch` started (log from `start_len`).
    fn await_ready(&mut self, mut child: Child, start_len: usize) -> Result<(), String> {
        let ready = format!("ringlog ready on {}", self.addr);
        let t0 = Instant::now();
        loop {
            let text = self.stderr_text();
            if text.get(start_len..).is_some_and(|t| t.contains(&ready)) {
                self.child = Some(child);
                return Ok(());
            }
            if let Some(st) = child.try_wait().unwrap() {
                return Err(format!(
                    "ringlog serve exited ({st}) before printing {ready:?}\n--- stderr ---\n{}",
                    tail(text.get(start_len..).unwrap_or(""), 20_000)
                ));
            }
            if t0.elapsed() > self.ready_timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "ringlog serve {READY_STALLED} {ready:?} within {:?}\n--- stderr ---\n{}",
                    self.ready_timeout,
                    tail(text.get(start_len..).unwrap_or(""), 20_000)
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// SIGKILL (a crash) and reap.
    /// Whether the process runs (not killed or stopped by the test).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: plain kill(2) on our own child's pid, not yet reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }

    /// The command-line arguments of the next [`Broker::restart`] (beyond the data dir,
    /// listener and cores).
    pub fn set_extra_args(&mut self, extra_args: &[&str]) {
        self.extra_args = extra_args.iter().map(|s| s.to_string()).collect();
    }

    /// How long the next restarts may take to be ready (a node with very many partitions).
    pub fn set_ready_timeout(&mut self, t: Duration) {
        self.ready_timeout = t;
    }

    /// Starts again on the same data dir and port (after [`kill`] or [`terminate`]).
    /// `--cores` for the next (re)start.
    pub fn set_cores(&mut self, cores: usize) {
        self.cores = cores;
    }

    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.kill();
        }
        // The port can be briefly unavailable after a crash: retry a few times.
        self.spawn_and_wait(10);
    }

    /// Starts again at once after a SIGKILL, with no retry: the broker itself must cope with
    /// the killed process's listening sockets still closing (issue #23).
    pub fn kill_and_restart_at_once(&mut self) {
        self.kill();
        self.spawn_and_wait(1);
    }

    /// SIGTERM, wait (at most 30 s), and assert a clean exit 0.
    pub fn terminate(&mut self) {
        let mut c = self.child.take().expect("broker not running");
        // SAFETY: kill(2) on our own child's pid, not yet reaped.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        let st = loop {
            if let Some(st) = c.try_wait().unwrap() {
                break st;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                let _ = c.kill();
                let _ = c.wait();
                panic!(
                    "ringlog serve did not exit within 30 s of SIGTERM\n--- stderr ---\n{}",
                    tail(&self.stderr_text(), 20_000)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            st.success(),
            "ringlog serve exited with {st} after SIGTERM (want 0)\n--- stderr ---\n{}",
            tail(&self.stderr_text(), 20_000)
        );
    }

    /// Asserts that the broker process is still alive (it did not panic or exit).
    pub fn assert_alive(&mut self) {
        let c = self.child.as_mut().expect("broker not running");
        if let Some(st) = c.try_wait().unwrap() {
            self.child = None;
            panic!(
                "ringlog serve died ({st})\n--- stderr ---\n{}",
                tail(&self.stderr_text(), 20_000)
            );
        }
    }

    /// The temp dir holding data and logs (kept alive as long as the broker).
    pub fn temp_dir(&self) -> &Path {
        self.dir.path()
    }
}

/// A broker a framework test runs against: a ringlog node, or the Kafka peer
/// ([`peer::KafkaPeer`]), so that one scenario serves both.
pub trait BrokerUnderTest {
    /// `ringlog` or `kafka`, for messages.
    fn kind(&self) -> &'static str;
    /// `host:port` for clients.
    fn bootstrap(&self) -> String;
    /// Panics (with its log's tail) where the broker's process has exited.
    fn assert_alive(&mut self);
    /// The tail of its log, for a failure message.
    fn log_tail(&self) -> String;
}

impl BrokerUnderTest for Broker {
    fn kind(&self) -> &'static str {
        "ringlog"
    }
    fn bootstrap(&self) -> String {
        Broker::bootstrap(self)
    }
    fn assert_alive(&mut self) {
        Broker::assert_alive(self)
    }
    fn log_tail(&self) -> String {
        tail(&self.stderr_text(), 8_000).to_string()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- ringlog stderr (tail) ---\n{}",
                tail(&self.stderr_text(), 8_000)
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Small deterministic PRNG (no extra dependency) and Kafka's murmur2 partitioner
// ---------------------------------------------------------------------------------------------

/// SplitMix64: seeded, reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    /// Seed from `RINGLOG_TEST_SEED` if set, else from the clock; prints it for reproduction.
    pub fn from_env_or_time(what: &str) -> Rng {
        let seed = std::env::var("RINGLOG_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("{what}: RINGLOG_TEST_SEED={seed}");
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }
}

/// Kafka's murmur2 (as in `org.apache.kafka.common.utils.Utils.murmur2` and librdkafka).
pub use fanout::rekey::murmur2;

/// Kafka's default partition for a keyed record: `toPositive(murmur2(key)) % n`.
pub fn kafka_partition(key: &[u8], partitions: u32) -> u32 {
    ((murmur2(key) & 0x7fff_ffff) as u32) % partitions
}

/// Kills the child process on drop (a panicking test leaves no client behind).
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `clients/crash_producer.py` running (acks=all, see its doc): its stdout lines (`ACK`,
/// `FAILED`, `DONE`) as they arrive, read on a thread of their own.
pub struct CrashProducer {
    child: ChildGuard,
    rx: std::sync::mpsc::Receiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
    stderr: PathBuf,
    /// The lines read so far.
    pub lines: Vec<String>,
}

impl CrashProducer {
    /// Starts `crash_producer.py ARGS`, its stderr into `stderr`.
    pub fn start(args: &[&str], stderr: PathBuf) -> CrashProducer {
        use std::io::BufRead;
        let mut cmd = python_cmd("crash_producer.py", args);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .stdin(std::process::Stdio::null());
        let mut child = ChildGuard(cmd.spawn().expect("spawn crash_producer.py"));
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        CrashProducer {
            child,
            rx,
            reader: Some(reader),
            stderr,
            lines: Vec::new(),
        }
    }

    /// What the producer wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits for the first acknowledgement (panics after `timeout`, or if the producer ends
    /// without one).
    pub fn wait_first_ack(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            match self.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let ack = l.starts_with("ACK ");
                    self.lines.push(l);
                    if ack {
                        return;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!(
                    "the producer ended without an acknowledgement:\n{}\n{}",
                    self.lines.join("\n"),
                    self.stderr_text()
                ),
            }
            assert!(
                Instant::now() < deadline,
                "no acknowledgement within {timeout:?}\n{}",
                self.stderr_text()
            );
        }
    }

    /// Takes the lines that arrived, without waiting.
    pub fn drain(&mut self) {
        self.lines.extend(self.rx.try_iter());
    }

    /// Waits (at most `timeout`) for the producer to flush and exit; returns its `DONE` line
    /// and the acknowledgements (`"<partition> <offset> <value>"`).
    pub fn finish(mut self, timeout: Duration) -> (String, Vec<String>) {
        let deadline = Instant::now() + timeout;
        while self.child.0.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "the producer did not finish within {timeout:?}\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        self.drain();
        let done = self
            .lines
            .iter()
            .find(|l| l.starts_with("DONE "))
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "the producer did not finish cleanly:\n{}\n{}",
                    tail(&self.lines.join("\n"), 4000),
                    self.stderr_text()
                )
            });
        let acked = self
            .lines
            .iter()
            .filter_map(|l| l.strip_prefix("ACK ").map(str::to_string))
            .collect();
        (done, acked)
    }
}
