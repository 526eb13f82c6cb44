//! Writes the seed corpus of every fuzz target to `fuzz/corpus/<target>/` (run once; the
//! result is committed): `cargo run -p ringlog-fuzz --bin fuzz-seeds`.

use std::path::Path;

use meta::{Assignment, Command, MetaConfig, Metastore};

fn write_all(target: &str, inputs: &[Vec<u8>]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("corpus dir");
    for (i, data) in inputs.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:03}")), data).expect("write seed");
    }
    println!("{target}: {} seeds", inputs.len());
}

/// A real metastore's raft log and snapshot after a few dozen writes.
fn meta_files() -> (Vec<u8>, Vec<u8>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cfg = MetaConfig::single_node(dir.path());
    cfg.snapshot_every_logs = 10;
    cfg.logs_kept_after_snapshot = 3;
    let h = Metastore::start(cfg).expect("metastore");
    for i in 0..25 {
        let assignments = (0..2)
            .map(|c| Assignment {
                node_id: 1,
                core_index: c,
            })
            .collect();
        h.write_blocking(Command::create_topic(
            format!("seed{i}"),
            2,
            [("retention.ms".to_string(), "60000".to_string())]
                .into_iter()
                .collect(),
            assignments,
        ))
        .expect("create topic");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while h
        .status_blocking()
        .expect("status")
        .snapshot_index
        .is_none()
    {
        assert!(std::time::Instant::now() < deadline, "no snapshot");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    h.shutdown().expect("shutdown");
    let find = |name: &str| -> Vec<u8> {
        let mut stack = vec![dir.path().to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read dir").flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.file_name().is_some_and(|n| n == name) {
                    return std::fs::read(&p).expect("read meta file");
                }
            }
        }
        panic!("no {name} file in the metastore dir");
    };
    (find("log"), find("snapshot"))
}

fn main() {
    let requests = ringlog_fuzz::seeds::request_inputs();
    write_all("request_decode", &requests);
    write_all("request_dispatch", &requests);
    write_all("record_batch", &ringlog_fuzz::seeds::record_batch_inputs());
    write_all("segment_recovery", &ringlog_fuzz::seeds::segment_inputs());
    let (log, snapshot) = meta_files();
    // The whole log, and its first records alone (small inputs fuzz faster).
    let first = &log[..log.len().min(2048)];
    write_all("raft_log", &[log.clone(), first.to_vec()]);
    write_all("meta_snapshot", &[snapshot]);
}
