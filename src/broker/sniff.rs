//! Which protocol a connection speaks, from its first request's first
//! eight bytes, looked at and left in place for the server that reads it.
//!
//! Both listeners (`--listen`, and `--kafka-listen` when given) serve both
//! protocols, so that `kcat -b 127.0.0.1` reaches a broker started with
//! its defaults, and a klog tool pointed at the Kafka port works too. The
//! two requests' headers differ in their byte order:
//!
//! | bytes | klog's request ([`crate::protocol`]) | Kafka's request |
//! |------:|---------------------------|-----------------|
//! | 0..4  | `length u32`, little-endian | `length i32`, big-endian |
//! | 4..6  | `api_key u16`, little-endian | `api_key i16`, big-endian |
//! | 6..8  | `api_version u16`, little-endian: 1 or more | `api_version i16`, big-endian: below 256 |
//!
//! So byte 6 is a klog request's version (never 0) and the high byte of a
//! Kafka request's version (always 0, as no API has 256 versions): no
//! header is both. A listener serves its own protocol (klog's on
//! `--listen`, Kafka's on `--kafka-listen`) unless the header is plausibly
//! the other's ([`protocol_of`]), so that garbage still gets the answer it
//! got before. A TLS connection is looked at after its handshake, a SASL
//! one before its exchange (each protocol has its own).

use std::io;
use std::time::{Duration, Instant};

use nix::sys::socket::{recv, MsgFlags};
use std::os::fd::AsRawFd;

use crate::net::Stream;

/// Bytes looked at.
pub(super) const SNIFF_BYTES: usize = 8;

/// A connection's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Protocol {
    /// klog's own.
    Klog,
    /// Kafka's.
    Kafka,
}

/// The protocol of a request that starts with `first` (its first
/// [`SNIFF_BYTES`] bytes), on a listener whose own protocol is `home`:
/// the other one only when the header is plausibly the other's (a byte
/// order that gives a length of at least a header, and a key and version
/// in range), so that garbage gets the home protocol's answer.
pub(super) fn protocol_of(first: &[u8; SNIFF_BYTES], home: Protocol) -> Protocol {
    let be = |at: usize| u16::from_be_bytes([first[at], first[at + 1]]);
    let le = |at: usize| u16::from_le_bytes([first[at], first[at + 1]]);
    let kafka = i32::from_be_bytes(first[0..4].try_into().expect("4")) >= 8
        && be(4) <= 1000
        && be(6) <= 255;
    let klog = u32::from_le_bytes(first[0..4].try_into().expect("4")) >= 8
        && le(4) <= 255
        && (1..=255).contains(&le(6));
    match home {
        Protocol::Klog if kafka => Protocol::Kafka,
        Protocol::Kafka if klog => Protocol::Klog,
        home => home,
    }
}

/// Waits up to `idle` for a first byte of `stream`, then up to `request`
/// for the rest of the first [`SNIFF_BYTES`] (as a half-sent request is
/// given the request timeout), leaving them to be read; `Ok(None)` when
/// the peer closed first.
pub(super) fn first_bytes(
    stream: &Stream,
    idle: Duration,
    request: Duration,
) -> io::Result<Option<[u8; SNIFF_BYTES]>> {
    let mut first = [0u8; SNIFF_BYTES];
    if peek(stream, &mut first[..1], idle)? == 0 {
        return Ok(None);
    }
    let n = peek(stream, &mut first, request)?;
    stream.set_read_timeout(None)?;
    match n {
        0 => Ok(None),
        SNIFF_BYTES => Ok(Some(first)),
        n => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "closing the connection: a frame was not completed within the request timeout of {} ms ({n} bytes of its header came)",
                request.as_millis()
            ),
        )),
    }
}

/// Peeks at up to `buf.len()` bytes, waiting up to `wait` for all of them
/// (fewer at the deadline; 0 at the peer's end): a timeout with none is an
/// error.
fn peek(stream: &Stream, buf: &mut [u8], wait: Duration) -> io::Result<usize> {
    let deadline = Instant::now() + wait;
    let mut seen = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            if seen > 0 {
                return Ok(seen);
            }
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "closing the connection: idle for {} ms (--idle-timeout)",
                    wait.as_millis()
                ),
            ));
        }
        stream.set_read_timeout(Some(left))?;
        // MSG_WAITALL: the peek blocks until all are there (or the
        // timeout), on TCP and on a TLS pump's socket pair alike.
        let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_WAITALL;
        match recv(stream.as_raw_fd(), buf, flags) {
            Ok(0) => return Ok(0),
            Ok(n) if n == buf.len() => return Ok(n),
            // Fewer, at the timeout (or a signal): the loop ends at the
            // deadline.
            Ok(n) => {
                seen = n;
                std::thread::sleep(Duration::from_millis(10).min(left));
            }
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol;

    #[test]
    fn a_klog_request_and_a_kafka_request_are_told_apart() {
        let mut klog = Vec::new();
        protocol::produce_request(&mut klog, 1, 1, 1000, "t", 0, b"");
        let mut kafka = Vec::new();
        // ApiVersions v3, as librdkafka opens: length, key 18, version 3.
        kafka.extend_from_slice(&20i32.to_be_bytes());
        kafka.extend_from_slice(&18i16.to_be_bytes());
        kafka.extend_from_slice(&3i16.to_be_bytes());
        let first = |b: &[u8]| -> [u8; SNIFF_BYTES] { b[..SNIFF_BYTES].try_into().unwrap() };
        for home in [Protocol::Klog, Protocol::Kafka] {
            assert_eq!(protocol_of(&first(&klog), home), Protocol::Klog);
            assert_eq!(protocol_of(&first(&kafka), home), Protocol::Kafka);
        }
        // Garbage is the home protocol's: HTTP, a zero length.
        let http: &[u8; SNIFF_BYTES] = b"GET / HT";
        assert_eq!(protocol_of(http, Protocol::Klog), Protocol::Klog);
        assert_eq!(protocol_of(http, Protocol::Kafka), Protocol::Kafka);
        let zeros = [0u8; SNIFF_BYTES];
        assert_eq!(protocol_of(&zeros, Protocol::Klog), Protocol::Klog);
        assert_eq!(protocol_of(&zeros, Protocol::Kafka), Protocol::Kafka);
        // Every klog request (its version is never 0), every Kafka one
        // (its version is below 256), whatever the key and the length.
        for key in 0..=255u16 {
            for version in 1..=u16::from(u8::MAX) {
                let mut h = [0u8; SNIFF_BYTES];
                h[0..4].copy_from_slice(&0x1234_5600u32.to_le_bytes());
                h[4..6].copy_from_slice(&key.to_le_bytes());
                h[6..8].copy_from_slice(&version.to_le_bytes());
                assert_eq!(
                    protocol_of(&h, Protocol::Kafka),
                    Protocol::Klog,
                    "klog {key} v{version}"
                );
            }
            for version in 0..256i16 {
                let mut h = [0u8; SNIFF_BYTES];
                h[0..4].copy_from_slice(&0x0000_0100i32.to_be_bytes());
                h[4..6].copy_from_slice(&(key as i16).to_be_bytes());
                h[6..8].copy_from_slice(&version.to_be_bytes());
                assert_eq!(
                    protocol_of(&h, Protocol::Klog),
                    Protocol::Kafka,
                    "kafka {key} v{version}"
                );
            }
        }
    }

    #[test]
    fn the_first_bytes_are_left_for_the_server_and_a_silent_peer_times_out() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let server = Stream::Tcp(listener.accept().unwrap().0);
        let wait = Duration::from_secs(5);
        let silent = first_bytes(&server, Duration::from_millis(50), wait);
        assert_eq!(silent.unwrap_err().kind(), io::ErrorKind::TimedOut);
        client.write_all(b"\x01\x02\x03").unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            client.write_all(b"\x04\x05\x06\x07\x08\x09").unwrap();
            client
        });
        let first = first_bytes(&server, wait, wait).unwrap().unwrap();
        assert_eq!(first, [1, 2, 3, 4, 5, 6, 7, 8]);
        let mut client = writer.join().unwrap();
        let mut all = [0u8; 9];
        (&server).read_exact(&mut all).unwrap();
        assert_eq!(all, [1, 2, 3, 4, 5, 6, 7, 8, 9], "nothing was taken");
        // Part of a header, then silence: the request timeout.
        client.write_all(b"\x01\x02").unwrap();
        let short = Duration::from_millis(100);
        let half = first_bytes(&server, wait, short).unwrap_err();
        assert!(
            half.to_string().contains("(2 bytes of its header came)"),
            "{half}"
        );
        (&server).read_exact(&mut all[..2]).unwrap();
        drop(client);
        assert!(first_bytes(&server, wait, wait).unwrap().is_none());
    }
}
