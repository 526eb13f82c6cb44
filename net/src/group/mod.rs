//! Consumer-group coordination on one core: the groups this core owns (their membership state
//! machines and committed offsets) and the internal `__consumer_offsets` log that makes the
//! offsets durable.
//!
//! A group belongs to partition `crc32c(group id) % P` of `__consumer_offsets` and is served by
//! the core that owns that partition, so committing is a local append. Records (our own
//! layout, big-endian, in ordinary v2 batches):
//! key   `version i16 = 0 | group str16 | topic str16 | partition i32`
//! value `version i16 = 0 | offset i64 | leader_epoch i32 | metadata nullable str16 | commit_ms i64`
//! A null value (tombstone) forgets the offset. Replayed in order when the partition opens.

pub mod consumer;
pub mod migration;
pub mod state;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use engine::batch::BatchHeader;
use engine::txn::MarkerKind;

use crate::coordinator::CoordinatorState;

pub use state::{Group, GroupState};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's `offset.metadata.max.bytes`.
pub const MAX_OFFSET_METADATA_BYTES: usize = 4096;
/// How often each core drives its groups' timers (sessions, rebalance deadlines).
pub const GROUP_TICK_MS: u64 = 100;
/// Groups one core coordinates at once; a new group past it is refused
/// (GROUP_MAX_SIZE_REACHED). Empty groups with no offsets are forgotten by the tick.
pub const MAX_GROUPS_PER_CORE: usize = 100_000;
/// Longest group id accepted (INVALID_GROUP_ID past it).
pub const MAX_GROUP_ID_BYTES: usize = 1_024;
/// Partitions one producer's open transaction may hold offsets for in one group.
pub const MAX_PENDING_TXN_OFFSETS_PER_PRODUCER: usize = 100_000;
/// Kafka's `group.initial.rebalance.delay.ms` default.
pub const DEFAULT_INITIAL_REBALANCE_DELAY_MS: u64 = 3_000;
const RECORD_VERSION: i16 = 0;

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub commit_ms: i64,
}

/// One group on its coordinator core.
pub struct GroupEntry {
    pub group: Group,
    pub offsets: BTreeMap<(String, i32), Committed>,
    /// Partition of `__consumer_offsets` holding this group's records.
    pub partition: u32,
    /// Wall-clock ms since which the group has had no members (`None` while it has some):
    /// its offsets expire `offsets-retention-ms` after the later of this and their commit.
    pub vacant_since_ms: Option<i64>,
    /// Offsets committed inside open transactions (TxnOffsetCommit), per producer id: they
    /// become committed offsets when the producer's commit marker reaches this group's
    /// `__consumer_offsets` partition, and are dropped at its abort marker. At most one open
    /// transaction per producer, each bounded by `MAX_PENDING_TXN_OFFSETS_PER_PRODUCER`.
    pub pending_txn: BTreeMap<i64, BTreeMap<(String, i32), Committed>>,
    /// The group's KIP-848 membership while it has consumer-protocol members (`None`: a
    /// classic group, or one with no members). A group has members of one protocol at a time.
    pub consumer: Option<consumer::ConsumerGroup>,
}

impl GroupEntry {
    pub fn new(id: &str, partition: u32, initial_rebalance_delay: Duration) -> Self {
        Self {
            group: Group::new(id, initial_rebalance_delay),
            offsets: BTreeMap::new(),
            partition,
            vacant_since_ms: None,
            pending_txn: BTreeMap::new(),
            consumer: None,
        }
    }

    /// Whether the group has members, of either protocol.
    pub fn has_members(&self) -> bool {
        !self.group.members.is_empty() || self.consumer.as_ref().is_some_and(|c| !c.is_empty())
    }

    /// No members, no member ids handed out: nothing to coordinate (offsets aside).
    pub fn is_vacant(&self) -> bool {
        self.group.is_vacant() && self.consumer.as_ref().is_none_or(|c| c.is_empty())
    }

    /// Whether `member_id` at `generation` (a member epoch for a consumer-protocol group) may
    /// commit offsets of `partitions`: the classic rules, or KIP-848's
    /// (`consumer::ConsumerGroup::check_commit`). A commit with no member and no generation is
    /// taken while the group has no members.
    pub fn check_commit<'a>(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        partitions: impl Iterator<Item = (&'a str, i32)>,
    ) -> Result<(), i16> {
        match self.consumer.as_ref().filter(|c| !c.is_empty()) {
            Some(c) => c.check_commit(member_id, generation, partitions),
            None => self.group.check_commit(member_id, instance_id, generation),
        }
    }

    /// Holds `offset` for `topic`/`partition` in producer `producer_id`'s open transaction
    /// (the newest per partition wins). Past `MAX_PENDING_TXN_OFFSETS_PER_PRODUCER` partitions
    /// the offset is not held (the commit then keeps the earlier ones) and `false` is returned.
    pub fn add_pending_txn_offset(
        &mut self,
        producer_id: i64,
        topic: String,
        partition: i32,
        offset: Committed,
    ) -> bool {
        let pending = self.pending_txn.entry(producer_id).or_default();
        let key = (topic, partition);
        if !pending.contains_key(&key) && pending.len() >= MAX_PENDING_TXN_OFFSETS_PER_PRODUCER {
            return false;
        }
        pending.insert(key, offset);
        true
    }

    /// How many offsets producer `producer_id`'s open transaction would hold here with
    /// `keys` added (TxnOffsetCommit checks `MAX_PENDING_TXN_OFFSETS_PER_PRODUCER` first).
    pub fn pending_txn_offsets_after<'a>(
        &self,
        producer_id: i64,
        keys: impl Iterator<Item = (&'a str, i32)>,
    ) -> usize {
        let pending = self.pending_txn.get(&producer_id);
        let held = pending.map_or(0, |m| m.len());
        let new: std::collections::BTreeSet<(&str, i32)> = keys
            .filter(|(t, p)| !pending.is_some_and(|m| m.contains_key(&(t.to_string(), *p))))
            .collect();
        held + new.len()
    }

    /// A marker of `producer_id` reached this group's partition: its pending offsets become
    /// committed (`commit`) or are dropped.
    pub fn complete_txn(&mut self, producer_id: i64, commit: bool) {
        if let Some(pending) = self.pending_txn.remove(&producer_id) {
            if commit {
                self.offsets.extend(pending);
            }
        }
    }

    /// Whether an open transaction holds an offset for `topic`/`partition` (OffsetFetch with
    /// require_stable answers UNSTABLE_OFFSET_COMMIT then, KIP-447).
    pub fn has_pending_txn_offset(&self, topic: &str, partition: i32) -> bool {
        self.pending_txn
            .values()
            .any(|m| m.contains_key(&(topic.to_string(), partition)))
    }

    /// The offsets expired at `now_ms` under `retention_ms` (Kafka's
    /// `offsets.retention.minutes`, KIP-211): none while the group has members; once it has
    /// none, each offset `retention_ms` after the later of its commit and the moment the group
    /// emptied.
    pub fn expired_offsets(&self, now_ms: i64, retention_ms: i64) -> Vec<(String, i32)> {
        let Some(vacant) = self.vacant_since_ms else {
            return Vec::new();
        };
        self.offsets
            .iter()
            .filter(|(_, c)| c.commit_ms.max(vacant).saturating_add(retention_ms) < now_ms)
            .map(|(k, _)| k.clone())
            .collect()
    }
}

pub type Groups = HashMap<String, GroupEntry>;

/// The partition of `__consumer_offsets` that holds `group`.
pub fn offsets_partition(group: &str, partitions: u32) -> u32 {
    assert!(partitions > 0);
    crc32c::crc32c(group.as_bytes()) % partitions
}

pub(crate) fn put_str16(b: &mut BytesMut, s: Option<&str>) {
    match s {
        None => b.put_i16(-1),
        Some(s) => {
            let s = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
            b.put_i16(s.len() as i16);
            b.put_slice(s);
        }
    }
}

pub(crate) fn get_str16(b: &mut Bytes) -> Option<Option<String>> {
    if b.remaining() < 2 {
        return None;
    }
    let len = b.get_i16();
    if len < 0 {
        return Some(None);
    }
    let len = len as usize;
    if b.remaining() < len {
        return None;
    }
    let s = b.split_to(len);
    Some(Some(String::from_utf8_lossy(&s).into_owned()))
}

pub fn encode_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut b = BytesMut::with_capacity(8 + group.len() + topic.len());
    b.put_i16(RECORD_VERSION);
    put_str16(&mut b, Some(group));
    put_str16(&mut b, Some(topic));
    b.put_i32(partition);
    b.freeze()
}

pub fn encode_value(c: &Committed) -> Bytes {
    let mut b = BytesMut::with_capacity(32);
    b.put_i16(RECORD_VERSION);
    b.put_i64(c.offset);
    b.put_i32(c.leader_epoch);
    put_str16(&mut b, c.metadata.as_deref());
    b.put_i64(c.commit_ms);
    b.freeze()
}

pub fn decode_key(mut b: Bytes) -> Option<(String, String, i32)> {
    if b.remaining() < 2 || b.get_i16() != RECORD_VERSION {
        return None;
    }
    let group = get_str16(&mut b)??;
    let topic = get_str16(&mut b)??;
    (b.remaining() >= 4).then(|| (group, topic, b.get_i32()))
}

pub fn decode_value(mut b: Bytes) -> Option<Committed> {
    if b.remaining() < 14 || b.get_i16() != RECORD_VERSION {
        return None;
    }
    let offset = b.get_i64();
    let leader_epoch = b.get_i32();
    let metadata = get_str16(&mut b)?;
    (b.remaining() >= 8).then(|| Committed {
        offset,
        leader_epoch,
        metadata,
        commit_ms: b.get_i64(),
    })
}

impl CoordinatorState for Groups {
    const TOPIC: &'static str = OFFSETS_TOPIC;
    const WHAT: &'static str = "committed offsets";
    /// The initial rebalance delay of a group the records create.
    type ReplayArgs = Duration;

    fn apply_record(
        &mut self,
        initial_rebalance_delay: Duration,
        partition: u32,
        header: &BatchHeader,
        key: Option<Bytes>,
        value: Option<Bytes>,
    ) -> bool {
        let Some((group, topic, part)) = key.and_then(decode_key) else {
            return false;
        };
        let entry = self
            .entry(group.clone())
            .or_insert_with(|| GroupEntry::new(&group, partition, initial_rebalance_delay));
        match value.and_then(decode_value) {
            Some(c) if header.is_transactional() => {
                entry.add_pending_txn_offset(header.producer_id, topic, part, c);
            }
            Some(c) => {
                entry.offsets.insert((topic, part), c);
            }
            None => {
                entry.offsets.remove(&(topic, part));
            }
        }
        true
    }

    /// A transaction's marker: its producer's pending offsets in this partition's groups are
    /// committed or dropped, as when it was written.
    fn apply_marker(&mut self, partition: u32, header: &BatchHeader, marker: MarkerKind) {
        let commit = marker == MarkerKind::Commit;
        for g in self.values_mut().filter(|g| g.partition == partition) {
            g.complete_txn(header.producer_id, commit);
        }
    }

    fn unload(&mut self, partition: u32) {
        self.retain(|_, g| g.partition != partition);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_a_batch() {
        let c = Committed {
            offset: 42,
            leader_epoch: 0,
            metadata: Some("m".into()),
            commit_ms: 7,
        };
        let rec = |k, v: Option<Bytes>| engine::batch_encode::NewRecord {
            key: Some(k),
            value: v,
            timestamp_ms: 1,
            ..Default::default()
        };
        let batch = engine::batch_encode::encode_uncompressed([
            rec(encode_key("g", "t", 1), Some(encode_value(&c))),
            rec(encode_key("g", "t", 2), Some(encode_value(&c))),
            rec(encode_key("g", "t", 2), None),
        ]);
        engine::batch::validate(&batch).expect("a valid v2 batch");
        let mut groups = Groups::new();
        assert_eq!(
            crate::coordinator::replay_batches(&mut groups, Duration::ZERO, &batch, 0),
            3
        );
        let g = &groups["g"];
        assert_eq!(g.offsets.get(&("t".into(), 1)), Some(&c));
        assert_eq!(g.offsets.get(&("t".into(), 2)), None, "tombstone forgets");
        assert!(offsets_partition("g", 4) < 4);
    }
}
