//! Barrier-aligned stream processing over any Kafka broker that implements KFC-4 (seed 003):
//! a client library that speaks only the Kafka protocol (librdkafka through `rdkafka`) and
//! depends on no broker crate.
//!
//! - [`decode_barrier_cut`]: one `__barrier_state` record → a cut (`None` for a group
//!   record, an injection-start record or a tombstone), [`BarrierFormatError`] for bad bytes.
//! - [`CutReader`]: reads `__barrier_state` with a plain assign / seek / poll loop and keeps
//!   every cut it decoded; never hands out a partial cut.
//! - [`StateStore`], [`FileStateStore`]: per-partition snapshots keyed by epoch, in the
//!   container krabka's runners share ([`NO_EPOCH`] for rebalance snapshots).
//! - [`GroupRunner`]: a consumer-group member running a [`Topology`], aligned on a barrier
//!   group's cuts (`align`), snapshotting each task at the barrier and committing the cut;
//!   [`GroupRunner::run_once_transactional`] puts a whole epoch in one producer transaction.

mod align;
mod cut_reader;
mod runner;
mod state_store;
mod topology;

pub use cut_reader::{CutReader, CutReaderError};
pub use kfc4::{
    CutStatus, FormatError as BarrierFormatError, BARRIER_STATE_PARTITIONS, BARRIER_STATE_TOPIC,
};
pub use runner::{
    Barrier, ConsumerPositions, GroupRunner, OutputContext, PositionReader, Round, RunnerError,
    CLIENT_CALL_TIMEOUT_MS, DEFAULT_COMMIT_INTERVAL_MS, DEFAULT_MAX_HELD_BYTES,
    DEFAULT_MAX_ROUND_RECORDS, DEFAULT_ROUND_POLL_MS, EPOCH_METADATA_PREFIX, RESERVED_NAME_PREFIX,
};
pub use state_store::{
    FileStateStore, StateStore, StateStoreError, DEFAULT_RETAINED_EPOCHS, NO_EPOCH,
};
pub use topology::{Output, Record, Topology};

use std::collections::BTreeMap;

/// A topic and one of its partitions.
pub type TopicPartition = (String, i32);

/// A published cut of one barrier group: every partition's cut offset (its marker's offset:
/// "everything before the cut" is "offset below the cut offset"), and the partitions that
/// took no marker (a partial cut's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BarrierCut {
    pub group: String,
    pub epoch: i64,
    pub triggered_at_ms: i64,
    pub completed_at_ms: i64,
    pub status: CutStatus,
    /// (topic, partition) → cut offset.
    pub offsets: BTreeMap<TopicPartition, i64>,
    pub missing: Vec<TopicPartition>,
}

impl BarrierCut {
    /// Only a complete cut can be aligned on: a missing partition never gets its marker.
    pub fn is_complete(&self) -> bool {
        self.status == CutStatus::Complete
    }
}

/// Decodes one record of `__barrier_state` on its own (a tool reading the topic outside a
/// runner): the cut it publishes, `None` for a group record, an injection-start record and a
/// tombstone (`value` None), an error for malformed bytes.
pub fn decode_barrier_cut(
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<Option<BarrierCut>, BarrierFormatError> {
    match kfc4::decode_record(key, value)? {
        kfc4::StateRecord::Cut {
            group,
            cut: Some(c),
            ..
        } => Ok(Some(cut_of(group, c))),
        _ => Ok(None),
    }
}

fn cut_of(group: String, c: kfc4::Cut) -> BarrierCut {
    BarrierCut {
        group,
        epoch: c.epoch,
        triggered_at_ms: c.triggered_at_ms,
        completed_at_ms: c.completed_at_ms,
        status: c.status,
        offsets: c
            .offsets
            .into_iter()
            .flat_map(|(t, ps)| ps.into_iter().map(move |(p, o)| ((t.clone(), p), o)))
            .collect(),
        missing: c.missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_golden_vector_decodes_to_its_cut() {
        let key = hex("00000002000a6f72646572732d6375740000000000000007");
        let value = hex("0000000001918435bd00000001918435bd2a000000000100066f72646572730000000200000000000000000000040000000001000000000000080000000000");
        let cut = decode_barrier_cut(&key, Some(&value)).unwrap().unwrap();
        assert_eq!(cut.group, "orders-cut");
        assert_eq!(cut.epoch, 7);
        assert_eq!(
            (cut.triggered_at_ms, cut.completed_at_ms),
            (1724500000000, 1724500000042)
        );
        assert!(cut.is_complete());
        assert_eq!(
            cut.offsets,
            BTreeMap::from([(("orders".into(), 0), 1024), (("orders".into(), 1), 2048)])
        );
        assert!(cut.missing.is_empty());
        // A tombstone of the same key, a group record and an injection-start: no cut.
        assert_eq!(decode_barrier_cut(&key, None).unwrap(), None);
        let group_key = kfc4::encode_key(&kfc4::StateKey::group("orders-cut"));
        let group_value = kfc4::encode_group_value(&kfc4::GroupValue {
            topics: vec!["orders".into()],
            interval_ms: Some(1000),
            retained_cuts: 3,
            last_epoch: 7,
        });
        assert_eq!(
            decode_barrier_cut(&group_key, Some(&group_value)).unwrap(),
            None
        );
        let start_key = kfc4::encode_key(&kfc4::StateKey::injection_start("orders-cut", 8));
        let start = kfc4::encode_injection_start(&kfc4::InjectionStart {
            coordinator_epoch: 0,
            triggered_at_ms: 1,
            targets: vec![("orders".into(), 2)],
        });
        assert_eq!(decode_barrier_cut(&start_key, Some(&start)).unwrap(), None);
        // Malformed bytes: a typed error naming where.
        let e = decode_barrier_cut(&key, Some(&value[..10])).unwrap_err();
        assert_eq!(e.what, "cut value");
    }
}
