//! `log-start-offset`: the log start offset a DeleteRecords request moved past the first
//! segment's base. Replaced atomically (temp + fsync + rename + dir fsync) before the request
//! is answered, loaded on open, so a restart (clean or not) keeps the records below it gone.
//! Without the file the log starts at its first segment's base offset.
//!
//! Layout: `b"RLLS" | version u16 BE = 1 | log_start_offset u64 BE | crc32c u32 BE` (CRC-32C of
//! the bytes before it).

use std::path::{Path, PathBuf};

use crate::io;

pub const LOG_START_FILE_NAME: &str = "log-start-offset";
const MAGIC: &[u8; 4] = b"RLLS";
const VERSION: u16 = 1;
/// magic | version | offset | crc.
const FILE_BYTES: usize = 4 + 2 + 8 + 4;

pub fn path(dir: &Path) -> PathBuf {
    dir.join(LOG_START_FILE_NAME)
}

pub fn encode(log_start_offset: u64) -> [u8; FILE_BYTES] {
    let mut b = [0u8; FILE_BYTES];
    b[0..4].copy_from_slice(MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_be_bytes());
    b[6..14].copy_from_slice(&log_start_offset.to_be_bytes());
    let crc = crc32c::crc32c(&b[..14]);
    b[14..18].copy_from_slice(&crc.to_be_bytes());
    b
}

pub fn decode(b: &[u8]) -> Result<u64, String> {
    if b.len() != FILE_BYTES {
        return Err(format!("{} bytes, expected {FILE_BYTES}", b.len()));
    }
    let crc = u32::from_be_bytes(b[14..18].try_into().expect("4 bytes"));
    if crc32c::crc32c(&b[..14]) != crc {
        return Err("CRC mismatch".into());
    }
    if &b[0..4] != MAGIC {
        return Err("bad magic".into());
    }
    let version = u16::from_be_bytes([b[4], b[5]]);
    if version != VERSION {
        return Err(format!("unknown version {version}"));
    }
    Ok(u64::from_be_bytes(b[6..14].try_into().expect("8 bytes")))
}

/// The stored log start offset of `dir`; `None` when there is no file. A damaged file is
/// reported and ignored (the log then starts at its first segment).
pub async fn load(dir: &Path) -> std::io::Result<Option<u64>> {
    let Some(bytes) = io::read_small(&path(dir)).await? else {
        return Ok(None);
    };
    match decode(&bytes) {
        Ok(offset) => Ok(Some(offset)),
        Err(why) => {
            tracing::warn!(dir = %dir.display(), %why, "log-start-offset file is damaged; the log starts at its first segment");
            Ok(None)
        }
    }
}

/// Durably replaces the file of `dir` with `log_start_offset`.
pub async fn store(dir: &Path, log_start_offset: u64) -> std::io::Result<()> {
    io::write_atomic(&path(dir), encode(log_start_offset).to_vec()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let b = encode(123_456_789);
        assert_eq!(decode(&b), Ok(123_456_789));
        for i in 0..b.len() {
            let mut d = b;
            d[i] ^= 0x10;
            assert!(decode(&d).is_err(), "flip at {i}");
        }
        assert!(decode(&b[..10]).is_err());
    }
}
