//! `klog-bench`: throughput and latency of a broker, and the paper's
//! experiments, like `kafka-producer-perf-test.sh` and
//! `kafka-consumer-perf-test.sh`.

use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::{Args as ClapArgs, Parser, Subcommand};

use crate::tools::bench::{self, OwnBroker, ProduceRun, Report};

/// Measures a broker: produce and consume throughput, end-to-end latency,
/// and the experiments of the 2011 Kafka paper. Without -b it starts a
/// broker of its own on a temporary data directory.
#[derive(Debug, Parser)]
#[command(name = "klog-bench", version, about, long_about = None)]
pub struct Args {
    /// What to measure.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every measurement takes.
#[derive(Debug, Clone, ClapArgs)]
pub struct Common {
    /// The broker to measure (default: start one in a temporary directory).
    #[arg(short = 'b', long = "broker", value_name = "HOST:PORT", env = "KLOG_BROKER")]
    pub broker: Option<String>,
    /// Topic to use (default: a fresh one per run).
    #[arg(short = 't', long = "topic", value_parser = super::topic_arg)]
    pub topic: Option<String>,
    /// Partitions of a topic the run creates (own broker only).
    #[arg(long = "partitions", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::limits::PARTITIONS_MAX)))]
    pub partitions: u32,
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
        size: u64,
        /// Records per batch (one request each).
        #[arg(long = "batch", value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::limits::BATCH_RECORDS_MAX)))]
        batch: u32,
        /// Acknowledgements: 0, 1 or all.
        #[arg(long = "acks", value_name = "0|1|all", default_value = "1", value_parser = super::acks_arg)]
        acks: i8,
        /// Requests in flight per producer.
        #[arg(long = "in-flight", value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
        in_flight: u32,
        /// Producers, each on its own connection and thread.
        #[arg(long = "producers", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
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
        size: u64,
        /// Bytes fetched per partition per request.
        #[arg(long = "fetch-size", value_name = "SIZE", default_value = "1MiB", value_parser = fetch_size_arg)]
        fetch_size: u32,
        /// Fetch responses read ahead of the consumer (prefetch).
        #[arg(long = "prefetch", value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1024))]
        prefetch: u64,
        /// Options every measurement takes.
        #[command(flatten)]
        common: Common,
    },
    /// End-to-end latency, produce to consume, at a steady rate (acks=1).
    Latency {
        /// Records to send.
        #[arg(short = 'n', long = "records", default_value_t = 200_000)]
        records: u64,
        /// Bytes per record value (at least 8: the send time).
        #[arg(short = 's', long = "record-size", value_name = "SIZE", default_value = "200", value_parser = latency_size_arg)]
        size: u64,
        /// Records per second.
        #[arg(long = "rate", value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
        rate: u64,
        /// Options every measurement takes.
        #[command(flatten)]
        common: Common,
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
        .ok_or_else(|| format!("{s} is outside 1 byte..4GiB"))
}

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

/// A broker to measure: the one given, or one of our own.
struct Target {
    addr: String,
    own: Option<OwnBroker>,
}

impl Target {
    fn new(common: &Common) -> anyhow::Result<Target> {
        Ok(match &common.broker {
            Some(addr) => Target {
                addr: addr.clone(),
                own: None,
            },
            None => {
                let own = OwnBroker::start(common.partitions.max(1))?;
                Target {
                    addr: own.addr(),
                    own: Some(own),
                }
            }
        })
    }
}

fn topic(common: &Common, what: &str) -> String {
    common.topic.clone().unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("bench-{what}-{nanos:x}")
    })
}

/// Progress on stderr: a bar on a terminal, a line every 5 s otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
    start: Instant,
    last_line: Mutex<Instant>,
}

impl Progress {
    fn new(total: u64, label: &str, quiet: bool) -> Progress {
        let bar = (!quiet && super::progress_allowed()).then(|| {
            let bar = indicatif::ProgressBar::new(total);
            let style = indicatif::ProgressStyle::with_template(&format!(
                "{label} {{bar:40}} {{pos}}/{{len}} {{per_sec}} eta {{eta}}"
            ))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        });
        Progress {
            bar,
            quiet,
            start: Instant::now(),
            last_line: Mutex::new(Instant::now()),
        }
    }

    fn update(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            return;
        }
        if self.quiet {
            return;
        }
        let mut last = self.last_line.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() >= Duration::from_secs(5) {
            *last = Instant::now();
            let secs = self.start.elapsed().as_secs_f64();
            eprintln!("% {done} records, {:.1} records/sec", done as f64 / secs.max(1e-9));
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn print_report(report: &Report, kind: &str, verb: &str, json: bool) {
    if json {
        println!("{}", report.json(kind));
    } else {
        println!("{}", report.kafka_line(verb));
    }
}

/// Runs `klog-bench`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::handle_signals(|| {})?;
    match args.command {
        Command::Produce {
            records,
            size,
            batch,
            acks,
            in_flight,
            producers,
            common,
        } => {
            let target = Target::new(&common)?;
            let run = ProduceRun {
                topic: topic(&common, "produce"),
                records,
                size: usize::try_from(size)?,
                batch,
                acks,
                in_flight: in_flight as usize,
                producers,
            };
            let progress = Progress::new(records, "produce", common.quiet);
            let report = bench::produce(&target.addr, &run, &|n| progress.update(n))?;
            progress.finish();
            print_report(&report, "produce", "sent", common.json);
        }
        Command::Consume {
            records,
            size,
            fetch_size,
            prefetch,
            common,
        } => {
            let target = Target::new(&common)?;
            let topic = topic(&common, "consume");
            if target.own.is_some() || common.topic.is_none() {
                if !common.quiet {
                    eprintln!("% filling {topic} with {records} records of {size} bytes");
                }
                bench::fill(&target.addr, &topic, records, usize::try_from(size)?)?;
            }
            let progress = Progress::new(records, "consume", common.quiet);
            let report = bench::consume(&target.addr, &topic, records, fetch_size, prefetch as usize, &|n| {
                progress.update(n)
            })?;
            progress.finish();
            print_report(&report, "consume", "consumed", common.json);
        }
        Command::Latency {
            records,
            size,
            rate,
            common,
        } => {
            let target = Target::new(&common)?;
            let topic = topic(&common, "latency");
            let report = bench::latency(&target.addr, &topic, records, usize::try_from(size)?, rate)?;
            print_report(&report, "latency", "sent", common.json);
        }
        Command::Paper { records, common } => paper(records, &common)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The paper's experiments: 10 million 200-byte records produced with
/// batch 1 and batch 50, consumed, and the bytes each costs on disk.
fn paper(records: u64, common: &Common) -> anyhow::Result<()> {
    let target = Target::new(common)?;
    let mut rows: Vec<(&str, String, String)> = Vec::new();
    let mut json = Vec::new();
    let mut produced_b50 = None;
    let mut topics = Vec::new();
    // Batch 50 first: batch 1 writes 2.5 GB that the disk is still busy
    // with long after (the table lists batch 1 first all the same).
    for (batch, paper_figure) in [(50u32, "400,000 records/s"), (1, "50,000 records/s")] {
        let run = ProduceRun {
            topic: topic(common, &format!("paper-b{batch}")),
            records,
            size: 200,
            batch,
            acks: crate::protocol::ACKS_LEADER,
            in_flight: 256,
            producers: 1,
        };
        // Each experiment starts with the disk idle, not writing back the
        // previous one's gigabytes.
        nix::unistd::sync();
        let progress = Progress::new(records, &format!("produce batch {batch}"), common.quiet);
        let report = bench::produce(&target.addr, &run, &|n| progress.update(n))?;
        progress.finish();
        rows.push((
            if batch == 1 {
                "produce, batch 1"
            } else {
                "produce, batch 50"
            },
            paper_figure.to_string(),
            format!("{:.0} records/s", report.records_per_sec()),
        ));
        json.push(report.json(&format!("produce_batch_{batch}")));
        if batch == 50 {
            produced_b50 = Some(run.topic.clone());
        }
        topics.push((batch, run.topic.clone()));
    }
    rows.swap(0, 1);
    let topic = produced_b50.expect("batch 50 ran");
    let progress = Progress::new(records, "consume", common.quiet);
    // The paper's consumers fetched about 200 KB (1000 records) at a time.
    let report = bench::consume(&target.addr, &topic, records, 200 * 1024, 4, &|n| progress.update(n))?;
    progress.finish();
    rows.push((
        "consume (page cache)",
        "22,000 records/s".into(),
        format!("{:.0} records/s", report.records_per_sec()),
    ));
    json.push(report.json("consume"));
    if let Some(own) = &target.own {
        // Segment bytes beyond the 200-byte values (segment headers included).
        for (batch, topic) in topics.iter().rev() {
            let per_record = own.log_bytes(topic) as f64 / records as f64 - 200.0;
            let (what, paper) = if *batch == 50 {
                ("bytes of overhead per record, batch 50", "9")
            } else {
                ("bytes of overhead per record, batch 1", "9 (any batch)")
            };
            rows.push((what, paper.into(), format!("{per_record:.1}")));
            json.push(serde_json::json!({"type": "overhead", "batch": batch, "bytes_per_record": per_record}));
        }
    }
    if common.json {
        for j in json {
            println!("{j}");
        }
        return Ok(());
    }
    let mut table = crate::tools::table(&[
        "experiment (10^7 x 200 B in the paper)",
        "paper, 2011",
        "klog, this machine",
    ]);
    for (what, paper, klog) in rows {
        table.add_row([what.to_string(), paper, klog]);
    }
    println!("{table}");
    Ok(())
}
