//! The segment header's codec (the table is in [`super`]).

use super::{
    SEGMENT_HEADER_BYTES, SEGMENT_MAGIC, SEGMENT_VERSION, SEGMENT_VERSION_CLEANED,
    SEGMENT_VERSION_LEGACY,
};
use crate::storage::record::{legacy, Format};

/// Header flag: a cleaned segment.
pub const SEGMENT_FLAG_CLEANED: u16 = 1;
/// Header flag: a segment of batches copied from a leader's cleaned log,
/// which may skip offsets (no end).
pub const SEGMENT_FLAG_GAPS: u16 = 2;

/// What a segment header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Offset of the first record; also the file's name.
    pub base_offset: u64,
    /// The format of its batches.
    pub format: Format,
    /// Of a cleaned segment: one past the last offset it stands for (the
    /// next segment's base offset when it was cleaned).
    pub end: Option<u64>,
    /// Its batches may skip offsets: a cleaned segment, or one a follower
    /// copied its leader's cleaned batches into (version 3).
    pub gaps: bool,
}

impl SegmentHeader {
    /// Below which offset its batches may skip offsets: a cleaned
    /// segment's end, any offset in a segment that takes gaps, `None` in
    /// the others ([`crate::storage::batches::follows`]).
    pub fn skips_below(&self) -> Option<u64> {
        skips_below(self.gaps, self.end)
    }
}

/// Below which offset the batches of a segment with `gaps` (and a
/// cleaned one's `end`) may skip offsets: the rule of
/// [`SegmentHeader::skips_below`], for a segment as held too.
pub(crate) fn skips_below(gaps: bool, end: Option<u64>) -> Option<u64> {
    gaps.then_some(end.unwrap_or(u64::MAX))
}

/// Encodes a segment header, for batches of `format`.
pub fn encode_header(base_offset: u64, format: Format) -> [u8; SEGMENT_HEADER_BYTES] {
    encode(base_offset, format, Kind::Plain)
}

/// Encodes the header of a segment of Kafka batches that may skip offsets
/// (version 3, flag [`SEGMENT_FLAG_GAPS`], no end).
pub fn encode_gaps_header(base_offset: u64) -> [u8; SEGMENT_HEADER_BYTES] {
    encode(base_offset, Format::Kafka, Kind::Gaps)
}

/// Encodes the header of a cleaned segment standing for the offsets from
/// `base_offset` to `end` (more than `base_offset`, less than `2^32`
/// beyond it).
pub fn encode_cleaned_header(base_offset: u64, end: u64) -> [u8; SEGMENT_HEADER_BYTES] {
    encode(base_offset, Format::Kafka, Kind::Cleaned(end))
}

/// Which header.
#[derive(Clone, Copy)]
enum Kind {
    Plain,
    Gaps,
    Cleaned(u64),
}

fn encode(base_offset: u64, format: Format, kind: Kind) -> [u8; SEGMENT_HEADER_BYTES] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES];
    match kind {
        Kind::Plain => {}
        Kind::Gaps => h[6..8].copy_from_slice(&SEGMENT_FLAG_GAPS.to_le_bytes()),
        Kind::Cleaned(end) => {
            let delta =
                u32::try_from(end - base_offset).expect("a segment spans under 2^32 offsets");
            assert!(delta > 0, "a cleaned segment ends past its base offset");
            h[6..8].copy_from_slice(&SEGMENT_FLAG_CLEANED.to_le_bytes());
            h[16..20].copy_from_slice(&delta.to_le_bytes());
        }
    }
    h[0..4].copy_from_slice(SEGMENT_MAGIC);
    let version = match (format, kind) {
        (Format::Kafka, Kind::Plain) => SEGMENT_VERSION,
        (Format::Kafka, _) => SEGMENT_VERSION_CLEANED,
        (Format::Legacy, _) => SEGMENT_VERSION_LEGACY,
    };
    h[4..6].copy_from_slice(&version.to_le_bytes());
    h[8..16].copy_from_slice(&base_offset.to_le_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Decodes a segment header, returning the base offset it names and the
/// format of its batches.
pub fn decode_header(h: &[u8]) -> std::result::Result<(u64, Format), String> {
    read_header(h).map(|h| (h.base_offset, h.format))
}

/// Decodes a segment header, all it says.
pub fn read_header(h: &[u8]) -> std::result::Result<SegmentHeader, String> {
    if h.len() < SEGMENT_HEADER_BYTES {
        return Err(format!(
            "segment header truncated ({} of {SEGMENT_HEADER_BYTES} bytes)",
            h.len()
        ));
    }
    if &h[0..4] != SEGMENT_MAGIC {
        return Err("not a klog segment (bad magic)".into());
    }
    let crc = crc32fast::hash(&h[..20]);
    if crc != legacy::u32_at(h, 20) {
        return Err("segment header crc mismatch".into());
    }
    let version = legacy::u16_at(h, 4);
    let format = match version {
        SEGMENT_VERSION | SEGMENT_VERSION_CLEANED => Format::Kafka,
        SEGMENT_VERSION_LEGACY => Format::Legacy,
        version => return Err(format!("unsupported segment version {version}")),
    };
    let base_offset = legacy::u64_at(h, 8);
    let flags = legacy::u16_at(h, 6);
    let delta = legacy::u32_at(h, 16);
    let gaps = version == SEGMENT_VERSION_CLEANED;
    let end = match flags {
        0 if delta == 0 && !gaps => None,
        SEGMENT_FLAG_GAPS if delta == 0 && gaps => None,
        SEGMENT_FLAG_CLEANED if delta > 0 && gaps => Some(
            base_offset
                .checked_add(u64::from(delta))
                .ok_or("segment header: end overflows")?,
        ),
        0 | SEGMENT_FLAG_CLEANED | SEGMENT_FLAG_GAPS => {
            return Err(format!(
                "segment header: version {version} with flags {flags:#x} and end {delta} \
                 (version 3 has a flag: cleaned, with an end, or gaps, without)"
            ))
        }
        flags => return Err(format!("unsupported segment flags {flags:#x}")),
    };
    Ok(SegmentHeader {
        base_offset,
        format,
        end,
        gaps,
    })
}
