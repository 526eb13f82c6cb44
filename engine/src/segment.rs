//! One segment: `<20-digit base offset>.log` with its `.index` and `.timeindex`; the scan that
//! validates a segment's log on recovery; the read-only view of a closed segment.

use std::io;
use std::path::{Path, PathBuf};

use crate::batch::{self, BatchHeader, LOG_OVERHEAD_BYTES};
use crate::index::{self, OffsetEntry, TimeEntry};
use crate::io::SegmentFile;

/// Bytes read per step while scanning a segment on recovery.
pub const SCAN_READ_BYTES: usize = 1 << 20;

pub fn file_name(base_offset: u64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

pub fn log_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(file_name(base, "log"))
}
pub fn index_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(file_name(base, "index"))
}
pub fn time_index_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(file_name(base, "timeindex"))
}

/// The three files of the segment at `base`: `.log`, `.index`, `.timeindex`.
pub fn paths(dir: &Path, base: u64) -> [PathBuf; 3] {
    [
        log_path(dir, base),
        index_path(dir, base),
        time_index_path(dir, base),
    ]
}

/// Parses `00000000000000001234.log` into 1234.
pub fn parse_log_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".log")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// Why a recovery scan stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanStop {
    /// Zero bytes where the next batch would start: the end of the written data.
    ZeroPadding,
    /// Fewer bytes left than a batch header, or than the batch declares.
    PartialBatch,
    /// A header that is not a valid v2 batch header, or a CRC mismatch.
    Corrupt(String),
    /// The batch's base offset is not the next offset of the log.
    OffsetGap { expected: u64, found: i64 },
    /// A truncation asked for cut the log here (a replica following a new leader).
    Truncated { at: u64 },
}

impl std::fmt::Display for ScanStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanStop::ZeroPadding => write!(f, "zero padding (end of written data)"),
            ScanStop::PartialBatch => write!(f, "partial batch (length past end of file)"),
            ScanStop::Corrupt(why) => write!(f, "corrupt batch: {why}"),
            ScanStop::Truncated { at } => write!(f, "truncated at offset {at} (leader change)"),
            ScanStop::OffsetGap { expected, found } => {
                write!(
                    f,
                    "offset gap: expected base offset {expected}, found {found}"
                )
            }
        }
    }
}

/// What a scan found valid in one segment's log.
#[derive(Debug, Default)]
pub struct ScanResult {
    /// One per valid batch: (relative offset, position, header).
    pub batches: Vec<(u32, u32, BatchHeader)>,
    /// Bytes of valid batches from the start of the file.
    pub valid_len: u64,
    pub next_offset: u64,
    /// Where and why the scan stopped before `file_len`, if it did.
    pub stop: Option<ScanStop>,
    /// The header of the batch the scan stopped at, when one could be parsed (a CRC failure,
    /// an offset gap, a partial batch): what `ringlog dump-segment` shows of a damaged batch.
    pub stop_header: Option<BatchHeader>,
    /// Whether the bytes after `valid_len` hold anything but zeros (real damage or a torn
    /// write, as opposed to padding).
    pub discarded_nonzero: bool,
}

/// Where the recovery scan reads from: a segment file on the executor (`SegmentFile`, direct
/// I/O), or a file's bytes in memory (`ringlog dump-segment` on a stopped broker's files).
#[allow(async_fn_in_trait)]
pub trait ScanSource {
    /// Up to `len` bytes at `pos`; shorter only at the end of the data.
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>>;
}

impl ScanSource for SegmentFile {
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        Ok(self.read(pos, len).await?.to_vec())
    }
}

impl ScanSource for [u8] {
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let start = (pos as usize).min(self.len());
        let end = start.saturating_add(len).min(self.len());
        Ok(self[start..end].to_vec())
    }
}

/// A window of file bytes read ahead during a scan.
struct ScanWindow<'a, S: ?Sized> {
    file: &'a S,
    file_len: u64,
    pos: u64,
    bytes: Vec<u8>,
}

impl<S: ScanSource + ?Sized> ScanWindow<'_, S> {
    /// The `len` bytes at `pos`, reading ahead when the window does not hold them; `None` if
    /// the file ends first.
    async fn get(&mut self, pos: u64, len: usize) -> io::Result<Option<&[u8]>> {
        let end = pos + len as u64;
        if end > self.file_len {
            return Ok(None);
        }
        if pos < self.pos || end > self.pos + self.bytes.len() as u64 {
            let want = len.max(SCAN_READ_BYTES).min((self.file_len - pos) as usize);
            self.bytes = self.file.read_at(pos, want).await?;
            self.pos = pos;
            if self.bytes.len() < len {
                return Ok(None);
            }
        }
        let at = (pos - self.pos) as usize;
        Ok(Some(&self.bytes[at..at + len]))
    }
}

/// Whether a scan accepts batches that start past the previous batch's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetGaps {
    /// Appended segments: every batch starts where the previous one ended (a jump is damage,
    /// since the CRC does not cover the base offset).
    Refuse,
    /// Segments the cleaner may have rewritten (any closed segment): whole batches can be
    /// gone, so offsets may jump forward, never back.
    Forward,
}

impl OffsetGaps {
    /// Recovery's rule: only the last segment of a log was being appended to; any earlier one
    /// may have been cleaned.
    pub fn for_segment(is_last: bool) -> Self {
        if is_last {
            Self::Refuse
        } else {
            Self::Forward
        }
    }
}

/// Validates the batches of a segment's log from its start, as recovery does: stops at the
/// first CRC failure, offset gap (`gaps`), length past end of file, partial batch or zero
/// padding. The one recovery scan: `PartitionLog::open` runs it on the segment file, `ringlog
/// dump-segment` on a file's bytes. `base_offset` is the segment's (from its file name);
/// `None` takes the first batch's base offset as the start.
pub async fn scan_log<S: ScanSource + ?Sized>(
    file: &S,
    base_offset: Option<u64>,
    file_len: u64,
    gaps: OffsetGaps,
) -> io::Result<ScanResult> {
    let mut res = ScanResult {
        next_offset: base_offset.unwrap_or(0),
        ..Default::default()
    };
    let mut base = base_offset;
    let mut win = ScanWindow {
        file,
        file_len,
        pos: 0,
        bytes: Vec::new(),
    };
    let mut pos: u64 = 0;
    while pos < file_len {
        let Some(prefix) = win.get(pos, LOG_OVERHEAD_BYTES).await? else {
            res.stop = Some(ScanStop::PartialBatch);
            break;
        };
        if prefix.iter().all(|&b| b == 0) {
            res.stop = Some(ScanStop::ZeroPadding);
            break;
        }
        let declared = batch::declared_size(prefix).expect("12 bytes present");
        if declared < batch::HEADER_BYTES as i64 {
            res.stop = Some(ScanStop::Corrupt(format!(
                "batchLength {} below the v2 minimum",
                declared - LOG_OVERHEAD_BYTES as i64
            )));
            break;
        }
        let Some(bytes) = win.get(pos, declared as usize).await? else {
            res.stop = Some(ScanStop::PartialBatch);
            let head_len = batch::HEADER_BYTES.min((file_len - pos) as usize);
            if let Some(head) = win.get(pos, head_len).await? {
                res.stop_header = batch::parse_header(head).ok();
            }
            break;
        };
        let h = match batch::validate_stored(bytes) {
            Ok(h) => h,
            Err(e) => {
                res.stop = Some(ScanStop::Corrupt(e.to_string()));
                res.stop_header = batch::parse_header(bytes).ok();
                break;
            }
        };
        let base = *base.get_or_insert_with(|| {
            res.next_offset = h.base_offset.max(0) as u64;
            res.next_offset
        });
        let jump_ok = gaps == OffsetGaps::Forward && h.base_offset > res.next_offset as i64;
        if h.base_offset != res.next_offset as i64 && !jump_ok {
            res.stop = Some(ScanStop::OffsetGap {
                expected: res.next_offset,
                found: h.base_offset,
            });
            res.stop_header = Some(h);
            break;
        }
        res.next_offset = h.base_offset as u64;
        let rel = res.next_offset - base;
        if rel + h.offset_count() > u32::MAX as u64 || pos + declared as u64 > u32::MAX as u64 {
            res.stop = Some(ScanStop::Corrupt(
                "segment exceeds 32-bit offsets or positions".into(),
            ));
            res.stop_header = Some(h);
            break;
        }
        res.batches.push((rel as u32, pos as u32, h));
        res.next_offset += h.offset_count();
        pos += declared as u64;
        res.valid_len = pos;
    }
    if res.stop.is_some() && res.valid_len < file_len {
        res.discarded_nonzero = has_nonzero(file, res.valid_len, file_len).await?;
        if !res.discarded_nonzero {
            res.stop = Some(ScanStop::ZeroPadding);
        }
    }
    Ok(res)
}

async fn has_nonzero<S: ScanSource + ?Sized>(file: &S, from: u64, to: u64) -> io::Result<bool> {
    let mut pos = from;
    while pos < to {
        let n = ((to - pos) as usize).min(SCAN_READ_BYTES);
        let r = file.read_at(pos, n).await?;
        if r.is_empty() {
            break;
        }
        if r.iter().any(|&b| b != 0) {
            return Ok(true);
        }
        pos += r.len() as u64;
    }
    Ok(false)
}

/// Reads a whole small file (an index) through direct I/O.
pub async fn read_whole(path: &Path) -> io::Result<Vec<u8>> {
    let f = match SegmentFile::open_read(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let len = f.size().await?;
    let mut out = Vec::with_capacity(len as usize);
    let mut pos = 0;
    while pos < len {
        let n = ((len - pos) as usize).min(SCAN_READ_BYTES);
        let r = f.read(pos, n).await?;
        if r.is_empty() {
            break;
        }
        out.extend_from_slice(&r);
        pos += r.len() as u64;
    }
    f.close().await?;
    Ok(out)
}

/// What the log keeps in memory about a closed segment (no open files).
#[derive(Debug, Clone)]
pub struct ClosedSegment {
    pub base_offset: u64,
    pub next_offset: u64,
    pub size_bytes: u64,
    /// Newest record timestamp in the segment (-1 if none).
    pub max_timestamp_ms: i64,
    /// The first time-index entry's timestamp: the newest record of the segment's first
    /// timestamped batch (Kafka's "first batch timestamp", what `max.compaction.lag.ms`
    /// measures), -1 if none.
    pub first_timestamp_ms: i64,
}

/// A closed segment opened for reads: its log file and its index, held by the per-core cache.
pub struct ClosedReader {
    pub file: std::rc::Rc<SegmentFile>,
    pub entries: Vec<OffsetEntry>,
    pub time_entries: Vec<TimeEntry>,
    pub size_bytes: u64,
}

impl ClosedReader {
    pub async fn open(dir: &Path, seg: &ClosedSegment) -> io::Result<Self> {
        let entries =
            index::decode_offset_entries(&read_whole(&index_path(dir, seg.base_offset)).await?);
        let time_entries =
            index::decode_time_entries(&read_whole(&time_index_path(dir, seg.base_offset)).await?);
        let file = std::rc::Rc::new(SegmentFile::open_read(&log_path(dir, seg.base_offset)).await?);
        Ok(Self {
            file,
            entries,
            time_entries,
            size_bytes: seg.size_bytes,
        })
    }
}
