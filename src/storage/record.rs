//! Records and batches (the paper's message sets): the bytes a producer
//! sends, a segment stores and a consumer receives, unchanged from end to
//! end, for klog's clients and Kafka's alike.
//!
//! This module is sans-I/O: it encodes into and decodes from byte slices and
//! never touches a file or a socket.
//!
//! # Formats
//!
//! A segment says in its header which [`Format`] its batches are in
//! ([`crate::storage::segment`]). Segments written since this format hold
//! [`Format::Kafka`], Kafka's RecordBatch v2 exactly as the producer sent
//! it (compressed or not); segments written before it hold
//! [`Format::Legacy`], klog's own little-endian batches with a CRC per
//! record ([`legacy`]), which are still read, recovered and verified but
//! never written.
//!
//! # Batch (Kafka RecordBatch v2, magic 2)
//!
//! All integers are big-endian; "varint" and "varlong" are zigzag LEB128
//! (at most 5 and 10 bytes).
//!
//! | offset | size | field                  | meaning                                                    |
//! |-------:|-----:|------------------------|------------------------------------------------------------|
//! |      0 |    8 | `baseOffset` i64       | offset of the first record; stamped by the log on append    |
//! |      8 |    4 | `batchLength` i32      | bytes after this field                                     |
//! |     12 |    4 | `partitionLeaderEpoch` i32 | epoch of the leader that appended it; stamped by the log |
//! |     16 |    1 | `magic` i8             | 2                                                          |
//! |     17 |    4 | `crc` u32              | CRC32C (Castagnoli) of bytes 21 to the end                  |
//! |     21 |    2 | `attributes` i16       | bits 0-2 codec ([`Codec`]: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); bit 3 timestamp type (1: LogAppendTime); bit 4 transactional; bit 5 control; bit 6 delete horizon set; others 0 |
//! |     23 |    4 | `lastOffsetDelta` i32  | offset of the last record minus `baseOffset`               |
//! |     27 |    8 | `baseTimestamp` i64    | record timestamps are deltas to it (ms since the epoch)     |
//! |     35 |    8 | `maxTimestamp` i64     | the batch's time: what the time index holds                 |
//! |     43 |    8 | `producerId` i64       | -1, or the idempotent producer that sent it                 |
//! |     51 |    2 | `producerEpoch` i16    | -1, or that producer's epoch                               |
//! |     53 |    4 | `baseSequence` i32     | -1, or the sequence number of its first record              |
//! |     57 |    4 | `recordCount` i32      | records in the batch, 1 to [`BATCH_RECORDS_MAX`]            |
//! |     61 |    … | records                | as below, or compressed as one stream by the codec          |
//!
//! The CRC32C covers everything from `attributes` on, so the log assigns
//! offsets to a producer's batch by writing `baseOffset` and
//! `partitionLeaderEpoch` ([`stamp`]) without touching its CRC, its
//! records or anything else the producer wrote: timestamps, keys, headers,
//! producer fields, compression and batch boundaries are kept byte for
//! byte. Record *i* of a producer's batch has offset `baseOffset + i`.
//! Only a batch whose `maxTimestamp` is not its records' largest, or that
//! claims LogAppendTime (klog's topics keep CreateTime), gets both set
//! right, and its CRC32C with them ([`set_create_time`]), as Kafka's broker
//! does: the time index and retention go by `maxTimestamp`.
//!
//! # Record
//!
//! | field            | encoding                                 | meaning                                  |
//! |------------------|------------------------------------------|------------------------------------------|
//! | `length`         | varint                                   | bytes after this field                   |
//! | `attributes`     | i8                                       | unused, 0                                |
//! | `timestampDelta` | varlong                                  | `timestamp - baseTimestamp`, ms          |
//! | `offsetDelta`    | varint                                   | `offset - baseOffset`; increasing, at most `lastOffsetDelta` |
//! | key              | varint length (-1: null), bytes          |                                          |
//! | value            | varint length (-1: null), bytes          | a null value reads as empty here         |
//! | headers          | varint count, then per header: varint key length, key, varint value length (-1: null), value | a null header value reads as empty |
//!
//! A 200-byte value without key or headers costs 7 bytes of record
//! overhead (2 length, 1 each of attributes, timestamp delta, offset
//! delta, null key and header count) plus 2 of value length, and 61/50
//! bytes of batch header in a batch of 50: 10.22 bytes.
//!
//! # What is protected
//!
//! The batch is the unit of damage: its CRC32C covers all but the offset
//! and epoch the log stamps, whose sanity the log checks against its
//! neighbours (offsets increase, epochs never fall). A reader stops at the
//! first batch whose framing or CRC is wrong, and recovery keeps every
//! whole batch before it (guarantee 3). A segment's indexes are rebuilt
//! from the log when in doubt.
//!
//! # Limits
//!
//! Decoding never allocates, except to decompress: lengths and counts are
//! checked against the bytes left and the limits before use, and a varint
//! longer than its type is an error, so hostile bytes cost at most a scan
//! of the buffer. Compressed records are decompressed into a buffer the
//! caller reuses, at most [`BATCH_BYTES_MAX`] and within a budget for the
//! whole process ([`compression`]).
//!
//! # Version history
//!
//! - klog magic 1: a 40-byte little-endian header ([`legacy`]).
//! - klog magic 2: `leader_epoch` added, header 44 bytes ([`legacy`]).
//! - Kafka RecordBatch v2 (segment version 2): this page.
//!
//! `tests/golden/batch.bin` pins this layout, checked against the
//! `kafka-protocol` crate's decoder; `tests/golden/batch-{gzip,snappy,lz4,zstd}.bin`
//! compressed batches; `tests/golden/legacy/batch.bin` and
//! `tests/golden/v1/batch.bin` the legacy ones (`tests/golden.rs`).

pub use crate::error::DecodeError;
use std::fmt;

mod build;
pub mod compression;
pub mod control;
mod cursor;
mod kafka;
pub mod legacy;

pub use build::BatchBuilder;
pub use compression::{Codec, Decompressed};
pub use cursor::varint_len;
pub use kafka::{set_create_time, set_create_time_crc, set_producer, set_transactional, stamp};

use crate::limits::{BATCH_BYTES_MAX, BATCH_RECORDS_MAX};
use cursor::Cursor;

/// A budget for readers that never decompress.
static NO_ROOM: compression::Budget = compression::Budget::new(0);

/// The format of the batches in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// klog's own batches, magic 1 and 2 (segment version 1): read, never
    /// written.
    Legacy,
    /// Kafka's RecordBatch v2 (segment version 2): what the log writes.
    Kafka,
}

impl Format {
    /// Bytes to read at a batch's start to hold its whole header (the
    /// largest header of the format).
    pub fn header_bytes(self) -> usize {
        match self {
            Format::Legacy => legacy::BATCH_HEADER_BYTES,
            Format::Kafka => BATCH_HEADER_BYTES,
        }
    }

    /// The smallest whole batch of the format.
    pub fn batch_bytes_min(self) -> usize {
        match self {
            Format::Legacy => legacy::BATCH_HEADER_BYTES_V1 + legacy::RECORD_BYTES_MIN,
            Format::Kafka => BATCH_HEADER_BYTES + RECORD_BYTES_MIN,
        }
    }

    /// Its name, as `klog-dump` shows it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Legacy => "klog",
            Format::Kafka => "kafka",
        }
    }
}

/// Size of a Kafka RecordBatch v2 header: where its records start.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Bytes of a batch before `batchLength` starts counting (both formats).
pub const BATCH_LENGTH_PREFIX_BYTES: usize = 12;
/// The magic of Kafka's RecordBatch v2.
pub const MAGIC: u8 = 2;
/// The smallest Kafka record: one byte each of length, attributes,
/// timestamp delta, offset delta, key length, value length and header
/// count.
pub const RECORD_BYTES_MIN: usize = 7;

/// Attribute bit 3: the timestamps are the broker's append time.
pub const ATTR_LOG_APPEND_TIME: u16 = 0x08;
/// Attribute bit 4: the batch belongs to a transaction.
pub const ATTR_TRANSACTIONAL: u16 = 0x10;
/// Attribute bit 5: a control batch (a transaction's commit or abort).
pub const ATTR_CONTROL: u16 = 0x20;
/// Attribute bit 6: the delete horizon is set (compaction, KIP-534).
pub const ATTR_DELETE_HORIZON: u16 = 0x40;

/// The decoded fixed header of a batch, of either format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// The format it was decoded from.
    pub format: Format,
    /// Offset of the first record.
    pub base_offset: u64,
    /// Bytes after the `batchLength` field.
    pub batch_length: u32,
    /// Format version within the format (1 or 2 for legacy; 2 for Kafka).
    pub magic: u8,
    /// Attributes (Kafka's; 0 for legacy).
    pub attributes: u16,
    /// Offset of the last record minus the base offset.
    pub last_offset_delta: u32,
    /// Number of records.
    pub record_count: u32,
    /// Timestamp the record deltas are relative to.
    pub base_timestamp: i64,
    /// The batch's time (its largest record timestamp, as written).
    pub max_timestamp: i64,
    /// Epoch of the leader that appended the batch (0 for legacy magic 1).
    pub leader_epoch: u32,
    /// The stored CRC: Kafka's CRC32C of the batch from its attributes on,
    /// or legacy's CRC32 of its header.
    pub crc: u32,
    /// The producer id (-1: none; always -1 for legacy).
    pub producer_id: i64,
    /// The producer epoch (-1: none).
    pub producer_epoch: i16,
    /// The sequence number of the first record (-1: none).
    pub base_sequence: i32,
}

impl BatchHeader {
    /// Decodes and checks a batch header of `format` at the start of
    /// `buf`: its magic, counts, length against `batch_bytes_max`, and
    /// (legacy only, whose header has a CRC of its own) its CRC. A Kafka
    /// batch's CRC32C covers its records: [`Batch::decode`] checks it.
    pub fn decode(
        format: Format,
        buf: &[u8],
        batch_bytes_max: u32,
    ) -> Result<BatchHeader, DecodeError> {
        match format {
            Format::Legacy => legacy::decode_header(buf, batch_bytes_max),
            Format::Kafka => kafka::decode_header(buf, batch_bytes_max),
        }
    }

    /// Size of the header: where the records start.
    pub fn header_bytes(&self) -> usize {
        match self.format {
            Format::Legacy => legacy::header_bytes_of(self.magic),
            Format::Kafka => BATCH_HEADER_BYTES,
        }
    }

    /// Total size of the batch in bytes, header included.
    pub fn total_bytes(&self) -> u64 {
        BATCH_LENGTH_PREFIX_BYTES as u64 + u64::from(self.batch_length)
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> u64 {
        self.base_offset + u64::from(self.last_offset_delta)
    }

    /// One past the last record's offset.
    pub fn next_offset(&self) -> u64 {
        self.last_offset() + 1
    }

    /// The compression codec of its records.
    pub fn codec(&self) -> Codec {
        Codec::from_bits(self.attributes).unwrap_or_default()
    }

    /// Whether the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    /// Whether it is a control batch.
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
}

/// One record, borrowed from the batch bytes (or decompressed records) it
/// was decoded from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's offset in its partition.
    pub offset: u64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    /// The key, if the record has one.
    pub key: Option<&'a [u8]>,
    /// The value (payload); a null value is empty.
    pub value: &'a [u8],
    /// The value is null: in a compacted topic, a tombstone, which
    /// deletes its key.
    pub null_value: bool,
    headers: &'a [u8],
    header_count: u32,
    format: Format,
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

    /// The headers, in order, as (name, value) pairs (a null value is
    /// empty).
    pub fn headers(&self) -> Headers<'a> {
        Headers {
            buf: self.headers,
            left: self.header_count,
            format: self.format,
        }
    }
}

/// Iterator over a record's headers (already validated when decoded).
#[derive(Debug, Clone)]
pub struct Headers<'a> {
    buf: &'a [u8],
    left: u32,
    format: Format,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let mut cursor = Cursor::new(self.buf);
        let (name, value) = match self.format {
            Format::Legacy => (
                cursor.bytes_prefixed("header name").ok()?,
                cursor.bytes_prefixed("header value").ok()?,
            ),
            Format::Kafka => (
                cursor.nullable_bytes("header key").ok()??,
                cursor.nullable_bytes("header value").ok()?.unwrap_or(&[]),
            ),
        };
        self.buf = &self.buf[cursor.pos..];
        Some((name, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Headers<'_> {}

/// A decoded batch: its header, its bytes, and its records on demand.
#[derive(Debug, Clone)]
pub struct Batch<'a> {
    /// The batch header.
    pub header: BatchHeader,
    bytes: &'a [u8],
}

impl<'a> Batch<'a> {
    /// Decodes the batch of `format` at the start of `buf`, which must
    /// hold all of it.
    ///
    /// Checks the header, and a Kafka batch's CRC32C (which covers its
    /// records); a legacy batch's records are checked, each with its CRC,
    /// as [`Batch::records`] yields them.
    pub fn decode(
        format: Format,
        buf: &'a [u8],
        batch_bytes_max: u32,
    ) -> Result<Batch<'a>, DecodeError> {
        let header = BatchHeader::decode(format, buf, batch_bytes_max)?;
        let total = header.total_bytes() as usize;
        if buf.len() < total {
            return Err(DecodeError::Truncated {
                what: "batch",
                needed_bytes: total as u64,
                available_bytes: buf.len() as u64,
            });
        }
        let bytes = &buf[..total];
        if format == Format::Kafka {
            kafka::check_crc(bytes, &header)?;
        }
        Ok(Batch { header, bytes })
    }

    /// Bytes of the whole batch.
    pub fn total_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The whole batch, as stored.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The records section as stored (compressed when the batch is).
    pub fn records_bytes(&self) -> &'a [u8] {
        &self.bytes[self.header.header_bytes()..]
    }

    /// The records of an uncompressed batch, each checked as it is reached;
    /// after an error the iterator ends. A compressed batch yields one
    /// error: read it with [`Batch::records_in`].
    pub fn records(&self, record_bytes_max: u32) -> Records<'a> {
        let failed = self.header.codec() != Codec::None;
        Records {
            header: self.header,
            buf: if failed { &[] } else { self.records_bytes() },
            pos: 0,
            index: 0,
            next_delta: 0,
            record_bytes_max,
            failed: false,
            compressed: failed,
        }
    }

    /// The records of a batch, compressed or not: a compressed batch's are
    /// decompressed into `scratch` first (within its budget).
    pub fn records_in<'s>(
        &self,
        scratch: &'s mut Decompressed<'_>,
        record_bytes_max: u32,
    ) -> Result<Records<'s>, DecodeError>
    where
        'a: 's,
    {
        let codec = self.header.codec();
        if codec == Codec::None {
            return Ok(self.records(record_bytes_max));
        }
        let records = compression::decompress(codec, self.records_bytes(), scratch)?;
        Ok(Records {
            header: self.header,
            buf: records,
            pos: 0,
            index: 0,
            next_delta: 0,
            record_bytes_max,
            failed: false,
            compressed: false,
        })
    }

    /// Checks every record and the header's claims about them (count,
    /// bytes; for legacy the maximum timestamp), decompressing a compressed
    /// batch into `scratch`. Returns the first error.
    pub fn validate_in(
        &self,
        scratch: &mut Decompressed<'_>,
        record_bytes_max: u32,
    ) -> Result<(), DecodeError> {
        self.max_timestamp_in(scratch, record_bytes_max).map(|_| ())
    }

    /// [`Batch::validate_in`], returning the largest timestamp of its
    /// records (which a Kafka producer's `maxTimestamp` should be).
    pub fn max_timestamp_in(
        &self,
        scratch: &mut Decompressed<'_>,
        record_bytes_max: u32,
    ) -> Result<i64, DecodeError> {
        let mut max_timestamp = i64::MIN;
        for record in self.records_in(scratch, record_bytes_max)? {
            max_timestamp = max_timestamp.max(record?.timestamp);
        }
        if self.header.format == Format::Legacy && max_timestamp != self.header.max_timestamp {
            return Err(DecodeError::Malformed(
                "batch: max timestamp differs from its records",
            ));
        }
        Ok(max_timestamp)
    }

    /// Checks a batch as stored, as recovery and the scrub judge it: a
    /// legacy batch's records each with its CRC, an uncompressed Kafka
    /// batch's records framed; a compressed Kafka batch is judged by its
    /// CRC32C alone (checked by [`Batch::decode`]), which covers its
    /// records as the producer sent them and the log checked them.
    /// Decompresses nothing, so it never finds the budget spent.
    pub fn check_stored(&self, record_bytes_max: u32) -> Result<(), DecodeError> {
        if self.header.codec() == Codec::None {
            self.validate_in(&mut Decompressed::new(&NO_ROOM), record_bytes_max)
        } else {
            Ok(())
        }
    }

    /// [`Batch::validate_in`] with a scratch buffer of its own.
    pub fn validate(&self, record_bytes_max: u32) -> Result<(), DecodeError> {
        self.validate_in(&mut Decompressed::default(), record_bytes_max)
    }
}

/// Iterator over the records of a batch.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    header: BatchHeader,
    buf: &'a [u8],
    pos: usize,
    index: u32,
    /// The smallest offset delta the next Kafka record may have.
    next_delta: u32,
    record_bytes_max: u32,
    failed: bool,
    /// A compressed batch read with [`Batch::records`].
    compressed: bool,
}

impl<'a> Records<'a> {
    /// Position, within the batch, of the next record to decode (of an
    /// uncompressed batch).
    pub fn position_in_batch(&self) -> usize {
        self.header.header_bytes() + self.pos
    }

    /// The records section read (decompressed, of a compressed batch), and
    /// where in it the next record starts: each record is the
    /// [`Record::encoded_bytes`] from there.
    pub fn section(&self) -> (&'a [u8], usize) {
        (self.buf, self.pos)
    }

    fn step(&mut self) -> Result<Record<'a>, DecodeError> {
        let rest = &self.buf[self.pos..];
        let (record, used) = match self.header.format {
            Format::Legacy => legacy::decode_record(
                rest,
                self.header.base_offset + u64::from(self.index),
                self.header.base_timestamp,
                self.record_bytes_max,
            )?,
            Format::Kafka => {
                let (record, used, delta) = kafka::decode_record(
                    rest,
                    &self.header,
                    self.next_delta,
                    self.record_bytes_max,
                )?;
                self.next_delta = delta.saturating_add(1);
                (record, used)
            }
        };
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
        if self.compressed {
            self.compressed = false;
            self.failed = true;
            return Some(Err(DecodeError::Malformed(
                "batch: compressed records read without a decompression buffer",
            )));
        }
        if self.failed || self.index == self.header.record_count {
            return None;
        }
        let item = self.step();
        self.failed = item.is_err();
        Some(item)
    }
}

/// The length of the longest prefix of `bytes` made of whole batches of
/// `format`, by their length fields alone (no CRC or other check): where a
/// fetch response cut short by its byte budget stops being whole batches.
pub fn whole_batches_len(format: Format, bytes: &[u8]) -> usize {
    let mut end = 0;
    while let Some(prefix) = bytes.get(end..end + BATCH_LENGTH_PREFIX_BYTES) {
        let length: [u8; 4] = prefix[8..12].try_into().expect("4 bytes");
        let batch_length = match format {
            Format::Legacy => u64::from(u32::from_le_bytes(length)),
            Format::Kafka => u64::from(u32::from_be_bytes(length)),
        };
        let total = BATCH_LENGTH_PREFIX_BYTES as u64 + batch_length;
        if total > (bytes.len() - end) as u64 {
            break;
        }
        end += total as usize;
    }
    end
}

/// What a batch whose length claims more bytes than a file holds (the
/// file ends inside it) is: [`overrun`]'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overrun {
    /// It can be what a writer cut short left: its records (or its
    /// compressed stream) run to the end of the bytes and stop inside.
    Torn,
    /// Its records, or its stream, read as none where the bytes are.
    Damaged,
    /// It ends before the bytes do, its length field damaged: its CRC32C is
    /// that of its bytes up to where the next batch's header begins, or all
    /// its records end, whole, before the bytes (uncompressed), or its
    /// compressed stream ends there, by its own framing, holding them all.
    /// What follows it is not this batch's: a later batch, or another
    /// batch's torn write.
    EndsEarly,
}

/// What `bytes`, the start of a batch of `format` whose length claims more
/// bytes than there are, is (see [`Overrun`]). Legacy batches and a header
/// cut short are [`Overrun::Torn`]: recovery judges those as it always did.
pub fn overrun(format: Format, bytes: &[u8]) -> Overrun {
    let header = match (format, kafka::decode_header(bytes, BATCH_BYTES_MAX)) {
        (Format::Legacy, _) => return Overrun::Torn,
        (Format::Kafka, Err(e)) if e.is_truncated() => return Overrun::Torn,
        (Format::Kafka, Err(_)) => return Overrun::Damaged,
        (Format::Kafka, Ok(header)) if header.total_bytes() <= bytes.len() as u64 => {
            return Overrun::Damaged
        }
        (Format::Kafka, Ok(header)) => header,
    };
    if kafka::ends_before(bytes, &header) {
        return Overrun::EndsEarly;
    }
    let records = &bytes[BATCH_HEADER_BYTES..];
    let mut walk = kafka::RecordsWalk::default();
    let mut plain = Decompressed::default();
    let torn = match header.codec() {
        Codec::None => {
            walk.walk(records, &header);
            if walk.all_whole(&header) {
                return Overrun::EndsEarly;
            }
            walk.waiting(&header)
        }
        codec
            if compression::unit_ends_whole(codec, records, &mut plain, |plain| {
                walk.walk(plain, &header)
            }) =>
        {
            return Overrun::EndsEarly
        }
        codec if compression::stream_runs_to_the_end(codec, records) => true,
        // The stream ends, or breaks: a cut where a block, frame or member
        // ends leaves a stream that ends, short of records.
        codec => match compression::decompress(codec, records, &mut plain) {
            Ok(plain) => kafka::records_run_to_the_end(plain, &header),
            // Only snappy has no mark of its end: a cut inside a block
            // breaks it.
            Err(_) => codec == Codec::Snappy,
        },
    };
    if torn {
        Overrun::Torn
    } else {
        Overrun::Damaged
    }
}

/// Whether `bytes`, the start of a batch of `format` whose length claims
/// more bytes than there are, can be what a writer cut short left:
/// [`overrun`] says [`Overrun::Torn`].
pub fn could_be_cut_short(format: Format, bytes: &[u8]) -> bool {
    overrun(format, bytes) == Overrun::Torn
}

const _: () = assert!(BATCH_RECORDS_MAX as u64 <= i32::MAX as u64);
const _: () = assert!(BATCH_BYTES_MAX as u64 <= i32::MAX as u64);

#[cfg(test)]
mod tests;
