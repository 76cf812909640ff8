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
//! With a `rate` ([`paced`]), it measures instead the floor under
//! `klog-bench latency`: writes come at that rate while a second thread
//! fsyncs back to back (a group commit with no window, as a broker's
//! flusher does when someone waits), and each write is timed from its
//! append to the end of the first `fdatasync` begun after it. A record
//! waits for the fsync under way, then for its own: no log can show it
//! sooner on this disk.
//!
//! The file is made in a directory of the caller's choice (by default the
//! temporary directory, where the benchmark's own brokers keep their data)
//! and removed at the end, on an error and at a stop signal too.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::workload::Report;

/// Appends `count` writes of `bytes` to a new file in `dir` (removed at
/// the end, whatever happens), each followed by an `fdatasync` whose time
/// it records (µs); with `overwrite`, over zeros written and synced first
/// (see `prewrite`). Stops early, with the fsyncs timed so far, at a stop
/// signal.
pub fn fsyncs(dir: &Path, count: u64, bytes: usize, overwrite: bool) -> anyhow::Result<Report> {
    let mut scratch = scratch(dir, count, bytes, overwrite)?;
    let path = scratch.path().to_path_buf();
    timed_writes(scratch.as_file_mut(), &path, count, bytes)
}

/// A new file in `dir` for `count` writes of `bytes` (removed when
/// dropped), with zeros written and synced ahead of them for `overwrite`.
fn scratch(
    dir: &Path,
    count: u64,
    bytes: usize,
    overwrite: bool,
) -> anyhow::Result<tempfile::NamedTempFile> {
    let scratch = tempfile::Builder::new()
        .prefix("klog-bench-fsync-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    if overwrite {
        let len = count.saturating_mul(bytes as u64);
        room_for(dir, len)?;
        prewrite(scratch.as_file(), len)
            .with_context(|| format!("cannot write zeros ahead in {}", scratch.path().display()))?;
    }
    Ok(scratch)
}

/// Writes `count` writes of `bytes` at `rate` a second to a new file in
/// `dir` (removed at the end), a second thread fsyncing back to back, and
/// records each write's wait (µs) from its append to the end of the first
/// `fdatasync` begun after it; with `overwrite`, over zeros written and
/// synced first. Returns the report and the number of fsyncs. Stops early
/// at a stop signal.
pub fn paced(
    dir: &Path,
    count: u64,
    bytes: usize,
    overwrite: bool,
    rate: u64,
) -> anyhow::Result<(Report, u64)> {
    let scratch = scratch(dir, count, bytes, overwrite)?;
    let path = scratch.path().to_path_buf();
    let sync = |f: &std::fs::File| f.sync_data();
    paced_writes(
        scratch.as_file(),
        &path,
        Pacing {
            count,
            bytes,
            rate,
            ahead_max: STAMPS,
        },
        &sync,
    )
}

/// What a paced run writes: `count` writes of `bytes`, `rate` a second,
/// at most `ahead_max` of them not yet durable.
#[derive(Debug, Clone, Copy)]
struct Pacing {
    count: u64,
    bytes: usize,
    rate: u64,
    ahead_max: u64,
}

/// Send times of the writes not yet durable, at most: a writer this far
/// ahead of the fsyncs waits (a disk that stalls holds no more memory).
const STAMPS: u64 = 1 << 16;

/// The writes of a paced run to `file` (at `path`), each made durable by
/// `sync` on a second thread (see [`paced`]).
fn paced_writes(
    file: &std::fs::File,
    path: &Path,
    pacing: Pacing,
    sync: &(dyn Fn(&std::fs::File) -> std::io::Result<()> + Sync),
) -> anyhow::Result<(Report, u64)> {
    let run = Shared {
        start: Instant::now(),
        stamps: (0..pacing.ahead_max.min(pacing.count).max(1))
            .map(|_| AtomicU64::new(0))
            .collect(),
        written: AtomicU64::new(0),
        durable: AtomicU64::new(0),
        done: AtomicBool::new(false),
        idle: AtomicBool::new(false),
    };
    let (written, synced) = std::thread::scope(|s| {
        let syncer = s.spawn(|| run.sync_behind(file, sync));
        let written = run.write_paced(file, pacing, syncer.thread());
        run.done.store(true, Ordering::SeqCst);
        syncer.thread().unpark();
        (written, syncer.join())
    });
    let synced = synced.map_err(|_| anyhow::anyhow!("the fsync thread panicked"))?;
    let records = written.with_context(|| format!("cannot write {}", path.display()))?;
    let (latency_us, fsyncs) =
        synced.with_context(|| format!("fdatasync of {} failed", path.display()))?;
    let report = Report {
        records,
        bytes: records * pacing.bytes as u64,
        secs: run.start.elapsed().as_secs_f64(),
        latency_us,
    };
    Ok((report, fsyncs))
}

/// What the writer and the fsync thread of a paced run share.
struct Shared {
    start: Instant,
    /// The send time (µs since `start`) of write `i`, at `i % len`.
    stamps: Vec<AtomicU64>,
    /// Writes appended.
    written: AtomicU64,
    /// Writes durable.
    durable: AtomicU64,
    /// The writer is done (or failed, or stopped), or an fsync failed.
    done: AtomicBool,
    /// The fsync thread has nothing to sync and parks: the writer's next
    /// write unparks it (neither thread spins on the other's core).
    idle: AtomicBool,
}

impl Shared {
    /// Appends the writes at their pace, unparking `syncer` when it waits
    /// for one; how many it wrote (fewer at a stop or a failed fsync).
    fn write_paced(
        &self,
        file: &std::fs::File,
        p: Pacing,
        syncer: &std::thread::Thread,
    ) -> std::io::Result<u64> {
        use std::os::unix::fs::FileExt;
        let block = vec![0x6b_u8; p.bytes];
        let ring = self.stamps.len() as u64;
        for i in 0..p.count {
            if crate::stop::stopping() || self.done.load(Ordering::Acquire) {
                return Ok(i);
            }
            let due =
                Duration::from_nanos((u128::from(i) * 1_000_000_000 / u128::from(p.rate)) as u64);
            while self.start.elapsed() < due || i - self.durable.load(Ordering::Acquire) >= ring {
                if crate::stop::stopping() || self.done.load(Ordering::Acquire) {
                    return Ok(i);
                }
                match due.checked_sub(self.start.elapsed()) {
                    Some(ahead) if ahead > Duration::from_micros(200) => {
                        std::thread::sleep(ahead - Duration::from_micros(100))
                    }
                    _ => std::thread::yield_now(),
                }
            }
            let sent = self.start.elapsed().as_micros() as u64;
            file.write_all_at(&block, i * p.bytes as u64)?;
            self.stamps[(i % ring) as usize].store(sent, Ordering::Relaxed);
            self.written.store(i + 1, Ordering::SeqCst);
            if self.idle.swap(false, Ordering::SeqCst) {
                syncer.unpark();
            }
        }
        Ok(p.count)
    }

    /// Fsyncs what was written, back to back, until the writer is done and
    /// all it wrote is durable; each write's wait, and the fsyncs made. A
    /// failed fsync ends the run (the writer sees `done`).
    fn sync_behind(
        &self,
        file: &std::fs::File,
        sync: &(dyn Fn(&std::fs::File) -> std::io::Result<()> + Sync),
    ) -> std::io::Result<(crate::stats::Histogram, u64)> {
        let mut waits = crate::stats::Histogram::default();
        let (mut synced, mut fsyncs) = (0, 0);
        loop {
            let finished = self.done.load(Ordering::Acquire);
            let written = self.written.load(Ordering::Acquire);
            if written == synced {
                if finished {
                    return Ok((waits, fsyncs));
                }
                // Says it parks, then looks again: a write between the
                // look above and the flag is seen here, and one after it
                // unparks.
                self.idle.store(true, Ordering::SeqCst);
                if self.written.load(Ordering::SeqCst) == synced
                    && !self.done.load(Ordering::SeqCst)
                {
                    std::thread::park_timeout(Duration::from_millis(10));
                }
                self.idle.store(false, Ordering::SeqCst);
                continue;
            }
            if let Err(e) = sync(file) {
                self.done.store(true, Ordering::Release);
                return Err(e);
            }
            fsyncs += 1;
            let at = self.start.elapsed().as_micros() as u64;
            for i in synced..written {
                let sent =
                    self.stamps[(i % self.stamps.len() as u64) as usize].load(Ordering::Relaxed);
                waits.record_n(at.saturating_sub(sent), 1);
            }
            synced = written;
            self.durable.store(written, Ordering::Release);
        }
    }
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
    format!(
        "{} fsyncs of {bytes}-byte {}, {:.1} fsyncs/sec ({:.2} MB/sec), {}",
        report.records,
        kind(overwrite),
        report.records_per_sec(),
        report.mb_per_sec(),
        latencies(&report.latency_us),
    )
}

/// The end of a result line: `A ms avg, X ms max, P50 ms 50th, ... 99.9th.`
fn latencies(h: &crate::stats::Histogram) -> String {
    let ms = |us: u64| us as f64 / 1000.0;
    format!(
        "{:.3} ms avg, {:.3} ms max, {:.3} ms 50th, {:.3} ms 95th, {:.3} ms 99th, {:.3} ms 99.9th.",
        h.mean() / 1000.0,
        ms(h.max()),
        ms(h.quantile(0.50)),
        ms(h.quantile(0.95)),
        ms(h.quantile(0.99)),
        ms(h.quantile(0.999)),
    )
}

/// The result line of a paced run ([`paced`]) of `fsyncs` fsyncs at
/// `rate` writes a second: latencies from a write to its durability.
pub fn paced_line(
    report: &Report,
    bytes: usize,
    overwrite: bool,
    rate: u64,
    fsyncs: u64,
) -> String {
    format!(
        "{} writes of {bytes}-byte {} at {rate}/sec ({:.1} writes/sec, {fsyncs} fdatasyncs back \
         to back), each durable at the end of the first begun after it: {}",
        report.records,
        kind(overwrite),
        report.records_per_sec(),
        latencies(&report.latency_us),
    )
}

/// The result as one JSON object (`type` "fsync": `records` are fsyncs;
/// with a `rate` (and its `fsyncs`), `type` "fsync_rate": `records` are
/// the writes, and the latencies theirs from append to durability).
pub fn json(
    report: &Report,
    bytes: usize,
    overwrite: bool,
    dir: &Path,
    paced: Option<(u64, u64)>,
) -> serde_json::Value {
    let mut j = report.json(if paced.is_some() {
        "fsync_rate"
    } else {
        "fsync"
    });
    if let Some(o) = j.as_object_mut() {
        o.insert("append_bytes".into(), bytes.into());
        o.insert("overwrite".into(), overwrite.into());
        o.insert("dir".into(), dir.display().to_string().into());
        if let Some((rate, fsyncs)) = paced {
            o.insert("rate".into(), rate.into());
            o.insert("fsyncs".into(), fsyncs.into());
        }
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
            let j = json(&report, 4096, overwrite, &dir, None);
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

    /// A 5 ms fsync, writes every 0.5 ms: each write waits for the fsync
    /// under way and then its own, so none is durable in under 5 ms, and
    /// the fsyncs gather writes. With at most 4 writes ahead of the
    /// fsyncs, the send times of writes not yet durable are never
    /// overwritten (a later one would show a wait under 5 ms).
    #[test]
    fn a_paced_write_is_durable_only_at_the_end_of_an_fsync_begun_after_it() {
        let file = tempfile::tempfile().unwrap();
        let slow = |f: &std::fs::File| {
            std::thread::sleep(Duration::from_millis(5));
            f.sync_data()
        };
        for ahead_max in [STAMPS, 4] {
            let pacing = Pacing {
                count: 40,
                bytes: 100,
                rate: 2000,
                ahead_max,
            };
            let (report, fsyncs) = paced_writes(&file, Path::new("t"), pacing, &slow).unwrap();
            assert_eq!((report.records, report.bytes), (40, 4000));
            let h = &report.latency_us;
            assert_eq!(h.count(), 40, "every write timed once");
            // The lowest value (quantiles never read low).
            let least = h.quantile(0.0);
            assert!(
                least >= 5000,
                "durable before an fsync begun after it: {least} µs"
            );
            assert!(fsyncs < 40, "the fsyncs gathered writes: {fsyncs}");
        }
        assert_eq!(file.metadata().unwrap().len(), 4000);
    }

    /// A failed fsync ends the run with its error, the writer too.
    #[test]
    fn a_failed_fsync_ends_a_paced_run() {
        let file = tempfile::tempfile().unwrap();
        let calls = AtomicU64::new(0);
        let failing = |_: &std::fs::File| match calls.fetch_add(1, Ordering::Relaxed) {
            0 | 1 => Ok(()),
            _ => Err(std::io::Error::from_raw_os_error(nix::libc::EIO)),
        };
        let pacing = Pacing {
            count: 1_000_000,
            bytes: 10,
            rate: 10_000,
            ahead_max: STAMPS,
        };
        let e = paced_writes(&file, Path::new("t"), pacing, &failing).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("fdatasync of t failed: "),
            "{e:#}"
        );
        assert!(
            file.metadata().unwrap().len() < 1_000_000 * 10,
            "the writer stopped"
        );
    }

    /// A writer behind its schedule (a rate above what it can write) stops
    /// at a failed fsync too, not a ring of writes later.
    #[test]
    fn a_writer_behind_its_schedule_stops_at_a_failed_fsync() {
        let file = tempfile::tempfile().unwrap();
        let calls = AtomicU64::new(0);
        let at_failure = AtomicU64::new(0);
        let failing = |f: &std::fs::File| match calls.fetch_add(1, Ordering::Relaxed) {
            0 | 1 => Ok(()),
            _ => {
                at_failure.store(f.metadata()?.len(), Ordering::Relaxed);
                Err(std::io::Error::from_raw_os_error(nix::libc::EIO))
            }
        };
        let pacing = Pacing {
            count: 10_000_000,
            bytes: 10,
            rate: 10_000_000,
            ahead_max: STAMPS,
        };
        paced_writes(&file, Path::new("t"), pacing, &failing).unwrap_err();
        let after = file.metadata().unwrap().len() - at_failure.load(Ordering::Relaxed);
        assert!(after < 1000 * 10, "{} writes after the failure", after / 10);
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
