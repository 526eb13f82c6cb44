//! The broker's own settings (`ringlog serve` flags and config file), with Kafka-like defaults.

use std::net::SocketAddr;
use std::path::PathBuf;

use engine::LogConfig;

/// Kafka's `socket.request.max.bytes` default (100 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 100 * 1024 * 1024;
/// Requests of one connection in flight at once (pipelining); the reader waits beyond this.
pub const DEFAULT_MAX_INFLIGHT_REQUESTS_PER_CONNECTION: usize = 128;
/// How often each core applies retention to its partitions (Kafka:
/// `log.retention.check.interval.ms`, 5 min).
pub const DEFAULT_RETENTION_CHECK_INTERVAL_MS: u64 = 300_000;
/// Longest Fetch long-poll the broker honours, whatever the client asks.
pub const MAX_FETCH_WAIT_MS: u64 = 30_000;
/// Registered I/O memory per executor (3 rings each): 3 × this × cores must fit in memlock.
pub const DEFAULT_IO_MEMORY_BYTES: usize = 1 << 20;
/// How long an idle core busy-polls before parking (see `ShardConfig::spin_before_park_us`).
pub const DEFAULT_SPIN_BEFORE_PARK_US: u64 = 0;
/// Closed segments each core keeps open for reads.
pub const DEFAULT_READ_CACHE_SEGMENTS: usize = engine::core_storage::DEFAULT_READ_CACHE_SEGMENTS;

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// Host and port given to clients in Metadata (default: the listen address).
    pub advertised: Option<(String, u16)>,
    /// CPUs to run one executor on each.
    pub cpus: Vec<usize>,
    pub node_id: u64,
    pub log_requests: bool,
    pub max_request_bytes: usize,
    pub max_inflight_requests_per_connection: usize,
    pub auto_create_topics: bool,
    /// Partitions of a topic created without a count (`num.partitions`).
    pub default_partitions: u32,
    /// Defaults for topic configs (`log.segment.bytes`, `log.retention.ms`, ...).
    pub log_defaults: LogConfig,
    pub retention_check_interval_ms: u64,
    pub io_memory_bytes: usize,
    pub read_cache_segments: usize,
    pub spin_before_park_us: u64,
    /// How long a new group waits for more members before its first rebalance completes
    /// (Kafka's `group.initial.rebalance.delay.ms`).
    pub group_initial_rebalance_delay_ms: u64,
    /// Admin HTTP listener (`/metrics`, `/v1/shard-move`), served by core 0; off when `None`.
    pub metrics_listen: Option<std::net::SocketAddr>,
}

impl BrokerConfig {
    pub fn new(data_dir: PathBuf, listen: SocketAddr, cpus: Vec<usize>) -> Self {
        Self {
            data_dir,
            listen,
            advertised: None,
            cpus,
            node_id: 1,
            log_requests: false,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_inflight_requests_per_connection: DEFAULT_MAX_INFLIGHT_REQUESTS_PER_CONNECTION,
            auto_create_topics: false,
            default_partitions: 1,
            log_defaults: LogConfig::default(),
            retention_check_interval_ms: DEFAULT_RETENTION_CHECK_INTERVAL_MS,
            io_memory_bytes: DEFAULT_IO_MEMORY_BYTES,
            read_cache_segments: DEFAULT_READ_CACHE_SEGMENTS,
            spin_before_park_us: DEFAULT_SPIN_BEFORE_PARK_US,
            group_initial_rebalance_delay_ms: crate::group::DEFAULT_INITIAL_REBALANCE_DELAY_MS,
            metrics_listen: None,
        }
    }

    pub fn advertised(&self) -> (String, u16) {
        self.advertised
            .clone()
            .unwrap_or_else(|| (self.listen.ip().to_string(), self.listen.port()))
    }
}
