//! Frames in: a connection's byte stream cut into request frames, each
//! length checked against `--max-request-bytes` before its bytes are
//! read; a frame larger than the connection's own buffer grows it only
//! by what arrived, each growth taken from the broker-wide bound on
//! request bytes ([`RequestMemory`]).

use crate::net::Stream;
use std::io::{self, Read};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::broker::memory::{RequestMemory, Taken};
use crate::protocol::{self, RequestHeader, LENGTH_BYTES, REQUEST_HEADER_BYTES};

/// How reading a frame failed.
#[derive(Debug)]
pub(in crate::broker) enum FrameError {
    /// The peer closed between frames.
    Closed,
    /// Bytes that are not a frame; the connection cannot go on.
    Garbage(String),
    /// A frame over the limit, with its request header when it came.
    TooLarge(u32, Option<RequestHeader>),
    /// The peer started a frame and did not finish it in time.
    Timeout,
    /// The peer sent nothing for the idle timeout between frames.
    Idle,
    /// The broker's request memory stayed full until the frame's deadline.
    NoMemory,
    /// The broker stops while the frame waits for memory.
    Stopped,
    /// The socket failed.
    Io(io::Error),
}

/// Reads a connection's frames through one buffer: a read syscall brings
/// in as many waiting requests as fit, and frames already buffered cost
/// none. A frame's length is checked against the limit first; a frame
/// larger than the buffer grows it with the bytes that actually arrive
/// (by at most what has arrived of the frame, or a read chunk), never
/// ahead of them, and each growth is first taken from the broker's
/// [`RequestMemory`]: announcing a large frame costs nothing, sending it
/// costs what it sends, and when the bound is reached the connection
/// waits (unread, its frame's deadline running).
pub(in crate::broker) struct FrameReader<'a> {
    stream: &'a Stream,
    buf: Vec<u8>,
    /// The broker-wide bound on request bytes, and its stop flag.
    memory: &'a RequestMemory,
    stop: &'a AtomicBool,
    /// Bytes of `buf` beyond its own [`READ_CHUNK_BYTES`], taken from
    /// `memory`.
    reserved: u64,
    /// Start of the unconsumed bytes.
    pos: usize,
    /// End of the bytes read.
    filled: usize,
    /// The largest frame body accepted.
    bytes_max: u32,
    /// The time a peer has to finish a frame it started.
    timeout: Duration,
    /// The socket's read timeout as last set (to skip needless syscalls).
    timeout_set: Option<Option<Duration>>,
    /// The time a peer may send nothing between frames (`None`: for ever).
    idle: Option<Duration>,
    /// Whose frames: klog's (little-endian lengths) or Kafka's.
    framing: Framing,
}

/// The framing of a listener's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::broker) enum Framing {
    /// klog's: a little-endian length, at least a request header.
    Klog,
    /// Kafka's: a big-endian length, at least a request header's fixed
    /// part (api key, version, correlation id, client id length: 10).
    Kafka,
}

impl Framing {
    /// The body length a prefix announces.
    fn length(self, prefix: [u8; LENGTH_BYTES]) -> u32 {
        match self {
            Framing::Klog => u32::from_le_bytes(prefix),
            Framing::Kafka => u32::from_be_bytes(prefix),
        }
    }

    /// The shortest body that can hold a request header.
    fn header_bytes(self) -> usize {
        match self {
            Framing::Klog => REQUEST_HEADER_BYTES,
            Framing::Kafka => 10,
        }
    }
}

/// A connection's own buffer: frames up to this size (with their length)
/// need no reservation, and a read brings in this much at least.
const READ_CHUNK_BYTES: usize = 64 * 1024;

impl<'a> FrameReader<'a> {
    pub(in crate::broker) fn new(
        stream: &'a Stream,
        bytes_max: u32,
        timeout: Duration,
        memory: &'a RequestMemory,
        stop: &'a AtomicBool,
    ) -> FrameReader<'a> {
        FrameReader {
            stream,
            buf: vec![0; READ_CHUNK_BYTES],
            memory,
            stop,
            reserved: 0,
            pos: 0,
            filled: 0,
            bytes_max,
            timeout,
            timeout_set: None,
            idle: None,
            framing: Framing::Klog,
        }
    }

    /// The largest frame body accepted from now on (a connection not yet
    /// authenticated gets a small one).
    pub(in crate::broker) fn set_bytes_max(&mut self, bytes_max: u32) {
        self.bytes_max = bytes_max;
    }

    /// Reads Kafka's frames instead of klog's.
    pub(in crate::broker) fn kafka(mut self) -> Self {
        self.framing = Framing::Kafka;
        self
    }

    /// Closes the connection (with [`FrameError::Idle`]) when the peer sends
    /// nothing for `idle` between frames.
    pub(in crate::broker) fn idle_timeout(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }

    fn set_timeout(&mut self, t: Option<Duration>) {
        // Durations are rounded to 10 ms so that a deadline a little
        // closer does not cost a syscall per read.
        let rounded =
            t.map(|d| Duration::from_millis((d.as_millis() as u64).div_ceil(10).max(1) * 10));
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
            if self.filled == self.buf.len() && self.buf.len() < want {
                self.grow(want, deadline)?;
            }
            let between_frames = self.filled == self.pos && deadline.is_none();
            if between_frames {
                self.set_timeout(self.idle);
            } else {
                let at = *deadline.get_or_insert_with(|| Instant::now() + self.timeout);
                let left = at.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(FrameError::Timeout);
                }
                self.set_timeout(Some(left));
            }
            // A buffer grown for a large frame takes in no byte past it, so
            // that what follows fits the buffer once it shrinks back.
            let end = if self.buf.len() > READ_CHUNK_BYTES {
                want.min(self.buf.len())
            } else {
                self.buf.len()
            };
            match (&*self.stream).read(&mut self.buf[self.filled..end]) {
                Ok(0) if self.filled == self.pos && deadline.is_none() => {
                    return Err(FrameError::Closed)
                }
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
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(if between_frames {
                        FrameError::Idle
                    } else {
                        FrameError::Timeout
                    });
                }
                Err(e) => return Err(FrameError::Io(e)),
            }
        }
        Ok(())
    }

    /// Grows the full buffer towards `want` by what has arrived of the
    /// frame (so that reads grow with it), never past the frame, once the
    /// broker's request memory has the bytes (waiting for them at most
    /// until the frame's deadline).
    fn grow(&mut self, want: usize, deadline: &mut Option<Instant>) -> Result<(), FrameError> {
        let arrived = self.filled - self.pos;
        let grown = (self.filled + arrived.max(READ_CHUNK_BYTES)).min(want);
        let more = grown - self.buf.len();
        let until = *deadline.get_or_insert_with(|| Instant::now() + self.timeout);
        match self.memory.take(more as u64, self.stop, until) {
            Taken::Yes => {}
            Taken::TimedOut => return Err(FrameError::NoMemory),
            Taken::Stopped => return Err(FrameError::Stopped),
        }
        self.reserved += more as u64;
        self.buf.resize(grown, 0);
        Ok(())
    }

    /// Whether a whole frame is buffered (the next `next` makes no syscall).
    pub(in crate::broker) fn has_frame(&self) -> bool {
        holds_frame(&self.buf[self.pos..self.filled], self.framing)
    }

    /// The next frame's body, consumed.
    pub(in crate::broker) fn next(&mut self) -> Result<&mut [u8], FrameError> {
        if self.buf.len() > READ_CHUNK_BYTES {
            // A large request is done with: give its memory back. (Its
            // buffer held no byte past it but what fits the small one.)
            let rest = self.filled - self.pos;
            let mut small = vec![0; READ_CHUNK_BYTES.max(rest)];
            small[..rest].copy_from_slice(&self.buf[self.pos..self.filled]);
            (self.buf, self.pos, self.filled) = (small, 0, rest);
            self.memory.give(std::mem::take(&mut self.reserved));
        }
        let mut deadline = None;
        self.fill(LENGTH_BYTES, &mut deadline)?;
        let prefix: [u8; LENGTH_BYTES] = self.buf[self.pos..self.pos + LENGTH_BYTES]
            .try_into()
            .expect("4 bytes");
        let n = match check_length(prefix, self.bytes_max, self.framing) {
            Ok(n) => n,
            Err(FrameError::TooLarge(n, _)) if self.framing == Framing::Klog => {
                // Its header, when it comes, names the request refused.
                let header = self
                    .fill(LENGTH_BYTES + REQUEST_HEADER_BYTES, &mut deadline)
                    .ok()
                    .and_then(|()| {
                        protocol::decode_request_header(&self.buf[self.pos + LENGTH_BYTES..]).ok()
                    });
                return Err(FrameError::TooLarge(n, header));
            }
            Err(e) => return Err(e),
        };
        let total = LENGTH_BYTES + n as usize;
        self.fill(total, &mut deadline)?;
        let start = self.pos + LENGTH_BYTES;
        self.pos += total;
        Ok(&mut self.buf[start..start + n as usize])
    }
}

impl Drop for FrameReader<'_> {
    fn drop(&mut self) {
        self.memory.give(self.reserved);
    }
}

/// Whether `buffered` starts with a whole frame.
fn holds_frame(buffered: &[u8], framing: Framing) -> bool {
    let Some(prefix) = buffered.get(..LENGTH_BYTES) else {
        return false;
    };
    let len = framing.length(prefix.try_into().expect("4 bytes"));
    buffered.len() - LENGTH_BYTES >= len as usize
}

/// What a frame's length prefix says before any of the frame is read: the
/// length of its body, or why that body will not be read.
fn check_length(
    prefix: [u8; LENGTH_BYTES],
    bytes_max: u32,
    framing: Framing,
) -> Result<u32, FrameError> {
    let n = framing.length(prefix);
    if (n as usize) < framing.header_bytes() {
        return Err(FrameError::Garbage(format!(
            "a frame of {n} bytes is shorter than a request header"
        )));
    }
    if n > bytes_max {
        // Text makes a huge length; saying so helps whoever pointed an
        // HTTP client at the broker.
        if prefix.iter().all(|b| b.is_ascii_uppercase() || *b == b' ') {
            return Err(FrameError::Garbage(format!(
                "{:?} is not a frame (HTTP or another text protocol?)",
                String::from_utf8_lossy(&prefix)
            )));
        }
        return Err(FrameError::TooLarge(n, None));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    static MEMORY: std::sync::LazyLock<RequestMemory> =
        std::sync::LazyLock::new(|| RequestMemory::new(1 << 30));
    static NO_STOP: AtomicBool = AtomicBool::new(false);

    /// Both ends of a loopback connection.
    fn pair() -> (Stream, Stream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client =
            Stream::Tcp(std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap());
        let (server, _) = listener.accept().unwrap();
        (client, Stream::Tcp(server))
    }

    #[test]
    fn a_length_is_judged_before_the_frame_is_read() {
        let len = |n: u32| n.to_le_bytes();
        assert!(
            matches!(
                check_length(len(7), 100, Framing::Klog),
                Err(FrameError::Garbage(_))
            ),
            "shorter than a header"
        );
        assert!(matches!(check_length(len(8), 100, Framing::Klog), Ok(8)));
        assert!(
            matches!(check_length(len(100), 100, Framing::Klog), Ok(100)),
            "the limit itself is allowed"
        );
        assert!(matches!(
            check_length(len(101), 100, Framing::Klog),
            Err(FrameError::TooLarge(101, None))
        ));
        let Err(FrameError::Garbage(why)) = check_length(*b"POST", 100, Framing::Klog) else {
            panic!("text is no frame")
        };
        assert!(why.contains("HTTP"), "{why}");
    }

    #[test]
    fn kafka_frames_have_big_endian_lengths_and_a_shorter_header() {
        let len = |n: u32| n.to_be_bytes();
        let kafka = |n| check_length(len(n), 100, Framing::Kafka);
        assert!(matches!(kafka(9), Err(FrameError::Garbage(_))));
        assert!(matches!(kafka(10), Ok(10)));
        assert!(matches!(kafka(101), Err(FrameError::TooLarge(101, None))));
        // Read little-endian, 10 would be 167772160 bytes: refused.
        assert!(matches!(
            check_length(len(10), 100, Framing::Klog),
            Err(FrameError::TooLarge(..))
        ));
        assert!(holds_frame(&[0, 0, 0, 2, 9, 9], Framing::Kafka));
        assert!(!holds_frame(&[0, 0, 0, 2, 9], Framing::Kafka));
    }

    #[test]
    fn a_frame_is_held_only_when_all_its_bytes_are() {
        assert!(!holds_frame(&[], Framing::Klog));
        assert!(
            !holds_frame(&[2, 0, 0], Framing::Klog),
            "part of the length"
        );
        assert!(
            !holds_frame(&[2, 0, 0, 0, 9], Framing::Klog),
            "part of the body"
        );
        assert!(holds_frame(&[2, 0, 0, 0, 9, 9], Framing::Klog));
        assert!(
            holds_frame(&[2, 0, 0, 0, 9, 9, 1], Framing::Klog),
            "and the start of the next"
        );
        assert!(holds_frame(&[0, 0, 0, 0], Framing::Klog), "an empty body");
    }

    #[test]
    fn frames_read_in_one_go_come_out_one_by_one() {
        let (mut client, server) = pair();
        let mut frames = Vec::new();
        protocol::create_topic_request(&mut frames, 1, "a", 1);
        let mut second = Vec::new();
        protocol::create_topic_request(&mut second, 2, "b", 1);
        frames.extend_from_slice(&second);
        client.write_all(&frames).unwrap();
        drop(client);
        let mut reader = FrameReader::new(&server, 1024, Duration::from_secs(5), &MEMORY, &NO_STOP);
        let first = reader.next().unwrap().to_vec();
        assert_eq!(
            protocol::decode_request_header(&first)
                .unwrap()
                .correlation_id,
            1
        );
        assert!(reader.has_frame(), "the second frame came with the first");
        let next = reader.next().unwrap().to_vec();
        assert_eq!(next, second[LENGTH_BYTES..]);
        assert!(!reader.has_frame());
        assert!(
            matches!(reader.next(), Err(FrameError::Closed)),
            "closed between frames"
        );
    }

    #[test]
    fn a_frame_over_the_limit_names_its_request() {
        let (mut client, server) = pair();
        let mut frame = Vec::new();
        protocol::create_topic_request(&mut frame, 7, "a-long-topic-name", 1);
        client.write_all(&frame).unwrap();
        let mut reader = FrameReader::new(&server, 16, Duration::from_secs(5), &MEMORY, &NO_STOP);
        match reader.next() {
            Err(FrameError::TooLarge(n, Some(header))) => {
                assert_eq!(n as usize, frame.len() - LENGTH_BYTES);
                assert_eq!(header.correlation_id, 7);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_frame_cut_short_is_garbage_and_one_left_unfinished_times_out() {
        let (mut client, server) = pair();
        let mut frame = Vec::new();
        protocol::create_topic_request(&mut frame, 1, "a", 1);
        client.write_all(&frame[..frame.len() - 1]).unwrap();
        let mut reader =
            FrameReader::new(&server, 1024, Duration::from_millis(50), &MEMORY, &NO_STOP);
        assert!(matches!(reader.next(), Err(FrameError::Timeout)));
        drop(client);
        let (mut client, server) = pair();
        client.write_all(&frame[..frame.len() - 1]).unwrap();
        drop(client);
        let mut reader = FrameReader::new(&server, 1024, Duration::from_secs(5), &MEMORY, &NO_STOP);
        assert!(matches!(reader.next(), Err(FrameError::Garbage(_))));
    }

    #[test]
    fn a_large_frame_takes_memory_only_as_its_bytes_arrive() {
        let total = 8u64 << 20;
        let memory = RequestMemory::new(total);
        let body = 1u32 << 20;
        let frame_bytes = LENGTH_BYTES + body as usize;
        // Announced, and a hundred bytes sent: the buffer stays small and
        // takes nothing from the bound.
        let (mut client, server) = pair();
        client.write_all(&body.to_le_bytes()).unwrap();
        client.write_all(&[0; 100]).unwrap();
        let mut reader = FrameReader::new(
            &server,
            4 << 20,
            Duration::from_millis(100),
            &memory,
            &NO_STOP,
        );
        assert!(matches!(reader.next(), Err(FrameError::Timeout)));
        assert_eq!(
            reader.buf.len(),
            READ_CHUNK_BYTES,
            "104 bytes fit the buffer"
        );
        assert_eq!(memory.free(), total, "announcing costs nothing");
        // 300 KiB sent: the buffer grew with them, and took that from the
        // bound, given back when the reader goes.
        let (mut client, server) = pair();
        client.write_all(&body.to_le_bytes()).unwrap();
        client.write_all(&[0; 300 << 10]).unwrap();
        let mut reader = FrameReader::new(
            &server,
            4 << 20,
            Duration::from_millis(300),
            &memory,
            &NO_STOP,
        );
        assert!(matches!(reader.next(), Err(FrameError::Timeout)));
        let held = (reader.buf.len() - READ_CHUNK_BYTES) as u64;
        assert!(
            reader.buf.len() <= 2 * (300 << 10) + 2 * READ_CHUNK_BYTES,
            "{} bytes of buffer for 300 KiB",
            reader.buf.len()
        );
        assert!(held > 0);
        assert_eq!(memory.free(), total - held);
        drop(reader);
        assert_eq!(memory.free(), total, "and given back");
        // Sent whole, then another small frame: both come out, and the
        // memory comes back once the large one is done with.
        let (mut client, server) = pair();
        let mut frame = body.to_le_bytes().to_vec();
        frame.resize(frame_bytes, 9);
        let mut small = Vec::new();
        protocol::create_topic_request(&mut small, 2, "b", 1);
        frame.extend_from_slice(&small);
        let writer = std::thread::spawn(move || client.write_all(&frame).unwrap());
        let mut reader =
            FrameReader::new(&server, 4 << 20, Duration::from_secs(10), &memory, &NO_STOP);
        let got = reader.next().unwrap();
        assert_eq!((got.len(), got[body as usize - 1]), (body as usize, 9));
        assert_eq!(
            memory.free(),
            total - (frame_bytes - READ_CHUNK_BYTES) as u64
        );
        assert_eq!(reader.next().unwrap(), &small[LENGTH_BYTES..]);
        assert_eq!(memory.free(), total);
        assert_eq!(reader.buf.len(), READ_CHUNK_BYTES, "the buffer shrank back");
        writer.join().unwrap();
    }

    #[test]
    fn a_frame_waits_for_memory_until_its_deadline_or_a_stop() {
        let memory = RequestMemory::new(1 << 20);
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(memory.take(1 << 20, &NO_STOP, far), Taken::Yes);
        let frame = |client: &mut Stream| {
            let mut bytes = (512u32 << 10).to_le_bytes().to_vec();
            bytes.resize(200 << 10, 1);
            client.write_all(&bytes).unwrap();
        };
        // No memory: the frame's deadline ends the wait.
        let (mut client, server) = pair();
        frame(&mut client);
        let mut reader = FrameReader::new(
            &server,
            1 << 20,
            Duration::from_millis(200),
            &memory,
            &NO_STOP,
        );
        assert!(matches!(reader.next(), Err(FrameError::NoMemory)));
        drop(reader);
        // And a stop ends it sooner.
        let stop = AtomicBool::new(false);
        let (mut client, server) = pair();
        frame(&mut client);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| {
                let mut reader =
                    FrameReader::new(&server, 1 << 20, Duration::from_secs(60), &memory, &stop);
                matches!(reader.next(), Err(FrameError::Stopped))
            });
            std::thread::sleep(Duration::from_millis(200));
            assert!(!waiting.is_finished(), "no memory: it waits");
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            assert!(waiting.join().unwrap());
        });
        memory.give(1 << 20);
        assert_eq!(memory.free(), 1 << 20);
    }
}
