//! The per-core view of `GET /v1/shards` (what `ringlog shards` shows): two snapshots of every
//! core and what happened between them — rates, exact latency percentiles of the interval
//! (the difference of the cumulative hdrhistograms), queue depths, the busy fraction and the
//! hottest partitions, with the core each lives on.

use std::collections::HashMap;

use engine::latency::LatencyHistogram;
use serde_json::{json, Value};

use crate::metrics::{PartitionTraffic, Snapshot};

/// The longest interval `/v1/shards` waits between its two snapshots, in milliseconds.
pub const MAX_VIEW_INTERVAL_MS: u64 = 60_000;
/// The most hot partitions one view lists.
pub const MAX_HOT_PARTITIONS: usize = 1_000;
/// Hot partitions listed per core in the per-core rows.
pub const HOT_PER_CORE: usize = 3;

/// The latency histograms the view reports, by the name it gives each.
type LatencyOf = fn(&Snapshot) -> &LatencyHistogram;
const LATENCIES: &[(&str, LatencyOf)] = &[
    ("produce", |s| &s.produce_latency),
    ("fetch", |s| &s.fetch_latency),
    ("fsync", |s| &s.fsync_latency),
    ("cross_core_hop", |s| &s.hop_latency),
    ("cross_core_queue", |s| &s.queue_latency),
];

/// A histogram's percentiles in milliseconds (`null` ones when it holds nothing).
fn percentiles_ms(h: &LatencyHistogram) -> Value {
    let p = h.percentiles();
    let ms = |us: u64| (p.count > 0).then_some(us as f64 / 1000.0);
    json!({
        "count": p.count,
        "p50_ms": ms(p.p50_us),
        "p99_ms": ms(p.p99_us),
        "p999_ms": ms(p.p999_us),
        "max_ms": ms(p.max_us),
    })
}

/// One partition's rates over the interval.
fn partition_rates(
    core: usize,
    topic: &str,
    partition: u32,
    d: PartitionTraffic,
    secs: f64,
) -> Value {
    json!({
        "topic": topic,
        "partition": partition,
        "core": core,
        "records_in_per_s": d.records_in as f64 / secs,
        "bytes_in_per_s": d.bytes_in as f64 / secs,
        "records_out_per_s": d.records_out as f64 / secs,
        "bytes_out_per_s": d.bytes_out as f64 / secs,
    })
}

/// What moved between two readings of a partition's counters; a partition that reopened in
/// between (its counters restarted) counts what it holds now.
fn traffic_since(now: PartitionTraffic, then: Option<PartitionTraffic>) -> PartitionTraffic {
    let Some(then) = then else { return now };
    if now.bytes_in < then.bytes_in || now.bytes_out < then.bytes_out {
        return now;
    }
    PartitionTraffic {
        records_in: now.records_in.saturating_sub(then.records_in),
        bytes_in: now.bytes_in - then.bytes_in,
        records_out: now.records_out.saturating_sub(then.records_out),
        bytes_out: now.bytes_out - then.bytes_out,
    }
}

/// The view of the interval between `before` and `after` (snapshots of every core, taken
/// `secs` apart): `{interval_ms, cores: [...], hot_partitions: [...]}`, the `hot` busiest
/// partitions (bytes in plus out per second) first. `resident_bytes` is the node's RSS.
pub fn view(
    before: &[Snapshot],
    after: &[Snapshot],
    secs: f64,
    hot: usize,
    resident_bytes: Option<u64>,
) -> Value {
    let secs = secs.max(1e-3);
    let earlier: HashMap<usize, &Snapshot> = before.iter().map(|s| (s.core, s)).collect();
    let all_partitions: u64 = after
        .iter()
        .map(|s| s.partitions.len() as u64 + s.unopened_partitions)
        .sum();
    let mut hottest: Vec<(u64, Value)> = Vec::new();
    let cores: Vec<Value> = after
        .iter()
        .map(|s| {
            let b = earlier.get(&s.core).copied();
            let delta = |get: fn(&Snapshot) -> u64| {
                get(s).saturating_sub(b.map_or(0, get)) as f64 / secs
            };
            let mut latency = serde_json::Map::new();
            for (name, get) in LATENCIES {
                let interval = match b {
                    Some(b) => get(s).since(get(b)),
                    None => get(s).clone(),
                };
                latency.insert(name.to_string(), percentiles_ms(&interval));
            }
            let then: HashMap<(&str, u32), PartitionTraffic> = b
                .map(|b| {
                    b.partitions
                        .iter()
                        .map(|p| ((p.topic.as_str(), p.partition), p.traffic))
                        .collect()
                })
                .unwrap_or_default();
            let mut on_core: Vec<(u64, Value)> = s
                .partitions
                .iter()
                .map(|p| {
                    let d = traffic_since(p.traffic, then.get(&(p.topic.as_str(), p.partition)).copied());
                    let heat = d.bytes_in + d.bytes_out;
                    (heat, partition_rates(s.core, &p.topic, p.partition, d, secs))
                })
                .filter(|(heat, _)| *heat > 0)
                .collect();
            on_core.sort_by_key(|x| std::cmp::Reverse(x.0));
            let busy = (s.busy_seconds - b.map_or(0.0, |b| b.busy_seconds)).max(0.0) / secs;
            let row = json!({
                "core": s.core,
                "partitions": s.partitions.len() as u64 + s.unopened_partitions,
                "partition_names": s.partitions.iter().map(|p| format!("{}/{}", p.topic, p.partition)).collect::<Vec<_>>(),
                "bytes_in_per_s": delta(|s| s.record_bytes_in),
                "records_in_per_s": delta(|s| s.records_in),
                "bytes_out_per_s": delta(|s| s.record_bytes_out),
                "records_out_per_s": delta(|s| s.records_out),
                "latency": latency,
                "fsync_p99_ms": latency["fsync"]["p99_ms"].clone(),
                "produce_p99_ms": latency["produce"]["p99_ms"].clone(),
                "queue_depth": s.inbox_depth,
                "requests_in_flight": s.requests_in_flight,
                "busy_fraction": busy.min(1.0),
                "open_files": s.file_pool.open_files,
                "open_files_budget": s.file_pool.max_open_files,
                "reopens_per_s": delta(|s| s.file_pool.reopened),
                "node_resident_bytes_per_partition": resident_bytes
                    .filter(|_| all_partitions > 0)
                    .map(|r| r as f64 / all_partitions as f64),
                "hot_partitions": on_core.iter().take(HOT_PER_CORE).map(|(_, v)| v.clone()).collect::<Vec<_>>(),
            });
            hottest.extend(on_core);
            row
        })
        .collect();
    hottest.sort_by_key(|x| std::cmp::Reverse(x.0));
    hottest.truncate(hot.min(MAX_HOT_PARTITIONS));
    json!({
        "interval_ms": (secs * 1000.0).round() as u64,
        "cores": cores,
        "hot_partitions": hottest.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::PartitionFigures;

    fn partition(topic: &str, bytes_in: u64) -> PartitionFigures {
        let traffic = PartitionTraffic {
            records_in: bytes_in / 100,
            bytes_in,
            ..Default::default()
        };
        PartitionFigures::for_test(topic, 0, traffic)
    }

    /// The interval's percentiles are those of a reference hdrhistogram fed with exactly the
    /// latencies recorded in the interval.
    #[test]
    fn interval_percentiles_match_a_reference_histogram() {
        let mut before = Snapshot::default();
        let mut reference =
            hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for us in 1..=2_000u64 {
            before.produce_latency.record_us(us * 3);
        }
        let mut after = before.clone();
        let mut x: u64 = 12345;
        for _ in 0..50_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let us = 50 + (x >> 33) % 200_000;
            after.produce_latency.record_us(us);
            reference.record(us).unwrap();
        }
        after.record_bytes_in = 1_000_000;
        let v = view(&[before], &[after], 2.0, 5, None);
        let p = &v["cores"][0]["latency"]["produce"];
        assert_eq!(p["count"], 50_000);
        for (field, q) in [("p50_ms", 0.5), ("p99_ms", 0.99), ("p999_ms", 0.999)] {
            let want = reference.value_at_quantile(q) as f64 / 1000.0;
            assert_eq!(p[field].as_f64().unwrap(), want, "{field}");
        }
        assert_eq!(
            p["max_ms"].as_f64().unwrap(),
            reference.max() as f64 / 1000.0
        );
        assert_eq!(v["cores"][0]["bytes_in_per_s"], 500_000.0);
        assert_eq!(v["cores"][0]["produce_p99_ms"], p["p99_ms"]);
        assert!(
            v["cores"][0]["latency"]["fetch"]["p99_ms"].is_null(),
            "nothing fetched"
        );
    }

    #[test]
    fn hot_partitions_rank_by_bytes_across_cores() {
        let mk = |core, parts: Vec<PartitionFigures>| Snapshot {
            core,
            partitions: parts,
            ..Default::default()
        };
        let before = [
            mk(0, vec![partition("a", 1_000), partition("b", 0)]),
            mk(1, vec![partition("c", 50)]),
        ];
        let after = [
            mk(0, vec![partition("a", 1_100), partition("b", 0)]),
            mk(1, vec![partition("c", 9_050)]),
        ];
        let v = view(&before, &after, 1.0, 2, None);
        let hot = v["hot_partitions"].as_array().unwrap();
        assert_eq!(hot.len(), 2, "b moved nothing: not hot");
        assert_eq!(
            (hot[0]["topic"].as_str(), hot[0]["core"].as_u64()),
            (Some("c"), Some(1))
        );
        assert_eq!(hot[0]["bytes_in_per_s"], 9_000.0);
        assert_eq!(hot[1]["topic"], "a");
        assert_eq!(v["cores"][1]["hot_partitions"][0]["topic"], "c");
    }
}
