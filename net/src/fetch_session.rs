//! Incremental fetch sessions (KIP-227): a consumer (or follower) that fetches the same
//! partitions again and again names them once, in a full fetch that opens a session, and then
//! sends only what changed (a partition's new fetch offset, partitions added or forgotten); the
//! answer carries only the partitions with something new (records, an error, a moved high
//! watermark, last stable offset or log start offset).
//!
//! A session lives on the core of the connection that opened it, up to that core's share of
//! `max-incremental-fetch-session-cache-slots` (Kafka's
//! `max.incremental.fetch.session.cache.slots`, 1,000 a node by default); its id says which
//! core (`id % cores`, [`home_core`]), so a fetch of it that arrives on another connection, on
//! another core, is planned and answered on its home core (two cross-core calls) and the
//! session is the node's, as a Kafka broker's is. When a
//! core's slots are taken, a new session takes the place of one that was not used for
//! [`FETCH_SESSION_EVICTION_MS`] (the least recently used), else of the smallest session when
//! it is larger (a follower's session over a consumer's), as Kafka's cache evicts; otherwise
//! the fetch is answered without a session. A session holds at most
//! [`MAX_PARTITIONS_PER_FETCH_SESSION`] partitions and a core at most
//! [`MAX_CACHED_PARTITIONS_PER_CORE`] in all its sessions: a session that would pass either is
//! closed (its next fetch gets FETCH_SESSION_ID_NOT_FOUND and starts over with a full fetch,
//! answered without a session while it is too large).

use std::collections::HashMap;
use std::time::Instant;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Kafka's default `max.incremental.fetch.session.cache.slots`: sessions a node keeps.
pub const DEFAULT_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS: usize = 1_000;
/// A session not used for this long may be evicted for a new one (Kafka's
/// `FetchSessionCache` eviction time).
pub const FETCH_SESSION_EVICTION_MS: u64 = 120_000;
/// Partitions one session holds at most.
pub const MAX_PARTITIONS_PER_FETCH_SESSION: usize = 100_000;
/// Partitions one core's sessions hold at most, together.
pub const MAX_CACHED_PARTITIONS_PER_CORE: usize = 1_000_000;

/// `session_epoch` of a fetch that opens a session (with `session_id` 0) or replaces one.
pub const INITIAL_EPOCH: i32 = 0;
/// `session_epoch` of a fetch without a session (with `session_id` 0) or that closes one.
pub const FINAL_EPOCH: i32 = -1;
/// `session_id` of no session.
pub const NO_SESSION: i32 = 0;

use crate::codes::{
    FETCH_SESSION_ID_NOT_FOUND, FETCH_SESSION_TOPIC_ID_ERROR, INVALID_FETCH_SESSION_EPOCH,
    UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
};

/// A partition as a session names it: by topic id (Fetch v13+) or by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TopicKey {
    Id(uuid::Uuid),
    Name(StrBytes),
}

type PartitionKey = (TopicKey, i32);

/// What a session remembers of one partition: what the client last asked, and what it was
/// last told.
#[derive(Debug, Clone, PartialEq)]
struct Cached {
    fetch: FetchPartition,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
}

impl Cached {
    fn new(fetch: FetchPartition) -> Self {
        Cached {
            fetch,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
        }
    }
}

struct Session {
    /// The epoch the next incremental fetch must carry.
    epoch: i32,
    /// The partitions in answer order: one answered with something is moved to the end, so
    /// that a response's size limit does not always favour the same ones.
    partitions: Vec<PartitionKey>,
    cached: HashMap<PartitionKey, Cached>,
    by_topic_id: bool,
    /// A follower's (a fetch with a replica id): kept over consumers' sessions.
    privileged: bool,
    last_used: Instant,
}

impl Session {
    fn len(&self) -> usize {
        self.partitions.len()
    }
}

/// What a fetch does about sessions, decided before it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Read the request as it is and answer every partition; `open`: try to open a session of
    /// its partitions afterwards.
    Full { open: bool },
    /// An incremental fetch of session `id`: the request now names all the session's
    /// partitions; answer only the changed ones.
    Incremental { id: i32 },
    /// Refused as a whole with this error.
    Refused(i16),
}

/// The core whose sessions hold session `id` (ids of core c are c modulo the cores).
pub fn home_core(id: i32, this_core: usize, cores: usize) -> usize {
    if id > 0 && cores > 0 {
        id as usize % cores
    } else {
        this_core
    }
}

/// One core's fetch sessions.
pub struct FetchSessions {
    sessions: HashMap<i32, Session>,
    slots: usize,
    cached_partitions: usize,
    /// This core and the node's cores: every id made here is `core` modulo `cores`.
    core: usize,
    cores: usize,
    next_id: u64,
    /// Sessions evicted for new ones, for the metrics.
    pub evictions: u64,
}

/// How a session names a topic that a request or response names by `name` and `id`.
fn topic_key(by_topic_id: bool, name: &TopicName, id: uuid::Uuid) -> TopicKey {
    if by_topic_id {
        TopicKey::Id(id)
    } else {
        TopicKey::Name(name.0.clone())
    }
}

fn key_of(by_topic_id: bool, t: &FetchTopic) -> TopicKey {
    topic_key(by_topic_id, &t.topic, t.topic_id)
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessions {
    /// `slots`: the sessions core `core` (of `cores`) may keep (0: none, every fetch is
    /// answered without a session); `seed` makes its session ids.
    pub fn new(slots: usize, seed: u64, core: usize, cores: usize) -> Self {
        assert!(core < cores, "core {core} of {cores}");
        FetchSessions {
            sessions: HashMap::new(),
            slots,
            cached_partitions: 0,
            core,
            cores,
            next_id: seed | 1,
            evictions: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    fn remove(&mut self, id: i32) -> Option<Session> {
        let s = self.sessions.remove(&id)?;
        self.cached_partitions -= s.len();
        Some(s)
    }

    /// Decides what `req` (of Fetch `version`) does about sessions; for an incremental fetch,
    /// brings the session up to date with it and makes `req` name every partition of the
    /// session, with the fetch offsets it holds.
    pub fn plan(&mut self, version: i16, req: &mut FetchRequest, now: Instant) -> Plan {
        let by_topic_id = version >= 13;
        match (req.session_id, req.session_epoch) {
            (NO_SESSION, FINAL_EPOCH) => Plan::Full { open: false },
            (id, FINAL_EPOCH) => {
                self.remove(id);
                Plan::Full { open: false }
            }
            (id, INITIAL_EPOCH) => {
                if id != NO_SESSION {
                    self.remove(id);
                }
                // Versions before 7 have no sessions.
                Plan::Full { open: version >= 7 }
            }
            (NO_SESSION, _) => Plan::Refused(FETCH_SESSION_ID_NOT_FOUND),
            (id, epoch) => {
                let Some(s) = self.sessions.get_mut(&id) else {
                    return Plan::Refused(FETCH_SESSION_ID_NOT_FOUND);
                };
                if s.epoch != epoch {
                    return Plan::Refused(INVALID_FETCH_SESSION_EPOCH);
                }
                if s.by_topic_id != by_topic_id {
                    return Plan::Refused(FETCH_SESSION_TOPIC_ID_ERROR);
                }
                let before = s.len();
                for t in &req.forgotten_topics_data {
                    let topic = topic_key(by_topic_id, &t.topic, t.topic_id);
                    for p in &t.partitions {
                        let key = (topic.clone(), *p);
                        if s.cached.remove(&key).is_some() {
                            s.partitions.retain(|k| k != &key);
                        }
                    }
                }
                for t in &req.topics {
                    let topic = key_of(by_topic_id, t);
                    for p in &t.partitions {
                        let key = (topic.clone(), p.partition);
                        match s.cached.get_mut(&key) {
                            Some(c) => c.fetch = p.clone(),
                            None => {
                                s.cached.insert(key.clone(), Cached::new(p.clone()));
                                s.partitions.push(key);
                            }
                        }
                    }
                }
                let after = s.len();
                self.cached_partitions = self.cached_partitions + after - before;
                if after > MAX_PARTITIONS_PER_FETCH_SESSION
                    || self.cached_partitions > MAX_CACHED_PARTITIONS_PER_CORE
                {
                    self.remove(id);
                    return Plan::Refused(FETCH_SESSION_ID_NOT_FOUND);
                }
                s_request(
                    self.sessions.get_mut(&id).expect("looked up above"),
                    req,
                    now,
                );
                Plan::Incremental { id }
            }
        }
    }

    /// After a full fetch planned with `open`: opens a session of `asked` (the request's
    /// topics, as sent) if there is room or a session to evict, and returns its id (or
    /// [`NO_SESSION`]). `resp` is what was answered, which the session remembers.
    pub fn open(
        &mut self,
        version: i16,
        asked: &[FetchTopic],
        privileged: bool,
        resp: &mut FetchResponse,
        now: Instant,
    ) -> i32 {
        let by_topic_id = version >= 13;
        let mut partitions = Vec::new();
        let mut cached = HashMap::new();
        for t in asked {
            let topic = key_of(by_topic_id, t);
            for p in &t.partitions {
                let key = (topic.clone(), p.partition);
                if cached.insert(key.clone(), Cached::new(p.clone())).is_none() {
                    partitions.push(key);
                }
            }
        }
        let size = partitions.len();
        if size > MAX_PARTITIONS_PER_FETCH_SESSION
            || self.cached_partitions + size > MAX_CACHED_PARTITIONS_PER_CORE
            || !self.make_room(size, privileged, now)
        {
            return NO_SESSION;
        }
        let id = self.new_id();
        let mut s = Session {
            epoch: 1,
            partitions,
            cached,
            by_topic_id,
            privileged,
            last_used: now,
        };
        remember(&mut s, resp, false);
        self.cached_partitions += s.len();
        self.sessions.insert(id, s);
        debug_assert!(self.sessions.len() <= self.slots);
        id
    }

    /// After an incremental fetch of session `id`: keeps in `resp` only the partitions with
    /// something new, remembers what they were told, and moves the session to its next epoch.
    pub fn answer(&mut self, id: i32, resp: &mut FetchResponse) {
        let Some(s) = self.sessions.get_mut(&id) else {
            return;
        };
        let before = s.len();
        remember(s, resp, true);
        s.epoch = next_epoch(s.epoch);
        self.cached_partitions -= before - s.len();
    }

    /// Whether a session of `size` partitions may be added, evicting one if the slots are
    /// full (Kafka's order: a stale session first, the least recently used; else the smallest
    /// consumer session, then the smallest follower one, if the new one is larger).
    fn make_room(&mut self, size: usize, privileged: bool, now: Instant) -> bool {
        if self.sessions.len() < self.slots {
            return true;
        }
        if self.slots == 0 {
            return false;
        }
        let stale = self
            .sessions
            .iter()
            .filter(|(_, s)| {
                now.saturating_duration_since(s.last_used).as_millis()
                    >= u128::from(FETCH_SESSION_EVICTION_MS)
            })
            .min_by_key(|(_, s)| s.last_used)
            .map(|(id, _)| *id);
        let victim = stale.or_else(|| {
            self.sessions
                .iter()
                .min_by_key(|(id, s)| (s.privileged, s.len(), **id))
                .filter(|(_, s)| (s.privileged, s.len()) < (privileged, size))
                .map(|(id, _)| *id)
        });
        match victim {
            Some(id) => {
                self.remove(id);
                self.evictions += 1;
                true
            }
            None => false,
        }
    }

    fn new_id(&mut self) -> i32 {
        loop {
            // xorshift64: ids that a client cannot guess from its own.
            let mut x = self.next_id;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.next_id = x;
            let r = (x >> 33) as i64;
            let id = r - r % self.cores as i64 + self.core as i64;
            if id > 0 && id <= i64::from(i32::MAX) && !self.sessions.contains_key(&(id as i32)) {
                debug_assert_eq!(home_core(id as i32, usize::MAX, self.cores), self.core);
                return id as i32;
            }
        }
    }
}

/// Makes `req` name every partition of `s`, in the session's order, with what it holds.
fn s_request(s: &mut Session, req: &mut FetchRequest, now: Instant) {
    s.last_used = now;
    let mut topics: Vec<FetchTopic> = Vec::new();
    for key in &s.partitions {
        let fetch = s.cached[key].fetch.clone();
        match topics.last_mut() {
            Some(t) if key_of(s.by_topic_id, t) == key.0 => t.partitions.push(fetch),
            _ => {
                let mut t = FetchTopic::default().with_partitions(vec![fetch]);
                match &key.0 {
                    TopicKey::Id(id) => t.topic_id = *id,
                    TopicKey::Name(name) => t.topic = TopicName(name.clone()),
                }
                topics.push(t);
            }
        }
    }
    req.topics = topics;
    req.forgotten_topics_data.clear();
}

/// Remembers in `s` what `resp` told each partition; with `only_changed`, takes out of `resp`
/// the partitions with nothing new and moves the ones answered to the end of the session.
fn remember(s: &mut Session, resp: &mut FetchResponse, only_changed: bool) {
    let by_topic_id = s.by_topic_id;
    let mut answered = Vec::new();
    for t in &mut resp.responses {
        let topic = topic_key(by_topic_id, &t.topic, t.topic_id);
        t.partitions.retain(|p| {
            let key = (topic.clone(), p.partition_index);
            let Some(c) = s.cached.get_mut(&key) else {
                return !only_changed;
            };
            let changed = p.records.as_ref().is_some_and(|r| !r.is_empty())
                || p.error_code != 0
                || p.diverging_epoch.epoch >= 0
                || p.high_watermark != c.high_watermark
                || p.last_stable_offset != c.last_stable_offset
                || p.log_start_offset != c.log_start_offset;
            c.high_watermark = p.high_watermark;
            c.last_stable_offset = p.last_stable_offset;
            c.log_start_offset = p.log_start_offset;
            if changed {
                answered.push(key);
            }
            changed || !only_changed
        });
    }
    resp.responses
        .retain(|t| !t.partitions.is_empty() || !only_changed);
    if only_changed && !answered.is_empty() {
        let moved: std::collections::HashSet<&PartitionKey> = answered.iter().collect();
        let (rest, last): (Vec<_>, Vec<_>) =
            s.partitions.drain(..).partition(|k| !moved.contains(k));
        s.partitions = rest;
        s.partitions.extend(last);
    }
    // A partition of a topic that does not exist is answered, not kept: a session holds only
    // what can be served.
    let gone: Vec<PartitionKey> = resp
        .responses
        .iter()
        .flat_map(|t| {
            let topic = topic_key(by_topic_id, &t.topic, t.topic_id);
            t.partitions
                .iter()
                .filter(|p| matches!(p.error_code, UNKNOWN_TOPIC_ID | UNKNOWN_TOPIC_OR_PARTITION))
                .map(move |p| (topic.clone(), p.partition_index))
        })
        .collect();
    for key in gone {
        if s.cached.remove(&key).is_some() {
            s.partitions.retain(|k| k != &key);
        }
    }
    debug_assert_eq!(s.partitions.len(), s.cached.len());
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use kafka_protocol::messages::fetch_request::ForgottenTopic;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};

    use super::*;

    const V: i16 = 12;

    fn name(s: &str) -> TopicName {
        TopicName(StrBytes::from_string(s.to_string()))
    }

    fn topic(t: &str, parts: &[(i32, i64)]) -> FetchTopic {
        FetchTopic::default().with_topic(name(t)).with_partitions(
            parts
                .iter()
                .map(|&(p, off)| {
                    FetchPartition::default()
                        .with_partition(p)
                        .with_fetch_offset(off)
                })
                .collect(),
        )
    }

    fn request(id: i32, epoch: i32, topics: Vec<FetchTopic>) -> FetchRequest {
        FetchRequest::default()
            .with_session_id(id)
            .with_session_epoch(epoch)
            .with_topics(topics)
    }

    /// An answer: (topic, partition, high watermark, records' length).
    fn response(parts: &[(&str, i32, i64, usize)]) -> FetchResponse {
        let mut topics: Vec<FetchableTopicResponse> = Vec::new();
        for &(t, p, hw, len) in parts {
            let data = PartitionData::default()
                .with_partition_index(p)
                .with_high_watermark(hw)
                .with_last_stable_offset(hw)
                .with_log_start_offset(0)
                .with_records(Some(Bytes::from(vec![0u8; len])));
            match topics.last_mut() {
                Some(last) if last.topic == name(t) => last.partitions.push(data),
                _ => topics.push(
                    FetchableTopicResponse::default()
                        .with_topic(name(t))
                        .with_partitions(vec![data]),
                ),
            }
        }
        FetchResponse::default().with_responses(topics)
    }

    fn answered(resp: &FetchResponse) -> Vec<(String, i32)> {
        resp.responses
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic.0.to_string(), p.partition_index))
            })
            .collect()
    }

    fn asked(req: &FetchRequest) -> Vec<(String, i32, i64)> {
        req.topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic.0.to_string(), p.partition, p.fetch_offset))
            })
            .collect()
    }

    /// Opens a session of `topics` answered by `resp`.
    fn open(
        c: &mut FetchSessions,
        topics: Vec<FetchTopic>,
        resp: &FetchResponse,
        now: Instant,
    ) -> i32 {
        let mut req = request(NO_SESSION, INITIAL_EPOCH, topics);
        assert_eq!(c.plan(V, &mut req, now), Plan::Full { open: true });
        c.open(V, &req.topics, false, &mut resp.clone(), now)
    }

    #[test]
    fn a_session_answers_only_what_changed_and_keeps_its_epochs() {
        let now = Instant::now();
        let mut c = FetchSessions::new(10, 7, 0, 1);
        let mut sessionless = request(NO_SESSION, FINAL_EPOCH, vec![topic("a", &[(0, 0)])]);
        assert_eq!(c.plan(V, &mut sessionless, now), Plan::Full { open: false });
        let full = response(&[("a", 0, 5, 100), ("a", 1, 3, 0), ("b", 0, 0, 0)]);
        let id = open(
            &mut c,
            vec![topic("a", &[(0, 0), (1, 3)]), topic("b", &[(0, 0)])],
            &full,
            now,
        );
        assert_ne!(id, NO_SESSION);
        assert_eq!(c.len(), 1);

        // Epoch 1: the client moved a/0 on to 5 and names nothing else.
        let mut req = request(id, 1, vec![topic("a", &[(0, 5)])]);
        assert_eq!(c.plan(V, &mut req, now), Plan::Incremental { id });
        assert_eq!(
            asked(&req),
            vec![("a".into(), 0, 5), ("a".into(), 1, 3), ("b".into(), 0, 0)],
            "every partition of the session, at the offsets it holds"
        );
        // a/0 has nothing new; a/1's high watermark moved; b/0 has records.
        let mut resp = response(&[("a", 0, 5, 0), ("a", 1, 4, 0), ("b", 0, 2, 50)]);
        c.answer(id, &mut resp);
        assert_eq!(answered(&resp), vec![("a".into(), 1), ("b".into(), 0)]);

        // The same epoch again, an unknown session, epoch > 0 without one: refused.
        let mut again = request(id, 1, vec![]);
        assert_eq!(
            c.plan(V, &mut again, now),
            Plan::Refused(INVALID_FETCH_SESSION_EPOCH)
        );
        let mut unknown = request(id ^ 1, 2, vec![]);
        assert_eq!(
            c.plan(V, &mut unknown, now),
            Plan::Refused(FETCH_SESSION_ID_NOT_FOUND)
        );
        let mut none = request(NO_SESSION, 2, vec![]);
        assert_eq!(
            c.plan(V, &mut none, now),
            Plan::Refused(FETCH_SESSION_ID_NOT_FOUND)
        );
        // By topic id with a session opened by name.
        let mut by_id = request(id, 2, vec![]);
        assert_eq!(
            c.plan(13, &mut by_id, now),
            Plan::Refused(FETCH_SESSION_TOPIC_ID_ERROR)
        );

        // Epoch 2 forgets b and adds c/0; the answered partitions went to the end.
        let mut req = request(id, 2, vec![topic("c", &[(0, 9)])]);
        req.forgotten_topics_data = vec![ForgottenTopic::default()
            .with_topic(name("b"))
            .with_partitions(vec![0])];
        assert_eq!(c.plan(V, &mut req, now), Plan::Incremental { id });
        assert_eq!(
            asked(&req),
            vec![("a".into(), 0, 5), ("a".into(), 1, 3), ("c".into(), 0, 9)]
        );
        assert!(req.forgotten_topics_data.is_empty());
        let mut resp = response(&[("a", 0, 5, 0), ("a", 1, 4, 0), ("c", 0, 9, 0)]);
        c.answer(id, &mut resp);
        assert_eq!(
            answered(&resp),
            vec![("c".into(), 0)],
            "c/0 is new to the client"
        );

        // The final epoch closes it.
        let mut close = request(id, FINAL_EPOCH, vec![]);
        assert_eq!(c.plan(V, &mut close, now), Plan::Full { open: false });
        assert!(c.is_empty());
        assert_eq!(c.cached_partitions, 0);
    }

    #[test]
    fn full_slots_evict_a_stale_session_then_a_smaller_one_and_zero_slots_open_none() {
        let now = Instant::now();
        let mut c = FetchSessions::new(1, 3, 1, 2);
        let two = response(&[("a", 0, 0, 0), ("a", 1, 0, 0)]);
        let first = open(&mut c, vec![topic("a", &[(0, 0), (1, 0)])], &two, now);
        assert_ne!(first, NO_SESSION);
        assert_eq!(home_core(first, 0, 2), 1, "made on core 1 of 2");
        let one = response(&[("b", 0, 0, 0)]);
        assert_eq!(
            open(&mut c, vec![topic("b", &[(0, 0)])], &one, now),
            NO_SESSION,
            "smaller than the only session: answered without one"
        );
        let three = response(&[("c", 0, 0, 0), ("c", 1, 0, 0), ("c", 2, 0, 0)]);
        let bigger = open(
            &mut c,
            vec![topic("c", &[(0, 0), (1, 0), (2, 0)])],
            &three,
            now,
        );
        assert_ne!(
            bigger, NO_SESSION,
            "a larger session takes the smaller one's place"
        );
        assert_eq!((c.len(), c.evictions), (1, 1));
        let later = now + Duration::from_millis(FETCH_SESSION_EVICTION_MS);
        let small = open(&mut c, vec![topic("b", &[(0, 0)])], &one, later);
        assert_ne!(small, NO_SESSION, "a stale session makes room for any");
        assert_eq!((c.len(), c.evictions, c.cached_partitions), (1, 2, 1));

        let mut off = FetchSessions::new(0, 3, 0, 1);
        assert_eq!(
            open(&mut off, vec![topic("b", &[(0, 0)])], &one, now),
            NO_SESSION
        );
    }

    #[test]
    fn partitions_of_unknown_topics_are_answered_and_not_kept() {
        let now = Instant::now();
        let mut c = FetchSessions::new(4, 5, 0, 1);
        let mut resp = response(&[("a", 0, 0, 0), ("gone", 0, -1, 0)]);
        resp.responses[1].partitions[0].error_code = UNKNOWN_TOPIC_OR_PARTITION;
        let id = open(
            &mut c,
            vec![topic("a", &[(0, 0)]), topic("gone", &[(0, 0)])],
            &resp,
            now,
        );
        assert_eq!(
            answered(&resp).len(),
            2,
            "a full answer keeps every partition"
        );
        let mut req = request(id, 1, vec![]);
        c.plan(V, &mut req, now);
        assert_eq!(asked(&req), vec![("a".into(), 0, 0)]);
        assert_eq!(c.cached_partitions, 1);
    }
}
