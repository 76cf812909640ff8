//! The consumer: fetches ahead on a thread of its own, checks every
//! record's CRC, and hands records out from the wanted offset on.
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::client::connection::{
    connect, protocol_error, read_frame_max, write_all_with, Connection, REQUEST_TIMEOUT,
};
use crate::error::{Error, Result};
use crate::limits;
use crate::protocol::{self, ErrorCode, FetchPartition, FetchWant, Reader};
use crate::storage::batches::Batches;
use crate::storage::record::Record;
use crate::sync::lock;

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

/// How a consumer fetches. It holds at most `prefetch` + 2 fetch answers
/// at once (those fetched ahead, the one arriving and the one handed
/// out), each at most `response_bytes_max` of records and one batch.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerConfig {
    /// Bytes per partition per fetch.
    pub fetch_bytes_max: u32,
    /// Bytes of records per fetch answer, over all its partitions (the
    /// broker cuts this to its own maximum).
    pub response_bytes_max: u32,
    /// How long a fetch at the end of the log waits for records.
    pub wait_ms_max: u32,
    /// Responses fetched ahead of the caller.
    pub prefetch: usize,
    /// Largest record accepted.
    pub record_bytes_max: u32,
}

impl Default for ConsumerConfig {
    fn default() -> ConsumerConfig {
        ConsumerConfig {
            fetch_bytes_max: 1 << 20,
            response_bytes_max: limits::FETCH_RESPONSE_BYTES_DEFAULT,
            wait_ms_max: 500,
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
    /// What the fetchers have to say (a broker went away, reconnected).
    notices: Arc<Mutex<Vec<String>>>,
    /// Set when the consumer is dropped: its fetchers stop reconnecting.
    closed: Arc<AtomicBool>,
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

impl Consumer {
    /// Starts fetching `partitions` of `topic` from the broker at `addr`.
    pub fn start(
        addr: &str,
        topic: &str,
        partitions: Vec<ConsumerPartition>,
        config: ConsumerConfig,
    ) -> Result<Consumer> {
        let on: Vec<_> = partitions
            .into_iter()
            .map(|p| (addr.to_string(), p))
            .collect();
        Consumer::start_on(&on, topic, config)
    }

    /// Starts fetching partitions of `topic`, each from the broker whose
    /// address it comes with (a cluster): one fetch-ahead thread per
    /// broker, their responses handed out as they come.
    pub fn start_on(
        parts: &[(String, ConsumerPartition)],
        topic: &str,
        config: ConsumerConfig,
    ) -> Result<Consumer> {
        let mut brokers: Vec<(String, Vec<ConsumerPartition>)> = Vec::new();
        for (addr, part) in parts {
            match brokers.iter_mut().find(|(a, _)| a == addr) {
                Some((_, held)) => held.push(*part),
                None => brokers.push((addr.clone(), vec![*part])),
            }
        }
        let (tx, rx) = mpsc::sync_channel(config.prefetch.max(1));
        let notices = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(AtomicBool::new(false));
        let mut all = Vec::new();
        for (addr, partitions) in &brokers {
            let fetcher = Fetcher {
                stream: connect(addr)?,
                addr: addr.clone(),
                topic: topic.to_string(),
                partitions: partitions.clone(),
                config,
                tx: tx.clone(),
                notices: Arc::clone(&notices),
                closed: Arc::clone(&closed),
            };
            std::thread::Builder::new()
                .name("fetch".into())
                .spawn(move || fetcher.run())
                .map_err(|reason| Error::Spawn { reason })?;
            all.extend_from_slice(partitions);
        }
        let addr = brokers
            .iter()
            .map(|(a, _)| a.as_str())
            .collect::<Vec<_>>()
            .join(",");
        Ok(Consumer {
            topic: topic.to_string(),
            addr,
            partitions: all,
            responses: rx,
            record_bytes_max: config.record_bytes_max,
            current: None,
            notices,
            closed,
        })
    }

    /// What happened since the last call that a user should hear of (a
    /// broker went away; reconnected, resuming at these offsets).
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.notices))
    }

    /// The partitions and their next offsets.
    pub fn partitions(&self) -> &[ConsumerPartition] {
        &self.partitions
    }

    /// Whether every partition reached its `stop_at`.
    pub fn done(&self) -> bool {
        self.partitions
            .iter()
            .all(|p| p.stop_at.is_some_and(|s| p.offset >= s))
    }

    /// The response being handed out (with the part and position to resume
    /// at), else the next one fetched within `timeout`.
    #[allow(clippy::type_complexity)]
    fn next_response(&mut self, timeout: Duration) -> Result<Option<(Vec<u8>, usize, usize)>> {
        if let Some(current) = self.current.take() {
            return Ok(Some(current));
        }
        match self.responses.recv_timeout(timeout) {
            Ok(r) => Ok(Some((r?, 0, 0))),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            // Its fetchers stopped for the signal, not for a fault.
            Err(RecvTimeoutError::Disconnected) if crate::stop::stopping() => Err(Error::Stopped {
                addr: self.addr.clone(),
            }),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Protocol {
                addr: self.addr.clone(),
                reason: "the fetcher stopped".into(),
            }),
        }
    }

    /// Hands out records of the fetched responses (waiting up to `timeout`
    /// for one) to `each`, at or after the wanted offsets, every CRC
    /// checked, until `each` returns false or the response is used up.
    /// When `each` stops early, the next call resumes after the last
    /// record handed out. Returns the records handed out.
    pub fn poll(
        &mut self,
        timeout: Duration,
        mut each: impl FnMut(u32, &Record<'_>) -> Result<bool>,
    ) -> Result<u64> {
        let Some((frame, first_part, first_at)) = self.next_response(timeout)? else {
            return Ok(0);
        };
        let parts = fetched_parts(&self.addr, &frame)?;
        let mut handed = 0;
        let mut stop = None;
        'parts: for (index, part) in parts.iter().enumerate().skip(first_part) {
            if part.error != ErrorCode::None {
                return Err(Error::Broker {
                    code: part.error,
                    message: part.message.clone(),
                });
            }
            let Some(state) = reading(&mut self.partitions, part.partition) else {
                continue;
            };
            let start = if index == first_part { first_at } else { 0 };
            for step in Batches::resume(part.records, start, limits::BATCH_BYTES_MAX) {
                let (at, batch) = match step {
                    Ok(found) => found,
                    // The byte budget cut the last batch: fetched again next time.
                    Err(stop) if stop.is_truncated() && stop.position > 0 => break,
                    Err(stop) => {
                        return Err(fetched(
                            &self.addr,
                            &self.topic,
                            part.partition,
                            "batch",
                            stop.error,
                        ))
                    }
                };
                for record in batch.records(self.record_bytes_max) {
                    let record = record.map_err(|e| {
                        fetched(&self.addr, &self.topic, part.partition, "record", e)
                    })?;
                    if record.offset < state.offset
                        || state.stop_at.is_some_and(|s| record.offset >= s)
                    {
                        continue;
                    }
                    state.offset = record.offset + 1;
                    handed += 1;
                    if !each(part.partition, &record)? {
                        // Resume at this batch: its records before
                        // `state.offset` are skipped.
                        stop = Some((index, at as usize));
                        break 'parts;
                    }
                }
            }
        }
        if let Some((index, at)) = stop {
            self.current = Some((frame, index, at));
        }
        Ok(handed)
    }
}

/// The state of `partition` among those read, if it is one.
fn reading(partitions: &mut [ConsumerPartition], partition: u32) -> Option<&mut ConsumerPartition> {
    partitions.iter_mut().find(|p| p.partition == partition)
}

/// The partitions of a fetch response, once its header says it succeeded.
fn fetched_parts<'f>(addr: &str, frame: &'f [u8]) -> Result<Vec<protocol::FetchedPartition<'f>>> {
    let mut r = Reader::new(frame);
    let header = protocol::decode_response_header(&mut r).map_err(|e| protocol_error(addr, e))?;
    Connection::check(&header)?;
    protocol::decode_fetch_response(&mut r, protocol::FETCH_VERSION_CONSUMER)
        .map_err(|e| protocol_error(addr, e))
}

/// A fetched batch or record of `topic` [`partition`] that does not decode.
fn fetched(
    addr: &str,
    topic: &str,
    partition: u32,
    what: &str,
    e: impl std::fmt::Display,
) -> Error {
    Error::Protocol {
        addr: addr.to_string(),
        reason: format!("{topic} [{partition}]: fetched {what}: {e}"),
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
    notices: Arc<Mutex<Vec<String>>>,
    closed: Arc<AtomicBool>,
}

impl Fetcher {
    fn run(mut self) {
        let mut frame = Vec::new();
        let mut id = 0u32;
        let want = FetchWant {
            wait_ms_max: self.config.wait_ms_max,
            bytes_min: 1,
            response_bytes_max: self.config.response_bytes_max,
        };
        let answer_bytes_max = protocol::fetch_response_frame_bytes(want.response_bytes_max);
        loop {
            // Each fetch starts one partition later, so that the answer's
            // budget, spent in order, favours none of them.
            let first = id as usize % self.partitions.len().max(1);
            let (later, earlier) = self.partitions.split_at(first);
            let asked: Vec<FetchPartition> = earlier
                .iter()
                .chain(later)
                .filter(|p| p.stop_at.is_none_or(|s| p.offset < s))
                .map(|p| FetchPartition {
                    topic: self.topic.clone(),
                    partition: p.partition,
                    offset: p.offset,
                    bytes_max: self.config.fetch_bytes_max,
                    leader_epoch: None,
                })
                .collect();
            if asked.is_empty() {
                return;
            }
            id = id.wrapping_add(1);
            protocol::fetch_request(&mut frame, id, want, &asked);
            let result = self.fetch(&frame, answer_bytes_max).and_then(|body| {
                self.advance(&body)?;
                Ok(body)
            });
            // A broker gone (restarted, stopped answering) is waited for.
            if let Err(e @ (Error::Network { .. } | Error::TimedOut { .. })) = &result {
                if self.reconnect(e) {
                    continue;
                }
                // A read to an end (-e) gives up: say why.
                if !crate::stop::stopping() && !self.closed.load(Ordering::Relaxed) {
                    let _ = self.tx.send(result);
                }
                return;
            }
            let failed = result.is_err();
            if self.tx.send(result).is_err() || failed {
                return;
            }
        }
    }

    /// Connects again after `why`, backing off from 100 ms to 5 s between
    /// attempts, and says so; false when the consumer is dropped or a stop
    /// is asked for first, or, for a read to an end (`-e`), after
    /// [`REQUEST_TIMEOUT`] of trying (a follower tries for ever, as `tail
    /// -F`). Fetching resumes after the whole batches received: nothing is
    /// handed out twice, nothing skipped.
    fn reconnect(&mut self, why: &Error) -> bool {
        let say = |s: String| lock(&self.notices).push(s);
        let cause = std::error::Error::source(why).map_or(String::new(), |s| format!(": {s}"));
        say(format!("cannot {why}{cause}: reconnecting"));
        let bounded = self.partitions.iter().any(|p| p.stop_at.is_some());
        let give_up = std::time::Instant::now() + REQUEST_TIMEOUT;
        let mut backoff = Duration::from_millis(100);
        loop {
            if bounded && std::time::Instant::now() >= give_up {
                return false;
            }
            let deadline = std::time::Instant::now() + backoff;
            while std::time::Instant::now() < deadline {
                if self.closed.load(Ordering::Relaxed) || crate::stop::stopping() {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            match connect(&self.addr) {
                Ok(stream) => {
                    self.stream = stream;
                    let at: Vec<String> = self
                        .partitions
                        .iter()
                        .map(|p| format!("{} [{}] at offset {}", self.topic, p.partition, p.offset))
                        .collect();
                    say(format!(
                        "reconnected to {}: resuming {}",
                        self.addr,
                        at.join(", ")
                    ));
                    return true;
                }
                Err(Error::Stopped { .. }) => return false,
                Err(_) => backoff = (backoff * 2).min(Duration::from_secs(5)),
            }
        }
    }

    /// Sends a fetch request and reads its answer. The broker holds a fetch
    /// at the end of the log for its wait, then answers: no answer long
    /// after that is a silent broker. A stop signal is the caller's to see
    /// (between two polls): the fetcher, a thread of its own, only keeps
    /// the deadline.
    fn fetch(&self, request: &[u8], answer_bytes_max: u32) -> Result<Vec<u8>> {
        let wait = Duration::from_millis(u64::from(self.config.wait_ms_max)) + REQUEST_TIMEOUT;
        let deadline = std::time::Instant::now() + wait;
        let mut patience = |op| {
            if std::time::Instant::now() < deadline {
                return Ok(());
            }
            Err(Error::TimedOut {
                op,
                addr: self.addr.clone(),
                waited_ms: wait.as_millis() as u64,
            })
        };
        write_all_with(&self.stream, request, &self.addr, &mut patience)?;
        let mut body = Vec::new();
        read_frame_max(
            &self.stream,
            &mut body,
            &self.addr,
            answer_bytes_max,
            &mut patience,
        )?;
        Ok(body)
    }

    /// Moves each partition's offset past the whole batches received,
    /// reading only batch headers (the consumer checks the records).
    fn advance(&mut self, body: &[u8]) -> Result<()> {
        let mut r = Reader::new(body);
        let header =
            protocol::decode_response_header(&mut r).map_err(|e| protocol_error(&self.addr, e))?;
        if header.error != ErrorCode::None {
            return Ok(());
        }
        let parts = protocol::decode_fetch_response(&mut r, protocol::FETCH_VERSION_CONSUMER)
            .map_err(|e| protocol_error(&self.addr, e))?;
        for part in parts {
            let Some(state) = reading(&mut self.partitions, part.partition) else {
                continue;
            };
            // Whatever is not a whole batch is fetched again, and judged,
            // by the consumer.
            for step in Batches::new(part.records, limits::BATCH_BYTES_MAX) {
                let Ok((_, batch)) = step else {
                    break;
                };
                state.offset = state.offset.max(batch.header.next_offset());
            }
        }
        Ok(())
    }
}
