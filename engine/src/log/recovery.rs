//! Open and recovery (seed 004, DESIGN.md §3).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use super::segment_set::{open_segment, seal_segment, ActiveSegment, SegmentContent};
use super::{LogError, LogStats, PartitionLog, RecoverySummary, State, Truncation};
use crate::appender::Appender;
use crate::batch;
use crate::cleaner::checkpoint::CHECKPOINT_FILE_NAME;
use crate::cleaner::CleanerCheckpoint;
use crate::config::LogConfig;
use crate::core_storage::CoreStorage;
use crate::index::{self, OffsetEntry, TimeEntry};
use crate::io::{self, align_up, SegmentFile};
use crate::recovery_marker::RecoveryMarker;
use crate::segment::{self, ClosedSegment, ScanStop};

impl PartitionLog {
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
        io::create_dir_all(&dir).await.map_err(io_err)?;
        let recovered = recover(core, &dir, &config).await.map_err(io_err)?;
        let (active, mut closed, summary, last_commit, checkpoint) = recovered;
        // A log that was closed cleanly keeps its clean marker until its first append
        // (`mark_dirty`); a new one (no segment before this open: its files are empty) is
        // marked clean, so a crash before its first append needs no scan; one that was
        // recovered is marked "not clean" now.
        let fresh = summary.segments == 0;
        let marked_dirty = !summary.clean_shutdown && !fresh;
        if !summary.clean_shutdown {
            RecoveryMarker {
                clean: fresh,
                recovery_base: active.base_offset,
                offset_jumps: summary.active_offset_jumps,
            }
            .store(&dir)
            .await
            .map_err(io_err)?;
        }
        let next = summary.next_offset;
        let first_segment = closed.keys().next().copied().unwrap_or(active.base_offset);
        let log_start_offset = recover_log_start(&dir, &mut closed, first_segment, next)
            .await
            .map_err(io_err)?;
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
                durable_end: next,
                replicated_limit: None,
                last_commit_time_ms: last_commit,
                leader_epoch: 0,
                poisoned: None,
                closed_for_good: false,
                marked_dirty,
                active_offset_jumps: summary.active_offset_jumps,
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
                cleaner: super::compact::CleanerState::new(checkpoint),
            }),
            log_start_writer: glommio::sync::Semaphore::new(1),
        });
        Ok((log, summary))
    }
}

/// The log start offset on open: the first segment's base, or the one `log-start-offset`
/// keeps (DeleteRecords), whichever is higher, at most the log end offset (a stored start past
/// the recovered end is cut back and rewritten). Closed segments wholly below it (a crash
/// before DeleteRecords removed them) are deleted.
async fn recover_log_start(
    dir: &Path,
    closed: &mut BTreeMap<u64, ClosedSegment>,
    first_segment: u64,
    next_offset: u64,
) -> std::io::Result<u64> {
    let Some(stored) = crate::log_start::load(dir).await? else {
        return Ok(first_segment);
    };
    let mut start = stored.max(first_segment);
    if start > next_offset {
        tracing::warn!(dir = %dir.display(), stored, log_end = next_offset, "stored log start offset is past the recovered log end; using the log end");
        start = next_offset;
        crate::log_start::store(dir, start).await?;
    }
    let doomed: Vec<u64> = closed
        .values()
        .take_while(|s| s.next_offset <= start)
        .map(|s| s.base_offset)
        .collect();
    for base in &doomed {
        closed.remove(base);
        io::remove_all_of(segment::paths(dir, *base).to_vec()).await?;
        tracing::info!(dir = %dir.display(), segment = base, "deleted segment below the log start offset");
    }
    if !doomed.is_empty() {
        io::sync_dir(dir).await?;
    }
    Ok(start)
}

pub(super) type Recovered = (
    ActiveSegment,
    BTreeMap<u64, ClosedSegment>,
    RecoverySummary,
    i64,
    CleanerCheckpoint,
);

/// Recovery on open (seed 004, DESIGN.md §3): trust segments sealed before the recovery point,
/// scan the rest, truncate at the first invalid byte, drop what lies beyond, rebuild indexes.
pub(super) async fn recover(
    core: &CoreStorage,
    dir: &Path,
    config: &LogConfig,
) -> std::io::Result<Recovered> {
    let mut names = io::list_dir(dir).await?;
    // A cleaner swap cut short by a crash is finished (or its files removed) first.
    if crate::cleaner::swap::recover(dir, &names).await? {
        names = io::list_dir(dir).await?;
    }
    // Only a log that was ever cleaned has a checkpoint to read.
    let checkpoint = if names.iter().any(|n| n == CHECKPOINT_FILE_NAME) {
        CleanerCheckpoint::load(dir).await?
    } else {
        CleanerCheckpoint::default()
    };
    let leftovers: Vec<PathBuf> = names
        .iter()
        .filter(|n| n.ends_with(".tmp"))
        .map(|n| dir.join(n))
        .collect();
    if !leftovers.is_empty() {
        io::remove_all_of(leftovers).await?;
    }
    let mut bases: Vec<u64> = names
        .iter()
        .filter_map(|n| segment::parse_log_name(n))
        .collect();
    bases.sort_unstable();
    let marker = RecoveryMarker::load(dir).await?;
    let mut clean = marker.is_some_and(|m| m.clean);
    let mut recovery_base = marker.map_or(0, |m| m.recovery_base);
    // The segment a follower copied a cleaned leader's batches into: its offsets may jump.
    let jumps_base = marker.filter(|m| m.offset_jumps).map(|m| m.recovery_base);
    // A truncation asked for (a replica following a new leader, issue #18): the segments
    // from the cut on go, and the one holding it is scanned and cut there.
    let truncation = load_truncation(dir).await?;
    let truncate_to = truncation.map(|t| t.offset);
    if let Some(Truncate {
        offset: cut,
        restart,
    }) = truncation
    {
        let kept = if restart {
            0
        } else {
            bases.iter().take_while(|&&b| b < cut).count()
        };
        for &base in &bases[kept..] {
            io::remove_all_of(segment::paths(dir, base).to_vec()).await?;
            tracing::info!(dir = %dir.display(), segment = base, cut, "truncation deleted segment");
        }
        bases.truncate(kept);
        if let Some(&last) = bases.last() {
            recovery_base = if clean { last } else { recovery_base.min(last) };
        }
        clean = false;
    }
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
            let size = io::file_len(&segment::log_path(dir, base)).await?;
            let seg = ClosedSegment {
                base_offset: base,
                next_offset: bases[i + 1],
                size_bytes: size,
                max_timestamp_ms: time_entries.last().map_or(-1, |t| t.timestamp_ms),
                first_timestamp_ms: time_entries.first().map_or(-1, |t| t.timestamp_ms),
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
        let gaps = segment::OffsetGaps::for_segment(is_last && jumps_base != Some(base));
        let (content, next, commit) =
            scan_segment(core, config, dir, base, gaps, truncate_to, &mut summary).await?;
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
        // A cleaned segment's last batches may be gone: it still reaches its successor.
        let next = if next <= bases[i + 1] {
            bases[i + 1]
        } else {
            next
        };
        let closed_seg = ClosedSegment {
            base_offset: base,
            next_offset: next,
            size_bytes: seg_files.log.len(),
            max_timestamp_ms: seg_files.max_timestamp_ms,
            first_timestamp_ms: seg_files.first_timestamp_ms(),
        };
        seal_segment(seg_files).await?;
        expected_next = Some(next);
        closed.insert(base, closed_seg);
        i += 1;
    }
    for &base in &bases[i..] {
        io::remove_all_of(segment::paths(dir, base).to_vec()).await?;
        summary.segments_deleted.push(base);
    }
    if i < total {
        io::sync_dir(dir).await?;
    }
    let (base, content) = match active {
        Some(a) => a,
        None => {
            // Every segment was sealed and closed (or there were none): start a new one.
            let base = closed
                .values()
                .next_back()
                .map_or(truncate_to.unwrap_or(0), |s: &ClosedSegment| s.next_offset);
            summary.next_offset = base;
            (base, SegmentContent::default())
        }
    };
    summary.active_offset_jumps = jumps_base == Some(base);
    let seg = open_segment(core, dir, base, config, content).await?;
    io::sync_dir(dir).await?;
    if truncate_to.is_some() {
        // Done and durable: a crash before this line truncates again, to the same place.
        io::remove(&dir.join(TRUNCATE_TO_FILE_NAME)).await?;
    }
    Ok((seg, closed, summary, last_commit, checkpoint))
}

/// The file that asks the next open to cut the log at an offset.
pub const TRUNCATE_TO_FILE_NAME: &str = "truncate-to";

/// Asks the next open of the log in `dir` (closed now) to cut it at `offset`: every record at
/// or after it goes (a batch that straddles it too). Durable when this returns; the open
/// that does the cut removes the file.
pub async fn request_truncation(dir: &Path, offset: u64) -> std::io::Result<()> {
    io::write_atomic(
        &dir.join(TRUNCATE_TO_FILE_NAME),
        offset.to_string().into_bytes(),
    )
    .await
}

/// Asks the next open of the log in `dir` (closed now) to drop every record and start the
/// log empty at `offset` (a follower whose leader deleted what it lacks starts over at the
/// leader's log start).
pub async fn request_restart_at(dir: &Path, offset: u64) -> std::io::Result<()> {
    io::write_atomic(
        &dir.join(TRUNCATE_TO_FILE_NAME),
        format!("restart {offset}").into_bytes(),
    )
    .await
}

/// A truncation asked for: cut at `offset`, or (`restart`) drop everything and start there.
#[derive(Clone, Copy)]
struct Truncate {
    offset: u64,
    restart: bool,
}

async fn load_truncation(dir: &Path) -> std::io::Result<Option<Truncate>> {
    let Some(bytes) = io::read_small(&dir.join(TRUNCATE_TO_FILE_NAME)).await? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    let (restart, offset) = match text.trim().strip_prefix("restart ") {
        Some(o) => (true, o),
        None => (false, text.trim()),
    };
    let offset = offset.parse().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: `{text}` is not an offset or `restart OFFSET`",
                dir.join(TRUNCATE_TO_FILE_NAME).display()
            ),
        )
    })?;
    Ok(Some(Truncate { offset, restart }))
}

/// The active segment after a clean shutdown: its files are exact, so its index is loaded as
/// is. `None` if the log does not end where the index says (then recovery scans it).
pub(super) async fn load_clean_active(
    dir: &Path,
    base: u64,
) -> std::io::Result<Option<(SegmentContent, u64, i64)>> {
    let entries =
        index::decode_offset_entries(&segment::read_whole(&segment::index_path(dir, base)).await?);
    let time_entries = index::decode_time_entries(
        &segment::read_whole(&segment::time_index_path(dir, base)).await?,
    );
    let log_path = segment::log_path(dir, base);
    let log_len = io::file_len(&log_path).await?;
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

/// Scans one segment's log, truncates it at the first invalid byte and rewrites its indexes.
/// Commit times come from the old index where it matches the scanned batches; a batch whose
/// entry never reached disk gets the recovery time (later than its real commit, so a delay gate
/// is never early), kept monotonic.
pub(super) async fn scan_segment(
    core: &CoreStorage,
    config: &LogConfig,
    dir: &Path,
    base: u64,
    gaps: segment::OffsetGaps,
    truncate_to: Option<u64>,
    summary: &mut RecoverySummary,
) -> std::io::Result<(SegmentContent, u64, i64)> {
    let log_path = segment::log_path(dir, base);
    let file = SegmentFile::open_rw(&log_path, &core.file_io().without_faults()).await?;
    let file_len = file.size().await?;
    let mut scan = segment::scan_log(&file, Some(base), file_len, gaps).await?;
    if let Some(cut) = truncate_to {
        // The first batch that reaches the cut goes, with every one after it.
        if let Some(k) = scan
            .batches
            .iter()
            .position(|(_, _, h)| h.last_offset() as u64 >= cut)
        {
            let (rel, pos, _) = scan.batches[k];
            scan.batches.truncate(k);
            scan.valid_len = pos as u64;
            scan.next_offset = base + rel as u64;
            scan.stop = Some(ScanStop::Truncated { at: cut });
            scan.discarded_nonzero = true;
        }
    }
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
    let now = core.now_ms();
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
        let f = Rc::new(SegmentFile::open_rw(&path, core.file_io()).await?);
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
