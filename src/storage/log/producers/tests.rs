use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::storage::batches::FileBatches;
use crate::storage::fs::sim::SimFs;
use crate::storage::log::aborted::AbortedTxn;
use crate::storage::log::{LogConfig, OpenOptions};
use crate::storage::record::control::{self, Marker};
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

/// `batch` made a transactional producer's.
fn transactional(mut batch: Vec<u8>) -> Vec<u8> {
    batch[21..23].copy_from_slice(&record::ATTR_TRANSACTIONAL.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Appends the marker of producer `id`'s transaction, as `model` takes it.
fn end_txn(log: &mut Log, id: i64, commit: bool, model: &mut ProducerState) {
    let marker = Marker {
        commit,
        coordinator_epoch: 0,
    };
    let info = log.append_marker((id, 0), marker, 5_000).unwrap();
    let bytes = control::marker_batch((id, 0), marker, 5_000);
    let h = BatchHeader::decode(Format::Kafka, &bytes, limits::BATCH_BYTES_MAX).unwrap();
    let h = BatchHeader {
        base_offset: info.base_offset,
        ..h
    };
    model.apply_marker(&h, marker);
}

/// Three producers numbering on; each fourth batch has none; producers 20
/// and 21 each open a transaction every few batches, which producer 20
/// commits and 21 aborts a few batches later.
fn fill(log: &mut Log, batches: usize, model: &mut ProducerState) {
    let mut next = [0i32; 5];
    for i in 0..batches {
        let p = i % 3;
        if i % 4 == 3 {
            append(log, batch(-1, -1, -1, 2), model);
        }
        append(log, batch(10 + p as i64, 0, next[p], 2), model);
        next[p] += 2;
        let t = 3 + i % 2;
        match i % 6 {
            1 | 2 => {
                let b = transactional(batch(17 + t as i64, 0, next[t], 1));
                append(log, b, model);
                next[t] += 1;
            }
            4 | 5 => end_txn(log, 17 + t as i64, t == 3, model),
            _ => {}
        }
    }
}

/// The state of every batch in the log, read from its first.
fn full_scan(log: &Log) -> ProducerState {
    scan_all(log).0
}

/// The state and the aborted transactions of every batch in the log,
/// read from its first.
fn scan_all(log: &Log) -> (ProducerState, Vec<AbortedTxn>) {
    let mut state = ProducerState::default();
    let mut aborted = Aborted::default();
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
            apply(&mut state, &mut aborted, &b.header, b.bytes());
        }
    }
    (state, aborted.entries)
}

/// Asserts that the log's state and aborted transactions are what a scan
/// of all its batches builds.
fn assert_scanned(log: &mut Log, why: &str) {
    let (state, aborted) = scan_all(log);
    assert_eq!(log.producer_state().unwrap(), &state, "{why}");
    assert_eq!(log.aborted_transactions(0, u64::MAX), aborted, "{why}");
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
    assert_scanned(&mut log, "reopened");
    assert!(log.aborted_transactions(0, u64::MAX).len() > 3);
    fill(&mut log, 10, &mut model);
    log.flush().unwrap();
    drop(log);
    sim.crash_process();
    let mut log = open(&sim);
    assert_eq!(log.producer_state().unwrap(), &model);
    assert_eq!(full_scan(&log), model);
    assert_scanned(&mut log, "after a crash");
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
        assert_scanned(&mut log, &format!("cut after {n} changes"));
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
    assert_scanned(&mut log, "cut");
    assert_ne!(state, model, "the cut removed batches");
    let aborted = log.aborted_transactions(0, u64::MAX);
    assert!(!aborted.is_empty() && aborted.iter().all(|a| a.last_offset < cut));
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
    assert_eq!(log.aborted_transactions(0, u64::MAX), aborted);
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
    let aborted = leader.aborted_transactions(0, u64::MAX);
    assert_eq!(follower.aborted_transactions(0, u64::MAX), aborted);
    follower.close().unwrap();
    let mut follower = open(&other);
    assert_eq!(follower.producer_state().unwrap(), &model);
    assert_eq!(follower.aborted_transactions(0, u64::MAX), aborted);
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
    let mut model = ProducerState::default();
    fill(&mut log, 4, &mut model);
    end_txn(&mut log, 21, false, &mut model);
    log.flush().unwrap();
    assert_eq!(log.segments().count(), 1);
    let segment = log.segments().next().unwrap();
    let file = segment.file().unwrap();
    let header = crate::storage::segment::SEGMENT_HEADER_BYTES as u64;
    let range = (header, segment.size);
    let (expected, expected_aborted) = scan_all(&log);
    assert!(!expected_aborted.is_empty() && expected.first_unstable_offset().is_some());
    for chunk in (70..700).chain([4096]) {
        let mut state = ProducerState::default();
        let mut aborted = Aborted::default();
        let mut buf = Vec::new();
        let into = (&mut state, &mut aborted);
        let on = scan_headers(&*file, range, (0, u64::MAX), (&mut buf, chunk), into);
        assert!(on.unwrap(), "chunk {chunk}");
        assert_eq!(state, expected, "chunk {chunk}");
        assert_eq!(aborted.entries, expected_aborted, "chunk {chunk}");
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

/// The file of aborted transactions removed, cut, or damaged anywhere:
/// the open finds it disagrees with the snapshot and builds them again
/// from the whole log, and writes the file anew at the next snapshot.
#[test]
fn a_file_of_aborted_transactions_that_disagrees_is_rebuilt_from_the_log() {
    let path = Path::new(DIR).join(super::aborted::ABORTED_FILE);
    let sim = SimFs::new();
    let mut log = open(&sim);
    fill(&mut log, 40, &mut ProducerState::default());
    let expected = log.aborted_transactions(0, u64::MAX);
    log.close().unwrap();
    let good = sim.read(&path).unwrap();
    assert_eq!(good.len(), expected.len() * 28);
    let flips: Vec<usize> = (0..good.len()).step_by(13).collect();
    for i in 0..4 + flips.len() {
        let mut bytes = good.clone();
        match i {
            0 => bytes.truncate(bytes.len() - 28),
            1 => bytes.truncate(bytes.len() - 5),
            2 | 3 => {}
            _ => bytes[flips[i - 4]] ^= 1,
        }
        sim.write(&path, &bytes);
        if i == 2 {
            sim.remove(&path).unwrap();
        }
        let log = open(&sim);
        assert_eq!(
            log.aborted_transactions(0, u64::MAX),
            expected,
            "damage {i}"
        );
        log.close().unwrap();
        assert_eq!(
            sim.read(&path).unwrap(),
            good,
            "written anew after damage {i}"
        );
    }
}

/// The last stable offset is the first offset of the oldest open
/// transaction, or the log's end; a fetch's aborted transactions are
/// those that overlap its offsets.
#[test]
fn the_last_stable_offset_waits_for_the_oldest_open_transaction() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    let mut model = ProducerState::default();
    append(&mut log, batch(10, 0, 0, 2), &mut model);
    assert_eq!(log.last_stable_offset().unwrap(), 2);
    append(&mut log, transactional(batch(20, 0, 0, 1)), &mut model); // 2
    append(&mut log, transactional(batch(21, 0, 0, 1)), &mut model); // 3
    append(&mut log, batch(10, 0, 2, 2), &mut model); // 4, 5
    assert_eq!(log.last_stable_offset().unwrap(), 2);
    end_txn(&mut log, 20, false, &mut model); // 6
    assert_eq!(log.last_stable_offset().unwrap(), 3);
    end_txn(&mut log, 21, true, &mut model); // 7
    assert_eq!(log.last_stable_offset().unwrap(), 8);
    let txn = AbortedTxn {
        producer_id: 20,
        first_offset: 2,
        last_offset: 6,
    };
    assert_eq!(log.aborted_transactions(0, 8), [txn]);
    assert_eq!(log.aborted_transactions(6, 8), [txn], "its marker");
    assert_eq!(log.aborted_transactions(7, 8), [], "after it");
    assert_eq!(log.aborted_transactions(0, 2), [], "before it");
    // A plain batch of 21's is refused while its transaction is open.
    append(&mut log, transactional(batch(21, 0, 1, 1)), &mut model);
    let err = produce(&mut log, &batch(21, 0, 2, 1)).unwrap_err();
    let code = |e: &Error| matches!(e, Error::ProducerRefused { code, .. } if *code == ErrorCode::InvalidTxnState);
    assert!(code(&err), "{err}");
    // klog's own protocol takes no transactional batch.
    let mut b = transactional(batch(22, 0, 0, 1));
    assert!(log.produce(&mut b, 5_000).is_err());
    // A marker older than the producer's epoch is fenced.
    append(&mut log, transactional(batch(23, 2, 0, 1)), &mut model);
    let marker = Marker {
        commit: true,
        coordinator_epoch: 0,
    };
    let err = log.append_marker((23, 1), marker, 5_000).unwrap_err();
    let fenced = matches!(
        err,
        Error::ProducerRefused {
            code: ErrorCode::ProducerFenced,
            ..
        }
    );
    assert!(fenced, "{err}");
    assert!(log.append_marker((23, 2), marker, 5_000).is_ok());
}

/// Retention: the transactions whose markers are below the log's start
/// leave the file at the next snapshot.
#[test]
fn aborted_transactions_below_the_start_are_forgotten() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    fill(&mut log, 40, &mut ProducerState::default());
    let all = log.aborted_transactions(0, u64::MAX);
    let cut = all[all.len() / 2].last_offset + 1;
    log.delete_records_before(cut).unwrap();
    log.close().unwrap();
    let log = open(&sim);
    let kept = log.aborted_transactions(0, u64::MAX);
    assert_eq!(kept, all[all.len() / 2 + 1..]);
}

/// DeleteRecords past an open transaction's first batch: the last stable
/// offset stays at the log's start, not below it (a read_committed
/// consumer told an end below the start would reset for ever).
#[test]
fn the_last_stable_offset_is_never_below_the_start() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    let mut model = ProducerState::default();
    append(&mut log, transactional(batch(20, 0, 0, 1)), &mut model); // 0
    for i in 0..4 {
        append(&mut log, batch(10, 0, i, 1), &mut model); // 1..4
    }
    assert_eq!(log.last_stable_offset().unwrap(), 0);
    log.delete_records_before(3).unwrap();
    assert_eq!(log.last_stable_offset().unwrap(), 3);
}

/// A batch of a transaction that passed its producer's checks before
/// the abort marker and reaches the log after it (klog's coordinator
/// bumps the epoch of the aborted producer, and the marker carries it)
/// is refused as fenced: appended, it would open a transaction no
/// coordinator ever ends, and hold the last stable offset for good.
#[test]
fn a_late_batch_of_an_aborted_transaction_is_fenced_by_the_bumped_marker() {
    let sim = SimFs::new();
    let mut log = open(&sim);
    let first = transactional(batch(7, 0, 0, 2));
    log.produce_in_transaction(&mut first.clone(), 5_000)
        .unwrap();
    let marker = Marker {
        commit: false,
        coordinator_epoch: 0,
    };
    log.append_marker((7, 1), marker, 5_000).unwrap();
    let end = log.next_offset();
    assert_eq!(log.last_stable_offset().unwrap(), end);
    let late = transactional(batch(7, 0, 2, 1));
    let refused = log.produce_in_transaction(&mut late.clone(), 5_000);
    assert!(
        matches!(
            refused,
            Err(Error::ProducerRefused {
                code: ErrorCode::ProducerFenced,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(
        (log.next_offset(), log.last_stable_offset().unwrap()),
        (end, end)
    );
    // Unbumped (Kafka's clients go on in their epoch), it would open one.
    log.append_marker((7, 1), marker, 5_000).unwrap();
    let same_epoch = transactional(batch(7, 1, 0, 1));
    log.produce_in_transaction(&mut same_epoch.clone(), 5_000)
        .unwrap();
    assert!(log.last_stable_offset().unwrap() < log.next_offset());
}
