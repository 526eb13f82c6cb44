//! Metadata writes per second: one node (durable: fdatasync per batch of log entries plus the
//! atomic hard-state update), and three `ringlog-meta-node` processes on loopback.
//!
//! `cargo bench -p ringlog-meta --bench meta_writes`
//!
//! Each write is a CreateTopic of one partition. Writers are threads doing blocking writes; with
//! several in flight openraft batches them into one log append.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use meta::{Assignment, MetaClient, MetaConfig, Metastore};

const SECONDS_PER_CASE: u64 = 3;
const WRITER_COUNTS: &[usize] = &[1, 16, 64];
const NODE_START_TIMEOUT_MS: u64 = 30_000;

fn one() -> Vec<Assignment> {
    vec![Assignment {
        node_id: 1,
        core_index: 0,
    }]
}

/// Runs `writers` threads calling `write(thread, seq)` for SECONDS_PER_CASE; returns writes/s.
fn run_case<W>(writers: usize, make: impl Fn(usize) -> W) -> f64
where
    W: FnMut(u64) + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|t| {
            let mut w = make(t);
            let (stop, done) = (stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    w(seq);
                    seq += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(SECONDS_PER_CASE));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("writer thread");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn main() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    println!("data dirs under {}", tmp.path().display());

    // ---- single node, in-process, durable
    let h = Metastore::start(MetaConfig::single_node(tmp.path().join("single"))).expect("start");
    for &w in WRITER_COUNTS {
        let rate = run_case(w, |t| {
            let h = h.clone();
            move |seq| {
                h.write_blocking(meta::Command::create_topic(
                    format!("s-{w}-{t}-{seq}"),
                    1,
                    BTreeMap::new(),
                    one(),
                ))
                .expect("write");
            }
        });
        println!("single node (durable), {w:>2} writers: {rate:>8.0} writes/s");
    }
    h.shutdown().expect("shutdown");

    // ---- three processes on loopback
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let peers = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{}={a}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let _procs: Vec<Proc> = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_ringlog-meta-node"))
                .args(["--node-id", &(i + 1).to_string(), "--listen", a])
                .args(["--peers", &peers])
                .arg("--data-dir")
                .arg(tmp.path().join(format!("n{}", i + 1)))
                .env("RUST_LOG", "warn")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn node");
            let mut line = String::new();
            BufReader::new(c.stdout.take().expect("stdout"))
                .read_line(&mut line)
                .expect("read READY");
            assert!(line.starts_with("READY"), "node did not start: {line}");
            Proc(c)
        })
        .collect();
    // Wait until all three nodes agree on the leader.
    let deadline = Instant::now() + Duration::from_millis(NODE_START_TIMEOUT_MS);
    let leader = loop {
        let seen: Vec<Option<u64>> = addrs
            .iter()
            .map(|a| {
                MetaClient::new(a.as_str())
                    .status()
                    .ok()
                    .and_then(|s| s.current_leader)
            })
            .collect();
        if let Some(Some(id)) = seen.first() {
            if seen.iter().all(|s| *s == Some(*id)) {
                break addrs[*id as usize - 1].clone();
            }
        }
        assert!(Instant::now() < deadline, "no stable leader");
        std::thread::sleep(Duration::from_millis(100));
    };
    for &w in WRITER_COUNTS {
        let rate = run_case(w, |t| {
            let mut c = MetaClient::new(leader.clone());
            move |seq| {
                c.create_topic(&format!("c-{w}-{t}-{seq}"), 1, BTreeMap::new(), one())
                    .expect("write");
            }
        });
        println!("3 nodes on loopback,   {w:>2} writers: {rate:>8.0} writes/s");
    }
}
