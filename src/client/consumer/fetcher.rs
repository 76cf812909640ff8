//! A consumer's fetch-ahead thread: it fetches its partitions from one
//! broker, moves their offsets past the whole batches it received, and
//! hands the answers to its consumer through a bounded channel (so it
//! runs at most a few answers ahead). Following leaders, it gives back
//! the partitions its broker does not lead, and all of them when the
//! connection breaks.

use crate::net::Stream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{deleted_before_read, gives_back, reading, ConsumerConfig, ConsumerPartition};
use crate::client::connection::{
    connect_for_fetch, protocol_error, read_frame_max, write_all_with, REQUEST_TIMEOUT,
};
use crate::error::{Error, Result};
use crate::limits;
use crate::protocol::{self, ErrorCode, FetchPartition, FetchWant, Reader};
use crate::storage::record::{BatchHeader, Format};
use crate::sync::lock;

/// What a fetcher hands its consumer.
pub(super) enum Fetched {
    /// A fetch's answer (or why the fetcher stopped).
    Answer(Result<Vec<u8>>),
    /// A partition the fetcher gave back, with the code and message that
    /// said why (`None`: its connection broke).
    Lost(u32, ErrorCode, String),
}

/// Partitions added to a running fetcher; `gone` once it ended (a new one
/// must be started).
#[derive(Debug, Default)]
pub(super) struct Inbox {
    pub(super) added: Vec<ConsumerPartition>,
    pub(super) gone: bool,
}

/// The consumer's fetch-ahead thread.
pub(super) struct Fetcher {
    pub(super) stream: Stream,
    pub(super) addr: String,
    pub(super) topic: String,
    pub(super) partitions: Vec<ConsumerPartition>,
    pub(super) config: ConsumerConfig,
    pub(super) tx: SyncSender<Fetched>,
    pub(super) notices: Arc<Mutex<Vec<String>>>,
    pub(super) closed: Arc<AtomicBool>,
    /// Partitions its consumer adds while it runs.
    pub(super) inbox: Arc<Mutex<Inbox>>,
    /// Following leaders: partitions this broker does not lead, and all of
    /// them when the connection breaks, are given back to the consumer.
    pub(super) located: bool,
    /// Answers' buffers the consumer is done with, read into again.
    pub(super) spare: Arc<Spare>,
}

/// Buffers of answers the consumer handed out whole, kept (at most
/// [`SPARE_MAX`]) for the fetchers to read the next answers into: a fetch
/// answer of a megabyte costs no allocation, no page faults on fresh
/// memory and no copies as its buffer grows.
#[derive(Debug, Default)]
pub(super) struct Spare(Mutex<Vec<Vec<u8>>>);

/// Spare buffers kept at most.
pub(super) const SPARE_MAX: usize = 2;

impl Spare {
    /// A buffer to read an answer into.
    fn take(&self) -> Vec<u8> {
        lock(&self.0).pop().unwrap_or_default()
    }

    /// Keeps `buf` for a next answer, unless enough are kept.
    pub(super) fn give(&self, buf: Vec<u8>) {
        let mut kept = lock(&self.0);
        if kept.len() < SPARE_MAX {
            kept.push(buf);
        }
    }
}

impl Fetcher {
    pub(super) fn run(mut self) {
        let mut frame = Vec::new();
        let mut id = 0u32;
        let want = FetchWant {
            wait_ms_max: self.config.wait_ms_max,
            bytes_min: 1,
            response_bytes_max: self.config.response_bytes_max,
        };
        let answer_bytes_max = protocol::fetch_response_frame_bytes(want.response_bytes_max);
        loop {
            let asked = self.asked(id);
            if asked.is_empty() {
                let mut inbox = lock(&self.inbox);
                if inbox.added.is_empty() {
                    inbox.gone = true;
                    return;
                }
                continue;
            }
            id = id.wrapping_add(1);
            match self.config.read_committed {
                true => protocol::committed_fetch_request(&mut frame, id, want, &asked),
                false => protocol::fetch_request(&mut frame, id, want, &asked),
            }
            let result = self.fetch(&frame, answer_bytes_max);
            let given_back = match &result {
                Ok(body) => self.advance(body),
                Err(_) => Ok(Vec::new()),
            };
            // A broker gone (restarted, stopped answering) is waited for,
            // or, following leaders, its partitions are given back.
            if let Err(e @ (Error::Network { .. } | Error::TimedOut { .. })) = &result {
                if self.located {
                    return self.give_back_all(e);
                }
                if self.reconnect(e) {
                    continue;
                }
                // A read to an end (-e) gives up: say why.
                if !crate::stop::stopping() && !self.closed.load(Ordering::Relaxed) {
                    let _ = self.tx.send(Fetched::Answer(result));
                }
                return;
            }
            let (result, given_back) = match given_back {
                Ok(lost) => (result, lost),
                Err(e) => (Err(e), Vec::new()),
            };
            let failed = result.is_err();
            if self.tx.send(Fetched::Answer(result)).is_err() || failed {
                return;
            }
            for lost in given_back {
                if self.tx.send(lost).is_err() {
                    return;
                }
            }
        }
    }

    /// The partitions to fetch next (those its consumer added included),
    /// each from its offset, less those that reached their end. Each fetch
    /// starts one partition later, so that the answer's budget, spent in
    /// order, favours none of them.
    fn asked(&mut self, id: u32) -> Vec<FetchPartition> {
        if self.located {
            self.partitions.append(&mut lock(&self.inbox).added);
        }
        let first = id as usize % self.partitions.len().max(1);
        let (later, earlier) = self.partitions.split_at(first);
        earlier
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
            .collect()
    }

    /// The connection broke (`why`): every partition goes back to the
    /// consumer, which looks up their leaders, and the fetcher ends.
    fn give_back_all(mut self, why: &Error) {
        let added = {
            let mut inbox = lock(&self.inbox);
            inbox.gone = true;
            std::mem::take(&mut inbox.added)
        };
        self.partitions.extend(added);
        let cause = std::error::Error::source(why).map_or(String::new(), |s| format!(": {s}"));
        for p in &self.partitions {
            let lost = Fetched::Lost(p.partition, ErrorCode::None, format!("cannot {why}{cause}"));
            if self.closed.load(Ordering::Relaxed) || self.tx.send(lost).is_err() {
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
            match connect_for_fetch(&self.addr, self.config.request_timeout) {
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
        let wait =
            Duration::from_millis(u64::from(self.config.wait_ms_max)) + self.config.request_timeout;
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
        let mut body = self.spare.take();
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
    /// Following leaders, the partitions the answer refuses for a reason
    /// a leader elsewhere would not have are dropped and returned, to be
    /// given back.
    fn advance(&mut self, body: &[u8]) -> Result<Vec<Fetched>> {
        let mut r = Reader::new(body);
        let header =
            protocol::decode_response_header(&mut r).map_err(|e| protocol_error(&self.addr, e))?;
        if header.error != ErrorCode::None {
            return Ok(Vec::new());
        }
        let parts = protocol::decode_fetch_response(&mut r, self.config.fetch_version())
            .map_err(|e| protocol_error(&self.addr, e))?;
        let mut given_back = Vec::new();
        for part in parts {
            if let Some(state) = deleted_before_read(&mut self.partitions, &part) {
                // Read on from the log's start; the consumer says so.
                state.offset = part.start_offset;
                continue;
            }
            if self.located && gives_back(part.error) {
                self.partitions.retain(|p| p.partition != part.partition);
                let why = format!(
                    "broker {} says {} ({})",
                    self.addr, part.message, part.error
                );
                given_back.push(Fetched::Lost(part.partition, part.error, why));
                continue;
            }
            let Some(state) = reading(&mut self.partitions, part.partition) else {
                continue;
            };
            // Where to fetch next, by the batches' headers; whatever is not
            // a whole batch is fetched again, and every batch is judged
            // (its CRC32C, its records) by the consumer.
            let mut at = 0;
            while let Some(rest) = part.records.get(at..) {
                let Ok(header) = BatchHeader::decode(Format::Kafka, rest, limits::BATCH_BYTES_MAX)
                else {
                    break;
                };
                if header.total_bytes() > rest.len() as u64 {
                    break;
                }
                state.offset = state.offset.max(header.next_offset());
                at += header.total_bytes() as usize;
            }
        }
        Ok(given_back)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buffers kept are bounded (a consumer's memory is its answers in
    /// flight and two more), and one given back is read into again with
    /// the room it had.
    #[test]
    fn spare_buffers_are_reused_and_at_most_two_are_kept() {
        let spare = Spare::default();
        assert_eq!(spare.take().capacity(), 0, "none yet: a new one");
        for _ in 0..5 {
            spare.give(Vec::with_capacity(1 << 20));
        }
        assert_eq!(lock(&spare.0).len(), SPARE_MAX);
        let reused = spare.take();
        assert!(reused.capacity() >= 1 << 20);
        spare.take();
        assert_eq!(spare.take().capacity(), 0, "both taken");
    }
}
