//! `klog-produce`: records from stdin (or files) into a topic, like `kcat -P`.

use std::io::{self, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

use crate::client::partitioner::Partitioner;
use crate::client::{BatchOptions, ParsedRecord};
use crate::client::{ClusterProducer, Producer, ProducerConfig};
use crate::storage::log::LogConfig;
use crate::storage::store::Store;
use crate::tools::produce::{self, EmbeddedProducer, ParseOptions, RecordSplitter};
use crate::{limits, Error};

/// Reads records from stdin (or FILEs), one per line by default, and
/// appends them to a topic.
#[derive(Debug, Parser)]
#[command(name = "klog-produce", version, about, long_about = None)]
pub struct Args {
    /// Topic to produce to (created on first use, with --partitions).
    #[arg(short = 't', long = "topic", value_parser = super::topic_arg)]
    pub topic: String,
    /// Fixed partition (default: hash of the key, round-robin without one).
    #[arg(short = 'p', long = "partition")]
    pub partition: Option<u32>,
    /// Split each record at the first DELIM into key and value.
    #[arg(short = 'K', value_name = "DELIM", value_parser = super::delimiter_arg, conflicts_with_all = ["key", "json"])]
    pub key_delimiter: Option<super::Delimiter>,
    /// Fixed key for every record.
    #[arg(short = 'k', long = "key", value_name = "KEY", conflicts_with = "json")]
    pub key: Option<String>,
    /// Record delimiter (escapes: \n \t \0 \xNN).
    #[arg(short = 'D', value_name = "DELIM", default_value = "\\n", value_parser = super::delimiter_arg)]
    pub delimiter: super::Delimiter,
    /// Header added to every record (repeatable).
    #[arg(short = 'H', value_name = "NAME=VALUE", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,
    /// Input records are the JSON envelopes that klog-consume -J prints.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Records per batch.
    #[arg(long = "batch", value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::BATCH_RECORDS_MAX)))]
    pub batch: u32,
    /// Bytes per batch.
    #[arg(long = "batch-bytes", value_name = "SIZE", default_value = "1MiB", value_parser = super::size_arg)]
    pub batch_bytes: u64,
    /// How long a partial batch waits for more input before it is written.
    #[arg(long = "linger", value_name = "DURATION", default_value = "100ms", value_parser = super::duration_arg)]
    pub linger_ms: u64,
    /// Acknowledgements: 0 (none), 1 (appended), all (durable).
    #[arg(long = "acks", value_name = "0|1|all", default_value = "all", value_parser = super::acks_arg)]
    pub acks: i8,
    /// Embedded mode: partitions of a topic this command creates (with a
    /// broker, the broker's --partitions applies).
    #[arg(long = "partitions", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::PARTITIONS_MAX)))]
    pub partitions: u32,
    /// The broker to send to.
    #[arg(
        short = 'b',
        long = "broker",
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:9092",
        env = "KLOG_BROKER"
    )]
    pub broker: String,
    /// Embedded mode: append to the logs in this data directory directly,
    /// with no broker (takes each partition's writer lock).
    #[arg(
        long = "data-dir",
        value_name = "DIR",
        env = "KLOG_DATA_DIR",
        conflicts_with = "registry"
    )]
    pub data_dir: Option<PathBuf>,
    /// Find each partition's broker in this registry (a cluster of
    /// brokers) instead of sending everything to -b.
    #[arg(long = "registry", value_name = "DIR", env = "KLOG_REGISTRY")]
    pub registry: Option<PathBuf>,
    /// Embedded mode: segment size at which a log rolls.
    #[arg(long = "segment-bytes", value_name = "SIZE", default_value = "1GiB", value_parser = super::size_arg)]
    pub segment_bytes: u64,
    /// Largest record accepted.
    #[arg(long = "max-record-bytes", value_name = "SIZE", default_value = "1MiB", value_parser = super::size_arg)]
    pub max_record_bytes: u64,
    /// Only print errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// Files to read instead of stdin ("-" is stdin).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

fn parse_header(s: &str) -> Result<(String, String), String> {
    let (n, v) = s.split_once('=').ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    Ok((n.to_string(), v.to_string()))
}

/// A `Read` over chunks that a reader thread sends; reports the linger
/// time passing without input as `WouldBlock`, and a stop signal as EOF.
struct ChannelReader {
    rx: Receiver<io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
    linger: Duration,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.chunk.len() {
            let deadline = std::time::Instant::now() + self.linger;
            loop {
                if crate::stop::stopping() {
                    return Ok(0);
                }
                let wait = deadline.saturating_duration_since(std::time::Instant::now());
                if wait.is_zero() {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                match self.rx.recv_timeout(wait.min(Duration::from_millis(100))) {
                    Ok(chunk) => {
                        self.chunk = chunk?;
                        self.at = 0;
                        if self.chunk.is_empty() {
                            return Ok(0);
                        }
                        break;
                    }
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return Ok(0),
                }
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Starts a thread that reads the inputs in order and sends their bytes.
fn spawn_reader(files: Vec<PathBuf>) -> io::Result<Receiver<io::Result<Vec<u8>>>> {
    let (tx, rx) = mpsc::sync_channel::<io::Result<Vec<u8>>>(4);
    std::thread::Builder::new().name("input".into()).spawn(move || {
        let inputs = if files.is_empty() {
            vec![PathBuf::from("-")]
        } else {
            files
        };
        for path in inputs {
            let mut input: Box<dyn Read> = if path.as_os_str() == "-" {
                Box::new(io::stdin())
            } else {
                match std::fs::File::open(&path) {
                    Ok(f) => Box::new(f),
                    Err(e) => {
                        let _ = tx.send(Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))));
                        return;
                    }
                }
            };
            loop {
                let mut chunk = vec![0u8; 256 * 1024];
                match input.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        chunk.truncate(n);
                        if tx.send(Ok(chunk)).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Ok(Vec::new()));
    })?;
    Ok(rx)
}

/// Where records go: a local data directory or a broker.
enum Sink {
    Embedded(EmbeddedProducer),
    Remote(Producer),
    Cluster(ClusterProducer),
}

impl Sink {
    fn partitions(&self) -> u32 {
        match self {
            Sink::Embedded(p) => p.partitions(),
            Sink::Remote(p) => p.partitions(),
            Sink::Cluster(p) => p.partitions(),
        }
    }

    fn send(
        &mut self,
        partition: u32,
        record: &ParsedRecord,
        headers: &[(&[u8], &[u8])],
        now: i64,
    ) -> crate::Result<()> {
        match self {
            Sink::Embedded(p) => p.send(partition, record, headers, now),
            Sink::Remote(p) => p.send(partition, record, headers, now),
            Sink::Cluster(p) => p.send(partition, record, headers, now),
        }
    }

    fn flush_pending(&mut self, now: i64) -> crate::Result<()> {
        match self {
            Sink::Embedded(p) => p.flush_pending(now),
            Sink::Remote(p) => p.flush_pending(),
            Sink::Cluster(p) => p.flush_pending(),
        }
    }

    /// Sends what is left; returns (delivered, failed) and how it ended.
    fn close(self) -> (u64, u64, crate::Result<()>) {
        match self {
            Sink::Embedded(p) => {
                let pending = p.pending();
                let before = p.delivered;
                match p.close() {
                    Ok(n) => (n, 0, Ok(())),
                    Err(e) => (before, pending, Err(e)),
                }
            }
            Sink::Remote(p) => {
                let (summary, result) = p.close();
                (summary.delivered, summary.failed, result)
            }
            Sink::Cluster(p) => {
                let (summary, result) = p.close();
                (summary.delivered, summary.failed, result)
            }
        }
    }
}

/// Runs `klog-produce`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::handle_signals(|| {})?;
    let say = super::Say { quiet: args.quiet };
    let config = LogConfig {
        segment_bytes: args.segment_bytes,
        record_bytes_max: u32::try_from(args.max_record_bytes).unwrap_or(u32::MAX),
        ..LogConfig::default()
    };
    config.validate()?;
    let batch = BatchOptions {
        records_max: args.batch,
        bytes_max: usize::try_from(args.batch_bytes).unwrap_or(usize::MAX),
    };
    let producer = match &args.data_dir {
        Some(dir) => Sink::Embedded(
            EmbeddedProducer::new(Store::new(dir), &args.topic, args.partitions, config.clone(), batch)
                .with_context(|| format!("cannot produce to topic {:?} in {}", args.topic, dir.display()))?,
        ),
        None => {
            let remote = ProducerConfig {
                acks: args.acks,
                batch,
                record_bytes_max: config.record_bytes_max,
                ..ProducerConfig::default()
            };
            if let Some(dir) = &args.registry {
                let registry =
                    crate::coord::open(dir).with_context(|| format!("cannot open the registry {}", dir.display()))?;
                let cluster = ClusterProducer::connect(&*registry, &args.topic, remote)
                    .with_context(|| format!("cannot produce to topic {:?} through {}", args.topic, dir.display()))?;
                return run_with(&args, say, Sink::Cluster(cluster), config.record_bytes_max as usize);
            }
            Sink::Remote(
                Producer::connect(&args.broker, &args.topic, remote)
                    .with_context(|| format!("cannot produce to topic {:?} on {}", args.topic, args.broker))?,
            )
        }
    };
    run_with(&args, say, producer, config.record_bytes_max as usize)
}

/// Sends the input to `producer` and reports.
fn run_with(args: &Args, say: super::Say, mut producer: Sink, record_max: usize) -> anyhow::Result<ExitCode> {
    if let Some(p) = args.partition {
        if p >= producer.partitions() {
            anyhow::bail!(Error::UnknownPartition {
                topic: args.topic.clone(),
                partition: p,
                count: producer.partitions()
            });
        }
    }
    let reader = ChannelReader {
        rx: spawn_reader(args.files.clone())?,
        chunk: Vec::new(),
        at: 0,
        linger: Duration::from_millis(args.linger_ms.max(1)),
    };
    let outcome = produce_all(args, reader, &mut producer, record_max);
    let (delivered, mut failed, closed) = producer.close();
    if outcome.is_err() {
        failed += 1;
    }
    say.info(format_args!(
        "Sent {delivered} records to {} ({failed} failed)",
        args.topic
    ));
    outcome?;
    closed.context("cannot write the last batches")?;
    Ok(ExitCode::SUCCESS)
}

fn produce_all(args: &Args, reader: ChannelReader, producer: &mut Sink, record_max: usize) -> anyhow::Result<()> {
    let parse = ParseOptions {
        key_delimiter: args.key_delimiter.as_ref().map(|d| d.0.clone()),
        key: args.key.as_ref().map(|k| k.as_bytes().to_vec()),
        json: args.json,
    };
    let headers: Vec<(&[u8], &[u8])> = args.headers.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())).collect();
    let mut partitioner = Partitioner::new(producer.partitions(), args.partition);
    let mut splitter = RecordSplitter::new(reader, args.delimiter.0.clone(), record_max);
    let mut record = ParsedRecord::default();
    let mut now = crate::clock::now_ms();
    let mut since_clock = 0u32;
    loop {
        let raw = match splitter.next_record() {
            Ok(Some(raw)) => raw,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // The linger time passed without input: write partial batches.
                now = crate::clock::now_ms();
                producer.flush_pending(now)?;
                continue;
            }
            Err(e) => return Err(e).context("cannot read input"),
        };
        produce::parse_record(raw, &parse, &mut record)
            .map_err(|e| anyhow::anyhow!("record {}: {e}", splitter.number))?;
        // One clock read per 256 records: timestamps are ms anyway.
        since_clock += 1;
        if since_clock == 256 {
            now = crate::clock::now_ms();
            since_clock = 0;
        }
        let partition = partitioner.partition(record.key.as_deref());
        producer
            .send(partition, &record, &headers, now)
            .with_context(|| format!("record {} not delivered", splitter.number))?;
    }
}
