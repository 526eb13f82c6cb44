//! One cursor: (parent partition × child). The loop: read a fill-or-linger slab of committed
//! (and, for a delay child, due) parent records, re-key it, commit every child-partition batch
//! durably, and only then advance the offset file (commit-before-advance). Any failure backs
//! off [`FAILURE_BACKOFF`] and re-reads from the unadvanced offset: duplicates are possible
//! after a crash or a failed commit, gaps are not.
//!
//! Only committed records reach a child (KIP-98): the cursor reads below the parent's last
//! stable offset (an open transaction holds it back, [`UNSTABLE_POLL`]), and leaves out control
//! batches (markers) and the batches of aborted transactions; its position still moves past
//! them. Children get ordinary, non-transactional batches.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use engine::batch::BatchHeader;
use engine::log::DueRead;
use engine::shard::CoreGone;
use engine::txn::{AbortedRanges, AbortedTxn};
use engine::{LogError, PartitionError};
use kafka_protocol::records::Record;

use crate::offset_file::CursorFile;
use crate::rekey;
use crate::{
    DUE_WAKE_CAP, FAILURE_BACKOFF, SLAB_LINGER, SLAB_LONG_POLL, SLAB_MAX_BYTES, SLAB_MAX_RECORDS,
    UNSTABLE_POLL,
};

/// A parent read that failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The offset is below the log start (aged out by retention): drop-behind.
    #[error("below the parent's log start {log_start}")]
    OutOfRange { log_start: u64 },
    #[error("reading the parent: {0}")]
    Log(#[from] LogError),
    #[error("decoding a parent batch: {0}")]
    Decode(String),
}

/// Why one cursor step failed (it backs off and re-reads from its unadvanced offset).
#[derive(Debug, thiserror::Error)]
pub enum CursorError {
    #[error("parent offset {next} out of range (log start {log_start})")]
    ParentOutOfRange { next: u64, log_start: u64 },
    #[error(transparent)]
    Read(ReadError),
    #[error("child topic {child} does not exist")]
    NoChild { child: String },
    #[error("child topic {child} has no partitions")]
    NoChildPartitions { child: String },
    #[error("child {child}/{partition} is not served on this node")]
    ChildNotServed { child: String, partition: u32 },
    #[error("child partition {partition}: {source}")]
    ChildAppend {
        partition: u32,
        #[source]
        source: PartitionError,
    },
    #[error("child partition {partition}: {source}")]
    ChildCoreGone {
        partition: u32,
        #[source]
        source: CoreGone,
    },
    /// The child partition is replicated and its in-sync replicas did not take the batch
    /// (fewer of them than its `min.insync.replicas`, leadership moved, or they lagged past
    /// the request timeout): as an acks=all produce, the commit does not count; the cursor
    /// retries the same batch.
    #[error("child partition {partition} not replicated: {reason}")]
    ChildNotReplicated { partition: u32, reason: String },
    /// The child partition's owner is another node and the node RPC to it failed (down,
    /// unreachable, or its append failed); the cursor retries the same batch.
    #[error("child partition {partition} on node {node_id}: {reason}")]
    ChildRemote {
        partition: u32,
        node_id: u64,
        reason: String,
    },
    #[error("writing the offset file: {0}")]
    OffsetFile(#[source] std::io::Error),
}

/// The parent partition, read locally on its owner core (`PartitionLog` in the broker).
// The broker's executors are single-threaded (glommio): these futures are not Send by design.
#[allow(async_fn_in_trait)]
pub trait ParentLog {
    fn high_watermark(&self) -> u64;
    /// `Partition::last_stable_offset`: min(high watermark, first offset of the oldest open
    /// transaction). The cursor's read limit: it copies nothing at or above it.
    fn last_stable_offset(&self) -> u64;
    /// `Partition::aborted_transactions`: the aborted transactions overlapping `from..to`.
    fn aborted_transactions(&self, from: u64, to: u64) -> Vec<AbortedTxn>;
    /// `PartitionLog::read_due`: whole batches from the one holding `from`, below the high
    /// watermark (the cursor cuts them at the last stable offset), all committed at or before
    /// `due_by_commit_ms`.
    async fn read_due(
        &self,
        from: u64,
        max_bytes: usize,
        due_by_commit_ms: i64,
    ) -> Result<DueRead, ReadError>;
    /// Waits until the high watermark passes `offset` or `timeout` ends; true if data arrived.
    async fn wait_for_data_after(&self, offset: u64, timeout: Duration) -> bool;
    /// Commit time of the batch holding `offset`, if it is in the log.
    async fn commit_time_of(&self, offset: u64) -> Option<i64>;
    /// Durably replaces cursor `child`'s offset file in the parent partition.
    async fn store_position(&self, child: &str, file: &CursorFile) -> std::io::Result<()>;
}

/// The child topic: appends one batch to one child partition durably (fsync on the owner core,
/// like a produce with acks=all), wherever that partition lives.
#[allow(async_fn_in_trait)]
pub trait ChildSink {
    /// The child's current partition count.
    fn partitions(&self) -> Result<u32, CursorError>;
    async fn commit(&self, partition: u32, batch: Vec<u8>) -> Result<(), CursorError>;
}

/// Wall clock and sleeping (the broker's is glommio's timer; tests use a fake one).
#[allow(async_fn_in_trait)]
pub trait Clock {
    fn now_ms(&self) -> i64;
    async fn sleep(&self, d: Duration);
}

/// A cursor's counters and gauges, shared with whoever exports metrics.
#[derive(Debug, Default)]
pub struct CursorStats {
    /// Parent records committed to the child (`fanout_committed_total`).
    pub committed_total: Cell<u64>,
    /// Parent offsets skipped because retention removed them first
    /// (`fanout_child_dropped_messages`).
    pub dropped_total: Cell<u64>,
    /// Parent offsets passed over without a copy: control batches (transaction markers) and
    /// batches of aborted transactions.
    pub skipped_total: Cell<u64>,
    /// Parent high watermark minus the cursor (`fanout_lag_messages`).
    pub lag_messages: Cell<u64>,
    /// How far the cursor is behind the due frontier, in ms (`fanout_due_lag_seconds`).
    pub due_lag_ms: Cell<u64>,
    /// The cursor's next offset (what the offset file holds once durable).
    pub next_offset: Cell<u64>,
    /// Consecutive failed steps (0 when healthy).
    pub failures: Cell<u64>,
}

/// One fill-or-linger slab.
#[derive(Debug, Default)]
pub struct Slab {
    pub records: Vec<Record>,
    /// The offset after the slab (where the cursor continues once it is committed).
    pub end: u64,
    /// Offsets skipped by drop-behind while reading it.
    pub dropped: u64,
    /// Offsets of control batches and aborted transactions passed over while reading it.
    pub skipped: u64,
    /// Commit time of the first parent batch that was not due (delay children).
    pub first_undue_commit_ms: Option<i64>,
}

/// What one step did (for tests and tracing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Committed this many records and advanced the offset file.
    Committed(usize),
    /// Nothing copied (long-poll ended, only undue or unstable records, or only skipped ones:
    /// markers, aborted transactions).
    Idle,
    /// A read, commit or offset write failed (the error's text); backed off.
    Failed(String),
}

pub struct Cursor<P, C, K> {
    parent: P,
    child: C,
    clock: K,
    child_name: String,
    epoch: String,
    delay_ms: u64,
    next: u64,
    round_robin: u32,
    stats: Rc<CursorStats>,
}

/// The leading whole batches of `bytes` that start below `stable` (the last stable offset,
/// always a batch boundary): their length, and whether a batch was left out for it.
fn stable_prefix(bytes: &[u8], stable: u64) -> (usize, bool) {
    let len = engine::batch::bytes_below(bytes, stable);
    (len, len < bytes.len())
}

/// A batch the child never gets: a control batch (transaction marker), or a data batch of a
/// transaction its producer aborted (Kafka's rule: an aborted transaction of this producer
/// with first offset <= the batch's base offset <= its abort marker).
fn is_skipped(h: &BatchHeader, aborted: &AbortedRanges) -> bool {
    h.is_control() || aborted.contains(h)
}

type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

impl<P: ParentLog, C: ChildSink, K: Clock> Cursor<P, C, K> {
    /// A cursor that starts at `next_offset` (from `offset_file::decide_start`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        parent: P,
        child: C,
        clock: K,
        child_name: String,
        epoch: String,
        delay_ms: u64,
        next_offset: u64,
    ) -> Self {
        let stats = Rc::new(CursorStats::default());
        stats.next_offset.set(next_offset);
        Cursor {
            parent,
            child,
            clock,
            child_name,
            epoch,
            delay_ms,
            next: next_offset,
            round_robin: 0,
            stats,
        }
    }

    pub fn stats(&self) -> Rc<CursorStats> {
        self.stats.clone()
    }

    pub fn next_offset(&self) -> u64 {
        self.next
    }

    fn due_by(&self) -> i64 {
        if self.delay_ms == 0 {
            i64::MAX
        } else {
            self.clock.now_ms().saturating_sub(self.delay_ms as i64)
        }
    }

    /// Reads one slab from `self.next`: long-poll up to [`SLAB_LONG_POLL`] for the first data,
    /// then top up until [`SLAB_MAX_RECORDS`], [`SLAB_MAX_BYTES`] or [`SLAB_LINGER`], whichever
    /// comes first. A delay child only reads due batches and stops at the first undue one.
    /// Only batches below the parent's last stable offset are read: data past it (an open
    /// transaction) ends the slab, and if it is all there is the cursor waits [`UNSTABLE_POLL`].
    /// Control batches and aborted transactions give no records but move the slab's end.
    pub async fn read_slab(&self) -> Result<Slab, ReadError> {
        let mut slab = Slab {
            end: self.next,
            ..Slab::default()
        };
        if self.parent.last_stable_offset() <= slab.end {
            if self.parent.high_watermark() > slab.end {
                // Durable but not stable: no wake comes when the marker lands, look again.
                self.clock.sleep(UNSTABLE_POLL).await;
            } else {
                self.parent
                    .wait_for_data_after(slab.end, SLAB_LONG_POLL)
                    .await;
            }
        }
        let mut bytes = 0usize;
        let mut linger_end: Option<i64> = None;
        loop {
            let stable = self.parent.last_stable_offset();
            if stable <= slab.end && self.parent.high_watermark() > slab.end {
                // Data past the slab, none of it stable: no read of what would be cut off.
                break;
            }
            let r = match self
                .parent
                .read_due(slab.end, SLAB_MAX_BYTES - bytes, self.due_by())
                .await
            {
                Err(ReadError::OutOfRange { log_start }) if slab.end < log_start => {
                    slab.dropped += log_start - slab.end;
                    slab.end = log_start;
                    continue;
                }
                r => r?,
            };
            let (kept, held) = stable_prefix(&r.bytes, stable);
            let read = &r.bytes[..kept];
            if read.is_empty() {
                if held {
                    break;
                }
                if !r.bytes.is_empty() {
                    return Err(ReadError::Decode("unparsable parent batch header".into()));
                }
                if let Some(t) = r.first_undue_commit_ms {
                    slab.first_undue_commit_ms = Some(t);
                    break;
                }
                let Some(end) = linger_end else { break };
                let left = end - self.clock.now_ms();
                if left <= 0
                    || !self
                        .parent
                        .wait_for_data_after(slab.end, Duration::from_millis(left as u64))
                        .await
                {
                    break;
                }
                continue;
            }
            bytes += read.len();
            let batches: Vec<(BatchHeader, &[u8])> = engine::batch::stored_batches(read).collect();
            let aborted = match (batches.first(), batches.last()) {
                (Some((first, _)), Some((last, _)))
                    if batches
                        .iter()
                        .any(|(h, _)| h.is_transactional() && !h.is_control()) =>
                {
                    self.parent.aborted_transactions(
                        first.base_offset as u64,
                        last.last_offset() as u64 + 1,
                    )
                }
                _ => Vec::new(),
            };
            let aborted = AbortedRanges::new(&aborted);
            let mut full = false;
            for (h, b) in batches {
                let batch_end = h.last_offset() as u64 + 1;
                if batch_end <= slab.end {
                    continue;
                }
                if is_skipped(&h, &aborted) {
                    slab.skipped += batch_end - slab.end.max(h.base_offset as u64);
                    slab.end = batch_end;
                    continue;
                }
                for rec in rekey::decode_parent(b, slab.end).map_err(ReadError::Decode)? {
                    if slab.records.len() == SLAB_MAX_RECORDS {
                        slab.end = rec.offset as u64;
                        full = true;
                        break;
                    }
                    slab.records.push(rec);
                }
                if full {
                    break;
                }
                slab.end = batch_end;
            }
            if full || slab.records.len() >= SLAB_MAX_RECORDS || bytes >= SLAB_MAX_BYTES {
                break;
            }
            if held {
                // An open transaction: nothing after it is stable yet.
                break;
            }
            if r.first_undue_commit_ms.is_some() {
                slab.first_undue_commit_ms = r.first_undue_commit_ms;
                break;
            }
            if linger_end.is_none() && !slab.records.is_empty() {
                linger_end = Some(self.clock.now_ms() + SLAB_LINGER.as_millis() as i64);
            }
        }
        Ok(slab)
    }

    /// Commits the slab's records to the child (every child partition concurrently) and then,
    /// only if all of them are durable, advances the offset file.
    async fn commit_slab(&self, slab: &Slab, round_robin: &mut u32) -> Result<(), CursorError> {
        let partitions = self.child.partitions()?;
        if partitions == 0 {
            return Err(CursorError::NoChildPartitions {
                child: self.child_name.clone(),
            });
        }
        let batches = rekey::rekey(&slab.records, partitions, round_robin);
        // Child partitions concurrently; the batches of one partition in order.
        let futs: Vec<LocalFuture<'_, Result<(), CursorError>>> = batches
            .into_iter()
            .map(|(p, bs)| {
                Box::pin(async move {
                    for b in bs {
                        self.child.commit(p, b).await?;
                    }
                    Ok(())
                }) as LocalFuture<'_, _>
            })
            .collect();
        for r in engine::join::join_all(futs).await {
            r?;
        }
        self.persist(slab.end).await
    }

    async fn persist(&self, next_offset: u64) -> Result<(), CursorError> {
        let file = CursorFile {
            epoch: self.epoch.clone(),
            next_offset,
        };
        self.parent
            .store_position(&self.child_name, &file)
            .await
            .map_err(CursorError::OffsetFile)
    }

    /// One iteration of the cursor loop.
    pub async fn step(&mut self) -> Step {
        let outcome = match self.read_slab().await {
            Err(ReadError::OutOfRange { log_start }) => Err(CursorError::ParentOutOfRange {
                next: self.next,
                log_start,
            }),
            Err(e) => Err(CursorError::Read(e)),
            Ok(slab) => {
                let n = slab.records.len();
                let mut rr = self.round_robin;
                // Dropped or skipped offsets move the position too (nothing to re-read).
                let r = if n > 0 || slab.end != self.next {
                    self.commit_slab(&slab, &mut rr).await
                } else {
                    Ok(())
                };
                match r {
                    Ok(()) => {
                        self.round_robin = rr;
                        self.next = slab.end;
                        let s = &self.stats;
                        s.next_offset.set(self.next);
                        s.committed_total.set(s.committed_total.get() + n as u64);
                        s.dropped_total.set(s.dropped_total.get() + slab.dropped);
                        s.skipped_total.set(s.skipped_total.get() + slab.skipped);
                        if slab.dropped > 0 {
                            tracing::warn!(
                                child = %self.child_name,
                                dropped = slab.dropped,
                                "fan-out cursor fell behind parent retention; offsets skipped"
                            );
                        }
                        self.update_gauges(slab.first_undue_commit_ms).await;
                        if n == 0 {
                            if let Some(t) = slab.first_undue_commit_ms {
                                let due_in = t + self.delay_ms as i64 - self.clock.now_ms();
                                let d =
                                    Duration::from_millis(due_in.max(1) as u64).min(DUE_WAKE_CAP);
                                self.clock.sleep(d).await;
                            }
                        }
                        Ok(n)
                    }
                    Err(e) => Err(e),
                }
            }
        };
        match outcome {
            Ok(0) => {
                self.stats.failures.set(0);
                Step::Idle
            }
            Ok(n) => {
                self.stats.failures.set(0);
                Step::Committed(n)
            }
            Err(e) => {
                self.stats.failures.set(self.stats.failures.get() + 1);
                tracing::warn!(child = %self.child_name, error = %e, "fan-out cursor step failed; backing off");
                self.clock.sleep(FAILURE_BACKOFF).await;
                Step::Failed(e.to_string())
            }
        }
    }

    async fn update_gauges(&self, first_undue: Option<i64>) {
        let hwm = self.parent.high_watermark();
        self.stats.lag_messages.set(hwm.saturating_sub(self.next));
        // Behind the due frontier: the next record's commit time is already due by this much.
        let due_lag = if self.next >= hwm {
            0
        } else if let Some(t) = self.parent.commit_time_of(self.next).await {
            let due_by = self.due_by().min(self.clock.now_ms());
            if first_undue.is_some_and(|u| u <= t) {
                0
            } else {
                (due_by - t).max(0) as u64
            }
        } else {
            0
        };
        self.stats.due_lag_ms.set(due_lag);
    }

    /// Runs the cursor until the task is dropped (the reconciler stops it that way).
    pub async fn run(mut self) {
        loop {
            self.step().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use bytes::Bytes;
    use futures_lite::future::block_on;
    use kafka_protocol::records::RecordBatchDecoder;

    use super::*;
    use engine::batch_encode::{NewRecord, ProducerSeq};
    use engine::txn::MarkerKind;

    /// Parent batches with their commit times; reads follow `PartitionLog::read_due`'s rules.
    #[derive(Default)]
    struct FakeParent {
        /// (base offset, commit time, stored bytes)
        batches: RefCell<Vec<(u64, i64, Vec<u8>)>>,
        log_start: Cell<u64>,
        hwm: Cell<u64>,
        /// The last stable offset while a transaction is open (None: the high watermark).
        lso: Cell<Option<u64>>,
        aborted: RefCell<Vec<AbortedTxn>>,
        /// What the cursor stored as its position.
        position: RefCell<Option<CursorFile>>,
    }

    impl FakeParent {
        fn produce(&self, keys: &[Option<&str>], commit_ms: i64) {
            self.append(keys, commit_ms, None);
        }

        /// A data batch of producer `pid`'s open transaction.
        fn produce_txn(&self, pid: i64, keys: &[Option<&str>]) {
            self.append(keys, 0, Some(pid));
        }

        fn append(&self, keys: &[Option<&str>], commit_ms: i64, txn_pid: Option<i64>) {
            let base = self.hwm.get();
            let records = keys.iter().enumerate().map(|(i, k)| NewRecord {
                key: k.map(|k| Bytes::from(k.to_string())),
                value: Some(Bytes::from(format!("{}", base + i as u64))),
                timestamp_ms: commit_ms,
                ..Default::default()
            });
            let stored = match txn_pid {
                None => engine::batch_encode::encode_uncompressed(records),
                Some(pid) => engine::batch_encode::encode_transactional(
                    records,
                    ProducerSeq {
                        producer_id: pid,
                        epoch: 0,
                        base_sequence: 0,
                    },
                ),
            };
            self.push(stored, commit_ms);
        }

        /// Producer `pid`'s commit or abort marker; an abort is indexed from `first`.
        fn marker(&self, pid: i64, kind: MarkerKind, first: u64) {
            let at = self.hwm.get();
            self.push(engine::txn::encode_marker(pid, 0, kind, 0, 0), 0);
            if kind == MarkerKind::Abort {
                self.aborted.borrow_mut().push(AbortedTxn {
                    producer_id: pid,
                    first_offset: first,
                    last_offset: at,
                });
            }
        }

        fn push(&self, mut stored: Vec<u8>, commit_ms: i64) {
            let base = self.hwm.get();
            engine::batch::set_base_offset(&mut stored, base as i64);
            let h = engine::batch::parse_header(&stored).unwrap();
            self.batches.borrow_mut().push((base, commit_ms, stored));
            self.hwm.set(h.last_offset() as u64 + 1);
        }
    }

    impl ParentLog for &FakeParent {
        fn high_watermark(&self) -> u64 {
            self.hwm.get()
        }
        fn last_stable_offset(&self) -> u64 {
            self.lso.get().unwrap_or(self.hwm.get())
        }
        fn aborted_transactions(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
            self.aborted
                .borrow()
                .iter()
                .filter(|a| a.last_offset >= from && a.first_offset < to)
                .copied()
                .collect()
        }
        async fn read_due(&self, from: u64, max: usize, due_by: i64) -> Result<DueRead, ReadError> {
            if from < self.log_start.get() {
                return Err(ReadError::OutOfRange {
                    log_start: self.log_start.get(),
                });
            }
            let mut out = DueRead::default();
            for (i, (base, ct, b)) in self.batches.borrow().iter().enumerate() {
                let next_base = self
                    .batches
                    .borrow()
                    .get(i + 1)
                    .map(|x| x.0)
                    .unwrap_or(self.hwm.get());
                if next_base <= from {
                    continue;
                }
                let _ = base;
                if *ct > due_by {
                    out.first_undue_commit_ms = Some(*ct);
                    break;
                }
                if !out.bytes.is_empty() && out.bytes.len() + b.len() > max {
                    break;
                }
                out.bytes.extend_from_slice(b);
            }
            Ok(out)
        }
        async fn wait_for_data_after(&self, offset: u64, _t: Duration) -> bool {
            self.hwm.get() > offset
        }
        async fn commit_time_of(&self, offset: u64) -> Option<i64> {
            self.batches
                .borrow()
                .iter()
                .rev()
                .find(|b| b.0 <= offset)
                .map(|b| b.1)
        }
        async fn store_position(&self, child: &str, file: &CursorFile) -> std::io::Result<()> {
            assert_eq!(child, "child");
            *self.position.borrow_mut() = Some(file.clone());
            Ok(())
        }
    }

    /// (child partition, key, value)
    type Copied = (u32, Option<Bytes>, Option<Bytes>);

    #[derive(Default)]
    struct FakeChild {
        parts: u32,
        /// (partition, decoded (key, value))
        got: RefCell<Vec<Copied>>,
        fail: Cell<bool>,
    }

    impl ChildSink for &FakeChild {
        fn partitions(&self) -> Result<u32, CursorError> {
            Ok(self.parts)
        }
        async fn commit(&self, p: u32, batch: Vec<u8>) -> Result<(), CursorError> {
            if self.fail.get() {
                return Err(CursorError::ChildNotServed {
                    child: "child".into(),
                    partition: p,
                });
            }
            let mut b = Bytes::from(batch);
            let sets = RecordBatchDecoder::decode_all(&mut b).unwrap();
            assert_eq!(sets.len(), 1);
            for r in &sets[0].records {
                self.got
                    .borrow_mut()
                    .push((p, r.key.clone(), r.value.clone()));
            }
            Ok(())
        }
    }

    #[derive(Default)]
    struct FakeClock {
        now: Cell<i64>,
        slept: RefCell<Vec<Duration>>,
    }

    impl Clock for &FakeClock {
        fn now_ms(&self) -> i64 {
            self.now.get()
        }
        async fn sleep(&self, d: Duration) {
            self.slept.borrow_mut().push(d);
            self.now.set(self.now.get() + d.as_millis() as i64);
        }
    }

    /// An empty parent, a child of `parts` partitions and a clock at 0.
    fn fakes(parts: u32) -> (FakeParent, FakeChild, FakeClock) {
        (
            FakeParent::default(),
            FakeChild {
                parts,
                ..Default::default()
            },
            FakeClock::default(),
        )
    }

    fn values(c: &FakeChild) -> Vec<u64> {
        let mut v: Vec<u64> = c
            .got
            .borrow()
            .iter()
            .map(|(_, _, v)| {
                std::str::from_utf8(v.as_ref().unwrap())
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        v.sort();
        v
    }

    fn file(p: &FakeParent) -> Option<CursorFile> {
        p.position.borrow().clone()
    }

    #[test]
    fn copies_from_attach_offset_then_advances_file() {
        let (p, c, k) = fakes(3);
        p.produce(&[Some("a"), Some("b")], 0); // before attach: never copied
        let attach = p.hwm.get();
        p.produce(&[Some("a"), None, Some("c")], 1);
        p.produce(&[Some("a"), Some("b")], 2);
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e1".into(), 0, attach);
        assert_eq!(block_on(cur.step()), Step::Committed(5));
        assert_eq!(values(&c), vec![2, 3, 4, 5, 6]);
        assert_eq!(
            file(&p),
            Some(CursorFile {
                epoch: "e1".into(),
                next_offset: 7
            })
        );
        // Same key, same child partition, parent order.
        let a: Vec<_> = c
            .got
            .borrow()
            .iter()
            .filter(|g| g.1.as_deref() == Some(&b"a"[..]))
            .map(|g| (g.0, g.2.clone()))
            .collect();
        assert!(a.iter().all(|x| x.0 == a[0].0));
        let a_values: Vec<Bytes> = a.iter().map(|x| x.1.clone().unwrap()).collect();
        assert_eq!(a_values, vec![Bytes::from("2"), Bytes::from("5")]);
        assert_eq!(block_on(cur.step()), Step::Idle);
        assert_eq!(cur.stats().committed_total.get(), 5);
        assert_eq!(cur.stats().lag_messages.get(), 0);
    }

    #[test]
    fn failed_commit_does_not_advance_and_retry_has_no_gap() {
        let (p, c, k) = fakes(2);
        p.produce(&[Some("x"); 3], 0);
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e1".into(), 0, 0);
        c.fail.set(true);
        assert!(matches!(block_on(cur.step()), Step::Failed(_)));
        assert_eq!(file(&p), None);
        assert_eq!(cur.next_offset(), 0);
        assert_eq!(k.slept.borrow().last(), Some(&FAILURE_BACKOFF));
        c.fail.set(false);
        assert_eq!(block_on(cur.step()), Step::Committed(3));
        assert_eq!(values(&c), vec![0, 1, 2]);
        assert_eq!(file(&p).unwrap().next_offset, 3);
    }

    #[test]
    fn delay_gate_never_early_and_sleeps_until_due() {
        let (p, c, k) = fakes(1);
        k.now.set(10_000);
        p.produce(&[Some("a")], 10_000);
        p.produce(&[Some("b")], 10_500);
        let delay = 2_000;
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e".into(), delay, 0);
        // Nothing due: no copy, sleeps exactly until the first record is due.
        assert_eq!(block_on(cur.step()), Step::Idle);
        assert!(c.got.borrow().is_empty());
        assert_eq!(k.slept.borrow().last(), Some(&Duration::from_millis(2_000)));
        assert_eq!(k.now.get(), 12_000);
        // Now the first is due (commit + delay == now), the second is not.
        assert_eq!(block_on(cur.step()), Step::Committed(1));
        assert_eq!(values(&c), vec![0]);
        assert_eq!(block_on(cur.step()), Step::Idle);
        assert_eq!(k.slept.borrow().last(), Some(&Duration::from_millis(500)));
        assert_eq!(block_on(cur.step()), Step::Committed(1));
        // A far-future record: the sleep is capped.
        p.produce(&[Some("c")], 10_000_000);
        assert_eq!(block_on(cur.step()), Step::Idle);
        assert_eq!(k.slept.borrow().last(), Some(&DUE_WAKE_CAP));
        assert_eq!(values(&c), vec![0, 1]);
    }

    #[test]
    fn drop_behind_is_skipped_and_counted() {
        let (p, c, k) = fakes(1);
        p.produce(&[Some("a"); 4], 0);
        p.produce(&[Some("b"); 2], 0);
        p.batches.borrow_mut().remove(0);
        p.log_start.set(4);
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e".into(), 0, 1);
        assert_eq!(block_on(cur.step()), Step::Committed(2));
        assert_eq!(cur.stats().dropped_total.get(), 3);
        assert_eq!(values(&c), vec![4, 5]);
        assert_eq!(file(&p).unwrap().next_offset, 6);
    }

    /// DeleteRecords moves the log start into a batch that stays stored: the offsets below it
    /// are dropped and counted, the rest of that batch is copied.
    #[test]
    fn a_log_start_inside_a_batch_drops_only_the_records_below_it() {
        let (p, c, k) = fakes(1);
        p.produce(&[Some("a"); 4], 0);
        p.produce(&[Some("b"); 2], 0);
        p.log_start.set(2);
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e".into(), 0, 0);
        assert_eq!(block_on(cur.step()), Step::Committed(4));
        assert_eq!(cur.stats().dropped_total.get(), 2);
        assert_eq!(values(&c), vec![2, 3, 4, 5]);
        assert_eq!(file(&p).unwrap().next_offset, 6);
    }

    #[test]
    fn slab_is_capped_at_max_records_mid_batch() {
        let (p, c, k) = fakes(4);
        let keys: Vec<Option<&str>> = vec![None; 3_000];
        p.produce(&keys, 0);
        p.produce(&keys, 0);
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e".into(), 0, 0);
        assert_eq!(block_on(cur.step()), Step::Committed(SLAB_MAX_RECORDS));
        assert_eq!(file(&p).unwrap().next_offset, SLAB_MAX_RECORDS as u64);
        assert_eq!(
            block_on(cur.step()),
            Step::Committed(6_000 - SLAB_MAX_RECORDS)
        );
        assert_eq!(values(&c), (0..6_000).collect::<Vec<u64>>());
        // Null keys spread evenly.
        let on0 = c.got.borrow().iter().filter(|g| g.0 == 0).count();
        assert_eq!(on0, 1_500);
    }

    #[test]
    fn stable_prefix_cuts_at_the_last_stable_offset() {
        let p = FakeParent::default();
        p.produce(&[None; 3], 0);
        p.produce(&[None; 2], 0);
        let all: Vec<u8> = p
            .batches
            .borrow()
            .iter()
            .flat_map(|b| b.2.clone())
            .collect();
        let first = p.batches.borrow()[0].2.len();
        assert_eq!(stable_prefix(&all, 5), (all.len(), false));
        assert_eq!(stable_prefix(&all, 3), (first, true));
        assert_eq!(stable_prefix(&all, 0), (0, true));
        assert_eq!(stable_prefix(&[], 7), (0, false));
    }

    #[test]
    fn markers_and_aborted_transactions_are_skipped_and_passed_over() {
        let (p, c, k) = fakes(2);
        p.produce(&[Some("a")], 0); // 0
        p.produce_txn(7, &[Some("b"), Some("c")]); // 1, 2
        p.marker(7, MarkerKind::Commit, 1); // 3
        p.produce_txn(8, &[Some("d")]); // 4: aborted below
        p.produce_txn(7, &[Some("e")]); // 5: another producer inside 8's range, committed
        p.marker(8, MarkerKind::Abort, 4); // 6
        p.marker(7, MarkerKind::Commit, 5); // 7
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e".into(), 0, 0);
        assert_eq!(block_on(cur.step()), Step::Committed(4));
        assert_eq!(values(&c), vec![0, 1, 2, 5]);
        assert_eq!(file(&p).unwrap().next_offset, 8);
        assert_eq!(cur.stats().skipped_total.get(), 4);
        assert_eq!(cur.stats().committed_total.get(), 4);
        // Only an aborted transaction and its marker: nothing copied, the position moves on.
        p.produce_txn(9, &[Some("x"), Some("y")]); // 8, 9
        p.marker(9, MarkerKind::Abort, 8); // 10
        assert_eq!(block_on(cur.step()), Step::Idle);
        assert_eq!(values(&c), vec![0, 1, 2, 5]);
        assert_eq!(file(&p).unwrap().next_offset, 11);
        assert_eq!(cur.next_offset(), 11);
        assert_eq!(cur.stats().skipped_total.get(), 7);
        // A cursor resumed from the file copies nothing again.
        let mut again = Cursor::new(&p, &c, &k, "child".into(), "e".into(), 0, 11);
        assert_eq!(block_on(again.step()), Step::Idle);
        assert_eq!(values(&c), vec![0, 1, 2, 5]);
    }

    #[test]
    fn a_committed_transaction_cut_by_the_record_cap_resumes_inside_it() {
        let (p, c, k) = fakes(1);
        let keys: Vec<Option<&str>> = vec![None; SLAB_MAX_RECORDS + 10];
        let n = keys.len() as u64;
        p.produce_txn(3, &keys); // 0..n: the first slab stops inside it
        p.marker(3, MarkerKind::Commit, 0); // n
        p.produce_txn(5, &[None; 5]); // n+1..n+6: aborted
        p.marker(5, MarkerKind::Abort, n + 1); // n+6
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e".into(), 0, 0);
        assert_eq!(block_on(cur.step()), Step::Committed(SLAB_MAX_RECORDS));
        assert_eq!(block_on(cur.step()), Step::Committed(10));
        assert_eq!(values(&c), (0..n).collect::<Vec<_>>());
        assert_eq!(file(&p).unwrap().next_offset, n + 7);
        assert_eq!(cur.stats().skipped_total.get(), 7);
    }

    #[test]
    fn an_open_transaction_holds_the_cursor_at_the_last_stable_offset() {
        let (p, c, k) = fakes(3);
        p.produce(&[Some("a")], 0); // 0
        p.produce_txn(7, &[Some("b"), Some("c")]); // 1, 2: open
        p.lso.set(Some(1));
        p.produce(&[Some("d")], 0); // 3: plain, but after the open transaction
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e".into(), 0, 0);
        assert_eq!(block_on(cur.step()), Step::Committed(1));
        assert_eq!(values(&c), vec![0]);
        assert_eq!(file(&p).unwrap().next_offset, 1);
        // Held: no copy, no advance, and a short sleep rather than a hot loop.
        for _ in 0..3 {
            assert_eq!(block_on(cur.step()), Step::Idle);
        }
        assert_eq!(values(&c), vec![0]);
        assert_eq!(cur.next_offset(), 1);
        assert_eq!(file(&p).unwrap().next_offset, 1);
        assert_eq!(k.slept.borrow().len(), 3);
        assert!(k.slept.borrow().iter().all(|d| *d == UNSTABLE_POLL));
        // The marker lands: the transaction and the record after it are copied.
        p.marker(7, MarkerKind::Commit, 1); // 4
        p.lso.set(None);
        assert_eq!(block_on(cur.step()), Step::Committed(3));
        assert_eq!(values(&c), vec![0, 1, 2, 3]);
        assert_eq!(file(&p).unwrap().next_offset, 5);
        assert_eq!(cur.stats().skipped_total.get(), 1);
    }

    #[test]
    fn a_delay_child_also_stops_at_the_last_stable_offset() {
        let (p, c, k) = fakes(1);
        k.now.set(10_000);
        p.produce(&[Some("a")], 1_000); // 0: due
        p.produce_txn(4, &[Some("b")]); // 1: due (commit time 0) but open
        p.lso.set(Some(1));
        let mut cur = Cursor::new(&p, &c, &k, "child".into(), "e".into(), 1_000, 0);
        assert_eq!(block_on(cur.step()), Step::Committed(1));
        assert_eq!(block_on(cur.step()), Step::Idle);
        assert_eq!(k.slept.borrow().last(), Some(&UNSTABLE_POLL));
        p.marker(4, MarkerKind::Abort, 1);
        p.lso.set(None);
        assert_eq!(block_on(cur.step()), Step::Idle);
        assert_eq!(values(&c), vec![0]);
        assert_eq!(file(&p).unwrap().next_offset, 3);
    }
}
