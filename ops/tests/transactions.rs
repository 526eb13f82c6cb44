//! Transactions (issue #14) with real clients against `ringlog serve` on two cores: the
//! confluent-kafka suite in `tests/clients/txn_suite.py` (commit and abort over 3 partitions,
//! read_committed against read_uncommitted, consume-transform-produce with
//! send_offsets_to_transaction, fencing by a second instance).

mod support;

use std::time::Duration;
use support::*;

#[test]
fn confluent_kafka_transactions_commit_abort_exactly_once_and_fencing() {
    let mut broker = Broker::start(2);
    let out = run_python(
        "txn_suite.py",
        &[&broker.bootstrap()],
        &[],
        Duration::from_secs(240),
    );
    let summary = out.lines().last().unwrap_or("");
    assert!(
        summary.contains("\"ok\": true"),
        "txn_suite.py: no success summary in output:\n{out}"
    );
    eprintln!("txn_suite.py: {summary}");
    broker.assert_alive();
    broker.terminate();
}

/// Compiles `tests/clients/TxnCheck.java` against the cached Kafka 4.3 jars, once per run.
fn txn_check_classes(classpath: &str) -> std::path::PathBuf {
    let out = target_dir().join("test-java-txn");
    std::fs::create_dir_all(&out).unwrap();
    let mut javac = std::process::Command::new("javac");
    javac
        .args(["-d"])
        .arg(&out)
        .args(["-cp", classpath])
        .arg(clients_dir().join("TxnCheck.java"));
    run_ok(javac, None, Duration::from_secs(180));
    out
}

#[test]
fn java_client_transactions_commit_abort_and_fencing() {
    let classpath = support::java::connect_classpath();
    let classes = txn_check_classes(&classpath);
    let mut broker = Broker::start(2);
    let mut java = std::process::Command::new(support::java::java());
    java.arg("-cp")
        .arg(format!("{classpath}:{}", classes.display()))
        .arg("TxnCheck")
        .arg(broker.bootstrap());
    let out = run_ok(java, None, Duration::from_secs(180));
    assert!(
        out.lines().any(|l| l.starts_with("OK ")),
        "TxnCheck gave no OK line:\n{out}"
    );
    eprintln!("{}", out.lines().find(|l| l.starts_with("OK ")).unwrap());
    broker.assert_alive();
    broker.terminate();
}
