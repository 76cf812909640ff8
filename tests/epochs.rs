//! Leader epochs in the log: stamped into every batch, recorded in the
//! partition's epoch file when they rise, true to the batches after a power
//! cut at any point, rebuilt by recovery, and shown and checked by
//! `klog-dump`.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::bin;

use klog::limits::BATCH_BYTES_MAX;
use klog::storage::epoch::{EpochEntry, Epochs, EPOCH_FILE};
use klog::storage::fs::sim::SimFs;
use klog::storage::fs::{RealFs, Vfs};
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::{self, Batch, BatchBuilder};

const WRITE: OpenOptions = OpenOptions {
    writable: true,
    lock: false,
};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 300,
        index_bytes_max: 4096,
        retention_ms: None,
        ..LogConfig::default()
    }
}

fn batch(values: &[&str]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for v in values {
        b.push(1_000, None, &[], v.as_bytes());
    }
    b.finish().to_vec()
}

fn entry(epoch: u32, start_offset: u64) -> EpochEntry {
    EpochEntry {
        epoch,
        start_offset,
    }
}

/// Every batch the log shows, as (base offset, magic, leader epoch).
fn batch_epochs(log: &Log) -> Vec<(u64, u8, u32)> {
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    while let Some(slice) = log.read(offset, 1 << 16).unwrap() {
        slice.read_into(&mut buf).unwrap();
        let mut at = 0;
        while let Ok(b) = Batch::decode(slice.format, &buf[at..], BATCH_BYTES_MAX) {
            if b.header.base_offset >= offset {
                out.push((b.header.base_offset, b.header.magic, b.header.leader_epoch));
                offset = b.header.next_offset();
            }
            at += b.total_bytes();
        }
        assert!(at > 0, "no whole batch at offset {offset}");
    }
    out
}

/// The epoch file on disk, decoded.
fn file_epochs(vfs: &dyn Vfs, dir: &Path) -> Epochs {
    Epochs::read(vfs, dir)
        .unwrap()
        .expect("an epoch file")
        .expect("an epoch file that decodes")
}

/// The epochs of the batches, in the file's terms: each epoch from its
/// first batch.
fn epochs_of(batches: &[(u64, u8, u32)]) -> Vec<EpochEntry> {
    let mut seen = Epochs::new();
    for &(base, _, epoch) in batches {
        seen.check_next(epoch, base).unwrap();
    }
    seen.entries().to_vec()
}

#[test]
fn the_log_stamps_its_epoch_into_every_batch_and_records_each_rise() {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/p");
    sim.create_dir_all_durable(dir);
    let mut log = Log::open(Arc::clone(&vfs), dir, config(), WRITE).unwrap();
    // A single copy: epoch 0 from the start, written once at creation.
    assert_eq!(log.leader_epoch(), 0);
    assert_eq!(file_epochs(&sim, dir).entries(), [entry(0, 0)]);
    log.append(&mut batch(&["a", "b"]), 0).unwrap();
    let file = sim.read(&dir.join(EPOCH_FILE)).unwrap();
    log.append(&mut batch(&["c"]), 0).unwrap();
    assert_eq!(
        sim.read(&dir.join(EPOCH_FILE)).unwrap(),
        file,
        "the same epoch: untouched"
    );
    log.set_leader_epoch(2).unwrap();
    // Raised, and nothing written until a batch of the epoch is.
    assert_eq!(file_epochs(&sim, dir).entries(), [entry(0, 0)]);
    log.append(&mut batch(&["d"]), 0).unwrap();
    log.append(&mut batch(&["e", "f"]), 0).unwrap();
    log.set_leader_epoch(2).unwrap();
    log.set_leader_epoch(5).unwrap();
    log.roll().unwrap();
    log.append(&mut batch(&["g"]), 0).unwrap();
    let err = log.set_leader_epoch(4).unwrap_err().to_string();
    assert!(
        err.contains("leader epoch 4 is below the log's epoch 5"),
        "{err}"
    );
    assert_eq!(log.leader_epoch(), 5);
    log.flush().unwrap();
    let expected = [entry(0, 0), entry(2, 3), entry(5, 6)];
    assert_eq!(
        batch_epochs(&log),
        [(0, 2, 0), (2, 2, 0), (3, 2, 2), (4, 2, 2), (6, 2, 5)]
    );
    assert_eq!(log.epochs().entries(), expected);
    assert_eq!(file_epochs(&sim, dir).entries(), expected);
    assert_eq!(log.end_offset_for_epoch(0), Some((0, 3)));
    assert_eq!(log.end_offset_for_epoch(3), Some((2, 6)));
    assert_eq!(log.end_offset_for_epoch(5), Some((5, 7)));
    assert_eq!(log.end_offset_for_epoch(6), None);
    log.close().unwrap();
    // Reopened, the log goes on in its latest epoch, never an older one.
    let log = Log::open(Arc::clone(&vfs), dir, config(), WRITE).unwrap();
    assert_eq!(log.leader_epoch(), 5);
    assert_eq!(log.epochs().entries(), expected);
}

/// One step of the power-cut workload.
#[derive(Debug, Clone, Copy)]
enum Step {
    Append(u64),
    Epoch(u32),
    Flush,
    Roll,
    Reopen,
}

fn workload() -> Vec<Step> {
    let mut steps = Vec::new();
    let mut x = 11u64;
    let mut epoch = 0;
    for _ in 0..70 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        steps.push(match (x >> 33) % 12 {
            0..=5 => Step::Append(1 + (x >> 40) % 5),
            6 | 7 => {
                // Sometimes a rise with no batch before the next one.
                epoch += 1 + (x >> 40) as u32 % 2;
                Step::Epoch(epoch)
            }
            8 => Step::Flush,
            9 => Step::Roll,
            _ => Step::Reopen,
        });
    }
    steps
}

/// The workload's configuration; `gathered`: the broker's, appends
/// gathered in memory and readers seeing flushed records only.
fn power_config(gathered: bool) -> LogConfig {
    LogConfig {
        visible_after_flush: gathered,
        write_buffer_bytes: if gathered { 200 } else { 0 },
        ..config()
    }
}

fn run_workload(
    vfs: &Arc<dyn Vfs>,
    dir: &Path,
    steps: &[Step],
    gathered: bool,
) -> (usize, Option<klog::Error>) {
    let config = || power_config(gathered);
    let mut done = 0;
    let result = (|| -> klog::Result<()> {
        let mut log = Log::open(Arc::clone(vfs), dir, config(), WRITE)?;
        for step in steps {
            match *step {
                Step::Append(n) => {
                    let mut b = BatchBuilder::new();
                    for o in log.next_offset()..log.next_offset() + n {
                        b.push(0, None, &[], format!("v{o}").as_bytes());
                    }
                    log.append(&mut b.finish().to_vec(), 0)?;
                }
                Step::Epoch(e) => log.set_leader_epoch(e)?,
                Step::Flush => log.flush()?,
                Step::Roll => log.roll()?,
                Step::Reopen => {
                    let epoch = log.leader_epoch();
                    log.close()?;
                    log = Log::open(Arc::clone(vfs), dir, config(), WRITE)?;
                    // A replica made leader again is told its epoch again.
                    log.set_leader_epoch(epoch)?;
                }
            }
            done += 1;
        }
        Ok(())
    })();
    (done, result.err())
}

/// The epoch invariants of an opened log: its batches' epochs never go
/// down; its epochs (in memory and in the file) are exactly theirs, each
/// from its first batch, plus at most one epoch starting at the log's end
/// that has no batch yet; and the log goes on in its latest.
fn check_epochs(sim: &SimFs, dir: &Path, log: &Log, context: &str) {
    let batches = batch_epochs(log);
    let mut seen = Epochs::new();
    for &(base, magic, epoch) in &batches {
        assert_eq!(magic, record::MAGIC, "{context}");
        if let Err(why) = seen.check_next(epoch, base) {
            panic!("{context}: {why}");
        }
    }
    let mut expected = seen.entries().to_vec();
    let entries = log.epochs().entries();
    if let Some(last) = entries.last() {
        if last.start_offset == log.next_offset()
            && seen.latest().is_none_or(|e| e.epoch < last.epoch)
        {
            expected.push(*last);
        }
    }
    if batches.is_empty() && expected.is_empty() {
        // A log without batches starts in an epoch at its start.
        assert_eq!(entries.len(), 1, "{context}: {entries:?}");
        expected.push(entries[0]);
    }
    assert_eq!(entries, expected, "{context}: batches {batches:?}");
    assert_eq!(
        file_epochs(sim, dir).entries(),
        entries,
        "{context}: the file"
    );
    assert_eq!(
        log.leader_epoch(),
        entries.last().map_or(0, |e| e.epoch),
        "{context}"
    );
}

#[test]
fn power_loss_at_every_change_leaves_the_epoch_file_true_to_the_batches() {
    power_loss_at_every_change(false);
}

#[test]
fn power_loss_with_appends_gathered_in_memory_as_the_broker_does() {
    power_loss_at_every_change(true);
}

fn power_loss_at_every_change(gathered: bool) {
    let config = || power_config(gathered);
    let steps = workload();
    let dir = Path::new("/data/t-0");
    let reference = SimFs::new();
    reference.create_dir_all_durable(dir);
    let (done, err) = run_workload(
        &(Arc::new(reference.clone()) as Arc<dyn Vfs>),
        dir,
        &steps,
        gathered,
    );
    assert!(err.is_none(), "{err:?}");
    assert_eq!(done, steps.len());
    let log = Log::open(
        Arc::new(reference.clone()),
        dir,
        config(),
        OpenOptions {
            writable: false,
            lock: false,
        },
    )
    .unwrap();
    assert!(log.epochs().entries().len() > 8, "{:?}", log.epochs());
    drop(log);
    let total = reference.changes();
    let mut rng = klog::random::XorShift::new(0x5EED_E90C);
    let mut next_rand = move || rng.next();
    for cut in 0..total {
        let sim = SimFs::new();
        sim.create_dir_all_durable(dir);
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        sim.cut_power_after(cut);
        let (step, err) = run_workload(&vfs, dir, &steps, gathered);
        assert!(
            err.is_some(),
            "cut {cut}: the workload should have hit the power cut"
        );
        let seed = next_rand();
        sim.crash(&mut |n| (seed as usize) % (n + 1));
        sim.restore_power();
        if cut % 3 == 0 {
            // Recovery cut too.
            sim.cut_power_after(next_rand() % 8);
            let _ = Log::open(Arc::clone(&vfs), dir, config(), WRITE);
            let seed = next_rand();
            sim.crash(&mut |n| (seed as usize) % (n + 1));
            sim.restore_power();
        }
        let context = format!("cut {cut} during step {step} ({:?})", steps.get(step));
        let mut log = Log::open(Arc::clone(&vfs), dir, config(), WRITE)
            .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
        check_epochs(&sim, dir, &log, &context);
        // The recovered log takes a new epoch and keeps it.
        let (epoch, next) = (log.leader_epoch() + 1, log.next_offset());
        log.set_leader_epoch(epoch).unwrap();
        log.append(&mut batch(&["after"]), 0).unwrap();
        log.flush().unwrap();
        drop(log);
        sim.crash(&mut |_| 0);
        let log = Log::open(Arc::clone(&vfs), dir, config(), WRITE).unwrap();
        check_epochs(&sim, dir, &log, &context);
        assert_eq!(log.epochs().latest(), Some(entry(epoch, next)), "{context}");
    }
}

/// A log with epochs 0, 4 and 9 over two segments, closed.
fn three_epochs(vfs: &Arc<dyn Vfs>, dir: &Path) -> Vec<EpochEntry> {
    let mut log = Log::open(Arc::clone(vfs), dir, config(), WRITE).unwrap();
    log.append(&mut batch(&["a", "b"]), 0).unwrap();
    log.set_leader_epoch(4).unwrap();
    log.append(&mut batch(&["c"]), 0).unwrap();
    log.roll().unwrap();
    log.append(&mut batch(&["d"]), 0).unwrap();
    log.set_leader_epoch(9).unwrap();
    log.append(&mut batch(&["e"]), 0).unwrap();
    log.close().unwrap();
    vec![entry(0, 0), entry(4, 2), entry(9, 4)]
}

#[test]
fn recovery_rebuilds_a_missing_or_damaged_epoch_file_from_the_batches() {
    for (what, damage) in [
        ("missing", None),
        ("garbage", Some(&b"\x00\x01 not an epoch file"[..])),
        ("empty", Some(&b""[..])),
        // Decodes, but with a CRC that does not match.
        (
            "edited",
            Some(&b"klog-leader-epochs 1\n1\n0 0\ncrc 00000000\n"[..]),
        ),
    ] {
        let sim = SimFs::new();
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        let dir = Path::new("/p");
        sim.create_dir_all_durable(dir);
        let expected = three_epochs(&vfs, dir);
        let path = dir.join(EPOCH_FILE);
        match damage {
            None => vfs.remove(&path).unwrap(),
            Some(bytes) => sim.write(&path, bytes),
        }
        // A reader changes nothing, and still sees the epochs.
        let read = OpenOptions {
            writable: false,
            lock: false,
        };
        let log = Log::open(Arc::clone(&vfs), dir, config(), read).unwrap();
        assert_eq!(log.epochs().entries(), expected, "{what}");
        assert!(log.recovery().epoch_problem.is_some(), "{what}");
        drop(log);
        assert_eq!(sim.read(&path).as_deref(), damage, "{what}: a reader wrote");
        let log = Log::open(Arc::clone(&vfs), dir, config(), WRITE).unwrap();
        let problem = log.recovery().epoch_problem.clone().unwrap_or_default();
        assert!(
            problem.contains("rebuilt from the batches"),
            "{what}: {problem}"
        );
        assert_eq!(log.epochs().entries(), expected, "{what}");
        assert_eq!(log.leader_epoch(), 9, "{what}");
        assert_eq!(file_epochs(&sim, dir).entries(), expected, "{what}");
    }
}

/// A power cut that loses the tail of the log takes the epochs that
/// started in the lost part out of the file; one starting exactly at the
/// new end stays (the log goes on in it).
#[test]
fn a_cut_log_loses_the_epochs_past_its_end() {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/p");
    sim.create_dir_all_durable(dir);
    let mut log = Log::open(Arc::clone(&vfs), dir, config(), WRITE).unwrap();
    log.append(&mut batch(&["a", "b"]), 0).unwrap();
    log.set_leader_epoch(3).unwrap();
    log.append(&mut batch(&["c"]), 0).unwrap();
    log.flush().unwrap();
    log.set_leader_epoch(5).unwrap();
    log.append(&mut batch(&["d"]), 0).unwrap();
    log.set_leader_epoch(7).unwrap();
    log.append(&mut batch(&["e", "f"]), 0).unwrap();
    log.set_leader_epoch(8).unwrap();
    log.append(&mut batch(&["g"]), 0).unwrap();
    assert_eq!(
        log.epochs().entries(),
        [
            entry(0, 0),
            entry(3, 2),
            entry(5, 3),
            entry(7, 4),
            entry(8, 6)
        ]
    );
    drop(log);
    // Nothing after the flush reaches the disk; the epoch file did.
    sim.crash(&mut |_| 0);
    let log = Log::open(Arc::clone(&vfs), dir, config(), WRITE).unwrap();
    assert_eq!(log.next_offset(), 3);
    let problem = log.recovery().epoch_problem.clone().unwrap_or_default();
    assert!(
        problem.contains("past the log's end (offset 3) removed"),
        "{problem}"
    );
    let kept = [entry(0, 0), entry(3, 2), entry(5, 3)];
    assert_eq!(log.epochs().entries(), kept);
    assert_eq!(file_epochs(&sim, dir).entries(), kept);
    assert_eq!(log.leader_epoch(), 5);
    assert_eq!(log.end_offset_for_epoch(4), Some((3, 3)));
    assert_eq!(
        log.end_offset_for_epoch(7),
        None,
        "newer than the log knows"
    );
    assert_eq!(epochs_of(&batch_epochs(&log)), kept[..2]);
}

/// Writes `batches` (each a list of values and an epoch) as one segment of
/// a new partition `dir` on the real file system, base offset 0, with the
/// given epoch file.
fn write_raw_partition(dir: &Path, batches: &[(&[&str], u32)], epochs: &Epochs) {
    std::fs::create_dir_all(dir).unwrap();
    let mut bytes =
        klog::storage::segment::encode_header(0, klog::storage::record::Format::Kafka).to_vec();
    let mut offset = 0;
    for (values, epoch) in batches {
        let mut b = batch(values);
        record::stamp(&mut b, offset, *epoch);
        offset += values.len() as u64;
        bytes.extend_from_slice(&b);
    }
    std::fs::write(dir.join(klog::storage::segment::log_file_name(0)), bytes).unwrap();
    std::fs::write(dir.join(EPOCH_FILE), epochs.encode()).unwrap();
}

fn dump(args: &[&str]) -> (i32, String, String) {
    let out = bin("klog-dump").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn klog_dump_shows_each_batchs_epoch_and_verify_checks_the_epoch_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    three_epochs(&(Arc::new(RealFs) as Arc<dyn Vfs>), &dir);
    let dir_arg = dir.to_str().unwrap();
    let (code, out, err) = dump(&[dir_arg]);
    assert_eq!(code, 0, "{err}");
    let epochs: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .map(|l| {
            l.split("partitionLeaderEpoch: ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(epochs, ["0", "4", "4", "9"], "{out}");
    assert!(out.contains("magic: 2"), "{out}");
    let (code, out, _) = dump(&["--json", dir_arg]);
    assert_eq!(code, 0);
    let epochs: Vec<u64> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "batch")
        .map(|v| v["partition_leader_epoch"].as_u64().unwrap())
        .collect();
    assert_eq!(epochs, [0, 4, 4, 9]);
    let (code, _, err) = dump(&["--verify", dir_arg]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains(EPOCH_FILE), "{err}");

    // An epoch file that disagrees with the batches.
    let mut wrong = Epochs::new();
    wrong.assign(0, 0);
    wrong.assign(4, 3);
    wrong.assign(9, 4);
    wrong.assign(10, 9);
    std::fs::write(dir.join(EPOCH_FILE), wrong.encode()).unwrap();
    let (code, _, err) = dump(&["--verify", dir_arg]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("the batches have epoch 4 from offset 2"),
        "{err}"
    );
    assert!(err.contains("no batch starts epoch 4 at offset 3"), "{err}");
    assert!(
        err.contains("epoch 10 starts at 9, past the log's end 5"),
        "{err}"
    );
    std::fs::write(dir.join(EPOCH_FILE), b"klog-leader-epochs 1\n").unwrap();
    let (code, _, err) = dump(&["--verify", dir_arg]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("leader-epochs: no CRC line"), "{err}");

    // Batches whose epoch goes down.
    let down = tmp.path().join("d-0");
    let mut epochs = Epochs::new();
    epochs.assign(0, 0);
    epochs.assign(6, 1);
    write_raw_partition(
        &down,
        &[(&["a"], 0), (&["b"], 6), (&["c", "d"], 2)],
        &epochs,
    );
    let (code, _, err) = dump(&["--verify", down.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("batch at offset 2 has leader epoch 2, below epoch 6 (from offset 1)"),
        "{err}"
    );
}

/// `klog-recover` rebuilds a missing epoch file, says so, and exits 3 (it
/// repaired something); `--dry-run` only says it; a second run is clean.
#[test]
fn klog_recover_rebuilds_a_missing_epoch_file_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    let expected = three_epochs(&(Arc::new(RealFs) as Arc<dyn Vfs>), &dir);
    std::fs::remove_file(dir.join(EPOCH_FILE)).unwrap();
    let run = |args: &[&str]| {
        let out = bin("klog-recover").args(args).arg(&dir).output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        (out.status.code(), stdout)
    };
    let (code, out) = run(&["--dry-run"]);
    assert!(
        out.contains("leader-epochs is missing: rebuilt from the batches (dry run: not written)"),
        "{out}"
    );
    assert_eq!(code, Some(4), "{out}");
    assert!(!dir.join(EPOCH_FILE).exists(), "a dry run wrote");
    let (code, out) = run(&[]);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("leader-epochs is missing: rebuilt from the batches"),
        "{out}"
    );
    assert_eq!(file_epochs(&RealFs, &dir).entries(), expected);
    let (code, out) = run(&[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("leader-epochs"), "{out}");
}
