//! ringlog's storage engine: durable partition logs on direct I/O (glommio, io_uring) with
//! group commit and crash recovery. See ARCHITECTURE.md for the on-disk layout and invariants.
//!
//! Rooms inside: `io` (the only module that touches files), `batch` (Kafka RecordBatch v2
//! header), `appender` (aligned tail buffer, block writes), `index` (offset and time index
//! entries), `segment` (file names, recovery scan, closed-segment reader), `recovery_marker`, `log_start`
//! (the log start offset DeleteRecords moved),
//! `log` (`PartitionLog`, one file per concern under `log/`), `partition` (`Partition`: the log
//! plus the state that must change with it, and the partition directory), `producer_state`
//! (idempotent producers), `txn` (transaction state: open transactions, last stable offset,
//! aborted-transaction index, control markers), `cleaner` (compaction: offset map, record filter, checkpoint,
//! swap, throttle; one pass is `log/compact.rs`), `clock`, `core_storage` (per-core read cache, clock),
//! `data_dir` (lock + probe).

pub mod appender;
pub mod batch;
pub mod batch_encode;
pub mod checked_file;
pub mod cleaner;
pub mod clock;
pub mod compression;
pub mod config;
pub mod core_storage;
pub mod data_dir;
pub mod index;
pub mod io;
pub mod join;
pub mod latency;
pub mod leader_epochs;
pub mod log;
pub mod log_start;
pub mod partition;
pub mod partition_copy;
pub mod producer_state;
pub mod record_check;
pub mod recovery_marker;
pub mod segment;
pub mod shard;
pub mod tail_cache;
pub mod txn;

pub use config::{CleanupPolicy, LogConfig, TimestampType, TimestampWindow};
pub use core_storage::{CoreStorage, CoreStorageOptions};
pub use data_dir::DataDir;
pub use io::StorageIo;
pub use log::{
    AppendInfo, DeleteBefore, Durability, LogError, PartitionLog, ReadEnd, RecoverySummary,
    TimestampOffset,
};
pub use partition::{Partition, PartitionError, Produced};
