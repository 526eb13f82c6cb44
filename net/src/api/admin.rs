//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
//! IncrementalAlterConfigs and legacy AlterConfigs (one path for both). Each change goes
//! through the metastore; the handler answers once every core has applied it (partitions
//! opened or closed), so a client can use the topic as soon as it hears back.

use std::collections::BTreeMap;
use std::rc::Rc;

use engine::join::join_all;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse as LegacyResourceResponse;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, CreatePartitionsRequest, CreatePartitionsResponse,
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, TopicName,
};
use meta::{Assignment, Command};
use uuid::Uuid;

use super::str_bytes;
use crate::codes;
use crate::core::CoreState;
use crate::topic_config;

/// DescribeConfigs / AlterConfigs resource types.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;
/// DescribeConfigs config sources.
const SOURCE_TOPIC_CONFIG: i8 = 1;
const SOURCE_DEFAULT_CONFIG: i8 = 5;
const SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG: i8 = 6;
/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// A config resource type as Kafka users know it (`ConfigResource.Type`), with its code.
fn config_resource_type_name(code: i8) -> String {
    let name = match code {
        RESOURCE_TOPIC => "TOPIC",
        RESOURCE_BROKER => "BROKER",
        RESOURCE_BROKER_LOGGER => "BROKER_LOGGER",
        16 => "CLIENT_METRICS",
        32 => "GROUP",
        _ => "UNKNOWN",
    };
    format!("{name} ({code})")
}

/// An IncrementalAlterConfigs operation as Kafka users know it (`AlterConfigOp.OpType`).
fn config_operation_name(op: i8) -> String {
    match op {
        OP_SET => "SET".into(),
        OP_DELETE => "DELETE".into(),
        OP_APPEND => "APPEND".into(),
        OP_SUBTRACT => "SUBTRACT".into(),
        other => format!("operation {other}"),
    }
}

/// The most values one APPEND or SUBTRACT may name (a list config holds a handful: each value
/// is looked up in the list, so the request's count is bounded before that work).
const MAX_LIST_OPERATION_VALUES: usize = 64;

/// The broker configs of Kafka's replication throttles. ringlog has no replication throttle,
/// so none of them is ever set: deleting one (what `kafka-reassign-partitions --verify` does
/// once a reassignment is done) changes nothing and is answered as done.
const REPLICATION_THROTTLE_BROKER_CONFIGS: [&str; 3] = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

type Refusal = (i16, String);

/// A topic's configs as DescribeConfigs and CreateTopics (v5+) show them: every key, its value,
/// its source (the topic's own, or the broker default) and its type.
fn topic_config_entries(
    state: &CoreState,
    configs: &BTreeMap<String, String>,
) -> Vec<(String, String, i8, topic_config::ConfigType)> {
    topic_config::describe(configs, &state.ctx.config.log_defaults)
        .into_iter()
        .map(|(k, v, is_default, ty)| {
            let source = if is_default {
                SOURCE_DEFAULT_CONFIG
            } else {
                SOURCE_TOPIC_CONFIG
            };
            (k, v, source, ty)
        })
        .collect()
}

/// Waits until every core has applied the metastore change at `log_index`.
pub async fn wait_all_cores(state: &Rc<CoreState>, log_index: u64) {
    let waits = (0..state.shards.cores()).map(|core| async move {
        let wait = move |s: Rc<CoreState>| async move { s.wait_applied(log_index).await };
        let _ = crate::route::on_core(state, core, wait).await;
    });
    join_all(waits).await;
}

/// Spreads `count` new partitions over the live nodes and their cores, round robin after
/// everything placed so far (`crate::cluster::place`; one node: over its cores). Refuses,
/// before anything is allocated for them, counts above the metastore's per-topic limit and
/// partitions past this node's `max-partitions`.
fn place(state: &CoreState, count: u32, rf: usize) -> Result<Vec<Vec<Assignment>>, Refusal> {
    check_partition_count(state, count)?;
    check_replication_factor(state, rf)?;
    let own = (state.node_id(), state.shards.cores() as u32);
    crate::cluster::place_replicas(&state.meta.borrow(), own, count, rf).ok_or_else(|| {
        (
            codes::INVALID_REPLICATION_FACTOR,
            format!("replication factor {rf} is above the live nodes of this cluster"),
        )
    })
}

/// A replication factor of 1 up to the live nodes (at most `MAX_REPLICATION_FACTOR`).
fn check_replication_factor(state: &CoreState, rf: usize) -> Result<(), Refusal> {
    let live = state.meta.borrow().live_brokers().count().max(1);
    let max = live.min(meta::replication::MAX_REPLICATION_FACTOR);
    if rf == 0 || rf > max {
        return Err((
            codes::INVALID_REPLICATION_FACTOR,
            format!(
                "replication factor {rf} must be 1 to {max} (the live nodes of this cluster, at most {})",
                meta::replication::MAX_REPLICATION_FACTOR
            ),
        ));
    }
    Ok(())
}

/// The replication factor a CreateTopics entry asks for (-1: `default-replication-factor`).
fn requested_replication_factor(state: &CoreState, rf: i16) -> usize {
    if rf == -1 {
        state.ctx.config.default_replication_factor
    } else {
        rf.max(0) as usize
    }
}

/// The placement a client names (CreateTopics' or CreatePartitions' assignments): for
/// partition indexes 0..count, each exactly once, the one broker id it goes to: a node, or
/// one core of a core-direct node (`cluster::assignment_of_broker_id`); each names its
/// replicas' brokers, the first the preferred leader, every partition as many on distinct
/// nodes, and CreateTopics' count and replication factor must be -1, as Kafka requires.
fn explicit_assignments(
    state: &CoreState,
    count: i32,
    replication_factor: i16,
    named: impl Iterator<Item = (i32, Vec<i32>)>,
) -> Result<Vec<Vec<Assignment>>, Refusal> {
    let bad = |why: String| (codes::INVALID_REPLICA_ASSIGNMENT, why);
    let named: BTreeMap<i32, Vec<i32>> = {
        let mut out = BTreeMap::new();
        for (p, ids) in named {
            if out.insert(p, ids).is_some() {
                return Err(bad(format!("partition {p} is assigned twice")));
            }
        }
        out
    };
    if count != -1 && count != named.len() as i32 {
        return Err((
            codes::INVALID_REQUEST,
            format!(
                "{} assignments for {count} partitions: with assignments the partition count is theirs (-1)",
                named.len()
            ),
        ));
    }
    if replication_factor != -1 {
        return Err((
            codes::INVALID_REQUEST,
            "with assignments the replication factor is theirs (-1)".into(),
        ));
    }
    let m = state.meta.borrow();
    let mut out: Vec<Vec<Assignment>> = Vec::with_capacity(named.len());
    let mut pending: Vec<Assignment> = Vec::new();
    for (i, (p, ids)) in named.iter().enumerate() {
        if *p != i as i32 {
            return Err(bad(format!(
                "partition {i} has no assignment (they must cover 0..{} once each)",
                named.len()
            )));
        }
        if ids.is_empty() || ids.len() > meta::replication::MAX_REPLICATION_FACTOR {
            return Err((
                codes::INVALID_REPLICATION_FACTOR,
                format!(
                    "partition {p} names {} brokers: 1 to {} replicas",
                    ids.len(),
                    meta::replication::MAX_REPLICATION_FACTOR
                ),
            ));
        }
        let mut replicas = Vec::with_capacity(ids.len());
        for id in ids {
            let a =
                crate::cluster::assignment_of_broker_id(&m, *id, &pending).ok_or_else(|| {
                    bad(format!(
                        "partition {p}: broker {id} is not a live broker of this cluster"
                    ))
                })?;
            if replicas.iter().any(|r: &Assignment| r.node_id == a.node_id) {
                return Err(bad(format!(
                    "partition {p}: two replicas on node {} (each replica on its own node)",
                    a.node_id
                )));
            }
            pending.push(a);
            replicas.push(a);
        }
        if out.first().is_some_and(|f| f.len() != replicas.len()) {
            return Err(bad(format!(
                "partition {p} has {} replicas, partition 0 has {}: one replication factor per topic",
                replicas.len(),
                out[0].len()
            )));
        }
        out.push(replicas);
    }
    Ok(out)
}

/// The partitions this node serves: those it leads or would lead (unreplicated or led
/// here) and the follower replicas it holds.
fn placed_on_this_node(state: &CoreState) -> usize {
    let m = state.meta.borrow();
    let node = state.node_id();
    m.assignments
        .iter()
        .map(|(topic, a)| {
            (0..a.len())
                .filter(|&p| match m.replica_set(topic, p as u32) {
                    Some(r) => r.replica_on(node).is_some(),
                    None => a[p].node_id == node,
                })
                .count()
        })
        .sum()
}

/// The checks of [`place`] alone (also for `validate_only`); returns the partitions already
/// placed on this node.
fn check_partition_count(state: &CoreState, adding: u32) -> Result<usize, Refusal> {
    if adding > meta::state::MAX_PARTITIONS_PER_TOPIC {
        return Err((
            codes::INVALID_PARTITIONS,
            format!(
                "partition count {adding} is above the limit of {} per topic",
                meta::state::MAX_PARTITIONS_PER_TOPIC
            ),
        ));
    }
    let placed = placed_on_this_node(state);
    state
        .ctx
        .fd_budget
        .check_placement(placed, adding as usize)
        .map_err(|e| (codes::INVALID_PARTITIONS, e.to_string()))?;
    Ok(placed)
}

pub(crate) async fn write(state: &Rc<CoreState>, cmd: Command) -> Result<(), Refusal> {
    let applied = state
        .ctx
        .meta
        .write(cmd)
        .await
        .map_err(|e| (codes::for_meta_error(&e), e.to_string()))?;
    wait_all_cores(state, applied.log_index).await;
    wait_other_nodes(state, applied.log_index).await
}

/// Clustered: waits until the cores of every other live node applied the change at
/// `log_index` too, so a client that goes on to any node finds it; REQUEST_TIMED_OUT (the
/// change itself is made) when one does not within `CLUSTER_APPLY_TIMEOUT_MS`.
pub(crate) async fn wait_other_nodes(state: &Rc<CoreState>, log_index: u64) -> Result<(), Refusal> {
    if state.ctx.config.peers.is_empty() {
        return Ok(());
    }
    let others: Vec<u64> = state
        .meta
        .borrow()
        .live_brokers()
        .map(|b| b.node_id)
        .filter(|n| *n != state.node_id())
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    state
        .ctx
        .meta
        .wait_nodes_applied(log_index, others, crate::config::CLUSTER_APPLY_TIMEOUT_MS)
        .await
        .map_err(|e| {
            (
                codes::REQUEST_TIMED_OUT,
                format!("the change is made, but not every node applied it yet: {e}"),
            )
        })
}

/// Creates one topic (also used by auto-create). Returns its topic id.
pub async fn create_topic(
    state: &Rc<CoreState>,
    name: &str,
    partitions: u32,
    configs: BTreeMap<String, String>,
) -> Result<[u8; 16], Refusal> {
    let rf = state.ctx.config.default_replication_factor;
    create_topic_placed(state, name, partitions, configs, Placement::Ours { rf }).await
}

/// Where a new topic's partitions go.
enum Placement {
    /// [`place`]'s choice, with this replication factor.
    Ours { rf: usize },
    /// The client's: one replica list per partition.
    Named(Vec<Vec<Assignment>>),
}

/// [`create_topic`] with the placement `placement`.
async fn create_topic_placed(
    state: &Rc<CoreState>,
    name: &str,
    partitions: u32,
    configs: BTreeMap<String, String>,
    placement: Placement,
) -> Result<[u8; 16], Refusal> {
    topic_config::to_log_config(&configs, &state.ctx.config.log_defaults)
        .map_err(|e| (codes::INVALID_CONFIG, e.to_string()))?;
    if partitions == 0 {
        return Err((
            codes::INVALID_PARTITIONS,
            "partition count must be at least 1".into(),
        ));
    }
    let link = fanout_request(&configs)?;
    if let Some((parent, delay_ms)) = &link {
        check_fanout_parent(state, parent, *delay_ms)?;
    }
    let replicas = match placement {
        Placement::Named(a) => {
            assert_eq!(a.len(), partitions as usize, "one assignment per partition");
            check_partition_count(state, partitions)?;
            check_replication_factor(state, a[0].len())?;
            a
        }
        Placement::Ours { rf } => place(state, partitions, rf)?,
    };
    check_replicated_configs(replicas[0].len(), &configs)?;
    let cmd = create_command(name, partitions, configs, replicas);
    write(state, cmd).await?;
    if let Some((parent, delay_ms)) = link {
        if let Err(refused) = attach(state, &parent, name, delay_ms).await {
            // A child that cannot be attached is not left behind half made.
            let _ = write(
                state,
                Command::DeleteTopic {
                    name: name.to_string(),
                },
            )
            .await;
            return Err(refused);
        }
    }
    let id = state.meta.borrow().topic(name).map(|t| t.topic_id).ok_or((
        codes::UNKNOWN_SERVER_ERROR,
        "topic vanished after create".to_string(),
    ))?;
    Ok(id)
}

/// What a replicated topic (replication factor `rf` > 1) cannot have: a
/// `min.insync.replicas` above its replication factor (acks=all could never be answered).
fn check_replicated_configs(rf: usize, configs: &BTreeMap<String, String>) -> Result<(), Refusal> {
    let min = topic_config::min_insync_replicas(configs);
    if min > rf.max(1) && configs.contains_key("min.insync.replicas") {
        return Err((
            codes::INVALID_CONFIG,
            format!("min.insync.replicas={min} is above the replication factor {rf}"),
        ));
    }
    Ok(())
}

/// The command that creates topic `name` on `replicas` (one list per partition, all of one
/// length): a plain `CreateTopic` for replication factor 1.
pub(crate) fn create_command(
    name: &str,
    partitions: u32,
    configs: BTreeMap<String, String>,
    replicas: Vec<Vec<Assignment>>,
) -> Command {
    let leaders: Vec<Assignment> = replicas.iter().map(|r| r[0]).collect();
    let plain = Command::create_topic(name, partitions, configs, leaders);
    if replicas[0].len() == 1 {
        return plain;
    }
    let Command::CreateTopic {
        name,
        partitions,
        configs,
        incarnation_id,
        topic_id,
        ..
    } = plain
    else {
        unreachable!("create_topic makes a CreateTopic")
    };
    Command::CreateReplicatedTopic {
        topic: Box::new(meta::NewReplicatedTopic {
            name,
            partitions,
            configs,
            replicas,
            incarnation_id,
            topic_id,
        }),
    }
}

/// The fan-out link a topic's configs ask for: `fanout.parent` and `fanout.delay.ms`.
fn fanout_request(configs: &BTreeMap<String, String>) -> Result<Option<(String, u64)>, Refusal> {
    let Some(parent) = configs.get(FANOUT_PARENT) else {
        return Ok(None);
    };
    let delay_ms = match configs.get(FANOUT_DELAY_MS) {
        None => 0,
        Some(v) => v.trim().parse::<u64>().map_err(|_| {
            (
                codes::INVALID_CONFIG,
                format!("{FANOUT_DELAY_MS}={v:?} is not a number of ms"),
            )
        })?,
    };
    Ok(Some((parent.clone(), delay_ms)))
}

/// How long a topic with `configs` keeps records: its `retention.ms`, else the broker default;
/// `None` = forever.
fn effective_retention_ms(state: &CoreState, configs: &BTreeMap<String, String>) -> Option<i64> {
    configs
        .get("retention.ms")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .or(state.ctx.config.log_defaults.retention_ms)
        .filter(|r| *r >= 0)
}

/// The parent must exist, and for a delay child keep records at least delay + 1 h (its own
/// `retention.ms`, or the broker default).
fn check_fanout_parent(state: &CoreState, parent: &str, delay_ms: u64) -> Result<(), Refusal> {
    let m = state.meta.borrow();
    let Some(p) = m.topic(parent) else {
        return Err((
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("fan-out parent '{parent}' does not exist"),
        ));
    };
    if let Some(floor) = meta::state::fanout_retention_floor_ms(delay_ms) {
        if let Some(r) = effective_retention_ms(state, &p.configs) {
            if (r as u64) < floor {
                return Err((
                    codes::INVALID_CONFIG,
                    format!("parent '{parent}' keeps records {r} ms; a child delayed {delay_ms} ms needs retention.ms >= {floor} (delay + 1 h)"),
                ));
            }
        }
    }
    Ok(())
}

/// Links `child` to `parent`: the attach offsets are the parent's current high watermarks (no
/// backfill), read from each partition's owner core.
pub async fn attach(
    state: &Rc<CoreState>,
    parent: &str,
    child: &str,
    delay_ms: u64,
) -> Result<(), Refusal> {
    check_fanout_parent(state, parent, delay_ms)?;
    let partitions = state
        .meta
        .borrow()
        .topic(parent)
        .map(|t| t.partitions)
        .unwrap_or(0);
    let reads = (0..partitions).map(|p| {
        let state = state.clone();
        let parent = parent.to_string();
        async move {
            let owner = state.meta.borrow().assignment(&parent, p)?;
            if owner.node_id == state.node_id() {
                return crate::fanout_runtime::high_watermark_here(&state, &parent, p).await;
            }
            let req = crate::node_rpc::NodeRequest::HighWatermark {
                topic: parent.clone(),
                partition: p,
            };
            match crate::node_rpc::call(&state, owner.node_id, owner.core_index, &req).await {
                Ok(crate::node_rpc::NodeResponse::HighWatermark(hwm)) => Some(hwm),
                other => {
                    tracing::info!(%parent, partition = p, node_id = owner.node_id, answer = ?other, "a parent partition's high watermark could not be read");
                    None
                }
            }
        }
    });
    let offsets: Option<Vec<u64>> = join_all(reads).await.into_iter().collect();
    let offsets = offsets.ok_or((
        codes::NOT_LEADER_OR_FOLLOWER,
        format!("a partition of '{parent}' is not open; retry"),
    ))?;
    write(
        state,
        Command::attach_child(parent, child, delay_ms, offsets),
    )
    .await?;
    tracing::info!(%parent, %child, delay_ms, "fan-out child attached");
    Ok(())
}

const FANOUT_PARENT: &str = "fanout.parent";
const FANOUT_DELAY_MS: &str = "fanout.delay.ms";

pub async fn create_topics(
    state: &Rc<CoreState>,
    version: i16,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut configs = BTreeMap::new();
        for c in &t.configs {
            if let Some(v) = &c.value {
                configs.insert(c.name.to_string(), v.to_string());
            }
        }
        // A fan-out child takes its parent's partition count unless given one.
        let parent_partitions = configs
            .get(FANOUT_PARENT)
            .and_then(|p| state.meta.borrow().topic(p).map(|t| t.partitions as i32));
        let partitions = match (t.num_partitions, parent_partitions) {
            (-1, Some(n)) => n,
            (-1, None) => state.ctx.config.default_partitions as i32,
            (n, _) => n,
        };
        let shown_configs = configs.clone();
        let explicit = (!t.assignments.is_empty()).then(|| {
            explicit_assignments(
                state,
                t.num_partitions,
                t.replication_factor,
                t.assignments.iter().map(|a| {
                    (
                        a.partition_index,
                        a.broker_ids.iter().map(|b| b.0).collect(),
                    )
                }),
            )
        });
        let partitions = match &explicit {
            Some(Ok(a)) => a.len() as i32,
            _ => partitions,
        };
        let rf = match &explicit {
            Some(Ok(a)) => a.first().map_or(1, Vec::len),
            _ => requested_replication_factor(state, t.replication_factor),
        };
        let outcome: Result<[u8; 16], Refusal> = if let Some(Err(refused)) = &explicit {
            Err(refused.clone())
        } else if let Err(refused) = check_replication_factor(state, rf) {
            Err(refused)
        } else if partitions < 1 {
            Err((
                codes::INVALID_PARTITIONS,
                format!("partition count {partitions} must be at least 1"),
            ))
        } else if req.validate_only {
            check_partition_count(state, partitions as u32)
                .and_then(|_| {
                    topic_config::to_log_config(&configs, &state.ctx.config.log_defaults)
                        .map_err(|e| (codes::INVALID_CONFIG, e.to_string()))
                })
                .and_then(|_| match state.meta.borrow().topic(&name) {
                    Some(_) => Err((
                        codes::TOPIC_ALREADY_EXISTS,
                        format!("topic '{name}' already exists"),
                    )),
                    None => Ok([0u8; 16]),
                })
        } else {
            let placement = match explicit.and_then(Result::ok) {
                Some(named) => Placement::Named(named),
                None => Placement::Ours { rf },
            };
            create_topic_placed(state, &name, partitions as u32, configs, placement).await
        };
        let mut r = CreatableTopicResult::default().with_name(TopicName(str_bytes(name.clone())));
        match outcome {
            Ok(id) => {
                if version >= 5 {
                    // Kafka answers the new topic's configs (KIP-525), as DescribeConfigs would.
                    let configs = topic_config_entries(state, &shown_configs)
                        .into_iter()
                        .map(|(k, v, source, _)| {
                            CreatableTopicConfigs::default()
                                .with_name(str_bytes(k))
                                .with_value(Some(str_bytes(v)))
                                .with_read_only(false)
                                .with_config_source(source)
                                .with_is_sensitive(false)
                        })
                        .collect();
                    r = r
                        .with_num_partitions(partitions)
                        .with_replication_factor(rf as i16)
                        .with_configs(Some(configs));
                }
                if version >= 7 {
                    r.topic_id = Uuid::from_bytes(id);
                }
            }
            Err((code, msg)) => {
                tracing::info!(topic = %name, code, %msg, "create topic refused");
                r.error_code = code;
                if version >= 1 {
                    r.error_message = Some(str_bytes(msg));
                }
                if version >= 5 {
                    r = r.with_num_partitions(-1).with_replication_factor(-1);
                }
            }
        }
        results.push(r);
    }
    CreateTopicsResponse::default().with_topics(results)
}

pub async fn delete_topics(
    state: &Rc<CoreState>,
    version: i16,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    // v6 names topics by name or id in `topics`; earlier versions list names.
    let mut targets: Vec<(Option<String>, Uuid)> = req
        .topic_names
        .into_iter()
        .map(|n| (Some(n.0.to_string()), Uuid::nil()))
        .collect();
    targets.extend(
        req.topics
            .into_iter()
            .map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id)),
    );
    let mut responses = Vec::with_capacity(targets.len());
    for (name, id) in targets {
        let resolved = match &name {
            Some(n) => state
                .meta
                .borrow()
                .topic(n)
                .map(|t| (n.clone(), t.topic_id)),
            None => state
                .meta
                .borrow()
                .topics
                .values()
                .find(|t| Uuid::from_bytes(t.topic_id) == id)
                .map(|t| (t.name.clone(), t.topic_id)),
        };
        let mut r = DeletableTopicResult::default()
            .with_name(name.clone().map(|n| TopicName(str_bytes(n))));
        if version >= 6 {
            r.topic_id = id;
        }
        let outcome = match resolved {
            None if name.is_none() => {
                Err((codes::UNKNOWN_TOPIC_ID, format!("unknown topic id {id}")))
            }
            None => Err((
                codes::UNKNOWN_TOPIC_OR_PARTITION,
                format!("unknown topic '{}'", name.clone().unwrap_or_default()),
            )),
            Some((n, _)) if crate::core::is_internal_topic(&n) => Err((
                codes::INVALID_TOPIC_EXCEPTION,
                format!("{n} is internal and cannot be deleted"),
            )),
            Some((n, tid)) => {
                r.name = Some(TopicName(str_bytes(n.clone())));
                if version >= 6 {
                    r.topic_id = Uuid::from_bytes(tid);
                }
                write(state, Command::DeleteTopic { name: n }).await
            }
        };
        if let Err((code, msg)) = outcome {
            r.error_code = code;
            if version >= 5 {
                r.error_message = Some(str_bytes(msg));
            }
        }
        responses.push(r);
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

pub async fn create_partitions(
    state: &Rc<CoreState>,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.0.to_string();
        let current = state.meta.borrow().topic(&name).map(|m| m.partitions);
        let outcome: Result<(), Refusal> = match current {
            None => Err((
                codes::UNKNOWN_TOPIC_OR_PARTITION,
                format!("unknown topic '{name}'"),
            )),
            Some(cur) if t.count <= cur as i32 => Err((
                codes::INVALID_PARTITIONS,
                format!(
                    "topic '{name}' has {cur} partitions; the new count {} must be larger",
                    t.count
                ),
            )),
            Some(cur) => {
                let adding = t.count as u32 - cur;
                // The client's placement of the new partitions (broker ids of any node), or ours.
                let placement = match t.assignments.as_ref().filter(|a| !a.is_empty()) {
                    Some(named) => explicit_assignments(
                        state,
                        adding as i32,
                        -1,
                        named
                            .iter()
                            .enumerate()
                            .map(|(i, a)| (i as i32, a.broker_ids.iter().map(|b| b.0).collect())),
                    )
                    .and_then(|a| check_partition_count(state, adding).map(|_| a)),
                    None if req.validate_only => {
                        check_partition_count(state, adding).map(|_| Vec::new())
                    }
                    None => place(state, adding, state.meta.borrow().replication_factor(&name)),
                };
                match placement {
                    Err(refused) => Err(refused),
                    Ok(_) if req.validate_only => Ok(()),
                    Ok(replicas) if replicas.first().is_some_and(|r| r.len() > 1) => {
                        write(
                            state,
                            Command::AddReplicatedPartitions {
                                name: name.clone(),
                                new_total: t.count as u32,
                                replicas,
                            },
                        )
                        .await
                    }
                    Ok(replicas) => {
                        write(
                            state,
                            Command::AddPartitions {
                                name: name.clone(),
                                new_total: t.count as u32,
                                assignments: replicas.into_iter().map(|r| r[0]).collect(),
                            },
                        )
                        .await
                    }
                }
            }
        };
        let mut r = CreatePartitionsTopicResult::default().with_name(TopicName(str_bytes(name)));
        if let Err((code, msg)) = outcome {
            r.error_code = code;
            r.error_message = Some(str_bytes(msg));
        }
        results.push(r);
    }
    CreatePartitionsResponse::default().with_results(results)
}

pub fn describe_configs(
    state: &Rc<CoreState>,
    version: i16,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let m = state.meta.borrow();
    let results = req
        .resources
        .into_iter()
        .map(|res| {
            let name = res.resource_name.to_string();
            let mut out = DescribeConfigsResult::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name.clone());
            // (name, value (None: null), source, type, read-only)
            type Entry = (String, Option<String>, i8, topic_config::ConfigType, bool);
            let entries: Vec<Entry> = match res.resource_type {
                RESOURCE_TOPIC => match m.topic(&name) {
                    Some(t) => topic_config_entries(state, &t.configs)
                        .into_iter()
                        .map(|(k, v, source, ty)| (k, Some(v), source, ty, false))
                        .collect(),
                    None => {
                        out.error_code = codes::UNKNOWN_TOPIC_OR_PARTITION;
                        out.error_message = Some(str_bytes(format!("unknown topic '{name}'")));
                        return out;
                    }
                },
                // Fixed for the life of the process: read-only (see `broker_configs`).
                RESOURCE_BROKER => crate::broker_configs::describe(&state.ctx.config)
                    .into_iter()
                    .map(|e| (e.name.to_string(), e.value, e.source, e.config_type, true))
                    .collect(),
                // Each logger's level, changed at run time (see `broker_loggers`).
                RESOURCE_BROKER_LOGGER => crate::broker_loggers::describe()
                    .into_iter()
                    .map(|(logger, level)| {
                        let source = SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG;
                        (
                            logger.to_string(),
                            Some(level.to_string()),
                            source,
                            topic_config::ConfigType::String,
                            false,
                        )
                    })
                    .collect(),
                other => {
                    out.error_code = codes::INVALID_REQUEST;
                    out.error_message = Some(str_bytes(format!(
                        "resource type {} is not supported: ringlog describes TOPIC, \
                             BROKER and BROKER_LOGGER configs",
                        config_resource_type_name(other)
                    )));
                    return out;
                }
            };
            let wanted = res
                .configuration_keys
                .map(|k| k.into_iter().map(|s| s.to_string()).collect::<Vec<_>>());
            out.configs = entries
                .into_iter()
                .filter(|(k, ..)| wanted.as_ref().is_none_or(|w| w.contains(k)))
                .map(|(k, v, source, ty, read_only)| {
                    let mut e = DescribeConfigsResourceResult::default()
                        .with_name(str_bytes(k))
                        .with_value(v.map(str_bytes))
                        .with_read_only(read_only)
                        .with_config_source(source);
                    if version >= 3 {
                        e.config_type = ty as i8;
                    }
                    e
                })
                .collect();
            out
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// APPEND (each value not there yet, at the end) or SUBTRACT (each value taken out) on list
/// config `key` of a topic, whose value is `current` (its own) or else the broker's default:
/// the new value, or INVALID_CONFIG in Kafka's words when `key` is not a list.
fn list_operation(
    op: i8,
    key: &str,
    current: Option<&String>,
    values: &str,
    defaults: &engine::LogConfig,
) -> Result<String, Refusal> {
    if topic_config::config_type(key) != Some(topic_config::ConfigType::List) {
        return Err((
            codes::INVALID_CONFIG,
            format!(
                "Can't {} to key {key} because its type is not LIST.",
                config_operation_name(op)
            ),
        ));
    }
    let count = values.split(',').count();
    if count > MAX_LIST_OPERATION_VALUES {
        return Err((
            codes::INVALID_CONFIG,
            format!(
                "{} on {key} names {count} values; at most {MAX_LIST_OPERATION_VALUES} are \
                 accepted",
                config_operation_name(op)
            ),
        ));
    }
    let current = current
        .cloned()
        .unwrap_or_else(|| topic_config::default_value(key, defaults));
    let mut parts: Vec<&str> = current.split(',').filter(|p| !p.is_empty()).collect();
    for v in values.split(',') {
        if op == OP_APPEND && !parts.contains(&v) {
            parts.push(v);
        } else if op == OP_SUBTRACT {
            parts.retain(|p| *p != v);
        }
    }
    Ok(parts.join(","))
}

/// One config a request alters: its key, its operation (a legacy AlterConfigs names only
/// SETs), and its value (null where the client sent none).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ConfigChange {
    key: String,
    op: i8,
    value: Option<String>,
}

/// One resource of an IncrementalAlterConfigs or a legacy AlterConfigs, read the same way.
#[derive(Debug)]
struct ResourceAlteration {
    resource_type: i8,
    name: String,
    changes: Vec<ConfigChange>,
}

/// How an alteration treats the configs a resource has and the request does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unnamed {
    /// IncrementalAlterConfigs: they stay as they are.
    Kept,
    /// Legacy AlterConfigs: the request is the resource's whole set of configs; they are
    /// removed (back to the broker default).
    Removed,
}

/// The checks Kafka's brokers make of every resource before anything else
/// (`ConfigAdminManager.preprocess`, for both APIs): a resource named twice is refused twice,
/// a key named twice in one resource and a null value (but a DELETE's) are refused with
/// INVALID_REQUEST in Kafka's words.
fn preprocess(resources: &[ResourceAlteration]) -> Vec<Option<Refusal>> {
    let mut seen: BTreeMap<(i8, &str), usize> = BTreeMap::new();
    for r in resources {
        *seen.entry((r.resource_type, r.name.as_str())).or_default() += 1;
    }
    resources
        .iter()
        .map(|r| {
            if seen[&(r.resource_type, r.name.as_str())] > 1 {
                return Some((
                    codes::INVALID_REQUEST,
                    "Each resource must appear at most once.".to_string(),
                ));
            }
            let mut keys = std::collections::BTreeSet::new();
            if !r.changes.iter().all(|c| keys.insert(c.key.as_str())) {
                return Some((
                    codes::INVALID_REQUEST,
                    "Error due to duplicate config keys".to_string(),
                ));
            }
            let nulls: Vec<&str> = r
                .changes
                .iter()
                .filter(|c| c.op != OP_DELETE && c.value.is_none())
                .map(|c| c.key.as_str())
                .collect();
            if !nulls.is_empty() {
                return Some((
                    codes::INVALID_REQUEST,
                    format!("Null value not supported for : {}", nulls.join(", ")),
                ));
            }
            None
        })
        .collect()
}

/// An alteration of a broker's configs: only the deletion of a replication throttle (none is
/// ever set) is accepted; ringlog has no dynamic broker config to set. A legacy AlterConfigs
/// naming no config (which removes every dynamic one) changes nothing and is accepted.
fn broker_config_alteration(changes: &[ConfigChange]) -> Result<(), Refusal> {
    for c in changes {
        let key = c.key.as_str();
        if c.op != OP_DELETE || !REPLICATION_THROTTLE_BROKER_CONFIGS.contains(&key) {
            return Err((
                codes::INVALID_CONFIG,
                format!(
                    "broker config '{key}' cannot be changed at run time: set the broker's \
                     flags or config file and restart it (only the deletion of a replication \
                     throttle, which ringlog never sets, is accepted)"
                ),
            ));
        }
    }
    Ok(())
}

/// An IncrementalAlterConfigs of the broker's loggers: SET a level, or DELETE a logger's own
/// level (it then logs at its parent's); all or none of them.
fn broker_logger_alteration(changes: &[ConfigChange], validate_only: bool) -> Result<(), Refusal> {
    let mut levels = Vec::with_capacity(changes.len());
    for c in changes {
        match c.op {
            OP_SET => levels.push((c.key.clone(), Some(c.value.clone().unwrap_or_default()))),
            OP_DELETE => levels.push((c.key.clone(), None)),
            op => {
                return Err((
                    codes::INVALID_CONFIG,
                    format!(
                        "{} on logger {}: a BROKER_LOGGER takes SET and DELETE",
                        config_operation_name(op),
                        c.key
                    ),
                ))
            }
        }
    }
    crate::broker_loggers::alter(&levels, validate_only).map_err(|e| {
        // Kafka refuses the removal of root's level as a bad request, the rest as bad configs.
        let code = match e {
            crate::broker_loggers::LoggerRefusal::RootRemoved => codes::INVALID_REQUEST,
            _ => codes::INVALID_CONFIG,
        };
        (code, e.to_string())
    })
}

/// A topic's configs after `changes`, from `current` (the topic's own) when the configs the
/// request does not name are kept, from nothing when they are removed.
fn altered_topic_configs(
    current: &BTreeMap<String, String>,
    changes: &[ConfigChange],
    unnamed: Unnamed,
    defaults: &engine::LogConfig,
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut next = match unnamed {
        Unnamed::Kept => current.clone(),
        Unnamed::Removed => BTreeMap::new(),
    };
    for c in changes {
        let key = c.key.clone();
        let value = c.value.clone().unwrap_or_default();
        match c.op {
            OP_SET => {
                next.insert(key, value);
            }
            OP_DELETE => {
                next.remove(&key);
            }
            op @ (OP_APPEND | OP_SUBTRACT) => {
                let joined = list_operation(op, &key, next.get(&key), &value, defaults)?;
                next.insert(key, joined);
            }
            op => {
                return Err((
                    codes::INVALID_CONFIG,
                    format!(
                        "{} on {key}: the operations are SET, DELETE, APPEND and SUBTRACT",
                        config_operation_name(op)
                    ),
                ))
            }
        }
    }
    Ok(next)
}

/// What the metastore's AlterConfigs is given to turn `current` into `next`: the keys set
/// (new or changed) and the keys removed.
fn config_difference(
    current: &BTreeMap<String, String>,
    next: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let set = next
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let remove = current
        .keys()
        .filter(|k| !next.contains_key(*k))
        .cloned()
        .collect();
    (set, remove)
}

/// One resource of either API after [`preprocess`]: a broker's (see
/// [`broker_config_alteration`]) or a topic's, whose new configs are checked as a CreateTopics'
/// are (every key known, every value in range), against its replication factor and its fan-out
/// links, and written unless `validate_only`. Any other resource type is refused with
/// INVALID_REQUEST naming it.
async fn alter_resource(
    state: &Rc<CoreState>,
    res: &ResourceAlteration,
    unnamed: Unnamed,
    validate_only: bool,
) -> Result<(), Refusal> {
    if res.resource_type == RESOURCE_BROKER {
        return broker_config_alteration(&res.changes);
    }
    // The loggers' levels are set incrementally only, as on Kafka.
    if res.resource_type == RESOURCE_BROKER_LOGGER && unnamed == Unnamed::Kept {
        return broker_logger_alteration(&res.changes, validate_only);
    }
    if res.resource_type != RESOURCE_TOPIC {
        return Err((
            codes::INVALID_REQUEST,
            format!(
                "resource type {} cannot be altered: ringlog alters TOPIC, BROKER and (incrementally) BROKER_LOGGER configs",
                config_resource_type_name(res.resource_type)
            ),
        ));
    }
    let name = &res.name;
    let current = state
        .meta
        .borrow()
        .topic(name)
        .map(|t| t.configs.clone())
        .ok_or((
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            format!("unknown topic '{name}'"),
        ))?;
    let defaults = &state.ctx.config.log_defaults;
    let next = altered_topic_configs(&current, &res.changes, unnamed, defaults)?;
    topic_config::to_log_config(&next, defaults)
        .map_err(|e| (codes::INVALID_CONFIG, e.to_string()))?;
    check_replicated_configs(state.meta.borrow().replication_factor(name), &next)?;
    // A parent keeps records at least as long as its longest-delayed child needs (delay +
    // 1 h), whether its retention.ms is lowered or removed (the broker default then applies).
    let longest_delay = state.meta.borrow().fanout_links.max_child_delay_ms(name);
    if let Some(floor) = meta::state::fanout_retention_floor_ms(longest_delay) {
        if let Some(r) = effective_retention_ms(state, &next).filter(|r| (*r as u64) < floor) {
            return Err((
                codes::INVALID_CONFIG,
                format!(
                    "'{name}' has a child delayed {longest_delay} ms: retention.ms {r} is below \
                     delay + 1 h = {floor}"
                ),
            ));
        }
    }
    let (was, will) = (fanout_request(&current)?, fanout_request(&next)?);
    let attached = state.meta.borrow().fanout_links.of_child(name).cloned();
    if let (Some(link), Some((parent, delay))) = (&attached, &will) {
        if link.delay_ms != *delay || parent != &link.parent || was.is_none() {
            return Err((
                codes::INVALID_CONFIG,
                format!(
                    "'{name}' is attached to '{}' with delay {} ms; the link and its delay are \
                     immutable: detach (delete fanout.parent) and attach again",
                    link.parent, link.delay_ms
                ),
            ));
        }
    }
    if validate_only {
        return Ok(());
    }
    match (&attached, &will) {
        (None, Some((parent, delay))) => attach(state, parent, name, *delay).await?,
        (Some(link), None) => {
            let detach = Command::DetachChild {
                parent: link.parent.clone(),
                child: name.clone(),
            };
            write(state, detach).await?;
            tracing::info!(parent = %link.parent, child = %name, "fan-out child detached");
        }
        _ => {}
    }
    let (set, remove) = config_difference(&current, &next);
    write(
        state,
        Command::AlterConfigs {
            name: name.clone(),
            set,
            remove,
        },
    )
    .await
}

/// Every resource of either API, in order: each one's refusal, or `None` once it is altered
/// (or found valid, with `validate_only`).
async fn alter_resources(
    state: &Rc<CoreState>,
    resources: &[ResourceAlteration],
    unnamed: Unnamed,
    validate_only: bool,
) -> Vec<Option<Refusal>> {
    let mut outcomes = preprocess(resources);
    for (res, outcome) in resources.iter().zip(outcomes.iter_mut()) {
        if outcome.is_none() {
            *outcome = alter_resource(state, res, unnamed, validate_only)
                .await
                .err();
        }
    }
    outcomes
}

pub async fn incremental_alter_configs(
    state: &Rc<CoreState>,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let resources: Vec<ResourceAlteration> = req
        .resources
        .iter()
        .map(|r| ResourceAlteration {
            resource_type: r.resource_type,
            name: r.resource_name.to_string(),
            changes: r
                .configs
                .iter()
                .map(|c| ConfigChange {
                    key: c.name.to_string(),
                    op: c.config_operation,
                    value: c.value.as_ref().map(|v| v.to_string()),
                })
                .collect(),
        })
        .collect();
    let outcomes = alter_resources(state, &resources, Unnamed::Kept, req.validate_only).await;
    let responses = req
        .resources
        .into_iter()
        .zip(outcomes)
        .map(|(res, outcome)| {
            let mut r = AlterConfigsResourceResponse::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name);
            if let Some((code, msg)) = outcome {
                r.error_code = code;
                r.error_message = Some(str_bytes(msg));
            }
            r
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// Legacy AlterConfigs (`Admin.alterConfigs`): each resource's configs become exactly the
/// ones named, those it does not name go back to the broker default. Checked and written as
/// IncrementalAlterConfigs' SETs are.
pub async fn alter_configs(
    state: &Rc<CoreState>,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let resources: Vec<ResourceAlteration> = req
        .resources
        .iter()
        .map(|r| ResourceAlteration {
            resource_type: r.resource_type,
            name: r.resource_name.to_string(),
            changes: r
                .configs
                .iter()
                .map(|c| ConfigChange {
                    key: c.name.to_string(),
                    op: OP_SET,
                    value: c.value.as_ref().map(|v| v.to_string()),
                })
                .collect(),
        })
        .collect();
    let outcomes = alter_resources(state, &resources, Unnamed::Removed, req.validate_only).await;
    let responses = req
        .resources
        .into_iter()
        .zip(outcomes)
        .map(|(res, outcome)| {
            let mut r = LegacyResourceResponse::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name);
            if let Some((code, msg)) = outcome {
                r.error_code = code;
                r.error_message = Some(str_bytes(msg));
            }
            r
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_and_subtract_work_on_list_configs_only() {
        let defaults = engine::LogConfig::default();
        let policy = "cleanup.policy";
        // Unset: the default ("delete") is what APPEND adds to.
        assert_eq!(
            list_operation(OP_APPEND, policy, None, "compact", &defaults).unwrap(),
            "delete,compact"
        );
        let set = "compact".to_string();
        assert_eq!(
            list_operation(OP_APPEND, policy, Some(&set), "compact", &defaults).unwrap(),
            "compact"
        );
        assert_eq!(
            list_operation(OP_APPEND, policy, Some(&set), "delete,compact", &defaults).unwrap(),
            "compact,delete"
        );
        let both = "delete,compact".to_string();
        assert_eq!(
            list_operation(OP_SUBTRACT, policy, Some(&both), "delete", &defaults).unwrap(),
            "compact"
        );
        assert_eq!(
            list_operation(OP_SUBTRACT, policy, Some(&both), "shred", &defaults).unwrap(),
            "delete,compact"
        );
        let many = vec!["delete"; MAX_LIST_OPERATION_VALUES + 1].join(",");
        let (code, message) =
            list_operation(OP_APPEND, policy, None, &many, &defaults).unwrap_err();
        assert_eq!(code, codes::INVALID_CONFIG);
        assert!(message.contains("at most 64"), "{message}");
        for (op, name) in [(OP_APPEND, "APPEND"), (OP_SUBTRACT, "SUBTRACT")] {
            let (code, message) =
                list_operation(op, "retention.ms", None, "1", &defaults).unwrap_err();
            assert_eq!(code, codes::INVALID_CONFIG);
            assert_eq!(
                message,
                format!("Can't {name} to key retention.ms because its type is not LIST.")
            );
        }
    }

    #[test]
    fn resource_types_and_operations_are_named_as_kafka_names_them() {
        assert_eq!(config_resource_type_name(8), "BROKER_LOGGER (8)");
        assert_eq!(config_resource_type_name(4), "BROKER (4)");
        assert_eq!(config_operation_name(OP_APPEND), "APPEND");
        assert_eq!(config_operation_name(9), "operation 9");
    }

    fn change(key: &str, op: i8, value: Option<&str>) -> ConfigChange {
        ConfigChange {
            key: key.into(),
            op,
            value: value.map(str::to_string),
        }
    }

    fn resource(rtype: i8, name: &str, changes: Vec<ConfigChange>) -> ResourceAlteration {
        ResourceAlteration {
            resource_type: rtype,
            name: name.into(),
            changes,
        }
    }

    #[test]
    fn preprocess_refuses_repeated_resources_and_keys_and_null_values_in_kafkas_words() {
        let set = |k: &str| change(k, OP_SET, Some("1"));
        let outcomes = preprocess(&[
            resource(RESOURCE_TOPIC, "twice", vec![set("retention.ms")]),
            resource(
                RESOURCE_TOPIC,
                "once",
                vec![set("retention.ms"), set("retention.ms")],
            ),
            resource(RESOURCE_BROKER, "twice", vec![]),
            resource(RESOURCE_TOPIC, "twice", vec![]),
            resource(
                RESOURCE_TOPIC,
                "nulls",
                vec![
                    change("retention.ms", OP_SET, None),
                    change("segment.ms", OP_DELETE, None),
                    change("cleanup.policy", OP_APPEND, None),
                ],
            ),
            resource(
                RESOURCE_TOPIC,
                "fine",
                vec![change("segment.ms", OP_DELETE, None)],
            ),
        ]);
        let refused = |text: &str| Some((codes::INVALID_REQUEST, text.to_string()));
        assert_eq!(
            outcomes,
            vec![
                refused("Each resource must appear at most once."),
                refused("Error due to duplicate config keys"),
                // The same name as another type's is another resource.
                None,
                refused("Each resource must appear at most once."),
                refused("Null value not supported for : retention.ms, cleanup.policy"),
                None,
            ]
        );
    }

    #[test]
    fn a_legacy_alteration_replaces_the_whole_set_and_an_incremental_one_keeps_the_rest() {
        let defaults = engine::LogConfig::default();
        let current: BTreeMap<String, String> = [
            ("retention.ms".to_string(), "1000".to_string()),
            ("segment.ms".to_string(), "2000".to_string()),
        ]
        .into();
        let changes = [change("retention.ms", OP_SET, Some("3000"))];
        let kept = altered_topic_configs(&current, &changes, Unnamed::Kept, &defaults).unwrap();
        assert_eq!(kept.get("retention.ms").map(String::as_str), Some("3000"));
        assert_eq!(kept.get("segment.ms").map(String::as_str), Some("2000"));
        let replaced =
            altered_topic_configs(&current, &changes, Unnamed::Removed, &defaults).unwrap();
        assert_eq!(
            replaced,
            [("retention.ms".to_string(), "3000".to_string())].into()
        );
        // The metastore is told only what changes: one key set, the other removed.
        let (set, remove) = config_difference(&current, &replaced);
        assert_eq!(
            set,
            [("retention.ms".to_string(), "3000".to_string())].into()
        );
        assert_eq!(remove, vec!["segment.ms".to_string()]);
        // Naming nothing removes everything; an unchanged value is not set again.
        let (set, remove) = config_difference(&current, &BTreeMap::new());
        assert!(set.is_empty());
        assert_eq!(remove.len(), 2);
        let (set, remove) = config_difference(&current, &current);
        assert!(set.is_empty() && remove.is_empty());
        // An unknown operation is refused, naming it.
        let (code, message) = altered_topic_configs(
            &current,
            &[change("retention.ms", 9, Some("1"))],
            Unnamed::Kept,
            &defaults,
        )
        .unwrap_err();
        assert_eq!(code, codes::INVALID_CONFIG);
        assert!(
            message.starts_with("operation 9 on retention.ms"),
            "{message}"
        );
    }

    #[test]
    fn a_broker_accepts_only_the_deletion_of_a_throttle_or_no_config_at_all() {
        assert_eq!(broker_config_alteration(&[]), Ok(()));
        let throttle = REPLICATION_THROTTLE_BROKER_CONFIGS[0];
        assert_eq!(
            broker_config_alteration(&[change(throttle, OP_DELETE, None)]),
            Ok(())
        );
        for refused in [
            change(throttle, OP_SET, Some("100")),
            change("log.retention.ms", OP_SET, Some("1")),
        ] {
            let (code, message) =
                broker_config_alteration(std::slice::from_ref(&refused)).unwrap_err();
            assert_eq!(code, codes::INVALID_CONFIG);
            assert!(message.contains(&refused.key), "{message}");
        }
    }
}
