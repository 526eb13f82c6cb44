//! Keeps one core's partitions in step with the metastore: subscribe, open the partitions
//! assigned to (this node, this core), close the rest, delete the files of deleted topics,
//! follow config changes; the per-core loops (retention, group timers); a partition move's
//! release and resume; the clean close at shutdown.

use std::collections::HashMap;
use std::rc::Rc;

use engine::join::for_each_bounded;

use crate::opening::MAX_CONCURRENT_PARTITION_OPENS;
use meta::AppliedChange;

use crate::core::{CoreState, OwnedPartition, PartitionKey};
use crate::group::OFFSETS_TOPIC;
use crate::topic_config;

/// Which reconcile: the first (start-up) opens only what requests cannot wait for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reconcile {
    StartUp,
    Change,
}

/// Why the metastore could not be followed.
#[derive(Debug, thiserror::Error)]
#[error("subscribing to the metastore: {0}")]
pub struct FollowError(#[from] meta::MetaError);

/// Subscribes to the metastore, opens this core's partitions, then applies every change
/// as it arrives. Runs for the life of the core.
pub async fn start_meta_follower(state: &Rc<CoreState>) -> Result<(), FollowError> {
    let (index, copy, changes) = state.ctx.meta.subscribe().await?;
    *state.meta.borrow_mut() = copy;
    state.index_topic_ids();
    reconcile(state, Reconcile::StartUp).await;
    crate::replica::reconcile_replicas(state);
    state.set_applied(index);
    let me = state.clone();
    glommio::spawn_local(async move { crate::opening::background_open_pass(&me).await }).detach();
    let config = &state.ctx.config;
    if state.core == 0 && !config.peers.is_empty() && config.auto_leader_rebalance {
        glommio::spawn_local(crate::leader_balance::leader_balance_loop(state.clone())).detach();
    }
    let me = state.clone();
    glommio::spawn_local(async move {
        while let Ok(AppliedChange { log_index, change }) =
            crosswake::home_wake(changes.recv_async()).await
        {
            for name in deleted_topics(&change) {
                crate::coordinators::group::forget_topic(&me, &name).await;
            }
            me.meta.borrow_mut().apply_change(&change);
            me.index_topic_ids();
            reconcile(&me, Reconcile::Change).await;
            crate::replica::reconcile_replicas(&me);
            me.set_applied(log_index);
        }
    })
    .detach();
    Ok(())
}

/// Opens the partitions the metadata assigns to this core and closes the others; deletes
/// the files of partitions whose topic is gone.
async fn reconcile(state: &CoreState, when: Reconcile) {
    let (desired, configs) = {
        let m = state.meta.borrow();
        let mut desired: HashMap<PartitionKey, String> = HashMap::new();
        let mut configs = HashMap::new();
        let me = meta::Assignment {
            node_id: state.node_id(),
            core_index: state.core as u32,
        };
        for (name, assignments) in &m.assignments {
            let Some(topic) = m.topic(name) else { continue };
            for (p, a) in assignments.iter().enumerate() {
                // A replicated partition is here when one of its replicas is.
                let here = match m.replica_set(name, p as u32) {
                    Some(r) => r.replica_on(me.node_id) == Some(me),
                    None => *a == me,
                };
                if here {
                    desired.insert((name.clone(), p as u32), topic.incarnation_id.clone());
                }
            }
            configs.insert(name.clone(), topic.configs.clone());
        }
        (desired, configs)
    };
    let desired: HashMap<PartitionKey, String> = {
        let mut moving = state.data.moving.borrow_mut();
        moving.retain(|k| desired.contains_key(k));
        let truncating = state.data.truncating.borrow();
        desired
            .into_iter()
            .filter(|(k, _)| !moving.contains(k) && !truncating.contains(k))
            .collect()
    };
    // An unopened partition that is no longer assigned here is opened first, so that one
    // path below closes it (or deletes it with its topic).
    let leaving = state
        .data
        .openings
        .unwanted(|k, incarnation| desired.get(k).map(String::as_str) == Some(incarnation));
    crate::opening::open_all(state, leaving, MAX_CONCURRENT_PARTITION_OPENS).await;
    let stale: Vec<(PartitionKey, Rc<OwnedPartition>)> = state
        .data
        .partitions
        .borrow()
        .iter()
        .filter(|(k, p)| desired.get(*k).map(String::as_str) != Some(p.incarnation()))
        .map(|(k, p)| (k.clone(), p.clone()))
        .collect();
    for (key, _) in &stale {
        state.data.partitions.borrow_mut().remove(key);
        if key.0 == OFFSETS_TOPIC {
            state
                .coordinators
                .groups
                .borrow_mut()
                .retain(|_, g| g.partition != key.1);
        }
    }
    for_each_bounded(stale, MAX_CONCURRENT_PARTITION_OPENS, |(key, p)| async move {
        let (topic_alive, replica_removed) = {
            let m = state.meta.borrow();
            let alive = m
                .topic(&key.0)
                .is_some_and(|t| t.incarnation_id == p.incarnation());
            // A reassignment took this node's replica away (`meta::replication`): the
            // target replicas are in sync without it, so its copy goes.
            let removed = m
                .replica_set(&key.0, key.1)
                .is_some_and(|r| r.replica_on(state.node_id()).is_none());
            (alive, removed)
        };
        if topic_alive && replica_removed {
            match p.close_and_delete().await {
                Ok(()) => {
                    tracing::info!(topic = %key.0, partition = key.1, core = state.core, "replica removed by a reassignment: its copy is deleted")
                }
                Err(e) => {
                    tracing::warn!(topic = %key.0, partition = key.1, error = %e, "deleting a reassigned replica's copy")
                }
            }
        } else if topic_alive {
            if let Err(e) = p.close().await {
                tracing::warn!(topic = %key.0, partition = key.1, error = %e, "closing partition");
            }
        } else {
            match p.close_and_delete().await {
                Ok(()) => {
                    tracing::info!(topic = %key.0, partition = key.1, core = state.core, "partition deleted")
                }
                Err(e) => {
                    tracing::warn!(topic = %key.0, partition = key.1, error = %e, "removing deleted partition")
                }
            }
        }
    })
    .await;
    let mut added: Vec<PartitionKey> = Vec::new();
    for (key, incarnation) in desired {
        if !state.data.partitions.borrow().contains_key(&key)
            && !state.data.openings.is_unopened(&key)
        {
            added.push(key.clone());
            state.data.openings.add(key, incarnation);
        }
    }
    added.sort();
    match when {
        // Start-up opens `__consumer_offsets` and `__transaction_state` before the core
        // reports ready (their replay fills the groups and transactions that requests
        // read without touching a partition) and leaves the rest to the background pass
        // and first use (`__barrier_state` too: the barrier tick opens the partitions of
        // the groups it coordinates within its first round).
        Reconcile::StartUp => {
            added.retain(|(topic, _)| {
                topic == crate::group::OFFSETS_TOPIC || topic == crate::txn::TXN_STATE_TOPIC
            });
            crate::opening::open_all(state, added, MAX_CONCURRENT_PARTITION_OPENS).await;
        }
        // A change opens what it adds before it counts as applied (a topic created is
        // served when CreateTopics answers).
        Reconcile::Change => {
            crate::opening::open_all(state, added, MAX_CONCURRENT_PARTITION_OPENS).await;
        }
    }
    // Configs of open partitions follow the metadata.
    for p in state.data.partitions.borrow().values() {
        if let Some(cfg) = configs.get(&p.topic) {
            if let Ok(lc) = topic_config::to_log_config(cfg, &state.ctx.config.log_defaults) {
                if let Err(e) = p.log().set_config(lc) {
                    tracing::warn!(topic = %p.topic, error = %e, "applying topic config");
                }
            }
        }
    }
}

/// Applies retention to every partition of this core (every
/// `retention_check_interval_ms`).
pub async fn enforce_retention(state: &CoreState) {
    let now = state.data.storage.clock().now_ms();
    let parts: Vec<Rc<OwnedPartition>> = state.data.partitions.borrow().values().cloned().collect();
    for p in parts {
        if let Err(e) = p.log().enforce_retention(now).await {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "retention");
        }
    }
}

/// Undoes `opening::release_partition` when the move could not be recorded.
pub async fn resume_partition(state: &Rc<CoreState>, topic: &str, index: u32) {
    let key = (topic.to_string(), index);
    state.data.moving.borrow_mut().remove(&key);
    reconcile(state, Reconcile::Change).await;
    // A replica's role starts over on the reopened log (a leader starts its epoch on it
    // again: the log it reopened knows none).
    if state.meta.borrow().replica_set(topic, index).is_some() {
        state.data.replicas.borrow_mut().map.remove(&key);
        crate::replica::reconcile_replicas(state);
    }
}

/// Closes every partition cleanly (flush, sync, clean-shutdown marker); those never opened
/// are left as they are.
pub async fn close_all(state: &CoreState) {
    crate::opening::stop_opening(state).await;
    let parts: Vec<Rc<OwnedPartition>> = state
        .data
        .partitions
        .borrow_mut()
        .drain()
        .map(|(_, p)| p)
        .collect();
    for_each_bounded(parts, MAX_CONCURRENT_PARTITION_OPENS, |p| async move {
        if let Err(e) = p.close().await {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "closing partition");
        }
    })
    .await;
}

/// Topics a metastore change deletes (a batch may hold several changes).
fn deleted_topics(change: &meta::Change) -> Vec<String> {
    match change {
        meta::Change::TopicDeleted { name, .. } => vec![name.clone()],
        meta::Change::Batch(changes) => changes.iter().flat_map(deleted_topics).collect(),
        _ => Vec::new(),
    }
}
