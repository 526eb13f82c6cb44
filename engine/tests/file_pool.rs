//! The core's open-file budget (`max-open-files`, issue #13): a core serves more logs than its
//! budget of open files holds by closing the least recently used idle files, which reopen on
//! their next use; every append stays durable and readable, and the descriptors the core holds
//! stay within the budget.

mod common;

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use common::*;
use engine::{
    CoreStorage, CoreStorageOptions, DataDir, Durability, LogConfig, PartitionLog, StorageIo,
};

/// Files a log's active segment holds (`.log`, `.index`, `.timeindex`).
const FILES_PER_LOG: usize = 3;

async fn core_with_budget(
    root: &Path,
    storage_io: StorageIo,
    max_open_files: usize,
) -> Rc<CoreStorage> {
    let dd = Arc::new(DataDir::open(root).expect("data dir"));
    let options = CoreStorageOptions {
        storage_io,
        max_open_files,
        ..Default::default()
    };
    CoreStorage::open(dd, options, None)
        .await
        .expect("core storage")
}

fn config() -> LogConfig {
    LogConfig {
        preallocate_bytes: 64 << 10,
        write_chunk_bytes: 64 << 10,
        ..small_config(1 << 20)
    }
}

/// Descriptors this process holds on files under `root`.
fn fds_under(root: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("fd list")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(root))
        .count()
}

async fn open_log(core: &Rc<CoreStorage>, root: &Path, i: usize) -> Rc<PartitionLog> {
    let (log, _) = PartitionLog::open(core, root.join(format!("topics/t/p{i:05}")), config())
        .await
        .expect("log opens");
    log
}

fn round_robin_over_more_logs_than_the_budget(storage_io: StorageIo) {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        const LOGS: usize = 12;
        const BUDGET: usize = 2 * FILES_PER_LOG;
        let core = core_with_budget(&root, storage_io, BUDGET).await;
        let mut logs = Vec::new();
        for i in 0..LOGS {
            logs.push(open_log(&core, &root, i).await);
            assert!(core.file_pool_stats().open_files <= BUDGET);
        }
        let mut stored: Vec<Vec<Vec<u8>>> = vec![Vec::new(); LOGS];
        let mut most_fds = 0;
        for round in 0..6u64 {
            for (i, log) in logs.iter().enumerate() {
                let b = batch(round * 100 + i as u64, 3, 300, round as i64);
                let info = log.append(&b, Durability::Sync).await.expect("append");
                stored[i].push(as_stored(b, info.base_offset));
                most_fds = most_fds.max(fds_under(&root));
                let stats = core.file_pool_stats();
                assert!(stats.open_files <= BUDGET, "{stats:?}");
            }
        }
        let stats = core.file_pool_stats();
        assert!(
            stats.closed_for_budget > 0 && stats.reopened > 0,
            "{stats:?}"
        );
        assert_eq!(stats.over_budget, 0, "{stats:?}");
        // The descriptors on the logs' files: the budget, plus a closed file whose descriptor
        // is still closing (glommio closes on its next reactor turn).
        assert!(
            most_fds <= BUDGET + 1,
            "{most_fds} fds held on a budget of {BUDGET}"
        );
        // Every log reads back what was appended, through reopened files.
        for (i, log) in logs.iter().enumerate() {
            assert_eq!(read_all(log, 0).await, stored[i], "log {i}");
        }
        for log in logs.drain(..) {
            log.close().await.unwrap();
        }
        assert_eq!(core.file_pool_stats().open_files, 0);
        // A reopen (clean close) finds every batch.
        for (i, want) in stored.iter().enumerate() {
            let log = open_log(&core, &root, i).await;
            assert_eq!(&read_all(&log, 0).await, want, "log {i} after reopen");
            log.close().await.unwrap();
        }
    });
}

#[test]
fn round_robin_over_more_logs_than_the_budget_on_the_ring() {
    round_robin_over_more_logs_than_the_budget(StorageIo::IoUring);
}

#[test]
fn round_robin_over_more_logs_than_the_budget_on_glommio() {
    round_robin_over_more_logs_than_the_budget(StorageIo::Glommio);
}

/// Appends made durable through a descriptor the pool then closed stay durable: a crash
/// (the logs dropped without a close, so recovery scans them) loses no acknowledged batch.
#[test]
fn acknowledged_appends_survive_a_crash_after_their_files_were_closed() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let r2 = root.clone();
    let stored = run(move || async move {
        let core = core_with_budget(&root, StorageIo::IoUring, FILES_PER_LOG).await;
        let mut stored = Vec::new();
        let mut logs = Vec::new();
        for i in 0..4 {
            logs.push(open_log(&core, &root, i).await);
        }
        for (i, log) in logs.iter().enumerate() {
            let b = batch(i as u64, 2, 500, 1);
            let info = log.append(&b, Durability::Sync).await.expect("append");
            stored.push(vec![as_stored(b, info.base_offset)]);
        }
        assert!(core.file_pool_stats().closed_for_budget > 0);
        // No close (the marker stays "not clean", nothing is sealed): what a SIGKILL leaves.
        drop(logs);
        stored
    });
    run(move || async move {
        let core = core_with_budget(&r2, StorageIo::IoUring, 0).await;
        for (i, want) in stored.iter().enumerate() {
            let log = open_log(&core, &r2, i).await;
            assert_eq!(&read_all(&log, 0).await, want, "log {i} after the crash");
            log.close().await.unwrap();
        }
    });
}
