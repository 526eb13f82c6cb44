//! The one shape of a coordinator that lives on an internal topic: consumer groups on
//! `__consumer_offsets` (`crate::group`), transactional ids on `__transaction_state`
//! (`crate::txn`) and barrier groups on `__barrier_state` (`crate::barrier`). A core keeps
//! the state of the keys whose partitions it leads; that state is rebuilt from the
//! partition's records when the core starts leading it ([`replay_batches`], the one replay
//! loop, which `coordinator_load::replay_coordinator` runs), dropped when it stops
//! ([`CoordinatorState::unload`]), and driven by a periodic tick (`coordinators::start_ticks`
//! on `periodic::every`, the one scheduler). Requests reach the coordinator's core through
//! `route::on_coordinator_core`.
//!
//! This file sits below the three state machines (they implement the trait) and above
//! nothing but the engine's batch walker.

use bytes::Bytes;
use engine::batch::BatchHeader;
use engine::txn::MarkerKind;
use kafka_protocol::records::RecordBatchDecoder;

/// What a coordinator keeps on one core, rebuilt from its internal topic's records.
pub trait CoordinatorState: Default {
    /// The internal topic whose partitions hold the state.
    const TOPIC: &'static str;
    /// What the state is called in logs ("committed offsets").
    const WHAT: &'static str;
    /// What replaying needs besides the records (the groups' initial rebalance delay).
    type ReplayArgs: Copy;

    /// Applies one record of partition `partition` written in the batch `header`; returns
    /// whether it was one of the state's records.
    fn apply_record(
        &mut self,
        args: Self::ReplayArgs,
        partition: u32,
        header: &BatchHeader,
        key: Option<Bytes>,
        value: Option<Bytes>,
    ) -> bool;

    /// Applies a transaction marker of partition `partition` (the producer of `header`'s
    /// transaction committed or aborted). Most state has none to apply.
    fn apply_marker(&mut self, _partition: u32, _header: &BatchHeader, _marker: MarkerKind) {}

    /// Forgets the keys of partition `partition` (this core no longer leads it).
    fn unload(&mut self, partition: u32);
}

/// Applies the records of stored batches (as read from partition `partition`'s log) to
/// `state`; returns how many records applied. An undecodable batch is skipped with a warning.
pub fn replay_batches<S: CoordinatorState>(
    state: &mut S,
    args: S::ReplayArgs,
    bytes: &[u8],
    partition: u32,
) -> usize {
    let mut applied = 0;
    for (h, stored) in engine::batch::stored_batches(bytes) {
        if h.is_control() {
            if let Some(marker) = engine::txn::marker_of(stored) {
                state.apply_marker(partition, &h, marker);
            }
            continue;
        }
        let mut one = Bytes::copy_from_slice(stored);
        let Ok(set) = RecordBatchDecoder::decode(&mut one) else {
            tracing::warn!(partition, "undecodable batch in {}; skipped", S::TOPIC);
            continue;
        };
        for r in set.records {
            if state.apply_record(args, partition, &h, r.key, r.value) {
                applied += 1;
            }
        }
    }
    applied
}
