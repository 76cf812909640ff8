//! `klog-produce`'s input: a thread reads stdin or the files in order and
//! sends their bytes over a channel, so that the producer's side can wait
//! for input with a timeout. The linger time passing without input comes
//! out of the reader as `WouldBlock` (then the partial batches are
//! written), and a stop signal as the end of the input.

use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// A `Read` over chunks that a reader thread sends; reports the linger
/// time passing without input as `WouldBlock`, and a stop signal as EOF.
#[derive(Debug)]
pub struct ChannelReader {
    rx: Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
    linger: Duration,
}

impl ChannelReader {
    /// Starts the reader thread on `files` (stdin when empty; `-` is stdin
    /// too) and returns the reading end, which waits `linger` for input.
    pub fn open(files: Vec<PathBuf>, linger: Duration) -> io::Result<ChannelReader> {
        Ok(ChannelReader {
            rx: spawn_reader(files)?,
            chunk: Vec::new(),
            at: 0,
            linger,
        })
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            let deadline = std::time::Instant::now() + self.linger;
            loop {
                if crate::stop::stopping() {
                    return Ok(0);
                }
                let wait = deadline.saturating_duration_since(std::time::Instant::now());
                if wait.is_zero() {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                match self.rx.recv_timeout(wait.min(Duration::from_millis(100))) {
                    Ok(chunk) => {
                        self.chunk = chunk?;
                        self.at = 0;
                        if self.chunk.is_empty() {
                            return Ok(0);
                        }
                        break;
                    }
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return Ok(0),
                }
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Starts a thread that reads the inputs in order and sends their bytes.
fn spawn_reader(files: Vec<PathBuf>) -> io::Result<Receiver<io::Result<Vec<u8>>>> {
    let (tx, rx) = mpsc::sync_channel::<io::Result<Vec<u8>>>(4);
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
                        Err(e) => {
                            let _ = tx.send(Err(io::Error::new(
                                e.kind(),
                                format!("{}: {e}", path.display()),
                            )));
                            return;
                        }
                    }
                };
                loop {
                    let mut chunk = vec![0u8; 256 * 1024];
                    match input.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => {
                            chunk.truncate(n);
                            if tx.send(Ok(chunk)).is_err() {
                                return;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    }
                }
            }
            let _ = tx.send(Ok(Vec::new()));
        })?;
    Ok(rx)
}
