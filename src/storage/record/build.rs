//! Building a batch from records ([`BatchBuilder`]): the producer's side of
//! Kafka's RecordBatch v2 (the byte tables are in
//! [`crate::storage::record`]).

use super::compression::{self, Codec};
use super::cursor::{put_varint, varint_len, zigzag};
use super::kafka::{
    ATTRIBUTES_OFFSET, BASE_SEQUENCE_OFFSET, BASE_TIMESTAMP_OFFSET, BATCH_LENGTH_OFFSET,
    CRC_OFFSET, LAST_OFFSET_DELTA_OFFSET, MAGIC_OFFSET, MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET, PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET, RECORD_COUNT_OFFSET,
};
use super::{BATCH_HEADER_BYTES, BATCH_LENGTH_PREFIX_BYTES, MAGIC};
use crate::limits::{BATCH_RECORDS_MAX, HEADERS_PER_RECORD_MAX};

/// Builds one batch in a reusable buffer, with no allocation per record;
/// compressed as a whole when it is finished, if a codec is set.
#[derive(Debug, Default, Clone)]
pub struct BatchBuilder {
    /// The header's room, then the records uncompressed.
    pending: Pending,
    /// The finished compressed batch.
    packed: Vec<u8>,
    codec: Codec,
    level: Option<i32>,
}

/// What a builder of either format keeps of the batch it builds: its
/// buffer (the header's room, then the records), its record count, and
/// its first and largest timestamps.
#[derive(Debug, Default, Clone)]
pub(super) struct Pending {
    pub(super) buf: Vec<u8>,
    pub(super) record_count: u32,
    pub(super) base_timestamp: i64,
    pub(super) max_timestamp: i64,
}

impl Pending {
    /// Bytes the batch has now, a header of `header_bytes` included.
    pub(super) fn size_bytes(&self, header_bytes: usize) -> usize {
        header_bytes.max(self.buf.len())
    }

    /// Empties it, keeping its buffer.
    pub(super) fn clear(&mut self) {
        self.buf.clear();
        self.record_count = 0;
    }

    /// Whether a record with this timestamp can join the batch: its delta
    /// to the batch's first timestamp must fit an `i64`.
    pub(super) fn accepts_timestamp(&self, timestamp: i64) -> bool {
        self.record_count == 0 || timestamp.checked_sub(self.base_timestamp).is_some()
    }

    /// Starts a record with this timestamp and `headers` headers: checks
    /// the limits, makes the header's room of `header_bytes` before the
    /// first, and returns the record's timestamp delta, zigzag encoded.
    ///
    /// # Panics
    ///
    /// As [`BatchBuilder::push`] says.
    pub(super) fn begin(&mut self, timestamp: i64, headers: usize, header_bytes: usize) -> u64 {
        assert!(
            self.record_count < BATCH_RECORDS_MAX,
            "batch record count limit"
        );
        assert!(
            headers as u64 <= u64::from(HEADERS_PER_RECORD_MAX),
            "header limit"
        );
        if self.record_count == 0 {
            self.buf.clear();
            self.buf.resize(header_bytes, 0);
            self.base_timestamp = timestamp;
            self.max_timestamp = timestamp;
        }
        let delta = timestamp
            .checked_sub(self.base_timestamp)
            .expect("timestamp delta overflows: check accepts_timestamp first");
        zigzag(delta)
    }

    /// Ends the record [`Pending::begin`] started.
    pub(super) fn end(&mut self, timestamp: i64) {
        self.record_count += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp);
    }
}

impl BatchBuilder {
    /// An empty builder of uncompressed batches.
    pub fn new() -> BatchBuilder {
        BatchBuilder::default()
    }

    /// An empty builder whose batches are compressed with `codec` at
    /// `level` (the codec's default when `None`).
    ///
    /// # Panics
    ///
    /// On a level outside [`Codec::levels`]: callers check it when they
    /// parse it.
    pub fn compressed(codec: Codec, level: Option<i32>) -> BatchBuilder {
        if let (Some(level), Some(levels)) = (level, codec.levels()) {
            assert!(levels.contains(&level), "{codec} level {level}");
        }
        BatchBuilder {
            codec,
            level,
            ..BatchBuilder::default()
        }
    }

    /// The codec its batches are compressed with.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Records added since the last [`BatchBuilder::clear`].
    pub fn len(&self) -> u32 {
        self.pending.record_count
    }

    /// True when no record has been added.
    pub fn is_empty(&self) -> bool {
        self.pending.record_count == 0
    }

    /// Bytes the batch has now uncompressed, header included.
    pub fn size_bytes(&self) -> usize {
        self.pending.size_bytes(BATCH_HEADER_BYTES)
    }

    /// Bytes one more record of these parts adds with a timestamp delta and
    /// an offset delta of one byte each: at least that, and up to 18 bytes
    /// more (their varints) in a batch of over 64 records or spread over
    /// more than 64 ms.
    pub fn record_size(key: Option<&[u8]>, headers: &[(&[u8], &[u8])], value: &[u8]) -> usize {
        let body = body_bytes(0, 0, key, headers, Some(value));
        varint_len(zigzag(body as i64)) + body
    }

    /// Empties the builder, keeping its buffers.
    pub fn clear(&mut self) {
        self.pending.clear();
    }

    /// Whether a record with this timestamp can join the batch: its delta
    /// to the batch's first timestamp must fit an `i64` (timestamps are
    /// any `i64`, so two far apart cannot share a batch; the caller then
    /// finishes this batch and starts another).
    pub fn accepts_timestamp(&self, timestamp: i64) -> bool {
        self.pending.accepts_timestamp(timestamp)
    }

    /// Appends a record.
    ///
    /// # Panics
    ///
    /// When the batch would exceed [`BATCH_RECORDS_MAX`] records, a header
    /// list exceeds [`HEADERS_PER_RECORD_MAX`], or the timestamp is not
    /// [`BatchBuilder::accepts_timestamp`]: callers check those first.
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        headers: &[(&[u8], &[u8])],
        value: &[u8],
    ) {
        self.push_nullable(timestamp, key, headers, Some(value));
    }

    /// [`BatchBuilder::push`] of a record whose value may be null (`None`:
    /// a tombstone, in a compacted topic). Panics as it does.
    pub fn push_nullable(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        headers: &[(&[u8], &[u8])],
        value: Option<&[u8]>,
    ) {
        let delta = self
            .pending
            .begin(timestamp, headers.len(), BATCH_HEADER_BYTES);
        let offset_delta = zigzag(i64::from(self.pending.record_count));
        let body = body_bytes(delta, offset_delta, key, headers, value);
        let buf = &mut self.pending.buf;
        put_varint(buf, zigzag(body as i64));
        buf.push(0);
        put_varint(buf, delta);
        put_varint(buf, offset_delta);
        match key {
            Some(key) => put_bytes(buf, key),
            None => put_varint(buf, zigzag(-1)),
        }
        match value {
            Some(value) => put_bytes(buf, value),
            None => put_varint(buf, zigzag(-1)),
        }
        put_varint(buf, zigzag(headers.len() as i64));
        for (name, value) in headers {
            put_bytes(buf, name);
            put_bytes(buf, value);
        }
        self.pending.end(timestamp);
    }

    /// Writes the header (and compresses the records, with a codec) and
    /// returns the finished batch: base offset 0, partition leader epoch
    /// -1 (the log stamps both), no producer.
    ///
    /// # Panics
    ///
    /// When the builder is empty.
    pub fn finish(&mut self) -> &mut [u8] {
        self.finish_numbered((-1, -1, -1))
    }

    /// [`BatchBuilder::finish`] for an idempotent producer: the batch
    /// carries `(producer id, epoch, sequence of its first record)`
    /// ([`crate::storage::producers`]).
    ///
    /// # Panics
    ///
    /// When the builder is empty.
    pub fn finish_numbered(&mut self, (id, epoch, sequence): (i64, i16, i32)) -> &mut [u8] {
        assert!(self.pending.record_count > 0, "finish on an empty batch");
        let batch = if self.codec == Codec::None {
            &mut self.pending.buf
        } else {
            self.packed.clear();
            self.packed.extend_from_slice(&[0; BATCH_HEADER_BYTES]);
            let records = &self.pending.buf[BATCH_HEADER_BYTES..];
            compression::compress(self.codec, self.level, records, &mut self.packed);
            &mut self.packed
        };
        let batch_length = i32::try_from(batch.len() - BATCH_LENGTH_PREFIX_BYTES)
            .expect("a batch of at most BATCH_RECORDS_MAX checked records fits i32");
        let header = &mut batch[..BATCH_HEADER_BYTES];
        header[..8].fill(0);
        header[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
            .copy_from_slice(&batch_length.to_be_bytes());
        header[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
            .copy_from_slice(&(-1i32).to_be_bytes());
        header[MAGIC_OFFSET] = MAGIC;
        header[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2]
            .copy_from_slice(&(self.codec.bits() as i16).to_be_bytes());
        let last_delta = (self.pending.record_count - 1) as i32;
        header[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4]
            .copy_from_slice(&last_delta.to_be_bytes());
        header[BASE_TIMESTAMP_OFFSET..BASE_TIMESTAMP_OFFSET + 8]
            .copy_from_slice(&self.pending.base_timestamp.to_be_bytes());
        header[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
            .copy_from_slice(&self.pending.max_timestamp.to_be_bytes());
        header[PRODUCER_ID_OFFSET..PRODUCER_ID_OFFSET + 8].copy_from_slice(&id.to_be_bytes());
        header[PRODUCER_EPOCH_OFFSET..PRODUCER_EPOCH_OFFSET + 2]
            .copy_from_slice(&epoch.to_be_bytes());
        header[BASE_SEQUENCE_OFFSET..BASE_SEQUENCE_OFFSET + 4]
            .copy_from_slice(&sequence.to_be_bytes());
        header[RECORD_COUNT_OFFSET..RECORD_COUNT_OFFSET + 4]
            .copy_from_slice(&(self.pending.record_count as i32).to_be_bytes());
        let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
        batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        batch
    }
}

fn body_bytes(
    delta: u64,
    offset_delta: u64,
    key: Option<&[u8]>,
    headers: &[(&[u8], &[u8])],
    value: Option<&[u8]>,
) -> usize {
    let mut n = 1 + varint_len(delta) + varint_len(offset_delta) + value.map_or(1, bytes_len);
    n += key.map_or(1, bytes_len);
    n += varint_len(zigzag(headers.len() as i64));
    for (name, value) in headers {
        n += bytes_len(name) + bytes_len(value);
    }
    n
}

/// Bytes of a Kafka byte string: its zigzag length and itself.
fn bytes_len(bytes: &[u8]) -> usize {
    varint_len(zigzag(bytes.len() as i64)) + bytes.len()
}

fn put_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(buf, zigzag(bytes.len() as i64));
    buf.extend_from_slice(bytes);
}
