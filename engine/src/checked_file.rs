//! The framing of the engine's small checked files (`recovery.marker`, `log-start-offset`,
//! `aborted.txnindex`): `magic [u8; 4] | version u16 BE | body | CRC-32C u32 BE` of every byte
//! before it. Each file's module owns its magic, version and body; this one owns the frame and
//! the load step every such file shares (a missing file is `None`, a damaged one is reported
//! and treated as missing, so the caller falls back to what it can rebuild).

use std::path::Path;

use crate::io;

/// magic | version.
const HEADER_BYTES: usize = 4 + 2;
const CRC_BYTES: usize = 4;

/// `body` framed as a file with `magic` and `version`.
pub fn frame(magic: &[u8; 4], version: u16, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len() + CRC_BYTES);
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(body);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The body of a framed file; `Err` says why the bytes are not one (short, CRC, magic,
/// version).
pub fn unframe<'a>(magic: &[u8; 4], version: u16, bytes: &'a [u8]) -> Result<&'a [u8], String> {
    if bytes.len() < HEADER_BYTES + CRC_BYTES {
        return Err(format!("{} bytes is too short", bytes.len()));
    }
    let (framed, crc) = bytes.split_at(bytes.len() - CRC_BYTES);
    let stored = u32::from_be_bytes(crc.try_into().expect("4 bytes"));
    if crc32c::crc32c(framed) != stored {
        return Err("CRC mismatch".into());
    }
    if &framed[..4] != magic {
        return Err("bad magic".into());
    }
    let found = u16::from_be_bytes([framed[4], framed[5]]);
    if found != version {
        return Err(format!(
            "unknown version {found} (this build reads {version})"
        ));
    }
    Ok(&framed[HEADER_BYTES..])
}

/// Reads the file at `path` and decodes it with `decode` (which gets the bytes and says why
/// they are wrong). `None` when the file is missing; a file that does not decode is logged
/// with `what_then` (what the caller does instead) and is `None` too.
pub async fn load<T>(
    path: &Path,
    decode: impl FnOnce(&[u8]) -> Result<T, String>,
    what_then: &str,
) -> std::io::Result<Option<T>> {
    let Some(bytes) = io::read_small(path).await? else {
        return Ok(None);
    };
    match decode(&bytes) {
        Ok(v) => Ok(Some(v)),
        Err(why) => {
            tracing::warn!(path = %path.display(), %why, "{what_then}");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_refuse_damage() {
        let b = frame(b"TEST", 3, b"hello");
        assert_eq!(unframe(b"TEST", 3, &b), Ok(&b"hello"[..]));
        assert_eq!(unframe(b"TEST", 3, &frame(b"TEST", 3, b"")), Ok(&b""[..]));
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x10;
            assert!(unframe(b"TEST", 3, &d).is_err(), "flip at {i}");
        }
        assert!(unframe(b"TEST", 3, &b[..5]).is_err());
        assert!(unframe(b"TEST", 4, &b).unwrap_err().contains("version 3"));
        assert!(unframe(b"TESS", 3, &b).unwrap_err().contains("magic"));
    }
}
