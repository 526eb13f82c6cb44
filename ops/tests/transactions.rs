//! Transactions (issue #14) with real clients against `ringlog serve` on two cores: the
//! confluent-kafka suite in `tests/clients/txn_suite.py` (commit and abort over 3 partitions,
//! read_committed against read_uncommitted, consume-transform-produce with
//! send_offsets_to_transaction, fencing by a second instance), kafka-python's and the Java
//! client's commit/abort (and the Java client's ProducerFencedException), crash tests (a
//! producer SIGKILLed mid-transaction, the broker SIGKILLed mid-commit), and the coordinator's
//! refusals at the wire level.

mod support;

use std::collections::BTreeMap;
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

#[test]
fn kafka_python_transactions_commit_and_abort() {
    let mut broker = Broker::start(2);
    let out = run_python(
        "kafka_python_txn.py",
        &[&broker.bootstrap()],
        &[],
        Duration::from_secs(120),
    );
    let summary = out.lines().last().unwrap_or("");
    assert!(
        summary.contains("\"ok\": true"),
        "kafka_python_txn.py: no success summary in output:\n{out}"
    );
    broker.assert_alive();
    broker.terminate();
}

#[test]
fn java_client_transactions_commit_abort_and_fencing() {
    let mut broker = Broker::start(2);
    let ok = support::java::run_check("TxnCheck", &broker.bootstrap());
    eprintln!("{ok}");
    broker.assert_alive();
    broker.terminate();
}

const CRASH_PARTITIONS: u32 = 3;
const CRASH_RECORDS_PER_TXN: usize = 9;
/// The crash tests' `transaction.timeout.ms`: short, so an abandoned transaction is aborted
/// soon.
const CRASH_TXN_TIMEOUT_MS: u64 = 3_000;

/// A transactional producer process (`txn_loop_producer.py`) whose stdout lines are collected
/// by a thread; killed on drop.
struct LoopProducer {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl LoopProducer {
    fn start(broker: &Broker, topic: &str, tid: &str, hang_after: Option<usize>) -> LoopProducer {
        let timeout = CRASH_TXN_TIMEOUT_MS.to_string();
        let parts = CRASH_PARTITIONS.to_string();
        let per = CRASH_RECORDS_PER_TXN.to_string();
        let hang = hang_after.map(|h| h.to_string());
        let mut args = vec![
            broker.bootstrap(),
            topic.to_string(),
            tid.to_string(),
            parts,
            per,
            timeout,
        ];
        args.extend(hang);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = python_cmd("txn_loop_producer.py", &args);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .stdin(std::process::Stdio::null());
        let mut child = cmd.spawn().expect("spawn txn_loop_producer.py");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        LoopProducer {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// Waits (at most 60 s) for a line starting with `prefix`.
    fn wait_for(&mut self, prefix: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(l) = self.seen.iter().find(|l| l.starts_with(prefix)) {
                return l.clone();
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(
                !left.is_zero(),
                "no {prefix:?} line in 60 s: {:?}",
                self.seen
            );
            if let Ok(l) = self
                .lines
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                self.seen.push(l);
            }
        }
    }

    /// SIGKILL; returns every line it printed.
    fn kill(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(50));
        self.seen.extend(self.lines.try_iter());
        std::mem::take(&mut self.seen)
    }

    /// The transactions whose commit was acknowledged, as "TID:TXN".
    fn committed(lines: &[String], tid: &str) -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix("COMMITTED "))
            .map(|n| format!("{tid}:{n}"))
            .collect()
    }
}

impl Drop for LoopProducer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `txn_verify.py` saw: seconds until the topic was stable, records per transaction.
fn verify_txns(broker: &Broker, topic: &str, wait_s: u64) -> (f64, BTreeMap<String, u64>) {
    let out = run_python(
        "txn_verify.py",
        &[
            &broker.bootstrap(),
            topic,
            &CRASH_PARTITIONS.to_string(),
            &wait_s.to_string(),
        ],
        &[],
        Duration::from_secs(wait_s + 90),
    );
    let line = out.lines().last().unwrap_or("").to_string();
    let v: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("txn_verify.py output {line:?}: {e}"));
    let counts = v["counts"]
        .as_object()
        .expect("counts")
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect();
    (v["stable_after_s"].as_f64().unwrap(), counts)
}

#[test]
fn a_producer_killed_mid_transaction_is_aborted_after_its_timeout() {
    let mut broker = Broker::start(2);
    let topic = "txn-producer-crash";
    create_topic(&broker, topic, CRASH_PARTITIONS, &[]);
    let mut p = LoopProducer::start(&broker, topic, "crashy", Some(3));
    p.wait_for("HANGING ");
    let lines = p.kill();
    let committed = LoopProducer::committed(&lines, "crashy");
    assert_eq!(
        committed.len(),
        3,
        "three commits before the hang: {lines:?}"
    );
    // The abandoned transaction holds read_committed readers back until its timeout aborts it
    // (the coordinator's tick), and no longer than that plus the test's own slack.
    let (stable_after_s, counts) = verify_txns(&broker, topic, 30);
    assert!(
        stable_after_s <= (CRASH_TXN_TIMEOUT_MS as f64 / 1e3) + 10.0,
        "read_committed was held back {stable_after_s} s by a transaction whose timeout is {CRASH_TXN_TIMEOUT_MS} ms"
    );
    let want: BTreeMap<String, u64> = committed
        .iter()
        .map(|t| (t.clone(), CRASH_RECORDS_PER_TXN as u64))
        .collect();
    assert_eq!(
        counts, want,
        "read_committed sees the committed transactions only"
    );
    // `ringlog consume --exit-at-end` (read_uncommitted, as Kafka's console consumer) reads
    // past the markers to the end: all four transactions' records, the aborted one included.
    let mut consume = std::process::Command::new(ringlog_bin());
    consume.args([
        "consume",
        topic,
        "--from-beginning",
        "--exit-at-end",
        "--brokers",
    ]);
    consume.arg(broker.bootstrap());
    let out = run_ok(consume, None, Duration::from_secs(30));
    assert_eq!(
        out.lines().count(),
        4 * CRASH_RECORDS_PER_TXN,
        "consume --exit-at-end output:\n{out}"
    );
    broker.assert_alive();
    broker.terminate();
}

#[test]
fn a_broker_killed_mid_commit_leaves_every_transaction_whole_or_absent() {
    let trials: usize = std::env::var("RINGLOG_CRASH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let mut rng = Rng::from_env_or_time("transaction crash test");
    let mut broker = Broker::start(2);
    let topic = "txn-broker-crash";
    create_topic(&broker, topic, CRASH_PARTITIONS, &[]);
    let mut acknowledged: Vec<String> = Vec::new();
    for trial in 0..trials {
        let tid = format!("t{trial}");
        let mut p = LoopProducer::start(&broker, topic, &tid, None);
        p.wait_for("COMMITTED ");
        std::thread::sleep(Duration::from_millis(rng.range(0, 600)));
        broker.kill();
        let lines = p.kill();
        acknowledged.extend(LoopProducer::committed(&lines, &tid));
        broker.restart();
        let (stable_after_s, counts) = verify_txns(&broker, topic, 30);
        for (txn, n) in &counts {
            assert_eq!(
                *n, CRASH_RECORDS_PER_TXN as u64,
                "trial {trial}: transaction {txn} is torn: {n} of {CRASH_RECORDS_PER_TXN} records visible"
            );
        }
        for txn in &acknowledged {
            assert!(
                counts.contains_key(txn),
                "trial {trial}: acknowledged transaction {txn} is gone after the restart"
            );
        }
        eprintln!(
            "trial {trial}: {} transactions visible, {} acknowledged so far, stable after {stable_after_s} s",
            counts.len(),
            acknowledged.len()
        );
        broker.assert_alive();
    }
    broker.terminate();
}

mod wire_level {
    //! The coordinator's answers to requests a well-behaved client does not send, at the wire
    //! level: each gets Kafka's error code, and an idle transactional id is forgotten after
    //! `transactional-id-expiration-ms`.

    use super::support::wire::{call, produce_req};
    use super::support::*;
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;
    use std::net::TcpStream;
    use std::time::Duration;

    const INVALID_TXN_STATE: i16 = 48;
    const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
    const PRODUCER_FENCED: i16 = 90;
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

    fn s(x: &str) -> StrBytes {
        StrBytes::from_string(x.to_string())
    }

    fn init(c: &mut TcpStream, tid: &str, timeout_ms: i32) -> InitProducerIdResponse {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(s(tid))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        call(c, 22, 4, 1, &req)
    }

    fn add(c: &mut TcpStream, tid: &str, pid: i64, epoch: i16, topic: &str, p: i32) -> i16 {
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(s(tid)))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![p])]);
        let r: AddPartitionsToTxnResponse = call(c, 24, 3, 2, &req);
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    }

    fn end(c: &mut TcpStream, tid: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
        let req = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(s(tid)))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit);
        let r: EndTxnResponse = call(c, 26, 3, 3, &req);
        r.error_code
    }

    fn describe(c: &mut TcpStream, tid: &str) -> (i16, String) {
        let req = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s(tid))]);
        let r: DescribeTransactionsResponse = call(c, 65, 0, 4, &req);
        let t = &r.transaction_states[0];
        (t.error_code, t.transaction_state.to_string())
    }

    fn produce_txn(c: &mut TcpStream, topic: &str, pid: i64, epoch: i16, seq: i32) -> i16 {
        let batch = engine::batch_encode::encode_transactional(
            [engine::batch_encode::NewRecord {
                value: Some(bytes::Bytes::from_static(b"v")),
                timestamp_ms: 1,
                ..Default::default()
            }],
            engine::batch_encode::ProducerSeq {
                producer_id: pid,
                epoch,
                base_sequence: seq,
            },
        );
        let req = produce_req(topic, 0, bytes::Bytes::from(batch))
            .with_transactional_id(Some(TransactionalId(s("w"))));
        let r: ProduceResponse = call(c, 0, 9, 5, &req);
        r.responses[0].partition_responses[0].error_code
    }

    #[test]
    fn refusals_carry_kafkas_codes_and_idle_ids_expire() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("ringlog.toml");
        std::fs::write(
            &cfg,
            "transactional-id-expiration-ms = 1500\ntransaction-max-timeout-ms = 60000\n",
        )
        .unwrap();
        let mut broker = Broker::start_with(2, &["--config", cfg.to_str().unwrap()]);
        create_topic(&broker, "w", 1, &[]);
        let mut c = TcpStream::connect(broker.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();

        let r = init(&mut c, "w", 120_000);
        assert_eq!(
            r.error_code, INVALID_TRANSACTION_TIMEOUT,
            "timeout above the broker's max"
        );
        let r = init(&mut c, "w", 30_000);
        assert_eq!(r.error_code, 0);
        let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
        assert_eq!(epoch, 0);

        // A transactional batch to a partition not in the transaction is refused.
        assert_eq!(produce_txn(&mut c, "w", pid, epoch, 0), INVALID_TXN_STATE);
        assert_eq!(
            add(&mut c, "w", pid, epoch, "nope", 0),
            UNKNOWN_TOPIC_OR_PARTITION
        );
        assert_eq!(
            add(&mut c, "w", pid + 1, epoch, "w", 0),
            INVALID_PRODUCER_ID_MAPPING
        );
        assert_eq!(
            end(&mut c, "w", pid, epoch, true),
            INVALID_TXN_STATE,
            "nothing open"
        );
        assert_eq!(add(&mut c, "w", pid, epoch, "w", 0), 0);
        assert_eq!(describe(&mut c, "w"), (0, "Ongoing".to_string()));
        assert_eq!(produce_txn(&mut c, "w", pid, epoch, 0), 0);

        // A second instance fences the first: its open transaction is aborted.
        let r2 = init(&mut c, "w", 30_000);
        assert_eq!((r2.error_code, r2.producer_id.0), (0, pid));
        assert!(r2.producer_epoch > epoch);
        assert_eq!(end(&mut c, "w", pid, epoch, true), PRODUCER_FENCED);
        assert_ne!(
            produce_txn(&mut c, "w", pid, epoch, 1),
            0,
            "the old epoch writes no more"
        );
        assert_eq!(describe(&mut c, "w"), (0, "Empty".to_string()));

        // Idle past transactional-id-expiration-ms: forgotten.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while describe(&mut c, "w").0 != TRANSACTIONAL_ID_NOT_FOUND {
            assert!(
                std::time::Instant::now() < deadline,
                "the idle id never expired"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        broker.assert_alive();
        broker.terminate();
    }
}
