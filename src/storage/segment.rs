//! One segment: a `{base_offset:020}.log` file of batches, with its indexes.
//!
//! # File layout
//!
//! A segment starts with a 24-byte header, then batches back to back (see
//! [`crate::storage::record`]); nothing follows the last batch. Little-endian:
//!
//! | offset | size | field         | meaning                                           |
//! |-------:|-----:|---------------|---------------------------------------------------|
//! |      0 |    4 | `magic`       | `KLOG`                                            |
//! |      4 |    2 | `version`     | `2`: batches in Kafka's RecordBatch v2; `3`: the same, with gaps (below); `1`: klog's legacy batches ([`Format`]) |
//! |      6 |    2 | `flags`       | `0`; in version 3, `1` (cleaned) or `2` (copied with gaps) |
//! |      8 |    8 | `base_offset` | offset of the first record; also the file's name  |
//! |     16 |    4 | `end_delta`   | `0`; of a cleaned segment, its end minus `base_offset` |
//! |     20 |    4 | `header_crc`  | CRC32 of bytes 0..20                              |
//!
//! The header is why an index position is never 0, and lets `klog-dump`
//! tell a klog segment from any other file. The file's length is the end
//! of its last batch, except while it is a log's last segment and was
//! given a file of zeros ahead of its appends (`klog-broker
//! --preallocate`, [`crate::storage::spare`]): then zeros follow its last
//! batch until its roll or its log's clean close cuts them. A crash
//! leaves at worst a torn or zero-filled tail, which recovery cuts.
//!
//! A **cleaned** segment (version 3, flag bit 0) is one the cleaner
//! wrote ([`crate::storage::cleaner`]) in place of the segments from
//! `base_offset` to its end, `base_offset + end_delta`: its records are
//! the ones compaction kept, at their own offsets, so batches may skip
//! offsets (a batch wholly compacted away leaves a gap, never a reused
//! offset), and the offsets from its last record to its end are gaps too:
//! the next segment starts at the end. Only in a version 3 segment may a
//! batch start past where the one before ended. A segment whose base
//! offset lies inside a cleaned segment's range is one it replaced,
//! which a crash left behind: opening the log removes it, a reader
//! skips it.
//!
//! A cleaned segment is never appended to: a log whose last segment is a
//! cleaned one goes on at its end in a new segment, and a cut into one
//! (a follower's truncation, `klog-recover` at damage) first rewrites its
//! header as one with gaps, without the end: the log then goes on from
//! the cut.
//!
//! A segment **with gaps** (version 3, flag bit 1, `end_delta` 0) is a
//! follower's copy of its leader's cleaned batches
//! ([`crate::storage::log`]'s replication): its batches may skip offsets
//! too (each still starts past where the one before ended), it has no
//! end and replaces nothing, and it may itself start past where the
//! segment before it ends (a gap wider than a segment's 2^32 offsets). A cut into a cleaned segment makes it one.
//!
//! Any other flag, or both, is refused (a newer klog's), as is a version
//! 3 without a flag, a cleaned segment without an end or a segment with
//! gaps with one, or a version 2 with a flag or an end. A klog from
//! before version 3 refuses it as unsupported, never reads its gaps as
//! damage.
//!
//! The version says how to read the batches: a segment holds one format
//! only. The log writes version 2; version 1 segments (klog before it
//! stored Kafka's format) are read, recovered and verified, never appended
//! to: a log whose last segment is version 1 rolls a new one for its next
//! append.
//!
//! `tests/golden/segment-header.bin` and the segments in
//! `tests/golden/partition/` pin version 2; `tests/golden/legacy/` (and
//! `tests/golden/v1/partition/`, before leader epochs) version 1. A diff there is a format change and needs a new `version`.
//!
//! Walking a segment's batches is [`crate::storage::batches::FileBatches`]:
//! a few large reads per megabyte, never one read per record.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};
use crate::storage::files::{self, held_or_cached, open_file, SegmentFile};
use crate::storage::fs::{self, VFile, Vfs};
use crate::storage::index::{IndexEntry, SegmentIndex};
use crate::storage::record::{BatchHeader, Format};
use crate::storage::spare::Spares;

mod header;
mod names;
mod prepared;
mod zeros;
pub use header::{
    decode_header, encode_cleaned_header, encode_gaps_header, encode_header, read_header,
    SegmentHeader, SEGMENT_FLAG_CLEANED, SEGMENT_FLAG_GAPS,
};
pub use names::{
    cleaned_paths, is_cleaned_name, log_file_name, parse_log_file_name, parse_offset_file_name,
};
pub use prepared::{parse_temp_log_name, temp_paths, PreparedSegment};
pub(crate) use zeros::cut_zeros;

/// Bytes of the segment header.
pub const SEGMENT_HEADER_BYTES: usize = 24;
/// The segment file magic.
pub const SEGMENT_MAGIC: &[u8; 4] = b"KLOG";
/// The segment format version the log writes: batches in Kafka's
/// RecordBatch v2.
pub const SEGMENT_VERSION: u16 = 2;
/// The segment format version of klog's legacy batches.
pub const SEGMENT_VERSION_LEGACY: u16 = 1;
/// The segment format version of a cleaned segment: Kafka's batches, with
/// gaps, and an end ([`SegmentHeader::end`]).
pub const SEGMENT_VERSION_CLEANED: u16 = 3;

/// A segment: its log file, its place in the log and, while it is the
/// active segment, its writable index.
#[derive(Debug)]
pub struct Segment {
    /// Offset of the first record (and the file's name).
    pub base_offset: u64,
    /// The format of its batches (its header's version).
    pub format: Format,
    /// Of a cleaned segment, the end its header gives: its offsets may
    /// skip, up to there ([`SegmentHeader::end`]).
    pub end: Option<u64>,
    /// Its batches may skip offsets ([`SegmentHeader::gaps`]): cleaned, or
    /// copied from a leader's cleaned log.
    pub gaps: bool,
    /// Path of the `.log` file.
    pub path: PathBuf,
    /// Its file while it is the active segment (appended to); `None` once
    /// it is sealed, or opened sealed: then its file is opened when read,
    /// and kept among the process's cached [`files`].
    held: Option<Arc<dyn VFile>>,
    /// Its key in that cache (shared with walks of it).
    key: Arc<files::Key>,
    vfs: Arc<dyn Vfs>,
    /// Its file is opened for writing when opened again.
    writable: bool,
    /// Bytes in the file, header included.
    pub size: u64,
    /// One past the offset of the last record.
    pub next_offset: u64,
    /// Largest record timestamp, `i64::MIN` while empty.
    pub max_timestamp: i64,
    /// When the first record of this segment was appended (ms since the
    /// epoch; roll by age). After a restart it is not known, and the file's
    /// modification time stands in for it. `None` while empty.
    pub first_append_ms: Option<i64>,
    /// When its newest record was appended (retention by time): the append
    /// time in this process, or the file's modification time after a
    /// restart. `None` while empty.
    pub last_append_ms: Option<i64>,
    pub(crate) entries: Vec<IndexEntry>,
    pub(crate) index: Option<SegmentIndex>,
    bytes_since_index: u64,
    /// Appended bytes not yet written to the file (they end at `size`).
    unwritten: Vec<u8>,
    /// The segment as of the last byte that reached the file: what a failed
    /// write rolls back to.
    written: Written,
    /// A failed write could not be undone: the file no longer matches
    /// `size`, and only a reopen (recovery) can tell where it ends.
    broken: bool,
    /// The first offset the last undo took back, until the log notes it.
    undone: Option<u64>,
    /// While its files still have the temporary names of [`temp_paths`]
    /// (with this number).
    pub(crate) temp: Option<u64>,
    /// Bytes the file was given as zeros, written and synced, before its
    /// appends (a spare, [`crate::storage::spare`]); 0 when none or once
    /// the file was cut to its batches.
    zeroed: u64,
}

/// A segment's extent as of its last successful write.
#[derive(Debug, Clone, Copy)]
struct Written {
    size: u64,
    next_offset: u64,
    max_timestamp: i64,
    entries: usize,
    bytes_since_index: u64,
    first_append_ms: Option<i64>,
    last_append_ms: Option<i64>,
}

impl Written {
    fn empty(base_offset: u64) -> Written {
        Written {
            size: SEGMENT_HEADER_BYTES as u64,
            next_offset: base_offset,
            max_timestamp: i64::MIN,
            entries: 0,
            bytes_since_index: 0,
            first_append_ms: None,
            last_append_ms: None,
        }
    }
}

impl Segment {
    /// Creates an empty segment file, durably (file and directory entry),
    /// for Kafka batches: a spare of `spares` when one is ready.
    pub fn create(
        vfs: &Arc<dyn Vfs>,
        dir: &Path,
        base_offset: u64,
        index_slots: usize,
        spares: Option<&Spares>,
    ) -> Result<Segment> {
        let path = dir.join(log_file_name(base_offset));
        let (file, zeroed) = prepared::create_log_file(&**vfs, &path, spares)?;
        file.write_all_at(&encode_header(base_offset, Format::Kafka), 0)
            .ctx("write", &path)?;
        file.sync_data().ctx("fsync", &path)?;
        let index = SegmentIndex::create(&**vfs, &path, Vec::new(), index_slots)?;
        // The new files exist after a power cut only once their directory
        // entries are durable.
        fs::sync_directory(&**vfs, dir)?;
        let segment = Segment::empty(vfs, base_offset, path, file, index, None);
        Ok(Segment { zeroed, ..segment })
    }

    /// An empty segment whose files (its header written) exist: named, or
    /// a temporary one of sequence `temp`.
    fn empty(
        vfs: &Arc<dyn Vfs>,
        base_offset: u64,
        path: PathBuf,
        file: Arc<dyn VFile>,
        index: SegmentIndex,
        temp: Option<u64>,
    ) -> Segment {
        Segment {
            base_offset,
            format: Format::Kafka,
            end: None,
            gaps: false,
            path,
            held: Some(file),
            key: files::Key::new(),
            vfs: Arc::clone(vfs),
            writable: true,
            size: SEGMENT_HEADER_BYTES as u64,
            next_offset: base_offset,
            max_timestamp: i64::MIN,
            first_append_ms: None,
            last_append_ms: None,
            entries: Vec::new(),
            index: Some(index),
            bytes_since_index: 0,
            unwritten: Vec::new(),
            written: Written::empty(base_offset),
            broken: false,
            undone: None,
            temp,
            zeroed: 0,
        }
    }

    /// Makes `prepared` the segment starting at `base_offset`, whose
    /// header [`PreparedSegment::head`] wrote (with `gaps`).
    pub(crate) fn from_prepared(
        vfs: &Arc<dyn Vfs>,
        prepared: PreparedSegment,
        base_offset: u64,
        gaps: bool,
    ) -> Segment {
        let PreparedSegment {
            seq,
            path,
            file,
            index,
            zeroed,
        } = prepared;
        let segment = Segment::empty(vfs, base_offset, path, file, index, Some(seq));
        Segment {
            gaps,
            zeroed,
            ..segment
        }
    }

    /// Gives a segment under temporary names its own (`{base:020}.log`,
    /// ...): the indexes first, so that a crash between leaves a log with
    /// no index (re-indexed), never an index with no log and a
    /// temporary log (both removed). Only once its bytes so far, and all
    /// of every segment before it, are durable; the rename itself is
    /// durable at the next directory fsync.
    pub(crate) fn publish(&mut self, vfs: &dyn Vfs, dir: &Path) -> Result<()> {
        let Some(seq) = self.temp else {
            return Ok(());
        };
        let path = dir.join(log_file_name(self.base_offset));
        let (offset_path, time_path) = crate::storage::index::index_paths(&path);
        let [temp_log, temp_offsets, temp_times] = temp_paths(dir, seq);
        for (from, to) in [
            (&temp_offsets, &offset_path),
            (&temp_times, &time_path),
            (&temp_log, &path),
        ] {
            vfs.rename(from, to).ctx("rename", from)?;
        }
        if let Some(index) = self.index.as_mut() {
            index.set_paths(&path);
        }
        self.path = path;
        self.temp = None;
        Ok(())
    }

    /// Opens an existing segment file, checking its header, as a sealed
    /// segment: its file is among the process's cached [`files`] (a log
    /// makes its last segment the active one, `Segment::activate`). Its
    /// extent (`size`, `next_offset`, ...) is set by the caller, from
    /// recovery or from its index.
    pub fn open(vfs: &Arc<dyn Vfs>, path: &Path, writable: bool) -> Result<Segment> {
        let file = open_file(&**vfs, path, writable).ctx("open segment", path)?;
        let size = file.len().ctx("stat", path)?;
        let mut header = [0u8; SEGMENT_HEADER_BYTES];
        let n = file.read_at(&mut header, 0).ctx("read", path)?;
        let SegmentHeader {
            base_offset,
            format,
            end,
            gaps,
        } = read_header(&header[..n]).map_err(|reason| Error::Corrupt {
            path: path.to_path_buf(),
            position: 0,
            reason,
        })?;
        let key = files::Key::new();
        key.keep(file);
        Ok(Segment {
            base_offset,
            format,
            end,
            gaps,
            path: path.to_path_buf(),
            held: None,
            key,
            vfs: Arc::clone(vfs),
            writable,
            size,
            next_offset: base_offset,
            max_timestamp: i64::MIN,
            first_append_ms: None,
            last_append_ms: None,
            entries: Vec::new(),
            index: None,
            bytes_since_index: 0,
            unwritten: Vec::new(),
            written: Written::empty(base_offset),
            broken: false,
            undone: None,
            temp: None,
            zeroed: 0,
        })
    }

    /// Makes an empty segment of another format one of the format the log
    /// writes: its header rewritten in place (24 bytes, one sector) and
    /// fsynced.
    pub(crate) fn reformat(&mut self) -> Result<()> {
        assert!(self.is_empty() && self.size == SEGMENT_HEADER_BYTES as u64);
        self.check_broken()?;
        let file = self.file()?;
        file.write_all_at(&encode_header(self.base_offset, Format::Kafka), 0)
            .ctx("write", &self.path)?;
        file.sync_data().ctx("fsync", &self.path)?;
        self.format = Format::Kafka;
        Ok(())
    }

    /// Makes a segment of Kafka batches one whose batches may skip
    /// offsets, without an end (a cleaned one's end no longer holds once
    /// it is cut or appended to): its header rewritten in place (24
    /// bytes, one sector) and fsynced.
    pub(crate) fn allow_gaps(&mut self) -> Result<()> {
        assert_eq!(self.format, Format::Kafka, "a legacy segment takes no gaps");
        self.check_broken()?;
        let file = self.file()?;
        file.write_all_at(&encode_gaps_header(self.base_offset), 0)
            .ctx("write", &self.path)?;
        file.sync_data().ctx("fsync", &self.path)?;
        (self.gaps, self.end) = (true, None);
        Ok(())
    }

    /// Below which offset its batches may skip offsets
    /// ([`SegmentHeader::skips_below`]).
    pub fn skips_below(&self) -> Option<u64> {
        header::skips_below(self.gaps, self.end)
    }

    /// Whether no record has been appended.
    pub fn is_empty(&self) -> bool {
        self.next_offset == self.base_offset
    }

    /// The file, for reads and `sendfile`: held while the segment is
    /// active, opened again when a sealed one's is not cached.
    pub fn file(&self) -> Result<Arc<dyn VFile>> {
        self.file_io().ctx("open segment", &self.path)
    }

    fn file_io(&self) -> std::io::Result<Arc<dyn VFile>> {
        let held = self.held.as_ref();
        held_or_cached(held, &self.key, &*self.vfs, &self.path, self.writable)
    }

    /// A handle on its file for a walk outside the log's lock: it opens
    /// the file when it is not cached, as this segment would.
    pub(crate) fn file_handle(&self) -> SegmentFile {
        SegmentFile {
            held: self.held.clone(),
            key: Arc::clone(&self.key),
            vfs: Arc::clone(&self.vfs),
            path: self.path.clone(),
            writable: self.writable,
        }
    }

    /// The index entries.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// Sets the segment's extent after a scan: `size` bytes, ending before
    /// `next_offset`, with these index entries; `bytes_since_index` is
    /// derived from the last entry.
    pub(crate) fn set_extent(
        &mut self,
        size: u64,
        next_offset: u64,
        max_timestamp: i64,
        entries: Vec<IndexEntry>,
    ) {
        self.size = size;
        self.next_offset = next_offset;
        self.max_timestamp = max_timestamp;
        let last = entries
            .last()
            .map_or(SEGMENT_HEADER_BYTES as u64, |e| u64::from(e.position));
        self.bytes_since_index = size - last;
        self.entries = entries;
        self.mark_written();
    }

    /// Everything appended so far is in the file.
    fn mark_written(&mut self) {
        self.written = Written {
            size: self.size,
            next_offset: self.next_offset,
            max_timestamp: self.max_timestamp,
            entries: self.entries.len(),
            bytes_since_index: self.bytes_since_index,
            first_append_ms: self.first_append_ms,
            last_append_ms: self.last_append_ms,
        };
    }

    /// The first offset the last failed write undid, once.
    pub(crate) fn take_undone(&mut self) -> Option<u64> {
        self.undone.take()
    }

    /// Bytes in the file, header included (appends gathered in memory
    /// excluded).
    pub(crate) fn written_size(&self) -> u64 {
        self.written.size
    }

    /// One past the last record in the file (appends gathered in memory
    /// excluded).
    pub(crate) fn written_offset(&self) -> u64 {
        self.written.next_offset
    }

    /// Undoes every append that did not reach the file, after a write of
    /// them failed with `error`: the file is cut back to its last whole
    /// batch (a partial write may have left some bytes), so that a record
    /// reported as failed never reappears, and the next append starts
    /// there. Returns the error to report.
    fn roll_back(&mut self, error: std::io::Error) -> Error {
        let w = self.written;
        if let Err(e) = self.file_io().and_then(|file| file.set_len(w.size)) {
            // The file may hold bytes nobody will be told about; only a
            // reopen (recovery) can tell where it ends.
            self.broken = true;
            return Error::io("truncate after a failed write", &self.path, e);
        }
        self.zeroed = 0;
        self.unwritten.clear();
        if self.next_offset > w.next_offset {
            self.undone = Some(w.next_offset);
        }
        self.size = w.size;
        self.next_offset = w.next_offset;
        self.max_timestamp = w.max_timestamp;
        self.bytes_since_index = w.bytes_since_index;
        self.first_append_ms = w.first_append_ms;
        self.last_append_ms = w.last_append_ms;
        self.entries.truncate(w.entries);
        if let Some(index) = self.index.as_mut() {
            let position = u32::try_from(w.size).unwrap_or(u32::MAX);
            index.truncate_to_position(position);
        }
        Error::io("append to", &self.path, error)
    }

    /// Makes this the active segment: maps a writable index holding the
    /// current entries.
    pub(crate) fn activate(&mut self, vfs: &dyn Vfs, index_slots: usize) -> Result<()> {
        let file = self.file()?;
        let index = SegmentIndex::create(vfs, &self.path, self.entries.clone(), index_slots)?;
        self.index = Some(index);
        self.key.forget();
        self.held = Some(file);
        Ok(())
    }

    /// Whether appending `batch_bytes` more, whose offsets reach `offsets`
    /// past the segment's next offset, must go to a new segment.
    pub fn is_full(&self, batch_bytes: u64, segment_bytes: u64, offsets: u64) -> bool {
        if self.is_empty() {
            return false;
        }
        let offsets_left = u64::from(u32::MAX) - (self.next_offset - self.base_offset);
        self.size + batch_bytes > segment_bytes
            || offsets > offsets_left
            || self.index.as_ref().is_some_and(SegmentIndex::is_full)
    }

    /// Appends a batch whose base offset is already `next_offset` (or past
    /// it, in a segment that takes gaps). With a
    /// `buffer_bytes` limit, appends gather in memory and reach the file
    /// together once that much is pending, or at [`Segment::write_pending`];
    /// with 0, each is written at once.
    pub(crate) fn append(
        &mut self,
        batch: &[u8],
        header: &BatchHeader,
        index_interval_bytes: u32,
        now_ms: i64,
        buffer_bytes: usize,
    ) -> Result<()> {
        debug_assert!(
            header.base_offset == self.next_offset
                || (self.gaps && header.base_offset > self.next_offset)
        );
        self.check_broken()?;
        let position = self.size;
        let max_timestamp = self.max_timestamp.max(header.max_timestamp);
        let entry = (self.bytes_since_index >= u64::from(index_interval_bytes))
            .then(|| IndexEntry::for_batch(self.base_offset, position, header, self.max_timestamp))
            .transpose()
            .map_err(|e| Error::Corrupt {
                path: self.path.clone(),
                position,
                reason: e.to_string(),
            })?;
        if buffer_bytes == 0 {
            self.write_pending()?;
        }
        // The index slot first: a full disk refuses the append before any
        // of its bytes are written or gathered.
        if let (Some(entry), Some(index)) = (entry, self.index.as_mut()) {
            index.append(entry)?;
        }
        if buffer_bytes == 0 {
            if let Err(e) = self.file_io().and_then(|f| f.write_all_at(batch, position)) {
                return Err(self.roll_back(e));
            }
        } else {
            self.unwritten.extend_from_slice(batch);
        }
        if let Some(entry) = entry {
            self.entries.push(entry);
            self.bytes_since_index = 0;
        }
        self.max_timestamp = max_timestamp;
        self.first_append_ms.get_or_insert(now_ms);
        self.last_append_ms = Some(now_ms);
        self.bytes_since_index += batch.len() as u64;
        self.size += batch.len() as u64;
        self.next_offset = header.next_offset();
        if buffer_bytes == 0 {
            self.mark_written();
        } else if self.unwritten.len() >= buffer_bytes {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Writes the appends gathered in memory to the file, in one write. On
    /// failure they are all undone ([`Segment::written_offset`] tells how
    /// far the file goes).
    pub(crate) fn write_pending(&mut self) -> Result<()> {
        self.check_broken()?;
        if self.unwritten.is_empty() {
            return Ok(());
        }
        let position = self.size - self.unwritten.len() as u64;
        let written = self
            .file_io()
            .and_then(|f| f.write_all_at(&self.unwritten, position));
        if let Err(e) = written {
            return Err(self.roll_back(e));
        }
        self.unwritten.clear();
        self.mark_written();
        Ok(())
    }

    /// Removes the records at or past `offset` (a cut inside a batch
    /// removes that whole batch), which must be in this segment: gathered
    /// appends past the cut are dropped unwritten; bytes in the file are
    /// cut, and the cut fsynced, before this returns; the index entries
    /// past it go (a mapped index is synced). Returns the new next offset.
    pub(crate) fn truncate_to(&mut self, offset: u64) -> Result<u64> {
        self.check_broken()?;
        if offset >= self.next_offset {
            return Ok(self.next_offset);
        }
        let (position, next_offset) = self.batch_start(offset)?;
        self.truncate_at(position, next_offset)
    }

    /// [`Segment::truncate_to`] the batch at `position`, whose first offset
    /// is `next_offset`, known to the caller: no batch header is read at
    /// or past it (a cut before a damaged batch).
    pub(crate) fn truncate_at(&mut self, position: u64, next_offset: u64) -> Result<u64> {
        self.check_broken()?;
        let keep = self
            .entries
            .partition_point(|e| u64::from(e.position) < position);
        let max_timestamp = self.max_timestamp_before(keep, position)?;
        if position < self.written.size {
            self.unwritten.clear();
            let file = self.file()?;
            file.set_len(position).ctx("truncate", &self.path)?;
            self.zeroed = 0;
            // The cut is durable before anything depends on it: a power
            // cut must not bring the removed records back.
            file.sync_data().ctx("fsync", &self.path)?;
        } else {
            self.unwritten
                .truncate((position - self.written.size) as usize);
        }
        self.entries.truncate(keep);
        let in_file = position < self.written.size;
        if let Some(index) = self.index.as_mut() {
            index.truncate_to_position(u32::try_from(position).unwrap_or(u32::MAX));
            // Entries of gathered appends never had to be durable.
            if in_file {
                index.flush()?;
            }
        }
        self.size = position;
        self.next_offset = next_offset;
        self.max_timestamp = max_timestamp;
        let last = self
            .entries
            .last()
            .map_or(SEGMENT_HEADER_BYTES as u64, |e| u64::from(e.position));
        self.bytes_since_index = position - last;
        if self.is_empty() {
            self.first_append_ms = None;
            self.last_append_ms = None;
        }
        if self.unwritten.is_empty() {
            self.mark_written();
        }
        Ok(next_offset)
    }

    /// The position of the batch holding `offset`, or of the first after
    /// it (in a gap), and where the batches before it end: the segment's
    /// next offset once cut there. Found from the index by a scan of
    /// batch headers.
    fn batch_start(&self, offset: u64) -> Result<(u64, u64)> {
        // Where the batch before an indexed one ends is not in the index
        // of a segment with gaps: it is read from its first batch.
        let (mut position, mut end) = match self.gaps {
            true => (SEGMENT_HEADER_BYTES as u64, self.base_offset),
            false => self.scan_start(offset),
        };
        while position < self.size {
            let header = self.header_at(position)?;
            if header.next_offset() > offset {
                return Ok((position, end));
            }
            end = header.next_offset();
            position += header.total_bytes();
        }
        Ok((self.size, end))
    }

    /// The largest timestamp of the batches before `position`, the first
    /// `keep` index entries among them: the last entry's, and those of the
    /// batches from it on.
    fn max_timestamp_before(&self, keep: usize, position: u64) -> Result<i64> {
        let (mut at, mut max) = match keep.checked_sub(1).map(|i| self.entries[i]) {
            Some(e) => (u64::from(e.position), e.max_timestamp),
            None => (SEGMENT_HEADER_BYTES as u64, i64::MIN),
        };
        while at < position {
            let header = self.header_at(at)?;
            max = max.max(header.max_timestamp);
            at += header.total_bytes();
        }
        Ok(max)
    }

    /// The header of the batch at `position`: gathered in memory or in the
    /// file.
    fn header_at(&self, position: u64) -> Result<BatchHeader> {
        let mut buf = [0u8; crate::storage::record::BATCH_HEADER_BYTES];
        let header_bytes = self.format.header_bytes();
        let bytes = if position >= self.written.size {
            let from = (position - self.written.size) as usize;
            let rest = &self.unwritten[from.min(self.unwritten.len())..];
            &rest[..rest.len().min(header_bytes)]
        } else {
            let n = (self.written.size - position).min(header_bytes as u64) as usize;
            self.file()?
                .read_exact_at(&mut buf[..n], position)
                .ctx("read", &self.path)?;
            &buf[..n]
        };
        BatchHeader::decode(self.format, bytes, crate::limits::BATCH_BYTES_MAX).map_err(|e| {
            Error::Corrupt {
                path: self.path.clone(),
                position,
                reason: e.to_string(),
            }
        })
    }

    fn check_broken(&self) -> Result<()> {
        if self.broken {
            return Err(crate::error::Error::Corrupt {
                path: self.path.clone(),
                position: self.size,
                reason: "an earlier write failed; reopen the log to recover it".into(),
            });
        }
        Ok(())
    }

    /// Where a scan for `offset` starts: the position of the last index
    /// entry at or before it (the first batch when there is none), and the
    /// offset the batch there starts at. Reads nothing;
    /// [`crate::storage::batches::BatchAt::find`] reads from there.
    pub fn scan_start(&self, offset: u64) -> (u64, u64) {
        let rel = offset.saturating_sub(self.base_offset);
        crate::storage::index::last_where(&self.entries, |e| u64::from(e.relative_offset) <= rel)
            .map_or((SEGMENT_HEADER_BYTES as u64, self.base_offset), |i| {
                let e = self.entries[i];
                (
                    u64::from(e.position),
                    self.base_offset + u64::from(e.relative_offset),
                )
            })
    }

    /// Position of the batch holding `offset` (or the first batch after it),
    /// found through the index and a short forward scan of batch headers.
    /// Returns the position and the header of that batch, or `None` when
    /// `offset` is at or past the end of the segment's first `end` bytes.
    pub fn find(
        &self,
        offset: u64,
        end: u64,
        batch_bytes_max: u32,
    ) -> Result<Option<(u64, BatchHeader)>> {
        let start = self.scan_start(offset);
        let file = self.file()?;
        let at = crate::storage::batches::BatchAt {
            skips_below: self.skips_below(),
            file: &*file,
            path: &self.path,
            format: self.format,
        };
        at.find(start, offset, end, batch_bytes_max)
    }

    /// Stops being the active segment at a roll: its index, still
    /// preallocated and mapped, is handed over to be trimmed and synced
    /// (outside the log's lock).
    /// Its appends gathered in memory must have been written first.
    /// Its file is cached from then on, not held.
    pub(crate) fn seal(&mut self) -> Option<SegmentIndex> {
        debug_assert!(self.unwritten.is_empty(), "sealed with appends unwritten");
        self.zeroed = 0;
        if let Some(file) = self.held.take() {
            self.key.keep(file);
        }
        self.index.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_no_segment_names_and_round_trip() {
        let [log, index, timeindex] = temp_paths(Path::new("/p"), 7);
        assert_eq!(log, Path::new("/p/next-7.log"));
        assert_eq!(crate::storage::index::index_paths(&log), (index, timeindex));
        assert_eq!(parse_temp_log_name("next-7.log"), Some(7));
        assert_eq!(parse_log_file_name("next-7.log"), None);
        for bad in ["next-.log", "next-7.index", "next-x.log", "7.log"] {
            assert_eq!(parse_temp_log_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn file_names_round_trip() {
        assert_eq!(log_file_name(42), "00000000000000000042.log");
        assert_eq!(parse_log_file_name("00000000000000000042.log"), Some(42));
        assert_eq!(parse_log_file_name("0000000000000000042.log"), None);
        assert_eq!(parse_log_file_name("0000000000000000004x.log"), None);
        assert_eq!(parse_log_file_name("00000000000000000042.index"), None);
    }

    #[test]
    fn header_checks() {
        let h = encode_header(7, Format::Kafka);
        assert_eq!(decode_header(&h), Ok((7, Format::Kafka)));
        let old = encode_header(7, Format::Legacy);
        assert_eq!(decode_header(&old), Ok((7, Format::Legacy)));
        for i in 0..SEGMENT_HEADER_BYTES {
            let mut bad = h;
            bad[i] ^= 0x10;
            assert!(decode_header(&bad).is_err(), "byte {i}");
        }
        assert!(decode_header(&h[..10]).is_err());
        let cleaned = encode_cleaned_header(7, 107);
        let read = read_header(&cleaned).unwrap();
        assert_eq!((read.base_offset, read.end), (7, Some(107)));
        assert_eq!(read_header(&h).unwrap().end, None);
        // A flag or an end alone, an unknown flag, both: refused.
        let reseal = |mut b: [u8; SEGMENT_HEADER_BYTES]| {
            let crc = crc32fast::hash(&b[..20]);
            b[20..24].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let mut no_end = cleaned;
        no_end[16..20].fill(0);
        let mut no_flag = cleaned;
        no_flag[6..8].fill(0);
        let mut unknown = h;
        unknown[6] = 2;
        let mut legacy_cleaned = cleaned;
        legacy_cleaned[4] = 1;
        assert_eq!(cleaned[4], 3, "a cleaned segment is version 3");
        let mut version_2_cleaned = cleaned;
        version_2_cleaned[4] = 2;
        let mut version_3_plain = h;
        version_3_plain[4] = 3;
        let gaps = encode_gaps_header(7);
        let read = read_header(&gaps).unwrap();
        assert_eq!(
            (read.end, read.gaps, read.skips_below()),
            (None, true, Some(u64::MAX))
        );
        assert_eq!(read_header(&cleaned).unwrap().skips_below(), Some(107));
        assert_eq!(read_header(&h).unwrap().skips_below(), None);
        let mut gaps_with_end = gaps;
        gaps_with_end[16] = 1;
        let mut both_flags = cleaned;
        both_flags[6] = 3;
        let mut version_2_gaps = gaps;
        version_2_gaps[4] = 2;
        for bad in [
            no_end,
            no_flag,
            unknown,
            legacy_cleaned,
            version_2_cleaned,
            version_3_plain,
            gaps_with_end,
            both_flags,
            version_2_gaps,
        ] {
            assert!(read_header(&reseal(bad)).is_err(), "{bad:?}");
        }
    }
}
