//! The storage engine's benchmark: append records to one partition log in
//! batches, fsync, read them all back through `Log::read`, and compare with
//! what `dd ... conv=fdatasync` writes on the same file system in the same run.
//!
//! ```sh
//! cargo run --release --example log_bench                  # 10M x 200 B, batches of 50
//! cargo run --release --example log_bench -- --records 1000000 --size 100 --batch 10 --dir /mnt/x
//! ```
//!
//! The append path includes encoding each batch (CRC of every record), the
//! log's checks of the batch, offset assignment, index entries and the final
//! fsync; the read path includes decoding every batch header and checking
//! every record's CRC, as a consumer does. Timed with the wall clock.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use klog::storage::fs::RealFs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::{Batch, BatchBuilder};

struct Options {
    records: u64,
    size: usize,
    batch: u64,
    dir: Option<PathBuf>,
    dd_mib: u64,
}

fn parse() -> anyhow::Result<Options> {
    let mut o = Options {
        records: 10_000_000,
        size: 200,
        batch: 50,
        dir: None,
        dd_mib: 4096,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--records" => o.records = value()?.parse()?,
            "--size" => o.size = value()?.parse()?,
            "--batch" => o.batch = value()?.parse()?,
            "--dir" => o.dir = Some(value()?.into()),
            "--dd-mib" => o.dd_mib = value()?.parse()?,
            "-h" | "--help" => {
                println!("usage: log_bench [--records N] [--size BYTES] [--batch N] [--dir DIR] [--dd-mib N]");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    if o.batch == 0 || o.records == 0 {
        bail!("--records and --batch must be at least 1");
    }
    Ok(o)
}

fn main() -> anyhow::Result<()> {
    let o = parse()?;
    let base = match &o.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let dir = base.path().join("bench-0");
    std::fs::create_dir(&dir)?;

    let dd = dd_write(base.path(), o.dd_mib)?;

    let config = LogConfig {
        retention_ms: None,
        ..LogConfig::default()
    };
    let writable = OpenOptions {
        writable: true,
        lock: true,
    };
    let mut log = Log::open(Arc::new(RealFs), &dir, config.clone(), writable)?;
    let value = vec![b'x'; o.size];
    let mut builder = BatchBuilder::new();
    let start = Instant::now();
    let mut appended = 0u64;
    let mut now = klog::clock::now_ms();
    while appended < o.records {
        let n = o.batch.min(o.records - appended);
        builder.clear();
        for _ in 0..n {
            builder.push(now, None, &[], &value);
        }
        log.append(builder.finish(), now)?;
        appended += n;
        if appended % (1 << 16) < n {
            now = klog::clock::now_ms();
        }
    }
    log.flush()?;
    let append_secs = start.elapsed().as_secs_f64();
    let log_bytes = log.size_bytes();
    log.close()?;

    let reader = Log::open(
        Arc::new(RealFs),
        &dir,
        config.clone(),
        OpenOptions {
            writable: false,
            lock: false,
        },
    )?;
    let start = Instant::now();
    let (read, read_bytes) = read_all(&reader, config.record_bytes_max)?;
    let read_secs = start.elapsed().as_secs_f64();
    if read != o.records {
        bail!("read back {read} records of {}", o.records);
    }

    let payload = o.records as f64 * o.size as f64;
    let mb = |bytes: f64, secs: f64| bytes / secs / 1e6;
    println!(
        "records {} of {} B in batches of {}; log {} bytes, {:.2} bytes of overhead per record",
        o.records,
        o.size,
        o.batch,
        log_bytes,
        (log_bytes as f64 - payload) / o.records as f64
    );
    println!(
        "append  {:>12.0} records/s  {:>8.1} MB/s of log  ({:.2} s, fsync included)",
        o.records as f64 / append_secs,
        mb(log_bytes as f64, append_secs),
        append_secs
    );
    println!(
        "read    {:>12.0} records/s  {:>8.1} MB/s of log  ({:.2} s, every CRC checked)",
        o.records as f64 / read_secs,
        mb(read_bytes as f64, read_secs),
        read_secs
    );
    println!(
        "dd      {:>12}            {:>8.1} MB/s  ({} MiB, bs=1M, conv=fdatasync, same file system)",
        "", dd, o.dd_mib
    );
    println!(
        "append / dd = {:.2}",
        mb(log_bytes as f64, append_secs) / dd
    );
    Ok(())
}

/// Reads every record through `Log::read`, checking every CRC; returns the
/// records and the bytes read.
fn read_all(log: &Log, record_bytes_max: u32) -> anyhow::Result<(u64, u64)> {
    let mut offset = log.start_offset();
    let mut buf = Vec::with_capacity(1 << 20);
    let (mut records, mut bytes) = (0u64, 0u64);
    while let Some(slice) = log.read(offset, 1 << 20)? {
        slice.read_into(&mut buf)?;
        bytes += buf.len() as u64;
        let mut at = 0;
        while at < buf.len() {
            let Ok(batch) = Batch::decode(
                klog::storage::record::Format::Kafka,
                &buf[at..],
                klog::limits::BATCH_BYTES_MAX,
            ) else {
                break;
            };
            batch.validate(record_bytes_max)?;
            records += u64::from(batch.header.record_count);
            offset = batch.header.next_offset();
            at += batch.total_bytes();
        }
    }
    Ok((records, bytes))
}

/// Runs dd writing `mib` MiB with a final fdatasync into `dir`; MB/s.
fn dd_write(dir: &Path, mib: u64) -> anyhow::Result<f64> {
    let target = dir.join("dd.out");
    let start = Instant::now();
    let status = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", target.display()))
        .args([
            "bs=1M",
            &format!("count={mib}"),
            "conv=fdatasync",
            "status=none",
        ])
        .status()
        .context("run dd")?;
    let secs = start.elapsed().as_secs_f64();
    if !status.success() {
        bail!("dd failed: {status}");
    }
    std::fs::remove_file(&target)?;
    Ok((mib << 20) as f64 / secs / 1e6)
}
