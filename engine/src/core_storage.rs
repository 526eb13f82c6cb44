//! Storage resources that one core's partition logs share: the bounded cache of closed-segment
//! readers (seed 004: closed segments release their fds, reads open them on demand) and the
//! test-only fault injector. One per executor; never shared across threads.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::data_dir::DataDir;
use crate::io::{CoreRing, FaultInjector, FileIo, FilePool, RingConfig, RingStats, StorageIo};
use crate::latency::LatencyHistogram;
use crate::segment::{ClosedReader, ClosedSegment};
use crate::tail_cache::TailCache;

/// Default number of closed segments a core keeps open for reads.
pub const DEFAULT_READ_CACHE_SEGMENTS: usize = 64;
/// Default bytes of the core ring's registered buffer pool (`storage-io = io-uring`).
pub const DEFAULT_REGISTERED_BUFFER_BYTES: usize = 16 << 20;

/// How a core's storage is set up.
#[derive(Clone, Copy, Debug)]
pub struct CoreStorageOptions {
    /// Closed segments kept open for reads (LRU).
    pub read_cache_segments: usize,
    /// Which runtime carries appends (`storage-io`).
    pub storage_io: StorageIo,
    /// Bytes of registered write buffers on the core's ring.
    pub registered_buffer_bytes: usize,
    /// Bytes of recently appended batches kept for reads at the tail (0: off).
    pub tail_cache_bytes: u64,
    /// Files the core's logs keep open for writing at once (`max-open-files`' share of this
    /// core; 0: no bound). Past it, the least recently used idle file is closed and reopens
    /// on its next use (`io::FilePool`).
    pub max_open_files: usize,
}

impl Default for CoreStorageOptions {
    fn default() -> Self {
        Self {
            read_cache_segments: DEFAULT_READ_CACHE_SEGMENTS,
            storage_io: StorageIo::default(),
            registered_buffer_bytes: DEFAULT_REGISTERED_BUFFER_BYTES,
            tail_cache_bytes: crate::tail_cache::DEFAULT_TAIL_CACHE_BYTES,
            max_open_files: 0,
        }
    }
}

pub struct CoreStorage {
    data_dir: Arc<DataDir>,
    /// Duration of every flush round (writes + fdatasync) of this core's logs.
    flush_latency: RefCell<LatencyHistogram>,
    cache: RefCell<ReadCache>,
    next_log_id: Cell<u64>,
    /// How this core's logs open their files: its ring (or glommio) and the fault injector.
    file_io: FileIo,
    /// The wall clock commit times come from (the system's unless a test sets another).
    clock: RefCell<Rc<dyn Clock>>,
    tail_cache: Rc<TailCache>,
}

impl CoreStorage {
    /// Prepares this executor for direct I/O on the data dir (the device probe) and sets up the
    /// per-core cache holding at most `read_cache_segments` closed segments open.
    pub async fn new(data_dir: Arc<DataDir>, read_cache_segments: usize) -> io::Result<Rc<Self>> {
        let options = CoreStorageOptions {
            read_cache_segments,
            ..Default::default()
        };
        Self::build(data_dir, options, None).await
    }

    /// As `new`, with every write and fdatasync of the logs opened here going through `faults`.
    pub async fn with_faults(
        data_dir: Arc<DataDir>,
        read_cache_segments: usize,
        faults: Rc<FaultInjector>,
    ) -> io::Result<Rc<Self>> {
        let options = CoreStorageOptions {
            read_cache_segments,
            ..Default::default()
        };
        Self::build(data_dir, options, Some(faults)).await
    }

    /// Sets up this executor's storage with every setting given, and (tests, drills) a fault
    /// injector every write and fdatasync goes through.
    pub async fn open(
        data_dir: Arc<DataDir>,
        options: CoreStorageOptions,
        faults: Option<Rc<FaultInjector>>,
    ) -> io::Result<Rc<Self>> {
        Self::build(data_dir, options, faults).await
    }

    async fn build(
        data_dir: Arc<DataDir>,
        options: CoreStorageOptions,
        faults: Option<Rc<FaultInjector>>,
    ) -> io::Result<Rc<Self>> {
        data_dir.probe_device().await?;
        let read_cache_segments = options.read_cache_segments;
        let ring = match options.storage_io {
            StorageIo::IoUring => match CoreRing::start(RingConfig {
                registered_buffer_bytes: options.registered_buffer_bytes,
                chunk_bytes: crate::config::DEFAULT_WRITE_CHUNK_BYTES,
            }) {
                Ok(ring) => Some(ring),
                Err(e) => {
                    tracing::warn!(error = %e, "storage-io io-uring is not available here; using glommio");
                    None
                }
            },
            StorageIo::Glommio => None,
        };
        Ok(Rc::new(Self {
            data_dir,
            flush_latency: RefCell::default(),
            cache: RefCell::new(ReadCache::new(read_cache_segments)),
            next_log_id: Cell::new(1),
            file_io: FileIo::new(ring, faults, Some(FilePool::new(options.max_open_files))),
            clock: RefCell::new(Rc::new(SystemClock)),
            tail_cache: TailCache::new(options.tail_cache_bytes),
        }))
    }

    /// The runtime this core's appends go through (io-uring unless it was not available).
    pub fn storage_io(&self) -> StorageIo {
        match self.file_io.ring() {
            Some(_) => StorageIo::IoUring,
            None => StorageIo::Glommio,
        }
    }

    /// What this core's ring has done (`None` on glommio).
    pub fn ring_stats(&self) -> Option<RingStats> {
        self.file_io.ring().map(|r| r.stats())
    }

    /// What the core's open-file budget holds and has done.
    pub fn file_pool_stats(&self) -> crate::io::FilePoolStats {
        self.file_io.pool().map(|p| p.stats()).unwrap_or_default()
    }

    /// How this core's logs open their files.
    pub fn file_io(&self) -> &FileIo {
        &self.file_io
    }

    /// The core's cache of recently appended batches.
    pub fn tail_cache(&self) -> &Rc<TailCache> {
        &self.tail_cache
    }

    pub fn data_dir(&self) -> &Arc<DataDir> {
        &self.data_dir
    }

    pub(crate) fn record_flush(&self, d: std::time::Duration) {
        self.flush_latency.borrow_mut().record(d);
    }

    /// Flush (write + fdatasync) latencies of this core's logs so far.
    pub fn flush_latency(&self) -> LatencyHistogram {
        self.flush_latency.borrow().clone()
    }

    /// The clock this core's logs stamp commit times with.
    pub fn clock(&self) -> Rc<dyn Clock> {
        self.clock.borrow().clone()
    }

    /// Replaces the clock (tests: a `ManualClock` controls commit times).
    pub fn set_clock(&self, clock: Rc<dyn Clock>) {
        *self.clock.borrow_mut() = clock;
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.borrow().now_ms()
    }

    pub(crate) fn new_log_id(&self) -> u64 {
        let id = self.next_log_id.get();
        self.next_log_id.set(id + 1);
        id
    }

    /// The reader of a closed segment, opening it (and evicting the least recently used one)
    /// if it is not cached.
    pub(crate) async fn closed_reader(
        &self,
        log_id: u64,
        dir: &Path,
        seg: &ClosedSegment,
    ) -> io::Result<Rc<ClosedReader>> {
        let key = (log_id, seg.base_offset);
        if let Some(r) = self.cache.borrow_mut().get(key) {
            return Ok(r);
        }
        let reader = Rc::new(ClosedReader::open(dir, seg).await?);
        self.cache.borrow_mut().insert(key, reader.clone());
        Ok(reader)
    }

    pub(crate) fn evict(&self, log_id: u64, base_offset: u64) {
        self.cache.borrow_mut().remove((log_id, base_offset));
    }

    pub(crate) fn evict_log(&self, log_id: u64) {
        self.cache.borrow_mut().remove_log(log_id);
    }

    /// Closed segments currently held open by the cache.
    pub fn cached_segments(&self) -> usize {
        self.cache.borrow().map.len()
    }
}

type Key = (u64, u64);

/// LRU of open closed-segment readers, bounded by `capacity`.
struct ReadCache {
    capacity: usize,
    tick: u64,
    map: HashMap<Key, (Rc<ClosedReader>, u64)>,
}

impl ReadCache {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            tick: 0,
            map: HashMap::new(),
        }
    }

    fn get(&mut self, key: Key) -> Option<Rc<ClosedReader>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&key).map(|(r, used)| {
            *used = tick;
            r.clone()
        })
    }

    fn insert(&mut self, key: Key, reader: Rc<ClosedReader>) {
        if self.capacity == 0 {
            return;
        }
        while self.map.len() >= self.capacity {
            let oldest = self
                .map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k)
                .expect("cache is not empty");
            self.map.remove(&oldest);
        }
        self.tick += 1;
        self.map.insert(key, (reader, self.tick));
        debug_assert!(self.map.len() <= self.capacity);
    }

    fn remove(&mut self, key: Key) {
        self.map.remove(&key);
    }

    fn remove_log(&mut self, log_id: u64) {
        self.map.retain(|(id, _), _| *id != log_id);
    }
}
