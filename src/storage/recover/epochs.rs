//! Recovery of a partition's leader epoch file ([`crate::storage::epoch`]):
//! entries past the end of the recovered log are removed, and a file that
//! is missing or does not decode is rebuilt from the batch headers (epoch
//! 0 from the start, for a log without records).

use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::limits::BATCH_BYTES_MAX;
use crate::storage::epoch::{Epochs, EPOCH_FILE};
use crate::storage::fs::Vfs;
use crate::storage::record::{BatchHeader, BATCH_HEADER_BYTES};
use crate::storage::segment::SEGMENT_HEADER_BYTES;

use super::RecoveryReport;

/// The partition's epochs as recovery leaves them, and what was wrong with
/// its file (`None`: nothing, and nothing is to be written).
pub(super) fn recover_epochs(
    vfs: &dyn Vfs,
    dir: &Path,
    report: &RecoveryReport,
) -> Result<(Epochs, Option<String>)> {
    let (Some(first), Some(log_end)) = (report.segments.first(), report.next_offset()) else {
        return Ok((Epochs::new(), None));
    };
    let has_records = first.base_offset < log_end;
    let (mut epochs, mut problem) = match Epochs::read(vfs, dir)? {
        Some(Ok(epochs)) => (epochs, None),
        Some(Err(why)) => (
            rebuild(vfs, report)?,
            Some(format!(
                "{EPOCH_FILE} is damaged ({why}): rebuilt from the batches"
            )),
        ),
        None => {
            let mut epochs = rebuild(vfs, report)?;
            if !has_records {
                epochs.assign(0, first.base_offset);
            }
            let why = format!("{EPOCH_FILE} is missing: rebuilt from the batches");
            (epochs, Some(why))
        }
    };
    // An epoch starting at the end has no batch yet, and is kept: the log
    // was made leader in it and goes on in it.
    if epochs.truncate_from(log_end + 1) && problem.is_none() {
        problem = Some(format!(
            "{EPOCH_FILE}: epochs starting past the log's end (offset {log_end}) removed"
        ));
    }
    Ok((epochs, problem))
}

/// The epochs of the batches recovery kept, read from their headers.
fn rebuild(vfs: &dyn Vfs, report: &RecoveryReport) -> Result<Epochs> {
    let mut epochs = Epochs::new();
    let mut h = [0u8; BATCH_HEADER_BYTES];
    for segment in &report.segments {
        let h = &mut h[..segment.format.header_bytes()];
        let file = vfs.open_read(&segment.path).ctx("open", &segment.path)?;
        let mut position = SEGMENT_HEADER_BYTES as u64;
        while position < segment.bytes_valid {
            let n = (segment.bytes_valid - position).min(h.len() as u64) as usize;
            file.read_exact_at(&mut h[..n], position)
                .ctx("read", &segment.path)?;
            let header =
                BatchHeader::decode(segment.format, &h[..n], BATCH_BYTES_MAX).map_err(|e| {
                    Error::Corrupt {
                        path: segment.path.clone(),
                        position,
                        reason: e.to_string(),
                    }
                })?;
            epochs.assign(header.leader_epoch, header.base_offset);
            position += header.total_bytes();
        }
    }
    Ok(epochs)
}
