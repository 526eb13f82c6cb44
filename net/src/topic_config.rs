//! Topic configs: which keys exist, how they are checked, and how they become a `LogConfig`.
//! An unknown key or a bad value is refused with INVALID_CONFIG and a message naming it, as
//! Kafka does.

use std::collections::BTreeMap;

use engine::{CleanupPolicy, LogConfig, TimestampType};

/// Kafka's DescribeConfigs `config_type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
}

/// Every topic config the broker knows, with its type.
pub const TOPIC_CONFIGS: &[(&str, ConfigType)] = &[
    ("cleanup.policy", ConfigType::List),
    ("delete.retention.ms", ConfigType::Long),
    ("fanout.delay.ms", ConfigType::Long),
    ("fanout.parent", ConfigType::String),
    ("compression.type", ConfigType::String),
    ("max.compaction.lag.ms", ConfigType::Long),
    ("max.message.bytes", ConfigType::Int),
    ("message.timestamp.type", ConfigType::String),
    ("min.cleanable.dirty.ratio", ConfigType::Double),
    ("min.compaction.lag.ms", ConfigType::Long),
    ("min.insync.replicas", ConfigType::Int),
    ("retention.bytes", ConfigType::Long),
    ("retention.ms", ConfigType::Long),
    ("segment.bytes", ConfigType::Int),
    ("segment.ms", ConfigType::Long),
    ("unclean.leader.election.enable", ConfigType::String),
];

/// The in-sync replicas an acks=all produce needs (`min.insync.replicas`; 1 if unset or
/// unreadable: `to_log_config` refuses a bad value before it is stored).
pub fn min_insync_replicas(configs: &BTreeMap<String, String>) -> usize {
    configs
        .get("min.insync.replicas")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .max(1)
}

/// A topic config the broker refuses (answered with INVALID_CONFIG and this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTopicConfig {
    #[error("{key}={value:?} is not an integer")]
    NotAnInteger { key: String, value: String },
    #[error("{key}={value:?} is not a number")]
    NotANumber { key: String, value: String },
    #[error("{key}={value} is out of range [{min}, {max}]")]
    OutOfRange {
        key: String,
        value: i64,
        min: i64,
        max: i64,
    },
    #[error("{key}={value:?}: {hint}")]
    Unsupported {
        key: String,
        value: String,
        hint: &'static str,
    },
    #[error("{key} {why}")]
    Incomplete { key: String, why: &'static str },
    #[error("unknown topic config {0:?}")]
    Unknown(String),
    #[error("{0}")]
    Log(String),
}

fn parse_i64(key: &str, v: &str, min: i64, max: i64) -> Result<i64, InvalidTopicConfig> {
    let n: i64 = v
        .trim()
        .parse()
        .map_err(|_| InvalidTopicConfig::NotAnInteger {
            key: key.to_string(),
            value: v.to_string(),
        })?;
    if n < min || n > max {
        return Err(InvalidTopicConfig::OutOfRange {
            key: key.to_string(),
            value: n,
            min,
            max,
        });
    }
    Ok(n)
}

fn unsupported(key: &str, value: &str, hint: &'static str) -> InvalidTopicConfig {
    InvalidTopicConfig::Unsupported {
        key: key.to_string(),
        value: value.to_string(),
        hint,
    }
}

/// Longest fan-out delay (seed 000: 1 year).
pub const MAX_FANOUT_DELAY_MS: i64 = meta::state::MAX_FANOUT_DELAY_MS as i64;

/// Applies `configs` over `defaults`, checking every key and value.
pub fn to_log_config(
    configs: &BTreeMap<String, String>,
    defaults: &LogConfig,
) -> Result<LogConfig, InvalidTopicConfig> {
    let mut c = defaults.clone();
    for (k, v) in configs {
        match k.as_str() {
            "retention.ms" => {
                let n = parse_i64(k, v, -1, i64::MAX)?;
                c.retention_ms = (n >= 0).then_some(n);
            }
            "retention.bytes" => {
                let n = parse_i64(k, v, -1, i64::MAX)?;
                c.retention_bytes = (n >= 0).then_some(n as u64);
            }
            "segment.bytes" => c.segment_bytes = parse_i64(k, v, 4096, i32::MAX as i64)? as u64,
            "segment.ms" => c.segment_ms = parse_i64(k, v, 1, i64::MAX)?,
            "max.message.bytes" => {
                c.max_batch_bytes = parse_i64(k, v, 0, i32::MAX as i64)? as usize;
            }
            "message.timestamp.type" => {
                c.timestamp_type = match v.as_str() {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => return Err(unsupported(k, v, "use CreateTime or LogAppendTime")),
                }
            }
            "cleanup.policy" => {
                c.cleanup_policy = CleanupPolicy::parse(v)
                    .ok_or_else(|| unsupported(k, v, "use delete, compact, or compact,delete"))?;
            }
            "delete.retention.ms" => c.delete_retention_ms = parse_i64(k, v, 0, i64::MAX)?,
            "min.compaction.lag.ms" => c.min_compaction_lag_ms = parse_i64(k, v, 0, i64::MAX)?,
            "max.compaction.lag.ms" => c.max_compaction_lag_ms = parse_i64(k, v, 1, i64::MAX)?,
            "min.cleanable.dirty.ratio" => {
                let r: f64 = v
                    .trim()
                    .parse()
                    .map_err(|_| InvalidTopicConfig::NotANumber {
                        key: k.clone(),
                        value: v.clone(),
                    })?;
                if !(0.0..=1.0).contains(&r) {
                    return Err(unsupported(k, v, "use a ratio between 0 and 1"));
                }
                c.min_cleanable_dirty_ratio = r;
            }
            "compression.type" => {
                if v != "producer" {
                    return Err(unsupported(
                        k,
                        v,
                        "only \"producer\" is supported (batches are stored as sent)",
                    ));
                }
            }
            "min.insync.replicas" => {
                parse_i64(k, v, 1, meta::replication::MAX_REPLICATION_FACTOR as i64)?;
            }
            meta::replication::UNCLEAN_LEADER_ELECTION_CONFIG => {
                if v != "true" && v != "false" {
                    return Err(unsupported(k, v, "use true or false"));
                }
            }
            // Fan-out links (seed 000); the link itself lives in the metastore.
            "fanout.parent" => {
                if v.is_empty() {
                    return Err(InvalidTopicConfig::Incomplete {
                        key: k.clone(),
                        why: "is empty: name the parent topic",
                    });
                }
            }
            "fanout.delay.ms" => {
                parse_i64(k, v, 0, MAX_FANOUT_DELAY_MS)?;
                if !configs.contains_key("fanout.parent") {
                    return Err(InvalidTopicConfig::Incomplete {
                        key: k.clone(),
                        why: "needs fanout.parent",
                    });
                }
            }
            _ => return Err(InvalidTopicConfig::Unknown(k.clone())),
        }
    }
    if c.cleanup_policy.compact && configs.contains_key("fanout.parent") {
        return Err(InvalidTopicConfig::Incomplete {
            key: "cleanup.policy".into(),
            why: "with compact cannot go with fanout.parent: a fan-out child takes its parent's records as they are, keyless ones too, which a compacted topic refuses; keep the child's cleanup.policy=delete",
        });
    }
    c.max_unflushed_bytes = c.max_unflushed_bytes.max(c.max_batch_bytes as u64);
    c.validate().map_err(InvalidTopicConfig::Log)?;
    Ok(c)
}

/// The effective value of every known config for DescribeConfigs: `(name, value, is_default)`.
pub fn describe(
    configs: &BTreeMap<String, String>,
    defaults: &LogConfig,
) -> Vec<(String, String, bool, ConfigType)> {
    TOPIC_CONFIGS
        .iter()
        .map(|&(name, ty)| match configs.get(name) {
            Some(v) => (name.to_string(), v.clone(), false, ty),
            None => (name.to_string(), default_value(name, defaults), true, ty),
        })
        .collect()
}

/// The type of topic config `name`, if the broker knows it.
pub fn config_type(name: &str) -> Option<ConfigType> {
    TOPIC_CONFIGS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, ty)| ty)
}

/// What topic config `name` is when a topic does not set it (the broker's default).
pub fn default_value(name: &str, d: &LogConfig) -> String {
    match name {
        "cleanup.policy" => d.cleanup_policy.to_string(),
        "delete.retention.ms" => d.delete_retention_ms.to_string(),
        "max.compaction.lag.ms" => d.max_compaction_lag_ms.to_string(),
        "min.cleanable.dirty.ratio" => d.min_cleanable_dirty_ratio.to_string(),
        "min.compaction.lag.ms" => d.min_compaction_lag_ms.to_string(),
        "fanout.delay.ms" => "0".into(),
        "fanout.parent" => String::new(),
        "compression.type" => "producer".into(),
        "max.message.bytes" => d.max_batch_bytes.to_string(),
        "message.timestamp.type" => match d.timestamp_type {
            TimestampType::CreateTime => "CreateTime".into(),
            TimestampType::LogAppendTime => "LogAppendTime".into(),
        },
        "min.insync.replicas" => "1".into(),
        "retention.bytes" => d.retention_bytes.map_or(-1, |b| b as i64).to_string(),
        "retention.ms" => d.retention_ms.unwrap_or(-1).to_string(),
        "segment.bytes" => d.segment_bytes.to_string(),
        "segment.ms" => d.segment_ms.to_string(),
        "unclean.leader.election.enable" => "false".into(),
        _ => unreachable!("every TOPIC_CONFIGS key has a default"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn known_keys_apply_and_unknown_keys_are_refused() {
        let d = LogConfig::default();
        let c = to_log_config(
            &cfg(&[("retention.ms", "1000"), ("segment.bytes", "1048576")]),
            &d,
        )
        .unwrap();
        assert_eq!(c.retention_ms, Some(1000));
        assert_eq!(c.segment_bytes, 1 << 20);
        let c = to_log_config(&cfg(&[("retention.ms", "-1")]), &d).unwrap();
        assert_eq!(c.retention_ms, None);
        let e = to_log_config(&cfg(&[("retention.msx", "1")]), &d).unwrap_err();
        assert_eq!(e, InvalidTopicConfig::Unknown("retention.msx".into()));
        let e = to_log_config(&cfg(&[("segment.ms", "zero")]), &d).unwrap_err();
        assert!(matches!(e, InvalidTopicConfig::NotAnInteger { .. }), "{e}");
        let c = to_log_config(&cfg(&[("cleanup.policy", "delete,compact")]), &d).unwrap();
        assert_eq!(c.cleanup_policy.to_string(), "compact,delete");
        assert!(to_log_config(&cfg(&[("cleanup.policy", "shred")]), &d).is_err());
        assert!(to_log_config(&cfg(&[("min.cleanable.dirty.ratio", "1.5")]), &d).is_err());
        let e = to_log_config(
            &cfg(&[
                ("min.compaction.lag.ms", "10"),
                ("max.compaction.lag.ms", "5"),
            ]),
            &d,
        )
        .unwrap_err();
        assert!(matches!(e, InvalidTopicConfig::Log(_)), "{e}");
        let e = to_log_config(
            &cfg(&[("cleanup.policy", "compact"), ("fanout.parent", "p")]),
            &d,
        )
        .unwrap_err();
        assert!(e.to_string().contains("fanout.parent"), "{e}");
        assert_eq!(describe(&BTreeMap::new(), &d).len(), TOPIC_CONFIGS.len());
    }
}
