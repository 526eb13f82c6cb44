//! Every setting of `ringlog serve`, declared once. Each field is both a flag (`--max-connections
//! N`) and a config-file key of the same name (`max-connections = N`); its doc comment is the
//! `--help` text and the row of the generated `docs/configuration.md`, and ends with its
//! default (`Default: \`45000\`.`, a literal a test checks against the broker's own default).
//! Flags given on the command line win over the file; the file wins over the defaults, which
//! live with the broker (`net::config`) and apply where a setting is given nowhere.
//!
//! One struct per concern (node, storage, security, connections, logs, coordinators, cluster);
//! [`Settings`] holds them all. The file is read key by key against the flags' names, so an
//! unknown key is refused by name, and each concern is read from the file's text on its own, so
//! a bad value is refused with its line.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use clap::Args;
use serde::{Deserialize, Deserializer, Serialize};

/// An on/off setting: `--core-direct on` on the command line; `"on"`/`"off"` or a bool in the
/// config file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "bool")]
pub struct OnOff(pub bool);

impl From<OnOff> for bool {
    fn from(v: OnOff) -> bool {
        v.0
    }
}

impl FromStr for OnOff {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "on" | "true" => Ok(OnOff(true)),
            "off" | "false" => Ok(OnOff(false)),
            _ => Err(format!("{s:?}: expected \"on\", \"off\", true or false")),
        }
    }
}

impl<'de> Deserialize<'de> for OnOff {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Bool(bool),
            Word(String),
        }
        match Either::deserialize(d)? {
            Either::Bool(b) => Ok(OnOff(b)),
            Either::Word(w) => w.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[derive(Args, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Node")]
pub struct NodeSettings {
    /// Data directory (segments, metastore, lock file); one process per directory.
    /// Default: `./ringlog-data`.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address every core accepts Kafka clients on (SO_REUSEPORT); a port another process
    /// listens on is refused. Default: `127.0.0.1:9092`.
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<SocketAddr>,
    /// Host and port announced to clients in Metadata. Default: the listen address.
    #[arg(long, value_name = "HOST:PORT")]
    pub advertise: Option<String>,
    /// Executors, one pinned per CPU; partitions are spread over them at create time.
    /// Default: every online CPU.
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// Admin HTTP listener: `GET /metrics` (OpenMetrics), `GET /v1/shards` (the interval view
    /// of `ringlog shards`), `POST /v1/shard-move` and the others docs/observability.md lists.
    /// Default: none (off).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_listen: Option<SocketAddr>,
    /// Log every decoded request and response (tracing target `ringlog::requests`).
    /// Default: `false`.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub log_requests: Option<bool>,
    /// Trace every request through the cores it crosses: tracing spans `request` (on the
    /// connection's core) and `produce_partition` / `fetch_partition` (on the owner core,
    /// nested under it), each logged when it closes with its busy and idle time (tracing
    /// target `ringlog::trace`; `RINGLOG_LOG=ringlog::trace=trace` does the same); off, the
    /// spans cost nothing. Default: `false`.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub trace_requests: Option<bool>,
    /// Core-direct routing: every core also listens on a port of its own and is advertised as
    /// a broker of its own (id node × 1000 + core), so clients reach each partition's owner
    /// core with no cross-core hop (see docs/operations.md). Default: `off`.
    #[arg(long, value_name = "on|off")]
    pub core_direct: Option<OnOff>,
    /// Core-direct: core c listens on this port + c; 0 (or a listen port of 0): a free port
    /// per core, picked at start; a range past 65535 or holding the listen port is refused.
    /// Default: the listen port + 1.
    #[arg(long, value_name = "PORT")]
    pub core_direct_base_port: Option<u16>,
}

#[derive(Args, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Storage")]
pub struct StorageSettings {
    /// What carries each core's appends. `io-uring`: the engine's own ring per core, a durable
    /// flush is one RWF_DSYNC write into blocks zeroed and synced ahead of the log's tail.
    /// `glommio`: glommio's DmaFile, a write then an fdatasync. Both are durable before an
    /// ack (see docs/operations.md). Default: `io-uring`.
    #[arg(long, value_name = "io-uring|glommio")]
    pub storage_io: Option<String>,
    /// Write buffers each core's ring registers with the kernel (`io-uring` only; locked
    /// memory: without the privilege the broker warns and writes from unregistered buffers).
    /// Default: `16777216`.
    #[arg(long, value_name = "BYTES")]
    pub registered_buffer_bytes: Option<usize>,
    /// Copies of the newest batches each core keeps, so a fetch at a log's tail is answered
    /// from memory; 0 turns it off. Default: `67108864`.
    #[arg(long, value_name = "BYTES")]
    pub tail_cache_bytes: Option<u64>,
    /// glommio's registered I/O memory per executor. Default: `1048576`.
    #[arg(long, value_name = "BYTES")]
    pub io_memory_bytes: Option<usize>,
    /// How long an idle core busy-polls before it sleeps (lower wake-up latency, more CPU).
    /// Default: `0`.
    #[arg(long, value_name = "US")]
    pub spin_before_park_us: Option<u64>,
    /// Data files the node keeps open at once, split between the cores; past a core's share
    /// its least recently used idle files are closed and reopen on use. Default: the fd limit
    /// (raised to its hard limit) less a reserve for connections.
    #[arg(long, value_name = "N")]
    pub max_open_files: Option<usize>,
    /// Partitions the node serves at most; CreateTopics and CreatePartitions past it get
    /// INVALID_PARTITIONS. Default: `200000`.
    #[arg(long, value_name = "N")]
    pub max_partitions: Option<usize>,
    /// Partitions each core opens at once in its background pass after start (at most 32);
    /// the broker is ready before they are open, and a request for one not open yet opens it
    /// first. 0: partitions open on their first request only (their retention and compaction
    /// wait until then). Default: `16`.
    #[arg(long, value_name = "N")]
    pub background_opens_per_core: Option<usize>,
}

#[derive(Args, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Listeners and security")]
pub struct SecuritySettings {
    /// A Kafka listener with its security protocol, instead of --listen:
    /// NAME=PROTOCOL://HOST:PORT, PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    /// (SASL: SCRAM and PLAIN against the users of `ringlog user`; SSL: --tls-cert and
    /// --tls-key). Given more than once (a list in the file), the node serves every listener;
    /// the first is the primary (node RPC, tools), and a client is shown every broker at its
    /// endpoint of the listener it came in on (see docs/security.md). Default: none (one
    /// PLAINTEXT listener on --listen).
    #[arg(long, value_name = "NAME=PROTOCOL://HOST:PORT")]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listener: Vec<String>,
    /// The TLS certificate chain (PEM, leaf first) of the SSL and SASL_SSL listeners.
    /// Default: none.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert. Default: none.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Ask SSL clients for a certificate signed by this CA (PEM); its subject is the
    /// connection's principal on an SSL listener (Kafka's `ssl.client.auth`). Default: none.
    #[arg(long, value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,
    /// With --tls-client-ca: `required` (a client without a certificate is refused) or
    /// `requested` (it is ANONYMOUS). Default: `required`.
    #[arg(long, value_name = "MODE")]
    pub tls_client_auth: Option<String>,
    /// How a client certificate's subject (`CN=alice,OU=eng,O=org`) becomes a principal, as
    /// Kafka's `ssl.principal.mapping.rules`: `RULE:pattern/replacement/[LU]` or `DEFAULT`;
    /// repeatable (a list in the file), the first match wins. Default: the whole subject.
    #[arg(long, value_name = "RULE")]
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        alias = "ssl-principal-mapping-rules"
    )]
    pub ssl_principal_mapping_rule: Vec<String>,
    /// Principals that may do everything whatever the ACLs say (comma-separated on the
    /// command line, a list in the file; e.g. User:admin,User:ops). Default: none.
    #[arg(long, value_name = "PRINCIPALS", value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub super_users: Vec<String>,
    /// Let every principal use a resource that no ACL names on authenticating listeners too
    /// (on listeners without authentication such resources are always open).
    /// Default: `false`.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub allow_everyone_if_no_acl_found: Option<bool>,
    /// Which authorizer checks requests: `acls` (the ACLs that `kafka-acls` manages are
    /// enforced; a resource no ACL names is open on listeners without authentication) or
    /// `none` (no authorizer, as Kafka without `authorizer.class.name`: every principal may do
    /// everything, and the ACL APIs answer SECURITY_DISABLED). Default: `acls`.
    #[arg(long, value_name = "MODE")]
    pub authorizer: Option<String>,
    /// Offer SASL/OAUTHBEARER, checking tokens' RS256/ES256 signatures against the keys of
    /// this JWKS file (JSON, `{"keys": [...]}`). Default: none.
    #[arg(long, value_name = "FILE")]
    pub oauth_jwks_file: Option<PathBuf>,
    /// Offer SASL/OAUTHBEARER and accept unsigned (`alg: none`) tokens, as Kafka's unsecured
    /// validator: for tests and development only (anyone can claim any principal).
    /// Default: `false`.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub oauth_allow_unsecured_tokens: Option<bool>,
    /// OAUTHBEARER tokens must name this audience (`aud`). Default: none.
    #[arg(long, value_name = "AUD")]
    pub oauth_audience: Option<String>,
    /// OAUTHBEARER tokens must come from this issuer (`iss`). Default: none.
    #[arg(long, value_name = "ISS")]
    pub oauth_issuer: Option<String>,
    /// An authenticated session lasts at most this long; the client re-authenticates on its
    /// connection before (Kafka's `connections.max.reauth.ms`); 0: for ever. Default: `0`.
    #[arg(long, value_name = "MS")]
    pub connections_max_reauth_ms: Option<u64>,
}

#[derive(Args, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Connections and requests")]
pub struct ConnectionSettings {
    /// Connections the broker holds at once (Kafka's `max.connections`); more are closed at
    /// accept. Default: `16384`.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Connections one client IP holds at once (Kafka's `max.connections.per.ip`).
    /// Default: `16384`.
    #[arg(long, value_name = "N")]
    pub max_connections_per_ip: Option<usize>,
    /// A connection with no request and nothing in flight is closed after this long (Kafka's
    /// `connections.max.idle.ms`). Default: `600000`.
    #[arg(long, value_name = "MS")]
    pub connections_max_idle_ms: Option<u64>,
    /// A frame must arrive whole, and a response be taken by the peer, within this; else the
    /// connection is closed (slow senders, peers that stopped reading). Default: `30000`.
    #[arg(long, value_name = "MS")]
    pub request_timeout_ms: Option<u64>,
    /// The largest request frame (Kafka's `socket.request.max.bytes`); a larger one closes
    /// the connection. Default: `104857600`.
    #[arg(long, value_name = "BYTES")]
    pub max_request_bytes: Option<usize>,
    /// Pipelined requests of one connection in flight at once. Default: `128`.
    #[arg(long, value_name = "N")]
    pub max_inflight_requests_per_connection: Option<usize>,
    /// Request bytes plus reserved response bytes (a Fetch reserves its response cap) of one
    /// connection in flight; past it the broker stops reading that connection until
    /// responses drain. Default: `134217728`.
    #[arg(long, value_name = "BYTES")]
    pub max_inflight_bytes_per_connection: Option<usize>,
    /// Request frame bytes in flight on one core (Kafka's `queued.max.request.bytes`); at
    /// least --max-request-bytes. Default: `536870912`.
    #[arg(long, value_name = "BYTES")]
    pub queued_max_request_bytes_per_core: Option<usize>,
    /// The largest frame a client of a SASL listener may send before it has authenticated
    /// (Kafka's `sasl.server.max.receive.size`); a larger announced size closes the
    /// connection before its body is read. Default: `524288`.
    #[arg(long, value_name = "BYTES")]
    pub sasl_server_max_receive_bytes: Option<usize>,
    /// A client of a SASL listener that has not authenticated this long after connecting is
    /// closed (a TLS handshake has --request-timeout-ms of its own). Default: the request
    /// timeout.
    #[arg(long, value_name = "MS")]
    pub sasl_authentication_deadline_ms: Option<u64>,
    /// The largest Fetch response, whatever the client asks (Kafka's broker-side
    /// `fetch.max.bytes`). Default: `57671680`.
    #[arg(long, value_name = "BYTES")]
    pub fetch_max_bytes: Option<usize>,
    /// Incremental fetch sessions the node keeps for its clients, split between its cores
    /// (Kafka's `max.incremental.fetch.session.cache.slots`); 0: every fetch names all its
    /// partitions. Default: `1000`.
    #[arg(long, value_name = "N")]
    pub max_incremental_fetch_session_cache_slots: Option<usize>,
    /// How much of a client quota a client may send at once before it is throttled, in ms of
    /// the quota. Default: `1000`.
    #[arg(long, value_name = "MS")]
    pub quota_burst_ms: Option<u64>,
}

#[derive(Args, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Topics and logs")]
pub struct LogSettings {
    /// Create unknown topics on Metadata or Produce (Kafka's `auto.create.topics.enable`; off
    /// by default, like Redpanda). Default: `false`.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub auto_create_topics: Option<bool>,
    /// Partitions of a topic created without a count (Kafka's `num.partitions`).
    /// Default: `1`.
    #[arg(long, value_name = "N")]
    pub num_partitions: Option<u32>,
    /// A topic's `segment.bytes` where it sets none. Default: `1073741824`.
    #[arg(long, value_name = "BYTES")]
    pub log_segment_bytes: Option<u64>,
    /// A topic's `segment.ms` where it sets none. Default: `604800000`.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub log_segment_ms: Option<i64>,
    /// A topic's `retention.ms` where it sets none; -1: kept for ever. Default: `604800000`.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub log_retention_ms: Option<i64>,
    /// A topic's `retention.bytes` where it sets none; -1: no size limit. Default: `-1`.
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub log_retention_bytes: Option<i64>,
    /// How often each core applies retention. Default: `300000`.
    #[arg(long, value_name = "MS")]
    pub log_retention_check_interval_ms: Option<u64>,
    /// Each core's log cleaner sleeps this long when no compacted partition is due (Kafka's
    /// `log.cleaner.backoff.ms`). Default: `15000`.
    #[arg(long, value_name = "MS")]
    pub log_cleaner_backoff_ms: Option<u64>,
    /// Each core's cleaner key map (Kafka's `log.cleaner.dedupe.buffer.size`; 24 bytes a slot,
    /// ¾ usable; a log with more keys is cleaned in several passes). Default: `134217728`.
    #[arg(long, value_name = "BYTES")]
    pub log_cleaner_dedupe_buffer_bytes: Option<usize>,
    /// Cap on each core's cleaner I/O, bytes read plus written per second; 0: none.
    /// Default: `0`.
    #[arg(long, value_name = "BYTES")]
    pub log_cleaner_io_max_bytes_per_second: Option<u64>,
}

#[derive(Args, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Groups, transactions and barriers")]
pub struct CoordinatorSettings {
    /// A new consumer group waits this long for more members before its first rebalance
    /// completes (Kafka's `group.initial.rebalance.delay.ms`). Default: `3000`.
    #[arg(long, value_name = "MS")]
    pub group_initial_rebalance_delay_ms: Option<u64>,
    /// A KIP-848 consumer-group member (`group.protocol=consumer`) with no heartbeat for this
    /// long is fenced and its partitions go to the others (Kafka's
    /// `group.consumer.session.timeout.ms`). Default: `45000`.
    #[arg(long, value_name = "MS")]
    pub group_consumer_session_timeout_ms: Option<u64>,
    /// How often KIP-848 members heartbeat (below the session timeout); a member still moving
    /// to its assignment is told 200 ms. Default: `5000`.
    #[arg(long, value_name = "MS")]
    pub group_consumer_heartbeat_interval_ms: Option<u64>,
    /// Members one KIP-848 group holds (GROUP_MAX_SIZE_REACHED past it). Default: `1000`.
    #[arg(long, value_name = "N")]
    pub group_consumer_max_size: Option<usize>,
    /// Segment size of `__consumer_offsets` when the broker creates it (Kafka's
    /// `offsets.topic.segment.bytes`). Default: `104857600`.
    #[arg(long, value_name = "BYTES")]
    pub offsets_topic_segment_bytes: Option<u64>,
    /// A group without members loses each committed offset this long after the later of its
    /// commit and the moment the group emptied (Kafka's `offsets.retention.minutes`, here in
    /// ms). Default: `604800000`.
    #[arg(long, value_name = "MS")]
    pub offsets_retention_ms: Option<i64>,
    /// How often each core looks for expired offsets (Kafka's
    /// `offsets.retention.check.interval.ms`). Default: `600000`.
    #[arg(long, value_name = "MS")]
    pub offsets_retention_check_interval_ms: Option<u64>,
    /// The longest `transaction.timeout.ms` a transactional producer may ask for; longer gets
    /// INVALID_TRANSACTION_TIMEOUT (Kafka's `transaction.max.timeout.ms`). Default: `900000`.
    #[arg(long, value_name = "MS")]
    pub transaction_max_timeout_ms: Option<u64>,
    /// A transactional id with no open transaction and no request for this long is forgotten
    /// (Kafka's `transactional.id.expiration.ms`). Default: `604800000`.
    #[arg(long, value_name = "MS")]
    pub transactional_id_expiration_ms: Option<u64>,
    /// How long a barrier injection retries the markers of partitions that refuse before it
    /// publishes the cut as partial. Default: `30000`.
    #[arg(long, value_name = "MS")]
    pub barrier_injection_timeout_ms: Option<u64>,
}

#[derive(Args, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "kebab-case")]
#[command(next_help_heading = "Cluster")]
pub struct ClusterSettings {
    /// This node's id in a cluster (1 to 2147483647); its broker id (with core-direct,
    /// node × 1000 + core). Default: `1`.
    #[arg(long, value_name = "N")]
    pub node_id: Option<u64>,
    /// Cluster mode: the metastore's members as ID=HOST:PORT,... (every node, this one
    /// included, with the address its metastore listens on), e.g.
    /// `1=10.0.0.1:9093,2=10.0.0.2:9093,3=10.0.0.3:9093` (see docs/clusters.md).
    /// Default: none (the embedded single-node metastore).
    #[arg(long, value_name = "ID=HOST:PORT,...")]
    pub peers: Option<String>,
    /// Cluster mode, a node added to a running cluster: the metastore address of any member
    /// to ask for admission (joins as a learner, then is promoted to voter); --peers then
    /// needs only this node's own entry. Default: none.
    #[arg(long, value_name = "HOST:PORT")]
    pub join: Option<String>,
    /// Cluster mode: a file holding the secret (at least 32 bytes, the same on every node)
    /// that authenticates the nodes' calls to each other; without it any client that reaches
    /// the primary listener could make them. Default: none.
    #[arg(long, value_name = "FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// This node's rack, listed in Metadata and DescribeCluster (Kafka's `broker.rack`).
    /// Default: none.
    #[arg(long, value_name = "RACK")]
    pub rack: Option<String>,
    /// Cluster mode: how often this node heartbeats to the metastore (Kafka's
    /// `broker.heartbeat.interval.ms`). Default: `2000`.
    #[arg(long, value_name = "MS")]
    pub broker_heartbeat_interval_ms: Option<u64>,
    /// Cluster mode: a node with no heartbeat for this long is fenced: not listed to clients,
    /// its partitions unavailable until it is back (Kafka's `broker.session.timeout.ms`).
    /// Default: `9000`.
    #[arg(long, value_name = "MS")]
    pub broker_session_timeout_ms: Option<u64>,
    /// Replicas of a topic created without a replication factor, at most the live nodes
    /// (Kafka's `default.replication.factor`). Default: `1`.
    #[arg(long, value_name = "N")]
    pub default_replication_factor: Option<usize>,
    /// Replicas of each `__consumer_offsets` partition when the cluster first creates it, at
    /// most the peers (Kafka's `offsets.topic.replication.factor`). Default: `3`.
    #[arg(long, value_name = "N")]
    pub offsets_topic_replication_factor: Option<usize>,
    /// Replicas of each `__transaction_state` partition when the cluster first creates it, at
    /// most the peers (Kafka's `transaction.state.log.replication.factor`). Default: `3`.
    #[arg(long, value_name = "N")]
    pub transaction_state_replication_factor: Option<usize>,
    /// Replicas of each `__barrier_state` partition when the first barrier group creates it,
    /// at most the peers. Default: `3`.
    #[arg(long, value_name = "N")]
    pub barrier_state_replication_factor: Option<usize>,
    /// A follower that has not caught up with its leader for this long leaves the ISR
    /// (Kafka's `replica.lag.time.max.ms`). Default: `10000`.
    #[arg(long, value_name = "MS")]
    pub replica_lag_time_max_ms: Option<u64>,
    /// Cluster mode: hand leadership back to each partition's preferred replica once it is
    /// live and in sync again (Kafka's `auto.leader.rebalance.enable`; see
    /// docs/replication.md). Default: `on`.
    #[arg(long, value_name = "on|off")]
    pub auto_leader_rebalance: Option<OnOff>,
    /// How often the auto leader rebalance looks (Kafka's
    /// `leader.imbalance.check.interval.seconds`, here in ms). Default: `300000`.
    #[arg(long, value_name = "MS")]
    pub leader_imbalance_check_interval_ms: Option<u64>,
    /// A node's share of the partitions it prefers but does not lead, in percent, past which
    /// they go back to it (Kafka's `leader.imbalance.per.broker.percentage`). Default: `10`.
    #[arg(long, value_name = "PERCENT")]
    pub leader_imbalance_per_broker_percentage: Option<u32>,
}

/// Every setting, by concern: what flags and the config file together say.
#[derive(Args, Serialize, Deserialize, Debug, Default)]
pub struct Settings {
    #[command(flatten)]
    #[serde(flatten)]
    pub node: NodeSettings,
    #[command(flatten)]
    #[serde(flatten)]
    pub storage: StorageSettings,
    #[command(flatten)]
    #[serde(flatten)]
    pub security: SecuritySettings,
    #[command(flatten)]
    #[serde(flatten)]
    pub connections: ConnectionSettings,
    #[command(flatten)]
    #[serde(flatten)]
    pub logs: LogSettings,
    #[command(flatten)]
    #[serde(flatten)]
    pub coordinators: CoordinatorSettings,
    #[command(flatten)]
    #[serde(flatten)]
    pub cluster: ClusterSettings,
}

/// The keys a config file may hold besides the flags' names: older spellings still read.
const FILE_KEY_ALIASES: &[&str] = &["ssl-principal-mapping-rules"];

impl Settings {
    /// The settings of config file `path` (text `text`); `known` lists the keys it may hold.
    fn from_file_text(path: &Path, text: &str, known: &[String]) -> Result<Settings, String> {
        let at = |e: toml::de::Error| format!("config file {}: {e}", path.display());
        let table: toml::Table = toml::from_str(text).map_err(at)?;
        if let Some(key) = table
            .keys()
            .find(|k| !known.contains(k) && !FILE_KEY_ALIASES.contains(&k.as_str()))
        {
            return Err(format!(
                "config file {}: unknown key {key:?} (a key is the name of a `ringlog serve` flag without its dashes; docs/configuration.md lists them)",
                path.display()
            ));
        }
        // Each concern on its own from the text, so that a bad value's error shows its line.
        Ok(Settings {
            node: toml::from_str(text).map_err(at)?,
            storage: toml::from_str(text).map_err(at)?,
            security: toml::from_str(text).map_err(at)?,
            connections: toml::from_str(text).map_err(at)?,
            logs: toml::from_str(text).map_err(at)?,
            coordinators: toml::from_str(text).map_err(at)?,
            cluster: toml::from_str(text).map_err(at)?,
        })
    }

    /// These settings with every one `flags` gives replaced by the flag's.
    fn overlaid(self, flags: Settings) -> Result<Settings, String> {
        // Through JSON, where a setting not given is null: one overlay for every field.
        let into_map = |s: &Settings| match serde_json::to_value(s) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            Ok(other) => unreachable!("settings serialize as a map: {other}"),
            Err(e) => Err(format!(
                "a setting cannot be read: {e} (paths must be UTF-8)"
            )),
        };
        let mut merged = into_map(&self)?;
        merged.extend(into_map(&flags)?.into_iter().filter(|(_, v)| !v.is_null()));
        serde_json::from_value(serde_json::Value::Object(merged))
            .map_err(|e| format!("the settings of the flags and the config file disagree: {e}"))
    }

    /// The settings `flags` and the config file at `config` (if any) say together, flags
    /// first. `known` lists the flags' long names.
    pub fn load(
        flags: Settings,
        config: Option<&Path>,
        known: &[String],
    ) -> Result<Settings, String> {
        let Some(path) = config else {
            return Ok(flags);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        Settings::from_file_text(path, &text, known)?.overlaid(flags)
    }
}
