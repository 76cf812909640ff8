//! Opening a connection to a broker: TCP (non-blocking, so that it can be
//! given up), then TLS and SASL if this process's security asks for them.

use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use super::{
    protocol_error, read_frame_max, until, write_all_with, Connection, Patience, CONNECT_TIMEOUT,
    TICK,
};
use crate::client::sasl;
use crate::error::{Error, Result};
use crate::net::Stream;
use crate::protocol::{self, Reader};

/// Opens a TCP connection to a broker, giving up after [`CONNECT_TIMEOUT`]
/// or on a stop signal.
pub fn connect(addr: &str) -> Result<Stream> {
    connect_with(addr, &mut until(addr, CONNECT_TIMEOUT))
}

/// Opens a TCP connection to a broker, giving up after `timeout` (at
/// most [`CONNECT_TIMEOUT`]) or on a stop signal.
pub fn connect_within(addr: &str, timeout: Duration) -> Result<Stream> {
    connect_with(addr, &mut until(addr, timeout.min(CONNECT_TIMEOUT)))
}

/// The receive buffer a consumer's fetch connection asks for before it
/// connects, where the kernel grants it whole (`net.core.rmem_max` at
/// least this; Linux doubles it). Kafka's consumer has the same knob,
/// `receive.buffer.bytes` (64 KiB by default). A fetch answer of a
/// megabyte then fits what its broker may send at once: with the
/// kernel's starting buffer (128 KiB, grown only as the reader keeps up)
/// broker and consumer hand it over piece by piece, each waking the other.
/// On the development machine `klog-bench consume -b` of 5M records read
/// 6.1–12.7M records/s with it against 5.6–6.4M (README, "Waiting for
/// the disk"). Where `rmem_max` is lower (Linux's default is 208 KiB) the
/// kernel would cap it and stop growing it past that: it is left alone,
/// to grow up to `net.ipv4.tcp_rmem`'s maximum. A set buffer does not
/// grow: a link whose round trip needs more than twice this does better
/// without it.
pub(in crate::client) const FETCH_RECEIVE_BUFFER_BYTES: usize = 4 << 20;

/// Opens a consumer's fetch connection to a broker, as
/// [`connect_within`] does, with a receive buffer of
/// [`FETCH_RECEIVE_BUFFER_BYTES`] where the kernel grants it whole.
pub(in crate::client) fn connect_for_fetch(addr: &str, timeout: Duration) -> Result<Stream> {
    let patience = &mut until(addr, timeout.min(CONNECT_TIMEOUT));
    connect_receiving(addr, patience, fetch_receive_buffer())
}

/// [`FETCH_RECEIVE_BUFFER_BYTES`] if `net.core.rmem_max` allows it whole
/// (read once), else `None`: the kernel's own buffer.
fn fetch_receive_buffer() -> Option<usize> {
    static GRANTED: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *GRANTED.get_or_init(|| {
        let max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (max >= FETCH_RECEIVE_BUFFER_BYTES).then_some(FETCH_RECEIVE_BUFFER_BYTES)
    })
}

/// Opens a connection to a broker as long as `patience` lasts, the way
/// this process's security says ([`crate::net::security`]): TCP, then TLS
/// and SASL if asked. The socket gets its read and write timeouts of
/// [`TICK`].
pub(in crate::client) fn connect_with(addr: &str, patience: &mut impl Patience) -> Result<Stream> {
    connect_receiving(addr, patience, None)
}

/// [`connect_with`], the socket's receive buffer set to `receive` bytes
/// before it connects (`None`: the kernel's, grown as it sees fit).
fn connect_receiving(
    addr: &str,
    patience: &mut impl Patience,
    receive: Option<usize>,
) -> Result<Stream> {
    let tcp = connect_tcp(addr, patience, receive)?;
    let Some(security) = crate::net::security::client() else {
        return Ok(Stream::Tcp(tcp));
    };
    let stream = match &security.tls {
        Some(tls) => handshake(tls, tcp, addr, patience)?,
        None => Stream::Tcp(tcp),
    };
    stream
        .set_read_timeout(Some(TICK))
        .and_then(|()| stream.set_write_timeout(Some(TICK)))
        .map_err(|source| Error::Network {
            op: "connect to",
            addr: addr.to_string(),
            source,
        })?;
    if let Some(login) = &security.sasl {
        let mut answer = Vec::new();
        let mut call = |frame: &[u8]| -> Result<Vec<u8>> {
            write_all_with(&stream, frame, addr, patience)?;
            let max = sasl::ANSWER_BYTES_MAX;
            read_frame_max(&stream, &mut answer, addr, max, patience)?;
            let mut r = Reader::new(&answer);
            let header =
                protocol::decode_response_header(&mut r).map_err(|e| protocol_error(addr, e))?;
            Connection::check(&header)?;
            Ok(answer[r.position()..].to_vec())
        };
        sasl::authenticate(addr, login, &mut call)?;
    }
    Ok(stream)
}

/// TLS over a new TCP connection to `addr`, within `patience`.
fn handshake(
    tls: &crate::net::tls::ClientTls,
    tcp: TcpStream,
    addr: &str,
    patience: &mut impl Patience,
) -> Result<Stream> {
    let host = host_of(addr);
    let mut gave_up = None;
    let mut wait = || {
        patience("finish the TLS handshake with").map_err(|e| {
            gave_up = Some(e);
            io::Error::new(io::ErrorKind::TimedOut, "gave up")
        })
    };
    match tls.connect(tcp, host, &mut wait) {
        Ok(stream) => Ok(stream),
        Err(_) if gave_up.is_some() => Err(gave_up.expect("set")),
        Err(source) => Err(Error::Network {
            op: "open TLS to",
            addr: addr.to_string(),
            source,
        }),
    }
}

/// The host of `HOST:PORT` (an IPv6 address without its brackets): the
/// name a broker's certificate must carry.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Opens a TCP connection to a broker as long as `patience` lasts.
fn connect_tcp(
    addr: &str,
    patience: &mut impl Patience,
    receive: Option<usize>,
) -> Result<TcpStream> {
    let net = |source| Error::Network {
        op: "connect to",
        addr: addr.to_string(),
        source,
    };
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for sock in addr.to_socket_addrs().map_err(net)? {
        match connect_one(sock, patience, receive)? {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                s.set_read_timeout(Some(TICK)).map_err(net)?;
                s.set_write_timeout(Some(TICK)).map_err(net)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(net(last))
}

/// One connection attempt, non-blocking so that it can be given up: the
/// outer error gives up, the inner one is the address's refusal.
fn connect_one(
    sock: SocketAddr,
    patience: &mut impl Patience,
    receive: Option<usize>,
) -> Result<io::Result<TcpStream>> {
    use nix::poll::{poll, PollFd, PollFlags};
    use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag, SockType, SockaddrStorage};
    let family = match sock {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
    let fd = match socket::socket(family, SockType::Stream, flags, None) {
        Ok(fd) => fd,
        Err(e) => return Ok(Err(e.into())),
    };
    // Before the connection (set after it, the runs measured showed no
    // gain). Best effort, as the no-delay option: a refusal costs speed.
    if let Some(bytes) = receive {
        let _ = socket::setsockopt(&fd, sockopt::RcvBuf, &bytes);
    }
    match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(sock)) {
        Ok(()) | Err(nix::errno::Errno::EINPROGRESS) => {}
        Err(e) => return Ok(Err(e.into())),
    }
    loop {
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
        match poll(&mut fds, TICK.as_millis() as u16) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => patience("connect to")?,
            Ok(_) => break,
            Err(e) => return Ok(Err(e.into())),
        }
    }
    match socket::getsockopt(&fd, sockopt::SocketError) {
        Ok(0) => {}
        Ok(code) => return Ok(Err(io::Error::from_raw_os_error(code))),
        Err(e) => return Ok(Err(e.into())),
    }
    let stream = TcpStream::from(fd);
    Ok(stream.set_nonblocking(false).map(|()| stream))
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// A consumer's fetch connection has the receive buffer it asks for
    /// where `net.core.rmem_max` grants it whole (Linux doubles it), and
    /// elsewhere the kernel's own, as any other connection.
    #[test]
    fn a_fetch_connection_has_its_receive_buffer_where_the_kernel_grants_it() {
        use nix::sys::socket::{getsockopt, sockopt::RcvBuf};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let fetch = connect_for_fetch(&addr, Duration::from_secs(5)).unwrap();
        let other = connect_within(&addr, Duration::from_secs(5)).unwrap();
        let fetch_room = getsockopt(&fetch, RcvBuf).unwrap();
        let other_room = getsockopt(&other, RcvBuf).unwrap();
        match fetch_receive_buffer() {
            Some(bytes) => {
                assert!(fetch_room >= 2 * bytes, "{fetch_room} bytes");
                assert!(other_room < fetch_room, "{other_room} against {fetch_room}");
            }
            None => {
                println!("net.core.rmem_max is under 4 MiB here: the kernel's buffer");
                assert_eq!(fetch_room, other_room, "left to the kernel");
            }
        }
    }
}
