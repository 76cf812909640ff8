//! One client connection: its reader (frames in, requests handled in
//! order) and its writer (answers out, in the same order; fetched records
//! sent with `sendfile`).
//!
//! The reader ([`reader`]) cuts the byte stream into frames ([`frames`])
//! and handles each request ([`requests`]): appends, and the answers that
//! need no wait, which it writes itself. The others go to the writer
//! ([`writer`]) through a bounded queue of [`QueuedAnswer`]s; a fetch's
//! records go out from the segment file ([`transfer`]).

use crate::net::Stream;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::auth::Session;
use crate::broker::shared::{Appended, Partition, Shared};
use crate::protocol::{self, put, ErrorCode, FetchPartition};

mod access;
pub(in crate::broker) mod frames;
mod reader;
pub(in crate::broker) use reader::{frame_reader, too_large, UNAUTHENTICATED_BYTES_MAX};
pub(in crate::broker) mod requests;
mod transfer;
pub(in crate::broker) mod txn;
pub(in crate::broker) mod writer;

/// An answer waiting its turn in the connection's queue to the writer.
enum QueuedAnswer {
    /// Encoded and ready.
    Ready(Vec<u8>),
    /// acks=all: answer once `partition` holds `appended` durably.
    Durable {
        correlation_id: u32,
        partition: Arc<Partition>,
        appended: Appended,
        deadline: Instant,
    },
    /// A fetch, evaluated when its turn comes.
    Fetch {
        correlation_id: u32,
        deadline: Instant,
        asked: FetchAsked,
    },
}

/// A fetch as its request said it, handed to [`transfer::fetch`]
/// unchanged: the fetching replica and the leader epochs it believes
/// current (version 3) reach the fetch's handling as decoded. Nothing
/// checks them yet; a broker's leader and follower roles (issue 13) will.
struct FetchAsked {
    /// The request's version, which its answer is written in.
    version: u16,
    /// The fetching broker's id; empty for a consumer.
    replica_id: String,
    /// A consumer that reads committed records only (version 6).
    read_committed: bool,
    /// Bytes worth answering with before the deadline.
    bytes_min: u32,
    /// Bytes of records in the answer at most (but one batch).
    response_bytes_max: u32,
    /// What to read, each partition with the leader epoch the fetcher
    /// believes current.
    partitions: Vec<FetchPartition>,
}

/// How the reader deals with a request.
enum Answer {
    /// The answer is ready, in [`ReaderState::answer`].
    Now,
    /// The answer must wait its turn with the writer.
    Later(QueuedAnswer),
}

/// An acks=1 append whose answer the reader holds: the answer may leave
/// only once the append is in its file (see [`reader`]'s `settle`).
struct Unsettled {
    partition: Arc<Partition>,
    /// The log's undo epoch at the append.
    epoch: u64,
    /// The last offset appended in that epoch.
    last_offset: u64,
}

/// What a connection's reader keeps between requests, so that a produce
/// request costs no allocation.
#[derive(Default)]
struct ReaderState {
    /// acks=1 appends since the last settle, whose appends may still be
    /// gathered in memory.
    unsettled: Vec<Unsettled>,
    /// The answers the reader holds, to the request at hand and those
    /// before it; they leave together.
    answer: Vec<u8>,
    /// The produce request's topic, copied out of the frame.
    topic: String,
    /// The produce request's transactional id (empty: none).
    transactional_id: String,
    /// The transaction coordinator's finder (none in some unit tests).
    coordinators: Option<Arc<dyn txn::Coordinators>>,
    /// Who the client is (see [`crate::broker::auth`]).
    session: Option<Session>,
    /// Why the connection must close once the answers held are sent.
    closing: Option<String>,
}

impl ReaderState {
    /// Notes an acks=1 append: one entry per partition and undo epoch (an
    /// undo takes back every append from some offset on, so the epoch's
    /// last append answers for the ones before it).
    fn note_unsettled(&mut self, partition: &Arc<Partition>, epoch: u64, last_offset: u64) {
        let same = |u: &&mut Unsettled| Arc::ptr_eq(&u.partition, partition) && u.epoch == epoch;
        match self.unsettled.iter_mut().find(same) {
            Some(u) => u.last_offset = u.last_offset.max(last_offset),
            None => self.unsettled.push(Unsettled {
                partition: Arc::clone(partition),
                epoch,
                last_offset,
            }),
        }
    }
}

/// Serves one connection until the peer closes it, it breaks the protocol,
/// or the broker stops.
pub(super) fn serve(
    shared: &Arc<Shared>,
    stream: Stream,
    (peer, principal): (SocketAddr, Option<String>),
    coordinators: Arc<dyn txn::Coordinators>,
) {
    let _ = stream.set_nodelay(true);
    let timeout = Duration::from_millis(shared.config.request_timeout_ms.max(1));
    let _ = stream.set_write_timeout(Some(timeout));
    let writer_stream = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            shared.log_peer(format_args!("{peer}: {e}"));
            return;
        }
    };
    let (tx, rx) = mpsc::sync_channel::<QueuedAnswer>(shared.config.in_flight_max.max(1) - 1);
    // Answers queued to the writer and not yet written.
    let queued_count = Arc::new(AtomicUsize::new(0));
    let writer = {
        let shared = Arc::clone(shared);
        let queued_count = Arc::clone(&queued_count);
        std::thread::Builder::new()
            .name(format!("write-{peer}"))
            .spawn(move || writer::write_responses(&shared, writer_stream, rx, peer, &queued_count))
    };
    let writer = match writer {
        Ok(w) => w,
        Err(e) => {
            shared.log_peer(format_args!("{peer}: cannot start a writer: {e}"));
            return;
        }
    };
    let session = Session::new(shared, principal);
    reader::read_requests(
        shared,
        &stream,
        &tx,
        &queued_count,
        (peer, session),
        (timeout, coordinators),
    );
    drop(tx);
    let _ = writer.join();
}

/// An error answer.
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

/// Appends a produce answer to `out`: the offset of the batch's first record.
fn produced_into(out: &mut Vec<u8>, correlation_id: u32, base_offset: u64) {
    let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
    put::u64(out, base_offset);
    protocol::finish_frame(&mut out[start..]);
}

/// Writes out the answers gathered in `out`, which is left empty (and
/// small: a large answer's room goes back, so that an idle connection
/// holds none of it).
fn flush_out(stream: &Stream, out: &mut Vec<u8>) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let result = (&*stream).write_all(out);
    out.clear();
    crate::broker::shrink(out);
    result
}

/// The peer stopped reading: say so, and stop the reader too.
fn broken(shared: &Shared, stream: &Stream, peer: SocketAddr, e: io::Error) {
    if !matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    ) {
        shared.log_peer(format_args!("{peer}: cannot send a response: {e}"));
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::testing::{partition, shared};

    /// Answers written leave their buffer empty and, after a large one,
    /// small: an idle connection holds no room of the answers it sent (a
    /// review found 63 MiB held per idle klog connection after one large
    /// metadata answer). A small buffer keeps its room.
    #[test]
    fn a_large_answer_written_leaves_no_room_behind() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream =
            Stream::Tcp(std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap());
        let (mut peer, _) = listener.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            io::Read::read_to_end(&mut peer, &mut got).unwrap();
            got.len()
        });
        let mut out = vec![7u8; 8 << 20];
        flush_out(&stream, &mut out).unwrap();
        assert!(
            out.is_empty() && out.capacity() <= 64 * 1024,
            "{}",
            out.capacity()
        );
        let mut small = Vec::with_capacity(1000);
        small.extend_from_slice(b"answer");
        flush_out(&stream, &mut small).unwrap();
        assert!(small.is_empty() && small.capacity() >= 1000);
        drop(stream);
        assert_eq!(reader.join().unwrap(), (8 << 20) + 6);
    }

    #[test]
    fn one_unsettled_entry_per_partition_and_epoch_keeps_the_last_offset() {
        let (_sim, shared) = shared();
        let (a, b) = (partition(&shared, "a"), partition(&shared, "b"));
        let mut state = ReaderState::default();
        state.note_unsettled(&a, 0, 4);
        state.note_unsettled(&a, 0, 7);
        state.note_unsettled(&a, 0, 2);
        state.note_unsettled(&b, 0, 1);
        state.note_unsettled(&a, 1, 9);
        let entries: Vec<_> = state
            .unsettled
            .iter()
            .map(|u| (u.partition.topic.as_str(), u.epoch, u.last_offset))
            .collect();
        assert_eq!(entries, [("a", 0, 7), ("b", 0, 1), ("a", 1, 9)]);
    }

    #[test]
    fn a_produce_answer_is_an_empty_header_and_the_base_offset() {
        let mut out = vec![0xAA];
        produced_into(&mut out, 5, 42);
        let got = crate::broker::testing::answers(&out[1..]);
        assert_eq!(got, [(5, ErrorCode::None, 42u64.to_le_bytes().to_vec())]);
        assert_eq!(out[0], 0xAA, "appended after what was there");
    }
}
