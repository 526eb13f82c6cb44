//! Shared helpers for the engine's integration tests: an executor with small `io_memory`, a
//! data dir in a temp folder, and Kafka batches built with kafka-protocol's encoder (through
//! `engine::batch_encode`), so the engine's parsing is checked against another implementation.
#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use engine::batch_encode::{encode_uncompressed, NewRecord};
use engine::{CoreStorage, DataDir, LogConfig, PartitionLog, RecoverySummary};
use glommio::{LocalExecutorBuilder, Placement};

/// Small registered I/O memory: tests run many executors under the default memlock limit.
pub const TEST_IO_MEMORY_BYTES: usize = 1 << 20;

/// Runs `f` to completion on a fresh glommio executor on this thread.
pub fn run<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(TEST_IO_MEMORY_BYTES)
        .spawn(f)
        .expect("executor starts")
        .join()
        .expect("executor finishes")
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A data dir plus this executor's storage context.
pub async fn core(root: &Path, read_cache_segments: usize) -> Rc<CoreStorage> {
    let dd = Arc::new(DataDir::open(root).expect("data dir"));
    CoreStorage::new(dd, read_cache_segments)
        .await
        .expect("core storage")
}

/// A storage context whose logs' writes and fdatasyncs go through a fault injector.
pub async fn faulty_core(root: &Path) -> (Rc<CoreStorage>, Rc<engine::io::FaultInjector>) {
    let faults = engine::io::FaultInjector::new();
    let dd = Arc::new(DataDir::open(root).unwrap());
    let core = CoreStorage::with_faults(dd, 4, faults.clone())
        .await
        .unwrap();
    (core, faults)
}

pub async fn open(
    core: &Rc<CoreStorage>,
    root: &Path,
    config: LogConfig,
) -> (Rc<PartitionLog>, RecoverySummary) {
    PartitionLog::open(core, root.join("topics/t/p00000"), config)
        .await
        .expect("log opens")
}

/// A config with small segments for tests that roll.
pub fn small_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        preallocate_bytes: 64 << 10,
        write_chunk_bytes: 64 << 10,
        max_batch_bytes: segment_bytes.min(1 << 20) as usize,
        ..LogConfig::default()
    }
}

/// Encodes one v2 batch of `n` records, keys `k<seed>-<i>`, values of `value_len` bytes.
pub fn batch(seed: u64, n: usize, value_len: usize, timestamp_ms: i64) -> Vec<u8> {
    encode_uncompressed((0..n).map(|i| {
        NewRecord {
            key: Some(Bytes::from(format!("k{seed}-{i}"))),
            value: Some(Bytes::from(
                (0..value_len)
                    .map(|j| (seed as usize + i * 31 + j) as u8)
                    .collect::<Vec<u8>>(),
            )),
            timestamp_ms: timestamp_ms + i as i64,
            ..Default::default()
        }
    }))
}

/// The batch as the log stores it: base offset set, leader epoch 0.
pub fn as_stored(mut b: Vec<u8>, base_offset: u64) -> Vec<u8> {
    engine::batch::set_base_offset(&mut b, base_offset as i64);
    engine::batch::set_leader_epoch(&mut b, 0);
    b
}

/// Splits a read result into its batches, checking each one's CRC.
pub fn split_batches(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let size = engine::batch::declared_size(bytes).expect("batch prefix") as usize;
        let b = &bytes[..size];
        engine::batch::validate_stored(b).expect("stored batch is valid");
        out.push(b.to_vec());
        bytes = &bytes[size..];
    }
    out
}

/// Reads the whole log from `from` to the high watermark, batch by batch.
pub async fn read_all(log: &PartitionLog, from: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.high_watermark() {
        let bytes = log.read(next, 64 << 10).await.expect("read");
        assert!(
            !bytes.is_empty(),
            "read at {next} below the high watermark is empty"
        );
        for b in split_batches(&bytes) {
            let h = engine::batch::parse_header(&b).unwrap();
            next = h.last_offset() as u64 + 1;
            out.push(b);
        }
    }
    out
}
