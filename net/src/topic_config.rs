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

/// How a topic config's value is checked (Kafka's validator for the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// An integer in `[min, max]`.
    Range(i64, i64),
    /// `compression.gzip.level`: -1 (the codec's default) or 1 to 9.
    GzipLevel,
    /// `true` or `false`, in any case.
    Bool,
    /// `*`, or a comma list of `partitionId:brokerId` (the replication throttle lists).
    ReplicaList,
    /// Checked by its own arm in `to_log_config` (a word from a list, a ratio, a link).
    Own,
}

/// One topic config the broker knows.
pub struct TopicConfigKey {
    pub name: &'static str,
    pub ty: ConfigType,
    pub check: Check,
    /// Its value where a topic sets none (from the broker's log defaults, or Kafka's).
    pub default: fn(&LogConfig) -> String,
}

const fn key(
    name: &'static str,
    ty: ConfigType,
    check: Check,
    default: fn(&LogConfig) -> String,
) -> TopicConfigKey {
    TopicConfigKey {
        name,
        ty,
        check,
        default,
    }
}

const LONG_MAX: i64 = i64::MAX;
const INT_MAX: i64 = i32::MAX as i64;

/// Every topic config the broker knows: its type, check and default, here only. Those whose
/// value changes nothing in ringlog (see docs/kafka-apis.md) are checked and stored as Kafka
/// does, so that tools and clients that set them work.
pub const TOPIC_CONFIGS: &[TopicConfigKey] = &[
    key("cleanup.policy", ConfigType::List, Check::Own, |d| {
        d.cleanup_policy.to_string()
    }),
    // Stored batches keep the producer's codec: the levels are the broker's recompression's.
    key(
        "compression.gzip.level",
        ConfigType::Int,
        Check::GzipLevel,
        |_| "-1".into(),
    ),
    key(
        "compression.lz4.level",
        ConfigType::Int,
        Check::Range(1, 17),
        |_| "9".into(),
    ),
    key("compression.type", ConfigType::String, Check::Own, |_| {
        "producer".into()
    }),
    key(
        "compression.zstd.level",
        ConfigType::Int,
        Check::Range(-131_072, 22),
        |_| "3".into(),
    ),
    key(
        "delete.retention.ms",
        ConfigType::Long,
        Check::Range(0, LONG_MAX),
        |d| d.delete_retention_ms.to_string(),
    ),
    key(
        "fanout.delay.ms",
        ConfigType::Long,
        Check::Range(0, MAX_FANOUT_DELAY_MS),
        |_| "0".into(),
    ),
    key("fanout.parent", ConfigType::String, Check::Own, |_| {
        String::new()
    }),
    // Segments are unlinked at once (a reader holds its open file).
    key(
        "file.delete.delay.ms",
        ConfigType::Long,
        Check::Range(0, LONG_MAX),
        |_| "60000".into(),
    ),
    // Every batch is fdatasync'd before it is acknowledged or readable.
    key(
        "flush.messages",
        ConfigType::Long,
        Check::Range(1, LONG_MAX),
        |_| LONG_MAX.to_string(),
    ),
    key(
        "flush.ms",
        ConfigType::Long,
        Check::Range(0, LONG_MAX),
        |_| LONG_MAX.to_string(),
    ),
    // No replication throttle rates yet (broker configs): the lists are stored only.
    key(
        "follower.replication.throttled.replicas",
        ConfigType::List,
        Check::ReplicaList,
        |_| String::new(),
    ),
    key(
        "index.interval.bytes",
        ConfigType::Int,
        Check::Range(0, INT_MAX),
        |d| d.index_interval_bytes.to_string(),
    ),
    key(
        "leader.replication.throttled.replicas",
        ConfigType::List,
        Check::ReplicaList,
        |_| String::new(),
    ),
    key(
        "max.compaction.lag.ms",
        ConfigType::Long,
        Check::Range(1, LONG_MAX),
        |d| d.max_compaction_lag_ms.to_string(),
    ),
    key(
        "max.message.bytes",
        ConfigType::Int,
        Check::Range(0, INT_MAX),
        |d| d.max_batch_bytes.to_string(),
    ),
    key(
        "message.timestamp.after.max.ms",
        ConfigType::Long,
        Check::Range(0, LONG_MAX),
        |d| d.message_timestamp_after_max_ms.to_string(),
    ),
    key(
        "message.timestamp.before.max.ms",
        ConfigType::Long,
        Check::Range(0, LONG_MAX),
        |d| d.message_timestamp_before_max_ms.to_string(),
    ),
    key(
        "message.timestamp.type",
        ConfigType::String,
        Check::Own,
        |d| match d.timestamp_type {
            TimestampType::CreateTime => "CreateTime".into(),
            TimestampType::LogAppendTime => "LogAppendTime".into(),
        },
    ),
    key(
        "min.cleanable.dirty.ratio",
        ConfigType::Double,
        Check::Own,
        |d| d.min_cleanable_dirty_ratio.to_string(),
    ),
    key(
        "min.compaction.lag.ms",
        ConfigType::Long,
        Check::Range(0, LONG_MAX),
        |d| d.min_compaction_lag_ms.to_string(),
    ),
    key(
        "min.insync.replicas",
        ConfigType::Int,
        Check::Range(1, meta::replication::MAX_REPLICATION_FACTOR as i64),
        |_| "1".into(),
    ),
    // Segment files are always reserved ahead, in growing steps.
    key("preallocate", ConfigType::Boolean, Check::Bool, |_| {
        "false".into()
    }),
    key(
        "retention.bytes",
        ConfigType::Long,
        Check::Range(-1, LONG_MAX),
        |d| d.retention_bytes.map_or(-1, |b| b as i64).to_string(),
    ),
    key(
        "retention.ms",
        ConfigType::Long,
        Check::Range(-1, LONG_MAX),
        |d| d.retention_ms.unwrap_or(-1).to_string(),
    ),
    key(
        "segment.bytes",
        ConfigType::Int,
        Check::Range(4096, INT_MAX),
        |d| d.segment_bytes.to_string(),
    ),
    // The offset index grows with the segment (one entry per batch), never full.
    key(
        "segment.index.bytes",
        ConfigType::Int,
        Check::Range(4, INT_MAX),
        |_| "10485760".into(),
    ),
    key(
        "segment.jitter.ms",
        ConfigType::Long,
        Check::Range(0, LONG_MAX),
        |d| d.segment_jitter_ms.to_string(),
    ),
    key(
        "segment.ms",
        ConfigType::Long,
        Check::Range(1, LONG_MAX),
        |d| d.segment_ms.to_string(),
    ),
    key(
        meta::replication::UNCLEAN_LEADER_ELECTION_CONFIG,
        ConfigType::Boolean,
        Check::Own,
        |_| "false".into(),
    ),
];

/// The topic config named `name`, if the broker knows it.
pub fn config_key(name: &str) -> Option<&'static TopicConfigKey> {
    TOPIC_CONFIGS.iter().find(|k| k.name == name)
}

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

/// Checks `v` against `key`'s check: the integer for a [`Check::Range`], `None` otherwise.
fn check(key: &TopicConfigKey, v: &str) -> Result<Option<i64>, InvalidTopicConfig> {
    let k = key.name;
    match key.check {
        Check::Range(min, max) => parse_i64(k, v, min, max).map(Some),
        Check::GzipLevel => match parse_i64(k, v, -1, 9)? {
            0 => Err(unsupported(
                k,
                v,
                "use -1 (the codec's default) or a level from 1 to 9",
            )),
            n => Ok(Some(n)),
        },
        Check::Bool => {
            let b = v.trim();
            if b.eq_ignore_ascii_case("true") || b.eq_ignore_ascii_case("false") {
                Ok(None)
            } else {
                Err(unsupported(k, v, "use true or false"))
            }
        }
        Check::ReplicaList => {
            let parts: Vec<&str> = v.split(',').map(str::trim).collect();
            let replica = |p: &str| {
                p.is_empty()
                    || p.split_once(':').is_some_and(|(partition, broker)| {
                        [partition, broker]
                            .iter()
                            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                    })
            };
            if parts.iter().all(|p| replica(p)) || parts.concat() == "*" {
                Ok(None)
            } else {
                Err(unsupported(
                    k,
                    v,
                    "must be the literal '*' or a list of replicas in the format \
                     [partitionId]:[brokerId],[partitionId]:[brokerId],...",
                ))
            }
        }
        Check::Own => Ok(None),
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
        let known = config_key(k).ok_or_else(|| InvalidTopicConfig::Unknown(k.clone()))?;
        let n = check(known, v)?;
        // What a value changes in the log; a key without an arm is checked and stored only.
        match (k.as_str(), n) {
            ("retention.ms", Some(n)) => c.retention_ms = (n >= 0).then_some(n),
            ("retention.bytes", Some(n)) => c.retention_bytes = (n >= 0).then_some(n as u64),
            ("segment.bytes", Some(n)) => c.segment_bytes = n as u64,
            ("segment.ms", Some(n)) => c.segment_ms = n,
            ("segment.jitter.ms", Some(n)) => c.segment_jitter_ms = n,
            ("index.interval.bytes", Some(n)) => c.index_interval_bytes = n as u64,
            ("max.message.bytes", Some(n)) => c.max_batch_bytes = n as usize,
            ("message.timestamp.before.max.ms", Some(n)) => c.message_timestamp_before_max_ms = n,
            ("message.timestamp.after.max.ms", Some(n)) => c.message_timestamp_after_max_ms = n,
            ("delete.retention.ms", Some(n)) => c.delete_retention_ms = n,
            ("min.compaction.lag.ms", Some(n)) => c.min_compaction_lag_ms = n,
            ("max.compaction.lag.ms", Some(n)) => c.max_compaction_lag_ms = n,
            ("message.timestamp.type", _) => {
                c.timestamp_type = match v.as_str() {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => return Err(unsupported(k, v, "use CreateTime or LogAppendTime")),
                }
            }
            ("cleanup.policy", _) => {
                c.cleanup_policy = CleanupPolicy::parse(v)
                    .ok_or_else(|| unsupported(k, v, "use delete, compact, or compact,delete"))?;
            }
            ("min.cleanable.dirty.ratio", _) => {
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
            ("compression.type", _) if v != "producer" => {
                return Err(unsupported(
                    k,
                    v,
                    "only \"producer\" is supported (batches are stored as sent)",
                ));
            }
            (meta::replication::UNCLEAN_LEADER_ELECTION_CONFIG, _)
                if v != "true" && v != "false" =>
            {
                return Err(unsupported(k, v, "use true or false"));
            }
            // Fan-out links (seed 000); the link itself lives in the metastore.
            ("fanout.parent", _) if v.is_empty() => {
                return Err(InvalidTopicConfig::Incomplete {
                    key: k.clone(),
                    why: "is empty: name the parent topic",
                });
            }
            ("fanout.delay.ms", _) if !configs.contains_key("fanout.parent") => {
                return Err(InvalidTopicConfig::Incomplete {
                    key: k.clone(),
                    why: "needs fanout.parent",
                });
            }
            _ => {}
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
        .map(|k| match configs.get(k.name) {
            Some(v) => (k.name.to_string(), v.clone(), false, k.ty),
            None => (k.name.to_string(), (k.default)(defaults), true, k.ty),
        })
        .collect()
}

/// The type of topic config `name`, if the broker knows it.
pub fn config_type(name: &str) -> Option<ConfigType> {
    config_key(name).map(|k| k.ty)
}

/// What topic config `name` is when a topic does not set it (the broker's default; empty for
/// a key the broker does not know).
pub fn default_value(name: &str, d: &LogConfig) -> String {
    config_key(name).map_or_else(String::new, |k| (k.default)(d))
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

    /// Kafka 4.4's topic configs that ringlog takes as Kafka does: each one's default as
    /// Kafka shows it, values at the ends of its range accepted, values past them refused
    /// with INVALID_CONFIG's message naming the key.
    #[test]
    fn kafka_topic_configs_are_checked_as_kafka_checks_them() {
        let d = LogConfig::default();
        let max = i64::MAX.to_string();
        // (key, Kafka's type, Kafka's default, accepted values, refused values)
        type Case<'a> = (&'a str, ConfigType, &'a str, &'a [&'a str], &'a [&'a str]);
        let cases: &[Case] = &[
            (
                "flush.messages",
                ConfigType::Long,
                &max,
                &["1", &max],
                &["0", "-1", "x"],
            ),
            (
                "flush.ms",
                ConfigType::Long,
                &max,
                &["0", " 5 ", &max],
                &["-1", "1.5"],
            ),
            (
                "compression.gzip.level",
                ConfigType::Int,
                "-1",
                &["-1", "1", "9"],
                &["0", "10", "-2"],
            ),
            (
                "compression.lz4.level",
                ConfigType::Int,
                "9",
                &["1", "17"],
                &["0", "18"],
            ),
            (
                "compression.zstd.level",
                ConfigType::Int,
                "3",
                &["-131072", "0", "22"],
                &["-131073", "23"],
            ),
            (
                "segment.jitter.ms",
                ConfigType::Long,
                "0",
                &["0", "60000", &max],
                &["-1"],
            ),
            (
                "segment.index.bytes",
                ConfigType::Int,
                "10485760",
                &["4", "2147483647"],
                &["3", "2147483648"],
            ),
            (
                "index.interval.bytes",
                ConfigType::Int,
                "4096",
                &["0", "2147483647"],
                &["-1", "2147483648"],
            ),
            (
                "preallocate",
                ConfigType::Boolean,
                "false",
                &["true", "false", "TRUE", " False"],
                &["yes", "1", ""],
            ),
            (
                "file.delete.delay.ms",
                ConfigType::Long,
                "60000",
                &["0", &max],
                &["-1"],
            ),
            (
                "message.timestamp.before.max.ms",
                ConfigType::Long,
                &max,
                &["0", "3600000", &max],
                &["-1"],
            ),
            (
                "message.timestamp.after.max.ms",
                ConfigType::Long,
                "3600000",
                &["0", &max],
                &["-1"],
            ),
            (
                "leader.replication.throttled.replicas",
                ConfigType::List,
                "",
                &[
                    "",
                    "*",
                    " * ",
                    "0:1",
                    "0:1,1:2",
                    "0:1, 1:2",
                    "0:1,",
                    "99999999999:1",
                ],
                &[
                    "x", "0:1,*", "*,*", "0", "0:", ":1", "0:a", "-1:2", "0:1:2", "+1:2",
                ],
            ),
            (
                "follower.replication.throttled.replicas",
                ConfigType::List,
                "",
                &["*", "2:3"],
                &["2;3", "a:b"],
            ),
        ];
        for &(key, ty, default, good, bad) in cases {
            assert_eq!(config_type(key), Some(ty), "{key}");
            assert_eq!(default_value(key, &d), default, "{key}");
            let shown = describe(&BTreeMap::new(), &d);
            assert!(
                shown
                    .iter()
                    .any(|(k, v, is_default, _)| k == key && v == default && *is_default),
                "{key}"
            );
            for v in good {
                to_log_config(&cfg(&[(key, v)]), &d).unwrap_or_else(|e| panic!("{key}={v:?}: {e}"));
                let shown = describe(&cfg(&[(key, v)]), &d);
                assert!(shown
                    .iter()
                    .any(|(k, s, is_default, _)| k == key && s == v && !*is_default));
            }
            for v in bad {
                let e = to_log_config(&cfg(&[(key, v)]), &d)
                    .err()
                    .unwrap_or_else(|| panic!("{key}={v:?} accepted"));
                assert!(e.to_string().starts_with(key), "{key}={v:?}: {e}");
            }
        }
        // Range refusals name the range; the throttle lists name Kafka's format.
        let e = to_log_config(&cfg(&[("compression.lz4.level", "18")]), &d).unwrap_err();
        assert_eq!(
            e.to_string(),
            "compression.lz4.level=18 is out of range [1, 17]"
        );
        let e = to_log_config(&cfg(&[("compression.gzip.level", "0")]), &d).unwrap_err();
        assert!(
            e.to_string().contains("-1") && e.to_string().contains("1 to 9"),
            "{e}"
        );
        let e =
            to_log_config(&cfg(&[("leader.replication.throttled.replicas", "x")]), &d).unwrap_err();
        assert!(e.to_string().contains("[partitionId]:[brokerId]"), "{e}");
        // The ones with a meaning in ringlog reach the log's config.
        let c = to_log_config(
            &cfg(&[
                ("message.timestamp.before.max.ms", "1000"),
                ("message.timestamp.after.max.ms", "2000"),
                ("segment.jitter.ms", "300"),
                ("index.interval.bytes", "0"),
            ]),
            &d,
        )
        .unwrap();
        assert_eq!(c.message_timestamp_before_max_ms, 1000);
        assert_eq!(c.message_timestamp_after_max_ms, 2000);
        assert_eq!(c.segment_jitter_ms, 300);
        assert_eq!(c.index_interval_bytes, 0);
        // Defaults are Kafka's: any age, at most an hour ahead, no jitter, an index entry
        // every 4096 bytes.
        assert_eq!(d.message_timestamp_before_max_ms, i64::MAX);
        assert_eq!(d.message_timestamp_after_max_ms, 3_600_000);
        assert_eq!((d.segment_jitter_ms, d.index_interval_bytes), (0, 4096));
        // Each key is listed once.
        let mut names: Vec<&str> = TOPIC_CONFIGS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TOPIC_CONFIGS.len());
    }
}
