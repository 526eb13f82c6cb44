//! The broker's data directory: one process at a time (lock file), the glommio polled-I/O probe
//! workaround, and the partition directory layout `<data>/topics/<topic>/p<5-digit partition>/`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::io::{io_context, SegmentFile, IO_ALIGNMENT_BYTES};

pub const LOCK_FILE_NAME: &str = "ringlog.lock";
/// A non-empty file on the data device that every executor opens with direct I/O before any
/// other file (DESIGN.md §4: glommio probes polled-I/O support by reading offset 0 of the first
/// file it opens on a device; an empty file makes it wrongly mark the device pollable).
pub const PROBE_FILE_NAME: &str = "ringlog.probe";

/// A filesystem's size and free space, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    pub total_bytes: u64,
    pub usable_bytes: u64,
}

/// Exclusive ownership of a data directory by this process.
#[derive(Debug)]
pub struct DataDir {
    root: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Creates `root` if needed and locks it. A second process on the same directory gets an
    /// error naming the holder's pid (glommio's listeners set SO_REUSEPORT, so a second broker
    /// would otherwise start silently).
    pub fn open(root: &Path) -> io::Result<Self> {
        fs::create_dir_all(root).map_err(|e| io_context("creating data dir", root, e))?;
        let lock_path = root.join(LOCK_FILE_NAME);
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| io_context("opening lock file", &lock_path, e))?;
        // SAFETY: flock on a file descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let holder = fs::read_to_string(&lock_path).unwrap_or_default();
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "data dir {} is in use by another ringlog process (pid {}); stop it or use another --data-dir",
                    root.display(),
                    holder.trim()
                ),
            ));
        }
        lock.set_len(0)
            .and_then(|_| lock.write_all(std::process::id().to_string().as_bytes()))
            .map_err(|e| io_context("writing lock file", &lock_path, e))?;
        let probe = root.join(PROBE_FILE_NAME);
        if fs::metadata(&probe).map(|m| m.len()).unwrap_or(0) < IO_ALIGNMENT_BYTES {
            fs::write(&probe, vec![b'r'; IO_ALIGNMENT_BYTES as usize])
                .map_err(|e| io_context("writing probe file", &probe, e))?;
        }
        Ok(Self {
            root: root.to_path_buf(),
            _lock: lock,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The size of the filesystem holding the data dir and what is free to unprivileged
    /// writers (DescribeLogDirs' total and usable bytes); `None` if statvfs fails.
    pub fn space(&self) -> Option<DiskSpace> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(self.root.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs writes into the zeroed struct we own; the path is NUL-terminated.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        let block = st.f_frsize as u64;
        Some(DiskSpace {
            total_bytes: st.f_blocks as u64 * block,
            usable_bytes: st.f_bavail as u64 * block,
        })
    }

    /// Runs glommio's device probe against the non-empty probe file. Call once on each
    /// executor before it opens any other direct-I/O file.
    pub async fn probe_device(&self) -> io::Result<()> {
        let f = SegmentFile::open_read(&self.root.join(PROBE_FILE_NAME)).await?;
        f.read(0, IO_ALIGNMENT_BYTES as usize).await?;
        f.close().await
    }

    pub fn partition_dir(&self, topic: &str, partition: u32) -> PathBuf {
        self.root
            .join("topics")
            .join(topic)
            .join(format!("p{partition:05}"))
    }
}
