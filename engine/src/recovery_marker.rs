//! `recovery.marker`: the partition's recovery point. It says whether the last shutdown was
//! clean and from which segment a crash recovery must scan. Replaced atomically (temp + rename),
//! so a crash leaves either the old or the new marker.
//!
//! Layout (`checked_file`'s frame): `b"RLRM" | version u16 BE = 3 | clean u8 | recovery_base u64
//! BE | offset_jumps u8 | crc32c u32 BE`. Version 2 (the same without `offset_jumps`) and
//! version 1 (`b"RLRM" | 1 u8 | clean u8 | recovery_base u64 BE | crc32 u32 BE`, CRC-32),
//! written by older builds, are still read (no offset jumps); every store writes version 3.

use std::path::{Path, PathBuf};

use crate::{checked_file, io};

pub const MARKER_FILE_NAME: &str = "recovery.marker";
const MAGIC: &[u8; 4] = b"RLRM";
const VERSION: u16 = 3;
/// clean | recovery_base | offset_jumps.
const BODY_BYTES: usize = 1 + 8 + 1;
/// Version 2 (older builds): clean | recovery_base.
const V2_BODY_BYTES: usize = 1 + 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryMarker {
    /// The log was closed cleanly: every file is trimmed, synced and its index complete.
    pub clean: bool,
    /// Segments with a lower base offset were closed (synced, indexed) before this marker was
    /// written; recovery after a crash scans this segment and every later one.
    pub recovery_base: u64,
    /// The segment at `recovery_base` may hold forward offset jumps: a follower copied a
    /// cleaned leader's batches into it (issue #18), so recovery accepts a batch that starts
    /// past the previous one's end there, though it is the last segment.
    pub offset_jumps: bool,
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(MARKER_FILE_NAME)
}

impl RecoveryMarker {
    fn encode(&self) -> Vec<u8> {
        let mut body = [0u8; BODY_BYTES];
        body[0] = self.clean as u8;
        body[1..9].copy_from_slice(&self.recovery_base.to_be_bytes());
        body[9] = self.offset_jumps as u8;
        checked_file::frame(MAGIC, VERSION, &body)
    }

    fn decode(b: &[u8]) -> Result<Self, String> {
        if let Some(m) = Self::decode_v1(b) {
            return Ok(m);
        }
        let (body, want) = match checked_file::unframe(MAGIC, VERSION, b) {
            Ok(body) => (body, BODY_BYTES),
            Err(_) => (checked_file::unframe(MAGIC, 2, b)?, V2_BODY_BYTES),
        };
        if body.len() != want || body[0] > 1 || body.get(9).is_some_and(|&f| f > 1) {
            return Err(format!(
                "a body of {} bytes, flags {:?} {:?}",
                body.len(),
                body.first(),
                body.get(9)
            ));
        }
        Ok(Self {
            clean: body[0] == 1,
            recovery_base: u64::from_be_bytes(body[1..9].try_into().expect("8 bytes")),
            offset_jumps: body.get(9) == Some(&1),
        })
    }

    /// A version 1 marker (older builds), or `None`.
    fn decode_v1(b: &[u8]) -> Option<Self> {
        const V1_BYTES: usize = 18;
        if b.len() != V1_BYTES || &b[0..4] != MAGIC || b[4] != 1 || b[5] > 1 {
            return None;
        }
        let crc = u32::from_be_bytes(b[14..18].try_into().ok()?);
        (crc32fast::hash(&b[..14]) == crc).then(|| Self {
            clean: b[5] == 1,
            recovery_base: u64::from_be_bytes(b[6..14].try_into().expect("8 bytes")),
            offset_jumps: false,
        })
    }

    /// The marker in `dir`; `None` when missing or damaged (recovery then scans everything).
    pub async fn load(dir: &Path) -> std::io::Result<Option<Self>> {
        checked_file::load(
            &path(dir),
            Self::decode,
            "recovery marker is damaged; scanning every segment",
        )
        .await
    }

    pub async fn store(&self, dir: &Path) -> std::io::Result<()> {
        io::write_atomic(&path(dir), self.encode()).await
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
            offset_jumps: false,
        };
        for m in [
            m,
            RecoveryMarker {
                offset_jumps: true,
                ..m
            },
        ] {
            let b = m.encode();
            assert_eq!(RecoveryMarker::decode(&b), Ok(m));
            for i in 0..b.len() {
                let mut d = b.clone();
                d[i] ^= 0x40;
                assert!(RecoveryMarker::decode(&d).is_err(), "flip at {i}");
            }
            assert!(RecoveryMarker::decode(&b[..10]).is_err());
        }
        // A version 2 marker (older builds) still reads, with no offset jumps.
        let mut body = vec![1u8];
        body.extend_from_slice(&1234u64.to_be_bytes());
        let v2 = checked_file::frame(MAGIC, 2, &body);
        assert_eq!(RecoveryMarker::decode(&v2), Ok(m));
        // A version 1 marker (older builds: u8 version, CRC-32) still reads; damaged, it does not.
        let mut v1 = b"RLRM\x01\x01".to_vec();
        v1.extend_from_slice(&1234u64.to_be_bytes());
        let crc = crc32fast::hash(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(RecoveryMarker::decode(&v1), Ok(m));
        for i in 0..v1.len() {
            let mut d = v1.clone();
            d[i] ^= 0x40;
            assert!(RecoveryMarker::decode(&d).is_err(), "v1 flip at {i}");
        }
    }
}
