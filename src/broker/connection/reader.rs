//! The reader: frames in, requests handled in order. It writes the answers
//! that need no wait itself, gathered while more requests are buffered,
//! and queues the others to the writer; when the queue is full it stops
//! reading, and TCP pushes back on the client. An acks=all append that the
//! client waits for with nothing more sent, while the writer is idle, the
//! reader makes durable and answers itself: two thread switches fewer per
//! acknowledgement for a producer with one request in flight.

use std::io;
use std::net::SocketAddr;

use crate::broker::auth::Session;
use crate::net::Stream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Duration;

use super::frames::{FrameError, FrameReader};
use super::requests::handle;
use super::{broken, error_frame, flush_out, Answer, QueuedAnswer, ReaderState, Unsettled};
use crate::broker::shared::Shared;
use crate::protocol::ErrorCode;
use crate::storage::log::Fate;

/// Answers the reader holds before it writes them out even with more
/// requests buffered.
const HELD_ANSWERS_BYTES_MAX: usize = 64 * 1024;

/// Reads and handles the connection's requests until it ends.
pub(super) fn read_requests(
    shared: &Arc<Shared>,
    stream: &Stream,
    tx: &SyncSender<QueuedAnswer>,
    queued_count: &AtomicUsize,
    (peer, session): (SocketAddr, Session),
    (timeout, coordinators): (Duration, Arc<dyn super::txn::Coordinators>),
) {
    let mut reader = frame_reader(shared, stream, timeout);
    // Answers the reader writes itself gather in `state.answer`, and leave
    // together when no request is left in the buffer.
    let mut state = ReaderState {
        session: Some(session),
        coordinators: Some(coordinators),
        ..ReaderState::default()
    };
    loop {
        reader.set_bytes_max(bytes_max(shared, &state));
        // A read that may wait comes after our answers, not before.
        if !reader.has_frame() || state.answer.len() >= HELD_ANSWERS_BYTES_MAX {
            if let Err(unsent) = send_held(shared, stream, &mut state, peer) {
                return unsent.end(shared, stream, peer);
            }
        }
        let body = match reader.next() {
            Ok(body) => body,
            // A peer waiting for answers (a long-poll fetch) is not idle.
            Err(FrameError::Idle) if queued_count.load(Ordering::Acquire) > 0 => continue,
            Err(e) => {
                // Answers already due still go out before the connection ends.
                if send_held(shared, stream, &mut state, peer).is_ok() {
                    end(shared, e, tx, peer, timeout);
                }
                return;
            }
        };
        let held = state.answer.len();
        let answer = handle(shared, body, peer, &mut state);
        if let Some(why) = state.closing.take() {
            let _ = send_held(shared, stream, &mut state, peer);
            shared.log_peer(format_args!("{peer}: closing the connection: {why}"));
            return;
        }
        let writer_busy = queued_count.load(Ordering::Acquire) > 0;
        let answer = match answer {
            Some(Answer::Later(later)) if !writer_busy && !reader.has_frame() => {
                Some(durable_here(shared, later, &mut state.answer))
            }
            other => other,
        };
        let Some(queued) = to_writer(answer, held, writer_busy, &mut state) else {
            continue;
        };
        // The writer's answers follow ours: ours go first.
        if let Err(unsent) = send_held(shared, stream, &mut state, peer) {
            return unsent.end(shared, stream, peer);
        }
        let idle = !writer_busy && !reader.has_frame();
        let queued = match fetch_here(shared, stream, queued, idle) {
            Ok(Some(queued)) => queued,
            Ok(None) => continue,
            Err(e) => return broken(shared, stream, peer, e),
        };
        queued_count.fetch_add(1, Ordering::AcqRel);
        if tx.send(queued).is_err() {
            return;
        }
    }
}

/// The connection's frames, each read within `timeout` once begun, the
/// connection idle after `--idle-timeout`, under the broker's bounds (its
/// request memory, `--max-request-bytes`); the Kafka listener's too.
pub(in crate::broker) fn frame_reader<'a>(
    shared: &'a Shared,
    stream: &'a Stream,
    timeout: Duration,
) -> FrameReader<'a> {
    let idle = Duration::from_millis(shared.config.idle_timeout_ms.max(1));
    FrameReader::new(
        stream,
        shared.config.request_bytes_max,
        timeout,
        &shared.request_memory,
        &shared.stop,
    )
    .idle_timeout(idle)
}

/// The largest request a connection may send now: before it has logged
/// in, [`UNAUTHENTICATED_BYTES_MAX`] (Kafka's `sasl.server.max.receive.size`
/// plays this part), after it the broker's `--max-request-bytes`.
fn bytes_max(shared: &Shared, state: &ReaderState) -> u32 {
    match state.session.as_ref().is_some_and(|s| !s.ready()) {
        true => UNAUTHENTICATED_BYTES_MAX.min(shared.config.request_bytes_max),
        false => shared.config.request_bytes_max,
    }
}

/// Why a request of `len` bytes was refused: the broker's bound, or,
/// below it, the bound on a client that has not logged in yet.
pub(in crate::broker) fn too_large(shared: &Shared, len: impl Into<u64>) -> String {
    let (len, max) = (len.into(), shared.config.request_bytes_max);
    match len <= u64::from(max) {
        true => format!(
            "request of {len} bytes before SASL authentication: at most {UNAUTHENTICATED_BYTES_MAX} bytes until the client has logged in"
        ),
        false => format!(
            "request of {len} bytes exceeds the broker's maximum of {max} bytes (--max-request-bytes)"
        ),
    }
}

/// The largest request a connection that has not logged in may send.
pub(in crate::broker) const UNAUTHENTICATED_BYTES_MAX: u32 = 64 * 1024;

/// Which answer, if any, the writer must send. An answer ready at once
/// stays with the reader's while the writer is idle (nothing before it
/// waits to be written): the writer sleeps on, and a thread switch is
/// saved per request. Otherwise it follows the writer's queue, taking its
/// bytes (after `held`) out of the reader's.
fn to_writer(
    answer: Option<Answer>,
    held: usize,
    writer_busy: bool,
    state: &mut ReaderState,
) -> Option<QueuedAnswer> {
    match answer? {
        Answer::Now if !writer_busy => None,
        Answer::Now => Some(QueuedAnswer::Ready(state.answer.split_off(held))),
        Answer::Later(queued) => Some(queued),
    }
}

/// An acks=all answer when the client has sent nothing more and the writer
/// is idle: rather than wake the flusher and then the writer, the reader
/// flushes the partition itself (unless another thread flushes it now)
/// and answers, when that made the records durable (a single copy: a
/// replicated partition waits for its followers too). Otherwise the
/// writer waits for them, and answers at the request's deadline. A disk
/// that hangs holds this reader in its fsync, and the answer with it:
/// the client's own request timeout ends that wait (klog's and Kafka's
/// clients have one), and the connections it makes meanwhile find the
/// partition in flight and get their timeouts from their writers.
fn durable_here(shared: &Shared, queued: QueuedAnswer, out: &mut Vec<u8>) -> Answer {
    if let QueuedAnswer::Durable {
        correlation_id,
        partition: p,
        appended,
        deadline,
    } = &queued
    {
        crate::broker::flusher::flush_here(shared, p);
        let complete = p.high_watermark.load(Ordering::Acquire) >= appended.end_offset;
        if complete || p.failed.load(Ordering::Acquire) {
            super::writer::await_durable(out, *correlation_id, p, appended, *deadline);
            return Answer::Now;
        }
    }
    Answer::Later(queued)
}

/// A consumer's fetch whose records are there while the writer is `idle`
/// and the client has sent nothing more: the reader answers it itself (a
/// thread switch fewer per fetch). `None` once answered; otherwise the
/// answer, for the writer. While it sends, the reader reads no further
/// request: a client that writes a large request after a fetch and reads
/// nothing until that write is done waits for the write timeout (klog's
/// consumers read each answer before they ask again; the Kafka listener
/// does not answer here).
fn fetch_here(
    shared: &Shared,
    stream: &Stream,
    queued: QueuedAnswer,
    idle: bool,
) -> io::Result<Option<QueuedAnswer>> {
    if let (
        true,
        QueuedAnswer::Fetch {
            correlation_id,
            asked,
            ..
        },
    ) = (idle, &queued)
    {
        if super::transfer::fetch_now(shared, stream, *correlation_id, asked)? {
            return Ok(None);
        }
    }
    Ok(Some(queued))
}

/// Why the answers the reader held could not leave.
enum Unsent {
    /// Appends they answer were undone (see [`settle`]).
    Undone,
    /// The socket failed.
    Broken(io::Error),
}

impl Unsent {
    /// Ends the connection.
    fn end(self, shared: &Shared, stream: &Stream, peer: SocketAddr) {
        if let Unsent::Broken(e) = self {
            broken(shared, stream, peer, e);
        }
    }
}

/// Sends the answers the reader holds, once the appends they answer are
/// in their files.
fn send_held(
    shared: &Shared,
    stream: &Stream,
    state: &mut ReaderState,
    peer: SocketAddr,
) -> Result<(), Unsent> {
    if !settle(shared, &mut state.unsettled, peer) {
        return Err(Unsent::Undone);
    }
    flush_out(stream, &mut state.answer).map_err(Unsent::Broken)
}

/// Writes the appends gathered in memory of the `unsettled` partitions to
/// their files, and checks that every append this reader made is in its
/// file: a failed write (of ours or of another connection's appends
/// gathered with ours) undoes them all. False when one is not: the answers
/// about them must not leave, and the connection closes (the client counts
/// those records failed; none of them will appear).
fn settle(shared: &Shared, unsettled: &mut Vec<Unsettled>, peer: SocketAddr) -> bool {
    let mut ok = true;
    for Unsettled {
        partition: p,
        epoch,
        last_offset,
    } in unsettled.drain(..)
    {
        let mut log = p.lock();
        let written = log.write_pending();
        let fate = log.fate(epoch, last_offset);
        drop(log);
        p.written();
        if fate != Fate::InFile {
            let why = match written {
                Err(e) => e.to_string(),
                Ok(()) => {
                    format!("records up to offset {last_offset} were undone by a failed write")
                }
            };
            shared.log_peer(format_args!(
                "{peer}: closing the connection: {}-{}: {why}",
                p.topic, p.partition
            ));
            ok = false;
        }
    }
    ok
}

/// Ends the connection over a frame that could not be read, saying why.
fn end(
    shared: &Shared,
    e: FrameError,
    tx: &SyncSender<QueuedAnswer>,
    peer: SocketAddr,
    timeout: Duration,
) {
    match e {
        FrameError::Closed | FrameError::Stopped => {}
        FrameError::Garbage(why) => shared.log_peer(format_args!("{peer}: closing the connection: {why}")),
        FrameError::TooLarge(len, header) => {
            let msg = too_large(shared, len);
            shared.log_peer(format_args!("{peer}: closing the connection: {msg}"));
            if let Some(h) = header {
                let frame = error_frame(h.correlation_id, ErrorCode::RequestTooLarge, &msg);
                let _ = tx.send(QueuedAnswer::Ready(frame));
            }
        }
        FrameError::Idle => shared.log_peer(format_args!(
            "{peer}: closing the connection: idle for {} ms (--idle-timeout)",
            shared.config.idle_timeout_ms
        )),
        FrameError::NoMemory => shared.log_peer(format_args!(
            "{peer}: closing the connection: the broker's request memory (--max-queued-request-bytes, {} bytes) stayed full for the request timeout of {} ms",
            shared.config.queued_request_bytes_max,
            timeout.as_millis()
        )),
        FrameError::Timeout => shared.log_peer(format_args!(
            "{peer}: closing the connection: a frame was not completed within the request timeout of {} ms",
            timeout.as_millis()
        )),
        FrameError::Io(e) => {
            if !matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) {
                shared.log_peer(format_args!("{peer}: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::shared::Partition;
    use crate::broker::testing::{append, batch_of, partition, shared};

    fn peer() -> SocketAddr {
        "127.0.0.1:1".parse().unwrap()
    }

    #[test]
    fn an_answer_ready_at_once_stays_with_the_readers_while_the_writer_is_idle() {
        let mut state = ReaderState {
            answer: b"earlier-answer".to_vec(),
            ..ReaderState::default()
        };
        let held = state.answer.len();
        state.answer.extend_from_slice(b"this-answer");
        assert!(to_writer(Some(Answer::Now), held, false, &mut state).is_none());
        assert_eq!(state.answer, b"earlier-answerthis-answer");
        // A busy writer: the answer must follow the queue, not pass it.
        let Some(QueuedAnswer::Ready(frame)) = to_writer(Some(Answer::Now), held, true, &mut state)
        else {
            panic!("the answer goes to the writer")
        };
        assert_eq!(
            (frame.as_slice(), state.answer.as_slice()),
            (&b"this-answer"[..], &b"earlier-answer"[..])
        );
        let later = Answer::Later(QueuedAnswer::Ready(b"x".to_vec()));
        assert!(matches!(
            to_writer(Some(later), held, false, &mut state),
            Some(QueuedAnswer::Ready(_))
        ));
        assert!(to_writer(None, held, true, &mut state).is_none());
    }

    /// An acks=all append (as `acknowledge` queues it) to `p`.
    fn durable_answer(shared: &Shared, p: &Arc<Partition>) -> QueuedAnswer {
        let info = append(p);
        shared.mark_dirty(p, true);
        QueuedAnswer::Durable {
            correlation_id: 7,
            partition: Arc::clone(p),
            appended: crate::broker::shared::Appended {
                base_offset: info.base_offset,
                end_offset: info.last_offset + 1,
                epoch: info.epoch,
                leader_epoch: None,
            },
            deadline: std::time::Instant::now() + Duration::from_secs(5),
        }
    }

    /// No flusher thread runs here: only the reader's own flush can make
    /// the records durable and the answer ready.
    #[test]
    fn the_reader_flushes_and_answers_an_acks_all_append_itself_when_the_disk_is_free() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        let queued = durable_answer(&shared, &p);
        let mut out = Vec::new();
        assert!(matches!(
            durable_here(&shared, queued, &mut out),
            Answer::Now
        ));
        assert_eq!(p.flushed_offset.load(Ordering::Acquire), 2);
        let found = crate::broker::testing::answers(&out);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].0, found[0].1), (7, ErrorCode::None));
        assert_eq!(found[0].2, 1u64.to_le_bytes(), "its base offset");
        assert!(lock_dirty_empty(&shared), "taken and given back");
    }

    fn lock_dirty_empty(shared: &Shared) -> bool {
        let dirty = crate::sync::lock(&shared.dirty);
        dirty.partitions.is_empty() && dirty.in_flight.is_empty()
    }

    /// A connected pair: the broker's end and the client's.
    fn pair() -> (Stream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (Stream::Tcp(server), client)
    }

    fn fetch_of(replica_id: &str, bytes_min: u32) -> QueuedAnswer {
        QueuedAnswer::Fetch {
            correlation_id: 5,
            deadline: std::time::Instant::now() + Duration::from_secs(5),
            asked: super::super::FetchAsked {
                version: 2,
                replica_id: replica_id.into(),
                read_committed: false,
                bytes_min,
                response_bytes_max: 1 << 20,
                partitions: vec![crate::broker::testing::ask("t", 0)],
            },
        }
    }

    /// A consumer's fetch whose records are there, with the writer idle:
    /// the reader answers it (its answer is on the socket, whole). One that
    /// must wait, one behind a busy writer, and a follower's are the
    /// writer's, with nothing written.
    #[test]
    fn the_reader_answers_a_fetch_that_need_not_wait_while_the_writer_is_idle() {
        use std::io::Read;
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        crate::broker::flusher::flush_partition(&shared, &p);
        let (stream, mut client) = pair();
        let later = |q: Option<QueuedAnswer>| matches!(q, Some(QueuedAnswer::Fetch { .. }));
        assert!(later(
            fetch_here(&shared, &stream, fetch_of("", 1 << 20), true).unwrap()
        ));
        assert!(later(
            fetch_here(&shared, &stream, fetch_of("", 1), false).unwrap()
        ));
        assert!(later(
            fetch_here(&shared, &stream, fetch_of("b", 1), true).unwrap()
        ));
        assert!(fetch_here(&shared, &stream, fetch_of("", 1), true)
            .unwrap()
            .is_none());
        drop(stream);
        let mut got = Vec::new();
        client.read_to_end(&mut got).unwrap();
        let found = crate::broker::testing::answers(&got);
        assert_eq!(found.len(), 1, "one answer, and only the one answered");
        assert_eq!((found[0].0, found[0].1), (5, ErrorCode::None));
        let batch = crate::broker::testing::batch();
        assert!(found[0].2.len() > batch.len(), "with its records");
    }

    /// A replicated partition: the reader's flush makes the records durable
    /// here, and the answer still waits (with the writer) for the in-sync
    /// followers.
    #[test]
    fn the_reader_leaves_a_replicated_answer_to_the_writer_until_the_followers_have_it() {
        let (_sim, shared) = shared();
        let p = crate::broker::testing::led_partition(&shared, "t", &["b"]);
        let queued = durable_answer(&shared, &p);
        let mut out = Vec::new();
        assert!(matches!(
            durable_here(&shared, queued, &mut out),
            Answer::Later(QueuedAnswer::Durable { .. })
        ));
        assert!(out.is_empty());
        assert_eq!(p.flushed_offset.load(Ordering::Acquire), 1, "flushed here");
    }

    /// A flusher thread has the partition: the reader does not flush it
    /// twice at once, and leaves the answer to the writer.
    #[test]
    fn the_reader_leaves_the_answer_to_the_writer_while_another_thread_flushes() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        let queued = durable_answer(&shared, &p);
        let k = crate::broker::shared::key(&p);
        crate::sync::lock(&shared.dirty).in_flight.insert(k);
        let mut out = Vec::new();
        assert!(matches!(
            durable_here(&shared, queued, &mut out),
            Answer::Later(QueuedAnswer::Durable { .. })
        ));
        assert!(out.is_empty());
        assert_eq!(p.flushed_offset.load(Ordering::Acquire), 0, "not flushed");
    }

    #[test]
    fn settle_writes_the_gathered_appends_before_their_answers_leave() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        let info = append(&p);
        assert_eq!(p.lock().fate(info.epoch, info.last_offset), Fate::Gathered);
        let mut state = ReaderState::default();
        state.note_unsettled(&p, info.epoch, info.last_offset);
        assert!(settle(&shared, &mut state.unsettled, peer()));
        assert!(state.unsettled.is_empty());
        assert_eq!(p.lock().fate(info.epoch, info.last_offset), Fate::InFile);
    }

    /// A follower fetches what its leader wrote before the fsync: the
    /// write of an acks=1 append wakes its fetch, not a consumer's.
    #[test]
    fn settling_a_replicated_append_wakes_the_followers_fetch() {
        let (_sim, shared) = shared();
        let p = crate::broker::testing::led_partition(&shared, "t", &["b"]);
        let asked = [crate::protocol::FetchPartition {
            leader_epoch: Some(0),
            ..crate::broker::testing::ask("t", 0)
        }];
        let follower = shared.watch_fetch_by(&asked, true);
        let consumer = shared.watch_fetch(&asked);
        let info = append(&p);
        assert!(
            !follower.woken(),
            "gathered in memory: nothing to fetch yet"
        );
        let mut state = ReaderState::default();
        state.note_unsettled(&p, info.epoch, info.last_offset);
        assert!(settle(&shared, &mut state.unsettled, peer()));
        assert!(follower.woken() && !consumer.woken());
    }

    #[test]
    fn settle_refuses_when_a_failed_write_undid_the_appends() {
        let (sim, shared) = shared();
        let p = partition(&shared, "t");
        // Gathered in memory; its bytes need blocks the disk no longer has.
        sim.set_capacity(Some(sim.allocated()));
        let info = p.lock().append(&mut batch_of(&[7; 64 * 1024]), 0).unwrap();
        let mut state = ReaderState::default();
        state.note_unsettled(&p, info.epoch, info.last_offset);
        assert!(
            !settle(&shared, &mut state.unsettled, peer()),
            "a full disk undid them"
        );
        assert!(state.unsettled.is_empty());
        assert_eq!(p.lock().fate(info.epoch, info.last_offset), Fate::Undone);
    }
}
