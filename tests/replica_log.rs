//! Issue 13, step 3: the storage a follower needs. A follower appends the
//! leader's batches byte for byte (`Log::append_replicated`), refuses what
//! does not follow its log, and cuts its log back (`Log::truncate_to`) or
//! empties it (`Log::reset_to`) durably: once either returned, no power
//! cut brings a removed record back.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::log_records;

use klog::limits::BATCH_BYTES_MAX;
use klog::storage::epoch::{EpochEntry, Epochs, EPOCH_FILE};
use klog::storage::fs::sim::SimFs;
use klog::storage::fs::{RealFs, Vfs};
use klog::storage::log::{Fate, Log, LogConfig, OpenOptions, ReplicaAppend};
use klog::storage::record::{self, Batch, BatchBuilder};
use klog::storage::segment::SEGMENT_HEADER_BYTES;

const WRITE: OpenOptions = OpenOptions {
    writable: true,
    lock: false,
};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 200,
        index_bytes_max: 4096,
        retention_ms: None,
        ..LogConfig::default()
    }
}

/// The broker's settings: readers see flushed records only, appends are
/// gathered in memory.
fn broker_config() -> LogConfig {
    LogConfig {
        visible_after_flush: true,
        write_buffer_bytes: 1 << 20,
        ..config()
    }
}

/// A batch as a leader stores it: records `base..base + n` (value
/// `v<offset>`, timestamp `1000 + offset`), at `base`, of `epoch`.
fn leader_batch(base: u64, n: u64, epoch: u32) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for o in base..base + n {
        b.push(1000 + o as i64, None, &[], format!("v{o}").as_bytes());
    }
    let mut bytes = b.finish().to_vec();
    record::stamp(&mut bytes, base, epoch);
    bytes
}

/// Batches of `n` records each, from `base` to `end`, of `epoch`, back to
/// back.
fn leader_batches(base: u64, end: u64, n: u64, epoch: u32) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut o = base;
    while o < end {
        let k = n.min(end - o);
        bytes.extend_from_slice(&leader_batch(o, k, epoch));
        o += k;
    }
    bytes
}

fn sim_dir() -> (SimFs, Arc<dyn Vfs>, &'static Path) {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/data/t-0");
    sim.create_dir_all_durable(dir);
    (sim, vfs, dir)
}

fn entry(epoch: u32, start_offset: u64) -> EpochEntry {
    EpochEntry {
        epoch,
        start_offset,
    }
}

/// The batch bytes of every segment of the log in `dir`, in offset order
/// (segment headers left out: rolls may differ between replicas).
fn segment_batch_bytes(vfs: &dyn Vfs, dir: &Path) -> Vec<u8> {
    let mut names: Vec<String> = vfs
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| klog::storage::segment::parse_log_file_name(n).is_some())
        .collect();
    names.sort();
    let mut bytes = Vec::new();
    for name in names {
        let file = vfs.open_read(&dir.join(name)).unwrap();
        let mut buf = vec![0; file.len().unwrap() as usize];
        file.read_exact_at(&mut buf, 0).unwrap();
        bytes.extend_from_slice(&buf[SEGMENT_HEADER_BYTES..]);
    }
    bytes
}

/// Every record's offset and value, as strings.
fn values(log: &Log) -> Vec<(u64, String)> {
    log_records(log)
        .into_iter()
        .map(|(o, v)| (o, String::from_utf8(v).unwrap()))
        .collect()
}

/// The records `from..to` of [`leader_batch`]es.
fn expected(from: u64, to: u64) -> Vec<(u64, String)> {
    (from..to).map(|o| (o, format!("v{o}"))).collect()
}

/// The epoch file on disk, decoded.
fn file_epochs(vfs: &dyn Vfs, dir: &Path) -> Vec<EpochEntry> {
    Epochs::read(vfs, dir)
        .unwrap()
        .expect("an epoch file")
        .expect("an epoch file that decodes")
        .entries()
        .to_vec()
}

/// Copies the leader's log to the follower the way a follower fetches:
/// reads of at most `fetch_bytes` from the follower's next offset, cut to
/// whole batches.
fn replicate(leader: &Log, follower: &mut Log, fetch_bytes: u64) {
    let mut buf = Vec::new();
    while let Some(slice) = leader.read(follower.next_offset(), fetch_bytes).unwrap() {
        slice.read_into(&mut buf).unwrap();
        let whole = record::whole_batches_len(slice.format, &buf);
        assert!(whole > 0, "a read holds at least one whole batch");
        let done = follower.append_replicated(&buf[..whole], 0).unwrap();
        assert_eq!(done.next_offset, follower.next_offset());
    }
}

#[test]
fn a_follower_holds_the_leaders_batches_byte_for_byte_and_recovers_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (tmp.path().join("leader"), tmp.path().join("follower"));
    std::fs::create_dir_all(&leader_dir).unwrap();
    std::fs::create_dir_all(&follower_dir).unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let mut leader = Log::open(Arc::clone(&vfs), &leader_dir, config(), WRITE).unwrap();
    let producer = |leader: &mut Log, n: u64| {
        for _ in 0..n {
            let mut b = BatchBuilder::new();
            for i in 0..3 {
                let o = leader.next_offset() + i;
                let value = format!("v{o}-{}", "x".repeat(o as usize % 40));
                b.push(1000 + o as i64, Some(b"k"), &[], value.as_bytes());
            }
            leader.append(&mut b.finish().to_vec(), 0).unwrap();
        }
    };
    producer(&mut leader, 30);
    leader.set_leader_epoch(2).unwrap();
    producer(&mut leader, 40);
    leader.set_leader_epoch(7).unwrap();
    producer(&mut leader, 50);
    assert!(leader.segments().count() >= 4, "several segments");
    let mut follower = Log::open(Arc::clone(&vfs), &follower_dir, config(), WRITE).unwrap();
    replicate(&leader, &mut follower, 1000);
    assert_eq!(follower.next_offset(), leader.next_offset());
    assert_eq!(
        segment_batch_bytes(&*vfs, &follower_dir),
        segment_batch_bytes(&*vfs, &leader_dir)
    );
    let epochs = [entry(0, 0), entry(2, 90), entry(7, 210)];
    assert_eq!(follower.epochs().entries(), epochs);
    assert_eq!(follower.leader_epoch(), 7, "raised by the batches");
    assert_eq!(file_epochs(&*vfs, &follower_dir), epochs);
    assert_eq!(
        std::fs::read(follower_dir.join(EPOCH_FILE)).unwrap(),
        std::fs::read(leader_dir.join(EPOCH_FILE)).unwrap()
    );
    assert_eq!(values(&follower), values(&leader));
    // Reopened after a crash (no clean close), both recover the same.
    drop(leader);
    drop(follower);
    let leader = Log::open(Arc::clone(&vfs), &leader_dir, config(), WRITE).unwrap();
    let follower = Log::open(Arc::clone(&vfs), &follower_dir, config(), WRITE).unwrap();
    assert_eq!(follower.next_offset(), leader.next_offset());
    assert_eq!(follower.epochs(), leader.epochs());
    assert_eq!(values(&follower), values(&leader));
    for report in [leader.recovery(), follower.recovery()] {
        assert!(
            !report.damaged() && report.epoch_problem.is_none(),
            "{report:?}"
        );
    }
    follower.close().unwrap();
    tool_succeeds(
        env!("CARGO_BIN_EXE_klog-dump"),
        &["--verify"],
        &follower_dir,
    );
}

/// Runs a klog tool on the partition directory `dir`, which must succeed.
fn tool_succeeds(bin: &str, args: &[&str], dir: &Path) {
    let out = std::process::Command::new(bin)
        .args(args)
        .arg(dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{bin} {args:?}: {said}");
}

/// An empty log in a partition directory of its own (removed with the
/// returned guard).
fn fresh_log() -> (tempfile::TempDir, std::path::PathBuf, Arc<dyn Vfs>, Log) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let log = Log::open(Arc::clone(&vfs), &dir, config(), WRITE).unwrap();
    (tmp, dir, vfs, log)
}

/// A follower's log holding records 0..12 in epochs 0 and 3.
fn follower_log(vfs: &Arc<dyn Vfs>, dir: &Path, config: LogConfig) -> Log {
    let mut log = Log::open(Arc::clone(vfs), dir, config, WRITE).unwrap();
    log.append_replicated(&leader_batches(0, 6, 3, 0), 0)
        .unwrap();
    log.append_replicated(&leader_batches(6, 12, 3, 3), 0)
        .unwrap();
    log
}

#[test]
fn a_follower_refuses_a_batch_that_does_not_follow_or_does_not_check_and_keeps_those_before() {
    let (_sim, vfs, dir) = sim_dir();
    let mut log = follower_log(
        &vfs,
        dir,
        LogConfig {
            record_bytes_max: 100,
            ..config()
        },
    );
    let refuse = |log: &mut Log, bytes: &[u8], needles: &[&str]| {
        let err = log.append_replicated(bytes, 0).unwrap_err().to_string();
        for needle in needles {
            assert!(err.contains(needle), "{needle:?} not in {err}");
        }
    };
    // An overlap: nothing written (a gap is its leader's cleaner's, and
    // taken).
    refuse(
        &mut log,
        &leader_batch(11, 2, 3),
        &["offset 11", "next offset is 12", "an overlap"],
    );
    // An epoch below the latest in the epoch file.
    refuse(
        &mut log,
        &leader_batch(12, 2, 2),
        &["offset 12", "epoch 2 is below epoch 3"],
    );
    assert_eq!(values(&log), expected(0, 12));
    // A damaged record in the second of three batches: the first stays.
    let mut bytes = leader_batches(12, 21, 3, 3);
    let second = leader_batch(12, 3, 3).len();
    bytes[second + 50] ^= 0x20;
    refuse(&mut log, &bytes, &["offset 15", "crc mismatch"]);
    assert_eq!(values(&log), expected(0, 15));
    // A trailing partial batch: the whole ones before it stay.
    let mut bytes = leader_batches(15, 21, 3, 3);
    bytes.extend_from_slice(&leader_batch(21, 3, 3)[..30]);
    refuse(&mut log, &bytes, &["offset 21", "partial batch"]);
    assert_eq!(values(&log), expected(0, 21));
    let mut bytes = leader_batch(21, 3, 3);
    bytes.extend_from_slice(&leader_batch(24, 3, 3)[..60]);
    refuse(&mut log, &bytes, &["offset 24", "partial batch"]);
    assert_eq!(values(&log), expected(0, 24));
    // Nothing given: nothing done; then the log goes on.
    let none = log.append_replicated(&[], 0).unwrap();
    assert_eq!(
        none,
        ReplicaAppend {
            batches: 0,
            records: 0,
            next_offset: 24
        }
    );
    let done = log
        .append_replicated(&leader_batches(24, 30, 3, 5), 0)
        .unwrap();
    assert_eq!(
        done,
        ReplicaAppend {
            batches: 2,
            records: 6,
            next_offset: 30
        }
    );
    assert_eq!(values(&log), expected(0, 30));
    assert_eq!(
        log.epochs().entries(),
        [entry(0, 0), entry(3, 6), entry(5, 24)]
    );
    // A record over this log's record size limit (the topic's
    // max.message.bytes, lowered since its leader took it) is copied: a
    // follower checks the format's limit, not the topic's.
    let mut b = BatchBuilder::new();
    b.push(1000, None, &[], &[b'x'; 200]);
    let mut big = b.finish().to_vec();
    record::stamp(&mut big, 30, 5);
    assert_eq!(log.append_replicated(&big, 0).unwrap().next_offset, 31);
}

/// A follower's log of records 0..60 (batches of 3, timestamps 1000 +
/// offset) over several segments, in epochs 0 (from 0), 2 (from 21) and 4
/// (from 42), flushed.
fn long_follower(vfs: &Arc<dyn Vfs>, dir: &Path, config: LogConfig) -> Log {
    let mut log = Log::open(Arc::clone(vfs), dir, config, WRITE).unwrap();
    for (from, to, epoch) in [(0, 21, 0), (21, 42, 2), (42, 60, 4)] {
        for base in (from..to).step_by(3) {
            log.append_replicated(&leader_batch(base, 3, epoch), 0)
                .unwrap();
            if base % 9 == 0 {
                log.roll().unwrap();
            }
        }
    }
    log.flush().unwrap();
    assert!(log.segments().count() >= 5, "several segments");
    log
}

/// The log's records, epochs (in memory and on disk) and both index
/// lookups are right for a log holding records `0..end`.
fn check_cut(vfs: &dyn Vfs, dir: &Path, log: &Log, end: u64, context: &str) {
    assert_eq!(log.next_offset(), end, "{context}");
    assert_eq!(values(log), expected(0, end), "{context}");
    let mut epochs = Epochs::new();
    for (start, epoch) in [(0, 0), (21, 2), (42, 4)] {
        epochs.assign(epoch, start);
    }
    epochs.truncate_from(end);
    assert_eq!(log.epochs(), &epochs, "{context}");
    assert_eq!(file_epochs(vfs, dir), epochs.entries(), "{context}");
    for o in 0..end {
        let slice = log.read(o, 1).unwrap().expect("a batch");
        assert!(
            slice.first_batch_offset <= o && o < slice.first_batch_offset + 3,
            "{context}"
        );
        assert_eq!(
            log.offset_for_timestamp(1000 + o as i64).unwrap(),
            Some(o),
            "{context}"
        );
    }
    assert!(log.read(end, 1).unwrap().is_none(), "{context}");
    assert_eq!(
        log.offset_for_timestamp(1000 + end as i64).unwrap(),
        None,
        "{context}"
    );
}

#[test]
fn truncation_inside_a_segment_at_a_boundary_inside_a_batch_and_across_segments() {
    for config in [config(), broker_config()] {
        // (cut, where the log ends after it)
        let bases: Vec<u64> = {
            let (_sim, vfs, dir) = sim_dir();
            let log = long_follower(&vfs, dir, config.clone());
            log.segments().map(|s| s.base_offset).collect()
        };
        let boundary = bases[2];
        let last = *bases.last().unwrap();
        for (cut, end) in [
            (last + 3, last + 3),
            (boundary, boundary),
            (boundary + 1, boundary),
            (boundary + 2, boundary),
            (4, 3),
            (22, 21),
            (0, 0),
            (59, 57),
        ] {
            let context = format!("cut at {cut} ({config:?})");
            let (sim, vfs, dir) = sim_dir();
            let mut log = long_follower(&vfs, dir, config.clone());
            assert_eq!(log.truncate_to(cut).unwrap(), end, "{context}");
            check_cut(&*vfs, dir, &log, end, &context);
            assert!(log.segments().all(|s| s.base_offset <= end), "{context}");
            assert_eq!(log.flushed_offset(), end, "{context}");
            assert_eq!(log.visible_offset(), end, "{context}");
            // The same offsets again, from a leader of a later epoch.
            let done = log
                .append_replicated(&leader_batches(end, 66, 2, 6), 0)
                .unwrap();
            assert_eq!(done.next_offset, 66, "{context}");
            log.flush().unwrap();
            assert_eq!(values(&log), expected(0, 66), "{context}");
            assert_eq!(log.epochs().latest(), Some(entry(6, end)), "{context}");
            for o in (end..66).step_by(5) {
                assert_eq!(log.offset_for_timestamp(1000 + o as i64).unwrap(), Some(o));
            }
            // A power cut now, and the log recovers the same, its indexes
            // sound.
            drop(log);
            sim.crash(&mut |n| n);
            let log = Log::open(Arc::clone(&vfs), dir, config.clone(), WRITE).unwrap();
            let report = log.recovery();
            assert!(
                report
                    .segments
                    .iter()
                    .all(|s| s.problem.is_none() && s.index_problem.is_none()),
                "{context}: {report:?}"
            );
            assert_eq!(values(&log), expected(0, 66), "{context}");
            assert_eq!(log.epochs().latest(), Some(entry(6, end)), "{context}");
        }
    }
}

#[test]
fn truncation_at_or_past_the_end_removes_no_record_and_below_the_start_resets() {
    let (sim, vfs, dir) = sim_dir();
    let mut log = long_follower(&vfs, dir, config());
    assert_eq!(log.truncate_to(60).unwrap(), 60);
    assert_eq!(log.truncate_to(1000).unwrap(), 60);
    check_cut(&*vfs, dir, &log, 60, "past the end");
    // An epoch this replica started at its end, with no batch yet, goes:
    // the leader's older epoch may follow there.
    log.set_leader_epoch(9).unwrap();
    log.append(&mut leader_batch(0, 1, 0), 0).unwrap();
    log.truncate_to(60).unwrap();
    assert_eq!(log.epochs().latest(), Some(entry(4, 42)));
    assert_eq!(file_epochs(&*vfs, dir), log.epochs().entries());
    assert_eq!(log.leader_epoch(), 9, "unchanged");
    log.append_replicated(&leader_batch(60, 3, 5), 0).unwrap();
    // Reset far ahead (the leader deleted what comes next), then below
    // the new start.
    log.reset_to(1000).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (1000, 1000));
    assert_eq!(log.epochs().entries(), []);
    assert_eq!(file_epochs(&*vfs, dir), []);
    log.append_replicated(&leader_batches(1000, 1010, 3, 5), 0)
        .unwrap();
    assert_eq!(log.truncate_to(500).unwrap(), 500);
    assert_eq!((log.start_offset(), log.next_offset()), (500, 500));
    assert!(log.read(500, 100).unwrap().is_none());
    log.append_replicated(&leader_batches(500, 510, 3, 2), 0)
        .unwrap();
    assert_eq!(log.epochs().entries(), [entry(2, 500)]);
    log.flush().unwrap();
    drop(log);
    sim.crash(&mut |_| 0);
    let log = Log::open(Arc::clone(&vfs), dir, config(), WRITE).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (500, 510));
    assert_eq!(values(&log), expected(500, 510));
    let names = vfs.list(dir).unwrap();
    let logs: Vec<&String> = names.iter().filter(|n| n.ends_with(".log")).collect();
    assert_eq!(logs, ["00000000000000000500.log"], "{names:?}");
}

/// With the broker's settings, appends gathered in memory past the cut
/// never reach the file, and those before it are kept and made durable.
#[test]
fn a_truncation_drops_gathered_appends_past_the_cut_unwritten() {
    let (sim, vfs, dir) = sim_dir();
    let mut log = follower_log(&vfs, dir, broker_config());
    log.flush().unwrap();
    let written = sim.read(&dir.join("00000000000000000000.log")).unwrap();
    log.append_replicated(&leader_batches(12, 24, 3, 3), 0)
        .unwrap();
    assert_eq!(log.visible_offset(), 12, "gathered, not shown");
    assert_eq!(log.truncate_to(19).unwrap(), 18);
    assert_eq!(log.visible_offset(), 18);
    assert_eq!(values(&log), expected(0, 18));
    let file = sim.read(&dir.join("00000000000000000000.log")).unwrap();
    assert_eq!(file[..written.len()], written[..]);
    assert_eq!(file.len(), written.len() + 2 * leader_batch(12, 3, 3).len());
    // Below what was written: all that was gathered goes, and the file is
    // cut.
    log.append_replicated(&leader_batches(18, 24, 3, 3), 0)
        .unwrap();
    assert_eq!(log.truncate_to(7).unwrap(), 6);
    assert_eq!(values(&log), expected(0, 6));
    drop(log);
    sim.crash(&mut |n| n);
    let log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE).unwrap();
    assert_eq!(values(&log), expected(0, 6));
    assert_eq!(log.epochs().entries(), [entry(0, 0)]);
}

/// A flush begun before a truncation (synced outside the lock) is waited
/// for, then void: it shows nothing, and its recovery point is not written.
#[test]
fn a_truncation_waits_for_a_pending_flush_and_voids_it() {
    let (sim, vfs, dir) = sim_dir();
    let mut log = long_follower(&vfs, dir, broker_config());
    log.append_replicated(&leader_batches(60, 66, 3, 4), 0)
        .unwrap();
    log.roll().unwrap();
    log.append_replicated(&leader_batches(66, 72, 3, 4), 0)
        .unwrap();
    let flush = Arc::new(log.begin_flush().unwrap().expect("a flush"));
    let started = std::time::Instant::now();
    let syncer = {
        let flush = Arc::clone(&flush);
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            flush.sync().unwrap();
        })
    };
    assert_eq!(log.truncate_to(31).unwrap(), 30);
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(300),
        "the truncation waited for the fsync"
    );
    syncer.join().unwrap();
    assert_eq!(flush.next_offset(), 0, "void");
    assert!(log.complete_flush(&flush).unwrap().is_none());
    assert_eq!(log.visible_offset(), 30);
    assert_eq!(log.flushed_offset(), 30);
    assert_eq!(values(&log), expected(0, 30));
    assert!(klog::storage::recover::read_recovery_point(&sim, dir) <= 30);
    // A publish made before a truncation shows nothing after it either.
    log.append_replicated(&leader_batches(30, 36, 3, 5), 0)
        .unwrap();
    log.roll().unwrap();
    log.append_replicated(&leader_batches(36, 39, 3, 5), 0)
        .unwrap();
    let flush = log.begin_flush().unwrap().expect("a flush");
    flush.sync().unwrap();
    let publish = log.complete_flush(&flush).unwrap().expect("a publish");
    assert_eq!(log.truncate_to(33).unwrap(), 33);
    publish.sync().unwrap();
    log.complete_publish(&publish);
    assert_eq!(log.visible_offset(), 33);
    assert!(klog::storage::recover::read_recovery_point(&sim, dir) <= 33);
    assert_eq!(values(&log), expected(0, 33));
}

/// A leader's appends that a truncation removed are undone for whoever
/// waits on their answer.
#[test]
fn appends_a_truncation_removed_are_undone() {
    let (_sim, vfs, dir) = sim_dir();
    let mut log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE).unwrap();
    let kept = log.append(&mut leader_batch(0, 3, 0), 0).unwrap();
    log.flush().unwrap();
    let cut = log.append(&mut leader_batch(0, 3, 0), 0).unwrap();
    log.flush().unwrap();
    let gathered = log.append(&mut leader_batch(0, 3, 0), 0).unwrap();
    log.truncate_to(3).unwrap();
    assert_eq!(log.fate(kept.epoch, kept.last_offset), Fate::InFile);
    assert_eq!(log.fate(cut.epoch, cut.last_offset), Fate::Undone);
    assert_eq!(log.fate(gathered.epoch, gathered.last_offset), Fate::Undone);
    let again = log.append(&mut leader_batch(0, 3, 0), 0).unwrap();
    assert_eq!(again.base_offset, 3);
    assert_eq!(log.fate(cut.epoch, cut.last_offset), Fate::Undone);
    log.reset_to(100).unwrap();
    assert_eq!(log.fate(kept.epoch, kept.last_offset), Fate::Undone);
    assert_eq!(log.fate(again.epoch, again.last_offset), Fate::Undone);
}

/// Every batch the log shows, as (base offset, leader epoch).
fn batch_epochs(log: &Log) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    while let Some(slice) = log.read(offset, 1 << 16).unwrap() {
        slice.read_into(&mut buf).unwrap();
        let mut at = 0;
        while let Ok(b) = Batch::decode(slice.format, &buf[at..], BATCH_BYTES_MAX) {
            if b.header.base_offset >= offset {
                out.push((b.header.base_offset, b.header.leader_epoch));
                offset = b.header.next_offset();
            }
            at += b.total_bytes();
        }
        assert!(at > 0, "no whole batch at offset {offset}");
    }
    out
}

/// The epoch file agrees with the batches as `klog-dump --verify` wants:
/// the first batch's epoch is the file's there, every later epoch starts
/// in the file at its first batch, no other entry starts inside the log,
/// none past its end; epochs never go down; the log holds what the file
/// says.
fn check_epochs(vfs: &dyn Vfs, dir: &Path, log: &Log, context: &str) {
    let file = file_epochs(vfs, dir);
    assert_eq!(log.epochs().entries(), file, "{context}");
    let mut walked = Epochs::new();
    for &(base, epoch) in &batch_epochs(log) {
        if let Err(why) = walked.check_next(epoch, base) {
            panic!("{context}: {why}");
        }
    }
    for (i, w) in walked.entries().iter().enumerate() {
        let found = if i == 0 {
            log.epochs().epoch_at(w.start_offset) == Some(w.epoch)
        } else {
            file.contains(w)
        };
        assert!(found, "{context}: batches {walked:?}, file {file:?}");
    }
    let (start, end) = (log.start_offset(), log.next_offset());
    for f in &file {
        let inside = f.start_offset > start && f.start_offset < end;
        assert!(
            !inside || walked.entries().contains(f),
            "{context}: {f:?} has no batch; batches {walked:?}"
        );
        assert!(f.start_offset <= end, "{context}: {f:?} past the end {end}");
    }
}

/// The offsets of [`leader_batch`] records the log holds: `from..to`,
/// checked one by one.
fn held(log: &Log, context: &str) -> (u64, u64) {
    let records = values(log);
    let (from, to) = (log.start_offset(), log.next_offset());
    assert_eq!(records, expected(from, to), "{context}");
    (from, to)
}

/// Runs `step` on a log `setup` makes, cutting the power after each
/// change the step makes in turn; after each cut the reopened log is
/// handed to `check` with whether the step returned, then must take a
/// batch of a new epoch at its end and keep it across another power cut.
fn power_cut_at_every_change(
    config: &LogConfig,
    setup: &dyn Fn(&Arc<dyn Vfs>, &Path) -> Log,
    step: &dyn Fn(&mut Log) -> klog::Result<()>,
    check: &dyn Fn(&Log, bool, &str),
) {
    let (reference, vfs, dir) = sim_dir();
    let mut log = setup(&vfs, dir);
    let before = reference.changes();
    step(&mut log).unwrap();
    let total = reference.changes() - before;
    assert!(total >= 2, "{total} changes");
    let mut rng = klog::random::XorShift::new(0x7E91_1CA5);
    for cut in 0..=total {
        let (sim, vfs, dir) = sim_dir();
        let mut log = setup(&vfs, dir);
        sim.cut_power_after(cut);
        let returned = step(&mut log).is_ok();
        drop(log);
        let seed = rng.next();
        sim.crash(&mut |n| (seed as usize) % (n + 1));
        sim.restore_power();
        if cut % 3 == 0 {
            // Recovery cut too.
            sim.cut_power_after(rng.next() % 8);
            let _ = Log::open(Arc::clone(&vfs), dir, config.clone(), WRITE);
            let seed = rng.next();
            sim.crash(&mut |n| (seed as usize) % (n + 1));
            sim.restore_power();
        }
        let context = format!("power cut after {cut} of {total} changes (returned: {returned})");
        let mut log = Log::open(Arc::clone(&vfs), dir, config.clone(), WRITE)
            .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
        check_epochs(&sim, dir, &log, &context);
        check(&log, returned, &context);
        let next = log.next_offset();
        log.append_replicated(&leader_batch(next, 2, 9), 0)
            .unwrap_or_else(|e| panic!("{context}: {e}"));
        log.flush().unwrap();
        drop(log);
        sim.crash(&mut |_| 0);
        let log = Log::open(Arc::clone(&vfs), dir, config.clone(), WRITE).unwrap();
        check_epochs(&sim, dir, &log, &context);
        assert_eq!(log.next_offset(), next + 2, "{context}");
        assert_eq!(log.epochs().latest(), Some(entry(9, next)), "{context}");
    }
}

/// [`long_follower`], with, under the broker's settings, a few more
/// batches gathered in memory and one of them flushed.
fn follower_with_tail(vfs: &Arc<dyn Vfs>, dir: &Path, config: &LogConfig) -> Log {
    let mut log = long_follower(vfs, dir, config.clone());
    log.append_replicated(&leader_batches(60, 63, 3, 4), 0)
        .unwrap();
    log.flush().unwrap();
    log.append_replicated(&leader_batches(63, 69, 3, 4), 0)
        .unwrap();
    log
}

#[test]
fn a_power_cut_at_any_step_of_a_truncation_never_brings_back_what_it_removed() {
    for config in [config(), broker_config()] {
        // Across segments, at a segment's start, inside a batch, below
        // the start.
        for (cut, end) in [(31, 30), (0, 0), (46, 45), (67, 66)] {
            let setup = |vfs: &Arc<dyn Vfs>, dir: &Path| follower_with_tail(vfs, dir, &config);
            let step = |log: &mut Log| log.truncate_to(cut).map(|_| ());
            let check = |log: &Log, returned: bool, context: &str| {
                let (from, to) = held(log, context);
                assert_eq!(from, 0, "{context}");
                if returned {
                    assert_eq!(
                        to, end,
                        "{context}: cut at {cut}: removed records came back"
                    );
                } else {
                    // Records 63.. were never flushed.
                    assert!(
                        to >= end.min(63),
                        "{context}: cut at {cut}: more than the cut removed"
                    );
                }
            };
            power_cut_at_every_change(&config, &setup, &step, &check);
        }
    }
}

#[test]
fn a_power_cut_at_any_step_of_a_reset_leaves_the_old_log_or_the_new_one() {
    for config in [config(), broker_config()] {
        let setup = |vfs: &Arc<dyn Vfs>, dir: &Path| follower_with_tail(vfs, dir, &config);
        // Where a directory left without segments starts again.
        let recovery_point = {
            let (sim, vfs, dir) = sim_dir();
            drop(setup(&vfs, dir));
            klog::storage::recover::read_recovery_point(&sim, dir)
        };
        assert!(recovery_point > 0);
        let step = |log: &mut Log| log.reset_to(1000);
        let check = |log: &Log, returned: bool, context: &str| {
            let (from, to) = held(log, context);
            if returned {
                assert_eq!((from, to), (1000, 1000), "{context}");
            } else if from < to {
                // What the reset had not removed yet: the newest segments.
                assert!(to >= 60, "{context}: {from}..{to}");
            } else {
                // Emptied: at the old recovery point, or at the new start
                // once the reset wrote it there; never back at 0.
                assert!(
                    to == recovery_point || to == 1000,
                    "{context}: {from}..{to}, recovery point {recovery_point}"
                );
            }
        };
        power_cut_at_every_change(&config, &setup, &step, &check);
    }
}

#[test]
fn a_power_cut_at_any_step_of_a_replicated_append_with_a_new_epoch_keeps_what_was_flushed() {
    for config in [config(), broker_config()] {
        let setup = |vfs: &Arc<dyn Vfs>, dir: &Path| {
            let mut log = follower_log(vfs, dir, config.clone());
            log.flush().unwrap();
            log
        };
        let step = |log: &mut Log| {
            let mut bytes = leader_batch(12, 3, 3);
            bytes.extend_from_slice(&leader_batches(15, 24, 3, 5));
            log.append_replicated(&bytes, 0)?;
            log.flush()
        };
        let check = |log: &Log, returned: bool, context: &str| {
            let (from, to) = held(log, context);
            assert_eq!(from, 0, "{context}");
            // Whole records of a torn batch are kept.
            assert!((12..=24).contains(&to), "{context}: {to}");
            if returned {
                assert_eq!(to, 24, "{context}: flushed records lost");
            }
        };
        power_cut_at_every_change(&config, &setup, &step, &check);
    }
}

/// A gap of 2^32 offsets or more (a leader's cleaner took that many in a
/// row) is wider than a segment spans: the follower starts a segment with
/// gaps of its own at the batch past it. The log reads across, recovers
/// after a crash, verifies whole with klog-dump and klog-recover, and a
/// truncation into the gap ends it at the batch before.
#[test]
fn a_gap_wider_than_a_segment_spans_starts_a_segment_of_its_own() {
    let (_tmp, dir, vfs, mut log) = fresh_log();
    log.append_replicated(&leader_batch(0, 2, 1), 0).unwrap();
    let far = 2 + (1u64 << 32);
    log.append_replicated(&leader_batch(far, 2, 1), 0).unwrap();
    log.append_replicated(&leader_batch(far + 2, 2, 1), 0)
        .unwrap();
    assert_eq!(log.next_offset(), far + 4);
    let bases: Vec<u64> = log.segments().map(|s| s.base_offset).collect();
    assert_eq!(bases, [0, far]);
    let read = values(&log);
    assert_eq!(read.len(), 6);
    assert_eq!(read[2].0, far, "{read:?}");
    drop(log);
    let log = Log::open(Arc::clone(&vfs), &dir, config(), WRITE).unwrap();
    assert!(!log.recovery().damaged(), "{:?}", log.recovery());
    assert_eq!((log.next_offset(), values(&log)), (far + 4, read.clone()));
    log.close().unwrap();
    tool_succeeds(env!("CARGO_BIN_EXE_klog-dump"), &["--verify"], &dir);
    tool_succeeds(
        env!("CARGO_BIN_EXE_klog-recover"),
        &["--dry-run", "--full"],
        &dir,
    );
    let mut log = Log::open(Arc::clone(&vfs), &dir, config(), WRITE).unwrap();
    assert_eq!(log.truncate_to(far - 7).unwrap(), 2);
    assert_eq!(values(&log), read[..2]);
}

/// An epoch whose first batches its leader's cleaner took begins, in the
/// follower's epoch file, where the follower's log ended before the gap:
/// klog-dump --verify takes that start (no batch lies between).
#[test]
fn an_epoch_begun_in_a_gap_verifies() {
    let (_tmp, dir, _, mut log) = fresh_log();
    log.append_replicated(&leader_batch(0, 2, 1), 0).unwrap();
    log.append_replicated(&leader_batch(10, 2, 2), 0).unwrap();
    assert_eq!(log.epochs().entries(), [entry(1, 0), entry(2, 2)]);
    log.close().unwrap();
    tool_succeeds(env!("CARGO_BIN_EXE_klog-dump"), &["--verify"], &dir);
}
