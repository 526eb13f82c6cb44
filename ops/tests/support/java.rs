//! The genuine Apache Kafka 4.4 Java code (kafka-clients, Streams, connect-*, MirrorMaker 2)
//! for the tests that run the Java client, a Streams application or a Connect worker: the jars
//! of the reference peer, which `scripts/kafka-peer.sh` fetches from Maven Central into a cache
//! outside the repository (see `docs/java-client.md`).

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::peer::{peer_script, PEER_START_TIMEOUT, PEER_UNAVAILABLE_EXIT};
use super::{run_ok, run_with_timeout, target_dir};

pub fn java() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("java"))
        .find(|p| p.is_file())
        .expect("java (17+) is needed: apt-get install openjdk-17-jre-headless")
}

/// The peer's classpath (`kafka-peer.sh classpath`: Kafka 4.4.0's clients, Streams, tools and
/// Connect runtime), fetched once per machine.
pub fn kafka_classpath() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| peer_classpath(&[])).clone()
}

/// The classpath of a Connect worker with the FileStream connectors and MirrorMaker 2
/// (`kafka-peer.sh classpath connect`: Kafka 4.4.0 published neither, so these are the newest
/// that Maven Central has, with their own runtime and clients).
pub fn connect_classpath() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| peer_classpath(&["connect"])).clone()
}

/// The log4j 2 configuration of a Connect JVM (INFO to its console, config dumps left out),
/// written into `dir`.
pub fn connect_log4j(dir: &Path) -> PathBuf {
    let log4j = dir.join("log4j2.properties");
    fs::write(
        &log4j,
        "rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
",
    )
    .unwrap();
    log4j
}

/// A Connect JVM (`main`: ConnectDistributed, MirrorMaker) on the Connect classpath with
/// `properties`, logging with `log4j` into `log` (appended to); spawned, not waited for.
pub fn spawn_connect_jvm(main: &str, properties: &Path, log4j: &Path, log: &Path) -> Child {
    let mut out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    writeln!(out, "=== test harness: starting {main} ===").unwrap();
    Command::new(java())
        .args([
            "-Xms64m",
            "-Xmx512m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
        ])
        .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
        .arg("-cp")
        .arg(connect_classpath())
        .arg(main)
        .arg(properties)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("spawn java")
}

/// These tests cannot run without the jars: where Maven Central cannot be reached the panic
/// says so.
fn peer_classpath(which: &[&str]) -> String {
    let mut c = Command::new("bash");
    c.arg(peer_script()).arg("classpath").args(which);
    let out = run_with_timeout(c, None, PEER_START_TIMEOUT);
    match out.status.code() {
        Some(0) => out.stdout.trim().to_string(),
        Some(PEER_UNAVAILABLE_EXIT) => panic!(
            "this test runs Apache Kafka's Java code, whose jars come from Maven Central, \
             and they cannot be had here: {}",
            out.stderr.trim()
        ),
        _ => panic!("kafka-peer.sh classpath {which:?} failed:\n{}", out.stderr),
    }
}

/// A Java check program of `tests/clients/` (`NAME.java`, with the shared `Check.java`),
/// compiled against the Kafka 4.4 jars into `target/test-java/NAME/`.
pub struct JavaCheck {
    name: String,
    classpath: String,
}

impl JavaCheck {
    pub fn compile(name: &str) -> JavaCheck {
        let jars = kafka_classpath();
        let classes = target_dir().join("test-java").join(name);
        fs::create_dir_all(&classes).unwrap();
        // Tests of one program run at once: one compiles (under `flock`), the others wait and
        // find its classes newer than the sources.
        let lock = File::create(classes.join(".lock")).expect("create javac lock");
        // SAFETY: flock on a valid fd we own; released when `lock` is dropped.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0, "flock: {}", std::io::Error::last_os_error());
        let sources = [
            super::clients_dir().join(format!("{name}.java")),
            super::clients_dir().join("Check.java"),
        ];
        let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
        let built = modified(&classes.join(format!("{name}.class")));
        let stale = sources
            .iter()
            .any(|src| built.is_none() || modified(src) > built);
        if stale {
            let mut javac = Command::new("javac");
            javac
                .arg("-d")
                .arg(&classes)
                .args(["-cp", &jars])
                .args(&sources);
            run_ok(javac, None, Duration::from_secs(180));
        }
        drop(lock);
        JavaCheck {
            name: name.to_string(),
            classpath: format!("{jars}:{}", classes.display()),
        }
    }

    /// The command that runs it with `args` (for a caller that spawns it).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut run = Command::new(java());
        run.arg("-cp")
            .arg(&self.classpath)
            .arg(&self.name)
            .args(args);
        run
    }

    /// Runs it with `args`; returns its "OK ..." line (panics with its output otherwise).
    pub fn run(&self, args: &[&str]) -> String {
        let out = run_ok(self.command(args), None, Duration::from_secs(180));
        out.lines()
            .find(|l| l.starts_with("OK "))
            .unwrap_or_else(|| panic!("{} {args:?} gave no OK line:\n{out}", self.name))
            .to_string()
    }
}

/// Compiles and runs `NAME.java` once with `BOOTSTRAP`; its "OK ..." line.
pub fn run_check(name: &str, bootstrap: &str) -> String {
    JavaCheck::compile(name).run(&[bootstrap])
}
