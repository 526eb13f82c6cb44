//! `ringlog fanout attach|detach|list`. A link is the child topic's `fanout.parent` and
//! `fanout.delay.ms` configs, so the commands are IncrementalAlterConfigs and DescribeConfigs
//! over the Kafka protocol; the lag comes from the admin listener's `/metrics` when reachable.

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

use crate::admin_client::{http, parse_metrics, DEFAULT_ADMIN_ADDR};
use crate::client::{kafka_error, KafkaClient};
use crate::output;
use crate::topic_cmd::{alter_config, metadata};

const RESOURCE_TOPIC: i8 = 2;

#[derive(Args, Debug)]
pub struct FanoutArgs {
    /// Broker to talk to.
    #[arg(long, default_value = "127.0.0.1:9092", global = true)]
    brokers: String,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: FanoutCommand,
}

#[derive(Subcommand, Debug)]
enum FanoutCommand {
    /// Copy every new PARENT record into CHILD (from now on: no backfill).
    Attach {
        /// The parent topic whose records are copied.
        parent: String,
        /// The child topic they are copied into (it must exist).
        child: String,
        /// Copy each record only once it is this old (e.g. 30s, 15m, 1h, 2d or milliseconds);
        /// immutable while attached.
        #[arg(long, value_parser = parse_delay_ms)]
        delay: Option<u64>,
    },
    /// Stop copying into CHILD; its data stays.
    Detach {
        /// The parent topic.
        parent: String,
        /// The child topic to stop copying into.
        child: String,
    },
    /// The children of PARENT with their delay and lag.
    List {
        /// The parent topic.
        parent: String,
        /// The broker's admin listener, for the lag (`serve --metrics-listen`).
        #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
        admin: String,
    },
}

/// `90`, `500ms`, `30s`, `15m`, `1h`, `2d` → milliseconds.
pub fn parse_delay_ms(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, unit_ms) = [
        ("ms", 1u64),
        ("s", 1_000),
        ("m", 60_000),
        ("h", 3_600_000),
        ("d", 86_400_000),
    ]
    .iter()
    .find_map(|(suffix, ms)| s.strip_suffix(suffix).map(|n| (n, *ms)))
    .unwrap_or((s, 1));
    let n: u64 = num.parse().map_err(|_| {
        format!("{s:?}: expected a duration like 500ms, 30s, 15m, 1h, 2d or a number of ms")
    })?;
    n.checked_mul(unit_ms)
        .ok_or_else(|| format!("{s:?} is too long"))
}

pub fn run(args: FanoutArgs) -> Result<(), String> {
    let mut c = KafkaClient::connect(&args.brokers)?;
    let v = c.api_versions()?;
    match args.command {
        FanoutCommand::Attach {
            parent,
            child,
            delay,
        } => {
            let mut set = vec![("fanout.parent".to_string(), parent)];
            if let Some(d) = delay {
                set.push(("fanout.delay.ms".to_string(), d.to_string()));
            }
            alter_config(&mut c, &v, &child, &set, &[], args.json)
        }
        FanoutCommand::Detach { parent, child } => {
            let links = children(&mut c, &v)?;
            match links.get(&child) {
                Some((p, _)) if *p == parent => {}
                Some((p, _)) => return Err(format!("{child} is attached to {p}, not {parent}")),
                None => return Err(format!("{child} is not attached to any parent")),
            }
            alter_config(
                &mut c,
                &v,
                &child,
                &[],
                &["fanout.parent".to_string(), "fanout.delay.ms".to_string()],
                args.json,
            )
        }
        FanoutCommand::List { parent, admin } => list(&mut c, &v, &parent, &admin, args.json),
    }
}

/// child → (parent, delay ms), from every topic's configs.
fn children(
    c: &mut KafkaClient,
    v: &crate::client::BrokerVersions,
) -> Result<BTreeMap<String, (String, u64)>, String> {
    let topics: Vec<String> = metadata(c, v, None)?
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    let ver = v.pick(ApiKey::DescribeConfigs, 1, 4)?;
    let keys = Some(vec![
        StrBytes::from_static_str("fanout.parent"),
        StrBytes::from_static_str("fanout.delay.ms"),
    ]);
    let req = DescribeConfigsRequest::default().with_resources(
        topics
            .iter()
            .map(|t| {
                DescribeConfigsResource::default()
                    .with_resource_type(RESOURCE_TOPIC)
                    .with_resource_name(StrBytes::from_string(t.clone()))
                    .with_configuration_keys(keys.clone())
            })
            .collect(),
    );
    let r = c.call(&req, ver)?;
    let mut out = BTreeMap::new();
    for res in r.results {
        if res.error_code != 0 {
            return Err(format!(
                "DescribeConfigs {}: {}",
                res.resource_name,
                kafka_error(res.error_code)
            ));
        }
        let get = |k: &str| {
            res.configs
                .iter()
                .find(|e| e.name.as_str() == k)
                .and_then(|e| e.value.as_ref().map(|v| v.to_string()))
        };
        if let Some(parent) = get("fanout.parent").filter(|p| !p.is_empty()) {
            let delay = get("fanout.delay.ms")
                .and_then(|d| d.parse().ok())
                .unwrap_or(0);
            out.insert(res.resource_name.to_string(), (parent, delay));
        }
    }
    Ok(out)
}

fn list(
    c: &mut KafkaClient,
    v: &crate::client::BrokerVersions,
    parent: &str,
    admin: &str,
    as_json: bool,
) -> Result<(), String> {
    let kids: Vec<(String, u64)> = children(c, v)?
        .into_iter()
        .filter(|(_, (p, _))| p == parent)
        .map(|(child, (_, d))| (child, d))
        .collect();
    // Lag per child: the sum over parent partitions, when the admin listener answers.
    let lag: Option<BTreeMap<String, (f64, f64)>> = http(admin, "GET", "/metrics")
        .ok()
        .filter(|(status, _)| *status == 200)
        .and_then(|(_, body)| parse_metrics(&body).ok())
        .map(|samples| {
            let mut m: BTreeMap<String, (f64, f64)> = BTreeMap::new();
            for ((name, labels), value) in samples {
                if labels.get("parent").map(String::as_str) != Some(parent) {
                    continue;
                }
                let Some(child) = labels.get("child") else {
                    continue;
                };
                let e = m.entry(child.clone()).or_default();
                match name.as_str() {
                    "fanout_lag_messages" => e.0 += value,
                    "fanout_due_lag_seconds" => e.1 = e.1.max(value),
                    _ => {}
                }
            }
            m
        });
    if as_json {
        output::json(&json!(kids
            .iter()
            .map(|(child, d)| {
                let l = lag.as_ref().and_then(|m| m.get(child));
                json!({"child": child, "delay_ms": d, "lag_messages": l.map(|x| x.0), "due_lag_seconds": l.map(|x| x.1)})
            })
            .collect::<Vec<_>>()));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = kids
        .iter()
        .map(|(child, d)| {
            let l = lag.as_ref().and_then(|m| m.get(child));
            vec![
                child.clone(),
                d.to_string(),
                l.map_or("-".into(), |x| format!("{:.0}", x.0)),
                l.map_or("-".into(), |x| format!("{:.3}", x.1)),
            ]
        })
        .collect();
    output::table(&["CHILD", "DELAY-MS", "LAG-MESSAGES", "DUE-LAG-S"], &rows);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_parse() {
        assert_eq!(parse_delay_ms("1h"), Ok(3_600_000));
        assert_eq!(parse_delay_ms("500ms"), Ok(500));
        assert_eq!(parse_delay_ms("30s"), Ok(30_000));
        assert_eq!(parse_delay_ms("2d"), Ok(172_800_000));
        assert_eq!(parse_delay_ms("250"), Ok(250));
        assert!(parse_delay_ms("soon").is_err());
    }
}
