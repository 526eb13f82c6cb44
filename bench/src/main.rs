//! `ringlog-bench`: OMB-style latency and throughput harness for any Kafka-compatible broker.
//! See bench/README.md.

mod probe;
mod report;
mod run;
mod scrape;
mod stats;
mod workload;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use run::{ClientOptions, ConsumerMode, RunSpec};
use workload::{KeyDistributor, Workload};

#[derive(Parser, Debug)]
#[command(
    name = "ringlog-bench",
    version,
    about = "OMB-style latency and throughput benchmark for any Kafka-compatible broker (driver: librdkafka)"
)]
struct Cli {
    /// Bootstrap address of the broker under test (A).
    #[arg(short = 'b', long, value_name = "HOST:PORT")]
    brokers: Option<String>,
    /// Second broker (B): runs alternate A B A B … and the report gives B/A for each figure.
    #[arg(long, value_name = "HOST:PORT")]
    compare: Option<String>,
    /// Runs per broker (default 1; 2 with --compare).
    #[arg(long, value_name = "N")]
    rounds: Option<u32>,
    /// OMB workload YAML file (flags below override its values).
    #[arg(short = 'w', long, value_name = "FILE")]
    workload: Option<PathBuf>,

    // --- workload overrides (OMB names in brackets) ---
    /// [name]
    #[arg(long)]
    name: Option<String>,
    /// [topics]
    #[arg(long)]
    topics: Option<u32>,
    /// [partitionsPerTopic]
    #[arg(long)]
    partitions: Option<u32>,
    /// [messageSize] bytes (at least 16).
    #[arg(long)]
    message_size: Option<usize>,
    /// [keyDistributor] NO_KEY, KEY_ROUND_ROBIN or RANDOM_NANO.
    #[arg(long)]
    key_distributor: Option<KeyDistributor>,
    /// [producersPerTopic]
    #[arg(long)]
    producers_per_topic: Option<u32>,
    /// [subscriptionsPerTopic]
    #[arg(long)]
    subscriptions_per_topic: Option<u32>,
    /// [consumerPerSubscription]
    #[arg(long)]
    consumers_per_subscription: Option<u32>,
    /// [producerRate] messages/s over all producers; 0 = maximum (unthrottled, bounded in-flight).
    #[arg(long)]
    rate: Option<f64>,
    /// [consumerBacklogSizeGB]
    #[arg(long)]
    backlog_gb: Option<f64>,
    /// Test duration in seconds (overrides testDurationMinutes).
    #[arg(long, value_name = "SECS")]
    duration_secs: Option<f64>,
    /// Warm-up in seconds (overrides warmupDurationMinutes).
    #[arg(long, value_name = "SECS")]
    warmup_secs: Option<f64>,

    // --- producer and consumer options ---
    /// acks: all, 1 or 0.
    #[arg(long, default_value = "all")]
    acks: String,
    /// linger.ms
    #[arg(long, default_value_t = 1.0)]
    linger_ms: f64,
    /// batch.size in bytes.
    #[arg(long, default_value_t = 1_048_576)]
    batch_size: usize,
    /// compression.type: none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    compression: String,
    /// enable.idempotence=true
    #[arg(long)]
    idempotence: bool,
    /// Records per transaction (0: none). Each producer gets its own transactional.id, begins
    /// a transaction, sends this many records and commits; pair with
    /// `--consumer-config isolation.level=read_committed` for committed-only consumers.
    #[arg(long, default_value_t = 0)]
    transaction_records: u64,
    /// Records sent but not yet acknowledged, per producer (the window for producerRate 0).
    #[arg(long, default_value_t = 1000)]
    max_inflight: u64,
    /// Extra librdkafka producer property KEY=VALUE (repeatable).
    #[arg(short = 'X', long = "producer-config", value_name = "KEY=VALUE")]
    producer_config: Vec<String>,
    /// Extra librdkafka consumer property KEY=VALUE (repeatable).
    #[arg(long = "consumer-config", value_name = "KEY=VALUE")]
    consumer_config: Vec<String>,
    /// librdkafka property KEY=VALUE of every client, admin included (repeatable): the
    /// security settings, e.g. `-C security.protocol=SASL_SSL -C sasl.mechanism=SCRAM-SHA-512`.
    #[arg(short = 'C', long = "client-config", value_name = "KEY=VALUE")]
    client_config: Vec<String>,
    /// The --compare broker's own client properties (instead of --client-config), e.g.
    /// PLAINTEXT on A against SASL_SSL on B in the same run (repeatable).
    #[arg(long = "compare-client-config", value_name = "KEY=VALUE")]
    compare_client_config: Vec<String>,
    /// subscribe: consumer groups (as OMB); assign: partitions spread by hand.
    #[arg(long, value_enum, default_value = "subscribe")]
    consumer_mode: ConsumerMode,
    /// Replicas of each topic the runs create.
    #[arg(long, default_value_t = 1)]
    replication_factor: i32,
    /// The --compare broker's replication factor (default: --replication-factor): RF 3 against
    /// RF 1 on the same cluster in the same run.
    #[arg(long)]
    compare_replication_factor: Option<i32>,

    // --- run control and output ---
    /// Stats interval in seconds.
    #[arg(long, default_value_t = 1.0)]
    interval_secs: f64,
    /// After producers stop: how long to wait for consumers to catch up.
    #[arg(long, default_value_t = 60.0)]
    drain_timeout_secs: f64,
    /// How long consumers may take to get their partitions.
    #[arg(long, default_value_t = 60.0)]
    ready_timeout_secs: f64,
    /// How long the run's topics may take to be created and to show a leader for every
    /// partition (10,000 partitions on a busy machine take minutes).
    #[arg(long, default_value_t = 300.0)]
    topic_create_timeout_secs: f64,
    /// Output directory (result.json, latency.hlog, report.html).
    #[arg(short = 'o', long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Broker stats endpoint of A (plain text over HTTP), scraped before and after each run.
    #[arg(long, value_name = "URL")]
    stats_url: Option<String>,
    /// Broker stats endpoint of B.
    #[arg(long, value_name = "URL")]
    stats_url_b: Option<String>,
    /// Measure the disk's fdatasync latency in DIR (alone, or before the runs: the report then
    /// gives p99 / fdatasync p99).
    #[arg(long, value_name = "DIR")]
    fsync_probe: Option<PathBuf>,
    /// Writes of the fsync probe.
    #[arg(long, default_value_t = 2000)]
    fsync_count: u64,
    #[arg(long, default_value = "rlb")]
    topic_prefix: String,
    /// Keep the topics each run creates (default: delete them after the run).
    #[arg(long)]
    keep_topics: bool,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

fn parse_kv(v: &[String]) -> Result<Vec<(String, String)>, String> {
    v.iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
        })
        .collect()
}

pub fn driver_name() -> String {
    let (_, v) = rdkafka::util::get_rdkafka_version();
    format!("librdkafka {v} via the rdkafka 0.39 crate (ThreadedProducer, BaseConsumer)")
}

fn main() {
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("ringlog-bench: {e}");
            std::process::exit(1);
        }
    }
}

fn real_main(cli: Cli) -> Result<(), String> {
    let mut notes = Vec::new();
    let probe = match &cli.fsync_probe {
        Some(dir) => {
            eprintln!(
                "fsync probe: {} × (4 KiB O_DIRECT write + fdatasync) in {}",
                cli.fsync_count,
                dir.display()
            );
            let p = probe::run(dir, cli.fsync_count.max(1))?;
            eprintln!(
                "fsync probe: fdatasync p50 {:.3} ms p99 {:.3} ms p99.9 {:.3} ms max {:.3} ms ({:.0} syncs/s)",
                p.fdatasync.p50_ms, p.fdatasync.p99_ms, p.fdatasync.p999_ms, p.fdatasync.max_ms,
                p.syncs_per_sec
            );
            Some(p)
        }
        None => None,
    };
    let Some(addr_a) = cli.brokers.clone() else {
        if let Some(p) = probe {
            println!("{}", serde_json::to_string_pretty(&p).unwrap());
            return Ok(());
        }
        return Err("--brokers HOST:PORT is required (or --fsync-probe DIR alone)".into());
    };

    let (mut w, wdir) = match &cli.workload {
        Some(path) => {
            let (w, n) = workload::load(path)?;
            notes.extend(n);
            (w, path.parent().map(|p| p.to_path_buf()))
        }
        None => (Workload::default(), None),
    };
    if let Some(v) = cli.name.clone() {
        w.name = v;
    }
    if let Some(v) = cli.topics {
        w.topics = v;
    }
    if let Some(v) = cli.partitions {
        w.partitions_per_topic = v;
    }
    if let Some(v) = cli.message_size {
        w.message_size = v;
    }
    if let Some(v) = cli.key_distributor {
        w.key_distributor = v;
    }
    if let Some(v) = cli.producers_per_topic {
        w.producers_per_topic = v;
    }
    if let Some(v) = cli.subscriptions_per_topic {
        w.subscriptions_per_topic = v;
    }
    if let Some(v) = cli.consumers_per_subscription {
        w.consumer_per_subscription = v;
    }
    if let Some(v) = cli.rate {
        w.producer_rate = v;
    }
    if let Some(v) = cli.backlog_gb {
        w.consumer_backlog_size_gb = v;
    }
    if let Some(v) = cli.duration_secs {
        w.test_duration_minutes = v / 60.0;
    }
    if let Some(v) = cli.warmup_secs {
        w.warmup_duration_minutes = v / 60.0;
    }
    w.validate()?;
    if w.producer_rate == 0.0 {
        notes.push(format!(
            "producerRate 0: producers run unthrottled with at most {} unacknowledged records each; \
             publish latency is measured from each send() call, so it reflects that window",
            cli.max_inflight
        ));
    }
    if !["all", "-1", "1", "0"].contains(&cli.acks.as_str()) {
        return Err(format!("--acks {}: expected all, 1 or 0", cli.acks));
    }
    if !["none", "gzip", "snappy", "lz4", "zstd"].contains(&cli.compression.as_str()) {
        return Err(format!(
            "--compression {}: expected none, gzip, snappy, lz4 or zstd",
            cli.compression
        ));
    }
    if cli.consumer_mode == ConsumerMode::Assign {
        notes.push("consumers use manual partition assignment (--consumer-mode assign), not consumer groups".into());
    }
    let payloads = Arc::new(w.payloads(wdir.as_deref(), &mut notes));
    let opts = ClientOptions {
        acks: cli.acks.clone(),
        linger_ms: cli.linger_ms,
        batch_size: cli.batch_size,
        compression: cli.compression.clone(),
        idempotence: cli.idempotence,
        transaction_records: cli.transaction_records,
        max_inflight: cli.max_inflight,
        consumer_mode: cli.consumer_mode,
        replication_factor: cli.replication_factor,
        producer_config: parse_kv(&cli.producer_config)?,
        consumer_config: parse_kv(&cli.consumer_config)?,
        client_config: parse_kv(&cli.client_config)?,
        interval: Duration::from_secs_f64(cli.interval_secs.max(0.05)),
        drain_timeout: Duration::from_secs_f64(cli.drain_timeout_secs.max(0.0)),
        ready_timeout: Duration::from_secs_f64(cli.ready_timeout_secs.max(0.0)),
        topic_create_timeout: Duration::from_secs_f64(cli.topic_create_timeout_secs.max(1.0)),
        topic_prefix: cli.topic_prefix.clone(),
        keep_topics: cli.keep_topics,
        progress: !cli.quiet,
    };
    let compare_client_config = if cli.compare_client_config.is_empty() {
        None
    } else {
        Some(parse_kv(&cli.compare_client_config)?)
    };
    let duration = Duration::from_secs_f64(w.test_duration_minutes * 60.0);
    let warmup = Duration::from_secs_f64(w.warmup_duration_minutes * 60.0);

    let mut brokers = vec![report::BrokerRef {
        label: "A".into(),
        address: addr_a.clone(),
    }];
    if let Some(b) = &cli.compare {
        brokers.push(report::BrokerRef {
            label: "B".into(),
            address: b.clone(),
        });
    }
    let rounds = cli
        .rounds
        .unwrap_or(if cli.compare.is_some() { 2 } else { 1 })
        .max(1);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let out = cli.out.clone().unwrap_or_else(|| {
        PathBuf::from("bench-results").join(format!(
            "{}-{}",
            w.name
                .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_"),
            started.as_secs()
        ))
    });
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;

    let driver = driver_name();
    eprintln!(
        "ringlog-bench: workload {:?}, driver {driver}, {} round(s) on {}",
        w.name,
        rounds,
        brokers
            .iter()
            .map(|b| format!("{}={}", b.label, b.address))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut outcomes = Vec::new();
    for round in 1..=rounds {
        for b in &brokers {
            let spec = RunSpec {
                label: b.label.clone(),
                address: b.address.clone(),
                round,
                workload: w.clone(),
                duration,
                warmup,
                payloads: payloads.clone(),
                opts: {
                    let mut o = opts.clone();
                    if b.label == "B" {
                        if let Some(c) = &compare_client_config {
                            o.client_config = c.clone();
                        }
                        if let Some(rf) = cli.compare_replication_factor {
                            o.replication_factor = rf;
                        }
                    }
                    o
                },
                stats_url: if b.label == "A" {
                    cli.stats_url.clone()
                } else {
                    cli.stats_url_b.clone()
                },
            };
            let o = run::run(&spec).map_err(|e| format!("run {} round {round}: {e}", b.label))?;
            let s = &o.result.summary;
            eprintln!(
                "[{} r{}] publish {:.0} msg/s ({:.2} MB/s), consume {:.0} msg/s; publish p50 {:.3} p99 {:.3} p99.9 {:.3} ms; e2e p50 {:.3} p99 {:.3} p99.9 {:.3} ms; errors {}/{}",
                b.label,
                round,
                s.rates.publish_rate,
                s.rates.publish_mb_s,
                s.rates.consume_rate,
                s.publish_latency.p50_ms,
                s.publish_latency.p99_ms,
                s.publish_latency.p999_ms,
                s.end_to_end_latency.p50_ms,
                s.end_to_end_latency.p99_ms,
                s.end_to_end_latency.p999_ms,
                o.result.counts.publish_errors,
                o.result.counts.consume_errors
            );
            outcomes.push(o);
        }
    }

    let (aggregate, merged) = report::aggregate(&brokers, &outcomes, probe.as_ref());
    let comparison = if aggregate.len() == 2 {
        Some(report::compare(&aggregate[0], &aggregate[1]))
    } else {
        None
    };
    let rep = report::Report {
        tool: "ringlog-bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        driver: driver.clone(),
        started_unix_s: started.as_secs_f64(),
        command_line: std::env::args().collect(),
        workload_file: cli.workload.as_ref().map(|p| p.display().to_string()),
        workload: w.clone(),
        test_duration_secs: duration.as_secs_f64(),
        warmup_secs: warmup.as_secs_f64(),
        client: opts,
        brokers,
        runs: outcomes.iter().map(|o| o.result.clone()).collect(),
        aggregate,
        comparison,
        fsync_probe: probe,
        notes,
    };
    let json_path = out.join("result.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&rep).unwrap())
        .map_err(|e| format!("{}: {e}", json_path.display()))?;
    let hlog_path = out.join("latency.hlog");
    report::write_hlog(&hlog_path, &outcomes, &driver)?;
    let html_path = out.join("report.html");
    std::fs::write(&html_path, report::html(&rep, &outcomes, &merged))
        .map_err(|e| format!("{}: {e}", html_path.display()))?;

    for a in &rep.aggregate {
        let s = &a.summary;
        println!(
            "{} ({}): publish {:.0} msg/s {:.2} MB/s | publish ms p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} | e2e ms p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} | sent {} acked {} consumed {}/{} errors {}/{}",
            a.broker,
            a.address,
            s.rates.publish_rate,
            s.rates.publish_mb_s,
            s.publish_latency.p50_ms,
            s.publish_latency.p99_ms,
            s.publish_latency.p999_ms,
            s.publish_latency.max_ms,
            s.end_to_end_latency.p50_ms,
            s.end_to_end_latency.p99_ms,
            s.end_to_end_latency.p999_ms,
            s.end_to_end_latency.max_ms,
            a.counts.sent,
            a.counts.acked,
            a.counts.consumed,
            a.counts.expected_consumed,
            a.counts.publish_errors,
            a.counts.consume_errors
        );
    }
    if let Some(c) = &rep.comparison {
        println!("B/A:");
        for r in c {
            println!(
                "  {:<34} A {:>12.3}  B {:>12.3}  B/A {}",
                r.figure,
                r.a,
                r.b,
                r.ratio.map(|x| format!("{x:.3}")).unwrap_or("-".into())
            );
        }
    }
    println!("driver: {driver}");
    println!("result: {}", json_path.display());
    println!("hlog:   {}", hlog_path.display());
    println!("report: {}", html_path.display());
    Ok(())
}
