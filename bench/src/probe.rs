//! `--fsync-probe DIR`: the disk's fdatasync latency as the broker's log sees it: sequential
//! 4 KiB O_DIRECT writes into a preallocated file, each followed by fdatasync.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::stats::{self, Percentiles};

const BLOCK: usize = 4096;

#[derive(Clone, Debug, Serialize)]
pub struct FsyncProbe {
    pub dir: String,
    pub writes: u64,
    pub block_bytes: usize,
    /// fdatasync latency alone.
    pub fdatasync: Percentiles,
    /// write + fdatasync.
    pub write_and_sync: Percentiles,
    pub syncs_per_sec: f64,
}

pub fn run(dir: &Path, count: u64) -> Result<FsyncProbe, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!(".ringlog-bench-fsync-probe-{}", std::process::id()));
    let cpath = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: plain open(2) with a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            cpath.as_ptr(),
            libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY | libc::O_DIRECT | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(format!(
            "open {} with O_DIRECT: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    let layout = Layout::from_size_align(BLOCK, BLOCK).unwrap();
    // SAFETY: non-zero size layout; freed below.
    let buf = unsafe { alloc_zeroed(layout) };
    let result = (|| {
        let len = (count as i64 + 1) * BLOCK as i64;
        // SAFETY: fallocate on our fd.
        if unsafe { libc::fallocate(fd, 0, 0, len) } != 0 {
            // Not fatal: some file systems lack fallocate.
        }
        // SAFETY: fsync on our fd.
        unsafe { libc::fsync(fd) };
        let mut sync_h = stats::new_hist();
        let mut both_h = stats::new_hist();
        let t0 = Instant::now();
        for i in 0..count {
            // SAFETY: buf points to BLOCK writable bytes.
            unsafe {
                std::ptr::write_bytes(buf, (i % 251) as u8, BLOCK);
            }
            let a = Instant::now();
            // SAFETY: aligned buffer of BLOCK bytes, aligned offset.
            let n =
                unsafe { libc::pwrite(fd, buf as *const _, BLOCK, (i as usize * BLOCK) as i64) };
            if n != BLOCK as isize {
                return Err(format!("pwrite: {}", std::io::Error::last_os_error()));
            }
            let b = Instant::now();
            // SAFETY: fdatasync on our fd.
            if unsafe { libc::fdatasync(fd) } != 0 {
                return Err(format!("fdatasync: {}", std::io::Error::last_os_error()));
            }
            let c = Instant::now();
            stats::record(&mut sync_h, (c - b).as_micros() as u64);
            stats::record(&mut both_h, (c - a).as_micros() as u64);
        }
        let secs = t0.elapsed().as_secs_f64();
        Ok(FsyncProbe {
            dir: dir.display().to_string(),
            writes: count,
            block_bytes: BLOCK,
            fdatasync: Percentiles::of(&sync_h),
            write_and_sync: Percentiles::of(&both_h),
            syncs_per_sec: count as f64 / secs,
        })
    })();
    // SAFETY: allocated above with this layout; fd is ours.
    unsafe {
        dealloc(buf, layout);
        libc::close(fd);
    }
    let _ = std::fs::remove_file(&path);
    result
}
