//! `klog-produce`'s input: a thread reads stdin or the files in order and
//! sends their bytes over a channel, each chunk with the time it was read,
//! so that the producer's side can wait for input with a deadline and
//! stamp each record with the time its bytes arrived. The deadline of the
//! oldest partial batch passing comes out of the reader as `WouldBlock`
//! (then the partial batches are written), whether or not input keeps
//! coming, and a stop signal as the end of the input.

use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How often a wait for input looks at the stop flag.
const TICK: Duration = Duration::from_millis(100);

/// A chunk of input and when it was read (ms since the epoch).
type Chunk = io::Result<(i64, Vec<u8>)>;

/// A `Read` over chunks that a reader thread sends; reports a deadline
/// passing as `WouldBlock` (checked at every read, so that a steady
/// trickle cannot hold it back), and a stop signal as EOF.
#[derive(Debug)]
pub struct ChannelReader {
    rx: Receiver<Chunk>,
    chunk: Vec<u8>,
    at: usize,
    /// When the chunk being handed out was read.
    chunk_ms: i64,
    due: Option<Instant>,
}

impl ChannelReader {
    /// Starts the reader thread on `files` (stdin when empty; `-` is stdin
    /// too) and returns the reading end, which waits for input with no
    /// deadline until [`ChannelReader::set_due`] gives one.
    /// A file that does not end with `delimiter` gets one, so that its
    /// last record never runs into the next file's first.
    pub fn open(files: Vec<PathBuf>, delimiter: Vec<u8>) -> io::Result<ChannelReader> {
        Ok(ChannelReader {
            rx: spawn_reader(files, delimiter)?,
            chunk: Vec::new(),
            at: 0,
            chunk_ms: crate::clock::now_ms(),
            due: None,
        })
    }

    /// When the bytes last handed out were read, in ms since the epoch:
    /// the time of every record they end.
    pub fn read_at_ms(&self) -> i64 {
        self.chunk_ms
    }

    /// Reads report `WouldBlock` once `due` has passed (until it is
    /// changed); `None`: wait for input as long as it takes.
    pub fn set_due(&mut self, due: Option<Instant>) {
        self.due = due;
    }

    /// How long to wait for the next chunk before looking again, or
    /// `WouldBlock` when the deadline has passed.
    fn wait(&self) -> io::Result<Duration> {
        let Some(due) = self.due else {
            return Ok(TICK);
        };
        let left = due.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(left.min(TICK))
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.wait()?;
        while self.at == self.chunk.len() {
            if crate::stop::stopping() {
                return Ok(0);
            }
            match self.rx.recv_timeout(self.wait()?) {
                Ok(chunk) => {
                    (self.chunk_ms, self.chunk) = chunk?;
                    self.at = 0;
                    if self.chunk.is_empty() {
                        return Ok(0);
                    }
                }
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Starts a thread that reads the inputs in order and sends their bytes,
/// each chunk stamped with the time its read returned.
fn spawn_reader(files: Vec<PathBuf>, delimiter: Vec<u8>) -> io::Result<Receiver<Chunk>> {
    let (tx, rx) = mpsc::sync_channel::<Chunk>(4);
    std::thread::Builder::new()
        .name("input".into())
        .spawn(move || {
            let inputs = if files.is_empty() {
                vec![PathBuf::from("-")]
            } else {
                files
            };
            for path in inputs {
                let mut input: Box<dyn Read> = if path.as_os_str() == "-" {
                    Box::new(io::stdin())
                } else {
                    match std::fs::File::open(&path) {
                        Ok(f) => Box::new(f),
                        // Said, and the next input is read.
                        Err(e) => {
                            let why = format!("{}: cannot read: {e}", path.display());
                            if tx.send(Err(io::Error::new(e.kind(), why))).is_err() {
                                return;
                            }
                            continue;
                        }
                    }
                };
                // The last bytes read, to see whether the input ended with
                // the delimiter.
                let mut tail: Vec<u8> = delimiter.clone();
                loop {
                    let mut chunk = vec![0u8; 256 * 1024];
                    match input.read(&mut chunk) {
                        Ok(0) => {
                            if !tail.ends_with(&delimiter)
                                && tx
                                    .send(Ok((crate::clock::now_ms(), delimiter.clone())))
                                    .is_err()
                            {
                                return;
                            }
                            break;
                        }
                        Ok(n) => {
                            chunk.truncate(n);
                            tail.extend_from_slice(&chunk[n.saturating_sub(delimiter.len())..]);
                            tail.drain(..tail.len().saturating_sub(delimiter.len()));
                            if tx.send(Ok((crate::clock::now_ms(), chunk))).is_err() {
                                return;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let why = format!("{}: cannot read: {e}", path.display());
                            if tx.send(Err(io::Error::new(e.kind(), why))).is_err() {
                                return;
                            }
                            break;
                        }
                    }
                }
            }
            let _ = tx.send(Ok((crate::clock::now_ms(), Vec::new())));
        })?;
    Ok(rx)
}

/// Records as `klog-produce` takes them: split out of a stream at a
/// delimiter, or one per file. Like [`ChannelReader`], a source reports
/// the deadline of the oldest partial batch passing as `WouldBlock`, and
/// a stop signal as the end of its records.
pub trait Records {
    /// The next record, or `None` at the end. `InvalidData`: this record
    /// is refused (too long), and the next call goes on after it.
    fn next_record(&mut self) -> io::Result<Option<&[u8]>>;
    /// The record last returned or refused, as messages name it (`line
    /// 7`, `record 7`, a file's path).
    fn label(&self) -> String;
    /// When the record last returned was read, in ms since the epoch.
    fn read_at_ms(&self) -> i64;
    /// Reads report `WouldBlock` once `due` has passed.
    fn set_due(&mut self, due: Option<Instant>);
}

/// A file read whole, or why it could not be: with its path.
type FileRecord = (PathBuf, io::Result<(i64, Vec<u8>)>);

/// One record per file, as kcat sends file arguments: a thread reads the
/// files in order, each whole (`-` is the whole of stdin), and hands them
/// over one at a time. A file longer than the record limit is refused
/// without being held (at most the limit and a byte is read); an empty
/// file is skipped, as kcat skips it, and said.
#[derive(Debug)]
pub struct FileRecords {
    rx: Receiver<FileRecord>,
    path: PathBuf,
    record: Vec<u8>,
    read_ms: i64,
    due: Option<Instant>,
}

impl FileRecords {
    /// Starts reading `files`; `quiet` silences the note on a skipped
    /// empty file.
    pub fn open(files: Vec<PathBuf>, record_bytes_max: usize, quiet: bool) -> io::Result<Self> {
        // One file waits in the channel while the producer sends the last:
        // at most three records' bytes are held.
        let (tx, rx) = mpsc::sync_channel::<FileRecord>(1);
        std::thread::Builder::new()
            .name("input".into())
            .spawn(move || {
                for path in files {
                    let read = read_whole(&path, record_bytes_max);
                    if matches!(&read, Ok((_, bytes)) if bytes.is_empty()) {
                        if !quiet {
                            crate::diag::line(format_args!("% {}: empty, skipped", path.display()));
                        }
                        continue;
                    }
                    if tx.send((path, read)).is_err() {
                        return;
                    }
                }
            })?;
        Ok(FileRecords {
            rx,
            path: PathBuf::new(),
            record: Vec::new(),
            read_ms: crate::clock::now_ms(),
            due: None,
        })
    }
}

/// Reads a whole file (`-`: stdin), refusing one longer than `bytes_max`
/// after reading one byte more than it.
fn read_whole(path: &std::path::Path, bytes_max: usize) -> io::Result<(i64, Vec<u8>)> {
    let cannot =
        |e: io::Error| io::Error::new(e.kind(), format!("{}: cannot read: {e}", path.display()));
    let input: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(io::stdin())
    } else {
        Box::new(std::fs::File::open(path).map_err(cannot)?)
    };
    let mut bytes = Vec::new();
    input
        .take(bytes_max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() > bytes_max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("longer than {bytes_max} bytes (--max-record-bytes)"),
        ));
    }
    Ok((crate::clock::now_ms(), bytes))
}

impl Records for FileRecords {
    fn next_record(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            if crate::stop::stopping() {
                return Ok(None);
            }
            let wait = match self.due {
                None => TICK,
                Some(due) => {
                    let left = due.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::ErrorKind::WouldBlock.into());
                    }
                    left.min(TICK)
                }
            };
            match self.rx.recv_timeout(wait) {
                Ok((path, read)) => {
                    self.path = path;
                    (self.read_ms, self.record) = read?;
                    return Ok(Some(&self.record));
                }
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            }
        }
    }

    fn label(&self) -> String {
        self.path.display().to_string()
    }

    fn read_at_ms(&self) -> i64 {
        self.read_ms
    }

    fn set_due(&mut self, due: Option<Instant>) {
        self.due = due;
    }
}
