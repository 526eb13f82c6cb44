//! Fuzz targets for every path that reads bytes the broker did not write itself:
//!
//! | target | what it drives |
//! |---|---|
//! | `request_decode` | `net::conn::decode_frame`, the connection's decode entry point, for every advertised API key and version |
//! | `request_dispatch` | a live in-process broker over loopback: frame decode + dispatch to the handlers |
//! | `record_batch` | `engine::record_check::ValidBatch::new`: header, CRC, records, every codec (bounded inflation); on a valid batch the log cleaner's record parse and rebuild |
//! | `segment_recovery` | `PartitionLog::open` of a partition whose active segment holds the input (the recovery scan), then reads |
//! | `raft_log` | `meta::log_store::scan_log_records`, the raft log's recovery scan and entry decoder |
//! | `meta_snapshot` | `meta::sm::check_snapshot_bytes`, the metastore snapshot decoder |
//!
//! Each target is a plain function of the input: `cargo afl` runs it coverage-guided
//! (`scripts/fuzz.sh`), and `tests/targets.rs` replays the committed corpus
//! (`fuzz/corpus/<target>/`) and crash regressions (`fuzz/regressions/<target>/`) plus a
//! bounded set of seeded mutations as ordinary tests. A target fails by panicking (or by the
//! process dying: an abort, an allocation failure); a refusal is a normal return.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;

pub mod seeds;

pub use net::lazy_reserve::LazyReserve;

/// The `main` of a fuzz target binary: `fuzz_main!(record_batch);`. Under `cargo afl build`
/// it is an AFL++ persistent-mode loop; a plain build replays the files named on the command
/// line (crash reproduction). Installs the broker's allocator, as `ringlog` does.
#[macro_export]
macro_rules! fuzz_main {
    ($target:ident) => {
        #[global_allocator]
        static ALLOCATOR: $crate::LazyReserve = $crate::LazyReserve;

        fn main() {
            $crate::run_main($crate::$target);
        }
    };
}

/// See [`fuzz_main`].
pub fn run_main(target: fn(&[u8])) {
    #[cfg(fuzzing)]
    afl::fuzz!(|data: &[u8]| target(data));
    #[cfg(not(fuzzing))]
    for path in std::env::args_os().skip(1) {
        let data = std::fs::read(&path).expect("read input");
        eprintln!("replaying {}", Path::new(&path).display());
        target(&data);
    }
}

/// Every target, by name (the names of the corpus folders and fuzz binaries).
pub const TARGETS: &[&str] = &[
    "request_decode",
    "request_dispatch",
    "record_batch",
    "segment_recovery",
    "raft_log",
    "meta_snapshot",
];

/// Runs target `name` on `data`.
pub fn run_target(name: &str, data: &[u8]) {
    match name {
        "request_decode" => request_decode(data),
        "request_dispatch" => request_dispatch(data),
        "record_batch" => record_batch(data),
        "segment_recovery" => segment_recovery(data),
        "raft_log" => raft_log(data),
        "meta_snapshot" => meta_snapshot(data),
        other => panic!("unknown fuzz target {other}"),
    }
}

/// The request frame for `data`: its first two bytes pick a served API and one of its
/// versions (so the fuzzer spends its time inside the codecs, not on unknown keys), the rest
/// follows the correlation id (the request header's client id, tagged fields, then the body).
pub fn frame_body(data: &[u8]) -> Option<Vec<u8>> {
    let (&pick, rest) = data.split_first()?;
    let (&vpick, rest) = rest.split_first()?;
    let served = net::api::served_apis().count();
    let &(key, min, max) = net::api::served_apis().nth(pick as usize % served)?;
    let version = min + (vpick as i16).rem_euclid(max - min + 1);
    let mut body = Vec::with_capacity(8 + rest.len());
    body.extend_from_slice(&(key as i16).to_be_bytes());
    body.extend_from_slice(&version.to_be_bytes());
    body.extend_from_slice(&7i32.to_be_bytes());
    body.extend_from_slice(rest);
    Some(body)
}

pub fn request_decode(data: &[u8]) {
    if let Some(body) = frame_body(data) {
        let _ = net::conn::decode_frame(Bytes::from(body), "/fuzz");
    }
    // The raw form too: any key, version and header.
    if data.len() >= 8 {
        let _ = net::conn::decode_frame(Bytes::copy_from_slice(data), "/fuzz");
    }
}

/// Longest the dispatch target waits for an answer before it drops the connection (a
/// long-poll Fetch or a JoinGroup may legitimately wait; the broker must clean up after it).
const DISPATCH_ANSWER_WAIT_MS: u64 = 50;

struct LiveBroker {
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

/// One broker per process, started on first use, with topic `fuzz` (2 partitions) so the
/// data-path handlers have something to find.
fn live_broker() -> &'static LiveBroker {
    static BROKER: OnceLock<LiveBroker> = OnceLock::new();
    BROKER.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = net::BrokerConfig::new(
            dir.path().join("data"),
            "127.0.0.1:0".parse().expect("addr"),
            Vec::new(),
        );
        config.group_initial_rebalance_delay_ms = 0;
        config.request_timeout_ms = 1_000;
        let (ready_tx, ready_rx) = flume::bounded(1);
        let (_shutdown_tx, shutdown_rx) = flume::bounded::<()>(1);
        std::thread::Builder::new()
            .name("fuzz-broker".into())
            .spawn(move || {
                let _keep = _shutdown_tx;
                let res = net::broker::run(config, shutdown_rx, |addr| {
                    let _ = ready_tx.send(addr);
                });
                if let Err(e) = res {
                    panic!("fuzz broker stopped: {e}");
                }
            })
            .expect("broker thread");
        let addr = ready_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("broker ready");
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&seeds::create_topic_frame("fuzz", 2)).unwrap();
        let mut size = [0u8; 4];
        s.read_exact(&mut size).expect("CreateTopics answer");
        LiveBroker { addr, _dir: dir }
    })
}

pub fn request_dispatch(data: &[u8]) {
    let Some(body) = frame_body(data) else {
        return;
    };
    let broker = live_broker();
    let mut s = match TcpStream::connect(broker.addr) {
        Ok(s) => s,
        Err(e) => panic!("the broker stopped accepting: {e}"),
    };
    s.set_read_timeout(Some(Duration::from_millis(DISPATCH_ANSWER_WAIT_MS)))
        .unwrap();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    if s.write_all(&frame).is_err() {
        return;
    }
    let mut buf = [0u8; 4096];
    let _ = s.read(&mut buf);
}

pub fn record_batch(data: &[u8]) {
    use engine::batch::{BATCH_LENGTH_POS, CRC_POS, HEADER_BYTES};
    // As sent: almost always refused by length or CRC.
    let _ = engine::record_check::ValidBatch::new(
        data,
        engine::record_check::BatchRules::max_bytes(usize::MAX),
    );
    // With length and CRC made right, so the fuzzer gets past them into the records.
    if data.len() >= HEADER_BYTES {
        let mut b = data.to_vec();
        let len = (b.len() - 12) as i32;
        b[BATCH_LENGTH_POS..BATCH_LENGTH_POS + 4].copy_from_slice(&len.to_be_bytes());
        b[16] = 2; // magic
        let crc = engine::batch::compute_crc(&b);
        b[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
        if let Ok(v) = engine::record_check::ValidBatch::new(
            &b,
            engine::record_check::BatchRules::max_bytes(usize::MAX),
        ) {
            let h = v.header();
            assert_eq!(h.size_bytes, b.len(), "a valid batch spans its bytes");
            assert_eq!(h.records_count, h.last_offset_delta + 1);
            cleaner_rebuild(&b, h);
        }
    }
}

/// The log cleaner on a valid batch: its records parse, and a rebuild keeping every other
/// record (with and without a delete horizon) is a valid stored batch holding exactly those.
fn cleaner_rebuild(b: &[u8], h: &engine::batch::BatchHeader) {
    use engine::batch::records;
    use engine::cleaner::records::rebuild;
    let Ok(section) = records::section(b, h) else {
        return;
    };
    let all = records::parse(&section, h).expect("a valid batch's records parse");
    assert_eq!(all.len(), h.records_count as usize);
    let kept: Vec<_> = all.iter().copied().step_by(2).collect();
    for horizon in [None, Some(h.base_timestamp.wrapping_add(1))] {
        let Ok(out) = rebuild(b, h, &kept, horizon) else {
            continue;
        };
        let oh = engine::batch::validate_stored(&out).expect("a rebuilt batch is valid");
        assert_eq!(
            (oh.base_offset, oh.last_offset_delta),
            (h.base_offset, h.last_offset_delta)
        );
        let osec = records::section(&out, &oh).expect("a rebuilt batch decompresses");
        let again = records::parse(&osec, &oh).expect("a rebuilt batch's records parse");
        fn key<'a>(r: &records::RecordView<'a>) -> (i32, i64, Option<&'a [u8]>, bool) {
            (r.offset_delta, r.timestamp_ms, r.key, r.tombstone)
        }
        assert_eq!(
            again.iter().map(key).collect::<Vec<_>>(),
            kept.iter().map(key).collect::<Vec<_>>()
        );
    }
}

thread_local! {
    static EXECUTOR: glommio::LocalExecutor = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(1 << 20)
        .make()
        .expect("executor");
}

struct RecoveryRoot {
    dir: tempfile::TempDir,
}

fn recovery_root() -> &'static RecoveryRoot {
    static ROOT: OnceLock<RecoveryRoot> = OnceLock::new();
    ROOT.get_or_init(|| RecoveryRoot {
        dir: tempfile::tempdir().expect("temp dir"),
    })
}

/// The input as the active segment of a partition (a crash left it behind: no clean marker),
/// opened by the engine's recovery, then read from the start to the high watermark.
pub fn segment_recovery(data: &[u8]) {
    let root: PathBuf = recovery_root().dir.path().to_path_buf();
    let part = root.join("topics").join("fuzz").join("p00000");
    let _ = std::fs::remove_dir_all(&part);
    std::fs::create_dir_all(&part).expect("partition dir");
    std::fs::write(part.join(engine::segment::file_name(0, "log")), data).expect("segment");
    EXECUTOR.with(|ex| {
        ex.run(async {
            let storage = storage(&root).await;
            let config = engine::LogConfig {
                preallocate_bytes: 0,
                ..engine::LogConfig::default()
            };
            let (log, _summary) =
                match engine::PartitionLog::open(&storage, part.clone(), config).await {
                    Ok(x) => x,
                    Err(_) => return, // refused with an error: fine
                };
            let hwm = log.high_watermark();
            let at = log.log_start_offset();
            let mut batches = 0u64;
            let end = log
                .for_each_batch(
                    at,
                    hwm,
                    1 << 20,
                    engine::ReadEnd::HighWatermark,
                    |_, stored| {
                        engine::batch::validate(stored).expect("only valid batches are served");
                        batches += 1;
                    },
                )
                .await
                .expect("recovered data reads back");
            assert_eq!(end, hwm, "every offset below the high watermark reads back");
            assert!(hwm == at || batches > 0);
            let _ = log.close().await;
        })
    });
}

async fn storage(root: &Path) -> std::rc::Rc<engine::CoreStorage> {
    thread_local! {
        static STORAGE: std::cell::RefCell<Option<std::rc::Rc<engine::CoreStorage>>> = const { std::cell::RefCell::new(None) };
    }
    if let Some(s) = STORAGE.with(|s| s.borrow().clone()) {
        return s;
    }
    let dd = std::sync::Arc::new(engine::DataDir::open(root).expect("data dir"));
    let s = engine::CoreStorage::new(dd, 4).await.expect("core storage");
    STORAGE.with(|c| *c.borrow_mut() = Some(s.clone()));
    s
}

pub fn raft_log(data: &[u8]) {
    let scan = meta::log_store::scan_log_records(data, None);
    assert!(scan.valid_len <= data.len());
    assert_eq!(scan.damage.is_none(), scan.valid_len == data.len());
    if let Some((&first, _)) = data.split_first() {
        let scan = meta::log_store::scan_log_records(&data[1..], Some(first as u64));
        assert!(scan.valid_len < data.len());
    }
}

pub fn meta_snapshot(data: &[u8]) {
    let _ = meta::sm::check_snapshot_bytes(data);
}

/// The committed inputs of `target`: its corpus and its crash regressions.
pub fn corpus_files(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in [
        root.join("corpus").join(target),
        root.join("regressions").join(target),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if p.is_file() {
                let data = std::fs::read(&p).expect("read corpus file");
                out.push((p, data));
            }
        }
    }
    out
}
