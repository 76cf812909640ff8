//! `klog-bench fsync`: how long this machine's disk takes to make an
//! append durable, the floor under every acks=all answer and every record
//! a consumer sees. It appends `count` writes of `bytes` to a new file, as
//! a partition's flush does (one batch of 50 records of 200 bytes is about
//! 10 KiB), and times each `fdatasync` alone: its median is the yardstick
//! a group commit is measured against.
//!
//! The file is made in a directory of the caller's choice (by default the
//! temporary directory, where the benchmark's own brokers keep their data)
//! and removed at the end, on an error and at a stop signal too.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;

use super::workload::Report;

/// Appends `count` writes of `bytes` to a new file in `dir` (removed at
/// the end, whatever happens), each followed by an `fdatasync` whose time
/// it records (µs). Stops early, with the fsyncs timed so far, at a stop
/// signal.
pub fn fsyncs(dir: &Path, count: u64, bytes: usize) -> anyhow::Result<Report> {
    let mut scratch = tempfile::Builder::new()
        .prefix("klog-bench-fsync-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    let path = scratch.path().to_path_buf();
    let block = vec![0x6b_u8; bytes];
    let mut report = Report::default();
    let start = Instant::now();
    for _ in 0..count {
        if crate::stop::stopping() {
            break;
        }
        let file = scratch.as_file_mut();
        file.write_all(&block)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let began = Instant::now();
        file.sync_data()
            .with_context(|| format!("fdatasync of {} failed", path.display()))?;
        report
            .latency_us
            .record_n(began.elapsed().as_micros() as u64, 1);
        report.records += 1;
        report.bytes += bytes as u64;
    }
    report.secs = start.elapsed().as_secs_f64();
    Ok(report)
}

/// The result line: like Kafka's perf-test line, in fsyncs.
pub fn line(report: &Report, bytes: usize) -> String {
    let h = &report.latency_us;
    let ms = |us: u64| us as f64 / 1000.0;
    format!(
        "{} fsyncs of {bytes}-byte appends, {:.1} fsyncs/sec ({:.2} MB/sec), {:.3} ms avg, {:.3} ms max, \
         {:.3} ms 50th, {:.3} ms 95th, {:.3} ms 99th, {:.3} ms 99.9th.",
        report.records,
        report.records_per_sec(),
        report.mb_per_sec(),
        h.mean() / 1000.0,
        ms(h.max()),
        ms(h.quantile(0.50)),
        ms(h.quantile(0.95)),
        ms(h.quantile(0.99)),
        ms(h.quantile(0.999)),
    )
}

/// The result as one JSON object (`type` "fsync"; `records` are fsyncs).
pub fn json(report: &Report, bytes: usize, dir: &Path) -> serde_json::Value {
    let mut j = report.json("fsync");
    if let Some(o) = j.as_object_mut() {
        o.insert("append_bytes".into(), bytes.into());
        o.insert("dir".into(), dir.display().to_string().into());
    }
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_append_is_timed_and_the_file_is_removed() {
        let dir = std::env::temp_dir().join(format!("klog-disk-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let report = fsyncs(&dir, 20, 4096).unwrap();
        assert_eq!((report.records, report.bytes), (20, 20 * 4096));
        assert_eq!(report.latency_us.count(), 20);
        assert!(line(&report, 4096).starts_with("20 fsyncs of 4096-byte appends, "));
        assert_eq!(json(&report, 4096, &dir)["append_bytes"], 4096);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "the scratch file is removed");
        std::fs::remove_dir(&dir).unwrap();
        assert!(fsyncs(&dir, 1, 1).is_err(), "no such directory");
    }
}
