//! What a runner runs: a [`Topology`] of per-partition processors over co-partitioned input
//! topics (partition P of every input topic is task P), with state it can snapshot and
//! restore per partition (seed 003's `BuiltTopology`).

use std::collections::BTreeMap;

/// One input record handed to [`Topology::process`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The record's timestamp (ms since the epoch), when it has one.
    pub timestamp_ms: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

impl Record {
    /// The record's approximate size in memory, for the runner's bound on waiting records.
    pub(crate) fn size_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.topic.len()
            + self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
    }
}

/// One record a processor emits; the runner produces it (in the round's transaction when the
/// round is transactional).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub topic: String,
    /// `None`: the producer's partitioner picks (by key).
    pub partition: Option<i32>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// The processors a [`crate::GroupRunner`] runs. State is kept per input partition number
/// (the task), so that a task's state can move with its partitions in a rebalance and be
/// snapshotted at a barrier.
///
/// For two replays from one cut to give the same state, `process` must be deterministic in
/// the records it is given (the set of records before a cut is exact; the interleaving of
/// different input partitions of one task follows arrival).
pub trait Topology {
    /// The topics the runner subscribes to; they must have the same partition count.
    fn input_topics(&self) -> Vec<String>;
    /// Runs one record of task `record.partition`, pushing what it emits to `out`.
    fn process(&mut self, record: &Record, out: &mut Vec<Output>);
    /// Task `partition`'s state as name/value pairs (the snapshot container's entries).
    /// Names starting with [`crate::RESERVED_NAME_PREFIX`] are the runner's.
    fn snapshot_partition(&self, partition: i32) -> BTreeMap<String, Vec<u8>>;
    /// Replaces task `partition`'s state with `snapshot` (empty: a fresh task, which is also
    /// how a revoked task's state is dropped).
    fn restore_partition(&mut self, partition: i32, snapshot: BTreeMap<String, Vec<u8>>);
}
