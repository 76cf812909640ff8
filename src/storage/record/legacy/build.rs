//! Building a legacy batch from records ([`BatchBuilder`]), the format of
//! [`crate::storage::record::legacy`]: no longer written by klog, built
//! only to make old data for tests and examples.

use super::super::build::Pending;
use super::super::cursor::{put_varint, varint_len};
use super::super::BATCH_LENGTH_PREFIX_BYTES;
use super::{
    put_u32, seal_header, ATTRIBUTES_OFFSET, ATTR_HEADERS, ATTR_KEY, BASE_OFFSET_OFFSET,
    BASE_TIMESTAMP_OFFSET, BATCH_HEADER_BYTES, BATCH_LENGTH_OFFSET, LEADER_EPOCH_OFFSET, MAGIC,
    MAGIC_OFFSET, MAX_TIMESTAMP_OFFSET, RECORD_COUNT_OFFSET, RESERVED_OFFSET,
};

/// Builds one legacy batch in a reusable buffer, with no allocation per record.
#[derive(Debug, Default, Clone)]
pub struct BatchBuilder {
    pending: Pending,
}

impl BatchBuilder {
    /// An empty builder.
    pub fn new() -> BatchBuilder {
        BatchBuilder::default()
    }

    /// Records added since the last [`BatchBuilder::clear`].
    pub fn len(&self) -> u32 {
        self.pending.record_count
    }

    /// True when no record has been added.
    pub fn is_empty(&self) -> bool {
        self.pending.record_count == 0
    }

    /// Bytes the batch has now, header included.
    pub fn size_bytes(&self) -> usize {
        self.pending.size_bytes(BATCH_HEADER_BYTES)
    }

    /// Bytes one more record of these parts would add.
    pub fn record_size(key: Option<&[u8]>, headers: &[(&[u8], &[u8])], value: &[u8]) -> usize {
        let body = body_bytes(0, key, headers, value);
        varint_len(body as u64 + 4) + 4 + body
    }

    /// Empties the builder, keeping its buffer.
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
    /// When the batch would exceed [`BATCH_RECORDS_MAX`](crate::limits::BATCH_RECORDS_MAX) records, a header
    /// list exceeds [`HEADERS_PER_RECORD_MAX`](crate::limits::HEADERS_PER_RECORD_MAX), or the timestamp is not
    /// [`BatchBuilder::accepts_timestamp`]: callers check those first.
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        headers: &[(&[u8], &[u8])],
        value: &[u8],
    ) {
        let delta = self
            .pending
            .begin(timestamp, headers.len(), BATCH_HEADER_BYTES);
        let body = body_bytes(delta, key, headers, value);
        let buf = &mut self.pending.buf;
        put_varint(buf, body as u64 + 4);
        let crc_at = buf.len();
        buf.extend_from_slice(&[0; 4]);
        let mut attributes = 0;
        if key.is_some() {
            attributes |= ATTR_KEY;
        }
        if !headers.is_empty() {
            attributes |= ATTR_HEADERS;
        }
        buf.push(attributes);
        put_varint(buf, delta);
        if let Some(key) = key {
            put_bytes_prefixed(buf, key);
        }
        if !headers.is_empty() {
            put_varint(buf, headers.len() as u64);
            for (name, value) in headers {
                put_bytes_prefixed(buf, name);
                put_bytes_prefixed(buf, value);
            }
        }
        buf.extend_from_slice(value);
        let crc = crc32fast::hash(&buf[crc_at + 4..]);
        put_u32(buf, crc_at, crc);
        self.pending.end(timestamp);
    }

    /// Writes the header and returns the finished batch (magic 2, base
    /// offset 0, leader epoch 0: the log stamps both).
    ///
    /// # Panics
    ///
    /// When the builder is empty.
    pub fn finish(&mut self) -> &mut [u8] {
        assert!(self.pending.record_count > 0, "finish on an empty batch");
        let batch_length = u32::try_from(self.pending.buf.len() - BATCH_LENGTH_PREFIX_BYTES)
            .expect("a batch of at most BATCH_RECORDS_MAX checked records fits u32");
        let buf = &mut self.pending.buf;
        buf[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].fill(0);
        put_u32(buf, BATCH_LENGTH_OFFSET, batch_length);
        buf[MAGIC_OFFSET] = MAGIC;
        buf[ATTRIBUTES_OFFSET] = 0;
        buf[RESERVED_OFFSET..RESERVED_OFFSET + 2].fill(0);
        put_u32(buf, RECORD_COUNT_OFFSET, self.pending.record_count);
        buf[BASE_TIMESTAMP_OFFSET..BASE_TIMESTAMP_OFFSET + 8]
            .copy_from_slice(&self.pending.base_timestamp.to_le_bytes());
        buf[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
            .copy_from_slice(&self.pending.max_timestamp.to_le_bytes());
        put_u32(buf, LEADER_EPOCH_OFFSET, 0);
        seal_header(buf);
        &mut self.pending.buf
    }
}

fn body_bytes(delta: u64, key: Option<&[u8]>, headers: &[(&[u8], &[u8])], value: &[u8]) -> usize {
    let mut n = 1 + varint_len(delta) + value.len();
    if let Some(key) = key {
        n += varint_len(key.len() as u64) + key.len();
    }
    if !headers.is_empty() {
        n += varint_len(headers.len() as u64);
        for (name, value) in headers {
            n += varint_len(name.len() as u64) + name.len();
            n += varint_len(value.len() as u64) + value.len();
        }
    }
    n
}

fn put_bytes_prefixed(buf: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}
