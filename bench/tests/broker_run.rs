//! End-to-end: `ringlog serve` started by the test, `ringlog-bench` run against it.
//!
//! The broker binary is `target/<profile>/ringlog` (next to `ringlog-bench`); when it is
//! missing, it is built once with `cargo build -p ringlog-ops --bin ringlog` under a file lock.
//! `RINGLOG_BIN` overrides the path.

use std::fs::{self, File, OpenOptions};
use std::net::TcpListener;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The tests share two CPUs with everything else: run them one at a time, also across
/// processes (nextest runs each test in its own process).
static SERIAL: Mutex<()> = Mutex::new(());

struct Serial {
    _g: std::sync::MutexGuard<'static, ()>,
    _f: File,
}

fn serial() -> Serial {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = File::create(
        bench_bin()
            .parent()
            .unwrap()
            .join(".ringlog-bench-tests.lock"),
    )
    .unwrap();
    // SAFETY: flock on a file we own; released when the file is closed.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    Serial { _g: g, _f: f }
}

fn bench_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ringlog-bench"))
}

fn ringlog_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("RINGLOG_BIN") {
        return PathBuf::from(p);
    }
    let dir = bench_bin().parent().unwrap().to_path_buf();
    let bin = dir.join("ringlog");
    let lock = File::create(dir.join(".ringlog-bench-build.lock")).unwrap();
    // SAFETY: flock on a file we own; released when `lock` drops.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "-p", "ringlog-ops", "--bin", "ringlog"])
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
            .status()
            .expect("run cargo build -p ringlog-ops");
        assert!(
            st.success(),
            "cargo build -p ringlog-ops --bin ringlog failed"
        );
    }
    assert!(bin.exists(), "{} missing", bin.display());
    bin
}

struct Broker {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
    log: PathBuf,
}

impl Broker {
    fn start() -> Broker {
        let dir = tempfile::Builder::new()
            .prefix("ringlog-bench-test-")
            .tempdir()
            .unwrap();
        let data = dir.path().join("data");
        fs::create_dir_all(&data).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let log = dir.path().join("broker.log");
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new(ringlog_bin())
            .args(["serve", "--data-dir"])
            .arg(&data)
            .args(["--listen", &addr, "--cores", "1"])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .expect("spawn ringlog serve");
        let mut b = Broker {
            child,
            addr,
            _dir: dir,
            log,
        };
        let ready = format!("ringlog ready on {}", b.addr);
        let t0 = Instant::now();
        loop {
            let text = fs::read_to_string(&b.log).unwrap_or_default();
            if text.contains(&ready) {
                return b;
            }
            if let Some(st) = b.child.try_wait().unwrap() {
                panic!("ringlog serve exited ({st}):\n{text}");
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no ready line in 30 s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs ringlog-bench (killed after `limit`), returns (stdout+stderr, result.json).
fn run_bench(args: &[&str], out: &Path, limit: Duration) -> (String, Value) {
    let log = out.with_extension("log");
    let f = File::create(&log).unwrap();
    let mut child = Command::new(bench_bin())
        .args(args)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .expect("spawn ringlog-bench");
    let t0 = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "ringlog-bench ran over {limit:?}:\n{}",
                fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = fs::read_to_string(&log).unwrap_or_default();
    assert!(st.success(), "ringlog-bench failed ({st}):\n{text}");
    let json: Value =
        serde_json::from_str(&fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    (text, json)
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

fn assert_monotonic(p: &Value, what: &str) {
    let keys = [
        "p50_ms", "p75_ms", "p95_ms", "p99_ms", "p999_ms", "p9999_ms", "max_ms",
    ];
    let vals: Vec<f64> = keys.iter().map(|k| f(p, k)).collect();
    assert!(u(p, "count") > 0, "{what}: empty histogram {p}");
    assert!(vals[0] > 0.0, "{what}: p50 is 0: {p}");
    for w in vals.windows(2) {
        assert!(w[0] <= w[1], "{what}: percentiles not monotonic: {p}");
    }
}

fn assert_counts_match(run: &Value) {
    let c = &run["counts"];
    let sent = u(c, "sent");
    assert!(sent > 0, "nothing sent: {c}");
    assert_eq!(u(c, "acked"), sent, "acked != sent: {c}");
    assert_eq!(u(c, "consumed"), u(c, "expected_consumed"), "{c}");
    assert_eq!(
        u(c, "consumed"),
        sent,
        "consumed != sent (1 subscription): {c}"
    );
    assert_eq!(u(c, "publish_errors"), 0, "{c}");
    assert_eq!(u(c, "consume_errors"), 0, "{c}");
    assert_eq!(u(c, "foreign_records"), 0, "{c}");
}

fn assert_outputs(out: &Path) {
    let html = fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg"), "report.html has no SVG");
    assert!(
        html.contains("<polyline"),
        "report.html has no plotted line"
    );
    assert!(html.contains("99.9%"), "percentile axis missing");
    assert!(!html.contains("<script"), "report must not need scripts");
    assert!(
        html.contains("librdkafka"),
        "driver not named in the report"
    );
    let hlog = fs::read_to_string(out.join("latency.hlog")).unwrap();
    assert!(hlog.contains("Tag=A.r1.publish,"), "hlog:\n{hlog}");
    assert!(hlog.contains("Tag=A.r1.e2e,"), "hlog:\n{hlog}");
    assert!(hlog.contains("HISTF"), "hlog has no encoded histograms");
}

#[test]
fn fixed_rate_run_counts_match() {
    let _s = serial();
    let broker = Broker::start();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("fixed");
    let (text, json) = run_bench(
        &[
            "-b",
            &broker.addr,
            "--rate",
            "400",
            "--partitions",
            "3",
            "--message-size",
            "512",
            "--producers-per-topic",
            "2",
            "--consumers-per-subscription",
            "2",
            "--key-distributor",
            "RANDOM_NANO",
            "--duration-secs",
            "5",
            "--warmup-secs",
            "1",
            // No stats endpoint there: the run must tolerate its absence.
            "--stats-url",
            "http://127.0.0.1:9/metrics",
        ],
        &out,
        Duration::from_secs(150),
    );
    assert!(json["driver"].as_str().unwrap().contains("librdkafka"));
    let run = &json["runs"][0];
    assert_counts_match(run);
    // 6 s of producing at 400/s (warm-up included), give or take scheduling.
    let sent = u(&run["counts"], "sent");
    assert!((1900..=2900).contains(&sent), "sent {sent}\n{text}");
    let s = &run["summary"];
    let rate = f(s, "publish_rate");
    assert!(
        (300.0..=500.0).contains(&rate),
        "publish rate {rate}\n{text}"
    );
    assert_monotonic(&s["publish_latency"], "publish");
    assert_monotonic(&s["end_to_end_latency"], "end-to-end");
    assert_monotonic(
        &json["aggregate"][0]["summary"]["publish_latency"],
        "agg publish",
    );
    // Warm-up is not in the latency figures.
    assert!(u(&s["publish_latency"], "count") < sent);
    let intervals = run["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 5, "{intervals:?}");
    assert!(intervals.iter().any(|i| i["phase"] == "warmup"));
    assert!(
        run["broker_stats"]["error"].is_string(),
        "{}",
        run["broker_stats"]
    );
    assert_outputs(&out);
    drop(broker);
}

#[test]
fn omb_yaml_workload_runs_and_compares() {
    let _s = serial();
    let broker = Broker::start();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("yaml");
    let yaml = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads")
        .join("1-topic-3-partitions-100b-1k-rate.yaml");
    // --compare against the same broker: exercises the A/B path and the ratio table.
    let (text, json) = run_bench(
        &[
            "-b",
            &broker.addr,
            "--compare",
            &broker.addr,
            "--rounds",
            "1",
            "-w",
            yaml.to_str().unwrap(),
            "--duration-secs",
            "4",
            "--warmup-secs",
            "1",
        ],
        &out,
        Duration::from_secs(180),
    );
    assert_eq!(
        json["workload"]["name"], "1 topic / 3 partitions / 100b / 1k msg/s",
        "{text}"
    );
    assert_eq!(json["workload"]["partitionsPerTopic"], 3);
    assert_eq!(json["workload"]["keyDistributor"], "KEY_ROUND_ROBIN");
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "A then B");
    assert_eq!(runs[0]["broker"], "A");
    assert_eq!(runs[1]["broker"], "B");
    for r in runs {
        assert_counts_match(r);
        assert_monotonic(&r["summary"]["publish_latency"], "publish");
        assert_monotonic(&r["summary"]["end_to_end_latency"], "end-to-end");
        let rate = f(&r["summary"], "publish_rate");
        assert!(
            (800.0..=1200.0).contains(&rate),
            "publish rate {rate}\n{text}"
        );
    }
    let cmp = json["comparison"].as_array().expect("comparison table");
    let row = cmp
        .iter()
        .find(|r| r["figure"] == "publish rate (msg/s)")
        .unwrap();
    let ratio = f(row, "ratio");
    assert!(
        (0.8..=1.25).contains(&ratio),
        "same broker, same rate: {row}"
    );
    assert!(text.contains("B/A"), "{text}");
    assert_outputs(&out);
}

#[test]
fn bad_workload_key_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let y = tmp.path().join("w.yaml");
    fs::write(
        &y,
        "name: x\ntopics: 1\npartitionsPerTopic: 1\nmessageSize: 100\nsubscriptionsPerTopic: 1\nproducersPerTopic: 1\nproducerRate: 10\ntestDurationMinutes: 1\nproducerRatee: 5\n",
    )
    .unwrap();
    let o = Command::new(bench_bin())
        .args(["-b", "127.0.0.1:9", "-w"])
        .arg(&y)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown key `producerRatee`"), "{err}");
}

#[test]
fn fsync_probe_alone() {
    // target/ is on the real disk (tmpfs refuses O_DIRECT).
    let dir = bench_bin().parent().unwrap().join("tmp-fsync-probe");
    let o = Command::new(bench_bin())
        .arg("--fsync-probe")
        .arg(&dir)
        .args(["--fsync-count", "50"])
        .output()
        .unwrap();
    let _ = fs::remove_dir_all(&dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(u(&v, "writes"), 50);
    assert_monotonic(&v["fdatasync"], "fdatasync");
}
