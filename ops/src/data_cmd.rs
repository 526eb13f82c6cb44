//! `ringlog produce TOPIC` (lines from stdin) and `ringlog consume TOPIC`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::{Args, ValueEnum};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};
use serde_json::json;

use crate::client::{check, kafka_error, BrokerVersions, KafkaClient};
use crate::output;
use crate::partition_offsets::{topic_offsets, EARLIEST, LATEST};
use crate::topic_cmd::topic_metadata;

/// Records per produce request (per partition batch) before it is sent.
const PRODUCE_BATCH_RECORDS: usize = 1000;
/// Bytes of keys and values buffered before a produce request is sent.
const PRODUCE_BATCH_BYTES: usize = 512 * 1024;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Acks {
    /// Wait until every in-sync replica has it durably (acks=-1).
    All,
    /// Wait for the leader's durable write only (acks=1; the same for an unreplicated topic).
    #[value(name = "1")]
    One,
    /// Do not wait for an answer (acks=0).
    #[value(name = "0")]
    Zero,
}

#[derive(Args, Debug)]
pub struct ProduceArgs {
    /// The topic to produce to.
    topic: String,
    /// Broker to talk to.
    #[arg(long, default_value = "127.0.0.1:9092")]
    brokers: String,
    /// Split each line at the first C into key and value (a line without C has no key).
    #[arg(long, short = 'K', value_name = "C")]
    key_separator: Option<char>,
    /// Send every message to this partition (default: murmur2 of the key, else round-robin).
    #[arg(long, short = 'p')]
    partition: Option<i32>,
    /// Acknowledgements to wait for.
    #[arg(long, value_enum, default_value = "all")]
    acks: Acks,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct ConsumeArgs {
    /// The topic to read.
    topic: String,
    /// Broker to talk to.
    #[arg(long, default_value = "127.0.0.1:9092")]
    brokers: String,
    /// Read only this partition (default: all).
    #[arg(long, short = 'p')]
    partition: Option<i32>,
    /// Start at the earliest offset (default: the end, new messages only).
    #[arg(long, conflicts_with = "offset")]
    from_beginning: bool,
    /// Start at this offset.
    #[arg(long, short = 'o')]
    offset: Option<i64>,
    /// Stop after N messages.
    #[arg(long, short = 'c', value_name = "N")]
    count: Option<u64>,
    /// Stop when every partition is read to its end.
    #[arg(long, short = 'e')]
    exit_at_end: bool,
    /// Output line per message: %t topic, %p partition, %o offset, %k key, %v value,
    /// %T timestamp (ms), %h headers, %% a percent sign; \n and \t escapes.
    #[arg(long, short = 'f', default_value = "%v")]
    format: String,
    /// One JSON object per message instead of --format.
    #[arg(long)]
    json: bool,
}

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// The partition Kafka's default partitioner picks for a keyed message.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (fanout::rekey::murmur2(key) & 0x7fff_ffff) % partitions
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One v2 batch of `msgs` (key, value), uncompressed, no producer id.
fn encode_batch(msgs: &[(Option<Bytes>, Bytes)]) -> Result<Bytes, String> {
    let ts = now_ms();
    Ok(Bytes::from(engine::batch_encode::encode_uncompressed(
        msgs.iter().map(|(k, v)| engine::batch_encode::NewRecord {
            key: k.clone(),
            value: Some(v.clone()),
            headers: Default::default(),
            timestamp_ms: ts,
        }),
    )))
}

struct ProduceState {
    /// partition → (messages, first base offset).
    stats: BTreeMap<i32, (u64, Option<i64>)>,
    total: u64,
}

fn send_pending(
    c: &mut KafkaClient,
    ver: i16,
    topic: &str,
    acks: i16,
    pending: &mut BTreeMap<i32, Vec<(Option<Bytes>, Bytes)>>,
    st: &mut ProduceState,
) -> Result<(), String> {
    if pending.is_empty() {
        return Ok(());
    }
    let mut parts = Vec::new();
    for (p, msgs) in pending.iter() {
        parts.push(
            PartitionProduceData::default()
                .with_index(*p)
                .with_records(Some(encode_batch(msgs)?)),
        );
    }
    let req = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(parts)]);
    if acks == 0 {
        c.send_only(&req, ver)?;
    } else {
        let r = c.call(&req, ver)?;
        for t in r.responses {
            for p in t.partition_responses {
                if p.error_code != 0 {
                    let msg = p
                        .error_message
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default();
                    return Err(format!(
                        "produce to {topic}/{} refused: {}{msg} ({} messages acknowledged before)",
                        p.index,
                        kafka_error(p.error_code),
                        st.total
                    ));
                }
                let e = st.stats.entry(p.index).or_default();
                e.1.get_or_insert(p.base_offset);
            }
        }
    }
    for (p, msgs) in std::mem::take(pending) {
        st.stats.entry(p).or_default().0 += msgs.len() as u64;
        st.total += msgs.len() as u64;
    }
    Ok(())
}

pub fn produce(args: ProduceArgs) -> Result<(), String> {
    let mut c = KafkaClient::connect(&args.brokers)?;
    let v = c.api_versions()?;
    let ver = v.pick(ApiKey::Produce, 3, 9)?;
    let meta = topic_metadata(&mut c, &v, &args.topic)?;
    let partitions = meta.partitions.len() as i32;
    if partitions == 0 {
        return Err(format!("topic {} has no partitions", args.topic));
    }
    if let Some(p) = args.partition {
        if p < 0 || p >= partitions {
            return Err(format!(
                "topic {} has partitions 0..{}; --partition {p} is not one of them",
                args.topic,
                partitions - 1
            ));
        }
    }
    let acks: i16 = match args.acks {
        Acks::All => -1,
        Acks::One => 1,
        Acks::Zero => 0,
    };
    let mut st = ProduceState {
        stats: BTreeMap::new(),
        total: 0,
    };
    let mut pending: BTreeMap<i32, Vec<(Option<Bytes>, Bytes)>> = BTreeMap::new();
    let (mut n_pending, mut bytes_pending) = (0usize, 0usize);
    let mut next_rr = 0i32;
    let stdin = std::io::stdin();
    let mut lock = stdin.lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = lock
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading stdin: {e}"))?;
        if n == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        let (key, value) = match args.key_separator {
            Some(sep) => {
                let mut b = [0u8; 4];
                let sep = sep.encode_utf8(&mut b).as_bytes();
                match line.windows(sep.len()).position(|w| w == sep) {
                    Some(i) => (
                        Some(Bytes::copy_from_slice(&line[..i])),
                        Bytes::copy_from_slice(&line[i + sep.len()..]),
                    ),
                    None => (None, Bytes::copy_from_slice(&line)),
                }
            }
            None => (None, Bytes::copy_from_slice(&line)),
        };
        let p = match (args.partition, &key) {
            (Some(p), _) => p,
            (None, Some(k)) => partition_for_key(k, partitions),
            (None, None) => {
                let p = next_rr;
                next_rr = (next_rr + 1) % partitions;
                p
            }
        };
        bytes_pending += value.len() + key.as_ref().map_or(0, |k| k.len());
        pending.entry(p).or_default().push((key, value));
        n_pending += 1;
        if n_pending >= PRODUCE_BATCH_RECORDS || bytes_pending >= PRODUCE_BATCH_BYTES {
            send_pending(&mut c, ver, &args.topic, acks, &mut pending, &mut st)?;
            n_pending = 0;
            bytes_pending = 0;
        }
    }
    send_pending(&mut c, ver, &args.topic, acks, &mut pending, &mut st)?;
    if args.json {
        output::json(&json!({
            "topic": args.topic,
            "produced": st.total,
            "acks": acks,
            "partitions": st.stats.iter().map(|(p, (n, base))| json!({
                "partition": p, "messages": n, "first_offset": base,
            })).collect::<Vec<_>>(),
        }));
    } else {
        let per: Vec<String> = st
            .stats
            .iter()
            .map(|(p, (n, base))| match base {
                Some(b) => format!("partition {p}: {n} from offset {b}"),
                None => format!("partition {p}: {n}"),
            })
            .collect();
        eprintln!(
            "produced {} messages to {} ({})",
            st.total,
            args.topic,
            if per.is_empty() {
                "none".to_string()
            } else {
                per.join(", ")
            }
        );
    }
    Ok(())
}

/// Decompresses a batch's records with the engine's pure-Rust decoders.
fn decompress(buf: &mut Bytes, c: Compression) -> anyhow::Result<Bytes> {
    if c == Compression::None {
        return Ok(std::mem::take(buf));
    }
    engine::compression::decompress(c as i16, buf)
        .map(Bytes::from)
        .map_err(|e| anyhow::anyhow!("{c:?} decompression: {e}"))
}

/// Whole batches in a fetched records field (a trailing partial batch is dropped), decoded.
/// The offset after the last batch in `data` (`None` if it holds none): where a reader goes
/// on even when the batches held no data record (transaction markers, batches a compaction
/// emptied).
fn end_of_batches(data: &[u8]) -> Option<i64> {
    engine::batch::stored_batches(data)
        .map(|(h, _)| h.base_offset + h.last_offset_delta as i64 + 1)
        .max()
}

pub fn decode_records(data: Bytes) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for (_, stored) in engine::batch::stored_batches(&data) {
        let mut batch = data.slice_ref(stored);
        let set = RecordBatchDecoder::decode_with_custom_compression(&mut batch, Some(decompress))
            .map_err(|e| format!("decoding record batch: {e}"))?;
        out.extend(set.records.into_iter().filter(|r| !r.control));
    }
    Ok(out)
}

fn unescape(fmt: &str) -> String {
    fmt.replace("\\n", "\n").replace("\\t", "\t")
}

fn lossy(b: &Option<Bytes>) -> String {
    b.as_ref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

fn format_record(fmt: &str, topic: &str, p: i32, r: &Record) -> String {
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        match chars.next() {
            Some('t') => out.push_str(topic),
            Some('p') => out.push_str(&p.to_string()),
            Some('o') => out.push_str(&r.offset.to_string()),
            Some('k') => out.push_str(&lossy(&r.key)),
            Some('v') => out.push_str(&lossy(&r.value)),
            Some('T') => out.push_str(&r.timestamp.to_string()),
            Some('h') => {
                let hs: Vec<String> = r
                    .headers
                    .iter()
                    .map(|(k, v)| format!("{k}={}", lossy(v)))
                    .collect();
                out.push_str(&hs.join(","));
            }
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

fn record_json(topic: &str, p: i32, r: &Record) -> serde_json::Value {
    json!({
        "topic": topic,
        "partition": p,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": r.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned()),
        "value": r.value.as_ref().map(|v| String::from_utf8_lossy(v).into_owned()),
        "headers": r.headers.iter().map(|(k, v)| (k.to_string(), json!(lossy(v)))).collect::<serde_json::Map<_, _>>(),
    })
}

pub fn consume(args: ConsumeArgs) -> Result<(), String> {
    let mut c = KafkaClient::connect(&args.brokers)?;
    let v: BrokerVersions = c.api_versions()?;
    let ver = v.pick(ApiKey::Fetch, 4, 12)?;
    let meta = topic_metadata(&mut c, &v, &args.topic)?;
    let mut parts: Vec<i32> = meta.partitions.iter().map(|p| p.partition_index).collect();
    parts.sort();
    if let Some(p) = args.partition {
        if !parts.contains(&p) {
            return Err(format!(
                "topic {} has no partition {p} (it has {})",
                args.topic,
                parts.len()
            ));
        }
        parts = vec![p];
    }
    let earliest = topic_offsets(&mut c, &v, &args.topic, &parts, EARLIEST)?;
    let latest = topic_offsets(&mut c, &v, &args.topic, &parts, LATEST)?;
    // partition → next offset to fetch.
    let mut pos: BTreeMap<i32, i64> = BTreeMap::new();
    for &p in &parts {
        let start = match (args.offset, args.from_beginning) {
            (Some(o), _) => o,
            (None, true) => earliest[&p],
            (None, false) => latest[&p],
        };
        pos.insert(p, start);
    }
    let fmt = unescape(&args.format);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut printed: u64 = 0;
    if args.count == Some(0) {
        return Ok(());
    }
    loop {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(if args.exit_at_end { 100 } else { 500 })
            .with_min_bytes(1)
            .with_max_bytes(8 << 20)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(s(args.topic.as_str())))
                .with_partitions(
                    pos.iter()
                        .map(|(&p, &o)| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(o)
                                .with_current_leader_epoch(-1)
                                .with_last_fetched_epoch(-1)
                                .with_log_start_offset(-1)
                                .with_partition_max_bytes(1 << 20)
                        })
                        .collect(),
                )]);
        let r = c.call(&req, ver)?;
        check(r.error_code, None, || "Fetch failed".into())?;
        let mut at_end = true;
        let mut got_any = false;
        for t in r.responses {
            for pd in t.partitions {
                let p = pd.partition_index;
                if pd.error_code != 0 {
                    return Err(format!(
                        "Fetch {}/{p} at offset {}: {}",
                        args.topic,
                        pos.get(&p).copied().unwrap_or(-1),
                        kafka_error(pd.error_code)
                    ));
                }
                let (records, batches_end) = match pd.records {
                    Some(b) if !b.is_empty() => (decode_records(b.clone())?, end_of_batches(&b)),
                    _ => (Vec::new(), None),
                };
                let from = pos[&p];
                for r in records.iter().filter(|r| r.offset >= from) {
                    got_any = true;
                    if args.json {
                        writeln!(
                            out,
                            "{}",
                            serde_json::to_string(&record_json(&args.topic, p, r))
                                .expect("a Value serializes")
                        )
                    } else {
                        writeln!(out, "{}", format_record(&fmt, &args.topic, p, r))
                    }
                    .map_err(|e| format!("writing stdout: {e}"))?;
                    pos.insert(p, r.offset + 1);
                    printed += 1;
                    if args.count.is_some_and(|n| printed >= n) {
                        out.flush().map_err(|e| e.to_string())?;
                        return Ok(());
                    }
                }
                // Past markers and emptied batches too, or they would be fetched for ever.
                if let Some(end) = batches_end.filter(|&e| e > pos[&p]) {
                    pos.insert(p, end);
                }
                if pos[&p] < pd.high_watermark {
                    at_end = false;
                }
            }
        }
        out.flush().map_err(|e| format!("writing stdout: {e}"))?;
        if args.exit_at_end && at_end && !got_any {
            return Ok(());
        }
        if !got_any {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's own test vectors (UtilsTest.testMurmur2).
    #[test]
    fn format_placeholders() {
        let r = Record {
            offset: 7,
            ..engine::batch_encode::NewRecord {
                key: Some(Bytes::from_static(b"k")),
                value: Some(Bytes::from_static(b"v")),
                timestamp_ms: 5,
                ..Default::default()
            }
            .into_record()
        };
        assert_eq!(
            format_record("%t %p %o %k %v %T %%", "t", 3, &r),
            "t 3 7 k v 5 %"
        );
    }

    #[test]
    fn batch_roundtrip_is_one_batch() {
        let msgs = vec![
            (Some(Bytes::from_static(b"a")), Bytes::from_static(b"1")),
            (None, Bytes::from_static(b"2")),
        ];
        let b = encode_batch(&msgs).unwrap();
        let h = engine::batch::validate(&b).unwrap();
        assert_eq!(h.records_count, 2);
        assert_eq!(h.base_sequence, -1);
        let recs = decode_records(b).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].value.as_deref(), Some(&b"2"[..]));
    }
}
