//! klog's own batches, [`Format::Legacy`] (segment version 1): what klog
//! wrote before it stored Kafka's RecordBatch v2. They are read,
//! recovered, verified and served (converted to RecordBatch v2 at the edge,
//! [`to_kafka`]), never written.
//!
//! # Batch
//!
//! A batch is a 44-byte header followed by `record_count` records. All
//! integers are little-endian.
//!
//! | offset | size | field            | meaning                                                   |
//! |-------:|-----:|------------------|-----------------------------------------------------------|
//! |      0 |    8 | `base_offset`    | offset of the first record; assigned by the log on append  |
//! |      8 |    4 | `batch_length`   | bytes after this field: `32 + ` the records' bytes         |
//! |     12 |    1 | `magic`          | format version, `2`                                        |
//! |     13 |    1 | `attributes`     | reserved, `0` (compression and timestamp type will go here)|
//! |     14 |    2 | reserved         | `0`                                                        |
//! |     16 |    4 | `record_count`   | records in the batch, at least 1                          |
//! |     20 |    8 | `base_timestamp` | ms since the Unix epoch; record timestamps are deltas to it|
//! |     28 |    8 | `max_timestamp`  | largest record timestamp in the batch                      |
//! |     36 |    4 | `leader_epoch`   | epoch of the leader that appended it; stamped by the log   |
//! |     40 |    4 | `header_crc`     | CRC32 (IEEE) of bytes 0..40                                |
//! |     44 |    … | records          |                                                            |
//!
//! Offsets inside a batch are consecutive: record *i* has offset
//! `base_offset + i`. So the log assigns offsets to a producer's batch by
//! rewriting `base_offset`, `leader_epoch` and `header_crc` only, in the
//! header, without touching or re-encoding a record ([`stamp`]).
//!
//! ## Magic 1
//!
//! The first 36 bytes are the same; magic 1 has no `leader_epoch`: its
//! `header_crc` (of bytes 0..36) is at 36, its records start at 40, and its
//! `batch_length` is `28 + ` the records' bytes. Magic 1 batches are read
//! as leader epoch 0: segments written before magic 2 keep reading and
//! recovering as they were. An old producer's legacy batch (klog's
//! produce version 1), of either magic, is converted to a Kafka batch on
//! its way in ([`to_kafka`]). Every other magic is a decode error.
//!
//! # Record
//!
//! | field        | encoding                  | meaning                                                |
//! |--------------|---------------------------|--------------------------------------------------------|
//! | `length`     | varint (LEB128, ≤ 5 bytes)| bytes after this field: 4 + the body                   |
//! | `crc`        | u32                       | CRC32 (IEEE) of the body                               |
//! | body: `attributes` | u8                  | bit 0: a key follows; bit 1: headers follow; others 0  |
//! | body: `timestamp_delta` | zigzag varint  | `timestamp - base_timestamp`, ms                       |
//! | body: key    | varint length, bytes      | present when attribute bit 0 is set                    |
//! | body: headers| varint count, then per header: varint name length, name, varint value length, value | present when bit 1 is set |
//! | body: value  | bytes                     | the rest of the record                                 |
//!
//! A 200-byte value without key or headers costs 8 bytes of record overhead
//! (2 length, 4 CRC, 1 attributes, 1 timestamp delta), plus 44/50 bytes of
//! batch header in a batch of 50: 8.88 bytes, under the paper's 9.
//!
//! # What is protected
//!
//! Every record's body has its own CRC, so a reader stops at exactly the first
//! damaged record, and recovery keeps every record before it (guarantee 3).
//! The batch header has its own CRC, covering the offsets and timestamps that
//! records are read against. Nothing else is checksummed: a segment's indexes
//! are rebuilt from the log when in doubt.
//!
//! # Limits
//!
//! Decoding never allocates: lengths are checked against the buffer and
//! against `record_bytes_max` before use, and a varint longer than its type
//! is an error, so hostile bytes cost at most a scan of the buffer.
//!
//! # Version history
//!
//! - magic 1: the 40-byte header, without `leader_epoch` (read, upgraded
//!   on append, never written).
//! - magic 2: `leader_epoch` added (for replication: KIP-101's
//!   `partitionLeaderEpoch`), header 44 bytes.
//!
//! `tests/golden/legacy/batch.bin` pins this layout and `tests/golden/v1/batch.bin`
//! magic 1 (`tests/golden.rs`); a diff there is a format change and needs
//! a new magic.

use super::cursor::{unzigzag, Cursor};
use super::{BatchHeader, DecodeError, Format, Record, BATCH_LENGTH_PREFIX_BYTES};
use crate::limits::{BATCH_BYTES_MAX, BATCH_RECORDS_MAX, HEADERS_PER_RECORD_MAX};

mod build;
pub use build::BatchBuilder;

mod convert;
pub use convert::to_kafka;

/// Size of the batch header (of the current magic, the largest: a reader
/// that reads this many bytes at a batch's start has its whole header).
pub const BATCH_HEADER_BYTES: usize = HEADER_CRC_OFFSET + 4;
/// Size of a magic 1 batch header.
pub const BATCH_HEADER_BYTES_V1: usize = HEADER_CRC_OFFSET_V1 + 4;
/// The current batch format version.
pub const MAGIC: u8 = 2;
/// The first batch format version, without a leader epoch.
pub const MAGIC_V1: u8 = 1;

pub(super) const BASE_OFFSET_OFFSET: usize = 0;
pub(super) const BATCH_LENGTH_OFFSET: usize = BASE_OFFSET_OFFSET + 8;
pub(super) const MAGIC_OFFSET: usize = BATCH_LENGTH_OFFSET + 4;
pub(super) const ATTRIBUTES_OFFSET: usize = MAGIC_OFFSET + 1;
pub(super) const RESERVED_OFFSET: usize = ATTRIBUTES_OFFSET + 1;
pub(super) const RECORD_COUNT_OFFSET: usize = RESERVED_OFFSET + 2;
pub(super) const BASE_TIMESTAMP_OFFSET: usize = RECORD_COUNT_OFFSET + 4;
pub(super) const MAX_TIMESTAMP_OFFSET: usize = BASE_TIMESTAMP_OFFSET + 8;
const HEADER_CRC_OFFSET_V1: usize = MAX_TIMESTAMP_OFFSET + 8;
pub(super) const LEADER_EPOCH_OFFSET: usize = MAX_TIMESTAMP_OFFSET + 8;
const HEADER_CRC_OFFSET: usize = LEADER_EPOCH_OFFSET + 4;

const _: () = assert!(BATCH_HEADER_BYTES == 44);
const _: () = assert!(BATCH_HEADER_BYTES_V1 == 40);
// Every batch of either magic holds at least one record, so reading
// BATCH_HEADER_BYTES at a batch's start never reads past its end.
const _: () = assert!(BATCH_HEADER_BYTES <= BATCH_HEADER_BYTES_V1 + RECORD_BYTES_MIN);

pub(super) const ATTR_KEY: u8 = 0x01;
pub(super) const ATTR_HEADERS: u8 = 0x02;
/// The attribute bits the format defines.
const ATTR_KNOWN: u8 = 0x03;
const _: () = assert!(ATTR_KNOWN == ATTR_KEY | ATTR_HEADERS);

/// Smallest record: a one-byte length, the CRC, attributes, a one-byte delta.
pub const RECORD_BYTES_MIN: usize = 1 + 4 + 1 + 1;

fn truncated(what: &'static str, needed: usize, available: usize) -> DecodeError {
    DecodeError::Truncated {
        what,
        needed_bytes: needed as u64,
        available_bytes: available as u64,
    }
}

/// Decodes and checks a legacy batch header at the start of `buf`.
///
/// Checks the header CRC, the magic, the record count and that the batch
/// length is at most `batch_bytes_max`; it does not need the records.
pub(super) fn decode_header(buf: &[u8], batch_bytes_max: u32) -> Result<BatchHeader, DecodeError> {
    // The magic says how long the header is; an unknown one reads as the
    // current header, so that its CRC judges the bytes first (a torn or
    // damaged header is reported as such, not as a new format).
    let magic = buf.get(MAGIC_OFFSET).copied().unwrap_or(MAGIC);
    let header_bytes = header_bytes_of(magic);
    if buf.len() < header_bytes {
        return Err(truncated("batch header", header_bytes, buf.len()));
    }
    let crc_at = header_bytes - 4;
    let record_count = u32_at(buf, RECORD_COUNT_OFFSET);
    let header = BatchHeader {
        format: Format::Legacy,
        base_offset: u64_at(buf, BASE_OFFSET_OFFSET),
        batch_length: u32_at(buf, BATCH_LENGTH_OFFSET),
        magic,
        attributes: u16::from(buf[ATTRIBUTES_OFFSET]),
        last_offset_delta: record_count.saturating_sub(1),
        record_count,
        base_timestamp: u64_at(buf, BASE_TIMESTAMP_OFFSET) as i64,
        max_timestamp: u64_at(buf, MAX_TIMESTAMP_OFFSET) as i64,
        leader_epoch: if magic == MAGIC_V1 {
            0
        } else {
            u32_at(buf, LEADER_EPOCH_OFFSET)
        },
        crc: u32_at(buf, crc_at),
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
    let computed = crc32fast::hash(&buf[..crc_at]);
    if computed != header.crc {
        return Err(DecodeError::CrcMismatch {
            what: "batch header",
            stored: header.crc,
            computed,
        });
    }
    if header.magic != MAGIC && header.magic != MAGIC_V1 {
        return Err(DecodeError::Malformed("batch: unknown magic"));
    }
    if header.attributes != 0 || u16_at(buf, RESERVED_OFFSET) != 0 {
        return Err(DecodeError::Malformed("batch: unknown attributes"));
    }
    let records_min = u64::from(header.record_count) * RECORD_BYTES_MIN as u64;
    if header.record_count == 0 || header.record_count > BATCH_RECORDS_MAX {
        return Err(DecodeError::Malformed("batch: record count out of range"));
    }
    let length_min = (header_bytes - BATCH_LENGTH_PREFIX_BYTES) as u64 + records_min;
    if u64::from(header.batch_length) < length_min {
        return Err(DecodeError::Malformed(
            "batch: length too small for its records",
        ));
    }
    let limit = batch_bytes_max.min(BATCH_BYTES_MAX);
    if header.total_bytes() > u64::from(limit) {
        return Err(DecodeError::TooLarge {
            what: "batch",
            size_bytes: header.total_bytes(),
            limit_bytes: u64::from(limit),
        });
    }
    Ok(header)
}

/// Size of the header of a batch of this magic (an unknown magic: the
/// current header's).
pub(super) fn header_bytes_of(magic: u8) -> usize {
    if magic == MAGIC_V1 {
        BATCH_HEADER_BYTES_V1
    } else {
        BATCH_HEADER_BYTES
    }
}

/// Decodes one record at the start of `buf`, returning it and its length.
///
/// `buf` may extend past the record; a record that runs past the end of `buf`
/// is [`DecodeError::Truncated`].
pub fn decode_record(
    buf: &[u8],
    offset: u64,
    base_timestamp: i64,
    record_bytes_max: u32,
) -> Result<(Record<'_>, usize), DecodeError> {
    let mut cursor = Cursor::new(buf);
    let length = cursor.varint_u32("record length")?;
    let prefix = cursor.pos;
    let total = prefix as u64 + u64::from(length);
    if total > u64::from(record_bytes_max) {
        return Err(DecodeError::TooLarge {
            what: "record",
            size_bytes: total,
            limit_bytes: u64::from(record_bytes_max),
        });
    }
    if (length as usize) < RECORD_BYTES_MIN - 1 {
        return Err(DecodeError::Malformed("record: length too small"));
    }
    let total = total as usize;
    if buf.len() < total {
        return Err(truncated("record", total, buf.len()));
    }
    let stored = u32_at(buf, prefix);
    let body = &buf[prefix + 4..total];
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(DecodeError::CrcMismatch {
            what: "record",
            stored,
            computed,
        });
    }
    let record = decode_body(body, offset, base_timestamp, total as u32)?;
    Ok((record, total))
}

fn decode_body(
    body: &[u8],
    offset: u64,
    base_timestamp: i64,
    encoded_bytes: u32,
) -> Result<Record<'_>, DecodeError> {
    let mut cursor = Cursor::new(body);
    let attributes = cursor.u8("record attributes")?;
    if attributes & !ATTR_KNOWN != 0 {
        return Err(DecodeError::Malformed("record: unknown attributes"));
    }
    let delta = unzigzag(cursor.varint_u64("timestamp delta")?);
    let timestamp = base_timestamp
        .checked_add(delta)
        .ok_or(DecodeError::Malformed("record: timestamp overflows"))?;
    let key = if attributes & ATTR_KEY != 0 {
        Some(cursor.bytes_prefixed("key")?)
    } else {
        None
    };
    let (headers, header_count) = if attributes & ATTR_HEADERS != 0 {
        let count = cursor.varint_u32("header count")?;
        if count > HEADERS_PER_RECORD_MAX {
            return Err(DecodeError::Malformed("record: too many headers"));
        }
        let start = cursor.pos;
        for _ in 0..count {
            cursor.bytes_prefixed("header name")?;
            cursor.bytes_prefixed("header value")?;
        }
        (&body[start..cursor.pos], count)
    } else {
        (&body[..0], 0)
    };
    Ok(Record {
        offset,
        timestamp,
        key,
        value: &body[cursor.pos..],
        null_value: false,
        headers,
        header_count,
        format: Format::Legacy,
        encoded_bytes,
    })
}

/// Rewrites a batch's base offset (and its header CRC) in place, of either
/// magic, keeping its leader epoch.
pub fn set_base_offset(batch: &mut [u8], base_offset: u64) {
    assert!(
        batch.len() >= header_bytes_of(batch[MAGIC_OFFSET]),
        "set_base_offset on a short batch"
    );
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_le_bytes());
    seal_header(batch);
}

/// Rewrites a magic 2 batch's base offset and leader epoch (and its header
/// CRC) in place: how the log assigns offsets to a producer's batch and
/// records which leader appended it, without touching its records.
///
/// # Panics
///
/// On a batch that is not magic 2 (upgrade it first) or is shorter than
/// its header: callers decode it first.
pub fn stamp(batch: &mut [u8], base_offset: u64, leader_epoch: u32) {
    assert!(
        batch.len() >= BATCH_HEADER_BYTES && batch[MAGIC_OFFSET] == MAGIC,
        "stamp on a batch that is not a whole magic {MAGIC} header"
    );
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_le_bytes());
    put_u32(batch, LEADER_EPOCH_OFFSET, leader_epoch);
    seal_header(batch);
}

/// Rewrites a batch header's record count, length and maximum timestamp, as
/// recovery does when it keeps only the first records of a torn batch.
pub fn set_batch_extent(
    batch: &mut [u8],
    record_count: u32,
    records_bytes: u32,
    max_timestamp: i64,
) {
    assert!(record_count > 0, "a batch keeps at least one record");
    let header_bytes = header_bytes_of(batch[MAGIC_OFFSET]);
    let batch_length = (header_bytes - BATCH_LENGTH_PREFIX_BYTES) as u32 + records_bytes;
    put_u32(batch, BATCH_LENGTH_OFFSET, batch_length);
    put_u32(batch, RECORD_COUNT_OFFSET, record_count);
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&max_timestamp.to_le_bytes());
    seal_header(batch);
}

/// Writes the header CRC where the batch's magic puts it.
pub(super) fn seal_header(batch: &mut [u8]) {
    let crc_at = header_bytes_of(batch[MAGIC_OFFSET]) - 4;
    let crc = crc32fast::hash(&batch[..crc_at]);
    put_u32(batch, crc_at, crc);
}

pub(super) fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn u16_at(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(buf[at..at + 2].try_into().expect("2 bytes"))
}

pub(crate) fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

pub(crate) fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests;
