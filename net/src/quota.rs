//! Client quotas (issue #19; Kafka's KIP-13, KIP-55 and KIP-124): produce and fetch byte
//! rates and a request-time percentage per user and client id, set in the metastore
//! (`MetaState::client_quotas`, AlterClientQuotas) and enforced by each core on the requests
//! it serves.
//!
//! Each quota is a token bucket per (kind, user, client id) on the core: it refills at the
//! quota's rate and holds at most `quota_burst_ms` of it. A request takes its cost (its frame
//! bytes for Produce, its records bytes for Fetch, the core time its handler took for every
//! request); a bucket in debt throttles the client for as long as the refill takes to pay it
//! back. The response says so in `throttle_time_ms` (clients then hold their next request
//! back, KIP-219), and the connection reads nothing more from the client until the throttle
//! has passed. The long-run rate is the quota's whatever the client does; a burst of up to
//! `quota_burst_ms` of quota goes through at once.
//!
//! Quotas hold per core, as Kafka's hold per broker: a client whose connections land on
//! several cores gets each core's quota (one connection lives on one core).
//!
//! The entity a quota applies by is resolved as Kafka does, most specific first:
//! user+client id, user+default client, user, default user+client id, default user+default
//! client, default user, client id, default client; each kind resolves on its own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ResponseKind;
use meta::{ClientQuota, MetaState, QuotaPart};

/// The longest throttle one request earns, in milliseconds (a client far over its quota is
/// held back this long at a time, and pays the rest of its debt with later requests).
pub const QUOTA_MAX_THROTTLE_MS: u64 = 30_000;
/// The most token buckets a core keeps; idle ones (full again) are dropped first.
pub const MAX_QUOTA_BUCKETS_PER_CORE: usize = 10_000;

/// What a quota limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// Produce request bytes per second (`producer_byte_rate`).
    Produce,
    /// Fetch response records bytes per second (`consumer_byte_rate`).
    Fetch,
    /// Percent of one core's time spent on the client's requests (`request_percentage`).
    Request,
}

impl QuotaKind {
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
            QuotaKind::Request => "request_percentage",
        }
    }

    /// The bucket's units per second for a quota `value`: bytes, or nanoseconds of core
    /// time (100 percent = a whole core).
    fn units_per_sec(self, value: f64) -> f64 {
        match self {
            QuotaKind::Produce | QuotaKind::Fetch => value,
            QuotaKind::Request => value / 100.0 * 1e9,
        }
    }
}

/// What one request cost, in each kind's units.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub produce_bytes: u64,
    pub fetch_bytes: u64,
    pub request_time: Duration,
}

/// A bucket's key: SipHash (this core's random keys) of the kind and the user and client id
/// parts the quota's entity names, so that charging a request allocates nothing; a
/// collision of two clients' keys is as unlikely as guessing the random keys.
type BucketKey = u64;

#[derive(Debug)]
struct Bucket {
    /// Units left; below zero: the debt a throttle pays back.
    tokens: f64,
    refilled: Instant,
    /// The refill rate and the most it holds, as of its last charge (a quota may change).
    per_sec: f64,
    depth: f64,
}

impl Bucket {
    /// Refills to `now`: whether it is full again (its client owes nothing).
    fn refill(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_sec).min(self.depth);
        self.refilled = now;
        self.tokens >= self.depth
    }
}

/// A core's token buckets.
#[derive(Default)]
pub struct Quotas {
    buckets: HashMap<BucketKey, Bucket>,
    keys: std::collections::hash_map::RandomState,
}

impl Quotas {
    /// Charges `usage` of `user` (a principal's name without `User:`) and `client_id`
    /// against the quotas of `meta` (which has some); the throttle it earns, in ms (0: none).
    pub fn charge(
        &mut self,
        meta: &MetaState,
        burst_ms: u64,
        user: &str,
        client_id: &str,
        usage: &Usage,
        now: Instant,
    ) -> u64 {
        let mut throttle_ms = 0;
        for (kind, cost) in [
            (QuotaKind::Produce, usage.produce_bytes as f64),
            (QuotaKind::Fetch, usage.fetch_bytes as f64),
            (QuotaKind::Request, usage.request_time.as_nanos() as f64),
        ] {
            if cost <= 0.0 {
                continue;
            }
            let Some((parts, rate)) = resolve(meta, kind, user, client_id) else {
                continue;
            };
            let key = std::hash::BuildHasher::hash_one(&self.keys, (kind, parts));
            let per_sec = kind.units_per_sec(rate);
            throttle_ms = throttle_ms.max(self.take(key, per_sec, burst_ms, cost, now));
        }
        throttle_ms
    }

    fn take(
        &mut self,
        key: BucketKey,
        per_sec: f64,
        burst_ms: u64,
        cost: f64,
        now: Instant,
    ) -> u64 {
        debug_assert!(per_sec > 0.0);
        let depth = per_sec * burst_ms as f64 / 1000.0;
        if !self.buckets.contains_key(&key) && self.buckets.len() >= MAX_QUOTA_BUCKETS_PER_CORE {
            self.evict_idle(now);
        }
        let b = self.buckets.entry(key).or_insert(Bucket {
            tokens: depth,
            refilled: now,
            per_sec,
            depth,
        });
        (b.per_sec, b.depth) = (per_sec, depth);
        b.refill(now);
        b.tokens -= cost;
        if b.tokens >= 0.0 {
            0
        } else {
            ((-b.tokens / per_sec * 1000.0).ceil() as u64).min(QUOTA_MAX_THROTTLE_MS)
        }
    }

    /// Makes room for one bucket: drops those full again (a client idle since), else any one
    /// (its client starts afresh, with a full bucket).
    fn evict_idle(&mut self, now: Instant) {
        self.buckets.retain(|_, b| !b.refill(now));
        if self.buckets.len() >= MAX_QUOTA_BUCKETS_PER_CORE {
            if let Some(k) = self.buckets.keys().next().copied() {
                self.buckets.remove(&k);
            }
        }
        tracing::debug!(buckets = self.buckets.len(), "quota buckets evicted");
    }

    #[cfg(test)]
    fn buckets(&self) -> usize {
        self.buckets.len()
    }
}

/// One part of an entity as a request's client fills it in: absent, the default, a name.
/// Ordered as `QuotaPart` is (absent, default, then names), so that the metastore's sorted
/// quotas are searched with borrowed names.
type PartRef<'a> = (u8, &'a str);

fn part_ref(p: &QuotaPart) -> PartRef<'_> {
    match p {
        QuotaPart::Absent => (0, ""),
        QuotaPart::Default => (1, ""),
        QuotaPart::Named(n) => (2, n),
    }
}

/// The quota of `kind` that applies to `user`/`client_id` (Kafka's order: module doc), and
/// the parts of the bucket it is charged to: the user and client id its entity names (a
/// default part counts each user or client on its own), "" for an absent part.
fn resolve<'a>(
    meta: &MetaState,
    kind: QuotaKind,
    user: &'a str,
    client_id: &'a str,
) -> Option<((&'a str, &'a str), f64)> {
    const ABSENT: PartRef<'static> = (0, "");
    const DEFAULT: PartRef<'static> = (1, "");
    let (u, c) = ((2, user), (2, client_id));
    let order = [
        (u, c),
        (u, DEFAULT),
        (u, ABSENT),
        (DEFAULT, c),
        (DEFAULT, DEFAULT),
        (DEFAULT, ABSENT),
        (ABSENT, c),
        (ABSENT, DEFAULT),
    ];
    order.into_iter().find_map(|probe| {
        let value = lookup(&meta.client_quotas, probe)?.value(kind.key())?;
        let named = |p: PartRef<'_>, actual: &'a str| if p.0 == 0 { "" } else { actual };
        Some(((named(probe.0, user), named(probe.1, client_id)), value))
    })
}

fn lookup<'q>(
    quotas: &'q [ClientQuota],
    probe: (PartRef<'_>, PartRef<'_>),
) -> Option<&'q ClientQuota> {
    quotas
        .binary_search_by(|q| (part_ref(&q.entity.user), part_ref(&q.entity.client_id)).cmp(&probe))
        .ok()
        .map(|i| &quotas[i])
}

/// The quota user of a principal: its name without the `User:` type.
pub fn quota_user(principal: &str) -> &str {
    principal.strip_prefix("User:").unwrap_or(principal)
}

/// The records bytes a Fetch response carries (what `consumer_byte_rate` counts).
pub fn fetch_bytes(resp: &ResponseKind) -> u64 {
    match resp {
        ResponseKind::Fetch(r) => r
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.records.as_ref().map_or(0, |b| b.len() as u64))
            .sum(),
        _ => 0,
    }
}

/// Runs `f`, adding up the time spent inside its polls: the core time a request took, not
/// its waits (an fdatasync, a group's rebalance).
pub async fn timed<F: std::future::Future>(f: F) -> (F::Output, Duration) {
    let mut f = std::pin::pin!(f);
    let mut spent = Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        let start = Instant::now();
        let r = f.as_mut().poll(cx);
        spent += start.elapsed();
        r
    })
    .await;
    (out, spent)
}

/// Sets `throttle_time_ms` of a response that has it (a version without the field does not
/// encode it).
pub fn set_throttle(resp: &mut ResponseKind, ms: i32) {
    macro_rules! set {
        ($($kind:ident),* $(,)?) => {
            match resp {
                $(ResponseKind::$kind(r) => r.throttle_time_ms = ms,)*
                _ => {}
            }
        };
    }
    set!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        DescribeGroups,
        ListGroups,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        OffsetForLeaderEpoch,
        InitProducerId,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        DescribeConfigs,
        AlterReplicaLogDirs,
        DescribeLogDirs,
        CreatePartitions,
        DeleteGroups,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        IncrementalAlterConfigs,
        AlterConfigs,
        OffsetDelete,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeCluster,
        DescribeTopicPartitions,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        GetTelemetrySubscriptions,
        PushTelemetry,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use meta::{QuotaAlteration, QuotaEntity};

    fn with_quota(user: QuotaPart, client_id: QuotaPart, key: &str, value: f64) -> MetaState {
        let mut m = MetaState::default();
        m.apply(&meta::Command::AlterClientQuota {
            alter: Box::new(QuotaAlteration {
                entity: QuotaEntity { user, client_id },
                set: [(key.to_string(), value.to_bits())].into(),
                remove: vec![],
            }),
        })
        .unwrap();
        m
    }

    /// A producer over its byte rate is throttled for as long as its debt takes to refill;
    /// another client id is not charged at all.
    #[test]
    fn byte_rate_throttles_only_its_client() {
        let m = with_quota(
            QuotaPart::Absent,
            QuotaPart::Named("slow".into()),
            "producer_byte_rate",
            1000.0,
        );
        let mut q = Quotas::default();
        let t0 = Instant::now();
        let usage = Usage {
            produce_bytes: 1500,
            ..Usage::default()
        };
        // The bucket starts full (1000 bytes for a 1000 ms burst): 500 bytes of debt.
        assert_eq!(q.charge(&m, 1000, "alice", "slow", &usage, t0), 500);
        assert_eq!(q.charge(&m, 1000, "alice", "fast", &usage, t0), 0);
        // Half a second later the debt is paid back, and 1500 more bytes (nothing in the
        // bucket) owe 1500 ms.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(q.charge(&m, 1000, "alice", "slow", &usage, t1), 1500);
        assert_eq!(q.buckets(), 1);
    }

    /// The most specific entity wins; a default client-id quota gives each client its own
    /// bucket.
    #[test]
    fn resolution_prefers_the_most_specific_entity() {
        let mut m = with_quota(
            QuotaPart::Absent,
            QuotaPart::Default,
            "producer_byte_rate",
            100.0,
        );
        m.apply(&meta::Command::AlterClientQuota {
            alter: Box::new(QuotaAlteration {
                entity: QuotaEntity {
                    user: QuotaPart::Named("bob".into()),
                    client_id: QuotaPart::Absent,
                },
                set: [("producer_byte_rate".to_string(), 5000.0f64.to_bits())].into(),
                remove: vec![],
            }),
        })
        .unwrap();
        let ((user, client_id), rate) = resolve(&m, QuotaKind::Produce, "bob", "x").unwrap();
        assert_eq!((user, client_id, rate), ("bob", "", 5000.0));
        let ((user, client_id), rate) = resolve(&m, QuotaKind::Produce, "carol", "x").unwrap();
        assert_eq!((user, client_id, rate), ("", "x", 100.0));
        assert!(resolve(&m, QuotaKind::Fetch, "carol", "x").is_none());
    }

    /// Request time is charged against a percentage of one core.
    #[test]
    fn request_percentage_counts_core_time() {
        let m = with_quota(
            QuotaPart::Named("alice".into()),
            QuotaPart::Absent,
            "request_percentage",
            10.0,
        );
        let mut q = Quotas::default();
        let usage = Usage {
            request_time: Duration::from_millis(200),
            ..Usage::default()
        };
        // 10 % of a core for a 1000 ms burst: 100 ms in the bucket, 100 ms of debt, paid
        // back at 100 ms of core time per second.
        assert_eq!(
            q.charge(&m, 1000, "alice", "c", &usage, Instant::now()),
            1000
        );
    }

    /// The buckets stay within MAX_QUOTA_BUCKETS_PER_CORE: a new client makes room by
    /// dropping the buckets that are full again.
    #[test]
    fn buckets_are_bounded_and_idle_ones_go_first() {
        let m = with_quota(
            QuotaPart::Absent,
            QuotaPart::Default,
            "producer_byte_rate",
            1000.0,
        );
        let mut q = Quotas::default();
        let t0 = Instant::now();
        let usage = Usage {
            produce_bytes: 10,
            ..Usage::default()
        };
        for i in 0..MAX_QUOTA_BUCKETS_PER_CORE {
            assert_eq!(q.charge(&m, 1000, "u", &format!("c{i}"), &usage, t0), 0);
        }
        assert_eq!(q.buckets(), MAX_QUOTA_BUCKETS_PER_CORE);
        // A second later every bucket is full again: the new client's charge drops them all.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(q.charge(&m, 1000, "u", "new", &usage, t1), 0);
        assert_eq!(q.buckets(), 1);
    }
}
