//! The file-system seam on a real disk: a full disk under the active
//! segment's memory-mapped index is an error the log can report, not a
//! `SIGBUS` that kills the process.
//!
//! Needs root (it mounts a small tmpfs); where mounting fails it prints
//! `skipped: ...` and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use klog::fs::{RealFs, Vfs};
use klog::index::{IndexEntry, SegmentIndex, ALLOCATION_SLOTS};

/// A tmpfs mounted on a temporary directory, unmounted when dropped (also
/// when the test fails).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(self.dir.path()).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
        }
    }
}

/// Writes a file until the disk is full.
fn fill(path: &PathBuf) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    let block = vec![0xAB; 4096];
    loop {
        match file.write_all(&block) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
            Err(e) => panic!("filling the disk: {e}"),
        }
    }
}

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
    let entries = klog::index::read_entries(&RealFs, &log).unwrap();
    assert_eq!(entries.len(), ALLOCATION_SLOTS + 1);
    assert!(RealFs.exists(&log.with_extension("index")));
    assert_eq!(
        std::fs::metadata(log.with_extension("timeindex")).unwrap().len(),
        (12 * entries.len()) as u64
    );
}
