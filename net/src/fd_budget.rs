//! How many partitions this node can keep open within its file-descriptor limit.
//!
//! Each open partition holds the three files of its active segment (`.log`, `.index`,
//! `.timeindex`). The rest of the limit is kept for connections, the metastore, the per-core
//! cache of closed segments opened for reads, and listeners. Placement refuses partitions
//! past the budget with a clear error, and a restart opens at most the budget (the rest are
//! logged as not served), so too many partitions never stop the broker from starting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Files an open partition holds.
pub const FDS_PER_OPEN_PARTITION: usize = 3;
/// Part of the fd limit kept for everything but partitions: one in this many.
pub const FD_RESERVE_DIVISOR: usize = 4;
/// Least number of fds kept for everything but partitions.
pub const FD_RESERVE_MIN: usize = 512;
/// Files a closed segment cached for reads may hold.
pub const FDS_PER_CACHED_SEGMENT: usize = 3;

pub struct FdBudget {
    /// Partitions this node may hold open at once.
    pub max_open_partitions: usize,
    /// The soft fd limit the budget was derived from.
    pub fd_limit: usize,
    open: Arc<AtomicUsize>,
}

/// One open partition's place in the budget; dropping it gives the place back.
pub struct PartitionSlot(Arc<AtomicUsize>);

impl FdBudget {
    /// Raises the soft fd limit to the hard limit (as Kafka's start scripts advise), then
    /// derives the budget from it, keeping room for `read_cache_fds` (closed segments the
    /// cores cache for reads).
    pub fn from_process_limit(read_cache_fds: usize) -> Self {
        let fd_limit = raise_nofile_limit();
        Self::new(fd_limit, read_cache_fds)
    }

    pub fn new(fd_limit: usize, read_cache_fds: usize) -> Self {
        let reserve = (fd_limit / FD_RESERVE_DIVISOR).max(FD_RESERVE_MIN) + read_cache_fds;
        Self {
            max_open_partitions: fd_limit.saturating_sub(reserve) / FDS_PER_OPEN_PARTITION,
            fd_limit,
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Takes a place for one more open partition, if the budget has one.
    pub fn try_open(&self) -> Option<PartitionSlot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_open_partitions).then_some(n + 1)
            })
            .ok()
            .map(|_| PartitionSlot(self.open.clone()))
    }

    pub fn open_partitions(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Refuses placing `adding` partitions on a node that already has `placed`.
    pub fn check_placement(&self, placed: usize, adding: usize) -> Result<(), PlacementRefused> {
        if placed.saturating_add(adding) > self.max_open_partitions {
            return Err(PlacementRefused {
                max_open: self.max_open_partitions,
                fd_limit: self.fd_limit,
                placed,
                adding,
            });
        }
        Ok(())
    }
}

/// More partitions than this node's fd budget can serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("this node can serve at most {max_open} partitions with its file-descriptor limit of {fd_limit} ({FDS_PER_OPEN_PARTITION} per partition, the rest kept for connections); it has {placed}, so {adding} more cannot be served: raise the fd limit (ulimit -n) and restart, or use fewer partitions")]
pub struct PlacementRefused {
    pub max_open: usize,
    pub fd_limit: usize,
    pub placed: usize,
    pub adding: usize,
}

impl Drop for PartitionSlot {
    fn drop(&mut self) {
        let before = self.0.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "fd budget underflow");
    }
}

fn raise_nofile_limit() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    usize::try_from(lim.rlim_cur)
        .unwrap_or(usize::MAX)
        .min(1 << 24)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_keeps_a_reserve_and_counts_slots() {
        let b = FdBudget::new(20_000, 0);
        assert_eq!(b.max_open_partitions, (20_000 - 5_000) / 3);
        assert!(b.check_placement(0, b.max_open_partitions).is_ok());
        let err = b.check_placement(10, b.max_open_partitions).unwrap_err();
        assert!(err.to_string().contains("raise the fd limit"), "{err}");
        let small = FdBudget::new(FD_RESERVE_MIN + 6, 0);
        let a = small.try_open().unwrap();
        let _b = small.try_open().unwrap();
        assert!(small.try_open().is_none());
        drop(a);
        assert!(small.try_open().is_some());
    }
}
