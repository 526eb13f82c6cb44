//! Differential protocol checks: the same requests, over raw sockets, to ringlog and to the
//! reference peer (Apache Kafka 4.4, `support::peer`), for every API key ringlog advertises
//! at every version both brokers speak. Each answer is decoded, what legitimately differs is
//! blanked (node and cluster ids, topic ids, hosts and ports, timestamps, throttle times,
//! error messages, record bytes) and the two are compared field by field. A difference is
//! either fixed or listed, with its reason, in `docs/kafka-differences.md` under an id
//! `protocol.<Api>.<scenario>`; one that is not listed fails the test.
//!
//! Scenarios: a topic both brokers hold (`diff`, two partitions, three records in partition
//! 0), its metadata, produce, fetch, offsets, configs, its partitions a page at a time beside
//! another topic's (DescribeTopicPartitions and its cursor), and the error paths: an unknown
//! topic, an offset out of range, a topic that exists, a bad config, an unknown group, a
//! corrupt batch, a leader epoch the broker has not reached, a fenced producer epoch, a member
//! of no group, and a topic this client is not authorized for (`secret`: every operation
//! denied to `User:ANONYMOUS` by an ACL on both); every other API gets its default (empty)
//! request.
//! Client telemetry (GetTelemetrySubscriptions, PushTelemetry), which neither broker
//! advertises, is sent to both as well: both answer it (`telemetry_scenarios`).
//! Wrong-coordinator answers need more than one node: `peer_cluster_tools.rs` compares them.
//!
//! Equal to Kafka is not yet right, so ringlog's own decoded answers are also checked on
//! their own ([`Own`]): each scenario's exact error code, the produced offsets, the fetched
//! records (decoded: offsets, keys, values, timestamps), the listed offsets, the topics and
//! configs; and after the comparison, what the appends left and the effects of a CreateTopics,
//! a DeleteRecords and a DeleteTopics on the requests that follow them.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, StrBytes};
use support::peer::{listed_differences, KafkaPeer};
use support::wire::frame;
use support::*;
use uuid::Uuid;

/// The topic both brokers hold.
const TOPIC: &str = "diff";
/// The topic both brokers refuse to this test's client: every operation on it is denied to
/// `User:ANONYMOUS` (its principal on PLAINTEXT), while whatever no ACL names stays open to it
/// (`allow.everyone.if.no.acl.found` on the peer; ringlog's rule for unauthenticated clients).
const SECRET: &str = "secret";
/// The peer's start options: an authorizer, and that rule.
const PEER_OPTIONS: &[&str] = &[
    "--prop",
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "--prop",
    "allow.everyone.if.no.acl.found=true",
];
/// A leader epoch neither broker has reached: UNKNOWN_LEADER_EPOCH.
const FUTURE_LEADER_EPOCH: i32 = 99;
/// The transactional id whose producer epoch the stale-epoch scenarios fence.
const TXN_ID: &str = "diff-txn";
/// The error codes ringlog's own answers are checked against (Kafka's `Errors`).
const OFFSET_OUT_OF_RANGE: i16 = 1;
const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
const UNKNOWN_SUBSCRIPTION_ID: i16 = 117;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const GROUP_ID_NOT_FOUND: i16 = 69;
const UNKNOWN_LEADER_EPOCH: i16 = 75;
const PRODUCER_FENCED: i16 = 90;
const UNKNOWN_TOPIC_ID: i16 = 100;
/// How long one answer may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// Fields whose values legitimately differ between two brokers: blanked before comparing.
const VOLATILE_FIELDS: &[&str] = &[
    "throttle_time_ms",
    "node_id",
    "leader_id",
    "replica_nodes",
    "isr_nodes",
    "offline_replicas",
    "eligible_leader_replicas",
    "last_known_elr",
    "cluster_id",
    "controller_id",
    "topic_id",
    "host",
    "port",
    "rack",
    "error_message",
    "producer_id",
    "timestamp",
    "log_append_time_ms",
    "records",
    "member_id",
    "coordinator_key",
    "session_id",
    "unknown_tagged_fields",
    "node_endpoints",
    "current_leader",
    "finalized_features_epoch",
    "supported_features",
    "finalized_features",
    "zk_migration_ready",
    "api_keys",
    "config_source",
    "synonyms",
    "documentation",
    "is_sensitive",
    "read_only",
    "config_type",
    "log_dir",
    "total_bytes",
    "usable_bytes",
];

/// One side's connection; a fresh one per request (a broker may close after an error).
struct Side {
    name: &'static str,
    addr: String,
    topic_id: Uuid,
    secret_id: Uuid,
    corr: i32,
    /// Records sent to partition 0 of [`TOPIC`] by the `append` scenarios so far.
    produced: i64,
    /// What this side's own answers failed of [`Own`]'s checks (only ringlog's are checked).
    failures: Vec<String>,
}

/// The decoded and normalised answer, or why there was none.
type Answer = Result<String, String>;

/// The checks of one of ringlog's own decoded answers, independent of Kafka's: a failure is
/// kept under its scenario's name and fails the test after the comparison has been reported.
struct Own<'a> {
    at: String,
    failures: &'a mut Vec<String>,
}

impl Own<'_> {
    fn fail(&mut self, what: String) {
        self.failures.push(format!("{}: {what}", self.at));
    }

    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.fail(format!("{what} is {got:?}, expected {want:?}"));
        }
    }

    fn that(&mut self, what: &str, ok: bool) {
        if !ok {
            self.fail(format!("not {what}"));
        }
    }

    /// The one element of `items`, or a failure if there is not exactly one.
    fn only<'r, T: std::fmt::Debug>(&mut self, what: &str, items: &'r [T]) -> Option<&'r T> {
        match items {
            [one] => Some(one),
            _ => {
                self.fail(format!("{} {what}, expected one: {items:?}", items.len()));
                None
            }
        }
    }
}

impl Side {
    fn exchange<Req, Resp>(&mut self, key: ApiKey, version: i16, req: &Req) -> Answer
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion + std::fmt::Debug,
    {
        self.call::<Req, Resp>(key, version, req)
            .map(|resp| normalise(&format!("{resp:?}")))
    }

    /// [`Side::exchange`], and on ringlog `check` of its own decoded answer (named
    /// `scenario`); an answer that did not come is a failure there.
    fn checked<Req, Resp>(
        &mut self,
        key: ApiKey,
        version: i16,
        scenario: &str,
        req: &Req,
        check: impl FnOnce(&Resp, &mut Own),
    ) -> Answer
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion + std::fmt::Debug,
    {
        let resp = self.call::<Req, Resp>(key, version, req);
        if self.name == "ringlog" {
            let mut own = Own {
                at: format!("ringlog {key:?} v{version} {scenario}"),
                failures: &mut self.failures,
            };
            match &resp {
                Ok(r) => check(r, &mut own),
                Err(e) => own.fail(format!("no answer: {e}")),
            }
        }
        resp.map(|r| normalise(&format!("{r:?}")))
    }

    /// One request on a fresh connection; the decoded answer.
    fn call<Req, Resp>(&mut self, key: ApiKey, version: i16, req: &Req) -> Result<Resp, String>
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion,
    {
        self.corr += 1;
        let mut s = TcpStream::connect(&self.addr).map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
        s.write_all(&frame(key as i16, version, self.corr, req))
            .map_err(|e| format!("send: {e}"))?;
        let mut size = [0u8; 4];
        if let Err(e) = s.read_exact(&mut size) {
            return Err(format!("no answer (connection closed: {})", e.kind()));
        }
        let size = i32::from_be_bytes(size);
        if !(0..64 << 20).contains(&size) {
            return Err(format!("an answer of {size} bytes"));
        }
        let mut body = vec![0u8; size as usize];
        s.read_exact(&mut body).map_err(|e| format!("read: {e}"))?;
        let mut body = Bytes::from(body);
        let h = ResponseHeader::decode(&mut body, Resp::header_version(version))
            .map_err(|e| format!("response header: {e}"))?;
        if h.correlation_id != self.corr {
            return Err(format!("correlation id {}", h.correlation_id));
        }
        let resp = Resp::decode(&mut body, version).map_err(|e| format!("undecodable: {e}"))?;
        if body.has_remaining() {
            return Err(format!("{} trailing bytes", body.remaining()));
        }
        Ok(resp)
    }
}

/// Blanks every [`VOLATILE_FIELDS`] value in a response's Debug text.
fn normalise(debug: &str) -> String {
    let mut out = debug.to_string();
    for field in VOLATILE_FIELDS {
        out = blank_field(&out, field);
    }
    out
}

/// Replaces the value of each `field: value` (up to the `,` or closing bracket at its depth)
/// with `_`.
fn blank_field(s: &str, field: &str) -> String {
    let needle = format!("{field}: ");
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(&needle) {
        // A whole field name: preceded by `{ ` or `, `.
        let whole = rest[..at].ends_with("{ ") || rest[..at].ends_with(", ");
        out.push_str(&rest[..at + needle.len()]);
        rest = &rest[at + needle.len()..];
        if !whole {
            continue;
        }
        let mut depth = 0i32;
        let mut in_str = false;
        let mut escaped = false;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            if in_str {
                match c {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => in_str = false,
                    _ => escaped = false,
                }
                continue;
            }
            match c {
                '"' => in_str = true,
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        out.push('_');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The versions of every API a broker advertises.
fn advertised(addr: &str) -> BTreeMap<i16, (i16, i16)> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
    let req = ApiVersionsRequest::default()
        .with_client_software_name(name("ringlog-diff"))
        .with_client_software_version(name("1"));
    let v: ApiVersionsResponse = support::wire::call(&mut s, 18, 3, 1, &req);
    assert_eq!(v.error_code, 0);
    v.api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect()
}

/// Calls `$each! { Api => Request, Response; ... }` with every API ringlog serves.
macro_rules! with_api_types {
    ($each:ident) => {
        $each! {
            Produce => ProduceRequest, ProduceResponse;
            Fetch => FetchRequest, FetchResponse;
            ListOffsets => ListOffsetsRequest, ListOffsetsResponse;
            Metadata => MetadataRequest, MetadataResponse;
            ApiVersions => ApiVersionsRequest, ApiVersionsResponse;
            CreateTopics => CreateTopicsRequest, CreateTopicsResponse;
            DeleteTopics => DeleteTopicsRequest, DeleteTopicsResponse;
            InitProducerId => InitProducerIdRequest, InitProducerIdResponse;
            DescribeConfigs => DescribeConfigsRequest, DescribeConfigsResponse;
            CreatePartitions => CreatePartitionsRequest, CreatePartitionsResponse;
            IncrementalAlterConfigs => IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse;
            AlterConfigs => AlterConfigsRequest, AlterConfigsResponse;
            FindCoordinator => FindCoordinatorRequest, FindCoordinatorResponse;
            JoinGroup => JoinGroupRequest, JoinGroupResponse;
            SyncGroup => SyncGroupRequest, SyncGroupResponse;
            Heartbeat => HeartbeatRequest, HeartbeatResponse;
            LeaveGroup => LeaveGroupRequest, LeaveGroupResponse;
            OffsetCommit => OffsetCommitRequest, OffsetCommitResponse;
            OffsetFetch => OffsetFetchRequest, OffsetFetchResponse;
            ListGroups => ListGroupsRequest, ListGroupsResponse;
            DescribeGroups => DescribeGroupsRequest, DescribeGroupsResponse;
            DeleteGroups => DeleteGroupsRequest, DeleteGroupsResponse;
            OffsetDelete => OffsetDeleteRequest, OffsetDeleteResponse;
            ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse;
            ConsumerGroupDescribe => ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse;
            DescribeCluster => DescribeClusterRequest, DescribeClusterResponse;
            DeleteRecords => DeleteRecordsRequest, DeleteRecordsResponse;
            OffsetForLeaderEpoch => OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse;
            AddPartitionsToTxn => AddPartitionsToTxnRequest, AddPartitionsToTxnResponse;
            AddOffsetsToTxn => AddOffsetsToTxnRequest, AddOffsetsToTxnResponse;
            EndTxn => EndTxnRequest, EndTxnResponse;
            TxnOffsetCommit => TxnOffsetCommitRequest, TxnOffsetCommitResponse;
            WriteTxnMarkers => WriteTxnMarkersRequest, WriteTxnMarkersResponse;
            DescribeTransactions => DescribeTransactionsRequest, DescribeTransactionsResponse;
            ListTransactions => ListTransactionsRequest, ListTransactionsResponse;
            DescribeProducers => DescribeProducersRequest, DescribeProducersResponse;
            DescribeLogDirs => DescribeLogDirsRequest, DescribeLogDirsResponse;
            DescribeQuorum => DescribeQuorumRequest, DescribeQuorumResponse;
            UpdateFeatures => UpdateFeaturesRequest, UpdateFeaturesResponse;
            AlterReplicaLogDirs => AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse;
            ElectLeaders => ElectLeadersRequest, ElectLeadersResponse;
            AlterPartitionReassignments => AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse;
            ListPartitionReassignments => ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse;
            SaslHandshake => SaslHandshakeRequest, SaslHandshakeResponse;
            SaslAuthenticate => SaslAuthenticateRequest, SaslAuthenticateResponse;
            CreateAcls => CreateAclsRequest, CreateAclsResponse;
            DescribeAcls => DescribeAclsRequest, DescribeAclsResponse;
            DeleteAcls => DeleteAclsRequest, DeleteAclsResponse;
            DescribeUserScramCredentials => DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse;
            AlterUserScramCredentials => AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse;
            DescribeClientQuotas => DescribeClientQuotasRequest, DescribeClientQuotasResponse;
            AlterClientQuotas => AlterClientQuotasRequest, AlterClientQuotasResponse;
            GetTelemetrySubscriptions => GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse;
            PushTelemetry => PushTelemetryRequest, PushTelemetryResponse;
            DescribeTopicPartitions => DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse;
        }
    };
}

/// The versions both the request and the response type of `key` encode.
fn codec_versions(key: ApiKey) -> (i16, i16) {
    fn both<Q: Message, S: Message>() -> (i16, i16) {
        (
            Q::VERSIONS.min.max(S::VERSIONS.min),
            Q::VERSIONS.max.min(S::VERSIONS.max),
        )
    }
    macro_rules! each_api {
        ($($k:ident => $q:ty, $r:ty;)*) => {
            match key { $(ApiKey::$k => both::<$q, $r>(),)* _ => (0, -1) }
        };
    }
    with_api_types!(each_api)
}

/// Sends `key`'s default (empty) request (the APIs with scenarios never get here: Produce's
/// default, acks=0, has no answer).
fn default_exchange(side: &mut Side, key: ApiKey, v: i16) -> Answer {
    if key == ApiKey::Produce {
        return Err("Produce has its own scenario".into());
    }
    macro_rules! each_api {
        ($($k:ident => $q:ty, $r:ty;)*) => {
            match key {
                $(ApiKey::$k => side.exchange::<$q, $r>(key, v, &<$q>::default()),)*
                other => Err(format!("no default request for {other:?}")),
            }
        };
    }
    with_api_types!(each_api)
}

/// Three records, uncompressed, timestamps 1..=3.
fn three_records() -> Bytes {
    Bytes::from(engine::batch_encode::encode_uncompressed((1..=3).map(
        |i| engine::batch_encode::NewRecord {
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            timestamp_ms: i,
            ..Default::default()
        },
    )))
}

fn produce(side: &Side, v: i16, topic: &str, records: Bytes) -> ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let mut t =
        TopicProduceData::default().with_partition_data(vec![PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(records))]);
    if v >= 13 {
        t = t.with_topic_id(match topic {
            TOPIC => side.topic_id,
            SECRET => side.secret_id,
            _ => Uuid::from_u128(7),
        });
    } else {
        t = t.with_name(TopicName(name(topic)));
    }
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![t])
}

fn fetch(side: &Side, v: i16, offset: i64) -> FetchRequest {
    fetch_of(side, v, TOPIC, offset, -1)
}

/// A fetch of partition 0 of `topic` (TOPIC or SECRET) at `offset`, by a client that knows
/// the leader epoch `epoch` (-1: none).
fn fetch_of(side: &Side, v: i16, topic: &str, offset: i64, epoch: i32) -> FetchRequest {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let mut t = FetchTopic::default().with_partitions(vec![FetchPartition::default()
        .with_partition(0)
        .with_current_leader_epoch(epoch)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20)]);
    if v >= 13 {
        t = t.with_topic_id(if topic == TOPIC {
            side.topic_id
        } else {
            side.secret_id
        });
    } else {
        t = t.with_topic(TopicName(name(topic)));
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![t])
}

/// A fetch session (KIP-227) at Fetch `v`, each request on a connection of its own (a
/// session is the broker's, not a connection's): a full fetch opens it; an incremental fetch
/// at the end of the log answers no partition (nothing new); the same epoch again is refused;
/// the final epoch closes it; a fetch of it after that finds no session.
fn session_scenarios(side: &mut Side, v: i16) -> Vec<(&'static str, Answer)> {
    let key = ApiKey::Fetch;
    let produced = side.produced;
    let mut open = fetch(side, v, 0);
    open.session_epoch = 0;
    let opened = side.call::<FetchRequest, FetchResponse>(key, v, &open);
    let id = opened.as_ref().map_or(0, |r| r.session_id);
    if side.name == "ringlog" {
        let mut own = Own {
            at: format!("ringlog Fetch v{v} session-open"),
            failures: &mut side.failures,
        };
        match &opened {
            Ok(r) => {
                own.eq("error_code", r.error_code, 0);
                own.that("a session id", r.session_id > 0);
            }
            Err(e) => own.fail(format!("no answer: {e}")),
        }
    }
    let at = |epoch: i32, offset: i64| {
        let mut r = fetch(side, v, offset);
        r.session_id = id;
        r.session_epoch = epoch;
        r
    };
    let (at_end, stale, close, after) = (
        at(1, produced),
        at(1, produced),
        at(-1, produced),
        at(2, produced),
    );
    let refused = |want: i16| {
        move |r: &FetchResponse, own: &mut Own| {
            own.eq("error_code", r.error_code, want);
            own.eq("session_id", r.session_id, 0);
            own.that("no partitions", r.responses.is_empty());
        }
    };
    vec![
        ("session-open", opened.map(|r| normalise(&format!("{r:?}")))),
        (
            "session-nothing-new",
            side.checked(
                key,
                v,
                "session-nothing-new",
                &at_end,
                |r: &FetchResponse, own| {
                    own.eq("error_code", r.error_code, 0);
                    own.eq("session_id", r.session_id, id);
                    own.that("no partitions: nothing new", r.responses.is_empty());
                },
            ),
        ),
        (
            "session-stale-epoch",
            side.checked(
                key,
                v,
                "session-stale-epoch",
                &stale,
                refused(INVALID_FETCH_SESSION_EPOCH),
            ),
        ),
        (
            "session-close",
            side.checked(key, v, "session-close", &close, |r: &FetchResponse, own| {
                own.eq("error_code", r.error_code, 0);
                own.eq("session_id", r.session_id, 0);
            }),
        ),
        (
            "session-closed",
            side.checked(
                key,
                v,
                "session-closed",
                &after,
                refused(FETCH_SESSION_ID_NOT_FOUND),
            ),
        ),
    ]
}

/// The scenarios of `key` at version `v`: (scenario, answer), in order (both brokers go
/// through the same ones, so a produce's offsets agree).
fn scenarios(side: &mut Side, key: ApiKey, v: i16) -> Vec<(&'static str, Answer)> {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    match key {
        ApiKey::ApiVersions => {
            let mut req = ApiVersionsRequest::default();
            if v >= 3 {
                req = req
                    .with_client_software_name(name("ringlog-diff"))
                    .with_client_software_version(name("1"));
            }
            vec![(
                "versions",
                side.exchange::<_, ApiVersionsResponse>(key, v, &req),
            )]
        }
        ApiKey::Metadata => {
            let topic =
                |t: &str| MetadataRequestTopic::default().with_name(Some(TopicName(name(t))));
            let of = |t: &str| MetadataRequest::default().with_topics(Some(vec![topic(t)]));
            let topic_id = side.topic_id;
            let error_of = |want: i16| {
                move |r: &MetadataResponse, own: &mut Own| {
                    if let Some(t) = own.only("topics", &r.topics) {
                        own.eq("error_code", t.error_code, want);
                    }
                }
            };
            let mut answers = vec![
                (
                    "topic",
                    side.checked(key, v, "topic", &of(TOPIC), |r: &MetadataResponse, own| {
                        let Some(t) = own.only("topics", &r.topics) else {
                            return;
                        };
                        own.eq("error_code", t.error_code, 0);
                        own.eq("name", t.name.as_ref().map(|n| n.0.as_str()), Some(TOPIC));
                        if v >= 10 {
                            own.eq("topic_id", t.topic_id, topic_id);
                        }
                        let indexes: Vec<i32> =
                            t.partitions.iter().map(|p| p.partition_index).collect();
                        own.eq("partition indexes", indexes, vec![0, 1]);
                        for p in &t.partitions {
                            own.eq("a partition's error_code", p.error_code, 0);
                            own.that("every partition led", p.leader_id.0 >= 0);
                        }
                        own.that("its broker listed", r.brokers.len() == 1);
                    }),
                ),
                (
                    "unknown-topic",
                    side.checked(
                        key,
                        v,
                        "unknown-topic",
                        &of("nope"),
                        error_of(UNKNOWN_TOPIC_OR_PARTITION),
                    ),
                ),
                (
                    "unauthorized",
                    side.checked(
                        key,
                        v,
                        "unauthorized",
                        &of(SECRET),
                        error_of(TOPIC_AUTHORIZATION_FAILED),
                    ),
                ),
            ];
            // KIP-430 (v8+): each topic's authorized operations, when asked; a refused topic
            // has none.
            if v >= 8 {
                let req = MetadataRequest::default()
                    .with_allow_auto_topic_creation(false)
                    .with_include_topic_authorized_operations(true)
                    .with_topics(Some(vec![topic(TOPIC), topic("nope"), topic(SECRET)]));
                let answer = side.checked(
                    key,
                    v,
                    "topic-operations",
                    &req,
                    |r: &MetadataResponse, own| {
                        let got: Vec<(String, i16, i32)> = r
                            .topics
                            .iter()
                            .map(|t| {
                                let n = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
                                (n, t.error_code, t.topic_authorized_operations)
                            })
                            .collect();
                        let want = [
                            (TOPIC, 0, ALL_TOPIC_OPERATIONS),
                            ("nope", UNKNOWN_TOPIC_OR_PARTITION, ALL_TOPIC_OPERATIONS),
                            (SECRET, TOPIC_AUTHORIZATION_FAILED, i32::MIN),
                        ];
                        let want: Vec<(String, i16, i32)> = want
                            .into_iter()
                            .map(|(n, code, ops)| (n.to_string(), code, ops))
                            .collect();
                        own.eq("topics (name, error_code, operations)", got, want);
                    },
                );
                answers.push(("topic-operations", answer));
            }
            answers
        }
        ApiKey::CreateTopics => {
            let create = |t: &str, configs: Vec<CreatableTopicConfig>| {
                CreateTopicsRequest::default()
                    .with_timeout_ms(10_000)
                    .with_validate_only(v >= 1)
                    .with_topics(vec![CreatableTopic::default()
                        .with_name(TopicName(name(t)))
                        .with_num_partitions(3)
                        .with_replication_factor(1)
                        .with_configs(configs)])
            };
            let bad = vec![CreatableTopicConfig::default()
                .with_name(name("cleanup.policy"))
                .with_value(Some(name("sometimes")))];
            let error_of = |topic: &'static str, want: i16| {
                move |r: &CreateTopicsResponse, own: &mut Own| {
                    if let Some(t) = own.only("topics", &r.topics) {
                        own.eq("name", t.name.0.as_str(), topic);
                        own.eq("error_code", t.error_code, want);
                    }
                }
            };
            vec![
                (
                    "exists",
                    side.checked(
                        key,
                        v,
                        "exists",
                        &create(TOPIC, vec![]),
                        error_of(TOPIC, TOPIC_ALREADY_EXISTS),
                    ),
                ),
                (
                    "bad-config",
                    side.checked(
                        key,
                        v,
                        "bad-config",
                        &create("fresh", bad),
                        error_of("fresh", INVALID_CONFIG),
                    ),
                ),
                (
                    "validate-only",
                    side.checked(
                        key,
                        v,
                        "validate-only",
                        &create("fresh", vec![]),
                        |r: &CreateTopicsResponse, own| {
                            error_of("fresh", 0)(r, own);
                            if let (Some(t), true) = (r.topics.first(), v >= 5) {
                                own.eq("num_partitions", t.num_partitions, 3);
                                own.eq("replication_factor", t.replication_factor, 1);
                            }
                        },
                    ),
                ),
            ]
        }
        ApiKey::Produce => {
            let ok = produce(side, v, TOPIC, three_records());
            let unknown = produce(side, v, "nope", three_records());
            let corrupt = produce(side, v, TOPIC, corrupt_records());
            let denied = produce(side, v, SECRET, three_records());
            let before = side.produced;
            let append = side.checked(key, v, "append", &ok, |r: &ProduceResponse, own| {
                let Some(p) = produced_partition(r, own) else {
                    return;
                };
                own.eq("error_code", p.error_code, 0);
                own.eq("base_offset", p.base_offset, before);
                if v >= 5 {
                    own.eq("log_start_offset", p.log_start_offset, 0);
                }
            });
            side.produced += 3;
            let error_of = |want: i16| {
                move |r: &ProduceResponse, own: &mut Own| {
                    if let Some(p) = produced_partition(r, own) {
                        own.eq("error_code", p.error_code, want);
                        own.eq("base_offset", p.base_offset, -1);
                    }
                }
            };
            // From v13 a topic is named by its id: an unknown one is UNKNOWN_TOPIC_ID.
            let unknown_code = if v >= 13 {
                UNKNOWN_TOPIC_ID
            } else {
                UNKNOWN_TOPIC_OR_PARTITION
            };
            vec![
                ("append", append),
                (
                    "unknown-topic",
                    side.checked(key, v, "unknown-topic", &unknown, error_of(unknown_code)),
                ),
                (
                    "corrupt",
                    side.checked(key, v, "corrupt", &corrupt, error_of(CORRUPT_MESSAGE)),
                ),
                (
                    "unauthorized",
                    side.checked(
                        key,
                        v,
                        "unauthorized",
                        &denied,
                        error_of(TOPIC_AUTHORIZATION_FAILED),
                    ),
                ),
            ]
        }
        ApiKey::Fetch => {
            let from_start = fetch(side, v, 0);
            let past_end = fetch(side, v, 1_000_000);
            let denied = fetch_of(side, v, SECRET, 0, -1);
            let produced = side.produced;
            let (topic_id, secret_id) = (side.topic_id, side.secret_id);
            let error_of = |topic: &'static str, id: Uuid, want: i16| {
                move |r: &FetchResponse, own: &mut Own| {
                    if let Some(p) = fetched_partition(r, v, topic, id, own) {
                        own.eq("error_code", p.error_code, want);
                        own.that(
                            "no records",
                            p.records.as_ref().is_none_or(|b| b.is_empty()),
                        );
                    }
                }
            };
            let mut answers = vec![
                (
                    "from-start",
                    side.checked(
                        key,
                        v,
                        "from-start",
                        &from_start,
                        |r: &FetchResponse, own| {
                            if v >= 7 {
                                own.eq("error_code", r.error_code, 0);
                            }
                            let Some(p) = fetched_partition(r, v, TOPIC, topic_id, own) else {
                                return;
                            };
                            own.eq("the partition's error_code", p.error_code, 0);
                            own.eq("high_watermark", p.high_watermark, produced);
                            own.eq("last_stable_offset", p.last_stable_offset, produced);
                            if v >= 5 {
                                own.eq("log_start_offset", p.log_start_offset, 0);
                            }
                            own.that(
                                "no aborted transactions",
                                p.aborted_transactions.as_ref().is_none_or(|a| a.is_empty()),
                            );
                            check_records(p, 0, produced, own);
                        },
                    ),
                ),
                (
                    "out-of-range",
                    side.checked(
                        key,
                        v,
                        "out-of-range",
                        &past_end,
                        error_of(TOPIC, topic_id, OFFSET_OUT_OF_RANGE),
                    ),
                ),
                (
                    "unauthorized",
                    side.checked(
                        key,
                        v,
                        "unauthorized",
                        &denied,
                        error_of(SECRET, secret_id, TOPIC_AUTHORIZATION_FAILED),
                    ),
                ),
            ];
            if v >= 9 {
                let ahead = fetch_of(side, v, TOPIC, 0, FUTURE_LEADER_EPOCH);
                answers.push((
                    "future-epoch",
                    side.checked(
                        key,
                        v,
                        "future-epoch",
                        &ahead,
                        error_of(TOPIC, topic_id, UNKNOWN_LEADER_EPOCH),
                    ),
                ));
            }
            if v >= 7 {
                answers.extend(session_scenarios(side, v));
            }
            answers
        }
        ApiKey::ListOffsets => {
            let at = |topic: &str, ts: i64, epoch: i32| {
                ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(TopicName(name(topic)))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(if topic == TOPIC { 1 } else { 0 })
                            .with_current_leader_epoch(epoch)
                            .with_timestamp(ts)])])
            };
            // Partition 1 of TOPIC, which no scenario writes: its offsets are 0 and 0 (partition
            // 0's, after the appends, are checked on their own at the end).
            let answer_of = |topic: &'static str, want: i16, offset: i64| {
                move |r: &ListOffsetsResponse, own: &mut Own| {
                    let Some(t) = own.only("topics", &r.topics) else {
                        return;
                    };
                    own.eq("name", t.name.0.as_str(), topic);
                    let Some(p) = own.only("partitions", &t.partitions) else {
                        return;
                    };
                    own.eq(
                        "partition_index",
                        p.partition_index,
                        i32::from(topic == TOPIC),
                    );
                    own.eq("error_code", p.error_code, want);
                    own.eq("offset", p.offset, offset);
                }
            };
            let mut answers = vec![
                (
                    "earliest",
                    side.checked(
                        key,
                        v,
                        "earliest",
                        &at(TOPIC, -2, -1),
                        answer_of(TOPIC, 0, 0),
                    ),
                ),
                (
                    "latest",
                    side.checked(key, v, "latest", &at(TOPIC, -1, -1), answer_of(TOPIC, 0, 0)),
                ),
                (
                    "unauthorized",
                    side.checked(
                        key,
                        v,
                        "unauthorized",
                        &at(SECRET, -1, -1),
                        answer_of(SECRET, TOPIC_AUTHORIZATION_FAILED, -1),
                    ),
                ),
            ];
            if v >= 4 {
                let ahead = at(TOPIC, -1, FUTURE_LEADER_EPOCH);
                answers.push((
                    "future-epoch",
                    side.checked(
                        key,
                        v,
                        "future-epoch",
                        &ahead,
                        answer_of(TOPIC, UNKNOWN_LEADER_EPOCH, -1),
                    ),
                ));
            }
            answers
        }
        ApiKey::FindCoordinator => {
            let mut req = FindCoordinatorRequest::default();
            if v >= 4 {
                req = req.with_coordinator_keys(vec![name("diff-group")]);
            } else {
                req = req.with_key(name("diff-group"));
            }
            vec![(
                "group",
                side.checked(key, v, "group", &req, |r: &FindCoordinatorResponse, own| {
                    if v >= 4 {
                        if let Some(c) = own.only("coordinators", &r.coordinators) {
                            own.eq("key", c.key.as_str(), "diff-group");
                            own.eq("error_code", c.error_code, 0);
                            own.that("a coordinator", c.node_id.0 >= 0 && c.port > 0);
                        }
                    } else {
                        own.eq("error_code", r.error_code, 0);
                        own.that("a coordinator", r.node_id.0 >= 0 && r.port > 0);
                    }
                }),
            )]
        }
        ApiKey::DescribeConfigs => {
            let of = |topic: &str| {
                DescribeConfigsRequest::default().with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(name(topic))
                        .with_configuration_keys(Some(vec![
                            name("cleanup.policy"),
                            name("max.message.bytes"),
                        ])),
                ])
            };
            vec![
                (
                    "topic",
                    side.checked(
                        key,
                        v,
                        "topic",
                        &of(TOPIC),
                        |r: &DescribeConfigsResponse, own| {
                            let Some(t) = own.only("results", &r.results) else {
                                return;
                            };
                            own.eq("error_code", t.error_code, 0);
                            let configs: Vec<(&str, Option<&str>)> = t
                                .configs
                                .iter()
                                .map(|c| (c.name.as_str(), c.value.as_ref().map(|x| x.as_str())))
                                .collect();
                            own.eq(
                                "configs",
                                configs,
                                vec![
                                    ("cleanup.policy", Some("delete")),
                                    ("max.message.bytes", Some("1048588")),
                                ],
                            );
                        },
                    ),
                ),
                (
                    "unauthorized",
                    side.checked(
                        key,
                        v,
                        "unauthorized",
                        &of(SECRET),
                        |r: &DescribeConfigsResponse, own| {
                            if let Some(t) = own.only("results", &r.results) {
                                own.eq("error_code", t.error_code, TOPIC_AUTHORIZATION_FAILED);
                                own.that("no configs", t.configs.is_empty());
                            }
                        },
                    ),
                ),
            ]
        }
        ApiKey::IncrementalAlterConfigs => {
            use kafka_protocol::messages::incremental_alter_configs_request::{
                AlterConfigsResource, AlterableConfig,
            };
            // A topic of this version's own: APPEND and SUBTRACT change its cleanup.policy.
            let topic: &'static str = match v {
                0 => "lists-v0",
                _ => "lists-v1",
            };
            let create = CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(TopicName(name(topic)))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]);
            let created = side.call::<_, CreateTopicsResponse>(ApiKey::CreateTopics, 5, &create);
            assert!(
                matches!(&created, Ok(r) if r.topics.iter().all(|t| t.error_code == 0)),
                "{}: creating {topic}: {created:?}",
                side.name
            );
            let alter = |key: &str, op: i8, value: &str| {
                IncrementalAlterConfigsRequest::default().with_resources(vec![
                    AlterConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(name(topic))
                        .with_configs(vec![AlterableConfig::default()
                            .with_name(name(key))
                            .with_config_operation(op)
                            .with_value(Some(name(value)))]),
                ])
            };
            let describe = DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(name(topic))
                    .with_configuration_keys(Some(vec![name("cleanup.policy")])),
            ]);
            let error_of = |want: i16, text: &'static str| {
                move |r: &IncrementalAlterConfigsResponse, own: &mut Own| {
                    if let Some(t) = own.only("responses", &r.responses) {
                        own.eq("error_code", t.error_code, want);
                        let message = t.error_message.as_ref().map_or("", |m| m.as_str());
                        own.that(
                            &format!("{message:?} says {text:?}"),
                            message.contains(text),
                        );
                    }
                }
            };
            let policy_is = |want: &'static str| {
                move |r: &DescribeConfigsResponse, own: &mut Own| {
                    if let Some(t) = own.only("results", &r.results) {
                        let values: Vec<Option<&str>> = t
                            .configs
                            .iter()
                            .map(|c| c.value.as_ref().map(|x| x.as_str()))
                            .collect();
                        own.eq("cleanup.policy", values, vec![Some(want)]);
                    }
                }
            };
            const APPEND: i8 = 2;
            const SUBTRACT: i8 = 3;
            let (describe_key, describe_v) = (ApiKey::DescribeConfigs, 4);
            vec![
                (
                    "append",
                    side.checked(
                        key,
                        v,
                        "append",
                        &alter("cleanup.policy", APPEND, "compact"),
                        error_of(0, ""),
                    ),
                ),
                (
                    "appended",
                    side.checked(
                        describe_key,
                        describe_v,
                        "appended",
                        &describe,
                        policy_is("delete,compact"),
                    ),
                ),
                (
                    "append-again",
                    side.checked(
                        key,
                        v,
                        "append-again",
                        &alter("cleanup.policy", APPEND, "compact"),
                        error_of(0, ""),
                    ),
                ),
                (
                    "subtract",
                    side.checked(
                        key,
                        v,
                        "subtract",
                        &alter("cleanup.policy", SUBTRACT, "delete"),
                        error_of(0, ""),
                    ),
                ),
                (
                    "subtracted",
                    side.checked(
                        describe_key,
                        describe_v,
                        "subtracted",
                        &describe,
                        policy_is("compact"),
                    ),
                ),
                (
                    "append-not-a-list",
                    side.checked(
                        key,
                        v,
                        "append-not-a-list",
                        &alter("retention.ms", APPEND, "1"),
                        error_of(
                            INVALID_CONFIG,
                            "Can't APPEND to key retention.ms because its type is not LIST.",
                        ),
                    ),
                ),
            ]
        }
        ApiKey::AlterConfigs => {
            use kafka_protocol::messages::alter_configs_request::{
                AlterConfigsResource, AlterableConfig,
            };
            // A topic of this version's own. Legacy AlterConfigs replaces a topic's whole set
            // of configs: a key the second request does not name goes back to its default.
            let topic: &'static str = match v {
                0 => "legacy-v0",
                1 => "legacy-v1",
                _ => "legacy-v2",
            };
            let create = CreateTopicsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(TopicName(name(topic)))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]);
            let created = side.call::<_, CreateTopicsResponse>(ApiKey::CreateTopics, 5, &create);
            assert!(
                matches!(&created, Ok(r) if r.topics.iter().all(|t| t.error_code == 0)),
                "{}: creating {topic}: {created:?}",
                side.name
            );
            let alter_of = |rtype: i8,
                            resource: &str,
                            validate_only: bool,
                            configs: &[(&str, Option<&str>)]| {
                AlterConfigsRequest::default()
                    .with_validate_only(validate_only)
                    .with_resources(vec![AlterConfigsResource::default()
                        .with_resource_type(rtype)
                        .with_resource_name(name(resource))
                        .with_configs(
                            configs
                                .iter()
                                .map(|(k, v)| {
                                    AlterableConfig::default()
                                        .with_name(name(k))
                                        .with_value(v.map(name))
                                })
                                .collect(),
                        )])
            };
            let alter = |configs: &[(&str, Option<&str>)]| alter_of(2, topic, false, configs);
            let describe = DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(name(topic))
                    .with_configuration_keys(Some(vec![
                        name("cleanup.policy"),
                        name("max.message.bytes"),
                    ])),
            ]);
            let error_of = |resource: &'static str, want: i16| {
                move |r: &AlterConfigsResponse, own: &mut Own| {
                    if let Some(t) = own.only("responses", &r.responses) {
                        own.eq("resource_name", t.resource_name.as_str(), resource);
                        own.eq("error_code", t.error_code, want);
                    }
                }
            };
            // (value, is it the default) of cleanup.policy and max.message.bytes.
            let configs_are = |want: [(&'static str, bool); 2]| {
                move |r: &DescribeConfigsResponse, own: &mut Own| {
                    if let Some(t) = own.only("results", &r.results) {
                        own.eq("error_code", t.error_code, 0);
                        let got: Vec<(Option<&str>, bool)> = t
                            .configs
                            .iter()
                            .map(|c| (c.value.as_ref().map(|x| x.as_str()), c.config_source == 5))
                            .collect();
                        let want: Vec<(Option<&str>, bool)> =
                            want.iter().map(|&(v, d)| (Some(v), d)).collect();
                        own.eq("(value, is the default) of each config", got, want);
                    }
                }
            };
            let (describe_key, describe_v) = (ApiKey::DescribeConfigs, 4);
            vec![
                (
                    "set-two",
                    side.checked(
                        key,
                        v,
                        "set-two",
                        &alter(&[
                            ("cleanup.policy", Some("compact")),
                            ("max.message.bytes", Some("2000000")),
                        ]),
                        error_of(topic, 0),
                    ),
                ),
                (
                    "two-set",
                    side.checked(
                        describe_key,
                        describe_v,
                        "two-set",
                        &describe,
                        configs_are([("compact", false), ("2000000", false)]),
                    ),
                ),
                (
                    "replace",
                    side.checked(
                        key,
                        v,
                        "replace",
                        &alter(&[("max.message.bytes", Some("3000000"))]),
                        error_of(topic, 0),
                    ),
                ),
                (
                    "replaced",
                    side.checked(
                        describe_key,
                        describe_v,
                        "replaced",
                        &describe,
                        configs_are([("delete", true), ("3000000", false)]),
                    ),
                ),
                (
                    "validate-only",
                    side.checked(
                        key,
                        v,
                        "validate-only",
                        &alter_of(2, topic, true, &[("cleanup.policy", Some("compact"))]),
                        error_of(topic, 0),
                    ),
                ),
                (
                    "bad-value",
                    side.checked(
                        key,
                        v,
                        "bad-value",
                        &alter(&[("cleanup.policy", Some("sometimes"))]),
                        error_of(topic, INVALID_CONFIG),
                    ),
                ),
                (
                    "null-value",
                    side.checked(
                        key,
                        v,
                        "null-value",
                        &alter(&[("cleanup.policy", None)]),
                        error_of(topic, INVALID_REQUEST),
                    ),
                ),
                (
                    "unchanged",
                    side.checked(
                        describe_key,
                        describe_v,
                        "unchanged",
                        &describe,
                        configs_are([("delete", true), ("3000000", false)]),
                    ),
                ),
                (
                    "unknown-topic",
                    side.checked(
                        key,
                        v,
                        "unknown-topic",
                        &alter_of(2, "nope", false, &[("cleanup.policy", Some("compact"))]),
                        error_of("nope", UNKNOWN_TOPIC_OR_PARTITION),
                    ),
                ),
                (
                    "unauthorized",
                    side.checked(
                        key,
                        v,
                        "unauthorized",
                        &alter_of(2, SECRET, false, &[("cleanup.policy", Some("compact"))]),
                        error_of(SECRET, TOPIC_AUTHORIZATION_FAILED),
                    ),
                ),
                (
                    "broker-logger",
                    side.checked(
                        key,
                        v,
                        "broker-logger",
                        &alter_of(8, "1", false, &[("kafka", Some("DEBUG"))]),
                        error_of("1", INVALID_REQUEST),
                    ),
                ),
            ]
        }
        ApiKey::DescribeGroups => {
            let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(name("nobody"))]);
            vec![(
                "unknown-group",
                side.exchange::<_, DescribeGroupsResponse>(key, v, &req),
            )]
        }
        ApiKey::ListGroups => vec![(
            "none",
            side.exchange::<_, ListGroupsResponse>(key, v, &ListGroupsRequest::default()),
        )],
        ApiKey::OffsetFetch => {
            use kafka_protocol::messages::offset_fetch_request::{
                OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
            };
            let req = if v >= 8 {
                let mut t = OffsetFetchRequestTopics::default().with_partition_indexes(vec![0]);
                if v >= 10 {
                    t = t.with_topic_id(side.topic_id);
                } else {
                    t = t.with_name(TopicName(name(TOPIC)));
                }
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(name("nobody")))
                    .with_topics(Some(vec![t]))])
            } else {
                OffsetFetchRequest::default()
                    .with_group_id(GroupId(name("nobody")))
                    .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                        .with_name(TopicName(name(TOPIC)))
                        .with_partition_indexes(vec![0])]))
            };
            // A group that never committed: no error, and offset -1 (none).
            vec![(
                "unknown-group",
                side.checked(
                    key,
                    v,
                    "unknown-group",
                    &req,
                    |r: &OffsetFetchResponse, own| {
                        let offsets: Vec<(i16, i64)> = if v >= 8 {
                            let Some(g) = own.only("groups", &r.groups) else {
                                return;
                            };
                            own.eq("the group's error_code", g.error_code, 0);
                            g.topics
                                .iter()
                                .flat_map(|t| &t.partitions)
                                .map(|p| (p.error_code, p.committed_offset))
                                .collect()
                        } else {
                            if v >= 2 {
                                own.eq("error_code", r.error_code, 0);
                            }
                            r.topics
                                .iter()
                                .flat_map(|t| &t.partitions)
                                .map(|p| (p.error_code, p.committed_offset))
                                .collect()
                        };
                        own.eq(
                            "(error_code, committed_offset) of each partition",
                            offsets,
                            vec![(0, -1)],
                        );
                    },
                ),
            )]
        }
        ApiKey::InitProducerId => {
            // An idempotent producer's (no transactional id), and one whose transactional id
            // is empty (the request's default): INVALID_REQUEST, as Kafka's producer has it.
            let idempotent = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000);
            let empty = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
            vec![
                (
                    "idempotent",
                    side.checked(
                        key,
                        v,
                        "idempotent",
                        &idempotent,
                        |r: &InitProducerIdResponse, own| {
                            own.eq("error_code", r.error_code, 0);
                            own.that("a producer id", r.producer_id.0 >= 0);
                            own.eq("producer_epoch", r.producer_epoch, 0);
                        },
                    ),
                ),
                (
                    "empty-transactional-id",
                    side.checked(
                        key,
                        v,
                        "empty-transactional-id",
                        &empty,
                        |r: &InitProducerIdResponse, own| {
                            own.eq("error_code", r.error_code, INVALID_REQUEST);
                            own.eq("producer_id", r.producer_id.0, -1);
                        },
                    ),
                ),
            ]
        }
        ApiKey::DescribeCluster => vec![(
            "cluster",
            side.exchange::<_, DescribeClusterResponse>(key, v, &DescribeClusterRequest::default()),
        )],
        ApiKey::CreatePartitions => {
            use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
            let req = CreatePartitionsRequest::default()
                .with_timeout_ms(10_000)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(TopicName(name(TOPIC)))
                    .with_count(1)]);
            vec![(
                "fewer",
                side.checked(
                    key,
                    v,
                    "fewer",
                    &req,
                    |r: &CreatePartitionsResponse, own| {
                        if let Some(t) = own.only("results", &r.results) {
                            own.eq("name", t.name.0.as_str(), TOPIC);
                            own.eq("error_code", t.error_code, INVALID_PARTITIONS);
                        }
                    },
                ),
            )]
        }
        ApiKey::DescribeAcls => {
            // Every binding (a default filter names type UNKNOWN, which Kafka refuses by
            // closing the connection; and its name, principal and host filters are empty
            // strings, which match only bindings of those: "none-matching").
            const ANY: i8 = 1;
            let mut none_matching = DescribeAclsRequest::default()
                .with_resource_type_filter(ANY)
                .with_operation(ANY)
                .with_permission_type(ANY);
            if v >= 1 {
                none_matching = none_matching.with_pattern_type_filter(ANY);
            }
            let any = none_matching
                .clone()
                .with_resource_name_filter(None)
                .with_principal_filter(None)
                .with_host_filter(None);
            // The one binding set up: every operation on SECRET denied to User:ANONYMOUS.
            vec![
                (
                    "none-matching",
                    side.checked(
                        key,
                        v,
                        "none-matching",
                        &none_matching,
                        |r: &DescribeAclsResponse, own| {
                            own.eq("error_code", r.error_code, 0);
                            own.that("no resources", r.resources.is_empty());
                        },
                    ),
                ),
                (
                    "any",
                    side.checked(key, v, "any", &any, |r: &DescribeAclsResponse, own| {
                        own.eq("error_code", r.error_code, 0);
                        let Some(res) = own.only("resources", &r.resources) else {
                            return;
                        };
                        own.eq(
                            "resource",
                            (res.resource_type, res.resource_name.as_str()),
                            (2, SECRET),
                        );
                        if v >= 1 {
                            own.eq("pattern_type (LITERAL)", res.pattern_type, 3);
                        }
                        if let Some(acl) = own.only("acls", &res.acls) {
                            own.eq(
                                "(principal, host, operation, permission)",
                                (
                                    acl.principal.as_str(),
                                    acl.host.as_str(),
                                    acl.operation,
                                    acl.permission_type,
                                ),
                                ("User:ANONYMOUS", "*", 2, 2),
                            );
                        }
                    }),
                ),
            ]
        }
        ApiKey::AddPartitionsToTxn => {
            use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
            let (pid, stale) = stale_transactional_epoch(side);
            let req = AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(name(TXN_ID)))
                .with_v3_and_below_producer_id(ProducerId(pid))
                .with_v3_and_below_producer_epoch(stale)
                .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(name(TOPIC)))
                    .with_partitions(vec![0])]);
            vec![(
                "stale-epoch",
                side.checked(
                    key,
                    v,
                    "stale-epoch",
                    &req,
                    |r: &AddPartitionsToTxnResponse, own| {
                        own.eq("error_code", r.error_code, 0);
                        let codes: Vec<i16> = r
                            .results_by_topic_v3_and_below
                            .iter()
                            .flat_map(|t| &t.results_by_partition)
                            .map(|p| p.partition_error_code)
                            .collect();
                        if v <= 3 {
                            own.eq("the partition's error code", codes, vec![fenced(v)]);
                        } else {
                            // v4 on batches transactions and reads none of the v3 fields.
                            own.that(
                                "no results",
                                codes.is_empty() && r.results_by_transaction.is_empty(),
                            );
                        }
                    },
                ),
            )]
        }
        ApiKey::EndTxn => {
            let (pid, stale) = stale_transactional_epoch(side);
            let req = EndTxnRequest::default()
                .with_transactional_id(TransactionalId(name(TXN_ID)))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(stale)
                .with_committed(true);
            vec![(
                "stale-epoch",
                side.checked(key, v, "stale-epoch", &req, |r: &EndTxnResponse, own| {
                    own.eq("error_code", r.error_code, fenced(v));
                }),
            )]
        }
        ApiKey::OffsetCommit => {
            use kafka_protocol::messages::offset_commit_request::{
                OffsetCommitRequestPartition, OffsetCommitRequestTopic,
            };
            let mut t = OffsetCommitRequestTopic::default().with_partitions(vec![
                OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1),
            ]);
            if v >= 10 {
                t = t.with_topic_id(side.topic_id);
            } else {
                t = t.with_name(TopicName(name(TOPIC)));
            }
            // A member of a generation of a group that does not exist: a stale member.
            let req = OffsetCommitRequest::default()
                .with_group_id(GroupId(name("nobody")))
                .with_generation_id_or_member_epoch(3)
                .with_member_id(name("gone"))
                .with_topics(vec![t]);
            // A commit to a group that does not exist by a member of a generation: from v9
            // GROUP_ID_NOT_FOUND, before it ILLEGAL_GENERATION.
            let want = if v >= 9 {
                GROUP_ID_NOT_FOUND
            } else {
                ILLEGAL_GENERATION
            };
            vec![(
                "unknown-member",
                side.checked(
                    key,
                    v,
                    "unknown-member",
                    &req,
                    |r: &OffsetCommitResponse, own| {
                        let codes: Vec<i16> = r
                            .topics
                            .iter()
                            .flat_map(|t| &t.partitions)
                            .map(|p| p.error_code)
                            .collect();
                        own.eq("the partition's error code", codes, vec![want]);
                    },
                ),
            )]
        }
        ApiKey::Heartbeat => {
            let req = HeartbeatRequest::default()
                .with_group_id(GroupId(name("nobody")))
                .with_generation_id(3)
                .with_member_id(name("gone"));
            vec![(
                "unknown-member",
                side.checked(
                    key,
                    v,
                    "unknown-member",
                    &req,
                    |r: &HeartbeatResponse, own| {
                        own.eq("error_code", r.error_code, UNKNOWN_MEMBER_ID);
                    },
                ),
            )]
        }
        ApiKey::DescribeTopicPartitions => describe_topic_partitions(side, key, v),
        _ => vec![("default", default_exchange(side, key, v))],
    }
}

/// Client telemetry (KIP-714), which neither broker advertises (Kafka 4.4 advertises it only
/// with a client-metrics receiver, and ringlog has none) but both answer: a known client's
/// subscription (empty: no metric requested), a new client's (its new id and the
/// subscription id made from it are blanked), a push with the subscription id the client was
/// given, one with another, one from the reserved id zero, and one with an unknown compression
/// type. Each client id is used once (Kafka throttles a client's second push in an interval).
fn telemetry_scenarios(side: &mut Side) -> Vec<(ApiKey, &'static str, Answer)> {
    let (get_key, push_key) = (ApiKey::GetTelemetrySubscriptions, ApiKey::PushTelemetry);
    let known = Uuid::from_u128(0x7269_6e67_6c6f_6700_0000_0000_0000_0001);
    let stranger = Uuid::from_u128(0x7269_6e67_6c6f_6700_0000_0000_0000_0002);
    let compressing = Uuid::from_u128(0x7269_6e67_6c6f_6700_0000_0000_0000_0003);
    let get_of = |id: Uuid| GetTelemetrySubscriptionsRequest::default().with_client_instance_id(id);
    let push_of = |id: Uuid, subscription: i32| {
        PushTelemetryRequest::default()
            .with_client_instance_id(id)
            .with_subscription_id(subscription)
            .with_metrics(Bytes::from_static(b"not read"))
    };
    let subscription_of = |r: &Answer| -> i32 {
        r.as_ref()
            .ok()
            .and_then(|s| s.split("subscription_id: ").nth(1))
            .and_then(|s| s.split(|c: char| c != '-' && !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    let empty_subscription = |id: Option<Uuid>| {
        move |r: &GetTelemetrySubscriptionsResponse, own: &mut Own| {
            own.eq("error_code", r.error_code, 0);
            match id {
                Some(id) => own.eq("client_instance_id", r.client_instance_id, id),
                None => own.that("a new client id", !r.client_instance_id.is_nil()),
            }
            own.that("no metric requested", r.requested_metrics.is_empty());
            own.eq("push_interval_ms", r.push_interval_ms, 300_000);
            own.eq("telemetry_max_bytes", r.telemetry_max_bytes, 1 << 20);
        }
    };
    let code_of = |want: i16| {
        move |r: &PushTelemetryResponse, own: &mut Own| own.eq("error_code", r.error_code, want)
    };
    let subscribed = side.checked(
        get_key,
        0,
        "known-client",
        &get_of(known),
        empty_subscription(Some(known)),
    );
    let new_client = side
        .checked(
            get_key,
            0,
            "new-client",
            &get_of(Uuid::nil()),
            empty_subscription(None),
        )
        .map(|a| blank_field(&blank_field(&a, "client_instance_id"), "subscription_id"));
    let subscription = subscription_of(&subscribed);
    let accepted = side.checked(
        push_key,
        0,
        "accepted",
        &push_of(known, subscription),
        code_of(0),
    );
    // Another client's subscription id is not this one's (they differ in the client id's hash).
    let unknown = side.checked(
        push_key,
        0,
        "unknown-subscription",
        &push_of(stranger, subscription),
        code_of(UNKNOWN_SUBSCRIPTION_ID),
    );
    let reserved = side.checked(
        push_key,
        0,
        "reserved-client-id",
        &push_of(Uuid::nil(), subscription),
        code_of(INVALID_REQUEST),
    );
    let before = side.checked(
        get_key,
        0,
        "before-compression",
        &get_of(compressing),
        empty_subscription(Some(compressing)),
    );
    let compression = side.checked(
        push_key,
        0,
        "unknown-compression",
        &push_of(compressing, subscription_of(&before)).with_compression_type(9),
        code_of(UNSUPPORTED_COMPRESSION_TYPE),
    );
    vec![
        (get_key, "known-client", subscribed),
        (get_key, "new-client", new_client),
        (push_key, "accepted", accepted),
        (push_key, "unknown-subscription", unknown),
        (push_key, "reserved-client-id", reserved),
        (get_key, "before-compression", before),
        (push_key, "unknown-compression", compression),
    ]
}

/// The topic the DescribeTopicPartitions scenarios page through beside [`TOPIC`] (its name
/// sorts right after TOPIC's), with [`PAGED_PARTITIONS`] partitions.
const PAGED: &str = "diff-paged";
const PAGED_PARTITIONS: i32 = 3;
/// Every operation Kafka lists for a topic (KIP-430 bits READ 3, WRITE 4, CREATE 5, DELETE 6,
/// ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11): what a topic no ACL names
/// allows this test's client.
const ALL_TOPIC_OPERATIONS: i32 = 0b1101_1111_1000;

/// A topic of a DescribeTopicPartitions answer: its name, error code and partition indexes.
type Described = (String, i16, Vec<i32>);

fn described(r: &DescribeTopicPartitionsResponse) -> Vec<Described> {
    r.topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            let parts = t.partitions.iter().map(|p| p.partition_index).collect();
            (name, t.error_code, parts)
        })
        .collect()
}

/// DescribeTopicPartitions (KIP-966): the topics named (out of order, with an unknown one and
/// [`SECRET`]) a page at a time, the page after it from its cursor, a page that ends with a
/// topic, an unknown topic, a refused one, and a cursor at a topic not named.
fn describe_topic_partitions(side: &mut Side, key: ApiKey, v: i16) -> Vec<(&'static str, Answer)> {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(name(PAGED)))
            .with_num_partitions(PAGED_PARTITIONS)
            .with_replication_factor(1)]);
    let created = side.call::<_, CreateTopicsResponse>(ApiKey::CreateTopics, 7, &create);
    assert!(
        matches!(&created, Ok(r) if r.topics.iter().all(|t| t.error_code == 0)),
        "{}: CreateTopics {PAGED}: {created:?}",
        side.name
    );
    // Until every partition has a leader (Kafka's creation finishes after its answer).
    let ready = metadata_until(side, PAGED, |t| {
        t.error_code == 0
            && t.partitions.len() == PAGED_PARTITIONS as usize
            && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
    });
    assert!(
        matches!(&ready, Ok(m) if m.topics[0].error_code == 0),
        "{}: {PAGED} has no leaders: {ready:?}",
        side.name
    );
    let request = |names: &[&str], limit: i32, cursor: Option<(&str, i32)>| {
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                names
                    .iter()
                    .map(|n| TopicRequest::default().with_name(TopicName(name(n))))
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                Cursor::default()
                    .with_topic_name(TopicName(name(t)))
                    .with_partition_index(p)
            }))
    };
    let names = [SECRET, "nope", PAGED, TOPIC];
    let topic_id = side.topic_id;
    // The answer lists `want` and its cursor is `next`; each topic found has its id, its
    // operations and its partitions (one replica, the leader, in sync; epoch 0; empty ELRs);
    // the others have no id, and only an unknown one has operations.
    let expect = |want: Vec<(&'static str, i16, Vec<i32>)>, next: Option<(&'static str, i32)>| {
        move |r: &DescribeTopicPartitionsResponse, own: &mut Own| {
            let want: Vec<Described> = want
                .into_iter()
                .map(|(n, code, parts)| (n.to_string(), code, parts))
                .collect();
            own.eq("topics (name, error_code, partitions)", described(r), want);
            let cursor = r
                .next_cursor
                .as_ref()
                .map(|c| (c.topic_name.to_string(), c.partition_index));
            own.eq("next_cursor", cursor, next.map(|(t, p)| (t.to_string(), p)));
            for t in &r.topics {
                let n = t.name.as_ref().map_or("", |n| n.as_str());
                own.eq(&format!("{n}'s is_internal"), t.is_internal, false);
                if t.error_code != 0 {
                    own.eq(&format!("{n}'s topic_id"), t.topic_id, Uuid::nil());
                    // An unknown topic's operations are listed; a refused one's are not.
                    let ops = if t.error_code == UNKNOWN_TOPIC_OR_PARTITION {
                        ALL_TOPIC_OPERATIONS
                    } else {
                        i32::MIN
                    };
                    own.eq(
                        &format!("{n}'s operations"),
                        t.topic_authorized_operations,
                        ops,
                    );
                    continue;
                }
                own.that(&format!("{n} has a topic id"), !t.topic_id.is_nil());
                if n == TOPIC {
                    own.eq("the topic id", t.topic_id, topic_id);
                }
                own.eq(
                    &format!("{n}'s operations"),
                    t.topic_authorized_operations,
                    ALL_TOPIC_OPERATIONS,
                );
                for p in &t.partitions {
                    let at = format!("{n}-{}", p.partition_index);
                    let leader = p.leader_id;
                    own.eq(&format!("{at}'s error_code"), p.error_code, 0);
                    own.that(&format!("{at} led"), leader.0 >= 0);
                    own.eq(&format!("{at}'s leader_epoch"), p.leader_epoch, 0);
                    own.eq(&format!("{at}'s replicas"), &p.replica_nodes, &vec![leader]);
                    own.eq(&format!("{at}'s isr"), &p.isr_nodes, &vec![leader]);
                    own.that(
                        &format!("{at} has no offline replica"),
                        p.offline_replicas.is_empty(),
                    );
                    let empty = Some(Vec::new());
                    own.eq(
                        &format!("{at}'s eligible leaders"),
                        &p.eligible_leader_replicas,
                        &empty,
                    );
                    own.eq(&format!("{at}'s last known ELR"), &p.last_known_elr, &empty);
                }
            }
        }
    };
    const REFUSED: i16 = TOPIC_AUTHORIZATION_FAILED;
    let scenarios: [(&'static str, DescribeTopicPartitionsRequest, _); 6] = [
        // Three partitions: TOPIC's two and the first of PAGED; SECRET refused after them.
        (
            "first-page",
            request(&names, 3, None),
            expect(
                vec![
                    (TOPIC, 0, vec![0, 1]),
                    (PAGED, 0, vec![0]),
                    (SECRET, REFUSED, vec![]),
                ],
                Some((PAGED, 1)),
            ),
        ),
        // From the cursor: the rest of PAGED, the unknown topic, SECRET again; no cursor.
        (
            "next-page",
            request(&names, 3, Some((PAGED, 1))),
            expect(
                vec![
                    (PAGED, 0, vec![1, 2]),
                    ("nope", UNKNOWN_TOPIC_OR_PARTITION, vec![]),
                    (SECRET, REFUSED, vec![]),
                ],
                None,
            ),
        ),
        // The limit ends with TOPIC: the cursor is at PAGED's first partition.
        (
            "page-ends-with-a-topic",
            request(&names, 2, None),
            expect(
                vec![(TOPIC, 0, vec![0, 1]), (SECRET, REFUSED, vec![])],
                Some((PAGED, 0)),
            ),
        ),
        (
            "unknown-topic",
            request(&["nope"], 10, None),
            expect(vec![("nope", UNKNOWN_TOPIC_OR_PARTITION, vec![])], None),
        ),
        (
            "unauthorized",
            request(&[SECRET], 10, None),
            expect(vec![(SECRET, REFUSED, vec![])], None),
        ),
        // A cursor at a topic the request does not name: every topic named is refused.
        (
            "cursor-not-named",
            request(&[TOPIC], 10, Some(("nope", 0))),
            expect(vec![(TOPIC, INVALID_REQUEST, vec![])], None),
        ),
    ];
    scenarios
        .into_iter()
        .map(|(scenario, req, check)| (scenario, side.checked(key, v, scenario, &req, check)))
        .collect()
}

/// Three records whose batch fails its CRC (a value byte flipped after it was sealed).
fn corrupt_records() -> Bytes {
    let mut b = three_records().to_vec();
    let last = b.len() - 1;
    b[last] ^= 0xff;
    Bytes::from(b)
}

/// The error for a producer epoch a newer one has fenced: PRODUCER_FENCED, which Kafka
/// answers as INVALID_PRODUCER_EPOCH before v2 of AddPartitionsToTxn and EndTxn (older
/// clients do not know it).
fn fenced(v: i16) -> i16 {
    if v < 2 {
        INVALID_PRODUCER_EPOCH
    } else {
        PRODUCER_FENCED
    }
}

/// The one partition of a Produce answer (one topic, one partition).
fn produced_partition<'r>(
    r: &'r ProduceResponse,
    own: &mut Own,
) -> Option<&'r produce_response::PartitionProduceResponse> {
    let t = own.only("topics", &r.responses)?;
    let p = own.only("partitions", &t.partition_responses)?;
    own.eq("partition index", p.index, 0);
    Some(p)
}

/// The one partition of a Fetch answer, which must be partition 0 of `topic` (named by `id`
/// from v13).
fn fetched_partition<'r>(
    r: &'r FetchResponse,
    v: i16,
    topic: &str,
    id: Uuid,
    own: &mut Own,
) -> Option<&'r fetch_response::PartitionData> {
    let t = own.only("topics", &r.responses)?;
    if v >= 13 {
        own.eq("topic_id", t.topic_id, id);
    } else {
        own.eq("topic", t.topic.0.as_str(), topic);
    }
    let p = own.only("partitions", &t.partitions)?;
    own.eq("partition_index", p.partition_index, 0);
    Some(p)
}

/// The record batches of a fetched partition hold exactly the records of offsets
/// `from..to` of TOPIC's partition 0, as the `append` scenarios produced them: three a
/// batch, keys `k1..k3`, values `v1..v3`, timestamps 1..=3.
fn check_records(p: &fetch_response::PartitionData, from: i64, to: i64, own: &mut Own) {
    use kafka_protocol::records::RecordBatchDecoder;
    let mut bytes = p.records.clone().unwrap_or_default();
    let records = match RecordBatchDecoder::decode_all(&mut bytes) {
        Ok(sets) => sets.into_iter().flat_map(|s| s.records).collect::<Vec<_>>(),
        Err(e) => return own.fail(format!("undecodable records: {e}")),
    };
    let got: Vec<(i64, Option<String>, Option<String>, i64)> = records
        .iter()
        .map(|r| {
            let text =
                |b: &Option<Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
            (r.offset, text(&r.key), text(&r.value), r.timestamp)
        })
        .collect();
    let want: Vec<(i64, Option<String>, Option<String>, i64)> = (from..to)
        .map(|o| {
            let i = o % 3 + 1;
            (o, Some(format!("k{i}")), Some(format!("v{i}")), i)
        })
        .collect();
    own.eq("records (offset, key, value, timestamp)", got, want);
    own.that(
        "plain records (no control, transactional or headers)",
        records
            .iter()
            .all(|r| !r.control && !r.transactional && r.headers.is_empty()),
    );
}

/// The producer id of [`TXN_ID`] and an epoch of it that a newer InitProducerId has fenced.
fn stale_transactional_epoch(side: &mut Side) -> (i64, i16) {
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(name(TXN_ID))))
        .with_transaction_timeout_ms(60_000);
    // Retried while the coordinator loads (COORDINATOR_LOAD_IN_PROGRESS, Kafka's first
    // moments) or finishes the previous epoch's work (CONCURRENT_TRANSACTIONS).
    const RETRIABLE: [i16; 3] = [14, 15, 51];
    let mut epochs = Vec::new();
    let mut tries = 0;
    while epochs.len() < 2 {
        let r: InitProducerIdResponse = side
            .call(ApiKey::InitProducerId, 4, &init)
            .unwrap_or_else(|e| panic!("{}: InitProducerId: {e}", side.name));
        tries += 1;
        if RETRIABLE.contains(&r.error_code) && tries < 100 {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        assert_eq!(r.error_code, 0, "{}: InitProducerId {r:?}", side.name);
        epochs.push((r.producer_id.0, r.producer_epoch));
    }
    assert_eq!(epochs[0].0, epochs[1].0, "{}: {epochs:?}", side.name);
    assert!(epochs[0].1 < epochs[1].1, "{}: {epochs:?}", side.name);
    epochs[0]
}

/// Creates the topics and reads their ids (Metadata v12), denies every operation on
/// [`SECRET`] to `User:ANONYMOUS`, and waits for both coordinators and for producer ids.
fn set_up(side: &mut Side) {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let mut s = TcpStream::connect(&side.addr).unwrap();
    s.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
    let r: CreateTopicsResponse = support::wire::call(
        &mut s,
        19,
        7,
        1,
        &CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(
                [(TOPIC, 2), (SECRET, 1)]
                    .map(|(t, n)| {
                        CreatableTopic::default()
                            .with_name(TopicName(name(t)))
                            .with_num_partitions(n)
                            .with_replication_factor(1)
                    })
                    .to_vec(),
            ),
    );
    assert!(
        r.topics.iter().all(|t| t.error_code == 0),
        "{}: {r:?}",
        side.name
    );
    // Metadata until both topics have leaders (Kafka takes a moment).
    let mut ready = false;
    for _ in 0..100 {
        let m: MetadataResponse = support::wire::call(
            &mut s,
            3,
            12,
            2,
            &MetadataRequest::default().with_topics(Some(
                [TOPIC, SECRET]
                    .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(name(t)))))
                    .to_vec(),
            )),
        );
        ready = m.topics.len() == 2
            && m.topics.iter().all(|t| {
                t.error_code == 0
                    && !t.partitions.is_empty()
                    && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
            });
        if ready {
            for t in &m.topics {
                match t.name.as_ref().map(|n| n.0.as_str()) {
                    Some(TOPIC) => side.topic_id = t.topic_id,
                    _ => side.secret_id = t.topic_id,
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready, "{}: {TOPIC} and {SECRET} have no leaders", side.name);
    const TOPIC_RESOURCE: i8 = 2;
    const LITERAL: i8 = 3;
    const ALL: i8 = 2;
    const DENY: i8 = 2;
    let r: CreateAclsResponse = support::wire::call(
        &mut s,
        30,
        3,
        3,
        &CreateAclsRequest::default().with_creations(vec![AclCreation::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(name(SECRET))
            .with_resource_pattern_type(LITERAL)
            .with_principal(name("User:ANONYMOUS"))
            .with_host(name("*"))
            .with_operation(ALL)
            .with_permission_type(DENY)]),
    );
    assert!(
        r.results.iter().all(|x| x.error_code == 0),
        "{}: {r:?}",
        side.name
    );
    warm_up_coordinator(side, &mut s, 0, "diff-group");
    warm_up_coordinator(side, &mut s, 1, TXN_ID);
    // An idempotent InitProducerId until one answers: Kafka answers
    // COORDINATOR_LOAD_IN_PROGRESS until its first block of producer ids has come.
    for _ in 0..300 {
        let r: InitProducerIdResponse = support::wire::call(
            &mut s,
            22,
            4,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
        );
        if r.error_code == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{}: no producer id", side.name);
}

/// FindCoordinator until the coordinator of `key` (`key_type` 0: a group, 1: a transactional
/// id) answers: Kafka creates `__consumer_offsets` and `__transaction_state` at the first
/// lookup and answers COORDINATOR_NOT_AVAILABLE meanwhile; the scenarios then compare the
/// coordinators' answers, not a coordinator still loading.
fn warm_up_coordinator(side: &Side, s: &mut TcpStream, key_type: i8, key: &str) {
    for _ in 0..300 {
        let r: FindCoordinatorResponse = support::wire::call(
            s,
            10,
            3,
            3,
            &FindCoordinatorRequest::default()
                .with_key(name(key))
                .with_key_type(key_type),
        );
        if r.error_code == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{}: no coordinator for {key}", side.name);
}

/// A short line-by-line account of where two normalised answers part.
fn first_difference(a: &str, b: &str) -> String {
    let at = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    let from = at.saturating_sub(120);
    let clip = |s: &str| {
        s.get(from..(at + 200).min(s.len()))
            .unwrap_or("")
            .to_string()
    };
    format!("ringlog: …{}…\n      kafka:   …{}…", clip(a), clip(b))
}

/// The differences between the two brokers' answers: those `docs/kafka-differences.md`
/// lists (id → versions) and those it does not (id → versions, and the first one's detail).
struct Differences {
    listed: std::collections::BTreeSet<String>,
    expected: BTreeMap<String, Vec<i16>>,
    unlisted: BTreeMap<String, (Vec<i16>, String)>,
}

impl Differences {
    /// Compares ringlog's answer `ra` with Kafka's `rb` to scenario `scenario` of `api` at
    /// version `v`; a difference is kept under `protocol.<Api>.<scenario>`.
    fn note(&mut self, api: ApiKey, v: i16, scenario: &str, ra: Answer, rb: Answer) {
        if ra == rb {
            return;
        }
        let id = format!("protocol.{api:?}.{scenario}");
        let detail = match (&ra, &rb) {
            (Ok(x), Ok(y)) => first_difference(x, y),
            _ => format!("ringlog: {ra:?}\n      kafka:   {rb:?}"),
        };
        if self.listed.contains(&id) {
            self.expected.entry(id).or_default().push(v);
        } else {
            let e = self
                .unlisted
                .entry(id)
                .or_insert_with(|| (Vec::new(), detail));
            e.0.push(v);
        }
    }
}

#[test]
fn every_api_ringlog_advertises_answers_as_kafka_does() {
    let Some(peer) = KafkaPeer::start(PEER_OPTIONS) else {
        return;
    };
    let broker = Broker::start(1);
    let ours = advertised(&broker.addr().to_string());
    let theirs = advertised(&peer.bootstrap());
    let mut sides = [
        Side {
            name: "ringlog",
            addr: broker.addr().to_string(),
            topic_id: Uuid::nil(),
            secret_id: Uuid::nil(),
            corr: 10,
            produced: 0,
            failures: Vec::new(),
        },
        Side {
            name: "kafka",
            addr: peer.bootstrap(),
            topic_id: Uuid::nil(),
            secret_id: Uuid::nil(),
            corr: 10,
            produced: 0,
            failures: Vec::new(),
        },
    ];
    for side in sides.iter_mut() {
        set_up(side);
    }
    let mut differences = Differences {
        listed: listed_differences(),
        expected: BTreeMap::new(),
        unlisted: BTreeMap::new(),
    };
    let mut compared = 0usize;
    let mut not_by_kafka = Vec::new();
    for (&key, &(min, max)) in &ours {
        let Ok(api) = ApiKey::try_from(key) else {
            continue;
        };
        // Produce with acks=0 has no answer: its scenario sends acks=-1.
        let Some(&(kmin, kmax)) = theirs.get(&key) else {
            not_by_kafka.push(format!("{api:?}"));
            continue;
        };
        let (cmin, cmax) = codec_versions(api);
        let (lo, hi) = (min.max(kmin).max(cmin), max.min(kmax).min(cmax));
        for v in lo..=hi {
            let [ours_side, theirs_side] = &mut sides;
            let a = scenarios(ours_side, api, v);
            let b = scenarios(theirs_side, api, v);
            compared += 1;
            for ((scenario, ra), (_, rb)) in a.into_iter().zip(b) {
                differences.note(api, v, scenario, ra, rb);
            }
        }
    }
    // Client telemetry: advertised by neither, answered by both.
    let telemetry = [
        ApiKey::GetTelemetrySubscriptions as i16,
        ApiKey::PushTelemetry as i16,
    ];
    let advertises = |versions: &BTreeMap<i16, (i16, i16)>| {
        Ok(format!(
            "{:?}",
            telemetry.map(|k| versions.contains_key(&k))
        ))
    };
    differences.note(
        ApiKey::ApiVersions,
        3,
        "telemetry-unadvertised",
        advertises(&ours),
        advertises(&theirs),
    );
    if telemetry.iter().any(|k| ours.contains_key(k)) {
        sides[0]
            .failures
            .push("ApiVersions advertises client telemetry, which ringlog does not receive".into());
    }
    let [ours_side, theirs_side] = &mut sides;
    let a = telemetry_scenarios(ours_side);
    let b = telemetry_scenarios(theirs_side);
    compared += 2;
    for ((api, scenario, ra), (_, _, rb)) in a.into_iter().zip(b) {
        differences.note(api, 0, scenario, ra, rb);
    }
    let Differences {
        expected, unlisted, ..
    } = differences;
    for (id, versions) in &expected {
        eprintln!("DIFF-EXPECTED {id} (versions {versions:?})");
    }
    for (id, (versions, detail)) in &unlisted {
        eprintln!("FAIL {id} (versions {versions:?})\n      {detail}");
    }
    eprintln!(
        "APIs ringlog advertises that Kafka 4.4 does not: {}",
        if not_by_kafka.is_empty() {
            "none".to_string()
        } else {
            not_by_kafka.join(", ")
        }
    );
    eprintln!(
        "compared {compared} (API, version) pairs; listed differences seen: {}; unlisted: {}",
        expected.len(),
        unlisted.len()
    );
    // ringlog on its own, beyond what equals Kafka: what the scenarios left behind, and the
    // effect of the operations the comparison does not make (a CreateTopics that creates,
    // DeleteRecords, DeleteTopics).
    let [ringlog, _] = &mut sides;
    assert!(
        ringlog.produced >= 3,
        "the Produce append scenario ran: {}",
        ringlog.produced
    );
    ringlog_effects(ringlog);
    for f in &ringlog.failures {
        eprintln!("OWN-FAIL {f}");
    }
    eprintln!(
        "ringlog's own answers: {} failed checks",
        ringlog.failures.len()
    );
    assert!(
        unlisted.is_empty(),
        "{} differences from Kafka 4.4 not listed in docs/kafka-differences.md: {:?}",
        unlisted.len(),
        unlisted.keys().collect::<Vec<_>>()
    );
    assert!(
        ringlog.failures.is_empty(),
        "{} checks of ringlog's own answers failed: {:#?}",
        ringlog.failures.len(),
        ringlog.failures
    );
}

/// A ListOffsets (v7) of one partition of TOPIC at `timestamp` (-2 earliest, -1 latest).
fn offsets_of(partition: i32, timestamp: i64) -> ListOffsetsRequest {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(name(TOPIC)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])])
}

/// The offset of the one partition of a ListOffsets answer, checked to have no error.
fn listed_offset(r: &ListOffsetsResponse, own: &mut Own) -> Option<i64> {
    let t = own.only("topics", &r.topics)?;
    let p = own.only("partitions", &t.partitions)?;
    own.eq("error_code", p.error_code, 0);
    Some(p.offset)
}

/// A Metadata (v12) of `topic` that creates nothing.
fn metadata_of(topic: &str) -> MetadataRequest {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(name(topic))))
        ]))
}

/// Metadata of `topic` on `side` until `done` holds of its one topic (Kafka's topic creation
/// and deletion finish after their answers; ringlog's may too), for up to ten seconds; the
/// last answer.
fn metadata_until(
    side: &mut Side,
    topic: &str,
    done: impl Fn(&metadata_response::MetadataResponseTopic) -> bool,
) -> Result<MetadataResponse, String> {
    let mut last = Err("no try".to_string());
    for _ in 0..100 {
        last = side.call::<_, MetadataResponse>(ApiKey::Metadata, 12, &metadata_of(topic));
        if matches!(&last, Ok(m) if m.topics.len() == 1 && done(&m.topics[0])) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    last
}

/// ringlog's own state after the comparison: partition 0 of TOPIC holds exactly the
/// records the `append` scenarios produced (and none of the corrupt batches'), the
/// validate-only CreateTopics created nothing, and a CreateTopics, a DeleteRecords and a
/// DeleteTopics have the effects the next requests see.
fn ringlog_effects(side: &mut Side) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    let n = side.produced;
    let topic_id = side.topic_id;
    let after = |what: &str| format!("after the comparison: {what}");

    // The appends, fetched whole.
    let req = fetch(side, 12, 0);
    let _ = side.checked(
        ApiKey::Fetch,
        12,
        &after("fetch of the appends"),
        &req,
        |r: &FetchResponse, own| {
            let Some(p) = fetched_partition(r, 12, TOPIC, topic_id, own) else {
                return;
            };
            own.eq("error_code", p.error_code, 0);
            own.eq("high_watermark", p.high_watermark, n);
            own.eq("log_start_offset", p.log_start_offset, 0);
            check_records(p, 0, n, own);
        },
    );
    // Their offsets: the log runs from 0 to the number of records produced.
    for (what, ts, want) in [("earliest", -2, 0), ("latest", -1, n)] {
        let _ = side.checked(
            ApiKey::ListOffsets,
            7,
            &after(&format!("ListOffsets {what} of partition 0")),
            &offsets_of(0, ts),
            |r: &ListOffsetsResponse, own| {
                if let Some(o) = listed_offset(r, own) {
                    own.eq("offset", o, want);
                }
            },
        );
    }
    // The validate-only CreateTopics scenarios created nothing.
    let _ = side.checked(
        ApiKey::Metadata,
        12,
        &after("Metadata of the validated topic"),
        &metadata_of("fresh"),
        |r: &MetadataResponse, own| {
            if let Some(t) = own.only("topics", &r.topics) {
                own.eq("error_code", t.error_code, UNKNOWN_TOPIC_OR_PARTITION);
            }
        },
    );

    // A CreateTopics that creates: a following Metadata lists the topic, three partitions.
    const CREATED: &str = "created";
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(name(CREATED)))
            .with_num_partitions(3)
            .with_replication_factor(1)]);
    let _ = side.checked(
        ApiKey::CreateTopics,
        7,
        &after("CreateTopics"),
        &create,
        |r: &CreateTopicsResponse, own| {
            if let Some(t) = own.only("topics", &r.topics) {
                own.eq("error_code", t.error_code, 0);
                own.eq("num_partitions", t.num_partitions, 3);
                own.that("a topic id", !t.topic_id.is_nil());
            }
        },
    );
    let m = metadata_until(side, CREATED, |t| {
        t.error_code == 0
            && t.partitions.len() == 3
            && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
    });
    let mut own = Own {
        at: after("Metadata after CreateTopics"),
        failures: &mut side.failures,
    };
    match &m {
        Ok(m) => {
            if let Some(t) = own.only("topics", &m.topics) {
                own.eq("error_code", t.error_code, 0);
                own.eq("name", t.name.as_ref().map(|n| n.0.as_str()), Some(CREATED));
                let indexes: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
                own.eq("partition indexes", indexes, vec![0, 1, 2]);
                own.that(
                    "every partition led",
                    t.partitions.iter().all(|p| p.leader_id.0 >= 0),
                );
            }
        }
        Err(e) => own.fail(format!("no answer: {e}")),
    }

    // DeleteRecords before offset 3 (the first append's batch): the log starts there.
    let delete = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(name(TOPIC)))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(3)])]);
    let _ = side.checked(
        ApiKey::DeleteRecords,
        2,
        &after("DeleteRecords before offset 3"),
        &delete,
        |r: &DeleteRecordsResponse, own| {
            let Some(t) = own.only("topics", &r.topics) else {
                return;
            };
            if let Some(p) = own.only("partitions", &t.partitions) {
                own.eq("error_code", p.error_code, 0);
                own.eq("low_watermark", p.low_watermark, 3);
            }
        },
    );
    let _ = side.checked(
        ApiKey::ListOffsets,
        7,
        &after("ListOffsets earliest after DeleteRecords"),
        &offsets_of(0, -2),
        |r: &ListOffsetsResponse, own| {
            if let Some(o) = listed_offset(r, own) {
                own.eq("offset", o, 3);
            }
        },
    );
    let req = fetch(side, 12, 0);
    let _ = side.checked(
        ApiKey::Fetch,
        12,
        &after("fetch of a deleted offset"),
        &req,
        |r: &FetchResponse, own| {
            if let Some(p) = fetched_partition(r, 12, TOPIC, topic_id, own) {
                own.eq("error_code", p.error_code, OFFSET_OUT_OF_RANGE);
            }
        },
    );
    let req = fetch(side, 12, 3);
    let _ = side.checked(
        ApiKey::Fetch,
        12,
        &after("fetch from the new log start"),
        &req,
        |r: &FetchResponse, own| {
            let Some(p) = fetched_partition(r, 12, TOPIC, topic_id, own) else {
                return;
            };
            own.eq("error_code", p.error_code, 0);
            own.eq("log_start_offset", p.log_start_offset, 3);
            own.eq("high_watermark", p.high_watermark, n);
            check_records(p, 3, n, own);
        },
    );

    // DeleteTopics: a following Metadata no longer knows the topic.
    let delete = DeleteTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(TopicName(name(CREATED))))
        ]);
    let _ = side.checked(
        ApiKey::DeleteTopics,
        6,
        &after("DeleteTopics"),
        &delete,
        |r: &DeleteTopicsResponse, own| {
            if let Some(t) = own.only("responses", &r.responses) {
                own.eq("name", t.name.as_ref().map(|n| n.0.as_str()), Some(CREATED));
                own.eq("error_code", t.error_code, 0);
            }
        },
    );
    let m = metadata_until(side, CREATED, |t| t.error_code != 0);
    let mut own = Own {
        at: after("Metadata after DeleteTopics"),
        failures: &mut side.failures,
    };
    match &m {
        Ok(m) => {
            if let Some(t) = own.only("topics", &m.topics) {
                own.eq("error_code", t.error_code, UNKNOWN_TOPIC_OR_PARTITION);
            }
        }
        Err(e) => own.fail(format!("no answer: {e}")),
    }
}
