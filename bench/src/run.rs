//! One run of a workload against one broker: topics, producers, consumers, and the collector
//! that turns the workers' interval histograms into interval and whole-run figures.
//!
//! Workers are threads, each with its own histograms and counters behind its own mutex; the
//! collector (the calling thread) swaps their interval histograms out once per interval and
//! merges them. Nothing is shared between workers.
//!
//! Coordinated omission: at a fixed rate each producer sends record i at the intended time
//! `start + i / rate` and records publish latency as ack time − intended time, whatever made the
//! send late. The intended time travels in the payload (bytes 8..16, after an 8-byte magic), and
//! end-to-end latency is consume time − intended time (one process, one monotonic clock).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::Serialize;

use crate::stats::{self, Percentiles};
use crate::workload::{KeyDistributor, Workload, HEADER_LEN};

const MAGIC: [u8; 8] = *b"rlbench1";

/// How consumers get their partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ConsumerMode {
    /// Kafka consumer groups (one group per subscription), as OMB does.
    Subscribe,
    /// Manual assignment: partitions spread over a subscription's consumers by index.
    Assign,
}

/// Client settings shared by every run of an invocation.
#[derive(Clone, Debug, Serialize)]
pub struct ClientOptions {
    pub acks: String,
    pub linger_ms: f64,
    pub batch_size: usize,
    pub compression: String,
    pub idempotence: bool,
    /// Records per transaction (0: not transactional).
    pub transaction_records: u64,
    /// Records sent and not yet acknowledged, per producer.
    pub max_inflight: u64,
    pub consumer_mode: ConsumerMode,
    /// Replicas of each topic a run creates.
    pub replication_factor: i32,
    pub producer_config: Vec<(String, String)>,
    pub consumer_config: Vec<(String, String)>,
    /// Properties of every client (admin, producers, consumers): security settings.
    pub client_config: Vec<(String, String)>,
    #[serde(skip)]
    pub interval: Duration,
    #[serde(skip)]
    pub drain_timeout: Duration,
    #[serde(skip)]
    pub ready_timeout: Duration,
    #[serde(skip)]
    pub topic_create_timeout: Duration,
    pub topic_prefix: String,
    pub keep_topics: bool,
    pub progress: bool,
}

/// One run: a workload against one broker.
pub struct RunSpec {
    pub label: String,
    pub address: String,
    pub round: u32,
    pub workload: Workload,
    pub duration: Duration,
    pub warmup: Duration,
    pub payloads: Arc<Vec<Vec<u8>>>,
    pub opts: ClientOptions,
    pub stats_url: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Backlog,
    Warmup,
    Measure,
    Drain,
}

/// Throughput over a span: records and MiB a second, and the errors counted in it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Rates {
    pub publish_rate: f64,
    pub publish_mb_s: f64,
    pub consume_rate: f64,
    pub consume_mb_s: f64,
    pub publish_errors: u64,
    pub consume_errors: u64,
}

impl Rates {
    /// The rates of what `t` counted in `secs` seconds (0 when `secs` is not positive).
    fn over(t: &Totals, secs: f64) -> Rates {
        let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        Rates {
            publish_rate: per_s(t.acked),
            publish_mb_s: per_s(t.acked_bytes) / 1048576.0,
            consume_rate: per_s(t.consumed),
            consume_mb_s: per_s(t.consumed_bytes) / 1048576.0,
            publish_errors: t.pub_errors,
            consume_errors: t.cons_errors,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct IntervalRecord {
    /// Seconds since the producers started (end of this interval).
    pub t_s: f64,
    pub secs: f64,
    pub phase: Phase,
    #[serde(flatten)]
    pub rates: Rates,
    pub backlog: i64,
    pub publish_p50_ms: f64,
    pub publish_p99_ms: f64,
    pub publish_p999_ms: f64,
    pub publish_max_ms: f64,
    pub e2e_p50_ms: f64,
    pub e2e_p99_ms: f64,
    pub e2e_max_ms: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Counts {
    /// Records handed to the client library.
    pub sent: u64,
    /// Records acknowledged by the broker.
    pub acked: u64,
    pub publish_errors: u64,
    /// Records consumed (all subscriptions together).
    pub consumed: u64,
    /// What the subscriptions should consume: acked × subscriptions per topic.
    pub expected_consumed: u64,
    pub consume_errors: u64,
    /// Consumed records without ringlog-bench's header (not counted in latency).
    pub foreign_records: u64,
    pub last_publish_error: Option<String>,
    pub last_consume_error: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Seconds of the measurement phase (after warm-up).
    pub measured_secs: f64,
    #[serde(flatten)]
    pub rates: Rates,
    /// Largest backlog seen after warm-up, records.
    pub max_backlog: i64,
    pub publish_latency: Percentiles,
    pub end_to_end_latency: Percentiles,
    /// consumerBacklogSizeGB: seconds from the consumers' start until the backlog was drained.
    pub backlog_drain_secs: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct BrokerStats {
    pub url: Option<String>,
    pub before: Option<String>,
    pub after: Option<String>,
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub broker: String,
    pub address: String,
    pub round: u32,
    pub topics: Vec<String>,
    pub counts: Counts,
    pub summary: Summary,
    pub intervals: Vec<IntervalRecord>,
    pub broker_stats: BrokerStats,
    pub notes: Vec<String>,
}

/// A finished run: its result and its histograms (for merging, plots and the interval log).
pub struct RunOutcome {
    pub result: RunResult,
    pub publish: Histogram<u64>,
    pub e2e: Histogram<u64>,
    /// (start since the run's epoch, length, publish, e2e) per interval.
    pub interval_hists: Vec<(Duration, Duration, Histogram<u64>, Histogram<u64>)>,
    /// Wall-clock time at the run's epoch.
    pub started_at: std::time::SystemTime,
}

// ------------------------------------------------------------------------------------------
// Workers
// ------------------------------------------------------------------------------------------

struct ProdStats {
    hist: Histogram<u64>,
    sent: u64,
    acked: u64,
    acked_bytes: u64,
    errors: u64,
    last_error: Option<String>,
    inflight: u64,
}

struct ProdShared {
    stats: Mutex<ProdStats>,
    acked_cv: Condvar,
}

struct ProdCtx {
    shared: Arc<ProdShared>,
    epoch: Instant,
}

impl ClientContext for ProdCtx {}

impl ProducerContext for ProdCtx {
    /// The intended send time, ns since the run's epoch.
    type DeliveryOpaque = usize;

    fn delivery(&self, r: &DeliveryResult<'_>, intended_ns: usize) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        let lat_us = now.saturating_sub(intended_ns as u64) / 1000;
        let mut s = self.shared.stats.lock().unwrap();
        s.inflight = s.inflight.saturating_sub(1);
        match r {
            Ok(m) => {
                s.acked += 1;
                s.acked_bytes += m.payload_len() as u64;
                stats::record(&mut s.hist, lat_us);
            }
            Err((e, _)) => {
                s.errors += 1;
                s.last_error = Some(e.to_string());
            }
        }
        drop(s);
        self.shared.acked_cv.notify_one();
    }
}

struct ConsStats {
    hist: Histogram<u64>,
    consumed: u64,
    bytes: u64,
    errors: u64,
    foreign: u64,
    last_error: Option<String>,
}

struct ConsShared {
    stats: Mutex<ConsStats>,
    /// Partitions currently assigned to this consumer.
    assigned: AtomicUsize,
    /// (topic index, subscription index)
    group: (u32, u32),
}

fn base_config(address: &str, common: &[(String, String)]) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", address)
        .set("client.id", "ringlog-bench")
        .set("socket.nagle.disable", "true");
    for (k, v) in common {
        c.set(k, v);
    }
    c
}

/// `transactional_id`: set when the run is transactional (`transaction_records` > 0).
fn producer_config(spec: &RunSpec, transactional_id: Option<&str>) -> ClientConfig {
    let o = &spec.opts;
    let mut c = base_config(&spec.address, &spec.opts.client_config);
    if let Some(id) = transactional_id {
        // librdkafka wants message.timeout.ms (120 s below) within the transaction timeout.
        c.set("transactional.id", id)
            .set("transaction.timeout.ms", "180000");
    }
    c.set("acks", &o.acks)
        .set("linger.ms", o.linger_ms.to_string())
        .set("batch.size", o.batch_size.to_string())
        .set("compression.type", &o.compression)
        .set("enable.idempotence", o.idempotence.to_string())
        // Java clients' partitioner, as OMB's Kafka driver uses.
        .set("partitioner", "murmur2_random")
        .set(
            "queue.buffering.max.messages",
            (o.max_inflight.max(1) + 1000).min(10_000_000).to_string(),
        )
        .set("queue.buffering.max.kbytes", "2097151")
        .set("message.timeout.ms", "120000");
    for (k, v) in &o.producer_config {
        c.set(k, v);
    }
    c
}

fn consumer_config(spec: &RunSpec, group: &str) -> ClientConfig {
    let mut c = base_config(&spec.address, &spec.opts.client_config);
    c.set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "100");
    for (k, v) in &spec.opts.consumer_config {
        c.set(k, v);
    }
    c
}

#[allow(clippy::too_many_arguments)]
fn producer_thread(
    producer: ThreadedProducer<ProdCtx>,
    shared: Arc<ProdShared>,
    topic: String,
    keys: Arc<Vec<String>>,
    key_mode: KeyDistributor,
    payloads: Arc<Vec<Vec<u8>>>,
    rate: f64,
    max_inflight: u64,
    epoch: Instant,
    start_ns: u64,
    stop: Arc<AtomicBool>,
    seed: u64,
    txn_records: u64,
) -> Result<(), String> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    // Records sent in the open transaction (transactional runs only).
    let mut in_txn: u64 = 0;
    // rust-rdkafka's commit flushes first, and its flush polls for up to 100 ms at a time
    // while the ThreadedProducer's own thread serves the delivery reports: a commit would cost
    // a 100 ms wait of the client's, not the broker's. So wait here until every record of the
    // transaction is acknowledged (our callbacks) and librdkafka holds nothing more, then
    // commit: its flush then returns at once, and the commit is the EndTxn round trip.
    let commit = |p: &ThreadedProducer<ProdCtx>| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let inflight = shared.stats.lock().unwrap().inflight;
            if inflight == 0 && p.in_flight_count() == 0 {
                break;
            }
            if Instant::now() >= deadline {
                return Err("records of the transaction not acknowledged within 60 s".to_string());
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        p.commit_transaction(Duration::from_secs(60))
            .map_err(|e| format!("commit_transaction: {e}"))
    };
    let period_ns = if rate > 0.0 { 1e9 / rate } else { 0.0 };
    let mut buf = payloads[0].clone();
    let mut i: u64 = 0;
    let mut key_idx = rng.gen_range(0..keys.len());
    while !stop.load(Ordering::Relaxed) {
        // Bounded in-flight window.
        {
            let mut s = shared.stats.lock().unwrap();
            while s.inflight >= max_inflight && !stop.load(Ordering::Relaxed) {
                s = shared
                    .acked_cv
                    .wait_timeout(s, Duration::from_millis(10))
                    .unwrap()
                    .0;
            }
        }
        let intended_ns = if period_ns > 0.0 {
            let t = start_ns + (i as f64 * period_ns) as u64;
            let now = epoch.elapsed().as_nanos() as u64;
            if t > now {
                std::thread::sleep(Duration::from_nanos((t - now).min(50_000_000)));
                if epoch.elapsed().as_nanos() as u64 + 20_000 < t {
                    continue; // woke early (or the 50 ms cap): re-check stop and wait again
                }
            }
            t
        } else {
            epoch.elapsed().as_nanos() as u64
        };
        let p = &payloads[(i as usize) % payloads.len()];
        if buf.len() != p.len() {
            buf.resize(p.len(), 0);
        }
        buf.copy_from_slice(p);
        buf[..8].copy_from_slice(&MAGIC);
        buf[8..16].copy_from_slice(&intended_ns.to_le_bytes());
        let key: Option<&str> = match key_mode {
            KeyDistributor::NoKey => None,
            KeyDistributor::KeyRoundRobin => {
                key_idx = (key_idx + 1) % keys.len();
                Some(&keys[key_idx])
            }
            KeyDistributor::RandomNano => Some(&keys[rng.gen_range(0..keys.len())]),
        };
        let mut rec: BaseRecord<'_, str, [u8], usize> =
            BaseRecord::with_opaque_to(&topic, intended_ns as usize).payload(&buf[..]);
        if let Some(k) = key {
            rec = rec.key(k);
        }
        if txn_records > 0 && in_txn == 0 {
            producer
                .begin_transaction()
                .map_err(|e| format!("begin_transaction: {e}"))?;
        }
        shared.stats.lock().unwrap().inflight += 1;
        let mut rec = rec;
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((
                    KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                    r,
                )) => {
                    rec = r;
                    if stop.load(Ordering::Relaxed) {
                        let mut s = shared.stats.lock().unwrap();
                        s.inflight = s.inflight.saturating_sub(1);
                        drop(s);
                        if in_txn > 0 {
                            commit(&producer)?;
                        }
                        return Ok(());
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err((e, _)) => {
                    let mut s = shared.stats.lock().unwrap();
                    s.inflight = s.inflight.saturating_sub(1);
                    s.errors += 1;
                    s.last_error = Some(e.to_string());
                    break;
                }
            }
        }
        shared.stats.lock().unwrap().sent += 1;
        i += 1;
        if txn_records > 0 {
            in_txn += 1;
            if in_txn == txn_records {
                commit(&producer)?;
                in_txn = 0;
            }
        }
    }
    if in_txn > 0 {
        commit(&producer)?;
    }
    producer
        .flush(Duration::from_secs(60))
        .map_err(|e| format!("producer flush: {e}"))
}

fn consumer_thread(
    consumer: BaseConsumer,
    shared: Arc<ConsShared>,
    epoch: Instant,
    stop: Arc<AtomicBool>,
) {
    let mut last_assign_check = Instant::now() - Duration::from_secs(1);
    while !stop.load(Ordering::Relaxed) {
        if last_assign_check.elapsed() >= Duration::from_millis(100) {
            last_assign_check = Instant::now();
            if let Ok(a) = consumer.assignment() {
                shared.assigned.store(a.count(), Ordering::Relaxed);
            }
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                let now = epoch.elapsed().as_nanos() as u64;
                let payload = m.payload().unwrap_or(&[]);
                let mut s = shared.stats.lock().unwrap();
                s.consumed += 1;
                s.bytes += payload.len() as u64;
                if payload.len() >= HEADER_LEN && payload[..8] == MAGIC {
                    let sent = u64::from_le_bytes(payload[8..16].try_into().unwrap());
                    stats::record(&mut s.hist, now.saturating_sub(sent) / 1000);
                } else {
                    s.foreign += 1;
                }
            }
            Some(Err(e)) => {
                let mut s = shared.stats.lock().unwrap();
                s.errors += 1;
                s.last_error = Some(e.to_string());
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// Topics
// ------------------------------------------------------------------------------------------

fn create_topics(
    address: &str,
    common: &[(String, String)],
    names: &[String],
    partitions: u32,
    replication_factor: i32,
    timeout: Duration,
) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> = base_config(address, common)
        .create()
        .map_err(|e| format!("admin client: {e}"))?;
    let specs: Vec<NewTopic<'_>> = names
        .iter()
        .map(|n| {
            NewTopic::new(
                n,
                partitions as i32,
                TopicReplication::Fixed(replication_factor),
            )
        })
        .collect();
    let opts = AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    let res = futures_lite::future::block_on(admin.create_topics(specs.iter(), &opts))
        .map_err(|e| format!("CreateTopics on {address}: {e}"))?;
    for r in res {
        if let Err((t, code)) = r {
            return Err(format!("CreateTopics {t} on {address}: {code}"));
        }
    }
    // Wait until the metadata shows every partition with a leader.
    let probe: BaseConsumer = base_config(address, common)
        .create()
        .map_err(|e| format!("metadata client: {e}"))?;
    let t0 = Instant::now();
    loop {
        let ok = names.iter().all(|n| {
            probe
                .fetch_metadata(Some(n), Duration::from_secs(5))
                .ok()
                .and_then(|md| {
                    md.topics().first().map(|t| {
                        t.error().is_none()
                            && t.partitions().len() == partitions as usize
                            && t.partitions().iter().all(|p| p.leader() >= 0)
                    })
                })
                .unwrap_or(false)
        });
        if ok {
            return Ok(());
        }
        if t0.elapsed() > timeout {
            return Err(format!(
                "topics {names:?} not visible with leaders in metadata of {address} after \
                 {timeout:?} (--topic-create-timeout-secs)"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn delete_topics(
    address: &str,
    common: &[(String, String)],
    names: &[String],
) -> Result<(), String> {
    let admin: AdminClient<DefaultClientContext> = base_config(address, common)
        .create()
        .map_err(|e| format!("admin client: {e}"))?;
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let res = futures_lite::future::block_on(admin.delete_topics(&refs, &opts))
        .map_err(|e| format!("DeleteTopics: {e}"))?;
    for r in res {
        if let Err((t, code)) = r {
            return Err(format!("DeleteTopics {t}: {code}"));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// The run
// ------------------------------------------------------------------------------------------

struct ConsumerSet {
    shared: Vec<Arc<ConsShared>>,
    handles: Vec<JoinHandle<()>>,
}

fn start_consumers(
    spec: &RunSpec,
    topics: &[String],
    run_tag: &str,
    epoch: Instant,
    stop: &Arc<AtomicBool>,
) -> Result<ConsumerSet, String> {
    let w = &spec.workload;
    let mut set = ConsumerSet {
        shared: Vec::new(),
        handles: Vec::new(),
    };
    for (ti, topic) in topics.iter().enumerate() {
        for sub in 0..w.subscriptions_per_topic {
            let group = format!("{run_tag}-sub-{ti}-{sub}");
            let n = w.consumer_per_subscription;
            for ci in 0..n {
                let consumer: BaseConsumer = consumer_config(spec, &group)
                    .create()
                    .map_err(|e| format!("consumer: {e}"))?;
                match spec.opts.consumer_mode {
                    ConsumerMode::Subscribe => consumer
                        .subscribe(&[topic.as_str()])
                        .map_err(|e| format!("subscribe {topic}: {e}"))?,
                    ConsumerMode::Assign => {
                        let mut tpl = TopicPartitionList::new();
                        for p in (0..w.partitions_per_topic).filter(|p| p % n == ci) {
                            tpl.add_partition_offset(topic, p as i32, Offset::Beginning)
                                .map_err(|e| format!("assign: {e}"))?;
                        }
                        consumer
                            .assign(&tpl)
                            .map_err(|e| format!("assign {topic}: {e}"))?;
                    }
                }
                let shared = Arc::new(ConsShared {
                    stats: Mutex::new(ConsStats {
                        hist: stats::new_hist(),
                        consumed: 0,
                        bytes: 0,
                        errors: 0,
                        foreign: 0,
                        last_error: None,
                    }),
                    assigned: AtomicUsize::new(0),
                    group: (ti as u32, sub),
                });
                let (sh, st) = (shared.clone(), stop.clone());
                let h = std::thread::Builder::new()
                    .name(format!("cons-{ti}-{sub}-{ci}"))
                    .spawn(move || consumer_thread(consumer, sh, epoch, st))
                    .map_err(|e| format!("spawn consumer: {e}"))?;
                set.shared.push(shared);
                set.handles.push(h);
            }
        }
    }
    Ok(set)
}

fn wait_consumers_ready(spec: &RunSpec, set: &ConsumerSet) -> Result<(), String> {
    let want = spec.workload.partitions_per_topic as usize;
    let t0 = Instant::now();
    loop {
        let mut per_group: HashMap<(u32, u32), usize> = HashMap::new();
        for c in &set.shared {
            *per_group.entry(c.group).or_default() += c.assigned.load(Ordering::Relaxed);
        }
        if per_group.values().all(|&n| n == want) {
            return Ok(());
        }
        if t0.elapsed() > spec.opts.ready_timeout {
            return Err(format!(
                "consumers did not get all {want} partitions of each subscription within {:?} \
                 (assigned per subscription: {per_group:?}); if the broker lacks consumer groups, \
                 try --consumer-mode assign",
                spec.opts.ready_timeout
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Totals seen by the collector at one instant.
#[derive(Default, Clone, Copy)]
struct Totals {
    sent: u64,
    acked: u64,
    acked_bytes: u64,
    pub_errors: u64,
    consumed: u64,
    consumed_bytes: u64,
    cons_errors: u64,
}

impl Totals {
    /// What was counted since `earlier`.
    fn since(&self, earlier: &Totals) -> Totals {
        Totals {
            sent: self.sent.saturating_sub(earlier.sent),
            acked: self.acked.saturating_sub(earlier.acked),
            acked_bytes: self.acked_bytes.saturating_sub(earlier.acked_bytes),
            pub_errors: self.pub_errors.saturating_sub(earlier.pub_errors),
            consumed: self.consumed.saturating_sub(earlier.consumed),
            consumed_bytes: self.consumed_bytes.saturating_sub(earlier.consumed_bytes),
            cons_errors: self.cons_errors.saturating_sub(earlier.cons_errors),
        }
    }

    fn add(&mut self, more: &Totals) {
        self.sent += more.sent;
        self.acked += more.acked;
        self.acked_bytes += more.acked_bytes;
        self.pub_errors += more.pub_errors;
        self.consumed += more.consumed;
        self.consumed_bytes += more.consumed_bytes;
        self.cons_errors += more.cons_errors;
    }
}

struct Collector {
    prods: Vec<Arc<ProdShared>>,
    cons: Vec<Arc<ConsShared>>,
    last: Totals,
}

impl Collector {
    /// Swaps out every worker's interval histogram; returns merged histograms and totals.
    fn collect(&mut self) -> (Histogram<u64>, Histogram<u64>, Totals) {
        let mut pubh = stats::new_hist();
        let mut e2e = stats::new_hist();
        let mut t = Totals::default();
        for p in &self.prods {
            let mut s = p.stats.lock().unwrap();
            let h = std::mem::replace(&mut s.hist, stats::new_hist());
            t.sent += s.sent;
            t.acked += s.acked;
            t.acked_bytes += s.acked_bytes;
            t.pub_errors += s.errors;
            drop(s);
            pubh.add(&h).expect("same histogram bounds");
        }
        for c in &self.cons {
            let mut s = c.stats.lock().unwrap();
            let h = std::mem::replace(&mut s.hist, stats::new_hist());
            t.consumed += s.consumed;
            t.consumed_bytes += s.bytes;
            t.cons_errors += s.errors;
            drop(s);
            e2e.add(&h).expect("same histogram bounds");
        }
        (pubh, e2e, t)
    }
}

fn is_tty() -> bool {
    // SAFETY: isatty on a constant fd.
    unsafe { libc::isatty(2) == 1 }
}

pub fn run(spec: &RunSpec) -> Result<RunOutcome, String> {
    let w = &spec.workload;
    let mut notes = Vec::new();
    let mut rng = rand::thread_rng();
    let run_tag = format!(
        "{}-{}{}-{:08x}",
        spec.opts.topic_prefix,
        spec.label.to_lowercase(),
        spec.round,
        rng.gen::<u32>()
    );
    let topics: Vec<String> = (0..w.topics).map(|i| format!("{run_tag}-t{i}")).collect();

    let mut broker_stats = BrokerStats {
        url: spec.stats_url.clone(),
        ..Default::default()
    };
    if let Some(url) = &spec.stats_url {
        match crate::scrape::get(url) {
            Ok(t) => broker_stats.before = Some(t),
            Err(e) => broker_stats.error = Some(format!("before the run: {e}")),
        }
    }

    create_topics(
        &spec.address,
        &spec.opts.client_config,
        &topics,
        w.partitions_per_topic,
        spec.opts.replication_factor,
        spec.opts.topic_create_timeout,
    )?;

    let epoch = Instant::now();
    let started_at = std::time::SystemTime::now();
    let prod_stop = Arc::new(AtomicBool::new(false));
    let cons_stop = Arc::new(AtomicBool::new(false));
    let backlog_bytes = (w.consumer_backlog_size_gb * 1024.0 * 1024.0 * 1024.0) as u64;
    let subs = w.subscriptions_per_topic as u64;

    // Consumers first (unless a backlog is to be built), and wait for their partitions.
    let mut consumers = None;
    if backlog_bytes == 0 && subs > 0 {
        let set = start_consumers(spec, &topics, &run_tag, epoch, &cons_stop)?;
        if let Err(e) = wait_consumers_ready(spec, &set) {
            cons_stop.store(true, Ordering::Relaxed);
            for h in set.handles {
                let _ = h.join();
            }
            let _ = delete_topics(&spec.address, &spec.opts.client_config, &topics);
            return Err(e);
        }
        consumers = Some(set);
    }

    // Producers.
    let nprod = (w.topics * w.producers_per_topic) as usize;
    let rate_per_producer = w.producer_rate / nprod as f64;
    let keys: Arc<Vec<String>> = Arc::new(
        (0..10_000)
            .map(|_| {
                (0..7)
                    .map(|_| rng.sample(rand::distributions::Alphanumeric) as char)
                    .collect()
            })
            .collect(),
    );
    let start_ns = epoch.elapsed().as_nanos() as u64 + 20_000_000;
    let mut prods = Vec::new();
    let mut prod_handles = Vec::new();
    for (ti, topic) in topics.iter().enumerate() {
        for pi in 0..w.producers_per_topic {
            let shared = Arc::new(ProdShared {
                stats: Mutex::new(ProdStats {
                    hist: stats::new_hist(),
                    sent: 0,
                    acked: 0,
                    acked_bytes: 0,
                    errors: 0,
                    last_error: None,
                    inflight: 0,
                }),
                acked_cv: Condvar::new(),
            });
            let txn_records = spec.opts.transaction_records;
            let tid = (txn_records > 0).then(|| format!("{}-txn-{ti}-{pi}", topic));
            let producer: ThreadedProducer<ProdCtx> = producer_config(spec, tid.as_deref())
                .create_with_context(ProdCtx {
                    shared: shared.clone(),
                    epoch,
                })
                .map_err(|e| format!("producer: {e}"))?;
            if tid.is_some() {
                producer
                    .init_transactions(Duration::from_secs(30))
                    .map_err(|e| format!("init_transactions: {e}"))?;
            }
            let (sh, tp, ks, pl, st) = (
                shared.clone(),
                topic.clone(),
                keys.clone(),
                spec.payloads.clone(),
                prod_stop.clone(),
            );
            let key_mode = w.key_distributor;
            let max_inflight = spec.opts.max_inflight.max(1);
            let seed = (ti as u64) << 32 | pi as u64;
            let h = std::thread::Builder::new()
                .name(format!("prod-{ti}-{pi}"))
                .spawn(move || {
                    producer_thread(
                        producer,
                        sh,
                        tp,
                        ks,
                        key_mode,
                        pl,
                        rate_per_producer,
                        max_inflight,
                        epoch,
                        start_ns,
                        st,
                        seed,
                        txn_records,
                    )
                })
                .map_err(|e| format!("spawn producer: {e}"))?;
            prods.push(shared);
            prod_handles.push(h);
        }
    }

    let mut col = Collector {
        prods: prods.clone(),
        cons: consumers
            .as_ref()
            .map(|c| c.shared.clone())
            .unwrap_or_default(),
        last: Totals::default(),
    };

    let mut phase = if backlog_bytes > 0 {
        Phase::Backlog
    } else if spec.warmup > Duration::ZERO {
        Phase::Warmup
    } else {
        Phase::Measure
    };
    let t_start = Duration::from_nanos(start_ns);
    let mut phase_start = t_start;
    let mut measure_start: Option<Duration> = if phase == Phase::Measure {
        Some(t_start)
    } else {
        None
    };
    let mut measure_end: Option<Duration> = None;
    let mut drain_start: Option<Duration> = None;
    let mut consumers_started_at: Option<Duration> = consumers.as_ref().map(|_| t_start);
    let mut backlog_drain_secs = None;
    let mut intervals = Vec::new();
    let mut interval_hists = Vec::new();
    let mut total_pub = stats::new_hist();
    let mut total_e2e = stats::new_hist();
    let mut measured = Totals::default();
    let mut max_backlog: i64 = 0;
    let mut prev_t = t_start;
    let tty = is_tty();
    let interval = spec.opts.interval;
    let mut tick: u32 = 1;
    let mut producers_joined = false;
    let mut prod_results: Vec<Result<(), String>> = Vec::new();

    loop {
        let target = t_start + interval * tick;
        tick += 1;
        let now = epoch.elapsed();
        if target > now {
            std::thread::sleep(target - now);
        }
        let now = epoch.elapsed();
        let (ph, eh, tot) = col.collect();
        let secs = (now - prev_t).as_secs_f64().max(1e-9);
        let delta = tot.since(&col.last);
        let expected = tot.acked * subs;
        let backlog = expected as i64 - tot.consumed as i64;
        let pp = Percentiles::of(&ph);
        let ep = Percentiles::of(&eh);
        let rec = IntervalRecord {
            t_s: (now - t_start).as_secs_f64(),
            secs,
            phase,
            rates: Rates::over(&delta, secs),
            backlog,
            publish_p50_ms: pp.p50_ms,
            publish_p99_ms: pp.p99_ms,
            publish_p999_ms: pp.p999_ms,
            publish_max_ms: pp.max_ms,
            e2e_p50_ms: ep.p50_ms,
            e2e_p99_ms: ep.p99_ms,
            e2e_max_ms: ep.max_ms,
        };
        if spec.opts.progress {
            let line = format!(
                "[{} r{}] {:>6.1}s {:<7} pub {:>9.0} msg/s {:>7.1} MB/s | cons {:>9.0} msg/s | backlog {:>8} | pub p99 {:>8.2} ms | e2e p99 {:>8.2} ms | err {}",
                spec.label,
                spec.round,
                rec.t_s,
                format!("{:?}", phase).to_lowercase(),
                rec.rates.publish_rate,
                rec.rates.publish_mb_s,
                rec.rates.consume_rate,
                backlog,
                rec.publish_p99_ms,
                rec.e2e_p99_ms,
                tot.pub_errors + tot.cons_errors
            );
            if tty {
                eprint!("\r\x1b[2K{line}");
            } else {
                eprintln!("{line}");
            }
        }
        if matches!(phase, Phase::Measure | Phase::Drain) {
            total_pub.add(&ph).expect("bounds");
            total_e2e.add(&eh).expect("bounds");
            max_backlog = max_backlog.max(backlog);
        }
        if phase == Phase::Measure {
            measured.add(&delta);
        }
        interval_hists.push((prev_t, now - prev_t, ph, eh));
        intervals.push(rec);
        col.last = tot;
        prev_t = now;

        if backlog_drain_secs.is_none() && backlog_bytes > 0 {
            if let Some(cs) = consumers_started_at {
                let threshold = (w.producer_rate.max(1000.0)) as i64;
                if backlog <= threshold {
                    backlog_drain_secs = Some((now - cs).as_secs_f64());
                }
            }
        }

        // Phase transitions.
        match phase {
            Phase::Backlog => {
                if tot.acked_bytes >= backlog_bytes {
                    if subs > 0 {
                        let set = start_consumers(spec, &topics, &run_tag, epoch, &cons_stop)?;
                        col.cons = set.shared.clone();
                        consumers = Some(set);
                    }
                    consumers_started_at = Some(now);
                    phase = if spec.warmup > Duration::ZERO {
                        Phase::Warmup
                    } else {
                        measure_start = Some(now);
                        Phase::Measure
                    };
                    phase_start = now;
                }
            }
            Phase::Warmup => {
                if now - phase_start + interval / 2 >= spec.warmup {
                    phase = Phase::Measure;
                    phase_start = now;
                    measure_start = Some(now);
                }
            }
            Phase::Measure => {
                if now - phase_start + interval / 2 >= spec.duration {
                    prod_stop.store(true, Ordering::Relaxed);
                    measure_end = Some(now);
                    phase = Phase::Drain;
                    drain_start = Some(now);
                }
            }
            Phase::Drain => {
                if !producers_joined && prod_handles.iter().all(|h| h.is_finished()) {
                    for h in prod_handles.drain(..) {
                        prod_results.push(
                            h.join()
                                .unwrap_or_else(|_| Err("producer thread panicked".into())),
                        );
                    }
                    producers_joined = true;
                    // Final acks may have landed after this collect: take one more interval.
                    continue;
                }
                let drained = producers_joined && (subs == 0 || tot.consumed >= expected);
                let timed_out = now - drain_start.unwrap() >= spec.opts.drain_timeout;
                if drained || timed_out {
                    if timed_out && !drained {
                        notes.push(format!(
                            "drain timed out after {:?}: consumed {} of {} expected",
                            spec.opts.drain_timeout, tot.consumed, expected
                        ));
                    }
                    break;
                }
            }
        }
        // A backlog phase that cannot finish (all producers failing) must still end.
        if phase == Phase::Backlog
            && now - t_start > spec.duration + spec.warmup + Duration::from_secs(600)
        {
            notes.push("backlog was never reached; stopped".into());
            prod_stop.store(true, Ordering::Relaxed);
            break;
        }
    }
    if tty && spec.opts.progress {
        eprintln!();
    }
    prod_stop.store(true, Ordering::Relaxed);
    for h in prod_handles.drain(..) {
        prod_results.push(
            h.join()
                .unwrap_or_else(|_| Err("producer thread panicked".into())),
        );
    }
    cons_stop.store(true, Ordering::Relaxed);
    if let Some(set) = consumers.take() {
        for h in set.handles {
            let _ = h.join();
        }
    }
    // Whatever was recorded after the last interval (final consumes before the stop).
    let (ph, eh, _) = col.collect();
    total_pub.add(&ph).expect("bounds");
    total_e2e.add(&eh).expect("bounds");
    for e in prod_results.into_iter().filter_map(Result::err) {
        notes.push(e);
    }

    // Final totals (nothing runs any more).
    let mut counts = Counts::default();
    for p in &prods {
        let s = p.stats.lock().unwrap();
        counts.sent += s.sent;
        counts.acked += s.acked;
        counts.publish_errors += s.errors;
        if s.last_error.is_some() {
            counts.last_publish_error = s.last_error.clone();
        }
    }
    for c in &col.cons {
        let s = c.stats.lock().unwrap();
        counts.consumed += s.consumed;
        counts.consume_errors += s.errors;
        counts.foreign_records += s.foreign;
        if s.last_error.is_some() {
            counts.last_consume_error = s.last_error.clone();
        }
    }
    counts.expected_consumed = counts.acked * subs;

    let measured_secs = match (measure_start, measure_end) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => 0.0,
    };
    let summary = Summary {
        measured_secs,
        rates: Rates::over(&measured, measured_secs),
        max_backlog,
        publish_latency: Percentiles::of(&total_pub),
        end_to_end_latency: Percentiles::of(&total_e2e),
        backlog_drain_secs,
    };

    if let Some(url) = &spec.stats_url {
        match crate::scrape::get(url) {
            Ok(t) => broker_stats.after = Some(t),
            Err(e) => {
                let prev = broker_stats.error.take();
                broker_stats.error = Some(match prev {
                    Some(p) => format!("{p}; after the run: {e}"),
                    None => format!("after the run: {e}"),
                })
            }
        }
    }
    if !spec.opts.keep_topics {
        if let Err(e) = delete_topics(&spec.address, &spec.opts.client_config, &topics) {
            notes.push(format!("could not delete the run's topics: {e}"));
        }
    }
    Ok(RunOutcome {
        result: RunResult {
            broker: spec.label.clone(),
            address: spec.address.clone(),
            round: spec.round,
            topics,
            counts,
            summary,
            intervals,
            broker_stats,
            notes,
        },
        publish: total_pub,
        e2e: total_e2e,
        interval_hists,
        started_at,
    })
}
