//! `PartitionLog`: one partition's segments on one core. Appends, group commit, reads, rolls,
//! retention, recovery on open and clean close.
//!
//! Concurrency model: the log lives on one glommio executor (`Rc`, no locks). State sits in a
//! `RefCell` that is never borrowed across an await. I/O that changes files (a flush, a roll,
//! the close) holds the `io_busy` flag, so at most one flush is in flight per file; appends keep
//! copying into the tail buffer while a flush runs and ride the next one.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use thiserror::Error;

use crate::appender::Appender;
use crate::batch::{self, BatchError, BatchHeader};
use crate::config::{LogConfig, TimestampType};
use crate::core_storage::CoreStorage;
use crate::index::{self, OffsetEntry, TimeEntry};
use crate::io::{self, align_down, align_up, SegmentFile};
use crate::recovery_marker::RecoveryMarker;
use crate::segment::{self, ClosedSegment, ScanStop};

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

struct ActiveSegment {
    base_offset: u64,
    log: Appender,
    index: Appender,
    time_index: Appender,
    entries: Vec<OffsetEntry>,
    time_entries: Vec<TimeEntry>,
    max_timestamp_ms: i64,
    max_timestamp_rel: u32,
    bytes_since_time_entry: u64,
    first_commit_time_ms: Option<i64>,
}

impl ActiveSegment {
    fn push_batch(
        &mut self,
        rel: u32,
        position: u32,
        commit_time_ms: i64,
        max_ts: i64,
        len: u64,
        interval: u64,
    ) {
        let e = OffsetEntry {
            relative_offset: rel,
            position,
            commit_time_ms,
        };
        debug_assert!(self
            .entries
            .last()
            .is_none_or(|p| p.relative_offset < rel && p.position < position));
        self.entries.push(e);
        self.index.append(&e.encode());
        self.first_commit_time_ms.get_or_insert(commit_time_ms);
        self.bytes_since_time_entry += len;
        if max_ts > self.max_timestamp_ms {
            self.max_timestamp_ms = max_ts;
            self.max_timestamp_rel = rel;
            if self.time_entries.is_empty() || self.bytes_since_time_entry >= interval {
                self.push_time_entry(max_ts, rel);
            }
        }
    }

    fn push_time_entry(&mut self, timestamp_ms: i64, relative_offset: u32) {
        let t = TimeEntry {
            timestamp_ms,
            relative_offset,
        };
        self.time_entries.push(t);
        self.time_index.append(&t.encode());
        self.bytes_since_time_entry = 0;
    }

    /// A final time-index entry for the newest timestamp, so a closed segment's max timestamp
    /// is its time index's last entry.
    fn seal_time_index(&mut self) {
        let last = self.time_entries.last().map(|t| t.timestamp_ms);
        if self.max_timestamp_ms >= 0 && last.is_none_or(|l| l < self.max_timestamp_ms) {
            let rel = self.max_timestamp_rel;
            if self
                .time_entries
                .last()
                .is_none_or(|t| t.relative_offset < rel)
            {
                self.push_time_entry(self.max_timestamp_ms, rel);
            }
        }
    }
}

struct State {
    closed: BTreeMap<u64, ClosedSegment>,
    active: Option<ActiveSegment>,
    log_start_offset: u64,
    /// Log end offset: the offset the next appended record gets.
    next_offset: u64,
    /// Everything below is on disk (fdatasync done) and visible to readers.
    high_watermark: u64,
    last_commit_time_ms: i64,
    leader_epoch: i32,
    poisoned: Option<String>,
    closed_for_good: bool,
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
}

impl State {
    /// Lets the next append in arrival order in, skipping tickets given up.
    fn advance_admission(&mut self) {
        self.admit_ticket += 1;
        while self.abandoned_tickets.remove(&self.admit_ticket) {
            self.admit_ticket += 1;
        }
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
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// An append's place in the arrival order of its partition. Batches go into the log in the
/// order `append` was called (a connection's pipelined produce requests keep their order),
/// whatever waits (a roll, backpressure) some of them meet on the way. A ticket dropped
/// without appending (an error, a cancelled caller) lets the next one in.
struct Ticket<'a> {
    log: &'a PartitionLog,
    n: u64,
    used: bool,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.used {
            return;
        }
        let mut st = self.log.st.borrow_mut();
        if st.admit_ticket == self.n {
            st.advance_admission();
        } else {
            st.abandoned_tickets.insert(self.n);
        }
        st.notify();
    }
}

enum AppendStep {
    Wait(u64),
    Roll,
    Drain(u64),
    /// Preallocate these files to these sizes before admitting the batch.
    Reserve(Vec<(Rc<SegmentFile>, u64)>),
    Ready,
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
    /// The next offset to be written that is also durable: everything below it is fdatasync'd
    /// and readable.
    pub fn high_watermark(&self) -> u64 {
        self.st.borrow().high_watermark
    }
    /// Equal to the high watermark until transactions arrive.
    pub fn last_stable_offset(&self) -> u64 {
        self.high_watermark()
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

    /// Opens the partition directory `dir`, recovering it as needed (see ARCHITECTURE.md).
    pub async fn open(
        core: &Rc<CoreStorage>,
        dir: PathBuf,
        config: LogConfig,
    ) -> Result<(Rc<Self>, RecoverySummary), LogError> {
        let dir_s = dir.display().to_string();
        config.validate().map_err(|why| LogError::InvalidConfig {
            dir: dir_s.clone(),
            why,
        })?;
        let io_err = |source| LogError::Io {
            dir: dir_s.clone(),
            source,
        };
        io::create_dir_all(&dir).map_err(io_err)?;
        let recovered = recover(core, &dir, &config).await.map_err(io_err)?;
        let (active, closed, summary, last_commit) = recovered;
        RecoveryMarker {
            clean: false,
            recovery_base: active.base_offset,
        }
        .store(&dir)
        .map_err(io_err)?;
        let log_start_offset = closed.keys().next().copied().unwrap_or(active.base_offset);
        let next = summary.next_offset;
        let log = Rc::new(Self {
            core: core.clone(),
            id: core.new_log_id(),
            dir,
            config: RefCell::new(config),
            st: RefCell::new(State {
                closed,
                active: Some(active),
                log_start_offset,
                next_offset: next,
                high_watermark: next,
                last_commit_time_ms: last_commit,
                leader_epoch: 0,
                poisoned: None,
                closed_for_good: false,
                io_busy: false,
                rolling: false,
                flush_scheduled: false,
                next_ticket: 0,
                admit_ticket: 0,
                abandoned_tickets: Default::default(),
                index_synced_at: Instant::now(),
                index_dirty: false,
                change_gen: 0,
                waiters: Default::default(),
                next_waiter_id: 0,
                stats: LogStats::default(),
            }),
        });
        Ok((log, summary))
    }

    /// Appends one Kafka RecordBatch v2 as the producer sent it. Validates it, assigns its base
    /// offset and commit time, and with `Durability::Sync` completes only after the fdatasync
    /// that covers it.
    pub async fn append(
        self: &Rc<Self>,
        batch: &[u8],
        durability: Durability,
    ) -> Result<AppendInfo, LogError> {
        let max_bytes = self.max_batch_bytes();
        let valid =
            batch::ValidBatch::new(batch, max_bytes).map_err(|source| LogError::InvalidBatch {
                dir: self.dir_name(),
                source,
            })?;
        self.append_valid(valid, durability).await
    }

    /// `append` for a batch the caller already validated.
    pub async fn append_valid(
        self: &Rc<Self>,
        valid: batch::ValidBatch<'_>,
        durability: Durability,
    ) -> Result<AppendInfo, LogError> {
        let (batch, h) = (valid.bytes(), *valid.header());
        // `ValidBatch::new` checked the size against the limit its caller had; the config may
        // have changed since (an altered topic), so the log checks its own.
        let max_bytes = self.max_batch_bytes();
        if batch.len() > max_bytes {
            return Err(LogError::InvalidBatch {
                dir: self.dir_name(),
                source: BatchError::TooLarge {
                    len: batch.len(),
                    max_bytes,
                },
            });
        }
        let mut ticket = {
            let mut st = self.st.borrow_mut();
            st.next_ticket += 1;
            Ticket {
                log: self,
                n: st.next_ticket - 1,
                used: false,
            }
        };
        loop {
            let step = self.append_step(&h, ticket.n)?;
            match step {
                AppendStep::Wait(gen) => self.wait_change(gen).await,
                AppendStep::Roll => self.roll().await?,
                AppendStep::Drain(target) => self.sync_to(target).await?,
                AppendStep::Reserve(files) => self.reserve(files).await?,
                AppendStep::Ready => break,
            }
        }
        let info = self.append_now(batch, &h);
        ticket.used = true;
        match durability {
            Durability::Sync => self.sync_to(info.last_offset + 1).await?,
            Durability::Buffered => self.schedule_flush(),
        }
        Ok(info)
    }

    fn append_step(&self, h: &BatchHeader, ticket: u64) -> Result<AppendStep, LogError> {
        let st = self.st.borrow();
        self.check_usable(&st)?;
        if st.rolling || st.admit_ticket != ticket {
            return Ok(AppendStep::Wait(st.change_gen));
        }
        let Some(a) = st.active.as_ref() else {
            // A roll could not create the next segment (no disk space): try again.
            return Ok(AppendStep::Roll);
        };
        let commit = now_ms().max(st.last_commit_time_ms);
        let len = h.size_bytes as u64;
        let non_empty = !a.entries.is_empty();
        let too_big = non_empty && a.log.len() + len > self.config.borrow().segment_bytes;
        let too_old = a
            .first_commit_time_ms
            .is_some_and(|first| commit - first >= self.config.borrow().segment_ms);
        let offsets_full = st.next_offset + h.offset_count() - a.base_offset > u32::MAX as u64;
        if too_big || too_old || offsets_full {
            return Ok(AppendStep::Roll);
        }
        if a.log.unflushed_bytes() + len > self.config.borrow().max_unflushed_bytes {
            return Ok(AppendStep::Drain(st.next_offset));
        }
        let reserve: Vec<(Rc<SegmentFile>, u64)> = [
            (&a.log, len),
            (&a.index, crate::index::OFFSET_ENTRY_BYTES as u64),
            (&a.time_index, crate::index::TIME_ENTRY_BYTES as u64),
        ]
        .into_iter()
        .filter_map(|(ap, extra)| {
            ap.reservation_needed(extra)
                .map(|to| (ap.file().clone(), to))
        })
        .collect();
        if !reserve.is_empty() {
            return Ok(AppendStep::Reserve(reserve));
        }
        Ok(AppendStep::Ready)
    }

    /// Preallocates the active segment's files for the next batch. A refusal (a full disk)
    /// wrote nothing: the batch is refused with `NoSpace` and the log stays usable.
    async fn reserve(&self, files: Vec<(Rc<SegmentFile>, u64)>) -> Result<(), LogError> {
        for (file, to) in files {
            if let Err(e) = file.preallocate(to).await {
                tracing::warn!(dir = %self.dir.display(), error = %e, "preallocation refused; batch not stored");
                return Err(LogError::NoSpace {
                    dir: self.dir_name(),
                    cause: e.to_string(),
                });
            }
            let mut st = self.st.borrow_mut();
            if let Some(a) = st.active.as_mut() {
                for ap in [&mut a.log, &mut a.index, &mut a.time_index] {
                    if Rc::ptr_eq(ap.file(), &file) {
                        ap.reserved(to);
                    }
                }
            }
        }
        Ok(())
    }

    /// The synchronous part of an append: offsets, commit time, bytes into the tail, index.
    fn append_now(&self, batch: &[u8], h: &BatchHeader) -> AppendInfo {
        let mut st = self.st.borrow_mut();
        let base = st.next_offset;
        let commit = now_ms().max(st.last_commit_time_ms);
        st.last_commit_time_ms = commit;
        let epoch = st.leader_epoch;
        let a = st
            .active
            .as_mut()
            .expect("append_step saw an active segment");
        let position = a.log.len();
        let rel = base - a.base_offset;
        assert!(
            rel + h.offset_count() <= u32::MAX as u64
                && position + batch.len() as u64 <= u32::MAX as u64
        );
        let log_append_time = self.config.borrow().timestamp_type == TimestampType::LogAppendTime;
        let max_ts = if log_append_time {
            let mut owned = batch.to_vec();
            batch::set_base_offset(&mut owned, base as i64);
            batch::set_leader_epoch(&mut owned, epoch);
            batch::stamp_log_append_time(&mut owned, commit);
            a.log.append(&owned);
            commit
        } else {
            let mut head = [0u8; batch::MAGIC_POS];
            head.copy_from_slice(&batch[..batch::MAGIC_POS]);
            batch::set_base_offset(&mut head, base as i64);
            batch::set_leader_epoch(&mut head, epoch);
            a.log.append(&head);
            a.log.append(&batch[batch::MAGIC_POS..]);
            h.max_timestamp
        };
        a.push_batch(
            rel as u32,
            position as u32,
            commit,
            max_ts,
            batch.len() as u64,
            self.config.borrow().index_interval_bytes,
        );
        st.next_offset = base + h.offset_count();
        st.advance_admission();
        if st.next_ticket > st.admit_ticket {
            // Appends queued behind this one (they met a roll or backpressure) go next.
            st.notify();
        }
        st.stats.appends += 1;
        st.stats.bytes_appended += batch.len() as u64;
        AppendInfo {
            base_offset: base,
            last_offset: st.next_offset - 1,
            commit_time_ms: commit,
            log_append_time_ms: log_append_time.then_some(commit),
        }
    }

    fn schedule_flush(self: &Rc<Self>) {
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

    /// Waits until everything below `target` is durable, running the flush itself when none is
    /// in flight (group commit: whoever finds the flusher idle flushes for everyone).
    pub async fn sync_to(&self, target: u64) -> Result<(), LogError> {
        loop {
            let gen = {
                let mut st = self.st.borrow_mut();
                if st.high_watermark >= target {
                    return Ok(());
                }
                self.check_usable(&st)?;
                if !st.io_busy {
                    st.io_busy = true;
                    break;
                }
                st.change_gen
            };
            self.wait_change(gen).await;
        }
        let res = self.flush_once().await;
        let mut st = self.st.borrow_mut();
        st.io_busy = false;
        st.notify();
        res
    }

    /// Flushes everything appended so far and syncs it. Caller holds `io_busy`.
    ///
    /// Per flush: the `.log` and `.index` tails are written (concurrently) and the `.log` is
    /// fdatasync'd. The `.index` (commit times) is fdatasync'd at most every
    /// `index_sync_interval_ms` and when a segment is sealed: its O_DIRECT writes survive a
    /// process crash, and after a power loss recovery rebuilds the unsynced tail (commit time =
    /// recovery time: later, never earlier). The `.timeindex` is written when a chunk of it is
    /// due and at seal; recovery rebuilds it from the log.
    async fn flush_once(&self) -> Result<(), LogError> {
        let sync_interval = Duration::from_millis(self.config.borrow().index_sync_interval_ms);
        let (jobs, files, end, syncs_index) = {
            let mut st = self.st.borrow_mut();
            debug_assert!(st.io_busy);
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
    fn poison(&self, op: &str, e: std::io::Error) -> LogError {
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

    /// Takes `io_busy` and blocks appends (`rolling`) for a roll or a close. `Ok(false)` when
    /// another roll was under way: it has finished and the caller re-evaluates.
    async fn acquire_exclusive(&self) -> Result<bool, LogError> {
        loop {
            let (gen, other_rolling) = {
                let mut st = self.st.borrow_mut();
                self.check_usable(&st)?;
                if !st.rolling && !st.io_busy {
                    st.io_busy = true;
                    st.rolling = true;
                    return Ok(true);
                }
                (st.change_gen, st.rolling)
            };
            self.wait_change(gen).await;
            if other_rolling {
                return Ok(false);
            }
        }
    }

    fn release_exclusive(&self) {
        let mut st = self.st.borrow_mut();
        st.io_busy = false;
        st.rolling = false;
        st.notify();
    }

    /// Closes the active segment and starts a new one at the log end offset.
    pub async fn roll(&self) -> Result<(), LogError> {
        if !self.acquire_exclusive().await? {
            return Ok(());
        }
        let res = self.roll_exclusive().await;
        self.release_exclusive();
        res
    }

    async fn roll_exclusive(&self) -> Result<(), LogError> {
        self.flush_once().await?;
        let (old, new_base) = {
            let mut st = self.st.borrow_mut();
            let new_base = st.next_offset;
            let old = st.active.take();
            if let Some(old) = &old {
                st.closed.insert(
                    old.base_offset,
                    ClosedSegment {
                        base_offset: old.base_offset,
                        next_offset: new_base,
                        size_bytes: old.log.len(),
                        max_timestamp_ms: old.max_timestamp_ms,
                    },
                );
            }
            (old, new_base)
        };
        // No old segment: an earlier roll sealed it but could not create this one.
        if let Some(old) = old {
            if let Err(e) = seal_segment(old).await {
                return Err(self.poison("segment roll", e));
            }
        }
        // Every older segment is now sealed: recovery after a crash starts at the new one.
        let created = async {
            let seg = create_segment(&self.core, &self.dir, new_base, &self.config()).await?;
            io::sync_dir(&self.dir)?;
            RecoveryMarker {
                clean: false,
                recovery_base: new_base,
            }
            .store(&self.dir)?;
            Ok::<_, std::io::Error>(seg)
        }
        .await;
        match created {
            Ok(seg) => {
                let mut st = self.st.borrow_mut();
                st.active = Some(seg);
                st.stats.rolls += 1;
                Ok(())
            }
            Err(e) => {
                // Nothing of the log was lost: every older segment is sealed and synced. The
                // next append tries again (no active segment means "roll first").
                for path in [
                    segment::log_path(&self.dir, new_base),
                    segment::index_path(&self.dir, new_base),
                    segment::time_index_path(&self.dir, new_base),
                ] {
                    let _ = std::fs::remove_file(path);
                }
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot create the next segment; appends are refused until it can be");
                Err(LogError::NoSpace {
                    dir: self.dir_name(),
                    cause: format!("creating segment {new_base}: {e}"),
                })
            }
        }
    }

    /// Reads whole stored batches starting with the one that holds `from`, up to `max_bytes`
    /// (at least one batch, even a larger one, as Kafka does), from a single segment and below
    /// the high watermark. Empty at the high watermark.
    pub async fn read(&self, from: u64, max_bytes: usize) -> Result<Vec<u8>, LogError> {
        Ok(self.read_due(from, max_bytes, i64::MAX).await?.bytes)
    }

    /// `read` for seed 000's delay gate: only batches whose commit time is at most
    /// `due_by_commit_ms`. Commit times never decrease, so the first batch that is not due proves
    /// that none after it is: the read stops there and reports its commit time, and a delay
    /// cursor can sleep until then whatever the number of pending batches.
    pub async fn read_due(
        &self,
        from: u64,
        max_bytes: usize,
        due_by_commit_ms: i64,
    ) -> Result<DueRead, LogError> {
        enum Plan {
            Read(Rc<SegmentFile>, u64, u64, Option<i64>),
            Closed(ClosedSegment),
        }
        let (plan, hwm) = {
            let st = self.st.borrow();
            if st.closed_for_good {
                return Err(LogError::Closed {
                    dir: self.dir_name(),
                });
            }
            if from < st.log_start_offset || from > st.high_watermark {
                return Err(LogError::OffsetOutOfRange {
                    dir: self.dir_name(),
                    requested: from,
                    log_start: st.log_start_offset,
                    high_watermark: st.high_watermark,
                });
            }
            if from == st.high_watermark {
                return Ok(DueRead::default());
            }
            let plan = match &st.active {
                Some(a) if from >= a.base_offset => {
                    let r = batch_range(
                        &a.entries,
                        a.log.len(),
                        a.base_offset,
                        from,
                        st.high_watermark,
                        max_bytes,
                        due_by_commit_ms,
                    );
                    match r.range {
                        Some((pos, len)) => {
                            Plan::Read(a.log.file().clone(), pos, len, r.first_undue_commit_ms)
                        }
                        None => {
                            return Ok(DueRead {
                                bytes: Vec::new(),
                                first_undue_commit_ms: r.first_undue_commit_ms,
                            })
                        }
                    }
                }
                _ => {
                    let seg = st
                        .closed
                        .range(..=from)
                        .next_back()
                        .map(|(_, s)| s.clone())
                        .expect("from >= log start lies in a segment");
                    Plan::Closed(seg)
                }
            };
            (plan, st.high_watermark)
        };
        let (file, pos, len, first_undue_commit_ms) = match plan {
            Plan::Read(f, p, l, u) => (f, p, l, u),
            Plan::Closed(seg) => {
                let reader = self
                    .core
                    .closed_reader(self.id, &self.dir, &seg)
                    .await
                    .map_err(|e| self.io_err(e))?;
                let r = batch_range(
                    &reader.entries,
                    reader.size_bytes,
                    seg.base_offset,
                    from,
                    hwm,
                    max_bytes,
                    due_by_commit_ms,
                );
                match r.range {
                    Some((p, l)) => (reader.file.clone(), p, l, r.first_undue_commit_ms),
                    None => {
                        return Ok(DueRead {
                            bytes: Vec::new(),
                            first_undue_commit_ms: r.first_undue_commit_ms,
                        })
                    }
                }
            }
        };
        let r = file
            .read(pos, len as usize)
            .await
            .map_err(|e| self.io_err(e))?;
        Ok(DueRead {
            bytes: self.check_read(r.to_vec(), pos, len)?,
            first_undue_commit_ms,
        })
    }

    fn check_read(&self, bytes: Vec<u8>, pos: u64, len: u64) -> Result<Vec<u8>, LogError> {
        if bytes.len() as u64 != len {
            return Err(self.io_err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("short read at {pos}: {} of {len} bytes", bytes.len()),
            )));
        }
        Ok(bytes)
    }

    /// The first offset whose record timestamp is ≥ `target_ms` (Kafka ListOffsets by
    /// timestamp), found through the time index; compressed batches are decompressed to find
    /// the exact record. `None` if no record is that new.
    /// The largest record timestamp in the log (closed segments and the active one), or `None`
    /// when no segment holds a timestamped record. Kafka's `MAX_TIMESTAMP` lookup is
    /// `offset_for_timestamp(max)`: the first record carrying it.
    pub fn max_timestamp_ms(&self) -> Option<i64> {
        let st = self.st.borrow();
        st.closed
            .values()
            .map(|c| c.max_timestamp_ms)
            .chain(st.active.as_ref().map(|a| a.max_timestamp_ms))
            .filter(|&t| t >= 0)
            .max()
    }

    pub async fn offset_for_timestamp(
        &self,
        target_ms: i64,
    ) -> Result<Option<TimestampOffset>, LogError> {
        let (candidates, hwm) = {
            let st = self.st.borrow();
            let mut c: Vec<ClosedSegment> = st
                .closed
                .values()
                .filter(|s| s.max_timestamp_ms >= target_ms)
                .cloned()
                .collect();
            if let Some(a) = &st.active {
                if a.max_timestamp_ms >= target_ms {
                    c.push(ClosedSegment {
                        base_offset: a.base_offset,
                        next_offset: st.next_offset,
                        size_bytes: a.log.len(),
                        max_timestamp_ms: a.max_timestamp_ms,
                    });
                }
            }
            (c, st.high_watermark)
        };
        for seg in candidates {
            let active = {
                let st = self.st.borrow();
                st.active
                    .as_ref()
                    .filter(|a| a.base_offset == seg.base_offset)
                    .map(|a| {
                        (
                            a.log.file().clone(),
                            a.entries.clone(),
                            index::time_lookup(&a.time_entries, target_ms),
                        )
                    })
            };
            let (file, entries, start_rel) = match active {
                Some(found) => found,
                None => {
                    let r = self
                        .core
                        .closed_reader(self.id, &self.dir, &seg)
                        .await
                        .map_err(|e| self.io_err(e))?;
                    (
                        r.file.clone(),
                        r.entries.clone(),
                        index::time_lookup(&r.time_entries, target_ms),
                    )
                }
            };
            let Some(first) = index::find_batch(&entries, start_rel) else {
                continue;
            };
            for i in first..entries.len() {
                if seg.base_offset + entries[i].relative_offset as u64 >= hwm {
                    break;
                }
                let end = entries
                    .get(i + 1)
                    .map_or(seg.size_bytes, |e| e.position as u64);
                let pos = entries[i].position as u64;
                let bytes = file
                    .read(pos, (end - pos) as usize)
                    .await
                    .map_err(|e| self.io_err(e))?;
                let bytes = self.check_read(bytes.to_vec(), pos, end - pos)?;
                let h = batch::parse_header(&bytes).map_err(|e| LogError::InvalidBatch {
                    dir: self.dir_name(),
                    source: e,
                })?;
                if h.max_timestamp < target_ms {
                    continue;
                }
                let found = batch::first_offset_at_or_after(&bytes, &h, target_ms)
                    .unwrap_or((h.base_offset, h.max_timestamp));
                return Ok(Some(TimestampOffset {
                    offset: found.0 as u64,
                    timestamp_ms: found.1,
                }));
            }
        }
        Ok(None)
    }

    /// Waits until data after `offset` becomes readable (the high watermark passes it) or until
    /// `deadline`; `true` if data arrived (or the log can no longer change: poisoned, closed).
    pub async fn wait_for_data_after(&self, offset: u64, deadline: Instant) -> bool {
        let arrived = async {
            loop {
                let gen = {
                    let st = self.st.borrow();
                    if st.high_watermark > offset || st.poisoned.is_some() || st.closed_for_good {
                        return true;
                    }
                    st.change_gen
                };
                self.wait_change(gen).await;
            }
        };
        let timeout = async {
            glommio::timer::sleep(deadline.saturating_duration_since(Instant::now())).await;
            false
        };
        futures_lite::future::or(arrived, timeout).await
    }

    /// Commit time of the batch holding `offset` (what seed 000's delay gate compares).
    pub async fn commit_time_of(&self, offset: u64) -> Result<Option<i64>, LogError> {
        let seg = {
            let st = self.st.borrow();
            if offset < st.log_start_offset || offset >= st.next_offset {
                return Ok(None);
            }
            match &st.active {
                Some(a) if offset >= a.base_offset => {
                    let rel = (offset - a.base_offset) as u32;
                    return Ok(
                        index::find_batch(&a.entries, rel).map(|i| a.entries[i].commit_time_ms)
                    );
                }
                _ => st
                    .closed
                    .range(..=offset)
                    .next_back()
                    .map(|(_, s)| s.clone()),
            }
        };
        let Some(seg) = seg else { return Ok(None) };
        let r = self
            .core
            .closed_reader(self.id, &self.dir, &seg)
            .await
            .map_err(|e| self.io_err(e))?;
        let rel = (offset - seg.base_offset) as u32;
        Ok(index::find_batch(&r.entries, rel).map(|i| r.entries[i].commit_time_ms))
    }

    /// Deletes whole closed segments past `retention_ms` (by their newest record timestamp) or
    /// beyond `retention_bytes`, oldest first, and advances the log start offset.
    pub async fn enforce_retention(&self, now_ms: i64) -> Result<RetentionSummary, LogError> {
        let (doomed, log_start) = {
            let mut st = self.st.borrow_mut();
            self.check_usable(&st)?;
            let active_len = st.active.as_ref().map_or(0, |a| a.log.len());
            let mut total: u64 = st.closed.values().map(|s| s.size_bytes).sum::<u64>() + active_len;
            let mut doomed = Vec::new();
            let cfg = self.config.borrow();
            for seg in st.closed.values() {
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
            for p in [
                segment::log_path(&self.dir, *base),
                segment::index_path(&self.dir, *base),
                segment::time_index_path(&self.dir, *base),
            ] {
                io::remove(&p).map_err(|e| self.io_err(e))?;
            }
            tracing::info!(dir = %self.dir.display(), segment = base, "retention deleted segment");
        }
        if !doomed.is_empty() {
            io::sync_dir(&self.dir).map_err(|e| self.io_err(e))?;
        }
        Ok(RetentionSummary {
            deleted_segments: doomed,
            log_start_offset: log_start,
        })
    }

    /// Flushes and syncs everything, seals the files of the active segment and writes the clean
    /// shutdown marker, so the next open skips the recovery scan. A poisoned log closes its
    /// files without the marker.
    pub async fn close(&self) -> Result<(), LogError> {
        let poisoned = self.st.borrow().poisoned.is_some();
        if !poisoned && !self.acquire_exclusive().await? {
            return Box::pin(self.close()).await;
        }
        let res = async {
            if !poisoned {
                self.flush_once().await?;
            }
            let active = {
                let mut st = self.st.borrow_mut();
                st.closed_for_good = true;
                st.active.take()
            };
            self.core.evict_log(self.id);
            let Some(active) = active else { return Ok(()) };
            let base = active.base_offset;
            if poisoned {
                return Ok(());
            }
            seal_segment(active).await.map_err(|e| self.io_err(e))?;
            RecoveryMarker {
                clean: true,
                recovery_base: base,
            }
            .store(&self.dir)
            .map_err(|e| self.io_err(e))
        }
        .await;
        self.release_exclusive();
        res
    }
}

/// What `batch_range` chose: the bytes to read, and the commit time of the first batch left
/// out because it is not due yet.
struct BatchRange {
    range: Option<(u64, u64)>,
    first_undue_commit_ms: Option<i64>,
}

/// The byte range `(position, len)` to read for a fetch from `from`: whole batches, starting
/// with the one holding `from`, only batches below `limit_offset` and committed at or before
/// `due_by_commit_ms`, at most `max_bytes` unless the first batch alone is larger.
fn batch_range(
    entries: &[OffsetEntry],
    seg_end: u64,
    seg_base: u64,
    from: u64,
    limit_offset: u64,
    max_bytes: usize,
    due_by_commit_ms: i64,
) -> BatchRange {
    let none = BatchRange {
        range: None,
        first_undue_commit_ms: None,
    };
    let Some(first) = index::find_batch(entries, (from - seg_base) as u32) else {
        return none;
    };
    let base_of = |i: usize| seg_base + entries[i].relative_offset as u64;
    let end_of = |i: usize| entries.get(i + 1).map_or(seg_end, |e| e.position as u64);
    let due = |i: usize| entries[i].commit_time_ms <= due_by_commit_ms;
    if base_of(first) >= limit_offset {
        return none;
    }
    if !due(first) {
        return BatchRange {
            range: None,
            first_undue_commit_ms: Some(entries[first].commit_time_ms),
        };
    }
    let start = entries[first].position as u64;
    let mut last = first;
    while last + 1 < entries.len()
        && base_of(last + 1) < limit_offset
        && due(last + 1)
        && end_of(last + 1) - start <= max_bytes as u64
    {
        last += 1;
    }
    let next = last + 1;
    let first_undue_commit_ms =
        (next < entries.len() && base_of(next) < limit_offset && !due(next))
            .then(|| entries[next].commit_time_ms);
    BatchRange {
        range: Some((start, end_of(last) - start)),
        first_undue_commit_ms,
    }
}

/// Creates the three empty files of a new segment at `base`.
async fn create_segment(
    core: &CoreStorage,
    dir: &Path,
    base: u64,
    config: &LogConfig,
) -> std::io::Result<ActiveSegment> {
    open_segment(core, dir, base, config, SegmentContent::default()).await
}

/// What recovery (or a clean open) knows about the active segment's content.
#[derive(Default)]
struct SegmentContent {
    log_len: u64,
    index_len: u64,
    time_index_len: u64,
    entries: Vec<OffsetEntry>,
    time_entries: Vec<TimeEntry>,
    max_timestamp_ms: Option<(i64, u32)>,
}

async fn open_appender(
    path: &Path,
    len: u64,
    core: &CoreStorage,
    chunk: usize,
    prealloc: u64,
) -> std::io::Result<Appender> {
    let file = Rc::new(SegmentFile::open_rw(path, core.faults()).await?);
    let tail_start = align_down(len);
    let tail = if tail_start < len {
        file.read(tail_start, (len - tail_start) as usize)
            .await?
            .to_vec()
    } else {
        Vec::new()
    };
    if tail.len() as u64 != len - tail_start {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "{}: file shorter than its recovered length {len}",
                path.display()
            ),
        ));
    }
    let allocated = align_up(file.size().await?);
    Ok(Appender::new(file, len, &tail, chunk, allocated, prealloc))
}

async fn open_segment(
    core: &CoreStorage,
    dir: &Path,
    base: u64,
    config: &LogConfig,
    c: SegmentContent,
) -> std::io::Result<ActiveSegment> {
    let prealloc = config.preallocate_bytes.min(align_up(config.segment_bytes));
    let index_chunk = crate::config::INDEX_WRITE_CHUNK_BYTES;
    let log = open_appender(
        &segment::log_path(dir, base),
        c.log_len,
        core,
        config.write_chunk_bytes,
        prealloc,
    )
    .await?;
    // The indexes reserve space in their own steps (when the log does), so a full disk
    // refuses a batch at admission rather than failing its flush.
    let index_prealloc = if prealloc > 0 {
        crate::config::INDEX_PREALLOCATE_BYTES
    } else {
        0
    };
    let index = open_appender(
        &segment::index_path(dir, base),
        c.index_len,
        core,
        index_chunk,
        index_prealloc,
    )
    .await?;
    let time_index = open_appender(
        &segment::time_index_path(dir, base),
        c.time_index_len,
        core,
        index_chunk,
        index_prealloc,
    )
    .await?;
    let (max_ts, max_rel) = c.max_timestamp_ms.unwrap_or((-1, 0));
    let bytes_since = match c.time_entries.last() {
        Some(t) => {
            let i = index::find_batch(&c.entries, t.relative_offset).unwrap_or(0);
            c.log_len - c.entries.get(i).map_or(0, |e| e.position as u64)
        }
        None => c.log_len,
    };
    Ok(ActiveSegment {
        base_offset: base,
        first_commit_time_ms: c.entries.first().map(|e| e.commit_time_ms),
        log,
        index,
        time_index,
        entries: c.entries,
        time_entries: c.time_entries,
        max_timestamp_ms: max_ts,
        max_timestamp_rel: max_rel,
        bytes_since_time_entry: bytes_since,
    })
}

type Recovered = (
    ActiveSegment,
    BTreeMap<u64, ClosedSegment>,
    RecoverySummary,
    i64,
);

/// Recovery on open (seed 004, DESIGN.md §3): trust segments sealed before the recovery point,
/// scan the rest, truncate at the first invalid byte, drop what lies beyond, rebuild indexes.
async fn recover(core: &CoreStorage, dir: &Path, config: &LogConfig) -> std::io::Result<Recovered> {
    let names = io::list_dir(dir)?;
    for n in names.iter().filter(|n| n.ends_with(".tmp")) {
        io::remove(&dir.join(n))?;
    }
    let mut bases: Vec<u64> = names
        .iter()
        .filter_map(|n| segment::parse_log_name(n))
        .collect();
    bases.sort_unstable();
    let marker = RecoveryMarker::load(dir)?;
    let clean = marker.is_some_and(|m| m.clean);
    let recovery_base = marker.map_or(0, |m| m.recovery_base);
    let mut summary = RecoverySummary {
        clean_shutdown: clean,
        segments: bases.len(),
        ..Default::default()
    };
    let mut closed = BTreeMap::new();
    let mut last_commit = 0i64;
    let mut expected_next: Option<u64> = None;
    let mut active: Option<(u64, SegmentContent)> = None;
    let total = bases.len();
    let mut i = 0;
    while i < total {
        let base = bases[i];
        let is_last = i + 1 == total;
        if expected_next.is_some_and(|n| n != base) {
            // A gap between segments: everything from here on is unreachable.
            tracing::warn!(dir = %dir.display(), segment = base, expected = ?expected_next, "segment does not continue the log; deleting it and later ones");
            break;
        }
        let trusted = clean || (base < recovery_base && !is_last);
        if trusted && !is_last {
            let time_entries = index::decode_time_entries(
                &segment::read_whole(&segment::time_index_path(dir, base)).await?,
            );
            let size = std::fs::metadata(segment::log_path(dir, base))
                .map_err(|e| io::io_context("stat", &segment::log_path(dir, base), e))?
                .len();
            let seg = ClosedSegment {
                base_offset: base,
                next_offset: bases[i + 1],
                size_bytes: size,
                max_timestamp_ms: time_entries.last().map_or(-1, |t| t.timestamp_ms),
            };
            expected_next = Some(seg.next_offset);
            closed.insert(base, seg);
            i += 1;
            continue;
        }
        if trusted {
            if let Some((content, next, commit)) = load_clean_active(dir, base).await? {
                last_commit = last_commit.max(commit);
                summary.next_offset = next;
                active = Some((base, content));
                i += 1;
                break;
            }
            // The marker said clean but the files disagree: fall back to a scan.
            tracing::warn!(dir = %dir.display(), segment = base, "clean segment does not match its index; scanning");
        }
        tracing::info!(dir = %dir.display(), segment = base, progress = format!("{}/{}", i + 1, total), "recovery scanning segment");
        let truncated_before = summary.truncations.len();
        let (content, next, commit) = scan_segment(core, config, dir, base, &mut summary).await?;
        last_commit = last_commit.max(commit);
        summary.next_offset = next;
        let cut = summary.truncations.len() > truncated_before
            && summary.truncations.last().is_some_and(|t| {
                t.bytes_discarded > 0 || !matches!(t.reason, ScanStop::ZeroPadding)
            });
        if is_last || cut {
            active = Some((base, content));
            i += 1;
            break;
        }
        // A scanned segment that ends cleanly and has a successor: seal it as closed.
        let seg_files = open_segment(
            core,
            dir,
            base,
            &LogConfig {
                preallocate_bytes: 0,
                ..config.clone()
            },
            content,
        )
        .await?;
        let closed_seg = ClosedSegment {
            base_offset: base,
            next_offset: next,
            size_bytes: seg_files.log.len(),
            max_timestamp_ms: seg_files.max_timestamp_ms,
        };
        seal_segment(seg_files).await?;
        expected_next = Some(next);
        closed.insert(base, closed_seg);
        i += 1;
    }
    for &base in &bases[i..] {
        for p in [
            segment::log_path(dir, base),
            segment::index_path(dir, base),
            segment::time_index_path(dir, base),
        ] {
            io::remove(&p)?;
        }
        summary.segments_deleted.push(base);
    }
    if i < total {
        io::sync_dir(dir)?;
    }
    let (base, content) = match active {
        Some(a) => a,
        None => {
            // Every segment was sealed and closed (or there were none): start a new one.
            let base = closed
                .values()
                .next_back()
                .map_or(0, |s: &ClosedSegment| s.next_offset);
            summary.next_offset = base;
            (base, SegmentContent::default())
        }
    };
    let seg = open_segment(core, dir, base, config, content).await?;
    io::sync_dir(dir)?;
    Ok((seg, closed, summary, last_commit))
}

/// The active segment after a clean shutdown: its files are exact, so its index is loaded as
/// is. `None` if the log does not end where the index says (then recovery scans it).
async fn load_clean_active(
    dir: &Path,
    base: u64,
) -> std::io::Result<Option<(SegmentContent, u64, i64)>> {
    let entries =
        index::decode_offset_entries(&segment::read_whole(&segment::index_path(dir, base)).await?);
    let time_entries = index::decode_time_entries(
        &segment::read_whole(&segment::time_index_path(dir, base)).await?,
    );
    let log_path = segment::log_path(dir, base);
    let log_len = std::fs::metadata(&log_path)
        .map_err(|e| io::io_context("stat", &log_path, e))?
        .len();
    let next = match entries.last() {
        Some(e) => {
            let f = SegmentFile::open_read(&log_path).await?;
            let head = f
                .read(e.position as u64, batch::HEADER_BYTES)
                .await?
                .to_vec();
            f.close().await?;
            match batch::parse_header(&head) {
                Ok(h) if e.position as u64 + h.size_bytes as u64 == log_len => {
                    base + e.relative_offset as u64 + h.offset_count()
                }
                _ => return Ok(None),
            }
        }
        None if log_len == 0 => base,
        None => return Ok(None),
    };
    let commit = entries.last().map_or(0, |e| e.commit_time_ms);
    let content = SegmentContent {
        log_len,
        index_len: (entries.len() * index::OFFSET_ENTRY_BYTES) as u64,
        time_index_len: (time_entries.len() * index::TIME_ENTRY_BYTES) as u64,
        max_timestamp_ms: time_entries
            .last()
            .map(|t| (t.timestamp_ms, t.relative_offset)),
        entries,
        time_entries,
    };
    Ok(Some((content, next, commit)))
}

/// Writes the final time entry, trims the three files to their logical size, syncs and
/// closes them. Afterwards the segment is immutable and holds no fd.
async fn seal_segment(mut seg: ActiveSegment) -> std::io::Result<()> {
    seg.seal_time_index();
    let jobs: Vec<_> = [
        seg.log.take_flush(),
        seg.index.take_flush(),
        seg.time_index.take_flush(),
    ]
    .into_iter()
    .flatten()
    .collect();
    for r in crate::join::join_all(jobs.into_iter().map(|j| j.write())).await {
        r?;
    }
    let apps = [&seg.log, &seg.index, &seg.time_index];
    for r in crate::join::join_all(apps.iter().map(|a| a.trim_to_len())).await {
        r?;
    }
    for r in crate::join::join_all(apps.iter().map(|a| a.file().sync())).await {
        r?;
    }
    let ActiveSegment {
        log,
        index,
        time_index,
        ..
    } = seg;
    for a in [log, index, time_index] {
        a.close().await?;
    }
    Ok(())
}

/// Scans one segment's log, truncates it at the first invalid byte and rewrites its indexes.
/// Commit times come from the old index where it matches the scanned batches; a batch whose
/// entry never reached disk gets the recovery time (later than its real commit, so a delay gate
/// is never early), kept monotonic.
async fn scan_segment(
    core: &CoreStorage,
    config: &LogConfig,
    dir: &Path,
    base: u64,
    summary: &mut RecoverySummary,
) -> std::io::Result<(SegmentContent, u64, i64)> {
    let log_path = segment::log_path(dir, base);
    let file = SegmentFile::open_rw(&log_path, None).await?;
    let file_len = file.size().await?;
    let scan = segment::scan_log(&file, base, file_len).await?;
    summary.segments_scanned += 1;
    summary.batches_scanned += scan.batches.len() as u64;
    if scan.valid_len < file_len {
        let discarded = if scan.discarded_nonzero {
            file_len - scan.valid_len
        } else {
            0
        };
        let reason = scan.stop.clone().unwrap_or(ScanStop::PartialBatch);
        if scan.discarded_nonzero {
            tracing::warn!(dir = %dir.display(), segment = base, position = scan.valid_len, bytes = discarded, %reason, "recovery truncated segment");
        }
        summary.truncations.push(Truncation {
            segment_base: base,
            position: scan.valid_len,
            reason,
            bytes_discarded: discarded,
        });
        file.truncate(scan.valid_len).await?;
        file.sync().await?;
    }
    file.close().await?;

    let old =
        index::decode_offset_entries(&segment::read_whole(&segment::index_path(dir, base)).await?);
    let now = now_ms();
    let mut content = SegmentContent {
        log_len: scan.valid_len,
        ..Default::default()
    };
    let mut last_commit = 0i64;
    let mut max_ts: Option<(i64, u32)> = None;
    let mut since_time_entry = 0u64;
    for (k, (rel, pos, h)) in scan.batches.iter().enumerate() {
        let commit = match old.get(k) {
            Some(e) if e.relative_offset == *rel && e.position == *pos => e.commit_time_ms,
            _ => now,
        }
        .max(last_commit);
        last_commit = commit;
        content.entries.push(OffsetEntry {
            relative_offset: *rel,
            position: *pos,
            commit_time_ms: commit,
        });
        let ts = h.max_timestamp;
        since_time_entry += h.size_bytes as u64;
        if max_ts.is_none_or(|(m, _)| ts > m) {
            max_ts = Some((ts, *rel));
            if content.time_entries.is_empty() || since_time_entry >= config.index_interval_bytes {
                content.time_entries.push(TimeEntry {
                    timestamp_ms: ts,
                    relative_offset: *rel,
                });
                since_time_entry = 0;
            }
        }
    }
    content.max_timestamp_ms = max_ts;
    // Rewrite both index files from the scan.
    for (path, bytes) in [
        (
            segment::index_path(dir, base),
            content
                .entries
                .iter()
                .flat_map(|e| e.encode())
                .collect::<Vec<u8>>(),
        ),
        (
            segment::time_index_path(dir, base),
            content
                .time_entries
                .iter()
                .flat_map(|e| e.encode())
                .collect::<Vec<u8>>(),
        ),
    ] {
        let f = Rc::new(SegmentFile::open_rw(&path, core.faults()).await?);
        f.truncate(0).await?;
        let mut app = Appender::new(
            f.clone(),
            0,
            &[],
            crate::config::INDEX_WRITE_CHUNK_BYTES.max(align_up(bytes.len() as u64) as usize),
            0,
            0,
        );
        app.append(&bytes);
        if let Some(job) = app.take_flush() {
            job.write().await?;
        }
        app.trim_to_len().await?;
        f.sync().await?;
        app.close().await?;
    }
    content.index_len = (content.entries.len() * index::OFFSET_ENTRY_BYTES) as u64;
    content.time_index_len = (content.time_entries.len() * index::TIME_ENTRY_BYTES) as u64;
    Ok((content, scan.next_offset, last_commit))
}
