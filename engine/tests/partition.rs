//! `Partition`: the idempotent-producer state changes with the log, never ahead of it. A batch
//! the log refuses leaves the sequence state as it was; a retry of a stored batch is answered
//! with the original's offsets, and only once the original is durable (a slow flush held by
//! the fault injector); commit times come from the core's clock.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use engine::batch_encode::{encode_for_producer, NewRecord, ProducerSeq};
use engine::clock::ManualClock;
use engine::record_check::ValidBatch;
use engine::{CoreStorage, Durability, LogError, Partition, PartitionError};

/// `n` records of `value_len` bytes as producer `pid`'s batch at `epoch` from sequence `seq`.
fn idempotent_batch(
    seed: u64,
    n: usize,
    value_len: usize,
    pid: i64,
    epoch: i16,
    seq: i32,
) -> Vec<u8> {
    let records = (0..n).map(|i| NewRecord {
        key: Some(Bytes::from(format!("k{seed}-{i}"))),
        value: Some(Bytes::from(vec![seed as u8; value_len])),
        timestamp_ms: 1,
        ..Default::default()
    });
    let producer = ProducerSeq {
        producer_id: pid,
        epoch,
        base_sequence: seq,
    };
    encode_for_producer(records, Some(producer))
}

async fn open_partition(core: &Rc<CoreStorage>, root: &std::path::Path) -> Rc<Partition> {
    let config = small_config(1 << 20);
    Partition::open(core, root.join("topics/t/p00000"), "inc-1", config)
        .await
        .expect("partition opens")
        .0
}

async fn produce(p: &Partition, b: &[u8]) -> Result<engine::Produced, PartitionError> {
    let valid = ValidBatch::new(b, engine::record_check::BatchRules::max_bytes(usize::MAX))
        .expect("valid batch");
    p.produce(valid, Durability::Sync).await
}

#[test]
fn a_refused_append_leaves_the_sequence_state_unchanged() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let p = open_partition(&core, dir.path()).await;
        let first = produce(&p, &idempotent_batch(0, 1, 10, 7, 0, 0))
            .await
            .unwrap();
        assert_eq!((first.base_offset, first.duplicate), (0, false));
        // Sequence 1 is too large for the log (its limit is lower than the caller's check):
        // refused, and nothing of it may be remembered.
        let mut cfg = p.log().config();
        cfg.max_batch_bytes = 2_000;
        p.log().set_config(cfg).unwrap();
        let big = produce(&p, &idempotent_batch(1, 1, 5_000, 7, 0, 1)).await;
        assert!(
            matches!(big, Err(PartitionError::Log(LogError::InvalidBatch { .. }))),
            "{big:?}"
        );
        // The same sequence again, small: a new batch, stored at offset 1.
        let retry = produce(&p, &idempotent_batch(2, 1, 10, 7, 0, 1))
            .await
            .unwrap();
        assert_eq!((retry.base_offset, retry.duplicate), (1, false));
        let stored = read_all(p.log(), 0).await;
        assert_eq!(
            stored.len(),
            2,
            "the partition holds every acknowledged batch"
        );
        // A gap and an old epoch are refused.
        let gap = produce(&p, &idempotent_batch(3, 1, 10, 7, 0, 5)).await;
        assert!(
            matches!(
                gap,
                Err(PartitionError::OutOfOrderSequence {
                    expected: 2,
                    got: 5,
                    ..
                })
            ),
            "{gap:?}"
        );
        produce(&p, &idempotent_batch(4, 1, 10, 7, 1, 0))
            .await
            .unwrap();
        let fenced = produce(&p, &idempotent_batch(5, 1, 10, 7, 0, 2)).await;
        assert!(
            matches!(
                fenced,
                Err(PartitionError::FencedEpoch {
                    current: 1,
                    got: 0,
                    ..
                })
            ),
            "{fenced:?}"
        );
    });
}

#[test]
fn a_duplicate_is_acknowledged_only_after_the_original_is_durable() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (core, faults) = faulty_core(dir.path()).await;
        let p = open_partition(&core, dir.path()).await;
        let b0 = idempotent_batch(0, 3, 10, 9, 0, 0);
        let b1 = idempotent_batch(1, 2, 10, 9, 0, 3);
        faults.hold_syncs();
        let done = Rc::new(Cell::new(0u32));
        let spawn = |b: Vec<u8>| {
            let (p, done) = (p.clone(), done.clone());
            glommio::spawn_local(async move {
                let r = produce(&p, &b).await;
                done.set(done.get() + 1);
                r
            })
        };
        // The original, the next batch (pipelined) and a retry of the original, in that order.
        let original = spawn(b0.clone());
        let next = spawn(b1);
        let retry = spawn(b0);
        glommio::timer::sleep(Duration::from_millis(100)).await;
        assert_eq!(done.get(), 0, "nothing is answered while the flush is held");
        assert_eq!(p.log().high_watermark(), 0, "nothing is durable yet");
        faults.release_syncs();
        let (o, n, r) = (
            original.await.unwrap(),
            next.await.unwrap(),
            retry.await.unwrap(),
        );
        assert_eq!((o.base_offset, o.last_offset, o.duplicate), (0, 2, false));
        assert_eq!((n.base_offset, n.duplicate), (3, false));
        assert_eq!((r.base_offset, r.last_offset, r.duplicate), (0, 2, true));
        assert_eq!(p.log().high_watermark(), 5);
        assert_eq!(
            read_all(p.log(), 0).await.len(),
            2,
            "the retry was not stored"
        );
    });
}

#[test]
fn producer_state_is_rebuilt_on_open_and_a_new_incarnation_starts_empty() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let pdir = dir.path().join("topics/t/p00000");
        let (p, _) = Partition::open(&core, pdir.clone(), "inc-1", small_config(1 << 20))
            .await
            .unwrap();
        let b0 = idempotent_batch(0, 2, 10, 11, 0, 0);
        produce(&p, &b0).await.unwrap();
        p.store_cursor_file("child", b"{}".to_vec()).await.unwrap();
        assert_eq!(p.cursor_files().await.unwrap(), vec!["child".to_string()]);
        p.close().await.unwrap();
        drop(p);
        let (p, _) = Partition::open(&core, pdir.clone(), "inc-1", small_config(1 << 20))
            .await
            .unwrap();
        let again = produce(&p, &b0).await.unwrap();
        assert!(again.duplicate, "the rebuilt state knows the stored batch");
        assert_eq!(
            p.load_cursor_file("child").await.unwrap().as_deref(),
            Some(&b"{}"[..])
        );
        p.close().await.unwrap();
        drop(p);
        let (p, _) = Partition::open(&core, pdir, "inc-2", small_config(1 << 20))
            .await
            .unwrap();
        assert_eq!(
            p.log().log_end_offset(),
            0,
            "another incarnation's files are gone"
        );
        assert!(p.cursor_files().await.unwrap().is_empty());
        p.close_and_delete().await.unwrap();
        assert!(!dir.path().join("topics/t").exists());
    });
}

#[test]
fn commit_times_come_from_the_core_clock_and_never_decrease() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let clock = Rc::new(ManualClock::new(1_000_000));
        core.set_clock(clock.clone());
        let (log, _) = open(&core, dir.path(), small_config(1 << 20)).await;
        let a = log
            .append(&batch(0, 1, 10, 1), Durability::Sync)
            .await
            .unwrap();
        assert_eq!(a.commit_time_ms, 1_000_000);
        clock.set(5);
        let b = log
            .append(&batch(1, 1, 10, 1), Durability::Sync)
            .await
            .unwrap();
        assert_eq!(
            b.commit_time_ms, 1_000_000,
            "a clock step back does not move commit time back"
        );
        clock.advance(2_000_000);
        let c = log
            .append(&batch(2, 1, 10, 1), Durability::Sync)
            .await
            .unwrap();
        assert_eq!(c.commit_time_ms, 2_000_005);
        assert_eq!(log.commit_time_of(2).await.unwrap(), Some(2_000_005));
    });
}

#[test]
fn a_cancelled_producer_leaves_neither_a_half_flush_nor_a_blocked_log() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (core, faults) = faulty_core(dir.path()).await;
        let p = open_partition(&core, dir.path()).await;
        faults.hold_syncs();
        // Its batch is admitted and its flush starts; then the task is dropped mid-fdatasync
        // (a stopped fan-out cursor, a closed connection).
        let task = {
            let p = p.clone();
            glommio::spawn_local(
                async move { produce(&p, &idempotent_batch(0, 2, 10, 5, 0, 0)).await },
            )
        };
        glommio::timer::sleep(Duration::from_millis(50)).await;
        task.cancel().await;
        faults.release_syncs();
        // The flush finished on its own: the cancelled batch is durable, and the log takes
        // more (a roll included).
        let next = produce(&p, &idempotent_batch(1, 1, 10, 5, 0, 2))
            .await
            .unwrap();
        assert_eq!((next.base_offset, next.duplicate), (2, false));
        p.log().roll().await.unwrap();
        let after = produce(&p, &idempotent_batch(2, 1, 10, 5, 0, 3))
            .await
            .unwrap();
        assert_eq!(after.base_offset, 3);
        assert_eq!(read_all(p.log(), 0).await.len(), 3);
        p.close().await.unwrap();
    });
}
