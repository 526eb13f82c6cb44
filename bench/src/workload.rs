//! OMB (OpenMessaging Benchmark) workloads: read from OMB's YAML workload files as they are, or
//! built from flags, with flag overrides on top of a file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How producers choose record keys (OMB's `KeyDistributorType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyDistributor {
    /// No key: the client's partitioner spreads records (librdkafka: sticky random).
    #[default]
    #[serde(rename = "NO_KEY")]
    NoKey,
    /// Keys taken in turn from a pool of 10,000 random keys.
    #[serde(rename = "KEY_ROUND_ROBIN")]
    KeyRoundRobin,
    /// A random key of that pool for each record.
    #[serde(rename = "RANDOM_NANO")]
    RandomNano,
}

impl std::str::FromStr for KeyDistributor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().replace('-', "_").as_str() {
            "NO_KEY" | "NONE" => Ok(KeyDistributor::NoKey),
            "KEY_ROUND_ROBIN" | "ROUND_ROBIN" => Ok(KeyDistributor::KeyRoundRobin),
            "RANDOM_NANO" | "RANDOM" => Ok(KeyDistributor::RandomNano),
            _ => Err(format!(
                "unknown key distributor {s:?} (NO_KEY, KEY_ROUND_ROBIN or RANDOM_NANO)"
            )),
        }
    }
}

/// Bytes at the start of each payload: 8-byte magic, then the intended send time (ns, LE).
pub const HEADER_LEN: usize = 16;

/// One OMB workload. Field names in the YAML are OMB's (camelCase).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    pub name: String,
    pub topics: u32,
    pub partitions_per_topic: u32,
    pub message_size: usize,
    #[serde(default)]
    pub use_randomized_payloads: bool,
    #[serde(default)]
    pub random_bytes_ratio: f64,
    #[serde(default)]
    pub randomized_payload_pool_size: usize,
    #[serde(default)]
    pub payload_file: Option<String>,
    #[serde(default)]
    pub key_distributor: KeyDistributor,
    pub subscriptions_per_topic: u32,
    #[serde(rename = "consumerPerSubscription", default = "one")]
    pub consumer_per_subscription: u32,
    pub producers_per_topic: u32,
    /// Messages per second over all producers; 0 = as fast as possible (see README).
    pub producer_rate: f64,
    #[serde(rename = "consumerBacklogSizeGB", default)]
    pub consumer_backlog_size_gb: f64,
    pub test_duration_minutes: f64,
    #[serde(default)]
    pub warmup_duration_minutes: f64,
}

fn one() -> u32 {
    1
}

/// Keys of OMB's workload format that ringlog-bench uses.
pub const USED_KEYS: &[&str] = &[
    "name",
    "topics",
    "partitionsPerTopic",
    "messageSize",
    "useRandomizedPayloads",
    "randomBytesRatio",
    "randomizedPayloadPoolSize",
    "payloadFile",
    "keyDistributor",
    "subscriptionsPerTopic",
    "consumerPerSubscription",
    "producersPerTopic",
    "producerRate",
    "consumerBacklogSizeGB",
    "testDurationMinutes",
    "warmupDurationMinutes",
];

/// Keys of OMB's workload format that are accepted and ignored, with the reason.
pub const IGNORED_KEYS: &[(&str, &str)] = &[
    (
        "backlogDrainRatio",
        "ignored: the backlog is always drained at the consumers' full speed",
    ),
    (
        "producerStartRate",
        "ignored: producerRate 0 runs unthrottled with a bounded in-flight window instead of a rate search",
    ),
];

impl Default for Workload {
    fn default() -> Self {
        Workload {
            name: "flags".into(),
            topics: 1,
            partitions_per_topic: 1,
            message_size: 1024,
            use_randomized_payloads: false,
            random_bytes_ratio: 0.0,
            randomized_payload_pool_size: 0,
            payload_file: None,
            key_distributor: KeyDistributor::NoKey,
            subscriptions_per_topic: 1,
            consumer_per_subscription: 1,
            producers_per_topic: 1,
            producer_rate: 1000.0,
            consumer_backlog_size_gb: 0.0,
            test_duration_minutes: 1.0,
            warmup_duration_minutes: 0.0,
        }
    }
}

/// Parses an OMB workload YAML text. Unknown keys are refused; known-but-unused keys are
/// returned as notes.
pub fn parse_yaml(text: &str, origin: &str) -> Result<(Workload, Vec<String>), String> {
    let value: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| format!("workload {origin}: not YAML: {e}"))?;
    let map = value
        .as_mapping()
        .ok_or_else(|| format!("workload {origin}: expected a mapping of OMB workload keys"))?;
    let mut notes = Vec::new();
    let mut used = serde_yaml::Mapping::new();
    for (k, v) in map {
        let key = k
            .as_str()
            .ok_or_else(|| format!("workload {origin}: key {k:?} is not a string"))?;
        if USED_KEYS.contains(&key) {
            used.insert(k.clone(), v.clone());
        } else if let Some((_, why)) = IGNORED_KEYS.iter().find(|(n, _)| *n == key) {
            notes.push(format!("workload key `{key}` {why}"));
        } else {
            return Err(format!(
                "workload {origin}: unknown key `{key}` (OMB workload keys: {})",
                USED_KEYS
                    .iter()
                    .chain(IGNORED_KEYS.iter().map(|(n, _)| n))
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let w: Workload = serde_yaml::from_value(serde_yaml::Value::Mapping(used))
        .map_err(|e| format!("workload {origin}: {e}"))?;
    Ok((w, notes))
}

pub fn load(path: &Path) -> Result<(Workload, Vec<String>), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read workload {}: {e}", path.display()))?;
    parse_yaml(&text, &path.display().to_string())
}

impl Workload {
    pub fn validate(&self) -> Result<(), String> {
        let bad = |m: &str| Err(format!("workload {}: {m}", self.name));
        if self.topics == 0 {
            return bad("topics must be at least 1");
        }
        if self.partitions_per_topic == 0 {
            return bad("partitionsPerTopic must be at least 1");
        }
        if self.message_size < HEADER_LEN {
            return bad(&format!(
                "messageSize must be at least {} bytes (the send timestamp is carried in the payload)",
                HEADER_LEN
            ));
        }
        if self.producers_per_topic == 0 {
            return bad("producersPerTopic must be at least 1");
        }
        if self.subscriptions_per_topic > 0 && self.consumer_per_subscription == 0 {
            return bad("consumerPerSubscription must be at least 1");
        }
        if !(self.producer_rate >= 0.0 && self.producer_rate.is_finite()) {
            return bad("producerRate must be >= 0");
        }
        if !(0.0..=1.0).contains(&self.random_bytes_ratio) {
            return bad("randomBytesRatio must be within 0..1");
        }
        if self.test_duration_minutes <= 0.0 {
            return bad("testDurationMinutes must be > 0");
        }
        if self.warmup_duration_minutes < 0.0 || self.consumer_backlog_size_gb < 0.0 {
            return bad("warmupDurationMinutes and consumerBacklogSizeGB must be >= 0");
        }
        Ok(())
    }

    /// Payloads for the producers (the first [`HEADER_LEN`] bytes of each are
    /// overwritten per record with the magic and the intended send time).
    pub fn payloads(&self, workload_dir: Option<&Path>, notes: &mut Vec<String>) -> Vec<Vec<u8>> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed_0f0b);
        if self.use_randomized_payloads {
            let n = self.randomized_payload_pool_size.max(1);
            let random = (self.message_size as f64 * self.random_bytes_ratio).round() as usize;
            return (0..n)
                .map(|_| {
                    let mut p = vec![0u8; self.message_size];
                    rng.fill(&mut p[..random.min(self.message_size)]);
                    p
                })
                .collect();
        }
        if let Some(file) = &self.payload_file {
            let mut candidates = vec![PathBuf::from(file)];
            if let Some(d) = workload_dir {
                candidates.insert(0, d.join(file));
                if let Some(parent) = d.parent() {
                    candidates.push(parent.join(file));
                }
            }
            match candidates.iter().find_map(|p| std::fs::read(p).ok()) {
                Some(mut bytes) if !bytes.is_empty() => {
                    if bytes.len() != self.message_size {
                        notes.push(format!(
                            "payloadFile {file} has {} bytes; resized to messageSize {}",
                            bytes.len(),
                            self.message_size
                        ));
                        let orig = bytes.clone();
                        bytes = orig
                            .iter()
                            .cycle()
                            .take(self.message_size)
                            .copied()
                            .collect();
                    }
                    return vec![bytes];
                }
                _ => notes.push(format!(
                    "payloadFile {file} not found; using {} random bytes instead",
                    self.message_size
                )),
            }
        }
        let mut p = vec![0u8; self.message_size];
        rng.fill(&mut p[..]);
        vec![p]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_omb_yaml() {
        let y = "name: t\ntopics: 1\npartitionsPerTopic: 6\nmessageSize: 1024\npayloadFile: \"payload/payload-1Kb.data\"\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 2\nproducersPerTopic: 2\nproducerRate: 0\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 15\nkeyDistributor: \"KEY_ROUND_ROBIN\"\nbacklogDrainRatio: 2.0\n";
        let (w, notes) = parse_yaml(y, "t").unwrap();
        assert_eq!(w.partitions_per_topic, 6);
        assert_eq!(w.consumer_per_subscription, 2);
        assert_eq!(w.key_distributor, KeyDistributor::KeyRoundRobin);
        assert_eq!(notes.len(), 1);
        w.validate().unwrap();
    }

    #[test]
    fn repo_workloads_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "yaml") {
                let (w, _) = load(&p).unwrap();
                w.validate().unwrap();
                n += 1;
            }
        }
        assert!(n >= 2, "workload files in {}", dir.display());
    }

    #[test]
    fn refuses_unknown_keys() {
        let e = parse_yaml("name: t\ntopicz: 1\n", "t").unwrap_err();
        assert!(e.contains("unknown key `topicz`"), "{e}");
    }
}
