//! `ringlog topic create | list | describe | alter-config | add-partitions | delete`.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

use crate::client::{check, first, BrokerVersions, KafkaClient};
use crate::output;
use crate::partition_offsets::{topic_offsets, EARLIEST, LATEST};

/// DescribeConfigs / IncrementalAlterConfigs resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;
const TIMEOUT_MS: i32 = 30_000;

#[derive(Args, Debug)]
pub struct TopicArgs {
    /// Broker to talk to.
    #[arg(long, default_value = "127.0.0.1:9092", global = true)]
    brokers: String,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(Subcommand, Debug)]
enum TopicCommand {
    /// Create a topic.
    Create {
        /// The topic.
        name: String,
        /// Number of partitions (default: the broker's num-partitions).
        #[arg(long)]
        partitions: Option<i32>,
        /// Replicas of each partition, each on its own node (default: the broker's
        /// default-replication-factor).
        #[arg(long)]
        replication_factor: Option<i16>,
        /// A topic config, KEY=VALUE (repeatable).
        #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_kv)]
        configs: Vec<(String, String)>,
    },
    /// List topics: name, partitions, internal flag.
    List,
    /// Partitions (leader, leader epoch, replicas, in-sync and offline replicas, earliest and
    /// latest offsets) and configs of a topic.
    Describe {
        /// The topic.
        name: String,
    },
    /// Set or delete topic configs.
    #[command(group = clap::ArgGroup::new("change").required(true).multiple(true))]
    AlterConfig {
        /// The topic.
        name: String,
        /// Set KEY=VALUE (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_kv, group = "change")]
        set: Vec<(String, String)>,
        /// Delete KEY, back to its default (repeatable).
        #[arg(long = "delete", value_name = "KEY", group = "change")]
        delete: Vec<String>,
    },
    /// Grow a topic to COUNT partitions.
    AddPartitions {
        /// The topic.
        name: String,
        /// The new total number of partitions.
        #[arg(long)]
        count: i32,
    },
    /// Delete a topic and its data.
    Delete {
        /// The topic.
        name: String,
    },
}

pub fn parse_kv(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub fn run(args: TopicArgs) -> Result<(), String> {
    let mut c = KafkaClient::connect(&args.brokers)?;
    let v = c.api_versions()?;
    let j = args.json;
    match args.command {
        TopicCommand::Create {
            name,
            partitions,
            replication_factor,
            configs,
        } => create(
            &mut c,
            &v,
            &name,
            (partitions, replication_factor),
            &configs,
            j,
        ),
        TopicCommand::List => list(&mut c, &v, j),
        TopicCommand::Describe { name } => describe(&mut c, &v, &name, j),
        TopicCommand::AlterConfig { name, set, delete } => {
            alter_config(&mut c, &v, &name, &set, &delete, j)
        }
        TopicCommand::AddPartitions { name, count } => add_partitions(&mut c, &v, &name, count, j),
        TopicCommand::Delete { name } => delete_topic(&mut c, &v, &name, j),
    }
}

fn done(as_json: bool, value: serde_json::Value, text: String) {
    if as_json {
        output::json(&value);
    } else {
        println!("{text}");
    }
}

fn create(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    name: &str,
    (partitions, replication_factor): (Option<i32>, Option<i16>),
    configs: &[(String, String)],
    as_json: bool,
) -> Result<(), String> {
    let ver = v.pick(ApiKey::CreateTopics, 0, 7)?;
    let topic = CreatableTopic::default()
        .with_name(TopicName(s(name)))
        .with_num_partitions(partitions.unwrap_or(-1))
        .with_replication_factor(replication_factor.unwrap_or(-1))
        .with_configs(
            configs
                .iter()
                .map(|(k, val)| {
                    CreatableTopicConfig::default()
                        .with_name(s(k.as_str()))
                        .with_value(Some(s(val.as_str())))
                })
                .collect(),
        );
    let r = c.call(
        &CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(TIMEOUT_MS),
        ver,
    )?;
    let t = first(r.topics, "CreateTopics")?;
    check(t.error_code, t.error_message.as_ref(), || {
        format!("cannot create topic {name}")
    })?;
    // The count the broker chose (v5+ reports it; else ask Metadata).
    let count = if t.num_partitions > 0 {
        t.num_partitions
    } else {
        metadata(c, v, Some(name))?
            .topics
            .first()
            .map(|t| t.partitions.len() as i32)
            .unwrap_or(-1)
    };
    done(
        as_json,
        json!({"topic": name, "created": true, "partitions": count}),
        format!("created topic {name} with {count} partitions"),
    );
    Ok(())
}

/// Metadata for one topic (`Some`) or all topics (`None`).
pub fn metadata(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    topic: Option<&str>,
) -> Result<MetadataResponse, String> {
    let ver = v.pick(ApiKey::Metadata, 1, 12)?;
    let req = MetadataRequest::default()
        .with_topics(
            topic.map(|t| vec![MetadataRequestTopic::default().with_name(Some(TopicName(s(t))))]),
        )
        .with_allow_auto_topic_creation(false);
    c.call(&req, ver)
}

/// Metadata of one topic, or an error naming the refusal.
pub fn topic_metadata(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    topic: &str,
) -> Result<MetadataResponseTopic, String> {
    let t = metadata(c, v, Some(topic))?
        .topics
        .into_iter()
        .next()
        .ok_or("Metadata returned no topic")?;
    check(t.error_code, None, || format!("topic {topic}"))?;
    Ok(t)
}

fn topic_name(t: &MetadataResponseTopic) -> String {
    t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default()
}

fn list(c: &mut KafkaClient, v: &BrokerVersions, as_json: bool) -> Result<(), String> {
    let mut topics = metadata(c, v, None)?.topics;
    topics.sort_by_key(topic_name);
    if as_json {
        output::json(&json!(topics
            .iter()
            .map(|t| json!({
                "topic": topic_name(t),
                "partitions": t.partitions.len(),
                "internal": t.is_internal,
            }))
            .collect::<Vec<_>>()));
    } else {
        let rows: Vec<Vec<String>> = topics
            .iter()
            .map(|t| {
                vec![
                    topic_name(t),
                    t.partitions.len().to_string(),
                    t.is_internal.to_string(),
                ]
            })
            .collect();
        output::table(&["TOPIC", "PARTITIONS", "INTERNAL"], &rows);
    }
    Ok(())
}

fn config_source(src: i8) -> &'static str {
    match src {
        1 => "topic",
        2 => "dynamic-broker",
        3 => "dynamic-default-broker",
        4 => "static-broker",
        5 => "default",
        6 => "dynamic-broker-logger",
        _ => "unknown",
    }
}

fn describe(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    name: &str,
    as_json: bool,
) -> Result<(), String> {
    let t = topic_metadata(c, v, name)?;
    let mut parts: Vec<&kafka_protocol::messages::metadata_response::MetadataResponsePartition> =
        t.partitions.iter().collect();
    parts.sort_by_key(|p| p.partition_index);
    let ids: Vec<i32> = parts.iter().map(|p| p.partition_index).collect();
    let brokers = |b: &[kafka_protocol::messages::BrokerId]| -> Vec<i32> {
        b.iter().map(|id| id.0).collect()
    };
    // Broker ids joined by commas; `-` for none.
    let list = |b: &[kafka_protocol::messages::BrokerId]| -> String {
        if b.is_empty() {
            return "-".into();
        }
        brokers(b)
            .iter()
            .map(i32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let earliest = topic_offsets(c, v, name, &ids, EARLIEST)?;
    let latest = topic_offsets(c, v, name, &ids, LATEST)?;

    let ver = v.pick(ApiKey::DescribeConfigs, 1, 4)?;
    let r = c.call(
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(s(name))
            .with_configuration_keys(None)]),
        ver,
    )?;
    let res = first(r.results, "DescribeConfigs")?;
    check(res.error_code, res.error_message.as_ref(), || {
        format!("DescribeConfigs {name}")
    })?;
    let mut configs: Vec<(String, String, &'static str)> = res
        .configs
        .iter()
        .map(|cfg| {
            (
                cfg.name.to_string(),
                cfg.value
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
                config_source(cfg.config_source),
            )
        })
        .collect();
    configs.sort();

    let off = |m: &BTreeMap<i32, i64>, p: i32| m.get(&p).copied().unwrap_or(-1);
    if as_json {
        output::json(&json!({
            "topic": name,
            "topic_id": t.topic_id.to_string(),
            "internal": t.is_internal,
            "partitions": parts.iter().map(|p| json!({
                "partition": p.partition_index,
                "leader": p.leader_id.0,
                "leader_epoch": p.leader_epoch,
                "replicas": brokers(&p.replica_nodes),
                "isr": brokers(&p.isr_nodes),
                "offline_replicas": brokers(&p.offline_replicas),
                "earliest_offset": off(&earliest, p.partition_index),
                "latest_offset": off(&latest, p.partition_index),
            })).collect::<Vec<_>>(),
            "configs": configs.iter().map(|(k, val, src)| json!({
                "name": k, "value": val, "source": src,
            })).collect::<Vec<_>>(),
        }));
    } else {
        println!(
            "topic {name}  id {}  partitions {}{}",
            t.topic_id,
            parts.len(),
            if t.is_internal { "  internal" } else { "" }
        );
        println!();
        let rows: Vec<Vec<String>> = parts
            .iter()
            .map(|p| {
                vec![
                    p.partition_index.to_string(),
                    p.leader_id.0.to_string(),
                    p.leader_epoch.to_string(),
                    list(&p.replica_nodes),
                    list(&p.isr_nodes),
                    list(&p.offline_replicas),
                    off(&earliest, p.partition_index).to_string(),
                    off(&latest, p.partition_index).to_string(),
                ]
            })
            .collect();
        output::table(
            &[
                "PARTITION",
                "LEADER",
                "EPOCH",
                "REPLICAS",
                "ISR",
                "OFFLINE",
                "EARLIEST",
                "LATEST",
            ],
            &rows,
        );
        println!();
        let rows: Vec<Vec<String>> = configs
            .iter()
            .map(|(k, val, src)| vec![k.clone(), val.clone(), src.to_string()])
            .collect();
        output::table(&["CONFIG", "VALUE", "SOURCE"], &rows);
    }
    Ok(())
}

pub(crate) fn alter_config(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    name: &str,
    set: &[(String, String)],
    delete: &[String],
    as_json: bool,
) -> Result<(), String> {
    let ver = v.pick(ApiKey::IncrementalAlterConfigs, 0, 1)?;
    // Operations: 0 SET, 1 DELETE.
    let mut ops: Vec<AlterableConfig> = set
        .iter()
        .map(|(k, val)| {
            AlterableConfig::default()
                .with_name(s(k.as_str()))
                .with_config_operation(0)
                .with_value(Some(s(val.as_str())))
        })
        .collect();
    ops.extend(delete.iter().map(|k| {
        AlterableConfig::default()
            .with_name(s(k.as_str()))
            .with_config_operation(1)
            .with_value(None)
    }));
    let r = c.call(
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(s(name))
                .with_configs(ops),
        ]),
        ver,
    )?;
    let res = first(r.responses, "IncrementalAlterConfigs")?;
    check(res.error_code, res.error_message.as_ref(), || {
        format!("cannot alter configs of topic {name}")
    })?;
    let set_map: serde_json::Map<String, serde_json::Value> =
        set.iter().map(|(k, val)| (k.clone(), json!(val))).collect();
    let mut text = format!("altered configs of topic {name}:");
    for (k, val) in set {
        text.push_str(&format!(" set {k}={val};"));
    }
    for k in delete {
        text.push_str(&format!(" deleted {k};"));
    }
    done(
        as_json,
        json!({"topic": name, "set": set_map, "deleted": delete}),
        text.trim_end_matches(';').to_string(),
    );
    Ok(())
}

fn add_partitions(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    name: &str,
    count: i32,
    as_json: bool,
) -> Result<(), String> {
    let ver = v.pick(ApiKey::CreatePartitions, 0, 3)?;
    let r = c.call(
        &CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(s(name)))
                .with_count(count)
                .with_assignments(None)])
            .with_timeout_ms(TIMEOUT_MS),
        ver,
    )?;
    let res = first(r.results, "CreatePartitions")?;
    check(res.error_code, res.error_message.as_ref(), || {
        format!("cannot add partitions to topic {name}")
    })?;
    done(
        as_json,
        json!({"topic": name, "partitions": count}),
        format!("topic {name} now has {count} partitions"),
    );
    Ok(())
}

fn delete_topic(
    c: &mut KafkaClient,
    v: &BrokerVersions,
    name: &str,
    as_json: bool,
) -> Result<(), String> {
    let ver = v.pick(ApiKey::DeleteTopics, 0, 5)?;
    let r = c.call(
        &DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(s(name))])
            .with_timeout_ms(TIMEOUT_MS),
        ver,
    )?;
    let res = first(r.responses, "DeleteTopics")?;
    check(res.error_code, res.error_message.as_ref(), || {
        format!("cannot delete topic {name}")
    })?;
    done(
        as_json,
        json!({"topic": name, "deleted": true}),
        format!("deleted topic {name}"),
    );
    Ok(())
}
