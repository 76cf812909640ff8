//! The producer's response side: the requests waiting for their
//! acknowledgements, the thread that reads them, and how long each wait
//! may last.

use crate::net::Stream;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::client::connection::{protocol_error, read_frame, Patience};
use crate::client::report::AckReport;
use crate::client::Sources;
use crate::error::Error;
use crate::protocol::{self, ErrorCode, Reader};
use crate::sync::lock;

/// A produce request awaiting its response.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(super) id: u32,
    /// The partition it appends to.
    pub(crate) partition: u32,
    /// Its batch's place among the partition's ([`crate::client::producer::Batches::ordinal`]).
    pub(crate) ordinal: u64,
    /// Its records.
    pub(crate) records: u64,
    /// When it was sent (last), for its request timeout.
    pub(super) sent: Instant,
    /// Its records' delivery deadline.
    pub(crate) deadline: Instant,
    /// The request's frame, to send again on a new connection should this
    /// one break before the answer.
    pub(super) request: Vec<u8>,
    /// Where its batch starts in `request` (the frame's last bytes), to
    /// be sent again in a request of another producer.
    pub(super) batch_at: usize,
    /// Its records' sources, for the report (empty when none is written).
    pub(crate) sources: Sources,
}

/// A request a routed producer gives back unanswered (see
/// [`crate::client::Producer::connect_routed`]): its broker answered that
/// it does not lead the partition now (or has too few in-sync replicas),
/// or the connection broke under it. Its records are neither delivered
/// nor failed yet: they go to the partition's leader, within their
/// deadline.
#[derive(Debug)]
pub(crate) struct Orphan {
    /// The request.
    pub(crate) waiting: Waiting,
    /// Why it came back.
    pub(crate) why: Error,
    /// It was sent before (its records may be appended twice once sent
    /// again); `false` for a batch parked before it was ever sent.
    pub(crate) sent_before: bool,
}

impl Waiting {
    /// Its batch, as sent.
    pub(crate) fn batch(&self) -> &[u8] {
        &self.request[self.batch_at..]
    }

    /// A batch of `records` for `partition` that was never sent, to be
    /// sent by a routed producer ([`crate::client::Producer::adopt`])
    /// before `deadline`.
    pub(crate) fn unsent(
        (partition, ordinal): (u32, u64),
        records: u64,
        deadline: Instant,
        batch: &[u8],
        sources: Sources,
    ) -> Waiting {
        Waiting {
            id: 0,
            partition,
            ordinal,
            records,
            sent: Instant::now(),
            deadline,
            request: batch.to_vec(),
            batch_at: 0,
            sources,
        }
    }
}

/// Whether a routed producer gives a request back for an answer with
/// `code` rather than counting its records failed: its leader moved, or
/// could not make it durable in time (`timeout`: as Kafka's
/// `REQUEST_TIMED_OUT`, it is sent again, within its deadline), or its
/// log stopped (`storage_error`, retriable as Kafka's
/// `KAFKA_STORAGE_ERROR`: a replica whose fsync failed hands the
/// partition over to the other in-sync replicas; a single copy stays
/// stopped, and the records fail at their deadline with its reason), or
/// it follows a batch of an idempotent producer's that is being sent
/// again (`out_of_order_sequence`: the partition took none of the batches
/// after the one it lacks; they go again, in order, after it).
fn gives_back(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::Timeout
            | ErrorCode::NotLeader
            | ErrorCode::LeaderNotAvailable
            | ErrorCode::PartitionElsewhere
            | ErrorCode::NotEnoughReplicas
            | ErrorCode::StorageError
            | ErrorCode::OutOfOrderSequence
    )
}

/// What the producer's response reader shares with it.
#[derive(Debug, Default)]
pub(super) struct Acks {
    /// Requests awaiting a response, in the order sent.
    pub(super) waiting: VecDeque<Waiting>,
    /// Bytes of their frames.
    pub(super) waiting_bytes: usize,
    /// The connection broke under the waiting requests, or their broker
    /// was silent past the request timeout (their delivery deadline did
    /// not pass): they may go again on a new one.
    pub(super) resend: bool,
    /// Time from sending a request to its acknowledgement, per record.
    pub(super) latency: crate::stats::Histogram,
    pub(super) delivered: u64,
    pub(super) failed: u64,
    /// The first error, reported by `send` or `close`.
    pub(super) error: Option<Error>,
    /// The connection is gone: nothing more will be acknowledged.
    pub(super) broken: bool,
    /// The producer waits for room in the window: wake it on an answer
    /// (and only then: a wake-up is a syscall).
    pub(super) sender_waits: bool,
    /// The producer is closing: once nothing is waiting, the reader ends.
    pub(super) closing: bool,
    /// Routed: requests whose answer says their partition is led
    /// elsewhere, or that a broken connection left unanswered, go to
    /// `orphans` (see [`Orphan`]).
    pub(super) routed: bool,
    pub(super) orphans: Vec<Orphan>,
    /// Routed: the partitions of requests that failed for good (each
    /// once per request), for the cluster producer to note.
    pub(super) failed_partitions: Vec<u32>,
    /// Where acknowledged records are written, if anywhere
    /// ([`crate::client::ProducerConfig::report`]).
    pub(super) report: Option<&'static AckReport>,
}

#[derive(Debug, Default)]
pub(super) struct AckState {
    pub(super) acks: Mutex<Acks>,
    pub(super) changed: Condvar,
}

/// How long a write of produce requests waits for the broker to take them:
/// the delivery timeout, less once the reader gave the connection up (a
/// deadline passed) or a stop signal's grace is over.
pub(super) fn write_patience<'a>(
    state: &'a AckState,
    addr: &'a str,
    timeout: Duration,
) -> impl Patience + 'a {
    let deadline = Instant::now() + timeout;
    move |op| {
        if crate::stop::grace_over() {
            return Err(Error::Stopped {
                addr: addr.to_string(),
            });
        }
        if lock(&state.acks).broken || Instant::now() >= deadline {
            return Err(Error::TimedOut {
                op,
                addr: addr.to_string(),
                waited_ms: timeout.as_millis() as u64,
            });
        }
        Ok(())
    }
}

/// How long the response reader waits for the next acknowledgement: while
/// nothing is waiting, as long as the producer lives; else until the first
/// delivery deadline of a request waiting, the request timeout of the
/// oldest (the broker answers in order: then the connection is given up,
/// and its requests go again), or a stop signal's grace is over.
pub(super) fn ack_patience<'a>(
    state: &'a AckState,
    addr: &'a str,
    (timeout, request_timeout): (Duration, Duration),
) -> impl Patience + 'a {
    move |_| {
        let mut acks = lock(&state.acks);
        if acks.waiting.is_empty() {
            if acks.closing {
                // Nothing more to hear; the error is not kept.
                return Err(Error::Stopped {
                    addr: addr.to_string(),
                });
            }
            return Ok(());
        }
        let now = Instant::now();
        if acks.waiting.iter().any(|w| w.deadline <= now) {
            return Err(Error::TimedOut {
                op: "wait for acknowledgements from",
                addr: addr.to_string(),
                waited_ms: timeout.as_millis() as u64,
            });
        }
        if acks
            .waiting
            .front()
            .is_some_and(|w| w.sent + request_timeout <= now)
        {
            // Silence is a failure too: the requests go again.
            acks.resend = true;
            return Err(Error::TimedOut {
                op: "wait for an answer from",
                addr: addr.to_string(),
                waited_ms: request_timeout.as_millis() as u64,
            });
        }
        if crate::stop::grace_over() {
            return Err(Error::Stopped {
                addr: addr.to_string(),
            });
        }
        Ok(())
    }
}

/// The producer's response reader: matches acknowledgements to requests.
/// `timeouts`: the delivery timeout and the request timeout.
pub(super) fn read_acks(
    stream: &Stream,
    addr: &str,
    state: &AckState,
    timeouts: (Duration, Duration),
) {
    let mut buf = Vec::new();
    // Acknowledgements are small: one read brings in many.
    let mut input = std::io::BufReader::with_capacity(64 * 1024, stream);
    let mut patience = ack_patience(state, addr, timeouts);
    loop {
        let read = read_frame(&mut input, &mut buf, addr, &mut patience);
        let mut acks = lock(&state.acks);
        let mut r = Reader::new(&buf);
        let header = read.and_then(|()| {
            protocol::decode_response_header(&mut r).map_err(|e| protocol_error(addr, e))
        });
        let going_on = match header {
            Ok(h) => acknowledge(&mut acks, h, &buf[r.position()..], addr),
            // The connection broke: the producer sends the waiting again on
            // a new one, within their deadline.
            Err(Error::Network { .. }) => {
                acks.resend = true;
                false
            }
            Err(e) => {
                // The connection ended. After a clean close with nothing
                // waiting that is the end; after a request timeout the
                // waiting go again; otherwise they fail.
                if !acks.waiting.is_empty() && !acks.resend {
                    acks.error.get_or_insert(e);
                }
                false
            }
        };
        if !going_on {
            acks.broken = true;
            state.changed.notify_all();
            return;
        }
        if acks.sender_waits {
            state.changed.notify_all();
        }
    }
}

/// Matches the answer `h` (the rest of its frame `body`) to the first
/// request waiting; false when it answers none (the connection cannot go
/// on).
fn acknowledge(acks: &mut Acks, h: protocol::ResponseHeader, body: &[u8], addr: &str) -> bool {
    let Some(waiting) = acks.waiting.pop_front() else {
        acks.error.get_or_insert(Error::Protocol {
            addr: addr.to_string(),
            reason: format!("an answer to no request ({})", h.correlation_id),
        });
        return false;
    };
    acks.waiting_bytes -= waiting.request.len();
    let (id, records, sent) = (waiting.id, waiting.records, waiting.sent);
    if h.correlation_id == id && acks.routed && gives_back(h.error) {
        let why = Error::Broker {
            code: h.error,
            message: h.message,
        };
        acks.orphans.push(Orphan {
            waiting,
            why,
            sent_before: true,
        });
    } else if h.correlation_id != id {
        acks.failed += records;
        if acks.routed {
            acks.failed_partitions.push(waiting.partition);
        }
        acks.error.get_or_insert(Error::Protocol {
            addr: addr.to_string(),
            reason: format!("response {} to request {id}", h.correlation_id),
        });
    } else if h.error == ErrorCode::None {
        acks.delivered += records;
        acks.latency
            .record_n(sent.elapsed().as_micros() as u64, records);
        if let Some(report) = acks.report {
            match Reader::new(body).u64("base_offset") {
                Ok(base) => {
                    report.acknowledged(waiting.partition, base, waiting.batch(), &waiting.sources)
                }
                Err(e) => {
                    acks.error.get_or_insert(protocol_error(addr, e));
                }
            }
        }
    } else {
        acks.failed += records;
        if acks.routed {
            acks.failed_partitions.push(waiting.partition);
        }
        acks.error.get_or_insert(Error::Broker {
            code: h.error,
            message: h.message,
        });
    }
    true
}
