//! The cost of checking a produce's batches, all that the broker does to
//! a Kafka RecordBatch v2 before it stores it as sent
//! (`klog::kafka::records::check_produce`: the CRC32C, every record's
//! framing, and for a compressed batch its decompression), and of serving
//! an old segment's legacy batches as Kafka batches (`legacy::to_kafka`,
//! the only conversion left on a fetch), in nanoseconds per record.
//!
//! ```sh
//! cargo run --release --example batch_check                # 2M x 200 B, batches of 100
//! cargo run --release --example batch_check -- --records 1000000 --size 100 --batch 500 --key 16
//! cargo run --release --example batch_check -- --compression lz4   # or gzip, snappy, zstd
//! ```
//!
//! The input is one request's worth of batches (10, about 200 KiB), in
//! memory, checked (or converted into a reused buffer) again and again
//! until `--records` records are done, as a broker does one produce
//! request or fetch response at a time. It is timed with the thread's CPU
//! time (`/proc/thread-self/schedstat`, in ns), which a machine that others
//! share does not inflate by preempting the thread, and with the wall
//! clock. Each round prints; the best is the figure.

use std::time::Instant;

use anyhow::{bail, Context};
use klog::kafka::records::check_produce;
use klog::limits::RECORD_BYTES_MAX_DEFAULT;
use klog::storage::record::{self, legacy, BatchBuilder, Codec};

struct Options {
    records: u64,
    size: usize,
    batch: u64,
    key: usize,
    input_batches: u64,
    rounds: u32,
    compression: Codec,
}

fn parse() -> anyhow::Result<Options> {
    let mut o = Options {
        records: 2_000_000,
        size: 200,
        batch: 100,
        key: 0,
        input_batches: 10,
        rounds: 5,
        compression: Codec::None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        let number = || -> anyhow::Result<u64> {
            value
                .parse()
                .with_context(|| format!("{flag} {value:?} is not a number"))
        };
        match flag.as_str() {
            "--records" => o.records = number()?,
            "--size" => o.size = number()? as usize,
            "--batch" => o.batch = number()?,
            "--key" => o.key = number()? as usize,
            "--rounds" => o.rounds = number()? as u32,
            "--compression" => {
                o.compression = Codec::parse(&value).with_context(|| {
                    format!("--compression {value:?}: none, gzip, snappy, lz4 or zstd")
                })?
            }
            _ => bail!(
                "unknown flag {flag} (--records N --size BYTES --batch N --key BYTES --rounds N \
                 --compression CODEC)"
            ),
        }
    }
    if o.records == 0 || o.batch == 0 || o.input_batches == 0 || o.rounds == 0 {
        bail!("--records, --batch, --input-batches and --rounds must be at least 1");
    }
    Ok(o)
}

/// `o.input_batches` batches of `o.batch` records each, offsets
/// assigned, as a log stores them: Kafka batches compressed with `codec`,
/// or legacy ones.
fn input(o: &Options, codec: Option<Codec>) -> Vec<u8> {
    let value = vec![b'v'; o.size];
    let key = vec![b'k'; o.key];
    let key = (o.key > 0).then_some(&key[..]);
    let mut bytes = Vec::new();
    let mut offset = 0;
    for _ in 0..o.input_batches {
        let count = o.batch;
        let ts = |i: u64| 1_700_000_000_000 + i as i64;
        match codec {
            Some(codec) => {
                let mut builder = BatchBuilder::compressed(codec, None);
                (0..count).for_each(|i| builder.push(ts(i), key, &[], &value));
                let batch = builder.finish();
                record::stamp(batch, offset, 1);
                bytes.extend_from_slice(batch);
            }
            None => {
                let mut builder = legacy::BatchBuilder::new();
                (0..count).for_each(|i| builder.push(ts(i), key, &[], &value));
                let batch = builder.finish();
                legacy::stamp(batch, offset, 1);
                bytes.extend_from_slice(batch);
            }
        }
        offset += count;
    }
    bytes
}

/// The calling thread's CPU time so far, in ns (Linux's schedstat).
fn cpu_ns() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")
        .context("read /proc/thread-self/schedstat")?;
    let field = text.split_whitespace().next().unwrap_or_default();
    field.parse().with_context(|| format!("schedstat {text:?}"))
}

/// Runs `work` `repeats` times; its (CPU, wall) ns.
fn timed(repeats: u64, mut work: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<(u64, u64)> {
    let cpu = cpu_ns()?;
    let wall = Instant::now();
    for _ in 0..repeats {
        work()?;
    }
    Ok((cpu_ns()? - cpu, wall.elapsed().as_nanos() as u64))
}

fn main() -> anyhow::Result<()> {
    let o = parse()?;
    let kafka = input(&o, Some(o.compression));
    let plain = input(&o, Some(Codec::None));
    let old = input(&o, None);
    let input_records = o.batch * o.input_batches;
    let repeats = o.records.div_ceil(input_records);
    let records = repeats * input_records;
    println!(
        "{records} records of {} bytes (key {} bytes), batches of {}, {} at a time \
         (Kafka {} bytes, {} as sent with {} compression; legacy {} bytes)",
        o.size,
        o.key,
        o.batch,
        input_records,
        plain.len(),
        kafka.len(),
        o.compression,
        old.len()
    );
    let per = |ns: u64| ns as f64 / records as f64;
    let (mut best_produce, mut best_fetch) = (f64::MAX, f64::MAX);
    let mut headers = Vec::new();
    let mut out = Vec::with_capacity(plain.len() * 11 / 10);
    for round in 1..=o.rounds {
        let produce = timed(repeats, || {
            headers.clear();
            check_produce(&kafka, (RECORD_BYTES_MAX_DEFAULT, false), &mut headers)
                .context("check")?;
            assert_eq!(headers.len() as u64, o.input_batches);
            Ok(())
        })?;
        let fetch = timed(repeats, || {
            out.clear();
            legacy::to_kafka(&old, &mut out).context("legacy to Kafka")?;
            Ok(())
        })?;
        println!(
            "round {round}: produce check {:.1} ns/record CPU ({:.1} wall), \
             legacy segment served as Kafka {:.1} ns/record CPU ({:.1} wall)",
            per(produce.0),
            per(produce.1),
            per(fetch.0),
            per(fetch.1)
        );
        best_produce = best_produce.min(per(produce.0));
        best_fetch = best_fetch.min(per(fetch.0));
    }
    println!(
        "best CPU time: produce check {best_produce:.1} ns/record, \
         legacy served as Kafka {best_fetch:.1} ns/record"
    );
    Ok(())
}
