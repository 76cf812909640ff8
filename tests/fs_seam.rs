//! The file-system seam on a real disk: a full disk under the active
//! segment's memory-mapped index is an error the log can report, not a
//! `SIGBUS` that kills the process.
//!
//! Needs root (it mounts a small tmpfs); where mounting fails it prints
//! `skipped: ...` and passes.

mod common;

use common::{fill, Tmpfs};

use klog::storage::fs::{RealFs, Vfs};
use klog::storage::index::{IndexEntry, SegmentIndex, ALLOCATION_SLOTS};

fn entry(i: u32) -> IndexEntry {
    IndexEntry {
        relative_offset: i,
        position: 100 * i,
        max_timestamp: 0,
    }
}

#[test]
fn a_full_disk_under_the_mapped_index_is_an_error_not_a_sigbus() {
    let tmpfs = match Tmpfs::mount("1m") {
        Ok(t) => t,
        Err(e) => {
            println!("skipped: cannot mount a tmpfs ({e})");
            return;
        }
    };
    let log = tmpfs.path().join("00000000000000000000.log");
    // Far more slots than the disk could hold: the preallocation is sparse.
    let slots = 64 * ALLOCATION_SLOTS;
    let mut index = SegmentIndex::create(&RealFs, &log, vec![], slots).unwrap();
    index.append(entry(1)).unwrap();
    fill(&tmpfs.path().join("filler"));
    // The first chunk was allocated before the disk filled: every store
    // into it, across many pages, lands.
    for i in 2..=ALLOCATION_SLOTS as u32 {
        index.append(entry(i)).unwrap();
    }
    // The next entry needs a new chunk, and there is no room: an error,
    // and the process is alive to see it.
    let next = ALLOCATION_SLOTS as u32 + 1;
    let err = index.append(entry(next)).unwrap_err();
    assert!(matches!(err, klog::Error::DiskFull { .. }), "{err}");
    assert_eq!(index.entries().len(), ALLOCATION_SLOTS);
    // Freeing space lets the log go on.
    std::fs::remove_file(tmpfs.path().join("filler")).unwrap();
    index.append(entry(next)).unwrap();
    index.trim().unwrap();
    drop(index);
    let entries = klog::storage::index::read_entries(&RealFs, &log).unwrap();
    assert_eq!(entries.len(), ALLOCATION_SLOTS + 1);
    assert!(RealFs.exists(&log.with_extension("index")));
    assert_eq!(
        std::fs::metadata(log.with_extension("timeindex"))
            .unwrap()
            .len(),
        (12 * entries.len()) as u64
    );
}
