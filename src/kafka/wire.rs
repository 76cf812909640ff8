//! Kafka's primitive types, field by field: [`Decoder`] takes a frame body
//! apart without copying, and the `put_*` functions append fields to one.
//!
//! Every integer is big-endian (network order), unlike klog's own wire.
//!
//! | type | bytes |
//! |---|---|
//! | `int8` `int16` `int32` `int64` | two's complement, big-endian, 1 / 2 / 4 / 8 bytes |
//! | `uint32` | unsigned, big-endian, 4 bytes |
//! | `boolean` | one byte: 0 false, anything else true |
//! | `unsigned_varint` | 7 bits a byte, least significant group first, high bit set on every byte but the last; at most 5 bytes (a `u32`) |
//! | `varint` / `varlong` | zig-zag (`(n << 1) ^ (n >> 31)`) then as `unsigned_varint`; at most 5 / 10 bytes |
//! | `string` | `int16` length N ≥ 0, then N bytes of UTF-8 |
//! | `nullable_string` | `int16` length N, -1 for null, then N bytes of UTF-8 |
//! | `bytes` / `nullable_bytes` | `int32` length N (-1 for null when nullable), then N bytes |
//! | `compact_string` / `compact_nullable_string` | `unsigned_varint` N + 1 (0 for null when nullable), then N bytes of UTF-8 |
//! | `compact_bytes` / `compact_nullable_bytes` | `unsigned_varint` N + 1 (0 for null when nullable), then N bytes |
//! | `array` | `int32` count N (-1 for null when nullable), then N elements |
//! | `compact_array` | `unsigned_varint` N + 1 (0 for null when nullable), then N elements |
//! | `tagged_fields` | `unsigned_varint` count, then count × (`unsigned_varint` tag · `unsigned_varint` size · size bytes) |
//!
//! The compact types and tagged fields appear only in flexible versions
//! (see [`crate::kafka`]).
//!
//! # Bounds
//!
//! A decoder never trusts a length or a count: a length longer than the
//! bytes left, a negative length where null is not allowed, or a count whose
//! elements cannot fit in the bytes left (each element takes at least the
//! `min_element_bytes` its caller gives, and never less than one byte) is a
//! [`DecodeError`] naming the field, before anything is allocated. A caller
//! that allocates for a count therefore allocates at most in proportion to
//! the frame's bytes. Tagged fields are skipped, each one checked the same
//! way. No input panics a decoder.
//!
//! A decoder also admits at most [`ELEMENTS_MAX`] array elements in all (a
//! frame's arrays together): the work a request asks for, and the answer
//! it gets, grow with its entries, not with its bytes (a 48 MB produce of 6
//! million empty partitions made a 132 MB answer and over a gigabyte of
//! heap). No Kafka client sends near as many: one entry per partition it
//! writes to, reads or commits on the broker it asks.

use std::fmt;

/// A frame's bytes do not decode; the message names the field and says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

/// A decoder's result.
pub type Result<T, E = DecodeError> = std::result::Result<T, E>;

/// Reads Kafka fields from a byte slice, borrowing strings and bytes from
/// it; every length and count is checked against the bytes left.
#[derive(Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Array elements admitted so far.
    elements: usize,
}

/// The most array elements one decoder admits, over all its arrays.
pub const ELEMENTS_MAX: usize = 100_000;

impl fmt::Debug for Decoder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("len", &self.buf.len())
            .field("pos", &self.pos)
            .finish()
    }
}

impl<'a> Decoder<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Decoder<'a> {
        Decoder {
            buf,
            pos: 0,
            elements: 0,
        }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes, as they are.
    pub fn raw(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let left = self.remaining();
        if n > left {
            return Err(DecodeError(format!(
                "{what}: needs {n} bytes at position {}, {left} left",
                self.pos
            )));
        }
        let start = self.pos;
        self.pos += n;
        Ok(&self.buf[start..self.pos])
    }

    /// Every byte not read yet; the decoder is then at its end.
    pub fn rest(&mut self) -> &'a [u8] {
        let start = self.pos;
        self.pos = self.buf.len();
        &self.buf[start..]
    }

    fn fixed<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let bytes = self.raw(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(bytes);
        Ok(a)
    }

    /// An `int8`.
    pub fn i8(&mut self, what: &str) -> Result<i8> {
        Ok(i8::from_be_bytes(self.fixed(what)?))
    }

    /// A `boolean`: 0 is false, any other byte true.
    pub fn bool(&mut self, what: &str) -> Result<bool> {
        Ok(self.i8(what)? != 0)
    }

    /// An `int16`.
    pub fn i16(&mut self, what: &str) -> Result<i16> {
        Ok(i16::from_be_bytes(self.fixed(what)?))
    }

    /// An `int32`.
    pub fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_be_bytes(self.fixed(what)?))
    }

    /// An `int64`.
    pub fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_be_bytes(self.fixed(what)?))
    }

    /// A `uint32`.
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_be_bytes(self.fixed(what)?))
    }

    /// An `unsigned_varint` of at most 5 bytes whose value fits a `u32`.
    pub fn uvarint(&mut self, what: &str) -> Result<u32> {
        let v = self.uvarint_bits(5, what)?;
        u32::try_from(v).map_err(|_| DecodeError(format!("{what}: varint {v} exceeds 32 bits")))
    }

    /// A zig-zag `varint` (an `i32`).
    pub fn varint(&mut self, what: &str) -> Result<i32> {
        let v = self.uvarint(what)?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    /// A zig-zag `varlong` (an `i64`) of at most 10 bytes.
    pub fn varlong(&mut self, what: &str) -> Result<i64> {
        let v = self.uvarint_bits(10, what)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// An unsigned varint of at most `bytes_max` bytes; bits past 64 are
    /// refused.
    fn uvarint_bits(&mut self, bytes_max: u32, what: &str) -> Result<u64> {
        let mut value = 0u64;
        for i in 0..bytes_max {
            let [b] = self.fixed(what)?;
            let bits = u64::from(b & 0x7f);
            let shift = 7 * i;
            if shift == 63 && bits > 1 {
                return Err(DecodeError(format!("{what}: varint exceeds 64 bits")));
            }
            value |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError(format!(
            "{what}: varint longer than {bytes_max} bytes"
        )))
    }

    fn utf8(bytes: &'a [u8], what: &str) -> Result<&'a str> {
        std::str::from_utf8(bytes).map_err(|_| DecodeError(format!("{what}: not UTF-8")))
    }

    /// A length of `int16`, -1 (and only -1) being null.
    fn len16(&mut self, what: &str) -> Result<Option<usize>> {
        match self.i16(what)? {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError(format!("{what}: negative length {n}"))),
            n => Ok(Some(n as usize)),
        }
    }

    /// A length of `int32`, -1 (and only -1) being null.
    fn len32(&mut self, what: &str) -> Result<Option<usize>> {
        match self.i32(what)? {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError(format!("{what}: negative length {n}"))),
            n => Ok(Some(n as usize)),
        }
    }

    /// A compact length: `unsigned_varint` N + 1, 0 being null.
    fn compact_len(&mut self, what: &str) -> Result<Option<usize>> {
        Ok(self.uvarint(what)?.checked_sub(1).map(|n| n as usize))
    }

    fn not_null<T>(v: Option<T>, what: &str) -> Result<T> {
        v.ok_or_else(|| DecodeError(format!("{what}: null where a value is required")))
    }

    /// A `string`.
    pub fn string(&mut self, what: &str) -> Result<&'a str> {
        let n = self.len16(what)?;
        let n = Self::not_null(n, what)?;
        Self::utf8(self.raw(n, what)?, what)
    }

    /// A `nullable_string`.
    pub fn nullable_string(&mut self, what: &str) -> Result<Option<&'a str>> {
        match self.len16(what)? {
            None => Ok(None),
            Some(n) => Self::utf8(self.raw(n, what)?, what).map(Some),
        }
    }

    /// A `bytes`.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = self.len32(what)?;
        let n = Self::not_null(n, what)?;
        self.raw(n, what)
    }

    /// A `nullable_bytes`.
    pub fn nullable_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>> {
        match self.len32(what)? {
            None => Ok(None),
            Some(n) => self.raw(n, what).map(Some),
        }
    }

    /// A `compact_string`.
    pub fn compact_string(&mut self, what: &str) -> Result<&'a str> {
        let n = self.compact_len(what)?;
        let n = Self::not_null(n, what)?;
        Self::utf8(self.raw(n, what)?, what)
    }

    /// A `compact_nullable_string`.
    pub fn compact_nullable_string(&mut self, what: &str) -> Result<Option<&'a str>> {
        match self.compact_len(what)? {
            None => Ok(None),
            Some(n) => Self::utf8(self.raw(n, what)?, what).map(Some),
        }
    }

    /// A `compact_bytes`.
    pub fn compact_bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let n = self.compact_len(what)?;
        let n = Self::not_null(n, what)?;
        self.raw(n, what)
    }

    /// A `compact_nullable_bytes`.
    pub fn compact_nullable_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>> {
        match self.compact_len(what)? {
            None => Ok(None),
            Some(n) => self.raw(n, what).map(Some),
        }
    }

    /// Refuses a count of elements of at least `min_element_bytes` bytes
    /// each (taken as 1 when smaller) that cannot fit in the bytes left, or
    /// that takes the decoder past [`ELEMENTS_MAX`] elements in all.
    fn fits(&mut self, count: usize, min_element_bytes: usize, what: &str) -> Result<usize> {
        let left = self.remaining();
        if count > left / min_element_bytes.max(1) {
            return Err(DecodeError(format!(
                "{what}: count {count} of at least {} bytes each exceeds the {left} bytes left",
                min_element_bytes.max(1)
            )));
        }
        self.elements += count;
        if self.elements > ELEMENTS_MAX {
            return Err(DecodeError(format!(
                "{what}: count {count} takes the request past {ELEMENTS_MAX} entries in all"
            )));
        }
        Ok(count)
    }

    /// An `array`'s count (null refused), each element taking at least
    /// `min_element_bytes`: a count that cannot fit is refused.
    pub fn array_len(&mut self, min_element_bytes: usize, what: &str) -> Result<usize> {
        let n = self.len32(what)?;
        let n = Self::not_null(n, what)?;
        self.fits(n, min_element_bytes, what)
    }

    /// A nullable `array`'s count (-1 is `None`), checked as
    /// [`Decoder::array_len`].
    pub fn nullable_array_len(
        &mut self,
        min_element_bytes: usize,
        what: &str,
    ) -> Result<Option<usize>> {
        match self.len32(what)? {
            None => Ok(None),
            Some(n) => self.fits(n, min_element_bytes, what).map(Some),
        }
    }

    /// A `compact_array`'s count (null refused), checked as
    /// [`Decoder::array_len`].
    pub fn compact_array_len(&mut self, min_element_bytes: usize, what: &str) -> Result<usize> {
        let n = self.compact_len(what)?;
        let n = Self::not_null(n, what)?;
        self.fits(n, min_element_bytes, what)
    }

    /// A nullable `compact_array`'s count (0 on the wire is `None`),
    /// checked as [`Decoder::array_len`].
    pub fn compact_nullable_array_len(
        &mut self,
        min_element_bytes: usize,
        what: &str,
    ) -> Result<Option<usize>> {
        match self.compact_len(what)? {
            None => Ok(None),
            Some(n) => self.fits(n, min_element_bytes, what).map(Some),
        }
    }

    /// An `array` (null refused) of elements decoded by `each`, its count
    /// checked as [`Decoder::array_len`] before the vector is allocated.
    pub fn array<T>(
        &mut self,
        min_element_bytes: usize,
        what: &str,
        mut each: impl FnMut(&mut Decoder<'a>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let n = self.array_len(min_element_bytes, what)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(each(self)?);
        }
        Ok(v)
    }

    /// A `compact_array` (null refused) of elements decoded by `each`,
    /// checked as [`Decoder::array`].
    pub fn compact_array<T>(
        &mut self,
        min_element_bytes: usize,
        what: &str,
        mut each: impl FnMut(&mut Decoder<'a>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let n = self.compact_array_len(min_element_bytes, what)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(each(self)?);
        }
        Ok(v)
    }

    /// Skips a `tagged_fields` section (no tag is known to this codec);
    /// returns how many fields were skipped. Each field takes at least two
    /// bytes, so the count is checked as an array's.
    pub fn tagged_fields(&mut self, what: &str) -> Result<usize> {
        let count = self.uvarint(what)? as usize;
        let count = self.fits(count, 2, what)?;
        for _ in 0..count {
            self.uvarint(what)?;
            let size = self.uvarint(what)? as usize;
            self.raw(size, what)?;
        }
        Ok(count)
    }

    /// Fails unless every byte was read.
    pub fn finish(&self, what: &str) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError(format!("{what}: {n} trailing bytes"))),
        }
    }
}

/// Appends an `int8`.
pub fn put_i8(out: &mut Vec<u8>, v: i8) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a `boolean` (1 for true).
pub fn put_bool(out: &mut Vec<u8>, v: bool) {
    out.push(u8::from(v));
}

/// Appends an `int16`.
pub fn put_i16(out: &mut Vec<u8>, v: i16) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends an `int32`.
pub fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends an `int64`.
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a `uint32`.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends an `unsigned_varint`.
pub fn put_uvarint(out: &mut Vec<u8>, v: u32) {
    put_uvarlong(out, u64::from(v));
}

/// Appends an unsigned varint of up to 64 bits.
fn put_uvarlong(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a zig-zag `varint`.
pub fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_uvarint(out, ((v << 1) ^ (v >> 31)) as u32);
}

/// Appends a zig-zag `varlong`.
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_uvarlong(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The most bytes a `string` holds: `int16::MAX`.
pub const STRING_BYTES_MAX: usize = i16::MAX as usize;

/// Appends a `string`, cut to [`STRING_BYTES_MAX`] bytes at a character
/// boundary (only an error message could be that long).
pub fn put_string(out: &mut Vec<u8>, s: &str) {
    let s = cut(s, STRING_BYTES_MAX);
    put_i16(out, s.len() as i16);
    out.extend_from_slice(s.as_bytes());
}

/// Appends a `nullable_string` (cut as [`put_string`]).
pub fn put_nullable_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => put_i16(out, -1),
        Some(s) => put_string(out, s),
    }
}

/// Appends a `compact_string`, cut to [`STRING_BYTES_MAX`] bytes at a
/// character boundary, as Kafka bounds compact strings too.
pub fn put_compact_string(out: &mut Vec<u8>, s: &str) {
    let s = cut(s, STRING_BYTES_MAX);
    put_uvarint(out, s.len() as u32 + 1);
    out.extend_from_slice(s.as_bytes());
}

/// Appends a `compact_nullable_string` (cut as [`put_compact_string`]).
pub fn put_compact_nullable_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => put_uvarint(out, 0),
        Some(s) => put_compact_string(out, s),
    }
}

/// A length that fits the wire's `int32`; a longer one is the caller's bug
/// (responses are bounded far below 2 GiB).
fn len_i32(n: usize) -> i32 {
    i32::try_from(n).expect("a Kafka length is below 2 GiB")
}

/// Appends a `bytes`.
///
/// # Panics
///
/// When `b` is 2 GiB or longer, which no bounded response carries.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_i32(out, len_i32(b.len()));
    out.extend_from_slice(b);
}

/// Appends a `nullable_bytes` (see [`put_bytes`]).
pub fn put_nullable_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_i32(out, -1),
        Some(b) => put_bytes(out, b),
    }
}

/// Appends a `compact_bytes` (see [`put_bytes`]).
pub fn put_compact_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uvarint(out, len_i32(b.len()) as u32 + 1);
    out.extend_from_slice(b);
}

/// Appends a `compact_nullable_bytes` (see [`put_bytes`]).
pub fn put_compact_nullable_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_uvarint(out, 0),
        Some(b) => put_compact_bytes(out, b),
    }
}

/// Appends an `array`'s count (see [`put_bytes`] on the bound).
pub fn put_array_len(out: &mut Vec<u8>, n: usize) {
    put_i32(out, len_i32(n));
}

/// Appends an `array` of `items`, each written by `each`.
pub fn put_array<T>(out: &mut Vec<u8>, items: &[T], mut each: impl FnMut(&mut Vec<u8>, &T)) {
    put_array_len(out, items.len());
    for item in items {
        each(out, item);
    }
}

/// Appends a `compact_array` of `items`, each written by `each`.
pub fn put_compact_array<T>(
    out: &mut Vec<u8>,
    items: &[T],
    mut each: impl FnMut(&mut Vec<u8>, &T),
) {
    put_compact_array_len(out, items.len());
    for item in items {
        each(out, item);
    }
}

/// Appends a null `array` (count -1).
pub fn put_null_array(out: &mut Vec<u8>) {
    put_i32(out, -1);
}

/// Appends a `compact_array`'s count (N + 1).
pub fn put_compact_array_len(out: &mut Vec<u8>, n: usize) {
    put_uvarint(out, len_i32(n) as u32 + 1);
}

/// Appends an empty `tagged_fields` section: klog sends no tagged field.
pub fn put_empty_tagged_fields(out: &mut Vec<u8>) {
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_big_endian_and_round_trip() {
        let mut out = Vec::new();
        put_i8(&mut out, -2);
        put_i16(&mut out, 0x0102);
        put_i32(&mut out, -3);
        put_i64(&mut out, 0x0102_0304_0506_0708);
        put_u32(&mut out, u32::MAX);
        put_bool(&mut out, true);
        assert_eq!(&out[1..3], &[1, 2]);
        assert_eq!(&out[7..15], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut d = Decoder::new(&out);
        assert_eq!(d.i8("a").unwrap(), -2);
        assert_eq!(d.i16("b").unwrap(), 0x0102);
        assert_eq!(d.i32("c").unwrap(), -3);
        assert_eq!(d.i64("d").unwrap(), 0x0102_0304_0506_0708);
        assert_eq!(d.u32("e").unwrap(), u32::MAX);
        assert!(d.bool("f").unwrap());
        d.finish("end").unwrap();
        assert!(d.i8("past").unwrap_err().0.contains("past"));
    }

    #[test]
    fn varints_match_kafka_bytes_and_round_trip() {
        // Kafka's ByteUtils: 300 is ac 02; zig-zag -1 is 01, 1 is 02.
        let mut out = Vec::new();
        put_uvarint(&mut out, 300);
        put_varint(&mut out, -1);
        put_varint(&mut out, 1);
        assert_eq!(out, [0xac, 0x02, 0x01, 0x02]);
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(Decoder::new(&out).varint("v").unwrap(), v);
        }
        for v in [0, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert!(out.len() <= 10);
            assert_eq!(Decoder::new(&out).varlong("v").unwrap(), v);
        }
        for v in [0, 127, 128, u32::MAX] {
            let mut out = Vec::new();
            put_uvarint(&mut out, v);
            assert_eq!(Decoder::new(&out).uvarint("v").unwrap(), v);
        }
    }

    #[test]
    fn overlong_and_overflowing_varints_are_refused() {
        let e = Decoder::new(&[0xff; 6]).uvarint("count").unwrap_err();
        assert!(e.0.contains("count") && e.0.contains("5 bytes"), "{e}");
        // Five bytes whose value passes 32 bits.
        let e = Decoder::new(&[0xff, 0xff, 0xff, 0xff, 0x1f])
            .uvarint("n")
            .unwrap_err();
        assert!(e.0.contains("32 bits"), "{e}");
        assert!(Decoder::new(&[0xff; 11]).varlong("n").is_err());
        let mut ten = [0xffu8; 10];
        ten[9] = 0x02;
        assert!(Decoder::new(&ten)
            .varlong("n")
            .unwrap_err()
            .0
            .contains("64 bits"));
        ten[9] = 0x01;
        assert!(Decoder::new(&ten).varlong("n").is_ok());
        // Truncated.
        assert!(Decoder::new(&[0x80]).uvarint("n").is_err());
        assert!(Decoder::new(&[]).uvarint("n").is_err());
    }

    #[test]
    fn strings_and_bytes_round_trip_and_null_is_minus_one_or_zero() {
        let mut out = Vec::new();
        put_string(&mut out, "héllo");
        put_nullable_string(&mut out, None);
        put_nullable_string(&mut out, Some(""));
        put_bytes(&mut out, b"\x00\x01");
        put_nullable_bytes(&mut out, None);
        put_compact_string(&mut out, "ab");
        put_compact_nullable_string(&mut out, None);
        put_compact_bytes(&mut out, b"xyz");
        put_compact_nullable_bytes(&mut out, None);
        put_compact_nullable_bytes(&mut out, Some(b""));
        let mut d = Decoder::new(&out);
        assert_eq!(d.string("a").unwrap(), "héllo");
        assert_eq!(d.nullable_string("b").unwrap(), None);
        assert_eq!(d.nullable_string("c").unwrap(), Some(""));
        assert_eq!(d.bytes("d").unwrap(), b"\x00\x01");
        assert_eq!(d.nullable_bytes("e").unwrap(), None);
        assert_eq!(d.compact_string("f").unwrap(), "ab");
        assert_eq!(d.compact_nullable_string("g").unwrap(), None);
        assert_eq!(d.compact_bytes("h").unwrap(), b"xyz");
        assert_eq!(d.compact_nullable_bytes("i").unwrap(), None);
        assert_eq!(d.compact_nullable_bytes("j").unwrap(), Some(&b""[..]));
        d.finish("end").unwrap();
    }

    #[test]
    fn null_negative_long_and_invalid_strings_are_refused_by_name() {
        let e = Decoder::new(&[0xff, 0xff]).string("topic").unwrap_err();
        assert!(e.0.contains("topic") && e.0.contains("null"), "{e}");
        let e = Decoder::new(&[0xff, 0xfe])
            .nullable_string("client_id")
            .unwrap_err();
        assert!(e.0.contains("negative length -2"), "{e}");
        let e = Decoder::new(&[0x00, 0x05, b'a'])
            .string("topic")
            .unwrap_err();
        assert!(e.0.contains("needs 5 bytes"), "{e}");
        let e = Decoder::new(&[0x00, 0x01, 0xff])
            .string("topic")
            .unwrap_err();
        assert!(e.0.contains("UTF-8"), "{e}");
        let e = Decoder::new(&[0x80, 0, 0, 0]).bytes("records").unwrap_err();
        assert!(e.0.contains("negative"), "{e}");
        assert!(Decoder::new(&[0xff, 0xff, 0xff, 0xff])
            .bytes("records")
            .is_err());
        assert!(Decoder::new(&[0x7f, 0xff, 0xff, 0xff])
            .nullable_bytes("records")
            .is_err());
        assert!(Decoder::new(&[0x00]).compact_string("name").is_err());
        assert!(Decoder::new(&[0x05, b'a']).compact_bytes("b").is_err());
    }

    #[test]
    fn hostile_counts_are_refused_before_any_allocation() {
        // A count of i32::MAX with four bytes behind it.
        let frame = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        let e = Decoder::new(&frame).array_len(4, "topics").unwrap_err();
        assert!(e.0.contains("topics") && e.0.contains("2147483647"), "{e}");
        // Exactly as many elements as fit, and one more.
        let frame = [0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(Decoder::new(&frame).array_len(4, "a").unwrap(), 2);
        assert!(Decoder::new(&frame).array_len(5, "a").is_err());
        // A minimum of 0 counts as 1: no count exceeds the bytes left.
        let frame = [0, 0, 0, 9, 1, 2, 3, 4, 5, 6, 7, 8];
        assert!(Decoder::new(&frame).array_len(0, "a").is_err());
        let e = Decoder::new(&[0xff, 0xff, 0xff, 0xfe])
            .array_len(1, "a")
            .unwrap_err();
        assert!(e.0.contains("negative"), "{e}");
        assert!(Decoder::new(&[0xff, 0xff, 0xff, 0xfe])
            .nullable_array_len(1, "a")
            .is_err());
        assert_eq!(
            Decoder::new(&[0xff; 4]).nullable_array_len(1, "a").unwrap(),
            None
        );
        assert!(Decoder::new(&[0xff; 4]).array_len(1, "a").is_err());
        // Compact: u32::MAX - 1 elements.
        let frame = [0xff, 0xff, 0xff, 0xff, 0x0f, 0];
        assert!(Decoder::new(&frame).compact_array_len(1, "a").is_err());
        assert_eq!(
            Decoder::new(&[0])
                .compact_nullable_array_len(1, "a")
                .unwrap(),
            None
        );
        assert!(Decoder::new(&[0]).compact_array_len(1, "a").is_err());
        assert_eq!(
            Decoder::new(&[3, 0, 0]).compact_array_len(1, "a").unwrap(),
            2
        );
    }

    #[test]
    fn tagged_fields_are_skipped_and_bounded() {
        // Two fields: tag 0 of 2 bytes, tag 5 of 0 bytes; then a byte.
        let frame = [2, 0, 2, 0xaa, 0xbb, 5, 0, 0x77];
        let mut d = Decoder::new(&frame);
        assert_eq!(d.tagged_fields("tags").unwrap(), 2);
        assert_eq!(d.i8("after").unwrap(), 0x77);
        let mut out = Vec::new();
        put_empty_tagged_fields(&mut out);
        assert_eq!(Decoder::new(&out).tagged_fields("tags").unwrap(), 0);
        // A huge count, a field longer than the frame.
        assert!(Decoder::new(&[0xff, 0xff, 0xff, 0xff, 0x0f])
            .tagged_fields("t")
            .is_err());
        assert!(Decoder::new(&[1, 0, 9, 1]).tagged_fields("t").is_err());
        assert!(Decoder::new(&[1, 0]).tagged_fields("t").is_err());
    }

    #[test]
    fn long_strings_are_cut_at_a_character_boundary() {
        let s = "é".repeat(STRING_BYTES_MAX);
        let mut out = Vec::new();
        put_string(&mut out, &s);
        let got = Decoder::new(&out).string("s").unwrap();
        assert_eq!(got.len(), STRING_BYTES_MAX - 1);
        let mut out = Vec::new();
        put_compact_string(&mut out, &s);
        assert_eq!(
            Decoder::new(&out).compact_string("s").unwrap().len(),
            STRING_BYTES_MAX - 1
        );
    }

    #[test]
    fn raw_rest_and_finish() {
        let mut d = Decoder::new(&[1, 2, 3, 4]);
        assert_eq!(d.raw(1, "a").unwrap(), &[1]);
        assert!(d.raw(4, "b").is_err());
        assert_eq!(d.position(), 1);
        assert!(d.finish("x").unwrap_err().0.contains("3 trailing"));
        assert_eq!(d.rest(), &[2, 3, 4]);
        assert_eq!(d.remaining(), 0);
        d.finish("x").unwrap();
    }
}
