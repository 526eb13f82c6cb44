//! `ringlog shards` (the per-core view), `--watch` (the same view, live), `--hot N` (the
//! busiest partitions and the core each lives on) and `ringlog shard move` (the SRE tuning
//! lever). The view comes from the admin listener's `GET /v1/shards` (the broker measures
//! the interval: rates and exact latency percentiles); the move is `POST /v1/shard-move`.

use std::io::Write;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::admin_client::{admin_answer, http, http_within, DEFAULT_ADMIN_ADDR};
use crate::output;

/// The longest interval the broker measures a view over (its `MAX_VIEW_INTERVAL_MS`).
const MAX_INTERVAL_MS: u64 = net::shard_view::MAX_VIEW_INTERVAL_MS;
/// Hot partitions `--watch` lists under the cores when `--hot` names no number.
const WATCH_HOT_PARTITIONS: usize = 5;
/// ANSI: cursor home, clear the screen (what `--watch` draws each frame after).
const CLEAR_SCREEN: &str = "\x1b[H\x1b[2J";

#[derive(Args, Debug)]
pub struct ShardsArgs {
    /// The broker's admin listener (`serve --metrics-listen`).
    #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
    admin: String,
    /// The interval the rates and percentiles are measured over (and `--watch`'s refresh).
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Redraw the view every interval until interrupted (a live terminal view).
    #[arg(long)]
    watch: bool,
    /// With --watch: stop after this many frames.
    #[arg(long, value_name = "N")]
    frames: Option<u64>,
    /// List the N busiest partitions (bytes in plus out per second) with their core.
    #[arg(long, value_name = "N")]
    hot: Option<usize>,
    /// Print JSON instead of a table.
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
        /// The core to move it to (0 to the broker's cores - 1).
        #[arg(long)]
        core: usize,
        /// The broker's admin listener (`serve --metrics-listen`).
        #[arg(long, default_value = DEFAULT_ADMIN_ADDR)]
        admin: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// One view from the broker, measured over `interval_ms`.
fn fetch_view(admin: &str, interval_ms: u64, hot: usize) -> Result<Value, String> {
    let path = format!("/v1/shards?interval_ms={interval_ms}&hot={hot}");
    let (status, body) = http_within(admin, "GET", &path, interval_ms + 30_000)?;
    admin_answer(status, &body, "the shards view")
}

fn num(v: &Value, unit: &str) -> String {
    v.as_f64().map_or("-".into(), |x| match unit {
        "ms" => format!("{x:.2}"),
        "%" => format!("{:.1}%", x * 100.0),
        _ => format!("{x:.0}"),
    })
}

fn cores_table(view: &Value) -> String {
    let rows: Vec<Vec<String>> = view["cores"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let hottest = r["hot_partitions"]
                .as_array()
                .and_then(|h| h.first())
                .map_or("-".into(), |p| {
                    format!("{}/{}", p["topic"].as_str().unwrap_or("?"), p["partition"])
                });
            vec![
                r["core"].to_string(),
                r["partitions"].to_string(),
                num(&r["bytes_in_per_s"], ""),
                num(&r["records_in_per_s"], ""),
                num(&r["bytes_out_per_s"], ""),
                num(&r["records_out_per_s"], ""),
                num(&r["produce_p99_ms"], "ms"),
                num(&r["fsync_p99_ms"], "ms"),
                num(&r["latency"]["cross_core_hop"]["p99_ms"], "ms"),
                format!("{}/{}", r["queue_depth"], r["requests_in_flight"]),
                num(&r["busy_fraction"], "%"),
                format!("{}/{}", r["open_files"], r["open_files_budget"]),
                num(&r["reopens_per_s"], ""),
                r["node_resident_bytes_per_partition"]
                    .as_f64()
                    .map_or("-".into(), |b| format!("{:.1}", b / 1024.0)),
                hottest,
            ]
        })
        .collect();
    output::table_text(
        &[
            "CORE",
            "PARTITIONS",
            "BYTES-IN/S",
            "RECORDS-IN/S",
            "BYTES-OUT/S",
            "RECORDS-OUT/S",
            "PRODUCE-P99-MS",
            "FSYNC-P99-MS",
            "HOP-P99-MS",
            "QUEUE/IN-FLIGHT",
            "BUSY",
            "OPEN-FILES",
            "REOPENS/S",
            "KIB/PARTITION",
            "HOTTEST",
        ],
        &rows,
    )
}

fn hot_table(view: &Value) -> String {
    let rows: Vec<Vec<String>> = view["hot_partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            vec![
                format!("{}/{}", p["topic"].as_str().unwrap_or("?"), p["partition"]),
                p["core"].to_string(),
                num(&p["bytes_in_per_s"], ""),
                num(&p["records_in_per_s"], ""),
                num(&p["bytes_out_per_s"], ""),
                num(&p["records_out_per_s"], ""),
            ]
        })
        .collect();
    output::table_text(
        &[
            "PARTITION",
            "CORE",
            "BYTES-IN/S",
            "RECORDS-IN/S",
            "BYTES-OUT/S",
            "RECORDS-OUT/S",
        ],
        &rows,
    )
}

pub fn run_shards(args: ShardsArgs) -> Result<(), String> {
    if args.interval_ms == 0 || args.interval_ms > MAX_INTERVAL_MS {
        return Err(format!(
            "--interval-ms {} is out of range: give 1 to {MAX_INTERVAL_MS}",
            args.interval_ms
        ));
    }
    if args.frames.is_some() && !args.watch {
        return Err("--frames counts --watch's frames: add --watch".into());
    }
    if args.watch {
        if args.json {
            return Err("--watch draws a terminal view: drop --json (or drop --watch)".into());
        }
        return watch(&args);
    }
    let hot = args.hot.unwrap_or(0);
    let view = fetch_view(&args.admin, args.interval_ms, hot)?;
    match (args.hot.is_some(), args.json) {
        (true, true) => output::json(&view["hot_partitions"]),
        (true, false) => print!("{}", hot_table(&view)),
        (false, true) => output::json(&view["cores"]),
        (false, false) => print!("{}", cores_table(&view)),
    }
    Ok(())
}

/// `--watch`: one frame per interval (the broker's measurement is the wait), drawn over the
/// last; an unreachable broker shows the error and is asked again next frame.
fn watch(args: &ShardsArgs) -> Result<(), String> {
    let hot = args.hot.unwrap_or(WATCH_HOT_PARTITIONS);
    let mut frame = 0u64;
    let mut out = std::io::stdout();
    while args.frames.is_none_or(|n| frame < n) {
        frame += 1;
        let mut screen = format!(
            "{CLEAR_SCREEN}ringlog shards  admin {}  every {} ms  frame {frame}  (Ctrl-C quits)\n\n",
            args.admin, args.interval_ms
        );
        match fetch_view(&args.admin, args.interval_ms, hot) {
            Ok(view) => {
                screen.push_str(&cores_table(&view));
                screen.push_str(&format!("\nhottest {hot} partitions\n"));
                screen.push_str(&hot_table(&view));
            }
            Err(e) => {
                screen.push_str(&format!("{e}\n"));
                std::thread::sleep(Duration::from_millis(args.interval_ms));
            }
        }
        out.write_all(screen.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| format!("writing the view: {e}"))?;
    }
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

/// `TOPIC/PARTITION` (e.g. `orders/3`) as a topic and a partition index.
pub(crate) fn parse_partition(s: &str) -> Result<(String, u32), String> {
    s.rsplit_once('/')
        .filter(|(t, _)| !t.is_empty())
        .and_then(|(t, p)| p.parse::<u32>().ok().map(|p| (t.to_string(), p)))
        .ok_or_else(|| format!("{s:?}: expected TOPIC/PARTITION, e.g. orders/3"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_render_a_view() {
        let view = json!({
            "interval_ms": 1000,
            "cores": [{"core": 0, "partitions": 2, "bytes_in_per_s": 10.0, "records_in_per_s": 1.0,
                "bytes_out_per_s": 0.0, "records_out_per_s": 0.0, "produce_p99_ms": 1.5,
                "fsync_p99_ms": null, "latency": {"cross_core_hop": {"p99_ms": 0.02}},
                "queue_depth": 0, "requests_in_flight": 1, "busy_fraction": 0.25,
                "open_files": 3, "open_files_budget": 100, "reopens_per_s": 0.0,
                "node_resident_bytes_per_partition": 2048.0,
                "hot_partitions": [{"topic": "t", "partition": 1, "core": 0}]}],
            "hot_partitions": [{"topic": "t", "partition": 1, "core": 0, "bytes_in_per_s": 10.0,
                "records_in_per_s": 1.0, "bytes_out_per_s": 0.0, "records_out_per_s": 0.0}],
        });
        let t = cores_table(&view);
        let row = t.lines().nth(1).unwrap();
        for cell in ["1.50", "-", "0.02", "0/1", "25.0%", "3/100", "2.0", "t/1"] {
            assert!(row.split_whitespace().any(|c| c == cell), "{cell} in {row}");
        }
        let h = hot_table(&view);
        assert!(h.lines().nth(1).unwrap().starts_with("t/1"), "{h}");
    }
}
