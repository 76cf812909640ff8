//! Recovering one segment: its header, its index trusted as far as the
//! options allow, its batches walked and checked record by record against
//! the format's hard limits, and a cut where they stop being whole and
//! valid ([`super::cut`]).

use std::path::Path;

use super::cut::cut;
use super::scan::{Scan, SegmentFile, Stopped};
use super::{problem, Problem, RecoverOptions, SegmentReport};
use crate::error::{IoContext, Result};
use crate::limits::BATCH_BYTES_MAX;
use crate::storage::fs::Vfs;
use crate::storage::index::{self, IndexEntry};
use crate::storage::record::{BatchHeader, Format};
use crate::storage::segment::{self, SegmentHeader, SEGMENT_HEADER_BYTES};

/// Recovers the segment `path`, whose name says it starts at `base`;
/// `trusted`: its index is trusted up to its last entry.
pub(super) fn recover_segment(
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
    let mut seg = SegmentFile {
        vfs,
        file,
        path,
        len,
        format: Format::Kafka,
        options,
        last,
    };
    let mut report = SegmentReport::new(path, base, !trusted);
    let skips_below = match seg.header_problem(base)? {
        Ok(header) => {
            seg.format = header.format;
            report.format = header.format;
            report.end = header.end;
            header.skips_below()
        }
        Err(problem) => {
            report.problem = Some(problem);
            return Ok(report);
        }
    };
    let (mut scan, start, stopped) = seg.scan(base, skips_below, trusted)?;
    report.scanned = report.scanned || scan.from_start;
    report.bytes_scanned = len.saturating_sub(start);
    if let Some(stopped) = &stopped {
        cut(&seg, &mut scan, stopped, &mut report)?;
    }
    if !options.dry_run && report.scanned {
        // What recovery keeps past the recovery point may be in the page
        // cache only (the writer was killed before its fsync): make it
        // durable before anyone is told it is.
        seg.file.sync_data().ctx("fsync", path)?;
    }
    report.keep(base, scan);
    Ok(report)
}

impl SegmentReport {
    pub(super) fn new(path: &Path, base: u64, scanned: bool) -> SegmentReport {
        SegmentReport {
            path: path.to_path_buf(),
            base_offset: base,
            format: Format::Kafka,
            scanned,
            batches_valid: 0,
            records_valid: 0,
            bytes_valid: 0,
            truncated_bytes: 0,
            problem: None,
            saved_to: None,
            index_problem: None,
            bytes_scanned: 0,
            end: None,
            next_offset: base,
            max_timestamp: i64::MIN,
            first_timestamp: None,
            entries: Vec::new(),
        }
    }

    /// Records what the scan of the segment based at `base` kept.
    fn keep(&mut self, base: u64, mut scan: Scan) {
        self.batches_valid = scan.batches;
        self.bytes_valid = scan.size;
        // A cleaned segment stands for the offsets up to its end.
        self.next_offset = scan.next_offset.max(self.end.unwrap_or(0));
        self.records_valid = scan.next_offset - base;
        self.max_timestamp = scan.max_timestamp;
        self.first_timestamp = scan.first_timestamp;
        let (entries, index_problem) = scan.finish_index(self.problem.is_some());
        self.entries = entries;
        self.index_problem = index_problem;
    }
}

impl SegmentFile<'_> {
    /// The format of the segment's batches, or what is wrong with its
    /// header. A header torn by a crash while the segment was created
    /// (short, or zeros) is a torn tail, and only ever in the last segment.
    fn header_problem(&self, base: u64) -> Result<std::result::Result<SegmentHeader, Problem>> {
        let mut header = [0u8; SEGMENT_HEADER_BYTES];
        let n = self.read_at(&mut header, 0)?;
        let reason = match segment::read_header(&header[..n]) {
            Ok(h) if h.base_offset == base => return Ok(Ok(h)),
            Ok(h) => format!("header names base offset {}", h.base_offset),
            Err(reason) => reason,
        };
        let torn = self.last && (n < SEGMENT_HEADER_BYTES || header.iter().all(|&b| b == 0));
        Ok(Err(problem(base, 0, reason, torn)))
    }

    /// The index on disk if it keeps the invariants every index keeps, or
    /// why not.
    fn disk_index(&self) -> (Vec<IndexEntry>, Option<String>) {
        let positions = SEGMENT_HEADER_BYTES as u64..self.len;
        let checked = index::read_entries(self.vfs, self.path).and_then(|entries| {
            index::check_entries(&entries, positions, u64::from(u32::MAX)).map(|()| entries)
        });
        match checked {
            Ok(entries) => (entries, None),
            Err(e) => (Vec::new(), Some(e)),
        }
    }

    /// Scans the segment based at `base`, from the last entry of its index
    /// when `trusted`: the scan, the position it began at, and where it
    /// stopped if before the end.
    fn scan(
        &self,
        base: u64,
        skips_below: Option<u64>,
        trusted: bool,
    ) -> Result<(Scan, u64, Option<Stopped>)> {
        let (disk, index_problem) = self.disk_index();
        let interval_bytes = self.options.index_interval_bytes;
        let mut scan = Scan::new(base, interval_bytes, disk.clone(), index_problem.clone());
        scan.skips_below = skips_below;
        if trusted && index_problem.is_none() && !disk.is_empty() {
            scan.trust_up_to_last_entry();
            scan.first_timestamp = self.first_timestamp()?;
        }
        let start = scan.size;
        let stopped = self.scan_batches(&mut scan)?;
        if (stopped.is_some() || scan.index_problem.is_some()) && !scan.from_start {
            // The index led to bytes that are not whole, or its last entry is
            // wrong: judge the segment by all of its bytes, trusting nothing.
            let mut scan = Scan::new(base, interval_bytes, disk, index_problem);
            scan.skips_below = skips_below;
            let start = scan.size;
            let stopped = self.scan_batches(&mut scan)?;
            return Ok((scan, start, stopped));
        }
        Ok((scan, start, stopped))
    }

    /// The base timestamp of the segment's first batch, if it has one.
    fn first_timestamp(&self) -> Result<Option<i64>> {
        let mut h = vec![0u8; self.format.header_bytes()];
        if self.read_at(&mut h, SEGMENT_HEADER_BYTES as u64)? < h.len() {
            return Ok(None);
        }
        Ok(BatchHeader::decode(self.format, &h, BATCH_BYTES_MAX)
            .ok()
            .map(|h| h.base_timestamp))
    }
}
