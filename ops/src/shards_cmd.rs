//! `ringlog shards` (the per-core view) and `ringlog shard move` (the SRE tuning lever). Both
//! use the broker's admin HTTP listener (`serve --metrics-listen`): the view is computed from
//! two scrapes of `/metrics`, the move is `POST /v1/shard-move`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde_json::json;

use crate::output;

/// Redpanda's admin port, the default of `--admin`.
pub const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9644";
const HTTP_TIMEOUT_MS: u64 = 30_000;

#[derive(Args, Debug)]
pub struct ShardsArgs {
    /// The broker's admin listener (`serve --metrics-listen`).
    #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
    admin: String,
    /// Interval between the two scrapes the rates come from.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct ShardArgs {
    #[command(subcommand)]
    command: ShardCommand,
}

#[derive(Subcommand, Debug)]
enum ShardCommand {
    /// Move a partition to another core of the broker, live.
    Move {
        /// TOPIC/PARTITION, e.g. orders/3.
        partition: String,
        #[arg(long)]
        core: usize,
        #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
        admin: String,
        #[arg(long)]
        json: bool,
    },
}

/// Sends one HTTP/1.1 request and returns (status, body).
pub(crate) fn http(addr: &str, method: &str, path: &str) -> Result<(u16, String), String> {
    http_within(addr, method, path, HTTP_TIMEOUT_MS)
}

/// [`http`], waiting at most `timeout_ms` for the answer.
pub(crate) fn http_within(
    addr: &str,
    method: &str,
    path: &str,
    timeout_ms: u64,
) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| {
        format!("cannot reach the admin listener at {addr}: {e} (start the broker with --metrics-listen {addr}, or pass --admin HOST:PORT)")
    })?;
    s.set_read_timeout(Some(Duration::from_millis(timeout_ms)))
        .map_err(|e| e.to_string())?;
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)
        .map_err(|e| format!("reading from {addr}: {e}"))?;
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or("malformed HTTP response")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("malformed HTTP status line")?;
    Ok((status, body.to_string()))
}

/// Samples of a Prometheus text page: (name, labels) → value.
type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

pub fn parse_prometheus(text: &str) -> Result<Samples, String> {
    let mut out = Samples::new();
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .ok_or(format!("line {}: no value", n + 1))?;
        let value: f64 = value
            .parse()
            .map_err(|_| format!("line {}: bad value {value:?}", n + 1))?;
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .ok_or(format!("line {}: unclosed labels", n + 1))?;
                let mut labels = BTreeMap::new();
                for kv in body.split("\",").filter(|s| !s.is_empty()) {
                    let (k, v) = kv
                        .split_once("=\"")
                        .ok_or(format!("line {}: bad label {kv:?}", n + 1))?;
                    labels.insert(k.to_string(), v.trim_end_matches('"').to_string());
                }
                (name.to_string(), labels)
            }
            None => (series.to_string(), BTreeMap::new()),
        };
        out.insert((name, labels), value);
    }
    Ok(out)
}

fn per_core(s: &Samples, name: &str) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for ((n, labels), v) in s {
        if n == name {
            if let Some(core) = labels.get("core") {
                *m.entry(core.clone()).or_insert(0.0) += v;
            }
        }
    }
    m
}

/// p99 (upper bucket bound, seconds) of a histogram's increase between two scrapes, or of its
/// whole life when nothing happened in between.
fn p99(before: &Samples, after: &Samples, name: &str, core: &str) -> Option<f64> {
    let buckets = |s: &Samples| -> Vec<(f64, f64)> {
        let mut b: Vec<(f64, f64)> = s
            .iter()
            .filter(|((n, l), _)| {
                n == &format!("{name}_bucket") && l.get("core").map(String::as_str) == Some(core)
            })
            .map(|((_, l), v)| {
                let le = l.get("le").map(String::as_str).unwrap_or("+Inf");
                (
                    if le == "+Inf" {
                        f64::INFINITY
                    } else {
                        le.parse().unwrap_or(f64::INFINITY)
                    },
                    *v,
                )
            })
            .collect();
        b.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        b
    };
    let (a, b) = (buckets(before), buckets(after));
    let delta: Vec<(f64, f64)> = b
        .iter()
        .zip(a.iter().chain(std::iter::repeat(&(0.0, 0.0))))
        .map(|(x, y)| (x.0, x.1 - y.1))
        .collect();
    let use_delta = delta.last().is_some_and(|l| l.1 > 0.0);
    let series = if use_delta { delta } else { b };
    let total = series.last()?.1;
    if total <= 0.0 {
        return None;
    }
    series
        .iter()
        .find(|(_, c)| *c >= 0.99 * total)
        .map(|(le, _)| *le)
}

pub fn run_shards(args: ShardsArgs) -> Result<(), String> {
    let scrape = |addr: &str| -> Result<Samples, String> {
        let (status, body) = http(addr, "GET", "/metrics")?;
        if status != 200 {
            return Err(format!("GET /metrics answered {status}: {body}"));
        }
        parse_prometheus(&body)
    };
    let t0 = Instant::now();
    let before = scrape(&args.admin)?;
    std::thread::sleep(Duration::from_millis(args.interval_ms.max(1)));
    let after = scrape(&args.admin)?;
    let secs = t0.elapsed().as_secs_f64();
    let rate = |name: &str| -> BTreeMap<String, f64> {
        let (a, b) = (per_core(&before, name), per_core(&after, name));
        b.iter()
            .map(|(c, v)| (c.clone(), (v - a.get(c).copied().unwrap_or(0.0)) / secs))
            .collect()
    };
    let partitions = per_core(&after, "ringlog_partitions");
    let bytes_in = rate("ringlog_record_bytes_in_total");
    let records_in = rate("ringlog_records_in_total");
    let bytes_out = rate("ringlog_record_bytes_out_total");
    let records_out = rate("ringlog_records_out_total");
    let busy = rate("ringlog_core_busy_seconds_total");
    let queue = per_core(&after, "ringlog_cross_core_queue_depth");
    let in_flight = per_core(&after, "ringlog_requests_in_flight");
    let open_files = per_core(&after, "ringlog_open_files");
    let open_budget = per_core(&after, "ringlog_open_files_budget");
    let reopens = rate("ringlog_open_files_reopened_total");
    // The node's resident memory shared out by partitions: what a partition costs.
    let rss = after
        .iter()
        .find(|((n, _), _)| n == "ringlog_process_resident_bytes")
        .map(|(_, v)| *v);
    let all_partitions: f64 = partitions.values().sum();
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (n, l) in after.keys() {
        if n == "ringlog_partition_log_bytes" {
            if let (Some(c), Some(t), Some(p)) = (l.get("core"), l.get("topic"), l.get("partition"))
            {
                names.entry(c.clone()).or_default().push(format!("{t}/{p}"));
            }
        }
    }
    let mut cores: Vec<&String> = partitions.keys().collect();
    cores.sort_by_key(|c| c.parse::<usize>().unwrap_or(usize::MAX));
    let get = |m: &BTreeMap<String, f64>, c: &str| m.get(c).copied().unwrap_or(0.0);
    let rows: Vec<serde_json::Value> = cores
        .iter()
        .map(|c| {
            json!({
                "core": c.parse::<usize>().unwrap_or(0),
                "partitions": get(&partitions, c) as u64,
                "partition_names": names.get(*c).cloned().unwrap_or_default(),
                "bytes_in_per_s": get(&bytes_in, c),
                "records_in_per_s": get(&records_in, c),
                "bytes_out_per_s": get(&bytes_out, c),
                "records_out_per_s": get(&records_out, c),
                "fsync_p99_ms": p99(&before, &after, "ringlog_fdatasync_latency_seconds", c).map(|s| s * 1000.0),
                "queue_depth": get(&queue, c) as u64,
                "requests_in_flight": get(&in_flight, c) as i64,
                "busy_fraction": get(&busy, c).min(1.0),
                "open_files": get(&open_files, c) as u64,
                "open_files_budget": get(&open_budget, c) as u64,
                "reopens_per_s": get(&reopens, c),
                "node_resident_bytes_per_partition": rss
                    .filter(|_| all_partitions > 0.0)
                    .map(|r| r / all_partitions),
            })
        })
        .collect();
    if args.json {
        output::json(&json!(rows));
        return Ok(());
    }
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let p99 = r["fsync_p99_ms"].as_f64().map_or("-".to_string(), |v| {
                if v.is_finite() {
                    format!("{v:.2}")
                } else {
                    ">10000".into()
                }
            });
            vec![
                r["core"].to_string(),
                r["partitions"].to_string(),
                format!("{:.0}", r["bytes_in_per_s"].as_f64().unwrap_or(0.0)),
                format!("{:.0}", r["records_in_per_s"].as_f64().unwrap_or(0.0)),
                format!("{:.0}", r["bytes_out_per_s"].as_f64().unwrap_or(0.0)),
                format!("{:.0}", r["records_out_per_s"].as_f64().unwrap_or(0.0)),
                p99,
                format!("{}/{}", r["queue_depth"], r["requests_in_flight"]),
                format!("{:.1}%", r["busy_fraction"].as_f64().unwrap_or(0.0) * 100.0),
                format!("{}/{}", r["open_files"], r["open_files_budget"]),
                format!("{:.0}", r["reopens_per_s"].as_f64().unwrap_or(0.0)),
                r["node_resident_bytes_per_partition"]
                    .as_f64()
                    .map_or("-".into(), |b| format!("{:.1}", b / 1024.0)),
            ]
        })
        .collect();
    output::table(
        &[
            "CORE",
            "PARTITIONS",
            "BYTES-IN/S",
            "RECORDS-IN/S",
            "BYTES-OUT/S",
            "RECORDS-OUT/S",
            "FSYNC-P99-MS",
            "QUEUE/IN-FLIGHT",
            "BUSY",
            "OPEN-FILES",
            "REOPENS/S",
            "KIB/PARTITION",
        ],
        &table,
    );
    Ok(())
}

pub fn run_shard(args: ShardArgs) -> Result<(), String> {
    match args.command {
        ShardCommand::Move {
            partition,
            core,
            admin,
            json: as_json,
        } => {
            let (topic, p) = parse_partition(&partition)?;
            let (status, body) = http(
                &admin,
                "POST",
                &format!("/v1/shard-move?topic={topic}&partition={p}&core={core}"),
            )?;
            let v = admin_answer(status, &body, "shard move")?;
            if as_json {
                output::json(&v);
            } else {
                println!(
                    "moved {topic}/{p} from core {} to core {}",
                    v["from_core"], v["to_core"]
                );
            }
            Ok(())
        }
    }
}

/// An admin listener's JSON answer; a status other than 200 is an error naming `what` and
/// the listener's reason.
pub(crate) fn admin_answer(
    status: u16,
    body: &str,
    what: &str,
) -> Result<serde_json::Value, String> {
    let v: serde_json::Value = serde_json::from_str(body.trim())
        .map_err(|_| format!("admin answered {status}: {body}"))?;
    if status != 200 {
        return Err(format!(
            "{what} refused: {}",
            v["error"].as_str().unwrap_or(body.trim())
        ));
    }
    Ok(v)
}

/// `TOPIC/PARTITION` (e.g. `orders/3`) as a topic and a partition index.
pub(crate) fn parse_partition(s: &str) -> Result<(String, u32), String> {
    s.rsplit_once('/')
        .filter(|(t, _)| !t.is_empty())
        .and_then(|(t, p)| p.parse::<u32>().ok().map(|p| (t.to_string(), p)))
        .ok_or_else(|| format!("{s:?}: expected TOPIC/PARTITION, e.g. orders/3"))
}
