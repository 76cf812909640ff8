//! Torn writes as other producers frame their streams, and the time
//! `overrun` (recovery at open) and `decompress` (produce) take over a
//! stream of many frames (a review found both quadratic in the frames).

use super::*;
use std::io::Write;
use std::time::{Duration, Instant};

/// A batch of `records` whose records section is `pack(section)`.
fn framed(records: &[Rec<'_>], codec: Codec, pack: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let batch = unchecked(records, codec, pack);
    decode(&batch).unwrap().validate(MAX).unwrap();
    batch
}

/// [`framed`], not validated.
fn unchecked(records: &[Rec<'_>], codec: Codec, pack: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let plain = build(records);
    let stream = pack(&plain[BATCH_HEADER_BYTES..]);
    let mut batch = [&plain[..BATCH_HEADER_BYTES], &stream].concat();
    let length = (batch.len() - 12) as u32;
    batch[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    batch[ATTRIBUTES_OFFSET + 1] |= codec.bits() as u8;
    seal(&mut batch);
    batch
}

fn gzip_with_extras(section: &[u8]) -> Vec<u8> {
    let mut e = flate2::GzBuilder::new()
        .filename("records.bin")
        .comment("a producer's comment")
        .extra(vec![1, 2, 3, 4, 5, 6])
        .mtime(0x1234_5678)
        .write(Vec::new(), flate2::Compression::fast());
    e.write_all(section).unwrap();
    e.finish().unwrap()
}

fn lz4_checksums(section: &[u8]) -> Vec<u8> {
    use lz4_flex::frame::{BlockSize, FrameEncoder, FrameInfo};
    let info = FrameInfo::new()
        .block_size(BlockSize::Max64KB)
        .block_checksums(true)
        .content_checksum(true)
        .content_size(Some(section.len() as u64));
    let mut e = FrameEncoder::with_frame_info(info, Vec::new());
    e.write_all(section).unwrap();
    e.finish().unwrap()
}

/// As zstd-jni's stream writes it: no content size, a checksum.
fn zstd_streamed(section: &[u8]) -> Vec<u8> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    e.include_checksum(true).unwrap();
    for chunk in section.chunks(8192) {
        e.write_all(chunk).unwrap();
        e.flush().unwrap();
    }
    e.finish().unwrap()
}

fn raw_snappy(section: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(section).unwrap()
}

fn xerial(section: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    compression::compress(Codec::Snappy, None, section, &mut out);
    out
}

/// Every cut of a batch, as producers other than klog frame its stream
/// (gzip with a named, commented header with extras; LZ4 with block and
/// content checksums and its size; zstd streamed with a checksum; raw
/// snappy as librdkafka writes it; xerial of several blocks), is a torn
/// write.
#[test]
fn every_cut_of_a_batch_framed_by_another_producer_is_torn() {
    let values: Vec<Vec<u8>> = (0..100u32)
        .map(|i| {
            let mut s = 0x9e37_79b9u32.wrapping_mul(i + 1);
            (0..400)
                .map(|j| {
                    s ^= s << 13;
                    s ^= s >> 17;
                    s ^= s << 5;
                    if j % 3 == 0 {
                        (s >> 24) as u8
                    } else {
                        b'a' + (i % 7) as u8
                    }
                })
                .collect()
        })
        .collect();
    let records: Vec<Rec<'_>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (i as i64, Some(&b"k"[..]), vec![], &v[..]))
        .collect();
    type Pack = fn(&[u8]) -> Vec<u8>;
    let variants: [(&str, Codec, Pack); 5] = [
        ("gzip with header extras", Codec::Gzip, gzip_with_extras),
        ("lz4 with checksums", Codec::Lz4, lz4_checksums),
        ("zstd streamed", Codec::Zstd, zstd_streamed),
        ("raw snappy", Codec::Snappy, raw_snappy),
        ("xerial", Codec::Snappy, xerial),
    ];
    let mut wrong = Vec::new();
    for (name, codec, pack) in variants {
        let batch = framed(&records, codec, pack);
        let len = batch.len();
        let cuts = (BATCH_HEADER_BYTES..len)
            .filter(|&c| c < BATCH_HEADER_BYTES + 120 || c + 120 > len || c % 997 == 0);
        for cut in cuts {
            let judged = overrun(Format::Kafka, &batch[..cut]);
            if judged != Overrun::Torn {
                wrong.push(format!("{name} ({len} bytes): cut at {cut}: {judged:?}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong: {:#?}",
        wrong.len(),
        &wrong[..wrong.len().min(40)]
    );
}

/// Records of `plain` (a records section) split into an LZ4 frame of all
/// but the last byte, `empty` empty frames, and a frame of the last byte:
/// frames back to back, as Kafka reads them.
fn lz4_many_frames(section: &[u8], empty: usize) -> Vec<u8> {
    let frame = |data: &[u8]| {
        let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    let nothing = frame(&[]);
    let (most, last) = section.split_at(section.len() - 1);
    let mut out = frame(most);
    for _ in 0..empty {
        out.extend_from_slice(&nothing);
    }
    out.extend_from_slice(&frame(last));
    out
}

fn large_records() -> Vec<u8> {
    vec![b'z'; 256 * 1024]
}

fn lz4_batch(empty: usize) -> Vec<u8> {
    let value = large_records();
    let records: Vec<Rec<'_>> = (0..32).map(|i| (i, None, vec![], &value[..])).collect();
    unchecked(&records, Codec::Lz4, |s| lz4_many_frames(s, empty))
}

/// Runs `f` on a thread, failing if it takes longer than `limit`.
fn within(limit: Duration, what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let start = Instant::now();
        f();
        let _ = tx.send(start.elapsed());
    });
    match rx.recv_timeout(limit) {
        Ok(took) => eprintln!("{what}: {took:?}"),
        Err(_) => panic!("{what}: still running after {limit:?}"),
    }
}

/// An 8 MiB records section in an LZ4 stream of 20,000 empty frames
/// (about 280 KB compressed, a batch a producer may send): recovery's
/// `overrun` of it cut short decodes it a frame at a time, and each
/// frame's read grows (and zeroes) the buffer past all it holds, so it
/// costs 20,000 times 8 MiB. The same stream with no empty frames takes
/// well under the limit.
#[test]
fn overrun_of_a_stream_of_many_frames_takes_linear_time() {
    let baseline = lz4_batch(0);
    within(Duration::from_secs(20), "no empty frames", move || {
        let cut = &baseline[..baseline.len() - 1];
        assert_eq!(overrun(Format::Kafka, cut), Overrun::Torn);
    });
    let batch = lz4_batch(20_000);
    eprintln!("batch of {} bytes", batch.len());
    within(Duration::from_secs(20), "20,000 empty frames", move || {
        let cut = &batch[..batch.len() - 1];
        assert_eq!(overrun(Format::Kafka, cut), Overrun::Torn);
    });
}

/// The same batch whole, validated as a produce request's batch is:
/// `decompress` reads LZ4 frames one `read_capped` at a time, with the
/// same cost.
#[test]
fn validating_a_stream_of_many_frames_takes_linear_time() {
    let batch = lz4_batch(20_000);
    within(
        Duration::from_secs(20),
        "validate, 20,000 empty frames",
        move || {
            decode(&batch).unwrap().validate(MAX * 64).unwrap();
        },
    );
}
