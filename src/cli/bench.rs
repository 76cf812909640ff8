//! `klog-bench`: throughput and latency of a broker, and the paper's
//! experiments, like `kafka-producer-perf-test.sh` and
//! `kafka-consumer-perf-test.sh`.

use std::process::ExitCode;

use clap::{Args as ClapArgs, Parser, Subcommand};

use crate::tools::bench::cluster::Shape;
use crate::tools::bench::contention::RollRun;
use crate::tools::bench::workload::ProduceRun;
use crate::tools::bench::{self, Measurement, Setup};

/// Measures a broker: produce and consume throughput, end-to-end latency,
/// and the experiments of the 2011 Kafka paper. Without -b it starts a
/// broker of its own on a temporary data directory (with --brokers, a
/// replicated cluster of its own).
#[derive(Debug, Parser)]
#[command(
    name = "klog-bench",
    version,
    about = super::help::BENCH_ABOUT,
    long_about = None,
    after_help = super::help::after_help(&super::help::BENCH)
)]
pub struct Args {
    /// What to measure.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every measurement takes.
#[derive(Debug, Clone, ClapArgs)]
pub struct Common {
    /// The broker to measure (default: start one in a temporary directory).
    #[arg(
        short = 'b',
        long = "broker",
        value_name = "HOST[:PORT]",
        env = "KLOG_BROKER",
        value_parser = super::broker_arg
    )]
    pub broker: Option<String>,
    /// Start a cluster of N brokers of its own (klog-broker processes
    /// sharing a directory registry, all in a temporary directory) and
    /// measure through each partition's leader, once every partition has
    /// its leader and all its replicas in sync.
    #[arg(long = "brokers", value_name = "N", value_parser = super::count_in::<u32>(1, BROKERS_MAX))]
    pub brokers: Option<u32>,
    /// Replicas of each partition of the cluster's topics (needs
    /// --brokers; default 1).
    #[arg(long = "replication-factor", value_name = "N", value_parser = super::count_in::<u32>(1, BROKERS_MAX))]
    pub replication_factor: Option<u32>,
    /// The cluster's brokers refuse acks=all while a partition has fewer
    /// in-sync replicas (default: 2, or the replication factor if lower).
    #[arg(long = "min-insync-replicas", value_name = "N", value_parser = super::count_in::<u32>(1, BROKERS_MAX))]
    pub min_insync_replicas: Option<u32>,
    /// Topic to use (default: a fresh one per run).
    #[arg(short = 't', long = "topic", value_parser = super::topic_arg)]
    pub topic: Option<String>,
    /// Partitions of a topic the run creates (default 1; fanout 64, one
    /// producer each; roll 2).
    #[arg(long = "partitions", value_name = "N", value_parser = super::count_in::<u32>(1, u64::from(crate::limits::PARTITIONS_MAX)))]
    pub partitions: Option<u32>,
    /// One JSON object on stdout instead of Kafka's final line.
    #[arg(long = "json")]
    pub json: bool,
    /// No progress on stderr.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
}

/// The measurements.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Producer throughput and acknowledgement latency.
    Produce {
        /// Records to send.
        #[arg(short = 'n', long = "records", default_value_t = 10_000_000)]
        records: u64,
        /// Bytes per record value.
        #[arg(short = 's', long = "record-size", value_name = "SIZE", default_value = "200", value_parser = super::size_arg)]
        value_bytes: u64,
        /// Records per batch (one request each).
        #[arg(long = "batch", value_name = "N", default_value_t = 50, value_parser = super::count_in::<u32>(1, u64::from(crate::limits::BATCH_RECORDS_MAX)))]
        batch_records: u32,
        /// Acknowledgements: 0, 1 or all.
        #[arg(long = "acks", value_name = "0|1|all", default_value = "1", value_parser = super::acks_arg)]
        acks: i8,
        /// Requests in flight per producer.
        #[arg(long = "in-flight", value_name = "N", default_value_t = 256, value_parser = super::count_in::<u32>(1, 65536))]
        in_flight_max: u32,
        /// Producers, each on its own connection and thread.
        #[arg(long = "producers", value_name = "N", default_value_t = 1, value_parser = super::count_in::<u32>(1, 1024))]
        producers: u32,
        /// Options every measurement takes.
        #[command(flatten)]
        common: Common,
    },
    /// Consumer throughput from the start of a topic (filled first when
    /// the benchmark runs its own broker).
    Consume {
        /// Records to read.
        #[arg(short = 'n', long = "records", default_value_t = 10_000_000)]
        records: u64,
        /// Bytes per record value (of the records it fills in).
        #[arg(short = 's', long = "record-size", value_name = "SIZE", default_value = "200", value_parser = super::size_arg)]
        value_bytes: u64,
        /// Bytes fetched per partition per request.
        #[arg(long = "fetch-size", value_name = "SIZE", default_value = "1MiB", value_parser = fetch_size_arg)]
        fetch_bytes_max: u32,
        /// Fetch responses read ahead of the consumer (prefetch).
        #[arg(long = "prefetch", value_name = "N", default_value_t = 4, value_parser = super::count_in::<u64>(1, 1024))]
        prefetch: u64,
        /// Options every measurement takes.
        #[command(flatten)]
        common: Common,
    },
    /// End-to-end latency, produce to consume, at a steady rate (acks=1).
    ///
    /// Each record carries its send time; a consumer at the end measures
    /// when it arrives (a broker shows it once durable). The producer sends
    /// at once when it is on schedule, and a record waits at most 100 µs
    /// for others in its batch when it is behind.
    Latency {
        /// Records to send.
        #[arg(short = 'n', long = "records", default_value_t = 200_000)]
        records: u64,
        /// Bytes per record value (at least 8: the send time).
        #[arg(short = 's', long = "record-size", value_name = "SIZE", default_value = "200", value_parser = latency_size_arg)]
        value_bytes: u64,
        /// Records per second.
        #[arg(long = "rate", value_name = "N", default_value_t = 100_000, value_parser = super::count_in::<u64>(1, u64::MAX))]
        rate_per_sec: u64,
        /// Options every measurement takes.
        #[command(flatten)]
        common: Common,
    },
    /// acks=all across many partitions, one producer pinned to each: every
    /// acknowledgement waits for an fsync of its own partition.
    Fanout {
        /// Records to send, in all.
        #[arg(short = 'n', long = "records", default_value_t = 200_000)]
        records: u64,
        /// Bytes per record value.
        #[arg(short = 's', long = "record-size", value_name = "SIZE", default_value = "200", value_parser = super::size_arg)]
        value_bytes: u64,
        /// Records per batch (one request each).
        #[arg(long = "batch", value_name = "N", default_value_t = 10, value_parser = super::count_in::<u32>(1, u64::from(crate::limits::BATCH_RECORDS_MAX)))]
        batch_records: u32,
        /// Requests in flight per producer.
        #[arg(long = "in-flight", value_name = "N", default_value_t = 4, value_parser = super::count_in::<u32>(1, 65536))]
        in_flight_max: u32,
        /// Options every measurement takes.
        #[command(flatten)]
        common: Common,
    },
    /// acks=all produce latency on partition 0 while partition 1 is written
    /// in the background and rolls a segment every --segment-bytes.
    Roll {
        /// Records to send to partition 0 (one a request, one request in
        /// flight).
        #[arg(short = 'n', long = "records", default_value_t = 20_000)]
        records: u64,
        /// Bytes per record value.
        #[arg(short = 's', long = "record-size", value_name = "SIZE", default_value = "200", value_parser = super::size_arg)]
        value_bytes: u64,
        /// Acknowledgements of the measured producer: 0, 1 or all.
        #[arg(long = "acks", value_name = "0|1|all", default_value = "all", value_parser = super::acks_arg)]
        acks: i8,
        /// Bytes a second written to partition 1 (acks=1, 64 KiB requests).
        #[arg(long = "background-rate", value_name = "SIZE", default_value = "16MiB", value_parser = super::size_arg)]
        background_bytes_per_sec: u64,
        /// Segment size of the benchmark's own broker (with -b, the
        /// broker's own --segment-bytes decides).
        #[arg(long = "segment-bytes", value_name = "SIZE", default_value = "1MiB", value_parser = super::segment_size_arg)]
        segment_bytes: u64,
        /// Options every measurement takes.
        #[command(flatten)]
        common: Common,
    },
    /// This machine's disk: the time of one fdatasync after each append,
    /// the floor under every acks=all answer and every record a consumer
    /// sees (no broker).
    Fsync {
        /// fsyncs to time (with --rate: writes).
        #[arg(short = 'n', long = "count", value_name = "N", default_value_t = 2000, value_parser = super::count_in::<u64>(1, 10_000_000))]
        count: u64,
        /// Bytes appended before each fsync (10KiB: one batch of 50
        /// records of 200 bytes; with --rate: by each write).
        #[arg(short = 's', long = "append-size", value_name = "SIZE", default_value = "10KiB", value_parser = append_size_arg)]
        append_bytes: u64,
        /// Directory of the file measured (default: the temporary
        /// directory, where the benchmark's own brokers keep their data).
        #[arg(long = "dir", value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
        /// Write over zeros written and synced first (as many bytes as
        /// the run writes) instead of appending: an fsync that changes no
        /// file size or block map, as in a segment whose blocks were
        /// written ahead.
        #[arg(long = "overwrite")]
        overwrite: bool,
        /// Write N times a second instead (-n writes of --append-size; -s
        /// 208 is about one record of `latency`), a second thread
        /// fsyncing back to back as a broker's group commit does, and
        /// time each write from its append to the end of the first
        /// fdatasync begun after it: the floor this disk puts under
        /// `latency` at that rate.
        #[arg(long = "rate", value_name = "N", value_parser = super::count_in::<u64>(1, 10_000_000))]
        rate: Option<u64>,
        /// One JSON object on stdout instead of the result line.
        #[arg(long = "json")]
        json: bool,
    },
    /// The 2011 paper's experiments, beside its published figures.
    Paper {
        /// Records per experiment (the paper: 10 million).
        #[arg(short = 'n', long = "records", default_value_t = 10_000_000)]
        records: u64,
        /// Options every measurement takes.
        #[command(flatten)]
        common: Common,
    },
}

/// `--fetch-size`: a size from 1 byte to 4 GiB - 1.
fn fetch_size_arg(s: &str) -> Result<u32, String> {
    let n = super::size_arg(s)?;
    u32::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("a fetch size is from 1 byte to 4GiB - 1, not {s}"))
}

/// `--append-size` of `fsync`: from 1 byte to 64 MiB.
fn append_size_arg(s: &str) -> Result<u64, String> {
    let n = super::size_arg(s)?;
    if n == 0 || n > 64 << 20 {
        return Err(format!("an append is from 1 byte to 64MiB, not {s}"));
    }
    Ok(n)
}

/// `klog-bench fsync`: times the disk, and prints the result.
fn fsync(command: Command) -> anyhow::Result<ExitCode> {
    use crate::tools::bench::disk;
    let Command::Fsync {
        count,
        append_bytes,
        dir,
        overwrite,
        rate,
        json,
    } = command
    else {
        unreachable!("fsync runs Command::Fsync")
    };
    let dir = dir.unwrap_or_else(std::env::temp_dir);
    let bytes = usize::try_from(append_bytes)?;
    let (report, paced) = match rate {
        Some(rate) => {
            let (report, fsyncs) = disk::paced(&dir, count, bytes, overwrite, rate)?;
            (report, Some((rate, fsyncs)))
        }
        None => (disk::fsyncs(&dir, count, bytes, overwrite)?, None),
    };
    if crate::stop::stopping() {
        crate::diag::line(format_args!("% stopped by a signal: no result"));
        return Ok(ExitCode::SUCCESS);
    }
    let line = match (json, paced) {
        (true, _) => disk::json(&report, bytes, overwrite, &dir, paced).to_string(),
        (false, Some((rate, fsyncs))) => disk::paced_line(&report, bytes, overwrite, rate, fsyncs),
        (false, None) => disk::line(&report, bytes, overwrite),
    };
    println!("{line}");
    Ok(ExitCode::SUCCESS)
}

/// Brokers of a cluster of the benchmark's own, at most (and so replicas).
const BROKERS_MAX: u64 = 16;

/// Partitions of a fanout run without --partitions.
const FANOUT_PARTITIONS: u32 = 64;

/// `--record-size` of `latency`: room for the 8-byte send time.
fn latency_size_arg(s: &str) -> Result<u64, String> {
    let n = super::size_arg(s)?;
    if n < 8 {
        return Err(format!(
            "{s} is under 8 bytes: each record carries its 8-byte send time"
        ));
    }
    Ok(n)
}

/// Runs `klog-bench`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::handle_signals(|| {})?;
    if let Command::Fsync { .. } = args.command {
        return fsync(args.command);
    }
    let segment_bytes = match &args.command {
        Command::Roll { segment_bytes, .. } => Some(*segment_bytes),
        _ => None,
    };
    let (common, measurement) = measurement(args.command)?;
    let cluster = cluster_shape(&common)?;
    let setup = Setup {
        broker: broker(&common)?,
        cluster,
        topic: common.topic,
        partitions: common.partitions.unwrap_or(1),
        segment_bytes,
        json: common.json,
        quiet: common.quiet,
    };
    bench::run(&setup, &measurement)?;
    Ok(ExitCode::SUCCESS)
}

/// The broker to measure: `-b`, or `KLOG_BROKER` unless `--brokers` asks
/// for a cluster of its own (a flag beats the environment); `-b` and
/// `--brokers` together are a usage error.
fn broker(common: &Common) -> Result<Option<String>, super::Usage> {
    let (Some(broker), Some(_)) = (&common.broker, common.brokers) else {
        return Ok(common.broker.clone());
    };
    let from_env = std::env::var("KLOG_BROKER")
        .ok()
        .and_then(|v| super::broker_arg(&v).ok());
    if from_env.as_ref() == Some(broker) {
        return Ok(None);
    }
    Err(super::Usage(
        "-b names a broker to measure and --brokers starts a cluster of its own: give one of them"
            .into(),
    ))
}

/// The cluster `--brokers`, `--replication-factor` and
/// `--min-insync-replicas` ask for, if any; a shape that cannot work is a
/// usage error.
fn cluster_shape(common: &Common) -> Result<Option<Shape>, super::Usage> {
    let replication_factor = common.replication_factor.unwrap_or(1);
    let min_insync_replicas = common
        .min_insync_replicas
        .unwrap_or(replication_factor.min(2));
    if min_insync_replicas > replication_factor {
        return Err(super::Usage(format!(
            "--min-insync-replicas {min_insync_replicas} is more than --replication-factor {replication_factor}: acks=all could never succeed"
        )));
    }
    let Some(brokers) = common.brokers else {
        if replication_factor > 1 {
            return Err(super::Usage(format!(
                "--replication-factor {replication_factor} needs --brokers N: replicas live on brokers of a cluster of its own"
            )));
        }
        return Ok(None);
    };
    if replication_factor > brokers {
        return Err(super::Usage(format!(
            "--replication-factor {replication_factor} is more than --brokers {brokers}: each replica of a partition needs a broker of its own"
        )));
    }
    Ok(Some(Shape {
        brokers,
        replication_factor,
        min_insync_replicas,
    }))
}

/// The measurement a subcommand asks for, and the options it takes.
fn measurement(command: Command) -> anyhow::Result<(Common, Measurement)> {
    Ok(match command {
        Command::Produce {
            records,
            value_bytes,
            batch_records,
            acks,
            in_flight_max,
            producers,
            common,
        } => {
            let run = ProduceRun {
                records,
                value_bytes: usize::try_from(value_bytes)?,
                batch_records,
                acks,
                in_flight_max: in_flight_max as usize,
                producers,
                pinned: false,
            };
            (common, Measurement::Produce(run))
        }
        Command::Consume {
            records,
            value_bytes,
            fetch_bytes_max,
            prefetch,
            common,
        } => {
            let measurement = Measurement::Consume {
                records,
                value_bytes: usize::try_from(value_bytes)?,
                fetch_bytes_max,
                prefetch: prefetch as usize,
            };
            (common, measurement)
        }
        Command::Latency {
            records,
            value_bytes,
            rate_per_sec,
            common,
        } => {
            let measurement = Measurement::Latency {
                records,
                value_bytes: usize::try_from(value_bytes)?,
                rate_per_sec,
            };
            (common, measurement)
        }
        command @ (Command::Fanout { .. } | Command::Roll { .. }) => contention(command)?,
        Command::Paper { records, common } => (common, Measurement::Paper { records }),
        Command::Fsync { .. } => unreachable!("run measures the disk before any broker"),
    })
}

/// The measurement of `fanout` or `roll`, and the options it takes.
fn contention(command: Command) -> anyhow::Result<(Common, Measurement)> {
    Ok(match command {
        Command::Fanout {
            records,
            value_bytes,
            batch_records,
            in_flight_max,
            common,
        } => {
            let partitions = common.partitions.unwrap_or(FANOUT_PARTITIONS);
            let run = ProduceRun {
                records,
                value_bytes: usize::try_from(value_bytes)?,
                batch_records,
                acks: crate::protocol::ACKS_ALL,
                in_flight_max: in_flight_max as usize,
                producers: partitions,
                pinned: true,
            };
            (common, Measurement::Fanout { run, partitions })
        }
        Command::Roll {
            records,
            value_bytes,
            acks,
            background_bytes_per_sec,
            segment_bytes: _,
            common,
        } => {
            let measured = ProduceRun {
                records,
                value_bytes: usize::try_from(value_bytes)?,
                batch_records: 1,
                acks,
                in_flight_max: 1,
                producers: 1,
                pinned: true,
            };
            let run = RollRun {
                measured,
                background_bytes_per_sec,
            };
            (common, Measurement::Roll(run))
        }
        _ => unreachable!("only fanout and roll are contention runs"),
    })
}
