//! `ringlog barrier define|delete|describe|trigger|list|verify` (seed 003): barrier groups
//! and their cuts over the barrier APIs (keys 1010–1014, `kfc4::wire`), and `verify`,
//! which fetches the raw batches at every cut offset and checks that each is its epoch's
//! marker.
//!
//! Exit codes: 0 ok; 1 refused (the broker's error is printed); 2 usage (clap's); 3 `verify`
//! found a cut offset without its marker.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kfc4::wire::{
    self, AlterBarrierGroupsRequest, BarrierRequest, BarrierResponse, DescribeBarrierGroupsRequest,
    DescribedGroup, GroupAlteration, ListBarrierCutsRequest, TriggerBarrierRequest,
};
use net::barrier::format::{self, Cut, CutStatus, BARRIER_CONTROL_TYPE};
use serde_json::json;

use crate::client::{check, kafka_error, KafkaClient};
use crate::fanout_cmd::parse_delay_ms;
use crate::output;

/// Exit status of a `verify` that found a mismatch.
pub const EXIT_VERIFY_MISMATCH: i32 = 3;
/// What `--interval off` stands for: no periodic cut (KFC-4's interval -1).
const INTERVAL_OFF: &str = "off";
/// Bytes `verify` fetches at each cut offset (the marker is one small batch).
const VERIFY_FETCH_BYTES: i32 = 64 << 10;

#[derive(Args, Debug)]
pub struct BarrierArgs {
    /// Broker to talk to.
    #[arg(long, default_value = "127.0.0.1:9092", global = true)]
    brokers: String,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: BarrierCommand,
}

#[derive(Subcommand, Debug)]
enum BarrierCommand {
    /// Define (or redefine) a barrier group: a cut of TOPICS every INTERVAL.
    Define {
        /// The barrier group (letters, digits, `.`, `_`, `-`).
        group: String,
        /// The topics cut together, comma-separated (at most 100).
        #[arg(long, value_delimiter = ',', required = true)]
        topics: Vec<String>,
        /// How often a cut is made (e.g. 30s, 15m, 1h or milliseconds; at least 1s), or
        /// `off`: only when triggered.
        #[arg(long, value_parser = parse_interval, default_value = "60s")]
        interval: Interval,
        /// How many published cuts `__barrier_state` keeps.
        #[arg(long, default_value_t = 10)]
        retained_cuts: u32,
    },
    /// Delete a barrier group and its cuts (the markers stay in the data).
    Delete {
        /// The barrier group.
        group: String,
    },
    /// A group's definition, coordinator and last epoch (every group without GROUP).
    Describe {
        /// The barrier group (none: every group).
        group: Option<String>,
    },
    /// Cut GROUP now and print the cut (its epoch, status and marker offsets).
    Trigger {
        /// The barrier group.
        group: String,
        /// How long the markers of partitions that refuse them are retried before the cut
        /// is published as partial (e.g. 10s or ms; default and most: the broker's
        /// barrier-injection-timeout-ms).
        #[arg(long, value_parser = parse_delay_ms)]
        timeout: Option<u64>,
    },
    /// The retained cuts of GROUP with their offsets.
    List {
        /// The barrier group.
        group: String,
        /// Only cuts of this epoch and later.
        #[arg(long, default_value_t = 0)]
        from_epoch: i64,
        /// At most this many cuts, the oldest first (default: all).
        #[arg(long)]
        max: Option<u32>,
    },
    /// Check that the marker of each cut (or of --epoch) sits at its cut offset.
    Verify {
        /// The barrier group.
        group: String,
        /// Check only the cut of this epoch.
        #[arg(long)]
        epoch: Option<i64>,
    },
}

/// `--interval`: milliseconds, or None for `off`.
#[derive(Clone, Copy, Debug)]
struct Interval(Option<u64>);

fn parse_interval(s: &str) -> Result<Interval, String> {
    if s.trim().eq_ignore_ascii_case(INTERVAL_OFF) {
        return Ok(Interval(None));
    }
    parse_delay_ms(s).map(|ms| Interval(Some(ms)))
}

/// Runs a barrier command; the exit status (see the module doc).
pub fn run(args: BarrierArgs) -> i32 {
    match run_inner(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ringlog: {e}");
            1
        }
    }
}

/// Kafka's NOT_COORDINATOR: the group's coordinator is on another node.
const NOT_COORDINATOR: i16 = 16;
/// Kafka's COORDINATOR_LOAD_IN_PROGRESS: the coordinator is loading the group's partition
/// (it just became its leader).
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
/// How long a command waits out a coordinator that is loading before it reports it.
const COORDINATOR_LOAD_WAIT_MS: u64 = 10_000;
/// The pause between two tries at a loading coordinator.
const COORDINATOR_LOAD_RETRY_MS: u64 = 100;

/// The connections of one command: the bootstrap one, and one per other broker it needed
/// (a group's coordinator, a partition's leader), by address.
struct Brokers {
    bootstrap: KafkaClient,
    others: BTreeMap<String, KafkaClient>,
    /// The bootstrap broker's API versions, asked once.
    versions: Option<crate::client::BrokerVersions>,
    /// topic → partition → its leader's address, one Metadata per topic.
    leaders: BTreeMap<String, BTreeMap<i32, Result<String, String>>>,
}

impl Brokers {
    fn new(bootstrap: KafkaClient) -> Self {
        Self {
            bootstrap,
            others: BTreeMap::new(),
            versions: None,
            leaders: BTreeMap::new(),
        }
    }

    fn versions(&mut self) -> Result<&crate::client::BrokerVersions, String> {
        if self.versions.is_none() {
            self.versions = Some(self.bootstrap.api_versions()?);
        }
        Ok(self.versions.as_ref().expect("just asked"))
    }

    /// The connection to the broker leading `topic`/`partition` (Metadata from the bootstrap
    /// broker, once per topic).
    fn leader_of(&mut self, topic: &str, partition: i32) -> Result<&mut KafkaClient, String> {
        if !self.leaders.contains_key(topic) {
            let v = self.versions()?.clone();
            let md = crate::topic_cmd::metadata(&mut self.bootstrap, &v, Some(topic))?;
            let by_partition = md
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| {
                    let leader = p.leader_id.0;
                    let addr = md
                        .brokers
                        .iter()
                        .find(|b| b.node_id.0 == leader)
                        .map(|b| format!("{}:{}", b.host, b.port))
                        .ok_or_else(|| {
                            format!(
                                "{topic}/{} has no leader now (broker {leader})",
                                p.partition_index
                            )
                        });
                    (p.partition_index, addr)
                })
                .collect();
            self.leaders.insert(topic.to_string(), by_partition);
        }
        let addr = self.leaders[topic]
            .get(&partition)
            .ok_or_else(|| format!("{topic}/{partition} is not in the metadata"))?
            .clone()?;
        if !self.others.contains_key(&addr) {
            let c = KafkaClient::connect(&addr)?;
            self.others.insert(addr.clone(), c);
        }
        Ok(self.others.get_mut(&addr).expect("just inserted"))
    }

    /// `req` for `group`, sent again to the group's coordinator (the leader of its
    /// `__barrier_state` partition) when the bootstrap broker is not it, and again while
    /// the coordinator is loading (for at most `COORDINATOR_LOAD_WAIT_MS`).
    fn call_group(&mut self, group: &str, req: BarrierRequest) -> Result<BarrierResponse, String> {
        let deadline = Instant::now() + Duration::from_millis(COORDINATOR_LOAD_WAIT_MS);
        loop {
            let mut resp = call(&mut self.bootstrap, req.clone())?;
            if error_of(&resp) == NOT_COORDINATOR {
                let p = format::coordinator_partition(group) as i32;
                resp = call(self.leader_of(format::BARRIER_STATE_TOPIC, p)?, req.clone())?;
            }
            if error_of(&resp) != COORDINATOR_LOAD_IN_PROGRESS || Instant::now() >= deadline {
                return Ok(resp);
            }
            std::thread::sleep(Duration::from_millis(COORDINATOR_LOAD_RETRY_MS));
        }
    }
}

impl Brokers {
    /// Every group, each from the broker that coordinates it (a DescribeBarrierGroups of no
    /// group names those its broker coordinates), by name.
    fn describe_everywhere(&mut self) -> Result<Vec<DescribedGroup>, String> {
        let v = self.versions()?.clone();
        let md = crate::topic_cmd::metadata(&mut self.bootstrap, &v, None)?;
        let mut groups = Vec::new();
        for broker in &md.brokers {
            let addr = format!("{}:{}", broker.host, broker.port);
            let mut fresh;
            let c = match self.others.get_mut(&addr) {
                Some(c) => c,
                None if md.brokers.len() == 1 => &mut self.bootstrap,
                None => {
                    fresh = KafkaClient::connect(&addr)?;
                    &mut fresh
                }
            };
            let req = BarrierRequest::Describe(DescribeBarrierGroupsRequest::default());
            let BarrierResponse::Describe(r) = call(c, req)? else {
                return Err(format!("broker {addr} answered another API"));
            };
            groups.extend(r.groups);
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        groups.dedup_by(|a, b| a.name == b.name);
        Ok(groups)
    }
}

/// The error of a one-group answer (the first result's, for Alter and Describe).
fn error_of(resp: &BarrierResponse) -> i16 {
    match resp {
        BarrierResponse::Alter(r) => r.results.first().map_or(0, |g| g.error_code),
        BarrierResponse::Describe(r) => r.groups.first().map_or(0, |g| g.error_code),
        BarrierResponse::Trigger(r) => r.error_code,
        BarrierResponse::List(r) => r.error_code,
        BarrierResponse::WriteMarkers(_) => 0,
    }
}

fn call(c: &mut KafkaClient, req: BarrierRequest) -> Result<BarrierResponse, String> {
    let key = req.api_key();
    let (sent, frame) =
        c.call_frame(|id| wire::encode_request_frame(id, Some("ringlog-cli"), &req))?;
    let (got, resp) = wire::decode_response_frame(key, &frame)
        .map_err(|e| format!("decoding the broker's answer: {e}"))?;
    if got != sent {
        return Err(format!(
            "broker answered correlation id {got} to request {sent}"
        ));
    }
    Ok(resp)
}

/// `Err` with the broker's refusal.
fn refused(what: &str, code: i16, message: Option<String>) -> Result<(), String> {
    if code == 0 {
        return Ok(());
    }
    let name = if code == wire::BARRIER_INJECTION_IN_PROGRESS {
        "BARRIER_INJECTION_IN_PROGRESS (1000)".to_string()
    } else {
        kafka_error(code)
    };
    Err(match message {
        Some(m) if !m.is_empty() => format!("{what}: {name}: {m}"),
        _ => format!("{what}: {name}"),
    })
}

fn run_inner(args: BarrierArgs) -> Result<i32, String> {
    let mut b = Brokers::new(KafkaClient::connect(&args.brokers)?);
    let c = &mut b.bootstrap;
    match args.command {
        BarrierCommand::Define {
            group,
            topics,
            interval,
            retained_cuts,
        } => {
            let interval_ms = match interval.0 {
                None => wire::INTERVAL_OFF_MS,
                Some(ms) => {
                    i64::try_from(ms).map_err(|_| format!("--interval {ms} ms is too long"))?
                }
            };
            let alter = GroupAlteration {
                name: group.clone(),
                topics,
                interval_ms,
                retained_cuts: i32::try_from(retained_cuts)
                    .map_err(|_| format!("--retained-cuts {retained_cuts} is too many"))?,
                delete: false,
            };
            alter_one(c, alter, &format!("defining barrier group '{group}'"))?;
            println!("barrier group '{group}' defined");
        }
        BarrierCommand::Delete { group } => {
            let alter = GroupAlteration {
                name: group.clone(),
                interval_ms: wire::INTERVAL_OFF_MS,
                delete: true,
                ..Default::default()
            };
            alter_one(c, alter, &format!("deleting barrier group '{group}'"))?;
            println!("barrier group '{group}' deleted");
        }
        BarrierCommand::Describe { group } => {
            let groups = match group {
                Some(group) => {
                    let req = DescribeBarrierGroupsRequest {
                        groups: vec![group.clone()],
                    };
                    let BarrierResponse::Describe(r) =
                        b.call_group(&group, BarrierRequest::Describe(req))?
                    else {
                        return Err("the broker answered another API".into());
                    };
                    r.groups
                }
                None => b.describe_everywhere()?,
            };
            for g in &groups {
                refused(
                    &format!("barrier group '{}'", g.name),
                    g.error_code,
                    g.error_message.clone(),
                )?;
            }
            let interval = |ms: i64| {
                if ms < 0 {
                    INTERVAL_OFF.to_string()
                } else {
                    ms.to_string()
                }
            };
            if args.json {
                let v: Vec<_> = groups
                    .iter()
                    .map(|g| {
                        json!({
                            "group": g.name, "topics": g.topics, "interval_ms": g.interval_ms,
                            "retained_cuts": g.retained_cuts,
                            "last_epoch": g.last_epoch,
                            "coordinator_id": g.coordinator_id,
                            "coordinator_partition": format::coordinator_partition(&g.name),
                        })
                    })
                    .collect();
                output::json(&json!(v));
            } else {
                let rows: Vec<Vec<String>> = groups
                    .iter()
                    .map(|g| {
                        vec![
                            g.name.clone(),
                            g.topics.join(","),
                            interval(g.interval_ms),
                            g.retained_cuts.to_string(),
                            g.last_epoch.to_string(),
                            g.coordinator_id.to_string(),
                        ]
                    })
                    .collect();
                output::table(
                    &[
                        "GROUP",
                        "TOPICS",
                        "INTERVAL_MS",
                        "RETAINED",
                        "LAST_EPOCH",
                        "COORDINATOR",
                    ],
                    &rows,
                );
            }
        }
        BarrierCommand::Trigger { group, timeout } => {
            let req = TriggerBarrierRequest {
                group: group.clone(),
                // 0: the broker's barrier-injection-timeout-ms.
                timeout_ms: timeout.map_or(0, |ms| ms.clamp(1, i32::MAX as u64) as i32),
            };
            let BarrierResponse::Trigger(r) = b.call_group(&group, BarrierRequest::Trigger(req))?
            else {
                return Err("the broker answered another API".into());
            };
            refused(
                &format!("triggering barrier group '{group}'"),
                r.error_code,
                r.error_message,
            )?;
            let status = CutStatus::from_code(r.status).map_or("unknown", status_name);
            if args.json {
                output::json(&json!({
                    "group": group, "epoch": r.epoch, "status": status,
                    "offsets": offsets_json(&r.topics),
                    "missing": missing_json(&r.missing),
                }));
            } else {
                println!(
                    "barrier group '{group}' epoch {}: {status} {}",
                    r.epoch,
                    offsets_text(&r.topics, &r.missing)
                );
            }
        }
        BarrierCommand::List {
            group,
            from_epoch,
            max,
        } => {
            let max_results = max.map_or(-1, |n| i32::try_from(n).unwrap_or(i32::MAX));
            let cuts = list(&mut b, &group, from_epoch, max_results)?;
            if args.json {
                output::json(&json!(cuts.iter().map(cut_json).collect::<Vec<_>>()));
            } else {
                let rows: Vec<Vec<String>> = cuts
                    .iter()
                    .map(|cut| {
                        let offsets: Vec<String> = cut
                            .offsets
                            .iter()
                            .flat_map(|(t, ps)| ps.iter().map(move |(p, o)| format!("{t}/{p}@{o}")))
                            .collect();
                        let missing: Vec<String> = cut
                            .missing
                            .iter()
                            .map(|(t, p)| format!("{t}/{p}"))
                            .collect();
                        vec![
                            cut.epoch.to_string(),
                            status_name(cut.status).to_string(),
                            (cut.completed_at_ms - cut.triggered_at_ms).to_string(),
                            offsets.join(" "),
                            missing.join(" "),
                        ]
                    })
                    .collect();
                output::table(
                    &["EPOCH", "STATUS", "INJECTION_MS", "OFFSETS", "MISSING"],
                    &rows,
                );
            }
        }
        BarrierCommand::Verify { group, epoch } => {
            let cuts = list(&mut b, &group, epoch.unwrap_or(0), -1)?;
            let cuts: Vec<Cut> = cuts
                .into_iter()
                .filter(|cut| epoch.is_none_or(|e| cut.epoch == e))
                .collect();
            if cuts.is_empty() {
                return Err(match epoch {
                    Some(e) => format!("barrier group '{group}' has no retained cut of epoch {e}"),
                    None => format!("barrier group '{group}' has no retained cut"),
                });
            }
            let fetch_version = b.versions()?.pick(ApiKey::Fetch, 4, 12)?;
            let mut mismatches = Vec::new();
            let mut checked = 0;
            for cut in &cuts {
                for (topic, parts) in &cut.offsets {
                    for (p, offset) in parts {
                        checked += 1;
                        let checked_at = b.leader_of(topic, *p);
                        let r = checked_at.and_then(|c| {
                            check_marker(c, fetch_version, &group, cut, topic, *p, *offset)
                        });
                        if let Err(why) = r {
                            mismatches
                                .push(format!("epoch {}: {topic}/{p}@{offset}: {why}", cut.epoch));
                        }
                    }
                }
            }
            if args.json {
                output::json(
                    &json!({"group": group, "cuts": cuts.len(), "checked": checked, "mismatches": mismatches}),
                );
            } else {
                for m in &mismatches {
                    println!("MISMATCH {m}");
                }
                println!(
                    "verified {} cut(s) of '{group}': {checked} marker(s), {} mismatch(es)",
                    cuts.len(),
                    mismatches.len()
                );
            }
            if !mismatches.is_empty() {
                return Ok(EXIT_VERIFY_MISMATCH);
            }
        }
    }
    Ok(0)
}

fn alter_one(c: &mut KafkaClient, alter: GroupAlteration, what: &str) -> Result<(), String> {
    let req = AlterBarrierGroupsRequest {
        groups: vec![alter],
    };
    let BarrierResponse::Alter(r) = call(c, BarrierRequest::Alter(req))? else {
        return Err("the broker answered another API".into());
    };
    let first = r
        .results
        .into_iter()
        .next()
        .ok_or("the broker answered no result")?;
    refused(what, first.error_code, first.error_message)
}

fn list(
    b: &mut Brokers,
    group: &str,
    from_epoch: i64,
    max_results: i32,
) -> Result<Vec<Cut>, String> {
    let req = ListBarrierCutsRequest {
        group: group.to_string(),
        from_epoch,
        max_results,
    };
    let BarrierResponse::List(r) = b.call_group(group, BarrierRequest::List(req))? else {
        return Err("the broker answered another API".into());
    };
    refused(
        &format!("listing the cuts of '{group}'"),
        r.error_code,
        r.error_message,
    )?;
    Ok(r.cuts)
}

fn status_name(s: CutStatus) -> &'static str {
    match s {
        CutStatus::Complete => "complete",
        CutStatus::Partial => "partial",
    }
}

fn cut_json(cut: &Cut) -> serde_json::Value {
    json!({
        "epoch": cut.epoch,
        "status": status_name(cut.status),
        "triggered_at_ms": cut.triggered_at_ms,
        "completed_at_ms": cut.completed_at_ms,
        "offsets": offsets_json(&cut.offsets),
        "missing": missing_json(&cut.missing),
    })
}

fn offsets_json(offsets: &wire::CutOffsets) -> serde_json::Value {
    json!(offsets.iter().map(|(t, ps)| json!({
        "topic": t,
        "partitions": ps.iter().map(|(p, o)| json!({"partition": p, "offset": o})).collect::<Vec<_>>(),
    })).collect::<Vec<_>>())
}

fn missing_json(missing: &[(String, i32)]) -> serde_json::Value {
    json!(missing
        .iter()
        .map(|(t, p)| json!({"topic": t, "partition": p}))
        .collect::<Vec<_>>())
}

/// `topic/partition@offset ...`, then `missing topic/partition ...` where any are.
fn offsets_text(offsets: &wire::CutOffsets, missing: &[(String, i32)]) -> String {
    let mut words: Vec<String> = offsets
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |(p, o)| format!("{t}/{p}@{o}")))
        .collect();
    if !missing.is_empty() {
        words.push("missing".into());
        words.extend(missing.iter().map(|(t, p)| format!("{t}/{p}")));
    }
    words.join(" ")
}

/// Fetches the raw batch at `offset` of `topic`/`p` and checks it is `cut`'s marker.
fn check_marker(
    c: &mut KafkaClient,
    fetch_version: i16,
    group: &str,
    cut: &Cut,
    topic: &str,
    p: i32,
    offset: i64,
) -> Result<(), String> {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(VERIFY_FETCH_BYTES)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(offset)
                .with_current_leader_epoch(-1)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(VERIFY_FETCH_BYTES)])]);
    let r = c.call(&req, fetch_version)?;
    let pd = r
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .next()
        .ok_or("no partition in the Fetch answer")?;
    check(pd.error_code, None, || "Fetch".into())?;
    let bytes = pd.records.unwrap_or_default();
    // The first batch holding `offset` (a fetch answers from the batch that holds it).
    let (h, one) = engine::batch::stored_batches(&bytes)
        .find(|(h, _)| h.last_offset() >= offset)
        .ok_or("no batch at the cut offset (compacted or deleted?)")?;
    if h.base_offset != offset || !h.is_control() {
        return Err(format!(
            "the record there is not a marker (batch {}..={}, control {})",
            h.base_offset,
            h.last_offset(),
            h.is_control()
        ));
    }
    let (kind, value) = engine::txn::control_record_of(one).ok_or("unreadable control batch")?;
    if kind != BARRIER_CONTROL_TYPE {
        return Err(format!(
            "a control record of type {kind}, not a barrier marker"
        ));
    }
    let marker = format::decode_marker_value(value.as_deref().unwrap_or_default())
        .map_err(|e| e.to_string())?;
    if marker.group != group || marker.epoch != cut.epoch {
        return Err(format!(
            "the marker of '{}' epoch {}, not of epoch {}",
            marker.group, marker.epoch, cut.epoch
        ));
    }
    Ok(())
}
