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
    let log = broker.stderr_text();
    assert!(
        log.contains("max-partitions") && log.contains("not served"),
        "the partitions past the bound are named in the log"
    );
    // A partition inside the bound serves produce.
    let mut p = Command::new(kcat());
    p.args(["-b", &broker.bootstrap(), "-P", "-t", "many", "-p", "0"]);
    run_ok(p, Some(b"still works\n"), Duration::from_secs(30));
}
