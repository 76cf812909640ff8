//! The broker's durability promise under a power cut: a broker serving the
//! real protocol over a simulated file system (`BrokerConfig::vfs`) is cut
//! off at every change its workload makes; after the crash, every record
//! it acknowledged with acks=all is there at its offset, byte for byte, and
//! the log is a gap-free prefix. (kill -9 keeps the page cache, so only a
//! simulated power cut can test the fsync.)

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use klog::broker::{Broker, BrokerConfig};
use klog::protocol::{self, ErrorCode, Reader};
use klog::storage::fs::sim::SimFs;
use klog::storage::fs::{MapMut, VFile, Vfs};
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::BatchBuilder;

const REQUESTS: u64 = 24;
const PER_BATCH: u64 = 3;

fn value(offset_hint: u64) -> Vec<u8> {
    format!(
        "record-{offset_hint}-{}",
        "x".repeat((offset_hint % 7) as usize * 40)
    )
    .into_bytes()
}

/// A record a produce request carried: the request's number and the
/// record's index in it give its value.
#[derive(Debug, Clone)]
struct Acked {
    base_offset: u64,
    values: Vec<Vec<u8>>,
    all: bool,
}

/// A broker serving over `sim`, running on its own thread, and a
/// connection to it.
struct SimBroker {
    handle: klog::broker::BrokerHandle,
    thread: std::thread::JoinHandle<anyhow::Result<()>>,
    stream: TcpStream,
    frame: Vec<u8>,
}

impl SimBroker {
    fn start(sim: &SimFs) -> SimBroker {
        SimBroker::start_on(Arc::new(sim.clone()))
    }

    /// A broker serving over `vfs` (a simulated file system, or one
    /// wrapping it).
    fn start_on(vfs: Arc<dyn Vfs>) -> SimBroker {
        let mut config = BrokerConfig::new("/data", "127.0.0.1:0");
        config.vfs = vfs;
        config.quiet = std::env::var_os("KLOG_TEST_VERBOSE").is_none();
        config.log.segment_bytes = 4096;
        config.log.index_interval_bytes = 256;
        config.log.index_bytes_max = 4096;
        let broker = Broker::open(config).expect("broker opens");
        let handle = broker.handle().unwrap();
        let thread = std::thread::spawn(move || broker.run());
        let stream = TcpStream::connect(handle.local_addr().to_string()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        SimBroker {
            handle,
            thread,
            stream,
            frame: Vec::new(),
        }
    }

    /// Produces `values` as one batch to `t` [0]; the base offset, or the
    /// error the broker answered (`None` when the connection broke).
    fn produce(
        &mut self,
        id: u32,
        acks: i8,
        values: &[Vec<u8>],
    ) -> Option<Result<u64, (ErrorCode, String)>> {
        let mut b = BatchBuilder::new();
        for v in values {
            b.push(1_000, None, &[], v);
        }
        protocol::produce_request(&mut self.frame, id, acks, 10_000, "t", 0, b.finish());
        self.stream.write_all(&self.frame).ok()?;
        let body = response(&mut self.stream)?;
        let mut r = Reader::new(&body);
        let header = protocol::decode_response_header(&mut r).unwrap();
        if header.error != ErrorCode::None {
            return Some(Err((header.error, header.message)));
        }
        Some(Ok(r.u64("base_offset").unwrap()))
    }

    /// Another connection to the same broker, whose reads give up after
    /// `timeout`.
    fn connect(&self, timeout: Duration) -> TcpStream {
        let stream = TcpStream::connect(self.handle.local_addr().to_string()).unwrap();
        stream.set_read_timeout(Some(timeout)).unwrap();
        stream
    }

    fn stop(self) {
        drop(self.stream);
        self.handle.stop();
        let _ = self.thread.join().unwrap();
    }
}

/// Runs a broker over `sim` and produces `REQUESTS` batches alternately
/// with acks=all and acks=1, cutting the power after `cut` changes (once
/// the broker is open). Returns what was acknowledged and the changes the
/// run made after the broker opened.
fn run(sim: &SimFs, cut: Option<u64>) -> (Vec<Acked>, u64) {
    let mut broker = SimBroker::start(sim);
    let start = sim.changes();
    if let Some(n) = cut {
        sim.cut_power_after(n);
    }
    let mut acked = Vec::new();
    for i in 0..REQUESTS {
        let values: Vec<Vec<u8>> = (0..PER_BATCH).map(|j| value(i * PER_BATCH + j)).collect();
        let all = i % 2 == 0;
        let acks = if all {
            protocol::ACKS_ALL
        } else {
            protocol::ACKS_LEADER
        };
        let base_offset = match broker.produce(i as u32, acks, &values) {
            Some(Ok(offset)) => offset,
            Some(Err((code, message))) if cut.is_none() => panic!("request {i}: {code} {message}"),
            _ => break,
        };
        acked.push(Acked {
            base_offset,
            values,
            all,
        });
    }
    broker.stop();
    (acked, sim.changes() - start)
}

fn response(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut body = vec![0; u32::from_le_bytes(len) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

/// Every record of the partition after the crash, as (offset, value).
fn read_back(sim: &SimFs) -> Vec<(u64, Vec<u8>)> {
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/data/t-0");
    if !sim.exists(dir) {
        return Vec::new();
    }
    let options = OpenOptions {
        writable: true,
        lock: false,
    };
    let log = Log::open(vfs, dir, LogConfig::default(), options).expect("the partition reopens");
    let out = common::log_records(&log);
    let offset = out.last().map_or(log.start_offset(), |r| r.0 + 1);
    assert_eq!(
        offset,
        log.next_offset(),
        "the log ends where its records do"
    );
    out
}

#[test]
fn a_power_cut_at_any_change_keeps_every_record_acknowledged_with_acks_all() {
    let reference = SimFs::new();
    reference.create_dir_all_durable(Path::new("/data"));
    let (acked, total) = run(&reference, None);
    assert_eq!(
        acked.len() as u64,
        REQUESTS,
        "the reference run is acknowledged whole"
    );
    assert!(
        total > 3 * REQUESTS,
        "{total} changes is too few cut points"
    );
    // A broker takes a moment to stop (its accept loop polls): the cut
    // points run on several threads, each its own broker and file system.
    let workers = 6;
    let checked_all: usize = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..workers)
            .map(|w| {
                scope.spawn(move || {
                    (w..total)
                        .step_by(workers as usize)
                        .map(check_cut)
                        .sum::<usize>()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert!(
        checked_all > 0,
        "no acks=all record was acknowledged before any cut"
    );
}

/// Cuts the power after `cut` changes, crashes, and checks what is left.
/// Returns how many acks=all requests were acknowledged.
fn check_cut(cut: u64) -> usize {
    let sim = SimFs::new();
    sim.create_dir_all_durable(Path::new("/data"));
    let (acked, _) = run(&sim, Some(cut));
    let seed = klog::random::XorShift::new(cut.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1).next();
    sim.crash(&mut |n| seed as usize % (n + 1));
    sim.restore_power();
    let back = read_back(&sim);
    for (i, (offset, _)) in back.iter().enumerate() {
        assert_eq!(*offset, i as u64, "cut {cut}: a gap before offset {offset}");
    }
    for a in &acked {
        for (j, v) in a.values.iter().enumerate() {
            let offset = a.base_offset + j as u64;
            match back.get(offset as usize) {
                Some((_, got)) => assert_eq!(got, v, "cut {cut}: offset {offset} holds other bytes"),
                None if a.all => panic!(
                    "cut {cut}: offset {offset}, acknowledged with acks=all, is lost ({} records back)",
                    back.len()
                ),
                None => {}
            }
        }
    }
    acked.iter().filter(|a| a.all).count()
}

/// A failed fsync in the broker's flusher is never retried: the acks=all
/// request it covered gets a storage error, the partition takes nothing
/// more, and the records it covered are not taken for durable after a
/// restart. (Linux's next fsync would report success for the lost pages;
/// the simulated file system lies the same way.)
#[test]
fn a_failed_fsync_answers_acks_all_with_a_storage_error_and_stops_the_partition() {
    let sim = SimFs::new();
    sim.create_dir_all_durable(Path::new("/data"));
    let mut broker = SimBroker::start(&sim);
    assert_eq!(
        broker.produce(1, protocol::ACKS_ALL, &[value(0)]),
        Some(Ok(0))
    );
    sim.fail_next_sync(|p| p.extension().is_some_and(|e| e == "log"));
    let failed = broker.produce(2, protocol::ACKS_ALL, &[value(1)]);
    let Some(Err((code, message))) = failed else {
        panic!("acks=all after a failed fsync: {failed:?}");
    };
    assert_eq!(code, ErrorCode::StorageError, "{message}");
    assert!(message.contains("not durable"), "{message}");
    for (id, acks) in [(3, protocol::ACKS_ALL), (4, protocol::ACKS_LEADER)] {
        let answer = broker.produce(id, acks, &[value(2)]);
        assert!(
            matches!(&answer, Some(Err((ErrorCode::StorageError, m))) if m.contains("failed fsync")),
            "acks {acks} after the partition stopped: {answer:?}"
        );
    }
    broker.stop();
    sim.crash(&mut |n| n);
    sim.restore_power();
    let back = read_back(&sim);
    assert_eq!(
        back,
        vec![(0, value(0))],
        "only the record acknowledged durable is back"
    );
}

/// What a [`GateFs`] may hold: a file's fsync, or a read of so many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Sync,
    Read(usize),
}

type Matches = Box<dyn Fn(&Path, Op) -> bool + Send + Sync>;

/// The gate's state: what it holds, whether an operation waits at it,
/// and whether it was let go.
#[derive(Default)]
struct GateState {
    armed: Option<Matches>,
    held: bool,
    released: bool,
}

/// A simulated file system whose gate holds the first file operation
/// that matches until the test lets it go: a thread inside a slow fsync
/// or read, caught in the act, so that a test can see what others can do
/// meanwhile (a structural test, not a timing one).
#[derive(Clone)]
struct GateFs {
    sim: SimFs,
    gate: Arc<(Mutex<GateState>, Condvar)>,
}

impl std::fmt::Debug for GateFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GateFs")
    }
}

impl GateFs {
    fn new(sim: &SimFs) -> GateFs {
        GateFs {
            sim: sim.clone(),
            gate: Arc::default(),
        }
    }

    /// Holds the next operation `matches` accepts.
    fn arm(&self, matches: impl Fn(&Path, Op) -> bool + Send + Sync + 'static) {
        let mut state = self.gate.0.lock().unwrap();
        state.armed = Some(Box::new(matches));
    }

    /// Whether an operation waits at the gate, waiting for one until
    /// `deadline`.
    fn wait_held(&self, deadline: Instant) -> bool {
        let mut state = self.gate.0.lock().unwrap();
        while !state.held && Instant::now() < deadline {
            state = self
                .gate
                .1
                .wait_timeout(state, Duration::from_millis(50))
                .unwrap()
                .0;
        }
        state.held
    }

    fn is_held(&self) -> bool {
        self.gate.0.lock().unwrap().held
    }

    /// Lets the held operation (and any later one) go.
    fn release(&self) {
        let mut state = self.gate.0.lock().unwrap();
        state.armed = None;
        state.released = true;
        self.gate.1.notify_all();
    }

    /// Waits at the gate when it is armed for `op` on `path`.
    fn pass(&self, path: &Path, op: Op) {
        let mut state = self.gate.0.lock().unwrap();
        if state.released || !state.armed.as_ref().is_some_and(|m| m(path, op)) {
            return;
        }
        state.armed = None;
        state.held = true;
        self.gate.1.notify_all();
        while !state.released {
            state = self.gate.1.wait(state).unwrap();
        }
    }

    fn wrap(&self, file: Arc<dyn VFile>, path: &Path) -> Arc<dyn VFile> {
        Arc::new(GateFile {
            file,
            path: path.to_path_buf(),
            fs: self.clone(),
        })
    }
}

impl Vfs for GateFs {
    fn open(&self, path: &Path, create: bool) -> std::io::Result<Arc<dyn VFile>> {
        Ok(self.wrap(self.sim.open(path, create)?, path))
    }
    fn open_read(&self, path: &Path) -> std::io::Result<Arc<dyn VFile>> {
        Ok(self.wrap(self.sim.open_read(path)?, path))
    }
    fn exists(&self, path: &Path) -> bool {
        self.sim.exists(path)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.sim.remove(path)
    }
    fn remove_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.sim.remove_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.sim.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.sim.sync_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.sim.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.sim.list(dir)
    }
}

/// A file of a [`GateFs`].
#[derive(Debug)]
struct GateFile {
    file: Arc<dyn VFile>,
    path: PathBuf,
    fs: GateFs,
}

impl VFile for GateFile {
    fn read_at(&self, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
        self.fs.pass(&self.path, Op::Read(buf.len()));
        self.file.read_at(buf, pos)
    }
    fn write_all_at(&self, buf: &[u8], pos: u64) -> std::io::Result<()> {
        self.file.write_all_at(buf, pos)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.file.len()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)
    }
    fn allocate(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.file.allocate(offset, len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.fs.pass(&self.path, Op::Sync);
        self.file.sync_data()
    }
    fn map_mut(&self, len: u64) -> std::io::Result<Box<dyn MapMut>> {
        self.file.map_mut(len)
    }
    fn as_file(&self) -> Option<&std::fs::File> {
        None
    }
    fn modified_ms(&self) -> std::io::Result<i64> {
        self.file.modified_ms()
    }

    fn set_modified_ms(&self, ms: i64) -> std::io::Result<()> {
        self.file.set_modified_ms(ms)
    }
}

/// A produce on `stream` of one acks=1 record; its answer (`None`: no
/// answer before the stream's read timeout).
fn produce_on(stream: &mut TcpStream, id: u32, value: &[u8]) -> Option<Result<u64, ErrorCode>> {
    let mut b = BatchBuilder::new();
    b.push(1_000, None, &[], value);
    let mut frame = Vec::new();
    protocol::produce_request(
        &mut frame,
        id,
        protocol::ACKS_LEADER,
        10_000,
        "t",
        0,
        b.finish(),
    );
    stream.write_all(&frame).ok()?;
    let body = response(stream)?;
    let mut r = Reader::new(&body);
    let header = protocol::decode_response_header(&mut r).unwrap();
    if header.error != ErrorCode::None {
        return Some(Err(header.error));
    }
    Some(Ok(r.u64("base_offset").unwrap()))
}

/// Fetches from `t` [0] at `offset` on `stream`, waiting for nothing;
/// the partition's error and the bytes of records it got (`None`: no
/// answer).
fn fetch_on(stream: &mut TcpStream, id: u32, offset: u64) -> Option<(ErrorCode, usize)> {
    let want = protocol::FetchWant {
        wait_ms_max: 0,
        bytes_min: 0,
        response_bytes_max: 1 << 20,
    };
    let part = protocol::FetchPartition {
        topic: "t".into(),
        partition: 0,
        offset,
        bytes_max: 1 << 20,
        leader_epoch: None,
    };
    let mut frame = Vec::new();
    protocol::fetch_request(&mut frame, id, want, &[part]);
    stream.write_all(&frame).ok()?;
    let body = response(stream)?;
    let mut r = Reader::new(&body);
    protocol::decode_response_header(&mut r).unwrap();
    let parts = protocol::decode_fetch_response(&mut r, protocol::FETCH_VERSION_CONSUMER).unwrap();
    Some((parts[0].error, parts[0].records.len()))
}

/// Finds the first offset at or after `timestamp` in `t` [0] on `stream`
/// (`None`: no answer; `Some(-1)`: no such record).
fn list_offsets_on(stream: &mut TcpStream, id: u32, timestamp: i64) -> Option<i64> {
    let mut frame = Vec::new();
    protocol::list_offsets_request(&mut frame, id, "t", 0, timestamp);
    stream.write_all(&frame).ok()?;
    let body = response(stream)?;
    let mut r = Reader::new(&body);
    let header = protocol::decode_response_header(&mut r).unwrap();
    assert_eq!(header.error, ErrorCode::None, "{}", header.message);
    Some(r.i64("offset").unwrap())
}

/// A lookup by time (`-o @TIME`) reads the segment file with the
/// partition's lock let go, as a fetch does: while it is held inside that
/// read, an append to the partition is answered. (It used to read the file
/// under the lock.)
#[test]
fn an_append_is_answered_while_a_lookup_by_time_reads_the_segment_file() {
    let found = append_answered_while_held_in_a_read("the lookup", |stream| {
        list_offsets_on(stream, 100, 0)
    });
    assert_eq!(found, Some(0), "the lookup found the first record");
}

/// On a broker holding four records of `t` [0], runs `request` on a
/// connection of its own while the gate holds it inside its first read of
/// a batch header from a segment file, and checks that an append to the
/// same partition is answered meanwhile (the read is done with the
/// partition's lock let go). Returns what `request` got.
fn append_answered_while_held_in_a_read<T: Send + 'static>(
    what: &str,
    request: impl FnOnce(&mut TcpStream) -> T + Send + 'static,
) -> T {
    let sim = SimFs::new();
    sim.create_dir_all_durable(Path::new("/data"));
    let gate = GateFs::new(&sim);
    let mut broker = SimBroker::start_on(Arc::new(gate.clone()));
    for i in 0..4 {
        assert_eq!(
            broker.produce(i, protocol::ACKS_ALL, &[value(u64::from(i))]),
            Some(Ok(u64::from(i)))
        );
    }
    let header_bytes = klog::storage::record::BATCH_HEADER_BYTES;
    gate.arm(move |path, op| {
        op == Op::Read(header_bytes) && path.extension().is_some_and(|e| e == "log")
    });
    let reader = {
        let mut stream = broker.connect(Duration::from_secs(30));
        std::thread::spawn(move || request(&mut stream))
    };
    let held = gate.wait_held(Instant::now() + Duration::from_secs(20));
    let mut other = broker.connect(Duration::from_secs(5));
    let answer = held.then(|| produce_on(&mut other, 9_999, b"meanwhile"));
    gate.release();
    let got = reader.join().unwrap();
    drop(other);
    broker.stop();
    assert!(held, "{what} read no batch header");
    assert!(
        matches!(answer, Some(Some(Ok(4)))),
        "the append waited for {what}'s read: {answer:?}"
    );
    got
}

/// A partition's roll makes the old segment durable (its data and its
/// trimmed index, each an fsync) with the partition's lock let go: while
/// the flusher is held inside the fsync of the rolled segment's index,
/// another producer's append to the same partition is answered. (The roll
/// used to run its fsyncs inside the append that rolled, under the lock,
/// and every producer of the partition waited for them.)
#[test]
fn an_append_is_answered_while_a_roll_syncs_the_old_segment() {
    let sim = SimFs::new();
    sim.create_dir_all_durable(Path::new("/data"));
    let gate = GateFs::new(&sim);
    let mut broker = SimBroker::start_on(Arc::new(gate.clone()));
    // The topic's creation syncs an index too; after it, only a roll (or
    // a close) does.
    assert_eq!(
        broker.produce(0, protocol::ACKS_ALL, &[value(0)]),
        Some(Ok(0))
    );
    gate.arm(|path, op| op == Op::Sync && path.ends_with("00000000000000000000.index"));
    let producer = {
        let mut stream = broker.connect(Duration::from_secs(30));
        let gate = gate.clone();
        std::thread::spawn(move || {
            let mut id = 0;
            // 500-byte records fill the 4 KiB segment in a few produces.
            while !gate.is_held() && id < 1000 {
                produce_on(&mut stream, id, &[b'r'; 500]);
                id += 1;
            }
        })
    };
    let held = gate.wait_held(Instant::now() + Duration::from_secs(20));
    let mut other = broker.connect(Duration::from_secs(5));
    let answer = held.then(|| produce_on(&mut other, 9_999, b"meanwhile"));
    // Whatever happened, the gate opens, so that every thread ends.
    gate.release();
    producer.join().unwrap();
    drop(other);
    broker.stop();
    assert!(held, "no roll synced the old segment's index");
    assert!(
        matches!(answer, Some(Some(Ok(_)))),
        "the append waited for the roll's fsync: {answer:?}"
    );
}

/// A fetch finds its byte range in the segment file (reading batch
/// headers, slow on a cold page cache) with the partition's lock let go:
/// while the fetch is held inside that read, an append to the partition
/// is answered. (The lookup used to read the file under the lock.)
#[test]
fn an_append_is_answered_while_a_fetch_reads_the_segment_file() {
    let fetched =
        append_answered_while_held_in_a_read("the fetch", |stream| fetch_on(stream, 100, 2));
    assert!(
        matches!(fetched, Some((ErrorCode::None, n)) if n > 0),
        "the fetch read its records: {fetched:?}"
    );
}
