//! The broker's durability promise under a power cut: a broker serving the
//! real protocol over a simulated file system (`BrokerConfig::vfs`) is cut
//! off at every change its workload makes; after the crash, every record
//! it acknowledged with acks=all is there at its offset, byte for byte, and
//! the log is a gap-free prefix. (kill -9 keeps the page cache, so only a
//! simulated power cut can test the fsync.)

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use klog::broker::{Broker, BrokerConfig};
use klog::protocol::{self, ErrorCode, Reader};
use klog::storage::fs::sim::SimFs;
use klog::storage::fs::Vfs;
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
        let mut config = BrokerConfig::new("/data", "127.0.0.1:0");
        config.vfs = Arc::new(sim.clone());
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
