//! File locks, and the partition writer lock built on them: one writer per
//! partition, across processes.
//!
//! A lock is an exclusive open-file-description lock (`F_OFD_SETLK`) on the
//! whole file. Like a `flock`, it belongs to the open file, so the kernel
//! releases it when the file is closed or its process dies, `kill -9`
//! included: a crash never leaves anything locked. Unlike a `flock`, it can
//! be tested without being taken (`F_OFD_GETLK`), so a probe (`klog-dump`,
//! `klog-recover --dry-run`, the registry looking for stale entries) never
//! makes a writer's attempt fail, not even for an instant.
//!
//! The partition lock is `<partition>/.lock`, which also holds the holder's
//! pid as text, so that a refused writer can say who holds it. Readers take
//! no lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use nix::libc;

use crate::error::{Error, IoContext, Result};

/// File name of the lock inside a partition directory.
pub const LOCK_FILE: &str = ".lock";

/// A held directory lock (a partition's writer, or the broker of a data
/// directory): `<dir>/.lock`, holding the holder's pid; released when dropped.
#[derive(Debug)]
pub struct DirLock {
    _lock: FileLock,
    path: PathBuf,
}

impl DirLock {
    /// Takes the lock of `dir` (a partition or a data directory), or says
    /// who holds it.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let Some(lock) = try_lock(&path)? else {
            return Err(Error::Locked {
                path: dir.to_path_buf(),
                holder: holder(dir)
                    .map_or("another process".to_string(), |pid| format!("pid {pid}")),
            });
        };
        let pid = std::process::id().to_string();
        let mut file = &lock.file;
        file.set_len(0).ctx("truncate", &path)?;
        file.seek(SeekFrom::Start(0)).ctx("seek", &path)?;
        file.write_all(pid.as_bytes()).ctx("write", &path)?;
        Ok(DirLock { _lock: lock, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// An exclusive lock on a whole file, held while this lives.
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

impl FileLock {
    /// The locked file, to write what the holder wants others to read.
    pub fn file(&self) -> &File {
        &self.file
    }
}

/// A lock request (or probe) of `kind` over the whole file.
fn whole_file(kind: libc::c_int) -> libc::flock {
    libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// Opens (creating) `path` and takes its exclusive lock without waiting:
/// `None` when another open file holds it.
pub fn try_lock(path: &Path) -> Result<Option<FileLock>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .ctx("open lock", path)?;
    lock_file(file, path)
}

/// Takes the exclusive lock of the existing file `path` without waiting,
/// creating nothing: `None` when the file is missing or another open file
/// holds its lock. Whoever removes a stale file takes its lock first, so
/// that it removes only a file no process holds.
pub fn try_lock_existing(path: &Path) -> Result<Option<FileLock>> {
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open lock", path, e)),
    };
    lock_file(file, path)
}

fn lock_file(file: File, path: &Path) -> Result<Option<FileLock>> {
    let request = whole_file(libc::F_WRLCK);
    match fcntl(file.as_raw_fd(), FcntlArg::F_OFD_SETLK(&request)) {
        Ok(_) => Ok(Some(FileLock { file })),
        Err(Errno::EAGAIN | Errno::EACCES) => Ok(None),
        Err(e) => Err(Error::io("lock", path, e.into())),
    }
}

/// Whether some open file holds the lock on `path` now, found without
/// taking it; a missing file is not held, and nothing is created.
pub fn is_locked(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let mut probe = whole_file(libc::F_WRLCK);
    match fcntl(file.as_raw_fd(), FcntlArg::F_OFD_GETLK(&mut probe)) {
        Ok(_) => probe.l_type != libc::F_UNLCK as libc::c_short,
        Err(_) => false,
    }
}

/// The pid written in a partition's lock file, if the lock is held now.
pub fn holder(dir: &Path) -> Option<u32> {
    let path = dir.join(LOCK_FILE);
    if !is_locked(&path) {
        return None;
    }
    let mut text = String::new();
    File::open(&path).ok()?.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe (klog-dump, klog-recover --dry-run, the registry looking for
    /// stale entries) must never make a writer's lock fail: probing takes
    /// no lock, not even for an instant.
    #[test]
    fn probing_never_makes_taking_the_lock_fail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        drop(try_lock(&path).unwrap().unwrap());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let probing = {
            let (path, stop) = (path.clone(), std::sync::Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut probes = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::black_box(is_locked(&path));
                    probes += 1;
                }
                probes
            })
        };
        let mut refused = 0;
        for _ in 0..20_000 {
            match try_lock(&path).unwrap() {
                Some(lock) => drop(lock),
                None => refused += 1,
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let probes = probing.join().unwrap();
        assert!(probes > 100, "the prober ran ({probes} probes)");
        assert_eq!(
            refused, 0,
            "taking a free lock failed while another process only probed it"
        );
    }

    #[test]
    fn a_held_lock_is_seen_by_a_probe_and_refuses_a_second_taker() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        assert!(!is_locked(&path), "a missing file is not held");
        assert!(!path.exists(), "probing creates nothing");
        let held = try_lock(&path).unwrap().unwrap();
        assert!(is_locked(&path));
        assert!(try_lock(&path).unwrap().is_none());
        drop(held);
        assert!(!is_locked(&path));
    }
}
