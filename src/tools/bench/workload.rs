//! The workloads of `klog-bench` and what they measure (a [`Report`]):
//! produce, consume and end-to-end latency runs against a broker, and a
//! broker of the benchmark's own for when none is given.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::route::{Route, Sender};
use crate::broker::{Broker, BrokerConfig, BrokerHandle};
use crate::client::{BatchOptions, ParsedRecord};
use crate::client::{Connection, Consumer, ConsumerConfig, ConsumerPartition, ProducerConfig};
use crate::error::{Error, Result};
use crate::stats::Histogram;
use crate::storage::record::Codec;

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Records moved.
    pub records: u64,
    /// Their bytes (values).
    pub bytes: u64,
    /// Wall time, seconds.
    pub secs: f64,
    /// Latencies, µs (produce: send to acknowledgement; latency: produce
    /// to consume).
    pub latency_us: Histogram,
}

impl Report {
    /// Records per second.
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.secs.max(1e-9)
    }

    /// MB (10^6 bytes) of values per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.secs.max(1e-9)
    }

    /// Kafka's final line: `N records sent, R records/sec (M MB/sec), ...`.
    pub fn kafka_line(&self, verb: &str) -> String {
        let ms = |us: u64| us as f64 / 1000.0;
        let h = &self.latency_us;
        if h.count() == 0 {
            // Nothing was timed (a consume): no latency to speak of.
            return format!(
                "{} records {verb}, {:.1} records/sec ({:.2} MB/sec).",
                self.records,
                self.records_per_sec(),
                self.mb_per_sec()
            );
        }
        format!(
            "{} records {verb}, {:.1} records/sec ({:.2} MB/sec), {:.2} ms avg latency, {:.2} ms max latency, \
             {:.2} ms 50th, {:.2} ms 95th, {:.2} ms 99th, {:.2} ms 99.9th.",
            self.records,
            self.records_per_sec(),
            self.mb_per_sec(),
            h.mean() / 1000.0,
            ms(h.max()),
            ms(h.quantile(0.50)),
            ms(h.quantile(0.95)),
            ms(h.quantile(0.99)),
            ms(h.quantile(0.999)),
        )
    }

    /// The report as one JSON object.
    pub fn json(&self, kind: &str) -> serde_json::Value {
        let ms = |us: u64| us as f64 / 1000.0;
        let h = &self.latency_us;
        if h.count() == 0 {
            return serde_json::json!({
                "type": kind,
                "records": self.records,
                "bytes": self.bytes,
                "seconds": self.secs,
                "records_per_sec": self.records_per_sec(),
                "mb_per_sec": self.mb_per_sec(),
            });
        }
        serde_json::json!({
            "type": kind,
            "records": self.records,
            "bytes": self.bytes,
            "seconds": self.secs,
            "records_per_sec": self.records_per_sec(),
            "mb_per_sec": self.mb_per_sec(),
            "latency_ms_avg": h.mean() / 1000.0,
            "latency_ms_max": ms(h.max()),
            "latency_ms_p50": ms(h.quantile(0.50)),
            "latency_ms_p95": ms(h.quantile(0.95)),
            "latency_ms_p99": ms(h.quantile(0.99)),
            "latency_ms_p999": ms(h.quantile(0.999)),
        })
    }
}

/// A broker of the benchmark's own, in this process, on a temporary data
/// directory removed when dropped.
#[derive(Debug)]
pub struct OwnBroker {
    handle: BrokerHandle,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
    dir: PathBuf,
}

impl OwnBroker {
    /// Starts one on 127.0.0.1, a free port, and a fresh directory, whose
    /// topics have `partitions` partitions and segments of `segment_bytes`
    /// (the broker's default when `None`).
    pub fn start(partitions: u32, segment_bytes: Option<u64>) -> anyhow::Result<OwnBroker> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("klog-bench-{}-{nanos}", std::process::id()));
        let mut config = BrokerConfig::new(&dir, "127.0.0.1:0");
        config.quiet = true;
        config.partitions_default = partitions;
        if let Some(bytes) = segment_bytes {
            config.log.segment_bytes = bytes;
        }
        let broker = Broker::open(config)?;
        let handle = broker.handle()?;
        let thread = std::thread::Builder::new()
            .name("broker".into())
            .spawn(move || broker.run())?;
        Ok(OwnBroker {
            handle,
            thread: Some(thread),
            dir,
        })
    }

    /// Its address.
    pub fn addr(&self) -> String {
        self.handle.local_addr().to_string()
    }

    /// Bytes of the segment files of `topic`.
    pub fn log_bytes(&self, topic: &str) -> u64 {
        segment_bytes(&self.dir, topic)
    }
}

/// Bytes of the segment files of `topic` in the data directory `dir`.
pub fn segment_bytes(dir: &std::path::Path, topic: &str) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(|e| e.ok())
            .map(|e| {
                let path = e.path();
                if path.is_dir() {
                    segment_bytes(&path, topic)
                } else if path.extension().is_some_and(|x| x == "log")
                    && dir
                        .file_name()
                        .and_then(|n| n.to_str())
                        .and_then(crate::storage::store::parse_partition_dir)
                        .is_some_and(|(t, _)| t == topic)
                {
                    e.metadata().map_or(0, |m| m.len())
                } else {
                    0
                }
            })
            .sum()
    })
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        self.handle.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A produce run: what is sent, and how.
#[derive(Debug, Clone)]
pub struct ProduceRun {
    /// Records in all.
    pub records: u64,
    /// Bytes of each record's value.
    pub value_bytes: usize,
    /// Records per batch (request).
    pub batch_records: u32,
    /// 0, 1, -1.
    pub acks: i8,
    /// Requests in flight per producer.
    pub in_flight_max: usize,
    /// Producers (threads, each with its connection).
    pub producers: u32,
    /// Each producer sends to one partition only (producer i to partition
    /// i, wrapping around), instead of moving to the next after each batch.
    pub pinned: bool,
}

/// Produces `run.records` records of `run.value_bytes` bytes to `topic`
/// through `route`, calling `progress` with the records sent so far now
/// and then.
pub fn produce(
    route: &Route,
    topic: &str,
    run: &ProduceRun,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Report> {
    let sent = AtomicU64::new(0);
    let start = Instant::now();
    let producers = run.producers.max(1) as u64;
    let results: Vec<Result<(u64, Histogram)>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..producers)
            .map(|i| {
                let sent = &sent;
                s.spawn(move || {
                    let share = run.records / producers + u64::from(i < run.records % producers);
                    produce_share(route, topic, run, share, i as u32, sent, progress)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join().unwrap_or(Err(Error::Panicked {
                    thread: "a producer thread",
                }))
            })
            .collect()
    });
    let mut report = Report::default();
    for r in results {
        let (records, latency_us) = r?;
        report.records += records;
        report.latency_us.merge(&latency_us);
    }
    report.secs = start.elapsed().as_secs_f64();
    report.bytes = report.records * run.value_bytes as u64;
    Ok(report)
}

fn produce_share(
    route: &Route,
    topic: &str,
    run: &ProduceRun,
    records: u64,
    first_partition: u32,
    sent: &AtomicU64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(u64, Histogram)> {
    let config = ProducerConfig {
        acks: run.acks,
        batch: BatchOptions {
            records_max: run.batch_records.max(1),
            bytes_max: usize::MAX,
            codec: Codec::None,
            level: None,
        },
        in_flight_max: run.in_flight_max.max(1),
        ..ProducerConfig::default()
    };
    let mut producer = Sender::connect(route, topic, config)?;
    let partitions = producer.partitions().max(1);
    let record = ParsedRecord {
        key: None,
        value: vec![b'x'; run.value_bytes],
        null_value: false,
        headers: Vec::new(),
        timestamp: None,
        source: None,
    };
    let mut partition = first_partition % partitions;
    let mut now = crate::clock::now_ms();
    for i in 0..records {
        producer.send(partition, &record, now)?;
        if !run.pinned && (i + 1) % u64::from(run.batch_records.max(1)) == 0 {
            partition = (partition + 1) % partitions;
        }
        if i % 4096 == 4095 {
            now = crate::clock::now_ms();
            progress(sent.fetch_add(4096, Ordering::Relaxed) + 4096);
            // A producer that never blocks would not see a signal.
            if crate::stop::stopping() {
                break;
            }
        }
    }
    let (summary, result) = producer.close();
    result?;
    Ok((summary.delivered, summary.latency))
}

/// Produces `records` records of `value_bytes` bytes to `topic` quickly
/// (batches of 1000; acks=all, so that all are visible when it returns):
/// the data a consume run reads.
pub fn fill(route: &Route, topic: &str, records: u64, value_bytes: usize) -> Result<()> {
    let run = ProduceRun {
        records,
        value_bytes,
        batch_records: 1000,
        acks: crate::protocol::ACKS_ALL,
        in_flight_max: 8,
        producers: 1,
        pinned: false,
    };
    produce(route, topic, &run, &|_| {}).map(|_| ())
}

/// Consumes `records` records of `topic` from the beginning of every
/// partition, each from its broker in `route`, fetching `fetch_bytes_max`
/// per partition per request and up to `prefetch` responses ahead.
pub fn consume(
    route: &Route,
    topic: &str,
    records: u64,
    fetch_bytes_max: u32,
    prefetch: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Report> {
    // Records just produced with acks=1 become visible as the broker
    // flushes them: give it a moment before calling the topic short.
    let waited = Instant::now();
    let offsets = loop {
        let offsets = route.offsets(topic)?;
        let available: u64 = offsets.iter().map(|(s, e)| e - s).sum();
        if available >= records {
            break offsets;
        }
        if waited.elapsed() > Duration::from_secs(5) {
            return Err(Error::Config(format!(
                "topic {topic:?} holds {available} records, fewer than the {records} asked for"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let parts = partitions_at(route, &offsets, |&(start, end)| (start, Some(end)));
    // Every record up to the ends counted (a transaction's too): no
    // wait at a transaction still open.
    let config = ConsumerConfig {
        fetch_bytes_max,
        prefetch,
        read_committed: false,
        ..ConsumerConfig::default()
    };
    let start = Instant::now();
    let mut consumer = Consumer::start_on(&parts, topic, config)?;
    let mut report = Report::default();
    while report.records < records && !consumer.done() {
        if crate::stop::stopping() {
            return Err(Error::Stopped {
                addr: route.any().to_string(),
            });
        }
        consumer.poll(Duration::from_millis(500), |_, r| {
            report.records += 1;
            report.bytes += r.value.len() as u64;
            Ok(report.records < records)
        })?;
        progress(report.records);
    }
    if report.records < records {
        // Transactions' markers take offsets and hold no record.
        return Err(Error::Config(format!(
            "topic {topic:?} holds {} records, fewer than the {records} asked for \
             (transaction markers take offsets too)",
            report.records
        )));
    }
    report.secs = start.elapsed().as_secs_f64();
    Ok(report)
}

/// End to end: one producer sends `records` records at `rate_per_sec` a second
/// (acks=1), each carrying its send time; a consumer following the topic
/// measures when each arrives.
pub fn latency(
    route: &Route,
    topic: &str,
    records: u64,
    value_bytes: usize,
    rate_per_sec: u64,
) -> Result<Report> {
    let value_bytes = value_bytes.max(8);
    // Start the consumer at the current end, before producing.
    let offsets = match route.offsets(topic) {
        Err(Error::Broker {
            code: crate::protocol::ErrorCode::UnknownTopic,
            ..
        }) => {
            Connection::connect(route.any())?.create_topic(topic, 0)?;
            route.offsets(topic)?
        }
        other => other?,
    };
    let parts = partitions_at(route, &offsets, |&(_, end)| (end, None));
    let config = ConsumerConfig {
        wait_ms_max: 100,
        read_committed: false,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::start_on(&parts, topic, config)?;
    // Send times are µs since `epoch`, and so is the run's duration.
    let epoch = Instant::now();
    // Set by whichever side fails, so that the other stops too.
    let stop = AtomicBool::new(false);
    let mut report = Report::default();
    std::thread::scope(|s| -> Result<()> {
        let producer = s.spawn(|| {
            let sent = send_paced(
                route,
                topic,
                records,
                value_bytes,
                rate_per_sec,
                epoch,
                &stop,
            );
            if sent.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            sent
        });
        let consumed = receive_stamped(&mut consumer, records, epoch, &stop, &mut report);
        stop.store(true, Ordering::Relaxed);
        let sent = producer.join().unwrap_or(Err(Error::Panicked {
            thread: "the producer thread",
        }));
        sent.and(consumed)
    })?;
    report.secs = epoch.elapsed().as_secs_f64();
    Ok(report)
}

/// Each partition of `offsets` with its broker in `route`, to read from
/// where `at` says (and until, if it says).
fn partitions_at(
    route: &Route,
    offsets: &[(u64, u64)],
    at: impl Fn(&(u64, u64)) -> (u64, Option<u64>),
) -> Vec<(String, ConsumerPartition)> {
    offsets
        .iter()
        .enumerate()
        .map(|(p, range)| {
            let (offset, stop_at) = at(range);
            let part = ConsumerPartition {
                partition: p as u32,
                offset,
                stop_at,
            };
            (route.addr(p as u32).to_string(), part)
        })
        .collect()
}

/// Receives `records` records sent by [`send_paced`] (until `stop`),
/// recording each one's latency.
fn receive_stamped(
    consumer: &mut Consumer,
    records: u64,
    epoch: Instant,
    stop: &AtomicBool,
    report: &mut Report,
) -> Result<()> {
    let mut last = Instant::now();
    while report.records < records && !stop.load(Ordering::Relaxed) {
        let n = consumer.poll(Duration::from_millis(100), |_, r| {
            let Some(stamp) = r.value.get(..8) else {
                return Err(Error::Config(format!(
                    "the record at offset {} is not one klog-bench latency sent (under 8 bytes): use a topic of its own",
                    r.offset
                )));
            };
            let sent_us = u64::from_le_bytes(stamp.try_into().expect("8 bytes"));
            let now_us = epoch.elapsed().as_micros() as u64;
            report.latency_us.record_n(now_us.saturating_sub(sent_us), 1);
            report.records += 1;
            report.bytes += r.value.len() as u64;
            Ok(true)
        })?;
        if n > 0 {
            last = Instant::now();
        } else if last.elapsed() > Duration::from_secs(30) {
            return Err(Error::Stalled { waited_s: 30 });
        }
    }
    Ok(())
}

/// How long a latency run's producer lets a record wait for others in its
/// batch, when it is behind its schedule (caught up, it sends at once): a
/// tenth of the 1 ms the run measures against, so that the figure is the
/// log's, not a client's batching (Kafka's end-to-end latency tool sends
/// each record alone).
const LATENCY_LINGER: Duration = Duration::from_micros(100);

/// Sends `records` records at `rate_per_sec` a second (until `stop`), each value
/// starting with its send time in µs since `epoch`.
fn send_paced(
    route: &Route,
    topic: &str,
    records: u64,
    value_bytes: usize,
    rate_per_sec: u64,
    epoch: Instant,
    stop: &AtomicBool,
) -> Result<()> {
    let config = ProducerConfig {
        acks: crate::protocol::ACKS_LEADER,
        batch: BatchOptions {
            records_max: 10_000,
            bytes_max: 1 << 20,
            codec: Codec::None,
            level: None,
        },
        in_flight_max: 16,
        ..ProducerConfig::default()
    };
    let mut producer = Sender::connect(route, topic, config)?;
    let partitions = producer.partitions().max(1);
    let mut record = ParsedRecord {
        key: None,
        value: vec![b'x'; value_bytes],
        null_value: false,
        headers: Vec::new(),
        timestamp: None,
        source: None,
    };
    let interval = Duration::from_secs_f64(1.0 / rate_per_sec.max(1) as f64);
    let start = Instant::now();
    for i in 0..records {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // Pace: record i leaves at start + i * interval.
        let due = start + interval.mul_f64(i as f64);
        let now = Instant::now();
        if due > now {
            producer.flush_batches()?;
            std::thread::sleep(due - now);
        }
        let sent_us = epoch.elapsed().as_micros() as u64;
        record.value[..8].copy_from_slice(&sent_us.to_le_bytes());
        producer.send(
            (i % u64::from(partitions)) as u32,
            &record,
            crate::clock::now_ms(),
        )?;
        // Behind its schedule, the producer sends what it batched once
        // the oldest record has waited LATENCY_LINGER.
        if producer
            .oldest_batch()
            .is_some_and(|t| t.elapsed() >= LATENCY_LINGER)
        {
            producer.flush_batches()?;
        }
    }
    let (_, result) = producer.close();
    result
}
