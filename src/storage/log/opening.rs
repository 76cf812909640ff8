//! Opening a log's segments: recovery, then each segment recovery kept
//! opened with the extent it found, again for a reader that the writer's
//! renames (the cleaner's) overtook.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::{recover_on_open, roll, LogConfig};
use crate::error::{Error, Result};
use crate::storage::fs::Vfs;
use crate::storage::recover::RecoveryReport;
use crate::storage::segment::Segment;

/// Recovers the log in `dir` and opens the segments recovery kept. A
/// reader (not `writable`) whose segments the writer changed between the
/// two (the cleaner replaces segments by renames) tries again, a few
/// times: it must not read a file with the extent of the one it replaced.
pub(super) fn recover_and_open(
    vfs: &Arc<dyn Vfs>,
    dir: &Path,
    config: &LogConfig,
    writable: bool,
) -> Result<(RecoveryReport, BTreeMap<u64, Segment>)> {
    const TRIES: u32 = 10;
    for attempt in 1.. {
        let opened = (|| {
            let mut recovery = recover_on_open(&**vfs, dir, config, writable)?;
            if writable {
                let recover = || recover_on_open(&**vfs, dir, config, true);
                recovery = roll::adopt_rolled(&**vfs, dir, recovery, recover)?;
            }
            let segments = open_segments(vfs, &recovery, writable)?;
            Ok(segments.map(|segments| (recovery, segments)))
        })();
        match opened {
            Ok(Some(opened)) => return Ok(opened),
            Ok(None) if attempt < TRIES => {}
            Err(_) if !writable && attempt < TRIES => {}
            Ok(None) => {
                return Err(Error::Config(format!(
                    "{}: its segments changed under this reader {TRIES} times",
                    dir.display()
                )))
            }
            Err(e) => return Err(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    unreachable!("the loop returns")
}

/// Opens the segments recovery kept, each with the extent it found;
/// `None` when a reader finds one changed since (replaced by a cleaned
/// one: another header, a shorter file).
fn open_segments(
    vfs: &Arc<dyn Vfs>,
    recovery: &RecoveryReport,
    writable: bool,
) -> Result<Option<BTreeMap<u64, Segment>>> {
    let mut segments = BTreeMap::new();
    for report in &recovery.segments {
        let mut segment = Segment::open(vfs, &report.path, writable)?;
        if !writable && (segment.end != report.end || segment.size < report.bytes_valid) {
            return Ok(None);
        }
        segment.set_extent(
            report.bytes_valid,
            report.next_offset,
            report.max_timestamp,
            report.entries.clone(),
        );
        if report.records_valid > 0 || report.end.is_some() {
            // The last write to a segment is the append of its newest
            // record (or, of a cleaned one, the time the clean gave it);
            // its first append is at least that old.
            segment.last_append_ms = segment.file().ok().and_then(|f| f.modified_ms().ok());
            segment.first_append_ms = segment.last_append_ms;
        }
        segments.insert(segment.base_offset, segment);
    }
    Ok(Some(segments))
}
