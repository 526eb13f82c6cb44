//! Well-formed inputs for each target: the fuzzers start from these (`fuzz-seeds` writes them
//! to `fuzz/corpus/`), and the hostile-input tests build their crafted frames from the same
//! sample requests.

use std::io::Write;

use bytes::{Bytes, BytesMut};
use engine::batch::{self, HEADER_BYTES};
use engine::batch_encode::{encode_uncompressed, NewRecord};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// A small request of every API the broker serves, with one element in each array that
/// matters (so nested arrays have counts to lie about). `None` for an API with no sample.
pub fn sample_request(key: ApiKey) -> Option<RequestKind> {
    let records = Bytes::from(sample_batch(3, 0));
    Some(match key {
        ApiKey::Produce => RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(1_000)
                .with_topic_data(vec![produce_request::TopicProduceData::default()
                    .with_name(name("fuzz"))
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(records)),
                    ])]),
        ),
        ApiKey::Fetch => RequestKind::Fetch(
            FetchRequest::default()
                .with_max_wait_ms(10)
                .with_max_bytes(1 << 20)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic(name("fuzz"))
                    .with_partitions(vec![
                        fetch_request::FetchPartition::default().with_partition_max_bytes(1 << 20)
                    ])]),
        ),
        ApiKey::ListOffsets => {
            RequestKind::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
                list_offsets_request::ListOffsetsTopic::default()
                    .with_name(name("fuzz"))
                    .with_partitions(vec![Default::default()]),
            ]))
        }
        ApiKey::Metadata => {
            RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(name("fuzz"))),
            ])))
        }
        ApiKey::ApiVersions => RequestKind::ApiVersions(Default::default()),
        ApiKey::CreateTopics => {
            RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
                create_topics_request::CreatableTopic::default()
                    .with_name(name("fuzz-new"))
                    .with_num_partitions(1)
                    .with_replication_factor(1)
                    .with_assignments(vec![Default::default()])
                    .with_configs(vec![Default::default()]),
            ]))
        }
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(Default::default()),
        ApiKey::InitProducerId => RequestKind::InitProducerId(Default::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(
            DescribeConfigsRequest::default().with_resources(vec![Default::default()]),
        ),
        ApiKey::CreatePartitions => RequestKind::CreatePartitions(
            CreatePartitionsRequest::default().with_topics(vec![Default::default()]),
        ),
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_configs(vec![Default::default()]),
            ]),
        ),
        ApiKey::AlterConfigs => {
            RequestKind::AlterConfigs(AlterConfigsRequest::default().with_resources(vec![
                alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("fuzz"))
                    .with_configs(vec![alter_configs_request::AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("retention.ms"))
                        .with_value(Some(StrBytes::from_static_str("60000")))]),
            ]))
        }
        ApiKey::GetTelemetrySubscriptions => {
            RequestKind::GetTelemetrySubscriptions(Default::default())
        }
        ApiKey::PushTelemetry => RequestKind::PushTelemetry(
            PushTelemetryRequest::default().with_metrics(Bytes::from_static(b"metrics")),
        ),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(Default::default()),
        ApiKey::JoinGroup => RequestKind::JoinGroup(
            JoinGroupRequest::default().with_protocols(vec![Default::default()]),
        ),
        ApiKey::SyncGroup => RequestKind::SyncGroup(
            SyncGroupRequest::default().with_assignments(vec![Default::default()]),
        ),
        ApiKey::Heartbeat => RequestKind::Heartbeat(Default::default()),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(
            LeaveGroupRequest::default().with_members(vec![Default::default()]),
        ),
        ApiKey::OffsetCommit => {
            RequestKind::OffsetCommit(OffsetCommitRequest::default().with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_partitions(vec![Default::default()]),
            ]))
        }
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(Default::default()),
        ApiKey::ListGroups => RequestKind::ListGroups(Default::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(Default::default()),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(Default::default()),
        ApiKey::OffsetDelete => {
            RequestKind::OffsetDelete(OffsetDeleteRequest::default().with_topics(vec![
                offset_delete_request::OffsetDeleteRequestTopic::default()
                    .with_name(name("fuzz"))
                    .with_partitions(vec![Default::default()]),
            ]))
        }
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(Default::default()),
        ApiKey::DescribeTopicPartitions => RequestKind::DescribeTopicPartitions(
            DescribeTopicPartitionsRequest::default()
                .with_topics(vec![
                    describe_topic_partitions_request::TopicRequest::default()
                        .with_name(name("fuzz")),
                ])
                .with_response_partition_limit(1)
                .with_cursor(Some(
                    describe_topic_partitions_request::Cursor::default()
                        .with_topic_name(name("fuzz"))
                        .with_partition_index(1),
                )),
        ),
        ApiKey::ConsumerGroupHeartbeat => RequestKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_member_id(StrBytes::from_static_str("fuzz-member"))
                .with_rebalance_timeout_ms(1_000)
                .with_subscribed_topic_names(Some(vec![name("fuzz")]))
                .with_topic_partitions(Some(vec![
                    consumer_group_heartbeat_request::TopicPartitions::default()
                        .with_partitions(vec![0]),
                ])),
        ),
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(StrBytes::from_static_str("fuzz-group"))]),
        ),
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(
            DeleteRecordsRequest::default()
                .with_timeout_ms(1_000)
                .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                    .with_name(name("fuzz"))
                    .with_partitions(vec![
                        delete_records_request::DeleteRecordsPartition::default().with_offset(1),
                    ])]),
        ),
        ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(
            OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                        .with_topic(name("fuzz"))
                        .with_partitions(vec![
                            offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                                .with_current_leader_epoch(0)
                                .with_leader_epoch(0),
                        ]),
                ]),
        ),
        ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(StrBytes::from_static_str(
                    "fuzz-txn",
                )))
                .with_v3_and_below_topics(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(name("fuzz"))
                        .with_partitions(vec![0]),
                ]),
        ),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("fuzz-txn")))
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group"))),
        ),
        ApiKey::EndTxn => RequestKind::EndTxn(
            EndTxnRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("fuzz-txn"))),
        ),
        ApiKey::WriteTxnMarkers => {
            RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default().with_markers(vec![
                write_txn_markers_request::WritableTxnMarker::default().with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(name("fuzz"))
                        .with_partition_indexes(vec![0]),
                ]),
            ]))
        }
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(StrBytes::from_static_str("fuzz-txn")))
                .with_group_id(GroupId(StrBytes::from_static_str("fuzz-group")))
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(name("fuzz"))
                        .with_partitions(vec![Default::default()]),
                ]),
        ),
        ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(
            DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
                StrBytes::from_static_str("fuzz-txn"),
            )]),
        ),
        ApiKey::ListTransactions => RequestKind::ListTransactions(
            ListTransactionsRequest::default()
                .with_state_filters(vec![StrBytes::from_static_str("Ongoing")])
                .with_producer_id_filters(vec![ProducerId(1)]),
        ),
        ApiKey::DescribeProducers => {
            RequestKind::DescribeProducers(DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(name("fuzz"))
                    .with_partition_indexes(vec![0]),
            ]))
        }
        ApiKey::DescribeLogDirs => {
            RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(Some(vec![
                describe_log_dirs_request::DescribableLogDirTopic::default()
                    .with_topic(name("fuzz"))
                    .with_partitions(vec![0]),
            ])))
        }
        ApiKey::DescribeQuorum => {
            RequestKind::DescribeQuorum(DescribeQuorumRequest::default().with_topics(vec![
                describe_quorum_request::TopicData::default()
                    .with_topic_name(name("__cluster_metadata"))
                    .with_partitions(vec![Default::default()]),
            ]))
        }
        ApiKey::AlterReplicaLogDirs => {
            RequestKind::AlterReplicaLogDirs(AlterReplicaLogDirsRequest::default().with_dirs(vec![
                alter_replica_log_dirs_request::AlterReplicaLogDir::default()
                    .with_path(StrBytes::from_static_str("/elsewhere"))
                    .with_topics(vec![
                        alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                            .with_name(name("fuzz"))
                            .with_partitions(vec![0]),
                    ]),
            ]))
        }
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(
            ElectLeadersRequest::default().with_topic_partitions(Some(vec![
                elect_leaders_request::TopicPartitions::default()
                    .with_topic(name("fuzz"))
                    .with_partitions(vec![0]),
            ])),
        ),
        ApiKey::AlterPartitionReassignments => RequestKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsRequest::default().with_topics(vec![
                alter_partition_reassignments_request::ReassignableTopic::default()
                    .with_name(name("fuzz"))
                    .with_partitions(vec![
                        alter_partition_reassignments_request::ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(Some(vec![BrokerId(1), BrokerId(2)])),
                    ]),
            ]),
        ),
        ApiKey::ListPartitionReassignments => RequestKind::ListPartitionReassignments(
            ListPartitionReassignmentsRequest::default().with_topics(Some(vec![
                list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
                    .with_name(name("fuzz"))
                    .with_partition_indexes(vec![0]),
            ])),
        ),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        ),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0u\0p")),
        ),
        ApiKey::DescribeUserScramCredentials => RequestKind::DescribeUserScramCredentials(
            DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                describe_user_scram_credentials_request::UserName::default()
                    .with_name(StrBytes::from_static_str("fuzz")),
            ])),
        ),
        ApiKey::AlterUserScramCredentials => RequestKind::AlterUserScramCredentials(
            AlterUserScramCredentialsRequest::default()
                .with_deletions(vec![
                    alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                        .with_name(StrBytes::from_static_str("gone"))
                        .with_mechanism(1),
                ])
                .with_upsertions(vec![
                    alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                        .with_name(StrBytes::from_static_str("fuzz"))
                        .with_mechanism(2)
                        .with_iterations(4096)
                        .with_salt(Bytes::from_static(b"salt"))
                        .with_salted_password(Bytes::from_static(b"salted")),
                ]),
        ),
        ApiKey::DescribeClientQuotas => RequestKind::DescribeClientQuotas(
            DescribeClientQuotasRequest::default().with_components(vec![
                describe_client_quotas_request::ComponentData::default()
                    .with_entity_type(StrBytes::from_static_str("client-id"))
                    .with_match_type(2),
            ]),
        ),
        ApiKey::AlterClientQuotas => {
            RequestKind::AlterClientQuotas(AlterClientQuotasRequest::default().with_entries(vec![
                alter_client_quotas_request::EntryData::default()
                    .with_entity(vec![alter_client_quotas_request::EntityData::default()
                        .with_entity_type(StrBytes::from_static_str("client-id"))
                        .with_entity_name(Some(StrBytes::from_static_str("fuzz")))])
                    .with_ops(vec![alter_client_quotas_request::OpData::default()
                        .with_key(StrBytes::from_static_str("producer_byte_rate"))
                        .with_value(1048576.0)]),
            ]))
        }
        ApiKey::CreateAcls => RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(
            vec![create_acls_request::AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("fuzz"))
                .with_resource_pattern_type(3)
                .with_principal(StrBytes::from_static_str("User:fuzz"))
                .with_host(StrBytes::from_static_str("*"))
                .with_operation(3)
                .with_permission_type(3)],
        )),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(
            DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
        ),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(
            vec![delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(Some(StrBytes::from_static_str("nothing")))
                .with_pattern_type_filter(3)
                .with_operation(1)
                .with_permission_type(1)],
        )),
        ApiKey::UpdateFeatures => RequestKind::UpdateFeatures(
            UpdateFeaturesRequest::default().with_feature_updates(vec![
                update_features_request::FeatureUpdateKey::default()
                    .with_feature(StrBytes::from_static_str("group.version"))
                    .with_max_version_level(1)
                    .with_upgrade_type(1),
            ]),
        ),
        _ => return None,
    })
}

/// Header + body of the sample request of `key` at `version` (no size prefix), or `None`
/// where the codec cannot encode the sample at that version.
pub fn sample_frame_body(key: ApiKey, version: i16, correlation_id: i32) -> Option<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .ok()?;
    sample_request(key)?.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

/// `sample_frame_body` of every served API and version, in the request targets' input
/// format (API pick, version pick, then the frame after the correlation id).
pub fn request_inputs() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, &(key, min, max)) in net::api::served_apis().enumerate() {
        for v in min..=max {
            if let Some(body) = sample_frame_body(key, v, 7) {
                let mut input = vec![i as u8, (v - min) as u8];
                input.extend_from_slice(&body[8..]);
                out.push(input);
            }
        }
    }
    // The barrier APIs (keys 1010–1014, not in the table): whole frames, which the targets'
    // raw form decodes as they are.
    out.extend(barrier_frames());
    out
}

/// One request frame (after its size) of each barrier API, with one element in each array.
pub fn barrier_frames() -> Vec<Vec<u8>> {
    use kfc4::wire::*;
    let requests = [
        BarrierRequest::Alter(AlterBarrierGroupsRequest {
            // A delete of a group that is not there: answered without touching the
            // metastore (a define would create the 50 partitions of __barrier_state).
            groups: vec![GroupAlteration {
                name: "fuzz-group".into(),
                topics: vec!["fuzz".into()],
                interval_ms: 60_000,
                retained_cuts: 3,
                delete: true,
            }],
        }),
        BarrierRequest::Describe(DescribeBarrierGroupsRequest {
            groups: vec!["fuzz-group".into()],
        }),
        BarrierRequest::Trigger(TriggerBarrierRequest {
            group: "fuzz-group".into(),
            timeout_ms: 0,
        }),
        BarrierRequest::List(ListBarrierCutsRequest {
            group: "fuzz-group".into(),
            from_epoch: 0,
            max_results: -1,
        }),
        BarrierRequest::WriteMarkers(WriteBarrierMarkersRequest {
            group: "fuzz-group".into(),
            epoch: 1,
            triggered_at_ms: 1,
            topics: vec![("fuzz".into(), vec![(0, 0)])],
        }),
    ];
    requests
        .iter()
        .map(|r| encode_request_frame(7, Some("fuzz"), r)[4..].to_vec())
        .collect()
}

/// A size-prefixed CreateTopics v5 frame.
pub fn create_topic_frame(topic: &str, partitions: i32) -> Vec<u8> {
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::CreateTopics as i16)
        .with_request_api_version(5)
        .with_correlation_id(1);
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, ApiKey::CreateTopics.request_header_version(5))
        .expect("header");
    req.encode(&mut buf, 5).expect("CreateTopics v5");
    let mut out = (buf.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

/// An uncompressed batch of `n` records starting at base offset `base`.
pub fn sample_batch(n: usize, base: i64) -> Vec<u8> {
    let mut b = encode_uncompressed((0..n).map(|i| NewRecord {
        key: Some(Bytes::from(format!("k{i}"))),
        value: Some(Bytes::from(vec![b'v'; 20 + i])),
        headers: Default::default(),
        timestamp_ms: 1_700_000_000_000 + i as i64,
    }));
    batch::set_base_offset(&mut b, base);
    b
}

/// `b` with its records section compressed by Kafka codec `codec` (1 gzip … 4 zstd).
pub fn compressed(b: &[u8], codec: i16) -> Vec<u8> {
    let records = &b[HEADER_BYTES..];
    let section = match codec {
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(records).expect("gzip");
            e.finish().expect("gzip")
        }
        2 => snap::raw::Encoder::new()
            .compress_vec(records)
            .expect("snappy"),
        3 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(records).expect("lz4");
            e.finish().expect("lz4")
        }
        4 => {
            ruzstd::encoding::compress_to_vec(records, ruzstd::encoding::CompressionLevel::Fastest)
        }
        _ => records.to_vec(),
    };
    batch::with_records_section(b, codec, &section)
}

pub fn record_batch_inputs() -> Vec<Vec<u8>> {
    let plain = sample_batch(4, 0);
    let mut out = vec![plain.clone(), sample_batch(1, 0)];
    out.extend((1..=4).map(|c| compressed(&plain, c)));
    out
}

/// Segments: consecutive batches, one with a torn tail, one with zero padding.
pub fn segment_inputs() -> Vec<Vec<u8>> {
    let mut seg = Vec::new();
    let mut next = 0i64;
    for n in [3usize, 1, 5] {
        seg.extend(sample_batch(n, next));
        next += n as i64;
    }
    let mut torn = seg.clone();
    torn.truncate(seg.len() - 7);
    let mut padded = seg.clone();
    padded.extend(std::iter::repeat_n(0u8, 4096));
    vec![seg, torn, padded, compressed(&sample_batch(6, 0), 3)]
}
