//! The two storage paths (`storage-io = io-uring | glommio`, issue #21) and the tail cache:
//! both paths keep every acknowledged batch through a crash and a clean reopen, the core's
//! ring zeroes ahead of a log's tail and gives back every registered buffer, and reads at the
//! tail are served from memory with the same bytes the disk holds.

mod common;

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use common::*;
use engine::{CoreStorage, CoreStorageOptions, DataDir, Durability, LogConfig, StorageIo};

async fn core_with(root: &Path, options: CoreStorageOptions) -> Rc<CoreStorage> {
    let dd = Arc::new(DataDir::open(root).expect("data dir"));
    CoreStorage::open(dd, options, None)
        .await
        .expect("core storage")
}

/// One segment, preallocated in 1 MiB steps (so the ring zeroes ahead), 1 MiB write chunks
/// (the registered pool's chunk size).
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 20,
        preallocate_bytes: 1 << 20,
        ..LogConfig::default()
    }
}

fn log_file(root: &Path) -> std::path::PathBuf {
    root.join("topics/t/p00000/00000000000000000000.log")
}

fn round_trip(storage_io: StorageIo) {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let options = CoreStorageOptions {
            storage_io,
            registered_buffer_bytes: 4 << 20,
            ..Default::default()
        };
        let core = core_with(&root, options).await;
        assert_eq!(core.storage_io(), storage_io);
        let ring_before = core.ring_stats();
        assert_eq!(ring_before.is_some(), storage_io == StorageIo::IoUring);
        let (log, _) = open(&core, &root, config()).await;
        let mut stored = Vec::new();
        let mut content_bytes = 0u64;
        for i in 0..300u64 {
            let b = batch(i, 1 + (i as usize % 5), 700, 1_000 + i as i64);
            let info = log.append(&b, Durability::Sync).await.expect("append");
            assert_eq!(log.high_watermark(), info.last_offset + 1);
            content_bytes += b.len() as u64;
            stored.push(as_stored(b, info.base_offset));
        }
        assert_eq!(read_all(&log, 0).await, stored);
        if storage_io == StorageIo::IoUring {
            let after = core.ring_stats().unwrap();
            assert!(
                after.submitted_ops >= ring_before.unwrap().submitted_ops + 300,
                "every durable append went through the core's ring: {after:?}"
            );
            // Zeroing ahead runs in the background after a durable write; give it a moment.
            let mut zeroed = 0;
            for _ in 0..200 {
                zeroed = std::fs::metadata(log_file(&root)).unwrap().len();
                if zeroed > content_bytes {
                    break;
                }
                glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
            }
            assert!(
                zeroed > content_bytes,
                "blocks after the tail are zeroed ahead ({zeroed} ≤ {content_bytes})"
            );
        }
        // A crash (no close): the reopen scans past the zeros and keeps every batch.
        drop(log);
        let (log, summary) = open(&core, &root, config()).await;
        assert!(!summary.clean_shutdown);
        assert_eq!(read_all(&log, 0).await, stored);
        let b = batch(999, 2, 100, 9_000);
        let info = log.append(&b, Durability::Sync).await.unwrap();
        stored.push(as_stored(b, info.base_offset));
        log.close().await.unwrap();
        // A clean close trims the zeros: the file holds exactly its batches.
        let total: u64 = stored.iter().map(|b| b.len() as u64).sum();
        assert_eq!(std::fs::metadata(log_file(&root)).unwrap().len(), total);
        let (log, summary) = open(&core, &root, config()).await;
        assert!(summary.clean_shutdown);
        assert_eq!(read_all(&log, 0).await, stored);
        log.close().await.unwrap();
        if let Some(s) = core.ring_stats() {
            assert_eq!(
                s.free_pool_chunks,
                (4 << 20) / (1 << 20) - 1,
                "every registered chunk is back in the pool once the logs are closed"
            );
        }
    });
}

#[test]
fn io_uring_path_keeps_every_batch_through_a_crash_and_a_clean_reopen() {
    round_trip(StorageIo::IoUring);
}

#[test]
fn glommio_path_keeps_every_batch_through_a_crash_and_a_clean_reopen() {
    round_trip(StorageIo::Glommio);
}

#[test]
fn reads_at_the_tail_come_from_memory_with_the_bytes_on_disk() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let options = CoreStorageOptions {
            tail_cache_bytes: 64 << 10,
            ..Default::default()
        };
        let core = core_with(&root, options).await;
        let (log, _) = open(&core, &root, config()).await;
        let mut stored = Vec::new();
        for i in 0..200u64 {
            let b = batch(i, 2, 500, 1_000 + i as i64);
            let info = log.append(&b, Durability::Sync).await.unwrap();
            stored.push(as_stored(b, info.base_offset));
            // A consumer keeping up reads each batch as it lands: from memory.
            let got = log.read(info.base_offset, 1 << 20).await.unwrap();
            assert_eq!(split_batches(&got), vec![stored.last().unwrap().clone()]);
        }
        let s = core.tail_cache().stats();
        assert_eq!(s.hits, 200, "every read at the tail was a hit: {s:?}");
        assert_eq!(s.misses, 0);
        assert!(s.held_bytes <= 64 << 10, "the budget holds: {s:?}");
        // Older data than the budget holds is read from disk, the same bytes.
        assert_eq!(read_all(&log, 0).await, stored);
        assert!(
            core.tail_cache().stats().misses > 0,
            "the oldest reads missed"
        );
        log.close().await.unwrap();
        assert_eq!(
            core.tail_cache().stats().held_bytes,
            0,
            "a closed log's window gives its bytes back"
        );
        // After a reopen nothing is cached: reads go to disk and are still right.
        let (log, _) = open(&core, &root, config()).await;
        let hits = core.tail_cache().stats().hits;
        assert_eq!(read_all(&log, 0).await, stored);
        assert_eq!(core.tail_cache().stats().hits, hits);
        log.close().await.unwrap();
    });
}

#[test]
fn tail_cache_off_at_zero_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let options = CoreStorageOptions {
            tail_cache_bytes: 0,
            ..Default::default()
        };
        let core = core_with(&root, options).await;
        let (log, _) = open(&core, &root, config()).await;
        let b = batch(1, 2, 100, 1_000);
        let info = log.append(&b, Durability::Sync).await.unwrap();
        let got = log.read(info.base_offset, 1 << 20).await.unwrap();
        assert_eq!(split_batches(&got), vec![as_stored(b, info.base_offset)]);
        assert_eq!(core.tail_cache().stats(), Default::default());
        log.close().await.unwrap();
    });
}

#[test]
fn a_write_dropped_in_flight_keeps_its_buffer_until_the_kernel_is_done() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let options = CoreStorageOptions {
            registered_buffer_bytes: 4 << 20,
            ..Default::default()
        };
        let core = core_with(&root, options).await;
        let path = root.join("dropped.dat");
        let f = engine::io::SegmentFile::open_rw(&path, core.file_io())
            .await
            .unwrap();
        const MIB: usize = 1 << 20;
        for i in 0..20u64 {
            let mut b = f.alloc_buffer(MIB);
            b.as_bytes_mut().fill(i as u8 + 1);
            // Submitted, polled once, then dropped before its completion.
            let dropped =
                futures_lite::future::poll_once(f.write_blocks(vec![(b, i * MIB as u64)], true))
                    .await;
            assert!(
                dropped.is_none(),
                "a 1 MiB durable write is still in flight after one poll"
            );
        }
        // Every orphaned operation completes and gives its registered chunk back (only the
        // first writes got pool chunks: the rest used DMA buffers, so wait for the ring to
        // have nothing in flight, not only for the chunks).
        let chunks = (4 << 20) / MIB - 1;
        let mut waited = 0;
        loop {
            let s = core.ring_stats().unwrap();
            if s.free_pool_chunks == chunks && s.ops_in_flight == 0 {
                break;
            }
            assert!(waited < 5_000, "orphaned writes finish");
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            waited += 1;
        }
        // The file holds what the dropped writes carried, and the ring still works.
        let mut b = f.alloc_buffer(4096);
        b.as_bytes_mut().fill(0xAB);
        f.write_blocks(vec![(b, 20 * MIB as u64)], true)
            .await
            .unwrap();
        for i in 0..20u64 {
            let got = f.read(i * MIB as u64 + 100, 10).await.unwrap();
            assert_eq!(got, vec![i as u8 + 1; 10], "block {i}");
        }
        assert_eq!(f.read(20 * MIB as u64, 4).await.unwrap(), vec![0xAB; 4]);
        f.close().await.unwrap();
    });
}
