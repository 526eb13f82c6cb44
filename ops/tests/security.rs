//! Security (issue #19), first part: a SASL_PLAINTEXT listener with SCRAM-SHA-512,
//! SCRAM-SHA-256 and PLAIN users made by `ringlog user` (and by Kafka's
//! AlterUserScramCredentials), confluent-kafka producing and consuming over it, a wrong
//! password refused, and nothing but the handshake read before authentication.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::tls_certs::{make_certs, make_client_cert};
use support::*;

/// A broker whose one listener is SASL_SSL with a certificate of `make_certs`, and its admin
/// address.
fn sasl_ssl_broker(cert: &str, key: &str) -> (Broker, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let broker = Broker::start_with(
        1,
        &[
            "--allow-everyone-if-no-acl-found",
            "--listener",
            "EXTERNAL=SASL_SSL://{listen}",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
            "--metrics-listen",
            &admin,
        ],
    );
    (broker, admin)
}

/// A broker whose one listener is SASL_PLAINTEXT, and its admin address.
fn sasl_broker() -> (Broker, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let broker = Broker::start_with(
        1,
        &[
            "--allow-everyone-if-no-acl-found",
            "--listener",
            "EXTERNAL=SASL_PLAINTEXT://{listen}",
            "--metrics-listen",
            &admin,
        ],
    );
    (broker, admin)
}

fn ringlog(args: &[&str]) -> std::process::Output {
    let mut c = std::process::Command::new(ringlog_bin());
    c.args(args);
    let o = run_with_timeout(c, None, Duration::from_secs(60));
    std::process::Output {
        status: o.status,
        stdout: o.stdout.into_bytes(),
        stderr: o.stderr.into_bytes(),
    }
}

fn check(args: &[&str]) -> String {
    run_python("sasl_check.py", args, &[], Duration::from_secs(120))
}

#[test]
fn scram_and_plain_users_produce_and_consume_and_a_wrong_password_is_refused() {
    let (broker, admin) = sasl_broker();
    let boot = broker.bootstrap();
    for (user, mech) in [("alice", "SCRAM-SHA-512"), ("bob", "SCRAM-SHA-256")] {
        let o = ringlog(&[
            "user",
            "create",
            user,
            "--password",
            "s3cret-pw",
            "--mechanism",
            mech,
            "--admin",
            &admin,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let list = ringlog(&["user", "list", "--admin", &admin]);
    let list = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(
        list.contains("alice") && list.contains("SCRAM-SHA-512 (4096)"),
        "{list}"
    );
    assert!(
        list.contains("bob") && list.contains("SCRAM-SHA-256"),
        "{list}"
    );

    let out = check(&[
        "roundtrip",
        &boot,
        "SCRAM-SHA-512",
        "alice",
        "s3cret-pw",
        "t512",
    ]);
    assert!(out.contains("\"ok\": true"), "{out}");
    let out = check(&[
        "roundtrip",
        &boot,
        "SCRAM-SHA-256",
        "bob",
        "s3cret-pw",
        "t256",
    ]);
    assert!(out.contains("\"ok\": true"), "{out}");
    // PLAIN is checked against the same store.
    let out = check(&["roundtrip", &boot, "PLAIN", "alice", "s3cret-pw", "tplain"]);
    assert!(out.contains("\"ok\": true"), "{out}");

    for (mech, user, pw) in [
        ("SCRAM-SHA-512", "alice", "wrong"),
        ("SCRAM-SHA-256", "alice", "s3cret-pw"), // alice has no SHA-256 credential
        ("PLAIN", "nobody", "s3cret-pw"),
    ] {
        let out = check(&["refused", &boot, mech, user, pw]);
        assert!(out.contains("refused"), "{mech} {user}: {out}");
    }
    assert!(
        broker.stderr_text().contains("SASL authentication failed"),
        "the refusal is logged"
    );

    // Kafka's AlterUserScramCredentials and DescribeUserScramCredentials, as alice.
    let out = check(&[
        "scram-admin",
        &boot,
        "SCRAM-SHA-512",
        "alice",
        "s3cret-pw",
        "carol",
        "carol-pw",
    ]);
    assert!(out.contains("SCRAM_SHA_256"), "{out}");
    let out = check(&[
        "roundtrip",
        &boot,
        "SCRAM-SHA-256",
        "carol",
        "carol-pw",
        "tcarol",
    ]);
    assert!(out.contains("\"ok\": true"), "{out}");

    // Deleted users are refused.
    let o = ringlog(&["user", "delete", "bob", "--admin", &admin]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = check(&["refused", &boot, "SCRAM-SHA-256", "bob", "s3cret-pw"]);
    assert!(out.contains("refused"), "{out}");
    let o = ringlog(&["user", "delete", "bob", "--admin", &admin]);
    assert!(
        !o.status.success()
            && String::from_utf8_lossy(&o.stderr).contains("no such SCRAM credential"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn nothing_but_the_handshake_is_read_before_authentication() {
    let (broker, _admin) = sasl_broker();
    // A Metadata v1 request (no topics list: all) before any SASL step.
    let mut frame = Vec::new();
    let body: Vec<u8> = [
        &3i16.to_be_bytes()[..], // Metadata
        &1i16.to_be_bytes(),
        &7i32.to_be_bytes(),
        &(-1i16).to_be_bytes(), // null client id
        &(-1i32).to_be_bytes(), // null topics
    ]
    .concat();
    frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
    frame.extend_from_slice(&body);
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&frame).unwrap();
    let mut buf = [0u8; 16];
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the connection is closed without an answer");
    // ApiVersions is answered (clients ask it before the handshake).
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body: Vec<u8> = [
        &18i16.to_be_bytes()[..],
        &0i16.to_be_bytes(),
        &8i32.to_be_bytes(),
        &(-1i16).to_be_bytes(),
    ]
    .concat();
    s.write_all(&(body.len() as i32).to_be_bytes()).unwrap();
    s.write_all(&body).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    assert!(i32::from_be_bytes(size) > 8);
}

#[test]
fn tls_listeners_without_a_certificate_and_repeated_listener_names_are_refused() {
    for (args, want) in [
        (
            vec!["--listener", "X=SASL_SSL://127.0.0.1:1"],
            "needs --tls-cert FILE and --tls-key FILE",
        ),
        (
            vec![
                "--listener",
                "A=PLAINTEXT://127.0.0.1:1",
                "--listener",
                "A=SASL_PLAINTEXT://127.0.0.1:2",
            ],
            "given twice",
        ),
        (
            vec![
                "--listener",
                "A=PLAINTEXT://127.0.0.1:1",
                "--listener",
                "B=SASL_PLAINTEXT://127.0.0.1:2",
                "--core-direct",
                "on",
            ],
            "core-direct",
        ),
    ] {
        let mut all = vec!["serve"];
        all.extend(args);
        let o = ringlog(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{err}");
    }
}

#[test]
fn an_internal_plaintext_and_an_external_sasl_listener_each_show_their_own_endpoints() {
    let external = free_port();
    let broker = Broker::start_with(
        1,
        &[
            "--allow-everyone-if-no-acl-found",
            "--listener",
            "INTERNAL=PLAINTEXT://{listen}",
            "--listener",
            &format!("EXTERNAL=SASL_PLAINTEXT://127.0.0.1:{external}"),
        ],
    );
    // Kafka's AlterUserScramCredentials over the internal listener makes the first user
    // (the path of `kafka-configs --entity-type users`): no admin listener needed.
    let out = scram_user_over_plaintext(&broker.bootstrap(), "ext-user", "ext-pw");
    assert!(out.contains("SCRAM_SHA_256"), "{out}");
    let ext = format!("127.0.0.1:{external}");
    let out = check(&[
        "roundtrip",
        &ext,
        "SCRAM-SHA-256",
        "ext-user",
        "ext-pw",
        "ext-topic",
    ]);
    assert!(
        out.contains(&format!("\"broker_ports\": [{external}]")),
        "{out}"
    );
    // The internal listener still shows its own port, and needs no SASL.
    let md = kcat_metadata(&broker);
    assert!(md.contains(&broker.bootstrap()), "{md}");
}

fn kcat_metadata(broker: &Broker) -> String {
    let mut c = std::process::Command::new(kcat());
    c.args(["-b", &broker.bootstrap(), "-L"]);
    run_ok(c, None, Duration::from_secs(60))
}

#[test]
fn the_java_client_speaks_scram_sha_512_and_a_wrong_password_is_refused() {
    let (broker, admin) = sasl_broker();
    let o = ringlog(&[
        "user",
        "create",
        "javauser",
        "--password",
        "j4va-pw",
        "--admin",
        &admin,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let check = support::java::JavaCheck::compile("SaslCheck");
    let ok = check.run(&[&broker.bootstrap(), "javauser", "j4va-pw", "javatopic"]);
    eprintln!("{ok}");
}

#[test]
fn kcat_over_tls_and_confluent_kafka_and_java_over_sasl_ssl() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = make_certs(certs.path());
    // kcat over SSL (no SASL).
    let ssl = Broker::start_with(
        1,
        &[
            "--listener",
            "S=SSL://{listen}",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--auto-create-topics",
        ],
    );
    // Under `cargo nextest run --workspace` the library path holds the bench's own
    // librdkafka (built without OpenSSL); kcat gets the system's.
    let kcat_tls = |args: &[&str], input: Option<&[u8]>| {
        let mut c = std::process::Command::new(kcat());
        c.env_remove("LD_LIBRARY_PATH");
        c.args(["-b", &ssl.bootstrap(), "-X", "security.protocol=SSL", "-X"])
            .arg(format!("ssl.ca.location={ca}"))
            .args(args);
        run_ok(c, input, Duration::from_secs(60))
    };
    let lines: String = (0..200).map(|i| format!("tls-{i}\n")).collect();
    kcat_tls(&["-P", "-t", "secret", "-p", "0"], Some(lines.as_bytes()));
    let got = kcat_tls(
        &[
            "-C",
            "-t",
            "secret",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
        ],
        None,
    );
    assert_eq!(got, lines, "kcat reads back every record over TLS");
    // A client that does not trust the CA does not get through.
    let mut c = std::process::Command::new(kcat());
    c.env_remove("LD_LIBRARY_PATH");
    c.args([
        "-b",
        &ssl.bootstrap(),
        "-X",
        "security.protocol=SSL",
        "-L",
        "-m",
        "5",
    ]);
    let o = run_with_timeout(c, None, Duration::from_secs(60));
    assert!(
        !o.status.success(),
        "an untrusted certificate was accepted: {}",
        o.stdout
    );

    // SASL_SSL with SCRAM-SHA-512: confluent-kafka and the Java client.
    let (broker, admin) = sasl_ssl_broker(&cert, &key);
    let o = ringlog(&[
        "user",
        "create",
        "tls-user",
        "--password",
        "tls-pw",
        "--admin",
        &admin,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let env = [("SASL_CHECK_CA", ca.as_str())];
    let boot = broker.bootstrap();
    let out = run_python(
        "sasl_check.py",
        &[
            "roundtrip",
            &boot,
            "SCRAM-SHA-512",
            "tls-user",
            "tls-pw",
            "over-tls",
        ],
        &env,
        Duration::from_secs(120),
    );
    assert!(out.contains("\"ok\": true"), "{out}");
    let out = run_python(
        "sasl_check.py",
        &["refused", &boot, "SCRAM-SHA-512", "tls-user", "nope"],
        &env,
        Duration::from_secs(120),
    );
    assert!(out.contains("refused"), "{out}");
    let check = support::java::JavaCheck::compile("SaslCheck");
    eprintln!(
        "{}",
        check.run(&[&boot, "tls-user", "tls-pw", "java-over-tls", &ca])
    );
}

#[test]
fn acls_allow_deny_and_hide_by_principal_with_literal_and_prefixed_patterns() {
    let admin = format!("127.0.0.1:{}", free_port());
    // Authorization on (the default on a SASL listener): admin is a super user.
    let broker = Broker::start_with(
        1,
        &[
            "--listener",
            "EXTERNAL=SASL_PLAINTEXT://{listen}",
            "--metrics-listen",
            &admin,
            "--super-users",
            "User:admin",
        ],
    );
    for user in ["admin", "reader", "team"] {
        let o = ringlog(&[
            "user",
            "create",
            user,
            "--password",
            "acl-pw",
            "--admin",
            &admin,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let out = run_python(
        "acl_check.py",
        &[&broker.bootstrap(), "acl-pw"],
        &[],
        Duration::from_secs(240),
    );
    assert!(out.contains("\"ok\": true"), "{out}");
}

/// What Kafka's `kafka-configs --entity-type users|clients` and `kafka-acls` do, through the
/// Java Admin calls they are built on (`QuotaCheck.java`; the tools' jars are not on these
/// machines); then a produce quota of 1 MiB/s on a client id holds that client's producer to
/// it (±10 %) while another producer, running at the same time, is not held to it, and a
/// fetch quota of 1 MiB/s does the same to a consumer; a request-percentage quota throttles
/// its client's requests and no other's.
#[test]
fn client_id_quotas_hold_their_producer_and_consumer_and_not_others() {
    const QUOTA_BYTES_PER_SEC: f64 = 1_048_576.0;
    let broker = Broker::start(1);
    create_topic(&broker, "quota-t", 1, &[]);
    let check = support::java::JavaCheck::compile("QuotaCheck");
    let ok = check.run(&[
        &broker.bootstrap(),
        "slow-client",
        &QUOTA_BYTES_PER_SEC.to_string(),
        "slow-reader",
        "busy-client",
    ]);
    // request_percentage 0.01 (100 µs of core time a second) on busy-client: its Metadata
    // requests soon carry a throttle; another client id's never do.
    // The throttles of up to 50 Metadata requests, stopping after the first throttled one
    // (the connection then waits for each).
    let throttles = |client_id: &str| -> Vec<i32> {
        let mut s = TcpStream::connect(broker.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut seen = Vec::new();
        for i in 0..50i32 {
            seen.push({
                // Metadata v4: all topics (null), no auto-creation.
                let head: Vec<u8> = [
                    &3i16.to_be_bytes()[..],
                    &4i16.to_be_bytes(),
                    &i.to_be_bytes(),
                    &(client_id.len() as i16).to_be_bytes(),
                    client_id.as_bytes(),
                    &(-1i32).to_be_bytes(),
                    &[0u8],
                ]
                .concat();
                s.write_all(&(head.len() as i32).to_be_bytes()).unwrap();
                s.write_all(&head).unwrap();
                let r = read_frame(&mut s);
                // correlation id, then throttle_time_ms
                i32::from_be_bytes(r[4..8].try_into().unwrap())
            });
            if seen[seen.len() - 1] > 0 {
                break;
            }
        }
        seen
    };
    let busy = throttles("busy-client");
    assert!(
        busy.iter().any(|t| *t > 0),
        "no throttle for busy-client: {busy:?}"
    );
    let idle = throttles("idle-client");
    assert!(
        idle.iter().all(|t| *t == 0),
        "idle-client throttled: {idle:?}"
    );
    eprintln!("{ok}");
    let out = run_python(
        "quota_rate.py",
        &[&broker.bootstrap(), "quota-t", "slow-client", "fast-client"],
        &[],
        Duration::from_secs(120),
    );
    eprintln!("{out}");
    let line = out.lines().last().unwrap();
    let rate = |key: &str| -> f64 {
        let at = line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len() + 3;
        line[at..]
            .split([',', '}'])
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (slow, fast) = (rate("slow_bytes_per_s"), rate("fast_bytes_per_s"));
    assert!(
        (slow - QUOTA_BYTES_PER_SEC).abs() <= 0.1 * QUOTA_BYTES_PER_SEC,
        "the throttled producer sent {slow:.0} B/s against a quota of {QUOTA_BYTES_PER_SEC} B/s"
    );
    assert!(
        fast > 2.0 * QUOTA_BYTES_PER_SEC,
        "the other producer sent only {fast:.0} B/s"
    );
    // The fetch quota: two consumers read the backlog at once, one under 1 MiB/s.
    let out = run_python(
        "quota_rate.py",
        &[
            "fetch",
            &broker.bootstrap(),
            "quota-t",
            "slow-reader",
            "fast-reader",
        ],
        &[],
        Duration::from_secs(120),
    );
    eprintln!("{out}");
    let line = out.lines().last().unwrap();
    let rate = |key: &str| -> f64 {
        let at = line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len() + 3;
        line[at..]
            .split([',', '}'])
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (slow, fast) = (
        rate("slow_fetch_bytes_per_s"),
        rate("fast_fetch_bytes_per_s"),
    );
    assert!(
        (slow - QUOTA_BYTES_PER_SEC).abs() <= 0.1 * QUOTA_BYTES_PER_SEC,
        "the throttled consumer read {slow:.0} B/s against a quota of {QUOTA_BYTES_PER_SEC} B/s"
    );
    assert!(
        fast > 2.0 * QUOTA_BYTES_PER_SEC,
        "the other consumer read only {fast:.0} B/s"
    );
}

/// One request frame: API key, version, correlation id, null client id, `body`.
fn frame(key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let head: Vec<u8> = [
        &key.to_be_bytes()[..],
        &version.to_be_bytes(),
        &correlation_id.to_be_bytes(),
        &(-1i16).to_be_bytes(),
    ]
    .concat();
    let len = (head.len() + body.len()) as i32;
    [&len.to_be_bytes()[..], &head, body].concat()
}

/// Reads one response frame's body (after its size).
fn read_frame(s: &mut TcpStream) -> Vec<u8> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).unwrap();
    body
}

/// KIP-368: with `--connections-max-reauth-ms`, SaslAuthenticate gives the session's
/// lifetime; the Java client re-authenticates on its connection as records go on past it;
/// a raw client that does not, and sends a request after its session ended, is disconnected.
#[test]
fn sessions_end_and_the_java_client_re_authenticates() {
    let admin = format!("127.0.0.1:{}", free_port());
    let broker = Broker::start_with(
        1,
        &[
            "--allow-everyone-if-no-acl-found",
            "--listener",
            "EXTERNAL=SASL_PLAINTEXT://{listen}",
            "--metrics-listen",
            &admin,
            "--connections-max-reauth-ms",
            "1500",
        ],
    );
    let o = ringlog(&[
        "user",
        "create",
        "reauth",
        "--password",
        "re-pw",
        "--admin",
        &admin,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A raw PLAIN session.
    let mut s = TcpStream::connect(broker.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mechanism = [&5i16.to_be_bytes()[..], b"PLAIN"].concat();
    s.write_all(&frame(17, 1, 1, &mechanism)).unwrap();
    let hs = read_frame(&mut s);
    assert_eq!(&hs[4..6], &[0, 0], "handshake error code");
    let token = b"\0reauth\0re-pw";
    let auth = [&(token.len() as i32).to_be_bytes()[..], token].concat();
    s.write_all(&frame(36, 1, 2, &auth)).unwrap();
    let r = read_frame(&mut s);
    assert_eq!(&r[4..6], &[0, 0], "authenticate error code: {r:?}");
    // The error message (null or empty), the auth bytes (empty), then the session lifetime.
    let msg_len = i16::from_be_bytes([r[6], r[7]]).max(0) as usize;
    let at = 8 + msg_len;
    let auth_len = i32::from_be_bytes(r[at..at + 4].try_into().unwrap()) as usize;
    let at = at + 4 + auth_len;
    let lifetime = i64::from_be_bytes(r[at..at + 8].try_into().unwrap());
    assert_eq!(lifetime, 1500, "session_lifetime_ms");
    // Within the session a Metadata request is answered.
    let metadata = frame(3, 1, 3, &(-1i32).to_be_bytes());
    s.write_all(&metadata).unwrap();
    assert!(read_frame(&mut s).len() > 8);
    // After it, the connection closes instead.
    std::thread::sleep(Duration::from_millis(2000));
    s.write_all(&frame(3, 1, 4, &(-1i32).to_be_bytes()))
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "closed without an answer");
    // The Java client re-authenticates (SCRAM-SHA-512) as 50 records go over 6 s.
    let check = support::java::JavaCheck::compile("SaslCheck");
    let mut cmd = check.command(&[&broker.bootstrap(), "reauth", "re-pw", "reauth-t"]);
    cmd.env("SASL_CHECK_SPREAD_MS", "6000");
    let out = run_ok(cmd, None, Duration::from_secs(180));
    assert!(out.lines().any(|l| l.starts_with("OK ")), "{out}");
    let log = broker.stderr_text();
    assert!(
        log.contains("SASL re-authenticated"),
        "no re-authentication in the broker log:\n{log}"
    );
}

/// SASL/OAUTHBEARER: librdkafka's unsecured tokens when the broker allows them, RS256
/// tokens checked against a JWKS file, the token's subject as the principal (ACLs apply to
/// it), and tokens signed by another key, expired or tampered with refused.
#[test]
fn oauthbearer_tokens_from_a_jwks_file_and_unsecured_ones() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    run_python("oauth_check.py", &["keys", d], &[], Duration::from_secs(60));
    let jwks = format!("{d}/jwks.json");
    let broker = Broker::start_with(
        1,
        &[
            "--listener",
            "EXTERNAL=SASL_PLAINTEXT://{listen}",
            "--oauth-jwks-file",
            &jwks,
            "--oauth-allow-unsecured-tokens",
            "--super-users",
            "User:alice",
        ],
    );
    let out = run_python(
        "oauth_check.py",
        &["run", &broker.bootstrap(), d],
        &[],
        Duration::from_secs(240),
    );
    assert!(out.contains("\"ok\": true"), "{out}");
}

/// SSL with client certificates: the certificate's subject, mapped by a Kafka principal
/// mapping rule to its CN, is the principal (a super user, another one without ACLs); a
/// client without a certificate is refused at the handshake.
#[test]
fn client_certificates_are_principals_on_an_ssl_listener() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = make_certs(dir.path());
    for cn in ["alice", "bob"] {
        make_client_cert(dir.path(), cn);
    }
    let broker = Broker::start_with(
        1,
        &[
            "--listener",
            "EXTERNAL=SSL://{listen}",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &ca,
            "--ssl-principal-mapping-rule",
            "RULE:^CN=([^,]*),.*$/$1/",
            "--super-users",
            "User:alice",
        ],
    );
    let out = run_python(
        "mtls_check.py",
        &[&broker.bootstrap(), &ca, dir.path().to_str().unwrap()],
        &[],
        Duration::from_secs(180),
    );
    assert!(out.contains("\"ok\": true"), "{out}");
}

/// Node RPC peer authentication: a node with a cluster secret answers only node RPC frames
/// that carry the secret's MAC, and closes the connection of one without (or with a wrong
/// one); a node without a secret answers unauthenticated frames and refuses MAC'd ones.
#[test]
fn node_rpc_frames_need_the_cluster_secret() {
    let dir = tempfile::tempdir().unwrap();
    let secret = b"a-cluster-secret-of-enough-bytes-0123456789";
    let path = dir.path().join("secret");
    std::fs::write(&path, secret).unwrap();
    let with = Broker::start_with(1, &["--cluster-secret-file", path.to_str().unwrap()]);
    let without = Broker::start(1);
    // A well-formed frame of garbage: a node that takes it answers (with an error of its own).
    let answered = |broker: &Broker, frame: &[u8]| -> bool {
        let mut s = TcpStream::connect(broker.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(frame).unwrap();
        let mut size = [0u8; 4];
        s.read_exact(&mut size).is_ok()
    };
    let signed = net::node_rpc::request_frame(Some(secret), 3, b"not rkyv");
    let wrong = net::node_rpc::request_frame(
        Some(b"another-secret-of-enough-bytes-0123456789"),
        3,
        b"not rkyv",
    );
    let plain = net::node_rpc::request_frame(None, 3, b"not rkyv");
    assert!(answered(&with, &signed), "a frame with the right MAC");
    assert!(!answered(&with, &wrong), "a frame with a wrong MAC");
    assert!(!answered(&with, &plain), "a frame without a MAC");
    assert!(
        answered(&without, &plain),
        "no secret: the frame is taken as before"
    );
    assert!(
        !answered(&without, &signed),
        "no secret: a MAC'd frame is refused"
    );
    // A secret too short is a start error that says so.
    std::fs::write(&path, "short").unwrap();
    let o = ringlog(&[
        "serve",
        "--data-dir",
        dir.path().join("d").to_str().unwrap(),
        "--cluster-secret-file",
        path.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("at least 32"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `--authorizer none` is Kafka without `authorizer.class.name`. ACLs stored under the default
/// (`acls`) close a topic they name to anonymous clients; under `none` the same stored ACLs
/// are not enforced (the broker warns at start that they are not), and `kafka-acls` is refused
/// with SecurityDisabledException ("No Authorizer is configured."), on ringlog as on a Kafka
/// 4.4 peer started without an authorizer.
#[test]
fn without_an_authorizer_acls_are_off_and_kafka_acls_says_so_as_on_kafka() {
    use support::peer::KafkaPeer;
    let mut broker = Broker::start(1);
    create_topic(&broker, "locked", 1, &[]);
    kcat_write(&broker, "locked", 0, &["before"]);
    let acls = |bootstrap: &str, args: &[&str]| {
        let mut all = vec!["--bootstrap-server", bootstrap];
        all.extend_from_slice(args);
        KafkaPeer::tool("kafka-acls", &all)
    };
    let allow_alice = [
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "locked",
    ];
    let o = acls(&broker.bootstrap(), &allow_alice);
    assert!(o.status.success(), "{}\n{}", o.stdout, o.stderr);
    let topic_metadata = |b: &Broker| {
        let mut c = std::process::Command::new(kcat());
        c.args(["-b", &b.bootstrap(), "-L", "-t", "locked"]);
        run_ok(c, None, Duration::from_secs(60))
    };
    let md = topic_metadata(&broker);
    assert!(
        md.contains("Topic authorization failed"),
        "acls: anonymous is refused a named topic: {md}"
    );

    broker.set_extra_args(&["--authorizer", "none"]);
    broker.restart();
    broker.wait_for_log_line(&["1 stored ACLs are not enforced"], Duration::from_secs(30));
    let md = topic_metadata(&broker);
    assert!(
        md.contains("1 partitions"),
        "none: the stored ACL is not enforced: {md}"
    );
    assert_eq!(kcat_read(&broker, "locked", 0), vec!["before".to_string()]);

    let Some(peer) = KafkaPeer::start(&[]) else {
        return;
    };
    for args in [&allow_alice[..], &["--list"][..]] {
        for (who, bootstrap) in [("ringlog", broker.bootstrap()), ("kafka", peer.bootstrap())] {
            let o = acls(&bootstrap, args);
            let text = format!("{}{}", o.stdout, o.stderr);
            assert!(
                text.contains("SecurityDisabledException")
                    && text.contains("No Authorizer is configured"),
                "{who}: kafka-acls {args:?}: {text}"
            );
        }
    }
}
