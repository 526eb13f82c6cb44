//! KIP-951: a Produce (v10+) or Fetch (v16+) partition answered NOT_LEADER_OR_FOLLOWER or
//! FENCED_LEADER_EPOCH names the leader this broker's metadata copy knows (`current_leader`:
//! its broker id and leader epoch), and the response carries that broker's endpoint
//! (`node_endpoints`, once per broker), so a client goes to the new leader without a
//! metadata round trip first (the Java client does). Nothing is named while the partition
//! has no leader.

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    fetch_response, produce_response, BrokerId, FetchResponse, ProduceResponse,
};
use meta::MetaState;

use super::str_bytes;
use crate::codes;
use crate::core::CoreState;

/// The first Produce version with `current_leader` and `node_endpoints`.
pub const PRODUCE_LEADER_HINT_VERSION: i16 = 10;
/// The first Fetch version with `node_endpoints` (`current_leader` is there from v12).
pub const FETCH_LEADER_HINT_VERSION: i16 = 16;

/// Where a client should go for one partition.
struct Hint {
    leader_id: i32,
    leader_epoch: i32,
    host: String,
    port: u16,
    rack: Option<String>,
}

/// Whether an answer's error sends the client to another leader.
fn wants_hint(error_code: i16) -> bool {
    error_code == codes::NOT_LEADER_OR_FOLLOWER || error_code == codes::FENCED_LEADER_EPOCH
}

/// The leader of `topic`/`partition` as clients on `listener` reach it; `None` while it has
/// none (or its node is fenced).
fn hint(
    state: &CoreState,
    m: &MetaState,
    listener: usize,
    topic: &str,
    partition: i32,
) -> Option<Hint> {
    let partition = u32::try_from(partition).ok()?;
    let replicas = m.replica_set(topic, partition);
    if replicas.is_some_and(|r| r.leader.is_none()) {
        return None;
    }
    let at = m.assignment(topic, partition)?;
    let cluster = state.cluster_brokers_on(m, listener);
    let leader_id = cluster.broker_id(at)?;
    let endpoint = cluster.endpoint(at)?;
    Some(Hint {
        leader_id,
        leader_epoch: replicas.map_or(0, |r| r.leader_epoch),
        host: endpoint.host,
        port: endpoint.port,
        rack: m.brokers.get(&at.node_id).and_then(|b| b.rack.clone()),
    })
}

/// The hint for one partition answer (`None`: its error sends nowhere, or no leader is
/// known): (leader id, leader epoch), its endpoint kept in `endpoints` once per broker.
fn hint_for(
    state: &CoreState,
    m: &MetaState,
    listener: usize,
    topic: &str,
    partition: i32,
    error_code: i16,
    endpoints: &mut BTreeMap<i32, Hint>,
) -> Option<(BrokerId, i32)> {
    if !wants_hint(error_code) {
        return None;
    }
    let h = hint(state, m, listener, topic, partition)?;
    let named = (BrokerId(h.leader_id), h.leader_epoch);
    endpoints.insert(h.leader_id, h);
    Some(named)
}

/// Fills a Produce response's leader hints (see the module comment).
pub fn fill_produce(state: &CoreState, listener: usize, version: i16, resp: &mut ProduceResponse) {
    if version < PRODUCE_LEADER_HINT_VERSION {
        return;
    }
    let m = state.meta.borrow();
    let mut endpoints: BTreeMap<i32, Hint> = BTreeMap::new();
    for t in &mut resp.responses {
        let name = if version >= 13 {
            state.topic_name_by_id(t.topic_id)
        } else {
            Some(t.name.0.to_string())
        };
        let Some(name) = name else { continue };
        for p in &mut t.partition_responses {
            let at = (p.index, p.error_code);
            if let Some((id, epoch)) =
                hint_for(state, &m, listener, &name, at.0, at.1, &mut endpoints)
            {
                p.current_leader = produce_response::LeaderIdAndEpoch::default()
                    .with_leader_id(id)
                    .with_leader_epoch(epoch);
            }
        }
    }
    resp.node_endpoints = endpoints
        .into_values()
        .map(|h| {
            produce_response::NodeEndpoint::default()
                .with_node_id(BrokerId(h.leader_id))
                .with_host(str_bytes(h.host))
                .with_port(i32::from(h.port))
                .with_rack(h.rack.map(str_bytes))
        })
        .collect();
}

/// Fills a Fetch response's leader hints (see the module comment).
pub fn fill_fetch(state: &CoreState, listener: usize, version: i16, resp: &mut FetchResponse) {
    if version < FETCH_LEADER_HINT_VERSION {
        return;
    }
    let m = state.meta.borrow();
    let mut endpoints: BTreeMap<i32, Hint> = BTreeMap::new();
    for t in &mut resp.responses {
        // v13+ names topics by id.
        let Some(name) = state.topic_name_by_id(t.topic_id) else {
            continue;
        };
        for p in &mut t.partitions {
            let at = (p.partition_index, p.error_code);
            if let Some((id, epoch)) =
                hint_for(state, &m, listener, &name, at.0, at.1, &mut endpoints)
            {
                p.current_leader = fetch_response::LeaderIdAndEpoch::default()
                    .with_leader_id(id)
                    .with_leader_epoch(epoch);
            }
        }
    }
    resp.node_endpoints = endpoints
        .into_values()
        .map(|h| {
            fetch_response::NodeEndpoint::default()
                .with_node_id(BrokerId(h.leader_id))
                .with_host(str_bytes(h.host))
                .with_port(i32::from(h.port))
                .with_rack(h.rack.map(str_bytes))
        })
        .collect();
}
