//! One core's state: its copy of the metadata, the partitions it owns (their logs and producer
//! state), and the loops that keep them in step with the metastore and apply retention.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use engine::shard::Shards;
use engine::{CoreStorage, DataDir, PartitionLog};
use meta::{AppliedChange, MetaHandle, MetaState};

use crate::config::BrokerConfig;
use crate::group::{self, Groups, OFFSETS_TOPIC};
use crate::idempotence::ProducerStates;
use crate::topic_config;

/// How far back (in offsets) a partition's producer state is rebuilt from its log on open.
pub const PRODUCER_STATE_REBUILD_OFFSETS: u64 = 200_000;
/// Bytes read per step while rebuilding producer state.
const REBUILD_READ_BYTES: usize = 1 << 20;
/// The file in a partition directory naming the topic incarnation its data belongs to.
pub const INCARNATION_FILE_NAME: &str = "incarnation";

/// What every core shares: settings, the metastore handle, the data dir.
pub struct BrokerContext {
    pub config: BrokerConfig,
    pub meta: MetaHandle,
    pub data_dir: Arc<DataDir>,
    pub cluster_id: String,
    next_producer_id: AtomicI64,
    pub shutdown: flume::Receiver<()>,
    /// Open Kafka connections, broker-wide and per client IP (`max-connections`,
    /// `max-connections-per-ip`); touched at accept and close only.
    pub connections: crate::conn::ConnectionTable,
    /// Partitions this node can keep open within its fd limit.
    pub fd_budget: crate::fd_budget::FdBudget,
}

impl BrokerContext {
    pub fn new(
        config: BrokerConfig,
        meta: MetaHandle,
        data_dir: Arc<DataDir>,
        cluster_id: String,
        shutdown: flume::Receiver<()>,
    ) -> Self {
        // Producer ids: boot time in ms, shifted, plus a counter: unique across restarts of
        // this node without a metastore round trip.
        let boot_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(1);
        let fd_budget = crate::fd_budget::FdBudget::from_process_limit(
            config.read_cache_segments
                * crate::fd_budget::FDS_PER_CACHED_SEGMENT
                * config.cpus.len().max(1),
        );
        Self {
            meta,
            data_dir,
            cluster_id,
            next_producer_id: AtomicI64::new(boot_ms << 20),
            connections: Default::default(),
            fd_budget,
            config,
            shutdown,
        }
    }

    pub fn allocate_producer_id(&self) -> i64 {
        self.next_producer_id.fetch_add(1, Ordering::Relaxed)
    }
}

pub type PartitionKey = (String, u32);

pub struct Partition {
    pub topic: String,
    pub index: u32,
    pub incarnation: String,
    pub log: Rc<PartitionLog>,
    pub producers: RefCell<ProducerStates>,
    /// This partition's place in the node's fd budget.
    pub _fd_slot: crate::fd_budget::PartitionSlot,
}

pub struct CoreState {
    pub core: usize,
    pub ctx: Arc<BrokerContext>,
    pub shards: Shards<CoreState>,
    pub storage: Rc<CoreStorage>,
    pub meta: RefCell<MetaState>,
    applied_index: Cell<u64>,
    applied_waiters: RefCell<Vec<Waker>>,
    pub partitions: RefCell<HashMap<PartitionKey, Rc<Partition>>>,
    /// The consumer groups this core coordinates (those of its `__consumer_offsets`
    /// partitions).
    pub groups: RefCell<Groups>,
    pub metrics: crate::metrics::CoreMetrics,
    /// Partitions being handed to another core (`shard move`): closed here and not reopened
    /// until the metastore says where they live.
    pub moving: RefCell<std::collections::HashSet<PartitionKey>>,
    /// Fan-out cursors running on this core (parent partitions it owns).
    pub cursors: RefCell<crate::fanout_runtime::Cursors>,
    /// Request frame bytes in flight on this core (`queued-max-request-bytes-per-core`): a
    /// connection takes its frame's size before reading the body and gives it back when the
    /// response is written or the request ends.
    pub request_bytes: Rc<glommio::sync::Semaphore>,
    /// The fault injector of this core's logs (`--enable-fault-injection` only).
    pub faults: Option<Rc<engine::io::FaultInjector>>,
}

impl CoreState {
    pub async fn new(
        core: usize,
        ctx: Arc<BrokerContext>,
        shards: Shards<CoreState>,
    ) -> std::io::Result<Rc<Self>> {
        let faults = ctx
            .config
            .fault_injection
            .then(engine::io::FaultInjector::new);
        let storage = match &faults {
            Some(f) => {
                CoreStorage::with_faults(
                    ctx.data_dir.clone(),
                    ctx.config.read_cache_segments,
                    f.clone(),
                )
                .await?
            }
            None => CoreStorage::new(ctx.data_dir.clone(), ctx.config.read_cache_segments).await?,
        };
        let request_bytes = ctx.config.queued_max_request_bytes_per_core as u64;
        Ok(Rc::new(Self {
            core,
            ctx,
            shards,
            storage,
            meta: RefCell::new(MetaState::default()),
            applied_index: Cell::new(0),
            applied_waiters: RefCell::new(Vec::new()),
            partitions: RefCell::new(HashMap::new()),
            groups: RefCell::new(Groups::new()),
            metrics: Default::default(),
            moving: RefCell::default(),
            cursors: RefCell::default(),
            request_bytes: Rc::new(glommio::sync::Semaphore::new(request_bytes)),
            faults,
        }))
    }

    pub fn node_id(&self) -> u64 {
        self.ctx.config.node_id
    }

    pub fn partition(&self, topic: &str, index: u32) -> Option<Rc<Partition>> {
        self.partitions
            .borrow()
            .get(&(topic.to_string(), index))
            .cloned()
    }

    /// The name of the topic with Kafka topic ID `id` (requests from v13 of Fetch, Produce
    /// and others name topics by ID).
    pub fn topic_name_by_id(&self, id: uuid::Uuid) -> Option<String> {
        self.meta
            .borrow()
            .topics
            .values()
            .find(|t| uuid::Uuid::from_bytes(t.topic_id) == id)
            .map(|t| t.name.clone())
    }

    /// The core that owns `topic`/`partition` on this node, per this core's metadata copy.
    pub fn owner_core(&self, topic: &str, partition: u32) -> Option<usize> {
        let m = self.meta.borrow();
        let a = m.assignment(topic, partition)?;
        (a.node_id == self.node_id()).then_some(a.core_index as usize)
    }

    /// The `__consumer_offsets` partition of `group` and the core that coordinates it.
    pub fn group_coordinator(&self, group: &str) -> Option<(u32, usize)> {
        let partitions = self.meta.borrow().topic(OFFSETS_TOPIC)?.partitions;
        let p = group::offsets_partition(group, partitions);
        Some((p, self.owner_core(OFFSETS_TOPIC, p)?))
    }

    pub fn initial_rebalance_delay(&self) -> Duration {
        Duration::from_millis(self.ctx.config.group_initial_rebalance_delay_ms)
    }

    pub fn applied_index(&self) -> u64 {
        self.applied_index.get()
    }

    /// Waits until this core has applied metadata up to `index` (partitions opened or closed).
    pub async fn wait_applied(&self, index: u64) {
        std::future::poll_fn(|cx| {
            if self.applied_index.get() >= index {
                Poll::Ready(())
            } else {
                self.applied_waiters.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    fn set_applied(&self, index: u64) {
        self.applied_index.set(index);
        for w in self.applied_waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Subscribes to the metastore, opens this core's partitions, then applies every change
    /// as it arrives. Runs for the life of the core.
    pub async fn start_meta_follower(self: &Rc<Self>) -> Result<(), String> {
        let (index, state, changes) = self
            .ctx
            .meta
            .subscribe()
            .await
            .map_err(|e| format!("subscribing to the metastore: {e}"))?;
        *self.meta.borrow_mut() = state;
        self.reconcile().await;
        self.set_applied(index);
        let me = self.clone();
        glommio::spawn_local(async move {
            while let Ok(AppliedChange { log_index, change }) = changes.recv_async().await {
                for name in deleted_topics(&change) {
                    crate::api::group::forget_topic(&me, &name).await;
                }
                me.meta.borrow_mut().apply_change(&change);
                me.reconcile().await;
                me.set_applied(log_index);
            }
        })
        .detach();
        Ok(())
    }

    /// Opens the partitions the metadata assigns to this core and closes the others; deletes
    /// the files of partitions whose topic is gone.
    async fn reconcile(&self) {
        let (desired, configs) = {
            let m = self.meta.borrow();
            let mut desired: HashMap<PartitionKey, String> = HashMap::new();
            let mut configs = HashMap::new();
            for (name, assignments) in &m.assignments {
                let Some(topic) = m.topic(name) else { continue };
                for (p, a) in assignments.iter().enumerate() {
                    if a.node_id == self.node_id() && a.core_index as usize == self.core {
                        desired.insert((name.clone(), p as u32), topic.incarnation_id.clone());
                    }
                }
                configs.insert(name.clone(), topic.configs.clone());
            }
            (desired, configs)
        };
        let desired: HashMap<PartitionKey, String> = {
            let mut moving = self.moving.borrow_mut();
            moving.retain(|k| desired.contains_key(k));
            desired
                .into_iter()
                .filter(|(k, _)| !moving.contains(k))
                .collect()
        };
        let stale: Vec<(PartitionKey, Rc<Partition>)> = self
            .partitions
            .borrow()
            .iter()
            .filter(|(k, p)| desired.get(*k) != Some(&p.incarnation))
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        for (key, p) in stale {
            self.partitions.borrow_mut().remove(&key);
            if key.0 == OFFSETS_TOPIC {
                self.groups.borrow_mut().retain(|_, g| g.partition != key.1);
            }
            if let Err(e) = p.log.close().await {
                tracing::warn!(topic = %key.0, partition = key.1, error = %e, "closing partition");
            }
            let topic_alive = self
                .meta
                .borrow()
                .topic(&key.0)
                .is_some_and(|t| t.incarnation_id == p.incarnation);
            if !topic_alive {
                let dir = p.log.dir().to_path_buf();
                if let Err(e) = std::fs::remove_dir_all(&dir) {
                    tracing::warn!(dir = %dir.display(), error = %e, "removing deleted partition");
                }
                let _ = std::fs::remove_dir(dir.parent().unwrap_or(&dir));
                tracing::info!(topic = %key.0, partition = key.1, core = self.core, "partition deleted");
            }
        }
        let mut wanted: Vec<(PartitionKey, String)> = desired
            .into_iter()
            .filter(|(k, _)| !self.partitions.borrow().contains_key(k))
            .collect();
        wanted.sort();
        for ((topic, index), incarnation) in wanted {
            let cfg = configs.get(&topic).cloned().unwrap_or_default();
            match self.open_partition(&topic, index, &incarnation, &cfg).await {
                Ok(p) => {
                    self.partitions
                        .borrow_mut()
                        .insert((topic, index), Rc::new(p));
                }
                Err(e) => {
                    tracing::error!(%topic, partition = index, error = %e, "cannot open partition")
                }
            }
        }
        // Configs of open partitions follow the metadata.
        for p in self.partitions.borrow().values() {
            if let Some(cfg) = configs.get(&p.topic) {
                if let Ok(lc) = topic_config::to_log_config(cfg, &self.ctx.config.log_defaults) {
                    if let Err(e) = p.log.set_config(lc) {
                        tracing::warn!(topic = %p.topic, error = %e, "applying topic config");
                    }
                }
            }
        }
    }

    fn partition_dir(&self, topic: &str, index: u32) -> PathBuf {
        self.ctx.data_dir.partition_dir(topic, index)
    }

    async fn open_partition(
        &self,
        topic: &str,
        index: u32,
        incarnation: &str,
        configs: &std::collections::BTreeMap<String, String>,
    ) -> Result<Partition, String> {
        let fd_slot = self.ctx.fd_budget.try_open().ok_or_else(|| {
            format!(
                "not served: the node's fd budget of {} open partitions is full (fd limit {}); raise the fd limit (ulimit -n) and restart, or delete partitions",
                self.ctx.fd_budget.max_open_partitions, self.ctx.fd_budget.fd_limit
            )
        })?;
        let dir = self.partition_dir(topic, index);
        let inc_path = dir.join(INCARNATION_FILE_NAME);
        let on_disk = engine::io::read_small(&inc_path).map_err(|e| e.to_string())?;
        match on_disk {
            Some(b) if b == incarnation.as_bytes() => {}
            other => {
                if dir.exists() {
                    tracing::warn!(dir = %dir.display(), found = ?other.map(|b| String::from_utf8_lossy(&b).into_owned()), "partition dir of another topic incarnation; removing it");
                    std::fs::remove_dir_all(&dir)
                        .map_err(|e| format!("removing {}: {e}", dir.display()))?;
                }
                engine::io::create_dir_all(&dir).map_err(|e| e.to_string())?;
                engine::io::write_atomic(&inc_path, incarnation.as_bytes())
                    .map_err(|e| e.to_string())?;
            }
        }
        let log_config = topic_config::to_log_config(configs, &self.ctx.config.log_defaults)
            .unwrap_or_else(|_| self.ctx.config.log_defaults.clone());
        let (log, summary) = PartitionLog::open(&self.storage, dir, log_config)
            .await
            .map_err(|e| e.to_string())?;
        let producers = rebuild_producer_state(&log)
            .await
            .map_err(|e| e.to_string())?;
        if topic == OFFSETS_TOPIC {
            self.replay_offsets(&log, index)
                .await
                .map_err(|e| e.to_string())?;
        }
        crate::metrics::CoreMetrics::add(&self.metrics.recovered_partitions, 1);
        crate::metrics::CoreMetrics::add(
            &self.metrics.recovery_segments_scanned,
            summary.segments_scanned as u64,
        );
        crate::metrics::CoreMetrics::add(
            &self.metrics.recovery_truncations,
            summary.truncations.len() as u64,
        );
        tracing::info!(
            core = self.core,
            next_offset = summary.next_offset,
            scanned = summary.segments_scanned,
            truncated = summary.truncations.len(),
            "partition {topic}/{index} opened on core {}",
            self.core
        );
        Ok(Partition {
            topic: topic.to_string(),
            index,
            incarnation: incarnation.to_string(),
            log,
            producers: RefCell::new(producers),
            _fd_slot: fd_slot,
        })
    }

    /// Loads the committed offsets of the groups in one `__consumer_offsets` partition.
    async fn replay_offsets(
        &self,
        log: &PartitionLog,
        partition: u32,
    ) -> Result<(), engine::LogError> {
        let mut next = log.log_start_offset();
        let hwm = log.high_watermark();
        let mut records = 0;
        while next < hwm {
            let bytes = log.read(next, REBUILD_READ_BYTES).await?;
            if bytes.is_empty() {
                break;
            }
            let mut last = next;
            let mut rest: &[u8] = &bytes;
            while let Some(size) = engine::batch::declared_size(rest) {
                let size = size as usize;
                if size > rest.len() {
                    break;
                }
                if let Ok(h) = engine::batch::parse_header(&rest[..size]) {
                    last = last.max(h.last_offset() as u64 + 1);
                }
                rest = &rest[size..];
            }
            records += group::replay(
                &mut self.groups.borrow_mut(),
                &bytes,
                partition,
                self.initial_rebalance_delay(),
            );
            if last <= next {
                break;
            }
            next = last;
        }
        tracing::info!(
            partition,
            records,
            core = self.core,
            "replayed committed offsets"
        );
        Ok(())
    }

    /// Drives the timers of this core's groups (session expiry, rebalance deadlines).
    pub async fn group_tick_loop(self: Rc<Self>) {
        loop {
            glommio::timer::sleep(Duration::from_millis(group::GROUP_TICK_MS)).await;
            let now = std::time::Instant::now();
            let mut groups = self.groups.borrow_mut();
            for g in groups.values_mut() {
                g.group.tick(now);
            }
            // A group with nobody in it and nothing committed holds no state worth keeping.
            groups.retain(|_, g| !(g.group.is_vacant() && g.offsets.is_empty()));
        }
    }

    /// Applies retention to every partition of this core every `retention_check_interval_ms`.
    pub async fn retention_loop(self: Rc<Self>) {
        let interval = Duration::from_millis(self.ctx.config.retention_check_interval_ms.max(1));
        loop {
            glommio::timer::sleep(interval).await;
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0);
            let parts: Vec<Rc<Partition>> = self.partitions.borrow().values().cloned().collect();
            for p in parts {
                if let Err(e) = p.log.enforce_retention(now).await {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "retention");
                }
            }
        }
    }

    /// This core's figures for a metrics scrape.
    pub fn snapshot(&self) -> crate::metrics::Snapshot {
        let mut s = crate::metrics::Snapshot {
            core: self.core,
            fsync_latency: self.storage.flush_latency(),
            cross_core_received: self.shards.received(self.core),
            inbox_depth: self.shards.inbox_len(self.core) as u64,
            busy_seconds: {
                // glommio hands out (and resets) the runtime since the last call: accumulate.
                let m = &self.metrics.busy_seconds;
                m.set(
                    m.get()
                        + glommio::executor()
                            .executor_stats()
                            .executor_runtime()
                            .as_secs_f64(),
                );
                m.get()
            },
            groups: self.groups.borrow().len() as u64,
            ..Default::default()
        };
        self.metrics.snapshot_into(&mut s);
        let mut parts: Vec<crate::metrics::PartitionFigures> = self
            .partitions
            .borrow()
            .values()
            .map(|p| crate::metrics::PartitionFigures {
                topic: p.topic.clone(),
                partition: p.index,
                log_bytes: p.log.size_bytes(),
                high_watermark: p.log.high_watermark(),
                log_start_offset: p.log.log_start_offset(),
                segments: p.log.segment_count(),
            })
            .collect();
        parts.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        s.partitions = parts;
        s.cursors = self
            .cursors
            .borrow()
            .stats()
            .into_iter()
            .map(
                |(parent, partition, child, _delay, st)| crate::metrics::CursorFigures {
                    parent,
                    partition,
                    child,
                    lag_messages: st.lag_messages.get(),
                    due_lag_ms: st.due_lag_ms.get(),
                    committed: st.committed_total.get(),
                    dropped: st.dropped_total.get(),
                },
            )
            .collect();
        s
    }

    /// First step of a partition move: stop serving `topic`/`index` here and close it cleanly
    /// (flush, sync, seal), so its new owner core opens it without recovery.
    pub async fn release_partition(&self, topic: &str, index: u32) -> Result<(), String> {
        let key = (topic.to_string(), index);
        self.moving.borrow_mut().insert(key.clone());
        let part = self.partitions.borrow_mut().remove(&key);
        match part {
            Some(p) => p.log.close().await.map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Undoes `release_partition` when the move could not be recorded.
    pub async fn resume_partition(&self, topic: &str, index: u32) {
        self.moving.borrow_mut().remove(&(topic.to_string(), index));
        self.reconcile().await;
    }

    /// Closes every partition cleanly (flush, sync, clean-shutdown marker).
    pub async fn close_all(&self) {
        let parts: Vec<Rc<Partition>> = self
            .partitions
            .borrow_mut()
            .drain()
            .map(|(_, p)| p)
            .collect();
        for p in parts {
            if let Err(e) = p.log.close().await {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "closing partition");
            }
        }
    }
}

/// Topics a metastore change deletes (a batch may hold several changes).
fn deleted_topics(change: &meta::Change) -> Vec<String> {
    match change {
        meta::Change::TopicDeleted { name, .. } => vec![name.clone()],
        meta::Change::Batch(changes) => changes.iter().flat_map(deleted_topics).collect(),
        _ => Vec::new(),
    }
}

/// Rebuilds idempotent-producer state from the last `PRODUCER_STATE_REBUILD_OFFSETS` of a log.
async fn rebuild_producer_state(log: &PartitionLog) -> Result<ProducerStates, engine::LogError> {
    let mut states = ProducerStates::default();
    let hwm = log.high_watermark();
    let mut next = log
        .log_start_offset()
        .max(hwm.saturating_sub(PRODUCER_STATE_REBUILD_OFFSETS));
    while next < hwm {
        let bytes = log.read(next, REBUILD_READ_BYTES).await?;
        if bytes.is_empty() {
            break;
        }
        let before = next;
        let mut rest: &[u8] = &bytes;
        while let Some(size) = engine::batch::declared_size(rest) {
            let size = size as usize;
            if size > rest.len() || size == 0 {
                break;
            }
            if let Ok(h) = engine::batch::parse_header(&rest[..size]) {
                states.record(&h, h.base_offset as u64);
                next = next.max(h.last_offset() as u64 + 1);
            }
            rest = &rest[size..];
        }
        if next <= before {
            break;
        }
    }
    Ok(states)
}
