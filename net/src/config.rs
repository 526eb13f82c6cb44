//! The broker's own settings (`ringlog serve` flags and config file), with Kafka-like defaults.

use std::net::SocketAddr;
use std::path::PathBuf;

use engine::LogConfig;

/// `replica.lag.time.max.ms` when not configured (issue #18).
pub const DEFAULT_REPLICA_LAG_TIME_MAX_MS: u64 = 10_000;
/// `leader.imbalance.check.interval.seconds` when not configured (Kafka's 300 s), in ms.
pub const DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS: u64 = 300_000;
/// `leader.imbalance.per.broker.percentage` when not configured (Kafka's 10).
pub const DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE: u32 = 10;
/// `offsets.topic.replication.factor` when not configured (Kafka's default): replicas of each
/// `__consumer_offsets` partition, at most the cluster's peers.
pub const DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR: usize = 3;
/// `transaction.state.log.replication.factor` when not configured (Kafka's default):
/// replicas of each `__transaction_state` partition, at most the cluster's peers.
pub const DEFAULT_TRANSACTION_STATE_REPLICATION_FACTOR: usize = 3;
/// Replicas of each `__barrier_state` partition when not configured, at most the peers.
pub const DEFAULT_BARRIER_STATE_REPLICATION_FACTOR: usize = 3;
/// Kafka's `socket.request.max.bytes` default (100 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 100 * 1024 * 1024;
/// Requests of one connection in flight at once (pipelining); the reader waits beyond this.
pub const DEFAULT_MAX_INFLIGHT_REQUESTS_PER_CONNECTION: usize = 128;
/// Connections the broker holds at once (Kafka's `max.connections`); past it a new connection
/// is closed at accept.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;
/// Connections one client IP may hold at once (Kafka's `max.connections.per.ip`).
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 16_384;
/// A connection with no request for this long and nothing in flight is closed (Kafka's
/// `connections.max.idle.ms`).
pub const DEFAULT_CONNECTIONS_MAX_IDLE_MS: u64 = 600_000;
/// A client quota's token bucket holds this much of the quota (`crate::quota`): the burst a
/// client sends at its quota's full rate before it is throttled.
pub const DEFAULT_QUOTA_BURST_MS: u64 = 1_000;
/// A request frame must arrive whole within this long of its first byte, and the peer must
/// take a response within it (Kafka's `request.timeout.ms`); a slow sender (slowloris) or a
/// peer that stopped reading is disconnected.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 30_000;
/// The largest frame a client of a SASL listener may send before it has authenticated
/// (Kafka's `sasl.server.max.receive.size`); a larger announced size closes the connection
/// before a byte of the body is read or budgeted.
pub const DEFAULT_SASL_SERVER_MAX_RECEIVE_BYTES: usize = 512 << 10;
/// Bytes one connection may have in flight: request frames read and not yet answered, plus the
/// response room reserved for them (a Fetch reserves its response cap). A client that
/// pipelines and never reads stops being read at this bound. A single request larger than this
/// is admitted only when nothing else of the connection is in flight.
pub const DEFAULT_MAX_INFLIGHT_BYTES_PER_CONNECTION: usize = 128 << 20;
/// Request frame bytes in flight on one core across its connections (Kafka's
/// `queued.max.request.bytes`): readers wait for room before they read a frame's body.
pub const DEFAULT_QUEUED_MAX_REQUEST_BYTES_PER_CORE: usize = 512 << 20;
/// Largest Fetch response the broker builds, whatever the client asks (Kafka's broker-side
/// `fetch.max.bytes`, 55 MiB).
pub const DEFAULT_FETCH_MAX_BYTES: usize = 57_671_680;
/// How often each core applies retention to its partitions (Kafka:
/// `log.retention.check.interval.ms`, 5 min).
pub const DEFAULT_RETENTION_CHECK_INTERVAL_MS: u64 = 300_000;
/// How long each core's cleaner sleeps when no compacted log needs cleaning (Kafka:
/// `log.cleaner.backoff.ms`, 15 s).
pub const DEFAULT_LOG_CLEANER_BACKOFF_MS: u64 = 15_000;
/// Size of each core's cleaner key → offset map (Kafka: `log.cleaner.dedupe.buffer.size`).
pub const DEFAULT_LOG_CLEANER_DEDUPE_BUFFER_BYTES: usize =
    engine::cleaner::DEFAULT_DEDUPE_BUFFER_BYTES;
/// Segment size of `__consumer_offsets` when the broker creates it (Kafka:
/// `offsets.topic.segment.bytes`, 100 MiB): small segments let the cleaner compact it early.
pub const DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES: u64 = 100 << 20;
/// How long a memberless group's committed offsets are kept (Kafka:
/// `offsets.retention.minutes`, 7 days).
pub const DEFAULT_OFFSETS_RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;
/// How often each core looks for expired offsets (Kafka: `offsets.retention.check.interval.ms`).
pub const DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS: u64 = 600_000;
/// Longest Fetch long-poll the broker honours, whatever the client asks.
pub const MAX_FETCH_WAIT_MS: u64 = 30_000;
/// Registered I/O memory per executor (3 rings each): 3 × this × cores must fit in memlock.
pub const DEFAULT_IO_MEMORY_BYTES: usize = 1 << 20;
/// How long an idle core busy-polls before parking (see `ShardConfig::spin_before_park_us`).
pub const DEFAULT_SPIN_BEFORE_PARK_US: u64 = 0;
/// Closed segments each core keeps open for reads.
pub const DEFAULT_READ_CACHE_SEGMENTS: usize = engine::core_storage::DEFAULT_READ_CACHE_SEGMENTS;
/// Core-direct routing (`--core-direct`): off until benchmarks set the default.
pub const DEFAULT_CORE_DIRECT: bool = false;

/// Partitions a core opens or closes at once (start-up, restart after a crash, shutdown,
/// topic create and delete; `crate::opening`): each waits on small file reads and fsyncs.
pub const MAX_CONCURRENT_PARTITION_OPENS: usize = 32;
/// Partitions each core opens at once in its background pass after start, unless
/// `background-opens-per-core` says otherwise (the rest of `MAX_CONCURRENT_PARTITION_OPENS` is
/// left to requests).
pub const DEFAULT_BACKGROUND_OPENS_PER_CORE: usize = 16;

/// How often a clustered node tells the metastore it is alive (Kafka's
/// `broker.heartbeat.interval.ms`).
pub const DEFAULT_BROKER_HEARTBEAT_INTERVAL_MS: u64 = 2_000;
/// How long an admin change (create, delete, alter) waits for every other live node to
/// apply it before it is answered REQUEST_TIMED_OUT.
pub const CLUSTER_APPLY_TIMEOUT_MS: u64 = 10_000;
/// How long a clustered node's start waits for the metastore to take its registration (a
/// quorum of the peers must be up).
pub const CLUSTER_JOIN_TIMEOUT_MS: u64 = 120_000;

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// Host and port given to clients in Metadata (default: the listen address).
    pub advertised: Option<(String, u16)>,
    /// CPUs to run one executor on each.
    pub cpus: Vec<usize>,
    pub node_id: u64,
    /// The metastore's members (`--peers 1=host:port,...`: node id -> its metastore address,
    /// this node's own included); empty: the embedded single-node metastore.
    pub peers: std::collections::BTreeMap<u64, String>,
    /// A node added to a running cluster: a member's metastore address to ask for admission
    /// (it joins as a learner and is promoted to voter); `--peers` then needs only this
    /// node's own entry.
    pub join: Option<String>,
    /// This node's rack, listed in Metadata (`broker.rack`).
    pub rack: Option<String>,
    /// Clustered: how often this node heartbeats to the metastore, and how long the leader
    /// waits for a heartbeat before it fences a node (`broker-session-timeout-ms`).
    pub broker_heartbeat_interval_ms: u64,
    pub broker_session_timeout_ms: u64,
    pub log_requests: bool,
    pub max_request_bytes: usize,
    pub max_inflight_requests_per_connection: usize,
    pub max_inflight_bytes_per_connection: usize,
    pub queued_max_request_bytes_per_core: usize,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub connections_max_idle_ms: u64,
    pub request_timeout_ms: u64,
    /// The largest frame read from a SASL listener's client before it has authenticated
    /// (`sasl-server-max-receive-bytes`).
    pub sasl_server_max_receive_bytes: usize,
    /// How long a SASL listener's client may take to authenticate, from its first read
    /// (`sasl-authentication-deadline-ms`, by default the request timeout); then it is closed.
    pub sasl_authentication_deadline_ms: u64,
    pub fetch_max_bytes: usize,
    /// Fetch sessions the node keeps, split between its cores (Kafka's
    /// `max.incremental.fetch.session.cache.slots`; `crate::fetch_session`); 0: none.
    pub max_incremental_fetch_session_cache_slots: usize,
    pub auto_create_topics: bool,
    /// Partitions of a topic created without a count (`num.partitions`).
    pub default_partitions: u32,
    /// Defaults for topic configs (`log.segment.bytes`, `log.retention.ms`, ...).
    pub log_defaults: LogConfig,
    pub retention_check_interval_ms: u64,
    /// Each core's cleaner: pause between rounds when nothing is due, key map size, and an
    /// I/O cap (read + written bytes per second; `None`: unthrottled, Kafka's default).
    pub log_cleaner_backoff_ms: u64,
    pub log_cleaner_dedupe_buffer_bytes: usize,
    pub log_cleaner_io_max_bytes_per_second: Option<u64>,
    pub offsets_topic_segment_bytes: u64,
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: u64,
    /// The longest `transaction.timeout.ms` a transactional producer may ask for
    /// (`transaction.max.timeout.ms`); longer gets INVALID_TRANSACTION_TIMEOUT.
    pub transaction_max_timeout_ms: u64,
    /// How long a barrier injection retries the markers of partitions that refuse before it
    /// publishes the cut as partial (`barrier-injection-timeout-ms`).
    pub barrier_injection_timeout_ms: u64,
    /// Replicas of a topic created without a replication factor (`default.replication.factor`).
    pub default_replication_factor: usize,
    /// Replicas of each `__consumer_offsets` partition when the cluster first creates it
    /// (`offsets.topic.replication.factor`), at most the peers: its groups' coordinator fails
    /// over with the partition's leader.
    pub offsets_topic_replication_factor: usize,
    /// Replicas of each `__transaction_state` partition when the cluster first creates it
    /// (`transaction.state.log.replication.factor`), at most the peers: the transaction
    /// coordinator fails over with the partition's leader.
    pub transaction_state_replication_factor: usize,
    /// Replicas of each `__barrier_state` partition when the first barrier group creates it,
    /// at most the peers: a barrier group's coordinator fails over with the leader.
    pub barrier_state_replication_factor: usize,
    /// A follower that has not caught up with its leader's log end for this long leaves the
    /// ISR (`replica.lag.time.max.ms`).
    pub replica_lag_time_max_ms: u64,
    /// Cluster mode: the metastore leader's node hands leadership back to preferred replicas
    /// (`auto.leader.rebalance.enable`; `crate::leader_balance`).
    pub auto_leader_rebalance: bool,
    /// How often it looks (`leader.imbalance.check.interval.seconds`, here in ms).
    pub leader_imbalance_check_interval_ms: u64,
    /// A node's share of the partitions it prefers but does not lead past which they go back
    /// to it (`leader.imbalance.per.broker.percentage`).
    pub leader_imbalance_per_broker_percentage: u32,
    /// A transactional id with no transaction open and no request for this long is forgotten
    /// (`transactional.id.expiration.ms`); its next InitProducerId starts it afresh.
    pub transactional_id_expiration_ms: u64,
    /// How much of a client quota a client may send at once (`quota-burst-ms`).
    pub quota_burst_ms: u64,
    pub io_memory_bytes: usize,
    pub read_cache_segments: usize,
    /// Data files the node keeps open at once, split between the cores (`max-open-files`);
    /// `None`: what the fd limit leaves after its reserve (`crate::fd_budget`).
    pub max_open_files: Option<usize>,
    /// Partitions the node serves at most (`max-partitions`).
    pub max_partitions: usize,
    /// A KIP-848 consumer-group member with no heartbeat for this long is fenced
    /// (`group.consumer.session.timeout.ms`).
    pub group_consumer_session_timeout_ms: u64,
    /// How often KIP-848 members are told to heartbeat (`group.consumer.heartbeat.interval.ms`).
    pub group_consumer_heartbeat_interval_ms: u64,
    /// Members one KIP-848 consumer group holds at most (`group.consumer.max.size`).
    pub group_consumer_max_size: usize,
    /// Partitions each core opens at once in its background pass after start
    /// (`background-opens-per-core`); 0: a partition is opened by its first request only.
    pub background_opens_per_core: usize,
    /// Which runtime carries each core's appends (`storage-io`).
    pub storage_io: engine::StorageIo,
    /// Registered write buffers of each core's ring (`storage-io = io-uring`).
    pub registered_buffer_bytes: usize,
    /// Recently appended batches each core keeps for fetches at the tail (0: off).
    pub tail_cache_bytes: u64,
    pub spin_before_park_us: u64,
    /// Core-direct routing (`--core-direct on`): each core also listens on a port of its own
    /// and is advertised in Metadata as a broker of its own (`crate::brokers`), so clients
    /// send each partition's and group's requests straight to its owner core.
    pub core_direct: bool,
    /// Core-direct: core c listens on this + c. `None`: on the listen port + 1 + c, or on a
    /// free port each when the listen port is 0; `Some(0)`: a free port each.
    pub core_direct_base_port: Option<u16>,
    /// How long a new group waits for more members before its first rebalance completes
    /// (Kafka's `group.initial.rebalance.delay.ms`).
    pub group_initial_rebalance_delay_ms: u64,
    /// Admin HTTP listener (`/metrics`, `/v1/shards`, `/v1/shard-move`, ...), served by core 0;
    /// off when `None`.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// The Kafka listener's security protocol (`--listener NAME=PROTOCOL://HOST:PORT`):
    /// PLAINTEXT, or SASL_PLAINTEXT (SASL before anything else, `crate::sasl`).
    pub security_protocol: SecurityProtocol,
    /// Listeners besides the primary one (`--listener` given more than once): listener 1,
    /// 2, ... (the primary is listener 0). Each core accepts on every one.
    pub extra_listeners: Vec<ExtraListener>,
    /// The authorizer's settings (`super-users`, `allow-everyone-if-no-acl-found`).
    pub acl: crate::acl::AclConfig,
    /// The TLS identity of an SSL or SASL_SSL listener (`--tls-cert`, `--tls-key`).
    pub tls: Option<std::sync::Arc<futures_rustls::rustls::ServerConfig>>,
    /// OAUTHBEARER validation (`--oauth-jwks-file`, `--oauth-allow-unsecured-tokens`); none:
    /// the mechanism is not offered.
    pub oauth: Option<std::sync::Arc<crate::oauth::OAuthConfig>>,
    /// An authenticated session lasts at most this long before the client must
    /// re-authenticate (KIP-368, Kafka's `connections.max.reauth.ms`); 0: for ever.
    pub connections_max_reauth_ms: u64,
    /// The secret node RPC frames are authenticated with (`--cluster-secret-file`,
    /// `crate::node_rpc`); none: they are not.
    pub cluster_secret: Option<std::sync::Arc<[u8]>>,
    /// How a client certificate's subject becomes a principal (Kafka's
    /// `ssl.principal.mapping.rules`; none: the whole subject).
    pub ssl_principal_mapping_rules: Vec<crate::tls::PrincipalRule>,
    /// Test and drill hook: every core's logs go through an engine fault injector that
    /// `POST /v1/debug/disk-fault` arms (EIO on the next write or fdatasync of that core).
    /// Off by default; never for production.
    pub fault_injection: bool,
}

impl BrokerConfig {
    pub fn new(data_dir: PathBuf, listen: SocketAddr, cpus: Vec<usize>) -> Self {
        Self {
            data_dir,
            listen,
            advertised: None,
            cpus,
            node_id: 1,
            peers: std::collections::BTreeMap::new(),
            join: None,
            rack: None,
            broker_heartbeat_interval_ms: DEFAULT_BROKER_HEARTBEAT_INTERVAL_MS,
            broker_session_timeout_ms: meta::node::DEFAULT_BROKER_SESSION_TIMEOUT_MS,
            log_requests: false,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_inflight_requests_per_connection: DEFAULT_MAX_INFLIGHT_REQUESTS_PER_CONNECTION,
            max_inflight_bytes_per_connection: DEFAULT_MAX_INFLIGHT_BYTES_PER_CONNECTION,
            queued_max_request_bytes_per_core: DEFAULT_QUEUED_MAX_REQUEST_BYTES_PER_CORE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            connections_max_idle_ms: DEFAULT_CONNECTIONS_MAX_IDLE_MS,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            sasl_server_max_receive_bytes: DEFAULT_SASL_SERVER_MAX_RECEIVE_BYTES,
            sasl_authentication_deadline_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            max_incremental_fetch_session_cache_slots:
                crate::fetch_session::DEFAULT_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS,
            auto_create_topics: false,
            default_partitions: 1,
            log_defaults: LogConfig::default(),
            retention_check_interval_ms: DEFAULT_RETENTION_CHECK_INTERVAL_MS,
            log_cleaner_backoff_ms: DEFAULT_LOG_CLEANER_BACKOFF_MS,
            log_cleaner_dedupe_buffer_bytes: DEFAULT_LOG_CLEANER_DEDUPE_BUFFER_BYTES,
            log_cleaner_io_max_bytes_per_second: None,
            offsets_topic_segment_bytes: DEFAULT_OFFSETS_TOPIC_SEGMENT_BYTES,
            offsets_retention_ms: DEFAULT_OFFSETS_RETENTION_MS,
            offsets_retention_check_interval_ms: DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS,
            transaction_max_timeout_ms: crate::txn::DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
            barrier_injection_timeout_ms: crate::barrier::DEFAULT_BARRIER_INJECTION_TIMEOUT_MS,
            default_replication_factor: 1,
            offsets_topic_replication_factor: DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR,
            transaction_state_replication_factor: DEFAULT_TRANSACTION_STATE_REPLICATION_FACTOR,
            barrier_state_replication_factor: DEFAULT_BARRIER_STATE_REPLICATION_FACTOR,
            replica_lag_time_max_ms: DEFAULT_REPLICA_LAG_TIME_MAX_MS,
            auto_leader_rebalance: true,
            leader_imbalance_check_interval_ms: DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS,
            leader_imbalance_per_broker_percentage: DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
            transactional_id_expiration_ms: crate::txn::DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
            quota_burst_ms: DEFAULT_QUOTA_BURST_MS,
            io_memory_bytes: DEFAULT_IO_MEMORY_BYTES,
            read_cache_segments: DEFAULT_READ_CACHE_SEGMENTS,
            max_open_files: None,
            max_partitions: crate::fd_budget::DEFAULT_MAX_PARTITIONS,
            background_opens_per_core: DEFAULT_BACKGROUND_OPENS_PER_CORE,
            group_consumer_session_timeout_ms:
                crate::group::consumer::DEFAULT_CONSUMER_SESSION_TIMEOUT_MS,
            group_consumer_heartbeat_interval_ms:
                crate::group::consumer::DEFAULT_CONSUMER_HEARTBEAT_INTERVAL_MS,
            group_consumer_max_size: crate::group::consumer::DEFAULT_CONSUMER_GROUP_MAX_SIZE,
            storage_io: engine::StorageIo::default(),
            registered_buffer_bytes: engine::core_storage::DEFAULT_REGISTERED_BUFFER_BYTES,
            tail_cache_bytes: engine::tail_cache::DEFAULT_TAIL_CACHE_BYTES,
            spin_before_park_us: DEFAULT_SPIN_BEFORE_PARK_US,
            core_direct: DEFAULT_CORE_DIRECT,
            core_direct_base_port: None,
            group_initial_rebalance_delay_ms: crate::group::DEFAULT_INITIAL_REBALANCE_DELAY_MS,
            metrics_listen: None,
            security_protocol: SecurityProtocol::Plaintext,
            tls: None,
            oauth: None,
            connections_max_reauth_ms: 0,
            cluster_secret: None,
            ssl_principal_mapping_rules: Vec::new(),
            acl: crate::acl::AclConfig::default(),
            extra_listeners: Vec::new(),
            fault_injection: false,
        }
    }

    /// Checks the limits against each other; the message names the setting to change.
    pub fn validate(&self) -> Result<(), InvalidBrokerConfig> {
        let nonzero = [
            ("max-request-bytes", self.max_request_bytes as u64),
            (
                "max-inflight-requests-per-connection",
                self.max_inflight_requests_per_connection as u64,
            ),
            (
                "max-inflight-bytes-per-connection",
                self.max_inflight_bytes_per_connection as u64,
            ),
            (
                "queued-max-request-bytes-per-core",
                self.queued_max_request_bytes_per_core as u64,
            ),
            ("max-connections", self.max_connections as u64),
            (
                "broker-heartbeat-interval-ms",
                self.broker_heartbeat_interval_ms,
            ),
            ("max-connections-per-ip", self.max_connections_per_ip as u64),
            ("connections-max-idle-ms", self.connections_max_idle_ms),
            ("request-timeout-ms", self.request_timeout_ms),
            (
                "sasl-server-max-receive-bytes",
                self.sasl_server_max_receive_bytes as u64,
            ),
            (
                "sasl-authentication-deadline-ms",
                self.sasl_authentication_deadline_ms,
            ),
            (
                "barrier-injection-timeout-ms",
                self.barrier_injection_timeout_ms,
            ),
            ("quota-burst-ms", self.quota_burst_ms),
            ("fetch-max-bytes", self.fetch_max_bytes as u64),
            ("log-cleaner-backoff-ms", self.log_cleaner_backoff_ms),
            (
                "offsets-retention-check-interval-ms",
                self.offsets_retention_check_interval_ms,
            ),
            (
                "offsets-retention-ms",
                self.offsets_retention_ms.max(0) as u64,
            ),
            (
                "transaction-max-timeout-ms",
                self.transaction_max_timeout_ms,
            ),
            (
                "transactional-id-expiration-ms",
                self.transactional_id_expiration_ms,
            ),
            (
                "group-consumer-session-timeout-ms",
                self.group_consumer_session_timeout_ms,
            ),
            (
                "group-consumer-heartbeat-interval-ms",
                self.group_consumer_heartbeat_interval_ms,
            ),
            (
                "group-consumer-max-size",
                self.group_consumer_max_size as u64,
            ),
        ];
        if self.background_opens_per_core > MAX_CONCURRENT_PARTITION_OPENS {
            return Err(InvalidBrokerConfig::TooLarge {
                setting: "background-opens-per-core",
                max: MAX_CONCURRENT_PARTITION_OPENS as u64,
            });
        }
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms {
            return Err(InvalidBrokerConfig::HeartbeatNotBelowSession {
                heartbeat_ms: self.group_consumer_heartbeat_interval_ms,
                session_ms: self.group_consumer_session_timeout_ms,
            });
        }
        for (setting, v) in [
            (
                "group-consumer-session-timeout-ms",
                self.group_consumer_session_timeout_ms,
            ),
            (
                "group-consumer-heartbeat-interval-ms",
                self.group_consumer_heartbeat_interval_ms,
            ),
        ] {
            if v > i32::MAX as u64 {
                return Err(InvalidBrokerConfig::TooLarge {
                    setting,
                    max: i32::MAX as u64,
                });
            }
        }
        if self.transaction_max_timeout_ms > i32::MAX as u64 {
            return Err(InvalidBrokerConfig::TooLarge {
                setting: "transaction-max-timeout-ms",
                max: i32::MAX as u64,
            });
        }
        for (name, v) in nonzero {
            if v == 0 {
                return Err(InvalidBrokerConfig::Zero { setting: name });
            }
        }
        if self.max_request_bytes > i32::MAX as usize {
            return Err(InvalidBrokerConfig::FrameLimit {
                max_request_bytes: self.max_request_bytes,
            });
        }
        if self.queued_max_request_bytes_per_core < self.max_request_bytes {
            return Err(InvalidBrokerConfig::CoreBudgetBelowFrame {
                per_core: self.queued_max_request_bytes_per_core,
                max_request_bytes: self.max_request_bytes,
            });
        }
        if self.log_cleaner_dedupe_buffer_bytes < MIN_LOG_CLEANER_DEDUPE_BUFFER_BYTES {
            return Err(InvalidBrokerConfig::DedupeBufferTooSmall {
                bytes: self.log_cleaner_dedupe_buffer_bytes,
            });
        }
        if self.join.is_some() && self.peers.is_empty() {
            return Err(InvalidBrokerConfig::JoinWithoutPeers);
        }
        if !self.peers.is_empty() {
            let own = self
                .peers
                .get(&self.node_id)
                .ok_or(InvalidBrokerConfig::NotAmongPeers {
                    node_id: self.node_id,
                })?;
            own.parse::<SocketAddr>()
                .map_err(|_| InvalidBrokerConfig::PeerAddress {
                    node_id: self.node_id,
                    addr: own.clone(),
                })?;
            if self.broker_session_timeout_ms <= self.broker_heartbeat_interval_ms {
                return Err(InvalidBrokerConfig::SessionBelowHeartbeat {
                    session_ms: self.broker_session_timeout_ms,
                    heartbeat_ms: self.broker_heartbeat_interval_ms,
                });
            }
        }
        if self.core_direct && !self.extra_listeners.is_empty() {
            return Err(InvalidBrokerConfig::CoreDirectWithListeners);
        }
        if self.core_direct {
            self.core_listen_addrs()?;
            let cores = self.cores();
            if crate::brokers::core_broker_id(self.node_id, cores - 1).is_none() {
                return Err(InvalidBrokerConfig::CoreBrokerIdRange {
                    node_id: self.node_id,
                    cores,
                });
            }
        }
        Ok(())
    }

    /// Executors this broker runs (one per CPU given, at least one).
    pub fn cores(&self) -> usize {
        self.cpus.len().max(1)
    }

    /// Core-direct: the address each core listens on, by core (port 0: a free port picked at
    /// start). Core c gets `core_direct_base_port + c`, or without a base port the port
    /// `listen + 1 + c` (a free port each when the listen port is 0). Refuses ports past 65535
    /// and a range that holds the shared listen port.
    pub fn core_listen_addrs(&self) -> Result<Vec<SocketAddr>, InvalidBrokerConfig> {
        let cores = self.cores();
        let listen_port = self.listen.port();
        let (base, setting) = match self.core_direct_base_port {
            Some(b) => (u32::from(b), "core-direct-base-port"),
            None if listen_port == 0 => (0, "listen"),
            None => (u32::from(listen_port) + 1, "listen"),
        };
        let at = |port: u16| SocketAddr::new(self.listen.ip(), port);
        if base == 0 {
            return Ok(vec![at(0); cores]);
        }
        let last = base + cores as u32 - 1;
        if last > u32::from(u16::MAX) {
            return Err(InvalidBrokerConfig::CorePortOverflow {
                setting,
                base,
                cores,
            });
        }
        if listen_port != 0 && (base..=last).contains(&u32::from(listen_port)) {
            return Err(InvalidBrokerConfig::CorePortCollision {
                base,
                last,
                listen_port,
            });
        }
        Ok((base..=last).map(|p| at(p as u16)).collect())
    }

    /// The security protocol of listener `index` (0: the primary).
    pub fn protocol_of(&self, index: usize) -> SecurityProtocol {
        match index {
            0 => self.security_protocol,
            i => self
                .extra_listeners
                .get(i - 1)
                .map_or(self.security_protocol, |l| l.protocol),
        }
    }

    /// How clients reach extra listener `l`: the primary's advertised host, its own port.
    pub fn advertised_extra(&self, l: &ExtraListener) -> (String, u16) {
        (self.advertised().0, l.listen.port())
    }

    pub fn advertised(&self) -> (String, u16) {
        self.advertised
            .clone()
            .unwrap_or_else(|| (self.listen.ip().to_string(), self.listen.port()))
    }
}

/// A listener's security protocol (Kafka's `security.protocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    SaslPlaintext,
    /// TLS (`crate::tls`), no SASL.
    Ssl,
    /// SASL inside TLS.
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            _ => Err(format!(
                "{s:?} is not a security protocol (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL)"
            )),
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

/// A listener besides the primary one.
#[derive(Debug, Clone)]
pub struct ExtraListener {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub listen: SocketAddr,
}

/// Smallest cleaner map accepted (about 43,000 keys).
pub const MIN_LOG_CLEANER_DEDUPE_BUFFER_BYTES: usize = 1 << 20;

/// Broker limits that contradict each other; each names the setting to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidBrokerConfig {
    #[error("--core-direct on serves the primary listener only: drop the other --listener flags, or core-direct")]
    CoreDirectWithListeners,
    #[error("{setting} must be at least 1")]
    Zero { setting: &'static str },
    #[error("{setting} must be at most {max}")]
    TooLarge { setting: &'static str, max: u64 },
    #[error("group-consumer-heartbeat-interval-ms ({heartbeat_ms}) must be below group-consumer-session-timeout-ms ({session_ms}), or members time out between heartbeats")]
    HeartbeatNotBelowSession { heartbeat_ms: u64, session_ms: u64 },
    #[error("log-cleaner-dedupe-buffer-bytes {bytes} is below the minimum {MIN_LOG_CLEANER_DEDUPE_BUFFER_BYTES}: raise it")]
    DedupeBufferTooSmall { bytes: usize },
    #[error("core-direct: {cores} core ports from {base} (set by {setting}) run past port 65535; lower {setting} or --cores")]
    CorePortOverflow {
        setting: &'static str,
        base: u32,
        cores: usize,
    },
    #[error("core-direct: core ports {base}..={last} include the listen port {listen_port}; move core-direct-base-port out of the way")]
    CorePortCollision {
        base: u32,
        last: u32,
        listen_port: u16,
    },
    #[error("--join needs --peers with at least this node's own ID=HOST:PORT (the address its metastore listens on)")]
    JoinWithoutPeers,
    #[error("--node-id {node_id} is not among --peers: list every metastore member as ID=HOST:PORT, this node's own included")]
    NotAmongPeers { node_id: u64 },
    #[error("--peers: this node's ({node_id}) address {addr:?} is not IP:PORT (it is the address its metastore listens on)")]
    PeerAddress { node_id: u64, addr: String },
    #[error("broker-session-timeout-ms ({session_ms}) must be above broker-heartbeat-interval-ms ({heartbeat_ms})")]
    SessionBelowHeartbeat { session_ms: u64, heartbeat_ms: u64 },
    #[error("core-direct: node id {node_id} with {cores} cores does not fit the per-core broker ids (node id × {} + core: fewer cores than that stride, ids up to 2147483647)", crate::brokers::CORE_BROKER_ID_STRIDE)]
    CoreBrokerIdRange { node_id: u64, cores: usize },
    #[error("max-request-bytes {max_request_bytes} exceeds the Kafka frame limit 2147483647")]
    FrameLimit { max_request_bytes: usize },
    #[error("queued-max-request-bytes-per-core ({per_core}) is below max-request-bytes ({max_request_bytes}): the largest request could never be read; raise it or lower max-request-bytes")]
    CoreBudgetBelowFrame {
        per_core: usize,
        max_request_bytes: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core_direct(listen: &str, cores: usize, base: Option<u16>) -> BrokerConfig {
        let mut c = BrokerConfig::new(
            PathBuf::from("/unused"),
            listen.parse().unwrap(),
            (0..cores).collect(),
        );
        c.core_direct = true;
        c.core_direct_base_port = base;
        c
    }

    fn ports(c: &BrokerConfig) -> Vec<u16> {
        c.core_listen_addrs()
            .unwrap()
            .iter()
            .map(SocketAddr::port)
            .collect()
    }

    #[test]
    fn background_opens_past_the_bound_on_opens_are_refused() {
        let mut c = core_direct("127.0.0.1:9092", 1, None);
        c.core_direct = false;
        c.background_opens_per_core = 0;
        assert!(c.validate().is_ok(), "0: opens on first use only");
        c.background_opens_per_core = MAX_CONCURRENT_PARTITION_OPENS;
        assert!(c.validate().is_ok());
        c.background_opens_per_core += 1;
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("background-opens-per-core must be at most 32"),
            "{err}"
        );
    }

    #[test]
    fn core_ports_follow_the_listen_port_or_the_base() {
        assert_eq!(
            ports(&core_direct("127.0.0.1:9092", 3, None)),
            [9093, 9094, 9095]
        );
        assert_eq!(
            ports(&core_direct("127.0.0.1:9092", 2, Some(19000))),
            [19000, 19001]
        );
        // A base below the listen port, ending just before it.
        assert_eq!(
            ports(&core_direct("127.0.0.1:9092", 2, Some(9090))),
            [9090, 9091]
        );
        let c = core_direct("0.0.0.0:9092", 2, None);
        assert!(c
            .core_listen_addrs()
            .unwrap()
            .iter()
            .all(|a| a.ip() == c.listen.ip()));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn port_zero_gives_each_core_a_free_port() {
        assert_eq!(ports(&core_direct("127.0.0.1:0", 2, None)), [0, 0]);
        assert_eq!(ports(&core_direct("127.0.0.1:9092", 2, Some(0))), [0, 0]);
        // A base port with listen port 0 is taken as given.
        assert_eq!(
            ports(&core_direct("127.0.0.1:0", 2, Some(20000))),
            [20000, 20001]
        );
    }

    #[test]
    fn core_ports_past_65535_are_refused() {
        let c = core_direct("127.0.0.1:65534", 2, None);
        assert!(matches!(
            c.validate(),
            Err(InvalidBrokerConfig::CorePortOverflow {
                setting: "listen",
                base: 65535,
                cores: 2
            })
        ));
        assert_eq!(ports(&core_direct("127.0.0.1:65534", 1, None)), [65535]);
        let c = core_direct("127.0.0.1:9092", 3, Some(65534));
        let err = c.validate().unwrap_err();
        assert!(
            matches!(err, InvalidBrokerConfig::CorePortOverflow { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("core-direct-base-port"), "{err}");
        assert_eq!(
            ports(&core_direct("127.0.0.1:9092", 2, Some(65534))),
            [65534, 65535]
        );
    }

    #[test]
    fn core_ports_holding_the_listen_port_are_refused() {
        for base in [9092, 9091, 9090] {
            let c = core_direct("127.0.0.1:9092", 3, Some(base));
            assert_eq!(
                c.validate(),
                Err(InvalidBrokerConfig::CorePortCollision {
                    base: u32::from(base),
                    last: u32::from(base) + 2,
                    listen_port: 9092
                }),
                "base {base}"
            );
        }
        assert!(core_direct("127.0.0.1:9092", 3, Some(9089))
            .validate()
            .is_ok());
    }

    #[test]
    fn core_broker_ids_must_fit_i32() {
        let mut c = core_direct("127.0.0.1:0", 2, None);
        c.node_id = 2_147_483;
        assert!(c.validate().is_ok(), "ids 2147483000 and 2147483001 fit");
        c.node_id = 2_147_484;
        assert!(matches!(
            c.validate(),
            Err(InvalidBrokerConfig::CoreBrokerIdRange { .. })
        ));
        let mut many = core_direct("127.0.0.1:0", 1001, None);
        many.node_id = 1;
        assert!(
            matches!(
                many.validate(),
                Err(InvalidBrokerConfig::CoreBrokerIdRange { cores: 1001, .. })
            ),
            "more cores than the id stride"
        );
        // Off: nothing of this is checked, as before.
        c.core_direct = false;
        c.core_direct_base_port = Some(65535);
        assert!(c.validate().is_ok());
    }
}
