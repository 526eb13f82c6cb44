//! Reads: fetch ranges below the high watermark, the delay gate, timestamp lookups, waits.

use std::rc::Rc;
use std::time::Instant;

use super::{DueRead, LogError, PartitionLog, TimestampOffset};
use crate::batch;
use crate::index::{self, OffsetEntry};
use crate::io::SegmentFile;
use crate::segment::ClosedSegment;
use crate::tail_cache::TailWindow;

/// Where a read stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// The high watermark: what consumers may see.
    HighWatermark,
    /// The durable end: a replicated partition's batches above its high watermark too.
    Durable,
}

impl PartitionLog {
    /// Walks the stored batches from the one holding `from` up to `read_end` (or `until`,
    /// whichever is lower), reading `chunk_bytes` at a time, and gives each to `f` (header,
    /// bytes). Returns the offset after the last batch walked. The one log walker:
    /// producer-state rebuild and group replay use it, up to the durable end.
    pub async fn for_each_batch(
        &self,
        from: u64,
        until: u64,
        chunk_bytes: usize,
        read_end: ReadEnd,
        mut f: impl FnMut(&batch::BatchHeader, &[u8]),
    ) -> Result<u64, LogError> {
        let end = until.min(match read_end {
            ReadEnd::HighWatermark => self.high_watermark(),
            ReadEnd::Durable => self.durable_end(),
        });
        let mut next = from.max(self.log_start_offset());
        while next < end {
            let bytes = self
                .read_up_to(next, chunk_bytes, i64::MAX, read_end)
                .await?
                .bytes;
            let before = next;
            for (h, one) in batch::stored_batches(&bytes) {
                if h.base_offset as u64 >= end {
                    break;
                }
                f(&h, one);
                next = next.max(h.last_offset() as u64 + 1);
            }
            if next <= before {
                break;
            }
        }
        Ok(next)
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
        self.read_up_to(from, max_bytes, due_by_commit_ms, ReadEnd::HighWatermark)
            .await
    }

    /// `read` up to the durable end instead of the high watermark: what a replicated
    /// partition's leader sends its followers (issue #18), who make it durable in their turn
    /// before the high watermark covers it.
    pub async fn read_durable(&self, from: u64, max_bytes: usize) -> Result<Vec<u8>, LogError> {
        Ok(self
            .read_up_to(from, max_bytes, i64::MAX, ReadEnd::Durable)
            .await?
            .bytes)
    }

    async fn read_up_to(
        &self,
        from: u64,
        max_bytes: usize,
        due_by_commit_ms: i64,
        until: ReadEnd,
    ) -> Result<DueRead, LogError> {
        let mut from = from;
        loop {
            match self
                .read_due_once(from, max_bytes, due_by_commit_ms, until)
                .await?
            {
                ReadStep::Done(r) => return Ok(r),
                ReadStep::Replan => {}
                ReadStep::SkipTo(next) => {
                    assert!(next > from, "a skip moves forward");
                    from = next;
                }
            }
        }
    }

    /// One try of `read_due`: the read, or where to try again. A cleaned segment has gaps
    /// (whole batches gone), and so may a follower's active segment that copied a cleaned
    /// leader's: a read that lands in one skips to the next batch or segment.
    async fn read_due_once(
        &self,
        from: u64,
        max_bytes: usize,
        due_by_commit_ms: i64,
        until: ReadEnd,
    ) -> Result<ReadStep, LogError> {
        enum Plan {
            Read(
                Rc<SegmentFile>,
                u64,
                u64,
                Option<i64>,
                Option<u64>,
                Option<Rc<TailWindow>>,
            ),
            Closed(ClosedSegment),
        }
        let (plan, hwm, planned_generation) = {
            let st = self.st.borrow();
            if st.closed_for_good {
                return Err(LogError::Closed {
                    dir: self.dir_name(),
                });
            }
            // In range up to the durable end (Kafka's log end offset): a read between the
            // high watermark and it finds nothing yet.
            if from < st.log_start_offset || from > st.durable_end {
                return Err(LogError::OffsetOutOfRange {
                    dir: self.dir_name(),
                    requested: from,
                    log_start: st.log_start_offset,
                    high_watermark: st.visible_end(),
                });
            }
            let end = match until {
                ReadEnd::HighWatermark => st.visible_end(),
                ReadEnd::Durable => st.durable_end,
            };
            if from >= end {
                return Ok(ReadStep::Done(DueRead::default()));
            }
            let plan = match &st.active {
                Some(a) if from >= a.base_offset => {
                    let r = batch_range(
                        &a.entries,
                        a.log.len(),
                        a.base_offset,
                        from,
                        end,
                        max_bytes,
                        due_by_commit_ms,
                    );
                    match r.range {
                        Some((pos, len)) => Plan::Read(
                            a.log.file().clone(),
                            pos,
                            len,
                            r.first_undue_commit_ms,
                            r.next_base,
                            a.tail.clone(),
                        ),
                        None => {
                            return Ok(ReadStep::Done(DueRead {
                                bytes: Vec::new(),
                                first_undue_commit_ms: r.first_undue_commit_ms,
                            }))
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
            (plan, end, st.cleaner.generation())
        };
        let (file, pos, len, first_undue_commit_ms, next_base, tail) = match plan {
            Plan::Read(f, p, l, u, n, t) => (f, p, l, u, n, t),
            Plan::Closed(seg) => {
                let Some(reader) = self.segment_reader(&seg, planned_generation).await? else {
                    return Ok(ReadStep::Replan);
                };
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
                    Some((p, l)) => (
                        reader.file.clone(),
                        p,
                        l,
                        r.first_undue_commit_ms,
                        Some(r.next_base.unwrap_or(seg.next_offset)),
                        None,
                    ),
                    // Nothing at or after `from` in this segment (a cleaned segment's empty
                    // tail): the next segment has it.
                    None if r.first_undue_commit_ms.is_none() && seg.next_offset < hwm => {
                        return Ok(ReadStep::SkipTo(seg.next_offset.max(from + 1)))
                    }
                    None => {
                        return Ok(ReadStep::Done(DueRead {
                            bytes: Vec::new(),
                            first_undue_commit_ms: r.first_undue_commit_ms,
                        }))
                    }
                }
            }
        };
        // At the tail, the core's tail cache has the bytes: no device read.
        let mut bytes = match tail.and_then(|t| t.read(pos, len)) {
            Some(b) => b,
            None => {
                let r = file
                    .read(pos, len as usize)
                    .await
                    .map_err(|e| self.io_err(e))?;
                self.check_read(r, pos, len)?
            }
        };
        // The first batch may end before `from` when the batches after it were cleaned away.
        if let Some((h, _)) = batch::stored_batches(&bytes).next() {
            if (h.last_offset() as u64) < from {
                bytes.drain(..h.size_bytes);
                if bytes.is_empty() {
                    // The batch after it (in this segment, or the next one), if any.
                    return Ok(match next_base {
                        Some(next) => ReadStep::SkipTo(next.max(from + 1)),
                        None => ReadStep::Done(DueRead::default()),
                    });
                }
            }
        }
        Ok(ReadStep::Done(DueRead {
            bytes,
            first_undue_commit_ms,
        }))
    }

    pub(super) fn check_read(
        &self,
        bytes: Vec<u8>,
        pos: u64,
        len: u64,
    ) -> Result<Vec<u8>, LogError> {
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
        'replan: loop {
            let (candidates, hwm, planned_generation) = {
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
                            first_timestamp_ms: a.first_timestamp_ms(),
                        });
                    }
                }
                (c, st.visible_end(), st.cleaner.generation())
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
                        let Some(r) = self.segment_reader(&seg, planned_generation).await? else {
                            continue 'replan;
                        };
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
                    // An emptied batch (kept by the cleaner for its producer) has no record to find.
                    if h.max_timestamp < target_ms || h.records_count == 0 {
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
            return Ok(None);
        }
    }

    /// Waits until data after `offset` becomes readable (the high watermark passes it) or until
    /// `deadline`; `true` if data arrived (or the log can no longer change: poisoned, closed).
    ///
    /// A reader woken by a flush yields once before it returns: the producers whose acks that
    /// flush made durable were woken by the same change, and their acks go out first (a tail
    /// reader's copy and response would otherwise sit in front of each ack).
    pub async fn wait_for_data_after(&self, offset: u64, deadline: Instant) -> bool {
        self.wait_for_end_after(offset, deadline, super::State::visible_end)
            .await
    }

    /// `wait_for_data_after` for the durable end (a leader answering a follower's fetch).
    pub async fn wait_for_durable_after(&self, offset: u64, deadline: Instant) -> bool {
        self.wait_for_end_after(offset, deadline, |st| st.durable_end)
            .await
    }

    async fn wait_for_end_after(
        &self,
        offset: u64,
        deadline: Instant,
        end_of: impl Fn(&super::State) -> u64,
    ) -> bool {
        let arrived = async {
            let mut waited = false;
            loop {
                let gen = {
                    let st = self.st.borrow();
                    if end_of(&st) > offset || st.poisoned.is_some() || st.closed_for_good {
                        break;
                    }
                    st.change_gen
                };
                self.wait_change(gen).await;
                waited = true;
            }
            if waited {
                futures_lite::future::yield_now().await;
            }
            true
        };
        let timeout = async {
            glommio::timer::sleep(deadline.saturating_duration_since(Instant::now())).await;
            false
        };
        futures_lite::future::or(arrived, timeout).await
    }

    /// Commit time of the batch holding `offset` (what seed 000's delay gate compares).
    pub async fn commit_time_of(&self, offset: u64) -> Result<Option<i64>, LogError> {
        loop {
            let (seg, planned_generation) = {
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
                    _ => (
                        st.closed
                            .range(..=offset)
                            .next_back()
                            .map(|(_, s)| s.clone()),
                        st.cleaner.generation(),
                    ),
                }
            };
            let Some(seg) = seg else { return Ok(None) };
            let Some(r) = self.segment_reader(&seg, planned_generation).await? else {
                continue;
            };
            let rel = (offset - seg.base_offset) as u32;
            return Ok(index::find_batch(&r.entries, rel).map(|i| r.entries[i].commit_time_ms));
        }
    }
}

/// What `batch_range` chose: the bytes to read, and the commit time of the first batch left
/// out because it is not due yet.
pub(super) struct BatchRange {
    range: Option<(u64, u64)>,
    first_undue_commit_ms: Option<i64>,
    /// Base offset of the batch after the first one read, if the segment has one.
    next_base: Option<u64>,
}

/// What one try of a read found.
enum ReadStep {
    Done(DueRead),
    /// A cleaner swap replaced the segment the read chose: choose again.
    Replan,
    /// Nothing readable at the offset asked for (a cleaned-away range): read from here.
    SkipTo(u64),
}

/// The byte range `(position, len)` to read for a fetch from `from`: whole batches, starting
/// with the one holding `from`, only batches below `limit_offset` and committed at or before
/// `due_by_commit_ms`, at most `max_bytes` unless the first batch alone is larger.
pub(super) fn batch_range(
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
        next_base: None,
    };
    // `from` before the first batch: a cleaned segment whose first batches are gone.
    let first = match index::find_batch(entries, (from - seg_base) as u32) {
        Some(i) => i,
        None if !entries.is_empty() => 0,
        None => return none,
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
            next_base: None,
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
        next_base: (first + 1 < entries.len()).then(|| base_of(first + 1)),
    }
}
