//! Fan-out and delay children: the parent → child links and the rules for attaching one.

use std::collections::BTreeMap;

use rkyv::{Archive, Deserialize, Serialize};

use super::*;

/// One fan-out attachment: every record committed to `parent` at or after `attach_offsets[p]`
/// in partition `p` is copied into `child` (seed 000).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FanoutLink {
    pub parent: String,
    pub child: String,
    /// 0 for a normal child; otherwise records are copied once `commit time + delay_ms` passed.
    /// Immutable for the life of the attachment.
    pub delay_ms: u64,
    /// [`FANOUT_EPOCH_HEX_CHARS`] lowercase hex characters, new on every attach; a cursor offset
    /// file from another epoch is never resumed.
    pub epoch: String,
    /// The parent's high watermark of each partition when the link was made (index = parent
    /// partition); partitions added to the parent later start at 0. No backfill below these.
    pub attach_offsets: Vec<u64>,
}

/// Fan-out links (seed 000), keyed by child topic (one parent per child).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FanoutLinks {
    pub section_version: u32,
    pub links: BTreeMap<String, FanoutLink>,
}

/// The empty section of the current version.
impl Default for FanoutLinks {
    fn default() -> Self {
        FanoutLinks {
            section_version: super::FANOUT_SECTION_VERSION,
            links: BTreeMap::new(),
        }
    }
}

impl FanoutLinks {
    /// The link whose child is `child`.
    pub fn of_child(&self, child: &str) -> Option<&FanoutLink> {
        self.links.get(child)
    }

    /// The links whose parent is `parent`, ordered by child name.
    pub fn children_of<'a>(&'a self, parent: &'a str) -> impl Iterator<Item = &'a FanoutLink> {
        self.links.values().filter(move |l| l.parent == parent)
    }

    /// Whether `topic` is the parent of some link.
    pub fn is_parent(&self, topic: &str) -> bool {
        self.links.values().any(|l| l.parent == topic)
    }

    /// The longest delay among `parent`'s children (0 when none has a delay).
    pub fn max_child_delay_ms(&self, parent: &str) -> u64 {
        self.children_of(parent)
            .map(|l| l.delay_ms)
            .max()
            .unwrap_or(0)
    }

    /// Removes every link `topic` takes part in (as parent or child), as on topic deletion.
    pub(super) fn forget_topic(&mut self, topic: &str) {
        self.links
            .retain(|child, l| child != topic && l.parent != topic);
    }

    /// New parent partitions start copying at offset 0 (they are empty when created).
    pub(super) fn parent_grew(&mut self, parent: &str, new_total: u32) {
        for l in self.links.values_mut().filter(|l| l.parent == parent) {
            l.attach_offsets.resize(new_total as usize, 0);
        }
    }
}

/// The retention floor of a parent with a child delayed by `delay_ms`: `delay + 1 h`. `None` for
/// a child without delay (no floor).
pub fn fanout_retention_floor_ms(delay_ms: u64) -> Option<u64> {
    (delay_ms > 0).then(|| delay_ms.saturating_add(FANOUT_RETENTION_MARGIN_MS))
}

/// Whether an explicit `retention.ms` value keeps records at least `floor_ms` (`-1` = forever).
/// A value that does not parse is left to the config validation (treated as satisfying).
pub fn retention_satisfies(retention_ms: &str, floor_ms: u64) -> bool {
    match retention_ms.trim().parse::<i64>() {
        Ok(v) if v < 0 => true,
        Ok(v) => v as u64 >= floor_ms,
        Err(_) => true,
    }
}

impl MetaState {
    /// The attach rules of seed 000: both topics exist and differ, one parent per child, no
    /// chains either way, at most [`MAX_FANOUT_CHILDREN_PER_PARENT`], delay at most
    /// [`MAX_FANOUT_DELAY_MS`], an explicit parent `retention.ms` at least `delay + 1 h`, one
    /// attach offset per parent partition.
    pub(super) fn check_attach(
        &self,
        parent: &str,
        child: &str,
        delay_ms: u64,
        epoch: &str,
        attach_offsets: &[u64],
    ) -> Result<(), Refusal> {
        let refuse = |reason: String| {
            Err(Refusal::InvalidFanout {
                child: child.to_string(),
                reason,
            })
        };
        let p = self
            .topics
            .get(parent)
            .ok_or_else(|| Refusal::UnknownTopicOrPartition {
                name: parent.to_string(),
                partition: None,
            })?;
        if !self.topics.contains_key(child) {
            return Err(Refusal::UnknownTopicOrPartition {
                name: child.to_string(),
                partition: None,
            });
        }
        if parent == child {
            return refuse("a topic cannot be its own child".into());
        }
        if let Some(l) = self.fanout_links.of_child(child) {
            return refuse(format!(
                "'{child}' already has parent '{}' (one parent per child)",
                l.parent
            ));
        }
        if self.fanout_links.is_parent(child) {
            return refuse(format!("'{child}' is a parent itself (no chains)"));
        }
        if let Some(l) = self.fanout_links.of_child(parent) {
            return refuse(format!(
                "'{parent}' is a child of '{}' (no chains)",
                l.parent
            ));
        }
        let children = self.fanout_links.children_of(parent).count();
        if children >= MAX_FANOUT_CHILDREN_PER_PARENT {
            return refuse(format!(
                "'{parent}' already has {children} children (at most {MAX_FANOUT_CHILDREN_PER_PARENT})"
            ));
        }
        if delay_ms > MAX_FANOUT_DELAY_MS {
            return refuse(format!(
                "delay {delay_ms} ms is over one year ({MAX_FANOUT_DELAY_MS} ms)"
            ));
        }
        if let (Some(floor), Some(r)) = (
            fanout_retention_floor_ms(delay_ms),
            p.configs.get(RETENTION_MS_CONFIG),
        ) {
            if !retention_satisfies(r, floor) {
                return refuse(format!(
                    "parent '{parent}' {RETENTION_MS_CONFIG}={r} is below delay + 1 h ({floor} ms)"
                ));
            }
        }
        if epoch.len() != FANOUT_EPOCH_HEX_CHARS || !epoch.bytes().all(|b| b.is_ascii_hexdigit()) {
            return refuse(format!(
                "epoch '{epoch}' is not {FANOUT_EPOCH_HEX_CHARS} hex chars"
            ));
        }
        if attach_offsets.len() != p.partitions as usize {
            return refuse(format!(
                "{} attach offsets for {} parent partitions",
                attach_offsets.len(),
                p.partitions
            ));
        }
        Ok(())
    }
}
