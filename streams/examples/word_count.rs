//! A word count over barrier-aligned input topics: the group runner of `ringlog-streams`
//! against any KFC-4 broker (`ringlog serve`).
//!
//! ```text
//! ringlog serve &
//! ringlog topic create words-a --partitions 4     # and words-b, words-c, counts
//! ringlog barrier define wc --topics words-a,words-b,words-c --interval 1s
//! cargo run --release -p ringlog-streams --example word_count -- \
//!     --brokers 127.0.0.1:9092 --inputs words-a,words-b,words-c --output counts \
//!     --group wc-app --barrier-group wc --state-dir /tmp/wc-state
//! ```
//!
//! Every input record's value is split on whitespace; each word's count (per input partition
//! number) goes to `--output` keyed by the word, its value the count in decimal. At every
//! barrier each task's counts are saved under the cut's epoch in `--state-dir`. Options:
//! `--transactional-id ID` (exactly-once: an epoch per transaction), `--restore latest|EPOCH`,
//! `--exit-when-idle-ms MS` (stop once nothing ran for that long and nothing waits),
//! `--dump-dir DIR` (the final counts of each task, `DIR/p<P>/e0.snapshot`, on exit),
//! `--session-timeout-ms MS`, `--no-barriers`. It prints `barrier EPOCH` for each barrier
//! committed and `done RECORDS records in SECONDS s` on exit (from the first record run to
//! the last).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use streams::{
    ConsumerPositions, CutReader, FileStateStore, GroupRunner, Output, OutputContext, Record,
    StateStore, Topology, BARRIER_STATE_PARTITIONS,
};

/// The prefix of a count's snapshot entry name (then the word).
const WORD_ENTRY_PREFIX: &str = "word:";

struct WordCount {
    inputs: Vec<String>,
    output: String,
    /// Per task, word → count.
    counts: HashMap<i32, BTreeMap<String, u64>>,
}

impl Topology for WordCount {
    fn input_topics(&self) -> Vec<String> {
        self.inputs.clone()
    }

    fn process(&mut self, record: &Record, out: &mut Vec<Output>) {
        let Some(value) = &record.value else { return };
        let counts = self.counts.entry(record.partition).or_default();
        for word in String::from_utf8_lossy(value).split_whitespace() {
            let n = counts.entry(word.to_string()).or_default();
            *n += 1;
            out.push(Output {
                topic: self.output.clone(),
                partition: None,
                key: Some(word.as_bytes().to_vec()),
                value: Some(n.to_string().into_bytes()),
            });
        }
    }

    fn snapshot_partition(&self, partition: i32) -> BTreeMap<String, Vec<u8>> {
        self.counts
            .get(&partition)
            .into_iter()
            .flatten()
            .map(|(w, n)| (format!("{WORD_ENTRY_PREFIX}{w}"), n.to_be_bytes().to_vec()))
            .collect()
    }

    fn restore_partition(&mut self, partition: i32, snapshot: BTreeMap<String, Vec<u8>>) {
        let counts = snapshot
            .into_iter()
            .filter_map(|(k, v)| {
                let word = k.strip_prefix(WORD_ENTRY_PREFIX)?.to_string();
                Some((word, u64::from_be_bytes(v.try_into().ok()?)))
            })
            .collect();
        self.counts.insert(partition, counts);
    }
}

struct Args {
    brokers: String,
    inputs: Vec<String>,
    output: String,
    group: String,
    barrier_group: Option<String>,
    state_dir: Option<String>,
    transactional_id: Option<String>,
    restore: Option<String>,
    exit_when_idle_ms: Option<u64>,
    dump_dir: Option<String>,
    session_timeout_ms: u64,
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "word_count: {problem}\nusage: word_count --brokers HOST:PORT --inputs T1,T2 --output T \
         --group G [--barrier-group BG | --no-barriers] [--state-dir DIR] \
         [--transactional-id ID] [--restore latest|EPOCH] [--exit-when-idle-ms MS] \
         [--dump-dir DIR] [--session-timeout-ms MS]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut flags: HashMap<String, String> = HashMap::new();
    let mut no_barriers = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--no-barriers" => no_barriers = true,
            f if f.starts_with("--") => {
                let v = it
                    .next()
                    .unwrap_or_else(|| usage(&format!("{f} needs a value")));
                flags.insert(f[2..].to_string(), v);
            }
            other => usage(&format!("unexpected argument {other:?}")),
        }
    }
    let mut take = |k: &str| flags.remove(k);
    let required =
        |v: Option<String>, k: &str| v.unwrap_or_else(|| usage(&format!("--{k} is required")));
    let number = |v: Option<String>, k: &str| {
        v.map(|s| {
            s.parse::<u64>()
                .unwrap_or_else(|_| usage(&format!("--{k} takes a number, not {s:?}")))
        })
    };
    let args = Args {
        brokers: required(take("brokers"), "brokers"),
        inputs: required(take("inputs"), "inputs")
            .split(',')
            .map(str::to_string)
            .collect(),
        output: required(take("output"), "output"),
        group: required(take("group"), "group"),
        barrier_group: take("barrier-group"),
        state_dir: take("state-dir"),
        transactional_id: take("transactional-id"),
        restore: take("restore"),
        exit_when_idle_ms: number(take("exit-when-idle-ms"), "exit-when-idle-ms"),
        dump_dir: take("dump-dir"),
        session_timeout_ms: number(take("session-timeout-ms"), "session-timeout-ms")
            .unwrap_or(10_000),
    };
    if let Some(k) = flags.keys().next() {
        usage(&format!("unknown option --{k}"));
    }
    if args.barrier_group.is_none() && !no_barriers {
        usage("--barrier-group is required (or --no-barriers)");
    }
    args
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = parse_args();
    if let Err(e) = run(args) {
        eprintln!("word_count: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut consumer_config = ClientConfig::new();
    consumer_config
        .set("bootstrap.servers", &args.brokers)
        .set("group.id", &args.group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", args.session_timeout_ms.to_string())
        .set(
            "heartbeat.interval.ms",
            (args.session_timeout_ms / 4).to_string(),
        )
        .set("isolation.level", "read_committed");
    let consumer: BaseConsumer = consumer_config.create()?;
    let mut producer_config = ClientConfig::new();
    producer_config
        .set("bootstrap.servers", &args.brokers)
        .set("acks", "all")
        .set("linger.ms", "5");
    if let Some(id) = &args.transactional_id {
        producer_config.set("transactional.id", id);
    }
    let producer = producer_config.create_with_context(OutputContext::default())?;
    let topology = WordCount {
        inputs: args.inputs.clone(),
        output: args.output.clone(),
        counts: HashMap::new(),
    };
    let mut runner = GroupRunner::new(topology, consumer, producer)?
        .with_position_reader(ConsumerPositions)
        .with_barrier_listener(|b| {
            println!("barrier {}", b.cut.epoch);
            let _ = std::io::stdout().flush();
        });
    if let Some(dir) = &args.state_dir {
        runner = runner.with_state_store(FileStateStore::new(dir));
    }
    if let Some(group) = &args.barrier_group {
        let reader_consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &args.brokers)
            .set("group.id", format!("{}-cut-reader", args.group))
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "100")
            .create()?;
        let reader = CutReader::new(reader_consumer, BARRIER_STATE_PARTITIONS as i32)?;
        runner = runner.with_barrier_group(group, reader);
    }
    match args.restore.as_deref() {
        None => {}
        Some("latest") => {
            let cut = runner.restore_to_latest_cut()?;
            println!("restored {}", cut.epoch);
        }
        Some(e) => {
            let epoch = e
                .parse()
                .map_err(|_| format!("--restore takes latest or an epoch, not {e:?}"))?;
            let cut = runner.restore_to_epoch(epoch)?;
            println!("restored {}", cut.epoch);
        }
    }
    println!("ready");
    std::io::stdout().flush()?;
    let mut total = 0usize;
    let mut last_progress = Instant::now();
    // From the first record run to the last: the runner's throughput.
    let mut running: Option<(Instant, Instant)> = None;
    loop {
        let round = if args.transactional_id.is_some() {
            runner.run_once_transactional()
        } else {
            runner.run_once()
        };
        match round {
            Ok(r) => {
                total += r.records;
                if r.records > 0 {
                    let now = Instant::now();
                    running = Some((running.map_or(now, |(first, _)| first), now));
                }
                // Idle time counts from the last record, once partitions are assigned.
                if r.records > 0 || runner.positions().is_empty() {
                    last_progress = Instant::now();
                }
            }
            // A failed round is reported and retried (its transaction was rolled back).
            Err(e) => eprintln!("word_count: round failed: {e}"),
        }
        let idle = last_progress.elapsed()
            >= Duration::from_millis(args.exit_when_idle_ms.unwrap_or(u64::MAX));
        if idle && runner.waiting_bytes() == 0 {
            break;
        }
    }
    if let Some(dir) = &args.dump_dir {
        let dump = FileStateStore::new(dir);
        let tasks: std::collections::BTreeSet<i32> =
            runner.positions().keys().map(|tp| tp.1).collect();
        for task in tasks {
            dump.save(task, 0, &runner.topology().snapshot_partition(task))?;
        }
    }
    let secs = running.map_or(0.0, |(first, last)| (last - first).as_secs_f64());
    println!("done {total} records in {secs:.3} s");
    Ok(())
}
