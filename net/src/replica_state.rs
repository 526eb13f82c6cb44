//! The state of a core's replicas of replicated partitions (issue #18): each one's role,
//! generation and, on a leader, its followers' progress and the ISR change in flight. Plain
//! data that `CoreState` holds; `crate::replica` runs the roles.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Instant;

use glommio::sync::Semaphore;
use meta::{Assignment, MetaState};

/// The most cursor files one fetch answer's copies are taken from (a parent has one per
/// link).
pub const MAX_COPIED_CURSOR_FILES: usize = 256;
/// Bytes a follower asks for per fetch (one larger batch still comes whole).
pub const REPLICA_FETCH_MAX_BYTES: u32 = 1 << 20;
/// The largest fetch answer a follower reads: a batch larger than this cannot be replicated
/// (keep `max.message.bytes` below it).
pub const MAX_REPLICA_FETCH_RESPONSE_BYTES: usize = 64 << 20;
/// The most bytes one fetch answer carries over all its partitions (Kafka's
/// `replica.fetch.response.max.bytes`; one larger batch still comes whole).
pub const REPLICA_FETCH_RESPONSE_MAX_BYTES: usize = 8 << 20;
/// The most partitions one fetch names (a follower core following more from one leader
/// core takes them in turns).
pub const MAX_PARTITIONS_PER_REPLICA_FETCH: usize = 4_096;
/// How long a leader holds a follower's fetch that finds nothing new.
pub const REPLICA_FETCH_MAX_WAIT_MS: u32 = 500;
/// A follower's pause after a failed call or a refusal (no leader yet, a transport error).
pub const REPLICA_RETRY_BACKOFF_MS: u64 = 100;
/// A follower copies its leader's fan-out cursor files at most this often per partition (a
/// cursor that resumes on a new leader repeats at most about this much of its copying).
pub const CURSOR_COPY_INTERVAL_MS: u64 = 500;

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
