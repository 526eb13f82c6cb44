//! Retention: whole closed segments past `retention.ms` or `retention.bytes`.

use super::{LogError, PartitionLog, RetentionSummary};
use crate::io;
use crate::segment;

impl PartitionLog {
    /// Deletes whole closed segments past `retention_ms` (by their newest record timestamp) or
    /// beyond `retention_bytes`, oldest first, and advances the log start offset; only under
    /// a `cleanup.policy` with `delete`.
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
            for seg in st.closed.values().take_while(|_| deletes) {
                let by_time = cfg.retention_ms.is_some_and(|r| {
                    seg.max_timestamp_ms >= 0 && seg.max_timestamp_ms < now_ms - r
                });
                let by_size = cfg
                    .retention_bytes
                    .is_some_and(|r| total - seg.size_bytes >= r);
                if !(by_time || by_size) {
                    break;
                }
                total -= seg.size_bytes;
                doomed.push(seg.base_offset);
            }
            drop(cfg);
            for b in &doomed {
                st.closed.remove(b);
            }
            if !doomed.is_empty() {
                st.cleaner.segments_changed();
            }
            let start = st
                .closed
                .keys()
                .next()
                .copied()
                .or(st.active.as_ref().map(|a| a.base_offset))
                .unwrap_or(st.next_offset);
            assert!(start >= st.log_start_offset, "log start never moves back");
            st.log_start_offset = start;
            (doomed, start)
        };
        for base in &doomed {
            self.core.evict(self.id, *base);
            io::remove_all_of(segment::paths(&self.dir, *base).to_vec())
                .await
                .map_err(|e| self.io_err(e))?;
            tracing::info!(dir = %self.dir.display(), segment = base, "retention deleted segment");
        }
        if !doomed.is_empty() {
            io::sync_dir(&self.dir).await.map_err(|e| self.io_err(e))?;
        }
        Ok(RetentionSummary {
            deleted_segments: doomed,
            log_start_offset: log_start,
        })
    }
}
