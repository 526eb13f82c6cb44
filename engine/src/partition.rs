//! `Partition`: one partition's ordered state on its owner core. It owns what must change in
//! step with the log: the `PartitionLog`, the idempotent-producer state (later: transaction
//! state, the last stable offset, the aborted-transaction index) and the partition directory
//! with every file in it (segments, indexes, recovery marker, `incarnation`, fan-out cursor
//! files, the latter through the API below). Nothing else writes into a partition directory.
//!
//! `produce` checks the producer's sequence, appends and records the sequence in one step of
//! the log's admission order (`PartitionLog::append_admitted`): a batch the log refuses leaves
//! the producer state as it was, and a retry is judged against every batch admitted before it.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use thiserror::Error;

use crate::config::LogConfig;
use crate::core_storage::CoreStorage;
use crate::io;
use crate::log::{AdmitError, Durability, LogError, PartitionLog, RecoverySummary};
use crate::producer_state::{self, ProducerStates, SeqCheck};
use crate::record_check::ValidBatch;

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
}

pub struct Partition {
    log: Rc<PartitionLog>,
    producers: RefCell<ProducerStates>,
    incarnation: String,
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
        let (log, summary) = PartitionLog::open(core, dir, config).await?;
        let producers = producer_state::rebuild(&log).await?;
        let p = Rc::new(Self {
            log,
            producers: RefCell::new(producers),
            incarnation: incarnation.to_string(),
        });
        Ok((p, summary))
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
        }
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
    /// sequence survives compaction.
    pub async fn clean(
        &self,
        now_ms: i64,
        dedupe_buffer_bytes: usize,
        throttle: &crate::cleaner::Throttle,
    ) -> Result<Option<crate::log::CleanSummary>, LogError> {
        let keep_batches = self.producers.borrow().last_batch_offsets();
        self.log
            .clean(&crate::log::CleanOptions {
                now_ms,
                dedupe_buffer_bytes,
                throttle,
                keep_batches: &keep_batches,
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
        io::read_small(&self.cursor_file(child)).await
    }

    /// Durably replaces fan-out cursor `child`'s file (temp + fsync + rename + dir fsync).
    pub async fn store_cursor_file(&self, child: &str, bytes: Vec<u8>) -> std::io::Result<()> {
        io::write_atomic(&self.cursor_file(child), bytes).await
    }

    /// Removes fan-out cursor `child`'s file; absent is fine.
    pub async fn remove_cursor_file(&self, child: &str) -> std::io::Result<()> {
        io::remove(&self.cursor_file(child)).await
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
