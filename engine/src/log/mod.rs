//! `PartitionLog`: one partition's segments on one core. Appends, group commit, reads, rolls,
//! retention, recovery on open and clean close.
//!
//! Concurrency model: the log lives on one glommio executor (`Rc`, no locks). State sits in a
//! `RefCell` that is never borrowed across an await. I/O that changes files (a flush, a roll,
//! the close) holds the `io_busy` flag, so at most one flush is in flight per file; appends keep
//! copying into the tail buffer while a flush runs and ride the next one.
//!
//! One file per concern: `segment_set` (the active segment, roll, seal, close), `append`
//! (admission in arrival order, the synchronous append), `flush` (group commit, poisoning),
//! `read` (fetch ranges, the delay gate, timestamp lookups, waiting for data), `retention`
//! (and DeleteRecords: whatever moves the log start offset),
//! `compact` (one cleaner pass: compaction of closed segments, the swap gate readers pass),
//! `recovery` (open: the recovery scan, index rebuild).

mod append;
mod compact;
mod flush;
mod read;
mod recovery;
mod retention;
mod segment_set;

pub use append::AdmitError;
pub use compact::{CleanOptions, CleanReason, CleanSummary, DirtyInfo};
pub use read::ReadEnd;
pub use recovery::{request_restart_at, request_truncation, TRUNCATE_TO_FILE_NAME};

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Instant;

use thiserror::Error;

use crate::batch::BatchError;
use crate::config::LogConfig;
use crate::core_storage::CoreStorage;
use crate::segment::{ClosedSegment, ScanStop};
use segment_set::ActiveSegment;

#[derive(Debug, Error)]
pub enum LogError {
    #[error("invalid record batch for {dir}: {source}")]
    InvalidBatch {
        dir: String,
        #[source]
        source: BatchError,
    },
    #[error(
        "partition log {dir} is poisoned by a failed {cause}; no more appends until it is reopened"
    )]
    Poisoned { dir: String, cause: String },
    #[error("offset {requested} is out of range for {dir}: log start {log_start}, high watermark {high_watermark}")]
    OffsetOutOfRange {
        dir: String,
        requested: u64,
        log_start: u64,
        high_watermark: u64,
    },
    #[error("I/O error on partition log {dir}: {source}")]
    Io {
        dir: String,
        #[source]
        source: std::io::Error,
    },
    #[error("partition log {dir} is closed")]
    Closed { dir: String },
    /// The disk refused space (a preallocation or a new segment) before anything was written:
    /// the batch was not appended and the log stays usable; appends resume when space is freed.
    #[error("partition log {dir} cannot get disk space ({cause}); the batch was not stored; free space on the data disk and retry")]
    NoSpace { dir: String, cause: String },
    #[error("invalid log config for {dir}: {why}")]
    InvalidConfig { dir: String, why: String },
    /// DeleteRecords on a log whose `cleanup.policy` does not include `delete` (as Kafka).
    #[error("records of {dir} cannot be deleted: its cleanup.policy does not include delete")]
    DeleteNotAllowed { dir: String },
}

/// Where DeleteRecords moves the log start offset to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteBefore {
    /// The high watermark (Kafka's offset -1): every durable record goes.
    HighWatermark,
    /// This offset, at most the high watermark.
    Offset(u64),
}

/// Whether an append waits for the fdatasync that covers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Complete only after an fdatasync covers the batch (acks=1 and acks=all).
    Sync,
    /// Complete once buffered; a flush is scheduled and makes it durable (and visible) soon.
    Buffered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: u64,
    pub last_offset: u64,
    /// Engine commit time of the batch: never decreases within the partition.
    pub commit_time_ms: i64,
    /// Set when the topic uses LogAppendTime: the timestamp written into the batch.
    pub log_append_time_ms: Option<i64>,
}

/// What `read_due` returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DueRead {
    /// Whole stored batches, all due.
    pub bytes: Vec<u8>,
    /// Commit time of the next batch, which is not due yet (`None`: nothing undue follows in
    /// this read's segment below the high watermark).
    pub first_undue_commit_ms: Option<i64>,
}

/// The offset a timestamp search found, and the record timestamp there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub offset: u64,
    pub timestamp_ms: i64,
}

/// One truncation done by recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    pub segment_base: u64,
    /// Position in the segment's log where the valid data ends.
    pub position: u64,
    pub reason: ScanStop,
    /// Bytes cut off (not counting zero padding).
    pub bytes_discarded: u64,
}

/// What recovery did when the log was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoverySummary {
    pub clean_shutdown: bool,
    pub segments: usize,
    pub segments_scanned: usize,
    pub batches_scanned: u64,
    pub truncations: Vec<Truncation>,
    /// Segments deleted because they lay after a truncation point or a gap.
    pub segments_deleted: Vec<u64>,
    pub next_offset: u64,
    /// The active segment may hold forward offset jumps (the recovery marker said so: a
    /// follower copied a cleaned leader's batches into it).
    pub active_offset_jumps: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionSummary {
    pub deleted_segments: Vec<u64>,
    pub log_start_offset: u64,
}

/// Counters of one log, for benchmarks and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    pub appends: u64,
    pub bytes_appended: u64,
    /// Flush rounds (each ends with the fdatasync of every file it wrote).
    pub flushes: u64,
    pub rolls: u64,
    pub flush_micros_total: u64,
}

struct State {
    closed: BTreeMap<u64, ClosedSegment>,
    active: Option<ActiveSegment>,
    log_start_offset: u64,
    /// Log end offset: the offset the next appended record gets.
    next_offset: u64,
    /// Everything below is on disk (fdatasync done): the durable log end.
    durable_end: u64,
    /// A replicated partition's high watermark (issue #18): readers see at most this far
    /// (and never past `durable_end`). `None`: not replicated, readers see `durable_end`.
    replicated_limit: Option<u64>,
    last_commit_time_ms: i64,
    leader_epoch: i32,
    poisoned: Option<String>,
    closed_for_good: bool,
    /// The recovery marker on disk says "not clean" (written before the first append after a
    /// clean open, and by every roll): until then the files are as the clean close left them,
    /// so a crash needs no scan and a close has nothing to seal (issue #13: idle partitions
    /// open and close with no fsync).
    marked_dirty: bool,
    /// The active segment may hold forward offset jumps, and the recovery marker says so
    /// (`mark_offset_jumps`): set before the first such batch goes in, cleared by a roll.
    active_offset_jumps: bool,
    io_busy: bool,
    rolling: bool,
    flush_scheduled: bool,
    /// Admission of appends in arrival order: the ticket the next `append` call gets, the
    /// ticket whose batch goes into the log next, and tickets given up without appending.
    next_ticket: u64,
    admit_ticket: u64,
    abandoned_tickets: std::collections::BTreeSet<u64>,
    /// When the `.index` was last fdatasync'd, and whether it was written since.
    index_synced_at: Instant,
    index_dirty: bool,
    change_gen: u64,
    /// Tasks waiting for the next change, by registration id. A waiter removes itself when it
    /// is dropped (a long-poll that timed out), so the map holds only live waits.
    waiters: std::collections::BTreeMap<u64, Waker>,
    next_waiter_id: u64,
    stats: LogStats,
    /// The cleaner's progress and its swap gate (`compact.rs`).
    cleaner: compact::CleanerState,
}

impl State {
    /// The high watermark: where readers stop.
    fn visible_end(&self) -> u64 {
        self.replicated_limit
            .map_or(self.durable_end, |l| l.min(self.durable_end))
    }

    /// Lets the next append in arrival order in, skipping tickets given up.
    fn advance_admission(&mut self) {
        self.admit_ticket += 1;
        while self.abandoned_tickets.remove(&self.admit_ticket) {
            self.admit_ticket += 1;
        }
    }

    /// Moves the log start offset to `to`; it never moves back.
    fn advance_log_start(&mut self, to: u64) {
        assert!(
            to >= self.log_start_offset,
            "log start never moves back ({} -> {to})",
            self.log_start_offset
        );
        self.log_start_offset = to;
    }

    fn notify(&mut self) {
        self.change_gen += 1;
        for (_, w) in std::mem::take(&mut self.waiters) {
            w.wake();
        }
    }
}

/// One registered wait for a state change (see [`PartitionLog::wait_change`]).
struct WaitChange<'a> {
    log: &'a PartitionLog,
    gen: u64,
    id: Option<u64>,
}

impl std::future::Future for WaitChange<'_> {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        let mut st = self.log.st.borrow_mut();
        if st.change_gen != self.gen {
            if let Some(id) = self.id.take() {
                st.waiters.remove(&id);
            }
            return Poll::Ready(());
        }
        match self.id.and_then(|id| st.waiters.get_mut(&id)) {
            Some(w) if w.will_wake(cx.waker()) => {}
            Some(w) => *w = cx.waker().clone(),
            None => {
                let id = st.next_waiter_id;
                st.next_waiter_id += 1;
                st.waiters.insert(id, cx.waker().clone());
                drop(st);
                self.id = Some(id);
            }
        }
        Poll::Pending
    }
}

impl Drop for WaitChange<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            if let Ok(mut st) = self.log.st.try_borrow_mut() {
                st.waiters.remove(&id);
            }
        }
    }
}

pub struct PartitionLog {
    core: Rc<CoreStorage>,
    dir: PathBuf,
    id: u64,
    config: RefCell<LogConfig>,
    st: RefCell<State>,
    /// One writer of `log-start-offset` at a time, so an older value never lands last.
    log_start_writer: glommio::sync::Semaphore,
}

impl PartitionLog {
    fn dir_name(&self) -> String {
        self.dir.display().to_string()
    }

    fn io_err(&self, source: std::io::Error) -> LogError {
        LogError::Io {
            dir: self.dir_name(),
            source,
        }
    }

    fn check_usable(&self, st: &State) -> Result<(), LogError> {
        if let Some(cause) = &st.poisoned {
            return Err(LogError::Poisoned {
                dir: self.dir_name(),
                cause: cause.clone(),
            });
        }
        if st.closed_for_good {
            return Err(LogError::Closed {
                dir: self.dir_name(),
            });
        }
        Ok(())
    }

    /// Waits until the state changes after generation `gen`. The registration is removed
    /// when the wait ends or is dropped.
    async fn wait_change(&self, gen: u64) {
        WaitChange {
            log: self,
            gen,
            id: None,
        }
        .await
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> LogConfig {
        self.config.borrow().clone()
    }

    /// The largest batch an append takes (the topic's `max.message.bytes`).
    pub fn max_batch_bytes(&self) -> usize {
        self.config.borrow().max_batch_bytes
    }

    /// What the log asks of a batch before it is appended (`ValidBatch::new`).
    pub fn batch_rules(&self) -> crate::record_check::BatchRules {
        let c = self.config.borrow();
        crate::record_check::BatchRules {
            max_bytes: c.max_batch_bytes,
            require_keys: c.cleanup_policy.compact,
            timestamps: None,
        }
    }

    /// `batch_rules` for a batch a client produces: its record timestamps must also lie
    /// within the topic's `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms`
    /// of this core's clock (CreateTime topics), as Kafka checks on the produce path only.
    pub fn client_batch_rules(&self) -> crate::record_check::BatchRules {
        crate::record_check::BatchRules {
            timestamps: self.config.borrow().timestamp_window(self.core.now_ms()),
            ..self.batch_rules()
        }
    }

    /// Replaces the config (an altered topic config). Takes effect from the next append, roll
    /// and retention pass; existing segments are not rewritten.
    pub fn set_config(&self, config: LogConfig) -> Result<(), LogError> {
        config.validate().map_err(|why| LogError::InvalidConfig {
            dir: self.dir_name(),
            why,
        })?;
        *self.config.borrow_mut() = config;
        Ok(())
    }
    pub fn log_start_offset(&self) -> u64 {
        self.st.borrow().log_start_offset
    }
    /// The high watermark: readers (fetches, the broker's own replays) see the log below it.
    /// Everything below it is fdatasync'd, and for a replicated partition also on every
    /// in-sync replica (`set_replicated_limit`).
    pub fn high_watermark(&self) -> u64 {
        self.st.borrow().visible_end()
    }
    /// The durable log end: everything below it is fdatasync'd here (a replicated
    /// partition's followers copy up to it; readers stop at the high watermark).
    pub fn durable_end(&self) -> u64 {
        self.st.borrow().durable_end
    }
    /// Makes this a replicated partition's log whose high watermark is `limit` (at most the
    /// durable end): the leader's lowest durable end among the in-sync replicas, or on a
    /// follower the leader's high watermark. Readers waiting for data are woken.
    pub fn set_replicated_limit(&self, limit: u64) {
        let mut st = self.st.borrow_mut();
        if st.replicated_limit != Some(limit) {
            st.replicated_limit = Some(limit);
            st.notify();
        }
    }
    /// The replicated high watermark set last (`None`: not a replicated partition's log).
    pub fn replicated_limit(&self) -> Option<u64> {
        self.st.borrow().replicated_limit
    }
    /// The high watermark: the log knows nothing of transactions. The real last stable
    /// offset is `Partition::last_stable_offset` (it stops at the oldest open transaction).
    pub fn last_stable_offset(&self) -> u64 {
        self.high_watermark()
    }
    /// The core clock's now, in ms (commit times and markers' timestamps come from it).
    pub(crate) fn now_ms(&self) -> i64 {
        self.core.now_ms()
    }
    /// The offset the next append gets (durable or not).
    pub fn log_end_offset(&self) -> u64 {
        self.st.borrow().next_offset
    }
    pub fn stats(&self) -> LogStats {
        self.st.borrow().stats
    }
    pub fn is_poisoned(&self) -> bool {
        self.st.borrow().poisoned.is_some()
    }
    /// Number of segments (closed and active).
    pub fn segment_count(&self) -> usize {
        let st = self.st.borrow();
        st.closed.len() + st.active.is_some() as usize
    }
    /// Total bytes of log data in all segments.
    pub fn size_bytes(&self) -> u64 {
        let st = self.st.borrow();
        st.closed.values().map(|s| s.size_bytes).sum::<u64>()
            + st.active.as_ref().map_or(0, |a| a.log.len())
    }
    /// Sets the leader epoch stamped into appended batches.
    pub fn set_leader_epoch(&self, epoch: i32) {
        self.st.borrow_mut().leader_epoch = epoch;
    }
}
