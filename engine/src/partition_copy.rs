//! The files of a partition copied to another node (a partition move): the owner's side reads
//! its directory's files ([`list_files`], [`read_chunk`]); the receiving side writes them into
//! a staging directory under `<data-dir>/moving/` ([`begin`], [`write_chunk`]) and installs
//! it as the partition's directory ([`install`]) or drops it ([`abort`]). Only names
//! [`valid_file_name`] accepts are written, so a peer can write nowhere but into its staging
//! directory. Every function here blocks (std::fs): callers run them off the executor.
//!
//! The protocol around these steps (which node asks, the handoff, the metastore write) is the
//! broker's (`net::partition_move`).

use std::collections::HashMap;
use std::io::{Error, ErrorKind, Result};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::partition::INCARNATION_FILE_NAME;

/// The directory under the data dir that holds incoming moves' staging directories.
pub const STAGING_DIR_NAME: &str = "moving";
/// The longest file name a move carries (a cursor file names a child topic of up to 249).
pub const MAX_MOVE_FILE_NAME_BYTES: usize = 320;

/// A file's length and modification time (ns since the epoch) when it was listed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Stamp {
    pub len: u64,
    pub mtime_ns: u128,
}

/// A name a move may write: one plain file name of a partition directory.
pub fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_MOVE_FILE_NAME_BYTES
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

// ---- The owner's side ----

/// The regular files of `dir` with their stamps, sorted by name.
pub fn list_files(dir: &Path) -> Result<Vec<(String, Stamp)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let Ok(md) = e.metadata() else { continue };
        if !md.is_file() {
            continue;
        }
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let mtime_ns = md
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        out.push((
            name,
            Stamp {
                len: md.len(),
                mtime_ns,
            },
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Up to `len` bytes of `path` from `offset` (fewer at its end).
pub fn read_chunk(path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = f.read_at(&mut buf[got..], offset + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    Ok(buf)
}

// ---- The receiving side ----

fn staging_root(root: &Path) -> PathBuf {
    root.join(STAGING_DIR_NAME)
}

fn staging_dir(root: &Path, move_id: u64) -> PathBuf {
    staging_root(root).join(format!("{move_id:016x}"))
}

fn remove_dir_if_any(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Removes the staging of moves a stopped process left (called once at start: a move a
/// crash interrupted is simply not made).
pub fn clear_staging(root: &Path) -> Result<()> {
    remove_dir_if_any(&staging_root(root))
}

/// Makes move `move_id`'s staging directory under data dir `root`, unless
/// `max_incoming` moves are being received already.
pub fn begin(root: &Path, move_id: u64, max_incoming: usize) -> Result<()> {
    let parent = staging_root(root);
    std::fs::create_dir_all(&parent)?;
    let running = std::fs::read_dir(&parent)?.count();
    if running >= max_incoming {
        return Err(Error::other(format!(
            "{running} moves are being received here already (at most {max_incoming}); retry when one ends"
        )));
    }
    std::fs::create_dir(staging_dir(root, move_id))
}

/// Writes `bytes` at `offset` of `file` in move `move_id`'s staging directory; the `last`
/// chunk sets the file's length and fdatasyncs it.
pub fn write_chunk(
    root: &Path,
    move_id: u64,
    file: &str,
    offset: u64,
    bytes: &[u8],
    last: bool,
) -> Result<()> {
    debug_assert!(valid_file_name(file), "{file:?}");
    let dir = staging_dir(root, move_id);
    if !dir.is_dir() {
        return Err(Error::other(format!(
            "no move {move_id:016x} is being received here"
        )));
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(offset == 0)
        .open(dir.join(file))?;
    f.write_all_at(bytes, offset)?;
    if last {
        f.set_len(offset + bytes.len() as u64)?;
        f.sync_data()?;
    }
    Ok(())
}

/// Installs move `move_id`'s staging directory as `target` (the partition's directory):
/// files the owner did not list (`listed`: name → length) are removed, every listed one must
/// have its length, the incarnation file must name `incarnation`; an older copy at `target`
/// is replaced, and the rename is made durable.
pub fn install(
    root: &Path,
    move_id: u64,
    listed: &HashMap<&str, u64>,
    incarnation: &str,
    target: &Path,
) -> Result<()> {
    let staging = staging_dir(root, move_id);
    for e in std::fs::read_dir(&staging)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !listed.contains_key(name.as_str()) {
            std::fs::remove_file(e.path())?;
        }
    }
    for (name, len) in listed {
        let got = std::fs::metadata(staging.join(name))
            .map_err(|e| Error::other(format!("{name}: {e}")))?
            .len();
        if got != *len {
            return Err(Error::other(format!(
                "{name} holds {got} bytes here, {len} on the owner"
            )));
        }
    }
    let inc = std::fs::read(staging.join(INCARNATION_FILE_NAME))
        .map_err(|e| Error::other(format!("the incarnation file: {e}")))?;
    if inc != incarnation.as_bytes() {
        return Err(Error::other(
            "the copied files belong to another incarnation of the topic",
        ));
    }
    sync_dir(&staging)?;
    // A copy left by an earlier move away from here is older: the new one replaces it.
    remove_dir_if_any(target)?;
    let parent = target
        .parent()
        .ok_or_else(|| Error::other("a partition dir without a parent"))?;
    std::fs::create_dir_all(parent)?;
    std::fs::rename(&staging, target)?;
    sync_dir(parent)?;
    sync_dir(&staging_root(root))
}

/// Drops move `move_id`'s staging directory and, where given, the copy installed at
/// `installed`.
pub fn abort(root: &Path, move_id: u64, installed: Option<&Path>) -> Result<()> {
    remove_dir_if_any(&staging_dir(root, move_id))?;
    installed.map_or(Ok(()), remove_dir_if_any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_partition_file_names_are_written() {
        for ok in [
            "00000000000000000000.log",
            "incarnation",
            "fanout-orders.eu_1-x.offset",
        ] {
            assert!(valid_file_name(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "/etc/passwd",
            "x\0y",
            &"a".repeat(400),
        ] {
            assert!(!valid_file_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_staged_copy_is_installed_only_whole_and_of_its_incarnation() {
        let root = tempfile::tempdir().unwrap();
        let src = root.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join(INCARNATION_FILE_NAME), b"inc-1").unwrap();
        std::fs::write(src.join("00000000000000000000.log"), vec![7u8; 3000]).unwrap();
        let listing = list_files(&src).unwrap();
        assert_eq!(listing.len(), 2);

        begin(root.path(), 1, 4).unwrap();
        for (name, stamp) in &listing {
            let mut offset = 0;
            while offset < stamp.len {
                let bytes = read_chunk(&src.join(name), offset, 1024).unwrap();
                let last = offset + bytes.len() as u64 >= stamp.len;
                write_chunk(root.path(), 1, name, offset, &bytes, last).unwrap();
                offset += bytes.len() as u64;
            }
        }
        // A stray file the owner did not list is dropped at the install.
        write_chunk(root.path(), 1, "stray", 0, b"x", true).unwrap();
        let listed: HashMap<&str, u64> = listing.iter().map(|(n, s)| (n.as_str(), s.len)).collect();
        let target = root.path().join("t").join("p-0");
        let wrong = install(root.path(), 1, &listed, "inc-2", &target).unwrap_err();
        assert!(wrong.to_string().contains("another incarnation"), "{wrong}");
        let mut short = listed.clone();
        short.insert("00000000000000000000.log", 3001);
        assert!(install(root.path(), 1, &short, "inc-1", &target).is_err());
        install(root.path(), 1, &listed, "inc-1", &target).unwrap();
        let lengths = |l: Vec<(String, Stamp)>| -> Vec<(String, u64)> {
            l.into_iter().map(|(n, s)| (n, s.len)).collect()
        };
        assert_eq!(lengths(list_files(&target).unwrap()), lengths(listing));

        // The bound on moves received at once, and the cleanup at start.
        for id in 2..5 {
            begin(root.path(), id, 3).unwrap();
        }
        assert!(begin(root.path(), 9, 3).is_err());
        abort(root.path(), 2, Some(&target)).unwrap();
        assert!(!target.exists());
        clear_staging(root.path()).unwrap();
        assert!(!root.path().join(STAGING_DIR_NAME).exists());
    }
}
