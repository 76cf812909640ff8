//! What klog's connections run over: a TCP socket, or, for a TLS
//! connection, one end of a socket pair whose other end a pump thread
//! ([`tls`]) carries to and from the encrypted TCP socket. Everything
//! above ([`Stream`]) reads, writes and `sendfile`s the same way either
//! way, so that the broker's and the clients' code has one path.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub mod sasl;
pub mod security;
pub mod tls;

/// A connection's byte stream.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Tcp(TcpStream),
    /// The plaintext end of a TLS connection's pump, and the TLS error
    /// that ended the pump, if one did.
    Tls(UnixStream, Arc<OnceLock<String>>),
}

/// Runs `$body` with `$s` bound to whichever socket the stream is.
macro_rules! either {
    ($stream:expr, $s:ident => $body:expr) => {
        match $stream {
            Stream::Tcp($s) => $body,
            Stream::Tls($s, _) => $body,
        }
    };
}

impl Stream {
    /// A second handle on the same connection.
    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Tls(s, failure) => Stream::Tls(s.try_clone()?, Arc::clone(failure)),
        })
    }

    /// Shuts down reading, writing or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        either!(self, s => s.shutdown(how))
    }

    /// How long a read blocks before it fails with a timeout.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        either!(self, s => s.set_read_timeout(timeout))
    }

    /// How long a write blocks before it fails with a timeout.
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        either!(self, s => s.set_write_timeout(timeout))
    }

    /// Whether reads and writes block.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        either!(self, s => s.set_nonblocking(on))
    }

    /// TCP_NODELAY on a TCP socket (a TLS pump sets it on its own).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nodelay(on),
            Stream::Tls(..) => Ok(()),
        }
    }

    /// Whether the connection is encrypted.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(..))
    }
}

/// Whether an I/O error is a socket timeout or an interruption: a tick
/// of a blocked call without progress, not a failure.
pub(crate) fn is_tick(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Stream {
        Stream::Tcp(s)
    }
}

/// What a TLS stream's read or write gave, but the pump's TLS error in
/// place of the end of the stream or a broken pipe it caused: the reason
/// the connection ended ("TLS: received fatal alert: CertificateRequired").
fn or_failure<T>(done: io::Result<T>, ended: bool, failure: &OnceLock<String>) -> io::Result<T> {
    let ended = match &done {
        Ok(_) => ended,
        Err(e) => !is_tick(e),
    };
    match failure.get() {
        Some(why) if ended => Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            why.clone(),
        )),
        _ => done,
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match *self {
            Stream::Tcp(s) => (&*s).read(buf),
            Stream::Tls(s, failure) => {
                let done = (&*s).read(buf);
                let eof = !buf.is_empty() && matches!(done, Ok(0));
                or_failure(done, eof, failure)
            }
        }
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match *self {
            Stream::Tcp(s) => (&*s).write(buf),
            Stream::Tls(s, failure) => or_failure((&*s).write(buf), false, failure),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match *self {
            Stream::Tcp(s) => (&*s).write_vectored(bufs),
            Stream::Tls(s, failure) => or_failure((&*s).write_vectored(bufs), false, failure),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        either!(self, s => s.as_fd())
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        either!(self, s => s.as_raw_fd())
    }
}
