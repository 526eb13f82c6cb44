//! The one walker over the records of a stored batch: its records section (decompressed
//! where the batch is compressed) and a view of each record, borrowed from the section. The
//! cleaner, the transaction markers' reader and the timestamp lookup read records through
//! it; the produce path's validator (`record_check`) streams them instead, through the same
//! varint reader ([`super::decode_varlong`]).

use std::borrow::Cow;

use super::{read_varlong, BatchError, BatchHeader, HEADER_BYTES};
use crate::compression;

/// One record of a stored batch.
#[derive(Debug, Clone, Copy)]
pub struct RecordView<'a> {
    pub offset_delta: i32,
    /// Absolute record timestamp (base timestamp + delta).
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    /// A null value: the key is deleted.
    pub tombstone: bool,
    /// The value's bytes (None for a tombstone).
    pub value: Option<&'a [u8]>,
    /// The whole record as stored: its length varint through its last header.
    pub(crate) raw: &'a [u8],
    /// Where in `raw` the fields after the offset delta (key length onwards) start.
    pub(crate) body_from: usize,
    pub(crate) attributes: u8,
}

pub(crate) fn bad(why: impl Into<String>) -> BatchError {
    BatchError::InvalidRecords(why.into())
}

/// The records section of batch `b`, decompressed (bounded) when the batch is compressed.
pub fn section<'a>(b: &'a [u8], h: &BatchHeader) -> Result<Cow<'a, [u8]>, BatchError> {
    let data = b
        .get(HEADER_BYTES..)
        .ok_or(BatchError::TooShort { len: b.len() })?;
    match h.compression() {
        0 => Ok(Cow::Borrowed(data)),
        codec => compression::decompress(codec, data)
            .map(Cow::Owned)
            .map_err(|e| bad(format!("codec {codec}: {e}"))),
    }
}

/// Parses every record of `section` (the records of batch `h`).
pub fn parse<'a>(section: &'a [u8], h: &BatchHeader) -> Result<Vec<RecordView<'a>>, BatchError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let trunc = || bad("records end early");
    for _ in 0..h.records_count.max(0) {
        let start = pos;
        let len = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        let len = usize::try_from(len).map_err(|_| bad("negative record length"))?;
        let end = pos
            .checked_add(len)
            .filter(|&e| e <= section.len())
            .ok_or_else(trunc)?;
        let attributes = *section.get(pos).ok_or_else(trunc)?;
        pos += 1;
        let ts_delta = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        let offset_delta = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        let body_from = pos - start;
        let key_len = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        let key = match key_len {
            -1 => None,
            n if n >= 0 && pos <= end && (n as u64) <= (end - pos) as u64 => {
                let k = &section[pos..pos + n as usize];
                pos += n as usize;
                Some(k)
            }
            n => return Err(bad(format!("record key length {n}"))),
        };
        let value_len = read_varlong(section, &mut pos).ok_or_else(trunc)?;
        if pos > end {
            return Err(trunc());
        }
        let value = match value_len {
            n if n < 0 => None,
            n if (n as u64) <= (end - pos) as u64 => Some(&section[pos..pos + n as usize]),
            n => return Err(bad(format!("record value length {n}"))),
        };
        out.push(RecordView {
            offset_delta: i32::try_from(offset_delta).map_err(|_| bad("offset delta"))?,
            timestamp_ms: h.base_timestamp.saturating_add(ts_delta),
            key,
            tombstone: value_len < 0,
            value,
            raw: &section[start..end],
            body_from,
            attributes,
        });
        pos = end;
    }
    Ok(out)
}
