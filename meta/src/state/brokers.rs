//! The broker registry: each node's registration, its listeners, and the fencing bound.

use rkyv::{Archive, Deserialize, Serialize};

use super::*;

/// One broker node as Kafka clients reach it (issue #17), registered by the node at each start.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub node_id: u64,
    /// The advertised host and port of the node's shared Kafka listener.
    pub host: String,
    pub port: u16,
    /// Core-direct: each core's advertised port (core c is broker `node_id × 1000 + c`);
    /// empty when core-direct is off (the node is broker `node_id`).
    pub core_ports: Vec<u16>,
    pub cores: u32,
    pub rack: Option<String>,
    /// Random, new at every start of the node's process: a heartbeat or fence meant for an
    /// earlier start is refused.
    pub incarnation: u64,
    /// Missed its session (no heartbeat within the session timeout): not listed to clients,
    /// its partitions unavailable until it heartbeats again.
    pub fenced: bool,
}

impl BrokerRegistration {
    pub(super) fn validate(&self) -> Result<(), Refusal> {
        let bad = |reason: String| {
            Err(Refusal::InvalidBroker {
                node_id: self.node_id,
                reason,
            })
        };
        if self.host.is_empty() || self.host.len() > MAX_BROKER_HOST_BYTES {
            return bad(format!("host must be 1 to {MAX_BROKER_HOST_BYTES} bytes"));
        }
        if self.cores == 0 || self.cores > MAX_BROKER_CORES {
            return bad(format!("cores must be 1 to {MAX_BROKER_CORES}"));
        }
        if !self.core_ports.is_empty() && self.core_ports.len() != self.cores as usize {
            return bad(format!(
                "{} core ports for {} cores",
                self.core_ports.len(),
                self.cores
            ));
        }
        if self
            .rack
            .as_ref()
            .is_some_and(|r| r.len() > MAX_BROKER_RACK_BYTES)
        {
            return bad(format!("rack longer than {MAX_BROKER_RACK_BYTES} bytes"));
        }
        Ok(())
    }
}

/// The most brokers that may be fenced at once among `registered`: fewer than half, so a
/// fencing leader that lost touch with the others can never fence a quorum (the breaker of
/// issue #17). One broker alone is never fenced.
pub fn max_fenced_brokers(registered: usize) -> usize {
    registered.saturating_sub(1) / 2
}
/// A listener a node serves besides its primary one (issue #19), as clients on it reach the
/// node: a client's Metadata names every broker by the listener it came in on.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ListenerEndpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// The most extra listeners one node registers.
pub const MAX_LISTENERS_PER_BROKER: usize = 16;
/// The longest listener name and host, in bytes.
pub const MAX_LISTENER_FIELD_BYTES: usize = 255;
