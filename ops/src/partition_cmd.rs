//! `ringlog partition`: where a partition's replicas live and which one leads.
//! - `move`: moves a partition not replicated to another node of a cluster through any
//!   node's admin HTTP listener (`POST /v1/partition-move`, `net::partition_move`).
//! - `reassign`, `reassignments`: a replicated partition's replicas move to other nodes
//!   (AlterPartitionReassignments and ListPartitionReassignments, KIP-455).
//! - `elect`: preferred or unclean leader elections (ElectLeaders, KIP-460).

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ApiKey, BrokerId, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

use crate::admin_client::{admin_answer, http_within, DEFAULT_ADMIN_ADDR};
use crate::client::{check, refusal, KafkaClient};
use crate::output;
use crate::shards_cmd::parse_partition;

/// The longest `reassign --wait` waits for a reassignment to complete, by default.
const REASSIGN_WAIT_DEFAULT_MS: u64 = 10 * 60 * 1_000;
/// How often `reassign --wait` asks whether it completed.
const REASSIGN_POLL_INTERVAL_MS: u64 = 500;
/// The timeout a reassignment or election request gives the broker.
const REQUEST_TIMEOUT_MS: i32 = 30_000;
/// The default broker address of the Kafka-API subcommands.
const DEFAULT_BROKERS: &str = "127.0.0.1:9092";

/// How long the command waits for a move (catch-up copy, handoff) to finish.
const MOVE_WAIT_MS: u64 = net::partition_move::MOVE_TIMEOUT_MS + 60_000;

#[derive(Args, Debug)]
pub struct PartitionArgs {
    #[command(subcommand)]
    command: PartitionCommand,
}

#[derive(Subcommand, Debug)]
enum PartitionCommand {
    /// Move a partition to another node (and core) of the cluster, live: the new node copies
    /// its files while it serves, then takes over; clients follow through metadata.
    Move {
        /// TOPIC/PARTITION, e.g. orders/3.
        partition: String,
        /// The node id to move it to.
        #[arg(long)]
        node: u64,
        /// The core on that node (default: its core with the fewest partitions).
        #[arg(long)]
        core: Option<u32>,
        /// Any node's admin listener (`serve --metrics-listen`).
        #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
        admin: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Move a partition's replicas to other nodes, or change its replication factor
    /// (KIP-455): the new replicas copy the leader's log, join the in-sync replicas once
    /// caught up, and the ones left out are removed (their copies deleted); a removed leader
    /// hands over. Clients keep producing and consuming throughout.
    Reassign {
        /// TOPIC/PARTITION, e.g. orders/3.
        partition: String,
        /// The target replicas' broker ids, the preferred leader first (e.g. 3,2); their
        /// count is the partition's new replication factor.
        #[arg(
            long,
            value_delimiter = ',',
            required_unless_present = "cancel",
            conflicts_with = "cancel"
        )]
        replicas: Vec<i32>,
        /// Cancel the reassignment under way (back to the original replicas).
        #[arg(long)]
        cancel: bool,
        /// Refuse a target of another size than the replication factor (KIP-860); by default
        /// the target's size is the new replication factor.
        #[arg(long)]
        disallow_replication_factor_change: bool,
        /// Wait until the reassignment completes (every target replica in sync).
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this many milliseconds.
        #[arg(long, default_value_t = REASSIGN_WAIT_DEFAULT_MS)]
        wait_ms: u64,
        /// Broker to talk to.
        #[arg(long, default_value = DEFAULT_BROKERS)]
        brokers: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The reassignments under way: each partition's replicas, those being added and those
    /// being removed.
    Reassignments {
        /// Broker to talk to.
        #[arg(long, default_value = DEFAULT_BROKERS)]
        brokers: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Elect leaders (KIP-460): each partition's preferred replica (its first) where it is
    /// live and in sync, or with --unclean any live replica of a partition without a leader
    /// (records may be lost). No partition named: every partition the election would change.
    Elect {
        /// TOPIC/PARTITION ... (none: all).
        partitions: Vec<String>,
        /// Elect any live replica where no in-sync one is live (records may be lost).
        #[arg(long)]
        unclean: bool,
        /// Broker to talk to.
        #[arg(long, default_value = DEFAULT_BROKERS)]
        brokers: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: PartitionArgs) -> Result<(), String> {
    match args.command {
        PartitionCommand::Move {
            partition,
            node,
            core,
            admin,
            json: as_json,
        } => {
            let (topic, p) = parse_partition(&partition)?;
            let mut path = format!("/v1/partition-move?topic={topic}&partition={p}&node={node}");
            if let Some(c) = core {
                path.push_str(&format!("&core={c}"));
            }
            let (status, body) = http_within(&admin, "POST", &path, MOVE_WAIT_MS)?;
            let v = admin_answer(status, &body, "partition move")?;
            if as_json {
                output::json(&v);
            } else {
                println!(
                    "moved {topic}/{p} from node {} core {} to node {} core {} ({} bytes copied, {} ms not served)",
                    v["from_node"], v["from_core"], v["to_node"], v["to_core"], v["copied_bytes"], v["handoff_ms"]
                );
            }
            Ok(())
        }
        PartitionCommand::Reassign {
            partition,
            replicas,
            cancel,
            disallow_replication_factor_change,
            wait,
            wait_ms,
            brokers,
            json: as_json,
        } => {
            let (topic, p) = parse_partition(&partition)?;
            let asked = Reassign {
                topic: &topic,
                partition: p,
                target: (!cancel).then_some(replicas),
                allow_rf_change: !disallow_replication_factor_change,
            };
            reassign(&brokers, asked, wait.then_some(wait_ms), as_json)
        }
        PartitionCommand::Reassignments {
            brokers,
            json: as_json,
        } => {
            let mut c = KafkaClient::connect(&brokers)?;
            let r = list_reassignments(&mut c, None)?;
            let rows: Vec<serde_json::Value> = r
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| {
                        let ids = |b: &[BrokerId]| b.iter().map(|b| b.0).collect::<Vec<_>>();
                        json!({
                            "topic": t.name.0.to_string(),
                            "partition": p.partition_index,
                            "replicas": ids(&p.replicas),
                            "adding": ids(&p.adding_replicas),
                            "removing": ids(&p.removing_replicas),
                        })
                    })
                })
                .collect();
            if as_json {
                output::json(&json!(rows));
            } else {
                let cell = |v: &serde_json::Value| v.to_string();
                output::table(
                    &["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
                    &rows
                        .iter()
                        .map(|r| {
                            vec![
                                r["topic"].as_str().unwrap_or_default().to_string(),
                                cell(&r["partition"]),
                                cell(&r["replicas"]),
                                cell(&r["adding"]),
                                cell(&r["removing"]),
                            ]
                        })
                        .collect::<Vec<_>>(),
                );
            }
            Ok(())
        }
        PartitionCommand::Elect {
            partitions,
            unclean,
            brokers,
            json: as_json,
        } => elect(&brokers, &partitions, unclean, as_json),
    }
}

/// One reassignment asked for: its partition, its target's broker ids (`None`: cancel the
/// one under way), and whether the target may change the replication factor.
struct Reassign<'a> {
    topic: &'a str,
    partition: u32,
    target: Option<Vec<i32>>,
    allow_rf_change: bool,
}

/// Starts (or cancels) a reassignment, and with `wait_ms` waits for it to complete.
fn reassign(
    brokers: &str,
    asked: Reassign<'_>,
    wait_ms: Option<u64>,
    as_json: bool,
) -> Result<(), String> {
    let Reassign {
        topic,
        partition,
        target,
        allow_rf_change,
    } = asked;
    let mut c = KafkaClient::connect(brokers)?;
    let v = c.api_versions()?;
    let ver = v.pick(ApiKey::AlterPartitionReassignments, 0, 1)?;
    if !allow_rf_change && ver < 1 {
        return Err("the broker's AlterPartitionReassignments has no --disallow-replication-factor-change (v1, KIP-860)".into());
    }
    let req = AlterPartitionReassignmentsRequest::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_timeout_ms(REQUEST_TIMEOUT_MS)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![ReassignablePartition::default()
                .with_partition_index(partition as i32)
                .with_replicas(
                    target
                        .clone()
                        .map(|ids| ids.into_iter().map(BrokerId).collect()),
                )])]);
    let r = c.call(&req, ver)?;
    check(r.error_code, r.error_message.as_ref(), || {
        format!("reassigning {topic}/{partition}")
    })?;
    let answer = r
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .next()
        .ok_or_else(|| format!("reassigning {topic}/{partition}: the broker answered nothing"))?;
    check(answer.error_code, answer.error_message.as_ref(), || {
        format!("reassigning {topic}/{partition}")
    })?;
    let what = match &target {
        Some(ids) => format!("reassignment of {topic}/{partition} to {ids:?} started"),
        None => format!("reassignment of {topic}/{partition} cancelled"),
    };
    let Some(wait_ms) = wait_ms.filter(|_| target.is_some()) else {
        if as_json {
            output::json(
                &json!({"topic": topic, "partition": partition, "target": target, "completed": false}),
            );
        } else {
            println!("{what}");
        }
        return Ok(());
    };
    eprintln!("{what}; waiting for the new replicas to catch up");
    let started = Instant::now();
    let deadline = started + Duration::from_millis(wait_ms);
    let mut last_report = Instant::now();
    loop {
        let listed = list_reassignments(&mut c, Some((topic, partition)))?;
        let ongoing = listed.topics.iter().flat_map(|t| &t.partitions).next();
        let Some(ongoing) = ongoing else { break };
        if Instant::now() >= deadline {
            return Err(format!(
                "{topic}/{partition}: the reassignment did not complete within {wait_ms} ms (still adding {:?}); it goes on: watch it with `ringlog partition reassignments`, or cancel it with `ringlog partition reassign {topic}/{partition} --cancel`",
                ongoing.adding_replicas.iter().map(|b| b.0).collect::<Vec<_>>()
            ));
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = Instant::now();
            eprintln!(
                "still adding {:?} ({} s)",
                ongoing
                    .adding_replicas
                    .iter()
                    .map(|b| b.0)
                    .collect::<Vec<_>>(),
                started.elapsed().as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(REASSIGN_POLL_INTERVAL_MS));
    }
    let elapsed_ms = started.elapsed().as_millis() as u64;
    if as_json {
        output::json(
            &json!({"topic": topic, "partition": partition, "target": target, "completed": true, "elapsed_ms": elapsed_ms}),
        );
    } else {
        println!(
            "reassigned {topic}/{partition} to {:?} in {elapsed_ms} ms",
            target.unwrap_or_default()
        );
    }
    Ok(())
}

/// ListPartitionReassignments: of one partition, or of all (`None`).
fn list_reassignments(
    c: &mut KafkaClient,
    only: Option<(&str, u32)>,
) -> Result<ListPartitionReassignmentsResponse, String> {
    let v = c.api_versions()?;
    let ver = v.pick(ApiKey::ListPartitionReassignments, 0, 0)?;
    let req = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(REQUEST_TIMEOUT_MS)
        .with_topics(only.map(|(t, p)| {
            vec![ListPartitionReassignmentsTopics::default()
                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                .with_partition_indexes(vec![p as i32])]
        }));
    let r = c.call(&req, ver)?;
    check(r.error_code, r.error_message.as_ref(), || {
        "listing reassignments".into()
    })?;
    Ok(r)
}

/// ElectLeaders of `partitions` (none: all), preferred or unclean; fails when one was
/// refused for a reason other than ELECTION_NOT_NEEDED.
fn elect(brokers: &str, partitions: &[String], unclean: bool, as_json: bool) -> Result<(), String> {
    let mut named: std::collections::BTreeMap<String, Vec<i32>> = Default::default();
    for s in partitions {
        let (t, p) = parse_partition(s)?;
        named.entry(t).or_default().push(p as i32);
    }
    let mut c = KafkaClient::connect(brokers)?;
    let v = c.api_versions()?;
    let ver = v.pick(ApiKey::ElectLeaders, 1, 2)?;
    let req = ElectLeadersRequest::default()
        .with_election_type(i8::from(unclean))
        .with_timeout_ms(REQUEST_TIMEOUT_MS)
        .with_topic_partitions((!named.is_empty()).then(|| {
            named
                .into_iter()
                .map(|(t, ps)| {
                    TopicPartitions::default()
                        .with_topic(TopicName(StrBytes::from_string(t)))
                        .with_partitions(ps)
                })
                .collect()
        }));
    let r = c.call(&req, ver)?;
    check(r.error_code, None, || "electing leaders".into())?;
    let not_needed = kafka_protocol::ResponseError::ElectionNotNeeded.code();
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for t in &r.replica_election_results {
        for p in &t.partition_result {
            let name = format!("{}/{}", t.topic.0, p.partition_id);
            let outcome = match p.error_code {
                0 => "elected".to_string(),
                code => refusal(code, p.error_message.as_ref()),
            };
            if p.error_code != 0 && p.error_code != not_needed {
                failed.push(format!("{name}: {outcome}"));
            }
            rows.push(json!({"partition": name, "error_code": p.error_code, "outcome": outcome}));
        }
    }
    if as_json {
        output::json(&json!(rows));
    } else if rows.is_empty() {
        println!("no partition needed an election");
    } else {
        output::table(
            &["PARTITION", "OUTCOME"],
            &rows
                .iter()
                .map(|r| {
                    vec![
                        r["partition"].as_str().unwrap_or_default().to_string(),
                        r["outcome"].as_str().unwrap_or_default().to_string(),
                    ]
                })
                .collect::<Vec<_>>(),
        );
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} election(s) refused: {}",
            failed.len(),
            failed.join("; ")
        ))
    }
}
