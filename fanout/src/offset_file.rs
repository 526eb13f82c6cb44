//! The cursor's whole durable state: `fanout-<child>.offset` in the parent partition's
//! directory, `{"epoch":"…","next_offset":N}`, replaced by temp + fsync + rename (+ dir fsync)
//! through `engine::io::write_atomic`, and only after the slab below `next_offset` is durable in
//! the child.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Prefix and suffix of cursor offset file names.
pub const FILE_PREFIX: &str = "fanout-";
pub const FILE_SUFFIX: &str = ".offset";

/// The content of one offset file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CursorFile {
    /// The attachment this position belongs to (16 hex characters).
    pub epoch: String,
    /// The first parent offset not yet committed to the child.
    pub next_offset: u64,
}

/// `fanout-<child>.offset`.
pub fn file_name(child: &str) -> String {
    format!("{FILE_PREFIX}{child}{FILE_SUFFIX}")
}

/// The child a cursor file name belongs to, if `name` is one.
pub fn child_of_file_name(name: &str) -> Option<&str> {
    name.strip_prefix(FILE_PREFIX)?
        .strip_suffix(FILE_SUFFIX)
        .filter(|c| !c.is_empty())
}

pub fn path(partition_dir: &Path, child: &str) -> PathBuf {
    partition_dir.join(file_name(child))
}

/// Reads the offset file; `None` if there is none. A file that does not parse is an
/// `InvalidData` error (the caller treats it like a foreign epoch: never resumed).
pub fn load(partition_dir: &Path, child: &str) -> io::Result<Option<CursorFile>> {
    let p = path(partition_dir, child);
    let Some(bytes) = engine::io::read_small(&p)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", p.display())))
}

/// Durably replaces the offset file (temp + fsync + rename + dir fsync).
pub fn store(partition_dir: &Path, child: &str, state: &CursorFile) -> io::Result<()> {
    let bytes = serde_json::to_vec(state).expect("a string and a number always serialize");
    engine::io::write_atomic(&path(partition_dir, child), &bytes)
}

/// Removes the offset file (detach, orphan sweep); absent is fine.
pub fn remove(partition_dir: &Path, child: &str) -> io::Result<()> {
    match std::fs::remove_file(path(partition_dir, child)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The children that have an offset file in `partition_dir` (for the orphan sweep).
pub fn children_with_files(partition_dir: &Path) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(partition_dir)? {
        let name = e?.file_name();
        if let Some(c) = name.to_str().and_then(child_of_file_name) {
            out.push(c.to_string());
        }
    }
    out.sort();
    Ok(out)
}

/// Where a starting cursor begins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// The file belongs to this attachment: resume at its offset.
    Resume(u64),
    /// No file: a fresh attachment, start at the link's attach offset (no backfill).
    Fresh(u64),
    /// The file belongs to another epoch (or is unreadable): never resumed. Starting at the
    /// attach offset overwrites it (tail-anchoring), which needs the metastore leader to
    /// confirm the epoch first; unconfirmed, the reconciler retries a second later.
    AnchorNeedsConfirmation(u64),
}

/// Decides where a cursor of attachment `epoch` starts, given what the file holds.
pub fn decide_start(
    file: &io::Result<Option<CursorFile>>,
    epoch: &str,
    attach_offset: u64,
) -> Start {
    match file {
        Ok(Some(f)) if f.epoch == epoch => Start::Resume(f.next_offset),
        Ok(None) => Start::Fresh(attach_offset),
        _ => Start::AnchorNeedsConfirmation(attach_offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(file_name("audit.v2"), "fanout-audit.v2.offset");
        assert_eq!(
            child_of_file_name("fanout-audit.v2.offset"),
            Some("audit.v2")
        );
        assert_eq!(child_of_file_name("fanout-.offset"), None);
        assert_eq!(child_of_file_name("00000000000000000000.log"), None);
        assert_eq!(child_of_file_name("fanout-a.tmp"), None);
    }

    #[test]
    fn store_load_exact_format_and_sweep_listing() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load(d.path(), "a").unwrap(), None);
        let s = CursorFile {
            epoch: "67953471cc57a32a".into(),
            next_offset: 98332,
        };
        store(d.path(), "a", &s).unwrap();
        store(d.path(), "b.c", &s).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("fanout-a.offset")).unwrap(),
            r#"{"epoch":"67953471cc57a32a","next_offset":98332}"#
        );
        assert_eq!(load(d.path(), "a").unwrap(), Some(s));
        assert_eq!(children_with_files(d.path()).unwrap(), vec!["a", "b.c"]);
        remove(d.path(), "a").unwrap();
        remove(d.path(), "a").unwrap();
        assert_eq!(children_with_files(d.path()).unwrap(), vec!["b.c"]);
        std::fs::write(d.path().join("fanout-bad.offset"), b"{garbage").unwrap();
        assert_eq!(
            load(d.path(), "bad").unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn stale_epoch_is_never_resumed() {
        let f = |e: &str, n| {
            Ok(Some(CursorFile {
                epoch: e.into(),
                next_offset: n,
            }))
        };
        assert_eq!(decide_start(&f("aa", 7), "aa", 3), Start::Resume(7));
        assert_eq!(
            decide_start(&f("bb", 7), "aa", 3),
            Start::AnchorNeedsConfirmation(3)
        );
        assert_eq!(decide_start(&Ok(None), "aa", 3), Start::Fresh(3));
        let bad = Err(io::Error::new(io::ErrorKind::InvalidData, "x"));
        assert_eq!(
            decide_start(&bad, "aa", 3),
            Start::AnchorNeedsConfirmation(3)
        );
    }
}
