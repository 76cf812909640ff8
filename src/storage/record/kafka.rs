//! Kafka's RecordBatch v2: the header and record decoders of
//! [`Format::Kafka`] and the log's [`stamp`] (the byte tables are in
//! [`crate::storage::record`]).

use super::cursor::Cursor;
use super::{
    BatchHeader, Codec, DecodeError, Format, Record, ATTR_CONTROL, ATTR_DELETE_HORIZON,
    ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL, BATCH_HEADER_BYTES, BATCH_LENGTH_PREFIX_BYTES, MAGIC,
    RECORD_BYTES_MIN,
};
use crate::limits::{BATCH_BYTES_MAX, BATCH_RECORDS_MAX, HEADERS_PER_RECORD_MAX};

pub(super) const BASE_OFFSET_OFFSET: usize = 0;
pub(super) const BATCH_LENGTH_OFFSET: usize = 8;
pub(super) const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub(super) const MAGIC_OFFSET: usize = 16;
pub(super) const CRC_OFFSET: usize = 17;
pub(super) const ATTRIBUTES_OFFSET: usize = 21;
pub(super) const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub(super) const BASE_TIMESTAMP_OFFSET: usize = 27;
pub(super) const MAX_TIMESTAMP_OFFSET: usize = 35;
pub(super) const PRODUCER_ID_OFFSET: usize = 43;
pub(super) const PRODUCER_EPOCH_OFFSET: usize = 51;
pub(super) const BASE_SEQUENCE_OFFSET: usize = 53;
pub(super) const RECORD_COUNT_OFFSET: usize = 57;

const _: () = assert!(RECORD_COUNT_OFFSET + 4 == BATCH_HEADER_BYTES);
const _: () = assert!(BATCH_LENGTH_OFFSET + 4 == BATCH_LENGTH_PREFIX_BYTES);

/// The attribute bits Kafka defines: the codec's three, then timestamp
/// type, transactional, control and delete horizon.
const ATTR_KNOWN: u16 = 0x7f;
const _: () = assert!(
    ATTR_KNOWN
        == 0x07 | ATTR_LOG_APPEND_TIME | ATTR_TRANSACTIONAL | ATTR_CONTROL | ATTR_DELETE_HORIZON
);

/// Smallest Kafka header: a one-byte key length and a one-byte value length.
const HEADER_BYTES_MIN: usize = 2;

pub(super) fn i16_at(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

pub(super) fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

pub(super) fn i64_at(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes and checks the header at the start of `buf` (not its CRC32C,
/// which covers the records).
pub(super) fn decode_header(buf: &[u8], batch_bytes_max: u32) -> Result<BatchHeader, DecodeError> {
    if buf.len() < BATCH_HEADER_BYTES {
        return Err(DecodeError::Truncated {
            what: "batch header",
            needed_bytes: BATCH_HEADER_BYTES as u64,
            available_bytes: buf.len() as u64,
        });
    }
    let magic = buf[MAGIC_OFFSET];
    let (attributes, batch_length, record_count, last_offset_delta) = check_framing(buf)?;
    let header = BatchHeader {
        format: Format::Kafka,
        base_offset: i64_at(buf, BASE_OFFSET_OFFSET) as u64,
        batch_length: batch_length as u32,
        magic,
        attributes,
        last_offset_delta: last_offset_delta as u32,
        record_count,
        base_timestamp: i64_at(buf, BASE_TIMESTAMP_OFFSET),
        max_timestamp: i64_at(buf, MAX_TIMESTAMP_OFFSET),
        leader_epoch: i32_at(buf, PARTITION_LEADER_EPOCH_OFFSET) as u32,
        crc: i32_at(buf, CRC_OFFSET) as u32,
        producer_id: i64_at(buf, PRODUCER_ID_OFFSET),
        producer_epoch: i16_at(buf, PRODUCER_EPOCH_OFFSET),
        base_sequence: i32_at(buf, BASE_SEQUENCE_OFFSET),
    };
    let limit = batch_bytes_max.min(BATCH_BYTES_MAX);
    if header.total_bytes() > u64::from(limit) {
        return Err(DecodeError::TooLarge {
            what: "batch",
            size_bytes: header.total_bytes(),
            limit_bytes: u64::from(limit),
        });
    }
    if header
        .base_offset
        .checked_add(u64::from(header.last_offset_delta))
        .is_none_or(|last| last >= i64::MAX as u64)
    {
        return Err(DecodeError::Malformed("batch: offsets overflow"));
    }
    Ok(header)
}

/// The framing fields of the header at the start of `buf` (which holds
/// all of it), checked against each other: attributes, batch length,
/// record count and last offset delta.
fn check_framing(buf: &[u8]) -> Result<(u16, i32, u32, i32), DecodeError> {
    let magic = buf[MAGIC_OFFSET];
    match magic {
        MAGIC => {}
        0 | 1 => {
            return Err(DecodeError::Unsupported {
                what: "magic",
                value: i64::from(magic),
            })
        }
        _ => return Err(DecodeError::Malformed("batch: unknown magic")),
    }
    let attributes = i16_at(buf, ATTRIBUTES_OFFSET) as u16;
    Codec::from_bits(attributes)?;
    if attributes & !ATTR_KNOWN != 0 {
        return Err(DecodeError::Malformed("batch: unknown attributes"));
    }
    let batch_length = i32_at(buf, BATCH_LENGTH_OFFSET);
    let header_length = (BATCH_HEADER_BYTES - BATCH_LENGTH_PREFIX_BYTES) as i32;
    if batch_length < header_length {
        return Err(DecodeError::Malformed(
            "batch: length too small for its header",
        ));
    }
    let record_count = i32_at(buf, RECORD_COUNT_OFFSET);
    if record_count <= 0 {
        return Err(DecodeError::Malformed("batch: record count out of range"));
    }
    let record_count = record_count as u32;
    // Uncompressed records take at least RECORD_BYTES_MIN each; compressed
    // ones at least a byte in all.
    let records_bytes = (batch_length - header_length) as u64;
    let records_min = if attributes & 0x07 == 0 {
        u64::from(record_count) * RECORD_BYTES_MIN as u64
    } else {
        1
    };
    if records_bytes < records_min {
        return Err(DecodeError::Malformed(
            "batch: record count out of range for its bytes",
        ));
    }
    if record_count > BATCH_RECORDS_MAX {
        return Err(DecodeError::Malformed(
            "batch: more records than klog's batch limit",
        ));
    }
    let last_offset_delta = i32_at(buf, LAST_OFFSET_DELTA_OFFSET);
    if last_offset_delta < 0 || (last_offset_delta as u32) < record_count - 1 {
        return Err(DecodeError::Malformed(
            "batch: last offset delta below its record count",
        ));
    }
    Ok((attributes, batch_length, record_count, last_offset_delta))
}

/// Checks the CRC32C of a whole batch (`bytes` is exactly the batch).
pub(super) fn check_crc(bytes: &[u8], header: &BatchHeader) -> Result<(), DecodeError> {
    let computed = crc32c::crc32c(&bytes[ATTRIBUTES_OFFSET..]);
    if computed != header.crc {
        return Err(DecodeError::CrcMismatch {
            what: "batch",
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// Decodes the record at the start of `buf` (the rest of a batch's
/// records), whose offset delta must be at least `delta_min`. Returns it,
/// its length and its offset delta.
pub(super) fn decode_record<'a>(
    buf: &'a [u8],
    header: &BatchHeader,
    delta_min: u32,
    record_bytes_max: u32,
) -> Result<(Record<'a>, usize, u32), DecodeError> {
    let mut cursor = Cursor::new(buf);
    let length = cursor.zigzag_i32("record length")?;
    if length < (RECORD_BYTES_MIN - 1) as i32 {
        return Err(DecodeError::Malformed("record: length too small"));
    }
    let total = cursor.pos as u64 + length as u64;
    if total > u64::from(record_bytes_max) {
        return Err(DecodeError::TooLarge {
            what: "record",
            size_bytes: total,
            limit_bytes: u64::from(record_bytes_max),
        });
    }
    let mut body = Cursor::new(cursor.take(length as usize, "record: runs past its batch")?);
    body.u8("record attributes")?;
    let timestamp = header
        .base_timestamp
        .checked_add(body.zigzag_i64("record timestamp delta")?)
        .ok_or(DecodeError::Malformed("record: timestamp overflows"))?;
    let delta = body.zigzag_i32("record offset delta")?;
    if delta < 0 || (delta as u32) < delta_min || delta as u32 > header.last_offset_delta {
        return Err(DecodeError::Malformed("record: offset delta out of order"));
    }
    let key = body.nullable_bytes("record key")?;
    let value = body.nullable_bytes("record value")?;
    let (value, null_value) = (value.unwrap_or(&[]), value.is_none());
    let header_count = body.zigzag_i32("record header count")?;
    if header_count < 0
        || header_count as u32 > HEADERS_PER_RECORD_MAX
        || header_count as usize > body.left() / HEADER_BYTES_MIN
    {
        return Err(DecodeError::Malformed("record: header count out of range"));
    }
    let headers_at = body.pos;
    for _ in 0..header_count {
        if body.nullable_bytes("record header key")?.is_none() {
            return Err(DecodeError::Malformed("record: a null header key"));
        }
        body.nullable_bytes("record header value")?;
    }
    if body.left() != 0 {
        return Err(DecodeError::Malformed("record: bytes after its headers"));
    }
    let record = Record {
        offset: header.base_offset + u64::from(delta as u32),
        timestamp,
        key,
        value,
        null_value,
        headers: &body.buf[headers_at..],
        header_count: header_count as u32,
        format: Format::Kafka,
        encoded_bytes: total as u32,
    };
    Ok((record, total as usize, delta as u32))
}

/// Writes a Kafka batch's base offset and partition leader epoch in place:
/// how the log assigns offsets to a producer's batch and records which
/// leader appended it. Neither is covered by the CRC32C, so nothing else
/// changes.
///
/// # Panics
///
/// On a batch shorter than its header: callers decode it first.
pub fn stamp(batch: &mut [u8], base_offset: u64, leader_epoch: u32) {
    assert!(
        batch.len() >= BATCH_HEADER_BYTES && batch[MAGIC_OFFSET] == MAGIC,
        "stamp on a batch that is not a whole RecordBatch v2 header"
    );
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&leader_epoch.to_be_bytes());
}

/// Writes a Kafka batch's producer id, producer epoch and base sequence in
/// place, and its CRC32C again (it covers them): how an idempotent
/// producer numbers a batch it built ([`crate::storage::producers`]).
///
/// # Panics
///
/// As [`stamp`].
pub fn set_producer(batch: &mut [u8], producer_id: i64, epoch: i16, base_sequence: i32) {
    assert!(
        batch.len() >= BATCH_HEADER_BYTES && batch[MAGIC_OFFSET] == MAGIC,
        "set_producer on a batch that is not a whole RecordBatch v2 header"
    );
    batch[PRODUCER_ID_OFFSET..PRODUCER_ID_OFFSET + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[PRODUCER_EPOCH_OFFSET..PRODUCER_EPOCH_OFFSET + 2].copy_from_slice(&epoch.to_be_bytes());
    batch[BASE_SEQUENCE_OFFSET..BASE_SEQUENCE_OFFSET + 4]
        .copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Marks a Kafka batch as a transaction's (its attribute bit) and writes
/// its CRC32C again: how a transactional producer sends a batch it built.
///
/// # Panics
///
/// As [`set_producer`].
pub fn set_transactional(batch: &mut [u8]) {
    assert!(
        batch.len() >= BATCH_HEADER_BYTES && batch[MAGIC_OFFSET] == MAGIC,
        "set_transactional on a batch that is not a whole RecordBatch v2 header"
    );
    let attributes = u16::from_be_bytes([batch[ATTRIBUTES_OFFSET], batch[ATTRIBUTES_OFFSET + 1]]);
    let attributes = attributes | ATTR_TRANSACTIONAL;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Whether `records`, the records section of a batch cut short, is whole
/// records that stop inside one, or between two before the last: what a
/// writer cut short leaves. All of the batch's records whole, bytes that
/// read as no record, or a record out of order: not.
pub(super) fn records_run_to_the_end(records: &[u8], header: &BatchHeader) -> bool {
    let mut walk = RecordsWalk::default();
    walk.walk(records, header);
    walk.waiting(header)
}

/// A walk over a batch's records as their bytes grow (decompressed a
/// frame or block at a time): it goes on from where it stopped.
#[derive(Default)]
pub(super) struct RecordsWalk {
    /// Records whole so far, and where the next begins.
    seen: u32,
    at: usize,
    delta_min: u32,
    /// A record that reads as none: no more bytes can make these records.
    broken: bool,
}

impl RecordsWalk {
    /// Walks on over `records` (what it walked before, grown), and returns
    /// whether they are exactly the batch's records, whole, with no byte
    /// after the last.
    pub(super) fn walk(&mut self, records: &[u8], header: &BatchHeader) -> bool {
        while !self.broken && self.seen < header.record_count {
            let rest = &records[self.at..];
            let mut cursor = Cursor::new(rest);
            let length = match cursor.zigzag_i32("record length") {
                Ok(length) => length,
                Err(e) => {
                    self.broken = !e.is_truncated();
                    break;
                }
            };
            if length >= (RECORD_BYTES_MIN - 1) as i32 && cursor.pos + length as usize > rest.len()
            {
                break;
            }
            match decode_record(rest, header, self.delta_min, u32::MAX) {
                Ok((_, used, delta)) => {
                    self.at += used;
                    self.seen += 1;
                    self.delta_min = delta.saturating_add(1);
                }
                Err(_) => self.broken = true,
            }
        }
        !self.broken && self.seen == header.record_count && self.at == records.len()
    }

    /// Whether all the batch's records are whole, whatever follows them.
    pub(super) fn all_whole(&self, header: &BatchHeader) -> bool {
        !self.broken && self.seen == header.record_count
    }

    /// Whether the walk stopped for want of bytes: records whole so far,
    /// fewer than the batch's.
    pub(super) fn waiting(&self, header: &BatchHeader) -> bool {
        !self.broken && self.seen < header.record_count
    }
}

/// Whether the batch at the start of `bytes`, whose length claims more
/// than `bytes` holds, really ends earlier: its stored CRC32C is that of
/// its bytes from its attributes to an end where the next batch's header
/// begins (one that decodes, at the offset this batch ends at). A batch a
/// writer cut short has no such end (its CRC32C covers bytes that are not
/// there); one whose length field was damaged has. A match at the bare end
/// of `bytes` proves nothing: a producer can make its records hold runs on
/// which the CRC32C stays put, and a torn write inside one would look
/// whole. A CRC is computed at each candidate end, one byte further each
/// time: a scan of the bytes, once.
pub(super) fn ends_before(bytes: &[u8], header: &BatchHeader) -> bool {
    let Some(attributes_on) = bytes.get(ATTRIBUTES_OFFSET..BATCH_HEADER_BYTES) else {
        return false;
    };
    let mut crc = crc32c::crc32c(attributes_on);
    for end in BATCH_HEADER_BYTES..bytes.len() {
        if crc == header.crc && next_batch_at(&bytes[end..], header.next_offset()) {
            return true;
        }
        crc = crc32c::crc32c_append(crc, &bytes[end..end + 1]);
    }
    false
}

/// Whether `bytes` start with the header of the batch that follows one
/// ending before `offset`: a whole header that decodes, starting there.
fn next_batch_at(bytes: &[u8], offset: u64) -> bool {
    decode_header(bytes, BATCH_BYTES_MAX).is_ok_and(|h| h.base_offset == offset)
}

/// Writes a Kafka batch's `maxTimestamp` and clears its LogAppendTime bit
/// (CreateTime: each record's own timestamp), then its CRC32C, when either
/// differs from what it says: how the log keeps a batch's time the
/// largest of its records' (as Kafka's broker does). Returns whether it
/// changed anything.
///
/// # Panics
///
/// On a batch shorter than its header: callers decode it first.
pub fn set_create_time(batch: &mut [u8], max_timestamp: i64) -> bool {
    set_create_time_crc(batch, max_timestamp).is_some()
}

/// [`set_create_time`], returning the batch's new CRC32C when it changed
/// anything.
///
/// # Panics
///
/// As [`set_create_time`].
pub fn set_create_time_crc(batch: &mut [u8], max_timestamp: i64) -> Option<u32> {
    assert!(batch.len() >= BATCH_HEADER_BYTES, "a whole header");
    let attributes = i16_at(batch, ATTRIBUTES_OFFSET) as u16;
    let stored = i64_at(batch, MAX_TIMESTAMP_OFFSET);
    if stored == max_timestamp && attributes & ATTR_LOG_APPEND_TIME == 0 {
        return None;
    }
    let create_time = (attributes & !ATTR_LOG_APPEND_TIME) as i16;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&create_time.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Some(crc)
}
