//! The sparse offset and time indexes of a segment, memory-mapped.
//!
//! Every segment `{base_offset:020}.log` has two index files beside it,
//! written together: entry *i* of both describes the same batch.
//!
//! `.index`, 8 bytes an entry (little-endian):
//!
//! | offset | size | field             | meaning                                        |
//! |-------:|-----:|-------------------|------------------------------------------------|
//! |      0 |    4 | `relative_offset` | batch base offset minus the segment's base      |
//! |      4 |    4 | `position`        | byte position of the batch in the `.log` file   |
//!
//! `.timeindex`, 12 bytes an entry:
//!
//! | offset | size | field             | meaning                                                       |
//! |-------:|-----:|-------------------|---------------------------------------------------------------|
//! |      0 |    8 | `max_timestamp`   | largest record timestamp from the segment start through this batch |
//! |      8 |    4 | `relative_offset` | the batch's base offset minus the segment's base               |
//!
//! An entry is added when at least `index_interval_bytes` of log were
//! appended since the previous one, so an index is about 1/500 of its log
//! for 4 KiB intervals, and no record ever touches it. Entries strictly
//! increase in offset and position; `max_timestamp` never decreases.
//!
//! The active segment's index files are preallocated to `index_bytes_max`
//! (zero-filled), mapped with memmap2, and trimmed to their entries when the
//! segment rolls or the log closes. A position is never 0 (the segment header
//! comes first), so the first all-zero `.index` slot marks the end of the
//! entries of a preallocated file: that is how a reader finds the end.
//!
//! # A full disk is an error, not a `SIGBUS`
//!
//! The preallocation is sparse (`set_len` allocates no block), so that many
//! partitions' active segments fit on a small disk. But a store through the
//! shared writable map into a page without a block makes the kernel allocate
//! one, and when the disk is full it cannot: it raises `SIGBUS`, and the
//! whole broker dies. So no store reaches a region of a map before that
//! region of the file was allocated for real with [`VFile::allocate`]
//! (`fallocate`), [`ALLOCATION_SLOTS`] slots of both files at a time (64 KiB
//! of `.index`, 96 KiB of `.timeindex`), never the whole preallocation up
//! front. `ENOSPC` therefore comes back as an `Err` from
//! [`SegmentIndex::append`] (or [`SegmentIndex::create`] with entries), which
//! then records nothing. The bytes on disk are the same either way: zeros
//! until an entry is stored.
//!
//! Indexes carry no checksum. They are derived data: recovery rebuilds the
//! indexes of every segment it scans, and opening a segment checks its index
//! (sizes, order, positions inside the log) and rebuilds it when in doubt.
//!
//! `tests/golden/index/` and the indexes in `tests/golden/partition/` pin
//! both layouts; a diff there is a format change and needs a version bump.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{DecodeError, IoContext, Result};
use crate::storage::fs::{MapMut, VFile, Vfs};
use crate::storage::record::legacy::{u32_at, u64_at};
use crate::storage::record::BatchHeader;

/// Bytes of one `.index` entry.
pub const OFFSET_ENTRY_BYTES: usize = 8;
/// Bytes of one `.timeindex` entry.
pub const TIME_ENTRY_BYTES: usize = 12;
/// The larger of the two entry sizes.
pub const INDEX_ENTRY_BYTES_MAX: usize = TIME_ENTRY_BYTES;
/// Slots of both index files allocated on disk at a time, before the first
/// store into them through the maps: 64 KiB of `.index`, 96 KiB of
/// `.timeindex`.
pub const ALLOCATION_SLOTS: usize = 8192;

/// One index position: a batch's offset (relative to the segment base), its
/// byte position, and the largest timestamp through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Batch base offset minus the segment base offset.
    pub relative_offset: u32,
    /// Position of the batch in the log file.
    pub position: u32,
    /// Largest record timestamp from the segment's start through the batch.
    pub max_timestamp: i64,
}

impl IndexEntry {
    /// The entry for the batch `header` at `position` of the segment whose
    /// base offset is `segment_base`, when the largest timestamp before it
    /// is `max_timestamp_before`. Fails when its offset or position does not
    /// fit the entry's `u32`: a segment never grows so far, so such a batch
    /// is damage, never a crash.
    pub fn for_batch(
        segment_base: u64,
        position: u64,
        header: &BatchHeader,
        max_timestamp_before: i64,
    ) -> Result<IndexEntry, DecodeError> {
        Ok(IndexEntry {
            relative_offset: u32::try_from(header.base_offset - segment_base).map_err(|_| {
                DecodeError::Malformed("batch: offset too far from the segment's base")
            })?,
            position: u32::try_from(position)
                .map_err(|_| DecodeError::Malformed("batch: position beyond 4 GiB in a segment"))?,
            max_timestamp: max_timestamp_before.max(header.max_timestamp),
        })
    }
}

/// Paths of the two index files of the segment whose log is `log_path`.
pub fn index_paths(log_path: &Path) -> (PathBuf, PathBuf) {
    (
        log_path.with_extension("index"),
        log_path.with_extension("timeindex"),
    )
}

/// Decodes entry `i` from the bytes of the two files.
fn entry_at(offsets: &[u8], times: &[u8], i: usize) -> IndexEntry {
    let o = i * OFFSET_ENTRY_BYTES;
    let t = i * TIME_ENTRY_BYTES;
    IndexEntry {
        relative_offset: u32_at(offsets, o),
        position: u32_at(offsets, o + 4),
        max_timestamp: u64_at(times, t) as i64,
    }
}

/// Checks a list of entries against the log they index: what `open` trusts.
/// Every position must fall in `positions` (the log's batch bytes: after
/// its header, before its end).
pub fn check_entries(
    entries: &[IndexEntry],
    positions: Range<u64>,
    relative_end: u64,
) -> Result<(), String> {
    let mut prev: Option<IndexEntry> = None;
    for (i, e) in entries.iter().enumerate() {
        if !positions.contains(&u64::from(e.position)) {
            return Err(format!(
                "entry {i}: position {} outside the log",
                e.position
            ));
        }
        if u64::from(e.relative_offset) >= relative_end {
            return Err(format!("entry {i}: offset beyond the log"));
        }
        if let Some(p) = prev {
            if e.relative_offset <= p.relative_offset || e.position <= p.position {
                return Err(format!("entry {i}: not increasing"));
            }
            if e.max_timestamp < p.max_timestamp {
                return Err(format!("entry {i}: timestamp decreasing"));
            }
        }
        prev = Some(*e);
    }
    Ok(())
}

/// Reads the entries of a segment's index files, through ordinary reads.
///
/// Works on trimmed and on preallocated files (it stops at the first unused
/// slot), and never reads more than the files hold. Used by readers that do
/// not own the log (`klog-dump`, embedded consumers) and by `open`.
pub fn read_entries(vfs: &dyn Vfs, log_path: &Path) -> Result<Vec<IndexEntry>, String> {
    let (offset_path, time_path) = index_paths(log_path);
    let read = |path: &Path| -> Result<Vec<u8>, String> {
        let file = vfs
            .open_read(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let len = file.len().map_err(|e| e.to_string())?;
        // Time entries are the larger: an offset index is at most 8/12 of this.
        let limit = u64::from(crate::limits::INDEX_BYTES_MAX_LIMIT) / OFFSET_ENTRY_BYTES as u64
            * TIME_ENTRY_BYTES as u64;
        if len > limit {
            return Err(format!(
                "{}: {len} bytes is larger than any index",
                path.display()
            ));
        }
        let mut buf = vec![0; len as usize];
        file.read_exact_at(&mut buf, 0).map_err(|e| e.to_string())?;
        Ok(buf)
    };
    let offsets = read(&offset_path)?;
    let times = read(&time_path)?;
    if offsets.len() % OFFSET_ENTRY_BYTES != 0 || times.len() % TIME_ENTRY_BYTES != 0 {
        return Err("index size is not a whole number of entries".into());
    }
    let slots = (offsets.len() / OFFSET_ENTRY_BYTES).min(times.len() / TIME_ENTRY_BYTES);
    let used = used_slots(&offsets, slots);
    if offsets.len() / OFFSET_ENTRY_BYTES != times.len() / TIME_ENTRY_BYTES && used == slots {
        return Err("index files disagree in length".into());
    }
    Ok((0..used).map(|i| entry_at(&offsets, &times, i)).collect())
}

/// Whether the index files of `log_path` hold exactly `entries` entries
/// (no preallocated room).
pub fn is_trimmed(vfs: &dyn Vfs, log_path: &Path, entries: usize) -> bool {
    let (offset_path, time_path) = index_paths(log_path);
    let len = |p: &Path| vfs.open_read(p).and_then(|f| f.len()).ok();
    len(&offset_path) == Some((entries * OFFSET_ENTRY_BYTES) as u64)
        && len(&time_path) == Some((entries * TIME_ENTRY_BYTES) as u64)
}

/// Slots before the first unused one (position 0), by binary search: the
/// used slots form a prefix.
fn used_slots(offsets: &[u8], slots: usize) -> usize {
    let (mut lo, mut hi) = (0, slots);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if u32_at(offsets, mid * OFFSET_ENTRY_BYTES + 4) != 0 {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Index of the last entry for which `before(entry)` holds, when entries
/// are ordered so that `before` is true on a prefix.
pub fn last_where(entries: &[IndexEntry], before: impl Fn(&IndexEntry) -> bool) -> Option<usize> {
    let n = entries.partition_point(before);
    n.checked_sub(1)
}

/// The writable, memory-mapped pair of index files of the active segment.
///
/// Not thread-safe: the log serialises appends. The entries are also kept
/// in memory ([`SegmentIndex::entries`]) for lookups.
#[derive(Debug)]
pub struct SegmentIndex {
    offset_path: PathBuf,
    time_path: PathBuf,
    offset_file: Arc<dyn VFile>,
    time_file: Arc<dyn VFile>,
    offset_map: Option<Box<dyn MapMut>>,
    time_map: Option<Box<dyn MapMut>>,
    entries: Vec<IndexEntry>,
    /// Slots the files hold: the entries that fit.
    slots: usize,
    /// Slots allocated on disk in both files: stores may reach them.
    allocated: usize,
}

impl SegmentIndex {
    /// Creates (or reopens) the index files of `log_path`, preallocated to
    /// hold `slots` entries, holding `entries`. Fails (with `ENOSPC`, not
    /// a `SIGBUS`) when the disk has no room for the slots of `entries`.
    pub fn create(
        vfs: &dyn Vfs,
        log_path: &Path,
        entries: Vec<IndexEntry>,
        slots: usize,
    ) -> Result<SegmentIndex> {
        let (offset_path, time_path) = index_paths(log_path);
        let offset_file = vfs
            .open(&offset_path, true)
            .ctx("open index", &offset_path)?;
        let time_file = vfs.open(&time_path, true).ctx("open index", &time_path)?;
        let slots = slots.max(entries.len() + 1);
        let mut index = SegmentIndex {
            offset_path,
            time_path,
            offset_file,
            time_file,
            offset_map: None,
            time_map: None,
            entries: Vec::new(),
            slots,
            allocated: 0,
        };
        index.map(slots)?;
        for e in entries {
            index.write_entry(e)?;
        }
        Ok(index)
    }

    fn map(&mut self, slots: usize) -> Result<()> {
        let offset_len = (slots * OFFSET_ENTRY_BYTES) as u64;
        let time_len = (slots * TIME_ENTRY_BYTES) as u64;
        // Zero the whole preallocation: a slot left from an earlier, longer
        // file would look like an entry to a reader.
        for (file, path, len) in [
            (&self.offset_file, &self.offset_path, offset_len),
            (&self.time_file, &self.time_path, time_len),
        ] {
            file.set_len(0).ctx("truncate index", path)?;
            file.set_len(len).ctx("preallocate index", path)?;
        }
        self.offset_map = Some(
            self.offset_file
                .map_mut(offset_len)
                .ctx("map", &self.offset_path)?,
        );
        self.time_map = Some(
            self.time_file
                .map_mut(time_len)
                .ctx("map", &self.time_path)?,
        );
        self.slots = slots;
        // The truncation freed every block.
        self.allocated = 0;
        Ok(())
    }

    /// Allocates on disk the slots up to `slot` (and the rest of its chunk)
    /// in both files, before a store through a map reaches them.
    fn allocate_through(&mut self, slot: usize) -> Result<()> {
        if slot < self.allocated || self.offset_map.is_none() {
            return Ok(());
        }
        let end = (self.allocated + ALLOCATION_SLOTS)
            .max(slot + 1)
            .min(self.slots);
        for (file, path, size) in [
            (&self.offset_file, &self.offset_path, OFFSET_ENTRY_BYTES),
            (&self.time_file, &self.time_path, TIME_ENTRY_BYTES),
        ] {
            let (start, len) = (self.allocated * size, (end - self.allocated) * size);
            file.allocate(start as u64, len as u64)
                .ctx("allocate index", path)?;
        }
        self.allocated = end;
        Ok(())
    }

    /// Names the files after the segment `log_path`, whose files were
    /// renamed to it (the maps and handles follow the files).
    pub fn set_paths(&mut self, log_path: &Path) {
        (self.offset_path, self.time_path) = index_paths(log_path);
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// True when no more entry fits: the segment must roll.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.slots
    }

    /// Appends an entry. Fails, recording nothing, when its slot could not
    /// be allocated on disk (a full disk).
    ///
    /// # Panics
    ///
    /// When the index is full or the entry does not increase.
    pub fn append(&mut self, entry: IndexEntry) -> Result<()> {
        assert!(!self.is_full(), "append to a full index");
        if let Some(last) = self.entries.last() {
            assert!(entry.relative_offset > last.relative_offset && entry.position > last.position);
        }
        self.write_entry(entry)
    }

    fn write_entry(&mut self, e: IndexEntry) -> Result<()> {
        let i = self.entries.len();
        self.allocate_through(i)?;
        if let Some(map) = self.offset_map.as_mut() {
            let o = &mut map.bytes_mut()[i * OFFSET_ENTRY_BYTES..(i + 1) * OFFSET_ENTRY_BYTES];
            o[..4].copy_from_slice(&e.relative_offset.to_le_bytes());
            o[4..].copy_from_slice(&e.position.to_le_bytes());
        }
        if let Some(map) = self.time_map.as_mut() {
            let t = &mut map.bytes_mut()[i * TIME_ENTRY_BYTES..(i + 1) * TIME_ENTRY_BYTES];
            t[..8].copy_from_slice(&e.max_timestamp.to_le_bytes());
            t[8..].copy_from_slice(&e.relative_offset.to_le_bytes());
        }
        self.entries.push(e);
        Ok(())
    }

    /// Drops the entries at or after log position `position` (the log was
    /// truncated there).
    pub fn truncate_to_position(&mut self, position: u32) {
        let keep = self.entries.partition_point(|e| e.position < position);
        for i in keep..self.entries.len() {
            if let Some(map) = self.offset_map.as_mut() {
                map.bytes_mut()[i * OFFSET_ENTRY_BYTES..(i + 1) * OFFSET_ENTRY_BYTES].fill(0);
            }
            if let Some(map) = self.time_map.as_mut() {
                map.bytes_mut()[i * TIME_ENTRY_BYTES..(i + 1) * TIME_ENTRY_BYTES].fill(0);
            }
        }
        self.entries.truncate(keep);
    }

    /// Writes the mapped entries back to the files durably.
    pub fn flush(&self) -> Result<()> {
        if let Some(map) = &self.offset_map {
            map.flush().ctx("msync", &self.offset_path)?;
        }
        if let Some(map) = &self.time_map {
            map.flush().ctx("msync", &self.time_path)?;
        }
        Ok(())
    }

    /// Unmaps and cuts both files to their entries, durably: what a segment
    /// that stops being active keeps.
    pub fn trim(&mut self) -> Result<()> {
        self.flush()?;
        // The maps are dropped before the files shrink: a mapping beyond the
        // end of its file faults when touched.
        self.offset_map = None;
        self.time_map = None;
        let n = self.entries.len();
        for (file, path, len) in [
            (&self.offset_file, &self.offset_path, n * OFFSET_ENTRY_BYTES),
            (&self.time_file, &self.time_path, n * TIME_ENTRY_BYTES),
        ] {
            file.set_len(len as u64).ctx("trim index", path)?;
            file.sync_data().ctx("fsync", path)?;
        }
        self.slots = n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::sim::SimFs;

    #[test]
    fn an_index_file_larger_than_any_index_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("00000000000000000000.log");
        let (offsets, times) = index_paths(&log);
        std::fs::File::create(&offsets)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        std::fs::File::create(&times).unwrap().set_len(12).unwrap();
        let err = read_entries(&crate::storage::fs::RealFs, &log).unwrap_err();
        assert!(err.contains("larger than any index"), "{err}");
    }

    fn entry(rel: u32, pos: u32, ts: i64) -> IndexEntry {
        IndexEntry {
            relative_offset: rel,
            position: pos,
            max_timestamp: ts,
        }
    }

    #[test]
    fn preallocated_and_trimmed_files_read_back_the_same_entries() {
        let vfs = SimFs::new();
        let dir = Path::new("/d");
        vfs.create_dir_all(dir).unwrap();
        let log = dir.join("00000000000000000000.log");
        let mut index = SegmentIndex::create(&vfs, &log, vec![], 100).unwrap();
        let entries = vec![entry(3, 100, 5), entry(9, 200, 5), entry(20, 4000, 9)];
        for e in &entries {
            index.append(*e).unwrap();
        }
        drop(index.offset_map.take());
        drop(index.time_map.take());
        assert_eq!(vfs.read(&log.with_extension("index")).unwrap().len(), 800);
        assert_eq!(read_entries(&vfs, &log).unwrap(), entries);
        index.map(100).unwrap();
        index.entries.clear();
        for e in &entries {
            index.write_entry(*e).unwrap();
        }
        index.trim().unwrap();
        assert_eq!(vfs.read(&log.with_extension("index")).unwrap().len(), 24);
        assert_eq!(read_entries(&vfs, &log).unwrap(), entries);
        assert!(check_entries(&entries, 24..4001, 21).is_ok());
        assert!(check_entries(&entries, 24..4000, 21).is_err());
        assert!(check_entries(&entries, 24..4001, 20).is_err());
    }

    #[test]
    fn a_full_disk_fails_the_append_that_needs_a_new_chunk_and_records_nothing() {
        let vfs = SimFs::new();
        vfs.create_dir_all_durable(Path::new("/d"));
        let log = Path::new("/d/00000000000000000000.log");
        let slots = 3 * ALLOCATION_SLOTS;
        let mut index = SegmentIndex::create(&vfs, log, vec![], slots).unwrap();
        assert_eq!(vfs.allocated(), 0, "the preallocation is sparse");
        index.append(entry(1, 100, 1)).unwrap();
        let chunk = (ALLOCATION_SLOTS * (OFFSET_ENTRY_BYTES + TIME_ENTRY_BYTES)) as u64;
        assert_eq!(
            vfs.allocated(),
            chunk,
            "one chunk of each file, not the whole preallocation"
        );
        vfs.set_capacity(Some(chunk + 4096));
        for i in 2..=ALLOCATION_SLOTS as u32 {
            index.append(entry(i, 100 * i, 1)).unwrap();
        }
        let next = ALLOCATION_SLOTS as u32 + 1;
        let err = index.append(entry(next, 100 * next, 1)).unwrap_err();
        assert!(err.to_string().contains("allocate index"), "{err}");
        assert_eq!(
            index.entries().len(),
            ALLOCATION_SLOTS,
            "the failed entry is not recorded"
        );
        // Reopening with more entries than the disk has room for fails too.
        let entries = index.entries().to_vec();
        drop(index);
        assert_eq!(vfs.map_faults(), 0, "no store reached an unallocated block");
        let mut more = entries.clone();
        more.push(entry(next, 100 * next, 1));
        vfs.set_capacity(Some(chunk / 2));
        assert!(SegmentIndex::create(&vfs, log, more.clone(), slots).is_err());
        // Room again: the append goes through.
        vfs.set_capacity(None);
        let mut index = SegmentIndex::create(&vfs, log, entries, slots).unwrap();
        index.append(entry(next, 100 * next, 1)).unwrap();
        drop(index);
        assert_eq!(read_entries(&vfs, log).unwrap(), more);
        assert_eq!(vfs.map_faults(), 0);
    }

    fn header(base_offset: u64, max_timestamp: i64) -> BatchHeader {
        let mut b = crate::storage::record::BatchBuilder::new();
        b.push(max_timestamp, None, &[], b"v");
        let batch = b.finish();
        crate::storage::record::stamp(batch, base_offset, 0);
        let format = crate::storage::record::Format::Kafka;
        BatchHeader::decode(format, batch, crate::limits::BATCH_BYTES_MAX).unwrap()
    }

    #[test]
    fn an_entry_for_a_batch_is_relative_to_its_segment_and_keeps_the_largest_timestamp() {
        let e = IndexEntry::for_batch(100, 4000, &header(107, 5), 9).unwrap();
        assert_eq!(e, entry(7, 4000, 9));
        let e = IndexEntry::for_batch(100, 4000, &header(107, 12), 9).unwrap();
        assert_eq!(e.max_timestamp, 12);
    }

    #[test]
    fn an_entry_that_does_not_fit_u32_is_refused() {
        let far = header(100 + (1 << 32), 1);
        let err = IndexEntry::for_batch(100, 4000, &far, 0).unwrap_err();
        assert!(err.to_string().contains("offset too far"), "{err}");
        let err = IndexEntry::for_batch(100, 1 << 32, &header(101, 1), 0).unwrap_err();
        assert!(err.to_string().contains("beyond 4 GiB"), "{err}");
        assert!(IndexEntry::for_batch(
            100,
            u64::from(u32::MAX),
            &header(100 + u64::from(u32::MAX), 1),
            0
        )
        .is_ok());
    }

    #[test]
    fn truncation_clears_the_slots_it_drops() {
        let vfs = SimFs::new();
        vfs.create_dir_all(Path::new("/d")).unwrap();
        let log = Path::new("/d/00000000000000000000.log");
        let mut index = SegmentIndex::create(&vfs, log, vec![], 10).unwrap();
        index.append(entry(1, 100, 1)).unwrap();
        index.append(entry(2, 200, 2)).unwrap();
        index.truncate_to_position(200);
        drop(index);
        assert_eq!(read_entries(&vfs, log).unwrap(), vec![entry(1, 100, 1)]);
    }
}
