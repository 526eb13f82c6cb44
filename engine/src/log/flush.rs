//! Group commit: one flush in flight, fdatasync, high watermark, poisoning.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::{LogError, PartitionLog};

impl PartitionLog {
    pub(super) fn schedule_flush(self: &Rc<Self>) {
        {
            let mut st = self.st.borrow_mut();
            if st.flush_scheduled {
                return;
            }
            st.flush_scheduled = true;
        }
        let me = self.clone();
        glommio::spawn_local(async move {
            let target = {
                let mut st = me.st.borrow_mut();
                st.flush_scheduled = false;
                st.next_offset
            };
            if let Err(e) = me.sync_to(target).await {
                tracing::debug!(error = %e, "background flush failed");
            }
        })
        .detach();
    }

    /// Waits until everything below `target` is durable, starting a flush when none is in
    /// flight (group commit: whoever finds the flusher idle starts one for everyone).
    ///
    /// The flush runs as its own task, not inside the caller: a caller that is cancelled
    /// (a fan-out cursor stopped mid-commit, say) cannot leave a flush half done, with its
    /// blocks taken from the tail but never written, or `io_busy` held forever.
    pub async fn sync_to(self: &Rc<Self>, target: u64) -> Result<(), LogError> {
        loop {
            let (gen, start_flush) = {
                let mut st = self.st.borrow_mut();
                if st.high_watermark >= target {
                    return Ok(());
                }
                self.check_usable(&st)?;
                let start_flush = !st.io_busy;
                st.io_busy = true;
                (st.change_gen, start_flush)
            };
            if start_flush {
                // Outside the borrow: the flush task borrows the state itself.
                self.spawn_flush();
            }
            self.wait_change(gen).await;
        }
    }

    /// Runs one flush in its own task; the caller has taken `io_busy` for it. Its failure
    /// poisons the log, which every waiter then sees.
    fn spawn_flush(self: &Rc<Self>) {
        let me = self.clone();
        glommio::spawn_local(async move {
            let res = me.flush_once().await;
            let mut st = me.st.borrow_mut();
            assert!(st.io_busy, "the flusher still holds io_busy");
            st.io_busy = false;
            st.notify();
            debug_assert!(
                res.is_ok() || st.poisoned.is_some(),
                "a failed flush poisons"
            );
        })
        .detach();
    }

    /// Flushes everything appended so far and syncs it. Caller holds `io_busy`.
    ///
    /// Per flush: the `.log` and `.index` tails are written (concurrently) and the `.log` is
    /// fdatasync'd. The `.index` (commit times) is fdatasync'd at most every
    /// `index_sync_interval_ms` and when a segment is sealed: its O_DIRECT writes survive a
    /// process crash, and after a power loss recovery rebuilds the unsynced tail (commit time =
    /// recovery time: later, never earlier). The `.timeindex` is written when a chunk of it is
    /// due and at seal; recovery rebuilds it from the log.
    pub(super) async fn flush_once(&self) -> Result<(), LogError> {
        let sync_interval = Duration::from_millis(self.config.borrow().index_sync_interval_ms);
        let (jobs, files, end, syncs_index) = {
            let mut st = self.st.borrow_mut();
            assert!(st.io_busy, "one flush in flight: the flusher holds io_busy");
            let end = st.next_offset;
            let index_due = st.index_synced_at.elapsed() >= sync_interval;
            let Some(a) = st.active.as_mut() else {
                return Ok(());
            };
            let mut jobs = Vec::with_capacity(3);
            let mut files = Vec::with_capacity(2);
            if let Some(j) = a.log.take_flush() {
                files.push(j.file().clone());
                jobs.push(j);
            }
            let wrote_index = match a.index.take_flush() {
                Some(j) => {
                    jobs.push(j);
                    true
                }
                None => false,
            };
            if a.time_index.unflushed_bytes() >= crate::config::INDEX_WRITE_CHUNK_BYTES as u64 {
                jobs.extend(a.time_index.take_flush());
            }
            let index_file = a.index.file().clone();
            let index_dirty = st.index_dirty || wrote_index;
            let syncs_index = index_due && index_dirty;
            if syncs_index {
                files.push(index_file);
            }
            st.index_dirty = index_dirty;
            (jobs, files, end, syncs_index)
        };
        if jobs.is_empty() {
            let mut st = self.st.borrow_mut();
            st.high_watermark = st.high_watermark.max(end);
            return Ok(());
        }
        let started = Instant::now();
        for r in crate::join::join_all(jobs.into_iter().map(|j| j.write())).await {
            if let Err(e) = r {
                return Err(self.poison("write", e));
            }
        }
        for r in crate::join::join_all(files.iter().map(|f| f.sync())).await {
            if let Err(e) = r {
                return Err(self.poison("fdatasync", e));
            }
        }
        let mut st = self.st.borrow_mut();
        assert!(end >= st.high_watermark, "high watermark never moves back");
        st.high_watermark = end;
        if syncs_index {
            st.index_synced_at = started;
            st.index_dirty = false;
        }
        st.stats.flushes += 1;
        st.stats.flush_micros_total += started.elapsed().as_micros() as u64;
        self.core.record_flush(started.elapsed());
        Ok(())
    }

    /// Marks the log unusable after a failed write or fdatasync. The kernel may have dropped
    /// the dirty data, so retrying the fsync and reporting success would lie (fsyncgate).
    pub(super) fn poison(&self, op: &str, e: std::io::Error) -> LogError {
        let cause = format!("{op}: {e}");
        tracing::error!(dir = %self.dir.display(), %cause, "partition log poisoned");
        let mut st = self.st.borrow_mut();
        st.poisoned.get_or_insert(cause.clone());
        st.notify();
        LogError::Poisoned {
            dir: self.dir_name(),
            cause,
        }
    }
}
