//! The producer: records batched per partition, several produce requests
//! in flight, each record counted delivered only once acknowledged.
//!
//! A batch leaves when it is full, or when its caller sends the partial
//! batches: [`Batches::oldest`] says since when the oldest of them waits,
//! so that they can go `linger` after its first record, whatever the input
//! does. Every record has a delivery deadline
//! ([`ProducerConfig::delivery_timeout`], counted from its batch's first
//! record, connecting included): a record not acknowledged by then counts
//! as failed, and so does one still waiting [`crate::stop::GRACE`] after a
//! stop signal.
use crate::net::Stream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::acks::{read_acks, write_patience, AckState, Acks, Waiting};
use crate::client::connection::{connect_with, until, write_all_with, Connection};
use crate::client::report::AckReport;
use crate::error::{Error, Result};
use crate::limits;
use crate::protocol::{self, ErrorCode};
use crate::storage::producers::BATCHES_REMEMBERED;
use crate::storage::record::{BatchBuilder, Codec};
use crate::sync::lock;

mod batches;
mod routed;

pub use batches::{Admitted, Batches};

/// A record parsed from input, borrowing from it where it can.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParsedRecord {
    /// The key, if any.
    pub key: Option<Vec<u8>>,
    /// The value.
    pub value: Vec<u8>,
    /// The value is null (`value` is empty): a tombstone, which deletes
    /// its key from a compacted topic.
    pub null_value: bool,
    /// Headers of this record (besides the fixed `-H` ones).
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Its own timestamp (`-J` envelopes), else the time of sending.
    pub timestamp: Option<i64>,
    /// Where it was consumed from (a `-J` envelope's topic, partition and
    /// offset), echoed in the report of acknowledged records.
    pub source: Option<Source>,
}

/// Where a record was consumed from: the topic, partition and offset of
/// the `klog-consume -J` envelope it was read from. It travels with the
/// record's batch (sent again, given back to another leader) to the
/// report of acknowledged records ([`crate::client::report`]), so that a
/// mirror's consumer commits only what the destination stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: u32,
    /// The offset.
    pub offset: u64,
}

/// The sources of a batch's records, in their order (empty when no
/// report is written: sources are kept only for one).
pub type Sources = Vec<Option<Source>>;

/// How to batch.
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions {
    /// Records per batch at most.
    pub records_max: u32,
    /// Bytes per batch at most, uncompressed (a single larger record still
    /// goes alone).
    pub bytes_max: usize,
    /// The codec each batch is compressed with.
    pub codec: Codec,
    /// Its compression level (`None`: the codec's default).
    pub level: Option<i32>,
}

/// A record's headers: (name, value) pairs; borrowed when they are just
/// the fixed ones (no allocation per record).
pub type Headers<'a, 'h> = std::borrow::Cow<'h, [(&'a [u8], &'a [u8])]>;

/// A record checked for a partition of a topic of `count` partitions:
/// its headers (the fixed ones first) and its encoded size, or why it
/// cannot go (no such partition, more headers than the format holds, or
/// larger than `record_bytes_max`). Every limit the batch builder asserts
/// is checked here first, so that no input can make it panic.
pub fn check_record<'a, 'h>(
    topic: &str,
    partition: u32,
    count: u32,
    record: &'a ParsedRecord,
    fixed_headers: &'h [(&'a [u8], &'a [u8])],
    record_bytes_max: u32,
) -> Result<(Headers<'a, 'h>, usize)> {
    if partition >= count {
        return Err(Error::UnknownPartition {
            topic: topic.to_string(),
            partition,
            count,
        });
    }
    let header_count = fixed_headers.len() + record.headers.len();
    if header_count > limits::HEADERS_PER_RECORD_MAX as usize {
        return Err(Error::TooMany {
            what: "headers in a record",
            count: header_count as u64,
            limit: u64::from(limits::HEADERS_PER_RECORD_MAX),
        });
    }
    let headers: Headers<'a, 'h> = if record.headers.is_empty() {
        std::borrow::Cow::Borrowed(fixed_headers)
    } else {
        let own = record
            .headers
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()));
        std::borrow::Cow::Owned(fixed_headers.iter().copied().chain(own).collect())
    };
    let size = BatchBuilder::record_size(record.key.as_deref(), &headers, &record.value);
    if size > record_bytes_max as usize {
        return Err(Error::TooLarge {
            what: "record",
            size: size as u64,
            limit: u64::from(record_bytes_max),
        });
    }
    Ok((headers, size))
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
    /// The delivery deadline (Kafka's `delivery.timeout.ms`): a record not
    /// acknowledged this long after its batch got its first record counts
    /// as failed. Connecting and looking the topic up wait as long.
    pub delivery_timeout: Duration,
    /// How long a request waits for its answer (Kafka's
    /// `request.timeout.ms`): a broker silent that long under a request
    /// loses the connection, whose requests go again (routed: to the
    /// partition's leader, looked up again), within their delivery
    /// deadline. Writing to a broker that takes nothing waits as long.
    pub request_timeout: Duration,
    /// Where each acknowledged record is written as its answer arrives
    /// (`klog-produce --report`); a `'static` reference so that the
    /// configuration stays `Copy` (the caller leaks one per run).
    pub report: Option<&'static AckReport>,
    /// Idempotent (Kafka's `enable.idempotence`; with acks 1 or all): the
    /// producer takes a producer id and numbers its batches, so that a
    /// batch sent again after a broken connection or a failover is stored
    /// once, and batches keep their order.
    pub idempotent: bool,
    /// Transactional (`klog-produce --transactional-id`): the producer's
    /// batches go in transactions of this id, which a cluster producer
    /// commits ([`crate::coord::ClusterProducer`]); a `'static` str so
    /// that the configuration stays `Copy` (leaked once per run).
    pub transactional_id: Option<&'static str>,
    /// An open transaction older than this is aborted by its coordinator
    /// (Kafka's `transaction.timeout.ms`).
    pub transaction_timeout_ms: u32,
}

impl ProducerConfig {
    /// Idempotent only with acks (nothing would say what to send again).
    pub(crate) fn checked(mut self) -> ProducerConfig {
        self.idempotent &= self.acks != protocol::ACKS_NONE;
        self
    }
}

impl Default for ProducerConfig {
    fn default() -> ProducerConfig {
        ProducerConfig {
            acks: protocol::ACKS_ALL,
            timeout_ms: 30_000,
            batch: BatchOptions {
                records_max: 1000,
                bytes_max: 1 << 20,
                codec: Codec::None,
                level: None,
            },
            in_flight_max: 256,
            record_bytes_max: limits::RECORD_BYTES_MAX_DEFAULT,
            delivery_timeout: Duration::from_millis(limits::DELIVERY_TIMEOUT_MS_DEFAULT),
            request_timeout: Duration::from_millis(limits::CLIENT_REQUEST_TIMEOUT_MS_DEFAULT),
            report: None,
            idempotent: false,
            transactional_id: None,
            transaction_timeout_ms: 60_000,
        }
    }
}

/// Sends records to the partitions of one topic on a broker.
#[derive(Debug)]
pub struct Producer {
    stream: Stream,
    addr: String,
    topic: String,
    config: ProducerConfig,
    batches: Batches,
    /// Requests encoded and not yet written, and (requests expecting an
    /// answer, records) among them.
    out: Vec<u8>,
    unsent: (usize, u64),
    next_id: u32,
    state: Arc<AckState>,
    reader: Option<std::thread::JoinHandle<()>>,
    /// Requests sent again on a new connection.
    resent: u64,
    /// Routed, its connection broke: every request it held was given
    /// back, and it sends nothing more.
    dead: bool,
}

/// Held-back requests are written once they fill this much.
const WRITE_COALESCE_BYTES: usize = 64 * 1024;

/// Bytes of requests kept for resending (in flight, not yet answered) at
/// most: past them, the producer waits for answers (Kafka's
/// `buffer.memory`, 32 MiB).
const IN_FLIGHT_BYTES_MAX: usize = 32 << 20;

/// Whether [`BATCHES_REMEMBERED`] batches of `partition` wait for their
/// answers: a numbered batch waits for room then, so that one sent again
/// (on a new connection, in order) is always one the partition can tell
/// it holds. Kafka's producer caps `max.in.flight.requests.per.connection`
/// at 5 for the same reason; this caps a partition's, and the other
/// partitions' batches still go.
fn unanswered_max(acks: &Acks, partition: u32) -> bool {
    let waiting = acks.waiting.iter().filter(|w| w.partition == partition);
    waiting.count() >= BATCHES_REMEMBERED
}

/// Connects to `addr`, trying again (backing off from 50 ms to 1 s) while
/// it refuses, until `deadline` or a stop signal.
fn connect_until(addr: &str, deadline: Instant) -> Result<Stream> {
    let mut backoff = Duration::from_millis(50);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match connect_with(addr, &mut until(addr, left)) {
            Err(Error::Network { .. }) if Instant::now() + backoff < deadline => {
                let nap_until = Instant::now() + backoff;
                while Instant::now() < nap_until {
                    if crate::stop::grace_over() {
                        return Err(Error::Stopped {
                            addr: addr.to_string(),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            connected => return connected,
        }
    }
}

/// Starts the reader of `stream`'s acknowledgements (none with acks 0: the
/// broker sends none).
fn spawn_reader(
    stream: &Stream,
    addr: &str,
    state: &Arc<AckState>,
    config: &ProducerConfig,
) -> Result<Option<std::thread::JoinHandle<()>>> {
    if config.acks == protocol::ACKS_NONE {
        return Ok(None);
    }
    let stream = stream.try_clone().map_err(|source| Error::Network {
        op: "read from",
        addr: addr.to_string(),
        source,
    })?;
    let state = Arc::clone(state);
    let addr = addr.to_string();
    let timeouts = (config.delivery_timeout, config.request_timeout);
    std::thread::Builder::new()
        .name("acks".into())
        .spawn(move || read_acks(&stream, &addr, &state, timeouts))
        .map(Some)
        .map_err(|reason| Error::Spawn { reason })
}

impl Producer {
    /// Connects to the broker at `addr` and looks `topic` up, creating it
    /// with the broker's default partition count if it does not exist.
    pub fn connect(addr: &str, topic: &str, config: ProducerConfig) -> Result<Producer> {
        let config = config.checked();
        let mut control = Connection::connect_timeout(addr, config.delivery_timeout)?;
        let partitions = match control.partitions(topic) {
            Ok(p) => p.len() as u32,
            Err(Error::Broker {
                code: ErrorCode::UnknownTopic,
                ..
            }) => control.create_topic(topic, 0)?,
            Err(e) => return Err(e),
        };
        let producer_id = match config.idempotent {
            true => Some(control.init_producer_id()?),
            false => None,
        };
        let mut producer = Producer::on(
            control.stream,
            addr,
            topic,
            partitions,
            config,
            control.next_id,
        )?;
        if let Some((id, epoch)) = producer_id {
            producer.batches.number(id, epoch);
        }
        Ok(producer)
    }

    /// A producer on `stream`, connected to `addr`, for a topic of
    /// `partitions` partitions; its next request's id follows `next_id`.
    fn on(
        stream: Stream,
        addr: &str,
        topic: &str,
        partitions: u32,
        config: ProducerConfig,
        next_id: u32,
    ) -> Result<Producer> {
        let state = Arc::new(AckState::default());
        lock(&state.acks).report = config.report;
        let reader = spawn_reader(&stream, addr, &state, &config)?;
        Ok(Producer {
            stream,
            addr: addr.to_string(),
            topic: topic.to_string(),
            batches: Batches::for_producer(topic, partitions, &config),
            config,
            out: Vec::new(),
            unsent: (0, 0),
            next_id,
            state,
            reader,
            resent: 0,
            dead: false,
        })
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.batches.partitions()
    }

    /// Records in batches not yet sent.
    pub fn batched_records(&self) -> u64 {
        self.batches.records()
    }

    /// When the oldest batch not yet sent got its first record.
    pub fn oldest_batch(&self) -> Option<Instant> {
        self.batches.oldest()
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
        let p = partition as usize;
        let admitted = self.batches.admit(partition, record, fixed_headers, now)?;
        if admitted.ship_first {
            self.send_batch(p)?;
        }
        if self.batches.push(partition, record, &admitted) {
            self.send_batch(p)?;
        }
        Ok(())
    }

    /// Sends every partial batch (the linger time has passed).
    pub fn flush_batches(&mut self) -> Result<()> {
        for p in 0..self.batches.partitions() as usize {
            self.send_batch(p)?;
        }
        self.write_out()
    }

    fn send_batch(&mut self, p: usize) -> Result<()> {
        if self.batches.batch(p as u32).is_empty() {
            return Ok(());
        }
        let records = u64::from(self.batches.batch(p as u32).len());
        self.wait_for_room(Some(p as u32))?;
        let opened = self.batches.opened(p as u32).unwrap_or_else(Instant::now);
        self.next_id = self.next_id.wrapping_add(1);
        let start = self.out.len();
        let c = &self.config;
        let place = (p as u32, self.batches.ordinal(p as u32));
        let sources = self.batches.take_sources(p as u32);
        let batch = self.batches.finish(p as u32);
        let batch_bytes = batch.len();
        protocol::append_txn_produce_request(
            &mut self.out,
            self.next_id,
            (c.acks, c.timeout_ms, c.transactional_id),
            &self.topic,
            p as u32,
            batch,
        );
        self.batches.clear(p as u32);
        let deadline = opened + self.config.delivery_timeout;
        self.enqueued(start, place, records, deadline, (batch_bytes, sources))
    }

    /// Notes the request just encoded at `out[start..]` (its batch its
    /// last `batch_bytes`, the partition's batch of that ordinal, its
    /// records from `sources`) as waiting for its answer (none with acks
    /// 0), and writes the requests held back when it is time.
    fn enqueued(
        &mut self,
        start: usize,
        (partition, ordinal): (u32, u64),
        records: u64,
        deadline: Instant,
        (batch_bytes, sources): (usize, Sources),
    ) -> Result<()> {
        let sent = Instant::now();
        let on_wire = {
            let mut acks = lock(&self.state.acks);
            let on_wire = acks.waiting.len() - self.unsent.0;
            if self.config.acks != protocol::ACKS_NONE {
                // Kept until answered: a broken connection sends it again.
                let request = self.out[start..].to_vec();
                acks.waiting_bytes += request.len();
                acks.waiting.push_back(Waiting {
                    id: self.next_id,
                    partition,
                    ordinal,
                    records,
                    sent,
                    deadline,
                    batch_at: request.len() - batch_bytes,
                    request,
                    sources,
                });
            }
            on_wire
        };
        self.unsent.0 += usize::from(self.config.acks != protocol::ACKS_NONE);
        self.unsent.1 += records;
        // Requests leave together: at once when the broker has nothing to
        // do, else when enough are held back to fill a large write.
        if on_wire == 0 || self.out.len() >= WRITE_COALESCE_BYTES {
            self.write_out()?;
        }
        Ok(())
    }

    /// Waits until the window has room for one more request (by count, and
    /// by the bytes kept for resending; numbered, for one more batch of
    /// `partition`: see [`unanswered_max`]), connecting again first if the
    /// connection broke; fails with the first error the answers brought.
    fn wait_for_room(&mut self, partition: Option<u32>) -> Result<()> {
        let max = self.config.in_flight_max.max(1);
        let of_partition = partition.filter(|_| self.batches.numbered());
        let full = |a: &Acks| {
            a.waiting.len() >= max
                || (a.waiting_bytes >= IN_FLIGHT_BYTES_MAX && !a.waiting.is_empty())
                || of_partition.is_some_and(|p| unanswered_max(a, p))
        };
        loop {
            let mut acks = lock(&self.state.acks);
            if full(&acks) {
                // The window is full: what is held back goes out before
                // waiting for its answers.
                drop(acks);
                self.write_out()?;
                acks = lock(&self.state.acks);
                while full(&acks) && !acks.broken {
                    acks.sender_waits = true;
                    acks = self
                        .state
                        .changed
                        .wait(acks)
                        .unwrap_or_else(|e| e.into_inner());
                }
                acks.sender_waits = false;
            }
            if acks.broken && acks.routed && !self.dead {
                // What waited is given back; what follows too (the write
                // fails).
                drop(acks);
                self.orphan_all();
                continue;
            }
            if acks.broken && acks.resend && !acks.routed {
                drop(acks);
                self.reconnect()?;
                continue;
            }
            if let Some(e) = acks.error.take() {
                return Err(e);
            }
            if acks.broken && !acks.routed {
                return Err(Error::Protocol {
                    addr: self.addr.clone(),
                    reason: "the connection closed".into(),
                });
            }
            return Ok(());
        }
    }

    /// Writes the requests held back, in one write that waits for the
    /// broker to take them up to the request timeout. A connection that
    /// breaks or times out is made again and the requests not answered
    /// are written again. Routed (with acks), it writes what the socket
    /// takes now and waits for nothing ([`Producer::write_some`]).
    fn write_out(&mut self) -> Result<()> {
        if self.config.acks != protocol::ACKS_NONE && lock(&self.state.acks).routed {
            return self.write_some();
        }
        loop {
            if self.out.is_empty() {
                return Ok(());
            }
            let written = {
                let mut patience =
                    write_patience(&self.state, &self.addr, self.config.request_timeout);
                write_all_with(&self.stream, &self.out, &self.addr, &mut patience)
            };
            self.out.clear();
            let (_, records) = std::mem::take(&mut self.unsent);
            let mut acks = lock(&self.state.acks);
            let e = match written {
                Ok(()) if self.config.acks == protocol::ACKS_NONE => {
                    acks.delivered += records;
                    return Ok(());
                }
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            // Half a request may be on the wire: nothing more can follow.
            acks.broken = true;
            if self.config.acks == protocol::ACKS_NONE {
                acks.failed += records;
                if acks.routed {
                    // Later batches go to the partitions' leaders anew.
                    drop(acks);
                    self.orphan_all();
                    return Ok(());
                }
                return Err(e);
            }
            if acks.routed {
                drop(acks);
                self.orphan_all();
                return Ok(());
            }
            if !(acks.resend || matches!(e, Error::Network { .. } | Error::TimedOut { .. })) {
                return Err(e);
            }
            acks.resend = true;
            drop(acks);
            self.reconnect()?;
        }
    }

    /// The connection broke (or its broker was silent past the request
    /// timeout) under requests waiting for their answers:
    /// connects again (trying until the earliest of their deadlines), and
    /// holds them all back to be written again, in their order. Those past
    /// their deadline fail. A request the broker had appended before the
    /// break is appended twice: delivery is at least once (as a Kafka
    /// producer without idempotence).
    fn reconnect(&mut self) -> Result<()> {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let now = Instant::now();
        let live: Vec<Waiting> = {
            let mut acks = lock(&self.state.acks);
            acks.waiting_bytes = 0;
            let (live, late): (Vec<_>, Vec<_>) =
                acks.waiting.drain(..).partition(|w| w.deadline > now);
            let late: u64 = late.iter().map(|w| w.records).sum();
            if late > 0 {
                acks.failed += late;
                acks.error.get_or_insert(Error::TimedOut {
                    op: "deliver to",
                    addr: self.addr.clone(),
                    waited_ms: self.config.delivery_timeout.as_millis() as u64,
                });
            }
            live
        };
        let deadline = live
            .iter()
            .map(|w| w.deadline)
            .min()
            .unwrap_or(now + self.config.delivery_timeout);
        let connected = connect_until(&self.addr, deadline).and_then(|stream| {
            let reader = spawn_reader(&stream, &self.addr, &self.state, &self.config)?;
            Ok((stream, reader))
        });
        let mut acks = lock(&self.state.acks);
        let (stream, reader) = match connected {
            Ok(done) => done,
            Err(e) => {
                acks.failed += live.iter().map(|w| w.records).sum::<u64>();
                acks.resend = false;
                return Err(e);
            }
        };
        self.stream = stream;
        self.reader = reader;
        acks.broken = false;
        acks.resend = false;
        self.out.clear();
        self.unsent = (0, 0);
        let now = Instant::now();
        for mut w in live {
            // Its request timeout starts again.
            w.sent = now;
            self.out.extend_from_slice(&w.request);
            self.unsent.0 += 1;
            self.unsent.1 += w.records;
            acks.waiting_bytes += w.request.len();
            acks.waiting.push_back(w);
        }
        self.resent += self.unsent.0 as u64;
        Ok(())
    }

    /// Sends every partial batch and waits for every acknowledgement;
    /// returns the records delivered, or the first error (the counts stay
    /// readable through [`ProducerSummary`]).
    pub fn close(mut self) -> (ProducerSummary, Result<()>) {
        let mut result = self.flush_batches();
        loop {
            lock(&self.state.acks).closing = true;
            let _ = self.stream.shutdown(std::net::Shutdown::Write);
            if let Some(reader) = self.reader.take() {
                let _ = reader.join();
            }
            // Broken under requests not answered: they go again.
            let resend = {
                let mut acks = lock(&self.state.acks);
                let again =
                    acks.resend && !acks.routed && !acks.waiting.is_empty() && result.is_ok();
                acks.closing = !again;
                again
            };
            if !resend {
                break;
            }
            result = self.reconnect().and_then(|()| self.write_out());
        }
        let mut acks = lock(&self.state.acks);
        // Requests never answered: the connection closed under them; and,
        // routed, those given back that nobody took to another broker.
        let given_back = acks.orphans.drain(..).map(|o| o.waiting.records);
        let lost: u64 =
            given_back.sum::<u64>() + acks.waiting.drain(..).map(|w| w.records).sum::<u64>();
        acks.failed += lost;
        acks.failed += self.batched_records();
        if self.config.acks == protocol::ACKS_NONE {
            // Requests encoded but never written (an earlier one failed).
            acks.failed += self.unsent.1;
        }
        if let Some(e) = acks.error.take() {
            result = result.and(Err(e));
        } else if lost > 0 && result.is_ok() {
            result = Err(Error::Protocol {
                addr: self.addr.clone(),
                reason: format!("the connection closed before {lost} records were acknowledged"),
            });
        }
        let summary = ProducerSummary {
            idempotent: self.batches.numbered(),
            resent: self.resent,
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
    pub latency: crate::stats::Histogram,
    /// Requests sent again on a new connection after one broke (their
    /// records may have been appended twice, unless `idempotent`).
    pub resent: u64,
    /// Its batches were numbered ([`ProducerConfig::idempotent`]): those
    /// sent again were stored once.
    pub idempotent: bool,
}

#[cfg(test)]
pub(crate) use tests::silent_broker;

#[cfg(test)]
mod tests {
    use super::*;

    /// A broker that takes requests and answers none: its address, and
    /// its end of the connection once a producer connected (shut down,
    /// it ends the thread that reads).
    pub(crate) fn silent_broker() -> (String, std::sync::mpsc::Receiver<std::net::TcpStream>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            tx.send(stream.try_clone().unwrap()).unwrap();
            let _ = std::io::copy(&mut stream, &mut std::io::sink());
        });
        (addr, rx)
    }

    fn record(key: &[u8], value: &[u8], headers: &[(&[u8], &[u8])]) -> ParsedRecord {
        ParsedRecord {
            key: Some(key.to_vec()),
            value: value.to_vec(),
            null_value: false,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_vec(), v.to_vec()))
                .collect(),
            timestamp: None,
            source: None,
        }
    }

    #[test]
    fn a_record_for_a_partition_that_does_not_exist_is_refused() {
        let r = record(b"k", b"v", &[]);
        let err = check_record("t", 3, 3, &r, &[], 1 << 20).unwrap_err();
        assert!(
            matches!(
                err,
                Error::UnknownPartition {
                    partition: 3,
                    count: 3,
                    ..
                }
            ),
            "{err}"
        );
        assert!(check_record("t", 2, 3, &r, &[], 1 << 20).is_ok());
    }

    #[test]
    fn the_limit_is_on_the_encoded_record_with_its_headers() {
        let fixed: &[(&[u8], &[u8])] = &[(b"source", b"test")];
        let r = record(b"k", &[7; 100], &[(b"h", b"v")]);
        let (headers, size) = check_record("t", 0, 1, &r, fixed, 1 << 20).unwrap();
        assert_eq!(
            size,
            BatchBuilder::record_size(Some(b"k"), &headers, &[7; 100])
        );
        assert!(size > 100 + "sourcetesthv".len(), "{size}");
        assert!(check_record("t", 0, 1, &r, fixed, size as u32).is_ok());
        let err = check_record("t", 0, 1, &r, fixed, size as u32 - 1).unwrap_err();
        assert!(
            matches!(err, Error::TooLarge { what: "record", .. }),
            "{err}"
        );
    }

    #[test]
    fn more_headers_than_the_format_holds_are_refused_not_a_panic() {
        let max = limits::HEADERS_PER_RECORD_MAX as usize;
        let fixed: Vec<(&[u8], &[u8])> = vec![(b"a", b"b"); max];
        let plain = record(b"k", b"v", &[]);
        assert!(check_record("t", 0, 1, &plain, &fixed, 1 << 20).is_ok());
        let one_more = record(b"k", b"v", &[(b"c", b"d")]);
        let err = check_record("t", 0, 1, &one_more, &fixed, 1 << 20).unwrap_err();
        assert_eq!(
            err.to_string(),
            "1025 headers in a record would pass the limit of 1024"
        );
    }

    #[test]
    fn fixed_headers_come_first_and_are_borrowed_when_alone() {
        let fixed: &[(&[u8], &[u8])] = &[(b"a", b"1")];
        let plain = record(b"k", b"v", &[]);
        let (headers, _) = check_record("t", 0, 1, &plain, fixed, 1 << 20).unwrap();
        assert!(
            matches!(headers, std::borrow::Cow::Borrowed(_)),
            "no allocation per record"
        );
        let own = record(b"k", b"v", &[(b"b", b"2")]);
        let (headers, _) = check_record("t", 0, 1, &own, fixed, 1 << 20).unwrap();
        assert_eq!(&*headers, &[(&b"a"[..], &b"1"[..]), (&b"b"[..], &b"2"[..])]);
    }

    /// Numbered, a partition's sixth batch waits until one of the five
    /// before it is answered (here never: its deadline fails it), while
    /// another partition's batch goes at once.
    #[test]
    fn a_numbered_partition_has_five_batches_unanswered_at_most() {
        let (addr, peer) = silent_broker();
        let mut config = ProducerConfig {
            delivery_timeout: Duration::from_millis(300),
            ..ProducerConfig::default()
        };
        config.batch.records_max = 1;
        let stream = crate::client::connection::connect(&addr).unwrap();
        let mut producer = Producer::on(stream, &addr, "t", 2, config, 0).unwrap();
        producer.batches.number(5, 0);
        let r = record(b"k", b"v", &[]);
        for _ in 0..5 {
            producer.send(0, &r, &[], 0).unwrap();
        }
        producer.send(1, &r, &[], 0).unwrap();
        let started = Instant::now();
        let sixth = producer.send(0, &r, &[], 0);
        assert!(matches!(sixth, Err(Error::TimedOut { .. })), "{sixth:?}");
        assert!(started.elapsed() >= Duration::from_millis(200), "it waited");
        let stream = peer.recv().unwrap();
        stream.shutdown(std::net::Shutdown::Both).unwrap();
    }

    /// A batch sent just as the reader found the connection broken (after
    /// the cluster producer saw room, before the send) is given back, not
    /// kept on the dead connection and failed at close: a numbered
    /// partition would be left with a gap.
    #[test]
    fn a_batch_sent_as_the_connection_breaks_is_given_back() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = std::thread::spawn(move || drop(listener.accept().unwrap()));
        let config = ProducerConfig::default();
        let mut producer = Producer::connect_routed(&addr, "t", 1, config).unwrap();
        accepted.join().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !lock(&producer.state.acks).broken {
            assert!(Instant::now() < deadline, "the reader sees the close");
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut b = BatchBuilder::compressed(Codec::None, None);
        b.push(0, None, &[], b"v");
        let batch = b.finish_numbered((7, 0, 0)).to_vec();
        producer
            .send_encoded((0, 0), (&batch, Vec::new()), 1, Instant::now())
            .unwrap();
        let given_back = producer.take_orphans().len();
        let (summary, result) = producer.close();
        assert_eq!((given_back, summary.failed), (1, 0), "{result:?}");
    }
}
