//! Rendering segments, indexes and partitions for `klog-dump`: one line per
//! batch in `kafka-dump-log.sh`'s `key: value` layout (or per record, or
//! NDJSON), problems on stderr, and a comfy-table summary per partition.
//!
//! Problems in a partition directory come from a dry run of
//! [`crate::storage::recover`], the same code that repairs them, so `klog-dump
//! --verify` reports exactly what `klog-recover --full` would change.

use std::io::{self, BufWriter, Stdout, Write};
use std::path::Path;

use serde_json::json;

use crate::human::format_rfc3339;
use crate::limits;
use crate::storage::batches::FileBatches;
use crate::storage::epoch::{EpochEntry, Epochs, EPOCH_FILE};
use crate::storage::fs::{RealFs, VFile, Vfs};
use crate::storage::producers::ProducerState;
use crate::storage::record::control::{self, Marker};
use crate::storage::record::{Batch, BatchHeader, Codec, Decompressed, Format, Record};
use crate::storage::recover::{self, RecoverOptions};
use crate::storage::segment;
use crate::storage::{index, lock};

/// What to print.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// One line per record.
    pub records: bool,
    /// Keys, values and headers too.
    pub print_data: bool,
    /// Only problems and the summary.
    pub verify: bool,
    /// NDJSON instead of text.
    pub json: bool,
    /// Only errors.
    pub quiet: bool,
}

/// Totals of one segment or partition.
#[derive(Debug, Default, Clone)]
struct Stats {
    segments: u64,
    batches: u64,
    records: u64,
    bytes: u64,
    first_offset: Option<u64>,
    next_offset: Option<u64>,
    timestamp_min: Option<i64>,
    timestamp_max: Option<i64>,
}

impl Stats {
    /// Counts one batch in.
    fn add_batch(&mut self, header: &BatchHeader) {
        self.batches += 1;
        self.records += u64::from(header.record_count);
        self.timestamp_min = Some(
            self.timestamp_min
                .map_or(header.base_timestamp, |m| m.min(header.base_timestamp)),
        );
        self.timestamp_max = Some(
            self.timestamp_max
                .map_or(header.max_timestamp, |m| m.max(header.max_timestamp)),
        );
    }
}

/// Prints what it is given, counting problems.
#[derive(Debug)]
pub struct Dumper {
    options: Options,
    out: BufWriter<Stdout>,
    problems: u64,
    summary: Vec<(String, Stats)>,
    /// The leader epochs of the batches walked so far in this file or
    /// partition (they never decrease along a log).
    walked_epochs: Epochs,
    /// For each epoch walked, where the batches before its first one
    /// ended: a gap a cleaner left may lie between, and an epoch file may
    /// start the epoch anywhere in it (a follower's starts it where its
    /// log ended).
    epoch_floors: std::collections::HashMap<u32, u64>,
    /// Where the last batch walked ended.
    last_end: Option<u64>,
    /// The records of a compressed batch, decompressed.
    scratch: Decompressed<'static>,
    /// The producers of the batches walked so far in this file or
    /// partition: their open transactions.
    producers: ProducerState,
}

impl Dumper {
    /// A dumper printing to stdout.
    pub fn new(options: Options) -> Dumper {
        Dumper {
            options,
            out: BufWriter::new(io::stdout()),
            problems: 0,
            summary: Vec::new(),
            walked_epochs: Epochs::new(),
            epoch_floors: Default::default(),
            last_end: None,
            scratch: Decompressed::default(),
            producers: ProducerState::default(),
        }
    }

    /// Problems found so far.
    pub fn problems(&self) -> u64 {
        self.problems
    }

    fn problem(&mut self, what: impl std::fmt::Display) {
        self.problems += 1;
        let _ = self.out.flush();
        crate::diag::line(format_args!("problem: {what}"));
    }

    /// Dumps one segment file on its own.
    pub fn segment_file(&mut self, path: &Path) -> anyhow::Result<()> {
        self.walked_epochs = Epochs::new();
        self.epoch_floors.clear();
        self.last_end = None;
        self.producers = ProducerState::default();
        let stats = self.segment(path, None, false)?;
        self.open_transactions()?;
        self.summary.push((path.display().to_string(), stats));
        Ok(())
    }

    /// Dumps one segment; `expected` is the offset it should start at.
    /// Returns its totals. A torn tail is expected when a writer holds it.
    fn segment(
        &mut self,
        path: &Path,
        expected: Option<u64>,
        writer_active: bool,
    ) -> anyhow::Result<Stats> {
        let file = RealFs.open_read(path)?;
        let len = file.len()?;
        let mut stats = Stats {
            segments: 1,
            bytes: len,
            ..Stats::default()
        };
        let Some(header) = self.segment_header(&*file, path, expected)? else {
            return Ok(stats);
        };
        let (base, format, cleaned_end) = (header.base_offset, header.format, header.end);
        let skips_below = header.skips_below();
        let mut next = base;
        stats.first_offset = Some(base);
        let start = segment::SEGMENT_HEADER_BYTES as u64;
        let mut walk = FileBatches::new(&*file, format, start, len, limits::BATCH_BYTES_MAX);
        loop {
            match walk.next_batch()? {
                None => break,
                Some(Ok((position, batch))) => {
                    let h = &batch.header;
                    let gap = h.base_offset != next;
                    let expected = if gap
                        && crate::storage::batches::follows(
                            skips_below,
                            next,
                            h.base_offset,
                            h.next_offset(),
                        ) {
                        batch.header.base_offset
                    } else {
                        next
                    };
                    self.batch(path, position, &batch, expected)?;
                    next = batch.header.next_offset();
                    stats.add_batch(&batch.header);
                }
                Some(Err(stop)) => {
                    // The writer may be appending the batch the walk stops
                    // at, or over zeros it took ahead (`--preallocate`):
                    // they are no log bytes.
                    if writer_active && stop.zeros {
                        stats.bytes = stop.position;
                    }
                    if !(writer_active && stop.is_torn_tail()) {
                        self.problem(format_args!(
                            "{}: position {}: {} bytes not a valid batch ({}) at offset {next}",
                            path.display(),
                            stop.position,
                            len - stop.position,
                            stop.error
                        ));
                    }
                    break;
                }
            }
        }
        // A cleaned segment stands for the offsets up to its end.
        stats.next_offset = Some(next.max(cleaned_end.unwrap_or(0)));
        Ok(stats)
    }

    /// Reads a segment's header and prints where it starts; its base
    /// offset and format, or `None` (a problem) when the header is not a
    /// segment's.
    fn segment_header(
        &mut self,
        file: &dyn VFile,
        path: &Path,
        expected: Option<u64>,
    ) -> anyhow::Result<Option<segment::SegmentHeader>> {
        let mut header = [0u8; segment::SEGMENT_HEADER_BYTES];
        let n = file.read_at(&mut header, 0)?;
        let found = match segment::read_header(&header[..n]) {
            Ok(found) => found,
            Err(reason) => {
                self.problem(format_args!("{}: position 0: {reason}", path.display()));
                return Ok(None);
            }
        };
        let (base, format) = (found.base_offset, found.format);
        if !self.options.json && !self.options.verify {
            writeln!(self.out, "Dumping {}", path.display())?;
            writeln!(self.out, "Log starting offset: {base}")?;
            if format == Format::Legacy {
                writeln!(self.out, "Batch format: klog (legacy, read only)")?;
            }
            if let Some(end) = found.end {
                writeln!(self.out, "Cleaned (compacted): offsets up to {end}")?;
            }
        }
        // A segment with gaps may start past where the one before ends.
        let past_gap = found.gaps && found.end.is_none();
        if expected.is_some_and(|e| e != base && !(past_gap && base > e)) {
            self.problem(format_args!(
                "{}: base offset {base}, expected {}",
                path.display(),
                expected.unwrap_or(0)
            ));
        }
        Ok(Some(found))
    }

    /// Checks and prints the batch at `position`, where offset `next` was
    /// expected to start.
    fn batch(
        &mut self,
        path: &Path,
        position: u64,
        batch: &Batch<'_>,
        next: u64,
    ) -> io::Result<()> {
        let valid = batch.validate_in(&mut self.scratch, limits::RECORD_BYTES_MAX_LIMIT);
        let h = &batch.header;
        let floor = self.last_end.unwrap_or(h.base_offset);
        self.epoch_floors.entry(h.leader_epoch).or_insert(floor);
        self.last_end = Some(h.next_offset());
        if let Err(why) = self.walked_epochs.check_next(h.leader_epoch, h.base_offset) {
            self.problem(format_args!(
                "{}: position {position}: {why}",
                path.display()
            ));
        }
        if batch.header.base_offset != next {
            self.problem(format_args!(
                "{}: position {position}: batch base offset {} out of sequence, expected {next}",
                path.display(),
                batch.header.base_offset
            ));
        }
        if let Err(e) = &valid {
            let bad = self.first_bad_offset(batch);
            self.problem(format_args!(
                "{}: position {position}: {e} at offset {bad}",
                path.display()
            ));
        }
        let marker = control::marker_of(h, batch.bytes());
        match marker {
            Some(marker) => {
                self.producers.apply_marker(h, marker);
            }
            None => self.producers.apply(h),
        }
        self.print_batch(batch, position, valid.is_ok(), marker)
    }

    /// Prints the transactions the batches walked left open: a line each
    /// (read_committed consumers wait at the oldest).
    fn open_transactions(&mut self) -> io::Result<()> {
        if self.options.verify {
            return Ok(());
        }
        for (first_offset, producer_id) in self.producers.open_transactions() {
            if self.options.json {
                let line = json!({"type": "open_transaction", "producer_id": producer_id,
                    "first_offset": first_offset});
                writeln!(self.out, "{line}")?;
            } else {
                writeln!(
                    self.out,
                    "openTransaction: producerId: {producer_id} firstOffset: {first_offset}"
                )?;
            }
        }
        Ok(())
    }

    fn first_bad_offset(&mut self, batch: &Batch<'_>) -> u64 {
        let mut offset = batch.header.base_offset;
        let Ok(records) = batch.records_in(&mut self.scratch, limits::RECORD_BYTES_MAX_LIMIT)
        else {
            return offset;
        };
        for r in records {
            match r {
                Ok(r) => offset = r.offset + 1,
                Err(_) => break,
            }
        }
        offset
    }

    /// Bytes of the batch's records uncompressed (what was decompressed
    /// last, for a compressed batch just validated).
    fn uncompressed_bytes(&self, batch: &Batch<'_>) -> usize {
        let header = batch.header.header_bytes();
        match batch.header.codec() {
            Codec::None => batch.total_bytes(),
            _ => header + self.scratch.len(),
        }
    }

    fn print_batch(
        &mut self,
        batch: &Batch<'_>,
        position: u64,
        valid: bool,
        marker: Option<Marker>,
    ) -> io::Result<()> {
        if self.options.verify {
            return Ok(());
        }
        let h: &BatchHeader = &batch.header;
        let last_sequence = match h.base_sequence {
            -1 => -1,
            first => {
                (i64::from(first) + i64::from(h.last_offset_delta)) % (i64::from(i32::MAX) + 1)
            }
        };
        let uncompressed = self.uncompressed_bytes(batch);
        if self.options.json {
            let line = json!({"type": "batch", "base_offset": h.base_offset, "last_offset": h.last_offset(),
                "count": h.record_count, "base_sequence": h.base_sequence, "last_sequence": last_sequence,
                "producer_id": h.producer_id, "producer_epoch": h.producer_epoch,
                "partition_leader_epoch": h.leader_epoch, "is_transactional": h.is_transactional(),
                "is_control": h.is_control(), "position": position, "create_time": h.max_timestamp,
                "size": h.total_bytes(), "uncompressed_size": uncompressed, "format": h.format.name(),
                "magic": h.magic, "compress_codec": h.codec().name(), "crc": h.crc, "is_valid": valid});
            writeln!(self.out, "{line}")?;
        } else {
            let legacy = if h.format == Format::Legacy {
                " format: klog"
            } else {
                ""
            };
            writeln!(
                self.out,
                "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {last_sequence} producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} position: {position} CreateTime: {} size: {} uncompressedSize: {uncompressed} magic: {}{legacy} compresscodec: {} crc: {:#010x} isvalid: {valid}",
                h.base_offset,
                h.last_offset(),
                h.record_count,
                h.base_sequence,
                h.producer_id,
                h.producer_epoch,
                h.leader_epoch,
                h.is_transactional(),
                h.is_control(),
                h.max_timestamp,
                h.total_bytes(),
                h.magic,
                h.codec().name(),
                h.crc
            )?;
        }
        if !self.options.records {
            return Ok(());
        }
        let Ok(records) = batch.records_in(&mut self.scratch, limits::RECORD_BYTES_MAX_LIMIT)
        else {
            return Ok(());
        };
        for r in records.flatten() {
            print_record(&mut self.out, self.options, &r, marker)?;
        }
        Ok(())
    }
}

/// Prints one record's line; a transaction marker's says which
/// (`endTxnMarker: COMMIT coordinatorEpoch: 0`, as Kafka's dump does).
fn print_record(
    out: &mut impl Write,
    options: Options,
    r: &Record<'_>,
    marker: Option<Marker>,
) -> io::Result<()> {
    if options.json {
        let mut line = json!({"type": "record", "offset": r.offset, "create_time": r.timestamp,
            "key_size": r.key.map_or(-1, |k| k.len() as i64), "value_size": r.value.len(),
            "header_count": r.header_count()});
        if let Some(m) = marker {
            line["end_txn_marker"] = json!(m.name());
            line["coordinator_epoch"] = json!(m.coordinator_epoch);
        }
        if options.print_data {
            line["key"] = json!(r.key.map(String::from_utf8_lossy));
            line["payload"] = json!(String::from_utf8_lossy(r.value));
            let headers: Vec<_> = r
                .headers()
                .flat_map(|(n, v)| [String::from_utf8_lossy(n), String::from_utf8_lossy(v)])
                .collect();
            line["headers"] = json!(headers);
        }
        return writeln!(out, "{line}");
    }
    write!(
        out,
        "| offset: {} CreateTime: {} keySize: {} valueSize: {} headerCount: {}",
        r.offset,
        r.timestamp,
        r.key.map_or(-1, |k| k.len() as i64),
        r.value.len(),
        r.header_count()
    )?;
    if let Some(m) = marker {
        let epoch = m.coordinator_epoch;
        return writeln!(out, " endTxnMarker: {} coordinatorEpoch: {epoch}", m.name());
    }
    if options.print_data {
        let headers: Vec<String> = r
            .headers()
            .map(|(n, v)| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                )
            })
            .collect();
        write!(
            out,
            " headers: [{}] key: {} payload: {}",
            headers.join(","),
            r.key.map_or("null".into(), String::from_utf8_lossy),
            String::from_utf8_lossy(r.value)
        )?;
    }
    writeln!(out)
}

impl Dumper {
    /// Dumps the entries of an index or time index file.
    pub fn index_file(&mut self, path: &Path) -> anyhow::Result<()> {
        let log = path.with_extension("log");
        let entries = match index::read_entries(&RealFs, &log) {
            Ok(e) => e,
            Err(e) => {
                self.problem(format_args!("{}: {e}", path.display()));
                return Ok(());
            }
        };
        let base = log
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(segment::parse_log_file_name)
            .unwrap_or(0);
        let time = path.extension().is_some_and(|e| e == "timeindex");
        if !self.options.json {
            writeln!(self.out, "Dumping {}", path.display())?;
        }
        for e in entries {
            let offset = base + u64::from(e.relative_offset);
            match (self.options.json, time) {
                (true, false) => writeln!(
                    self.out,
                    "{}",
                    json!({"type": "index", "offset": offset, "position": e.position})
                )?,
                (true, true) => writeln!(
                    self.out,
                    "{}",
                    json!({"type": "timeindex", "timestamp": e.max_timestamp, "offset": offset})
                )?,
                (false, false) => writeln!(self.out, "offset: {offset} position: {}", e.position)?,
                (false, true) => {
                    writeln!(self.out, "timestamp: {} offset: {offset}", e.max_timestamp)?
                }
            }
        }
        Ok(())
    }

    /// Dumps every segment of a partition directory, then checks it the way
    /// recovery would.
    pub fn partition(&mut self, dir: &Path) -> anyhow::Result<()> {
        let holder = lock::holder(dir);
        if let Some(pid) = holder {
            if !self.options.quiet {
                crate::diag::line(format_args!(
                    "% {} is being written by pid {pid}: reading up to the last whole record",
                    dir.display()
                ));
            }
        }
        let (segments, leftovers) = recover::list_partition(&RealFs, dir)?;
        self.walked_epochs = Epochs::new();
        self.epoch_floors.clear();
        self.last_end = None;
        self.producers = ProducerState::default();
        let mut total = Stats::default();
        let mut expected = None;
        let last = segments.len().saturating_sub(1);
        for (i, (_, path)) in segments.iter().enumerate() {
            let s = self.segment(path, expected, holder.is_some() && i == last)?;
            expected = s.next_offset;
            merge(&mut total, &s);
        }
        if holder.is_none() {
            for l in &leftovers {
                self.problem(format_args!("{}: leftover file", l.display()));
            }
            for rolled in super::recover::rolled_not_named(dir) {
                self.problem(format_args!(
                    "{}: a segment rolled and not yet named, not read here: klog-recover, or the partition's next writable open (its broker's start), adopts it if it continues the log, else removes it",
                    rolled.display()
                ));
            }
            self.check_indexes(dir)?;
            self.check_epochs(dir, &total)?;
        }
        self.open_transactions()?;
        self.summary.push((dir.display().to_string(), total));
        Ok(())
    }

    /// Dumps what `path` is: a segment, an index or time index, or a
    /// partition or data directory (each of its partitions).
    pub fn path(&mut self, path: &Path) -> anyhow::Result<()> {
        let meta = std::fs::metadata(path)?;
        if meta.is_dir() {
            for dir in super::recover::partition_dirs(&[path.to_path_buf()])? {
                self.partition(&dir)?;
            }
            return Ok(());
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("log") => self.segment_file(path),
            Some("index") | Some("timeindex") => self.index_file(path),
            _ => anyhow::bail!("not a .log, .index or .timeindex file, nor a directory"),
        }
    }

    fn check_indexes(&mut self, dir: &Path) -> anyhow::Result<()> {
        let options = RecoverOptions {
            full: true,
            dry_run: true,
            automatic: false,
            trust_last: false,
            index_interval_bytes: limits::INDEX_INTERVAL_BYTES_DEFAULT,
        };
        let report = recover::recover_partition(&RealFs, dir, 0, &options)?;
        for seg in &report.segments {
            if let Some(why) = &seg.index_problem {
                self.problem(format_args!("{}: index: {why}", seg.path.display()));
            }
        }
        Ok(())
    }

    /// Checks the partition's epoch file against the epochs of its batches
    /// (walked by [`Dumper::segment`]): each epoch starts in the file where
    /// its first batch is (the log's first epoch may start before the log,
    /// whose head retention deleted), and nothing else starts inside the log
    /// or after its end.
    fn check_epochs(&mut self, dir: &Path, total: &Stats) -> anyhow::Result<()> {
        let path = dir.join(EPOCH_FILE);
        let file = match Epochs::read(&RealFs, dir)? {
            None if total.records == 0 => return Ok(()),
            None => {
                self.problem(format_args!(
                    "{}: missing (the next writable open rebuilds it from the batches)",
                    path.display()
                ));
                return Ok(());
            }
            Some(Err(why)) => {
                self.problem(format_args!("{}: {why}", path.display()));
                return Ok(());
            }
            Some(Ok(file)) => file,
        };
        let (start, end) = (
            total.first_offset.unwrap_or(0),
            total.next_offset.unwrap_or(0),
        );
        let walked = std::mem::take(&mut self.walked_epochs);
        let floors = std::mem::take(&mut self.epoch_floors);
        let starts = |f: &EpochEntry| starts_in_gap(&walked, &floors, f);
        let mut wrong = Vec::new();
        for (i, w) in walked.entries().iter().enumerate() {
            let found = if i == 0 {
                file.epoch_at(w.start_offset) == Some(w.epoch)
            } else {
                file.entries()
                    .iter()
                    .any(|f| f == w || (f.epoch == w.epoch && starts(f)))
            };
            if !found {
                wrong.push(format!(
                    "the batches have epoch {} from offset {}",
                    w.epoch, w.start_offset
                ));
            }
        }
        let in_log = |f: &EpochEntry| f.start_offset > start && f.start_offset < end;
        for f in file
            .entries()
            .iter()
            .filter(|f| in_log(f) && !walked.entries().contains(f) && !starts(f))
        {
            wrong.push(format!(
                "no batch starts epoch {} at offset {}",
                f.epoch, f.start_offset
            ));
        }
        for f in file.entries().iter().filter(|f| f.start_offset > end) {
            wrong.push(format!(
                "epoch {} starts at {}, past the log's end {end}",
                f.epoch, f.start_offset
            ));
        }
        for why in wrong {
            self.problem(format_args!("{}: {why}", path.display()));
        }
        Ok(())
    }

    /// Prints the summary table (or JSON lines) and flushes.
    pub fn finish(&mut self) -> anyhow::Result<()> {
        if self.options.json {
            for (name, s) in &self.summary {
                let line = json!({"type": "summary", "path": name, "segments": s.segments, "batches": s.batches,
                    "records": s.records, "bytes": s.bytes, "first_offset": s.first_offset,
                    "next_offset": s.next_offset, "min_timestamp": s.timestamp_min, "max_timestamp": s.timestamp_max});
                writeln!(self.out, "{line}")?;
            }
        } else if !self.options.quiet && !self.summary.is_empty() {
            let mut table = super::table(&[
                "path",
                "segments",
                "records",
                "offsets",
                "bytes",
                "time range",
            ]);
            for (name, s) in &self.summary {
                let offsets = match (s.first_offset, s.next_offset) {
                    (Some(a), Some(b)) if b > a => format!("{a} to {}", b - 1),
                    _ => "empty".into(),
                };
                let time = match (s.timestamp_min, s.timestamp_max) {
                    (Some(a), Some(b)) => format!("{} to {}", format_rfc3339(a), format_rfc3339(b)),
                    _ => "-".into(),
                };
                table.add_row([
                    name.clone(),
                    s.segments.to_string(),
                    s.records.to_string(),
                    offsets,
                    s.bytes.to_string(),
                    time,
                ]);
            }
            self.out.flush()?;
            crate::diag::line(format_args!("{table}"));
        }
        self.out.flush()?;
        Ok(())
    }
}

fn merge(total: &mut Stats, s: &Stats) {
    total.segments += s.segments;
    total.batches += s.batches;
    total.records += s.records;
    total.bytes += s.bytes;
    total.first_offset = total.first_offset.or(s.first_offset);
    total.next_offset = s.next_offset.or(total.next_offset);
    total.timestamp_min = match (total.timestamp_min, s.timestamp_min) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    total.timestamp_max = match (total.timestamp_max, s.timestamp_max) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
}

/// Whether the epoch file's entry `f` starts its epoch where the batches
/// walked allow: anywhere from where the batches before the epoch's first
/// one ended (`floors`; a gap a cleaner left) up to that first one.
fn starts_in_gap(
    walked: &Epochs,
    floors: &std::collections::HashMap<u32, u64>,
    f: &EpochEntry,
) -> bool {
    walked.entries().iter().any(|w| {
        w.epoch == f.epoch
            && f.start_offset <= w.start_offset
            && floors
                .get(&w.epoch)
                .is_some_and(|&floor| floor <= f.start_offset)
    })
}
