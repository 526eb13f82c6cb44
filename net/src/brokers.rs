//! How this node shows itself to Kafka clients as brokers: the one place that maps cores to
//! broker ids and endpoints (Metadata, DescribeCluster, FindCoordinator, the admin checks of
//! broker ids all ask here).
//!
//! - Core-direct off: the node is one broker, id = node id, at the advertised address; every
//!   core accepts on the shared port and forwards what it does not own (`route`).
//! - Core-direct on (`--core-direct on`): each core is a broker of its own, id =
//!   `node_id × CORE_BROKER_ID_STRIDE + core`, at the advertised host and that core's own
//!   port. A client then sends a partition's requests to the broker that leads it, which is
//!   its owner core, with no cross-core hop. The shared port still serves every request.
//! - Clustered (issue #17): every node registers its map in the metastore's broker registry
//!   (`meta::BrokerRegistration`); the other nodes' brokers are rebuilt from there
//!   ([`BrokerMap::of_registration`], [`ClusterBrokers`]).

/// Broker ids of one node's cores in core-direct mode: node 1's cores are 1000, 1001, ...
/// (so at most this many cores per node).
pub const CORE_BROKER_ID_STRIDE: i32 = 1000;

/// The broker id of `core` of node `node_id` in core-direct mode; `None` when it does not fit
/// (a core past the stride, or an id past `i32::MAX`).
pub fn core_broker_id(node_id: u64, core: usize) -> Option<i32> {
    if core >= CORE_BROKER_ID_STRIDE as usize {
        return None;
    }
    let id = node_id
        .checked_mul(CORE_BROKER_ID_STRIDE as u64)?
        .checked_add(core as u64)?;
    i32::try_from(id).ok()
}

/// One broker as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub broker_id: i32,
    pub host: String,
    pub port: u16,
}

/// This node's brokers: one (core-direct off) or one per core (on).
#[derive(Debug, Clone)]
pub struct BrokerMap {
    node_id: u64,
    host: String,
    /// The shared listener's advertised port (the one broker's port when core-direct is off).
    shared_port: u16,
    /// Core-direct: each core's port, by core. Empty when off.
    core_ports: Vec<u16>,
}

impl BrokerMap {
    /// Core-direct off: the node is one broker at `host:port`.
    pub fn single(node_id: u64, host: String, port: u16) -> Self {
        Self {
            node_id,
            host,
            shared_port: port,
            core_ports: Vec::new(),
        }
    }

    /// Core-direct on: core c is a broker at `host:core_ports[c]`. The ids must fit (checked
    /// by `BrokerConfig::validate`).
    pub fn per_core(node_id: u64, host: String, shared_port: u16, core_ports: Vec<u16>) -> Self {
        debug_assert!(
            !core_ports.is_empty() && core_broker_id(node_id, core_ports.len() - 1).is_some()
        );
        Self {
            node_id,
            host,
            shared_port,
            core_ports,
        }
    }

    /// The map another node registered (its own view of itself).
    pub fn of_registration(r: &meta::BrokerRegistration) -> Self {
        Self {
            node_id: r.node_id,
            host: r.host.clone(),
            shared_port: r.port,
            core_ports: r.core_ports.clone(),
        }
    }

    /// This map as a registry entry (incarnation 0: the caller sets it).
    pub fn registration(&self, cores: u32, rack: Option<String>) -> meta::BrokerRegistration {
        meta::BrokerRegistration {
            node_id: self.node_id,
            host: self.host.clone(),
            port: self.shared_port,
            core_ports: self.core_ports.clone(),
            cores,
            rack,
            incarnation: 0,
            fenced: false,
        }
    }

    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    pub fn core_direct(&self) -> bool {
        !self.core_ports.is_empty()
    }

    /// The broker id that leads what `core` owns (the node id when core-direct is off).
    pub fn broker_id_of_core(&self, core: usize) -> i32 {
        if self.core_direct() {
            core_broker_id(self.node_id, core).unwrap_or(-1)
        } else {
            self.node_id as i32
        }
    }

    /// The core that broker `id` stands for; `None` when it is not one of this node's cores
    /// (always `None` when core-direct is off: the node's one id stands for every core).
    pub fn core_of_broker_id(&self, id: i32) -> Option<usize> {
        if !self.core_direct() {
            return None;
        }
        let base = core_broker_id(self.node_id, 0)?;
        let core = usize::try_from(id.checked_sub(base)?).ok()?;
        (core < self.core_ports.len()).then_some(core)
    }

    /// Whether `id` names this node (any of its cores in core-direct mode).
    pub fn is_own_broker_id(&self, id: i32) -> bool {
        if self.core_direct() {
            self.core_of_broker_id(id).is_some()
        } else {
            i64::from(id) == self.node_id as i64
        }
    }

    /// The controller id clients are given: core 0's broker (the node when off).
    pub fn controller_id(&self) -> i32 {
        self.broker_id_of_core(0)
    }

    /// The broker clients should talk to for what `core` owns.
    pub fn endpoint_of_core(&self, core: usize) -> Endpoint {
        Endpoint {
            broker_id: self.broker_id_of_core(core),
            host: self.host.clone(),
            port: self
                .core_ports
                .get(core)
                .copied()
                .unwrap_or(self.shared_port),
        }
    }

    /// Every broker of this node, by id.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        if self.core_direct() {
            (0..self.core_ports.len())
                .map(|c| self.endpoint_of_core(c))
                .collect()
        } else {
            vec![self.endpoint_of_core(0)]
        }
    }
}

/// The broker id of `core` of the node registered as `r` (whether fenced or not).
pub fn broker_id_of(r: &meta::BrokerRegistration, core: usize) -> i32 {
    if r.core_ports.is_empty() {
        i32::try_from(r.node_id).unwrap_or(-1)
    } else {
        core_broker_id(r.node_id, core).unwrap_or(-1)
    }
}

/// Every node's brokers, as clients see the cluster: this node's own map, and the other
/// nodes' from the registry of a metadata copy. A fenced node has no brokers.
pub struct ClusterBrokers<'a> {
    pub own: &'a BrokerMap,
    pub meta: &'a meta::MetaState,
    /// Set for a client on an extra listener (issue #19): its name, and this node's
    /// advertised host and port on it. Every node is then shown at its endpoint of that
    /// listener (`MetaState::broker_listeners`); a node without it is not shown.
    pub listener: Option<(&'a str, String, u16)>,
}

impl ClusterBrokers<'_> {
    /// The map of node `node_id`; `None` for a node not registered or fenced (or without
    /// the client's listener).
    pub fn node(&self, node_id: u64) -> Option<BrokerMap> {
        if let Some((name, host, port)) = &self.listener {
            // Extra listeners never run core-direct (`BrokerConfig::validate`): one broker
            // per node.
            if node_id == self.own.node_id {
                return Some(BrokerMap::single(node_id, host.clone(), *port));
            }
            self.meta.brokers.get(&node_id).filter(|r| !r.fenced)?;
            let l = self
                .meta
                .broker_listeners
                .get(&node_id)?
                .iter()
                .find(|l| l.name == *name)?;
            return Some(BrokerMap::single(node_id, l.host.clone(), l.port));
        }
        if node_id == self.own.node_id {
            return Some(self.own.clone());
        }
        self.meta
            .brokers
            .get(&node_id)
            .filter(|r| !r.fenced)
            .map(BrokerMap::of_registration)
    }

    /// The broker leading what `a` places; `None` when its node is fenced or unknown.
    pub fn endpoint(&self, a: meta::Assignment) -> Option<Endpoint> {
        let core = a.core_index as usize;
        if a.node_id == self.own.node_id && self.listener.is_none() {
            return Some(self.own.endpoint_of_core(core));
        }
        self.node(a.node_id).map(|m| m.endpoint_of_core(core))
    }

    /// The id of the broker leading what `a` places (no allocation: Metadata asks it for
    /// every partition); `None` when its node is fenced or unknown.
    pub fn broker_id(&self, a: meta::Assignment) -> Option<i32> {
        let core = a.core_index as usize;
        if a.node_id == self.own.node_id {
            return Some(self.own.broker_id_of_core(core));
        }
        let r = self.meta.brokers.get(&a.node_id).filter(|r| !r.fenced)?;
        Some(broker_id_of(r, core))
    }

    /// The controller clients are given: core 0's broker of the metastore leader's node
    /// (admin requests sent there need no forwarding hop), else this node's.
    pub fn controller_id(&self, leader: Option<u64>) -> i32 {
        leader
            .and_then(|n| {
                self.broker_id(meta::Assignment {
                    node_id: n,
                    core_index: 0,
                })
            })
            .unwrap_or_else(|| self.own.controller_id())
    }

    /// The rack of node `node_id`, as registered.
    pub fn rack(&self, node_id: u64) -> Option<String> {
        self.meta.brokers.get(&node_id).and_then(|r| r.rack.clone())
    }

    /// Every live broker of the cluster with its node id, by broker id.
    pub fn endpoints(&self) -> Vec<(u64, Endpoint)> {
        let mut nodes: Vec<u64> = self.meta.live_brokers().map(|r| r.node_id).collect();
        if !nodes.contains(&self.own.node_id) {
            nodes.push(self.own.node_id);
        }
        let mut out: Vec<(u64, Endpoint)> = nodes
            .into_iter()
            .filter_map(|n| self.node(n).map(|m| (n, m)))
            .flat_map(|(n, m)| m.endpoints().into_iter().map(move |e| (n, e)))
            .collect();
        out.sort_by_key(|(_, e)| e.broker_id);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_ids_are_node_times_stride_plus_core() {
        assert_eq!(core_broker_id(1, 0), Some(1000));
        assert_eq!(core_broker_id(1, 1), Some(1001));
        assert_eq!(core_broker_id(7, 999), Some(7999));
        assert_eq!(core_broker_id(1, 1000), None, "a core past the stride");
        assert_eq!(core_broker_id(2_147_483, 647), Some(i32::MAX));
        assert_eq!(core_broker_id(2_147_483, 648), None, "past i32::MAX");
        assert_eq!(core_broker_id(u64::MAX, 0), None);
    }

    #[test]
    fn per_core_map_round_trips_and_refuses_foreign_ids() {
        let m = BrokerMap::per_core(3, "h".into(), 9092, vec![9093, 9094]);
        assert!(m.core_direct());
        assert_eq!(m.broker_id_of_core(0), 3000);
        assert_eq!(m.broker_id_of_core(1), 3001);
        assert_eq!(m.controller_id(), 3000);
        for core in 0..2 {
            assert_eq!(m.core_of_broker_id(m.broker_id_of_core(core)), Some(core));
        }
        for foreign in [3, 2999, 3002, 1000, -1, i32::MIN, i32::MAX] {
            assert_eq!(m.core_of_broker_id(foreign), None, "{foreign}");
            assert!(!m.is_own_broker_id(foreign), "{foreign}");
        }
        assert!(m.is_own_broker_id(3001));
        assert_eq!(
            m.endpoints(),
            vec![
                Endpoint {
                    broker_id: 3000,
                    host: "h".into(),
                    port: 9093
                },
                Endpoint {
                    broker_id: 3001,
                    host: "h".into(),
                    port: 9094
                },
            ]
        );
    }

    #[test]
    fn single_map_is_the_node_on_the_shared_port() {
        let m = BrokerMap::single(3, "h".into(), 9092);
        assert!(!m.core_direct());
        assert_eq!(m.broker_id_of_core(0), 3);
        assert_eq!(m.broker_id_of_core(5), 3);
        assert_eq!(m.controller_id(), 3);
        assert_eq!(m.core_of_broker_id(3), None);
        assert!(m.is_own_broker_id(3));
        assert!(!m.is_own_broker_id(3000));
        assert_eq!(
            m.endpoints(),
            vec![Endpoint {
                broker_id: 3,
                host: "h".into(),
                port: 9092
            }]
        );
        assert_eq!(m.endpoint_of_core(1).port, 9092);
    }
}
