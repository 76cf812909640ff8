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
/// bytes more per record than its legacy form.
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
fn convert_one(
    bytes: &[u8],
    builder: &mut BatchBuilder,
    out: &mut Vec<u8>,
) -> Result<usize, DecodeError> {
    let batch = Batch::decode(Format::Legacy, bytes, BATCH_BYTES_MAX)?;
    batch.validate(RECORD_BYTES_MAX_LIMIT)?;
    builder.clear();
    let mut headers: Vec<(&[u8], &[u8])> = Vec::new();
    for record in batch.records(RECORD_BYTES_MAX_LIMIT) {
        let record = record?;
        headers.clear();
        headers.extend(record.headers());
        if !builder.accepts_timestamp(record.timestamp) {
            return Err(DecodeError::Malformed(
                "legacy batch: timestamps too far apart for one Kafka batch",
            ));
        }
        builder.push(record.timestamp, record.key, &headers, record.value);
    }
    let kafka = builder.finish();
    stamp(kafka, batch.header.base_offset, batch.header.leader_epoch);
    out.extend_from_slice(kafka);
    Ok(batch.total_bytes())
}
