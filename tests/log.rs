//! The partition log through the library: crash points, torn tails,
//! damaged indexes, and power loss through the simulated file system.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::log_records as records;

use klog::storage::fs::sim::SimFs;
use klog::storage::fs::{RealFs, Vfs};
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::{Batch, BatchBuilder};

const WRITE: OpenOptions = OpenOptions {
    writable: true,
    lock: false,
};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        index_bytes_max: 4096,
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn batch(first: u64, count: u64) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in first..first + count {
        b.push(1_000 + i as i64, None, &[], format!("value-{i}").as_bytes());
    }
    b.finish().to_vec()
}

/// Every record of the log, as (offset, value text).
fn read_all(log: &Log) -> Vec<(u64, String)> {
    records(log)
        .into_iter()
        .map(|(o, v)| (o, String::from_utf8(v).unwrap()))
        .collect()
}

/// Asserts that the log's records run without a gap from its start to its
/// next offset.
fn assert_gap_free(log: &Log, records: &[(u64, Vec<u8>)], context: &str) {
    for (i, (offset, _)) in records.iter().enumerate() {
        assert_eq!(
            *offset,
            log.start_offset() + i as u64,
            "{context}: gap before {offset}"
        );
    }
    let end = records.last().map_or(log.start_offset(), |r| r.0 + 1);
    assert_eq!(
        end,
        log.next_offset(),
        "{context}: the log ends at its next offset"
    );
}

/// A simulated file system holding an empty partition directory `/p`,
/// durable in its parent.
fn sim_partition() -> (SimFs, Arc<dyn Vfs>, &'static Path) {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/p");
    sim.create_dir_all_durable(dir);
    (sim, vfs, dir)
}

fn open(vfs: &Arc<dyn Vfs>, dir: &Path) -> Log {
    Log::open(Arc::clone(vfs), dir, config(), WRITE).unwrap()
}

#[test]
fn cutting_the_last_record_at_every_byte_keeps_the_whole_ones() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = open(&vfs, dir);
    log.append(&mut batch(0, 3), 0).unwrap();
    let before = sim.read(&dir.join("00000000000000000000.log")).unwrap();
    log.append(&mut batch(3, 4), 0).unwrap();
    drop(log);
    let path = dir.join("00000000000000000000.log");
    let full = sim.read(&path).unwrap();
    let second = &full[before.len()..];
    let mut record_ends = Vec::new();
    let b = Batch::decode(second, 1 << 30).unwrap();
    let mut end = klog::storage::record::BATCH_HEADER_BYTES;
    for r in b.records(1 << 20) {
        end += r.unwrap().encoded_bytes as usize;
        record_ends.push(end);
    }
    for cut in 0..second.len() {
        sim.write(&path, &full[..before.len() + cut]);
        let mut log = open(&vfs, dir);
        let whole = record_ends.iter().filter(|&&e| e <= cut).count() as u64;
        let expected_end = 3 + if cut < klog::storage::record::BATCH_HEADER_BYTES {
            0
        } else {
            whole
        };
        assert_eq!(log.next_offset(), expected_end, "cut at {cut}");
        let records = read_all(&log);
        assert_eq!(records.len() as u64, expected_end, "cut at {cut}");
        for (i, (offset, value)) in records.iter().enumerate() {
            assert_eq!(
                (*offset, value.as_str()),
                (i as u64, format!("value-{i}").as_str())
            );
        }
        let info = log.append(&mut batch(100, 1), 0).unwrap();
        assert_eq!(info.base_offset, expected_end, "cut at {cut}");
        drop(log);
    }
}

#[test]
fn a_zero_filled_tail_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let mut log = open(&vfs, dir.path());
    log.append(&mut batch(0, 5), 0).unwrap();
    drop(log);
    let path = dir.path().join("00000000000000000000.log");
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len + 8192).unwrap();
    let log = open(&vfs, dir.path());
    assert_eq!(log.next_offset(), 5);
    assert!(
        log.recovery().segments[0]
            .problem
            .as_ref()
            .unwrap()
            .torn_tail
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    assert!(!dir.path().join("00000000000000000000.log.corrupt").exists());
}

#[test]
fn damaged_indexes_are_rebuilt_and_lookups_equal_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let mut log = open(&vfs, dir.path());
    for i in 0..200 {
        log.append(&mut batch(i * 3, 3), 0).unwrap();
    }
    log.close().unwrap();
    let logs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert!(logs.len() > 3);
    let expected: Vec<_> = (0..600).map(|i| (i, format!("value-{i}"))).collect();
    // Deleted, truncated, and garbage indexes.
    std::fs::remove_file(logs[0].with_extension("index")).unwrap();
    let idx = logs[1].with_extension("index");
    let len = std::fs::metadata(&idx).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&idx)
        .unwrap()
        .set_len(len / 2 + 3)
        .unwrap();
    std::fs::write(logs[2].with_extension("timeindex"), vec![0xAB; 120]).unwrap();
    std::fs::write(logs[2].with_extension("index"), vec![0xCD; 80]).unwrap();
    let log = open(&vfs, dir.path());
    assert_eq!(read_all(&log), expected);
    for offset in [0u64, 1, 2, 3, 299, 300, 599] {
        let slice = log.read(offset, 1).unwrap().unwrap();
        assert!(slice.first_batch_offset <= offset && offset < slice.first_batch_offset + 3);
    }
    assert_eq!(log.offset_for_timestamp(1_000 + 450).unwrap(), Some(450));
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some(0));
    assert_eq!(log.offset_for_timestamp(9_999).unwrap(), None);
    drop(log);
    // What open rebuilt is on disk now: the files check clean.
    for l in &logs {
        assert!(
            klog::storage::index::read_entries(&RealFs, l).is_ok(),
            "{}",
            l.display()
        );
    }
}

#[test]
fn retention_deletes_whole_segments_from_the_front_never_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let mut log = Log::open(
        Arc::clone(&vfs),
        dir.path(),
        LogConfig {
            retention_bytes: Some(8192),
            ..config()
        },
        WRITE,
    )
    .unwrap();
    for i in 0..300 {
        log.append(&mut batch(i * 3, 3), 0).unwrap();
    }
    let deleted = log.apply_retention(0).unwrap();
    assert!(!deleted.is_empty());
    assert!(log.size_bytes() < 8192 + 4096);
    assert_eq!(
        log.start_offset(),
        *log.segments().next().map(|s| &s.base_offset).unwrap()
    );
    let records = read_all(&log);
    assert_eq!(records.first().unwrap().0, log.start_offset());
    assert_eq!(records.last().unwrap().0, 899);
    drop(log);
    let other = tempfile::tempdir().unwrap();
    let timed_config = LogConfig {
        retention_ms: Some(10),
        ..config()
    };
    let mut log = Log::open(Arc::clone(&vfs), other.path(), timed_config, WRITE).unwrap();
    for i in 0..300 {
        log.append(&mut batch(i * 3, 3), 0).unwrap();
    }
    assert!(log.segments().count() > 1);
    // Newest record of the oldest segment is at 1_000 + a few ms: expired.
    log.apply_retention(1_000_000).unwrap();
    assert_eq!(log.segments().count(), 1);
    assert_eq!(log.next_offset(), 900);
    assert_eq!(read_all(&log).len() as u64, 900 - log.start_offset());
}

/// One step of the power-loss workload.
#[derive(Debug, Clone, Copy)]
enum Step {
    Append(u64),
    Flush,
    Roll,
    Retention,
    Reopen,
}

/// The value stored at `offset`: its length and bytes vary with the offset,
/// so a record moved, duplicated or cut shows.
fn value_at(offset: u64) -> Vec<u8> {
    let len = (offset * 37 % 230) as usize;
    let mut v = format!("{offset}:").into_bytes();
    v.extend((0..len).map(|i| b'a' + ((offset as usize + i) % 26) as u8));
    v
}

fn workload() -> Vec<Step> {
    let mut steps = Vec::new();
    let mut x = 7u64;
    for i in 0..90 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        steps.push(match (x >> 33) % 16 {
            0..=9 => Step::Append(1 + (x >> 40) % 9),
            10 | 11 => Step::Flush,
            12 => Step::Roll,
            13 | 14 => Step::Retention,
            _ if i > 10 => Step::Reopen,
            _ => Step::Flush,
        });
    }
    steps
}

fn power_config(gathered: bool) -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 300,
        index_bytes_max: 4096,
        retention_bytes: Some(9000),
        retention_ms: None,
        flush_messages: Some(11),
        // The broker's way: appends gathered in memory, written together,
        // readers seeing only flushed records.
        visible_after_flush: gathered,
        write_buffer_bytes: if gathered { 3000 } else { 0 },
        ..LogConfig::default()
    }
}

/// The log's (start, flushed, next) offsets.
type Offsets = (u64, u64, u64);

/// Runs `steps` on a fresh log in `vfs`, returning the offsets after each
/// step that completed, and the error of the one that failed.
fn run_workload(
    vfs: &Arc<dyn Vfs>,
    dir: &Path,
    steps: &[Step],
    gathered: bool,
) -> (Vec<Offsets>, Option<klog::Error>) {
    let mut done = Vec::new();
    let result = (|| -> klog::Result<()> {
        vfs.create_dir_all(dir)
            .map_err(|e| klog::Error::io("create", dir, e))?;
        // A directory is durable once its parent is synced.
        for parent in dir.ancestors().skip(1) {
            vfs.sync_dir(parent)
                .map_err(|e| klog::Error::io("fsync directory", parent, e))?;
        }
        let mut log = Log::open(Arc::clone(vfs), dir, power_config(gathered), WRITE)?;
        for (i, step) in steps.iter().enumerate() {
            let now = 1_000 * i as i64;
            match *step {
                Step::Append(n) => {
                    let mut b = BatchBuilder::new();
                    for o in log.next_offset()..log.next_offset() + n {
                        b.push(now, None, &[], &value_at(o));
                    }
                    log.append(&mut b.finish().to_vec(), now)?;
                }
                Step::Flush => log.flush()?,
                Step::Roll => log.roll()?,
                Step::Retention => drop(log.apply_retention(now)?),
                Step::Reopen => {
                    log.close()?;
                    log = Log::open(Arc::clone(vfs), dir, power_config(gathered), WRITE)?;
                }
            }
            done.push((log.start_offset(), log.flushed_offset(), log.next_offset()));
        }
        Ok(())
    })();
    (done, result.err())
}

/// Every record of the log, checked against `value_at`: the offsets run
/// without a gap from the log's start to its end.
fn check_gap_free(log: &Log, context: &str) {
    let records = records(log);
    assert_gap_free(log, &records, context);
    for (offset, value) in &records {
        assert_eq!(*value, value_at(*offset), "{context}: bytes of {offset}");
    }
}

#[test]
fn power_loss_at_every_change_keeps_every_flushed_record_and_a_gap_free_prefix() {
    power_loss_at_every_change(false);
}

#[test]
fn power_loss_with_appends_gathered_in_memory_as_the_broker_does() {
    power_loss_at_every_change(true);
}

fn power_loss_at_every_change(gathered: bool) {
    let steps = workload();
    let dir = Path::new("/data/t-0");
    let reference = SimFs::new();
    let (offsets, err) = run_workload(
        &(Arc::new(reference.clone()) as Arc<dyn Vfs>),
        dir,
        &steps,
        gathered,
    );
    assert!(err.is_none(), "{err:?}");
    let total = reference.changes();
    assert!(
        offsets.iter().filter(|o| o.0 > 0).count() > 5,
        "retention deleted segments"
    );
    assert!(total > 300, "{total} changes is too few cut points");
    let mut rng = klog::random::XorShift::new(0x9E37_79B9);
    let mut next_rand = move || rng.next();
    for cut in 0..total {
        let sim = SimFs::new();
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        sim.cut_power_after(cut);
        let (done, err) = run_workload(&vfs, dir, &steps, gathered);
        assert!(
            err.is_some(),
            "cut {cut}: the workload should have hit the power cut"
        );
        let step = done.len();
        let before = if step == 0 { (0, 0, 0) } else { done[step - 1] };
        let after = offsets[step.min(offsets.len() - 1)];
        let seed = next_rand();
        sim.crash(&mut |n| (seed as usize) % (n + 1));
        sim.restore_power();
        // Recovery itself may be cut too: a klog-recover killed midway.
        if cut % 3 == 0 {
            sim.cut_power_after(next_rand() % 12);
            let _ = Log::open(Arc::clone(&vfs), dir, power_config(gathered), WRITE);
            let seed = next_rand();
            sim.crash(&mut |n| (seed as usize) % (n + 1));
            sim.restore_power();
        }
        let context = format!("cut {cut} during step {step} ({:?})", steps.get(step));
        if !sim.exists(dir) {
            continue;
        }
        let mut log = match Log::open(Arc::clone(&vfs), dir, power_config(gathered), WRITE) {
            Ok(log) => log,
            Err(e) => panic!("{context}: reopen failed: {e}"),
        };
        let (start, next) = (log.start_offset(), log.next_offset());
        assert!(
            next >= before.1,
            "{context}: flushed records lost: end {next} < {}",
            before.1
        );
        assert!(
            next <= after.2,
            "{context}: records appeared: end {next} > {}",
            after.2
        );
        assert!(
            start <= after.0.max(before.0),
            "{context}: start {start} > {}",
            after.0
        );
        assert!(
            start <= before.1.max(after.0),
            "{context}: start {start} past the flushed end"
        );
        check_gap_free(&log, &context);
        // The recovered log takes the next offset and keeps it.
        let mut b = BatchBuilder::new();
        b.push(0, None, &[], &value_at(next));
        assert_eq!(
            log.append(&mut b.finish().to_vec(), 0).unwrap().base_offset,
            next,
            "{context}"
        );
        log.flush().unwrap();
        drop(log);
        sim.crash(&mut |_| 0);
        let log = Log::open(Arc::clone(&vfs), dir, power_config(gathered), WRITE).unwrap();
        assert_eq!(
            log.next_offset(),
            next + 1,
            "{context}: the flushed append survives"
        );
        check_gap_free(&log, &context);
    }
}

/// Random bytes as a segment header, as index files, and as a whole
/// partition (a valid segment mutated, or garbage): decoding, recovery and
/// opening return errors or repaired logs, and never panic.
#[test]
fn random_bytes_in_segments_and_indexes_never_panic() {
    let mut rng = klog::random::XorShift::new(0x2545_F491_4F6C_DD1D);
    let mut next = move || rng.next();
    // A small valid partition to mutate.
    let template = SimFs::new();
    let tvfs: Arc<dyn Vfs> = Arc::new(template.clone());
    let dir = Path::new("/p");
    tvfs.create_dir_all(dir).unwrap();
    let mut log = open(&tvfs, dir);
    for i in 0..20 {
        log.append(&mut batch(i * 3, 3), i as i64).unwrap();
    }
    log.close().unwrap();
    let names = [
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ];
    let originals: Vec<Vec<u8>> = names
        .iter()
        .map(|n| template.read(&dir.join(n)).unwrap())
        .collect();
    for round in 0..3_000 {
        let header: Vec<u8> = (0..(next() % 40)).map(|_| next() as u8).collect();
        let _ = klog::storage::segment::decode_header(&header);
        let sim = SimFs::new();
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        vfs.create_dir_all(dir).unwrap();
        for (name, original) in names.iter().zip(&originals) {
            let mut bytes = if round % 4 == 3 {
                (0..(next() % 600)).map(|_| next() as u8).collect()
            } else {
                original.clone()
            };
            for _ in 0..(next() % 6) {
                if !bytes.is_empty() {
                    let i = (next() as usize) % bytes.len();
                    bytes[i] = next() as u8;
                }
            }
            if round % 7 == 0 {
                bytes.truncate((next() as usize) % (bytes.len() + 1));
            }
            sim.write(&dir.join(name), &bytes);
        }
        let log_path = dir.join(names[0]);
        let _ = klog::storage::index::read_entries(&sim, &log_path);
        let read_only = OpenOptions {
            writable: false,
            lock: false,
        };
        if let Ok(log) = Log::open(Arc::clone(&vfs), dir, config(), read_only) {
            let _ = log.read(log.start_offset(), 1 << 12);
        }
        // Not cleanly closed: the writer recovers from offset 0.
        let _ = vfs.remove(&dir.join("clean-shutdown"));
        if let Ok(mut log) = Log::open(Arc::clone(&vfs), dir, config(), WRITE) {
            check_records_readable(&log);
            let next = log.next_offset();
            assert_eq!(log.append(&mut batch(0, 1), 0).unwrap().base_offset, next);
        }
    }
}

/// Reads the whole log; every record decodes, without a gap.
fn check_records_readable(log: &Log) {
    assert_gap_free(log, &records(log), "after recovery");
}

#[test]
fn a_segment_rolls_at_the_first_append_after_it_is_older_than_the_segment_age() {
    let (sim, vfs, dir) = sim_partition();
    let age = LogConfig {
        segment_age_ms: Some(100),
        ..config()
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, age.clone(), WRITE).unwrap();
    let bases = |log: &Log| log.segments().map(|s| s.base_offset).collect::<Vec<_>>();
    log.append(&mut batch(0, 2), 1_000).unwrap();
    log.append(&mut batch(2, 2), 1_099).unwrap();
    assert_eq!(bases(&log), [0], "younger than the age: no roll");
    log.append(&mut batch(4, 2), 1_100).unwrap();
    assert_eq!(
        bases(&log),
        [0, 4],
        "as old as the age: rolled before the append"
    );
    sim.set_clock_ms(1_150);
    log.append(&mut batch(6, 1), 1_150).unwrap();
    assert_eq!(bases(&log), [0, 4]);
    // Record timestamps do not matter: records produced with old ones
    // (a replayed dump) do not roll a segment at every append.
    let mut old = BatchBuilder::new();
    old.push(5, None, &[], b"from 1970");
    log.append(&mut old.finish().to_vec(), 1_160).unwrap();
    assert_eq!(bases(&log), [0, 4]);
    // After a restart the segment's modification time stands in for its
    // first append.
    log.close().unwrap();
    let mut log = Log::open(Arc::clone(&vfs), dir, age, WRITE).unwrap();
    log.append(&mut batch(8, 1), 1_249).unwrap();
    assert_eq!(bases(&log), [0, 4]);
    log.append(&mut batch(9, 1), 1_250).unwrap();
    assert_eq!(bases(&log), [0, 4, 9]);
    assert_eq!(read_all(&log).len(), 10);
}

#[test]
fn retention_by_time_judges_the_append_time_also_after_a_restart() {
    let (sim, vfs, dir) = sim_partition();
    let timed = LogConfig {
        retention_ms: Some(1_000),
        ..config()
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, timed.clone(), WRITE).unwrap();
    // Old producer timestamps (1_000 + i) do not expire fresh segments.
    for (i, now) in [(0u64, 10_000i64), (3, 10_000), (6, 20_000), (9, 30_000)] {
        sim.set_clock_ms(now);
        log.append(&mut batch(i, 3), now).unwrap();
        log.roll().unwrap();
    }
    assert_eq!(log.apply_retention(10_500).unwrap(), Vec::<u64>::new());
    assert_eq!(log.apply_retention(11_001).unwrap(), [0, 3]);
    log.close().unwrap();
    let mut log = Log::open(Arc::clone(&vfs), dir, timed, WRITE).unwrap();
    assert_eq!(log.apply_retention(21_000).unwrap(), Vec::<u64>::new());
    assert_eq!(log.apply_retention(21_001).unwrap(), [6]);
    // Never the active segment, however old.
    assert_eq!(log.apply_retention(i64::MAX).unwrap(), [9]);
    assert_eq!(log.segments().count(), 1);
    assert_eq!(log.start_offset(), 12);
}

/// A partition of three segments with a flipped byte inside the first, not
/// closed cleanly: its files by path.
fn damaged_partition(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    vfs.create_dir_all(dir).unwrap();
    let mut log = open(&vfs, dir);
    for i in 0..120 {
        log.append(&mut batch(i * 3, 3), 0).unwrap();
    }
    assert!(log.segments().count() >= 3);
    log.close().unwrap();
    let first = dir.join("00000000000000000000.log");
    let mut bytes = sim.read(&first).unwrap();
    bytes[2_000] ^= 0x40;
    sim.write(&first, &bytes);
    vfs.remove(&dir.join("clean-shutdown")).unwrap();
    sim.files()
}

fn sim_with(dir: &Path, files: &std::collections::BTreeMap<std::path::PathBuf, Vec<u8>>) -> SimFs {
    let sim = SimFs::new();
    sim.create_dir_all(dir).unwrap();
    for (path, bytes) in files {
        sim.write(path, bytes);
    }
    sim
}

#[test]
fn recovery_killed_at_any_change_then_run_again_ends_in_the_same_files() {
    use klog::storage::recover::{recover_partition, RecoverOptions};
    let dir = Path::new("/d/t-0");
    let damaged = damaged_partition(dir);
    let options = RecoverOptions {
        full: true,
        dry_run: false,
        automatic: false,
        trust_last: false,
        index_interval_bytes: 256,
    };
    let reference = sim_with(dir, &damaged);
    let start = reference.changes();
    let report = recover_partition(&reference, dir, 0, &options).unwrap();
    assert!(report.damaged() && !report.quarantined.is_empty());
    let expected = reference.files();
    assert!(expected
        .keys()
        .any(|p| p.to_string_lossy().ends_with(".log.corrupt")));
    let changes = reference.changes() - start;
    assert!(changes > 5, "{changes}");
    for cut in 0..changes {
        let sim = sim_with(dir, &damaged);
        sim.cut_power_after(cut);
        assert!(
            recover_partition(&sim, dir, 0, &options).is_err(),
            "cut {cut}"
        );
        // Killed, not a power cut: what it wrote stays. Run it again.
        sim.restore_power();
        recover_partition(&sim, dir, 0, &options).unwrap();
        let files = sim.files();
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "killed after {cut} changes"
        );
        let differ: Vec<_> = files
            .iter()
            .filter(|(p, b)| expected[*p] != **b)
            .map(|(p, _)| p)
            .collect();
        assert!(
            differ.is_empty(),
            "killed after {cut} changes: {differ:?} differ"
        );
        let again = recover_partition(&sim, dir, 0, &options).unwrap();
        assert!(
            !again.changed(),
            "killed after {cut} changes: a third run changed {again:?}"
        );
    }
}

/// The broker's group commit: a flush begun under the lock and synced
/// outside it covers exactly what was appended before it began; records
/// become visible only when it completes.
#[test]
fn a_flush_synced_outside_the_lock_covers_what_preceded_it() {
    let (sim, vfs, dir) = sim_partition();
    let hidden = LogConfig {
        visible_after_flush: true,
        ..config()
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, hidden.clone(), WRITE).unwrap();
    log.append(&mut batch(0, 3), 0).unwrap();
    assert_eq!(log.visible_offset(), 0, "not visible before a flush");
    assert!(log.read(0, 1 << 16).unwrap().is_none());
    let pending = log.begin_flush().unwrap().unwrap();
    log.append(&mut batch(3, 2), 0).unwrap();
    pending.sync().unwrap();
    log.complete_flush(&pending);
    assert_eq!((log.flushed_offset(), log.visible_offset()), (3, 3));
    let slice = log.read(0, 1 << 16).unwrap().unwrap();
    assert_eq!(
        slice.len,
        sim.read(&slice.path).unwrap().len() as u64 - slice.position - {
            // The second batch is appended but not visible.
            let b = batch(3, 2);
            b.len() as u64
        }
    );
    drop(log);
    // Power loss: the synced records survive (the fsync may have carried
    // later ones along too).
    sim.crash(&mut |_| 0);
    let log = Log::open(Arc::clone(&vfs), dir, hidden, WRITE).unwrap();
    assert!(log.next_offset() >= 3);
    assert_eq!(read_all(&log).len() as u64, log.next_offset());
}

/// Appends gathered in memory reach the file at a flush (or when enough
/// gather); a failed write of them refuses every later append until the
/// log is reopened and recovered.
#[test]
fn gathered_appends_are_written_by_a_flush_and_a_failed_write_stops_the_log() {
    let (sim, vfs, dir) = sim_partition();
    let gathered = LogConfig {
        visible_after_flush: true,
        write_buffer_bytes: 1 << 20,
        ..config()
    };
    let path = dir.join("00000000000000000000.log");
    let mut log = Log::open(Arc::clone(&vfs), dir, gathered.clone(), WRITE).unwrap();
    let empty = sim.read(&path).unwrap().len();
    log.append(&mut batch(0, 3), 0).unwrap();
    log.append(&mut batch(3, 3), 0).unwrap();
    assert_eq!(
        sim.read(&path).unwrap().len(),
        empty,
        "gathered, not written yet"
    );
    log.flush().unwrap();
    assert!(
        sim.read(&path).unwrap().len() > empty,
        "a flush writes them"
    );
    assert_eq!(read_all(&log).len(), 6);
    // The next write fails: the log refuses appends and flushes from then on.
    log.append(&mut batch(6, 2), 0).unwrap();
    sim.cut_power_after(0);
    assert!(log.flush().is_err());
    sim.restore_power();
    assert!(log.append(&mut batch(8, 1), 0).is_err());
    assert!(log.write_pending().is_err());
    drop(log);
    let log = Log::open(Arc::clone(&vfs), dir, gathered, WRITE).unwrap();
    assert_eq!(
        log.next_offset(),
        6,
        "what was written survives, nothing else"
    );
}

/// Retention in two steps, as the broker runs it: the segments leave the
/// log under its lock, their files go after. In between, the log appends
/// and reads from its new start; a power cut before the files go brings
/// the old segments back whole (nothing acknowledged is lost, no gap), and
/// the next retention deletes them again.
#[test]
fn segments_taken_out_by_retention_are_deleted_after_and_a_crash_between_loses_nothing() {
    let (sim, vfs, dir) = sim_partition();
    let timed = LogConfig {
        retention_ms: Some(1_000),
        ..config()
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, timed.clone(), WRITE).unwrap();
    for (i, now) in [(0u64, 10_000i64), (3, 10_000), (6, 20_000)] {
        sim.set_clock_ms(now);
        log.append(&mut batch(i, 3), now).unwrap();
        log.roll().unwrap();
    }
    let expired = log.take_expired(11_001);
    assert_eq!(log.start_offset(), 6, "out of the log at once");
    let first = dir.join("00000000000000000000.log");
    assert!(sim.exists(&first), "the files stay until deleted");
    log.append(&mut batch(9, 3), 20_000).unwrap();
    log.flush().unwrap();
    assert_eq!(read_all(&log).first().map(|r| r.0), Some(6));
    // The power goes before the files do.
    sim.crash(&mut |n| n);
    sim.restore_power();
    drop(expired);
    drop(log);
    let mut log = Log::open(Arc::clone(&vfs), dir, timed, WRITE).unwrap();
    assert_eq!(log.start_offset(), 0, "the old segments are back");
    let back: Vec<u64> = read_all(&log).iter().map(|r| r.0).collect();
    assert_eq!(back, (0..12).collect::<Vec<_>>(), "nothing lost, no gap");
    let deleted = log.take_expired(11_001).delete().unwrap();
    assert_eq!(deleted, [0, 3]);
    assert!(!sim.exists(&first) && log.start_offset() == 6);
}
