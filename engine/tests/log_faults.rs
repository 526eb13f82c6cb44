//! Fault injection through the I/O module: a failing write or fdatasync poisons the log, later
//! appends fail until it is reopened, a failed fsync is never retried into a success, and no
//! acknowledged data is lost.

mod common;

use common::*;
use engine::io::FaultInjector;
use engine::{Durability, LogConfig, LogError, PartitionLog};

fn is_poisoned<T: std::fmt::Debug>(r: &Result<T, LogError>) -> bool {
    matches!(r, Err(LogError::Poisoned { .. }))
}

async fn check_fault(arm: impl Fn(&FaultInjector), what: &str, config: LogConfig) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let (core, faults) = faulty_core(&root).await;
    let (log, _) = open(&core, &root, config.clone()).await;
    let mut acked = Vec::new();
    for i in 0..10 {
        let b = batch(i, 2, 100, 1);
        let info = log.append(&b, Durability::Sync).await.unwrap();
        acked.push(as_stored(b, info.base_offset));
    }
    let hwm = log.high_watermark();
    arm(&faults);
    // Several appenders ride the failing flush; none of them may be acknowledged.
    let tasks: Vec<_> = (0..5)
        .map(|i| {
            let log = log.clone();
            glommio::spawn_local(async move {
                log.append(&batch(100 + i, 1, 10, 1), Durability::Sync)
                    .await
            })
        })
        .collect();
    for t in tasks {
        let r = t.await;
        assert!(
            is_poisoned(&r),
            "{what}: append during the failure must fail, got {r:?}"
        );
    }
    assert!(log.is_poisoned());
    assert_eq!(
        log.high_watermark(),
        hwm,
        "{what}: nothing new became visible"
    );
    let msg = log
        .append(&batch(200, 1, 10, 1), Durability::Sync)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("poisoned") && msg.contains(what),
        "{what}: error names the cause: {msg}"
    );
    // The disk "recovers", but the log must not retry the fsync and pretend.
    faults.clear();
    let r = log.append(&batch(201, 1, 10, 1), Durability::Sync).await;
    assert!(
        is_poisoned(&r),
        "{what}: still poisoned after the fault clears: {r:?}"
    );
    assert!(is_poisoned(&log.sync_to(log.log_end_offset()).await));
    // Reads of acknowledged data still work.
    assert_eq!(read_all(&log, 0).await, acked);
    log.close().await.unwrap();
    drop(log);

    // Reopen: every acknowledged batch is there and appends work again.
    let (log, _) = PartitionLog::open(&core, root.join("topics/t/p00000"), config)
        .await
        .unwrap();
    let got = read_all(&log, 0).await;
    assert!(got.len() >= acked.len());
    assert_eq!(
        got[..acked.len()],
        acked[..],
        "{what}: acknowledged data survives"
    );
    let info = log
        .append(&batch(300, 1, 10, 1), Durability::Sync)
        .await
        .unwrap();
    assert_eq!(info.base_offset, log.high_watermark() - 1);
    log.close().await.unwrap();
}

#[test]
fn failed_fdatasync_poisons_the_log() {
    init_tracing();
    run(|| async {
        check_fault(|f| f.fail_sync_after(1), "fdatasync", LogConfig::default()).await
    });
}

#[test]
fn failed_write_poisons_the_log() {
    init_tracing();
    run(|| async { check_fault(|f| f.fail_write_after(1), "write", LogConfig::default()).await });
}

#[test]
fn failed_index_fdatasync_poisons_too() {
    // With the index synced by every flush, a flush's 2nd fdatasync is the `.index` one.
    let config = LogConfig {
        index_sync_interval_ms: 0,
        ..LogConfig::default()
    };
    run(|| async { check_fault(|f| f.fail_sync_after(2), "fdatasync", config).await });
}

#[test]
fn failure_during_a_roll_poisons_the_log() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let (core, faults) = faulty_core(&root).await;
        let (log, _) = open(&core, &root, small_config(8 << 10)).await;
        let mut acked = Vec::new();
        let mut poisoned = false;
        for i in 0..40 {
            if i == 3 {
                // Fail a few operations later: lands in a flush or a roll's seal.
                faults.fail_sync_after(5);
            }
            let b = batch(i, 1, 1500, 1);
            match log.append(&b, Durability::Sync).await {
                Ok(info) => acked.push(as_stored(b, info.base_offset)),
                Err(LogError::Poisoned { .. }) => {
                    poisoned = true;
                    break;
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert!(poisoned);
        faults.clear();
        log.close().await.unwrap();
        drop(log);
        let (log, _) = open(&core, &root, small_config(8 << 10)).await;
        let got = read_all(&log, 0).await;
        assert_eq!(got[..acked.len()], acked[..]);
        log.close().await.unwrap();
    });
}
