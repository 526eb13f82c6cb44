//! The fan-out engine (seed 000, DESIGN.md §7): for each (parent partition × child) one cursor
//! on the parent partition's owner core reads the committed parent log (below its last stable
//! offset; aborted transactions and control batches left out), re-keys every record
//! with the child's partitioner and commits per-child-partition batches, and only then advances
//! its durable offset file (commit-before-advance: at least once, never a gap).
//!
//! This crate holds the broker-independent parts: the cursor offset file ([`offset_file`]), the
//! partitioner and batch re-keying ([`rekey`]) and the cursor loop ([`cursor`]), generic over
//! the small traits the broker implements ([`cursor::ParentLog`], [`cursor::ChildSink`],
//! [`cursor::Clock`]). It must not depend on `net`.

pub mod cursor;
pub mod offset_file;
pub mod rekey;

use std::time::Duration;

/// Slab long-poll: how long a cursor waits for new parent data before looping.
pub const SLAB_LONG_POLL: Duration = Duration::from_secs(1);
/// A slab closes at this many records...
pub const SLAB_MAX_RECORDS: usize = 4_096;
/// ...or this many bytes of parent batches read...
pub const SLAB_MAX_BYTES: usize = 4 * 1024 * 1024;
/// A child batch holds at most this many bytes of records (a slab can hold 4 MiB for one child
/// partition; a child topic's `max.message.bytes` defaults to 1 MiB).
pub const MAX_CHILD_BATCH_BYTES: usize = 512 * 1024;
/// ...or when this linger (from its first record) ends, whichever comes first.
pub const SLAB_LINGER: Duration = Duration::from_millis(25);
/// After a failed read, child commit or offset write the cursor waits this long and re-reads
/// from its unadvanced offset.
pub const FAILURE_BACKOFF: Duration = Duration::from_secs(1);
/// Data past the cursor is durable but not stable (an open transaction holds the parent's last
/// stable offset at or below the cursor): the cursor looks again after this long. The high
/// watermark, which `wait_for_data_after` wakes on, moves before the last stable offset can.
pub const UNSTABLE_POLL: Duration = Duration::from_millis(50);
/// A delay cursor sleeps at most this long before looking again (keeps gauges fresh).
pub const DUE_WAKE_CAP: Duration = Duration::from_secs(30);
/// The reconciler's period (desired cursors vs running ones).
pub const RECONCILE_INTERVAL: Duration = Duration::from_secs(1);
/// Orphan cursor files are swept every this many reconcile passes.
pub const ORPHAN_SWEEP_EVERY_PASSES: u64 = 30;
