//! Scanning one segment: walking its batches, checking every record
//! against the format's hard limits, keeping each batch that is whole,
//! valid and in sequence up to the first that is not (and the whole records
//! at the start of that one), and checking the segment's index on disk
//! against what is kept, by the invariants in "Indexes" in [`super`] (never
//! by the interval this run would use: the writer may have used another).

use std::path::Path;
use std::sync::Arc;

use super::RecoverOptions;
use crate::error::{IoContext, Result};
use crate::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};
use crate::storage::batches::{BatchStop, FileBatches};
use crate::storage::fs::{VFile, Vfs};
use crate::storage::index::IndexEntry;
use crate::storage::record::{
    self, legacy, BatchHeader, Codec, DecodeError, Format, Overrun, Record,
};
use crate::storage::segment::SEGMENT_HEADER_BYTES;

/// A segment file under recovery, and how it may be judged.
pub(super) struct SegmentFile<'a> {
    pub(super) vfs: &'a dyn Vfs,
    pub(super) file: Arc<dyn VFile>,
    pub(super) path: &'a Path,
    /// The file's length when recovery opened it.
    pub(super) len: u64,
    /// The format of its batches (its header's).
    pub(super) format: Format,
    pub(super) options: &'a RecoverOptions,
    /// Whether it is the partition's last segment, the only one a crash
    /// can leave with a torn tail.
    pub(super) last: bool,
}

impl SegmentFile<'_> {
    /// Reads up to `buf.len()` bytes at `at`; how many there were.
    pub(super) fn read_at(&self, buf: &mut [u8], at: u64) -> Result<usize> {
        self.file.read_at(buf, at).ctx("read", self.path)
    }

    /// Reads exactly `buf.len()` bytes at `at`.
    pub(super) fn read_exact_at(&self, buf: &mut [u8], at: u64) -> Result<()> {
        self.file.read_exact_at(buf, at).ctx("read", self.path)
    }
}

/// The running state of a segment scan, and of the check of its index.
///
/// Missing entries after the last one on disk are not damage (a crash can
/// leave an index short); they are added every `interval_bytes`.
#[derive(Debug)]
pub(super) struct Scan {
    /// The segment's base offset.
    base: u64,
    /// Batches kept.
    pub(super) batches: u64,
    /// Bytes kept, segment header included: where the next batch starts.
    pub(super) size: u64,
    /// One past the last record kept.
    pub(super) next_offset: u64,
    /// Largest timestamp kept.
    pub(super) max_timestamp: i64,
    /// Timestamp of the segment's first batch.
    pub(super) first_timestamp: Option<i64>,
    interval_bytes: u64,
    /// Whether the scan began at the segment's first batch (so `rebuilt`
    /// covers the whole segment).
    pub(super) from_start: bool,
    /// Entries rebuilt from scratch, one every `interval_bytes`.
    rebuilt: Vec<IndexEntry>,
    bytes_since_rebuilt: u64,
    /// The index on disk, checked entry by entry as the scan passes them.
    disk: Vec<IndexEntry>,
    disk_next: usize,
    /// The entries kept: the checked ones on disk, then new ones past the
    /// last of them.
    entries: Vec<IndexEntry>,
    bytes_since_entry: u64,
    /// Why the index on disk cannot stay, once known.
    pub(super) index_problem: Option<String>,
    /// Below which offset its batches may skip offsets
    /// ([`crate::storage::segment::SegmentHeader::skips_below`]).
    pub(super) skips_below: Option<u64>,
}

impl Scan {
    /// A scan of the segment based at `base` from its first batch, checking
    /// `disk` (the entries on disk, unless `index_problem` says why not).
    pub(super) fn new(
        base: u64,
        interval_bytes: u32,
        disk: Vec<IndexEntry>,
        index_problem: Option<String>,
    ) -> Scan {
        Scan {
            base,
            batches: 0,
            size: SEGMENT_HEADER_BYTES as u64,
            next_offset: base,
            max_timestamp: i64::MIN,
            first_timestamp: None,
            interval_bytes: u64::from(interval_bytes),
            from_start: true,
            rebuilt: Vec::new(),
            bytes_since_rebuilt: 0,
            disk,
            disk_next: 0,
            entries: Vec::new(),
            bytes_since_entry: 0,
            index_problem,
            skips_below: None,
        }
    }

    /// Whether a batch starting at `base` and ending before `next` may
    /// follow what was kept ([`crate::storage::batches::follows`]).
    pub(super) fn follows(&self, base: u64, next: u64) -> bool {
        crate::storage::batches::follows(self.skips_below, self.next_offset, base, next)
    }

    /// Starts at the last entry of a trusted index instead of the first
    /// batch: the entries before it are taken as they are, and the batch it
    /// names is checked like any other.
    pub(super) fn trust_up_to_last_entry(&mut self) {
        let last = self.disk.len() - 1;
        let entry = self.disk[last];
        self.from_start = false;
        self.entries = self.disk[..last].to_vec();
        self.disk_next = last;
        self.size = u64::from(entry.position);
        self.next_offset = self.base + u64::from(entry.relative_offset);
        self.max_timestamp = entry.max_timestamp;
    }

    /// Keeps the batch at `position`; an error when it cannot be indexed
    /// (a position or relative offset beyond `u32`: damage, not a crash).
    pub(super) fn keep(
        &mut self,
        position: u64,
        header: &BatchHeader,
        bytes: u64,
    ) -> Result<(), DecodeError> {
        let entry = IndexEntry::for_batch(self.base, position, header, self.max_timestamp)?;
        self.max_timestamp = entry.max_timestamp;
        self.first_timestamp.get_or_insert(header.base_timestamp);
        if self.from_start && self.bytes_since_rebuilt >= self.interval_bytes {
            self.rebuilt.push(entry);
            self.bytes_since_rebuilt = 0;
        }
        self.bytes_since_rebuilt += bytes;
        self.check_disk_entry(entry);
        self.bytes_since_entry += bytes;
        self.batches += 1;
        self.size = position + bytes;
        self.next_offset = header.next_offset();
        Ok(())
    }

    /// Checks the entry on disk the scan has reached, if any, against the
    /// batch just kept; past the last one, adds entries of its own.
    fn check_disk_entry(&mut self, batch: IndexEntry) {
        if self.index_problem.is_some() {
            return;
        }
        let j = self.disk_next;
        let Some(disk) = self.disk.get(j).copied() else {
            if self.bytes_since_entry >= self.interval_bytes {
                self.entries.push(batch);
                self.bytes_since_entry = 0;
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
            self.entries.push(disk);
            self.disk_next += 1;
            self.bytes_since_entry = 0;
            None
        };
    }

    /// The entries the segment has after recovery, and why the index on
    /// disk cannot stay, if it cannot.
    pub(super) fn finish_index(&mut self, was_cut: bool) -> (Vec<IndexEntry>, Option<String>) {
        if self.index_problem.is_none() && self.disk_next < self.disk.len() && !was_cut {
            let j = self.disk_next;
            self.index_problem = Some(format!(
                "entry {j}: position {} is beyond the last batch",
                self.disk[j].position
            ));
        }
        if self.index_problem.is_none() && !was_cut {
            return (std::mem::take(&mut self.entries), None);
        }
        // A cut segment is always scanned from its start (a trusted scan
        // that stops is redone in full).
        debug_assert!(self.from_start);
        (std::mem::take(&mut self.rebuilt), self.index_problem.take())
    }
}

/// The whole, valid records at the start of the batch a scan stopped at:
/// what recovery keeps of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KeptRecords {
    /// How many.
    pub(super) count: u32,
    /// Their bytes.
    pub(super) bytes: u64,
    /// Their largest timestamp.
    pub(super) max_timestamp: i64,
}

impl KeptRecords {
    pub(super) const NONE: KeptRecords = KeptRecords {
        count: 0,
        bytes: 0,
        max_timestamp: i64::MIN,
    };

    fn add(&mut self, record: &Record<'_>) {
        self.count += 1;
        self.bytes += u64::from(record.encoded_bytes);
        self.max_timestamp = self.max_timestamp.max(record.timestamp);
    }
}

/// Where a scan stopped before the end of the segment, and what it keeps
/// of the batch there.
#[derive(Debug)]
pub(super) struct Stopped {
    pub(super) stop: BatchStop,
    pub(super) kept: KeptRecords,
    /// The batch's bytes are all in the file: what is wrong is inside it
    /// (a record, its sequence), so it cannot be a short write, whatever
    /// the error says (a damaged record length reads as "truncated").
    pub(super) whole_batch: bool,
    /// The batch ends, whole, before the bytes after it
    /// ([`Overrun::EndsEarly`]): they are not its lost pages.
    pub(super) ends_early: bool,
}

impl SegmentFile<'_> {
    /// Walks the batches from where `scan` is, keeping each that is whole
    /// and valid, in sequence and indexable, up to the first that is not.
    pub(super) fn scan_batches(&self, scan: &mut Scan) -> Result<Option<Stopped>> {
        let mut walk = FileBatches::new(
            &*self.file,
            self.format,
            scan.size,
            self.len,
            BATCH_BYTES_MAX,
        );
        loop {
            let (position, batch) = match walk.next_batch().ctx("read", self.path)? {
                None => return Ok(None),
                Some(Ok(found)) => found,
                Some(Err(stop)) => {
                    let kept = self.torn_prefix(&stop, scan.next_offset)?;
                    let overrun = match stop.is_truncated() {
                        true => self.overrun(&stop)?,
                        false => Overrun::Torn,
                    };
                    return Ok(Some(Stopped {
                        stop,
                        kept,
                        whole_batch: overrun != Overrun::Torn,
                        ends_early: overrun == Overrun::EndsEarly,
                    }));
                }
            };
            let header = batch.header;
            if !scan.follows(header.base_offset, header.next_offset()) {
                let error = DecodeError::Malformed("batch: base offset out of sequence");
                return Ok(Some(bad_batch(position, error, KeptRecords::NONE)));
            }
            let mut kept = KeptRecords::NONE;
            let mut failure = None;
            // A compressed batch is judged by its CRC32C, which covers the
            // records as the producer sent them (and the log checked them
            // before it stored them); an uncompressed one's records are
            // framed here too, and a legacy batch's each have a CRC.
            let records = (header.codec() == Codec::None)
                .then(|| batch.records(RECORD_BYTES_MAX_LIMIT))
                .into_iter()
                .flatten();
            for r in records {
                match r {
                    Ok(r) => kept.add(&r),
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            let legacy = header.format == Format::Legacy;
            if legacy && failure.is_none() && kept.max_timestamp != header.max_timestamp {
                failure = Some(DecodeError::Malformed(
                    "batch: max timestamp differs from its records",
                ));
            }
            if let Some(error) = failure {
                // A Kafka batch is kept whole or not at all.
                let kept = if legacy { kept } else { KeptRecords::NONE };
                return Ok(Some(bad_batch(position, error, kept)));
            }
            if let Err(error) = scan.keep(position, &header, batch.total_bytes() as u64) {
                return Ok(Some(bad_batch(position, error, KeptRecords::NONE)));
            }
        }
    }

    /// Whether the batch a walk stopped at, cut short by the end of the
    /// file, can be a writer's short write rather than a damaged length
    /// ([`record::overrun`]).
    fn overrun(&self, stop: &BatchStop) -> Result<Overrun> {
        if self.format == Format::Legacy {
            return Ok(Overrun::Torn);
        }
        let mut buf = vec![0u8; (self.len - stop.position) as usize];
        self.read_exact_at(&mut buf, stop.position)?;
        Ok(record::overrun(self.format, &buf))
    }

    /// For a legacy batch whose header is valid but whose bytes run past
    /// the end of the file, the whole valid records that are there (each
    /// has a CRC of its own; a Kafka batch has one CRC for all: none).
    fn torn_prefix(&self, stop: &BatchStop, expected: u64) -> Result<KeptRecords> {
        let header_bytes = legacy::BATCH_HEADER_BYTES as u64;
        if self.format != Format::Legacy
            || !stop.is_truncated()
            || self.len - stop.position < header_bytes
        {
            return Ok(KeptRecords::NONE);
        }
        let mut buf = vec![0u8; (self.len - stop.position) as usize];
        self.read_exact_at(&mut buf, stop.position)?;
        Ok(whole_records(&buf, expected))
    }
}

/// A stop at a whole batch with a valid header that recovery cannot keep
/// as it is (the bytes from it are not zeros), keeping `kept` of it.
fn bad_batch(position: u64, error: DecodeError, kept: KeptRecords) -> Stopped {
    let stop = BatchStop {
        position,
        error,
        zeros: false,
    };
    Stopped {
        stop,
        kept,
        whole_batch: true,
        ends_early: false,
    }
}

/// The whole, valid records at the start of `bytes`, a batch cut short
/// whose first record should be `expected`: none when its header is bad or
/// out of sequence.
fn whole_records(bytes: &[u8], expected: u64) -> KeptRecords {
    let mut kept = KeptRecords::NONE;
    let Ok(header) = BatchHeader::decode(Format::Legacy, bytes, BATCH_BYTES_MAX) else {
        return kept;
    };
    if header.base_offset != expected {
        return kept;
    }
    let mut at = header.header_bytes();
    while kept.count < header.record_count {
        let offset = expected + u64::from(kept.count);
        match legacy::decode_record(
            &bytes[at..],
            offset,
            header.base_timestamp,
            RECORD_BYTES_MAX_LIMIT,
        ) {
            Ok((r, used)) => {
                at += used;
                kept.add(&r);
            }
            Err(_) => break,
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEGACY_HEADER_BYTES: usize = legacy::BATCH_HEADER_BYTES;
    // Recovery of legacy segments, whose records each have a CRC: a torn
    // batch keeps its whole records.
    use crate::storage::record::legacy::{set_base_offset, BatchBuilder};

    /// A batch of `count` records of `value_bytes` each, the first at
    /// `base_offset`, timestamps `ts..ts + count`.
    fn batch(base_offset: u64, count: u32, value_bytes: usize, ts: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for i in 0..count {
            b.push(ts + i64::from(i), None, &[], &vec![b'x'; value_bytes]);
        }
        let bytes = b.finish();
        set_base_offset(bytes, base_offset);
        bytes.to_vec()
    }

    /// A segment's batches (base 100): eight of 2 records, 60 bytes each,
    /// timestamps rising; their positions and headers.
    fn segment() -> Vec<(u64, BatchHeader)> {
        let mut position = SEGMENT_HEADER_BYTES as u64;
        (0..8)
            .map(|i| {
                let bytes = batch(100 + 2 * i, 2, 5, 10 * i as i64);
                let header = BatchHeader::decode(Format::Legacy, &bytes, BATCH_BYTES_MAX).unwrap();
                let at = position;
                position += header.total_bytes();
                (at, header)
            })
            .collect()
    }

    /// Scans all of `segment()` checking `disk`; the entries kept and the
    /// index problem.
    fn scan_all(disk: Vec<IndexEntry>) -> (Vec<IndexEntry>, Option<String>, Scan) {
        let mut scan = Scan::new(100, 100, disk, None);
        for (position, header) in segment() {
            scan.keep(position, &header, header.total_bytes()).unwrap();
        }
        let (entries, problem) = scan.finish_index(false);
        (entries, problem, scan)
    }

    /// The entries a scan from scratch builds (the index a writer with the
    /// same interval would have written).
    fn rebuilt() -> Vec<IndexEntry> {
        let (entries, problem, _) = scan_all(Vec::new());
        assert_eq!(problem, None);
        entries
    }

    #[test]
    fn a_scan_keeps_every_batch_and_indexes_one_per_interval() {
        let (entries, problem, scan) = scan_all(Vec::new());
        assert_eq!(problem, None);
        let batches = segment();
        assert_eq!((scan.batches, scan.next_offset), (8, 116));
        let (last_position, last) = batches[7];
        assert_eq!(scan.size, last_position + last.total_bytes());
        assert_eq!(scan.max_timestamp, 71);
        assert_eq!(scan.first_timestamp, Some(0));
        // 60-byte batches, an entry once 100 bytes passed since the last:
        // every other batch from the third on.
        let positions: Vec<u64> = entries.iter().map(|e| u64::from(e.position)).collect();
        assert_eq!(positions, [batches[2].0, batches[4].0, batches[6].0]);
        for e in &entries {
            let (_, h) = batches
                .iter()
                .find(|(p, _)| *p == u64::from(e.position))
                .unwrap();
            assert_eq!(u64::from(e.relative_offset), h.base_offset - 100);
            assert_eq!(
                e.max_timestamp, h.max_timestamp,
                "the largest timestamp through the batch"
            );
        }
    }

    #[test]
    fn a_sound_index_on_disk_is_kept_whatever_its_interval() {
        let every = rebuilt();
        // A writer with a longer interval wrote fewer entries: still sound.
        let sparse = vec![every[1]];
        let (entries, problem, _) = scan_all(sparse.clone());
        assert_eq!(problem, None);
        assert_eq!(
            entries,
            every[1..],
            "the entries on disk, then new ones past the last"
        );
        let (entries, problem, _) = scan_all(every.clone());
        assert_eq!((entries, problem), (every, None));
    }

    #[test]
    fn a_short_index_is_extended_past_its_last_entry() {
        let every = rebuilt();
        let (entries, problem, _) = scan_all(every[..1].to_vec());
        assert_eq!(problem, None);
        assert_eq!(entries, every, "the entries after the crash are added");
    }

    #[test]
    fn an_entry_that_breaks_an_invariant_makes_the_index_rebuilt() {
        let every = rebuilt();
        let batches = segment();
        type Break = fn(&mut IndexEntry);
        let cases: [(&str, Break); 3] = [
            ("not where a batch starts", |e| e.position += 1),
            ("names offset", |e| e.relative_offset += 1),
            ("maximum timestamp", |e| e.max_timestamp -= 1),
        ];
        for (why, break_it) in cases {
            let mut disk = every.clone();
            break_it(&mut disk[1]);
            let (entries, problem, _) = scan_all(disk);
            let problem = problem.unwrap_or_else(|| panic!("{why}: not noticed"));
            assert!(
                problem.starts_with("entry 1: ") && problem.contains(why),
                "{why}: {problem}"
            );
            assert_eq!(entries, every, "{why}: rebuilt from the scan");
        }
        // An entry past the last batch (the log was cut after it).
        let (last_position, last) = batches[7];
        let mut disk = every.clone();
        disk.push(IndexEntry {
            relative_offset: 20,
            position: (last_position + last.total_bytes()) as u32,
            max_timestamp: 99,
        });
        let (entries, problem, _) = scan_all(disk);
        assert!(problem.unwrap().contains("beyond the last batch"));
        assert_eq!(entries, every);
    }

    #[test]
    fn a_trusted_index_starts_the_scan_at_its_last_entry() {
        let every = rebuilt();
        let batches = segment();
        let mut scan = Scan::new(100, 100, every.clone(), None);
        scan.trust_up_to_last_entry();
        let last = every[every.len() - 1];
        assert!(!scan.from_start);
        assert_eq!(scan.size, u64::from(last.position));
        assert_eq!(scan.next_offset, 100 + u64::from(last.relative_offset));
        let start = scan.size;
        for (position, header) in batches.iter().filter(|(p, _)| *p >= start) {
            scan.keep(*position, header, header.total_bytes()).unwrap();
        }
        assert_eq!(scan.next_offset, 116);
        assert_eq!(scan.finish_index(false), (every, None));
    }

    #[test]
    fn a_batch_that_does_not_fit_an_index_entry_is_not_kept() {
        let mut scan = Scan::new(100, 100, Vec::new(), None);
        let far = batch(100 + (1 << 32), 1, 5, 0);
        let header = BatchHeader::decode(Format::Legacy, &far, BATCH_BYTES_MAX).unwrap();
        assert!(scan.keep(24, &header, far.len() as u64).is_err());
        assert_eq!((scan.batches, scan.size, scan.next_offset), (0, 24, 100));
    }

    #[test]
    fn the_whole_records_of_a_cut_batch_are_counted_up_to_the_cut() {
        let bytes = batch(7, 3, 20, 50);
        let header = BatchHeader::decode(Format::Legacy, &bytes, BATCH_BYTES_MAX).unwrap();
        let record_bytes = (bytes.len() - LEGACY_HEADER_BYTES) / 3;
        for cut in LEGACY_HEADER_BYTES..bytes.len() {
            let whole = (cut - LEGACY_HEADER_BYTES) / record_bytes;
            let kept = whole_records(&bytes[..cut], 7);
            assert_eq!(kept.count as usize, whole, "cut at {cut}");
            assert_eq!(kept.bytes as usize, whole * record_bytes, "cut at {cut}");
            let max_timestamp = if whole == 0 {
                i64::MIN
            } else {
                50 + whole as i64 - 1
            };
            assert_eq!(kept.max_timestamp, max_timestamp, "cut at {cut}");
        }
        assert_eq!(whole_records(&bytes, 7).count, header.record_count);
        assert_eq!(
            whole_records(&bytes, 8),
            KeptRecords::NONE,
            "out of sequence"
        );
        let mut bad = bytes.clone();
        bad[3] ^= 1;
        assert_eq!(whole_records(&bad, 7), KeptRecords::NONE, "a bad header");
        let mut bad = bytes.clone();
        bad[LEGACY_HEADER_BYTES + record_bytes + 6] ^= 1;
        assert_eq!(whole_records(&bad, 7).count, 1, "up to a bad record");
    }
}
