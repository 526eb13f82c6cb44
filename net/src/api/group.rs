//! Consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups. Every
//! group lives on one core (the owner of its `__consumer_offsets` partition); a request for it
//! is routed there with the engine's cross-core primitive, like a partition request.

use std::collections::HashSet;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use engine::join::join_all;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};

use super::str_bytes;
use crate::codes::{
    self, COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC,
    INVALID_GROUP_ID, NON_EMPTY_GROUP, OFFSET_METADATA_TOO_LARGE, UNKNOWN_MEMBER_ID,
};
use crate::coordinators::group::{
    on_group_core, partition_exists, persist_offsets, with_existing_group, with_group,
    OffsetRecords,
};
use crate::core::CoreState;
use crate::group::state::{JoinArgs, JoinResult, Reply, SyncResult};
use crate::group::{Committed, GroupState, MAX_OFFSET_METADATA_BYTES, OFFSETS_TOPIC};

const KEY_TYPE_GROUP: i8 = 0;
pub(super) const KEY_TYPE_TRANSACTION: i8 = 1;

fn now_ms() -> i64 {
    engine::clock::system_now_ms()
}

pub async fn find_coordinator(
    state: &Rc<CoreState>,
    version: i16,
    req: FindCoordinatorRequest,
    listener: usize,
) -> FindCoordinatorResponse {
    // Groups live with their `__consumer_offsets` partition, transactional ids with their
    // `__transaction_state` partition.
    let (internal, max_key_bytes) = match req.key_type {
        KEY_TYPE_GROUP => (OFFSETS_TOPIC, crate::group::MAX_GROUP_ID_BYTES),
        KEY_TYPE_TRANSACTION => (
            crate::txn::TXN_STATE_TOPIC,
            crate::txn::MAX_TRANSACTIONAL_ID_BYTES,
        ),
        _ => ("", 0),
    };
    let available = state.meta.borrow().topic(internal).is_some();
    // The broker clients should send this key's requests to: the one leading its internal
    // partition (that partition's owner core, or its node when core-direct is off), on
    // whichever node owns it; `None` while that node is fenced.
    let coordinator = |key: &str| {
        let p = if req.key_type == KEY_TYPE_TRANSACTION {
            state.txn_partition(key)
        } else {
            state.group_partition(key)
        }?;
        let m = state.meta.borrow();
        state
            .cluster_brokers_on(&m, listener)
            .endpoint(m.assignment(internal, p)?)
    };
    // (code, message, (node id, host, port)): the coordinator's, or -1, "", -1 with an error.
    let answer = |key: &str| -> (i16, Option<String>, (i32, String, i32)) {
        let refuse = |code: i16, msg: String| (code, Some(msg), (-1, String::new(), -1));
        if internal.is_empty() {
            return refuse(
                codes::INVALID_REQUEST,
                format!(
                    "coordinator key type {} is not supported (0: consumer group, 1: transaction; no share groups yet)",
                    req.key_type
                ),
            );
        }
        if key.is_empty() || key.len() > max_key_bytes {
            let what = if req.key_type == KEY_TYPE_GROUP {
                INVALID_GROUP_ID
            } else {
                codes::INVALID_REQUEST
            };
            return refuse(what, format!("the key must be 1 to {max_key_bytes} bytes"));
        }
        if !available {
            return refuse(
                COORDINATOR_NOT_AVAILABLE,
                format!("{internal} is not created yet"),
            );
        }
        match coordinator(key) {
            Some(e) => (codes::NONE, None, (e.broker_id, e.host, i32::from(e.port))),
            None => refuse(
                COORDINATOR_NOT_AVAILABLE,
                "the node coordinating this key is fenced (down); try again".into(),
            ),
        }
    };
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|k| {
                let (code, msg, (node, host, port)) = answer(k);
                Coordinator::default()
                    .with_key(k.clone())
                    .with_node_id(BrokerId(node))
                    .with_host(str_bytes(host))
                    .with_port(port)
                    .with_error_code(code)
                    .with_error_message(msg.map(str_bytes))
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (code, msg, (node, host, port)) = answer(&req.key);
    let mut r = FindCoordinatorResponse::default()
        .with_error_code(code)
        .with_node_id(BrokerId(node))
        .with_host(str_bytes(host))
        .with_port(port);
    if version >= 1 {
        r.error_message = msg.map(str_bytes);
    }
    r
}

pub async fn join_group(
    state: &Rc<CoreState>,
    version: i16,
    req: JoinGroupRequest,
    client_id: String,
    client_host: String,
) -> JoinGroupResponse {
    let group_id = req.group_id.0.to_string();
    let args = JoinArgs {
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id,
        client_host,
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let gid = group_id.clone();
    let result = on_group_core(state, &group_id, move |s, partition| async move {
        let limits = s.consumer_group_limits();
        let partitions_of = |t: &str| s.meta.borrow().topic(t).map(|m| m.partitions);
        let reply = with_group(&s, &gid, partition, |g| {
            // A consumer group (KIP-848) serves classic members itself.
            if let Some(c) = g.consumer.as_mut().filter(|c| !c.is_empty()) {
                return Reply::Now(classic_join_to_consumer_group(
                    c,
                    &args,
                    &limits,
                    &partitions_of,
                ));
            }
            g.group.join(args, Instant::now())
        });
        match reply {
            Err(code) => JoinResult {
                error: code,
                generation: -1,
                ..Default::default()
            },
            Ok(Reply::Now(r)) => r,
            Ok(Reply::Later(rx)) => rx.recv_async().await.unwrap_or(JoinResult {
                error: codes::UNKNOWN_SERVER_ERROR,
                generation: -1,
                ..Default::default()
            }),
        }
    })
    .await
    .unwrap_or_else(|code| JoinResult {
        error: code,
        generation: -1,
        ..Default::default()
    });
    let mut r = JoinGroupResponse::default()
        .with_error_code(result.error)
        .with_generation_id(result.generation)
        .with_leader(str_bytes(result.leader))
        .with_member_id(str_bytes(result.member_id))
        .with_members(
            result
                .members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    let mut m = JoinGroupResponseMember::default()
                        .with_member_id(str_bytes(id))
                        .with_metadata(metadata);
                    if version >= 5 {
                        m.group_instance_id = instance.map(str_bytes);
                    }
                    m
                })
                .collect(),
        );
    if version >= 7 {
        // Nullable from v7: null on an error, as Kafka answers.
        r.protocol_name = result.protocol_name.map(str_bytes);
        r.protocol_type = result.protocol_type.map(str_bytes);
    } else {
        r.protocol_name = Some(str_bytes(result.protocol_name.unwrap_or_default()));
    }
    r
}

pub async fn sync_group(
    state: &Rc<CoreState>,
    version: i16,
    req: SyncGroupRequest,
) -> SyncGroupResponse {
    // From v5 the protocol type and name are mandatory, checked first (as Kafka does).
    if version >= 5 && (req.protocol_type.is_none() || req.protocol_name.is_none()) {
        return SyncGroupResponse::default().with_error_code(codes::INCONSISTENT_GROUP_PROTOCOL);
    }
    let group_id = req.group_id.0.to_string();
    let member = req.member_id.to_string();
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let generation = req.generation_id;
    let assignments: Vec<(String, Bytes)> = req
        .assignments
        .iter()
        .map(|a| (a.member_id.to_string(), a.assignment.clone()))
        .collect();
    let gid = group_id.clone();
    let result = on_group_core(state, &group_id, move |s, _partition| async move {
        let reply = with_existing_group(&s, &gid, |g| {
            if let Some(c) = g.consumer.as_ref().filter(|c| !c.is_empty()) {
                return Reply::Now(match c.classic_sync(&member, generation) {
                    Ok(m) => SyncResult {
                        error: codes::NONE,
                        protocol_type: Some(crate::group::migration::CONSUMER_PROTOCOL_TYPE.into()),
                        protocol_name: m
                            .classic
                            .as_ref()
                            .and_then(|c| c.protocols.first().map(|(n, _)| n.clone())),
                        assignment: crate::group::migration::encode_assignment(&m.assigned),
                    },
                    Err(error) => SyncResult {
                        error,
                        ..Default::default()
                    },
                });
            }
            g.group.sync(
                &member,
                instance.as_deref(),
                generation,
                assignments,
                Instant::now(),
            )
        });
        match reply {
            None => SyncResult {
                error: UNKNOWN_MEMBER_ID,
                ..Default::default()
            },
            Some(Reply::Now(r)) => r,
            Some(Reply::Later(rx)) => rx.recv_async().await.unwrap_or(SyncResult {
                error: codes::UNKNOWN_SERVER_ERROR,
                ..Default::default()
            }),
        }
    })
    .await
    .unwrap_or_else(|code| SyncResult {
        error: code,
        ..Default::default()
    });
    let mut r = SyncGroupResponse::default()
        .with_error_code(result.error)
        .with_assignment(result.assignment);
    if version >= 5 {
        r.protocol_type = result.protocol_type.map(str_bytes);
        r.protocol_name = result.protocol_name.map(str_bytes);
    }
    r
}

pub async fn heartbeat(state: &Rc<CoreState>, req: HeartbeatRequest) -> HeartbeatResponse {
    let group_id = req.group_id.0.to_string();
    let member = req.member_id.to_string();
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let generation = req.generation_id;
    let gid = group_id.clone();
    let code = on_group_core(state, &group_id, move |s, _partition| async move {
        with_existing_group(&s, &gid, |g| {
            match g.consumer.as_mut().filter(|c| !c.is_empty()) {
                Some(c) => c.classic_heartbeat(&member, generation, Instant::now()),
                None => g
                    .group
                    .heartbeat(&member, instance.as_deref(), generation, Instant::now()),
            }
        })
        .unwrap_or(UNKNOWN_MEMBER_ID)
    })
    .await
    .unwrap_or_else(|c| c);
    HeartbeatResponse::default().with_error_code(code)
}

pub async fn leave_group(
    state: &Rc<CoreState>,
    version: i16,
    req: LeaveGroupRequest,
) -> LeaveGroupResponse {
    let group_id = req.group_id.0.to_string();
    let who: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let gid = group_id.clone();
    let who2 = who.clone();
    let result = on_group_core(state, &group_id, move |s, _partition| async move {
        with_existing_group(&s, &gid, |g| {
            match g.consumer.as_mut().filter(|c| !c.is_empty()) {
                Some(c) => {
                    let codes = c.classic_leave(&who2);
                    if c.is_empty() {
                        g.consumer = None;
                    }
                    codes
                }
                None => g.group.leave(&who2, Instant::now()),
            }
        })
        .unwrap_or_else(|| vec![UNKNOWN_MEMBER_ID; who2.len()])
    })
    .await;
    match result {
        Err(code) => LeaveGroupResponse::default().with_error_code(code),
        Ok(codes_per_member) if version >= 3 => LeaveGroupResponse::default().with_members(
            who.into_iter()
                .zip(codes_per_member)
                .map(|((m, i), c)| {
                    MemberResponse::default()
                        .with_member_id(str_bytes(m))
                        .with_group_instance_id(i.map(str_bytes))
                        .with_error_code(c)
                })
                .collect(),
        ),
        Ok(codes_per_member) => LeaveGroupResponse::default()
            .with_error_code(codes_per_member.first().copied().unwrap_or(0)),
    }
}

/// A classic JoinGroup to a consumer group: answered at once with the member epoch as the
/// generation and no leader (the broker assigns; SyncGroup carries the assignment).
fn classic_join_to_consumer_group(
    c: &mut crate::group::consumer::ConsumerGroup,
    args: &JoinArgs,
    limits: &crate::group::consumer::ConsumerGroupLimits,
    partitions_of: &dyn Fn(&str) -> Option<u32>,
) -> JoinResult {
    let refused = |error| JoinResult {
        error,
        generation: -1,
        ..Default::default()
    };
    if args.member_id.is_empty() && args.require_known_member_id {
        return JoinResult {
            member_id: crate::group::state::new_member_id(&args.client_id),
            ..refused(codes::MEMBER_ID_REQUIRED)
        };
    }
    let member_id = if args.member_id.is_empty() {
        crate::group::state::new_member_id(&args.client_id)
    } else {
        args.member_id.clone()
    };
    let Some(join) = crate::group::migration::classic_join_of(args, member_id.clone()) else {
        return refused(codes::INCONSISTENT_GROUP_PROTOCOL);
    };
    let protocol_name = join.classic.protocols.first().map(|(n, _)| n.clone());
    match c.classic_join(join, limits, partitions_of, Instant::now()) {
        Ok(epoch) => JoinResult {
            error: codes::NONE,
            generation: epoch,
            protocol_type: Some(crate::group::migration::CONSUMER_PROTOCOL_TYPE.into()),
            protocol_name,
            leader: String::new(),
            member_id,
            members: Vec::new(),
        },
        Err(code) => refused(code),
    }
}

/// The offsets of one commit, as (topic, partition, committed).
type CommitItems = Vec<(String, i32, Committed)>;
/// Per topic of an OffsetCommit: each partition's offset to store, or the code refusing it.
type CommitSlots = Vec<(String, Vec<(i32, Result<Committed, i16>)>)>;

/// The first OffsetCommit version told GROUP_ID_NOT_FOUND for a member's commit to a group
/// that does not exist; older clients are told ILLEGAL_GENERATION (as Kafka answers them).
const OFFSET_COMMIT_GROUP_ID_NOT_FOUND_SINCE_VERSION: i16 = 9;

pub async fn offset_commit(
    state: &Rc<CoreState>,
    version: i16,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let group_id = req.group_id.0.to_string();
    let member = req.member_id.to_string();
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let generation = if version >= 1 {
        req.generation_id_or_member_epoch
    } else {
        -1
    };
    let now = now_ms();
    // Per partition: Ok(committed) to store, or Err(code) refused up front.
    let mut slots: CommitSlots = Vec::new();
    for t in &req.topics {
        let name = t.name.0.to_string();
        let exists = partition_exists(state, &name);
        let parts = t
            .partitions
            .iter()
            .map(|p| {
                let r = if !exists(p.partition_index) {
                    Err(codes::UNKNOWN_TOPIC_OR_PARTITION)
                } else if p
                    .committed_metadata
                    .as_ref()
                    .is_some_and(|m| m.len() > MAX_OFFSET_METADATA_BYTES)
                {
                    Err(OFFSET_METADATA_TOO_LARGE)
                } else {
                    Ok(Committed {
                        offset: p.committed_offset,
                        leader_epoch: if version >= 6 {
                            p.committed_leader_epoch
                        } else {
                            -1
                        },
                        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                        commit_ms: now,
                    })
                };
                (p.partition_index, r)
            })
            .collect();
        slots.push((name, parts));
    }
    let items: CommitItems = slots
        .iter()
        .flat_map(|(t, ps)| {
            ps.iter()
                .filter_map(move |(p, r)| r.as_ref().ok().map(|c| (t.clone(), *p, c.clone())))
        })
        .collect();
    let gid = group_id.clone();
    let outcome: Result<Result<(), i16>, i16> =
        on_group_core(state, &group_id, move |s, partition| async move {
            // Nothing to store (every partition refused up front): no group state is touched
            // or created. Otherwise the commit may create its group (a simple consumer commits
            // with generation -1 and no member) and must pass the group's check.
            if items.is_empty() {
                return Ok(());
            }
            // A member's commit (generation >= 0) to a group that does not exist: the group
            // is gone or never was; only a simple consumer's (generation -1) creates it.
            if generation >= 0 && !s.coordinators.groups.borrow().contains_key(&gid) {
                return Err(
                    if version >= OFFSET_COMMIT_GROUP_ID_NOT_FOUND_SINCE_VERSION {
                        codes::GROUP_ID_NOT_FOUND
                    } else {
                        codes::ILLEGAL_GENERATION
                    },
                );
            }
            with_group(&s, &gid, partition, |g| {
                g.check_commit(
                    &member,
                    instance.as_deref(),
                    generation,
                    items.iter().map(|(t, p, _)| (t.as_str(), *p)),
                )
            })??;
            let items: Vec<(String, i32, Option<Committed>)> =
                items.into_iter().map(|(t, p, c)| (t, p, Some(c))).collect();
            persist_offsets(&s, &gid, partition, &items).await
        })
        .await;
    let group_code = match outcome {
        Ok(Ok(())) => codes::NONE,
        Ok(Err(c)) | Err(c) => c,
    };
    let topics = slots
        .into_iter()
        .map(|(name, parts)| {
            OffsetCommitResponseTopic::default()
                .with_name(TopicName(str_bytes(name)))
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(p, r)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(match r {
                                    Ok(_) => group_code,
                                    Err(c) => c,
                                })
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// (topic, [partitions]) asked for; `None` = every committed offset of the group.
type FetchWanted = Option<Vec<(String, Vec<i32>)>>;
/// (partition, committed or none, or Err(UNSTABLE_OFFSET_COMMIT))
type FetchedPartition = (i32, Result<Option<Committed>, i16>);
/// (topic, its partitions)
type FetchAnswer = Vec<(String, Vec<FetchedPartition>)>;

/// The committed offsets asked for. With `require_stable` (KIP-447), a partition an open
/// transaction holds an offset for answers UNSTABLE_OFFSET_COMMIT (the client retries).
async fn fetch_group(
    state: &Rc<CoreState>,
    group_id: String,
    wanted: FetchWanted,
    require_stable: bool,
) -> Result<FetchAnswer, i16> {
    let gid = group_id.clone();
    on_group_core(state, &group_id, move |s, _partition| async move {
        let groups = s.coordinators.groups.borrow();
        let group = groups.get(&gid);
        let offsets = group.map(|g| &g.offsets);
        let answer = |t: &str, p: i32| {
            if require_stable && group.is_some_and(|g| g.has_pending_txn_offset(t, p)) {
                Err(codes::UNSTABLE_OFFSET_COMMIT)
            } else {
                Ok(offsets.and_then(|o| o.get(&(t.to_string(), p)).cloned()))
            }
        };
        match wanted {
            Some(w) => w
                .into_iter()
                .map(|(t, ps)| {
                    let got = ps.into_iter().map(|p| (p, answer(&t, p))).collect();
                    (t, got)
                })
                .collect(),
            None => {
                let mut by_topic: std::collections::BTreeMap<String, Vec<FetchedPartition>> =
                    Default::default();
                if let Some(o) = offsets {
                    for (t, p) in o.keys() {
                        by_topic
                            .entry(t.clone())
                            .or_default()
                            .push((*p, answer(t, *p)));
                    }
                }
                by_topic.into_iter().collect()
            }
        }
    })
    .await
}

/// (partition, offset, leader epoch, metadata, error code) of one answered partition.
fn fetched_partition(
    p: i32,
    c: Result<Option<Committed>, i16>,
) -> (i32, i64, i32, Option<String>, i16) {
    match c {
        Ok(Some(c)) => (p, c.offset, c.leader_epoch, c.metadata, codes::NONE),
        Ok(None) => (p, -1, -1, Some(String::new()), codes::NONE),
        Err(code) => (p, -1, -1, Some(String::new()), code),
    }
}

pub async fn offset_fetch(
    state: &Rc<CoreState>,
    version: i16,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    if version >= 8 {
        let require_stable = req.require_stable;
        let futs = req.groups.into_iter().map(|g| {
            let state = state.clone();
            async move {
                let gid = g.group_id.0.to_string();
                let wanted = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes))
                        .collect()
                });
                let mut out = OffsetFetchResponseGroup::default()
                    .with_group_id(GroupId(str_bytes(gid.clone())));
                match fetch_group(&state, gid, wanted, require_stable).await {
                    Ok(answer) => {
                        out.topics = answer
                            .into_iter()
                            .map(|(t, ps)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(TopicName(str_bytes(t)))
                                    .with_partitions(
                                        ps.into_iter()
                                            .map(|(p, c)| {
                                                let (p, o, e, m, code) = fetched_partition(p, c);
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(p)
                                                    .with_error_code(code)
                                                    .with_committed_offset(o)
                                                    .with_committed_leader_epoch(e)
                                                    .with_metadata(m.map(str_bytes))
                                            })
                                            .collect(),
                                    )
                            })
                            .collect()
                    }
                    Err(code) => out.error_code = code,
                }
                out
            }
        });
        return OffsetFetchResponse::default().with_groups(join_all(futs).await);
    }
    let gid = req.group_id.0.to_string();
    let wanted = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    let mut r = OffsetFetchResponse::default();
    match fetch_group(state, gid, wanted, version >= 7 && req.require_stable).await {
        Ok(answer) => {
            r.topics = answer
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(str_bytes(t)))
                        .with_partitions(
                            ps.into_iter()
                                .map(|(p, c)| {
                                    let (p, o, e, m, code) = fetched_partition(p, c);
                                    let mut x = OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_error_code(code)
                                        .with_committed_offset(o)
                                        .with_metadata(m.map(str_bytes));
                                    if version >= 5 {
                                        x.committed_leader_epoch = e;
                                    }
                                    x
                                })
                                .collect(),
                        )
                })
                .collect();
        }
        Err(code) if version >= 2 => r.error_code = code,
        Err(_) => {}
    }
    r
}

pub async fn list_groups(
    state: &Rc<CoreState>,
    version: i16,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let filter: Vec<String> = if version >= 4 {
        req.states_filter
            .iter()
            .map(|s| s.to_string().to_lowercase())
            .collect()
    } else {
        Vec::new()
    };
    // v5 (KIP-848): a types filter ("classic", "consumer"); none: every type.
    let types: Vec<String> = if version >= 5 {
        req.types_filter
            .iter()
            .map(|t| t.to_string().to_lowercase())
            .collect()
    } else {
        Vec::new()
    };
    let per_core = (0..state.shards.cores()).map(|core| {
        let state = state.clone();
        async move {
            let list = |s: Rc<CoreState>| async move {
                s.coordinators
                    .groups
                    .borrow()
                    .values()
                    .map(|g| match g.consumer.as_ref().filter(|c| !c.is_empty()) {
                        Some(c) => (
                            g.group.id.clone(),
                            "consumer".to_string(),
                            crate::group::consumer::state_name(Some(c)).to_string(),
                            "consumer",
                        ),
                        None => (
                            g.group.id.clone(),
                            g.group.protocol_type.clone().unwrap_or_default(),
                            g.group.state.name().to_string(),
                            "classic",
                        ),
                    })
                    .collect::<Vec<_>>()
            };
            crate::route::on_core(&state, core, list)
                .await
                .unwrap_or_default()
        }
    });
    let mut groups: Vec<ListedGroup> = join_all(per_core)
        .await
        .into_iter()
        .flatten()
        .filter(|(_, _, st, _)| filter.is_empty() || filter.contains(&st.to_lowercase()))
        .filter(|(_, _, _, ty)| types.is_empty() || types.iter().any(|t| t == ty))
        .map(|(id, pt, st, ty)| {
            let mut g = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(id)))
                .with_protocol_type(str_bytes(pt));
            if version >= 4 {
                g.group_state = str_bytes(st);
            }
            if version >= 5 {
                g.group_type = str_bytes(ty);
            }
            g
        })
        .collect();
    groups.sort_by(|a, b| a.group_id.0.cmp(&b.group_id.0));
    ListGroupsResponse::default().with_groups(groups)
}

pub async fn describe_groups(
    state: &Rc<CoreState>,
    version: i16,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let futs = req.groups.into_iter().map(|gid| {
        let state = state.clone();
        async move {
            let id = gid.0.to_string();
            let id2 = id.clone();
            let described = on_group_core(&state, &id, move |s, _partition| async move {
                let groups = s.coordinators.groups.borrow();
                let Some(g) = groups.get(&id2) else {
                    // v6 (KIP-1043) says so with GROUP_ID_NOT_FOUND, as Kafka does.
                    let dead = DescribedGroup::default()
                        .with_group_state(str_bytes(GroupState::Dead.name()));
                    return if version >= 6 {
                        dead.with_error_code(GROUP_ID_NOT_FOUND).with_error_message(Some(
                            str_bytes(format!("group '{id2}' does not exist")),
                        ))
                    } else {
                        dead
                    };
                };
                // A consumer-protocol group is described by ConsumerGroupDescribe (as Kafka
                // answers; the admin client asks that first).
                if g.consumer.as_ref().is_some_and(|c| !c.is_empty()) {
                    let mut d = DescribedGroup::default().with_error_code(GROUP_ID_NOT_FOUND);
                    if version >= 6 {
                        d.error_message = Some(str_bytes(format!(
                            "group '{id2}' is a consumer-protocol (KIP-848) group: ConsumerGroupDescribe describes it"
                        )));
                    }
                    return d;
                }
                let g = &g.group;
                let protocol = g.protocol.clone().unwrap_or_default();
                let members = g
                    .members
                    .values()
                    .map(|m| {
                        let mut d = DescribedGroupMember::default()
                            .with_member_id(str_bytes(m.id.clone()))
                            .with_client_id(str_bytes(m.client_id.clone()))
                            .with_client_host(str_bytes(m.client_host.clone()))
                            .with_member_metadata(m.metadata(&protocol))
                            .with_member_assignment(m.assignment.clone());
                        if version >= 4 {
                            d.group_instance_id = m.instance_id.clone().map(str_bytes);
                        }
                        d
                    })
                    .collect();
                DescribedGroup::default()
                    .with_group_state(str_bytes(g.state.name()))
                    .with_protocol_type(str_bytes(g.protocol_type.clone().unwrap_or_default()))
                    .with_protocol_data(str_bytes(protocol))
                    .with_members(members)
            })
            .await;
            match described {
                Ok(d) => d.with_group_id(GroupId(str_bytes(id))),
                Err(code) => DescribedGroup::default()
                    .with_group_id(GroupId(str_bytes(id)))
                    .with_error_code(code),
            }
        }
    });
    DescribeGroupsResponse::default().with_groups(join_all(futs).await)
}

pub async fn delete_groups(
    state: &Rc<CoreState>,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let futs = req.groups_names.into_iter().map(|gid| {
        let state = state.clone();
        async move {
            let id = gid.0.to_string();
            let id2 = id.clone();
            let code = on_group_core(&state, &id, move |s, partition| async move {
                let tombstones: Vec<(String, i32, Option<Committed>)> = {
                    let groups = s.coordinators.groups.borrow();
                    let Some(g) = groups.get(&id2) else {
                        return GROUP_ID_NOT_FOUND;
                    };
                    if g.has_members() {
                        return NON_EMPTY_GROUP;
                    }
                    g.offsets
                        .keys()
                        .map(|(t, p)| (t.clone(), *p, None))
                        .collect()
                };
                match persist_offsets(&s, &id2, partition, &tombstones).await {
                    Ok(()) => {
                        let removable = s
                            .coordinators
                            .groups
                            .borrow()
                            .get(&id2)
                            .is_some_and(|g| !g.has_members());
                        if removable {
                            s.coordinators.groups.borrow_mut().remove(&id2);
                            tracing::info!(group = %id2, "group deleted");
                            codes::NONE
                        } else {
                            NON_EMPTY_GROUP
                        }
                    }
                    Err(c) => c,
                }
            })
            .await
            .unwrap_or_else(|c| c);
            DeletableGroupResult::default()
                .with_group_id(GroupId(str_bytes(id)))
                .with_error_code(code)
        }
    });
    DeleteGroupsResponse::default().with_results(join_all(futs).await)
}

/// The protocol type of groups whose member metadata is Kafka's consumer protocol.
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The topics of one member's `ConsumerProtocolSubscription`, read as Kafka's coordinator does
/// with the v0 layout every later version starts with (`version i16 | topics [str16] | ...`);
/// `None` when it does not parse.
pub fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if b.len() < n {
            return None;
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Some(head)
    }
    fn int16(b: &mut &[u8]) -> Option<i16> {
        take(b, 2).map(|x| i16::from_be_bytes([x[0], x[1]]))
    }
    let mut b = metadata;
    let _version = int16(&mut b)?;
    let count = take(&mut b, 4).map(|x| i32::from_be_bytes([x[0], x[1], x[2], x[3]]))?;
    // A negative count is a null array, which the schema does not allow; each topic takes at
    // least its two length bytes, so a count beyond that cannot be honest.
    if count < 0 || count as usize > b.len() / 2 {
        return None;
    }
    let mut topics = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = usize::try_from(int16(&mut b)?).ok()?;
        topics.push(String::from_utf8(take(&mut b, len)?.to_vec()).ok()?);
    }
    Some(topics)
}

/// The topics whose offsets an OffsetDelete may not remove from `g`, as Kafka's classic group
/// decides (`ClassicGroup.validateOffsetDelete`, `isSubscribedToTopic`): `Ok(Some(topics))`
/// the live consumers subscribe to, `Ok(None)` when that is unknown (no protocol chosen yet,
/// metadata that does not parse: every topic counts as subscribed), `Err(code)` for the whole
/// request (GROUP_ID_NOT_FOUND for a dead group, NON_EMPTY_GROUP for a live group of another
/// protocol type).
fn offset_delete_guard(g: &crate::group::Group) -> Result<Option<HashSet<String>>, i16> {
    match g.state {
        GroupState::Dead => Err(GROUP_ID_NOT_FOUND),
        GroupState::Empty => Ok(Some(HashSet::new())),
        _ if g.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) => Err(NON_EMPTY_GROUP),
        _ => Ok(g.protocol.as_ref().and_then(|p| {
            g.members.values().try_fold(HashSet::new(), |mut all, m| {
                all.extend(subscribed_topics(&m.metadata(p))?);
                Some(all)
            })
        })),
    }
}

/// Per topic of an OffsetDelete, per partition: `None` goes to the coordinator, `Some(code)` is
/// answered without it.
type DeleteSlots = Vec<(String, Vec<(i32, Option<i16>)>)>;

/// OffsetDelete (KIP-496) as Kafka answers it: per partition UNKNOWN_TOPIC_OR_PARTITION for a
/// topic or partition the cluster does not have, GROUP_SUBSCRIBED_TO_TOPIC while the group's
/// live consumers subscribe to the topic, else NONE (a committed offset is forgotten with a
/// durable tombstone; one that was never committed is nothing to do). A group error answers
/// the whole request alone: INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a live group
/// of another protocol type, e.g. a Connect cluster), COORDINATOR_NOT_AVAILABLE, or the log's
/// error when the tombstones cannot be written.
pub async fn offset_delete(
    state: &Rc<CoreState>,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group_id = req.group_id.0.to_string();
    let mut slots: DeleteSlots = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let name = t.name.0.to_string();
        let exists = partition_exists(state, &name);
        let parts = t
            .partitions
            .iter()
            .map(|p| {
                let i = p.partition_index;
                (i, (!exists(i)).then_some(codes::UNKNOWN_TOPIC_OR_PARTITION))
            })
            .collect();
        slots.push((name, parts));
    }
    let asked: Vec<(String, i32)> = slots
        .iter()
        .flat_map(|(t, ps)| {
            ps.iter()
                .filter(|(_, c)| c.is_none())
                .map(move |(p, _)| (t.clone(), *p))
        })
        .collect();
    let gid = group_id.clone();
    // The topics refused as subscribed, or the group's error.
    let outcome: Result<Result<HashSet<String>, i16>, i16> =
        on_group_core(state, &group_id, move |s, partition| async move {
            let (subscribed, tombstones) = {
                let groups = s.coordinators.groups.borrow();
                let Some(g) = groups.get(&gid) else {
                    return Err(GROUP_ID_NOT_FOUND);
                };
                let guard = offset_delete_guard(&g.group)?;
                let is_subscribed = |t: &str| guard.as_ref().is_none_or(|set| set.contains(t));
                let mut subscribed: HashSet<String> = HashSet::new();
                // A partition named twice is forgotten once.
                let mut doomed: HashSet<(String, i32)> = HashSet::new();
                for (t, p) in asked {
                    if is_subscribed(&t) {
                        subscribed.insert(t);
                    } else if g.offsets.contains_key(&(t.clone(), p)) {
                        doomed.insert((t, p));
                    }
                }
                let tombstones: OffsetRecords =
                    doomed.into_iter().map(|(t, p)| (t, p, None)).collect();
                (subscribed, tombstones)
            };
            persist_offsets(&s, &gid, partition, &tombstones).await?;
            if !tombstones.is_empty() {
                tracing::info!(group = %gid, partitions = tombstones.len(), "committed offsets deleted");
            }
            Ok(subscribed)
        })
        .await;
    let subscribed = match outcome {
        Ok(Ok(s)) => s,
        Ok(Err(code)) | Err(code) => {
            return OffsetDeleteResponse::default().with_error_code(code);
        }
    };
    let topics = slots
        .into_iter()
        .map(|(name, parts)| {
            let refused = subscribed.contains(&name);
            OffsetDeleteResponseTopic::default()
                .with_name(TopicName(str_bytes(name)))
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|(p, code)| {
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code.unwrap_or(if refused {
                                    GROUP_SUBSCRIBED_TO_TOPIC
                                } else {
                                    codes::NONE
                                }))
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::subscribed_topics;

    /// A `ConsumerProtocolSubscription` of `version` with `topics`, and some bytes after them
    /// (user data, owned partitions: whatever a later version adds).
    fn subscription(version: i16, topics: &[&str]) -> Vec<u8> {
        let mut b = version.to_be_bytes().to_vec();
        b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for t in topics {
            b.extend_from_slice(&(t.len() as i16).to_be_bytes());
            b.extend_from_slice(t.as_bytes());
        }
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 0]);
        b
    }

    #[test]
    fn consumer_subscriptions_parse_with_the_v0_prefix_of_every_version() {
        for v in [0, 1, 3] {
            assert_eq!(
                subscribed_topics(&subscription(v, &["a", "bb"])),
                Some(vec!["a".to_string(), "bb".to_string()])
            );
        }
        assert_eq!(subscribed_topics(&subscription(0, &[])), Some(vec![]));
    }

    #[test]
    fn malformed_subscriptions_are_unknown_not_a_panic() {
        assert_eq!(subscribed_topics(&[]), None);
        assert_eq!(subscribed_topics(&[0, 0, 0]), None);
        // A count far beyond the bytes that follow, a negative count, a cut topic name.
        assert_eq!(
            subscribed_topics(&[0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1]),
            None
        );
        assert_eq!(subscribed_topics(&[0, 0, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(subscribed_topics(&[0, 0, 0, 0, 0, 1, 0, 5, b'a']), None);
        assert_eq!(subscribed_topics(&[0, 0, 0, 0, 0, 1, 0xff, 0xff]), None);
        // Not UTF-8.
        assert_eq!(subscribed_topics(&[0, 0, 0, 0, 0, 1, 0, 1, 0xff]), None);
    }
}
