//! Control batches: the commit and abort markers a transaction coordinator
//! has written to each partition of a transaction (Kafka's
//! `EndTransactionMarker`), and that consumers never see as records.
//!
//! A marker is a batch of one record with the `transactional` and
//! `control` attributes set, the producer id and epoch of the transaction,
//! base sequence -1, no compression. Its record's key and value, Kafka's
//! (big-endian):
//!
//! | part | field | type | |
//! | --- | --- | --- | --- |
//! | key | version | i16 | 0 |
//! | key | type | i16 | 0 abort, 1 commit (others are not transaction markers) |
//! | value | version | i16 | 0 |
//! | value | coordinator_epoch | i32 | the coordinator's epoch when it wrote it |
//!
//! `tests/golden/control-batch.bin` pins the layout of a commit marker.

use super::build::BatchBuilder;
use super::kafka::{ATTRIBUTES_OFFSET, CRC_OFFSET};
use super::{Batch, BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL};

/// A marker record's key and value versions.
const MARKER_VERSION: i16 = 0;
/// The control types of the markers.
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// The largest control batch klog reads a marker from (a marker batch is
/// 78 bytes; anything much larger is not one).
pub const CONTROL_BATCH_BYTES_MAX: u64 = 1024;

/// How a transaction ended in one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// Committed (its records are read by read_committed consumers), or
    /// aborted (they are not).
    pub commit: bool,
    /// The epoch of the coordinator that wrote it.
    pub coordinator_epoch: i32,
}

impl Marker {
    /// "COMMIT" or "ABORT".
    pub fn name(&self) -> &'static str {
        if self.commit {
            "COMMIT"
        } else {
            "ABORT"
        }
    }
}

/// The control batch of `marker` for producer `(id, epoch)`, stamped
/// `timestamp`, its offsets for the log to assign.
pub fn marker_batch((id, epoch): (i64, i16), marker: Marker, timestamp: i64) -> Vec<u8> {
    let mut key = [0u8; 4];
    key[..2].copy_from_slice(&MARKER_VERSION.to_be_bytes());
    let kind = if marker.commit { COMMIT } else { ABORT };
    key[2..].copy_from_slice(&kind.to_be_bytes());
    let mut value = [0u8; 6];
    value[..2].copy_from_slice(&MARKER_VERSION.to_be_bytes());
    value[2..].copy_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut builder = BatchBuilder::new();
    builder.push(timestamp, Some(&key), &[], &value);
    let batch = builder.finish_numbered((id, epoch, -1));
    let attributes = ATTR_TRANSACTIONAL | ATTR_CONTROL;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    batch.to_vec()
}

/// The transaction marker of the control batch whose header is `header`
/// and whose bytes start `bytes` (at least the whole batch): `None` for a
/// batch that is not a control batch, not whole in `bytes`, larger than
/// [`CONTROL_BATCH_BYTES_MAX`], or whose record is not a commit or an
/// abort. Its CRC32C is not checked again (it was, as it was appended).
pub fn marker_of(header: &BatchHeader, bytes: &[u8]) -> Option<Marker> {
    if !header.is_control() || header.total_bytes() > CONTROL_BATCH_BYTES_MAX {
        return None;
    }
    let bytes = bytes.get(..header.total_bytes() as usize)?;
    let batch = Batch {
        header: *header,
        bytes,
    };
    let record = batch.records(CONTROL_BATCH_BYTES_MAX as u32).next()?.ok()?;
    let key = record.key?;
    let value = record.value;
    let field = |b: &[u8], at: usize| Some(i16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?));
    if key.len() != 4 || field(key, 0)? != MARKER_VERSION || value.len() < 6 {
        return None;
    }
    let commit = match field(key, 2)? {
        ABORT => false,
        COMMIT => true,
        _ => return None,
    };
    let coordinator_epoch = i32::from_be_bytes(value[2..6].try_into().ok()?);
    Some(Marker {
        commit,
        coordinator_epoch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::record::Format;

    #[test]
    fn a_marker_batch_reads_back_as_its_marker() {
        for commit in [true, false] {
            let marker = Marker {
                commit,
                coordinator_epoch: 7,
            };
            let batch = marker_batch((42, 3), marker, 1_700_000_000_000);
            let decoded = Batch::decode(Format::Kafka, &batch, 1 << 20).expect("its CRC32C holds");
            let h = decoded.header;
            assert!(h.is_control() && h.is_transactional());
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (42, 3, -1)
            );
            assert_eq!(h.record_count, 1);
            assert_eq!(marker_of(&h, &batch), Some(marker));
        }
    }

    #[test]
    fn only_a_control_batch_of_a_commit_or_an_abort_is_a_marker() {
        let marker = Marker {
            commit: true,
            coordinator_epoch: 0,
        };
        let mut batch = marker_batch((1, 0), marker, 0);
        let h = Batch::decode(Format::Kafka, &batch, 1 << 20)
            .unwrap()
            .header;
        let plain = BatchHeader {
            attributes: ATTR_TRANSACTIONAL,
            ..h
        };
        assert_eq!(marker_of(&plain, &batch), None, "not a control batch");
        assert_eq!(marker_of(&h, &batch[..batch.len() - 1]), None, "cut short");
        // The key's type: 5 is no marker (KRaft's control records are others).
        let key_type = batch.len() - 6 - 1 - 1 - 2;
        batch[key_type..key_type + 2].copy_from_slice(&5i16.to_be_bytes());
        assert_eq!(marker_of(&h, &batch), None, "another control type");
    }
}
