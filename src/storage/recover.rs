//! Crash recovery: the one code path that decides where a partition's log
//! ends, shared by opening a log, `klog-recover` and `klog-dump --verify`.
//!
//! For every segment from the recovery point on (every segment with
//! `full`), recovery reads each batch, checks its header CRC, its base offset
//! (the one after the previous batch's last), and every record's length and
//! CRC, against the format's hard limits only: never against the policy
//! limit for new appends, which may have been lowered since the records
//! were accepted. At the first bad record it stops: it keeps every whole,
//! valid record before it (rewriting the header of a torn batch to cover
//! just those), cuts the file there, and saves the cut bytes beside the
//! segment as `<segment>.log.corrupt` (`.corrupt.1`, ... never
//! overwriting), unless they are a torn tail or zeros: the normal crash
//! case, not data. Segments after a cut are moved into `quarantine/`,
//! never deleted, since a log has no gaps. Leftover `.tmp` files are removed.
//!
//! # Who may cut
//!
//! Opening a log (`automatic`) repairs only what a crash leaves: a torn or
//! zero-filled tail of the last segment. Anything else (a bad CRC with
//! whole records after it, damage in an older segment, a gap between
//! segments) could be acknowledged data, and cutting there would rewind
//! the partition and reuse offsets; so the open fails with
//! [`Error::Damaged`], having changed nothing, and `klog-recover` (which
//! saves what it cuts) decides. This is PostgreSQL's stance on a damaged
//! page outside the WAL's reach, and stricter than Kafka's, which
//! truncates at the first bad batch past its recovery point.
//!
//! A reader's open (`automatic` and `dry_run`: it changes nothing) does not
//! refuse: its log ends before the first damage, at the start of the bad
//! batch (whole batches only; segments after it are left out), and the
//! report says where ([`RecoveryReport::damage`]), so that a reader reads
//! every whole batch before the damage and then reports it.
//!
//! # What is trusted
//!
//! Segments wholly before the recovery point are trusted up to their last
//! index entry: the batch it names and what follows are checked, not the
//! rest. After a clean shutdown (or for a reader, which changes nothing)
//! the last segment is trusted the same way, so a restart costs a few
//! reads per partition, not a scan of its data (Kafka skips recovery when
//! its clean-shutdown file is present). A trusted scan that finds anything
//! wrong is redone over the whole segment.
//!
//! # Durability of what is kept
//!
//! Every segment recovery scanned is fsynced, and the directory, before the
//! recovery point is rewritten and before the log exposes the records: the
//! bytes a killed writer left in the page cache are not durable until
//! then, and a power cut after they were shown to consumers would take
//! them back and let their offsets be given out again.
//!
//! # Indexes
//!
//! Indexes are judged by their invariants, not by the interval this run
//! would use: each entry names the batch that starts at its position, with
//! that batch's offset and the largest timestamp through it, in increasing
//! order. A short index (a crash before its last entries were written) is
//! extended; an index that breaks an invariant is rebuilt.
//!
//! Every step is idempotent: running recovery again, or after it was killed
//! midway, ends in the same files. With `dry_run` nothing is written.
//!
//! # Where
//!
//! This file drives a partition: it lists the segments, recovers each in
//! offset order, quarantines those after a cut, and writes the rebuilt
//! indexes and the recovery point. Its private modules do one segment:
//! `segment` reads its header and decides how far its index is trusted,
//! `scan` walks its batches (with [`crate::storage::batches`]) and checks
//! its index against them, and `cut` judges the bytes where the walk
//! stopped (zeros, a short write, lost pages, or damage) and cuts them.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, IoContext, Result};
use crate::storage::epoch::Epochs;
use crate::storage::fs::{self, Vfs};
use crate::storage::index::{self, IndexEntry};
use crate::storage::record::Format;
use crate::storage::segment::parse_log_file_name;

mod cut;
mod epochs;
mod scan;
mod segment;

use segment::recover_segment;

/// Name of the directory, inside a partition, that recovery moves segments
/// after a cut into.
pub const QUARANTINE_DIR: &str = "quarantine";

/// How to recover.
///
/// Old data is judged by the format's hard limits only
/// ([`crate::limits::RECORD_BYTES_MAX_LIMIT`], [`crate::limits::BATCH_BYTES_MAX`]),
/// never by the policy limit for new appends (`--max-record-bytes`): a
/// record that was accepted once is kept, whatever the limit is today.
#[derive(Debug, Clone, Copy)]
pub struct RecoverOptions {
    /// Scan every segment, not just those from the recovery point on.
    pub full: bool,
    /// Change nothing; report what would be done.
    pub dry_run: bool,
    /// Opening a log, not `klog-recover`: only a torn tail of the last
    /// segment may be cut. Any other damage fails with
    /// [`Error::Damaged`] before anything is changed (with `dry_run`, a
    /// reader's open, the log ends before it instead:
    /// [`RecoveryReport::damage`]).
    pub automatic: bool,
    /// Trust the last segment's index as those before the recovery point
    /// are trusted (it was closed cleanly, or the caller only reads):
    /// check its last indexed batch and what follows, not all of it.
    pub trust_last: bool,
    /// Index interval used when adding index entries.
    pub index_interval_bytes: u32,
}

/// What was found wrong in a segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The offset of the first record not kept.
    pub offset: u64,
    /// Its byte position in the segment.
    pub position: u64,
    /// What is wrong there.
    pub reason: String,
    /// Whether it is a torn or zero-filled tail (a normal crash) rather
    /// than damage.
    pub torn_tail: bool,
}

/// What recovery found in, and did to, one segment.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentReport {
    /// The segment's `.log` file.
    pub path: PathBuf,
    /// Its base offset.
    pub base_offset: u64,
    /// The format of its batches.
    #[serde(skip)]
    pub format: Format,
    /// Whether its records were scanned (false: trusted before the
    /// recovery point, only its tail checked).
    pub scanned: bool,
    /// Batches kept.
    pub batches_valid: u64,
    /// Records kept.
    pub records_valid: u64,
    /// Bytes kept, segment header included.
    pub bytes_valid: u64,
    /// Bytes cut (or that would be).
    pub truncated_bytes: u64,
    /// The first problem, if any.
    pub problem: Option<Problem>,
    /// Where the cut bytes were saved.
    pub saved_to: Option<PathBuf>,
    /// Whether the index files were (or would be) rebuilt, and why.
    pub index_problem: Option<String>,
    /// Bytes of the file read to check it (not the whole file when it was
    /// trusted up to its last index entry).
    #[serde(skip)]
    pub bytes_scanned: u64,
    /// Of a cleaned segment, its header's end ([`crate::storage::segment`]).
    #[serde(skip)]
    pub end: Option<u64>,
    /// One past the last record kept.
    #[serde(skip)]
    pub next_offset: u64,
    /// Largest timestamp kept.
    #[serde(skip)]
    pub max_timestamp: i64,
    /// Timestamp of the first batch.
    #[serde(skip)]
    pub first_timestamp: Option<i64>,
    /// The index entries the segment has after recovery.
    #[serde(skip)]
    pub entries: Vec<IndexEntry>,
}

/// What recovery found in, and did to, one partition directory.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveryReport {
    /// Per segment, in offset order (quarantined ones excluded).
    pub segments: Vec<SegmentReport>,
    /// Segments moved (or that would be) into `quarantine/`.
    pub quarantined: Vec<PathBuf>,
    /// Leftover temporary files removed (or that would be), and the
    /// segments a cleaned one replaced that a crash left behind.
    pub removed: Vec<PathBuf>,
    /// The partition's leader epochs after recovery
    /// ([`crate::storage::epoch`]).
    #[serde(skip)]
    pub epochs: Epochs,
    /// What was wrong with the epoch file, which recovery rewrote (or
    /// would): missing or damaged (rebuilt from the batches), or holding
    /// epochs past the end of the log.
    pub epoch_problem: Option<String>,
    /// Where a reader's open (automatic, dry run) stopped instead of
    /// refusing: the first damage it may not call a torn tail. The log the
    /// report describes ends before it.
    #[serde(skip)]
    pub damage: Option<Damage>,
}

/// Damage that opening a log may not cut ([`Error::Damaged`]'s fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The partition directory.
    pub dir: PathBuf,
    /// The damaged segment file.
    pub segment: PathBuf,
    /// Byte position of the damage in it.
    pub position: u64,
    /// The first offset that would be lost by a cut there.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl Damage {
    /// The error a writer's open fails with, and a reader reports when it
    /// reaches the damage.
    pub fn error(&self) -> Error {
        Error::Damaged {
            dir: self.dir.clone(),
            segment: self.segment.clone(),
            position: self.position,
            offset: self.offset,
            reason: self.reason.clone(),
        }
    }
}

impl RecoveryReport {
    /// Whether anything was (or would be) changed.
    pub fn changed(&self) -> bool {
        !self.quarantined.is_empty()
            || !self.removed.is_empty()
            || self
                .segments
                .iter()
                .any(|s| s.problem.is_some() || s.index_problem.is_some())
    }

    /// Whether damage (not just a torn tail or a stale index) was found.
    pub fn damaged(&self) -> bool {
        !self.quarantined.is_empty()
            || self
                .segments
                .iter()
                .any(|s| s.problem.as_ref().is_some_and(|p| !p.torn_tail))
    }

    /// One past the last offset kept.
    pub fn next_offset(&self) -> Option<u64> {
        self.segments.last().map(|s| s.next_offset)
    }
}

/// Saves the bytes of the segment at `path` (open as `file`, `len` bytes
/// long) from `from` to `len` beside it, as `<segment>.corrupt` (or
/// `.corrupt.1`, ...), durably, before a cut there: what `klog-recover`
/// does with the bytes it cuts, for a cut made while the log is open (a
/// scrub's, [`crate::storage::scrub`]). Returns the file's path.
pub fn save_cut_bytes(
    vfs: &dyn Vfs,
    file: std::sync::Arc<dyn fs::VFile>,
    path: &Path,
    len: u64,
    from: u64,
) -> Result<PathBuf> {
    let options = RecoverOptions {
        full: false,
        dry_run: false,
        automatic: false,
        trust_last: false,
        index_interval_bytes: 0,
    };
    let seg = scan::SegmentFile {
        vfs,
        file,
        path,
        len,
        // Saving copies bytes: their format does not matter.
        format: Format::Kafka,
        options: &options,
        last: false,
    };
    cut::save_cut(&seg, from)
}

/// A partition's segment files (base offset, path) and its leftovers.
pub type Listing = (Vec<(u64, PathBuf)>, Vec<PathBuf>);

/// Lists a partition directory: its segment files in offset order, and
/// the leftovers recovery removes (`*.tmp`, index files with no log).
pub fn list_partition(vfs: &dyn Vfs, dir: &Path) -> Result<Listing> {
    let names = vfs.list(dir).ctx("list", dir)?;
    let mut segments: Vec<(u64, PathBuf)> = names
        .iter()
        .filter_map(|n| Some((parse_log_file_name(n)?, dir.join(n))))
        .collect();
    segments.sort();
    let mut leftovers = Vec::new();
    for n in &names {
        let stem_is_log = |ext: &str| {
            n.strip_suffix(ext)
                .is_some_and(|stem| parse_log_file_name(&format!("{stem}.log")).is_some())
        };
        let orphan_index = (stem_is_log(".index") || stem_is_log(".timeindex"))
            && !names.contains(&format!("{}.log", n.rsplit_once('.').map_or("", |p| p.0)));
        // `.cleaned`: the cleaner's files before they take their names.
        if n.ends_with(".tmp") || crate::storage::segment::is_cleaned_name(n) || orphan_index {
            leftovers.push(dir.join(n));
        }
    }
    leftovers.sort();
    Ok((segments, leftovers))
}

/// Recovers the partition in `dir`, scanning from `recovery_point` (or
/// everything, with `options.full`).
///
/// Every segment it scanned is fsynced, and the directory, before the new
/// recovery point is written: after a process crash the page cache holds
/// bytes no fsync has reached, and recording them as durable (or exposing
/// them to consumers) before they are would let a later power cut take
/// back records that groups have committed past, and reuse their offsets.
pub fn recover_partition(
    vfs: &dyn Vfs,
    dir: &Path,
    recovery_point: u64,
    options: &RecoverOptions,
) -> Result<RecoveryReport> {
    let (segments, leftovers) = list_partition(vfs, dir)?;
    let partition = Partition { vfs, dir, options };
    let mut report = RecoveryReport::default();
    // Leftovers are temporary files and indexes without a log: never data.
    // Opening a log removes them only once it knows it will not refuse.
    let remove_first = !options.automatic;
    for path in &leftovers {
        if !options.dry_run && remove_first {
            vfs.remove(path).ctx("remove", path)?;
        }
        report.removed.push(path.clone());
    }
    let mut replaced = Vec::new();
    let reindex =
        partition.recover_segments(&segments, recovery_point, &mut report, &mut replaced)?;
    (report.epochs, report.epoch_problem) = epochs::recover_epochs(vfs, dir, &report)?;
    if options.dry_run {
        return Ok(report);
    }
    // A replaced segment's log goes first: an index left behind is an
    // orphan the next open removes.
    let replaced_files = replaced.iter().flat_map(|log| {
        let (index, timeindex) = index::index_paths(log);
        [log.clone(), index, timeindex]
    });
    let leftovers = leftovers.iter().filter(|_| !remove_first).cloned();
    for path in leftovers.chain(replaced_files) {
        match vfs.remove(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("remove", &path, e))
            }
            _ => {}
        }
    }
    partition.write_out(reindex, &report)?;
    // After the segments are durable as kept: the file never names an
    // epoch whose batches a crash could still take back.
    if report.epoch_problem.is_some() {
        report.epochs.write(vfs, dir)?;
    }
    Ok(report)
}

/// A partition directory under recovery.
struct Partition<'a> {
    vfs: &'a dyn Vfs,
    dir: &'a Path,
    options: &'a RecoverOptions,
}

/// Index files to write: the segment's log path and its entries.
type Reindex = Vec<(PathBuf, Vec<IndexEntry>)>;

impl Partition<'_> {
    /// Recovers the segments in offset order, quarantining those after a
    /// cut or a gap, into `report`; returns the index files to rewrite.
    /// Opening a log refuses (changing nothing) at damage it may not cut;
    /// a reader's open ends its log there ([`Partition::refuse`]).
    fn recover_segments(
        &self,
        segments: &[(u64, PathBuf)],
        recovery_point: u64,
        report: &mut RecoveryReport,
        replaced: &mut Vec<PathBuf>,
    ) -> Result<Reindex> {
        let options = self.options;
        let mut expected: Option<u64> = None;
        let mut cut = false;
        let mut reindex = Vec::new();
        // The end of the last cleaned segment kept: segments based below
        // it are the ones it replaced, left by a crash.
        let mut cleaned_end = None;
        for (i, (base, path)) in segments.iter().enumerate() {
            if !cut && cleaned_end.is_some_and(|end| *base < end) {
                report.removed.push(path.clone());
                replaced.push(path.clone());
                continue;
            }
            let last = i + 1 == segments.len();
            // A segment with gaps may start past the one before's end.
            let past_gap = expected.is_some_and(|e| *base > e && starts_past_gap(self.vfs, path));
            if let Some(e) = expected.filter(|e| e != base && !past_gap) {
                if options.automatic && !cut {
                    let reason =
                        format!("the segment starts at offset {base}, the one before ends at {e}");
                    self.refuse(report, path, 0, e, reason)?;
                }
            }
            let gap = expected.is_some_and(|e| e != *base) && !past_gap;
            if cut || gap {
                self.quarantine(path, report)?;
                cut = true;
                continue;
            }
            let next_base = segments.get(i + 1).map(|s| s.0);
            let trusted =
                !options.full && next_base.map_or(options.trust_last, |n| n <= recovery_point);
            let seg = recover_segment(self.vfs, path, *base, trusted, last, options)?;
            if let Some(p) = seg.problem.as_ref().filter(|_| options.automatic) {
                if !(last && p.torn_tail) {
                    self.refuse(report, path, p.position, p.offset, p.reason.clone())?;
                }
            }
            // An index still preallocated (a writer's active segment, or a
            // run killed while rebuilding) is trimmed too, silently: it is
            // sound, but a repaired partition ends in the same files however
            // it got there.
            let repaired = seg.problem.is_some() || seg.index_problem.is_some();
            if seg.bytes_valid > 0
                && (repaired || !index::is_trimmed(self.vfs, path, seg.entries.len()))
            {
                reindex.push((path.clone(), seg.entries.clone()));
            }
            expected = Some(seg.next_offset);
            cut = seg.problem.is_some();
            if seg.bytes_valid == 0 {
                // A header that cannot be read: nothing of the file is kept.
                cut = true;
                self.quarantine(path, report)?;
                continue;
            }
            cleaned_end = seg.end;
            report.segments.push(seg);
        }
        Ok(reindex)
    }

    /// Writes the indexes recovery rebuilt, makes the directory durable, and
    /// records the new recovery point.
    fn write_out(&self, reindex: Reindex, report: &RecoveryReport) -> Result<()> {
        let (vfs, dir) = (self.vfs, self.dir);
        for (path, entries) in reindex {
            let mut index = index::SegmentIndex::create(vfs, &path, entries, 0)?;
            index.trim()?;
        }
        if report.changed() || report.segments.iter().any(|s| s.scanned) {
            fs::sync_directory(vfs, dir)?;
        }
        if let Some(next) = report.next_offset() {
            // Every segment before the last was synced when it rolled, and
            // every scanned one was synced above: all that was kept is
            // durable. (Written also when nothing changed, so that a run
            // killed before this line and run again ends in the same files.)
            if read_recovery_point(vfs, dir) != next {
                write_recovery_point(vfs, dir, next)?;
            }
        }
        Ok(())
    }

    /// Opening a log for writing fails at damage it may not cut, having
    /// changed nothing. A reader's open (a dry run) goes on as
    /// `klog-recover --dry-run` would, so that its log ends before the
    /// damage, and notes the first damage in `report`.
    fn refuse(
        &self,
        report: &mut RecoveryReport,
        segment: &Path,
        position: u64,
        offset: u64,
        reason: String,
    ) -> Result<()> {
        let damage = Damage {
            dir: self.dir.to_path_buf(),
            segment: segment.to_path_buf(),
            position,
            offset,
            reason,
        };
        if !self.options.dry_run {
            return Err(damage.error());
        }
        report.damage.get_or_insert(damage);
        Ok(())
    }

    /// Moves the segment `log` into `quarantine/` (its indexes are removed:
    /// they are derived data).
    fn quarantine(&self, log: &Path, report: &mut RecoveryReport) -> Result<()> {
        let vfs = self.vfs;
        let qdir = self.dir.join(QUARANTINE_DIR);
        let (index, timeindex) = index::index_paths(log);
        if !self.options.dry_run {
            vfs.create_dir_all(&qdir).ctx("create", &qdir)?;
            for p in [&index, &timeindex] {
                if vfs.exists(p) {
                    vfs.remove(p).ctx("remove", p)?;
                }
            }
            let name = log.file_name().expect("segment file name");
            let target = unused_name(vfs, &qdir.join(name));
            vfs.rename(log, &target).ctx("move into quarantine", log)?;
            fs::sync_directory(vfs, &qdir)?;
        }
        report.quarantined.push(log.to_path_buf());
        Ok(())
    }
}

/// `path`, or `path.1`, `path.2`, ...: the first that does not exist.
fn unused_name(vfs: &dyn Vfs, path: &Path) -> PathBuf {
    if !vfs.exists(path) {
        return path.to_path_buf();
    }
    (1u32..)
        .map(|n| PathBuf::from(format!("{}.{n}", path.display())))
        .find(|p| !vfs.exists(p))
        .expect("an unused name")
}

fn problem(offset: u64, position: u64, reason: String, torn_tail: bool) -> Problem {
    Problem {
        offset,
        position,
        reason,
        torn_tail,
    }
}

/// Whether the segment at `path` is one with gaps and no end
/// ([`crate::storage::segment`]), which may start past where the segment
/// before it ends (a follower's copy of a gap wider than a segment spans).
pub fn starts_past_gap(vfs: &dyn Vfs, path: &Path) -> bool {
    let mut head = [0u8; crate::storage::segment::SEGMENT_HEADER_BYTES];
    let read = vfs.open_read(path).and_then(|f| f.read_at(&mut head, 0));
    read.is_ok_and(|n| {
        crate::storage::segment::read_header(&head[..n]).is_ok_and(|h| h.gaps && h.end.is_none())
    })
}

/// Reads the recovery point file of a partition, 0 when absent or unreadable.
pub fn read_recovery_point(vfs: &dyn Vfs, dir: &Path) -> u64 {
    fs::read_small(vfs, &dir.join(RECOVERY_POINT_FILE))
        .and_then(|text| {
            let mut lines = text.lines();
            (lines.next()? == RECOVERY_POINT_HEADER).then_some(())?;
            lines.next()?.trim().parse().ok()
        })
        .unwrap_or(0)
}

/// Where the segments of the log in `dir` began before recovery could
/// quarantine any: a log none of whose segments is kept starts again
/// there. A directory without segments starts at its recovery point (0
/// when it has none): a reset ([`crate::storage::log::Log::reset_to`]) cut by a crash between
/// removing the old segments and creating the new one.
pub fn start_before_recovery(vfs: &dyn Vfs, dir: &Path) -> Result<u64> {
    let (listed, _) = list_partition(vfs, dir)?;
    Ok(match listed.first() {
        Some((base, _)) => *base,
        None => read_recovery_point(vfs, dir),
    })
}

/// File name of a partition's recovery point.
pub const RECOVERY_POINT_FILE: &str = "recovery-point";
/// File name of a partition's clean-shutdown marker.
pub const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
/// Name of the file a scrub notes its last whole pass in
/// ([`crate::storage::scrub`]); a writable open after an unclean stop
/// removes it, unless the log holds no batch.
pub const SCRUBBED_FILE: &str = "scrubbed";

/// Forgets, durably, the last whole pass of the log in `dir`
/// ([`SCRUBBED_FILE`]): a walk found damage, or an unclean stop left what
/// recovery does not check, and the log is walked again at the next look.
pub fn forget_scrubbed(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    let path = dir.join(SCRUBBED_FILE);
    if vfs.exists(&path) {
        vfs.remove(&path).ctx("remove", &path)?;
        fs::sync_directory(vfs, dir)?;
    }
    Ok(())
}
const RECOVERY_POINT_HEADER: &str = "klog-recovery-point 1";

/// Writes a partition's recovery point atomically: temporary file, fsync,
/// rename, directory fsync.
pub fn write_recovery_point(vfs: &dyn Vfs, dir: &Path, offset: u64) -> Result<()> {
    fs::write_atomic(
        vfs,
        dir,
        RECOVERY_POINT_FILE,
        format!("{RECOVERY_POINT_HEADER}\n{offset}\n").as_bytes(),
    )
}

/// Whether a partition was closed cleanly (its marker exists).
pub fn was_clean(vfs: &dyn Vfs, dir: &Path) -> bool {
    vfs.exists(&dir.join(CLEAN_SHUTDOWN_FILE))
}

/// Removes the clean-shutdown marker, durably, before the first write.
pub fn clear_clean(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE);
    if vfs.exists(&path) {
        vfs.remove(&path).ctx("remove", &path)?;
        fs::sync_directory(vfs, dir)?;
    }
    Ok(())
}

/// Turns an unreadable partition into the library error.
pub fn corrupt(path: &Path, position: u64, reason: impl Into<String>) -> Error {
    Error::Corrupt {
        path: path.to_path_buf(),
        position,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::sim::SimFs;

    fn partition() -> (SimFs, &'static Path) {
        let sim = SimFs::new();
        let dir = Path::new("/d/t-0");
        sim.create_dir_all_durable(dir);
        (sim, dir)
    }

    #[test]
    fn the_recovery_point_round_trips_and_anything_else_reads_as_zero() {
        let (sim, dir) = partition();
        assert_eq!(read_recovery_point(&sim, dir), 0, "absent");
        write_recovery_point(&sim, dir, 1234).unwrap();
        assert_eq!(read_recovery_point(&sim, dir), 1234);
        let path = dir.join(RECOVERY_POINT_FILE);
        for bad in [
            &b"1234\n"[..],
            b"klog-recovery-point 2\n1234\n",
            b"klog-recovery-point 1\nx\n",
            b"\xff",
        ] {
            sim.write(&path, bad);
            assert_eq!(
                read_recovery_point(&sim, dir),
                0,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_listing_orders_segments_and_finds_leftovers() {
        let (sim, dir) = partition();
        for name in [
            "00000000000000000100.log",
            "00000000000000000000.log",
            "00000000000000000000.index",
            "00000000000000000000.timeindex",
            "00000000000000000050.index",
            "00000000000000000100.log.corrupt",
            "recovery-point",
            "recovery-point.tmp",
            "notes.txt",
        ] {
            sim.write(&dir.join(name), b"");
        }
        let (segments, leftovers) = list_partition(&sim, dir).unwrap();
        let bases: Vec<u64> = segments.iter().map(|s| s.0).collect();
        assert_eq!(bases, [0, 100]);
        assert_eq!(segments[1].1, dir.join("00000000000000000100.log"));
        let names: Vec<_> = leftovers
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["00000000000000000050.index", "recovery-point.tmp"]);
    }

    fn segment_report(problem: Option<Problem>, index_problem: Option<&str>) -> SegmentReport {
        let mut report = SegmentReport::new(Path::new("/d/t-0/00000000000000000000.log"), 0, true);
        report.problem = problem;
        report.index_problem = index_problem.map(str::to_string);
        report.next_offset = 7;
        report
    }

    #[test]
    fn a_report_tells_a_torn_tail_and_a_stale_index_from_damage() {
        let torn = problem(5, 100, "zero-filled tail".into(), true);
        let bad = problem(5, 100, "record crc mismatch".into(), false);
        let report = |segments| RecoveryReport {
            segments,
            ..RecoveryReport::default()
        };
        let healthy = report(vec![segment_report(None, None)]);
        assert!(!healthy.changed() && !healthy.damaged());
        assert_eq!(healthy.next_offset(), Some(7));
        let stale = report(vec![segment_report(None, Some("entry 0: not increasing"))]);
        assert!(stale.changed() && !stale.damaged());
        let crashed = report(vec![segment_report(Some(torn), None)]);
        assert!(crashed.changed() && !crashed.damaged());
        let damaged = report(vec![
            segment_report(None, None),
            segment_report(Some(bad), None),
        ]);
        assert!(damaged.changed() && damaged.damaged());
        let mut quarantined = report(vec![segment_report(None, None)]);
        quarantined
            .quarantined
            .push(PathBuf::from("/d/t-0/00000000000000000100.log"));
        assert!(quarantined.changed() && quarantined.damaged());
        assert_eq!(RecoveryReport::default().next_offset(), None);
    }
}
