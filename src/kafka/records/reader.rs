//! The reader of a Kafka record's fields: zigzag varints and byte
//! strings, each checked against the bytes left.

use super::RecordsError;

/// A bounds-checked reader of Kafka's varints and byte strings; every
/// error is [`INVALID_RECORD`](crate::kafka::INVALID_RECORD) naming the field (it reads bytes the batch
/// CRC32C already vouched for).
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub(super) fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }

    #[inline]
    pub(super) fn u8(&mut self, what: &str) -> Result<u8, RecordsError> {
        let byte = self
            .buf
            .get(self.pos)
            .copied()
            .ok_or_else(|| cut_short(what))?;
        self.pos += 1;
        Ok(byte)
    }

    /// An unsigned LEB128 of at most `bytes_max` bytes.
    #[inline]
    pub(super) fn uvarint(&mut self, bytes_max: usize, what: &str) -> Result<u64, RecordsError> {
        // Most varints of a record are one byte: lengths under 64, small
        // deltas.
        if let Some(&byte) = self.buf.get(self.pos) {
            if byte < 0x80 {
                self.pos += 1;
                return Ok(u64::from(byte));
            }
        }
        self.uvarint_long(bytes_max, what)
    }

    #[inline(never)]
    pub(super) fn uvarint_long(
        &mut self,
        bytes_max: usize,
        what: &str,
    ) -> Result<u64, RecordsError> {
        let mut value = 0u64;
        for i in 0..bytes_max {
            let byte = self.u8(what)?;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordsError::invalid(format!(
            "{what}: a varint longer than {bytes_max} bytes"
        )))
    }

    #[inline]
    pub(super) fn varint(&mut self, what: &str) -> Result<i32, RecordsError> {
        let raw = self.uvarint(5, what)?;
        let raw = u32::try_from(raw)
            .map_err(|_| RecordsError::invalid(format!("{what}: a varint over 32 bits")))?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    #[inline]
    pub(super) fn varlong(&mut self, what: &str) -> Result<i64, RecordsError> {
        // The 10th byte holds bit 63 only; more bits do not fit.
        let start = self.pos;
        let raw = self.uvarint(10, what)?;
        if self.pos - start == 10 && self.buf[self.pos - 1] > 1 {
            return Err(RecordsError::invalid(format!(
                "{what}: a varlong over 64 bits"
            )));
        }
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    #[inline]
    pub(super) fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], RecordsError> {
        if len > self.left() {
            return Err(RecordsError::invalid(format!(
                "{what}: length {len} with {} bytes left",
                self.left()
            )));
        }
        let bytes = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(bytes)
    }

    /// A varint length (-1: null) and that many bytes.
    #[inline]
    pub(super) fn nullable_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>, RecordsError> {
        match self.varint(what)? {
            -1 => Ok(None),
            len if len < -1 => Err(RecordsError::invalid(format!(
                "{what}: negative length {len}"
            ))),
            len => self.take(len as usize, what).map(Some),
        }
    }

    /// A header: its key (never null) and its value (null read as empty).
    pub(super) fn header(&mut self) -> Result<(&'a [u8], &'a [u8]), RecordsError> {
        let name = self
            .nullable_bytes("header key")?
            .ok_or_else(|| RecordsError::invalid("a null header key"))?;
        let value = self.nullable_bytes("header value")?.unwrap_or(&[]);
        Ok((name, value))
    }
}

fn cut_short(what: &str) -> RecordsError {
    RecordsError::invalid(format!("{what}: the record ends first"))
}
