//! Kafka RecordBatch v2 as klog stores it: a produce's batches checked
//! (`klog::kafka::records::check_produce`) and stored as sent, checked
//! against the `kafka-protocol` crate's encoder and decoder both ways,
//! through a real `Log`, and against hostile bytes; compressed batches too,
//! each codec's, and decompression bombs; and the legacy batches of old
//! segments converted for every client (`legacy::to_kafka`).

/// The counting allocator, to measure what a bomb costs.
#[path = "common/counting.rs"]
mod counting;

use std::cell::Cell;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use counting::Counting;
use klog::kafka::records::{check_produce, RecordsError};
use klog::limits::{BATCH_BYTES_MAX, BATCH_RECORDS_MAX, RECORD_BYTES_MAX_LIMIT};
use klog::storage::fs::sim::SimFs;
use klog::storage::fs::Vfs;
use klog::storage::log::{check_batch, Log, LogConfig, OpenOptions};
use klog::storage::record::legacy::{self, to_kafka};
use klog::storage::record::{self, Batch, BatchBuilder, BatchHeader, Decompressed, Format};

/// A record as both sides can say it: (offset, timestamp, key, value,
/// headers), with "null" already read as klog reads it.
type Plain = (i64, i64, Option<Vec<u8>>, Vec<u8>, Vec<(String, Vec<u8>)>);

/// A header: name and value (`None`: null).
type Header<'a> = (&'a str, Option<&'a [u8]>);

const RECORD_MAX: u32 = klog::limits::RECORD_BYTES_MAX_DEFAULT;

/// A Kafka record as a producer without idempotence would send it, the
/// sequence chosen so that the encoder keeps all in one batch with base
/// sequence -1.
fn kafka_record(
    offset: i64,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header<'_>],
) -> Record {
    let mut map = IndexMap::new();
    for (name, value) in headers {
        map.insert(
            StrBytes::from_string(name.to_string()),
            value.map(|v| v.to_vec().into()),
        );
    }
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: offset as i32 - 1,
        timestamp,
        key: key.map(|k| k.to_vec().into()),
        value: value.map(|v| v.to_vec().into()),
        headers: map,
    }
}

fn encode(records: &[Record], compression: Compression) -> Vec<u8> {
    let mut out = Vec::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut out, records, &options).unwrap();
    out
}

/// `batch` (a whole Kafka batch) with `section` for its records section
/// and compression `codec` (attribute bits 0-2), its length and CRC32C
/// made right again.
fn with_records_section(batch: &[u8], codec: i16, section: &[u8]) -> Vec<u8> {
    let mut out = batch[..61].to_vec();
    let attributes = i16::from_be_bytes([out[21], out[22]]) & !7 | codec;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(section);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// A batch of `records` whose attributes name compression `codec` but
/// whose records are not compressed: what no codec can read.
fn falsely_compressed(records: &[Record], codec: i16) -> Vec<u8> {
    let batch = encode(records, Compression::None);
    with_records_section(&batch, codec, &batch[61..])
}

/// Kafka's four codecs: the crate's compression and the attribute bits.
const CODECS: [(Compression, i16); 4] = [
    (Compression::Gzip, 1),
    (Compression::Snappy, 2),
    (Compression::Lz4, 3),
    (Compression::Zstd, 4),
];

/// A record as klog will give it back: null value and header values empty.
fn plain(record: &Record) -> Plain {
    let headers = record
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_deref().unwrap_or_default().to_vec()))
        .collect();
    (
        record.offset,
        record.timestamp,
        record.key.as_deref().map(<[u8]>::to_vec),
        record.value.as_deref().unwrap_or_default().to_vec(),
        headers,
    )
}

/// The records of the Kafka batches in `bytes` as klog reads them, each
/// batch checked as the log checks an append; offsets as in the batches.
fn klog_records(bytes: &[u8]) -> (usize, Vec<Plain>) {
    klog_records_checked(Format::Kafka, bytes, true)
}

/// As [`klog_records`], batches of `format`, checking each as the log
/// does or (stored bytes a test damaged) only as a reader does.
fn klog_records_checked(format: Format, bytes: &[u8], as_append: bool) -> (usize, Vec<Plain>) {
    let mut records = Vec::new();
    let mut at = 0;
    let mut batches = 0;
    let mut scratch = Decompressed::default();
    while at < bytes.len() {
        if as_append {
            check_batch(&bytes[at..], &LogConfig::default()).unwrap();
        }
        let batch = Batch::decode(format, &bytes[at..], BATCH_BYTES_MAX).unwrap();
        for r in batch
            .records_in(&mut scratch, RECORD_BYTES_MAX_LIMIT)
            .unwrap()
        {
            let r = r.unwrap();
            let headers = r
                .headers()
                .map(|(n, v)| (String::from_utf8_lossy(n).into_owned(), v.to_vec()))
                .collect();
            let key = r.key.map(<[u8]>::to_vec);
            records.push((r.offset as i64, r.timestamp, key, r.value.to_vec(), headers));
        }
        at += batch.total_bytes();
        batches += 1;
    }
    (batches, records)
}

/// What a produce of `kafka` stores: its batches' headers, or the refusal.
fn store(kafka: &[u8], record_bytes_max: u32) -> Result<Vec<BatchHeader>, RecordsError> {
    let mut headers = vec![];
    let result = check_produce(kafka, (record_bytes_max, false), &mut headers);
    match result {
        Ok(()) => Ok(headers),
        Err(e) => {
            assert!(headers.is_empty(), "{e}: no header kept of a refusal");
            Err(e)
        }
    }
}

/// The records of the Kafka batches in `bytes`, decoded by the crate, and
/// the batches' headers.
fn kafka_records(bytes: &[u8]) -> (Vec<Record>, Vec<kafka_protocol::records::BatchDecodeInfo>) {
    let sets = RecordBatchDecoder::decode_all(&mut &bytes[..]).unwrap();
    let infos = RecordBatchDecoder::decode_batch_info(&mut &bytes[..]).unwrap();
    assert_eq!(sets.len(), infos.len());
    for set in &sets {
        assert_eq!((set.version, set.compression), (2, Compression::None));
    }
    (sets.into_iter().flat_map(|s| s.records).collect(), infos)
}

/// Records of every shape: keys and none, empty keys and values, null
/// values, headers with null and empty values, timestamps going backwards.
fn mixed_records(first_offset: i64, count: i64) -> Vec<Record> {
    (0..count)
        .map(|i| {
            let offset = first_offset + i;
            let timestamp = 1_700_000_000_000 + (i * 7919) % 1000 - 500;
            let value = format!("value-{offset}-{}", "x".repeat((i % 13) as usize));
            let key = format!("key-{i}");
            match i % 6 {
                0 => kafka_record(offset, timestamp, None, Some(value.as_bytes()), &[]),
                1 => kafka_record(offset, timestamp, Some(key.as_bytes()), Some(b""), &[]),
                2 => kafka_record(offset, timestamp, Some(b""), None, &[("h", Some(b"v"))]),
                3 => kafka_record(
                    offset,
                    timestamp,
                    None,
                    Some(value.as_bytes()),
                    &[
                        ("a", None),
                        ("b", Some(b"")),
                        ("trace-id", Some(&[0, 255, 7])),
                    ],
                ),
                4 => kafka_record(
                    offset,
                    -timestamp,
                    Some(&[0xff; 300]),
                    Some(&[9; 3000]),
                    &[],
                ),
                _ => kafka_record(offset, timestamp, Some(key.as_bytes()), None, &[]),
            }
        })
        .collect()
}

#[test]
fn kafka_batches_are_stored_as_sent_and_read_back_the_same() {
    let cases: Vec<(&str, Vec<Vec<Record>>)> = vec![
        (
            "one record",
            vec![vec![kafka_record(0, 5, None, Some(b"a"), &[])]],
        ),
        ("mixed", vec![mixed_records(0, 60)]),
        ("many records", vec![mixed_records(0, 2000)]),
        (
            "several batches in one buffer",
            vec![
                mixed_records(0, 3),
                mixed_records(0, 1),
                mixed_records(0, 17),
            ],
        ),
        (
            "timestamps far apart",
            vec![vec![
                kafka_record(0, -1, None, Some(b"no timestamp"), &[]),
                kafka_record(1, i64::MAX / 2, Some(b"k"), Some(b"late"), &[]),
            ]],
        ),
    ];
    for (name, batches) in cases {
        let mut kafka = Vec::new();
        let mut expected = Vec::new();
        for records in &batches {
            kafka.extend_from_slice(&encode(records, Compression::None));
            expected.push(records.iter().map(plain).collect::<Vec<_>>());
        }
        let headers = store(&kafka, RECORD_MAX).unwrap();
        assert_eq!(headers.len(), batches.len(), "{name}");
        let count: u32 = headers.iter().map(|h| h.record_count).sum();
        assert_eq!(count as usize, batches.iter().map(Vec::len).sum::<usize>());
        let mut at = 0;
        for (i, (records, header)) in expected.iter().zip(&headers).enumerate() {
            let total = header.total_bytes() as usize;
            let (n, got) = klog_records(&kafka[at..at + total]);
            assert_eq!(n, 1, "{name}: batch {i}");
            assert_eq!(&got, records, "{name}: batch {i}");
            at += total;
        }
        assert_eq!(at, kafka.len(), "{name}: every batch");
    }
}

/// Batches of mixed records built by klog (Kafka's format, or `legacy`),
/// offsets from `base` and stamped with `epoch`, several in one buffer, as
/// a log would return them.
fn klog_batches_of(legacy: bool, base: u64, epoch: u32, sizes: &[u32]) -> (Vec<u8>, Vec<Plain>) {
    let mut bytes = Vec::new();
    let mut expected = Vec::new();
    let mut offset = base;
    for &size in sizes {
        let mut kafka = BatchBuilder::new();
        let mut old = legacy::BatchBuilder::new();
        for i in 0..size {
            let ts = 1_600_000_000_000 - i64::from(i % 5) * 1000;
            let value = format!("value {offset} {i}").repeat(1 + i as usize % 4);
            let key = (i % 3 != 0).then(|| format!("k{i}").into_bytes());
            let headers: Vec<(&[u8], &[u8])> = match i % 4 {
                0 => vec![],
                1 => vec![(b"a", b"1")],
                2 => vec![(b"empty", b""), (b"", b"no name")],
                _ => vec![(b"x", &[0u8, 1, 2][..])],
            };
            kafka.push(ts, key.as_deref(), &headers, value.as_bytes());
            old.push(ts, key.as_deref(), &headers, value.as_bytes());
            let plain_headers = headers
                .iter()
                .map(|(n, v)| (String::from_utf8(n.to_vec()).unwrap(), v.to_vec()))
                .collect();
            let at = offset + u64::from(i);
            expected.push((at as i64, ts, key, value.into_bytes(), plain_headers));
        }
        if legacy {
            let batch = old.finish();
            legacy::stamp(batch, offset, epoch);
            bytes.extend_from_slice(batch);
        } else {
            let batch = kafka.finish();
            record::stamp(batch, offset, epoch);
            bytes.extend_from_slice(batch);
        }
        offset += u64::from(size);
    }
    (bytes, expected)
}

fn plain_kafka(records: &[Record]) -> Vec<Plain> {
    records.iter().map(plain).collect()
}

#[test]
fn klog_batches_become_kafka_batches_the_kafka_crate_decodes() {
    for legacy in [false, true] {
        let (klog, expected) = klog_batches_of(legacy, 1_000, 7, &[1, 5, 300, 2]);
        let mut out = b"before".to_vec();
        if legacy {
            // An old segment's batches, as a fetch serves them.
            assert_eq!(to_kafka(&klog, &mut out).unwrap(), klog.len());
        } else {
            out.extend_from_slice(&klog);
        }
        assert_eq!(&out[..6], b"before");
        decoded_by_the_crate(&out[6..], &expected);
    }
}

/// Checks that the Kafka batches `kafka` decode in the crate to `expected`
/// with klog's header fields.
fn decoded_by_the_crate(kafka: &[u8], expected: &[Plain]) {
    let out = [&b"before"[..], kafka].concat();
    let (records, infos) = kafka_records(&out[6..]);
    assert_eq!(plain_kafka(&records), expected);
    for r in &records {
        assert!(r.value.is_some(), "a value is never null on the way out");
        assert!(r.headers.values().all(Option::is_some));
        assert_eq!((r.producer_id, r.producer_epoch), (-1, -1));
        assert_eq!(r.partition_leader_epoch, 7);
        assert_eq!(r.timestamp_type, TimestampType::Creation);
        assert!(!r.transactional && !r.control);
    }
    let bases: Vec<i64> = infos.iter().map(|i| i.min_offset).collect();
    assert_eq!(bases, [1_000, 1_001, 1_006, 1_306]);
    let counts: Vec<i32> = infos.iter().map(|i| i.record_count).collect();
    assert_eq!(counts, [1, 5, 300, 2]);
    assert!(infos.iter().all(|i| i.base_sequence == -1));
    // The header fields the crate does not read: lastOffsetDelta and
    // maxTimestamp.
    let mut at = 6;
    for (info, batch) in infos.iter().zip(batch_spans(&out[6..])) {
        let header = &out[at..at + 61];
        let last_delta = i32::from_be_bytes(header[23..27].try_into().unwrap());
        assert_eq!(last_delta, info.record_count - 1);
        let max_ts = i64::from_be_bytes(header[35..43].try_into().unwrap());
        let first = (info.min_offset - 1_000) as usize;
        let want = expected[first..first + info.record_count as usize]
            .iter()
            .map(|r| r.1)
            .max();
        assert_eq!(Some(max_ts), want);
        at += batch;
    }
}

/// Lengths of the Kafka batches in `bytes`, by their length fields.
fn batch_spans(bytes: &[u8]) -> Vec<usize> {
    let mut spans = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        spans.push(12 + length as usize);
        at += 12 + length as usize;
    }
    spans
}

/// A producer's batches go into a log and come back out of it as the
/// producer sent them, but for the offset and epoch the log stamps: nulls,
/// timestamps and the producer's batch boundaries included.
#[test]
fn batches_append_to_a_log_and_fetch_back_as_sent_at_their_offsets() {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/p");
    sim.create_dir_all_durable(dir);
    let options = OpenOptions {
        writable: true,
        lock: false,
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, LogConfig::default(), options).unwrap();
    log.set_leader_epoch(3).unwrap();
    let mut sent = Vec::new();
    let mut expected = Vec::new();
    let mut next = 0;
    for (count, compression) in [
        (3, Compression::None),
        (1, Compression::Zstd),
        (40, Compression::Gzip),
    ] {
        let records = mixed_records(0, count);
        let batch = encode(&records, compression);
        let headers = store(&batch, RECORD_MAX).unwrap();
        let mut copy = batch.clone();
        let info = log.append_checked(&mut copy, headers[0], 0).unwrap();
        assert_eq!(info.base_offset, next);
        expected.extend(records.iter().map(|r| Record {
            offset: r.offset + next as i64,
            partition_leader_epoch: 3,
            ..r.clone()
        }));
        sent.push((next, batch));
        next += count as u64;
    }
    log.flush().unwrap();
    let slice = log.read(0, 1 << 20).unwrap().unwrap();
    assert_eq!(slice.format, Format::Kafka);
    let mut fetched = Vec::new();
    slice.read_into(&mut fetched).unwrap();
    let mut at = 0;
    for (base, batch) in &sent {
        let stored = &fetched[at..at + batch.len()];
        assert_eq!(
            &stored[..8],
            &(*base as i64).to_be_bytes(),
            "the offset stamped"
        );
        assert_eq!(&stored[8..12], &batch[8..12]);
        assert_eq!(&stored[12..16], &3i32.to_be_bytes(), "the epoch stamped");
        assert_eq!(&stored[16..], &batch[16..], "the rest as sent");
        at += batch.len();
    }
    assert_eq!(at, fetched.len());
    let (records, _) = kafka_records_any(&fetched);
    assert_eq!(records, expected, "nulls and all, as the crate reads them");
}

/// [`kafka_records`] of batches of any codec.
fn kafka_records_any(bytes: &[u8]) -> (Vec<Record>, usize) {
    let sets = RecordBatchDecoder::decode_all(&mut &bytes[..]).unwrap();
    let n = sets.len();
    (sets.into_iter().flat_map(|s| s.records).collect(), n)
}

#[test]
fn to_kafka_leaves_a_batch_cut_short_and_never_serves_a_damaged_record() {
    let (klog, _) = klog_batches_of(true, 0, 1, &[2, 3]);
    let first = Batch::decode(Format::Legacy, &klog, BATCH_BYTES_MAX)
        .unwrap()
        .total_bytes();
    let mut whole_first = Vec::new();
    to_kafka(&klog[..first], &mut whole_first).unwrap();
    for cut in 0..klog.len() {
        let mut out = Vec::new();
        let used = to_kafka(&klog[..cut], &mut out).unwrap();
        let want = if cut < first { 0 } else { first };
        assert_eq!(used, want, "cut at {cut}");
        assert_eq!(
            out,
            whole_first[..if used == 0 { 0 } else { whole_first.len() }]
        );
    }
    // A flipped bit anywhere in either batch is an error, and nothing is
    // served: the output is as it was.
    for at in 0..klog.len() {
        let mut damaged = klog.clone();
        damaged[at] ^= 0x10;
        let mut out = b"before".to_vec();
        match to_kafka(&damaged, &mut out) {
            Err(_) => assert_eq!(out, b"before", "byte {at}"),
            // A flip in a length field can only make a batch look cut short.
            Ok(used) => {
                assert!(
                    (8..12).contains(&at) || (first + 8..first + 12).contains(&at),
                    "flip at {at} served"
                );
                assert!(used <= first, "flip at {at}");
                assert_eq!(
                    &out[6..],
                    &whole_first[..if used == 0 { 0 } else { whole_first.len() }]
                );
            }
        }
    }
}

/// A valid one-batch Kafka buffer of `count` records, for damaging.
fn valid(count: i64) -> Vec<u8> {
    encode(&mixed_records(0, count), Compression::None)
}

/// Rewrites the CRC32C of the Kafka batch at the start of `bytes` (when
/// its length field lets it be found), so that damage behind it is judged
/// by the fields, not the CRC.
fn reseal(bytes: &mut [u8]) {
    if bytes.len() < 61 {
        return;
    }
    let length = i32::from_be_bytes(bytes[8..12].try_into().unwrap());
    let end = 12usize.saturating_add(length.max(0) as usize);
    if end < 61 || end > bytes.len() {
        return;
    }
    let crc = crc32c::crc32c(&bytes[21..end]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
}

fn error_of(kafka: &[u8], record_bytes_max: u32) -> RecordsError {
    store(kafka, record_bytes_max).unwrap_err()
}

/// `valid(count)` changed by `change` and resealed.
fn changed(count: i64, change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = valid(count);
    change(&mut bytes);
    reseal(&mut bytes);
    bytes
}

#[test]
fn refusals_carry_the_kafka_error_code() {
    let put_i32 =
        |at: usize, v: i32| move |b: &mut Vec<u8>| b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    let attributes = |v: i16| move |b: &mut Vec<u8>| b[21..23].copy_from_slice(&v.to_be_bytes());
    let mut transactional = mixed_records(0, 3);
    let mut control = mixed_records(0, 3);
    for r in &mut transactional {
        r.transactional = true;
        r.producer_id = 9;
    }
    for r in &mut control {
        r.control = true;
    }
    let cases: Vec<(&str, Vec<u8>, i16)> = vec![
        ("not gzip", falsely_compressed(&mixed_records(0, 5), 1), 2),
        ("not snappy", falsely_compressed(&mixed_records(0, 5), 2), 2),
        ("not lz4", falsely_compressed(&mixed_records(0, 5), 3), 2),
        ("not zstd", falsely_compressed(&mixed_records(0, 5), 4), 2),
        ("compression 5", changed(5, attributes(5)), 76),
        ("compression 6", changed(5, attributes(6)), 76),
        ("compression 7", changed(5, attributes(7)), 76),
        (
            "transactional",
            encode(&transactional, Compression::None),
            87,
        ),
        ("control", encode(&control, Compression::None), 87),
        ("magic 0", changed(2, |b| b[16] = 0), 43),
        ("magic 1", changed(2, |b| b[16] = 1), 43),
        ("magic 3", changed(2, |b| b[16] = 3), 2),
        (
            "bad crc",
            {
                let mut b = valid(3);
                let last = b.len() - 1;
                b[last] ^= 1;
                b
            },
            2,
        ),
        ("negative batch length", changed(2, put_i32(8, -1)), 2),
        (
            "batch length past the end",
            changed(2, |b| b.pop().map(drop).unwrap()),
            2,
        ),
        ("batch length too small", changed(2, put_i32(8, 20)), 2),
        ("record count 0", changed(2, put_i32(57, 0)), 87),
        ("record count -1", changed(2, put_i32(57, -1)), 87),
        ("record count huge", changed(2, put_i32(57, i32::MAX)), 87),
        (
            "record count over the bytes",
            changed(2, put_i32(57, 1000)),
            87,
        ),
        ("record count one more", changed(2, put_i32(57, 3)), 87),
        ("last offset delta", changed(2, put_i32(23, 5)), 87),
        ("negative record length", changed(1, |b| b[61] = 0x01), 87),
        (
            "record length past the batch",
            changed(1, |b| b[61] = 0x7e),
            87,
        ),
        ("offset delta", changed(2, |b| b[64] = 4), 87),
        ("key length -2", changed(1, |b| b[65] = 0x03), 87),
        (
            "bytes after the records",
            changed(1, |b| {
                b.push(0);
                let length = i32::from_be_bytes(b[8..12].try_into().unwrap());
                b[8..12].copy_from_slice(&(length + 1).to_be_bytes());
            }),
            87,
        ),
    ];
    for (name, bytes, code) in cases {
        let err = error_of(&bytes, RECORD_MAX);
        assert_eq!(err.error_code, code, "{name}: {err}");
        // After a valid batch too: all or nothing.
        let mut two = valid(4);
        two.extend_from_slice(&bytes);
        assert_eq!(error_of(&two, RECORD_MAX).error_code, code, "{name} second");
    }
    // More records than klog's batch limit, in bytes that could hold them.
    let count = BATCH_RECORDS_MAX as i32 + 1;
    let huge = changed(1, |b| {
        b[57..61].copy_from_slice(&count.to_be_bytes());
        b.resize(61 + 7 * count as usize, 0);
        let length = b.len() as i32 - 12;
        b[8..12].copy_from_slice(&length.to_be_bytes());
    });
    assert_eq!(error_of(&huge, RECORD_MAX).error_code, 10);
}

#[test]
fn the_record_size_limit_is_the_kafka_record_size() {
    let value = [7u8; 500];
    let kafka = encode(
        &[kafka_record(0, 1, Some(b"k"), Some(&value), &[("h", None)])],
        Compression::None,
    );
    let size = BatchBuilder::record_size(Some(b"k"), &[(&b"h"[..], &b""[..])], &value) as u32;
    store(&kafka, size).unwrap();
    check_batch(
        &kafka,
        &LogConfig {
            record_bytes_max: size,
            ..LogConfig::default()
        },
    )
    .unwrap();
    let err = error_of(&kafka, size - 1);
    assert_eq!(err.error_code, 10, "{err}");
}

#[test]
fn null_keys_stay_no_key_and_empty_keys_stay_empty() {
    let kafka = encode(
        &[
            kafka_record(0, 1, None, Some(b"a"), &[]),
            kafka_record(1, 1, Some(b""), Some(b"b"), &[]),
        ],
        Compression::None,
    );
    store(&kafka, RECORD_MAX).unwrap();
    let batch = Batch::decode(Format::Kafka, &kafka, BATCH_BYTES_MAX).unwrap();
    let keys: Vec<_> = batch.records(RECORD_MAX).map(|r| r.unwrap().key).collect();
    assert_eq!(keys, [None, Some(&b""[..])]);
}

#[test]
fn hostile_kafka_bytes_never_panic_and_what_is_stored_the_kafka_crate_reads_the_same() {
    let mut compared = 0;
    let mut rng = klog::random::XorShift::new(0x6b61_666b_615f_7265);
    let mut seeds = vec![valid(1), valid(7), valid(40)];
    let mut two = valid(2);
    two.extend_from_slice(&valid(3));
    seeds.push(two);
    for (compression, _) in CODECS {
        seeds.push(encode(&mixed_records(0, 7), compression));
    }
    let (mut ok, mut refused) = (0, 0);
    for round in 0..30_000u32 {
        let mut bytes = if round % 10 == 9 {
            (0..rng.next() % 300).map(|_| rng.next() as u8).collect()
        } else {
            seeds[round as usize % seeds.len()].clone()
        };
        for _ in 0..=rng.next() % 4 {
            if bytes.is_empty() {
                break;
            }
            let at = (rng.next() % bytes.len() as u64) as usize;
            match rng.next() % 4 {
                0 => bytes.truncate(at),
                1 => bytes[at] ^= 1 << (rng.next() % 8),
                _ => bytes[at] = rng.next() as u8,
            }
        }
        if round % 2 == 0 {
            reseal(&mut bytes);
        }
        match store(&bytes, RECORD_MAX) {
            Ok(headers) => {
                ok += 1;
                let (batches, records) = klog_records(&bytes);
                assert_eq!(batches, headers.len(), "round {round}");
                // The crate refuses a header key that is not UTF-8 (Kafka's
                // Java broker reads it with replacement characters).
                if let Ok(sets) = RecordBatchDecoder::decode_all(&mut &bytes[..]) {
                    assert_eq!(sets.len(), batches, "round {round}");
                    let theirs: Vec<Record> = sets.into_iter().flat_map(|s| s.records).collect();
                    assert_eq!(records, plain_kafka(&theirs), "round {round}");
                    compared += 1;
                }
            }
            Err(e) => {
                refused += 1;
                assert!(
                    [2, 7, 10, 43, 76, 87].contains(&e.error_code),
                    "round {round}: {e}"
                );
            }
        }
    }
    // The loop reached both sides (resealed damage gets past the CRC).
    assert!(
        ok > 100 && refused > 10_000 && compared > 100,
        "{ok} stored ({compared} compared with the crate), {refused} refused"
    );
}

#[test]
fn hostile_legacy_bytes_never_panic_and_what_converts_decodes_in_the_kafka_crate() {
    let mut rng = klog::random::XorShift::new(0x6b6c_6f67_5f74_6f6b);
    let (seed, _) = klog_batches_of(true, 10, 2, &[3, 1, 20]);
    let (mut ok, mut refused) = (0, 0);
    for round in 0..30_000u32 {
        let mut bytes = seed.clone();
        for _ in 0..=rng.next() % 3 {
            let at = (rng.next() % bytes.len() as u64) as usize;
            bytes[at] = rng.next() as u8;
        }
        if round % 3 == 0 {
            bytes.truncate((rng.next() % bytes.len() as u64) as usize);
        }
        if round % 2 == 0 && bytes.len() >= 44 {
            // A valid header CRC, so that the records are reached.
            let crc = crc32fast::hash(&bytes[..40]);
            bytes[40..44].copy_from_slice(&crc.to_le_bytes());
        }
        let mut out = b"before".to_vec();
        match to_kafka(&bytes, &mut out) {
            Ok(used) => {
                ok += 1;
                assert!(used <= bytes.len());
                let (records, _) = kafka_records(&out[6..]);
                let (batches, stored) = klog_records_checked(Format::Legacy, &bytes[..used], false);
                assert!(batches <= 3);
                assert_eq!(plain_kafka(&records), stored, "round {round}");
            }
            Err(_) => {
                refused += 1;
                assert_eq!(out, b"before", "round {round}");
            }
        }
    }
    assert!(
        ok > 1_000 && refused > 1_000,
        "{ok} converted, {refused} refused"
    );
}

thread_local! {
    /// The bytes each thread holds, and the most it held (what one test's
    /// conversion costs, whatever runs beside).
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(bytes: isize) {
    let _ = HELD.try_with(|held| {
        held.set(held.get() + bytes);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(held.get())));
    });
}

#[global_allocator]
static COUNTING: Counting = Counting(count);

/// The most bytes this thread held above what it held before `f`, and
/// what `f` returned.
fn peak_of<T>(f: impl FnOnce() -> T) -> (isize, T) {
    let before = HELD.with(Cell::get);
    PEAK.with(|peak| peak.set(before));
    let result = f();
    (PEAK.with(Cell::get) - before, result)
}

#[test]
fn compressed_batches_are_stored_compressed_and_read_as_their_records() {
    let sets = [
        vec![kafka_record(0, 5, None, Some(b"a"), &[])],
        mixed_records(0, 60),
        mixed_records(0, 2000),
    ];
    for (compression, codec) in CODECS {
        for records in &sets {
            let kafka = encode(records, compression);
            assert_eq!(i16::from_be_bytes([kafka[21], kafka[22]]) & 7, codec);
            let name = format!("codec {codec}, {} records", records.len());
            let headers = store(&kafka, RECORD_MAX).unwrap();
            assert_eq!(headers.len(), 1, "{name}");
            assert_eq!(headers[0].codec().bits(), codec as u16, "{name}");
            let (_, stored) = klog_records(&kafka);
            assert_eq!(stored, plain_kafka(records), "{name}");
            if records.len() > 100 {
                let plain = encode(records, Compression::None);
                assert!(kafka.len() < plain.len() / 2, "{name}: stored compressed");
            }
        }
    }
}

#[test]
fn batches_of_every_codec_and_raw_snappy_are_taken_back_to_back() {
    let records = mixed_records(0, 40);
    let plain_batch = encode(&records, Compression::None);
    // librdkafka may send a raw snappy block, without the xerial framing.
    let raw = snap::raw::Encoder::new()
        .compress_vec(&plain_batch[61..])
        .unwrap();
    let mut kafka = with_records_section(&plain_batch, 2, &raw);
    let mut count = 1;
    for (compression, _) in CODECS {
        kafka.extend_from_slice(&encode(&records, compression));
        kafka.extend_from_slice(&plain_batch);
        count += 2;
    }
    let headers = store(&kafka, RECORD_MAX).unwrap();
    assert_eq!(headers.len(), count);
    let (batches, stored) = klog_records(&kafka);
    assert_eq!(batches, count);
    let one = plain_kafka(&records);
    assert_eq!(
        stored,
        (0..count).flat_map(|_| one.clone()).collect::<Vec<_>>()
    );
}

/// A records section of `codec` that decompresses to `mib` MiB of zeros,
/// made of small pieces (members, frames, blocks) back to back.
fn bomb(codec: i16, mib: usize) -> Vec<u8> {
    let zeros = vec![0u8; 1 << 20];
    let piece = match codec {
        1 => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            gz.write_all(&zeros).unwrap();
            gz.finish().unwrap()
        }
        2 => {
            let block = snap::raw::Encoder::new().compress_vec(&zeros).unwrap();
            let mut piece = (block.len() as i32).to_be_bytes().to_vec();
            piece.extend_from_slice(&block);
            piece
        }
        3 => {
            let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
            lz4.write_all(&zeros).unwrap();
            lz4.finish().unwrap()
        }
        _ => zstd::bulk::compress(&zeros, 19).unwrap(),
    };
    let mut section = match codec {
        2 => b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec(),
        _ => Vec::new(),
    };
    for _ in 0..mib {
        section.extend_from_slice(&piece);
    }
    section
}

#[test]
fn a_decompression_bomb_is_refused_having_held_at_most_the_batch_limit() {
    let batch = valid(1);
    let limit = BATCH_BYTES_MAX as isize;
    for (_, codec) in CODECS {
        let kafka = with_records_section(&batch, codec, &bomb(codec, 256));
        let (peak, err) = peak_of(|| error_of(&kafka, RECORD_MAX));
        assert_eq!(err.error_code, 10, "codec {codec}: {err}");
        assert!(
            peak <= limit + limit / 8,
            "codec {codec}: {peak} bytes held for a batch limit of {limit}"
        );
    }
    // A raw snappy block says its length first: refused before reading.
    let mut raw = Vec::new();
    let mut length = u64::from(BATCH_BYTES_MAX) * 4;
    while length >= 0x80 {
        raw.push(length as u8 | 0x80);
        length >>= 7;
    }
    raw.push(length as u8);
    raw.extend_from_slice(&[0; 64]);
    let kafka = with_records_section(&batch, 2, &raw);
    let (peak, err) = peak_of(|| error_of(&kafka, RECORD_MAX));
    assert_eq!(err.error_code, 10, "{err}");
    assert!(peak < 1 << 20, "{peak} bytes held for a refused raw block");
}

#[test]
fn compressed_records_cut_short_or_damaged_are_refused_without_a_panic() {
    let mut rng = klog::random::XorShift::new(0x636f_6d70_7265_7373);
    for (compression, codec) in CODECS {
        let batch = encode(&mixed_records(0, 60), compression);
        let section = &batch[61..];
        for cut in [0, 1, 10, section.len() / 2, section.len() - 1] {
            let kafka = with_records_section(&batch, codec, &section[..cut]);
            let err = error_of(&kafka, RECORD_MAX);
            assert!(
                [2, 87].contains(&err.error_code),
                "codec {codec}, cut at {cut}: {err}"
            );
        }
        for round in 0..300 {
            let mut damaged = section.to_vec();
            let at = (rng.next() % damaged.len() as u64) as usize;
            damaged[at] ^= 1 << (rng.next() % 8);
            let kafka = with_records_section(&batch, codec, &damaged);
            match store(&kafka, RECORD_MAX) {
                Ok(_) => drop(klog_records(&kafka)),
                Err(e) => {
                    assert!(
                        [2, 10, 87].contains(&e.error_code),
                        "codec {codec}, round {round}: {e}"
                    );
                }
            }
        }
    }
}
