//! The state of a core's replicas of replicated partitions (issue #18): each one's role,
//! generation and, on a leader, its followers' progress and the ISR change in flight. Plain
//! data that `CoreState` holds; `crate::replica` runs the roles.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Instant;

use glommio::sync::Semaphore;
use meta::{Assignment, MetaState};

/// A partition: topic and index (`crate::core::PartitionKey`, which imports this module).
type PartitionKey = (String, u32);

/// What this core's replica of a partition does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader { epoch: i32 },
    Follower { epoch: i32, leader: Assignment },
    Offline { epoch: i32 },
}

/// A follower's progress as its leader sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FollowerProgress {
    /// Everything below is durable on the follower (its last fetch offset).
    pub(crate) durable_end: u64,
    /// The last time its log reached the leader's log end (Kafka's lastCaughtUpTime).
    pub(crate) caught_up_at: Instant,
    /// The leader's log end and the time of its previous fetch.
    pub(crate) last_fetch_leo: u64,
    pub(crate) last_fetch_at: Instant,
}

pub(crate) struct Replica {
    pub(crate) role: Role,
    pub(crate) generation: u64,
    /// A leader: its epoch is started and it serves clients.
    pub(crate) ready: bool,
    /// A leader: since when (the baseline of a follower that has not fetched yet).
    pub(crate) since: Instant,
    pub(crate) followers: HashMap<u64, FollowerProgress>,
    /// The ISR proposed and not yet applied here (`None`: no change in flight). The high
    /// watermark counts its members too until the change is seen (Kafka's maximal ISR): a
    /// member being added must have what is acknowledged before the metastore lists it.
    pub(crate) proposed_isr: Option<Vec<u64>>,
}

/// This core's replicas of replicated partitions.
#[derive(Default)]
pub struct Replicas {
    pub(crate) map: HashMap<PartitionKey, Replica>,
    /// One per partition, kept across roles: a follower's append and a leader's epoch start
    /// hold it.
    pub(crate) locks: HashMap<PartitionKey, Rc<Semaphore>>,
    pub(crate) next_generation: u64,
    pub(crate) isr_loop_started: bool,
    /// The follower side's fetchers, by leader (`crate::replica_fetcher`).
    pub(crate) fetchers: Fetchers,
}

/// Why a fetcher hands a partition back to its follower task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandBack {
    /// Cut the log to the leader's again (OffsetForLeaderEpoch), then rejoin.
    Truncate,
    /// Start the log over, empty, at this offset (the leader's log start), then rejoin.
    RestartAt(u64),
}

/// One partition a fetcher copies.
pub struct FetchMember {
    pub(crate) generation: u64,
    pub(crate) epoch: i32,
    pub(crate) back: flume::Sender<HandBack>,
    pub(crate) last_cursor_copy: Option<Instant>,
}

/// The partitions one fetcher copies, and where its next fetch starts among them (a fetch
/// names at most `MAX_PARTITIONS_PER_REPLICA_FETCH`, and the answer's byte budget may skip
/// the last ones: they go first next time).
#[derive(Default)]
pub struct Fetcher {
    pub(crate) members: BTreeMap<PartitionKey, FetchMember>,
    pub(crate) next_start: usize,
}

/// This core's fetchers, by leader (node, core).
pub type Fetchers = HashMap<Assignment, Fetcher>;

/// The roles of the replicas that `m` places on core `core` of node `node`.
pub fn desired_roles(m: &MetaState, node: u64, core: u32) -> HashMap<PartitionKey, Role> {
    let me = Assignment {
        node_id: node,
        core_index: core,
    };
    let mut out = HashMap::new();
    for (name, parts) in &m.replicas {
        for (p, r) in parts.iter().enumerate() {
            if r.replica_on(node) != Some(me) {
                continue;
            }
            let role = match r.leader_assignment() {
                Some(l) if l.node_id == node => Role::Leader {
                    epoch: r.leader_epoch,
                },
                Some(leader) => Role::Follower {
                    epoch: r.leader_epoch,
                    leader,
                },
                None => Role::Offline {
                    epoch: r.leader_epoch,
                },
            };
            out.insert((name.clone(), p as u32), role);
        }
    }
    out
}
