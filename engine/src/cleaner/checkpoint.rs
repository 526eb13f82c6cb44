//! The cleaner's durable progress in one partition directory (`cleaner-checkpoint`, Kafka's
//! `cleaner-offset-checkpoint`): where the dirty part of the log starts, and when the next
//! kept tombstone's delete horizon passes (so a log with nothing dirty is still cleaned then).
//! Text, one line: `v1 <first dirty offset> <tombstones due ms or -1>`.

use std::path::Path;

use crate::io;

pub const CHECKPOINT_FILE_NAME: &str = "cleaner-checkpoint";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanerCheckpoint {
    /// Everything below has been cleaned (each key appears at most once there).
    pub first_dirty_offset: u64,
    /// The earliest delete horizon of a tombstone the cleaner kept.
    pub tombstones_due_ms: Option<i64>,
}

impl CleanerCheckpoint {
    pub fn encode(&self) -> Vec<u8> {
        format!(
            "v1 {} {}\n",
            self.first_dirty_offset,
            self.tombstones_due_ms.unwrap_or(-1)
        )
        .into_bytes()
    }

    pub fn decode(b: &[u8]) -> Option<Self> {
        let s = std::str::from_utf8(b).ok()?;
        let mut it = s.split_whitespace();
        if it.next()? != "v1" {
            return None;
        }
        let first_dirty_offset = it.next()?.parse().ok()?;
        let due: i64 = it.next()?.parse().ok()?;
        Some(Self {
            first_dirty_offset,
            tombstones_due_ms: (due >= 0).then_some(due),
        })
    }

    /// The checkpoint in `dir`; an absent or unreadable one is "nothing cleaned yet" (the next
    /// pass reads the whole log: slower, never wrong).
    pub async fn load(dir: &Path) -> std::io::Result<Self> {
        let path = dir.join(CHECKPOINT_FILE_NAME);
        Ok(match io::read_small(&path).await? {
            Some(b) => Self::decode(&b).unwrap_or_else(|| {
                tracing::warn!(path = %path.display(), "unreadable cleaner checkpoint; the log is cleaned from its start");
                Self::default()
            }),
            None => Self::default(),
        })
    }

    pub async fn store(&self, dir: &Path) -> std::io::Result<()> {
        io::write_atomic(&dir.join(CHECKPOINT_FILE_NAME), self.encode()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for c in [
            CleanerCheckpoint::default(),
            CleanerCheckpoint {
                first_dirty_offset: 123,
                tombstones_due_ms: Some(456),
            },
        ] {
            assert_eq!(CleanerCheckpoint::decode(&c.encode()), Some(c));
        }
        assert_eq!(CleanerCheckpoint::decode(b"v2 1 2"), None);
    }
}
