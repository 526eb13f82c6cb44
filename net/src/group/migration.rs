//! Kafka 4's online migration between the classic and the consumer (KIP-848) group
//! protocols: a classic group of consumers converts when a consumer-protocol member joins it;
//! classic clients keep working in a consumer group through JoinGroup (answered at once, no
//! leader: the broker assigns), SyncGroup (their assignment), Heartbeat (REBALANCE_IN_PROGRESS
//! while they have a step to take) and LeaveGroup; a consumer group left with classic members
//! only converts back. Also the ConsumerProtocol subscription and assignment bytes classic
//! members carry.

use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment as assignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::codes;
use crate::group::consumer::{self, ClassicJoin, ClassicMeta, ConsumerGroup, TopicPartitions};
use crate::group::state::{JoinArgs, TakenOverMember};
use crate::group::{Group, GroupEntry, GroupState};

/// The classic consumer protocol's type.
pub(crate) const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// Topics and owned partitions of a ConsumerProtocol subscription (JoinGroup metadata).
pub(crate) fn decode_subscription(metadata: &Bytes) -> Option<(Vec<String>, TopicPartitions)> {
    let mut b = metadata.clone();
    if b.remaining() < 2 {
        return None;
    }
    let version = b.get_i16().clamp(0, 3);
    let sub = ConsumerProtocolSubscription::decode(&mut b, version).ok()?;
    let mut owned = TopicPartitions::new();
    for tp in sub.owned_partitions {
        owned
            .entry(tp.topic.0.to_string())
            .or_default()
            .extend(tp.partitions);
    }
    Some((sub.topics.iter().map(|t| t.to_string()).collect(), owned))
}

/// The partitions of a ConsumerProtocol assignment (SyncGroup); empty if it does not decode.
pub(crate) fn decode_assignment(bytes: &Bytes) -> TopicPartitions {
    let mut b = bytes.clone();
    let mut out = TopicPartitions::new();
    if b.remaining() < 2 {
        return out;
    }
    let version = b.get_i16().clamp(0, 3);
    if let Ok(a) = ConsumerProtocolAssignment::decode(&mut b, version) {
        for tp in a.assigned_partitions {
            out.entry(tp.topic.0.to_string())
                .or_default()
                .extend(tp.partitions);
        }
    }
    out
}

/// A ConsumerProtocol assignment (version 0) of `tp`.
pub(crate) fn encode_assignment(tp: &TopicPartitions) -> Bytes {
    let a = ConsumerProtocolAssignment::default().with_assigned_partitions(
        tp.iter()
            .map(|(t, ps)| {
                assignment::TopicPartition::default()
                    .with_topic(TopicName(StrBytes::from_string(t.clone())))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    );
    let mut b = BytesMut::new();
    b.put_i16(0);
    // Encoding a message we built cannot fail; an empty assignment is the safe answer.
    if a.encode(&mut b, 0).is_err() {
        return Bytes::new();
    }
    b.freeze()
}

/// A classic JoinGroup as a consumer-group member; `None` if it is not the consumer protocol
/// or its subscription does not decode.
pub(crate) fn classic_join_of(args: &JoinArgs, member_id: String) -> Option<ClassicJoin> {
    if args.protocol_type != CONSUMER_PROTOCOL_TYPE {
        return None;
    }
    let (_, metadata) = args.protocols.first()?;
    let (subscribed, owned) = decode_subscription(metadata)?;
    Some(ClassicJoin {
        member_id,
        instance_id: args.instance_id.clone(),
        client_id: args.client_id.clone(),
        client_host: args.client_host.clone(),
        rebalance_timeout: Duration::from_millis(args.rebalance_timeout_ms.max(0) as u64),
        classic: ClassicMeta {
            session_timeout: Duration::from_millis(args.session_timeout_ms.max(0) as u64),
            protocols: args.protocols.clone(),
        },
        subscribed,
        owned,
    })
}

/// Converts a Stable classic group of consumers into a consumer group (a consumer-protocol
/// member is joining it): its members keep their assignments. A group of another protocol
/// type, or one rebalancing, is refused (the second retriably).
pub(crate) fn convert_classic(g: &mut GroupEntry, delay: Duration) -> Result<(), (i16, String)> {
    let id = g.group.id.clone();
    if g.group.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
        return Err((
            codes::GROUP_ID_NOT_FOUND,
            format!(
                "group '{id}' is a classic group of protocol type {:?}, not consumers",
                g.group.protocol_type
            ),
        ));
    }
    if g.group.state != GroupState::Stable {
        return Err((
            codes::COORDINATOR_LOAD_IN_PROGRESS,
            format!("classic group '{id}' is rebalancing; it converts once stable"),
        ));
    }
    let protocol = g.group.protocol.clone().unwrap_or_default();
    let mut members = Vec::with_capacity(g.group.members.len());
    for m in g.group.members.values() {
        let metadata = m.metadata(&protocol);
        let (subscribed, _) = decode_subscription(&metadata).ok_or((
            codes::INCONSISTENT_GROUP_PROTOCOL,
            format!(
                "member '{}' of group '{id}' has no consumer subscription",
                m.id
            ),
        ))?;
        // The chosen protocol first: classic members are answered with it.
        let mut protocols = m.protocols.clone();
        protocols.sort_by_key(|(n, _)| *n != protocol);
        members.push((
            ClassicJoin {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout: m.rebalance_timeout,
                classic: ClassicMeta {
                    session_timeout: m.session_timeout,
                    protocols,
                },
                subscribed,
                owned: TopicPartitions::new(),
            },
            decode_assignment(&m.assignment),
        ));
    }
    tracing::info!(group = %id, members = members.len(), generation = g.group.generation, "classic group converted to a consumer group (KIP-848)");
    g.consumer = Some(ConsumerGroup::converted(
        members,
        g.group.generation,
        Instant::now(),
    ));
    g.group = Group::new(&id, delay);
    Ok(())
}

/// Converts a consumer group left with classic members only (its last consumer-protocol
/// member left or was fenced) back to a classic group, as Kafka 4 does: they keep their
/// assignments and rejoin in a classic rebalance. Returns whether it converted.
pub(crate) fn downgrade_if_classic_only(g: &mut GroupEntry, delay: Duration) -> bool {
    let Some(c) = g.consumer.as_ref() else {
        return false;
    };
    if c.is_empty() || c.has_consumer_protocol_members() {
        return false;
    }
    let members = c
        .members
        .values()
        .map(|m| {
            let classic = m.classic.clone().unwrap_or(ClassicMeta {
                session_timeout: Duration::from_millis(
                    consumer::DEFAULT_CONSUMER_SESSION_TIMEOUT_MS,
                ),
                protocols: Vec::new(),
            });
            TakenOverMember {
                id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout: classic.session_timeout,
                rebalance_timeout: m.rebalance_timeout,
                protocols: classic.protocols,
                assignment: encode_assignment(&m.assigned),
            }
        })
        .collect::<Vec<_>>();
    tracing::info!(group = %g.group.id, members = members.len(), epoch = c.epoch, "consumer group left with classic members only: converted back to a classic group");
    g.group = Group::taken_over(&g.group.id, delay, c.epoch, members, Instant::now());
    g.consumer = None;
    true
}
