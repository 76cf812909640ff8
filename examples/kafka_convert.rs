//! The cost of the Kafka listener's batch conversion: Kafka RecordBatch v2
//! into klog batches (`to_klog`, the produce path) and klog batches into
//! Kafka batches (`to_kafka`, the fetch path), in nanoseconds per record.
//!
//! ```sh
//! cargo run --release --example kafka_convert                # 2M x 200 B, batches of 100
//! cargo run --release --example kafka_convert -- --records 1000000 --size 100 --batch 500 --key 16
//! cargo run --release --example kafka_convert -- --compression lz4   # or gzip, snappy, zstd
//! ```
//!
//! Both ways check everything a broker checks: `to_klog` the Kafka batch
//! CRC32C and every field, and writes a CRC32 per record; `to_kafka` every
//! klog record's CRC32, and writes the Kafka batch CRC32C. The input is one
//! request's worth of batches (`--input-batches`, 10 by default: about
//! 200 KiB), in memory, converted again and again into a reused buffer until
//! `--records` records are converted, as a broker converts one produce
//! request or fetch response at a time: this is the conversion alone. It
//! is timed with the thread's CPU time (`/proc/thread-self/schedstat`, in
//! ns), which a machine that others share does not inflate by preempting
//! the thread, and with the wall clock. Each round prints; the best is the
//! figure. With `--compression` the Kafka batches are compressed (by the
//! `kafka-protocol` crate's encoder, as a producer would) and `to_klog`
//! decompresses each one first; the fetch path is the same either way.

use std::time::Instant;

use anyhow::{bail, Context};
use kafka_protocol::records::{
    Compression, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
};
use klog::kafka::records::{to_kafka, to_klog};
use klog::limits::RECORD_BYTES_MAX_DEFAULT;
use klog::storage::record::{self, BatchBuilder};

struct Options {
    records: u64,
    size: usize,
    batch: u64,
    key: usize,
    input_batches: u64,
    rounds: u32,
    compression: Compression,
}

fn parse() -> anyhow::Result<Options> {
    let mut o = Options {
        records: 2_000_000,
        size: 200,
        batch: 100,
        key: 0,
        input_batches: 10,
        rounds: 5,
        compression: Compression::None,
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
                o.compression = match value.as_str() {
                    "none" => Compression::None,
                    "gzip" => Compression::Gzip,
                    "snappy" => Compression::Snappy,
                    "lz4" => Compression::Lz4,
                    "zstd" => Compression::Zstd,
                    _ => bail!("--compression {value:?}: none, gzip, snappy, lz4 or zstd"),
                }
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

/// `o.input_batches` klog batches of `o.batch` records each, offsets
/// assigned, as a log stores them.
fn klog_input(o: &Options) -> Vec<u8> {
    let value = vec![b'v'; o.size];
    let key = vec![b'k'; o.key];
    let key = (o.key > 0).then_some(&key[..]);
    let mut bytes = Vec::new();
    let mut builder = BatchBuilder::new();
    let mut offset = 0;
    for _ in 0..o.input_batches {
        let count = o.batch;
        builder.clear();
        for i in 0..count {
            builder.push(1_700_000_000_000 + i as i64, key, &[], &value);
        }
        let batch = builder.finish();
        record::stamp(batch, offset, 1);
        bytes.extend_from_slice(batch);
        offset += count;
    }
    bytes
}

/// Each Kafka batch of `kafka` encoded again with `compression`.
fn compressed(kafka: &[u8], compression: Compression) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = kafka;
    while !rest.is_empty() {
        let set = RecordBatchDecoder::decode(&mut rest).context("decode a Kafka batch")?;
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut out, &set.records, &options).context("compress")?;
    }
    Ok(out)
}

/// The calling thread's CPU time so far, in ns (Linux's schedstat).
fn cpu_ns() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")
        .context("read /proc/thread-self/schedstat")?;
    let field = text.split_whitespace().next().unwrap_or_default();
    field.parse().with_context(|| format!("schedstat {text:?}"))
}

/// Runs `convert` `repeats` times; its (CPU, wall) ns.
fn timed(
    repeats: u64,
    mut convert: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<(u64, u64)> {
    let cpu = cpu_ns()?;
    let wall = Instant::now();
    for _ in 0..repeats {
        convert()?;
    }
    Ok((cpu_ns()? - cpu, wall.elapsed().as_nanos() as u64))
}

fn main() -> anyhow::Result<()> {
    let o = parse()?;
    let klog = klog_input(&o);
    let mut kafka = Vec::with_capacity(klog.len() * 11 / 10);
    let used = to_kafka(&klog, &mut kafka).context("klog to Kafka")?;
    assert_eq!(used, klog.len());
    let plain_bytes = kafka.len();
    if o.compression != Compression::None {
        kafka = compressed(&kafka, o.compression)?;
    }
    let input_records = o.batch * o.input_batches;
    let repeats = o.records.div_ceil(input_records);
    let records = repeats * input_records;
    let mut out = Vec::with_capacity(klog.len().max(kafka.len()) * 11 / 10);
    println!(
        "{records} records of {} bytes (key {} bytes), batches of {}, converted {} at a time \
         (klog {} bytes, Kafka {} bytes, {} bytes as sent with {:?} compression)",
        o.size,
        o.key,
        o.batch,
        input_records,
        klog.len(),
        plain_bytes,
        kafka.len(),
        o.compression
    );
    let per = |ns: u64| ns as f64 / records as f64;
    let (mut best_produce, mut best_fetch) = (f64::MAX, f64::MAX);
    for round in 1..=o.rounds {
        let produce = timed(repeats, || {
            out.clear();
            let done =
                to_klog(&kafka, &mut out, RECORD_BYTES_MAX_DEFAULT).context("Kafka to klog")?;
            assert_eq!(done.records, input_records);
            Ok(())
        })?;
        // The same batches as stored, but for the offsets and epoch the log
        // has not assigned yet.
        assert_eq!(out.len(), klog.len());
        let fetch = timed(repeats, || {
            out.clear();
            to_kafka(&klog, &mut out).context("klog to Kafka")?;
            Ok(())
        })?;
        if o.compression == Compression::None {
            assert_eq!(out, kafka);
        }
        println!(
            "round {round}: Kafka to klog (produce) {:.1} ns/record CPU ({:.1} wall), \
             klog to Kafka (fetch) {:.1} ns/record CPU ({:.1} wall)",
            per(produce.0),
            per(produce.1),
            per(fetch.0),
            per(fetch.1)
        );
        best_produce = best_produce.min(per(produce.0));
        best_fetch = best_fetch.min(per(fetch.0));
    }
    println!(
        "best CPU time: Kafka to klog {best_produce:.1} ns/record, \
         klog to Kafka {best_fetch:.1} ns/record"
    );
    Ok(())
}
