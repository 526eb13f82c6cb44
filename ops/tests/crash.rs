//! Crash safety with a real client (issue #4, DESIGN §9): a confluent-kafka producer with
//! acks=all writes while `ringlog serve` is SIGKILLed at a random moment and restarted on the
//! same data dir; afterwards every acknowledged message must be readable at its acknowledged
//! partition and offset with the same value. Ten trials on one data dir, so each recovery also
//! re-checks everything acknowledged in earlier trials.
//!
//! `RINGLOG_TEST_SEED` reproduces the kill moments; `RINGLOG_CRASH_TRIALS` changes the count.

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::*;

const TOPIC: &str = "crash";
const PARTITIONS: u32 = 3;

#[test]
fn acknowledged_messages_survive_sigkill() {
    let trials: usize = std::env::var("RINGLOG_CRASH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let mut rng = Rng::from_env_or_time("crash test");
    let mut broker = Broker::start(2);
    create_topic(&broker, TOPIC, PARTITIONS, &[]);
    let acks_path = broker.temp_dir().join("acked.txt");
    let mut all_acked: Vec<String> = Vec::new();

    for trial in 0..trials {
        let mut cmd = python_cmd(
            "crash_producer.py",
            &[&broker.bootstrap(), TOPIC, &format!("t{trial}"), "2.5"],
        );
        let stderr_path = broker.temp_dir().join(format!("producer-{trial}.stderr"));
        cmd.stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .stdin(Stdio::null());
        let mut producer = ChildGuard(cmd.spawn().expect("spawn crash_producer.py"));
        let stdout = producer.0.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines: Vec<String> = Vec::new();

        // Wait for the first acknowledgement, so the kill lands while produces are in flight.
        let t0 = Instant::now();
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let first = l.starts_with("ACK ");
                    lines.push(l);
                    if first {
                        break;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => panic!(
                    "trial {trial}: producer ended without any acknowledgement:\n{}\n{}",
                    lines.join("\n"),
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                ),
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "trial {trial}: no acknowledgement within 30 s\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        let delay = rng.range(0, 1500);
        std::thread::sleep(Duration::from_millis(delay));
        broker.kill();
        lines.extend(rx.try_iter());
        let acked_at_kill = lines.len();
        std::thread::sleep(Duration::from_millis(rng.range(0, 300)));
        broker.restart();

        // The producer keeps going against the restarted broker, then flushes and exits.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if producer.0.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "trial {trial}: producer did not finish within 120 s of the restart\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        reader.join().unwrap();
        lines.extend(rx.try_iter());
        let done = lines
            .iter()
            .find(|l| l.starts_with("DONE "))
            .unwrap_or_else(|| {
                panic!(
                    "trial {trial}: producer did not finish cleanly:\n{}\n{}",
                    tail(&lines.join("\n"), 4000),
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                )
            });
        let acked: Vec<String> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("ACK ").map(str::to_string))
            .collect();
        eprintln!(
            "trial {trial}: killed {delay} ms after the first ack (~{acked_at_kill} lines then); {done}"
        );
        all_acked.extend(acked);
        std::fs::write(&acks_path, all_acked.join("\n") + "\n").unwrap();

        let out = run_python(
            "verify_acked.py",
            &[
                &broker.bootstrap(),
                TOPIC,
                &PARTITIONS.to_string(),
                acks_path.to_str().unwrap(),
            ],
            &[],
            Duration::from_secs(120),
        );
        eprintln!("trial {trial}: verify: {}", out.trim());
        broker.assert_alive();
    }
    broker.terminate();
}
