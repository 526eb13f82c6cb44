//! KIP-848 (issue #12): Kafka 4.4's Java consumer with `group.protocol=consumer`. A group of
//! three members consumes a 6-partition topic; one is SIGKILLed mid-stream and a fourth joins.
//! Every record is consumed at least once, the committed offsets end at the end offsets, no
//! partition is owned by two members at any moment, and the Admin client describes the group
//! as a CONSUMER group (ConsumerGroupDescribe). See `tests/clients/Kip848Check.java`.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::java::JavaCheck;
use support::*;

const TOPIC: &str = "k848";
const GROUP: &str = "g848";
const PARTITIONS: u32 = 6;
const RECORDS: usize = 3_000;
/// The members leave when this file appears (`finish_and_check` creates it), not after an
/// idle time: on a loaded machine a JVM may start later than any idle time would allow.
const LEAVE_ALL: &str = "all";

/// The file whose appearance tells the members spawned with `until(broker, who)` to leave.
fn leave_file(broker: &Broker, who: &str) -> PathBuf {
    broker.temp_dir().join(format!("leave-{who}"))
}

/// The member program's LEAVE argument for `leave_file(broker, who)`.
fn until(broker: &Broker, who: &str) -> String {
    format!("until:{}", leave_file(broker, who).display())
}

/// CLOCK_MONOTONIC in ns: Java's `System.nanoTime` on Linux.
fn monotonic_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct it is given.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) },
        0
    );
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

struct Member {
    name: String,
    child: Child,
    out: PathBuf,
}

impl Member {
    fn spawn(check: &JavaCheck, broker: &Broker, name: &str) -> Member {
        Member::spawn_with(check, broker, name, "consumer", &until(broker, LEAVE_ALL))
    }

    /// A member speaking `protocol`: "consumer" (KIP-848), "consumer-regex" or "classic"
    /// (cooperative-sticky), leaving as `leave` says (see the member mode of Kip848Check).
    fn spawn_with(
        check: &JavaCheck,
        broker: &Broker,
        name: &str,
        protocol: &str,
        leave: &str,
    ) -> Member {
        let out = broker.temp_dir().join(format!("{name}.out"));
        let mut cmd =
            check.command(&["member", &broker.bootstrap(), GROUP, TOPIC, leave, protocol]);
        cmd.stdout(File::create(&out).unwrap())
            .stderr(File::create(broker.temp_dir().join(format!("{name}.err"))).unwrap())
            .stdin(Stdio::null());
        Member {
            name: name.to_string(),
            child: cmd.spawn().expect("java member"),
            out,
        }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Whether an ASSIGNED line of this member lists a partition.
    fn owned_any(&self) -> bool {
        intervals(&self.text(), 0)
            .iter()
            .any(|(_, _, parts)| !parts.is_empty())
    }

    fn records(&self) -> usize {
        self.text()
            .lines()
            .filter(|l| l.starts_with("REC "))
            .count()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The produced values no member has read yet.
fn unread(members: &[Member]) -> Vec<String> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for m in members {
        for l in m.text().lines().filter_map(|l| l.strip_prefix("REC ")) {
            if let Some(v) = l.splitn(3, ' ').nth(2) {
                seen.insert(v.to_string());
            }
        }
    }
    (0..RECORDS)
        .map(|i| format!("v{i}"))
        .filter(|v| !seen.contains(v))
        .collect()
}

/// One stretch of ownership: (from ns, to ns, partitions owned).
type Owned = (i128, i128, BTreeSet<u32>);

/// Ownership intervals of one member, from its ASSIGNED lines; the last ends at `end_ns`.
fn intervals(text: &str, end_ns: i128) -> Vec<Owned> {
    let mut points: Vec<(i128, BTreeSet<u32>)> = Vec::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("ASSIGNED ")) {
        let mut f = l.splitn(3, ' ');
        let t: i128 = f.next().unwrap().parse().unwrap();
        let _epoch = f.next();
        let parts = f
            .next()
            .unwrap_or("")
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().unwrap())
            .collect();
        points.push((t, parts));
    }
    let mut out = Vec::new();
    for (i, (t, parts)) in points.iter().enumerate() {
        let to = points.get(i + 1).map_or(end_ns, |(n, _)| *n);
        out.push((*t, to, parts.clone()));
    }
    out
}

/// Once every record was read and every live member owned partitions, tells the members
/// spawned with `until(broker, LEAVE_ALL)` to leave and waits for every member not in `ended`
/// to end, then checks: every record read at least once, no partition owned by two members at once, every
/// member that stayed owned partitions and ended cleanly.
fn finish_and_check(broker: &Broker, members: &mut [Member], mut ended: BTreeMap<String, i128>) {
    let killed: BTreeSet<String> = ended.keys().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(240);
    let leave = leave_file(broker, LEAVE_ALL);
    while !leave.exists() {
        let mut live = members.iter().filter(|m| !killed.contains(&m.name));
        if unread(members).is_empty() && live.all(Member::owned_any) {
            File::create(&leave).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "{} records still unread",
            unread(members).len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    while ended.len() < members.len() {
        for m in members.iter_mut() {
            if !ended.contains_key(&m.name) {
                if let Some(status) = m.child.try_wait().unwrap() {
                    assert!(
                        status.success(),
                        "{} exited with {status}: {}",
                        m.name,
                        std::fs::read_to_string(broker.temp_dir().join(format!("{}.err", m.name)))
                            .unwrap_or_default()
                    );
                    ended.insert(m.name.clone(), monotonic_ns());
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "members still running: {ended:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // At least once: every produced value was read by some member.
    let missing = unread(members);
    assert!(
        missing.is_empty(),
        "{} records never read: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );

    // No partition owned by two members at once.
    let owned: Vec<(String, Vec<Owned>)> = members
        .iter()
        .map(|m| (m.name.clone(), intervals(&m.text(), ended[&m.name])))
        .collect();
    for (i, (a, ia)) in owned.iter().enumerate() {
        for (b, ib) in &owned[i + 1..] {
            for (fa, ta, pa) in ia {
                for (fb, tb, pb) in ib {
                    let overlap = fa.max(fb) < ta.min(tb);
                    let both: Vec<&u32> = pa.intersection(pb).collect();
                    assert!(
                        !overlap || both.is_empty(),
                        "partitions {both:?} owned by {a} and {b} at once"
                    );
                }
            }
        }
    }
    // The members that ended by themselves owned partitions and said so.
    for m in members.iter().filter(|m| !killed.contains(&m.name)) {
        assert!(m.owned_any(), "{} never owned a partition", m.name);
        assert!(
            m.text().contains("OK member"),
            "{}: {}",
            m.name,
            tail(&m.text(), 500)
        );
    }
}

/// A broker whose KIP-848 members heartbeat every 500 ms and are fenced after 6 s, with
/// `RECORDS` records in `TOPIC`, and the compiled check program.
fn broker_with_records() -> (Broker, JavaCheck) {
    let broker = Broker::start_with(
        2,
        &[
            "--group-consumer-session-timeout-ms",
            "6000",
            "--group-consumer-heartbeat-interval-ms",
            "500",
        ],
    );
    create_topic(&broker, TOPIC, PARTITIONS, &[]);
    let check = JavaCheck::compile("Kip848Check");
    check.run(&["produce", &broker.bootstrap(), TOPIC, &RECORDS.to_string()]);
    (broker, check)
}

#[test]
fn a_consumer_protocol_group_survives_a_killed_member_and_an_added_one() {
    let (broker, check) = broker_with_records();
    let bootstrap = broker.bootstrap();

    let mut members: Vec<Member> = ["m1", "m2", "m3"]
        .iter()
        .map(|n| Member::spawn(&check, &broker, n))
        .collect();
    let described = check.run(&["describe", &bootstrap, GROUP, "3"]);
    assert!(described.starts_with("OK Consumer "), "{described}");
    // `ringlog group describe` shows it too (ConsumerGroupDescribe).
    let mut cmd = std::process::Command::new(ringlog_bin());
    cmd.args([
        "group",
        "describe",
        GROUP,
        "--json",
        "--brokers",
        &bootstrap,
    ]);
    let out = run_ok(cmd, None, Duration::from_secs(30));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["protocol_type"], "consumer", "{out}");
    assert_eq!(v["members"].as_array().map(Vec::len), Some(3), "{out}");
    assert!(
        v["partitions"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["member_id"] != "-")),
        "partitions with their owners: {out}"
    );

    // m2 dies mid-stream (SIGKILL: no leave), then m4 joins.
    let deadline = Instant::now() + Duration::from_secs(120);
    while members[1].records() < 100 {
        assert!(
            Instant::now() < deadline,
            "m2 read {} records",
            members[1].records()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    members[1].child.kill().unwrap();
    members[1].child.wait().unwrap();
    let killed_at = monotonic_ns();
    assert!(
        members[1].records() < RECORDS,
        "m2 read everything before it was killed"
    );
    members.push(Member::spawn(&check, &broker, "m4"));

    let mut ended: BTreeMap<String, i128> = BTreeMap::new();
    ended.insert("m2".into(), killed_at);
    finish_and_check(&broker, &mut members, ended);
    // No commit of a consumer-protocol member was refused: a commit sent just before the
    // heartbeat answer that moved its epoch still counts (`ConsumerGroup::check_commit`).
    for m in &members {
        assert!(
            !m.text().contains("COMMIT_RETRY"),
            "{} had a commit refused: {}",
            m.name,
            m.text()
                .lines()
                .filter(|l| l.starts_with("COMMIT_RETRY"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }

    let verified = check.run(&["verify", &bootstrap, GROUP, TOPIC]);
    assert!(verified.contains("6 partitions"), "{verified}");
}

/// Kafka 4's online migration: a live classic group (two cooperative-sticky members)
/// converts when a consumer-protocol member joins; the classic members keep consuming in it
/// (JoinGroup, SyncGroup, Heartbeat served by the consumer group), partitions move to the new
/// member without being owned twice; when it leaves, the group converts back to classic and
/// its members rebalance as a classic group. Every record is read.
#[test]
fn a_live_classic_group_converts_when_a_consumer_protocol_member_joins() {
    let (broker, check) = broker_with_records();
    let bootstrap = broker.bootstrap();
    let mut members = vec![
        Member::spawn_with(&check, &broker, "c1", "classic", &until(&broker, LEAVE_ALL)),
        Member::spawn_with(&check, &broker, "c2", "classic", &until(&broker, LEAVE_ALL)),
    ];
    // Both classic members consume before the new one comes.
    let deadline = Instant::now() + Duration::from_secs(120);
    while members.iter().any(|m| m.records() < 20) {
        assert!(
            Instant::now() < deadline,
            "the classic members never both consumed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    members.push(Member::spawn_with(
        &check,
        &broker,
        "n1",
        "consumer",
        &until(&broker, "n1"),
    ));
    let described = check.run(&["describe", &bootstrap, GROUP, "3"]);
    assert!(described.starts_with("OK Consumer "), "{described}");
    broker.wait_for_log_line(
        &["classic group converted to a consumer group"],
        Duration::from_secs(10),
    );
    // n1 leaves once it owns partitions: the group converts back to classic, then the
    // classic members leave.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !members[2].owned_any() {
        assert!(Instant::now() < deadline, "n1 never owned a partition");
        std::thread::sleep(Duration::from_millis(20));
    }
    File::create(leave_file(&broker, "n1")).unwrap();
    broker.wait_for_log_line(
        &["converted back to a classic group"],
        Duration::from_secs(120),
    );
    finish_and_check(&broker, &mut members, BTreeMap::new());
    let verified = check.run(&["verify", &bootstrap, GROUP, TOPIC]);
    assert!(verified.contains("6 partitions"), "{verified}");
}

/// A broker-side regex subscription (`SubscriptionPattern`, KIP-848): two members subscribed
/// by "k848.*" share the topic's partitions and read every record.
#[test]
fn members_subscribed_by_a_regex_share_the_matching_topic() {
    let broker = Broker::start_with(2, &["--group-consumer-heartbeat-interval-ms", "500"]);
    create_topic(&broker, TOPIC, PARTITIONS, &[]);
    create_topic(&broker, "unrelated", 2, &[]);
    let check = JavaCheck::compile("Kip848Check");
    let bootstrap = broker.bootstrap();
    check.run(&["produce", &bootstrap, TOPIC, &RECORDS.to_string()]);
    let mut members = vec![
        Member::spawn_with(
            &check,
            &broker,
            "r1",
            "consumer-regex",
            &until(&broker, LEAVE_ALL),
        ),
        Member::spawn_with(
            &check,
            &broker,
            "r2",
            "consumer-regex",
            &until(&broker, LEAVE_ALL),
        ),
    ];
    let described = check.run(&["describe", &bootstrap, GROUP, "2"]);
    assert!(described.starts_with("OK Consumer "), "{described}");
    finish_and_check(&broker, &mut members, BTreeMap::new());
    let verified = check.run(&["verify", &bootstrap, GROUP, TOPIC]);
    assert!(verified.contains("6 partitions"), "{verified}");
}
