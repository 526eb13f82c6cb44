//! KIP-848 consumer groups (`group.protocol=consumer`): the broker assigns the partitions.
//!
//! Each member heartbeats (ConsumerGroupHeartbeat) with its subscription and, when it changed,
//! the partitions it owns; the coordinator keeps a *target assignment* per member, computed by
//! a server-side assignor (`uniform`, sticky and balanced, or `range`) whenever the group epoch
//! moves past the target's (a member joined, left, changed its subscription, or a subscribed
//! topic gained partitions). Each member is then brought to its target step by step
//! (incremental revocation, as Kafka's `CurrentAssignmentBuilder`):
//! 1. partitions it owns and its target lacks are revoked first: its assignment shrinks and its
//!    epoch stays, until a heartbeat reports them released;
//! 2. then it moves to the target's epoch and gets the target's partitions that no other member
//!    still owns or is releasing; those still held elsewhere follow once released.
//!
//! So a partition is never owned by two members: another member receives it only after its
//! owner reported it released, left, or was fenced (session timeout, or a revocation not done
//! within the member's rebalance timeout).
//!
//! Membership lives in memory only: after a coordinator restart a member's heartbeat gets
//! UNKNOWN_MEMBER_ID and it rejoins (its committed offsets are durable as for classic groups).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::codes;

/// Kafka's `group.consumer.session.timeout.ms` default.
pub const DEFAULT_CONSUMER_SESSION_TIMEOUT_MS: u64 = 45_000;
/// Kafka's `group.consumer.heartbeat.interval.ms` default.
pub const DEFAULT_CONSUMER_HEARTBEAT_INTERVAL_MS: u64 = 5_000;
/// The heartbeat interval a member is given while it is not at its target (it waits for
/// partitions another member is releasing, or is releasing some itself): it hears of its
/// next step this soon instead of a whole `group.consumer.heartbeat.interval.ms` later.
pub const RECONCILING_HEARTBEAT_INTERVAL_MS: u64 = 200;
/// Members one consumer group holds (`group.consumer.max.size`); a join past it gets
/// GROUP_MAX_SIZE_REACHED.
pub const DEFAULT_CONSUMER_GROUP_MAX_SIZE: usize = 1_000;
/// Topics one member may subscribe to (INVALID_REQUEST past it).
pub const MAX_SUBSCRIBED_TOPICS_PER_MEMBER: usize = 10_000;
/// Longest member id, instance id, rack id or subscription regex accepted (INVALID_REQUEST
/// past it).
pub const MAX_MEMBER_FIELD_BYTES: usize = 1_024;
/// Compiled size a subscription regex may take (INVALID_REGULAR_EXPRESSION past it).
pub const MAX_SUBSCRIPTION_REGEX_BYTES: usize = 1 << 20;
/// The server-side assignors, the first being the default (`group.consumer.assignors`).
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];
/// Member epoch of a heartbeat that leaves the group; -2: a static member leaving for now.
pub const LEAVE_EPOCH: i32 = -1;
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// Partitions by topic name.
pub type TopicPartitions = BTreeMap<String, BTreeSet<i32>>;

/// What a classic-protocol member of a consumer group has besides (a classic client in a
/// group converted from classic, or one joining a consumer group): it is served through
/// JoinGroup, SyncGroup, Heartbeat and LeaveGroup, as Kafka 4 does.
#[derive(Debug, Clone)]
pub struct ClassicMeta {
    pub session_timeout: Duration,
    /// Its JoinGroup protocols (name, metadata); the first names the protocol it is answered.
    pub protocols: Vec<(String, bytes::Bytes)>,
}

/// A classic member's JoinGroup, decoded.
#[derive(Debug, Clone)]
pub struct ClassicJoin {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout: Duration,
    pub classic: ClassicMeta,
    pub subscribed: Vec<String>,
    /// The partitions it still owns (its subscription's owned partitions: a cooperative
    /// client keeps its partitions across a join, an eager one gives them all up first).
    pub owned: TopicPartitions,
}

/// The coordinator's limits for consumer groups (config).
#[derive(Debug, Clone, Copy)]
pub struct ConsumerGroupLimits {
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub max_size: usize,
}

impl Default for ConsumerGroupLimits {
    fn default() -> Self {
        Self {
            session_timeout: Duration::from_millis(DEFAULT_CONSUMER_SESSION_TIMEOUT_MS),
            heartbeat_interval: Duration::from_millis(DEFAULT_CONSUMER_HEARTBEAT_INTERVAL_MS),
            max_size: DEFAULT_CONSUMER_GROUP_MAX_SIZE,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout: Duration,
    /// The topics it subscribes to: those it names, and those its regex matches.
    pub subscribed: BTreeSet<String>,
    /// The topics it names.
    pub subscribed_names: BTreeSet<String>,
    /// Its subscription regex (matched against whole topic names, as Kafka's RE2J does).
    pub regex: Option<SubscriptionRegex>,
    pub assignor: Option<String>,
    pub epoch: i32,
    pub previous_epoch: i32,
    /// What the member was last told it owns.
    pub assigned: TopicPartitions,
    /// Partitions it was told to give up and has not reported released: still its own.
    pub revoking: TopicPartitions,
    pub last_heartbeat: Instant,
    /// Set while `revoking` is not empty: past it the member is fenced.
    pub revoke_deadline: Option<Instant>,
    /// The member epoch at which each partition it holds (`assigned` or `revoking`) became
    /// its own: an offset commit for it carries that epoch or a later one.
    pub assigned_since: BTreeMap<(String, i32), i32>,
    /// Set for a member speaking the classic protocol.
    pub classic: Option<ClassicMeta>,
}

impl Member {
    /// Member `id`, just joined (heard from `now`): no client details or subscription yet,
    /// epoch 0, nothing assigned.
    fn new(id: String, now: Instant) -> Member {
        Member {
            id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout: Duration::ZERO,
            subscribed: BTreeSet::new(),
            subscribed_names: BTreeSet::new(),
            regex: None,
            assignor: None,
            epoch: 0,
            previous_epoch: 0,
            assigned: TopicPartitions::new(),
            revoking: TopicPartitions::new(),
            last_heartbeat: now,
            revoke_deadline: None,
            assigned_since: BTreeMap::new(),
            classic: None,
        }
    }
}

/// A member's subscription regex: its text, and compiled to match whole topic names.
#[derive(Debug, Clone)]
pub struct SubscriptionRegex {
    pub text: String,
    whole: regex::Regex,
}

impl SubscriptionRegex {
    /// Compiles `text`; INVALID_REGULAR_EXPRESSION if it is not a valid regex or too large.
    pub fn new(text: &str) -> Result<Self, Refusal> {
        Self::compile("subscription regex", text)
    }

    /// Compiles `text` to match whole names (any regex a request carries: `what` names it in
    /// the refusal).
    pub fn compile(what: &str, text: &str) -> Result<Self, Refusal> {
        let whole = regex::RegexBuilder::new(&format!("^(?:{text})$"))
            .size_limit(MAX_SUBSCRIPTION_REGEX_BYTES)
            .build()
            .map_err(|e| {
                (
                    codes::INVALID_REGULAR_EXPRESSION,
                    format!("{what} '{text}': {e}"),
                )
            })?;
        Ok(Self {
            text: text.to_string(),
            whole,
        })
    }

    pub fn matches(&self, topic: &str) -> bool {
        self.whole.is_match(topic)
    }
}

/// One heartbeat, decoded (topic ids already mapped to names).
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed: Option<Vec<String>>,
    /// A subscription regex (v1); `None`: unchanged; `Some("")`: none any more.
    pub subscribed_regex: Option<String>,
    pub assignor: Option<String>,
    /// The partitions the member owns; `None`: unchanged since its last heartbeat.
    pub owned: Option<TopicPartitions>,
    pub client_id: String,
    pub client_host: String,
}

/// What a heartbeat gets back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    /// The member's assignment, when it changed (or on a join).
    pub assignment: Option<TopicPartitions>,
    /// The member is not at its target yet: it should heartbeat again soon
    /// (`RECONCILING_HEARTBEAT_INTERVAL_MS`).
    pub reconciling: bool,
}

impl HeartbeatAnswer {
    /// The heartbeat interval to give the member.
    pub fn heartbeat_interval(&self, limits: &ConsumerGroupLimits) -> Duration {
        if self.reconciling {
            limits
                .heartbeat_interval
                .min(Duration::from_millis(RECONCILING_HEARTBEAT_INTERVAL_MS))
        } else {
            limits.heartbeat_interval
        }
    }
}

/// A refused heartbeat: error code and message.
pub type Refusal = (i16, String);

#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// Member id → its target partitions at `assignment_epoch`.
    pub target: BTreeMap<String, TopicPartitions>,
    /// Partition counts of the subscribed topics the target was computed from.
    target_topics: BTreeMap<String, u32>,
}

/// Kafka's names for a consumer group's state (ConsumerGroupDescribe, ListGroups).
pub fn state_name(g: Option<&ConsumerGroup>) -> &'static str {
    match g {
        None => "Empty",
        Some(g) if g.members.is_empty() => "Empty",
        Some(g) if g.assignment_epoch < g.epoch => "Assigning",
        Some(g) if g.members.values().any(|m| !g.at_target(m)) => "Reconciling",
        Some(_) => "Stable",
    }
}

fn too_long(s: &Option<String>) -> bool {
    s.as_ref().is_some_and(|s| s.len() > MAX_MEMBER_FIELD_BYTES)
}

fn invalid(msg: impl Into<String>) -> Refusal {
    (codes::INVALID_REQUEST, msg.into())
}

fn count(tp: &TopicPartitions) -> usize {
    tp.values().map(BTreeSet::len).sum()
}

fn minus(a: &TopicPartitions, b: &TopicPartitions) -> TopicPartitions {
    let mut out = TopicPartitions::new();
    for (t, ps) in a {
        let rest: BTreeSet<i32> = match b.get(t) {
            Some(bp) => ps.difference(bp).copied().collect(),
            None => ps.clone(),
        };
        if !rest.is_empty() {
            out.insert(t.clone(), rest);
        }
    }
    out
}

fn intersect(a: &TopicPartitions, b: &TopicPartitions) -> TopicPartitions {
    let mut out = TopicPartitions::new();
    for (t, ps) in a {
        if let Some(bp) = b.get(t) {
            let both: BTreeSet<i32> = ps.intersection(bp).copied().collect();
            if !both.is_empty() {
                out.insert(t.clone(), both);
            }
        }
    }
    out
}

impl ConsumerGroup {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The assignor the group uses: the one most members name, else the default.
    pub fn assignor(&self) -> &'static str {
        let mut votes: BTreeMap<&'static str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.assignor.as_deref() {
                if let Some(known) = ASSIGNORS.iter().find(|k| **k == a) {
                    *votes.entry(known).or_default() += 1;
                }
            }
        }
        votes
            .into_iter()
            .max_by_key(|(name, n)| (*n, std::cmp::Reverse(*name)))
            .map_or(ASSIGNORS[0], |(name, _)| name)
    }

    /// Handles one heartbeat. `partitions_of(topic)`: the topic's partition count (`None`: no
    /// such topic). `new_member_id`: the id a v0 join without one gets.
    /// `all_topics()`: every topic a regex may match (asked only for members with one).
    #[allow(clippy::too_many_arguments)]
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        limits: &ConsumerGroupLimits,
        partitions_of: &dyn Fn(&str) -> Option<u32>,
        all_topics: &dyn Fn() -> Vec<String>,
        new_member_id: impl FnOnce() -> String,
        now: Instant,
    ) -> Result<HeartbeatAnswer, Refusal> {
        if hb.member_id.len() > MAX_MEMBER_FIELD_BYTES
            || too_long(&hb.instance_id)
            || too_long(&hb.rack_id)
            || too_long(&hb.subscribed_regex)
        {
            return Err(invalid(format!(
                "member id, instance id, rack id and subscription regex are at most {MAX_MEMBER_FIELD_BYTES} bytes"
            )));
        }
        if let Some(a) = hb.assignor.as_deref() {
            if !ASSIGNORS.contains(&a) {
                return Err((
                    codes::UNSUPPORTED_ASSIGNOR,
                    format!("assignor '{a}' is not one of {ASSIGNORS:?}"),
                ));
            }
        }
        if hb
            .subscribed
            .as_ref()
            .is_some_and(|s| s.len() > MAX_SUBSCRIBED_TOPICS_PER_MEMBER)
        {
            return Err(invalid(format!(
                "a member subscribes to at most {MAX_SUBSCRIBED_TOPICS_PER_MEMBER} topics"
            )));
        }
        match hb.member_epoch {
            LEAVE_EPOCH | STATIC_LEAVE_EPOCH => {
                let epoch = hb.member_epoch;
                if self.members.contains_key(&hb.member_id) {
                    self.remove_member(&hb.member_id);
                } else if let Some(id) = self.member_with_instance(hb.instance_id.as_deref()) {
                    self.remove_member(&id);
                } else {
                    return Err((
                        codes::UNKNOWN_MEMBER_ID,
                        format!("member '{}' is not in the group", hb.member_id),
                    ));
                }
                Ok(HeartbeatAnswer {
                    member_id: hb.member_id,
                    member_epoch: epoch,
                    assignment: None,
                    reconciling: false,
                })
            }
            0 => {
                let id = self.join(hb, limits, new_member_id, now)?;
                self.resolve_subscription(&id, all_topics);
                self.refresh_target(partitions_of);
                let mut answer = self.reconcile_member(&id, now);
                // A join always hears its assignment, empty or not.
                answer.assignment = answer.assignment.or_else(|| Some(TopicPartitions::new()));
                Ok(answer)
            }
            e if e > 0 => {
                let id = hb.member_id.clone();
                self.beat(hb, now)?;
                self.resolve_subscription(&id, all_topics);
                self.refresh_target(partitions_of);
                Ok(self.reconcile_member(&id, now))
            }
            e => Err(invalid(format!("member epoch {e} is not valid"))),
        }
    }

    fn member_with_instance(&self, instance: Option<&str>) -> Option<String> {
        let instance = instance?;
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance))
            .map(|m| m.id.clone())
    }

    fn join(
        &mut self,
        hb: Heartbeat,
        limits: &ConsumerGroupLimits,
        new_member_id: impl FnOnce() -> String,
        now: Instant,
    ) -> Result<String, Refusal> {
        let regex = match hb.subscribed_regex.as_deref() {
            None | Some("") => None,
            Some(text) => Some(SubscriptionRegex::new(text)?),
        };
        let subscribed_names: BTreeSet<String> = hb
            .subscribed
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        if hb.subscribed.is_none() && regex.is_none() {
            return Err(invalid(
                "a joining member must name its subscribed topics or a subscription regex",
            ));
        }
        if hb.rebalance_timeout_ms <= 0 {
            return Err(invalid("a joining member must give a rebalance timeout"));
        }
        let id = if hb.member_id.is_empty() {
            new_member_id()
        } else {
            hb.member_id.clone()
        };
        // A static member coming back takes the place (and the assignment) of its old id.
        let replaced = self
            .member_with_instance(hb.instance_id.as_deref())
            .filter(|old| *old != id);
        let rejoin = self.members.contains_key(&id);
        if !rejoin && replaced.is_none() && self.members.len() >= limits.max_size {
            return Err((
                codes::GROUP_MAX_SIZE_REACHED,
                format!(
                    "the group has {} members (group.consumer.max.size)",
                    limits.max_size
                ),
            ));
        }
        if rejoin {
            // A member that joins again (epoch 0) starts over: what it owned is free.
            self.remove_member(&id);
        }
        let mut member = Member {
            instance_id: hb.instance_id.clone(),
            rack_id: hb.rack_id.clone(),
            client_id: hb.client_id.clone(),
            client_host: hb.client_host.clone(),
            rebalance_timeout: Duration::from_millis(hb.rebalance_timeout_ms as u64),
            subscribed_names: subscribed_names.clone(),
            regex: regex.clone(),
            assignor: hb.assignor.clone(),
            ..Member::new(id.clone(), now)
        };
        if let Some(old) = replaced.and_then(|old| self.members.remove(&old)) {
            member.assigned = old.assigned;
            member.revoking = old.revoking;
            member.revoke_deadline = old.revoke_deadline;
            member.epoch = old.epoch;
            member.previous_epoch = old.previous_epoch;
            member.assigned_since = old.assigned_since;
            if let Some(t) = self.target.remove(&old.id) {
                self.target.insert(id.clone(), t);
            }
        }
        self.members.insert(id.clone(), member);
        self.epoch += 1;
        Ok(id)
    }

    /// A heartbeat of a member in the group: checks its epoch, takes its changes.
    fn beat(&mut self, hb: Heartbeat, now: Instant) -> Result<(), Refusal> {
        let Some(m) = self.members.get_mut(&hb.member_id) else {
            return Err((
                codes::UNKNOWN_MEMBER_ID,
                format!("member '{}' is not in the group; join again", hb.member_id),
            ));
        };
        // A member whose last answer was lost may still be one epoch behind, if it owns
        // nothing it was not given.
        let lost_answer = hb.member_epoch == m.previous_epoch
            && hb
                .owned
                .as_ref()
                .is_some_and(|o| minus(o, &m.assigned).is_empty());
        if hb.member_epoch != m.epoch && !lost_answer {
            return Err((
                codes::FENCED_MEMBER_EPOCH,
                format!(
                    "member epoch {} is not the member's current epoch {}",
                    hb.member_epoch, m.epoch
                ),
            ));
        }
        m.last_heartbeat = now;
        if hb.rebalance_timeout_ms > 0 {
            m.rebalance_timeout = Duration::from_millis(hb.rebalance_timeout_ms as u64);
        }
        let mut bump = false;
        if let Some(subs) = hb.subscribed {
            m.subscribed_names = subs.into_iter().collect();
        }
        match hb.subscribed_regex.as_deref() {
            None => {}
            Some("") => m.regex = None,
            Some(text) if m.regex.as_ref().is_some_and(|r| r.text == text) => {}
            Some(text) => m.regex = Some(SubscriptionRegex::new(text)?),
        }
        if hb.assignor.is_some() && hb.assignor != m.assignor {
            m.assignor = hb.assignor;
            bump = true;
        }
        if let Some(owned) = &hb.owned {
            // What it reports no longer owning is released.
            m.revoking = intersect(&m.revoking, owned);
            if m.revoking.is_empty() {
                m.revoke_deadline = None;
            }
        }
        if bump {
            self.epoch += 1;
        }
        Ok(())
    }

    /// The member's subscription: the topics it names and those its regex matches now; a
    /// change moves the group epoch.
    fn resolve_subscription(&mut self, id: &str, all_topics: &dyn Fn() -> Vec<String>) {
        let Some(m) = self.members.get_mut(id) else {
            return;
        };
        let mut subscribed = m.subscribed_names.clone();
        if let Some(re) = &m.regex {
            subscribed.extend(all_topics().into_iter().filter(|t| re.matches(t)));
        }
        if subscribed != m.subscribed {
            m.subscribed = subscribed;
            self.epoch += 1;
        }
    }

    fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect()
    }

    fn topics_changed(&self, partitions_of: &dyn Fn(&str) -> Option<u32>) -> bool {
        self.subscribed_topics()
            .into_iter()
            .any(|t| partitions_of(&t) != self.target_topics.get(&t).copied())
    }

    /// Recomputes the target assignment if the group epoch moved past it, or a subscribed
    /// topic gained or lost partitions (which moves the group epoch too).
    pub fn refresh_target(&mut self, partitions_of: &dyn Fn(&str) -> Option<u32>) {
        if self.assignment_epoch >= self.epoch && !self.topics_changed(partitions_of) {
            return;
        }
        let topics: BTreeMap<String, u32> = self
            .subscribed_topics()
            .into_iter()
            .filter_map(|t| partitions_of(&t).map(|n| (t, n)))
            .collect();
        self.target = match self.assignor() {
            "range" => assign_range(&self.members, &topics),
            _ => assign_uniform(&self.members, &self.target, &topics),
        };
        self.target_topics = topics;
        if self.assignment_epoch >= self.epoch {
            self.epoch += 1;
        }
        self.assignment_epoch = self.epoch;
    }

    /// Partitions any member but `except` owns or is releasing.
    fn held_by_others(&self, except: &str) -> TopicPartitions {
        let mut held = TopicPartitions::new();
        for m in self.members.values().filter(|m| m.id != except) {
            for (t, ps) in m.assigned.iter().chain(m.revoking.iter()) {
                held.entry(t.clone())
                    .or_default()
                    .extend(ps.iter().copied());
            }
        }
        held
    }

    /// One step of member `id` towards its target; the answer carries its assignment if it
    /// changed.
    fn reconcile_member(&mut self, id: &str, now: Instant) -> HeartbeatAnswer {
        let target = self.target.get(id).cloned().unwrap_or_default();
        let held = self.held_by_others(id);
        let assignment_epoch = self.assignment_epoch;
        let m = self.members.get_mut(id).expect("reconciled member exists");
        let assigned_before = m.assigned.clone();
        if m.revoking.is_empty() {
            let revoke = minus(&m.assigned, &target);
            if !revoke.is_empty() {
                // Step 1: give up what the target lacks, at the same epoch.
                m.assigned = intersect(&m.assigned, &target);
                m.revoking = revoke;
                m.revoke_deadline = Some(now + m.rebalance_timeout);
            } else {
                // Step 2: the target's epoch, with every target partition nobody else holds.
                if m.epoch != assignment_epoch {
                    m.previous_epoch = m.epoch;
                    m.epoch = assignment_epoch;
                }
                let free = minus(&minus(&target, &m.assigned), &held);
                for (t, ps) in free {
                    for p in &ps {
                        m.assigned_since.insert((t.clone(), *p), m.epoch);
                    }
                    m.assigned.entry(t).or_default().extend(ps);
                }
            }
        }
        let (assigned, revoking) = (&m.assigned, &m.revoking);
        m.assigned_since.retain(|(t, p), _| {
            let holds = |tp: &TopicPartitions| tp.get(t).is_some_and(|ps| ps.contains(p));
            holds(assigned) || holds(revoking)
        });
        let changed = assigned_before != m.assigned;
        let m = &self.members[id];
        HeartbeatAnswer {
            member_id: m.id.clone(),
            member_epoch: m.epoch,
            assignment: changed.then(|| m.assigned.clone()),
            reconciling: !self.at_target(m),
        }
    }

    /// Whether member `member_id` may commit offsets of `partitions` with member epoch
    /// `epoch`: its current epoch, or an older one at which it already held every one of
    /// them (a commit sent before the heartbeat answer that moved its epoch arrived: the Java
    /// client fails a `commitSync` refused with STALE_MEMBER_EPOCH). Else UNKNOWN_MEMBER_ID,
    /// FENCED_MEMBER_EPOCH (an epoch from the future) or STALE_MEMBER_EPOCH.
    pub fn check_commit<'a>(
        &self,
        member_id: &str,
        epoch: i32,
        mut partitions: impl Iterator<Item = (&'a str, i32)>,
    ) -> Result<(), i16> {
        let m = self
            .members
            .get(member_id)
            .ok_or(codes::UNKNOWN_MEMBER_ID)?;
        if epoch > m.epoch {
            return Err(codes::FENCED_MEMBER_EPOCH);
        }
        if epoch == m.epoch {
            return Ok(());
        }
        let held_since = |t: &str, p: i32| m.assigned_since.get(&(t.to_string(), p)).copied();
        if partitions.all(|(t, p)| held_since(t, p).is_some_and(|since| since <= epoch)) {
            Ok(())
        } else {
            Err(codes::STALE_MEMBER_EPOCH)
        }
    }

    /// Whether the member is at its target: its epoch, every target partition, nothing left
    /// to release.
    fn at_target(&self, m: &Member) -> bool {
        m.revoking.is_empty()
            && m.epoch == self.assignment_epoch
            && self.target.get(&m.id).unwrap_or(&TopicPartitions::new()) == &m.assigned
    }

    /// Whether any member speaks the consumer protocol (a group of classic members only is
    /// still served here until it empties).
    pub fn has_consumer_protocol_members(&self) -> bool {
        self.members.values().any(|m| m.classic.is_none())
    }

    /// A group converted from a Stable classic group: its members keep their assignments at
    /// the classic generation, which becomes the group and assignment epoch.
    pub fn converted(
        members: Vec<(ClassicJoin, TopicPartitions)>,
        generation: i32,
        now: Instant,
    ) -> Self {
        let mut g = ConsumerGroup {
            epoch: generation,
            assignment_epoch: generation,
            ..Default::default()
        };
        for (j, assigned) in members {
            let assigned_since = assigned
                .iter()
                .flat_map(|(t, ps)| ps.iter().map(move |p| ((t.clone(), *p), generation)))
                .collect();
            g.target.insert(j.member_id.clone(), assigned.clone());
            g.members.insert(
                j.member_id.clone(),
                Member {
                    instance_id: j.instance_id,
                    client_id: j.client_id,
                    client_host: j.client_host,
                    rebalance_timeout: j.rebalance_timeout,
                    subscribed: j.subscribed.iter().cloned().collect(),
                    subscribed_names: j.subscribed.into_iter().collect(),
                    epoch: generation,
                    previous_epoch: generation,
                    assigned,
                    assigned_since,
                    classic: Some(j.classic),
                    ..Member::new(j.member_id, now)
                },
            );
        }
        g
    }

    /// A classic member's JoinGroup: it joins or updates its subscription, releases what its
    /// owned partitions no longer hold, and takes one step towards its target. Returns its
    /// member epoch (the JoinGroup generation), answered at once: the broker assigns, so there
    /// is no leader and nobody to wait for.
    pub fn classic_join(
        &mut self,
        j: ClassicJoin,
        limits: &ConsumerGroupLimits,
        partitions_of: &dyn Fn(&str) -> Option<u32>,
        now: Instant,
    ) -> Result<i32, i16> {
        if j.subscribed.len() > MAX_SUBSCRIBED_TOPICS_PER_MEMBER
            || j.member_id.len() > MAX_MEMBER_FIELD_BYTES
            || too_long(&j.instance_id)
        {
            return Err(codes::INVALID_REQUEST);
        }
        let id = j.member_id.clone();
        let subscribed: BTreeSet<String> = j.subscribed.iter().cloned().collect();
        match self.members.get_mut(&id) {
            Some(m) => {
                m.last_heartbeat = now;
                m.rebalance_timeout = j.rebalance_timeout;
                m.classic = Some(j.classic);
                m.revoking = intersect(&m.revoking, &j.owned);
                if m.revoking.is_empty() {
                    m.revoke_deadline = None;
                }
                if m.subscribed != subscribed {
                    m.subscribed = subscribed.clone();
                    m.subscribed_names = subscribed;
                    self.epoch += 1;
                }
            }
            None => {
                let replaced = self
                    .member_with_instance(j.instance_id.as_deref())
                    .filter(|old| *old != id);
                if replaced.is_none() && self.members.len() >= limits.max_size {
                    return Err(codes::GROUP_MAX_SIZE_REACHED);
                }
                if let Some(old) = replaced {
                    self.remove_member(&old);
                }
                self.members.insert(
                    id.clone(),
                    Member {
                        instance_id: j.instance_id,
                        client_id: j.client_id,
                        client_host: j.client_host,
                        rebalance_timeout: j.rebalance_timeout,
                        subscribed: subscribed.clone(),
                        subscribed_names: subscribed,
                        classic: Some(j.classic),
                        ..Member::new(id.clone(), now)
                    },
                );
                self.epoch += 1;
            }
        }
        self.refresh_target(partitions_of);
        Ok(self.reconcile_member(&id, now).member_epoch)
    }

    /// A classic member's SyncGroup: its assignment at `generation`.
    pub fn classic_sync(&self, member_id: &str, generation: i32) -> Result<&Member, i16> {
        let m = self
            .members
            .get(member_id)
            .ok_or(codes::UNKNOWN_MEMBER_ID)?;
        if m.epoch != generation {
            return Err(codes::ILLEGAL_GENERATION);
        }
        Ok(m)
    }

    /// A classic member's Heartbeat: REBALANCE_IN_PROGRESS while it is not at its target, so
    /// that it joins again and takes its next step.
    pub fn classic_heartbeat(&mut self, member_id: &str, generation: i32, now: Instant) -> i16 {
        let at_target = match self.members.get(member_id) {
            None => return codes::UNKNOWN_MEMBER_ID,
            Some(m) if m.epoch != generation => return codes::ILLEGAL_GENERATION,
            Some(m) => self.at_target(m),
        };
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_heartbeat = now;
        }
        if at_target {
            codes::NONE
        } else {
            codes::REBALANCE_IN_PROGRESS
        }
    }

    /// Classic LeaveGroup: each (member id, instance id) leaves; one code per member.
    pub fn classic_leave(&mut self, who: &[(String, Option<String>)]) -> Vec<i16> {
        who.iter()
            .map(|(id, instance)| {
                let found = if self.members.contains_key(id) {
                    Some(id.clone())
                } else {
                    self.member_with_instance(instance.as_deref())
                };
                match found {
                    Some(id) => {
                        self.remove_member(&id);
                        codes::NONE
                    }
                    None => codes::UNKNOWN_MEMBER_ID,
                }
            })
            .collect()
    }

    /// Removes a member (left, fenced or timed out): what it owned is free for the others.
    pub fn remove_member(&mut self, id: &str) {
        if self.members.remove(id).is_some() {
            self.target.remove(id);
            self.epoch += 1;
        }
    }

    /// Fences members whose session ran out or who did not release revoked partitions within
    /// their rebalance timeout; returns their ids.
    pub fn tick(&mut self, limits: &ConsumerGroupLimits, now: Instant) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                let session = m
                    .classic
                    .as_ref()
                    .map_or(limits.session_timeout, |c| c.session_timeout);
                now.duration_since(m.last_heartbeat) > session
                    || m.revoke_deadline.is_some_and(|d| now > d)
            })
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            self.remove_member(id);
        }
        gone
    }
}

/// Every member of `members`, with nothing assigned yet.
fn nothing_assigned(members: &BTreeMap<String, Member>) -> BTreeMap<String, TopicPartitions> {
    members
        .keys()
        .map(|id| (id.clone(), TopicPartitions::new()))
        .collect()
}

/// Sticky and balanced: every member keeps what it had in the previous target (up to its share:
/// `n / members`, one more for the first `n % members` that have more), then each remaining
/// partition goes to the subscribed member holding fewest.
fn assign_uniform(
    members: &BTreeMap<String, Member>,
    previous: &BTreeMap<String, TopicPartitions>,
    topics: &BTreeMap<String, u32>,
) -> BTreeMap<String, TopicPartitions> {
    let mut out = nothing_assigned(members);
    if members.is_empty() {
        return out;
    }
    let all: Vec<(String, i32)> = topics
        .iter()
        .filter(|(t, _)| members.values().any(|m| m.subscribed.contains(*t)))
        .flat_map(|(t, n)| (0..*n as i32).map(move |p| (t.clone(), p)))
        .collect();
    let floor = all.len() / members.len();
    let mut extra_slots = all.len() % members.len();
    let mut taken: BTreeSet<(String, i32)> = BTreeSet::new();
    for (id, m) in members {
        let Some(prev) = previous.get(id) else {
            continue;
        };
        let kept: Vec<(String, i32)> = prev
            .iter()
            .filter(|(t, _)| m.subscribed.contains(*t))
            .flat_map(|(t, ps)| {
                let n = topics.get(t).copied().unwrap_or(0) as i32;
                ps.iter()
                    .filter(move |p| **p < n)
                    .map(move |p| (t.clone(), *p))
            })
            .collect();
        let mut share = floor;
        if kept.len() > floor && extra_slots > 0 {
            share += 1;
            extra_slots -= 1;
        }
        let mine = out.get_mut(id).expect("every member has an entry");
        for (t, p) in kept.into_iter().take(share) {
            mine.entry(t.clone()).or_default().insert(p);
            taken.insert((t, p));
        }
    }
    for (t, p) in all.into_iter().filter(|tp| !taken.contains(tp)) {
        let least = members
            .values()
            .filter(|m| m.subscribed.contains(&t))
            .min_by_key(|m| (count(&out[&m.id]), m.id.clone()));
        if let Some(m) = least {
            out.get_mut(&m.id)
                .expect("every member has an entry")
                .entry(t)
                .or_default()
                .insert(p);
        }
    }
    out
}

/// Kafka's range assignor: per topic, its subscribers in member-id order get consecutive
/// ranges, the first `n % subscribers` one partition more.
fn assign_range(
    members: &BTreeMap<String, Member>,
    topics: &BTreeMap<String, u32>,
) -> BTreeMap<String, TopicPartitions> {
    let mut out = nothing_assigned(members);
    for (t, n) in topics {
        let subs: Vec<&String> = members
            .values()
            .filter(|m| m.subscribed.contains(t))
            .map(|m| &m.id)
            .collect();
        if subs.is_empty() {
            continue;
        }
        let (each, extra) = (*n as usize / subs.len(), *n as usize % subs.len());
        let mut next = 0i32;
        for (i, id) in subs.iter().enumerate() {
            let len = (each + usize::from(i < extra)) as i32;
            if len > 0 {
                out.get_mut(*id)
                    .expect("every member has an entry")
                    .insert(t.clone(), (next..next + len).collect());
            }
            next += len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPIC: &str = "t";

    fn partitions_of(n: u32) -> impl Fn(&str) -> Option<u32> {
        move |t| (t == TOPIC).then_some(n)
    }

    /// A client as the Java one behaves: it heartbeats with its epoch, and reports what it
    /// owns (the last assignment it got) whenever that changed.
    #[derive(Default)]
    struct Client {
        id: String,
        epoch: i32,
        owned: TopicPartitions,
        report: bool,
    }

    impl Client {
        fn new(id: impl Into<String>) -> Client {
            Client {
                id: id.into(),
                ..Default::default()
            }
        }

        fn beat(
            &mut self,
            g: &mut ConsumerGroup,
            n: u32,
            now: Instant,
        ) -> Result<HeartbeatAnswer, Refusal> {
            let hb = Heartbeat {
                member_id: self.id.clone(),
                member_epoch: self.epoch,
                rebalance_timeout_ms: 30_000,
                subscribed: (self.epoch == 0).then(|| vec![TOPIC.to_string()]),
                owned: std::mem::take(&mut self.report).then(|| self.owned.clone()),
                ..Default::default()
            };
            let a = g.heartbeat(
                hb,
                &ConsumerGroupLimits::default(),
                &partitions_of(n),
                &|| vec![TOPIC.to_string()],
                || "generated".into(),
                now,
            )?;
            self.epoch = a.member_epoch;
            if let Some(asg) = &a.assignment {
                self.report = *asg != self.owned;
                self.owned = asg.clone();
            }
            Ok(a)
        }
    }

    /// No partition is owned (assigned or being released) by two members.
    fn assert_exclusive(g: &ConsumerGroup) {
        let mut seen: BTreeMap<(String, i32), String> = BTreeMap::new();
        for m in g.members.values() {
            for (t, ps) in m.assigned.iter().chain(m.revoking.iter()) {
                for p in ps {
                    if let Some(other) = seen.insert((t.clone(), *p), m.id.clone()) {
                        panic!("{t}/{p} owned by {other} and {}", m.id);
                    }
                }
            }
        }
    }

    fn rounds(g: &mut ConsumerGroup, clients: &mut [Client], n: u32, now: Instant) {
        for _ in 0..6 {
            for c in clients.iter_mut() {
                c.beat(g, n, now).unwrap();
                assert_exclusive(g);
            }
        }
    }

    /// The error code of heartbeat `hb`, which the group (its topic of `n` partitions) must
    /// refuse.
    fn refused(g: &mut ConsumerGroup, hb: Heartbeat, n: u32, now: Instant) -> i16 {
        g.heartbeat(
            hb,
            &ConsumerGroupLimits::default(),
            &partitions_of(n),
            &Vec::new,
            String::new,
            now,
        )
        .unwrap_err()
        .0
    }

    fn owned_counts(clients: &[Client]) -> Vec<usize> {
        clients.iter().map(|c| count(&c.owned)).collect()
    }

    #[test]
    fn members_joining_one_by_one_converge_balanced_without_double_ownership() {
        let now = Instant::now();
        let mut g = ConsumerGroup::default();
        let mut clients: Vec<Client> = Vec::new();
        for i in 0..3 {
            clients.push(Client::new(format!("m{i}")));
            rounds(&mut g, &mut clients, 6, now);
            let counts = owned_counts(&clients);
            assert_eq!(counts.iter().sum::<usize>(), 6, "{counts:?}");
            assert!(counts.iter().all(|c| *c == 6 / clients.len()), "{counts:?}");
        }
        assert_eq!(state_name(Some(&g)), "Stable");
        // Every member at the target's epoch.
        assert!(clients.iter().all(|c| c.epoch == g.assignment_epoch));
    }

    #[test]
    fn a_partition_moves_only_after_its_owner_released_it() {
        let now = Instant::now();
        let mut g = ConsumerGroup::default();
        let mut a = Client::new("a");
        a.beat(&mut g, 4, now).unwrap();
        a.beat(&mut g, 4, now).unwrap();
        assert_eq!(count(&a.owned), 4);
        let a_epoch = a.epoch;
        let mut b = Client::new("b");
        let joined = b.beat(&mut g, 4, now).unwrap();
        assert_eq!(
            joined.assignment,
            Some(TopicPartitions::new()),
            "b waits for a"
        );
        // a is told to give up two partitions, at its old epoch.
        let shrink = a.beat(&mut g, 4, now).unwrap();
        assert_eq!(shrink.member_epoch, a_epoch);
        assert_eq!(count(shrink.assignment.as_ref().unwrap()), 2);
        // Before a reports them released, b still gets nothing.
        let r = b.beat(&mut g, 4, now).unwrap();
        assert!(r.assignment.is_none(), "{r:?}");
        assert_exclusive(&g);
        // a reports; now b gets them.
        a.beat(&mut g, 4, now).unwrap();
        let r = b.beat(&mut g, 4, now).unwrap();
        assert_eq!(count(r.assignment.as_ref().unwrap()), 2);
        assert_exclusive(&g);
    }

    #[test]
    fn a_member_that_stops_heartbeating_is_fenced_and_its_partitions_reassigned() {
        let now = Instant::now();
        let mut g = ConsumerGroup::default();
        let mut clients: Vec<Client> = (0..2).map(|i| Client::new(format!("m{i}"))).collect();
        rounds(&mut g, &mut clients, 6, now);
        assert_eq!(owned_counts(&clients), [3, 3]);
        let limits = ConsumerGroupLimits::default();
        let later = now + limits.session_timeout / 2;
        clients[0].beat(&mut g, 6, later).unwrap();
        let expired = now + limits.session_timeout + Duration::from_millis(1);
        assert_eq!(g.tick(&limits, expired), ["m1"]);
        let mut alive = vec![std::mem::take(&mut clients[0])];
        rounds(&mut g, &mut alive, 6, expired);
        assert_eq!(owned_counts(&alive), [6]);
        // The fenced member's next heartbeat is refused: it must join again.
        let err = clients[1].beat(&mut g, 6, expired).unwrap_err();
        assert_eq!(err.0, codes::UNKNOWN_MEMBER_ID);
    }

    #[test]
    fn stale_epochs_are_fenced_and_new_partitions_are_assigned() {
        let now = Instant::now();
        let mut g = ConsumerGroup::default();
        let mut c = Client::new("c");
        rounds(&mut g, std::slice::from_mut(&mut c), 2, now);
        let hb = Heartbeat {
            member_id: "c".into(),
            member_epoch: c.epoch + 5,
            ..Default::default()
        };
        assert_eq!(refused(&mut g, hb, 2, now), codes::FENCED_MEMBER_EPOCH);
        // The topic grows to 5 partitions: the member gets them all at a new epoch.
        let before = c.epoch;
        for _ in 0..3 {
            c.beat(&mut g, 5, now).unwrap();
        }
        assert_eq!(count(&c.owned), 5);
        assert!(c.epoch > before);
    }

    #[test]
    fn a_commit_may_carry_an_older_epoch_for_partitions_held_since() {
        let now = Instant::now();
        let mut g = ConsumerGroup::default();
        let mut a = Client::new("a");
        rounds(&mut g, std::slice::from_mut(&mut a), 2, now);
        let first = a.epoch;
        // The topic grows: a moves to a new epoch and gets partitions 2 and 3.
        for _ in 0..3 {
            a.beat(&mut g, 4, now).unwrap();
        }
        assert!(a.epoch > first);
        assert_eq!(count(&a.owned), 4);
        let ok = |epoch: i32, parts: &[i32]| {
            g.check_commit("a", epoch, parts.iter().map(|p| (TOPIC, *p)))
        };
        assert_eq!(ok(a.epoch, &[0, 1, 2, 3]), Ok(()));
        assert_eq!(ok(first, &[0, 1]), Ok(()), "held since the older epoch");
        assert_eq!(ok(first, &[0, 2]), Err(codes::STALE_MEMBER_EPOCH));
        assert_eq!(ok(a.epoch + 1, &[0]), Err(codes::FENCED_MEMBER_EPOCH));
        assert_eq!(
            g.check_commit("nobody", a.epoch, std::iter::empty()),
            Err(codes::UNKNOWN_MEMBER_ID)
        );
    }

    fn classic(id: &str, owned: &TopicPartitions) -> ClassicJoin {
        ClassicJoin {
            member_id: id.into(),
            instance_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout: Duration::from_secs(30),
            classic: ClassicMeta {
                session_timeout: Duration::from_secs(10),
                protocols: vec![("cooperative-sticky".into(), bytes::Bytes::new())],
            },
            subscribed: vec![TOPIC.into()],
            owned: owned.clone(),
        }
    }

    #[test]
    fn a_converted_classic_group_hands_partitions_to_a_consumer_protocol_member() {
        let now = Instant::now();
        let limits = ConsumerGroupLimits::default();
        let tp =
            |ps: &[i32]| TopicPartitions::from([(TOPIC.to_string(), ps.iter().copied().collect())]);
        let mut g = ConsumerGroup::converted(
            vec![
                (classic("c1", &TopicPartitions::new()), tp(&[0, 1, 2])),
                (classic("c2", &TopicPartitions::new()), tp(&[3, 4, 5])),
            ],
            7,
            now,
        );
        assert_eq!(
            g.classic_heartbeat("c1", 7, now),
            codes::NONE,
            "stable as converted"
        );
        let mut n = Client::new("n");
        n.beat(&mut g, 6, now).unwrap();
        assert_exclusive(&g);
        // The classic members are asked to rejoin; a cooperative one keeps what it owns.
        let mut owned = BTreeMap::from([("c1", tp(&[0, 1, 2])), ("c2", tp(&[3, 4, 5]))]);
        for _ in 0..4 {
            for id in ["c1", "c2"] {
                let epoch = g.members[id].epoch;
                if g.classic_heartbeat(id, epoch, now) == codes::REBALANCE_IN_PROGRESS {
                    let epoch = g
                        .classic_join(classic(id, &owned[id]), &limits, &partitions_of(6), now)
                        .unwrap();
                    // SyncGroup: the client keeps exactly what it is given.
                    owned.insert(id, g.classic_sync(id, epoch).unwrap().assigned.clone());
                    assert_exclusive(&g);
                }
            }
            n.beat(&mut g, 6, now).unwrap();
            assert_exclusive(&g);
        }
        assert_eq!(count(&n.owned), 2, "{:?}", n.owned);
        assert_eq!(count(&owned["c1"]) + count(&owned["c2"]), 4);
        assert!(g.has_consumer_protocol_members());
        assert_eq!(g.classic_leave(&[("c1".into(), None)]), [codes::NONE]);
        assert!(!g.members.contains_key("c1"));
    }

    #[test]
    fn a_regex_subscription_follows_the_topics_it_matches() {
        let now = Instant::now();
        let limits = ConsumerGroupLimits::default();
        let mut g = ConsumerGroup::default();
        let counts = |t: &str| match t {
            "orders" => Some(2),
            "orders-eu" => Some(1),
            "audit" => Some(4),
            _ => None,
        };
        let mut topics = vec!["orders".to_string(), "audit".to_string()];
        let beat = |g: &mut ConsumerGroup, epoch: i32, regex: Option<&str>, topics: &[String]| {
            g.heartbeat(
                Heartbeat {
                    member_id: "r".into(),
                    member_epoch: epoch,
                    rebalance_timeout_ms: 1_000,
                    subscribed_regex: regex.map(str::to_string),
                    ..Default::default()
                },
                &limits,
                &counts,
                &|| topics.to_vec(),
                String::new,
                now,
            )
        };
        let bad = beat(&mut g, 0, Some("orders("), &topics).unwrap_err();
        assert_eq!(bad.0, codes::INVALID_REGULAR_EXPRESSION);
        let a = beat(&mut g, 0, Some("orders.*"), &topics).unwrap();
        let a = beat(&mut g, a.member_epoch, None, &topics).unwrap();
        assert_eq!(g.members["r"].subscribed, ["orders".to_string()].into());
        assert_eq!(count(&g.members["r"].assigned), 2, "{a:?}");
        // A topic the regex matches appears: it joins the subscription at a new epoch.
        topics.push("orders-eu".into());
        let b = beat(&mut g, a.member_epoch, None, &topics).unwrap();
        let b = beat(&mut g, b.member_epoch, None, &topics).unwrap();
        assert!(b.member_epoch > a.member_epoch);
        assert_eq!(count(&g.members["r"].assigned), 3);
        assert!(
            !g.members["r"].subscribed.contains("audit"),
            "whole names only"
        );
    }

    #[test]
    fn range_gives_consecutive_ranges_and_unknown_assignors_are_refused() {
        let members: BTreeMap<String, Member> = ["a", "b"]
            .iter()
            .map(|id| {
                let m = Member {
                    rebalance_timeout: Duration::from_secs(1),
                    subscribed: [TOPIC.to_string()].into(),
                    subscribed_names: [TOPIC.to_string()].into(),
                    assignor: Some("range".into()),
                    ..Member::new(id.to_string(), Instant::now())
                };
                (id.to_string(), m)
            })
            .collect();
        let t = assign_range(&members, &[(TOPIC.to_string(), 5)].into());
        assert_eq!(t["a"][TOPIC], [0, 1, 2].into());
        assert_eq!(t["b"][TOPIC], [3, 4].into());
        let mut g = ConsumerGroup::default();
        let hb = Heartbeat {
            member_id: "x".into(),
            rebalance_timeout_ms: 1,
            subscribed: Some(vec![TOPIC.into()]),
            assignor: Some("sticky".into()),
            ..Default::default()
        };
        assert_eq!(
            refused(&mut g, hb, 1, Instant::now()),
            codes::UNSUPPORTED_ASSIGNOR
        );
    }
}
