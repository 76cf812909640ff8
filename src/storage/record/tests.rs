//! Kafka RecordBatch v2 as klog stores it: built, stamped, decoded,
//! compressed, and refused when damaged.

use super::kafka::{
    ATTRIBUTES_OFFSET, BATCH_LENGTH_OFFSET, CRC_OFFSET, LAST_OFFSET_DELTA_OFFSET, MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET, RECORD_COUNT_OFFSET,
};
use super::*;

const MAX: u32 = 1 << 20;

type Rec<'a> = (i64, Option<&'a [u8]>, Vec<(&'a [u8], &'a [u8])>, &'a [u8]);

fn build_with(codec: Codec, records: &[Rec<'_>]) -> Vec<u8> {
    let mut b = BatchBuilder::compressed(codec, None);
    for (ts, key, headers, value) in records {
        b.push(*ts, *key, headers, value);
    }
    b.finish().to_vec()
}

fn build(records: &[Rec<'_>]) -> Vec<u8> {
    build_with(Codec::None, records)
}

/// Recomputes a batch's CRC32C after a test changed it on purpose.
fn seal(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

fn decode(bytes: &[u8]) -> Result<Batch<'_>, DecodeError> {
    Batch::decode(Format::Kafka, bytes, BATCH_BYTES_MAX)
}

#[test]
fn round_trip_keys_headers_and_negative_deltas_with_every_codec() {
    let records: &[Rec<'_>] = &[
        (1_000, None, vec![], b"a"),
        (999, Some(b"k"), vec![(b"h", b"v"), (b"", b"")], b""),
        (5_000_000, Some(b""), vec![], &[0u8; 300]),
    ];
    for codec in Codec::ALL {
        let mut bytes = build_with(codec, records);
        stamp(&mut bytes, 42, 7);
        let batch = decode(&bytes).unwrap();
        let h = batch.header;
        assert_eq!((h.base_offset, h.leader_epoch, h.record_count), (42, 7, 3));
        assert_eq!((h.max_timestamp, h.base_timestamp), (5_000_000, 1_000));
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (-1, -1, -1)
        );
        assert_eq!((h.codec(), h.next_offset()), (codec, 45));
        let mut scratch = Decompressed::default();
        batch.validate_in(&mut scratch, MAX).unwrap();
        let records: Vec<_> = batch
            .records_in(&mut scratch, MAX)
            .unwrap()
            .map(Result::unwrap)
            .collect();
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
        if codec == Codec::None {
            let sum: u32 = records.iter().map(|r| r.encoded_bytes).sum();
            assert_eq!(sum as usize + BATCH_HEADER_BYTES, bytes.len());
        } else {
            let mut plain = batch.records(MAX);
            assert!(plain.next().unwrap().is_err(), "{codec} read as plain");
            assert!(plain.next().is_none());
        }
    }
}

/// The log's stamp writes the two fields the CRC32C leaves out, and
/// nothing else.
#[test]
fn a_stamp_changes_the_offset_and_epoch_only() {
    let built = build(&[(7, Some(b"k"), vec![], b"v"), (8, None, vec![], b"w")]);
    let mut stamped = built.clone();
    stamp(&mut stamped, 0x0102_0304_0506_0708, 0x0a0b_0c0d);
    assert_eq!(&stamped[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(&stamped[12..16], &[0xa, 0xb, 0xc, 0xd]);
    assert_eq!(&stamped[8..12], &built[8..12]);
    assert_eq!(&stamped[16..], &built[16..]);
    decode(&stamped).unwrap().validate(MAX).unwrap();
}

#[test]
fn whole_batches_len_stops_before_a_batch_the_bytes_cut_short() {
    let one = build(&[(1, None, vec![], b"a"), (2, None, vec![], b"bb")]);
    let two = build(&[(3, Some(b"k"), vec![], b"ccc")]);
    let bytes = [one.clone(), two].concat();
    assert_eq!(whole_batches_len(Format::Kafka, &bytes), bytes.len());
    assert_eq!(whole_batches_len(Format::Kafka, &[]), 0);
    for cut in one.len()..bytes.len() {
        assert_eq!(whole_batches_len(Format::Kafka, &bytes[..cut]), one.len());
    }
    for cut in 0..one.len() {
        assert_eq!(whole_batches_len(Format::Kafka, &bytes[..cut]), 0);
    }
    let mut huge = one.clone();
    huge.extend_from_slice(&[0; 8]);
    huge.extend_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(whole_batches_len(Format::Kafka, &huge), one.len());
}

/// The paper's figure, for Kafka's format: 200-byte values in batches of
/// 50 cost at most 11 bytes each.
#[test]
fn overhead_is_at_most_eleven_bytes_for_200_byte_values_in_batches_of_50() {
    let value = [b'x'; 200];
    let mut b = BatchBuilder::new();
    for i in 0..50 {
        b.push(1_700_000_000_000 + i / 10, None, &[], &value);
    }
    let len = b.finish().len();
    let overhead = (len - 50 * 200) as f64 / 50.0;
    assert!(overhead <= 11.0, "overhead {overhead} bytes per record");
    assert_eq!(BatchBuilder::record_size(None, &[], &value), 209);
}

#[test]
fn every_single_bit_flip_is_detected() {
    for codec in [Codec::None, Codec::Zstd] {
        let mut bytes = build_with(
            codec,
            &[
                (7, Some(b"key"), vec![(b"n", b"v")], b"value"),
                (8, None, vec![], b"x"),
            ],
        );
        stamp(&mut bytes, 0, 0);
        // Bytes 0..8 and 12..16 are the stamped fields, judged by the log.
        for i in (8..12).chain(16..bytes.len()) {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[i] ^= 1 << bit;
                let ok = decode(&damaged)
                    .map_err(|_| ())
                    .and_then(|b| b.validate(MAX).map_err(|_| ()));
                assert!(
                    ok.is_err(),
                    "{codec}: flip of bit {bit} in byte {i} unnoticed"
                );
            }
        }
    }
}

#[test]
fn every_cut_is_truncated_not_corrupt() {
    let bytes = build(&[(7, None, vec![], b"one"), (8, None, vec![], b"two")]);
    for cut in 0..bytes.len() {
        let err = decode(&bytes[..cut]).unwrap_err();
        assert!(err.is_truncated(), "cut at {cut}: {err}");
    }
}

#[test]
fn limits_are_checked_before_use() {
    let bytes = build(&[(7, None, vec![], &[1u8; 100])]);
    let err = Batch::decode(Format::Kafka, &bytes, 64).unwrap_err();
    assert!(matches!(err, DecodeError::TooLarge { what: "batch", .. }));
    let batch = decode(&bytes).unwrap();
    let err = batch.records(50).next().unwrap().unwrap_err();
    assert!(matches!(err, DecodeError::TooLarge { what: "record", .. }));
    // A record of exactly the limit passes.
    let size = batch.records(MAX).next().unwrap().unwrap().encoded_bytes;
    assert!(batch.records(size).next().unwrap().is_ok());
    assert!(batch.records(size - 1).next().unwrap().is_err());
}

/// A batch of two records, for the tests that change its header.
fn two_records() -> Vec<u8> {
    build(&[
        (7, None, vec![], b"one, long"),
        (8, None, vec![], b"two, long"),
    ])
}

/// `good` with `v` written at `at`, its CRC32C made right again.
fn set_sealed(good: &[u8], at: usize, v: &[u8]) -> Vec<u8> {
    let mut b = good.to_vec();
    b[at..at + v.len()].copy_from_slice(v);
    seal(&mut b);
    b
}

/// Header fields a producer could get wrong, each with a valid CRC32C:
/// refused by the header decoder before any record is read.
#[test]
fn header_fields_that_do_not_add_up_are_refused() {
    let good = two_records();
    let set = |at: usize, v: &[u8]| set_sealed(&good, at, v);
    let cases = [
        (set(MAGIC_OFFSET, &[1]), "unsupported magic 1"),
        (set(MAGIC_OFFSET, &[0]), "unsupported magic 0"),
        (set(MAGIC_OFFSET, &[3]), "malformed batch: unknown magic"),
        (
            set(ATTRIBUTES_OFFSET, &[0, 5]),
            "unsupported compression type 5",
        ),
        (
            set(ATTRIBUTES_OFFSET, &[0, 7]),
            "unsupported compression type 7",
        ),
        (
            set(ATTRIBUTES_OFFSET, &[0, 0x80]),
            "malformed batch: unknown attributes",
        ),
        (
            set(ATTRIBUTES_OFFSET, &[1, 0]),
            "malformed batch: unknown attributes",
        ),
        (
            set(RECORD_COUNT_OFFSET, &0i32.to_be_bytes()),
            "record count",
        ),
        (
            set(RECORD_COUNT_OFFSET, &(-1i32).to_be_bytes()),
            "record count",
        ),
        (
            set(RECORD_COUNT_OFFSET, &3i32.to_be_bytes()),
            "last offset delta",
        ),
        (
            set(LAST_OFFSET_DELTA_OFFSET, &0i32.to_be_bytes()),
            "last offset delta",
        ),
        (
            set(LAST_OFFSET_DELTA_OFFSET, &(-1i32).to_be_bytes()),
            "last offset delta",
        ),
        (
            set(BATCH_LENGTH_OFFSET, &(-1i32).to_be_bytes()),
            "length too small",
        ),
        (
            set(BATCH_LENGTH_OFFSET, &48i32.to_be_bytes()),
            "length too small",
        ),
    ];
    for (bytes, expected) in cases {
        let err = decode(&bytes).unwrap_err().to_string();
        assert!(err.contains(expected), "{err:?}, expected {expected:?}");
    }
}

/// Counts and offset deltas that the header's checks let through, the
/// records' catch; a compacted batch's larger last offset delta is read.
#[test]
fn records_that_do_not_add_up_are_refused_and_a_gap_at_the_end_is_read() {
    let good = two_records();
    let set = |at: usize, v: &[u8]| set_sealed(&good, at, v);
    // One record claimed, two sent: the records do not add up.
    let mut one = set(RECORD_COUNT_OFFSET, &1i32.to_be_bytes());
    one[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4]
        .copy_from_slice(&0i32.to_be_bytes());
    seal(&mut one);
    let err = decode(&one).unwrap().validate(MAX).unwrap_err();
    assert!(err.to_string().contains("offset delta") || err.to_string().contains("count"));
    // A larger last offset delta (a compacted batch) is read; a record
    // offset past it is not.
    let gap = set(LAST_OFFSET_DELTA_OFFSET, &5i32.to_be_bytes());
    let batch = decode(&gap).unwrap();
    assert_eq!(batch.header.next_offset(), 6);
    batch.validate(MAX).unwrap();
}

/// Records whose offset deltas repeat, fall or pass the last one are
/// refused.
#[test]
fn offset_deltas_must_increase_within_the_batch() {
    let mut b = BatchBuilder::new();
    b.push(1, None, &[], b"a");
    b.push(1, None, &[], b"b");
    let good = b.finish().to_vec();
    // Record 2's offset delta is at: header, record 1 (its length byte and
    // body), then record 2's length byte, attributes, timestamp delta.
    let first = usize::from(good[BATCH_HEADER_BYTES] >> 1) + 1;
    let at = BATCH_HEADER_BYTES + first + 3;
    assert_eq!(good[at], 2, "record 2's offset delta, zigzag 1");
    for delta in [0u8, 4] {
        let mut bad = good.clone();
        bad[at] = delta;
        seal(&mut bad);
        let err = decode(&bad).unwrap().validate(MAX).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Malformed("record: offset delta out of order")
        );
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = crate::random::XorShift::new(0x9E37_79B9_7F4A_7C15);
    let mut next = || rng.next();
    let rec: Rec<'_> = (1, Some(b"k"), vec![(b"a", b"b")], b"v");
    let three = [rec.clone(), rec.clone(), rec];
    let valid = Codec::ALL.map(|c| build_with(c, &three));
    let mut scratch = Decompressed::default();
    for round in 0..20_000 {
        let mut buf = if round % 2 == 0 {
            valid[(next() % 5) as usize].clone()
        } else {
            vec![0u8; (next() % 200) as usize]
        };
        for _ in 0..(next() % 8 + 1) {
            if !buf.is_empty() {
                let i = (next() as usize) % buf.len();
                buf[i] = next() as u8;
            }
        }
        if round % 3 == 0 && buf.len() >= BATCH_HEADER_BYTES {
            // A valid CRC32C, so that record decoding is reached.
            seal(&mut buf);
        }
        if let Ok(batch) = decode(&buf) {
            if let Ok(records) = batch.records_in(&mut scratch, MAX) {
                for r in records.flatten() {
                    let _ = r.headers().count();
                }
            }
        }
    }
}

/// A compressed batch that decompresses past klog's batch limit is
/// refused having held at most that much.
#[test]
fn a_decompression_bomb_is_refused() {
    let value = vec![0u8; 1 << 20];
    let mut b = BatchBuilder::compressed(Codec::Zstd, Some(1));
    for _ in 0..(BATCH_BYTES_MAX as usize / value.len() + 1) {
        b.push(1, None, &[], &value);
    }
    let bomb = b.finish().to_vec();
    assert!(bomb.len() < 1 << 20, "{}", bomb.len());
    let batch = decode(&bomb).unwrap();
    let err = batch.validate(MAX).unwrap_err();
    assert!(matches!(err, DecodeError::TooLarge { .. }), "{err}");
}

/// A batch cut short by the end of a file is a torn write only if what is
/// there of it reads as its start; a length field damaged to claim more
/// than the file holds is not (the bytes after it are later batches).
#[test]
fn a_batch_cut_short_is_told_from_a_damaged_length() {
    let records: Vec<Rec<'_>> = (0..20)
        .map(|i| (i, Some(&b"key"[..]), vec![], &b"a value of some length"[..]))
        .collect();
    for codec in Codec::ALL {
        let one = build_with(codec, &records);
        let mut two = build_with(codec, &records[..3]);
        stamp(&mut two, 20, 0);
        // Every cut of a batch: what a writer cut short leaves.
        for cut in BATCH_HEADER_BYTES..one.len() {
            assert!(
                could_be_cut_short(Format::Kafka, &one[..cut]),
                "{codec}: cut at {cut}"
            );
        }
        assert!(!could_be_cut_short(Format::Kafka, &one), "{codec}: whole");
        // A length raised past the file's end, another batch behind it.
        for more in [1u32, 7, 100, 5000] {
            let mut bad = [one.clone(), two.clone()].concat();
            let length = u32::from_be_bytes(bad[8..12].try_into().unwrap());
            let claimed = length + (two.len() as u32) + more;
            bad[8..12].copy_from_slice(&claimed.to_be_bytes());
            // Its CRC32C matches where the next batch begins: every codec
            // is told.
            assert!(
                !could_be_cut_short(Format::Kafka, &bad),
                "{codec}: length raised by {more}"
            );
            // Without the batch behind it (the file ends where the batch
            // does), a CRC32C matching at the end proves nothing (a
            // producer can make one match where a tear may fall): the
            // records, or the stream that holds them, tell.
            let alone = &bad[..one.len()];
            assert!(
                !could_be_cut_short(Format::Kafka, alone),
                "{codec}: length raised by {more}, alone"
            );
        }
    }
    // A header cut short cannot be judged; a legacy batch is judged by
    // recovery's own rules.
    assert!(could_be_cut_short(Format::Kafka, &[0; 10]));
    assert!(could_be_cut_short(Format::Legacy, &[1; 100]));
}

/// A cut where a compressed stream's block, frame or member ends leaves a
/// stream that ends (or, for lz4, a frame whose blocks end but has no end
/// mark): the records it decodes to, fewer than the batch's, tell the
/// cut from a damaged length. Streams of two frames (members) here, split
/// inside a record and where one ends, and
/// snappy's of several blocks, as producers may send them.
#[test]
fn a_cut_where_a_compressed_block_ends_is_a_cut() {
    let values: Vec<Vec<u8>> = (0..200u32)
        .map(|i| {
            format!("GET /item/{i} HTTP/1.1 200 {}", i * 7919)
                .repeat(12)
                .into_bytes()
        })
        .collect();
    let records: Vec<Rec<'_>> = values.iter().map(|v| (7, None, vec![], &v[..])).collect();
    let plain = build(&records);
    let section = &plain[BATCH_HEADER_BYTES..];
    assert!(section.len() > 64 * 1024, "{}", section.len());
    // Where the records of the first half end: a unit ending there holds
    // whole records only, fewer than the batch's.
    let mut between = 0;
    while between < section.len() / 2 {
        let (zigzag, used) = varint(&section[between..]);
        between += used + (zigzag >> 1) as usize;
    }
    let splits = [section.len() / 2 + 1, between];
    let cases = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd]
        .into_iter()
        .flat_map(|codec| splits.map(|split| (codec, split)));
    for (codec, split) in cases {
        let mut stream = Vec::new();
        let mut ends = Vec::new();
        if codec == Codec::Snappy {
            compression::compress(codec, None, section, &mut stream);
            // Xerial blocks: a 16-byte header, then each after its length.
            let mut at = 16;
            while at < stream.len() {
                at += 4 + u32::from_be_bytes(stream[at..at + 4].try_into().unwrap()) as usize;
                ends.push(at);
            }
        } else {
            for half in [&section[..split], &section[split..]] {
                compression::compress(codec, None, half, &mut stream);
                ends.push(stream.len());
            }
        }
        let mut batch = plain[..BATCH_HEADER_BYTES].to_vec();
        batch[ATTRIBUTES_OFFSET + 1] = codec.bits() as u8;
        batch.extend_from_slice(&stream);
        let length = (batch.len() - BATCH_LENGTH_PREFIX_BYTES) as u32;
        batch[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
        seal(&mut batch);
        decode(&batch).unwrap().validate(MAX).unwrap();
        assert!(ends.len() >= 2, "{codec}: {ends:?}");
        for &end in &ends[..ends.len() - 1] {
            let cut = &batch[..BATCH_HEADER_BYTES + end];
            assert!(
                could_be_cut_short(Format::Kafka, cut),
                "{codec} split at {split}: cut at {end}"
            );
        }
        // A length raised past the end of the whole batch: damage.
        let mut raised = batch.clone();
        raised[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
            .copy_from_slice(&(length + 4096).to_be_bytes());
        assert!(
            !could_be_cut_short(Format::Kafka, &raised),
            "{codec}: raised"
        );
    }
}

/// The unsigned varint at the start of `bytes`, and its length.
fn varint(bytes: &[u8]) -> (u64, usize) {
    let mut v = 0;
    for (i, b) in bytes.iter().enumerate() {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("a varint cut short");
}

/// A producer's `maxTimestamp` that is not its records' largest, or a
/// LogAppendTime flag, is set right with the CRC32C; a right one is left.
#[test]
fn create_time_is_set_right_with_the_crc() {
    let good = build(&[(7, None, vec![], b"a"), (9, None, vec![], b"b")]);
    let mut same = good.clone();
    assert!(!set_create_time(&mut same, 9));
    assert_eq!(same, good);
    let mut wrong = good.clone();
    wrong[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&1i64.to_be_bytes());
    wrong[ATTRIBUTES_OFFSET + 1] |= ATTR_LOG_APPEND_TIME as u8;
    seal(&mut wrong);
    let header = decode(&wrong).unwrap().header;
    assert_eq!(
        (header.max_timestamp, header.attributes),
        (1, ATTR_LOG_APPEND_TIME)
    );
    assert!(set_create_time(&mut wrong, 9));
    assert_eq!(wrong, good, "the batch as a right producer sends it");
}

/// Each attribute bit Kafka defines decodes, and is read: the timestamp
/// type, the transactional and control flags, the delete horizon.
#[test]
fn every_known_attribute_bit_decodes() {
    let good = build(&[(7, None, vec![], b"a")]);
    for bit in [
        ATTR_LOG_APPEND_TIME,
        ATTR_TRANSACTIONAL,
        ATTR_CONTROL,
        ATTR_DELETE_HORIZON,
    ] {
        let mut b = good.clone();
        b[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&(bit as i16).to_be_bytes());
        seal(&mut b);
        let header = decode(&b)
            .unwrap_or_else(|e| panic!("bit {bit:#x}: {e}"))
            .header;
        assert_eq!(header.attributes, bit);
        assert_eq!(header.is_transactional(), bit == ATTR_TRANSACTIONAL);
        assert_eq!(header.is_control(), bit == ATTR_CONTROL);
        assert_eq!(header.codec(), Codec::None);
    }
}

/// Records at the bounds of their framing: the smallest (no key, an empty
/// value, no header: a length of 6), headers of the fewest bytes (as many
/// as the bytes left can hold, two each), and the most headers a record
/// may have.
#[test]
fn records_at_the_bounds_of_their_framing_decode() {
    let empty: &[u8] = b"";
    let three: Vec<(&[u8], &[u8])> = vec![(empty, empty); 3];
    let most: Vec<(&[u8], &[u8])> =
        vec![(empty, empty); crate::limits::HEADERS_PER_RECORD_MAX as usize];
    let bytes = build(&[
        (1, None, vec![], b""),
        (1, None, three.clone(), b""),
        (1, None, most.clone(), b""),
    ]);
    let batch = decode(&bytes).unwrap();
    let records: Vec<_> = batch.records(MAX).map(Result::unwrap).collect();
    assert_eq!(records[0].encoded_bytes, 7, "length 6 and its byte");
    assert_eq!(records[1].headers().count(), 3);
    assert_eq!(
        records[2].header_count(),
        crate::limits::HEADERS_PER_RECORD_MAX
    );
    // One header more than a record may have is refused.
    let mut b = BatchBuilder::new();
    b.push(1, None, &most, b"");
    let mut over = b.finish().to_vec();
    // The header count (zigzag 1024 = 2048: 0x80 0x10) after the record's
    // length (2 bytes), attributes, deltas and null key and empty value.
    let at = BATCH_HEADER_BYTES + 2 + 5;
    assert_eq!(&over[at..at + 2], &[0x80, 0x10]);
    over[at] = 0x82; // 1025
    seal(&mut over);
    let err = decode(&over).unwrap().validate(MAX).unwrap_err();
    assert!(err.to_string().contains("header count"), "{err}");
}

mod bounds;
mod damaged_length;
mod framing;
