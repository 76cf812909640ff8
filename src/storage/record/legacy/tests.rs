//! The legacy format's tests: what klog wrote before RecordBatch v2 still
//! reads as it did.

use super::super::{Batch, BatchHeader, Format};
use super::*;
use crate::limits::BATCH_BYTES_MAX;

const MAX: u32 = 1 << 20;

type Rec<'a> = (i64, Option<&'a [u8]>, Vec<(&'a [u8], &'a [u8])>, &'a [u8]);

fn build(records: &[Rec<'_>]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for (ts, key, headers, value) in records {
        b.push(*ts, *key, headers, value);
    }
    b.finish().to_vec()
}

#[test]
fn round_trip_keys_headers_and_negative_deltas() {
    let mut bytes = build(&[
        (1_000, None, vec![], b"a"),
        (999, Some(b"k"), vec![(b"h", b"v"), (b"", b"")], b""),
        (5_000_000, Some(b""), vec![], &[0u8; 300]),
    ]);
    set_base_offset(&mut bytes, 42);
    let batch = Batch::decode(Format::Legacy, &bytes, BATCH_BYTES_MAX).unwrap();
    assert_eq!(batch.header.base_offset, 42);
    assert_eq!(batch.header.record_count, 3);
    assert_eq!(batch.header.max_timestamp, 5_000_000);
    batch.validate(MAX).unwrap();
    let records: Vec<_> = batch.records(MAX).map(Result::unwrap).collect();
    assert_eq!(records[0].offset, 42);
    assert_eq!(records[0].key, None);
    assert_eq!(records[0].value, b"a");
    assert_eq!(records[1].timestamp, 999);
    assert_eq!(records[1].key, Some(&b"k"[..]));
    let headers: Vec<_> = records[1].headers().collect();
    assert_eq!(headers, vec![(&b"h"[..], &b"v"[..]), (&b""[..], &b""[..])]);
    assert_eq!(records[2].offset, 44);
    assert_eq!(records[2].key, Some(&b""[..]));
    assert_eq!(records[2].value.len(), 300);
    let sum: u32 = records.iter().map(|r| r.encoded_bytes).sum();
    assert_eq!(sum as usize + BATCH_HEADER_BYTES, bytes.len());
}

#[test]
fn overhead_is_under_nine_bytes_for_200_byte_values_in_batches_of_50() {
    let value = [b'x'; 200];
    let mut b = BatchBuilder::new();
    for i in 0..50 {
        b.push(1_700_000_000_000 + i / 10, None, &[], &value);
    }
    let len = b.finish().len();
    let overhead = (len - 50 * 200) as f64 / 50.0;
    assert!(overhead <= 9.0, "overhead {overhead} bytes per record");
    assert_eq!(BatchBuilder::record_size(None, &[], &value), 208);
}

#[test]
fn every_single_byte_flip_is_detected() {
    let bytes = build(&[
        (7, Some(b"key"), vec![(b"n", b"v")], b"value"),
        (8, None, vec![], b"x"),
    ]);
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut damaged = bytes.clone();
            damaged[i] ^= 1 << bit;
            let ok = Batch::decode(Format::Legacy, &damaged, BATCH_BYTES_MAX)
                .map_err(|_| ())
                .and_then(|b| b.validate(MAX).map_err(|_| ()));
            assert!(ok.is_err(), "flip of bit {bit} in byte {i} went unnoticed");
        }
    }
}

#[test]
fn every_cut_is_truncated_not_corrupt() {
    let bytes = build(&[(7, None, vec![], b"one"), (8, None, vec![], b"two")]);
    for cut in 0..bytes.len() {
        let err = Batch::decode(Format::Legacy, &bytes[..cut], BATCH_BYTES_MAX).unwrap_err();
        assert!(err.is_truncated(), "cut at {cut}: {err}");
    }
}

#[test]
fn limits_are_checked_before_use() {
    let bytes = build(&[(7, None, vec![], &[1u8; 100])]);
    let err = Batch::decode(Format::Legacy, &bytes, 64).unwrap_err();
    assert!(matches!(err, DecodeError::TooLarge { what: "batch", .. }));
    let batch = Batch::decode(Format::Legacy, &bytes, BATCH_BYTES_MAX).unwrap();
    let err = batch.records(50).next().unwrap().unwrap_err();
    assert!(matches!(err, DecodeError::TooLarge { what: "record", .. }));
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = crate::random::XorShift::new(0x9E37_79B9_7F4A_7C15);
    let mut next = || rng.next();
    let mut builder = BatchBuilder::new();
    for _ in 0..3 {
        builder.push(1, Some(b"k"), &[(b"a", b"b")], b"v");
    }
    let valid = builder.finish().to_vec();
    for round in 0..20_000 {
        let mut buf = if round % 2 == 0 {
            valid.clone()
        } else {
            vec![0u8; (next() % 200) as usize]
        };
        for _ in 0..(next() % 8 + 1) {
            if !buf.is_empty() {
                let i = (next() as usize) % buf.len();
                buf[i] = next() as u8;
            }
        }
        if round % 3 == 0 {
            // Give garbage a valid header CRC so that record decoding is reached.
            if buf.len() >= BATCH_HEADER_BYTES {
                seal_header(&mut buf);
            }
        }
        if let Ok(batch) = Batch::decode(Format::Legacy, &buf, BATCH_BYTES_MAX) {
            for r in batch.records(MAX).flatten() {
                let _ = r.headers().count();
            }
        }
        let _ = decode_record(&buf, 0, 0, MAX);
    }
}

/// The magic 1 form of a magic 2 batch: the header without its epoch.
fn to_v1(batch: &[u8]) -> Vec<u8> {
    let mut v1 = batch[..LEADER_EPOCH_OFFSET].to_vec();
    v1.extend_from_slice(&[0; 4]);
    v1.extend_from_slice(&batch[BATCH_HEADER_BYTES..]);
    v1[MAGIC_OFFSET] = MAGIC_V1;
    let length = u32_at(&v1, BATCH_LENGTH_OFFSET) - 4;
    put_u32(&mut v1, BATCH_LENGTH_OFFSET, length);
    seal_header(&mut v1);
    v1
}

#[test]
fn magic_1_reads_as_epoch_0_with_the_records_of_magic_2() {
    let mut v2 = build(&[
        (7, Some(b"k"), vec![(b"h", b"v")], b"one"),
        (9, None, vec![], b"two"),
    ]);
    set_base_offset(&mut v2, 5);
    let mut v1 = to_v1(&v2);
    assert_eq!(v1.len() + 4, v2.len());
    let old = Batch::decode(Format::Legacy, &v1, BATCH_BYTES_MAX).unwrap();
    assert_eq!((old.header.magic, old.header.leader_epoch), (1, 0));
    assert_eq!(old.header.header_bytes(), 40);
    old.validate(MAX).unwrap();
    let old_records: Vec<_> = old.records(MAX).map(Result::unwrap).collect();
    let new = Batch::decode(Format::Legacy, &v2, BATCH_BYTES_MAX).unwrap();
    let new_records: Vec<_> = new.records(MAX).map(Result::unwrap).collect();
    assert_eq!(old_records, new_records);
    // Offsets are assigned to magic 1 in place too (recovery, tests).
    set_base_offset(&mut v1, 6);
    assert_eq!(
        BatchHeader::decode(Format::Legacy, &v1, BATCH_BYTES_MAX)
            .unwrap()
            .base_offset,
        6
    );
    let mut out = v2.clone();
    stamp(&mut out, 9, 0x0102_0304);
    let stamped = Batch::decode(Format::Legacy, &out, BATCH_BYTES_MAX).unwrap();
    assert_eq!(stamped.header.leader_epoch, 0x0102_0304);
    assert_eq!(stamped.header.base_offset, 9);
    assert_eq!(&out[36..40], &[4, 3, 2, 1]);
    stamped.validate(MAX).unwrap();
}

#[test]
fn a_magic_other_than_1_or_2_is_a_decode_error() {
    let v2 = build(&[(7, None, vec![], b"x")]);
    for magic in [0u8, 3, 0xff] {
        for base in [v2.clone(), to_v1(&v2)] {
            let mut bad = base;
            bad[MAGIC_OFFSET] = magic;
            let err = Batch::decode(Format::Legacy, &bad, BATCH_BYTES_MAX).unwrap_err();
            assert!(
                matches!(err, DecodeError::CrcMismatch { .. }),
                "{magic}: {err}"
            );
            if bad.len() >= BATCH_HEADER_BYTES {
                seal_header(&mut bad);
            }
            let err = Batch::decode(Format::Legacy, &bad, BATCH_BYTES_MAX).unwrap_err();
            assert_eq!(
                err,
                DecodeError::Malformed("batch: unknown magic"),
                "{magic}"
            );
        }
    }
}

/// An old segment's batches are served to every client as Kafka batches
/// with the same offsets, epoch and records.
#[test]
fn legacy_batches_convert_to_kafka_batches_with_the_same_records() {
    let mut one = build(&[
        (7, Some(b"k"), vec![(b"h", b"v")], b"one"),
        (9, None, vec![], b""),
    ]);
    stamp(&mut one, 5, 3);
    let mut two = build(&[(-4, Some(b""), vec![], b"two")]);
    stamp(&mut two, 7, 4);
    let mut v1 = to_v1(&two);
    set_base_offset(&mut v1, 7);
    for second in [two, v1] {
        let legacy = [one.clone(), second.clone()].concat();
        let mut out = vec![9];
        // Cut anywhere inside the second batch: the first alone converts.
        let done = to_kafka(&legacy[..legacy.len() - 1], &mut out).unwrap();
        assert_eq!(done, one.len());
        out.truncate(1);
        assert_eq!(to_kafka(&legacy, &mut out).unwrap(), legacy.len());
        let kafka = &out[1..];
        let mut olds = Vec::new();
        let mut news = Vec::new();
        let mut at = 0;
        for batch in [&one, &second] {
            let old = Batch::decode(Format::Legacy, batch, BATCH_BYTES_MAX).unwrap();
            let new = Batch::decode(Format::Kafka, &kafka[at..], BATCH_BYTES_MAX).unwrap();
            at += new.total_bytes();
            assert_eq!(new.header.base_offset, old.header.base_offset);
            assert_eq!(new.header.leader_epoch, old.header.leader_epoch);
            assert_eq!(new.header.max_timestamp, old.header.max_timestamp);
            new.validate(MAX).unwrap();
            for r in old.records(MAX) {
                let r = r.unwrap();
                olds.push((
                    r.offset,
                    r.timestamp,
                    r.key,
                    r.value,
                    r.headers().collect::<Vec<_>>(),
                ));
            }
            for r in new.records(MAX) {
                let r = r.unwrap();
                news.push((
                    r.offset,
                    r.timestamp,
                    r.key,
                    r.value,
                    r.headers().collect::<Vec<_>>(),
                ));
            }
        }
        assert_eq!(at, kafka.len());
        assert_eq!(olds, news);
    }
    // A damaged record is an error, and nothing is appended.
    let mut damaged = one.clone();
    *damaged.last_mut().unwrap() ^= 1;
    let mut out = vec![9];
    assert!(to_kafka(&damaged, &mut out).is_err());
    assert_eq!(out, [9]);
}

/// A legacy batch within the batch limit whose Kafka form is past it
/// (1,048,576 records of 120 bytes: each costs 2 to 4 bytes more as Kafka
/// records) converts to two Kafka batches that every reader takes, with
/// the same records at the same offsets. As a review found it, it became
/// one batch of 137,355,261 bytes: refused by every reader (a consumer, a
/// follower), so old data that verified clean could not be read past it.
#[test]
fn a_legacy_batch_near_the_limit_converts_to_kafka_batches_within_it() {
    let mut b = BatchBuilder::new();
    let value = [b'v'; 120];
    for i in 0..crate::limits::BATCH_RECORDS_MAX {
        b.push(
            1_700_000_000_000 + i64::from(i / 100_000),
            None,
            &[],
            &value,
        );
    }
    let mut legacy = b.finish().to_vec();
    set_base_offset(&mut legacy, 1000);
    assert!(
        legacy.len() as u64 <= u64::from(BATCH_BYTES_MAX),
        "{}",
        legacy.len()
    );
    let mut out = Vec::new();
    assert_eq!(to_kafka(&legacy, &mut out), Ok(legacy.len()));
    let (mut at, mut next, mut batches) = (0, 1000, 0);
    while at < out.len() {
        let batch = Batch::decode(Format::Kafka, &out[at..], BATCH_BYTES_MAX).unwrap();
        assert_eq!(batch.header.base_offset, next);
        for r in batch.records(MAX) {
            let r = r.unwrap();
            let i = (next - 1000) as i64;
            assert_eq!(
                (r.offset, r.timestamp),
                (next, 1_700_000_000_000 + i / 100_000)
            );
            assert_eq!(r.value, value);
            next += 1;
        }
        at += batch.total_bytes();
        batches += 1;
    }
    assert_eq!(
        (next, batches),
        (1000 + u64::from(crate::limits::BATCH_RECORDS_MAX), 2)
    );
}

/// Rewrites a magic-2 header's `field` (little-endian u32) and seals the
/// header's CRC again.
fn set_sealed(batch: &mut [u8], field: usize, value: u32) {
    batch[field..field + 4].copy_from_slice(&value.to_le_bytes());
    let crc_at = BATCH_HEADER_BYTES - 4;
    let crc = crc32fast::hash(&batch[..crc_at]);
    batch[crc_at..BATCH_HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
}

/// A header alone decodes (it needs no record), names no producer, and
/// one byte less is cut short.
#[test]
fn a_header_alone_decodes_and_names_no_producer() {
    let bytes = build(&[(7, None, vec![], b"v")]);
    let header = decode_header(&bytes[..BATCH_HEADER_BYTES], BATCH_BYTES_MAX).unwrap();
    let producer = (
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
    );
    assert_eq!(producer, (-1, -1, -1));
    let err = decode_header(&bytes[..BATCH_HEADER_BYTES - 1], BATCH_BYTES_MAX).unwrap_err();
    assert!(err.is_truncated(), "{err}");
}

/// The record count is 1 to `BATCH_RECORDS_MAX`, the length at least what
/// that many of the smallest records take (exactly that is enough), and
/// the batch at most the limit asked (exactly it is enough).
#[test]
fn header_counts_lengths_and_limits_at_their_bounds() {
    let bytes = build(&[(7, None, vec![], b"v")]);
    for count in [0, BATCH_RECORDS_MAX + 1] {
        let mut bad = bytes.clone();
        set_sealed(&mut bad, RECORD_COUNT_OFFSET, count);
        let err = decode_header(&bad, BATCH_BYTES_MAX).unwrap_err();
        assert!(
            matches!(err, DecodeError::Malformed(m) if m.contains("count")),
            "{count}: {err}"
        );
    }
    // Attributes or the reserved bytes, either alone, are refused.
    for at in [ATTRIBUTES_OFFSET, RESERVED_OFFSET] {
        let mut bad = bytes.clone();
        bad[at] = 1;
        let crc_at = BATCH_HEADER_BYTES - 4;
        let crc = crc32fast::hash(&bad[..crc_at]);
        bad[crc_at..BATCH_HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
        let err = decode_header(&bad, BATCH_BYTES_MAX).unwrap_err();
        assert!(
            matches!(err, DecodeError::Malformed(m) if m.contains("attributes")),
            "{at}: {err}"
        );
    }
    let header_length = (BATCH_HEADER_BYTES - BATCH_LENGTH_PREFIX_BYTES) as u32;
    for count in [1, 5, BATCH_RECORDS_MAX] {
        let least = header_length + count * RECORD_BYTES_MIN as u32;
        let mut b = bytes.clone();
        set_sealed(&mut b, RECORD_COUNT_OFFSET, count);
        set_sealed(&mut b, BATCH_LENGTH_OFFSET, least);
        assert!(
            decode_header(&b, BATCH_BYTES_MAX).is_ok(),
            "{count} at least"
        );
        set_sealed(&mut b, BATCH_LENGTH_OFFSET, least - 1);
        let err = decode_header(&b, BATCH_BYTES_MAX).unwrap_err();
        assert!(
            matches!(err, DecodeError::Malformed(m) if m.contains("length")),
            "{count}: {err}"
        );
    }
    let total = bytes.len() as u32;
    assert!(decode_header(&bytes, total).is_ok());
    let err = decode_header(&bytes, total - 1).unwrap_err();
    assert!(
        matches!(err, DecodeError::TooLarge { what: "batch", .. }),
        "{err}"
    );
}

/// A record of exactly the record limit reads; one byte over is too
/// large. A record of exactly the most headers reads.
#[test]
fn records_at_the_record_and_header_limits_read() {
    let bytes = build(&[(7, Some(b"k"), vec![], &[1u8; 300])]);
    let record_bytes = (bytes.len() - BATCH_HEADER_BYTES) as u32;
    let batch = Batch::decode(Format::Legacy, &bytes, BATCH_BYTES_MAX).unwrap();
    assert!(batch.records(record_bytes).all(|r| r.is_ok()));
    let err = batch.records(record_bytes - 1).next().unwrap().unwrap_err();
    assert!(
        matches!(err, DecodeError::TooLarge { what: "record", .. }),
        "{err}"
    );
    let most = crate::limits::HEADERS_PER_RECORD_MAX as usize;
    let headers: Vec<(&[u8], &[u8])> = vec![(b"h", b"v"); most];
    let bytes = build(&[(7, None, headers, b"v")]);
    let batch = Batch::decode(Format::Legacy, &bytes, BATCH_BYTES_MAX).unwrap();
    let record = batch.records(MAX).next().unwrap().unwrap();
    assert_eq!(record.headers().count(), most);
}

/// The legacy builder says what it holds, as the Kafka one does: its
/// records, its size (the finished batch's), what one more record adds
/// (exactly), whether a timestamp fits its deltas; cleared, it holds
/// nothing.
#[test]
fn a_legacy_builder_says_what_it_holds() {
    let mut b = BatchBuilder::new();
    assert!(b.is_empty());
    assert_eq!((b.len(), b.size_bytes()), (0, BATCH_HEADER_BYTES));
    assert!(b.accepts_timestamp(i64::MAX) && b.accepts_timestamp(i64::MIN));
    let headers: [(&[u8], &[u8]); 1] = [(b"h", b"v")];
    b.push(-1, Some(b"k"), &headers, b"one");
    let before = b.size_bytes();
    b.push(-1, None, &[], &[7u8; 300]);
    assert_eq!(
        b.size_bytes() - before,
        BatchBuilder::record_size(None, &[], &[7u8; 300]),
        "a record of the first timestamp adds what record_size says"
    );
    // Across the length's varint growing a byte (at 128).
    for len in 100..140 {
        let mut one = BatchBuilder::new();
        one.push(-1, None, &[], b"first");
        let before = one.size_bytes();
        one.push(-1, None, &[], &vec![7u8; len]);
        let size = BatchBuilder::record_size(None, &[], &vec![7u8; len]);
        assert_eq!(one.size_bytes() - before, size, "{len}");
    }
    assert!(!b.is_empty());
    assert_eq!(b.len(), 2);
    assert!(b.accepts_timestamp(1_000));
    assert!(!b.accepts_timestamp(i64::MAX), "MAX - -1 overflows");
    let size = b.size_bytes();
    assert_eq!(size, b.finish().len());
    b.clear();
    assert!(b.is_empty() && b.size_bytes() == BATCH_HEADER_BYTES);
    b.push(3, None, &[], b"again");
    let batch = Batch::decode(Format::Legacy, b.finish(), BATCH_BYTES_MAX).unwrap();
    assert_eq!(batch.header.record_count, 1);
}

/// Recovery keeps the first records of a torn legacy batch by rewriting
/// its header's count, length and greatest timestamp: the batch then reads
/// as just those records.
#[test]
fn a_batch_extent_rewritten_reads_as_its_first_records() {
    let records: [Rec<'_>; 3] = [
        (5, None, vec![], b"a"),
        (9, None, vec![], b"bb"),
        (7, None, vec![], b"c"),
    ];
    let bytes = build(&records);
    let records_bytes = (build(&records[..2]).len() - BATCH_HEADER_BYTES) as u32;
    let mut kept = bytes[..BATCH_HEADER_BYTES + records_bytes as usize].to_vec();
    set_batch_extent(&mut kept, 2, records_bytes, 9);
    let batch = Batch::decode(Format::Legacy, &kept, BATCH_BYTES_MAX).unwrap();
    assert_eq!(
        (batch.header.record_count, batch.header.max_timestamp),
        (2, 9)
    );
    assert_eq!(batch.total_bytes(), kept.len());
    let values: Vec<_> = batch.records(MAX).map(|r| r.unwrap().value).collect();
    assert_eq!(values, [&b"a"[..], b"bb"]);
}

/// An ordinary legacy batch, even of large records, converts to one Kafka
/// batch: it splits only near the batch limit.
#[test]
fn a_legacy_batch_of_large_records_converts_to_one_kafka_batch() {
    let value = vec![b'v'; 8 << 20];
    let bytes = build(&[(5, None, vec![], &value), (6, None, vec![], &value)]);
    let mut kafka = Vec::new();
    to_kafka(&bytes, &mut kafka).unwrap();
    let batch = Batch::decode(Format::Kafka, &kafka, BATCH_BYTES_MAX).unwrap();
    assert_eq!(batch.total_bytes(), kafka.len(), "one batch");
    assert_eq!(batch.header.record_count, 2);
}

/// A legacy batch whose Kafka form, counted as the conversion counts it
/// (each record's size with 18 bytes of room for its deltas' varints),
/// comes to the batch limit exactly converts to one Kafka batch: it
/// splits only past the limit.
#[test]
fn a_legacy_batch_whose_kafka_form_is_the_limit_converts_to_one_batch() {
    use super::super::BatchBuilder as KafkaBuilder;
    let limit = BATCH_BYTES_MAX as usize;
    let first = vec![b'a'; (64 << 20) - 60];
    let mut kafka = KafkaBuilder::new();
    kafka.push(5, None, &[], &first);
    let room = limit - kafka.size_bytes() - 18;
    let mut len = room;
    while KafkaBuilder::record_size(None, &[], &vec![0; len]) > room {
        len -= 1;
    }
    let second = vec![b'b'; len];
    assert_eq!(KafkaBuilder::record_size(None, &[], &second), room);
    let bytes = build(&[(5, None, vec![], &first), (6, None, vec![], &second)]);
    assert!(bytes.len() <= limit, "{}", bytes.len());
    let mut out = Vec::new();
    assert_eq!(to_kafka(&bytes, &mut out), Ok(bytes.len()));
    let batch = Batch::decode(Format::Kafka, &out, BATCH_BYTES_MAX).unwrap();
    assert_eq!(batch.total_bytes(), out.len(), "one batch");
    assert_eq!(batch.header.record_count, 2);
}
