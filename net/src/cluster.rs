//! This node among the nodes of one cluster (issue #17): the metastore's config from
//! `--peers`, the node's entry in the broker registry (registered at every start, kept alive
//! by heartbeats), the cluster id the nodes agree on, and where new partitions go.
//!
//! Single-node (no `--peers`): the embedded metastore, no network; the node still registers
//! (Metadata lists the registry) but never heartbeats: one broker alone is never fenced.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use meta::{Assignment, BrokerRegistration, Command, MetaConfig, MetaError, MetaHandle, MetaState};

use crate::brokers::BrokerMap;
use crate::config::{BrokerConfig, CLUSTER_JOIN_TIMEOUT_MS};

/// Pause between tries of a start-up write the metastore could not take yet (no leader).
const JOIN_RETRY_MS: u64 = 250;
/// A start-up write still waiting logs this often.
const JOIN_PROGRESS_LOG_MS: u64 = 5_000;

/// The metastore config of this node: embedded single-node without peers; else a member of
/// the peers' raft cluster, listening on its own peer address.
pub fn meta_config(config: &BrokerConfig, dir: std::path::PathBuf) -> MetaConfig {
    let mut m = MetaConfig::single_node(dir);
    m.node_id = config.node_id;
    if !config.peers.is_empty() {
        // `BrokerConfig::validate` checked that this node is among the peers at an IP:PORT.
        m.listen = config
            .peers
            .get(&config.node_id)
            .and_then(|a| a.parse().ok());
        m.peers = config.peers.clone();
        m.join = config.join.clone();
        m.broker_session_timeout_ms = config.broker_session_timeout_ms;
        if config.cluster_secret.is_none() {
            tracing::warn!(
                "cluster mode without --cluster-secret-file: the nodes' calls to each other are not authenticated, and any client that reaches the primary listener could make them"
            );
        }
    }
    m
}

/// Proposes `cmd` until the metastore takes it (a clustered start waits for a quorum of its
/// peers), for at most [`CLUSTER_JOIN_TIMEOUT_MS`]. A refusal is returned as is.
pub fn write_at_start(
    meta: &MetaHandle,
    what: &str,
    cmd: Command,
) -> Result<meta::AppliedChange, MetaError> {
    let started = Instant::now();
    let mut logged = started;
    loop {
        match meta.write_blocking(cmd.clone()) {
            Ok(applied) => return Ok(applied),
            Err(e) if !e.is_retriable() => return Err(e),
            Err(e) if started.elapsed() >= Duration::from_millis(CLUSTER_JOIN_TIMEOUT_MS) => {
                return Err(e)
            }
            Err(e) => {
                if logged.elapsed() >= Duration::from_millis(JOIN_PROGRESS_LOG_MS) {
                    logged = Instant::now();
                    tracing::info!(%what, error = %e, waited_ms = started.elapsed().as_millis() as u64, "waiting for the metastore (a quorum of --peers must be up)");
                }
                std::thread::sleep(Duration::from_millis(JOIN_RETRY_MS));
            }
        }
    }
}

/// What a node's start got from the metastore.
#[derive(Debug, Clone)]
pub struct Joined {
    /// The cluster id every node reports.
    pub cluster_id: String,
    /// This start's registration (its heartbeats carry it).
    pub incarnation: u64,
    /// This start's producer ids, unique in the cluster.
    pub producer_ids: std::ops::Range<i64>,
}

/// Joins the cluster (the embedded metastore when single): agrees on the cluster id
/// (`local`, this data dir's, unless another node set one first), registers this node as a
/// broker and takes a block of producer ids. An error says which step failed.
pub fn join(
    meta: &MetaHandle,
    config: &BrokerConfig,
    brokers: &BrokerMap,
    local: String,
) -> Result<Joined, (&'static str, MetaError)> {
    let cluster_id =
        agree_cluster_id(meta, local).map_err(|e| ("agreeing on the cluster id", e))?;
    let incarnation =
        register(meta, config, brokers).map_err(|e| ("registering this node as a broker", e))?;
    let producer_ids = allocate_producer_ids(meta, config.node_id)
        .map_err(|e| ("taking a block of producer ids", e))?;
    Ok(Joined {
        cluster_id,
        incarnation,
        producer_ids,
    })
}

/// The cluster id every node reports: the first node's, set once in the metastore. `local`
/// (this data dir's id) is offered; a node that finds another id set adopts it.
fn agree_cluster_id(meta: &MetaHandle, local: String) -> Result<String, MetaError> {
    // Set already (every start after the cluster's first): nothing to write. A node that
    // has not caught up yet proposes, is refused, and reads it below.
    if let Some(id) = meta.read_blocking()?.1.cluster_id {
        return Ok(id);
    }
    match write_at_start(
        meta,
        "cluster id",
        Command::SetClusterId { id: local.clone() },
    ) {
        Ok(_) => Ok(local),
        // Another node set it first: the refusal names it (this node's own copy of the
        // state may not have it yet).
        Err(MetaError::Refused(meta::Refusal::ClusterIdSet { id })) => Ok(id),
        Err(e) => Err(e),
    }
}

/// Registers this node as a broker (its endpoints as `brokers` advertises them) under a
/// fresh incarnation, which it returns.
fn register(
    meta: &MetaHandle,
    config: &BrokerConfig,
    brokers: &BrokerMap,
) -> Result<u64, MetaError> {
    let incarnation = meta::state::random_u64();
    let broker = BrokerRegistration {
        incarnation,
        ..brokers.registration(config.cores() as u32, config.rack.clone())
    };
    write_at_start(
        meta,
        "broker registration",
        Command::RegisterBroker {
            broker: Box::new(broker),
        },
    )?;
    // Its other listeners, as clients on them reach it (none: an earlier start's are gone).
    let listeners: Vec<meta::ListenerEndpoint> = config
        .extra_listeners
        .iter()
        .map(|l| {
            let (host, port) = config.advertised_extra(l);
            meta::ListenerEndpoint {
                name: l.name.clone(),
                host,
                port,
            }
        })
        .collect();
    write_at_start(
        meta,
        "broker listeners",
        Command::SetBrokerListeners {
            node_id: config.node_id,
            listeners: Box::new(listeners),
        },
    )?;
    tracing::info!(
        node_id = config.node_id,
        incarnation,
        "registered as a broker"
    );
    Ok(incarnation)
}

/// The producer ids of this start: the next block the metastore hands out, so that no two
/// producers of the cluster (any node, any start) share an id.
fn allocate_producer_ids(
    meta: &MetaHandle,
    node_id: u64,
) -> Result<std::ops::Range<i64>, MetaError> {
    let applied = write_at_start(
        meta,
        "producer ids",
        Command::AllocateProducerIds { node_id },
    )?;
    match applied.change {
        meta::Change::ProducerIdsAllocated { first, .. } => {
            Ok(first..first + meta::state::PRODUCER_ID_BLOCK_SIZE as i64)
        }
        other => Err(MetaError::Protocol {
            context: format!("AllocateProducerIds applied as {other:?}"),
        }),
    }
}

/// Heartbeats this node's registration every `broker-heartbeat-interval-ms` on a thread of
/// its own until `stop` is dropped. A heartbeat the metastore cannot take (no quorum) is
/// tried again at the next tick; one refused for a stale incarnation (this node id started
/// elsewhere since) is logged as an error.
pub fn spawn_heartbeat(
    meta: MetaHandle,
    node_id: u64,
    incarnation: u64,
    interval: Duration,
    stop: flume::Receiver<()>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ringlog-heartbeat".into())
        .spawn(move || loop {
            match stop.recv_timeout(interval) {
                Err(flume::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let cmd = Command::BrokerHeartbeat {
                node_id,
                incarnation,
            };
            match meta.write_blocking(cmd) {
                Ok(c) => {
                    if matches!(
                        c.change,
                        meta::Change::BrokerHeartbeat { unfenced: true, .. }
                    ) {
                        tracing::info!(node_id, "unfenced: heartbeats reach the metastore again");
                    }
                }
                Err(MetaError::Refused(r)) => {
                    tracing::error!(node_id, refusal = %r, "heartbeat refused");
                }
                Err(e) => tracing::debug!(node_id, error = %e, "heartbeat not taken"),
            }
        })
}

/// Where the partitions of a new topic go: `count` partitions spread round robin over the
/// (node, core) slots of the live brokers, nodes first (core 0 of every node, then core 1
/// of every node, ...), continuing after the partitions already placed. Without a live
/// registration (never after start) everything goes to `fallback` (this node) and its cores.
pub fn place(m: &MetaState, fallback: (u64, u32), count: u32) -> Vec<Assignment> {
    let slots = placement_slots(m, fallback);
    let placed: usize = m.assignments.values().map(Vec::len).sum();
    (0..count as usize)
        .map(|i| slots[(placed + i) % slots.len()])
        .collect()
}

/// [`place`] with `rf` replicas per partition (issue #18): the leader where `place` puts it,
/// the followers on the next `rf - 1` live nodes after the leader's (in node order, those on
/// a rack the partition does not use yet first), each on its least loaded core. `None` when
/// fewer than `rf` nodes are live.
pub fn place_replicas(
    m: &MetaState,
    fallback: (u64, u32),
    count: u32,
    rf: usize,
) -> Option<Vec<Vec<Assignment>>> {
    let leaders = place(m, fallback, count);
    if rf <= 1 {
        return Some(leaders.into_iter().map(|a| vec![a]).collect());
    }
    let live: Vec<&meta::BrokerRegistration> = m.live_brokers().collect();
    if live.len() < rf {
        return None;
    }
    let mut pending: Vec<Assignment> = leaders.clone();
    let mut out = Vec::with_capacity(leaders.len());
    for leader in leaders {
        let start = live
            .iter()
            .position(|b| b.node_id == leader.node_id)
            .unwrap_or(0);
        // The other nodes, in order after the leader's.
        let others: Vec<&meta::BrokerRegistration> = (1..live.len())
            .map(|k| live[(start + k) % live.len()])
            .collect();
        let mut replicas = vec![leader];
        let mut racks: Vec<Option<&str>> = vec![live[start].rack.as_deref()];
        while replicas.len() < rf {
            let unused =
                |b: &&&meta::BrokerRegistration| !replicas.iter().any(|r| r.node_id == b.node_id);
            let next = others
                .iter()
                .filter(unused)
                .find(|b| b.rack.is_none() || !racks.contains(&b.rack.as_deref()))
                .or_else(|| others.iter().find(unused))
                .copied()
                .expect("at least rf live nodes");
            let core_index = least_loaded_core(m, next.node_id, next.cores, &pending);
            let a = Assignment {
                node_id: next.node_id,
                core_index,
            };
            pending.push(a);
            racks.push(next.rack.as_deref());
            replicas.push(a);
        }
        out.push(replicas);
    }
    Some(out)
}

/// The core of `node` (of `cores`) that owns the fewest partitions, counting `pending`
/// assignments not yet written too.
pub fn least_loaded_core(m: &MetaState, node: u64, cores: u32, pending: &[Assignment]) -> u32 {
    let mut load = vec![0usize; cores.max(1) as usize];
    let followers = m
        .replicas
        .values()
        .flatten()
        .flat_map(|r| r.replicas.iter().skip(1));
    for a in m
        .assignments
        .values()
        .flatten()
        .chain(followers)
        .chain(pending)
    {
        if a.node_id == node {
            if let Some(l) = load.get_mut(a.core_index as usize) {
                *l += 1;
            }
        }
    }
    (0..load.len()).min_by_key(|&c| load[c]).unwrap_or(0) as u32
}

/// Where a client's replica assignment puts a partition: broker id `id` names a live node
/// (its least loaded core, counting `pending`), or one core of a core-direct node. `None`
/// for an id of no live broker.
pub fn assignment_of_broker_id(
    m: &MetaState,
    id: i32,
    pending: &[Assignment],
) -> Option<Assignment> {
    m.live_brokers().find_map(|r| {
        let map = crate::brokers::BrokerMap::of_registration(r);
        if !map.is_own_broker_id(id) {
            return None;
        }
        let core_index = match map.core_of_broker_id(id) {
            Some(core) => core as u32,
            None => least_loaded_core(m, r.node_id, r.cores, pending),
        };
        Some(Assignment {
            node_id: r.node_id,
            core_index,
        })
    })
}

/// The (node, core) slots of [`place`], in placement order; never empty.
fn placement_slots(m: &MetaState, (node_id, cores): (u64, u32)) -> Vec<Assignment> {
    let live: BTreeMap<u64, u32> = m.live_brokers().map(|b| (b.node_id, b.cores)).collect();
    let live = if live.is_empty() {
        BTreeMap::from([(node_id, cores.max(1))])
    } else {
        live
    };
    let max_cores = live.values().copied().max().unwrap_or(1);
    let slots: Vec<Assignment> = (0..max_cores)
        .flat_map(|core| {
            live.iter()
                .filter(move |(_, c)| core < **c)
                .map(move |(n, _)| Assignment {
                    node_id: *n,
                    core_index: core,
                })
        })
        .collect();
    assert!(!slots.is_empty(), "every live broker has a core");
    slots
}

/// The configs of an internal topic: compacted, kept forever.
pub fn internal_topic_configs(config: &BrokerConfig) -> std::collections::BTreeMap<String, String> {
    [
        ("retention.ms".to_string(), "-1".to_string()),
        ("cleanup.policy".to_string(), "compact".to_string()),
        (
            "segment.bytes".to_string(),
            config.offsets_topic_segment_bytes.to_string(),
        ),
    ]
    .into_iter()
    .collect()
}

/// The partitions of an internal topic (`__consumer_offsets`, `__transaction_state`): one
/// per core of this node when single; clustered, `cores` per peer, partition i on peer
/// `i mod peers`, core `i / peers` (a peer with fewer cores moves what it lacks onto its own
/// cores at its start), so coordinators spread over every node.
pub fn internal_topic_assignments(config: &BrokerConfig) -> Vec<Assignment> {
    let cores = config.cores() as u32;
    let peers: Vec<u64> = if config.peers.is_empty() {
        vec![config.node_id]
    } else {
        config.peers.keys().copied().collect()
    };
    (0..cores * peers.len() as u32)
        .map(|i| Assignment {
            node_id: peers[i as usize % peers.len()],
            core_index: i / peers.len() as u32,
        })
        .collect()
}

/// The replicas of each partition of an internal topic of replication factor `rf` (at most
/// the peers): the leader where `internal_topic_assignments` puts the partition, the
/// followers on the peers after its node in order, on the same core index.
pub fn internal_topic_replicas(config: &BrokerConfig, rf: usize) -> Vec<Vec<Assignment>> {
    let peers: Vec<u64> = if config.peers.is_empty() {
        vec![config.node_id]
    } else {
        config.peers.keys().copied().collect()
    };
    let rf = rf.clamp(1, peers.len());
    internal_topic_assignments(config)
        .into_iter()
        .map(|leader| {
            let at = peers
                .iter()
                .position(|&n| n == leader.node_id)
                .expect("the leader is a peer");
            (0..rf)
                .map(|k| Assignment {
                    node_id: peers[(at + k) % peers.len()],
                    core_index: leader.core_index,
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_assignments_name_live_nodes_and_their_emptiest_core() {
        let mut m = registered(&[(1, 2), (2, 3)]);
        let a = |node_id, core_index| Assignment {
            node_id,
            core_index,
        };
        m.assignments
            .insert("t".into(), vec![a(2, 0), a(2, 0), a(2, 1), a(1, 0)]);
        assert_eq!(least_loaded_core(&m, 2, 3, &[]), 2);
        assert_eq!(least_loaded_core(&m, 2, 3, &[a(2, 2), a(2, 2)]), 1);
        assert_eq!(assignment_of_broker_id(&m, 2, &[]), Some(a(2, 2)));
        assert_eq!(assignment_of_broker_id(&m, 1, &[]), Some(a(1, 1)));
        assert_eq!(assignment_of_broker_id(&m, 3, &[]), None, "no node 3");
        assert_eq!(assignment_of_broker_id(&m, -1, &[]), None);
    }

    fn registered(nodes: &[(u64, u32)]) -> MetaState {
        let mut m = MetaState::default();
        for (i, (id, cores)) in nodes.iter().enumerate() {
            m.apply(&Command::RegisterBroker {
                broker: Box::new(BrokerRegistration {
                    node_id: *id,
                    host: "127.0.0.1".into(),
                    port: 9000 + i as u16,
                    core_ports: vec![],
                    cores: *cores,
                    rack: None,
                    incarnation: 1,
                    fenced: false,
                }),
            })
            .unwrap();
        }
        m
    }

    #[test]
    fn partitions_spread_over_nodes_first_then_cores() {
        let m = registered(&[(1, 2), (2, 2), (3, 1)]);
        let a = place(&m, (1, 2), 6);
        let got: Vec<(u64, u32)> = a.iter().map(|a| (a.node_id, a.core_index)).collect();
        assert_eq!(got, vec![(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (1, 0)]);
    }

    #[test]
    fn placement_skips_fenced_nodes_and_falls_back_to_this_node() {
        let mut m = registered(&[(1, 1), (2, 1), (3, 1)]);
        m.apply(&Command::FenceBroker {
            node_id: 2,
            incarnation: 1,
        })
        .unwrap();
        let nodes: Vec<u64> = place(&m, (1, 1), 4).iter().map(|a| a.node_id).collect();
        assert_eq!(nodes, vec![1, 3, 1, 3]);
        let empty = MetaState::default();
        let a = place(&empty, (7, 2), 3);
        assert!(a.iter().all(|a| a.node_id == 7 && a.core_index < 2));
    }

    #[test]
    fn internal_topics_spread_over_the_peers() {
        let mut c = BrokerConfig::new("/tmp/x".into(), "127.0.0.1:0".parse().unwrap(), vec![0, 1]);
        let single: Vec<(u64, u32)> = internal_topic_assignments(&c)
            .iter()
            .map(|a| (a.node_id, a.core_index))
            .collect();
        assert_eq!(single, vec![(1, 0), (1, 1)]);
        c.peers = (1..=3)
            .map(|i| (i, format!("127.0.0.1:{}", 7000 + i)))
            .collect();
        let spread: Vec<(u64, u32)> = internal_topic_assignments(&c)
            .iter()
            .map(|a| (a.node_id, a.core_index))
            .collect();
        assert_eq!(spread, vec![(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (3, 1)]);
        // Replicated: the leader where the partition is placed, the followers on the next
        // peers, same core; at most one replica per peer.
        let nodes = |rf| -> Vec<Vec<(u64, u32)>> {
            internal_topic_replicas(&c, rf)
                .iter()
                .map(|r| r.iter().map(|a| (a.node_id, a.core_index)).collect())
                .collect()
        };
        let three = nodes(5);
        assert_eq!(three.len(), 6);
        assert_eq!(three[1], vec![(2, 0), (3, 0), (1, 0)]);
        assert_eq!(three[5], vec![(3, 1), (1, 1), (2, 1)]);
        assert_eq!(nodes(1)[4], vec![(2, 1)]);
    }
}
