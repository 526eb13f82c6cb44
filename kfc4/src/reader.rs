//! The bounds-checked cursor the barrier decoders (these formats, the broker's API codec)
//! read hostile bytes with: every read checks the bytes left first, and an error names where it stopped.

use std::fmt;

/// What a decoder was reading (the record kind, the API): the start of its errors' message.
pub trait ErrorContext: Copy + fmt::Debug {
    /// What a whole input is called ("record", "body"): bytes after it are trailing bytes.
    const WHOLE: &'static str;
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// Bytes that could not be decoded: what was being decoded, where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError<C> {
    /// What was being decoded: the record ("state key", "cut value", "snapshot", ...), or the
    /// API key of a frame.
    pub what: C,
    /// The offset in the input of the field that was refused.
    pub at_byte: usize,
    /// The field and the reason.
    pub detail: String,
}

impl<C: ErrorContext> fmt::Display for DecodeError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.what.describe(f)?;
        write!(f, " at byte {}: {}", self.at_byte, self.detail)
    }
}

impl<C: ErrorContext> std::error::Error for DecodeError<C> {}

/// A cursor over `buf` from `pos`.
pub struct Reader<'a, C> {
    pub buf: &'a [u8],
    pub pos: usize,
    pub ctx: C,
}

impl<'a, C: ErrorContext> Reader<'a, C> {
    pub fn new(ctx: C, buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0, ctx }
    }

    pub fn err_at(&self, at_byte: usize, detail: String) -> DecodeError<C> {
        DecodeError {
            what: self.ctx,
            at_byte,
            detail,
        }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], DecodeError<C>> {
        let start = self.pos;
        match start
            .checked_add(n)
            .and_then(|end| self.buf.get(start..end))
        {
            Some(bytes) => {
                self.pos = start + n;
                Ok(bytes)
            }
            None => Err(self.err_at(
                start,
                format!("{field}: needs {n} bytes, {} left", self.remaining()),
            )),
        }
    }

    pub fn fixed<const N: usize>(&mut self, field: &str) -> Result<[u8; N], DecodeError<C>> {
        let start = self.pos;
        let bytes = self.take(N, field)?;
        <[u8; N]>::try_from(bytes).map_err(|_| self.err_at(start, format!("{field}: short read")))
    }

    pub fn i8(&mut self, field: &str) -> Result<i8, DecodeError<C>> {
        Ok(i8::from_be_bytes(self.fixed(field)?))
    }

    pub fn i16(&mut self, field: &str) -> Result<i16, DecodeError<C>> {
        Ok(i16::from_be_bytes(self.fixed(field)?))
    }

    pub fn i32(&mut self, field: &str) -> Result<i32, DecodeError<C>> {
        Ok(i32::from_be_bytes(self.fixed(field)?))
    }

    pub fn u32(&mut self, field: &str) -> Result<u32, DecodeError<C>> {
        Ok(u32::from_be_bytes(self.fixed(field)?))
    }

    pub fn i64(&mut self, field: &str) -> Result<i64, DecodeError<C>> {
        Ok(i64::from_be_bytes(self.fixed(field)?))
    }

    /// Refuses `count` elements of at least `min_element_bytes` each that the bytes left
    /// could not hold (`at`: where the count was read): no allocation is sized by a lie.
    pub fn check_count(
        &self,
        field: &str,
        at: usize,
        count: usize,
        min_element_bytes: usize,
    ) -> Result<(), DecodeError<C>> {
        let room = self.remaining() / min_element_bytes.max(1);
        if count > room {
            return Err(self.err_at(
                at,
                format!(
                    "{field}: count {count}, but the {} bytes left hold at most {room}",
                    self.remaining()
                ),
            ));
        }
        Ok(())
    }

    /// A classic NULLABLE_STRING: an `i16` length (-1: null, any other negative one refused),
    /// then that many UTF-8 bytes, at most `max_bytes`.
    pub fn nullable_str16(
        &mut self,
        field: &str,
        max_bytes: usize,
    ) -> Result<Option<String>, DecodeError<C>> {
        let at = self.pos;
        let len = self.i16(field)?;
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len)
            .map_err(|_| self.err_at(at, format!("{field}: negative length {len}")))?;
        self.utf8(field, at, len, max_bytes).map(Some)
    }

    /// A classic `str16`: a NULLABLE_STRING that must not be null (its length -1 refused as
    /// any other negative one).
    pub fn str16(&mut self, field: &str, max_bytes: usize) -> Result<String, DecodeError<C>> {
        let at = self.pos;
        self.nullable_str16(field, max_bytes)?
            .ok_or_else(|| self.err_at(at, format!("{field}: negative length -1")))
    }

    /// Refuses bytes after the whole input.
    pub fn finish(&self) -> Result<(), DecodeError<C>> {
        if self.remaining() != 0 {
            return Err(self.err_at(
                self.pos,
                format!("{} trailing bytes after the {}", self.remaining(), C::WHOLE),
            ));
        }
        Ok(())
    }

    /// A UTF-8 string of the next `len` bytes, at most `max_bytes` (`at`: where its length
    /// was read).
    pub fn utf8(
        &mut self,
        field: &str,
        at: usize,
        len: usize,
        max_bytes: usize,
    ) -> Result<String, DecodeError<C>> {
        if len > max_bytes {
            return Err(self.err_at(
                at,
                format!("{field}: {len} bytes, more than the limit of {max_bytes}"),
            ));
        }
        let bytes = self.take(len, field)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| self.err_at(at, format!("{field}: not UTF-8 ({e})")))
    }
}
