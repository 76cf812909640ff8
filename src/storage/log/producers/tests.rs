use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::storage::batches::FileBatches;
use crate::storage::fs::sim::SimFs;
use crate::storage::log::{LogConfig, OpenOptions};
use crate::storage::record::{self, BatchBuilder};

const DIR: &str = "/p";

fn open(sim: &SimFs) -> Log {
    let dir = Path::new(DIR);
    sim.create_dir_all_durable(dir);
    let config = LogConfig {
        segment_bytes: 4096,
        index_bytes_max: 4096,
        retention_ms: None,
        ..LogConfig::default()
    };
    let options = OpenOptions {
        writable: true,
        lock: false,
    };
    Log::open(Arc::new(sim.clone()), dir, config, options).unwrap()
}

/// A batch of `n` records from producer `id`, epoch `epoch`, numbered
/// from `first`.
fn batch(id: i64, epoch: i16, first: i32, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..n {
        b.push(1_000 + i as i64, None, &[], &[b'x'; 200]);
    }
    let mut bytes = b.finish().to_vec();
    record::set_producer(&mut bytes, id, epoch, first);
    bytes
}

/// Appends `batch`, and applies its header as stored to `model`.
fn append(log: &mut Log, mut batch: Vec<u8>, model: &mut ProducerState) {
    log.append(&mut batch, 5_000).unwrap();
    let h = BatchHeader::decode(Format::Kafka, &batch, limits::BATCH_BYTES_MAX).unwrap();
    model.apply(&h);
}

/// Three producers numbering on; each third batch has none.
fn fill(log: &mut Log, batches: usize, model: &mut ProducerState) {
    let mut next = [0i32; 3];
    for i in 0..batches {
        let p = i % 3;
        if i % 4 == 3 {
            append(log, batch(-1, -1, -1, 2), model);
        }
        append(log, batch(10 + p as i64, 0, next[p], 2), model);
        next[p] += 2;
    }
}

/// The state of every batch in the log, read from its first.
fn full_scan(log: &Log) -> ProducerState {
    let mut state = ProducerState::default();
    for segment in log.segments() {
        let file = segment.file().unwrap();
        let header = crate::storage::segment::SEGMENT_HEADER_BYTES as u64;
        let mut walk = FileBatches::new(
            &*file,
            Format::Kafka,
            header,
            segment.size,
            limits::BATCH_BYTES_MAX,
        );
        while let Some(Ok((_, b))) = walk.next_batch().unwrap() {
            state.apply(&b.header);
        }
    }
    state
}

fn snapshot_offsets(sim: &SimFs) -> Vec<u64> {
    snapshots(sim, Path::new(DIR)).unwrap()
}

#[test]
fn the_state_survives_a_clean_close_and_a_crash_and_is_what_a_full_scan_builds() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    let mut model = ProducerState::default();
    fill(&mut log, 40, &mut model);
    assert!(log.segments().count() > 3, "rolled");
    assert_eq!(log.producer_state().unwrap(), &model);
    assert_eq!(full_scan(&log), model);
    // A snapshot at each roll: at each segment's base but the first's.
    let rolled = snapshot_offsets(&sim);
    let bases: Vec<u64> = log.segments().skip(1).map(|s| s.base_offset).collect();
    assert_eq!(rolled, bases);
    let next = log.next_offset();
    log.close().unwrap();
    assert_eq!(
        snapshot_offsets(&sim).last(),
        Some(&next),
        "one at the close"
    );

    let mut log = open(&sim);
    assert_eq!(log.producer_state().unwrap(), &model);
    fill(&mut log, 10, &mut model);
    log.flush().unwrap();
    drop(log);
    sim.crash_process();
    let mut log = open(&sim);
    assert_eq!(log.producer_state().unwrap(), &model);
    assert_eq!(full_scan(&log), model);
}

/// A log of a few segments, flushed, whose next append of
/// [`another`] rolls (and so writes a snapshot).
fn before_a_roll(sim: &SimFs) -> Log {
    let mut log = open(sim);
    fill(&mut log, 12, &mut ProducerState::default());
    loop {
        let segments = log.segments().count();
        let size = log.segments().last().unwrap().size;
        if size + another().len() as u64 > 4096 {
            assert_eq!(segments, log.segments().count());
            break;
        }
        log.append(&mut another(), 5_000).unwrap();
    }
    log.flush().unwrap();
    log
}

fn another() -> Vec<u8> {
    batch(99, 0, 0, 2)
}

/// A power cut at each change of the append that rolls (and snapshots)
/// and of its flush leaves a log whose producer state, rebuilt from what
/// survived, is the one a scan of all its batches builds; the snapshots
/// kept are all at or below its end.
#[test]
fn a_power_cut_at_every_step_of_a_snapshot_rebuilds_what_a_full_scan_does() {
    for n in 0.. {
        let sim = SimFs::new();
        let mut log = before_a_roll(&sim);
        let segments = log.segments().count();
        let before = sim.changes();
        sim.cut_power_after(n);
        let done = log.append(&mut another(), 5_000).is_ok() && log.flush().is_ok();
        let rolled = log.segments().count() > segments;
        drop(log);
        let made = sim.changes() - before;
        sim.crash(&mut |len| len / 2);
        sim.restore_power();
        let mut log = open(&sim);
        let rebuilt = log.producer_state().unwrap().clone();
        assert_eq!(rebuilt, full_scan(&log), "cut after {n} changes");
        let end = log.next_offset();
        assert!(snapshot_offsets(&sim).iter().all(|o| *o <= end));
        if done && made <= n {
            assert!(rolled && n > 5, "the roll made {n} changes");
            break;
        }
    }
}

#[test]
fn a_truncation_forgets_what_it_removes_and_the_snapshots_past_it() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    let mut model = ProducerState::default();
    fill(&mut log, 40, &mut model);
    log.flush().unwrap();
    let cut = log.next_offset() / 3;
    log.truncate_to(cut).unwrap();
    let cut = log.next_offset();
    assert!(snapshot_offsets(&sim).iter().all(|o| *o <= cut));
    let state = log.producer_state().unwrap().clone();
    assert_eq!(state, full_scan(&log));
    assert_ne!(state, model, "the cut removed batches");
    // A producer's batch the cut removed is appended again, not answered
    // as a duplicate; the next one follows it.
    let last = state.get(10).unwrap().batches.back().unwrap().last_sequence;
    let again = batch(10, 0, last + 1, 2);
    let h = BatchHeader::decode(Format::Kafka, &again, limits::BATCH_BYTES_MAX).unwrap();
    assert_eq!(log.check_producer(&h).unwrap(), Verdict::Append);
    // Reopened, the same.
    log.close().unwrap();
    let mut log = open(&sim);
    assert_eq!(log.producer_state().unwrap(), &state);
}

#[test]
fn a_follower_builds_the_state_its_leader_has() {
    let sim = SimFs::new();
    let mut leader = open(&sim);
    let mut model = ProducerState::default();
    fill(&mut leader, 30, &mut model);
    leader.flush().unwrap();
    let other = SimFs::new();
    let mut follower = open(&other);
    for segment in leader.segments() {
        let file = segment.file().unwrap();
        let header = crate::storage::segment::SEGMENT_HEADER_BYTES as u64;
        let mut bytes = vec![0; (segment.size - header) as usize];
        file.read_exact_at(&mut bytes, header).unwrap();
        follower.append_replicated(&bytes, 5_000).unwrap();
    }
    assert_eq!(follower.producer_state().unwrap(), &model);
    follower.close().unwrap();
    let mut follower = open(&other);
    assert_eq!(follower.producer_state().unwrap(), &model);
}

#[test]
fn snapshot_names_parse_back_and_others_do_not() {
    assert_eq!(
        parse_snapshot_file_name(&snapshot_file_name(51_200)),
        Some(51_200)
    );
    for name in [
        "00000000000000051200.log",
        "51200.snapshot",
        "0000000000000005120x.snapshot",
        "00000000000000051200.snapshot.tmp",
    ] {
        assert_eq!(parse_snapshot_file_name(name), None, "{name}");
    }
}

/// A crash that tore the last batch after a close wrote its snapshot
/// (the log ends below the snapshot now): the snapshot is deleted, and
/// the state is the log's, not the snapshot's.
#[test]
fn a_snapshot_past_the_end_recovery_cut_to_is_not_used() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    fill(&mut log, 20, &mut ProducerState::default());
    let end = log.next_offset();
    let active = log.segments().last().unwrap().path.clone();
    log.close().unwrap();
    assert!(snapshot_offsets(&sim).contains(&end));
    let bytes = sim.read(&active).unwrap();
    sim.write(&active, &bytes[..bytes.len() - 10]);
    let clean = Path::new(DIR).join(crate::storage::recover::CLEAN_SHUTDOWN_FILE);
    sim.remove(&clean).unwrap();
    let mut log = open(&sim);
    assert!(log.next_offset() < end);
    let state = log.producer_state().unwrap().clone();
    assert_eq!(state, full_scan(&log));
    assert!(snapshot_offsets(&sim).iter().all(|o| *o < end));
}

fn open_with(sim: &SimFs, f: impl FnOnce(&mut LogConfig)) -> Log {
    let dir = Path::new(DIR);
    sim.create_dir_all_durable(dir);
    let mut config = LogConfig {
        segment_bytes: 4096,
        index_bytes_max: 4096,
        retention_ms: None,
        ..LogConfig::default()
    };
    f(&mut config);
    let options = OpenOptions {
        writable: true,
        lock: false,
    };
    Log::open(Arc::new(sim.clone()), dir, config, options).unwrap()
}

/// As the Kafka listener does: check, then append under Kafka's rules.
fn produce(log: &mut Log, bytes: &[u8]) -> Result<Produced> {
    let mut b = bytes.to_vec();
    let h = crate::storage::log::check_batch(&b, log.config())?;
    log.append_produced(&mut b, h, 5_000)
}

/// Batches of producer `id` numbered from `first` in the log.
fn copies(log: &Log, id: i64, first: i32) -> usize {
    let mut n = 0;
    for segment in log.segments() {
        let file = segment.file().unwrap();
        let header = crate::storage::segment::SEGMENT_HEADER_BYTES as u64;
        let end = segment.size;
        let mut walk =
            FileBatches::new(&*file, Format::Kafka, header, end, limits::BATCH_BYTES_MAX);
        while let Some(Ok((_, b))) = walk.next_batch().unwrap() {
            n += usize::from(b.header.producer_id == id && b.header.base_sequence == first);
        }
    }
    n
}

/// A batch whose maxTimestamp is not its records' largest is stored with
/// the records' (and so another CRC32C): the state keeps the stored CRC,
/// so that a rebuild (a restart, a follower) agrees with the leader's, and
/// the retry is a duplicate before and after a kill (review: the live
/// state kept the producer's CRC, and the retry was OUT_OF_ORDER after).
#[test]
fn a_batch_whose_create_time_the_log_rewrites_is_a_duplicate_after_a_restart() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    let mut a = batch(7, 0, 0, 2);
    a[35..43].copy_from_slice(&0i64.to_be_bytes());
    let crc = crc32c::crc32c(&a[21..]);
    a[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(!produce(&mut log, &a).unwrap().duplicate);
    assert!(produce(&mut log, &a).unwrap().duplicate);
    let scanned = full_scan(&log);
    assert_eq!(log.producer_state().unwrap(), &scanned);
    log.flush().unwrap();
    drop(log);
    sim.crash_process();
    let mut log = open(&sim);
    assert!(produce(&mut log, &a).unwrap().duplicate);
    assert_eq!(copies(&log, 7, 0), 1);
}

/// A batch in the file whose flush failed without stopping the log (no
/// descriptor for the recovery point) is in the state: its retry is a
/// duplicate, not a second copy.
#[test]
fn a_batch_written_whose_flush_failed_is_known_to_its_retry() {
    let sim = SimFs::new();
    let mut log = open_with(&sim, |c| c.flush_messages = Some(1));
    let mut seq = 0;
    loop {
        let b = batch(7, 0, seq, 2);
        if log.segments().last().unwrap().size + b.len() as u64 > 4096 {
            break;
        }
        produce(&mut log, &b).unwrap();
        seq += 2;
    }
    sim.fail_next_open(|p| p.to_string_lossy().contains("recovery-point"));
    let b = batch(7, 0, seq, 2);
    assert!(produce(&mut log, &b).is_err());
    assert!(!log.failed());
    assert!(produce(&mut log, &b).unwrap().duplicate);
    assert_eq!(copies(&log, 7, seq), 1, "stored once");
    let scanned = full_scan(&log);
    assert_eq!(log.producer_state().unwrap(), &scanned);
}

/// A follower copies a batch with a producer id and sequence -1 (a leader
/// refuses one; an old log may hold it): every snapshot after it still
/// reads.
#[test]
fn a_copied_batch_without_a_sequence_leaves_the_snapshots_readable() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    let mut b = batch(5, 0, 0, 2);
    record::set_producer(&mut b, 5, 0, -1);
    record::stamp(&mut b, 0, 0);
    log.append_replicated(&b, 5_000).unwrap();
    fill(&mut log, 20, &mut ProducerState::default());
    let offsets = snapshot_offsets(&sim);
    assert!(offsets.len() > 2);
    for o in offsets {
        assert!(read_snapshot(&sim, Path::new(DIR), o).is_some(), "{o}");
    }
}

/// An open reads the newest snapshot and the log after it, not the log
/// before it: with the segments below the snapshot gone (as retention
/// deletes them), the state is still all the snapshot knew.
#[test]
fn an_open_takes_the_state_below_the_newest_snapshot_from_it() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    let mut model = ProducerState::default();
    fill(&mut log, 40, &mut model);
    log.close().unwrap();
    // The close's snapshot goes: the newest is then the last roll's.
    let end = *snapshot_offsets(&sim).last().unwrap();
    sim.remove(&Path::new(DIR).join(snapshot_file_name(end)))
        .unwrap();
    let newest = *snapshot_offsets(&sim).last().unwrap();
    let mut removed = 0;
    for name in sim.list(Path::new(DIR)).unwrap() {
        let base = crate::storage::segment::parse_log_file_name(&name);
        if base.is_some_and(|b| b < newest) {
            let stem = name.trim_end_matches(".log").to_string();
            for ext in [".log", ".index", ".timeindex"] {
                let _ = sim.remove(&Path::new(DIR).join(format!("{stem}{ext}")));
            }
            removed += 1;
        }
    }
    assert!(removed > 2);
    let mut log = open(&sim);
    assert!(log.start_offset() >= newest - 20);
    let scanned = full_scan(&log);
    assert_ne!(scanned, model, "the segments left do not hold it all");
    assert_eq!(log.producer_state().unwrap(), &model);
}

/// The header walk reads in chunks and jumps over records: with chunks of
/// any size (a header cut by a chunk's end, a batch longer than a chunk)
/// it builds what a walk that reads and checks every batch does.
#[test]
fn the_header_walk_builds_the_same_state_in_chunks_of_any_size() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    fill(&mut log, 6, &mut ProducerState::default());
    log.flush().unwrap();
    let segment = log.segments().next().unwrap();
    let file = segment.file().unwrap();
    let header = crate::storage::segment::SEGMENT_HEADER_BYTES as u64;
    let range = (header, segment.size);
    let expected = full_scan(&log);
    for chunk in (70..700).chain([4096]) {
        let mut state = ProducerState::default();
        let mut buf = Vec::new();
        let on = scan_headers(&*file, range, (0, u64::MAX), (&mut buf, chunk), &mut state);
        assert!(on.unwrap(), "chunk {chunk}");
        assert_eq!(state, expected, "chunk {chunk}");
    }
}

/// An expiry that forgets nobody leaves the state a full scan builds (the
/// broker's clock, which expiry also reads, is not part of it).
#[test]
fn an_expiry_that_forgets_nobody_leaves_what_a_full_scan_builds() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    let mut model = ProducerState::default();
    fill(&mut log, 10, &mut model);
    assert_eq!(log.expire_producers(2_000, 1_000_000).unwrap(), 0);
    let scanned = full_scan(&log);
    assert_eq!(log.producer_state().unwrap(), &scanned);
}
