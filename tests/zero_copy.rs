//! Issue 24: a fetch of a segment written in Kafka's format never holds
//! its records on the heap, on either listener: they go from the page
//! cache to the socket with `sendfile`; a fetch of a legacy segment, read
//! and converted, holds no more than the broker's request memory, however
//! many fetch it at once ("A Kafka fetch of an old segment may still
//! convert at the edge (bounded)": as first reviewed it was not, and eight
//! fetches of a 64 MB legacy batch held 1.5 GB). A broker runs in this
//! process, so that a counting allocator sees every byte its threads hold,
//! while the clients' threads (each reading into one fixed buffer) are
//! left out of the count.

#[path = "common/counting.rs"]
mod counting;

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use counting::Counting;
use klog::broker::{Broker, BrokerConfig, BrokerHandle};
use klog::storage::fs::{RealFs, Vfs};
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::BatchBuilder;

/// Bytes held by the threads that are counted, and the most they held.
static HELD: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// The client's thread: its buffers are not the broker's.
    static LEFT_OUT: Cell<bool> = const { Cell::new(false) };
}

/// The count is of the whole process, so its tests measure one at a time
/// (two brokers at once would count each other's bytes).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn count(bytes: isize) {
    if LEFT_OUT.try_with(Cell::get).unwrap_or(true) {
        return;
    }
    let held = HELD.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(held, Ordering::Relaxed);
}

#[global_allocator]
static COUNTING: Counting = Counting(count);

/// One batch of about 100 MB: 100 records of 1 MiB.
const RECORDS: usize = 100;
const RECORD_BYTES: usize = 1 << 20;

/// Writes partition `t-0` of `data`: one batch of [`RECORDS`] records.
fn write_big_topic(data: &Path) -> u64 {
    let dir = data.join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    let config = LogConfig {
        record_bytes_max: 2 * RECORD_BYTES as u32,
        ..LogConfig::default()
    };
    let options = OpenOptions {
        writable: true,
        lock: false,
    };
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let mut log = Log::open(vfs, &dir, config, options).unwrap();
    let mut builder = BatchBuilder::new();
    let value = vec![b'v'; RECORD_BYTES];
    for i in 0..RECORDS {
        builder.push(1_700_000_000_000 + i as i64, None, &[], &value);
    }
    let batch = builder.finish();
    let len = batch.len() as u64;
    log.append(batch, 0).unwrap();
    log.close().unwrap();
    len
}

/// Reads exactly `n` bytes from `stream` through `buf`, throwing them
/// away; returns `n`.
fn drain(stream: &mut TcpStream, mut n: usize, buf: &mut [u8]) -> usize {
    let mut total = 0;
    while n > 0 {
        let want = n.min(buf.len());
        stream.read_exact(&mut buf[..want]).unwrap();
        n -= want;
        total += want;
    }
    total
}

/// A Kafka Fetch v4 of t-0 from offset 0, `max_bytes` 0 (at least one
/// batch, whatever its size).
fn kafka_fetch_v4() -> Vec<u8> {
    kafka_fetch_v4_of(&[0], 0, 0)
}

/// A Kafka Fetch v4 of topic `t`'s `partitions` from offset 0.
fn kafka_fetch_v4_of(partitions: &[i32], max_bytes: i32, partition_max: i32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&1i16.to_be_bytes()); // Fetch
    b.extend_from_slice(&4i16.to_be_bytes()); // version 4
    b.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    b.extend_from_slice(&4i16.to_be_bytes());
    b.extend_from_slice(b"test"); // client id
    b.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
    b.extend_from_slice(&500i32.to_be_bytes()); // max wait ms
    b.extend_from_slice(&1i32.to_be_bytes()); // min bytes
    b.extend_from_slice(&max_bytes.to_be_bytes()); // max bytes
    b.push(0); // isolation level
    b.extend_from_slice(&1i32.to_be_bytes()); // topics
    b.extend_from_slice(&1i16.to_be_bytes());
    b.extend_from_slice(b"t");
    b.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
    for &p in partitions {
        b.extend_from_slice(&p.to_be_bytes()); // partition
        b.extend_from_slice(&0i64.to_be_bytes()); // fetch offset
        b.extend_from_slice(&partition_max.to_be_bytes()); // partition max bytes
    }
    let mut frame = (b.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&b);
    frame
}

/// Reads a whole Fetch v4 answer of one topic; returns each partition's
/// records length.
fn read_answer(stream: &mut TcpStream) -> Vec<usize> {
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(head) as usize];
    stream.read_exact(&mut body).unwrap();
    let i32_at = |at: usize| i32::from_be_bytes(body[at..at + 4].try_into().unwrap());
    // The correlation id, throttle, topic count, name "t", partition count.
    let mut at = 4 + 4 + 4 + 2 + 1;
    let count = i32_at(at);
    at += 4;
    let mut sizes = Vec::new();
    for _ in 0..count {
        // Index, error, high watermark, last stable offset, aborted.
        at += 4 + 2 + 8 + 8;
        at += 4 + i32_at(at).max(0) as usize * 16;
        let len = i32_at(at).max(0) as usize;
        at += 4 + len;
        sizes.push(len);
    }
    sizes
}

/// Sends a Kafka fetch and reads its answer through a fixed buffer: the
/// records' length.
fn kafka_fetch(addr: std::net::SocketAddr, buf: &mut [u8]) -> usize {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(&kafka_fetch_v4()).unwrap();
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).unwrap();
    let frame = i32::from_be_bytes(head) as usize;
    // correlation id, throttle, 1 topic "t", 1 partition: index, error,
    // high watermark, last stable offset, no aborted transactions.
    let fixed = 4 + 4 + 4 + 2 + 1 + 4 + 4 + 2 + 8 + 8 + 4;
    let mut fields = vec![0u8; fixed];
    stream.read_exact(&mut fields).unwrap();
    let error = i16::from_be_bytes([fields[23], fields[24]]);
    assert_eq!(error, 0, "the fetch's error code");
    stream.read_exact(&mut head).unwrap();
    let records = i32::from_be_bytes(head) as usize;
    assert_eq!(frame, fixed + 4 + records, "the frame holds the records");
    drain(&mut stream, records, buf)
}

/// A klog fetch of t-0 from offset 0 with a byte budget of 1: the
/// records' length, read through a fixed buffer.
fn klog_fetch(addr: SocketAddr, buf: &mut [u8]) -> usize {
    klog_fetch_of(addr, &[0], 1, buf)
}

/// A klog fetch of topic `t`'s `partitions` from offset 0 with a byte
/// budget of `bytes_max` for each: the answer's length, read through a
/// fixed buffer.
fn klog_fetch_of(addr: SocketAddr, partitions: &[u32], bytes_max: u32, buf: &mut [u8]) -> usize {
    use klog::protocol::{self, FetchPartition, FetchWant};
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut frame = Vec::new();
    let want = FetchWant {
        wait_ms_max: 500,
        bytes_min: 1,
        response_bytes_max: bytes_max.saturating_mul(partitions.len() as u32),
    };
    let parts: Vec<FetchPartition> = partitions
        .iter()
        .map(|&partition| FetchPartition {
            topic: "t".into(),
            partition,
            offset: 0,
            bytes_max,
            leader_epoch: None,
        })
        .collect();
    protocol::fetch_request(&mut frame, 3, want, &parts);
    stream.write_all(&frame).unwrap();
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).unwrap();
    let frame_len = u32::from_le_bytes(head) as usize;
    drain(&mut stream, frame_len, buf)
}

/// A fetch through a buffer: the bytes it read.
type Fetch<'a> = dyn FnMut(&mut [u8]) -> usize + 'a;

#[test]
fn a_fetch_of_a_100_mb_batch_holds_none_of_it_on_the_heap_on_either_listener() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    LEFT_OUT.with(|l| l.set(true));
    let data = tempfile::tempdir().unwrap();
    let batch_bytes = write_big_topic(data.path());
    assert!(batch_bytes > 100_000_000, "{batch_bytes}");
    let config = BrokerConfig::new(data.path(), "127.0.0.1:0");
    let (handle, thread, kafka) = start(config);
    let mut buf = vec![0u8; 256 * 1024];
    // A first fetch of each kind warms the broker's buffers up.
    kafka_fetch(kafka, &mut buf);
    klog_fetch(handle.local_addr(), &mut buf);
    let klog_addr = handle.local_addr();
    let fetches: [(&str, &mut Fetch<'_>); 2] = [
        ("Kafka", &mut |buf| kafka_fetch(kafka, buf)),
        ("klog", &mut |buf| klog_fetch(klog_addr, buf)),
    ];
    for (name, fetch) in fetches {
        PEAK.store(HELD.load(Ordering::Relaxed), Ordering::Relaxed);
        let before = HELD.load(Ordering::Relaxed);
        let got = fetch(&mut buf);
        let peak = PEAK.load(Ordering::Relaxed) - before;
        assert!(got as u64 >= batch_bytes, "{name}: {got} bytes fetched");
        assert!(
            peak < 8 << 20,
            "{name}: the broker held {peak} bytes more during a fetch of {got}"
        );
    }
    handle.stop();
    thread.join().unwrap().unwrap();
}

/// Writes partition `t-0` of `data` as klog wrote it before this change:
/// one legacy segment of one batch of `records` records of 1,000,000
/// bytes; returns the batch's length.
fn write_legacy_topic(data: &Path, records: i64) -> usize {
    write_legacy_partition(data, 0, records)
}

/// Writes partition `partition` of topic `t` as [`write_legacy_topic`].
fn write_legacy_partition(data: &Path, partition: u32, records: i64) -> usize {
    use klog::storage::record::{legacy, Format};
    let dir = data.join(format!("t-{partition}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut b = legacy::BatchBuilder::new();
    let value = vec![b'v'; 1_000_000];
    for i in 0..records {
        b.push(1_700_000_000_000 + i, None, &[], &value);
    }
    let batch = b.finish();
    legacy::stamp(batch, 0, 0);
    let mut seg = klog::storage::segment::encode_header(0, Format::Legacy).to_vec();
    seg.extend_from_slice(batch);
    std::fs::write(dir.join("00000000000000000000.log"), &seg).unwrap();
    batch.len()
}

#[test]
fn eight_kafka_fetches_of_a_legacy_batch_stay_within_the_request_memory() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    LEFT_OUT.with(|l| l.set(true));
    let data = tempfile::tempdir().unwrap();
    let batch_bytes = write_legacy_topic(data.path(), 64) as u64;
    let config = BrokerConfig::new(data.path(), "127.0.0.1:0");
    let bound = config.queued_request_bytes_max;
    let (handle, thread, kafka) = start(config);
    let mut buf = vec![0u8; 256 * 1024];
    assert!(kafka_fetch(kafka, &mut buf) as u64 >= batch_bytes);
    let klog_addr = handle.local_addr();
    let mut over = Vec::new();
    for (name, kafka_listener) in [("Kafka", true), ("klog", false)] {
        PEAK.store(HELD.load(Ordering::Relaxed), Ordering::Relaxed);
        let before = HELD.load(Ordering::Relaxed);
        let clients: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || {
                    LEFT_OUT.with(|l| l.set(true));
                    let mut buf = vec![0u8; 256 * 1024];
                    if kafka_listener {
                        kafka_fetch(kafka, &mut buf)
                    } else {
                        klog_fetch(klog_addr, &mut buf)
                    }
                })
            })
            .collect();
        for c in clients {
            assert!(c.join().unwrap() as u64 >= batch_bytes);
        }
        let peak = (PEAK.load(Ordering::Relaxed) - before) as u64;
        if peak >= bound {
            over.push(format!(
                "{name}: the broker held {peak} bytes more during eight fetches"
            ));
        }
    }
    handle.stop();
    thread.join().unwrap().unwrap();
    assert!(
        over.is_empty(),
        "{over:#?} of a {batch_bytes}-byte legacy batch (its request memory is {bound})"
    );
}

/// A Kafka fetch took a reserve of twice its byte budget (32 MiB for any
/// consumer asking 16 MiB or more, as every client does by default) from
/// the request memory while the conversion of a legacy batch asked the
/// same memory for four times the batch. When the two together passed the
/// bound, the fetch waited for memory only it held: the whole request
/// timeout, at the head of the memory queue, then answered without
/// records; the consumer asked again, for ever (a review found it). Here
/// the bound is 128 MiB (any bound of at least the 100 MB request limit is
/// accepted) and the legacy batch 26 MB; with the default 512 MiB, any
/// legacy batch over 120 MiB did the same.
#[test]
fn a_kafka_consumer_fetching_a_large_legacy_batch_reads_it() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    LEFT_OUT.with(|l| l.set(true));
    let data = tempfile::tempdir().unwrap();
    let batch_bytes = write_legacy_topic(data.path(), 26);
    let mut config = BrokerConfig::new(data.path(), "127.0.0.1:0");
    config.queued_request_bytes_max = 128 << 20;
    config.request_timeout_ms = 3000;
    config.log.record_bytes_max = 2 << 20;
    let (handle, thread, kafka) = start(config);

    // A consumer's Fetch v4 with fetch.max.bytes 50 MB (librdkafka's and
    // the Java client's default) and max.partition.fetch.bytes 1 MiB.
    let mut req = kafka_fetch_v4();
    let max_bytes_at = 4 + 2 + 2 + 4 + 2 + 4 + 4 + 4 + 4;
    req[max_bytes_at..max_bytes_at + 4].copy_from_slice(&52_428_800i32.to_be_bytes());
    let partition_max_at = req.len() - 4;
    req[partition_max_at..].copy_from_slice(&(1i32 << 20).to_be_bytes());
    let mut got = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(kafka).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let started = std::time::Instant::now();
        stream.write_all(&req).unwrap();
        let mut head = [0u8; 4];
        stream.read_exact(&mut head).unwrap();
        // Up to the partition's records: the correlation id, throttle,
        // topic count, name, partition count, index, error, high
        // watermark, last stable offset, log start offset, aborted count.
        let fixed = 4 + 4 + 4 + 2 + 1 + 4 + 4 + 2 + 8 + 8 + 4;
        let mut fields = vec![0u8; fixed];
        stream.read_exact(&mut fields).unwrap();
        stream.read_exact(&mut head).unwrap();
        let records = i32::from_be_bytes(head) as usize;
        let mut buf = vec![0u8; 256 * 1024];
        drain(&mut stream, records, &mut buf);
        got.push((records, started.elapsed()));
    }
    handle.stop();
    thread.join().unwrap().unwrap();
    assert!(
        got.iter().all(|&(records, _)| records >= batch_bytes),
        "a {batch_bytes}-byte legacy batch, fetched twice: (records bytes, time taken) {got:?}"
    );
}

/// Starts a broker in this process with `config`, a Kafka listener on
/// port 0; returns its handle, thread and Kafka address.
fn start(mut config: BrokerConfig) -> (BrokerHandle, JoinHandle<anyhow::Result<()>>, SocketAddr) {
    config.kafka_listen = Some("127.0.0.1:0".into());
    config.quiet = true;
    let broker = Broker::open(config).expect("the broker opens");
    let handle = broker.handle().unwrap();
    let thread = std::thread::spawn(move || broker.run());
    let kafka = handle.kafka_addr().unwrap();
    (handle, thread, kafka)
}

/// A legacy conversion's request memory went back when its batches were
/// copied into the connection's answer, before the answer was written: a
/// consumer that stopped reading kept a converted answer on the heap
/// outside the bound until the write timed out (a review: ten such
/// consumers of a 12 MB batch held 120 MB past a 48 MiB bound).
#[test]
fn kafka_consumers_that_stop_reading_a_legacy_segment_hold_it_within_the_request_memory() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    LEFT_OUT.with(|l| l.set(true));
    let data = tempfile::tempdir().unwrap();
    let batch_bytes = write_legacy_topic(data.path(), 12);
    let mut config = BrokerConfig::new(data.path(), "127.0.0.1:0");
    config.request_bytes_max = 16 << 20;
    config.queued_request_bytes_max = 48 << 20;
    config.request_timeout_ms = 30_000;
    let bound = config.queued_request_bytes_max;
    let (handle, thread, kafka) = start(config);
    // A first fetch, read whole, warms the broker up.
    let req = kafka_fetch_v4();
    let mut s = TcpStream::connect(kafka).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&req).unwrap();
    assert!(read_answer(&mut s)[0] >= batch_bytes);
    drop(s);
    std::thread::sleep(Duration::from_millis(500));
    let before = HELD.load(Ordering::Relaxed);
    let slow: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut s = TcpStream::connect(kafka).unwrap();
            s.write_all(&req).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    let held = (HELD.load(Ordering::Relaxed) - before) as u64;
    drop(slow);
    handle.stop();
    thread.join().unwrap().unwrap();
    assert!(
        held <= bound,
        "ten consumers that stopped reading a {batch_bytes}-byte legacy batch: the broker holds \
         {held} bytes more, past its request memory of {bound}"
    );
}

/// A fetch of two legacy partitions took the first one's conversion
/// memory, then waited for the second's holding the first's: when the two
/// passed the bound, it waited the whole request timeout for memory only it
/// held, at the head of the queue every large request waits in (a review).
/// Now only a fetch that holds none waits: the second partition's records
/// come with the next fetch.
#[test]
fn a_fetch_of_two_legacy_partitions_does_not_wait_for_memory_it_holds() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    LEFT_OUT.with(|l| l.set(true));
    let data = tempfile::tempdir().unwrap();
    let a = write_legacy_partition(data.path(), 0, 5);
    let b = write_legacy_partition(data.path(), 1, 5);
    let mut config = BrokerConfig::new(data.path(), "127.0.0.1:0");
    config.request_bytes_max = 1 << 20;
    config.queued_request_bytes_max = 32 << 20;
    config.request_timeout_ms = 60_000;
    let (handle, thread, kafka) = start(config);
    let mut s = TcpStream::connect(kafka).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let started = Instant::now();
    s.write_all(&kafka_fetch_v4_of(&[0, 1], 50_000_000, 10_000_000))
        .unwrap();
    let both = read_answer(&mut s);
    let kafka_took = started.elapsed();
    s.write_all(&kafka_fetch_v4_of(&[1], 50_000_000, 10_000_000))
        .unwrap();
    let second = read_answer(&mut s);
    // The same on klog's listener: the answer's length, both, then one.
    let klog = handle.local_addr();
    let mut buf = vec![0u8; 256 * 1024];
    let started = Instant::now();
    let klog_both = klog_fetch_of(klog, &[0, 1], 10_000_000, &mut buf);
    let klog_took = started.elapsed();
    let klog_second = klog_fetch_of(klog, &[1], 10_000_000, &mut buf);
    handle.stop();
    thread.join().unwrap().unwrap();
    assert!(
        kafka_took < Duration::from_secs(30) && both[0] >= a && second[0] >= b,
        "Kafka: two legacy partitions of {a} and {b} bytes: answered in {kafka_took:?} with \
         {both:?}, then the second with {second:?}"
    );
    assert!(
        klog_took < Duration::from_secs(30) && klog_both >= a && klog_second >= b,
        "klog: two legacy partitions of {a} and {b} bytes: answered in {klog_took:?} with \
         {klog_both} bytes, then the second with {klog_second}"
    );
}

/// A Kafka fetch request frame larger than the connection's 64 KiB read
/// buffer keeps its excess taken from the request memory while it is
/// handled. A legacy batch whose conversion needed the whole bound (a
/// 40 MB batch against 128 MiB) then waited the whole request timeout for
/// memory only that same request held, and answered no records; the
/// consumer asked again, the same way, for ever (a review). A fetch
/// naming about 4,600 partitions (a consumer of a few thousand
/// partitions, or of a few hundred topics with long names) is such a
/// frame; here the partitions past the first do not exist, which only
/// makes the frame large.
#[test]
fn a_large_kafka_fetch_request_reads_a_large_legacy_batch() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    LEFT_OUT.with(|l| l.set(true));
    let data = tempfile::tempdir().unwrap();
    let batch_bytes = write_legacy_topic(data.path(), 40);
    let mut config = BrokerConfig::new(data.path(), "127.0.0.1:0");
    config.queued_request_bytes_max = 128 << 20;
    config.request_timeout_ms = 3000;
    config.log.record_bytes_max = 2 << 20;
    let (handle, thread, kafka) = start(config);
    let fetch = |partitions: &[i32]| {
        let mut stream = TcpStream::connect(kafka).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let req = kafka_fetch_v4_of(partitions, 52_428_800, 1 << 20);
        let started = Instant::now();
        stream.write_all(&req).unwrap();
        let sizes = read_answer(&mut stream);
        (req.len(), sizes[0], started.elapsed())
    };
    let small = fetch(&[0]);
    let many: Vec<i32> = std::iter::once(0).chain(1_000..5_600).collect();
    let large = fetch(&many);
    handle.stop();
    thread.join().unwrap().unwrap();
    assert!(
        small.1 >= batch_bytes && large.1 >= batch_bytes,
        "a {batch_bytes}-byte legacy batch: (request bytes, records bytes, time) \
         small request {small:?}, large request {large:?}"
    );
}
