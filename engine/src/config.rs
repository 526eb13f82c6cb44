//! Limits and knobs of one partition log. Every limit carries its unit in its name.

/// Kafka's default `segment.bytes` (1 GiB).
pub const DEFAULT_SEGMENT_BYTES: u64 = 1 << 30;
/// Kafka's default `segment.ms` (7 days).
pub const DEFAULT_SEGMENT_MS: i64 = 7 * 24 * 3600 * 1000;
/// Kafka's default `retention.ms` (7 days).
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;
/// Bytes of log between two time-index entries (Kafka's `index.interval.bytes`).
pub const DEFAULT_INDEX_INTERVAL_BYTES: u64 = 4096;
/// Largest preallocation step of a segment file (Redpanda's fallocation step). Steps start at
/// `MIN_PREALLOCATE_STEP_BYTES` and double with the file, so a partition that holds little
/// reserves little (100,000 partitions written once reserve 64 KiB each, not 32 MiB).
pub const DEFAULT_PREALLOCATE_BYTES: u64 = 32 << 20;
/// The first preallocation step of a segment file (and of its indexes).
pub const MIN_PREALLOCATE_STEP_BYTES: u64 = 64 << 10;
/// Size of one aligned chunk of the in-memory tail buffer.
pub const DEFAULT_WRITE_CHUNK_BYTES: usize = 1 << 20;
/// Preallocation step of a segment's `.index` and `.timeindex` (when the log preallocates):
/// 64 Ki offset entries.
pub const INDEX_PREALLOCATE_BYTES: u64 = 1 << 20;
/// Size of one aligned chunk of an index file's tail buffer.
pub const INDEX_WRITE_CHUNK_BYTES: usize = 64 << 10;
/// Appends wait for the flush in flight once this much is buffered and not yet written.
pub const DEFAULT_MAX_UNFLUSHED_BYTES: u64 = 16 << 20;
/// Longest time the `.index` (batch commit times) goes without an fdatasync while appends
/// arrive. The log itself is synced by every flush.
pub const DEFAULT_INDEX_SYNC_INTERVAL_MS: u64 = 1000;
/// Kafka's default `max.message.bytes` (1 MiB + a little).
pub const DEFAULT_MAX_BATCH_BYTES: usize = 1_048_588;

/// Kafka's default `delete.retention.ms` (1 day): how long a tombstone stays readable after the
/// cleaner first kept it.
pub const DEFAULT_DELETE_RETENTION_MS: i64 = 24 * 3600 * 1000;
/// Kafka's default `min.cleanable.dirty.ratio`.
pub const DEFAULT_MIN_CLEANABLE_DIRTY_RATIO: f64 = 0.5;
/// Kafka's default `message.timestamp.after.max.ms` (1 hour): how far past the broker's clock
/// a produced record's CreateTime may lie.
pub const DEFAULT_MESSAGE_TIMESTAMP_AFTER_MAX_MS: i64 = 3600 * 1000;

/// What happens to old data (`cleanup.policy`): deleted by retention, compacted to the latest
/// record per key, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl CleanupPolicy {
    pub const DELETE: Self = Self {
        delete: true,
        compact: false,
    };
    pub const COMPACT: Self = Self {
        delete: false,
        compact: true,
    };

    /// Kafka's spelling: `delete`, `compact`, or both comma-separated in any order.
    pub fn parse(v: &str) -> Option<Self> {
        let mut p = Self {
            delete: false,
            compact: false,
        };
        for part in v.split(',').map(str::trim) {
            match part {
                "delete" => p.delete = true,
                "compact" => p.compact = true,
                _ => return None,
            }
        }
        (p.delete || p.compact).then_some(p)
    }
}

impl std::fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.compact, self.delete) {
            (true, true) => write!(f, "compact,delete"),
            (true, false) => write!(f, "compact"),
            _ => write!(f, "delete"),
        }
    }
}

/// How a topic's record timestamps are kept (`message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's timestamps are stored as sent.
    CreateTime,
    /// The broker overwrites each batch's max timestamp with the append time (Kafka rewrites
    /// the batch and its CRC).
    LogAppendTime,
}

/// The record timestamps a produced batch may carry (`message.timestamp.before.max.ms` and
/// `message.timestamp.after.max.ms` around the broker's clock), both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampWindow {
    pub earliest_ms: i64,
    pub latest_ms: i64,
}

impl TimestampWindow {
    pub fn admits(&self, timestamp_ms: i64) -> bool {
        (self.earliest_ms..=self.latest_ms).contains(&timestamp_ms)
    }
}

/// A random u64 from the std library's randomly keyed SipHash (no extra dependency).
fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Roll the active segment before it grows past this many bytes.
    pub segment_bytes: u64,
    /// Roll the active segment once its first batch is this old (by commit time).
    pub segment_ms: i64,
    /// Delete closed segments whose newest record timestamp is older than this; `None` keeps
    /// them forever.
    pub retention_ms: Option<i64>,
    /// Delete the oldest closed segments while the log is larger than this; `None` = no limit.
    pub retention_bytes: Option<u64>,
    pub index_interval_bytes: u64,
    pub preallocate_bytes: u64,
    pub write_chunk_bytes: usize,
    pub max_unflushed_bytes: u64,
    pub max_batch_bytes: usize,
    pub timestamp_type: TimestampType,
    pub index_sync_interval_ms: u64,
    /// `cleanup.policy`: retention deletes closed segments only with `delete`; the cleaner
    /// compacts the log only with `compact`.
    pub cleanup_policy: CleanupPolicy,
    /// `min.cleanable.dirty.ratio`: the cleaner takes a log once this share of its closed bytes
    /// is dirty (not cleaned yet).
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a segment holding a record newer than this is not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment older than this is cleaned whatever the ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone survives after the cleaner first kept it.
    pub delete_retention_ms: i64,
    /// `segment.jitter.ms`: each segment rolls by age up to a random share of this earlier
    /// (drawn once per segment, [`LogConfig::draw_roll_jitter_ms`]), so that partitions created
    /// together do not all roll at once.
    pub segment_jitter_ms: i64,
    /// `message.timestamp.before.max.ms`: how far before the broker's clock a produced
    /// record's CreateTime may lie (checked on produce; `i64::MAX`: any).
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far after the broker's clock a produced record's
    /// CreateTime may lie.
    pub message_timestamp_after_max_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            segment_ms: DEFAULT_SEGMENT_MS,
            retention_ms: Some(DEFAULT_RETENTION_MS),
            retention_bytes: None,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            preallocate_bytes: DEFAULT_PREALLOCATE_BYTES,
            write_chunk_bytes: DEFAULT_WRITE_CHUNK_BYTES,
            max_unflushed_bytes: DEFAULT_MAX_UNFLUSHED_BYTES,
            max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
            timestamp_type: TimestampType::CreateTime,
            index_sync_interval_ms: DEFAULT_INDEX_SYNC_INTERVAL_MS,
            cleanup_policy: CleanupPolicy::DELETE,
            min_cleanable_dirty_ratio: DEFAULT_MIN_CLEANABLE_DIRTY_RATIO,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: DEFAULT_DELETE_RETENTION_MS,
            segment_jitter_ms: 0,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: DEFAULT_MESSAGE_TIMESTAMP_AFTER_MAX_MS,
        }
    }
}

impl LogConfig {
    /// How old the active segment's first batch may get before a roll: `segment.ms`, and for
    /// a compacted log at most `max.compaction.lag.ms` (only closed segments are cleaned), as
    /// Kafka does.
    pub fn roll_after_ms(&self) -> i64 {
        if self.cleanup_policy.compact {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        }
    }

    /// The jitter of a new segment (Kafka's): a random time in [0, min(`segment.jitter.ms`,
    /// `segment.ms`)) by which it rolls earlier than its age limit; 0 without jitter.
    pub fn draw_roll_jitter_ms(&self) -> i64 {
        let bound = self.segment_jitter_ms.min(self.segment_ms);
        if bound <= 0 {
            return 0;
        }
        (random_u64() % bound as u64) as i64
    }

    /// Whether a segment whose first batch was committed at `first_commit_ms`, and that drew
    /// `jitter_ms` ([`LogConfig::draw_roll_jitter_ms`]), is due to roll by age at `commit_ms`.
    pub fn roll_due(&self, first_commit_ms: i64, commit_ms: i64, jitter_ms: i64) -> bool {
        commit_ms.saturating_sub(first_commit_ms) >= self.roll_after_ms().saturating_sub(jitter_ms)
    }

    /// The record timestamps a client's batch may carry at `now_ms`: `None` where the log
    /// stamps its own (LogAppendTime), as Kafka checks only CreateTime.
    pub fn timestamp_window(&self, now_ms: i64) -> Option<TimestampWindow> {
        match self.timestamp_type {
            TimestampType::CreateTime => Some(TimestampWindow {
                earliest_ms: now_ms.saturating_sub(self.message_timestamp_before_max_ms),
                latest_ms: now_ms.saturating_add(self.message_timestamp_after_max_ms),
            }),
            TimestampType::LogAppendTime => None,
        }
    }

    /// Checks the invariants the log relies on; a bad value is named with its fix.
    pub fn validate(&self) -> Result<(), String> {
        let align = crate::io::IO_ALIGNMENT_BYTES;
        if self.segment_bytes < 4096 || self.segment_bytes > u32::MAX as u64 {
            return Err(format!(
                "segment_bytes {} out of range: use 4096..=4294967295 (positions are 32-bit)",
                self.segment_bytes
            ));
        }
        if self.segment_ms <= 0 {
            return Err(format!("segment_ms {} must be positive", self.segment_ms));
        }
        if self.write_chunk_bytes == 0 || !(self.write_chunk_bytes as u64).is_multiple_of(align) {
            return Err(format!(
                "write_chunk_bytes {} must be a positive multiple of {align}",
                self.write_chunk_bytes
            ));
        }
        if !self.preallocate_bytes.is_multiple_of(align) {
            return Err(format!(
                "preallocate_bytes {} must be a multiple of {align}",
                self.preallocate_bytes
            ));
        }
        if self.max_batch_bytes as u64 + self.segment_bytes > u32::MAX as u64 {
            // A batch larger than a segment gets a segment of its own; positions stay 32-bit.
            return Err(format!(
                "max_batch_bytes {} + segment_bytes {} exceed 4 GiB (32-bit positions): lower one",
                self.max_batch_bytes, self.segment_bytes
            ));
        }
        if self.max_unflushed_bytes < self.max_batch_bytes as u64 {
            return Err(format!(
                "max_unflushed_bytes {} is below max_batch_bytes {}",
                self.max_unflushed_bytes, self.max_batch_bytes
            ));
        }
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            return Err(format!(
                "min_cleanable_dirty_ratio {} must lie in [0, 1]",
                self.min_cleanable_dirty_ratio
            ));
        }
        if self.min_compaction_lag_ms < 0
            || self.max_compaction_lag_ms < 1
            || self.delete_retention_ms < 0
        {
            return Err(format!(
                "compaction lags and delete retention must be non-negative (min lag {} ms, max lag {} ms, delete retention {} ms)",
                self.min_compaction_lag_ms, self.max_compaction_lag_ms, self.delete_retention_ms
            ));
        }
        if self.segment_jitter_ms < 0
            || self.message_timestamp_before_max_ms < 0
            || self.message_timestamp_after_max_ms < 0
        {
            return Err(format!(
                "segment jitter and timestamp bounds must be non-negative (jitter {} ms, before {} ms, after {} ms)",
                self.segment_jitter_ms,
                self.message_timestamp_before_max_ms,
                self.message_timestamp_after_max_ms
            ));
        }
        if self.max_compaction_lag_ms < self.min_compaction_lag_ms {
            return Err(format!(
                "max.compaction.lag.ms {} is below min.compaction.lag.ms {}: raise the first",
                self.max_compaction_lag_ms, self.min_compaction_lag_ms
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_jitter_rolls_earlier_by_a_draw_below_the_jitter() {
        let hour = 3_600_000;
        let c = LogConfig {
            segment_ms: hour,
            ..LogConfig::default()
        };
        // Without jitter every segment rolls at segment.ms.
        assert_eq!(c.draw_roll_jitter_ms(), 0);
        assert!(!c.roll_due(0, hour - 1, 0));
        assert!(c.roll_due(0, hour, 0));
        // A drawn jitter moves the roll that much earlier.
        assert!(c.roll_due(0, hour - 600_000, 600_000));
        assert!(!c.roll_due(0, hour - 600_001, 600_000));
        // Draws lie in [0, min(segment.jitter.ms, segment.ms)) and differ between segments.
        let c = LogConfig {
            segment_jitter_ms: 1000,
            ..c
        };
        let draws: Vec<i64> = (0..200).map(|_| c.draw_roll_jitter_ms()).collect();
        assert!(draws.iter().all(|d| (0..1000).contains(d)), "{draws:?}");
        assert!(draws.iter().any(|d| *d != draws[0]), "the draws vary");
        let wide = LogConfig {
            segment_jitter_ms: 10 * hour,
            ..c.clone()
        };
        assert!((0..200).all(|_| (0..hour).contains(&wide.draw_roll_jitter_ms())));
        // A compacted log's roll limit (max.compaction.lag.ms) takes the jitter too.
        let compact = LogConfig {
            cleanup_policy: CleanupPolicy::COMPACT,
            max_compaction_lag_ms: 10_000,
            ..c
        };
        assert!(compact.roll_due(0, 9_000, 1_000));
        assert!(!compact.roll_due(0, 8_999, 1_000));
    }

    #[test]
    fn timestamp_window_bounds_create_time_only() {
        let now = 1_700_000_000_000;
        let c = LogConfig {
            message_timestamp_before_max_ms: 1000,
            message_timestamp_after_max_ms: 500,
            ..LogConfig::default()
        };
        let w = c.timestamp_window(now).unwrap();
        assert_eq!((w.earliest_ms, w.latest_ms), (now - 1000, now + 500));
        assert!(w.admits(now - 1000) && w.admits(now + 500) && w.admits(now));
        assert!(!w.admits(now - 1001) && !w.admits(now + 501));
        // Kafka's defaults: any age, at most an hour ahead; the ends saturate.
        let w = LogConfig::default().timestamp_window(now).unwrap();
        assert!(w.admits(0) && w.admits(-1_000_000) && w.admits(now + 3_600_000));
        assert!(!w.admits(now + 3_600_001));
        let lenient = LogConfig {
            message_timestamp_after_max_ms: i64::MAX,
            ..LogConfig::default()
        };
        assert!(lenient.timestamp_window(now).unwrap().admits(i64::MAX));
        let append_time = LogConfig {
            timestamp_type: TimestampType::LogAppendTime,
            ..c
        };
        assert_eq!(append_time.timestamp_window(now), None);
        assert!(LogConfig {
            message_timestamp_after_max_ms: -1,
            ..LogConfig::default()
        }
        .validate()
        .is_err());
    }
}
