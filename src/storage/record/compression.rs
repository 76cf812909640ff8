//! The records section of a compressed batch: decompressed into a buffer
//! the caller reuses, capped at klog's batch limit, and compressed by a
//! producer ([`compress`]).
//!
//! | bits 0-2 | codec  | format read                                                   | format written |
//! |---------:|--------|---------------------------------------------------------------|----------------|
//! |        1 | gzip   | RFC 1952 members, one or more back to back                    | one member     |
//! |        2 | snappy | xerial framing (`\x82SNAPPY\x00`, version, compat, then `[i32 length, raw block]`…) or one raw snappy block | xerial, 32 KiB blocks (what the Java client writes) |
//! |        3 | lz4    | LZ4 frames, one or more back to back (Kafka's format for magic 2) | one frame |
//! |        4 | zstd   | zstd frames, windows up to 2^27 bytes                          | one frame      |
//!
//! Decompression stops as soon as the output passes [`BATCH_BYTES_MAX`]
//! (a bomb is refused with [`DecodeError::TooLarge`] having cost at most
//! that much memory); data a codec cannot read is
//! [`DecodeError::Compression`].
//!
//! All the decompressions of a process together hold at most
//! [`DECOMPRESSED_BYTES_MAX`] bytes: a buffer grows only by what it can
//! take from that budget, and gives it back when dropped. A batch that
//! finds the budget spent is [`DecodeError::Busy`] (a broker answers it
//! with a retriable error); one that alone would take more than all of it
//! is [`DecodeError::TooLarge`]. So connections sending bombs at once
//! cost at most that much.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::DecodeError;
use crate::limits::BATCH_BYTES_MAX;

mod ends;
pub use ends::{stream_runs_to_the_end, unit_ends_whole};

/// A batch's compression codec (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Codec {
    /// Records as they are.
    #[default]
    None,
    /// gzip (deflate).
    Gzip,
    /// snappy.
    Snappy,
    /// LZ4 frames.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Codec {
    /// Every codec, in attribute order.
    pub const ALL: [Codec; 5] = [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ];

    /// The codec of attribute bits 0-2, or [`DecodeError::Unsupported`]
    /// for 5 to 7.
    pub fn from_bits(bits: u16) -> Result<Codec, DecodeError> {
        match bits & 0x07 {
            0 => Ok(Codec::None),
            1 => Ok(Codec::Gzip),
            2 => Ok(Codec::Snappy),
            3 => Ok(Codec::Lz4),
            4 => Ok(Codec::Zstd),
            other => Err(DecodeError::Unsupported {
                what: "compression type",
                value: i64::from(other),
            }),
        }
    }

    /// Its attribute bits.
    pub fn bits(self) -> u16 {
        self as u16
    }

    /// Its name, as Kafka's `compression.type` and kcat's `-z` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    /// The codec a name means (case-insensitive), if any.
    pub fn parse(name: &str) -> Option<Codec> {
        Codec::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
    }

    /// The compression levels the codec takes, if it takes one: what
    /// `compression.level` may be.
    pub fn levels(self) -> Option<std::ops::RangeInclusive<i32>> {
        match self {
            Codec::Gzip => Some(1..=9),
            Codec::Lz4 | Codec::Snappy | Codec::None => None,
            Codec::Zstd => Some(1..=22),
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The xerial snappy stream's magic; a version and a compat i32 follow.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = XERIAL_MAGIC.len() + 8;
/// Bytes of raw input per xerial block written.
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// zstd's window limit: the C library's default, 128 MiB, as Kafka's.
const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// The decompressed bytes all of a process's decompressions hold at once:
/// room for four batches at klog's batch limit.
pub const DECOMPRESSED_BYTES_MAX: usize = 4 * BATCH_BYTES_MAX as usize;

/// A budget of bytes that buffers of decompressed records take from.
#[derive(Debug)]
pub struct Budget {
    held: AtomicUsize,
    max: usize,
}

impl Budget {
    /// A budget of `max` bytes.
    pub const fn new(max: usize) -> Budget {
        Budget {
            held: AtomicUsize::new(0),
            max,
        }
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }
}

/// The process's budget.
pub static PROCESS: Budget = Budget::new(DECOMPRESSED_BYTES_MAX);

/// A buffer of decompressed records, reused from batch to batch, whose
/// room is taken from a [`Budget`] and given back when it is dropped.
#[derive(Debug)]
pub struct Decompressed<'b> {
    /// Zeroed room, of which the first `len` bytes are the records: the
    /// room is zeroed once, when it grows, and reused, so that a stream
    /// of many frames costs what it decodes, not that times its frames.
    buf: Vec<u8>,
    len: usize,
    /// Bytes taken from the budget (the buffer's and the window's).
    taken: usize,
    /// Of those, the room held for a decoder's window.
    window: usize,
    budget: &'b Budget,
}

impl Default for Decompressed<'static> {
    fn default() -> Self {
        Decompressed::new(&PROCESS)
    }
}

impl<'b> Decompressed<'b> {
    /// An empty buffer whose room comes from `budget`.
    pub fn new(budget: &'b Budget) -> Decompressed<'b> {
        Decompressed {
            buf: Vec::new(),
            len: 0,
            taken: 0,
            window: 0,
            budget,
        }
    }

    /// Bytes the last decompression gave.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the last decompression gave nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes the last decompression gave.
    pub(super) fn records(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Forgets the records, keeping the room.
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }

    /// Grows the room to `len` bytes at least (zeroing only what it adds),
    /// once the budget has it.
    fn grow_to(&mut self, len: usize) -> Result<(), Refused> {
        if len <= self.buf.len() {
            return Ok(());
        }
        let for_buf = self.taken - self.window;
        if len > for_buf {
            self.take(len - for_buf)?;
        }
        self.buf.reserve_exact(len - self.buf.len());
        self.buf.resize(len, 0);
        Ok(())
    }

    /// Holds room in the budget for a decoder's window of `window` bytes
    /// (twice it: the window and the decoder's buffers), until this is
    /// dropped; a larger window later takes the difference.
    fn hold_window(&mut self, window: usize) -> Result<(), Refused> {
        let want = 2 * window;
        if want > self.window {
            self.take(want - self.window)?;
            self.window = want;
        }
        Ok(())
    }

    /// Takes `more` bytes from the budget, held until this is dropped.
    fn take(&mut self, more: usize) -> Result<(), Refused> {
        let max = self.budget.max;
        self.budget
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(more).filter(|&total| total <= max)
            })
            .map_err(|held| match self.taken.checked_add(more) {
                Some(mine) if mine <= max => Refused::Busy { held },
                _ => Refused::OverBudget,
            })?;
        self.taken += more;
        Ok(())
    }
}

impl Drop for Decompressed<'_> {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.taken, Ordering::AcqRel);
    }
}

/// Decompresses `compressed` into `out`, replacing what it held, at most
/// [`BATCH_BYTES_MAX`] bytes, and returns them.
pub fn decompress<'o>(
    codec: Codec,
    compressed: &[u8],
    out: &'o mut Decompressed<'_>,
) -> Result<&'o [u8], DecodeError> {
    decompress_capped(codec, compressed, out, BATCH_BYTES_MAX as usize)?;
    Ok(out.records())
}

fn decompress_capped(
    codec: Codec,
    compressed: &[u8],
    out: &mut Decompressed<'_>,
    cap: usize,
) -> Result<(), DecodeError> {
    out.clear();
    let result = match codec {
        Codec::None if compressed.len() > cap => Err(Refused::TooLarge),
        Codec::None => out.grow_to(compressed.len()).map(|()| {
            out.buf[..compressed.len()].copy_from_slice(compressed);
            out.len = compressed.len();
        }),
        Codec::Gzip => read_capped(flate2::read::MultiGzDecoder::new(compressed), out, cap),
        Codec::Snappy if compressed.starts_with(XERIAL_MAGIC) => xerial(compressed, out, cap),
        Codec::Snappy => snappy_block(compressed, out, cap),
        Codec::Lz4 => lz4_frames(compressed, out, cap),
        Codec::Zstd => {
            // The first frame's window bounds every frame's: a later frame
            // asking for more is refused, so what is held covers them all.
            let log = window_log(zstd_window(compressed));
            out.hold_window(1 << log)
                .and_then(|()| zstd_decoder(compressed, log))
                .and_then(|decoder| read_capped(decoder, out, cap))
        }
    };
    result.map_err(|e| {
        out.clear();
        refusal(codec.name(), cap, out.budget.max, e)
    })
}

/// The error of a decompression refused.
fn refusal(name: &'static str, cap: usize, budget: usize, e: Refused) -> DecodeError {
    match e {
        Refused::TooLarge => DecodeError::TooLarge {
            what: "decompressed records",
            size_bytes: cap as u64 + 1,
            limit_bytes: cap as u64,
        },
        Refused::OverBudget => DecodeError::TooLarge {
            what: "decompressed records held at once",
            size_bytes: budget as u64 + 1,
            limit_bytes: budget as u64,
        },
        Refused::Corrupt(why) => DecodeError::Compression { codec: name, why },
        Refused::Busy { held } => DecodeError::Busy {
            held_bytes: held as u64,
        },
    }
}

/// Why a decompression stopped.
enum Refused {
    TooLarge,
    /// This buffer alone would take more than the whole budget.
    OverBudget,
    Corrupt(String),
    /// The budget is spent (`held` bytes taken).
    Busy {
        held: usize,
    },
}

impl From<io::Error> for Refused {
    fn from(e: io::Error) -> Refused {
        Refused::Corrupt(e.to_string())
    }
}

/// Compresses `records` with `codec` at `level` (the codec's default when
/// `None`), appending to `out`.
///
/// # Panics
///
/// On [`Codec::None`] (there is nothing to compress) and on a level
/// outside [`Codec::levels`]: callers check it when they parse it.
pub fn compress(codec: Codec, level: Option<i32>, records: &[u8], out: &mut Vec<u8>) {
    if let (Some(level), Some(levels)) = (level, codec.levels()) {
        assert!(levels.contains(&level), "{codec} level {level}");
    }
    match codec {
        Codec::None => panic!("compress with no codec"),
        Codec::Gzip => {
            let level = level.map_or(flate2::Compression::default(), |l| {
                flate2::Compression::new(l as u32)
            });
            let mut encoder = flate2::write::GzEncoder::new(out, level);
            encoder.write_all(records).expect("writes to a Vec");
            encoder.finish().expect("writes to a Vec");
        }
        Codec::Snappy => {
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut encoder = snap::raw::Encoder::new();
            for block in records.chunks(XERIAL_BLOCK_BYTES) {
                let at = out.len();
                out.extend_from_slice(&[0; 4]);
                out.resize(at + 4 + snap::raw::max_compress_len(block.len()), 0);
                let n = encoder
                    .compress(block, &mut out[at + 4..])
                    .expect("a buffer of max_compress_len");
                out.truncate(at + 4 + n);
                out[at..at + 4].copy_from_slice(&(n as i32).to_be_bytes());
            }
        }
        Codec::Lz4 => {
            let mut encoder = lz4_flex::frame::FrameEncoder::new(out);
            encoder.write_all(records).expect("writes to a Vec");
            encoder.finish().expect("writes to a Vec");
        }
        Codec::Zstd => {
            let level = level.unwrap_or(zstd::DEFAULT_COMPRESSION_LEVEL);
            let mut encoder = zstd::stream::write::Encoder::new(out, level).expect("zstd context");
            encoder
                .set_pledged_src_size(Some(records.len() as u64))
                .expect("zstd pledged size");
            encoder.write_all(records).expect("writes to a Vec");
            encoder.finish().expect("writes to a Vec");
        }
    }
}

/// The window a zstd stream's first frame declares (its decoder holds
/// about twice that while it reads: the window and its buffers), at most
/// the largest klog's decoder takes; 0 when the frame does not say (it is
/// then refused, or a skippable frame).
fn zstd_window(stream: &[u8]) -> usize {
    const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    if stream.get(..4) != Some(&MAGIC[..]) {
        return 0;
    }
    let Some(&descriptor) = stream.get(4) else {
        return 0;
    };
    let window = if descriptor & 0x20 == 0 {
        // Window_Descriptor: exponent and mantissa.
        let Some(&w) = stream.get(5) else {
            return 0;
        };
        let log = 10 + u32::from(w >> 3);
        if log > ZSTD_WINDOW_LOG_MAX {
            return 0;
        }
        let base = 1usize << log;
        base + base / 8 * usize::from(w & 7)
    } else {
        // A single segment: the window is the content size.
        let did = [0, 1, 2, 4][usize::from(descriptor & 3)];
        let fcs = [1, 2, 4, 8][usize::from(descriptor >> 6)];
        let at = 5 + did;
        let Some(field) = stream.get(at..at + fcs) else {
            return 0;
        };
        let mut le = [0u8; 8];
        le[..fcs].copy_from_slice(field);
        let size = u64::from_le_bytes(le) + if fcs == 2 { 256 } else { 0 };
        usize::try_from(size).unwrap_or(usize::MAX)
    };
    window.min(1 << ZSTD_WINDOW_LOG_MAX)
}

/// The window log a decoder of frames of `window` bytes allows: the
/// smallest that holds it, at least 2^10 (zstd's least), at most
/// [`ZSTD_WINDOW_LOG_MAX`].
fn window_log(window: usize) -> u32 {
    let log = usize::BITS - window.saturating_sub(1).leading_zeros();
    log.clamp(10, ZSTD_WINDOW_LOG_MAX)
}

fn zstd_decoder(compressed: &[u8], window_log_max: u32) -> Result<impl Read + '_, Refused> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(compressed)?;
    decoder.window_log_max(window_log_max)?;
    Ok(decoder)
}

/// Reads `reader` to its end, appending to `out`, growing its room by
/// doubling but never past `cap` bytes: a byte more than that is a bomb.
fn read_capped(
    mut reader: impl Read,
    out: &mut Decompressed<'_>,
    cap: usize,
) -> Result<(), Refused> {
    let mut len = out.len;
    loop {
        if len >= out.buf.len().min(cap) {
            if len >= cap {
                // Full: one byte more is one too many.
                out.len = len;
                let mut probe = [0; 1];
                return match read_some(&mut reader, &mut probe)? {
                    0 => Ok(()),
                    _ => Err(Refused::TooLarge),
                };
            }
            // Doubling, but exactly: never a capacity past the cap.
            let size = len.saturating_add(len.max(64 * 1024)).min(cap);
            out.grow_to(size)?;
        }
        let room = out.buf.len().min(cap);
        match read_some(&mut reader, &mut out.buf[len..room])? {
            0 => break,
            n => len += n,
        }
    }
    out.len = len;
    Ok(())
}

/// One `read`, retried when interrupted.
fn read_some(reader: &mut impl Read, buf: &mut [u8]) -> Result<usize, Refused> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            result => return Ok(result?),
        }
    }
}

/// LZ4 frames back to back, each read to its end.
fn lz4_frames(
    mut compressed: &[u8],
    out: &mut Decompressed<'_>,
    cap: usize,
) -> Result<(), Refused> {
    while !compressed.is_empty() {
        let left = compressed.len();
        read_capped(
            lz4_flex::frame::FrameDecoder::new(&mut compressed),
            out,
            cap,
        )?;
        if compressed.len() == left {
            return Err(Refused::Corrupt("an LZ4 frame that reads nothing".into()));
        }
    }
    Ok(())
}

/// Appends one raw snappy block, its declared length checked against the
/// cap before anything is reserved.
fn snappy_block(block: &[u8], out: &mut Decompressed<'_>, cap: usize) -> Result<(), Refused> {
    let len = snap::raw::decompress_len(block).map_err(|e| Refused::Corrupt(e.to_string()))?;
    let at = out.len;
    if len > cap - at {
        return Err(Refused::TooLarge);
    }
    out.grow_to(at + len)?;
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out.buf[at..])
        .map_err(|e| Refused::Corrupt(e.to_string()))?;
    out.len = at + written;
    Ok(())
}

/// The xerial framing of snappy-java: a 16-byte header, then blocks each
/// after its big-endian i32 length.
fn xerial(stream: &[u8], out: &mut Decompressed<'_>, cap: usize) -> Result<(), Refused> {
    xerial_blocks(stream, out, cap, |_| false).map(drop)
}

/// Appends [`xerial`]'s blocks one at a time, asking `enough` of what
/// `out` holds after each: `Ok(true)` as soon as it says yes.
fn xerial_blocks(
    stream: &[u8],
    out: &mut Decompressed<'_>,
    cap: usize,
    mut enough: impl FnMut(&[u8]) -> bool,
) -> Result<bool, Refused> {
    let Some(mut rest) = stream.get(XERIAL_HEADER_BYTES..) else {
        return Err(Refused::Corrupt("xerial header cut short".into()));
    };
    while !rest.is_empty() {
        let Some((length, after)) = rest.split_first_chunk::<4>() else {
            return Err(Refused::Corrupt("xerial block length cut short".into()));
        };
        let length = i32::from_be_bytes(*length);
        let block = usize::try_from(length)
            .ok()
            .and_then(|length| after.get(..length))
            .ok_or_else(|| {
                Refused::Corrupt(format!(
                    "xerial block of {length} bytes, {} follow",
                    after.len()
                ))
            })?;
        snappy_block(block, out, cap)?;
        if enough(out.records()) {
            return Ok(true);
        }
        rest = &after[block.len()..];
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_of_exactly_the_cap_passes_and_one_byte_more_is_too_large() {
        let budget = Budget::new(usize::MAX);
        let mut out = Decompressed::new(&budget);
        let data = vec![7u8; 200_000];
        for codec in Codec::ALL {
            let mut packed = Vec::new();
            match codec {
                Codec::None => packed.extend_from_slice(&data),
                codec => compress(codec, None, &data, &mut packed),
            }
            decompress_capped(codec, &packed, &mut out, data.len()).unwrap();
            assert_eq!(out.records(), data, "{codec}");
            let cap = data.len() as u64 - 1;
            let err = decompress_capped(codec, &packed, &mut out, cap as usize).unwrap_err();
            assert!(
                matches!(err, DecodeError::TooLarge { size_bytes, limit_bytes, .. }
                    if limit_bytes == cap && size_bytes == cap + 1),
                "{codec}: {err}"
            );
            assert!(out.buf.capacity() <= data.len(), "{}", out.buf.capacity());
        }
        let snappy = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        decompress_capped(Codec::Snappy, &snappy, &mut out, data.len()).unwrap();
        assert_eq!(out.records(), data);
        let err = decompress_capped(Codec::Snappy, &snappy, &mut out, data.len() - 1).unwrap_err();
        assert!(matches!(err, DecodeError::TooLarge { .. }), "{err}");
    }

    #[test]
    fn a_buffer_says_what_it_holds_and_a_codec_its_name() {
        let mut out = Decompressed::default();
        assert!(out.is_empty());
        assert_eq!(out.len(), 0);
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut packed = Vec::new();
        compress(Codec::Snappy, None, &data, &mut packed);
        decompress(Codec::Snappy, &packed, &mut out).unwrap();
        assert!(!out.is_empty() && out.len() == data.len());
        // Xerial blocks of 32 KiB of input each, as the Java client writes.
        let first = &packed[XERIAL_HEADER_BYTES + 4..];
        assert_eq!(snap::raw::decompress_len(first).unwrap(), 32 * 1024);
        for codec in Codec::ALL {
            assert_eq!(codec.to_string(), codec.name());
        }
        // The process's budget holds four batches at the limit at once.
        assert_eq!(PROCESS.max, 4 * BATCH_BYTES_MAX as usize);
        // The room held is the room the budget counts, as it grows.
        for len in [1000, 300_000, 2_000_000] {
            let mut packed = Vec::new();
            compress(Codec::Gzip, None, &vec![5u8; len], &mut packed);
            decompress(Codec::Gzip, &packed, &mut out).unwrap();
            assert!(out.buf.capacity() <= out.taken - out.window, "{len}");
        }
    }

    /// A read interrupted by a signal is read again.
    #[test]
    fn an_interrupted_read_is_read_again() {
        struct Interrupted<'a>(bool, &'a [u8]);
        impl Read for Interrupted<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if std::mem::take(&mut self.0) {
                    return Err(io::ErrorKind::Interrupted.into());
                }
                self.1.read(buf)
            }
        }
        let mut out = Decompressed::default();
        assert!(read_capped(Interrupted(true, b"records"), &mut out, 100).is_ok());
        assert_eq!(out.records(), b"records");
    }

    /// A buffer that meets a larger zstd window holds the difference more:
    /// twice the largest window it met, and its room (a small window, then
    /// room for 3 MB, then a 2 MiB window over a few bytes).
    #[test]
    fn a_larger_window_takes_the_difference() {
        let budget = Budget::new(usize::MAX);
        let mut out = Decompressed::new(&budget);
        let mut small = Vec::new();
        compress(Codec::Zstd, None, b"a few bytes", &mut small);
        let mut large = Vec::new();
        compress(Codec::Gzip, None, &vec![9u8; 3_000_000], &mut large);
        let streamed = zstd::stream::encode_all(&b"a few bytes"[..], 3).unwrap();
        let windows = (zstd_window(&small), zstd_window(&streamed));
        assert!(windows.1 >= 1 << 20 && windows.0 < 1 << 10, "{windows:?}");
        for (codec, packed) in [
            (Codec::Zstd, small),
            (Codec::Gzip, large),
            (Codec::Zstd, streamed),
        ] {
            decompress(codec, &packed, &mut out).unwrap();
        }
        assert_eq!(budget.held(), (2 << window_log(windows.1)) + out.buf.len());
    }

    #[test]
    fn codecs_5_to_7_are_unsupported_and_names_round_trip() {
        for bits in 5..=7 {
            let err = Codec::from_bits(bits).unwrap_err();
            assert!(matches!(err, DecodeError::Unsupported { .. }), "{err}");
        }
        for codec in Codec::ALL {
            assert_eq!(Codec::from_bits(codec.bits()).unwrap(), codec);
            assert_eq!(Codec::parse(&codec.name().to_uppercase()), Some(codec));
        }
        assert_eq!(Codec::parse("brotli"), None);
    }

    #[test]
    fn every_level_compresses_and_reads_back() {
        let data = b"GET /index.html 200 Mozilla/5.0 ".repeat(100);
        let mut out = Decompressed::new(&PROCESS);
        for codec in [Codec::Gzip, Codec::Zstd] {
            for level in codec.levels().unwrap() {
                let mut packed = Vec::new();
                compress(codec, Some(level), &data, &mut packed);
                assert!(packed.len() < data.len() / 4, "{codec} {level}");
                assert_eq!(decompress(codec, &packed, &mut out).unwrap(), &data[..]);
            }
        }
    }

    #[test]
    fn damaged_streams_are_compression_errors() {
        let data = vec![9u8; 10_000];
        let mut out = Decompressed::new(&PROCESS);
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let mut packed = Vec::new();
            compress(codec, None, &data, &mut packed);
            let cut = &packed[..packed.len() / 2];
            let err = decompress(codec, cut, &mut out).unwrap_err();
            assert!(
                matches!(err, DecodeError::Compression { .. }),
                "{codec}: {err}"
            );
        }
    }

    /// A zstd frame's declared window is held in the budget while it is
    /// read, whatever it decompresses to: a small batch declaring a large
    /// window costs its decoder that much memory.
    #[test]
    fn a_zstd_window_takes_its_room_from_the_budget() {
        let data = vec![3u8; 300_000];
        let mut packed = Vec::new();
        compress(Codec::Zstd, None, &data, &mut packed);
        let window = zstd_window(&packed);
        assert!(window >= data.len() && window <= 1 << 20, "{window}");
        // Held: twice the smallest power of two that holds the window.
        let held = 2 << window_log(window);
        assert_eq!(held, 1 << 20);
        // Room for the data but not for the window too.
        let max = (held + data.len() / 2) as u64;
        let budget = Budget::new(max as usize);
        let mut out = Decompressed::new(&budget);
        let err = decompress(Codec::Zstd, &packed, &mut out).unwrap_err();
        assert!(
            matches!(err, DecodeError::TooLarge { size_bytes, limit_bytes, .. }
                if limit_bytes == max && size_bytes == max + 1),
            "{err}"
        );
        let budget = Budget::new(held + 2 * data.len());
        let mut out = Decompressed::new(&budget);
        decompress(Codec::Zstd, &packed, &mut out).unwrap();
        assert!(budget.held() >= held + data.len());
        drop(out);
        assert_eq!(budget.held(), 0);
        // A window descriptor of 2^27: 128 MiB, whatever follows.
        let mut big = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, (27 - 10) << 3];
        big.extend_from_slice(&[0; 8]);
        assert_eq!(zstd_window(&big), 1 << 27);
        // A single segment's window is its content size, after its
        // dictionary id if any; a two-byte size counts from 256.
        for len in [100usize, 1000, 300_000] {
            let packed = zstd::bulk::compress(&vec![1u8; len], 3).unwrap();
            assert_eq!(zstd_window(&packed), len, "{len}");
        }
        assert_eq!(zstd_window(&[0x28, 0xb5, 0x2f, 0xfd, 0x21, 7, 200]), 200);
        // 2^20 and five eighths of it more: exponent and mantissa.
        big[5] = (20 - 10) << 3 | 5;
        assert_eq!(zstd_window(&big), (1 << 20) + 5 * (1 << 17));
        assert_eq!(zstd_window(b"not zstd"), 0);
        assert_eq!(
            (
                window_log(0),
                window_log(1 << 10),
                window_log((1 << 10) + 1)
            ),
            (10, 10, 11)
        );
        assert_eq!(window_log(usize::MAX), ZSTD_WINDOW_LOG_MAX);
    }

    /// Buffers of decompressed records take their room from one budget:
    /// while one holds it, another batch is refused as busy (a producer
    /// retries it), and the room comes back when the holder is done.
    #[test]
    fn decompression_takes_its_room_from_one_budget() {
        let data = vec![7u8; 200_000];
        let mut zstd = Vec::new();
        compress(Codec::Zstd, None, &data, &mut zstd);
        let mut gzip = Vec::new();
        compress(Codec::Gzip, None, &data, &mut gzip);
        // Room for one 200 kB batch (its buffer grows to 256 KiB), not
        // for two.
        let budget = Budget::new(300 * 1024);
        let mut first = Decompressed::new(&budget);
        decompress(Codec::Gzip, &gzip, &mut first).unwrap();
        assert_eq!(first.records(), data);
        let mut second = Decompressed::new(&budget);
        let err = decompress(Codec::Gzip, &gzip, &mut second).unwrap_err();
        assert!(matches!(err, DecodeError::Busy { .. }), "{err}");
        assert!(second.is_empty());
        drop(first);
        decompress(Codec::Gzip, &gzip, &mut second).unwrap();
        assert_eq!(second.records(), data);
        drop(second);
        assert_eq!(budget.held(), 0, "all given back");
        // One buffer that alone would pass the budget is too large.
        let small = Budget::new(100 * 1024);
        let mut alone = Decompressed::new(&small);
        let err = decompress(Codec::Gzip, &gzip, &mut alone).unwrap_err();
        assert!(matches!(err, DecodeError::TooLarge { .. }), "{err}");
    }
}
