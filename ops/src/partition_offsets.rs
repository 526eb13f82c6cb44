//! Partition offsets as the commands show them (earliest, latest, at a timestamp): each asked
//! of the partition's leader, found through Metadata, as Kafka's admin client does. A
//! partition between leaders (just created, or its leader just failed over) answers a
//! retriable code; the question is asked again, with fresh metadata, until
//! `LEADER_WAIT_MS` has passed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::{kafka_error, BrokerVersions, KafkaClient};

/// How long a command waits for partitions without a serving leader to get one.
pub const LEADER_WAIT_MS: u64 = 15_000;
/// Pause between two rounds of asking the partitions still between leaders.
const LEADER_RETRY_PAUSE_MS: u64 = 200;

/// Earliest offset (ListOffsets timestamp -2).
pub const EARLIEST: i64 = -2;
/// Latest offset, the high watermark (ListOffsets timestamp -1).
pub const LATEST: i64 = -1;

/// A topic partition.
pub type TopicPartition = (String, i32);

/// Error codes that mean "ask again, maybe elsewhere": the partition has no serving leader yet.
fn retriable(code: i16) -> bool {
    [
        ResponseError::NotLeaderOrFollower,
        ResponseError::LeaderNotAvailable,
        ResponseError::ReplicaNotAvailable,
        ResponseError::UnknownLeaderEpoch,
        ResponseError::OffsetNotAvailable,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// Each partition's offset at `timestamp` (`EARLIEST`, `LATEST` or a time in ms), asked of its
/// leader; `c` is the bootstrap connection, `v` its API versions.
pub fn list_offsets(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    parts: &[TopicPartition],
    timestamp: i64,
) -> Result<BTreeMap<TopicPartition, i64>, String> {
    let ver = v.pick(ApiKey::ListOffsets, 1, 6)?;
    let deadline = Instant::now() + Duration::from_millis(LEADER_WAIT_MS);
    let mut pending: BTreeSet<TopicPartition> = parts.iter().cloned().collect();
    let mut out = BTreeMap::new();
    // Leader address → connection, for this call.
    let mut leaders: BTreeMap<String, KafkaClient> = BTreeMap::new();
    loop {
        let mut last_refusal = String::new();
        let meta = metadata(c, v, &pending)?;
        for (addr, asked) in by_leader(&meta, &pending, &mut last_refusal)? {
            // A leader that cannot be reached (it just failed; Metadata has not caught up)
            // is asked again, with fresh metadata, in the next round.
            let answer = match leaders.entry(addr.clone()) {
                std::collections::btree_map::Entry::Occupied(e) => Ok(e.into_mut()),
                std::collections::btree_map::Entry::Vacant(e) => {
                    KafkaClient::connect(&addr).map(|c| e.insert(c))
                }
            }
            .and_then(|conn| conn.call(&request(&asked, timestamp), ver));
            let answer = match answer {
                Ok(a) => a,
                Err(e) => {
                    leaders.remove(&addr);
                    last_refusal = e;
                    continue;
                }
            };
            for t in answer.topics {
                for p in t.partitions {
                    let key = (t.name.0.to_string(), p.partition_index);
                    if p.error_code == 0 {
                        pending.remove(&key);
                        out.insert(key, p.offset);
                        continue;
                    }
                    let refusal = format!(
                        "ListOffsets {}/{} on broker {addr}: {}",
                        key.0,
                        key.1,
                        kafka_error(p.error_code)
                    );
                    if !retriable(p.error_code) {
                        return Err(refusal);
                    }
                    last_refusal = refusal;
                }
            }
        }
        if pending.is_empty() {
            return Ok(out);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{} partition(s) found no serving leader within {} s (last: {last_refusal}); \
                 check `ringlog topic describe` and the brokers' logs",
                pending.len(),
                LEADER_WAIT_MS / 1000
            ));
        }
        std::thread::sleep(Duration::from_millis(LEADER_RETRY_PAUSE_MS));
    }
}

/// `list_offsets` for partitions of one topic: partition → offset.
pub fn topic_offsets(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    topic: &str,
    partitions: &[i32],
    timestamp: i64,
) -> Result<BTreeMap<i32, i64>, String> {
    let parts: Vec<TopicPartition> = partitions.iter().map(|p| (topic.to_string(), *p)).collect();
    Ok(list_offsets(c, v, &parts, timestamp)?
        .into_iter()
        .map(|((_, p), offset)| (p, offset))
        .collect())
}

/// Metadata for the topics of `parts`.
fn metadata(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    parts: &BTreeSet<TopicPartition>,
) -> Result<MetadataResponse, String> {
    let topics: BTreeSet<&str> = parts.iter().map(|(t, _)| t.as_str()).collect();
    let req = MetadataRequest::default()
        .with_topics(Some(
            topics
                .into_iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t.to_string()))))
                })
                .collect(),
        ))
        .with_allow_auto_topic_creation(false);
    c.call(&req, v.pick(ApiKey::Metadata, 1, 12)?)
}

/// The partitions of `pending` grouped by their leader's address; a partition without a
/// leader is left for the next round (noted in `last_refusal`), a topic refused is an error.
fn by_leader(
    meta: &MetadataResponse,
    pending: &BTreeSet<TopicPartition>,
    last_refusal: &mut String,
) -> Result<BTreeMap<String, Vec<TopicPartition>>, String> {
    let addr: BTreeMap<i32, String> = meta
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
        .collect();
    let mut out: BTreeMap<String, Vec<TopicPartition>> = BTreeMap::new();
    let mut seen = 0;
    for t in &meta.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        if t.error_code != 0 && !retriable(t.error_code) {
            return Err(format!("topic {name}: {}", kafka_error(t.error_code)));
        }
        for p in &t.partitions {
            let key = (name.clone(), p.partition_index);
            if !pending.contains(&key) {
                continue;
            }
            seen += 1;
            match addr.get(&p.leader_id.0) {
                Some(a) => out.entry(a.clone()).or_default().push(key),
                None => {
                    *last_refusal = format!(
                        "{}/{}: no leader in Metadata ({})",
                        key.0,
                        key.1,
                        kafka_error(p.error_code)
                    )
                }
            }
        }
    }
    if seen < pending.len() {
        let missing = pending
            .iter()
            .find(|(t, p)| {
                !meta.topics.iter().any(|mt| {
                    mt.name.as_ref().is_some_and(|n| n.0.as_str() == t.as_str())
                        && mt.partitions.iter().any(|mp| mp.partition_index == *p)
                })
            })
            .expect("a pending partition Metadata did not list");
        return Err(format!(
            "topic {} has no partition {}",
            missing.0, missing.1
        ));
    }
    Ok(out)
}

fn request(parts: &[TopicPartition], timestamp: i64) -> ListOffsetsRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in parts {
        by_topic.entry(t).or_default().push(*p);
    }
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partitions(
                            ps.into_iter()
                                .map(|p| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(p)
                                        .with_timestamp(timestamp)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}
