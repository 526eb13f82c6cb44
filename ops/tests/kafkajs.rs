//! kafkajs 2 (a client of its own protocol implementation, not librdkafka) against the broker:
//! admin, idempotent produce, consumer group, committed offsets. The test installs kafkajs
//! with npm into `target/test-node` once.

mod support;

use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use support::*;

/// kafkajs major version the tests pin.
const KAFKAJS: &str = "kafkajs@2.2.4";

fn node_dir() -> PathBuf {
    let dir = target_dir().join("test-node");
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::File::create(target_dir().join("test-node.lock")).unwrap();
    // SAFETY: flock on a file we own; released when `lock` drops.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    if !dir.join("node_modules/kafkajs/package.json").exists() {
        let mut npm = Command::new("npm");
        npm.args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg(KAFKAJS);
        let out = run_with_timeout(npm, None, Duration::from_secs(300));
        assert!(
            out.status.success(),
            "npm install {KAFKAJS} failed (node and npm are needed: apt-get install nodejs npm): {}",
            out.stderr
        );
    }
    dir
}

#[test]
fn kafkajs_produces_consumes_in_a_group_and_commits() {
    let dir = node_dir();
    let broker = Broker::start(2);
    let mut node = Command::new("node");
    node.arg(clients_dir().join("kafkajs_smoke.js"))
        .args([&broker.bootstrap(), "kjs-topic", "kjs-group"])
        .env("NODE_PATH", dir.join("node_modules"))
        .env("KAFKAJS_NO_PARTITIONER_WARNING", "1");
    let out = run_ok(node, None, Duration::from_secs(120));
    let line = out.lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["consumed"], 300, "{out}");
    let committed: i64 = v["offsets"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["offset"].as_str().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(
        committed, 300,
        "the group committed every partition's end: {out}"
    );
}
