//! `Partition` transactions (KIP-98): transactional batches only inside a begun transaction,
//! the last stable offset stops at the oldest open one, markers end them (an abort goes into
//! the aborted-transaction index, which survives reopens and crashes through its file and the
//! window scan), a bumped epoch in a marker fences the old producer, and compaction keeps every
//! marker and lets no aborted record shadow a committed one.

mod common;

use std::rc::Rc;

use bytes::Bytes;
use common::*;
use engine::batch::records;
use engine::batch_encode::{encode_for_producer, encode_transactional, NewRecord, ProducerSeq};
use engine::cleaner::Throttle;
use engine::record_check::{BatchRules, ValidBatch};
use engine::txn::{self, AbortedTxn, MarkerKind};
use engine::{
    CleanupPolicy, CoreStorage, Durability, LogConfig, LogError, Partition, PartitionError,
};

const PDIR: &str = "topics/t/p00000";

fn rec(key: &str, value: &str) -> NewRecord {
    NewRecord {
        key: Some(Bytes::from(key.to_string())),
        value: Some(Bytes::from(value.to_string())),
        timestamp_ms: 1,
        ..Default::default()
    }
}

fn seq(pid: i64, epoch: i16, base_sequence: i32) -> ProducerSeq {
    ProducerSeq {
        producer_id: pid,
        epoch,
        base_sequence,
    }
}

/// Producer `pid`'s transactional batch of `n` records from sequence `s`.
fn txn_batch(pid: i64, epoch: i16, s: i32, n: usize) -> Vec<u8> {
    encode_transactional(
        (0..n).map(|i| rec(&format!("k{pid}-{s}-{i}"), "v")),
        seq(pid, epoch, s),
    )
}

async fn open_with(
    core: &Rc<CoreStorage>,
    root: &std::path::Path,
    cfg: LogConfig,
) -> Rc<Partition> {
    Partition::open(core, root.join(PDIR), "inc-1", cfg)
        .await
        .expect("partition opens")
        .0
}

async fn open_partition(core: &Rc<CoreStorage>, root: &std::path::Path) -> Rc<Partition> {
    open_with(core, root, small_config(1 << 20)).await
}

async fn produce(p: &Partition, b: &[u8]) -> Result<engine::Produced, PartitionError> {
    let valid = ValidBatch::new(b, BatchRules::max_bytes(usize::MAX)).expect("valid batch");
    p.produce(valid, Durability::Sync).await
}

#[test]
fn a_commit_holds_the_last_stable_offset_until_its_marker() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let p = open_partition(&core, dir.path()).await;
        p.begin_transaction(5, 0).unwrap();
        p.begin_transaction(5, 0).unwrap();
        assert!(
            p.ongoing_transactions().is_empty(),
            "nothing written here yet"
        );
        let a = produce(&p, &txn_batch(5, 0, 0, 2)).await.unwrap();
        assert_eq!(a.base_offset, 0);
        produce(&p, &batch(1, 1, 10, 1)).await.unwrap();
        produce(&p, &txn_batch(5, 0, 2, 1)).await.unwrap();
        assert_eq!(p.log().high_watermark(), 4);
        assert_eq!(p.last_stable_offset(), 0, "the open transaction holds it");
        assert_eq!(p.ongoing_transactions(), vec![(5, 0, 0)]);
        let marker = p.write_marker(5, 0, MarkerKind::Commit, 3).await.unwrap();
        assert_eq!(marker, 4);
        assert_eq!(p.log().high_watermark(), 5);
        assert_eq!(p.last_stable_offset(), 5);
        assert!(p.ongoing_transactions().is_empty());
        assert!(p.aborted_transactions(0, u64::MAX).is_empty());
        let stored = read_all(p.log(), 0).await;
        assert_eq!(stored.len(), 4);
        assert_eq!(txn::marker_of(&stored[3]), Some(MarkerKind::Commit));
        // The transaction is over: the next transactional batch needs a new begin, and a
        // producer keeps its sequence across transactions at the same epoch.
        let after = produce(&p, &txn_batch(5, 0, 3, 1)).await;
        assert!(
            matches!(
                after,
                Err(PartitionError::TransactionNotBegun {
                    producer_id: 5,
                    epoch: 0,
                    ..
                })
            ),
            "{after:?}"
        );
        p.begin_transaction(5, 0).unwrap();
        let next = produce(&p, &txn_batch(5, 0, 3, 1)).await.unwrap();
        assert_eq!(next.base_offset, 5);
        assert_eq!(p.last_stable_offset(), 5);
        p.close().await.unwrap();
    });
}

#[test]
fn an_abort_is_indexed_and_its_records_stay_readable() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let p = open_partition(&core, dir.path()).await;
        produce(&p, &batch(1, 1, 10, 1)).await.unwrap();
        p.begin_transaction(9, 2).unwrap();
        produce(&p, &txn_batch(9, 2, 0, 2)).await.unwrap();
        produce(&p, &txn_batch(9, 2, 2, 1)).await.unwrap();
        assert_eq!(p.last_stable_offset(), 1);
        let marker = p.write_marker(9, 2, MarkerKind::Abort, 0).await.unwrap();
        assert_eq!(marker, 4);
        assert_eq!(p.last_stable_offset(), 5);
        let want = AbortedTxn {
            producer_id: 9,
            first_offset: 1,
            last_offset: 4,
        };
        assert_eq!(p.aborted_transactions(0, 5), vec![want]);
        assert_eq!(p.aborted_transactions(4, 5), vec![want]);
        assert_eq!(
            p.aborted_transactions(0, 1),
            vec![],
            "ends before it begins"
        );
        assert_eq!(
            p.aborted_transactions(5, 100),
            vec![],
            "begins after its marker"
        );
        // Filtering is the reader's job: the log returns the records and the marker.
        let stored = read_all(p.log(), 0).await;
        assert_eq!(stored.len(), 4);
        let heads: Vec<_> = stored
            .iter()
            .map(|b| engine::batch::parse_header(b).unwrap())
            .collect();
        assert!(heads[1].is_transactional() && !heads[1].is_control());
        assert!(heads[3].is_control());
        assert_eq!(txn::marker_of(&stored[3]), Some(MarkerKind::Abort));
        // The index file holds it.
        let file = std::fs::read(dir.path().join(PDIR).join(txn::ABORTED_INDEX_FILE_NAME)).unwrap();
        assert_eq!(txn::decode_aborted_file(&file).unwrap(), vec![want]);
        // A retried marker (no open transaction) is written anyway and adds nothing.
        let again = p.write_marker(9, 2, MarkerKind::Abort, 0).await.unwrap();
        assert_eq!(again, 5);
        assert_eq!(p.aborted_transactions(0, u64::MAX), vec![want]);
        p.close().await.unwrap();
    });
}

#[test]
fn transactional_batches_need_a_begun_transaction_and_clients_send_no_markers() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let p = open_partition(&core, dir.path()).await;
        let r = produce(&p, &txn_batch(3, 0, 0, 1)).await;
        assert!(
            matches!(
                r,
                Err(PartitionError::TransactionNotBegun { producer_id: 3, .. })
            ),
            "{r:?}"
        );
        // Begun at another epoch is not begun.
        p.begin_transaction(3, 1).unwrap();
        let r = produce(&p, &txn_batch(3, 0, 0, 1)).await;
        assert!(
            matches!(r, Err(PartitionError::TransactionNotBegun { epoch: 0, .. })),
            "{r:?}"
        );
        let marker = txn::encode_marker(3, 1, MarkerKind::Commit, 0, 1);
        let r = produce(&p, &marker).await;
        assert!(
            matches!(r, Err(PartitionError::Log(LogError::InvalidBatch { .. }))),
            "{r:?}"
        );
        // Transactional without a producer id: refused as invalid.
        let anon = encode_transactional([rec("k", "v")], seq(-1, -1, -1));
        let r = produce(&p, &anon).await;
        assert!(
            matches!(r, Err(PartitionError::Log(LogError::InvalidBatch { .. }))),
            "{r:?}"
        );
        assert_eq!(p.log().log_end_offset(), 0, "nothing refused was stored");
        produce(&p, &txn_batch(3, 1, 0, 1)).await.unwrap();
        p.close().await.unwrap();
    });
}

#[test]
fn a_marker_with_a_bumped_epoch_fences_the_old_producer() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let p = open_partition(&core, dir.path()).await;
        p.begin_transaction(7, 0).unwrap();
        produce(&p, &txn_batch(7, 0, 0, 2)).await.unwrap();
        // The coordinator aborts the timed-out transaction at epoch 1.
        let m = p.write_marker(7, 1, MarkerKind::Abort, 0).await.unwrap();
        assert_eq!(m, 2);
        assert_eq!(
            p.aborted_transactions(0, 3),
            vec![AbortedTxn {
                producer_id: 7,
                first_offset: 0,
                last_offset: 2
            }]
        );
        fn fenced<T>(r: &Result<T, PartitionError>) -> bool {
            matches!(
                r,
                Err(PartitionError::FencedEpoch {
                    producer_id: 7,
                    current: 1,
                    got: 0,
                    ..
                })
            )
        }
        let late = produce(&p, &txn_batch(7, 0, 2, 1)).await;
        assert!(fenced(&late), "{late:?}");
        let plain = produce(
            &p,
            &encode_for_producer([rec("k", "v")], Some(seq(7, 0, 2))),
        )
        .await;
        assert!(fenced(&plain), "{plain:?}");
        let begin = p.begin_transaction(7, 0);
        assert!(fenced(&begin), "{begin:?}");
        let marker = p.write_marker(7, 0, MarkerKind::Commit, 0).await;
        assert!(fenced(&marker), "{marker:?}");
        // The new epoch starts its sequences at 0.
        p.begin_transaction(7, 1).unwrap();
        let r = produce(&p, &txn_batch(7, 1, 0, 1)).await.unwrap();
        assert_eq!(r.base_offset, 3);
        p.close().await.unwrap();
    });
}

/// An aborted transaction of producer 1, a committed one of producer 3, and an open one of
/// producer 2 at offset 3.
async fn mixed(p: &Partition) -> (AbortedTxn, u64) {
    p.begin_transaction(1, 0).unwrap();
    produce(p, &txn_batch(1, 0, 0, 2)).await.unwrap();
    let abort = p.write_marker(1, 0, MarkerKind::Abort, 0).await.unwrap();
    p.begin_transaction(2, 0).unwrap();
    let open = produce(p, &txn_batch(2, 0, 0, 1))
        .await
        .unwrap()
        .base_offset;
    p.begin_transaction(3, 4).unwrap();
    produce(p, &txn_batch(3, 4, 0, 1)).await.unwrap();
    p.write_marker(3, 4, MarkerKind::Commit, 0).await.unwrap();
    (
        AbortedTxn {
            producer_id: 1,
            first_offset: 0,
            last_offset: abort,
        },
        open,
    )
}

#[test]
fn reopen_and_crash_rebuild_open_transactions_the_lso_and_the_aborted_index() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let root = dir.path();
        let p = open_partition(&core, root).await;
        let (aborted, open) = mixed(&p).await;
        assert_eq!((aborted.last_offset, open), (2, 3));
        let hw = p.log().high_watermark();
        assert_eq!(p.last_stable_offset(), 3);
        p.close().await.unwrap();
        drop(p);

        let check = |p: &Partition| {
            assert_eq!(p.log().high_watermark(), hw);
            assert_eq!(p.ongoing_transactions(), vec![(2, 0, 3)]);
            assert_eq!(p.last_stable_offset(), 3);
            assert_eq!(p.aborted_transactions(0, u64::MAX), vec![aborted]);
        };
        let p = open_partition(&core, root).await;
        check(&p);
        // A crash (no close).
        drop(p);
        let p = open_partition(&core, root).await;
        check(&p);
        // The open transaction counts as begun: its producer goes on, then commits.
        produce(&p, &txn_batch(2, 0, 1, 1)).await.unwrap();
        // The producer's epoch came back from the commit marker: an older one is fenced.
        let r = p.begin_transaction(3, 3);
        assert!(
            matches!(r, Err(PartitionError::FencedEpoch { current: 4, .. })),
            "{r:?}"
        );
        p.write_marker(2, 0, MarkerKind::Commit, 0).await.unwrap();
        assert_eq!(p.last_stable_offset(), p.log().high_watermark());
        drop(p);
        let p = open_partition(&core, root).await;
        assert!(p.ongoing_transactions().is_empty());
        assert_eq!(p.last_stable_offset(), p.log().high_watermark());
        assert_eq!(p.aborted_transactions(0, u64::MAX), vec![aborted]);
        p.close().await.unwrap();
        drop(p);

        // The window scan restores a lost or damaged file (a crash between the abort marker
        // and the file's rewrite), and rewrites it.
        let file = root.join(PDIR).join(txn::ABORTED_INDEX_FILE_NAME);
        for damage in [0, 1] {
            if damage == 0 {
                std::fs::remove_file(&file).unwrap();
            } else {
                let mut b = std::fs::read(&file).unwrap();
                b[11] ^= 0xff;
                std::fs::write(&file, b).unwrap();
            }
            let p = open_partition(&core, root).await;
            assert_eq!(p.aborted_transactions(0, u64::MAX), vec![aborted]);
            let b = std::fs::read(&file).unwrap();
            assert_eq!(txn::decode_aborted_file(&b).unwrap(), vec![aborted]);
            p.close().await.unwrap();
        }

        // Entries beyond the rebuild window come from the file alone (one the log's tail does
        // not show: its marker lies, for the window, in the past).
        let older = AbortedTxn {
            producer_id: 77,
            first_offset: 0,
            last_offset: 1,
        };
        std::fs::write(&file, txn::encode_aborted_file(&[older, aborted])).unwrap();
        let p = open_partition(&core, root).await;
        assert_eq!(p.aborted_transactions(0, u64::MAX), vec![older, aborted]);
        assert_eq!(p.aborted_transactions(2, 3), vec![aborted]);
        p.close().await.unwrap();
    });
}

#[test]
fn compaction_keeps_every_marker_and_aborted_records_shadow_nothing() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let cfg = LogConfig {
            cleanup_policy: CleanupPolicy::COMPACT,
            ..small_config(16 << 10)
        };
        let p = open_with(&core, dir.path(), cfg).await;
        // Committed: a = committed (offset 0). Aborted: a = aborted (offset 2).
        p.begin_transaction(1, 0).unwrap();
        produce(
            &p,
            &encode_transactional([rec("a", "committed")], seq(1, 0, 0)),
        )
        .await
        .unwrap();
        p.write_marker(1, 0, MarkerKind::Commit, 0).await.unwrap();
        p.begin_transaction(1, 0).unwrap();
        produce(
            &p,
            &encode_transactional([rec("a", "aborted")], seq(1, 0, 1)),
        )
        .await
        .unwrap();
        p.write_marker(1, 0, MarkerKind::Abort, 0).await.unwrap();
        // Two commit markers of another producer: the same key bytes, both kept.
        for s in 0..2 {
            p.begin_transaction(2, 0).unwrap();
            produce(&p, &encode_transactional([rec("b", "x")], seq(2, 0, s)))
                .await
                .unwrap();
            p.write_marker(2, 0, MarkerKind::Commit, 0).await.unwrap();
        }
        // Plain records: the first c goes.
        produce(&p, &encode_for_producer([rec("c", "1")], None))
            .await
            .unwrap();
        produce(&p, &encode_for_producer([rec("c", "2")], None))
            .await
            .unwrap();
        let markers_before: Vec<u64> = read_all(p.log(), 0)
            .await
            .iter()
            .filter(|b| txn::marker_of(b).is_some())
            .map(|b| engine::batch::parse_header(b).unwrap().base_offset as u64)
            .collect();
        assert_eq!(markers_before, vec![1, 3, 5, 7]);
        p.log().roll().await.unwrap();
        produce(&p, &encode_for_producer([rec("d", "1")], None))
            .await
            .unwrap();
        let throttle = Throttle::new(None);
        let summary = p
            .clean(i64::MAX / 2, 1 << 20, &throttle)
            .await
            .unwrap()
            .expect("a pass ran");
        assert!(summary.records_removed >= 1, "{summary:?}");

        let stored = read_all(p.log(), 0).await;
        let markers: Vec<u64> = stored
            .iter()
            .filter(|b| txn::marker_of(b).is_some())
            .map(|b| engine::batch::parse_header(b).unwrap().base_offset as u64)
            .collect();
        assert_eq!(markers, markers_before, "every marker survives compaction");
        let mut kept: Vec<(u64, String)> = Vec::new();
        for b in &stored {
            let h = engine::batch::parse_header(b).unwrap();
            if h.is_control() {
                continue;
            }
            let sec = records::section(b, &h).unwrap();
            for r in records::parse(&sec, &h).unwrap() {
                let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                kept.push((h.base_offset as u64 + r.offset_delta as u64, key));
            }
        }
        assert!(
            kept.contains(&(0, "a".into())),
            "the committed a is not shadowed by the aborted one: {kept:?}"
        );
        assert!(
            !kept.contains(&(8, "c".into())),
            "the older c went: {kept:?}"
        );
        assert!(kept.contains(&(9, "c".into())));
        p.close().await.unwrap();
    });
}

#[test]
fn compaction_stops_at_an_open_transaction() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let cfg = LogConfig {
            cleanup_policy: CleanupPolicy::COMPACT,
            ..small_config(16 << 10)
        };
        let p = open_with(&core, dir.path(), cfg).await;
        p.begin_transaction(4, 0).unwrap();
        produce(&p, &encode_transactional([rec("a", "1")], seq(4, 0, 0)))
            .await
            .unwrap();
        produce(&p, &encode_for_producer([rec("c", "1")], None))
            .await
            .unwrap();
        produce(&p, &encode_for_producer([rec("c", "2")], None))
            .await
            .unwrap();
        p.log().roll().await.unwrap();
        produce(&p, &encode_for_producer([rec("d", "1")], None))
            .await
            .unwrap();
        let throttle = Throttle::new(None);
        let r = p.clean(i64::MAX / 2, 1 << 20, &throttle).await.unwrap();
        assert!(
            r.is_none(),
            "the open transaction's segment is not cleaned: {r:?}"
        );
        assert_eq!(read_all(p.log(), 0).await.len(), 4);
        p.write_marker(4, 0, MarkerKind::Commit, 0).await.unwrap();
        p.log().roll().await.unwrap();
        produce(&p, &encode_for_producer([rec("d", "2")], None))
            .await
            .unwrap();
        let s = p
            .clean(i64::MAX / 2, 1 << 20, &throttle)
            .await
            .unwrap()
            .expect("a pass ran once the transaction ended");
        assert!(s.records_removed >= 1, "{s:?}");
        p.close().await.unwrap();
    });
}

#[test]
fn a_control_record_of_no_producer_changes_no_transaction_and_survives_reopen() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let p = open_partition(&core, dir.path()).await;
        p.begin_transaction(5, 0).unwrap();
        produce(&p, &txn_batch(5, 0, 0, 2)).await.unwrap();
        let at = p
            .write_control_record(1000, b"barrier".to_vec(), 1_724_500_000_000)
            .await
            .unwrap();
        assert_eq!(at, 2);
        assert_eq!(p.log().high_watermark(), 3);
        assert_eq!(
            p.last_stable_offset(),
            0,
            "the open transaction still holds it"
        );
        assert_eq!(p.ongoing_transactions(), vec![(5, 0, 0)]);
        let stored = read_all(p.log(), 0).await;
        let h = engine::batch::parse_header(&stored[1]).unwrap();
        assert!(h.is_control() && !h.is_transactional());
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (-1, -1, -1)
        );
        assert_eq!(txn::marker_of(&stored[1]), None, "not an end marker");
        let (kind, value) = txn::control_record_of(&stored[1]).unwrap();
        assert_eq!((kind, value.as_deref()), (1000, Some(&b"barrier"[..])));
        p.write_marker(5, 0, MarkerKind::Commit, 0).await.unwrap();
        assert_eq!(p.last_stable_offset(), 4);
        p.close().await.unwrap();
        let p = open_partition(&core, dir.path()).await;
        assert_eq!(p.log().high_watermark(), 4);
        assert!(p.ongoing_transactions().is_empty());
        p.close().await.unwrap();
    });
}
