//! Topics: their record, name and config rules, and creating a topic or adding partitions.

use std::collections::BTreeMap;

use rkyv::{Archive, Deserialize, Serialize};

use super::*;

#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    /// 16 lowercase hex characters; new on every create of this name.
    pub incarnation_id: String,
    /// Kafka topic UUID.
    pub topic_id: [u8; 16],
    pub partitions: u32,
    pub configs: BTreeMap<String, String>,
}

/// Kafka's topic name rule (`Topic.validate`): not empty, at most [`MAX_TOPIC_NAME_BYTES`],
/// only `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), Refusal> {
    let bad = |reason: &str| {
        Err(Refusal::InvalidTopic {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > MAX_TOPIC_NAME_BYTES {
        return bad("longer than MAX_TOPIC_NAME_BYTES");
    }
    match name_chars_problem(name) {
        Some(reason) => bad(reason),
        None => Ok(()),
    }
}

/// What breaks Kafka's topic name character rule in `name` (only `[a-zA-Z0-9._-]`, not `.` or
/// `..`); the length is checked by the caller.
pub(super) fn name_chars_problem(name: &str) -> Option<&'static str> {
    if name == "." || name == ".." {
        return Some("'.' and '..' are not allowed");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Some("only [a-zA-Z0-9._-] allowed");
    }
    None
}

/// Whether `topic` is internal (Kafka's `__` prefix: `__consumer_offsets`, ...).
pub(super) fn is_internal_topic(topic: &str) -> bool {
    topic.starts_with("__")
}

pub(super) fn validate_configs<'a>(
    name: &str,
    current: usize,
    entries: impl Iterator<Item = (&'a String, &'a String)>,
) -> Result<(), Refusal> {
    for (k, v) in entries {
        if k.is_empty() || k.len() > MAX_CONFIG_ENTRY_BYTES || v.len() > MAX_CONFIG_ENTRY_BYTES {
            return Err(Refusal::InvalidConfig {
                name: name.to_string(),
                reason: format!("config key/value '{k}' empty or over MAX_CONFIG_ENTRY_BYTES"),
            });
        }
    }
    if current > MAX_CONFIG_ENTRIES_PER_TOPIC {
        return Err(Refusal::InvalidConfig {
            name: name.to_string(),
            reason: format!(
                "more than MAX_CONFIG_ENTRIES_PER_TOPIC ({MAX_CONFIG_ENTRIES_PER_TOPIC})"
            ),
        });
    }
    Ok(())
}

impl MetaState {
    pub(super) fn create_topic_with(
        &mut self,
        name: &str,
        partitions: u32,
        configs: &BTreeMap<String, String>,
        replicas: &[Vec<Assignment>],
        incarnation_id: &str,
        topic_id: &[u8; 16],
    ) -> Result<Change, Refusal> {
        validate_topic_name(name)?;
        if self.topics.contains_key(name) {
            return Err(Refusal::TopicAlreadyExists { name: name.into() });
        }
        if partitions == 0 || partitions > MAX_PARTITIONS_PER_TOPIC {
            return Err(Refusal::InvalidPartitions {
                name: name.into(),
                reason: format!(
                    "partition count {partitions} must be in 1..={MAX_PARTITIONS_PER_TOPIC}"
                ),
            });
        }
        if replicas.len() != partitions as usize {
            return Err(Refusal::InvalidAssignment {
                name: name.into(),
                reason: format!("{} assignments for {partitions} partitions", replicas.len()),
            });
        }
        let rf = validate_placement(name, replicas)?;
        validate_configs(name, configs.len(), configs.iter())?;
        if incarnation_id.len() != INCARNATION_ID_HEX_CHARS
            || !incarnation_id.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(Refusal::InvalidTopic {
                name: name.into(),
                reason: format!("incarnation id '{incarnation_id}' is not 16 hex chars"),
            });
        }
        let topic = TopicMeta {
            name: name.into(),
            incarnation_id: incarnation_id.into(),
            topic_id: *topic_id,
            partitions,
            configs: configs.clone(),
        };
        let assignments: Vec<Assignment> = replicas.iter().map(|r| r[0]).collect();
        self.topics.insert(name.into(), topic.clone());
        self.assignments.insert(name.into(), assignments.clone());
        let created = Change::TopicCreated { topic, assignments };
        if rf == 1 {
            return Ok(created);
        }
        let sets: Vec<PartitionReplicas> = replicas
            .iter()
            .map(|r| PartitionReplicas::new(r.clone()))
            .collect();
        assert!(
            self.set_replicas(name, 0, &sets),
            "the topic was just created"
        );
        Ok(Change::Batch(vec![
            created,
            Change::ReplicasSet {
                name: name.into(),
                first_partition: 0,
                replicas: sets,
            },
        ]))
    }

    pub(super) fn add_partitions_with(
        &mut self,
        name: &str,
        new_total: u32,
        replicas: &[Vec<Assignment>],
    ) -> Result<Change, Refusal> {
        let rf = self.replication_factor(name);
        // Replica state, as the topic's other partitions have it (a replicated topic's
        // partitions may differ in size after reassignments: the first's is the topic's).
        let replicated = self.replicas.contains_key(name);
        let t = self
            .topics
            .get_mut(name)
            .ok_or_else(|| Refusal::UnknownTopicOrPartition {
                name: name.into(),
                partition: None,
            })?;
        if new_total <= t.partitions || new_total > MAX_PARTITIONS_PER_TOPIC {
            return Err(Refusal::InvalidPartitions {
                name: name.into(),
                reason: format!(
                    "new total {new_total} must be above the current {} and at most {MAX_PARTITIONS_PER_TOPIC}",
                    t.partitions
                ),
            });
        }
        let added = (new_total - t.partitions) as usize;
        if replicas.len() != added {
            return Err(Refusal::InvalidAssignment {
                name: name.into(),
                reason: format!("{} assignments for {added} new partitions", replicas.len()),
            });
        }
        let new_rf = validate_placement(name, replicas)?;
        if new_rf != rf {
            return Err(Refusal::InvalidAssignment {
                name: name.into(),
                reason: format!(
                    "the new partitions have {new_rf} replicas, the topic's replication factor is {rf}"
                ),
            });
        }
        let first = t.partitions;
        t.partitions = new_total;
        let assignments: Vec<Assignment> = replicas.iter().map(|r| r[0]).collect();
        let a = self
            .assignments
            .get_mut(name)
            .expect("invariant: every topic has an assignments entry");
        a.extend_from_slice(&assignments);
        self.fanout_links.parent_grew(name, new_total);
        let added = Change::PartitionsAdded {
            name: name.into(),
            new_total,
            assignments,
        };
        if !replicated {
            return Ok(added);
        }
        let sets: Vec<PartitionReplicas> = replicas
            .iter()
            .map(|r| PartitionReplicas::new(r.clone()))
            .collect();
        assert!(
            self.set_replicas(name, first, &sets),
            "the partitions were just added"
        );
        Ok(Change::Batch(vec![
            added,
            Change::ReplicasSet {
                name: name.into(),
                first_partition: first,
                replicas: sets,
            },
        ]))
    }
}
