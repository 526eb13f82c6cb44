//! `ringlog serve`: flags and config file, logging, signals, and the broker's lifetime.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use net::BrokerConfig;
use serde::Deserialize;

#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// Data directory (segments, metastore, lock file).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Address to accept Kafka clients on (every core listens on it).
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<SocketAddr>,
    /// The Kafka listener with its security protocol, instead of --listen:
    /// NAME=PROTOCOL://HOST:PORT, PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    /// (SASL: SCRAM and PLAIN against the users of `ringlog user`; SSL: --tls-cert and
    /// --tls-key). Given more than once, the node serves every listener (an internal
    /// PLAINTEXT and an external SASL_SSL, say); the first is the primary (node RPC, tools),
    /// and a client is shown every broker at its endpoint of the listener it came in on.
    #[arg(long, value_name = "NAME=PROTOCOL://HOST:PORT")]
    listener: Vec<String>,
    /// Principals that may do everything whatever the ACLs say (comma-separated, e.g.
    /// User:admin,User:ops).
    #[arg(long, value_name = "PRINCIPALS", value_delimiter = ',')]
    super_users: Vec<String>,
    /// Let every principal use a resource that no ACL names on SASL listeners too (on
    /// listeners without authentication such resources are always open).
    #[arg(long)]
    allow_everyone_if_no_acl_found: bool,
    /// The TLS certificate chain (PEM, leaf first) of an SSL or SASL_SSL listener.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Ask SSL clients for a certificate signed by this CA (PEM); its subject is the
    /// connection's principal on an SSL listener (Kafka's `ssl.client.auth`).
    #[arg(long, value_name = "FILE")]
    tls_client_ca: Option<PathBuf>,
    /// With --tls-client-ca: `required` (a client without a certificate is refused, the
    /// default) or `requested` (it is ANONYMOUS).
    #[arg(long, value_name = "MODE")]
    tls_client_auth: Option<String>,
    /// How a client certificate's subject (`CN=alice,OU=eng,O=org`) becomes a principal, as
    /// Kafka's `ssl.principal.mapping.rules`: `RULE:pattern/replacement/[LU]` or `DEFAULT`;
    /// repeatable, the first match wins (none: the whole subject).
    #[arg(long, value_name = "RULE")]
    ssl_principal_mapping_rule: Vec<String>,
    /// Offer SASL/OAUTHBEARER, checking tokens' RS256/ES256 signatures against the keys of
    /// this JWKS file (JSON, `{"keys": [...]}`).
    #[arg(long, value_name = "FILE")]
    oauth_jwks_file: Option<PathBuf>,
    /// Offer SASL/OAUTHBEARER and accept unsigned (`alg: none`) tokens, as Kafka's unsecured
    /// validator: for tests and development only (anyone can claim any principal).
    #[arg(long)]
    oauth_allow_unsecured_tokens: bool,
    /// OAUTHBEARER tokens must name this audience (`aud`).
    #[arg(long, value_name = "AUD")]
    oauth_audience: Option<String>,
    /// OAUTHBEARER tokens must come from this issuer (`iss`).
    #[arg(long, value_name = "ISS")]
    oauth_issuer: Option<String>,
    /// An authenticated session lasts at most this long; the client re-authenticates on its
    /// connection before (KIP-368; Kafka's `connections.max.reauth.ms`). Default 0: for ever.
    #[arg(long, value_name = "MS")]
    connections_max_reauth_ms: Option<u64>,
    /// Host and port announced to clients in Metadata (default: the listen address).
    #[arg(long, value_name = "HOST:PORT")]
    advertise: Option<String>,
    /// Executors (one per core, pinned); default: every online CPU.
    #[arg(long, value_name = "N")]
    cores: Option<usize>,
    /// TOML file with any of these settings (flags given on the command line win).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log every decoded request and response (tracing target `ringlog::requests`).
    #[arg(long)]
    log_requests: bool,
    /// Trace every request through the cores it crosses: tracing spans `request` (on the
    /// connection's core) and `produce_partition` / `fetch_partition` (on the owner core,
    /// nested under it), each logged when it closes with its busy and idle time (tracing
    /// target `ringlog::trace`; `RINGLOG_LOG=ringlog::trace=trace` does the same). Off by
    /// default: the spans then cost nothing.
    #[arg(long)]
    trace_requests: bool,
    /// Create unknown topics on Metadata or Produce (off by default, like Redpanda).
    #[arg(long)]
    auto_create_topics: bool,
    /// Admin HTTP listener: `GET /metrics` (OpenMetrics), `GET /v1/shards` (the interval
    /// view of `ringlog shards`), `POST /v1/shard-move` and the others docs/observability.md lists.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listen: Option<SocketAddr>,
    /// Connections the broker holds at once; more are closed at accept (default 16384).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Connections one client IP holds at once (default 16384).
    #[arg(long, value_name = "N")]
    max_connections_per_ip: Option<usize>,
    /// Data files the node keeps open at once, split between the cores; idle partitions'
    /// files are closed past it and reopen on use (default: the fd limit, raised to its hard
    /// limit, less a reserve for connections).
    #[arg(long, value_name = "N")]
    max_open_files: Option<usize>,
    /// Partitions the node serves at most; CreateTopics and CreatePartitions past it are
    /// refused (default 200000).
    #[arg(long, value_name = "N")]
    max_partitions: Option<usize>,
    /// Partitions each core opens at once in its background pass after start; the broker is
    /// ready before they are open, and a request for one not open yet opens it first
    /// (default 16, at most 32; 0: partitions open on their first request only).
    #[arg(long, value_name = "N")]
    background_opens_per_core: Option<usize>,
    /// A KIP-848 consumer-group member (`group.protocol=consumer`) with no heartbeat for this
    /// long is fenced and its partitions go to the others (default 45000).
    #[arg(long, value_name = "MS")]
    group_consumer_session_timeout_ms: Option<u64>,
    /// How often KIP-848 members heartbeat (default 5000; below the session timeout).
    #[arg(long, value_name = "MS")]
    group_consumer_heartbeat_interval_ms: Option<u64>,
    /// Which runtime carries each core's appends: `io-uring` (default: the engine's own ring,
    /// one DSYNC write per durable flush) or `glommio` (a write, then an fdatasync).
    #[arg(long, value_name = "io-uring|glommio")]
    storage_io: Option<String>,
    /// Core-direct routing: every core also listens on a port of its own and is advertised as a
    /// broker of its own (id node × 1000 + core), so clients reach each partition's owner core
    /// with no cross-core hop (default off).
    #[arg(long, value_name = "on|off")]
    core_direct: Option<Switch>,
    /// Core-direct: core c listens on this port + c (default: the listen port + 1 + c; 0: a
    /// free port each).
    #[arg(long, value_name = "PORT")]
    core_direct_base_port: Option<u16>,
    /// This node's id in a cluster (default 1); its brokers' ids derive from it.
    #[arg(long, value_name = "N")]
    node_id: Option<u64>,
    /// Cluster mode: the metastore's members as ID=HOST:PORT,... (every node, this one
    /// included, with the address its metastore listens on), e.g.
    /// `1=10.0.0.1:9093,2=10.0.0.2:9093,3=10.0.0.3:9093`. Default: the embedded single-node
    /// metastore.
    #[arg(long, value_name = "ID=HOST:PORT,...")]
    peers: Option<String>,
    /// Cluster mode, a node added to a running cluster: the metastore address of any member
    /// to ask for admission (joins as a learner, then is promoted to voter); `--peers` then
    /// needs only this node's own entry.
    #[arg(long, value_name = "HOST:PORT")]
    join: Option<String>,
    /// Cluster mode: a file holding the secret (at least 32 bytes, the same on every node)
    /// that authenticates the nodes' calls to each other; without it any client that reaches
    /// the primary listener could make them.
    #[arg(long, value_name = "FILE")]
    cluster_secret_file: Option<PathBuf>,
    /// This node's rack, listed in Metadata (`broker.rack`).
    #[arg(long, value_name = "RACK")]
    rack: Option<String>,
    /// Cluster mode: how often this node heartbeats to the metastore (default 2000).
    #[arg(long, value_name = "MS")]
    broker_heartbeat_interval_ms: Option<u64>,
    /// Cluster mode: a node with no heartbeat for this long is fenced: not listed to clients,
    /// its partitions unavailable until it is back (default 9000).
    #[arg(long, value_name = "MS")]
    broker_session_timeout_ms: Option<u64>,
    /// Tests and drills only: lets `POST /v1/debug/disk-fault?core=N&op=write|fdatasync|clear`
    /// on the admin listener make that core's next write or fdatasync fail with EIO.
    #[arg(long, hide = true)]
    enable_fault_injection: bool,
    /// How long a barrier injection retries the markers of partitions that refuse before it
    /// publishes the cut as partial (default 30000).
    #[arg(long, value_name = "MS")]
    barrier_injection_timeout_ms: Option<u64>,
    /// Replicas of a topic created without a replication factor, at most the live nodes
    /// (`default.replication.factor`; default 1).
    #[arg(long, value_name = "N")]
    default_replication_factor: Option<usize>,
    /// Replicas of each `__consumer_offsets` partition when the cluster first creates it, at
    /// most the peers (`offsets.topic.replication.factor`; default 3).
    #[arg(long, value_name = "N")]
    offsets_topic_replication_factor: Option<usize>,
    /// Replicas of each `__transaction_state` partition when the cluster first creates it,
    /// at most the peers (`transaction.state.log.replication.factor`; default 3).
    #[arg(long, value_name = "N")]
    transaction_state_replication_factor: Option<usize>,
    /// Replicas of each `__barrier_state` partition when the first barrier group creates
    /// it, at most the peers (default 3).
    #[arg(long, value_name = "N")]
    barrier_state_replication_factor: Option<usize>,
    /// A follower that has not caught up with its leader for this long leaves the ISR
    /// (`replica.lag.time.max.ms`; default 10000).
    #[arg(long, value_name = "MS")]
    replica_lag_time_max_ms: Option<u64>,
    /// Cluster mode: hand leadership back to each partition's preferred replica once it is
    /// live and in sync again (`auto.leader.rebalance.enable`; default on).
    #[arg(long, value_name = "on|off")]
    auto_leader_rebalance: Option<Switch>,
    /// How often the auto leader rebalance looks (`leader.imbalance.check.interval.seconds`,
    /// here in ms; default 300000).
    #[arg(long, value_name = "MS")]
    leader_imbalance_check_interval_ms: Option<u64>,
    /// A node's share of the partitions it prefers but does not lead, in percent, past which
    /// they go back to it (`leader.imbalance.per.broker.percentage`; default 10).
    #[arg(long, value_name = "PERCENT")]
    leader_imbalance_per_broker_percentage: Option<u32>,
}

/// An on/off flag value (`--core-direct on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Switch {
    On,
    Off,
}

/// An on/off config-file value: `true`/`false` or `"on"`/`"off"`.
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
enum FileSwitch {
    Bool(bool),
    Word(String),
}

impl FileSwitch {
    fn on(&self, key: &str) -> Result<bool, String> {
        match self {
            FileSwitch::Bool(b) => Ok(*b),
            FileSwitch::Word(w) if w.eq_ignore_ascii_case("on") => Ok(true),
            FileSwitch::Word(w) if w.eq_ignore_ascii_case("off") => Ok(false),
            FileSwitch::Word(w) => Err(format!(
                "{key} = {w:?}: expected \"on\", \"off\", true or false"
            )),
        }
    }
}

/// The config file: every serve flag plus broker defaults. Unknown keys are errors.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileConfig {
    data_dir: Option<PathBuf>,
    listen: Option<SocketAddr>,
    listener: Option<Vec<String>>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_client_ca: Option<PathBuf>,
    tls_client_auth: Option<String>,
    ssl_principal_mapping_rules: Option<Vec<String>>,
    oauth_jwks_file: Option<PathBuf>,
    oauth_allow_unsecured_tokens: Option<bool>,
    oauth_audience: Option<String>,
    oauth_issuer: Option<String>,
    connections_max_reauth_ms: Option<u64>,
    super_users: Option<Vec<String>>,
    allow_everyone_if_no_acl_found: Option<bool>,
    metrics_listen: Option<SocketAddr>,
    advertise: Option<String>,
    cores: Option<usize>,
    log_requests: Option<bool>,
    auto_create_topics: Option<bool>,
    /// Partitions of a topic created without a count (Kafka's `num.partitions`).
    num_partitions: Option<u32>,
    /// Largest request frame accepted (Kafka's `socket.request.max.bytes`).
    max_request_bytes: Option<usize>,
    /// Requests of one connection in flight at once (pipelining).
    max_inflight_requests_per_connection: Option<usize>,
    /// Request and reserved response bytes of one connection in flight.
    max_inflight_bytes_per_connection: Option<usize>,
    /// Request frame bytes in flight per core (Kafka's `queued.max.request.bytes`).
    queued_max_request_bytes_per_core: Option<usize>,
    /// Connections the broker holds (Kafka's `max.connections`).
    max_connections: Option<usize>,
    /// Connections one client IP holds (Kafka's `max.connections.per.ip`).
    max_connections_per_ip: Option<usize>,
    /// Idle connections are closed after this (Kafka's `connections.max.idle.ms`).
    connections_max_idle_ms: Option<u64>,
    /// How much of a client quota a client may send at once, in ms of the quota (default
    /// 1000).
    quota_burst_ms: Option<u64>,
    /// A frame must arrive, and a response write progress, within this (`request.timeout.ms`).
    request_timeout_ms: Option<u64>,
    /// The largest frame a SASL listener's client may send before it has authenticated
    /// (`sasl.server.max.receive.size`).
    sasl_server_max_receive_bytes: Option<usize>,
    /// How long a SASL listener's client may take to authenticate (default: the request
    /// timeout).
    sasl_authentication_deadline_ms: Option<u64>,
    /// Largest Fetch response (Kafka's broker-side `fetch.max.bytes`).
    fetch_max_bytes: Option<usize>,
    log_segment_bytes: Option<u64>,
    log_segment_ms: Option<i64>,
    log_retention_ms: Option<i64>,
    log_retention_bytes: Option<i64>,
    log_retention_check_interval_ms: Option<u64>,
    /// Each core's cleaner: pause between rounds when nothing is due (`log.cleaner.backoff.ms`).
    log_cleaner_backoff_ms: Option<u64>,
    /// Each core's cleaner key map (`log.cleaner.dedupe.buffer.size`).
    log_cleaner_dedupe_buffer_bytes: Option<usize>,
    /// Each core's cleaner I/O cap, read + written bytes per second (0: none).
    log_cleaner_io_max_bytes_per_second: Option<u64>,
    /// Segment size of `__consumer_offsets` when it is created (`offsets.topic.segment.bytes`).
    offsets_topic_segment_bytes: Option<u64>,
    /// How long a memberless group's offsets are kept (`offsets.retention.minutes`, in ms).
    offsets_retention_ms: Option<i64>,
    /// How often expired offsets are looked for (`offsets.retention.check.interval.ms`).
    offsets_retention_check_interval_ms: Option<u64>,
    /// The longest `transaction.timeout.ms` a producer may ask for (`transaction.max.timeout.ms`).
    transaction_max_timeout_ms: Option<u64>,
    /// Idle transactional ids are forgotten after this long (`transactional.id.expiration.ms`).
    transactional_id_expiration_ms: Option<u64>,
    /// How long a barrier injection retries refused markers before a partial cut.
    barrier_injection_timeout_ms: Option<u64>,
    io_memory_bytes: Option<usize>,
    /// Data files the node keeps open at once (split between the cores).
    max_open_files: Option<usize>,
    /// Partitions the node serves at most.
    max_partitions: Option<usize>,
    /// Partitions each core opens at once in the background after start (0: on first use).
    background_opens_per_core: Option<usize>,
    /// `io-uring` (default) or `glommio`: which runtime carries each core's appends.
    storage_io: Option<String>,
    /// Registered write buffers of each core's ring, bytes.
    registered_buffer_bytes: Option<usize>,
    /// Recently appended batches each core keeps for fetches at the tail, bytes (0: off).
    tail_cache_bytes: Option<u64>,
    /// Busy-poll of an idle core before it sleeps, in µs.
    spin_before_park_us: Option<u64>,
    /// How long a new consumer group waits for more members before its first rebalance
    /// completes (Kafka's `group.initial.rebalance.delay.ms`).
    group_initial_rebalance_delay_ms: Option<u64>,
    /// KIP-848 members: fenced after this long without a heartbeat.
    group_consumer_session_timeout_ms: Option<u64>,
    /// KIP-848 members: heartbeat this often.
    group_consumer_heartbeat_interval_ms: Option<u64>,
    /// KIP-848: members one consumer group holds at most.
    group_consumer_max_size: Option<usize>,
    /// Core-direct routing: `"on"`/`"off"` (or true/false).
    core_direct: Option<FileSwitch>,
    /// Core-direct: core c listens on this port + c.
    core_direct_base_port: Option<u16>,
    /// This node's id in a cluster.
    node_id: Option<u64>,
    /// Cluster mode: the metastore's members, `"1=host:port,2=host:port,3=host:port"`.
    peers: Option<String>,
    cluster_secret_file: Option<PathBuf>,
    /// Cluster mode: a member's metastore address to join through.
    join: Option<String>,
    rack: Option<String>,
    broker_heartbeat_interval_ms: Option<u64>,
    broker_session_timeout_ms: Option<u64>,
    default_replication_factor: Option<usize>,
    offsets_topic_replication_factor: Option<usize>,
    transaction_state_replication_factor: Option<usize>,
    barrier_state_replication_factor: Option<usize>,
    replica_lag_time_max_ms: Option<u64>,
    auto_leader_rebalance: Option<FileSwitch>,
    leader_imbalance_check_interval_ms: Option<u64>,
    leader_imbalance_per_broker_percentage: Option<u32>,
}

pub const DEFAULT_DATA_DIR: &str = "./ringlog-data";
/// How long a clean shutdown (flush, sync, seal every partition) may take before the process
/// exits anyway.
pub const SHUTDOWN_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9092";

fn build_config(args: ServeArgs) -> Result<BrokerConfig, String> {
    let file: FileConfig = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
            toml::from_str(&text).map_err(|e| format!("config file {}: {e}", path.display()))?
        }
        None => FileConfig::default(),
    };
    let data_dir = args
        .data_dir
        .or(file.data_dir)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
    let listeners = if args.listener.is_empty() {
        file.listener.clone().unwrap_or_default()
    } else {
        args.listener.clone()
    };
    let (listen, protocol) = match listeners.as_slice() {
        [] => (
            args.listen
                .or(file.listen)
                .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("valid default")),
            net::sasl::SecurityProtocol::Plaintext,
        ),
        [first, ..] => {
            let (_, protocol, addr) = parse_listener(first)?;
            if let Some(listen) = args.listen.or(file.listen).filter(|l| *l != addr) {
                return Err(format!(
                    "--listener {first:?} and --listen {listen} name different Kafka listeners: give one of them"
                ));
            }
            (addr, protocol)
        }
    };
    let mut extra_listeners = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, spec) in listeners.iter().enumerate() {
        let (name, protocol, addr) = parse_listener(spec)?;
        if !names.insert(name.clone()) {
            return Err(format!(
                "--listener {spec:?}: the name {name} is given twice"
            ));
        }
        if i > 0 {
            extra_listeners.push(net::config::ExtraListener {
                name,
                protocol,
                listen: addr,
            });
        }
    }
    let online =
        engine::shard::online_cpus().map_err(|e| format!("cannot list online CPUs: {e}"))?;
    let cpus = match args.cores.or(file.cores) {
        None => online,
        Some(0) => return Err("--cores must be at least 1".into()),
        Some(n) if n > online.len() => {
            return Err(format!(
                "--cores {n}: only {} CPUs are online ({online:?}); use --cores {} or fewer",
                online.len(),
                online.len()
            ))
        }
        Some(n) => online[..n].to_vec(),
    };
    let mut c = BrokerConfig::new(data_dir, listen, cpus);
    if let Some(a) = args.advertise.or(file.advertise) {
        let (host, port) = a
            .rsplit_once(':')
            .and_then(|(h, p)| p.parse::<u16>().ok().map(|p| (h.to_string(), p)))
            .ok_or_else(|| format!("--advertise {a:?}: expected HOST:PORT"))?;
        c.advertised = Some((host, port));
    }
    c.metrics_listen = args.metrics_listen.or(file.metrics_listen);
    c.security_protocol = protocol;
    c.acl = net::acl::AclConfig {
        super_users: if args.super_users.is_empty() {
            file.super_users.clone().unwrap_or_default()
        } else {
            args.super_users.clone()
        },
        allow_everyone_if_no_acl_found: args.allow_everyone_if_no_acl_found
            || file.allow_everyone_if_no_acl_found.unwrap_or(false),
    };
    if let Some(bad) = c.acl.super_users.iter().find(|u| !u.contains(':')) {
        return Err(format!(
            "--super-users {bad:?}: a principal is TYPE:NAME, e.g. User:admin"
        ));
    }
    let any_tls = protocol.uses_tls() || extra_listeners.iter().any(|l| l.protocol.uses_tls());
    c.extra_listeners = extra_listeners;
    let (cert, key) = (
        args.tls_cert.clone().or(file.tls_cert.clone()),
        args.tls_key.clone().or(file.tls_key.clone()),
    );
    let client_ca = args.tls_client_ca.clone().or(file.tls_client_ca.clone());
    let client_auth = match args
        .tls_client_auth
        .clone()
        .or(file.tls_client_auth.clone())
        .as_deref()
    {
        None | Some("required") => net::tls::ClientAuth::Required,
        Some("requested") => net::tls::ClientAuth::Requested,
        Some(other) => {
            return Err(format!(
                "--tls-client-auth {other:?}: expected required or requested"
            ))
        }
    };
    let rules = if args.ssl_principal_mapping_rule.is_empty() {
        file.ssl_principal_mapping_rules.clone().unwrap_or_default()
    } else {
        args.ssl_principal_mapping_rule.clone()
    };
    c.ssl_principal_mapping_rules = rules
        .iter()
        .map(|r| net::tls::PrincipalRule::parse(r))
        .collect::<Result<_, _>>()?;
    if client_ca.is_some() && !any_tls {
        return Err("--tls-client-ca is for an SSL or SASL_SSL --listener".into());
    }
    c.tls = match (any_tls, cert, key) {
        (true, Some(cert), Some(key)) => Some(net::tls::server_config(
            &cert,
            &key,
            client_ca.as_deref().map(|ca| (ca, client_auth)),
        )?),
        (true, _, _) => {
            return Err(
                "an SSL or SASL_SSL listener needs --tls-cert FILE and --tls-key FILE (PEM)".into(),
            )
        }
        (false, None, None) => None,
        (false, _, _) => {
            return Err("--tls-cert/--tls-key are for an SSL or SASL_SSL --listener".into())
        }
    };
    let jwks = args
        .oauth_jwks_file
        .clone()
        .or(file.oauth_jwks_file.clone());
    let unsecured =
        args.oauth_allow_unsecured_tokens || file.oauth_allow_unsecured_tokens.unwrap_or(false);
    c.oauth = if jwks.is_some() || unsecured {
        let keys = match &jwks {
            Some(path) => {
                net::oauth::load_jwks(path).map_err(|e| format!("--oauth-jwks-file: {e}"))?
            }
            None => Vec::new(),
        };
        Some(std::sync::Arc::new(net::oauth::OAuthConfig {
            keys,
            allow_unsecured: unsecured,
            audience: args.oauth_audience.clone().or(file.oauth_audience.clone()),
            issuer: args.oauth_issuer.clone().or(file.oauth_issuer.clone()),
        }))
    } else {
        if args.oauth_audience.is_some() || args.oauth_issuer.is_some() {
            return Err(
                "--oauth-audience/--oauth-issuer need --oauth-jwks-file FILE (or --oauth-allow-unsecured-tokens)"
                    .into(),
            );
        }
        None
    };
    if let Some(ms) = args
        .connections_max_reauth_ms
        .or(file.connections_max_reauth_ms)
    {
        if ms > i32::MAX as u64 {
            return Err(format!(
                "--connections-max-reauth-ms {ms}: at most {} (0: sessions never end)",
                i32::MAX
            ));
        }
        c.connections_max_reauth_ms = ms;
    }
    if let Some(n) = args.node_id.or(file.node_id) {
        if n == 0 || n > i32::MAX as u64 {
            return Err(format!("--node-id {n}: must be 1 to {}", i32::MAX));
        }
        c.node_id = n;
    }
    if let Some(p) = args.peers.or(file.peers) {
        c.peers = meta::MetaConfig::parse_peers(&p).map_err(|e| format!("--peers: {e}"))?;
    }
    c.join = args.join.or(file.join);
    if let Some(path) = args.cluster_secret_file.or(file.cluster_secret_file) {
        let mut secret = std::fs::read(&path)
            .map_err(|e| format!("--cluster-secret-file {}: {e}", path.display()))?;
        while secret.last().is_some_and(|b| b.is_ascii_whitespace()) {
            secret.pop();
        }
        if secret.len() < net::node_rpc::MIN_CLUSTER_SECRET_BYTES {
            return Err(format!(
                "--cluster-secret-file {}: {} bytes, want at least {} (e.g. `openssl rand -hex 32 > FILE`)",
                path.display(),
                secret.len(),
                net::node_rpc::MIN_CLUSTER_SECRET_BYTES
            ));
        }
        c.cluster_secret = Some(secret.into());
    }
    c.rack = args.rack.or(file.rack);
    if let Some(n) = args
        .broker_heartbeat_interval_ms
        .or(file.broker_heartbeat_interval_ms)
    {
        c.broker_heartbeat_interval_ms = n;
    }
    if let Some(n) = args
        .broker_session_timeout_ms
        .or(file.broker_session_timeout_ms)
    {
        c.broker_session_timeout_ms = n;
    }
    c.fault_injection = args.enable_fault_injection;
    if let Some(n) = args
        .barrier_injection_timeout_ms
        .or(file.barrier_injection_timeout_ms)
    {
        c.barrier_injection_timeout_ms = n;
    }
    if let Some(n) = args
        .default_replication_factor
        .or(file.default_replication_factor)
    {
        if n == 0 || n > meta::replication::MAX_REPLICATION_FACTOR {
            return Err(format!(
                "default-replication-factor must be 1 to {}",
                meta::replication::MAX_REPLICATION_FACTOR
            ));
        }
        c.default_replication_factor = n;
    }
    for (name, arg, file, to) in [
        (
            "offsets-topic-replication-factor",
            args.offsets_topic_replication_factor,
            file.offsets_topic_replication_factor,
            &mut c.offsets_topic_replication_factor,
        ),
        (
            "transaction-state-replication-factor",
            args.transaction_state_replication_factor,
            file.transaction_state_replication_factor,
            &mut c.transaction_state_replication_factor,
        ),
        (
            "barrier-state-replication-factor",
            args.barrier_state_replication_factor,
            file.barrier_state_replication_factor,
            &mut c.barrier_state_replication_factor,
        ),
    ] {
        if let Some(n) = arg.or(file) {
            if n == 0 || n > meta::replication::MAX_REPLICATION_FACTOR {
                return Err(format!(
                    "{name} must be 1 to {}",
                    meta::replication::MAX_REPLICATION_FACTOR
                ));
            }
            *to = n;
        }
    }
    if let Some(n) = args
        .replica_lag_time_max_ms
        .or(file.replica_lag_time_max_ms)
    {
        if n == 0 {
            return Err("replica-lag-time-max-ms must be at least 1".into());
        }
        c.replica_lag_time_max_ms = n;
    }
    c.auto_leader_rebalance = match (args.auto_leader_rebalance, &file.auto_leader_rebalance) {
        (Some(s), _) => s == Switch::On,
        (None, Some(f)) => f.on("auto-leader-rebalance")?,
        (None, None) => true,
    };
    if let Some(n) = args
        .leader_imbalance_check_interval_ms
        .or(file.leader_imbalance_check_interval_ms)
    {
        if n == 0 {
            return Err("leader-imbalance-check-interval-ms must be at least 1".into());
        }
        c.leader_imbalance_check_interval_ms = n;
    }
    if let Some(n) = args
        .leader_imbalance_per_broker_percentage
        .or(file.leader_imbalance_per_broker_percentage)
    {
        if n > 100 {
            return Err(format!(
                "leader-imbalance-per-broker-percentage {n}: 0 to 100"
            ));
        }
        c.leader_imbalance_per_broker_percentage = n;
    }
    c.log_requests = args.log_requests || file.log_requests.unwrap_or(false);
    c.auto_create_topics = args.auto_create_topics || file.auto_create_topics.unwrap_or(false);
    if let Some(n) = file.num_partitions {
        if n == 0 {
            return Err("num-partitions must be at least 1".into());
        }
        c.default_partitions = n;
    }
    if let Some(n) = file.max_request_bytes {
        c.max_request_bytes = n;
    }
    if let Some(n) = file.max_inflight_requests_per_connection {
        c.max_inflight_requests_per_connection = n;
    }
    if let Some(n) = file.max_inflight_bytes_per_connection {
        c.max_inflight_bytes_per_connection = n;
    }
    if let Some(n) = file.queued_max_request_bytes_per_core {
        c.queued_max_request_bytes_per_core = n;
    }
    if let Some(n) = args.max_connections.or(file.max_connections) {
        c.max_connections = n;
    }
    if let Some(n) = args.max_connections_per_ip.or(file.max_connections_per_ip) {
        c.max_connections_per_ip = n;
    }
    if let Some(n) = file.connections_max_idle_ms {
        c.connections_max_idle_ms = n;
    }
    if let Some(n) = file.quota_burst_ms {
        c.quota_burst_ms = n;
    }
    if let Some(n) = file.request_timeout_ms {
        c.request_timeout_ms = n;
    }
    if let Some(n) = file.sasl_server_max_receive_bytes {
        c.sasl_server_max_receive_bytes = n;
    }
    c.sasl_authentication_deadline_ms = file
        .sasl_authentication_deadline_ms
        .unwrap_or(c.request_timeout_ms);
    if let Some(n) = file.fetch_max_bytes {
        c.fetch_max_bytes = n;
    }
    if let Some(n) = file.log_segment_bytes {
        c.log_defaults.segment_bytes = n;
    }
    if let Some(n) = file.log_segment_ms {
        c.log_defaults.segment_ms = n;
    }
    if let Some(n) = file.log_retention_ms {
        c.log_defaults.retention_ms = (n >= 0).then_some(n);
    }
    if let Some(n) = file.log_retention_bytes {
        c.log_defaults.retention_bytes = (n >= 0).then_some(n as u64);
    }
    if let Some(n) = file.log_retention_check_interval_ms {
        c.retention_check_interval_ms = n;
    }
    if let Some(n) = file.log_cleaner_backoff_ms {
        c.log_cleaner_backoff_ms = n;
    }
    if let Some(n) = file.log_cleaner_dedupe_buffer_bytes {
        c.log_cleaner_dedupe_buffer_bytes = n;
    }
    if let Some(n) = file.log_cleaner_io_max_bytes_per_second {
        c.log_cleaner_io_max_bytes_per_second = (n > 0).then_some(n);
    }
    if let Some(n) = file.offsets_retention_ms {
        c.offsets_retention_ms = n;
    }
    if let Some(n) = file.offsets_retention_check_interval_ms {
        c.offsets_retention_check_interval_ms = n;
    }
    if let Some(n) = file.transaction_max_timeout_ms {
        c.transaction_max_timeout_ms = n;
    }
    if let Some(n) = file.transactional_id_expiration_ms {
        c.transactional_id_expiration_ms = n;
    }
    if let Some(n) = file.offsets_topic_segment_bytes {
        c.offsets_topic_segment_bytes = n;
    }
    if let Some(n) = file.io_memory_bytes {
        c.io_memory_bytes = n;
    }
    if let Some(n) = args.max_open_files.or(file.max_open_files) {
        if n == 0 {
            return Err("max-open-files must be at least 1 (it is the node's budget of open data files; leave it unset to derive it from the fd limit)".into());
        }
        c.max_open_files = Some(n);
    }
    if let Some(n) = args.max_partitions.or(file.max_partitions) {
        c.max_partitions = n;
    }
    if let Some(n) = args
        .background_opens_per_core
        .or(file.background_opens_per_core)
    {
        c.background_opens_per_core = n;
    }
    if let Some(v) = args.storage_io.as_ref().or(file.storage_io.as_ref()) {
        c.storage_io = v.parse()?;
    }
    if let Some(n) = file.registered_buffer_bytes {
        c.registered_buffer_bytes = n;
    }
    if let Some(n) = file.tail_cache_bytes {
        c.tail_cache_bytes = n;
    }
    if let Some(n) = file.spin_before_park_us {
        c.spin_before_park_us = n;
    }
    if let Some(n) = file.group_initial_rebalance_delay_ms {
        c.group_initial_rebalance_delay_ms = n;
    }
    if let Some(n) = args
        .group_consumer_session_timeout_ms
        .or(file.group_consumer_session_timeout_ms)
    {
        c.group_consumer_session_timeout_ms = n;
    }
    if let Some(n) = args
        .group_consumer_heartbeat_interval_ms
        .or(file.group_consumer_heartbeat_interval_ms)
    {
        c.group_consumer_heartbeat_interval_ms = n;
    }
    if let Some(n) = file.group_consumer_max_size {
        c.group_consumer_max_size = n;
    }
    c.core_direct = match (args.core_direct, &file.core_direct) {
        (Some(s), _) => s == Switch::On,
        (None, Some(f)) => f.on("core-direct")?,
        (None, None) => net::config::DEFAULT_CORE_DIRECT,
    };
    c.core_direct_base_port = args.core_direct_base_port.or(file.core_direct_base_port);
    if c.core_direct_base_port.is_some() && !c.core_direct {
        tracing::warn!("core-direct-base-port is set but core-direct is off: ignored");
    }
    c.log_defaults
        .validate()
        .map_err(|e| format!("invalid log defaults: {e}"))?;
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
}

/// The tracing target of the request spans (`--trace-requests`).
const TRACE_TARGET_DIRECTIVE: &str = "ringlog::trace=trace";

fn init_logging(trace_requests: bool) {
    let mut filter = tracing_subscriber::EnvFilter::try_from_env("RINGLOG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    if trace_requests {
        filter = filter.add_directive(
            TRACE_TARGET_DIRECTIVE
                .parse()
                .expect("the trace directive is a valid filter directive"),
        );
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Only enabled spans close with a line: the request spans, when traced.
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// Blocks SIGINT and SIGTERM in this thread (and so in every thread started after) and returns
/// a thread that waits for either and then asks every core to shut down.
fn shutdown_on_signal(cores: usize) -> flume::Receiver<()> {
    let (tx, rx) = flume::bounded::<()>(cores);
    // SAFETY: plain libc signal-set calls on a local, zero-initialised set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            // SAFETY: as above; sigwait only reads the set and writes the signal number.
            let sig = unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGINT);
                libc::sigaddset(&mut set, libc::SIGTERM);
                let mut sig: libc::c_int = 0;
                libc::sigwait(&set, &mut sig);
                sig
            };
            tracing::info!(
                signal = sig,
                "shutting down: flushing and closing partitions"
            );
            for _ in 0..cores {
                let _ = tx.send(());
            }
            // Shutdown is bounded in time even when a core is broken: acknowledged data is
            // already fdatasync'd, so exiting without a clean close only costs the next start
            // a recovery scan. A second signal exits at once.
            let deadline = std::time::Instant::now()
                + std::time::Duration::from_millis(SHUTDOWN_TIMEOUT_MS);
            // SAFETY: as above.
            let second = unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGINT);
                libc::sigaddset(&mut set, libc::SIGTERM);
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let ts = libc::timespec {
                    tv_sec: left.as_secs() as libc::time_t,
                    tv_nsec: left.subsec_nanos() as libc::c_long,
                };
                libc::sigtimedwait(&set, std::ptr::null_mut(), &ts)
            };
            if second > 0 {
                eprintln!("ringlog: second signal during shutdown; exiting now (the next start recovers)");
            } else {
                eprintln!("ringlog: shutdown did not finish within {SHUTDOWN_TIMEOUT_MS} ms; exiting (the next start recovers)");
            }
            std::process::exit(70);
        })
        .expect("signal thread");
    rx
}

pub fn run(args: ServeArgs) -> i32 {
    init_logging(args.trace_requests);
    let config = match build_config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ringlog serve: {e}");
            return 2;
        }
    };
    let cores = config.cpus.len().max(1);
    tracing::info!(data_dir = %config.data_dir.display(), listen = %config.listen, cores, core_direct = config.core_direct, "starting ringlog");
    let shutdown = shutdown_on_signal(cores);
    match net::broker::run(config, shutdown, |addr| {
        eprintln!("ringlog ready on {addr}")
    }) {
        Ok(()) => {
            tracing::info!("ringlog stopped cleanly");
            0
        }
        Err(e) => {
            eprintln!("ringlog serve: {e}");
            1
        }
    }
}

/// `NAME=PROTOCOL://HOST:PORT` (Kafka's `listeners` syntax, with the name given inline).
fn parse_listener(spec: &str) -> Result<(String, net::sasl::SecurityProtocol, SocketAddr), String> {
    let bad = |why: &str| {
        format!("--listener {spec:?}: {why} (expected NAME=PROTOCOL://HOST:PORT, e.g. EXTERNAL=SASL_PLAINTEXT://0.0.0.0:9092)")
    };
    let (name, rest) = spec.split_once('=').ok_or_else(|| bad("no NAME="))?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(bad("the name is letters, digits and _"));
    }
    let (protocol, addr) = rest
        .split_once("://")
        .ok_or_else(|| bad("no PROTOCOL://"))?;
    let protocol = net::sasl::SecurityProtocol::parse(protocol).map_err(|e| bad(&e))?;
    let addr: SocketAddr = addr.parse().map_err(|_| {
        bad(&format!(
            "{addr:?} is not HOST:PORT (an IP address and a port)"
        ))
    })?;
    Ok((name.to_string(), protocol, addr))
}

#[cfg(test)]
mod listener_tests {
    use super::parse_listener;

    #[test]
    fn listeners_parse_and_bad_ones_say_why() {
        let (name, p, a) = parse_listener("EXT=SASL_PLAINTEXT://127.0.0.1:9093").unwrap();
        assert_eq!(
            (name.as_str(), p, a.port()),
            ("EXT", net::sasl::SecurityProtocol::SaslPlaintext, 9093)
        );
        for (bad, why) in [
            ("SASL_PLAINTEXT://127.0.0.1:1", "no NAME="),
            ("X=127.0.0.1:1", "no PROTOCOL://"),
            ("X=TLS://127.0.0.1:1", "not a security protocol"),
            ("X=PLAINTEXT://host:1", "not HOST:PORT"),
        ] {
            let e = parse_listener(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
