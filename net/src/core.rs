//! One core's state, in owned parts: its copy of the metadata (`MetaCopy`), the partitions it
//! serves (`DataPath`), its coordinators (`Coordinators`), its budgets and quotas
//! (`Admission`), metrics and injected faults; and the lookups every handler uses (owner
//! core of a partition, coordinator of a group). The bottom of net: it imports no handler; `reconcile` keeps it in step with the
//! metastore and `route` carries work between cores.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use engine::shard::Shards;
use engine::{CoreStorage, DataDir, Partition};
use meta::{MetaHandle, MetaState};

use crate::config::BrokerConfig;
use crate::group::{self, Groups, OFFSETS_TOPIC};
use crate::replica_state::Role;
use glommio::sync::Semaphore;

/// Frames of `sasl-server-max-receive-bytes` that SASL clients not yet authenticated may have
/// in flight on one core together (`CoreState::admission.pre_auth_request_bytes`): unauthenticated
/// connections wait on each other past it, never on authenticated work.
pub const PRE_AUTH_FRAMES_PER_CORE: u64 = 64;

/// What every core shares: settings, the metastore handle, the data dir.
pub struct BrokerContext {
    pub config: BrokerConfig,
    pub meta: MetaHandle,
    pub data_dir: Arc<DataDir>,
    pub cluster_id: String,
    /// The producer ids of this start: the block the metastore handed it
    /// (`Command::AllocateProducerIds`), unique in the cluster.
    next_producer_id: AtomicI64,
    producer_ids_end: i64,
    pub shutdown: flume::Receiver<()>,
    /// Open Kafka connections, broker-wide and per client IP (`max-connections`,
    /// `max-connections-per-ip`); touched at accept and close only.
    pub connections: crate::conn_table::ConnectionTable,
    /// Partitions this node serves, and each core's open-file budget.
    pub fd_budget: crate::fd_budget::FdBudget,
    /// This node's brokers as clients see them (one, or one per core in core-direct mode):
    /// every broker id and endpoint a handler answers comes from here.
    pub brokers: crate::brokers::BrokerMap,
    /// What each core applied of the metastore, for other nodes' `WaitApplied`.
    pub applied: meta::node::AppliedWatermark,
}

impl BrokerContext {
    pub fn new(
        config: BrokerConfig,
        meta: MetaHandle,
        data_dir: Arc<DataDir>,
        shutdown: flume::Receiver<()>,
        brokers: crate::brokers::BrokerMap,
        joined: crate::cluster::Joined,
        applied: meta::node::AppliedWatermark,
    ) -> Self {
        let cores = config.cpus.len().max(1);
        let fd_budget = crate::fd_budget::FdBudget::from_process_limit(
            config.read_cache_segments * crate::fd_budget::FDS_PER_CACHED_SEGMENT * cores,
            cores,
            config.max_open_files,
            config.max_partitions,
        );
        Self {
            meta,
            data_dir,
            next_producer_id: AtomicI64::new(joined.producer_ids.start),
            producer_ids_end: joined.producer_ids.end,
            cluster_id: joined.cluster_id,
            connections: Default::default(),
            fd_budget,
            config,
            shutdown,
            brokers,
            applied,
        }
    }

    /// A producer id no other producer of the cluster has; `None` once this start's block is
    /// used up (2^32 ids: a restart takes a new block).
    pub fn allocate_producer_id(&self) -> Option<i64> {
        let id = self.next_producer_id.fetch_add(1, Ordering::Relaxed);
        if id < self.producer_ids_end {
            Some(id)
        } else {
            tracing::error!(
                "this start's producer ids are used up: restart the node for a new block"
            );
            None
        }
    }
}

pub type PartitionKey = (String, u32);

/// The topics the broker writes itself (`__consumer_offsets`, `__transaction_state`,
/// `__barrier_state`): clients read them but cannot produce to or delete them.
pub fn is_internal_topic(name: &str) -> bool {
    name == OFFSETS_TOPIC
        || name == crate::txn::TXN_STATE_TOPIC
        || name == crate::barrier::format::BARRIER_STATE_TOPIC
}

/// The core of node `node_id` that owns `topic`/`partition` in metadata `m`.
pub fn owner_core_in(m: &MetaState, node_id: u64, topic: &str, partition: u32) -> Option<usize> {
    let a = m.assignment(topic, partition)?;
    (a.node_id == node_id).then_some(a.core_index as usize)
}

/// A partition this core owns: the engine's `Partition` (log, producer state, directory) with
/// the topic it belongs to and its place in the node's partition budget (`max-partitions`).
pub struct OwnedPartition {
    pub topic: String,
    pub index: u32,
    pub partition: Rc<Partition>,
    /// This partition's place in the node's partition budget.
    pub _fd_slot: crate::fd_budget::PartitionSlot,
    /// What Produce and Fetch moved through it on this core (metrics, `shards --hot`).
    pub traffic: crate::metrics::PartitionCounters,
}

impl std::ops::Deref for OwnedPartition {
    type Target = Partition;

    fn deref(&self) -> &Partition {
        &self.partition
    }
}

pub struct CoreState {
    pub core: usize,
    /// This state itself, for the tasks it spawns (a partition's open outlives its request).
    pub(crate) me: std::rc::Weak<CoreState>,
    pub ctx: Arc<BrokerContext>,
    pub shards: Shards<CoreState>,
    /// This core's copy of the metastore's state.
    pub meta: MetaCopy,
    /// The partitions this core serves: storage, open partitions, replicas, cursors.
    pub data: DataPath,
    /// The coordinators of the internal topics' partitions this core owns.
    pub coordinators: Coordinators,
    /// What a client may make this core hold or do: request bytes in flight, quotas.
    pub admission: Admission,
    pub metrics: crate::metrics::CoreMetrics,
    /// Faults injected for tests (`--enable-fault-injection` only).
    pub fault_injection: FaultInjection,
}

/// One core's copy of the metastore's state (`crate::reconcile` keeps it in step) and what
/// is derived from it.
pub struct MetaCopy {
    state: RefCell<MetaState>,
    /// Topic ID → name of the copy's topics (requests from v13 of Fetch, Produce and others,
    /// and KIP-848 assignments, name topics by ID), rebuilt when the copy changes.
    pub(crate) topic_ids: RefCell<HashMap<uuid::Uuid, String>>,
    pub(crate) applied_index: Cell<u64>,
    applied_waiters: RefCell<Vec<Waker>>,
}

impl MetaCopy {
    pub fn borrow(&self) -> std::cell::Ref<'_, MetaState> {
        self.state.borrow()
    }

    pub fn borrow_mut(&self) -> std::cell::RefMut<'_, MetaState> {
        self.state.borrow_mut()
    }
}

/// The partitions one core serves and what runs on them.
pub struct DataPath {
    pub storage: Rc<CoreStorage>,
    /// The partitions this core has open; those assigned to it and not open yet are in
    /// `openings` (see `crate::opening`).
    pub partitions: RefCell<HashMap<PartitionKey, Rc<OwnedPartition>>>,
    pub openings: crate::unopened::Openings,
    /// Partitions being handed to another core (`shard move`): closed here and not reopened
    /// until the metastore says where they live.
    pub moving: RefCell<std::collections::HashSet<PartitionKey>>,
    /// Follower replicas closed to be cut and reopened (`crate::replica`): reconcile leaves
    /// them alone until they are back.
    pub truncating: RefCell<std::collections::HashSet<PartitionKey>>,
    /// This core's replicas of replicated partitions and their roles (`crate::replica_state`,
    /// run by `crate::replica`).
    pub replicas: RefCell<crate::replica_state::Replicas>,
    /// Fan-out cursors running on this core (parent partitions it owns).
    pub cursors: RefCell<crate::cursor_registry::Cursors>,
}

/// The coordinators of one core: each serves the keys of the internal-topic partitions the
/// core owns.
#[derive(Default)]
pub struct Coordinators {
    /// The consumer groups this core coordinates (those of its `__consumer_offsets`
    /// partitions).
    pub groups: RefCell<Groups>,
    /// The transactional ids this core coordinates (those of its `__transaction_state`
    /// partitions).
    pub txns: RefCell<crate::txn::Txns>,
    /// The barrier groups this core coordinates (those of its `__barrier_state` partitions).
    pub barriers: RefCell<crate::barrier::BarrierStates>,
}

/// The bounds on what clients make one core hold, and their quotas.
pub struct Admission {
    /// Request frame bytes in flight on this core (`queued-max-request-bytes-per-core`): a
    /// connection takes its frame's size before reading the body and gives it back when the
    /// response is written or the request ends.
    pub request_bytes: Rc<glommio::sync::Semaphore>,
    /// Frame bytes in flight on this core from SASL clients that have not authenticated yet
    /// (`PRE_AUTH_FRAMES_PER_CORE` frames of `sasl-server-max-receive-bytes`):
    /// apart from `request_bytes`, so that they can never take what authenticated work needs.
    pub pre_auth_request_bytes: Rc<glommio::sync::Semaphore>,
    /// The client-quota buckets of this core's clients (`crate::quota`).
    pub quotas: RefCell<crate::quota::Quotas>,
    /// The fetch sessions of this core's clients (`crate::fetch_session`), at most this core's
    /// share of `max-incremental-fetch-session-cache-slots`.
    pub fetch_sessions: RefCell<crate::fetch_session::FetchSessions>,
}

/// Faults injected for tests (`--enable-fault-injection` only).
#[derive(Default)]
pub struct FaultInjection {
    /// The fault injector of this core's logs.
    pub faults: Option<Rc<engine::io::FaultInjector>>,
    /// The nodes this core's node calls fail to (`POST /v1/debug/node-rpc-fault`): a
    /// simulated network partition.
    pub node_rpc_cut: RefCell<std::collections::HashSet<u64>>,
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
        let options = engine::CoreStorageOptions {
            read_cache_segments: ctx.config.read_cache_segments,
            storage_io: ctx.config.storage_io,
            registered_buffer_bytes: ctx.config.registered_buffer_bytes,
            tail_cache_bytes: ctx.config.tail_cache_bytes,
            max_open_files: ctx.fd_budget.max_open_files_per_core,
        };
        let storage = CoreStorage::open(ctx.data_dir.clone(), options, faults.clone()).await?;
        let request_bytes = ctx.config.queued_max_request_bytes_per_core as u64;
        let pre_auth_request_bytes =
            PRE_AUTH_FRAMES_PER_CORE * ctx.config.sasl_server_max_receive_bytes as u64;
        // The node's session slots, split between its cores (each has one at least unless
        // the node has none).
        let (slots, cores) = (
            ctx.config.max_incremental_fetch_session_cache_slots,
            ctx.config.cores(),
        );
        let session_slots = if slots == 0 {
            0
        } else {
            (slots / cores).max(1)
        };
        let session_seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ ((core as u64) << 48);
        Ok(Rc::new_cyclic(|me| Self {
            core,
            me: me.clone(),
            ctx,
            shards,
            meta: MetaCopy {
                state: RefCell::new(MetaState::default()),
                topic_ids: RefCell::default(),
                applied_index: Cell::new(0),
                applied_waiters: RefCell::new(Vec::new()),
            },
            data: DataPath {
                storage,
                partitions: RefCell::new(HashMap::new()),
                openings: Default::default(),
                moving: RefCell::default(),
                truncating: RefCell::default(),
                replicas: RefCell::default(),
                cursors: RefCell::default(),
            },
            coordinators: Coordinators::default(),
            admission: Admission {
                request_bytes: Rc::new(glommio::sync::Semaphore::new(request_bytes)),
                pre_auth_request_bytes: Rc::new(glommio::sync::Semaphore::new(
                    pre_auth_request_bytes,
                )),
                quotas: RefCell::default(),
                fetch_sessions: RefCell::new(crate::fetch_session::FetchSessions::new(
                    session_slots,
                    session_seed,
                    core,
                    cores,
                )),
            },
            metrics: Default::default(),
            fault_injection: FaultInjection {
                faults,
                node_rpc_cut: RefCell::default(),
            },
        }))
    }

    /// Whether this core serves clients for `topic`/`partition` as far as replication goes: a
    /// partition not replicated, or one this core leads with its epoch started.
    pub fn leads(&self, topic: &str, partition: u32) -> bool {
        self.serving_epoch(topic, partition).is_some()
    }

    /// The leader epoch this core serves clients of `topic`/`partition` at: 0 for a
    /// partition not replicated (its epoch never changes), the started epoch of one this
    /// core leads; `None` when it does not lead it.
    pub fn serving_epoch(&self, topic: &str, partition: u32) -> Option<i32> {
        if self.meta.borrow().replica_set(topic, partition).is_none() {
            return Some(0);
        }
        match self
            .data
            .replicas
            .borrow()
            .map
            .get(&(topic.to_string(), partition))
        {
            Some(r) if r.ready => match r.role {
                Role::Leader { epoch } => Some(epoch),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether this core coordinates the keys of internal partition `topic`/`partition`
    /// now (`__consumer_offsets`, `__transaction_state`, `__barrier_state`: one not
    /// replicated, or a replicated one's leader with its state loaded); else the
    /// coordinator error: COORDINATOR_LOAD_IN_PROGRESS while this core is the partition's
    /// leader but has not loaded it yet, NOT_COORDINATOR when another replica leads.
    pub fn check_coordinates(&self, topic: &str, partition: u32) -> Result<(), i16> {
        if self.leads(topic, partition) {
            Ok(())
        } else if self.owner_core(topic, partition) == Some(self.core) {
            Err(crate::codes::COORDINATOR_LOAD_IN_PROGRESS)
        } else {
            Err(crate::codes::NOT_COORDINATOR)
        }
    }

    pub fn current(&self, key: &PartitionKey, generation: u64) -> bool {
        self.data
            .replicas
            .borrow()
            .map
            .get(key)
            .is_some_and(|r| r.generation == generation)
    }

    pub fn role_lock(&self, key: &PartitionKey) -> Rc<Semaphore> {
        self.data
            .replicas
            .borrow_mut()
            .locks
            .entry(key.clone())
            .or_insert_with(|| Rc::new(Semaphore::new(1)))
            .clone()
    }

    pub fn node_id(&self) -> u64 {
        self.ctx.config.node_id
    }

    /// The partition `topic`/`index` if this core has it open (`partition` also opens one
    /// assigned here and not open yet).
    pub fn partition_if_open(&self, topic: &str, index: u32) -> Option<Rc<OwnedPartition>> {
        self.data
            .partitions
            .borrow()
            .get(&(topic.to_string(), index))
            .cloned()
    }

    /// The name of the topic with Kafka topic ID `id` (requests from v13 of Fetch, Produce
    /// and others name topics by ID).
    pub fn topic_name_by_id(&self, id: uuid::Uuid) -> Option<String> {
        self.meta.topic_ids.borrow().get(&id).cloned()
    }

    /// Rebuilds the topic-ID index from this core's metadata copy (after it changed).
    pub(crate) fn index_topic_ids(&self) {
        let index = self
            .meta
            .borrow()
            .topics
            .values()
            .map(|t| (uuid::Uuid::from_bytes(t.topic_id), t.name.clone()))
            .collect();
        *self.meta.topic_ids.borrow_mut() = index;
    }

    /// The core that owns `topic`/`partition` on this node, per this core's metadata copy.
    pub fn owner_core(&self, topic: &str, partition: u32) -> Option<usize> {
        owner_core_in(&self.meta.borrow(), self.node_id(), topic, partition)
    }

    /// The cluster's brokers as this core's metadata copy `m` lists them.
    pub fn cluster_brokers<'a>(&'a self, m: &'a MetaState) -> crate::brokers::ClusterBrokers<'a> {
        self.cluster_brokers_on(m, 0)
    }

    /// The cluster's brokers as clients on listener `listener` reach them (0: the primary).
    pub fn cluster_brokers_on<'a>(
        &'a self,
        m: &'a MetaState,
        listener: usize,
    ) -> crate::brokers::ClusterBrokers<'a> {
        let extra = listener
            .checked_sub(1)
            .and_then(|i| self.ctx.config.extra_listeners.get(i))
            .map(|l| {
                let (host, port) = self.ctx.config.advertised_extra(l);
                (l.name.as_str(), host, port)
            });
        crate::brokers::ClusterBrokers {
            own: &self.ctx.brokers,
            meta: m,
            listener: extra,
        }
    }

    /// The broker clients see leading `topic`/`partition`: its owner core's (core-direct),
    /// else its node's; `None` when its node is fenced or not registered (the partition is
    /// unavailable until the node is back) or the partition does not exist.
    pub fn leader_in(
        &self,
        m: &MetaState,
        topic: &str,
        partition: u32,
    ) -> Option<crate::brokers::Endpoint> {
        self.cluster_brokers(m)
            .endpoint(m.assignment(topic, partition)?)
    }

    /// [`Self::leader_in`]'s broker id alone.
    pub fn leader_id_in(&self, m: &MetaState, topic: &str, partition: u32) -> Option<i32> {
        if m.replica_set(topic, partition)
            .is_some_and(|r| r.leader.is_none())
        {
            return None;
        }
        self.cluster_brokers(m)
            .broker_id(m.assignment(topic, partition)?)
    }

    /// `topic`/`partition`'s owner when another node owns it (per this core's copy).
    pub fn remote_owner(&self, topic: &str, partition: u32) -> Option<meta::Assignment> {
        self.meta
            .borrow()
            .assignment(topic, partition)
            .filter(|a| a.node_id != self.node_id())
    }

    /// The Kafka error for a partition request that reached a node not owning the
    /// partition: NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and goes to the
    /// owner) for a partition placed on another node, else UNKNOWN_TOPIC_OR_PARTITION.
    pub fn not_owned_code(&self, topic: &str, partition: u32) -> i16 {
        match self.meta.borrow().assignment(topic, partition) {
            Some(a) if a.node_id != self.node_id() => crate::codes::NOT_LEADER_OR_FOLLOWER,
            _ => crate::codes::UNKNOWN_TOPIC_OR_PARTITION,
        }
    }

    /// The Kafka error for a coordinator request that reached a node not coordinating the
    /// key: NOT_COORDINATOR when `internal`'s partition `p` is placed on another node (the
    /// client finds the coordinator again), else COORDINATOR_NOT_AVAILABLE.
    pub fn not_coordinator_code(&self, internal: &str, key_partition: Option<u32>) -> i16 {
        let m = self.meta.borrow();
        let elsewhere = key_partition
            .and_then(|p| m.assignment(internal, p))
            .is_some_and(|a| a.node_id != self.node_id());
        if elsewhere {
            crate::codes::NOT_COORDINATOR
        } else {
            crate::codes::COORDINATOR_NOT_AVAILABLE
        }
    }

    /// The `__consumer_offsets` partition of `group` (whoever owns it).
    pub fn group_partition(&self, group: &str) -> Option<u32> {
        let partitions = self.meta.borrow().topic(OFFSETS_TOPIC)?.partitions;
        Some(group::offsets_partition(group, partitions))
    }

    /// The `__transaction_state` partition of `transactional_id` (whoever owns it).
    pub fn txn_partition(&self, transactional_id: &str) -> Option<u32> {
        let partitions = self
            .meta
            .borrow()
            .topic(crate::txn::TXN_STATE_TOPIC)?
            .partitions;
        Some(crate::txn::txn_partition(transactional_id, partitions))
    }

    /// The `__consumer_offsets` partition of `group` and the core of this node that
    /// coordinates it; `None` when no core here does.
    pub fn group_coordinator(&self, group: &str) -> Option<(u32, usize)> {
        let p = self.group_partition(group)?;
        Some((p, self.owner_core(OFFSETS_TOPIC, p)?))
    }

    /// The `__transaction_state` partition of `transactional_id` and the core of this node
    /// that coordinates it; `None` when no core here does.
    pub fn txn_coordinator(&self, transactional_id: &str) -> Option<(u32, usize)> {
        let p = self.txn_partition(transactional_id)?;
        Some((p, self.owner_core(crate::txn::TXN_STATE_TOPIC, p)?))
    }

    /// The limits of KIP-848 consumer groups (`group-consumer-*`).
    pub fn consumer_group_limits(&self) -> crate::group::consumer::ConsumerGroupLimits {
        let c = &self.ctx.config;
        crate::group::consumer::ConsumerGroupLimits {
            session_timeout: Duration::from_millis(c.group_consumer_session_timeout_ms),
            heartbeat_interval: Duration::from_millis(c.group_consumer_heartbeat_interval_ms),
            max_size: c.group_consumer_max_size,
        }
    }

    pub fn initial_rebalance_delay(&self) -> Duration {
        Duration::from_millis(self.ctx.config.group_initial_rebalance_delay_ms)
    }

    pub fn applied_index(&self) -> u64 {
        self.meta.applied_index.get()
    }

    /// Waits until this core has applied metadata up to `index` (partitions opened or closed).
    pub async fn wait_applied(&self, index: u64) {
        std::future::poll_fn(|cx| {
            if self.meta.applied_index.get() >= index {
                Poll::Ready(())
            } else {
                // One entry per waiting task, however often it is polled: the list is bounded
                // by the requests in flight (a task's waker clones count in glommio's i16).
                let mut waiters = self.meta.applied_waiters.borrow_mut();
                if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    waiters.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
        .await
    }

    pub(crate) fn set_applied(&self, index: u64) {
        self.meta.applied_index.set(index);
        self.ctx.applied.report(self.core, index);
        for w in self.meta.applied_waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// This core's figures for a metrics scrape.
    pub fn snapshot(&self) -> crate::metrics::Snapshot {
        let mut s = crate::metrics::Snapshot {
            core: self.core,
            fsync_latency: self.data.storage.flush_latency(),
            tail_cache: self.data.storage.tail_cache().stats(),
            storage_ring_ops: self
                .data
                .storage
                .ring_stats()
                .map_or(0, |r| r.submitted_ops),
            file_pool: self.data.storage.file_pool_stats(),
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
            groups: self.coordinators.groups.borrow().len() as u64,
            fetch_sessions: self.admission.fetch_sessions.borrow().len() as u64,
            fetch_session_evictions: self.admission.fetch_sessions.borrow().evictions,
            group_offsets: self
                .coordinators
                .groups
                .borrow()
                .iter()
                .flat_map(|(id, g)| {
                    g.offsets
                        .iter()
                        .map(move |((t, p), c)| (id.clone(), t.clone(), *p, c.offset))
                })
                .collect(),
            ..Default::default()
        };
        self.metrics.snapshot_into(&mut s);
        s.barrier.latest_epochs = self
            .coordinators
            .barriers
            .borrow()
            .iter()
            .filter_map(|(g, st)| Some((g.clone(), st.latest()?.epoch)))
            .collect();
        let now_ms = self.data.storage.clock().now_ms();
        let mut parts: Vec<crate::metrics::PartitionFigures> = self
            .data
            .partitions
            .borrow()
            .values()
            .map(|p| crate::metrics::PartitionFigures {
                topic: p.topic.clone(),
                partition: p.index,
                log_bytes: p.log().size_bytes(),
                high_watermark: p.log().high_watermark(),
                log_start_offset: p.log().log_start_offset(),
                segments: p.log().segment_count(),
                traffic: p.traffic.get(),
                cleaner: p.log().dirty_info(now_ms).map(|d| {
                    let since = d.last_clean_ms.map(|t| (now_ms - t).max(0) as f64 / 1000.0);
                    (d.dirty_ratio, since)
                }),
            })
            .collect();
        parts.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        s.partitions = parts;
        s.unopened_partitions = self.data.openings.unopened_count() as u64;
        s.cursors = self
            .data
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
}
