//! Consuming: where to start (`-o`), how to print a record (`-f`, `-J`),
//! and following a partition of a local data directory like `tail -f`.
//!
//! An embedded reader takes no lock. It reads whole batches from the
//! segment files, checks every record's CRC, and stops before a batch that
//! is not whole yet, so it never prints a partial record; when it reaches the
//! end of a segment that the writer has rolled, it moves to the next file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde::Serialize;

use crate::client::offset::{resolve_in, Extent, OffsetSpec};
use crate::error::{IoContext, Result};
use crate::human::format_rfc3339;
use crate::limits;
use crate::storage::batches::Batches;
use crate::storage::fs::{VFile, Vfs};
use crate::storage::log::{Log, LogConfig, OpenOptions};
use crate::storage::record::{
    BatchHeader, DecodeError, Decompressed, Format as BatchFormat, Record,
};
use crate::storage::recover;
use crate::storage::segment::{self, log_file_name, parse_log_file_name, SEGMENT_HEADER_BYTES};

/// Resolves a start position against an open log.
pub fn resolve(log: &Log, spec: OffsetSpec, name: &str) -> Result<u64> {
    let extent = Extent::of(log.start_offset(), log.next_offset());
    resolve_in(extent, spec, name, |ts| log.offset_for_timestamp(ts))
}

/// One piece of a `-f` format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(Vec<u8>),
    Value,
    Key,
    /// `%K`: the key's length, -1 without a key.
    KeyLen,
    ValueLen,
    /// `%R`: the value's length as 4 bytes, big-endian (kcat's framing).
    ValueLenBinary,
    Topic,
    Partition,
    Offset,
    Timestamp,
    Rfc3339,
    Headers,
}

/// A compiled `-f` format string (kcat's tokens).
#[derive(Debug, Clone)]
pub struct Format {
    tokens: Vec<Token>,
    /// `-Z`: an absent (null) key prints as `NULL`.
    null: bool,
}

/// What `-Z` prints for an empty key or value (kcat's).
const NULL: &[u8] = b"NULL";

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Format, String> {
        let raw = crate::human::parse_escapes(s)?;
        let mut tokens = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        while i < raw.len() {
            if raw[i] != b'%' {
                lit.push(raw[i]);
                i += 1;
                continue;
            }
            let c = *raw.get(i + 1).ok_or("a format cannot end with a lone %")?;
            i += 2;
            let token = match c {
                b's' => Token::Value,
                b'k' => Token::Key,
                b'K' => Token::KeyLen,
                b'S' => Token::ValueLen,
                b'R' => Token::ValueLenBinary,
                b't' => Token::Topic,
                b'p' => Token::Partition,
                b'o' => Token::Offset,
                b'T' => Token::Timestamp,
                b'F' => Token::Rfc3339,
                b'h' => Token::Headers,
                b'%' => {
                    lit.push(b'%');
                    continue;
                }
                other => return Err(format!("unknown format token %{}", other as char)),
            };
            if !lit.is_empty() {
                tokens.push(Token::Literal(std::mem::take(&mut lit)));
            }
            tokens.push(token);
        }
        if !lit.is_empty() {
            tokens.push(Token::Literal(lit));
        }
        Ok(Format {
            tokens,
            null: false,
        })
    }
}

impl Format {
    /// kcat's default format: the value and `delimiter`, or with a key
    /// delimiter (`-K`) the key, it, the value and `delimiter` (`-D`).
    /// The delimiters are bytes, never parsed for tokens.
    pub fn delimited(key_delimiter: Option<&[u8]>, delimiter: &[u8]) -> Format {
        let mut tokens = Vec::with_capacity(4);
        if let Some(k) = key_delimiter {
            tokens.push(Token::Key);
            tokens.push(Token::Literal(k.to_vec()));
        }
        tokens.push(Token::Value);
        tokens.push(Token::Literal(delimiter.to_vec()));
        tokens.retain(|t| !matches!(t, Token::Literal(l) if l.is_empty()));
        Format {
            tokens,
            null: false,
        }
    }

    /// With `on` (`-Z`), an absent (null) key prints as `NULL`, as kcat's
    /// does; an empty one stays empty. (klog's record format has no null
    /// value, so a value is never `NULL`.)
    pub fn with_null(mut self, on: bool) -> Format {
        self.null = on;
        self
    }

    /// Writes one record in this format, with no allocation.
    pub fn write(
        &self,
        out: &mut impl Write,
        topic: &str,
        partition: u32,
        r: &Record<'_>,
    ) -> std::io::Result<()> {
        for token in &self.tokens {
            match token {
                Token::Literal(l) => out.write_all(l)?,
                Token::Value if r.null_value && self.null => out.write_all(NULL)?,
                Token::Value => out.write_all(r.value)?,
                Token::Key => match r.key {
                    Some(k) => out.write_all(k)?,
                    None if self.null => out.write_all(NULL)?,
                    None => {}
                },
                Token::KeyLen => match r.key {
                    Some(k) => write!(out, "{}", k.len())?,
                    None => out.write_all(b"-1")?,
                },
                Token::ValueLen if r.null_value => out.write_all(b"-1")?,
                Token::ValueLen => write!(out, "{}", r.value.len())?,
                // A value is at most RECORD_BYTES_MAX_LIMIT, far below 4 GiB.
                Token::ValueLenBinary => out.write_all(&(r.value.len() as u32).to_be_bytes())?,
                Token::Topic => out.write_all(topic.as_bytes())?,
                Token::Partition => write!(out, "{partition}")?,
                Token::Offset => write!(out, "{}", r.offset)?,
                Token::Timestamp => write!(out, "{}", r.timestamp)?,
                Token::Rfc3339 => out.write_all(format_rfc3339(r.timestamp).as_bytes())?,
                Token::Headers => {
                    for (i, (n, v)) in r.headers().enumerate() {
                        if i > 0 {
                            out.write_all(b",")?;
                        }
                        out.write_all(n)?;
                        out.write_all(b"=")?;
                        out.write_all(v)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The JSON envelope of `-J` (kcat's fields; `headers` as name, value, ...).
///
/// A key, value or header that is not UTF-8 is written in base64, and
/// `key_encoding`, `payload_encoding` or `headers_encoding` says
/// `"base64"`: `klog-produce -J` reads them back to the same bytes.
#[derive(Debug, Serialize)]
pub struct Envelope<'a> {
    /// Topic.
    pub topic: &'a str,
    /// Partition.
    pub partition: u32,
    /// Offset.
    pub offset: u64,
    /// Timestamp, ms since the epoch.
    pub ts: i64,
    /// Header names and values, alternating.
    pub headers: Vec<std::borrow::Cow<'a, str>>,
    /// Key, or null.
    pub key: Option<std::borrow::Cow<'a, str>>,
    /// Value, or null (a tombstone).
    pub payload: Option<std::borrow::Cow<'a, str>>,
    /// `"base64"` when the headers are written so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers_encoding: Option<&'static str>,
    /// `"base64"` when the key is written so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_encoding: Option<&'static str>,
    /// `"base64"` when the payload is written so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_encoding: Option<&'static str>,
}

/// The bytes as text: themselves when UTF-8, else base64 (and says so).
fn text(bytes: &[u8]) -> (std::borrow::Cow<'_, str>, Option<&'static str>) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (std::borrow::Cow::Borrowed(s), None),
        Err(_) => (
            std::borrow::Cow::Owned(base64::engine::general_purpose::STANDARD.encode(bytes)),
            Some("base64"),
        ),
    }
}

impl<'a> Envelope<'a> {
    /// The envelope of a record.
    pub fn of(topic: &'a str, partition: u32, r: &Record<'a>) -> Envelope<'a> {
        let all_text = r
            .headers()
            .all(|(n, v)| std::str::from_utf8(n).is_ok() && std::str::from_utf8(v).is_ok());
        let mut headers = Vec::with_capacity(2 * r.header_count() as usize);
        for (n, v) in r.headers() {
            for part in [n, v] {
                headers.push(if all_text {
                    text(part).0
                } else {
                    std::borrow::Cow::Owned(base64::engine::general_purpose::STANDARD.encode(part))
                });
            }
        }
        let (key, key_encoding) = match r.key.map(text) {
            Some((k, e)) => (Some(k), e),
            None => (None, None),
        };
        let (payload, payload_encoding) = match r.null_value {
            true => (None, None),
            false => {
                let (payload, encoding) = text(r.value);
                (Some(payload), encoding)
            }
        };
        Envelope {
            topic,
            partition,
            offset: r.offset,
            ts: r.timestamp,
            headers,
            key,
            payload,
            headers_encoding: (!all_text).then_some("base64"),
            key_encoding,
            payload_encoding,
        }
    }
}

/// Follows one partition of a local data directory from an offset.
#[derive(Debug)]
pub struct PartitionReader {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    file: Arc<dyn VFile>,
    path: PathBuf,
    /// The format of the current segment's batches.
    format: BatchFormat,
    position: u64,
    next_offset: u64,
    buf: Vec<u8>,
    /// The records of a compressed batch, decompressed.
    scratch: Decompressed<'static>,
    record_bytes_max: u32,
    stalls: u32,
    /// Polls that found zeros where the next batch would start.
    zero_looks: u32,
    /// Offsets deleted before they were read (from, to before), not yet
    /// told to the caller.
    skipped: Option<(u64, u64)>,
    /// The read segment's end, if it is a cleaned one: the next segment
    /// starts there, past the offsets compaction removed.
    end: Option<u64>,
}

/// Bytes read from a segment at a time.
pub const FETCH_BYTES_DEFAULT: usize = 1 << 20;

impl PartitionReader {
    /// A reader of the partition whose log is open in `log` (read-only),
    /// positioned at `offset`.
    pub fn new(vfs: Arc<dyn Vfs>, log: &Log, offset: u64) -> Result<PartitionReader> {
        let (file, path, format, position) = match log.read(offset, 1)? {
            Some(slice) => (slice.file, slice.path, slice.format, slice.position),
            None => {
                let active = log.segments().last().expect("a log has a segment");
                let file = active.file()?;
                (file, active.path.clone(), active.format, active.size)
            }
        };
        let end = log.segments().find(|s| s.path == path).and_then(|s| s.end);
        Ok(PartitionReader {
            end,
            vfs,
            dir: log.dir().to_path_buf(),
            file,
            path,
            format,
            position,
            next_offset: offset,
            buf: Vec::new(),
            scratch: Decompressed::default(),
            // Stored records are judged by the format's limit, not by the
            // policy for new appends: a record accepted once is read.
            record_bytes_max: crate::limits::RECORD_BYTES_MAX_LIMIT,
            stalls: 0,
            zero_looks: 0,
            skipped: None,
        })
    }

    /// The offset of the next record to hand out.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Reads what is there (up to `bytes_max`, at least one batch) and
    /// calls `each` for every record at or after the reader's offset, until
    /// it returns false. Returns how many records it handed out.
    pub fn poll(
        &mut self,
        bytes_max: usize,
        mut each: impl FnMut(&Record<'_>) -> Result<bool>,
    ) -> Result<u64> {
        if !self.read_on(bytes_max)? {
            return Ok(0);
        }
        let mut batches = Batches::new(self.format, &self.buf, limits::BATCH_BYTES_MAX);
        let mut handed = 0;
        for step in batches.by_ref() {
            let (at, batch) = match step {
                Ok(found) => found,
                // The read ends inside it (its budget, a writer still at it),
                // or in zeros of the last segment (`--preallocate`): read
                // there at the next poll.
                Err(stop) if stop.is_truncated() || (stop.zeros && self.at_last()?) => break,
                Err(stop) => return self.stall(stop.position, stop.error).map(|_| handed),
            };
            if let Err(e) = batch.validate_in(&mut self.scratch, self.record_bytes_max) {
                return self.stall(at, e).map(|_| handed);
            }
            // A transaction's marker is no record: passed over.
            if batch.header.is_control() {
                self.next_offset = self.next_offset.max(batch.header.next_offset());
                continue;
            }
            let records = batch.records_in(&mut self.scratch, self.record_bytes_max);
            for r in records.expect("validated") {
                let r = r.expect("validated");
                if r.offset < self.next_offset {
                    continue;
                }
                handed += 1;
                self.next_offset = r.offset + 1;
                if !each(&r)? {
                    if r.offset == batch.header.last_offset() {
                        self.position += at + batch.total_bytes() as u64;
                    } else {
                        self.position += at;
                    }
                    return Ok(handed);
                }
            }
            self.stalls = 0;
        }
        self.position += batches.position() as u64;
        Ok(handed)
    }

    /// Reads what follows the reader's position into its buffer (up to
    /// `bytes_max`, or one whole larger batch); `false` when nothing does
    /// yet: the end of the file (then the next segment is looked for), or
    /// zeros a broker wrote ahead of its appends (`--preallocate`), told
    /// by a batch header's worth of them without reading more.
    fn read_on(&mut self, bytes_max: usize) -> Result<bool> {
        let len = self.file.len().ctx("stat", &self.path)?;
        if self.position >= len {
            self.next_segment()?;
            return Ok(false);
        }
        let header_bytes = self.format.header_bytes();
        // Zeros: a look at the whole budget one poll in ZERO_LOOKS, which
        // tells damage after them (a stall) from zeros to its end (a wait).
        let mut head = [0u8; 64];
        let head = &mut head[..header_bytes.min(64)];
        let n = self
            .file
            .read_at(head, self.position)
            .ctx("read", &self.path)?;
        if n == head.len() && head.iter().all(|&b| b == 0) {
            self.zero_looks += 1;
            if self.zero_looks % ZERO_LOOKS != 0 {
                return Ok(false);
            }
        }
        let want = ((len - self.position) as usize).min(bytes_max.max(header_bytes));
        self.buf.resize(want, 0);
        let n = self
            .file
            .read_at(&mut self.buf, self.position)
            .ctx("read", &self.path)?;
        self.buf.truncate(n);
        if n >= header_bytes {
            if let Ok(h) = BatchHeader::decode(self.format, &self.buf, limits::BATCH_BYTES_MAX) {
                let total = h.total_bytes() as usize;
                if total > self.buf.len() && self.position + total as u64 <= len {
                    // A batch larger than the budget: read it whole.
                    self.buf.resize(total, 0);
                    self.file
                        .read_exact_at(&mut self.buf, self.position)
                        .ctx("read", &self.path)?;
                }
            }
        }
        Ok(true)
    }

    /// A batch that does not decode. At the tail of a file a writer may be
    /// writing it now: wait a few polls before calling it corruption.
    fn stall(&mut self, at: u64, e: DecodeError) -> Result<()> {
        self.position += at;
        self.stalls += 1;
        if self.stalls > 20 {
            return Err(recover::corrupt(
                &self.path,
                self.position,
                format!("{e} (offset {})", self.next_offset),
            ));
        }
        Ok(())
    }

    /// The offsets retention deleted before this reader got to them (from,
    /// to before) since the last call, if it skipped any.
    pub fn take_skipped(&mut self) -> Option<(u64, u64)> {
        self.skipped.take()
    }

    /// At the end of a segment: moves to the next one if the writer rolled
    /// (a cleaned segment's next starts at its end), or else finds where
    /// the reader's offset is now ([`PartitionReader::find_segment`]).
    fn next_segment(&mut self) -> Result<()> {
        let target = self.next_offset.max(self.end.unwrap_or(0));
        let next = self.dir.join(log_file_name(target));
        if next == self.path || !self.vfs.exists(&next) {
            return self.find_segment();
        }
        // Re-check the end of the current file: the writer appends before it
        // rolls, so once the next segment exists this file is final.
        if self.file.len().ctx("stat", &self.path)? > self.position {
            return Ok(());
        }
        self.open_segment(next)?;
        // The offsets between are compaction's gaps.
        self.next_offset = target;
        Ok(())
    }

    /// Makes `path` the segment read, from its first batch (records below
    /// the reader's offset are passed over).
    fn open_segment(&mut self, path: PathBuf) -> Result<()> {
        let file = self.vfs.open_read(&path).ctx("open segment", &path)?;
        let mut head = [0u8; SEGMENT_HEADER_BYTES];
        let n = file.read_at(&mut head, 0).ctx("read", &path)?;
        let header =
            segment::read_header(&head[..n]).map_err(|why| recover::corrupt(&path, 0, why))?;
        self.file = file;
        self.path = path;
        self.format = header.format;
        self.end = header.end;
        self.position = SEGMENT_HEADER_BYTES as u64;
        Ok(())
    }

    /// At the end of a segment with no segment at the reader's offset
    /// after it. The last segment: the writer has not rolled, wait. Else
    /// this one was deleted by retention or replaced by a cleaned one: the
    /// reader goes on in the segment holding its offset now (a cleaned one
    /// under the same name or another's, read from its start), or, when
    /// retention took that too, in the first one after it, noting what it
    /// skipped.
    fn find_segment(&mut self) -> Result<()> {
        let names = self.vfs.list(&self.dir).ctx("list", &self.dir)?;
        let bases: std::collections::BTreeSet<u64> = names
            .iter()
            .filter_map(|name| parse_log_file_name(name))
            .collect();
        let name = self.path.file_name().and_then(|n| n.to_str());
        let current = name.and_then(parse_log_file_name);
        if self.swapped()? {
            return self.open_segment(self.path.clone());
        }
        if current.is_some_and(|c| bases.range(c + 1..).next().is_none()) {
            return Ok(());
        }
        if let Some(&base) = bases.range(..=self.next_offset).next_back() {
            let path = self.dir.join(log_file_name(base));
            if Some(base) != current || self.replaced(&path)? {
                return self.open_segment(path);
            }
        }
        let Some(&base) = bases.range(self.next_offset + 1..).next() else {
            return Ok(());
        };
        self.open_segment(self.dir.join(log_file_name(base)))?;
        let from = self.skipped.map_or(self.next_offset, |(from, _)| from);
        self.skipped = Some((from, base));
        self.next_offset = base;
        Ok(())
    }

    /// Whether the empty last segment read was replaced under its name by
    /// a longer file: a broker gave it a spare's (`--preallocate`), and
    /// appends to that one.
    fn swapped(&self) -> Result<bool> {
        if self.position != SEGMENT_HEADER_BYTES as u64 {
            return Ok(false);
        }
        let file = match self.vfs.open_read(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            opened => opened.ctx("open segment", &self.path)?,
        };
        Ok(file.len().ctx("stat", &self.path)? > self.file.len().ctx("stat", &self.path)?)
    }

    /// Whether the segment read is the last one (no later segment file).
    fn at_last(&self) -> Result<bool> {
        let names = self.vfs.list(&self.dir).ctx("list", &self.dir)?;
        let name = self.path.file_name().and_then(|n| n.to_str());
        let current = name.and_then(parse_log_file_name).unwrap_or(u64::MAX);
        Ok(!names
            .iter()
            .filter_map(|n| parse_log_file_name(n))
            .any(|base| base > current))
    }

    /// Whether the segment at `path` (the read one's name) is now a
    /// cleaned one the reader's is not: the cleaner replaced it.
    fn replaced(&self, path: &Path) -> Result<bool> {
        let file = self.vfs.open_read(path).ctx("open segment", path)?;
        let mut head = [0u8; SEGMENT_HEADER_BYTES];
        let n = file.read_at(&mut head, 0).ctx("read", path)?;
        let end = segment::read_header(&head[..n]).ok().and_then(|h| h.end);
        Ok(end.is_some() && end != self.end)
    }
}

/// One poll in this many that finds zeros where the next batch would
/// start reads its whole budget, to tell damage after them.
const ZERO_LOOKS: u32 = 20;

/// Opens a partition's log read-only, for resolving offsets.
pub fn open_read_only(vfs: Arc<dyn Vfs>, dir: &Path) -> Result<Log> {
    let options = OpenOptions {
        writable: false,
        lock: false,
    };
    Log::open(vfs, dir, LogConfig::default(), options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::record::Batch;

    #[test]
    fn formats() {
        assert!("%q".parse::<Format>().is_err());
        assert!("%".parse::<Format>().is_err());
        let f: Format = r"%t/%p@%o %k=%s (%S) %% %h\n".parse().unwrap();
        let mut b = crate::storage::record::BatchBuilder::new();
        b.push(5, Some(b"k"), &[(b"h", b"v")], b"val");
        let bytes = b.finish().to_vec();
        let batch = Batch::decode(BatchFormat::Kafka, &bytes, 1 << 20).unwrap();
        let r = batch.records(1 << 20).next().unwrap().unwrap();
        let mut out = Vec::new();
        f.write(&mut out, "t", 3, &r).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "t/3@0 k=val (3) % h=v\n");
    }
}

#[cfg(test)]
mod retention_tests {
    use super::*;
    use crate::storage::fs::RealFs;
    use crate::storage::log::{LogConfig, OpenOptions};
    use crate::storage::record::BatchBuilder;

    /// An embedded reader behind a broker's retention (the segments it had
    /// yet to read deleted under it) goes on at the log's new start and
    /// says what it skipped; it waited forever at the end of the deleted
    /// segment for a next one that no longer existed.
    #[test]
    fn a_reader_behind_retention_goes_on_at_the_log_start() {
        let dir = tempfile::tempdir().unwrap();
        let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
        let config = LogConfig {
            segment_bytes: 4096,
            retention_ms: None,
            ..LogConfig::default()
        };
        let write = OpenOptions {
            writable: true,
            lock: false,
        };
        let mut log = Log::open(Arc::clone(&vfs), dir.path(), config, write).unwrap();
        for i in 0..600u64 {
            let mut b = BatchBuilder::new();
            b.push(0, None, &[], format!("value-{i:04}").as_bytes());
            log.append(&mut b.finish().to_vec(), 0).unwrap();
        }
        log.flush().unwrap();
        let bases: Vec<u64> = log.segments().map(|s| s.base_offset).collect();
        assert!(bases.len() > 4, "{bases:?}");
        let mut reader = PartitionReader::new(Arc::clone(&vfs), &log, 0).unwrap();
        let mut seen = Vec::new();
        reader
            .poll(1, |r| {
                seen.push(r.offset);
                Ok(true)
            })
            .unwrap();
        assert_eq!(seen, [0]);
        // Retention deletes the first three segments (the one being read
        // included: its open file still reads to its end).
        for base in &bases[..3] {
            for ext in ["log", "index", "timeindex"] {
                let _ = std::fs::remove_file(dir.path().join(format!("{base:020}.{ext}")));
            }
        }
        for _ in 0..1000 {
            reader
                .poll(FETCH_BYTES_DEFAULT, |r| {
                    seen.push(r.offset);
                    Ok(true)
                })
                .unwrap();
            if seen.last() == Some(&599) {
                break;
            }
        }
        assert_eq!(seen.last(), Some(&599), "it read on to the end");
        let first_kept = bases[3];
        let jump = seen.windows(2).find(|w| w[1] != w[0] + 1).expect("a gap");
        assert_eq!(jump[1], first_kept, "{seen:?}");
        assert!(seen.windows(2).all(|w| w[1] > w[0]));
        assert_eq!(reader.take_skipped(), Some((jump[0] + 1, first_kept)));
        assert_eq!(reader.take_skipped(), None);
    }
}
