//! The record formats of barrier cuts, byte-compatible with krabka's KFC-4, and the codec of
//! the barrier admin APIs ([`wire`]): shared by the broker (`net::barrier`), the CLI
//! (`ringlog barrier`) and the client library (`streams`), depending on no broker crate.
//!
//! Every integer is big-endian; the encoding is Kafka's classic (non-flexible) one: a
//! `str16` is an `i16` byte length then that many UTF-8 bytes (no null strings here), an
//! array is an `i32` element count then the elements.
//!
//! # `__barrier_state` records
//!
//! A group's records live in partition [`coordinator_partition`] of the compacted
//! [`BARRIER_STATE_TOPIC`]. Key ([`StateKey`]):
//!
//! ```text
//! version i16 = 0 | kind i16 | group str16 | epoch i64        (epoch -1 for kind 0)
//! ```
//!
//! Values, by kind (a record with a null value is a tombstone of its key):
//!
//! ```text
//! 0 group:           version i16 = 0 | topics [str16] | interval_ms i64 (-1: no periodic
//!                    injection) | retained_cuts i32 | last_epoch i64
//! 1 injection start: version i16 = 0 | coordinator_epoch i32 | triggered_at i64
//!                    | targets [topic str16 | partition_count i32]
//! 2 cut:             version i16 = 0 | triggered_at i64 | completed_at i64
//!                    | status i8 (0 complete, 1 partial)
//!                    | topics [topic str16 | partitions [partition i32 | offset i64]]
//!                    | missing [topic str16 | partition i32]
//! ```
//!
//! ringlog builds before these layouts wrote the group and injection-start values in a layout
//! of their own; [`legacy`] reads them, so that a data directory written then keeps its
//! groups and cuts.
//!
//! # Markers
//!
//! A cut leaves a Kafka control record in every data partition it covers: key
//! `version i16 = 0 | type i16 = 1000` ([`BARRIER_CONTROL_TYPE`]), value
//! `version i16 = 0 | group str16 | epoch i64 | triggered_at i64` ([`MarkerValue`]).
//!
//! # Snapshot container
//!
//! Shared by krabka's runners: `version u32 = 1 | count u32 | [len u32 | name | len u32 |
//! value]`, entries sorted ascending by name bytes, no duplicates.
//!
//! # Decoding
//!
//! Decoders take hostile bytes: they refuse truncation, trailing bytes, versions other than
//! 0 (1 for the snapshot), unknown kinds and statuses, negative lengths and counts, non-UTF-8
//! names, names over [`MAX_GROUP_NAME_BYTES`] / [`MAX_TOPIC_NAME_BYTES`], and counts the
//! bytes left could not hold; they never allocate more than the input could describe.
//! Encoders do not validate: a name longer than `i16::MAX` bytes (or a list longer than
//! `i32::MAX`) is written with a negative length, so that the record is refused on decoding
//! rather than read as something else.

use std::collections::BTreeMap;
use std::fmt;

use bytes::BufMut;

pub mod legacy;
pub mod reader;
pub mod wire;

pub use reader::DecodeError;
use reader::ErrorContext;

/// The compacted topic holding the barrier groups' records.
pub const BARRIER_STATE_TOPIC: &str = "__barrier_state";
/// Partitions of [`BARRIER_STATE_TOPIC`].
pub const BARRIER_STATE_PARTITIONS: u32 = 50;
/// The longest group name a record may carry, in UTF-8 bytes.
pub const MAX_GROUP_NAME_BYTES: usize = 249;
/// The longest topic name a record may carry, in UTF-8 bytes (Kafka's own limit).
pub const MAX_TOPIC_NAME_BYTES: usize = 249;
/// The version of every `__barrier_state` key and value, and of the marker's key and value.
pub const BARRIER_RECORD_VERSION: i16 = 0;
/// The epoch field of a group record's key.
pub const GROUP_RECORD_EPOCH: i64 = -1;
/// The control record type of a barrier marker (Kafka's own types are 0 abort, 1 commit).
pub const BARRIER_CONTROL_TYPE: i16 = 1000;
/// The version of the snapshot container.
pub const SNAPSHOT_VERSION: u32 = 1;
/// The `interval_ms` a group record carries for a group with no periodic injection (a
/// decoder reads any negative interval so).
pub const INTERVAL_OFF_MS: i64 = -1;

/// The length written for a string that `i16` cannot describe (refused by every decoder).
const UNREPRESENTABLE_STR16_LEN: i16 = i16::MIN;
/// The count written for a list that `i32` cannot describe (refused by every decoder).
const UNREPRESENTABLE_COUNT: i32 = i32::MIN;
/// The fewest bytes of one element: a `str16` (its length).
const STR16_MIN_BYTES: usize = 2;
/// The fewest bytes of one `topic str16 | partitions [...]` element.
const TOPIC_PARTITIONS_MIN_BYTES: usize = 2 + 4;
/// The bytes of one `partition i32 | offset i64` element.
const PARTITION_OFFSET_BYTES: usize = 4 + 8;
/// The fewest bytes of one `topic str16 | partition i32` element.
const TOPIC_PARTITION_MIN_BYTES: usize = 2 + 4;
/// The bytes of one `topic str16 | partition_count i32` target, past its name.
const TARGET_MIN_BYTES: usize = 2 + 4;
/// The fewest bytes of one snapshot entry (its two lengths).
const SNAPSHOT_ENTRY_MIN_BYTES: usize = 4 + 4;

/// A record that could not be decoded: `what` names the record being decoded ("state key",
/// "cut value", "snapshot", ...).
pub type FormatError = DecodeError<&'static str>;

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`): the partitioner's hash,
/// and the one that picks a group's coordinator partition.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ len as u32;
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    if tail.len() >= 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of [`BARRIER_STATE_TOPIC`] that holds (and whose owner coordinates) `group`:
/// Kafka's `toPositive(murmur2(group)) % partitions`.
pub fn coordinator_partition(group: &str) -> u32 {
    (murmur2(group.as_bytes()) & 0x7fff_ffff) as u32 % BARRIER_STATE_PARTITIONS
}

/// The kind of a `__barrier_state` record (the `kind` field of its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// A group's definition.
    Group = 0,
    /// An injection under way: its epoch and frozen targets.
    InjectionStart = 1,
    /// A published cut.
    Cut = 2,
}

impl RecordKind {
    /// The kind written as `code`, `None` for an unknown one.
    pub fn from_code(code: i16) -> Option<RecordKind> {
        match code {
            0 => Some(RecordKind::Group),
            1 => Some(RecordKind::InjectionStart),
            2 => Some(RecordKind::Cut),
            _ => None,
        }
    }

    /// The code written for this kind.
    pub fn code(self) -> i16 {
        self as i16
    }
}

/// Whether a cut has every target partition's marker offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CutStatus {
    /// Every target partition took its marker.
    Complete = 0,
    /// Some never did (they are in [`Cut::missing`]).
    Partial = 1,
}

impl CutStatus {
    /// The status written as `code`, `None` for an unknown one.
    pub fn from_code(code: i8) -> Option<CutStatus> {
        match code {
            0 => Some(CutStatus::Complete),
            1 => Some(CutStatus::Partial),
            _ => None,
        }
    }

    /// The code written for this status.
    pub fn code(self) -> i8 {
        self as i8
    }
}

/// The key of a `__barrier_state` record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateKey {
    /// Which record this is.
    pub kind: RecordKind,
    /// The barrier group it belongs to.
    pub group: String,
    /// The cut's or injection's epoch; [`GROUP_RECORD_EPOCH`] for a group record.
    pub epoch: i64,
}

impl StateKey {
    /// The key of `group`'s group record.
    pub fn group(group: impl Into<String>) -> StateKey {
        StateKey {
            kind: RecordKind::Group,
            group: group.into(),
            epoch: GROUP_RECORD_EPOCH,
        }
    }

    /// The key of `group`'s injection-start record of `epoch`.
    pub fn injection_start(group: impl Into<String>, epoch: i64) -> StateKey {
        StateKey {
            kind: RecordKind::InjectionStart,
            group: group.into(),
            epoch,
        }
    }

    /// The key of `group`'s cut of `epoch`.
    pub fn cut(group: impl Into<String>, epoch: i64) -> StateKey {
        StateKey {
            kind: RecordKind::Cut,
            group: group.into(),
            epoch,
        }
    }
}

/// The value of a group record: the group's definition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupValue {
    /// The topics every cut covers, in definition order.
    pub topics: Vec<String>,
    /// How often the group is triggered, in milliseconds; `None`: no periodic injection
    /// (written as [`INTERVAL_OFF_MS`]).
    pub interval_ms: Option<i64>,
    /// How many published cuts are kept.
    pub retained_cuts: i32,
    /// The epoch of the last published cut (complete or partial), 0 for none.
    pub last_epoch: i64,
}

/// The value of an injection-start record: an epoch allocated and its frozen targets,
/// written before any of its markers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InjectionStart {
    /// The leader epoch of the group's `__barrier_state` partition when the injection
    /// started (a coordinator of a later epoch finishes it).
    pub coordinator_epoch: i32,
    /// When the injection was triggered (ms since the epoch): also the timestamp of every
    /// marker it writes.
    pub triggered_at_ms: i64,
    /// The frozen targets: each topic with its partition count (partitions `0..count`).
    pub targets: Vec<(String, i32)>,
}

/// A published cut (the value of a cut record, with the epoch of its key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The cut's epoch (from the record's key).
    pub epoch: i64,
    /// When the injection was triggered (ms since the epoch).
    pub triggered_at_ms: i64,
    /// When the cut was published (ms since the epoch).
    pub completed_at_ms: i64,
    /// Whether every target took its marker.
    pub status: CutStatus,
    /// Per topic, `(partition, offset)` of the marker.
    pub offsets: Vec<(String, Vec<(i32, i64)>)>,
    /// The `(topic, partition)` targets that never took their marker.
    pub missing: Vec<(String, i32)>,
}

/// Per topic, `(partition, offset)` pairs: [`Cut::offsets`].
pub type TopicOffsets = Vec<(String, Vec<(i32, i64)>)>;

/// One decoded `__barrier_state` record; a `None` value is a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateRecord {
    /// A group record.
    Group {
        /// The group.
        group: String,
        /// Its definition, `None` for a tombstone.
        value: Option<GroupValue>,
    },
    /// An injection-start record.
    InjectionStart {
        /// The group.
        group: String,
        /// The injection's epoch.
        epoch: i64,
        /// Its targets, `None` for a tombstone.
        value: Option<InjectionStart>,
    },
    /// A cut record.
    Cut {
        /// The group.
        group: String,
        /// The cut's epoch.
        epoch: i64,
        /// The cut, `None` for a tombstone.
        cut: Option<Cut>,
    },
}

impl StateRecord {
    /// The group the record belongs to.
    pub fn group(&self) -> &str {
        match self {
            StateRecord::Group { group, .. }
            | StateRecord::InjectionStart { group, .. }
            | StateRecord::Cut { group, .. } => group,
        }
    }
}

/// The value of a barrier marker (the control record a cut leaves in each partition).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MarkerValue {
    /// The barrier group.
    pub group: String,
    /// The cut's epoch.
    pub epoch: i64,
    /// When the injection was triggered (ms since the epoch).
    pub triggered_at_ms: i64,
}

/// Encodes a `__barrier_state` key.
pub fn encode_key(key: &StateKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 2 + 2 + key.group.len() + 8);
    out.put_i16(BARRIER_RECORD_VERSION);
    out.put_i16(key.kind.code());
    put_str16(&mut out, &key.group);
    out.put_i64(key.epoch);
    out
}

/// Decodes a `__barrier_state` key; a group record's epoch must be [`GROUP_RECORD_EPOCH`],
/// another's must not be negative.
pub fn decode_key(bytes: &[u8]) -> Result<StateKey, FormatError> {
    let mut r = Reader::new("state key", bytes);
    r.version("version")?;
    let at = r.pos;
    let code = r.i16("kind")?;
    let kind = RecordKind::from_code(code)
        .ok_or_else(|| r.err_at(at, format!("kind: unknown record kind {code}")))?;
    let group = r.str16("group", MAX_GROUP_NAME_BYTES)?;
    let at = r.pos;
    let epoch = r.i64("epoch")?;
    let valid = match kind {
        RecordKind::Group => epoch == GROUP_RECORD_EPOCH,
        RecordKind::InjectionStart | RecordKind::Cut => epoch >= 0,
    };
    if !valid {
        return Err(r.err_at(
            at,
            format!("epoch: {epoch} is not valid for a {kind:?} record"),
        ));
    }
    r.finish()?;
    Ok(StateKey { kind, group, epoch })
}

/// Encodes a group record's value.
pub fn encode_group_value(value: &GroupValue) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_i16(BARRIER_RECORD_VERSION);
    put_count(&mut out, value.topics.len());
    for topic in &value.topics {
        put_str16(&mut out, topic);
    }
    out.put_i64(value.interval_ms.unwrap_or(INTERVAL_OFF_MS));
    out.put_i32(value.retained_cuts);
    out.put_i64(value.last_epoch);
    out
}

/// Decodes a group record's value (a negative interval is "no periodic injection").
pub fn decode_group_value(bytes: &[u8]) -> Result<GroupValue, FormatError> {
    let mut r = Reader::new("group value", bytes);
    r.version("version")?;
    let topics = r.array("topics", STR16_MIN_BYTES, |r| {
        r.str16("topics[]", MAX_TOPIC_NAME_BYTES)
    })?;
    let interval_ms = Some(r.i64("interval_ms")?).filter(|ms| *ms >= 0);
    let retained_cuts = r.i32("retained_cuts")?;
    let last_epoch = r.i64("last_epoch")?;
    r.finish()?;
    Ok(GroupValue {
        topics,
        interval_ms,
        retained_cuts,
        last_epoch,
    })
}

/// Encodes an injection-start record's value.
pub fn encode_injection_start(value: &InjectionStart) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_i16(BARRIER_RECORD_VERSION);
    out.put_i32(value.coordinator_epoch);
    out.put_i64(value.triggered_at_ms);
    put_count(&mut out, value.targets.len());
    for (topic, partition_count) in &value.targets {
        put_str16(&mut out, topic);
        out.put_i32(*partition_count);
    }
    out
}

/// Decodes an injection-start record's value.
pub fn decode_injection_start(bytes: &[u8]) -> Result<InjectionStart, FormatError> {
    let mut r = Reader::new("injection-start value", bytes);
    r.version("version")?;
    let coordinator_epoch = r.i32("coordinator_epoch")?;
    let triggered_at_ms = r.i64("triggered_at")?;
    let targets = r.array("targets", TARGET_MIN_BYTES, |r| {
        let topic = r.str16("targets[].topic", MAX_TOPIC_NAME_BYTES)?;
        Ok((topic, r.i32("targets[].partition_count")?))
    })?;
    r.finish()?;
    Ok(InjectionStart {
        coordinator_epoch,
        triggered_at_ms,
        targets,
    })
}

/// Encodes a cut record's value (the epoch goes in the key).
pub fn encode_cut_value(cut: &Cut) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_i16(BARRIER_RECORD_VERSION);
    out.put_i64(cut.triggered_at_ms);
    out.put_i64(cut.completed_at_ms);
    out.put_i8(cut.status.code());
    put_topic_offsets(&mut out, &cut.offsets);
    put_count(&mut out, cut.missing.len());
    for (topic, partition) in &cut.missing {
        put_str16(&mut out, topic);
        out.put_i32(*partition);
    }
    out
}

/// Decodes a cut record's value; `epoch` is its key's.
pub fn decode_cut_value(epoch: i64, bytes: &[u8]) -> Result<Cut, FormatError> {
    let mut r = Reader::new("cut value", bytes);
    r.version("version")?;
    let triggered_at_ms = r.i64("triggered_at")?;
    let completed_at_ms = r.i64("completed_at")?;
    let at = r.pos;
    let code = r.i8("status")?;
    let status = CutStatus::from_code(code)
        .ok_or_else(|| r.err_at(at, format!("status: unknown cut status {code}")))?;
    let offsets = r.topic_offsets("topics")?;
    let missing = r.array("missing", TOPIC_PARTITION_MIN_BYTES, |r| {
        let topic = r.str16("missing[].topic", MAX_TOPIC_NAME_BYTES)?;
        Ok((topic, r.i32("missing[].partition")?))
    })?;
    r.finish()?;
    Ok(Cut {
        epoch,
        triggered_at_ms,
        completed_at_ms,
        status,
        offsets,
        missing,
    })
}

/// Decodes one `__barrier_state` record, its value by the key's kind (`None`: a tombstone).
pub fn decode_record(key: &[u8], value: Option<&[u8]>) -> Result<StateRecord, FormatError> {
    let StateKey { kind, group, epoch } = decode_key(key)?;
    Ok(match kind {
        RecordKind::Group => StateRecord::Group {
            group,
            value: value.map(decode_group_value).transpose()?,
        },
        RecordKind::InjectionStart => StateRecord::InjectionStart {
            group,
            epoch,
            value: value.map(decode_injection_start).transpose()?,
        },
        RecordKind::Cut => StateRecord::Cut {
            group,
            epoch,
            cut: value.map(|v| decode_cut_value(epoch, v)).transpose()?,
        },
    })
}

/// The key of a barrier marker's control record: version 0, type [`BARRIER_CONTROL_TYPE`].
pub fn marker_key() -> [u8; 4] {
    let [v0, v1] = BARRIER_RECORD_VERSION.to_be_bytes();
    let [t0, t1] = BARRIER_CONTROL_TYPE.to_be_bytes();
    [v0, v1, t0, t1]
}

/// Whether a control record's key is a barrier marker's: at least 4 bytes, a version that
/// is not negative (later versions may append fields), type [`BARRIER_CONTROL_TYPE`].
pub fn is_barrier_marker_key(key: &[u8]) -> bool {
    match *key {
        [v0, v1, t0, t1, ..] => {
            i16::from_be_bytes([v0, v1]) >= 0
                && i16::from_be_bytes([t0, t1]) == BARRIER_CONTROL_TYPE
        }
        _ => false,
    }
}

/// Encodes a barrier marker's value.
pub fn encode_marker_value(value: &MarkerValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 2 + value.group.len() + 8 + 8);
    out.put_i16(BARRIER_RECORD_VERSION);
    put_str16(&mut out, &value.group);
    out.put_i64(value.epoch);
    out.put_i64(value.triggered_at_ms);
    out
}

/// Decodes a barrier marker's value.
pub fn decode_marker_value(bytes: &[u8]) -> Result<MarkerValue, FormatError> {
    let mut r = Reader::new("marker value", bytes);
    r.version("version")?;
    let group = r.str16("group", MAX_GROUP_NAME_BYTES)?;
    let epoch = r.i64("epoch")?;
    let triggered_at_ms = r.i64("triggered_at")?;
    r.finish()?;
    Ok(MarkerValue {
        group,
        epoch,
        triggered_at_ms,
    })
}

/// Encodes a snapshot container (entries in the map's order: ascending by name bytes).
/// A name or value longer than `u32::MAX` bytes is not representable and must not be given.
pub fn encode_snapshot(entries: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<u8> {
    let size: usize = entries.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(8 + size);
    out.put_u32(SNAPSHOT_VERSION);
    out.put_u32(u32::try_from(entries.len()).unwrap_or(u32::MAX));
    for (name, value) in entries {
        out.put_u32(u32::try_from(name.len()).unwrap_or(u32::MAX));
        out.put_slice(name);
        out.put_u32(u32::try_from(value.len()).unwrap_or(u32::MAX));
        out.put_slice(value);
    }
    out
}

/// Decodes a snapshot container; refuses entries out of order or repeated.
pub fn decode_snapshot(bytes: &[u8]) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, FormatError> {
    let mut r = Reader::new("snapshot", bytes);
    let at = r.pos;
    let version = r.u32("version")?;
    if version != SNAPSHOT_VERSION {
        return Err(r.err_at(
            at,
            format!("version: unknown snapshot version {version} (expected {SNAPSHOT_VERSION})"),
        ));
    }
    let at = r.pos;
    let count = r.u32("count")? as usize;
    r.check_count("count", at, count, SNAPSHOT_ENTRY_MIN_BYTES)?;
    let mut entries = BTreeMap::new();
    let mut last: Option<&[u8]> = None;
    for _ in 0..count {
        let at = r.pos;
        let len = r.u32("entry name length")? as usize;
        let name = r.take(len, "entry name")?;
        if last.is_some_and(|last| name <= last) {
            return Err(r.err_at(
                at,
                "entry name: not after the previous one (unsorted or duplicate)".into(),
            ));
        }
        last = Some(name);
        let len = r.u32("entry value length")? as usize;
        let value = r.take(len, "entry value")?;
        entries.insert(name.to_vec(), value.to_vec());
    }
    r.finish()?;
    Ok(entries)
}

/// Writes a `str16`; see the module doc for a string `i16` cannot describe.
fn put_str16(out: &mut Vec<u8>, s: &str) {
    match i16::try_from(s.len()) {
        Ok(len) => {
            out.put_i16(len);
            out.put_slice(s.as_bytes());
        }
        Err(_) => out.put_i16(UNREPRESENTABLE_STR16_LEN),
    }
}

/// Writes an array's count.
fn put_count(out: &mut Vec<u8>, n: usize) {
    out.put_i32(i32::try_from(n).unwrap_or(UNREPRESENTABLE_COUNT));
}

/// Writes `[topic str16 | partitions [partition i32 | offset i64]]`.
fn put_topic_offsets(out: &mut Vec<u8>, topics: &[(String, Vec<(i32, i64)>)]) {
    put_count(out, topics.len());
    for (topic, partitions) in topics {
        put_str16(out, topic);
        put_count(out, partitions.len());
        for (partition, offset) in partitions {
            out.put_i32(*partition);
            out.put_i64(*offset);
        }
    }
}

/// The record kind a format error names.
impl ErrorContext for &'static str {
    const WHOLE: &'static str = "record";
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "barrier record: {self}")
    }
}

type Reader<'a> = reader::Reader<'a, &'static str>;

impl<'a> Reader<'a> {
    /// Reads an `i16` version that must be [`BARRIER_RECORD_VERSION`].
    fn version(&mut self, field: &str) -> Result<(), FormatError> {
        let at = self.pos;
        let version = self.i16(field)?;
        if version != BARRIER_RECORD_VERSION {
            return Err(self.err_at(
                at,
                format!("{field}: unknown version {version} (expected {BARRIER_RECORD_VERSION})"),
            ));
        }
        Ok(())
    }

    /// Reads an array: an `i32` count (checked against the bytes left) then its elements.
    fn array<T>(
        &mut self,
        field: &str,
        min_element_bytes: usize,
        mut each: impl FnMut(&mut Self) -> Result<T, FormatError>,
    ) -> Result<Vec<T>, FormatError> {
        let at = self.pos;
        let count = self.i32(field)?;
        let count = usize::try_from(count)
            .map_err(|_| self.err_at(at, format!("{field}: negative count {count}")))?;
        self.check_count(field, at, count, min_element_bytes)?;
        (0..count).map(|_| each(self)).collect()
    }

    /// Reads `[topic str16 | partitions [partition i32 | offset i64]]`.
    fn topic_offsets(&mut self, field: &str) -> Result<TopicOffsets, FormatError> {
        self.array(field, TOPIC_PARTITIONS_MIN_BYTES, |r| {
            let topic = r.str16("topic", MAX_TOPIC_NAME_BYTES)?;
            let partitions = r.array("partitions", PARTITION_OFFSET_BYTES, |r| {
                Ok((r.i32("partition")?, r.i64("offset")?))
            })?;
            Ok((topic, partitions))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafka() {
        // Vectors from Kafka's UtilsTest.testMurmur2.
        for (s, h) in [
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            ("abc", 479470107),
        ] {
            assert_eq!(murmur2(s.as_bytes()), h, "{s}");
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test hex"))
            .collect()
    }

    #[test]
    fn coordinator_partition_is_kafkas_to_positive_mod_50() {
        // toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16.
        assert_eq!(coordinator_partition("foobar"), 16);
        // toPositive(479470107) = 479470107; % 50 = 7.
        assert_eq!(coordinator_partition("abc"), 7);
        for g in ["", "a", "orders-cut", "ünïcode"] {
            assert!(coordinator_partition(g) < BARRIER_STATE_PARTITIONS);
        }
    }

    #[test]
    fn golden_cut_vector() {
        let key = hex("00000002000a6f72646572732d6375740000000000000007");
        let value = hex(concat!(
            "0000000001918435bd00000001918435bd2a000000000100066f72646572730000000200000000",
            "000000000000040000000001000000000000080000000000"
        ));
        let cut = Cut {
            epoch: 7,
            triggered_at_ms: 1_724_500_000_000,
            completed_at_ms: 1_724_500_000_042,
            status: CutStatus::Complete,
            offsets: vec![("orders".into(), vec![(0, 1024), (1, 2048)])],
            missing: vec![],
        };
        assert_eq!(encode_key(&StateKey::cut("orders-cut", 7)), key);
        assert_eq!(encode_cut_value(&cut), value);
        assert_eq!(
            decode_record(&key, Some(&value)),
            Ok(StateRecord::Cut {
                group: "orders-cut".into(),
                epoch: 7,
                cut: Some(cut),
            })
        );
    }

    #[test]
    fn own_vectors_partial_cut_group_and_injection_start() {
        // A partial cut of group "g2", epoch 12.
        let cut_key: Vec<u8> = vec![
            0x00, 0x00, // version 0
            0x00, 0x02, // kind 2 (cut)
            0x00, 0x02, b'g', b'2', // group "g2"
            0, 0, 0, 0, 0, 0, 0, 12, // epoch 12
        ];
        let cut_value: Vec<u8> = vec![
            0x00, 0x00, // version 0
            0, 0, 0, 0, 0, 0, 0x03, 0xe8, // triggered_at 1000
            0, 0, 0, 0, 0, 0, 0x09, 0xc4, // completed_at 2500
            0x01, // status 1 (partial)
            0, 0, 0, 2, // topics: 2
            0x00, 0x01, b'a', // topic "a"
            0, 0, 0, 1, // partitions: 1
            0, 0, 0, 0, // partition 0
            0, 0, 0, 0, 0, 0, 0, 5, // offset 5
            0x00, 0x02, b'b', b'b', // topic "bb"
            0, 0, 0, 2, // partitions: 2
            0, 0, 0, 1, // partition 1
            0, 0, 0, 0, 0, 0, 0x01, 0x00, // offset 256
            0, 0, 0, 3, // partition 3
            0, 0, 0, 0, 0, 0, 0, 9, // offset 9
            0, 0, 0, 2, // missing: 2
            0x00, 0x01, b'a', 0, 0, 0, 1, // "a" partition 1
            0x00, 0x02, b'b', b'b', 0, 0, 0, 2, // "bb" partition 2
        ];
        let cut = Cut {
            epoch: 12,
            triggered_at_ms: 1000,
            completed_at_ms: 2500,
            status: CutStatus::Partial,
            offsets: vec![
                ("a".into(), vec![(0, 5)]),
                ("bb".into(), vec![(1, 256), (3, 9)]),
            ],
            missing: vec![("a".into(), 1), ("bb".into(), 2)],
        };
        assert_eq!(encode_key(&StateKey::cut("g2", 12)), cut_key);
        assert_eq!(encode_cut_value(&cut), cut_value);
        assert_eq!(
            decode_record(&cut_key, Some(&cut_value)),
            Ok(StateRecord::Cut {
                group: "g2".into(),
                epoch: 12,
                cut: Some(cut),
            })
        );

        // The group record of "g2" (krabka's sample group, with one more topic).
        let group_key: Vec<u8> = vec![
            0x00, 0x00, // version 0
            0x00, 0x00, // kind 0 (group)
            0x00, 0x02, b'g', b'2', // group "g2"
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // epoch -1
        ];
        let group_value = hex(concat!(
            "0000",                 // version 0
            "00000002",             // topics: 2
            "00066f7264657273",     // "orders"
            "00087061796d656e7473", // "payments"
            "000000000000ea60",     // interval_ms 60000
            "00000020",             // retained_cuts 32
            "0000000000000007",     // last_epoch 7
        ));
        let group = GroupValue {
            topics: vec!["orders".into(), "payments".into()],
            interval_ms: Some(60_000),
            retained_cuts: 32,
            last_epoch: 7,
        };
        assert_eq!(encode_key(&StateKey::group("g2")), group_key);
        assert_eq!(encode_group_value(&group), group_value);
        assert_eq!(
            decode_record(&group_key, Some(&group_value)),
            Ok(StateRecord::Group {
                group: "g2".into(),
                value: Some(group),
            })
        );
        // No periodic injection: -1 on the wire; any negative interval reads so.
        let off = GroupValue {
            topics: vec!["orders".into()],
            interval_ms: None,
            retained_cuts: 4,
            last_epoch: 0,
        };
        let off_bytes = hex("00000000000100066f7264657273ffffffffffffffff000000040000000000000000");
        assert_eq!(encode_group_value(&off), off_bytes);
        assert_eq!(decode_group_value(&off_bytes), Ok(off.clone()));
        let mut minus_two = off_bytes.clone();
        minus_two[21] = 0xfe;
        assert_eq!(decode_group_value(&minus_two), Ok(off));

        // The injection-start record of "g2", epoch 12 (krabka's sample injection start).
        let start_key: Vec<u8> = vec![
            0x00, 0x00, // version 0
            0x00, 0x01, // kind 1 (injection start)
            0x00, 0x02, b'g', b'2', // group "g2"
            0, 0, 0, 0, 0, 0, 0, 12, // epoch 12
        ];
        let start_value = hex(concat!(
            "0000",             // version 0
            "00000004",         // coordinator_epoch 4
            "000001918435bd00", // triggered_at 1724500000000
            "00000002",         // targets: 2
            "00066f7264657273",
            "00000003", // "orders", 3 partitions
            "00087061796d656e7473",
            "00000001", // "payments", 1 partition
        ));
        let start = InjectionStart {
            coordinator_epoch: 4,
            triggered_at_ms: 1_724_500_000_000,
            targets: vec![("orders".into(), 3), ("payments".into(), 1)],
        };
        assert_eq!(encode_key(&StateKey::injection_start("g2", 12)), start_key);
        assert_eq!(encode_injection_start(&start), start_value);
        assert_eq!(
            decode_record(&start_key, Some(&start_value)),
            Ok(StateRecord::InjectionStart {
                group: "g2".into(),
                epoch: 12,
                value: Some(start),
            })
        );
        // KFC-4's replay refuses trailing bytes.
        let mut trailing = start_value.clone();
        trailing.push(0);
        assert!(decode_injection_start(&trailing).is_err());
        let mut trailing = group_value.clone();
        trailing.push(0);
        assert!(decode_group_value(&trailing).is_err());
    }

    /// The marker of group "orders-cut", epoch 7, triggered at 1724500000000: its key and
    /// value, computed by hand from the layout.
    #[test]
    fn marker_vector() {
        let value = MarkerValue {
            group: "orders-cut".into(),
            epoch: 7,
            triggered_at_ms: 1_724_500_000_000,
        };
        assert_eq!(marker_key().to_vec(), hex("000003e8"));
        let bytes = hex("0000000a6f72646572732d6375740000000000000007000001918435bd00");
        assert_eq!(encode_marker_value(&value), bytes);
        assert_eq!(decode_marker_value(&bytes), Ok(value));
    }

    #[test]
    fn tombstones_decode_with_no_value() {
        let key = encode_key(&StateKey::cut("g", 3));
        let record = decode_record(&key, None).expect("tombstone");
        assert_eq!(record.group(), "g");
        assert_eq!(
            record,
            StateRecord::Cut {
                group: "g".into(),
                epoch: 3,
                cut: None
            }
        );
        let key = encode_key(&StateKey::group("h"));
        assert_eq!(
            decode_record(&key, None),
            Ok(StateRecord::Group {
                group: "h".into(),
                value: None
            })
        );
    }

    #[test]
    fn marker_key_and_value() {
        assert_eq!(marker_key(), [0x00, 0x00, 0x03, 0xe8]);
        assert!(is_barrier_marker_key(&marker_key()));
        assert!(is_barrier_marker_key(&[0x00, 0x01, 0x03, 0xe8, 0x7f]));
        assert!(!is_barrier_marker_key(&[0x00, 0x00, 0x03]));
        assert!(!is_barrier_marker_key(&[0xff, 0xff, 0x03, 0xe8]));
        assert!(!is_barrier_marker_key(&[0x00, 0x00, 0x00, 0x01])); // a commit marker
        let value = MarkerValue {
            group: "g".into(),
            epoch: 2,
            triggered_at_ms: 3,
        };
        let bytes = encode_marker_value(&value);
        assert_eq!(
            bytes,
            [
                0, 0, // version 0
                0, 1, b'g', // group "g"
                0, 0, 0, 0, 0, 0, 0, 2, // epoch 2
                0, 0, 0, 0, 0, 0, 0, 3, // triggered_at 3
            ]
        );
        assert_eq!(decode_marker_value(&bytes), Ok(value));
    }

    #[test]
    fn snapshot_round_trip_and_refusals() {
        let mut entries = BTreeMap::new();
        entries.insert(b"b".to_vec(), b"2".to_vec());
        entries.insert(b"a".to_vec(), vec![]);
        entries.insert(b"ab".to_vec(), b"xyz".to_vec());
        let bytes = encode_snapshot(&entries);
        assert_eq!(&bytes[..8], &[0, 0, 0, 1, 0, 0, 0, 3]);
        assert_eq!(&bytes[8..17], &[0, 0, 0, 1, b'a', 0, 0, 0, 0]);
        assert_eq!(decode_snapshot(&bytes), Ok(entries));
        assert_eq!(
            decode_snapshot(&encode_snapshot(&BTreeMap::new())),
            Ok(BTreeMap::new())
        );

        let entry = |name: &[u8], value: &[u8]| {
            let mut e = (name.len() as u32).to_be_bytes().to_vec();
            e.extend_from_slice(name);
            e.extend_from_slice(&(value.len() as u32).to_be_bytes());
            e.extend_from_slice(value);
            e
        };
        let container = |entries: &[Vec<u8>]| {
            let mut c = vec![0, 0, 0, 1];
            c.extend_from_slice(&(entries.len() as u32).to_be_bytes());
            entries.iter().for_each(|e| c.extend_from_slice(e));
            c
        };
        let unsorted = container(&[entry(b"b", b""), entry(b"a", b"")]);
        assert!(decode_snapshot(&unsorted).is_err());
        let duplicate = container(&[entry(b"a", b"1"), entry(b"a", b"2")]);
        assert!(decode_snapshot(&duplicate).is_err());
        let mut trailing = container(&[entry(b"a", b"1")]);
        trailing.push(0);
        assert!(decode_snapshot(&trailing).is_err());
        let mut version2 = container(&[]);
        version2[3] = 2;
        assert!(decode_snapshot(&version2).is_err());
        let huge_count = [0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
        assert!(decode_snapshot(&huge_count).is_err());
        let huge_len = [0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        assert!(decode_snapshot(&huge_len).is_err());
    }

    #[test]
    fn refusals_carry_context() {
        let key = encode_key(&StateKey::cut("g", 1));
        let mut bad = key.clone();
        bad[1] = 1; // version 1
        let e = decode_key(&bad).expect_err("version 1");
        assert_eq!((e.what, e.at_byte), ("state key", 0));
        assert_eq!(
            e.to_string(),
            "barrier record: state key at byte 0: version: unknown version 1 (expected 0)"
        );
        let mut bad = key.clone();
        bad[3] = 3; // kind 3
        assert_eq!(decode_key(&bad).expect_err("kind 3").at_byte, 2);
        let mut bad = key.clone();
        bad[4] = 0xff; // negative group length
        assert!(decode_key(&bad)
            .expect_err("negative")
            .detail
            .contains("negative length"));
        let mut bad = key.clone();
        bad[6] = 0xff; // not UTF-8
        assert!(decode_key(&bad)
            .expect_err("utf-8")
            .detail
            .contains("UTF-8"));
        let mut bad = key.clone();
        bad.push(0);
        assert!(decode_key(&bad)
            .expect_err("trailing")
            .detail
            .contains("trailing"));
        // A group record's epoch must be -1, a cut's not negative.
        let mut bad = encode_key(&StateKey::group("g"));
        bad[14] = 0;
        assert!(decode_key(&bad).is_err());
        assert!(decode_key(&encode_key(&StateKey::cut("g", -1))).is_err());
        // A group name over the limit.
        let long = "x".repeat(MAX_GROUP_NAME_BYTES + 1);
        let e = decode_key(&encode_key(&StateKey::cut(long, 1))).expect_err("long name");
        assert!(e.detail.contains("limit"), "{e}");
        let ok = "x".repeat(MAX_GROUP_NAME_BYTES);
        assert!(decode_key(&encode_key(&StateKey::cut(ok, 1))).is_ok());
        // A name `i16` cannot describe encodes into a refused record.
        let huge = "x".repeat(40_000);
        assert!(decode_key(&encode_key(&StateKey::cut(huge, 1))).is_err());

        let cut = Cut {
            epoch: 1,
            triggered_at_ms: 1,
            completed_at_ms: 2,
            status: CutStatus::Complete,
            offsets: vec![],
            missing: vec![],
        };
        let mut bad = encode_cut_value(&cut);
        bad[18] = 2; // status 2
        let e = decode_cut_value(1, &bad).expect_err("status 2");
        assert_eq!((e.what, e.at_byte), ("cut value", 18));
        let mut bad = encode_cut_value(&cut);
        bad[19..23].copy_from_slice(&i32::MAX.to_be_bytes()); // topics count
        assert!(decode_cut_value(1, &bad)
            .expect_err("count")
            .detail
            .contains("hold at most"));
        let mut bad = encode_cut_value(&cut);
        bad[19..23].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_cut_value(1, &bad)
            .expect_err("count")
            .detail
            .contains("negative count"));
    }

    /// A tiny xorshift, for mutations.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn hostile_bytes_never_panic() {
        let cut = Cut {
            epoch: 5,
            triggered_at_ms: 10,
            completed_at_ms: 20,
            status: CutStatus::Partial,
            offsets: vec![("t".into(), vec![(0, 1), (1, 2)]), ("u".into(), vec![])],
            missing: vec![("t".into(), 2), ("u".into(), 0)],
        };
        let start = InjectionStart {
            coordinator_epoch: 1,
            triggered_at_ms: 3,
            targets: vec![("t".into(), 1)],
        };
        let group = GroupValue {
            topics: vec!["t".into(), "u".into()],
            interval_ms: Some(1000),
            retained_cuts: 2,
            last_epoch: 3,
        };
        let marker = MarkerValue {
            group: "g".into(),
            epoch: 1,
            triggered_at_ms: 2,
        };
        let mut snap = BTreeMap::new();
        snap.insert(b"k".to_vec(), b"v".to_vec());
        snap.insert(b"l".to_vec(), vec![]);
        let samples = [
            encode_key(&StateKey::cut("g", 5)),
            encode_cut_value(&cut),
            encode_injection_start(&start),
            encode_group_value(&group),
            encode_marker_value(&marker),
            encode_snapshot(&snap),
        ];
        let decode_all = |b: &[u8]| {
            let results = [
                decode_key(b).is_ok(),
                decode_cut_value(0, b).is_ok(),
                decode_injection_start(b).is_ok(),
                decode_group_value(b).is_ok(),
                decode_marker_value(b).is_ok(),
                decode_snapshot(b).is_ok(),
                legacy::decode_group_value_legacy(b).is_ok(),
                legacy::decode_injection_start_legacy(b).is_ok(),
                is_barrier_marker_key(b),
            ];
            results.iter().filter(|ok| **ok).count()
        };
        for s in &samples {
            for i in 0..s.len() {
                decode_all(&s[..i]);
            }
        }
        let mut state = 0x2545_f491_4f6c_dd1d;
        for _ in 0..4000 {
            let s = &samples[(xorshift(&mut state) % samples.len() as u64) as usize];
            let mut m = s.clone();
            for _ in 0..1 + xorshift(&mut state) % 4 {
                let i = (xorshift(&mut state) % m.len() as u64) as usize;
                m[i] = xorshift(&mut state) as u8;
            }
            if xorshift(&mut state).is_multiple_of(4) {
                m.truncate((xorshift(&mut state) % (m.len() as u64 + 1)) as usize);
            }
            decode_all(&m);
            let _ = decode_record(&m, Some(&m));
            let _ = legacy::decode_record(&m, Some(&m));
        }
    }
}
