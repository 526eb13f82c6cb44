//! Restart on the same port right after a clean shutdown (SIGTERM) while clients are connected
//! (issue #4): the broker closes those connections itself, which leaves server-side TIME_WAIT
//! sockets on the listen port for ~60 s. A restart must not be refused because of them (Kafka
//! and every server using SO_REUSEADDR restarts at once); the data must read back.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::*;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn restart_on_same_port_after_sigterm_with_connected_clients() {
    let mut broker = Broker::start(1);
    create_topic(&broker, "rs", 1, &[]);
    let input: String = (0..100).map(|i| format!("m{i}\n")).collect();
    let mut c = Command::new(kcat());
    c.args(["-b", &broker.bootstrap(), "-P", "-t", "rs", "-p", "0"]);
    run_ok(c, Some(input.as_bytes()), Duration::from_secs(30));

    // Two long-lived client connections (a consumer that never exits, and its metadata conn).
    let consumer = Killed(
        Command::new(kcat())
            .args([
                "-b",
                &broker.bootstrap(),
                "-C",
                "-t",
                "rs",
                "-p",
                "0",
                "-o",
                "0",
                "-q",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kcat consumer"),
    );
    std::thread::sleep(Duration::from_secs(2));

    broker.terminate();
    // restart() retries for ~5 s; a broker that refuses the port while TIME_WAIT sockets from
    // its previous run exist fails here with "cannot listen on ...: Address already in use".
    broker.restart();
    drop(consumer);

    let mut c = Command::new(kcat());
    c.args([
        "-b",
        &broker.bootstrap(),
        "-C",
        "-e",
        "-t",
        "rs",
        "-p",
        "0",
        "-o",
        "0",
    ])
    .args(["-f", "%s\n"]);
    let out = run_ok(c, None, Duration::from_secs(30));
    assert_eq!(out, input, "data after a clean restart");
    broker.terminate();
}

/// A supervisor restarting a SIGKILLed broker at once is never refused (issue #23): the killed
/// process's listeners linger a few hundred ms after it is reaped; the broker waits them out.
/// Every acknowledged record survives all 20 crashes.
#[test]
fn sigkill_and_restart_at_once_twenty_times() {
    let mut broker = Broker::start(2);
    create_topic(&broker, "kr", 1, &[]);
    let mut acked = 0usize;
    for round in 0..20 {
        let input: String = (0..50).map(|i| format!("r{round}-{i}\n")).collect();
        let mut c = Command::new(kcat());
        c.args([
            "-b",
            &broker.bootstrap(),
            "-P",
            "-t",
            "kr",
            "-p",
            "0",
            "-X",
            "acks=all",
        ]);
        run_ok(c, Some(input.as_bytes()), Duration::from_secs(30));
        acked += 50;
        broker.kill_and_restart_at_once();
    }
    let mut c = Command::new(kcat());
    c.args([
        "-b",
        &broker.bootstrap(),
        "-C",
        "-t",
        "kr",
        "-p",
        "0",
        "-e",
        "-q",
    ]);
    let out = run_ok(c, None, Duration::from_secs(60));
    assert_eq!(
        out.lines().count(),
        acked,
        "records after 20 SIGKILL restarts"
    );
    assert!(
        !broker
            .stderr_text()
            .contains("another process already accepts"),
        "a restart was refused"
    );
}

/// A restart under a much lower fd limit than the node was created under serves every
/// partition (issue #13): the cores' open-file budgets close idle partitions' files and reopen
/// them on use (it served about a hundred of 600 before).
#[test]
fn a_restart_under_a_lower_fd_limit_serves_every_partition() {
    let mut broker = Broker::start(1);
    create_topic(&broker, "many", 600, &[("segment.bytes", "1048576")]);
    let bootstrap = broker.bootstrap();
    run_python(
        "scale_check.py",
        &[&bootstrap, "rr", "many", "0", "600", "0", "1"],
        &[],
        Duration::from_secs(240),
    );
    broker.terminate();
    // The restarted broker inherits this test process's lowered limit: 1,024 fds leave its
    // one core a budget of about 300 files, for 600 partitions' 1,800.
    let lim = libc::rlimit {
        rlim_cur: 1_024,
        rlim_max: 1_024,
    };
    // SAFETY: setrlimit on our own process (nextest runs each test in its own).
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    broker.restart();
    broker.assert_alive();
    let out = run_python(
        "scale_check.py",
        &[&bootstrap, "verify", "many", "0", "600", "600", "1"],
        &[],
        Duration::from_secs(240),
    );
    assert!(out.contains("\"verified_partitions\": 600"), "{out}");
    let fds = std::fs::read_dir(format!("/proc/{}/fd", broker.pid().unwrap()))
        .unwrap()
        .count();
    assert!(fds < 1_024, "{fds} fds open");
    broker.assert_alive();
}

/// Too many partitions never brick a restart: a node restarted with a lower `max-partitions`
/// than it holds starts, serves what the bound allows, and names the rest in its log.
#[test]
fn a_restart_with_more_partitions_than_max_partitions_still_starts() {
    let mut broker = Broker::start(1);
    create_topic(&broker, "many", 300, &[("segment.bytes", "1048576")]);
    broker.terminate();
    broker.set_extra_args(&["--max-partitions", "100"]);
    broker.restart();
    broker.assert_alive();
    let mut c = Command::new(kcat());
    c.args(["-b", &broker.bootstrap(), "-L", "-t", "many"]);
    let out = run_ok(c, None, Duration::from_secs(30));
    assert!(out.contains("300 partitions"), "{}", tail(&out, 2_000));
    // The partitions past the bound are named in the log (by the background open pass).
    broker.wait_for_log_line(&["max-partitions", "not served"], Duration::from_secs(60));
    // A partition inside the bound serves produce.
    let mut p = Command::new(kcat());
    p.args(["-b", &broker.bootstrap(), "-P", "-t", "many", "-p", "0"]);
    run_ok(p, Some(b"still works\n"), Duration::from_secs(30));
}

/// The sum over cores of gauge `name` on the admin listener at `admin`.
fn gauge_sum(admin: &str, name: &str) -> f64 {
    metric_sum(&http_request(admin, "GET", "/metrics"), name)
}

fn wait_for_gauge(admin: &str, name: &str, want: f64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = gauge_sum(admin, name);
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} is {got}, want {want}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Lazy start-up (issue #13): after a restart the partitions stay closed until something
/// opens them. With the background pass off, each is opened by its first request (a fetch,
/// a produce), which waits for it and gets its data; deleting the topic deletes the files of
/// partitions never opened; with the background pass on, every partition is opened soon after
/// ready without any request.
#[test]
fn partitions_open_on_first_use_or_in_the_background_after_a_restart() {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut broker = Broker::start_with(2, &["--metrics-listen", &admin]);
    const PARTITIONS: u32 = 12;
    create_topic(&broker, "lazy", PARTITIONS, &[]);
    for p in 0..PARTITIONS {
        kcat_write(&broker, "lazy", p, &[&format!("before-{p}")]);
    }
    let owned = gauge_sum(&admin, "ringlog_partitions");
    assert!(owned >= PARTITIONS as f64, "ringlog_partitions {owned}");
    assert_eq!(gauge_sum(&admin, "ringlog_partitions_unopened"), 0.0);

    broker.terminate();
    broker.set_extra_args(&[
        "--metrics-listen",
        &admin,
        "--background-opens-per-core",
        "0",
    ]);
    broker.restart();
    broker.assert_alive();
    assert_eq!(
        gauge_sum(&admin, "ringlog_partitions_unopened"),
        PARTITIONS as f64,
        "every partition of the topic waits for its first use"
    );
    assert_eq!(gauge_sum(&admin, "ringlog_partitions"), owned);

    // A fetch opens its partition and reads what was there before the restart.
    assert_eq!(kcat_read(&broker, "lazy", 3), ["before-3"]);
    assert_eq!(
        gauge_sum(&admin, "ringlog_partitions_unopened"),
        PARTITIONS as f64 - 1.0
    );
    // So does a produce, appending after the old record.
    kcat_write(&broker, "lazy", 5, &["after-5"]);
    assert_eq!(
        gauge_sum(&admin, "ringlog_partitions_unopened"),
        PARTITIONS as f64 - 2.0
    );
    assert_eq!(kcat_read(&broker, "lazy", 5), ["before-5", "after-5"]);

    // A second topic, restarted with the background pass on: all of it opens unasked.
    create_topic(&broker, "eager", PARTITIONS, &[]);
    // Deleting a topic deletes the files of its partitions, opened or not.
    let mut del = Command::new(ringlog_bin());
    del.args(["topic", "delete", "lazy", "--brokers", &broker.bootstrap()]);
    run_ok(del, None, Duration::from_secs(60));
    let topic_dir = broker.data_dir().join("topics").join("lazy");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while topic_dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        assert!(
            std::time::Instant::now() < deadline,
            "partition dirs of the deleted topic remain: {:?}",
            topic_dir.read_dir().map(|d| d.count())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(gauge_sum(&admin, "ringlog_partitions_unopened"), 0.0);

    broker.terminate();
    broker.set_extra_args(&["--metrics-listen", &admin]);
    broker.restart();
    broker.wait_for_log_line(&["background open pass done"], Duration::from_secs(60));
    wait_for_gauge(&admin, "ringlog_partitions_unopened", 0.0);
    let total = gauge_sum(&admin, "ringlog_partitions");
    assert!(total >= PARTITIONS as f64, "ringlog_partitions {total}");
    broker.assert_alive();
}
