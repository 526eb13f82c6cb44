//! A replicated partition's log (issue #18): a follower copies the leader's stored batches
//! verbatim (offsets, leader epochs, timestamps), records each new leader epoch before its
//! first batch, and a truncation asked for cuts the log at an offset on the next open, with
//! the epochs past the cut. The high watermark of a replicated log is the limit set on it,
//! never past the durable end; reads past it find nothing, and a read beyond the durable end
//! is out of range.

mod common;

use std::rc::Rc;

use bytes::Bytes;
use common::*;
use engine::batch_encode::{encode_for_producer, NewRecord, ProducerSeq};
use engine::record_check::{BatchRules, ValidBatch};
use engine::{CoreStorage, Durability, Partition};

fn batch(seed: u64, n: usize, pid: i64, seq: i32) -> Vec<u8> {
    let records = (0..n).map(|i| NewRecord {
        key: Some(Bytes::from(format!("k{seed}-{i}"))),
        value: Some(Bytes::from(vec![seed as u8; 50])),
        timestamp_ms: 1,
        ..Default::default()
    });
    encode_for_producer(
        records,
        Some(ProducerSeq {
            producer_id: pid,
            epoch: 0,
            base_sequence: seq,
        }),
    )
}

async fn open(core: &Rc<CoreStorage>, dir: &std::path::Path) -> Rc<Partition> {
    Partition::open(core, dir.to_path_buf(), "inc-1", small_config(1 << 20))
        .await
        .expect("partition opens")
        .0
}

async fn produce(p: &Partition, b: &[u8]) {
    let valid = ValidBatch::new(b, BatchRules::max_bytes(usize::MAX)).expect("valid batch");
    p.produce(valid, Durability::Sync).await.expect("produced");
}

#[test]
fn a_follower_copies_batches_verbatim_and_a_truncation_cuts_at_the_leaders_epoch_end() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let (ldir, fdir) = (dir.path().join("leader"), dir.path().join("follower"));
        let leader = open(&core, &ldir).await;
        leader.become_leader(3).await.unwrap();
        for (i, seq) in [(0u64, 0), (1, 3), (2, 6)] {
            produce(&leader, &batch(i, 3, 7, seq)).await;
        }
        leader.become_leader(5).await.unwrap();
        produce(&leader, &batch(3, 3, 7, 9)).await;
        assert_eq!(leader.log().durable_end(), 12);
        assert_eq!(leader.leader_epoch_end(3), Some((3, 9)));
        assert_eq!(leader.leader_epoch_end(4), Some((3, 9)));
        assert_eq!(leader.leader_epoch_end(5), Some((5, 12)));

        // The leader's high watermark waits for the follower: reads stop there.
        leader.log().set_replicated_limit(6);
        assert_eq!(leader.log().high_watermark(), 6);
        let visible = leader.log().read(0, 1 << 20).await.unwrap();
        assert_eq!(
            engine::batch::stored_batches(&visible).count(),
            2,
            "below the limit only"
        );
        assert!(leader.log().read(6, 1 << 20).await.unwrap().is_empty());
        assert!(
            leader.log().read(13, 1 << 20).await.is_err(),
            "past the log end"
        );

        let follower = open(&core, &fdir).await;
        follower.log().set_replicated_limit(0);
        let all = leader.log().read_durable(0, 1 << 20).await.unwrap();
        assert_eq!(follower.append_replica(&all).await.unwrap(), 12);
        assert_eq!(follower.log().durable_end(), 12);
        assert_eq!(follower.latest_leader_epoch(), Some(5));
        assert_eq!(follower.leader_epoch_end(3), Some((3, 9)));
        let copied = follower.log().read_durable(0, 1 << 20).await.unwrap();
        assert_eq!(
            copied, all,
            "the follower's log is the leader's, byte for byte"
        );
        // A batch that does not start at the follower's end is refused.
        assert!(follower.append_replica(&all).await.is_err());

        // The follower's epoch 5 diverged (say): it truncates to where epoch 3 ends.
        follower.close().await.unwrap();
        drop(follower);
        engine::log::request_truncation(&fdir, 9).await.unwrap();
        let follower = open(&core, &fdir).await;
        assert_eq!(follower.log().log_end_offset(), 9);
        assert_eq!(follower.latest_leader_epoch(), Some(3));
        assert!(!fdir.join(engine::log::TRUNCATE_TO_FILE_NAME).exists());
        // Once a leader, it carries on from its own end with the producer's state rebuilt.
        follower.become_leader(6).await.unwrap();
        produce(&follower, &batch(9, 2, 7, 9)).await;
        assert_eq!(follower.log().log_end_offset(), 11);
        follower.close().await.unwrap();
        // A cut below the first segment empties the log and restarts it at the cut.
        drop(follower);
        engine::log::request_truncation(&fdir, 0).await.unwrap();
        let follower = open(&core, &fdir).await;
        assert_eq!(follower.log().log_end_offset(), 0);
        assert_eq!(follower.latest_leader_epoch(), None);
        follower.close().await.unwrap();
        // Starting over at the leader's log start: empty, from there on.
        drop(follower);
        engine::log::request_restart_at(&fdir, 9).await.unwrap();
        let follower = open(&core, &fdir).await;
        assert_eq!(
            (
                follower.log().log_start_offset(),
                follower.log().log_end_offset()
            ),
            (9, 9)
        );
        let tail = leader.log().read_durable(9, 1 << 20).await.unwrap();
        assert_eq!(follower.append_replica(&tail).await.unwrap(), 12);
        assert_eq!(follower.latest_leader_epoch(), Some(5));
        follower.close().await.unwrap();
        leader.close().await.unwrap();
    });
}

/// A follower keeps the aborted-transaction index as it copies (READ_COMMITTED readers of a
/// new leader skip what was aborted), and a cut drops the entries whose marker it removed.
#[test]
fn a_follower_indexes_the_aborted_transactions_it_copies() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let (ldir, fdir) = (dir.path().join("leader"), dir.path().join("follower"));
        let leader = open(&core, &ldir).await;
        leader.become_leader(1).await.unwrap();
        produce(&leader, &batch(0, 2, 7, 0)).await;
        leader.begin_transaction(9, 0).unwrap();
        let txn = engine::batch_encode::encode_transactional(
            (0..3).map(|i| NewRecord {
                key: Some(Bytes::from(format!("t{i}"))),
                value: Some(Bytes::from_static(b"v")),
                timestamp_ms: 1,
                ..Default::default()
            }),
            ProducerSeq {
                producer_id: 9,
                epoch: 0,
                base_sequence: 0,
            },
        );
        produce(&leader, &txn).await;
        let marker = leader
            .write_marker(9, 0, engine::txn::MarkerKind::Abort, 0)
            .await
            .unwrap();
        assert_eq!(marker, 5);
        let want = leader.aborted_transactions(0, 6);
        assert_eq!(want.len(), 1);

        let follower = open(&core, &fdir).await;
        let all = leader.log().read_durable(0, 1 << 20).await.unwrap();
        assert_eq!(follower.append_replica(&all).await.unwrap(), 6);
        assert_eq!(follower.aborted_transactions(0, 6), want);
        follower.close().await.unwrap();
        drop(follower);
        let follower = open(&core, &fdir).await;
        assert_eq!(
            follower.aborted_transactions(0, 6),
            want,
            "kept in the index file"
        );
        follower.close().await.unwrap();
        drop(follower);
        // Cut before the abort marker: the entry goes with it.
        engine::log::request_truncation(&fdir, 5).await.unwrap();
        let follower = open(&core, &fdir).await;
        assert!(follower.aborted_transactions(0, 6).is_empty());
        follower.close().await.unwrap();
        leader.close().await.unwrap();
    });
}

/// The segment bases in a partition directory, sorted.
fn segment_bases(dir: &std::path::Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| engine::segment::parse_log_name(e.unwrap().file_name().to_str()?))
        .collect();
    v.sort_unstable();
    v
}

/// A follower copies a cleaned leader's log (a compacted replicated topic): a batch that
/// starts past its end goes in at its own offsets (the leader's cleaner took those between),
/// a crash keeps it (the recovery marker lets the active segment's offsets jump, where a jump
/// is otherwise taken for damage), a read in a gap skips to the next batch, and a jump too far
/// for a segment's 32-bit offsets starts the next segment at the batch.
#[test]
fn a_follower_keeps_a_cleaned_leaders_offset_gaps_through_crashes() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let (ldir, fdir) = (dir.path().join("leader"), dir.path().join("follower"));
        let leader = open(&core, &ldir).await;
        leader.become_leader(1).await.unwrap();
        for i in 0..6u64 {
            produce(&leader, &batch(i, 3, 7, 3 * i as i32)).await;
        }
        let all = leader.log().read_durable(0, 1 << 20).await.unwrap();
        let batches: Vec<&[u8]> = engine::batch::stored_batches(&all)
            .map(|(_, one)| one)
            .collect();
        assert_eq!(batches.len(), 6);
        // What a cleaned leader would serve: batches 1 and 4 are gone (offsets 3..6, 12..15).
        let first = [batches[0], batches[2], batches[3]].concat();
        let follower = open(&core, &fdir).await;
        assert_eq!(follower.append_replica(&first).await.unwrap(), 12);
        assert_eq!(
            follower.log().read_durable(0, 1 << 20).await.unwrap(),
            first
        );
        let in_gap = follower.log().read_durable(4, 1 << 20).await.unwrap();
        assert_eq!(
            engine::batch::stored_batches(&in_gap)
                .next()
                .unwrap()
                .0
                .base_offset,
            6,
            "a read in the gap starts at the next batch"
        );
        // A batch before the end is still refused.
        assert!(follower.append_replica(batches[3]).await.is_err());

        // Crash (no close): recovery keeps the batches after the jump.
        drop(follower);
        let follower = open(&core, &fdir).await;
        assert_eq!(follower.log().log_end_offset(), 12, "kept over a crash");
        assert_eq!(
            follower.log().read_durable(0, 1 << 20).await.unwrap(),
            first
        );
        // Another jump after the reopen, then a clean close, a first append and a crash.
        assert_eq!(follower.append_replica(batches[5]).await.unwrap(), 18);
        follower.close().await.unwrap();
        drop(follower);
        let follower = open(&core, &fdir).await;
        assert_eq!(
            follower.log().log_end_offset(),
            18,
            "kept over a clean close"
        );
        let mut far = batches[5].to_vec();
        let far_base: u64 = 5_000_000_000;
        engine::batch::set_base_offset(&mut far, far_base as i64);
        assert_eq!(
            follower.append_replica(&far).await.unwrap(),
            far_base + 3,
            "a jump past 32-bit relative offsets"
        );
        drop(follower);
        let follower = open(&core, &fdir).await;
        assert_eq!(
            follower.log().log_end_offset(),
            far_base + 3,
            "kept over a crash"
        );
        assert_eq!(
            segment_bases(&fdir),
            vec![0, far_base],
            "the far batch starts a segment of its own"
        );
        let copied = read_all(follower.log(), 0).await.concat();
        let want = [first.as_slice(), batches[5], &far].concat();
        assert_eq!(copied, want, "every batch, in order, byte for byte");
        follower.close().await.unwrap();
        leader.close().await.unwrap();
    });
}
