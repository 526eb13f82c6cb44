//! Opening a core's partitions, lazily and bounded.
//!
//! A partition assigned to a core is *unopened* until something opens it: start-up leaves all
//! but the internal topics so (a node with 100,000 partitions reports ready in about a second,
//! not after opening them all), then opens them in a background pass; the first request that
//! needs one opens it at once and waits for it; a later metastore change opens what it adds
//! before it is applied. Each partition has at most one open under way, which every caller
//! waits on; the open runs as a task of its own, so a request that goes away (its connection
//! closed) does not stop it halfway. At most `MAX_CONCURRENT_PARTITION_OPENS` opens run at once
//! per core, and the background pass takes at most `background-opens-per-core` of them, so a
//! request's open never waits behind the whole pass.
//!
//! The bookkeeping (which partitions wait, their opens under way, the bound on opens at once)
//! is `crate::unopened::Openings`.
//!
//! Bounds: one entry per partition assigned to the core and not open (at most
//! `max-partitions`); one open task per such partition at most; the requests waiting on opens
//! are requests in flight, bounded by `queued-max-request-bytes-per-core`.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use engine::join::for_each_bounded;
use glommio::sync::Semaphore;

pub use crate::config::MAX_CONCURRENT_PARTITION_OPENS;
use crate::core::{CoreState, OwnedPartition, PartitionKey};

/// How often a core opening many partitions logs how far it is.
const OPEN_PROGRESS_LOG_SECS: u64 = 5;

/// The open partition `topic`/`index` of this core. One assigned here and not open yet is
/// opened first (or the open under way awaited). `None`: not this core's partition, its
/// open failed (logged), or the core is shutting down.
pub async fn partition(state: &CoreState, topic: &str, index: u32) -> Option<Rc<OwnedPartition>> {
    if let Some(p) = state.partition_if_open(topic, index) {
        return Some(p);
    }
    let gate = start_open(state, &(topic.to_string(), index))?;
    // `acquire` fails once the gate is closed: the open has ended.
    let _ = gate.acquire(1).await;
    state.partition_if_open(topic, index)
}

/// The gate of `key`'s open, starting the open if none is under way; `None` if `key` is
/// not an unopened partition of this core.
fn start_open(state: &CoreState, key: &PartitionKey) -> Option<Rc<Semaphore>> {
    let me = state.me.upgrade()?;
    let (gate, incarnation) = {
        let mut unopened = state.data.openings.unopened.borrow_mut();
        let entry = unopened.get_mut(key)?;
        if let Some(gate) = &entry.opening {
            return Some(gate.clone());
        }
        let gate = Rc::new(Semaphore::new(0));
        entry.opening = Some(gate.clone());
        (gate, entry.incarnation.clone())
    };
    // glommio runs a spawned task at once, up to its first wait: no borrow is held here.
    let (key, done) = (key.clone(), gate.clone());
    glommio::spawn_local(async move {
        open_unopened(&me, key, incarnation).await;
        done.close();
    })
    .detach();
    Some(gate)
}

/// Opens the unopened partition `key`, within the core's bound on opens at once.
async fn open_unopened(state: &CoreState, key: PartitionKey, incarnation: String) {
    let openings = &state.data.openings;
    let Ok(_permit) = openings.permits.acquire_permit(1).await else {
        return;
    };
    let still_assigned = || {
        openings
            .unopened
            .borrow()
            .get(&key)
            .is_some_and(|e| e.incarnation == incarnation)
    };
    if openings.closing.get() || !still_assigned() {
        if let Some(e) = openings.unopened.borrow_mut().get_mut(&key) {
            e.opening = None;
        }
        return;
    }
    let opened = open_partition(state, &key.0, key.1, &incarnation).await;
    // Whatever the outcome, the partition is no longer waiting to be opened: a failed open
    // is tried again by the next metastore change, as before lazy opens.
    let assigned = still_assigned();
    if assigned {
        openings.unopened.borrow_mut().remove(&key);
    }
    match opened {
        Ok(p) if assigned => {
            state.data.partitions.borrow_mut().insert(key, Rc::new(p));
        }
        Ok(p) => {
            // Reassigned while it opened (not done by this module's callers): closed
            // cleanly, its files left to whoever owns it now.
            if let Err(e) = p.close().await {
                tracing::warn!(topic = %key.0, partition = key.1, error = %e, "closing partition");
            }
        }
        Err(e) => {
            tracing::error!(topic = %key.0, partition = key.1, error = %e, "cannot open partition")
        }
    }
}

/// Opens `keys` (those unopened; others are skipped), `concurrency` at a time, logging how
/// far it is every `OPEN_PROGRESS_LOG_SECS`; returns how many are open after it.
pub(crate) async fn open_all(
    state: &CoreState,
    keys: Vec<PartitionKey>,
    concurrency: usize,
) -> usize {
    let total = keys.len();
    let done = Cell::new(0usize);
    let opened = Cell::new(0usize);
    let progress = Cell::new(Instant::now());
    for_each_bounded(keys, concurrency, |(topic, index)| {
        let (done, opened, progress) = (&done, &opened, &progress);
        async move {
            if partition(state, &topic, index).await.is_some() {
                opened.set(opened.get() + 1);
            }
            done.set(done.get() + 1);
            if progress.get().elapsed() >= Duration::from_secs(OPEN_PROGRESS_LOG_SECS) {
                progress.set(Instant::now());
                tracing::info!(
                    core = state.core,
                    done = done.get(),
                    total,
                    "opening partitions"
                );
            }
        }
    })
    .await;
    opened.get()
}

/// The background pass of start-up: opens every partition still unopened, a few at a
/// time (`background-opens-per-core`; 0: none, each waits for its first request).
pub(crate) async fn background_open_pass(state: &CoreState) {
    let concurrency = state.ctx.config.background_opens_per_core;
    let keys = state.data.openings.keys_sorted();
    if concurrency == 0 || keys.is_empty() {
        return;
    }
    let started = Instant::now();
    let total = keys.len();
    let opened = open_all(state, keys, concurrency).await;
    tracing::info!(
        core = state.core,
        opened,
        total,
        secs = started.elapsed().as_secs_f64(),
        "background open pass done"
    );
}

/// Stops opening (the clean close at shutdown): waits for the opens under way, and leaves
/// the partitions never opened as they are on disk.
pub(crate) async fn stop_opening(state: &CoreState) {
    let openings = &state.data.openings;
    openings.closing.set(true);
    // Every permit: no open is under way after this (those queued behind find `closing`).
    let all = openings
        .permits
        .acquire_permit(MAX_CONCURRENT_PARTITION_OPENS as u64)
        .await;
    drop(all);
    openings.unopened.borrow_mut().clear();
}

/// Why a partition was not opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("not served: the node serves at most {max_partitions} partitions (max-partitions); raise max-partitions and restart, or delete partitions")]
    PartitionBudget { max_partitions: usize },
    #[error(transparent)]
    Partition(#[from] engine::PartitionError),
    #[error("replaying committed offsets: {0}")]
    Replay(#[from] engine::LogError),
}

/// Opens `topic`/`index` (of `incarnation`) on this core with the topic's configs: recovery,
/// the partition budget, and an unreplicated coordinator partition's state loaded.
pub(crate) async fn open_partition(
    state: &CoreState,
    topic: &str,
    index: u32,
    incarnation: &str,
) -> Result<OwnedPartition, OpenError> {
    let configs = state
        .meta
        .borrow()
        .topic(topic)
        .map(|t| t.configs.clone())
        .unwrap_or_default();
    let fd_slot = state
        .ctx
        .fd_budget
        .try_open()
        .ok_or(OpenError::PartitionBudget {
            max_partitions: state.ctx.fd_budget.max_partitions,
        })?;
    let dir = state.ctx.data_dir.partition_dir(topic, index);
    let log_config = crate::topic_config::to_log_config(&configs, &state.ctx.config.log_defaults)
        .unwrap_or_else(|_| state.ctx.config.log_defaults.clone());
    let (partition, summary) =
        engine::Partition::open(&state.data.storage, dir, incarnation, log_config).await?;
    if state.meta.borrow().replica_set(topic, index).is_some() {
        // A replicated partition shows nothing past what its leader says is committed,
        // from the start (`crate::replica` moves it).
        let log = partition.log();
        log.set_replicated_limit(log.log_start_offset());
    }
    // A coordinator's partition is loaded as it opens; a replicated one by its leader's
    // task once it leads (`replica::lead`).
    if state.meta.borrow().replica_set(topic, index).is_none() {
        crate::coordinator_load::load_coordinator_state(
            state,
            &(topic.to_string(), index),
            &partition,
        )
        .await?;
    }
    let m = &state.metrics;
    crate::metrics::CoreMetrics::add(&m.recovered_partitions, 1);
    crate::metrics::CoreMetrics::add(
        &m.recovery_segments_scanned,
        summary.segments_scanned as u64,
    );
    crate::metrics::CoreMetrics::add(&m.recovery_truncations, summary.truncations.len() as u64);
    tracing::info!(
        core = state.core,
        next_offset = summary.next_offset,
        scanned = summary.segments_scanned,
        truncated = summary.truncations.len(),
        "partition {topic}/{index} opened on core {}",
        state.core
    );
    Ok(OwnedPartition {
        topic: topic.to_string(),
        index,
        partition,
        _fd_slot: fd_slot,
        traffic: Default::default(),
    })
}

/// First step of a partition move: stop serving `topic`/`index` here and close it cleanly
/// (flush, sync, seal), so its new owner core opens it without recovery.
pub async fn release_partition(
    state: &CoreState,
    topic: &str,
    index: u32,
) -> Result<(), engine::LogError> {
    let key = (topic.to_string(), index);
    state.data.moving.borrow_mut().insert(key.clone());
    // One not open yet is opened first: one path closes it.
    let _ = partition(state, topic, index).await;
    let part = state.data.partitions.borrow_mut().remove(&key);
    // Its fan-out cursors stop with it (their files go, or stay, with the partition); the
    // reconcile pass starts them wherever it is served next.
    let cursors: Vec<_> = state
        .data
        .cursors
        .borrow()
        .running
        .keys()
        .filter(|(parent, p, _, _)| parent == topic && *p == index)
        .cloned()
        .collect();
    for k in cursors {
        if let Some((task, _, _)) = state.data.cursors.borrow_mut().running.remove(&k) {
            task.cancel();
        }
    }
    match part {
        Some(p) => p.close().await,
        None => Ok(()),
    }
}
