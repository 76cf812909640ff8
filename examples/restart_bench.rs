//! The restart benchmark: how long opening a data directory takes after a
//! clean shutdown, as the broker opens it (writable, locked) and as
//! `klog-consume --data-dir` and `klog-dump` open it (read-only).
//!
//! ```sh
//! cargo run --release --example restart_bench                          # 8 partitions x 1 GiB
//! cargo run --release --example restart_bench -- --segment-size 64MiB # does it scale with size?
//! cargo run --release --example restart_bench -- --dir /mnt/x/rb --keep   # build once, keep it
//! cargo run --release --example restart_bench -- --dir /mnt/x/rb          # reuse: measure only
//! ```
//!
//! The build phase creates one topic of `--partitions` partitions through the
//! public API and fills each to `--segment-size` in one active segment (the
//! log's `segment_bytes` is set above the fill, so it never rolls), with
//! batches of 50 records of 200 B gathered into 1 MiB writes, then closes
//! every log: a clean shutdown (flushed, index trimmed, recovery point and
//! clean-shutdown marker written). A `--dir` that already holds the topic is
//! reused as it is and never deleted; one the benchmark built is deleted at
//! the end unless `--keep`, and so is the default directory, a temporary one
//! under `./target/`.
//!
//! The measure phase runs `--runs` times. Before each kind of open it runs
//! `sync` and drops the page cache (`echo 3 > /proc/sys/vm/drop_caches`;
//! root only) in the first run, so that run is cold and the later ones warm;
//! when the cache cannot be dropped every run says "warm cache". Per
//! partition it times a writable open (`OpenOptions { writable: true, lock:
//! true }`), the clean close after it, and a read-only open as
//! [`klog::tools::consume::open_read_only`] does it. Each run prints the
//! per-partition minimum, median and maximum in ms and the total over all
//! partitions; the last line compares the medians with the target of the
//! issue "Durability without exceptions": at most 50 ms per partition,
//! independent of the segment size. Timed with the wall clock.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use klog::storage::fs::RealFs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::BatchBuilder;
use klog::storage::store::Store;

const TOPIC: &str = "restart-bench";
const RECORD_BYTES: usize = 200;
const BATCH_RECORDS: usize = 50;
const TARGET_MS: f64 = 50.0;

struct Options {
    partitions: u32,
    segment_size: u64,
    dir: Option<PathBuf>,
    keep: bool,
    runs: u32,
}

fn parse() -> anyhow::Result<Options> {
    let mut o = Options {
        partitions: 8,
        segment_size: 1 << 30,
        dir: None,
        keep: false,
        runs: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--partitions" => o.partitions = value()?.parse()?,
            "--segment-size" => {
                o.segment_size = klog::human::parse_size(&value()?).map_err(anyhow::Error::msg)?
            }
            "--dir" => o.dir = Some(value()?.into()),
            "--keep" => o.keep = true,
            "--runs" => o.runs = value()?.parse()?,
            "-h" | "--help" => {
                println!("usage: restart_bench [--partitions N] [--segment-size SIZE] [--dir DIR] [--keep] [--runs N]");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    if o.partitions == 0 || o.runs == 0 {
        bail!("--partitions and --runs must be at least 1");
    }
    // Room above the fill for `segment_bytes`, which must stay a u32.
    let most = klog::limits::SEGMENT_BYTES_MAX - (16 << 20);
    if !(1 << 20..=most).contains(&o.segment_size) {
        bail!("--segment-size must be within 1MiB..={most} bytes");
    }
    Ok(o)
}

/// The log configuration of both phases: never rolls below the fill, keeps
/// everything.
fn config(segment_size: u64) -> LogConfig {
    LogConfig {
        segment_bytes: segment_size + (16 << 20),
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn main() -> anyhow::Result<()> {
    let o = parse()?;
    // What to delete at the end (None: a reused directory, or --keep).
    let (dir, owned) = match &o.dir {
        Some(d) => (d.clone(), !populated(d, o.partitions)?),
        None => {
            std::fs::create_dir_all("target").context("create ./target")?;
            let tmp = tempfile::Builder::new()
                .prefix("restart-bench-")
                .tempdir_in("target")?;
            (tmp.keep(), true)
        }
    };
    let result = run(&o, &dir, owned);
    if owned && !o.keep {
        std::fs::remove_dir_all(&dir).with_context(|| format!("remove {}", dir.display()))?;
    } else {
        println!(
            "kept {} (run again with --dir {0} to measure only)",
            dir.display()
        );
    }
    result
}

fn run(o: &Options, dir: &Path, build_it: bool) -> anyhow::Result<()> {
    let store = Store::new(dir);
    if build_it {
        build(o, &store)?;
    } else {
        println!(
            "reusing {}: topic {TOPIC}, {} partitions (build skipped)",
            dir.display(),
            o.partitions
        );
    }
    let sizes = (0..o.partitions)
        .map(|p| segment_sizes(&store.partition_dir(TOPIC, p)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let total: u64 = sizes.iter().map(|s| s.iter().sum::<u64>()).sum();
    let segments: usize = sizes.iter().map(Vec::len).sum();
    println!(
        "{} partitions, {segments} segments, {total} bytes of log: {} bytes per partition on average",
        o.partitions,
        total / u64::from(o.partitions)
    );

    let mut summary: Vec<(String, f64, f64)> = Vec::new();
    for run in 1..=o.runs {
        let cold = run == 1 && drop_caches();
        let label = if cold {
            "cold: page cache dropped before each kind"
        } else {
            "warm cache"
        };
        println!("\nrun {run} of {} ({label})", o.runs);
        let (writable, close, scanned) = writable_opens(o, &store, run == 1)?;
        if run == 1 {
            drop_caches();
        }
        let read_only = read_only_opens(o, &store)?;
        println!("| per partition, ms | min | median | max | total, all partitions |");
        println!("|---|---:|---:|---:|---:|");
        for (name, times) in [
            ("writable open (broker)", &writable),
            ("its clean close", &close),
            ("read-only open (consume, dump)", &read_only),
        ] {
            let s = stats(times);
            println!(
                "| {name} | {:.1} | {:.1} | {:.1} | {:.1} |",
                s.min, s.median, s.max, s.total
            );
        }
        println!(
            "active segment scanned on writable open: {scanned} of {} partitions",
            o.partitions
        );
        summary.push((
            label.to_string(),
            stats(&writable).median,
            stats(&read_only).median,
        ));
    }

    let worst = summary.iter().map(|s| s.1.max(s.2)).fold(0.0, f64::max);
    let medians: Vec<String> = summary
        .iter()
        .enumerate()
        .map(|(i, (label, w, r))| {
            let kind = if label.starts_with("cold") {
                "cold"
            } else {
                "warm"
            };
            format!("run {} ({kind}) writable {w:.1} / read-only {r:.1}", i + 1)
        })
        .collect();
    println!(
        "\ntarget <= {TARGET_MS:.0} ms per partition, independent of segment size: median ms per partition: {}; \
         worst {worst:.1} ms: {}",
        medians.join(", "),
        if worst <= TARGET_MS {
            "met".to_string()
        } else {
            format!("missed ({:.1}x the target)", worst / TARGET_MS)
        }
    );
    Ok(())
}

/// Whether `dir` already holds the benchmark's topic with enough partitions.
fn populated(dir: &Path, partitions: u32) -> anyhow::Result<bool> {
    if !dir.exists() || std::fs::read_dir(dir)?.next().is_none() {
        return Ok(false);
    }
    match Store::new(dir).topics()?.get(TOPIC) {
        Some(&n) if n >= partitions => Ok(true),
        Some(&n) => bail!(
            "{} holds {n} partitions of {TOPIC}, fewer than {partitions}",
            dir.display()
        ),
        None => bail!("{} is not empty and holds no topic {TOPIC}", dir.display()),
    }
}

/// Fills every partition to the segment size in one segment, then closes
/// it cleanly.
fn build(o: &Options, store: &Store) -> anyhow::Result<()> {
    store.create_topic(TOPIC, o.partitions)?;
    let config = LogConfig {
        // Gather appends into large writes: the build is disk-bound.
        visible_after_flush: true,
        write_buffer_bytes: 1 << 20,
        ..config(o.segment_size)
    };
    let options = OpenOptions {
        writable: true,
        lock: true,
    };
    let value = vec![b'x'; RECORD_BYTES];
    let mut builder = BatchBuilder::new();
    let start = Instant::now();
    let mut records = 0u64;
    let mut bytes = 0u64;
    for p in 0..o.partitions {
        let mut log = store.open_log(TOPIC, p, config.clone(), options)?;
        let now = klog::clock::now_ms();
        loop {
            builder.clear();
            for _ in 0..BATCH_RECORDS {
                builder.push(now, None, &[], &value);
            }
            let batch = builder.finish();
            if log.size_bytes() + batch.len() as u64 > o.segment_size {
                break;
            }
            log.append(batch, now)?;
            records += BATCH_RECORDS as u64;
        }
        bytes += log.size_bytes();
        log.close()?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "built {}: {} partitions x {} bytes, {records} records of {RECORD_BYTES} B in batches of \
         {BATCH_RECORDS}, closed cleanly; {secs:.1} s ({:.0} MB/s)",
        store.dir().display(),
        o.partitions,
        bytes / u64::from(o.partitions),
        bytes as f64 / secs / 1e6
    );
    Ok(())
}

/// The sizes of a partition's segment files.
fn segment_sizes(dir: &Path) -> anyhow::Result<Vec<u64>> {
    let mut sizes = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().ends_with(".log") {
            sizes.push(entry.metadata()?.len());
        }
    }
    Ok(sizes)
}

/// Opens each partition as the broker does and closes it cleanly again:
/// the open times, the close times (ms), and how many opens scanned the
/// active segment.
fn writable_opens(
    o: &Options,
    store: &Store,
    warn: bool,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, u32)> {
    let options = OpenOptions {
        writable: true,
        lock: true,
    };
    let (mut opens, mut closes, mut scanned) = (Vec::new(), Vec::new(), 0);
    for p in 0..o.partitions {
        let dir = store.partition_dir(TOPIC, p);
        if warn && !klog::storage::recover::was_clean(&RealFs, &dir) {
            println!(
                "warning: {} was not closed cleanly; this open recovers it",
                dir.display()
            );
        }
        let start = Instant::now();
        let log = Log::open(Arc::new(RealFs), &dir, config(o.segment_size), options)?;
        opens.push(ms(start));
        scanned += u32::from(log.recovery().segments.last().is_some_and(|s| s.scanned));
        let start = Instant::now();
        log.close()?;
        closes.push(ms(start));
    }
    Ok((opens, closes, scanned))
}

/// Opens each partition read-only as `klog-consume --data-dir` does; the
/// open times (ms).
fn read_only_opens(o: &Options, store: &Store) -> anyhow::Result<Vec<f64>> {
    let mut opens = Vec::new();
    for p in 0..o.partitions {
        let dir = store.partition_dir(TOPIC, p);
        let start = Instant::now();
        let log = klog::tools::consume::open_read_only(Arc::new(RealFs), &dir)?;
        opens.push(ms(start));
        drop(log);
    }
    Ok(opens)
}

/// `sync`, then drops the page cache; whether it could.
fn drop_caches() -> bool {
    nix::unistd::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

struct Stats {
    min: f64,
    median: f64,
    max: f64,
    total: f64,
}

fn stats(times: &[f64]) -> Stats {
    let mut t = times.to_vec();
    t.sort_by(f64::total_cmp);
    let n = t.len();
    let median = if n % 2 == 1 {
        t[n / 2]
    } else {
        (t[n / 2 - 1] + t[n / 2]) / 2.0
    };
    Stats {
        min: t[0],
        median,
        max: t[n - 1],
        total: t.iter().sum(),
    }
}
