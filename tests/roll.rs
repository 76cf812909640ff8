//! A segment roll under faults, through the log and the tools: retention
//! never passes what readers may see nor runs on a stopped log, the tools
//! say when a rolled segment is not yet named, and (as soak runs, ignored
//! by default: `cargo test --release --test roll -- --ignored`) a kill -9
//! or a power cut at every change of a broker's workload of rolls,
//! flushes and retention loses no acknowledged record.

mod common;

use std::path::Path;
use std::sync::Arc;

use klog::storage::fs::sim::SimFs;
use klog::storage::fs::Vfs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::BatchBuilder;

const WRITE: OpenOptions = OpenOptions {
    writable: true,
    lock: false,
};

fn broker_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 300,
        index_bytes_max: 4096,
        retention_bytes: Some(9000),
        retention_ms: None,
        flush_messages: None,
        visible_after_flush: true,
        write_buffer_bytes: 3000,
        ..LogConfig::default()
    }
}

fn value_at(offset: u64) -> Vec<u8> {
    let len = (offset * 37 % 230) as usize;
    let mut v = format!("{offset}:").into_bytes();
    v.extend((0..len).map(|i| b'a' + ((offset as usize + i) % 26) as u8));
    v
}

fn append_values(log: &mut Log, count: u64, now: i64) -> klog::Result<()> {
    let mut b = BatchBuilder::new();
    for o in log.next_offset()..log.next_offset() + count {
        b.push(now, None, &[], &value_at(o));
    }
    log.append(&mut b.finish().to_vec(), now).map(drop)
}

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

fn prepare_ahead(log: &mut Log) {
    if let Some(prep) = log.segment_to_prepare() {
        let made = prep.create();
        let _ = log.give_prepared(made);
    }
}

fn check_gap_free(log: &Log, context: &str) {
    let records = common::log_records(log);
    for (i, (offset, value)) in records.iter().enumerate() {
        assert_eq!(*offset, log.start_offset() + i as u64, "{context}: gap");
        assert_eq!(*value, value_at(*offset), "{context}: bytes of {offset}");
    }
    let end = records.last().map_or(log.start_offset(), |r| r.0 + 1);
    assert_eq!(end, log.next_offset(), "{context}: end");
}

/// (acks=all durable, acks=1 written) as the run goes.
#[derive(Default, Debug, Clone, Copy)]
struct Acked {
    all: u64,
    one: u64,
}

/// The broker's way, tracking acks=1 (written to the file) too.
fn workload(
    vfs: &Arc<dyn Vfs>,
    dir: &Path,
    acked: &mut Acked,
    dir_sync: bool,
) -> klog::Result<u64> {
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
        if i % 2 == 0 {
            log.write_pending()?;
            acked.one = log.next_offset();
        }
        if dir_sync && i % 2 == 1 {
            vfs.sync_dir(dir)
                .map_err(|e| klog::Error::io("fsync directory", dir, e))?;
        }
        if i % 5 == 1 {
            log.take_expired(i as i64).delete()?;
        }
        if i % 3 == 2 {
            broker_flush_seen(&mut log, &mut acked.all)?;
            acked.one = acked.one.max(acked.all);
            if i % 2 == 0 {
                prepare_ahead(&mut log);
            }
        }
    }
    Ok(rolls as u64)
}

/// kill -9 at every change: acks=1 records survive, the log reopens gap
/// free, and what the reopened log shows survives a power cut after it.
#[test]
#[ignore = "soak: a crash at every change of a workload (minutes in debug)"]
fn kill9_at_every_change_then_power_cut_after_reopen() {
    let dir = Path::new("/data/t-0");
    let reference = SimFs::new();
    let mut a = Acked::default();
    let rolls = workload(
        &(Arc::new(reference.clone()) as Arc<dyn Vfs>),
        dir,
        &mut a,
        true,
    )
    .unwrap();
    assert!(rolls >= 4);
    let total = reference.changes();
    for cut in 0..total {
        let sim = SimFs::new();
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        sim.cut_power_after(cut);
        let mut acked = Acked::default();
        let _ = workload(&vfs, dir, &mut acked, true);
        sim.crash_process();
        sim.restore_power();
        let context = format!("kill at {cut} of {total}, {acked:?}");
        if !sim.exists(dir) {
            continue;
        }
        let log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE)
            .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
        let next = log.next_offset();
        assert!(next >= acked.one, "{context}: acks=1 lost: end {next}");
        check_gap_free(&log, &context);
        let shown = log.flushed_offset();
        drop(log);
        // What the reopened log showed must survive a power cut.
        sim.crash(&mut |_| 0);
        if !sim.exists(dir) {
            continue;
        }
        let log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE)
            .unwrap_or_else(|e| panic!("{context}: reopen after power cut failed: {e}"));
        assert!(
            log.next_offset() >= shown,
            "{context}: shown {shown} after reopen, {} after power cut",
            log.next_offset()
        );
        check_gap_free(&log, &context);
    }
}

/// Power cut at every change, keeping all / none / half of what was
/// appended since the last sync, with and without the extra dir syncs;
/// then a power cut during the reopen at every change of it.
#[test]
#[ignore = "soak: a crash at every change of a workload (minutes in debug)"]
fn power_cut_at_every_change_and_during_reopen() {
    let dir = Path::new("/data/t-0");
    for dir_sync in [false, true] {
        let reference = SimFs::new();
        let mut a = Acked::default();
        workload(
            &(Arc::new(reference.clone()) as Arc<dyn Vfs>),
            dir,
            &mut a,
            dir_sync,
        )
        .unwrap();
        let total = reference.changes();
        for keep in 0..3usize {
            for cut in 0..total {
                let sim = SimFs::new();
                let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
                sim.cut_power_after(cut);
                let mut acked = Acked::default();
                let _ = workload(&vfs, dir, &mut acked, dir_sync);
                let k = |n: usize| match keep {
                    0 => 0,
                    1 => n,
                    _ => n / 2,
                };
                sim.crash(&mut |n| k(n));
                sim.restore_power();
                let context =
                    format!("sync {dir_sync} keep {keep} cut {cut} of {total}, {acked:?}");
                if !sim.exists(dir) {
                    continue;
                }
                // Crash the reopen at each of its changes, then reopen again.
                let before = sim.changes();
                let log = Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE)
                    .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
                assert!(log.next_offset() >= acked.all, "{context}: acked lost");
                check_gap_free(&log, &context);
                let open_changes = sim.changes() - before;
                let shown = log.flushed_offset();
                drop(log);
                let snapshot = sim.clone();
                let _ = snapshot;
                for c2 in 0..open_changes.min(40) {
                    // Rebuild the same state: rerun from scratch.
                    let sim2 = SimFs::new();
                    let vfs2: Arc<dyn Vfs> = Arc::new(sim2.clone());
                    sim2.cut_power_after(cut);
                    let _ = workload(&vfs2, dir, &mut Acked::default(), dir_sync);
                    sim2.crash(&mut |n| k(n));
                    sim2.restore_power();
                    sim2.cut_power_after(c2);
                    let _ = Log::open(Arc::clone(&vfs2), dir, broker_config(), WRITE);
                    sim2.crash(&mut |n| k(n));
                    sim2.restore_power();
                    if !sim2.exists(dir) {
                        continue;
                    }
                    let ctx2 = format!("{context}, open cut at {c2}");
                    let log = Log::open(Arc::clone(&vfs2), dir, broker_config(), WRITE)
                        .unwrap_or_else(|e| panic!("{ctx2}: second reopen failed: {e}"));
                    assert!(log.next_offset() >= acked.all, "{ctx2}: acked lost");
                    check_gap_free(&log, &ctx2);
                    let _ = shown;
                }
            }
        }
    }
}

/// Retention between a flush's completion and its publish: the segment
/// holding records never yet shown is deleted, and the log start passes
/// the visible end.
#[test]
fn retention_in_the_publish_window_never_passes_what_readers_may_see() {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/p");
    sim.create_dir_all_durable(dir);
    let config = LogConfig {
        retention_bytes: Some(1),
        ..broker_config()
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, config, WRITE).unwrap();
    let mut seen = 0;
    append_values(&mut log, 3, 0).unwrap();
    broker_flush_seen(&mut log, &mut seen).unwrap();
    assert_eq!(seen, 3);
    // More records, then a roll; none of them flushed yet.
    while log.segments().count() == 1 {
        append_values(&mut log, 3, 0).unwrap();
    }
    let end_of_first = log.segments().nth(1).unwrap().base_offset;
    // The flusher: begin, sync, complete (renames, returns a Publish).
    let flush = log.begin_flush().unwrap().unwrap();
    flush.sync().unwrap();
    let publish = log
        .complete_flush(&flush)
        .unwrap()
        .expect("a rename to publish");
    // Lock let go for the directory fsync: retention runs now.
    let deleted = log.take_expired(0).delete().unwrap();
    println!(
        "deleted {deleted:?}; start {} visible end {} (first segment ended at {end_of_first})",
        log.start_offset(),
        log.visible_offset()
    );
    let at_end = log.read(log.visible_offset(), 1 << 16);
    println!("a consumer caught up at the visible end reads: {at_end:?}");
    assert!(
        log.start_offset() <= log.visible_offset(),
        "start {} passed the visible end {}: records {}..{} were deleted before any reader could see them",
        log.start_offset(),
        log.visible_offset(),
        log.visible_offset(),
        end_of_first
    );
    publish.sync().unwrap();
    log.complete_publish(&publish);
}

/// A writer killed between a roll and its flush on a real file system:
/// klog-dump --verify and klog-recover --dry-run against what opening the
/// log (the broker's restart) finds; klog-recover adopts what it adopts.
#[test]
fn the_tools_say_a_rolled_segment_is_not_yet_named_and_a_restart_adopts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    std::fs::create_dir(&dir).unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(klog::storage::fs::RealFs);
    let mut log = Log::open(Arc::clone(&vfs), &dir, broker_config(), WRITE).unwrap();
    let mut seen = 0;
    append_values(&mut log, 3, 0).unwrap();
    broker_flush_seen(&mut log, &mut seen).unwrap();
    while log.segments().count() < 3 {
        append_values(&mut log, 4, 0).unwrap();
    }
    log.write_pending().unwrap();
    let next = log.next_offset();
    // kill -9: nothing more happens; the page cache keeps every byte.
    std::mem::forget(log);
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert!(names.iter().any(|n| n.starts_with("next-")), "{names:?}");
    // The tools say that a rolled segment is not read, and not clean.
    common::bin("klog-dump")
        .arg("--verify")
        .arg(&dir)
        .assert()
        .code(3)
        .stderr(predicates::str::contains("rolled and not yet named"));
    for args in [vec!["--dry-run"], vec!["--dry-run", "--full"]] {
        common::bin("klog-recover")
            .args(&args)
            .arg(&dir)
            .assert()
            .stdout(predicates::str::contains(
                "t-0/next-1.log: a segment rolled and not yet named",
            ));
    }
    let reader = Log::open(
        Arc::clone(&vfs),
        &dir,
        broker_config(),
        OpenOptions {
            writable: false,
            lock: false,
        },
    )
    .unwrap();
    assert!(reader.next_offset() <= next);
    drop(reader);
    // klog-recover adopts them as the broker's restart would (every record
    // appended is there), and then klog-dump --verify finds nothing.
    common::bin("klog-recover")
        .arg(&dir)
        .assert()
        .code(3)
        .stdout(predicates::str::contains(
            "t-0/next-1.log: a segment rolled and not yet named that continues the log: adopted as t-0/",
        ));
    common::bin("klog-dump")
        .args(["--verify", "-q"])
        .arg(&dir)
        .assert()
        .code(0);
    let log = Log::open(Arc::clone(&vfs), &dir, broker_config(), WRITE).unwrap();
    assert_eq!(log.next_offset(), next);
}

/// The broker's steps interleaved as threads can interleave them: a flush
/// begun before rolls and completed after them, retention in the publish
/// window, a segment made ahead while rolls happen. Returns rolls.
fn interleaved(
    vfs: &Arc<dyn Vfs>,
    dir: &Path,
    acked: &mut Acked,
    anomalies: &mut Vec<String>,
) -> klog::Result<u64> {
    vfs.create_dir_all(dir)
        .map_err(|e| klog::Error::io("create", dir, e))?;
    for parent in dir.ancestors().skip(1) {
        vfs.sync_dir(parent)
            .map_err(|e| klog::Error::io("fsync directory", parent, e))?;
    }
    let mut log = Log::open(Arc::clone(vfs), dir, broker_config(), WRITE)?;
    let mut rolls = 0;
    let mut pending = None;
    let mut publish = None;
    let mut prep = None;
    for i in 0..80u64 {
        let before = log.segments().count();
        append_values(&mut log, 1 + i % 5, i as i64)?;
        rolls += log.segments().count() - before;
        if i % 2 == 0 {
            log.write_pending()?;
            acked.one = log.next_offset();
        }
        match i % 4 {
            0 => {
                if let Some(p) = publish.take() {
                    // Retention inside the publish window.
                    log.take_expired(i as i64).delete()?;
                    if log.start_offset() > log.visible_offset() {
                        anomalies.push(format!(
                            "i {i}: start {} > visible end {}",
                            log.start_offset(),
                            log.visible_offset()
                        ));
                    }
                    let p: klog::storage::log::Publish = p;
                    p.sync().map_err(|e| log.fail(&e))?;
                    log.complete_publish(&p);
                    acked.all = log.flushed_offset();
                }
                if pending.is_none() {
                    pending = log.begin_flush()?;
                }
            }
            1 => {
                if let Some(f) = &pending {
                    let f: &klog::storage::log::PendingFlush = f;
                    f.sync().map_err(|e| log.fail(&e))?;
                }
            }
            3 => {
                if let Some(f) = pending.take() {
                    let f: klog::storage::log::PendingFlush = f;
                    // synced at step 1 (or now if begun late)
                    f.sync().map_err(|e| log.fail(&e))?;
                    publish = log.complete_flush(&f)?;
                    acked.all = log.flushed_offset();
                }
            }
            _ => {}
        }
        if i % 3 == 0 && prep.is_none() {
            prep = log.segment_to_prepare();
        } else if i % 3 == 2 {
            if let Some(p) = prep.take() {
                let p: klog::storage::log::SegmentPrep = p;
                let made = p.create();
                let _ = log.give_prepared(made);
            }
        }
        acked.one = acked.one.max(acked.all);
    }
    Ok(rolls as u64)
}

#[test]
#[ignore = "soak: a crash at every change of a workload (minutes in debug)"]
fn interleaved_power_cut_and_kill9_at_every_change() {
    let dir = Path::new("/data/t-0");
    let reference = SimFs::new();
    let mut a = Acked::default();
    let mut anomalies = Vec::new();
    let rolls = interleaved(
        &(Arc::new(reference.clone()) as Arc<dyn Vfs>),
        dir,
        &mut a,
        &mut anomalies,
    )
    .unwrap();
    println!("reference: {rolls} rolls, {a:?}, anomalies {anomalies:?}");
    let total = reference.changes();
    let mut failures = Vec::new();
    for kind in 0..4 {
        for cut in 0..total {
            let sim = SimFs::new();
            let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
            sim.cut_power_after(cut);
            let mut acked = Acked::default();
            let _ = interleaved(&vfs, dir, &mut acked, &mut Vec::new());
            match kind {
                0 => sim.crash_process(),
                1 => sim.crash(&mut |_| 0),
                2 => sim.crash(&mut |n| n),
                _ => sim.crash(&mut |n| n / 3),
            }
            sim.restore_power();
            if !sim.exists(dir) {
                continue;
            }
            let context = format!("kind {kind} cut {cut} of {total}, {acked:?}");
            let log = match Log::open(Arc::clone(&vfs), dir, broker_config(), WRITE) {
                Ok(log) => log,
                Err(e) => {
                    failures.push(format!("{context}: reopen failed: {e}"));
                    continue;
                }
            };
            let need = if kind == 0 { acked.one } else { acked.all };
            if log.next_offset() < need {
                failures.push(format!(
                    "{context}: end {} < acknowledged {need}",
                    log.next_offset()
                ));
            }
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_gap_free(&log, &context)
            }));
            if r.is_err() {
                failures.push(format!("{context}: not gap free"));
            }
        }
    }
    for f in failures.iter().take(20) {
        println!("{f}");
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
}

/// A simulated file system whose renames of `next-*` files fail once armed
/// (ENOSPC: a directory that needs a new block for the new name).
#[derive(Debug, Clone)]
struct RenameFails {
    sim: SimFs,
    armed: Arc<std::sync::atomic::AtomicBool>,
}

impl Vfs for RenameFails {
    fn open(
        &self,
        path: &Path,
        create: bool,
    ) -> std::io::Result<Arc<dyn klog::storage::fs::VFile>> {
        self.sim.open(path, create)
    }
    fn open_read(&self, path: &Path) -> std::io::Result<Arc<dyn klog::storage::fs::VFile>> {
        self.sim.open_read(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.sim.exists(path)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.sim.remove(path)
    }
    fn remove_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.sim.remove_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        let name = from.file_name().unwrap().to_string_lossy();
        if name.starts_with("next-") && self.armed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        self.sim.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.sim.sync_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.sim.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.sim.list(dir)
    }
}

/// A rename that fails when a flush publishes the new segment stops the
/// log after the rolled segment left `sealed`; retention, which does not
/// look at a stopped log, then deletes every named segment, and the
/// restart finds only `next-*` files: it removes them and starts over at 0.
#[test]
fn after_a_failed_publish_retention_waits_and_a_restart_reuses_no_offset() {
    let sim = SimFs::new();
    let dir = Path::new("/p");
    sim.create_dir_all_durable(dir);
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let vfs: Arc<dyn Vfs> = Arc::new(RenameFails {
        sim: sim.clone(),
        armed: Arc::clone(&armed),
    });
    let config = LogConfig {
        retention_ms: Some(1_000),
        retention_bytes: None,
        ..broker_config()
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, config.clone(), WRITE).unwrap();
    let mut acked = 0;
    // Two segments of acknowledged records.
    while log.segments().count() < 2 {
        append_values(&mut log, 3, 0).unwrap();
        broker_flush_seen(&mut log, &mut acked).unwrap();
    }
    append_values(&mut log, 3, 0).unwrap();
    broker_flush_seen(&mut log, &mut acked).unwrap();
    while log.segments().count() < 3 {
        append_values(&mut log, 3, 0).unwrap();
    }
    println!(
        "acknowledged durable up to {acked}, next {}",
        log.next_offset()
    );
    armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let err = broker_flush_seen(&mut log, &mut acked).unwrap_err();
    println!("flush: {err}; failed: {}", log.failed());
    armed.store(false, std::sync::atomic::Ordering::SeqCst);
    // The retention thread goes on: everything before the active segment.
    let deleted = log.take_expired(10_000_000).delete().unwrap();
    println!("retention deleted {deleted:?}");
    println!("files: {:?}", sim.files().keys().collect::<Vec<_>>());
    drop(log);
    let log = Log::open(Arc::clone(&vfs), dir, config, WRITE).unwrap();
    println!(
        "after restart: start {} next {}",
        log.start_offset(),
        log.next_offset()
    );
    assert!(
        log.next_offset() >= acked,
        "offsets below {acked} were acknowledged; the restarted log gives out {} again",
        log.next_offset()
    );
}
