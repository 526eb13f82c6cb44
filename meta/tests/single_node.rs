//! Single node (embedded default): durable state across restarts, corrupt-tail recovery,
//! snapshots + log compaction, subscriptions, refusals.

use std::collections::BTreeMap;
use std::path::Path;

use meta::{Assignment, Change, Command, MetaConfig, MetaError, MetaState, Metastore};

fn assignments(n: u32) -> Vec<Assignment> {
    (0..n)
        .map(|p| Assignment {
            node_id: 1,
            core_index: p % 2,
        })
        .collect()
}

fn create(
    h: &meta::MetaHandle,
    name: &str,
    partitions: u32,
) -> Result<meta::AppliedChange, MetaError> {
    h.write_blocking(Command::create_topic(
        name,
        partitions,
        BTreeMap::from([("retention.ms".to_string(), "60000".to_string())]),
        assignments(partitions),
    ))
}

fn names(s: &MetaState) -> Vec<String> {
    s.topics.keys().cloned().collect()
}

fn config(dir: &Path) -> MetaConfig {
    MetaConfig::single_node(dir)
}

#[test]
fn create_restart_everything_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let h = Metastore::start(config(dir.path())).unwrap();
        for i in 0..50 {
            create(&h, &format!("topic-{i:03}"), 1 + i % 4).unwrap();
        }
        h.write_blocking(Command::AddPartitions {
            name: "topic-000".into(),
            new_total: 3,
            assignments: assignments(2),
        })
        .unwrap();
        h.write_blocking(Command::DeleteTopic {
            name: "topic-001".into(),
        })
        .unwrap();
        let (_, s) = h.read_blocking().unwrap();
        // A leader-confirmed read on a one-voter cluster confirms.
        let (_, confirmed) = h.linearizable_read_blocking().unwrap();
        assert_eq!(s, confirmed);
        h.shutdown().unwrap();
        s
    };
    assert_eq!(before.topics.len(), 49);
    let h = Metastore::start(config(dir.path())).unwrap();
    let (_, after) = h.read_blocking().unwrap();
    assert_eq!(before, after);
    assert_eq!(after.topic("topic-000").unwrap().partitions, 3);
    after.check_invariants().unwrap();
    // Still writable after the restart, and refusals are typed.
    create(&h, "topic-new", 1).unwrap();
    let e = create(&h, "topic-new", 1).unwrap_err();
    assert!(matches!(
        e,
        meta::MetaError::Refused(meta::state::Refusal::TopicAlreadyExists { .. })
    ));
    let e = h
        .write_blocking(Command::AddPartitions {
            name: "topic-new".into(),
            new_total: 1,
            assignments: vec![],
        })
        .unwrap_err();
    assert!(matches!(
        e,
        meta::MetaError::Refused(meta::state::Refusal::InvalidPartitions { .. })
    ));
    let e = h
        .write_blocking(Command::DeleteTopic {
            name: "nope".into(),
        })
        .unwrap_err();
    assert!(matches!(
        e,
        meta::MetaError::Refused(meta::state::Refusal::UnknownTopicOrPartition { .. })
    ));
    h.shutdown().unwrap();
}

#[test]
fn corrupt_log_tail_recovers_up_to_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    {
        let h = Metastore::start(config(dir.path())).unwrap();
        for i in 0..20 {
            create(&h, &format!("t{i:02}"), 1).unwrap();
        }
        h.shutdown().unwrap();
    }
    // Damage the last record (the create of t19) and append a torn half-record.
    let log = dir.path().join("raft").join("log");
    let mut bytes = std::fs::read(&log).unwrap();
    let n = bytes.len();
    bytes[n - 2] ^= 0x5a;
    bytes.extend_from_slice(&[0x10, 0, 0, 0, 1, 2]);
    std::fs::write(&log, &bytes).unwrap();

    let h = Metastore::start(config(dir.path())).unwrap();
    let (_, s) = h.read_blocking().unwrap();
    let expect: Vec<String> = (0..19).map(|i| format!("t{i:02}")).collect();
    assert_eq!(names(&s), expect);
    // The log continues cleanly after the cut.
    create(&h, "t19", 1).unwrap();
    h.shutdown().unwrap();
    let h = Metastore::start(config(dir.path())).unwrap();
    let (_, s) = h.read_blocking().unwrap();
    assert_eq!(s.topics.len(), 20);
    h.shutdown().unwrap();
}

#[test]
fn snapshot_compacts_log_and_restores() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.snapshot_every_logs = 10;
    cfg.logs_kept_after_snapshot = 3;
    let before = {
        let h = Metastore::start(cfg.clone()).unwrap();
        for i in 0..45 {
            create(&h, &format!("s{i:02}"), 2).unwrap();
        }
        // Snapshots are built in the background; wait until one covers most of the log.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let st = h.status_blocking().unwrap();
            if st.snapshot_index.is_some_and(|i| i >= 30) && st.purged_index.is_some() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no snapshot: {st:?}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let (_, s) = h.read_blocking().unwrap();
        h.shutdown().unwrap();
        s
    };
    assert!(dir.path().join("raft").join("snapshot").exists());
    let h = Metastore::start(cfg).unwrap();
    let (_, after) = h.read_blocking().unwrap();
    assert_eq!(before, after);
    assert_eq!(after.topics.len(), 45);
    h.shutdown().unwrap();
}

#[test]
fn subscribers_get_every_change_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let h = Metastore::start(config(dir.path())).unwrap();
    create(&h, "early", 1).unwrap();
    let (idx, mut copy, rx) = h.subscribe_blocking().unwrap();
    assert_eq!(names(&copy), vec!["early".to_string()]);
    // Writers on other threads, through clones of the handle.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let h = h.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    create(&h, &format!("w{t}-{i}"), 1).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    h.write_blocking(Command::DeleteTopic {
        name: "early".into(),
    })
    .unwrap();
    let mut last = idx;
    let mut seen = 0;
    while seen < 101 {
        let c = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert!(c.log_index > last, "changes out of order");
        last = c.log_index;
        assert!(!matches!(c.change, Change::SnapshotInstalled { .. }));
        assert!(copy.apply_change(&c.change));
        // Concurrent writes are proposed together: one log entry, one `Change::Batch`.
        seen += match &c.change {
            Change::Batch(changes) => {
                assert!(changes.len() > 1, "a batch of one is sent unwrapped");
                assert!(changes
                    .iter()
                    .all(|c| !matches!(c, Change::Batch(_) | Change::SnapshotInstalled { .. })));
                changes.len()
            }
            _ => 1,
        };
    }
    let (_, s) = h.read_blocking().unwrap();
    assert_eq!(copy, s);
    assert_eq!(s.topics.len(), 100);
    h.shutdown().unwrap();
}

#[test]
fn data_dir_is_locked_and_bad_input_is_typed() {
    let dir = tempfile::tempdir().unwrap();
    let h = Metastore::start(config(dir.path())).unwrap();
    match Metastore::start(config(dir.path())) {
        Err(MetaError::Config { .. }) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("second start on one data dir must be refused"),
    }
    h.shutdown().unwrap();
    // A damaged hard-state file is a typed error, not a panic.
    let hs = dir.path().join("raft").join("hardstate");
    let mut b = std::fs::read(&hs).unwrap();
    b[20] ^= 1;
    std::fs::write(&hs, &b).unwrap();
    match Metastore::start(config(dir.path())) {
        Err(MetaError::Corrupt { .. }) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("corrupt hard state must be refused"),
    }
    assert!(MetaConfig::parse_peers("1=127.0.0.1:1,x=2").is_err());
    assert!(MetaConfig::parse_peers("1=127.0.0.1:1,1=127.0.0.1:2").is_err());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// Concurrent writes share log entries (group commit), and the committed index is on disk when
/// they are acknowledged: the data dir as it is right after the last acknowledgement (copied
/// while the node still runs, as a crash would leave it) restarts with every acknowledged
/// write already applied, before any new election or commit.
#[test]
fn acknowledged_concurrent_writes_survive_a_crash_image() {
    let dir = tempfile::tempdir().unwrap();
    let h = Metastore::start(config(dir.path())).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let h = h.clone();
            std::thread::spawn(move || {
                (0..20)
                    .map(|i| create(&h, &format!("c{t}-{i}"), 1).unwrap().log_index)
                    .max()
                    .unwrap()
            })
        })
        .collect();
    let last = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .max()
        .unwrap();
    let (applied, before) = h.read_blocking().unwrap();
    assert_eq!(before.topics.len(), 160);
    assert!(applied >= last);
    let image = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), image.path());
    h.shutdown().unwrap();

    let h = Metastore::start(config(image.path())).unwrap();
    let (applied_after, after) = h.read_blocking().unwrap();
    assert!(applied_after >= last, "{applied_after} < {last}");
    assert_eq!(after, before);
    h.shutdown().unwrap();
}
