//! Kafka's own command-line tools (kafka-topics, kafka-configs, kafka-acls,
//! kafka-consumer-groups, kafka-transactions, kafka-get-offsets, the console, verifiable and
//! perf clients, ...) against ringlog and against Apache Kafka 4.4 itself (the reference peer,
//! `support::peer`), with the same command lines. `clients/peer_tools.py` runs each check
//! against both brokers, sets aside what legitimately differs between two brokers (ids,
//! addresses, timestamps, sizes, ordering), compares the answers, and checks ringlog's answer
//! on its own (the topic has the partitions and configs asked for, records come back with
//! their keys and headers, offsets are reset to where asked, ...). A difference must be
//! listed, with its reason, under the check's id in `docs/kafka-differences.md`; one that is
//! not fails the test.
//!
//! Where Kafka cannot be had here (no Java, Maven or Maven Central) the test says why and
//! passes, except under CI (`CI` set), where it fails.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use support::peer::{peer_script, KafkaPeer, WITH_AUTHORIZER};
use support::*;

/// The whole driver run: about two and a half minutes on two cores, most of it the tools'
/// JVMs starting (some 200 tool runs against each broker).
const DRIVER_TIMEOUT: Duration = Duration::from_secs(600);

/// The driver's exit status when Kafka's tools cannot be had (kafka-peer.sh said so).
const TOOLS_UNAVAILABLE_EXIT: i32 = 3;

/// The repository's root (`ops/..`).
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `s` quoted for a POSIX shell word (the driver splits its tool runner as a shell would).
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `N passed, M failed` from the driver's last line.
fn summary(stdout: &str) -> Option<(usize, usize)> {
    let last = stdout.lines().rev().find(|l| !l.trim().is_empty())?;
    let (passed, rest) = last.trim().split_once(" passed, ")?;
    let failed = rest.strip_suffix(" failed")?;
    Some((passed.parse().ok()?, failed.parse().ok()?))
}

#[test]
fn kafka_tools_answer_alike_on_ringlog_and_kafka() {
    let Some(peer) = KafkaPeer::start(WITH_AUTHORIZER) else {
        return;
    };
    let mut broker = Broker::start(1);

    let python = std::env::var("RINGLOG_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let runner = format!(
        "bash {} tool",
        shell_quote(&peer_script().display().to_string())
    );
    let mut cmd = Command::new(&python);
    cmd.arg("-u")
        .arg(clients_dir().join("peer_tools.py"))
        .arg("--ringlog")
        .arg(broker.bootstrap())
        .arg("--kafka")
        .arg(peer.bootstrap())
        .arg("--tool-runner")
        .arg(&runner)
        .arg("--differences")
        .arg(repo_root().join("docs").join("kafka-differences.md"))
        .current_dir(repo_root())
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let t0 = Instant::now();
    let out = run_with_timeout(cmd, None, DRIVER_TIMEOUT);
    eprintln!(
        "peer_tools.py ran {:.0?} ({}):\n{}",
        t0.elapsed(),
        out.status,
        out.stdout
    );

    if out.status.code() == Some(TOOLS_UNAVAILABLE_EXIT) {
        let why = out.stdout.trim();
        assert!(
            std::env::var_os("CI").is_none(),
            "Kafka's tools must run in CI: {why}\n{}",
            tail(&out.stderr, 4_000)
        );
        eprintln!("skipped: Kafka's tools cannot be had here: {why}");
        return;
    }
    let counts = summary(&out.stdout);
    assert!(
        out.status.success() && matches!(counts, Some((_, 0))),
        "peer_tools.py failed ({}): the FAIL lines above name the checks; the transcripts of the \
         failing checks follow\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        out.stdout,
        tail(&out.stderr, 60_000)
    );
    let (passed, _) = counts.unwrap();
    assert!(
        passed >= 50,
        "only {passed} checks ran (the driver runs every check unless told otherwise):\n{}",
        out.stdout
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("expected differences: ")),
        "no summary of the expected differences:\n{}",
        out.stdout
    );
    broker.assert_alive();
}
