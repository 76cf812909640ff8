//! The 2011 paper's experiments: 10 million 200-byte records
//! produced with batches of 1 and of 50, consumed from the page cache, and
//! the bytes each record costs on disk beyond its value; each result is set
//! beside the paper's figure in one table (or printed as JSON lines).

use super::workload::{self, ProduceRun};
use super::{topic, Progress, Setup, Target};
use std::io::Write;

/// The table's rows (experiment, the paper's figure, ours) and the JSON
/// lines, filled in experiment by experiment.
#[derive(Default)]
struct Results {
    rows: Vec<(&'static str, String, String)>,
    json: Vec<serde_json::Value>,
}

/// Runs the experiments with `records` records each and prints the table.
pub fn run(setup: &Setup, records: u64) -> anyhow::Result<()> {
    let target = Target::new(setup)?;
    let mut results = Results::default();
    let topics = produce_experiments(setup, &target, records, &mut results)?;
    let (_, topic_b50) = topics
        .iter()
        .find(|(batch, _)| *batch == 50)
        .expect("batch 50 ran");
    consume_experiment(setup, &target, records, topic_b50, &mut results)?;
    // Only a broker of our own has its segment files where we can see them.
    overhead_rows(&target, &topics, records, &mut results);
    results.print(setup.json)?;
    Ok(())
}

/// Produces `records` records with batches of 50 and of 1, each to a topic
/// of its own; returns (batch, topic) in the order they ran.
fn produce_experiments(
    setup: &Setup,
    target: &Target,
    records: u64,
    results: &mut Results,
) -> anyhow::Result<Vec<(u32, String)>> {
    let mut topics = Vec::new();
    // Batch 50 first: batch 1 writes 2.5 GB that the disk is still busy
    // with long after (the table lists batch 1 first all the same).
    for (batch, paper_figure) in [(50u32, "400,000 records/s"), (1, "50,000 records/s")] {
        let topic = topic(setup, &format!("paper-b{batch}"));
        let route = target.route(setup, &topic, true)?;
        let run = ProduceRun {
            records,
            value_bytes: 200,
            batch_records: batch,
            acks: crate::protocol::ACKS_LEADER,
            in_flight_max: 256,
            producers: 1,
            pinned: false,
        };
        // Each experiment starts with the disk idle, not writing back the
        // previous one's gigabytes.
        nix::unistd::sync();
        let progress = Progress::new(records, &format!("produce batch {batch}"), setup.quiet);
        let report = workload::produce(&route, &topic, &run, &|n| progress.update(n))?;
        progress.finish();
        results.rows.push((
            if batch == 1 {
                "produce, batch 1"
            } else {
                "produce, batch 50"
            },
            paper_figure.to_string(),
            format!("{:.0} records/s", report.records_per_sec()),
        ));
        results
            .json
            .push(target.json(&report, &topic, &format!("produce_batch_{batch}"))?);
        topics.push((batch, topic));
    }
    results.rows.swap(0, 1);
    Ok(topics)
}

/// Consumes the `records` records of `topic` from the start.
fn consume_experiment(
    setup: &Setup,
    target: &Target,
    records: u64,
    topic: &str,
    results: &mut Results,
) -> anyhow::Result<()> {
    let route = target.route(setup, topic, false)?;
    let progress = Progress::new(records, "consume", setup.quiet);
    // The paper's consumers fetched about 200 KB (1000 records) at a time.
    let report = workload::consume(&route, topic, records, 200 * 1024, 4, &|n| {
        progress.update(n)
    })?;
    progress.finish();
    results.rows.push((
        "consume (page cache)",
        "22,000 records/s".into(),
        format!("{:.0} records/s", report.records_per_sec()),
    ));
    results.json.push(target.json(&report, topic, "consume")?);
    Ok(())
}

/// The bytes each record cost on disk in each produce experiment: segment
/// bytes (of one replica) beyond the 200-byte values (segment headers
/// included).
fn overhead_rows(target: &Target, topics: &[(u32, String)], records: u64, results: &mut Results) {
    for (batch, topic) in topics.iter().rev() {
        let Some(bytes) = target.log_bytes(topic) else {
            return;
        };
        let per_record = bytes as f64 / records as f64 - 200.0;
        let (what, paper) = if *batch == 50 {
            ("bytes of overhead per record, batch 50", "9")
        } else {
            ("bytes of overhead per record, batch 1", "9 (any batch)")
        };
        results
            .rows
            .push((what, paper.into(), format!("{per_record:.1}")));
        results.json.push(
            serde_json::json!({"type": "overhead", "batch": batch, "bytes_per_record": per_record}),
        );
    }
}

impl Results {
    /// Prints the JSON lines, or the table.
    fn print(self, json: bool) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        if json {
            for j in self.json {
                writeln!(out, "{j}")?;
            }
            return Ok(());
        }
        let mut table = crate::tools::table(&[
            "experiment (10^7 x 200 B in the paper)",
            "paper, 2011",
            "klog, this machine",
        ]);
        for (what, paper, klog) in self.rows {
            table.add_row([what.to_string(), paper, klog]);
        }
        writeln!(out, "{table}")
    }
}
