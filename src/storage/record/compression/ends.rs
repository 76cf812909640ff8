//! Where a compressed records section ends, read from the codec's own
//! framing: how recovery tells a batch a writer cut short (its stream runs
//! to the end of the file) from one whose length field is damaged (its
//! stream ends, whole, before the bytes do).

use std::io::{self, Read};

use super::{
    read_capped, snappy_block, window_log, xerial_blocks, zstd_decoder, zstd_window, Codec,
    Decompressed, XERIAL_MAGIC,
};
use crate::limits::BATCH_BYTES_MAX;

/// Whether `stream`, a compressed records section cut short, reads as the
/// start of a stream of `codec` that the cut interrupted: gzip and zstd
/// say so (an unexpected end, against a stream that ends before the bytes
/// do or bytes no encoder writes), and lz4 (a frame without its end mark);
/// a snappy stream has no mark of its end, and answers false (decoding
/// tells: [`crate::storage::record::could_be_cut_short`]). Reads at most
/// [`BATCH_BYTES_MAX`] of output, into a small buffer.
pub fn stream_runs_to_the_end(codec: Codec, stream: &[u8]) -> bool {
    match codec {
        Codec::Gzip => drains_to_eof(flate2::read::MultiGzDecoder::new(stream)),
        Codec::Zstd => match zstd_decoder(stream, window_log(zstd_window(stream))) {
            Ok(decoder) => drains_to_eof(decoder),
            Err(_) => false,
        },
        Codec::Lz4 => !lz4_frames_end(stream),
        Codec::None | Codec::Snappy => false,
    }
}

/// Whether `reader` (a decoder) ends in an unexpected end of its input,
/// within [`BATCH_BYTES_MAX`] of output; a read a signal interrupted is
/// read again.
fn drains_to_eof(mut reader: impl Read) -> bool {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0usize;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                total += n;
                if total > BATCH_BYTES_MAX as usize {
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return e.kind() == io::ErrorKind::UnexpectedEof,
        }
    }
}

/// Whether `stream` is whole LZ4 frames (and skippable frames; one at
/// least), the last ending, after its end mark and content checksum, where
/// the bytes do; the frames' sizes are walked, nothing is decompressed.
fn lz4_frames_end(mut stream: &[u8]) -> bool {
    if stream.is_empty() {
        return false;
    }
    while !stream.is_empty() {
        match lz4_frame_len(stream) {
            Some(len) => stream = &stream[len..],
            None => return false,
        }
    }
    true
}

/// The length of the LZ4 frame (or skippable frame) at the start of
/// `stream`, through its end mark and content checksum, if all of it is
/// there: read from its header and block sizes, nothing decompressed.
fn lz4_frame_len(stream: &[u8]) -> Option<usize> {
    const MAGIC: u32 = 0x184d_2204;
    const SKIPPABLE: std::ops::RangeInclusive<u32> = 0x184d_2a50..=0x184d_2a5f;
    let u32_at = |at: usize| {
        stream
            .get(at..at.checked_add(4)?)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let magic = u32_at(0)?;
    let end = if SKIPPABLE.contains(&magic) {
        8 + u32_at(4)? as usize
    } else {
        let flags = *stream.get(4).filter(|_| magic == MAGIC)?;
        let block_checksum = if flags & 0x10 != 0 { 4 } else { 0 };
        let content_checksum = if flags & 0x04 != 0 { 4 } else { 0 };
        // Magic, FLG, BD, the content size and dictionary id if flagged,
        // the header checksum.
        let mut at = 4
            + 2
            + if flags & 0x08 != 0 { 8 } else { 0 }
            + if flags & 0x01 != 0 { 4 } else { 0 }
            + 1;
        loop {
            let block = u32_at(at)?;
            at += 4;
            if block == 0 {
                break at + content_checksum;
            }
            at += (block & 0x7fff_ffff) as usize + block_checksum;
        }
    };
    (end <= stream.len()).then_some(end)
}

/// Decodes `stream` a unit at a time, each unit read from its own framing
/// (a gzip member, a zstd or LZ4 frame, a xerial block, a raw snappy
/// block), into `plain`, asking `whole` of all it holds after each unit:
/// true as soon as it says yes, so the stream ends, by its framing, where
/// whatever `whole` looks for is (a batch's records, all of them). False
/// at a unit cut short or broken, at bytes that start no unit, and when
/// the output would pass [`BATCH_BYTES_MAX`] or `plain`'s budget.
pub fn unit_ends_whole(
    codec: Codec,
    stream: &[u8],
    plain: &mut Decompressed<'_>,
    mut whole: impl FnMut(&[u8]) -> bool,
) -> bool {
    plain.clear();
    let cap = BATCH_BYTES_MAX as usize;
    let mut rest = stream;
    match codec {
        Codec::None => false,
        Codec::Snappy if stream.starts_with(XERIAL_MAGIC) => {
            xerial_blocks(stream, plain, cap, whole).unwrap_or(false)
        }
        Codec::Snappy => raw_snappy_len(stream).is_some_and(|len| {
            snappy_block(&stream[..len], plain, cap).is_ok() && whole(plain.records())
        }),
        Codec::Gzip => {
            while !rest.is_empty() {
                let mut member = flate2::bufread::GzDecoder::new(rest);
                if read_capped(&mut member, plain, cap).is_err() {
                    return false;
                }
                rest = member.into_inner();
                if whole(plain.records()) {
                    return true;
                }
            }
            false
        }
        Codec::Lz4 => {
            // The frames' ends are walked: the decoder takes a frame cut
            // short of its end mark as whole.
            while let Some(len) = lz4_frame_len(rest) {
                let (frame, after) = rest.split_at(len);
                let decoder = lz4_flex::frame::FrameDecoder::new(frame);
                if read_capped(decoder, plain, cap).is_err() {
                    return false;
                }
                rest = after;
                if whole(plain.records()) {
                    return true;
                }
            }
            false
        }
        Codec::Zstd => {
            let log = window_log(zstd_window(stream));
            if plain.hold_window(1 << log).is_err() {
                return false;
            }
            while let Ok(len) = zstd::zstd_safe::find_frame_compressed_size(rest) {
                let Some((frame, after)) = rest.split_at_checked(len) else {
                    return false;
                };
                let decoded = zstd_decoder(frame, log).and_then(|d| read_capped(d, plain, cap));
                if decoded.is_err() || len == 0 {
                    return false;
                }
                rest = after;
                if whole(plain.records()) {
                    return true;
                }
            }
            false
        }
    }
}

/// The length of the raw snappy block at the start of `bytes`, read from
/// its tags: its length varint, then elements (literals and copies) until
/// they make that many bytes. None when they do not within `bytes`, or
/// make more. Only the framing is read; decoding checks the rest.
fn raw_snappy_len(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    let mut want = 0u64;
    for shift in (0..35).step_by(7) {
        let byte = *bytes.get(at)?;
        at += 1;
        want |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        if shift == 28 {
            return None;
        }
    }
    let mut made = 0u64;
    while made < want {
        let tag = *bytes.get(at)?;
        let (used, len) = match tag & 3 {
            0 if tag >> 2 < 60 => (1 + u64::from(tag >> 2) + 1, u64::from(tag >> 2) + 1),
            0 => {
                let extra = usize::from(tag >> 2) - 59;
                let mut little = [0u8; 8];
                little[..extra].copy_from_slice(bytes.get(at + 1..at + 1 + extra)?);
                let len = u64::from_le_bytes(little) + 1;
                (1 + extra as u64 + len, len)
            }
            1 => (2, u64::from((tag >> 2) & 7) + 4),
            2 => (3, u64::from(tag >> 2) + 1),
            _ => (5, u64::from(tag >> 2) + 1),
        };
        at = at.checked_add(usize::try_from(used).ok()?)?;
        made += len;
    }
    (made == want && at <= bytes.len()).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// An LZ4 stream ends only after each frame's end mark (and content
    /// checksum), whatever the frame's flags; skippable frames are walked
    /// past; any stream cut short does not end.
    #[test]
    fn lz4_frames_end_only_where_their_last_frame_does() {
        use lz4_flex::frame::{BlockSize, FrameEncoder, FrameInfo};
        let data: Vec<u8> = (0..150_000u32)
            .map(|i| (i % 251) as u8 ^ (i >> 9) as u8)
            .collect();
        let plain = FrameInfo::new().block_size(BlockSize::Max64KB);
        let infos = [
            plain.clone(),
            plain.clone().block_checksums(true),
            plain.clone().content_checksum(true),
            plain.content_size(Some(data.len() as u64)),
        ];
        for info in infos {
            let mut encoder = FrameEncoder::with_frame_info(info.clone(), Vec::new());
            encoder.write_all(&data).unwrap();
            let one = encoder.finish().unwrap();
            assert!(lz4_frames_end(&one), "{info:?}");
            for cut in 0..one.len() {
                assert!(!lz4_frames_end(&one[..cut]), "{info:?}: cut at {cut}");
            }
            let mut more = one.clone();
            more.extend_from_slice(&0x184d_2a53u32.to_le_bytes());
            more.extend_from_slice(&3u32.to_le_bytes());
            more.extend_from_slice(b"abc");
            more.extend_from_slice(&one);
            assert!(lz4_frames_end(&more), "{info:?}: frames");
            assert!(
                !lz4_frames_end(&more[..one.len() + 10]),
                "{info:?}: skippable cut"
            );
        }
        assert!(!lz4_frames_end(b"\x04\x22\x4d\x19rest"), "another magic");
    }

    /// The tag walk finds where the crate's raw blocks end, whatever
    /// follows them, and no end in any block cut short.
    #[test]
    fn a_raw_snappy_block_ends_where_the_crate_wrote_it_to() {
        let mut seed = 7u64;
        for round in 0..200 {
            let len = [0, 1, 59, 60, 61, 255, 256, 65_536, 70_000][round % 9] + round;
            let data: Vec<u8> = (0..len)
                .map(|i| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    if round % 2 == 0 {
                        (seed >> 60) as u8
                    } else {
                        (i % 7) as u8
                    }
                })
                .collect();
            let block = snap::raw::Encoder::new().compress_vec(&data).unwrap();
            assert_eq!(raw_snappy_len(&block), Some(block.len()), "round {round}");
            for tail in [&[0u8; 30][..], &[0xff; 7], &block] {
                let more = [&block[..], tail].concat();
                assert_eq!(raw_snappy_len(&more), Some(block.len()), "round {round}");
            }
            for cut in (0..block.len()).step_by(1 + block.len() / 64) {
                assert_eq!(
                    raw_snappy_len(&block[..cut]),
                    None,
                    "round {round}, cut {cut}"
                );
            }
        }
        assert_eq!(raw_snappy_len(&[0x80; 6]), None, "a varint past 32 bits");
    }

    /// A reader of `len` zeros that ends in `end` (after one read a signal
    /// interrupted, when `interrupt`).
    struct Zeros {
        left: usize,
        end: io::ErrorKind,
        interrupt: bool,
    }

    impl Read for Zeros {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if std::mem::take(&mut self.interrupt) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(self.left);
            if n == 0 {
                return Err(self.end.into());
            }
            buf[..n].fill(0);
            self.left -= n;
            Ok(n)
        }
    }

    /// A decoder runs to the end of its input when it says so within the
    /// batch limit of output, and not past it; an interrupted read is
    /// read again; any other error, or an end, is no cut.
    #[test]
    fn a_stream_runs_to_the_end_within_the_batch_limit_only() {
        let max = BATCH_BYTES_MAX as usize;
        let zeros = |left, end, interrupt| Zeros {
            left,
            end,
            interrupt,
        };
        let eof = io::ErrorKind::UnexpectedEof;
        assert!(drains_to_eof(zeros(max, eof, false)), "at the limit");
        assert!(!drains_to_eof(zeros(max + 1, eof, false)), "past it");
        assert!(drains_to_eof(zeros(10, eof, true)), "interrupted");
        assert!(!drains_to_eof(zeros(10, io::ErrorKind::InvalidData, false)));
        assert!(!drains_to_eof(&[1u8, 2, 3][..]), "an end");
    }

    /// An LZ4 frame's header is as long as its flags say: a content size
    /// (8 bytes) and a dictionary id (4), each or both, are walked past
    /// (frames written by hand: the crate writes no dictionary id).
    #[test]
    fn an_lz4_header_is_as_long_as_its_flags_say() {
        for (flags, extra) in [(0x08, 8), (0x01, 4), (0x09, 12)] {
            let mut frame = 0x184d_2204u32.to_le_bytes().to_vec();
            frame.extend_from_slice(&[0x60 | flags, 0x40]);
            frame.extend(std::iter::repeat_n(0xee, extra));
            frame.push(0x5a); // the header checksum, not checked here
            frame.extend_from_slice(&(0x8000_0003u32).to_le_bytes());
            frame.extend_from_slice(b"abc");
            frame.extend_from_slice(&0u32.to_le_bytes());
            assert_eq!(lz4_frame_len(&frame), Some(frame.len()), "{flags:#x}");
            let mut more = frame.clone();
            more.extend_from_slice(&frame);
            assert_eq!(lz4_frame_len(&more), Some(frame.len()), "{flags:#x}");
            assert!(lz4_frames_end(&more), "{flags:#x}");
            for cut in 0..frame.len() {
                assert_eq!(lz4_frame_len(&frame[..cut]), None, "{flags:#x} at {cut}");
            }
        }
    }

    /// A copy with a four-byte offset (tag 3: the crate never writes one)
    /// is five bytes of the block.
    #[test]
    fn a_raw_snappy_copy_with_a_four_byte_offset_is_five_bytes() {
        // Eight bytes: the literal "abcd", then a copy of 4 from 4 back.
        let block = [
            8,
            (4 - 1) << 2,
            b'a',
            b'b',
            b'c',
            b'd',
            (4 - 1) << 2 | 3,
            4,
            0,
            0,
            0,
        ];
        let plain = snap::raw::Decoder::new().decompress_vec(&block).unwrap();
        assert_eq!(plain, b"abcdabcd");
        assert_eq!(
            raw_snappy_len(&[&block[..], b"next"].concat()),
            Some(block.len())
        );
        assert_eq!(raw_snappy_len(&block[..block.len() - 1]), None);
    }

    /// A unit ends the stream whole only when what it holds is whole, and
    /// only when it decodes: a raw snappy block whose records are not all
    /// there, a zstd frame whose checksum is wrong, a zstd window the
    /// budget has no room for, are no end.
    #[test]
    fn a_unit_ends_whole_only_when_it_decodes_and_holds_it_all() {
        let data = vec![3u8; 300_000];
        let budget = super::super::Budget::new(usize::MAX);
        let mut plain = Decompressed::new(&budget);
        let block = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        let mut asked = 0;
        let all = |records: &[u8]| records == &data[..];
        assert!(unit_ends_whole(Codec::Snappy, &block, &mut plain, all));
        assert!(!unit_ends_whole(Codec::Snappy, &block, &mut plain, |_| {
            asked += 1;
            false
        }));
        assert_eq!(asked, 1);
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        encoder.include_checksum(true).unwrap();
        encoder.write_all(&data).unwrap();
        let mut frame = encoder.finish().unwrap();
        assert!(unit_ends_whole(Codec::Zstd, &frame, &mut plain, all));
        *frame.last_mut().unwrap() ^= 1;
        assert!(!unit_ends_whole(Codec::Zstd, &frame, &mut plain, |_| true));
        *frame.last_mut().unwrap() ^= 1;
        // Twice the window's power of two is held while a frame is read.
        let held = 2 << window_log(zstd_window(&frame));
        let budget = super::super::Budget::new(held / 2 + data.len());
        let mut plain = Decompressed::new(&budget);
        assert!(!unit_ends_whole(Codec::Zstd, &frame, &mut plain, |_| true));
        let budget = super::super::Budget::new(held + 2 * data.len());
        let mut plain = Decompressed::new(&budget);
        assert!(unit_ends_whole(Codec::Zstd, &frame, &mut plain, all));
    }
}
