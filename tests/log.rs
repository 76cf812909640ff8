//! The partition log through the library: crash points, torn tails,
//! damaged indexes, and power loss through the simulated file system.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::log_records as records;

use klog::storage::fs::sim::SimFs;
use klog::storage::fs::{RealFs, Vfs};
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::BatchBuilder;

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

/// A torn write of the last batch, cut at any byte: the batch is the unit
/// of a Kafka batch's CRC32C, so recovery keeps the whole batches before
/// it and none of its records.
#[test]
fn cutting_the_last_batch_at_every_byte_keeps_the_whole_batches_before_it() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = open(&vfs, dir);
    log.append(&mut batch(0, 3), 0).unwrap();
    let before = sim.read(&dir.join("00000000000000000000.log")).unwrap();
    log.append(&mut batch(3, 4), 0).unwrap();
    drop(log);
    let path = dir.join("00000000000000000000.log");
    let full = sim.read(&path).unwrap();
    let second = &full[before.len()..];
    for cut in 0..second.len() {
        sim.write(&path, &full[..before.len() + cut]);
        let mut log = open(&vfs, dir);
        let expected_end = 3;
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
    assert!(
        log.complete_flush(&pending).unwrap().is_none(),
        "no segment renamed"
    );
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

/// A log configured as the broker opens one, with small segments: appends
/// gathered in memory, readers seeing flushed records only, no flush
/// policy of its own (the flusher flushes from outside).
fn broker_config() -> LogConfig {
    LogConfig {
        visible_after_flush: true,
        write_buffer_bytes: 3000,
        flush_messages: None,
        ..power_config(true)
    }
}

/// Appends `count` records (values by offset) at `now`.
fn append_values(log: &mut Log, count: u64, now: i64) -> klog::Result<()> {
    let mut b = BatchBuilder::new();
    for o in log.next_offset()..log.next_offset() + count {
        b.push(now, None, &[], &value_at(o));
    }
    log.append(&mut b.finish().to_vec(), now).map(drop)
}

/// A flush as the broker's flusher runs one: begun under the lock, synced
/// outside it, completed, and published when it renamed a segment; a
/// failed sync stops the log.
fn broker_flush(log: &mut Log) -> klog::Result<()> {
    broker_flush_seen(log, &mut 0)
}

/// [`broker_flush`], noting in `seen` the flushed offset after each step:
/// what readers may see, and acks=all producers are told is durable.
fn broker_flush_seen(log: &mut Log, seen: &mut u64) -> klog::Result<()> {
    let Some(flush) = log.begin_flush()? else {
        return Ok(());
    };
    flush.sync().map_err(|e| log.fail(&e))?;
    let publish = log.complete_flush(&flush)?;
    *seen = log.flushed_offset();
    if let Some(publish) = publish {
        publish.sync().map_err(|e| log.fail(&e))?;
        log.complete_publish(&publish);
        *seen = log.flushed_offset();
    }
    Ok(())
}

/// The next segment made ahead of its roll, as the flusher does (a
/// failure is no harm: the roll makes its own).
fn prepare_ahead(log: &mut Log) {
    if let Some(prep) = log.segment_to_prepare() {
        let made = prep.create();
        let _ = log.give_prepared(made);
    }
}

/// The broker's way through a log of small segments: appends, flushes
/// outside the lock (every third append), next segments made ahead of
/// some rolls and not others, retention now and then, and a directory
/// fsync after every other append: a real file system may make the names
/// a directory holds durable at any moment (a journal commit), the
/// simulated one only at a directory fsync, so the workload runs one at
/// every point of a roll. `acked` is
/// what an acks=all producer was told is durable (the flushed offset) when
/// the run stopped.
fn broker_way(vfs: &Arc<dyn Vfs>, dir: &Path, acked: &mut u64) -> klog::Result<u64> {
    vfs.create_dir_all(dir)
        .map_err(|e| klog::Error::io("create", dir, e))?;
    for parent in dir.ancestors().skip(1) {
        vfs.sync_dir(parent)
            .map_err(|e| klog::Error::io("fsync directory", parent, e))?;
    }
    let mut log = Log::open(Arc::clone(vfs), dir, broker_config(), WRITE)?;
    let mut rolls = 0;
    for i in 0..60u64 {
        let before = log.segments().count();
        append_values(&mut log, 1 + i % 4, i as i64)?;
        rolls += log.segments().count() - before;
        if i % 2 == 1 {
            vfs.sync_dir(dir)
                .map_err(|e| klog::Error::io("fsync directory", dir, e))?;
        }
        if i % 5 == 1 {
            log.take_expired(i as i64).delete()?;
        }
        if i % 3 == 2 {
            broker_flush_seen(&mut log, acked)?;
            if i % 2 == 0 {
                prepare_ahead(&mut log);
            }
        }
    }
    Ok(rolls as u64)
}

/// A power cut at every change of a run that rolls segments the broker's
/// way (nothing synced by the roll, the old segment synced and the new one
/// named by the flush after it, outside the lock) loses no record the
/// producer was told is durable, leaves no gap and no segment after a torn
/// one (opening refuses those), and gives the next append the offset after
/// the last record kept.
#[test]
fn a_power_cut_at_every_step_of_a_roll_loses_no_acknowledged_record() {
    let dir = Path::new("/data/t-0");
    let reference = SimFs::new();
    let mut acked_all = 0;
    let rolls = broker_way(
        &(Arc::new(reference.clone()) as Arc<dyn Vfs>),
        dir,
        &mut acked_all,
    )
    .unwrap();
    assert!(rolls >= 4, "{rolls} rolls is too few");
    assert!(
        !reference.exists(&dir.join("00000000000000000000.log")),
        "retention deleted segments"
    );
    let total = reference.changes();
    let mut rng = klog::random::XorShift::new(0x5DEE_CE66);
    for cut in 0..total {
        let sim = SimFs::new();
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        sim.cut_power_after(cut);
        let mut acked = 0;
        assert!(broker_way(&vfs, dir, &mut acked).is_err(), "cut {cut}");
        let seed = rng.next();
        sim.crash(&mut |n| seed as usize % (n + 1));
        sim.restore_power();
        let context = format!("cut {cut} of {total}, {acked} acknowledged");
        if !sim.exists(dir) {
            assert_eq!(acked, 0, "{context}");
            continue;
        }
        let mut log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE)
            .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
        let next = log.next_offset();
        assert!(
            next >= acked,
            "{context}: acknowledged records lost: end {next}"
        );
        check_gap_free(&log, &context);
        let leftovers: Vec<_> = sim
            .files()
            .into_keys()
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                p.starts_with(dir) && (name.ends_with(".tmp") || name.starts_with("next-"))
            })
            .collect();
        assert!(leftovers.is_empty(), "{context}: {leftovers:?}");
        append_values(&mut log, 1, 0).unwrap();
        broker_flush(&mut log).unwrap();
        assert_eq!(log.flushed_offset(), next + 1, "{context}: the next offset");
    }
}

/// An fsync of the new segment (made ahead, still under its temporary
/// name) that fails stops the log cleanly: the producer waiting for those
/// records hears a storage error, nothing it was told is durable is lost,
/// and after a restart the log goes on from what is on disk.
#[test]
fn a_failed_fsync_of_the_new_segment_stops_the_log_and_loses_nothing_acknowledged() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE).unwrap();
    while log.segment_to_prepare().is_none_or(|prep| {
        let made = prep.create();
        log.give_prepared(made).unwrap();
        false
    }) {
        append_values(&mut log, 3, 0).unwrap();
        broker_flush(&mut log).unwrap();
    }
    let segments = log.segments().count();
    while log.segments().count() == segments {
        append_values(&mut log, 3, 0).unwrap();
    }
    // Everything before the roll is durable; what follows is not yet.
    let before = log.segments().last().unwrap().base_offset;
    let acked = log.flushed_offset();
    sim.fail_next_sync(|p| p.to_string_lossy().ends_with("next-1.log"));
    let err = broker_flush(&mut log).unwrap_err();
    assert!(matches!(err, klog::Error::StorageFailed { .. }), "{err}");
    assert_eq!(log.flushed_offset(), acked, "nothing more is durable");
    assert!(log.flushed_offset() <= before);
    let refused = append_values(&mut log, 1, 0).unwrap_err();
    assert!(refused.to_string().contains("failed fsync"), "{refused}");
    drop(log);
    sim.crash(&mut |n| n);
    sim.restore_power();
    let mut log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE).unwrap();
    assert!(log.next_offset() >= acked);
    check_gap_free(&log, "after the restart");
    let next = log.next_offset();
    append_values(&mut log, 1, 0).unwrap();
    broker_flush(&mut log).unwrap();
    assert_eq!(log.flushed_offset(), next + 1);
}

/// A full disk when a roll writes the new segment's header fails that
/// append alone: no offset is taken, and once there is room the log goes
/// on where it was.
#[test]
fn a_full_disk_at_a_roll_fails_the_append_and_the_log_goes_on() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE).unwrap();
    while log.segments().count() == 1 {
        append_values(&mut log, 3, 0).unwrap();
        broker_flush(&mut log).unwrap();
        prepare_ahead(&mut log);
    }
    // Up to the append that rolls: its roll needs a block for the next
    // segment's header, and the disk has none.
    let batch = |log: &Log| {
        let mut b = BatchBuilder::new();
        for o in log.next_offset()..log.next_offset() + 9 {
            b.push(0, None, &[], &value_at(o));
        }
        b.finish().to_vec()
    };
    loop {
        broker_flush(&mut log).unwrap();
        let active = log.segments().last().unwrap().size;
        if active + batch(&log).len() as u64 > broker_config().segment_bytes {
            break;
        }
        log.append(&mut batch(&log), 0).unwrap();
    }
    let (count, next) = (log.segments().count(), log.next_offset());
    // Room for the producer snapshot the roll writes first, and no more.
    let snapshot = klog::storage::fs::sim::SIM_BLOCK_BYTES;
    sim.set_capacity(Some(sim.allocated() + snapshot));
    let err = log.append(&mut batch(&log), 0).unwrap_err();
    let klog::Error::DiskFull { path, .. } = &err else {
        panic!("{err}");
    };
    let name = path.file_name().unwrap().to_string_lossy();
    assert!(
        name.starts_with("next-"),
        "the next segment's header: {err}"
    );
    assert_eq!((log.segments().count(), log.next_offset()), (count, next));
    sim.set_capacity(None);
    let next = log.next_offset();
    append_values(&mut log, 9, 0).unwrap();
    broker_flush(&mut log).unwrap();
    assert_eq!(log.flushed_offset(), next + 9);
    drop(log);
    sim.crash(&mut |_| 0);
    let log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE).unwrap();
    assert_eq!(log.next_offset(), next + 9, "all flushed, all back");
    check_gap_free(&log, "after the restart");
}

/// A log with no flush policy (an embedded writer: its readers, in other
/// processes too, see records as soon as they are appended) gives each
/// segment its own name, durably, when it rolls: a reader finds every
/// segment, and a killed writer (whose page cache survives) loses none.
#[test]
fn without_a_flush_policy_a_rolled_segment_is_named_and_durable_at_once() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = open(&vfs, dir);
    while log.segments().count() < 3 {
        let first = log.next_offset();
        log.append(&mut batch(first, 5), 0).unwrap();
    }
    let next = log.next_offset();
    let read_only = OpenOptions {
        writable: false,
        lock: false,
    };
    let reader = Log::open(Arc::clone(&vfs), dir, config(), read_only).unwrap();
    assert_eq!(reader.next_offset(), next, "a reader sees every segment");
    drop(reader);
    let bases: Vec<u64> = log.segments().map(|s| s.base_offset).collect();
    drop(log);
    sim.crash_process();
    let log = open(&vfs, dir);
    assert_eq!(log.next_offset(), next, "a killed writer loses nothing");
    sim.crash(&mut |_| 0);
    let log_after_power = open(&vfs, dir);
    let kept: Vec<u64> = log_after_power.segments().map(|s| s.base_offset).collect();
    assert_eq!(kept, bases, "every rolled segment was durable");
    drop(log);
}

/// A writer killed between a roll and the flush after it (the page cache
/// keeps every byte) loses no record: opening the log adopts the segments
/// still under temporary names, which continue it exactly, and appends go
/// on at the next offset.
#[test]
fn a_writer_killed_between_a_roll_and_its_flush_loses_no_record() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE).unwrap();
    append_values(&mut log, 3, 0).unwrap();
    broker_flush(&mut log).unwrap();
    // Two rolls, one with the next segment made ahead, and no flush.
    prepare_ahead(&mut log);
    while log.segments().count() < 3 {
        append_values(&mut log, 4, 0).unwrap();
    }
    append_values(&mut log, 2, 0).unwrap();
    log.write_pending().unwrap();
    let next = log.next_offset();
    drop(log);
    sim.crash_process();
    let mut log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE).unwrap();
    assert_eq!(log.next_offset(), next, "every record written is back");
    check_gap_free(&log, "after the kill");
    assert!(log.segments().count() >= 3);
    assert!(
        !sim.files()
            .keys()
            .any(|p| p.to_string_lossy().contains("next-")),
        "no temporary name is left"
    );
    append_values(&mut log, 1, 0).unwrap();
    broker_flush(&mut log).unwrap();
    assert_eq!(log.flushed_offset(), next + 1);
}

/// No descriptor left when a flush opens the recovery point's temporary
/// file or the directory to fsync (EMFILE: a flood of clients, or too many
/// files open for reads) is no failed fsync: the flush fails, the log does
/// not stop, and the next flush makes everything durable and visible. As
/// it was, the log stopped until a restart.
#[test]
fn a_flush_without_a_descriptor_left_fails_and_the_next_one_goes() {
    for opened in ["recovery-point", "/p"] {
        let (sim, vfs, dir) = sim_partition();
        let config = LogConfig {
            visible_after_flush: true,
            ..config()
        };
        let mut log = Log::open(Arc::clone(&vfs), dir, config, WRITE).unwrap();
        for i in 0..40 {
            log.append(&mut batch(i * 5, 5), 0).unwrap();
        }
        assert!(log.segments().count() > 1, "rolled: a publish is due");
        let target = opened.to_string();
        sim.fail_next_open(move |p| p.to_string_lossy().contains(&target));
        let failed = log.flush().unwrap_err();
        assert!(
            klog::storage::files::out_of_descriptors(&failed),
            "{failed}"
        );
        assert!(!log.failed(), "{opened}: the log goes on");
        log.flush().unwrap();
        assert_eq!(read_all(&log).len(), 200, "{opened}");
        log.close().unwrap();
    }
}
