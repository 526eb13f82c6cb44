//! Decompression of a record batch's records section, for the few engine paths that must look
//! inside a batch (ListOffsets by timestamp, the log cleaner), and compression for the cleaner,
//! which writes a filtered batch back with its codec. Batches are always appended as sent;
//! nothing here is on the append path. Pure-Rust decoders: gzip (flate2/miniz_oxide), snappy (raw, or the
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

/// Raw snappy block size inside the xerial framing (the Java client's default).
const XERIAL_BLOCK_BYTES: usize = 32 << 10;

/// Whether `data` (a compressed records section) uses the xerial snappy framing.
pub fn is_xerial_snappy(data: &[u8]) -> bool {
    data.starts_with(XERIAL_MAGIC)
}

/// Compresses a records section with Kafka codec `codec` (1 gzip, 2 snappy, 3 lz4, 4 zstd);
/// snappy is written in the xerial framing when `xerial` (as the batch it replaces was).
pub fn compress(codec: i16, data: &[u8], xerial: bool) -> Result<Vec<u8>, String> {
    use std::io::Write;
    let err = |e: std::io::Error| e.to_string();
    match codec {
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).map_err(err)?;
            e.finish().map_err(err)
        }
        2 if xerial => {
            let mut out = XERIAL_MAGIC.to_vec();
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            for block in data.chunks(XERIAL_BLOCK_BYTES) {
                let c = snap::raw::Encoder::new()
                    .compress_vec(block)
                    .map_err(|e| e.to_string())?;
                out.extend_from_slice(&(c.len() as u32).to_be_bytes());
                out.extend_from_slice(&c);
            }
            Ok(out)
        }
        2 => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(|e| e.to_string()),
        3 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data).map_err(err)?;
            e.finish().map_err(|e| e.to_string())
        }
        4 => Ok(ruzstd::encoding::compress_to_vec(
            data,
            ruzstd::encoding::CompressionLevel::Fastest,
        )),
        other => Err(format!("unknown compression codec {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        for (codec, xerial) in [(1, false), (2, false), (2, true), (3, false), (4, false)] {
            let c = compress(codec, &data, xerial).unwrap();
            assert_eq!(is_xerial_snappy(&c), xerial, "codec {codec}");
            assert_eq!(decompress(codec, &c).unwrap(), data, "codec {codec}");
        }
    }
}
