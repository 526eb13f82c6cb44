//! Log compaction (`PartitionLog::clean`): the latest record per key survives with its offset,
//! tombstones stay until their delete horizon, compressed batches keep their codec, readers
//! running during a pass always see whole valid batches in offset order, the result survives
//! a clean reopen and a crash, and an interrupted swap is finished or undone on open.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;

use bytes::Bytes;
use common::*;
use engine::batch::records;
use engine::batch_encode::{encode_uncompressed, NewRecord};
use engine::cleaner::Throttle;
use engine::log::CleanReason;
use engine::record_check::{BatchRules, ValidBatch};
use engine::{CleanupPolicy, Durability, LogConfig, PartitionLog};

const KEYS: usize = 50;
const RECORDS: usize = 2_000;
const PER_BATCH: usize = 10;
const DELETE_RETENTION_MS: i64 = 60_000;
const T0: i64 = 1_700_000_000_000;

fn compacted_config() -> LogConfig {
    LogConfig {
        cleanup_policy: CleanupPolicy::COMPACT,
        delete_retention_ms: DELETE_RETENTION_MS,
        ..small_config(16 << 10)
    }
}

/// Record `i`: key `key-<i % KEYS>`, value `v<i>`; key 7's last few versions are tombstones.
fn record(i: usize) -> NewRecord {
    NewRecord {
        key: Some(Bytes::from(format!("key-{}", i % KEYS))),
        value: (!(i % KEYS == 7 && i > RECORDS - 200)).then(|| Bytes::from(format!("v{i}"))),
        timestamp_ms: T0 + i as i64,
        ..Default::default()
    }
}

fn compress(b: &[u8], codec: i16) -> Vec<u8> {
    if codec == 0 {
        return b.to_vec();
    }
    let h = engine::batch::HEADER_BYTES;
    let c = engine::compression::compress(codec, &b[h..], false).unwrap();
    engine::batch::with_records_section(b, codec, &c)
}

async fn fill(log: &Rc<PartitionLog>, codec: i16) {
    for start in (0..RECORDS).step_by(PER_BATCH) {
        let b = compress(
            &encode_uncompressed((start..start + PER_BATCH).map(record)),
            codec,
        );
        log.append(&b, Durability::Sync).await.expect("append");
    }
    log.roll().await.expect("roll");
}

/// A compacted log in a temp dir holding the `RECORDS` records, rolled (all in closed
/// segments), its batches written with `codec`.
async fn filled_log(codec: i16) -> (tempfile::TempDir, Rc<engine::CoreStorage>, Rc<PartitionLog>) {
    let dir = tempfile::tempdir().unwrap();
    let core = core(dir.path(), 4).await;
    let (log, _) = open(&core, dir.path(), compacted_config()).await;
    fill(&log, codec).await;
    (dir, core, log)
}

/// Every record in the log: offset → (key, value or None for a tombstone).
async fn contents(log: &PartitionLog) -> BTreeMap<u64, (String, Option<String>)> {
    let mut out = BTreeMap::new();
    let mut last = None;
    for b in read_all(log, log.log_start_offset()).await {
        let h = engine::batch::validate_stored(&b).unwrap();
        let sec = records::section(&b, &h).unwrap();
        for r in records::parse(&sec, &h).unwrap() {
            let off = h.base_offset as u64 + r.offset_delta as u64;
            assert!(
                last.is_none_or(|l| off > l),
                "offsets increase: {off} after {last:?}"
            );
            last = Some(off);
            let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            let value = (!r.tombstone).then(|| {
                let value_off = off as usize;
                format!("v{value_off}")
            });
            out.insert(off, (key, value));
        }
    }
    out
}

fn latest_per_key() -> BTreeMap<u64, (String, Option<String>)> {
    let mut last: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..RECORDS {
        last.insert(format!("key-{}", i % KEYS), i);
    }
    last.into_iter()
        .map(|(k, i)| {
            let r = record(i);
            (i as u64, (k, r.value.map(|_| format!("v{i}"))))
        })
        .collect()
}

async fn clean(log: &Rc<PartitionLog>, now_ms: i64) -> Option<engine::log::CleanSummary> {
    let throttle = Throttle::new(None);
    log.clean(&engine::log::CleanOptions {
        now_ms,
        dedupe_buffer_bytes: 1 << 20,
        throttle: &throttle,
        keep_batches: &HashSet::new(),
        aborted: &[],
        first_unstable_offset: u64::MAX,
    })
    .await
    .expect("clean")
}

#[test]
fn the_latest_record_per_key_survives_with_its_offset() {
    run(|| async {
        let (dir, core, log) = filled_log(0).await;
        let before = log.size_bytes();
        let info = log.dirty_info(T0).expect("compacted");
        assert_eq!(info.due, Some(CleanReason::DirtyRatio));
        assert_eq!(info.dirty_ratio, 1.0);

        // Readers keep reading while the pass runs: every read is whole, valid, in order.
        let reader_log = log.clone();
        let reader = glommio::spawn_local(async move {
            let mut reads = 0;
            for _ in 0..30 {
                let all = contents(&reader_log).await;
                assert!(all.len() >= KEYS, "a read sees at least the live keys");
                reads += 1;
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            }
            reads
        });
        let s = clean(&log, T0 + 1_000).await.expect("a pass was due");
        assert!(!s.abandoned, "{s:?}");
        assert_eq!(s.keys, KEYS);
        assert_eq!(s.records_removed, (RECORDS - KEYS) as u64);
        assert!(reader.await >= 30);

        let want = latest_per_key();
        assert_eq!(contents(&log).await, want);
        assert!(
            log.size_bytes() < before / 10,
            "{before} -> {} bytes",
            log.size_bytes()
        );
        assert_eq!(log.log_start_offset(), 0, "offsets never change");
        let after = log.dirty_info(T0 + 1_000).unwrap();
        assert_eq!((after.dirty_bytes, after.due), (0, None));

        // A clean reopen and a crash (no close) both read the same.
        log.close().await.unwrap();
        let (log, _) = open(&core, dir.path(), compacted_config()).await;
        assert_eq!(contents(&log).await, want);
        drop(log);
        // Untouched since its clean open, the log is still clean after a crash; without its
        // marker (a crash before the first one was written) every segment is scanned.
        std::fs::remove_file(
            dir.path()
                .join("topics/t/p00000")
                .join(engine::recovery_marker::MARKER_FILE_NAME),
        )
        .unwrap();
        let (log, summary) = open(&core, dir.path(), compacted_config()).await;
        assert!(!summary.clean_shutdown);
        assert_eq!(contents(&log).await, want);

        // The tombstone of key-7 stays until its horizon (a day after the pass), then goes.
        assert_eq!(log.dirty_info(T0 + 2_000).unwrap().due, None);
        let due_at = T0 + 1_000 + DELETE_RETENTION_MS;
        assert_eq!(
            log.dirty_info(due_at).unwrap().due,
            Some(CleanReason::TombstonesDue)
        );
        let s = clean(&log, due_at).await.expect("tombstones due");
        assert_eq!(s.records_removed, 1);
        let mut want = want;
        want.retain(|_, (k, _)| k != "key-7");
        assert_eq!(contents(&log).await, want);
        assert_eq!(log.dirty_info(due_at).unwrap().due, None);
    });
}

#[test]
fn compressed_batches_keep_their_codec() {
    run(|| async {
        for codec in 1..=4i16 {
            let (_dir, _core, log) = filled_log(codec).await;
            clean(&log, T0 + 1_000).await.expect("due");
            assert_eq!(contents(&log).await, latest_per_key(), "codec {codec}");
            for b in read_all(&log, 0).await {
                let h = engine::batch::parse_header(&b).unwrap();
                assert_eq!(h.compression(), codec);
            }
        }
    });
}

#[test]
fn a_small_dedupe_buffer_cleans_in_several_passes() {
    run(|| async {
        let (_dir, _core, log) = filled_log(0).await;
        let throttle = Throttle::new(Some(50 << 20));
        let mut passes = 0;
        // 24 slots × 3/4: room for 18 keys per pass, so the 50 keys need several.
        while let Some(s) = log
            .clean(&engine::log::CleanOptions {
                now_ms: T0 + 1_000,
                dedupe_buffer_bytes: 24 * 24,
                throttle: &throttle,
                keep_batches: &HashSet::new(),
                aborted: &[],
                first_unstable_offset: u64::MAX,
            })
            .await
            .unwrap()
        {
            passes += 1;
            assert!(s.keys <= 18, "{s:?}");
            assert!(passes < 500, "passes make progress");
            if log.dirty_info(T0 + 1_000).unwrap().dirty_bytes == 0 {
                break;
            }
        }
        assert!(passes > 1, "{passes} passes");
        assert_eq!(contents(&log).await, latest_per_key());
    });
}

#[test]
fn compacted_logs_refuse_keyless_records() {
    let b = encode_uncompressed([NewRecord {
        key: None,
        value: Some(Bytes::from_static(b"v")),
        ..Default::default()
    }]);
    let rules = BatchRules {
        max_bytes: 1 << 20,
        require_keys: true,
        timestamps: None,
    };
    let e = ValidBatch::new(&b, rules).unwrap_err();
    assert!(
        matches!(e, engine::batch::BatchError::MissingKey { record: 0 }),
        "{e}"
    );
    assert!(ValidBatch::new(&b, BatchRules::max_bytes(1 << 20)).is_ok());
}

#[test]
fn an_interrupted_swap_is_finished_or_undone_on_open() {
    run(|| async {
        // Two real logs cleaned the same way; in the second the swap "crashed" at its commit
        // point (cleaned files and swap record written, nothing renamed yet).
        let (dir, core, log) = filled_log(0).await;
        log.close().await.unwrap();
        let pdir = dir.path().join("topics/t/p00000");
        let names = |d: &std::path::Path| {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.ends_with(".log"))
                .collect();
            v.sort();
            v
        };
        let segs = names(&pdir);
        assert!(segs.len() > 3);
        let base = |n: &str| engine::segment::parse_log_name(n).unwrap();
        let (b0, b1) = (base(&segs[0]), base(&segs[1]));

        // No swap record: leftover cleaned files are removed, the old segments stay.
        let junk = engine::cleaner::swap::cleaned_paths(&pdir, b0);
        for p in &junk {
            std::fs::write(p, b"half written").unwrap();
        }
        let (log, _) = open(&core, dir.path(), compacted_config()).await;
        assert!(junk.iter().all(|p| !p.exists()));
        assert_eq!(names(&pdir), segs);
        let full = contents(&log).await;
        assert_eq!(full.len(), RECORDS);
        log.close().await.unwrap();

        // A committed swap of segments 0 and 1 into one (here: segment 0's files again, a
        // valid stand-in for a cleaned segment that lost segment 1's records): open finishes
        // it — segment 1 is gone, and the log reads on across the gap it left.
        for (from, to) in engine::segment::paths(&pdir, b0)
            .iter()
            .zip(engine::cleaner::swap::cleaned_paths(&pdir, b0))
        {
            std::fs::copy(from, to).unwrap();
        }
        std::fs::write(
            pdir.join(engine::cleaner::swap::SWAP_FILE_NAME),
            format!("v1 {b0} {b1}\n"),
        )
        .unwrap();
        let (log, _) = open(&core, dir.path(), compacted_config()).await;
        assert!(!pdir.join(engine::cleaner::swap::SWAP_FILE_NAME).exists());
        let now = names(&pdir);
        assert_eq!(now.len(), segs.len() - 1);
        assert!(!now.contains(&segs[1]));
        let got = contents(&log).await;
        let want: BTreeMap<_, _> = full
            .into_iter()
            .filter(|(o, _)| *o < b1 || *o >= base(&segs[2]))
            .collect();
        assert_eq!(got, want);
    });
}

/// `n` records with keys `k0..k<n>` and values tagged `tag`, as producer `pid`'s batch from
/// sequence `seq`.
fn producer_batch(tag: &str, n: usize, pid: i64, seq: i32) -> Vec<u8> {
    engine::batch_encode::encode_for_producer(
        (0..n).map(|i| NewRecord {
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("{tag}-{i}"))),
            timestamp_ms: T0,
            ..Default::default()
        }),
        Some(engine::batch_encode::ProducerSeq {
            producer_id: pid,
            epoch: 0,
            base_sequence: seq,
        }),
    )
}

#[test]
fn an_idempotent_producer_continues_after_its_batches_are_cleaned_away() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let core = core(dir.path(), 4).await;
        let pdir = dir.path().join("topics/t/p00000");
        let open = || engine::Partition::open(&core, pdir.clone(), "inc", compacted_config());
        let (p, _) = open().await.unwrap();
        let produce = |p: Rc<engine::Partition>, b: Vec<u8>| async move {
            let v = ValidBatch::new(&b, BatchRules::max_bytes(1 << 20)).unwrap();
            p.produce(v, Durability::Sync).await
        };
        // Producer 7's two batches are overwritten by producer 8's: every record of 7 loses.
        produce(p.clone(), producer_batch("a", 10, 7, 0))
            .await
            .unwrap();
        let last7 = produce(p.clone(), producer_batch("b", 10, 7, 10))
            .await
            .unwrap();
        produce(p.clone(), producer_batch("c", 10, 8, 0))
            .await
            .unwrap();
        p.log().roll().await.unwrap();
        let throttle = Throttle::new(None);
        let s = p
            .clean(T0 + 1, 1 << 20, &throttle)
            .await
            .unwrap()
            .expect("due");
        assert_eq!(s.records_removed, 20);
        // Producer 7's newest batch stays, emptied, so its sequence survives a reopen.
        let batches = read_all(p.log(), 0).await;
        let heads: Vec<_> = batches
            .iter()
            .map(|b| engine::batch::parse_header(b).unwrap())
            .map(|h| (h.base_offset, h.records_count, h.producer_id))
            .collect();
        assert_eq!(heads, vec![(10, 0, 7), (20, 10, 8)]);
        p.close().await.unwrap();
        let (p, _) = open().await.unwrap();
        // A retry of the emptied batch is still a duplicate with its offsets; the next
        // sequence is accepted.
        let retry = produce(p.clone(), producer_batch("b", 10, 7, 10))
            .await
            .unwrap();
        assert!(retry.duplicate);
        assert_eq!(retry.base_offset, last7.base_offset);
        let next = produce(p.clone(), producer_batch("d", 10, 7, 20))
            .await
            .unwrap();
        assert_eq!((next.base_offset, next.duplicate), (30, false));
    });
}

#[test]
fn retention_deletes_a_compacted_log_only_under_compact_delete() {
    run(|| async {
        for (policy, deletes) in [
            (CleanupPolicy::COMPACT, false),
            (
                CleanupPolicy {
                    delete: true,
                    compact: true,
                },
                true,
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let core = core(dir.path(), 4).await;
            let cfg = LogConfig {
                cleanup_policy: policy,
                retention_ms: Some(1_000),
                ..compacted_config()
            };
            let (log, _) = open(&core, dir.path(), cfg).await;
            fill(&log, 0).await;
            let r = log.enforce_retention(T0 + 10 * 86_400_000).await.unwrap();
            assert_eq!(!r.deleted_segments.is_empty(), deletes, "{policy}");
        }
    });
}

#[test]
fn a_close_stops_a_pass_and_leaves_no_cleaned_files() {
    run(|| async {
        let (dir, core, log) = filled_log(0).await;
        let before = contents(&log).await;
        // A slow pass (100 KB/s: seconds for this log), closed under it.
        let pass_log = log.clone();
        let pass = glommio::spawn_local(async move {
            let throttle = Throttle::new(Some(100_000));
            pass_log
                .clean(&engine::log::CleanOptions {
                    now_ms: T0 + 1_000,
                    dedupe_buffer_bytes: 1 << 20,
                    throttle: &throttle,
                    keep_batches: &HashSet::new(),
                    aborted: &[],
                    first_unstable_offset: u64::MAX,
                })
                .await
        });
        glommio::timer::sleep(std::time::Duration::from_millis(300)).await;
        log.close().await.unwrap();
        let result = pass.await;
        assert!(
            matches!(result, Ok(None)) || matches!(&result, Ok(Some(s)) if s.abandoned),
            "{result:?}"
        );
        let pdir = dir.path().join("topics/t/p00000");
        let leftovers: Vec<String> = std::fs::read_dir(&pdir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains("cleaned") || n.contains("swap"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let (log, _) = open(&core, dir.path(), compacted_config()).await;
        assert_eq!(contents(&log).await, before);
    });
}

#[test]
fn a_full_recovery_scan_keeps_cleaned_segments() {
    run(|| async {
        let (dir, core, log) = filled_log(0).await;
        clean(&log, T0 + 1_000).await.expect("due");
        let want = contents(&log).await;
        let segments = log.segment_count();
        log.close().await.unwrap();
        // Without its marker every segment is scanned, cleaned ones too (gaps, emptied tails).
        std::fs::remove_file(dir.path().join("topics/t/p00000/recovery.marker")).unwrap();
        let (log, summary) = open(&core, dir.path(), compacted_config()).await;
        assert!(summary.segments_scanned >= segments, "{summary:?}");
        assert!(summary.segments_deleted.is_empty(), "{summary:?}");
        assert_eq!(contents(&log).await, want);
        assert_eq!(log.segment_count(), segments);
    });
}

#[test]
fn max_compaction_lag_forces_a_pass_below_the_dirty_ratio() {
    run(|| async {
        let (_dir, _core, log) = filled_log(0).await;
        clean(&log, T0 + 1_000).await.expect("due");
        // A little new dirty data, far below the 0.5 ratio, first batch at T0 + 5 s.
        let late = T0 + 5_000;
        let b = encode_uncompressed((0..5).map(|i| NewRecord {
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from_static(b"late")),
            timestamp_ms: late,
            ..Default::default()
        }));
        log.append(&b, Durability::Sync).await.unwrap();
        log.roll().await.unwrap();
        let mut cfg = log.config();
        cfg.max_compaction_lag_ms = 10_000;
        log.set_config(cfg).unwrap();
        let early = log.dirty_info(late + 9_000).unwrap();
        assert!(
            early.dirty_ratio < 0.5 && early.dirty_bytes > 0,
            "{early:?}"
        );
        assert_eq!(early.due, None);
        let overdue = log.dirty_info(late + 10_001).unwrap();
        assert_eq!(overdue.due, Some(CleanReason::MaxCompactionLag));
        // A compacted log's active segment rolls by the max lag too.
        assert_eq!(log.config().roll_after_ms(), 10_000);
    });
}
