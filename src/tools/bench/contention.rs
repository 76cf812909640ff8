//! Two workloads that show whether one partition's slow work holds up the
//! others (head-of-line blocking in the broker):
//!
//! - **fanout**: acks=all across many partitions (64 by default), one
//!   producer per partition. Every acknowledgement waits for an fsync of
//!   its own partition; a broker that fsyncs partitions one after another,
//!   or wakes every waiter on every flush, shows it here.
//! - **roll**: acks=all produce latency on one partition while another
//!   partition is written steadily and rolls a segment at every
//!   `--segment-bytes` (1 MiB by default). Its rolls (several fsyncs) must
//!   not show in the first partition's 99th percentile.
//!
//! Both are timed by the producers ([`super::workload::produce`]): from
//! sending a request to its acknowledgement, per record.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::route::{Route, Sender};
use super::workload::{self, ProduceRun, Report};
use crate::client::{BatchOptions, Connection, ParsedRecord, ProducerConfig};
use crate::error::{Error, Result};
use crate::storage::record::Codec;

/// The partition a roll run writes in the background, rolling segments
/// (the measured producer is pinned to partition 0).
const ROLLING_PARTITION: u32 = 1;
/// Bytes of each background record: 64 of them make a 64 KiB request.
const BACKGROUND_RECORD_BYTES: usize = 1024;
const BACKGROUND_BATCH_RECORDS: u32 = 64;

/// A roll run: the measured producer, and how fast the other partition is
/// written.
#[derive(Debug, Clone)]
pub struct RollRun {
    /// The measured producer (pinned to partition 0; acks=all by default).
    pub measured: ProduceRun,
    /// Bytes a second written to partition 1 in the background (acks=1).
    pub background_bytes_per_sec: u64,
}

/// What a roll run saw: the measured producer's report, and the bytes
/// written to the rolling partition meanwhile.
#[derive(Debug, Clone)]
pub struct RollReport {
    /// The measured producer.
    pub measured: Report,
    /// Bytes appended to the rolling partition during the run.
    pub background_bytes: u64,
}

/// Produces `run.records` records with one producer per partition of
/// `topic`, each pinned to its partition; `topic` is created with
/// `partitions` partitions when it does not exist.
pub fn fanout(
    route: &Route,
    topic: &str,
    partitions: u32,
    run: &ProduceRun,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Report> {
    let count = Connection::connect(route.any())?.create_topic(topic, partitions)?;
    let run = ProduceRun {
        producers: count,
        pinned: true,
        ..run.clone()
    };
    workload::produce(route, topic, &run, progress)
}

/// Measures `run.measured` on partition 0 of `topic` while partition 1 is
/// written at `run.background_bytes_per_sec`.
pub fn roll(
    route: &Route,
    topic: &str,
    run: &RollRun,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<RollReport> {
    let count = Connection::connect(route.any())?.create_topic(topic, ROLLING_PARTITION + 1)?;
    if count <= ROLLING_PARTITION {
        return Err(Error::Config(format!(
            "topic {topic} has {count} partition(s); a roll run needs two: use a topic of its own"
        )));
    }
    let measured = ProduceRun {
        producers: 1,
        pinned: true,
        ..run.measured.clone()
    };
    let stop = AtomicBool::new(false);
    let background_bytes = AtomicU64::new(0);
    let (measured, background) = std::thread::scope(|s| {
        let background = s.spawn(|| {
            write_background(
                route,
                topic,
                run.background_bytes_per_sec,
                &stop,
                &background_bytes,
            )
        });
        // Let the background reach its pace before measuring.
        std::thread::sleep(Duration::from_millis(200));
        let measured = workload::produce(route, topic, &measured, progress);
        stop.store(true, Ordering::Relaxed);
        let background = background.join().unwrap_or(Err(Error::Panicked {
            thread: "the background producer",
        }));
        (measured, background)
    });
    let measured = measured?;
    background?;
    Ok(RollReport {
        measured,
        background_bytes: background_bytes.load(Ordering::Relaxed),
    })
}

/// Writes partition 1 of `topic` at `bytes_per_sec` (acks=1, 64 KiB
/// requests) until `stop`, counting the bytes acknowledged in `written`.
fn write_background(
    route: &Route,
    topic: &str,
    bytes_per_sec: u64,
    stop: &AtomicBool,
    written: &AtomicU64,
) -> Result<()> {
    let config = ProducerConfig {
        acks: crate::protocol::ACKS_LEADER,
        batch: BatchOptions {
            records_max: BACKGROUND_BATCH_RECORDS,
            bytes_max: usize::MAX,
            codec: Codec::None,
            level: None,
        },
        in_flight_max: 16,
        ..ProducerConfig::default()
    };
    let mut producer = Sender::connect(route, topic, config)?;
    let record = ParsedRecord {
        key: None,
        value: vec![b'r'; BACKGROUND_RECORD_BYTES],
        null_value: false,
        headers: Vec::new(),
        timestamp: None,
        source: None,
    };
    let start = Instant::now();
    let mut sent_bytes = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // Pace: the bytes sent so far leave no sooner than the rate allows.
        let due = Duration::from_secs_f64(sent_bytes as f64 / bytes_per_sec.max(1) as f64);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait.min(Duration::from_millis(50)));
            continue;
        }
        for _ in 0..BACKGROUND_BATCH_RECORDS {
            producer.send(ROLLING_PARTITION, &record, crate::clock::now_ms())?;
        }
        sent_bytes += BACKGROUND_RECORD_BYTES as u64 * u64::from(BACKGROUND_BATCH_RECORDS);
    }
    let (summary, result) = producer.close();
    written.store(
        summary.delivered * BACKGROUND_RECORD_BYTES as u64,
        Ordering::Relaxed,
    );
    result
}
