//! The coordinators' work on a core, under the request handlers of `api/`: routing a request
//! to the core that coordinates its group, transactional id or barrier group; appending the
//! coordinator's state durably to its internal topic; writing transaction and barrier markers
//! into the partitions they cover; finishing what a crash interrupted; and the periodic ticks.
//! The state machines themselves are pure and live below (`crate::group`, `crate::txn`,
//! `crate::barrier`); loading them from their topic is `crate::coordinator_load`.
//!
//! A handler in `api/` decodes, authorizes, and calls one function here; it keeps no state of
//! its own.

pub(crate) mod barrier;
pub(crate) mod group;
pub(crate) mod txn;

use std::rc::Rc;

use crate::core::CoreState;

/// Starts the coordinators' periodic work on `state`'s core: groups' timers, offsets expiry,
/// transaction timeouts and markers, barrier intervals and injections.
pub(crate) fn start_ticks(state: &Rc<CoreState>) {
    let config = &state.ctx.config;
    crate::periodic::every(state, crate::group::GROUP_TICK_MS, |s| async move {
        group::group_tick(&s)
    });
    let offsets_retention_ms = config.offsets_retention_ms;
    crate::periodic::every(
        state,
        config.offsets_retention_check_interval_ms,
        move |s| async move { group::expire_offsets(&s, offsets_retention_ms).await },
    );
    crate::periodic::every(state, crate::txn::TXN_TICK_MS, |s| async move {
        txn::txn_tick(&s).await
    });
    crate::periodic::every(state, crate::barrier::BARRIER_TICK_MS, |s| async move {
        barrier::barrier_tick(&s).await
    });
}
