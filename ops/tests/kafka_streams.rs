//! Apache Kafka Streams 4.4, the genuine Java library, unchanged against ringlog and against
//! the Kafka 4.4 peer: a word count with `processing.guarantee=exactly_once_v2` and a state
//! store backed by a compacted changelog (`tests/clients/StreamsCheck.java`).
//!
//! The scenario: a first run counts 2,000 lines and stops; 10,000 more lines; a second run is
//! SIGKILLed while it counts them; a third run, with an empty state directory, restores its
//! store from the changelog and finishes. The output, read committed, must then hold every
//! word's counts exactly once: 1, 2, … its count, no repeat and no gap, which a lost or doubled
//! transaction, or a store restored wrong, would break.
//!
//! With `group.protocol=streams` (KIP-1071, on by default in Kafka 4.4) the same scenario runs
//! against the peer; ringlog has no streams groups yet, and the test checks that the
//! application says so (the difference `frameworks.kafka-streams.group-protocol-streams` in
//! `docs/kafka-differences.md`).

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::java::JavaCheck;
use support::peer::{listed_differences, KafkaPeer};
use support::*;

/// Lines counted by the first run, then by all runs.
const FIRST_LINES: &str = "2000";
const ALL_LINES: &str = "12000";
/// The words counted (in the committed output) before the second run is killed: past the
/// first run's 6,000 (three words a line), so the killed run has committed work of its own.
const KILL_AFTER_WORDS_COUNTED: u64 = 9_000;
/// How long the second run may take to get there.
const KILL_WAIT: Duration = Duration::from_secs(150);
/// The difference ringlog has with `group.protocol=streams`.
const STREAMS_PROTOCOL_DIFFERENCE: &str = "frameworks.kafka-streams.group-protocol-streams";

struct Phases<'a> {
    check: JavaCheck,
    bootstrap: String,
    protocol: &'a str,
    state: tempfile::TempDir,
}

impl Phases<'_> {
    fn args<'s>(&'s self, rest: &[&'s str]) -> Vec<&'s str> {
        let mut a = vec![self.bootstrap.as_str(), self.protocol];
        a.extend_from_slice(rest);
        a
    }

    fn run(&self, rest: &[&str]) -> String {
        self.check.run(&self.args(rest))
    }

    fn state_dir(&self, name: &str) -> String {
        self.state.path().join(name).display().to_string()
    }
}

/// The whole scenario against `broker`; returns the third run's OK line.
fn word_count_exactly_once(broker: &mut dyn BrokerUnderTest, protocol: &str) -> String {
    let t0 = Instant::now();
    let p = Phases {
        check: JavaCheck::compile("StreamsCheck"),
        bootstrap: broker.bootstrap(),
        protocol,
        state: tempfile::tempdir().unwrap(),
    };
    p.run(&["setup"]);
    p.run(&["produce", "0", FIRST_LINES]);
    let first = p.run(&["run", &p.state_dir("first"), FIRST_LINES]);
    eprintln!("{}: first run {first} ({:?})", broker.kind(), t0.elapsed());
    p.run(&["produce", FIRST_LINES, ALL_LINES]);

    // The second run, SIGKILLed once its committed output has passed the first run's.
    let mut child = ChildGuard(
        p.check
            .command(&p.args(&["run", &p.state_dir("second"), ALL_LINES]))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn java"),
    );
    let (tx, rx) = mpsc::channel();
    let stdout = child.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + KILL_WAIT;
    let mut last = String::new();
    loop {
        broker.assert_alive();
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(line) => {
                let counted = line
                    .strip_prefix("PROGRESS ")
                    .and_then(|n| n.parse::<u64>().ok());
                if counted.is_some_and(|n| n >= KILL_AFTER_WORDS_COUNTED) {
                    break;
                }
                assert!(
                    !line.starts_with("OK "),
                    "the second run finished before it could be killed: {line}"
                );
                last = line;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the second run exited before it was killed; last line: {last}")
            }
        }
        assert!(
            Instant::now() < deadline,
            "the second run counted fewer than {KILL_AFTER_WORDS_COUNTED} words in {KILL_WAIT:?}; \
             last line: {last}\n--- {} log ---\n{}",
            broker.kind(),
            broker.log_tail()
        );
    }
    // SAFETY: kill(2) on our own child's pid, not yet reaped (ChildGuard reaps it).
    unsafe { libc::kill(child.0.id() as i32, libc::SIGKILL) };
    let _ = child.0.wait();
    eprintln!("{}: second run killed ({:?})", broker.kind(), t0.elapsed());

    // The third run starts from an empty state directory: its store comes from the changelog.
    let third = p.run(&["run", &p.state_dir("third"), ALL_LINES]);
    let restored: u64 = third
        .split_whitespace()
        .find_map(|w| w.strip_prefix("restored="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no restored= in {third}"));
    assert!(
        restored > 0,
        "the third run restored nothing from the changelog: {third}"
    );
    let verified = p.run(&["verify", ALL_LINES]);
    eprintln!(
        "{}: third run {third}; {verified} ({:?})",
        broker.kind(),
        t0.elapsed()
    );
    broker.assert_alive();
    third
}

#[test]
fn kafka_streams_word_count_is_exactly_once_across_a_crash() {
    let mut broker = Broker::start(2);
    word_count_exactly_once(&mut broker, "classic");
    broker.terminate();
}

#[test]
fn kafka_streams_word_count_is_exactly_once_across_a_crash_on_kafka() {
    let Some(mut peer) = KafkaPeer::start(&[]) else {
        return;
    };
    word_count_exactly_once(&mut peer, "classic");
}

#[test]
fn kafka_streams_group_protocol_streams_on_kafka() {
    let Some(mut peer) = KafkaPeer::start(&[]) else {
        return;
    };
    word_count_exactly_once(&mut peer, "streams");
}

/// ringlog has no streams groups (StreamsGroupHeartbeat, API 88, is not advertised): an
/// application configured with `group.protocol=streams` stops at once with Kafka's own
/// UnsupportedVersionException, naming the STREAMS group protocol.
#[test]
fn kafka_streams_group_protocol_streams_is_a_listed_difference() {
    assert!(
        listed_differences().contains(STREAMS_PROTOCOL_DIFFERENCE),
        "docs/kafka-differences.md must list {STREAMS_PROTOCOL_DIFFERENCE}"
    );
    let mut broker = Broker::start(1);
    let check = JavaCheck::compile("StreamsCheck");
    let bootstrap = broker.bootstrap();
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().display().to_string();
    check.run(&[&bootstrap, "streams", "setup"]);
    check.run(&[&bootstrap, "streams", "produce", "0", "100"]);
    let out = run_with_timeout(
        check.command(&[&bootstrap, "streams", "run", &state_dir, "100"]),
        None,
        Duration::from_secs(120),
    );
    assert!(
        !out.status.success(),
        "a streams-protocol application ran on ringlog:\n{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("FAIL: count lines")
            && out.stderr.contains(
                "UnsupportedVersionException: The cluster does not support the STREAMS group protocol"
            ),
        "want the application to fail with UnsupportedVersionException (no STREAMS groups):\n{}",
        tail(&out.stderr, 4_000)
    );
    broker.assert_alive();
    broker.terminate();
}
