//! Transaction state of one partition (KIP-98): which producers have a transaction open here
//! (begun by AddPartitionsToTxn, ended by a commit or abort marker the coordinator writes), the
//! first offset of each open transaction (the last stable offset stops there), and the
//! aborted-transaction index readers use to drop aborted records (`read_committed`).
//!
//! `Partition` owns one `TxnState` and changes it only together with the log: a transactional
//! batch is admitted and recorded in the same step (`PartitionLog::append_admitted`), and so is
//! a marker. The aborted index also lives in `aborted.txnindex` in the partition directory (see
//! `encode_aborted_file`), rewritten after each abort marker is durable, so it survives beyond
//! the window of log that is scanned on open.
//!
//! Control records (Kafka's `ControlRecordType`): key = version i16 (0) | type i16 (0 abort,
//! 1 commit); value (end-transaction marker) = version i16 (0) | coordinator epoch i32.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::batch::records;
use crate::batch::{self, BatchHeader};

/// The version of the control record key and end-transaction marker value we write.
pub const CONTROL_RECORD_VERSION: i16 = 0;
/// Producers with a transaction begun on one partition (begun, with or without batches yet);
/// `begin_transaction` past it is refused. Within the idempotent producers a partition
/// remembers (asserted in `producer_state`), so an open transaction's producer is never forgotten.
pub const MAX_ONGOING_TXNS_PER_PARTITION: usize = 10_000;
/// Entries kept in a partition's aborted-transaction index (memory and file; 24 bytes each in
/// the file, so at most 2.4 MiB). Past it the oldest entry is forgotten (with a warning): a
/// `read_committed` reader of that old range would then see its aborted records.
pub const MAX_ABORTED_TXNS_PER_PARTITION: usize = 100_000;
/// The aborted-transaction index file in a partition directory.
pub const ABORTED_INDEX_FILE_NAME: &str = "aborted.txnindex";
const ABORTED_FILE_MAGIC: &[u8; 4] = b"RLAT";
const ABORTED_FILE_VERSION: u16 = 1;
/// count u32 (after `checked_file`'s magic and version).
const ABORTED_FILE_COUNT_BYTES: usize = 4;
/// producer id i64 | first offset u64 | last offset u64.
const ABORTED_FILE_ENTRY_BYTES: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    Abort,
    Commit,
}

impl MarkerKind {
    /// Kafka's control record type.
    pub fn control_type(self) -> i16 {
        match self {
            MarkerKind::Abort => 0,
            MarkerKind::Commit => 1,
        }
    }
}

/// One aborted transaction of one producer on this partition: its first batch here at
/// `first_offset`, its abort marker at `last_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: u64,
    pub last_offset: u64,
}

/// Parses a control batch's marker (its one record's key: version i16 = 0, type i16); None if
/// not a marker (not a control batch, unreadable, or another control type). A key version
/// above 0 is read the same way (as Kafka does, with the type after it).
pub fn marker_of(stored_batch: &[u8]) -> Option<MarkerKind> {
    match control_record_of(stored_batch)?.0 {
        0 => Some(MarkerKind::Abort),
        1 => Some(MarkerKind::Commit),
        _ => None,
    }
}

/// One end-transaction marker: a control batch (attributes: transactional | control,
/// producer id/epoch set, base sequence -1, one record: key = version 0 + type, value =
/// version 0 i16 + coordinator_epoch i32), offsets from 0, timestamp `timestamp_ms`.
pub fn encode_marker(
    producer_id: i64,
    epoch: i16,
    kind: MarkerKind,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    encode_control_batch(
        ControlProducer::Transactional { producer_id, epoch },
        kind.control_type(),
        value,
        timestamp_ms,
    )
}

/// Who writes a control batch: a transaction's producer (end markers), or nobody (producer
/// id, epoch and sequence -1, not transactional: a barrier marker, seed 003).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlProducer {
    Transactional { producer_id: i64, epoch: i16 },
    None,
}

/// One control batch of one record: key = version 0 i16 | `control_type` i16, `value` as
/// given; offsets from 0, base sequence -1, timestamp `timestamp_ms`.
pub fn encode_control_batch(
    producer: ControlProducer,
    control_type: i16,
    value: Vec<u8>,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
    key.extend_from_slice(&control_type.to_be_bytes());
    let (transactional, producer_id, producer_epoch) = match producer {
        ControlProducer::Transactional { producer_id, epoch } => (true, producer_id, epoch),
        ControlProducer::None => (false, -1, -1),
    };
    let rec = Record {
        transactional,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: timestamp_ms,
        key: Some(Bytes::from(key)),
        value: Some(Bytes::from(value)),
        headers: IndexMap::new(),
    };
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        std::iter::once(&rec),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encoding one uncompressed control record cannot fail");
    buf.to_vec()
}

/// The control type and value of a control batch's one record (key: version i16 >= 0 | type
/// i16); None if not a control batch or unreadable.
pub fn control_record_of(stored_batch: &[u8]) -> Option<(i16, Option<Bytes>)> {
    let h = batch::parse_header(stored_batch).ok()?;
    if !h.is_control() || h.records_count < 1 || h.size_bytes > stored_batch.len() {
        return None;
    }
    let one = &stored_batch[..h.size_bytes];
    let section = records::section(one, &h).ok()?;
    let recs = records::parse(&section, &h).ok()?;
    let first = recs.first()?;
    let key = first.key?;
    if key.len() < 4 || i16::from_be_bytes([key[0], key[1]]) < 0 {
        return None;
    }
    let value = first.value.map(Bytes::copy_from_slice);
    Some((i16::from_be_bytes([key[2], key[3]]), value))
}

/// A producer's transaction on this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ongoing {
    epoch: i16,
    /// The base offset of its first batch here; `None` while it has written nothing here.
    first_offset: Option<u64>,
}

/// A transaction whose marker is in the log but perhaps not durable yet: it still holds the
/// last stable offset back until the high watermark passes the marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ending {
    first_offset: u64,
    marker_offset: u64,
}

/// Why a transactional batch or a begin was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnRefusal {
    /// No transaction begun for this producer at this epoch.
    NotBegun,
    /// The partition knows a newer epoch for the producer.
    Fenced { current: i16 },
    /// `MAX_ONGOING_TXNS_PER_PARTITION` producers already have a transaction here.
    TooMany,
}

/// The transaction state of one partition (see the module docs).
#[derive(Debug, Default)]
pub struct TxnState {
    ongoing: HashMap<i64, Ongoing>,
    ending: Vec<Ending>,
    /// Ordered by `last_offset` (markers are appended in log order).
    aborted: Vec<AbortedTxn>,
    /// Bumped whenever `aborted` changes (the file is rewritten when it is behind).
    aborted_gen: u64,
}

impl TxnState {
    /// The epoch of `pid`'s open transaction here, if any.
    pub(crate) fn epoch_of(&self, pid: i64) -> Option<i16> {
        self.ongoing.get(&pid).map(|o| o.epoch)
    }

    /// `begin_transaction`: `known_epoch` is the newest epoch the partition knows for `pid`
    /// elsewhere (its idempotent-producer state).
    pub(crate) fn begin(
        &mut self,
        pid: i64,
        epoch: i16,
        known_epoch: Option<i16>,
    ) -> Result<(), TxnRefusal> {
        let current = known_epoch.max(self.epoch_of(pid));
        if let Some(current) = current.filter(|&c| epoch < c) {
            return Err(TxnRefusal::Fenced { current });
        }
        match self.ongoing.get_mut(&pid) {
            // Same epoch: already begun. A newer one (the producer was bumped without a
            // marker here): its earlier batches stay open until a marker ends them.
            Some(o) => o.epoch = epoch,
            None => {
                if self.ongoing.len() >= MAX_ONGOING_TXNS_PER_PARTITION {
                    return Err(TxnRefusal::TooMany);
                }
                self.ongoing.insert(
                    pid,
                    Ongoing {
                        epoch,
                        first_offset: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// May transactional data batch `h` be appended (its producer began a transaction here at
    /// the batch's epoch)?
    pub(crate) fn check_data(&self, h: &BatchHeader) -> Result<(), TxnRefusal> {
        match self.ongoing.get(&h.producer_id) {
            Some(o) if o.epoch == h.producer_epoch => Ok(()),
            _ => Err(TxnRefusal::NotBegun),
        }
    }

    /// Records an admitted transactional data batch at `base_offset` (checked first).
    pub(crate) fn record_data(&mut self, h: &BatchHeader, base_offset: u64) {
        let o = self.ongoing.entry(h.producer_id).or_insert(Ongoing {
            epoch: h.producer_epoch,
            first_offset: None,
        });
        o.first_offset.get_or_insert(base_offset);
    }

    /// Ends `pid`'s transaction with a marker at `marker_offset` (admitted). Returns whether
    /// an aborted transaction was added to the index.
    pub(crate) fn end(
        &mut self,
        pid: i64,
        kind: MarkerKind,
        marker_offset: u64,
        high_watermark: u64,
    ) -> bool {
        self.prune_ending(high_watermark);
        let Some(first) = self.ongoing.remove(&pid).and_then(|o| o.first_offset) else {
            return false;
        };
        self.ending.push(Ending {
            first_offset: first,
            marker_offset,
        });
        if kind == MarkerKind::Commit {
            return false;
        }
        self.push_aborted(AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: marker_offset,
        });
        true
    }

    fn push_aborted(&mut self, a: AbortedTxn) {
        debug_assert!(self
            .aborted
            .last()
            .is_none_or(|l| l.last_offset <= a.last_offset));
        self.aborted.push(a);
        if self.aborted.len() > MAX_ABORTED_TXNS_PER_PARTITION {
            let gone = self.aborted.remove(0);
            tracing::warn!(
                producer_id = gone.producer_id,
                first = gone.first_offset,
                last = gone.last_offset,
                limit = MAX_ABORTED_TXNS_PER_PARTITION,
                "aborted-transaction index full; forgetting its oldest entry"
            );
        }
        self.aborted_gen += 1;
    }

    /// Forgets ending transactions whose marker is durable.
    pub(crate) fn prune_ending(&mut self, high_watermark: u64) {
        self.ending.retain(|e| e.marker_offset >= high_watermark);
    }

    /// min(high watermark, first offset of the oldest open transaction here).
    pub(crate) fn last_stable_offset(&self, high_watermark: u64) -> u64 {
        let open = self.ongoing.values().filter_map(|o| o.first_offset);
        let ending = self
            .ending
            .iter()
            .filter(|e| e.marker_offset >= high_watermark)
            .map(|e| e.first_offset);
        open.chain(ending).fold(high_watermark, u64::min)
    }

    /// The aborted transactions overlapping `from..to`, oldest first.
    pub(crate) fn aborted_between(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted[start..]
            .iter()
            .filter(|a| a.first_offset < to)
            .copied()
            .collect()
    }

    pub(crate) fn aborted(&self) -> &[AbortedTxn] {
        &self.aborted
    }

    pub(crate) fn aborted_gen(&self) -> u64 {
        self.aborted_gen
    }

    /// (pid, epoch, first offset) of each transaction with a batch here, oldest first.
    pub(crate) fn ongoing(&self) -> Vec<(i64, i16, u64)> {
        let mut out: Vec<(i64, i16, u64)> = self
            .ongoing
            .iter()
            .filter_map(|(pid, o)| o.first_offset.map(|f| (*pid, o.epoch, f)))
            .collect();
        out.sort_by_key(|&(pid, _, first)| (first, pid));
        out
    }

    /// Drops aborted entries whose marker is at or after `log_end` (a follower's log was cut
    /// there). Returns whether any went.
    pub(crate) fn drop_from(&mut self, log_end: u64) -> bool {
        let before = self.aborted.len();
        self.aborted.retain(|a| a.last_offset < log_end);
        if self.aborted.len() == before {
            return false;
        }
        self.aborted_gen += 1;
        true
    }

    /// A follower's copy of stored batch `h` (issue #18): a transactional batch opens its
    /// producer's transaction here, an end marker ends it (an abort goes into the index).
    /// Returns whether an aborted transaction was added.
    pub(crate) fn follow(&mut self, h: &BatchHeader, bytes: &[u8]) -> bool {
        if !h.is_transactional() || h.producer_id < 0 {
            return false;
        }
        let base = h.base_offset as u64;
        if !h.is_control() {
            let o = self.ongoing.entry(h.producer_id).or_insert(Ongoing {
                epoch: h.producer_epoch,
                first_offset: None,
            });
            o.epoch = o.epoch.max(h.producer_epoch);
            o.first_offset.get_or_insert(base);
            return false;
        }
        match marker_of(bytes) {
            Some(kind) => self.end(h.producer_id, kind, base, base),
            None => false,
        }
    }

    /// Drops aborted entries wholly below `log_start` (retention). Returns whether any went.
    pub(crate) fn drop_below(&mut self, log_start: u64) -> bool {
        let n = self.aborted.partition_point(|a| a.last_offset < log_start);
        if n == 0 {
            return false;
        }
        self.aborted.drain(..n);
        self.aborted_gen += 1;
        true
    }

    /// Merges the entries of the index file into the ones the window scan found; the file's
    /// entry wins for the same (producer, marker offset) (its first offset is exact, the
    /// scan's may be cut by the window). Returns whether the scan found entries the file
    /// lacked (the file must be rewritten).
    pub(crate) fn merge_file_entries(&mut self, file: Vec<AbortedTxn>) -> bool {
        let in_file: HashSet<(i64, u64)> = file
            .iter()
            .map(|a| (a.producer_id, a.last_offset))
            .collect();
        let mut added = false;
        let mut all = file;
        for a in self.aborted.drain(..) {
            if !in_file.contains(&(a.producer_id, a.last_offset)) {
                added = true;
                all.push(a);
            }
        }
        all.sort_by_key(|a| (a.last_offset, a.producer_id));
        all.dedup_by_key(|a| (a.producer_id, a.last_offset));
        if all.len() > MAX_ABORTED_TXNS_PER_PARTITION {
            let extra = all.len() - MAX_ABORTED_TXNS_PER_PARTITION;
            all.drain(..extra);
            added = true;
        }
        self.aborted = all;
        self.aborted_gen += 1;
        added
    }
}

/// Rebuilds transaction state while `producer_state::rebuild` walks the log tail once.
pub(crate) struct TxnRebuild {
    state: TxnState,
    /// The offset after each producer's last marker in the window.
    after_marker: HashMap<i64, u64>,
    window_from: u64,
}

impl TxnRebuild {
    pub(crate) fn new(window_from: u64) -> Self {
        Self {
            state: TxnState::default(),
            after_marker: HashMap::new(),
            window_from,
        }
    }

    /// One stored batch in log order; returns the marker (producer id, epoch) it is, if any,
    /// for the producer state.
    pub(crate) fn batch(&mut self, h: &BatchHeader, bytes: &[u8]) -> Option<(i64, i16)> {
        if !h.is_transactional() || h.producer_id < 0 {
            return None;
        }
        let base = h.base_offset as u64;
        if !h.is_control() {
            // An open transaction found in the log counts as begun: its producer may go on.
            let o = self.state.ongoing.entry(h.producer_id).or_insert(Ongoing {
                epoch: h.producer_epoch,
                first_offset: None,
            });
            o.epoch = o.epoch.max(h.producer_epoch);
            o.first_offset.get_or_insert(base);
            return None;
        }
        let kind = marker_of(bytes)?;
        let first = self
            .state
            .ongoing
            .remove(&h.producer_id)
            .and_then(|o| o.first_offset);
        if kind == MarkerKind::Abort {
            // A transaction whose batches came before the window: the file has its exact
            // first offset; this one covers only what the window holds of it.
            let first = first.unwrap_or_else(|| {
                self.after_marker
                    .get(&h.producer_id)
                    .copied()
                    .unwrap_or(self.window_from)
            });
            self.state.aborted.push(AbortedTxn {
                producer_id: h.producer_id,
                first_offset: first,
                last_offset: base,
            });
        }
        self.after_marker.insert(h.producer_id, base + 1);
        Some((h.producer_id, h.producer_epoch))
    }

    pub(crate) fn finish(self) -> TxnState {
        self.state
    }
}

/// `aborted.txnindex` (`checked_file`'s frame): "RLAT" | version u16 (1) | count u32 | count ×
/// (producer id i64 | first offset u64 | last offset u64) | CRC-32C u32; big-endian.
pub fn encode_aborted_file(entries: &[AbortedTxn]) -> Vec<u8> {
    let mut body =
        Vec::with_capacity(ABORTED_FILE_COUNT_BYTES + entries.len() * ABORTED_FILE_ENTRY_BYTES);
    body.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for a in entries {
        body.extend_from_slice(&a.producer_id.to_be_bytes());
        body.extend_from_slice(&a.first_offset.to_be_bytes());
        body.extend_from_slice(&a.last_offset.to_be_bytes());
    }
    crate::checked_file::frame(ABORTED_FILE_MAGIC, ABORTED_FILE_VERSION, &body)
}

/// Reads `aborted.txnindex` bytes; `Err` says why they are not a valid file.
pub fn decode_aborted_file(b: &[u8]) -> Result<Vec<AbortedTxn>, String> {
    let body = crate::checked_file::unframe(ABORTED_FILE_MAGIC, ABORTED_FILE_VERSION, b)?;
    if body.len() < ABORTED_FILE_COUNT_BYTES {
        return Err(format!("a body of {} bytes has no count", body.len()));
    }
    let (count, rest) = body.split_at(ABORTED_FILE_COUNT_BYTES);
    let count = u32::from_be_bytes(count.try_into().expect("4 bytes")) as usize;
    if rest.len() != count.saturating_mul(ABORTED_FILE_ENTRY_BYTES) {
        return Err(format!(
            "{count} entries declared, {} bytes hold them",
            rest.len()
        ));
    }
    let u64_at = |c: &[u8], i: usize| u64::from_be_bytes(c[i..i + 8].try_into().expect("8"));
    Ok(rest
        .chunks_exact(ABORTED_FILE_ENTRY_BYTES)
        .map(|c| AbortedTxn {
            producer_id: u64_at(c, 0) as i64,
            first_offset: u64_at(c, 8),
            last_offset: u64_at(c, 16),
        })
        .collect())
}

/// The aborted ranges by producer, for the cleaner: a transactional batch inside one is
/// aborted (its records must not shadow a committed record's key).
pub struct AbortedRanges {
    by_producer: HashMap<i64, Vec<(u64, u64)>>,
}

impl AbortedRanges {
    pub fn new(aborted: &[AbortedTxn]) -> Self {
        let mut by_producer: HashMap<i64, Vec<(u64, u64)>> = HashMap::new();
        for a in aborted {
            by_producer
                .entry(a.producer_id)
                .or_default()
                .push((a.first_offset, a.last_offset));
        }
        Self { by_producer }
    }

    /// Whether transactional batch `h` belongs to an aborted transaction.
    pub fn contains(&self, h: &BatchHeader) -> bool {
        if !h.is_transactional() || h.is_control() {
            return false;
        }
        let base = h.base_offset as u64;
        self.by_producer.get(&h.producer_id).is_some_and(|ranges| {
            // Ranges of one producer are ordered by marker offset and do not overlap.
            let i = ranges.partition_point(|&(_, last)| last < base);
            ranges.get(i).is_some_and(|&(first, _)| first <= base)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip() {
        for kind in [MarkerKind::Abort, MarkerKind::Commit] {
            let b = encode_marker(42, 3, kind, 7, 1_000);
            let h = batch::validate(&b).expect("a valid batch");
            assert!(h.is_control() && h.is_transactional());
            assert_eq!(
                (
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.records_count
                ),
                (42, 3, -1, 1)
            );
            assert_eq!(h.base_timestamp, 1_000);
            assert_eq!(marker_of(&b), Some(kind));
        }
        let data = crate::batch_encode::encode_uncompressed([Default::default()]);
        assert_eq!(marker_of(&data), None);
    }

    #[test]
    fn aborted_file_round_trips_and_refuses_damage() {
        let e = vec![
            AbortedTxn {
                producer_id: 1,
                first_offset: 5,
                last_offset: 9,
            },
            AbortedTxn {
                producer_id: -2,
                first_offset: u64::MAX - 1,
                last_offset: u64::MAX,
            },
        ];
        let b = encode_aborted_file(&e);
        assert_eq!(decode_aborted_file(&b).unwrap(), e);
        assert_eq!(
            decode_aborted_file(&encode_aborted_file(&[])).unwrap(),
            vec![]
        );
        let mut bad = b.clone();
        bad[12] ^= 1;
        assert!(decode_aborted_file(&bad).is_err());
        assert!(decode_aborted_file(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn state_lso_and_aborted_ranges() {
        let h = |pid: i64, epoch: i16, base: i64| BatchHeader {
            base_offset: base,
            size_bytes: 100,
            attributes: 0x10,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: 0,
            records_count: 1,
        };
        let mut s = TxnState::default();
        assert_eq!(s.check_data(&h(1, 0, 0)), Err(TxnRefusal::NotBegun));
        s.begin(1, 0, None).unwrap();
        s.begin(1, 0, None).unwrap();
        assert_eq!(s.check_data(&h(1, 1, 0)), Err(TxnRefusal::NotBegun));
        s.check_data(&h(1, 0, 3)).unwrap();
        s.record_data(&h(1, 0, 3), 3);
        s.record_data(&h(1, 0, 5), 5);
        assert_eq!(s.last_stable_offset(10), 3);
        assert_eq!(s.ongoing(), vec![(1, 0, 3)]);
        assert!(s.end(1, MarkerKind::Abort, 10, 10));
        // The marker is not durable yet: the LSO stays until the high watermark passes it.
        assert_eq!(s.last_stable_offset(10), 3);
        assert_eq!(s.last_stable_offset(11), 11);
        assert_eq!(s.aborted_between(0, 4).len(), 1);
        assert_eq!(s.aborted_between(11, 20).len(), 0);
        assert_eq!(s.aborted_between(0, 3).len(), 0);
        assert_eq!(
            s.begin(1, 0, Some(2)),
            Err(TxnRefusal::Fenced { current: 2 })
        );
        let r = AbortedRanges::new(s.aborted());
        assert!(r.contains(&h(1, 0, 5)) && !r.contains(&h(1, 0, 11)) && !r.contains(&h(2, 0, 5)));
    }
}
