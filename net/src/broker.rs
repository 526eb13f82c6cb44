//! Starting and stopping a broker: data dir lock, metastore, one executor per core each with
//! its listener (SO_REUSEPORT) and, in core-direct mode, a port of its own; partitions and
//! loops; clean shutdown on request.

use std::net::{SocketAddr, TcpListener as StdListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use engine::shard::{self, ShardConfig};
use engine::DataDir;
use meta::{Assignment, Command, MetaHandle, Metastore};

use crate::brokers::BrokerMap;
use crate::config::BrokerConfig;
use crate::core::{BrokerContext, CoreState};

pub const CLUSTER_ID_FILE_NAME: &str = "cluster.id";
/// The metastore's directory inside the data dir.
pub const META_DIR_NAME: &str = "meta";

/// How long the start-up check waits for an answer from a process already on the port.
const LISTEN_PROBE_TIMEOUT_MS: u64 = 300;
/// How long start-up waits for listening sockets that no process serves any more to go away
/// (a SIGKILLed broker's io_uring rings release them asynchronously, a few hundred ms after
/// the process is reaped).
const LISTEN_DYING_SOCKET_WAIT_MS: u64 = 5_000;
const LISTEN_DYING_SOCKET_POLL_MS: u64 = 50;
/// Accept backlog of a core-direct listener (what glommio's `TcpListener::bind` uses for the
/// shared one).
const CORE_LISTEN_BACKLOG: i32 = 1024;

/// What answers on a port.
#[derive(Debug, PartialEq, Eq)]
enum PortProbe {
    /// Nothing listens.
    Free,
    /// A process accepts and answers a Kafka ApiVersions request: a live broker.
    Live,
    /// A socket accepts the TCP handshake but nobody answers: a listener whose process is gone.
    Dying,
}

fn probe_port(target: SocketAddr) -> PortProbe {
    use std::io::{Read, Write};
    let timeout = Duration::from_millis(LISTEN_PROBE_TIMEOUT_MS);
    let Ok(mut s) = TcpStream::connect_timeout(&target, timeout) else {
        return PortProbe::Free;
    };
    // ApiVersions v0, correlation id 1, no client id.
    let req: [u8; 14] = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    let mut answer = [0u8; 4];
    match s.write_all(&req).and_then(|_| s.read_exact(&mut answer)) {
        Ok(()) => PortProbe::Live,
        Err(_) => PortProbe::Dying,
    }
}

/// Why the broker did not start (or stopped with an error). Each says what failed and where.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] crate::config::InvalidBrokerConfig),
    #[error("data dir: {0}")]
    DataDir(#[source] std::io::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("another process already accepts connections on {addr} (a second broker?); stop it or use --listen with a free port")]
    PortTaken { addr: SocketAddr },
    #[error("cluster id file: {0}")]
    ClusterId(#[source] std::io::Error),
    #[error("{what}: {source}")]
    Metastore {
        what: String,
        #[source]
        source: meta::MetaError,
    },
    #[error("core {core}: {detail}")]
    Core { core: usize, detail: String },
    #[error("executors: {0}")]
    Executors(#[source] std::io::Error),
}

/// Resolves the listen address: refuses a port another live process accepts on (glommio
/// sets SO_REUSEPORT, so a second broker would otherwise bind silently), and picks a free port
/// for port 0. The check connects rather than binds, so the TIME_WAIT sockets a previous run
/// left behind do not block a restart; a listener that takes the handshake but answers nothing
/// (a killed broker's sockets still being torn down) is waited out for a bounded time. The
/// data-dir lock stays the guard against a second broker on the same data.
fn claim_listen_addr(addr: SocketAddr) -> Result<SocketAddr, StartError> {
    let listen_err = |source| StartError::Listen { addr, source };
    if addr.port() == 0 {
        let probe = StdListener::bind(addr).map_err(listen_err)?;
        return probe.local_addr().map_err(listen_err);
    }
    let target = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(std::net::Ipv6Addr::LOCALHOST.into(), addr.port())
        }
        _ => addr,
    };
    let started = std::time::Instant::now();
    let mut logged = false;
    loop {
        match probe_port(target) {
            PortProbe::Free => return Ok(addr),
            PortProbe::Live => return Err(StartError::PortTaken { addr }),
            PortProbe::Dying
                if started.elapsed() >= Duration::from_millis(LISTEN_DYING_SOCKET_WAIT_MS) =>
            {
                tracing::warn!(%addr, waited_ms = LISTEN_DYING_SOCKET_WAIT_MS, "a listener on the port still takes connections but answers none; starting anyway");
                return Ok(addr);
            }
            PortProbe::Dying => {
                if !logged {
                    tracing::info!(%addr, "the port still has a listener that answers nothing (a stopped broker's sockets closing); waiting for it to go");
                    logged = true;
                }
                std::thread::sleep(Duration::from_millis(LISTEN_DYING_SOCKET_POLL_MS));
            }
        }
    }
}

/// Core-direct: binds each core's own listener before any core starts (so a busy port is a
/// `StartError` and port 0 gets a free port with no window for another process to take it).
/// A live process on a core's port is refused as for the shared one; the sockets do not set
/// SO_REUSEPORT, so nothing else can bind the port while the broker runs.
fn bind_core_listeners(config: &BrokerConfig) -> Result<Vec<StdListener>, StartError> {
    use std::os::fd::AsRawFd;
    let addrs = config.core_listen_addrs()?;
    let mut listeners = Vec::with_capacity(addrs.len());
    for (core, addr) in addrs.into_iter().enumerate() {
        let addr = if addr.port() == 0 {
            addr
        } else {
            claim_listen_addr(addr)?
        };
        let listen_err = |source| StartError::Listen { addr, source };
        let l = StdListener::bind(addr).map_err(listen_err)?;
        // std listens with a backlog of 128; raise it to the shared listener's. SAFETY: listen(2)
        // on a valid socket fd we own, already listening (Linux then only updates the backlog).
        if unsafe { libc::listen(l.as_raw_fd(), CORE_LISTEN_BACKLOG) } != 0 {
            return Err(listen_err(std::io::Error::last_os_error()));
        }
        l.set_nonblocking(true).map_err(listen_err)?;
        let bound = l.local_addr().map_err(listen_err)?;
        tracing::info!(core, addr = %bound, broker_id = crate::brokers::core_broker_id(config.node_id, core), "core-direct listener");
        listeners.push(l);
    }
    Ok(listeners)
}

/// This node's brokers as clients will see them (`crate::brokers`), from the bound addresses.
fn broker_map(
    config: &BrokerConfig,
    core_listeners: &[StdListener],
) -> Result<BrokerMap, StartError> {
    let (host, port) = config.advertised();
    if !config.core_direct {
        return Ok(BrokerMap::single(config.node_id, host, port));
    }
    let ports = core_listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<u16>, _>>()
        .map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
    Ok(BrokerMap::per_core(config.node_id, host, port, ports))
}

fn cluster_id(data_dir: &DataDir) -> Result<String, StartError> {
    let path = data_dir.root().join(CLUSTER_ID_FILE_NAME);
    if let Some(b) = engine::io::blocking::read_small(&path).map_err(StartError::ClusterId)? {
        return Ok(String::from_utf8_lossy(&b).trim().to_string());
    }
    let id = format!(
        "ringlog-{:016x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ (std::process::id() as u64).rotate_left(32)
    );
    engine::io::blocking::write_atomic(&path, id.as_bytes()).map_err(StartError::ClusterId)?;
    Ok(id)
}

/// Creates a compacted internal topic (`__consumer_offsets`, `__transaction_state`) placed
/// as `crate::cluster::internal_topic_assignments` says, with `rf` replicas of each partition
/// (`internal_topic_replicas`), kept forever (`retention.ms` -1), in segments of
/// `segment_bytes`. Another node creating it at the same moment is fine.
fn create_internal_topic(
    meta: &MetaHandle,
    config: &BrokerConfig,
    topic: &str,
    rf: usize,
) -> Result<(), StartError> {
    let replicas = crate::cluster::internal_topic_replicas(config, rf);
    let configs = crate::cluster::internal_topic_configs(config);
    let cmd = crate::api::admin::create_command(topic, replicas.len() as u32, configs, replicas);
    match crate::cluster::write_at_start(meta, topic, cmd) {
        Ok(_) | Err(meta::MetaError::Refused(meta::Refusal::TopicAlreadyExists { .. })) => Ok(()),
        Err(source) => Err(StartError::Metastore {
            what: format!("creating {topic}"),
            source,
        }),
    }
}

/// Says at start which authorizer runs and what it means for the ACLs stored.
fn log_authorizer(acl: &crate::acl::AclConfig, stored_acls: usize) {
    use crate::acl::Authorizer;
    match acl.authorizer {
        Authorizer::Acls => tracing::info!(
            authorizer = acl.authorizer.name(),
            stored_acls,
            super_users = acl.super_users.len(),
            allow_everyone_if_no_acl_found = acl.allow_everyone_if_no_acl_found,
            "ACLs are enforced: a resource no ACL names is open on listeners without authentication{}",
            if acl.allow_everyone_if_no_acl_found { " and on authenticating ones" } else { " only" }
        ),
        Authorizer::None if stored_acls > 0 => tracing::warn!(
            authorizer = acl.authorizer.name(),
            stored_acls,
            "no authorizer: every principal may do everything, and the {stored_acls} stored ACLs are not enforced (start with --authorizer acls to enforce them)"
        ),
        Authorizer::None => tracing::info!(
            authorizer = acl.authorizer.name(),
            "no authorizer: every principal may do everything, and the ACL APIs answer SECURITY_DISABLED"
        ),
    }
}

/// Before the cores start: moves partitions placed on cores this run does not have (started
/// earlier with more `--cores`) onto existing ones, and creates the internal topics
/// (`__consumer_offsets`, `__transaction_state`) on the cluster's first start.
fn prepare_placement(meta: &MetaHandle, config: &BrokerConfig) -> Result<(), StartError> {
    let (node_id, cores) = (config.node_id, config.cores());
    let meta_err = |what: String| move |source| StartError::Metastore { what, source };
    let (_, state) = meta
        .read_blocking()
        .map_err(meta_err("reading metadata".into()))?;
    for (name, assignments) in &state.assignments {
        for (p, a) in assignments.iter().enumerate() {
            if a.node_id == node_id
                && a.core_index as usize >= cores
                && state.replica_set(name, p as u32).is_some()
            {
                // A replica does not move (the metastore refuses it): this one is not served
                // in this run; the ISR drops it and another replica leads.
                tracing::warn!(topic = %name, partition = p, core = a.core_index, cores, "a replica on a core not present in this run is not served; start with --cores {} to serve it", a.core_index + 1);
                continue;
            }
            if a.node_id == node_id && a.core_index as usize >= cores {
                let to = (a.core_index as usize % cores) as u32;
                tracing::info!(topic = %name, partition = p, from = a.core_index, to, "core not present in this run; partition moved");
                meta.write_blocking(Command::SetAssignment {
                    name: name.clone(),
                    partition: p as u32,
                    assignment: Assignment {
                        node_id,
                        core_index: to,
                    },
                })
                .map_err(meta_err(format!("moving {name}/{p}")))?;
            }
        }
    }
    log_authorizer(&config.acl, state.acls.len());
    // A data dir from before compaction: its offsets topic becomes compacted too.
    if let Some(t) = state.topic(crate::group::OFFSETS_TOPIC) {
        if !t.configs.contains_key("cleanup.policy") {
            let set = [("cleanup.policy".to_string(), "compact".to_string())]
                .into_iter()
                .collect();
            meta.write_blocking(Command::AlterConfigs {
                name: crate::group::OFFSETS_TOPIC.to_string(),
                set,
                remove: Vec::new(),
            })
            .map_err(meta_err(format!(
                "making {} compacted",
                crate::group::OFFSETS_TOPIC
            )))?;
        }
    }
    // Replicated (at most the peers): their coordinators fail over with the leaders.
    for (topic, rf) in [
        (
            crate::group::OFFSETS_TOPIC,
            config.offsets_topic_replication_factor,
        ),
        (
            crate::txn::TXN_STATE_TOPIC,
            config.transaction_state_replication_factor,
        ),
    ] {
        if state.topic(topic).is_none() {
            create_internal_topic(meta, config, topic, rf)?;
        }
    }
    Ok(())
}

/// The longest a starting node waits for its metastore to apply what the leader confirmed
/// (`catch_up_and_remove_stray_replicas`) before it starts anyway (logged).
const START_CATCH_UP_TIMEOUT_MS: u64 = 30_000;
/// How often it looks meanwhile.
const START_CATCH_UP_POLL_MS: u64 = 10;

/// A node back from an outage: its metastore first applies what the leader confirms now
/// (what it had applied may predate changes made while it was gone: its replicas moved or
/// led elsewhere), so its cores start from that and never open, lead or serve a partition
/// by the placement it had before. Then it deletes the copies of replicas a reassignment
/// took from it meanwhile (a live node deletes them as the change arrives, `reconcile`):
/// every partition directory of a replicated topic whose replicas leave this node out. Runs
/// before any core opens a partition; a copy this node is given again later is copied
/// afresh. Without a confirmed state, or past `START_CATCH_UP_TIMEOUT_MS`, nothing is
/// deleted (logged).
fn catch_up_and_remove_stray_replicas(meta: &MetaHandle, data_dir: &DataDir, node_id: u64) {
    let (index, state) = match meta.linearizable_read_blocking() {
        Ok(read) => read,
        Err(e) => {
            tracing::warn!(error = %e, "starting on this node's own metadata: the metastore leader did not confirm it (stray replica copies kept)");
            return;
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_millis(START_CATCH_UP_TIMEOUT_MS);
    loop {
        let applied = meta
            .status_blocking()
            .ok()
            .and_then(|s| s.last_applied_index)
            .unwrap_or(0);
        if applied >= index {
            break;
        }
        if std::time::Instant::now() >= deadline {
            tracing::warn!(applied, confirmed = index, "starting before this node's metastore applied what the leader confirmed (START_CATCH_UP_TIMEOUT_MS; stray replica copies kept)");
            return;
        }
        std::thread::sleep(Duration::from_millis(START_CATCH_UP_POLL_MS));
    }
    let topics = data_dir.root().join("topics");
    let Ok(entries) = std::fs::read_dir(&topics) else {
        return;
    };
    for topic in entries.filter_map(Result::ok) {
        let name = topic.file_name().to_string_lossy().into_owned();
        let Some(parts) = state.replicas.get(&name) else {
            continue;
        };
        let Ok(dirs) = std::fs::read_dir(topic.path()) else {
            continue;
        };
        for dir in dirs.filter_map(Result::ok) {
            let file_name = dir.file_name().to_string_lossy().into_owned();
            let Some(p) = file_name
                .strip_prefix('p')
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            if parts
                .get(p)
                .is_some_and(|r| r.replica_on(node_id).is_none())
            {
                match std::fs::remove_dir_all(dir.path()) {
                    Ok(()) => {
                        tracing::info!(topic = %name, partition = p, "a replica reassigned away while this node was down: its copy is deleted")
                    }
                    Err(e) => {
                        tracing::warn!(topic = %name, partition = p, error = %e, "deleting a reassigned replica's copy")
                    }
                }
            }
        }
    }
}

/// Runs a broker until a message arrives on `shutdown` (one per core is consumed), then closes
/// every partition cleanly. `on_ready` is called with the bound address once every core
/// accepts connections.
pub fn run(
    mut config: BrokerConfig,
    shutdown: flume::Receiver<()>,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), StartError> {
    config.validate().map_err(StartError::Config)?;
    if crate::lazy_reserve::overcommit_is_strict() {
        tracing::warn!("vm.overcommit_memory is 2 (strict): a request with a lying array count can fail an allocation and abort the broker; use 0 or 1");
    }
    let data_dir = Arc::new(DataDir::open(&config.data_dir).map_err(StartError::DataDir)?);
    // A partition move this node was receiving when it stopped is not made: its staging goes.
    if let Err(e) = engine::partition_copy::clear_staging(data_dir.root()) {
        tracing::warn!(dir = %data_dir.root().display(), error = %e, "removing unfinished incoming partition moves");
    }
    config.listen = claim_listen_addr(config.listen)?;
    let core_listeners = if config.core_direct {
        bind_core_listeners(&config)?
    } else {
        Vec::new()
    };
    let brokers = broker_map(&config, &core_listeners)?;
    // Each core takes its own listener at start (moved to its executor thread).
    let core_listeners: Arc<std::sync::Mutex<Vec<Option<StdListener>>>> = Arc::new(
        std::sync::Mutex::new(core_listeners.into_iter().map(Some).collect()),
    );
    let local_cluster_id = cluster_id(&data_dir)?;
    let mut meta_config = crate::cluster::meta_config(&config, data_dir.root().join(META_DIR_NAME));
    // The cores report what they applied here; other nodes wait on it before an admin
    // change counts as done (`ClientRequest::WaitApplied`).
    let applied = meta::node::AppliedWatermark::new(config.cores());
    meta_config.applied = applied.clone();
    let meta = Metastore::start(meta_config).map_err(|source| StartError::Metastore {
        what: "starting the metastore".into(),
        source,
    })?;
    let listen = config.listen;
    let cores = config.cores();
    let joined = crate::cluster::join(&meta, &config, &brokers, local_cluster_id)
        .map_err(|(what, source)| StartError::Metastore {
            what: what.into(),
            source,
        })
        .and_then(|j| prepare_placement(&meta, &config).map(|_| j));
    let joined = match joined {
        Ok(j) => j,
        Err(e) => {
            let _ = meta.shutdown();
            return Err(e);
        }
    };
    if !config.peers.is_empty() {
        catch_up_and_remove_stray_replicas(&meta, &data_dir, config.node_id);
    }
    // Dropped when `run` returns: the heartbeat thread stops then.
    let (_heartbeat_stop, heartbeat_stopped) = flume::bounded::<()>(1);
    if !config.peers.is_empty() {
        crate::cluster::spawn_heartbeat(
            meta.clone(),
            config.node_id,
            joined.incarnation,
            Duration::from_millis(config.broker_heartbeat_interval_ms),
            heartbeat_stopped,
        )
        .map_err(StartError::Executors)?;
    }
    let shard_config = ShardConfig {
        cpus: config.cpus.clone(),
        unpinned_cores: cores,
        io_memory_bytes: config.io_memory_bytes,
        spin_before_park_us: config.spin_before_park_us,
    };
    let ctx = Arc::new(BrokerContext::new(
        config,
        meta.clone(),
        data_dir,
        shutdown,
        brokers,
        joined,
        applied,
    ));
    let (ready_tx, ready_rx) = flume::unbounded::<Result<usize, StartError>>();
    let init_ctx = ctx.clone();
    let init = move |core: usize, shards| {
        let ctx = init_ctx.clone();
        let ready_tx = ready_tx.clone();
        let core_listeners = core_listeners.clone();
        async move {
            let core_err = |detail: String| StartError::Core { core, detail };
            let started = async {
                let state = CoreState::new(core, ctx.clone(), shards)
                    .await
                    .map_err(|e| core_err(e.to_string()))?;
                crate::reconcile::start_meta_follower(&state)
                    .await
                    .map_err(|e| core_err(e.to_string()))?;
                let listener = glommio::net::TcpListener::bind(listen)
                    .map_err(|e| core_err(format!("cannot listen on {listen}: {e}")))?;
                glommio::spawn_local(crate::conn::accept_loop(state.clone(), listener, 0)).detach();
                // The other listeners (issue #19): every core accepts on each (SO_REUSEPORT).
                for (i, l) in ctx.config.extra_listeners.iter().enumerate() {
                    let extra = glommio::net::TcpListener::bind(l.listen).map_err(|e| {
                        core_err(format!(
                            "cannot listen on {} (listener {}): {e}",
                            l.listen, l.name
                        ))
                    })?;
                    glommio::spawn_local(crate::conn::accept_loop(state.clone(), extra, i + 1))
                        .detach();
                }
                if ctx.config.core_direct {
                    let own = core_listeners
                        .lock()
                        .ok()
                        .and_then(|mut ls| ls.get_mut(core).and_then(Option::take))
                        .ok_or_else(|| {
                            core_err("no core-direct listener was bound for this core".into())
                        })?;
                    // SAFETY: the fd is a bound, listening, nonblocking socket that `own` owned
                    // and gives up here; the glommio listener is its only owner from now on.
                    let own = unsafe {
                        use std::os::fd::{FromRawFd, IntoRawFd};
                        glommio::net::TcpListener::from_raw_fd(own.into_raw_fd())
                    };
                    glommio::spawn_local(crate::conn::accept_loop(state.clone(), own, 0)).detach();
                }
                crate::log_cleaner::spawn(state.clone());
                crate::periodic::every(
                    &state,
                    ctx.config.retention_check_interval_ms,
                    |s| async move { crate::reconcile::enforce_retention(&s).await },
                );
                crate::coordinators::start_ticks(&state);
                glommio::spawn_local(crate::fanout_runtime::reconcile_loop(state.clone())).detach();
                if let (0, Some(addr)) = (core, ctx.config.metrics_listen) {
                    let admin = glommio::net::TcpListener::bind(addr).map_err(|e| {
                        core_err(format!("cannot listen for metrics on {addr}: {e}"))
                    })?;
                    glommio::spawn_local(crate::admin_http::serve(state.clone(), admin)).detach();
                }
                Ok::<Rc<CoreState>, StartError>(state)
            }
            .await;
            match started {
                Ok(state) => {
                    let _ = ready_tx.send(Ok(core));
                    Ok(state)
                }
                Err(e) => {
                    let io = std::io::Error::other(e.to_string());
                    let _ = ready_tx.send(Err(e));
                    Err(io)
                }
            }
        }
    };
    let run_core = |state: Rc<CoreState>| async move {
        let _ = crosswake::home_wake(state.ctx.shutdown.recv_async()).await;
        tracing::info!(core = state.core, "core shutting down");
        crate::reconcile::close_all(&state).await;
    };
    let (_shards, join) =
        shard::start(&shard_config, init, run_core).map_err(StartError::Executors)?;
    let mut ready = 0;
    while ready < cores {
        match ready_rx.recv() {
            Ok(Ok(_)) => ready += 1,
            Ok(Err(e)) => {
                let _ = meta.shutdown();
                return Err(e);
            }
            Err(_) => break,
        }
    }
    if ready == cores {
        on_ready(listen);
    }
    let res = join.join_or_exit().map_err(StartError::Executors);
    if let Err(e) = meta.shutdown() {
        tracing::warn!(error = %e, "metastore shutdown");
    }
    res
}
