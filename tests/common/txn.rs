//! Logs holding transactions, written directly (no coordinator): for
//! tests of what readers make of them.

use std::path::Path;
use std::sync::Arc;

use klog::storage::fs::RealFs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::control::Marker;
use klog::storage::record::{self, BatchBuilder, ATTR_TRANSACTIONAL};

/// A batch holding `values`, from producer `id` in a transaction (its
/// first sequence `seq`) when `id` is not -1.
pub fn batch_of(id: i64, seq: i32, values: &[&str]) -> Vec<u8> {
    batch_at(id, seq, 1_700_000_000_000, values)
}

/// [`batch_of`] with the timestamp `at` (ms).
pub fn batch_at(id: i64, seq: i32, at: i64, values: &[&str]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for value in values {
        b.push(at, None, &[], value.as_bytes());
    }
    let mut bytes = b.finish().to_vec();
    if id >= 0 {
        record::set_producer(&mut bytes, id, 0, seq);
        bytes[21..23].copy_from_slice(&ATTR_TRANSACTIONAL.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    bytes
}

/// Opens partition `topic`-0 of `data` to write (made if need be).
pub fn open_partition(data: &Path, topic: &str) -> Log {
    let dir = data.join(format!("{topic}-0"));
    std::fs::create_dir_all(&dir).unwrap();
    let options = OpenOptions {
        writable: true,
        lock: true,
    };
    Log::open(Arc::new(RealFs), &dir, LogConfig::default(), options).unwrap()
}

/// Ends producer `id`'s transaction in `log`: committed or aborted.
pub fn end_txn(log: &mut Log, id: i64, commit: bool) {
    let marker = Marker {
        commit,
        coordinator_epoch: 3,
    };
    log.append_marker((id, 0), marker, 1_000).unwrap();
}

/// Partition t-0 of `data`: "plain" at 0; producer 7's "committed" at 1
/// and producer 8's "aborted" at 2; "plain-2" at 3; 7 commits at 4, 8
/// aborts at 5; producer 9's "open" at 6 (its transaction left open).
pub fn write_transactions(data: &Path) {
    let mut log = open_partition(data, "t");
    for (id, value) in [
        (-1, "plain"),
        (7, "committed"),
        (8, "aborted"),
        (-1, "plain-2"),
    ] {
        log.append(&mut batch_of(id, 0, &[value]), 1_000).unwrap();
    }
    end_txn(&mut log, 7, true);
    end_txn(&mut log, 8, false);
    log.append(&mut batch_of(9, 0, &["open"]), 1_000).unwrap();
    log.close().unwrap();
}
