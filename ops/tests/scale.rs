//! Many partitions on one node within a small fd limit (issue #13): each core keeps at most
//! its open-file budget of data files open, closing idle partitions' files and reopening them
//! on use, so a node serves far more partitions than three fds each would allow; every
//! acknowledged record survives a SIGKILL, and a restart serves every partition.

mod support;

use std::time::Duration;
use support::*;

/// Descriptors the broker process holds now.
fn broker_fds(broker: &Broker) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", broker.pid().expect("running")))
        .expect("the broker's fd list")
        .count()
}

fn lower_fd_limit(n: u64) {
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: setrlimit on our own process (nextest runs each test in its own); the broker
    // inherits it.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
}

fn create_topics(broker: &Broker, prefix: &str, topics: usize, partitions: u32) {
    for t in 0..topics {
        let mut c = std::process::Command::new(ringlog_bin());
        c.args(["topic", "create", &format!("{prefix}{t}")])
            .args(["--partitions", &partitions.to_string()])
            .args(["--config", "segment.bytes=1048576"])
            .args(["--brokers", &broker.bootstrap()]);
        run_ok(c, None, Duration::from_secs(300));
    }
}

/// A producer writing round-robin over 10,000 partitions, ten times what the fd budget holds
/// open, keeps working; after a SIGKILL every acknowledged record reads back, and the broker
/// stays under its fd limit throughout.
#[test]
fn round_robin_over_ten_thousand_partitions_survives_sigkill() {
    const FD_LIMIT: u64 = 4_096;
    lower_fd_limit(FD_LIMIT);
    let admin = format!("127.0.0.1:{}", free_port());
    let mut broker = Broker::start_with(2, &["--metrics-listen", &admin]);
    create_topics(&broker, "rr", 10, 1_000);
    let fds = broker_fds(&broker);
    assert!(
        fds < FD_LIMIT as usize,
        "{fds} fds after creating 10,000 partitions"
    );
    let bootstrap = broker.bootstrap();
    let out = run_python(
        "scale_check.py",
        &[&bootstrap, "rr", "rr", "10", "1000", "0", "1", "2"],
        &[],
        Duration::from_secs(600),
    );
    assert!(out.contains("\"acked\": 20000"), "{out}");
    let fds = broker_fds(&broker);
    assert!(
        fds < FD_LIMIT as usize,
        "{fds} fds after writing 10,000 partitions"
    );
    let stats = http_request(&admin, "GET", "/metrics");
    let closed = metric_sum(&stats, "ringlog_open_files_closed_for_budget_total");
    assert!(
        closed > 0.0,
        "files were closed for the budget: {}",
        tail(&stats, 3_000)
    );
    broker.kill();
    broker.restart();
    let out = run_python(
        "scale_check.py",
        &[&bootstrap, "verify", "rr", "10", "1000", "10000", "1", "2"],
        &[],
        Duration::from_secs(600),
    );
    assert!(out.contains("\"verified_partitions\": 10000"), "{out}");
    let fds = broker_fds(&broker);
    assert!(
        fds < FD_LIMIT as usize,
        "{fds} fds after reading 10,000 partitions"
    );
    broker.assert_alive();
}

/// 100,000 partitions (100 topics × 1,000) on `--cores 2` under a 20,000 fd limit (the hard
/// limit of the test machines; three fds each would need 300,000): all are created, a produce
/// to 1,000 random partitions and a fetch from them succeed, and a clean restart and a
/// restart after SIGKILL serve them all, with the broker under its fd limit throughout.
#[test]
fn a_hundred_thousand_partitions_on_two_cores() {
    const FD_LIMIT: u64 = 20_000;
    lower_fd_limit(FD_LIMIT);
    let mut broker = Broker::start(2);
    // A debug build opens 100,000 partitions in about 30 s (a release build in about 10 s).
    broker.set_ready_timeout(Duration::from_secs(180));
    let started = std::time::Instant::now();
    create_topics(&broker, "k", 100, 1_000);
    eprintln!("created 100,000 partitions in {:?}", started.elapsed());
    let fds = broker_fds(&broker);
    assert!(
        fds < FD_LIMIT as usize,
        "{fds} fds after creating 100,000 partitions"
    );
    let bootstrap = broker.bootstrap();
    let check = |mode: &str, seed: &str| {
        run_python(
            "scale_check.py",
            &[&bootstrap, mode, "k", "100", "1000", "1000", seed],
            &[],
            Duration::from_secs(600),
        )
    };
    let out = check("produce", "13");
    assert!(out.contains("\"acked\": 1000"), "{out}");
    let out = check("verify", "13");
    assert!(out.contains("\"verified_partitions\": 1000"), "{out}");
    // Every partition is served: Metadata lists each topic with all its partitions led.
    let every_topic_led = |broker: &Broker| {
        let mut c = std::process::Command::new(kcat());
        c.args(["-b", &broker.bootstrap(), "-L"]);
        let out = run_ok(c, None, Duration::from_secs(120));
        let full = out.matches("with 1000 partitions").count();
        assert!(
            full >= 100,
            "{full} topics with 1000 partitions: {}",
            tail(&out, 2_000)
        );
        assert!(!out.contains("leader -1"), "a partition without a leader");
    };
    every_topic_led(&broker);
    broker.terminate();
    let t = std::time::Instant::now();
    broker.restart();
    eprintln!("clean restart served in {:?}", t.elapsed());
    every_topic_led(&broker);
    let out = check("verify", "13");
    assert!(out.contains("\"verified_partitions\": 1000"), "{out}");
    // A second sample written, then a SIGKILL: both samples read back.
    let out = check("produce", "14");
    assert!(out.contains("\"acked\": 1000"), "{out}");
    broker.kill();
    let t = std::time::Instant::now();
    broker.restart();
    eprintln!("restart after SIGKILL served in {:?}", t.elapsed());
    every_topic_led(&broker);
    let out = check("verify", "13,14");
    assert!(out.contains("\"verified_partitions\": "), "{out}");
    let fds = broker_fds(&broker);
    assert!(fds < FD_LIMIT as usize, "{fds} fds after the restarts");
    broker.assert_alive();
}
