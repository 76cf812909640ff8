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
//! |      4 |    2 | `version`     | segment format version, `1`                       |
//! |      6 |    2 | reserved      | `0`                                               |
//! |      8 |    8 | `base_offset` | offset of the first record; also the file's name  |
//! |     16 |    4 | reserved      | `0`                                               |
//! |     20 |    4 | `header_crc`  | CRC32 of bytes 0..20                              |
//!
//! The header is why an index position is never 0, and lets `klog-dump`
//! tell a klog segment from any other file. The file is not preallocated:
//! its length is the end of the last byte written, so a crash leaves at
//! worst a torn or zero-filled tail, which recovery cuts.
//!
//! `tests/golden/segment-header.bin` and the segments in
//! `tests/golden/partition/` pin this layout; a diff there is a format
//! change and needs a new `version`.
//!
//! Walking a segment's batches is [`crate::storage::batches::FileBatches`]:
//! a few large reads per megabyte, never one read per record.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{self, VFile, Vfs};
use crate::storage::index::{IndexEntry, SegmentIndex};
use crate::storage::record::{self, BatchHeader, BATCH_HEADER_BYTES};

/// Bytes of the segment header.
pub const SEGMENT_HEADER_BYTES: usize = 24;
/// The segment file magic.
pub const SEGMENT_MAGIC: &[u8; 4] = b"KLOG";
/// The segment format version.
pub const SEGMENT_VERSION: u16 = 1;

/// The file name of the segment whose first offset is `base_offset`.
pub fn log_file_name(base_offset: u64) -> String {
    format!("{base_offset:020}.log")
}

/// The base offset a segment file name encodes, if it is one.
pub fn parse_log_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Encodes a segment header.
pub fn encode_header(base_offset: u64) -> [u8; SEGMENT_HEADER_BYTES] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES];
    h[0..4].copy_from_slice(SEGMENT_MAGIC);
    h[4..6].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h[8..16].copy_from_slice(&base_offset.to_le_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Decodes a segment header, returning the base offset it names.
pub fn decode_header(h: &[u8]) -> std::result::Result<u64, String> {
    if h.len() < SEGMENT_HEADER_BYTES {
        return Err(format!(
            "segment header truncated ({} of {SEGMENT_HEADER_BYTES} bytes)",
            h.len()
        ));
    }
    if &h[0..4] != SEGMENT_MAGIC {
        return Err("not a klog segment (bad magic)".into());
    }
    let crc = crc32fast::hash(&h[..20]);
    if crc != record::u32_at(h, 20) {
        return Err("segment header crc mismatch".into());
    }
    let version = record::u16_at(h, 4);
    if version != SEGMENT_VERSION {
        return Err(format!("unsupported segment version {version}"));
    }
    Ok(record::u64_at(h, 8))
}

/// A segment: its log file, its place in the log and, while it is the
/// active segment, its writable index.
#[derive(Debug)]
pub struct Segment {
    /// Offset of the first record (and the file's name).
    pub base_offset: u64,
    /// Path of the `.log` file.
    pub path: PathBuf,
    pub(crate) file: Arc<dyn VFile>,
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
    /// Creates an empty segment file, durably (file and directory entry).
    pub fn create(
        vfs: &dyn Vfs,
        dir: &Path,
        base_offset: u64,
        index_slots: usize,
    ) -> Result<Segment> {
        let path = dir.join(log_file_name(base_offset));
        let file = vfs.open(&path, true).ctx("create segment", &path)?;
        file.set_len(0).ctx("truncate", &path)?;
        file.write_all_at(&encode_header(base_offset), 0)
            .ctx("write", &path)?;
        file.sync_data().ctx("fsync", &path)?;
        let index = SegmentIndex::create(vfs, &path, Vec::new(), index_slots)?;
        // The new files exist after a power cut only once their directory
        // entries are durable.
        fs::sync_directory(vfs, dir)?;
        Ok(Segment {
            base_offset,
            path,
            file,
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
        })
    }

    /// Opens an existing segment file for reading, checking its header.
    /// Its extent (`size`, `next_offset`, ...) is set by the caller, from
    /// recovery or from its index.
    pub fn open(vfs: &dyn Vfs, path: &Path, writable: bool) -> Result<Segment> {
        let file = if writable {
            vfs.open(path, false)
        } else {
            vfs.open_read(path)
        }
        .ctx("open segment", path)?;
        let size = file.len().ctx("stat", path)?;
        let mut header = [0u8; SEGMENT_HEADER_BYTES];
        let n = file.read_at(&mut header, 0).ctx("read", path)?;
        let base_offset = decode_header(&header[..n]).map_err(|reason| Error::Corrupt {
            path: path.to_path_buf(),
            position: 0,
            reason,
        })?;
        Ok(Segment {
            base_offset,
            path: path.to_path_buf(),
            file,
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
        })
    }

    /// Whether no record has been appended.
    pub fn is_empty(&self) -> bool {
        self.next_offset == self.base_offset
    }

    /// The file, for reads and `sendfile`.
    pub fn file(&self) -> &Arc<dyn VFile> {
        &self.file
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
        if let Err(e) = self.file.set_len(w.size) {
            // The file may hold bytes nobody will be told about; only a
            // reopen (recovery) can tell where it ends.
            self.broken = true;
            return Error::io("truncate after a failed write", &self.path, e);
        }
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
        let index = SegmentIndex::create(vfs, &self.path, self.entries.clone(), index_slots)?;
        self.index = Some(index);
        Ok(())
    }

    /// Whether appending `batch_bytes` more must go to a new segment.
    pub fn is_full(&self, batch_bytes: u64, segment_bytes: u64, record_count: u32) -> bool {
        if self.is_empty() {
            return false;
        }
        let offsets_left = u64::from(u32::MAX) - (self.next_offset - self.base_offset);
        self.size + batch_bytes > segment_bytes
            || u64::from(record_count) > offsets_left
            || self.index.as_ref().is_some_and(SegmentIndex::is_full)
    }

    /// Appends a batch whose base offset is already `next_offset`. With a
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
        debug_assert_eq!(header.base_offset, self.next_offset);
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
            if let Err(e) = self.file.write_all_at(batch, position) {
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
        if let Err(e) = self.file.write_all_at(&self.unwritten, position) {
            return Err(self.roll_back(e));
        }
        self.unwritten.clear();
        self.mark_written();
        Ok(())
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
        let rel = offset.saturating_sub(self.base_offset);
        let start = crate::storage::index::last_where(&self.entries, |e| {
            u64::from(e.relative_offset) <= rel
        })
        .map_or(SEGMENT_HEADER_BYTES as u64, |i| {
            u64::from(self.entries[i].position)
        });
        let mut position = start;
        let mut header_buf = [0u8; BATCH_HEADER_BYTES];
        while position + BATCH_HEADER_BYTES as u64 <= end {
            self.file
                .read_exact_at(&mut header_buf, position)
                .ctx("read", &self.path)?;
            let header =
                BatchHeader::decode(&header_buf, batch_bytes_max).map_err(|e| Error::Corrupt {
                    path: self.path.clone(),
                    position,
                    reason: e.to_string(),
                })?;
            if header.next_offset() > offset {
                if position + header.total_bytes() > end {
                    return Ok(None);
                }
                return Ok(Some((position, header)));
            }
            position += header.total_bytes();
        }
        Ok(None)
    }

    /// Stops being the active segment: trims and syncs the index (a
    /// segment that is not being appended to keeps a trimmed index).
    pub fn deactivate(&mut self) -> Result<()> {
        self.write_pending()?;
        if let Some(mut index) = self.index.take() {
            index.trim()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let h = encode_header(7);
        assert_eq!(decode_header(&h), Ok(7));
        for i in 0..SEGMENT_HEADER_BYTES {
            let mut bad = h;
            bad[i] ^= 0x10;
            assert!(decode_header(&bad).is_err(), "byte {i}");
        }
        assert!(decode_header(&h[..10]).is_err());
    }
}
