//! A partition's log start once DeleteRecords moved it above its first
//! segment (Kafka's `log-start-offset-checkpoint`): records below it are
//! gone for readers (a fetch below it is out of range, ListOffsets'
//! earliest answers it), and the segments wholly below it go at the next
//! retention check ([`Log::take_expired`]). Offsets never change: the
//! records it hides keep theirs until their segment goes.
//!
//! # The file
//!
//! `log-start` in the partition directory, text, written whole (temporary
//! file, fsync, rename, directory fsync) before the new start is shown:
//!
//! ```text
//! klog-log-start 1     format and version
//! 1234                 the log's start offset
//! ```
//!
//! A file that does not parse counts as none: the records it hid show
//! again until their segment goes, and nothing stored is lost.

use std::path::Path;

use super::Log;
use crate::error::{Error, Result};
use crate::storage::fs::{self, Vfs};

/// The file's name, in the partition directory.
pub const LOG_START_FILE: &str = "log-start";
const HEADER: &str = "klog-log-start 1";

/// The file's bytes for `start`.
pub fn encode(start: u64) -> Vec<u8> {
    format!("{HEADER}\n{start}\n").into_bytes()
}

/// The start a file's text says, if it is one this version wrote.
pub fn decode(text: &str) -> Option<u64> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let start = lines.next()?.parse().ok()?;
    lines.next().is_none().then_some(start)
}

/// The start recorded in the partition directory `dir` (0: none, or a
/// file that does not parse).
pub(super) fn read(vfs: &dyn Vfs, dir: &Path) -> u64 {
    fs::read_small(vfs, &dir.join(LOG_START_FILE))
        .and_then(|text| decode(&text))
        .unwrap_or(0)
}

impl Log {
    /// Moves the log's start up to `offset` (Kafka's DeleteRecords),
    /// durably before it is shown, and answers the start. An offset at or
    /// below the start changes nothing; one past what readers may see is
    /// refused ([`Error::OffsetOutOfRange`]): records not yet visible are
    /// not deleted.
    pub fn delete_records_before(&mut self, offset: u64) -> Result<u64> {
        let (start, end) = (self.start_offset(), self.visible_offset());
        if offset <= start {
            return Ok(start);
        }
        if offset > end {
            return Err(Error::OffsetOutOfRange { offset, start, end });
        }
        if let Some(why) = &self.failed {
            return Err(Error::Config(format!("the log stopped: {why}")));
        }
        fs::write_atomic(&*self.vfs, &self.dir, LOG_START_FILE, &encode(offset))?;
        self.floor = offset;
        Ok(offset)
    }
}

impl Log {
    /// Where the log's first segment starts, whatever DeleteRecords said.
    pub(super) fn segments_start(&self) -> u64 {
        self.segments.values().next().map_or(0, |s| s.base_offset)
    }

    /// After the log was cut below its start (a truncation, a recovery):
    /// the start comes down to the cut, durably, so that records appended
    /// after it are never hidden or deleted as if DeleteRecords had
    /// deleted them (Kafka's log start follows a full truncation too).
    pub(super) fn lower_start_to_end(&mut self) -> Result<()> {
        let end = self.next_offset();
        if self.floor <= end {
            return Ok(());
        }
        if self.writable {
            fs::write_atomic(&*self.vfs, &self.dir, LOG_START_FILE, &encode(end))?;
        }
        self.floor = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::log::{LogConfig, OpenOptions};
    use crate::storage::record::BatchBuilder;
    use std::sync::Arc;

    fn open(sim: &SimFs) -> Log {
        let config = LogConfig {
            segment_bytes: crate::limits::SEGMENT_BYTES_MIN,
            index_bytes_max: 4096,
            retention_ms: None,
            ..LogConfig::default()
        };
        let options = OpenOptions {
            writable: true,
            lock: false,
        };
        Log::open(Arc::new(sim.clone()), Path::new("/p/t-0"), config, options).unwrap()
    }

    /// A log of 60 records of 200 bytes over several segments.
    fn filled(sim: &SimFs) -> Log {
        sim.create_dir_all_durable(Path::new("/p/t-0"));
        let mut log = open(sim);
        for i in 0..60u8 {
            let mut b = BatchBuilder::new();
            b.push(0, None, &[], &[i; 200]);
            log.append(&mut b.finish().to_vec(), 0).unwrap();
        }
        log.flush().unwrap();
        assert!(log.segments().count() >= 3);
        log
    }

    #[test]
    fn deleted_records_are_gone_for_readers_and_their_segments_go() {
        let sim = SimFs::new();
        let mut log = filled(&sim);
        assert_eq!(log.delete_records_before(25).unwrap(), 25);
        assert_eq!(log.start_offset(), 25);
        assert!(matches!(
            log.read(24, 1 << 20),
            Err(Error::OffsetOutOfRange { .. })
        ));
        assert!(log.read(25, 1 << 20).unwrap().is_some());
        // Lower: nothing changes; past the end: refused.
        assert_eq!(log.delete_records_before(10).unwrap(), 25);
        assert!(log.delete_records_before(61).is_err());
        let segments = log.segments().count();
        let gone = log.take_expired(0).delete().unwrap();
        assert!(
            !gone.is_empty() && gone.iter().all(|base| *base < 25),
            "{gone:?}"
        );
        assert_eq!(log.segments().count(), segments - gone.len());
        assert_eq!(
            log.start_offset(),
            25,
            "the start, not the first segment's base"
        );
        // A power cut keeps it: it was durable before it was shown.
        drop(log);
        sim.crash(&mut |n| n);
        let log = open(&sim);
        assert_eq!(log.start_offset(), 25);
    }

    #[test]
    fn a_cut_before_the_file_is_durable_keeps_the_old_start() {
        for n in 0..6 {
            let sim = SimFs::new();
            let mut log = filled(&sim);
            sim.cut_power_after(n);
            let moved = log.delete_records_before(30).is_ok();
            drop(log);
            sim.crash(&mut |n| n);
            sim.restore_power();
            let start = open(&sim).start_offset();
            assert!(
                start == 30 || (start == 0 && !moved),
                "cut after {n}: start {start}, moved {moved}"
            );
        }
    }

    #[test]
    fn the_file_reads_back_and_a_damaged_one_is_none() {
        assert_eq!(
            decode(std::str::from_utf8(&encode(1234)).unwrap()),
            Some(1234)
        );
        for bad in [
            "",
            "klog-log-start 1\n",
            "klog-log-start 2\n5\n",
            "klog-log-start 1\nx\n",
            "klog-log-start 1\n5\n6\n",
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }

    /// Cut below its start (a deposed leader's truncation, a recovery),
    /// the log starts at the cut: records appended after it are shown and
    /// kept, after a reopen too.
    #[test]
    fn a_cut_below_the_start_brings_the_start_down() {
        let sim = SimFs::new();
        let mut log = filled(&sim);
        assert_eq!(log.delete_records_before(50).unwrap(), 50);
        assert_eq!(log.truncate_to(20).unwrap(), 20);
        assert_eq!(log.start_offset(), 20);
        for i in 0..20u8 {
            let mut b = BatchBuilder::new();
            b.push(0, None, &[], &[i; 200]);
            log.append(&mut b.finish().to_vec(), 0).unwrap();
        }
        log.flush().unwrap();
        assert!(log.read(20, 1 << 20).unwrap().is_some());
        let gone = log.take_expired(0).delete().unwrap();
        assert!(gone.iter().all(|base| *base < 20), "{gone:?}");
        drop(log);
        let log = open(&sim);
        assert_eq!(log.start_offset(), 20);
        assert_eq!(log.next_offset(), 40);
    }

    /// A lookup by time finds the first record at or after it among those
    /// past the start.
    #[test]
    fn a_lookup_by_time_starts_at_the_start() {
        let sim = SimFs::new();
        sim.create_dir_all_durable(Path::new("/p/t-0"));
        let mut log = open(&sim);
        for i in 0..60u8 {
            let mut b = BatchBuilder::new();
            b.push(1000 + i64::from(i), None, &[], &[i; 200]);
            log.append(&mut b.finish().to_vec(), 0).unwrap();
        }
        log.flush().unwrap();
        assert_eq!(log.offset_for_timestamp(1000).unwrap(), Some(0));
        log.delete_records_before(25).unwrap();
        assert_eq!(log.offset_for_timestamp(1000).unwrap(), Some(25));
        assert_eq!(log.offset_for_timestamp(1030).unwrap(), Some(30));
    }
}
