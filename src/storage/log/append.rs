//! Appending: a producer's batch checked whole and stamped with its
//! offsets and the log's epoch, and the active segment it goes to (rolled
//! when full, old, or of a format the log no longer writes).

use super::{AppendInfo, Log, LogConfig};
use crate::error::{Error, Result};
use crate::limits;
use crate::storage::record::{self, Batch, BatchHeader, DecodeError, Format};

impl Log {
    /// Appends a producer's batch, a Kafka RecordBatch v2: checks it whole
    /// ([`check_batch`]: its CRC32C, framing and limits, a compressed one
    /// decompressed to check it and stored as sent), assigns its offsets
    /// and the log's leader epoch by writing its `baseOffset` and
    /// `partitionLeaderEpoch` ([`record::stamp`]: nothing the CRC covers),
    /// and writes it. Nothing is written when a check fails.
    pub fn append(&mut self, batch: &mut [u8], now_ms: i64) -> Result<AppendInfo> {
        let header = self.check_whole(batch)?;
        self.append_checked(batch, header, now_ms)
    }

    /// [`check_batch`], and no byte after the batch.
    pub(super) fn check_whole(&mut self, batch: &[u8]) -> Result<BatchHeader> {
        assert!(self.writable, "append to a read-only log");
        self.check_failed()?;
        let header = check_batch(batch, &self.config)?;
        if batch.len() as u64 != header.total_bytes() {
            return Err(Error::InvalidBatch(DecodeError::Malformed(
                "batch: trailing bytes",
            )));
        }
        Ok(header)
    }

    /// [`Log::append`] of a batch the caller checked with [`check_batch`]
    /// (or stricter) against this log's configuration, `header` its
    /// decoded header: the Kafka listener checks all of a produce's batches
    /// before it appends any, and need not check them twice.
    pub fn append_checked(
        &mut self,
        batch: &mut [u8],
        header: BatchHeader,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        assert!(self.writable, "append to a read-only log");
        assert_eq!(batch.len() as u64, header.total_bytes(), "a checked batch");
        self.check_failed()?;
        self.fresh_producers()?;
        let result = self.write_batch(batch, header, now_ms);
        self.note_undo();
        if result.is_ok()
            && self.write_failing
            && self.active().written_offset() == self.next_offset()
        {
            self.write_failing = false;
        }
        result
    }

    /// Writes a checked batch: assigns its offsets and epoch.
    fn write_batch(
        &mut self,
        batch: &mut [u8],
        header: BatchHeader,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        self.maybe_roll(batch.len() as u64, header.record_count.into(), now_ms)?;
        let base_offset = self.next_offset();
        self.record_epoch(self.leader_epoch, base_offset)?;
        record::stamp(batch, base_offset, self.leader_epoch);
        let header = BatchHeader {
            base_offset,
            leader_epoch: self.leader_epoch,
            ..as_stored(batch, header)
        };
        self.write_to_active(batch, &header, now_ms)?;
        Ok(AppendInfo {
            base_offset,
            last_offset: header.last_offset(),
            record_count: header.record_count,
            epoch: self.undos.epoch(),
        })
    }

    /// Appends a batch whose header is final (its base offset the next
    /// offset) to the active segment: gathered or written, counted as
    /// unflushed, flushed when the flush policy says so.
    pub(super) fn write_to_active(
        &mut self,
        batch: &[u8],
        header: &BatchHeader,
        now_ms: i64,
    ) -> Result<()> {
        let interval_bytes = self.config.index_interval_bytes;
        // Readers that see unflushed records need them in the file now;
        // after a failed write, so does the producer (its own error).
        let buffer_bytes = if self.config.hides_unflushed() && !self.write_failing {
            self.config.write_buffer_bytes
        } else {
            0
        };
        self.active_mut()
            .append(batch, header, interval_bytes, now_ms, buffer_bytes)?;
        // In the log now, whatever becomes of the flush below.
        self.apply_producer(header, batch);
        self.unflushed_records += u64::from(header.record_count);
        self.oldest_unflushed_ms.get_or_insert(now_ms);
        if !self.config.hides_unflushed() {
            self.visible = (self.active().base_offset, self.active().size);
        }
        if self
            .config
            .flush_messages
            .is_some_and(|n| self.unflushed_records >= n)
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Rolls before an append of `batch_bytes` reaching `offsets` past
    /// the next offset, when the active segment is full, old or legacy.
    pub(super) fn maybe_roll(&mut self, batch_bytes: u64, offsets: u64, now_ms: i64) -> Result<()> {
        let active = self.active();
        let too_old = match (self.config.segment_age_ms, active.first_append_ms) {
            (Some(age), Some(first)) => {
                !active.is_empty() && now_ms.saturating_sub(first) >= age as i64
            }
            _ => false,
        };
        // A legacy segment is never appended to: the next batch starts a
        // segment of the format the log writes (an empty one is that
        // segment, once its header says so).
        let legacy = active.format != Format::Kafka;
        if legacy && active.is_empty() {
            return self.active_mut().reformat();
        }
        if too_old || legacy || active.is_full(batch_bytes, self.config.segment_bytes, offsets) {
            self.roll()?;
        }
        Ok(())
    }
}

/// Writes the batch's create time as the checks found it (the records'
/// largest timestamp; `header` says it), as the log stores it, and
/// returns its header as stored (its CRC32C the new one if that changed).
pub(super) fn as_stored(batch: &mut [u8], header: BatchHeader) -> BatchHeader {
    let crc = record::set_create_time_crc(batch, header.max_timestamp).unwrap_or(header.crc);
    BatchHeader {
        crc,
        attributes: header.attributes & !record::ATTR_LOG_APPEND_TIME,
        ..header
    }
}

/// Checks a producer's batch against the configured limits, returning
/// its header with its records' largest timestamp as its maximum (what
/// the log writes there if the producer wrote another): a whole Kafka
/// RecordBatch v2 ([`check_stored_batch`]) whose offsets are its records'
/// indexes (`lastOffsetDelta` is `recordCount - 1`), not a control batch
/// (the log writes those itself, [`Log::append_marker`]), and when
/// transactional, numbered by a producer.
pub fn check_batch(batch: &[u8], config: &LogConfig) -> Result<BatchHeader> {
    let decoded = Batch::decode(Format::Kafka, batch, limits::BATCH_BYTES_MAX)?;
    let mut scratch = record::Decompressed::default();
    let header = check_producer_batch(&decoded, &mut scratch, config.record_bytes_max)?;
    if config.compact {
        check_keys(&decoded, &mut scratch, config.record_bytes_max)?;
    }
    Ok(header)
}

/// Checks that every record of a producer's batch has a key: what a
/// compacted topic takes (Kafka refuses the others with INVALID_RECORD).
pub fn check_keys(
    batch: &Batch<'_>,
    scratch: &mut record::Decompressed<'_>,
    record_bytes_max: u32,
) -> std::result::Result<(), DecodeError> {
    for r in batch.records_in(scratch, record_bytes_max)? {
        if r?.key.is_none() {
            return Err(DecodeError::Malformed(
                "record without a key: a compacted topic keeps each key's latest record, and takes only records with a key",
            ));
        }
    }
    Ok(())
}

/// The checks of [`check_batch`] past its framing, on a batch decoded
/// already, decompressing into `scratch` (a producer's batch is refused
/// for its flags and counts before its records are read).
pub fn check_producer_batch(
    batch: &Batch<'_>,
    scratch: &mut record::Decompressed<'_>,
    record_bytes_max: u32,
) -> std::result::Result<BatchHeader, DecodeError> {
    let header = batch.header;
    if header.is_control() {
        return Err(DecodeError::Malformed(
            "batch: a control batch from a producer (only the broker writes those)",
        ));
    }
    if header.is_transactional() && header.producer_id < 0 {
        return Err(DecodeError::Malformed(
            "batch: transactional without a producer id",
        ));
    }
    if header.producer_id >= 0 && (header.producer_epoch < 0 || header.base_sequence < 0) {
        return Err(DecodeError::Malformed(
            "batch: a producer id without an epoch and a sequence",
        ));
    }
    if header.last_offset_delta != header.record_count - 1 {
        return Err(DecodeError::Malformed(
            "batch: last offset delta differs from its record count",
        ));
    }
    let max_timestamp = batch.max_timestamp_in(scratch, record_bytes_max)?;
    Ok(BatchHeader {
        max_timestamp,
        ..header
    })
}

/// Checks a batch as the log stores it (a producer's, or a leader's that a
/// follower copies): its header, CRC32C and every record against the
/// configured limits (a compressed batch is decompressed, within the
/// process's budget, to check it), returning its header.
pub fn check_stored_batch(batch: &[u8], config: &LogConfig) -> Result<BatchHeader> {
    let decoded = Batch::decode(Format::Kafka, batch, limits::BATCH_BYTES_MAX)?;
    decoded.validate(config.record_bytes_max)?;
    Ok(decoded.header)
}
