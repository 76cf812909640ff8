//! The partition writer lock: one writer per partition, across processes.
//!
//! The lock is an exclusive `flock` on `<partition>/.lock`, which also holds
//! the holder's pid as text, so that a refused writer can say who holds it.
//! The kernel releases a `flock` when its process dies, `kill -9` included,
//! so a crash never leaves a partition locked. Readers take no lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::error::{Error, IoContext, Result};

/// File name of the lock inside a partition directory.
pub const LOCK_FILE: &str = ".lock";

/// A held partition lock; released when dropped.
#[derive(Debug)]
pub struct PartitionLock {
    _flock: Flock<File>,
    path: PathBuf,
}

impl PartitionLock {
    /// Takes the lock of the partition in `dir`, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<PartitionLock> {
        let path = dir.join(LOCK_FILE);
        let Some(mut flock) = try_flock(&path)? else {
            return Err(Error::Locked {
                path: dir.to_path_buf(),
                holder: holder(dir)
                    .map_or("another process".to_string(), |pid| format!("pid {pid}")),
            });
        };
        let pid = std::process::id().to_string();
        flock.set_len(0).ctx("truncate", &path)?;
        flock.seek(SeekFrom::Start(0)).ctx("seek", &path)?;
        flock.write_all(pid.as_bytes()).ctx("write", &path)?;
        Ok(PartitionLock {
            _flock: flock,
            path,
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Opens (creating) `path` and takes its exclusive `flock` without
/// waiting: `None` when another open file holds it.
pub fn try_flock(path: &Path) -> Result<Option<Flock<File>>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .ctx("open lock", path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(Error::io("lock", path, e.into())),
    }
}

/// Whether some process holds the `flock` on `path` now (a missing file
/// is not held).
pub fn is_flocked(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    Flock::lock(file, FlockArg::LockSharedNonblock).is_err()
}

/// The pid written in a partition's lock file, if the lock is held now.
pub fn holder(dir: &Path) -> Option<u32> {
    let path = dir.join(LOCK_FILE);
    let file = File::open(&path).ok()?;
    // Probe: if we can take a shared lock, nobody holds it.
    let mut file = match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(_) => return None,
        Err((file, _)) => file,
    };
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}
