//! Fan-out children (issue #6) with a real client: children declared by topic configs receive
//! every parent record with keys and per-key order kept, a delay child is never early and
//! arrives within delay + 1.5 s, refusals get their errors, detach + re-attach replays nothing.
//! Metrics per parent, child and partition appear on `/metrics`.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use support::*;

#[test]
fn children_receive_every_record_delay_is_never_early_and_refusals_hold() {
    let admin = format!(
        "127.0.0.1:{}",
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    );
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
