//! The classic Kafka group membership state machine of one group: Empty, PreparingRebalance,
//! CompletingRebalance, Stable, Dead. Member ids, MEMBER_ID_REQUIRED, generation fencing,
//! session and rebalance timeouts, static membership (`group.instance.id`) and protocol
//! selection. Client-side assignors (range, roundrobin, cooperative-sticky) only see opaque
//! metadata and assignments; cooperative rounds are plain rejoins with changed metadata.
//!
//! Pure state: time is passed in (`now`), and the answers to JoinGroup and SyncGroup calls that
//! must wait for the rest of the group go through one-shot channels.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::codes::{
    self, COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
};

/// Kafka's `group.min.session.timeout.ms` and `group.max.session.timeout.ms`.
pub const MIN_SESSION_TIMEOUT_MS: i32 = 1_000;
pub const MAX_SESSION_TIMEOUT_MS: i32 = 1_800_000;
/// Members one group may hold (Kafka's `group.max.size` default is unbounded; we bound it).
pub const MAX_GROUP_MEMBERS: usize = 10_000;
/// Bytes of the client id kept as a generated member id's prefix.
pub const MEMBER_ID_PREFIX_MAX_BYTES: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub fn name(&self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

#[derive(Debug, Clone)]
pub struct JoinArgs {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED with its id.
    pub require_known_member_id: bool,
}

#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    pub error: i16,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Filled for the leader only: (member id, instance id, metadata of the chosen protocol).
    pub members: Vec<(String, Option<String>, Bytes)>,
}

#[derive(Debug, Clone, Default)]
pub struct SyncResult {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

/// An answer now, or one that arrives when the group is ready.
pub enum Reply<T> {
    Now(T),
    Later(flume::Receiver<T>),
}

#[derive(Debug)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    last_heartbeat: Instant,
    joined_seq: u64,
    join_waiter: Option<flume::Sender<JoinResult>>,
    sync_waiter: Option<flume::Sender<SyncResult>>,
}

impl Member {
    /// This member's metadata for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

/// A member handed to a classic group by `Group::taken_over`.
pub struct TakenOverMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
}

pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    static_members: HashMap<String, String>,
    /// Member ids handed out by MEMBER_ID_REQUIRED, with the time they expire unless the
    /// member joins with them (a session timeout later).
    pending_member_ids: HashMap<String, Instant>,
    rebalance_deadline: Option<Instant>,
    initial_delay_until: Option<Instant>,
    sync_deadline: Option<Instant>,
    initial_rebalance_delay: Duration,
    next_seq: u64,
}

pub(crate) fn new_member_id(client_id: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let prefix = if client_id.is_empty() {
        "member"
    } else {
        let mut end = client_id.len().min(MEMBER_ID_PREFIX_MAX_BYTES);
        while !client_id.is_char_boundary(end) {
            end -= 1;
        }
        &client_id[..end]
    };
    format!(
        "{prefix}-{:016x}",
        t ^ n.rotate_left(40) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    )
}

impl Group {
    /// A classic group taking over the classic members of a consumer group whose last
    /// consumer-protocol member left (Kafka 4's online downgrade): each keeps its id,
    /// protocols and assignment, the group epoch becomes the generation, and a rebalance
    /// starts at once so that they join it and assign themselves again.
    pub fn taken_over(
        id: &str,
        initial_rebalance_delay: Duration,
        generation: i32,
        members: Vec<TakenOverMember>,
        now: Instant,
    ) -> Self {
        let mut g = Group::new(id, initial_rebalance_delay);
        g.generation = generation;
        g.protocol_type = Some("consumer".into());
        for m in members {
            g.protocol = g
                .protocol
                .or_else(|| m.protocols.first().map(|(n, _)| n.clone()));
            g.leader = g.leader.or_else(|| Some(m.id.clone()));
            if let Some(instance) = &m.instance_id {
                g.static_members.insert(instance.clone(), m.id.clone());
            }
            g.next_seq += 1;
            g.members.insert(
                m.id.clone(),
                Member {
                    id: m.id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    protocols: m.protocols,
                    assignment: m.assignment,
                    last_heartbeat: now,
                    joined_seq: g.next_seq,
                    join_waiter: None,
                    sync_waiter: None,
                },
            );
        }
        if g.members.is_empty() {
            return g;
        }
        g.state = GroupState::Stable;
        g.prepare_rebalance(now);
        g
    }

    pub fn new(id: &str, initial_rebalance_delay: Duration) -> Self {
        Self {
            id: id.to_string(),
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_member_ids: HashMap::new(),
            rebalance_deadline: None,
            initial_delay_until: None,
            sync_deadline: None,
            initial_rebalance_delay,
            next_seq: 0,
        }
    }

    fn error_join(error: i16, member_id: &str) -> Reply<JoinResult> {
        Reply::Now(JoinResult {
            error,
            generation: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        })
    }

    pub fn join(&mut self, a: JoinArgs, now: Instant) -> Reply<JoinResult> {
        if self.state == GroupState::Dead {
            return Self::error_join(COORDINATOR_NOT_AVAILABLE, &a.member_id);
        }
        if !(MIN_SESSION_TIMEOUT_MS..=MAX_SESSION_TIMEOUT_MS).contains(&a.session_timeout_ms) {
            return Self::error_join(INVALID_SESSION_TIMEOUT, &a.member_id);
        }
        let type_clash = !self.members.is_empty()
            && self
                .protocol_type
                .as_deref()
                .is_some_and(|t| t != a.protocol_type);
        let no_common = !self.members.is_empty()
            && !self
                .candidate_protocols()
                .iter()
                .any(|c| a.protocols.iter().any(|(n, _)| n == c));
        if a.protocols.is_empty() || a.protocol_type.is_empty() || type_clash || no_common {
            return Self::error_join(INCONSISTENT_GROUP_PROTOCOL, &a.member_id);
        }
        if a.member_id.is_empty() {
            if let Some(instance) = &a.instance_id {
                if let Some(old_id) = self.static_members.get(instance).cloned() {
                    return self.rejoin_static(&old_id, a, now);
                }
            } else if a.require_known_member_id {
                if self.members.len() + self.pending_member_ids.len() >= MAX_GROUP_MEMBERS {
                    return Self::error_join(GROUP_MAX_SIZE_REACHED, "");
                }
                let id = new_member_id(&a.client_id);
                self.pending_member_ids.insert(
                    id.clone(),
                    now + Duration::from_millis(a.session_timeout_ms as u64),
                );
                return Self::error_join(MEMBER_ID_REQUIRED, &id);
            }
            if self.members.len() >= MAX_GROUP_MEMBERS {
                return Self::error_join(GROUP_MAX_SIZE_REACHED, "");
            }
            let id = new_member_id(&a.client_id);
            return self.add_and_rebalance(id, a, now);
        }
        if self.pending_member_ids.remove(&a.member_id).is_some() {
            let id = a.member_id.clone();
            return self.add_and_rebalance(id, a, now);
        }
        let Some(m) = self.members.get(&a.member_id) else {
            return Self::error_join(UNKNOWN_MEMBER_ID, &a.member_id);
        };
        if let Some(instance) = &a.instance_id {
            if self.static_members.get(instance) != Some(&a.member_id) {
                return Self::error_join(FENCED_INSTANCE_ID, &a.member_id);
            }
        }
        let same_metadata = m.protocols == a.protocols;
        let is_leader = self.leader.as_deref() == Some(a.member_id.as_str());
        let id = a.member_id.clone();
        let (rx, tx) = {
            let (tx, rx) = flume::bounded(1);
            (rx, tx)
        };
        {
            let m = self.members.get_mut(&id).expect("checked above");
            m.protocols = a.protocols;
            m.session_timeout = Duration::from_millis(a.session_timeout_ms as u64);
            m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms.max(0) as u64);
            m.last_heartbeat = now;
            m.join_waiter = Some(tx);
        }
        match self.state {
            GroupState::PreparingRebalance => {}
            GroupState::CompletingRebalance | GroupState::Stable if same_metadata && !is_leader => {
                // A follower rejoining with unchanged metadata gets the current generation.
                let result = self.join_result_for(&id);
                self.members.get_mut(&id).expect("member").join_waiter = None;
                return Reply::Now(result);
            }
            _ => self.prepare_rebalance(now),
        }
        self.try_complete_join(now);
        Reply::Later(rx)
    }

    fn rejoin_static(&mut self, old_id: &str, a: JoinArgs, now: Instant) -> Reply<JoinResult> {
        let new_id = new_member_id(&a.client_id);
        let mut m = self
            .members
            .remove(old_id)
            .expect("static member is a member");
        if let Some(w) = m.join_waiter.take() {
            let _ = w.send(JoinResult {
                error: FENCED_INSTANCE_ID,
                generation: -1,
                member_id: old_id.to_string(),
                ..Default::default()
            });
        }
        if let Some(w) = m.sync_waiter.take() {
            let _ = w.send(SyncResult {
                error: FENCED_INSTANCE_ID,
                ..Default::default()
            });
        }
        let same_metadata = m.protocols == a.protocols;
        m.id = new_id.clone();
        m.protocols = a.protocols;
        m.client_id = a.client_id;
        m.client_host = a.client_host;
        m.session_timeout = Duration::from_millis(a.session_timeout_ms as u64);
        m.rebalance_timeout = Duration::from_millis(a.rebalance_timeout_ms.max(0) as u64);
        m.last_heartbeat = now;
        let was_leader = self.leader.as_deref() == Some(old_id);
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        self.static_members
            .insert(a.instance_id.clone().expect("static"), new_id.clone());
        self.members.insert(new_id.clone(), m);
        if self.state == GroupState::Stable && same_metadata && !was_leader {
            // KIP-345: a static member that restarts within its session keeps its assignment
            // and causes no rebalance.
            return Reply::Now(self.join_result_for(&new_id));
        }
        let (tx, rx) = flume::bounded(1);
        self.members.get_mut(&new_id).expect("inserted").join_waiter = Some(tx);
        if self.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(now);
        }
        self.try_complete_join(now);
        Reply::Later(rx)
    }

    fn add_and_rebalance(&mut self, id: String, a: JoinArgs, now: Instant) -> Reply<JoinResult> {
        let (tx, rx) = flume::bounded(1);
        self.next_seq += 1;
        if let Some(instance) = &a.instance_id {
            self.static_members.insert(instance.clone(), id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(a.protocol_type.clone());
        }
        self.members.insert(
            id.clone(),
            Member {
                id: id.clone(),
                instance_id: a.instance_id,
                client_id: a.client_id,
                client_host: a.client_host,
                session_timeout: Duration::from_millis(a.session_timeout_ms as u64),
                rebalance_timeout: Duration::from_millis(a.rebalance_timeout_ms.max(0) as u64),
                protocols: a.protocols,
                assignment: Bytes::new(),
                last_heartbeat: now,
                joined_seq: self.next_seq,
                join_waiter: Some(tx),
                sync_waiter: None,
            },
        );
        if self.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(now);
        }
        self.try_complete_join(now);
        Reply::Later(rx)
    }

    fn prepare_rebalance(&mut self, now: Instant) {
        if self.state == GroupState::CompletingRebalance {
            for m in self.members.values_mut() {
                if let Some(w) = m.sync_waiter.take() {
                    let _ = w.send(SyncResult {
                        error: REBALANCE_IN_PROGRESS,
                        ..Default::default()
                    });
                }
            }
        }
        let was_empty = self.state == GroupState::Empty;
        self.state = GroupState::PreparingRebalance;
        self.sync_deadline = None;
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::ZERO);
        self.rebalance_deadline = Some(now + timeout);
        self.initial_delay_until =
            was_empty.then(|| now + self.initial_rebalance_delay.min(timeout));
    }

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> Vec<String> {
        let mut it = self.members.values();
        let Some(first) = it.next() else {
            return Vec::new();
        };
        let mut c: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for m in it {
            c.retain(|n| m.protocols.iter().any(|(p, _)| p == n));
        }
        c
    }

    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((n, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                *votes.entry(n.as_str()).or_default() += 1;
            }
        }
        candidates
            .iter()
            .max_by_key(|c| {
                (
                    votes.get(c.as_str()).copied().unwrap_or(0),
                    std::cmp::Reverse(candidates.iter().position(|x| x == *c)),
                )
            })
            .cloned()
    }

    fn join_result_for(&self, member_id: &str) -> JoinResult {
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = if leader == member_id {
            let mut ms: Vec<&Member> = self.members.values().collect();
            ms.sort_by_key(|m| m.joined_seq);
            ms.iter()
                .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata(&protocol)))
                .collect()
        } else {
            Vec::new()
        };
        JoinResult {
            error: codes::NONE,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader,
            member_id: member_id.to_string(),
            members,
        }
    }

    /// Completes the join phase once every member has rejoined (after the initial delay of a
    /// new group) or the rebalance timeout passed (members that did not rejoin are removed).
    pub fn try_complete_join(&mut self, now: Instant) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let all_joined = self.members.values().all(|m| m.join_waiter.is_some());
        let delay_over = self.initial_delay_until.is_none_or(|t| now >= t);
        let timed_out = self.rebalance_deadline.is_some_and(|t| now >= t);
        if !((all_joined && delay_over) || timed_out) {
            return;
        }
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            tracing::info!(group = %self.id, member = %id, "member did not rejoin in time; removed");
            self.remove_member(&id);
        }
        self.generation += 1;
        self.rebalance_deadline = None;
        self.initial_delay_until = None;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            tracing::info!(group = %self.id, generation = self.generation, "group is empty");
            return;
        }
        self.protocol = self.select_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self
                .members
                .values()
                .min_by_key(|m| m.joined_seq)
                .map(|m| m.id.clone());
        }
        self.state = GroupState::CompletingRebalance;
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default();
        self.sync_deadline = Some(now + timeout);
        tracing::info!(group = %self.id, generation = self.generation, members = self.members.len(), protocol = ?self.protocol, "rebalance: join complete");
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let result = self.join_result_for(&id);
            let m = self.members.get_mut(&id).expect("member");
            m.last_heartbeat = now;
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(result);
            }
        }
    }

    fn remove_member(&mut self, id: &str) {
        if let Some(m) = self.members.remove(id) {
            if let Some(i) = &m.instance_id {
                if self.static_members.get(i).map(String::as_str) == Some(id) {
                    self.static_members.remove(i);
                }
            }
            if let Some(w) = m.join_waiter {
                let _ = w.send(JoinResult {
                    error: UNKNOWN_MEMBER_ID,
                    generation: -1,
                    member_id: id.to_string(),
                    ..Default::default()
                });
            }
            if let Some(w) = m.sync_waiter {
                let _ = w.send(SyncResult {
                    error: UNKNOWN_MEMBER_ID,
                    ..Default::default()
                });
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
    }

    fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), i16> {
        if let Some(i) = instance_id {
            if let Some(known) = self.static_members.get(i) {
                if known != member_id {
                    return Err(FENCED_INSTANCE_ID);
                }
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(UNKNOWN_MEMBER_ID);
        }
        if generation != self.generation {
            return Err(ILLEGAL_GENERATION);
        }
        Ok(())
    }

    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> Reply<SyncResult> {
        let err = |e| {
            Reply::Now(SyncResult {
                error: e,
                ..Default::default()
            })
        };
        if matches!(self.state, GroupState::Empty | GroupState::Dead) {
            return err(UNKNOWN_MEMBER_ID);
        }
        if let Err(e) = self.check_member(member_id, instance_id, generation) {
            return err(e);
        }
        match self.state {
            GroupState::PreparingRebalance => err(REBALANCE_IN_PROGRESS),
            GroupState::Stable => Reply::Now(self.sync_result(member_id)),
            GroupState::CompletingRebalance => {
                let (tx, rx) = flume::bounded(1);
                let m = self.members.get_mut(member_id).expect("checked");
                m.last_heartbeat = now;
                m.sync_waiter = Some(tx);
                if self.leader.as_deref() == Some(member_id) {
                    let given: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for m in self.members.values_mut() {
                        m.assignment = given.get(&m.id).cloned().unwrap_or_default();
                    }
                    self.state = GroupState::Stable;
                    self.sync_deadline = None;
                    tracing::info!(group = %self.id, generation = self.generation, "rebalance: group stable");
                    let ids: Vec<String> = self.members.keys().cloned().collect();
                    for id in ids {
                        let result = self.sync_result(&id);
                        if let Some(w) = self
                            .members
                            .get_mut(&id)
                            .expect("member")
                            .sync_waiter
                            .take()
                        {
                            let _ = w.send(result);
                        }
                    }
                }
                Reply::Later(rx)
            }
            GroupState::Empty | GroupState::Dead => unreachable!("handled above"),
        }
    }

    fn sync_result(&self, member_id: &str) -> SyncResult {
        SyncResult {
            error: codes::NONE,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> i16 {
        if matches!(self.state, GroupState::Empty | GroupState::Dead) {
            return UNKNOWN_MEMBER_ID;
        }
        if let Err(e) = self.check_member(member_id, instance_id, generation) {
            return e;
        }
        self.members
            .get_mut(member_id)
            .expect("checked")
            .last_heartbeat = now;
        if self.state == GroupState::PreparingRebalance {
            REBALANCE_IN_PROGRESS
        } else {
            codes::NONE
        }
    }

    /// Removes members (by member id, or by instance id when the member id is empty); returns
    /// one error code per entry.
    pub fn leave(&mut self, who: &[(String, Option<String>)], now: Instant) -> Vec<i16> {
        let mut codes_out = Vec::with_capacity(who.len());
        let mut removed = false;
        for (member_id, instance_id) in who {
            let id = if member_id.is_empty() {
                instance_id
                    .as_ref()
                    .and_then(|i| self.static_members.get(i).cloned())
            } else {
                Some(member_id.clone())
            };
            match id {
                Some(id) if self.members.contains_key(&id) => {
                    if let (Some(i), false) = (instance_id, member_id.is_empty()) {
                        if self.static_members.get(i).is_some_and(|known| known != &id) {
                            codes_out.push(FENCED_INSTANCE_ID);
                            continue;
                        }
                    }
                    tracing::info!(group = %self.id, member = %id, "member left");
                    self.remove_member(&id);
                    removed = true;
                    codes_out.push(codes::NONE);
                }
                _ => codes_out.push(UNKNOWN_MEMBER_ID),
            }
        }
        if removed {
            if self.state != GroupState::PreparingRebalance {
                self.prepare_rebalance(now);
            }
            self.try_complete_join(now);
        }
        codes_out
    }

    /// Empty, with no member and no member id handed out: nothing to coordinate.
    pub fn is_vacant(&self) -> bool {
        self.state == GroupState::Empty
            && self.members.is_empty()
            && self.pending_member_ids.is_empty()
    }

    /// Expires members whose session ran out and drives timeouts. Called periodically.
    pub fn tick(&mut self, now: Instant) {
        self.pending_member_ids.retain(|_, expires| *expires > now);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.join_waiter.is_none()
                    && m.sync_waiter.is_none()
                    && now.duration_since(m.last_heartbeat) > m.session_timeout
            })
            .map(|m| m.id.clone())
            .collect();
        if !expired.is_empty() {
            for id in &expired {
                tracing::info!(group = %self.id, member = %id, "session timed out; member removed");
                self.remove_member(id);
            }
            if self.state != GroupState::PreparingRebalance {
                self.prepare_rebalance(now);
            }
        }
        if self.state == GroupState::CompletingRebalance
            && self.sync_deadline.is_some_and(|d| now >= d)
        {
            // The leader never sent the assignment: start over with whoever is still here.
            tracing::info!(group = %self.id, "sync timed out; rebalancing again");
            let missing: Vec<String> = self
                .members
                .values()
                .filter(|m| m.sync_waiter.is_none())
                .map(|m| m.id.clone())
                .collect();
            for id in missing {
                self.remove_member(&id);
            }
            self.prepare_rebalance(now);
        }
        self.try_complete_join(now);
    }

    /// Checks an OffsetCommit against membership. A commit with generation -1 and no member
    /// (standalone consumers, admin tools) is allowed only while the group has no members.
    pub fn check_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), i16> {
        if generation < 0 && member_id.is_empty() {
            return if self.members.is_empty() {
                Ok(())
            } else {
                Err(UNKNOWN_MEMBER_ID)
            };
        }
        if self.state == GroupState::Dead {
            return Err(COORDINATOR_NOT_AVAILABLE);
        }
        self.check_member(member_id, instance_id, generation)?;
        if self.state == GroupState::CompletingRebalance {
            return Err(REBALANCE_IN_PROGRESS);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(member: &str, proto: &[&str], meta: &str) -> JoinArgs {
        JoinArgs {
            member_id: member.to_string(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 5_000,
            protocol_type: "consumer".into(),
            protocols: proto
                .iter()
                .map(|p| (p.to_string(), Bytes::from(meta.to_string())))
                .collect(),
            require_known_member_id: true,
        }
    }

    fn now_result<T>(r: Reply<T>) -> T {
        match r {
            Reply::Now(t) => t,
            Reply::Later(rx) => rx.try_recv().expect("answer is ready"),
        }
    }

    #[test]
    fn two_members_join_sync_and_fence() {
        let t0 = Instant::now();
        let mut g = Group::new("g", Duration::ZERO);
        let r = now_result(g.join(args("", &["range"], "a"), t0));
        assert_eq!(r.error, MEMBER_ID_REQUIRED);
        let a = r.member_id;
        let Reply::Later(ra) = g.join(args(&a, &["range", "roundrobin"], "a"), t0) else {
            panic!()
        };
        let ja = ra.try_recv().expect("single member completes at once");
        assert_eq!(
            (ja.error, ja.generation, ja.leader.as_str()),
            (0, 1, a.as_str())
        );
        assert_eq!(ja.protocol_name.as_deref(), Some("range"));
        assert_eq!(ja.members.len(), 1);
        let s = now_result(g.sync(&a, None, 1, vec![(a.clone(), Bytes::from_static(b"A"))], t0));
        assert_eq!((s.error, &s.assignment[..]), (0, &b"A"[..]));
        assert_eq!(g.state, GroupState::Stable);
        // A second member triggers a rebalance; the first learns it from its heartbeat.
        let b = now_result(g.join(args("", &["roundrobin", "range"], "b"), t0)).member_id;
        let Reply::Later(rb) = g.join(args(&b, &["roundrobin", "range"], "b"), t0) else {
            panic!()
        };
        assert_eq!(g.heartbeat(&a, None, 1, t0), REBALANCE_IN_PROGRESS);
        assert!(
            rb.try_recv().is_err(),
            "waits for the first member to rejoin"
        );
        let Reply::Later(ra) = g.join(args(&a, &["range", "roundrobin"], "a"), t0) else {
            panic!()
        };
        let (ja, jb) = (ra.try_recv().unwrap(), rb.try_recv().unwrap());
        assert_eq!((ja.generation, jb.generation), (2, 2));
        assert_eq!(ja.leader, a);
        assert!(
            jb.members.is_empty(),
            "only the leader gets the member list"
        );
        assert_eq!(g.heartbeat(&a, None, 1, t0), ILLEGAL_GENERATION);
        assert_eq!(g.heartbeat("nobody", None, 2, t0), UNKNOWN_MEMBER_ID);
        assert_eq!(g.check_commit(&a, None, 1), Err(ILLEGAL_GENERATION));
        let Reply::Later(sb) = g.sync(&b, None, 2, vec![], t0) else {
            panic!()
        };
        let sa = now_result(g.sync(
            &a,
            None,
            2,
            vec![(a.clone(), "1".into()), (b.clone(), "2".into())],
            t0,
        ));
        assert_eq!(&sa.assignment[..], b"1");
        assert_eq!(&sb.try_recv().unwrap().assignment[..], b"2");
        assert_eq!(g.check_commit(&b, None, 2), Ok(()));
        // b's session runs out: removed, group rebalances.
        let later = t0 + Duration::from_secs(11);
        g.heartbeat(&a, None, 2, later);
        g.tick(later);
        assert!(!g.members.contains_key(&b));
        assert_eq!(g.state, GroupState::PreparingRebalance);
        assert_eq!(g.leave(&[(a.clone(), None)], later), vec![0]);
        assert_eq!(g.state, GroupState::Empty);
    }

    #[test]
    fn static_member_restart_keeps_assignment_without_rebalance() {
        let t0 = Instant::now();
        let mut g = Group::new("g", Duration::ZERO);
        let mut a = args("", &["range"], "a");
        a.instance_id = Some("i-1".into());
        let Reply::Later(r) = g.join(a.clone(), t0) else {
            panic!()
        };
        let j = r.try_recv().unwrap();
        now_result(g.sync(
            &j.member_id,
            Some("i-1"),
            1,
            vec![(j.member_id.clone(), "X".into())],
            t0,
        ));
        let mut b = args("", &["range"], "b");
        b.instance_id = Some("i-2".into());
        let Reply::Later(rb) = g.join(b.clone(), t0) else {
            panic!()
        };
        let Reply::Later(ra) = g.join(
            JoinArgs {
                member_id: j.member_id.clone(),
                ..a.clone()
            },
            t0,
        ) else {
            panic!()
        };
        let (ja, jb) = (ra.try_recv().unwrap(), rb.try_recv().unwrap());
        let Reply::Later(sb) = g.sync(&jb.member_id, Some("i-2"), 2, vec![], t0) else {
            panic!()
        };
        now_result(g.sync(
            &ja.member_id,
            Some("i-1"),
            2,
            vec![
                (ja.member_id.clone(), "A".into()),
                (jb.member_id.clone(), "B".into()),
            ],
            t0,
        ));
        sb.try_recv().unwrap();
        // i-2 restarts (new process, empty member id): same generation, same assignment.
        let gen = g.generation;
        let r = now_result(g.join(b, t0));
        assert_eq!(r.error, 0);
        assert_eq!(r.generation, gen, "no rebalance");
        assert_eq!(g.state, GroupState::Stable);
        assert_eq!(
            &now_result(g.sync(&r.member_id, Some("i-2"), gen, vec![], t0)).assignment[..],
            b"B"
        );
        assert_eq!(
            g.heartbeat(&jb.member_id, Some("i-2"), gen, t0),
            FENCED_INSTANCE_ID,
            "the old process is fenced"
        );
    }
}
