//! The barrier coordinator's work: running a request on the core that coordinates its barrier
//! group, appending to `__barrier_state`, injecting an epoch's markers into every partition of
//! a group's topics, publishing the cut, the interval tick, and finishing an injection a crash
//! interrupted. The state machine and record formats are `crate::barrier`.
//!
//! An injection of group G, epoch E, on G's coordinator core:
//! 1. E = the highest epoch on record + 1 (one injection of a group at a time:
//!    BARRIER_INJECTION_IN_PROGRESS for a second trigger);
//! 2. the targets are frozen: each of G's topics with its partition count;
//! 3. the injection-start record (E, the coordinator's leader epoch, the trigger time T,
//!    the targets) is appended to `__barrier_state`, durable before any marker;
//! 4. a marker (control batch, type 1000, timestamped T, stamped with the partition's
//!    leader epoch) goes into every target through that partition's own append path,
//!    durable before it counts; a refused one is retried with back-off until the
//!    injection's timeout (`barrier-injection-timeout-ms`, or a shorter one the trigger
//!    asked for);
//! 5. the cut is published in one batch with the group record (its `last_epoch` E), the
//!    injection-start's tombstone and the tombstones of the cuts past `retained_cuts`:
//!    complete, or partial with the partitions that never took a marker as `missing`.
//!
//! A crash between 3 and 5 leaves the injection-start on record: the tick then looks for
//! E's marker in each target from the first record at or after T (the time index: the marker
//! carries T) and publishes the cut as it finds it (partial unless every marker is there).

use crate::barrier::format::{
    self, Cut, CutStatus, GroupValue, InjectionStart, MarkerValue, RecordKind, StateKey,
    BARRIER_CONTROL_TYPE, BARRIER_STATE_TOPIC,
};
use crate::barrier::{
    GroupState, MARKER_RETRY_FIRST_BACKOFF_MS, MARKER_RETRY_MAX_BACKOFF_MS, MARKER_SCAN_MAX_BYTES,
};
use crate::codes::{
    self, COORDINATOR_NOT_AVAILABLE, FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER,
    RESOURCE_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION,
};
use crate::core::CoreState;
use crate::node_rpc::{NodeRequest, NodeResponse};
use crate::route::Scatter;
use engine::join::join_all;
use kfc4::wire::{BARRIER_INJECTION_IN_PROGRESS, INTERVAL_OFF_MS};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// A Kafka error code and why.
pub(crate) type Refusal = (i16, String);

/// Bytes read at a time when finishing an interrupted injection looks for its markers.
pub(crate) const MARKER_SCAN_READ_BYTES: usize = 1 << 20;

/// The `__barrier_state` partition of `group` and the core of this node coordinating it.
pub(crate) fn coordinator(state: &CoreState, group: &str) -> Result<(u32, usize), Refusal> {
    let p = format::coordinator_partition(group);
    match state.owner_core(BARRIER_STATE_TOPIC, p) {
        Some(core) => Ok((p, core)),
        None => {
            let code = state.not_coordinator_code(BARRIER_STATE_TOPIC, Some(p));
            let at = state
                .meta
                .borrow()
                .assignment(BARRIER_STATE_TOPIC, p)
                .map(|a| format!("node {}", a.node_id))
                .unwrap_or_else(|| "no node (is the group defined?)".to_string());
            Err((
                code,
                format!(
                    "barrier group '{group}' is coordinated by {BARRIER_STATE_TOPIC}/{p} on {at}"
                ),
            ))
        }
    }
}

/// Runs `f` on the core coordinating `group`, with its `__barrier_state` partition.
pub(crate) async fn on_barrier_core<R, F, Fut>(
    state: &Rc<CoreState>,
    group: &str,
    f: F,
) -> Result<R, Refusal>
where
    R: Send + 'static,
    F: FnOnce(Rc<CoreState>, u32) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = R> + 'static,
{
    let (partition, core) = coordinator(state, group)?;
    let at = crate::route::CoordinatorAt {
        internal: BARRIER_STATE_TOPIC,
        at: Some((partition, core)),
        key_partition: Some(partition),
    };
    crate::route::on_coordinator_core(state, at, f)
        .await
        .map_err(|code| (code, not_loaded(partition)))
}

/// Why a replica of `__barrier_state` partition `p` does not coordinate its groups now.
pub(crate) fn not_loaded(p: u32) -> String {
    format!("{BARRIER_STATE_TOPIC}/{p}: this replica does not lead it (or is still loading it); try again")
}

/// Answers another node's `BarrierMarker` call for a partition this node owns.
pub(crate) async fn serve_node_request(state: &Rc<CoreState>, req: NodeRequest) -> NodeResponse {
    match req {
        NodeRequest::BarrierMarker {
            topic,
            partition,
            group,
            epoch,
            triggered_at_ms,
        } => {
            if state.owner_core(&topic, partition).is_none() {
                return NodeResponse::Code {
                    code: state.not_owned_code(&topic, partition),
                    message: format!("{topic}/{partition} is not served here"),
                };
            }
            let marker = MarkerValue {
                group,
                epoch,
                triggered_at_ms,
            };
            let r = mark_partitions(state, &marker, &[(topic, partition)]).await;
            match r.into_iter().next() {
                Some(Ok(offset)) => NodeResponse::MarkerWritten { offset },
                Some(Err((code, message))) => NodeResponse::Code { code, message },
                None => NodeResponse::Code {
                    code: UNKNOWN_TOPIC_OR_PARTITION,
                    message: "no such partition".into(),
                },
            }
        }
        other => NodeResponse::Failed {
            reason: format!("not a barrier call: {other:?}"),
        },
    }
}

/// Writes `marker` into every partition of `targets` (local ones on their owner cores, the
/// partitions of the same core concurrently; another node's by node RPC); one result per
/// target, in order: the marker's offset, or why it was not written.
pub(crate) async fn mark_partitions(
    state: &Rc<CoreState>,
    marker: &MarkerValue,
    targets: &[(String, u32)],
) -> Vec<Result<u64, Refusal>> {
    let mut out: Vec<Option<Result<u64, Refusal>>> = vec![None; targets.len()];
    let mut scatter: Scatter<(String, u32)> = Scatter::default();
    let mut remote = Vec::new();
    for (i, (topic, p)) in targets.iter().enumerate() {
        match (state.owner_core(topic, *p), state.remote_owner(topic, *p)) {
            (Some(core), _) => scatter.push(core, (i, 0), (topic.clone(), *p)),
            (None, Some(owner)) => remote.push((i, owner, topic.clone(), *p)),
            (None, None) => {
                out[i] = Some(Err((
                    UNKNOWN_TOPIC_OR_PARTITION,
                    format!("{topic}/{p} does not exist"),
                )))
            }
        }
    }
    let value = format::encode_marker_value(marker);
    let at = MarkerAt {
        triggered_at_ms: marker.triggered_at_ms,
        expected_leader_epoch: None,
    };
    let remote_results = join_all(remote.into_iter().map(|(i, owner, topic, p)| {
        let req = NodeRequest::BarrierMarker {
            topic: topic.clone(),
            partition: p,
            group: marker.group.clone(),
            epoch: marker.epoch,
            triggered_at_ms: marker.triggered_at_ms,
        };
        async move {
            let r = match crate::node_rpc::call(state, owner.node_id, owner.core_index, &req).await
            {
                Ok(NodeResponse::MarkerWritten { offset }) => Ok(offset),
                Ok(NodeResponse::Code { code, message }) => Err((code, message)),
                Ok(other) => Err((
                    NOT_LEADER_OR_FOLLOWER,
                    format!("{topic}/{p} on node {}: answered {other:?}", owner.node_id),
                )),
                Err(e) => Err((
                    NOT_LEADER_OR_FOLLOWER,
                    format!("{topic}/{p} on node {}: {e}", owner.node_id),
                )),
            };
            (i, r)
        }
    }));
    let results = scatter
        .gather(state, move |s, items: Vec<(String, u32)>| {
            let value = value.clone();
            async move {
                join_all(items.into_iter().map(|(topic, p)| {
                    let (s, value) = (s.clone(), value.clone());
                    async move { write_marker_here(&s, &topic, p, value, at).await }
                }))
                .await
            }
        })
        .await;
    for ((i, _), r) in results {
        out[i] = Some(r.unwrap_or_else(|gone| Err((NOT_LEADER_OR_FOLLOWER, gone.to_string()))));
    }
    for (i, r) in remote_results.await {
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err((UNKNOWN_TOPIC_OR_PARTITION, "no answer".into()))))
        .collect()
}

/// One marker into `topic`/`p` of this core, through the partition's own append path: its
/// batch timestamped with the trigger time, its leader epoch the one this core leads at
/// (which an expected epoch must equal: FENCED_LEADER_EPOCH otherwise, -1 included).
pub(crate) async fn write_marker_here(
    s: &CoreState,
    topic: &str,
    p: u32,
    value: Vec<u8>,
    at: MarkerAt,
) -> Result<u64, Refusal> {
    // krabka's order: a negative expected epoch is fenced before leadership is looked at.
    let fenced = |serving: Option<i32>, expected: i32| {
        (
            FENCED_LEADER_EPOCH,
            format!(
                "{topic}/{p}: expected leader epoch {expected}, the partition is at {}",
                serving.unwrap_or(-1)
            ),
        )
    };
    if let Some(expected) = at.expected_leader_epoch.filter(|e| *e < 0) {
        return Err(fenced(s.serving_epoch(topic, p), expected));
    }
    crate::replica::check_leads(s, topic, p)?;
    if let Some(expected) = at.expected_leader_epoch {
        let serving = s.serving_epoch(topic, p);
        if serving.is_some_and(|e| e != expected) {
            return Err(fenced(serving, expected));
        }
    }
    let Some(part) = crate::opening::partition(s, topic, p).await else {
        return Err((
            NOT_LEADER_OR_FOLLOWER,
            format!("{topic}/{p} is not open on core {}", s.core),
        ));
    };
    let offset = part
        .write_control_record(BARRIER_CONTROL_TYPE, value, at.triggered_at_ms)
        .await
        .map_err(|e| (codes::for_partition_error(&e), format!("{topic}/{p}: {e}")))?;
    crate::replica::replicate_own_write(s, &(topic.to_string(), p), &part, offset).await?;
    s.metrics.count_barrier_marker(topic);
    Ok(offset)
}

/// Opens (and so replays) `__barrier_state` partition `p` of this core.
pub(crate) async fn ensure_loaded(
    s: &CoreState,
    p: u32,
) -> Result<Rc<crate::core::OwnedPartition>, Refusal> {
    crate::opening::partition(s, BARRIER_STATE_TOPIC, p)
        .await
        .ok_or_else(|| {
            (
                COORDINATOR_NOT_AVAILABLE,
                format!("{BARRIER_STATE_TOPIC}/{p} is not open on core {}", s.core),
            )
        })
}

/// Appends `records` (key, value or None for a tombstone) to `__barrier_state` partition
/// `p` of this core as one batch, durable before it returns.
pub(crate) async fn append_state(
    s: &CoreState,
    p: u32,
    records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
) -> Result<(), Refusal> {
    s.check_coordinates(BARRIER_STATE_TOPIC, p)
        .map_err(|code| (code, not_loaded(p)))?;
    let part = ensure_loaded(s, p).await?;
    let at = engine::clock::system_now_ms();
    let batch = engine::batch_encode::encode_uncompressed(records.into_iter().map(|(k, v)| {
        engine::batch_encode::NewRecord {
            key: Some(k.into()),
            value: v.map(Into::into),
            headers: Default::default(),
            timestamp_ms: at,
        }
    }));
    let key = (BARRIER_STATE_TOPIC.to_string(), p);
    crate::replica::coordinator_append(s, &key, &part, &batch, engine::Durability::Sync)
        .await
        .map(|_| ())
}

pub(crate) fn key(kind: RecordKind, group: &str, epoch: i64) -> Vec<u8> {
    format::encode_key(&StateKey {
        kind,
        group: group.to_string(),
        epoch,
    })
}

/// Allocates `group`'s next epoch on this (its coordinator) core and injects it in a task of
/// its own (a vanished trigger cannot stop it halfway). Returns once the injection-start
/// record is durable (so an epoch a trigger was told of is finished even after a crash):
/// the epoch, when it was triggered, and the task (its cut, once published). Refused markers
/// are retried for `timeout_ms` before the cut is published as partial.
pub(crate) async fn start_injection(
    s: &Rc<CoreState>,
    group: &str,
    p: u32,
    timeout_ms: u64,
) -> Result<(i64, i64, glommio::task::JoinHandle<Option<Cut>>), Refusal> {
    let def = definition(s, group)?;
    ensure_loaded(s, p).await?;
    let epoch = {
        let mut states = s.coordinators.barriers.borrow_mut();
        let g = states
            .entry(group.to_string())
            .or_insert_with(|| GroupState::new(p));
        if let Some(e) = g.injecting.or_else(|| g.started.keys().next().copied()) {
            return Err((
                BARRIER_INJECTION_IN_PROGRESS,
                format!("barrier group '{group}' is injecting epoch {e}"),
            ));
        }
        g.last_epoch += 1;
        g.injecting = Some(g.last_epoch);
        g.last_epoch
    };
    let triggered_at = engine::clock::system_now_ms();
    let task_state = s.clone();
    let name = group.to_string();
    let (started_tx, started_rx) = glommio::channels::local_channel::new_bounded(1);
    let done = glommio::spawn_local(async move {
        let injection = Injection {
            group: &name,
            p,
            def,
            epoch,
            triggered_at_ms: triggered_at,
            timeout_ms,
        };
        let r = inject(&task_state, injection, started_tx).await;
        if let Some(g) = task_state.coordinators.barriers.borrow_mut().get_mut(&name) {
            g.injecting = None;
        }
        match r {
            Ok(cut) => Some(cut),
            Err((code, why)) => {
                tracing::warn!(group = %name, epoch, code, error = %why, "barrier injection failed; finished by the tick if it started");
                None
            }
        }
    })
    .detach();
    match started_rx.recv().await {
        Some(Ok(())) => Ok((epoch, triggered_at, done)),
        Some(Err(refusal)) => Err(refusal),
        None => Err((
            COORDINATOR_NOT_AVAILABLE,
            format!("the injection of '{group}' epoch {epoch} ended before it started"),
        )),
    }
}

/// Steps 2–5 of an injection (see the module doc).
pub(crate) async fn inject(
    s: &Rc<CoreState>,
    inj: Injection<'_>,
    on_started: glommio::channels::local_channel::LocalSender<Result<(), Refusal>>,
) -> Result<Cut, Refusal> {
    let Injection {
        group,
        p,
        def,
        epoch,
        triggered_at_ms,
        timeout_ms,
    } = inj;
    let started = std::time::Instant::now();
    let start = InjectionStart {
        coordinator_epoch: s.serving_epoch(BARRIER_STATE_TOPIC, p).unwrap_or(0),
        triggered_at_ms,
        targets: freeze_targets(s, &def),
    };
    let recorded = append_state(
        s,
        p,
        vec![(
            key(RecordKind::InjectionStart, group, epoch),
            Some(format::encode_injection_start(&start)),
        )],
    )
    .await;
    // The trigger waits for this (its receiver may be gone: nobody to tell).
    let _ = on_started.try_send(recorded.clone());
    recorded?;
    // Counted once its injection-start is durable: an epoch that is finished even after a
    // crash.
    let started_total = &s.metrics.barrier.started;
    started_total.set(started_total.get() + 1);
    tracing::debug!(group, epoch, "barrier injection started");
    if let Some(g) = s.coordinators.barriers.borrow_mut().get_mut(group) {
        g.started.insert(epoch, start.clone());
    }
    let marker = MarkerValue {
        group: group.to_string(),
        epoch,
        triggered_at_ms,
    };
    let mut pending = targets_of(&start);
    let mut offsets: BTreeMap<(String, u32), u64> = BTreeMap::new();
    let deadline = started + Duration::from_millis(timeout_ms);
    let mut backoff = Duration::from_millis(MARKER_RETRY_FIRST_BACKOFF_MS);
    loop {
        let results = mark_partitions(s, &marker, &pending).await;
        let mut refused = Vec::new();
        for (target, r) in pending.into_iter().zip(results) {
            match r {
                Ok(offset) => {
                    offsets.insert(target, offset);
                }
                Err((code, why)) => {
                    tracing::debug!(group, epoch, code, error = %why, "barrier marker refused; retried");
                    refused.push(target);
                }
            }
        }
        pending = refused;
        let now = std::time::Instant::now();
        if pending.is_empty() || now >= deadline {
            break;
        }
        glommio::timer::sleep(backoff.min(deadline - now)).await;
        backoff = (backoff * 2).min(Duration::from_millis(MARKER_RETRY_MAX_BACKOFF_MS));
    }
    if !pending.is_empty() {
        tracing::warn!(
            group,
            epoch,
            missing = pending.len(),
            timeout_ms,
            "barrier markers not written within the injection's timeout; the cut is partial"
        );
    }
    let cut = cut_of(epoch, &start, &offsets);
    publish(s, group, p, &def, cut.clone()).await?;
    s.metrics
        .barrier
        .injection_duration
        .borrow_mut()
        .record(started.elapsed());
    Ok(cut)
}

/// Every `(topic, partition)` of `start`'s targets, in order.
pub(crate) fn targets_of(start: &InjectionStart) -> Vec<(String, u32)> {
    start
        .targets
        .iter()
        .flat_map(|(t, count)| (0..(*count).max(0) as u32).map(move |p| (t.clone(), p)))
        .collect()
}

/// The cut of `start`'s targets from the markers found (`offsets`); the rest are missing.
/// Every target topic has its entry, even one whose markers are all missing (as krabka).
pub(crate) fn cut_of(
    epoch: i64,
    start: &InjectionStart,
    offsets: &BTreeMap<(String, u32), u64>,
) -> Cut {
    let mut by_topic: Vec<(String, Vec<(i32, i64)>)> = Vec::new();
    let mut missing = Vec::new();
    for (topic, count) in &start.targets {
        let mut found = Vec::new();
        for p in 0..(*count).max(0) {
            match offsets.get(&(topic.clone(), p as u32)) {
                Some(&o) => found.push((p, o as i64)),
                None => missing.push((topic.clone(), p)),
            }
        }
        by_topic.push((topic.clone(), found));
    }
    Cut {
        epoch,
        triggered_at_ms: start.triggered_at_ms,
        completed_at_ms: engine::clock::system_now_ms(),
        status: if missing.is_empty() {
            CutStatus::Complete
        } else {
            CutStatus::Partial
        },
        offsets: by_topic,
        missing,
    }
}

/// `def`'s topics in definition order, each with its partition count now (a topic gone
/// meanwhile is left out, as krabka does).
pub(crate) fn freeze_targets(s: &CoreState, def: &meta::BarrierGroupDef) -> Vec<(String, i32)> {
    let m = s.meta.borrow();
    def.topics
        .iter()
        .filter_map(|topic| {
            let t = m.topic(topic)?;
            Some((
                topic.clone(),
                i32::try_from(t.partitions).unwrap_or(i32::MAX),
            ))
        })
        .collect()
}

/// The group record of `def` whose last published cut is `last_epoch`.
pub(crate) fn group_value(def: &meta::BarrierGroupDef, last_epoch: i64) -> GroupValue {
    GroupValue {
        topics: def.topics.clone(),
        interval_ms: Some(wire_interval(def.interval_ms)).filter(|ms| *ms >= 0),
        retained_cuts: i32::try_from(def.retained_cuts).unwrap_or(i32::MAX),
        last_epoch,
    }
}

/// Publishes `cut` in one batch with the group record (its `last_epoch` the cut's) and the
/// tombstones of its injection-start and of the cuts past `retained_cuts` (epochs at or
/// below the cut's less `retained_cuts`: never the newest), then makes it this core's state.
pub(crate) async fn publish(
    s: &Rc<CoreState>,
    group: &str,
    p: u32,
    def: &meta::BarrierGroupDef,
    cut: Cut,
) -> Result<(), Refusal> {
    let epoch = cut.epoch;
    let retained = i64::from(def.retained_cuts.max(1));
    let expired: Vec<i64> = s
        .coordinators
        .barriers
        .borrow()
        .get(group)
        .map(|g| {
            g.cuts
                .keys()
                .copied()
                .filter(|e| *e <= epoch - retained)
                .collect()
        })
        .unwrap_or_default();
    let record = group_value(def, epoch);
    let mut records = vec![
        (
            key(RecordKind::Cut, group, epoch),
            Some(format::encode_cut_value(&cut)),
        ),
        (
            key(RecordKind::Group, group, format::GROUP_RECORD_EPOCH),
            Some(format::encode_group_value(&record)),
        ),
        (key(RecordKind::InjectionStart, group, epoch), None),
    ];
    records.extend(
        expired
            .iter()
            .map(|e| (key(RecordKind::Cut, group, *e), None)),
    );
    append_state(s, p, records).await?;
    let m = &s.metrics.barrier;
    match cut.status {
        CutStatus::Complete => m.committed.set(m.committed.get() + 1),
        CutStatus::Partial => m.partial.set(m.partial.get() + 1),
    }
    tracing::info!(group, epoch, status = ?cut.status, missing = cut.missing.len(), "barrier cut published");
    let mut states = s.coordinators.barriers.borrow_mut();
    let g = states
        .entry(group.to_string())
        .or_insert_with(|| GroupState::new(p));
    g.started.remove(&epoch);
    for e in expired {
        g.cuts.remove(&e);
    }
    g.last_epoch = g.last_epoch.max(epoch);
    g.cuts.insert(epoch, cut);
    g.record = Some(record);
    g.record_is_legacy = false;
    Ok(())
}

/// Makes `group`'s group record on `__barrier_state` say what the metastore says: its
/// definition, or (deleted) tombstones for the record and every cut.
pub(crate) async fn sync_group_record(
    s: &Rc<CoreState>,
    group: &str,
    p: u32,
) -> Result<(), Refusal> {
    ensure_loaded(s, p).await?;
    let def = s.meta.borrow().barrier_groups.groups.get(group).cloned();
    let (current, legacy, last_epoch, cuts, started, busy) = {
        let states = s.coordinators.barriers.borrow();
        match states.get(group) {
            Some(g) => (
                g.record.clone(),
                g.record_is_legacy,
                g.last_published_epoch(),
                g.cuts.keys().copied().collect::<Vec<_>>(),
                g.started.keys().copied().collect::<Vec<_>>(),
                g.injecting.is_some(),
            ),
            None => (None, false, 0, Vec::new(), Vec::new(), false),
        }
    };
    let wanted = def.map(|d| group_value(&d, last_epoch));
    match wanted {
        // A record in an earlier build's layout is rewritten in KFC-4's.
        Some(v) if legacy || current.as_ref() != Some(&v) => {
            let records = vec![(
                key(RecordKind::Group, group, format::GROUP_RECORD_EPOCH),
                Some(format::encode_group_value(&v)),
            )];
            append_state(s, p, records).await?;
            let mut states = s.coordinators.barriers.borrow_mut();
            let g = states
                .entry(group.to_string())
                .or_insert_with(|| GroupState::new(p));
            g.record = Some(v);
            g.record_is_legacy = false;
        }
        Some(_) => {}
        None if busy => {} // deleted while injecting: cleaned up once the injection is done
        None if current.is_some() || !cuts.is_empty() || !started.is_empty() => {
            let mut records = vec![(
                key(RecordKind::Group, group, format::GROUP_RECORD_EPOCH),
                None,
            )];
            records.extend(cuts.iter().map(|e| (key(RecordKind::Cut, group, *e), None)));
            records.extend(
                started
                    .iter()
                    .map(|e| (key(RecordKind::InjectionStart, group, *e), None)),
            );
            append_state(s, p, records).await?;
            s.coordinators.barriers.borrow_mut().remove(group);
        }
        None => {
            s.coordinators.barriers.borrow_mut().remove(group);
        }
    }
    Ok(())
}

/// Looks for epoch `marker`'s marker in `topic`/`p` of this core, from the first record
/// timestamped at or after its trigger time (the time index; the marker carries that time,
/// so it is not before it), at most `MARKER_SCAN_MAX_BYTES` of log.
pub(crate) async fn find_marker_here(
    s: &CoreState,
    topic: &str,
    p: u32,
    marker: &MarkerValue,
) -> Option<u64> {
    let part = crate::opening::partition(s, topic, p).await?;
    let log = part.log();
    let from = log
        .offset_for_timestamp(marker.triggered_at_ms)
        .await
        .ok()
        .flatten()?
        .offset;
    let mut next = from.max(log.log_start_offset());
    let mut scanned = 0u64;
    while next < log.high_watermark() && scanned < MARKER_SCAN_MAX_BYTES {
        let bytes = log.read(next, MARKER_SCAN_READ_BYTES).await.ok()?;
        if bytes.is_empty() {
            return None;
        }
        scanned += bytes.len() as u64;
        let before = next;
        for (h, one) in engine::batch::stored_batches(&bytes) {
            if h.is_control() {
                if let Some((BARRIER_CONTROL_TYPE, Some(v))) = engine::txn::control_record_of(one) {
                    if format::decode_marker_value(&v).is_ok_and(|m| &m == marker) {
                        return Some(h.base_offset as u64);
                    }
                }
            }
            next = next.max(h.last_offset() as u64 + 1);
        }
        if next <= before {
            return None;
        }
    }
    None
}

/// Publishes the cut of an injection a crash (or a failed publish) left started: each
/// target's marker is looked for from its trigger time (on this node's cores; another
/// node's partition counts as missing), and the cut is complete only if every one is found.
pub(crate) async fn finish_interrupted(
    s: &Rc<CoreState>,
    group: &str,
    p: u32,
    def: &meta::BarrierGroupDef,
    epoch: i64,
    start: InjectionStart,
) -> Result<(), Refusal> {
    let marker = MarkerValue {
        group: group.to_string(),
        epoch,
        triggered_at_ms: start.triggered_at_ms,
    };
    let targets = targets_of(&start);
    let mut scatter: Scatter<(String, u32)> = Scatter::default();
    for (i, (topic, partition)) in targets.iter().enumerate() {
        if let Some(core) = s.owner_core(topic, *partition) {
            scatter.push(core, (i, 0), (topic.clone(), *partition));
        }
    }
    let m = marker.clone();
    let found = scatter
        .gather(s, move |s, items: Vec<(String, u32)>| {
            let m = m.clone();
            async move {
                let mut out = Vec::with_capacity(items.len());
                for (topic, p) in items {
                    out.push(find_marker_here(&s, &topic, p, &m).await);
                }
                out
            }
        })
        .await;
    let mut offsets = BTreeMap::new();
    for ((i, _), r) in found {
        if let Ok(Some(offset)) = r {
            offsets.insert(targets[i].clone(), offset);
        }
    }
    let cut = cut_of(epoch, &start, &offsets);
    tracing::info!(
        group,
        epoch,
        found = offsets.len(),
        "finishing a barrier injection a restart interrupted"
    );
    publish(s, group, p, def, cut).await
}

/// One tick of this core's barrier coordinator: for every group whose `__barrier_state`
/// partition this core owns, the group record follows the metastore, an interrupted
/// injection is finished, and a group due by its `interval_ms` is triggered.
pub(crate) async fn barrier_tick(s: &Rc<CoreState>) {
    // Groups whose partition left this core (a shard move) are the new owner's now.
    s.coordinators
        .barriers
        .borrow_mut()
        .retain(|_, g| s.owner_core(BARRIER_STATE_TOPIC, g.partition) == Some(s.core));
    let mine: Vec<(String, u32)> = {
        let m = s.meta.borrow();
        if m.topic(BARRIER_STATE_TOPIC).is_none() {
            return;
        }
        let defined = m.barrier_groups.groups.keys().cloned();
        let known = s
            .coordinators
            .barriers
            .borrow()
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        let mut names: Vec<String> = defined.chain(known).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|g| {
                let p = format::coordinator_partition(&g);
                (g, p)
            })
            // A replicated partition's leader coordinates once it has loaded it.
            .filter(|(_, p)| {
                s.owner_core(BARRIER_STATE_TOPIC, *p) == Some(s.core)
                    && s.leads(BARRIER_STATE_TOPIC, *p)
            })
            .collect()
    };
    let mut coordinated = 0;
    for (group, p) in mine {
        if let Err((code, why)) = sync_group_record(s, &group, p).await {
            tracing::warn!(group, code, error = %why, "barrier group record not written; retried");
            continue;
        }
        let Ok(def) = definition(s, &group) else {
            continue;
        };
        coordinated += 1;
        let (interrupted, due) = {
            let mut states = s.coordinators.barriers.borrow_mut();
            let g = states
                .entry(group.clone())
                .or_insert_with(|| GroupState::new(p));
            let injecting = g.injecting.is_some();
            let interrupted = g
                .started
                .iter()
                .next()
                .filter(|_| !injecting)
                .map(|(e, st)| (*e, st.clone()));
            // A group never triggered counts from when this core first knew it.
            let last = g.last_triggered_ms().unwrap_or(g.known_since_ms);
            let due = !injecting
                && interrupted.is_none()
                && def.interval_ms != meta::BARRIER_INTERVAL_OFF_MS
                && engine::clock::system_now_ms()
                    >= last.saturating_add(wire_interval(def.interval_ms));
            (interrupted, due)
        };
        // An injection started under a later coordinator epoch than this one's is that
        // coordinator's to finish (as krabka leaves it).
        let interrupted = interrupted.filter(|(_, start)| {
            start.coordinator_epoch <= s.serving_epoch(BARRIER_STATE_TOPIC, p).unwrap_or(0)
        });
        if let Some((epoch, start)) = interrupted {
            if let Err((code, why)) = finish_interrupted(s, &group, p, &def, epoch, start).await {
                tracing::warn!(group, epoch, code, error = %why, "finishing an interrupted barrier injection; retried");
            }
        } else if due {
            let timeout_ms = s.ctx.config.barrier_injection_timeout_ms;
            if let Err((code, why)) = start_injection(s, &group, p, timeout_ms).await {
                if code != BARRIER_INJECTION_IN_PROGRESS {
                    tracing::warn!(group, code, error = %why, "interval barrier trigger");
                }
            }
        }
    }
    s.metrics.barrier.groups_coordinated.set(coordinated);
}

pub(crate) fn definition(state: &CoreState, group: &str) -> Result<meta::BarrierGroupDef, Refusal> {
    state
        .meta
        .borrow()
        .barrier_groups
        .groups
        .get(group)
        .cloned()
        .ok_or_else(|| {
            (
                RESOURCE_NOT_FOUND,
                format!(
                    "barrier group '{group}' does not exist (define it with `ringlog barrier \
                     define`)"
                ),
            )
        })
}

/// A metastore interval as the wire and `__barrier_state` carry it (-1: none).
pub(crate) fn wire_interval(interval_ms: u64) -> i64 {
    if interval_ms == meta::BARRIER_INTERVAL_OFF_MS {
        INTERVAL_OFF_MS
    } else {
        i64::try_from(interval_ms).unwrap_or(i64::MAX)
    }
}

/// What a marker is written with: its timestamp (the cut's trigger time), and the leader
/// epoch its writer expects the partition at (None: whichever this core leads it at).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MarkerAt {
    pub(crate) triggered_at_ms: i64,
    pub(crate) expected_leader_epoch: Option<i32>,
}

/// One injection: of `group` (partition `p` of `__barrier_state`), epoch `epoch`.
pub(crate) struct Injection<'a> {
    group: &'a str,
    p: u32,
    def: meta::BarrierGroupDef,
    epoch: i64,
    triggered_at_ms: i64,
    /// How long refused markers are retried before the cut is published as partial.
    timeout_ms: u64,
}
