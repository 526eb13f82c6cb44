//! Durable-write paths, measured side by side (issue #21): which way of making one appended
//! block durable costs a client the least. Each variant writes `--ops` sequential blocks of
//! `--kib` KiB into a preallocated O_DIRECT file and makes each durable before the next
//! (one appender, the low-rate case), recording per-write latency:
//!
//! - `blocking pwrite+fdatasync`: std thread, two syscalls (the floor every path is held to);
//! - `blocking pwritev2 RWF_DSYNC`: one syscall into blocks zeroed and synced ahead;
//! - `glommio write+fdatasync`: glommio's `DmaFile` (two ring round trips);
//! - `uring linked write+fdatasync`: one ring per executor (the `io-uring` crate), write and
//!   fdatasync as linked SQEs in one `io_uring_enter`, the completion woken through the ring's
//!   eventfd read on glommio's reactor;
//! - `uring RWF_DSYNC write`: one SQE, a DSYNC write into pre-zeroed synced blocks;
//! - the same two with the completion busy-polled (what the eventfd wake costs).
//!
//! Rounds alternate the variants so each sees the same machine noise; medians are reported.
//!
//! Run: `cargo bench -p ringlog-engine --bench sync_paths [-- --ops 2000 --kib 4 --rounds 3 --dir PATH]`

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use io_uring::{opcode, squeue, types, IoUring};

const ALIGN_BYTES: usize = 4096;
const BENCH_IO_MEMORY_BYTES: usize = 2 << 20;
const RING_ENTRIES: u32 = 64;

struct Args {
    ops: usize,
    kib: usize,
    rounds: usize,
    dir: PathBuf,
}

fn parse_args() -> Args {
    let mut args = Args {
        ops: 2000,
        kib: 4,
        rounds: 3,
        dir: std::env::temp_dir().join("ringlog-bench-sync-paths"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = || it.next().and_then(|v| v.parse().ok()).expect("a number");
        match a.as_str() {
            "--ops" => args.ops = num(),
            "--kib" => args.kib = num(),
            "--rounds" => args.rounds = num(),
            "--dir" => args.dir = PathBuf::from(it.next().expect("--dir PATH")),
            "--bench" => {}
            other => {
                eprintln!(
                    "unknown argument {other}; expected --ops N, --kib N, --rounds N, --dir PATH"
                );
                std::process::exit(2);
            }
        }
    }
    args
}

struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> Self {
        let layout = Layout::from_size_align(len, ALIGN_BYTES).unwrap();
        // SAFETY: non-zero size; freed in Drop with the same layout.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Self { ptr, layout }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Creates the file and reserves `len` bytes; with `zeroed`, writes zeros over them and
/// syncs, so later writes overwrite initialised blocks (no metadata for a DSYNC write to commit).
fn prepare(path: &Path, len: usize, zeroed: bool) -> std::fs::File {
    let _ = std::fs::remove_file(path);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .expect("open");
    // SAFETY: plain syscall on an open fd.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len as i64) };
    assert_eq!(rc, 0, "fallocate");
    if zeroed {
        let chunk = AlignedBuf::new(1 << 20);
        let mut pos = 0;
        while pos < len {
            let n = (1 << 20).min(len - pos);
            // SAFETY: chunk is valid for n ≤ 1 MiB bytes, aligned.
            let w = unsafe { libc::pwrite(f.as_raw_fd(), chunk.ptr as *const _, n, pos as i64) };
            assert_eq!(w, n as isize);
            pos += n;
        }
        // SAFETY: plain syscall.
        assert_eq!(unsafe { libc::fsync(f.as_raw_fd()) }, 0);
    }
    f
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).unwrap()
}

struct Run {
    name: &'static str,
    hist: Histogram<u64>,
    ops_per_s: f64,
}

fn blocking(dir: &Path, ops: usize, bytes: usize, dsync: bool) -> Run {
    let path = dir.join("blocking.dat");
    let f = prepare(&path, ops * bytes, dsync);
    let buf = AlignedBuf::new(bytes);
    let fd = f.as_raw_fd();
    let mut hist = new_hist();
    let started = Instant::now();
    for i in 0..ops {
        let t = Instant::now();
        // SAFETY: buf is valid for `bytes`, aligned; fd open.
        unsafe { *buf.ptr = i as u8 };
        let pos = (i * bytes) as i64;
        if dsync {
            let iov = libc::iovec {
                iov_base: buf.ptr as *mut _,
                iov_len: bytes,
            };
            // SAFETY: one valid iovec.
            let n = unsafe { libc::pwritev2(fd, &iov, 1, pos, libc::RWF_DSYNC) };
            assert_eq!(n, bytes as isize, "pwritev2");
        } else {
            // SAFETY: as above.
            let n = unsafe { libc::pwrite(fd, buf.ptr as *const _, bytes, pos) };
            assert_eq!(n, bytes as isize, "pwrite");
            // SAFETY: plain syscall.
            assert_eq!(unsafe { libc::fdatasync(fd) }, 0);
        }
        hist.record(t.elapsed().as_nanos() as u64).unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    drop(f);
    let _ = std::fs::remove_file(&path);
    Run {
        name: if dsync {
            "blocking pwritev2 RWF_DSYNC"
        } else {
            "blocking pwrite+fdatasync"
        },
        hist,
        ops_per_s: ops as f64 / secs,
    }
}

fn on_executor<R: Send + 'static>(
    f: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = R>>> + Send + 'static,
) -> R {
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(BENCH_IO_MEMORY_BYTES)
        .spawn(f)
        .expect("executor")
        .join()
        .expect("executor run")
}

fn glommio_dma(dir: &Path, ops: usize, bytes: usize) -> Run {
    let path = dir.join("glommio.dat");
    on_executor(move || {
        Box::pin(async move {
            drop(prepare(&path, ops * bytes, false));
            let file = glommio::io::OpenOptions::new()
                .write(true)
                .read(true)
                .dma_open(&path)
                .await
                .expect("open");
            let mut hist = new_hist();
            let started = Instant::now();
            for i in 0..ops {
                let t = Instant::now();
                let mut buf = file.alloc_dma_buffer(bytes);
                buf.as_bytes_mut()[0] = i as u8;
                file.write_at(buf, (i * bytes) as u64).await.expect("write");
                file.fdatasync().await.expect("fdatasync");
                hist.record(t.elapsed().as_nanos() as u64).unwrap();
            }
            let secs = started.elapsed().as_secs_f64();
            file.close().await.expect("close");
            let _ = std::fs::remove_file(&path);
            Run {
                name: "glommio write+fdatasync",
                hist,
                ops_per_s: ops as f64 / secs,
            }
        })
    })
}

#[derive(Clone, Copy, PartialEq)]
enum UringMode {
    /// WRITE_FIXED linked to FSYNC(DATASYNC).
    Linked,
    /// One WRITE_FIXED with RWF_DSYNC into pre-zeroed blocks.
    Dsync,
}

fn uring(dir: &Path, ops: usize, bytes: usize, mode: UringMode, spin: bool) -> Run {
    let path = dir.join("uring.dat");
    on_executor(move || {
        Box::pin(async move {
            let f = prepare(&path, ops * bytes, mode == UringMode::Dsync);
            let mut ring = IoUring::new(RING_ENTRIES).expect("ring");
            ring.submitter()
                .register_files(&[f.as_raw_fd()])
                .expect("register files");
            let buf = AlignedBuf::new(bytes);
            let iov = libc::iovec {
                iov_base: buf.ptr as *mut _,
                iov_len: bytes,
            };
            // SAFETY: buf outlives the ring's use of it (unregistered when the ring drops).
            unsafe { ring.submitter().register_buffers(&[iov]) }.expect("register buffers");
            // SAFETY: plain syscall.
            let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            assert!(efd >= 0);
            ring.submitter()
                .register_eventfd(efd)
                .expect("register eventfd");
            // SAFETY: efd is ours; the BufferedFile closes it.
            let wake = unsafe { glommio::io::BufferedFile::from_raw_fd(efd) };
            let mut hist = new_hist();
            let started = Instant::now();
            for i in 0..ops {
                let t = Instant::now();
                // SAFETY: buf valid.
                unsafe { *buf.ptr = i as u8 };
                let pos = (i * bytes) as u64;
                let w =
                    opcode::WriteFixed::new(types::Fixed(0), buf.ptr, bytes as u32, 0).offset(pos);
                let expect = match mode {
                    UringMode::Linked => {
                        let w = w.build().flags(squeue::Flags::IO_LINK).user_data(1);
                        let s = opcode::Fsync::new(types::Fixed(0))
                            .flags(types::FsyncFlags::DATASYNC)
                            .build()
                            .user_data(2);
                        // SAFETY: the buffer and file stay valid until both complete.
                        unsafe { ring.submission().push_multiple(&[w, s]) }.expect("sq");
                        2
                    }
                    UringMode::Dsync => {
                        let w = w.rw_flags(libc::RWF_DSYNC).build().user_data(1);
                        // SAFETY: as above.
                        unsafe { ring.submission().push(&w) }.expect("sq");
                        1
                    }
                };
                ring.submit().expect("submit");
                let mut done = 0;
                while done < expect {
                    for c in ring.completion() {
                        assert!(
                            c.result() >= 0,
                            "op {} failed: {}",
                            c.user_data(),
                            c.result()
                        );
                        done += 1;
                    }
                    if done < expect {
                        if spin {
                            std::hint::spin_loop();
                        } else {
                            // The eventfd counts completions; reading resets it.
                            wake.read_at(0, 8).await.expect("eventfd read");
                        }
                    }
                }
                hist.record(t.elapsed().as_nanos() as u64).unwrap();
            }
            let secs = started.elapsed().as_secs_f64();
            drop(ring);
            drop(f);
            let _ = std::fs::remove_file(&path);
            Run {
                name: match (mode, spin) {
                    (UringMode::Linked, false) => "uring linked write+fdatasync",
                    (UringMode::Linked, true) => "uring linked, busy-polled",
                    (UringMode::Dsync, false) => "uring RWF_DSYNC write",
                    (UringMode::Dsync, true) => "uring RWF_DSYNC, busy-polled",
                },
                hist,
                ops_per_s: ops as f64 / secs,
            }
        })
    })
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args = parse_args();
    std::fs::create_dir_all(&args.dir).expect("bench dir");
    let bytes = args.kib * 1024;
    assert!(
        bytes.is_multiple_of(ALIGN_BYTES),
        "--kib must be a multiple of 4"
    );
    println!(
        "durable write paths: {} sequential {} KiB writes per run, each durable before the next, {} rounds, dir {}",
        args.ops, args.kib, args.rounds, args.dir.display()
    );
    type Variant = Box<dyn Fn(&Path, usize, usize) -> Run>;
    let variants: Vec<Variant> = vec![
        Box::new(|d, o, b| blocking(d, o, b, false)),
        Box::new(|d, o, b| blocking(d, o, b, true)),
        Box::new(glommio_dma),
        Box::new(|d, o, b| uring(d, o, b, UringMode::Linked, false)),
        Box::new(|d, o, b| uring(d, o, b, UringMode::Dsync, false)),
        Box::new(|d, o, b| uring(d, o, b, UringMode::Linked, true)),
        Box::new(|d, o, b| uring(d, o, b, UringMode::Dsync, true)),
    ];
    // Per variant: name, p50s, p99s, rates (one per round).
    type Row = (&'static str, Vec<f64>, Vec<f64>, Vec<f64>);
    let mut rows: Vec<Row> = Vec::new();
    for round in 1..=args.rounds {
        for (i, v) in variants.iter().enumerate() {
            let r = v(&args.dir, args.ops, bytes);
            println!(
                "round {round}: {:<30} p50 {:.3} ms p99 {:.3} ms p99.9 {:.3} ms, {:.0} ops/s",
                r.name,
                ms(&r.hist, 0.5),
                ms(&r.hist, 0.99),
                ms(&r.hist, 0.999),
                r.ops_per_s
            );
            if rows.len() <= i {
                rows.push((r.name, Vec::new(), Vec::new(), Vec::new()));
            }
            rows[i].1.push(ms(&r.hist, 0.5));
            rows[i].2.push(ms(&r.hist, 0.99));
            rows[i].3.push(r.ops_per_s);
        }
    }
    let base = median(rows[0].3.clone());
    for (name, p50, p99, rate) in rows {
        let rate = median(rate);
        println!(
            "RESULT {name:<30} p50 {:.3} ms p99 {:.3} ms {:.0} ops/s ({:.2}× blocking pwrite+fdatasync)",
            median(p50),
            median(p99),
            rate,
            rate / base
        );
    }
}
