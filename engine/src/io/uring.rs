//! The engine's own io_uring (the `io-uring` crate), one per core, for the files it appends to
//! (`storage-io = io-uring`, the default; `engine/benches/sync_paths.rs` measured why).
//!
//! - One ring per executor thread, with a sparse table of registered files and one registered
//!   buffer pool (`buffer::BufferPool`).
//! - Integration with glommio's reactor: the ring's eventfd is read through glommio (an
//!   `IORING_OP_READ` on glommio's own ring, which the kernel arms as a poll: no thread), so a
//!   completion wakes the core's reaper task, which drains the completion queue and wakes the
//!   waiting futures. The core never blocks on this ring.
//! - A durable append is one write with `RWF_DSYNC` into blocks that were zeroed and synced
//!   ahead of the tail (`UringFile::zero_ahead`): overwriting initialised blocks inside the file
//!   size needs no metadata commit, so the write is one device write and one cache flush,
//!   issued in one `io_uring_enter` with no hand-off to an io-wq worker (an `IORING_OP_FSYNC`
//!   always runs on one).
//!
//! Every buffer and file an operation uses is kept alive by its slot until the kernel posts
//! its completion, even if the future that submitted it is dropped.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::{AsRawFd, FromRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

use io_uring::{opcode, squeue, types, IoUring};

use super::buffer::{BufferPool, IoBuf};
use super::{align_down, align_up, io_context};

/// Submission queue entries of a core's ring (the completion queue has twice as many).
pub const RING_ENTRIES: u32 = 256;
/// Operations on one ring at most, from submission until their result is collected: the
/// completion queue's size, so it never overflows, and the bound of the slot table; a
/// submitter past it waits.
const MAX_OPS_IN_FLIGHT: u64 = 2 * RING_ENTRIES as u64;
/// Pause before a submission the kernel refused for now (EBUSY, EAGAIN) is tried again.
const SUBMIT_RETRY_US: u64 = 50;
/// Registered file slots per core; files past it use plain descriptors.
pub const FIXED_FILE_SLOTS: u32 = 1024;
/// The most a file is kept zeroed and synced ahead of its tail (so its durable writes
/// overwrite initialised blocks); a new zeroing step starts when less than half is left.
pub const ZERO_AHEAD_BYTES: u64 = 16 << 20;
/// The least a file is kept zeroed ahead (the lead is twice what the file holds, between this
/// and `ZERO_AHEAD_BYTES`: a fresh segment zeroes little).
pub const MIN_ZERO_AHEAD_BYTES: u64 = 256 << 10;
/// One zeroing step: written (from the pool's zero chunk) and synced as one unit.
pub const ZERO_STEP_BYTES: u64 = 4 << 20;

/// Settings of a core's ring.
#[derive(Clone, Copy, Debug)]
pub struct RingConfig {
    /// Bytes of the registered buffer pool (0: none; writes use unregistered buffers).
    pub registered_buffer_bytes: usize,
    /// Size of each pool chunk: the `.log` appenders' chunk size.
    pub chunk_bytes: usize,
}

/// What a core's ring has done (tests, metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Operations submitted so far.
    pub submitted_ops: u64,
    /// Registered buffer chunks free now (0 without a pool).
    pub free_pool_chunks: usize,
    /// Operations submitted whose results are not collected yet (orphaned ones included).
    pub ops_in_flight: u64,
}

enum Slot {
    Free {
        next: Option<usize>,
    },
    Pending {
        waker: Option<Waker>,
        /// Buffers and files the kernel uses until completion.
        _keep: Rc<dyn Any>,
        /// The submitting future is gone: free the slot at completion.
        orphaned: bool,
    },
    Done(i32),
}

struct Slots {
    slots: Vec<Slot>,
    free: Option<usize>,
}

impl Slots {
    fn take(&mut self, keep: Rc<dyn Any>) -> usize {
        let pending = Slot::Pending {
            waker: None,
            _keep: keep,
            orphaned: false,
        };
        match self.free {
            Some(i) => {
                let Slot::Free { next } = self.slots[i] else {
                    unreachable!("the free list holds free slots")
                };
                self.free = next;
                self.slots[i] = pending;
                i
            }
            None => {
                self.slots.push(pending);
                debug_assert!(
                    self.slots.len() as u64 <= MAX_OPS_IN_FLIGHT,
                    "slots are bounded by the operations in flight"
                );
                self.slots.len() - 1
            }
        }
    }

    fn release(&mut self, i: usize) {
        self.slots[i] = Slot::Free { next: self.free };
        self.free = Some(i);
    }
}

pub struct CoreRing {
    ring: RefCell<IoUring>,
    slots: RefCell<Slots>,
    /// The ring's eventfd (the reaper task owns it and reads it through glommio's reactor;
    /// the ring's drop signals it so the reaper ends).
    efd: RawFd,
    in_flight: glommio::sync::Semaphore,
    free_file_slots: RefCell<Vec<u32>>,
    pool: Option<Rc<BufferPool>>,
    /// Operations submitted so far (metrics, tests).
    submitted: Cell<u64>,
}

impl CoreRing {
    fn new(config: RingConfig) -> io::Result<(Rc<Self>, glommio::io::BufferedFile)> {
        let ring = IoUring::builder()
            .setup_cqsize(2 * RING_ENTRIES)
            .build(RING_ENTRIES)
            .map_err(|e| io::Error::new(e.kind(), format!("creating the core's io_uring: {e}")))?;
        let files = match ring.submitter().register_files_sparse(FIXED_FILE_SLOTS) {
            Ok(()) => (0..FIXED_FILE_SLOTS).rev().collect(),
            Err(e) => {
                tracing::warn!(error = %e, "io_uring: cannot register a file table; using plain descriptors");
                Vec::new()
            }
        };
        let pool = BufferPool::new(config.registered_buffer_bytes, config.chunk_bytes).and_then(
            |pool| {
                // SAFETY: the pool's memory lives as long as the pool, and the ring holds the
                // pool (and so the memory) until it is dropped.
                match unsafe { ring.submitter().register_buffers(&[pool.iovec()]) } {
                    Ok(()) => Some(pool),
                    Err(e) => {
                        tracing::warn!(error = %e, bytes = config.registered_buffer_bytes, "io_uring: cannot register the buffer pool (locked-memory limit?); writes use unregistered buffers");
                        None
                    }
                }
            },
        );
        // SAFETY: plain syscall; the fd is handed to the BufferedFile, which closes it.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: efd is a fresh descriptor we own; the BufferedFile takes it over.
        let wake = unsafe { glommio::io::BufferedFile::from_raw_fd(efd) };
        ring.submitter().register_eventfd(efd)?;
        let ring = Rc::new(Self {
            ring: RefCell::new(ring),
            slots: RefCell::new(Slots {
                slots: Vec::new(),
                free: None,
            }),
            efd,
            in_flight: glommio::sync::Semaphore::new(MAX_OPS_IN_FLIGHT),
            free_file_slots: RefCell::new(files),
            pool,
            submitted: Cell::new(0),
        });
        Ok((ring, wake))
    }

    /// Sets up a ring for this executor and starts its reaper task. Must run on a glommio
    /// executor. The reaper holds the ring weakly: the ring (its buffer pool, registered files
    /// and descriptors) goes when its last user does, and the reaper ends then. (It held the
    /// ring strongly once, and a test that starts an executor per case leaked 16 MiB each.)
    pub(crate) fn start(config: RingConfig) -> io::Result<Rc<Self>> {
        let (ring, wake) = Self::new(config)?;
        let reaper = Rc::downgrade(&ring);
        glommio::spawn_local(Self::reap_loop(reaper, wake)).detach();
        Ok(ring)
    }

    pub fn stats(&self) -> RingStats {
        RingStats {
            submitted_ops: self.submitted.get(),
            free_pool_chunks: self.pool.as_ref().map_or(0, |p| p.free_chunks()),
            ops_in_flight: MAX_OPS_IN_FLIGHT - self.in_flight.available(),
        }
    }

    /// An aligned buffer of `len` bytes: a registered pool chunk when `len` is the pool's
    /// chunk size and one is free, else a glommio DMA buffer.
    pub fn alloc_buffer(&self, len: usize) -> IoBuf {
        if let Some(p) = &self.pool {
            if len == p.chunk_bytes() {
                if let Some(c) = p.take() {
                    return IoBuf::Pooled(c);
                }
            }
        }
        IoBuf::Dma(glommio::allocate_dma_buffer(len))
    }

    /// Waits for every completion posted to the ring (through its eventfd, read on glommio's
    /// reactor) and hands the results to their futures.
    async fn reap_loop(ring: Weak<Self>, wake: glommio::io::BufferedFile) {
        loop {
            if let Err(e) = wake.read_at(0, 8).await {
                // An eventfd read does not fail in practice; if it does, poll gently.
                tracing::warn!(error = %e, "io_uring: reading the ring's eventfd");
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            }
            let Some(ring) = ring.upgrade() else {
                break;
            };
            ring.reap();
        }
        if let Err(e) = wake.close().await {
            tracing::debug!(error = %e, "io_uring: closing the ring's eventfd");
        }
    }

    /// Frees a slot whose completion was collected (or orphaned), and with it the operation's
    /// permit: the slots in use never exceed `MAX_OPS_IN_FLIGHT`.
    fn free_slot(&self, slots: &mut Slots, i: usize) {
        slots.release(i);
        self.in_flight.signal(1);
    }

    fn reap(&self) {
        {
            let mut ring = self.ring.borrow_mut();
            let mut slots = self.slots.borrow_mut();
            for cqe in ring.completion() {
                let i = cqe.user_data() as usize;
                match std::mem::replace(&mut slots.slots[i], Slot::Done(cqe.result())) {
                    Slot::Pending { orphaned: true, .. } => self.free_slot(&mut slots, i),
                    Slot::Pending { waker, .. } => {
                        if let Some(w) = waker {
                            w.wake();
                        }
                    }
                    Slot::Done(_) | Slot::Free { .. } => {
                        unreachable!("a completion for slot {i}, which is not pending")
                    }
                }
            }
        }
    }

    /// Submits `entries` in one `io_uring_enter` (they run concurrently) and returns each
    /// one's result, in order. `keep` stays alive until every entry completed.
    pub(super) async fn run(
        self: &Rc<Self>,
        entries: Vec<squeue::Entry>,
        keep: Rc<dyn Any>,
    ) -> Vec<i32> {
        let total = entries.len();
        assert!(
            total as u64 <= MAX_OPS_IN_FLIGHT,
            "one submission fits the ring"
        );
        self.in_flight
            .acquire(total as u64)
            .await
            .expect("the ring's semaphore is never closed");
        // The futures exist before the submission, so a caller dropped meanwhile still marks
        // its slots orphaned (freed at completion).
        let mut ops: Vec<OpFuture> = Vec::with_capacity(total);
        {
            let mut ring = self.ring.borrow_mut();
            let mut slots = self.slots.borrow_mut();
            for e in entries {
                let id = slots.take(keep.clone());
                let e = e.user_data(id as u64);
                // SAFETY: the entry's buffers and files are owned by `keep`, which the slot
                // holds until the completion is reaped.
                while unsafe { ring.submission().push(&e) }.is_err() {
                    // The queue is full: hand what it holds to the kernel.
                    if let Err(err) = ring.submit() {
                        tracing::warn!(error = %err, "io_uring submit (queue full)");
                    }
                }
                ops.push(OpFuture {
                    ring: self.clone(),
                    id,
                    finished: false,
                });
            }
        }
        self.submit_queued().await;
        self.submitted.set(self.submitted.get() + total as u64);
        let mut out = Vec::with_capacity(total);
        for op in ops {
            out.push(op.await);
        }
        out
    }

    /// Hands the queued entries to the kernel. A busy kernel (completions to reap first, or
    /// no memory for the moment) is retried after reaping and a short pause; any other
    /// refusal means a malformed entry, a bug.
    async fn submit_queued(&self) {
        loop {
            let r = self.ring.borrow().submit();
            match r {
                Ok(_) => return,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY) | Some(libc::EAGAIN)) => {
                    self.reap();
                    glommio::timer::sleep(std::time::Duration::from_micros(SUBMIT_RETRY_US)).await;
                }
                Err(e) => panic!("io_uring submit refused: {e}"),
            }
        }
    }

    fn take_file_slot(&self, fd: RawFd) -> Option<u32> {
        let slot = self.free_file_slots.borrow_mut().pop()?;
        match self
            .ring
            .borrow()
            .submitter()
            .register_files_update(slot, &[fd])
        {
            Ok(_) => Some(slot),
            Err(e) => {
                tracing::debug!(error = %e, "io_uring: registering a file");
                self.free_file_slots.borrow_mut().push(slot);
                None
            }
        }
    }

    fn release_file_slot(&self, slot: u32) {
        if let Err(e) = self
            .ring
            .borrow()
            .submitter()
            .register_files_update(slot, &[-1])
        {
            tracing::warn!(error = %e, "io_uring: unregistering a file");
            return;
        }
        self.free_file_slots.borrow_mut().push(slot);
    }
}

impl Drop for CoreRing {
    fn drop(&mut self) {
        // Every pending operation's slot holds its file, and so the ring: none is in flight.
        debug_assert_eq!(
            self.in_flight.available(),
            MAX_OPS_IN_FLIGHT,
            "a ring is dropped with operations in flight"
        );
        // Wake the reaper so it sees the ring gone and closes the eventfd.
        let one: u64 = 1;
        // SAFETY: the reaper owns `efd` and keeps it open until it has seen the ring gone,
        // which is after this write; the buffer is 8 valid bytes.
        let n = unsafe { libc::write(self.efd, (&one as *const u64).cast(), 8) };
        if n != 8 {
            tracing::debug!(error = %io::Error::last_os_error(), "io_uring: signalling the reaper");
        }
    }
}

struct OpFuture {
    ring: Rc<CoreRing>,
    id: usize,
    finished: bool,
}

impl Future for OpFuture {
    type Output = i32;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<i32> {
        let mut slots = self.ring.slots.borrow_mut();
        let id = self.id;
        match &mut slots.slots[id] {
            Slot::Done(res) => {
                let res = *res;
                self.ring.free_slot(&mut slots, id);
                drop(slots);
                self.finished = true;
                Poll::Ready(res)
            }
            Slot::Pending { waker, .. } => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            Slot::Free { .. } => unreachable!("a pending op's slot is not free"),
        }
    }
}

impl Drop for OpFuture {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut slots = self.ring.slots.borrow_mut();
        match &mut slots.slots[self.id] {
            Slot::Done(_) => self.ring.free_slot(&mut slots, self.id),
            Slot::Pending {
                orphaned, waker, ..
            } => {
                *orphaned = true;
                *waker = None;
            }
            Slot::Free { .. } => unreachable!("a pending op's slot is not free"),
        }
    }
}

/// The result of an operation as `io::Result` (negative = errno).
fn result(res: i32) -> io::Result<u32> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res))
    } else {
        Ok(res as u32)
    }
}

/// What a file operation names the file by: a registered slot or the plain descriptor.
#[derive(Clone, Copy)]
enum Target {
    Fixed(u32),
    Fd(RawFd),
}

macro_rules! on_target {
    ($t:expr, |$f:ident| $e:expr) => {
        match $t {
            Target::Fixed(slot) => {
                let $f = types::Fixed(slot);
                $e
            }
            Target::Fd(fd) => {
                let $f = types::Fd(fd);
                $e
            }
        }
    };
}

/// A file opened for direct I/O on the core's ring.
pub struct UringFile {
    file: std::fs::File,
    ring: Rc<CoreRing>,
    slot: Option<u32>,
    /// Bytes `0..zeroed_to` are initialised blocks inside the file size, made durable: a DSYNC
    /// write below it commits no metadata.
    zeroed_to: Cell<u64>,
    /// The zero writes of the step in flight cover this range (writes there wait for them).
    zeroing: Cell<Option<(u64, u64)>>,
    /// A zeroing step is in flight (its writes, then its fdatasync); one at a time.
    zero_busy: Cell<bool>,
    zero_done: RefCell<Vec<Waker>>,
}

impl UringFile {
    pub(super) async fn open_rw(path: &Path, ring: Rc<CoreRing>) -> io::Result<Self> {
        let p = path.to_path_buf();
        let file = super::off_executor(move || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
                .open(&p)
        })
        .await
        .map_err(|e| io_context("opening", path, e))?;
        let size = file
            .metadata()
            .map_err(|e| io_context("stat", path, e))?
            .len();
        let slot = ring.take_file_slot(file.as_raw_fd());
        Ok(Self {
            file,
            ring,
            slot,
            zeroed_to: Cell::new(align_down(size)),
            zeroing: Cell::new(None),
            zero_busy: Cell::new(false),
            zero_done: RefCell::new(Vec::new()),
        })
    }

    fn target(&self) -> Target {
        match self.slot {
            Some(s) => Target::Fixed(s),
            None => Target::Fd(self.file.as_raw_fd()),
        }
    }

    fn write_entry(&self, buf: &IoBuf, pos: u64, dsync: bool) -> squeue::Entry {
        let len = buf.len() as u32;
        let ptr = buf.as_ptr();
        let flags = if dsync { libc::RWF_DSYNC } else { 0 };
        match buf.fixed_index() {
            Some(index) => on_target!(self.target(), |f| opcode::WriteFixed::new(
                f, ptr, len, index
            )
            .offset(pos)
            .rw_flags(flags)
            .build()),
            None => on_target!(self.target(), |f| opcode::Write::new(f, ptr, len)
                .offset(pos)
                .rw_flags(flags)
                .build()),
        }
    }

    fn sync_entry(&self) -> squeue::Entry {
        on_target!(self.target(), |f| opcode::Fsync::new(f)
            .flags(types::FsyncFlags::DATASYNC)
            .build())
    }

    /// Waits while the zero writes of a step in flight cover any byte of `pos..end` (its
    /// fdatasync may still run: a write after the zero writes completed is ordered after them).
    async fn wait_zeroing(&self, pos: u64, end: u64) {
        std::future::poll_fn(|cx| match self.zeroing.get() {
            Some((a, b)) if pos < b && a < end => {
                self.wait_zero_done(cx);
                Poll::Pending
            }
            _ => Poll::Ready(()),
        })
        .await
    }

    /// Waits until no zeroing step is in flight at all.
    async fn wait_zero_idle(&self) {
        std::future::poll_fn(|cx| {
            if self.zero_busy.get() {
                self.wait_zero_done(cx);
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await
    }

    /// Registers the task to wake at the next zeroing change, once per task (a task polled
    /// again does not add itself twice), so the list holds at most the file's writers.
    fn wait_zero_done(&self, cx: &Context<'_>) {
        let mut w = self.zero_done.borrow_mut();
        if !w.iter().any(|x| x.will_wake(cx.waker())) {
            w.push(cx.waker().clone());
        }
    }

    fn wake_zero_waiters(&self) {
        for w in self.zero_done.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Writes `writes` (aligned buffers at aligned positions); with `durable`, they are
    /// durable when this returns: one write is issued with RWF_DSYNC, several are written
    /// concurrently and followed by one fdatasync.
    pub(super) async fn write_all(
        self: &Rc<Self>,
        writes: Vec<(IoBuf, u64)>,
        durable: bool,
        path: &Path,
    ) -> io::Result<()> {
        if writes.is_empty() {
            return if durable {
                self.sync(path).await
            } else {
                Ok(())
            };
        }
        let lo = writes.iter().map(|(_, p)| *p).min().expect("writes");
        let hi = writes
            .iter()
            .map(|(b, p)| p + b.len() as u64)
            .max()
            .expect("writes");
        self.wait_zeroing(lo, hi).await;
        let single = writes.len() == 1;
        let entries: Vec<squeue::Entry> = writes
            .iter()
            .map(|(b, p)| self.write_entry(b, *p, durable && single))
            .collect();
        let shapes: Vec<(usize, u64)> = writes.iter().map(|(b, p)| (b.len(), *p)).collect();
        let keep: Rc<dyn Any> = Rc::new((writes, self.clone()));
        let results = self.ring.run(entries, keep).await;
        for (r, (want, pos)) in results.into_iter().zip(shapes) {
            let wrote = result(r).map_err(|e| io_context("writing", path, e))?;
            if wrote as usize != want {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!(
                        "short write to {} at {pos}: {wrote} of {want} bytes",
                        path.display()
                    ),
                ));
            }
        }
        if durable && !single {
            self.sync(path).await?;
        }
        Ok(())
    }

    pub(super) async fn sync(self: &Rc<Self>, path: &Path) -> io::Result<()> {
        let r = self.ring.run(vec![self.sync_entry()], self.clone()).await;
        result(r[0])
            .map(|_| ())
            .map_err(|e| io_context("fdatasync", path, e))
    }

    /// Keeps the blocks after `tail` zeroed and synced ahead of it (between
    /// `MIN_ZERO_AHEAD_BYTES` and `ZERO_AHEAD_BYTES`, growing with the file, at most to `limit`,
    /// the file's reserved space), one `ZERO_STEP_BYTES` step at a time in the background.
    /// Needs the registered pool (its zero chunk); without it, does nothing.
    pub(super) fn zero_ahead(self: &Rc<Self>, tail: u64, limit: u64, path: &Path) {
        if self.zero_busy.get() {
            return;
        }
        let Some(pool) = self.ring.pool.clone() else {
            return;
        };
        // How far ahead grows with what the file holds, so a quiet log (most of a broker's
        // many partitions) zeroes little and a busy one keeps a lead its flushes do not reach
        // while a zeroing step's fdatasync waits for a slow journal commit.
        let ahead = (2 * align_up(tail)).clamp(MIN_ZERO_AHEAD_BYTES, ZERO_AHEAD_BYTES);
        let zeroed = self.zeroed_to.get();
        if zeroed >= tail + ahead / 2 {
            return;
        }
        let from = zeroed.max(align_up(tail));
        let want = align_down((tail + ahead).min(limit));
        if from >= want {
            return;
        }
        let to = (from + ZERO_STEP_BYTES).min(want);
        self.zeroing.set(Some((from, to)));
        self.zero_busy.set(true);
        let me = self.clone();
        let path: PathBuf = path.to_path_buf();
        glommio::spawn_local(async move {
            let chunk = pool.chunk_bytes() as u64;
            let zeros = pool.zeros();
            let mut writes = Vec::new();
            let mut pos = from;
            while pos < to {
                let len = chunk.min(to - pos) as u32;
                writes.push(on_target!(me.target(), |f| opcode::WriteFixed::new(
                    f,
                    zeros as *mut u8,
                    len,
                    0
                )
                .offset(pos)
                .build()));
                pos += len as u64;
            }
            let n = writes.len();
            let keep: Rc<dyn Any> = Rc::new((pool, me.clone()));
            let mut ok = me.ring.run(writes, keep).await.iter().all(|r| *r >= 0);
            // The zero writes are done: writes there may go (they are ordered after them).
            me.zeroing.set(None);
            me.wake_zero_waiters();
            ok = ok && me.sync(&path).await.is_ok();
            if ok {
                me.zeroed_to.set(to);
            } else {
                // Not fatal: durable writes there still are (DSYNC commits what they need).
                tracing::debug!(path = %path.display(), n, "zeroing ahead of the log tail failed");
            }
            me.zero_busy.set(false);
            me.wake_zero_waiters();
        })
        .detach();
    }

    /// Reads `len` bytes at `pos` (any alignment) through an aligned bounce buffer; shorter
    /// only at end of file.
    pub(super) async fn read(
        self: &Rc<Self>,
        pos: u64,
        len: usize,
        path: &Path,
    ) -> io::Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let start = align_down(pos);
        let end = align_up(pos + len as u64);
        let mut buf = IoBuf::Dma(glommio::allocate_dma_buffer((end - start) as usize));
        let ptr = buf.as_bytes_mut().as_mut_ptr();
        let n = (end - start) as u32;
        let e = on_target!(self.target(), |f| opcode::Read::new(f, ptr, n)
            .offset(start)
            .build());
        let buf = Rc::new(buf);
        let keep: Rc<dyn Any> = Rc::new((buf.clone(), self.clone()));
        let r = self.ring.run(vec![e], keep).await;
        let got = result(r[0]).map_err(|e| io_context("reading", path, e))? as u64;
        let skip = (pos - start) as usize;
        let avail = (got as usize).saturating_sub(skip).min(len);
        Ok(buf.as_bytes()[skip..skip + avail].to_vec())
    }

    pub(super) async fn preallocate(self: &Rc<Self>, len: u64, path: &Path) -> io::Result<()> {
        let e = on_target!(self.target(), |f| opcode::Fallocate::new(f, len)
            .mode(libc::FALLOC_FL_KEEP_SIZE)
            .build());
        let r = self.ring.run(vec![e], self.clone()).await;
        result(r[0])
            .map(|_| ())
            .map_err(|e| io_context("preallocating", path, e))
    }

    pub(super) async fn truncate(self: &Rc<Self>, len: u64, path: &Path) -> io::Result<()> {
        self.wait_zero_idle().await;
        let e = on_target!(self.target(), |f| opcode::Ftruncate::new(f, len).build());
        let r = self.ring.run(vec![e], self.clone()).await;
        result(r[0]).map_err(|e| io_context("truncating", path, e))?;
        self.zeroed_to
            .set(self.zeroed_to.get().min(align_down(len)));
        Ok(())
    }

    pub(super) fn size(&self, path: &Path) -> io::Result<u64> {
        // fstat reads the in-memory inode: it does not block on the device.
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| io_context("stat", path, e))
    }
}

impl Drop for UringFile {
    fn drop(&mut self) {
        // Every operation holds an Rc of the file, so none is in flight: the slot and the
        // descriptor can go.
        if let Some(s) = self.slot.take() {
            self.ring.release_file_slot(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reaper does not keep the ring alive: once its last user is gone, the ring and its
    /// buffer pool are freed (a reaper holding it strongly leaked 16 MiB per executor).
    #[test]
    fn the_ring_goes_with_its_last_user() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(1 << 20)
            .spawn(|| async {
                let ring = CoreRing::start(RingConfig {
                    registered_buffer_bytes: 2 << 20,
                    chunk_bytes: 1 << 20,
                })
                .expect("ring starts");
                // The reaper runs and waits on the eventfd.
                glommio::yield_if_needed().await;
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
                let pool = Rc::downgrade(ring.pool.as_ref().expect("a pool"));
                let weak = Rc::downgrade(&ring);
                drop(ring);
                assert!(weak.upgrade().is_none(), "the ring is freed");
                assert!(pool.upgrade().is_none(), "its buffer pool is freed");
                // The reaper sees the ring gone and ends (closing the eventfd).
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            })
            .unwrap();
        ex.join().unwrap();
    }
}
