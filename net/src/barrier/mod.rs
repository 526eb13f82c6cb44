//! Barrier cuts (byte-compatible with krabka's KFC-4): the state one core keeps for the
//! barrier groups it coordinates. The formats (`format`: the `__barrier_state` records, the
//! marker a cut leaves in every partition, the snapshot container) and the codec of the five
//! barrier admin APIs (`kfc4::wire`: keys 1010–1014, which the kafka-protocol crate has no
//! schemas for) live in the `kfc4` crate, which the CLI and the streams client share.
//!
//! A group belongs to partition `murmur2(group) % 50` of the compacted `__barrier_state` and
//! is coordinated by the core that owns that partition, like a consumer group and
//! `__consumer_offsets`. The coordinator's work (injection, the interval tick, finishing an
//! injection a crash interrupted) is in `crate::coordinators::barrier`. What a coordinator knows comes
//! from its partition's records, replayed when the partition opens:
//! - a group record (kind 0): the definition as last written there, with the epoch of its last
//!   published cut (the metastore holds the definition itself; the record is for readers of
//!   `__barrier_state`, and keeps the epoch); its tombstone ends the group, cuts and all;
//! - an injection-start record (kind 1): epoch E allocated, its frozen targets; written before
//!   any marker, tombstoned in the same batch as E's cut;
//! - a cut record (kind 2): the published cut of epoch E, written in one batch with the group
//!   record (its `last_epoch` E), and the tombstones of E's injection-start and of the cuts
//!   past `retained_cuts` (the newest is never one of them: epochs never repeat).
//!
//! A data directory of an earlier ringlog build holds group and injection-start values in
//! that build's layout: replay reads them (`format::legacy`), and the coordinator rewrites the
//! group record in KFC-4's layout at its next tick.

/// The record formats (`__barrier_state`, markers, snapshots): the `kfc4` crate, shared with
/// the streams client.
pub use kfc4 as format;

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use format::{Cut, GroupValue, InjectionStart, StateRecord};

use crate::coordinator::CoordinatorState;

/// How often each core looks for barrier groups due for an injection (their `interval_ms`)
/// and for injections a crash interrupted.
pub const BARRIER_TICK_MS: u64 = 100;
/// Kafka-style default of `barrier-injection-timeout-ms`: how long an injection retries the
/// markers of partitions that refuse before it publishes the cut as partial.
pub const DEFAULT_BARRIER_INJECTION_TIMEOUT_MS: u64 = 30_000;
/// The first wait before a refused marker is tried again; it doubles up to
/// `MARKER_RETRY_MAX_BACKOFF_MS`.
pub const MARKER_RETRY_FIRST_BACKOFF_MS: u64 = 50;
pub const MARKER_RETRY_MAX_BACKOFF_MS: u64 = 2_000;
/// How far past a target's frozen start offset the finishing of an interrupted injection
/// looks for its marker, in bytes of log per partition (a marker not found within it counts
/// as missing).
pub const MARKER_SCAN_MAX_BYTES: u64 = 256 << 20;
/// Cuts one ListBarrierCuts answer carries at most (the oldest first from `min_epoch`).
pub const MAX_CUTS_PER_LIST: usize = 1_000;

/// One barrier group as its coordinator core knows it.
#[derive(Debug, Default)]
pub struct GroupState {
    /// The group's partition of `__barrier_state`.
    pub partition: u32,
    /// The highest epoch allocated (an injection-start or a cut on record), 0 for none.
    pub last_epoch: i64,
    /// Published cuts still retained, by epoch.
    pub cuts: BTreeMap<i64, Cut>,
    /// Injection-start records with no cut yet: an injection under way, or one a crash
    /// interrupted (finished as partial by the tick when none is under way).
    pub started: BTreeMap<i64, InjectionStart>,
    /// The epoch being injected by this process now (in memory only).
    pub injecting: Option<i64>,
    /// The group record as last written to `__barrier_state` (None: none, or a tombstone).
    pub record: Option<GroupValue>,
    /// Whether that record is in an earlier build's layout (rewritten by the next tick).
    pub record_is_legacy: bool,
    /// When this core first knew the group (ms): a group never triggered is due by its
    /// interval from here.
    pub known_since_ms: i64,
}

impl GroupState {
    pub fn new(partition: u32) -> Self {
        Self {
            partition,
            known_since_ms: engine::clock::system_now_ms(),
            ..Default::default()
        }
    }

    /// The newest published cut.
    pub fn latest(&self) -> Option<&Cut> {
        self.cuts.values().next_back()
    }

    /// The epoch of the last published cut (complete or partial), 0 for none: the newest
    /// retained cut's, or what the group record says.
    pub fn last_published_epoch(&self) -> i64 {
        let recorded = self.record.as_ref().map_or(0, |r| r.last_epoch);
        self.latest().map_or(0, |c| c.epoch).max(recorded)
    }

    /// When the group was last triggered (ms), from its newest cut or injection.
    pub fn last_triggered_ms(&self) -> Option<i64> {
        let cut = self.latest().map(|c| c.triggered_at_ms);
        let started = self.started.values().map(|s| s.triggered_at_ms).max();
        cut.max(started)
    }

    /// Applies one replayed record of this group, read in `layout`.
    fn apply(&mut self, record: StateRecord, layout: format::legacy::Layout) {
        match record {
            StateRecord::Group {
                value: Some(value), ..
            } => {
                self.last_epoch = self.last_epoch.max(value.last_epoch);
                self.record = Some(value);
                self.record_is_legacy = layout == format::legacy::Layout::Legacy;
            }
            // The group was deleted: nothing of it is left (a group of that name defined
            // later starts again at epoch 1).
            StateRecord::Group { value: None, .. } => {
                *self = GroupState {
                    partition: self.partition,
                    known_since_ms: self.known_since_ms,
                    ..Default::default()
                }
            }
            StateRecord::InjectionStart { epoch, value, .. } => match value {
                Some(v) => {
                    self.last_epoch = self.last_epoch.max(epoch);
                    self.started.insert(epoch, v);
                }
                None => {
                    self.started.remove(&epoch);
                }
            },
            StateRecord::Cut { epoch, cut, .. } => match cut {
                Some(c) => {
                    self.last_epoch = self.last_epoch.max(epoch);
                    self.started.remove(&epoch);
                    self.cuts.insert(epoch, c);
                }
                None => {
                    self.cuts.remove(&epoch);
                }
            },
        }
    }
}

/// The barrier groups one core coordinates, by name.
pub type BarrierStates = HashMap<String, GroupState>;

impl CoordinatorState for BarrierStates {
    const TOPIC: &'static str = format::BARRIER_STATE_TOPIC;
    const WHAT: &'static str = "barrier state";
    type ReplayArgs = ();

    fn apply_record(
        &mut self,
        _: (),
        partition: u32,
        _header: &engine::batch::BatchHeader,
        key: Option<Bytes>,
        value: Option<Bytes>,
    ) -> bool {
        let Some(key) = key else { return false };
        match format::legacy::decode_record(&key, value.as_deref()) {
            Ok((record, layout)) => {
                let group = record.group().to_string();
                self.entry(group)
                    .or_insert_with(|| GroupState::new(partition))
                    .apply(record, layout);
                true
            }
            Err(e) => {
                tracing::warn!(partition, error = %e, "skipped a record of {}", format::BARRIER_STATE_TOPIC);
                false
            }
        }
    }

    fn unload(&mut self, partition: u32) {
        self.retain(|_, g| g.partition != partition);
    }
}

#[cfg(test)]
mod tests {
    use super::format::{CutStatus, RecordKind, StateKey};
    use super::*;
    use crate::coordinator::replay_batches;

    fn rec(
        kind: RecordKind,
        epoch: i64,
        value: Option<Vec<u8>>,
    ) -> engine::batch_encode::NewRecord {
        let key = format::encode_key(&StateKey {
            kind,
            group: "g".into(),
            epoch,
        });
        engine::batch_encode::NewRecord {
            key: Some(key.into()),
            value: value.map(Into::into),
            timestamp_ms: 1,
            ..Default::default()
        }
    }

    fn cut(epoch: i64) -> Cut {
        Cut {
            epoch,
            triggered_at_ms: 10 * epoch,
            completed_at_ms: 10 * epoch + 1,
            status: CutStatus::Complete,
            offsets: vec![("t".into(), vec![(0, epoch)])],
            missing: Vec::new(),
        }
    }

    fn group_value(last_epoch: i64) -> GroupValue {
        GroupValue {
            topics: vec!["t".into()],
            interval_ms: Some(1_000),
            retained_cuts: 1,
            last_epoch,
        }
    }

    /// Replay rebuilds what the coordinator wrote: the newest group record, cuts less their
    /// tombstones, the highest epoch, and an injection-start without a cut as unfinished.
    #[test]
    fn replay_rebuilds_cuts_epochs_and_unfinished_injections() {
        let start = InjectionStart {
            coordinator_epoch: 0,
            triggered_at_ms: 30,
            targets: vec![("t".into(), 1)],
        };
        let batch = engine::batch_encode::encode_uncompressed([
            rec(
                RecordKind::Group,
                -1,
                Some(format::encode_group_value(&group_value(0))),
            ),
            rec(
                RecordKind::InjectionStart,
                1,
                Some(format::encode_injection_start(&start)),
            ),
            rec(RecordKind::Cut, 1, Some(format::encode_cut_value(&cut(1)))),
            rec(
                RecordKind::Group,
                -1,
                Some(format::encode_group_value(&group_value(1))),
            ),
            rec(RecordKind::InjectionStart, 1, None),
            rec(RecordKind::Cut, 2, Some(format::encode_cut_value(&cut(2)))),
            rec(
                RecordKind::Group,
                -1,
                Some(format::encode_group_value(&group_value(2))),
            ),
            rec(RecordKind::Cut, 1, None),
            rec(
                RecordKind::InjectionStart,
                3,
                Some(format::encode_injection_start(&start)),
            ),
        ]);
        let mut states = BarrierStates::new();
        assert_eq!(replay_batches(&mut states, (), &batch, 4), 9);
        let g = &states["g"];
        assert_eq!(g.partition, 4);
        assert_eq!(g.record.as_ref(), Some(&group_value(2)));
        assert!(!g.record_is_legacy);
        assert_eq!(g.cuts.keys().copied().collect::<Vec<_>>(), vec![2]);
        assert_eq!(g.latest(), Some(&cut(2)));
        assert_eq!(g.last_published_epoch(), 2);
        assert_eq!(
            g.last_epoch, 3,
            "the unfinished epoch counts: it is never reused"
        );
        assert_eq!(g.started.get(&3), Some(&start));
        assert_eq!(g.last_triggered_ms(), Some(30));
        // A group record's tombstone ends the group; an undecodable key is skipped.
        let more = engine::batch_encode::encode_uncompressed([
            rec(RecordKind::Group, -1, None),
            engine::batch_encode::NewRecord {
                key: Some(bytes::Bytes::from_static(b"\xff\xff")),
                value: None,
                timestamp_ms: 1,
                ..Default::default()
            },
        ]);
        assert_eq!(replay_batches(&mut states, (), &more, 4), 1);
        let g = &states["g"];
        assert!(g.record.is_none() && g.cuts.is_empty() && g.started.is_empty());
        assert_eq!((g.last_epoch, g.last_published_epoch()), (0, 0));
    }

    /// A group record in an earlier build's layout is read, and marked for rewriting.
    #[test]
    fn replay_reads_an_earlier_builds_group_record() {
        let legacy: Vec<u8> = [
            &[0u8, 0][..],            // version 0
            &60_000i64.to_be_bytes(), // interval_ms
            &3i32.to_be_bytes(),      // retained_cuts
            &1i32.to_be_bytes(),      // topics: 1
            &[0, 1, b't'],            // "t"
        ]
        .concat();
        let batch = engine::batch_encode::encode_uncompressed([
            rec(RecordKind::Group, -1, Some(legacy)),
            rec(RecordKind::Cut, 4, Some(format::encode_cut_value(&cut(4)))),
        ]);
        let mut states = BarrierStates::new();
        assert_eq!(replay_batches(&mut states, (), &batch, 0), 2);
        let g = &states["g"];
        assert!(g.record_is_legacy);
        assert_eq!(
            g.record
                .as_ref()
                .map(|r| (&r.topics[..], r.interval_ms, r.retained_cuts)),
            Some((&["t".to_string()][..], Some(60_000), 3))
        );
        assert_eq!((g.last_epoch, g.last_published_epoch()), (4, 4));
    }
}
