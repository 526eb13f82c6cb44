//! The barrier-aligned group runner (`ringlog-streams`, issue #16, seed 003) against the real
//! broker, run as its example word count (`streams/examples/word_count.rs`) in a process of
//! its own: every barrier snapshot is exactly the counts of the records below its cut, two
//! replays from one cut give byte-identical state, `restore_to_latest_cut` after a SIGKILL of
//! the runner reaches the same final counts, and the transactional runner's outputs are
//! exactly once across a SIGKILL.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use streams::{BarrierCut, CutReader, FileStateStore, StateStore, BARRIER_STATE_PARTITIONS};
use support::*;

const INPUTS: [&str; 3] = ["words-a", "words-b", "words-c"];
const OUTPUT: &str = "counts";
const PARTITIONS: i32 = 4;
const BARRIER_GROUP: &str = "wc";
/// How long a runner may take to read everything and go idle.
const RUNNER_TIMEOUT: Duration = Duration::from_secs(180);

/// The example binary, built once per test process (a no-op when cargo built it already).
fn word_count_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let mut c = Command::new(env!("CARGO"));
            c.args([
                "build",
                "--quiet",
                "-p",
                "ringlog-streams",
                "--example",
                "word_count",
            ])
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
            run_ok(c, None, Duration::from_secs(900));
            ringlog_bin()
                .parent()
                .expect("target/<profile>")
                .join("examples/word_count")
        })
        .clone()
}

/// A word-count runner process; its stdout lines are collected as they come.
struct Runner {
    child: Option<Child>,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl Runner {
    fn start(broker: &Broker, group: &str, state: &Path, extra: &[&str]) -> Runner {
        let dir = tempfile::tempdir().unwrap();
        let stderr = dir.path().join("stderr");
        let inputs = INPUTS.join(",");
        let mut child = Command::new(word_count_bin())
            .args(["--brokers", &broker.bootstrap(), "--inputs", &inputs])
            .args([
                "--output",
                OUTPUT,
                "--group",
                group,
                "--barrier-group",
                BARRIER_GROUP,
            ])
            .arg("--state-dir")
            .arg(state)
            .args(["--session-timeout-ms", "3000"])
            .args(extra)
            .env("RUST_LOG", "streams=info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn word_count");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Runner {
            child: Some(child),
            lines,
            stderr,
            _dir: dir,
        }
    }

    fn output(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            self.lines.lock().unwrap().join("\n"),
            tail(
                &std::fs::read_to_string(&self.stderr).unwrap_or_default(),
                20_000
            )
        )
    }

    /// The epochs of the barriers it committed.
    fn barriers(&self) -> Vec<i64> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.strip_prefix("barrier ")?.parse().ok())
            .collect()
    }

    fn wait_for_barriers(&self, n: usize) {
        let start = Instant::now();
        while self.barriers().len() < n {
            assert!(
                start.elapsed() < RUNNER_TIMEOUT,
                "no {n} barriers:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for it to exit (it was started with --exit-when-idle-ms): its `done` count.
    fn wait(&mut self) -> usize {
        let mut child = self.child.take().expect("running");
        let Some(status) = wait_child(&mut child, RUNNER_TIMEOUT) else {
            panic!("runner still running:\n{}", self.output());
        };
        // The reader thread gets the last lines once the pipe closes.
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            status.success(),
            "runner failed: {status}\n{}",
            self.output()
        );
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .find_map(|l| l.strip_prefix("done ")?.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no done line:\n{}", lines.join("\n")))
    }

    fn sigkill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: plain kill(2) on our own child's pid, not yet reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
            let _ = c.wait();
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.sigkill();
    }
}

/// A broker with the input topics, the output topic and a barrier group cutting the inputs
/// every second.
fn broker_with_word_topics() -> Broker {
    let broker = Broker::start(2);
    for t in INPUTS.iter().chain([&OUTPUT]) {
        create_topic(&broker, t, PARTITIONS as u32, &[]);
    }
    let mut c = Command::new(ringlog_bin());
    c.args([
        "barrier",
        "define",
        BARRIER_GROUP,
        "--topics",
        &INPUTS.join(","),
    ])
    .args(["--interval", "1s", "--retained-cuts", "1000"])
    .args(["--brokers", &broker.bootstrap()]);
    run_ok(c, None, Duration::from_secs(60));
    broker
}

/// The words of input record `i` of partition `p`: each word belongs to one task, so that
/// a word's outputs are one task's running count.
fn sentence(p: i32, i: usize) -> String {
    (0..3)
        .map(|j| format!("p{p}w{}", (i * 7 + j) % 11))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Produces records `first..first + per_partition` into every partition of every input, in
/// `batches` batches 100 ms apart (a steady stream that cuts fall inside), acks=all.
fn produce_words(bootstrap: &str, first: usize, per_partition: usize, batches: usize) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let per_batch = per_partition.div_ceil(batches);
    for b in 0..batches {
        let lo = first + b * per_batch;
        let hi = (lo + per_batch).min(first + per_partition);
        for i in lo..hi {
            for t in INPUTS {
                for p in 0..PARTITIONS {
                    let value = sentence(p, i);
                    let mut r = BaseRecord::<[u8], [u8]>::to(t)
                        .payload(value.as_bytes())
                        .partition(p);
                    while let Err((e, back)) = producer.send(r) {
                        assert!(
                            matches!(
                                e,
                                rdkafka::error::KafkaError::MessageProduction(
                                    rdkafka::types::RDKafkaErrorCode::QueueFull
                                )
                            ),
                            "{e}"
                        );
                        producer.poll(Duration::from_millis(10));
                        r = back;
                    }
                    producer.poll(Duration::ZERO);
                }
            }
        }
        producer.flush(Duration::from_secs(60)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every record of some topics: (topic, partition) → [(offset, key, value)].
type Inputs = BTreeMap<(String, i32), Vec<(i64, String, String)>>;

fn read_partitions(broker: &Broker, topics: &[&str], read_committed: bool) -> Inputs {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "streams-test-reader")
        .set("enable.auto.commit", "false")
        .set(
            "isolation.level",
            if read_committed {
                "read_committed"
            } else {
                "read_uncommitted"
            },
        )
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for t in topics {
        for p in 0..PARTITIONS {
            tpl.add_partition_offset(t, p, Offset::Beginning).unwrap();
            let (_, high) = consumer
                .fetch_watermarks(t, p, Duration::from_secs(10))
                .unwrap();
            ends.insert((t.to_string(), p), high);
        }
    }
    consumer.assign(&tpl).unwrap();
    let mut out: Inputs = ends.keys().map(|k| (k.clone(), Vec::new())).collect();
    let start = Instant::now();
    let mut next: BTreeMap<(String, i32), i64> = ends.keys().map(|k| (k.clone(), 0)).collect();
    while next.iter().any(|(k, n)| *n < ends[k]) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "reading {topics:?}"
        );
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let k = (m.topic().to_string(), m.partition());
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
            let v = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
            out.get_mut(&k).unwrap().push((m.offset(), key, v));
            next.insert(k, m.offset() + 1);
        } else if let Ok(pos) = consumer.position() {
            // Past transaction markers and aborted records nothing is handed out.
            for e in pos.elements() {
                if let Offset::Offset(o) = e.offset() {
                    let k = (e.topic().to_string(), e.partition());
                    let n = next.get_mut(&k).unwrap();
                    *n = (*n).max(o);
                }
            }
        }
    }
    out
}

/// Task P's snapshot entries (the example's `word:<w>` → u64 big-endian) after the records
/// of partition P of every input below `below` (every record without a bound).
fn counts_of(
    inputs: &Inputs,
    p: i32,
    below: Option<&BTreeMap<(String, i32), i64>>,
) -> BTreeMap<String, Vec<u8>> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for ((t, part), records) in inputs {
        if *part != p {
            continue;
        }
        let limit = below.map_or(i64::MAX, |b| b[&(t.clone(), p)]);
        for (_, _, v) in records.iter().filter(|(o, _, _)| *o < limit) {
            for w in v.split_whitespace() {
                *counts.entry(w.to_string()).or_default() += 1;
            }
        }
    }
    counts
        .into_iter()
        .map(|(w, n)| (format!("word:{w}"), n.to_be_bytes().to_vec()))
        .collect()
}

fn cuts(broker: &Broker) -> BTreeMap<i64, BarrierCut> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "streams-test-cuts")
        .create()
        .unwrap();
    let mut reader = CutReader::new(consumer, BARRIER_STATE_PARTITIONS as i32)
        .unwrap()
        .with_poll_timeout(Duration::from_secs(30));
    reader
        .complete_cuts_after(BARRIER_GROUP, 0)
        .unwrap()
        .into_iter()
        .map(|c| (c.epoch, c))
        .collect()
}

fn dump(dir: &Path) -> BTreeMap<i32, BTreeMap<String, Vec<u8>>> {
    let store = FileStateStore::new(dir);
    (0..PARTITIONS)
        .map(|p| (p, store.load(p, 0).unwrap()))
        .collect()
}

fn expected_final(inputs: &Inputs) -> BTreeMap<i32, BTreeMap<String, Vec<u8>>> {
    (0..PARTITIONS)
        .map(|p| (p, counts_of(inputs, p, None)))
        .collect()
}

/// The options of a runner that stops once idle and dumps its final state to `dir`.
fn idle_then_dump(dir: &Path) -> [&str; 4] {
    [
        "--exit-when-idle-ms",
        "4000",
        "--dump-dir",
        dir.to_str().expect("a UTF-8 temp path"),
    ]
}

fn copy_dir(from: &Path, to: &Path) {
    for e in walk(from) {
        let rel = e.strip_prefix(from).unwrap();
        std::fs::create_dir_all(to.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&e, to.join(rel)).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn barrier_snapshots_are_the_counts_below_each_cut_and_two_replays_from_a_cut_are_identical() {
    let broker = broker_with_word_topics();
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("state");
    let dump_dir = work.path().join("dump");
    let mut runner = Runner::start(&broker, "wc-app", &state, &idle_then_dump(&dump_dir));
    produce_words(&broker.bootstrap(), 0, 600, 40);
    let ran = runner.wait();
    let inputs = read_partitions(&broker, &INPUTS, false);
    let total: usize = inputs.values().map(Vec::len).sum();
    assert_eq!(ran, total, "every input record ran once");
    assert_eq!(dump(&dump_dir), expected_final(&inputs));

    // Every barrier the runner committed saved, per task, exactly the counts of the
    // records below the cut; some of those cuts fell in the middle of the input.
    let cuts = cuts(&broker);
    let store = FileStateStore::new(&state);
    let mut mid_stream = Vec::new();
    for epoch in runner.barriers() {
        let cut = &cuts[&epoch];
        for p in 0..PARTITIONS {
            assert_eq!(
                store.load(p, epoch).unwrap(),
                counts_of(&inputs, p, Some(&cut.offsets)),
                "task {p}'s snapshot at epoch {epoch} (cut {:?})",
                cut.offsets
            );
        }
        let inside = cut
            .offsets
            .iter()
            .any(|(tp, o)| *o > 0 && inputs[tp].last().is_some_and(|(last, _, _)| o < last));
        if inside {
            mid_stream.push(epoch);
        }
    }
    assert!(
        mid_stream.len() >= 2,
        "cuts fell inside the input: {mid_stream:?} of {:?}",
        runner.barriers()
    );

    // Two replays from one mid-stream cut, each in a group of its own over a copy of the
    // snapshots: byte-identical final states, the same as the first run's.
    let n = mid_stream[mid_stream.len() / 2];
    let mut finals = Vec::new();
    for replay in ["replay-1", "replay-2"] {
        let dir = work.path().join(replay);
        copy_dir(&state, &dir.join("state"));
        let dump_dir = dir.join("dump");
        let mut r = Runner::start(
            &broker,
            replay,
            &dir.join("state"),
            &[
                &["--restore", &n.to_string()][..],
                &idle_then_dump(&dump_dir),
            ]
            .concat(),
        );
        let replayed = r.wait();
        let below: usize = inputs
            .iter()
            .map(|(tp, rs)| {
                rs.iter()
                    .filter(|(o, _, _)| *o < cuts[&n].offsets[tp])
                    .count()
            })
            .sum();
        assert_eq!(
            replayed,
            total - below,
            "a replay runs the records from cut {n} on"
        );
        assert!(
            r.output().contains(&format!("restored {n}")),
            "{}",
            r.output()
        );
        let bytes: Vec<Vec<u8>> = (0..PARTITIONS)
            .map(|p| std::fs::read(dump_dir.join(format!("p{p}/e0.snapshot"))).unwrap())
            .collect();
        finals.push(bytes);
    }
    assert_eq!(
        finals[0], finals[1],
        "two replays from cut {n}: byte-identical"
    );
    let first: Vec<Vec<u8>> = (0..PARTITIONS)
        .map(|p| std::fs::read(dump_dir.join(format!("p{p}/e0.snapshot"))).unwrap())
        .collect();
    assert_eq!(finals[0], first, "the same as the first run's final state");
}

/// Streams records from `first` on into every partition of every input, 15 per partition
/// every 100 ms or so, until `stop`; the next record's index.
fn produce_until(bootstrap: &str, first: usize, stop: &AtomicBool) -> usize {
    let mut next = first;
    while !stop.load(Ordering::SeqCst) {
        produce_words(bootstrap, next, 15, 1);
        next += 15;
    }
    next
}

/// SIGKILLs `runner` once it committed two barriers, while records still flow (so that it
/// dies between cuts), then streams 300 more records into every input partition.
fn kill_mid_stream(broker: &Broker, runner: &mut Runner) {
    let bootstrap = broker.bootstrap();
    let stop = AtomicBool::new(false);
    let next = std::thread::scope(|s| {
        let producing = s.spawn(|| produce_until(&bootstrap, 0, &stop));
        runner.wait_for_barriers(2);
        runner.sigkill();
        stop.store(true, Ordering::SeqCst);
        producing.join().unwrap()
    });
    produce_words(&bootstrap, next, 300, 10);
}

/// A runner (with `extra` options) SIGKILLed mid-stream, then a new one with
/// `--restore latest` over the same state that runs to the end: its dump directory.
fn killed_then_restored(broker: &Broker, work: &Path, extra: &[&str]) -> PathBuf {
    let state = work.join("state");
    let mut runner = Runner::start(broker, "wc-app", &state, extra);
    kill_mid_stream(broker, &mut runner);
    let dump_dir = work.join("dump");
    let mut again = Runner::start(
        broker,
        "wc-app",
        &state,
        &[extra, &["--restore", "latest"], &idle_then_dump(&dump_dir)].concat(),
    );
    again.wait();
    assert!(again.output().contains("restored "), "{}", again.output());
    dump_dir
}

#[test]
fn restore_to_latest_cut_after_a_sigkill_of_the_runner_reaches_the_same_counts() {
    let broker = broker_with_word_topics();
    let work = tempfile::tempdir().unwrap();
    let dump_dir = killed_then_restored(&broker, work.path(), &[]);
    let inputs = read_partitions(&broker, &INPUTS, false);
    assert_eq!(dump(&dump_dir), expected_final(&inputs));
}

#[test]
fn the_transactional_runner_outputs_every_count_exactly_once_across_a_sigkill() {
    let broker = broker_with_word_topics();
    let work = tempfile::tempdir().unwrap();
    let dump_dir = killed_then_restored(&broker, work.path(), &["--transactional-id", "wc-txn"]);
    let inputs = read_partitions(&broker, &INPUTS, false);
    assert_eq!(dump(&dump_dir), expected_final(&inputs));
    // Read committed, each word's outputs are its running count 1, 2, ..., n, each once.
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for records in read_partitions(&broker, &[OUTPUT], true).values() {
        for (_, word, count) in records {
            seen.entry(word.clone())
                .or_default()
                .push(count.parse().unwrap());
        }
    }
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for records in inputs.values() {
        for (_, _, v) in records {
            for w in v.split_whitespace() {
                *expected.entry(w.to_string()).or_default() += 1;
            }
        }
    }
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (word, n) in &expected {
        assert_eq!(
            seen[word],
            (1..=*n).collect::<Vec<_>>(),
            "{word}'s counts, exactly once"
        );
    }
}

#[test]
fn a_second_runner_joining_mid_stream_takes_tasks_over_with_their_rebalance_snapshots() {
    let broker = broker_with_word_topics();
    let work = tempfile::tempdir().unwrap();
    // Runners of one application share their state store (the rebalance snapshots move the
    // tasks' state from one to the other).
    let state = work.path().join("state");
    let (dump_a, dump_b) = (work.path().join("dump-a"), work.path().join("dump-b"));
    let bootstrap = broker.bootstrap();
    let stop = AtomicBool::new(false);
    let (mut a, mut b) = std::thread::scope(|s| {
        let producing = s.spawn(|| produce_until(&bootstrap, 0, &stop));
        let a = Runner::start(&broker, "wc-app", &state, &idle_then_dump(&dump_a));
        a.wait_for_barriers(2);
        // The second runner joins while records flow, and commits two barriers of its own.
        let b = Runner::start(&broker, "wc-app", &state, &idle_then_dump(&dump_b));
        b.wait_for_barriers(2);
        stop.store(true, Ordering::SeqCst);
        producing.join().unwrap();
        (a, b)
    });
    a.wait();
    b.wait();
    let inputs = read_partitions(&broker, &INPUTS, false);
    let expected = expected_final(&inputs);
    // Every task is in a dump, and every dump of a task has its exact final counts.
    let store_a = FileStateStore::new(&dump_a);
    let store_b = FileStateStore::new(&dump_b);
    for p in 0..PARTITIONS {
        let mut dumped = 0;
        for (dir, store) in [(&dump_a, &store_a), (&dump_b, &store_b)] {
            if dir.join(format!("p{p}/e0.snapshot")).exists() {
                dumped += 1;
                assert!(
                    store.load(p, 0).unwrap() == expected[&p],
                    "task {p} in {dir:?}\nA:\n{}\nB:\n{}",
                    a.output(),
                    b.output()
                );
            }
        }
        assert!(dumped >= 1, "task {p} was dumped by a runner");
    }
    assert!(a.output().contains("partitions revoked"), "{}", a.output());
    assert!(
        b.output().contains("rebalance snapshot"),
        "the joining runner took a task over from its rebalance snapshot:\n{}",
        b.output()
    );
}
