//! Golden files for every on-disk format, in `tests/golden/`.
//!
//! Each test builds a deterministic input from literal values, encodes it
//! through klog's real encoders and compares the bytes with the checked-in
//! golden file, byte for byte. It then decodes the golden file through
//! klog's real decoders, checks the decoded values against literals written
//! here (never against what the encoder produced), re-encodes them and
//! compares again. So a change to an encoder fails the first comparison,
//! and a *symmetric* change to an encoder and its decoder, which a
//! round-trip test cannot see, fails both.
//!
//! A diff in a golden file is a format change: it needs a version bump
//! (the batch `magic`, the segment `version`, the first line of a text
//! file) and a reader for the old version. After a deliberate change,
//! `KLOG_BLESS=1 cargo test --test golden` rewrites the golden files.
//!
//! | golden file                                  | format                            |
//! |----------------------------------------------|-----------------------------------|
//! | `batch.bin`                                  | a Kafka RecordBatch v2 and its records, as the log stores it |
//! | `batch-{gzip,snappy,lz4,zstd}.bin`           | the same records compressed (frozen once written: read, never compared with a new encoding) |
//! | `legacy/batch.bin`, `legacy/segment-header.bin`, `legacy/partition/` | klog's legacy magic 2 format (read only, never written): a batch, a version 1 segment header, a closed partition |
//! | `v1/batch.bin`, `v1/partition/`              | magic 1 (read only, never written): a batch, and a closed partition written before leader epochs |
//! | `segment-header.bin`                         | 24-byte segment header, version 2 |
//! | `segment-header-{cleaned,gaps}.bin`          | version 3: a cleaned segment's (with its end), a follower's copy with gaps |
//! | `offsets-topic/`                             | a committed offset's key, value and `klog.generation` header in `__consumer_offsets` |
//! | `index/wide.index`, `index/wide.timeindex`   | offset and time index entries     |
//! | `partition/`                                 | a closed partition directory: two segments and their indexes, `recovery-point`, `leader-epochs`, `clean-shutdown` |
//! | `refetch`                                    | a replica's refetch mark, after it left the ISR |
//! | `scrubbed`                                   | when a scrub last found a partition's log whole |
//! | `log-start`                                  | a partition's start once DeleteRecords moved it |
//! | `registry/`                                  | broker, member (and its lease), owner claim (by generation), committed offsets journal (and the offset file before journals), placement (one replica each, as before replication, and replicated), partition state, topic configs, topic deletion and log start entries; an entry `<id>.json` stands for `<id>@<incarnation>.json` |

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog::coord::{BrokerInfo, DirRegistry, MemberInfo, PartitionState, Placement, Registry};
use klog::limits::BATCH_BYTES_MAX;
use klog::storage::epoch::{EpochEntry, Epochs};
use klog::storage::fs::sim::SimFs;
use klog::storage::fs::Vfs;
use klog::storage::index::{self, IndexEntry, SegmentIndex};
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::producers::{ProducerState, Snapshot};
use klog::storage::record::control::{self, Marker};
use klog::storage::record::{
    self, legacy, Batch, BatchBuilder, BatchHeader, Codec, Decompressed, Format, ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
};
use klog::storage::recover;
use klog::storage::segment;

// ---------------------------------------------------------------------------
// Golden file plumbing.

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
}

fn blessing() -> bool {
    std::env::var_os("KLOG_BLESS").is_some()
}

/// Where two byte strings first differ, with both sides in hex around it.
fn describe_diff(what: &str, expected: &[u8], actual: &[u8]) -> String {
    let at = expected
        .iter()
        .zip(actual)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(actual.len()));
    let start = at & !15;
    let hex = |bytes: &[u8]| -> String {
        let end = bytes.len().min(start + 32);
        let window = bytes.get(start..end).unwrap_or(&[]);
        window
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "{what}: first difference at byte {at} ({at:#x}); golden {} bytes, encoded {} bytes\n  \
         golden  @{start:#06x}: {}\n  encoded @{start:#06x}: {}\n\
         A diff here is a format change (it needs a version bump); after a deliberate one, \
         KLOG_BLESS=1 cargo test --test golden rewrites the golden files.",
        expected.len(),
        actual.len(),
        hex(expected),
        hex(actual),
    )
}

/// Compares an encoder's bytes with the golden file `name` (rewriting the
/// file instead under `KLOG_BLESS=1`), and returns the golden bytes.
fn check_golden(name: &str, encoded: &[u8]) -> Vec<u8> {
    let path = golden_dir().join(name);
    match std::fs::read(&path) {
        Ok(golden) if golden == encoded => golden,
        _ if blessing() => {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, encoded).unwrap();
            encoded.to_vec()
        }
        Ok(golden) => panic!(
            "{}",
            describe_diff(&path.display().to_string(), &golden, encoded)
        ),
        Err(e) => panic!(
            "{}: {e} (KLOG_BLESS=1 cargo test --test golden creates it)",
            path.display()
        ),
    }
}

/// Asserts that re-encoding the decoded golden file gave its bytes back.
fn assert_reencoded(name: &str, golden: &[u8], reencoded: &[u8]) {
    if golden != reencoded {
        panic!(
            "{}",
            describe_diff(&format!("{name} re-encoded"), golden, reencoded)
        );
    }
}

// ---------------------------------------------------------------------------// Records.

/// A decoded record, owned, for comparisons with literals.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    offset: u64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    value: Vec<u8>,
    encoded_bytes: u32,
}

fn rec(
    offset: u64,
    timestamp: i64,
    key: Option<&[u8]>,
    headers: &[(&[u8], &[u8])],
    value: &[u8],
    bytes: u32,
) -> Rec {
    Rec {
        offset,
        timestamp,
        key: key.map(<[u8]>::to_vec),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect(),
        value: value.to_vec(),
        encoded_bytes: bytes,
    }
}

/// The same records with the sizes they have in another format.
fn sized(records: Vec<Rec>, sizes: &[u32]) -> Vec<Rec> {
    assert_eq!(records.len(), sizes.len());
    records
        .into_iter()
        .zip(sizes)
        .map(|(r, &encoded_bytes)| Rec { encoded_bytes, ..r })
        .collect()
}

/// Every byte value once, in order: a binary value.
fn all_bytes() -> Vec<u8> {
    (0..=255u8).collect()
}

/// The four records of `batch.bin` (and of the partition's first batch),
/// offsets from `base`: a key and two headers; a negative timestamp delta
/// (-750 ms); an empty key and a 256-byte binary value (a two-byte length
/// varint); headers without a key and an empty value. The sizes are their
/// Kafka encodings', counted by hand: length varint, attributes, zigzag
/// timestamp and offset deltas, key, value, header count, headers.
fn rich_records(base: u64) -> Vec<Rec> {
    vec![
        rec(
            base,
            1_700_000_000_000,
            Some(b"user-42"),
            &[(b"trace-id", b"abc123"), (b"content-type", b"text/plain")],
            b"hello, klog",
            66,
        ),
        rec(base + 1, 1_699_999_999_250, None, &[], b"earlier", 15),
        rec(
            base + 2,
            1_700_000_003_600,
            Some(b""),
            &[],
            &all_bytes(),
            266,
        ),
        rec(base + 3, 1_700_000_000_001, None, &[(b"h", b"")], b"", 10),
    ]
}

/// The sizes of [`rich_records`] in klog's legacy format (a CRC each, no
/// offset delta, no null-key or empty-header bytes).
const RICH_LEGACY_SIZES: [u32; 4] = [67, 15, 266, 11];

fn push_all<B>(records: &[Rec], mut push: impl FnMut(&mut B, &Rec, &[(&[u8], &[u8])]), b: &mut B) {
    for r in records {
        let headers: Vec<(&[u8], &[u8])> =
            r.headers.iter().map(|(n, v)| (&n[..], &v[..])).collect();
        push(b, r, &headers);
    }
}

/// Encodes records through `BatchBuilder` (base offset 0), compressed
/// with `codec`.
fn build_with(codec: Codec, records: &[Rec]) -> Vec<u8> {
    let mut builder = BatchBuilder::compressed(codec, None);
    push_all(
        records,
        |b: &mut BatchBuilder, r, h| b.push(r.timestamp, r.key.as_deref(), h, &r.value),
        &mut builder,
    );
    builder.finish().to_vec()
}

/// Encodes records through `BatchBuilder` (base offset 0).
fn build(records: &[Rec]) -> Vec<u8> {
    build_with(Codec::None, records)
}

/// Encodes records as a legacy batch (what klog wrote before).
fn build_legacy(records: &[Rec]) -> Vec<u8> {
    let mut builder = legacy::BatchBuilder::new();
    push_all(
        records,
        |b: &mut legacy::BatchBuilder, r, h| b.push(r.timestamp, r.key.as_deref(), h, &r.value),
        &mut builder,
    );
    builder.finish().to_vec()
}

/// Decodes the batch of `format` at the start of `bytes`: its header and
/// records, every record checked.
fn decode_batch(format: Format, bytes: &[u8]) -> (BatchHeader, Vec<Rec>) {
    let batch = Batch::decode(format, bytes, BATCH_BYTES_MAX).expect("golden batch decodes");
    let mut scratch = Decompressed::default();
    batch
        .validate_in(&mut scratch, 1 << 20)
        .expect("golden batch validates");
    let records = batch
        .records_in(&mut scratch, 1 << 20)
        .expect("golden records")
        .map(|r| {
            let r = r.expect("golden record decodes");
            Rec {
                offset: r.offset,
                timestamp: r.timestamp,
                key: r.key.map(<[u8]>::to_vec),
                headers: r.headers().map(|(n, v)| (n.to_vec(), v.to_vec())).collect(),
                value: r.value.to_vec(),
                encoded_bytes: r.encoded_bytes,
            }
        })
        .collect();
    (batch.header, records)
}

/// The records the `kafka-protocol` crate, Kafka's own format in another
/// implementation, decodes from `bytes` (it checks the CRC32C): offsets,
/// timestamps, keys, values and headers.
fn kafka_crate_records(bytes: &[u8]) -> Vec<Rec> {
    use kafka_protocol::records::RecordBatchDecoder;
    let sets = RecordBatchDecoder::decode_all(&mut &bytes[..]).expect("the kafka crate decodes it");
    sets.into_iter()
        .flat_map(|s| s.records)
        .map(|r| Rec {
            offset: r.offset as u64,
            timestamp: r.timestamp,
            key: r.key.as_ref().map(|k| k.to_vec()),
            headers: r
                .headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_bytes().to_vec(),
                        v.as_ref().map_or(Vec::new(), |v| v.to_vec()),
                    )
                })
                .collect(),
            value: r.value.as_ref().map_or(Vec::new(), |v| v.to_vec()),
            encoded_bytes: 0,
        })
        .collect()
}

fn without_sizes(records: &[Rec]) -> Vec<Rec> {
    records
        .iter()
        .map(|r| Rec {
            encoded_bytes: 0,
            ..r.clone()
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Record batch.

/// A base offset past 32 bits, so every byte of the field is pinned.
const BATCH_BASE_OFFSET: u64 = 4_294_967_301;
/// A leader epoch with four different bytes, so every byte is pinned.
const BATCH_LEADER_EPOCH: u32 = 0x0102_0304;

#[test]
fn record_batch() {
    let mut encoded = build(&rich_records(0));
    record::stamp(&mut encoded, BATCH_BASE_OFFSET, BATCH_LEADER_EPOCH);
    let golden = check_golden("batch.bin", &encoded);

    let (header, records) = decode_batch(Format::Kafka, &golden);
    assert_eq!(
        header,
        BatchHeader {
            format: Format::Kafka,
            base_offset: 4_294_967_301,
            batch_length: 406,
            magic: 2,
            attributes: 0,
            last_offset_delta: 3,
            record_count: 4,
            base_timestamp: 1_700_000_000_000,
            max_timestamp: 1_700_000_003_600,
            leader_epoch: 16_909_060,
            // CRC32C of bytes 21.., checked independently (Python, the
            // Castagnoli polynomial 0x82f63b78).
            crc: GOLDEN_BATCH_CRC32C,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    );
    assert_eq!(records, rich_records(4_294_967_301));
    assert_eq!(header.total_bytes(), 418);
    assert_eq!(golden.len(), 418, "nothing after the batch");
    assert_eq!(
        kafka_crate_records(&golden),
        without_sizes(&rich_records(4_294_967_301))
    );

    let mut reencoded = build(&records);
    record::stamp(&mut reencoded, header.base_offset, header.leader_epoch);
    assert_reencoded("batch.bin", &golden, &reencoded);
}

/// The golden batch's CRC32C.
const GOLDEN_BATCH_CRC32C: u32 = 0x1a28_29ae;

/// A compressed batch of every codec (frozen once written: a codec
/// library may compress the same records otherwise) decodes to the same
/// records, through klog and through the `kafka-protocol` crate.
#[test]
fn compressed_record_batches_read() {
    for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
        let name = format!("batch-{}.bin", codec.name());
        let path = golden_dir().join(&name);
        if blessing() || !path.exists() {
            let mut encoded = build_with(codec, &rich_records(0));
            record::stamp(&mut encoded, BATCH_BASE_OFFSET, BATCH_LEADER_EPOCH);
            assert!(blessing(), "{name} is missing: KLOG_BLESS=1 writes it");
            std::fs::write(&path, &encoded).unwrap();
        }
        let golden = std::fs::read(&path).unwrap();
        let (header, records) = decode_batch(Format::Kafka, &golden);
        assert_eq!(header.codec(), codec, "{name}");
        assert_eq!(header.attributes, codec.bits(), "{name}");
        assert_eq!(
            (header.base_offset, header.leader_epoch, header.record_count),
            (BATCH_BASE_OFFSET, BATCH_LEADER_EPOCH, 4),
            "{name}"
        );
        assert_eq!(records, rich_records(BATCH_BASE_OFFSET), "{name}");
        assert_eq!(
            kafka_crate_records(&golden),
            without_sizes(&rich_records(BATCH_BASE_OFFSET)),
            "{name}"
        );
    }
}

/// A legacy batch (klog magic 2, as written before klog stored Kafka's
/// format; frozen) still decodes to the same records, and the legacy
/// encoder, kept for tests, still writes it.
#[test]
fn legacy_record_batch_still_reads() {
    let golden = std::fs::read(golden_dir().join("legacy/batch.bin")).unwrap();
    let (header, records) = decode_batch(Format::Legacy, &golden);
    assert_eq!(
        header,
        BatchHeader {
            format: Format::Legacy,
            base_offset: 4_294_967_301,
            batch_length: 391,
            magic: 2,
            attributes: 0,
            last_offset_delta: 3,
            record_count: 4,
            base_timestamp: 1_700_000_000_000,
            max_timestamp: 1_700_000_003_600,
            leader_epoch: 16_909_060,
            // CRC32 (IEEE) of bytes 0..40, checked independently with zlib.
            crc: 0xa866_0ff0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    );
    let expected = sized(rich_records(4_294_967_301), &RICH_LEGACY_SIZES);
    assert_eq!(records, expected);
    assert_eq!(golden.len(), 403);
    let mut reencoded = build_legacy(&records);
    legacy::stamp(&mut reencoded, header.base_offset, header.leader_epoch);
    assert_reencoded("legacy/batch.bin", &golden, &reencoded);
    // Served to every client as a Kafka batch with the same records.
    let mut kafka = Vec::new();
    assert_eq!(legacy::to_kafka(&golden, &mut kafka).unwrap(), golden.len());
    assert_eq!(
        decode_batch(Format::Kafka, &kafka).1,
        rich_records(4_294_967_301)
    );
}

/// A magic 1 batch, as written before leader epochs (frozen: never
/// blessed), still decodes to the same records, as epoch 0.
#[test]
fn record_batch_magic_1_still_reads() {
    let golden = std::fs::read(golden_dir().join("v1/batch.bin")).unwrap();
    let (header, records) = decode_batch(Format::Legacy, &golden);
    assert_eq!(
        header,
        BatchHeader {
            format: Format::Legacy,
            base_offset: 4_294_967_301,
            batch_length: 387,
            magic: 1,
            attributes: 0,
            last_offset_delta: 3,
            record_count: 4,
            base_timestamp: 1_700_000_000_000,
            max_timestamp: 1_700_000_003_600,
            leader_epoch: 0,
            // CRC32 (IEEE) of bytes 0..36, checked independently with zlib.
            crc: 0x468b_af8c,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    );
    let expected = sized(rich_records(4_294_967_301), &RICH_LEGACY_SIZES);
    assert_eq!(records, expected);
    assert_eq!(golden.len(), 399);
}

// ---------------------------------------------------------------------------
// Segment header.

#[test]
fn segment_header() {
    // 2^32 + 1024: every byte of the base offset field is pinned.
    let encoded = segment::encode_header(4_294_968_320, Format::Kafka);
    let golden = check_golden("segment-header.bin", &encoded);
    assert_eq!(golden.len(), segment::SEGMENT_HEADER_BYTES);
    assert_eq!(&golden[4..6], &[2, 0], "version 2: Kafka batches");
    let (base_offset, format) = segment::decode_header(&golden).expect("golden header decodes");
    assert_eq!((base_offset, format), (4_294_968_320, Format::Kafka));
    assert_reencoded(
        "segment-header.bin",
        &golden,
        &segment::encode_header(base_offset, format),
    );
    // The legacy header (version 1, frozen) says its batches are legacy.
    let legacy = std::fs::read(golden_dir().join("legacy/segment-header.bin")).unwrap();
    assert_eq!(
        segment::decode_header(&legacy),
        Ok((4_294_968_320, Format::Legacy))
    );
    assert_reencoded(
        "legacy/segment-header.bin",
        &legacy,
        &segment::encode_header(4_294_968_320, Format::Legacy),
    );
}

/// A record of the offsets topic: Kafka's key (version 1) and value
/// (version 3) of a committed offset, wide enough to pin every field.
#[test]
fn offsets_topic_record() {
    use klog::coord::offsets_topic::{self, Committed, OffsetKey};
    let key = OffsetKey {
        group: "group-\u{e9}".into(),
        topic: "orders".into(),
        partition: 0x0102_0304,
    };
    let encoded = offsets_topic::encode_key(&key);
    let golden = check_golden("offsets-topic/key.bin", &encoded);
    assert_eq!(offsets_topic::decode_key(&golden).unwrap(), Some(key));
    let committed = Committed {
        offset: Some(0x0102_0304_0506_0708),
        leader_epoch: 0x0a0b_0c0d,
        metadata: "meta".into(),
        timestamp_ms: 0x1112_1314_1516_1718,
        generation: 0x2122_2324_2526_2728,
        cluster: None,
    };
    let golden = check_golden(
        "offsets-topic/value.bin",
        &offsets_topic::encode_value(&committed),
    );
    let generation = offsets_topic::encode_generation(committed.generation);
    let golden_generation = check_golden("offsets-topic/generation.bin", &generation);
    assert_eq!(
        offsets_topic::decode_value(&golden, Some(&golden_generation)).unwrap(),
        committed
    );
}

/// Version 3: a cleaned segment (flag 1, with its end) and a follower's
/// copy with gaps (flag 2, no end).
#[test]
fn segment_header_version_3() {
    let base = 4_294_968_320;
    let cleaned = segment::encode_cleaned_header(base, base + 0x0102_0304);
    let golden = check_golden("segment-header-cleaned.bin", &cleaned);
    assert_eq!(&golden[4..8], &[3, 0, 1, 0], "version 3, flag 1");
    let read = segment::read_header(&golden).expect("golden header decodes");
    assert_eq!((read.end, read.gaps), (Some(base + 0x0102_0304), true));
    let gaps = segment::encode_gaps_header(base);
    let golden = check_golden("segment-header-gaps.bin", &gaps);
    assert_eq!(&golden[4..8], &[3, 0, 2, 0], "version 3, flag 2");
    let read = segment::read_header(&golden).expect("golden header decodes");
    assert_eq!((read.base_offset, read.end, read.gaps), (base, None, true));
}

// ---------------------------------------------------------------------------
// Offset and time index.

/// Entries with values wide enough to pin every byte of each field.
fn wide_entries() -> Vec<IndexEntry> {
    let entry = |relative_offset, position, max_timestamp| IndexEntry {
        relative_offset,
        position,
        max_timestamp,
    };
    vec![
        entry(0, 24, 1_700_000_000_000),
        entry(300, 70_000, 1_700_000_000_000),
        entry(16_777_221, 1_073_741_831, 1_700_086_400_000),
    ]
}

/// Writes entries through `SegmentIndex` and trims the files, as a
/// segment that rolls does; returns (`.index`, `.timeindex`) bytes.
fn write_index(entries: &[IndexEntry]) -> (Vec<u8>, Vec<u8>) {
    let vfs = SimFs::new();
    let dir = Path::new("/seg");
    vfs.create_dir_all(dir).unwrap();
    let log_path = dir.join(segment::log_file_name(0));
    let mut index = SegmentIndex::create(&vfs, &log_path, Vec::new(), 16).unwrap();
    for e in entries {
        index.append(*e).unwrap();
    }
    index.trim().unwrap();
    drop(index);
    let (offsets, times) = index::index_paths(&log_path);
    (vfs.read(&offsets).unwrap(), vfs.read(&times).unwrap())
}

#[test]
fn offset_and_time_index() {
    let (offsets, times) = write_index(&wide_entries());
    let golden_offsets = check_golden("index/wide.index", &offsets);
    let golden_times = check_golden("index/wide.timeindex", &times);

    let vfs = SimFs::new();
    vfs.create_dir_all(Path::new("/golden")).unwrap();
    let log_path = Path::new("/golden/wide.log");
    let (offset_path, time_path) = index::index_paths(log_path);
    vfs.write(&offset_path, &golden_offsets);
    vfs.write(&time_path, &golden_times);
    let entries = index::read_entries(&vfs, log_path).expect("golden index decodes");
    assert_eq!(entries, wide_entries());
    // `read_entries` takes the relative offset from `.index`; the copy in
    // each `.timeindex` entry (bytes 8..12) is pinned here.
    let time_offsets: Vec<u32> = golden_times
        .chunks(index::TIME_ENTRY_BYTES)
        .map(|e| u32::from_le_bytes(e[8..12].try_into().unwrap()))
        .collect();
    assert_eq!(time_offsets, [0, 300, 16_777_221]);

    let (offsets, times) = write_index(&entries);
    assert_reencoded("index/wide.index", &golden_offsets, &offsets);
    assert_reencoded("index/wide.timeindex", &golden_times, &times);
}

// ---------------------------------------------------------------------------
// A partition directory, written by a real log.

const PARTITION_DIR: &str = "/data/golden-0";
const NOW_MS: i64 = 1_700_000_010_000;

fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        // Every batch but a segment's first gets an index entry.
        index_interval_bytes: 1,
        index_bytes_max: 4096,
        retention_ms: None,
        ..LogConfig::default()
    }
}

/// The partition's records, segment by segment and batch by batch. First
/// segment: the four rich records; one whose timestamp is below the first
/// batch's maximum (so the time index carries that maximum forward); two
/// whose second has a negative delta. The log then rolls, and a second
/// segment, base offset 7, holds two more batches: a base offset that is
/// not 0 pins the segment header's field and that index offsets are
/// relative to the segment.
fn partition_segments() -> Vec<Vec<Vec<Rec>>> {
    vec![
        vec![
            rich_records(0),
            vec![rec(
                4,
                1_700_000_001_000,
                Some(b"k2"),
                &[],
                b"second batch",
                21,
            )],
            vec![
                rec(5, 1_700_000_005_000, None, &[], b"third-a", 14),
                rec(6, 1_700_000_004_999, None, &[], b"third-b", 14),
            ],
        ],
        vec![
            vec![rec(
                7,
                1_700_000_006_000,
                Some(b"k"),
                &[(b"n", b"v")],
                b"fourth",
                18,
            )],
            vec![rec(8, 1_700_000_007_000, None, &[], b"fifth", 12)],
        ],
    ]
}

/// The leader epoch each batch of [`partition_segments`] is appended in:
/// a rise inside the first segment and one at the roll.
const PARTITION_EPOCHS: [&[u32]; 2] = [&[0, 0, 1], &[3, 3]];

/// The files of the partition directory, by name, as in its golden folder.
const PARTITION_FILES: [&str; 11] = [
    "00000000000000000000.index",
    "00000000000000000000.log",
    "00000000000000000000.timeindex",
    "00000000000000000007.index",
    "00000000000000000007.log",
    "00000000000000000007.snapshot",
    "00000000000000000007.timeindex",
    "00000000000000000009.snapshot",
    "clean-shutdown",
    "leader-epochs",
    "recovery-point",
];

/// Appends the batches to a new log over a simulated file system, rolling
/// between segments, closes it, and returns the directory's files by name.
fn write_partition(segments: &[Vec<Vec<Rec>>]) -> Vec<(String, Vec<u8>)> {
    let vfs = SimFs::new();
    vfs.set_clock_ms(NOW_MS);
    let dir = Path::new(PARTITION_DIR);
    vfs.create_dir_all(dir).unwrap();
    let write = OpenOptions {
        writable: true,
        lock: false,
    };
    let mut log = Log::open(Arc::new(vfs.clone()), dir, log_config(), write).unwrap();
    for (i, batches) in segments.iter().enumerate() {
        if i > 0 {
            log.roll().unwrap();
        }
        for (records, &epoch) in batches.iter().zip(PARTITION_EPOCHS[i]) {
            log.set_leader_epoch(epoch).unwrap();
            log.append(&mut build(records), NOW_MS).unwrap();
        }
    }
    log.close().unwrap();
    vfs.files()
        .into_iter()
        .filter_map(|(path, bytes)| {
            let name = path.strip_prefix(dir).ok()?.to_str()?.to_string();
            Some((name, bytes))
        })
        .collect()
}

/// Where each batch of a segment file starts: (position, base offset,
/// max timestamp, leader epoch).
type BatchPlace = (usize, u64, i64, u32);

/// Decodes a segment file: its header's base offset, where its batches
/// are, and their records.
fn decode_segment(bytes: &[u8]) -> (u64, Vec<BatchPlace>, Vec<Vec<Rec>>) {
    let (base_offset, format) =
        segment::decode_header(bytes).expect("golden segment header decodes");
    let mut position = segment::SEGMENT_HEADER_BYTES;
    let (mut places, mut batches) = (Vec::new(), Vec::new());
    while position < bytes.len() {
        let (header, records) = decode_batch(format, &bytes[position..]);
        places.push((
            position,
            header.base_offset,
            header.max_timestamp,
            header.leader_epoch,
        ));
        batches.push(records);
        position += header.total_bytes() as usize;
    }
    (base_offset, places, batches)
}

fn entry(relative_offset: u32, position: u32, max_timestamp: i64) -> IndexEntry {
    IndexEntry {
        relative_offset,
        position,
        max_timestamp,
    }
}

#[test]
fn partition_directory() {
    let files = write_partition(&partition_segments());
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, PARTITION_FILES, "the files a closed partition holds");
    let golden: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(name, bytes)| {
            (
                name.clone(),
                check_golden(&format!("partition/{name}"), bytes),
            )
        })
        .collect();

    // Decode the golden directory through the readers.
    let vfs = SimFs::new();
    let dir = Path::new(PARTITION_DIR);
    vfs.create_dir_all(dir).unwrap();
    for (name, bytes) in &golden {
        vfs.write(&dir.join(name), bytes);
    }
    let first = dir.join(segment::log_file_name(0));
    let second = dir.join(segment::log_file_name(7));
    let (base, places, first_batches) = decode_segment(&vfs.read(&first).unwrap());
    assert_eq!(base, 0);
    assert_eq!(
        places,
        [
            (24, 0, 1_700_000_003_600, 0),
            (442, 4, 1_700_000_001_000, 0),
            (524, 5, 1_700_000_005_000, 1)
        ]
    );
    assert_eq!(vfs.read(&first).unwrap().len(), 613);
    let (base, places, second_batches) = decode_segment(&vfs.read(&second).unwrap());
    assert_eq!(base, 7);
    assert_eq!(
        places,
        [
            (24, 7, 1_700_000_006_000, 3),
            (103, 8, 1_700_000_007_000, 3)
        ]
    );
    assert_eq!(vfs.read(&second).unwrap().len(), 176);
    let segments = vec![first_batches, second_batches];
    assert_eq!(segments, partition_segments());
    assert_eq!(
        index::read_entries(&vfs, &first).expect("golden index decodes"),
        [
            entry(4, 442, 1_700_000_003_600),
            entry(5, 524, 1_700_000_005_000)
        ]
    );
    assert_eq!(
        index::read_entries(&vfs, &second).expect("golden index decodes"),
        [entry(1, 103, 1_700_000_007_000)]
    );
    assert_eq!(recover::read_recovery_point(&vfs, dir), 9);
    assert!(recover::was_clean(&vfs, dir));
    // No producer ids: the snapshots of the roll and the close are empty.
    for offset in [7u64, 9] {
        let name = format!("{offset:020}.snapshot");
        let bytes = vfs.read(&dir.join(name)).unwrap();
        let decoded = ProducerState::decode_snapshot(&bytes);
        let empty = Snapshot {
            offset,
            aborted: 0,
            state: ProducerState::default(),
        };
        assert_eq!(decoded, Ok(empty));
    }
    let epochs = Epochs::read(&vfs, dir)
        .unwrap()
        .expect("an epoch file")
        .unwrap();
    assert_eq!(epochs.entries(), golden_epochs());
    let read = OpenOptions {
        writable: false,
        lock: false,
    };
    let log =
        Log::open(Arc::new(vfs.clone()), dir, log_config(), read).expect("golden partition opens");
    assert_eq!((log.start_offset(), log.next_offset()), (0, 9));
    assert_eq!(
        (log.leader_epoch(), log.epochs().entries()),
        (3, &golden_epochs()[..])
    );
    assert_eq!(
        log.offset_for_timestamp(1_700_000_004_000).unwrap(),
        Some(5)
    );
    assert_eq!(
        log.offset_for_timestamp(1_700_000_006_500).unwrap(),
        Some(8)
    );
    drop(log);

    // Re-encode: the decoded batches through a new log, and the decoded
    // recovery point through its writer.
    for (name, bytes) in write_partition(&segments) {
        let (_, golden) = golden.iter().find(|(n, _)| *n == name).expect("same files");
        assert_reencoded(&format!("partition/{name}"), golden, &bytes);
    }
    let vfs = SimFs::new();
    vfs.create_dir_all(dir).unwrap();
    recover::write_recovery_point(&vfs, dir, 9).unwrap();
    let (_, golden_point) = golden.iter().find(|(n, _)| n == "recovery-point").unwrap();
    assert_reencoded(
        "partition/recovery-point",
        golden_point,
        &vfs.read(&dir.join(recover::RECOVERY_POINT_FILE)).unwrap(),
    );
    let mut epochs = Epochs::new();
    for e in golden_epochs() {
        epochs.assign(e.epoch, e.start_offset);
    }
    let (_, golden_epochs_file) = golden.iter().find(|(n, _)| n == "leader-epochs").unwrap();
    assert_reencoded(
        "partition/leader-epochs",
        golden_epochs_file,
        &epochs.encode(),
    );
}

/// The entries of `partition/leader-epochs`.
fn golden_epochs() -> [EpochEntry; 3] {
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    [e(0, 0), e(1, 5), e(3, 7)]
}

/// The sizes of [`partition_segments`]' records in klog's legacy format.
const PARTITION_LEGACY_SIZES: [&[&[u32]]; 2] =
    [&[&RICH_LEGACY_SIZES, &[22], &[14, 14]], &[&[20], &[12]]];

/// [`partition_segments`] with their legacy sizes.
fn legacy_segments() -> Vec<Vec<Vec<Rec>>> {
    partition_segments()
        .into_iter()
        .zip(PARTITION_LEGACY_SIZES)
        .map(|(batches, sizes)| {
            batches
                .into_iter()
                .zip(sizes)
                .map(|(records, sizes)| sized(records, sizes))
                .collect()
        })
        .collect()
}

/// Copies the frozen partition `golden/<from>` into `dir` of `vfs`.
fn copy_golden_partition(vfs: &SimFs, from: &str, dir: &Path) {
    vfs.create_dir_all_durable(dir);
    for entry in std::fs::read_dir(golden_dir().join(from)).unwrap() {
        let entry = entry.unwrap();
        vfs.write(&dir.join(entry.file_name()), &read(&entry.path()));
    }
}

/// A partition written before leader epochs (magic 1 batches, no epoch
/// file; frozen, never blessed) still opens and reads, and recovers: its
/// batches read as epoch 0, a writer rebuilds its epoch file (epoch 0 from
/// the start) and appends Kafka batches in a new segment after them, and
/// a crash that lost the clean-shutdown mark recovers it the same.
#[test]
fn a_partition_of_magic_1_still_reads_recovers_and_takes_appends() {
    let vfs = SimFs::new();
    let dir = Path::new(PARTITION_DIR);
    copy_golden_partition(&vfs, "v1/partition", dir);
    let (_, places, first) =
        decode_segment(&vfs.read(&dir.join(segment::log_file_name(0))).unwrap());
    assert_eq!(places[1], (423, 4, 1_700_000_001_000, 0));
    assert_eq!(first, legacy_segments()[0]);
    assert!(Epochs::read(&vfs, dir).unwrap().is_none());
    // Recovery from scratch, as after a crash: no clean-shutdown mark.
    vfs.remove(&dir.join(recover::CLEAN_SHUTDOWN_FILE)).unwrap();
    let write = OpenOptions {
        writable: true,
        lock: false,
    };
    let mut log = Log::open(Arc::new(vfs.clone()), dir, log_config(), write).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (0, 9));
    assert_eq!(log.epochs().entries(), [golden_epochs()[0]]);
    assert_eq!(log.leader_epoch(), 0);
    let rebuilt = Epochs::read(&vfs, dir).unwrap().expect("rebuilt").unwrap();
    assert_eq!(rebuilt.entries(), [golden_epochs()[0]]);
    log.set_leader_epoch(4).unwrap();
    let info = log.append(&mut build(&rich_records(0)), NOW_MS).unwrap();
    assert_eq!(info.base_offset, 9);
    log.close().unwrap();
    let (_, places, batches) =
        decode_segment(&vfs.read(&dir.join(segment::log_file_name(7))).unwrap());
    assert_eq!(
        places.iter().map(|p| (p.1, p.3)).collect::<Vec<_>>(),
        [(7, 0), (8, 0)],
        "a legacy segment takes no append"
    );
    assert_eq!(batches, legacy_segments()[1]);
    let (base, places, batches) =
        decode_segment(&vfs.read(&dir.join(segment::log_file_name(9))).unwrap());
    assert_eq!(base, 9);
    assert_eq!(
        places.iter().map(|p| (p.1, p.3)).collect::<Vec<_>>(),
        [(9, 4)]
    );
    assert_eq!(batches, [rich_records(9)]);
    let epochs = Epochs::read(&vfs, dir).unwrap().expect("epochs").unwrap();
    assert_eq!(
        epochs.entries(),
        [
            golden_epochs()[0],
            EpochEntry {
                epoch: 4,
                start_offset: 9
            }
        ]
    );
}

/// A partition in klog's legacy magic 2 format (with leader epochs;
/// frozen) opens, reads, takes appends in a new Kafka segment, and a power
/// cut anywhere in that (each change the appends make, the last one torn
/// at every length) leaves a log that recovers to the legacy records and
/// every durable appended one, then verifies clean.
#[test]
fn a_legacy_partition_takes_appends_and_survives_a_power_cut_among_them() {
    let dir = Path::new(PARTITION_DIR);
    let legacy = legacy_segments().concat().concat();
    let appended: Vec<Vec<Rec>> = (0..3u64).map(|i| rich_records(9 + 4 * i)).collect();
    let write = OpenOptions {
        writable: true,
        lock: false,
    };
    let mut cut_at = 0;
    loop {
        let vfs = SimFs::new();
        copy_golden_partition(&vfs, "legacy/partition", dir);
        let mut durable = 9;
        vfs.cut_power_after(cut_at);
        let done = (|| -> Result<(), klog::error::Error> {
            let mut log = Log::open(Arc::new(vfs.clone()), dir, log_config(), write)?;
            for records in &appended {
                log.append(&mut build(records), NOW_MS)?;
                log.flush()?;
                durable = log.next_offset();
            }
            log.close()
        })();
        let keep = [0usize, 1, 7, usize::MAX][cut_at as usize % 4];
        vfs.crash(&mut |n| n.min(keep));
        vfs.restore_power();
        let log = Log::open(Arc::new(vfs.clone()), dir, log_config(), write)
            .unwrap_or_else(|e| panic!("cut after {cut_at} changes, kept {keep}: {e}"));
        let read = read_partition(&log);
        let n = read.len();
        assert!(
            n >= durable as usize,
            "cut after {cut_at}: {n} records, {durable} durable"
        );
        assert_eq!(read[..9], legacy[..], "cut after {cut_at}");
        assert_eq!(read[9..], appended.concat()[..n - 9], "cut after {cut_at}");
        drop(log);
        let options = recover::RecoverOptions {
            full: true,
            dry_run: true,
            automatic: false,
            trust_last: false,
            index_interval_bytes: 1,
        };
        let report = recover::recover_partition(&vfs, dir, 0, &options).unwrap();
        assert!(!report.changed(), "cut after {cut_at}: {report:?}");
        if done.is_ok() {
            break;
        }
        cut_at += 1;
    }
    assert!(cut_at > 5, "the appends made {cut_at} changes");
}

/// Every record of `log`, in order, decoded as [`decode_batch`] does.
fn read_partition(log: &Log) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    while let Some(slice) = log.read(offset, 1 << 20).unwrap() {
        slice.read_into(&mut buf).unwrap();
        let mut at = 0;
        while at < buf.len() {
            let (header, records) = decode_batch(slice.format, &buf[at..]);
            at += header.total_bytes() as usize;
            offset = header.next_offset();
            out.extend(records);
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Registry files.

fn broker() -> BrokerInfo {
    BrokerInfo {
        kafka: None,
        id: "broker-1".into(),
        host: "127.0.0.1".into(),
        port: 9092,
        pid: 4242,
        topics: [
            ("clicks".to_string(), vec![0, 2]),
            ("logs".to_string(), vec![1]),
        ]
        .into(),
        principal: None,
    }
}

fn member() -> MemberInfo {
    MemberInfo {
        member: "member-a".into(),
        pid: 4343,
        topics: vec!["clicks".into(), "logs".into()],
        coordinator: None,
    }
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The session timeout of the golden member and owner.
const SESSION: std::time::Duration = std::time::Duration::from_secs(10);

/// The file of the one incarnation of entry `id` in `dir`
/// (`<id>@<incarnation>.<ext>`): the golden file is named `<id>.<ext>`.
fn incarnation_file(dir: &Path, id: &str, ext: &str) -> std::path::PathBuf {
    let found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with(&format!("{id}@")) && name.ends_with(&format!(".{ext}"))
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

#[test]
fn registry_broker_entry() {
    let name = "registry/brokers/broker-1.json";
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path())
        .unwrap()
        .with_broker_lease(SESSION);
    let entry = reg.register_broker(&broker()).unwrap();
    let brokers = dir.path().join("brokers");
    let golden = check_golden(name, &read(&incarnation_file(&brokers, "broker-1", "json")));
    // A broker's lease (its session timeout), in the lock file, as a
    // member's: a broker that stops renewing it is not listed as live.
    let lease = read(&incarnation_file(&brokers, "broker-1", "lock"));
    check_golden("registry/brokers/broker-1.lock", &lease);
    drop(entry);

    // The reader lists only entries whose lock is held: hold one, put the
    // golden description beside it, and read.
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    let placeholder = BrokerInfo {
        port: 1,
        ..broker()
    };
    let entry = reg.register_broker(&placeholder).unwrap();
    let path = incarnation_file(&dir.path().join("brokers"), "broker-1", "json");
    std::fs::write(&path, &golden).unwrap();
    let decoded = reg.brokers().unwrap();
    assert_eq!(
        decoded,
        [BrokerInfo {
            kafka: None,
            id: "broker-1".into(),
            host: "127.0.0.1".into(),
            port: 9092,
            pid: 4242,
            topics: [
                ("clicks".to_string(), vec![0, 2]),
                ("logs".to_string(), vec![1])
            ]
            .into(),
            principal: None,
        }]
    );
    entry.update(&decoded[0]).unwrap();
    assert_reencoded(name, &golden, &read(&path));
}

#[test]
fn registry_member_entry() {
    let name = "registry/consumers/g1/member-a.json";
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    let entry = reg.join("g1", &member(), SESSION).unwrap();
    let members = dir.path().join("consumers/g1");
    let golden = check_golden(name, &read(&incarnation_file(&members, "member-a", "json")));
    // The lease, in the lock file.
    let lease = read(&incarnation_file(&members, "member-a", "lock"));
    check_golden("registry/consumers/g1/member-a.lock", &lease);
    drop(entry);

    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    let entry = reg
        .join("g1", &MemberInfo { pid: 1, ..member() }, SESSION)
        .unwrap();
    let path = incarnation_file(&dir.path().join("consumers/g1"), "member-a", "json");
    std::fs::write(&path, &golden).unwrap();
    let sessions = reg.sessions("g1").unwrap();
    assert_eq!(sessions[0].1.timeout, SESSION, "the lease is read back");
    let decoded = reg.members("g1").unwrap();
    assert_eq!(
        decoded,
        [MemberInfo {
            member: "member-a".into(),
            pid: 4343,
            topics: vec!["clicks".into(), "logs".into()],
            coordinator: None,
        }]
    );
    entry.update(&decoded[0]).unwrap();
    assert_reencoded(name, &golden, &read(&path));
}

#[test]
fn registry_owner_entry() {
    let name = "registry/owners/g1/clicks-2/1";
    let claim = |member: &str| {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let owner = reg
            .claim("g1", "clicks", 2, member, SESSION)
            .unwrap()
            .expect("unowned");
        (dir, reg, owner)
    };
    let (dir, _reg, owner) = claim("member-a");
    let golden = check_golden(name, &read(&dir.path().join("owners/g1/clicks-2/1")));
    drop(owner);

    // The reader names an owner only while its lock is held.
    let (dir, reg, owner) = claim("placeholder");
    std::fs::write(dir.path().join("owners/g1/clicks-2/1"), &golden).unwrap();
    let decoded = reg.owner("g1", "clicks", 2).expect("owned");
    assert_eq!(
        (
            decoded.member.as_str(),
            decoded.generation,
            decoded.lease.timeout
        ),
        ("member-a", 1, SESSION)
    );
    drop(owner);

    let (dir, _reg, _owner) = claim(&decoded.member);
    assert_reencoded(
        name,
        &golden,
        &read(&dir.path().join("owners/g1/clicks-2/1")),
    );
}

#[test]
fn registry_committed_offset() {
    // The journal of the claim generation that wrote it: its adopt
    // record, then the commit.
    let name = "registry/offsets/g1/clicks-2/1/offsets.log";
    let commit = |offset: u64| {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let owner = reg
            .claim("g1", "clicks", 2, "member-a", SESSION)
            .unwrap()
            .expect("unowned");
        reg.commit("g1", "clicks", 2, offset, &owner).unwrap();
        read(&dir.path().join("offsets/g1/clicks-2/1/offsets.log"))
    };
    // Past 32 bits.
    let golden = check_golden(name, &commit(4_294_967_301));

    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    std::fs::create_dir_all(dir.path().join("offsets/g1/clicks-2/1")).unwrap();
    std::fs::write(
        dir.path().join("offsets/g1/clicks-2/1/offsets.log"),
        &golden,
    )
    .unwrap();
    let decoded = reg.committed("g1", "clicks", 2).unwrap();
    assert_eq!(decoded, Some(4_294_967_301));

    assert_reencoded(name, &golden, &commit(decoded.unwrap()));
}

#[test]
fn registry_committed_offset_before_journals() {
    // The offset file of the layout before journals: still read, and
    // carried into a journal by the next claim.
    let golden = read(&golden_dir().join("registry/offsets/g1/clicks-2/1/offset"));
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    std::fs::create_dir_all(dir.path().join("offsets/g1/clicks-2/1")).unwrap();
    std::fs::write(dir.path().join("offsets/g1/clicks-2/1/offset"), &golden).unwrap();
    assert_eq!(
        reg.committed("g1", "clicks", 2).unwrap(),
        Some(4_294_967_301)
    );
    let owner = reg.claim("g1", "clicks", 2, "member-a", SESSION).unwrap();
    assert!(owner.is_some());
    assert_eq!(
        reg.committed("g1", "clicks", 2).unwrap(),
        Some(4_294_967_301)
    );
    let carried = dir.path().join("offsets/g1/clicks-2/1");
    assert!(!carried.join("offset").exists() && carried.join("offsets.log").exists());
}

#[test]
fn registry_topic_placement() {
    let name = "registry/topics/clicks.json";
    let place = |partitions: u32, brokers: &[String]| {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        reg.place_topic("clicks", partitions, brokers).unwrap();
        read(&dir.path().join("topics/clicks.json"))
    };
    let golden = check_golden(name, &place(3, &["broker-2".into(), "broker-1".into()]));

    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    std::fs::write(dir.path().join("topics/clicks.json"), &golden).unwrap();
    let decoded = reg.placement("clicks").unwrap().expect("placed");
    // A placement without replicas (every one before replication) has one
    // replica per partition, the broker in `brokers`.
    let one = |b: &str| vec![b.to_string()];
    assert_eq!(
        decoded,
        Placement {
            topic: "clicks".into(),
            brokers: vec!["broker-1".into(), "broker-2".into(), "broker-1".into()],
            replicas: vec![one("broker-1"), one("broker-2"), one("broker-1")],
        }
    );
    assert_eq!(decoded.replication_factor(), 1);

    // The writer places round-robin over the sorted live brokers, so the
    // decoded placement is re-encoded from its partition count and brokers.
    let mut brokers = decoded.brokers.clone();
    brokers.sort();
    brokers.dedup();
    assert_reencoded(
        name,
        &golden,
        &place(decoded.brokers.len() as u32, &brokers),
    );
}

#[test]
fn registry_replicated_topic_placement() {
    let name = "registry/topics/views.json";
    let place = |partitions: u32, factor: u32, brokers: &[String]| {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        reg.place_topic_replicated("views", partitions, factor, brokers)
            .unwrap();
        read(&dir.path().join("topics/views.json"))
    };
    let ids = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let golden = check_golden(
        name,
        &place(4, 2, &ids(&["broker-3", "broker-1", "broker-2"])),
    );

    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    std::fs::write(dir.path().join("topics/views.json"), &golden).unwrap();
    let decoded = reg.placement("views").unwrap().expect("placed");
    assert_eq!(
        decoded,
        Placement {
            topic: "views".into(),
            brokers: ids(&["broker-1", "broker-2", "broker-3", "broker-1"]),
            replicas: vec![
                ids(&["broker-1", "broker-2"]),
                ids(&["broker-2", "broker-3"]),
                ids(&["broker-3", "broker-1"]),
                ids(&["broker-1", "broker-2"]),
            ],
        }
    );
    let mut brokers: Vec<String> = decoded.replicas.concat();
    brokers.sort();
    brokers.dedup();
    let factor = decoded.replication_factor() as u32;
    assert_reencoded(
        name,
        &golden,
        &place(decoded.brokers.len() as u32, factor, &brokers),
    );
}

/// The golden partition states: `clicks` [2] as created (version 0), and
/// `clicks` [1] offline after one change (version 1).
fn golden_states() -> [(u32, u64, PartitionState); 2] {
    [
        (
            2,
            0,
            PartitionState {
                leader: Some("broker-1".into()),
                leader_epoch: 0,
                isr: vec!["broker-1".into(), "broker-2".into()],
            },
        ),
        (
            1,
            1,
            PartitionState {
                leader: None,
                leader_epoch: 4_294_967_301,
                isr: vec!["broker-2".into()],
            },
        ),
    ]
}

/// A registry with `clicks` placed on 3 partitions.
fn placed_registry() -> (tempfile::TempDir, DirRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    let brokers = ["broker-1".to_string(), "broker-2".to_string()];
    reg.place_topic_replicated("clicks", 3, 2, &brokers)
        .unwrap();
    (dir, reg)
}

/// Stores `state` as partition `p`'s state at `version` the way a
/// cluster does (created, then changed once per version), and returns
/// its file's bytes.
fn store_state(p: u32, version: u64, state: &PartitionState) -> Vec<u8> {
    let (dir, reg) = placed_registry();
    let first = PartitionState {
        leader: None,
        leader_epoch: 0,
        isr: vec![],
    };
    let created = if version == 0 { state } else { &first };
    assert!(reg.create_partition_state("clicks", p, created).unwrap());
    for v in 0..version {
        assert!(reg.set_partition_state("clicks", p, state, v).unwrap());
    }
    let files: Vec<_> = std::fs::read_dir(dir.path().join(format!("states/clicks-{p}")))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        files,
        [version.to_string()],
        "one file: the current version"
    );
    read(&dir.path().join(format!("states/clicks-{p}/{version}")))
}

#[test]
fn registry_partition_state() {
    for (p, version, state) in golden_states() {
        let name = format!("registry/states/clicks-{p}/{version}");
        let golden = check_golden(&name, &store_state(p, version, &state));

        let (dir, reg) = placed_registry();
        let path = dir.path().join(format!("states/clicks-{p}"));
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join(version.to_string()), &golden).unwrap();
        let decoded = reg.partition_state("clicks", p).unwrap();
        assert_eq!(decoded, Some((state, version)), "{name}");
        let (decoded, _) = decoded.unwrap();
        assert_reencoded(&name, &golden, &store_state(p, version, &decoded));
    }
}

/// The refetch mark of a replica whose log was cut at 17000 and that has
/// left the ISR since: written as the golden file says, and read back.
#[test]
fn the_refetch_mark_is_the_golden_file() {
    use klog::storage::refetch::Refetch;
    let mark = Refetch {
        cut_at: 17000,
        left_isr: true,
    };
    let golden = check_golden("refetch", &mark.encode());
    assert_eq!(Refetch::decode(&golden), Some(mark));
}

/// The note of a scrub that found a log whole, begun at 1764633600000 ms
/// (2025-12-02): written as the golden file says, and read back.
#[test]
fn the_scrubbed_note_is_the_golden_file() {
    use klog::storage::scrub;
    let golden = check_golden("scrubbed", &scrub::encode_scrubbed(1_764_633_600_000));
    let text = String::from_utf8(golden).unwrap();
    assert_eq!(scrub::decode_scrubbed(&text), Some(1_764_633_600_000));
}

#[test]
fn registry_topic_configs() {
    use klog::coord::topic_config::{self, TopicConfig};
    let name = "registry/config/topics/clicks.json";
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    let stored = topic_config::change(&reg, "clicks", &mut |c| {
        c.set("retention.ms", "3600000")?;
        c.set("segment.bytes", "1048576")
    });
    stored.unwrap().unwrap();
    let golden = check_golden(name, &read(&dir.path().join("config/topics/clicks.json")));

    let other = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(other.path()).unwrap();
    std::fs::create_dir_all(other.path().join("config/topics")).unwrap();
    std::fs::write(other.path().join("config/topics/clicks.json"), &golden).unwrap();
    let decoded = topic_config::read(&reg, "clicks").unwrap();
    let mut want = TopicConfig::new();
    want.set("retention.ms", "3600000").unwrap();
    want.set("segment.bytes", "1048576").unwrap();
    assert_eq!(decoded, want);
    assert_reencoded(name, &golden, &decoded.to_bytes());
}

#[test]
fn registry_broker_configs() {
    use klog::coord::broker_config;
    use klog::coord::topic_config::TopicConfig;
    let name = "registry/config/brokers/default.json";
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    let stored = broker_config::change(&reg, broker_config::DEFAULT, &mut |c| {
        c.set("retention.ms", "3600000")?;
        c.set("max.message.bytes", "2000")
    });
    stored.unwrap().unwrap();
    let golden = check_golden(name, &read(&dir.path().join("config/brokers/default.json")));

    let other = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(other.path()).unwrap();
    std::fs::create_dir_all(other.path().join("config/brokers")).unwrap();
    std::fs::write(other.path().join("config/brokers/default.json"), &golden).unwrap();
    let decoded = broker_config::read(&reg, broker_config::DEFAULT).unwrap();
    let mut want = TopicConfig::new();
    want.set("retention.ms", "3600000").unwrap();
    want.set("max.message.bytes", "2000").unwrap();
    assert_eq!(decoded, want);
    assert_reencoded(name, &golden, &broker_config::encode(&decoded));
}

#[test]
fn registry_topic_deletion_marker() {
    use klog::coord::topic_delete;
    let name = "registry/config/deleting/clicks.json";
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    let replicas = vec![
        vec!["broker-1".to_string(), "broker-2".to_string()],
        vec!["broker-2".to_string(), "broker-1".to_string()],
    ];
    assert!(reg
        .create_placement(&Placement::new("clicks", replicas))
        .unwrap());
    let marked = topic_delete::mark(&reg, "clicks").unwrap().unwrap();
    let golden = check_golden(name, &read(&dir.path().join("config/deleting/clicks.json")));

    let other = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(other.path()).unwrap();
    std::fs::create_dir_all(other.path().join("config/deleting")).unwrap();
    std::fs::write(other.path().join("config/deleting/clicks.json"), &golden).unwrap();
    let decoded = topic_delete::get(&reg, "clicks").unwrap().unwrap();
    assert_eq!(decoded, marked);
    assert_eq!(decoded.partitions, 2);
    let brokers: Vec<&str> = decoded.brokers.iter().map(String::as_str).collect();
    assert_eq!(brokers, ["broker-1", "broker-2"]);
}

/// A producer state snapshot (`storage::producers`): producer 42 at
/// epoch 3 with six batches (five kept), producer 7 with a batch whose
/// sequences wrap.
#[test]
fn producer_snapshot() {
    let header = |id: i64, epoch: i16, first: i32, count: u32, base_offset: u64| BatchHeader {
        format: Format::Kafka,
        base_offset,
        batch_length: 0,
        magic: 2,
        attributes: 0,
        last_offset_delta: count - 1,
        record_count: count,
        base_timestamp: 1_700_000_000_000,
        max_timestamp: 1_700_000_000_000 + base_offset as i64,
        leader_epoch: 0,
        crc: 0xc0ff_ee00 + base_offset as u32,
        producer_id: id,
        producer_epoch: epoch,
        base_sequence: first,
    };
    let mut state = ProducerState::default();
    for i in 0..6 {
        state.apply(&header(42, 3, i * 2, 2, 10 + i as u64 * 2));
    }
    state.apply(&header(7, 0, i32::MAX, 2, 30));
    // Version 1 (before transactions) still reads.
    let v1 = std::fs::read(golden_dir().join("producer-snapshot-v1.bin")).unwrap();
    let read = ProducerState::decode_snapshot(&v1).expect("a version 1 snapshot reads");
    assert_eq!((read.offset, read.aborted, &read.state), (32, 0, &state));
    // Producer 9's transaction is open from offset 40; producer 11's
    // epoch 2 began with a marker (no batch of it since).
    let txn = |h: BatchHeader| BatchHeader {
        attributes: ATTR_TRANSACTIONAL,
        ..h
    };
    state.apply(&txn(header(9, 1, 0, 3, 40)));
    state.apply(&txn(header(11, 1, 0, 1, 43)));
    let marker = BatchHeader {
        attributes: ATTR_TRANSACTIONAL | ATTR_CONTROL,
        base_sequence: -1,
        ..header(11, 2, 0, 1, 44)
    };
    let aborted = Marker {
        commit: false,
        coordinator_epoch: 5,
    };
    assert!(state.apply_marker(&marker, aborted).is_some());
    assert_eq!(state.first_unstable_offset(), Some(40));
    let name = "producer-snapshot.bin";
    let golden = check_golden(name, &state.encode_snapshot(45, 1));
    let expected = Snapshot {
        offset: 45,
        aborted: 1,
        state,
    };
    assert_eq!(ProducerState::decode_snapshot(&golden), Ok(expected));
}

/// A transaction's commit marker (`storage::record::control`): producer 42,
/// epoch 3, coordinator epoch 7, as the `kafka-protocol` crate reads it.
#[test]
fn control_batch() {
    let marker = Marker {
        commit: true,
        coordinator_epoch: 7,
    };
    let batch = control::marker_batch((42, 3), marker, 1_700_000_000_000);
    let golden = check_golden("control-batch.bin", &batch);
    let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut &golden[..])
        .expect("the crate decodes it");
    let record = &sets[0].records[0];
    assert!(record.control && record.transactional);
    assert_eq!((record.producer_id, record.producer_epoch), (42, 3));
    let key = record.key.as_deref().expect("a key");
    assert_eq!(key, [0, 0, 0, 1], "version 0, type 1: commit");
    let h = Batch::decode(Format::Kafka, &golden, 1 << 20)
        .unwrap()
        .header;
    assert_eq!(control::marker_of(&h, &golden), Some(marker));
}

#[test]
fn log_start_file() {
    use klog::storage::log::start;
    let name = "log-start";
    let golden = check_golden(name, &start::encode(1200));
    assert_eq!(
        start::decode(std::str::from_utf8(&golden).unwrap()),
        Some(1200)
    );
    assert_reencoded(name, &golden, &start::encode(1200));
}

#[test]
fn registry_log_starts() {
    use klog::coord::log_start;
    let name = "registry/config/log-starts/clicks.json";
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    log_start::raise(&reg, "clicks", 0, 1200).unwrap();
    log_start::raise(&reg, "clicks", 3, 17).unwrap();
    let golden = check_golden(
        name,
        &read(&dir.path().join("config/log-starts/clicks.json")),
    );
    let other = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(other.path()).unwrap();
    std::fs::create_dir_all(other.path().join("config/log-starts")).unwrap();
    std::fs::write(other.path().join("config/log-starts/clicks.json"), &golden).unwrap();
    assert_eq!(log_start::get(&reg, "clicks", 0).unwrap(), 1200);
    assert_eq!(log_start::get(&reg, "clicks", 3).unwrap(), 17);
    assert_eq!(log_start::get(&reg, "clicks", 1).unwrap(), 0);
}

/// The registry's producer id block after three reservations; a registry
/// holding it gives the fourth block next.
#[test]
fn registry_producer_ids() {
    use klog::coord::producer_ids::{reserve, BLOCK};
    let name = "registry/config/producer-ids/block.json";
    let dir = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(dir.path()).unwrap();
    for _ in 0..3 {
        reserve(&reg).unwrap();
    }
    let golden = check_golden(
        name,
        &read(&dir.path().join("config/producer-ids/block.json")),
    );
    let other = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(other.path()).unwrap();
    std::fs::create_dir_all(other.path().join("config/producer-ids")).unwrap();
    std::fs::write(other.path().join("config/producer-ids/block.json"), &golden).unwrap();
    assert_eq!(reserve(&reg).unwrap(), 3 * BLOCK..4 * BLOCK);
}
