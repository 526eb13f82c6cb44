//! What moves the log start offset: retention (whole closed segments past `retention.ms` or
//! `retention.bytes`) and DeleteRecords (any offset up to the high watermark, kept in
//! `log-start-offset`). Both delete whole closed segments below the log start the same way.

use super::{DeleteBefore, LogError, PartitionLog, RetentionSummary, State};
use crate::io;
use crate::log_start;
use crate::segment;

impl PartitionLog {
    /// Deletes whole closed segments past `retention_ms` (by their newest record timestamp) or
    /// beyond `retention_bytes`, oldest first, and advances the log start offset; only under
    /// a `cleanup.policy` with `delete`. Closed segments wholly below the log start offset (a
    /// DeleteRecords whose deletion a cleaner swap deferred) go under any policy.
    pub async fn enforce_retention(&self, now_ms: i64) -> Result<RetentionSummary, LogError> {
        if self.swap_in_progress() {
            // The cleaner is replacing segments; the next round looks again.
            return Ok(RetentionSummary {
                deleted_segments: Vec::new(),
                log_start_offset: self.log_start_offset(),
            });
        }
        let (doomed, log_start) = {
            let mut st = self.st.borrow_mut();
            self.check_usable(&st)?;
            let active_len = st.active.as_ref().map_or(0, |a| a.log.len());
            let mut total: u64 = st.closed.values().map(|s| s.size_bytes).sum::<u64>() + active_len;
            let mut doomed = Vec::new();
            let cfg = self.config.borrow();
            // `cleanup.policy=compact` alone keeps every segment (the cleaner shrinks them).
            let deletes = cfg.cleanup_policy.delete;
            for seg in st.closed.values() {
                let below_start = seg.next_offset <= st.log_start_offset;
                let by_time = cfg.retention_ms.is_some_and(|r| {
                    seg.max_timestamp_ms >= 0 && seg.max_timestamp_ms < now_ms - r
                });
                let by_size = cfg
                    .retention_bytes
                    .is_some_and(|r| total - seg.size_bytes >= r);
                if !(below_start || deletes && (by_time || by_size)) {
                    break;
                }
                total -= seg.size_bytes;
                doomed.push(seg.base_offset);
            }
            drop(cfg);
            let start = forget_segments(&mut st, &doomed);
            (doomed, start)
        };
        self.remove_segment_files(&doomed, "retention").await?;
        Ok(RetentionSummary {
            deleted_segments: doomed,
            log_start_offset: log_start,
        })
    }

    /// DeleteRecords: moves the log start offset to `before` (Kafka's semantics: at most the
    /// high watermark, else `OffsetOutOfRange`; at or below the current log start nothing
    /// changes), durably (`log-start-offset`) before it returns, and deletes the closed
    /// segments wholly below it (unless a cleaner swap is under way: retention's next round
    /// does it then). Reads below it are `OffsetOutOfRange` from then on. Refused with
    /// `DeleteNotAllowed` when the `cleanup.policy` has no `delete` (as Kafka). Returns the log
    /// start offset after the call.
    pub async fn delete_records(&self, before: DeleteBefore) -> Result<u64, LogError> {
        let _one_writer = self
            .log_start_writer
            .acquire_permit(1)
            .await
            .expect("the semaphore is never closed");
        let target = {
            let st = self.st.borrow();
            self.check_usable(&st)?;
            if !self.config.borrow().cleanup_policy.delete {
                return Err(LogError::DeleteNotAllowed {
                    dir: self.dir_name(),
                });
            }
            let target = match before {
                DeleteBefore::HighWatermark => st.visible_end(),
                DeleteBefore::Offset(o) => o,
            };
            if target > st.visible_end() {
                return Err(LogError::OffsetOutOfRange {
                    dir: self.dir_name(),
                    requested: target,
                    log_start: st.log_start_offset,
                    high_watermark: st.visible_end(),
                });
            }
            if target <= st.log_start_offset {
                return Ok(st.log_start_offset);
            }
            target
        };
        log_start::store(&self.dir, target)
            .await
            .map_err(|e| self.io_err(e))?;
        let swapping = self.swap_in_progress();
        let doomed = {
            let mut st = self.st.borrow_mut();
            // Retention may have moved it further meanwhile.
            let to = target.max(st.log_start_offset);
            st.advance_log_start(to);
            st.notify();
            if swapping {
                Vec::new()
            } else {
                let doomed: Vec<u64> = st
                    .closed
                    .values()
                    .take_while(|s| s.next_offset <= to)
                    .map(|s| s.base_offset)
                    .collect();
                forget_segments(&mut st, &doomed);
                doomed
            }
        };
        tracing::info!(dir = %self.dir.display(), log_start = target, "records deleted");
        self.remove_segment_files(&doomed, "delete records").await?;
        Ok(self.log_start_offset())
    }

    /// Removes the files of segments already taken out of the state, then syncs the dir.
    async fn remove_segment_files(&self, doomed: &[u64], why: &str) -> Result<(), LogError> {
        for base in doomed {
            self.core.evict(self.id, *base);
            io::remove_all_of(segment::paths(&self.dir, *base).to_vec())
                .await
                .map_err(|e| self.io_err(e))?;
            tracing::info!(dir = %self.dir.display(), segment = base, why, "deleted segment");
        }
        if !doomed.is_empty() {
            io::sync_dir(&self.dir).await.map_err(|e| self.io_err(e))?;
        }
        Ok(())
    }
}

/// Takes closed segments `doomed` out of the state and advances the log start offset to the
/// first remaining segment (never below where it is). Returns the log start offset.
fn forget_segments(st: &mut State, doomed: &[u64]) -> u64 {
    for b in doomed {
        st.closed.remove(b);
    }
    if !doomed.is_empty() {
        st.cleaner.segments_changed();
    }
    let first_segment = st
        .closed
        .keys()
        .next()
        .copied()
        .or(st.active.as_ref().map(|a| a.base_offset))
        .unwrap_or(st.next_offset);
    let start = first_segment.max(st.log_start_offset);
    st.advance_log_start(start);
    start
}
