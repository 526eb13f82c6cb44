//! Per-core counters and histograms, and their Prometheus text rendering. Each core records
//! into its own `CoreMetrics` (plain cells, no atomics); a scrape gathers a `Snapshot` from every
//! core with `invoke_on` and renders them with a `core` label.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::time::Duration;

use engine::latency::{LatencyHistogram, PROMETHEUS_BUCKETS_US};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

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
    /// Cross-core calls this core made: their cost beyond the work (`crate::route`).
    hop_latency: RefCell<LatencyHistogram>,
    /// Cross-core jobs this core ran: how long each waited in its inbox.
    queue_latency: RefCell<LatencyHistogram>,
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
    /// The barrier coordinator of this core and the markers its partitions took (seed 003).
    pub barrier: BarrierMetrics,
}

/// Topics `barrier_markers_written_total` keeps a count for, per core (the topics of barrier
/// groups: at most 100 groups × 100 topics); markers into more are not counted.
pub const MAX_BARRIER_MARKER_TOPICS: usize = 10_000;

/// Seed 003's barrier figures of one core.
#[derive(Default)]
pub struct BarrierMetrics {
    /// Injections started, and cuts published complete or partial.
    pub started: Cell<u64>,
    pub committed: Cell<u64>,
    pub partial: Cell<u64>,
    /// Trigger to cut published.
    pub injection_duration: RefCell<LatencyHistogram>,
    /// Barrier groups this core coordinated at its last tick.
    pub groups_coordinated: Cell<u64>,
    /// Topic → markers written into its partitions on this core.
    markers: RefCell<BTreeMap<String, u64>>,
}

/// What a scrape shows of [`BarrierMetrics`] (plus each coordinated group's latest epoch).
#[derive(Debug, Clone, Default)]
pub struct BarrierFigures {
    pub started: u64,
    pub committed: u64,
    pub partial: u64,
    pub injection_duration: LatencyHistogram,
    pub groups_coordinated: u64,
    pub markers: Vec<(String, u64)>,
    /// (group, latest published epoch) of the groups this core coordinates.
    pub latest_epochs: Vec<(String, i64)>,
}

impl CoreMetrics {
    /// A barrier marker went into a partition of `topic` on this core.
    pub fn count_barrier_marker(&self, topic: &str) {
        let mut m = self.barrier.markers.borrow_mut();
        if let Some(n) = m.get_mut(topic) {
            *n += 1;
        } else if m.len() < MAX_BARRIER_MARKER_TOPICS {
            m.insert(topic.to_string(), 1);
        }
    }

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

    /// A cross-core call this core made took `round_trip`, of which `work` ran on the target.
    pub fn record_hop(&self, round_trip: Duration, work: Duration) {
        self.hop_latency
            .borrow_mut()
            .record(round_trip.saturating_sub(work));
    }

    /// A cross-core job waited `waited` in this core's inbox.
    pub fn record_queued(&self, waited: Duration) {
        self.queue_latency.borrow_mut().record(waited);
    }

    pub fn add(cell: &Cell<u64>, n: u64) {
        cell.set(cell.get().wrapping_add(n));
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
    /// What Produce and Fetch moved through it since it opened on this core.
    pub traffic: PartitionTraffic,
    /// Compacted partitions only: the dirty share of the cleanable bytes, and seconds since
    /// the cleaner last finished a pass over it (`None` before the first).
    pub cleaner: Option<(f64, Option<f64>)>,
}

/// Records and bytes one partition took in and gave out, counted on the core that owns it
/// (the `--hot` view ranks partitions by them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionTraffic {
    pub records_in: u64,
    pub bytes_in: u64,
    pub records_out: u64,
    pub bytes_out: u64,
}

/// [`PartitionTraffic`] as the owning core counts it (plain cells: one core, no atomics).
#[derive(Debug, Default)]
pub struct PartitionCounters {
    records_in: Cell<u64>,
    bytes_in: Cell<u64>,
    records_out: Cell<u64>,
    bytes_out: Cell<u64>,
}

impl PartitionCounters {
    pub fn produced(&self, records: u64, bytes: u64) {
        CoreMetrics::add(&self.records_in, records);
        CoreMetrics::add(&self.bytes_in, bytes);
    }

    pub fn fetched(&self, records: u64, bytes: u64) {
        CoreMetrics::add(&self.records_out, records);
        CoreMetrics::add(&self.bytes_out, bytes);
    }

    pub fn get(&self) -> PartitionTraffic {
        PartitionTraffic {
            records_in: self.records_in.get(),
            bytes_in: self.bytes_in.get(),
            records_out: self.records_out.get(),
            bytes_out: self.bytes_out.get(),
        }
    }
}

#[cfg(test)]
impl PartitionFigures {
    /// A partition of a test snapshot: empty, with `traffic`.
    pub fn for_test(topic: &str, partition: u32, traffic: PartitionTraffic) -> Self {
        Self {
            topic: topic.into(),
            partition,
            log_bytes: 0,
            high_watermark: 0,
            log_start_offset: 0,
            segments: 1,
            cleaner: None,
            traffic,
        }
    }
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
    pub hop_latency: LatencyHistogram,
    pub queue_latency: LatencyHistogram,
    pub cross_core_received: u64,
    pub inbox_depth: u64,
    pub busy_seconds: f64,
    pub groups: u64,
    /// Fetch sessions the core holds, and those evicted for new ones since start.
    pub fetch_sessions: u64,
    pub fetch_session_evictions: u64,
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
    /// Committed offsets of the groups this core coordinates: (group, topic, partition,
    /// offset); consumer lag is a partition's high watermark minus these.
    pub group_offsets: Vec<(String, String, i32, i64)>,
    pub barrier: BarrierFigures,
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
        s.hop_latency = self.hop_latency.borrow().clone();
        s.queue_latency = self.queue_latency.borrow().clone();
        s.recovered_partitions = self.recovered_partitions.get();
        s.recovery_segments_scanned = self.recovery_segments_scanned.get();
        s.recovery_truncations = self.recovery_truncations.get();
        s.cleaner_passes = self.cleaner_passes.get();
        s.cleaner_bytes_read = self.cleaner_bytes_read.get();
        s.cleaner_bytes_written = self.cleaner_bytes_written.get();
        s.cleaner_records_removed = self.cleaner_records_removed.get();
        let b = &self.barrier;
        s.barrier.started = b.started.get();
        s.barrier.committed = b.committed.get();
        s.barrier.partial = b.partial.get();
        s.barrier.injection_duration = b.injection_duration.borrow().clone();
        s.barrier.groups_coordinated = b.groups_coordinated.get();
        s.barrier.markers = b
            .markers
            .borrow()
            .iter()
            .map(|(t, n)| (t.clone(), *n))
            .collect();
    }
}

/// What a sample is: the exposition library encodes each kind its own way.
#[derive(Debug)]
enum Value {
    Counter(f64),
    Gauge(f64),
    Histogram(LatencyHistogram),
}

/// One metric family of an exposition: its samples, each with its labels.
#[derive(Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    samples: Vec<(Vec<(&'static str, String)>, Value)>,
}

/// A whole scrape's families, encoded by `prometheus-client` (a [`Collector`] on a registry
/// made for the scrape: the figures come from the cores' snapshots, not from live metrics).
#[derive(Debug, Default)]
struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    /// Adds a family; a counter's name ends in `_total` (the library writes that suffix).
    fn family(&mut self, name: &'static str, kind: &str, help: &'static str) -> &mut Family {
        let kind = match kind {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            other => unreachable!("metric kind {other}"),
        };
        let name = match kind {
            MetricType::Counter => name
                .strip_suffix("_total")
                .expect("a counter's name ends in _total"),
            _ => name,
        };
        self.families.push(Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        });
        self.families.last_mut().expect("just pushed")
    }
}

impl Family {
    fn sample(&mut self, labels: Vec<(&'static str, String)>, value: f64) {
        let v = match self.kind {
            MetricType::Counter => Value::Counter(value),
            _ => Value::Gauge(value),
        };
        self.samples.push((labels, v));
    }
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // A family with no samples is left out (nothing to say; and the strict parser the
        // CLI and tests read the page with mistakes an empty family for the next one).
        for f in self.families.iter().filter(|f| !f.samples.is_empty()) {
            let mut metric = encoder.encode_descriptor(f.name, f.help, None, f.kind)?;
            for (labels, value) in &f.samples {
                let mut sample = metric.encode_family(labels)?;
                match value {
                    Value::Counter(v) => sample.encode_counter::<NoLabelSet, _, f64>(v, None)?,
                    Value::Gauge(v) => sample.encode_gauge(v)?,
                    Value::Histogram(h) => {
                        // Per-bucket counts with +Inf last (the library accumulates them).
                        let mut buckets = Vec::with_capacity(PROMETHEUS_BUCKETS_US.len() + 1);
                        let mut below = 0;
                        for (le, cumulative) in h.prometheus_buckets() {
                            buckets.push((le, cumulative - below));
                            below = cumulative;
                        }
                        buckets.push((f64::INFINITY, h.count() - below));
                        sample.encode_histogram::<NoLabelSet>(
                            h.sum_us() as f64 / 1e6,
                            h.count(),
                            &buckets,
                            None,
                        )?
                    }
                }
            }
        }
        Ok(())
    }
}

/// The content type of [`render`]'s text.
pub const EXPOSITION_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn core_label(s: &Snapshot) -> Vec<(&'static str, String)> {
    vec![("core", s.core.to_string())]
}

fn partition_labels(s: &Snapshot, p: &PartitionFigures) -> Vec<(&'static str, String)> {
    vec![
        ("core", s.core.to_string()),
        ("topic", p.topic.clone()),
        ("partition", p.partition.to_string()),
    ]
}

/// The latency histograms of a snapshot: (family name, help, the histogram).
type LatencyFamily = (
    &'static str,
    &'static str,
    fn(&Snapshot) -> &LatencyHistogram,
);
pub const LATENCY_FAMILIES: &[LatencyFamily] = &[
    (
        "ringlog_produce_latency_seconds",
        "Produce request latency (includes the fdatasync for acks 1/all).",
        |s| &s.produce_latency,
    ),
    (
        "ringlog_fetch_latency_seconds",
        "Fetch request latency (includes long-poll waits).",
        |s| &s.fetch_latency,
    ),
    (
        "ringlog_fdatasync_latency_seconds",
        "Flush rounds: block writes plus fdatasync.",
        |s| &s.fsync_latency,
    ),
    (
        "ringlog_cross_core_hop_latency_seconds",
        "What a cross-core call costs its caller beyond the work itself: the trip through the target core's inbox and the answer's way back (recorded on the calling core).",
        |s| &s.hop_latency,
    ),
    (
        "ringlog_cross_core_queue_latency_seconds",
        "Time a cross-core job waited in this core's inbox before it started (recorded on the target core).",
        |s| &s.queue_latency,
    ),
];

/// Seed 003's barrier families, named as its origin names them.
fn render_barrier(x: &mut Exposition, snaps: &[Snapshot]) {
    type Get = fn(&BarrierFigures) -> f64;
    let per_core: &[(&str, &str, &str, Get)] = &[
        (
            "barrier_epochs_started_total",
            "counter",
            "Barrier injections started by this core's coordinator.",
            |b| b.started as f64,
        ),
        (
            "barrier_epochs_committed_total",
            "counter",
            "Barrier cuts published complete (every partition took its marker).",
            |b| b.committed as f64,
        ),
        (
            "barrier_epochs_published_partial_total",
            "counter",
            "Barrier cuts published partial (some partitions missing).",
            |b| b.partial as f64,
        ),
        (
            "barrier_groups_coordinated",
            "gauge",
            "Barrier groups this core coordinates.",
            |b| b.groups_coordinated as f64,
        ),
    ];
    for (name, kind, help, get) in per_core {
        let fam = x.family(name, kind, help);
        for s in snaps {
            fam.sample(core_label(s), get(&s.barrier));
        }
    }
    let fam = x.family(
        "barrier_injection_duration_seconds",
        "histogram",
        "Barrier injection time, trigger to cut published.",
    );
    for s in snaps {
        fam.samples.push((
            core_label(s),
            Value::Histogram(s.barrier.injection_duration.clone()),
        ));
    }
    let fam = x.family(
        "barrier_latest_epoch",
        "gauge",
        "The newest published cut's epoch of a barrier group, on its coordinator core.",
    );
    for s in snaps {
        for (group, epoch) in &s.barrier.latest_epochs {
            let labels = vec![("core", s.core.to_string()), ("group", group.clone())];
            fam.sample(labels, *epoch as f64);
        }
    }
    let fam = x.family(
        "barrier_markers_written_total",
        "counter",
        "Barrier markers written into the partitions of a topic on this core.",
    );
    for s in snaps {
        for (topic, n) in &s.barrier.markers {
            let labels = vec![("core", s.core.to_string()), ("topic", topic.clone())];
            fam.sample(labels, *n as f64);
        }
    }
}

/// Renders snapshots of every core as OpenMetrics text (which Prometheus reads), through
/// `prometheus-client`.
pub fn render(snaps: &[Snapshot]) -> String {
    let mut x = Exposition::default();
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
            "ringlog_fetch_sessions",
            "gauge",
            "Incremental fetch sessions the core holds (Kafka's NumIncrementalFetchSessions).",
            |s| s.fetch_sessions as f64,
        ),
        (
            "ringlog_fetch_session_evictions_total",
            "counter",
            "Fetch sessions the core evicted to make room for new ones.",
            |s| s.fetch_session_evictions as f64,
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
        let fam = x.family(name, kind, help);
        for s in snaps {
            fam.sample(core_label(s), get(s));
        }
    }
    let fam = x.family(
        "ringlog_requests_total",
        "counter",
        "Requests answered, by API and Kafka error code.",
    );
    for s in snaps {
        for (api, code, n) in &s.requests {
            let labels = vec![
                ("core", s.core.to_string()),
                ("api", api.clone()),
                ("error_code", code.to_string()),
            ];
            fam.sample(labels, *n as f64);
        }
    }
    for (name, help, get) in LATENCY_FAMILIES {
        let fam = x.family(name, "histogram", help);
        for s in snaps {
            fam.samples
                .push((core_label(s), Value::Histogram(get(s).clone())));
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
            "gauge",
            "Parent records aged out before the cursor copied them (a count since the cursor opened; DESIGN.md names it without _total).",
            |c| c.dropped as f64,
        ),
    ];
    for (name, kind, help, get) in fanout {
        let fam = x.family(name, kind, help);
        for s in snaps {
            for c in &s.cursors {
                let labels = vec![
                    ("core", s.core.to_string()),
                    ("parent", c.parent.clone()),
                    ("child", c.child.clone()),
                    ("partition", c.partition.to_string()),
                ];
                fam.sample(labels, get(c));
            }
        }
    }
    render_barrier(&mut x, snaps);
    let fam = x.family(
        "ringlog_consumer_group_committed_offset",
        "gauge",
        "A group's committed offset of one partition, on the group's coordinator core (consumer lag = ringlog_partition_high_watermark minus this).",
    );
    for s in snaps {
        for (group, topic, partition, offset) in &s.group_offsets {
            let labels = vec![
                ("core", s.core.to_string()),
                ("group", group.clone()),
                ("topic", topic.clone()),
                ("partition", partition.to_string()),
            ];
            fam.sample(labels, *offset as f64);
        }
    }
    // Per partition; a figure a partition lacks (the cleaner's, when it is not compacted)
    // has no sample.
    type PartitionGet = fn(&PartitionFigures) -> Option<f64>;
    let per_partition: &[(&str, &str, &str, PartitionGet)] = &[
        (
            "ringlog_partition_log_bytes",
            "gauge",
            "Bytes of log data of one partition.",
            |p| Some(p.log_bytes as f64),
        ),
        (
            "ringlog_partition_high_watermark",
            "gauge",
            "High watermark (next durable offset) of one partition.",
            |p| Some(p.high_watermark as f64),
        ),
        (
            "ringlog_partition_record_bytes_in_total",
            "counter",
            "Record batch bytes Produce appended to one partition since it opened on its core.",
            |p| Some(p.traffic.bytes_in as f64),
        ),
        (
            "ringlog_partition_record_bytes_out_total",
            "counter",
            "Record batch bytes Fetch returned from one partition since it opened on its core.",
            |p| Some(p.traffic.bytes_out as f64),
        ),
        (
            "ringlog_partition_cleaner_dirty_ratio",
            "gauge",
            "Dirty (not yet cleaned) share of a compacted partition's cleanable bytes.",
            |p| p.cleaner.map(|c| c.0),
        ),
        (
            "ringlog_partition_cleaner_seconds_since_last_clean",
            "gauge",
            "Seconds since the cleaner last finished a pass over a compacted partition.",
            |p| p.cleaner.and_then(|c| c.1),
        ),
    ];
    for (name, kind, help, get) in per_partition {
        let fam = x.family(name, kind, help);
        for s in snaps {
            for p in &s.partitions {
                if let Some(v) = get(p) {
                    fam.sample(partition_labels(s, p), v);
                }
            }
        }
    }
    if let Some(rss) = process_resident_bytes() {
        let fam = x.family(
            "ringlog_process_resident_bytes",
            "gauge",
            "Resident memory of the broker process (what each partition costs: divide by ringlog_partitions).",
        );
        fam.sample(Vec::new(), rss as f64);
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(x));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String does not fail");
    out
}

/// The process's resident set in bytes (`/proc/self/statm`), if readable.
pub fn process_resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf with a valid name has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmetrics_parser::OpenMetricsValue;

    /// Two cores' snapshots rendered, then read back by the strict OpenMetrics parser: every
    /// family is there with its type, counters and gauges carry their values, and each
    /// histogram's buckets are those of the hdrhistogram it was derived from.
    #[test]
    fn the_exposition_parses_strictly_and_carries_the_figures() {
        let snaps: Vec<Snapshot> = (0..2)
            .map(|core| {
                let mut s = Snapshot {
                    core,
                    records_in: 100 + core as u64,
                    requests: vec![("Produce".into(), 0, 7), ("Fetch".into(), 3, 1)],
                    partitions: vec![PartitionFigures {
                        topic: "t\"q".into(),
                        partition: core as u32,
                        log_bytes: 4096,
                        high_watermark: 10,
                        log_start_offset: 0,
                        segments: 1,
                        cleaner: Some((0.5, None)),
                        traffic: PartitionTraffic {
                            bytes_in: 999,
                            ..Default::default()
                        },
                    }],
                    cursors: vec![CursorFigures {
                        parent: "p".into(),
                        partition: 0,
                        child: "c".into(),
                        lag_messages: 5,
                        due_lag_ms: 1500,
                        committed: 9,
                        dropped: 1,
                    }],
                    group_offsets: vec![("g".into(), "t\"q".into(), 0, 42)],
                    ..Default::default()
                };
                for us in [30, 70, 70, 400, 2_000, 20_000_000] {
                    s.fsync_latency.record_us(us);
                }
                s
            })
            .collect();
        let text = render(&snaps);
        assert!(text.ends_with("# EOF\n"), "{text}");
        let page = openmetrics_parser::openmetrics::parse_openmetrics(&text)
            .unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        let family = |name: &str| {
            page.families
                .get(name)
                .unwrap_or_else(|| panic!("{name} missing\n{text}"))
        };
        let records = family("ringlog_records_in");
        let mut values: Vec<f64> = records
            .iter_samples()
            .map(|s| match &s.value {
                OpenMetricsValue::Counter(c) => c.value.as_f64(),
                v => panic!("a counter, not {v:?}"),
            })
            .collect();
        values.sort_by(f64::total_cmp);
        assert_eq!(values, vec![100.0, 101.0]);
        assert_eq!(family("ringlog_requests").iter_samples().count(), 4);
        let committed = family("ringlog_consumer_group_committed_offset");
        assert!(committed
            .iter_samples()
            .all(|s| matches!(&s.value, OpenMetricsValue::Gauge(g) if g.as_f64() == 42.0)));
        assert!(matches!(
            family("fanout_child_dropped_messages")
                .iter_samples()
                .next()
                .unwrap()
                .value,
            OpenMetricsValue::Gauge(_)
        ));
        let lag = family("fanout_due_lag_seconds")
            .iter_samples()
            .next()
            .unwrap();
        assert!(matches!(&lag.value, OpenMetricsValue::Gauge(g) if g.as_f64() == 1.5));
        let topic = family("ringlog_partition_log_bytes")
            .iter_samples()
            .next()
            .unwrap();
        assert_eq!(
            topic.get_labelset().unwrap().get_label_value("topic"),
            Some("t\"q"),
            "label values are escaped and read back"
        );
        for (name, _, get) in LATENCY_FAMILIES {
            let f = family(name);
            for sample in f.iter_samples() {
                let OpenMetricsValue::Histogram(h) = &sample.value else {
                    panic!("{name} is a histogram");
                };
                let core: usize = sample
                    .get_labelset()
                    .unwrap()
                    .get_label_value("core")
                    .unwrap()
                    .parse()
                    .unwrap();
                let want = get(&snaps[core]);
                assert_eq!(h.count, Some(want.count()));
                let got: Vec<(f64, u64)> = h
                    .buckets
                    .iter()
                    .map(|b| (b.upper_bound, b.count.as_f64() as u64))
                    .collect();
                let mut expected = want.prometheus_buckets();
                expected.push((f64::INFINITY, want.count()));
                assert_eq!(got, expected, "{name} buckets");
            }
        }
        let fsync = family("ringlog_fdatasync_latency_seconds")
            .iter_samples()
            .next()
            .unwrap();
        let OpenMetricsValue::Histogram(h) = &fsync.value else {
            unreachable!()
        };
        assert_eq!(h.count, Some(6));
        assert_eq!(
            h.buckets[0].count.as_f64(),
            1.0,
            "30 µs is at or below 50 µs"
        );
        assert_eq!(
            h.buckets[1].count.as_f64(),
            3.0,
            "and 70 µs twice below 100 µs"
        );
    }
}

#[cfg(test)]
mod dashboard_tests {
    use super::*;

    /// Every metric the Grafana dashboard (docs/grafana) queries is one the broker exposes,
    /// so the dashboard cannot drift from the exposition.
    #[test]
    fn the_dashboard_queries_only_exposed_metrics() {
        let dashboard = include_str!("../../docs/grafana/ringlog-dashboard.json");
        let v: serde_json::Value = serde_json::from_str(dashboard).expect("the dashboard is JSON");
        let mut s = Snapshot::default();
        s.partitions.push(PartitionFigures::for_test(
            "t",
            0,
            PartitionTraffic::default(),
        ));
        s.cursors.push(CursorFigures {
            parent: "p".into(),
            partition: 0,
            child: "c".into(),
            lag_messages: 0,
            due_lag_ms: 0,
            committed: 0,
            dropped: 0,
        });
        s.group_offsets.push(("g".into(), "t".into(), 0, 0));
        s.requests.push(("Produce".into(), 0, 1));
        let page = render(&[s]);
        let names = regex::Regex::new(r"(?:ringlog|fanout)_[a-z_]+").unwrap();
        let mut queried = 0;
        for panel in v["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().unwrap();
                for name in names.find_iter(expr) {
                    queried += 1;
                    let sample = format!("\n{}", name.as_str());
                    assert!(
                        page.contains(&format!("{sample}{{"))
                            || page.contains(&format!("{sample} ")),
                        "panel {:?} queries {}, which /metrics does not expose",
                        panel["title"],
                        name.as_str()
                    );
                }
            }
        }
        assert!(
            queried >= 20,
            "the dashboard queries the metrics ({queried})"
        );
    }
}
