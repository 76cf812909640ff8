//! A report of acknowledged records (`klog-produce --report FILE`): one
//! JSON line per record a broker acknowledged, written as its answer
//! arrives and flushed with that answer, so that a record in the file is
//! one the producer was told is stored (at `acks=all`: on every in-sync
//! replica), at that offset.
//!
//! ```text
//! {"topic":"t","partition":0,"offset":41,"value":"42"}
//! {"topic":"t","partition":0,"offset":42,"value":"/w==","value_encoding":"base64"}
//! ```
//!
//! A value that is not UTF-8 is written in base64 with `value_encoding`
//! (as `klog-consume -J` writes a payload). A record read from a `-J`
//! envelope that names its topic, partition and offset (as `klog-consume
//! -J` prints them) has them in `source`, first in its line, carried with its batch through
//! every retry and leader move, so that a mirror's consumer
//! (`klog-consume --commit-from`) commits a source offset only once the
//! record made from it is stored here:
//!
//! ```text
//! {"source":{"topic":"s","partition":2,"offset":9},"topic":"t","partition":0,"offset":43,"value":"x"}
//! ```
//!
//! A transactional producer (`--transactional-id`) writes a record's line
//! once its transaction committed, and a line without an offset for a
//! record it did not send because a committed transaction of an earlier
//! run stored it (its source is below the offset that transaction
//! committed):
//!
//! ```text
//! {"source":{"topic":"s","partition":2,"offset":8},"topic":"t","stored_before":true}
//! ```
//!
//! A batch acknowledged twice
//! (sent again after a connection broke or its leader moved, with no
//! idempotence) is written twice, at each of its offsets. With `acks=0`
//! nothing is acknowledged, and nothing is written.
//!
//! The report is written by the producer's answer readers (one per
//! broker), each answer under one lock: lines of one batch are never
//! interleaved with another's. The first write error is kept and stops
//! the report; [`AckReport::finish`] returns it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base64::Engine as _;

use crate::client::Source;
use crate::error::{Error, Result};
use crate::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};
use crate::storage::record::{Batch, Decompressed, Format};
use crate::sync::lock;

/// Where acknowledged records are written (see the module doc).
#[derive(Debug)]
pub struct AckReport {
    topic: String,
    path: PathBuf,
    out: Mutex<Out>,
}

/// The open report file, and the first error writing it.
#[derive(Debug)]
struct Out {
    file: Option<BufWriter<File>>,
    error: Option<std::io::Error>,
    /// A transactional producer's lines, held until their transaction
    /// commits ([`AckReport::hold`]).
    held: Option<Vec<u8>>,
}

/// One line of the report (its source first: a reader of sources takes
/// a line's first bytes and skips its value).
#[derive(serde::Serialize)]
struct Line<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<LineSource<'a>>,
    topic: &'a str,
    partition: u32,
    offset: u64,
    value: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value_encoding: Option<&'static str>,
}

/// The line of a record the destination held already.
#[derive(serde::Serialize)]
struct StoredBefore<'a> {
    source: LineSource<'a>,
    topic: &'a str,
    stored_before: bool,
}

/// Where a record of the report was consumed from.
#[derive(serde::Serialize)]
struct LineSource<'a> {
    topic: &'a str,
    partition: u32,
    offset: u64,
}

impl AckReport {
    /// Creates (or truncates) the report file `path` for records of
    /// `topic`.
    /// A FIFO is opened once a reader opens it (`klog-consume
    /// --commit-from`), or fails with a stop signal.
    pub fn create(path: &Path, topic: &str) -> Result<AckReport> {
        let file = open(path).map_err(|source| Error::Io {
            op: "create the report",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(AckReport {
            topic: topic.to_string(),
            path: path.to_path_buf(),
            out: Mutex::new(Out {
                file: Some(BufWriter::new(file)),
                error: None,
                held: None,
            }),
        })
    }

    /// Writes the records of `batch` (as the producer sent it, its records
    /// from `sources` where known), which a broker acknowledged at
    /// `base_offset` of `partition`, and flushes them.
    pub(crate) fn acknowledged(
        &self,
        partition: u32,
        base_offset: u64,
        batch: &[u8],
        sources: &[Option<Source>],
    ) {
        let mut out = lock(&self.out);
        let Out { file, error, held } = &mut *out;
        let Some(writer) = file.as_mut().filter(|_| error.is_none()) else {
            return;
        };
        let at = (partition, base_offset);
        let written = match held {
            Some(held) => write_batch(held, &self.topic, at, batch, sources),
            None => {
                write_batch(writer, &self.topic, at, batch, sources).and_then(|()| writer.flush())
            }
        };
        if let Err(e) = written {
            *error = Some(e);
        }
    }

    /// From now on, acknowledged records are held until
    /// [`AckReport::release`] (their transaction committed) or
    /// [`AckReport::discard`] (it aborted): a transactional producer's
    /// report lists only committed records.
    pub(crate) fn hold(&self) {
        lock(&self.out).held.get_or_insert_with(Vec::new);
    }

    /// Bytes of lines held.
    pub(crate) fn held_bytes(&self) -> usize {
        lock(&self.out).held.as_ref().map_or(0, Vec::len)
    }

    /// Writes the lines held (their transaction committed), and flushes.
    pub(crate) fn release(&self) {
        let mut out = lock(&self.out);
        let Out { file, error, held } = &mut *out;
        let (Some(writer), Some(held)) = (file.as_mut().filter(|_| error.is_none()), held) else {
            return;
        };
        if let Err(e) = writer.write_all(held).and_then(|()| writer.flush()) {
            *error = Some(e);
        }
        held.clear();
    }

    /// Drops the lines held (their transaction aborted).
    pub(crate) fn discard(&self) {
        if let Some(held) = &mut lock(&self.out).held {
            held.clear();
        }
    }

    /// Writes a line for a record read from `source` and not sent: the
    /// destination holds it already (a committed transaction took it), so
    /// that a mirror's consumer commits past it. The line has no offset:
    /// `{"source":{...},"topic":"t","stored_before":true}`.
    pub(crate) fn stored_before(&self, source: &Source) {
        let mut out = lock(&self.out);
        let Out { file, error, .. } = &mut *out;
        let Some(writer) = file.as_mut().filter(|_| error.is_none()) else {
            return;
        };
        let line = StoredBefore {
            source: LineSource {
                topic: &source.topic,
                partition: source.partition,
                offset: source.offset,
            },
            topic: &self.topic,
            stored_before: true,
        };
        let written = serde_json::to_writer(&mut *writer, &line)
            .map_err(std::io::Error::from)
            .and_then(|()| writer.write_all(b"\n"))
            .and_then(|()| writer.flush());
        if let Err(e) = written {
            *error = Some(e);
        }
    }

    /// Flushes and closes the report; the first error writing it, if any.
    pub fn finish(&self) -> Result<()> {
        let mut out = lock(&self.out);
        let flushed = match out.file.take() {
            Some(mut writer) => writer.flush(),
            None => Ok(()),
        };
        match out.error.take().map_or(flushed, Err) {
            Ok(()) => Ok(()),
            Err(source) => Err(Error::Io {
                op: "write the report",
                path: self.path.clone(),
                source,
            }),
        }
    }
}

/// Creates (or truncates) `path`; a FIFO is waited on until a reader
/// opens it, looking at the stop flag (an open that blocks would hold a
/// producer whose reader never came past its signal).
fn open(path: &Path) -> std::io::Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    if !fifo {
        return File::create(path);
    }
    loop {
        let nonblocking = nix::fcntl::OFlag::O_NONBLOCK.bits();
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nonblocking)
            .open(path)
        {
            Ok(file) => {
                // Writes wait for the reader, as to any pipe.
                let flags = nix::fcntl::OFlag::empty();
                nix::fcntl::fcntl(file.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))?;
                return Ok(file);
            }
            // No reader yet.
            Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {}
            Err(e) => return Err(e),
        }
        if crate::stop::stopping() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "stopped while the FIFO had no reader",
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Writes one line per record of `batch` (from `sources`), at
/// `base_offset` of `partition` on.
fn write_batch(
    writer: &mut impl Write,
    topic: &str,
    (partition, base_offset): (u32, u64),
    batch: &[u8],
    sources: &[Option<Source>],
) -> std::io::Result<()> {
    let invalid = |e: crate::storage::record::DecodeError| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
    };
    let decoded = Batch::decode(Format::Kafka, batch, BATCH_BYTES_MAX).map_err(invalid)?;
    let first = decoded.header.base_offset;
    let mut scratch = Decompressed::default();
    let records = decoded
        .records_in(&mut scratch, RECORD_BYTES_MAX_LIMIT)
        .map_err(invalid)?;
    for (i, record) in records.enumerate() {
        let record = record.map_err(invalid)?;
        let encoded;
        let (value, value_encoding) = match std::str::from_utf8(record.value) {
            Ok(text) => (text, None),
            Err(_) => {
                encoded = base64::engine::general_purpose::STANDARD.encode(record.value);
                (encoded.as_str(), Some("base64"))
            }
        };
        let line = Line {
            topic,
            partition,
            offset: base_offset + (record.offset - first),
            value,
            value_encoding,
            source: sources.get(i).and_then(Option::as_ref).map(|s| LineSource {
                topic: &s.topic,
                partition: s.partition,
                offset: s.offset,
            }),
        };
        serde_json::to_writer(&mut *writer, &line)?;
        writer.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::record::BatchBuilder;

    #[test]
    fn each_record_is_a_line_at_its_acknowledged_offset_and_binary_is_base64() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks.jsonl");
        let report = AckReport::create(&path, "t").unwrap();
        let mut b = BatchBuilder::new();
        b.push(1, None, &[], b"one");
        b.push(2, Some(b"k"), &[], &[0xff, 0x00]);
        let source = |offset| {
            Some(Source {
                topic: "s".into(),
                partition: 7,
                offset,
            })
        };
        report.acknowledged(3, 40, b.finish(), &[None, source(9)]);
        // Flushed with the answer, before the report is finished.
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\"topic\":\"t\",\"partition\":3,\"offset\":40,\"value\":\"one\"}\n\
             {\"source\":{\"topic\":\"s\",\"partition\":7,\"offset\":9},\
             \"topic\":\"t\",\"partition\":3,\"offset\":41,\"value\":\"/wA=\",\"value_encoding\":\"base64\"}\n"
        );
        report.finish().unwrap();
    }

    #[test]
    fn a_batch_that_does_not_decode_is_an_error_at_the_end_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks.jsonl");
        let report = AckReport::create(&path, "t").unwrap();
        report.acknowledged(0, 0, b"not a batch", &[]);
        let e = report.finish().unwrap_err().to_string();
        assert!(e.contains("write the report"), "{e}");
    }
}
