//! Auto leader rebalance (Kafka's `auto.leader.rebalance.enable`, issue #18): after a
//! failover a partition's leadership stays with the replica that took over, so the nodes
//! that came back lead less than their share. Every `leader-imbalance-check-interval-ms`
//! the node that leads the metastore looks for nodes whose share of the partitions they are
//! the preferred replica of (the first) but do not lead is over
//! `leader-imbalance-per-broker-percentage`, and elects them back where they are live and in
//! sync (`MetaState::preferred_elections_due`, then one `Command::ElectLeader` each, as an
//! ElectLeaders request would). Runs on core 0 of every node of a cluster; only the
//! metastore leader's acts.

use std::rc::Rc;
use std::time::Duration;

use meta::Command;

use crate::core::CoreState;

/// The most preferred elections one check makes (each is a metastore write); the rest wait
/// for the next check.
pub const MAX_PREFERRED_ELECTIONS_PER_CHECK: usize = 1_000;

/// The auto leader rebalance loop (see the module comment). Runs for the life of the
/// core.
pub async fn leader_balance_loop(state: Rc<CoreState>) {
    let config = &state.ctx.config;
    let interval = Duration::from_millis(config.leader_imbalance_check_interval_ms);
    let percentage = config.leader_imbalance_per_broker_percentage;
    loop {
        glommio::timer::sleep(interval).await;
        if state.ctx.meta.leader_id() != Some(state.node_id()) {
            continue;
        }
        let due = state
            .meta
            .borrow()
            .preferred_elections_due(percentage, MAX_PREFERRED_ELECTIONS_PER_CHECK);
        if due.is_empty() {
            continue;
        }
        tracing::info!(
            partitions = due.len(),
            "auto leader rebalance: electing preferred replicas"
        );
        for (name, partition) in due {
            let cmd = Command::ElectLeader {
                name: name.clone(),
                partition,
                unclean: false,
            };
            // A refusal means the state moved on since the look (the next check sees it).
            match state.ctx.meta.write(cmd).await {
                Ok(_) => {
                    tracing::info!(topic = %name, partition, "preferred replica leads again")
                }
                Err(e) => {
                    tracing::debug!(topic = %name, partition, error = %e, "preferred election not made")
                }
            }
        }
    }
}
