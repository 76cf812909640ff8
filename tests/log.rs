//! The partition log through the library: crash points, torn tails,
//! damaged indexes, and power loss through the simulated file system.

use std::path::Path;
use std::sync::Arc;

use klog::fs::sim::SimFs;
use klog::fs::{RealFs, Vfs};
use klog::log::{Log, LogConfig, OpenOptions};
use klog::record::{Batch, BatchBuilder};

const WRITE: OpenOptions = OpenOptions {
    writable: true,
    lock: false,
};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
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

/// Every record of the log, as (offset, value), read through `Log::read`.
fn read_all(log: &Log) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    while let Some(slice) = log.read(offset, 1 << 16).unwrap() {
        slice.read_into(&mut buf).unwrap();
        let mut at = 0;
        while let Ok(b) = Batch::decode(&buf[at..], 1 << 30) {
            for r in b.records(1 << 20) {
                let r = r.unwrap();
                if r.offset >= offset {
                    out.push((r.offset, String::from_utf8(r.value.to_vec()).unwrap()));
                }
            }
            at += b.total_bytes();
        }
        offset = out.last().map_or(offset, |r| r.0 + 1);
    }
    out
}

fn open(vfs: &Arc<dyn Vfs>, dir: &Path) -> Log {
    Log::open(Arc::clone(vfs), dir, config(), WRITE).unwrap()
}

#[test]
fn cutting_the_last_record_at_every_byte_keeps_the_whole_ones() {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/p");
    vfs.create_dir_all(dir).unwrap();
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
    let mut end = klog::record::BATCH_HEADER_BYTES;
    for r in b.records(1 << 20) {
        end += r.unwrap().encoded_bytes as usize;
        record_ends.push(end);
    }
    for cut in 0..second.len() {
        sim.write(&path, &full[..before.len() + cut]);
        let mut log = open(&vfs, dir);
        let whole = record_ends.iter().filter(|&&e| e <= cut).count() as u64;
        let expected_end = 3 + if cut < klog::record::BATCH_HEADER_BYTES {
            0
        } else {
            whole
        };
        assert_eq!(log.next_offset(), expected_end, "cut at {cut}");
        let records = read_all(&log);
        assert_eq!(records.len() as u64, expected_end, "cut at {cut}");
        for (i, (offset, value)) in records.iter().enumerate() {
            assert_eq!((*offset, value.as_str()), (i as u64, format!("value-{i}").as_str()));
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
    assert!(log.recovery().segments[0].problem.as_ref().unwrap().torn_tail);
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
        assert!(klog::index::read_entries(&RealFs, l).is_ok(), "{}", l.display());
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
