//! Helpers for the multi-process tests: real `ringlog-meta-node` processes on 127.0.0.1,
//! killed on drop.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use meta::{MetaClient, MetaError, MetaState, NodeStatus};

pub const NODE_START_TIMEOUT_MS: u64 = 30_000;
pub const POLL_INTERVAL_MS: u64 = 100;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local addr")
        .port()
}

/// Polls `f` until it returns `Some` or the deadline passes.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(POLL_INTERVAL_MS));
    }
}

pub struct NodeProc {
    pub id: u64,
    pub addr: String,
    pub data_dir: PathBuf,
    pub log_path: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl NodeProc {
    /// Starts a node; `extra` are additional flags (e.g. `--peers`, `--join`).
    pub fn start(id: u64, addr: &str, root: &Path, extra: &[String]) -> NodeProc {
        let data_dir = root.join(format!("node{id}"));
        let log_path = root.join(format!("node{id}.log"));
        let mut args = vec![
            "--node-id".to_string(),
            id.to_string(),
            "--listen".to_string(),
            addr.to_string(),
            "--data-dir".to_string(),
            data_dir.display().to_string(),
        ];
        args.extend_from_slice(extra);
        let mut n = NodeProc {
            id,
            addr: addr.to_string(),
            data_dir,
            log_path,
            args,
            child: None,
        };
        n.spawn();
        n
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("open node log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringlog-meta-node"))
            .args(&self.args)
            .env("RUST_LOG", "info,openraft=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn ringlog-meta-node");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(l)) = lines.next() {
                let _ = tx.send(l);
            }
            for _ in lines {}
        });
        self.child = Some(child);
        match rx.recv_timeout(Duration::from_millis(NODE_START_TIMEOUT_MS)) {
            Ok(l) if l.starts_with("READY") => {}
            other => panic!(
                "node {} did not start ({other:?}); log:\n{}",
                self.id,
                std::fs::read_to_string(&self.log_path).unwrap_or_default()
            ),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .arg(sig)
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(st.success(), "kill {sig} failed");
    }

    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    pub fn client(&self) -> MetaClient {
        MetaClient::new(self.addr.clone())
    }

    pub fn status(&self) -> Result<NodeStatus, MetaError> {
        self.client().status()
    }

    pub fn state(&self) -> Result<(u64, MetaState), MetaError> {
        self.client().state()
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `n` nodes forming one cluster (ids 1..=n) with the given extra flags.
pub fn start_cluster(root: &Path, n: u64, extra: &[&str]) -> Vec<NodeProc> {
    let addrs: Vec<String> = (0..n)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let peers = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{}={a}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let mut flags = vec!["--peers".to_string(), peers];
    flags.extend(extra.iter().map(|s| s.to_string()));
    addrs
        .iter()
        .enumerate()
        .map(|(i, a)| NodeProc::start(i as u64 + 1, a, root, &flags))
        .collect()
}

/// The id of the node that a running node believes is leader, if that node says so itself.
pub fn find_leader(nodes: &[NodeProc]) -> Option<usize> {
    for (i, n) in nodes.iter().enumerate() {
        if !n.is_running() {
            continue;
        }
        if let Ok(s) = n.status() {
            if s.server_state == "Leader" && s.current_leader == Some(n.id) {
                return Some(i);
            }
        }
    }
    None
}

pub fn wait_leader(nodes: &[NodeProc], timeout: Duration) -> usize {
    wait_for("a leader", timeout, || find_leader(nodes))
}

/// Dumps node logs (for failing tests).
pub fn dump_logs(nodes: &[NodeProc]) {
    for n in nodes {
        eprintln!(
            "===== node {} log =====\n{}",
            n.id,
            std::fs::read_to_string(&n.log_path).unwrap_or_default()
        );
    }
}
