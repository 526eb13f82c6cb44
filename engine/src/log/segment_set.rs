//! The active segment and the set of segments: roll, seal, close.

use std::path::Path;
use std::rc::Rc;

use super::{LogError, PartitionLog};
use crate::appender::Appender;
use crate::config::LogConfig;
use crate::core_storage::CoreStorage;
use crate::index::{self, OffsetEntry, TimeEntry};
use crate::io::{self, align_down, align_up, SegmentFile};
use crate::recovery_marker::RecoveryMarker;
use crate::segment::{self, ClosedSegment};
use crate::tail_cache::TailWindow;

pub(super) struct ActiveSegment {
    pub(super) base_offset: u64,
    pub(super) log: Appender,
    pub(super) index: Appender,
    pub(super) time_index: Appender,
    pub(super) entries: Vec<OffsetEntry>,
    pub(super) time_entries: Vec<TimeEntry>,
    pub(super) max_timestamp_ms: i64,
    pub(super) max_timestamp_rel: u32,
    pub(super) bytes_since_time_entry: u64,
    pub(super) first_commit_time_ms: Option<i64>,
    /// How much earlier than its age limit this segment rolls (`segment.jitter.ms`, drawn
    /// when the segment is opened).
    pub(super) roll_jitter_ms: i64,
    /// Copies of the newest batches, for reads at the tail (`None`: the core's cache is off).
    pub(super) tail: Option<Rc<TailWindow>>,
}

impl ActiveSegment {
    pub(super) fn push_batch(
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
        assert!(
            self.entries
                .last()
                .is_none_or(|p| p.relative_offset < rel && p.position < position),
            "offsets and positions grow with every batch (contiguous, in arrival order)"
        );
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

    pub(super) fn push_time_entry(&mut self, timestamp_ms: i64, relative_offset: u32) {
        let t = TimeEntry {
            timestamp_ms,
            relative_offset,
        };
        self.time_entries.push(t);
        self.time_index.append(&t.encode());
        self.bytes_since_time_entry = 0;
    }

    /// The first time-index entry's timestamp (see `ClosedSegment::first_timestamp_ms`).
    pub(super) fn first_timestamp_ms(&self) -> i64 {
        self.time_entries.first().map_or(-1, |t| t.timestamp_ms)
    }

    /// Writes (without syncing) what the three files hold in memory.
    pub(super) async fn write_pending(&mut self) -> std::io::Result<()> {
        let jobs: Vec<_> = [
            self.log.take_flush(),
            self.index.take_flush(),
            self.time_index.take_flush(),
        ]
        .into_iter()
        .flatten()
        .collect();
        for r in crate::join::join_all(jobs.into_iter().map(|j| j.write())).await {
            r?;
        }
        Ok(())
    }

    /// A final time-index entry for the newest timestamp, so a closed segment's max timestamp
    /// is its time index's last entry.
    pub(super) fn seal_time_index(&mut self) {
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

impl PartitionLog {
    /// Takes `io_busy` and blocks appends (`rolling`) for a roll or a close. `Ok(false)` when
    /// another roll was under way: it has finished and the caller re-evaluates.
    pub(super) async fn acquire_exclusive(&self) -> Result<bool, LogError> {
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

    pub(super) fn release_exclusive(&self) {
        let mut st = self.st.borrow_mut();
        st.io_busy = false;
        st.rolling = false;
        st.notify();
    }

    /// Closes the active segment and starts a new one at the log end offset. The roll runs as
    /// its own task once it holds the log (see `sync_to`): a cancelled caller cannot leave a
    /// segment half sealed or appends blocked.
    pub async fn roll(self: &Rc<Self>) -> Result<(), LogError> {
        if !self.acquire_exclusive().await? {
            return Ok(());
        }
        let me = self.clone();
        self.run_detached(async move {
            let res = me.roll_exclusive().await;
            me.release_exclusive();
            res
        })
        .await
    }

    /// Runs `work` as a task of its own and waits for it (work on files that must not stop
    /// half way when the caller is dropped).
    async fn run_detached(
        &self,
        work: impl std::future::Future<Output = Result<(), LogError>> + 'static,
    ) -> Result<(), LogError> {
        glommio::spawn_local(work)
            .detach()
            .await
            .unwrap_or_else(|| {
                Err(LogError::Closed {
                    dir: self.dir_name(),
                })
            })
    }

    pub(super) async fn roll_exclusive(&self) -> Result<(), LogError> {
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
                        first_timestamp_ms: old.first_timestamp_ms(),
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
            io::sync_dir(&self.dir).await?;
            RecoveryMarker {
                clean: false,
                recovery_base: new_base,
                offset_jumps: false,
            }
            .store(&self.dir)
            .await?;
            self.st.borrow_mut().marked_dirty = true;
            Ok::<_, std::io::Error>(seg)
        }
        .await;
        match created {
            Ok(seg) => {
                let mut st = self.st.borrow_mut();
                st.active = Some(seg);
                // The recovery marker just written names the new segment: no jumps in it.
                st.active_offset_jumps = false;
                st.stats.rolls += 1;
                Ok(())
            }
            Err(e) => {
                // Nothing of the log was lost: every older segment is sealed and synced. The
                // next append tries again (no active segment means "roll first").
                let _ = io::remove_all_of(segment::paths(&self.dir, new_base).to_vec()).await;
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot create the next segment; appends are refused until it can be");
                Err(LogError::NoSpace {
                    dir: self.dir_name(),
                    cause: format!("creating segment {new_base}: {e}"),
                })
            }
        }
    }

    /// Flushes and syncs everything, seals the files of the active segment and writes the clean
    /// shutdown marker, so the next open skips the recovery scan. A poisoned log closes its
    /// files without the marker.
    pub async fn close(self: &Rc<Self>) -> Result<(), LogError> {
        self.stop_cleaner().await;
        let poisoned = self.st.borrow().poisoned.is_some();
        if !poisoned && !self.acquire_exclusive().await? {
            return Box::pin(self.close()).await;
        }
        let me = self.clone();
        self.run_detached(async move { me.close_exclusive(poisoned).await })
            .await
    }

    /// The close itself; the caller holds the log (unless it is poisoned).
    async fn close_exclusive(&self, poisoned: bool) -> Result<(), LogError> {
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
            if !self.st.borrow().marked_dirty {
                // Untouched since a clean open: the files and the clean marker are as they
                // were; only the descriptors close.
                return close_unsealed(active).await.map_err(|e| self.io_err(e));
            }
            seal_segment(active).await.map_err(|e| self.io_err(e))?;
            let offset_jumps = self.st.borrow().active_offset_jumps;
            RecoveryMarker {
                clean: true,
                recovery_base: base,
                offset_jumps,
            }
            .store(&self.dir)
            .await
            .map_err(|e| self.io_err(e))
        }
        .await;
        self.release_exclusive();
        res
    }
}

/// Creates the three empty files of a new segment at `base`.
pub(super) async fn create_segment(
    core: &CoreStorage,
    dir: &Path,
    base: u64,
    config: &LogConfig,
) -> std::io::Result<ActiveSegment> {
    open_segment(core, dir, base, config, SegmentContent::default()).await
}

/// What recovery (or a clean open) knows about the active segment's content.
#[derive(Default)]
pub(super) struct SegmentContent {
    pub(super) log_len: u64,
    pub(super) index_len: u64,
    pub(super) time_index_len: u64,
    pub(super) entries: Vec<OffsetEntry>,
    pub(super) time_entries: Vec<TimeEntry>,
    pub(super) max_timestamp_ms: Option<(i64, u32)>,
}

pub(super) async fn open_appender(
    path: &Path,
    len: u64,
    core: &CoreStorage,
    chunk: usize,
    prealloc: u64,
) -> std::io::Result<Appender> {
    let file = Rc::new(SegmentFile::open_rw(path, core.file_io()).await?);
    let tail_start = align_down(len);
    let tail = if tail_start < len {
        file.read(tail_start, (len - tail_start) as usize).await?
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

pub(super) async fn open_segment(
    core: &CoreStorage,
    dir: &Path,
    base: u64,
    config: &LogConfig,
    c: SegmentContent,
) -> std::io::Result<ActiveSegment> {
    open_segment_at(core, &segment::paths(dir, base), base, config, c).await
}

/// `open_segment` on the files `paths` (`.log`, `.index`, `.timeindex`): the cleaner writes a
/// cleaned segment under other names and swaps it in.
pub(super) async fn open_segment_at(
    core: &CoreStorage,
    paths: &[std::path::PathBuf; 3],
    base: u64,
    config: &LogConfig,
    c: SegmentContent,
) -> std::io::Result<ActiveSegment> {
    let prealloc = config.preallocate_bytes.min(align_up(config.segment_bytes));
    let index_chunk = crate::config::INDEX_WRITE_CHUNK_BYTES;
    let log = open_appender(
        &paths[0],
        c.log_len,
        core,
        config.write_chunk_bytes,
        prealloc,
    )
    .await?
    .keep_zeroed_ahead();
    // The indexes reserve space in their own steps (when the log does), so a full disk
    // refuses a batch at admission rather than failing its flush.
    let index_prealloc = if prealloc > 0 {
        crate::config::INDEX_PREALLOCATE_BYTES
    } else {
        0
    };
    let index = open_appender(&paths[1], c.index_len, core, index_chunk, index_prealloc)
        .await?
        .keep_zeroed_ahead();
    let time_index = open_appender(
        &paths[2],
        c.time_index_len,
        core,
        index_chunk,
        index_prealloc,
    )
    .await?
    .keep_zeroed_ahead();
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
        roll_jitter_ms: config.draw_roll_jitter_ms(),
        log,
        index,
        time_index,
        entries: c.entries,
        time_entries: c.time_entries,
        max_timestamp_ms: max_ts,
        max_timestamp_rel: max_rel,
        bytes_since_time_entry: bytes_since,
        tail: core.tail_cache().window(),
    })
}

/// Closes the three files of a segment (one that nothing changed since it was opened, or one
/// just sealed).
async fn close_unsealed(seg: ActiveSegment) -> std::io::Result<()> {
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

/// Writes the final time entry, trims the three files to their logical size, syncs and
/// closes them. Afterwards the segment is immutable and holds no fd.
pub(super) async fn seal_segment(mut seg: ActiveSegment) -> std::io::Result<()> {
    seg.seal_time_index();
    seg.write_pending().await?;
    let apps = [&seg.log, &seg.index, &seg.time_index];
    for r in crate::join::join_all(apps.iter().map(|a| a.trim_to_len())).await {
        r?;
    }
    for r in crate::join::join_all(apps.iter().map(|a| a.file().sync())).await {
        r?;
    }
    close_unsealed(seg).await
}
