//! `recovery.marker`: the partition's recovery point. It says whether the last shutdown was
//! clean and from which segment a crash recovery must scan. Replaced atomically (temp + rename),
//! so a crash leaves either the old or the new marker.
//!
//! Layout: `b"RLRM" | version u8 = 1 | clean u8 | recovery_base u64 BE | crc32 u32 BE` (crc32 of
//! the bytes before it).

use std::path::{Path, PathBuf};

use crate::io;

pub const MARKER_FILE_NAME: &str = "recovery.marker";
const MAGIC: &[u8; 4] = b"RLRM";
const VERSION: u8 = 1;
const MARKER_BYTES: usize = 18;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryMarker {
    /// The log was closed cleanly: every file is trimmed, synced and its index complete.
    pub clean: bool,
    /// Segments with a lower base offset were closed (synced, indexed) before this marker was
    /// written; recovery after a crash scans this segment and every later one.
    pub recovery_base: u64,
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(MARKER_FILE_NAME)
}

impl RecoveryMarker {
    fn encode(&self) -> [u8; MARKER_BYTES] {
        let mut b = [0u8; MARKER_BYTES];
        b[0..4].copy_from_slice(MAGIC);
        b[4] = VERSION;
        b[5] = self.clean as u8;
        b[6..14].copy_from_slice(&self.recovery_base.to_be_bytes());
        let crc = crc32fast::hash(&b[..14]);
        b[14..18].copy_from_slice(&crc.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Self> {
        if b.len() != MARKER_BYTES || &b[0..4] != MAGIC || b[4] != VERSION || b[5] > 1 {
            return None;
        }
        let crc = u32::from_be_bytes(b[14..18].try_into().ok()?);
        if crc32fast::hash(&b[..14]) != crc {
            return None;
        }
        Some(Self {
            clean: b[5] == 1,
            recovery_base: u64::from_be_bytes(b[6..14].try_into().ok()?),
        })
    }

    /// The marker in `dir`; `None` when missing or damaged (recovery then scans everything).
    pub async fn load(dir: &Path) -> std::io::Result<Option<Self>> {
        let bytes = io::read_small(&path(dir)).await?;
        let marker = bytes.as_deref().and_then(Self::decode);
        if bytes.is_some() && marker.is_none() {
            tracing::warn!(dir = %dir.display(), "recovery marker is damaged; scanning every segment");
        }
        Ok(marker)
    }

    pub async fn store(&self, dir: &Path) -> std::io::Result<()> {
        io::write_atomic(&path(dir), self.encode().to_vec()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let m = RecoveryMarker {
            clean: true,
            recovery_base: 1234,
        };
        let b = m.encode();
        assert_eq!(RecoveryMarker::decode(&b), Some(m));
        for i in 0..b.len() {
            let mut d = b;
            d[i] ^= 0x40;
            assert_eq!(RecoveryMarker::decode(&d), None, "flip at {i}");
        }
        assert_eq!(RecoveryMarker::decode(&b[..10]), None);
    }
}
