//! Regressions found by the adversarial review of issue 9: zero-filled pages
//! inside the last batch, a roll racing a failed fsync, fates after a
//! failure, and a refusal that must change nothing.
use std::path::Path;
use std::sync::Arc;

use klog::fs::sim::SimFs;
use klog::fs::Vfs;
use klog::log::{Fate, Log, LogConfig, OpenOptions};
use klog::record::BatchBuilder;

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

fn batch(n: usize, len: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for i in 0..n {
        b.push(7, None, &[], &vec![b'a' + (i % 26) as u8; len]);
    }
    b.finish().to_vec()
}

/// A power cut on a real FS (XFS, ext4 delalloc) can leave the file length
/// past the bytes that reached the disk: the tail page(s) read as zeros,
/// starting wherever the page boundary is, usually mid-batch. Nothing past
/// the last fsync is acknowledged; this is a torn tail, not damage.
#[test]
fn zero_filled_pages_in_the_middle_of_the_last_unflushed_batch_are_a_torn_tail() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, small(), WRITE).unwrap();
    log.append(&mut batch(3, 100), 0).unwrap();
    log.flush().unwrap();
    // Unflushed: a batch of 20 records of 400 bytes (~8 KiB, 2+ pages).
    log.append(&mut batch(20, 400), 0).unwrap();
    drop(log);
    sim.crash_process();
    let seg = dir.join("00000000000000000000.log");
    let mut bytes = sim.read(&seg).unwrap();
    let len = bytes.len();
    // The last 4 KiB page never reached the disk: zeros, file length kept.
    let page_start = (len - 1) / 4096 * 4096;
    bytes[page_start..].fill(0);
    sim.write(&seg, &bytes);
    match Log::open(Arc::clone(&vfs), dir, small(), WRITE) {
        Ok(log) => assert!(log.next_offset() >= 3, "flushed records lost: {}", log.next_offset()),
        Err(e) => panic!("a torn page after a crash takes the partition offline: {e}"),
    }
}

/// Same with the last batch's header itself half in a zero page.
#[test]
fn zero_page_inside_a_batch_header_is_a_torn_tail() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, small(), WRITE).unwrap();
    log.append(&mut batch(1, 4096 - 24 - 61 - 20), 0).unwrap();
    log.flush().unwrap();
    log.append(&mut batch(1, 100), 0).unwrap();
    drop(log);
    sim.crash_process();
    let seg = dir.join("00000000000000000000.log");
    let mut bytes = sim.read(&seg).unwrap();
    let z = 4096.min(bytes.len() - 10);
    bytes[z..].fill(0);
    sim.write(&seg, &bytes);
    if let Err(e) = Log::open(Arc::clone(&vfs), dir, small(), WRITE) {
        panic!("offline after a torn header: {e}");
    }
}

/// fsyncgate through a roll: the broker's flusher syncs outside the lock;
/// its fsync fails (EIO); before it takes the lock to call Log::fail, an
/// append rolls the segment, whose Log::flush fsyncs the same file, and
/// Linux (and SimFs) reports success for the dropped pages. The roll then
/// writes a recovery point past them and exposes them.
#[test]
fn a_roll_between_a_failed_pending_sync_and_fail_takes_lost_pages_for_durable() {
    let (sim, vfs, dir) = sim_partition();
    let config = LogConfig {
        visible_after_flush: true,
        ..small()
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, config.clone(), WRITE).unwrap();
    log.append(&mut batch(3, 100), 0).unwrap();
    log.flush().unwrap();
    log.append(&mut batch(3, 100), 0).unwrap(); // offsets 3..6
    let pending = log.begin_flush().unwrap().unwrap();
    sim.fail_next_sync(|p| p.extension().is_some_and(|e| e == "log"));
    let err = pending.sync().unwrap_err(); // flusher thread, no lock
                                           // Producer thread, under the lock: roll. Its own fsync of the same
                                           // file would "succeed"; the failure outside the lock must stop it.
    assert!(
        log.roll().is_err(),
        "a roll after a failed fsync reported the records durable"
    );
    assert_eq!(log.flushed_offset(), 3, "records past the failed fsync were exposed");
    let _ = log.fail(&err);
    drop(log);
    sim.crash(&mut |n| n);
    let reopened = Log::open(Arc::clone(&vfs), dir, config, WRITE).expect("the partition reopens");
    assert!(reopened.next_offset() >= 3);
}

/// After Log::fail cuts the file back to its durable size, fate() still
/// says InFile for records that were cut: settle() then lets acks=1
/// answers go, and the offsets are given out again after the restart.
#[test]
fn fate_says_in_file_for_records_fail_cut() {
    let (sim, vfs, dir) = sim_partition();
    let config = LogConfig {
        visible_after_flush: true,
        ..small()
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, config.clone(), WRITE).unwrap();
    log.append(&mut batch(1, 100), 0).unwrap();
    log.flush().unwrap();
    let a = log.append(&mut batch(1, 100), 0).unwrap();
    log.write_pending().unwrap();
    sim.fail_next_sync(|p| p.extension().is_some_and(|e| e == "log"));
    let pending = log.begin_flush().unwrap().unwrap();
    let err = pending.sync().unwrap_err();
    let _ = log.fail(&err);
    let fate = log.fate(a.epoch, a.last_offset);
    drop(log);
    let log = Log::open(Arc::clone(&vfs), dir, config, WRITE).unwrap();
    assert!(
        fate != Fate::InFile || log.next_offset() > a.last_offset,
        "fate {fate:?} for offset {} but the reopened log ends at {}",
        a.last_offset,
        log.next_offset()
    );
}

/// The automatic open promises to change nothing before refusing damage.
#[test]
fn refusal_changes_nothing_even_leftovers() {
    let (sim, vfs, dir) = sim_partition();
    let mut log = Log::open(Arc::clone(&vfs), dir, small(), WRITE).unwrap();
    for _ in 0..5 {
        log.append(&mut batch(3, 100), 0).unwrap();
    }
    log.flush().unwrap();
    drop(log);
    let seg = dir.join("00000000000000000000.log");
    let mut bytes = sim.read(&seg).unwrap();
    bytes[100] ^= 0xff; // damage in the middle, whole batches after it
    sim.write(&seg, &bytes);
    sim.write(&dir.join("recovery-point.tmp"), b"x");
    sim.write(&dir.join("00000000000000000099.index"), b"");
    let before = sim.files();
    let err = Log::open(Arc::clone(&vfs), dir, small(), WRITE).unwrap_err();
    assert!(matches!(err, klog::Error::Damaged { .. }), "{err}");
    let after = sim.files();
    let gone: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    assert!(gone.is_empty(), "refused, but removed {gone:?}");
}
