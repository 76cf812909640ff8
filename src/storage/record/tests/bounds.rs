//! Boundaries and small accessors of the batch module, each as `cargo
//! mutants` found it untested.

use super::super::cursor::{put_varint, zigzag};
use super::super::kafka::{
    ATTRIBUTES_OFFSET, BATCH_LENGTH_OFFSET, LAST_OFFSET_DELTA_OFFSET, MAX_TIMESTAMP_OFFSET,
    RECORD_COUNT_OFFSET,
};
use super::*;
use crate::limits::HEADERS_PER_RECORD_MAX;

/// `good`'s header (its base offset, timestamps and producer) over
/// `records`, a records section written by hand, with `count` records.
fn with_section(good: &[u8], count: i32, records: &[u8]) -> Vec<u8> {
    let mut b = good[..BATCH_HEADER_BYTES].to_vec();
    b.extend_from_slice(records);
    let length = (b.len() - BATCH_LENGTH_PREFIX_BYTES) as i32;
    b[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    b[RECORD_COUNT_OFFSET..RECORD_COUNT_OFFSET + 4].copy_from_slice(&count.to_be_bytes());
    b[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4]
        .copy_from_slice(&(count - 1).to_be_bytes());
    seal(&mut b);
    b
}

/// A Kafka record with no key, an empty value and offset delta `delta`,
/// then `header_count` as its header count and `tail` (its headers).
fn raw_record(delta: u8, header_count: i32, tail: &[u8]) -> Vec<u8> {
    let mut body = vec![0, 0, delta << 1, 0x01, 0x00];
    put_varint(&mut body, zigzag(i64::from(header_count)));
    body.extend_from_slice(tail);
    let mut record = Vec::new();
    put_varint(&mut record, zigzag(body.len() as i64));
    record.extend_from_slice(&body);
    record
}

/// The sizes each format's readers start from: a Kafka header is 61
/// bytes and its smallest record 7; a legacy header 44 (40 in magic 1),
/// and its smallest record 7 too.
#[test]
fn each_format_says_its_header_and_smallest_batch() {
    assert_eq!(Format::Kafka.header_bytes(), 61);
    assert_eq!(Format::Legacy.header_bytes(), 44);
    assert_eq!(
        (Format::Kafka.name(), Format::Legacy.name()),
        ("kafka", "klog")
    );
    let smallest = build(&[(7, None, vec![], b"")]);
    assert_eq!(smallest.len(), Format::Kafka.batch_bytes_min());
    let mut legacy = legacy::BatchBuilder::new();
    legacy.push(7, None, &[], b"");
    assert_eq!(Format::Legacy.batch_bytes_min(), 40 + 7);
    assert_eq!(legacy.finish().len(), Format::Legacy.batch_bytes_min() + 4);
}

/// A batch's bytes, its records' positions in it, and what a record and
/// its headers show.
#[test]
fn a_batch_shows_its_bytes_and_where_each_record_is() {
    let bytes = build(&[
        (7, None, vec![(b"h", b"1"), (b"i", b"2")], b"first"),
        (8, Some(b"k"), vec![], b"second"),
    ]);
    let batch = decode(&bytes).unwrap();
    assert_eq!(batch.bytes(), &bytes[..]);
    let mut records = batch.records(MAX);
    assert_eq!(records.position_in_batch(), BATCH_HEADER_BYTES);
    let first = records.next().unwrap().unwrap();
    assert_eq!(
        records.position_in_batch(),
        BATCH_HEADER_BYTES + first.encoded_bytes as usize
    );
    let mut headers = first.headers();
    assert_eq!(headers.len(), 2);
    headers.next();
    assert_eq!(headers.len(), 1);
    let shown = format!("{first:?}");
    assert!(
        shown.contains("offset: 0")
            && shown.contains("\"first\"")
            && shown.contains("([104], [49])"),
        "{shown}"
    );
}

/// A builder says what it holds: its codec, its records, its size (the
/// finished batch's, uncompressed), and whether a timestamp fits its
/// deltas; a batch it finishes has no leader epoch (-1) until stamped; a
/// level is the codec's.
#[test]
fn a_builder_says_what_it_holds() {
    let mut b = BatchBuilder::new();
    assert!(b.is_empty());
    assert_eq!(b.len(), 0);
    assert_eq!(b.size_bytes(), BATCH_HEADER_BYTES);
    assert!(b.accepts_timestamp(i64::MAX) && b.accepts_timestamp(i64::MIN));
    b.push(-1, None, &[], b"one");
    b.push(5, None, &[], b"two");
    assert!(!b.is_empty());
    assert_eq!(b.len(), 2);
    assert!(b.accepts_timestamp(1_000));
    assert!(!b.accepts_timestamp(i64::MAX), "MAX - -1 overflows");
    let size = b.size_bytes();
    let batch = b.finish().to_vec();
    assert_eq!(size, batch.len());
    assert_eq!(decode(&batch).unwrap().header.leader_epoch, u32::MAX);
    assert_eq!(
        BatchBuilder::compressed(Codec::Zstd, None).codec(),
        Codec::Zstd
    );
    let text: Vec<Vec<u8>> = (0..200)
        .map(|i| format!("GET /a/{} 200 {}", i % 17, i * 31).into_bytes())
        .collect();
    let at = |level| {
        let mut b = BatchBuilder::compressed(Codec::Gzip, Some(level));
        for value in &text {
            b.push(7, None, &[], value);
        }
        b.finish().to_vec()
    };
    assert_ne!(at(1), at(9), "the level reaches the codec");
}

/// The header's framing checks at their bounds: a length exactly its
/// header's holds no record; an uncompressed batch's records take 7 bytes
/// each at least (exactly that passes); the batch limit and the record
/// limit hold at exactly their values.
#[test]
fn header_checks_hold_at_their_bounds() {
    let good = build(&[(7, None, vec![], b"x")]);
    let err = decode(&set_sealed(
        &good,
        BATCH_LENGTH_OFFSET,
        &49i32.to_be_bytes(),
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("out of range for its bytes"),
        "{err}"
    );
    // Two smallest records: 14 bytes for 2 passes; claimed as 3 does not.
    let two = [raw_record(0, 0, &[]), raw_record(1, 0, &[])].concat();
    assert_eq!(two.len(), 2 * RECORD_BYTES_MIN);
    let batch = with_section(&good, 2, &two);
    decode(&batch).unwrap().validate(MAX).unwrap();
    let err = decode(&with_section(&good, 3, &two)).unwrap_err();
    assert!(
        err.to_string().contains("out of range for its bytes"),
        "{err}"
    );
    // Exactly the batch limit decodes.
    assert!(Batch::decode(Format::Kafka, &batch, batch.len() as u32).is_ok());
    assert!(Batch::decode(Format::Kafka, &batch, batch.len() as u32 - 1).is_err());
    // Exactly BATCH_RECORDS_MAX records in the header passes its checks.
    let mut header = good[..BATCH_HEADER_BYTES].to_vec();
    let set = |h: &mut Vec<u8>, count: u32| {
        let length = 49 + 7 * count as i32;
        h[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
        h[RECORD_COUNT_OFFSET..RECORD_COUNT_OFFSET + 4].copy_from_slice(&count.to_be_bytes());
        h[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4]
            .copy_from_slice(&(count - 1).to_be_bytes());
    };
    set(&mut header, BATCH_RECORDS_MAX);
    kafka::decode_header(&header, BATCH_BYTES_MAX).unwrap();
    set(&mut header, BATCH_RECORDS_MAX + 1);
    let err = kafka::decode_header(&header, BATCH_BYTES_MAX).unwrap_err();
    assert!(err.to_string().contains("batch limit"), "{err}");
}

/// A record's header count is refused when negative, past the limit, or
/// more than its bytes can hold, before any header is read.
#[test]
fn a_record_header_count_is_checked_before_its_headers_are_read() {
    let good = build(&[(7, None, vec![], b"x")]);
    let many = vec![0u8; 2 * (HEADERS_PER_RECORD_MAX as usize + 1)];
    for (count, tail) in [(-1, &[][..]), (3, &[0, 0][..]), (1025, &many[..])] {
        let batch = with_section(&good, 1, &raw_record(0, count, tail));
        let err = decode(&batch).unwrap().validate(MAX).unwrap_err();
        assert!(
            err.to_string().contains("header count out of range"),
            "{count}: {err}"
        );
    }
    assert_eq!(HEADERS_PER_RECORD_MAX, 1024);
    let batch = with_section(&good, 1, &raw_record(0, 1, &[0, 0]));
    decode(&batch).unwrap().validate(MAX).unwrap();
}

/// A torn write's records: the smallest record (a length of 6) cut short
/// runs to the end; a length of 5 is no record at all.
#[test]
fn the_smallest_record_cut_short_is_a_cut() {
    let good = build(&[(7, None, vec![], b"x"), (7, None, vec![], b"y")]);
    let header = decode(&good).unwrap().header;
    let smallest = raw_record(0, 0, &[]);
    assert_eq!(smallest[0], zigzag(6) as u8);
    assert!(kafka::records_run_to_the_end(&smallest[..4], &header));
    let mut five = smallest.clone();
    five[0] = zigzag(5) as u8;
    assert!(!kafka::records_run_to_the_end(&five[..4], &header));
}

/// A batch cut short whose records hold the next batch's header (a
/// producer's bytes may) is still a cut: the CRC32C must match where
/// that header begins, too.
#[test]
fn a_next_header_inside_a_cut_batch_is_not_its_end() {
    let mut next = build(&[(7, None, vec![], b"n")]);
    stamp(&mut next, 1, 0);
    let mut value = b"before ".to_vec();
    value.extend_from_slice(&next[..BATCH_HEADER_BYTES]);
    value.extend_from_slice(&[b'z'; 200]);
    let batch = build(&[(7, None, vec![], &value)]);
    let cut = &batch[..batch.len() - 100];
    let header = kafka::decode_header(cut, BATCH_BYTES_MAX).unwrap();
    assert!(!kafka::ends_before(cut, &header));
    assert!(could_be_cut_short(Format::Kafka, cut));
}

/// The largest timestamp of a batch's records: a Kafka producer's wrong
/// `maxTimestamp` is what the log sets right, a legacy batch's is damage.
#[test]
fn a_wrong_max_timestamp_is_set_right_in_kafka_batches_and_refused_in_legacy_ones() {
    let good = build(&[(7, None, vec![], b"a"), (9, None, vec![], b"b")]);
    let wrong = set_sealed(&good, MAX_TIMESTAMP_OFFSET, &1i64.to_be_bytes());
    let mut scratch = Decompressed::default();
    assert_eq!(
        decode(&wrong).unwrap().max_timestamp_in(&mut scratch, MAX),
        Ok(9)
    );
    let mut legacy = legacy::BatchBuilder::new();
    legacy.push(7, None, &[], b"a");
    legacy.push(9, None, &[], b"b");
    let mut old = legacy.finish().to_vec();
    let batch = Batch::decode(Format::Legacy, &old, BATCH_BYTES_MAX).unwrap();
    assert_eq!(batch.max_timestamp_in(&mut scratch, MAX), Ok(9));
    old[legacy::MAX_TIMESTAMP_OFFSET] ^= 1;
    legacy::seal_header(&mut old);
    let batch = Batch::decode(Format::Legacy, &old, BATCH_BYTES_MAX).unwrap();
    assert!(batch.max_timestamp_in(&mut scratch, MAX).is_err());
}

/// As stored, an uncompressed batch's records are checked; a compressed
/// batch's, under its CRC32C, are not decompressed.
#[test]
fn a_stored_batch_is_checked_without_decompressing() {
    let good = build(&[(7, None, vec![], b"x")]);
    let bad = with_section(&good, 1, &raw_record(0, -1, &[]));
    assert!(decode(&bad).unwrap().check_stored(MAX).is_err());
    assert!(decode(&good).unwrap().check_stored(MAX).is_ok());
    let zstd = build_with(Codec::Zstd, &[(7, None, vec![], b"x")]);
    assert!(decode(&zstd).unwrap().check_stored(MAX).is_ok());
}

/// The time a batch keeps: a right `maxTimestamp` with the LogAppendTime
/// flag, or a wrong one without it, is set right too.
#[test]
fn create_time_is_set_when_either_the_time_or_the_flag_is_wrong() {
    let good = build(&[(7, None, vec![], b"a"), (9, None, vec![], b"b")]);
    let mut flagged = good.clone();
    flagged[ATTRIBUTES_OFFSET + 1] |= ATTR_LOG_APPEND_TIME as u8;
    seal(&mut flagged);
    assert!(set_create_time(&mut flagged, 9));
    assert_eq!(flagged, good);
    let mut late = set_sealed(&good, MAX_TIMESTAMP_OFFSET, &1i64.to_be_bytes());
    assert!(set_create_time(&mut late, 9));
    assert_eq!(late, good);
}
