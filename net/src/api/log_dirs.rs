//! DescribeLogDirs: the node's one data dir, with every partition it holds (or those asked
//! for), each partition's size on disk, and the filesystem's total and usable bytes (v4+).
//! Offset lag is 0: a single replica is never behind. AlterReplicaLogDirs: nowhere else to go.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, TopicName,
};

use super::str_bytes;
use crate::codes;
use crate::core::CoreState;
use crate::route::Scatter;

/// `Some(wanted)`: only these (topic, partition) pairs; `None`: everything.
type Wanted = Option<Vec<(String, i32)>>;

pub async fn describe_log_dirs(
    state: &Rc<CoreState>,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let wanted: Wanted = req.topics.map(|ts| {
        ts.into_iter()
            .flat_map(|t| {
                let name = t.topic.0.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect()
    });
    // Every core reports the partitions it owns (sizes are per core state).
    let mut scatter: Scatter<Wanted> = Scatter::default();
    for core in 0..state.ctx.config.cores() {
        scatter.push(core, (core, 0), wanted.clone());
    }
    let results = scatter
        .gather(state, |s, items: Vec<Wanted>| async move {
            // Sizes come from open partitions: those not opened since start are opened first.
            for w in &items {
                let keys = match w {
                    None => s.data.openings.keys_sorted(),
                    Some(w) => w
                        .iter()
                        .filter(|(_, i)| *i >= 0)
                        .map(|(t, i)| (t.clone(), *i as u32))
                        .collect(),
                };
                crate::opening::open_all(&s, keys, crate::opening::MAX_CONCURRENT_PARTITION_OPENS)
                    .await;
            }
            items
                .into_iter()
                .map(|w| {
                    let parts = s.data.partitions.borrow();
                    let mut out: Vec<(String, i32, u64)> = match &w {
                        None => parts
                            .values()
                            .map(|p| (p.topic.clone(), p.index as i32, p.log().size_bytes()))
                            .collect(),
                        Some(w) => w
                            .iter()
                            .filter(|(_, i)| *i >= 0)
                            .filter_map(|(t, i)| {
                                parts
                                    .get(&(t.clone(), *i as u32))
                                    .map(|p| (t.clone(), *i, p.log().size_bytes()))
                            })
                            .collect(),
                    };
                    out.sort();
                    out
                })
                .collect::<Vec<_>>()
        })
        .await;
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    let mut error_code = codes::NONE;
    for (_, r) in results {
        match r {
            Ok(parts) => {
                for (t, p, size) in parts {
                    by_topic.entry(t).or_default().push(
                        DescribeLogDirsPartition::default()
                            .with_partition_index(p)
                            .with_partition_size(size as i64)
                            .with_offset_lag(0),
                    );
                }
            }
            Err(_) => error_code = codes::KAFKA_STORAGE_ERROR,
        }
    }
    let space = state.ctx.data_dir.space();
    let result = DescribeLogDirsResult::default()
        .with_error_code(error_code)
        .with_log_dir(str_bytes(state.ctx.data_dir.root().display().to_string()))
        .with_total_bytes(space.map_or(-1, |s| s.total_bytes as i64))
        .with_usable_bytes(space.map_or(-1, |s| s.usable_bytes as i64))
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, mut ps)| {
                    ps.sort_by_key(|p| p.partition_index);
                    DescribeLogDirsTopic::default()
                        .with_name(TopicName(str_bytes(t)))
                        .with_partitions(ps)
                })
                .collect(),
        );
    DescribeLogDirsResponse::default().with_results(vec![result])
}

/// AlterReplicaLogDirs: one data dir per node, so a replica can only "move" to where it is.
/// Naming the data dir is a no-op success per partition; any other path is
/// LOG_DIR_NOT_FOUND; an unknown partition UNKNOWN_TOPIC_OR_PARTITION (replica not here).
pub fn alter_replica_log_dirs(
    state: &CoreState,
    req: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let root = state.ctx.data_dir.root();
    // Compared as DescribeLogDirs names it (no filesystem lookup of a client's path).
    let same_dir = |path: &str| std::path::Path::new(path) == root;
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for d in &req.dirs {
        let here = same_dir(d.path.as_str());
        for t in &d.topics {
            let name = t.name.0.to_string();
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    let known = p >= 0 && state.owner_core(&name, p as u32).is_some();
                    let code = if !known {
                        codes::UNKNOWN_TOPIC_OR_PARTITION
                    } else if here {
                        codes::NONE
                    } else {
                        codes::LOG_DIR_NOT_FOUND
                    };
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                })
                .collect();
            results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}
