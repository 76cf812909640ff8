//! Clients of the pull protocol ([`crate::protocol`]): a connection for
//! single requests, a [`Producer`] and a [`Consumer`].
//!
//! The producer batches records per partition (by count and bytes; the
//! caller decides when a partial batch has lingered long enough), keeps up
//! to `in_flight_max` produce requests on the wire at once, and counts
//! each record as delivered only when the broker acknowledged it (with
//! `acks=0`, when it was sent). A record that could not be delivered is
//! counted as failed and its error kept: nothing is dropped silently.
//!
//! The consumer fetches ahead: a thread keeps one fetch in flight for all
//! the partitions it reads and queues up to `prefetch` responses while the
//! caller handles earlier ones. Every record's CRC is checked before it is
//! handed out, and records before the wanted offset (a fetch starts at a
//! batch boundary) are skipped.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::limits;
use crate::produce::{BatchOptions, ParsedRecord};
use crate::protocol::{self, ErrorCode, FetchPartition, Reader, TopicMetadata};
use crate::record::{Batch, BatchBuilder, BatchHeader, Record, BATCH_HEADER_BYTES};

/// How long to wait for a broker to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest response a client reads: a fetch's budget plus headers.
const RESPONSE_BYTES_MAX: u32 = limits::BATCH_BYTES_MAX + 64 * 1024 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

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
fn read_frame(mut input: impl Read, buf: &mut Vec<u8>, addr: &str) -> Result<()> {
    let net = |source| Error::Network {
        op: "read from",
        addr: addr.to_string(),
        source,
    };
    let mut len = [0u8; 4];
    input.read_exact(&mut len).map_err(net)?;
    let n = u32::from_le_bytes(len);
    if n > RESPONSE_BYTES_MAX || (n as usize) < protocol::RESPONSE_HEADER_BYTES {
        return Err(Error::Protocol {
            addr: addr.to_string(),
            reason: format!("a response frame of {n} bytes"),
        });
    }
    buf.resize(n as usize, 0);
    input.read_exact(buf).map_err(net)
}

fn protocol_error(addr: &str, e: protocol::ProtocolError) -> Error {
    Error::Protocol {
        addr: addr.to_string(),
        reason: e.0,
    }
}

/// A connection for one request at a time.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    addr: String,
    next_id: u32,
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
    fn call(&mut self, encode: impl FnOnce(&mut Vec<u8>, u32)) -> Result<(protocol::ResponseHeader, usize)> {
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        encode(&mut self.frame, id);
        (&self.stream).write_all(&self.frame).map_err(|source| Error::Network {
            op: "send to",
            addr: self.addr.clone(),
            source,
        })?;
        read_frame(&self.stream, &mut self.response, &self.addr)?;
        let mut r = Reader::new(&self.response);
        let header = protocol::decode_response_header(&mut r).map_err(|e| protocol_error(&self.addr, e))?;
        if header.correlation_id != id {
            return Err(Error::Protocol {
                addr: self.addr.clone(),
                reason: format!("response {} to request {id}", header.correlation_id),
            });
        }
        Ok((header, r.position()))
    }

    fn check(header: &protocol::ResponseHeader) -> Result<()> {
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
        let (header, at_body) = self.call(|out, id| protocol::list_offsets_request(out, id, topic, partition, at))?;
        Self::check(&header)?;
        let offset = Reader::new(&self.response[at_body..])
            .i64("offset")
            .map_err(|e| protocol_error(&self.addr, e))?;
        Ok(u64::try_from(offset).ok())
    }

    /// Creates `topic` with `partitions` (0: the broker's default) unless
    /// it exists; returns its partition count.
    pub fn create_topic(&mut self, topic: &str, partitions: u32) -> Result<u32> {
        let (header, at) = self.call(|out, id| protocol::create_topic_request(out, id, topic, partitions))?;
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

/// The address of the broker of each partition of `topic`, from the
/// registry's placement. With `create`, a topic nobody placed yet is
/// created (and placed) through a live broker first.
pub fn route(registry: &crate::registry::Registry, topic: &str, create: bool) -> Result<Vec<String>> {
    let brokers = registry.brokers()?;
    if brokers.is_empty() {
        return Err(Error::Config(format!(
            "no broker is registered in {}",
            registry.dir().display()
        )));
    }
    let placement = match registry.placement(topic)? {
        Some(p) => p,
        None if create => {
            Connection::connect(&brokers[0].addr())?.create_topic(topic, 0)?;
            registry
                .placement(topic)?
                .ok_or_else(|| Error::Config(format!("the broker created {topic:?} without placing it")))?
        }
        None => {
            return Err(Error::Broker {
                code: ErrorCode::UnknownTopic,
                message: format!("topic {topic:?} is not placed in {}", registry.dir().display()),
            })
        }
    };
    placement
        .brokers
        .iter()
        .enumerate()
        .map(|(p, id)| {
            brokers.iter().find(|b| b.id == *id).map(|b| b.addr()).ok_or_else(|| {
                Error::Config(format!(
                    "partition {p} of {topic:?} is placed on broker {id}, which is not running"
                ))
            })
        })
        .collect()
}

/// Sends records to a topic whose partitions several brokers hold: one
/// [`Producer`] per broker, each record routed to its partition's broker.
#[derive(Debug)]
pub struct ClusterProducer {
    producers: Vec<Producer>,
    /// Index into `producers` of each partition's broker.
    route: Vec<usize>,
}

impl ClusterProducer {
    /// Connects to the broker of every partition of `topic`, as the
    /// registry places them (creating the topic if nobody has).
    pub fn connect(
        registry: &crate::registry::Registry,
        topic: &str,
        config: ProducerConfig,
    ) -> Result<ClusterProducer> {
        let addrs = route(registry, topic, true)?;
        let mut distinct: Vec<String> = addrs.clone();
        distinct.sort();
        distinct.dedup();
        let mut producers = Vec::new();
        for addr in &distinct {
            producers.push(Producer::connect(addr, topic, config)?);
        }
        let route = addrs
            .iter()
            .map(|a| distinct.iter().position(|d| d == a).expect("listed"))
            .collect();
        Ok(ClusterProducer { producers, route })
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.route.len() as u32
    }

    /// Adds a record to its partition's batch on that partition's broker.
    pub fn send(&mut self, partition: u32, record: &ParsedRecord, headers: &[(&[u8], &[u8])], now: i64) -> Result<()> {
        let Some(&i) = self.route.get(partition as usize) else {
            return Err(Error::Config(format!("partition {partition} does not exist")));
        };
        self.producers[i].send(partition, record, headers, now)
    }

    /// Sends every partial batch.
    pub fn flush_pending(&mut self) -> Result<()> {
        self.producers.iter_mut().try_for_each(Producer::flush_pending)
    }

    /// Closes every broker's producer: the summed counts and the first error.
    pub fn close(self) -> (ProducerSummary, Result<()>) {
        let mut total = ProducerSummary::default();
        let mut result = Ok(());
        for p in self.producers {
            let (s, r) = p.close();
            total.delivered += s.delivered;
            total.failed += s.failed;
            total.latency.merge(&s.latency);
            result = result.and(r);
        }
        (total, result)
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
    /// broker restarted since the last request).
    pub fn with<T>(&mut self, addr: &str, mut request: impl FnMut(&mut Connection) -> Result<T>) -> Result<T> {
        for attempt in 0..2 {
            if !self.open.contains_key(addr) {
                self.open.insert(addr.to_string(), Connection::connect(addr)?);
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

/// How a producer sends.
#[derive(Debug, Clone, Copy)]
pub struct ProducerConfig {
    /// 0, 1 or -1 (all).
    pub acks: i8,
    /// How long the broker may wait for durability (acks=all).
    pub timeout_ms: u32,
    /// Batching by count and bytes.
    pub batch: BatchOptions,
    /// Produce requests on the wire at once.
    pub in_flight_max: usize,
    /// Largest record sent.
    pub record_bytes_max: u32,
}

impl Default for ProducerConfig {
    fn default() -> ProducerConfig {
        ProducerConfig {
            acks: protocol::ACKS_ALL,
            timeout_ms: 30_000,
            batch: BatchOptions {
                records_max: 1000,
                bytes_max: 1 << 20,
            },
            in_flight_max: 256,
            record_bytes_max: limits::RECORD_BYTES_MAX_DEFAULT,
        }
    }
}

/// What the producer's response reader shares with it.
#[derive(Debug, Default)]
struct Acks {
    /// Requests awaiting a response: (correlation id, records, sent at).
    waiting: VecDeque<(u32, u64, std::time::Instant)>,
    /// Time from sending a request to its acknowledgement, per record.
    latency: crate::bench::Histogram,
    delivered: u64,
    failed: u64,
    /// The first error, reported by `send` or `close`.
    error: Option<Error>,
    /// The connection is gone: nothing more will be acknowledged.
    broken: bool,
    /// The producer waits for room in the window: wake it on an answer
    /// (and only then: a wake-up is a syscall).
    sender_waits: bool,
}

#[derive(Debug, Default)]
struct AckState {
    acks: Mutex<Acks>,
    changed: Condvar,
}

/// Sends records to the partitions of one topic on a broker.
#[derive(Debug)]
pub struct Producer {
    stream: TcpStream,
    addr: String,
    topic: String,
    config: ProducerConfig,
    builders: Vec<BatchBuilder>,
    /// Requests encoded and not yet written, and (requests expecting an
    /// answer, records) among them.
    out: Vec<u8>,
    unsent: (usize, u64),
    next_id: u32,
    state: Arc<AckState>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// Held-back requests are written once they fill this much.
const WRITE_COALESCE_BYTES: usize = 64 * 1024;

impl Producer {
    /// Connects to the broker at `addr` and looks `topic` up, creating it
    /// with the broker's default partition count if it does not exist.
    pub fn connect(addr: &str, topic: &str, config: ProducerConfig) -> Result<Producer> {
        let mut control = Connection::connect(addr)?;
        let partitions = match control.partitions(topic) {
            Ok(p) => p.len() as u32,
            Err(Error::Broker {
                code: ErrorCode::UnknownTopic,
                ..
            }) => control.create_topic(topic, 0)?,
            Err(e) => return Err(e),
        };
        let stream = control.stream;
        let state = Arc::new(AckState::default());
        let reader = if config.acks == protocol::ACKS_NONE {
            None
        } else {
            let stream = stream.try_clone().map_err(|source| Error::Network {
                op: "read from",
                addr: addr.to_string(),
                source,
            })?;
            let state = Arc::clone(&state);
            let addr = addr.to_string();
            Some(
                std::thread::Builder::new()
                    .name("acks".into())
                    .spawn(move || read_acks(&stream, &addr, &state))
                    .map_err(|e| Error::Config(format!("cannot start a thread: {e}")))?,
            )
        };
        Ok(Producer {
            stream,
            addr: addr.to_string(),
            topic: topic.to_string(),
            config,
            builders: vec![BatchBuilder::new(); partitions as usize],
            out: Vec::new(),
            unsent: (0, 0),
            next_id: control.next_id,
            state,
            reader,
        })
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.builders.len() as u32
    }

    /// Records in batches not yet sent.
    pub fn pending(&self) -> u64 {
        self.builders.iter().map(|b| u64::from(b.len())).sum()
    }

    /// Adds a record to its partition's batch, sending the batch when full.
    /// Fails when the record is too large, or an earlier batch failed.
    pub fn send(
        &mut self,
        partition: u32,
        record: &ParsedRecord,
        fixed_headers: &[(&[u8], &[u8])],
        now: i64,
    ) -> Result<()> {
        let (headers, size) = crate::produce::check_record(
            &self.topic,
            partition,
            self.partitions(),
            record,
            fixed_headers,
            self.config.record_bytes_max,
        )?;
        let p = partition as usize;
        let ts = record.timestamp.unwrap_or(now);
        let builder = &self.builders[p];
        let full = builder.size_bytes() + size > self.config.batch.bytes_max;
        if !builder.is_empty() && (full || !builder.accepts_timestamp(ts)) {
            self.send_batch(p)?;
        }
        self.builders[p].push(ts, record.key.as_deref(), &headers, &record.value);
        if self.builders[p].len() >= self.config.batch.records_max {
            self.send_batch(p)?;
        }
        Ok(())
    }

    /// Sends every partial batch (the linger time has passed).
    pub fn flush_pending(&mut self) -> Result<()> {
        for p in 0..self.builders.len() {
            self.send_batch(p)?;
        }
        self.write_out()
    }

    fn send_batch(&mut self, p: usize) -> Result<()> {
        if self.builders[p].is_empty() {
            return Ok(());
        }
        let records = u64::from(self.builders[p].len());
        let on_wire = {
            let mut acks = lock(&self.state.acks);
            if acks.waiting.len() >= self.config.in_flight_max.max(1) {
                // The window is full: what is held back goes out before
                // waiting for its answers.
                drop(acks);
                self.write_out()?;
                acks = lock(&self.state.acks);
                while acks.waiting.len() >= self.config.in_flight_max.max(1) && !acks.broken {
                    acks.sender_waits = true;
                    acks = self.state.changed.wait(acks).unwrap_or_else(|e| e.into_inner());
                }
                acks.sender_waits = false;
            }
            if let Some(e) = acks.error.take() {
                return Err(e);
            }
            if acks.broken {
                return Err(Error::Protocol {
                    addr: self.addr.clone(),
                    reason: "the connection closed".into(),
                });
            }
            self.next_id = self.next_id.wrapping_add(1);
            let on_wire = acks.waiting.len() - self.unsent.0;
            if self.config.acks != protocol::ACKS_NONE {
                acks.waiting
                    .push_back((self.next_id, records, std::time::Instant::now()));
            }
            on_wire
        };
        let c = &self.config;
        protocol::append_produce_request(
            &mut self.out,
            self.next_id,
            c.acks,
            c.timeout_ms,
            &self.topic,
            p as u32,
            self.builders[p].finish(),
        );
        self.builders[p].clear();
        self.unsent.0 += usize::from(self.config.acks != protocol::ACKS_NONE);
        self.unsent.1 += records;
        // Requests leave together: at once when the broker has nothing to
        // do, else when enough are held back to fill a large write.
        if on_wire == 0 || self.out.len() >= WRITE_COALESCE_BYTES {
            self.write_out()?;
        }
        Ok(())
    }

    /// Writes the requests held back, in one write.
    fn write_out(&mut self) -> Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let written = (&self.stream).write_all(&self.out);
        self.out.clear();
        let (_, records) = std::mem::take(&mut self.unsent);
        let mut acks = lock(&self.state.acks);
        match written {
            Ok(()) if self.config.acks == protocol::ACKS_NONE => acks.delivered += records,
            Ok(()) => {}
            Err(source) => {
                if self.config.acks == protocol::ACKS_NONE {
                    acks.failed += records;
                }
                acks.broken = true;
                return Err(Error::Network {
                    op: "send to",
                    addr: self.addr.clone(),
                    source,
                });
            }
        }
        Ok(())
    }

    /// Sends every partial batch and waits for every acknowledgement;
    /// returns the records delivered, or the first error (the counts stay
    /// readable through [`ProducerSummary`]).
    pub fn close(mut self) -> (ProducerSummary, Result<()>) {
        let mut result = self.flush_pending();
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let mut acks = lock(&self.state.acks);
        // Requests never answered: the connection closed under them.
        let lost: u64 = acks.waiting.drain(..).map(|(_, n, _)| n).sum();
        acks.failed += lost;
        acks.failed += self.pending();
        if let Some(e) = acks.error.take() {
            result = result.and(Err(e));
        } else if lost > 0 && result.is_ok() {
            result = Err(Error::Protocol {
                addr: self.addr.clone(),
                reason: format!("the connection closed before {lost} records were acknowledged"),
            });
        }
        let summary = ProducerSummary {
            delivered: acks.delivered,
            failed: acks.failed,
            latency: std::mem::take(&mut acks.latency),
        };
        (summary, result)
    }
}

/// What a producer delivered.
#[derive(Debug, Clone, Default)]
pub struct ProducerSummary {
    /// Records acknowledged.
    pub delivered: u64,
    /// Records not delivered.
    pub failed: u64,
    /// From sending to acknowledgement, per record, µs.
    pub latency: crate::bench::Histogram,
}

/// The producer's response reader: matches acknowledgements to requests.
fn read_acks(stream: &TcpStream, addr: &str, state: &AckState) {
    let mut buf = Vec::new();
    // Acknowledgements are small: one read brings in many.
    let mut input = std::io::BufReader::with_capacity(64 * 1024, stream);
    loop {
        let read = read_frame(&mut input, &mut buf, addr);
        let mut acks = lock(&state.acks);
        let header = read.and_then(|()| {
            protocol::decode_response_header(&mut Reader::new(&buf)).map_err(|e| protocol_error(addr, e))
        });
        match header {
            Ok(h) => {
                let Some((id, records, sent)) = acks.waiting.pop_front() else {
                    acks.error.get_or_insert(Error::Protocol {
                        addr: addr.to_string(),
                        reason: format!("an answer to no request ({})", h.correlation_id),
                    });
                    acks.broken = true;
                    state.changed.notify_all();
                    return;
                };
                if h.correlation_id != id {
                    acks.failed += records;
                    acks.error.get_or_insert(Error::Protocol {
                        addr: addr.to_string(),
                        reason: format!("response {} to request {id}", h.correlation_id),
                    });
                } else if h.error == ErrorCode::None {
                    acks.delivered += records;
                    acks.latency.record_n(sent.elapsed().as_micros() as u64, records);
                } else {
                    acks.failed += records;
                    acks.error.get_or_insert(Error::Broker {
                        code: h.error,
                        message: h.message,
                    });
                }
            }
            Err(e) => {
                // The connection ended. After a clean close with nothing
                // waiting that is the end; otherwise the waiting fail.
                if !acks.waiting.is_empty() {
                    acks.error.get_or_insert(e);
                }
                acks.broken = true;
                state.changed.notify_all();
                return;
            }
        }
        if acks.sender_waits {
            state.changed.notify_all();
        }
    }
}

/// A partition a consumer reads.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerPartition {
    /// Partition number.
    pub partition: u32,
    /// Next offset to hand out.
    pub offset: u64,
    /// Stop before this offset (`-e`), if set.
    pub stop_at: Option<u64>,
}

/// How a consumer fetches.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerConfig {
    /// Bytes per partition per fetch.
    pub fetch_bytes_max: u32,
    /// How long a fetch at the end of the log waits for records.
    pub max_wait_ms: u32,
    /// Responses fetched ahead of the caller.
    pub prefetch: usize,
    /// Largest record accepted.
    pub record_bytes_max: u32,
}

impl Default for ConsumerConfig {
    fn default() -> ConsumerConfig {
        ConsumerConfig {
            fetch_bytes_max: 1 << 20,
            max_wait_ms: 500,
            prefetch: 4,
            record_bytes_max: limits::RECORD_BYTES_MAX_LIMIT,
        }
    }
}

/// Reads partitions of one topic from a broker, fetching ahead.
#[derive(Debug)]
pub struct Consumer {
    topic: String,
    addr: String,
    partitions: Vec<ConsumerPartition>,
    responses: Receiver<Result<Vec<u8>>>,
    record_bytes_max: u32,
    /// A response not yet handed out whole, and where to resume in it:
    /// the partition's index in the response and a batch's byte position.
    current: Option<(Vec<u8>, usize, usize)>,
}

impl Consumer {
    /// Starts fetching `partitions` of `topic` from the broker at `addr`.
    pub fn start(
        addr: &str,
        topic: &str,
        partitions: Vec<ConsumerPartition>,
        config: ConsumerConfig,
    ) -> Result<Consumer> {
        let on: Vec<_> = partitions.into_iter().map(|p| (addr.to_string(), p)).collect();
        Consumer::start_on(&on, topic, config)
    }

    /// Starts fetching partitions of `topic`, each from the broker whose
    /// address it comes with (a cluster): one fetch-ahead thread per
    /// broker, their responses handed out as they come.
    pub fn start_on(parts: &[(String, ConsumerPartition)], topic: &str, config: ConsumerConfig) -> Result<Consumer> {
        let mut brokers: Vec<(String, Vec<ConsumerPartition>)> = Vec::new();
        for (addr, part) in parts {
            match brokers.iter_mut().find(|(a, _)| a == addr) {
                Some((_, held)) => held.push(*part),
                None => brokers.push((addr.clone(), vec![*part])),
            }
        }
        let (tx, rx) = mpsc::sync_channel(config.prefetch.max(1));
        let mut all = Vec::new();
        for (addr, partitions) in &brokers {
            let fetcher = Fetcher {
                stream: connect(addr)?,
                addr: addr.clone(),
                topic: topic.to_string(),
                partitions: partitions.clone(),
                config,
                tx: tx.clone(),
            };
            std::thread::Builder::new()
                .name("fetch".into())
                .spawn(move || fetcher.run())
                .map_err(|e| Error::Config(format!("cannot start a thread: {e}")))?;
            all.extend_from_slice(partitions);
        }
        let addr = brokers.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>().join(",");
        Ok(Consumer {
            topic: topic.to_string(),
            addr,
            partitions: all,
            responses: rx,
            record_bytes_max: config.record_bytes_max,
            current: None,
        })
    }

    /// The partitions and their next offsets.
    pub fn partitions(&self) -> &[ConsumerPartition] {
        &self.partitions
    }

    /// Whether every partition reached its `stop_at`.
    pub fn done(&self) -> bool {
        self.partitions.iter().all(|p| p.stop_at.is_some_and(|s| p.offset >= s))
    }

    /// Hands out records of the fetched responses (waiting up to `timeout`
    /// for one) to `each`, at or after the wanted offsets, every CRC
    /// checked, until `each` returns false or the response is used up.
    /// When `each` stops early, the next call resumes after the last
    /// record handed out. Returns the records handed out.
    pub fn poll(&mut self, timeout: Duration, mut each: impl FnMut(u32, &Record<'_>) -> Result<bool>) -> Result<u64> {
        let (frame, first_part, first_at) = match self.current.take() {
            Some(c) => c,
            None => match self.responses.recv_timeout(timeout) {
                Ok(r) => (r?, 0, 0),
                Err(RecvTimeoutError::Timeout) => return Ok(0),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::Protocol {
                        addr: self.addr.clone(),
                        reason: "the fetcher stopped".into(),
                    })
                }
            },
        };
        let mut r = Reader::new(&frame);
        let header = protocol::decode_response_header(&mut r).map_err(|e| protocol_error(&self.addr, e))?;
        Connection::check(&header)?;
        let parts = protocol::decode_fetch_response(&mut r).map_err(|e| protocol_error(&self.addr, e))?;
        let mut handed = 0;
        let mut stop = None;
        'parts: for (index, part) in parts.iter().enumerate().skip(first_part) {
            if part.error != ErrorCode::None {
                return Err(Error::Broker {
                    code: part.error,
                    message: part.message.clone(),
                });
            }
            let Some(state) = self.partitions.iter_mut().find(|p| p.partition == part.partition) else {
                continue;
            };
            let mut at = if index == first_part { first_at } else { 0 };
            while at < part.records.len() {
                let batch = match Batch::decode(&part.records[at..], limits::BATCH_BYTES_MAX) {
                    Ok(b) => b,
                    // The byte budget cut the last batch: fetched again next time.
                    Err(e) if e.is_truncated() && at > 0 => break,
                    Err(e) => {
                        return Err(Error::Protocol {
                            addr: self.addr.clone(),
                            reason: format!("{} [{}]: fetched batch: {e}", self.topic, part.partition),
                        })
                    }
                };
                for record in batch.records(self.record_bytes_max) {
                    let record = record.map_err(|e| Error::Protocol {
                        addr: self.addr.clone(),
                        reason: format!("{} [{}]: fetched record: {e}", self.topic, part.partition),
                    })?;
                    if record.offset < state.offset || state.stop_at.is_some_and(|s| record.offset >= s) {
                        continue;
                    }
                    state.offset = record.offset + 1;
                    handed += 1;
                    if !each(part.partition, &record)? {
                        // Resume at this batch: its records before
                        // `state.offset` are skipped.
                        stop = Some((index, at));
                        break 'parts;
                    }
                }
                at += batch.total_bytes();
            }
        }
        if let Some((index, at)) = stop {
            self.current = Some((frame, index, at));
        }
        Ok(handed)
    }
}

/// The consumer's fetch-ahead thread.
struct Fetcher {
    stream: TcpStream,
    addr: String,
    topic: String,
    partitions: Vec<ConsumerPartition>,
    config: ConsumerConfig,
    tx: SyncSender<Result<Vec<u8>>>,
}

impl Fetcher {
    fn run(mut self) {
        let mut frame = Vec::new();
        let mut id = 0u32;
        loop {
            let asked: Vec<FetchPartition> = self
                .partitions
                .iter()
                .filter(|p| p.stop_at.map_or(true, |s| p.offset < s))
                .map(|p| FetchPartition {
                    topic: self.topic.clone(),
                    partition: p.partition,
                    offset: p.offset,
                    max_bytes: self.config.fetch_bytes_max,
                })
                .collect();
            if asked.is_empty() {
                return;
            }
            id = id.wrapping_add(1);
            protocol::fetch_request(&mut frame, id, self.config.max_wait_ms, 1, &asked);
            let result = (&self.stream)
                .write_all(&frame)
                .map_err(|source| Error::Network {
                    op: "send to",
                    addr: self.addr.clone(),
                    source,
                })
                .and_then(|()| {
                    let mut body = Vec::new();
                    read_frame(&self.stream, &mut body, &self.addr)?;
                    self.advance(&body)?;
                    Ok(body)
                });
            let failed = result.is_err();
            if self.tx.send(result).is_err() || failed {
                return;
            }
        }
    }

    /// Moves each partition's offset past the whole batches received,
    /// reading only batch headers (the consumer checks the records).
    fn advance(&mut self, body: &[u8]) -> Result<()> {
        let mut r = Reader::new(body);
        let header = protocol::decode_response_header(&mut r).map_err(|e| protocol_error(&self.addr, e))?;
        if header.error != ErrorCode::None {
            return Ok(());
        }
        let parts = protocol::decode_fetch_response(&mut r).map_err(|e| protocol_error(&self.addr, e))?;
        for part in parts {
            let Some(state) = self.partitions.iter_mut().find(|p| p.partition == part.partition) else {
                continue;
            };
            let mut at = 0;
            while at + BATCH_HEADER_BYTES <= part.records.len() {
                let Ok(h) = BatchHeader::decode(&part.records[at..], limits::BATCH_BYTES_MAX) else {
                    break;
                };
                if at + h.total_bytes() as usize > part.records.len() {
                    break;
                }
                state.offset = state.offset.max(h.next_offset());
                at += h.total_bytes() as usize;
            }
        }
        Ok(())
    }
}
