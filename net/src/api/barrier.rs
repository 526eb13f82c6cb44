//! Barrier APIs (DESIGN.md §8; keys 1010–1014, codec in `kfc4::wire`). The coordinator's
//! work (injection, publishing cuts, the interval tick, recovery) is
//! `crate::coordinators::barrier`.
//!
//! The five APIs speak krabka's KFC-4 exactly (layouts in `kfc4::wire`), its error
//! codes included: RESOURCE_NOT_FOUND for an unknown group, INVALID_CONFIG for a definition
//! out of range, INVALID_REQUEST for a malformed topic list, NOT_COORDINATOR where another
//! node coordinates the group, FENCED_LEADER_EPOCH for a marker whose expected leader epoch
//! is not the partition's (-1 included, as krabka's newest broker).

use std::rc::Rc;
use std::time::Duration;

use engine::join::join_all;

use crate::barrier::format::{self, MarkerValue, BARRIER_STATE_PARTITIONS, BARRIER_STATE_TOPIC};
use crate::barrier::MAX_CUTS_PER_LIST;
use crate::codes::{
    self, COORDINATOR_NOT_AVAILABLE, INVALID_CONFIG, INVALID_REQUEST, NONE, NOT_LEADER_OR_FOLLOWER,
    REQUEST_TIMED_OUT,
};
use crate::coordinators::barrier::{
    coordinator, definition, ensure_loaded, on_barrier_core, start_injection, sync_group_record,
    wire_interval, write_marker_here, MarkerAt, Refusal,
};
use crate::core::CoreState;
use crate::route::Scatter;
use kfc4::wire::{
    AlterBarrierGroupsRequest, AlterBarrierGroupsResponse, BarrierRequest, BarrierResponse,
    DescribeBarrierGroupsRequest, DescribeBarrierGroupsResponse, DescribedGroup, GroupResult,
    ListBarrierCutsRequest, ListBarrierCutsResponse, MarkerResult, TriggerBarrierRequest,
    TriggerBarrierResponse, WriteBarrierMarkersRequest, WriteBarrierMarkersResponse,
    INTERVAL_OFF_MS,
};

/// How much longer than its injection's timeout a TriggerBarrier waits for the cut (the
/// injection-start's and the cut's own appends) before it answers REQUEST_TIMED_OUT.
const TRIGGER_WAIT_MARGIN_MS: u64 = 10_000;

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
    let why = || format!("{} may not do this on the cluster", who.principal);
    let code = CLUSTER_AUTHORIZATION_FAILED;
    match req {
        BarrierRequest::Alter(r) => BarrierResponse::Alter(AlterBarrierGroupsResponse {
            throttle_time_ms: 0,
            results: r
                .groups
                .iter()
                .map(|g| group_result(&g.name, Err((code, why()))))
                .collect(),
        }),
        // One row per group named (none when every group was asked for).
        BarrierRequest::Describe(r) => BarrierResponse::Describe(DescribeBarrierGroupsResponse {
            throttle_time_ms: 0,
            groups: r
                .groups
                .into_iter()
                .map(|name| refused_group(name, (code, why())))
                .collect(),
        }),
        BarrierRequest::Trigger(_) => BarrierResponse::Trigger(TriggerBarrierResponse {
            error_code: code,
            error_message: Some(why()),
            ..Default::default()
        }),
        BarrierRequest::List(_) => BarrierResponse::List(ListBarrierCutsResponse {
            error_code: code,
            error_message: Some(why()),
            ..Default::default()
        }),
        BarrierRequest::WriteMarkers(r) => {
            BarrierResponse::WriteMarkers(WriteBarrierMarkersResponse {
                topics: r
                    .topics
                    .iter()
                    .map(|(t, ps)| {
                        let rs = ps
                            .iter()
                            .map(|&(partition, _)| MarkerResult {
                                partition,
                                error_code: code,
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

// ---- 1010 AlterBarrierGroups ----

async fn alter_groups(
    state: &Rc<CoreState>,
    req: AlterBarrierGroupsRequest,
) -> AlterBarrierGroupsResponse {
    let mut results = Vec::with_capacity(req.groups.len());
    for g in req.groups {
        let outcome = if g.delete {
            let cmd = meta::Command::DeleteBarrierGroup {
                name: g.name.clone(),
            };
            alter_one(state, &g.name, cmd, true).await
        } else {
            match alteration_def(&g) {
                Ok(def) => {
                    let cmd = meta::Command::DefineBarrierGroup { def: Box::new(def) };
                    alter_one(state, &g.name, cmd, false).await
                }
                Err(refusal) => Err(refusal),
            }
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

/// What is wrong with an alteration's topic list, as krabka checks it before anything else
/// (INVALID_REQUEST): none, an empty name, a name twice.
fn topic_list_fault(topics: &[String]) -> Option<String> {
    if topics.is_empty() {
        return Some("a barrier group needs at least one topic".into());
    }
    if topics.iter().any(String::is_empty) {
        return Some("a barrier group topic name is empty".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    topics
        .iter()
        .find(|t| !seen.insert(t.as_str()))
        .map(|t| format!("a barrier group names topic {t} twice"))
}

/// A definition from the wire's numbers: interval -1 is "no periodic injection", any other
/// interval or retention below 1 is INVALID_CONFIG (the metastore checks the rest: name,
/// ranges, topics).
fn alteration_def(g: &kfc4::wire::GroupAlteration) -> Result<meta::BarrierGroupDef, Refusal> {
    if let Some(why) = topic_list_fault(&g.topics) {
        return Err((INVALID_REQUEST, why));
    }
    let interval_ms = match g.interval_ms {
        INTERVAL_OFF_MS => meta::BARRIER_INTERVAL_OFF_MS,
        ms if ms <= 0 => {
            return Err((
                INVALID_CONFIG,
                format!(
                    "invalid barrier group definition: interval_ms {ms}: the injection \
                     interval must be one millisecond or more (or -1: none)"
                ),
            ))
        }
        ms => ms as u64,
    };
    let retained_cuts = match u32::try_from(g.retained_cuts) {
        Ok(n) if n >= 1 => n,
        _ => {
            return Err((
                INVALID_CONFIG,
                format!(
                    "invalid barrier group definition: retained_cuts is {}, and it must be one \
                     or more",
                    g.retained_cuts
                ),
            ))
        }
    };
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
        let synced = on_barrier_core(state, group, move |s, p| async move {
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
    let mut groups = Vec::new();
    if req.groups.is_empty() {
        // Every group this node coordinates, by name (as krabka: a client asks each broker).
        let names: Vec<String> = state
            .meta
            .borrow()
            .barrier_groups
            .groups
            .keys()
            .cloned()
            .collect();
        for name in names {
            if coordinator(state, &name).is_ok() {
                let row = describe_one(state, name).await;
                if row.error_code == NONE {
                    groups.push(row);
                }
            }
        }
    } else {
        groups.reserve(req.groups.len());
        for name in req.groups {
            groups.push(describe_one(state, name).await);
        }
    }
    DescribeBarrierGroupsResponse {
        throttle_time_ms: 0,
        groups,
    }
}

/// The row of a group DescribeBarrierGroups refuses to describe.
fn refused_group(name: String, (code, why): Refusal) -> DescribedGroup {
    DescribedGroup {
        name,
        error_code: code,
        error_message: Some(why),
        ..Default::default()
    }
}

async fn describe_one(state: &Rc<CoreState>, name: String) -> DescribedGroup {
    let def = match definition(state, &name) {
        Ok(def) => def,
        Err(refusal) => return refused_group(name, refusal),
    };
    let group = name.clone();
    let last_epoch = on_barrier_core(state, &name, move |s, p| async move {
        ensure_loaded(&s, p).await?;
        let states = s.coordinators.barriers.borrow();
        Ok::<_, Refusal>(states.get(&group).map_or(0, |g| g.last_published_epoch()))
    })
    .await
    .and_then(|r| r);
    match last_epoch {
        Ok(last_epoch) => DescribedGroup {
            name,
            error_code: NONE,
            error_message: None,
            topics: def.topics,
            interval_ms: wire_interval(def.interval_ms),
            retained_cuts: i32::try_from(def.retained_cuts).unwrap_or(i32::MAX),
            last_epoch,
            // Answered by this node's coordinator core: this node leads the partition.
            coordinator_id: i32::try_from(state.ctx.config.node_id).unwrap_or(-1),
        },
        Err(refusal) => refused_group(name, refusal),
    }
}

// ---- 1012 TriggerBarrier ----

async fn trigger(state: &Rc<CoreState>, req: TriggerBarrierRequest) -> TriggerBarrierResponse {
    let configured = state.ctx.config.barrier_injection_timeout_ms;
    // A shorter timeout than the broker's may be asked for, not a longer one.
    let timeout_ms = match u64::try_from(req.timeout_ms) {
        Ok(ms) if ms > 0 => ms.min(configured),
        _ => configured,
    };
    let group = req.group.clone();
    let wait = Duration::from_millis(timeout_ms + TRIGGER_WAIT_MARGIN_MS);
    let answer = on_barrier_core(state, &req.group, move |s, p| async move {
        let (epoch, _, done) = start_injection(&s, &group, p, timeout_ms).await?;
        // Some(cut): published; Some(None): the injection failed (the coordinator's tick
        // finishes it); None: not published within the wait.
        let ended = futures_lite::future::or(async { Some(done.await.flatten()) }, async {
            glommio::timer::sleep(wait).await;
            None
        })
        .await;
        let unfinished = |code, how: String| {
            (
                code,
                format!(
                    "barrier group '{group}' epoch {epoch}: {how}; the coordinator finishes it \
                     (see `ringlog barrier list`)"
                ),
            )
        };
        match ended {
            Some(Some(cut)) => Ok(cut),
            Some(None) => Err(unfinished(
                COORDINATOR_NOT_AVAILABLE,
                "the cut could not be published".into(),
            )),
            None => Err(unfinished(
                REQUEST_TIMED_OUT,
                format!("the cut was not published within {} ms", wait.as_millis()),
            )),
        }
    })
    .await
    .and_then(|r| r);
    match answer {
        Ok(cut) => TriggerBarrierResponse {
            throttle_time_ms: 0,
            error_code: NONE,
            error_message: None,
            epoch: cut.epoch,
            status: cut.status.code(),
            topics: cut.offsets,
            missing: cut.missing,
        },
        Err((code, why)) => TriggerBarrierResponse {
            error_code: code,
            error_message: Some(why),
            ..Default::default()
        },
    }
}

// ---- 1013 ListBarrierCuts ----

async fn list_cuts(state: &Rc<CoreState>, req: ListBarrierCutsRequest) -> ListBarrierCutsResponse {
    let mut out = ListBarrierCutsResponse::default();
    let listed = match definition(state, &req.group) {
        Err(e) => Err(e),
        Ok(_) => {
            let (group, from_epoch) = (req.group.clone(), req.from_epoch);
            // Negative: every cut (up to the bound of one answer).
            let most = usize::try_from(req.max_results)
                .map_or(MAX_CUTS_PER_LIST, |n| n.min(MAX_CUTS_PER_LIST));
            on_barrier_core(state, &req.group, move |s, p| async move {
                ensure_loaded(&s, p).await?;
                let states = s.coordinators.barriers.borrow();
                Ok::<_, Refusal>(states.get(&group).map_or_else(Vec::new, |g| {
                    g.cuts
                        .range(from_epoch..)
                        .take(most)
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

/// WriteBarrierMarkers: a marker into each named partition of this node, fenced by its
/// expected leader epoch (a negative one is fenced too); a partition another node leads is
/// NOT_LEADER_OR_FOLLOWER. One result per partition, in request order.
async fn write_markers_request(
    state: &Rc<CoreState>,
    req: WriteBarrierMarkersRequest,
) -> WriteBarrierMarkersResponse {
    let marker = MarkerValue {
        group: req.group.clone(),
        epoch: req.epoch,
        triggered_at_ms: req.triggered_at_ms,
    };
    let value = format::encode_marker_value(&marker);
    let mut out: Vec<(String, Vec<MarkerResult>)> = Vec::with_capacity(req.topics.len());
    let mut scatter: Scatter<(String, u32, i32)> = Scatter::default();
    for (ti, (topic, partitions)) in req.topics.iter().enumerate() {
        let mut rows = Vec::with_capacity(partitions.len());
        for (pi, &(partition, expected_epoch)) in partitions.iter().enumerate() {
            let core = u32::try_from(partition)
                .ok()
                .and_then(|p| state.owner_core(topic, p).map(|core| (p, core)));
            let error_code = match core {
                Some((p, core)) => {
                    scatter.push(core, (ti, pi), (topic.clone(), p, expected_epoch));
                    NONE
                }
                None => NOT_LEADER_OR_FOLLOWER,
            };
            rows.push(MarkerResult {
                partition,
                error_code,
                offset: -1,
            });
        }
        out.push((topic.clone(), rows));
    }
    let triggered_at_ms = req.triggered_at_ms;
    let written = scatter
        .gather(state, move |s, items: Vec<(String, u32, i32)>| {
            let value = value.clone();
            async move {
                join_all(items.into_iter().map(|(topic, p, expected)| {
                    let (s, value) = (s.clone(), value.clone());
                    async move {
                        let at = MarkerAt {
                            triggered_at_ms,
                            expected_leader_epoch: Some(expected),
                        };
                        write_marker_here(&s, &topic, p, value, at).await
                    }
                }))
                .await
            }
        })
        .await;
    for ((ti, pi), r) in written {
        let row = &mut out[ti].1[pi];
        match r {
            Ok(Ok(offset)) => row.offset = offset as i64,
            Ok(Err((code, why))) => {
                tracing::debug!(group = %req.group, code, error = %why, "WriteBarrierMarkers refused a partition");
                row.error_code = code;
            }
            Err(_) => row.error_code = NOT_LEADER_OR_FOLLOWER,
        }
    }
    WriteBarrierMarkersResponse { topics: out }
}
