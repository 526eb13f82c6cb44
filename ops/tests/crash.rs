//! Crash safety with a real client (issue #4, DESIGN §9): a confluent-kafka producer with
//! acks=all writes while `ringlog serve` is SIGKILLed at a random moment and restarted on the
//! same data dir; afterwards every acknowledged message must be readable at its acknowledged
//! partition and offset with the same value. Ten trials on one data dir, so each recovery also
//! re-checks everything acknowledged in earlier trials.
//!
//! `RINGLOG_TEST_SEED` reproduces the kill moments; `RINGLOG_CRASH_TRIALS` changes the count.

mod support;

use std::time::Duration;
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
        let mut producer = CrashProducer::start(
            &[&broker.bootstrap(), TOPIC, &format!("t{trial}"), "2.5"],
            broker.temp_dir().join(format!("producer-{trial}.stderr")),
        );
        // Wait for the first acknowledgement, so the kill lands while produces are in flight.
        producer.wait_first_ack(Duration::from_secs(30));
        let delay = rng.range(0, 1500);
        std::thread::sleep(Duration::from_millis(delay));
        broker.kill();
        producer.drain();
        let acked_at_kill = producer.lines.len();
        std::thread::sleep(Duration::from_millis(rng.range(0, 300)));
        broker.restart();

        // The producer keeps going against the restarted broker, then flushes and exits.
        let (done, acked) = producer.finish(Duration::from_secs(120));
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
