//! Issue 24, as a review broke it: Kafka RecordBatch v2 on disk, damaged
//! where its CRC32C does not look (its length, base offset and leader
//! epoch) or where a torn write looks like damage, and a producer's batch
//! time. Each test here failed on the change as first reviewed.

use std::path::Path;
use std::sync::Arc;

use klog::storage::fs::sim::SimFs;
use klog::storage::fs::Vfs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::{BatchBuilder, Codec};

const WRITE: OpenOptions = OpenOptions {
    writable: true,
    lock: false,
};

fn sim_partition() -> (SimFs, Arc<dyn Vfs>, &'static Path) {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/data/t-0");
    sim.create_dir_all_durable(dir);
    (sim, vfs, dir)
}

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 64 * 1024,
        index_interval_bytes: 256,
        index_bytes_max: 4096,
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn batch(codec: Codec, n: usize) -> Vec<u8> {
    let mut b = if codec == Codec::None {
        BatchBuilder::new()
    } else {
        BatchBuilder::compressed(codec, None)
    };
    for i in 0..n {
        b.push(
            7,
            None,
            &[],
            format!("GET /index-{i}.html 200 Mozilla/5.0").as_bytes(),
        );
    }
    b.finish().to_vec()
}

/// One bit flipped in the batchLength (not under the CRC32C) of a durable
/// lz4 or snappy batch in the middle of the last segment: opening the log
/// calls it a short write, cuts it and every durable batch after it, and
/// saves nothing (a short write is not saved), so their offsets are
/// reused by the next appends. The same flip in an uncompressed, gzip or
/// zstd batch is refused as damage.
#[test]
fn a_flipped_length_bit_in_an_lz4_or_snappy_batch_does_not_silently_cut_durable_batches() {
    let mut lost = Vec::new();
    for codec in [
        Codec::None,
        Codec::Gzip,
        Codec::Zstd,
        Codec::Lz4,
        Codec::Snappy,
    ] {
        let (sim, vfs, dir) = sim_partition();
        let mut log = Log::open(Arc::clone(&vfs), dir, small(), WRITE).unwrap();
        let mut positions = Vec::new();
        let mut at = klog::storage::segment::SEGMENT_HEADER_BYTES;
        for _ in 0..5 {
            let mut b = batch(codec, 10);
            positions.push(at);
            at += b.len();
            log.append(&mut b, 0).unwrap();
        }
        log.flush().unwrap();
        let acked = log.next_offset();
        drop(log);
        sim.crash(&mut |n| n);
        let seg = dir.join("00000000000000000000.log");
        let mut bytes = sim.read(&seg).unwrap();
        // Bit 16 of the second batch's batchLength: 64 KiB more, past the
        // file's end and within the batch limit.
        bytes[positions[1] + 8 + 1] ^= 0x01;
        sim.write(&seg, &bytes);
        match Log::open(Arc::clone(&vfs), dir, small(), WRITE) {
            Err(e) => assert!(e.to_string().contains("klog-recover"), "{codec}: {e}"),
            Ok(log) => {
                let saved: Vec<_> = sim
                    .files()
                    .into_keys()
                    .filter(|p| p.to_string_lossy().contains("corrupt"))
                    .collect();
                lost.push(format!(
                    "{codec}: opened at offset {} (acknowledged up to {acked}) after cutting \
                     {:?}; saved: {saved:?}",
                    log.next_offset(),
                    log.recovery().segments.last().unwrap().problem,
                ));
            }
        }
    }
    assert!(lost.is_empty(), "{lost:#?}");
}

/// partitionLeaderEpoch is not under the CRC32C (klog's own header CRC
/// covered its epoch). One bit flipped in a durable batch's epoch passes
/// recovery after a crash (a full scan) and the scrub, and the leader
/// serves it: a follower copying the leader's batches byte for byte takes
/// the damaged epoch, raises its own to it, and refuses every later batch
/// (their epoch is "below" it), for ever. The leader thinks its log whole.
#[test]
fn a_flipped_partition_leader_epoch_bit_is_found_before_a_follower_copies_it() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, small(), WRITE).unwrap();
    log.begin_epoch(3).unwrap();
    let mut positions = Vec::new();
    let mut at = klog::storage::segment::SEGMENT_HEADER_BYTES;
    for _ in 0..5 {
        let mut b = batch(Codec::Zstd, 10);
        positions.push(at);
        at += b.len();
        log.append(&mut b, 0).unwrap();
    }
    log.flush().unwrap();
    drop(log);
    sim.crash(&mut |n| n);
    let seg = dir.join("00000000000000000000.log");
    let mut bytes = sim.read(&seg).unwrap();
    // Bit 16 of the second batch's partitionLeaderEpoch: 3 becomes 65539.
    bytes[positions[1] + 12 + 1] ^= 0x01;
    sim.write(&seg, &bytes);

    let leader = Log::open(Arc::clone(&vfs), dir, small(), WRITE)
        .expect("the leader's open after a crash (a full scan) takes the damaged epoch");
    let problem = leader.recovery().segments.last().unwrap().problem.clone();
    let scrubbed = leader
        .extents()
        .iter()
        .map(|e| klog::storage::scrub::check(e, &mut |_| true).unwrap())
        .find_map(|d| d);
    if problem.is_some() || scrubbed.is_some() {
        return; // found: fine
    }
    // The leader vouches for its batches: a follower copies them.
    let served = &sim.read(&seg).unwrap()[klog::storage::segment::SEGMENT_HEADER_BYTES..];
    let fdir = Path::new("/data/f-0");
    sim.create_dir_all_durable(fdir);
    let mut follower = Log::open(Arc::clone(&vfs), fdir, small(), WRITE).unwrap();
    let result = follower.append_replicated(served, 0);
    assert!(
        result.is_ok(),
        "recovery and the scrub found nothing, yet the follower stops at offset {} with its \
         epoch at {}: {:?}",
        follower.next_offset(),
        follower.leader_epoch(),
        result.err().map(|e| e.to_string())
    );
}

/// Copies the frozen legacy golden partition into `to`.
fn legacy_partition(to: &Path) {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/legacy/partition");
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(golden).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// After an upgrade, a leader holding legacy segments serves them
/// converted (the follower's fetch), and a new follower stores the
/// converted batches in Kafka's format: both hold the same records at the
/// same offsets, which is correct replication. `klog-dump --compare` calls
/// it a committed difference below the high watermark (a problem, exit
/// 1), because a legacy batch and its Kafka form are never "equal".
#[test]
fn compare_of_a_legacy_leader_and_its_converted_follower_finds_no_problem() {
    use klog::storage::fs::RealFs;
    use klog::storage::record::{legacy, Format};
    let tmp = tempfile::tempdir().unwrap();
    let leader_dir = tmp.path().join("a/golden-0");
    let follower_dir = tmp.path().join("b/golden-0");
    legacy_partition(&leader_dir);
    std::fs::create_dir_all(&follower_dir).unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let leader = Log::open(Arc::clone(&vfs), &leader_dir, LogConfig::default(), WRITE).unwrap();
    let mut follower =
        Log::open(Arc::clone(&vfs), &follower_dir, LogConfig::default(), WRITE).unwrap();
    // The follower fetches as a broker's replica fetcher does: what the
    // leader's read gives, converted when it is a legacy slice.
    while follower.next_offset() < leader.next_offset() {
        let slice = leader
            .read(follower.next_offset(), 1 << 20)
            .unwrap()
            .unwrap();
        let mut stored = Vec::new();
        slice.read_into(&mut stored).unwrap();
        let served = if slice.format == Format::Legacy {
            let mut out = Vec::new();
            legacy::to_kafka(&stored, &mut out).unwrap();
            out
        } else {
            stored
        };
        follower.append_replicated(&served, 0).unwrap();
    }
    follower.flush().unwrap();
    let end = leader.next_offset();
    drop((leader, follower));
    let c = klog::tools::compare::compare(&RealFs, &[leader_dir, follower_dir], Some(end)).unwrap();
    assert!(
        !c.below_high_watermark(),
        "the same records at the same offsets, found different: {:?}",
        c.difference
    );
}

/// Rewrites a Kafka batch's maxTimestamp and its CRC32C (as a producer
/// would have sent it).
fn with_max_timestamp(batch: &mut [u8], max_timestamp: i64) {
    batch[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// The log trusts a producer's maxTimestamp: it is not checked against
/// the records (only a legacy batch's was), and Kafka's broker rewrites it
/// from the records. A producer whose maxTimestamp is below its records'
/// (a buggy client, or a hostile one) makes ListOffsets by time skip
/// those records: offsetsForTimes(105) answers past offset 5, whose
/// timestamp is 105.
#[test]
fn a_producers_max_timestamp_below_its_records_does_not_hide_them_from_a_time_lookup() {
    let (_sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, small(), WRITE).unwrap();
    let mut b = BatchBuilder::new();
    for i in 0..10 {
        b.push(100 + i, None, &[], b"x");
    }
    let mut lying = b.finish().to_vec();
    with_max_timestamp(&mut lying, 100);
    let appended = log.append(&mut lying, 0);
    let mut later = BatchBuilder::new();
    later.push(200, None, &[], b"y");
    log.append(&mut later.finish().to_vec(), 0).unwrap();
    log.flush().unwrap();
    if appended.is_err() {
        return; // refused: fine
    }
    assert_eq!(
        log.offset_for_timestamp(105).unwrap(),
        Some(5),
        "the first record at or after 105 is offset 5"
    );
}

/// baseOffset is not under the CRC32C (klog's own header CRC covered
/// it), and a read checks a batch's base offset against nothing: one bit
/// flipped in a durable batch's baseOffset (below the recovery point,
/// which an open does not scan) is served to a consumer fetching that
/// offset as records 1048586.., so that its position jumps past every
/// record after them. The legacy format said "corrupt" here.
#[test]
fn a_flipped_base_offset_bit_is_not_served_as_other_offsets() {
    use klog::storage::batches::Batches;
    use klog::storage::record::{Decompressed, Format};
    let (sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, small(), WRITE).unwrap();
    let mut positions = Vec::new();
    let mut at = klog::storage::segment::SEGMENT_HEADER_BYTES;
    for _ in 0..5 {
        let mut b = batch(Codec::None, 10);
        positions.push(at);
        at += b.len();
        log.append(&mut b, 0).unwrap();
    }
    log.close().unwrap();
    let seg = dir.join("00000000000000000000.log");
    let mut bytes = sim.read(&seg).unwrap();
    // Bit 20 of the second batch's baseOffset (10): 1048586.
    bytes[positions[1] + 5] ^= 0x10;
    sim.write(&seg, &bytes);

    let log = match Log::open(Arc::clone(&vfs), dir, small(), WRITE) {
        Ok(log) => log,
        Err(_) => return, // refused: fine
    };
    let slice = match log.read(10, 1 << 20) {
        Ok(Some(slice)) => slice,
        Ok(None) | Err(_) => return, // an error: fine
    };
    let mut buf = Vec::new();
    slice.read_into(&mut buf).unwrap();
    let mut offsets = Vec::new();
    let mut scratch = Decompressed::default();
    for step in Batches::new(Format::Kafka, &buf, 1 << 30) {
        let Ok((_, b)) = step else { break };
        for r in b.records_in(&mut scratch, 1 << 20).unwrap() {
            offsets.push(r.unwrap().offset);
        }
    }
    assert_eq!(
        offsets.first(),
        Some(&10),
        "a read from offset 10 serves offsets {:?}.. without an error",
        &offsets[..3.min(offsets.len())]
    );
}

/// The pre-change regression test `a_bad_record_before_zero_pages_of_a_
/// durable_batch_is_damage_not_a_torn_write` (tests/durability.rs at
/// 3b165ae), as it was: a bit flipped in the first record (the batch's
/// header area) of an fsynced last batch whose last value is zero-padded.
/// A known limit, kept as a test that shows it: one CRC32C covers a Kafka
/// batch, so damage inside the very batch that ends in a page or more of
/// (its own) zeros cannot be told from the pages a power cut lost of a
/// batch being written, and recovery judges it a torn write, as the
/// design says of torn tails (the cut bytes are saved as `.corrupt`). A
/// legacy segment, with a CRC per record, told them apart. Telling them
/// apart needs a durable mark of the flushed end (not kept yet).
#[test]
#[ignore = "a known limit of a batch-wide CRC32C: see the comment"]
fn a_bad_byte_far_before_the_zero_padding_of_a_durable_last_batch_is_damage() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, small(), WRITE).unwrap();
    log.append(&mut batch(Codec::None, 3), 0).unwrap();
    let mut padded = b"tag".to_vec();
    padded.extend([0u8; 8192]);
    let mut b = BatchBuilder::new();
    b.push(7, None, &[], b"payload-header");
    b.push(7, None, &[], &padded);
    let mut big = b.finish().to_vec();
    log.append(&mut big, 0).unwrap();
    log.flush().unwrap();
    drop(log);
    sim.crash(&mut |n| n);
    let seg = dir.join("00000000000000000000.log");
    let mut bytes = sim.read(&seg).unwrap();
    let start = bytes.len() - big.len();
    bytes[start + 50] ^= 0x01;
    sim.write(&seg, &bytes);
    match Log::open(Arc::clone(&vfs), dir, small(), WRITE) {
        Err(e) => assert!(e.to_string().contains("klog-recover"), "{e}"),
        Ok(log) => panic!(
            "opened at offset {} after cutting {:?}",
            log.next_offset(),
            log.recovery().segments.last().unwrap().problem
        ),
    }
}
