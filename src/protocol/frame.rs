//! Frames, field by field: [`Reader`] takes a frame body apart, [`put`]
//! builds one, and [`finish_frame`] writes its length once the body is
//! known. The types and their bytes are in the table of [`crate::protocol`].

use std::ops::Range;

use super::{ProtocolError, Result, LENGTH_BYTES, NO_EPOCH};

/// Reads fields from a frame body, every length checked against what is left.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Reads `buf` from `pos` on (a frame body past a header already read).
    pub(super) fn at(buf: &'a [u8], pos: usize) -> Reader<'a> {
        Reader {
            buf,
            pos: pos.min(buf.len()),
        }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub(super) fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Bytes of the whole buffer, read or not.
    pub(super) fn buffer_len(&self) -> usize {
        self.buf.len()
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.buf.len() - self.pos < n {
            return Err(ProtocolError(format!(
                "{what}: needs {n} bytes at position {}, {} left",
                self.pos,
                self.buf.len() - self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A `u16`.
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(
            self.take(2, what)?.try_into().expect("2"),
        ))
    }

    /// A `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4"),
        ))
    }

    /// A `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8"),
        ))
    }

    /// An `i64`.
    pub fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(self.u64(what)? as i64)
    }

    /// An `epoch`: an `i64` that is -1 (`None`: no epoch, or not checked)
    /// or a leader epoch of `0..=u32::MAX`; any other value breaks the
    /// protocol.
    pub fn epoch(&mut self, what: &str) -> Result<Option<u32>> {
        match self.i64(what)? {
            NO_EPOCH => Ok(None),
            e => u32::try_from(e).map(Some).map_err(|_| {
                ProtocolError(format!(
                    "{what} {e} is neither -1 nor a leader epoch (0 to {})",
                    u32::MAX
                ))
            }),
        }
    }

    /// An `i8`.
    pub fn i8(&mut self, what: &str) -> Result<i8> {
        Ok(self.take(1, what)?[0] as i8)
    }

    /// A `str`.
    pub fn str(&mut self, what: &str) -> Result<String> {
        self.str_ref(what).map(str::to_owned)
    }

    /// A `str`, borrowed from the buffer.
    pub fn str_ref(&mut self, what: &str) -> Result<&'a str> {
        let n = self.u16(what)? as usize;
        let bytes = self.take(n, what)?;
        std::str::from_utf8(bytes).map_err(|_| ProtocolError(format!("{what}: not UTF-8")))
    }

    /// A `bytes`, as its range in the buffer.
    pub fn bytes_range(&mut self, what: &str) -> Result<Range<usize>> {
        let n = self.u32(what)? as usize;
        let start = self.pos;
        self.take(n, what)?;
        Ok(start..start + n)
    }

    /// A `bytes`.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let r = self.bytes_range(what)?;
        Ok(&self.buf[r])
    }

    /// Fails unless every byte was read.
    pub fn finish(&self, what: &str) -> Result<()> {
        if self.pos != self.buf.len() {
            return Err(ProtocolError(format!(
                "{what}: {} trailing bytes",
                self.buf.len() - self.pos
            )));
        }
        Ok(())
    }
}

/// Appends fields to a frame.
pub mod put {
    /// An `i8`.
    pub fn i8(out: &mut Vec<u8>, v: i8) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// A `u16`.
    pub fn u16(out: &mut Vec<u8>, v: u16) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// A `u32`.
    pub fn u32(out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// A `u64`.
    pub fn u64(out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// An `i64`.
    pub fn i64(out: &mut Vec<u8>, v: i64) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// An `epoch`: -1 for `None`, else the epoch.
    pub fn epoch(out: &mut Vec<u8>, epoch: Option<u32>) {
        i64(out, epoch.map_or(super::NO_EPOCH, i64::from));
    }
    /// A `str` (cut to 65,535 bytes at a character boundary).
    pub fn str(out: &mut Vec<u8>, s: &str) {
        str_max(out, s, u16::MAX as usize);
    }
    /// A response's message: a `str` cut to
    /// [`MESSAGE_BYTES_MAX`](crate::protocol::MESSAGE_BYTES_MAX).
    pub fn message(out: &mut Vec<u8>, s: &str) {
        str_max(out, s, crate::protocol::MESSAGE_BYTES_MAX);
    }
    /// A `str` cut to `max` bytes (at most 65,535) at a character boundary.
    fn str_max(out: &mut Vec<u8>, s: &str, max: usize) {
        let mut end = s.len().min(max).min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        u16(out, end as u16);
        out.extend_from_slice(&s.as_bytes()[..end]);
    }
    /// A `bytes`.
    pub fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        u32(out, b.len() as u32);
        out.extend_from_slice(b);
    }
}

/// Writes the frame's length into its first four bytes.
pub fn finish_frame(frame: &mut [u8]) {
    let len = (frame.len() - LENGTH_BYTES) as u32;
    frame[..LENGTH_BYTES].copy_from_slice(&len.to_le_bytes());
}
