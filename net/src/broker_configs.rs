//! A broker's settings under Kafka's broker config names (`log.retention.ms`,
//! `message.max.bytes`, `num.partitions`, ...), as DescribeConfigs shows a BROKER resource and
//! `kafka-configs --entity-type brokers --describe --all` prints it. Each row maps one Kafka
//! name to the ringlog setting that has its meaning; a value that differs from ringlog's
//! built-in default is shown as the node's static config, the rest as defaults. ringlog's
//! broker settings are fixed for the life of the process (flags and config file), so every
//! entry is read-only.

use crate::config::BrokerConfig;
use crate::topic_config::ConfigType;

/// Kafka's DescribeConfigs `config_source`: set in the node's own config (flags, file).
pub const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;
/// Kafka's DescribeConfigs `config_source`: the built-in default.
pub const SOURCE_DEFAULT_CONFIG: i8 = 5;

const MS_PER_HOUR: i64 = 3_600_000;
const MS_PER_MINUTE: i64 = 60_000;
const MS_PER_SECOND: u64 = 1_000;

/// One broker config as DescribeConfigs shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerConfigEntry {
    pub name: &'static str,
    /// `None`: Kafka's null (no value, e.g. no rack).
    pub value: Option<String>,
    pub source: i8,
    pub config_type: ConfigType,
}

type Read = fn(&BrokerConfig) -> Option<String>;

fn some(v: impl ToString) -> Option<String> {
    Some(v.to_string())
}

/// `ms` in whole `unit`s (-1 for -1: unlimited), or none when it is not a whole number of them.
fn whole(ms: i64, unit: i64) -> Option<String> {
    match ms {
        -1 => some(-1),
        ms if ms % unit == 0 => some(ms / unit),
        _ => None,
    }
}

fn retention_ms(c: &BrokerConfig) -> i64 {
    c.log_defaults.retention_ms.unwrap_or(-1)
}

/// Every broker config ringlog has a meaning for, by Kafka's name (sorted by name, as Kafka
/// lists them), with its Kafka type and where ringlog keeps it.
const BROKER_CONFIGS: &[(&str, ConfigType, Read)] = &[
    ("auto.create.topics.enable", ConfigType::Boolean, |c| {
        some(c.auto_create_topics)
    }),
    ("auto.leader.rebalance.enable", ConfigType::Boolean, |c| {
        some(c.auto_leader_rebalance)
    }),
    ("broker.id", ConfigType::Int, |c| some(c.node_id)),
    ("broker.rack", ConfigType::String, |c| c.rack.clone()),
    ("compression.type", ConfigType::String, |_| some("producer")),
    ("connections.max.idle.ms", ConfigType::Long, |c| {
        some(c.connections_max_idle_ms)
    }),
    ("connections.max.reauth.ms", ConfigType::Long, |c| {
        some(c.connections_max_reauth_ms)
    }),
    ("default.replication.factor", ConfigType::Int, |c| {
        some(c.default_replication_factor)
    }),
    ("fetch.max.bytes", ConfigType::Int, |c| {
        some(c.fetch_max_bytes)
    }),
    (
        "group.consumer.heartbeat.interval.ms",
        ConfigType::Int,
        |c| some(c.group_consumer_heartbeat_interval_ms),
    ),
    ("group.consumer.max.size", ConfigType::Int, |c| {
        some(c.group_consumer_max_size)
    }),
    ("group.consumer.session.timeout.ms", ConfigType::Int, |c| {
        some(c.group_consumer_session_timeout_ms)
    }),
    ("group.initial.rebalance.delay.ms", ConfigType::Int, |c| {
        some(c.group_initial_rebalance_delay_ms)
    }),
    (
        "leader.imbalance.check.interval.seconds",
        ConfigType::Long,
        |c| some(c.leader_imbalance_check_interval_ms / MS_PER_SECOND),
    ),
    (
        "leader.imbalance.per.broker.percentage",
        ConfigType::Int,
        |c| some(c.leader_imbalance_per_broker_percentage),
    ),
    ("log.cleaner.backoff.ms", ConfigType::Long, |c| {
        some(c.log_cleaner_backoff_ms)
    }),
    ("log.cleaner.dedupe.buffer.size", ConfigType::Long, |c| {
        some(c.log_cleaner_dedupe_buffer_bytes)
    }),
    ("log.cleaner.delete.retention.ms", ConfigType::Long, |c| {
        some(c.log_defaults.delete_retention_ms)
    }),
    (
        "log.cleaner.io.max.bytes.per.second",
        ConfigType::Double,
        |c| {
            // Unthrottled (ringlog's none) is Kafka's default, Double.MAX_VALUE, as Java prints it.
            match c.log_cleaner_io_max_bytes_per_second {
                None => some("1.7976931348623157E308"),
                Some(b) => some(b as f64),
            }
        },
    ),
    ("log.cleaner.max.compaction.lag.ms", ConfigType::Long, |c| {
        some(c.log_defaults.max_compaction_lag_ms)
    }),
    ("log.cleaner.min.cleanable.ratio", ConfigType::Double, |c| {
        some(c.log_defaults.min_cleanable_dirty_ratio)
    }),
    ("log.cleaner.min.compaction.lag.ms", ConfigType::Long, |c| {
        some(c.log_defaults.min_compaction_lag_ms)
    }),
    ("log.cleanup.policy", ConfigType::List, |c| {
        some(c.log_defaults.cleanup_policy)
    }),
    ("log.message.timestamp.type", ConfigType::String, |c| {
        some(crate::topic_config::default_value(
            "message.timestamp.type",
            &c.log_defaults,
        ))
    }),
    ("log.retention.bytes", ConfigType::Long, |c| {
        some(c.log_defaults.retention_bytes.map_or(-1, |b| b as i64))
    }),
    ("log.retention.check.interval.ms", ConfigType::Long, |c| {
        some(c.retention_check_interval_ms)
    }),
    ("log.retention.hours", ConfigType::Int, |c| {
        whole(retention_ms(c), MS_PER_HOUR)
    }),
    ("log.retention.minutes", ConfigType::Int, |c| {
        whole(retention_ms(c), MS_PER_MINUTE)
    }),
    ("log.retention.ms", ConfigType::Long, |c| {
        some(retention_ms(c))
    }),
    ("log.roll.hours", ConfigType::Int, |c| {
        whole(c.log_defaults.segment_ms, MS_PER_HOUR)
    }),
    ("log.roll.ms", ConfigType::Long, |c| {
        some(c.log_defaults.segment_ms)
    }),
    ("log.segment.bytes", ConfigType::Int, |c| {
        some(c.log_defaults.segment_bytes)
    }),
    ("max.connections", ConfigType::Int, |c| {
        some(c.max_connections)
    }),
    ("max.connections.per.ip", ConfigType::Int, |c| {
        some(c.max_connections_per_ip)
    }),
    ("message.max.bytes", ConfigType::Int, |c| {
        some(c.log_defaults.max_batch_bytes)
    }),
    ("min.insync.replicas", ConfigType::Int, |_| some(1)),
    ("node.id", ConfigType::Int, |c| some(c.node_id)),
    ("num.partitions", ConfigType::Int, |c| {
        some(c.default_partitions)
    }),
    (
        "offsets.retention.check.interval.ms",
        ConfigType::Long,
        |c| some(c.offsets_retention_check_interval_ms),
    ),
    ("offsets.retention.minutes", ConfigType::Int, |c| {
        whole(c.offsets_retention_ms, MS_PER_MINUTE)
    }),
    ("offsets.topic.replication.factor", ConfigType::Short, |c| {
        some(c.offsets_topic_replication_factor)
    }),
    ("offsets.topic.segment.bytes", ConfigType::Int, |c| {
        some(c.offsets_topic_segment_bytes)
    }),
    ("replica.lag.time.max.ms", ConfigType::Long, |c| {
        some(c.replica_lag_time_max_ms)
    }),
    ("socket.request.max.bytes", ConfigType::Int, |c| {
        some(c.max_request_bytes)
    }),
    ("transaction.max.timeout.ms", ConfigType::Int, |c| {
        some(c.transaction_max_timeout_ms)
    }),
    (
        "transaction.state.log.replication.factor",
        ConfigType::Short,
        |c| some(c.transaction_state_replication_factor),
    ),
    ("transactional.id.expiration.ms", ConfigType::Int, |c| {
        some(c.transactional_id_expiration_ms)
    }),
    (
        "unclean.leader.election.enable",
        ConfigType::Boolean,
        |_| some(false),
    ),
];

/// Every broker config of `config` under Kafka's names, sorted by name.
pub fn describe(config: &BrokerConfig) -> Vec<BrokerConfigEntry> {
    let defaults = BrokerConfig::new(config.data_dir.clone(), config.listen, config.cpus.clone());
    BROKER_CONFIGS
        .iter()
        .map(|&(name, config_type, read)| {
            let value = read(config);
            let source = if value == read(&defaults) {
                SOURCE_DEFAULT_CONFIG
            } else {
                SOURCE_STATIC_BROKER_CONFIG
            };
            BrokerConfigEntry {
                name,
                value,
                source,
                config_type,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BrokerConfig {
        BrokerConfig::new("/tmp/x".into(), "127.0.0.1:9092".parse().unwrap(), vec![0])
    }

    fn value(entries: &[BrokerConfigEntry], name: &str) -> (Option<String>, i8) {
        let e = entries.iter().find(|e| e.name == name).expect(name);
        (e.value.clone(), e.source)
    }

    #[test]
    fn names_are_kafkas_sorted_and_unique() {
        let names: Vec<&str> = BROKER_CONFIGS.iter().map(|r| r.0).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted, "sorted by name, each once");
        for topic_level in [
            "retention.ms",
            "cleanup.policy",
            "segment.bytes",
            "max.message.bytes",
        ] {
            assert!(
                !names.contains(&topic_level),
                "{topic_level} is a topic name"
            );
        }
    }

    #[test]
    fn defaults_read_as_kafkas_and_set_values_as_static() {
        let d = describe(&config());
        let default = |v: &str| (Some(v.to_string()), SOURCE_DEFAULT_CONFIG);
        assert_eq!(value(&d, "log.retention.hours"), default("168"));
        assert_eq!(value(&d, "log.retention.ms"), default("604800000"));
        assert_eq!(value(&d, "log.segment.bytes"), default("1073741824"));
        assert_eq!(value(&d, "message.max.bytes"), default("1048588"));
        assert_eq!(value(&d, "log.cleanup.policy"), default("delete"));
        assert_eq!(value(&d, "num.partitions"), default("1"));
        assert_eq!(value(&d, "broker.id"), default("1"));
        assert_eq!(value(&d, "broker.rack"), (None, SOURCE_DEFAULT_CONFIG));

        let mut c = config();
        c.log_defaults.retention_ms = Some(90 * 60_000);
        c.default_partitions = 6;
        c.node_id = 3;
        c.rack = Some("r1".into());
        let d = describe(&c);
        let set = |v: &str| (Some(v.to_string()), SOURCE_STATIC_BROKER_CONFIG);
        assert_eq!(value(&d, "log.retention.ms"), set("5400000"));
        assert_eq!(value(&d, "log.retention.minutes"), set("90"));
        assert_eq!(
            value(&d, "log.retention.hours"),
            (None, SOURCE_STATIC_BROKER_CONFIG),
            "not whole hours"
        );
        assert_eq!(value(&d, "num.partitions"), set("6"));
        assert_eq!(value(&d, "node.id"), set("3"));
        assert_eq!(value(&d, "broker.rack"), set("r1"));
        c.log_defaults.retention_ms = None;
        assert_eq!(value(&describe(&c), "log.retention.hours"), set("-1"));
    }
}
