//! Swapping cleaned segments in, crash-safely. The cleaner writes each group's cleaned segment
//! as `<base>.log.cleaned` (and `.index.cleaned`, `.timeindex.cleaned`), fdatasyncs them and
//! the directory, then commits the swap of every group of its pass by writing `cleaner-swap`
//! (atomically: temp, fsync, rename, directory fsync) naming the replaced segments of each
//! group. Then it renames each group's cleaned files over its first member's, removes the other
//! members' files, syncs the directory and removes `cleaner-swap`.
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

/// One committed swap: in each group the cleaned files take the name of the first member, and
/// every other member segment goes. Text: `v1`, then each group's bases, groups separated by
/// `;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swap {
    pub groups: Vec<Vec<u64>>,
}

impl Swap {
    fn encode(&self) -> Vec<u8> {
        let groups: Vec<String> = self
            .groups
            .iter()
            .map(|g| g.iter().map(u64::to_string).collect::<Vec<_>>().join(" "))
            .collect();
        format!("v1 {}\n", groups.join(" ; ")).into_bytes()
    }

    fn decode(b: &[u8]) -> Option<Self> {
        let s = std::str::from_utf8(b).ok()?;
        let rest = s.trim().strip_prefix("v1")?;
        let groups: Vec<Vec<u64>> = rest
            .split(';')
            .map(|g| {
                let members: Vec<u64> = g
                    .split_whitespace()
                    .map(|m| m.parse().ok())
                    .collect::<Option<_>>()?;
                (!members.is_empty()).then_some(members)
            })
            .collect::<Option<_>>()?;
        (!groups.is_empty()).then_some(Self { groups })
    }

    /// Commits the swap (its record is durable when this returns) and carries it out.
    pub async fn commit(&self, dir: &Path) -> std::io::Result<()> {
        assert!(
            !self.groups.is_empty() && self.groups.iter().all(|g| !g.is_empty()),
            "a swap replaces at least one segment per group"
        );
        // Every cleaned file must be there before the swap is recorded (finishing tolerates
        // missing ones only because it may be a repeat).
        for g in &self.groups {
            for p in cleaned_paths(dir, g[0]) {
                io::file_len(&p).await?;
            }
        }
        io::write_atomic(&dir.join(SWAP_FILE_NAME), self.encode()).await?;
        self.finish(dir).await
    }

    /// The steps after the commit point; each may already be done.
    async fn finish(&self, dir: &Path) -> std::io::Result<()> {
        let renames: Vec<(PathBuf, PathBuf)> = self
            .groups
            .iter()
            .flat_map(|g| {
                cleaned_paths(dir, g[0])
                    .into_iter()
                    .zip(segment::paths(dir, g[0]))
            })
            .collect();
        io::rename_existing(renames).await?;
        let doomed: Vec<PathBuf> = self
            .groups
            .iter()
            .flat_map(|g| g[1..].iter().flat_map(|&m| segment::paths(dir, m)))
            .collect();
        io::remove_all_of(doomed).await?;
        io::sync_dir(dir).await?;
        io::remove(&dir.join(SWAP_FILE_NAME)).await?;
        io::sync_dir(dir).await
    }
}

/// Finishes a committed swap, or removes the files of one that was never committed. Runs on
/// open with the directory's file `names`, before the segments are listed; `true` when it
/// changed the directory (the caller lists it again). Costs nothing when neither is there.
pub async fn recover(dir: &Path, names: &[String]) -> std::io::Result<bool> {
    let recorded = names.iter().any(|n| n == SWAP_FILE_NAME);
    if !recorded && !names.iter().any(|n| n.ends_with(CLEANED_SUFFIX)) {
        return Ok(false);
    }
    let path = dir.join(SWAP_FILE_NAME);
    if let Some(b) = io::read_small(&path).await?.filter(|_| recorded) {
        let swap = Swap::decode(&b).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{}: unreadable cleaner swap record; it is written atomically, so the disk is damaged: inspect the directory",
                    path.display()
                ),
            )
        })?;
        tracing::info!(dir = %dir.display(), groups = ?swap.groups, "finishing a cleaner swap interrupted by a crash");
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
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip() {
        for groups in [vec![vec![0, 100, 250]], vec![vec![0], vec![300, 400]]] {
            let s = Swap { groups };
            assert_eq!(Swap::decode(&s.encode()), Some(s));
        }
        assert_eq!(
            Swap::decode(b"v1 0 1 ; 5 6\n").unwrap().groups,
            vec![vec![0, 1], vec![5, 6]]
        );
        assert_eq!(Swap::decode(b"v1\n"), None);
        assert_eq!(Swap::decode(b"v1 0 ; ; 5\n"), None);
        assert_eq!(
            cleaned_paths(Path::new("/d"), 7)[0],
            PathBuf::from("/d/00000000000000000007.log.cleaned")
        );
    }
}
