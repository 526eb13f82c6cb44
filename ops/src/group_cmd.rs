//! `ringlog group list | describe GROUP | reset-offsets GROUP --topic T --to-…`.

use std::collections::BTreeMap;

use bytes::Buf;
use clap::{Args, Subcommand};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerProtocolAssignment, DescribeGroupsRequest, GroupId,
    ListGroupsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use serde_json::json;

use crate::client::{check, first, kafka_error, KafkaClient};
use crate::output;
use crate::partition_offsets::{list_offsets, EARLIEST, LATEST};

/// DescribeGroups' answer for a consumer-protocol (KIP-848) group.
const GROUP_ID_NOT_FOUND: i16 = kafka_protocol::ResponseError::GroupIdNotFound.code();

#[derive(Args, Debug)]
pub struct GroupArgs {
    /// Broker to talk to.
    #[arg(long, default_value = "127.0.0.1:9092", global = true)]
    brokers: String,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(Subcommand, Debug)]
enum GroupCommand {
    /// List consumer groups with their state.
    List,
    /// Members, assignments, committed offsets and lag of a group.
    Describe {
        /// The consumer group.
        group: String,
    },
    /// Set a group's committed offsets for a topic (the group must have no live members).
    #[command(group = clap::ArgGroup::new("to").required(true))]
    ResetOffsets {
        /// The consumer group.
        group: String,
        /// The topic whose offsets are set (every partition of it).
        #[arg(long)]
        topic: String,
        /// Each partition's earliest offset.
        #[arg(long, group = "to")]
        to_earliest: bool,
        /// Each partition's latest offset (the end of the log).
        #[arg(long, group = "to")]
        to_latest: bool,
        /// This offset on every partition.
        #[arg(long, group = "to", value_name = "N")]
        to_offset: Option<i64>,
    },
}

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub fn run(args: GroupArgs) -> Result<(), String> {
    let mut c = KafkaClient::connect(&args.brokers)?;
    match args.command {
        GroupCommand::List => list(&mut c, args.json),
        GroupCommand::Describe { group } => describe(&mut c, &group, args.json),
        GroupCommand::ResetOffsets {
            group,
            topic,
            to_earliest,
            to_latest,
            to_offset,
        } => {
            let target = match (to_earliest, to_latest, to_offset) {
                (true, _, _) => Target::Earliest,
                (_, true, _) => Target::Latest,
                (_, _, Some(n)) => Target::Offset(n),
                _ => return Err("give one of --to-earliest, --to-latest, --to-offset N".into()),
            };
            reset(&mut c, &group, &topic, target, args.json)
        }
    }
}

fn list(c: &mut KafkaClient, as_json: bool) -> Result<(), String> {
    let r = c.call(&ListGroupsRequest::default(), 4)?;
    check(r.error_code, None, || "ListGroups failed".into())?;
    let rows: Vec<Vec<String>> = r
        .groups
        .iter()
        .map(|g| {
            vec![
                g.group_id.0.to_string(),
                g.group_state.to_string(),
                g.protocol_type.to_string(),
            ]
        })
        .collect();
    if as_json {
        output::json(&json!(rows
            .iter()
            .map(|r| json!({"group": r[0], "state": r[1], "protocol_type": r[2]}))
            .collect::<Vec<_>>()));
    } else {
        output::table(&["GROUP", "STATE", "PROTOCOL-TYPE"], &rows);
    }
    Ok(())
}

/// A group as `describe` shows it, from DescribeGroups (classic) or ConsumerGroupDescribe
/// (KIP-848).
struct Described {
    state: String,
    protocol_type: String,
    protocol: String,
    /// (member id, instance id, client id, host)
    members: Vec<(String, Option<String>, String, String)>,
    /// Which member owns which partition: (member id, client id, host).
    owner: BTreeMap<(String, i32), (String, String, String)>,
}

/// The classic view; `None` when the group is a consumer-protocol group.
fn describe_classic(c: &mut KafkaClient, group: &str) -> Result<Option<Described>, String> {
    let d = c.call(
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]),
        5,
    )?;
    let g = first(d.groups, "DescribeGroups")?;
    if g.error_code == GROUP_ID_NOT_FOUND {
        return Ok(None);
    }
    check(g.error_code, None, || format!("DescribeGroups {group}"))?;
    // Which member owns which partition, from the consumer protocol assignments.
    let mut owner = BTreeMap::new();
    for m in &g.members {
        let mut b = m.member_assignment.clone();
        if b.remaining() < 2 {
            continue;
        }
        let version = b.get_i16();
        if let Ok(a) = ConsumerProtocolAssignment::decode(&mut b, version) {
            for tp in a.assigned_partitions {
                for p in tp.partitions {
                    owner.insert(
                        (tp.topic.0.to_string(), p),
                        (
                            m.member_id.to_string(),
                            m.client_id.to_string(),
                            m.client_host.to_string(),
                        ),
                    );
                }
            }
        }
    }
    Ok(Some(Described {
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        protocol: g.protocol_data.to_string(),
        members: g
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                    m.client_id.to_string(),
                    m.client_host.to_string(),
                )
            })
            .collect(),
        owner,
    }))
}

/// The KIP-848 view (ConsumerGroupDescribe).
fn describe_consumer(c: &mut KafkaClient, group: &str) -> Result<Described, String> {
    let d = c.call(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]),
        0,
    )?;
    let g = first(d.groups, "ConsumerGroupDescribe")?;
    check(g.error_code, None, || {
        format!("ConsumerGroupDescribe {group}")
    })?;
    let mut owner = BTreeMap::new();
    for m in &g.members {
        for tp in &m.assignment.topic_partitions {
            for p in &tp.partitions {
                owner.insert(
                    (tp.topic_name.0.to_string(), *p),
                    (
                        m.member_id.to_string(),
                        m.client_id.to_string(),
                        m.client_host.to_string(),
                    ),
                );
            }
        }
    }
    Ok(Described {
        state: g.group_state.to_string(),
        protocol_type: "consumer".into(),
        protocol: format!("{} (KIP-848, epoch {})", g.assignor_name, g.group_epoch),
        members: g
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.instance_id.as_ref().map(|s| s.to_string()),
                    m.client_id.to_string(),
                    m.client_host.to_string(),
                )
            })
            .collect(),
        owner,
    })
}

fn describe(c: &mut KafkaClient, group: &str, as_json: bool) -> Result<(), String> {
    let g = match describe_classic(c, group)? {
        Some(g) => g,
        None => describe_consumer(c, group)?,
    };
    let owner = &g.owner;
    let f = c.call(
        &OffsetFetchRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(None),
        7,
    )?;
    check(f.error_code, None, || format!("OffsetFetch {group}"))?;
    let mut committed: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for t in f.topics {
        for p in t.partitions {
            committed.insert(
                (t.name.0.to_string(), p.partition_index),
                p.committed_offset,
            );
        }
    }
    let mut keys: Vec<(String, i32)> = committed.keys().chain(owner.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let ends = if keys.is_empty() {
        BTreeMap::new()
    } else {
        let v = c.api_versions()?;
        list_offsets(c, &v, &keys, LATEST)?
    };
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            let cur = committed.get(k).copied().unwrap_or(-1);
            let end = ends.get(k).copied().unwrap_or(-1);
            let lag = if cur >= 0 && end >= 0 {
                (end - cur).to_string()
            } else {
                "-".into()
            };
            let (m, cl, h) = owner
                .get(k)
                .cloned()
                .unwrap_or(("-".into(), "-".into(), "-".into()));
            vec![
                k.0.clone(),
                k.1.to_string(),
                if cur >= 0 {
                    cur.to_string()
                } else {
                    "-".into()
                },
                end.to_string(),
                lag,
                m,
                cl,
                h,
            ]
        })
        .collect();
    if as_json {
        output::json(&json!({
            "group": group,
            "state": g.state,
            "protocol_type": g.protocol_type,
            "protocol": g.protocol,
            "members": g.members.iter().map(|(id, instance, client, host)| json!({
                "member_id": id,
                "instance_id": instance,
                "client_id": client,
                "host": host,
            })).collect::<Vec<_>>(),
            "partitions": rows.iter().map(|r| json!({
                "topic": r[0], "partition": r[1].parse::<i32>().unwrap_or(-1),
                "committed_offset": r[2].parse::<i64>().ok(), "log_end_offset": r[3].parse::<i64>().ok(),
                "lag": r[4].parse::<i64>().ok(), "member_id": r[5], "client_id": r[6], "host": r[7],
            })).collect::<Vec<_>>(),
        }));
    } else {
        println!(
            "Group {group}: state {}, protocol {} {}, {} member(s)",
            g.state,
            g.protocol_type,
            g.protocol,
            g.members.len()
        );
        output::table(
            &[
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "MEMBER-ID",
                "CLIENT-ID",
                "HOST",
            ],
            &rows,
        );
    }
    Ok(())
}

enum Target {
    Earliest,
    Latest,
    Offset(i64),
}

fn reset(
    c: &mut KafkaClient,
    group: &str,
    topic: &str,
    target: Target,
    as_json: bool,
) -> Result<(), String> {
    let d = c.call(
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]),
        5,
    )?;
    if let Some(g) = d.groups.first() {
        if !g.members.is_empty() {
            return Err(format!(
                "group {group} has {} live member(s) (state {}); stop its consumers first, then reset",
                g.members.len(),
                g.group_state
            ));
        }
    }
    let v = c.api_versions()?;
    let m = c.call(
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(s(topic))))
        ])),
        4,
    )?;
    let t = m.topics.first().ok_or("Metadata returned no topic")?;
    check(t.error_code, None, || format!("topic {topic}"))?;
    let parts: Vec<(String, i32)> = t
        .partitions
        .iter()
        .map(|p| (topic.to_string(), p.partition_index))
        .collect();
    let offsets: BTreeMap<(String, i32), i64> = match target {
        Target::Earliest => list_offsets(c, &v, &parts, EARLIEST)?,
        Target::Latest => list_offsets(c, &v, &parts, LATEST)?,
        Target::Offset(n) => {
            let (earliest, latest) = (
                list_offsets(c, &v, &parts, EARLIEST)?,
                list_offsets(c, &v, &parts, LATEST)?,
            );
            parts
                .iter()
                .map(|k| (k.clone(), n.clamp(earliest[k], latest[k])))
                .collect()
        }
    };
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(
                offsets
                    .iter()
                    .map(|((_, p), o)| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(*p)
                            .with_committed_offset(*o)
                            .with_committed_metadata(Some(s("")))
                    })
                    .collect(),
            )]);
    let r = c.call(&req, 2)?;
    for t in &r.topics {
        for p in &t.partitions {
            if p.error_code != 0 {
                return Err(format!(
                    "committing {}/{}: {}",
                    t.name.0,
                    p.partition_index,
                    kafka_error(p.error_code)
                ));
            }
        }
    }
    let rows: Vec<Vec<String>> = offsets
        .iter()
        .map(|((t, p), o)| vec![t.clone(), p.to_string(), o.to_string()])
        .collect();
    if as_json {
        output::json(&json!(offsets
            .iter()
            .map(|((t, p), o)| json!({"topic": t, "partition": p, "new_offset": o}))
            .collect::<Vec<_>>()));
    } else {
        output::table(&["TOPIC", "PARTITION", "NEW-OFFSET"], &rows);
    }
    Ok(())
}
