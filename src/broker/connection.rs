//! One client connection: its reader (frames in, requests handled in
//! order) and its writer (responses out, in the same order; fetched records
//! sent with `sendfile`).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{error_code, Partition, Shared};
use crate::limits;
use crate::protocol::{self, put, ErrorCode, FetchPartition, Request, RequestError, RequestHeader, TopicMetadata};
use crate::storage::log::{Fate, FileSlice};

/// A response waiting its turn in the connection's queue.
enum Pending {
    /// Encoded and ready.
    Ready(Vec<u8>),
    /// acks=all: answer once `partition` is durable up to `offset`.
    Durable {
        correlation_id: u32,
        partition: Arc<Partition>,
        base_offset: u64,
        offset: u64,
        /// The log's undo epoch at the append (see [`crate::storage::log::Log::fate`]).
        epoch: u64,
        deadline: Instant,
    },
    /// A fetch, evaluated when its turn comes.
    Fetch {
        correlation_id: u32,
        bytes_min: u32,
        deadline: Instant,
        partitions: Vec<FetchPartition>,
    },
}

/// How reading a frame failed.
enum FrameError {
    /// The peer closed between frames.
    Closed,
    /// Bytes that are not a frame; the connection cannot go on.
    Garbage(String),
    /// A frame over the limit, with its request header when it came.
    TooLarge(u32, Option<RequestHeader>),
    /// The peer started a frame and did not finish it in time.
    Timeout,
    /// The socket failed.
    Io(io::Error),
}

/// Serves one connection until the peer closes it, it breaks the protocol,
/// or the broker stops.
pub(super) fn serve(shared: &Arc<Shared>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let timeout = Duration::from_millis(shared.config.request_timeout_ms.max(1));
    let _ = stream.set_write_timeout(Some(timeout));
    let writer_stream = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            shared.log(format_args!("{peer}: {e}"));
            return;
        }
    };
    let (tx, rx) = mpsc::sync_channel::<Pending>(shared.config.in_flight_max.max(1) - 1);
    // Responses queued to the writer and not yet written.
    let queued = Arc::new(AtomicUsize::new(0));
    let writer = {
        let shared = Arc::clone(shared);
        let queued = Arc::clone(&queued);
        std::thread::Builder::new()
            .name(format!("write-{peer}"))
            .spawn(move || write_responses(&shared, writer_stream, rx, peer, &queued))
    };
    let writer = match writer {
        Ok(w) => w,
        Err(e) => {
            shared.log(format_args!("{peer}: cannot start a writer: {e}"));
            return;
        }
    };
    read_requests(shared, &stream, &tx, &queued, peer, timeout);
    drop(tx);
    let _ = writer.join();
}

fn read_requests(
    shared: &Arc<Shared>,
    stream: &TcpStream,
    tx: &SyncSender<Pending>,
    queued: &AtomicUsize,
    peer: SocketAddr,
    timeout: Duration,
) {
    let max = shared.config.request_bytes_max;
    let mut reader = FrameReader::new(stream, max, timeout);
    // Answers the reader writes itself gather in `state.answer`, and leave
    // together when no request is left in the buffer. The appends they
    // answer reach their files first (`settle`).
    let mut state = ReaderState {
        touched: Vec::new(),
        answer: Vec::new(),
        topic: String::new(),
    };
    loop {
        if !reader.has_frame() || state.answer.len() >= 64 * 1024 {
            if !settle(shared, &mut state.touched, peer) {
                return;
            }
            if let Err(e) = flush_out(stream, &mut state.answer) {
                return broken(shared, stream, peer, e);
            }
        }
        let next = reader.next();
        // Answers already due still go out before the connection ends.
        if next.is_err() && (!settle(shared, &mut state.touched, peer) || flush_out(stream, &mut state.answer).is_err())
        {
            return;
        }
        let body = match next {
            Ok(body) => body,
            Err(FrameError::Closed) => return,
            Err(FrameError::Garbage(why)) => {
                shared.log(format_args!("{peer}: closing the connection: {why}"));
                return;
            }
            Err(FrameError::TooLarge(len, header)) => {
                let msg =
                    format!("request of {len} bytes exceeds the broker's maximum of {max} bytes (--max-request-bytes)");
                shared.log(format_args!("{peer}: closing the connection: {msg}"));
                if let Some(h) = header {
                    let _ = tx.send(Pending::Ready(error_frame(
                        h.correlation_id,
                        ErrorCode::RequestTooLarge,
                        &msg,
                    )));
                }
                return;
            }
            Err(FrameError::Timeout) => {
                shared.log(format_args!(
                    "{peer}: closing the connection: a frame was not completed within the request timeout of {} ms",
                    timeout.as_millis()
                ));
                return;
            }
            Err(FrameError::Io(e)) => {
                if !matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) {
                    shared.log(format_args!("{peer}: {e}"));
                }
                return;
            }
        };
        let before = state.answer.len();
        let pending = match handle(shared, body, peer, &mut state) {
            None => continue,
            // Nothing before it is waiting to be written, so the writer is
            // idle: the answer stays with ours, and the writer sleeps on (a
            // thread switch saved per request).
            Some(Answer::Now) if queued.load(Ordering::Acquire) == 0 => continue,
            Some(Answer::Now) => Pending::Ready(state.answer.split_off(before)),
            Some(Answer::Later(pending)) => pending,
        };
        // The writer's answers follow ours: ours go first.
        if !settle(shared, &mut state.touched, peer) {
            return;
        }
        if let Err(e) = flush_out(stream, &mut state.answer) {
            return broken(shared, stream, peer, e);
        }
        queued.fetch_add(1, Ordering::AcqRel);
        if tx.send(pending).is_err() {
            return;
        }
    }
}

/// Writes the appends gathered in memory of `touched` partitions to their
/// files, and checks that every append this reader made is in its file:
/// a failed write (of ours or of another connection's appends gathered
/// with ours) undoes them all. False when one is not: the answers about
/// them must not leave, and the connection closes (the client counts
/// those records failed; none of them will appear).
fn settle(shared: &Shared, touched: &mut Vec<(Arc<Partition>, u64, u64)>, peer: SocketAddr) -> bool {
    let mut ok = true;
    for (p, epoch, last_offset) in touched.drain(..) {
        let mut log = p.lock();
        let written = log.write_pending();
        let fate = log.fate(epoch, last_offset);
        drop(log);
        if fate != Fate::InFile {
            let why = match written {
                Err(e) => e.to_string(),
                Ok(()) => format!("records up to offset {last_offset} were undone by a failed write"),
            };
            shared.log(format_args!(
                "{peer}: closing the connection: {}-{}: {why}",
                p.topic, p.partition
            ));
            ok = false;
        }
    }
    ok
}

/// Reads a connection's frames through one buffer: a read syscall brings
/// in as many waiting requests as fit, and frames already buffered cost
/// none. Memory grows with the bytes that actually arrive, never ahead of
/// them, and a frame's length is checked against the limit first.
struct FrameReader<'a> {
    stream: &'a TcpStream,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes.
    pos: usize,
    /// End of the bytes read.
    filled: usize,
    max: u32,
    timeout: Duration,
    /// The socket's read timeout as last set (to skip needless syscalls).
    timeout_set: Option<Option<Duration>>,
}

/// Bytes read at once at least.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Bytes a buffer grows by at most per read while a large frame arrives.
const GROW_CHUNK_BYTES: usize = 1 << 20;

impl<'a> FrameReader<'a> {
    fn new(stream: &'a TcpStream, max: u32, timeout: Duration) -> FrameReader<'a> {
        FrameReader {
            stream,
            buf: vec![0; READ_CHUNK_BYTES],
            pos: 0,
            filled: 0,
            max,
            timeout,
            timeout_set: None,
        }
    }

    fn set_timeout(&mut self, t: Option<Duration>) {
        // Durations are rounded to 10 ms so that a deadline a little
        // closer does not cost a syscall per read.
        let rounded = t.map(|d| Duration::from_millis((d.as_millis() as u64).div_ceil(10).max(1) * 10));
        if self.timeout_set != Some(rounded) {
            let _ = self.stream.set_read_timeout(rounded);
            self.timeout_set = Some(rounded);
        }
    }

    /// Reads until `n` unconsumed bytes are buffered. With nothing
    /// buffered the wait is unbounded (an idle connection); once a frame
    /// has begun, it must be complete by `deadline`.
    fn fill(&mut self, n: usize, deadline: &mut Option<Instant>) -> Result<(), FrameError> {
        while self.filled - self.pos < n {
            if self.pos > 0 && (self.pos == self.filled || self.buf.len() - self.pos < n) {
                self.buf.copy_within(self.pos..self.filled, 0);
                self.filled -= self.pos;
                self.pos = 0;
            }
            let want = self.pos + n;
            if self.buf.len() < want {
                let grown = (self.buf.len() + GROW_CHUNK_BYTES).min(want.max(READ_CHUNK_BYTES));
                self.buf.resize(grown, 0);
            }
            if self.filled == self.pos && deadline.is_none() {
                self.set_timeout(None);
            } else {
                let at = *deadline.get_or_insert_with(|| Instant::now() + self.timeout);
                let left = at.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(FrameError::Timeout);
                }
                self.set_timeout(Some(left));
            }
            let end = self.buf.len();
            match (&*self.stream).read(&mut self.buf[self.filled..end]) {
                Ok(0) if self.filled == self.pos && deadline.is_none() => return Err(FrameError::Closed),
                Ok(0) => {
                    return Err(FrameError::Garbage(
                        "the peer closed the connection in the middle of a frame".into(),
                    ))
                }
                Ok(k) => {
                    self.filled += k;
                    deadline.get_or_insert_with(|| Instant::now() + self.timeout);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(FrameError::Timeout)
                }
                Err(e) => return Err(FrameError::Io(e)),
            }
        }
        Ok(())
    }

    /// Whether a whole frame is buffered (the next `next` makes no syscall).
    fn has_frame(&self) -> bool {
        let have = self.filled - self.pos;
        if have < protocol::LENGTH_BYTES {
            return false;
        }
        let len = u32::from_le_bytes(self.buf[self.pos..self.pos + 4].try_into().expect("4 bytes"));
        have - protocol::LENGTH_BYTES >= len as usize
    }

    /// The next frame's body, consumed.
    fn next(&mut self) -> Result<&mut [u8], FrameError> {
        if self.pos == self.filled && self.buf.len() > GROW_CHUNK_BYTES {
            // A large request is done with: give its memory back.
            self.buf = vec![0; READ_CHUNK_BYTES];
            (self.pos, self.filled) = (0, 0);
        }
        let mut deadline = None;
        self.fill(protocol::LENGTH_BYTES, &mut deadline)?;
        let len: [u8; 4] = self.buf[self.pos..self.pos + 4].try_into().expect("4 bytes");
        let n = u32::from_le_bytes(len);
        if (n as usize) < protocol::REQUEST_HEADER_BYTES {
            return Err(FrameError::Garbage(format!(
                "a frame of {n} bytes is shorter than a request header"
            )));
        }
        if n > self.max {
            if len.iter().all(|b| b.is_ascii_uppercase() || *b == b' ') {
                return Err(FrameError::Garbage(format!(
                    "{:?} is not a frame (HTTP or another text protocol?)",
                    String::from_utf8_lossy(&len)
                )));
            }
            let header = self
                .fill(4 + protocol::REQUEST_HEADER_BYTES, &mut deadline)
                .ok()
                .and_then(|()| protocol::decode_request_header(&self.buf[self.pos + 4..]).ok());
            return Err(FrameError::TooLarge(n, header));
        }
        let total = 4 + n as usize;
        self.fill(total, &mut deadline)?;
        let start = self.pos + 4;
        self.pos += total;
        Ok(&mut self.buf[start..start + n as usize])
    }
}

fn error_frame(correlation_id: u32, error: ErrorCode, message: &str) -> Vec<u8> {
    let mut out = Vec::new();
    error_into(&mut out, correlation_id, error, message);
    out
}

/// Appends an error answer to `out`.
fn error_into(out: &mut Vec<u8>, correlation_id: u32, error: ErrorCode, message: &str) {
    let start = protocol::begin_response(out, correlation_id, error, message);
    protocol::finish_frame(&mut out[start..]);
}

/// How the reader deals with a request.
enum Answer {
    /// The answer is ready, in [`ReaderState::answer`].
    Now,
    /// The answer must wait its turn with the writer.
    Later(Pending),
}

/// What a connection's reader keeps between requests, so that a produce
/// request costs no allocation.
struct ReaderState {
    /// Partitions appended to whose appends may still be gathered in memory.
    /// acks=1 appends since the last settle: partition, undo epoch, and the
    /// last offset appended in that epoch.
    touched: Vec<(Arc<Partition>, u64, u64)>,
    /// The answer to the request at hand (cleared before each).
    answer: Vec<u8>,
    /// The produce request's topic, copied out of the frame.
    topic: String,
}

/// Handles a request: the work that belongs in the reader (appends, and
/// the quick answers).
fn handle(shared: &Arc<Shared>, body: &mut [u8], peer: SocketAddr, state: &mut ReaderState) -> Option<Answer> {
    let header = protocol::decode_request_header(body).ok()?;
    let id = header.correlation_id;
    let ready = |state: &mut ReaderState, frame: Vec<u8>| {
        state.answer.extend_from_slice(&frame);
        Some(Answer::Now)
    };
    let request = match protocol::decode_request(body) {
        Ok((_, r)) => r,
        Err(RequestError::Unsupported(msg)) => {
            shared.log(format_args!("{peer}: {msg}"));
            error_into(&mut state.answer, id, ErrorCode::UnsupportedRequest, &msg);
            return Some(Answer::Now);
        }
        Err(RequestError::Invalid(e)) => {
            shared.log(format_args!("{peer}: invalid request: {e}"));
            error_into(&mut state.answer, id, ErrorCode::InvalidRequest, &e.0);
            return Some(Answer::Now);
        }
    };
    match request {
        Request::Produce {
            acks,
            timeout_ms,
            topic,
            partition,
            records,
        } => {
            // The topic leaves the frame, which the append rewrites.
            state.topic.clear();
            state.topic.push_str(topic);
            let request = ProduceRequest {
                id,
                acks,
                timeout_ms,
                partition,
            };
            produce(shared, &request, &mut body[records], peer, state)
        }
        Request::Fetch {
            wait_ms_max,
            bytes_min,
            partitions,
        } => Some(Answer::Later(Pending::Fetch {
            correlation_id: id,
            bytes_min,
            deadline: Instant::now() + Duration::from_millis(u64::from(wait_ms_max)),
            partitions,
        })),
        Request::ListOffsets { topic, partition, at } => ready(state, list_offsets(shared, id, &topic, partition, at)),
        Request::Metadata { topics } => ready(state, metadata(shared, id, &topics)),
        Request::CreateTopic { topic, partitions } => {
            let partitions = if partitions == 0 {
                shared.config.partitions_default
            } else {
                partitions
            };
            match shared.create_topic(&topic, partitions) {
                Ok((count, existed)) => {
                    let (code, msg) = if existed {
                        (
                            ErrorCode::TopicExists,
                            format!("topic {topic:?} exists with {count} partitions"),
                        )
                    } else {
                        (ErrorCode::None, String::new())
                    };
                    let start = protocol::begin_response(&mut state.answer, id, code, &msg);
                    put::u32(&mut state.answer, count);
                    protocol::finish_frame(&mut state.answer[start..]);
                }
                Err(e) => error_into(&mut state.answer, id, error_code(&e), &e.to_string()),
            }
            Some(Answer::Now)
        }
    }
}

/// A produce request's fields besides its topic and batch.
struct ProduceRequest {
    id: u32,
    acks: i8,
    timeout_ms: u32,
    partition: u32,
}

fn produce(
    shared: &Arc<Shared>,
    request: &ProduceRequest,
    batch: &mut [u8],
    peer: SocketAddr,
    state: &mut ReaderState,
) -> Option<Answer> {
    let ProduceRequest {
        id,
        acks,
        timeout_ms,
        partition,
    } = *request;
    let topic = state.topic.as_str();
    let reply = |answer: &mut Vec<u8>, code: ErrorCode, msg: String| {
        if acks == protocol::ACKS_NONE {
            shared.log(format_args!(
                "{peer}: produce to {topic} [{partition}] (acks=0) failed: {msg}"
            ));
            None
        } else {
            error_into(answer, id, code, &msg);
            Some(Answer::Now)
        }
    };
    let p = match shared.partition(topic, partition) {
        Ok(p) => p,
        Err((ErrorCode::UnknownTopic, _)) => {
            if let Err(e) = shared.create_topic(topic, shared.config.partitions_default) {
                return reply(&mut state.answer, error_code(&e), e.to_string());
            }
            match shared.partition(topic, partition) {
                Ok(p) => p,
                Err((code, msg)) => return reply(&mut state.answer, code, msg),
            }
        }
        Err((code, msg)) => return reply(&mut state.answer, code, msg),
    };
    let now = crate::clock::now_ms();
    let appended = p.lock().append(batch, now);
    match appended {
        Ok(info) => {
            // The reader's own answers (acks=1) need their records in the
            // file first: one entry per partition and undo epoch (an undo
            // takes back every append from some offset on, so the epoch's
            // last append answers for the ones before it). An acks=all
            // answer checks its records' fate itself, when durable.
            if acks == protocol::ACKS_LEADER {
                match state
                    .touched
                    .iter_mut()
                    .find(|t| Arc::ptr_eq(&t.0, &p) && t.1 == info.epoch)
                {
                    Some(t) => t.2 = t.2.max(info.last_offset),
                    None => state.touched.push((Arc::clone(&p), info.epoch, info.last_offset)),
                }
            }
            shared.appends.fetch_add(1, Ordering::Relaxed);
            shared.mark_dirty(&p, acks == protocol::ACKS_ALL);
            match acks {
                protocol::ACKS_NONE => None,
                protocol::ACKS_LEADER => {
                    let start = protocol::begin_response(&mut state.answer, id, ErrorCode::None, "");
                    put::u64(&mut state.answer, info.base_offset);
                    protocol::finish_frame(&mut state.answer[start..]);
                    Some(Answer::Now)
                }
                _ => Some(Answer::Later(Pending::Durable {
                    correlation_id: id,
                    partition: p,
                    base_offset: info.base_offset,
                    offset: info.last_offset + 1,
                    epoch: info.epoch,
                    deadline: Instant::now() + Duration::from_millis(u64::from(timeout_ms)),
                })),
            }
        }
        Err(e) => {
            let code = error_code(&e);
            if code == ErrorCode::StorageError {
                shared.log(format_args!("append to {topic}-{partition} failed: {e}"));
            }
            let msg = format!("{topic} [{partition}]: {e}");
            reply(&mut state.answer, code, msg)
        }
    }
}

fn list_offsets(shared: &Shared, id: u32, topic: &str, partition: u32, at: i64) -> Vec<u8> {
    let p = match shared.partition(topic, partition) {
        Ok(p) => p,
        Err((code, msg)) => return error_frame(id, code, &msg),
    };
    let found = {
        let log = p.lock();
        match at {
            protocol::EARLIEST => Ok(log.start_offset() as i64),
            protocol::LATEST => Ok(log.visible_offset() as i64),
            ts if ts >= 0 => log
                .offset_for_timestamp(ts)
                .map(|o| o.filter(|&o| o < log.visible_offset()).map_or(-1, |o| o as i64)),
            other => return error_frame(id, ErrorCode::InvalidRequest, &format!("list_offsets at {other}")),
        }
    };
    match found {
        Ok(offset) => {
            let mut out = Vec::new();
            protocol::start_response(&mut out, id, ErrorCode::None, "");
            put::i64(&mut out, offset);
            protocol::finish_frame(&mut out);
            out
        }
        Err(e) => error_frame(id, error_code(&e), &e.to_string()),
    }
}

fn metadata(shared: &Shared, id: u32, asked: &[String]) -> Vec<u8> {
    let names: Vec<String> = if asked.is_empty() {
        shared
            .topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    } else {
        asked.to_vec()
    };
    let mut out = Vec::new();
    protocol::start_response(&mut out, id, ErrorCode::None, "");
    put::u16(&mut out, names.len().min(u16::MAX as usize) as u16);
    for name in names.iter().take(u16::MAX as usize) {
        let parts = shared
            .topics
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned();
        let t = match parts {
            Some(parts) => TopicMetadata {
                topic: name.clone(),
                error: ErrorCode::None,
                message: String::new(),
                partitions: parts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| match p {
                        Some(p) => {
                            let log = p.lock();
                            (log.start_offset(), log.visible_offset())
                        }
                        None if shared.is_offline(name, i as u32) => (protocol::OFFLINE, protocol::OFFLINE),
                        // Served by another broker: the registry says which.
                        None => (protocol::ELSEWHERE, protocol::ELSEWHERE),
                    })
                    .collect(),
            },
            None => TopicMetadata {
                topic: name.clone(),
                error: ErrorCode::UnknownTopic,
                message: format!("topic {name:?} does not exist"),
                partitions: Vec::new(),
            },
        };
        protocol::put_topic_metadata(&mut out, &t);
    }
    protocol::finish_frame(&mut out);
    out
}

/// Answers the connection's requests in order. Responses that are ready
/// together leave in one write.
fn write_responses(shared: &Shared, stream: TcpStream, rx: Receiver<Pending>, peer: SocketAddr, queued: &AtomicUsize) {
    // Answers gathered in `out` and not yet written, and how many.
    let mut out: Vec<u8> = Vec::new();
    let mut in_out = 0;
    // Writing answers takes them off the reader's count of queued ones.
    let flush = |out: &mut Vec<u8>, in_out: &mut usize| -> io::Result<()> {
        flush_out(&stream, out)?;
        queued.fetch_sub(std::mem::take(in_out), Ordering::AcqRel);
        Ok(())
    };
    loop {
        let next = if out.is_empty() {
            rx.recv().ok()
        } else {
            match rx.try_recv() {
                Ok(p) => Some(p),
                Err(mpsc::TryRecvError::Empty) => {
                    if let Err(e) = flush(&mut out, &mut in_out) {
                        return broken(shared, &stream, peer, e);
                    }
                    continue;
                }
                Err(mpsc::TryRecvError::Disconnected) => None,
            }
        };
        let Some(pending) = next else {
            if let Err(e) = flush(&mut out, &mut in_out) {
                broken(shared, &stream, peer, e);
            }
            return;
        };
        let sent = match pending {
            Pending::Ready(frame) => {
                out.extend_from_slice(&frame);
                in_out += 1;
                Ok(())
            }
            Pending::Durable {
                correlation_id,
                partition,
                base_offset,
                offset,
                epoch,
                deadline,
            } => {
                // Earlier answers do not wait for this one's fsync.
                let early = if partition.flushed.load(Ordering::Acquire) < offset {
                    flush(&mut out, &mut in_out)
                } else {
                    Ok(())
                };
                early.map(|()| {
                    let appended = Appended {
                        base_offset,
                        offset,
                        epoch,
                    };
                    let frame = await_durable(shared, correlation_id, &partition, &appended, deadline);
                    out.extend_from_slice(&frame);
                    in_out += 1;
                })
            }
            Pending::Fetch {
                correlation_id,
                bytes_min,
                deadline,
                partitions,
            } => flush(&mut out, &mut in_out)
                .and_then(|()| fetch(shared, &stream, correlation_id, bytes_min, deadline, &partitions))
                .map(|()| {
                    queued.fetch_sub(1, Ordering::AcqRel);
                }),
        };
        if let Err(e) = sent {
            return broken(shared, &stream, peer, e);
        }
    }
}

fn flush_out(stream: &TcpStream, out: &mut Vec<u8>) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let result = (&*stream).write_all(out);
    out.clear();
    result
}

/// The peer stopped reading: say so, and stop the reader too.
fn broken(shared: &Shared, stream: &TcpStream, peer: SocketAddr, e: io::Error) {
    if !matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) {
        shared.log(format_args!("{peer}: cannot send a response: {e}"));
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Records an acks=all answer waits for: from `base_offset` to before
/// `offset`, appended in undo `epoch`.
struct Appended {
    base_offset: u64,
    offset: u64,
    epoch: u64,
}

fn await_durable(shared: &Shared, id: u32, p: &Partition, appended: &Appended, deadline: Instant) -> Vec<u8> {
    let Appended {
        base_offset,
        offset,
        epoch,
    } = *appended;
    let name = || format!("{} [{}]", p.topic, p.partition);
    loop {
        let generation = shared.visible_generation();
        if p.failed.load(Ordering::Acquire) {
            let why = p
                .lock()
                .write_pending()
                .err()
                .map_or_else(String::new, |e| e.to_string());
            let msg = format!("{}: records from offset {base_offset} are not durable: {why}", name());
            return error_frame(id, ErrorCode::StorageError, &msg);
        }
        if p.flushed.load(Ordering::Acquire) >= offset {
            // The offsets are durable; were they still ours when they were
            // written? A failed write may have undone ours and given the
            // offsets to later appends.
            match p.lock().fate(epoch, offset - 1) {
                Fate::InFile => {
                    let mut out = Vec::new();
                    protocol::start_response(&mut out, id, ErrorCode::None, "");
                    put::u64(&mut out, base_offset);
                    protocol::finish_frame(&mut out);
                    return out;
                }
                Fate::Undone => {
                    let msg = format!(
                        "{}: records from offset {base_offset} were not stored: disk full",
                        name()
                    );
                    return error_frame(id, ErrorCode::DiskFull, &msg);
                }
                Fate::Gathered | Fate::Unknown => {
                    let msg = format!(
                        "{}: whether records from offset {base_offset} were stored is unknown",
                        name()
                    );
                    return error_frame(id, ErrorCode::Timeout, &msg);
                }
            }
        }
        if Instant::now() >= deadline {
            let msg = format!(
                "{}: records from offset {base_offset} appended but not yet durable within the timeout",
                name()
            );
            return error_frame(id, ErrorCode::Timeout, &msg);
        }
        shared.wait_visible(generation, deadline);
    }
}

/// One partition's part of a fetch response.
struct Part {
    header: Vec<u8>,
    slice: Option<FileSlice>,
}

fn fetch(
    shared: &Shared,
    stream: &TcpStream,
    id: u32,
    bytes_min: u32,
    deadline: Instant,
    asked: &[FetchPartition],
) -> io::Result<()> {
    let parts = loop {
        let generation = shared.visible_generation();
        let (parts, bytes, errors) = gather(shared, asked);
        let done = bytes >= u64::from(bytes_min) || errors || Instant::now() >= deadline || shared.stopping();
        if done {
            break parts;
        }
        shared.wait_visible(generation, deadline);
    };
    let mut head = Vec::new();
    protocol::start_response(&mut head, id, ErrorCode::None, "");
    put::u16(&mut head, parts.len() as u16);
    let total: u64 = head.len() as u64
        + parts
            .iter()
            .map(|p| p.header.len() as u64 + p.slice.as_ref().map_or(0, |s| s.len))
            .sum::<u64>();
    let frame_len = u32::try_from(total - protocol::LENGTH_BYTES as u64)
        .map_err(|_| io::Error::other("fetch response over 4 GiB"))?;
    head[..protocol::LENGTH_BYTES].copy_from_slice(&frame_len.to_le_bytes());
    // Headers gather until records follow: one write before each sendfile.
    for part in &parts {
        head.extend_from_slice(&part.header);
        if let Some(slice) = &part.slice {
            flush_out(stream, &mut head)?;
            send_slice(stream, slice)?;
        }
    }
    flush_out(stream, &mut head)
}

/// Finds each partition's byte range; returns the parts, their bytes, and
/// whether any partition had an error.
fn gather(shared: &Shared, asked: &[FetchPartition]) -> (Vec<Part>, u64, bool) {
    let mut parts = Vec::with_capacity(asked.len());
    let (mut bytes, mut errors) = (0u64, false);
    for a in asked {
        // Past the response's budget, the other partitions wait for the
        // next fetch.
        let budget = u64::from(a.bytes_max).min(limits::FETCH_RESPONSE_BYTES_MAX.saturating_sub(bytes));
        let mut header = Vec::new();
        let (code, msg, start, end, slice) = match shared.partition(&a.topic, a.partition) {
            Err((code, msg)) => (code, msg, 0, 0, None),
            Ok(p) => {
                let log = p.lock();
                let (start, end) = (log.start_offset(), log.visible_offset());
                match log.read(a.offset, budget) {
                    Ok(_) if budget == 0 => (ErrorCode::None, String::new(), start, end, None),
                    Ok(slice) => (ErrorCode::None, String::new(), start, end, slice),
                    Err(e) => (error_code(&e), e.to_string(), start, end, None),
                }
            }
        };
        errors |= code != ErrorCode::None;
        let len = slice.as_ref().map_or(0, |s| s.len);
        bytes += len;
        protocol::put_fetch_partition(&mut header, &a.topic, a.partition, code, &msg, start, end, len as u32);
        parts.push(Part { header, slice });
    }
    (parts, bytes, errors)
}

/// Sends a segment's byte range with `sendfile`: from the page cache to the
/// socket, never through user space.
fn send_slice(stream: &TcpStream, slice: &FileSlice) -> io::Result<()> {
    let Some(file) = slice.file.as_file() else {
        let mut buf = Vec::new();
        slice.read_into(&mut buf).map_err(io::Error::other)?;
        return (&*stream).write_all(&buf);
    };
    let mut offset = slice.position as i64;
    let end = (slice.position + slice.len) as i64;
    while offset < end {
        let left = (end - offset) as usize;
        match nix::sys::sendfile::sendfile64(stream.as_fd(), file.as_fd(), Some(&mut offset), left) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{} ended during sendfile", slice.path.display()),
                ))
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the peer stopped reading"))
            }
            Err(e) => return Err(io::Error::from(e)),
        }
    }
    Ok(())
}
