//! Differential protocol checks: the same requests, over raw sockets, to ringlog and to the
//! reference peer (Apache Kafka 4.4, `support::peer`), for every API key ringlog advertises
//! at every version both brokers speak. Each answer is decoded, what legitimately differs is
//! blanked (node and cluster ids, topic ids, hosts and ports, timestamps, throttle times,
//! error messages, record bytes) and the two are compared field by field. A difference is
//! either fixed or listed, with its reason, in `docs/kafka-differences.md` under an id
//! `protocol.<Api>.<scenario>`; one that is not listed fails the test.
//!
//! Scenarios: a topic both brokers hold (`diff`, two partitions, three records in partition
//! 0), its metadata, produce, fetch, offsets, configs, and the error paths: an unknown topic,
//! an offset out of range, a topic that exists, a bad config, an unknown group, a corrupt
//! batch, a leader epoch the broker has not reached, a fenced producer epoch, a member of no
//! group, and a topic this client is not authorized for (`secret`: every operation denied to
//! `User:ANONYMOUS` by an ACL on both); every other API gets its default (empty) request.
//! Wrong-coordinator answers need more than one node: `peer_cluster_tools.rs` compares them.

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
}

/// The decoded and normalised answer, or why there was none.
type Answer = Result<String, String>;

impl Side {
    fn exchange<Req, Resp>(&mut self, key: ApiKey, version: i16, req: &Req) -> Answer
    where
        Req: Encodable + HeaderVersion,
        Resp: Decodable + HeaderVersion + std::fmt::Debug,
    {
        self.call::<Req, Resp>(key, version, req)
            .map(|resp| normalise(&format!("{resp:?}")))
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
            vec![
                (
                    "topic",
                    side.exchange::<_, MetadataResponse>(
                        key,
                        v,
                        &MetadataRequest::default().with_topics(Some(vec![topic(TOPIC)])),
                    ),
                ),
                (
                    "unknown-topic",
                    side.exchange::<_, MetadataResponse>(
                        key,
                        v,
                        &MetadataRequest::default().with_topics(Some(vec![topic("nope")])),
                    ),
                ),
                (
                    "unauthorized",
                    side.exchange::<_, MetadataResponse>(
                        key,
                        v,
                        &MetadataRequest::default().with_topics(Some(vec![topic(SECRET)])),
                    ),
                ),
            ]
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
            vec![
                (
                    "exists",
                    side.exchange::<_, CreateTopicsResponse>(key, v, &create(TOPIC, vec![])),
                ),
                (
                    "bad-config",
                    side.exchange::<_, CreateTopicsResponse>(key, v, &create("fresh", bad)),
                ),
                (
                    "validate-only",
                    side.exchange::<_, CreateTopicsResponse>(key, v, &create("fresh", vec![])),
                ),
            ]
        }
        ApiKey::Produce => {
            let ok = produce(side, v, TOPIC, three_records());
            let unknown = produce(side, v, "nope", three_records());
            let corrupt = produce(side, v, TOPIC, corrupt_records());
            let denied = produce(side, v, SECRET, three_records());
            vec![
                ("append", side.exchange::<_, ProduceResponse>(key, v, &ok)),
                (
                    "unknown-topic",
                    side.exchange::<_, ProduceResponse>(key, v, &unknown),
                ),
                (
                    "corrupt",
                    side.exchange::<_, ProduceResponse>(key, v, &corrupt),
                ),
                (
                    "unauthorized",
                    side.exchange::<_, ProduceResponse>(key, v, &denied),
                ),
            ]
        }
        ApiKey::Fetch => {
            let from_start = fetch(side, v, 0);
            let past_end = fetch(side, v, 1_000_000);
            let denied = fetch_of(side, v, SECRET, 0, -1);
            let mut answers = vec![
                (
                    "from-start",
                    side.exchange::<_, FetchResponse>(key, v, &from_start),
                ),
                (
                    "out-of-range",
                    side.exchange::<_, FetchResponse>(key, v, &past_end),
                ),
                (
                    "unauthorized",
                    side.exchange::<_, FetchResponse>(key, v, &denied),
                ),
            ];
            if v >= 9 {
                let ahead = fetch_of(side, v, TOPIC, 0, FUTURE_LEADER_EPOCH);
                answers.push((
                    "future-epoch",
                    side.exchange::<_, FetchResponse>(key, v, &ahead),
                ));
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
            let mut answers = vec![
                (
                    "earliest",
                    side.exchange::<_, ListOffsetsResponse>(key, v, &at(TOPIC, -2, -1)),
                ),
                (
                    "latest",
                    side.exchange::<_, ListOffsetsResponse>(key, v, &at(TOPIC, -1, -1)),
                ),
                (
                    "unauthorized",
                    side.exchange::<_, ListOffsetsResponse>(key, v, &at(SECRET, -1, -1)),
                ),
            ];
            if v >= 4 {
                let ahead = at(TOPIC, -1, FUTURE_LEADER_EPOCH);
                answers.push((
                    "future-epoch",
                    side.exchange::<_, ListOffsetsResponse>(key, v, &ahead),
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
                side.exchange::<_, FindCoordinatorResponse>(key, v, &req),
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
                    side.exchange::<_, DescribeConfigsResponse>(key, v, &of(TOPIC)),
                ),
                (
                    "unauthorized",
                    side.exchange::<_, DescribeConfigsResponse>(key, v, &of(SECRET)),
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
            vec![(
                "unknown-group",
                side.exchange::<_, OffsetFetchResponse>(key, v, &req),
            )]
        }
        ApiKey::InitProducerId => {
            let req = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
            vec![(
                "idempotent",
                side.exchange::<_, InitProducerIdResponse>(key, v, &req),
            )]
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
                side.exchange::<_, CreatePartitionsResponse>(key, v, &req),
            )]
        }
        ApiKey::DescribeAcls => {
            // Every binding (a default filter names type UNKNOWN, which Kafka refuses by
            // closing the connection).
            const ANY: i8 = 1;
            let mut req = DescribeAclsRequest::default()
                .with_resource_type_filter(ANY)
                .with_operation(ANY)
                .with_permission_type(ANY);
            if v >= 1 {
                req = req.with_pattern_type_filter(ANY);
            }
            vec![(
                "any",
                side.exchange::<_, DescribeAclsResponse>(key, v, &req),
            )]
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
                side.exchange::<_, AddPartitionsToTxnResponse>(key, v, &req),
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
                side.exchange::<_, EndTxnResponse>(key, v, &req),
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
            vec![(
                "unknown-member",
                side.exchange::<_, OffsetCommitResponse>(key, v, &req),
            )]
        }
        ApiKey::Heartbeat => {
            let req = HeartbeatRequest::default()
                .with_group_id(GroupId(name("nobody")))
                .with_generation_id(3)
                .with_member_id(name("gone"));
            vec![(
                "unknown-member",
                side.exchange::<_, HeartbeatResponse>(key, v, &req),
            )]
        }
        _ => vec![("default", default_exchange(side, key, v))],
    }
}

/// Three records whose batch fails its CRC (a value byte flipped after it was sealed).
fn corrupt_records() -> Bytes {
    let mut b = three_records().to_vec();
    let last = b.len() - 1;
    b[last] ^= 0xff;
    Bytes::from(b)
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
/// [`SECRET`] to `User:ANONYMOUS`, and waits for both coordinators.
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
        },
        Side {
            name: "kafka",
            addr: peer.bootstrap(),
            topic_id: Uuid::nil(),
            secret_id: Uuid::nil(),
            corr: 10,
        },
    ];
    for side in sides.iter_mut() {
        set_up(side);
    }
    let listed = listed_differences();
    let mut compared = 0usize;
    let mut expected: BTreeMap<String, Vec<i16>> = BTreeMap::new();
    let mut unlisted: BTreeMap<String, (Vec<i16>, String)> = BTreeMap::new();
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
                if ra == rb {
                    continue;
                }
                let id = format!("protocol.{api:?}.{scenario}");
                let detail = match (&ra, &rb) {
                    (Ok(x), Ok(y)) => first_difference(x, y),
                    _ => format!("ringlog: {ra:?}\n      kafka:   {rb:?}"),
                };
                if listed.contains(&id) {
                    expected.entry(id).or_default().push(v);
                } else {
                    let e = unlisted.entry(id).or_insert_with(|| (Vec::new(), detail));
                    e.0.push(v);
                }
            }
        }
    }
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
    // Every comparison also checks ringlog on its own: the topic's records are there.
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
    let f: FetchResponse = support::wire::call(&mut s, 1, 12, 3, &fetch(&sides[0], 12, 0));
    let p = &f.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert!(
        p.high_watermark >= 3,
        "the produced records: {}",
        p.high_watermark
    );
    assert!(
        unlisted.is_empty(),
        "{} differences from Kafka 4.4 not listed in docs/kafka-differences.md: {:?}",
        unlisted.len(),
        unlisted.keys().collect::<Vec<_>>()
    );
}
