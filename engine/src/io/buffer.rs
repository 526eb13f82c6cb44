//! Aligned write buffers: glommio's `DmaBuffer`, or a chunk of the core ring's registered
//! buffer pool (written with `WRITE_FIXED`: the kernel pins those pages once, at registration,
//! instead of on every write).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::RefCell;
use std::rc::Rc;

use glommio::io::DmaBuffer;

use super::IO_ALIGNMENT_BYTES;

/// An aligned buffer for one direct-I/O write.
pub enum IoBuf {
    Dma(DmaBuffer),
    Pooled(PooledChunk),
}

impl IoBuf {
    pub fn len(&self) -> usize {
        match self {
            IoBuf::Dma(b) => b.len(),
            IoBuf::Pooled(c) => c.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            IoBuf::Dma(b) => b.as_bytes(),
            // SAFETY: the chunk owns `len ≤ cap` bytes at `ptr` until it is dropped.
            IoBuf::Pooled(c) => unsafe { std::slice::from_raw_parts(c.ptr, c.len) },
        }
    }

    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            IoBuf::Dma(b) => b.as_bytes_mut(),
            // SAFETY: as above, and `&mut self` makes the access unique.
            IoBuf::Pooled(c) => unsafe { std::slice::from_raw_parts_mut(c.ptr, c.len) },
        }
    }

    /// Shortens the buffer to its first `len` bytes.
    pub fn trim_to_size(&mut self, len: usize) {
        assert!(len <= self.len(), "trim past the buffer's end");
        match self {
            IoBuf::Dma(b) => b.trim_to_size(len),
            IoBuf::Pooled(c) => c.len = len,
        }
    }

    pub(super) fn as_ptr(&self) -> *const u8 {
        match self {
            IoBuf::Dma(b) => b.as_ptr(),
            IoBuf::Pooled(c) => c.ptr,
        }
    }

    /// The registered buffer index for `WRITE_FIXED`, when the buffer is a pool chunk.
    pub(super) fn fixed_index(&self) -> Option<u16> {
        match self {
            IoBuf::Dma(_) => None,
            IoBuf::Pooled(_) => Some(POOL_BUFFER_INDEX),
        }
    }

    /// glommio's own buffer type, for a file on glommio. A file hands out buffers of its own
    /// backend (`SegmentFile::alloc_buffer`), so a pool chunk never meets a glommio file.
    pub(super) fn into_dma(self) -> DmaBuffer {
        match self {
            IoBuf::Dma(b) => b,
            IoBuf::Pooled(_) => unreachable!("a pool chunk belongs to a file on the core's ring"),
        }
    }
}

/// The pool is registered as the ring's only fixed buffer: index 0.
const POOL_BUFFER_INDEX: u16 = 0;

/// One region of `chunks × chunk_bytes`, registered with the core's ring; chunk 0 stays zeroed
/// forever (the source of the zero writes ahead of a log's tail).
pub struct BufferPool {
    base: *mut u8,
    layout: Layout,
    chunk_bytes: usize,
    free: RefCell<Vec<u32>>,
}

impl BufferPool {
    /// Allocates `total_bytes` (rounded down to whole chunks, at least 2) of zeroed aligned
    /// memory; `None` if that is less than two chunks.
    pub(super) fn new(total_bytes: usize, chunk_bytes: usize) -> Option<Rc<Self>> {
        assert!(chunk_bytes > 0 && (chunk_bytes as u64).is_multiple_of(IO_ALIGNMENT_BYTES));
        let chunks = total_bytes / chunk_bytes;
        if chunks < 2 {
            return None;
        }
        let layout = Layout::from_size_align(chunks * chunk_bytes, IO_ALIGNMENT_BYTES as usize)
            .expect("pool layout");
        // SAFETY: non-zero size; freed in Drop with the same layout.
        let base = unsafe { alloc_zeroed(layout) };
        if base.is_null() {
            return None;
        }
        Some(Rc::new(Self {
            base,
            layout,
            chunk_bytes,
            free: RefCell::new((1..chunks as u32).rev().collect()),
        }))
    }

    pub(super) fn iovec(&self) -> libc::iovec {
        libc::iovec {
            iov_base: self.base as *mut libc::c_void,
            iov_len: self.layout.size(),
        }
    }

    pub(super) fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// The zeroed chunk (never handed out, never written to).
    pub(super) fn zeros(&self) -> *const u8 {
        self.base
    }

    /// A chunk of exactly `chunk_bytes`, if one is free.
    pub(super) fn take(self: &Rc<Self>) -> Option<PooledChunk> {
        let index = self.free.borrow_mut().pop()?;
        // SAFETY: index < chunks, so the chunk lies inside the allocation.
        let ptr = unsafe { self.base.add(index as usize * self.chunk_bytes) };
        Some(PooledChunk {
            pool: self.clone(),
            index,
            ptr,
            len: self.chunk_bytes,
        })
    }

    /// Free chunks (for tests and metrics).
    pub fn free_chunks(&self) -> usize {
        self.free.borrow().len()
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; every chunk holds an Rc of the pool, so
        // none is alive.
        unsafe { dealloc(self.base, self.layout) }
    }
}

/// A chunk of the registered pool, given back when dropped.
pub struct PooledChunk {
    pool: Rc<BufferPool>,
    index: u32,
    ptr: *mut u8,
    len: usize,
}

impl Drop for PooledChunk {
    fn drop(&mut self) {
        debug_assert!(self.index >= 1, "chunk 0 is the zero chunk");
        self.pool.free.borrow_mut().push(self.index);
    }
}
