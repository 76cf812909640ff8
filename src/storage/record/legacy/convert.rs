//! Legacy batches served as Kafka's RecordBatch v2: how a fetch, on either
//! listener, serves a segment written before klog stored Kafka's format.

use super::super::{stamp, whole_batches_len, Batch, BatchBuilder, DecodeError, Format};
use crate::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};

/// Appends to `out` one Kafka RecordBatch v2 per whole legacy batch at the
/// front of `legacy` (a byte range read from a legacy segment) and returns
/// the legacy bytes converted. A batch cut short at the end of `legacy` is
/// left (0 when the first one is). Every batch header and every record is
/// checked, CRC included, before it is converted: a damaged one is an
/// error, never served. On an error `out` is left as it was.
///
/// A converted batch has the same offsets, leader epoch, timestamps, keys,
/// values and headers, no compression and no producer; it costs a few
/// bytes more per record than its legacy form (a legacy batch near the
/// batch limit becomes two Kafka batches).
pub fn to_kafka(legacy: &[u8], out: &mut Vec<u8>) -> Result<usize, DecodeError> {
    let start = out.len();
    let whole = whole_batches_len(Format::Legacy, legacy);
    let mut builder = BatchBuilder::new();
    let mut done = 0;
    while done < whole {
        match convert_one(&legacy[done..whole], &mut builder, out) {
            Ok(bytes) => done += bytes,
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// Converts the legacy batch at the start of `bytes`; returns its length.
/// A legacy batch whose Kafka form would pass [`BATCH_BYTES_MAX`] (each
/// record costs a few bytes more), or whose timestamps one Kafka batch
/// cannot hold, becomes more than one, each with its first record's
/// offset: every reader takes them, and the offsets are the same.
fn convert_one(
    bytes: &[u8],
    builder: &mut BatchBuilder,
    out: &mut Vec<u8>,
) -> Result<usize, DecodeError> {
    let batch = Batch::decode(Format::Legacy, bytes, BATCH_BYTES_MAX)?;
    batch.validate(RECORD_BYTES_MAX_LIMIT)?;
    let epoch = batch.header.leader_epoch;
    builder.clear();
    let mut base_offset = batch.header.base_offset;
    let mut headers: Vec<(&[u8], &[u8])> = Vec::new();
    for record in batch.records(RECORD_BYTES_MAX_LIMIT) {
        let record = record?;
        headers.clear();
        headers.extend(record.headers());
        // Its deltas' varints may take up to 18 bytes more than
        // record_size counts.
        let size = BatchBuilder::record_size(record.key, &headers, record.value) + 18;
        let full = builder.size_bytes() + size > BATCH_BYTES_MAX as usize;
        if !builder.is_empty() && (full || !builder.accepts_timestamp(record.timestamp)) {
            finish(builder, base_offset, epoch, out);
            base_offset = record.offset;
        }
        builder.push(record.timestamp, record.key, &headers, record.value);
    }
    finish(builder, base_offset, epoch, out);
    Ok(batch.total_bytes())
}

/// Appends the builder's batch to `out`, stamped, and empties it.
fn finish(builder: &mut BatchBuilder, base_offset: u64, epoch: u32, out: &mut Vec<u8>) {
    let kafka = builder.finish();
    stamp(kafka, base_offset, epoch);
    out.extend_from_slice(kafka);
    builder.clear();
}
