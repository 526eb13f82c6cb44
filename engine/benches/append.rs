//! Engine append benchmark (issue: engine ≥ 0.9 × baseline).
//!
//! Appends 1 KiB records in batches of 16 KiB with durable group commit on one core, and in the
//! same run measures a baseline: plain O_DIRECT sequential writes of the same bytes with the same
//! fdatasync cadence, done with std and libc, no glommio. Two shapes, rounds alternating engine
//! and baseline so both see the same machine noise, medians and ratios reported:
//! - one appender (one batch per fdatasync), on `storage-io` io-uring (the default) and on
//!   glommio; also glommio's own write+fdatasync;
//! - 8 concurrent durable appenders (group commit), the baseline syncing after as many batches
//!   as the engine put under one fdatasync in that round.
//!
//! Then 64 concurrent durable appenders show appends per fdatasync.
//!
//! Run: `cargo bench -p ringlog-engine --bench append [-- --mib 32 --rounds 3 --dir PATH]`

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use engine::batch_encode::{encode_uncompressed, NewRecord};
use engine::{
    CoreStorage, CoreStorageOptions, DataDir, Durability, LogConfig, PartitionLog, StorageIo,
};
use glommio::{LocalExecutorBuilder, Placement};

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 16;
const CONCURRENT_APPENDERS: usize = 64;
/// Appenders of the group-commit comparison.
const GROUP_COMMIT_APPENDERS: usize = 8;
const ALIGN_BYTES: usize = 4096;
const BENCH_IO_MEMORY_BYTES: usize = 2 << 20;

struct Args {
    mib: usize,
    rounds: usize,
    dir: PathBuf,
}

fn parse_args() -> Args {
    let mut args = Args {
        mib: 32,
        rounds: 3,
        dir: std::env::temp_dir().join("ringlog-bench-append"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--mib" => args.mib = it.next().and_then(|v| v.parse().ok()).expect("--mib N"),
            "--rounds" => args.rounds = it.next().and_then(|v| v.parse().ok()).expect("--rounds N"),
            "--dir" => args.dir = PathBuf::from(it.next().expect("--dir PATH")),
            "--bench" => {}
            other => {
                eprintln!("unknown argument {other}; expected --mib N, --rounds N, --dir PATH");
                std::process::exit(2);
            }
        }
    }
    args
}

fn make_batch(seed: usize) -> Vec<u8> {
    encode_uncompressed((0..RECORDS_PER_BATCH).map(|i| NewRecord {
        value: Some(Bytes::from(vec![(seed + i) as u8; RECORD_BYTES])),
        timestamp_ms: 1_700_000_000_000 + seed as i64,
        ..Default::default()
    }))
}

/// Plain O_DIRECT writes of `batch_bytes` each (padded to the block), an fdatasync after every
/// `batches_per_sync` of them (and after the last). With `preallocate`, the file's space is
/// reserved first (fallocate, keep size), as the engine does in 32 MiB steps.
fn baseline(
    dir: &Path,
    batch_bytes: usize,
    batches: usize,
    preallocate: bool,
    batches_per_sync: usize,
) -> f64 {
    assert!(batches_per_sync >= 1);
    let path = dir.join("baseline.dat");
    let _ = std::fs::remove_file(&path);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .expect("open baseline file");
    let padded = batch_bytes.div_ceil(ALIGN_BYTES) * ALIGN_BYTES;
    let layout = Layout::from_size_align(padded, ALIGN_BYTES).unwrap();
    // SAFETY: layout has non-zero size; freed below with the same layout.
    let buf = unsafe { alloc_zeroed(layout) };
    assert!(!buf.is_null());
    let fd = file.as_raw_fd();
    if preallocate {
        let total = (padded * batches) as i64;
        // SAFETY: plain syscall on an open fd.
        let rc = unsafe { libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, 0, total) };
        assert_eq!(rc, 0, "baseline fallocate");
    }
    let started = Instant::now();
    let mut pos: i64 = 0;
    for i in 0..batches {
        // SAFETY: buf is valid for `padded` bytes.
        unsafe { *buf = i as u8 };
        // SAFETY: fd is open, buf is aligned and valid for `padded` bytes.
        let n = unsafe { libc::pwrite(fd, buf as *const libc::c_void, padded, pos) };
        assert_eq!(n, padded as isize, "baseline pwrite");
        if (i + 1) % batches_per_sync == 0 || i + 1 == batches {
            // SAFETY: plain syscall on an open fd.
            assert_eq!(unsafe { libc::fdatasync(fd) }, 0, "baseline fdatasync");
        }
        pos += padded as i64;
    }
    let secs = started.elapsed().as_secs_f64();
    // SAFETY: allocated above with this layout.
    unsafe { dealloc(buf, layout) };
    drop(file);
    let _ = std::fs::remove_file(&path);
    (batch_bytes * batches) as f64 / (1 << 20) as f64 / secs
}

/// The same writes and fdatasyncs as `baseline`, through glommio's DmaFile on one executor:
/// the floor the engine's runtime puts under it.
fn glommio_raw(dir: &Path, batch_bytes: usize, batches: usize) -> f64 {
    let path = dir.join("glommio-raw.dat");
    let _ = std::fs::remove_file(&path);
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(BENCH_IO_MEMORY_BYTES)
        .spin_before_park(spin())
        .spawn(move || async move {
            let file = glommio::io::OpenOptions::new()
                .write(true)
                .read(true)
                .create(true)
                .truncate(true)
                .dma_open(&path)
                .await
                .expect("open");
            let padded = batch_bytes.div_ceil(ALIGN_BYTES) * ALIGN_BYTES;
            file.pre_allocate((padded * batches) as u64, true)
                .await
                .expect("fallocate");
            let started = Instant::now();
            for i in 0..batches {
                let mut buf = file.alloc_dma_buffer(padded);
                buf.as_bytes_mut().fill(i as u8);
                file.write_at(buf, (i * padded) as u64)
                    .await
                    .expect("write");
                file.fdatasync().await.expect("fdatasync");
            }
            let secs = started.elapsed().as_secs_f64();
            file.close().await.expect("close");
            let _ = std::fs::remove_file(&path);
            (batch_bytes * batches) as f64 / (1 << 20) as f64 / secs
        })
        .expect("executor")
        .join()
        .expect("glommio run")
}

/// Busy-poll before parking the executor thread (`SPIN_US`, default 0).
fn spin() -> std::time::Duration {
    std::time::Duration::from_micros(
        std::env::var("SPIN_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    )
}

struct EngineRun {
    mib_per_s: f64,
    appends: u64,
    flushes: u64,
}

fn engine_run(dir: &Path, batch: Rc<Vec<u8>>, batches: usize, appenders: usize) -> EngineRun {
    engine_run_on(dir, batch, batches, appenders, StorageIo::IoUring)
}

fn engine_run_on(
    dir: &Path,
    batch: Rc<Vec<u8>>,
    batches: usize,
    appenders: usize,
    storage_io: StorageIo,
) -> EngineRun {
    let root = dir.join("engine");
    let _ = std::fs::remove_dir_all(&root);
    let batch = batch.to_vec();
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(BENCH_IO_MEMORY_BYTES)
        .spin_before_park(spin())
        .spawn(move || async move {
            let dd = Arc::new(DataDir::open(&root).expect("data dir"));
            let options = CoreStorageOptions {
                read_cache_segments: 8,
                storage_io,
                ..Default::default()
            };
            let core = CoreStorage::open(dd, options, None).await.expect("core");
            let (log, _) = PartitionLog::open(
                &core,
                root.join("topics/bench/p00000"),
                LogConfig::default(),
            )
            .await
            .expect("open");
            let batch = Rc::new(batch);
            let started = Instant::now();
            let per = batches / appenders;
            let tasks: Vec<_> = (0..appenders)
                .map(|_| {
                    let log = log.clone();
                    let batch = batch.clone();
                    glommio::spawn_local(async move {
                        for _ in 0..per {
                            log.append(&batch, Durability::Sync).await.expect("append");
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await;
            }
            let secs = started.elapsed().as_secs_f64();
            let stats = log.stats();
            log.close().await.expect("close");
            drop(core);
            let _ = std::fs::remove_dir_all(&root);
            EngineRun {
                mib_per_s: stats.bytes_appended as f64 / (1 << 20) as f64 / secs,
                appends: stats.appends,
                flushes: stats.flushes,
            }
        })
        .expect("executor")
        .join()
        .expect("engine run")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args = parse_args();
    std::fs::create_dir_all(&args.dir).expect("bench dir");
    let batch = Rc::new(make_batch(1));
    let batch_bytes = batch.len();
    let batches = (args.mib << 20) / batch_bytes;
    println!(
        "engine append bench: {RECORDS_PER_BATCH} x {RECORD_BYTES} B records per batch ({batch_bytes} B), {batches} batches ({} MiB) per run, {} rounds, dir {}",
        args.mib,
        args.rounds,
        args.dir.display()
    );
    let mut base = Vec::new();
    let mut base_pre = Vec::new();
    let mut eng = Vec::new();
    let mut eng_glommio = Vec::new();
    for round in 1..=args.rounds {
        let b = baseline(&args.dir, batch_bytes, batches, false, 1);
        let e = engine_run(&args.dir, batch.clone(), batches, 1);
        let p = baseline(&args.dir, batch_bytes, batches, true, 1);
        let g = glommio_raw(&args.dir, batch_bytes, batches);
        let eg = engine_run_on(&args.dir, batch.clone(), batches, 1, StorageIo::Glommio);
        println!("round {round}: glommio raw (DmaFile write + fdatasync) {g:.2} MiB/s, engine on storage-io glommio {:.2} MiB/s", eg.mib_per_s);
        eng_glommio.push(eg.mib_per_s);
        println!(
            "round {round}/{}: baseline {b:.2} MiB/s, engine {:.2} MiB/s ({} appends, {} flushes), baseline+fallocate {p:.2} MiB/s",
            args.rounds, e.mib_per_s, e.appends, e.flushes
        );
        base.push(b);
        base_pre.push(p);
        eng.push(e.mib_per_s);
    }
    let (b, e, p, eg) = (
        median(base),
        median(eng),
        median(base_pre),
        median(eng_glommio),
    );
    println!(
        "RESULT single appender (medians): baseline {b:.2} MiB/s, engine {e:.2} MiB/s, ratio {:.3}; baseline+fallocate {p:.2} MiB/s, ratio {:.3}; engine on storage-io glommio {eg:.2} MiB/s, ratio {:.3}",
        e / b,
        e / p,
        eg / b
    );
    // Group commit: concurrent durable appenders share each fdatasync. The baseline writes the
    // same bytes with the same cadence: an fdatasync after as many batches as the engine put
    // under one fdatasync in the same round.
    let (mut gb, mut ge, mut cadences) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=args.rounds {
        let e = engine_run(&args.dir, batch.clone(), batches, GROUP_COMMIT_APPENDERS);
        let cadence = (e.appends as f64 / e.flushes.max(1) as f64)
            .round()
            .max(1.0) as usize;
        let b = baseline(&args.dir, batch_bytes, batches, false, cadence);
        println!(
            "round {round}/{}: {GROUP_COMMIT_APPENDERS} appenders: engine {:.2} MiB/s ({} appends / {} fdatasyncs), baseline with an fdatasync every {cadence} batches {b:.2} MiB/s",
            args.rounds, e.mib_per_s, e.appends, e.flushes
        );
        ge.push(e.mib_per_s);
        gb.push(b);
        cadences.push(cadence as f64);
    }
    let (b, e) = (median(gb), median(ge));
    println!(
        "RESULT group commit, {GROUP_COMMIT_APPENDERS} durable appenders (medians): baseline at the same fdatasync cadence ({:.0} batches per fdatasync) {b:.2} MiB/s, engine {e:.2} MiB/s, ratio {:.3}",
        median(cadences),
        e / b
    );
    let g = engine_run(&args.dir, batch.clone(), batches, CONCURRENT_APPENDERS);
    println!(
        "RESULT {CONCURRENT_APPENDERS} concurrent durable appenders: {:.2} MiB/s, {} appends / {} fdatasync rounds = {:.1} appends per fdatasync",
        g.mib_per_s,
        g.appends,
        g.flushes,
        g.appends as f64 / g.flushes.max(1) as f64
    );
}
