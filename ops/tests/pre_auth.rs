//! Clients of a SASL listener that never authenticate cannot starve the ones that do. While
//! 24 connections keep announcing 64 MiB request frames (and trickling bytes after them) and
//! 24 more send a SaslHandshake frame one byte a second (slowloris), an authenticated
//! producer and consumer (confluent-kafka over SCRAM) keep working and a Metadata on the
//! broker's PLAINTEXT listener is answered. Every flooding connection is closed: an announced
//! frame over `sasl-server-max-receive-bytes` at once, before its body is read or budgeted;
//! a client that has not authenticated within `sasl-authentication-deadline-ms`, at the
//! deadline. The latencies with and without the flood are printed (a benchmark's business, not
//! this test's); the test asserts that every record is acknowledged and read back, in order,
//! within the client's own bounds.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use support::*;

/// Connections of each kind of flood.
const FLOODERS: usize = 24;
/// The request size each big-frame flooder announces.
const ANNOUNCED_FRAME_BYTES: i32 = 64 << 20;
/// The broker's authentication deadline in this test.
const DEADLINE_MS: u64 = 3_000;
/// How much later than its bound a close may be seen (timers, a loaded machine, the
/// flooder's own 200 ms reads).
const CLOSE_SLACK: Duration = Duration::from_secs(3);
/// A flooder whose connection was closed connects again after this (the flood stays on
/// while the latency run lasts; a storm of new connections is another attack, bounded by
/// `max-connections-per-ip`).
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);
/// Records each latency run produces and reads back, one at a time.
const LATENCY_RECORDS: &str = "400";
/// How long the PLAINTEXT listener's Metadata may take under the flood (it took over 5 s,
/// never answered, before unauthenticated frames had bounds).
const METADATA_LIMIT: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug)]
enum Flood {
    /// Announces a 64 MiB frame, then trickles a byte every 200 ms.
    BigFrame,
    /// Sends a SaslHandshake frame one byte a second.
    Slowloris,
}

/// A flooder: reconnects (after `RECONNECT_PAUSE`) whenever the broker closes it, until
/// `stop`; returns the longest
/// time any of its connections stayed open.
fn flood(addr: String, kind: Flood, stop: Arc<AtomicBool>) -> JoinHandle<Duration> {
    std::thread::spawn(move || {
        let mut longest = Duration::ZERO;
        // SaslHandshake v1, mechanism "PLAIN" (never completed).
        let handshake: Vec<u8> = {
            let body: Vec<u8> = [
                &17i16.to_be_bytes()[..],
                &1i16.to_be_bytes(),
                &1i32.to_be_bytes(),
                &(-1i16).to_be_bytes(),
                &5i16.to_be_bytes(),
                b"PLAIN",
            ]
            .concat();
            [&(body.len() as i32).to_be_bytes()[..], &body].concat()
        };
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut s) = TcpStream::connect(&addr) else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let t0 = Instant::now();
            let (first, step): (Vec<u8>, Duration) = match kind {
                Flood::BigFrame => (
                    ANNOUNCED_FRAME_BYTES.to_be_bytes().to_vec(),
                    Duration::from_millis(200),
                ),
                Flood::Slowloris => (Vec::new(), Duration::from_secs(1)),
            };
            let mut sent = 0usize;
            let mut closed = s.write_all(&first).is_err();
            let mut last_write = Instant::now() - step;
            while !closed && !stop.load(Ordering::Relaxed) {
                if last_write.elapsed() >= step {
                    let byte = match kind {
                        Flood::BigFrame => 0u8,
                        Flood::Slowloris => handshake[sent % handshake.len()],
                    };
                    closed = s.write_all(&[byte]).is_err();
                    sent += 1;
                    last_write = Instant::now();
                }
                let mut buf = [0u8; 64];
                match s.read(&mut buf) {
                    Ok(0) => closed = true,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => closed = true,
                }
            }
            if closed {
                longest = longest.max(t0.elapsed());
                std::thread::sleep(RECONNECT_PAUSE);
            }
        }
        longest
    })
}

/// A one-core broker with `setting` (a config file line, written into `dir`), every resource
/// open to whoever has authenticated, and `args` (its listeners).
fn broker_with(dir: &std::path::Path, setting: &str, args: &[&str]) -> Broker {
    let config = dir.join("ringlog.toml");
    std::fs::write(&config, format!("{setting}\n")).unwrap();
    let mut all = vec![
        "--config",
        config.to_str().unwrap(),
        "--allow-everyone-if-no-acl-found",
    ];
    all.extend_from_slice(args);
    Broker::start_with(1, &all)
}

/// The acknowledgement and end-to-end p99 (ms) of a latency run.
fn p99s(json: &str) -> (f64, f64) {
    let v: serde_json::Value = serde_json::from_str(json.trim())
        .unwrap_or_else(|e| panic!("not a latency summary ({e}): {json}"));
    assert_eq!(v["ok"], true, "{json}");
    (
        v["ack_ms"]["p99"].as_f64().unwrap(),
        v["e2e_ms"]["p99"].as_f64().unwrap(),
    )
}

#[test]
fn unauthenticated_floods_do_not_starve_authenticated_clients() {
    let sasl_port = free_port();
    let sasl = format!("127.0.0.1:{sasl_port}");
    let dir = tempfile::tempdir().unwrap();
    // One core: every connection, flooding or not, is served by the same executor.
    let mut broker = broker_with(
        dir.path(),
        &format!("sasl-authentication-deadline-ms = {DEADLINE_MS}"),
        &[
            "--listener",
            "INTERNAL=PLAINTEXT://{listen}",
            "--listener",
            &format!("EXTERNAL=SASL_PLAINTEXT://{sasl}"),
        ],
    );
    let out = scram_user_over_plaintext(&broker.bootstrap(), "lat-user", "lat-pw");
    assert!(out.contains("SCRAM_SHA_256"), "{out}");
    let latency = || {
        run_python(
            "sasl_check.py",
            &[
                "latency",
                &sasl,
                "SCRAM-SHA-256",
                "lat-user",
                "lat-pw",
                "lat",
                LATENCY_RECORDS,
            ],
            &[],
            Duration::from_secs(240),
        )
    };
    let quiet = latency();
    let (quiet_ack, quiet_e2e) = p99s(&quiet);

    let stop = Arc::new(AtomicBool::new(false));
    let flooders: Vec<(Flood, JoinHandle<Duration>)> = [Flood::BigFrame, Flood::Slowloris]
        .into_iter()
        .flat_map(|kind| std::iter::repeat_n(kind, FLOODERS))
        .map(|kind| (kind, flood(sasl.clone(), kind, stop.clone())))
        .collect();
    // Past the first deadline: the slowloris connections have been open that long.
    std::thread::sleep(Duration::from_millis(DEADLINE_MS + 500));
    let t0 = Instant::now();
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(METADATA_LIMIT)).unwrap();
    let md: MetadataResponse = support::wire::call(&mut s, 3, 9, 1, &MetadataRequest::default());
    let metadata_took = t0.elapsed();
    assert!(
        !md.brokers.is_empty() && metadata_took < METADATA_LIMIT,
        "Metadata on the PLAINTEXT listener under the flood: {metadata_took:?}"
    );
    let flooded = latency();
    let (flood_ack, flood_e2e) = p99s(&flooded);
    stop.store(true, Ordering::Relaxed);
    for (kind, h) in flooders {
        let longest = h.join().unwrap();
        let bound = match kind {
            // Closed on the 4-byte size: at once.
            Flood::BigFrame => CLOSE_SLACK,
            Flood::Slowloris => Duration::from_millis(DEADLINE_MS) + CLOSE_SLACK,
        };
        assert!(
            longest <= bound,
            "a {kind:?} connection stayed open {longest:?} (bound {bound:?})"
        );
    }
    eprintln!(
        "authenticated client p99 (ms): without the flood ack {quiet_ack} e2e {quiet_e2e}; \
         under {FLOODERS} big-frame + {FLOODERS} slowloris connections ack {flood_ack} e2e \
         {flood_e2e}; PLAINTEXT Metadata under the flood {metadata_took:?}\n  quiet: {}\n  \
         flood: {}",
        quiet.trim(),
        flooded.trim()
    );
    broker.assert_alive();
    broker.terminate();
}

/// A TLS handshake that stalls (nothing sent, or a ClientHello record announced and never
/// sent) is closed within the request timeout, before any SASL step.
#[test]
fn a_stalled_tls_handshake_is_closed_within_the_request_timeout() {
    const REQUEST_TIMEOUT_MS: u64 = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let (_ca, cert, key) = support::tls_certs::make_certs(dir.path());
    let mut broker = broker_with(
        dir.path(),
        &format!("request-timeout-ms = {REQUEST_TIMEOUT_MS}"),
        &[
            "--listener",
            "EXTERNAL=SASL_SSL://{listen}",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ],
    );
    // A TLS record header of a 512-byte handshake message, and nothing after it.
    let announced_hello: &[u8] = &[0x16, 0x03, 0x01, 0x02, 0x00];
    for first in [&[][..], announced_hello] {
        let mut s = TcpStream::connect(broker.addr()).unwrap();
        s.set_read_timeout(Some(
            Duration::from_millis(REQUEST_TIMEOUT_MS) + CLOSE_SLACK,
        ))
        .unwrap();
        s.write_all(first).unwrap();
        let t0 = Instant::now();
        let mut buf = [0u8; 64];
        let closed = matches!(s.read(&mut buf), Ok(0) | Err(_)) && {
            // A timed-out read is not a close.
            t0.elapsed() < Duration::from_millis(REQUEST_TIMEOUT_MS) + CLOSE_SLACK
        };
        assert!(
            closed,
            "a handshake that sent {first:?} was not closed within {REQUEST_TIMEOUT_MS} ms \
             (+{CLOSE_SLACK:?}): {:?}",
            t0.elapsed()
        );
        eprintln!(
            "stalled handshake after {first:?}: closed in {:?}",
            t0.elapsed()
        );
    }
    broker.assert_alive();
    broker.terminate();
}
