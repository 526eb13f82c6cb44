//! `ringlog cluster info`: Metadata (cluster id, controller, brokers, topic and partition counts)
//! and ApiVersions (the advertised API version ranges).

use clap::{Args, Subcommand};
use kafka_protocol::messages::ApiKey;
use serde_json::json;

use crate::client::KafkaClient;
use crate::output;
use crate::topic_cmd::metadata;

#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Broker to talk to.
    #[arg(long, default_value = "127.0.0.1:9092", global = true)]
    brokers: String,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Cluster id, controller, brokers, topic/partition counts and the advertised APIs.
    Info,
}

/// The protocol name of an API key (`Produce`, `Fetch`, …) or `Unknown(N)`.
pub fn api_name(key: i16) -> String {
    match ApiKey::try_from(key) {
        Ok(k) => format!("{k:?}"),
        Err(_) => format!("Unknown({key})"),
    }
}

pub fn run(args: ClusterArgs) -> Result<(), String> {
    let mut c = KafkaClient::connect(&args.brokers)?;
    match args.command {
        ClusterCommand::Info => info(&mut c, args.json),
    }
}

fn info(c: &mut KafkaClient, as_json: bool) -> Result<(), String> {
    let v = c.api_versions()?;
    let m = metadata(c, &v, None)?;
    let cluster_id = m.cluster_id.as_ref().map(|s| s.to_string());
    let topics = m.topics.len();
    let internal = m.topics.iter().filter(|t| t.is_internal).count();
    let partitions: usize = m.topics.iter().map(|t| t.partitions.len()).sum();
    let mut brokers: Vec<(i32, String, i32, Option<String>)> = m
        .brokers
        .iter()
        .map(|b| {
            (
                b.node_id.0,
                b.host.to_string(),
                b.port,
                b.rack.as_ref().map(|r| r.to_string()),
            )
        })
        .collect();
    brokers.sort();
    let apis: Vec<(i16, String, i16, i16)> = v
        .ranges
        .iter()
        .map(|(&k, &(min, max))| (k, api_name(k), min, max))
        .collect();
    if as_json {
        output::json(&json!({
            "cluster_id": cluster_id,
            "controller_id": m.controller_id.0,
            "brokers": brokers.iter().map(|(id, host, port, rack)| json!({
                "node_id": id, "host": host, "port": port, "rack": rack,
            })).collect::<Vec<_>>(),
            "topics": topics,
            "internal_topics": internal,
            "partitions": partitions,
            "api_versions": apis.iter().map(|(k, name, min, max)| json!({
                "api_key": k, "name": name, "min_version": min, "max_version": max,
            })).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    println!("cluster id:  {}", cluster_id.as_deref().unwrap_or("-"));
    println!("controller:  {}", m.controller_id.0);
    println!("topics:      {topics} ({internal} internal)");
    println!("partitions:  {partitions}");
    println!();
    let rows: Vec<Vec<String>> = brokers
        .iter()
        .map(|(id, host, port, rack)| {
            vec![
                id.to_string(),
                format!("{host}:{port}"),
                rack.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    output::table(&["BROKER", "ADDRESS", "RACK"], &rows);
    println!();
    let rows: Vec<Vec<String>> = apis
        .iter()
        .map(|(k, name, min, max)| {
            vec![
                k.to_string(),
                name.clone(),
                min.to_string(),
                max.to_string(),
            ]
        })
        .collect();
    output::table(&["KEY", "API", "MIN", "MAX"], &rows);
    Ok(())
}
