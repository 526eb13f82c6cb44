//! Barrier group definitions: their record, limits and rules.

use std::collections::BTreeMap;

use rkyv::{Archive, Deserialize, Serialize};

use super::*;

/// The barrier section of state versions 1 to 5 (section version 1: versioned and empty),
/// kept for the old snapshot layouts (`sm::v1` .. `sm::v5`) that are still read and migrated.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BarrierSectionV1 {
    pub section_version: u32,
}

/// The empty section, as state versions 1 to 5 held it.
impl Default for BarrierSectionV1 {
    fn default() -> Self {
        BarrierSectionV1 { section_version: 1 }
    }
}

/// The most barrier groups the metastore holds.
pub const MAX_BARRIER_GROUPS: usize = 100;
/// The most topics in one barrier group.
pub const MAX_TOPICS_PER_BARRIER_GROUP: usize = 100;
/// The shortest interval between two cuts of a group: one second, in milliseconds.
pub const MIN_BARRIER_INTERVAL_MS: u64 = 1_000;
/// The longest interval between two cuts of a group: one week, in milliseconds.
pub const MAX_BARRIER_INTERVAL_MS: u64 = 7 * 24 * 3_600_000;
/// The `interval_ms` of a group that is never triggered by itself (only by TriggerBarrier):
/// KFC-4's interval -1.
pub const BARRIER_INTERVAL_OFF_MS: u64 = 0;
/// The most cuts a group keeps.
pub const MAX_RETAINED_CUTS: u32 = 10_000;
/// The longest barrier group name (the Kafka topic name limit).
pub const MAX_BARRIER_GROUP_NAME_BYTES: usize = 249;

/// Whether `interval_ms` is a barrier group's: in range, or [`BARRIER_INTERVAL_OFF_MS`].
pub fn valid_barrier_interval(interval_ms: u64) -> bool {
    interval_ms == BARRIER_INTERVAL_OFF_MS
        || (MIN_BARRIER_INTERVAL_MS..=MAX_BARRIER_INTERVAL_MS).contains(&interval_ms)
}

/// One barrier group (seed 003 "barrier cuts"): every `interval_ms` a consistent cut is taken
/// across the partitions of `topics`; the newest `retained_cuts` cuts are kept.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BarrierGroupDef {
    /// 1 to [`MAX_BARRIER_GROUP_NAME_BYTES`] bytes of `[a-zA-Z0-9._-]`, not `.` or `..` (the
    /// Kafka topic name rule).
    pub name: String,
    /// Existing, non-internal topics (no `__` prefix), sorted, each once, at most
    /// [`MAX_TOPICS_PER_BARRIER_GROUP`]. A define names at least one; a group whose topics were
    /// all deleted since stays defined with none (its cuts then cover nothing) until it is
    /// redefined or deleted.
    pub topics: Vec<String>,
    /// [`MIN_BARRIER_INTERVAL_MS`] ..= [`MAX_BARRIER_INTERVAL_MS`], or
    /// [`BARRIER_INTERVAL_OFF_MS`] for a group with no periodic injection.
    pub interval_ms: u64,
    /// 1 ..= [`MAX_RETAINED_CUTS`].
    pub retained_cuts: u32,
}

/// Barrier groups (seed 003), keyed by group name (section version
/// [`BARRIER_SECTION_VERSION`]).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct BarrierGroups {
    pub section_version: u32,
    pub groups: BTreeMap<String, BarrierGroupDef>,
}

/// The empty section of the current version.
impl Default for BarrierGroups {
    fn default() -> Self {
        BarrierGroups {
            section_version: BARRIER_SECTION_VERSION,
            groups: BTreeMap::new(),
        }
    }
}

impl BarrierGroups {
    /// The group named `name`.
    pub fn get(&self, name: &str) -> Option<&BarrierGroupDef> {
        self.groups.get(name)
    }

    /// The groups `topic` belongs to, ordered by group name.
    pub fn groups_of_topic<'a>(
        &'a self,
        topic: &'a str,
    ) -> impl Iterator<Item = &'a BarrierGroupDef> {
        self.groups
            .values()
            .filter(move |g| g.topics.binary_search_by(|t| t.as_str().cmp(topic)).is_ok())
    }

    /// Takes `topic` out of every group, as on topic deletion. A group left without topics
    /// stays defined (with none).
    pub(super) fn forget_topic(&mut self, topic: &str) {
        for g in self.groups.values_mut() {
            g.topics.retain(|t| t != topic);
        }
    }
}

impl MetaState {
    /// The barrier section's invariants: its version, at most [`MAX_BARRIER_GROUPS`], each
    /// keyed by its name, valid names, existing non-internal topics sorted and each once, the
    /// limits on topics, interval and retained cuts. (Topics may be empty: see
    /// [`BarrierGroupDef::topics`].)
    pub(super) fn check_barrier_invariants(&self) -> Result<(), String> {
        let b = &self.barrier_groups;
        if b.section_version != BARRIER_SECTION_VERSION {
            return Err(format!(
                "barrier section version {} (expected {BARRIER_SECTION_VERSION})",
                b.section_version
            ));
        }
        if b.groups.len() > MAX_BARRIER_GROUPS {
            return Err(format!(
                "{} barrier groups, more than {MAX_BARRIER_GROUPS}",
                b.groups.len()
            ));
        }
        for (name, g) in &b.groups {
            if name != &g.name {
                return Err(format!("barrier group key '{name}' != name '{}'", g.name));
            }
            if name.is_empty()
                || name.len() > MAX_BARRIER_GROUP_NAME_BYTES
                || name_chars_problem(name).is_some()
            {
                return Err(format!("barrier group '{name}': bad name"));
            }
            if g.topics.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!(
                    "barrier group '{name}': topics unsorted or repeated"
                ));
            }
            if g.topics.len() > MAX_TOPICS_PER_BARRIER_GROUP {
                return Err(format!(
                    "barrier group '{name}': {} topics, more than {MAX_TOPICS_PER_BARRIER_GROUP}",
                    g.topics.len()
                ));
            }
            if let Some(t) = g
                .topics
                .iter()
                .find(|t| is_internal_topic(t) || !self.topics.contains_key(*t))
            {
                return Err(format!(
                    "barrier group '{name}': topic '{t}' is unknown or internal"
                ));
            }
            if !valid_barrier_interval(g.interval_ms) {
                return Err(format!(
                    "barrier group '{name}': interval {} ms out of range",
                    g.interval_ms
                ));
            }
            if !(1..=MAX_RETAINED_CUTS).contains(&g.retained_cuts) {
                return Err(format!(
                    "barrier group '{name}': {} retained cuts out of range",
                    g.retained_cuts
                ));
            }
        }
        Ok(())
    }

    /// `def` as it is stored (topics sorted, each once), checked against the define rules:
    /// a valid name, [`MIN_BARRIER_INTERVAL_MS`] ..= [`MAX_BARRIER_INTERVAL_MS`], 1 ..=
    /// [`MAX_RETAINED_CUTS`] retained cuts, 1 to [`MAX_TOPICS_PER_BARRIER_GROUP`] distinct
    /// topics that exist and are not internal, and no new group beyond
    /// [`MAX_BARRIER_GROUPS`] (replacing one is fine).
    pub(super) fn checked_barrier_group(
        &self,
        def: &BarrierGroupDef,
    ) -> Result<BarrierGroupDef, Refusal> {
        let name = &def.name;
        let bad = |reason: String| {
            Err(Refusal::InvalidBarrierGroup {
                name: name.clone(),
                reason,
            })
        };
        if name.is_empty() {
            return bad(format!(
                "the name is empty: name the group with 1 to {MAX_BARRIER_GROUP_NAME_BYTES} bytes"
            ));
        }
        if name.len() > MAX_BARRIER_GROUP_NAME_BYTES {
            return bad(format!(
                "the name is {} bytes, longer than MAX_BARRIER_GROUP_NAME_BYTES \
                 ({MAX_BARRIER_GROUP_NAME_BYTES}): use a shorter name",
                name.len()
            ));
        }
        if let Some(problem) = name_chars_problem(name) {
            return bad(format!(
                "{problem} in a group name (the Kafka topic name rule): rename the group"
            ));
        }
        if !valid_barrier_interval(def.interval_ms) {
            return bad(format!(
                "interval_ms {} is outside {MIN_BARRIER_INTERVAL_MS}..={MAX_BARRIER_INTERVAL_MS} \
                 (1 s to 7 days, MIN_BARRIER_INTERVAL_MS..=MAX_BARRIER_INTERVAL_MS): pick an \
                 interval in that range, or none (no periodic cuts)",
                def.interval_ms
            ));
        }
        if !(1..=MAX_RETAINED_CUTS).contains(&def.retained_cuts) {
            return bad(format!(
                "retained_cuts {} is outside 1..={MAX_RETAINED_CUTS} (MAX_RETAINED_CUTS): keep \
                 1 to {MAX_RETAINED_CUTS} cuts",
                def.retained_cuts
            ));
        }
        let mut topics = def.topics.clone();
        topics.sort();
        topics.dedup();
        if topics.is_empty() {
            return bad(format!(
                "no topics: name 1 to {MAX_TOPICS_PER_BARRIER_GROUP} existing topics"
            ));
        }
        if topics.len() > MAX_TOPICS_PER_BARRIER_GROUP {
            return bad(format!(
                "{} distinct topics, more than MAX_TOPICS_PER_BARRIER_GROUP \
                 ({MAX_TOPICS_PER_BARRIER_GROUP}): split them over several groups",
                topics.len()
            ));
        }
        for t in &topics {
            if is_internal_topic(t) {
                return bad(format!(
                    "topic '{t}' is internal (a '__' prefix) and takes no part in barrier \
                     cuts: leave it out"
                ));
            }
            if !self.topics.contains_key(t) {
                return bad(format!(
                    "topic '{t}' does not exist: create it first or leave it out"
                ));
            }
        }
        if !self.barrier_groups.groups.contains_key(name)
            && self.barrier_groups.groups.len() >= MAX_BARRIER_GROUPS
        {
            return bad(format!(
                "the metastore holds {MAX_BARRIER_GROUPS} barrier groups at most \
                 (MAX_BARRIER_GROUPS): delete one first, or redefine an existing group"
            ));
        }
        Ok(BarrierGroupDef {
            name: name.clone(),
            topics,
            interval_ms: def.interval_ms,
            retained_cuts: def.retained_cuts,
        })
    }
}
