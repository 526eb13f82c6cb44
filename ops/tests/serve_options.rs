//! `ringlog serve` options (issue #8): `--log-requests` dumps decoded requests and responses,
//! `--config FILE` takes every serve flag and broker default, an unknown key is an error that
//! names it, and a second broker on the same port is refused.

mod support;

use std::process::Command;
use std::time::Duration;

use support::*;

#[test]
fn log_requests_dumps_decoded_requests_and_responses() {
    let broker = Broker::start_with(1, &["--log-requests"]);
    let mut l = Command::new(kcat());
    l.args(["-b", &broker.bootstrap(), "-L"]);
    run_ok(l, None, Duration::from_secs(30));
    let log = broker.stderr_text();
    for needle in [
        "ringlog::requests: request",
        "ringlog::requests: response",
        "api=ApiVersions",
        "api=Metadata",
    ] {
        assert!(
            log.contains(needle),
            "log has {needle}:\n{}",
            tail(&log, 3000)
        );
    }
}

/// A client asking for a topic that does not exist, with auto-create off (the default), gets
/// UNKNOWN_TOPIC_OR_PARTITION and the broker log says who asked, for what, and the fix, once
/// per topic a minute however often it asks.
#[test]
fn a_request_for_a_missing_topic_is_logged_with_the_fix_once_a_minute() {
    let mut broker = Broker::start(1);
    for _ in 0..3 {
        let mut l = Command::new(kcat());
        l.args([
            "-b",
            &broker.bootstrap(),
            "-L",
            "-t",
            "not-there",
            "-m",
            "5",
        ])
        .args(["-X", "client.id=quickstart-app"]);
        let out = run_with_timeout(l, None, Duration::from_secs(30));
        assert!(
            out.stdout.contains("Unknown topic") || out.stdout.contains("UNKNOWN_TOPIC"),
            "{}",
            out.stdout
        );
    }
    let log = broker.stderr_text();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("topic 'not-there', which does not exist"))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one line for three requests:\n{}",
        tail(&log, 3000)
    );
    for needle in [
        "quickstart-app",
        "--auto-create-topics",
        "ringlog topic create not-there",
    ] {
        assert!(lines[0].contains(needle), "{needle} in {}", lines[0]);
    }
    broker.assert_alive();
}

fn serve_with_config(toml: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ringlog.toml");
    std::fs::write(&cfg, toml).unwrap();
    let mut cmd = Command::new(ringlog_bin());
    cmd.args(["serve", "--config", cfg.to_str().unwrap()]);
    run_with_timeout(cmd, None, Duration::from_secs(30))
}

#[test]
fn config_file_unknown_key_is_named() {
    let out = serve_with_config("listen = \"127.0.0.1:1\"\nretention-msx = 5\n");
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("retention-msx"),
        "names the key: {}",
        out.stderr
    );
    let out = serve_with_config("cores = \"two\"\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.contains("cores"), "{}", out.stderr);
}

#[test]
fn config_file_settings_apply_and_second_broker_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let metrics = free_port();
    let cfg = dir.path().join("ringlog.toml");
    std::fs::write(
        &cfg,
        format!(
            "data-dir = \"{}\"\nlisten = \"127.0.0.1:{port}\"\ncores = 1\nnum-partitions = 3\nauto-create-topics = true\n\
             metrics-listen = \"127.0.0.1:{metrics}\"\nlog-segment-bytes = 1048576\nlog-retention-ms = 3600000\n\
             group-initial-rebalance-delay-ms = 100\nmax-request-bytes = 1048576\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(ringlog_bin())
        .args(["serve", "--config", cfg.to_str().unwrap(), "--log-requests"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(std::time::Instant::now() < deadline, "broker did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    // auto-create with num-partitions = 3, and the segment default shows in describe.
    let mut p = Command::new(kcat());
    p.args(["-b", &addr, "-P", "-t", "auto"]);
    run_ok(p, Some(b"x\n"), Duration::from_secs(30));
    let mut d = Command::new(ringlog_bin());
    d.args(["topic", "describe", "auto", "--brokers", &addr, "--json"]);
    let v: serde_json::Value =
        serde_json::from_str(&run_ok(d, None, Duration::from_secs(30))).unwrap();
    let text = v.to_string();
    assert_eq!(
        v["partitions"].as_array().map(|a| a.len()),
        Some(3),
        "{text}"
    );
    assert!(
        text.contains("1048576"),
        "log-segment-bytes is the segment.bytes default: {text}"
    );
    // The admin listener from the file is up.
    assert!(std::net::TcpStream::connect(format!("127.0.0.1:{metrics}")).is_ok());
    // A second broker on the same port is refused with a message saying why.
    let mut second = Command::new(ringlog_bin());
    second.args([
        "serve",
        "--data-dir",
        dir.path().join("other").to_str().unwrap(),
        "--listen",
        &addr,
    ]);
    let o = run_with_timeout(second, None, Duration::from_secs(30));
    assert!(!o.status.success(), "second broker must not start");
    assert!(
        o.stderr.contains("already accepts connections"),
        "{}",
        o.stderr
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success(), "clean exit on SIGTERM");
}

/// `storage-io` (issue #21): both paths serve a real produce and consume, the flag reaches
/// every core (the core's own ring counts operations only on `io-uring`, and the tail cache
/// serves the consumer at the tail), and an unknown value is refused naming both choices.
#[test]
fn storage_io_paths_serve_and_an_unknown_one_is_refused() {
    let out = serve_with_config("storage-io = \"aio\"\n");
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("storage-io 'aio'") && out.stderr.contains("io-uring or glommio"),
        "{}",
        out.stderr
    );
    for (path, ring_used) in [("io-uring", true), ("glommio", false)] {
        let admin = format!("127.0.0.1:{}", free_port());
        let b = Broker::start_with(1, &["--storage-io", path, "--metrics-listen", &admin]);
        create_topic(&b, "paths", 1, &[]);
        let lines: String = (0..50).map(|i| format!("m{i}\n")).collect();
        let mut p = Command::new(ringlog_bin());
        p.args(["produce", "paths", "--brokers", &b.bootstrap()])
            .env_remove("RINGLOG_LOG");
        run_ok(p, Some(lines.as_bytes()), Duration::from_secs(30));
        let mut c = Command::new(ringlog_bin());
        c.args([
            "consume",
            "paths",
            "--from-beginning",
            "--exit-at-end",
            "--format",
            "%v",
            "--brokers",
            &b.bootstrap(),
        ])
        .env_remove("RINGLOG_LOG");
        let got = run_ok(c, None, Duration::from_secs(30));
        assert_eq!(got, lines, "{path}: every record reads back in order");
        let raw = http_request(&admin, "GET", "/metrics");
        let value = |name: &str| -> f64 {
            raw.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}{{core=\"0\"}} ")))
                .unwrap_or_else(|| panic!("{path}: no {name} in the scrape"))
                .trim()
                .parse()
                .unwrap()
        };
        let ops = value("ringlog_storage_ring_ops_total");
        assert_eq!(ops > 0.0, ring_used, "{path}: ring operations {ops}");
        assert!(
            value("ringlog_tail_cache_hits_total") > 0.0,
            "{path}: the consumer's reads at the tail came from memory"
        );
    }
}
