//! Group commit: one flush in flight, fdatasync, high watermark, poisoning.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::{LogError, PartitionLog};

/// A flush slower than this is logged (debug level) with where its time went.
const SLOW_FLUSH_LOG_MS: u64 = 20;

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
                if st.durable_end >= target {
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
        let (log_job, index_job, time_job, index_sync, end, syncs_index) = {
            let mut st = self.st.borrow_mut();
            assert!(st.io_busy, "one flush in flight: the flusher holds io_busy");
            let end = st.next_offset;
            let index_due = st.index_synced_at.elapsed() >= sync_interval;
            let Some(a) = st.active.as_mut() else {
                return Ok(());
            };
            let log_job = a.log.take_flush();
            let index_job = a.index.take_flush();
            let time_job = if a.time_index.unflushed_bytes()
                >= crate::config::INDEX_WRITE_CHUNK_BYTES as u64
            {
                a.time_index.take_flush()
            } else {
                None
            };
            let index_file = a.index.file().clone();
            let index_dirty = st.index_dirty || index_job.is_some();
            let syncs_index = index_due && index_dirty;
            st.index_dirty = index_dirty;
            // An index sync with no index write pending syncs the file on its own.
            let index_sync = (syncs_index && index_job.is_none()).then_some(index_file);
            (log_job, index_job, time_job, index_sync, end, syncs_index)
        };
        if log_job.is_none() && index_job.is_none() && time_job.is_none() && index_sync.is_none() {
            let mut st = self.st.borrow_mut();
            st.durable_end = st.durable_end.max(end);
            return Ok(());
        }
        let started = Instant::now();
        // The `.log` write is durable when it completes (one DSYNC write on the core's ring,
        // or writes then an fdatasync on glommio); the indexes are written alongside, the
        // `.index` made durable only when its sync is due. All in flight at once.
        let log_bytes = log_job.as_ref().map_or(0, |j| j.bytes());
        let log_done = async {
            let r = match log_job {
                Some(j) => j.write_durable().await.map(|_| ()),
                None => Ok(()),
            };
            (r, started.elapsed())
        };
        let index_done = async {
            let r = match (index_job, &index_sync) {
                (Some(j), _) if syncs_index => j.write_durable().await.map(|_| ()),
                (Some(j), _) => j.write().await.map(|_| ()),
                (None, Some(f)) => f.sync().await,
                (None, None) => Ok(()),
            };
            (r, started.elapsed())
        };
        let time_done = async {
            match time_job {
                Some(j) => j.write().await.map(|_| ()),
                None => Ok(()),
            }
        };
        let ((l, log_took), (i, index_took), t) =
            futures_util::join!(log_done, index_done, time_done);
        if started.elapsed() >= Duration::from_millis(SLOW_FLUSH_LOG_MS) {
            tracing::debug!(
                dir = %self.dir.display(),
                log_bytes,
                log_ms = log_took.as_secs_f64() * 1e3,
                index_ms = index_took.as_secs_f64() * 1e3,
                index_synced = syncs_index,
                "slow flush"
            );
        }
        for r in [l, i, t] {
            if let Err(e) = r {
                return Err(self.poison("durable write", e));
            }
        }
        let mut st = self.st.borrow_mut();
        assert!(end >= st.durable_end, "the durable end never moves back");
        st.durable_end = end;
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
