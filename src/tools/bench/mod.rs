//! The engine of `klog-bench`: each measurement against the broker given
//! (or one of its own), with progress on stderr and the result on stdout as
//! Kafka's perf-test line or one JSON object.
//!
//! The workloads themselves are in [`workload`]; those that show one
//! partition holding up others (head-of-line blocking) in [`contention`];
//! the 2011 paper's experiments, run one after another and set beside its
//! figures, in [`paper`]. A run measures one broker (given, or one of its
//! own in this process) or a replicated cluster of its own ([`cluster`]:
//! `klog-broker` processes and a directory registry), whose partitions'
//! leaders it sends to and reads from ([`route`]).
//!
//! A stop signal ends a run early with no result (exit 0), its broker or
//! cluster stopped and its directory removed.

use std::io::IsTerminal;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub mod cluster;
pub mod contention;
pub mod disk;
pub mod paper;
pub mod route;
pub mod workload;

use cluster::{OwnCluster, Shape};
use route::Route;
use workload::{OwnBroker, ProduceRun, Report};

/// Where a measurement runs and how it reports: the options every one
/// takes.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// The broker to measure (default: start one in a temporary directory).
    pub broker: Option<String>,
    /// A cluster of the benchmark's own to measure instead of one broker.
    pub cluster: Option<Shape>,
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
    let result = measure(setup, measurement);
    if crate::stop::stopping() {
        // Whatever failed, failed for the signal; the broker or cluster
        // of our own is stopped and removed by now.
        if !setup.quiet {
            crate::diag::line(format_args!("% stopped by a signal: no result"));
        }
        return Ok(());
    }
    result
}

fn measure(setup: &Setup, measurement: &Measurement) -> anyhow::Result<()> {
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
    let route = target.route(&setup, &topic, true)?;
    let progress = Progress::new(run.records, "fanout", setup.quiet);
    let report = contention::fanout(&route, &topic, partitions, run, &|n| progress.update(n))?;
    progress.finish();
    target.print(&report, &topic, "fanout", "sent", setup.json)?;
    Ok(())
}

fn measure_roll(setup: &Setup, run: &contention::RollRun) -> anyhow::Result<()> {
    let setup = Setup {
        partitions: setup.partitions.max(2),
        ..setup.clone()
    };
    let target = Target::new(&setup)?;
    let topic = topic(&setup, "roll");
    let route = target.route(&setup, &topic, true)?;
    let progress = Progress::new(run.measured.records, "roll", setup.quiet);
    let report = contention::roll(&route, &topic, run, &|n| progress.update(n))?;
    progress.finish();
    if !setup.quiet {
        let segment_bytes = setup
            .segment_bytes
            .filter(|_| target.is_own())
            .map_or("the broker's --segment-bytes".to_string(), mib);
        crate::diag::line(format_args!(
            "% partition 1 took {} meanwhile (segments of {segment_bytes})",
            mib(report.background_bytes)
        ));
    }
    target.print(&report.measured, &topic, "roll", "sent", setup.json)?;
    Ok(())
}

fn measure_produce(setup: &Setup, run: &ProduceRun) -> anyhow::Result<()> {
    let target = Target::new(setup)?;
    let topic = topic(setup, "produce");
    let route = target.route(setup, &topic, true)?;
    let progress = Progress::new(run.records, "produce", setup.quiet);
    let report = workload::produce(&route, &topic, run, &|n| progress.update(n))?;
    progress.finish();
    target.print(&report, &topic, "produce", "sent", setup.json)?;
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
    let route = target.route(setup, &topic, false)?;
    if target.is_own() || setup.topic.is_none() {
        if !setup.quiet {
            crate::diag::line(format_args!(
                "% filling {topic} with {records} records of {value_bytes} bytes"
            ));
        }
        workload::fill(&route, &topic, records, value_bytes)?;
    }
    let progress = Progress::new(records, "consume", setup.quiet);
    let report = workload::consume(&route, &topic, records, fetch_bytes_max, prefetch, &|n| {
        progress.update(n)
    })?;
    progress.finish();
    target.print(&report, &topic, "consume", "consumed", setup.json)?;
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
    let route = target.route(setup, &topic, true)?;
    let report = workload::latency(&route, &topic, records, value_bytes, rate_per_sec)?;
    target.print(&report, &topic, "latency", "sent", setup.json)?;
    Ok(())
}

/// What to measure: the broker given, or a broker or cluster of our own.
struct Target {
    /// A broker's address (of a cluster: any broker).
    addr: String,
    own: Own,
}

/// What a run started itself, stopped and removed when dropped.
enum Own {
    /// Nothing: the broker was given (`-b`).
    Nothing,
    /// A broker in this process.
    Broker(OwnBroker),
    /// A cluster of `klog-broker` processes.
    Cluster(OwnCluster),
}

impl Target {
    fn new(setup: &Setup) -> anyhow::Result<Target> {
        let partitions = setup.partitions.max(1);
        Ok(match (&setup.broker, setup.cluster) {
            (Some(addr), _) => Target {
                addr: addr.clone(),
                own: Own::Nothing,
            },
            (None, Some(shape)) => {
                let cluster = OwnCluster::start(shape, partitions, setup.segment_bytes)?;
                if !setup.quiet {
                    crate::diag::line(format_args!(
                        "% started {}, replication factor {}, min ISR {}",
                        crate::human::count(u64::from(shape.brokers), "broker"),
                        shape.replication_factor,
                        shape.min_insync_replicas
                    ));
                }
                Target {
                    addr: cluster.addr().to_string(),
                    own: Own::Cluster(cluster),
                }
            }
            (None, None) => {
                let own = OwnBroker::start(partitions, setup.segment_bytes)?;
                Target {
                    addr: own.addr(),
                    own: Own::Broker(own),
                }
            }
        })
    }

    /// Whether the broker or cluster is the run's own.
    fn is_own(&self) -> bool {
        !matches!(self.own, Own::Nothing)
    }

    /// Where `topic`'s records go. A cluster's topic is created with
    /// `setup.partitions` first, and each partition's leader waited for;
    /// with `warm`, and then one acks=all record sent to each (see
    /// [`route::warm_up`]), before a run that times acknowledgements.
    fn route(&self, setup: &Setup, topic: &str, warm: bool) -> crate::error::Result<Route> {
        let Own::Cluster(cluster) = &self.own else {
            return Ok(Route::Broker(self.addr.clone()));
        };
        let route = cluster.leaders(topic, setup.partitions.max(1))?;
        if warm {
            route::warm_up(&route, topic)?;
        }
        if !setup.quiet {
            let Route::Leaders(leaders) = &route else {
                unreachable!("a cluster routes to leaders")
            };
            crate::diag::line(format_args!(
                "% {topic}: {}, each with its leader and {}{}",
                crate::human::count(leaders.len() as u64, "partition"),
                crate::human::count(
                    u64::from(cluster.shape().replication_factor),
                    "in-sync replica"
                ),
                if warm {
                    " (a warm-up record acknowledged with acks=all on each)"
                } else {
                    ""
                }
            ));
        }
        Ok(route)
    }

    /// The shape of a broker or cluster of our own, for the JSON: brokers
    /// live, `topic`'s replication factor and its smallest ISR as the
    /// registry says now, and the minimum ISR asked for.
    fn shape(&self, topic: &str) -> crate::error::Result<Option<serde_json::Value>> {
        Ok(match &self.own {
            Own::Nothing => None,
            Own::Broker(_) => Some(serde_json::json!({
                "brokers": 1,
                "replication_factor": 1,
                "min_insync_replicas": 1,
            })),
            Own::Cluster(cluster) => {
                let seen = cluster.observe(topic)?;
                Some(serde_json::json!({
                    "brokers": seen.brokers,
                    "replication_factor": seen.replication_factor,
                    "min_insync_replicas": cluster.shape().min_insync_replicas,
                    "in_sync_replicas_min": seen.in_sync_replicas_min,
                }))
            }
        })
    }

    /// `report` as one JSON object (with the shape of a broker or cluster
    /// of our own).
    fn json(&self, report: &Report, topic: &str, kind: &str) -> anyhow::Result<serde_json::Value> {
        let mut json = report.json(kind);
        if let (Some(serde_json::Value::Object(shape)), Some(fields)) =
            (self.shape(topic)?, json.as_object_mut())
        {
            fields.extend(shape);
        }
        Ok(json)
    }

    /// Prints `report` of a run on `topic`: Kafka's line, or one JSON
    /// object.
    fn print(
        &self,
        report: &Report,
        topic: &str,
        kind: &str,
        verb: &str,
        json: bool,
    ) -> anyhow::Result<()> {
        let line = if json {
            self.json(report, topic, kind)?.to_string()
        } else {
            report.kafka_line(verb)
        };
        writeln!(std::io::stdout().lock(), "{line}")?;
        Ok(())
    }

    /// Bytes of `topic`'s segment files on one replica, when the run owns
    /// them.
    fn log_bytes(&self, topic: &str) -> Option<u64> {
        match &self.own {
            Own::Nothing => None,
            Own::Broker(own) => Some(own.log_bytes(topic)),
            Own::Cluster(cluster) => Some(cluster.log_bytes(topic)),
        }
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
pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}
