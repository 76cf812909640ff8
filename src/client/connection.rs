//! One connection to a broker for single requests, and [`Connections`],
//! the per-broker pool of them.
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::protocol::{self, ErrorCode, Reader, TopicMetadata};

/// How long to wait for a broker to accept a connection.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest response a client reads: the longest fetch answer a broker
/// sends, whatever the budget (the other answers are far shorter).
const RESPONSE_BYTES_MAX: u32 = protocol::fetch_response_frame_bytes(u32::MAX);

/// Opens a TCP connection to a broker.
pub fn connect(addr: &str) -> Result<TcpStream> {
    let net = |source| Error::Network {
        op: "connect to",
        addr: addr.to_string(),
        source,
    };
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for sock in addr.to_socket_addrs().map_err(net)? {
        match TcpStream::connect_timeout(&sock, CONNECT_TIMEOUT) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(net(last))
}

/// Reads one frame's body (after its length) into `buf`.
pub(super) fn read_frame(input: impl Read, buf: &mut Vec<u8>, addr: &str) -> Result<()> {
    read_frame_max(input, buf, addr, RESPONSE_BYTES_MAX)
}

/// Reads one frame's body (after its length), of at most `bytes_max`
/// bytes, into `buf`.
pub(super) fn read_frame_max(
    mut input: impl Read,
    buf: &mut Vec<u8>,
    addr: &str,
    bytes_max: u32,
) -> Result<()> {
    let net = |source| Error::Network {
        op: "read from",
        addr: addr.to_string(),
        source,
    };
    let mut len = [0u8; 4];
    input.read_exact(&mut len).map_err(net)?;
    let n = u32::from_le_bytes(len);
    if n > bytes_max || (n as usize) < protocol::RESPONSE_HEADER_BYTES {
        return Err(Error::Protocol {
            addr: addr.to_string(),
            reason: format!("a response frame of {n} bytes"),
        });
    }
    buf.resize(n as usize, 0);
    input.read_exact(buf).map_err(net)
}

pub(super) fn protocol_error(addr: &str, e: protocol::ProtocolError) -> Error {
    Error::Protocol {
        addr: addr.to_string(),
        reason: e.0,
    }
}

/// A connection for one request at a time.
#[derive(Debug)]
pub struct Connection {
    pub(super) stream: TcpStream,
    addr: String,
    pub(super) next_id: u32,
    frame: Vec<u8>,
    response: Vec<u8>,
}

impl Connection {
    /// Connects to the broker at `addr`.
    pub fn connect(addr: &str) -> Result<Connection> {
        Ok(Connection {
            stream: connect(addr)?,
            addr: addr.to_string(),
            next_id: 0,
            frame: Vec::new(),
            response: Vec::new(),
        })
    }

    /// The broker's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends a request built by `encode` (given the buffer and a
    /// correlation id) and returns the response header; the body is left
    /// in `self.response` from the returned position.
    fn call(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>, u32),
    ) -> Result<(protocol::ResponseHeader, usize)> {
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        encode(&mut self.frame, id);
        (&self.stream)
            .write_all(&self.frame)
            .map_err(|source| Error::Network {
                op: "send to",
                addr: self.addr.clone(),
                source,
            })?;
        read_frame(&self.stream, &mut self.response, &self.addr)?;
        let mut r = Reader::new(&self.response);
        let header =
            protocol::decode_response_header(&mut r).map_err(|e| protocol_error(&self.addr, e))?;
        if header.correlation_id != id {
            return Err(Error::Protocol {
                addr: self.addr.clone(),
                reason: format!("response {} to request {id}", header.correlation_id),
            });
        }
        Ok((header, r.position()))
    }

    pub(super) fn check(header: &protocol::ResponseHeader) -> Result<()> {
        if header.error != ErrorCode::None {
            return Err(Error::Broker {
                code: header.error,
                message: header.message.clone(),
            });
        }
        Ok(())
    }

    /// Topics with their partitions' (start, end) offsets; all topics when
    /// `topics` is empty.
    pub fn metadata(&mut self, topics: &[&str]) -> Result<Vec<TopicMetadata>> {
        let (header, at) = self.call(|out, id| protocol::metadata_request(out, id, topics))?;
        Self::check(&header)?;
        let mut r = Reader::new(&self.response[at..]);
        protocol::decode_metadata_response(&mut r).map_err(|e| protocol_error(&self.addr, e))
    }

    /// The (start, end) offsets of every partition of `topic`, or the
    /// broker's error (`unknown_topic`).
    pub fn partitions(&mut self, topic: &str) -> Result<Vec<(u64, u64)>> {
        let mut topics = self.metadata(&[topic])?;
        match topics.pop() {
            Some(t) if t.error == ErrorCode::None => Ok(t.partitions),
            Some(t) => Err(Error::Broker {
                code: t.error,
                message: t.message,
            }),
            None => Err(Error::Protocol {
                addr: self.addr.clone(),
                reason: "metadata without the topic asked for".into(),
            }),
        }
    }

    /// Fails when metadata reported `partition` of `topic` as
    /// [`protocol::OFFLINE`] (its `start` offset): with the broker's own
    /// answer for the partition, which says why.
    pub fn check_online(&mut self, topic: &str, partition: u32, start: u64) -> Result<()> {
        if start != protocol::OFFLINE {
            return Ok(());
        }
        self.list_offsets(topic, partition, protocol::EARLIEST)?;
        Err(Error::Broker {
            code: ErrorCode::StorageError,
            message: format!("partition {partition} of {topic:?} is offline"),
        })
    }

    /// The offset for `at` ([`protocol::EARLIEST`], [`protocol::LATEST`] or
    /// a timestamp); `None` when no record is at or after the timestamp.
    pub fn list_offsets(&mut self, topic: &str, partition: u32, at: i64) -> Result<Option<u64>> {
        let (header, at_body) =
            self.call(|out, id| protocol::list_offsets_request(out, id, topic, partition, at))?;
        Self::check(&header)?;
        let offset = Reader::new(&self.response[at_body..])
            .i64("offset")
            .map_err(|e| protocol_error(&self.addr, e))?;
        Ok(u64::try_from(offset).ok())
    }

    /// Creates `topic` with `partitions` (0: the broker's default) unless
    /// it exists; returns its partition count.
    pub fn create_topic(&mut self, topic: &str, partitions: u32) -> Result<u32> {
        let (header, at) =
            self.call(|out, id| protocol::create_topic_request(out, id, topic, partitions))?;
        if header.error != ErrorCode::TopicExists {
            Self::check(&header)?;
        }
        Reader::new(&self.response[at..])
            .u32("partitions")
            .map_err(|e| protocol_error(&self.addr, e))
    }
}

/// Every partition's (start, end) offsets, as a broker reports them.
pub type PartitionOffsets = Vec<(u64, u64)>;

/// Connections to several brokers, by address: each opened on first use,
/// kept for the next request, and opened again once when it broke.
#[derive(Debug, Default)]
pub struct Connections {
    open: std::collections::HashMap<String, Connection>,
}

impl Connections {
    /// No connection yet.
    pub fn new() -> Connections {
        Connections::default()
    }

    /// Runs `request` on the connection to `addr`. A connection that
    /// breaks is dropped and `request` tried once more on a new one (a
    /// broker restarted since the last request).
    pub fn with<T>(
        &mut self,
        addr: &str,
        mut request: impl FnMut(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        for attempt in 0..2 {
            if !self.open.contains_key(addr) {
                self.open
                    .insert(addr.to_string(), Connection::connect(addr)?);
            }
            let conn = self.open.get_mut(addr).expect("just opened");
            match request(conn) {
                Err(e @ (Error::Network { .. } | Error::Protocol { .. })) => {
                    self.open.remove(addr);
                    if attempt == 1 {
                        return Err(e);
                    }
                }
                other => return other,
            }
        }
        unreachable!("the second attempt returns")
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    fn frame(body_len: u32, body: &[u8]) -> Vec<u8> {
        let mut bytes = body_len.to_le_bytes().to_vec();
        bytes.extend_from_slice(body);
        bytes
    }

    #[test]
    fn read_frame_refuses_lengths_out_of_bounds_before_reading_them() {
        let mut buf = Vec::new();
        for n in [
            0,
            protocol::RESPONSE_HEADER_BYTES as u32 - 1,
            RESPONSE_BYTES_MAX + 1,
            u32::MAX,
        ] {
            let err = read_frame(&frame(n, &[])[..], &mut buf, "b:1").unwrap_err();
            assert!(matches!(err, Error::Protocol { .. }), "{n}: {err}");
            assert!(
                buf.capacity() < 1024,
                "{n}: nothing allocated for the claimed length"
            );
        }
        let whole = frame(6, b"abcdef");
        read_frame(&whole[..], &mut buf, "b:1").unwrap();
        assert_eq!(buf, b"abcdef");
        let cut = read_frame(&frame(8, b"abcdef")[..], &mut buf, "b:1").unwrap_err();
        assert!(
            matches!(
                cut,
                Error::Network {
                    op: "read from",
                    ..
                }
            ),
            "{cut}"
        );
    }

    /// A broker that answers each request with `answer(correlation_id)`.
    fn fake_broker(
        answer: impl Fn(u32) -> Vec<u8> + Send + 'static,
    ) -> (String, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut len = [0u8; 4];
            while stream.read_exact(&mut len).is_ok() {
                let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
                stream.read_exact(&mut body).unwrap();
                let id = u32::from_le_bytes(body[4..8].try_into().unwrap());
                stream.write_all(&answer(id)).unwrap();
            }
        });
        (addr, server)
    }

    fn response(id: u32, error: ErrorCode, message: &str) -> Vec<u8> {
        let mut out = Vec::new();
        protocol::start_response(&mut out, id, error, message);
        out.extend_from_slice(&0u16.to_le_bytes()); // no topics
        protocol::finish_frame(&mut out);
        out
    }

    #[test]
    fn an_answer_to_another_request_is_a_protocol_error() {
        let (addr, server) = fake_broker(|id| response(id + 1, ErrorCode::None, ""));
        let mut c = Connection::connect(&addr).unwrap();
        let err = c.metadata(&[]).unwrap_err();
        assert!(
            matches!(&err, Error::Protocol { reason, .. } if reason == "response 2 to request 1"),
            "{err}"
        );
        drop(c);
        server.join().unwrap();
    }

    #[test]
    fn a_broker_error_code_becomes_an_error_with_its_message() {
        let (addr, server) = fake_broker(|id| response(id, ErrorCode::UnknownTopic, "no topic t"));
        let mut c = Connection::connect(&addr).unwrap();
        let err = c.metadata(&["t"]).unwrap_err();
        assert!(
            matches!(&err, Error::Broker { code: ErrorCode::UnknownTopic, message } if message == "no topic t"),
            "{err}"
        );
        drop(c);
        server.join().unwrap();
    }

    #[test]
    fn a_good_answer_is_read() {
        let (addr, server) = fake_broker(|id| response(id, ErrorCode::None, ""));
        let mut c = Connection::connect(&addr).unwrap();
        assert!(c.metadata(&[]).unwrap().is_empty());
        assert!(
            c.metadata(&[]).unwrap().is_empty(),
            "a second request on the same connection"
        );
        drop(c);
        server.join().unwrap();
    }
}
