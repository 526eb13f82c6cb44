//! Log compaction (Kafka's log cleaner), the parts that do not need a log's state: the
//! bounded key → offset map, a batch's records and its rebuild without the records that
//! lost, the durable checkpoint, the crash-safe swap of cleaned segments, and the I/O
//! throttle. One pass over one log is `PartitionLog::clean` (`log/compact.rs`).

pub mod checkpoint;
pub mod offset_map;
pub mod records;
pub mod swap;
pub mod throttle;

pub use checkpoint::CleanerCheckpoint;
pub use offset_map::OffsetMap;
pub use throttle::Throttle;

/// Kafka's default `log.cleaner.dedupe.buffer.size` (128 MiB, here per core).
pub const DEFAULT_DEDUPE_BUFFER_BYTES: usize = 128 << 20;
