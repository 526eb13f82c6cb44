//! DeleteRecords (`Partition::delete_records`): the log start offset moves to any offset up to
//! the high watermark, durably (`log-start-offset`), never back; reads below it are
//! `OffsetOutOfRange`; whole segments below it are deleted; a reopen after a clean close or a
//! crash (drop without close) keeps it; retention and the aborted index respect it.

mod common;

use std::path::Path;
use std::rc::Rc;

use common::*;
use engine::log::DeleteBefore;
use engine::{CoreStorage, Durability, LogError, Partition, PartitionError};

const DIR: &str = "topics/t/p00000";
/// Small segments, so 40 batches of ~1 KiB make several of them.
const SEGMENT_BYTES: u64 = 8 << 10;

async fn open_partition(core: &Rc<CoreStorage>, root: &Path) -> Rc<Partition> {
    Partition::open(core, root.join(DIR), "inc-1", small_config(SEGMENT_BYTES))
        .await
        .expect("partition opens")
        .0
}

/// Appends `n` batches of 2 records (offsets 2i, 2i+1), durably.
async fn fill(p: &Partition, n: u64) {
    for i in 0..n {
        p.log()
            .append(&batch(i, 2, 500, 1_000 + i as i64), Durability::Sync)
            .await
            .unwrap();
    }
}

fn segment_bases(root: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(root.join(DIR))
        .unwrap()
        .filter_map(|e| engine::segment::parse_log_name(e.unwrap().file_name().to_str()?))
        .collect();
    v.sort_unstable();
    v
}

fn out_of_range<T: std::fmt::Debug>(r: Result<T, LogError>) -> bool {
    matches!(r, Err(LogError::OffsetOutOfRange { .. }))
}

#[test]
fn delete_records_mid_segment_survives_clean_and_crash_reopen() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let core = core(&root, 4).await;
        let p = open_partition(&core, &root).await;
        fill(&p, 40).await;
        let hw = p.log().high_watermark();
        assert_eq!(hw, 80);
        let before = segment_bases(&root);
        assert!(before.len() > 3, "small segments rolled: {before:?}");
        // An offset in the middle of a segment that is not the first (and not on a batch
        // boundary).
        let target = before[2] + 3;
        assert_eq!(
            p.delete_records(DeleteBefore::Offset(target))
                .await
                .unwrap(),
            target
        );
        assert_eq!(p.log().log_start_offset(), target);
        assert!(root.join(DIR).join("log-start-offset").exists());
        assert_eq!(
            segment_bases(&root),
            before[2..].to_vec(),
            "the whole segments below the new start are gone, the one holding it stays"
        );
        assert!(out_of_range(p.log().read(target - 1, 1 << 20).await));
        assert!(out_of_range(p.log().read(0, 1 << 20).await));
        let got = split_batches(&p.log().read(target, 1 << 20).await.unwrap());
        let first = engine::batch::parse_header(&got[0]).unwrap();
        assert!(
            first.base_offset as u64 <= target && target <= first.last_offset() as u64,
            "a read at the start begins with the batch holding it"
        );
        // Backwards is a no-op answered with the current start; past the high watermark is
        // out of range and changes nothing.
        assert_eq!(
            p.delete_records(DeleteBefore::Offset(1)).await.unwrap(),
            target
        );
        let beyond = p.delete_records(DeleteBefore::Offset(hw + 1)).await;
        assert!(
            matches!(
                beyond,
                Err(PartitionError::Log(LogError::OffsetOutOfRange { .. }))
            ),
            "{beyond:?}"
        );
        assert_eq!(p.log().log_start_offset(), target);
        p.close().await.unwrap();

        // Clean reopen.
        let p = open_partition(&core, &root).await;
        assert_eq!(
            p.log().log_start_offset(),
            target,
            "kept over a clean close"
        );
        assert!(out_of_range(p.log().read(target - 1, 1 << 20).await));
        // Retention respects it: nothing below the start comes back, the start never moves
        // back.
        let summary = p.log().enforce_retention(i64::MAX / 2).await.unwrap();
        assert!(summary.log_start_offset >= target);
        fill(&p, 5).await;
        let target2 = p.log().high_watermark() - 1;
        assert_eq!(
            p.delete_records(DeleteBefore::Offset(target2))
                .await
                .unwrap(),
            target2
        );
        // Crash: drop without close, reopen scans and still has it.
        drop(p);
        let p = open_partition(&core, &root).await;
        assert_eq!(p.log().log_start_offset(), target2, "kept over a crash");
        assert!(out_of_range(p.log().read(target2 - 1, 1 << 20).await));
        let bases = segment_bases(&root);
        assert!(
            bases[0] <= target2 && bases.get(1).is_none_or(|b| *b > target2),
            "only the segment holding the start and later ones stay: {bases:?}"
        );
        // -1: everything up to the high watermark; reads at it are empty, appends go on.
        let hw = p.log().high_watermark();
        assert_eq!(
            p.delete_records(DeleteBefore::HighWatermark).await.unwrap(),
            hw
        );
        assert!(p.log().read(hw, 1 << 20).await.unwrap().is_empty());
        fill(&p, 1).await;
        assert_eq!(read_all(p.log(), hw).await.len(), 1);
        p.close().await.unwrap();
    });
}

#[test]
fn segments_left_below_the_start_by_a_crash_are_deleted_on_open() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let core = core(&root, 4).await;
        let p = open_partition(&core, &root).await;
        fill(&p, 40).await;
        let bases = segment_bases(&root);
        p.close().await.unwrap();
        // As if the broker died after the file was durable but before the deletion.
        let target = bases[3] + 1;
        std::fs::write(
            root.join(DIR).join("log-start-offset"),
            engine::log_start::encode(target),
        )
        .unwrap();
        let p = open_partition(&core, &root).await;
        assert_eq!(p.log().log_start_offset(), target);
        assert_eq!(segment_bases(&root), bases[3..].to_vec());
        // A stored start past the recovered end is cut back to the end.
        p.close().await.unwrap();
        std::fs::write(
            root.join(DIR).join("log-start-offset"),
            engine::log_start::encode(1_000_000),
        )
        .unwrap();
        let p = open_partition(&core, &root).await;
        assert_eq!(p.log().log_start_offset(), 80);
        assert_eq!(
            engine::log_start::decode(
                &std::fs::read(root.join(DIR).join("log-start-offset")).unwrap()
            ),
            Ok(80)
        );
        p.close().await.unwrap();
    });
}

#[test]
fn a_compact_only_log_refuses_delete_records() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    run(move || async move {
        let core = core(&root, 4).await;
        let mut config = small_config(SEGMENT_BYTES);
        config.cleanup_policy = engine::CleanupPolicy {
            compact: true,
            delete: false,
        };
        let (p, _) = Partition::open(&core, root.join(DIR), "inc-1", config)
            .await
            .unwrap();
        fill(&p, 3).await;
        let r = p.delete_records(DeleteBefore::Offset(2)).await;
        assert!(
            matches!(
                r,
                Err(PartitionError::Log(LogError::DeleteNotAllowed { .. }))
            ),
            "{r:?}"
        );
        assert_eq!(p.log().log_start_offset(), 0);
        p.close().await.unwrap();
    });
}
