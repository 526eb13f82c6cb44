//! Crash test with real processes: a child process appends durable batches and reports each
//! acknowledged offset on stdout; the parent SIGKILLs it at a random moment, reopens the log and
//! checks that every acknowledged batch is there, byte-identical, with contiguous offsets.
//! The child is this same test binary, re-run with `CRASH_CHILD_DIR` set.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use engine::{batch, Durability};
use rand::{Rng, SeedableRng};

const TRIALS: u64 = 20;
const CHILD_DIR_ENV: &str = "CRASH_CHILD_DIR";
const CHILD_SEED_ENV: &str = "CRASH_CHILD_SEED";
const CONCURRENT_APPENDERS: u64 = 8;

/// The batch the child writes for `seed`: deterministic, so the parent can rebuild it.
fn child_batch(seed: u64) -> Vec<u8> {
    batch(
        seed,
        1 + (seed % 5) as usize,
        ((seed * 37) % 1500) as usize,
        seed as i64,
    )
}

/// Entry point of the child process; a no-op in a normal test run.
#[test]
fn crash_child_entry() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return;
    };
    let seed0: u64 = std::env::var(CHILD_SEED_ENV).unwrap().parse().unwrap();
    let root = std::path::PathBuf::from(dir);
    run(move || async move {
        let core = core(&root, 4).await;
        let (log, _) = open(&core, &root, small_config(256 << 10)).await;
        let tasks: Vec<_> = (0..CONCURRENT_APPENDERS)
            .map(|a| {
                let log = log.clone();
                glommio::spawn_local(async move {
                    for i in 0.. {
                        let seed = seed0 + i * CONCURRENT_APPENDERS + a;
                        let info = log
                            .append(&child_batch(seed), Durability::Sync)
                            .await
                            .unwrap();
                        use std::io::Write;
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "ACK {} {}", info.base_offset, seed).unwrap();
                        out.flush().unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
    });
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_batch() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let exe = std::env::current_exe().unwrap();
    let mut acked: Vec<(u64, u64)> = Vec::new(); // (base offset, seed)
    let mut rng = rand::rngs::SmallRng::seed_from_u64(2024);
    for trial in 0..TRIALS {
        let mut child = Command::new(&exe)
            .args([
                "crash_child_entry",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_DIR_ENV, &root)
            .env(CHILD_SEED_ENV, (trial * 1_000_000).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("ACK ") {
                    let mut it = rest.split(' ');
                    let base: u64 = it.next().unwrap().parse().unwrap();
                    let seed: u64 = it.next().unwrap().parse().unwrap();
                    if tx.send((base, seed)).is_err() {
                        break;
                    }
                }
            }
        });
        // Wait for the first ack (the child is up), then kill at a random moment.
        let first = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("child acknowledges a batch");
        let mut this_trial = vec![first];
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..150)));
        child.kill().expect("SIGKILL"); // std sends SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        this_trial.extend(rx.try_iter());
        acked.extend(this_trial.iter().copied());

        let root2 = root.clone();
        let expect = acked.clone();
        let (n_batches, summary) = run(move || async move {
            let core = core(&root2, 4).await;
            let (log, summary) = open(&core, &root2, small_config(256 << 10)).await;
            let got = read_all(&log, 0).await;
            // Offsets are contiguous from 0.
            let mut next = 0u64;
            let mut by_base = std::collections::HashMap::new();
            for b in &got {
                let h = batch::parse_header(b).unwrap();
                assert_eq!(h.base_offset as u64, next, "contiguous offsets");
                next = h.last_offset() as u64 + 1;
                by_base.insert(h.base_offset as u64, b.clone());
            }
            for &(base, seed) in &expect {
                let b = by_base
                    .get(&base)
                    .unwrap_or_else(|| panic!("acknowledged batch at offset {base} lost"));
                assert_eq!(
                    b,
                    &as_stored(child_batch(seed), base),
                    "batch at {base} differs"
                );
            }
            log.close().await.unwrap();
            (got.len(), summary)
        });
        assert!(n_batches >= acked.len());
        eprintln!(
            "trial {trial}: {} acked this run, {} batches in log, recovery {:?}",
            this_trial.len(),
            n_batches,
            summary.truncations
        );
    }
    assert!(acked.len() as u64 > TRIALS, "the children made progress");
}

#[test]
fn child_batches_are_valid() {
    for seed in 0..20 {
        batch::validate(&child_batch(seed)).unwrap();
    }
}

/// A log opened after a clean close keeps its clean marker until its first append (issue #13:
/// idle partitions open and close without an fsync): a crash before any append needs no scan,
/// and a crash after one scans and keeps it.
#[test]
fn the_clean_marker_stays_until_the_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let core = core(&root, 4).await;
        let (log, _) = open(&core, &root, small_config(64 << 10)).await;
        let first = log
            .append(&batch(1, 2, 100, 1), Durability::Sync)
            .await
            .unwrap();
        log.close().await.unwrap();
        // Opened and dropped untouched (a crash): still clean.
        let (log, summary) = open(&core, &root, small_config(64 << 10)).await;
        assert!(summary.clean_shutdown);
        drop(log);
        let (log, summary) = open(&core, &root, small_config(64 << 10)).await;
        assert!(
            summary.clean_shutdown,
            "nothing changed since the clean close"
        );
        assert_eq!(summary.segments_scanned, 0);
        // An append marks it first; a crash after it recovers it.
        let second = log
            .append(&batch(2, 2, 100, 2), Durability::Sync)
            .await
            .unwrap();
        drop(log);
        let (log, summary) = open(&core, &root, small_config(64 << 10)).await;
        assert!(!summary.clean_shutdown);
        assert!(summary.segments_scanned > 0);
        assert_eq!(
            read_all(&log, 0).await,
            vec![
                as_stored(batch(1, 2, 100, 1), first.base_offset),
                as_stored(batch(2, 2, 100, 2), second.base_offset)
            ]
        );
        log.close().await.unwrap();
    });
}
