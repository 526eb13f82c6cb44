//! Barrier APIs (seed 003, DESIGN.md §8; keys 1010–1014, codec in `crate::barrier::wire`)
//! and the coordinator's work: injecting an epoch's markers into every partition of a group's
//! topics, publishing the cut, the interval tick, and finishing an injection a crash
//! interrupted.
//!
//! An injection of group G, epoch E, on G's coordinator core:
//! 1. E = the highest epoch on record + 1 (one injection of a group at a time:
//!    BARRIER_INJECTION_IN_PROGRESS for a second trigger);
//! 2. the targets are frozen: every partition of G's topics, each with its high watermark
//!    (its marker will be at or after it);
//! 3. the injection-start record (E, targets) is appended to `__barrier_state`, durable
//!    before any marker;
//! 4. a marker (control batch, type 1000) goes into every target through that partition's
//!    own append path, durable before it counts; a refused one is retried with back-off
//!    until `barrier-injection-timeout-ms`;
//! 5. the cut is published in one batch with the injection-start's tombstone and the
//!    tombstones of the cuts past `retained_cuts`: complete, or partial with the partitions
//!    that never took a marker as `missing`.
//!
//! A crash between 3 and 5 leaves the injection-start on record: the tick then looks for
//! E's marker in each target from its frozen offset and publishes the cut as it finds it
//! (partial unless every marker is there).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use engine::join::join_all;

use crate::barrier::format::{
    self, Cut, CutStatus, GroupValue, InjectionStart, MarkerValue, RecordKind, StateKey,
    BARRIER_CONTROL_TYPE, BARRIER_STATE_PARTITIONS, BARRIER_STATE_TOPIC,
};
use crate::barrier::wire::{
    AlterBarrierGroupsRequest, AlterBarrierGroupsResponse, BarrierRequest, BarrierResponse,
    DescribeBarrierGroupsRequest, DescribeBarrierGroupsResponse, DescribedGroup, GroupResult,
    ListBarrierCutsRequest, ListBarrierCutsResponse, MarkerResult, TriggerBarrierRequest,
    TriggerBarrierResponse, WriteBarrierMarkersRequest, WriteBarrierMarkersResponse,
    BARRIER_INJECTION_IN_PROGRESS,
};
use crate::barrier::{
    GroupState, BARRIER_TICK_MS, MARKER_RETRY_FIRST_BACKOFF_MS, MARKER_RETRY_MAX_BACKOFF_MS,
    MARKER_SCAN_MAX_BYTES, MAX_CUTS_PER_LIST,
};
use crate::codes::{
    self, COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND, INVALID_REQUEST, NONE,
    NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
};
use crate::core::CoreState;
use crate::node_rpc::{NodeRequest, NodeResponse};
use crate::route::Scatter;

/// A Kafka error code and why.
type Refusal = (i16, String);

/// How much longer than `barrier-injection-timeout-ms` a TriggerBarrier may wait for its cut
/// (the injection-start and the cut's own appends); a longer `wait_ms` is cut to it.
const TRIGGER_WAIT_MARGIN_MS: u64 = 10_000;
/// Bytes read at a time when finishing an interrupted injection looks for its markers.
const MARKER_SCAN_READ_BYTES: usize = 1 << 20;

fn now_ms() -> i64 {
    engine::clock::system_now_ms()
}

/// Kafka's CLUSTER_AUTHORIZATION_FAILED.
const CLUSTER_AUTHORIZATION_FAILED: i16 =
    kafka_protocol::ResponseError::ClusterAuthorizationFailed.code();

/// The cluster operation a barrier request needs (ACLs): Alter to change groups or trigger,
/// Describe to read them, ClusterAction for the coordinators' markers.
fn operation(req: &BarrierRequest) -> i8 {
    match req {
        BarrierRequest::Alter(_) | BarrierRequest::Trigger(_) => crate::acl::OP_ALTER,
        BarrierRequest::Describe(_) | BarrierRequest::List(_) => crate::acl::OP_DESCRIBE,
        BarrierRequest::WriteMarkers(_) => crate::acl::OP_CLUSTER_ACTION,
    }
}

/// Answers one barrier request from `who`: refused whole (CLUSTER_AUTHORIZATION_FAILED in
/// every result) without the cluster operation it needs.
pub async fn serve_as(
    state: &Rc<CoreState>,
    who: &crate::acl::Subject,
    req: BarrierRequest,
) -> BarrierResponse {
    let op = operation(&req);
    if crate::api::authz::on_cluster(state, who, op) {
        return serve(state, req).await;
    }
    let why = || Some(format!("{} may not do this on the cluster", who.principal));
    let code = CLUSTER_AUTHORIZATION_FAILED;
    match req {
        BarrierRequest::Alter(r) => BarrierResponse::Alter(AlterBarrierGroupsResponse {
            throttle_time_ms: 0,
            results: r
                .groups
                .iter()
                .map(|g| GroupResult {
                    name: g.name.clone(),
                    error_code: code,
                    error_message: why(),
                })
                .collect(),
        }),
        BarrierRequest::Describe(r) => BarrierResponse::Describe(DescribeBarrierGroupsResponse {
            throttle_time_ms: 0,
            groups: r
                .groups
                .unwrap_or_default()
                .into_iter()
                .map(|name| DescribedGroup {
                    name,
                    error_code: code,
                    error_message: why(),
                    ..Default::default()
                })
                .collect(),
        }),
        BarrierRequest::Trigger(_) => BarrierResponse::Trigger(TriggerBarrierResponse {
            error_code: code,
            error_message: why(),
            epoch: -1,
            status: -1,
            ..Default::default()
        }),
        BarrierRequest::List(_) => BarrierResponse::List(ListBarrierCutsResponse {
            error_code: code,
            error_message: why(),
            ..Default::default()
        }),
        BarrierRequest::WriteMarkers(r) => {
            BarrierResponse::WriteMarkers(WriteBarrierMarkersResponse {
                throttle_time_ms: 0,
                topics: r
                    .topics
                    .iter()
                    .map(|(t, ps)| {
                        let rs = ps
                            .iter()
                            .map(|&partition| MarkerResult {
                                partition,
                                error_code: code,
                                error_message: why(),
                                offset: -1,
                            })
                            .collect();
                        (t.clone(), rs)
                    })
                    .collect(),
            })
        }
    }
}

/// Answers one barrier request.
pub async fn serve(state: &Rc<CoreState>, req: BarrierRequest) -> BarrierResponse {
    match req {
        BarrierRequest::Alter(r) => BarrierResponse::Alter(alter_groups(state, r).await),
        BarrierRequest::Describe(r) => BarrierResponse::Describe(describe_groups(state, r).await),
        BarrierRequest::Trigger(r) => BarrierResponse::Trigger(trigger(state, r).await),
        BarrierRequest::List(r) => BarrierResponse::List(list_cuts(state, r).await),
        BarrierRequest::WriteMarkers(r) => {
            BarrierResponse::WriteMarkers(write_markers_request(state, r).await)
        }
    }
}

/// The `__barrier_state` partition of `group` and the core of this node coordinating it.
fn coordinator(state: &CoreState, group: &str) -> Result<(u32, usize), Refusal> {
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
async fn on_coordinator<R, F, Fut>(state: &Rc<CoreState>, group: &str, f: F) -> Result<R, Refusal>
where
    R: Send + 'static,
    F: FnOnce(Rc<CoreState>, u32) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = R> + 'static,
{
    let (partition, core) = coordinator(state, group)?;
    crate::route::on_coordinator_core(
        state,
        BARRIER_STATE_TOPIC,
        Some((partition, core)),
        Some(partition),
        f,
    )
    .await
    .map_err(|code| (code, not_loaded(partition)))
}

/// Why a replica of `__barrier_state` partition `p` does not coordinate its groups now.
fn not_loaded(p: u32) -> String {
    format!("{BARRIER_STATE_TOPIC}/{p}: this replica does not lead it (or is still loading it); try again")
}

fn definition(state: &CoreState, group: &str) -> Result<meta::BarrierGroupDef, Refusal> {
    state
        .meta
        .borrow()
        .barrier_groups
        .groups
        .get(group)
        .cloned()
        .ok_or_else(|| {
            (
                GROUP_ID_NOT_FOUND,
                format!("no barrier group '{group}' (define it with `ringlog barrier define`)"),
            )
        })
}

// ---- 1010 AlterBarrierGroups ----

async fn alter_groups(
    state: &Rc<CoreState>,
    req: AlterBarrierGroupsRequest,
) -> AlterBarrierGroupsResponse {
    let mut results = Vec::with_capacity(req.groups.len());
    for g in req.groups {
        let cmd = if g.delete {
            meta::Command::DeleteBarrierGroup {
                name: g.name.clone(),
            }
        } else {
            match alteration_def(&g) {
                Ok(def) => meta::Command::DefineBarrierGroup { def: Box::new(def) },
                Err(why) => {
                    results.push(group_result(&g.name, Err((INVALID_REQUEST, why))));
                    continue;
                }
            }
        };
        let outcome = if req.validate_only {
            // The metastore's own rules, on a copy of this core's state.
            let mut copy = state.meta.borrow().clone();
            copy.apply(&cmd)
                .map(|_| ())
                .map_err(|r| (codes::for_refusal(&r), r.to_string()))
        } else {
            alter_one(state, &g.name, cmd, g.delete).await
        };
        results.push(group_result(&g.name, outcome));
    }
    AlterBarrierGroupsResponse {
        throttle_time_ms: 0,
        results,
    }
}

fn group_result(name: &str, outcome: Result<(), Refusal>) -> GroupResult {
    let (error_code, error_message) = match outcome {
        Ok(()) => (NONE, None),
        Err((code, why)) => (code, Some(why)),
    };
    GroupResult {
        name: name.to_string(),
        error_code,
        error_message,
    }
}

/// A definition from the wire's numbers (the metastore checks the rest).
fn alteration_def(
    g: &crate::barrier::wire::GroupAlteration,
) -> Result<meta::BarrierGroupDef, String> {
    let interval_ms = u64::try_from(g.interval_ms)
        .map_err(|_| format!("interval_ms {} must not be negative", g.interval_ms))?;
    let retained_cuts = u32::try_from(g.retained_cuts)
        .map_err(|_| format!("retained_cuts {} must not be negative", g.retained_cuts))?;
    Ok(meta::BarrierGroupDef {
        name: g.name.clone(),
        topics: g.topics.clone(),
        interval_ms,
        retained_cuts,
    })
}

/// Writes a definition or deletion to the metastore (creating `__barrier_state` first, for the
/// first group), then has the coordinator write the group record (or its tombstones) now
/// rather than at its next tick.
async fn alter_one(
    state: &Rc<CoreState>,
    group: &str,
    cmd: meta::Command,
    delete: bool,
) -> Result<(), Refusal> {
    if !delete && state.meta.borrow().topic(BARRIER_STATE_TOPIC).is_none() {
        create_state_topic(state).await?;
    }
    crate::api::admin::write(state, cmd).await?;
    let name = group.to_string();
    if coordinator(state, group).is_ok() {
        let synced = on_coordinator(state, group, move |s, p| async move {
            sync_group_record(&s, &name, p).await
        })
        .await
        .and_then(|r| r);
        // A coordinator still loading (a new `__barrier_state`) writes it in its tick too.
        if let Err((code, why)) = synced {
            // Written by the coordinator's tick later; the definition itself is made.
            tracing::warn!(group, code, error = %why, "writing the barrier group record");
        }
    }
    Ok(())
}

/// Creates the compacted `__barrier_state` (50 partitions, spread like the other internal
/// topics over the nodes and cores).
async fn create_state_topic(state: &Rc<CoreState>) -> Result<(), Refusal> {
    let slots = crate::cluster::internal_topic_replicas(
        &state.ctx.config,
        state.ctx.config.barrier_state_replication_factor,
    );
    let replicas = (0..BARRIER_STATE_PARTITIONS as usize)
        .map(|i| slots[i % slots.len()].clone())
        .collect();
    let configs = crate::cluster::internal_topic_configs(&state.ctx.config);
    let cmd = crate::api::admin::create_command(
        BARRIER_STATE_TOPIC,
        BARRIER_STATE_PARTITIONS,
        configs,
        replicas,
    );
    match crate::api::admin::write(state, cmd).await {
        Ok(()) => Ok(()),
        Err((code, _)) if code == codes::TOPIC_ALREADY_EXISTS => Ok(()),
        Err(e) => Err(e),
    }
}

// ---- 1011 DescribeBarrierGroups ----

async fn describe_groups(
    state: &Rc<CoreState>,
    req: DescribeBarrierGroupsRequest,
) -> DescribeBarrierGroupsResponse {
    let names: Vec<String> = match req.groups {
        Some(names) => names,
        None => state
            .meta
            .borrow()
            .barrier_groups
            .groups
            .keys()
            .cloned()
            .collect(),
    };
    let mut groups = Vec::with_capacity(names.len());
    for name in names {
        groups.push(describe_one(state, name).await);
    }
    DescribeBarrierGroupsResponse {
        throttle_time_ms: 0,
        groups,
    }
}

async fn describe_one(state: &Rc<CoreState>, name: String) -> DescribedGroup {
    let mut out = DescribedGroup {
        name: name.clone(),
        coordinator_partition: format::coordinator_partition(&name) as i32,
        latest_epoch: -1,
        latest_complete_epoch: -1,
        injecting_epoch: -1,
        ..Default::default()
    };
    let def = match definition(state, &name) {
        Ok(def) => def,
        Err((code, why)) => {
            out.error_code = code;
            out.error_message = Some(why);
            return out;
        }
    };
    out.topics = def.topics;
    out.interval_ms = def.interval_ms as i64;
    out.retained_cuts = def.retained_cuts as i32;
    let group = name.clone();
    let figures = on_coordinator(state, &name, move |s, p| async move {
        ensure_loaded(&s, p).await?;
        let states = s.barriers.borrow();
        Ok::<_, Refusal>(states.get(&group).map(|g| {
            (
                g.latest().map(|c| c.epoch),
                g.latest_complete().map(|c| c.epoch),
                g.injecting.or_else(|| g.started.keys().next().copied()),
            )
        }))
    })
    .await
    .and_then(|r| r);
    match figures {
        Ok(Some((latest, complete, injecting))) => {
            out.latest_epoch = latest.unwrap_or(-1);
            out.latest_complete_epoch = complete.unwrap_or(-1);
            out.injecting_epoch = injecting.unwrap_or(-1);
        }
        Ok(None) => {}
        Err((code, why)) => {
            out.error_code = code;
            out.error_message = Some(why);
        }
    }
    out
}

// ---- 1012 TriggerBarrier ----

async fn trigger(state: &Rc<CoreState>, req: TriggerBarrierRequest) -> TriggerBarrierResponse {
    let mut out = TriggerBarrierResponse {
        status: -1,
        epoch: -1,
        triggered_at_ms: -1,
        completed_at_ms: -1,
        ..Default::default()
    };
    if req.wait_ms < 0 {
        out.error_code = INVALID_REQUEST;
        out.error_message = Some(format!("wait_ms {} must not be negative", req.wait_ms));
        return out;
    }
    let group = req.group.clone();
    // No injection outlasts its marker retries by much: a longer wait holds the request for
    // nothing.
    let longest = state.ctx.config.barrier_injection_timeout_ms + TRIGGER_WAIT_MARGIN_MS;
    let wait = Duration::from_millis((req.wait_ms as u64).min(longest));
    let answer = on_coordinator(state, &req.group, move |s, p| async move {
        let (epoch, triggered_at, done) = start_injection(&s, &group, p).await?;
        let cut = if wait.is_zero() {
            None
        } else {
            futures_lite::future::or(async { done.await.flatten() }, async {
                glommio::timer::sleep(wait).await;
                None
            })
            .await
        };
        Ok::<_, Refusal>((epoch, triggered_at, cut))
    })
    .await
    .and_then(|r| r);
    match answer {
        Ok((epoch, triggered_at, cut)) => {
            out.epoch = epoch;
            out.triggered_at_ms = triggered_at;
            if let Some(cut) = cut {
                out.status = cut.status as i8;
                out.completed_at_ms = cut.completed_at_ms;
            }
        }
        Err((code, why)) => {
            out.error_code = code;
            out.error_message = Some(why);
        }
    }
    out
}

// ---- 1013 ListBarrierCuts ----

async fn list_cuts(state: &Rc<CoreState>, req: ListBarrierCutsRequest) -> ListBarrierCutsResponse {
    let mut out = ListBarrierCutsResponse::default();
    let listed = match definition(state, &req.group) {
        Err(e) => Err(e),
        Ok(_) => {
            let (group, min_epoch) = (req.group.clone(), req.min_epoch);
            on_coordinator(state, &req.group, move |s, p| async move {
                ensure_loaded(&s, p).await?;
                let states = s.barriers.borrow();
                Ok::<_, Refusal>(states.get(&group).map_or_else(Vec::new, |g| {
                    g.cuts
                        .range(min_epoch..)
                        .take(MAX_CUTS_PER_LIST)
                        .map(|(_, c)| c.clone())
                        .collect()
                }))
            })
            .await
            .and_then(|r| r)
        }
    };
    match listed {
        Ok(cuts) => out.cuts = cuts,
        Err((code, why)) => {
            out.error_code = code;
            out.error_message = Some(why);
        }
    }
    out
}

// ---- 1014 WriteBarrierMarkers ----

async fn write_markers_request(
    state: &Rc<CoreState>,
    req: WriteBarrierMarkersRequest,
) -> WriteBarrierMarkersResponse {
    let marker = MarkerValue {
        group: req.group.clone(),
        epoch: req.epoch,
        triggered_at_ms: req.triggered_at_ms,
    };
    let mut targets = Vec::new();
    for (topic, partitions) in &req.topics {
        for &p in partitions {
            if p >= 0 {
                targets.push((topic.clone(), p as u32));
            }
        }
    }
    let mut results = mark_partitions(state, &marker, &targets).await.into_iter();
    let topics = req
        .topics
        .iter()
        .map(|(topic, partitions)| {
            let rs = partitions
                .iter()
                .map(|&p| {
                    let r = if p < 0 {
                        Err((UNKNOWN_TOPIC_OR_PARTITION, format!("partition {p}")))
                    } else {
                        results
                            .next()
                            .unwrap_or(Err((UNKNOWN_TOPIC_OR_PARTITION, "no answer".to_string())))
                    };
                    match r {
                        Ok(offset) => MarkerResult {
                            partition: p,
                            error_code: NONE,
                            error_message: None,
                            offset: offset as i64,
                        },
                        Err((code, why)) => MarkerResult {
                            partition: p,
                            error_code: code,
                            error_message: Some(why),
                            offset: -1,
                        },
                    }
                })
                .collect();
            (topic.clone(), rs)
        })
        .collect();
    WriteBarrierMarkersResponse {
        throttle_time_ms: 0,
        topics,
    }
}

/// Answers another node's `BarrierMarker` call for a partition this node owns.
pub async fn serve_node_request(state: &Rc<CoreState>, req: NodeRequest) -> NodeResponse {
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
pub async fn mark_partitions(
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
                    async move { write_marker_here(&s, &topic, p, value).await }
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

/// One marker into `topic`/`p` of this core, through the partition's own append path.
async fn write_marker_here(
    s: &CoreState,
    topic: &str,
    p: u32,
    value: Vec<u8>,
) -> Result<u64, Refusal> {
    s.check_leads(topic, p)?;
    let Some(part) = s.partition(topic, p).await else {
        return Err((
            NOT_LEADER_OR_FOLLOWER,
            format!("{topic}/{p} is not open on core {}", s.core),
        ));
    };
    let offset = part
        .write_control_record(BARRIER_CONTROL_TYPE, value)
        .await
        .map_err(|e| (codes::for_partition_error(&e), format!("{topic}/{p}: {e}")))?;
    s.replicate_own_write(&(topic.to_string(), p), &part, offset)
        .await?;
    s.metrics.count_barrier_marker(topic);
    Ok(offset)
}

// ---- the coordinator ----

/// Opens (and so replays) `__barrier_state` partition `p` of this core.
async fn ensure_loaded(s: &CoreState, p: u32) -> Result<Rc<crate::core::OwnedPartition>, Refusal> {
    s.partition(BARRIER_STATE_TOPIC, p).await.ok_or_else(|| {
        (
            COORDINATOR_NOT_AVAILABLE,
            format!("{BARRIER_STATE_TOPIC}/{p} is not open on core {}", s.core),
        )
    })
}

/// Appends `records` (key, value or None for a tombstone) to `__barrier_state` partition
/// `p` of this core as one batch, durable before it returns.
async fn append_state(
    s: &CoreState,
    p: u32,
    records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
) -> Result<(), Refusal> {
    s.check_coordinates(BARRIER_STATE_TOPIC, p)
        .map_err(|code| (code, not_loaded(p)))?;
    let part = ensure_loaded(s, p).await?;
    let at = now_ms();
    let batch = engine::batch_encode::encode_uncompressed(records.into_iter().map(|(k, v)| {
        engine::batch_encode::NewRecord {
            key: Some(k.into()),
            value: v.map(Into::into),
            headers: Default::default(),
            timestamp_ms: at,
        }
    }));
    let key = (BARRIER_STATE_TOPIC.to_string(), p);
    s.coordinator_append(&key, &part, &batch, engine::Durability::Sync)
        .await
        .map(|_| ())
}

fn key(kind: RecordKind, group: &str, epoch: i64) -> Vec<u8> {
    format::encode_key(&StateKey {
        kind,
        group: group.to_string(),
        epoch,
    })
}

/// Allocates `group`'s next epoch on this (its coordinator) core and injects it in a task of
/// its own (a vanished trigger cannot stop it halfway). Returns once the injection-start
/// record is durable (so an epoch a trigger was told of is finished even after a crash):
/// the epoch, when it was triggered, and the task (its cut, once published).
async fn start_injection(
    s: &Rc<CoreState>,
    group: &str,
    p: u32,
) -> Result<(i64, i64, glommio::task::JoinHandle<Option<Cut>>), Refusal> {
    let def = definition(s, group)?;
    ensure_loaded(s, p).await?;
    let epoch = {
        let mut states = s.barriers.borrow_mut();
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
    let triggered_at = now_ms();
    s.metrics
        .barrier
        .started
        .set(s.metrics.barrier.started.get() + 1);
    let task_state = s.clone();
    let name = group.to_string();
    let (started_tx, started_rx) = glommio::channels::local_channel::new_bounded(1);
    let done = glommio::spawn_local(async move {
        let r = inject(&task_state, &name, p, def, epoch, triggered_at, started_tx).await;
        if let Some(g) = task_state.barriers.borrow_mut().get_mut(&name) {
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
async fn inject(
    s: &Rc<CoreState>,
    group: &str,
    p: u32,
    def: meta::BarrierGroupDef,
    epoch: i64,
    triggered_at_ms: i64,
    on_started: glommio::channels::local_channel::LocalSender<Result<(), Refusal>>,
) -> Result<Cut, Refusal> {
    let started = std::time::Instant::now();
    let targets = freeze_targets(s, &def).await;
    let start = InjectionStart {
        triggered_at_ms,
        targets,
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
    if let Some(g) = s.barriers.borrow_mut().get_mut(group) {
        g.started.insert(epoch, start.clone());
    }
    let marker = MarkerValue {
        group: group.to_string(),
        epoch,
        triggered_at_ms,
    };
    let mut pending: Vec<(String, u32)> = start
        .targets
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |(p, _)| (t.clone(), *p as u32)))
        .collect();
    let mut offsets: BTreeMap<(String, u32), u64> = BTreeMap::new();
    let deadline = started + Duration::from_millis(s.ctx.config.barrier_injection_timeout_ms);
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
            "barrier markers not written within barrier-injection-timeout-ms; the cut is partial"
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

/// The cut of `start`'s targets from the markers found (`offsets`); the rest are missing.
fn cut_of(epoch: i64, start: &InjectionStart, offsets: &BTreeMap<(String, u32), u64>) -> Cut {
    let mut by_topic: Vec<(String, Vec<(i32, i64)>)> = Vec::new();
    let mut missing = Vec::new();
    for (topic, parts) in &start.targets {
        let mut found = Vec::new();
        for (p, _) in parts {
            match offsets.get(&(topic.clone(), *p as u32)) {
                Some(&o) => found.push((*p, o as i64)),
                None => missing.push((topic.clone(), *p)),
            }
        }
        if !found.is_empty() {
            by_topic.push((topic.clone(), found));
        }
    }
    Cut {
        epoch,
        triggered_at_ms: start.triggered_at_ms,
        completed_at_ms: now_ms(),
        status: if missing.is_empty() {
            CutStatus::Complete
        } else {
            CutStatus::Partial
        },
        offsets: by_topic,
        missing,
    }
}

/// Every partition of `def`'s topics with its high watermark now (0 where it cannot be
/// read: the marker is looked for from the log start then).
async fn freeze_targets(
    s: &Rc<CoreState>,
    def: &meta::BarrierGroupDef,
) -> Vec<(String, Vec<(i32, i64)>)> {
    let mut targets: Vec<(String, Vec<(i32, i64)>)> = Vec::new();
    let mut scatter: Scatter<(String, u32)> = Scatter::default();
    let mut remote = Vec::new();
    for (ti, topic) in def.topics.iter().enumerate() {
        let partitions = s.meta.borrow().topic(topic).map_or(0, |t| t.partitions);
        targets.push((
            topic.clone(),
            (0..partitions as i32).map(|p| (p, 0)).collect(),
        ));
        for p in 0..partitions {
            match (s.owner_core(topic, p), s.remote_owner(topic, p)) {
                (Some(core), _) => scatter.push(core, (ti, p as usize), (topic.clone(), p)),
                (None, Some(owner)) => remote.push(((ti, p as usize), owner, topic.clone(), p)),
                (None, None) => {}
            }
        }
    }
    let local = scatter
        .gather(s, |s, items: Vec<(String, u32)>| async move {
            let mut out = Vec::with_capacity(items.len());
            for (topic, p) in items {
                out.push(
                    s.partition(&topic, p)
                        .await
                        .map(|part| part.log().high_watermark()),
                );
            }
            out
        })
        .await;
    for ((ti, pi), hw) in local {
        if let Ok(Some(hw)) = hw {
            targets[ti].1[pi].1 = hw as i64;
        }
    }
    let far = join_all(
        remote
            .into_iter()
            .map(|(slot, owner, topic, p)| async move {
                let req = NodeRequest::HighWatermark {
                    topic,
                    partition: p,
                };
                let r = crate::node_rpc::call(s, owner.node_id, owner.core_index, &req).await;
                (slot, r)
            }),
    )
    .await;
    for ((ti, pi), r) in far {
        if let Ok(NodeResponse::HighWatermark(hw)) = r {
            targets[ti].1[pi].1 = hw as i64;
        }
    }
    targets
}

/// Publishes `cut` in one batch with the tombstones of its injection-start and of the cuts
/// past `retained_cuts` (never the newest), then makes it this core's state.
async fn publish(
    s: &Rc<CoreState>,
    group: &str,
    p: u32,
    def: &meta::BarrierGroupDef,
    cut: Cut,
) -> Result<(), Refusal> {
    let epoch = cut.epoch;
    let retained = def.retained_cuts.max(1) as usize;
    let expired: Vec<i64> = {
        let states = s.barriers.borrow();
        let older: Vec<i64> = states
            .get(group)
            .map(|g| g.cuts.keys().copied().filter(|e| *e < epoch).collect())
            .unwrap_or_default();
        // Keep `retained` cuts with this one.
        let keep_older = retained - 1;
        older[..older.len().saturating_sub(keep_older)].to_vec()
    };
    let mut records = vec![
        (
            key(RecordKind::Cut, group, epoch),
            Some(format::encode_cut_value(&cut)),
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
    let mut states = s.barriers.borrow_mut();
    let g = states
        .entry(group.to_string())
        .or_insert_with(|| GroupState::new(p));
    g.started.remove(&epoch);
    for e in expired {
        g.cuts.remove(&e);
    }
    g.last_epoch = g.last_epoch.max(epoch);
    g.cuts.insert(epoch, cut);
    Ok(())
}

/// Makes `group`'s group record on `__barrier_state` say what the metastore says: its
/// definition, or (deleted) tombstones for the record and every cut.
async fn sync_group_record(s: &Rc<CoreState>, group: &str, p: u32) -> Result<(), Refusal> {
    ensure_loaded(s, p).await?;
    let def = s.meta.borrow().barrier_groups.groups.get(group).cloned();
    let wanted = def.map(|d| GroupValue {
        interval_ms: d.interval_ms as i64,
        retained_cuts: d.retained_cuts as i32,
        topics: d.topics,
    });
    let (current, cuts, started, busy) = {
        let states = s.barriers.borrow();
        match states.get(group) {
            Some(g) => (
                g.record.clone(),
                g.cuts.keys().copied().collect::<Vec<_>>(),
                g.started.keys().copied().collect::<Vec<_>>(),
                g.injecting.is_some(),
            ),
            None => (None, Vec::new(), Vec::new(), false),
        }
    };
    match wanted {
        Some(v) if current.as_ref() != Some(&v) => {
            let records = vec![(
                key(RecordKind::Group, group, -1),
                Some(format::encode_group_value(&v)),
            )];
            append_state(s, p, records).await?;
            s.barriers
                .borrow_mut()
                .entry(group.to_string())
                .or_insert_with(|| GroupState::new(p))
                .record = Some(v);
        }
        Some(_) => {}
        None if busy => {} // deleted while injecting: cleaned up once the injection is done
        None if current.is_some() || !cuts.is_empty() || !started.is_empty() => {
            let mut records = vec![(key(RecordKind::Group, group, -1), None)];
            records.extend(cuts.iter().map(|e| (key(RecordKind::Cut, group, *e), None)));
            records.extend(
                started
                    .iter()
                    .map(|e| (key(RecordKind::InjectionStart, group, *e), None)),
            );
            append_state(s, p, records).await?;
            s.barriers.borrow_mut().remove(group);
        }
        None => {
            s.barriers.borrow_mut().remove(group);
        }
    }
    Ok(())
}

/// Looks for epoch `marker`'s marker in `topic`/`p` of this core from offset `from`, at most
/// `MARKER_SCAN_MAX_BYTES` of log.
async fn find_marker_here(
    s: &CoreState,
    topic: &str,
    p: u32,
    from: u64,
    marker: &MarkerValue,
) -> Option<u64> {
    let part = s.partition(topic, p).await?;
    let log = part.log();
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
/// target's marker is looked for from its frozen offset (on this node's cores; another
/// node's partition counts as missing), and the cut is complete only if every one is found.
async fn finish_interrupted(
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
    let mut scatter: Scatter<(String, u32, u64)> = Scatter::default();
    for (ti, (topic, parts)) in start.targets.iter().enumerate() {
        for (pi, (partition, from)) in parts.iter().enumerate() {
            if let Some(core) = s.owner_core(topic, *partition as u32) {
                scatter.push(
                    core,
                    (ti, pi),
                    (topic.clone(), *partition as u32, (*from).max(0) as u64),
                );
            }
        }
    }
    let m = marker.clone();
    let found = scatter
        .gather(s, move |s, items: Vec<(String, u32, u64)>| {
            let m = m.clone();
            async move {
                let mut out = Vec::with_capacity(items.len());
                for (topic, p, from) in items {
                    out.push(find_marker_here(&s, &topic, p, from, &m).await);
                }
                out
            }
        })
        .await;
    let mut offsets = BTreeMap::new();
    for ((ti, pi), r) in found {
        if let Ok(Some(offset)) = r {
            let (topic, parts) = &start.targets[ti];
            offsets.insert((topic.clone(), parts[pi].0 as u32), offset);
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
pub async fn barrier_tick(s: &Rc<CoreState>) {
    // Groups whose partition left this core (a shard move) are the new owner's now.
    s.barriers
        .borrow_mut()
        .retain(|_, g| s.owner_core(BARRIER_STATE_TOPIC, g.partition) == Some(s.core));
    let mine: Vec<(String, u32)> = {
        let m = s.meta.borrow();
        if m.topic(BARRIER_STATE_TOPIC).is_none() {
            return;
        }
        let defined = m.barrier_groups.groups.keys().cloned();
        let known = s.barriers.borrow().keys().cloned().collect::<Vec<_>>();
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
            let mut states = s.barriers.borrow_mut();
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
                && now_ms() >= last.saturating_add(def.interval_ms as i64);
            (interrupted, due)
        };
        if let Some((epoch, start)) = interrupted {
            if let Err((code, why)) = finish_interrupted(s, &group, p, &def, epoch, start).await {
                tracing::warn!(group, epoch, code, error = %why, "finishing an interrupted barrier injection; retried");
            }
        } else if due {
            if let Err((code, why)) = start_injection(s, &group, p).await {
                if code != BARRIER_INJECTION_IN_PROGRESS {
                    tracing::warn!(group, code, error = %why, "interval barrier trigger");
                }
            }
        }
    }
    s.metrics.barrier.groups_coordinated.set(coordinated);
}

/// Runs `barrier_tick` every `BARRIER_TICK_MS` until the core stops.
pub async fn barrier_tick_loop(s: Rc<CoreState>) {
    loop {
        glommio::timer::sleep(Duration::from_millis(BARRIER_TICK_MS)).await;
        barrier_tick(&s).await;
    }
}
