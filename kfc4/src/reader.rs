//! The bounds-checked cursor the barrier decoders (these formats, the broker's API codec)
//! read hostile bytes with: every read checks the bytes left first, and an error names where it stopped.

/// What a decoder's errors say beyond the position and the detail (the record kind, the API).
pub trait ErrorContext: Copy {
    type Error;
    fn error(self, at_byte: usize, detail: String) -> Self::Error;
}

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

    pub fn err_at(&self, at_byte: usize, detail: String) -> C::Error {
        self.ctx.error(at_byte, detail)
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], C::Error> {
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

    pub fn fixed<const N: usize>(&mut self, field: &str) -> Result<[u8; N], C::Error> {
        let start = self.pos;
        let bytes = self.take(N, field)?;
        <[u8; N]>::try_from(bytes).map_err(|_| self.err_at(start, format!("{field}: short read")))
    }

    pub fn i8(&mut self, field: &str) -> Result<i8, C::Error> {
        Ok(i8::from_be_bytes(self.fixed(field)?))
    }

    pub fn i16(&mut self, field: &str) -> Result<i16, C::Error> {
        Ok(i16::from_be_bytes(self.fixed(field)?))
    }

    pub fn i32(&mut self, field: &str) -> Result<i32, C::Error> {
        Ok(i32::from_be_bytes(self.fixed(field)?))
    }

    pub fn u32(&mut self, field: &str) -> Result<u32, C::Error> {
        Ok(u32::from_be_bytes(self.fixed(field)?))
    }

    pub fn i64(&mut self, field: &str) -> Result<i64, C::Error> {
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
    ) -> Result<(), C::Error> {
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

    /// A UTF-8 string of the next `len` bytes, at most `max_bytes` (`at`: where its length
    /// was read).
    pub fn utf8(
        &mut self,
        field: &str,
        at: usize,
        len: usize,
        max_bytes: usize,
    ) -> Result<String, C::Error> {
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
