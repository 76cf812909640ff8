use std::path::Path;
use std::sync::Arc;

use super::*;
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
