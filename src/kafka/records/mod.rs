//! Kafka's record batches at the Kafka listener's edge.
//!
//! klog stores Kafka's RecordBatch v2 as the producer sent it, compressed
//! or not ([`crate::storage::record`] has the byte tables): a produce's
//! batches are not converted, only checked ([`check_produce`]), all of a
//! partition's before any is appended, so that a partition's records are
//! stored all or none. A fetch serves the stored bytes; only a segment
//! written before klog stored Kafka's format is converted at the edge
//! ([`crate::storage::record::legacy::to_kafka`]).
//!
//! # Refusals
//!
//! Each refusal is a [`RecordsError`] carrying the Kafka error code to
//! answer with ([`error_code`]):
//!
//! | code | name | for |
//! |---:|---|---|
//! | 2 | [`CORRUPT_MESSAGE`] | a batch cut short, a negative or too small length, an unknown magic, a CRC32C mismatch, compressed records their codec cannot read |
//! | 10 | [`MESSAGE_TOO_LARGE`] | a record over the broker's `--max-record-bytes`, a batch over klog's batch limits, records that decompress past the batch limit |
//! | 43 | [`UNSUPPORTED_FOR_MESSAGE_FORMAT`] | magic 0 or 1 (message formats v0 and v1) |
//! | 76 | [`UNSUPPORTED_COMPRESSION_TYPE`] | compression types 5 to 7 |
//! | 87 | [`INVALID_RECORD`] | a transactional or control batch; counts, offset deltas or record fields that do not add up (checked after the CRC32C, so these are the bytes the producer meant) |
//! | 7 | [`REQUEST_TIMED_OUT`] | the process's room for decompressed records is held by other batches now: retried |
//!
//! # Limits and cost
//!
//! Checking costs a CRC32C and a scan of each batch's records; a
//! compressed batch is decompressed as a stream into one buffer for the
//! whole call, at most [`BATCH_BYTES_MAX`], its room taken from one budget
//! for the whole process ([`crate::storage::record::compression`]), and
//! dropped once checked: what is stored is what was sent.

use std::fmt;

use super::{
    CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, REQUEST_TIMED_OUT,
    UNSUPPORTED_COMPRESSION_TYPE, UNSUPPORTED_FOR_MESSAGE_FORMAT,
};
use crate::error::DecodeError;
use crate::limits::BATCH_BYTES_MAX;
use crate::storage::log::{check_keys, check_producer_batch};
use crate::storage::record::{Batch, BatchHeader, Decompressed, Format};

/// A produce refused, with the Kafka error code to answer it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsError {
    /// The Kafka error code (see the module's table).
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
}

impl From<DecodeError> for RecordsError {
    fn from(e: DecodeError) -> RecordsError {
        RecordsError::new(error_code(&e), e.to_string())
    }
}

impl fmt::Display for RecordsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (Kafka error {})", self.message, self.error_code)
    }
}

impl std::error::Error for RecordsError {}

/// The Kafka error code a batch that does not decode is refused with.
pub fn error_code(e: &DecodeError) -> i16 {
    match e {
        DecodeError::Truncated { what, .. } if what.starts_with("record") => INVALID_RECORD,
        DecodeError::Truncated { .. }
        | DecodeError::CrcMismatch { .. }
        | DecodeError::Compression { .. } => CORRUPT_MESSAGE,
        DecodeError::TooLarge { .. } => MESSAGE_TOO_LARGE,
        DecodeError::Unsupported { what: "magic", .. } => UNSUPPORTED_FOR_MESSAGE_FORMAT,
        DecodeError::Unsupported { .. } => UNSUPPORTED_COMPRESSION_TYPE,
        DecodeError::Busy { .. } => REQUEST_TIMED_OUT,
        DecodeError::Malformed(m) if *m == TOO_MANY_RECORDS => MESSAGE_TOO_LARGE,
        DecodeError::Malformed(m) if m.starts_with("record") => INVALID_RECORD,
        DecodeError::Malformed(m) if CORRUPT_FRAMING.contains(m) => CORRUPT_MESSAGE,
        DecodeError::Malformed(_) => INVALID_RECORD,
    }
}

/// The header's framing faults: bytes that are not a batch at all.
const CORRUPT_FRAMING: [&str; 2] = [
    "batch: unknown magic",
    "batch: length too small for its header",
];
/// A count within Kafka's rules and over klog's batch limit.
const TOO_MANY_RECORDS: &str = "batch: more records than klog's batch limit";

/// Checks a produce partition's `records` (one or more Kafka batches back
/// to back) as the log will store them ([`crate::storage::log::check_batch`]),
/// and as a broker without transactions takes them (no transactional or
/// control batch; with `keys_required`, a compacted topic's, no record
/// without a key), appending each batch's header to `headers` in order,
/// with its records' largest timestamp as its maximum (what the log
/// writes there if the producer wrote another, as Kafka's broker does). On
/// an error `headers` is left as it was. Empty records pass, holding no
/// batch: whether an empty produce is acceptable is the caller's call.
pub fn check_produce(
    records: &[u8],
    (record_bytes_max, keys_required): (u32, bool),
    headers: &mut Vec<BatchHeader>,
) -> Result<(), RecordsError> {
    let start = headers.len();
    let result = check_all(records, (record_bytes_max, keys_required), headers);
    if result.is_err() {
        headers.truncate(start);
    }
    result
}

fn check_all(
    records: &[u8],
    (record_bytes_max, keys_required): (u32, bool),
    headers: &mut Vec<BatchHeader>,
) -> Result<(), RecordsError> {
    let mut scratch = Decompressed::default();
    let mut rest = records;
    while !rest.is_empty() {
        let batch = Batch::decode(Format::Kafka, rest, BATCH_BYTES_MAX)?;
        headers.push(check_producer_batch(
            &batch,
            &mut scratch,
            record_bytes_max,
        )?);
        if keys_required {
            check_keys(&batch, &mut scratch, record_bytes_max)?;
        }
        rest = &rest[batch.total_bytes()..];
    }
    Ok(())
}
