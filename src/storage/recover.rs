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

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, IoContext, Result};
use crate::storage::batches::{BatchStop, FileBatches};
use crate::storage::fs::{self, VFile, Vfs};
use crate::storage::index::{self, IndexEntry};
use crate::storage::record::{self, BatchHeader, DecodeError, BATCH_HEADER_BYTES};
use crate::storage::segment::{self, SEGMENT_HEADER_BYTES};

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
    /// [`Error::Damaged`] before anything is changed.
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
    /// Leftover temporary files removed (or that would be).
    pub removed: Vec<PathBuf>,
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

/// A partition's segment files (base offset, path) and its leftovers.
pub type Listing = (Vec<(u64, PathBuf)>, Vec<PathBuf>);

/// Lists a partition directory: its segment files in offset order, and
/// the leftovers recovery removes (`*.tmp`, index files with no log).
pub fn list_partition(vfs: &dyn Vfs, dir: &Path) -> Result<Listing> {
    let names = vfs.list(dir).ctx("list", dir)?;
    let mut segments: Vec<(u64, PathBuf)> = names
        .iter()
        .filter_map(|n| Some((segment::parse_log_file_name(n)?, dir.join(n))))
        .collect();
    segments.sort();
    let mut leftovers = Vec::new();
    for n in &names {
        let stem_is_log = |ext: &str| {
            n.strip_suffix(ext)
                .is_some_and(|stem| segment::parse_log_file_name(&format!("{stem}.log")).is_some())
        };
        let orphan_index = (stem_is_log(".index") || stem_is_log(".timeindex"))
            && !names.contains(&format!("{}.log", n.rsplit_once('.').map_or("", |p| p.0)));
        if n.ends_with(".tmp") || orphan_index {
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
    let mut expected: Option<u64> = None;
    let mut cut = false;
    let mut reindex = Vec::new();
    for (i, (base, path)) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        if let Some(e) = expected.filter(|e| e != base) {
            if options.automatic && !cut {
                let reason = format!("the segment starts at offset {base}, the one before ends at {e}");
                return Err(damaged(dir, path, 0, e, reason));
            }
        }
        let gap = expected.is_some_and(|e| e != *base);
        if cut || gap {
            quarantine(vfs, dir, path, options.dry_run, &mut report)?;
            cut = true;
            continue;
        }
        let next_base = segments.get(i + 1).map(|s| s.0);
        let trusted = !options.full && next_base.map_or(options.trust_last, |n| n <= recovery_point);
        let seg = recover_segment(vfs, path, *base, trusted, last, options)?;
        if let Some(p) = seg.problem.as_ref().filter(|_| options.automatic) {
            if !(last && p.torn_tail) {
                return Err(damaged(dir, path, p.position, p.offset, p.reason.clone()));
            }
        }
        // An index still preallocated (a writer's active segment, or a run
        // killed while rebuilding) is trimmed too, silently: it is sound,
        // but a repaired partition ends in the same files however it got
        // there.
        let damaged = seg.problem.is_some() || seg.index_problem.is_some();
        if seg.bytes_valid > 0 && (damaged || !index::is_trimmed(vfs, path, seg.entries.len())) {
            reindex.push((path.clone(), seg.entries.clone()));
        }
        expected = Some(seg.next_offset);
        cut = seg.problem.is_some();
        if seg.bytes_valid == 0 {
            // A header that cannot be read: nothing of the file is kept.
            cut = true;
            quarantine(vfs, dir, path, options.dry_run, &mut report)?;
            continue;
        }
        report.segments.push(seg);
    }
    if options.dry_run {
        return Ok(report);
    }
    for path in leftovers.iter().filter(|_| !remove_first) {
        match vfs.remove(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io("remove", path, e)),
            _ => {}
        }
    }
    for (path, entries) in reindex {
        let mut index = index::SegmentIndex::create(vfs, &path, entries, 0)?;
        index.trim()?;
    }
    if report.changed() || report.segments.iter().any(|s| s.scanned) {
        fs::sync_directory(vfs, dir)?;
    }
    if let Some(next) = report.next_offset() {
        // Every segment before the last was synced when it rolled, and
        // every scanned one was synced above: all that was kept is durable.
        // (Written also when nothing changed, so that a run killed before
        // this line and run again ends in the same files.)
        if read_recovery_point(vfs, dir) != next {
            write_recovery_point(vfs, dir, next)?;
        }
    }
    Ok(report)
}

fn damaged(dir: &Path, segment: &Path, position: u64, offset: u64, reason: String) -> Error {
    Error::Damaged {
        dir: dir.to_path_buf(),
        segment: segment.to_path_buf(),
        position,
        offset,
        reason,
    }
}

fn quarantine(vfs: &dyn Vfs, dir: &Path, log: &Path, dry_run: bool, report: &mut RecoveryReport) -> Result<()> {
    let qdir = dir.join(QUARANTINE_DIR);
    let (index, timeindex) = index::index_paths(log);
    if !dry_run {
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

/// The running state of a segment scan, and of the check of its index.
///
/// An index on disk is judged by its invariants, not by the interval this
/// run would use (the writer may have used another): every entry names the
/// batch that starts at its position, by that batch's offset, with the
/// largest timestamp up to and including it, in increasing order. Missing
/// entries after the last one are not damage (a crash can leave an index
/// short); they are added at `interval`.
struct Scan {
    base: u64,
    batches: u64,
    size: u64,
    next_offset: u64,
    max_timestamp: i64,
    first_timestamp: Option<i64>,
    interval: u64,
    /// Whether the scan began at the segment's first batch (so `rebuilt`
    /// covers the whole segment).
    from_start: bool,
    /// Entries rebuilt from scratch, one every `interval` bytes.
    rebuilt: Vec<IndexEntry>,
    since_rebuilt: u64,
    /// The index on disk, checked entry by entry as the scan passes them.
    disk: Vec<IndexEntry>,
    disk_next: usize,
    /// The checked entries on disk, then new ones past the last of them.
    kept: Vec<IndexEntry>,
    since_kept: u64,
    index_problem: Option<String>,
}

impl Scan {
    fn new(base: u64, interval: u32, disk: Vec<IndexEntry>, index_problem: Option<String>) -> Scan {
        Scan {
            base,
            batches: 0,
            size: SEGMENT_HEADER_BYTES as u64,
            next_offset: base,
            max_timestamp: i64::MIN,
            first_timestamp: None,
            interval: u64::from(interval),
            from_start: true,
            rebuilt: Vec::new(),
            since_rebuilt: 0,
            disk,
            disk_next: 0,
            kept: Vec::new(),
            since_kept: 0,
            index_problem,
        }
    }

    /// Starts at the last entry of a trusted index instead of the first
    /// batch: the entries before it are taken as they are, and the batch it
    /// names is checked like any other.
    fn trust_up_to_last_entry(&mut self) {
        let last = self.disk.len() - 1;
        let entry = self.disk[last];
        self.from_start = false;
        self.kept = self.disk[..last].to_vec();
        self.disk_next = last;
        self.size = u64::from(entry.position);
        self.next_offset = self.base + u64::from(entry.relative_offset);
        self.max_timestamp = entry.max_timestamp;
    }

    /// Keeps the batch at `position`; an error when it cannot be indexed
    /// (a position or relative offset beyond `u32`: damage, not a crash).
    fn keep(&mut self, position: u64, header: &BatchHeader, bytes: u64) -> std::result::Result<(), DecodeError> {
        let entry = IndexEntry::for_batch(self.base, position, header, self.max_timestamp)?;
        self.max_timestamp = entry.max_timestamp;
        self.first_timestamp.get_or_insert(header.base_timestamp);
        if self.from_start && self.since_rebuilt >= self.interval {
            self.rebuilt.push(entry);
            self.since_rebuilt = 0;
        }
        self.since_rebuilt += bytes;
        self.check_disk_entry(entry);
        self.since_kept += bytes;
        self.batches += 1;
        self.size = position + bytes;
        self.next_offset = header.next_offset();
        Ok(())
    }

    fn check_disk_entry(&mut self, batch: IndexEntry) {
        if self.index_problem.is_some() {
            return;
        }
        let j = self.disk_next;
        let Some(disk) = self.disk.get(j).copied() else {
            if self.since_kept >= self.interval {
                self.kept.push(batch);
                self.since_kept = 0;
            }
            return;
        };
        if disk.position > batch.position {
            return;
        }
        self.index_problem = if disk.position < batch.position {
            Some(format!(
                "entry {j}: position {} is not where a batch starts",
                disk.position
            ))
        } else if disk.relative_offset != batch.relative_offset {
            Some(format!(
                "entry {j}: names offset {}, the batch at position {} starts at {}",
                self.base + u64::from(disk.relative_offset),
                disk.position,
                self.base + u64::from(batch.relative_offset)
            ))
        } else if disk.max_timestamp != batch.max_timestamp {
            Some(format!(
                "entry {j}: maximum timestamp {}, the log's is {}",
                disk.max_timestamp, batch.max_timestamp
            ))
        } else {
            self.kept.push(disk);
            self.disk_next += 1;
            self.since_kept = 0;
            None
        };
    }

    /// The entries the segment has after recovery, and why the index on
    /// disk cannot stay, if it cannot.
    fn finish_index(&mut self, was_cut: bool) -> (Vec<IndexEntry>, Option<String>) {
        if self.index_problem.is_none() && self.disk_next < self.disk.len() && !was_cut {
            let j = self.disk_next;
            self.index_problem = Some(format!(
                "entry {j}: position {} is beyond the last batch",
                self.disk[j].position
            ));
        }
        if self.index_problem.is_none() && !was_cut {
            return (std::mem::take(&mut self.kept), None);
        }
        // A cut segment is always scanned from its start (a trusted scan
        // that stops is redone in full).
        debug_assert!(self.from_start);
        (std::mem::take(&mut self.rebuilt), self.index_problem.take())
    }
}

fn recover_segment(
    vfs: &dyn Vfs,
    path: &Path,
    base: u64,
    trusted: bool,
    last: bool,
    options: &RecoverOptions,
) -> Result<SegmentReport> {
    let file = if options.dry_run {
        vfs.open_read(path)
    } else {
        vfs.open(path, false)
    }
    .ctx("open segment", path)?;
    let len = file.len().ctx("stat", path)?;
    let mut report = SegmentReport {
        path: path.to_path_buf(),
        base_offset: base,
        scanned: !trusted,
        batches_valid: 0,
        records_valid: 0,
        bytes_valid: 0,
        truncated_bytes: 0,
        problem: None,
        saved_to: None,
        index_problem: None,
        bytes_scanned: 0,
        next_offset: base,
        max_timestamp: i64::MIN,
        first_timestamp: None,
        entries: Vec::new(),
    };
    let mut header = [0u8; SEGMENT_HEADER_BYTES];
    let n = file.read_at(&mut header, 0).ctx("read", path)?;
    let header_problem = match segment::decode_header(&header[..n]) {
        Ok(b) if b == base => None,
        Ok(b) => Some(format!("header names base offset {b}")),
        Err(reason) => Some(reason),
    };
    if let Some(reason) = header_problem {
        // A header torn by a crash while the segment was created: short,
        // or zeros, and only ever in the last segment.
        let torn = last && (n < SEGMENT_HEADER_BYTES || header.iter().all(|&b| b == 0));
        report.problem = Some(problem(base, 0, reason, torn));
        return Ok(report);
    }
    let (disk, index_problem) = match index::read_entries(vfs, path) {
        Ok(entries) => match index::check_entries(&entries, SEGMENT_HEADER_BYTES as u64..len, u64::from(u32::MAX)) {
            Ok(()) => (entries, None),
            Err(e) => (Vec::new(), Some(e)),
        },
        Err(e) => (Vec::new(), Some(e)),
    };
    let interval = options.index_interval_bytes;
    let mut scan = Scan::new(base, interval, disk.clone(), index_problem.clone());
    if trusted && index_problem.is_none() && !disk.is_empty() {
        scan.trust_up_to_last_entry();
        scan.first_timestamp = first_timestamp(&*file, path)?;
    }
    let mut start = scan.size;
    let mut stop = scan_batches(&*file, path, len, &mut scan)?;
    if (stop.is_some() || scan.index_problem.is_some()) && !scan.from_start {
        // The index led to bytes that are not whole, or its last entry is
        // wrong: judge the segment by all of its bytes, trusting nothing.
        scan = Scan::new(base, interval, disk, index_problem);
        start = scan.size;
        stop = scan_batches(&*file, path, len, &mut scan)?;
    }
    report.scanned = report.scanned || scan.from_start;
    report.bytes_scanned = len.saturating_sub(start);
    if let Some((stop, kept)) = &stop {
        cut(
            &*file,
            vfs,
            path,
            &mut scan,
            stop,
            *kept,
            len,
            options,
            last,
            &mut report,
        )?;
    }
    if !options.dry_run && report.scanned {
        // What recovery keeps past the recovery point may be in the page
        // cache only (the writer was killed before its fsync): make it
        // durable before anyone is told it is.
        file.sync_data().ctx("fsync", path)?;
    }
    report.batches_valid = scan.batches;
    report.bytes_valid = scan.size;
    report.next_offset = scan.next_offset;
    report.records_valid = scan.next_offset - base;
    report.max_timestamp = scan.max_timestamp;
    report.first_timestamp = scan.first_timestamp;
    let (entries, index_problem) = scan.finish_index(report.problem.is_some());
    report.entries = entries;
    report.index_problem = index_problem;
    Ok(report)
}

fn first_timestamp(file: &dyn VFile, path: &Path) -> Result<Option<i64>> {
    let mut h = [0u8; BATCH_HEADER_BYTES];
    if file.read_at(&mut h, SEGMENT_HEADER_BYTES as u64).ctx("read", path)? < h.len() {
        return Ok(None);
    }
    Ok(BatchHeader::decode(&h, crate::limits::BATCH_BYTES_MAX)
        .ok()
        .map(|h| h.base_timestamp))
}

/// Where a segment's valid prefix ends: the stop, and the records of the
/// stopped batch that are whole and valid (count, bytes, max timestamp).
type Kept = (u32, u64, i64);

fn scan_batches(file: &dyn VFile, path: &Path, len: u64, scan: &mut Scan) -> Result<Option<(BatchStop, Kept)>> {
    let record_max = crate::limits::RECORD_BYTES_MAX_LIMIT;
    let mut walk = FileBatches::new(file, scan.size, len, crate::limits::BATCH_BYTES_MAX);
    loop {
        let (position, batch) = match walk.next_batch().ctx("read", path)? {
            None => return Ok(None),
            Some(Ok(found)) => found,
            Some(Err(stop)) => {
                let kept = torn_prefix(file, path, &stop, scan.next_offset, len)?;
                return Ok(Some((stop, kept)));
            }
        };
        let header = batch.header;
        if header.base_offset != scan.next_offset {
            let error = DecodeError::Malformed("batch: base offset out of sequence");
            return Ok(Some((bad_batch(position, error), (0, 0, i64::MIN))));
        }
        let mut kept: Kept = (0, 0, i64::MIN);
        let mut failure = None;
        for r in batch.records(record_max) {
            match r {
                Ok(r) => kept = (kept.0 + 1, kept.1 + u64::from(r.encoded_bytes), kept.2.max(r.timestamp)),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if failure.is_none() && kept.2 != header.max_timestamp {
            failure = Some(DecodeError::Malformed("batch: max timestamp differs from its records"));
        }
        if let Some(error) = failure {
            return Ok(Some((bad_batch(position, error), kept)));
        }
        if let Err(error) = scan.keep(position, &header, batch.total_bytes() as u64) {
            return Ok(Some((bad_batch(position, error), (0, 0, i64::MIN))));
        }
    }
}

/// A stop at a whole batch with a valid header that recovery cannot keep
/// as it is: the bytes from it are not zeros.
fn bad_batch(position: u64, error: DecodeError) -> BatchStop {
    BatchStop {
        position,
        error,
        zeros: false,
    }
}

/// For a batch whose header is valid but whose bytes run past the end of
/// the file, the whole valid records that are there.
fn torn_prefix(file: &dyn VFile, path: &Path, stop: &BatchStop, expected: u64, len: u64) -> Result<Kept> {
    let none = (0, 0, i64::MIN);
    if !stop.is_truncated() || len - stop.position < BATCH_HEADER_BYTES as u64 {
        return Ok(none);
    }
    let mut buf = vec![0u8; (len - stop.position) as usize];
    file.read_exact_at(&mut buf, stop.position).ctx("read", path)?;
    let Ok(header) = BatchHeader::decode(&buf, crate::limits::BATCH_BYTES_MAX) else {
        return Ok(none);
    };
    if header.base_offset != expected {
        return Ok(none);
    }
    let mut kept = none;
    let mut at = BATCH_HEADER_BYTES;
    while kept.0 < header.record_count {
        let offset = expected + u64::from(kept.0);
        let record_max = crate::limits::RECORD_BYTES_MAX_LIMIT;
        match record::decode_record(&buf[at..], offset, header.base_timestamp, record_max) {
            Ok((r, used)) => {
                at += used;
                kept = (kept.0 + 1, kept.1 + used as u64, kept.2.max(r.timestamp));
            }
            Err(_) => break,
        }
    }
    Ok(kept)
}

#[allow(clippy::too_many_arguments)]
fn cut(
    file: &dyn VFile,
    vfs: &dyn Vfs,
    path: &Path,
    scan: &mut Scan,
    stop: &BatchStop,
    kept: Kept,
    len: u64,
    options: &RecoverOptions,
    last: bool,
    report: &mut SegmentReport,
) -> Result<()> {
    let (count, records_bytes, max_ts) = kept;
    let mut new_len = stop.position;
    let mut patched_header = None;
    if count > 0 {
        let mut h = [0u8; BATCH_HEADER_BYTES];
        file.read_exact_at(&mut h, stop.position).ctx("read", path)?;
        let records_bytes32 = u32::try_from(records_bytes).expect("records of one batch fit u32");
        record::set_batch_extent(&mut h, count, records_bytes32, max_ts);
        let header = BatchHeader::decode(&h, crate::limits::BATCH_BYTES_MAX).expect("patched header");
        new_len = stop.position + BATCH_HEADER_BYTES as u64 + records_bytes;
        patched_header = Some((h, header));
    }
    let cut_bytes = len - new_len;
    let first_bad = scan.next_offset + u64::from(count);
    // The walk judged the bytes from the batch on; when records of it are
    // kept, the cut starts after them.
    let zeros = if new_len == stop.position {
        stop.zeros
    } else {
        fs::is_zero_range(file, new_len, len).ctx("read", path)?
    };
    let short = stop.is_truncated() && cut_bytes < u64::from(crate::limits::BATCH_BYTES_MAX);
    let lost_pages = !zeros && !short && torn_pages(file, path, stop.position, new_len, len)?;
    let torn = zeros || short || lost_pages;
    let reason = if zeros {
        "zero-filled tail".to_string()
    } else if lost_pages {
        format!("{} (its last pages are zeros: a torn write)", stop.error)
    } else {
        stop.error.to_string()
    };
    report.problem = Some(problem(first_bad, new_len, reason, torn));
    report.truncated_bytes = cut_bytes;
    // Opening a log cuts a torn tail of its last segment and nothing else:
    // the caller refuses the partition instead.
    let allowed = !options.automatic || (last && torn);
    if !options.dry_run && allowed {
        // Bytes that are more than zeros or a short write are kept aside,
        // torn pages included: a torn write is the likely story, not the
        // only one.
        if !(zeros || short) {
            report.saved_to = Some(save_cut(file, path, new_len, len, vfs)?);
        }
        // Cut first, then rewrite the torn batch's header: if this is
        // interrupted between the two, the next run finds the same torn
        // batch and does the same.
        file.set_len(new_len).ctx("truncate", path)?;
        if let Some((h, _)) = &patched_header {
            file.write_all_at(h, stop.position).ctx("write", path)?;
        }
        file.sync_data().ctx("fsync", path)?;
    }
    if let Some((_, header)) = patched_header {
        scan.keep(stop.position, &header, new_len - stop.position)
            .expect("the records of a batch that already passed the checks of keep");
    }
    Ok(())
}

const COPY_CHUNK_BYTES: u64 = 1 << 20;

/// Whether the bad batch at `position` is the last thing in the file and
/// its first bad part (the record at `first_bad`, or the header itself)
/// runs into zeros that start at a page boundary and go on to the end of
/// the file: what a power cut leaves when the file's length reached the
/// disk before its last pages did (ext4 and XFS with delayed allocation).
/// A bad record that ends before the zeros is not explained by a lost page
/// (a record may legitimately end in zeros): that is damage.
///
/// What this cannot tell apart: damage inside the very record that runs
/// into a lost page. Only a durable mark of the flushed end would.
fn torn_pages(file: &dyn VFile, path: &Path, position: u64, first_bad: u64, len: u64) -> Result<bool> {
    let Some(last_non_zero) = last_non_zero_byte(file, path, position, len)? else {
        return Ok(true);
    };
    // The zeros reach back over a page boundary (bytes just before it may
    // be zeros that were written).
    let boundary = (last_non_zero + 1).div_ceil(PAGE_BYTES) * PAGE_BYTES;
    let mut h = [0u8; BATCH_HEADER_BYTES];
    let n = file.read_at(&mut h, position).ctx("read", path)?;
    let bad = match BatchHeader::decode(&h[..n], crate::limits::BATCH_BYTES_MAX) {
        Ok(_) => first_bad..record_end(file, path, first_bad)?,
        Err(_) => position..position + BATCH_HEADER_BYTES as u64,
    };
    Ok(bad.start < boundary && boundary < bad.end.min(len))
}

/// Where the record at `at` ends by its length prefix (LEB128), or just
/// past `at` when the prefix cannot be read.
fn record_end(file: &dyn VFile, path: &Path, at: u64) -> Result<u64> {
    let mut prefix = [0u8; 5];
    let n = file.read_at(&mut prefix, at).ctx("read", path)?;
    let mut length = 0u64;
    for (i, &byte) in prefix[..n].iter().enumerate() {
        length |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((at + i as u64 + 1).saturating_add(length));
        }
    }
    Ok(at + 1)
}

/// The page size the torn-page rule assumes (the smallest Linux uses).
const PAGE_BYTES: u64 = 4096;

/// The position of the last non-zero byte in `[from, to)`, if any.
fn last_non_zero_byte(file: &dyn VFile, path: &Path, from: u64, to: u64) -> Result<Option<u64>> {
    let mut buf = vec![0u8; COPY_CHUNK_BYTES.min(to - from) as usize];
    let mut end = to;
    while end > from {
        let start = end.saturating_sub(COPY_CHUNK_BYTES).max(from);
        let n = (end - start) as usize;
        file.read_exact_at(&mut buf[..n], start).ctx("read", path)?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b != 0) {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

/// Saves `[from, to)` of the segment `path` beside it as
/// `<segment>.corrupt` (or `.corrupt.1`, ...: never over an earlier save),
/// durably, before the segment is cut. A run killed after saving and before
/// cutting finds its earlier save holding the same bytes and reuses it, so
/// that running again ends in the same files.
fn save_cut(file: &dyn VFile, path: &Path, from: u64, to: u64, vfs: &dyn Vfs) -> Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let base = PathBuf::from(format!("{}.corrupt", path.display()));
    let candidates =
        std::iter::once(base.clone()).chain((1u32..).map(|n| PathBuf::from(format!("{}.{n}", base.display()))));
    for target in candidates {
        if !vfs.exists(&target) {
            let tmp = PathBuf::from(format!("{}.tmp", target.display()));
            let out = vfs.open(&tmp, true).ctx("create", &tmp)?;
            out.set_len(0).ctx("truncate", &tmp)?;
            copy_range(file, path, from, to, &*out, &tmp)?;
            out.sync_data().ctx("fsync", &tmp)?;
            vfs.rename(&tmp, &target).ctx("rename", &tmp)?;
            fs::sync_directory(vfs, dir)?;
            return Ok(target);
        }
        if same_bytes(file, path, from, to, vfs, &target)? {
            return Ok(target);
        }
    }
    unreachable!("an unbounded sequence of names")
}

/// Copies `[from, to)` of `file` to the start of `out`.
fn copy_range(file: &dyn VFile, path: &Path, from: u64, to: u64, out: &dyn VFile, target: &Path) -> Result<()> {
    let mut buf = vec![0u8; COPY_CHUNK_BYTES.min(to - from) as usize];
    let mut at = from;
    while at < to {
        let n = COPY_CHUNK_BYTES.min(to - at) as usize;
        file.read_exact_at(&mut buf[..n], at).ctx("read", path)?;
        out.write_all_at(&buf[..n], at - from).ctx("write", target)?;
        at += n as u64;
    }
    Ok(())
}

/// Whether the file `other` holds exactly `[from, to)` of `file`.
fn same_bytes(file: &dyn VFile, path: &Path, from: u64, to: u64, vfs: &dyn Vfs, other: &Path) -> Result<bool> {
    let Ok(theirs) = vfs.open_read(other) else {
        return Ok(false);
    };
    if theirs.len().ctx("stat", other)? != to - from {
        return Ok(false);
    }
    let chunk = COPY_CHUNK_BYTES.min(to - from) as usize;
    let (mut a, mut b) = (vec![0u8; chunk], vec![0u8; chunk]);
    let mut at = from;
    while at < to {
        let n = COPY_CHUNK_BYTES.min(to - at) as usize;
        file.read_exact_at(&mut a[..n], at).ctx("read", path)?;
        theirs.read_exact_at(&mut b[..n], at - from).ctx("read", other)?;
        if a[..n] != b[..n] {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

fn problem(offset: u64, position: u64, reason: String, torn_tail: bool) -> Problem {
    Problem {
        offset,
        position,
        reason,
        torn_tail,
    }
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

/// File name of a partition's recovery point.
pub const RECOVERY_POINT_FILE: &str = "recovery-point";
/// File name of a partition's clean-shutdown marker.
pub const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
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
