//! All file and ring I/O of the engine goes through this module (DESIGN.md §4): open, append
//! writes of aligned blocks, read, preallocate, truncate, fdatasync, plus the few metadata
//! operations (atomic small-file replace, directory sync, create, remove, list). Swapping the
//! runtime, or injecting faults in tests, touches only this file.
//!
//! Which calls may block, and where they run: data-file operations (`SegmentFile`) go through
//! io_uring. The metadata operations have no io_uring form in glommio (a directory fsync, a
//! rename, an unlink, `remove_dir_all`, a buffered small-file write with fsync): the `async`
//! functions below run them on the executor's blocking thread pool
//! (`glommio::executor().spawn_blocking`), so the reactor keeps serving every other partition
//! of the core meanwhile. The same operations in [`blocking`] are for code that runs off the
//! executors (broker start-up, tools such as `ringlog dump-segment`).

use std::cell::{Cell, RefCell};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::io::{DmaFile, OpenOptions};

mod buffer;
mod file_pool;
mod uring;

pub use buffer::IoBuf;
pub use file_pool::{FilePool, FilePoolStats};
pub use uring::{CoreRing, RingConfig, RingStats};

/// Alignment of every direct-I/O write and of every write position. The device's logical block
/// is 512 here; 4 KiB is safe on every device we target (DESIGN.md §4).
pub const IO_ALIGNMENT_BYTES: u64 = 4096;

/// Rounds `v` down to the I/O alignment.
pub const fn align_down(v: u64) -> u64 {
    v & !(IO_ALIGNMENT_BYTES - 1)
}

/// Rounds `v` up to the I/O alignment.
pub const fn align_up(v: u64) -> u64 {
    align_down(v + IO_ALIGNMENT_BYTES - 1)
}

/// Test hook: makes the N-th write or fdatasync (counted from the moment it is armed, over every
/// file of the logs that share this injector) fail with EIO, as a dying disk would.
#[derive(Debug, Default)]
pub struct FaultInjector {
    writes_until_failure: Cell<Option<u64>>,
    syncs_until_failure: Cell<Option<u64>>,
    /// While set, every fdatasync waits (a slow disk) until `release_syncs`.
    syncs_held: Cell<bool>,
}

/// How often a held fdatasync checks whether it was released (tests only).
const HELD_SYNC_POLL_MS: u64 = 1;

impl FaultInjector {
    pub fn new() -> Rc<Self> {
        Rc::new(Self::default())
    }

    /// The `n`-th write from now (1 = the next one) fails, and so does every write after it.
    pub fn fail_write_after(&self, n: u64) {
        assert!(n >= 1, "n counts from 1");
        self.writes_until_failure.set(Some(n));
    }

    /// The `n`-th fdatasync from now (1 = the next one) fails, and so does every one after it.
    pub fn fail_sync_after(&self, n: u64) {
        assert!(n >= 1, "n counts from 1");
        self.syncs_until_failure.set(Some(n));
    }

    /// Every fdatasync from now on waits until `release_syncs` (a slow flush, for tests that
    /// check what is answered before data is durable).
    pub fn hold_syncs(&self) {
        self.syncs_held.set(true);
    }

    pub fn release_syncs(&self) {
        self.syncs_held.set(false);
    }

    async fn wait_while_held(&self) {
        while self.syncs_held.get() {
            glommio::timer::sleep(std::time::Duration::from_millis(HELD_SYNC_POLL_MS)).await;
        }
    }

    pub fn clear(&self) {
        self.syncs_held.set(false);
        self.writes_until_failure.set(None);
        self.syncs_until_failure.set(None);
    }

    fn tick(counter: &Cell<Option<u64>>, what: &str, path: &Path) -> io::Result<()> {
        match counter.get() {
            Some(n) if n <= 1 => {
                counter.set(Some(1));
                Err(io::Error::other(format!(
                    "injected {what} failure on {}",
                    path.display()
                )))
            }
            Some(n) => {
                counter.set(Some(n - 1));
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// Context for an I/O error: what was done to which file.
pub fn io_context(op: &'static str, path: &Path, err: impl Into<io::Error>) -> io::Error {
    let err: io::Error = err.into();
    io::Error::new(err.kind(), format!("{op} {}: {err}", path.display()))
}

/// Which runtime carries a core's appends (`storage-io` in the config): the engine's own
/// io_uring (`uring.rs`: DSYNC writes into blocks zeroed ahead, one ring per core), or
/// glommio's `DmaFile` (a write, then an fdatasync, each its own ring round trip).
/// `engine/benches/sync_paths.rs` measures both; ARCHITECTURE.md has the figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StorageIo {
    #[default]
    IoUring,
    Glommio,
}

impl std::str::FromStr for StorageIo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "io-uring" => Ok(Self::IoUring),
            "glommio" => Ok(Self::Glommio),
            other => Err(format!(
                "unknown storage-io '{other}'; expected io-uring or glommio"
            )),
        }
    }
}

impl std::fmt::Display for StorageIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::IoUring => "io-uring",
            Self::Glommio => "glommio",
        })
    }
}

/// An open descriptor of a `SegmentFile`. Operations hold a clone while they run, so a
/// backend whose only holder is its file is idle (the file pool may close it).
#[derive(Clone)]
enum Backend {
    Glommio(Rc<DmaFile>),
    Uring(Rc<uring::UringFile>),
}

impl Backend {
    fn idle(&self) -> bool {
        match self {
            Backend::Glommio(f) => Rc::strong_count(f) == 1,
            Backend::Uring(f) => Rc::strong_count(f) == 1,
        }
    }
}

/// How a core opens files for writing: through its own ring (`storage-io = io-uring`) or
/// glommio, within the core's open-file budget (`FilePool`), and (tests, drills) through a
/// fault injector. `CoreStorage::file_io` hands out the core's; `FileIo::default()` is glommio
/// without faults or budget (tools, tests).
#[derive(Clone, Default)]
pub struct FileIo {
    ring: Option<Rc<CoreRing>>,
    faults: Option<Rc<FaultInjector>>,
    pool: Option<Rc<FilePool>>,
}

impl FileIo {
    pub(crate) fn new(
        ring: Option<Rc<CoreRing>>,
        faults: Option<Rc<FaultInjector>>,
        pool: Option<Rc<FilePool>>,
    ) -> Self {
        Self { ring, faults, pool }
    }

    /// The same runtime and budget with no fault injection (recovery's own reads and
    /// truncation).
    pub fn without_faults(&self) -> Self {
        Self {
            faults: None,
            ..self.clone()
        }
    }

    pub(crate) fn faults(&self) -> Option<Rc<FaultInjector>> {
        self.faults.clone()
    }

    /// The core's ring, when its files go through one.
    pub fn ring(&self) -> Option<&Rc<CoreRing>> {
        self.ring.as_ref()
    }

    /// The core's open-file budget, when it has one.
    pub fn pool(&self) -> Option<&Rc<FilePool>> {
        self.pool.as_ref()
    }

    async fn open_backend(&self, path: &Path) -> io::Result<Backend> {
        Ok(match &self.ring {
            Some(ring) => Backend::Uring(Rc::new(
                uring::UringFile::open_rw(path, ring.clone()).await?,
            )),
            None => Backend::Glommio(Rc::new(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .dma_open(path)
                    .await
                    .map_err(|e| io_context("opening", path, e))?,
            )),
        })
    }
}

/// The descriptor of a file opened for writing, which its core's `FilePool` may close while
/// it is idle.
struct OpenSlot {
    backend: RefCell<Option<Backend>>,
}

impl file_pool::Closable for OpenSlot {
    fn close_if_idle(&self) -> bool {
        let Ok(mut b) = self.backend.try_borrow_mut() else {
            return false;
        };
        match &*b {
            Some(backend) if backend.idle() => {
                // The last holder: dropping it closes the descriptor (glommio's in its next
                // reactor turn, the ring's at once).
                *b = None;
                true
            }
            _ => false,
        }
    }
}

/// Where a writable file stands in its core's file pool.
struct Pooled {
    pool: Rc<FilePool>,
    /// The file's place in the pool's LRU order while open.
    place: Cell<Option<u64>>,
}

/// One file opened for direct I/O on the current executor: files opened for writing go
/// through the core's own ring when `FileIo` has one, else (and every read-only open) through
/// glommio. A writable file under a core's open-file budget may be closed by the budget while
/// idle, and reopens on its next operation.
pub struct SegmentFile {
    slot: Rc<OpenSlot>,
    path: PathBuf,
    /// How the file reopens (writable files).
    io: Option<FileIo>,
    pooled: Option<Pooled>,
    faults: Option<Rc<FaultInjector>>,
}

impl SegmentFile {
    /// Opens (creating if needed) `path` for direct-I/O reads and writes.
    pub async fn open_rw(path: &Path, io: &FileIo) -> io::Result<Self> {
        let reservation = io.pool.as_ref().map(|pool| pool.reserve());
        let pooled = io.pool.clone().map(|pool| Pooled {
            pool,
            place: Cell::new(None),
        });
        let backend = io.open_backend(path).await?;
        let f = Self {
            slot: Rc::new(OpenSlot {
                backend: RefCell::new(Some(backend)),
            }),
            path: path.to_path_buf(),
            io: Some(io.clone()),
            pooled,
            faults: io.faults(),
        };
        if let Some(r) = reservation {
            f.enter_pool(r, false);
        }
        Ok(f)
    }

    /// Opens `path` read-only for direct-I/O reads (closed segments: glommio's reads, outside
    /// the pool: the core's read cache bounds them).
    pub async fn open_read(path: &Path) -> io::Result<Self> {
        let file = DmaFile::open(path)
            .await
            .map_err(|e| io_context("opening", path, e))?;
        Ok(Self {
            slot: Rc::new(OpenSlot {
                backend: RefCell::new(Some(Backend::Glommio(Rc::new(file)))),
            }),
            path: path.to_path_buf(),
            io: None,
            pooled: None,
            faults: None,
        })
    }

    fn enter_pool(&self, reservation: file_pool::Reservation, reopen: bool) {
        if let Some(p) = &self.pooled {
            let weak: std::rc::Weak<dyn file_pool::Closable> =
                Rc::downgrade(&(self.slot.clone() as Rc<dyn file_pool::Closable>));
            p.place.set(Some(p.pool.enter(reservation, weak, reopen)));
        }
    }

    /// The open descriptor, reopened first if the pool closed it; marks the file used.
    async fn backend(&self) -> io::Result<Backend> {
        if let Some(b) = self.slot.backend.borrow().clone() {
            if let Some(p) = &self.pooled {
                if let Some(place) = p.place.get() {
                    p.place.set(Some(p.pool.touch(place)));
                }
            }
            return Ok(b);
        }
        let io = self
            .io
            .as_ref()
            .expect("only a writable file is closed while in use, and it knows how to reopen");
        let reservation = self.pooled.as_ref().map(|p| {
            if let Some(place) = p.place.take() {
                // Its old place went when the pool closed it.
                p.pool.leave(place);
            }
            p.pool.reserve()
        });
        let opened = io.open_backend(&self.path).await?;
        let mut slot = self.slot.backend.borrow_mut();
        match &*slot {
            // Another task reopened it meanwhile: use that one (this one closes on drop, and
            // its reservation goes back).
            Some(b) => Ok(b.clone()),
            None => {
                *slot = Some(opened.clone());
                drop(slot);
                if let Some(r) = reservation {
                    self.enter_pool(r, true);
                }
                Ok(opened)
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file goes through the core's own ring.
    pub fn on_core_ring(&self) -> bool {
        self.io.as_ref().is_some_and(|io| io.ring.is_some())
    }

    /// An aligned buffer of `len` bytes (a multiple of the alignment) for `write_block`.
    pub fn alloc_buffer(&self, len: usize) -> IoBuf {
        debug_assert_eq!(len as u64 % IO_ALIGNMENT_BYTES, 0);
        match self.io.as_ref().and_then(|io| io.ring.as_ref()) {
            Some(ring) => ring.alloc_buffer(len),
            None => IoBuf::Dma(glommio::allocate_dma_buffer(len)),
        }
    }

    fn check_write(&self, buf: &IoBuf, pos: u64) -> io::Result<()> {
        assert_eq!(
            pos % IO_ALIGNMENT_BYTES,
            0,
            "unaligned write position {pos}"
        );
        assert_eq!(
            buf.len() as u64 % IO_ALIGNMENT_BYTES,
            0,
            "unaligned write length"
        );
        if let Some(f) = &self.faults {
            FaultInjector::tick(&f.writes_until_failure, "write", &self.path)?;
        }
        Ok(())
    }

    async fn check_sync(&self) -> io::Result<()> {
        if let Some(f) = &self.faults {
            f.wait_while_held().await;
            FaultInjector::tick(&f.syncs_until_failure, "fdatasync", &self.path)?;
        }
        Ok(())
    }

    /// Writes the whole aligned buffer at the aligned position `pos`.
    pub async fn write_block(&self, buf: IoBuf, pos: u64) -> io::Result<()> {
        self.write_blocks(vec![(buf, pos)], false).await
    }

    /// Writes aligned buffers at aligned positions, concurrently; with `durable`, they are
    /// durable (as after an fdatasync) when this returns. On the core's ring a single durable
    /// write is one RWF_DSYNC write; on glommio, writes then an fdatasync.
    pub async fn write_blocks(&self, writes: Vec<(IoBuf, u64)>, durable: bool) -> io::Result<()> {
        for (b, p) in &writes {
            self.check_write(b, *p)?;
        }
        if durable {
            self.check_sync().await?;
        }
        match self.backend().await? {
            Backend::Uring(f) => f.write_all(writes, durable, &self.path).await,
            Backend::Glommio(file) => {
                let file = &file;
                let results =
                    crate::join::join_all(writes.into_iter().map(|(buf, pos)| async move {
                        let want = buf.len();
                        let wrote = file
                            .write_at(buf.into_dma(), pos)
                            .await
                            .map_err(|e| io_context("writing", &self.path, e))?;
                        if wrote != want {
                            return Err(io::Error::new(
                                io::ErrorKind::WriteZero,
                                format!(
                                    "short write to {} at {pos}: {wrote} of {want} bytes",
                                    self.path.display()
                                ),
                            ));
                        }
                        Ok(())
                    }))
                    .await;
                for r in results {
                    r?;
                }
                if durable {
                    file.fdatasync()
                        .await
                        .map_err(|e| io_context("fdatasync", &self.path, e))?;
                }
                Ok(())
            }
        }
    }

    /// Keeps the blocks after `tail` zeroed and synced ahead of the appends (up to `limit`,
    /// the reserved space), so durable writes overwrite initialised blocks; on the core's ring
    /// only (a background step), nothing on glommio, nor while the pool has the file closed.
    pub fn zero_ahead(&self, tail: u64, limit: u64) {
        if let Some(Backend::Uring(f)) = &*self.slot.backend.borrow() {
            f.zero_ahead(tail, limit, &self.path);
        }
    }

    /// Reads up to `len` bytes at `pos` (no alignment needed); shorter only at end of file.
    pub async fn read(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        match self.backend().await? {
            Backend::Glommio(f) => f
                .read_at(pos, len)
                .await
                .map(|r| r.to_vec())
                .map_err(|e| io_context("reading", &self.path, e)),
            Backend::Uring(f) => f.read(pos, len, &self.path).await,
        }
    }

    pub async fn sync(&self) -> io::Result<()> {
        self.check_sync().await?;
        match self.backend().await? {
            Backend::Glommio(f) => f
                .fdatasync()
                .await
                .map_err(|e| io_context("fdatasync", &self.path, e)),
            Backend::Uring(f) => f.sync(&self.path).await,
        }
    }

    /// Reserves space up to `len` bytes without changing the file size.
    pub async fn preallocate(&self, len: u64) -> io::Result<()> {
        match self.backend().await? {
            Backend::Glommio(f) => f
                .pre_allocate(len, true)
                .await
                .map_err(|e| io_context("preallocating", &self.path, e)),
            Backend::Uring(f) => f.preallocate(len, &self.path).await,
        }
    }

    pub async fn truncate(&self, len: u64) -> io::Result<()> {
        match self.backend().await? {
            Backend::Glommio(f) => f
                .truncate(len)
                .await
                .map_err(|e| io_context("truncating", &self.path, e)),
            Backend::Uring(f) => f.truncate(len, &self.path).await,
        }
    }

    pub async fn size(&self) -> io::Result<u64> {
        let closed = self.slot.backend.borrow().is_none();
        if closed {
            // Closed by the pool: the size without reopening it.
            return file_len(&self.path).await;
        }
        match self.backend().await? {
            Backend::Glommio(f) => f
                .file_size()
                .await
                .map_err(|e| io_context("stat", &self.path, e)),
            Backend::Uring(f) => f.size(&self.path),
        }
    }

    pub async fn close(self) -> io::Result<()> {
        let backend = self.slot.backend.borrow_mut().take();
        let path = self.path.clone();
        drop(self);
        match backend {
            None => Ok(()),
            Some(Backend::Glommio(f)) => match Rc::try_unwrap(f) {
                Ok(f) => f.close().await.map_err(|e| io_context("closing", &path, e)),
                // An operation still holds it: it closes when that one is done.
                Err(_) => Ok(()),
            },
            // The descriptor closes when the last operation holding the file is done.
            Some(Backend::Uring(f)) => {
                drop(f);
                Ok(())
            }
        }
    }
}

impl Drop for SegmentFile {
    fn drop(&mut self) {
        if let Some(p) = &self.pooled {
            if let Some(place) = p.place.take() {
                p.pool.leave(place);
            }
        }
    }
}

/// Runs a blocking file-system call on the executor's blocking thread pool, so the reactor
/// (every other partition of this core) is not stalled by it.
pub(crate) async fn off_executor<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    glommio::executor().spawn_blocking(f).await
}

/// Makes the directory entries of `dir` durable (after a create, rename or unlink).
pub async fn sync_dir(dir: &Path) -> io::Result<()> {
    let dir = dir.to_path_buf();
    off_executor(move || blocking::sync_dir(&dir)).await
}

/// Replaces `path` with `bytes` atomically (temp file, fsync, rename, directory fsync).
pub async fn write_atomic(path: &Path, bytes: Vec<u8>) -> io::Result<()> {
    let path = path.to_path_buf();
    off_executor(move || blocking::write_atomic(&path, &bytes)).await
}

/// Reads a small whole file; `None` if it does not exist.
pub async fn read_small(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let path = path.to_path_buf();
    off_executor(move || blocking::read_small(&path)).await
}

/// Removes a file; absent is fine.
pub async fn remove(path: &Path) -> io::Result<()> {
    let path = path.to_path_buf();
    off_executor(move || blocking::remove(&path)).await
}

/// Removes several files (absent ones are fine) in one trip to the blocking pool; tries every
/// one and returns the first error.
pub async fn remove_all_of(paths: Vec<PathBuf>) -> io::Result<()> {
    off_executor(move || {
        let mut first = Ok(());
        for p in &paths {
            let r = blocking::remove(p);
            if first.is_ok() {
                first = r;
            }
        }
        first
    })
    .await
}

/// Renames each `(from, to)` whose `from` exists (replacing `to`), in order, in one trip to
/// the blocking pool; a missing `from` was renamed before (steps that may be repeated).
pub async fn rename_existing(pairs: Vec<(PathBuf, PathBuf)>) -> io::Result<()> {
    off_executor(move || {
        for (from, to) in &pairs {
            match std::fs::rename(from, to) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_context("renaming", from, e)),
            }
        }
        Ok(())
    })
    .await
}

/// Removes a directory and everything in it; absent is fine.
pub async fn remove_dir_tree(dir: &Path) -> io::Result<()> {
    let dir = dir.to_path_buf();
    off_executor(move || blocking::remove_dir_tree(&dir)).await
}

/// Removes `dir` if it is empty (a topic directory after its last partition went); anything
/// else (not empty, absent, another core creating a partition in it) leaves it be.
pub async fn remove_dir_if_empty(dir: &Path) {
    let dir = dir.to_path_buf();
    off_executor(move || {
        let _ = std::fs::remove_dir(&dir);
    })
    .await
}

pub async fn create_dir_all(dir: &Path) -> io::Result<()> {
    let dir = dir.to_path_buf();
    off_executor(move || blocking::create_dir_all(&dir)).await
}

/// File names in `dir` (not recursive).
pub async fn list_dir(dir: &Path) -> io::Result<Vec<String>> {
    let dir = dir.to_path_buf();
    off_executor(move || blocking::list_dir(&dir)).await
}

/// The length of the file at `path`.
pub async fn file_len(path: &Path) -> io::Result<u64> {
    let path = path.to_path_buf();
    off_executor(move || blocking::file_len(&path)).await
}

/// The same metadata operations as plain blocking calls, for code that does not run on an
/// executor (start-up before the cores run, command-line tools). Never call these from a
/// core's executor: use the `async` functions of the parent module.
pub mod blocking {
    use super::io_context;
    use std::fs;
    use std::io;
    use std::path::Path;

    pub fn sync_dir(dir: &Path) -> io::Result<()> {
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_context("syncing directory", dir, e))
    }

    /// Replaces `path` with `bytes` atomically: temp file, fsync, rename, fsync of the
    /// directory. A crash leaves either the old or the new content, never a mix.
    pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let mut f = fs::File::create(&tmp).map_err(|e| io_context("creating", &tmp, e))?;
        f.write_all(bytes)
            .and_then(|_| f.sync_all())
            .map_err(|e| io_context("writing", &tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| io_context("renaming", &tmp, e))?;
        sync_dir(path.parent().unwrap_or(Path::new(".")))
    }

    pub fn read_small(path: &Path) -> io::Result<Option<Vec<u8>>> {
        match fs::read(path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_context("reading", path, e)),
        }
    }

    pub fn remove(path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_context("removing", path, e)),
        }
    }

    pub fn remove_dir_tree(dir: &Path) -> io::Result<()> {
        match fs::remove_dir_all(dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_context("removing directory", dir, e)),
        }
    }

    /// Attempts of `create_dir_all` when a parent vanishes meanwhile (another core removed
    /// the empty topic directory of a deleted topic as this one creates a partition in it).
    const CREATE_DIR_ATTEMPTS: usize = 3;

    pub fn create_dir_all(dir: &Path) -> io::Result<()> {
        let mut attempt = 1;
        loop {
            match fs::create_dir_all(dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempt < CREATE_DIR_ATTEMPTS => {
                    attempt += 1;
                }
                Err(e) => return Err(io_context("creating directory", dir, e)),
            }
        }
    }

    pub fn list_dir(dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| io_context("listing", dir, e))? {
            let entry = entry.map_err(|e| io_context("listing", dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        Ok(names)
    }

    pub fn file_len(path: &Path) -> io::Result<u64> {
        fs::metadata(path)
            .map(|m| m.len())
            .map_err(|e| io_context("stat", path, e))
    }
}
