//! A bounds-checked reader over a byte slice: the field reader of both
//! record encodings (klog's legacy LEB128 lengths, Kafka's zigzag varints).
//!
//! Every read checks the bytes left first; an error names the field.

use crate::error::DecodeError;

/// A bounds-checked reader over a byte slice.
pub(super) struct Cursor<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub(super) fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(super) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Truncated {
            what,
            needed_bytes: 1,
            available_bytes: 0,
        })?;
        self.pos += 1;
        Ok(b)
    }

    /// An unsigned LEB128 of at most 10 bytes that fits 64 bits.
    #[inline]
    pub(super) fn varint_u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        // Most varints of a record are one byte: lengths under 64, small
        // deltas.
        match self.buf.get(self.pos..self.pos + 2) {
            Some(&[b, _]) if b < 0x80 => {
                self.pos += 1;
                return Ok(u64::from(b));
            }
            Some(&[b0, b1]) if b1 < 0x80 => {
                self.pos += 2;
                return Ok(u64::from(b0 & 0x7f) + (u64::from(b1) << 7));
            }
            _ => {}
        }
        self.varint_u64_long(what)
    }

    #[inline(never)]
    fn varint_u64_long(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8(what)?;
            if i == 9 && b > 1 {
                return Err(DecodeError::Malformed("varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Malformed("varint longer than 10 bytes"))
    }

    /// An unsigned LEB128 of at most 5 bytes that fits 32 bits.
    #[inline]
    pub(super) fn varint_u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let start = self.pos;
        let v = self.varint_u64(what)?;
        if self.pos - start > 5 || v > u64::from(u32::MAX) {
            return Err(DecodeError::Malformed("varint overflows 32 bits"));
        }
        Ok(v as u32)
    }

    /// Kafka's varint: a zigzag LEB128 of at most 5 bytes.
    #[inline]
    pub(super) fn zigzag_i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        let raw = self.varint_u32(what)?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// Kafka's varlong: a zigzag LEB128 of at most 10 bytes.
    #[inline]
    pub(super) fn zigzag_i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(unzigzag(self.varint_u64(what)?))
    }

    /// `len` bytes; fewer left is malformed (these bytes are inside a
    /// structure whose length or CRC already vouched for them).
    #[inline]
    pub(super) fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if len > self.left() {
            return Err(DecodeError::Malformed(what));
        }
        let bytes = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(bytes)
    }

    /// klog's legacy byte string: a LEB128 length, then the bytes.
    pub(super) fn bytes_prefixed(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.varint_u32(what)? as usize;
        self.take(len, what)
    }

    /// Kafka's nullable byte string: a zigzag length (-1: null), then the
    /// bytes.
    #[inline]
    pub(super) fn nullable_bytes(
        &mut self,
        what: &'static str,
    ) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.zigzag_i32(what)? {
            -1 => Ok(None),
            len if len < -1 => Err(DecodeError::Malformed(what)),
            len => self.take(len as usize, what).map(Some),
        }
    }
}

/// Zigzag decoding.
pub(super) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Zigzag encoding.
pub(super) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Bytes the LEB128 encoding of `v` takes.
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends the LEB128 encoding of `v`.
pub(super) fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_lengths_and_zigzag_round_trip() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v), "{v}");
            assert_eq!(Cursor::new(&buf).varint_u64("v").unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
            let mut buf = Vec::new();
            put_varint(&mut buf, zigzag(v));
            assert_eq!(Cursor::new(&buf).zigzag_i64("v").unwrap(), v);
        }
        for v in [0i32, -1, 1, i32::MIN, i32::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, zigzag(i64::from(v)) & 0xffff_ffff);
            assert_eq!(Cursor::new(&buf).zigzag_i32("v").unwrap(), v);
        }
    }

    #[test]
    fn overlong_varints_are_malformed() {
        // 11 bytes; a 10th byte with more than bit 63; 6 bytes for 32 bits.
        let eleven = [0x80u8; 10].iter().copied().chain([0]).collect::<Vec<_>>();
        assert!(Cursor::new(&eleven).varint_u64("v").is_err());
        let mut tenth = vec![0xffu8; 9];
        tenth.push(0x02);
        assert!(Cursor::new(&tenth).varint_u64("v").is_err());
        tenth[9] = 0x01;
        assert_eq!(Cursor::new(&tenth).varint_u64("v").unwrap(), u64::MAX);
        let six = [0x80u8, 0x80, 0x80, 0x80, 0x80, 0];
        assert!(Cursor::new(&six).varint_u32("v").is_err());
        let big = [0xffu8, 0xff, 0xff, 0xff, 0x1f];
        assert!(Cursor::new(&big).varint_u32("v").is_err());
        let max = [0xffu8, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(Cursor::new(&max).varint_u32("v").unwrap(), u32::MAX);
    }

    #[test]
    fn lengths_past_the_end_and_below_minus_one_are_malformed() {
        // Kafka: length 3 (zigzag 6) with 2 bytes; length -2 (zigzag 3).
        assert!(Cursor::new(&[6, 1, 2]).nullable_bytes("k").is_err());
        // Below -1 is malformed, never "cut short": no more bytes mend it.
        for below in [3u8, 5] {
            let err = Cursor::new(&[below, 7, 8]).nullable_bytes("k").unwrap_err();
            assert!(matches!(err, DecodeError::Malformed("k")), "{err:?}");
        }
        assert_eq!(Cursor::new(&[1]).nullable_bytes("k").unwrap(), None);
        assert_eq!(
            Cursor::new(&[4, 7, 8]).nullable_bytes("k").unwrap(),
            Some(&[7u8, 8][..])
        );
        assert_eq!(
            Cursor::new(&[2, 7, 8]).bytes_prefixed("k").unwrap(),
            &[7u8, 8][..]
        );
        assert!(Cursor::new(&[3, 7, 8]).bytes_prefixed("k").is_err());
        assert!(Cursor::new(&[]).u8("k").unwrap_err().is_truncated());
    }
}
