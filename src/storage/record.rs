//! Records and batches (the paper's message sets): the bytes a producer sends,
//! a segment stores and a consumer receives, unchanged from end to end.
//!
//! This module is sans-I/O: it encodes into and decodes from byte slices and
//! never touches a file or a socket.
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
//! recovering as they were. A producer may still send magic 1; the log
//! stores every batch it appends as magic 2, so it upgrades such a batch
//! on append ([`upgrade`]: a new 44-byte header before the same record
//! bytes). Every other magic is a decode error.
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
//! `tests/golden/batch.bin` pins this layout and `tests/golden/v1/batch.bin`
//! magic 1 (`tests/golden.rs`); a diff there is a format change and needs
//! a new magic.

pub use crate::error::DecodeError;
use std::fmt;

mod build;

#[cfg(test)]
use build::zigzag;
pub use build::BatchBuilder;

use crate::limits::{BATCH_BYTES_MAX, BATCH_RECORDS_MAX, HEADERS_PER_RECORD_MAX};

/// Size of the batch header (of the current magic, the largest: a reader
/// that reads this many bytes at a batch's start has its whole header).
pub const BATCH_HEADER_BYTES: usize = HEADER_CRC_OFFSET + 4;
/// Size of a magic 1 batch header.
pub const BATCH_HEADER_BYTES_V1: usize = HEADER_CRC_OFFSET_V1 + 4;
/// Bytes of a batch before `batch_length` starts counting.
pub const BATCH_LENGTH_PREFIX_BYTES: usize = BATCH_LENGTH_OFFSET + 4;
/// The current batch format version.
pub const MAGIC: u8 = 2;
/// The first batch format version, without a leader epoch.
pub const MAGIC_V1: u8 = 1;

const BASE_OFFSET_OFFSET: usize = 0;
const BATCH_LENGTH_OFFSET: usize = BASE_OFFSET_OFFSET + 8;
const MAGIC_OFFSET: usize = BATCH_LENGTH_OFFSET + 4;
const ATTRIBUTES_OFFSET: usize = MAGIC_OFFSET + 1;
const RESERVED_OFFSET: usize = ATTRIBUTES_OFFSET + 1;
const RECORD_COUNT_OFFSET: usize = RESERVED_OFFSET + 2;
const BASE_TIMESTAMP_OFFSET: usize = RECORD_COUNT_OFFSET + 4;
const MAX_TIMESTAMP_OFFSET: usize = BASE_TIMESTAMP_OFFSET + 8;
const HEADER_CRC_OFFSET_V1: usize = MAX_TIMESTAMP_OFFSET + 8;
const LEADER_EPOCH_OFFSET: usize = MAX_TIMESTAMP_OFFSET + 8;
const HEADER_CRC_OFFSET: usize = LEADER_EPOCH_OFFSET + 4;

const _: () = assert!(BATCH_HEADER_BYTES == 44);
const _: () = assert!(BATCH_HEADER_BYTES_V1 == 40);
// Every batch of either magic holds at least one record, so reading
// BATCH_HEADER_BYTES at a batch's start never reads past its end.
const _: () = assert!(BATCH_HEADER_BYTES <= BATCH_HEADER_BYTES_V1 + RECORD_BYTES_MIN);

const ATTR_KEY: u8 = 0x01;
const ATTR_HEADERS: u8 = 0x02;
const ATTR_KNOWN: u8 = ATTR_KEY | ATTR_HEADERS;

/// Smallest record: a one-byte length, the CRC, attributes, a one-byte delta.
pub const RECORD_BYTES_MIN: usize = 1 + 4 + 1 + 1;

fn truncated(what: &'static str, needed: usize, available: usize) -> DecodeError {
    DecodeError::Truncated {
        what,
        needed_bytes: needed as u64,
        available_bytes: available as u64,
    }
}

/// The decoded fixed header of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Bytes after the `batch_length` field.
    pub batch_length: u32,
    /// Format version.
    pub magic: u8,
    /// Reserved attributes.
    pub attributes: u8,
    /// Number of records.
    pub record_count: u32,
    /// Timestamp the record deltas are relative to.
    pub base_timestamp: i64,
    /// Largest record timestamp.
    pub max_timestamp: i64,
    /// Epoch of the leader that appended the batch (0 for magic 1).
    pub leader_epoch: u32,
    /// CRC32 of the header's bytes before it.
    pub header_crc: u32,
}

impl BatchHeader {
    /// Size of the header, by magic: where the records start.
    pub fn header_bytes(&self) -> usize {
        header_bytes_of(self.magic)
    }

    /// Total size of the batch in bytes, header included.
    pub fn total_bytes(&self) -> u64 {
        BATCH_LENGTH_PREFIX_BYTES as u64 + u64::from(self.batch_length)
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> u64 {
        self.base_offset + u64::from(self.record_count) - 1
    }

    /// One past the last record's offset.
    pub fn next_offset(&self) -> u64 {
        self.base_offset + u64::from(self.record_count)
    }

    /// Decodes and checks a batch header at the start of `buf`.
    ///
    /// Checks the header CRC, the magic, the record count and that the batch
    /// length is at most `batch_bytes_max`; it does not need the records.
    pub fn decode(buf: &[u8], batch_bytes_max: u32) -> Result<BatchHeader, DecodeError> {
        // The magic says how long the header is; an unknown one reads as the
        // current header, so that its CRC judges the bytes first (a torn or
        // damaged header is reported as such, not as a new format).
        let magic = buf.get(MAGIC_OFFSET).copied().unwrap_or(MAGIC);
        let header_bytes = header_bytes_of(magic);
        if buf.len() < header_bytes {
            return Err(truncated("batch header", header_bytes, buf.len()));
        }
        let crc_at = header_bytes - 4;
        let header = BatchHeader {
            base_offset: u64_at(buf, BASE_OFFSET_OFFSET),
            batch_length: u32_at(buf, BATCH_LENGTH_OFFSET),
            magic,
            attributes: buf[ATTRIBUTES_OFFSET],
            record_count: u32_at(buf, RECORD_COUNT_OFFSET),
            base_timestamp: u64_at(buf, BASE_TIMESTAMP_OFFSET) as i64,
            max_timestamp: u64_at(buf, MAX_TIMESTAMP_OFFSET) as i64,
            leader_epoch: if magic == MAGIC_V1 {
                0
            } else {
                u32_at(buf, LEADER_EPOCH_OFFSET)
            },
            header_crc: u32_at(buf, crc_at),
        };
        let computed = crc32fast::hash(&buf[..crc_at]);
        if computed != header.header_crc {
            return Err(DecodeError::CrcMismatch {
                what: "batch header",
                stored: header.header_crc,
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
}

/// Size of the header of a batch of this magic (an unknown magic: the
/// current header's).
fn header_bytes_of(magic: u8) -> usize {
    if magic == MAGIC_V1 {
        BATCH_HEADER_BYTES_V1
    } else {
        BATCH_HEADER_BYTES
    }
}

/// One record, borrowed from the batch bytes it was decoded from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's offset in its partition.
    pub offset: u64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    /// The key, if the record has one.
    pub key: Option<&'a [u8]>,
    /// The value (payload).
    pub value: &'a [u8],
    headers: &'a [u8],
    header_count: u32,
    /// Bytes of the whole encoded record, length prefix included.
    pub encoded_bytes: u32,
}

impl fmt::Debug for Record<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("offset", &self.offset)
            .field("timestamp", &self.timestamp)
            .field("key", &self.key.map(String::from_utf8_lossy))
            .field("value", &String::from_utf8_lossy(self.value))
            .field("headers", &self.headers().collect::<Vec<_>>())
            .finish()
    }
}

impl<'a> Record<'a> {
    /// Number of headers.
    pub fn header_count(&self) -> u32 {
        self.header_count
    }

    /// The headers, in order, as (name, value) pairs.
    pub fn headers(&self) -> Headers<'a> {
        Headers {
            buf: self.headers,
            left: self.header_count,
        }
    }
}

/// Iterator over a record's headers (already validated when decoded).
#[derive(Debug, Clone)]
pub struct Headers<'a> {
    buf: &'a [u8],
    left: u32,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut cursor = Cursor::new(self.buf);
        let name = cursor.bytes_prefixed("header name").ok()?;
        let value = cursor.bytes_prefixed("header value").ok()?;
        self.buf = &self.buf[cursor.pos..];
        Some((name, value))
    }
}

/// A decoded batch: its header and an iterator over its records.
#[derive(Debug, Clone)]
pub struct Batch<'a> {
    /// The batch header.
    pub header: BatchHeader,
    records: &'a [u8],
}

impl<'a> Batch<'a> {
    /// Decodes the batch at the start of `buf`, which must hold all of it.
    ///
    /// Only the header is checked here; the records are checked, CRC
    /// included, as [`Batch::records`] yields them.
    pub fn decode(buf: &'a [u8], batch_bytes_max: u32) -> Result<Batch<'a>, DecodeError> {
        let header = BatchHeader::decode(buf, batch_bytes_max)?;
        let total = header.total_bytes() as usize;
        if buf.len() < total {
            return Err(truncated("batch", total, buf.len()));
        }
        Ok(Batch {
            header,
            records: &buf[header.header_bytes()..total],
        })
    }

    /// Bytes of the whole batch.
    pub fn total_bytes(&self) -> usize {
        self.header.total_bytes() as usize
    }

    /// The records, each checked (length, CRC, fields) as it is reached.
    /// After an error the iterator ends.
    pub fn records(&self, record_bytes_max: u32) -> Records<'a> {
        Records {
            header: self.header,
            buf: self.records,
            pos: 0,
            index: 0,
            record_bytes_max,
            failed: false,
        }
    }

    /// Checks every record and the header's claims about them (count, bytes,
    /// maximum timestamp). Returns the first error.
    pub fn validate(&self, record_bytes_max: u32) -> Result<(), DecodeError> {
        let mut max_timestamp = i64::MIN;
        for record in self.records(record_bytes_max) {
            max_timestamp = max_timestamp.max(record?.timestamp);
        }
        if max_timestamp != self.header.max_timestamp {
            return Err(DecodeError::Malformed(
                "batch: max timestamp differs from its records",
            ));
        }
        Ok(())
    }
}

/// Iterator over the records of a batch.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    header: BatchHeader,
    buf: &'a [u8],
    pos: usize,
    index: u32,
    record_bytes_max: u32,
    failed: bool,
}

impl<'a> Records<'a> {
    /// Position, within the batch, of the next record to decode.
    pub fn position_in_batch(&self) -> usize {
        self.header.header_bytes() + self.pos
    }

    fn step(&mut self) -> Result<Record<'a>, DecodeError> {
        let offset = self.header.base_offset + u64::from(self.index);
        let (record, used) = decode_record(
            &self.buf[self.pos..],
            offset,
            self.header.base_timestamp,
            self.record_bytes_max,
        )?;
        self.pos += used;
        self.index += 1;
        let last = self.index == self.header.record_count;
        if last != (self.pos == self.buf.len()) {
            return Err(DecodeError::Malformed(
                "batch: record count differs from its bytes",
            ));
        }
        Ok(record)
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.index == self.header.record_count {
            return None;
        }
        let item = self.step();
        self.failed = item.is_err();
        Some(item)
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
        headers,
        header_count,
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

/// Writes into `out` (replacing its contents) the magic 2 form of a decoded
/// magic 1 batch: a 44-byte header with leader epoch 0 and the same
/// fields, then the same record bytes. Returns its decoded header, or an
/// error when the larger batch would exceed [`BATCH_BYTES_MAX`].
///
/// # Panics
///
/// When `batch` is not a whole magic 1 batch (decode it first).
pub fn upgrade(batch: &[u8], out: &mut Vec<u8>) -> Result<BatchHeader, DecodeError> {
    assert!(
        batch.len() > BATCH_HEADER_BYTES_V1 && batch[MAGIC_OFFSET] == MAGIC_V1,
        "upgrade of a batch that is not magic {MAGIC_V1}"
    );
    let total = batch.len() + (BATCH_HEADER_BYTES - BATCH_HEADER_BYTES_V1);
    if total as u64 > u64::from(BATCH_BYTES_MAX) {
        return Err(DecodeError::TooLarge {
            what: "batch upgraded to magic 2",
            size_bytes: total as u64,
            limit_bytes: u64::from(BATCH_BYTES_MAX),
        });
    }
    out.clear();
    out.extend_from_slice(&batch[..LEADER_EPOCH_OFFSET]);
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&batch[BATCH_HEADER_BYTES_V1..]);
    let batch_length = (total - BATCH_LENGTH_PREFIX_BYTES) as u32;
    put_u32(out, BATCH_LENGTH_OFFSET, batch_length);
    out[MAGIC_OFFSET] = MAGIC;
    seal_header(out);
    BatchHeader::decode(out, BATCH_BYTES_MAX)
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

/// The length of the longest prefix of `bytes` made of whole batches, by
/// their length fields alone (no CRC or other check): where a fetch
/// response cut short by its byte budget stops being whole batches.
pub fn whole_batches_len(bytes: &[u8]) -> usize {
    let mut end = 0;
    while let Some(prefix) = bytes.get(end..end + BATCH_LENGTH_PREFIX_BYTES) {
        let batch_length = u64::from(u32_at(prefix, BATCH_LENGTH_OFFSET));
        let total = BATCH_LENGTH_PREFIX_BYTES as u64 + batch_length;
        if total > (bytes.len() - end) as u64 {
            break;
        }
        end += total as usize;
    }
    end
}

/// Writes the header CRC where the batch's magic puts it.
fn seal_header(batch: &mut [u8]) {
    let crc_at = header_bytes_of(batch[MAGIC_OFFSET]) - 4;
    let crc = crc32fast::hash(&batch[..crc_at]);
    put_u32(batch, crc_at, crc);
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Bytes the LEB128 encoding of `v` takes.
pub fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
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

/// A bounds-checked reader over a byte slice.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf, pos: 0 }
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| truncated(what, 1, 0))?;
        self.pos += 1;
        Ok(b)
    }

    fn varint_u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
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

    fn varint_u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let start = self.pos;
        let v = self.varint_u64(what)?;
        if self.pos - start > 5 || v > u64::from(u32::MAX) {
            return Err(DecodeError::Malformed("varint overflows 32 bits"));
        }
        Ok(v as u32)
    }

    fn bytes_prefixed(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let len = self.varint_u32(what)? as usize;
        let rest = self.buf.len() - self.pos;
        if len > rest {
            // Inside a CRC-checked body this is malformed, not torn.
            return Err(DecodeError::Malformed(what));
        }
        let bytes = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u32 = 1 << 20;

    type Rec<'a> = (i64, Option<&'a [u8]>, Vec<(&'a [u8], &'a [u8])>, &'a [u8]);

    fn build(records: &[Rec<'_>]) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for (ts, key, headers, value) in records {
            b.push(*ts, *key, headers, value);
        }
        b.finish().to_vec()
    }

    #[test]
    fn round_trip_keys_headers_and_negative_deltas() {
        let mut bytes = build(&[
            (1_000, None, vec![], b"a"),
            (999, Some(b"k"), vec![(b"h", b"v"), (b"", b"")], b""),
            (5_000_000, Some(b""), vec![], &[0u8; 300]),
        ]);
        set_base_offset(&mut bytes, 42);
        let batch = Batch::decode(&bytes, BATCH_BYTES_MAX).unwrap();
        assert_eq!(batch.header.base_offset, 42);
        assert_eq!(batch.header.record_count, 3);
        assert_eq!(batch.header.max_timestamp, 5_000_000);
        batch.validate(MAX).unwrap();
        let records: Vec<_> = batch.records(MAX).map(Result::unwrap).collect();
        assert_eq!(records[0].offset, 42);
        assert_eq!(records[0].key, None);
        assert_eq!(records[0].value, b"a");
        assert_eq!(records[1].timestamp, 999);
        assert_eq!(records[1].key, Some(&b"k"[..]));
        let headers: Vec<_> = records[1].headers().collect();
        assert_eq!(headers, vec![(&b"h"[..], &b"v"[..]), (&b""[..], &b""[..])]);
        assert_eq!(records[2].offset, 44);
        assert_eq!(records[2].key, Some(&b""[..]));
        assert_eq!(records[2].value.len(), 300);
        let sum: u32 = records.iter().map(|r| r.encoded_bytes).sum();
        assert_eq!(sum as usize + BATCH_HEADER_BYTES, bytes.len());
    }

    #[test]
    fn whole_batches_len_stops_before_a_batch_the_bytes_cut_short() {
        let one = build(&[(1, None, vec![], b"a"), (2, None, vec![], b"bb")]);
        let two = build(&[(3, Some(b"k"), vec![], b"ccc")]);
        let mut bytes = one.clone();
        bytes.extend_from_slice(&two);
        assert_eq!(whole_batches_len(&bytes), bytes.len());
        assert_eq!(whole_batches_len(&[]), 0);
        // Cut anywhere in the second batch (its length field included):
        // only the first is whole.
        for cut in one.len()..bytes.len() {
            assert_eq!(whole_batches_len(&bytes[..cut]), one.len(), "cut at {cut}");
        }
        for cut in 0..one.len() {
            assert_eq!(whole_batches_len(&bytes[..cut]), 0, "cut at {cut}");
        }
        // By the length fields only: a damaged record still counts.
        let mut damaged = bytes.clone();
        *damaged.last_mut().unwrap() ^= 0xff;
        assert_eq!(whole_batches_len(&damaged), bytes.len());
        // A length that claims more than there is ends the prefix; so does
        // one claiming the most a u32 can (no overflow).
        let mut huge = one.clone();
        huge.extend_from_slice(&[0; 8]);
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(whole_batches_len(&huge), one.len());
    }

    #[test]
    fn overhead_is_under_nine_bytes_for_200_byte_values_in_batches_of_50() {
        let value = [b'x'; 200];
        let mut b = BatchBuilder::new();
        for i in 0..50 {
            b.push(1_700_000_000_000 + i / 10, None, &[], &value);
        }
        let len = b.finish().len();
        let overhead = (len - 50 * 200) as f64 / 50.0;
        assert!(overhead <= 9.0, "overhead {overhead} bytes per record");
        assert_eq!(BatchBuilder::record_size(None, &[], &value), 208);
    }

    #[test]
    fn every_single_byte_flip_is_detected() {
        let bytes = build(&[
            (7, Some(b"key"), vec![(b"n", b"v")], b"value"),
            (8, None, vec![], b"x"),
        ]);
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[i] ^= 1 << bit;
                let ok = Batch::decode(&damaged, BATCH_BYTES_MAX)
                    .map_err(|_| ())
                    .and_then(|b| b.validate(MAX).map_err(|_| ()));
                assert!(ok.is_err(), "flip of bit {bit} in byte {i} went unnoticed");
            }
        }
    }

    #[test]
    fn every_cut_is_truncated_not_corrupt() {
        let bytes = build(&[(7, None, vec![], b"one"), (8, None, vec![], b"two")]);
        for cut in 0..bytes.len() {
            let err = Batch::decode(&bytes[..cut], BATCH_BYTES_MAX).unwrap_err();
            assert!(err.is_truncated(), "cut at {cut}: {err}");
        }
    }

    #[test]
    fn limits_are_checked_before_use() {
        let bytes = build(&[(7, None, vec![], &[1u8; 100])]);
        let err = Batch::decode(&bytes, 64).unwrap_err();
        assert!(matches!(err, DecodeError::TooLarge { what: "batch", .. }));
        let batch = Batch::decode(&bytes, BATCH_BYTES_MAX).unwrap();
        let err = batch.records(50).next().unwrap().unwrap_err();
        assert!(matches!(err, DecodeError::TooLarge { what: "record", .. }));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = crate::random::XorShift::new(0x9E37_79B9_7F4A_7C15);
        let mut next = || rng.next();
        let mut builder = BatchBuilder::new();
        for _ in 0..3 {
            builder.push(1, Some(b"k"), &[(b"a", b"b")], b"v");
        }
        let valid = builder.finish().to_vec();
        for round in 0..20_000 {
            let mut buf = if round % 2 == 0 {
                valid.clone()
            } else {
                vec![0u8; (next() % 200) as usize]
            };
            for _ in 0..(next() % 8 + 1) {
                if !buf.is_empty() {
                    let i = (next() as usize) % buf.len();
                    buf[i] = next() as u8;
                }
            }
            if round % 3 == 0 {
                // Give garbage a valid header CRC so that record decoding is reached.
                if buf.len() >= BATCH_HEADER_BYTES {
                    seal_header(&mut buf);
                }
            }
            if let Ok(batch) = Batch::decode(&buf, BATCH_BYTES_MAX) {
                for r in batch.records(MAX).flatten() {
                    let _ = r.headers().count();
                }
            }
            let _ = decode_record(&buf, 0, 0, MAX);
        }
    }

    /// The magic 1 form of a magic 2 batch: the header without its epoch.
    fn to_v1(batch: &[u8]) -> Vec<u8> {
        let mut v1 = batch[..LEADER_EPOCH_OFFSET].to_vec();
        v1.extend_from_slice(&[0; 4]);
        v1.extend_from_slice(&batch[BATCH_HEADER_BYTES..]);
        v1[MAGIC_OFFSET] = MAGIC_V1;
        let length = u32_at(&v1, BATCH_LENGTH_OFFSET) - 4;
        put_u32(&mut v1, BATCH_LENGTH_OFFSET, length);
        seal_header(&mut v1);
        v1
    }

    #[test]
    fn magic_1_reads_as_epoch_0_and_upgrades_to_magic_2_with_the_same_records() {
        let mut v2 = build(&[
            (7, Some(b"k"), vec![(b"h", b"v")], b"one"),
            (9, None, vec![], b"two"),
        ]);
        set_base_offset(&mut v2, 5);
        let mut v1 = to_v1(&v2);
        assert_eq!(v1.len() + 4, v2.len());
        let old = Batch::decode(&v1, BATCH_BYTES_MAX).unwrap();
        assert_eq!((old.header.magic, old.header.leader_epoch), (1, 0));
        assert_eq!(old.header.header_bytes(), 40);
        old.validate(MAX).unwrap();
        let old_records: Vec<_> = old.records(MAX).map(Result::unwrap).collect();
        let new = Batch::decode(&v2, BATCH_BYTES_MAX).unwrap();
        let new_records: Vec<_> = new.records(MAX).map(Result::unwrap).collect();
        assert_eq!(old_records, new_records);
        // Offsets are assigned to magic 1 in place too (recovery, tests).
        set_base_offset(&mut v1, 6);
        assert_eq!(
            BatchHeader::decode(&v1, BATCH_BYTES_MAX)
                .unwrap()
                .base_offset,
            6
        );
        set_base_offset(&mut v1, 5);
        let mut out = Vec::new();
        let header = upgrade(&v1, &mut out).unwrap();
        assert_eq!(out, v2, "an upgraded batch is the magic 2 batch");
        assert_eq!(
            (header.magic, header.leader_epoch, header.base_offset),
            (2, 0, 5)
        );
        stamp(&mut out, 9, 0x0102_0304);
        let stamped = Batch::decode(&out, BATCH_BYTES_MAX).unwrap();
        assert_eq!(stamped.header.leader_epoch, 0x0102_0304);
        assert_eq!(stamped.header.base_offset, 9);
        assert_eq!(&out[36..40], &[4, 3, 2, 1]);
        stamped.validate(MAX).unwrap();
    }

    #[test]
    fn a_magic_other_than_1_or_2_is_a_decode_error() {
        let v2 = build(&[(7, None, vec![], b"x")]);
        for magic in [0u8, 3, 0xff] {
            for base in [v2.clone(), to_v1(&v2)] {
                let mut bad = base;
                bad[MAGIC_OFFSET] = magic;
                let err = Batch::decode(&bad, BATCH_BYTES_MAX).unwrap_err();
                assert!(
                    matches!(err, DecodeError::CrcMismatch { .. }),
                    "{magic}: {err}"
                );
                if bad.len() >= BATCH_HEADER_BYTES {
                    seal_header(&mut bad);
                }
                let err = Batch::decode(&bad, BATCH_BYTES_MAX).unwrap_err();
                assert_eq!(
                    err,
                    DecodeError::Malformed("batch: unknown magic"),
                    "{magic}"
                );
            }
        }
    }

    #[test]
    fn varint_lengths() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v), "{v}");
            assert_eq!(Cursor::new(&buf).varint_u64("v").unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
