//! The engine of `klog-bench`: each measurement against the broker given
//! (or one of its own), with progress on stderr and the result on stdout as
//! Kafka's perf-test line or one JSON object.
//!
//! The workloads themselves are in [`workload`]; those that show one
//! partition holding up others (head-of-line blocking) in [`contention`];
//! the 2011 paper's experiments, run one after another and set beside its
//! figures, in [`paper`].

use std::io::IsTerminal;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub mod contention;
pub mod paper;
pub mod workload;

use workload::{OwnBroker, ProduceRun, Report};

/// Where a measurement runs and how it reports: the options every one
/// takes.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// The broker to measure (default: start one in a temporary directory).
    pub broker: Option<String>,
    /// Topic to use (default: a fresh one per run).
    pub topic: Option<String>,
    /// Partitions of a topic the run creates (own broker only).
    pub partitions: u32,
    /// Segment size of a broker of the benchmark's own (its default when
    /// `None`).
    pub segment_bytes: Option<u64>,
    /// One JSON object on stdout instead of Kafka's final line.
    pub json: bool,
    /// No progress on stderr.
    pub quiet: bool,
}

/// What to measure.
#[derive(Debug, Clone)]
pub enum Measurement {
    /// Producer throughput and acknowledgement latency.
    Produce(ProduceRun),
    /// Consumer throughput from the start of a topic (filled first when
    /// the benchmark runs its own broker).
    Consume {
        /// Records to read.
        records: u64,
        /// Bytes per record value (of the records it fills in).
        value_bytes: usize,
        /// Bytes fetched per partition per request.
        fetch_bytes_max: u32,
        /// Fetch responses read ahead of the consumer.
        prefetch: usize,
    },
    /// End-to-end latency, produce to consume, at a steady rate (acks=1).
    Latency {
        /// Records to send.
        records: u64,
        /// Bytes per record value (at least 8: the send time).
        value_bytes: usize,
        /// Records per second.
        rate_per_sec: u64,
    },
    /// acks=all across many partitions, one producer pinned to each.
    Fanout {
        /// The producers' run (`producers` is one per partition).
        run: ProduceRun,
        /// Partitions of the topic it creates.
        partitions: u32,
    },
    /// Produce latency on one partition while another rolls segments.
    Roll(contention::RollRun),
    /// The 2011 paper's experiments, beside its published figures.
    Paper {
        /// Records per experiment.
        records: u64,
    },
}

/// Runs a measurement and prints its result.
pub fn run(setup: &Setup, measurement: &Measurement) -> anyhow::Result<()> {
    match *measurement {
        Measurement::Produce(ref run) => measure_produce(setup, run),
        Measurement::Consume {
            records,
            value_bytes,
            fetch_bytes_max,
            prefetch,
        } => measure_consume(setup, records, value_bytes, fetch_bytes_max, prefetch),
        Measurement::Latency {
            records,
            value_bytes,
            rate_per_sec,
        } => measure_latency(setup, records, value_bytes, rate_per_sec),
        Measurement::Fanout {
            ref run,
            partitions,
        } => measure_fanout(setup, run, partitions),
        Measurement::Roll(ref run) => measure_roll(setup, run),
        Measurement::Paper { records } => paper::run(setup, records),
    }
}

fn measure_fanout(setup: &Setup, run: &ProduceRun, partitions: u32) -> anyhow::Result<()> {
    let setup = Setup {
        partitions,
        ..setup.clone()
    };
    let target = Target::new(&setup)?;
    let topic = topic(&setup, "fanout");
    let progress = Progress::new(run.records, "fanout", setup.quiet);
    let report = contention::fanout(&target.addr, &topic, partitions, run, &|n| {
        progress.update(n)
    })?;
    progress.finish();
    print_report(&report, "fanout", "sent", setup.json)?;
    Ok(())
}

fn measure_roll(setup: &Setup, run: &contention::RollRun) -> anyhow::Result<()> {
    let setup = Setup {
        partitions: setup.partitions.max(2),
        ..setup.clone()
    };
    let target = Target::new(&setup)?;
    let topic = topic(&setup, "roll");
    let progress = Progress::new(run.measured.records, "roll", setup.quiet);
    let report = contention::roll(&target.addr, &topic, run, &|n| progress.update(n))?;
    progress.finish();
    if !setup.quiet {
        let segment_bytes = setup
            .segment_bytes
            .filter(|_| target.own.is_some())
            .map_or("the broker's --segment-bytes".to_string(), mib);
        crate::diag::line(format_args!(
            "% partition 1 took {} meanwhile (segments of {segment_bytes})",
            mib(report.background_bytes)
        ));
    }
    print_report(&report.measured, "roll", "sent", setup.json)?;
    Ok(())
}

fn measure_produce(setup: &Setup, run: &ProduceRun) -> anyhow::Result<()> {
    let target = Target::new(setup)?;
    let topic = topic(setup, "produce");
    let progress = Progress::new(run.records, "produce", setup.quiet);
    let report = workload::produce(&target.addr, &topic, run, &|n| progress.update(n))?;
    progress.finish();
    print_report(&report, "produce", "sent", setup.json)?;
    Ok(())
}

fn measure_consume(
    setup: &Setup,
    records: u64,
    value_bytes: usize,
    fetch_bytes_max: u32,
    prefetch: usize,
) -> anyhow::Result<()> {
    let target = Target::new(setup)?;
    let topic = topic(setup, "consume");
    if target.own.is_some() || setup.topic.is_none() {
        if !setup.quiet {
            crate::diag::line(format_args!(
                "% filling {topic} with {records} records of {value_bytes} bytes"
            ));
        }
        workload::fill(&target.addr, &topic, records, value_bytes)?;
    }
    let progress = Progress::new(records, "consume", setup.quiet);
    let report = workload::consume(
        &target.addr,
        &topic,
        records,
        fetch_bytes_max,
        prefetch,
        &|n| progress.update(n),
    )?;
    progress.finish();
    print_report(&report, "consume", "consumed", setup.json)?;
    Ok(())
}

fn measure_latency(
    setup: &Setup,
    records: u64,
    value_bytes: usize,
    rate_per_sec: u64,
) -> anyhow::Result<()> {
    let target = Target::new(setup)?;
    let topic = topic(setup, "latency");
    let report = workload::latency(&target.addr, &topic, records, value_bytes, rate_per_sec)?;
    print_report(&report, "latency", "sent", setup.json)?;
    Ok(())
}

/// A broker to measure: the one given, or one of our own.
struct Target {
    addr: String,
    own: Option<OwnBroker>,
}

impl Target {
    fn new(setup: &Setup) -> anyhow::Result<Target> {
        Ok(match &setup.broker {
            Some(addr) => Target {
                addr: addr.clone(),
                own: None,
            },
            None => {
                let own = OwnBroker::start(setup.partitions.max(1), setup.segment_bytes)?;
                Target {
                    addr: own.addr(),
                    own: Some(own),
                }
            }
        })
    }
}

/// The topic given, or a fresh one named after the measurement.
fn topic(setup: &Setup, what: &str) -> String {
    setup.topic.clone().unwrap_or_else(|| {
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
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
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
        let mut last = crate::sync::lock(&self.last_line);
        if last.elapsed() >= Duration::from_secs(5) {
            *last = Instant::now();
            let secs = self.start.elapsed().as_secs_f64();
            crate::diag::line(format_args!(
                "% {done} records, {:.0} records/sec",
                done as f64 / secs.max(1e-9)
            ));
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Bytes in MiB, for a human.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

fn print_report(report: &Report, kind: &str, verb: &str, json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", report.json(kind))
    } else {
        writeln!(out, "{}", report.kafka_line(verb))
    }
}
