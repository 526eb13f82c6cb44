//! Replication (issue #18) on three `ringlog serve` nodes: partitions of replication factor 3
//! with `min.insync.replicas=2`. An idempotent acks=all producer keeps writing while the
//! test SIGKILLs the leader's node at random moments and restarts it; afterwards every
//! acknowledged record is readable exactly once at its acknowledged offset, and a consumer
//! that read all along never saw a record the log no longer holds (it reads below the high
//! watermark only). A follower that was down while thousands of records (several segments)
//! went in catches up, rejoins the ISR, and holds every record when it leads. A fan-out
//! cursor of a replicated parent resumes on the new leader where it stood; replicated fan-out
//! and delay children take the cursors' commits as acks=all produces. A follower of a
//! compacted topic copies the leader's cleaned log, offset gaps and all, keeps it through a
//! SIGKILL, and leads with the latest value of every key. Clients' leader
//! epochs (KIP-320): OffsetForLeaderEpoch, fencing of a stale or unknown
//! `current_leader_epoch`, diverging epochs, and the Java consumer validating its position
//! through a failover.
//!
//! `RINGLOG_REPLICATION_TRIALS` sets the number of kills (20; `scripts/replication-soak.sh`
//! runs 100); `RINGLOG_TEST_SEED` reproduces the kill moments.

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::cluster::*;
use support::compaction;
use support::*;

/// `ringlog ARGS...`: whether it succeeded, and what it printed.
fn ringlog(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(ringlog_bin())
        .args(args)
        .output()
        .expect("run ringlog");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Creates `topic` (one partition, replication factor 3) with `configs` (KEY=VALUE each).
fn create_replicated(node: &Broker, topic: &str, configs: &[&str]) {
    create_with_replication_factor(node, topic, 3, configs);
}

/// Creates `topic` (one partition, replication factor `rf`) with `configs`.
fn create_with_replication_factor(node: &Broker, topic: &str, rf: u32, configs: &[&str]) {
    let brokers = node.bootstrap();
    let rf = rf.to_string();
    let mut args = vec![
        "topic",
        "--brokers",
        &brokers,
        "create",
        topic,
        "--partitions",
        "1",
        "--replication-factor",
        &rf,
    ];
    for c in configs {
        args.extend(["--config", c]);
    }
    let (ok, out) = ringlog(&args);
    assert!(ok, "{out}");
}

/// (replica broker ids in replica order) of `topic`/`partition` as `node` answers.
fn replicas_of(node: &Broker, topic: &str, partition: i32) -> Vec<i32> {
    let m = metadata(node, topic);
    let p = m.topics[0]
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)
        .expect("the partition is listed");
    p.replica_nodes.iter().map(|b| b.0).collect()
}

/// (leader broker id, leader epoch, ISR broker ids) of `topic`/`partition` as `node` answers.
fn partition_state(node: &Broker, topic: &str, partition: i32) -> (i32, i32, Vec<i32>) {
    let m = metadata(node, topic);
    let p = m.topics[0]
        .partitions
        .iter()
        .find(|p| p.partition_index == partition)
        .expect("the partition is listed");
    let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
    isr.sort();
    (p.leader_id.0, p.leader_epoch, isr)
}

/// Polls `f` every 100 ms until it holds, for at most `timeout`.
fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<String>) {
    let deadline = Instant::now() + timeout;
    loop {
        let Some(last) = f() else { return };
        assert!(
            Instant::now() < deadline,
            "{what} within {timeout:?}: {last}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `topic`/`partition` has a leader and all three replicas in sync, as `node`
/// answers.
fn wait_fully_in_sync(node: &Broker, topic: &str, partition: i32, timeout: Duration) {
    wait_until("every replica back in sync", timeout, || {
        let s = partition_state(node, topic, partition);
        (s.0 < 0 || s.2 != vec![1, 2, 3]).then(|| format!("{s:?}"))
    });
}

/// `wait_fully_in_sync` for every partition of `topic`.
fn wait_topic_fully_in_sync(node: &Broker, topic: &str, timeout: Duration) {
    let partitions = metadata(node, topic).topics[0].partitions.len();
    for p in 0..partitions as i32 {
        wait_fully_in_sync(node, topic, p, timeout);
    }
}

/// Asserts that `topic` has partitions, each of three replicas, as `node` answers.
fn assert_three_replicas(node: &Broker, topic: &str) {
    let m = metadata(node, topic);
    let partitions = &m.topics[0].partitions;
    assert!(
        !partitions.is_empty() && partitions.iter().all(|p| p.replica_nodes.len() == 3),
        "three replicas of every partition of {topic}: {partitions:?}"
    );
}

#[test]
fn acks_all_records_survive_sigkills_of_the_leaders_node() {
    let trials: usize = std::env::var("RINGLOG_REPLICATION_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut rng = Rng::from_env_or_time("replication test");
    let mut nodes = cluster(3, 1);
    create_replicated(&nodes[0], "r", &["min.insync.replicas=2"]);
    wait_fully_in_sync(&nodes[0], "r", 0, Duration::from_secs(30));
    // `topic describe` shows the replicas, asked of any node: each partition's offsets come
    // from its leader (and a leader still taking over is waited for).
    for node in &nodes {
        let (ok, out) = ringlog(&[
            "topic",
            "--brokers",
            &node.bootstrap(),
            "--json",
            "describe",
            "r",
        ]);
        assert!(ok, "{out}");
        let d: serde_json::Value = serde_json::from_str(&out).expect("describe --json");
        assert_eq!(
            d["partitions"][0]["replicas"].as_array().unwrap().len(),
            3,
            "{d}"
        );
        assert_eq!(d["partitions"][0]["latest_offset"], 0, "{d}");
    }

    let dir = nodes[0].temp_dir().to_path_buf();
    let stop = dir.join("stop-watching");
    let seen_path = dir.join("seen.txt");
    let mut watch = python_cmd(
        "watch_log.py",
        &[&bootstrap(&nodes), "r", "1", stop.to_str().unwrap()],
    );
    watch
        .stdout(std::fs::File::create(&seen_path).unwrap())
        .stderr(std::fs::File::create(dir.join("watch.stderr")).unwrap())
        .stdin(Stdio::null());
    let mut watcher = ChildGuard(watch.spawn().expect("spawn watch_log.py"));

    let mut all_acked: Vec<String> = Vec::new();
    for trial in 0..trials {
        let mut producer = CrashProducer::start(
            &[
                &bootstrap(&nodes),
                "r",
                &format!("t{trial}"),
                "4",
                "idempotent",
            ],
            dir.join(format!("producer-{trial}.stderr")),
        );
        producer.wait_first_ack(Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(rng.range(0, 1500)));
        let live = nodes.iter().position(|n| n.is_running()).unwrap();
        let (leader, epoch, _) = partition_state(&nodes[live], "r", 0);
        assert!((1..=3).contains(&leader), "trial {trial}: leader {leader}");
        let victim = (leader - 1) as usize;
        nodes[victim].kill();
        let other = (victim + 1) % 3;
        wait_until("a new leader", Duration::from_secs(60), || {
            let s = partition_state(&nodes[other], "r", 0);
            (s.0 < 0 || s.0 == leader || s.1 <= epoch).then(|| format!("{s:?}"))
        });
        std::thread::sleep(Duration::from_millis(rng.range(0, 500)));
        nodes[victim].restart();
        let (done, acked) = producer.finish(Duration::from_secs(120));
        eprintln!("trial {trial}: killed node {leader} (epoch {epoch}); {done}");
        all_acked.extend(acked);
        wait_fully_in_sync(&nodes[other], "r", 0, Duration::from_secs(60));
    }
    std::fs::write(&stop, b"").unwrap();
    let _ = watcher.0.wait();
    let acks_path = dir.join("acked.txt");
    std::fs::write(&acks_path, all_acked.join("\n") + "\n").unwrap();
    let out = run_python(
        "verify_acked.py",
        &[
            &bootstrap(&nodes),
            "r",
            "1",
            acks_path.to_str().unwrap(),
            seen_path.to_str().unwrap(),
            "unique",
        ],
        &[],
        Duration::from_secs(180),
    );
    assert!(out.contains("\"ok\": true"), "{out}");
    let summary: serde_json::Value = serde_json::from_str(out.trim()).expect("a JSON summary");
    eprintln!("{summary}");
    assert!(
        summary["seen"].as_u64() > Some(0),
        "the consumer read along: {summary}"
    );
}

#[test]
fn a_follower_back_from_a_long_outage_catches_up_and_leads_with_every_record() {
    let mut nodes = cluster(3, 1);
    create_replicated(&nodes[0], "c", &["segment.bytes=65536"]);
    wait_fully_in_sync(&nodes[0], "c", 0, Duration::from_secs(30));
    let (leader, _, _) = partition_state(&nodes[0], "c", 0);
    // The replica placed after the leader's (placement goes round the nodes in order).
    let follower = (leader as usize % 3) + 1;
    let fi = follower - 1;
    nodes[fi].kill();
    let live = (fi + 1) % 3;
    wait_until(
        "the ISR to drop the follower",
        Duration::from_secs(60),
        || {
            let s = partition_state(&nodes[live], "c", 0);
            s.2.contains(&(follower as i32)).then(|| format!("{s:?}"))
        },
    );
    let values: Vec<String> = (0..3000)
        .map(|i| format!("record-{i:05}-{}", "x".repeat(60)))
        .collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    for chunk in refs.chunks(500) {
        kcat_write(&nodes[live], "c", 0, chunk);
    }
    nodes[fi].restart();
    wait_fully_in_sync(&nodes[live], "c", 0, Duration::from_secs(60));
    // The leader's node goes: the first live member of the ISR in replica order leads, the
    // follower that caught up (placement puts it right after the leader).
    let li = (leader - 1) as usize;
    nodes[li].kill();
    wait_until(
        "the caught-up follower to lead",
        Duration::from_secs(60),
        || {
            let s = partition_state(&nodes[fi], "c", 0);
            (s.0 != follower as i32).then(|| format!("{s:?}"))
        },
    );
    let got = kcat_read(&nodes[fi], "c", 0);
    assert_eq!(got.len(), values.len());
    assert!(got == values, "the new leader holds every record in order");
}

/// A compacted replicated topic: a follower back from an outage copies the leader's cleaned
/// log (most batches gone, only the latest record of each key left: offset gaps), keeps it
/// through a SIGKILL (recovery does not take a gap for damage), and once it leads serves the
/// latest record of every key at its original offset.
#[test]
fn a_follower_copies_a_compacted_leader_and_leads_with_the_latest_values() {
    const RECORDS: u64 = 20_000;
    const KEYS: u64 = 200;
    let cfg_dir = tempfile::tempdir().unwrap();
    let cfg = cfg_dir.path().join("ringlog.toml");
    std::fs::write(&cfg, "log-cleaner-backoff-ms = 100\n").unwrap();
    let cfg = cfg.to_str().unwrap().to_string();
    let (mut nodes, _) = cluster_with_args(3, 1, |_| vec!["--config".to_string(), cfg.clone()]);
    create_replicated(
        &nodes[0],
        "kv",
        &[
            "cleanup.policy=compact",
            "segment.bytes=16384",
            "segment.ms=1000",
            "min.cleanable.dirty.ratio=0.01",
            "min.insync.replicas=2",
        ],
    );
    wait_fully_in_sync(&nodes[0], "kv", 0, Duration::from_secs(30));
    let (leader, _, _) = partition_state(&nodes[0], "kv", 0);
    // The replica placed after the leader's: it leads once the leader's node goes.
    let follower = (leader as usize % 3) + 1;
    let (li, fi) = ((leader - 1) as usize, follower - 1);
    nodes[fi].kill();
    wait_until(
        "the ISR to drop the follower",
        Duration::from_secs(60),
        || {
            let s = partition_state(&nodes[li], "kv", 0);
            s.2.contains(&(follower as i32)).then(|| format!("{s:?}"))
        },
    );
    compaction::produce(&nodes[li], "kv", 0, RECORDS, KEYS, "none");
    // Past segment.ms, one more record rolls the segment holding the last of them, so all
    // are in closed segments the cleaner may take.
    std::thread::sleep(Duration::from_millis(1_200));
    compaction::produce_one(&nodes[li], "kv", "marker", "one");
    let mut want = compaction::latest(0, RECORDS, KEYS);
    want.insert(RECORDS, ("marker".into(), Some("one".into())));
    let seen_on = |node: &Broker, what: &str| {
        wait_until(what, Duration::from_secs(90), || {
            let seen = compaction::consume(node, "kv").2;
            (seen != want).then(|| format!("{} records, {} wanted", seen.len(), want.len()))
        });
    };
    // Tombstones stay (delete.retention.ms is a day): one record per key is left.
    seen_on(
        &nodes[li],
        "the leader's cleaner to leave the latest record per key",
    );

    nodes[fi].restart();
    wait_fully_in_sync(&nodes[li], "kv", 0, Duration::from_secs(60));
    // SIGKILL and restart: recovery keeps the whole copy, gaps and all.
    let opened = |n: &Broker| {
        n.stderr_text()
            .lines()
            .filter(|l| l.contains("partition kv/0 opened"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let before = opened(&nodes[fi]).len();
    nodes[fi].kill();
    nodes[fi].restart();
    wait_until(
        "the follower to reopen kv/0",
        Duration::from_secs(60),
        || (opened(&nodes[fi]).len() <= before).then(|| "not yet".to_string()),
    );
    let line = opened(&nodes[fi]).pop().unwrap();
    assert!(
        line.contains(&format!("next_offset={}", RECORDS + 1)),
        "recovery kept every copied batch: {line}"
    );
    wait_fully_in_sync(&nodes[li], "kv", 0, Duration::from_secs(60));

    nodes[li].kill();
    wait_until(
        "the caught-up follower to lead",
        Duration::from_secs(60),
        || {
            let s = partition_state(&nodes[fi], "kv", 0);
            (s.0 != follower as i32).then(|| format!("{s:?}"))
        },
    );
    seen_on(
        &nodes[fi],
        "the new leader to serve the latest record of every key at its offset",
    );
}

/// FindCoordinator's key types.
const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

/// The coordinator of `key` (a group or a transactional id, `key_type`) as `node` answers
/// FindCoordinator: (error code, broker id).
fn coordinator_of(node: &Broker, key: &str, key_type: i8) -> (i16, i32) {
    use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
    let req = FindCoordinatorRequest::default()
        .with_key(kafka_protocol::protocol::StrBytes::from_string(
            key.to_string(),
        ))
        .with_key_type(key_type);
    let r: FindCoordinatorResponse = call_node(node, 10, 3, &req);
    (r.error_code, r.node_id.0)
}

/// `compaction.py ACTION BOOTSTRAP ARGS...` (the group offsets helper): its output.
fn offsets_py(bootstrap: &str, args: &[&str]) -> String {
    let mut a = vec![args[0], bootstrap];
    a.extend_from_slice(&args[1..]);
    run_python("compaction.py", &a, &[], Duration::from_secs(120))
}

/// SIGKILLs the node of group `group`'s coordinator (broker `coordinator`) and waits for
/// another to coordinate it: (the killed node's index, a live node's index, the live nodes'
/// bootstrap).
fn kill_group_coordinator(
    nodes: &mut [Broker],
    group: &str,
    coordinator: i32,
) -> (usize, usize, String) {
    let ci = (coordinator - 1) as usize;
    nodes[ci].kill();
    let live = (ci + 1) % nodes.len();
    wait_until("a new coordinator", Duration::from_secs(60), || {
        let c = coordinator_of(&nodes[live], group, GROUP_KEY);
        (c.0 != 0 || c.1 == coordinator).then(|| format!("{c:?}"))
    });
    let live_bootstrap = nodes
        .iter()
        .filter(|n| n.is_running())
        .map(Broker::bootstrap)
        .collect::<Vec<_>>()
        .join(",");
    (ci, live, live_bootstrap)
}

/// The groups' coordinator fails over: `__consumer_offsets` has three replicas per partition
/// on three nodes (`offsets.topic.replication.factor` 3), and a commit is acknowledged once
/// every in-sync replica has it. After the SIGKILL of the coordinator's node every
/// acknowledged commit is there on the new coordinator, which takes commits of its own; the
/// restarted node follows it and brings nothing older back.
#[test]
fn a_groups_offsets_survive_the_sigkill_of_its_coordinators_node() {
    let mut nodes = cluster(3, 1);
    create_replicated(&nodes[0], "t", &["min.insync.replicas=2"]);
    wait_fully_in_sync(&nodes[0], "t", 0, Duration::from_secs(30));
    assert_three_replicas(&nodes[0], "__consumer_offsets");
    let py = offsets_py;
    let mut first = (0, 0);
    wait_until(
        "a coordinator for the group",
        Duration::from_secs(30),
        || {
            first = coordinator_of(&nodes[0], "g", GROUP_KEY);
            (first.0 != 0).then(|| format!("{first:?}"))
        },
    );
    let old = first.1;
    py(&bootstrap(&nodes), &["commit-many", "t", "g", "50"]);
    assert_eq!(
        py(&bootstrap(&nodes), &["committed", "t", "g"]).trim(),
        "50"
    );

    let (vi, live, live_bootstrap) = kill_group_coordinator(&mut nodes, "g", old);
    assert_eq!(
        py(&live_bootstrap, &["committed", "t", "g"]).trim(),
        "50",
        "every acknowledged commit is on the new coordinator"
    );
    py(&live_bootstrap, &["commit-many", "t", "g", "60"]);

    nodes[vi].restart();
    wait_topic_fully_in_sync(&nodes[live], "__consumer_offsets", Duration::from_secs(60));
    assert_eq!(
        py(&bootstrap(&nodes), &["committed", "t", "g"]).trim(),
        "60",
        "the newest commit, with the old coordinator back"
    );
}

/// InitProducerId for transactional id `id` at `node`: (error code, producer id, epoch).
fn init_producer_id(node: &Broker, id: &str) -> (i16, i64, i16) {
    use kafka_protocol::messages::{
        InitProducerIdRequest, InitProducerIdResponse, ProducerId, TransactionalId,
    };
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(
            kafka_protocol::protocol::StrBytes::from_string(id.to_string()),
        )))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let r: InitProducerIdResponse = call_node(node, 22, 4, &req);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// The coordinator of transactional id `id` once the live `nodes` name one other than
/// `not`, and its InitProducerId answer once it has loaded the id's state: (coordinator,
/// producer id, epoch).
fn init_at_coordinator(nodes: &[Broker], id: &str, not: i32) -> (i32, i64, i16) {
    let live = nodes.iter().position(Broker::is_running).unwrap();
    let mut at = (0, 0);
    wait_until("a transaction coordinator", Duration::from_secs(60), || {
        at = coordinator_of(&nodes[live], id, TRANSACTION_KEY);
        (at.0 != 0 || at.1 == not).then(|| format!("{at:?}"))
    });
    let mut answer = (0, 0, 0);
    wait_until("InitProducerId", Duration::from_secs(60), || {
        answer = init_producer_id(&nodes[(at.1 - 1) as usize], id);
        (answer.0 != 0).then(|| format!("{answer:?}"))
    });
    (at.1, answer.1, answer.2)
}

/// The transaction coordinator fails over: `__transaction_state` has three replicas per
/// partition on three nodes (`transaction.state.log.replication.factor` 3). A transactional
/// id's state written on one coordinator is on the next after the SIGKILL of its node:
/// InitProducerId answers the same producer id at the next epoch (a lost state would be a
/// new producer id at epoch 0), and again once the old node is back.
#[test]
fn a_transactional_ids_state_survives_the_sigkill_of_its_coordinators_node() {
    let mut nodes = cluster(3, 1);
    assert_three_replicas(&nodes[0], "__transaction_state");
    let (old, pid, epoch) = init_at_coordinator(&nodes, "tx", -1);
    let oi = (old - 1) as usize;
    nodes[oi].kill();
    let (new, pid2, epoch2) = init_at_coordinator(&nodes, "tx", old);
    assert_ne!(new, old);
    assert_eq!(
        (pid2, epoch2),
        (pid, epoch + 1),
        "the same producer id, fenced at the next epoch"
    );
    nodes[oi].restart();
    let ni = (new - 1) as usize;
    wait_topic_fully_in_sync(&nodes[ni], "__transaction_state", Duration::from_secs(60));
    let (_, pid3, epoch3) = init_at_coordinator(&nodes, "tx", -1);
    assert_eq!((pid3, epoch3), (pid, epoch + 2), "with the old node back");
}

/// `ringlog barrier ARGS --brokers` at `node`, retried while it fails (a coordinator still
/// loading, or just gone), for at most 60 s: its output.
fn barrier_cli(node: &Broker, args: &[&str]) -> String {
    let mut out = String::new();
    wait_until("the barrier command", Duration::from_secs(60), || {
        let brokers = node.bootstrap();
        let mut a = vec!["barrier"];
        a.extend_from_slice(args);
        a.extend(["--brokers", &brokers]);
        let (ok, text) = ringlog(&a);
        out = text;
        (!ok).then(|| out.clone())
    });
    out
}

/// A barrier group's coordinator fails over: `__barrier_state` has three replicas per
/// partition on three nodes. After the SIGKILL of the coordinator's node the new one lists
/// every published cut and numbers the next one after them (a lost state would start again
/// at epoch 1).
#[test]
fn a_barrier_groups_cuts_survive_the_sigkill_of_its_coordinators_node() {
    let mut nodes = cluster(3, 1);
    create_replicated(&nodes[0], "cut", &["min.insync.replicas=2"]);
    wait_fully_in_sync(&nodes[0], "cut", 0, Duration::from_secs(30));
    kcat_write(&nodes[0], "cut", 0, &["a", "b"]);
    barrier_cli(
        &nodes[0],
        &["define", "bg", "--topics", "cut", "--interval", "1h"],
    );
    for epoch in 1..=2 {
        let out = barrier_cli(&nodes[0], &["trigger", "bg"]);
        assert!(out.contains(&format!("epoch {epoch}: complete")), "{out}");
    }
    let described: serde_json::Value =
        serde_json::from_str(&barrier_cli(&nodes[0], &["describe", "bg", "--json"])).unwrap();
    let p = described[0]["coordinator_partition"]
        .as_i64()
        .unwrap_or_else(|| panic!("{described}")) as i32;
    let (old, _, isr) = partition_state(&nodes[0], "__barrier_state", p);
    assert_eq!(isr, vec![1, 2, 3], "three replicas in sync");
    let oi = (old - 1) as usize;
    nodes[oi].kill();
    let live = (oi + 1) % 3;
    wait_until("a new coordinator", Duration::from_secs(60), || {
        let s = partition_state(&nodes[live], "__barrier_state", p);
        (s.0 < 0 || s.0 == old).then(|| format!("{s:?}"))
    });
    let listed: serde_json::Value =
        serde_json::from_str(&barrier_cli(&nodes[live], &["list", "bg", "--json"])).unwrap();
    let epochs: Vec<i64> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "complete")
        .map(|c| c["epoch"].as_i64().unwrap())
        .collect();
    assert_eq!(epochs, vec![1, 2], "every published cut: {listed}");
    let out = barrier_cli(&nodes[live], &["trigger", "bg"]);
    assert!(out.contains("epoch 3: complete"), "{out}");
    nodes[oi].restart();
    wait_fully_in_sync(&nodes[live], "__barrier_state", p, Duration::from_secs(60));
}

/// A node restarted with fewer cores than it had still starts in a cluster whose internal
/// topics are replicated: it hands over what it led as it registers, a replica on a core it
/// lacks is not served in this run (the metastore does not move replicas), and another
/// replica leads that partition.
#[test]
fn a_node_restarted_with_fewer_cores_starts_and_another_replica_leads_what_it_cannot_serve() {
    let mut nodes = cluster(3, 2);
    wait_topic_fully_in_sync(&nodes[0], "__consumer_offsets", Duration::from_secs(60));
    // Partition i is placed on node i mod 3 + 1, core i / 3: node 3 leads 5 on core 1.
    assert_eq!(partition_state(&nodes[0], "__consumer_offsets", 5).0, 3);
    nodes[2].kill();
    nodes[2].set_cores(1);
    nodes[2].restart();
    wait_until(
        "another replica to lead partition 5",
        Duration::from_secs(60),
        || {
            let s = partition_state(&nodes[0], "__consumer_offsets", 5);
            (s.0 < 0 || s.0 == 3).then(|| format!("{s:?}"))
        },
    );
    nodes[2].assert_alive();
}

/// A network partition of the leader's node (the fault hook in the node RPC layer: its calls
/// to the others and theirs to it fail): its followers cannot fetch, so it cannot
/// acknowledge an acks=all record (NOT_ENOUGH_REPLICAS once its ISR shrinks below
/// `min.insync.replicas`, else a timeout), though it keeps its log. Healed, the followers catch
/// up, rejoin the ISR, and acks=all works again.
#[test]
fn the_minority_side_of_a_network_partition_cannot_acknowledge_acks_all() {
    let admins: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let (nodes, _) = cluster_with_args(3, 1, |i| {
        vec![
            "--enable-fault-injection".into(),
            "--metrics-listen".into(),
            admins[i as usize - 1].clone(),
            "--replica-lag-time-max-ms".into(),
            "2000".into(),
        ]
    });
    create_replicated(&nodes[0], "p", &["min.insync.replicas=2"]);
    wait_fully_in_sync(&nodes[0], "p", 0, Duration::from_secs(30));
    let (leader, _, _) = partition_state(&nodes[0], "p", 0);
    let li = (leader - 1) as usize;
    // `ringlog produce` (acks=all, partition 0): whether it was acknowledged, and its output.
    let produce = |value: &str| -> (bool, String) {
        use std::io::Write;
        let mut child = std::process::Command::new(ringlog_bin())
            .args([
                "produce",
                "--brokers",
                &nodes[li].bootstrap(),
                "--acks",
                "all",
            ])
            .args(["--partition", "0", "p"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run ringlog produce");
        writeln!(child.stdin.take().unwrap(), "{value}").unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let (ok, out) = produce("before");
    assert!(ok, "{out}");

    let cut = |op: &str| {
        for (i, admin) in admins.iter().enumerate() {
            for peer in 1..=3u64 {
                let isolated = peer as usize - 1 == li || i == li;
                if peer as usize - 1 != i && isolated {
                    let r = http_request(
                        admin,
                        "POST",
                        &format!("/v1/debug/node-rpc-fault?peer={peer}&op={op}"),
                    );
                    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
                }
            }
        }
    };
    cut("cut");
    // The followers cannot fetch: the leader drops them from the ISR.
    wait_until(
        "the ISR to shrink to the leader",
        Duration::from_secs(30),
        || {
            let s = partition_state(&nodes[li], "p", 0);
            (s.2 != vec![leader]).then(|| format!("{s:?}"))
        },
    );
    let (ok, during) = produce("during");
    assert!(
        !ok && during.contains("NOT_ENOUGH_REPLICAS"),
        "acks=all on the minority side: {during}"
    );
    cut("clear");
    wait_fully_in_sync(&nodes[li], "p", 0, Duration::from_secs(30));
    let (ok, out) = produce("after");
    assert!(ok, "{out}");
    let got = kcat_read(&nodes[li], "p", 0);
    assert_eq!(got, vec!["before".to_string(), "after".to_string()]);
}

/// The `next_offset` in the cursor file `fanout-<child>.offset` of `parent`'s partition 0
/// under `node`'s data directory (`None`: no such file yet).
fn cursor_next_offset(node: &Broker, parent: &str, child: &str) -> Option<u64> {
    let dir = find_partition_dir(node.data_dir(), parent)?;
    let bytes = std::fs::read(dir.join(format!("fanout-{child}.offset"))).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v["next_offset"].as_u64()
}

/// The directory `topics/<topic>/p00000` somewhere under `root`.
fn find_partition_dir(root: &std::path::Path, topic: &str) -> Option<std::path::PathBuf> {
    let candidate = root.join("topics").join(topic).join("p00000");
    if candidate.is_dir() {
        return Some(candidate);
    }
    std::fs::read_dir(root)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .find_map(|e| find_partition_dir(&e.path(), topic))
}

/// A fan-out cursor follows its parent's leader: the followers keep copies of the leader's
/// cursor file, so when the leader's node is SIGKILLed the cursor resumes on the new leader
/// where it stood: the child (on a node that stays up) gets every parent record once.
#[test]
fn a_fanout_cursor_resumes_on_the_new_leader_where_it_stood() {
    let mut nodes = cluster(3, 1);
    create_topic(&nodes[0], "fk", 1, &[]);
    let child_node = leaders(&nodes[0], "fk")[&0];
    // A replicated parent whose leader is not on the child's node (placement goes round the
    // nodes, so the next topic's leader is on another node).
    let mut parent = String::new();
    for i in 0..3 {
        let name = format!("fp{i}");
        create_replicated(&nodes[0], &name, &[]);
        wait_fully_in_sync(&nodes[0], &name, 0, Duration::from_secs(30));
        if partition_state(&nodes[0], &name, 0).0 != child_node {
            parent = name;
            break;
        }
    }
    assert!(!parent.is_empty(), "a parent led off the child's node");
    let mut attach = std::process::Command::new(ringlog_bin());
    attach.args([
        "fanout",
        "attach",
        &parent,
        "fk",
        "--brokers",
        &nodes[0].bootstrap(),
    ]);
    run_ok(attach, None, Duration::from_secs(60));

    let (leader, epoch, _) = partition_state(&nodes[0], &parent, 0);
    let li = (leader - 1) as usize;
    let first: Vec<String> = (0..200).map(|i| format!("a-{i:04}")).collect();
    let refs: Vec<&str> = first.iter().map(String::as_str).collect();
    kcat_write(&nodes[li], &parent, 0, &refs);
    let child_at = (child_node - 1) as usize;
    wait_until(
        "the child to get the first records",
        Duration::from_secs(60),
        || {
            let n = kcat_read(&nodes[child_at], "fk", 0).len();
            (n != first.len()).then(|| format!("{n} of {}", first.len()))
        },
    );
    // Both followers hold the leader's position (the copy lags by at most the copy interval).
    for (i, node) in nodes.iter().enumerate() {
        if i == li {
            continue;
        }
        wait_until(
            "a follower's copy of the cursor file",
            Duration::from_secs(30),
            || {
                let at = cursor_next_offset(node, &parent, "fk");
                (at != Some(first.len() as u64)).then(|| format!("node {}: {at:?}", i + 1))
            },
        );
    }

    nodes[li].kill();
    let other = (li + 1) % 3;
    wait_until("a new leader", Duration::from_secs(60), || {
        let s = partition_state(&nodes[other], &parent, 0);
        (s.0 < 0 || s.0 == leader || s.1 <= epoch).then(|| format!("{s:?}"))
    });
    let (new_leader, _, _) = partition_state(&nodes[other], &parent, 0);
    let second: Vec<String> = (0..100).map(|i| format!("b-{i:04}")).collect();
    let refs: Vec<&str> = second.iter().map(String::as_str).collect();
    kcat_write(&nodes[(new_leader - 1) as usize], &parent, 0, &refs);
    let want: Vec<String> = first.iter().chain(&second).cloned().collect();
    wait_until(
        "the child to get the later records",
        Duration::from_secs(60),
        || {
            let got = kcat_read(&nodes[child_at], "fk", 0);
            (got.len() < want.len()).then(|| format!("{} of {}", got.len(), want.len()))
        },
    );
    // Nothing repeated: the new leader's cursor started at the copied position, not at the
    // attach offset.
    let got = kcat_read(&nodes[child_at], "fk", 0);
    assert_eq!(got, want, "every parent record once, in order");
    nodes[li].restart();
    wait_fully_in_sync(&nodes[other], &parent, 0, Duration::from_secs(60));
}

/// `values` with every repeat after the first left out (a cursor's retries may repeat
/// records in a child; their first occurrences keep the parent's order).
fn first_occurrences(values: &[String]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    values
        .iter()
        .filter(|v| seen.insert(v.as_str()))
        .cloned()
        .collect()
}

/// Replicated fan-out and delay children are written as acks=all produces. With
/// `min.insync.replicas=3` and a follower's node down the cursors' commits are refused
/// before anything is appended, so the children stay as they were and the cursors do not
/// advance; once the follower is back they catch up with every record once. When a child's
/// leader's node is SIGKILLed right after a burst, the cursors commit to the new leader and
/// the children end with every parent record, in order, none lost.
#[test]
fn replicated_fanout_and_delay_children_take_commits_as_acks_all_produces() {
    let mut nodes = cluster_with_args(3, 1, |_| {
        vec!["--replica-lag-time-max-ms".into(), "2000".into()]
    })
    .0;
    create_replicated(&nodes[0], "rp", &[]);
    create_replicated(
        &nodes[0],
        "rc",
        &["fanout.parent=rp", "min.insync.replicas=3"],
    );
    create_replicated(
        &nodes[0],
        "rd",
        &[
            "fanout.parent=rp",
            "fanout.delay.ms=300",
            "min.insync.replicas=3",
        ],
    );
    for t in ["rp", "rc", "rd"] {
        wait_fully_in_sync(&nodes[0], t, 0, Duration::from_secs(30));
    }
    let children = ["rc", "rd"];
    // Every child holds `want`, read from a live node (below the high watermark).
    let wait_children = |nodes: &[Broker], at: usize, want: &[String], exact: bool| {
        for child in children {
            wait_until(
                &format!("{child} to hold every parent record"),
                Duration::from_secs(60),
                || {
                    let got = kcat_read(&nodes[at], child, 0);
                    let ok = if exact {
                        got == want
                    } else {
                        first_occurrences(&got) == want
                    };
                    (!ok).then(|| format!("{} records: {:?}", got.len(), got.last()))
                },
            );
        }
    };
    let write = |nodes: &[Broker], at: usize, prefix: &str, n: usize| -> Vec<String> {
        let values: Vec<String> = (0..n).map(|i| format!("{prefix}-{i:04}")).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        kcat_write(&nodes[at], "rp", 0, &refs);
        values
    };
    let mut want = write(&nodes, 0, "a", 200);
    wait_children(&nodes, 0, &want, true);

    // A follower of the plain child down (on a node leading neither it nor the parent):
    // commits are refused before their append while the ISR is short.
    let child_leader = partition_state(&nodes[0], "rc", 0).0;
    let parent_leader = partition_state(&nodes[0], "rp", 0).0;
    let down = (1..=3)
        .find(|n| *n != child_leader && *n != parent_leader)
        .expect("three nodes");
    let di = (down - 1) as usize;
    let up = (di + 1) % 3;
    nodes[di].kill();
    for child in children {
        wait_until(
            &format!("{child}'s ISR to shrink"),
            Duration::from_secs(30),
            || {
                let s = partition_state(&nodes[up], child, 0);
                (s.2.len() != 2).then(|| format!("{s:?}"))
            },
        );
    }
    let pli = (parent_leader - 1) as usize;
    let stalled_at = Some(want.len() as u64);
    wait_until(
        "the cursor file to cover the first records",
        Duration::from_secs(30),
        || {
            let at = cursor_next_offset(&nodes[pli], "rp", "rc");
            (at != stalled_at).then(|| format!("{at:?}"))
        },
    );
    let second = write(&nodes, up, "b", 50);
    std::thread::sleep(Duration::from_secs(3));
    for child in children {
        assert_eq!(
            kcat_read(&nodes[up], child, 0),
            want,
            "{child} takes no commit while its ISR is below min.insync.replicas"
        );
    }
    assert_eq!(
        cursor_next_offset(&nodes[pli], "rp", "rc"),
        stalled_at,
        "the cursor does not advance past a refused commit"
    );
    nodes[di].restart();
    for child in children {
        wait_fully_in_sync(&nodes[up], child, 0, Duration::from_secs(60));
    }
    want.extend(second);
    // Refused commits wrote nothing: every record once.
    wait_children(&nodes, up, &want, true);

    // The plain child's leader's node SIGKILLed right after a burst: its in-flight commits
    // either reached every in-sync replica or are retried at the new leader.
    let (child_leader, epoch, _) = partition_state(&nodes[up], "rc", 0);
    let ki = (child_leader - 1) as usize;
    let alive = (ki + 1) % 3;
    want.extend(write(&nodes, alive, "c", 300));
    nodes[ki].kill();
    wait_until("a new leader of the child", Duration::from_secs(60), || {
        let s = partition_state(&nodes[alive], "rc", 0);
        (s.0 < 0 || s.0 == child_leader || s.1 <= epoch).then(|| format!("{s:?}"))
    });
    nodes[ki].restart();
    for t in ["rp", "rc", "rd"] {
        wait_fully_in_sync(&nodes[alive], t, 0, Duration::from_secs(60));
    }
    wait_children(&nodes, alive, &want, false);
}

/// OffsetForLeaderEpoch (API 23) of `leader_epoch` on `topic`/0 at `node`, with the client's
/// `current_leader_epoch`: (error code, epoch, end offset).
fn epoch_end(node: &Broker, topic: &str, current: i32, leader_epoch: i32) -> (i16, i32, i64) {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{
        OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
    };
    let req = OffsetForLeaderEpochRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(TopicName(topic.to_string().into()))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(current)
                .with_leader_epoch(leader_epoch)])]);
    let r: OffsetForLeaderEpochResponse = call_node(node, 23, 4, &req);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

/// A Fetch v12 of `topic`/0 at `offset` with the client's epochs: (error code, diverging
/// epoch and its end offset, bytes of records).
fn fetch_with_epochs(
    node: &Broker,
    topic: &str,
    offset: i64,
    current: i32,
    last_fetched: i32,
) -> (i16, (i32, i64), usize) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
    let req = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(topic.to_string().into()))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_current_leader_epoch(current)
                .with_last_fetched_epoch(last_fetched)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = call_node(node, 1, 12, &req);
    let p = &r.responses[0].partitions[0];
    (
        p.error_code,
        (p.diverging_epoch.epoch, p.diverging_epoch.end_offset),
        p.records.as_ref().map_or(0, |b| b.len()),
    )
}

/// What a leader hint (KIP-951) names: (error code, (current leader id, its epoch),
/// [(node endpoint id, port)]).
type LeaderHint = (i16, (i32, i32), Vec<(i32, i32)>);

/// Produce v12 of one record to `topic`/0 at `node`: its leader hint.
fn produce_hint(node: &Broker, topic: &str) -> LeaderHint {
    let batch = bytes::Bytes::from(engine::batch_encode::encode_uncompressed(std::iter::once(
        engine::batch_encode::NewRecord {
            value: Some(bytes::Bytes::from_static(b"hint")),
            timestamp_ms: 1,
            ..Default::default()
        },
    )));
    let req = support::wire::produce_req(topic, 0, batch);
    let r: kafka_protocol::messages::ProduceResponse = call_node(node, 0, 12, &req);
    let p = &r.responses[0].partition_responses[0];
    (
        p.error_code,
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
        r.node_endpoints
            .iter()
            .map(|e| (e.node_id.0, e.port))
            .collect(),
    )
}

/// Fetch v16 (topic by id) of `topic`/0 at `node`: its leader hint.
fn fetch_hint(node: &Broker, topic: &str) -> LeaderHint {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse};
    let topic_id = metadata(node, topic).topics[0].topic_id;
    let req = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_last_fetched_epoch(-1)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = call_node(node, 1, 16, &req);
    let p = &r.responses[0].partitions[0];
    (
        p.error_code,
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
        r.node_endpoints
            .iter()
            .map(|e| (e.node_id.0, e.port))
            .collect(),
    )
}

/// ListOffsets v7 of `topic`/0 at `timestamp` (-1 latest, -2 earliest) with the client's
/// `current_leader_epoch`: (error code, offset, leader epoch).
fn list_offset(node: &Broker, topic: &str, timestamp: i64, current: i32) -> (i16, i64, i32) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};
    let req = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(topic.to_string().into()))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(current)
                .with_timestamp(timestamp)])]);
    let r: ListOffsetsResponse = call_node(node, 2, 7, &req);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset, p.leader_epoch)
}

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// KIP-320 for clients: OffsetForLeaderEpoch answers where each epoch ends on the leader (a
/// consumer checks its position after a failover with it), and Fetch, ListOffsets and
/// OffsetForLeaderEpoch fence a stale `current_leader_epoch` (FENCED_LEADER_EPOCH) and a
/// newer one (UNKNOWN_LEADER_EPOCH); a fetch whose last epoch ended earlier on the new leader
/// answers a diverging epoch. A partition not replicated is epoch 0 throughout.
#[test]
fn leader_epochs_answer_where_each_ends_and_fence_stale_clients() {
    let mut nodes = cluster(3, 1);
    create_replicated(&nodes[0], "e", &[]);
    wait_fully_in_sync(&nodes[0], "e", 0, Duration::from_secs(30));
    let (leader, e0, _) = partition_state(&nodes[0], "e", 0);
    let li = (leader - 1) as usize;
    let first: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    kcat_write(
        &nodes[li],
        "e",
        0,
        &first.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(epoch_end(&nodes[li], "e", e0, e0), (0, e0, 10));
    let follower = (li + 1) % 3;
    assert_eq!(
        epoch_end(&nodes[follower], "e", e0, e0).0,
        NOT_LEADER_OR_FOLLOWER,
        "a follower does not answer for the leader"
    );
    assert_eq!(
        list_offset(&nodes[follower], "e", -1, -1).0,
        NOT_LEADER_OR_FOLLOWER
    );
    // KIP-951: the follower's refusal names the leader and where to reach it.
    let leader_port: i32 = nodes[li]
        .bootstrap()
        .rsplit_once(':')
        .unwrap()
        .1
        .parse()
        .unwrap();
    let want = (
        NOT_LEADER_OR_FOLLOWER,
        (leader, e0),
        vec![(leader, leader_port)],
    );
    assert_eq!(produce_hint(&nodes[follower], "e"), want, "Produce v12");
    assert_eq!(fetch_hint(&nodes[follower], "e"), want, "Fetch v16");
    wait_fully_in_sync(&nodes[li], "e", 0, Duration::from_secs(30));

    nodes[li].kill();
    wait_until("a new leader", Duration::from_secs(60), || {
        let s = partition_state(&nodes[follower], "e", 0);
        (s.0 < 0 || s.0 == leader || s.1 <= e0).then(|| format!("{s:?}"))
    });
    let (new_leader, e1, _) = partition_state(&nodes[follower], "e", 0);
    let ni = (new_leader - 1) as usize;
    let second: Vec<String> = (0..5).map(|i| format!("b{i}")).collect();
    kcat_write(
        &nodes[ni],
        "e",
        0,
        &second.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    // Where each epoch ends on the new leader.
    assert_eq!(epoch_end(&nodes[ni], "e", e1, e0), (0, e0, 10));
    assert_eq!(epoch_end(&nodes[ni], "e", e1, e1), (0, e1, 15));
    assert_eq!(epoch_end(&nodes[ni], "e", -1, e1 + 7), (0, e1, 15));
    assert_eq!(epoch_end(&nodes[ni], "e", e1, -1), (0, -1, -1));
    // Stale and unknown current epochs are fenced, on every API that takes one.
    assert_eq!(epoch_end(&nodes[ni], "e", e0, e0).0, FENCED_LEADER_EPOCH);
    assert_eq!(
        epoch_end(&nodes[ni], "e", e1 + 1, e0).0,
        UNKNOWN_LEADER_EPOCH
    );
    assert_eq!(
        fetch_with_epochs(&nodes[ni], "e", 0, e0, -1).0,
        FENCED_LEADER_EPOCH
    );
    assert_eq!(
        fetch_with_epochs(&nodes[ni], "e", 0, e1 + 1, -1).0,
        UNKNOWN_LEADER_EPOCH
    );
    assert_eq!(list_offset(&nodes[ni], "e", -1, e0).0, FENCED_LEADER_EPOCH);
    // The current epoch reads; ListOffsets names the epoch of the offset it answers.
    let (code, _, bytes) = fetch_with_epochs(&nodes[ni], "e", 0, e1, -1);
    assert_eq!(code, 0);
    assert!(bytes > 0, "records come back at the current epoch");
    assert_eq!(list_offset(&nodes[ni], "e", -1, e1), (0, 15, e1));
    assert_eq!(list_offset(&nodes[ni], "e", -2, e1), (0, 0, e0));
    // A client that read epoch e0 up to offset 12 (records the new leader never had) is
    // told where e0 ends here, and gets no records.
    assert_eq!(
        fetch_with_epochs(&nodes[ni], "e", 12, e1, e0),
        (0, (e0, 10), 0),
        "a diverging epoch"
    );
    let (code, diverging, bytes) = fetch_with_epochs(&nodes[ni], "e", 10, e1, e0);
    assert_eq!(
        (code, diverging.0),
        (0, -1),
        "no divergence at the epoch's end"
    );
    assert!(bytes > 0);

    // A partition not replicated: epoch 0 from its first record to its end.
    create_topic(&nodes[ni], "plain", 1, &[]);
    let plain_leader = leaders(&nodes[ni], "plain")[&0];
    let pn = &nodes[(plain_leader - 1) as usize];
    assert!(pn.is_running(), "placement skips the fenced node");
    kcat_write(pn, "plain", 0, &["x", "y", "z"]);
    assert_eq!(epoch_end(pn, "plain", 0, 0), (0, 0, 3));
    assert_eq!(epoch_end(pn, "plain", -1, 4), (0, 0, 3));
    assert_eq!(list_offset(pn, "plain", -2, 0), (0, 0, 0));
    assert_eq!(
        fetch_with_epochs(pn, "plain", 0, 1, -1).0,
        UNKNOWN_LEADER_EPOCH
    );
    nodes[li].restart();
    wait_fully_in_sync(&nodes[ni], "e", 0, Duration::from_secs(60));
}

/// The Java consumer (kafka-clients 4.3) reads on through a failover of its partition's
/// leader: it validates its position against the new leader (OffsetForLeaderEpoch, KIP-320)
/// and goes on where it stood, never resetting (`auto.offset.reset=none`), every record once
/// and in order.
#[test]
fn a_java_consumer_reads_on_through_a_leader_failover() {
    let mut nodes = cluster(3, 1);
    create_replicated(&nodes[0], "j", &[]);
    wait_fully_in_sync(&nodes[0], "j", 0, Duration::from_secs(30));
    let (leader, e0, _) = partition_state(&nodes[0], "j", 0);
    let li = (leader - 1) as usize;
    let first: Vec<String> = (0..20).map(|i| format!("a{i:02}")).collect();
    let second: Vec<String> = (0..10).map(|i| format!("b{i:02}")).collect();
    kcat_write(
        &nodes[li],
        "j",
        0,
        &first.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let dir = nodes[0].temp_dir().to_path_buf();
    let out_path = dir.join("java-consumer.out");
    let err_path = dir.join("java-consumer.err");
    let check = support::java::JavaCheck::compile("FailoverConsumeCheck");
    let want = (first.len() + second.len()).to_string();
    let mut cmd = check.command(&[&bootstrap(&nodes), "j", &want]);
    cmd.stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .stdin(Stdio::null());
    let mut consumer = ChildGuard(cmd.spawn().expect("spawn the Java consumer"));
    let read_line = format!("READ {}", first.len());
    wait_until(
        "the Java consumer to read the first records",
        Duration::from_secs(120),
        || {
            let out = std::fs::read_to_string(&out_path).unwrap_or_default();
            (!out.lines().any(|l| l == read_line)).then(|| {
                let err = std::fs::read_to_string(&err_path).unwrap_or_default();
                format!("{}\n{}", tail(&out, 500), tail(&err, 2000))
            })
        },
    );
    nodes[li].kill();
    let other = (li + 1) % 3;
    wait_until("a new leader", Duration::from_secs(60), || {
        let s = partition_state(&nodes[other], "j", 0);
        (s.0 < 0 || s.0 == leader || s.1 <= e0).then(|| format!("{s:?}"))
    });
    let (new_leader, _, _) = partition_state(&nodes[other], "j", 0);
    kcat_write(
        &nodes[(new_leader - 1) as usize],
        "j",
        0,
        &second.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let status = wait_child(&mut consumer.0, Duration::from_secs(150));
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "the Java consumer: {status:?}\n{}\n{}",
        tail(&out, 2000),
        tail(&err, 4000)
    );
    assert!(out.contains(&format!("OK records={want}")), "{out}");
    let values: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("V "))
        .map(|l| l.split_once(' ').map_or("", |(_, v)| v).to_string())
        .collect();
    let expected: Vec<String> = first.iter().chain(&second).cloned().collect();
    assert_eq!(values, expected, "every record once, in order");
    nodes[li].restart();
}

/// Produces `values` to `topic`/0 through `bootstrap` with an idempotent acks=all kcat (a
/// retry across a leader change is not stored twice).
fn kcat_write_idempotent(bootstrap: &str, topic: &str, values: &[String]) {
    let mut c = std::process::Command::new(kcat());
    c.args(["-b", bootstrap, "-P", "-t", topic, "-p", "0"])
        .args([
            "-X",
            "enable.idempotence=true",
            "-X",
            "message.timeout.ms=60000",
        ]);
    let input: String = values.iter().map(|v| format!("{v}\n")).collect();
    run_ok(c, Some(input.as_bytes()), Duration::from_secs(90));
}

/// A reassignment (KIP-455) through the CLI while a producer writes: the partition's RF-2
/// replicas move off the leader's node to the third node, which copies the log (several
/// segments) and joins the ISR; the leader being removed hands over; the removed node deletes
/// its copy; every record is on the new replicas once, in order. A preferred election then
/// moves leadership to the target's first replica. A reassignment to a node that is down
/// stays under way (listed, adding that node) until it is cancelled, and the cancel goes back
/// to the replicas before it. Refusals: a replication factor change, an unknown broker.
#[test]
fn a_reassignment_moves_replicas_while_a_producer_writes_and_the_removed_copy_goes() {
    let mut nodes = cluster(3, 1);
    let boot = bootstrap(&nodes);
    create_with_replication_factor(&nodes[0], "ra", 2, &["segment.bytes=65536"]);
    wait_until("both replicas in sync", Duration::from_secs(30), || {
        let s = partition_state(&nodes[0], "ra", 0);
        (s.0 < 0 || s.2.len() != 2).then(|| format!("{s:?}"))
    });
    let (leader, epoch_before, _) = partition_state(&nodes[0], "ra", 0);
    let original = replicas_of(&nodes[0], "ra", 0);
    let follower = *original.iter().find(|b| **b != leader).unwrap();
    let spare = (1..=3).find(|b| !original.contains(b)).unwrap();
    let admin = nodes[(spare - 1) as usize].bootstrap();

    let before: Vec<String> = (0..2000)
        .map(|i| format!("before-{i:05}-{}", "x".repeat(60)))
        .collect();
    kcat_write_idempotent(&boot, "ra", &before);

    // Refusals first: they change nothing.
    let (ok, out) = ringlog(&[
        "partition",
        "reassign",
        "ra/0",
        "--replicas",
        "1,2,3",
        "--disallow-replication-factor-change",
        "--brokers",
        &admin,
    ]);
    assert!(
        !ok && out.contains("INVALID_REPLICATION_FACTOR")
            && out.contains("replication factor is 2"),
        "{out}"
    );
    let (ok, out) = ringlog(&[
        "partition",
        "reassign",
        "ra/0",
        "--replicas",
        "9,2",
        "--brokers",
        &admin,
    ]);
    assert!(
        !ok && out.contains("broker 9 is not a broker of this cluster"),
        "{out}"
    );
    let (ok, out) = ringlog(&[
        "partition",
        "reassign",
        "ra/0",
        "--cancel",
        "--brokers",
        &admin,
    ]);
    assert!(!ok && out.contains("NO_REASSIGNMENT_IN_PROGRESS"), "{out}");
    assert_eq!(replicas_of(&nodes[0], "ra", 0), original);

    // The move, while a producer writes.
    let during: Vec<String> = (0..2000)
        .map(|i| format!("during-{i:05}-{}", "y".repeat(60)))
        .collect();
    let writer = {
        let (boot, during) = (boot.clone(), during.clone());
        std::thread::spawn(move || {
            for chunk in during.chunks(100) {
                kcat_write_idempotent(&boot, "ra", chunk);
            }
        })
    };
    let target = format!("{spare},{follower}");
    let (ok, out) = ringlog(&[
        "partition",
        "reassign",
        "ra/0",
        "--replicas",
        &target,
        "--wait",
        "--wait-ms",
        "120000",
        "--brokers",
        &admin,
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("reassigned ra/0"), "{out}");
    writer.join().expect("the producer thread");

    let target_nodes = sorted_pair(spare, follower);
    let mut now = replicas_of(&nodes[0], "ra", 0);
    now.sort();
    assert_eq!(now, target_nodes, "the replicas are the target");
    let (new_leader, epoch_after, isr) = partition_state(&nodes[0], "ra", 0);
    assert!(
        new_leader == spare || new_leader == follower,
        "a target replica leads: {new_leader}"
    );
    assert!(
        epoch_after > epoch_before,
        "the removed leader handed over at a new epoch"
    );
    assert_eq!(isr, target_nodes);
    let (ok, out) = ringlog(&["partition", "reassignments", "--json", "--brokers", &admin]);
    assert!(ok && out.trim() == "[]", "none under way: {out}");
    // The removed node deletes its copy.
    let removed = &nodes[(leader - 1) as usize];
    wait_until(
        "the removed replica's copy to go",
        Duration::from_secs(30),
        || {
            find_partition_dir(removed.data_dir(), "ra")
                .map(|d| format!("{} is still there", d.display()))
        },
    );
    assert!(find_partition_dir(nodes[(spare - 1) as usize].data_dir(), "ra").is_some());

    // A preferred election moves leadership to the target's first replica.
    let (ok, out) = ringlog(&["partition", "elect", "ra/0", "--brokers", &admin]);
    assert!(ok, "{out}");
    wait_until(
        "the preferred replica to lead",
        Duration::from_secs(30),
        || {
            let s = partition_state(&nodes[0], "ra", 0);
            (s.0 != spare).then(|| format!("{s:?}"))
        },
    );
    let (ok, out) = ringlog(&["partition", "elect", "ra/0", "--brokers", &admin]);
    assert!(ok && out.contains("ELECTION_NOT_NEEDED"), "{out}");

    // Every record, once, in order, from the new preferred leader.
    let got = kcat_read(&nodes[(spare - 1) as usize], "ra", 0);
    let want: Vec<String> = before.iter().chain(&during).cloned().collect();
    assert_eq!(got.len(), want.len(), "every record once");
    assert!(got == want, "every record in order");

    // A reassignment to a node that is down stays under way until cancelled.
    let down = leader;
    nodes[(down - 1) as usize].kill();
    wait_until("the node to be fenced", Duration::from_secs(60), || {
        let m = metadata(&nodes[(spare - 1) as usize], "ra");
        m.brokers
            .iter()
            .any(|b| b.node_id.0 == down)
            .then(|| "still listed".to_string())
    });
    let target = format!("{spare},{down}");
    let (ok, out) = ringlog(&[
        "partition",
        "reassign",
        "ra/0",
        "--replicas",
        &target,
        "--brokers",
        &admin,
    ]);
    assert!(ok, "{out}");
    let (ok, out) = ringlog(&["partition", "reassignments", "--json", "--brokers", &admin]);
    assert!(ok, "{out}");
    let listed: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(listed[0]["topic"], "ra", "{out}");
    assert_eq!(listed[0]["adding"], serde_json::json!([down]), "{out}");
    assert_eq!(
        listed[0]["removing"],
        serde_json::json!([follower]),
        "{out}"
    );
    let (ok, out) = ringlog(&[
        "partition",
        "reassign",
        "ra/0",
        "--cancel",
        "--brokers",
        &admin,
    ]);
    assert!(ok, "{out}");
    let (ok, out) = ringlog(&["partition", "reassignments", "--json", "--brokers", &admin]);
    assert!(ok && out.trim() == "[]", "the cancel ended it: {out}");
    let mut now = replicas_of(&nodes[(spare - 1) as usize], "ra", 0);
    now.sort();
    assert_eq!(now, target_nodes, "back to the replicas before");
}

fn sorted_pair(a: i32, b: i32) -> Vec<i32> {
    let mut v = vec![a, b];
    v.sort();
    v
}

/// The Java Admin client (kafka-clients 4.3) reassigns a replicated partition
/// (alterPartitionReassignments, listPartitionReassignments until done, describeTopics) and
/// elects its preferred leader (electLeaders); a replication factor change is refused with
/// InvalidReplicationFactorException; records written before the move are all on the new
/// replicas.
#[test]
fn the_java_admin_reassigns_a_partition_and_elects_its_preferred_leader() {
    let nodes = cluster(3, 1);
    create_with_replication_factor(&nodes[0], "jr", 2, &[]);
    wait_until("both replicas in sync", Duration::from_secs(30), || {
        let s = partition_state(&nodes[0], "jr", 0);
        (s.0 < 0 || s.2.len() != 2).then(|| format!("{s:?}"))
    });
    let (leader, _, _) = partition_state(&nodes[0], "jr", 0);
    let original = replicas_of(&nodes[0], "jr", 0);
    let spare = (1..=3).find(|b| !original.contains(b)).unwrap();
    let kept = *original.iter().find(|b| **b != leader).unwrap();
    let values: Vec<String> = (0..500).map(|i| format!("j{i:04}")).collect();
    kcat_write_idempotent(&bootstrap(&nodes), "jr", &values);
    let target = format!("{spare},{kept}");
    let ok = support::java::JavaCheck::compile("ReassignCheck").run(&[
        &bootstrap(&nodes),
        "jr",
        &target,
    ]);
    assert_eq!(ok, format!("OK leader={spare} replicas={target}"));
    assert_eq!(kcat_read(&nodes[(spare - 1) as usize], "jr", 0), values);
}

/// Auto leader rebalance (`auto.leader.rebalance.enable`, on by default): after its node's
/// SIGKILL and restart the preferred replica catches up, rejoins the ISR, and is handed
/// leadership back at a new epoch, with no election asked for; records written meanwhile are
/// all there.
#[test]
fn leadership_returns_to_the_preferred_replica_once_it_is_back_in_sync() {
    let (mut nodes, _) = cluster_with_args(3, 1, |_| {
        vec!["--leader-imbalance-check-interval-ms".into(), "1000".into()]
    });
    create_replicated(&nodes[0], "lb", &[]);
    wait_fully_in_sync(&nodes[0], "lb", 0, Duration::from_secs(30));
    let (preferred, e0, _) = partition_state(&nodes[0], "lb", 0);
    assert_eq!(replicas_of(&nodes[0], "lb", 0)[0], preferred);
    let pi = (preferred - 1) as usize;
    let other = (pi + 1) % 3;
    nodes[pi].kill();
    wait_until("another replica to lead", Duration::from_secs(60), || {
        let s = partition_state(&nodes[other], "lb", 0);
        (s.0 < 0 || s.0 == preferred).then(|| format!("{s:?}"))
    });
    let values: Vec<String> = (0..200).map(|i| format!("lb{i:03}")).collect();
    kcat_write_idempotent(&nodes[other].bootstrap(), "lb", &values);
    nodes[pi].restart();
    wait_until(
        "the preferred replica to lead again",
        Duration::from_secs(60),
        || {
            let s = partition_state(&nodes[other], "lb", 0);
            (s.0 != preferred).then(|| format!("{s:?}"))
        },
    );
    let (_, e2, isr) = partition_state(&nodes[other], "lb", 0);
    assert!(
        e2 >= e0 + 2,
        "a failover then a preferred election: epochs {e0} -> {e2}"
    );
    assert!(isr.contains(&preferred));
    assert_eq!(kcat_read(&nodes[pi], "lb", 0), values);
}

/// `ringlog shard move` of a replicated partition's replicas between the cores of their
/// node: the leader's replica moves (a new leader epoch, the same node leads, clients follow
/// to the new core), then a follower's, which catches up from its new core and rejoins the
/// ISR; every record is there, on the leader and, after the leader's SIGKILL, on the new
/// leader. A replica of an internal topic stays where its coordinator state is.
#[test]
fn shard_move_carries_replicas_between_the_cores_of_their_node() {
    let admins: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let (mut nodes, _) = cluster_with_args(3, 2, |i| {
        vec!["--metrics-listen".into(), admins[i as usize - 1].clone()]
    });
    create_replicated(&nodes[0], "sm", &[]);
    wait_fully_in_sync(&nodes[0], "sm", 0, Duration::from_secs(30));
    let (leader, e0, _) = partition_state(&nodes[0], "sm", 0);
    let li = (leader - 1) as usize;
    let first: Vec<String> = (0..300).map(|i| format!("a{i:03}")).collect();
    kcat_write_idempotent(&bootstrap(&nodes), "sm", &first);
    let moved = |node: usize, core: &str| -> (bool, String) {
        ringlog(&[
            "shard",
            "move",
            "sm/0",
            "--core",
            core,
            "--admin",
            &admins[node],
            "--json",
        ])
    };
    // The leader's replica, to core 1 and back to 0 (a move to its own core is a no-op, so
    // at least one of the two moves it).
    for core in ["1", "0"] {
        let (ok, out) = moved(li, core);
        assert!(ok, "{out}");
    }
    wait_until(
        "the leader to serve from its new core",
        Duration::from_secs(30),
        || {
            let s = partition_state(&nodes[0], "sm", 0);
            (s.0 != leader || s.1 < e0 + 1 || s.2.len() != 3).then(|| format!("{s:?}"))
        },
    );
    let (_, e1, _) = partition_state(&nodes[0], "sm", 0);
    assert!(e1 > e0, "a leader's move is a new epoch: {e0} -> {e1}");
    // A follower's replica.
    let fi = (li + 1) % 3;
    for core in ["1", "0"] {
        let (ok, out) = moved(fi, core);
        assert!(ok, "{out}");
    }
    let second: Vec<String> = (0..300).map(|i| format!("b{i:03}")).collect();
    kcat_write_idempotent(&bootstrap(&nodes), "sm", &second);
    wait_fully_in_sync(&nodes[0], "sm", 0, Duration::from_secs(30));
    let want: Vec<String> = first.iter().chain(&second).cloned().collect();
    assert_eq!(kcat_read(&nodes[li], "sm", 0), want);
    // An internal topic's replica does not move.
    let (ok, out) = ringlog(&[
        "shard",
        "move",
        "__consumer_offsets/0",
        "--core",
        "1",
        "--admin",
        &admins[0],
    ]);
    assert!(!ok && out.contains("internal"), "{out}");
    // The moved follower holds every record: it leads once the leader's node is gone.
    nodes[li].kill();
    wait_until("another replica to lead", Duration::from_secs(60), || {
        let s = partition_state(&nodes[fi], "sm", 0);
        (s.0 < 0 || s.0 == leader).then(|| format!("{s:?}"))
    });
    let (new_leader, _, _) = partition_state(&nodes[fi], "sm", 0);
    assert_eq!(kcat_read(&nodes[(new_leader - 1) as usize], "sm", 0), want);
}

/// A replication factor change by reassignment: a topic created with one replica grows to
/// three (its owner's log copied to two new replicas, which join the ISR) while records keep
/// coming, then shrinks to two without its first owner while that node is down: back, the
/// node deletes the copy before it serves. After the SIGKILL of the leader's node the last
/// replica leads with every record, once and in order.
#[test]
fn a_partition_grows_from_one_replica_to_three_and_shrinks_to_two() {
    let mut nodes = cluster(3, 1);
    let boot = bootstrap(&nodes);
    create_with_replication_factor(&nodes[0], "grow", 1, &["segment.bytes=65536"]);
    let owner = leaders(&nodes[0], "grow")[&0];
    let others: Vec<i32> = (1..=3).filter(|b| *b != owner).collect();
    let admin = nodes[(others[0] - 1) as usize].bootstrap();
    let first: Vec<String> = (0..2000)
        .map(|i| format!("one-{i:05}-{}", "x".repeat(60)))
        .collect();
    kcat_write_idempotent(&boot, "grow", &first);

    let three = format!("{owner},{},{}", others[0], others[1]);
    let (ok, out) = ringlog(&[
        "partition",
        "reassign",
        "grow/0",
        "--replicas",
        &three,
        "--wait",
        "--wait-ms",
        "120000",
        "--brokers",
        &admin,
    ]);
    assert!(ok, "{out}");
    let (leader, _, isr) = partition_state(&nodes[0], "grow", 0);
    assert_eq!(leader, owner, "the owner keeps leading");
    assert_eq!(isr, vec![1, 2, 3]);
    assert_eq!(replicas_of(&nodes[0], "grow", 0).len(), 3);
    let second: Vec<String> = (0..500).map(|i| format!("three-{i:05}")).collect();
    kcat_write_idempotent(&boot, "grow", &second);

    // The first owner goes down, and is reassigned away meanwhile.
    let oi = (owner - 1) as usize;
    let ai = (others[0] - 1) as usize;
    nodes[oi].kill();
    wait_until(
        "a remaining replica to lead",
        Duration::from_secs(60),
        || {
            let s = partition_state(&nodes[ai], "grow", 0);
            (!others.contains(&s.0)).then(|| format!("{s:?}"))
        },
    );
    let two = format!("{},{}", others[0], others[1]);
    let (ok, out) = ringlog(&[
        "partition",
        "reassign",
        "grow/0",
        "--replicas",
        &two,
        "--wait",
        "--wait-ms",
        "120000",
        "--brokers",
        &admin,
    ]);
    assert!(ok, "{out}");
    let mut now = replicas_of(&nodes[ai], "grow", 0);
    now.sort();
    assert_eq!(now, others);
    // Back, it deletes the copy it no longer holds before it serves.
    assert!(find_partition_dir(nodes[oi].data_dir(), "grow").is_some());
    nodes[oi].restart();
    assert!(
        find_partition_dir(nodes[oi].data_dir(), "grow").is_none(),
        "the copy reassigned away while its node was down is gone: {}",
        tail(&nodes[oi].stderr_text(), 6000)
    );
    let (leader, _, _) = partition_state(&nodes[0], "grow", 0);
    assert!(
        others.contains(&leader),
        "a remaining replica leads: {leader}"
    );
    let third: Vec<String> = (0..500).map(|i| format!("two-{i:05}")).collect();
    kcat_write_idempotent(&boot, "grow", &third);
    let want: Vec<String> = first.iter().chain(&second).chain(&third).cloned().collect();
    assert_eq!(kcat_read(&nodes[(leader - 1) as usize], "grow", 0), want);

    let last = *others.iter().find(|b| **b != leader).unwrap();
    wait_until("both replicas in sync", Duration::from_secs(30), || {
        let s = partition_state(&nodes[(last - 1) as usize], "grow", 0);
        (s.2 != others).then(|| format!("{s:?}"))
    });
    nodes[(leader - 1) as usize].kill();
    wait_until("the last replica to lead", Duration::from_secs(60), || {
        let s = partition_state(&nodes[(last - 1) as usize], "grow", 0);
        (s.0 != last).then(|| format!("{s:?}"))
    });
    assert_eq!(kcat_read(&nodes[(last - 1) as usize], "grow", 0), want);
}

/// A cluster whose `__consumer_offsets` has one replica per partition (as one an older build
/// created has) gives it three by reassignment: each partition's owner stays its leader and
/// the new replicas copy what it holds; then the group's commits survive the SIGKILL of its
/// coordinator's node.
#[test]
fn offsets_of_a_single_replica_offsets_topic_survive_a_failover_once_reassigned_to_three() {
    let (mut nodes, _) = cluster_with_args(3, 1, |_| {
        vec!["--offsets-topic-replication-factor".into(), "1".into()]
    });
    create_replicated(&nodes[0], "t", &[]);
    wait_fully_in_sync(&nodes[0], "t", 0, Duration::from_secs(30));
    let py = offsets_py;
    py(&bootstrap(&nodes), &["commit-many", "t", "g", "50"]);
    let offsets = metadata(&nodes[0], "__consumer_offsets");
    let parts = &offsets.topics[0].partitions;
    assert!(
        !parts.is_empty() && parts.iter().all(|p| p.replica_nodes.len() == 1),
        "one replica each: {parts:?}"
    );
    for (p, owner) in leaders(&nodes[0], "__consumer_offsets") {
        let rest: Vec<String> = (1..=3)
            .filter(|b| *b != owner)
            .map(|b| b.to_string())
            .collect();
        let target = format!("{owner},{}", rest.join(","));
        let which = format!("__consumer_offsets/{p}");
        let (ok, out) = ringlog(&[
            "partition",
            "reassign",
            &which,
            "--replicas",
            &target,
            "--wait",
            "--wait-ms",
            "120000",
            "--brokers",
            &nodes[0].bootstrap(),
        ]);
        assert!(ok, "{out}");
    }
    assert_three_replicas(&nodes[0], "__consumer_offsets");
    wait_topic_fully_in_sync(&nodes[0], "__consumer_offsets", Duration::from_secs(60));
    assert_eq!(
        py(&bootstrap(&nodes), &["committed", "t", "g"]).trim(),
        "50"
    );

    let (code, coordinator) = coordinator_of(&nodes[0], "g", GROUP_KEY);
    assert_eq!(code, 0);
    let (_, _, live_bootstrap) = kill_group_coordinator(&mut nodes, "g", coordinator);
    assert_eq!(
        py(&live_bootstrap, &["committed", "t", "g"]).trim(),
        "50",
        "the commits made with one replica are on the new coordinator"
    );
}
