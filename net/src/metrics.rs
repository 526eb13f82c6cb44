//! Per-core counters and histograms, and their Prometheus text rendering. Each core records
//! into its own `CoreMetrics` (plain cells, no atomics); a scrape gathers a `Snapshot` from every
//! core with `invoke_on` and renders them with a `core` label.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use engine::latency::{LatencyHistogram, LATENCY_BUCKETS_US};

#[derive(Default)]
pub struct CoreMetrics {
    pub connections_open: Cell<i64>,
    pub connections_total: Cell<u64>,
    /// Connections closed at accept (max-connections or max-connections-per-ip).
    pub connections_refused: Cell<u64>,
    pub requests_in_flight: Cell<i64>,
    pub request_bytes: Cell<u64>,
    pub response_bytes: Cell<u64>,
    pub records_in: Cell<u64>,
    pub record_bytes_in: Cell<u64>,
    pub records_out: Cell<u64>,
    pub record_bytes_out: Cell<u64>,
    /// (API name, error code) → requests answered.
    requests: RefCell<BTreeMap<(&'static str, i16), u64>>,
    produce_latency: RefCell<LatencyHistogram>,
    fetch_latency: RefCell<LatencyHistogram>,
    pub recovered_partitions: Cell<u64>,
    pub recovery_segments_scanned: Cell<u64>,
    pub recovery_truncations: Cell<u64>,
    /// Executor run time accumulated over scrapes (glommio resets its counter when read).
    pub busy_seconds: Cell<f64>,
    /// The core's log cleaner: passes run, bytes it read and wrote, records it removed.
    pub cleaner_passes: Cell<u64>,
    pub cleaner_bytes_read: Cell<u64>,
    pub cleaner_bytes_written: Cell<u64>,
    pub cleaner_records_removed: Cell<u64>,
}

impl CoreMetrics {
    pub fn count_request(&self, api: &'static str, error_code: i16, latency: Duration) {
        *self
            .requests
            .borrow_mut()
            .entry((api, error_code))
            .or_default() += 1;
        match api {
            "Produce" => self.produce_latency.borrow_mut().record(latency),
            "Fetch" => self.fetch_latency.borrow_mut().record(latency),
            _ => {}
        }
    }

    pub fn add(cell: &Cell<u64>, n: u64) {
        cell.set(cell.get() + n);
    }
}

/// One partition's figures in a snapshot.
#[derive(Debug, Clone)]
pub struct PartitionFigures {
    pub topic: String,
    pub partition: u32,
    pub log_bytes: u64,
    pub high_watermark: u64,
    pub log_start_offset: u64,
    pub segments: usize,
    /// Compacted partitions only: the dirty share of the cleanable bytes, and seconds since
    /// the cleaner last finished a pass over it (`None` before the first).
    pub cleaner: Option<(f64, Option<f64>)>,
}

/// One fan-out cursor's figures in a snapshot.
#[derive(Debug, Clone)]
pub struct CursorFigures {
    pub parent: String,
    pub partition: u32,
    pub child: String,
    pub lag_messages: u64,
    pub due_lag_ms: u64,
    pub committed: u64,
    pub dropped: u64,
}

/// Everything a scrape reads from one core (crosses threads).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub core: usize,
    pub connections_open: i64,
    pub connections_total: u64,
    pub connections_refused: u64,
    pub requests_in_flight: i64,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub records_in: u64,
    pub record_bytes_in: u64,
    pub records_out: u64,
    pub record_bytes_out: u64,
    pub requests: Vec<(String, i16, u64)>,
    pub produce_latency: LatencyHistogram,
    pub fetch_latency: LatencyHistogram,
    pub fsync_latency: LatencyHistogram,
    pub cross_core_received: u64,
    pub inbox_depth: u64,
    pub busy_seconds: f64,
    pub groups: u64,
    pub recovered_partitions: u64,
    pub recovery_segments_scanned: u64,
    pub recovery_truncations: u64,
    pub cleaner_passes: u64,
    pub cleaner_bytes_read: u64,
    pub cleaner_bytes_written: u64,
    pub cleaner_records_removed: u64,
    pub tail_cache: engine::tail_cache::TailCacheStats,
    /// Operations the core's own io_uring submitted (0 on `storage-io = glommio`).
    pub storage_ring_ops: u64,
    /// The core's open-file budget (`max-open-files`' share) and what it did.
    pub file_pool: engine::io::FilePoolStats,
    pub partitions: Vec<PartitionFigures>,
    /// Partitions assigned to the core and not open yet (`crate::opening`).
    pub unopened_partitions: u64,
    pub cursors: Vec<CursorFigures>,
}

impl CoreMetrics {
    pub fn snapshot_into(&self, s: &mut Snapshot) {
        s.connections_open = self.connections_open.get();
        s.connections_total = self.connections_total.get();
        s.connections_refused = self.connections_refused.get();
        s.requests_in_flight = self.requests_in_flight.get();
        s.request_bytes = self.request_bytes.get();
        s.response_bytes = self.response_bytes.get();
        s.records_in = self.records_in.get();
        s.record_bytes_in = self.record_bytes_in.get();
        s.records_out = self.records_out.get();
        s.record_bytes_out = self.record_bytes_out.get();
        s.requests = self
            .requests
            .borrow()
            .iter()
            .map(|((api, code), n)| (api.to_string(), *code, *n))
            .collect();
        s.produce_latency = self.produce_latency.borrow().clone();
        s.fetch_latency = self.fetch_latency.borrow().clone();
        s.recovered_partitions = self.recovered_partitions.get();
        s.recovery_segments_scanned = self.recovery_segments_scanned.get();
        s.recovery_truncations = self.recovery_truncations.get();
        s.cleaner_passes = self.cleaner_passes.get();
        s.cleaner_bytes_read = self.cleaner_bytes_read.get();
        s.cleaner_bytes_written = self.cleaner_bytes_written.get();
        s.cleaner_records_removed = self.cleaner_records_removed.get();
    }
}

fn label_escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, String)], value: impl std::fmt::Display) {
        let l: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", label_escape(v)))
            .collect();
        let _ = writeln!(self.out, "{name}{{{}}} {value}", l.join(","));
    }

    fn histogram(&mut self, name: &str, core: usize, h: &LatencyHistogram) {
        let mut cumulative = 0;
        for (i, c) in h.counts.iter().enumerate() {
            cumulative += c;
            let le = match LATENCY_BUCKETS_US.get(i) {
                Some(us) => format!("{}", *us as f64 / 1e6),
                None => "+Inf".to_string(),
            };
            self.sample(
                &format!("{name}_bucket"),
                &[("core", core.to_string()), ("le", le)],
                cumulative,
            );
        }
        self.sample(
            &format!("{name}_sum"),
            &[("core", core.to_string())],
            h.sum_us as f64 / 1e6,
        );
        self.sample(
            &format!("{name}_count"),
            &[("core", core.to_string())],
            h.count,
        );
    }
}

/// Renders snapshots of every core in the Prometheus text exposition format (0.0.4).
pub fn render(snaps: &[Snapshot]) -> String {
    let mut out = String::new();
    let mut f = Family { out: &mut out };
    type Get = fn(&Snapshot) -> f64;
    let simple: &[(&str, &str, &str, Get)] = &[
        (
            "ringlog_connections",
            "gauge",
            "Open client connections.",
            |s| s.connections_open as f64,
        ),
        (
            "ringlog_connections_accepted_total",
            "counter",
            "Client connections accepted.",
            |s| s.connections_total as f64,
        ),
        (
            "ringlog_connections_refused_total",
            "counter",
            "Client connections closed at accept by max-connections or max-connections-per-ip.",
            |s| s.connections_refused as f64,
        ),
        (
            "ringlog_requests_in_flight",
            "gauge",
            "Requests read and not yet answered.",
            |s| s.requests_in_flight as f64,
        ),
        (
            "ringlog_request_bytes_total",
            "counter",
            "Bytes of request frames read.",
            |s| s.request_bytes as f64,
        ),
        (
            "ringlog_response_bytes_total",
            "counter",
            "Bytes of response frames written.",
            |s| s.response_bytes as f64,
        ),
        (
            "ringlog_records_in_total",
            "counter",
            "Records appended by Produce.",
            |s| s.records_in as f64,
        ),
        (
            "ringlog_record_bytes_in_total",
            "counter",
            "Record batch bytes appended by Produce.",
            |s| s.record_bytes_in as f64,
        ),
        (
            "ringlog_records_out_total",
            "counter",
            "Records returned by Fetch.",
            |s| s.records_out as f64,
        ),
        (
            "ringlog_record_bytes_out_total",
            "counter",
            "Record batch bytes returned by Fetch.",
            |s| s.record_bytes_out as f64,
        ),
        (
            "ringlog_cross_core_messages_total",
            "counter",
            "Cross-core jobs this core received: requests forwarded from the core their connection is on (with --core-direct on, only clients that ignore partition leaders), admin fan-outs, metrics scrapes.",
            |s| s.cross_core_received as f64,
        ),
        (
            "ringlog_cross_core_queue_depth",
            "gauge",
            "Jobs waiting in this core's inbox.",
            |s| s.inbox_depth as f64,
        ),
        (
            "ringlog_core_busy_seconds_total",
            "counter",
            "Time the core's executor spent running tasks.",
            |s| s.busy_seconds,
        ),
        (
            "ringlog_partitions",
            "gauge",
            "Partitions owned by the core, open or not yet opened.",
            |s| (s.partitions.len() as u64 + s.unopened_partitions) as f64,
        ),
        (
            "ringlog_partitions_unopened",
            "gauge",
            "Partitions owned by the core and not opened yet since start (the background pass or a first request opens them).",
            |s| s.unopened_partitions as f64,
        ),
        (
            "ringlog_log_bytes",
            "gauge",
            "Bytes of log data of the core's partitions.",
            |s| s.partitions.iter().map(|p| p.log_bytes).sum::<u64>() as f64,
        ),
        (
            "ringlog_consumer_groups",
            "gauge",
            "Consumer groups coordinated by the core.",
            |s| s.groups as f64,
        ),
        (
            "ringlog_recovery_partitions_total",
            "counter",
            "Partitions opened (recovered) by the core.",
            |s| s.recovered_partitions as f64,
        ),
        (
            "ringlog_cleaner_passes_total",
            "counter",
            "Passes of the core's log cleaner over compacted partitions.",
            |s| s.cleaner_passes as f64,
        ),
        (
            "ringlog_cleaner_read_bytes_total",
            "counter",
            "Log bytes the core's cleaner read.",
            |s| s.cleaner_bytes_read as f64,
        ),
        (
            "ringlog_cleaner_written_bytes_total",
            "counter",
            "Cleaned segment bytes the core's cleaner wrote.",
            |s| s.cleaner_bytes_written as f64,
        ),
        (
            "ringlog_cleaner_removed_records_total",
            "counter",
            "Records the core's cleaner removed (superseded, expired tombstones, keyless).",
            |s| s.cleaner_records_removed as f64,
        ),
        (
            "ringlog_tail_cache_hits_total",
            "counter",
            "Reads at a log's tail served from the core's tail cache.",
            |s| s.tail_cache.hits as f64,
        ),
        (
            "ringlog_tail_cache_hit_bytes_total",
            "counter",
            "Bytes served from the core's tail cache.",
            |s| s.tail_cache.hit_bytes as f64,
        ),
        (
            "ringlog_tail_cache_misses_total",
            "counter",
            "Reads of an active segment that went to disk (not, or no longer, cached).",
            |s| s.tail_cache.misses as f64,
        ),
        (
            "ringlog_tail_cache_bytes",
            "gauge",
            "Bytes the core's tail cache holds.",
            |s| s.tail_cache.held_bytes as f64,
        ),
        (
            "ringlog_storage_ring_ops_total",
            "counter",
            "Operations submitted to the core's own io_uring (storage-io io-uring).",
            |s| s.storage_ring_ops as f64,
        ),
        (
            "ringlog_open_files",
            "gauge",
            "Data files the core holds open (its share of max-open-files bounds them).",
            |s| s.file_pool.open_files as f64,
        ),
        (
            "ringlog_open_files_budget",
            "gauge",
            "Data files the core may hold open at once.",
            |s| s.file_pool.max_open_files as f64,
        ),
        (
            "ringlog_open_files_closed_for_budget_total",
            "counter",
            "Idle data files the core closed to stay within its open-file budget.",
            |s| s.file_pool.closed_for_budget as f64,
        ),
        (
            "ringlog_open_files_reopened_total",
            "counter",
            "Data files the core opened again after closing them for the budget.",
            |s| s.file_pool.reopened as f64,
        ),
        (
            "ringlog_open_files_over_budget_total",
            "counter",
            "Opens that found every open file busy and went past the budget for the moment.",
            |s| s.file_pool.over_budget as f64,
        ),
        (
            "ringlog_recovery_segments_scanned_total",
            "counter",
            "Segments scanned by crash recovery.",
            |s| s.recovery_segments_scanned as f64,
        ),
        (
            "ringlog_recovery_truncations_total",
            "counter",
            "Truncations made by crash recovery.",
            |s| s.recovery_truncations as f64,
        ),
    ];
    for (name, kind, help, get) in simple {
        f.head(name, kind, help);
        for s in snaps {
            f.sample(name, &[("core", s.core.to_string())], get(s));
        }
    }
    f.head(
        "ringlog_requests_total",
        "counter",
        "Requests answered, by API and Kafka error code.",
    );
    for s in snaps {
        for (api, code, n) in &s.requests {
            f.sample(
                "ringlog_requests_total",
                &[
                    ("core", s.core.to_string()),
                    ("api", api.clone()),
                    ("error_code", code.to_string()),
                ],
                n,
            );
        }
    }
    for (name, help, get) in [
        (
            "ringlog_produce_latency_seconds",
            "Produce request latency (includes the fdatasync for acks 1/all).",
            (|s: &Snapshot| &s.produce_latency) as fn(&Snapshot) -> &LatencyHistogram,
        ),
        (
            "ringlog_fetch_latency_seconds",
            "Fetch request latency (includes long-poll waits).",
            |s: &Snapshot| &s.fetch_latency,
        ),
        (
            "ringlog_fdatasync_latency_seconds",
            "Flush rounds: block writes plus fdatasync.",
            |s: &Snapshot| &s.fsync_latency,
        ),
    ] {
        f.head(name, "histogram", help);
        for s in snaps {
            f.histogram(name, s.core, get(s));
        }
    }
    type CursorGet = fn(&CursorFigures) -> f64;
    let fanout: &[(&str, &str, &str, CursorGet)] = &[
        (
            "fanout_lag_messages",
            "gauge",
            "Parent high watermark minus the fan-out cursor.",
            |c| c.lag_messages as f64,
        ),
        (
            "fanout_due_lag_seconds",
            "gauge",
            "How far a delay cursor is behind its due frontier.",
            |c| c.due_lag_ms as f64 / 1e3,
        ),
        (
            "fanout_committed_total",
            "counter",
            "Parent records committed to the child.",
            |c| c.committed as f64,
        ),
        (
            "fanout_child_dropped_messages",
            "counter",
            "Parent records aged out before the cursor copied them.",
            |c| c.dropped as f64,
        ),
    ];
    for (name, kind, help, get) in fanout {
        f.head(name, kind, help);
        for s in snaps {
            for c in &s.cursors {
                f.sample(
                    name,
                    &[
                        ("core", s.core.to_string()),
                        ("parent", c.parent.clone()),
                        ("child", c.child.clone()),
                        ("partition", c.partition.to_string()),
                    ],
                    get(c),
                );
            }
        }
    }
    f.head(
        "ringlog_partition_log_bytes",
        "gauge",
        "Bytes of log data of one partition.",
    );
    for s in snaps {
        for p in &s.partitions {
            f.sample(
                "ringlog_partition_log_bytes",
                &[
                    ("core", s.core.to_string()),
                    ("topic", p.topic.clone()),
                    ("partition", p.partition.to_string()),
                ],
                p.log_bytes,
            );
        }
    }
    type Cleaner = fn(&(f64, Option<f64>)) -> Option<f64>;
    let cleaner: [(&str, &str, Cleaner); 2] = [
        (
            "ringlog_partition_cleaner_dirty_ratio",
            "Dirty (not yet cleaned) share of a compacted partition's cleanable bytes.",
            |c| Some(c.0),
        ),
        (
            "ringlog_partition_cleaner_seconds_since_last_clean",
            "Seconds since the cleaner last finished a pass over a compacted partition.",
            |c| c.1,
        ),
    ];
    for (name, help, get) in cleaner {
        f.head(name, "gauge", help);
        for s in snaps {
            for p in &s.partitions {
                if let Some(v) = p.cleaner.as_ref().and_then(get) {
                    f.sample(
                        name,
                        &[
                            ("core", s.core.to_string()),
                            ("topic", p.topic.clone()),
                            ("partition", p.partition.to_string()),
                        ],
                        v,
                    );
                }
            }
        }
    }
    f.head(
        "ringlog_partition_high_watermark",
        "gauge",
        "High watermark (next durable offset) of one partition.",
    );
    for s in snaps {
        for p in &s.partitions {
            f.sample(
                "ringlog_partition_high_watermark",
                &[
                    ("core", s.core.to_string()),
                    ("topic", p.topic.clone()),
                    ("partition", p.partition.to_string()),
                ],
                p.high_watermark,
            );
        }
    }
    if let Some(rss) = process_resident_bytes() {
        f.head(
            "ringlog_process_resident_bytes",
            "gauge",
            "Resident memory of the broker process (what each partition costs: divide by ringlog_partitions).",
        );
        let _ = writeln!(f.out, "ringlog_process_resident_bytes {rss}");
    }
    out
}

/// The process's resident set in bytes (`/proc/self/statm`), if readable.
fn process_resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf with a valid name has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}
