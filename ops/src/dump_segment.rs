//! `ringlog dump-segment FILE`: decodes a segment's `.log`, `.index` or `.timeindex` (like
//! Kafka's DumpLogSegments) and, for a damaged file, says at which byte and why it stops being
//! valid, with the same rules as the engine's recovery scan (`engine::segment::scan_log`;
//! offset jumps, which a cleaned segment has, are accepted unless the file is its directory's
//! last segment, as recovery does).
//! Plain std reads: meant for a stopped broker's files.

use std::path::{Path, PathBuf};

use clap::Args;
use engine::batch::{self, BatchHeader};
use engine::index::{OffsetEntry, TimeEntry, OFFSET_ENTRY_BYTES, TIME_ENTRY_BYTES};
use engine::segment::{self, ScanStop};
use serde_json::{json, Value};

use crate::output;

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// A segment file: `<base offset>.log`, `.index` or `.timeindex`.
    file: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Only the summary, not every batch or entry.
    #[arg(long)]
    summary: bool,
}

/// Where and why a file stops being valid.
struct Stop {
    position: u64,
    reason: String,
    /// Zero padding after the written data: the normal end, not damage.
    padding: bool,
}

impl Stop {
    /// A stop at `position` in `bytes`: zero padding (the end of the written data) when every
    /// byte from there on is zero, else damage for `why`.
    fn at(bytes: &[u8], position: usize, why: String) -> Stop {
        let padding = all_zero(&bytes[position..]);
        Stop {
            position: position as u64,
            reason: if padding {
                "zero padding (end of written data)".into()
            } else {
                why
            },
            padding,
        }
    }

    fn json(&self) -> Value {
        json!({
            "position": self.position,
            "reason": self.reason,
            "damage": !self.padding,
        })
    }
}

pub fn run(args: DumpArgs) -> Result<(), String> {
    let path = &args.file;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let base = base_offset_of(path);
    let stop = match ext {
        "log" => dump_log(path, &bytes, base, &args),
        "index" => dump_index(path, &bytes, base, &args),
        "timeindex" => dump_timeindex(path, &bytes, base, &args),
        _ => {
            return Err(format!(
                "{}: unknown file kind {ext:?}; expected a .log, .index or .timeindex segment file",
                path.display()
            ))
        }
    };
    match stop {
        Some(s) if !s.padding => Err(format!(
            "{} is damaged at byte {}: {}",
            path.display(),
            s.position,
            s.reason
        )),
        _ => Ok(()),
    }
}

/// The base offset in a segment file name (`00000000000000000042.log` → 42).
fn base_offset_of(path: &Path) -> Option<u64> {
    path.file_stem()?.to_str()?.parse().ok()
}

fn all_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

fn compression_name(codec: i16) -> &'static str {
    match codec {
        0 => "none",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "invalid",
    }
}

fn batch_json(pos: u64, h: &BatchHeader, crc_valid: bool) -> Value {
    json!({
        "position": pos,
        "base_offset": h.base_offset,
        "last_offset": h.last_offset(),
        "count": h.records_count,
        "size": h.size_bytes,
        "crc_valid": crc_valid,
        "compression": compression_name(h.compression()),
        "timestamp_type": if h.is_log_append_time() { "LogAppendTime" } else { "CreateTime" },
        "base_timestamp": h.base_timestamp,
        // Set by the log cleaner on a batch that kept a tombstone (KIP-534): the base
        // timestamp is then the time after which its tombstones may be removed.
        "delete_horizon_ms": engine::cleaner::records::delete_horizon_ms(h),
        "max_timestamp": h.max_timestamp,
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence,
        "transactional": h.is_transactional(),
        "control": h.is_control(),
    })
}

fn batch_row(pos: u64, h: &BatchHeader, crc_valid: bool) -> Vec<String> {
    vec![
        pos.to_string(),
        h.base_offset.to_string(),
        h.last_offset().to_string(),
        h.records_count.to_string(),
        h.size_bytes.to_string(),
        if crc_valid { "valid" } else { "INVALID" }.to_string(),
        compression_name(h.compression()).to_string(),
        match engine::cleaner::records::delete_horizon_ms(h) {
            Some(t) => format!("{t} (delete horizon)"),
            None => h.base_timestamp.to_string(),
        },
        h.max_timestamp.to_string(),
        h.producer_id.to_string(),
        h.producer_epoch.to_string(),
        h.base_sequence.to_string(),
    ]
}

const BATCH_HEADERS: &[&str] = &[
    "POSITION",
    "BASE-OFFSET",
    "LAST-OFFSET",
    "COUNT",
    "SIZE",
    "CRC",
    "COMPRESSION",
    "BASE-TIMESTAMP",
    "MAX-TIMESTAMP",
    "PRODUCER-ID",
    "EPOCH",
    "BASE-SEQUENCE",
];

/// The valid batches (position, header) and, if the walk stopped before the end of the file,
/// where and why, with the header of the batch it stopped at when one could be parsed.
type ScanOutcome = (Vec<(u64, BatchHeader)>, Option<(Stop, Option<BatchHeader>)>);

/// Walks the batches of a `.log` with the engine's recovery scan (`engine::segment::scan_log`,
/// run on the file's bytes), so the tool and recovery can never disagree.
fn scan(bytes: &[u8], base: Option<u64>, gaps: segment::OffsetGaps) -> ScanOutcome {
    let len = bytes.len() as u64;
    let r = futures_lite::future::block_on(segment::scan_log(bytes, base, len, gaps))
        .expect("reading bytes in memory cannot fail");
    let batches = r
        .batches
        .iter()
        .map(|(_, pos, h)| (*pos as u64, *h))
        .collect();
    let stop = r.stop.map(|why| {
        let padding = matches!(why, ScanStop::ZeroPadding);
        let mut reason = why.to_string();
        if why == ScanStop::PartialBatch {
            let rest = &bytes[r.valid_len as usize..];
            if let Some(declared) =
                batch::declared_size(rest).filter(|&d| d as u64 > rest.len() as u64)
            {
                reason = format!(
                    "{reason} (the batch declares {declared} bytes, {} remain)",
                    rest.len()
                );
            }
        }
        let stop = Stop {
            position: r.valid_len,
            reason,
            padding,
        };
        (stop, r.stop_header)
    });
    (batches, stop)
}

/// Recovery's rule for offset jumps: accepted in every segment of a directory but the last
/// (which was being appended to; a cleaned segment may skip offsets), refused in the last.
fn gap_rule(path: &Path) -> segment::OffsetGaps {
    let Some(base) = base_offset_of(path) else {
        return segment::OffsetGaps::Refuse;
    };
    let later = path
        .parent()
        .and_then(|d| std::fs::read_dir(d).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| segment::parse_log_name(e.ok()?.file_name().to_str()?))
        .any(|b| b > base);
    segment::OffsetGaps::for_segment(!later)
}

fn dump_log(path: &Path, bytes: &[u8], base: Option<u64>, args: &DumpArgs) -> Option<Stop> {
    let (batches, stop) = scan(bytes, base, gap_rule(path));
    let valid_bytes = batches
        .last()
        .map(|(p, h)| p + h.size_bytes as u64)
        .unwrap_or(0);
    let records: i64 = batches.iter().map(|(_, h)| h.records_count as i64).sum();
    let next_offset = batches.last().map(|(_, h)| h.last_offset() + 1);
    let crc_failed = stop.as_ref().and_then(|(s, h)| {
        h.filter(|_| s.reason.contains("CRC"))
            .map(|h| (s.position, h))
    });
    if args.json {
        let mut list: Vec<Value> = if args.summary {
            Vec::new()
        } else {
            batches
                .iter()
                .map(|(p, h)| batch_json(*p, h, true))
                .collect()
        };
        if let (false, Some((p, h))) = (args.summary, crc_failed) {
            list.push(batch_json(p, &h, false));
        }
        output::json(&json!({
            "file": path.display().to_string(),
            "kind": "log",
            "base_offset": base,
            "file_bytes": bytes.len(),
            "valid_bytes": valid_bytes,
            "batch_count": batches.len(),
            "record_count": records,
            "next_offset": next_offset,
            "batches": list,
            "stop": stop.as_ref().map(|(s, h)| {
                let mut v = s.json();
                if let Some(h) = h {
                    v["batch_base_offset"] = json!(h.base_offset);
                }
                v
            }),
        }));
    } else {
        println!(
            "Dumping {} (log, base offset {})",
            path.display(),
            base.map(|b| b.to_string()).unwrap_or_else(|| "?".into())
        );
        if !args.summary {
            let mut rows: Vec<Vec<String>> = batches
                .iter()
                .map(|(p, h)| batch_row(*p, h, true))
                .collect();
            if let Some((p, h)) = crc_failed {
                rows.push(batch_row(p, &h, false));
            }
            output::table(BATCH_HEADERS, &rows);
        }
        println!(
            "{} batches, {records} records, offsets {}, {valid_bytes} valid bytes of {}",
            batches.len(),
            match (batches.first(), batches.last()) {
                (Some((_, a)), Some((_, b))) => format!("{}..={}", a.base_offset, b.last_offset()),
                _ => "none".into(),
            },
            bytes.len()
        );
        print_stop(stop.as_ref().map(|(s, _)| s), bytes.len() as u64);
        if let Some((s, h)) = stop.as_ref().filter(|(s, _)| !s.padding) {
            let next = next_offset
                .map(|n| n.to_string())
                .or(base.map(|b| b.to_string()))
                .unwrap_or_else(|| "?".into());
            match h {
                Some(h) => println!(
                    "the damaged batch at byte {} claims base offset {}; valid records end before offset {next}",
                    s.position, h.base_offset
                ),
                None => println!("valid records end before offset {next}"),
            }
        }
    }
    stop.map(|(s, _)| s)
}

fn print_stop(stop: Option<&Stop>, file_len: u64) {
    match stop {
        None => println!("valid to the end of the file (byte {file_len})"),
        Some(s) if s.padding => println!(
            "valid up to byte {}; zero padding after it (end of the written data)",
            s.position
        ),
        Some(s) => println!("DAMAGED at byte {}: {}", s.position, s.reason),
    }
}

/// Batch headers of the sibling `.log`, by position, to check that index entries point at them.
fn sibling_log(path: &Path, base: Option<u64>) -> Option<Vec<(u64, BatchHeader)>> {
    let log = path.with_extension("log");
    let bytes = std::fs::read(&log).ok()?;
    Some(scan(&bytes, base, gap_rule(&log)).0)
}

fn trailing(bytes: &[u8], entry: usize, stop: &mut Option<Stop>) {
    let whole = bytes.len() - bytes.len() % entry;
    if stop.is_none() && whole < bytes.len() {
        let why = format!(
            "partial entry: {} bytes left, an entry is {entry}",
            bytes.len() - whole
        );
        *stop = Some(Stop::at(bytes, whole, why));
    }
}

fn dump_index(path: &Path, bytes: &[u8], base: Option<u64>, args: &DumpArgs) -> Option<Stop> {
    let log = sibling_log(path, base);
    let mut entries: Vec<(u64, OffsetEntry)> = Vec::new();
    let mut stop: Option<Stop> = None;
    for (i, chunk) in bytes.chunks_exact(OFFSET_ENTRY_BYTES).enumerate() {
        let pos = (i * OFFSET_ENTRY_BYTES) as u64;
        let e = OffsetEntry::decode(chunk);
        let why = match entries.last() {
            None if e.position != 0 => Some(format!(
                "first entry has position {} (must be 0)",
                e.position
            )),
            None if e.commit_time_ms <= 0 => Some(format!(
                "first entry has commit time {} (must be positive)",
                e.commit_time_ms
            )),
            None => None,
            Some((_, p)) if e.relative_offset <= p.relative_offset => Some(format!(
                "relative offset {} does not increase (previous {})",
                e.relative_offset, p.relative_offset
            )),
            Some((_, p)) if e.position <= p.position => Some(format!(
                "position {} does not increase (previous {})",
                e.position, p.position
            )),
            Some((_, p)) if e.commit_time_ms < p.commit_time_ms => Some(format!(
                "commit time {} goes back (previous {})",
                e.commit_time_ms, p.commit_time_ms
            )),
            Some(_) => None,
        };
        let why = why.or_else(|| {
            let log = log.as_ref()?;
            let want = base.unwrap_or(0) as i64 + e.relative_offset as i64;
            match log.iter().find(|(p, _)| *p == e.position as u64) {
                Some((_, h)) if h.base_offset == want => None,
                Some((_, h)) => Some(format!(
                    "entry for offset {want} points at log position {} where the batch has base offset {}",
                    e.position, h.base_offset
                )),
                None => Some(format!(
                    "entry for offset {want} points at log position {} where the .log has no valid batch",
                    e.position
                )),
            }
        });
        if let Some(why) = why {
            stop = Some(Stop::at(bytes, pos as usize, format!("entry {i}: {why}")));
            break;
        }
        entries.push((pos, e));
    }
    trailing(bytes, OFFSET_ENTRY_BYTES, &mut stop);
    let b = base.unwrap_or(0) as i64;
    if args.json {
        output::json(&json!({
            "file": path.display().to_string(),
            "kind": "index",
            "base_offset": base,
            "file_bytes": bytes.len(),
            "entry_count": entries.len(),
            "checked_against_log": log.is_some(),
            "entries": if args.summary { Vec::new() } else { entries.iter().map(|(p, e)| json!({
                "position_in_index": p,
                "offset": b + e.relative_offset as i64,
                "relative_offset": e.relative_offset,
                "log_position": e.position,
                "commit_time_ms": e.commit_time_ms,
            })).collect::<Vec<_>>() },
            "stop": stop.as_ref().map(Stop::json),
        }));
    } else {
        println!(
            "Dumping {} (offset index, base offset {}{})",
            path.display(),
            base.map(|b| b.to_string()).unwrap_or_else(|| "?".into()),
            if log.is_some() {
                ", checked against the .log"
            } else {
                ""
            }
        );
        if !args.summary {
            let rows: Vec<Vec<String>> = entries
                .iter()
                .map(|(_, e)| {
                    vec![
                        (b + e.relative_offset as i64).to_string(),
                        e.relative_offset.to_string(),
                        e.position.to_string(),
                        e.commit_time_ms.to_string(),
                    ]
                })
                .collect();
            output::table(
                &["OFFSET", "RELATIVE", "LOG-POSITION", "COMMIT-TIME-MS"],
                &rows,
            );
        }
        println!("{} entries", entries.len());
        print_stop(stop.as_ref(), bytes.len() as u64);
    }
    stop
}

fn dump_timeindex(path: &Path, bytes: &[u8], base: Option<u64>, args: &DumpArgs) -> Option<Stop> {
    let mut entries: Vec<(u64, TimeEntry)> = Vec::new();
    let mut stop: Option<Stop> = None;
    for (i, chunk) in bytes.chunks_exact(TIME_ENTRY_BYTES).enumerate() {
        let pos = (i * TIME_ENTRY_BYTES) as u64;
        let e = TimeEntry::decode(chunk);
        let why = match entries.last() {
            None if all_zero(chunk) => Some("empty entry".to_string()),
            Some((_, p)) if e.timestamp_ms <= p.timestamp_ms => Some(format!(
                "timestamp {} does not increase (previous {})",
                e.timestamp_ms, p.timestamp_ms
            )),
            Some((_, p)) if e.relative_offset <= p.relative_offset => Some(format!(
                "relative offset {} does not increase (previous {})",
                e.relative_offset, p.relative_offset
            )),
            _ => None,
        };
        if let Some(why) = why {
            stop = Some(Stop::at(bytes, pos as usize, format!("entry {i}: {why}")));
            break;
        }
        entries.push((pos, e));
    }
    trailing(bytes, TIME_ENTRY_BYTES, &mut stop);
    let b = base.unwrap_or(0) as i64;
    if args.json {
        output::json(&json!({
            "file": path.display().to_string(),
            "kind": "timeindex",
            "base_offset": base,
            "file_bytes": bytes.len(),
            "entry_count": entries.len(),
            "entries": if args.summary { Vec::new() } else { entries.iter().map(|(p, e)| json!({
                "position_in_index": p,
                "timestamp_ms": e.timestamp_ms,
                "offset": b + e.relative_offset as i64,
                "relative_offset": e.relative_offset,
            })).collect::<Vec<_>>() },
            "stop": stop.as_ref().map(Stop::json),
        }));
    } else {
        println!(
            "Dumping {} (time index, base offset {})",
            path.display(),
            base.map(|b| b.to_string()).unwrap_or_else(|| "?".into())
        );
        if !args.summary {
            let rows: Vec<Vec<String>> = entries
                .iter()
                .map(|(_, e)| {
                    vec![
                        e.timestamp_ms.to_string(),
                        (b + e.relative_offset as i64).to_string(),
                        e.relative_offset.to_string(),
                    ]
                })
                .collect();
            output::table(&["TIMESTAMP-MS", "OFFSET", "RELATIVE"], &rows);
        }
        println!("{} entries", entries.len());
        print_stop(stop.as_ref(), bytes.len() as u64);
    }
    stop
}
