//! The bookkeeping of one core's partitions that are assigned to it and not open yet (lazy
//! start-up): which they are, the open under way of each, and the bound on opens at once.
//! The opening itself is `crate::opening`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use glommio::sync::Semaphore;

use crate::config::MAX_CONCURRENT_PARTITION_OPENS;

/// A partition: topic and index.
type PartitionKey = (String, u32);

/// One core's partitions that are assigned to it and not open yet, and its opens under way.
pub struct Openings {
    pub(crate) unopened: RefCell<HashMap<PartitionKey, Unopened>>,
    /// Opens running at once (`MAX_CONCURRENT_PARTITION_OPENS`).
    pub(crate) permits: Semaphore,
    /// Set by the clean close at shutdown: nothing more is opened.
    pub(crate) closing: Cell<bool>,
}

pub(crate) struct Unopened {
    /// The topic incarnation the metastore assigned (a deleted and recreated topic is another).
    pub(crate) incarnation: String,
    /// Closed when the open under way ends, however it ends.
    pub(crate) opening: Option<Rc<Semaphore>>,
}

impl Default for Openings {
    fn default() -> Self {
        Self {
            unopened: RefCell::default(),
            permits: Semaphore::new(MAX_CONCURRENT_PARTITION_OPENS as u64),
            closing: Cell::new(false),
        }
    }
}

impl Openings {
    /// Partitions assigned to the core and not open yet.
    pub fn unopened_count(&self) -> usize {
        self.unopened.borrow().len()
    }

    /// Whether `key` is assigned to the core and not open yet.
    pub(crate) fn is_unopened(&self, key: &PartitionKey) -> bool {
        self.unopened.borrow().contains_key(key)
    }

    /// The unopened partitions whose assignment `wanted` no longer names (with the same
    /// incarnation).
    pub(crate) fn unwanted(
        &self,
        wanted: impl Fn(&PartitionKey, &str) -> bool,
    ) -> Vec<PartitionKey> {
        self.unopened
            .borrow()
            .iter()
            .filter(|(k, e)| !wanted(k, &e.incarnation))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Records `key` as assigned and not open (a new assignment; an entry already there stays).
    pub(crate) fn add(&self, key: PartitionKey, incarnation: String) {
        self.unopened.borrow_mut().entry(key).or_insert(Unopened {
            incarnation,
            opening: None,
        });
    }

    /// The unopened partitions, in order.
    pub(crate) fn keys_sorted(&self) -> Vec<PartitionKey> {
        let mut keys: Vec<PartitionKey> = self.unopened.borrow().keys().cloned().collect();
        keys.sort();
        keys
    }
}
