//! A damaged length (raised past the file's end) on a batch
//! followed by bytes that are not a whole batch header (a next batch torn
//! inside its header, or pages a power cut left zeros): the batch's
//! records, or its whole compressed stream, end before those bytes, so its
//! length is damaged, not short, for every codec and both snappy framings;
//! and every cut of the batch alone is still a short write.

use super::*;
use std::io::Write;

/// A batch of `records` whose records section is one raw snappy block,
/// as librdkafka (kcat, confluent-kafka) writes them, not xerial.
fn raw_snappy(records: &[Rec<'_>]) -> Vec<u8> {
    let plain = build(records);
    let block = snap::raw::Encoder::new()
        .compress_vec(&plain[BATCH_HEADER_BYTES..])
        .unwrap();
    let mut batch = [&plain[..BATCH_HEADER_BYTES], &block].concat();
    let length = (batch.len() - 12) as u32;
    batch[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    batch[ATTRIBUTES_OFFSET + 1] |= Codec::Snappy.bits() as u8;
    seal(&mut batch);
    decode(&batch).unwrap().validate(MAX).unwrap();
    batch
}

fn judged(codec: Option<Codec>) -> Vec<String> {
    let records: Vec<Rec<'_>> = (0..20)
        .map(|i| (i, Some(&b"key"[..]), vec![], &b"a value of some length"[..]))
        .collect();
    let (one, mut two) = match codec {
        Some(codec) => (
            build_with(codec, &records),
            build_with(codec, &records[..3]),
        ),
        None => (raw_snappy(&records), raw_snappy(&records[..3])),
    };
    let codec = codec.map_or("raw snappy".to_string(), |c| c.to_string());
    stamp(&mut two, 20, 0);
    let mut wrong = Vec::new();
    for (name, tail) in [
        ("30 bytes of the next batch's header", two[..30].to_vec()),
        ("4 bytes of the next batch", two[..4].to_vec()),
        ("zeros (lost pages)", vec![0u8; 4096]),
    ] {
        let mut bad = [one.clone(), tail].concat();
        let length = u32::from_be_bytes(bad[8..12].try_into().unwrap());
        let claimed = length + 5000 + 4096;
        bad[8..12].copy_from_slice(&claimed.to_be_bytes());
        let judged = overrun(Format::Kafka, &bad);
        if judged != Overrun::EndsEarly {
            wrong.push(format!("{codec}: damaged length, then {name}: {judged:?}"));
        }
    }
    // Every cut of it is what a writer cut short left.
    for cut in BATCH_HEADER_BYTES..one.len() {
        if overrun(Format::Kafka, &one[..cut]) != Overrun::Torn {
            wrong.push(format!("{codec}: cut at {cut} not torn"));
        }
    }
    wrong
}

#[test]
fn a_damaged_length_before_a_torn_tail_is_damage_for_every_codec() {
    let codecs = Codec::ALL.into_iter().map(Some).chain([None]);
    let wrong: Vec<String> = codecs.flat_map(judged).collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// What is not an overrun at all is damage: a batch the bytes hold whole
/// (its fault is elsewhere), a header that reads as none; a header cut
/// short is a torn write; a gzip or zstd stream that starts as no stream
/// of its codec is damage, not a stream cut short.
#[test]
fn overrun_judges_headers_and_streams_that_read_as_none() {
    let records: Vec<Rec<'_>> = (0..5).map(|i| (i, None, vec![], &b"value"[..])).collect();
    let whole = build(&records);
    assert_eq!(overrun(Format::Kafka, &whole), Overrun::Damaged);
    assert_eq!(
        overrun(Format::Kafka, &whole[..BATCH_HEADER_BYTES - 1]),
        Overrun::Torn
    );
    let mut magic = whole.clone();
    magic[MAGIC_OFFSET] = 1;
    assert_eq!(
        overrun(Format::Kafka, &magic[..whole.len() - 1]),
        Overrun::Damaged
    );
    for codec in [Codec::Gzip, Codec::Zstd] {
        let mut garbage = build_with(codec, &records);
        garbage[BATCH_HEADER_BYTES..].fill(0xff);
        let cut = &garbage[..garbage.len() - 1];
        assert_eq!(overrun(Format::Kafka, cut), Overrun::Damaged, "{codec}");
    }
}

/// A batch of `records` whose records section, and `extra` bytes after
/// it, is `pack`ed as its compressed stream, sealed.
fn packed(
    records: &[Rec<'_>],
    codec: Codec,
    extra: &[u8],
    pack: impl Fn(&[u8]) -> Vec<u8>,
) -> Vec<u8> {
    let plain = build(records);
    let stream = pack(&[&plain[BATCH_HEADER_BYTES..], extra].concat());
    let mut batch = [&plain[..BATCH_HEADER_BYTES], &stream].concat();
    let length = (batch.len() - BATCH_LENGTH_PREFIX_BYTES) as u32;
    batch[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    batch[ATTRIBUTES_OFFSET + 1] |= codec.bits() as u8;
    seal(&mut batch);
    batch
}

/// Raises the length of the batch at the start of `bytes` past their end.
fn raise_length(bytes: &mut [u8]) {
    let length = u32::from_be_bytes(bytes[8..12].try_into().unwrap());
    bytes[8..12].copy_from_slice(&(length + 100_000).to_be_bytes());
}

/// A batch no decoder here reads (its zstd frame declares a 256 MiB
/// window, past what klog decodes) with a damaged length is told by its
/// CRC32C alone: it ends where the next batch's header, one that decodes
/// and starts at the next offset, begins. Four bytes of it, or a header
/// of another offset, prove nothing.
#[test]
fn a_batch_no_decoder_reads_is_told_by_its_crc_and_the_next_header() {
    let records: Vec<Rec<'_>> = (0..10).map(|i| (i, None, vec![], &b"value"[..])).collect();
    let wide = |section: &[u8]| {
        let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
        e.window_log(28).unwrap();
        e.write_all(section).unwrap();
        e.finish().unwrap()
    };
    let one = packed(&records, Codec::Zstd, &[], wide);
    assert!(
        decode(&one).unwrap().validate(MAX).is_err(),
        "not decoded here"
    );
    let mut next = build(&records[..2]);
    for (base_offset, tail, judged) in [
        (10, 61, Overrun::EndsEarly),
        (10, 4, Overrun::Damaged),
        (11, 61, Overrun::Damaged),
    ] {
        stamp(&mut next, base_offset, 0);
        let mut bad = [&one[..], &next[..tail]].concat();
        raise_length(&mut bad);
        let what = format!("next at {base_offset}, {tail} bytes of it");
        assert_eq!(overrun(Format::Kafka, &bad), judged, "{what}");
    }
}

/// A compressed stream that ends whole holding the batch's records and
/// bytes after them is not what a writer cut short leaves: damage.
#[test]
fn a_stream_holding_more_than_the_records_is_damage() {
    let records: Vec<Rec<'_>> = (0..10).map(|i| (i, None, vec![], &b"value"[..])).collect();
    let gzip = |section: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(section).unwrap();
        e.finish().unwrap()
    };
    let mut bad = packed(&records, Codec::Gzip, b"xyz", gzip);
    raise_length(&mut bad);
    assert_eq!(overrun(Format::Kafka, &bad), Overrun::Damaged);
}
