//! Walking batches: the one way through a byte range of batches stored back
//! to back (a segment file, or a slice read or fetched from one), and the
//! one judgement of where such a walk stops and why.
//!
//! A walk yields, with its position, each batch whose header is valid (its
//! CRC, magic, record count and length limit, see
//! [`crate::storage::record`]) and whose bytes are all in the range, and
//! stops at the first that is not: a [`BatchStop`]. The records are not
//! checked here, because each caller checks them its own way: recovery
//! keeps the whole ones of a bad batch, `klog-dump` prints the batch
//! anyway, a consumer refuses the first bad one.
//!
//! # Torn or damaged
//!
//! A stop is a torn tail, what a writer leaves mid-write or a crash leaves
//! behind, when
//!
//! - the range ends inside the batch, in its header or before the end its
//!   length claims ([`BatchStop::is_truncated`]): more bytes could complete
//!   it. A write in progress, a read cut by a byte budget, a crash
//!   mid-write; or
//! - the range holds only zeros from the batch to its end
//!   ([`BatchStop::zeros`]): a power cut after a file's length reached the
//!   disk and before its data did.
//!
//! Anything else (a bad CRC, an unknown magic, a length beyond the limit)
//! is damage: bytes no writer leaves. What to do with a torn tail is the
//! caller's: a reader waits for the rest, `klog-dump` is quiet about the
//! tail of a segment a writer holds, recovery cuts it. Recovery refines the
//! judgement with what only a whole file can tell: zeros after the records
//! it keeps of a torn batch, and pages a power cut lost
//! ([`crate::storage::recover`]).
//!
//! # Slices and files
//!
//! [`Batches`] walks a byte slice, as an iterator. [`FileBatches`] walks a
//! byte range of a file through the [`Vfs`](crate::storage::fs::Vfs) seam,
//! a few large reads per megabyte into one reusable buffer, never one read
//! per batch. Both judge a batch by the same function on the bytes they
//! hold; the file walk reads on while its buffer ends before the range
//! does, so that it stops exactly where the slice walk over the whole range
//! would.

use std::io;
use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{self, VFile};
use crate::storage::record::{Batch, BatchHeader, DecodeError, Format};

/// A walk stopped at a batch that is not whole and valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchStop {
    /// Position of the batch in the range (a file position for a file, an
    /// index into the slice for a slice).
    pub position: u64,
    /// What is wrong with it.
    pub error: DecodeError,
    /// Whether the range holds only zeros from `position` to its end.
    pub zeros: bool,
}

impl BatchStop {
    /// Whether the range ends inside the batch: more bytes could complete it.
    pub fn is_truncated(&self) -> bool {
        self.error.is_truncated()
    }

    /// Whether this is a torn tail (truncated, or zeros to the end of the
    /// range) rather than damage.
    pub fn is_torn_tail(&self) -> bool {
        self.is_truncated() || self.zeros
    }
}

/// One step of a walk: a batch with its position, or where and why the walk
/// stopped.
pub type Step<'a> = Result<(u64, Batch<'a>), BatchStop>;

/// The judgement of both walks: the batch at the start of `rest` (the bytes
/// from its position to the end of what is held), whole and with a valid
/// header, or why not.
fn judge(format: Format, rest: &[u8], batch_bytes_max: u32) -> Result<Batch<'_>, DecodeError> {
    Batch::decode(format, rest, batch_bytes_max)
}

/// Walks the batches of a byte slice.
#[derive(Debug, Clone)]
pub struct Batches<'a> {
    format: Format,
    bytes: &'a [u8],
    /// Position of the next batch.
    position: usize,
    batch_bytes_max: u32,
    stopped: bool,
}

impl<'a> Batches<'a> {
    /// Walks `bytes`, batches of `format`, from its start.
    pub fn new(format: Format, bytes: &'a [u8], batch_bytes_max: u32) -> Batches<'a> {
        Batches::resume(format, bytes, 0, batch_bytes_max)
    }

    /// Walks `bytes` from `position`, where an earlier walk left off
    /// (positions stay those of `bytes`).
    pub fn resume(
        format: Format,
        bytes: &'a [u8],
        position: usize,
        batch_bytes_max: u32,
    ) -> Batches<'a> {
        Batches {
            format,
            bytes,
            position,
            batch_bytes_max,
            stopped: false,
        }
    }

    /// Position of the next batch: after a stop, the batch it stopped at;
    /// at the end, the length of the slice.
    pub fn position(&self) -> usize {
        self.position
    }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Step<'a>;

    fn next(&mut self) -> Option<Step<'a>> {
        if self.stopped || self.position >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.position..];
        let position = self.position as u64;
        match judge(self.format, rest, self.batch_bytes_max) {
            Ok(batch) => {
                self.position += batch.total_bytes();
                Some(Ok((position, batch)))
            }
            Err(error) => {
                self.stopped = true;
                let zeros = rest.iter().all(|&b| b == 0);
                Some(Err(BatchStop {
                    position,
                    error,
                    zeros,
                }))
            }
        }
    }
}

/// Walks the batches in a byte range of a file, through one reusable buffer.
#[derive(Debug)]
pub struct FileBatches<'f> {
    file: &'f dyn VFile,
    format: Format,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    buf_position: u64,
    /// Position of the next batch.
    position: u64,
    /// End of the range.
    end: u64,
    batch_bytes_max: u32,
    /// Bytes read at a time, at least.
    read_bytes_min: u64,
}

impl<'f> FileBatches<'f> {
    /// Walks `file`, batches of `format`, from `position` up to `end` (its
    /// length, or less).
    pub fn new(
        file: &'f dyn VFile,
        format: Format,
        position: u64,
        end: u64,
        batch_bytes_max: u32,
    ) -> FileBatches<'f> {
        FileBatches {
            file,
            format,
            buf: Vec::new(),
            buf_position: position,
            position,
            end,
            batch_bytes_max,
            read_bytes_min: fs::RANGE_CHUNK_BYTES,
        }
    }

    /// Position of the next batch: after a stop, the batch it stopped at.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The bytes held from the next batch on.
    fn window(&self) -> &[u8] {
        &self.buf[(self.position - self.buf_position) as usize..]
    }

    /// Where the bytes held end.
    fn held_end(&self) -> u64 {
        self.buf_position + self.buf.len() as u64
    }

    /// The next batch, `Ok(None)` at the end of the range, or where and why
    /// the walk stops (each call after a stop stops there again).
    pub fn next_batch(&mut self) -> io::Result<Option<Step<'_>>> {
        if self.position >= self.end {
            return Ok(None);
        }
        let total = loop {
            match judge(self.format, self.window(), self.batch_bytes_max) {
                Ok(batch) => break batch.total_bytes(),
                Err(DecodeError::Truncated {
                    needed_bytes: needed,
                    ..
                }) if self.held_end() < self.end => self.read_on(needed)?,
                Err(error) => {
                    let zeros = self.zeros_to_end()?;
                    let position = self.position;
                    return Ok(Some(Err(BatchStop {
                        position,
                        error,
                        zeros,
                    })));
                }
            }
        };
        let position = self.position;
        self.position += total as u64;
        let at = (position - self.buf_position) as usize;
        let batch = judge(self.format, &self.buf[at..at + total], self.batch_bytes_max)
            .expect("judged whole just above");
        Ok(Some(Ok((position, batch))))
    }

    /// Holds at least `needed` bytes from the next batch on (or all up to
    /// the end of the range), reading a large chunk at once.
    fn read_on(&mut self, needed: u64) -> io::Result<()> {
        let want = (self.end - self.position).min(needed.max(self.read_bytes_min)) as usize;
        self.buf.resize(want, 0);
        self.file.read_exact_at(&mut self.buf, self.position)?;
        self.buf_position = self.position;
        Ok(())
    }

    /// Whether the range holds only zeros from the next batch on.
    fn zeros_to_end(&self) -> io::Result<bool> {
        if self.window().iter().any(|&b| b != 0) {
            return Ok(false);
        }
        fs::is_zero_range(self.file, self.held_end(), self.end)
    }
}

/// Whether a batch whose offsets run from `base` up to `next` may follow,
/// in a segment whose batches skip offsets below `skips_below`
/// ([`crate::storage::segment::SegmentHeader::skips_below`]), the batch before it, which ended at
/// `expected`: there, or past it below that bound (a base offset is not
/// under a Kafka batch's CRC32C: one out of sequence is damage).
pub fn follows(skips_below: Option<u64>, expected: u64, base: u64, next: u64) -> bool {
    base == expected || skips_below.is_some_and(|bound| base > expected && next <= bound)
}

/// The largest batch header of any format.
const HEADER_BYTES_MAX: usize = crate::storage::record::BATCH_HEADER_BYTES;

/// A segment's file, its path and the format of its batches: what a reader
/// outside the log's lock needs to find a batch in it.
#[derive(Clone, Copy)]
pub struct BatchAt<'a> {
    /// The segment's file.
    pub file: &'a dyn VFile,
    /// Its path, for errors.
    pub path: &'a Path,
    /// The format of its batches.
    pub format: Format,
    /// Below which offset its batches may skip offsets
    /// ([`crate::storage::segment::SegmentHeader::skips_below`]).
    pub skips_below: Option<u64>,
}

impl std::fmt::Debug for BatchAt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchAt")
            .field("path", &self.path)
            .field("format", &self.format)
            .finish()
    }
}

impl BatchAt<'_> {
    /// Scans the batch headers from `start` (a batch's position, and the
    /// offset it starts at) for the batch holding `offset` (or the first
    /// after it), within the first `end` bytes: its position and header,
    /// or `None` at the end. Each batch passed must follow the one before
    /// it ([`follows`]: one out of sequence is
    /// damage, never served). Needs no lock: the
    /// caller took `start` and `end` from the log.
    pub fn find(
        &self,
        (start, start_offset): (u64, u64),
        offset: u64,
        end: u64,
        batch_bytes_max: u32,
    ) -> Result<Option<(u64, BatchHeader)>> {
        let (mut position, mut expected) = (start, start_offset);
        let header_bytes = self.format.header_bytes();
        let mut header_buf = [0u8; HEADER_BYTES_MAX];
        let header_buf = &mut header_buf[..header_bytes];
        while position + header_bytes as u64 <= end {
            self.file
                .read_exact_at(header_buf, position)
                .ctx("read", self.path)?;
            let corrupt = |reason: String| Error::Corrupt {
                path: self.path.to_path_buf(),
                position,
                reason,
            };
            let header = BatchHeader::decode(self.format, header_buf, batch_bytes_max)
                .map_err(|e| corrupt(e.to_string()))?;
            let (base, next) = (header.base_offset, header.next_offset());
            if !follows(self.skips_below, expected, base, next) {
                return Err(corrupt(format!(
                    "a batch at offset {}, where offset {expected} was expected",
                    header.base_offset
                )));
            }
            if header.next_offset() > offset {
                if position + header.total_bytes() > end {
                    return Ok(None);
                }
                return Ok(Some((position, header)));
            }
            position += header.total_bytes();
            expected = header.next_offset();
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::limits::BATCH_BYTES_MAX;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::fs::Vfs;
    use crate::storage::record::{stamp, BatchBuilder, BATCH_HEADER_BYTES};

    const KAFKA: Format = Format::Kafka;

    /// Three batches of one to three records, offsets 0.., and where each
    /// starts.
    fn three_batches() -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        let mut offset = 0;
        for n in 1..=3u32 {
            let mut b = BatchBuilder::new();
            for i in 0..n {
                b.push(i64::from(i), None, &[], &[b'a' + n as u8; 30]);
            }
            let batch = b.finish();
            stamp(batch, offset, 0);
            offset += u64::from(n);
            starts.push(bytes.len());
            bytes.extend_from_slice(batch);
        }
        (bytes, starts)
    }

    /// What a walk of the slice yields: positions of batches, then the stop.
    fn walk_slice(bytes: &[u8]) -> (Vec<u64>, Option<BatchStop>) {
        let mut positions = Vec::new();
        for step in Batches::new(KAFKA, bytes, BATCH_BYTES_MAX) {
            match step {
                Ok((position, batch)) => {
                    assert_eq!(batch.total_bytes(), batch.header.total_bytes() as usize);
                    positions.push(position);
                }
                Err(stop) => return (positions, Some(stop)),
            }
        }
        (positions, None)
    }

    /// The same through a file, reading `read_bytes_min` at a time, from
    /// position `start` of the file (the bytes are written there).
    fn walk_file(bytes: &[u8], start: u64, read_bytes_min: u64) -> (Vec<u64>, Option<BatchStop>) {
        let vfs = SimFs::new();
        vfs.create_dir_all(Path::new("/d")).unwrap();
        let path = Path::new("/d/f");
        let file = vfs.open(path, true).unwrap();
        file.set_len(start).unwrap();
        file.write_all_at(bytes, start).unwrap();
        let mut walk = FileBatches::new(
            &*file,
            KAFKA,
            start,
            start + bytes.len() as u64,
            BATCH_BYTES_MAX,
        );
        walk.read_bytes_min = read_bytes_min;
        let mut positions = Vec::new();
        loop {
            match walk.next_batch().unwrap() {
                None => return (positions, None),
                Some(Ok((position, _))) => positions.push(position - start),
                Some(Err(mut stop)) => {
                    assert_eq!(
                        walk.position(),
                        stop.position,
                        "a stop does not move the walk"
                    );
                    stop.position -= start;
                    return (positions, Some(stop));
                }
            }
        }
    }

    /// Both walks, which must agree, whatever the file's read size.
    fn walk(bytes: &[u8]) -> (Vec<u64>, Option<BatchStop>) {
        let sliced = walk_slice(bytes);
        for read_bytes_min in [1, 7, 40, 100, 1 << 20] {
            assert_eq!(
                walk_file(bytes, 24, read_bytes_min),
                sliced,
                "read {read_bytes_min}"
            );
        }
        sliced
    }

    fn positions(starts: &[usize]) -> Vec<u64> {
        starts.iter().map(|&s| s as u64).collect()
    }

    #[test]
    fn whole_batches_are_walked_to_the_end() {
        let (bytes, starts) = three_batches();
        assert_eq!(walk(&bytes), (positions(&starts), None));
        assert_eq!(walk(&[]), (vec![], None));
        let resumed: Vec<u64> = Batches::resume(KAFKA, &bytes, starts[1], BATCH_BYTES_MAX)
            .map(|s| s.unwrap().0)
            .collect();
        assert_eq!(resumed, positions(&starts[1..]));
    }

    #[test]
    fn every_cut_is_a_torn_tail_at_the_batch_it_cuts() {
        let (bytes, starts) = three_batches();
        for cut in 1..bytes.len() {
            let (found, stop) = walk(&bytes[..cut]);
            // The batch the cut falls in, or ends.
            let last = starts.iter().filter(|&&s| s < cut).count() - 1;
            let (at, end) = (starts[last], *starts.get(last + 1).unwrap_or(&bytes.len()));
            if end == cut {
                assert_eq!(
                    (found, stop),
                    (positions(&starts[..=last]), None),
                    "cut at {cut}"
                );
                continue;
            }
            assert_eq!(found, positions(&starts[..last]), "cut at {cut}");
            let stop = stop.unwrap_or_else(|| panic!("cut at {cut}: no stop"));
            assert_eq!(stop.position, at as u64, "cut at {cut}");
            assert!(
                stop.is_truncated() && stop.is_torn_tail(),
                "cut at {cut}: {stop:?}"
            );
            assert_eq!(
                stop.zeros,
                bytes[at..cut].iter().all(|&b| b == 0),
                "cut at {cut}"
            );
            let needed = if cut - at < BATCH_HEADER_BYTES {
                BATCH_HEADER_BYTES
            } else {
                end - at
            };
            let expected = DecodeError::Truncated {
                what: if needed == BATCH_HEADER_BYTES {
                    "batch header"
                } else {
                    "batch"
                },
                needed_bytes: needed as u64,
                available_bytes: (cut - at) as u64,
            };
            assert_eq!(stop.error, expected, "cut at {cut}");
        }
    }

    #[test]
    fn zeros_to_the_end_are_a_torn_tail_however_long() {
        let (bytes, starts) = three_batches();
        for zeros in [1, BATCH_HEADER_BYTES - 1, BATCH_HEADER_BYTES, 5000] {
            let mut padded = bytes.clone();
            padded.resize(bytes.len() + zeros, 0);
            let (found, stop) = walk(&padded);
            assert_eq!(found, positions(&starts), "{zeros} zeros");
            let stop = stop.unwrap();
            assert_eq!(stop.position, bytes.len() as u64);
            assert!(stop.zeros && stop.is_torn_tail(), "{zeros} zeros: {stop:?}");
            assert_eq!(
                stop.is_truncated(),
                zeros < BATCH_HEADER_BYTES,
                "{zeros} zeros"
            );
        }
    }

    #[test]
    fn zeros_with_anything_after_them_are_damage() {
        let (bytes, starts) = three_batches();
        let mut padded = bytes.clone();
        padded.resize(bytes.len() + 5000, 0);
        padded.push(1);
        let (found, stop) = walk(&padded);
        assert_eq!(found, positions(&starts));
        let stop = stop.unwrap();
        assert_eq!(stop.position, bytes.len() as u64);
        assert!(!stop.zeros && !stop.is_torn_tail(), "{stop:?}");
    }

    #[test]
    fn a_bad_header_is_damage_even_with_zeros_after_it() {
        let (bytes, starts) = three_batches();
        // The stored CRC, the magic, a byte the CRC32C covers, a length
        // shorter than the batch (one claiming more than the range holds
        // is judged by recovery: see `recover::scan`).
        for (what, at, flip) in [
            ("crc", 18, 0x40),
            ("magic", 16, 0x40),
            ("records", 70, 0x40),
            ("length", 11, 0x01),
        ] {
            let mut bad = bytes.clone();
            bad[starts[1] + at] ^= flip;
            bad.resize(bytes.len() + 8192, 0);
            let (found, stop) = walk(&bad);
            assert_eq!(found, positions(&starts[..1]), "{what}");
            let stop = stop.unwrap();
            assert_eq!(stop.position, starts[1] as u64, "{what}");
            assert!(!stop.is_torn_tail(), "{what}: {stop:?}");
            assert!(
                matches!(
                    stop.error,
                    DecodeError::CrcMismatch { .. } | DecodeError::Malformed(_)
                ),
                "{what}: {stop:?}"
            );
        }
    }

    #[test]
    fn a_batch_longer_than_the_limit_is_damage_not_a_torn_tail() {
        let (bytes, starts) = three_batches();
        let limit = (starts[2] - starts[1] - 1) as u32;
        let stop = Batches::new(KAFKA, &bytes, limit)
            .find_map(Result::err)
            .unwrap();
        assert_eq!(stop.position, starts[1] as u64);
        assert!(
            matches!(stop.error, DecodeError::TooLarge { .. }),
            "{stop:?}"
        );
        assert!(!stop.is_torn_tail());
    }

    #[test]
    fn a_walk_stays_stopped() {
        let (bytes, starts) = three_batches();
        let cut = &bytes[..starts[2] + 3];
        let mut walk = Batches::new(KAFKA, cut, BATCH_BYTES_MAX);
        assert_eq!(walk.by_ref().filter(Result::is_ok).count(), 2);
        assert!(walk.next().is_none());
        assert_eq!(walk.position(), starts[2]);
    }
}
