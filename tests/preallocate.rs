//! Segments given files of zeros ahead (`klog-broker --preallocate`,
//! `klog::storage::spare`): a power cut at every change keeps every
//! acknowledged record and never leaves zeros inside the log; the zeros
//! go at a roll and a clean close; a reader waits at them; a spare that
//! cannot be zeroed leaves nothing behind. The broker's own use is at the
//! end: kill -9 and a clean stop of a real `klog-broker --preallocate`.

mod common;

use std::path::Path;
use std::sync::Arc;

use klog::storage::fs::sim::SimFs;
use klog::storage::fs::Vfs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::BatchBuilder;
use klog::storage::spare::{Spares, SPARES_DIR};

const WRITE: OpenOptions = OpenOptions {
    writable: true,
    lock: false,
};
const SEGMENT: u64 = 4096;
const DIR: &str = "/data/t-0";

fn config(spares: Option<&Arc<Spares>>) -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT,
        index_interval_bytes: 300,
        index_bytes_max: 4096,
        retention_ms: None,
        visible_after_flush: true,
        write_buffer_bytes: 1000,
        spares: spares.cloned(),
        ..LogConfig::default()
    }
}

fn value_at(offset: u64) -> Vec<u8> {
    let len = (offset * 37 % 200) as usize;
    let mut v = format!("{offset}:").into_bytes();
    v.extend((0..len).map(|i| b'a' + ((offset as usize + i) % 26) as u8));
    v
}

fn append(log: &mut Log, count: u64) -> klog::Result<()> {
    let mut b = BatchBuilder::new();
    for o in log.next_offset()..log.next_offset() + count {
        b.push(0, None, &[], &value_at(o));
    }
    log.append(&mut b.finish().to_vec(), 0).map(drop)
}

/// The broker's flush: begin under the lock, sync, complete, publish.
/// Returns what it showed (acknowledged to acks=all).
fn flush(log: &mut Log) -> klog::Result<u64> {
    if let Some(flush) = log.begin_flush()? {
        flush.sync().map_err(|e| log.fail(&e))?;
        if let Some(publish) = log.complete_flush(&flush)? {
            publish.sync().map_err(|e| log.fail(&e))?;
            log.complete_publish(&publish);
        }
    }
    Ok(log.flushed_offset())
}

/// The flusher's making of the next segment ahead, from a spare zeroed
/// just before (as the spares' thread keeps one ready).
fn prepare_ahead(log: &mut Log, spares: &Spares) -> klog::Result<()> {
    spares
        .fill()
        .map_err(|e| klog::Error::io("zero", "/data", e))?;
    if let Some(prep) = log.segment_to_prepare() {
        let made = prep.create();
        let _ = log.give_prepared(made);
    }
    Ok(())
}

/// A simulated disk with `/data`, and the partition's directory unless
/// `store` (the workload's store makes it, as a broker's does).
fn sim_with_dirs_for(store: bool) -> (SimFs, Arc<dyn Vfs>) {
    let sim = SimFs::new();
    sim.create_dir_all_durable(Path::new(if store { "/data" } else { DIR }));
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    (sim, vfs)
}

fn sim_with_dirs() -> (SimFs, Arc<dyn Vfs>) {
    sim_with_dirs_for(false)
}

/// A new log at `DIR` whose first segment took a spare just zeroed.
fn log_with_a_spare(vfs: &Arc<dyn Vfs>) -> (Arc<Spares>, Log) {
    let spares = Spares::open(Arc::clone(vfs), Path::new("/data"), SEGMENT).unwrap();
    spares.fill().unwrap();
    let log = Log::open(
        Arc::clone(vfs),
        Path::new(DIR),
        config(Some(&spares)),
        WRITE,
    )
    .unwrap();
    assert_eq!(spares.taken(), 1);
    (spares, log)
}

/// Creates a topic as a broker does (its partition's first segment empty),
/// then appends, flushes and rolls through several spares, the first
/// taken in place of that empty segment; `acked` follows what each flush
/// showed.
fn workload(vfs: &Arc<dyn Vfs>, acked: &mut u64) -> klog::Result<()> {
    klog::storage::store::Store::with_vfs("/data", Arc::clone(vfs)).create_topic("t", 1)?;
    let spares = Spares::open(Arc::clone(vfs), Path::new("/data"), SEGMENT)?;
    spares
        .fill()
        .map_err(|e| klog::Error::io("zero", "/data", e))?;
    let mut log = Log::open(
        Arc::clone(vfs),
        Path::new(DIR),
        config(Some(&spares)),
        WRITE,
    )?;
    assert_eq!(spares.taken(), 1, "the new topic's segment took a spare");
    for i in 0..30u64 {
        append(&mut log, 2 + i % 3)?;
        if i % 2 == 1 {
            *acked = flush(&mut log)?;
            prepare_ahead(&mut log, &spares)?;
        }
    }
    *acked = flush(&mut log)?;
    log.close()
}

/// Each segment's file against its batches: no segment but the last may
/// hold anything past them.
fn check_files(sim: &SimFs, log: &Log, context: &str) {
    let last = log.segments().last().map(|s| s.base_offset);
    for s in log.segments() {
        let len = sim.read(&s.path).map_or(0, |b| b.len() as u64);
        if Some(s.base_offset) != last {
            assert_eq!(
                len,
                s.size,
                "{context}: {} holds more than its batches",
                s.path.display()
            );
        }
    }
}

fn check_records(log: &Log, context: &str) {
    for (i, (offset, value)) in common::log_records(log).iter().enumerate() {
        assert_eq!(*offset, i as u64, "{context}: gap");
        assert_eq!(*value, value_at(*offset), "{context}: bytes of {offset}");
    }
}

/// The workload is what the whole test rests on: it takes spares, rolls
/// into them and cuts their zeros.
#[test]
fn the_workload_rolls_into_spares_and_ends_with_no_zeros() {
    let (sim, vfs) = sim_with_dirs_for(true);
    let mut acked = 0;
    workload(&vfs, &mut acked).unwrap();
    // Lengths as the close left them: opening would cut zeros.
    let files = sim.files();
    let log = Log::open(Arc::clone(&vfs), Path::new(DIR), config(None), WRITE).unwrap();
    assert!(
        log.segments().count() >= 3,
        "rolled: {}",
        log.segments().count()
    );
    assert_eq!(log.next_offset(), acked);
    // A clean close cut the last segment's zeros too.
    for s in log.segments() {
        assert_eq!(files[&s.path].len() as u64, s.size, "{}", s.path.display());
    }
    check_records(&log, "after a clean close");
    // Spares were taken: the one left is whole and named; the next
    // broker removes it (a power cut may have put a taken one back).
    let spares_dir = Path::new("/data").join(SPARES_DIR);
    let left = vfs.list(&spares_dir).unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with("spare-"), "{left:?}");
    let spares = Spares::open(Arc::clone(&vfs), Path::new("/data"), SEGMENT).unwrap();
    assert!(!spares.is_ready());
    assert_eq!(vfs.list(&spares_dir).unwrap(), Vec::<String>::new());
}

/// A power cut at every change of the workload, keeping none or all of
/// what was written since the last sync: the log opens, holds every
/// record a flush showed, has no gap, and no segment but the last holds
/// zeros after its batches.
#[test]
fn a_power_cut_at_every_change_keeps_what_was_shown_and_no_zeros_inside() {
    let (reference, vfs) = sim_with_dirs_for(true);
    workload(&vfs, &mut 0).unwrap();
    let total = reference.changes();
    for keep_all in [false, true] {
        for cut in 0..total {
            let (sim, vfs) = sim_with_dirs_for(true);
            sim.cut_power_after(cut);
            let mut acked = 0;
            let _ = workload(&vfs, &mut acked);
            sim.crash(&mut |n| if keep_all { n } else { 0 });
            sim.restore_power();
            let context = format!("cut at {cut} of {total}, keep all {keep_all}, shown {acked}");
            if !sim.exists(Path::new(DIR)) {
                assert_eq!(acked, 0, "{context}");
                continue;
            }
            let log = Log::open(Arc::clone(&vfs), Path::new(DIR), config(None), WRITE)
                .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
            assert!(log.next_offset() >= acked, "{context}: shown records lost");
            check_records(&log, &context);
            check_files(&sim, &log, &context);
        }
    }
}

/// The zeros of a sealed segment go before its sync, and a segment with
/// a spare keeps it whole until then.
#[test]
fn a_roll_cuts_the_zeros_of_the_segment_it_seals() {
    let (sim, vfs) = sim_with_dirs();
    let (spares, mut log) = log_with_a_spare(&vfs);
    let first = log.segments().next().unwrap().path.clone();
    assert_eq!(
        sim.read(&first).unwrap().len() as u64,
        SEGMENT,
        "the first segment took the spare"
    );
    assert_eq!(spares.taken(), 1);
    while log.segments().count() == 1 {
        append(&mut log, 2).unwrap();
    }
    flush(&mut log).unwrap();
    let sealed = log.segments().next().unwrap();
    assert_eq!(sim.read(&sealed.path).unwrap().len() as u64, sealed.size);
    check_files(&sim, &log, "after the roll");
    drop(log);
}

/// `klog-consume --data-dir`'s reader at the zeros of a segment a broker
/// appends to: it waits there (no "corrupt" after its stalls), and reads
/// what is appended over them.
#[test]
fn a_reader_waits_at_the_zeros_and_reads_what_comes_over_them() {
    let (_sim, vfs) = sim_with_dirs();
    let (_spares, mut log) = log_with_a_spare(&vfs);
    append(&mut log, 3).unwrap();
    flush(&mut log).unwrap();
    let reading = klog::tools::consume::open_read_only(Arc::clone(&vfs), Path::new(DIR)).unwrap();
    let mut reader =
        klog::tools::consume::PartitionReader::new(Arc::clone(&vfs), &reading, 0).unwrap();
    let mut seen = Vec::new();
    for _ in 0..40 {
        reader
            .poll(1 << 16, |r| {
                seen.push(r.offset);
                Ok(true)
            })
            .unwrap();
    }
    assert_eq!(seen, [0, 1, 2]);
    append(&mut log, 2).unwrap();
    flush(&mut log).unwrap();
    reader
        .poll(1 << 16, |r| {
            seen.push(r.offset);
            Ok(true)
        })
        .unwrap();
    assert_eq!(seen, [0, 1, 2, 3, 4]);
}

/// A spare the disk has no room for: the zeroing fails, and leaves no
/// file; a segment made then is made empty, as without spares.
#[test]
fn a_spare_that_does_not_fit_leaves_nothing_and_segments_go_on_without() {
    let (sim, vfs) = sim_with_dirs();
    let spares = Spares::open(Arc::clone(&vfs), Path::new("/data"), 1 << 20).unwrap();
    sim.set_capacity(Some(sim.allocated() + (1 << 19)));
    assert!(spares.fill().is_err());
    let spares_dir = Path::new("/data").join(SPARES_DIR);
    assert_eq!(vfs.list(&spares_dir).unwrap(), Vec::<String>::new());
    assert!(!spares.is_ready());
    sim.set_capacity(None);
    let mut log = Log::open(
        Arc::clone(&vfs),
        Path::new(DIR),
        config(Some(&spares)),
        WRITE,
    )
    .unwrap();
    append(&mut log, 3).unwrap();
    flush(&mut log).unwrap();
    let first = log.segments().next().unwrap();
    assert_eq!(sim.read(&first.path).unwrap().len() as u64, first.size);
    // Stopped: a fill does nothing, and the thread returns.
    spares.stop();
    assert!(!spares.fill().unwrap());
    spares.run(|m| panic!("said {m}"));
}

/// Each segment file of the partition directory `dir` against where its
/// batches end: `(file length, batches' end)`.
fn files_and_batches(dir: &Path) -> Vec<(u64, u64)> {
    let vfs: Arc<dyn Vfs> = Arc::new(klog::storage::fs::RealFs);
    let log = klog::tools::consume::open_read_only(vfs, dir).unwrap();
    log.segments()
        .map(|s| (std::fs::metadata(&s.path).unwrap().len(), s.size))
        .collect()
}

/// A real broker with `--preallocate`: its segments take spares, readers
/// of its files and its consumers see every record, a kill -9 loses none
/// acknowledged, and a clean stop leaves no zeros.
#[test]
fn a_broker_with_spares_keeps_every_record_through_kill9_and_stops_with_no_zeros() {
    use std::time::Duration;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("d");
    let args = ["--preallocate", "--segment-bytes", "64KiB"];
    let spare = |n: u32| data.join(SPARES_DIR).join(format!("spare-{n}"));
    let mut broker = common::BrokerProc::start(&data, &args);
    common::eventually("the first spare", Duration::from_secs(30), || {
        spare(0).exists()
    });
    // Small requests: a segment rolls between batches.
    for k in 0..20 {
        let input = common::input(k * 1000 + 1, (k + 1) * 1000);
        common::produce_to(&broker.addr, "t", &input, &["--acks", "all"]);
    }
    // The topic's first segment and the ones it rolled into took spares.
    common::eventually("spares taken", Duration::from_secs(30), || {
        (3..1000).any(|n| spare(n).exists())
    });
    let dir = data.join("t-0");
    let segments = files_and_batches(&dir);
    assert!(segments.len() >= 3, "{segments:?}");
    let (last_len, last_end) = *segments.last().unwrap();
    assert!(
        last_len > last_end,
        "the last segment goes on in zeros: {segments:?}"
    );
    let read = common::consume(&data, "t", &[]);
    assert_eq!(read.lines().collect::<Vec<_>>(), common::numbers(1, 20_000));
    // klog-dump counts the batches of the live segment, not its zeros.
    let dumped = common::bin("klog-dump")
        .args(["--json", dir.to_str().unwrap()])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&dumped.get_output().stdout).to_string();
    let bytes: u64 = segments.iter().map(|(_, end)| end).sum();
    assert!(
        out.contains(&format!("\"bytes\":{bytes}")),
        "{bytes}: {out}"
    );
    broker.kill9();
    let mut broker = common::BrokerProc::start(&data, &args);
    let read = common::consume_from(&broker.addr, "t", &[]);
    assert_eq!(read.lines().collect::<Vec<_>>(), common::numbers(1, 20_000));
    common::produce_to(&broker.addr, "t", &common::input(20_001, 20_100), &[]);
    assert!(broker.terminate().success(), "{:?}", broker.log());
    for (len, end) in files_and_batches(&dir) {
        assert_eq!(len, end, "a clean stop cuts the zeros");
    }
    let read = common::consume(&data, "t", &[]);
    assert_eq!(read.lines().count(), 20_100);
}

/// A topic made and opened, its empty segment given a spare, then undone
/// (a later partition of it failed to open): its directories go, the
/// spare's zeros being no records.
#[test]
fn a_topic_whose_segment_took_a_spare_and_holds_no_record_can_be_undone() {
    let (_sim, vfs) = sim_with_dirs_for(true);
    let store = klog::storage::store::Store::with_vfs("/data", Arc::clone(&vfs));
    store.create_topic("t", 1).unwrap();
    drop(log_with_a_spare(&vfs));
    store.remove_unwritten_topic("t").unwrap();
    assert!(!vfs.exists(Path::new(DIR)));
}

/// A reader at the end of an empty segment that a broker's restart gives
/// a spare (renamed over it): it reads what is appended to the new file.
#[test]
fn a_reader_of_an_empty_segment_follows_it_into_the_spare_swapped_in() {
    let tmp = tempfile::tempdir().unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(klog::storage::fs::RealFs);
    let store = klog::storage::store::Store::with_vfs(tmp.path(), Arc::clone(&vfs));
    store.create_topic("t", 1).unwrap();
    let dir = tmp.path().join("t-0");
    let reading = klog::tools::consume::open_read_only(Arc::clone(&vfs), &dir).unwrap();
    let mut reader =
        klog::tools::consume::PartitionReader::new(Arc::clone(&vfs), &reading, 0).unwrap();
    let mut seen = Vec::new();
    let poll = |reader: &mut klog::tools::consume::PartitionReader, seen: &mut Vec<u64>| {
        reader
            .poll(1 << 16, |r| {
                seen.push(r.offset);
                Ok(true)
            })
            .unwrap();
    };
    poll(&mut reader, &mut seen);
    let spares = Spares::open(Arc::clone(&vfs), tmp.path(), SEGMENT).unwrap();
    spares.fill().unwrap();
    let mut log = Log::open(Arc::clone(&vfs), &dir, config(Some(&spares)), WRITE).unwrap();
    assert_eq!(spares.taken(), 1);
    append(&mut log, 3).unwrap();
    flush(&mut log).unwrap();
    for _ in 0..3 {
        poll(&mut reader, &mut seen);
    }
    assert_eq!(seen, [0, 1, 2]);
}

/// A spare larger than a log's segments is not taken (most of it would
/// be cut at the roll), nor one for a roll by age alone.
#[test]
fn only_logs_whose_segments_hold_a_spare_take_one_and_only_near_a_roll_by_size() {
    let (_sim, vfs) = sim_with_dirs();
    let spares = Spares::open(Arc::clone(&vfs), Path::new("/data"), 2 * SEGMENT).unwrap();
    spares.fill().unwrap();
    let log = Log::open(
        Arc::clone(&vfs),
        Path::new(DIR),
        config(Some(&spares)),
        WRITE,
    )
    .unwrap();
    assert_eq!(spares.taken(), 0);
    drop(log);
    let dir = Path::new("/data/aged-0");
    vfs.create_dir_all(dir).unwrap();
    let spares = Spares::open(Arc::clone(&vfs), Path::new("/data"), SEGMENT).unwrap();
    let aged = LogConfig {
        segment_age_ms: Some(60_000),
        ..config(Some(&spares))
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, aged, WRITE).unwrap();
    append(&mut log, 1).unwrap();
    spares.fill().unwrap();
    let prep = log.segment_to_prepare().expect("made ahead for its age");
    let made = prep.create();
    log.give_prepared(made).unwrap();
    assert_eq!(spares.taken(), 0, "a roll by age takes no spare");
}

/// No spare is zeroed into the last half of a disk's free space.
#[test]
fn a_spare_leaves_the_disk_room() {
    let tmp = tempfile::tempdir().unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(klog::storage::fs::RealFs);
    // Past any disk: refused however the free space moves meanwhile.
    assert!(klog::storage::fs::free_bytes(tmp.path()).is_some());
    let spares = Spares::open(Arc::clone(&vfs), tmp.path(), u64::MAX / 2).unwrap();
    let refused = spares.fill().unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::StorageFull, "{refused}");
    let left = std::fs::read_dir(tmp.path().join(SPARES_DIR))
        .unwrap()
        .count();
    assert_eq!(left, 0);
}

/// Zeros with bytes after them in a segment's file are damage, not a
/// writer's zeros ahead: the reader at them says so, after its stalls,
/// rather than waiting for ever.
#[test]
fn a_reader_at_zeros_with_bytes_after_them_reports_damage() {
    let (sim, vfs) = sim_with_dirs();
    let (_spares, mut log) = log_with_a_spare(&vfs);
    append(&mut log, 3).unwrap();
    flush(&mut log).unwrap();
    let segment = log.segments().next().unwrap();
    let (path, end) = (segment.path.clone(), segment.size);
    drop(log);
    let mut bytes = sim.read(&path).unwrap();
    bytes[end as usize + 1000] = 0x5a;
    sim.write(&path, &bytes);
    let reading = klog::tools::consume::open_read_only(Arc::clone(&vfs), Path::new(DIR)).unwrap();
    let mut reader =
        klog::tools::consume::PartitionReader::new(Arc::clone(&vfs), &reading, 0).unwrap();
    let mut seen = 0;
    let mut failed = None;
    for _ in 0..1000 {
        match reader.poll(1 << 16, |_| {
            seen += 1;
            Ok(true)
        }) {
            Ok(_) => {}
            Err(e) => {
                failed = Some(e.to_string());
                break;
            }
        }
    }
    assert_eq!(seen, 3);
    let failed = failed.expect("the reader reports the damage");
    assert!(
        failed.contains("corrupt") || failed.contains("not a valid"),
        "{failed}"
    );
}

/// Zeros to the end of a segment that is not the last (a crash's, before
/// the writer's recovery cut them) are damage to a reader there, not a
/// writer's zeros ahead: it reports them after its stalls.
#[test]
fn a_reader_at_zeros_ending_a_segment_before_the_last_reports_damage() {
    let (sim, vfs) = sim_with_dirs();
    let (_spares, mut log) = log_with_a_spare(&vfs);
    while log.segments().count() == 1 {
        append(&mut log, 2).unwrap();
    }
    flush(&mut log).unwrap();
    let first = log.segments().next().unwrap().path.clone();
    drop(log);
    let mut bytes = sim.read(&first).unwrap();
    bytes.resize(bytes.len() + 4096, 0);
    sim.write(&first, &bytes);
    let reading = klog::tools::consume::open_read_only(Arc::clone(&vfs), Path::new(DIR)).unwrap();
    let mut reader =
        klog::tools::consume::PartitionReader::new(Arc::clone(&vfs), &reading, 0).unwrap();
    let failed = (0..1000).find_map(|_| reader.poll(1 << 16, |_| Ok(true)).err());
    let failed = failed.expect("the reader reports the zeros").to_string();
    assert!(
        failed.contains("corrupt") || failed.contains("not a valid"),
        "{failed}"
    );
}
