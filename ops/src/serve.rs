//! `ringlog serve`: flags and config file, logging, signals, and the broker's lifetime.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use net::BrokerConfig;

use crate::serve_settings::Settings;

#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// TOML file with any of the settings below, each under its flag's name without the
    /// dashes (`max-connections = 1000`); flags given on the command line win.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: Settings,
    /// Tests and drills only: lets `POST /v1/debug/disk-fault?core=N&op=write|fdatasync|clear`
    /// on the admin listener make that core's next write or fdatasync fail with EIO.
    #[arg(long, hide = true)]
    enable_fault_injection: bool,
}

/// The long names of the flags that are settings: the keys a config file may hold.
fn setting_names() -> Vec<String> {
    Settings::augment_args(clap::Command::new("serve"))
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

pub const DEFAULT_DATA_DIR: &str = "./ringlog-data";
/// How long a clean shutdown (flush, sync, seal every partition) may take before the process
/// exits anyway.
pub const SHUTDOWN_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9092";

/// The settings the flags and the config file give together.
fn settings(args: &mut ServeArgs) -> Result<Settings, String> {
    let flags = std::mem::take(&mut args.settings);
    Settings::load(flags, args.config.as_deref(), &setting_names())
}

/// Sets `to` where the setting was given.
fn set<T>(to: &mut T, setting: Option<T>) {
    if let Some(v) = setting {
        *to = v;
    }
}

/// Refuses a setting of 0 where at least 1 is needed, naming it.
fn at_least_one<T: Copy + Default + PartialEq>(
    name: &str,
    v: Option<T>,
) -> Result<Option<T>, String> {
    match v {
        Some(n) if n == T::default() => Err(format!("--{name} must be at least 1")),
        other => Ok(other),
    }
}

/// The broker's config from the settings: each concern in turn, checked as it goes.
fn broker_config(s: Settings) -> Result<BrokerConfig, String> {
    let Settings {
        node,
        storage,
        security,
        connections,
        logs,
        coordinators,
        cluster,
    } = s;
    let data_dir = node
        .data_dir
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
    let listeners = &security.listener;
    let (listen, protocol) = match listeners.as_slice() {
        [] => (
            node.listen
                .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("valid default")),
            net::sasl::SecurityProtocol::Plaintext,
        ),
        [first, ..] => {
            let (_, protocol, addr) = parse_listener(first)?;
            if let Some(listen) = node.listen.filter(|l| *l != addr) {
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
    let cpus = match node.cores {
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

    // Node.
    if let Some(a) = node.advertise {
        let (host, port) = a
            .rsplit_once(':')
            .and_then(|(h, p)| p.parse::<u16>().ok().map(|p| (h.to_string(), p)))
            .ok_or_else(|| format!("--advertise {a:?}: expected HOST:PORT"))?;
        c.advertised = Some((host, port));
    }
    c.metrics_listen = node.metrics_listen;
    set(&mut c.log_requests, node.log_requests);
    set(&mut c.core_direct, node.core_direct.map(bool::from));
    c.core_direct_base_port = node.core_direct_base_port;
    if c.core_direct_base_port.is_some() && !c.core_direct {
        tracing::warn!("core-direct-base-port is set but core-direct is off: ignored");
    }

    // Storage.
    if let Some(v) = &storage.storage_io {
        c.storage_io = v.parse()?;
    }
    set(
        &mut c.registered_buffer_bytes,
        storage.registered_buffer_bytes,
    );
    set(&mut c.tail_cache_bytes, storage.tail_cache_bytes);
    set(&mut c.io_memory_bytes, storage.io_memory_bytes);
    set(&mut c.spin_before_park_us, storage.spin_before_park_us);
    if storage.max_open_files == Some(0) {
        return Err("--max-open-files must be at least 1 (it is the node's budget of open data files; leave it unset to derive it from the fd limit)".into());
    }
    c.max_open_files = storage.max_open_files;
    set(&mut c.max_partitions, storage.max_partitions);
    set(
        &mut c.background_opens_per_core,
        storage.background_opens_per_core,
    );

    // Listeners and security.
    c.security_protocol = protocol;
    let authorizer = match security.authorizer.as_deref() {
        None => net::acl::Authorizer::default(),
        Some(mode) => net::acl::Authorizer::parse(mode).ok_or_else(|| {
            format!("--authorizer {mode:?}: expected acls (enforce the ACLs) or none (no authorizer: everything is allowed)")
        })?,
    };
    c.acl = net::acl::AclConfig {
        authorizer,
        super_users: security.super_users.clone(),
        allow_everyone_if_no_acl_found: security.allow_everyone_if_no_acl_found.unwrap_or(false),
    };
    if let Some(bad) = c.acl.super_users.iter().find(|u| !u.contains(':')) {
        return Err(format!(
            "--super-users {bad:?}: a principal is TYPE:NAME, e.g. User:admin"
        ));
    }
    let any_tls = protocol.uses_tls() || extra_listeners.iter().any(|l| l.protocol.uses_tls());
    c.extra_listeners = extra_listeners;
    let client_auth = match security.tls_client_auth.as_deref() {
        None | Some("required") => net::tls::ClientAuth::Required,
        Some("requested") => net::tls::ClientAuth::Requested,
        Some(other) => {
            return Err(format!(
                "--tls-client-auth {other:?}: expected required or requested"
            ))
        }
    };
    c.ssl_principal_mapping_rules = security
        .ssl_principal_mapping_rule
        .iter()
        .map(|r| net::tls::PrincipalRule::parse(r))
        .collect::<Result<_, _>>()?;
    let client_ca = security.tls_client_ca;
    if client_ca.is_some() && !any_tls {
        return Err("--tls-client-ca is for an SSL or SASL_SSL --listener".into());
    }
    c.tls = match (any_tls, security.tls_cert, security.tls_key) {
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
    let unsecured = security.oauth_allow_unsecured_tokens.unwrap_or(false);
    c.oauth = if security.oauth_jwks_file.is_some() || unsecured {
        let keys = match &security.oauth_jwks_file {
            Some(path) => {
                net::oauth::load_jwks(path).map_err(|e| format!("--oauth-jwks-file: {e}"))?
            }
            None => Vec::new(),
        };
        Some(std::sync::Arc::new(net::oauth::OAuthConfig {
            keys,
            allow_unsecured: unsecured,
            audience: security.oauth_audience,
            issuer: security.oauth_issuer,
        }))
    } else {
        if security.oauth_audience.is_some() || security.oauth_issuer.is_some() {
            return Err(
                "--oauth-audience/--oauth-issuer need --oauth-jwks-file FILE (or --oauth-allow-unsecured-tokens)"
                    .into(),
            );
        }
        None
    };
    if let Some(ms) = security.connections_max_reauth_ms {
        if ms > i32::MAX as u64 {
            return Err(format!(
                "--connections-max-reauth-ms {ms}: at most {} (0: sessions never end)",
                i32::MAX
            ));
        }
        c.connections_max_reauth_ms = ms;
    }

    // Connections and requests.
    set(&mut c.max_connections, connections.max_connections);
    set(
        &mut c.max_connections_per_ip,
        connections.max_connections_per_ip,
    );
    set(
        &mut c.connections_max_idle_ms,
        connections.connections_max_idle_ms,
    );
    set(&mut c.request_timeout_ms, connections.request_timeout_ms);
    set(&mut c.max_request_bytes, connections.max_request_bytes);
    set(
        &mut c.max_inflight_requests_per_connection,
        connections.max_inflight_requests_per_connection,
    );
    set(
        &mut c.max_inflight_bytes_per_connection,
        connections.max_inflight_bytes_per_connection,
    );
    set(
        &mut c.queued_max_request_bytes_per_core,
        connections.queued_max_request_bytes_per_core,
    );
    set(
        &mut c.sasl_server_max_receive_bytes,
        connections.sasl_server_max_receive_bytes,
    );
    c.sasl_authentication_deadline_ms = connections
        .sasl_authentication_deadline_ms
        .unwrap_or(c.request_timeout_ms);
    set(&mut c.fetch_max_bytes, connections.fetch_max_bytes);
    set(
        &mut c.max_incremental_fetch_session_cache_slots,
        connections.max_incremental_fetch_session_cache_slots,
    );
    set(&mut c.quota_burst_ms, connections.quota_burst_ms);

    // Topics and logs.
    set(&mut c.auto_create_topics, logs.auto_create_topics);
    set(
        &mut c.default_partitions,
        at_least_one("num-partitions", logs.num_partitions)?,
    );
    set(&mut c.log_defaults.segment_bytes, logs.log_segment_bytes);
    set(&mut c.log_defaults.segment_ms, logs.log_segment_ms);
    if let Some(n) = logs.log_retention_ms {
        c.log_defaults.retention_ms = (n >= 0).then_some(n);
    }
    if let Some(n) = logs.log_retention_bytes {
        c.log_defaults.retention_bytes = (n >= 0).then_some(n as u64);
    }
    set(
        &mut c.retention_check_interval_ms,
        logs.log_retention_check_interval_ms,
    );
    set(&mut c.log_cleaner_backoff_ms, logs.log_cleaner_backoff_ms);
    set(
        &mut c.log_cleaner_dedupe_buffer_bytes,
        logs.log_cleaner_dedupe_buffer_bytes,
    );
    if let Some(n) = logs.log_cleaner_io_max_bytes_per_second {
        c.log_cleaner_io_max_bytes_per_second = (n > 0).then_some(n);
    }

    // Groups, transactions and barriers.
    set(
        &mut c.group_initial_rebalance_delay_ms,
        coordinators.group_initial_rebalance_delay_ms,
    );
    set(
        &mut c.group_consumer_session_timeout_ms,
        coordinators.group_consumer_session_timeout_ms,
    );
    set(
        &mut c.group_consumer_heartbeat_interval_ms,
        coordinators.group_consumer_heartbeat_interval_ms,
    );
    set(
        &mut c.group_consumer_max_size,
        coordinators.group_consumer_max_size,
    );
    set(
        &mut c.offsets_topic_segment_bytes,
        coordinators.offsets_topic_segment_bytes,
    );
    set(
        &mut c.offsets_retention_ms,
        coordinators.offsets_retention_ms,
    );
    set(
        &mut c.offsets_retention_check_interval_ms,
        coordinators.offsets_retention_check_interval_ms,
    );
    set(
        &mut c.transaction_max_timeout_ms,
        coordinators.transaction_max_timeout_ms,
    );
    set(
        &mut c.transactional_id_expiration_ms,
        coordinators.transactional_id_expiration_ms,
    );
    set(
        &mut c.barrier_injection_timeout_ms,
        coordinators.barrier_injection_timeout_ms,
    );

    // Cluster.
    if let Some(n) = cluster.node_id {
        if n == 0 || n > i32::MAX as u64 {
            return Err(format!("--node-id {n}: must be 1 to {}", i32::MAX));
        }
        c.node_id = n;
    }
    if let Some(p) = &cluster.peers {
        c.peers = meta::MetaConfig::parse_peers(p).map_err(|e| format!("--peers: {e}"))?;
    }
    c.join = cluster.join;
    if let Some(path) = cluster.cluster_secret_file {
        c.cluster_secret = Some(read_cluster_secret(&path)?.into());
    }
    c.rack = cluster.rack;
    set(
        &mut c.broker_heartbeat_interval_ms,
        cluster.broker_heartbeat_interval_ms,
    );
    set(
        &mut c.broker_session_timeout_ms,
        cluster.broker_session_timeout_ms,
    );
    for (name, setting, to) in [
        (
            "default-replication-factor",
            cluster.default_replication_factor,
            &mut c.default_replication_factor,
        ),
        (
            "offsets-topic-replication-factor",
            cluster.offsets_topic_replication_factor,
            &mut c.offsets_topic_replication_factor,
        ),
        (
            "transaction-state-replication-factor",
            cluster.transaction_state_replication_factor,
            &mut c.transaction_state_replication_factor,
        ),
        (
            "barrier-state-replication-factor",
            cluster.barrier_state_replication_factor,
            &mut c.barrier_state_replication_factor,
        ),
    ] {
        if let Some(n) = setting {
            if n == 0 || n > meta::replication::MAX_REPLICATION_FACTOR {
                return Err(format!(
                    "--{name} must be 1 to {}",
                    meta::replication::MAX_REPLICATION_FACTOR
                ));
            }
            *to = n;
        }
    }
    set(
        &mut c.replica_lag_time_max_ms,
        at_least_one("replica-lag-time-max-ms", cluster.replica_lag_time_max_ms)?,
    );
    set(
        &mut c.auto_leader_rebalance,
        cluster.auto_leader_rebalance.map(bool::from),
    );
    set(
        &mut c.leader_imbalance_check_interval_ms,
        at_least_one(
            "leader-imbalance-check-interval-ms",
            cluster.leader_imbalance_check_interval_ms,
        )?,
    );
    if let Some(n) = cluster.leader_imbalance_per_broker_percentage {
        if n > 100 {
            return Err(format!(
                "--leader-imbalance-per-broker-percentage {n}: 0 to 100"
            ));
        }
        c.leader_imbalance_per_broker_percentage = n;
    }

    c.log_defaults
        .validate()
        .map_err(|e| format!("invalid log defaults: {e}"))?;
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
}

/// The cluster secret in `path`, trailing white space dropped, refused when too short.
fn read_cluster_secret(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let mut secret = std::fs::read(path)
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
    Ok(secret)
}

/// The tracing target of the request spans (`--trace-requests`).
const TRACE_TARGET_DIRECTIVE: &str = "ringlog::trace=trace";

/// The log filter when `RINGLOG_LOG` is unset (or not a filter).
const DEFAULT_LOG_FILTER: &str = "info,openraft=warn";

/// Logs to stderr through a filter that Kafka's BROKER_LOGGER requests can change at run
/// time (`net::broker_loggers`, which gets the filter's directives and the way to reload it).
fn init_logging(trace_requests: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let mut directives = std::env::var("RINGLOG_LOG")
        .ok()
        .filter(|d| tracing_subscriber::EnvFilter::try_new(d).is_ok())
        .unwrap_or_else(|| DEFAULT_LOG_FILTER.to_string());
    if trace_requests {
        directives = format!("{directives},{TRACE_TARGET_DIRECTIVE}");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .expect("the directives were checked, and the trace directive is a valid one");
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        // Only enabled spans close with a line: the request spans, when traced.
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    tracing_subscriber::registry().with(filter).with(fmt).init();
    net::broker_loggers::install(&directives, move |d| {
        let next = tracing_subscriber::EnvFilter::try_new(d).map_err(|e| e.to_string())?;
        handle.reload(next).map_err(|e| e.to_string())
    });
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

pub fn run(mut args: ServeArgs) -> i32 {
    let settings = match settings(&mut args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ringlog serve: {e}");
            return 2;
        }
    };
    init_logging(settings.node.trace_requests.unwrap_or(false));
    let config = match broker_config(settings) {
        Ok(mut c) => {
            c.fault_injection = args.enable_fault_injection;
            c
        }
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

#[cfg(test)]
mod settings_tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    /// The broker config `ringlog serve ARGS` would run with (as its Debug text).
    fn config_of(args: &[String]) -> String {
        let argv = ["ringlog".to_string(), "serve".to_string()]
            .into_iter()
            .chain(args.iter().cloned());
        let crate::Command::Serve(mut serve) = crate::Cli::try_parse_from(argv)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .command
        else {
            unreachable!("parsed as serve");
        };
        let c = broker_config(settings(&mut serve).unwrap())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        format!("{c:?}")
    }

    /// Each literal default a setting's doc names is the broker's own: giving it explicitly
    /// changes nothing.
    #[test]
    fn every_documented_default_is_the_one_that_applies() {
        let defaults = config_of(&[]);
        let root = crate::Cli::command();
        let serve = root.find_subcommand("serve").unwrap();
        let mut checked = 0;
        for a in serve.get_arguments() {
            let help = a.get_long_help().or(a.get_help()).map(|h| h.to_string());
            let Some(value) = help.as_deref().and_then(crate::reference::literal_default) else {
                continue;
            };
            let flag = format!("--{}={value}", a.get_long().unwrap());
            assert_eq!(
                config_of(std::slice::from_ref(&flag)),
                defaults,
                "{flag} is not the default"
            );
            checked += 1;
        }
        assert!(
            checked >= 40,
            "only {checked} settings have a literal default"
        );
    }

    /// A setting in the file applies, and the same flag on the command line wins over it.
    #[test]
    fn flags_win_over_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ringlog.toml");
        std::fs::write(
            &path,
            "max-connections = 7\nauto-create-topics = true\ncore-direct = \"on\"\n\
             super-users = [\"User:a\"]\nssl-principal-mapping-rules = [\"DEFAULT\"]\n",
        )
        .unwrap();
        let config = format!("--config={}", path.display());
        let file_only = config_of(std::slice::from_ref(&config));
        assert!(file_only.contains("max_connections: 7"), "{file_only}");
        assert!(
            file_only.contains("auto_create_topics: true"),
            "{file_only}"
        );
        assert!(file_only.contains("core_direct: true"), "{file_only}");
        assert!(file_only.contains("\"User:a\""), "{file_only}");
        let both = config_of(&[
            config,
            "--max-connections=9".into(),
            "--auto-create-topics=false".into(),
            "--super-users=User:b".into(),
        ]);
        assert!(both.contains("max_connections: 9"), "{both}");
        assert!(both.contains("auto_create_topics: false"), "{both}");
        assert!(
            both.contains("\"User:b\"") && !both.contains("\"User:a\""),
            "{both}"
        );
        assert!(both.contains("core_direct: true"), "{both}");
    }
}
