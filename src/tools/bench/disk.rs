//! `klog-bench fsync`: how long this machine's disk takes to make an
//! append durable, the floor under every acks=all answer and every record
//! a consumer sees. It appends `count` writes of `bytes` to a new file, as
//! a partition's flush does (one batch of 50 records of 200 bytes is about
//! 10 KiB), and times each `fdatasync` alone: its median is the yardstick
//! a group commit is measured against.
//!
//! With `overwrite`, the file is first filled with zeros for every write
//! to come, and synced, before any is timed: each write then lands on
//! blocks already written, and its `fdatasync` changes neither the file's
//! size nor its block map (on ext4, no journal commit), which is what an
//! fsync costs in a segment whose blocks were written ahead of its
//! appends.
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
/// it records (µs); with `overwrite`, over zeros written and synced first
/// (see `prewrite`). Stops early, with the fsyncs timed so far, at a stop
/// signal.
pub fn fsyncs(dir: &Path, count: u64, bytes: usize, overwrite: bool) -> anyhow::Result<Report> {
    let mut scratch = tempfile::Builder::new()
        .prefix("klog-bench-fsync-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    let path = scratch.path().to_path_buf();
    if overwrite {
        let len = count.saturating_mul(bytes as u64);
        room_for(dir, len)?;
        prewrite(scratch.as_file(), len)
            .with_context(|| format!("cannot write zeros ahead in {}", path.display()))?;
    }
    timed_writes(scratch.as_file_mut(), &path, count, bytes)
}

/// Writes `count` blocks of `bytes` from the start of `file` (at
/// `path`), timing the `fdatasync` after each (a stop signal ends it
/// early).
fn timed_writes(
    file: &mut std::fs::File,
    path: &Path,
    count: u64,
    bytes: usize,
) -> anyhow::Result<Report> {
    let block = vec![0x6b_u8; bytes];
    let mut report = Report::default();
    let start = Instant::now();
    for _ in 0..count {
        if crate::stop::stopping() {
            break;
        }
        // Over the zeros, if any: the position starts at 0 either way.
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

/// Refuses a run whose zeros ahead (`len` bytes) would not fit in the
/// space `dir`'s file system has free.
fn room_for(dir: &Path, len: u64) -> anyhow::Result<()> {
    let free = crate::storage::fs::free_bytes(dir)
        .with_context(|| format!("cannot look at the free space of {}", dir.display()))?;
    if len > free {
        anyhow::bail!(
            "--overwrite writes {} of zeros first (--count times --append-size), and {} has {} free",
            super::mib(len),
            dir.display(),
            super::mib(free)
        );
    }
    Ok(())
}

/// Fills `file` with `len` bytes of zeros, a megabyte a write, and syncs
/// them: its blocks are then allocated and written (a stop signal ends it
/// early, the run then times nothing).
fn prewrite(file: &std::fs::File, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < len && !crate::stop::stopping() {
        let n = (len - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    match crate::stop::stopping() {
        true => Ok(()),
        false => file.sync_all(),
    }
}

/// What each timed write does: `appends` or `overwrites`.
fn kind(overwrite: bool) -> &'static str {
    match overwrite {
        true => "overwrites",
        false => "appends",
    }
}

/// The result line: like Kafka's perf-test line, in fsyncs.
pub fn line(report: &Report, bytes: usize, overwrite: bool) -> String {
    let h = &report.latency_us;
    let ms = |us: u64| us as f64 / 1000.0;
    format!(
        "{} fsyncs of {bytes}-byte {}, {:.1} fsyncs/sec ({:.2} MB/sec), {:.3} ms avg, {:.3} ms max, \
         {:.3} ms 50th, {:.3} ms 95th, {:.3} ms 99th, {:.3} ms 99.9th.",
        report.records,
        kind(overwrite),
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
pub fn json(report: &Report, bytes: usize, overwrite: bool, dir: &Path) -> serde_json::Value {
    let mut j = report.json("fsync");
    if let Some(o) = j.as_object_mut() {
        o.insert("append_bytes".into(), bytes.into());
        o.insert("overwrite".into(), overwrite.into());
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
        for overwrite in [false, true] {
            let report = fsyncs(&dir, 20, 4096, overwrite).unwrap();
            assert_eq!((report.records, report.bytes), (20, 20 * 4096));
            assert_eq!(report.latency_us.count(), 20);
            let what = ["appends", "overwrites"][usize::from(overwrite)];
            let want = format!("20 fsyncs of 4096-byte {what}, ");
            assert!(line(&report, 4096, overwrite).starts_with(&want));
            let j = json(&report, 4096, overwrite, &dir);
            assert_eq!(
                (&j["append_bytes"], &j["overwrite"]),
                (&4096.into(), &overwrite.into())
            );
            let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
            assert!(left.is_empty(), "the scratch file is removed");
        }
        std::fs::remove_dir(&dir).unwrap();
        assert!(fsyncs(&dir, 1, 1, false).is_err(), "no such directory");
    }

    #[test]
    fn the_timed_writes_go_over_the_zeros_from_the_start() {
        let mut file = tempfile::tempfile().unwrap();
        prewrite(&file, 5 * 4096).unwrap();
        let report = timed_writes(&mut file, Path::new("t"), 5, 4096).unwrap();
        assert_eq!(report.latency_us.count(), 5);
        let mut all = Vec::new();
        use std::io::{Read, Seek};
        file.rewind().unwrap();
        file.read_to_end(&mut all).unwrap();
        assert_eq!(all.len(), 5 * 4096, "over the zeros, not after them");
        assert!(all.iter().all(|&b| b == 0x6b), "every zero written over");
    }

    #[test]
    fn zeros_that_do_not_fit_are_refused_before_any_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let e = fsyncs(dir.path(), 10_000_000, 64 << 20, true).unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("--overwrite writes 640000000.0 MiB of zeros first"),
            "{text}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn zeros_are_written_ahead_of_every_write_to_come() {
        let file = tempfile::tempfile().unwrap();
        prewrite(&file, (3 << 20) + 5).unwrap();
        let meta = file.metadata().unwrap();
        assert_eq!(meta.len(), (3 << 20) + 5);
        // Written, not a hole: the blocks are allocated.
        use std::os::unix::fs::MetadataExt;
        assert!(
            meta.blocks() * 512 >= meta.len(),
            "{} blocks",
            meta.blocks()
        );
    }
}
