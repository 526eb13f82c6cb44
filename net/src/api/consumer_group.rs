//! KIP-848 consumer groups on the wire: ConsumerGroupHeartbeat (API 68) and
//! ConsumerGroupDescribe (API 69). The state machine is `crate::group::consumer`; this file
//! maps topic ids to names and back, and runs each call on the group's coordinator core.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Instant;

use kafka_protocol::messages::consumer_group_describe_response::{
    self as describe, DescribedGroup,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment, TopicPartitions as HbTopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};

use super::str_bytes;
use crate::codes;
use crate::coordinators::group::{on_group_core, with_existing_group, with_group};
use crate::core::CoreState;
use crate::group::consumer::{self, ConsumerGroup, Heartbeat, TopicPartitions};
use crate::group::migration::{convert_classic, downgrade_if_classic_only};

/// `member_type` of ConsumerGroupDescribe v1: a member speaking the consumer protocol, or
/// the classic one.
const MEMBER_TYPE_CONSUMER: i8 = 1;
const MEMBER_TYPE_CLASSIC: i8 = 0;

fn topic_id(state: &CoreState, name: &str) -> uuid::Uuid {
    state
        .meta
        .borrow()
        .topic(name)
        .map_or(uuid::Uuid::nil(), |t| uuid::Uuid::from_bytes(t.topic_id))
}

fn refused(code: i16, message: impl Into<String>) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(str_bytes(message.into())))
}

pub async fn consumer_group_heartbeat(
    state: &Rc<CoreState>,
    version: i16,
    req: ConsumerGroupHeartbeatRequest,
    client_id: String,
    client_host: String,
) -> ConsumerGroupHeartbeatResponse {
    let group_id = req.group_id.0.to_string();
    // Kafka validates the request before the group: no group id is INVALID_REQUEST.
    if group_id.is_empty() {
        return refused(codes::INVALID_REQUEST, "the group id is empty");
    }
    // v1 (KIP-1082): the client makes its own member id and sends it from the first call.
    if version >= 1 && req.member_id.is_empty() {
        return refused(codes::INVALID_REQUEST, "a member id is required (v1)");
    }
    // Owned partitions come by topic id; ids of topics gone are dropped.
    let owned = req.topic_partitions.as_ref().map(|tps| {
        let mut out = TopicPartitions::new();
        for tp in tps {
            if let Some(name) = state.topic_name_by_id(tp.topic_id) {
                out.entry(name)
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
        }
        out
    });
    let hb = Heartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed: req
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.0.to_string()).collect()),
        subscribed_regex: req.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
        assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
        owned,
        client_id,
        client_host,
    };
    let gid = group_id.clone();
    let outcome = on_group_core(state, &group_id, move |s, partition| async move {
        let limits = s.consumer_group_limits();
        let partitions_of = |t: &str| s.meta.borrow().topic(t).map(|m| m.partitions);
        let delay = s.initial_rebalance_delay();
        let answer = with_group(&s, &gid, partition, |g| {
            if !g.group.members.is_empty() {
                // A consumer-protocol member joining a live classic group converts it.
                if hb.member_epoch != 0 {
                    return Err((
                        codes::UNKNOWN_MEMBER_ID,
                        format!("group '{gid}' is a classic group; join with epoch 0"),
                    ));
                }
                convert_classic(g, delay)?;
            }
            let cg = g.consumer.get_or_insert_with(ConsumerGroup::default);
            let client = hb.client_id.clone();
            // What a subscription regex may match: every topic but the internal ones.
            let all_topics = || {
                s.meta
                    .borrow()
                    .topics
                    .keys()
                    .filter(|t| !crate::core::is_internal_topic(t))
                    .cloned()
                    .collect()
            };
            let r = cg.heartbeat(
                hb,
                &limits,
                &partitions_of,
                &all_topics,
                || crate::group::state::new_member_id(&client),
                Instant::now(),
            );
            if cg.is_empty() {
                g.consumer = None;
            }
            downgrade_if_classic_only(g, delay);
            r
        });
        let heartbeat_ms = match &answer {
            Ok(Ok(a)) => a.heartbeat_interval(&limits),
            _ => limits.heartbeat_interval,
        }
        .as_millis() as i32;
        (answer, heartbeat_ms)
    })
    .await;
    let (answer, heartbeat_ms) = match outcome {
        Ok(x) => x,
        Err(code) => return refused(code, "no coordinator for the group"),
    };
    let answer = match answer {
        Err(code) => return refused(code, "the core coordinates the most groups it may"),
        Ok(Err((code, message))) => return refused(code, message),
        Ok(Ok(a)) => a,
    };
    let assignment = answer.assignment.map(|a| {
        Assignment::default().with_topic_partitions(
            a.into_iter()
                .map(|(t, ps)| {
                    HbTopicPartitions::default()
                        .with_topic_id(topic_id(state, &t))
                        .with_partitions(ps.into_iter().collect())
                })
                .collect(),
        )
    });
    ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(str_bytes(answer.member_id)))
        .with_member_epoch(answer.member_epoch)
        .with_heartbeat_interval_ms(heartbeat_ms)
        .with_assignment(assignment)
}

fn described_partitions(state: &CoreState, tp: &TopicPartitions) -> describe::Assignment {
    describe::Assignment::default().with_topic_partitions(
        tp.iter()
            .map(|(t, ps)| {
                describe::TopicPartitions::default()
                    .with_topic_id(topic_id(state, t))
                    .with_topic_name(TopicName(str_bytes(t.clone())))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

fn describe_group(s: &CoreState, id: &str, g: &ConsumerGroup) -> DescribedGroup {
    let members = g
        .members
        .values()
        .map(|m| {
            // What the member holds, including what it is still releasing.
            let mut held = m.assigned.clone();
            for (t, ps) in &m.revoking {
                held.entry(t.clone())
                    .or_default()
                    .extend(ps.iter().copied());
            }
            let target = g.target.get(&m.id).cloned().unwrap_or_default();
            describe::Member::default()
                .with_member_id(str_bytes(m.id.clone()))
                .with_instance_id(m.instance_id.clone().map(str_bytes))
                .with_rack_id(m.rack_id.clone().map(str_bytes))
                .with_member_epoch(m.epoch)
                .with_client_id(str_bytes(m.client_id.clone()))
                .with_client_host(str_bytes(m.client_host.clone()))
                .with_subscribed_topic_names(
                    m.subscribed
                        .iter()
                        .map(|t| TopicName(str_bytes(t.clone())))
                        .collect(),
                )
                .with_subscribed_topic_regex(m.regex.as_ref().map(|r| str_bytes(r.text.clone())))
                .with_assignment(described_partitions(s, &held))
                .with_target_assignment(described_partitions(s, &target))
                .with_member_type(if m.classic.is_some() {
                    MEMBER_TYPE_CLASSIC
                } else {
                    MEMBER_TYPE_CONSUMER
                })
        })
        .collect();
    DescribedGroup::default()
        .with_group_id(GroupId(str_bytes(id.to_string())))
        .with_group_state(str_bytes(consumer::state_name(Some(g))))
        .with_group_epoch(g.epoch)
        .with_assignment_epoch(g.assignment_epoch)
        .with_assignor_name(str_bytes(g.assignor()))
        .with_members(members)
        .with_authorized_operations(i32::MIN)
}

pub async fn consumer_group_describe(
    state: &Rc<CoreState>,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    // Each id once, in the order asked.
    let mut seen = BTreeSet::new();
    let ids: Vec<String> = req
        .group_ids
        .iter()
        .map(|g| g.0.to_string())
        .filter(|g| seen.insert(g.clone()))
        .collect();
    let futs = ids.into_iter().map(|id| {
        let state = state.clone();
        async move {
            let id2 = id.clone();
            let described = on_group_core(&state, &id, move |s, _partition| async move {
                with_existing_group(&s, &id2, |g| {
                    g.consumer
                        .as_ref()
                        .filter(|c| !c.is_empty())
                        .map(|c| describe_group(&s, &id2, c))
                        .ok_or("is a classic group (DescribeGroups describes it)")
                })
                .unwrap_or(Err("does not exist"))
            })
            .await;
            match described {
                Ok(Ok(d)) => d,
                // Not a consumer-protocol group (the admin client then asks DescribeGroups).
                Ok(Err(why)) => DescribedGroup::default()
                    .with_group_id(GroupId(str_bytes(id.clone())))
                    .with_error_code(codes::GROUP_ID_NOT_FOUND)
                    .with_error_message(Some(str_bytes(format!("group '{id}' {why}")))),
                Err(code) => DescribedGroup::default()
                    .with_group_id(GroupId(str_bytes(id)))
                    .with_error_code(code),
            }
        }
    });
    ConsumerGroupDescribeResponse::default().with_groups(engine::join::join_all(futs).await)
}
