//! Swapping cleaned segments in, crash-safely. The cleaner writes a group's cleaned segment as
//! `<base>.log.cleaned` (and `.index.cleaned`, `.timeindex.cleaned`), fdatasyncs them and the
//! directory, then commits the swap by writing `cleaner-swap` (atomically: temp, fsync,
//! rename, directory fsync) naming the replaced segments. Then it renames the cleaned files
//! over the first member's, removes the other members' files, syncs the directory and removes
//! `cleaner-swap`.
//!
//! On open, before the log's files are listed: a `cleaner-swap` is finished (every step is
//! idempotent: a missing `.cleaned` file was already renamed, a missing member file already
//! removed); without one, leftover `.cleaned` files are removed. So a crash at any step leaves
//! the old segment set or the new one, never a mix.

use std::path::{Path, PathBuf};

use crate::io;
use crate::segment;

pub const SWAP_FILE_NAME: &str = "cleaner-swap";
pub const CLEANED_SUFFIX: &str = ".cleaned";

/// The cleaned files of the segment that will have base `base`.
pub fn cleaned_paths(dir: &Path, base: u64) -> [PathBuf; 3] {
    segment::paths(dir, base).map(|p| {
        let mut s = p.into_os_string();
        s.push(CLEANED_SUFFIX);
        PathBuf::from(s)
    })
}

/// One committed swap: the cleaned files take the name of `members[0]`, and every other member
/// segment goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swap {
    pub members: Vec<u64>,
}

impl Swap {
    fn encode(&self) -> Vec<u8> {
        let mut s = String::from("v1");
        for m in &self.members {
            s.push_str(&format!(" {m}"));
        }
        s.push('\n');
        s.into_bytes()
    }

    fn decode(b: &[u8]) -> Option<Self> {
        let s = std::str::from_utf8(b).ok()?;
        let mut it = s.split_whitespace();
        if it.next()? != "v1" {
            return None;
        }
        let members: Vec<u64> = it.map(|m| m.parse().ok()).collect::<Option<_>>()?;
        (!members.is_empty()).then_some(Self { members })
    }

    /// Commits the swap (its record is durable when this returns) and carries it out.
    pub async fn commit(&self, dir: &Path) -> std::io::Result<()> {
        assert!(
            !self.members.is_empty(),
            "a swap replaces at least one segment"
        );
        io::write_atomic(&dir.join(SWAP_FILE_NAME), self.encode()).await?;
        self.finish(dir).await
    }

    /// The steps after the commit point; each may already be done.
    async fn finish(&self, dir: &Path) -> std::io::Result<()> {
        let base = self.members[0];
        let renames: Vec<(PathBuf, PathBuf)> = cleaned_paths(dir, base)
            .into_iter()
            .zip(segment::paths(dir, base))
            .collect();
        io::rename_existing(renames).await?;
        let doomed: Vec<PathBuf> = self.members[1..]
            .iter()
            .flat_map(|&m| segment::paths(dir, m))
            .collect();
        io::remove_all_of(doomed).await?;
        io::sync_dir(dir).await?;
        io::remove(&dir.join(SWAP_FILE_NAME)).await?;
        io::sync_dir(dir).await
    }
}

/// Finishes a committed swap, or removes the files of one that was never committed. Runs on
/// open before the segments are listed.
pub async fn recover(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(SWAP_FILE_NAME);
    if let Some(b) = io::read_small(&path).await? {
        let swap = Swap::decode(&b).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{}: unreadable cleaner swap record; it is written atomically, so the disk is damaged: inspect the directory",
                    path.display()
                ),
            )
        })?;
        tracing::info!(dir = %dir.display(), members = ?swap.members, "finishing a cleaner swap interrupted by a crash");
        swap.finish(dir).await?;
    }
    let leftovers: Vec<PathBuf> = io::list_dir(dir)
        .await?
        .into_iter()
        .filter(|n| n.ends_with(CLEANED_SUFFIX))
        .map(|n| dir.join(n))
        .collect();
    if !leftovers.is_empty() {
        io::remove_all_of(leftovers).await?;
        io::sync_dir(dir).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip() {
        let s = Swap {
            members: vec![0, 100, 250],
        };
        assert_eq!(Swap::decode(&s.encode()), Some(s));
        assert_eq!(Swap::decode(b"v1\n"), None);
        assert_eq!(
            cleaned_paths(Path::new("/d"), 7)[0],
            PathBuf::from("/d/00000000000000000007.log.cleaned")
        );
    }
}
