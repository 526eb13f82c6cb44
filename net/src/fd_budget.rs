//! This node's file-descriptor and partition budgets.
//!
//! Files: the soft fd limit is raised to the hard limit at start. A reserve is kept for
//! connections, the metastore, listeners and each core's cache of closed segments opened for
//! reads; the rest is split evenly between the cores as their open-file budgets
//! (`max-open-files`), which each core's `engine::io::FilePool` keeps by closing its least
//! recently used idle data files (they reopen on their next use). So the number of
//! partitions is not bounded by the fd limit.
//!
//! Partitions: at most `max-partitions` per node (each costs memory, a directory and its
//! files on disk, and restart work). Placement refuses partitions past it with a clear error,
//! and a restart opens at most that many (the rest are logged as not served), so too many
//! partitions never stop the broker from starting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Part of the fd limit kept for everything but partition files: one in this many.
pub const FD_RESERVE_DIVISOR: usize = 4;
/// Least number of fds kept for everything but partition files.
pub const FD_RESERVE_MIN: usize = 512;
/// Files a closed segment cached for reads may hold.
pub const FDS_PER_CACHED_SEGMENT: usize = 3;
/// The least open-file budget a core gets (a segment's three files, a cleaner's output and
/// some room), however low the fd limit.
pub const MIN_OPEN_FILES_PER_CORE: usize = 16;
/// Partitions a node serves at most unless `max-partitions` says otherwise.
pub const DEFAULT_MAX_PARTITIONS: usize = 200_000;

pub struct FdBudget {
    /// Partitions this node may hold at once (`max-partitions`).
    pub max_partitions: usize,
    /// Data files each core keeps open at once (`max-open-files` split between the cores).
    pub max_open_files_per_core: usize,
    /// The soft fd limit the budget was derived from.
    pub fd_limit: usize,
    open: Arc<AtomicUsize>,
}

/// One open partition's place in the budget; dropping it gives the place back.
pub struct PartitionSlot(Arc<AtomicUsize>);

impl FdBudget {
    /// Raises the soft fd limit to the hard limit (as Kafka's start scripts advise), logs
    /// both, then derives the budget from it, keeping room for `read_cache_fds` (closed
    /// segments the cores cache for reads). `max_open_files`: the node's file budget if set
    /// (`max-open-files`), else what the fd limit leaves.
    pub fn from_process_limit(
        read_cache_fds: usize,
        cores: usize,
        max_open_files: Option<usize>,
        max_partitions: usize,
    ) -> Self {
        let (soft_before, fd_limit, hard) = raise_nofile_limit();
        let b = Self::new(
            fd_limit,
            read_cache_fds,
            cores,
            max_open_files,
            max_partitions,
        );
        tracing::info!(
            soft_before,
            hard,
            fd_limit,
            max_open_files_per_core = b.max_open_files_per_core,
            max_partitions,
            "file budget"
        );
        b
    }

    pub fn new(
        fd_limit: usize,
        read_cache_fds: usize,
        cores: usize,
        max_open_files: Option<usize>,
        max_partitions: usize,
    ) -> Self {
        let reserve = (fd_limit / FD_RESERVE_DIVISOR).max(FD_RESERVE_MIN) + read_cache_fds;
        let files = max_open_files.unwrap_or_else(|| fd_limit.saturating_sub(reserve));
        Self {
            max_partitions,
            max_open_files_per_core: (files / cores.max(1)).max(MIN_OPEN_FILES_PER_CORE),
            fd_limit,
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Takes a place for one more open partition, if the budget has one.
    pub fn try_open(&self) -> Option<PartitionSlot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_partitions).then_some(n + 1)
            })
            .ok()
            .map(|_| PartitionSlot(self.open.clone()))
    }

    pub fn open_partitions(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Refuses placing `adding` partitions on a node that already has `placed`.
    pub fn check_placement(&self, placed: usize, adding: usize) -> Result<(), PlacementRefused> {
        if placed.saturating_add(adding) > self.max_partitions {
            return Err(PlacementRefused {
                max_partitions: self.max_partitions,
                placed,
                adding,
            });
        }
        Ok(())
    }
}

/// More partitions than this node serves.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("this node serves at most {max_partitions} partitions (max-partitions); it has {placed}, so {adding} more cannot be served: raise max-partitions (each partition costs memory and restart time) or use fewer partitions")]
pub struct PlacementRefused {
    pub max_partitions: usize,
    pub placed: usize,
    pub adding: usize,
}

impl Drop for PartitionSlot {
    fn drop(&mut self) {
        let before = self.0.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "partition budget underflow");
    }
}

/// Raises the soft fd limit to the hard limit; returns (soft before, soft now, hard).
fn raise_nofile_limit() -> (usize, usize, usize) {
    let as_usize = |v: libc::rlim_t| usize::try_from(v).unwrap_or(usize::MAX).min(1 << 24);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return (1024, 1024, 1024);
        }
        let before = as_usize(lim.rlim_cur);
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        (before, as_usize(lim.rlim_cur), as_usize(lim.rlim_max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_split_between_cores_and_partitions_counted() {
        let b = FdBudget::new(20_000, 600, 2, None, 100);
        assert_eq!(b.max_open_files_per_core, (20_000 - 5_000 - 600) / 2);
        let set = FdBudget::new(20_000, 600, 2, Some(1_000), 100);
        assert_eq!(set.max_open_files_per_core, 500);
        let tiny = FdBudget::new(600, 600, 2, None, 100);
        assert_eq!(tiny.max_open_files_per_core, MIN_OPEN_FILES_PER_CORE);
        assert!(b.check_placement(0, 100).is_ok());
        let err = b.check_placement(10, 91).unwrap_err();
        assert!(err.to_string().contains("raise max-partitions"), "{err}");
        let small = FdBudget::new(20_000, 0, 1, None, 2);
        let a = small.try_open().unwrap();
        let _b = small.try_open().unwrap();
        assert!(small.try_open().is_none());
        drop(a);
        assert!(small.try_open().is_some());
    }
}
