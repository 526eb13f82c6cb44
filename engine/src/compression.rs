//! Decompression of a record batch's records section, for the few engine paths that must look
//! inside a batch (ListOffsets by timestamp). Batches are always stored as sent; nothing here
//! is on the append path. Pure-Rust decoders: gzip (flate2/miniz_oxide), snappy (raw, or the
//! xerial framing the Java client writes), lz4 (frame format), zstd (ruzstd).

use std::io::Read;

/// Largest decompressed records section accepted (a bound against decompression bombs).
pub const MAX_DECOMPRESSED_BYTES: usize = 256 << 20;

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";

fn read_bounded(mut r: impl Read) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    r.by_ref()
        .take(MAX_DECOMPRESSED_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() > MAX_DECOMPRESSED_BYTES {
        return Err(format!(
            "decompressed records exceed {MAX_DECOMPRESSED_BYTES} bytes"
        ));
    }
    Ok(out)
}

fn snappy(data: &[u8]) -> Result<Vec<u8>, String> {
    if !data.starts_with(XERIAL_MAGIC) {
        return snap::raw::Decoder::new()
            .decompress_vec(data)
            .map_err(|e| e.to_string());
    }
    // xerial: 8-byte magic, two i32 versions, then [i32 length | raw snappy block]...
    let mut rest = data.get(16..).ok_or("truncated xerial snappy header")?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = u32::from_be_bytes(
            rest.get(..4)
                .ok_or("truncated xerial block")?
                .try_into()
                .expect("4 bytes"),
        ) as usize;
        let block = rest.get(4..4 + len).ok_or("truncated xerial block")?;
        out.extend(
            snap::raw::Decoder::new()
                .decompress_vec(block)
                .map_err(|e| e.to_string())?,
        );
        if out.len() > MAX_DECOMPRESSED_BYTES {
            return Err(format!(
                "decompressed records exceed {MAX_DECOMPRESSED_BYTES} bytes"
            ));
        }
        rest = &rest[4 + len..];
    }
    Ok(out)
}

/// Decompresses `data` compressed with Kafka codec `codec` (1 gzip, 2 snappy, 3 lz4, 4 zstd).
pub fn decompress(codec: i16, data: &[u8]) -> Result<Vec<u8>, String> {
    match codec {
        1 => read_bounded(flate2::read::GzDecoder::new(data)),
        2 => snappy(data),
        3 => read_bounded(lz4_flex::frame::FrameDecoder::new(data)),
        4 => {
            read_bounded(ruzstd::decoding::StreamingDecoder::new(data).map_err(|e| e.to_string())?)
        }
        other => Err(format!("unknown compression codec {other}")),
    }
}
