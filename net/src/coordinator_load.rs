//! Loading and dropping what this core coordinates of an internal partition (the groups of
//! `__consumer_offsets`, the transactional ids of `__transaction_state`, the barrier groups
//! of `__barrier_state`): a partition's state is replayed from its log when this core starts
//! coordinating it (an unreplicated partition as it opens, a replicated one when this core
//! leads it) and dropped when it stops. The one replay loop over the records is
//! `crate::coordinator::replay_batches`.

use std::cell::RefCell;

use engine::{LogError, Partition, ReadEnd};

use crate::barrier::BarrierStates;
use crate::coordinator::{replay_batches, CoordinatorState};
use crate::core::{CoreState, PartitionKey};
use crate::group::Groups;
use crate::txn::Txns;

/// Bytes read per step while replaying an internal partition.
const COORDINATOR_REPLAY_READ_BYTES: usize = 1 << 20;

/// Forgets what this core coordinates of internal partition `key` (groups of
/// `__consumer_offsets`, transactional ids of `__transaction_state`, barrier groups of
/// `__barrier_state`).
pub(crate) fn drop_coordinator_state(state: &CoreState, key: &PartitionKey) {
    fn unload<S: CoordinatorState>(state: &RefCell<S>, key: &PartitionKey) {
        if key.0 == S::TOPIC {
            state.borrow_mut().unload(key.1);
        }
    }
    let c = &state.coordinators;
    unload(&c.groups, key);
    unload(&c.txns, key);
    unload(&c.barriers, key);
}

/// This core becomes the coordinator of internal partition `key` (the new leader of a
/// replicated one, or one not replicated as it opens): what its log holds (the groups'
/// offsets, the transactional ids' and barrier groups' state) is loaded before it
/// serves (COORDINATOR_LOAD_IN_PROGRESS meanwhile). Other partitions load nothing.
pub(crate) async fn load_coordinator_state(
    state: &CoreState,
    key: &PartitionKey,
    p: &engine::Partition,
) -> Result<(), engine::LogError> {
    drop_coordinator_state(state, key);
    let c = &state.coordinators;
    if key.0 == Groups::TOPIC {
        let delay = state.initial_rebalance_delay();
        replay_coordinator(state, &c.groups, delay, p, key.1).await
    } else if key.0 == Txns::TOPIC {
        replay_coordinator(state, &c.txns, (), p, key.1).await
    } else if key.0 == BarrierStates::TOPIC {
        replay_coordinator(state, &c.barriers, (), p, key.1).await
    } else {
        Ok(())
    }
}

/// Loads the state of coordinator `S` (groups, transactional ids, barrier groups) from
/// internal partition `index`: all its log holds (a new leader's records above its high
/// watermark too: they are its epoch's to commit).
pub(crate) async fn replay_coordinator<S: CoordinatorState>(
    state: &CoreState,
    target: &RefCell<S>,
    args: S::ReplayArgs,
    partition: &Partition,
    index: u32,
) -> Result<(), LogError> {
    let mut records = 0;
    partition
        .log()
        .for_each_batch(
            0,
            u64::MAX,
            COORDINATOR_REPLAY_READ_BYTES,
            ReadEnd::Durable,
            |_, batch| {
                records += replay_batches(&mut *target.borrow_mut(), args, batch, index);
            },
        )
        .await?;
    tracing::info!(
        partition = index,
        records,
        core = state.core,
        "replayed {}",
        S::WHAT
    );
    Ok(())
}
