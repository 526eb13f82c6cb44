//! The broker's log levels as Kafka's BROKER_LOGGER config resource shows and changes them
//! (`kafka-configs --entity-type broker-loggers`, KIP-412): one logger per ringlog crate that
//! logs (`net`, `engine`, `meta`, ...), the libraries whose logs it filters, and `root`, each
//! at one of Kafka's levels (OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE). A logger with no
//! level of its own logs at its parent's (`ringlog::trace` at `ringlog`'s), and at the end at
//! root's. A change applies at once to the process's log filter, so to every core, and lasts
//! until the process ends: as in Kafka, it is not stored.
//!
//! The filter is the one `ringlog serve` starts with (`RINGLOG_LOG`): its plain `level` and
//! `target=level` directives become the levels here; any other directive (a span or field
//! filter) is kept as it is, after them. The levels sit behind a mutex: they are read and
//! changed by the admin requests only, never on the data path.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

/// The root logger: the level of every logger with none of its own.
pub const ROOT_LOGGER: &str = "root";

/// The loggers, sorted: ringlog's crates that log (`ringlog` is the `ringlog` binary, with its
/// request log `ringlog::requests` and request spans `ringlog::trace`), and `openraft`.
pub const LOGGERS: &[&str] = &[
    "engine",
    "fanout",
    "kfc4",
    "meta",
    "net",
    "openraft",
    "ringlog",
    "ringlog::requests",
    "ringlog::trace",
    ROOT_LOGGER,
];

/// Kafka's log levels (`LogLevelConfig`), as a logger's value shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Off,
    Fatal,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl Level {
    const ALL: [Level; 7] = [
        Level::Off,
        Level::Fatal,
        Level::Error,
        Level::Warn,
        Level::Info,
        Level::Debug,
        Level::Trace,
    ];

    /// Kafka's name (`INFO`).
    pub fn name(self) -> &'static str {
        match self {
            Level::Off => "OFF",
            Level::Fatal => "FATAL",
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }

    /// The filter directive's level (tracing has no FATAL: its errors are ERROR).
    fn directive(self) -> &'static str {
        match self {
            Level::Off => "off",
            Level::Fatal | Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        }
    }

    /// A Kafka level name, or a filter directive's level (any case).
    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// A change the levels refuse: INVALID_CONFIG with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoggerRefusal {
    #[error("logger {0:?} does not exist: the loggers are {1}")]
    UnknownLogger(String, String),
    #[error("{logger}={value:?} is not a log level: use one of OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE")]
    BadLevel { logger: String, value: String },
    #[error("the root logger's level cannot be removed, only set")]
    RootRemoved,
    #[error("the broker's log filter could not be changed: {0}")]
    Apply(String),
    #[error(
        "this process has no log filter to change (the levels are managed by `ringlog serve`)"
    )]
    NotInstalled,
}

/// One change of a BROKER_LOGGER request: a level to set, or `None` to remove the logger's
/// own level (it then logs at its parent's).
pub type LoggerChange = (String, Option<String>);

type Apply = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// The levels and the way to put a filter into effect.
struct LogLevels {
    levels: Mutex<Levels>,
    apply: Apply,
}

#[derive(Debug, Clone, PartialEq)]
struct Levels {
    /// Each logger's own level (root's always).
    own: BTreeMap<&'static str, Level>,
    /// The start filter's directives that are not a plain level (span and field filters).
    kept: Vec<String>,
}

impl Levels {
    fn parse(directives: &str) -> Levels {
        let mut own = BTreeMap::from([(ROOT_LOGGER, Level::Info)]);
        let mut kept = Vec::new();
        for d in directives
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            let (target, level) = match d.split_once('=') {
                Some((t, l)) => (t, l),
                None => (ROOT_LOGGER, d),
            };
            match (LOGGERS.iter().find(|l| **l == target), Level::parse(level)) {
                (Some(&logger), Some(level)) => {
                    own.insert(logger, level);
                }
                _ => kept.push(d.to_string()),
            }
        }
        Levels { own, kept }
    }

    /// The filter directives these levels make.
    fn directives(&self) -> String {
        let root = self.own.get(ROOT_LOGGER).copied().unwrap_or(Level::Info);
        let mut out = vec![root.directive().to_string()];
        for (logger, level) in self.own.iter().filter(|(l, _)| **l != ROOT_LOGGER) {
            out.push(format!("{logger}={}", level.directive()));
        }
        out.extend(self.kept.iter().cloned());
        out.join(",")
    }

    /// `logger`'s level: its own, else its nearest parent's (`a::b` → `a`), else root's.
    fn effective(&self, logger: &str) -> Level {
        let mut name = logger;
        loop {
            if let Some(l) = self.own.get(name) {
                return *l;
            }
            match name.rsplit_once("::") {
                Some((parent, _)) => name = parent,
                None => return self.own.get(ROOT_LOGGER).copied().unwrap_or(Level::Info),
            }
        }
    }

    /// These levels with `changes` made, or the first change refused.
    fn changed(&self, changes: &[LoggerChange]) -> Result<Levels, LoggerRefusal> {
        let mut next = self.clone();
        for (logger, value) in changes {
            let Some(&known) = LOGGERS.iter().find(|l| **l == logger.as_str()) else {
                return Err(LoggerRefusal::UnknownLogger(
                    logger.clone(),
                    LOGGERS.join(", "),
                ));
            };
            match value {
                Some(v) => {
                    let level = Level::parse(v).ok_or_else(|| LoggerRefusal::BadLevel {
                        logger: logger.clone(),
                        value: v.clone(),
                    })?;
                    next.own.insert(known, level);
                }
                None if known == ROOT_LOGGER => return Err(LoggerRefusal::RootRemoved),
                None => {
                    next.own.remove(known);
                }
            }
        }
        Ok(next)
    }
}

static LOG_LEVELS: OnceLock<LogLevels> = OnceLock::new();

/// Called once by the process that owns the log filter, with the directives it started with
/// and the way to put new directives into effect. A second call is ignored.
pub fn install(
    directives: &str,
    apply: impl Fn(&str) -> Result<(), String> + Send + Sync + 'static,
) {
    let _ = LOG_LEVELS.set(LogLevels {
        levels: Mutex::new(Levels::parse(directives)),
        apply: Box::new(apply),
    });
}

/// Every logger and its level (Kafka's name), sorted by logger; empty where no filter was
/// installed.
pub fn describe() -> Vec<(&'static str, &'static str)> {
    let Some(l) = LOG_LEVELS.get() else {
        return Vec::new();
    };
    let levels = l.levels.lock().unwrap_or_else(|e| e.into_inner());
    LOGGERS
        .iter()
        .map(|&logger| (logger, levels.effective(logger).name()))
        .collect()
}

/// Makes `changes` (all or none), unless `validate_only`.
pub fn alter(changes: &[LoggerChange], validate_only: bool) -> Result<(), LoggerRefusal> {
    let l = LOG_LEVELS.get().ok_or(LoggerRefusal::NotInstalled)?;
    let mut levels = l.levels.lock().unwrap_or_else(|e| e.into_inner());
    let next = levels.changed(changes)?;
    if validate_only {
        return Ok(());
    }
    (l.apply)(&next.directives()).map_err(LoggerRefusal::Apply)?;
    tracing::info!(filter = %next.directives(), "log levels changed");
    *levels = next;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(logger: &str, level: Option<&str>) -> LoggerChange {
        (logger.to_string(), level.map(str::to_string))
    }

    #[test]
    fn the_start_filter_becomes_levels_and_back() {
        let l = Levels::parse("info,openraft=warn,ringlog::trace=trace,net[conn]=debug");
        assert_eq!(l.effective(ROOT_LOGGER), Level::Info);
        assert_eq!(l.effective("openraft"), Level::Warn);
        assert_eq!(l.effective("net"), Level::Info, "root's");
        assert_eq!(l.effective("ringlog::requests"), Level::Info);
        assert_eq!(l.effective("ringlog::trace"), Level::Trace);
        assert_eq!(
            l.kept,
            vec!["net[conn]=debug".to_string()],
            "a span filter is kept"
        );
        assert_eq!(
            l.directives(),
            "info,openraft=warn,ringlog::trace=trace,net[conn]=debug"
        );
    }

    #[test]
    fn changes_set_remove_and_refuse_in_kafkas_terms() {
        let l = Levels::parse("info");
        let next = l
            .changed(&[
                change("net", Some("DEBUG")),
                change("ringlog", Some("warn")),
            ])
            .unwrap();
        assert_eq!(next.effective("net"), Level::Debug);
        assert_eq!(
            next.effective("ringlog::trace"),
            Level::Warn,
            "the parent's"
        );
        assert_eq!(next.directives(), "info,net=debug,ringlog=warn");
        let back = next.changed(&[change("net", None)]).unwrap();
        assert_eq!(back.effective("net"), Level::Info, "removed: root's again");
        let fatal = l.changed(&[change(ROOT_LOGGER, Some("FATAL"))]).unwrap();
        assert_eq!(fatal.effective("engine"), Level::Fatal);
        assert_eq!(fatal.directives(), "error", "tracing's nearest level");
        assert!(matches!(
            l.changed(&[change("kafka.server", Some("INFO"))]),
            Err(LoggerRefusal::UnknownLogger(..))
        ));
        assert!(matches!(
            l.changed(&[change("net", Some("LOUD"))]),
            Err(LoggerRefusal::BadLevel { .. })
        ));
        assert_eq!(
            l.changed(&[change(ROOT_LOGGER, None)]),
            Err(LoggerRefusal::RootRemoved)
        );
    }

    #[test]
    fn loggers_are_sorted_and_unique() {
        let mut sorted = LOGGERS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, LOGGERS);
    }
}
