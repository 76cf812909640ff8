//! Kafka RecordBatch v2 to and from klog batches: what a Kafka client
//! produces becomes one klog batch per Kafka batch ([`to_klog`]), and what a
//! Kafka client fetches is made from klog batches ([`to_kafka`]).
//!
//! klog's own format stays on disk (per-record CRC32, the recovery tools);
//! the conversion happens at the edge, in the Kafka listener. One Kafka
//! batch is one klog batch with the same records in the same order, so the
//! offsets a Kafka producer is told and the offsets a klog consumer reads
//! line up.
//!
//! # Kafka RecordBatch v2 (magic 2)
//!
//! All integers are big-endian; "varint" and "varlong" are zigzag LEB128
//! (at most 5 and 10 bytes).
//!
//! | offset | size | field                  | on the way in ([`to_klog`])          | on the way out ([`to_kafka`]) |
//! |-------:|-----:|------------------------|--------------------------------------|-------------------------------|
//! |      0 |    8 | `baseOffset` i64       | ignored (the log assigns offsets)    | klog `base_offset`            |
//! |      8 |    4 | `batchLength` i32      | bytes after this field, checked      | computed                      |
//! |     12 |    4 | `partitionLeaderEpoch` | ignored                              | klog `leader_epoch`           |
//! |     16 |    1 | `magic` i8             | 2; 0 and 1 refused (43)              | 2                             |
//! |     17 |    4 | `crc` u32              | CRC32C of bytes 21..end, checked (2); [`batch_producers`] reads it | computed                      |
//! |     21 |    2 | `attributes` i16       | bits 0-2 compression: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (the records section decompressed, see below), 5-7 refused (76); bit 4 transactional, bit 5 control (87); bit 3 timestamp type ignored | 0: no compression, CreateTime |
//! |     23 |    4 | `lastOffsetDelta` i32  | must be `recordCount - 1` (87)       | `recordCount - 1`             |
//! |     27 |    8 | `baseTimestamp` i64    | klog `base_timestamp`                | klog `base_timestamp`         |
//! |     35 |    8 | `maxTimestamp` i64     | ignored: computed from the records   | computed from the records     |
//! |     43 |    8 | `producerId` i64       | not stored; [`batch_producers`] reads it, to drop a retry | -1              |
//! |     51 |    2 | `producerEpoch` i16    | not stored; likewise                 | -1                            |
//! |     53 |    4 | `baseSequence` i32     | not stored; likewise                 | -1                            |
//! |     57 |    4 | `recordCount` i32      | 1 ..= [`BATCH_RECORDS_MAX`], and fits the bytes | klog `record_count` |
//! |     61 |    … | records                | as they are, or compressed whole     | uncompressed                  |
//!
//! # Compressed batches
//!
//! A compressed batch's header stays as it is (its CRC32C covers the
//! compressed bytes); only the records section after byte 61 is compressed,
//! as one stream: gzip (RFC 1952 members), snappy (snappy-java's xerial
//! framing, `\x82SNAPPY\x00`, version, compat, then `[i32 length, raw block]`
//! blocks, or one raw snappy block as librdkafka may send), lz4 (LZ4
//! frames) or zstd (zstd frames). It is decompressed into one buffer reused
//! for every compressed batch of the call, and its records are converted as
//! an uncompressed batch's: klog stores them uncompressed, in its own
//! format, and a fetch serves them uncompressed (a consumer accepts any
//! codec, none included). `recordCount` is checked against the
//! decompressed bytes.
//!
//! A Kafka record:
//!
//! | field            | encoding                          | klog record                                  |
//! |------------------|-----------------------------------|----------------------------------------------|
//! | `length`         | varint: bytes after this field    | recomputed                                   |
//! | `attributes`     | i8, unused by Kafka               | ignored in; 0 out                            |
//! | `timestampDelta` | varlong, to `baseTimestamp`       | `timestamp_delta`, the same value            |
//! | `offsetDelta`    | varint, must be the record's index *i* (87) | implied: record *i* has `base_offset + i` |
//! | key              | varint length (-1: null), bytes   | null: no key (attribute bit 0 clear); else the key, empty included |
//! | value            | varint length (-1: null), bytes   | the value; **null is stored as empty**       |
//! | headers          | varint count, then per header: varint key length (never null), key bytes, varint value length (-1: null), value bytes | bit 1 and the headers when the count is not 0; **a null header value is stored as empty** |
//!
//! klog's batch and record layouts are in [`crate::storage::record`]: a
//! 44-byte little-endian header with its own CRC32, then records that each
//! carry a CRC32 (IEEE) of their body. A converted batch has base offset 0
//! and leader epoch 0 (the log stamps both on append), `base_timestamp`
//! from the Kafka batch and `max_timestamp` computed from the records.
//!
//! # What does not survive the round trip
//!
//! klog has no encoding for a null value or a null header value: both
//! become empty, and come back to a Kafka consumer as empty, not null. A
//! null key stays "no key" and an empty key stays an empty key. Record
//! attributes, producer id, epoch and sequence, the leader epoch a producer
//! sent and the timestamp type are not kept; batches come back as
//! CreateTime with no producer.
//!
//! # Refusals
//!
//! Each refusal is a [`RecordsError`] carrying the Kafka error code to
//! answer with: [`CORRUPT_MESSAGE`] (2) for a batch cut short, a negative or
//! too small length, an unknown magic or a CRC32C mismatch (on the way out:
//! a stored batch or record whose klog CRC fails; a damaged record is never
//! served); [`UNSUPPORTED_FOR_MESSAGE_FORMAT`] (43) for magic 0 or 1;
//! [`UNSUPPORTED_COMPRESSION_TYPE`] (76) for compression types 5 to 7;
//! [`INVALID_RECORD`] (87) for transactional and control batches and for
//! records whose fields do not add up (checked after the CRC32C, so these
//! are the bytes the producer meant); [`MESSAGE_TOO_LARGE`] (10) for a
//! record over `record_bytes_max` or a batch over klog's batch limits.
//! A compressed records section the codec cannot read (cut short, damaged,
//! not that codec) is [`CORRUPT_MESSAGE`] (2); one that decompresses to
//! more than [`BATCH_BYTES_MAX`] is [`MESSAGE_TOO_LARGE`] (10), refused as
//! soon as the output passes it.
//!
//! # Limits and cost
//!
//! Every length and count is checked against the bytes left before it is
//! used, so hostile bytes cost at most a scan of the input, and no memory
//! is reserved but in proportion to the input's own length, except for a
//! compressed batch: its decompression buffer grows with what comes out,
//! at most [`BATCH_BYTES_MAX`] (a decompression bomb costs that much, once
//! per call, then is refused; zstd's own window is at most 2^27 bytes),
//! and takes its room from one budget for the whole process (see
//! `compression.rs`: the bytes decompressed and the klog batches a call
//! makes of them, 512 MiB in all; a batch that finds it spent is answered
//! `REQUEST_TIMED_OUT`, and retried; a partition whose compressed batches
//! alone would take more is `MESSAGE_TOO_LARGE`).
//! There is no allocation per record: records are written straight into
//! the caller's buffer, which is reserved once per batch. On an error the
//! caller's buffer is left as it was.

use std::fmt;

use reader::Reader;

#[cfg(doc)]
use super::UNSUPPORTED_COMPRESSION_TYPE;
use super::{CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, UNSUPPORTED_FOR_MESSAGE_FORMAT};
use crate::limits::{
    BATCH_BYTES_MAX, BATCH_RECORDS_MAX, HEADERS_PER_RECORD_MAX, RECORD_BYTES_MAX_LIMIT,
};
use crate::storage::record::{self, Batch, Record, BATCH_HEADER_BYTES};

mod compression;
mod reader;

/// The magic of RecordBatch v2, the only Kafka format converted.
pub const KAFKA_MAGIC: i8 = 2;

const BASE_OFFSET_OFFSET: usize = 0;
const BATCH_LENGTH_OFFSET: usize = BASE_OFFSET_OFFSET + 8;
const PARTITION_LEADER_EPOCH_OFFSET: usize = BATCH_LENGTH_OFFSET + 4;
const MAGIC_OFFSET: usize = PARTITION_LEADER_EPOCH_OFFSET + 4;
const CRC_OFFSET: usize = MAGIC_OFFSET + 1;
const ATTRIBUTES_OFFSET: usize = CRC_OFFSET + 4;
const LAST_OFFSET_DELTA_OFFSET: usize = ATTRIBUTES_OFFSET + 2;
const BASE_TIMESTAMP_OFFSET: usize = LAST_OFFSET_DELTA_OFFSET + 4;
const MAX_TIMESTAMP_OFFSET: usize = BASE_TIMESTAMP_OFFSET + 8;
const PRODUCER_ID_OFFSET: usize = MAX_TIMESTAMP_OFFSET + 8;
const PRODUCER_EPOCH_OFFSET: usize = PRODUCER_ID_OFFSET + 8;
const BASE_SEQUENCE_OFFSET: usize = PRODUCER_EPOCH_OFFSET + 2;
const RECORDS_COUNT_OFFSET: usize = BASE_SEQUENCE_OFFSET + 4;
/// Bytes of a Kafka RecordBatch v2 header: where its records start.
pub const KAFKA_BATCH_HEADER_BYTES: usize = RECORDS_COUNT_OFFSET + 4;
/// Bytes of a Kafka batch before `batchLength` starts counting.
const KAFKA_LENGTH_PREFIX_BYTES: usize = BATCH_LENGTH_OFFSET + 4;

const _: () = assert!(KAFKA_BATCH_HEADER_BYTES == 61);

const COMPRESSION_MASK: i16 = 0x07;
const TRANSACTIONAL: i16 = 0x10;
const CONTROL: i16 = 0x20;

/// Smallest Kafka record: one byte each of length, attributes, timestamp
/// delta, offset delta, key length, value length and header count.
const KAFKA_RECORD_BYTES_MIN: usize = 7;
/// Smallest Kafka header: a one-byte key length and a one-byte value length.
const KAFKA_HEADER_BYTES_MIN: usize = 2;

/// Where klog's batch header (little-endian, see [`crate::storage::record`])
/// keeps the fields [`record::set_batch_extent`] does not write: the magic
/// and the base timestamp. `tests/kafka_records.rs` decodes every
/// converted batch with klog's own decoder, which pins these.
const KLOG_MAGIC_OFFSET: usize = 12;
const KLOG_BASE_TIMESTAMP_OFFSET: usize = 20;
/// klog's record attributes: a key follows; headers follow.
const KLOG_ATTR_KEY: u8 = 0x01;
const KLOG_ATTR_HEADERS: u8 = 0x02;

/// A conversion refused, with the Kafka error code to answer it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsError {
    /// The Kafka error code: [`CORRUPT_MESSAGE`], [`MESSAGE_TOO_LARGE`],
    /// [`UNSUPPORTED_FOR_MESSAGE_FORMAT`], [`UNSUPPORTED_COMPRESSION_TYPE`]
    /// or [`INVALID_RECORD`].
    pub error_code: i16,
    /// What was wrong, for a log line.
    pub message: String,
}

impl RecordsError {
    fn new(error_code: i16, message: impl Into<String>) -> RecordsError {
        RecordsError {
            error_code,
            message: message.into(),
        }
    }

    fn corrupt(message: impl Into<String>) -> RecordsError {
        RecordsError::new(CORRUPT_MESSAGE, message)
    }

    fn invalid(message: impl Into<String>) -> RecordsError {
        RecordsError::new(INVALID_RECORD, message)
    }
}

impl fmt::Display for RecordsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (Kafka error {})", self.message, self.error_code)
    }
}

impl std::error::Error for RecordsError {}

/// What [`to_klog`] appended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToKlog {
    /// klog batches appended: one per Kafka batch.
    pub batches: u32,
    /// Records in them.
    pub records: u64,
}

/// Appends to `out` one klog batch per Kafka RecordBatch v2 in `kafka` (a
/// produce partition's `records`, which may hold several back to back).
///
/// Every batch must be whole and pass its CRC32C; a record larger than
/// `record_bytes_max` (klog's size: length prefix, CRC and body) is
/// refused. Empty input appends nothing and is not an error; whether an
/// empty produce is acceptable is the caller's call. On an error `out` is
/// left as it was.
pub fn to_klog(
    kafka: &[u8],
    out: &mut Vec<u8>,
    record_bytes_max: u32,
) -> Result<ToKlog, RecordsError> {
    let start = out.len();
    let result = to_klog_batches(kafka, out, record_bytes_max);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn to_klog_batches(
    kafka: &[u8],
    out: &mut Vec<u8>,
    record_bytes_max: u32,
) -> Result<ToKlog, RecordsError> {
    to_klog_budgeted(kafka, out, record_bytes_max, &compression::PROCESS)
}

/// [`to_klog_batches`], compressed records and the klog batches made of
/// them taking their room from `budget`.
fn to_klog_budgeted(
    kafka: &[u8],
    out: &mut Vec<u8>,
    record_bytes_max: u32,
    budget: &compression::Budget,
) -> Result<ToKlog, RecordsError> {
    let mut done = ToKlog::default();
    let mut rest = kafka;
    // The records of compressed batches, one buffer for all of them.
    let mut decompressed = compression::Decompressed::new(budget);
    while !rest.is_empty() {
        let (batch, total) = KafkaBatch::decode(rest)?;
        let records = match batch.compression {
            0 => batch.records,
            codec => {
                compression::decompress(codec, batch.records, &mut decompressed)?;
                &decompressed.buf
            }
        };
        let record_count = checked_count(batch.header, records.len())?;
        if batch.compression != 0 {
            decompressed.reserve_out(out, klog_bytes_max(records.len(), record_count))?;
        }
        convert_batch(&batch, records, record_count, out, record_bytes_max)?;
        done.batches += 1;
        done.records += u64::from(record_count);
        rest = &rest[total..];
    }
    Ok(done)
}

/// The most bytes the klog batch of `record_count` Kafka records in
/// `records_bytes` takes: a klog record is at most 2 bytes longer than its
/// Kafka form (a CRC of 4 against the offset delta and value length of at
/// least 1 each, the length prefix at most as long).
fn klog_bytes_max(records_bytes: usize, record_count: u32) -> usize {
    BATCH_HEADER_BYTES + records_bytes + 2 * record_count as usize
}

/// The producer fields of a Kafka batch: who sent it and how it numbered
/// its records (an idempotent producer's retry carries the same ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchProducer {
    /// `producerId` (-1: not an idempotent producer).
    pub producer_id: i64,
    /// `producerEpoch`.
    pub producer_epoch: i16,
    /// `baseSequence`: the sequence number of its first record.
    pub base_sequence: i32,
    /// `recordCount`.
    pub record_count: i32,
    /// The batch's CRC32C (over its attributes, producer fields and
    /// records): a retry is the same batch, byte for byte.
    pub crc: u32,
}

/// The producer fields of each Kafka batch in `kafka`, in order; meant for
/// bytes [`to_klog`] accepted. It stops at the first batch whose header
/// does not fit what is left.
pub fn batch_producers(kafka: &[u8]) -> impl Iterator<Item = BatchProducer> + '_ {
    let mut rest = kafka;
    std::iter::from_fn(move || {
        if rest.len() < KAFKA_BATCH_HEADER_BYTES {
            return None;
        }
        let length = usize::try_from(i32_at(rest, BATCH_LENGTH_OFFSET)).ok()?;
        let total = KAFKA_LENGTH_PREFIX_BYTES.checked_add(length)?;
        if total < KAFKA_BATCH_HEADER_BYTES || total > rest.len() {
            return None;
        }
        let producer = BatchProducer {
            producer_id: i64_at(rest, PRODUCER_ID_OFFSET),
            producer_epoch: i16_at(rest, PRODUCER_EPOCH_OFFSET),
            base_sequence: i32_at(rest, BASE_SEQUENCE_OFFSET),
            record_count: i32_at(rest, RECORDS_COUNT_OFFSET),
            crc: u32_at(rest, CRC_OFFSET),
        };
        rest = &rest[total..];
        Some(producer)
    })
}

/// A Kafka batch whose header, CRC32C and attributes were checked.
struct KafkaBatch<'a> {
    /// Its first [`KAFKA_BATCH_HEADER_BYTES`].
    header: &'a [u8],
    base_timestamp: i64,
    /// Attribute bits 0-2: 0 or a codec klog decompresses.
    compression: i16,
    /// The records section as sent (compressed or not).
    records: &'a [u8],
}

impl<'a> KafkaBatch<'a> {
    /// Checks the batch at the start of `buf` and returns it with its
    /// total length.
    fn decode(buf: &'a [u8]) -> Result<(KafkaBatch<'a>, usize), RecordsError> {
        if buf.len() < KAFKA_LENGTH_PREFIX_BYTES {
            return Err(RecordsError::corrupt(format!(
                "a record batch cut short: {} bytes, its length field needs {}",
                buf.len(),
                KAFKA_LENGTH_PREFIX_BYTES
            )));
        }
        let batch_length = i32_at(buf, BATCH_LENGTH_OFFSET);
        let Ok(length) = usize::try_from(batch_length) else {
            return Err(RecordsError::corrupt(format!(
                "negative batch length {batch_length}"
            )));
        };
        let left = buf.len() - KAFKA_LENGTH_PREFIX_BYTES;
        if length > left {
            return Err(RecordsError::corrupt(format!(
                "a record batch cut short: its length is {length}, {left} bytes follow"
            )));
        }
        let total = KAFKA_LENGTH_PREFIX_BYTES + length;
        let bytes = &buf[..total];
        if total <= MAGIC_OFFSET {
            return Err(RecordsError::corrupt(format!(
                "batch length {length} leaves no room for a magic"
            )));
        }
        check_magic(bytes[MAGIC_OFFSET] as i8)?;
        if total < KAFKA_BATCH_HEADER_BYTES {
            return Err(RecordsError::corrupt(format!(
                "batch length {length} is shorter than a RecordBatch v2 header"
            )));
        }
        let stored = u32_at(bytes, CRC_OFFSET);
        let computed = crc32c::crc32c(&bytes[ATTRIBUTES_OFFSET..]);
        if stored != computed {
            return Err(RecordsError::corrupt(format!(
                "record batch CRC32C mismatch: stored {stored:#010x}, computed {computed:#010x}"
            )));
        }
        let attributes = i16_at(bytes, ATTRIBUTES_OFFSET);
        check_attributes(attributes)?;
        let batch = KafkaBatch {
            header: &bytes[..KAFKA_BATCH_HEADER_BYTES],
            base_timestamp: i64_at(bytes, BASE_TIMESTAMP_OFFSET),
            compression: attributes & COMPRESSION_MASK,
            records: &bytes[KAFKA_BATCH_HEADER_BYTES..],
        };
        Ok((batch, total))
    }
}

fn check_magic(magic: i8) -> Result<(), RecordsError> {
    match magic {
        KAFKA_MAGIC => Ok(()),
        0 | 1 => Err(RecordsError::new(
            UNSUPPORTED_FOR_MESSAGE_FORMAT,
            format!("message format v{magic} (magic {magic}): only RecordBatch v2 is accepted"),
        )),
        _ => Err(RecordsError::corrupt(format!("unknown magic {magic}"))),
    }
}

fn check_attributes(attributes: i16) -> Result<(), RecordsError> {
    compression::check_codec(attributes & COMPRESSION_MASK)?;
    if attributes & TRANSACTIONAL != 0 {
        return Err(RecordsError::invalid(
            "transactional batch: klog has no transactions",
        ));
    }
    if attributes & CONTROL != 0 {
        return Err(RecordsError::invalid(
            "control batch: klog has no transactions",
        ));
    }
    Ok(())
}

/// The record count, checked against klog's limit, the bytes its records
/// have and `lastOffsetDelta`.
fn checked_count(header: &[u8], records_bytes: usize) -> Result<u32, RecordsError> {
    let count = i32_at(header, RECORDS_COUNT_OFFSET);
    if count <= 0 {
        return Err(RecordsError::invalid(format!("record count {count}")));
    }
    let count = count as u32;
    if count as usize > records_bytes / KAFKA_RECORD_BYTES_MIN {
        return Err(RecordsError::invalid(format!(
            "record count {count} cannot fit in {records_bytes} bytes"
        )));
    }
    if count > BATCH_RECORDS_MAX {
        return Err(RecordsError::new(
            MESSAGE_TOO_LARGE,
            format!("{count} records in one batch, over klog's limit {BATCH_RECORDS_MAX}"),
        ));
    }
    let last_offset_delta = i32_at(header, LAST_OFFSET_DELTA_OFFSET);
    if i64::from(last_offset_delta) != i64::from(count) - 1 {
        return Err(RecordsError::invalid(format!(
            "last offset delta {last_offset_delta} in a batch of {count} records"
        )));
    }
    Ok(count)
}

/// Appends the klog form of one checked Kafka batch whose (decompressed)
/// records are `records`, `record_count` of them.
fn convert_batch(
    batch: &KafkaBatch<'_>,
    records: &[u8],
    record_count: u32,
    out: &mut Vec<u8>,
    record_bytes_max: u32,
) -> Result<(), RecordsError> {
    let at = out.len();
    // One reservation per batch.
    out.reserve(klog_bytes_max(records.len(), record_count));
    out.resize(at + BATCH_HEADER_BYTES, 0);
    let mut reader = Reader::new(records);
    let mut max_timestamp = i64::MIN;
    for index in 0..record_count {
        let record = KafkaRecord::read(&mut reader, index)?;
        let timestamp = batch
            .base_timestamp
            .checked_add(record.timestamp_delta)
            .ok_or_else(|| RecordsError::invalid("record timestamp overflows"))?;
        max_timestamp = max_timestamp.max(timestamp);
        record.write_klog(out, record_bytes_max)?;
    }
    if !reader.is_empty() {
        return Err(RecordsError::invalid(format!(
            "{} bytes after the last of {} records",
            reader.left(),
            record_count
        )));
    }
    let total = out.len() - at;
    if total > BATCH_BYTES_MAX as usize {
        return Err(RecordsError::new(
            MESSAGE_TOO_LARGE,
            format!("a batch of {total} bytes in klog's format, over its limit {BATCH_BYTES_MAX}"),
        ));
    }
    let header = &mut out[at..];
    header[KLOG_MAGIC_OFFSET] = record::MAGIC;
    header[KLOG_BASE_TIMESTAMP_OFFSET..KLOG_BASE_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&batch.base_timestamp.to_le_bytes());
    let records_bytes = (total - BATCH_HEADER_BYTES) as u32;
    record::set_batch_extent(header, record_count, records_bytes, max_timestamp);
    Ok(())
}

/// One Kafka record, its fields checked, borrowed from the batch.
struct KafkaRecord<'a> {
    timestamp_delta: i64,
    key: Option<&'a [u8]>,
    value: &'a [u8],
    /// The headers in Kafka's encoding (checked).
    headers: &'a [u8],
    header_count: u32,
    /// Bytes of the headers in klog's encoding.
    klog_headers_bytes: usize,
}

impl<'a> KafkaRecord<'a> {
    fn read(reader: &mut Reader<'a>, index: u32) -> Result<KafkaRecord<'a>, RecordsError> {
        let length = reader.varint("record length")?;
        let Ok(length) = usize::try_from(length) else {
            return Err(RecordsError::invalid(format!(
                "record {index}: negative length {length}"
            )));
        };
        let mut body = Reader::new(reader.take(length, "record")?);
        body.u8("record attributes")?;
        let timestamp_delta = body.varlong("timestamp delta")?;
        let offset_delta = body.varint("offset delta")?;
        if i64::from(offset_delta) != i64::from(index) {
            return Err(RecordsError::invalid(format!(
                "record {index} has offset delta {offset_delta}"
            )));
        }
        let key = body.nullable_bytes("key")?;
        let value = body.nullable_bytes("value")?.unwrap_or(&[]);
        let header_count = body.varint("header count")?;
        let header_count = u32::try_from(header_count)
            .ok()
            .filter(|&count| count <= HEADERS_PER_RECORD_MAX)
            .filter(|&count| count as usize <= body.left() / KAFKA_HEADER_BYTES_MIN)
            .ok_or_else(|| {
                RecordsError::invalid(format!("record {index}: header count {header_count}"))
            })?;
        let headers_at = body.pos;
        let mut klog_headers_bytes = 0;
        for _ in 0..header_count {
            let (name, value) = body.header()?;
            klog_headers_bytes += prefixed_len(name.len()) + prefixed_len(value.len());
        }
        let headers = &body.buf[headers_at..body.pos];
        if !body.is_empty() {
            return Err(RecordsError::invalid(format!(
                "record {index}: {} bytes after its headers",
                body.left()
            )));
        }
        Ok(KafkaRecord {
            timestamp_delta,
            key,
            value,
            headers,
            header_count,
            klog_headers_bytes,
        })
    }

    /// Appends the klog record: length, CRC32 of the body, body.
    fn write_klog(&self, out: &mut Vec<u8>, record_bytes_max: u32) -> Result<(), RecordsError> {
        let delta = zigzag64(self.timestamp_delta);
        let mut body = 1 + varint_len(delta) + self.value.len();
        let mut attributes = 0;
        if let Some(key) = self.key {
            attributes |= KLOG_ATTR_KEY;
            body += prefixed_len(key.len());
        }
        if self.header_count > 0 {
            attributes |= KLOG_ATTR_HEADERS;
            body += varint_len(u64::from(self.header_count)) + self.klog_headers_bytes;
        }
        let length = body + 4;
        let total = varint_len(length as u64) + length;
        if total > record_bytes_max as usize {
            return Err(RecordsError::new(
                MESSAGE_TOO_LARGE,
                format!("a record of {total} bytes, over the limit {record_bytes_max}"),
            ));
        }
        put_uvarint(out, length as u64);
        let crc_at = out.len();
        out.extend_from_slice(&[0; 4]);
        out.push(attributes);
        put_uvarint(out, delta);
        if let Some(key) = self.key {
            put_prefixed(out, key);
        }
        if self.header_count > 0 {
            put_uvarint(out, u64::from(self.header_count));
            let mut headers = Reader::new(self.headers);
            for _ in 0..self.header_count {
                let (name, value) = headers.header()?;
                put_prefixed(out, name);
                put_prefixed(out, value);
            }
        }
        out.extend_from_slice(self.value);
        let crc = crc32fast::hash(&out[crc_at + 4..]);
        out[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
        Ok(())
    }
}

/// Appends to `out` one Kafka RecordBatch v2 per whole klog batch at the
/// front of `klog` (a fetched byte range) and returns the klog bytes
/// converted. A batch cut short at the end of `klog` is left (0 when the
/// first one is). Every batch header and every record is checked, CRC
/// included, before it is converted: a damaged one is an error
/// ([`CORRUPT_MESSAGE`]), never served. On an error `out` is left as it was.
pub fn to_kafka(klog: &[u8], out: &mut Vec<u8>) -> Result<usize, RecordsError> {
    let start = out.len();
    let whole = record::whole_batches_len(klog);
    let mut done = 0;
    while done < whole {
        let converted = Batch::decode(&klog[done..whole], BATCH_BYTES_MAX)
            .map_err(|e| RecordsError::corrupt(format!("stored batch at byte {done}: {e}")))
            .and_then(|batch| write_kafka_batch(&batch, out).map(|()| batch.total_bytes()));
        match converted {
            Ok(bytes) => done += bytes,
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// Appends the Kafka form of one decoded klog batch.
fn write_kafka_batch(batch: &Batch<'_>, out: &mut Vec<u8>) -> Result<(), RecordsError> {
    let header = batch.header;
    let at = out.len();
    // A Kafka record is a few bytes longer than its klog form when it has
    // no key and no headers (offset delta, null-key and value lengths);
    // a rare longer batch grows the buffer once more.
    let hint = batch.total_bytes() + KAFKA_BATCH_HEADER_BYTES + 8 * header.record_count as usize;
    out.reserve(hint);
    out.extend_from_slice(&(header.base_offset as i64).to_be_bytes());
    out.extend_from_slice(&[0; 4]); // batchLength, below
    out.extend_from_slice(&(header.leader_epoch as i32).to_be_bytes());
    out.push(KAFKA_MAGIC as u8);
    out.extend_from_slice(&[0; 4]); // crc, below
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&(header.record_count as i32 - 1).to_be_bytes());
    out.extend_from_slice(&header.base_timestamp.to_be_bytes());
    out.extend_from_slice(&[0; 8]); // maxTimestamp, below
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.extend_from_slice(&(header.record_count as i32).to_be_bytes());
    let mut max_timestamp = i64::MIN;
    for (index, record) in batch.records(RECORD_BYTES_MAX_LIMIT).enumerate() {
        let record = record.map_err(|e| {
            RecordsError::corrupt(format!(
                "stored record {} (offset {}): {e}",
                index,
                header.base_offset + index as u64
            ))
        })?;
        max_timestamp = max_timestamp.max(record.timestamp);
        write_kafka_record(out, &record, index as u32, header.base_timestamp);
    }
    let kafka = &mut out[at..];
    let batch_length = (kafka.len() - KAFKA_LENGTH_PREFIX_BYTES) as i32;
    kafka[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
        .copy_from_slice(&batch_length.to_be_bytes());
    kafka[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&kafka[ATTRIBUTES_OFFSET..]);
    kafka[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Appends one Kafka record (klog's record was checked, CRC included).
fn write_kafka_record(out: &mut Vec<u8>, record: &Record<'_>, index: u32, base_timestamp: i64) {
    // The exact inverse of the decoder's `base_timestamp + delta`.
    let delta = zigzag64(record.timestamp.wrapping_sub(base_timestamp));
    let offset_delta = zigzag32(index as i32);
    let mut body = 1 + varint_len(delta) + varint_len(offset_delta);
    body += match record.key {
        Some(key) => kafka_prefixed_len(key.len()),
        None => 1,
    };
    body += kafka_prefixed_len(record.value.len());
    body += varint_len(zigzag32(record.header_count() as i32));
    for (name, value) in record.headers() {
        body += kafka_prefixed_len(name.len()) + kafka_prefixed_len(value.len());
    }
    put_uvarint(out, zigzag32(body as i32));
    out.push(0);
    put_uvarint(out, delta);
    put_uvarint(out, offset_delta);
    match record.key {
        Some(key) => put_kafka_prefixed(out, key),
        None => put_uvarint(out, zigzag32(-1)),
    }
    put_kafka_prefixed(out, record.value);
    put_uvarint(out, zigzag32(record.header_count() as i32));
    for (name, value) in record.headers() {
        put_kafka_prefixed(out, name);
        put_kafka_prefixed(out, value);
    }
}

fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn zigzag32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

fn varint_len(v: u64) -> usize {
    record::varint_len(v)
}

/// Bytes of a klog length-prefixed field of `len` bytes.
fn prefixed_len(len: usize) -> usize {
    varint_len(len as u64) + len
}

/// Bytes of a Kafka (zigzag) length-prefixed field of `len` bytes.
fn kafka_prefixed_len(len: usize) -> usize {
    varint_len(zigzag32(len as i32)) + len
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    put_uvarint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_kafka_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    put_uvarint(out, zigzag32(bytes.len() as i32));
    out.extend_from_slice(bytes);
}

fn i16_at(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

fn i64_at(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}
