//! One connection to a broker for single requests, and [`Connections`],
//! the per-broker pool of them.
//!
//! Every network call has a deadline. A client socket has a read and write
//! timeout of [`TICK`]: a call blocked on a broker that does not answer
//! wakes up that often, asks its caller's patience (a deadline passed? a
//! stop signal?) and either goes on where it was or gives up with
//! [`Error::TimedOut`] or [`Error::Stopped`]. So a tool waiting on a
//! stopped broker still ends within a second of SIGINT, and a request
//! never waits longer than its deadline.
use std::io::{self, Read, Write};

use crate::net::{is_tick, Stream};
use std::time::{Duration, Instant};

use crate::client::offset::Extent;
use crate::error::{Error, Result};
use crate::limits;
use crate::protocol::{self, ErrorCode, Reader, TopicMetadata};

/// How long to wait for a broker to accept a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a socket call blocked on a broker wakes up to look at its
/// deadline and the stop flag (the sockets' read and write timeout).
pub const TICK: Duration = Duration::from_millis(100);

/// How long a request waits for its answer unless its caller says
/// otherwise: the broker's own default request timeout.
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(limits::REQUEST_TIMEOUT_MS_DEFAULT);

/// Largest response a client reads: the longest fetch answer a broker
/// sends, whatever the budget (the other answers are far shorter).
const RESPONSE_BYTES_MAX: u32 = protocol::fetch_response_frame_bytes(u32::MAX);

/// What a blocked socket call asks each [`TICK`] it waits without
/// progress, with what it is doing ("read from"): `Err` gives it up.
pub(super) trait Patience: FnMut(&'static str) -> Result<()> {}
impl<F: FnMut(&'static str) -> Result<()>> Patience for F {}

/// Patience until `timeout` from now, or a stop signal.
pub(super) fn until(addr: &str, timeout: Duration) -> impl Patience + '_ {
    let deadline = Instant::now() + timeout;
    move |op| {
        if crate::stop::stopping() {
            return Err(Error::Stopped {
                addr: addr.to_string(),
            });
        }
        if Instant::now() >= deadline {
            return Err(Error::TimedOut {
                op,
                addr: addr.to_string(),
                waited_ms: timeout.as_millis() as u64,
            });
        }
        Ok(())
    }
}

mod connect;
pub use connect::{connect, connect_within};
pub(super) use connect::{connect_for_fetch, connect_with};

/// Reads exactly `buf.len()` bytes, waiting as long as `patience` lasts.
/// What was read before a timeout is kept: a [`TICK`] loses nothing.
pub(super) fn read_exact_with(
    mut input: impl Read,
    buf: &mut [u8],
    addr: &str,
    patience: &mut impl Patience,
) -> Result<()> {
    let mut at = 0;
    while at < buf.len() {
        match input.read(&mut buf[at..]) {
            Ok(0) => {
                return Err(Error::Network {
                    op: "read from",
                    addr: addr.to_string(),
                    source: io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the broker closed the connection",
                    ),
                })
            }
            Ok(n) => at += n,
            Err(e) if is_tick(&e) => patience("read from")?,
            Err(source) => {
                return Err(Error::Network {
                    op: "read from",
                    addr: addr.to_string(),
                    source,
                })
            }
        }
    }
    Ok(())
}

/// Writes all of `bytes`, waiting as long as `patience` lasts.
pub(super) fn write_all_with(
    mut output: impl Write,
    mut bytes: &[u8],
    addr: &str,
    patience: &mut impl Patience,
) -> Result<()> {
    while !bytes.is_empty() {
        match output.write(bytes) {
            Ok(0) => {
                return Err(Error::Network {
                    op: "send to",
                    addr: addr.to_string(),
                    source: io::ErrorKind::WriteZero.into(),
                })
            }
            Ok(n) => bytes = &bytes[n..],
            Err(e) if is_tick(&e) => patience("send to")?,
            Err(source) => {
                return Err(Error::Network {
                    op: "send to",
                    addr: addr.to_string(),
                    source,
                })
            }
        }
    }
    Ok(())
}

/// Reads one frame's body (after its length) into `buf`, waiting as long
/// as `patience` lasts.
pub(super) fn read_frame(
    input: impl Read,
    buf: &mut Vec<u8>,
    addr: &str,
    patience: &mut impl Patience,
) -> Result<()> {
    read_frame_max(input, buf, addr, RESPONSE_BYTES_MAX, patience)
}

/// Reads one frame's body (after its length) of at most `bytes_max` bytes
/// into `buf`, waiting as long as `patience` lasts.
pub(super) fn read_frame_max(
    mut input: impl Read,
    buf: &mut Vec<u8>,
    addr: &str,
    bytes_max: u32,
    patience: &mut impl Patience,
) -> Result<()> {
    let mut len = [0u8; 4];
    read_exact_with(&mut input, &mut len, addr, patience)?;
    let n = u32::from_le_bytes(len);
    if n > bytes_max && looks_like_tls(len) {
        return Err(tls_hint(addr));
    }
    if n > bytes_max || (n as usize) < protocol::RESPONSE_HEADER_BYTES {
        return Err(Error::Protocol {
            addr: addr.to_string(),
            reason: format!("a response frame of {n} bytes"),
        });
    }
    // The room grows with the bytes that arrive (doubling, from 64 KiB):
    // a peer that announces a large frame and sends little costs what it
    // sends, not what it announces. The room an earlier frame left is read
    // into as it is (zeroing it again would cost a memset a frame).
    let n = n as usize;
    buf.truncate(n);
    if !buf.is_empty() {
        read_exact_with(&mut input, &mut buf[..], addr, patience)
            .map_err(|e| tls_answer(e, len, addr))?;
    }
    while buf.len() < n {
        let start = buf.len();
        buf.resize(start + (n - start).min(start.max(64 * 1024)), 0);
        read_exact_with(&mut input, &mut buf[start..], addr, patience)
            .map_err(|e| tls_answer(e, len, addr))?;
    }
    Ok(())
}

/// A connection closed before its first answer: what a Kafka broker does
/// with klog's request (it reads klog's little-endian length as a huge
/// big-endian one). Said so, with what to use; any other error as it is.
fn unanswered(e: Error) -> Error {
    match e {
        Error::Network { op, addr, source }
            if matches!(
                source.kind(),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
            ) =>
        {
            let why = format!(
                "the broker closed the connection before answering: if {addr} is a Kafka \
                 broker, not a klog one, use kcat there (klog's tools speak only to klog \
                 brokers, whose ports take Kafka clients too)"
            );
            Error::Network {
                op,
                addr,
                source: io::Error::new(source.kind(), why),
            }
        }
        e => e,
    }
}

/// A frame cut short whose first bytes are a TLS record's header (an
/// alert or a handshake, version 3.x): a TLS broker answering a plaintext
/// client. Said so, with what to give; any other error as it is.
fn tls_answer(e: Error, first: [u8; 4], addr: &str) -> Error {
    let cut = matches!(&e, Error::Network { source, .. }
        if matches!(source.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset));
    if cut && looks_like_tls(first) {
        return tls_hint(addr);
    }
    e
}

/// Whether a frame's first bytes are a TLS record's header (an alert or a
/// handshake, version 3.x).
fn looks_like_tls(first: [u8; 4]) -> bool {
    matches!(first, [0x15 | 0x16, 0x03, 0x00..=0x04, _])
}

fn tls_hint(addr: &str) -> Error {
    Error::Network {
        op: "read from",
        addr: addr.to_string(),
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            "the broker answered in TLS: give -X security.protocol=ssl (or sasl_ssl) \
             and -X ssl.ca.location=CA.pem",
        ),
    }
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
    pub(super) stream: Stream,
    pub(super) addr: String,
    pub(super) next_id: u32,
    frame: Vec<u8>,
    pub(super) response: Vec<u8>,
    /// How long a request waits for its answer.
    timeout: Duration,
    /// The broker answered a request on this connection.
    answered: bool,
}

impl Connection {
    /// Connects to the broker at `addr`; each request waits up to
    /// [`REQUEST_TIMEOUT`] for its answer.
    pub fn connect(addr: &str) -> Result<Connection> {
        Connection::connect_timeout(addr, REQUEST_TIMEOUT)
    }

    /// Connects to the broker at `addr` within `timeout` (and
    /// [`CONNECT_TIMEOUT`]); each request then waits up to `timeout` for its
    /// answer.
    pub fn connect_timeout(addr: &str, timeout: Duration) -> Result<Connection> {
        let wait = timeout.min(CONNECT_TIMEOUT);
        Ok(Connection {
            stream: connect_with(addr, &mut until(addr, wait))?,
            addr: addr.to_string(),
            next_id: 0,
            frame: Vec::new(),
            response: Vec::new(),
            timeout,
            answered: false,
        })
    }

    /// The broker's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// How long each following request waits for its answer: e.g. what is
    /// left of a deadline shared by several requests.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Sends a request built by `encode` (given the buffer and a
    /// correlation id) and returns the response header; the body is left
    /// in `self.response` from the returned position.
    pub(super) fn call(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>, u32),
    ) -> Result<(protocol::ResponseHeader, usize)> {
        self.call_within(encode, self.timeout, RESPONSE_BYTES_MAX)
    }

    /// [`Connection::call`] waiting up to `timeout` for an answer of at
    /// most `answer_bytes_max` bytes.
    fn call_within(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>, u32),
        timeout: Duration,
        answer_bytes_max: u32,
    ) -> Result<(protocol::ResponseHeader, usize)> {
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        encode(&mut self.frame, id);
        let mut patience = until(&self.addr, timeout);
        write_all_with(&self.stream, &self.frame, &self.addr, &mut patience)?;
        let (stream, response) = (&self.stream, &mut self.response);
        read_frame_max(
            stream,
            response,
            &self.addr,
            answer_bytes_max,
            &mut patience,
        )
        .map_err(|e| if self.answered { e } else { unanswered(e) })?;
        self.answered = true;
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

    /// [`Connection::partitions`] as a consumer sees them: for a
    /// read_committed one, the partitions it reads here (`read`) end at
    /// their last stable offset (the first offset of a transaction still
    /// open), as Kafka's ListOffsets answers such a consumer. The broker
    /// is asked once, by a read_committed fetch at each one's end that
    /// waits for nothing; one it cannot answer for (a leader moving) is
    /// its error, not an end to guess.
    pub fn partitions_as(
        &mut self,
        topic: &str,
        read_committed: bool,
        read: &[u32],
    ) -> Result<Vec<Extent>> {
        let mut offsets: Vec<Extent> = self
            .partitions(topic)?
            .into_iter()
            .map(|(start, end)| Extent::of(start, end))
            .collect();
        let held = |&p: &u32| {
            let e = offsets.get(p as usize)?;
            (e.start < protocol::OFFLINE).then(|| protocol::FetchPartition {
                topic: topic.to_string(),
                partition: p,
                offset: e.end,
                bytes_max: 0,
                leader_epoch: None,
            })
        };
        let mut parts: Vec<_> = read.iter().filter_map(held).collect();
        parts.sort_unstable_by_key(|p| p.partition);
        parts.dedup_by_key(|p| p.partition);
        if !read_committed || parts.is_empty() {
            return Ok(offsets);
        }
        let want = protocol::FetchWant {
            wait_ms_max: 0,
            bytes_min: 0,
            response_bytes_max: 0,
        };
        let (header, at) =
            self.call(|out, id| protocol::committed_fetch_request(out, id, want, &parts))?;
        Self::check(&header).map_err(|e| older_broker(e, &self.addr))?;
        let mut r = Reader::new(&self.response[at..]);
        let answer = protocol::decode_fetch_response(&mut r, protocol::FETCH_VERSION_COMMITTED)
            .map_err(|e| protocol_error(&self.addr, e))?;
        let mut answered = vec![false; offsets.len()];
        for part in answer {
            if part.error != ErrorCode::None {
                return Err(Error::Broker {
                    code: part.error,
                    message: part.message,
                });
            }
            let (Some((stable, _)), Some(e)) =
                (&part.stable, offsets.get_mut(part.partition as usize))
            else {
                continue;
            };
            e.stable = e.end.min(*stable).max(e.start);
            answered[part.partition as usize] = true;
        }
        match parts.iter().find(|p| !answered[p.partition as usize]) {
            None => Ok(offsets),
            Some(p) => Err(Error::Protocol {
                addr: self.addr.clone(),
                reason: format!(
                    "a read_committed fetch without partition {} of {topic:?}",
                    p.partition
                ),
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

    /// A follower's fetch (version 3) as broker `replica_id`, each
    /// partition with the leader epoch the follower believes current:
    /// per partition its error and message, start and end offsets, the
    /// leader's epoch and its records, borrowed from this connection's
    /// buffer (reused from fetch to fetch: nothing is allocated per
    /// record). The answer may take `want.wait_ms_max` beyond the
    /// request's timeout.
    pub fn replica_fetch(
        &mut self,
        replica_id: &str,
        want: protocol::FetchWant,
        parts: &[protocol::FetchPartition],
    ) -> Result<Vec<protocol::FetchedPartition<'_>>> {
        let timeout = self.timeout + Duration::from_millis(u64::from(want.wait_ms_max));
        let answer_bytes_max = protocol::fetch_response_frame_bytes(want.response_bytes_max);
        let encode = |out: &mut Vec<u8>, id| {
            protocol::replica_fetch_request(out, id, replica_id, want, parts)
        };
        let (header, at) = self.call_within(encode, timeout, answer_bytes_max)?;
        Self::check(&header)?;
        let mut r = Reader::new(&self.response[at..]);
        protocol::decode_fetch_response(&mut r, protocol::FETCH_VERSION_REPLICA)
            .map_err(|e| protocol_error(&self.addr, e))
    }

    /// Kafka's OffsetsForLeaderEpoch: the largest leader epoch at or
    /// below `epoch` in the broker's log of `topic` \[`partition`\], and the
    /// offset where it ends there (the latest epoch ends at the log's
    /// next offset); `None` when the log has no such epoch. `current` is
    /// the partition's leader epoch as the caller believes it (`None`: not
    /// checked).
    pub fn offsets_for_leader_epoch(
        &mut self,
        topic: &str,
        partition: u32,
        current: Option<u32>,
        epoch: u32,
    ) -> Result<Option<(u32, u64)>> {
        let (header, at) = self.call(|out, id| {
            protocol::offsets_for_leader_epoch_request(out, id, topic, partition, current, epoch)
        })?;
        Self::check(&header)?;
        protocol::decode_epoch_end(&mut Reader::new(&self.response[at..]))
            .map_err(|e| protocol_error(&self.addr, e))
    }

    /// The registry that coordinates the broker's groups (see
    /// [`crate::protocol`]'s registry request): `None` when it has none.
    pub fn registry(&mut self) -> Result<Option<String>> {
        let (header, at) = self.call(protocol::registry_request)?;
        Self::check(&header)?;
        let mut r = Reader::new(&self.response[at..]);
        let location = r
            .str("registry")
            .and_then(|l| r.finish("registry response").map(|()| l))
            .map_err(|e| protocol_error(&self.addr, e))?;
        Ok(Some(location).filter(|l| !l.is_empty()))
    }

    /// A producer id and epoch for an idempotent producer (see
    /// [`crate::protocol`]'s init_producer_id request).
    pub fn init_producer_id(&mut self) -> Result<(i64, i16)> {
        let (header, at) = self.call(protocol::init_producer_id_request)?;
        Self::check(&header)?;
        self.producer_of(at)
    }

    /// The producer id and epoch of an init_producer_id answer whose body
    /// starts at `at`.
    fn producer_of(&self, at: usize) -> Result<(i64, i16)> {
        let mut r = Reader::new(&self.response[at..]);
        let fields = r.i64("producer_id").and_then(|id| {
            let epoch = r.u16("producer_epoch")?;
            r.finish("init_producer_id response")?;
            Ok((id, epoch as i16))
        });
        fields.map_err(|e| protocol_error(&self.addr, e))
    }

    /// A transactional producer's request ([`protocol::TxnRequest`]):
    /// init's producer id and epoch, `None` for the others' answers.
    pub fn txn(&mut self, request: &protocol::TxnRequest) -> Result<Option<(i64, i16)>> {
        let (header, at) = self.call(|out, id| protocol::txn_request(out, id, request))?;
        Self::check(&header)?;
        match request {
            protocol::TxnRequest::Init { .. } => self.producer_of(at).map(Some),
            _ => Ok(None),
        }
    }

    /// Asks the leader of a partition to write a transaction marker (see
    /// [`crate::protocol`]'s write_txn_marker request): `Ok` once it is
    /// durable on the partition's in-sync replicas.
    pub fn write_txn_marker(&mut self, marker: &protocol::TxnMarker) -> Result<()> {
        let (header, _) =
            self.call(|out, id| protocol::write_txn_marker_request(out, id, marker))?;
        Self::check(&header)
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

/// `e`, a broker's refusal of a read_committed fetch, said as what to do
/// when the broker is older than klog's fetch version 6.
pub(crate) fn older_broker(e: Error, addr: &str) -> Error {
    match e {
        Error::Broker {
            code: ErrorCode::UnsupportedRequest,
            message,
        } => Error::Broker {
            code: ErrorCode::UnsupportedRequest,
            message: format!(
                "{message}: the broker at {addr} is older than read_committed consumers \
                 (fetch version {}); upgrade it, or read with --isolation-level read_uncommitted",
                protocol::FETCH_VERSION_COMMITTED
            ),
        },
        other => other,
    }
}

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
    /// broker restarted since the last request); one that timed out or
    /// was stopped is dropped, and that is the answer.
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
                // Given up midway: the connection may hold half an answer.
                // A broker that did not answer in time gets no second wait.
                Err(e @ (Error::TimedOut { .. } | Error::Stopped { .. })) => {
                    self.open.remove(addr);
                    return Err(e);
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
        let mut never = |_| -> Result<()> { unreachable!("no timeout reading a slice") };
        for n in [
            0,
            protocol::RESPONSE_HEADER_BYTES as u32 - 1,
            RESPONSE_BYTES_MAX + 1,
            u32::MAX,
        ] {
            let err = read_frame(&frame(n, &[])[..], &mut buf, "b:1", &mut never).unwrap_err();
            assert!(matches!(err, Error::Protocol { .. }), "{n}: {err}");
            assert!(
                buf.capacity() < 1024,
                "{n}: nothing allocated for the claimed length"
            );
        }
        // A frame announced at the limit, of which 100 bytes come: room
        // for what came, not for what was announced.
        let announced = frame(RESPONSE_BYTES_MAX, &[7; 100]);
        let cut = read_frame(&announced[..], &mut buf, "b:1", &mut never).unwrap_err();
        assert!(matches!(cut, Error::Network { .. }), "{cut}");
        assert!(buf.capacity() <= 64 * 1024, "{}", buf.capacity());
        // One that comes whole, in several steps of growth.
        let big: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
        read_frame(
            &frame(big.len() as u32, &big)[..],
            &mut buf,
            "b:1",
            &mut never,
        )
        .unwrap();
        assert_eq!(buf, big);
        let whole = frame(6, b"abcdef");
        read_frame(&whole[..], &mut buf, "b:1", &mut never).unwrap();
        assert_eq!(buf, b"abcdef");
        // A longer one after it: read over the room the last one left, then
        // into new room.
        let longer: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
        read_frame(&frame(200_000, &longer)[..], &mut buf, "b:1", &mut never).unwrap();
        assert_eq!(buf, longer);
        let cut = read_frame(&frame(8, b"abcdef")[..], &mut buf, "b:1", &mut never).unwrap_err();
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

    /// A broker older than fetch version 6 refuses a read_committed
    /// consumer: the error says how to read from it anyway.
    #[test]
    fn an_older_broker_refusing_read_committed_is_told_what_to_do() {
        let refused = |code| Error::Broker {
            code,
            message: "Fetch version 6 is not supported (this broker speaks versions 4 to 5)".into(),
        };
        let said = older_broker(refused(ErrorCode::UnsupportedRequest), "b:1").to_string();
        assert!(said.contains("versions 4 to 5"), "{said}");
        assert!(said.contains("the broker at b:1 is older"), "{said}");
        assert!(
            said.contains("--isolation-level read_uncommitted"),
            "{said}"
        );
        let other = older_broker(refused(ErrorCode::NotLeader), "b:1").to_string();
        assert_eq!(other, refused(ErrorCode::NotLeader).to_string());
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

    /// A broker whose metadata holds topic t's partitions 0 (offsets 0 to
    /// 5) and 1 (0 to 9), and whose read_committed fetch answers with
    /// `heads` (error, last stable offset) for partition 0, in order.
    fn committed_broker(heads: Vec<(ErrorCode, u64)>) -> (String, std::thread::JoinHandle<()>) {
        let asked = std::sync::atomic::AtomicUsize::new(0);
        fake_broker(move |id| {
            let mut out = Vec::new();
            protocol::start_response(&mut out, id, ErrorCode::None, "");
            out.extend_from_slice(&1u16.to_le_bytes());
            if asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
                let t = TopicMetadata {
                    topic: "t".into(),
                    error: ErrorCode::None,
                    message: String::new(),
                    partitions: vec![(0, 5), (0, 9)],
                };
                protocol::put_topic_metadata(&mut out, &t);
            } else {
                out.truncate(out.len() - 2);
                out.extend_from_slice(&(heads.len() as u16).to_le_bytes());
                for &(error, stable) in &heads {
                    let head = protocol::FetchPartitionHead {
                        topic: "t",
                        partition: 0,
                        error,
                        message: "moving",
                        start_offset: 0,
                        end_offset: 5,
                        leader_epoch: None,
                        stable: (stable, &[]),
                        records_len: 0,
                    };
                    protocol::put_fetch_partition(
                        &mut out,
                        protocol::FETCH_VERSION_COMMITTED,
                        &head,
                    );
                }
            }
            protocol::finish_frame(&mut out);
            out
        })
    }

    /// A read_committed consumer's partitions end at their last stable
    /// offset, those it does not read here at the high watermark; an
    /// answer with an error, or without a partition asked, is no end.
    #[test]
    fn a_read_committed_end_is_the_last_stable_offset_or_an_error() {
        let ends = |heads, read_committed| {
            let (addr, server) = committed_broker(heads);
            let mut c = Connection::connect(&addr).unwrap();
            let got = c.partitions_as("t", read_committed, &[0]);
            drop(c);
            server.join().unwrap();
            got
        };
        let stable = ends(vec![(ErrorCode::None, 3)], true).unwrap();
        assert_eq!(
            stable,
            [
                Extent {
                    start: 0,
                    end: 5,
                    stable: 3
                },
                Extent::of(0, 9)
            ]
        );
        let all = ends(vec![], false).unwrap();
        assert_eq!(all, [Extent::of(0, 5), Extent::of(0, 9)]);
        let moving = ends(vec![(ErrorCode::NotLeader, 0)], true).unwrap_err();
        assert!(
            matches!(
                moving,
                Error::Broker {
                    code: ErrorCode::NotLeader,
                    ..
                }
            ),
            "{moving}"
        );
        let missing = ends(vec![], true).unwrap_err();
        assert!(
            missing.to_string().contains("without partition 0"),
            "{missing}"
        );
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
