//! Fan-out children (issue #6) with a real client: children declared by topic configs receive
//! every parent record with keys and per-key order kept, a delay child is never early and
//! arrives within delay + 1.5 s, refusals get their errors, detach + re-attach replays nothing.
//! Metrics per parent, child and partition appear on `/metrics`. A transactional parent gives
//! its child only committed records.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

#[test]
fn children_receive_every_record_delay_is_never_early_and_refusals_hold() {
    let admin = format!("127.0.0.1:{}", free_port());
    let broker = Broker::start_with(2, &["--metrics-listen", &admin]);
    let out = run_python(
        "fanout_suite.py",
        &[&broker.bootstrap()],
        &[],
        Duration::from_secs(180),
    );
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["copied"], 600);
    assert_eq!(v["delayed"], 600);
    let mut s = TcpStream::connect(&admin).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    for name in [
        "fanout_lag_messages{",
        "fanout_due_lag_seconds{",
        "fanout_committed_total{",
        "fanout_child_dropped_messages{",
    ] {
        assert!(page.contains(name), "{name} on /metrics");
    }
    let committed: f64 = page
        .lines()
        .filter(|l| l.starts_with("fanout_committed_total{") && l.contains("child=\"orders-late\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(
        committed >= 600.0,
        "the delay child's cursors committed every record: {committed}"
    );
}

/// Transactions (issue #14): the child gets exactly the committed records of a parent written
/// by a confluent-kafka transactional producer (a commit, an abort, one left open for a while
/// with plain records behind it, then committed, and a last abort); nothing of the open
/// transaction reaches the child while it is open.
#[test]
fn child_holds_only_committed_records_of_transactions() {
    let mut broker = Broker::start(2);
    let out = run_python(
        "fanout_txn.py",
        &[&broker.bootstrap()],
        &[],
        Duration::from_secs(180),
    );
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["committed"], 80, "{out}");
    assert_eq!(v["child_records"], 80, "{out}");
    assert_eq!(v["aborted"], 55, "{out}");
    assert_eq!(v["held_while_open"], true, "{out}");
    broker.assert_alive();
    broker.terminate();
}

/// SIGKILLs the broker at random moments while a producer writes to the parent; after the
/// restarts the child holds every acknowledged parent record (duplicates allowed, no gaps).
#[test]
fn child_holds_every_acknowledged_parent_record_across_sigkills() {
    use std::io::BufRead;
    let trials: usize = std::env::var("RINGLOG_CRASH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let mut rng = Rng::from_env_or_time("fan-out crash test");
    let mut broker = Broker::start(2);
    create_topic(&broker, "fo", 3, &[]);
    create_topic(&broker, "fo-copy", 2, &[("fanout.parent", "fo")]);
    let mut acked: Vec<String> = Vec::new();
    for trial in 0..trials {
        let mut cmd = python_cmd(
            "crash_producer.py",
            &[&broker.bootstrap(), "fo", &format!("t{trial}"), "2.0"],
        );
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let child = cmd.spawn().expect("producer");
        std::thread::sleep(Duration::from_millis(300 + rng.range(0, 1500)));
        broker.kill();
        broker.restart();
        let out = child.wait_with_output().expect("producer ends");
        for line in out.stdout.lines() {
            let line = line.unwrap();
            if let Some(rest) = line.strip_prefix("ACK ") {
                acked.push(rest.splitn(3, ' ').nth(2).unwrap().to_string());
            }
        }
    }
    assert!(!acked.is_empty(), "the producer got acknowledgements");
    // The cursors resume from their offset files after each restart: wait for the child.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let missing = loop {
        let mut seen = std::collections::HashSet::new();
        for p in 0..2 {
            seen.extend(kcat_read(&broker, "fo-copy", p));
        }
        let missing: Vec<&String> = acked.iter().filter(|v| !seen.contains(*v)).collect();
        if missing.is_empty() || std::time::Instant::now() > deadline {
            break missing.len();
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        missing,
        0,
        "{missing} of {} acknowledged parent records missing from the child",
        acked.len()
    );
}

/// Lazy start-up (issue #13): after a restart that opens partitions on first use only, a
/// fan-out cursor opens its parent itself. Records the parent held before the restart, and
/// its delay child had not received yet, reach the child with no request for the parent.
#[test]
fn a_cursor_opens_its_parent_after_a_restart_with_no_request_for_it() {
    let mut broker = Broker::start(1);
    create_topic(&broker, "lp", 1, &[]);
    create_topic(
        &broker,
        "lp-late",
        1,
        &[("fanout.parent", "lp"), ("fanout.delay.ms", "4000")],
    );
    let records = ["r0", "r1", "r2", "r3", "r4"];
    kcat_write(&broker, "lp", 0, &records);
    assert!(
        kcat_read(&broker, "lp-late", 0).is_empty(),
        "the delay child is still empty before the restart"
    );
    broker.terminate();
    broker.set_extra_args(&["--background-opens-per-core", "0"]);
    broker.restart();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = kcat_read(&broker, "lp-late", 0);
        if got == records {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the delay child holds {got:?}, want {records:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    broker.assert_alive();
}

fn ringlog(args: &[&str]) -> Output {
    let mut c = std::process::Command::new(ringlog_bin());
    c.args(args);
    run_with_timeout(c, None, Duration::from_secs(60))
}

#[test]
fn fanout_cli_attaches_lists_and_detaches() {
    let admin = format!("127.0.0.1:{}", free_port());
    let broker = Broker::start_with(2, &["--metrics-listen", &admin]);
    let bs = broker.bootstrap();
    create_topic(&broker, "src", 2, &[]);
    create_topic(&broker, "dst", 3, &[]);
    let o = ringlog(&[
        "fanout",
        "attach",
        "src",
        "dst",
        "--delay",
        "1s",
        "--brokers",
        &bs,
    ]);
    assert!(o.status.success(), "{}", o.stderr);
    let o = ringlog(&[
        "fanout",
        "list",
        "src",
        "--brokers",
        &bs,
        "--admin",
        &admin,
        "--json",
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", o.stdout));
    assert_eq!(v[0]["child"], "dst");
    assert_eq!(v[0]["delay_ms"], 1000);
    let mut p = std::process::Command::new(kcat());
    p.args(["-b", &bs, "-P", "-t", "src", "-K:"]);
    run_ok(p, Some(b"a:1\nb:2\nc:3\n"), Duration::from_secs(30));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let count = |b: &str| -> usize {
        (0..3)
            .map(|p| {
                let mut c = std::process::Command::new(kcat());
                c.args([
                    "-b",
                    b,
                    "-C",
                    "-t",
                    "dst",
                    "-p",
                    &p.to_string(),
                    "-o",
                    "beginning",
                    "-e",
                    "-q",
                ]);
                run_ok(c, None, Duration::from_secs(30)).lines().count()
            })
            .sum()
    };
    while count(&bs) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "dst received the records"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let table = ringlog(&["fanout", "list", "src", "--brokers", &bs, "--admin", &admin]);
    assert!(
        table.stdout.starts_with("CHILD") && table.stdout.contains("dst"),
        "{}",
        table.stdout
    );
    let o = ringlog(&["fanout", "detach", "src", "dst", "--brokers", &bs]);
    assert!(o.status.success(), "{}", o.stderr);
    let o = ringlog(&["fanout", "list", "src", "--brokers", &bs, "--json"]);
    assert_eq!(o.stdout.trim(), "[]", "detached");
    // Refusals name the problem.
    let o = ringlog(&["fanout", "attach", "nope", "dst", "--brokers", &bs]);
    assert!(
        !o.status.success() && o.stderr.contains("does not exist"),
        "{}",
        o.stderr
    );
    let o = ringlog(&[
        "fanout",
        "attach",
        "src",
        "dst",
        "--delay",
        "soon",
        "--brokers",
        &bs,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("expected a duration"), "{}", o.stderr);
    let o = ringlog(&["fanout", "detach", "src", "dst", "--brokers", &bs]);
    assert!(
        !o.status.success() && o.stderr.contains("not attached"),
        "{}",
        o.stderr
    );
}
