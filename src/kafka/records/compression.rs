//! The records section of a compressed Kafka batch, decompressed into a
//! buffer the caller reuses, capped at klog's batch limit.
//!
//! | bits 0-2 | codec  | format read                                                   |
//! |---------:|--------|---------------------------------------------------------------|
//! |        1 | gzip   | RFC 1952 members, one or more back to back                    |
//! |        2 | snappy | xerial framing (`\x82SNAPPY\x00`, version, compat, then `[i32 length, raw block]`…) or one raw snappy block |
//! |        3 | lz4    | LZ4 frames, one or more back to back (Kafka's format for magic 2) |
//! |        4 | zstd   | zstd frames, windows up to 2^27 bytes                          |
//!
//! Decompression stops as soon as the output passes [`BATCH_BYTES_MAX`]
//! (a bomb is refused with [`MESSAGE_TOO_LARGE`] having cost at most that
//! much memory); data a codec cannot read is [`CORRUPT_MESSAGE`].
//!
//! All the conversions of a process together hold at most
//! [`DECOMPRESSED_BYTES_MAX`] of decompressed records and of the klog
//! batches made of them (held until the call ends): a buffer, or the
//! caller's klog batches, grow only by what they can take from that
//! budget. A batch that finds it spent is answered [`REQUEST_TIMED_OUT`],
//! which producers retry; a call whose batches alone would take more than
//! all of it is [`MESSAGE_TOO_LARGE`]. So connections sending bombs at
//! once, or one partition of many small bombs, cost at most that much.

use std::cell::Cell;
use std::io::{self, Read};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::RecordsError;
use crate::kafka::{
    CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, REQUEST_TIMED_OUT, UNSUPPORTED_COMPRESSION_TYPE,
};
use crate::limits::BATCH_BYTES_MAX;

const GZIP: i16 = 1;
const SNAPPY: i16 = 2;
const LZ4: i16 = 3;
const ZSTD: i16 = 4;

/// The xerial snappy stream's magic; a version and a compat i32 follow.
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = XERIAL_MAGIC.len() + 8;

/// zstd's window limit: the C library's default, 128 MiB, as Kafka's.
const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// The decompressed bytes and klog batches made of them all of a
/// process's conversions hold at once: room for two batches at klog's
/// batch limit, each with its klog batch.
pub(super) const DECOMPRESSED_BYTES_MAX: usize = 4 * BATCH_BYTES_MAX as usize;

/// A budget of bytes that buffers of decompressed records take from.
#[derive(Debug)]
pub(super) struct Budget {
    held: AtomicUsize,
    max: usize,
}

impl Budget {
    pub(super) const fn new(max: usize) -> Budget {
        Budget {
            held: AtomicUsize::new(0),
            max,
        }
    }
}

/// The process's budget.
pub(super) static PROCESS: Budget = Budget::new(DECOMPRESSED_BYTES_MAX);

/// A buffer of decompressed records, reused from batch to batch, whose
/// room, and that of the klog batches made of it, is taken from a
/// [`Budget`] and given back when it is dropped.
#[derive(Debug)]
pub(super) struct Decompressed<'b> {
    pub(super) buf: Vec<u8>,
    /// Bytes of `buf` taken from the budget.
    buf_counted: usize,
    /// Bytes taken from the budget in all (`buf`'s and the klog batches'),
    /// a cell so that room for klog batches is taken while `buf` is read.
    taken: Cell<usize>,
    budget: &'b Budget,
}

impl<'b> Decompressed<'b> {
    pub(super) fn new(budget: &'b Budget) -> Decompressed<'b> {
        Decompressed {
            buf: Vec::new(),
            buf_counted: 0,
            taken: Cell::new(0),
            budget,
        }
    }

    /// Grows the buffer to `len` bytes (zeroed past what it held), once
    /// the budget has the room.
    fn grow_to(&mut self, len: usize) -> Result<(), Refused> {
        if len > self.buf_counted {
            self.take(len - self.buf_counted)?;
            self.buf_counted = len;
        }
        self.buf.reserve_exact(len.saturating_sub(self.buf.len()));
        self.buf.resize(len, 0);
        Ok(())
    }

    /// Takes `more` bytes from the budget, held until this is dropped.
    fn take(&self, more: usize) -> Result<(), Refused> {
        let max = self.budget.max;
        self.budget
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(more).filter(|&total| total <= max)
            })
            .map_err(|held| match self.taken.get().checked_add(more) {
                Some(mine) if mine <= max => Refused::Busy { held },
                _ => Refused::OverBudget,
            })?;
        self.taken.set(self.taken.get() + more);
        Ok(())
    }

    /// Makes room in `out` (klog batches made of decompressed records) for
    /// `more` bytes, its growth taken from the budget first: the klog
    /// batches of a call are held with its decompressed records until the
    /// call ends, so a call of many compressed batches costs the budget,
    /// not a batch limit each. `out` grows by doubling, as a `Vec` would.
    pub(super) fn reserve_out(&self, out: &mut Vec<u8>, more: usize) -> Result<(), RecordsError> {
        let need = out.len().saturating_add(more);
        if need <= out.capacity() {
            return Ok(());
        }
        let capacity = need.max(out.capacity().saturating_mul(2));
        self.take(capacity - out.capacity())
            .map_err(|e| refusal("compressed", BATCH_BYTES_MAX as usize, self.budget.max, e))?;
        out.reserve_exact(capacity - out.len());
        Ok(())
    }
}

impl Drop for Decompressed<'_> {
    fn drop(&mut self) {
        self.budget
            .held
            .fetch_sub(self.taken.get(), Ordering::AcqRel);
    }
}

/// Whether `codec` (attribute bits 0-2) is one klog decompresses.
pub(super) fn check_codec(codec: i16) -> Result<(), RecordsError> {
    match codec {
        0 | GZIP | SNAPPY | LZ4 | ZSTD => Ok(()),
        _ => Err(RecordsError::new(
            UNSUPPORTED_COMPRESSION_TYPE,
            format!("compression type {codec}: Kafka knows 1 to 4"),
        )),
    }
}

/// Decompresses `compressed` (codec 1 to 4, see [`check_codec`]) into
/// `out`, replacing what it held, at most [`BATCH_BYTES_MAX`] bytes.
pub(super) fn decompress(
    codec: i16,
    compressed: &[u8],
    out: &mut Decompressed<'_>,
) -> Result<(), RecordsError> {
    decompress_capped(codec, compressed, out, BATCH_BYTES_MAX as usize)
}

fn decompress_capped(
    codec: i16,
    compressed: &[u8],
    out: &mut Decompressed<'_>,
    cap: usize,
) -> Result<(), RecordsError> {
    out.buf.clear();
    let name = codec_name(codec);
    let result = match codec {
        GZIP => read_capped(flate2::read::MultiGzDecoder::new(compressed), out, cap),
        SNAPPY if compressed.starts_with(XERIAL_MAGIC) => xerial(compressed, out, cap),
        SNAPPY => snappy_block(compressed, out, cap),
        LZ4 => lz4_frames(compressed, out, cap),
        ZSTD => zstd_decoder(compressed).and_then(|decoder| read_capped(decoder, out, cap)),
        _ => return check_codec(codec),
    };
    result.map_err(|e| {
        out.buf.clear();
        refusal(name, cap, out.budget.max, e)
    })
}

/// The answer to a decompression refused.
fn refusal(name: &str, cap: usize, budget: usize, e: Refused) -> RecordsError {
    match e {
        Refused::TooLarge => RecordsError::new(
            MESSAGE_TOO_LARGE,
            format!("{name} records decompress to more than klog's batch limit {cap} bytes"),
        ),
        Refused::OverBudget => RecordsError::new(
            MESSAGE_TOO_LARGE,
            format!(
                "{name} records: a partition's compressed batches decompress to more than \
                 the broker holds for them, {budget} bytes with their klog batches"
            ),
        ),
        Refused::Corrupt(why) => {
            RecordsError::new(CORRUPT_MESSAGE, format!("{name} records: {why}"))
        }
        Refused::Busy { held } => RecordsError::new(
            REQUEST_TIMED_OUT,
            format!(
                "{name} records: the broker holds {held} bytes of decompressed records \
                 for other batches now; try again"
            ),
        ),
    }
}

fn codec_name(codec: i16) -> &'static str {
    match codec {
        GZIP => "gzip",
        SNAPPY => "snappy",
        LZ4 => "lz4",
        ZSTD => "zstd",
        _ => "unknown",
    }
}

/// Why a decompression stopped.
enum Refused {
    TooLarge,
    /// This call alone would take more than the whole budget.
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

fn zstd_decoder(compressed: &[u8]) -> Result<impl Read + '_, Refused> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(compressed)?;
    decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
    Ok(decoder)
}

/// Reads `reader` to its end, appending to `out`, growing it by doubling
/// but never past `cap` bytes: a byte more than that is a bomb.
fn read_capped(
    mut reader: impl Read,
    out: &mut Decompressed<'_>,
    cap: usize,
) -> Result<(), Refused> {
    let mut len = out.buf.len();
    loop {
        if len == out.buf.len() {
            if len >= cap {
                // Full: one byte more is one too many.
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
        match read_some(&mut reader, &mut out.buf[len..])? {
            0 => break,
            n => len += n,
        }
    }
    out.buf.truncate(len);
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
    let at = out.buf.len();
    if len > cap - at {
        return Err(Refused::TooLarge);
    }
    out.grow_to(at + len)?;
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out.buf[at..])
        .map_err(|e| Refused::Corrupt(e.to_string()))?;
    out.buf.truncate(at + written);
    Ok(())
}

/// The xerial framing of snappy-java: a 16-byte header, then blocks each
/// after its big-endian i32 length.
fn xerial(stream: &[u8], out: &mut Decompressed<'_>, cap: usize) -> Result<(), Refused> {
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
        rest = &after[block.len()..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_of_exactly_the_cap_passes_and_one_byte_more_is_too_large() {
        let budget = Budget::new(usize::MAX);
        let mut out = Decompressed::new(&budget);
        let data = vec![7u8; 200_000];
        let zstd = zstd::bulk::compress(&data, 1).unwrap();
        decompress_capped(ZSTD, &zstd, &mut out, data.len()).unwrap();
        assert_eq!(out.buf, data);
        let err = decompress_capped(ZSTD, &zstd, &mut out, data.len() - 1).unwrap_err();
        assert_eq!(err.error_code, MESSAGE_TOO_LARGE);
        assert!(out.buf.capacity() <= data.len(), "{}", out.buf.capacity());
        let snappy = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        decompress_capped(SNAPPY, &snappy, &mut out, data.len()).unwrap();
        assert_eq!(out.buf, data);
        let err = decompress_capped(SNAPPY, &snappy, &mut out, data.len() - 1).unwrap_err();
        assert_eq!(err.error_code, MESSAGE_TOO_LARGE);
    }

    #[test]
    fn codecs_5_to_7_are_unsupported() {
        let budget = Budget::new(usize::MAX);
        for codec in 5..=7 {
            let err = decompress(codec, b"x", &mut Decompressed::new(&budget)).unwrap_err();
            assert_eq!(err.error_code, UNSUPPORTED_COMPRESSION_TYPE);
        }
    }

    /// Buffers of decompressed records take their room from one budget:
    /// while one holds it, another batch is answered REQUEST_TIMED_OUT (a
    /// producer retries it), and the room comes back when the holder is
    /// done. Concurrent bombs cost the budget, not a batch limit each.
    #[test]
    fn decompression_takes_its_room_from_one_budget() {
        let data = vec![7u8; 200_000];
        let zstd = zstd::bulk::compress(&data, 1).unwrap();
        let gzip = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&data).unwrap();
            e.finish().unwrap()
        };
        // Room for one 200 kB batch (its buffer grows to 256 KiB), not
        // for two.
        let budget = Budget::new(300 * 1024);
        let mut first = Decompressed::new(&budget);
        decompress(ZSTD, &zstd, &mut first).unwrap();
        assert_eq!(first.buf, data);
        let mut second = Decompressed::new(&budget);
        let err = decompress(GZIP, &gzip, &mut second).unwrap_err();
        assert_eq!(err.error_code, REQUEST_TIMED_OUT, "{err}");
        assert!(second.buf.is_empty());
        drop(first);
        decompress(GZIP, &gzip, &mut second).unwrap();
        assert_eq!(second.buf, data);
        drop(second);
        assert_eq!(budget.held.load(Ordering::Acquire), 0, "all given back");
    }
}

#[cfg(test)]
mod call_tests {
    use super::super::to_klog_budgeted;
    use super::*;

    /// A Kafka batch of `count` records of `value_bytes` each, its records
    /// section gzipped.
    fn gzip_batch(count: i32, value_bytes: usize) -> Vec<u8> {
        let mut records = Vec::new();
        for i in 0..count {
            let mut body = vec![0, 0];
            super::super::put_uvarint(&mut body, (i as u64) << 1);
            body.push(1);
            super::super::put_uvarint(&mut body, (value_bytes as u64) << 1);
            body.extend(std::iter::repeat_n(b'v', value_bytes));
            body.push(0);
            super::super::put_uvarint(&mut records, (body.len() as u64) << 1);
            records.extend_from_slice(&body);
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &records).unwrap();
        let section = gz.finish().unwrap();
        let mut batch = vec![0u8; 61];
        let length = (61 - 12 + section.len()) as i32;
        batch[8..12].copy_from_slice(&length.to_be_bytes());
        batch[16] = 2;
        batch[21..23].copy_from_slice(&GZIP.to_be_bytes());
        batch[23..27].copy_from_slice(&(count - 1).to_be_bytes());
        batch[43..61].copy_from_slice(&[0xff; 18]);
        batch[57..61].copy_from_slice(&count.to_be_bytes());
        batch.extend_from_slice(&section);
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        batch
    }

    /// The klog batches a call makes of compressed records are held with
    /// the records until the call ends: they take their room from the
    /// budget too. Many small compressed batches in one partition (each
    /// a bomb of valid records) cost the budget, not a batch limit each.
    #[test]
    fn the_klog_batches_of_compressed_records_take_their_room_from_the_budget() {
        // 100 records of 1000 bytes: about 100 kB decompressed, 1 kB sent.
        let one = gzip_batch(100, 1000);
        assert!(one.len() < 4096, "{}", one.len());
        let budget = Budget::new(512 * 1024);
        let mut out = Vec::new();
        let two = [one.clone(), one.clone()].concat();
        let done = to_klog_budgeted(&two, &mut out, 1 << 20, &budget).unwrap();
        assert_eq!((done.batches, done.records), (2, 200));
        assert_eq!(budget.held.load(Ordering::Acquire), 0, "all given back");
        let many = one.repeat(8);
        let mut out = Vec::new();
        let result = to_klog_budgeted(&many, &mut out, 1 << 20, &budget);
        assert!(
            out.capacity() <= 512 * 1024,
            "{} bytes of klog batches for a budget of 512 KiB: {result:?}",
            out.capacity()
        );
        let err = result.unwrap_err();
        assert_eq!(err.error_code, MESSAGE_TOO_LARGE, "{err}");
        assert_eq!(budget.held.load(Ordering::Acquire), 0, "all given back");
    }
}
