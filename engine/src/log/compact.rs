//! One cleaner pass over a compacted log (Kafka's log cleaner, `cleanup.policy=compact`).
//!
//! The log is split at the cleaner checkpoint: below `first_dirty_offset` every key appears at
//! most once (it was cleaned), above it is dirty, up to the first uncleanable offset (the
//! active segment, or the first segment holding a record newer than `min.compaction.lag.ms`).
//! A pass maps every key of the dirty range to its latest offset (a bounded `OffsetMap`: when
//! it is full the pass ends there), then rewrites the closed segments below the map's end,
//! group by group (consecutive segments of at most `segment.bytes` together), keeping a record
//! only if no later record has its key. Records keep their offsets; batches keep their base
//! offset, last offset delta, producer fields and codec. Tombstones get a delete horizon when
//! first kept and go once it passed (`delete.retention.ms`); a record without a key goes.
//!
//! Each group's cleaned segment is written under `.cleaned` names; at the end of the pass they
//! are all swapped in at once, crash-safely (`cleaner::swap`: one commit record, so a pass
//! costs a few directory syncs whatever its number of groups). Readers never see a mix: a swap takes the gate (`CleanerState::swapping`)
//! once no reader is opening a closed segment, and readers wait at the gate and re-plan when a
//! swap happened since they chose a segment. A reader that already holds a segment's files
//! keeps reading the old ones (their fds stay valid after the rename), a consistent view.

use std::collections::HashSet;
use std::rc::Rc;

use super::segment_set::{open_segment_at, seal_segment, SegmentContent};
use super::{LogError, PartitionLog};
use crate::batch::records::{self, RecordView};
use crate::batch::{self, BatchHeader};
use crate::cleaner::records::{delete_horizon_ms, rebuild};
use crate::cleaner::swap::{self, Swap};
use crate::cleaner::{CleanerCheckpoint, OffsetMap, Throttle};
use crate::config::LogConfig;
use crate::index::OffsetEntry;
use crate::io;
use crate::segment::{ClosedReader, ClosedSegment};

/// Bytes of whole batches the cleaner reads at a time.
pub const CLEANER_READ_BYTES: usize = 1 << 20;
/// The cleaned segment's buffered bytes are written out once this many are pending.
pub const CLEANER_WRITE_BATCH_BYTES: u64 = 4 << 20;

/// The cleaner's part of a log's state.
pub(super) struct CleanerState {
    checkpoint: CleanerCheckpoint,
    last_clean_ms: Option<i64>,
    /// A swap holds the gate: no reader opens a closed segment meanwhile.
    swapping: bool,
    /// The log is closing: a pass under way stops at its next step, no new one starts.
    closing: bool,
    /// A pass is under way (a close waits for it to end).
    running: bool,
    /// Readers opening a closed segment's files right now.
    reader_opens: u32,
    /// Changes to the closed-segment set that remove or replace files (swaps, retention):
    /// a reader that chose a segment before one re-plans.
    generation: u64,
    totals: CleanerTotals,
}

impl CleanerState {
    /// A reader notes it when it chooses a closed segment (see `segment_reader`).
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// Segments were removed or replaced.
    pub(super) fn segments_changed(&mut self) {
        self.generation += 1;
    }

    pub(super) fn new(checkpoint: CleanerCheckpoint) -> Self {
        Self {
            checkpoint,
            last_clean_ms: None,
            swapping: false,
            closing: false,
            running: false,
            reader_opens: 0,
            generation: 0,
            totals: CleanerTotals::default(),
        }
    }
}

/// What the cleaner did to one log since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanerTotals {
    pub passes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// Why a pass is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanReason {
    /// The dirty share of the cleanable bytes reached `min.cleanable.dirty.ratio`.
    DirtyRatio,
    /// Dirty data older than `max.compaction.lag.ms`.
    MaxCompactionLag,
    /// A kept tombstone's delete horizon passed.
    TombstonesDue,
}

/// How dirty a compacted log is.
#[derive(Debug, Clone, PartialEq)]
pub struct DirtyInfo {
    pub first_dirty_offset: u64,
    pub first_uncleanable_offset: u64,
    pub clean_bytes: u64,
    pub dirty_bytes: u64,
    /// dirty / (clean + dirty) over the closed segments below the first uncleanable offset.
    pub dirty_ratio: f64,
    pub due: Option<CleanReason>,
    pub last_clean_ms: Option<i64>,
    pub totals: CleanerTotals,
}

/// What a pass needs from its caller.
pub struct CleanOptions<'a> {
    pub now_ms: i64,
    /// Size of the key → offset map (`log-cleaner-dedupe-buffer-bytes`).
    pub dedupe_buffer_bytes: usize,
    pub throttle: &'a Throttle,
    /// Base offsets of batches kept (empty) even when every record in them lost: the last
    /// batch of each idempotent producer, so its sequence survives (Kafka does the same).
    pub keep_batches: &'a HashSet<u64>,
    /// The partition's aborted transactions: their records map no key (a committed record
    /// must not lose to an aborted one; readers drop the aborted records, which may stay).
    pub aborted: &'a [crate::txn::AbortedTxn],
    /// The partition's last stable offset: nothing from the segment holding it on is cleaned
    /// (an open transaction may still abort). `u64::MAX` for a log without transactions.
    pub first_unstable_offset: u64,
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanSummary {
    pub reason: Option<CleanReason>,
    pub keys: usize,
    /// The dirty range mapped: `[from, to)`; the next pass starts at `to`.
    pub mapped_from: u64,
    pub mapped_to: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub segments_before: usize,
    pub segments_after: usize,
    pub records_removed: u64,
    /// Dirty bytes (closed segments past the checkpoint) when the pass began.
    pub dirty_bytes: u64,
    /// Wall time of the pass.
    pub elapsed_ms: u64,
    /// The pass stopped without finishing: the log changed under it (retention, a close).
    pub abandoned: bool,
}

/// One source batch's fate.
enum Fate {
    Keep,
    Drop,
    Rewrite(Vec<u8>),
}

/// What `filter_batch` decided and saw.
struct Filtered {
    fate: Fate,
    removed: u64,
    /// The delete horizon of the output batch, if it keeps a tombstone.
    tombstone_horizon_ms: Option<i64>,
}

/// Decides which records of one batch below the map's end survive.
fn filter_batch(
    bytes: &[u8],
    h: &BatchHeader,
    map: &OffsetMap,
    now_ms: i64,
    delete_retention_ms: i64,
    keep_empty: bool,
) -> Result<Filtered, batch::BatchError> {
    let section = records::section(bytes, h)?;
    let all = records::parse(&section, h)?;
    let horizon = delete_horizon_ms(h);
    let tombstones_expired = horizon.is_some_and(|t| now_ms >= t);
    let kept: Vec<RecordView<'_>> = all
        .iter()
        .copied()
        .filter(|r| {
            let offset = (h.base_offset as u64).wrapping_add(r.offset_delta as u64);
            let Some(key) = r.key else { return false };
            let latest = map.get(key).is_none_or(|m| offset >= m);
            latest && !(r.tombstone && tombstones_expired)
        })
        .collect();
    let removed = (all.len() - kept.len()) as u64;
    let keeps_tombstone = kept.iter().any(|r| r.tombstone);
    let new_horizon =
        (keeps_tombstone && horizon.is_none()).then(|| now_ms.saturating_add(delete_retention_ms));
    let tombstone_horizon_ms = keeps_tombstone.then(|| horizon.or(new_horizon)).flatten();
    let fate = if kept.is_empty() && !keep_empty {
        // Also a batch emptied earlier for a producer that has newer batches now.
        Fate::Drop
    } else if removed == 0 && new_horizon.is_none() {
        Fate::Keep
    } else {
        Fate::Rewrite(rebuild(bytes, h, &kept, new_horizon)?)
    };
    Ok(Filtered {
        fate,
        removed,
        tombstone_horizon_ms,
    })
}

/// Consecutive segments cleaned into one, each group at most `max_bytes` of input and within
/// 32-bit relative offsets (Kafka's `groupSegmentsBySize`).
fn group_segments(segs: &[ClosedSegment], max_bytes: u64) -> Vec<Vec<ClosedSegment>> {
    let mut groups: Vec<Vec<ClosedSegment>> = Vec::new();
    let mut bytes = 0u64;
    for s in segs {
        let fits = groups.last().is_some_and(|g| {
            bytes + s.size_bytes <= max_bytes && s.next_offset - g[0].base_offset < u32::MAX as u64
        });
        if fits {
            bytes += s.size_bytes;
            groups.last_mut().expect("checked").push(s.clone());
        } else {
            bytes = s.size_bytes;
            groups.push(vec![s.clone()]);
        }
    }
    groups
}

/// A closed segment's batches, read a chunk at a time.
struct SegmentWalk {
    seg: ClosedSegment,
    reader: Rc<ClosedReader>,
    next: usize,
}

/// Undoes one step of the cleaner's state when it ends, however it ends (a swap's gate, a
/// pass's running mark, a reader's open); `undo` says whether anyone waits for that (the
/// log's waiters, long-polling fetches among them, are woken only then).
struct EndOf<'a> {
    log: &'a PartitionLog,
    undo: fn(&mut CleanerState) -> bool,
}

impl Drop for EndOf<'_> {
    fn drop(&mut self) {
        let mut st = self.log.st.borrow_mut();
        if (self.undo)(&mut st.cleaner) {
            st.notify();
        }
    }
}

impl PartitionLog {
    /// The reader of closed segment `seg`, chosen at segment generation `planned`; `None`
    /// when segments were replaced or removed since (the caller plans again). Waits while a
    /// swap runs.
    pub(super) async fn segment_reader(
        &self,
        seg: &ClosedSegment,
        planned: u64,
    ) -> Result<Option<Rc<ClosedReader>>, LogError> {
        loop {
            let gen = {
                let mut st = self.st.borrow_mut();
                if st.cleaner.generation != planned || st.closed_for_good {
                    return Ok(None);
                }
                if !st.cleaner.swapping {
                    st.cleaner.reader_opens += 1;
                    break;
                }
                st.change_gen
            };
            self.wait_change(gen).await;
        }
        let _open = EndOf {
            log: self,
            undo: |c| {
                c.reader_opens -= 1;
                c.reader_opens == 0 && c.swapping
            },
        };
        self.core
            .closed_reader(self.id, &self.dir, seg)
            .await
            .map(Some)
            .map_err(|e| self.io_err(e))
    }

    /// How dirty the log is, and whether a pass is due at `now_ms`; `None` unless the log's
    /// `cleanup.policy` compacts.
    pub fn dirty_info(&self, now_ms: i64) -> Option<DirtyInfo> {
        let cfg = self.config.borrow();
        if !cfg.cleanup_policy.compact {
            return None;
        }
        let st = self.st.borrow();
        let first_dirty = st
            .cleaner
            .checkpoint
            .first_dirty_offset
            .clamp(st.log_start_offset, st.next_offset);
        let active_base = st.active.as_ref().map_or(st.next_offset, |a| a.base_offset);
        let lag_cut = now_ms.saturating_sub(cfg.min_compaction_lag_ms);
        let too_new = st.closed.values().find(|s| {
            s.next_offset > first_dirty
                && cfg.min_compaction_lag_ms > 0
                && s.max_timestamp_ms > lag_cut
        });
        let first_uncleanable = too_new
            .map_or(active_base, |s| s.base_offset)
            .max(first_dirty);
        let (mut clean, mut dirty) = (0u64, 0u64);
        let mut oldest_dirty_ts: Option<i64> = None;
        for s in st
            .closed
            .values()
            .take_while(|s| s.base_offset < first_uncleanable)
        {
            if s.next_offset <= first_dirty {
                clean += s.size_bytes;
            } else {
                dirty += s.size_bytes;
                oldest_dirty_ts.get_or_insert(s.first_timestamp_ms);
            }
        }
        let total = clean + dirty;
        let ratio = if total == 0 {
            0.0
        } else {
            dirty as f64 / total as f64
        };
        // The first batch of the oldest dirty segment (Kafka's first batch timestamp): once it
        // is older than the max lag, the log's oldest dirty data is.
        let overdue = oldest_dirty_ts
            .is_some_and(|t| t >= 0 && now_ms.saturating_sub(t) > cfg.max_compaction_lag_ms);
        let tombstones_due = st
            .cleaner
            .checkpoint
            .tombstones_due_ms
            .is_some_and(|t| now_ms >= t);
        // While a roll is under way (or failed: no active segment) the newest closed segment
        // may not be sealed yet, nor the recovery point moved past it: no pass then.
        let settled = !st.rolling && st.active.is_some();
        let due = if !settled {
            None
        } else if dirty > 0 && ratio >= cfg.min_cleanable_dirty_ratio {
            Some(CleanReason::DirtyRatio)
        } else if dirty > 0 && overdue {
            Some(CleanReason::MaxCompactionLag)
        } else if total > 0 && tombstones_due {
            Some(CleanReason::TombstonesDue)
        } else {
            None
        };
        Some(DirtyInfo {
            first_dirty_offset: first_dirty,
            first_uncleanable_offset: first_uncleanable,
            clean_bytes: clean,
            dirty_bytes: dirty,
            dirty_ratio: ratio,
            due,
            last_clean_ms: st.cleaner.last_clean_ms,
            totals: st.cleaner.totals,
        })
    }

    /// A walk over closed segment `seg`'s batches (`None`: segments changed since `planned`).
    async fn walk(
        &self,
        seg: &ClosedSegment,
        planned: u64,
    ) -> Result<Option<SegmentWalk>, LogError> {
        Ok(self
            .segment_reader(seg, planned)
            .await?
            .map(|reader| SegmentWalk {
                seg: seg.clone(),
                reader,
                next: 0,
            }))
    }

    /// Reads the next chunk of whole batches of a walk, checked against the segment's index
    /// (each batch's base offset where the index puts it, its CRC valid). `None` at the end.
    async fn walk_chunk(
        &self,
        w: &mut SegmentWalk,
        throttle: &Throttle,
    ) -> Result<Option<(Vec<u8>, Vec<OffsetEntry>)>, LogError> {
        if self.st.borrow().cleaner.closing {
            return Err(LogError::Closed {
                dir: self.dir_name(),
            });
        }
        let e = &w.reader.entries;
        if w.next >= e.len() {
            return Ok(None);
        }
        let end_of = |i: usize| e.get(i + 1).map_or(w.seg.size_bytes, |x| x.position as u64);
        let start = e[w.next].position as u64;
        let mut last = w.next;
        while last + 1 < e.len() && end_of(last + 1) - start <= CLEANER_READ_BYTES as u64 {
            last += 1;
        }
        let len = end_of(last) - start;
        throttle.take(len).await;
        let bytes = w
            .reader
            .file
            .read(start, len as usize)
            .await
            .map_err(|e| self.io_err(e))?;
        let bytes = self.check_read(bytes.to_vec(), start, len)?;
        let entries = e[w.next..=last].to_vec();
        w.next = last + 1;
        let corrupt = |why: String| {
            self.io_err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("segment {}: {why}; not cleaned", w.seg.base_offset),
            ))
        };
        let mut pos = 0usize;
        for entry in &entries {
            let b = bytes.get(pos..).unwrap_or_default();
            let size = batch::declared_size(b).unwrap_or(0);
            let one = usize::try_from(size)
                .ok()
                .and_then(|s| b.get(..s))
                .ok_or_else(|| {
                    corrupt(format!("batch at position {} is cut short", entry.position))
                })?;
            let h = batch::validate_stored(one)
                .map_err(|e| corrupt(format!("batch at position {}: {e}", entry.position)))?;
            if h.base_offset as u64 != w.seg.base_offset + entry.relative_offset as u64 {
                return Err(corrupt(format!(
                    "the index puts offset {} at position {}, the log has {}",
                    w.seg.base_offset + entry.relative_offset as u64,
                    entry.position,
                    h.base_offset
                )));
            }
            pos += one.len();
        }
        if pos != bytes.len() {
            return Err(corrupt(format!(
                "{} bytes at position {} have no index entry",
                bytes.len() - pos,
                start + pos as u64
            )));
        }
        Ok(Some((bytes, entries)))
    }

    /// One cleaner pass, if one is due (see the module docs). `Ok(None)`: nothing to do (or
    /// the log began closing; a close waits for the pass to stop).
    pub async fn clean(
        self: &Rc<Self>,
        opts: &CleanOptions<'_>,
    ) -> Result<Option<CleanSummary>, LogError> {
        {
            let mut st = self.st.borrow_mut();
            if st.cleaner.closing || st.cleaner.running {
                return Ok(None);
            }
            st.cleaner.running = true;
        }
        let _running = EndOf {
            log: self,
            undo: |c| {
                c.running = false;
                true
            },
        };
        match self.clean_pass(opts).await {
            Err(_) if self.st.borrow().cleaner.closing => Ok(None),
            other => other,
        }
    }

    async fn clean_pass(
        self: &Rc<Self>,
        opts: &CleanOptions<'_>,
    ) -> Result<Option<CleanSummary>, LogError> {
        let Some(info) = self.dirty_info(opts.now_ms) else {
            return Ok(None);
        };
        let Some(reason) = info.due else {
            return Ok(None);
        };
        let cfg = self.config();
        let first_dirty = info.first_dirty_offset;
        let (segments, planned, first_uncleanable) = {
            let st = self.st.borrow();
            self.check_usable(&st)?;
            // Open transactions: stop at the segment holding the last stable offset.
            let unstable = st
                .closed
                .values()
                .find(|s| s.next_offset > opts.first_unstable_offset)
                .map_or(info.first_uncleanable_offset, |s| s.base_offset);
            let first_uncleanable = info.first_uncleanable_offset.min(unstable);
            let segs: Vec<ClosedSegment> = st
                .closed
                .values()
                .take_while(|s| s.base_offset < first_uncleanable)
                .cloned()
                .collect();
            (
                segs,
                st.cleaner.generation,
                first_uncleanable.max(first_dirty),
            )
        };
        if first_uncleanable == first_dirty && reason != CleanReason::TombstonesDue {
            // Everything dirty is at or after an open transaction: try later.
            return Ok(None);
        }
        let aborted = crate::txn::AbortedRanges::new(opts.aborted);
        let started = std::time::Instant::now();
        let mut summary = CleanSummary {
            dirty_bytes: info.dirty_bytes,
            reason: Some(reason),
            mapped_from: first_dirty,
            segments_before: segments.len(),
            ..Default::default()
        };

        // 1. The latest offset of every key in the dirty range.
        let mut map = OffsetMap::new(opts.dedupe_buffer_bytes, first_uncleanable - first_dirty);
        let mut map_end = first_uncleanable;
        'map: for seg in segments.iter().filter(|s| s.next_offset > first_dirty) {
            let Some(mut walk) = self.walk(seg, planned).await? else {
                summary.abandoned = true;
                return Ok(Some(summary));
            };
            while let Some((bytes, entries)) = self.walk_chunk(&mut walk, opts.throttle).await? {
                summary.bytes_read += bytes.len() as u64;
                for (h, one) in batch::stored_batches(&bytes).take(entries.len()) {
                    opts.throttle.slice().await;
                    // Markers are kept whole and their keys are no data keys (every commit
                    // marker has the same key); aborted records shadow nothing.
                    if (h.last_offset() as u64) < first_dirty
                        || h.is_control()
                        || aborted.contains(&h)
                    {
                        continue;
                    }
                    if !map.has_room_for(h.records_count.max(0) as usize) {
                        map_end = h.base_offset as u64;
                        break 'map;
                    }
                    let section = records::section(one, &h).map_err(|e| self.batch_err(e))?;
                    for r in records::parse(&section, &h).map_err(|e| self.batch_err(e))? {
                        let offset = (h.base_offset as u64).wrapping_add(r.offset_delta as u64);
                        if let (Some(key), true) = (r.key, offset >= first_dirty) {
                            let stored = map.put(key, offset);
                            debug_assert!(stored, "room was checked for the whole batch");
                        }
                    }
                }
                opts.throttle.slice().await;
            }
        }
        if map_end == first_dirty && reason != CleanReason::TombstonesDue {
            tracing::warn!(dir = %self.dir.display(), offset = first_dirty, map_bytes = map.size_bytes(), "the cleaner's dedupe buffer cannot hold one batch's keys; raise log-cleaner-dedupe-buffer-bytes");
            return Ok(None);
        }
        summary.keys = map.len();
        summary.mapped_to = map_end;

        // 2. Rewrite the segments below the map's end, group by group.
        let to_clean: Vec<ClosedSegment> = segments
            .iter()
            .filter(|s| s.base_offset < map_end)
            .cloned()
            .collect();
        let mut tombstones_due: Option<i64> = None;
        // Cleaned groups waiting for the swap: (the segments replaced, the new one).
        let mut cleaned: Vec<(Vec<ClosedSegment>, ClosedSegment)> = Vec::new();
        let remove_cleaned = |cleaned: &[(Vec<ClosedSegment>, ClosedSegment)]| {
            cleaned
                .iter()
                .flat_map(|(_, n)| swap::cleaned_paths(&self.dir, n.base_offset))
                .collect::<Vec<_>>()
        };
        for group in group_segments(&to_clean, cfg.segment_bytes) {
            let done = self
                .clean_group(
                    &group,
                    &map,
                    map_end,
                    opts,
                    &cfg,
                    planned,
                    &mut summary,
                    &mut tombstones_due,
                )
                .await;
            match done {
                Ok(Some(Some(new_seg))) => cleaned.push((group, new_seg)),
                Ok(Some(None)) => {}
                Ok(None) => {
                    summary.abandoned = true;
                    break;
                }
                Err(e) => {
                    let mut doomed = remove_cleaned(&cleaned);
                    doomed.extend(swap::cleaned_paths(&self.dir, group[0].base_offset));
                    let _ = io::remove_all_of(doomed).await;
                    return Err(e);
                }
            }
        }
        // 3. One swap for every cleaned group of the pass (one commit, a few directory syncs).
        if !cleaned.is_empty() {
            let swapped = !summary.abandoned && {
                io::sync_dir(&self.dir).await.map_err(|e| self.io_err(e))?;
                self.swap_in(&cleaned, planned).await?
            };
            if !swapped {
                summary.abandoned = true;
                io::remove_all_of(remove_cleaned(&cleaned))
                    .await
                    .map_err(|e| self.io_err(e))?;
            }
        }
        // Groups not rewritten keep the tombstones they had (and their horizons).
        let checkpoint = {
            let mut st = self.st.borrow_mut();
            summary.segments_after = st.closed.range(..first_uncleanable).count();
            let c = &mut st.cleaner;
            c.totals.passes += 1;
            c.totals.bytes_read += summary.bytes_read;
            c.totals.bytes_written += summary.bytes_written;
            if !summary.abandoned {
                c.checkpoint = CleanerCheckpoint {
                    first_dirty_offset: map_end.max(first_dirty),
                    tombstones_due_ms: tombstones_due,
                };
                c.last_clean_ms = Some(opts.now_ms);
            }
            c.checkpoint
        };
        if !summary.abandoned {
            checkpoint
                .store(&self.dir)
                .await
                .map_err(|e| self.io_err(e))?;
        }
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        tracing::info!(dir = %self.dir.display(), ?reason, elapsed_ms = summary.elapsed_ms, dirty = summary.dirty_bytes, keys = summary.keys, mapped = format!("{}..{}", summary.mapped_from, summary.mapped_to), read = summary.bytes_read, written = summary.bytes_written, removed = summary.records_removed, segments = format!("{} -> {}", summary.segments_before, summary.segments_after), abandoned = summary.abandoned, "cleaner pass");
        Ok(Some(summary))
    }

    fn batch_err(&self, source: batch::BatchError) -> LogError {
        LogError::InvalidBatch {
            dir: self.dir_name(),
            source,
        }
    }

    /// Cleans one group into one segment written under the `.cleaned` names, sealed and
    /// synced: `Some(Some(segment))` to swap in, `Some(None)` when nothing in it changed (no
    /// files left), `None` when the log changed under the pass (it stops).
    #[allow(clippy::too_many_arguments)]
    async fn clean_group(
        self: &Rc<Self>,
        group: &[ClosedSegment],
        map: &OffsetMap,
        map_end: u64,
        opts: &CleanOptions<'_>,
        cfg: &LogConfig,
        planned: u64,
        summary: &mut CleanSummary,
        tombstones_due: &mut Option<i64>,
    ) -> Result<Option<Option<ClosedSegment>>, LogError> {
        let base = group[0].base_offset;
        let paths = swap::cleaned_paths(&self.dir, base);
        let io_err = |e| self.io_err(e);
        io::remove_all_of(paths.to_vec()).await.map_err(io_err)?;
        let out_cfg = LogConfig {
            preallocate_bytes: 0,
            ..cfg.clone()
        };
        let mut out = open_segment_at(
            &self.core,
            &paths,
            base,
            &out_cfg,
            SegmentContent::default(),
        )
        .await
        .map_err(io_err)?;
        let mut changed = false;
        let mut written = 0u64;
        for seg in group {
            let Some(mut walk) = self.walk(seg, planned).await? else {
                let _ = seal_segment(out).await;
                io::remove_all_of(paths.to_vec()).await.map_err(io_err)?;
                return Ok(None);
            };
            while let Some((bytes, entries)) = self.walk_chunk(&mut walk, opts.throttle).await? {
                summary.bytes_read += bytes.len() as u64;
                for ((h, one), entry) in batch::stored_batches(&bytes).zip(&entries) {
                    opts.throttle.slice().await;
                    let filtered = if h.is_control() || h.base_offset as u64 >= map_end {
                        None
                    } else {
                        let keep_empty = opts.keep_batches.contains(&(h.base_offset as u64));
                        Some(
                            filter_batch(
                                one,
                                &h,
                                map,
                                opts.now_ms,
                                cfg.delete_retention_ms,
                                keep_empty,
                            )
                            .map_err(|e| self.batch_err(e))?,
                        )
                    };
                    let (fate, horizon) = match filtered {
                        None => (Fate::Keep, None),
                        Some(f) => {
                            summary.records_removed += f.removed;
                            (f.fate, f.tombstone_horizon_ms)
                        }
                    };
                    let out_bytes: &[u8] = match &fate {
                        Fate::Keep => one,
                        Fate::Drop => {
                            changed = true;
                            continue;
                        }
                        Fate::Rewrite(b) => {
                            changed = true;
                            b
                        }
                    };
                    if let Some(t) = horizon {
                        *tombstones_due = Some(tombstones_due.map_or(t, |d| d.min(t)));
                    }
                    let position = out.log.len();
                    if position + out_bytes.len() as u64 > u32::MAX as u64 {
                        return Err(self.io_err(std::io::Error::other(format!(
                            "cleaned segment {base} would pass 4 GiB (32-bit positions); not cleaned"
                        ))));
                    }
                    let oh = batch::parse_header(out_bytes).map_err(|e| self.batch_err(e))?;
                    // An emptied batch (kept for its producer) has no timestamp to index.
                    let max_ts = if oh.records_count > 0 {
                        oh.max_timestamp
                    } else {
                        -1
                    };
                    out.push_batch(
                        (h.base_offset as u64 - base) as u32,
                        position as u32,
                        entry.commit_time_ms,
                        max_ts,
                        out_bytes.len() as u64,
                        cfg.index_interval_bytes,
                    );
                    out.log.append(out_bytes);
                }
                if out.log.unflushed_bytes() >= CLEANER_WRITE_BATCH_BYTES {
                    opts.throttle.take(out.log.unflushed_bytes()).await;
                    out.write_pending().await.map_err(io_err)?;
                }
                opts.throttle.slice().await;
            }
        }
        let new_seg = ClosedSegment {
            base_offset: base,
            next_offset: group.last().expect("a group has a segment").next_offset,
            size_bytes: out.log.len(),
            max_timestamp_ms: out.max_timestamp_ms,
            first_timestamp_ms: out.first_timestamp_ms(),
        };
        written += out.log.len();
        seal_segment(out).await.map_err(io_err)?;
        if !changed {
            io::remove_all_of(paths.to_vec()).await.map_err(io_err)?;
            return Ok(Some(None));
        }
        summary.bytes_written += written;
        Ok(Some(Some(new_seg)))
    }

    /// Swaps each cleaned segment in for its group (files, then memory) under the gate, all in
    /// one commit. `Ok(false)` when segments changed meanwhile or the log is closing.
    async fn swap_in(
        &self,
        cleaned: &[(Vec<ClosedSegment>, ClosedSegment)],
        planned: u64,
    ) -> Result<bool, LogError> {
        loop {
            let gen = {
                let mut st = self.st.borrow_mut();
                // Before the commit point a refusal leaves nothing behind: the caller removes
                // the cleaned files.
                if st.cleaner.closing || self.check_usable(&st).is_err() {
                    return Ok(false);
                }
                if !st.cleaner.swapping {
                    st.cleaner.swapping = true;
                    break;
                }
                st.change_gen
            };
            self.wait_change(gen).await;
        }
        let _gate = EndOf {
            log: self,
            undo: |c| {
                c.swapping = false;
                true
            },
        };
        loop {
            let gen = {
                let st = self.st.borrow();
                if st.cleaner.reader_opens == 0 {
                    break;
                }
                st.change_gen
            };
            self.wait_change(gen).await;
        }
        let unchanged = {
            let st = self.st.borrow();
            st.cleaner.generation == planned && !st.cleaner.closing
        };
        if !unchanged {
            return Ok(false);
        }
        let groups: Vec<Vec<u64>> = cleaned
            .iter()
            .map(|(g, _)| g.iter().map(|s| s.base_offset).collect())
            .collect();
        if let Err(e) = (Swap {
            groups: groups.clone(),
        })
        .commit(&self.dir)
        .await
        {
            // The swap is recorded (or not) on disk and the next open finishes it; the files
            // the memory describes may be gone, so nothing more is served from this log.
            return Err(self.poison("cleaner swap", e));
        }
        let mut st = self.st.borrow_mut();
        for (members, (_, new_seg)) in groups.iter().zip(cleaned) {
            for m in members {
                st.closed.remove(m);
                self.core.evict(self.id, *m);
            }
            assert!(
                st.closed
                    .range(new_seg.base_offset..new_seg.next_offset)
                    .next()
                    .is_none(),
                "a swapped group leaves no segment inside its range"
            );
            st.closed.insert(new_seg.base_offset, new_seg.clone());
        }
        st.cleaner.segments_changed();
        Ok(true)
    }

    /// Marks the log closing for the cleaner and waits for a pass under way to stop (at its
    /// next step; a swap already committing finishes first).
    pub(super) async fn stop_cleaner(&self) {
        loop {
            let gen = {
                let mut st = self.st.borrow_mut();
                st.cleaner.closing = true;
                if !st.cleaner.swapping && !st.cleaner.running {
                    return;
                }
                st.change_gen
            };
            self.wait_change(gen).await;
        }
    }

    /// Whether a swap holds the gate (retention waits for the next round).
    pub(super) fn swap_in_progress(&self) -> bool {
        self.st.borrow().cleaner.swapping
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(base: u64, next: u64, size: u64) -> ClosedSegment {
        ClosedSegment {
            base_offset: base,
            next_offset: next,
            size_bytes: size,
            max_timestamp_ms: 0,
            first_timestamp_ms: 0,
        }
    }

    #[test]
    fn groups_stay_within_the_segment_size() {
        let segs = [
            seg(0, 10, 40),
            seg(10, 20, 40),
            seg(20, 30, 40),
            seg(30, 40, 100),
        ];
        let g = group_segments(&segs, 100);
        let bases: Vec<Vec<u64>> = g
            .iter()
            .map(|g| g.iter().map(|s| s.base_offset).collect())
            .collect();
        assert_eq!(bases, vec![vec![0, 10], vec![20], vec![30]]);
    }
}
