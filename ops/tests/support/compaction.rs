//! Compacted topics seen from confluent-kafka (`compaction.py`): keyed runs with tombstones,
//! a partition read whole from the beginning, and what a fully cleaned log holds (issues #11,
//! #18).

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;

/// What `compaction.py produce` writes as record `i` of a run ending at `end` (keep in step
/// with `is_tombstone` there): `None` is a tombstone.
pub fn value_of(i: u64, end: u64, keys: u64) -> Option<String> {
    let tomb = i.is_multiple_of(997) || (i >= end - keys && (i % keys) % 10 == 3);
    (!tomb).then(|| format!("v{i}"))
}

pub type Records = BTreeMap<u64, (String, Option<String>)>;

/// The log as a consumer from the beginning sees it: `(low watermark, offset → record)`;
/// asserts offsets strictly increase.
pub fn consume(broker: &Broker, topic: &str) -> (u64, u64, Records) {
    let out = run_python(
        "compaction.py",
        &["consume", &broker.bootstrap(), topic],
        &[],
        Duration::from_secs(90),
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("consumer JSON");
    let mut records = Records::new();
    let mut last: Option<u64> = None;
    for r in v["records"].as_array().unwrap() {
        let off = r[0].as_u64().unwrap();
        assert!(
            last.is_none_or(|l| off > l),
            "offsets increase: {off} after {last:?}"
        );
        last = Some(off);
        records.insert(
            off,
            (
                r[1].as_str().unwrap().to_string(),
                r[2].as_str().map(str::to_string),
            ),
        );
    }
    (
        v["low"].as_u64().unwrap(),
        v["high"].as_u64().unwrap(),
        records,
    )
}

/// Records `start..start + count` of a keyed run over `keys` keys (idempotent, acks=all).
pub fn produce(broker: &Broker, topic: &str, start: u64, count: u64, keys: u64, codec: &str) {
    run_python(
        "compaction.py",
        &[
            "produce",
            &broker.bootstrap(),
            topic,
            &start.to_string(),
            &count.to_string(),
            &keys.to_string(),
            codec,
        ],
        &[],
        Duration::from_secs(120),
    );
}

pub fn produce_one(broker: &Broker, topic: &str, key: &str, value: &str) {
    run_python(
        "compaction.py",
        &["produce-one", &broker.bootstrap(), topic, key, value],
        &[],
        Duration::from_secs(30),
    );
}

/// The latest record of every key among records `start..end` of one producer run, at its
/// offset (`offset = i`: one partition, one idempotent producer), tombstones included.
pub fn latest(start: u64, end: u64, keys: u64) -> Records {
    let mut by_key: BTreeMap<String, u64> = BTreeMap::new();
    for i in start..end {
        by_key.insert(format!("k{}", i % keys), i);
    }
    by_key
        .into_iter()
        .map(|(k, i)| (i, (k, value_of(i, end, keys))))
        .collect()
}
