//! A partition's leader epochs (issue #18): the offset where each leader epoch's records
//! start in the log, the cache Kafka keeps in `leader-epoch-checkpoint`. A replica that
//! follows a new leader asks it where its own latest epoch ends (OffsetForLeaderEpoch) and
//! truncates what lies beyond, so it never keeps records the new leader does not have.
//!
//! On disk: `leader-epochs`, replaced atomically (temp file, fsync, rename) whenever an
//! epoch is added or entries are cut; one `epoch start_offset` line per epoch after a
//! version line. It is written before the first record of a new epoch is appended, so the
//! log never holds a batch of an epoch the file lacks.

use std::path::{Path, PathBuf};

use crate::io;

pub const LEADER_EPOCHS_FILE_NAME: &str = "leader-epochs";
/// The file's layout version (its first line).
const FILE_VERSION_LINE: &str = "ringlog-leader-epochs 1";
/// Epochs kept, at most: past it the oldest is dropped (its records are far behind every
/// follower; a truncation never reaches back that far).
pub const MAX_LEADER_EPOCH_ENTRIES: usize = 10_000;

/// Where leader epoch `epoch`'s records start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochStart {
    pub epoch: i32,
    pub start_offset: u64,
}

/// The epochs of one partition's log, oldest first: epochs and start offsets both increase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochs {
    entries: Vec<EpochStart>,
}

impl LeaderEpochs {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(LEADER_EPOCHS_FILE_NAME)
    }

    /// The file in `dir` (none: no epoch yet); an unreadable one is an error naming it.
    pub async fn load(dir: &Path) -> std::io::Result<Self> {
        let Some(bytes) = io::read_small(&Self::path(dir)).await? else {
            return Ok(Self::default());
        };
        Self::decode(&bytes).map_err(|why| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {why}", Self::path(dir).display()),
            )
        })
    }

    pub async fn store(&self, dir: &Path) -> std::io::Result<()> {
        io::write_atomic(&Self::path(dir), self.encode()).await
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut s = String::from(FILE_VERSION_LINE);
        s.push('\n');
        for e in &self.entries {
            s.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        s.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
        let mut lines = text.lines();
        if lines.next() != Some(FILE_VERSION_LINE) {
            return Err(format!("the first line is not `{FILE_VERSION_LINE}`"));
        }
        let mut out = Self::default();
        for (n, line) in lines.enumerate() {
            let bad = || format!("line {}: `{line}` is not `epoch start_offset`", n + 2);
            let (e, o) = line.split_once(' ').ok_or_else(bad)?;
            let entry = EpochStart {
                epoch: e.parse().map_err(|_| bad())?,
                start_offset: o.parse().map_err(|_| bad())?,
            };
            if out.entries.len() >= MAX_LEADER_EPOCH_ENTRIES {
                return Err(format!("more than {MAX_LEADER_EPOCH_ENTRIES} epochs"));
            }
            if out
                .latest()
                .is_some_and(|l| l.epoch >= entry.epoch || l.start_offset > entry.start_offset)
            {
                return Err(format!("line {}: epochs out of order", n + 2));
            }
            out.entries.push(entry);
        }
        Ok(out)
    }

    pub fn latest(&self) -> Option<EpochStart> {
        self.entries.last().copied()
    }

    pub fn entries(&self) -> &[EpochStart] {
        &self.entries
    }

    /// Records that epoch `epoch` starts at `start_offset`; `true` if that changed anything
    /// (an epoch newer than the latest). An epoch that starts where the latest one did
    /// replaces it (that one holds no record).
    pub fn assign(&mut self, epoch: i32, start_offset: u64) -> bool {
        match self.latest() {
            Some(l) if l.epoch >= epoch => return false,
            Some(l) if l.start_offset == start_offset => {
                self.entries.pop();
            }
            Some(l) => assert!(
                l.start_offset < start_offset,
                "epoch {epoch} cannot start at {start_offset}, before epoch {} at {}",
                l.epoch,
                l.start_offset
            ),
            None => {}
        }
        self.entries.push(EpochStart {
            epoch,
            start_offset,
        });
        if self.entries.len() > MAX_LEADER_EPOCH_ENTRIES {
            self.entries.remove(0);
        }
        true
    }

    /// Kafka's OffsetForLeaderEpoch answer on this log: the largest epoch at most `epoch`
    /// and the offset where it ends (the next epoch's start, or `log_end` for the latest).
    /// `None`: every known epoch is newer than `epoch` (or none is known).
    pub fn end_of(&self, epoch: i32, log_end: u64) -> Option<(i32, u64)> {
        let i = self.entries.iter().rposition(|e| e.epoch <= epoch)?;
        let end = self
            .entries
            .get(i + 1)
            .map_or(log_end, |next| next.start_offset);
        Some((self.entries[i].epoch, end))
    }

    /// The epoch the record at `offset` was written in: the newest one starting at or before
    /// it. `None`: it is older than every known epoch.
    pub fn epoch_at(&self, offset: u64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// Drops the epochs that start at or after `log_end` (the log was cut there); `true` if
    /// any went.
    pub fn cut_at(&mut self, log_end: u64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < log_end);
        self.entries.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_answer_where_each_ends_and_survive_the_file() {
        let mut e = LeaderEpochs::default();
        assert_eq!(e.end_of(3, 10), None);
        assert!(e.assign(1, 0));
        assert!(!e.assign(1, 5), "an epoch is assigned once");
        assert!(e.assign(3, 40));
        assert!(e.assign(4, 40), "an empty epoch is replaced");
        assert_eq!(e.entries().len(), 2);
        assert!(e.assign(7, 90));
        assert_eq!(e.end_of(1, 100), Some((1, 40)));
        assert_eq!(e.end_of(2, 100), Some((1, 40)));
        assert_eq!(e.end_of(4, 100), Some((4, 90)));
        assert_eq!(e.end_of(9, 100), Some((7, 100)));
        assert_eq!(e.end_of(0, 100), None);
        assert_eq!(e.epoch_at(0), Some(1));
        assert_eq!(e.epoch_at(39), Some(1));
        assert_eq!(e.epoch_at(40), Some(4));
        assert_eq!(e.epoch_at(1_000), Some(7));
        let back = LeaderEpochs::decode(&e.encode()).unwrap();
        assert_eq!(back, e);
        assert!(e.cut_at(90));
        assert_eq!(e.latest().unwrap().epoch, 4);
        assert!(!e.cut_at(90));
        assert!(LeaderEpochs::decode(b"ringlog-leader-epochs 1\n3 10\n2 20\n").is_err());
        assert!(LeaderEpochs::decode(b"something else\n").is_err());
        assert!(LeaderEpochs::decode(b"ringlog-leader-epochs 1\nx y\n").is_err());
    }
}
