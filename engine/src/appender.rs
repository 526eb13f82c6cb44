//! Direct-I/O append-only writer for one file (Redpanda's `segment_appender`): bytes are copied
//! into an aligned in-memory tail; a flush writes whole 4 KiB blocks, and the partially filled
//! last block stays in memory to be rewritten, with what follows it, by the next flush.
//!
//! The caller guarantees one flush in flight at a time (the partition log's group commit);
//! appends may continue while a flush runs, into a fresh tail.

use std::io;

use std::rc::Rc;

use crate::io::{align_down, align_up, IoBuf, SegmentFile, IO_ALIGNMENT_BYTES};

pub struct Appender {
    file: Rc<SegmentFile>,
    /// Logical size: every byte appended so far.
    len: u64,
    /// File position of the first byte of `chunks[0]` (aligned).
    tail_pos: u64,
    /// Aligned chunks holding bytes `tail_pos..len`; all but the last are full. Empty while
    /// nothing new was appended since the last flush: then `partial` holds those bytes (less
    /// than a block), so an idle appender holds no aligned buffer (issue #13: 100,000
    /// partitions' tails).
    chunks: Vec<IoBuf>,
    /// Bytes `tail_pos..len` while `chunks` is empty.
    partial: Vec<u8>,
    /// Bytes used in the last chunk.
    last_fill: usize,
    chunk_bytes: usize,
    /// Bytes of file space reserved so far.
    allocated: u64,
    preallocate_bytes: u64,
    /// Writes keep the blocks after the tail zeroed ahead (a segment's files on the core's
    /// ring: a `.log` DSYNC write then commits no metadata, and an index write is an overwrite
    /// inside the file size, not an extending write that the kernel journals).
    zero_ahead: bool,
}

/// The writes one flush performs, taken from the appender so that appends can continue.
pub struct FlushJob {
    file: Rc<SegmentFile>,
    preallocate_bytes: u64,
    writes: Vec<(IoBuf, u64)>,
    /// The logical size this flush makes durable once synced.
    pub end: u64,
    preallocate_to: Option<u64>,
    /// The file's reserved space when the job was taken (how far zeroing ahead may go).
    reserved_to: u64,
    zero_ahead: bool,
}

impl Appender {
    /// Wraps `file` whose first `len` bytes are valid content. `tail_block` holds the bytes of
    /// the partial last block (`len % 4096` of them), as read back from disk, or is empty.
    pub fn new(
        file: Rc<SegmentFile>,
        len: u64,
        tail_block: &[u8],
        chunk_bytes: usize,
        allocated: u64,
        preallocate_bytes: u64,
    ) -> Self {
        assert_eq!(chunk_bytes as u64 % IO_ALIGNMENT_BYTES, 0);
        assert_eq!(tail_block.len() as u64, len - align_down(len));
        let mut a = Self {
            file,
            len: align_down(len),
            tail_pos: align_down(len),
            chunks: Vec::new(),
            partial: Vec::new(),
            last_fill: 0,
            chunk_bytes,
            allocated,
            preallocate_bytes,
            zero_ahead: false,
        };
        a.partial = tail_block.to_vec();
        a.len = len;
        a
    }

    fn push_chunk(&mut self) {
        // Not zeroed: only bytes below `last_fill` are ever read, and the padding of the last
        // block is zeroed when a flush takes it.
        let c = self.file.alloc_buffer(self.chunk_bytes);
        self.chunks.push(c);
        self.last_fill = 0;
    }

    pub fn file(&self) -> &Rc<SegmentFile> {
        &self.file
    }

    /// Flushes keep the reserved blocks after the tail zeroed and synced ahead.
    pub fn keep_zeroed_ahead(mut self) -> Self {
        self.zero_ahead = true;
        self
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The preallocation target that makes room for `extra` more bytes, if the file's
    /// reserved space does not cover them yet (`None` without preallocation). Appends reserve
    /// space before they are admitted, so a full disk refuses a batch instead of failing a
    /// flush that already holds acknowledged-to-be data.
    pub fn reservation_needed(&self, extra: u64) -> Option<u64> {
        if self.preallocate_bytes == 0 {
            return None;
        }
        let end = align_up(self.len + extra);
        if end <= self.allocated {
            return None;
        }
        let step = self.preallocation_step(end);
        Some(end.div_ceil(step) * step)
    }

    /// The preallocation step for a file reaching `end` bytes: as large as the file (so the
    /// steps double), from `MIN_PREALLOCATE_STEP_BYTES` up to `preallocate_bytes`.
    fn preallocation_step(&self, end: u64) -> u64 {
        let cap = self.preallocate_bytes.max(IO_ALIGNMENT_BYTES);
        align_up(end)
            .next_power_of_two()
            .max(crate::config::MIN_PREALLOCATE_STEP_BYTES)
            .min(cap)
    }

    /// Records that the file's space is reserved up to `to` bytes.
    pub fn reserved(&mut self, to: u64) {
        self.allocated = self.allocated.max(to);
    }

    /// Bytes appended but not yet handed to a flush.
    pub fn unflushed_bytes(&self) -> u64 {
        self.len - self.tail_pos
    }

    /// Puts the bytes after `tail_pos` into an aligned chunk again (before an append or a
    /// flush).
    fn materialize(&mut self) {
        if !self.chunks.is_empty() {
            return;
        }
        debug_assert_eq!(self.partial.len() as u64, self.len - self.tail_pos);
        self.push_chunk();
        let p = std::mem::take(&mut self.partial);
        self.chunks[0].as_bytes_mut()[..p.len()].copy_from_slice(&p);
        self.last_fill = p.len();
    }

    pub fn append(&mut self, mut data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.materialize();
        while !data.is_empty() {
            if self.last_fill == self.chunk_bytes {
                self.push_chunk();
            }
            let chunk = self.chunks.last_mut().expect("appender always has a chunk");
            let n = data.len().min(self.chunk_bytes - self.last_fill);
            chunk.as_bytes_mut()[self.last_fill..self.last_fill + n].copy_from_slice(&data[..n]);
            self.last_fill += n;
            self.len += n as u64;
            data = &data[n..];
        }
    }

    /// Takes everything appended so far as a flush job, or `None` if nothing is new. The tail
    /// restarts at the partial last block, whose bytes are copied into the new tail.
    pub fn take_flush(&mut self) -> Option<FlushJob> {
        if self.len == self.tail_pos {
            return None;
        }
        self.materialize();
        let end = self.len;
        let mut chunks = std::mem::take(&mut self.chunks);
        let last_fill = self.last_fill;
        let partial = (end - align_down(end)) as usize;
        let mut writes = Vec::with_capacity(chunks.len());
        let mut pos = self.tail_pos;
        let n = chunks.len();
        let mut partial_copy = Vec::new();
        for (i, mut c) in chunks.drain(..).enumerate() {
            let used = if i + 1 == n { last_fill } else { c.len() };
            if i + 1 == n {
                partial_copy.extend_from_slice(&c.as_bytes()[used - partial..used]);
                let padded = align_up(used as u64) as usize;
                c.as_bytes_mut()[used..padded].fill(0);
                c.trim_to_size(padded);
            }
            let len = c.len() as u64;
            if len > 0 {
                writes.push((c, pos));
            }
            pos += len;
        }
        let preallocate_to = (align_up(end) > self.allocated).then(|| {
            let step = self.preallocation_step(end);
            let to = align_up(end).div_ceil(step) * step;
            self.allocated = to;
            to
        });
        // The partial last block waits in a small copy until the next append needs a chunk.
        self.tail_pos = align_down(end);
        self.len = end;
        self.partial = partial_copy;
        debug_assert_eq!(self.partial.len() as u64, self.len - self.tail_pos);
        Some(FlushJob {
            file: self.file.clone(),
            preallocate_bytes: self.preallocate_bytes,
            writes,
            end,
            preallocate_to,
            reserved_to: self.allocated,
            zero_ahead: self.zero_ahead,
        })
    }

    /// Closes the file once no reader holds it (a reader's clone closes it on drop).
    pub async fn close(self) -> io::Result<()> {
        match Rc::try_unwrap(self.file) {
            Ok(f) => f.close().await,
            Err(_shared) => Ok(()),
        }
    }

    /// Shrinks the file to its logical size (at roll and clean close) so the closed file holds
    /// exactly its content.
    pub async fn trim_to_len(&self) -> io::Result<()> {
        self.file.truncate(self.len).await
    }
}

impl FlushJob {
    /// Bytes the job writes (whole blocks).
    pub fn bytes(&self) -> u64 {
        self.writes.iter().map(|(b, _)| b.len() as u64).sum()
    }

    pub fn file(&self) -> &Rc<SegmentFile> {
        &self.file
    }

    /// Writes (without syncing) what the job holds; its writes are issued concurrently.
    pub async fn write(self) -> io::Result<u64> {
        self.write_with(false).await
    }

    /// Writes what the job holds and makes it durable: one DSYNC write on the core's ring, or
    /// writes and an fdatasync.
    pub async fn write_durable(self) -> io::Result<u64> {
        self.write_with(true).await
    }

    async fn write_with(self, durable: bool) -> io::Result<u64> {
        if let Some(to) = self.preallocate_to {
            if self.preallocate_bytes > 0 {
                self.file.preallocate(to).await?;
            }
        }
        self.file.write_blocks(self.writes, durable).await?;
        if self.zero_ahead {
            self.file.zero_ahead(self.end, self.reserved_to);
        }
        Ok(self.end)
    }
}
