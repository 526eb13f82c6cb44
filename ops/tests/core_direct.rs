//! Core-direct routing (issue #21): with `--core-direct on` each core listens on a port of its
//! own and is a broker of its own in Metadata (id node × 1000 + core), leading the partitions
//! it owns, so real clients send every produce, fetch and group request straight to the owner
//! core. The proof is the cross-core counter (`ringlog_cross_core_messages_total` on
//! `/metrics`): it stays flat under that traffic with core-direct on and grows with it off.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

use support::*;

const TOPIC: &str = "direct";
const PARTITIONS: u32 = 6;
const MESSAGES: usize = 4_000;
/// The script flushes its producer this many times (MESSAGES / this ≥ 97 keys, so every round
/// writes to every partition, and so to both cores).
const PRODUCE_ROUNDS: usize = 40;
/// Node 1's core brokers are 1000, 1001 (`net::brokers::CORE_BROKER_ID_STRIDE`).
const CORE_BROKER_ID_BASE: i64 = 1000;
/// What still crosses cores in core-direct mode during the client runs: each `/metrics` scrape
/// gathers every core's figures through `invoke_on` from core 0 (one message to core 1 per
/// scrape). Metadata, ApiVersions, FindCoordinator and InitProducerId are answered by whichever
/// core the connection is on, from its own metadata copy, without a hop. So the slack covers
/// the scrapes and nothing of the produce, fetch, list-offsets or group traffic.
const CORE_DIRECT_CROSS_CORE_SLACK: f64 = 4.0;
/// With core-direct off, the same traffic must cross cores at least this often: the
/// producer's one connection is on one core, and each of its PRODUCE_ROUNDS flushed rounds
/// writes to partitions of both cores, so at least one hop per round (fetches, list-offsets
/// and group calls whose coordinator is on the other core add more).
const CORE_DIRECT_OFF_MIN_CROSS_CORE: f64 = PRODUCE_ROUNDS as f64;

/// `partition <topic>/<p> opened on core <c>` lines of the broker log: partition -> core.
fn parse_owners(stderr: &str, topic: &str) -> BTreeMap<u32, u32> {
    let prefix = format!("partition {topic}/");
    let mut m = BTreeMap::new();
    for line in stderr.lines() {
        let Some(i) = line.find(&prefix) else {
            continue;
        };
        let Some((p, rest)) = line[i + prefix.len()..].split_once(" opened on core ") else {
            continue;
        };
        let c: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if let (Ok(p), Ok(c)) = (p.parse(), c.parse()) {
            m.insert(p, c);
        }
    }
    m
}

/// Sum over cores of `ringlog_cross_core_messages_total` on the admin listener.
fn cross_core_total(admin: &str) -> f64 {
    let raw = http_request(admin, "GET", "/metrics");
    let (head, body) = raw.split_once("\r\n\r\n").expect("http response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let values: Vec<f64> = body
        .lines()
        .filter(|l| l.starts_with("ringlog_cross_core_messages_total{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(values.len(), 2, "one series per core:\n{body}");
    values.iter().sum()
}

fn start(core_direct: bool) -> (Broker, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    // A short first rebalance keeps the group runs quick; base port 0: each core gets a free
    // port (the harness's listen port + 1 + c could be another test's).
    let cfg = dir.path().join("ringlog.toml");
    std::fs::write(&cfg, "group-initial-rebalance-delay-ms = 0\n").unwrap();
    let mut args = vec![
        "--metrics-listen",
        &admin,
        "--config",
        cfg.to_str().unwrap(),
    ];
    if core_direct {
        args.extend(["--core-direct", "on", "--core-direct-base-port", "0"]);
    } else {
        args.extend(["--core-direct", "off"]);
    }
    let b = Broker::start_with(2, &args);
    (b, admin)
}

/// `kcat -L -J` against `bootstrap` (for `topic`, or every topic).
fn kcat_json(bootstrap: &str, topic: Option<&str>) -> serde_json::Value {
    let mut c = Command::new(kcat());
    c.args(["-b", bootstrap, "-L", "-J"]);
    if let Some(t) = topic {
        c.args(["-t", t]);
    }
    let out = run_ok(c, None, Duration::from_secs(30));
    serde_json::from_str(out.trim()).expect("kcat -L -J output")
}

/// Broker id -> port of a `kcat -L -J` answer.
fn brokers_of(md: &serde_json::Value) -> BTreeMap<i64, u16> {
    md["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let name = b["name"].as_str().unwrap();
            let port = name.rsplit_once(':').unwrap().1.parse().unwrap();
            (b["id"].as_i64().unwrap(), port)
        })
        .collect()
}

/// Metadata through kcat: (broker id -> port, TOPIC's partition -> leader id, controller id).
fn kcat_metadata(bootstrap: &str) -> (BTreeMap<i64, u16>, BTreeMap<u32, i64>, i64) {
    let md = kcat_json(bootstrap, Some(TOPIC));
    let topic = md["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == TOPIC)
        .expect("topic in metadata");
    let leaders = topic["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["partition"].as_u64().unwrap() as u32,
                p["leader"].as_i64().unwrap(),
            )
        })
        .collect();
    (
        brokers_of(&md),
        leaders,
        md["controllerid"].as_i64().unwrap(),
    )
}

/// Runs `core_direct.py` (produce MESSAGES keyed messages, consume them back in a group,
/// commit, check the commit); returns its JSON summary.
fn produce_consume_commit(bootstrap: &str, tag: &str) -> serde_json::Value {
    let (n, rounds) = (MESSAGES.to_string(), PRODUCE_ROUNDS.to_string());
    let out = run_python(
        "core_direct.py",
        &[bootstrap, TOPIC, &n, tag, &rounds],
        &[],
        Duration::from_secs(120),
    );
    let summary: serde_json::Value =
        serde_json::from_str(out.trim().lines().last().unwrap_or("")).expect("script summary");
    let produced = summary["produced"].as_object().unwrap();
    assert_eq!(
        produced.len(),
        PARTITIONS as usize,
        "keys reach every partition: {summary}"
    );
    let total: u64 = produced.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(total, MESSAGES as u64, "{summary}");
    summary
}

#[test]
fn core_direct_clients_talk_to_the_owner_core() {
    let (broker, admin) = start(true);
    create_topic(&broker, TOPIC, PARTITIONS, &[]);

    // (1) Metadata: one broker per core on distinct ports, none of them the shared port, and
    // each partition led by the broker of the core the log says it opened on.
    let owners = parse_owners(&broker.stderr_text(), TOPIC);
    assert_eq!(
        owners.keys().copied().collect::<Vec<_>>(),
        (0..PARTITIONS).collect::<Vec<_>>(),
        "an `opened on core` line per partition: {owners:?}"
    );
    assert_eq!(
        owners.values().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from([0, 1]),
        "partitions spread over both cores: {owners:?}"
    );
    let (brokers, leaders, controller) = kcat_metadata(&broker.bootstrap());
    assert_eq!(
        brokers.keys().copied().collect::<Vec<_>>(),
        vec![CORE_BROKER_ID_BASE, CORE_BROKER_ID_BASE + 1],
        "a broker per core: {brokers:?}"
    );
    let ports: BTreeSet<u16> = brokers.values().copied().collect();
    assert_eq!(ports.len(), 2, "distinct core ports: {brokers:?}");
    assert!(
        !ports.contains(&broker.addr().port()),
        "core ports are not the shared port: {brokers:?}"
    );
    assert_eq!(controller, CORE_BROKER_ID_BASE, "core 0 is the controller");
    for (p, core) in &owners {
        assert_eq!(
            leaders.get(p),
            Some(&(CORE_BROKER_ID_BASE + i64::from(*core))),
            "leader of partition {p} (owner core {core}); leaders {leaders:?}"
        );
    }
    // A core port answers the same Metadata.
    let core1 = format!("127.0.0.1:{}", brokers[&(CORE_BROKER_ID_BASE + 1)]);
    let (brokers1, leaders1, _) = kcat_metadata(&core1);
    assert_eq!((brokers1, leaders1), (brokers.clone(), leaders.clone()));

    // (2) + (3) A real client produces, consumes as a group and commits, bootstrapped at the
    // shared port; confluent-kafka sees the same brokers and leaders; nothing of it crosses
    // cores.
    let before = cross_core_total(&admin);
    let summary = produce_consume_commit(&broker.bootstrap(), "shared");
    let after = cross_core_total(&admin);
    eprintln!(
        "core-direct on, shared bootstrap: {} cross-core messages",
        after - before
    );
    let seen_brokers: BTreeMap<i64, u16> = summary["brokers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, addr)| {
            let port = addr.as_str().unwrap().rsplit_once(':').unwrap().1;
            (id.parse().unwrap(), port.parse().unwrap())
        })
        .collect();
    assert_eq!(
        seen_brokers, brokers,
        "confluent-kafka's view of the brokers"
    );
    for (p, core) in &owners {
        assert_eq!(
            summary["leaders"][p.to_string()].as_i64(),
            Some(CORE_BROKER_ID_BASE + i64::from(*core)),
            "{summary}"
        );
    }
    assert!(
        after - before <= CORE_DIRECT_CROSS_CORE_SLACK,
        "core-direct: produce/fetch/group traffic crossed cores {} times (before {before}, after {after})",
        after - before
    );

    // (4) Bootstrapped directly at a core's port works the same, still without hops.
    let before = cross_core_total(&admin);
    produce_consume_commit(&core1, "core1");
    let after = cross_core_total(&admin);
    eprintln!(
        "core-direct on, core 1 bootstrap: {} cross-core messages",
        after - before
    );
    assert!(
        after - before <= CORE_DIRECT_CROSS_CORE_SLACK,
        "core-direct, bootstrapped at core 1: crossed cores {} times",
        after - before
    );

    // Admin: DescribeCluster lists the same brokers; CreatePartitions accepts core broker ids
    // and puts each new partition on the core its assignment names.
    let out = run_python(
        "core_direct_admin.py",
        &[
            &broker.bootstrap(),
            TOPIC,
            &(PARTITIONS + 2).to_string(),
            &(CORE_BROKER_ID_BASE + 1).to_string(),
            &CORE_BROKER_ID_BASE.to_string(),
        ],
        &[],
        Duration::from_secs(60),
    );
    let admin_view: serde_json::Value =
        serde_json::from_str(out.trim().lines().last().unwrap_or("")).expect("admin summary");
    assert_eq!(
        admin_view["controller"], CORE_BROKER_ID_BASE,
        "{admin_view}"
    );
    assert_eq!(
        admin_view["nodes"],
        serde_json::json!([CORE_BROKER_ID_BASE, CORE_BROKER_ID_BASE + 1]),
        "{admin_view}"
    );
    let new_owners = parse_owners(&broker.stderr_text(), TOPIC);
    for (p, core) in [(PARTITIONS, 1), (PARTITIONS + 1, 0)] {
        assert_eq!(
            new_owners.get(&p),
            Some(&core),
            "partition {p}: {new_owners:?}"
        );
        assert_eq!(
            admin_view["leaders"][p.to_string()].as_i64(),
            Some(CORE_BROKER_ID_BASE + i64::from(core)),
            "{admin_view}"
        );
    }
    drop(broker);
}

#[test]
fn without_core_direct_the_same_traffic_crosses_cores() {
    let (broker, admin) = start(false);
    create_topic(&broker, TOPIC, PARTITIONS, &[]);
    // One broker, the node (id 1), on the shared port, leading everything.
    let (brokers, leaders, controller) = kcat_metadata(&broker.bootstrap());
    assert_eq!(
        brokers,
        BTreeMap::from([(1, broker.addr().port())]),
        "one broker"
    );
    assert!(leaders.values().all(|&l| l == 1), "{leaders:?}");
    assert_eq!(controller, 1);

    let before = cross_core_total(&admin);
    produce_consume_commit(&broker.bootstrap(), "off");
    let after = cross_core_total(&admin);
    eprintln!("core-direct off: {} cross-core messages", after - before);
    assert!(
        after - before >= CORE_DIRECT_OFF_MIN_CROSS_CORE,
        "core-direct off: the traffic crossed cores only {} times (before {before}, after {after})",
        after - before
    );
    drop(broker);
}

fn serve_fails(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(ringlog_bin());
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(args);
    let out = run_with_timeout(cmd, None, Duration::from_secs(30));
    assert!(!out.status.success(), "serve {args:?} started");
    out
}

#[test]
fn bad_core_direct_ports_are_refused() {
    // (listen, cores, base port, what the message must name): past 65535 from the listen
    // port and from the base port, and a base port whose range holds the listen port.
    let cases: [(&str, &str, Option<&str>, &[&str]); 3] = [
        ("127.0.0.1:65535", "1", None, &["past port 65535", "listen"]),
        (
            "127.0.0.1:9092",
            "2",
            Some("65535"),
            &["past port 65535", "core-direct-base-port"],
        ),
        (
            "127.0.0.1:9092",
            "2",
            Some("9091"),
            &["include the listen port 9092"],
        ),
    ];
    for (listen, cores, base, wants) in cases {
        let mut args = vec!["--listen", listen, "--cores", cores, "--core-direct", "on"];
        if let Some(b) = base {
            args.extend(["--core-direct-base-port", b]);
        }
        let out = serve_fails(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", out.stderr);
        for want in wants {
            assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
        }
    }
    // The config-file key takes only on/off (or a bool).
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ringlog.toml");
    std::fs::write(&cfg, "core-direct = \"maybe\"\n").unwrap();
    let out = serve_fails(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("core-direct"), "{}", out.stderr);
}

#[test]
fn a_core_port_in_use_is_a_clear_start_error() {
    // A live core-direct broker holds its core ports (given in the config file this time);
    // a second broker on another listen port but the same core ports is refused.
    let base = free_port();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ringlog.toml");
    std::fs::write(
        &cfg,
        format!("core-direct = \"on\"\ncore-direct-base-port = {base}\n"),
    )
    .unwrap();
    let first = Broker::start_with(1, &["--config", cfg.to_str().unwrap()]);
    let md = kcat_json(&first.bootstrap(), None);
    assert_eq!(
        brokers_of(&md),
        BTreeMap::from([(CORE_BROKER_ID_BASE, base)])
    );
    let other = format!("127.0.0.1:{}", free_port());
    let out = serve_fails(&[
        "--listen",
        &other,
        "--cores",
        "1",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("already accepts connections on 127.0.0.1:{base}")),
        "{}",
        out.stderr
    );
    drop(first);
}
