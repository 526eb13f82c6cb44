//! `log-start-offset`: the log start offset a DeleteRecords request moved past the first
//! segment's base. Replaced atomically (temp + fsync + rename + dir fsync) before the request
//! is answered, loaded on open, so a restart (clean or not) keeps the records below it gone.
//! Without the file the log starts at its first segment's base offset.
//!
//! Layout (`checked_file`'s frame): `b"RLLS" | version u16 BE = 1 | log_start_offset u64 BE |
//! crc32c u32 BE`.

use std::path::{Path, PathBuf};

use crate::{checked_file, io};

pub const LOG_START_FILE_NAME: &str = "log-start-offset";
const MAGIC: &[u8; 4] = b"RLLS";
const VERSION: u16 = 1;

pub fn path(dir: &Path) -> PathBuf {
    dir.join(LOG_START_FILE_NAME)
}

pub fn encode(log_start_offset: u64) -> Vec<u8> {
    checked_file::frame(MAGIC, VERSION, &log_start_offset.to_be_bytes())
}

pub fn decode(b: &[u8]) -> Result<u64, String> {
    let body = checked_file::unframe(MAGIC, VERSION, b)?;
    let offset: [u8; 8] = body
        .try_into()
        .map_err(|_| format!("{} body bytes, expected 8", body.len()))?;
    Ok(u64::from_be_bytes(offset))
}

/// The stored log start offset of `dir`; `None` when there is no file. A damaged file is
/// reported and ignored (the log then starts at its first segment).
pub async fn load(dir: &Path) -> std::io::Result<Option<u64>> {
    checked_file::load(
        &path(dir),
        decode,
        "log-start-offset file is damaged; the log starts at its first segment",
    )
    .await
}

/// Durably replaces the file of `dir` with `log_start_offset`.
pub async fn store(dir: &Path, log_start_offset: u64) -> std::io::Result<()> {
    io::write_atomic(&path(dir), encode(log_start_offset)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let b = encode(123_456_789);
        assert_eq!(decode(&b), Ok(123_456_789));
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x10;
            assert!(decode(&d).is_err(), "flip at {i}");
        }
        assert!(decode(&b[..10]).is_err());
    }
}
