//! Validation of a batch's records, as Kafka's log validator does on the produce path: the
//! records parse, their count and offset deltas match the header, nothing trails them, their
//! timestamps fit, and a compressed batch decodes with its codec. Decompression streams: the
//! records are walked as they are inflated and never held whole, and a batch that inflates past
//! [`MAX_DECOMPRESSED_BATCH_BYTES`] is refused (a zstd/lz4/gzip bomb costs bounded CPU and a
//! fixed small buffer). Valid batches are still stored exactly as sent.
//!
//! Record layout (v2): length varint | attributes i8 | timestampDelta varlong | offsetDelta
//! varint | keyLength varint | key | valueLength varint | value | headerCount varint |
//! [headerKeyLength varint | headerKey | headerValueLength varint | headerValue]...

use std::io::{self, Read};

use crate::batch::{
    decode_varlong, BadTimestamps, BatchError, BatchHeader, VarlongError, HEADER_BYTES,
    MAX_VARLONG_BYTES,
};
use crate::config::TimestampWindow;

/// Largest records section a compressed batch may inflate to.
pub const MAX_DECOMPRESSED_BATCH_BYTES: u64 = 128 << 20;

/// Most bytes one byte of raw snappy can become: its densest element, a 3-byte copy, yields 64.
const SNAPPY_MAX_EXPANSION: u64 = 22;

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

fn invalid(why: impl Into<String>) -> BatchError {
    BatchError::InvalidRecords(why.into())
}

/// Most records with a bad timestamp that one refusal names (the batch is refused whole; the
/// client is told which records failed, up to this many).
pub const MAX_LISTED_BAD_TIMESTAMPS: usize = 100;

/// A record timestamp that means "none" (Kafka's `RecordBatch.NO_TIMESTAMP`), never checked
/// against a timestamp window.
const NO_TIMESTAMP: i64 = -1;

/// What a log asks of the batches it takes, beyond their being well formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRules {
    /// The topic's `max.message.bytes`.
    pub max_bytes: usize,
    /// Every record must have a key (a compacted topic, as Kafka refuses keyless records).
    pub require_keys: bool,
    /// The record timestamps a client's batch may carry (`message.timestamp.before.max.ms`
    /// and `message.timestamp.after.max.ms` around now, CreateTime topics); `None`: any.
    pub timestamps: Option<TimestampWindow>,
}

impl BatchRules {
    /// Any well-formed batch up to `max_bytes`.
    pub fn max_bytes(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            require_keys: false,
            timestamps: None,
        }
    }
}

/// Checks the records of batch `b` (whose header `h` already passed `batch::validate`).
pub fn validate_records(b: &[u8], h: &BatchHeader) -> Result<(), BatchError> {
    validate_records_with(b, h, BatchRules::max_bytes(usize::MAX))
}

fn validate_records_with(b: &[u8], h: &BatchHeader, rules: BatchRules) -> Result<(), BatchError> {
    let data = &b[HEADER_BYTES..];
    let k = rules;
    match h.compression() {
        0 => walk_source(SliceSource(data), h, "uncompressed", k),
        1 => walk(flate2::read::GzDecoder::new(data), h, "gzip", k),
        2 => walk_snappy(data, h, k),
        3 => walk(lz4_flex::frame::FrameDecoder::new(data), h, "lz4", k),
        4 => {
            let dec = ruzstd::decoding::StreamingDecoder::new(data)
                .map_err(|e| invalid(format!("zstd records do not decode: {e}")))?;
            walk(dec, h, "zstd", k)
        }
        other => Err(BatchError::InvalidCompression(other)),
    }
}

fn walk_snappy(data: &[u8], h: &BatchHeader, rules: BatchRules) -> Result<(), BatchError> {
    let raw = |block: &[u8], budget: u64| -> Result<Vec<u8>, BatchError> {
        let len = snap::raw::decompress_len(block)
            .map_err(|e| invalid(format!("snappy records do not decode: {e}")))?;
        if len as u64 > budget {
            return Err(BatchError::DecompressedTooLarge {
                max_bytes: MAX_DECOMPRESSED_BATCH_BYTES,
            });
        }
        // The declared length sizes the output buffer: it must be one the input can produce,
        // so the buffer stays proportional to the bytes that came off the network.
        if len as u64 > (block.len() as u64).saturating_mul(SNAPPY_MAX_EXPANSION) {
            return Err(invalid(format!(
                "snappy block of {} bytes declares {len} bytes, more than it can hold",
                block.len()
            )));
        }
        snap::raw::Decoder::new()
            .decompress_vec(block)
            .map_err(|e| invalid(format!("snappy records do not decode: {e}")))
    };
    if !data.starts_with(XERIAL_MAGIC) {
        let out = raw(data, MAX_DECOMPRESSED_BATCH_BYTES)?;
        return walk_source(SliceSource(&out), h, "snappy", rules);
    }
    // xerial framing (the Java client): magic, two i32 versions, then [i32 length | raw block].
    let mut rest = data
        .get(XERIAL_HEADER_BYTES..)
        .ok_or_else(|| invalid("truncated xerial snappy header"))?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let len = rest
            .get(..4)
            .map(|l| u32::from_be_bytes(l.try_into().expect("4 bytes")) as usize)
            .ok_or_else(|| invalid("truncated xerial snappy block"))?;
        let block = rest
            .get(4..4 + len)
            .ok_or_else(|| invalid("truncated xerial snappy block"))?;
        let budget = MAX_DECOMPRESSED_BATCH_BYTES.saturating_sub(out.len() as u64);
        out.extend(raw(block, budget)?);
        rest = &rest[4 + len..];
    }
    walk_source(SliceSource(&out), h, "snappy", rules)
}

/// Where records are read from: a slice (uncompressed: skipping a value is a pointer move)
/// or a decompressing stream (skipping inflates into a small buffer and drops it).
trait Source {
    /// The bytes not yet consumed, where the source is a slice (the varint fast path).
    fn rest(&self) -> Option<&[u8]> {
        None
    }
    /// Consumes `n` bytes of [`Source::rest`].
    fn advance(&mut self, _n: usize) {}
    fn byte(&mut self) -> io::Result<u8>;
    fn skip(&mut self, n: u64) -> io::Result<()>;
    fn at_end(&mut self) -> io::Result<bool>;
}

struct SliceSource<'a>(&'a [u8]);

impl Source for SliceSource<'_> {
    fn rest(&self) -> Option<&[u8]> {
        Some(self.0)
    }
    fn advance(&mut self, n: usize) {
        self.0 = &self.0[n..];
    }
    fn byte(&mut self) -> io::Result<u8> {
        let (&b, rest) = self.0.split_first().ok_or(io::ErrorKind::UnexpectedEof)?;
        self.0 = rest;
        Ok(b)
    }
    fn skip(&mut self, n: u64) -> io::Result<()> {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.0 = self.0.get(n..).ok_or(io::ErrorKind::UnexpectedEof)?;
        Ok(())
    }
    fn at_end(&mut self) -> io::Result<bool> {
        Ok(self.0.is_empty())
    }
}

/// A decompressing stream, counted and failed past the decompression bound.
struct StreamSource<R> {
    inner: io::BufReader<R>,
    read: u64,
}

const BOMB: &str = "decompressed records exceed the bound";
/// Buffer of a decompressing stream (the only memory a compressed batch costs to check).
const STREAM_BUFFER_BYTES: usize = 64 << 10;

impl<R: Read> StreamSource<R> {
    fn count(&mut self, n: u64) -> io::Result<()> {
        self.read += n;
        if self.read > MAX_DECOMPRESSED_BATCH_BYTES {
            return Err(io::Error::other(BOMB));
        }
        Ok(())
    }
}

impl<R: Read> Source for StreamSource<R> {
    fn byte(&mut self) -> io::Result<u8> {
        let mut b = [0u8; 1];
        self.inner.read_exact(&mut b)?;
        self.count(1)?;
        Ok(b[0])
    }
    fn skip(&mut self, n: u64) -> io::Result<()> {
        self.count(n)?;
        let copied = io::copy(&mut (&mut self.inner).take(n), &mut io::sink())?;
        if copied < n {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }
    fn at_end(&mut self) -> io::Result<bool> {
        Ok(io::BufRead::fill_buf(&mut self.inner)?.is_empty())
    }
}

struct Records<S> {
    r: S,
    /// Bytes consumed inside the current record.
    used: u64,
    codec: &'static str,
}

impl<S: Source> Records<S> {
    fn err(&self, e: io::Error) -> BatchError {
        if e.to_string() == BOMB {
            BatchError::DecompressedTooLarge {
                max_bytes: MAX_DECOMPRESSED_BATCH_BYTES,
            }
        } else if e.kind() == io::ErrorKind::UnexpectedEof {
            invalid(format!("{} records end early", self.codec))
        } else {
            invalid(format!("{} records do not decode: {e}", self.codec))
        }
    }

    fn byte(&mut self) -> Result<u8, BatchError> {
        let b = self.r.byte().map_err(|e| self.err(e))?;
        self.used += 1;
        Ok(b)
    }

    /// A zig-zag varlong (varints are read the same way and range-checked by the caller),
    /// decoded by the engine's one varint reader (`batch::decode_varlong`).
    fn varlong(&mut self) -> Result<i64, BatchError> {
        let too_long = || invalid("record varint is longer than 10 bytes");
        // Fast path on a slice: decoded in place.
        if let Some(rest) = self.r.rest() {
            return match decode_varlong(rest) {
                Ok((v, n)) => {
                    self.r.advance(n);
                    self.used += n as u64;
                    Ok(v)
                }
                Err(VarlongError::Truncated) => {
                    Err(invalid(format!("{} records end early", self.codec)))
                }
                Err(VarlongError::TooLong) => Err(too_long()),
            };
        }
        // A stream: its bytes gathered up to the last one of the varint.
        let mut bytes = [0u8; MAX_VARLONG_BYTES];
        for i in 0..MAX_VARLONG_BYTES {
            bytes[i] = self.byte()?;
            if bytes[i] & 0x80 == 0 {
                return decode_varlong(&bytes[..=i])
                    .map(|(v, _)| v)
                    .map_err(|_| too_long());
            }
        }
        Err(too_long())
    }

    fn varint(&mut self, what: &str) -> Result<i32, BatchError> {
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| invalid(format!("record {what} {v} does not fit an int32")))
    }

    /// A length-prefixed field: `min` is -1 where null is allowed. Returns its length.
    fn field(&mut self, what: &str, min: i32, room: u64) -> Result<i32, BatchError> {
        let len = self.varint(what)?;
        if len < min {
            return Err(invalid(format!("record {what} length {len} is negative")));
        }
        if len > 0 {
            if len as u64 > room.saturating_sub(self.used) {
                return Err(invalid(format!(
                    "record {what} of {len} bytes runs past its record"
                )));
            }
            self.r.skip(len as u64).map_err(|e| self.err(e))?;
            self.used += len as u64;
        }
        Ok(len)
    }
}

fn walk(
    r: impl Read,
    h: &BatchHeader,
    codec: &'static str,
    rules: BatchRules,
) -> Result<(), BatchError> {
    walk_source(
        StreamSource {
            inner: io::BufReader::with_capacity(STREAM_BUFFER_BYTES, r),
            read: 0,
        },
        h,
        codec,
        rules,
    )
}

fn walk_source(
    r: impl Source,
    h: &BatchHeader,
    codec: &'static str,
    rules: BatchRules,
) -> Result<(), BatchError> {
    let mut rec = Records { r, used: 0, codec };
    // Records whose timestamp lies outside `rules.timestamps` (the first ones): the batch is
    // refused whole, after the walk, as Kafka checks every record before refusing.
    let mut bad_timestamps: Vec<(i32, i64)> = Vec::new();
    let mut bad_count = 0usize;
    for i in 0..h.records_count {
        let len = rec.varint("length")?;
        if len < 0 {
            return Err(invalid(format!("record {i} has negative length {len}")));
        }
        let len = len as u64;
        rec.used = 0;
        rec.byte()?; // attributes (unused in v2)
        let ts_delta = rec.varlong()?;
        let offset_delta = rec.varint("offset delta")?;
        if offset_delta != i {
            return Err(invalid(format!(
                "record {i} has offset delta {offset_delta}; offsets in a batch must be consecutive"
            )));
        }
        let Some(timestamp) = h.base_timestamp.checked_add(ts_delta) else {
            return Err(invalid(format!("record {i} timestamp overflows")));
        };
        if let Some(w) = rules.timestamps {
            if timestamp != NO_TIMESTAMP && !w.admits(timestamp) {
                bad_count += 1;
                if bad_timestamps.len() < MAX_LISTED_BAD_TIMESTAMPS {
                    bad_timestamps.push((i, timestamp));
                }
            }
        }
        if rec.field("key", -1, len)? < 0 && rules.require_keys {
            return Err(BatchError::MissingKey { record: i });
        }
        rec.field("value", -1, len)?;
        let headers = rec.varint("header count")?;
        if headers < 0 {
            return Err(invalid(format!("record {i} has {headers} headers")));
        }
        for _ in 0..headers {
            if rec.used >= len {
                return Err(invalid(format!("record {i} headers run past its record")));
            }
            rec.field("header key", 0, len)?;
            rec.field("header value", -1, len)?;
        }
        if rec.used != len {
            return Err(invalid(format!(
                "record {i} declares {len} bytes but its fields take {}",
                rec.used
            )));
        }
    }
    // Nothing may follow the last record.
    match rec.r.at_end() {
        Ok(true) => {}
        Ok(false) => {
            return Err(invalid(format!(
                "{codec} records: bytes follow the {} records the header declares",
                h.records_count
            )))
        }
        Err(e) => return Err(rec.err(e)),
    }
    if let Some(window) = rules.timestamps.filter(|_| bad_count > 0) {
        return Err(BatchError::InvalidTimestamp(Box::new(BadTimestamps {
            records: bad_timestamps,
            count: bad_count,
            window,
        })));
    }
    Ok(())
}

/// A batch that passed [`crate::batch::validate`] and [`validate_records`]: its bytes and parsed header travel together, so a caller
/// that had to look at the header (the broker's idempotence check) does not make the log
/// compute the CRC a second time.
#[derive(Debug, Clone, Copy)]
pub struct ValidBatch<'a> {
    bytes: &'a [u8],
    header: BatchHeader,
}

impl<'a> ValidBatch<'a> {
    /// Validates the size against `rules.max_bytes` (the topic's `max.message.bytes`) first,
    /// so an oversized batch costs no more work, then the header and CRC, then the records
    /// themselves (`validate_records`, and keys where `rules` require them): what enters the
    /// log from outside.
    pub fn new(bytes: &'a [u8], rules: BatchRules) -> Result<Self, BatchError> {
        if bytes.len() > rules.max_bytes {
            return Err(BatchError::TooLarge {
                len: bytes.len(),
                max_bytes: rules.max_bytes,
            });
        }
        let header = crate::batch::validate(bytes)?;
        validate_records_with(bytes, &header, rules)?;
        Ok(Self { header, bytes })
    }

    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn header(&self) -> &BatchHeader {
        &self.header
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use bytes::Bytes;

    use super::*;
    use crate::batch::{self, validate, RECORDS_COUNT_POS};
    use crate::batch_encode::{encode_uncompressed, NewRecord};

    fn records(n: usize) -> Vec<u8> {
        encode_uncompressed((0..n).map(|i| NewRecord {
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(vec![b'v'; 100 + i])),
            headers: Default::default(),
            timestamp_ms: 1_700_000_000_000 + i as i64,
        }))
    }

    fn with_section(b: &[u8], codec: i16, section: &[u8]) -> Vec<u8> {
        batch::with_records_section(b, codec, section)
    }

    fn check(b: &[u8]) -> Result<(), BatchError> {
        let h = validate(b)?;
        validate_records(b, &h)
    }

    fn compress(codec: i16, data: &[u8]) -> Vec<u8> {
        match codec {
            1 => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            2 => snap::raw::Encoder::new().compress_vec(data).unwrap(),
            3 => {
                let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            4 => {
                ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
            }
            _ => data.to_vec(),
        }
    }

    #[test]
    fn valid_batches_of_every_codec_pass() {
        let b = records(50);
        check(&b).unwrap();
        for codec in 1..=4 {
            let c = with_section(&b, codec, &compress(codec, &b[HEADER_BYTES..]));
            check(&c).unwrap_or_else(|e| panic!("codec {codec}: {e}"));
        }
    }

    #[test]
    fn lying_counts_and_trailing_bytes_are_refused() {
        let b = records(3);
        // Count 2^31-1 with a matching lastOffsetDelta: the records are not there.
        let mut lie = b.clone();
        lie[RECORDS_COUNT_POS..RECORDS_COUNT_POS + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        lie[batch::LAST_OFFSET_DELTA_POS..batch::LAST_OFFSET_DELTA_POS + 4]
            .copy_from_slice(&(i32::MAX - 1).to_be_bytes());
        let lie = with_section(&lie, 0, &b[HEADER_BYTES..]);
        assert!(
            matches!(check(&lie), Err(BatchError::InvalidRecords(_))),
            "{:?}",
            check(&lie)
        );
        // Fewer declared than present: trailing records.
        let mut fewer = b.clone();
        fewer[RECORDS_COUNT_POS..RECORDS_COUNT_POS + 4].copy_from_slice(&2i32.to_be_bytes());
        fewer[batch::LAST_OFFSET_DELTA_POS..batch::LAST_OFFSET_DELTA_POS + 4]
            .copy_from_slice(&1i32.to_be_bytes());
        let fewer = with_section(&fewer, 0, &b[HEADER_BYTES..]);
        assert!(matches!(check(&fewer), Err(BatchError::InvalidRecords(_))));
    }

    #[test]
    fn compression_flag_on_plain_records_is_refused() {
        let b = records(3);
        for codec in 1..=4 {
            let c = with_section(&b, codec, &b[HEADER_BYTES..]);
            assert!(
                matches!(check(&c), Err(BatchError::InvalidRecords(_))),
                "codec {codec}: {:?}",
                check(&c)
            );
        }
    }

    #[test]
    fn a_decompression_bomb_is_refused_by_size() {
        // One record whose value is 200 MiB of zeros, lz4-compressed to well under 1 MiB.
        let value_len = 200usize << 20;
        let mut rec = Vec::new();
        fn uvarint(mut u: u64, out: &mut Vec<u8>) {
            loop {
                let b = (u & 0x7f) as u8;
                u >>= 7;
                if u == 0 {
                    out.push(b);
                    break;
                }
                out.push(b | 0x80);
            }
        }
        fn zz(v: i64, out: &mut Vec<u8>) {
            uvarint(((v << 1) ^ (v >> 63)) as u64, out);
        }
        let mut body = vec![0u8]; // attributes
        zz(0, &mut body); // timestamp delta
        zz(0, &mut body); // offset delta
        zz(-1, &mut body); // null key
        zz(value_len as i64, &mut body);
        let body_len = body.len() + value_len + 1;
        zz(body_len as i64, &mut rec);
        rec.extend_from_slice(&body);
        let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
        e.write_all(&rec).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..200 {
            e.write_all(&zeros).unwrap();
        }
        e.write_all(&[0]).unwrap(); // header count 0
        let section = e.finish().unwrap();
        assert!(section.len() < 2 << 20, "{} bytes", section.len());
        let base = records(1);
        let bomb = with_section(&base, 3, &section);
        assert!(matches!(
            check(&bomb),
            Err(BatchError::DecompressedTooLarge { .. })
        ));
        // Raw snappy declaring a 4 GiB output is refused before any allocation.
        let mut snappy = Vec::new();
        uvarint(u32::MAX as u64, &mut snappy);
        snappy.extend_from_slice(&[0; 8]);
        let s = with_section(&base, 2, &snappy);
        assert!(matches!(
            check(&s),
            Err(BatchError::DecompressedTooLarge { .. })
        ));
        // A declared length the block could never produce (1 MiB from 12 bytes) is refused
        // before its buffer exists.
        let mut small = Vec::new();
        uvarint(1 << 20, &mut small);
        small.extend_from_slice(&[0; 8]);
        let s = with_section(&base, 2, &small);
        assert!(
            matches!(check(&s), Err(BatchError::InvalidRecords(_))),
            "{:?}",
            check(&s)
        );
    }

    #[test]
    fn record_timestamps_outside_the_window_refuse_the_whole_batch() {
        // records(n) carries timestamps 1_700_000_000_000 + i.
        let t0 = 1_700_000_000_000;
        let b = records(5);
        let rules = |earliest_ms, latest_ms| BatchRules {
            timestamps: Some(TimestampWindow {
                earliest_ms,
                latest_ms,
            }),
            ..BatchRules::max_bytes(1 << 20)
        };
        ValidBatch::new(&b, rules(t0, t0 + 4)).unwrap();
        ValidBatch::new(&b, BatchRules::max_bytes(1 << 20)).unwrap();
        // Records 3 and 4 lie past the window's end, records 0 and 1 before its start: all
        // four are named and the batch is refused, in every codec.
        for codec in 0..=4 {
            let c = if codec == 0 {
                b.clone()
            } else {
                with_section(&b, codec, &compress(codec, &b[HEADER_BYTES..]))
            };
            match ValidBatch::new(&c, rules(t0 + 2, t0 + 2)) {
                Err(BatchError::InvalidTimestamp(bad)) => {
                    assert_eq!(bad.count, 4, "codec {codec}");
                    assert_eq!(
                        bad.records,
                        vec![(0, t0), (1, t0 + 1), (3, t0 + 3), (4, t0 + 4)]
                    );
                    let e = BatchError::InvalidTimestamp(bad.clone()).to_string();
                    assert!(
                        e.starts_with(
                            "One or more records have been rejected due to invalid timestamp"
                        ),
                        "{e}"
                    );
                    assert_eq!(
                        bad.record_message(t0, 0),
                        format!(
                            "Timestamp {t0} of message with offset 0 is out of range. The timestamp should be within [{}, {}]",
                            t0 + 2,
                            t0 + 2
                        )
                    );
                }
                other => panic!("codec {codec}: {other:?}"),
            }
        }
        // A batch of many bad records names only the first ones.
        let many = records(MAX_LISTED_BAD_TIMESTAMPS + 20);
        match ValidBatch::new(&many, rules(0, 1)) {
            Err(BatchError::InvalidTimestamp(bad)) => {
                assert_eq!(bad.count, MAX_LISTED_BAD_TIMESTAMPS + 20);
                assert_eq!(bad.records.len(), MAX_LISTED_BAD_TIMESTAMPS);
            }
            other => panic!("{other:?}"),
        }
        // A record without a timestamp (-1) is never out of range.
        let none = encode_uncompressed([NewRecord {
            value: Some(Bytes::from_static(b"v")),
            timestamp_ms: NO_TIMESTAMP,
            ..Default::default()
        }]);
        ValidBatch::new(&none, rules(t0, t0)).unwrap();
        // A malformed batch is refused for what is wrong with it first.
        let mut lying = b.clone();
        lying[RECORDS_COUNT_POS..RECORDS_COUNT_POS + 4].copy_from_slice(&4i32.to_be_bytes());
        let lying = batch::with_records_section(&lying, 0, &b[HEADER_BYTES..]);
        assert!(!matches!(
            ValidBatch::new(&lying, rules(t0 + 2, t0 + 2)),
            Err(BatchError::InvalidTimestamp(_)) | Ok(_)
        ));
    }
}
