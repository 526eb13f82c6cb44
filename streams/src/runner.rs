//! The group runner (seed 003, "Alignment", "The snapshot", "Restore", "Transactions"): a
//! consumer-group member that runs a [`Topology`] over its input partitions, aligns on the
//! cuts of a barrier group, snapshots every task at the barrier and commits the cut.
//!
//! A round ([`GroupRunner::run_once`]):
//! 1. polls a batch (at most `max_round_records`, at most `round_poll_ms`);
//! 2. takes in the rebalances that happened meanwhile: a revoked task's state is saved under
//!    [`NO_EPOCH`] with the positions it is at and dropped; an assigned task's state is
//!    restored (an explicit restore target, else its rebalance snapshot when that is not
//!    behind the commit, else the snapshot of the epoch its offsets were committed at);
//! 3. reads `__barrier_state` up to the high watermark of the group's partition asked just
//!    now (the producer's connection, which no long-poll holds): every marker in the batch
//!    was written after its injection-start was durable, so the batch is judged against
//!    every cut and injection that can touch it;
//! 4. runs what alignment lets run ([`crate::align`]), produces what the topology emits;
//! 5. fires the barrier when every aligned partition reached the cut: the outputs before it
//!    are acknowledged (or go into the transaction), each task is snapshotted under the
//!    cut's epoch, then the offsets are committed (the epoch in their metadata).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, DefaultConsumerContext,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{Offset, TopicPartitionList};

use crate::align::{Aligner, Fired, Offered};
use crate::{
    BarrierCut, CutReader, CutReaderError, Output, Record, StateStore, StateStoreError,
    TopicPartition, Topology, BARRIER_STATE_TOPIC, NO_EPOCH,
};

/// The memory records after a cut may take while they wait for the barrier, by default.
pub const DEFAULT_MAX_HELD_BYTES: usize = 64 << 20;
/// The most records one round polls, by default.
pub const DEFAULT_MAX_ROUND_RECORDS: usize = 10_000;
/// The longest one round polls for, by default.
pub const DEFAULT_ROUND_POLL_MS: u64 = 100;
/// How often a runner without a barrier group commits, by default.
pub const DEFAULT_COMMIT_INTERVAL_MS: u64 = 1_000;
/// Each blocking client call of the runner (commit, committed offsets, a transaction's
/// steps, a high-watermark query) gives up after this long.
pub const CLIENT_CALL_TIMEOUT_MS: u64 = 30_000;
/// How often a retriable transaction commit (a timeout) is tried before the round fails.
const MAX_TRANSACTION_COMMIT_ATTEMPTS: u32 = 5;
/// How long one seek of a just-assigned partition may wait for its fetcher; a refused seek
/// is retried at the next round.
const SEEK_TIMEOUT_MS: u64 = 1_000;
/// Snapshot entry names starting with this are the runner's own (a rebalance snapshot's
/// input positions); a topology's names must not.
pub const RESERVED_NAME_PREFIX: &str = "\u{0}kfc4-runner/";
/// The metadata of an offset committed at a barrier: this, then the cut's epoch.
pub const EPOCH_METADATA_PREFIX: &str = "kfc4-epoch=";

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("{what}: {source}")]
    Kafka {
        what: &'static str,
        source: KafkaError,
    },
    #[error(transparent)]
    CutReader(#[from] CutReaderError),
    #[error(transparent)]
    StateStore(#[from] StateStoreError),
    #[error(
        "{failed} output records were not delivered (first: {first}); the barrier is not committed"
    )]
    Delivery { failed: u64, first: String },
    #[error("barrier group {group:?} has no complete cut of epoch {epoch} (a partial cut is never restored to; the broker keeps retained_cuts of them)")]
    NoSuchCut { group: String, epoch: i64 },
    #[error("consumer group has committed no barrier of {group:?} yet; restore_to_epoch names a cut to start from")]
    NothingCommitted { group: String },
    #[error("the consumer has no group metadata: give the runner a consumer with a group.id")]
    NoGroupMetadata,
    #[error("{what} needs a barrier group (with_barrier_group): its transactions end at cuts")]
    NoBarrierGroup { what: &'static str },
}

fn kafka(what: &'static str) -> impl FnOnce(KafkaError) -> RunnerError {
    move |source| RunnerError::Kafka { what, source }
}

/// The producer context the runner's producer is built with: it counts the output records
/// that were not delivered, so that a barrier is never committed over a lost one.
#[derive(Default)]
pub struct OutputContext {
    failed: AtomicU64,
    first_failure: Mutex<Option<String>>,
}

impl OutputContext {
    fn take_failures(&self) -> Option<(u64, String)> {
        let failed = self.failed.swap(0, Ordering::SeqCst);
        let first = self
            .first_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        (failed > 0).then(|| (failed, first.unwrap_or_default()))
    }
}

impl ClientContext for OutputContext {}

impl ProducerContext for OutputContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, m)) = result {
            self.failed.fetch_add(1, Ordering::SeqCst);
            let mut first = self.first_failure.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| format!("{}/{}: {e}", m.topic(), m.partition()));
        }
    }
}

/// The optional seam through which the runner learns the broker-reported next offset of an
/// idle partition (one that handed out no record up to its marker). Without it the runner
/// goes by the positions it learned from records, restored cuts and the markers it knows.
pub trait PositionReader<C: ConsumerContext + 'static> {
    /// The next offset `consumer` hands out for each assigned partition.
    fn positions(&self, consumer: &BaseConsumer<C>) -> HashMap<TopicPartition, i64>;
}

/// [`PositionReader`] over librdkafka's `position()` (the offset after the last message
/// handed out, control records such as markers included).
pub struct ConsumerPositions;

impl<C: ConsumerContext + 'static> PositionReader<C> for ConsumerPositions {
    fn positions(&self, consumer: &BaseConsumer<C>) -> HashMap<TopicPartition, i64> {
        let Ok(tpl) = consumer.position() else {
            return HashMap::new();
        };
        tpl.elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => Some(((e.topic().to_string(), e.partition()), o)),
                _ => None,
            })
            .collect()
    }
}

/// A barrier that fired, as the listener sees it.
#[derive(Debug, Clone)]
pub struct Barrier {
    pub cut: BarrierCut,
    /// The offsets committed: per aligned partition, the highest of its cut offset and its
    /// committed position.
    pub offsets: BTreeMap<TopicPartition, i64>,
    /// The tasks (partition numbers) snapshotted under the cut's epoch.
    pub partitions: BTreeSet<i32>,
}

/// Called after each barrier is committed.
pub type BarrierListener = Box<dyn FnMut(&Barrier)>;

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Round {
    /// Records run.
    pub records: usize,
    /// The epoch of the barrier that fired in the round.
    pub barrier: Option<i64>,
}

/// Where a restore puts the tasks assigned from now on (until the next barrier commits).
#[derive(Debug, Clone)]
enum RestoreTarget {
    /// `restore_to_epoch`: every task to this cut.
    Cut(BarrierCut),
    /// `restore_to_latest_cut`: every task to the cut its offsets were committed at.
    Committed,
}

/// Where an assigned task's state came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StateSource {
    RestoreTarget,
    RebalanceSnapshot,
    CommittedEpoch,
    Fresh,
}

impl StateSource {
    fn as_str(self) -> &'static str {
        match self {
            StateSource::RestoreTarget => "restore target",
            StateSource::RebalanceSnapshot => "rebalance snapshot",
            StateSource::CommittedEpoch => "committed epoch",
            StateSource::Fresh => "fresh",
        }
    }
}

/// A task's committed offsets as the group coordinator has them.
#[derive(Debug, Default, Clone, Copy)]
struct Committed {
    offset: Option<i64>,
    epoch: Option<i64>,
}

pub struct GroupRunner<T: Topology, C: ConsumerContext + 'static = DefaultConsumerContext> {
    topology: T,
    consumer: BaseConsumer<C>,
    producer: BaseProducer<OutputContext>,
    inputs: BTreeSet<String>,
    store: Option<Box<dyn StateStore>>,
    barrier: Option<(String, CutReader)>,
    listener: Option<BarrierListener>,
    position_reader: Option<Box<dyn PositionReader<C>>>,
    max_round_records: usize,
    round_poll_ms: u64,
    commit_interval_ms: u64,
    last_commit: Instant,
    aligner: Aligner,
    /// The newest epoch committed or restored to: cuts above it are aligned on.
    last_epoch: i64,
    /// Per task, the epoch of the snapshot its state stands on (rolled back to on an abort).
    task_epochs: BTreeMap<i32, i64>,
    restore: Option<RestoreTarget>,
    /// Partitions to seek (a restore, a rollback, a refetch), retried until the fetcher
    /// takes them; their polled records are not run meanwhile.
    seeks: BTreeMap<TopicPartition, i64>,
    paused: BTreeSet<TopicPartition>,
    transactional: bool,
    txn_initialized: bool,
    txn_open: bool,
    outputs: Vec<Output>,
}

impl<T: Topology, C: ConsumerContext + 'static> GroupRunner<T, C> {
    /// A runner of `topology`, subscribing `consumer` (a group member: `group.id` set,
    /// `enable.auto.commit=false`) to the topology's inputs and producing through `producer`
    /// (transactional, with a `transactional.id`, for [`Self::run_once_transactional`]).
    pub fn new(
        topology: T,
        consumer: BaseConsumer<C>,
        producer: BaseProducer<OutputContext>,
    ) -> Result<Self, RunnerError> {
        let inputs: BTreeSet<String> = topology.input_topics().into_iter().collect();
        let names: Vec<&str> = inputs.iter().map(String::as_str).collect();
        consumer
            .subscribe(&names)
            .map_err(kafka("subscribing to the input topics"))?;
        Ok(Self {
            topology,
            consumer,
            producer,
            inputs,
            store: None,
            barrier: None,
            listener: None,
            position_reader: None,
            max_round_records: DEFAULT_MAX_ROUND_RECORDS,
            round_poll_ms: DEFAULT_ROUND_POLL_MS,
            commit_interval_ms: DEFAULT_COMMIT_INTERVAL_MS,
            last_commit: Instant::now(),
            aligner: Aligner::new(DEFAULT_MAX_HELD_BYTES),
            last_epoch: 0,
            task_epochs: BTreeMap::new(),
            restore: None,
            seeks: BTreeMap::new(),
            paused: BTreeSet::new(),
            transactional: false,
            txn_initialized: false,
            txn_open: false,
            outputs: Vec::new(),
        })
    }

    /// Where snapshots are saved (at barriers, and under [`NO_EPOCH`] at rebalances).
    pub fn with_state_store(mut self, store: impl StateStore + 'static) -> Self {
        self.store = Some(Box::new(store));
        self
    }

    /// Aligns on the cuts of barrier group `group`, read by `reader` (over a consumer of its
    /// own).
    pub fn with_barrier_group(mut self, group: impl Into<String>, reader: CutReader) -> Self {
        self.barrier = Some((group.into(), reader));
        self
    }

    /// Called after each barrier is committed.
    pub fn with_barrier_listener(mut self, listener: impl FnMut(&Barrier) + 'static) -> Self {
        self.listener = Some(Box::new(listener));
        self
    }

    /// What one read of `__barrier_state` may cost (each round reads it once).
    pub fn with_cut_poll_timeout(mut self, timeout: Duration) -> Self {
        if let Some((group, reader)) = self.barrier.take() {
            self.barrier = Some((group, reader.with_poll_timeout(timeout)));
        }
        self
    }

    /// The broker-reported positions of idle partitions ([`ConsumerPositions`] for
    /// librdkafka's).
    pub fn with_position_reader(mut self, reader: impl PositionReader<C> + 'static) -> Self {
        self.position_reader = Some(Box::new(reader));
        self
    }

    /// The bound on the records waiting for a barrier, in bytes of memory.
    pub fn with_max_held_bytes(mut self, max_held_bytes: usize) -> Self {
        assert_eq!(self.aligner.held_bytes(), 0, "set before the first round");
        self.aligner = Aligner::new(max_held_bytes);
        self
    }

    /// How often a runner without a barrier group acknowledges its outputs and commits.
    pub fn with_commit_interval_ms(mut self, commit_interval_ms: u64) -> Self {
        self.commit_interval_ms = commit_interval_ms;
        self
    }

    /// The most records, and the longest time, one round polls for.
    pub fn with_round(mut self, max_round_records: usize, round_poll_ms: u64) -> Self {
        self.max_round_records = max_round_records.max(1);
        self.round_poll_ms = round_poll_ms;
        self
    }

    pub fn topology(&self) -> &T {
        &self.topology
    }

    /// The newest epoch committed (or restored to).
    pub fn last_epoch(&self) -> i64 {
        self.last_epoch
    }

    /// The memory taken by records waiting for a barrier.
    pub fn waiting_bytes(&self) -> usize {
        self.aligner.held_bytes()
    }

    /// The input partitions the runner owns, each with the offset after its last record run.
    pub fn positions(&self) -> BTreeMap<TopicPartition, Option<i64>> {
        self.aligner
            .owned()
            .map(|tp| (tp.clone(), self.aligner.processed(tp)))
            .collect()
    }

    /// One round: records run, the barrier fired when it could, its cut committed.
    pub fn run_once(&mut self) -> Result<Round, RunnerError> {
        self.round()
    }

    /// One round in a producer transaction that ends at the next cut: the outputs, then at
    /// the barrier the snapshot (saved before the offsets go to the transaction, so the cut
    /// and the transaction boundary are one point), then the offsets, then the commit. A
    /// failed round aborts the transaction and rolls every task back to its last committed
    /// snapshot; the epoch stays open for the next round.
    pub fn run_once_transactional(&mut self) -> Result<Round, RunnerError> {
        if self.barrier.is_none() {
            return Err(RunnerError::NoBarrierGroup {
                what: "run_once_transactional",
            });
        }
        self.transactional = true;
        if !self.txn_initialized {
            self.producer
                .init_transactions(call_timeout())
                .map_err(kafka("initialising the producer's transactions"))?;
            self.txn_initialized = true;
        }
        if !self.txn_open {
            self.begin_transaction()?;
        }
        match self.round() {
            Ok(round) => Ok(round),
            Err(e) => {
                tracing::warn!(error = %e, "round failed: aborting its transaction");
                self.roll_back()?;
                Err(e)
            }
        }
    }

    /// Loads every task's snapshot of epoch `epoch` and seeks every input partition of the
    /// cut to its marker offset (tasks assigned later are restored the same way, until the
    /// next barrier commits).
    pub fn restore_to_epoch(&mut self, epoch: i64) -> Result<BarrierCut, RunnerError> {
        let (group, reader) = self.barrier.as_mut().ok_or(RunnerError::NoBarrierGroup {
            what: "restore_to_epoch",
        })?;
        let cut = reader
            .complete_cuts_after(group, epoch - 1)?
            .into_iter()
            .find(|c| c.epoch == epoch)
            .ok_or_else(|| RunnerError::NoSuchCut {
                group: group.clone(),
                epoch,
            })?;
        self.restore = Some(RestoreTarget::Cut(cut.clone()));
        self.last_epoch = epoch;
        self.restore_owned()?;
        Ok(cut)
    }

    /// Restores every task to the newest cut its consumer group committed it at (the epoch
    /// each barrier commit records in its offsets' metadata) and seeks its input partitions
    /// to that cut's marker offsets. Returns the newest such cut.
    pub fn restore_to_latest_cut(&mut self) -> Result<BarrierCut, RunnerError> {
        let Some((group, _)) = &self.barrier else {
            return Err(RunnerError::NoBarrierGroup {
                what: "restore_to_latest_cut",
            });
        };
        let group = group.clone();
        let all = self.input_partitions()?;
        let committed = self.committed_offsets(&all)?;
        let epoch = committed.values().filter_map(|c| c.epoch).max().ok_or(
            RunnerError::NothingCommitted {
                group: group.clone(),
            },
        )?;
        let (_, reader) = self.barrier.as_mut().expect("checked above");
        let cut = reader
            .complete_cuts_after(&group, epoch - 1)?
            .into_iter()
            .find(|c| c.epoch == epoch)
            .ok_or(RunnerError::NoSuchCut { group, epoch })?;
        self.restore = Some(RestoreTarget::Committed);
        self.last_epoch = epoch;
        self.restore_owned()?;
        Ok(cut)
    }

    fn round(&mut self) -> Result<Round, RunnerError> {
        self.producer.poll(Duration::ZERO);
        let batch = self.poll_batch();
        let mut first_polled: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        for r in &batch {
            first_polled
                .entry((r.topic.clone(), r.partition))
                .or_insert(r.offset);
        }
        let round = self.run_batch(batch);
        match &round {
            Err(_) if !self.txn_open && self.barrier.is_some() => {
                // Outputs of records already run may be lost (a delivery or send error), and
                // records released before the failure may not have run: every task goes
                // back to its last barrier and runs again from there (at least once).
                self.roll_back()?;
            }
            Err(_) if !self.txn_open => {
                // The records polled but not run would be lost: fetched again from where each
                // partition's state stands (a transaction's roll-back seeks to its commit).
                self.rewind(&first_polled);
            }
            _ => {}
        }
        round
    }

    fn rewind(&mut self, first_polled: &BTreeMap<TopicPartition, i64>) {
        let owned: Vec<TopicPartition> = self.aligner.owned().cloned().collect();
        for tp in owned {
            let at = self
                .aligner
                .processed(&tp)
                .or_else(|| first_polled.get(&tp).copied());
            self.aligner.rewind(&tp, at);
            if let Some(at) = at {
                self.seeks.insert(tp, at);
            }
        }
    }

    fn run_batch(&mut self, batch: Vec<Record>) -> Result<Round, RunnerError> {
        self.sync_assignment()?;
        if self.barrier.is_some() {
            self.refresh_cuts()?;
        }
        let (released, refetch) = self.aligner.release();
        self.seeks.extend(refetch);
        // Records polled before a seek are not run: the seek hands them out again.
        let skip: BTreeSet<TopicPartition> = self.seeks.keys().cloned().collect();
        self.apply_seeks();
        let mut round = Round::default();
        for r in released {
            self.run(&r)?;
            round.records += 1;
        }
        for r in batch {
            if skip.contains(&(r.topic.clone(), r.partition)) {
                continue;
            }
            if let Offered::Run(r) = self.aligner.offer(r) {
                self.run(&r)?;
                round.records += 1;
            }
        }
        self.pause_waiting()?;
        if self.barrier.is_some() {
            let positions = match (&self.position_reader, self.aligner.pending()) {
                (Some(reader), Some(_)) => {
                    // A partition waiting for its seek hands out nothing the runner runs.
                    let mut p = reader.positions(&self.consumer);
                    p.retain(|tp, _| !self.seeks.contains_key(tp));
                    p
                }
                _ => HashMap::new(),
            };
            if let Some(fired) = self.aligner.try_fire(|tp| positions.get(tp).copied()) {
                round.barrier = Some(fired.cut.epoch);
                self.fire(fired)?;
            }
        } else {
            self.commit_positions()?;
        }
        Ok(round)
    }

    fn poll_batch(&mut self) -> Vec<Record> {
        let deadline = Instant::now() + Duration::from_millis(self.round_poll_ms);
        let mut batch = Vec::new();
        while batch.len() < self.max_round_records {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.consumer.poll(left) {
                None => break,
                Some(Err(e)) => {
                    // librdkafka retries transport errors itself; the round goes on.
                    tracing::warn!(error = %e, "consuming the input topics");
                    if left.is_zero() {
                        break;
                    }
                }
                Some(Ok(m)) => batch.push(Record {
                    topic: m.topic().to_string(),
                    partition: m.partition(),
                    offset: m.offset(),
                    timestamp_ms: m.timestamp().to_millis(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                }),
            }
        }
        batch
    }

    fn run(&mut self, record: &Record) -> Result<(), RunnerError> {
        let mut outputs = std::mem::take(&mut self.outputs);
        self.topology.process(record, &mut outputs);
        let sent = outputs.drain(..).try_for_each(|o| self.send(&o));
        self.outputs = outputs;
        sent
    }

    fn send(&self, o: &Output) -> Result<(), RunnerError> {
        loop {
            let mut r = BaseRecord::<[u8], [u8]>::to(&o.topic);
            if let Some(k) = &o.key {
                r = r.key(k.as_slice());
            }
            if let Some(v) = &o.value {
                r = r.payload(v.as_slice());
            }
            if let Some(p) = o.partition {
                r = r.partition(p);
            }
            match self.producer.send(r) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(kafka("producing an output record")(e)),
            }
        }
    }

    /// Every partition of the input topics.
    fn input_partitions(&self) -> Result<Vec<TopicPartition>, RunnerError> {
        let mut out = Vec::new();
        for t in &self.inputs {
            let md = self
                .consumer
                .fetch_metadata(Some(t), call_timeout())
                .map_err(kafka("reading the input topics' metadata"))?;
            for topic in md.topics() {
                out.extend(topic.partitions().iter().map(|p| (t.clone(), p.id())));
            }
        }
        Ok(out)
    }

    fn committed_offsets(
        &self,
        tps: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Committed>, RunnerError> {
        let mut tpl = TopicPartitionList::new();
        for (t, p) in tps {
            tpl.add_partition(t, *p);
        }
        let got = self
            .consumer
            .committed_offsets(tpl, call_timeout())
            .map_err(kafka("reading the committed offsets"))?;
        Ok(got
            .elements()
            .iter()
            .map(|e| {
                let offset = match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                };
                let epoch = e
                    .metadata()
                    .strip_prefix(EPOCH_METADATA_PREFIX)
                    .and_then(|s| s.parse().ok());
                (
                    (e.topic().to_string(), e.partition()),
                    Committed { offset, epoch },
                )
            })
            .collect())
    }

    /// Takes in the assignment changes since the last round.
    fn sync_assignment(&mut self) -> Result<(), RunnerError> {
        let now: BTreeSet<TopicPartition> = self
            .consumer
            .assignment()
            .map_err(kafka("reading the assignment"))?
            .elements()
            .iter()
            .filter(|e| self.inputs.contains(e.topic()))
            .map(|e| (e.topic().to_string(), e.partition()))
            .collect();
        let owned: BTreeSet<TopicPartition> = self.aligner.owned().cloned().collect();
        let revoked: Vec<TopicPartition> = owned.difference(&now).cloned().collect();
        let assigned: Vec<TopicPartition> = now.difference(&owned).cloned().collect();
        if !revoked.is_empty() {
            if self.txn_open {
                // The lost partitions' outputs must not commit with the others'; the round
                // goes on in a transaction of its own.
                self.roll_back()?;
                self.begin_transaction()?;
            }
            self.revoke(&revoked)?;
        }
        if !assigned.is_empty() {
            tracing::info!(?assigned, "partitions assigned");
            // A pause can outlive a revocation in librdkafka; the runner's own starts afresh.
            self.consumer
                .resume(&tpl(&assigned))
                .map_err(kafka("resuming assigned partitions"))?;
            let committed = self.committed_offsets(&assigned)?;
            let mut by_task: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
            for tp in assigned {
                by_task.entry(tp.1).or_default().push(tp);
            }
            // Tasks still running after the revocations above.
            let owned_tasks: BTreeSet<i32> = self.aligner.owned().map(|tp| tp.1).collect();
            for (task, tps) in by_task {
                if owned_tasks.contains(&task) {
                    // Another input of a task already running: it starts where committed.
                    let at: Vec<(TopicPartition, Option<i64>)> = tps
                        .iter()
                        .map(|tp| (tp.clone(), committed.get(tp).and_then(|c| c.offset)))
                        .collect();
                    for (tp, at) in &at {
                        if let Some(at) = at {
                            self.seeks.insert(tp.clone(), *at);
                        }
                    }
                    self.aligner.assign(at);
                } else {
                    // Sought even to the committed offset: records the consumer handed out
                    // before a failed round took the partition in must come again.
                    self.restore_task(task, &tps, &committed)?;
                }
            }
        }
        Ok(())
    }

    /// A revoked task's state goes under [`NO_EPOCH`] with the positions it stands at, and
    /// leaves the topology.
    fn revoke(&mut self, revoked: &[TopicPartition]) -> Result<(), RunnerError> {
        tracing::info!(?revoked, "partitions revoked");
        let positions = self.aligner.revoke(revoked);
        for tp in revoked {
            self.seeks.remove(tp);
            self.paused.remove(tp);
        }
        let still: BTreeSet<i32> = self.aligner.owned().map(|tp| tp.1).collect();
        let tasks: BTreeSet<i32> = revoked.iter().map(|tp| tp.1).collect();
        // A snapshot's positions promise its outputs were delivered; without that it is
        // saved without them (never loaded: the next owner goes by the last barrier).
        let delivered = self.txn_open || self.flush_outputs().is_ok();
        for task in tasks.difference(&still) {
            if let Some(store) = &self.store {
                let mut snap = self.topology.snapshot_partition(*task);
                for ((t, p), at) in positions.iter().filter(|_| delivered) {
                    if let (true, Some(at)) = (p == task, at) {
                        snap.insert(position_name(t, *p), at.to_be_bytes().to_vec());
                    }
                }
                store.save(*task, NO_EPOCH, &snap)?;
            }
            self.topology.restore_partition(*task, BTreeMap::new());
            self.task_epochs.remove(task);
        }
        Ok(())
    }

    /// Restores every task owned now to the restore target.
    fn restore_owned(&mut self) -> Result<(), RunnerError> {
        if self.txn_open {
            self.roll_back()?;
        }
        let owned: Vec<TopicPartition> = self.aligner.owned().cloned().collect();
        let committed = self.committed_offsets(&owned)?;
        let mut by_task: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        for tp in owned {
            by_task.entry(tp.1).or_default().push(tp);
        }
        for (task, tps) in by_task {
            self.aligner.revoke(&tps);
            self.restore_task(task, &tps, &committed)?;
        }
        self.aligner.set_cuts(None, [], []);
        Ok(())
    }

    /// Loads task `task`'s state and seeks its partitions `tps` to where that state stands
    /// (even to the committed offset: records handed out before a failed round took the
    /// partition in must come again).
    fn restore_task(
        &mut self,
        task: i32,
        tps: &[TopicPartition],
        committed: &BTreeMap<TopicPartition, Committed>,
    ) -> Result<(), RunnerError> {
        let committed_at = |tp: &TopicPartition| committed.get(tp).and_then(|c| c.offset);
        let committed_epoch = tps
            .iter()
            .filter_map(|tp| committed.get(tp).and_then(|c| c.epoch))
            .max();
        let target = match &self.restore {
            Some(RestoreTarget::Cut(cut)) => Some(cut.clone()),
            Some(RestoreTarget::Committed) => committed_epoch.and_then(|e| self.known_cut(e)),
            None => None,
        };
        let load = |epoch: i64| match &self.store {
            Some(store) => store.load(task, epoch),
            None => Ok(BTreeMap::new()),
        };
        let (state, at, epoch, source): (_, BTreeMap<TopicPartition, Option<i64>>, _, _) =
            if let Some(cut) = target {
                let at = tps
                    .iter()
                    .map(|tp| {
                        (
                            tp.clone(),
                            cut.offsets.get(tp).copied().or(committed_at(tp)),
                        )
                    })
                    .collect();
                (
                    load(cut.epoch)?,
                    at,
                    Some(cut.epoch),
                    StateSource::RestoreTarget,
                )
            } else {
                let mut rebalance = if self.transactional {
                    BTreeMap::new()
                } else {
                    load(NO_EPOCH)?
                };
                let positions = take_positions(&mut rebalance);
                let usable = !positions.is_empty()
                    && tps
                        .iter()
                        .all(|tp| match (positions.get(tp), committed_at(tp)) {
                            (Some(q), Some(c)) => *q >= c,
                            (Some(_), None) => true,
                            (None, c) => c.is_none(),
                        });
                if usable {
                    let at = tps
                        .iter()
                        .map(|tp| (tp.clone(), positions.get(tp).copied()))
                        .collect();
                    (
                        rebalance,
                        at,
                        committed_epoch,
                        StateSource::RebalanceSnapshot,
                    )
                } else if let Some(e) = committed_epoch {
                    let at = tps
                        .iter()
                        .map(|tp| (tp.clone(), committed_at(tp)))
                        .collect();
                    (load(e)?, at, Some(e), StateSource::CommittedEpoch)
                } else {
                    let at = tps
                        .iter()
                        .map(|tp| (tp.clone(), committed_at(tp)))
                        .collect();
                    (BTreeMap::new(), at, None, StateSource::Fresh)
                }
            };
        tracing::info!(
            task,
            source = source.as_str(),
            ?epoch,
            ?at,
            entries = state.len(),
            "task restored"
        );
        self.topology.restore_partition(task, state);
        match epoch {
            Some(e) => {
                self.task_epochs.insert(task, e);
                if self.restore.is_none() {
                    self.last_epoch = self.last_epoch.max(e);
                }
            }
            None => {
                self.task_epochs.remove(&task);
            }
        }
        for (tp, at) in &at {
            if let Some(at) = at {
                self.seeks.insert(tp.clone(), *at);
            }
        }
        let from_rebalance = source == StateSource::RebalanceSnapshot;
        let tps_at: Vec<TopicPartition> = at.keys().cloned().collect();
        self.aligner.assign(at);
        if from_rebalance {
            // A roll-back goes to the last barrier's snapshot, at the committed offsets.
            for tp in &tps_at {
                self.aligner.set_committed(tp, committed_at(tp));
            }
        }
        Ok(())
    }

    fn known_cut(&self, epoch: i64) -> Option<BarrierCut> {
        let (group, reader) = self.barrier.as_ref()?;
        reader
            .known_cuts_from(group, epoch)
            .find(|c| c.epoch == epoch && c.is_complete())
            .cloned()
    }

    /// Reads `__barrier_state` up to a high watermark of the group's partition asked for
    /// now, and hands the alignment the pending cut, the fences of the injections under way
    /// and the markers known.
    fn refresh_cuts(&mut self) -> Result<(), RunnerError> {
        let Some((group, reader)) = self.barrier.as_mut() else {
            return Ok(());
        };
        let sp = reader.state_partition(group);
        let fresh =
            match self
                .producer
                .client()
                .fetch_watermarks(BARRIER_STATE_TOPIC, sp, call_timeout())
            {
                Ok((_, high)) => Some((sp, high)),
                // Without a fresh end nothing past the cached one may be judged: the round
                // runs nothing new this time.
                Err(e) => return Err(kafka("asking __barrier_state's high watermark")(e)),
            };
        reader.catch_up(fresh)?;
        let floor = self
            .task_epochs
            .values()
            .copied()
            .min()
            .unwrap_or(self.last_epoch)
            .min(self.last_epoch);
        let pending = reader
            .known_cuts_from(group, self.last_epoch + 1)
            .find(|c| c.is_complete())
            .cloned();
        let markers: Vec<(TopicPartition, i64)> = reader
            .known_cuts_from(group, floor)
            .flat_map(|c| c.offsets.iter().map(|(tp, o)| (tp.clone(), *o)))
            .collect();
        // A marker of an injection under way may land in any of its targets: nothing past
        // what each has run may run before the cut is known (KFC-4's injection-start names
        // no offsets).
        let fences: Vec<(TopicPartition, i64)> = reader
            .injections_in_progress(group)
            .flatten()
            .map(|tp| (tp.clone(), self.aligner.processed(tp).unwrap_or(i64::MIN)))
            .collect();
        self.aligner.set_cuts(
            pending,
            fences.iter().map(|(tp, o)| (tp, *o)),
            markers.iter().map(|(tp, o)| (tp, *o)),
        );
        Ok(())
    }

    fn apply_seeks(&mut self) {
        let seeks = std::mem::take(&mut self.seeks);
        for (tp, at) in seeks {
            match self.consumer.seek(
                &tp.0,
                tp.1,
                Offset::Offset(at),
                Duration::from_millis(SEEK_TIMEOUT_MS),
            ) {
                Ok(()) => tracing::debug!(?tp, at, "seeked"),
                Err(e) => {
                    // Not fetching yet (just assigned): again next round.
                    tracing::info!(?tp, at, error = %e, "seek refused; retried");
                    self.seeks.insert(tp, at);
                }
            }
        }
    }

    /// Pauses the partitions with records waiting (back-pressure: they have nothing to give
    /// before the barrier) and resumes the others.
    fn pause_waiting(&mut self) -> Result<(), RunnerError> {
        let waiting = self.aligner.waiting();
        // All of them each round: a reassignment clears librdkafka's pause.
        let pause: Vec<&TopicPartition> = waiting.iter().collect();
        let resume: Vec<&TopicPartition> = self.paused.difference(&waiting).collect();
        if !pause.is_empty() {
            self.consumer
                .pause(&tpl(pause.iter().copied()))
                .map_err(kafka("pausing partitions past their cut"))?;
        }
        if !resume.is_empty() {
            self.consumer
                .resume(&tpl(resume.iter().copied()))
                .map_err(kafka("resuming partitions"))?;
        }
        self.paused = waiting;
        Ok(())
    }

    fn fire(&mut self, fired: Fired) -> Result<(), RunnerError> {
        let Fired {
            cut,
            commits,
            tasks,
        } = fired;
        if !self.txn_open {
            // Every output of the records before the cut is acknowledged before the commit.
            self.flush_outputs()?;
        }
        if let Some(store) = &self.store {
            for task in &tasks {
                store.save(*task, cut.epoch, &self.topology.snapshot_partition(*task))?;
            }
        }
        let metadata = format!("{EPOCH_METADATA_PREFIX}{}", cut.epoch);
        let offsets = offsets_list(&commits, Some(&metadata))?;
        if self.txn_open {
            let group = self
                .consumer
                .group_metadata()
                .ok_or(RunnerError::NoGroupMetadata)?;
            self.producer
                .send_offsets_to_transaction(&offsets, &group, call_timeout())
                .map_err(kafka("sending the cut's offsets to the transaction"))?;
            self.commit_transaction()?;
            self.txn_open = false;
        } else {
            self.consumer
                .commit(&offsets, CommitMode::Sync)
                .map_err(kafka("committing the cut's offsets"))?;
        }
        self.aligner
            .committed_at(commits.iter().map(|(tp, o)| (tp, *o)));
        self.last_epoch = self.last_epoch.max(cut.epoch);
        for task in &tasks {
            self.task_epochs.insert(*task, cut.epoch);
        }
        self.restore = None;
        tracing::debug!(epoch = cut.epoch, ?commits, "barrier committed");
        if let Some(listener) = self.listener.as_mut() {
            listener(&Barrier {
                cut,
                offsets: commits,
                partitions: tasks,
            });
        }
        Ok(())
    }

    /// Waits until every output produced so far is acknowledged; an error names the lost
    /// ones (nothing may be committed over them).
    fn flush_outputs(&self) -> Result<(), RunnerError> {
        self.producer
            .flush(call_timeout())
            .map_err(kafka("flushing the outputs before a commit"))?;
        match self.producer.context().take_failures() {
            Some((failed, first)) => Err(RunnerError::Delivery { failed, first }),
            None => Ok(()),
        }
    }

    /// Without a barrier group: every `commit_interval_ms`, the outputs so far are
    /// acknowledged and then the positions run are committed (at least once).
    fn commit_positions(&mut self) -> Result<(), RunnerError> {
        if self.last_commit.elapsed() < Duration::from_millis(self.commit_interval_ms) {
            return Ok(());
        }
        self.last_commit = Instant::now();
        let advanced: Vec<(TopicPartition, i64)> = self
            .aligner
            .owned()
            .filter_map(|tp| {
                let p = self.aligner.processed(tp)?;
                (Some(p) > self.aligner.committed(tp)).then(|| (tp.clone(), p))
            })
            .collect();
        if advanced.is_empty() {
            return Ok(());
        }
        self.flush_outputs()?;
        let offsets = offsets_list(&advanced.iter().cloned().collect(), None)?;
        self.consumer
            .commit(&offsets, CommitMode::Sync)
            .map_err(kafka("committing the round's offsets"))?;
        self.aligner
            .committed_at(advanced.iter().map(|(tp, o)| (tp, *o)));
        Ok(())
    }

    /// Commits the open transaction, retrying a retriable failure (a timeout): the commit
    /// may still be completing at the broker, and an abort would then redo a committed epoch.
    fn commit_transaction(&mut self) -> Result<(), RunnerError> {
        let mut attempt = 1;
        loop {
            match self.producer.commit_transaction(call_timeout()) {
                Ok(()) => return Ok(()),
                Err(KafkaError::Transaction(e))
                    if e.is_retriable() && attempt < MAX_TRANSACTION_COMMIT_ATTEMPTS =>
                {
                    tracing::warn!(error = %e, attempt, "committing the transaction; retried");
                    attempt += 1;
                }
                Err(e) => return Err(kafka("committing the transaction")(e)),
            }
        }
    }

    fn begin_transaction(&mut self) -> Result<(), RunnerError> {
        self.producer
            .begin_transaction()
            .map_err(kafka("beginning a transaction"))?;
        self.txn_open = true;
        Ok(())
    }

    /// Aborts the open transaction (if one is open) and puts every task back on the snapshot
    /// its state stood on at the last commit, its partitions sought back to where that
    /// commit left them.
    fn roll_back(&mut self) -> Result<(), RunnerError> {
        if self.txn_open {
            self.txn_open = false;
            if let Err(e) = self.producer.abort_transaction(call_timeout()) {
                tracing::warn!(error = %e, "aborting the transaction");
            }
        }
        let owned: Vec<TopicPartition> = self.aligner.owned().cloned().collect();
        let tasks: BTreeSet<i32> = owned.iter().map(|tp| tp.1).collect();
        // Positions first: a snapshot that fails to load leaves the partitions at the last
        // commit, never running on from where the abandoned state was.
        for tp in owned {
            let at = self.aligner.committed(&tp);
            self.aligner.reset(&tp, at);
            if let Some(at) = at {
                self.seeks.insert(tp, at);
            }
        }
        for task in tasks {
            let state = match (self.task_epochs.get(&task), &self.store) {
                (Some(e), Some(store)) => store.load(task, *e)?,
                _ => BTreeMap::new(),
            };
            self.topology.restore_partition(task, state);
        }
        tracing::info!(
            epoch = self.last_epoch,
            "rolled back to the last committed cut"
        );
        Ok(())
    }
}

fn call_timeout() -> Duration {
    Duration::from_millis(CLIENT_CALL_TIMEOUT_MS)
}

fn tpl<'a>(tps: impl IntoIterator<Item = &'a TopicPartition>) -> TopicPartitionList {
    let mut l = TopicPartitionList::new();
    for (t, p) in tps {
        l.add_partition(t, *p);
    }
    l
}

/// The offsets to commit, each with `metadata`.
fn offsets_list(
    offsets: &BTreeMap<TopicPartition, i64>,
    metadata: Option<&str>,
) -> Result<TopicPartitionList, RunnerError> {
    let mut l = TopicPartitionList::new();
    for ((t, p), o) in offsets {
        let mut e = l.add_partition(t, *p);
        e.set_offset(Offset::Offset(*o))
            .map_err(kafka("listing the offsets to commit"))?;
        if let Some(m) = metadata {
            e.set_metadata(m);
        }
    }
    Ok(l)
}

fn position_name(topic: &str, partition: i32) -> String {
    format!("{RESERVED_NAME_PREFIX}position/{partition}/{topic}")
}

/// Takes the runner's position entries out of a rebalance snapshot.
fn take_positions(snap: &mut BTreeMap<String, Vec<u8>>) -> BTreeMap<TopicPartition, i64> {
    let names: Vec<String> = snap
        .range(RESERVED_NAME_PREFIX.to_string()..)
        .take_while(|(k, _)| k.starts_with(RESERVED_NAME_PREFIX))
        .map(|(k, _)| k.clone())
        .collect();
    let mut out = BTreeMap::new();
    for name in names {
        let value = snap.remove(&name).expect("listed above");
        let rest = &name[RESERVED_NAME_PREFIX.len()..];
        let parsed = rest.strip_prefix("position/").and_then(|r| {
            let (p, t) = r.split_once('/')?;
            Some((
                (t.to_string(), p.parse().ok()?),
                <[u8; 8]>::try_from(value).ok()?,
            ))
        });
        if let Some((tp, bytes)) = parsed {
            out.insert(tp, i64::from_be_bytes(bytes));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebalance_snapshot_carries_its_positions_apart_from_the_state() {
        let mut snap = BTreeMap::from([("word:a".to_string(), vec![1])]);
        snap.insert(position_name("in/x", 3), 42i64.to_be_bytes().to_vec());
        let positions = take_positions(&mut snap);
        assert_eq!(positions, BTreeMap::from([(("in/x".to_string(), 3), 42)]));
        assert_eq!(snap, BTreeMap::from([("word:a".to_string(), vec![1])]));
    }
}
