//! `Partition`: one partition's ordered state on its owner core. It owns what must change in
//! step with the log: the `PartitionLog`, the idempotent-producer state (later: transaction
//! state: open transactions, the last stable offset, the aborted-transaction index, `txn.rs`)
//! and the partition directory with every file in it (segments, indexes, recovery marker,
//! `incarnation`, `aborted.txnindex`, `log-start-offset`, fan-out cursor files, the latter
//! through the API below).
//! Nothing else writes into a partition directory.
//!
//! `produce` checks the producer's sequence, appends and records the sequence in one step of
//! the log's admission order (`PartitionLog::append_admitted`): a batch the log refuses leaves
//! the producer state as it was, and a retry is judged against every batch admitted before it.
//! A transactional batch is admitted only inside a transaction its producer began here
//! (`begin_transaction`) at the batch's epoch; `write_marker` ends it in the same way, and is
//! the only way a control batch enters the log.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use thiserror::Error;

use crate::config::LogConfig;
use crate::core_storage::CoreStorage;
use crate::io;
use crate::leader_epochs::LeaderEpochs;
use crate::log::{AdmitError, DeleteBefore, Durability, LogError, PartitionLog, RecoverySummary};
use crate::producer_state::{self, ProducerStates, SeqCheck};
use crate::record_check::ValidBatch;
use crate::txn::{self, AbortedTxn, MarkerKind, TxnRefusal, TxnState};

/// The file in a partition directory naming the topic incarnation its data belongs to, so a
/// re-created topic never reads an old incarnation's files.
pub const INCARNATION_FILE_NAME: &str = "incarnation";
/// Prefix and suffix of fan-out cursor file names (`fanout-<child>.offset`).
pub const CURSOR_FILE_PREFIX: &str = "fanout-";
pub const CURSOR_FILE_SUFFIX: &str = ".offset";

#[derive(Debug, Error)]
pub enum PartitionError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("{dir}: producer {producer_id} expected sequence {expected}, got {got}")]
    OutOfOrderSequence {
        dir: String,
        producer_id: i64,
        expected: i32,
        got: i32,
    },
    #[error("{dir}: producer {producer_id} epoch {got} is older than its current epoch {current}")]
    FencedEpoch {
        dir: String,
        producer_id: i64,
        current: i16,
        got: i16,
    },
    /// A transactional batch whose producer has no transaction begun here at its epoch (no
    /// `begin_transaction`, or a marker ended it).
    #[error(
        "{dir}: producer {producer_id} epoch {epoch} has no transaction begun on this partition"
    )]
    TransactionNotBegun {
        dir: String,
        producer_id: i64,
        epoch: i16,
    },
    /// `MAX_ONGOING_TXNS_PER_PARTITION` producers already have a transaction here.
    #[error("{dir}: {limit} producers already have a transaction open on this partition")]
    TooManyOngoingTransactions { dir: String, limit: usize },
    #[error("{dir}: {op}: {source}")]
    Io {
        dir: String,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// What a produce stored (or found stored, for a retried idempotent batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Produced {
    pub base_offset: u64,
    pub last_offset: u64,
    /// Set when the topic uses LogAppendTime (not for a duplicate).
    pub log_append_time_ms: Option<i64>,
    /// A retry of a batch already in the log: nothing was appended, and the answer came only
    /// once the original was durable.
    pub duplicate: bool,
}

/// Why the admission check refused a batch.
enum Refusal {
    Duplicate { base_offset: u64, last_offset: u64 },
    OutOfOrder { expected: i32, got: i32 },
    Fenced { current: i16, got: i16 },
    NotBegun,
}

pub struct Partition {
    log: Rc<PartitionLog>,
    producers: RefCell<ProducerStates>,
    txn: RefCell<TxnState>,
    /// One writer of `aborted.txnindex` at a time, so an older copy never lands last.
    aborted_file_writer: glommio::sync::Semaphore,
    /// The `TxnState::aborted_gen` the file holds.
    aborted_file_gen: Cell<u64>,
    incarnation: String,
    /// Where each leader epoch starts in the log (`leader-epochs`, issue #18).
    leader_epochs: RefCell<LeaderEpochs>,
    /// One writer of `leader-epochs` at a time.
    epochs_writer: glommio::sync::Semaphore,
    /// The fan-out cursor files this process stored (child → bytes): a leader's cursors
    /// write them, a follower copies its leader's (issue #18). At most one per link of the
    /// parent topic.
    stored_cursor_files: RefCell<BTreeMap<String, Vec<u8>>>,
}

/// The producer and transaction state of `log`, rebuilt from its tail (every batch it holds,
/// durable or not yet below the high watermark), with the aborted-transaction index beyond
/// the rebuild window from its file; entries the window holds but the file lacks (a crash
/// between an abort marker and the file's rewrite) are added, and the file rewritten.
async fn rebuild_state(log: &PartitionLog) -> Result<(ProducerStates, TxnState), PartitionError> {
    let dir_s = log.dir().display().to_string();
    let io_err = |op: &'static str| {
        let dir = dir_s.clone();
        move |source| PartitionError::Io { dir, op, source }
    };
    let aborted_path = log.dir().join(txn::ABORTED_INDEX_FILE_NAME);
    let (producers, mut txn_state) = producer_state::rebuild(log).await?;
    let (from_file, mut rewrite) = match io::read_small(&aborted_path)
        .await
        .map_err(io_err("reading the aborted-transaction index"))?
    {
        None => (Vec::new(), false),
        Some(b) => match txn::decode_aborted_file(&b) {
            Ok(entries) => (entries, false),
            Err(why) => {
                tracing::warn!(dir = %dir_s, %why, "aborted-transaction index unreadable; rebuilt from the log's tail");
                (Vec::new(), true)
            }
        },
    };
    rewrite |= txn_state.merge_file_entries(from_file);
    rewrite |= txn_state.drop_below(log.log_start_offset());
    rewrite |= txn_state.drop_from(log.log_end_offset());
    if rewrite {
        io::write_atomic(&aborted_path, txn::encode_aborted_file(txn_state.aborted()))
            .await
            .map_err(io_err("writing the aborted-transaction index"))?;
    }
    Ok((producers, txn_state))
}

impl Partition {
    /// Opens the partition directory `dir` for topic incarnation `incarnation`: files of
    /// another incarnation are removed first, the log is recovered, and the producer state is
    /// rebuilt from the log's tail.
    pub async fn open(
        core: &Rc<CoreStorage>,
        dir: PathBuf,
        incarnation: &str,
        config: LogConfig,
    ) -> Result<(Rc<Self>, RecoverySummary), PartitionError> {
        let dir_s = dir.display().to_string();
        let io_err = |op: &'static str| {
            let dir = dir_s.clone();
            move |source| PartitionError::Io { dir, op, source }
        };
        let inc_path = dir.join(INCARNATION_FILE_NAME);
        let on_disk = io::read_small(&inc_path)
            .await
            .map_err(io_err("reading the incarnation"))?;
        if on_disk.as_deref() != Some(incarnation.as_bytes()) {
            if let Some(other) = &on_disk {
                tracing::warn!(dir = %dir.display(), found = %String::from_utf8_lossy(other), "partition dir of another topic incarnation; removing it");
            }
            io::remove_dir_tree(&dir)
                .await
                .map_err(io_err("removing an old incarnation"))?;
            io::create_dir_all(&dir)
                .await
                .map_err(io_err("creating the directory"))?;
            io::write_atomic(&inc_path, incarnation.as_bytes().to_vec())
                .await
                .map_err(io_err("writing the incarnation"))?;
        }
        let mut epochs = LeaderEpochs::load(&dir)
            .await
            .map_err(io_err("reading the leader epochs"))?;
        let (log, summary) = PartitionLog::open(core, dir.clone(), config).await?;
        // Epochs that start past the recovered end (a crash, or a truncation) are gone; an
        // empty log (a replica started over) keeps none.
        let emptied = log.log_start_offset() == log.log_end_offset() && epochs.latest().is_some();
        if emptied {
            epochs = LeaderEpochs::default();
        }
        if epochs.cut_at(log.log_end_offset()) || emptied {
            epochs
                .store(&dir)
                .await
                .map_err(io_err("writing the leader epochs"))?;
        }
        let (producers, txn_state) = rebuild_state(&log).await?;
        let gen = txn_state.aborted_gen();
        let p = Rc::new(Self {
            log,
            producers: RefCell::new(producers),
            txn: RefCell::new(txn_state),
            aborted_file_writer: glommio::sync::Semaphore::new(1),
            aborted_file_gen: Cell::new(gen),
            incarnation: incarnation.to_string(),
            leader_epochs: RefCell::new(epochs),
            epochs_writer: glommio::sync::Semaphore::new(1),
            stored_cursor_files: RefCell::new(BTreeMap::new()),
        });
        Ok((p, summary))
    }

    /// This replica leads the partition from leader epoch `epoch` on (issue #18): the epoch
    /// starts at the log end, is recorded in `leader-epochs` before any batch of it, and is
    /// stamped into every batch appended after; the producer and transaction state are
    /// rebuilt from the log, which holds every batch the earlier leaders replicated here.
    pub async fn become_leader(&self, epoch: i32) -> Result<(), PartitionError> {
        let start = self.log.log_end_offset();
        self.record_epoch(epoch, start).await?;
        self.log.set_leader_epoch(epoch);
        let (producers, txn_state) = rebuild_state(&self.log).await?;
        self.aborted_file_gen.set(txn_state.aborted_gen());
        *self.producers.borrow_mut() = producers;
        *self.txn.borrow_mut() = txn_state;
        Ok(())
    }

    /// Records (durably) that epoch `epoch` starts at `start`, if it is newer than every
    /// epoch known here.
    async fn record_epoch(&self, epoch: i32, start: u64) -> Result<(), PartitionError> {
        let _one = self
            .epochs_writer
            .acquire_permit(1)
            .await
            .expect("never closed");
        let mut next = self.leader_epochs.borrow().clone();
        if !next.assign(epoch, start) {
            return Ok(());
        }
        next.store(self.dir())
            .await
            .map_err(|source| PartitionError::Io {
                dir: self.dir_name(),
                op: "writing the leader epochs",
                source,
            })?;
        *self.leader_epochs.borrow_mut() = next;
        Ok(())
    }

    /// The newest leader epoch this replica's log holds (or started).
    pub fn latest_leader_epoch(&self) -> Option<i32> {
        self.leader_epochs.borrow().latest().map(|e| e.epoch)
    }

    /// OffsetForLeaderEpoch on this replica: the largest epoch at most `epoch` it knows and
    /// the offset where that epoch ends here (the log end for its newest). A log that never
    /// recorded an epoch (a partition not replicated) is all epoch 0, the epoch its batches
    /// carry.
    pub fn leader_epoch_end(&self, epoch: i32) -> Option<(i32, u64)> {
        let epochs = self.leader_epochs.borrow();
        let log_end = self.log.log_end_offset();
        if epochs.latest().is_none() {
            return (epoch >= 0).then_some((0, log_end));
        }
        epochs.end_of(epoch, log_end)
    }

    /// The leader epoch the record at `offset` was written in (0 throughout a log that never
    /// recorded one); `None` when it is older than every epoch still known.
    pub fn leader_epoch_at(&self, offset: u64) -> Option<i32> {
        let epochs = self.leader_epochs.borrow();
        if epochs.latest().is_none() {
            return Some(0);
        }
        epochs.epoch_at(offset)
    }

    /// A follower's copy of the leader's batches (issue #18): `bytes` (whole stored batches
    /// from this log's end on) go in as the leader wrote them, a new leader epoch recorded
    /// before its first batch, and are durable when this returns. Returns the log end.
    pub async fn append_replica(&self, bytes: &[u8]) -> Result<u64, PartitionError> {
        let end = self
            .log
            .append_stored(bytes, async |h: &crate::batch::BatchHeader, one: &[u8]| {
                let epoch = crate::batch::leader_epoch(one);
                if self.latest_leader_epoch().is_none_or(|l| epoch > l) {
                    self.record_epoch(epoch, h.base_offset as u64).await?;
                }
                // The transactions follow the copy (the aborted index is rewritten below,
                // once the batches are durable).
                self.txn.borrow_mut().follow(h, one);
                Ok::<(), PartitionError>(())
            })
            .await?;
        self.log.sync_to(end).await?;
        self.store_aborted_index().await?;
        Ok(end)
    }

    pub fn log(&self) -> &Rc<PartitionLog> {
        &self.log
    }

    pub fn dir(&self) -> &Path {
        self.log.dir()
    }

    pub fn incarnation(&self) -> &str {
        &self.incarnation
    }

    fn dir_name(&self) -> String {
        self.dir().display().to_string()
    }

    /// Appends a producer's batch. An idempotent producer's batch is checked against its
    /// sequence state at admission: the next sequence is appended and recorded together; a
    /// retry of a stored batch is answered with that batch's offsets once it is durable; a gap
    /// or a fenced epoch is refused. A batch the log refuses (too large, no space, poisoned)
    /// changes nothing. A failed fdatasync after admission poisons the log (the batch may be
    /// on disk; the state is rebuilt from the log when it is reopened).
    pub async fn produce(
        &self,
        batch: ValidBatch<'_>,
        durability: Durability,
    ) -> Result<Produced, PartitionError> {
        let h = *batch.header();
        if h.is_control() {
            return Err(self.invalid(
                "a control batch is written only by the transaction coordinator (markers)",
            ));
        }
        let transactional = h.is_transactional();
        // A transactional batch needs its producer id; its sequence may be absent (-1): the
        // group coordinator writes TxnOffsetCommit records that way, as Kafka does.
        if transactional && h.producer_id < 0 {
            return Err(
                self.invalid("a transactional batch must come from a producer with a producer id")
            );
        }
        // A retry of a batch already admitted needs nothing from the log but its durability:
        // answered without queueing behind other appends (and even when the log could not
        // take a new batch: full disk, poisoned after the original was synced).
        let stored = self.producers.borrow().check(&h);
        if let SeqCheck::Duplicate {
            base_offset,
            last_offset,
        } = stored
        {
            return self.duplicate(base_offset, last_offset).await;
        }
        let admit = |base_offset: u64| {
            let mut producers = self.producers.borrow_mut();
            match producers.check(&h) {
                SeqCheck::Append => {
                    if transactional {
                        let mut txn = self.txn.borrow_mut();
                        txn.check_data(&h).map_err(|_| Refusal::NotBegun)?;
                        txn.record_data(&h, base_offset);
                    }
                    producers.record(&h, base_offset);
                    Ok(())
                }
                SeqCheck::Duplicate {
                    base_offset,
                    last_offset,
                } => Err(Refusal::Duplicate {
                    base_offset,
                    last_offset,
                }),
                SeqCheck::OutOfOrder { expected, got } => {
                    Err(Refusal::OutOfOrder { expected, got })
                }
                SeqCheck::FencedEpoch { current, got } => Err(Refusal::Fenced { current, got }),
            }
        };
        match self.log.append_admitted(batch, durability, admit).await {
            Ok(info) => Ok(Produced {
                base_offset: info.base_offset,
                last_offset: info.last_offset,
                log_append_time_ms: info.log_append_time_ms,
                duplicate: false,
            }),
            Err(AdmitError::Log(e)) => Err(e.into()),
            Err(AdmitError::Refused(Refusal::Duplicate {
                base_offset,
                last_offset,
            })) => self.duplicate(base_offset, last_offset).await,
            Err(AdmitError::Refused(Refusal::OutOfOrder { expected, got })) => {
                Err(PartitionError::OutOfOrderSequence {
                    dir: self.dir_name(),
                    producer_id: h.producer_id,
                    expected,
                    got,
                })
            }
            Err(AdmitError::Refused(Refusal::Fenced { current, got })) => {
                Err(PartitionError::FencedEpoch {
                    dir: self.dir_name(),
                    producer_id: h.producer_id,
                    current,
                    got,
                })
            }
            Err(AdmitError::Refused(Refusal::NotBegun)) => {
                Err(PartitionError::TransactionNotBegun {
                    dir: self.dir_name(),
                    producer_id: h.producer_id,
                    epoch: h.producer_epoch,
                })
            }
        }
    }

    /// A batch the partition writes itself (a marker), checked like a client's.
    fn own_batch<'b>(&self, bytes: &'b [u8]) -> Result<ValidBatch<'b>, PartitionError> {
        ValidBatch::new(bytes, self.log.batch_rules()).map_err(|source| {
            PartitionError::Log(LogError::InvalidBatch {
                dir: self.dir_name(),
                source,
            })
        })
    }

    fn invalid(&self, why: &str) -> PartitionError {
        PartitionError::Log(LogError::InvalidBatch {
            dir: self.dir_name(),
            source: crate::batch::BatchError::InvalidRecords(why.to_string()),
        })
    }

    /// The newest epoch this partition knows for producer `pid`.
    fn known_epoch(&self, pid: i64) -> Option<i16> {
        self.producers
            .borrow()
            .epoch_of(pid)
            .max(self.txn.borrow().epoch_of(pid))
    }

    /// AddPartitionsToTxn reached this partition: producer (pid, epoch) may now write
    /// transactional batches here until a marker ends its transaction. Refused with
    /// `FencedEpoch` if the partition already knows a newer epoch for pid, and with
    /// `TooManyOngoingTransactions` past `MAX_ONGOING_TXNS_PER_PARTITION`. Idempotent. In
    /// memory only (an open transaction with batches is found again in the log on open).
    pub fn begin_transaction(&self, producer_id: i64, epoch: i16) -> Result<(), PartitionError> {
        let known = self.producers.borrow().epoch_of(producer_id);
        let refused = self.txn.borrow_mut().begin(producer_id, epoch, known);
        match refused {
            Ok(()) => Ok(()),
            Err(TxnRefusal::Fenced { current }) => Err(PartitionError::FencedEpoch {
                dir: self.dir_name(),
                producer_id,
                current,
                got: epoch,
            }),
            Err(TxnRefusal::TooMany) => Err(PartitionError::TooManyOngoingTransactions {
                dir: self.dir_name(),
                limit: txn::MAX_ONGOING_TXNS_PER_PARTITION,
            }),
            Err(TxnRefusal::NotBegun) => unreachable!("begin never answers NotBegun"),
        }
    }

    /// Appends a commit or abort control batch durably (`Durability::Sync`) and ends pid's
    /// transaction here: its open entry goes (the last stable offset moves past it once the
    /// marker is durable), and an abort adds an `AbortedTxn` (its first batch here .. the
    /// marker) to the aborted index, whose file is rewritten before this returns. A marker
    /// older than the partition's epoch for pid is refused (`FencedEpoch`); a newer epoch
    /// becomes the producer's (its older batches are then fenced). A marker for a pid with no
    /// open transaction here is written anyway (a retry). Returns the marker's offset.
    pub async fn write_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        kind: MarkerKind,
        coordinator_epoch: i32,
    ) -> Result<u64, PartitionError> {
        let bytes = txn::encode_marker(
            producer_id,
            epoch,
            kind,
            coordinator_epoch,
            self.log.now_ms(),
        );
        let valid = self.own_batch(&bytes)?;
        let admit = |base_offset: u64| {
            if let Some(current) = self.known_epoch(producer_id).filter(|&c| epoch < c) {
                return Err(current);
            }
            self.producers
                .borrow_mut()
                .record_marker(producer_id, epoch);
            self.txn
                .borrow_mut()
                .end(producer_id, kind, base_offset, self.log.high_watermark());
            Ok(())
        };
        let info = match self
            .log
            .append_admitted(valid, Durability::Sync, admit)
            .await
        {
            Ok(info) => info,
            Err(AdmitError::Log(e)) => return Err(e.into()),
            Err(AdmitError::Refused(current)) => {
                return Err(PartitionError::FencedEpoch {
                    dir: self.dir_name(),
                    producer_id,
                    current,
                    got: epoch,
                })
            }
        };
        self.txn
            .borrow_mut()
            .prune_ending(self.log.high_watermark());
        self.store_aborted_index().await?;
        Ok(info.base_offset)
    }

    /// Appends a control batch of no producer (producer id, epoch and sequence -1) with one
    /// record of `control_type` and `value`, timestamped `timestamp_ms`, durable before it
    /// returns (a barrier marker, seed 003: its cut's trigger time). Returns its offset. It
    /// changes no producer or transaction state; the end markers of transactions go through
    /// `write_marker`.
    pub async fn write_control_record(
        &self,
        control_type: i16,
        value: Vec<u8>,
        timestamp_ms: i64,
    ) -> Result<u64, PartitionError> {
        assert!(
            ![MarkerKind::Abort, MarkerKind::Commit]
                .iter()
                .any(|k| k.control_type() == control_type),
            "end-transaction markers are written by write_marker"
        );
        let bytes = txn::encode_control_batch(
            txn::ControlProducer::None,
            control_type,
            value,
            timestamp_ms,
        );
        let valid = self.own_batch(&bytes)?;
        let admitted = self
            .log
            .append_admitted(valid, Durability::Sync, |_| Ok::<(), ()>(()))
            .await;
        match admitted {
            Ok(info) => Ok(info.base_offset),
            Err(AdmitError::Log(e)) => Err(e.into()),
            Err(AdmitError::Refused(())) => unreachable!("admission always passes"),
        }
    }

    /// DeleteRecords: moves the log start offset to `before` durably (`PartitionLog::
    /// delete_records`: at most the high watermark, never back) and drops the aborted
    /// transactions wholly below it from `aborted.txnindex`. Returns the new log start offset.
    pub async fn delete_records(&self, before: DeleteBefore) -> Result<u64, PartitionError> {
        let start = self.log.delete_records(before).await?;
        self.store_aborted_index().await?;
        Ok(start)
    }

    /// Rewrites `aborted.txnindex` if it is behind memory (entries below the log start
    /// offset are dropped first).
    async fn store_aborted_index(&self) -> Result<(), PartitionError> {
        let _one_writer = self
            .aborted_file_writer
            .acquire_permit(1)
            .await
            .expect("the semaphore is never closed");
        let (gen, bytes) = {
            let mut t = self.txn.borrow_mut();
            t.drop_below(self.log.log_start_offset());
            if t.aborted_gen() == self.aborted_file_gen.get() {
                return Ok(());
            }
            (t.aborted_gen(), txn::encode_aborted_file(t.aborted()))
        };
        io::write_atomic(&self.dir().join(txn::ABORTED_INDEX_FILE_NAME), bytes)
            .await
            .map_err(|source| PartitionError::Io {
                dir: self.dir_name(),
                op: "writing the aborted-transaction index",
                source,
            })?;
        self.aborted_file_gen.set(gen);
        Ok(())
    }

    /// min(high watermark, first offset of the oldest open transaction here); a transaction
    /// whose marker is not durable yet still counts as open.
    pub fn last_stable_offset(&self) -> u64 {
        self.txn
            .borrow()
            .last_stable_offset(self.log.high_watermark())
    }

    /// The aborted transactions that overlap offsets `from..to` (last_offset >= from &&
    /// first_offset < to), oldest first.
    pub fn aborted_transactions(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        self.txn.borrow().aborted_between(from, to)
    }

    /// Every producer this partition remembers, with the first offset of its open transaction
    /// here, if any (DescribeProducers).
    pub fn producers(&self) -> Vec<(crate::producer_state::ProducerSnapshot, Option<u64>)> {
        let open: std::collections::HashMap<i64, u64> = self
            .txn
            .borrow()
            .ongoing()
            .into_iter()
            .map(|(pid, _, first)| (pid, first))
            .collect();
        self.producers
            .borrow()
            .snapshot()
            .into_iter()
            .map(|p| (p, open.get(&p.producer_id).copied()))
            .collect()
    }

    /// The producers with an open transaction that has a batch here: (pid, epoch, first
    /// offset), oldest first (a begun transaction with no batch yet is not listed).
    pub fn ongoing_transactions(&self) -> Vec<(i64, i16, u64)> {
        self.txn.borrow().ongoing()
    }

    /// The answer to a retry of the stored batch at `base_offset..=last_offset`: its offsets,
    /// once it is durable (a retry must not be acknowledged before its original).
    async fn duplicate(
        &self,
        base_offset: u64,
        last_offset: u64,
    ) -> Result<Produced, PartitionError> {
        if self.log.high_watermark() <= last_offset {
            self.log.sync_to(last_offset + 1).await?;
        }
        Ok(Produced {
            base_offset,
            last_offset,
            log_append_time_ms: None,
            duplicate: true,
        })
    }

    /// One cleaner pass over a compacted log, if one is due (`PartitionLog::clean`): the
    /// newest batch of every known idempotent producer is kept, emptied if need be, so its
    /// sequence survives compaction; markers are kept, aborted records shadow no key, and
    /// nothing from the last stable offset on is cleaned.
    pub async fn clean(
        &self,
        now_ms: i64,
        dedupe_buffer_bytes: usize,
        throttle: &crate::cleaner::Throttle,
    ) -> Result<Option<crate::log::CleanSummary>, LogError> {
        let keep_batches = self.producers.borrow().last_batch_offsets();
        let aborted = self.txn.borrow().aborted().to_vec();
        self.log
            .clean(&crate::log::CleanOptions {
                now_ms,
                dedupe_buffer_bytes,
                throttle,
                keep_batches: &keep_batches,
                aborted: &aborted,
                first_unstable_offset: self.last_stable_offset(),
            })
            .await
    }

    /// Closes the log cleanly (flush, sync, seal, clean marker).
    pub async fn close(&self) -> Result<(), LogError> {
        self.log.close().await
    }

    /// Closes the log and removes the partition directory (its topic was deleted), and the
    /// topic directory if this was its last partition.
    pub async fn close_and_delete(&self) -> Result<(), PartitionError> {
        if let Err(e) = self.log.close().await {
            tracing::warn!(dir = %self.dir().display(), error = %e, "closing a deleted partition");
        }
        io::remove_dir_tree(self.dir())
            .await
            .map_err(|source| PartitionError::Io {
                dir: self.dir_name(),
                op: "removing the directory",
                source,
            })?;
        if let Some(topic_dir) = self.dir().parent() {
            io::remove_dir_if_empty(topic_dir).await;
        }
        Ok(())
    }

    fn cursor_file(&self, child: &str) -> PathBuf {
        self.dir()
            .join(format!("{CURSOR_FILE_PREFIX}{child}{CURSOR_FILE_SUFFIX}"))
    }

    /// The bytes of fan-out cursor `child`'s file; `None` if there is none.
    pub async fn load_cursor_file(&self, child: &str) -> std::io::Result<Option<Vec<u8>>> {
        let loaded = io::read_small(&self.cursor_file(child)).await?;
        if let Some(bytes) = &loaded {
            self.stored_cursor_files
                .borrow_mut()
                .insert(child.to_string(), bytes.clone());
        }
        Ok(loaded)
    }

    /// Durably replaces fan-out cursor `child`'s file (temp + fsync + rename + dir fsync).
    pub async fn store_cursor_file(&self, child: &str, bytes: Vec<u8>) -> std::io::Result<()> {
        io::write_atomic(&self.cursor_file(child), bytes.clone()).await?;
        self.stored_cursor_files
            .borrow_mut()
            .insert(child.to_string(), bytes);
        Ok(())
    }

    /// Removes fan-out cursor `child`'s file; absent is fine.
    pub async fn remove_cursor_file(&self, child: &str) -> std::io::Result<()> {
        self.stored_cursor_files.borrow_mut().remove(child);
        io::remove(&self.cursor_file(child)).await
    }

    /// The cursor files this process loaded or stored since the partition opened (child,
    /// bytes).
    pub fn stored_cursor_files(&self) -> Vec<(String, Vec<u8>)> {
        self.stored_cursor_files
            .borrow()
            .iter()
            .map(|(c, b)| (c.clone(), b.clone()))
            .collect()
    }

    /// Whether this process last stored exactly `bytes` as cursor `child`'s file.
    pub fn holds_cursor_file(&self, child: &str, bytes: &[u8]) -> bool {
        self.stored_cursor_files
            .borrow()
            .get(child)
            .map(Vec::as_slice)
            == Some(bytes)
    }

    /// The children that have a cursor file in this partition's directory, sorted.
    pub async fn cursor_files(&self) -> std::io::Result<Vec<String>> {
        let mut out: Vec<String> = io::list_dir(self.dir())
            .await?
            .iter()
            .filter_map(|n| {
                n.strip_prefix(CURSOR_FILE_PREFIX)?
                    .strip_suffix(CURSOR_FILE_SUFFIX)
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
            })
            .collect();
        out.sort();
        Ok(out)
    }
}
