//! The group coordinator's work: running a request on the core that coordinates its group,
//! creating and finding groups within the per-core bound, appending committed offsets to
//! `__consumer_offsets`, the groups' timers, offsets expiry, and forgetting a deleted topic's
//! offsets. The state machines are `crate::group`.

use crate::codes::{self, COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID};
use crate::core::CoreState;
use crate::group::{self, Committed, GroupEntry, OFFSETS_TOPIC};
use crate::route::CoordinatorAt;
use engine::Durability;
use std::rc::Rc;

/// Where a consumer group is coordinated (`Err`: INVALID_GROUP_ID for an empty or too long id).
fn coordinator_at(state: &CoreState, id: &str) -> Result<CoordinatorAt, i16> {
    if id.is_empty() || id.len() > crate::group::MAX_GROUP_ID_BYTES {
        return Err(INVALID_GROUP_ID);
    }
    Ok(CoordinatorAt {
        internal: OFFSETS_TOPIC,
        at: state.group_coordinator(id),
        key_partition: state.group_partition(id),
    })
}

/// Runs `f` on the core that coordinates consumer group `id`, with that core's state and the
/// coordinating partition: [`route::on_coordinator_core`](crate::route::on_coordinator_core)
/// at [`coordinator_at`]`(id)`.
pub(crate) async fn on_group_core<R, F, Fut>(
    state: &Rc<CoreState>,
    id: &str,
    f: F,
) -> Result<R, i16>
where
    R: Send + 'static,
    F: FnOnce(Rc<CoreState>, u32) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = R> + 'static,
{
    crate::route::on_coordinator_core(state, coordinator_at(state, id)?, f).await
}

/// Whether `topic` has partition `index`, by this core's metadata copy (OffsetCommit and
/// OffsetDelete answer UNKNOWN_TOPIC_OR_PARTITION otherwise).
pub(crate) fn partition_exists(state: &CoreState, topic: &str) -> impl Fn(i32) -> bool {
    let count = state.meta.borrow().topic(topic).map(|m| m.partitions);
    move |i| count.is_some_and(|n| i >= 0 && (i as u32) < n)
}

/// Runs `f` on the group, creating it if needed (JoinGroup, and an OffsetCommit that passes
/// its check). `Err(code)` when the core already coordinates `MAX_GROUPS_PER_CORE` groups.
pub(crate) fn with_group<R>(
    state: &CoreState,
    id: &str,
    partition: u32,
    f: impl FnOnce(&mut GroupEntry) -> R,
) -> Result<R, i16> {
    let mut groups = state.coordinators.groups.borrow_mut();
    if !groups.contains_key(id) && groups.len() >= crate::group::MAX_GROUPS_PER_CORE {
        tracing::warn!(group = %id, limit = crate::group::MAX_GROUPS_PER_CORE, "group refused: this core coordinates the most groups it may (MAX_GROUPS_PER_CORE)");
        return Err(codes::GROUP_MAX_SIZE_REACHED);
    }
    let entry = groups
        .entry(id.to_string())
        .or_insert_with(|| GroupEntry::new(id, partition, state.initial_rebalance_delay()));
    Ok(f(entry))
}

/// Runs `f` on an existing group; a group id nobody joined creates no state (`None`).
pub(crate) fn with_existing_group<R>(
    state: &CoreState,
    id: &str,
    f: impl FnOnce(&mut GroupEntry) -> R,
) -> Option<R> {
    state.coordinators.groups.borrow_mut().get_mut(id).map(f)
}

/// Appends the records to the group's `__consumer_offsets` partition on this core (durable
/// before it returns) and applies them to the in-memory offsets.
pub(crate) async fn persist_offsets(
    s: &CoreState,
    group_id: &str,
    partition: u32,
    items: &[(String, i32, Option<Committed>)],
) -> Result<(), i16> {
    if items.is_empty() {
        return Ok(());
    }
    s.check_coordinates(OFFSETS_TOPIC, partition)?;
    let Some(part) = crate::opening::partition(s, OFFSETS_TOPIC, partition).await else {
        return Err(COORDINATOR_NOT_AVAILABLE);
    };
    let now = engine::clock::system_now_ms();
    let batch = engine::batch_encode::encode_uncompressed(items.iter().map(|(t, p, c)| {
        engine::batch_encode::NewRecord {
            key: Some(group::encode_key(group_id, t, *p)),
            value: c.as_ref().map(group::encode_value),
            headers: Default::default(),
            timestamp_ms: now,
        }
    }));
    let key = (OFFSETS_TOPIC.to_string(), partition);
    crate::replica::coordinator_append(s, &key, &part, &batch, Durability::Sync)
        .await
        .map_err(|(code, why)| {
            tracing::warn!(group = %group_id, error = %why, "persisting offsets failed");
            code
        })?;
    let mut groups = s.coordinators.groups.borrow_mut();
    // The group may have been dropped meanwhile (a memberless group with no offsets yet, e.g.
    // the first commit of a simple consumer, is vacant to the tick while the append waits):
    // what is now in the log exists, as a replay would find it.
    if !groups.contains_key(group_id) && items.iter().all(|(_, _, c)| c.is_none()) {
        return Ok(());
    }
    let g = groups
        .entry(group_id.to_string())
        .or_insert_with(|| GroupEntry::new(group_id, partition, s.initial_rebalance_delay()));
    for (t, p, c) in items {
        match c {
            Some(c) => {
                g.offsets.insert((t.clone(), *p), c.clone());
            }
            None => {
                g.offsets.remove(&(t.clone(), *p));
            }
        }
    }
    Ok(())
}

/// Forgets (with tombstones) the committed offsets of this core's memberless groups that are
/// older than `retention_ms` (`GroupEntry::expired_offsets`).
pub(crate) async fn expire_offsets(state: &Rc<CoreState>, retention_ms: i64) {
    let now = engine::clock::system_now_ms();
    let doomed = tombstones_in_groups(state, |g| g.expired_offsets(now, retention_ms));
    for (group_id, partition, items) in doomed {
        // Checked again right before the tombstones go: a commit since (a consumer back)
        // keeps its offset.
        let items: OffsetRecords = {
            let groups = state.coordinators.groups.borrow();
            let Some(g) = groups.get(&group_id) else {
                continue;
            };
            let still = g.expired_offsets(engine::clock::system_now_ms(), retention_ms);
            items
                .into_iter()
                .filter(|(t, p, _)| still.iter().any(|(st, sp)| st == t && sp == p))
                .collect()
        };
        if items.is_empty() {
            continue;
        }
        match persist_offsets(state, &group_id, partition, &items).await {
            Ok(()) => {
                tracing::info!(group = %group_id, offsets = items.len(), "committed offsets expired (offsets-retention-ms)")
            }
            Err(code) => {
                tracing::warn!(group = %group_id, code, "could not expire committed offsets; retrying at the next check")
            }
        }
    }
}

/// Forgets (with tombstones) every committed offset of a deleted topic in this core's groups.
pub(crate) async fn forget_topic(state: &Rc<CoreState>, topic: &str) {
    let doomed = tombstones_in_groups(state, |g| {
        g.offsets
            .keys()
            .filter(|(t, _)| t == topic)
            .cloned()
            .collect()
    });
    for (group_id, partition, items) in doomed {
        if let Err(code) = persist_offsets(state, &group_id, partition, &items).await {
            tracing::warn!(group = %group_id, %topic, code, "could not forget offsets of a deleted topic");
        }
    }
}

/// One tick of this core's groups' timers (session expiry, rebalance deadlines), every
/// `group::GROUP_TICK_MS`.
pub(crate) fn group_tick(state: &CoreState) {
    let now = std::time::Instant::now();
    let mut groups = state.coordinators.groups.borrow_mut();
    let now_ms = engine::clock::system_now_ms();
    let limits = state.consumer_group_limits();
    for g in groups.values_mut() {
        g.group.tick(now);
        if let Some(c) = g.consumer.as_mut() {
            for member in c.tick(&limits, now) {
                tracing::info!(group = %g.group.id, %member, "consumer-protocol member fenced (session timeout, or revocation past its rebalance timeout)");
            }
            if c.is_empty() {
                g.consumer = None;
            }
        }
        crate::group::migration::downgrade_if_classic_only(g, state.initial_rebalance_delay());
        g.vacant_since_ms = if !g.has_members() {
            g.vacant_since_ms.or(Some(now_ms))
        } else {
            None
        };
    }
    // A group with nobody in it and nothing committed holds no state worth keeping.
    groups.retain(|_, g| !(g.is_vacant() && g.offsets.is_empty() && g.pending_txn.is_empty()));
}

/// This core's groups with the offsets `pick` chooses of each, as tombstones to append: (group,
/// its `__consumer_offsets` partition, the records); groups with none are left out.
fn tombstones_in_groups(
    state: &CoreState,
    pick: impl Fn(&GroupEntry) -> Vec<(String, i32)>,
) -> Vec<(String, u32, OffsetRecords)> {
    state
        .coordinators
        .groups
        .borrow()
        .values()
        .filter_map(|g| {
            let items: OffsetRecords = pick(g).into_iter().map(|(t, p)| (t, p, None)).collect();
            (!items.is_empty()).then(|| (g.group.id.clone(), g.partition, items))
        })
        .collect()
}

/// Records to persist for one group: (topic, partition, committed offset or tombstone).
pub(crate) type OffsetRecords = Vec<(String, i32, Option<Committed>)>;
