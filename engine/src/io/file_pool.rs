//! The core's budget of open data files (`max-open-files`, issue #13): every file a log opens
//! for writing (the active segment's `.log`, `.index` and `.timeindex`, cleaner output) holds
//! a place while its descriptor is open. When the budget is full, opening one more closes the
//! least recently used file that no operation is using; that file reopens on its next
//! operation (`SegmentFile` does it, unseen by the log). So a core serves any number of
//! partitions within its share of the process's fd limit; only the busiest keep their files
//! open.
//!
//! Closing a file with writes not yet synced loses nothing: the data files are written with
//! direct I/O (no page cache holds them), and an fdatasync through a later descriptor makes
//! the inode's data durable. A file is closed only while nothing is in flight on it.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};

/// What an open pooled file gives the pool to close it.
pub(super) trait Closable {
    /// Closes the descriptor if no operation uses it; `false` when busy.
    fn close_if_idle(&self) -> bool;
}

/// One core's budget of open pooled files, in least-recently-used order.
pub struct FilePool {
    /// Files open at once at most (0: no bound).
    max_open_files: usize,
    tick: Cell<u64>,
    /// Open files by their last use.
    lru: RefCell<BTreeMap<u64, Weak<dyn Closable>>>,
    /// Places taken by opens under way (counted with the open files, so two opens that wait
    /// on the disk at once cannot both take the last place).
    opening: Cell<usize>,
    closed_for_budget: Cell<u64>,
    reopened: Cell<u64>,
    over_budget: Cell<u64>,
}

/// What a core's file pool has done (metrics, `ringlog shards`, tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilePoolStats {
    /// The budget (0: none).
    pub max_open_files: usize,
    /// Pooled files open now.
    pub open_files: usize,
    /// Idle files closed to make room.
    pub closed_for_budget: u64,
    /// Files opened again after such a close.
    pub reopened: u64,
    /// Opens that found every open file busy and went past the budget for the moment.
    pub over_budget: u64,
}

impl FilePool {
    pub fn new(max_open_files: usize) -> Rc<Self> {
        Rc::new(Self {
            max_open_files,
            tick: Cell::new(0),
            lru: RefCell::new(BTreeMap::new()),
            opening: Cell::new(0),
            closed_for_budget: Cell::new(0),
            reopened: Cell::new(0),
            over_budget: Cell::new(0),
        })
    }

    pub fn stats(&self) -> FilePoolStats {
        FilePoolStats {
            max_open_files: self.max_open_files,
            open_files: self.lru.borrow().len() + self.opening.get(),
            closed_for_budget: self.closed_for_budget.get(),
            reopened: self.reopened.get(),
            over_budget: self.over_budget.get(),
        }
    }

    fn next_tick(&self) -> u64 {
        let t = self.tick.get() + 1;
        self.tick.set(t);
        t
    }

    /// Takes a place for a file about to open, first closing idle files (least recently used
    /// first) until one more fits the budget. If every open file is busy the open goes ahead
    /// past the budget (bounded by the operations in flight) and is counted.
    pub(super) fn reserve(self: &Rc<Self>) -> Reservation {
        self.make_room();
        self.opening.set(self.opening.get() + 1);
        Reservation { pool: self.clone() }
    }

    fn make_room(&self) {
        if self.max_open_files == 0 {
            return;
        }
        let mut lru = self.lru.borrow_mut();
        if lru.len() + self.opening.get() < self.max_open_files {
            return;
        }
        let mut gone = Vec::new();
        let mut closed = None;
        for (&tick, file) in lru.iter() {
            match file.upgrade() {
                // Dropped without leaving (cannot happen: a file leaves on drop); tidy up.
                None => gone.push(tick),
                Some(f) => {
                    if f.close_if_idle() {
                        closed = Some(tick);
                        break;
                    }
                }
            }
        }
        for t in gone {
            lru.remove(&t);
        }
        match closed {
            Some(t) => {
                lru.remove(&t);
                self.closed_for_budget.set(self.closed_for_budget.get() + 1);
            }
            None if lru.len() + self.opening.get() >= self.max_open_files => {
                self.over_budget.set(self.over_budget.get() + 1);
            }
            None => {}
        }
    }

    /// Enters an opened file on its reserved place; returns its place in the LRU order.
    pub(super) fn enter(
        &self,
        reservation: Reservation,
        file: Weak<dyn Closable>,
        reopen: bool,
    ) -> u64 {
        drop(reservation);
        if reopen {
            self.reopened.set(self.reopened.get() + 1);
        }
        let t = self.next_tick();
        self.lru.borrow_mut().insert(t, file);
        t
    }

    /// Moves an open file to the most recently used end; returns its new place.
    pub(super) fn touch(&self, place: u64) -> u64 {
        let mut lru = self.lru.borrow_mut();
        let Some(f) = lru.remove(&place) else {
            // Not open under this place (it was closed meanwhile): nothing to move.
            return place;
        };
        let t = self.next_tick();
        lru.insert(t, f);
        t
    }

    /// A file closed by its owner (or dropped) leaves the pool.
    pub(super) fn leave(&self, place: u64) {
        self.lru.borrow_mut().remove(&place);
    }
}

/// A place taken for a file being opened, counted until the file enters the LRU order (or the
/// open fails).
pub(super) struct Reservation {
    pool: Rc<FilePool>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let n = self.pool.opening.get();
        debug_assert!(n > 0, "a reservation is counted");
        self.pool.opening.set(n.saturating_sub(1));
    }
}
