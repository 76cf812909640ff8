//! The narrow file-I/O seam the log writes through.
//!
//! Every byte a [`crate::storage::log::Log`] stores goes through a [`Vfs`]: files it
//! creates, appends, truncates, syncs and maps, and the directory operations
//! (create, rename, remove, directory fsync) that make those durable. The
//! production implementation, [`RealFs`], is a thin layer over `std::fs`,
//! `memmap2` and `fsync`. [`crate::storage::fs::sim::SimFs`] keeps files in memory and
//! remembers what was made durable, so that a test can cut the power at any
//! point and see only what an fsync had reached; it can also kill the
//! process, fail an fsync the way Linux does, and run out of space.
//!
//! A store through a writable memory map cannot return an error: when the
//! file system has no block for the page it touches (a sparse file on a full
//! disk), the kernel raises `SIGBUS` and the whole process dies.
//! [`VFile::allocate`] is the remedy: it allocates a range of the file for
//! real (`fallocate`), so that `ENOSPC` comes back as an `Err` there, and
//! later stores into the range have their blocks. Whoever maps a file for
//! writing allocates each region before any store reaches it (see
//! [`crate::storage::index`]).
//!
//! Below the seam sit the few things every writer of the data directory does
//! the same way: [`write_atomic`] (temporary file, fsync, rename, directory
//! fsync), [`sync_directory`], [`read_small`] for the small text files
//! written so, and [`is_zero_range`] for the zeros a power cut leaves.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::error::{IoContext, Result};

pub mod sim;

/// Makes the entries of `dir` (creations, renames, removals) durable: a new
/// file exists after a power cut only once its directory was fsynced.
pub fn sync_directory(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    vfs.sync_dir(dir).ctx("fsync directory", dir)
}

/// Bytes free for this process in the file system holding `path`, when
/// that is a real one that says (statvfs).
pub fn free_bytes(path: &Path) -> Option<u64> {
    let fs = nix::sys::statvfs::statvfs(path).ok()?;
    Some(fs.blocks_available().saturating_mul(fs.fragment_size()))
}

/// Writes `dir/name` atomically: a temporary file, fsynced, renamed over
/// the name, and the directory fsynced. A crash leaves the old contents or
/// the new ones, never a mix, and at worst a `.tmp` file beside them.
pub fn write_atomic(vfs: &dyn Vfs, dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let file = vfs.open(&tmp, true).ctx("create", &tmp)?;
    file.set_len(0).ctx("truncate", &tmp)?;
    file.write_all_at(bytes, 0).ctx("write", &tmp)?;
    file.sync_data().ctx("fsync", &tmp)?;
    vfs.rename(&tmp, &path).ctx("rename", &tmp)?;
    sync_directory(vfs, dir)
}

/// Bytes read at a time by the helpers that go through a range of a file.
pub const RANGE_CHUNK_BYTES: u64 = 1 << 20;

/// Whether bytes `from..to` of `file` are all zeros, read a chunk at a time
/// and stopping at the first chunk that is not.
pub fn is_zero_range(file: &dyn VFile, from: u64, to: u64) -> io::Result<bool> {
    let mut buf = vec![0u8; RANGE_CHUNK_BYTES.min(to.saturating_sub(from)) as usize];
    let mut at = from;
    while at < to {
        let n = RANGE_CHUNK_BYTES.min(to - at) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// Bytes [`read_small`] reads at most.
const SMALL_FILE_BYTES_MAX: u64 = 4096;

/// Reads a small text file (at most 4 KiB), `None` when absent or not text.
pub fn read_small(vfs: &dyn Vfs, path: &Path) -> Option<String> {
    let file = vfs.open_read(path).ok()?;
    let len = file.len().ok()?;
    if len > SMALL_FILE_BYTES_MAX {
        return None;
    }
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, 0).ok()?;
    String::from_utf8(buf).ok()
}

/// A file system: the operations the log needs and nothing more.
pub trait Vfs: Send + Sync + fmt::Debug {
    /// Opens a file for reading and writing; creates it when `create` is set.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn VFile>>;
    /// Opens a file for reading only.
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn VFile>>;
    /// Whether a file or directory exists.
    fn exists(&self, path: &Path) -> bool;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;
    /// Renames a file, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names of the entries of a directory (files and directories).
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Whether partitions on it can be locked with file locks (only the
    /// operating system's file system can).
    fn supports_locks(&self) -> bool {
        false
    }
}

/// An open file.
#[allow(clippy::len_without_is_empty)]
pub trait VFile: Send + Sync + fmt::Debug {
    /// Reads at `pos`; returns the bytes read, 0 at the end.
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `pos`.
    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()>;
    /// The file's length.
    fn len(&self) -> io::Result<u64>;
    /// Truncates or extends (with zeros) to `len`.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Allocates disk blocks for bytes `offset..offset + len`, extending the
    /// file (with zeros) when it is shorter, so that later stores into the
    /// range through a memory map can never fault for lack of space. Fails
    /// with `ENOSPC` when the disk has no room. Only for ranges whose bytes
    /// are still zero (fresh preallocated space): where the file system has
    /// no `fallocate`, [`RealFs`] writes zeros over the range instead.
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()>;
    /// Makes the file's data durable (fdatasync). After a failure the data
    /// written since the last successful sync may be lost for good even if
    /// a later sync succeeds (Linux marks the failed pages clean): callers
    /// must not retry, but treat the file as broken.
    fn sync_data(&self) -> io::Result<()>;
    /// Starts writing back the bytes `offset..offset + len` and waits for
    /// them, without an fsync (Linux's `sync_file_range`): they are not
    /// durable before the next [`VFile::sync_data`], but that sync has
    /// little left to write. Nothing where there is no page cache.
    fn write_back(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Maps the first `len` bytes for reading and writing (the file must be
    /// at least that long).
    fn map_mut(&self, len: u64) -> io::Result<Box<dyn MapMut>>;
    /// The operating system's file, where there is one, for `sendfile`.
    fn as_file(&self) -> Option<&File>;
    /// When the file's data last changed, in ms since the Unix epoch.
    fn modified_ms(&self) -> io::Result<i64>;
    /// Sets the time [`VFile::modified_ms`] answers (a rewritten file
    /// keeps its data's age). Not durable before the next fsync.
    fn set_modified_ms(&self, ms: i64) -> io::Result<()>;

    /// Reads exactly `buf.len()` bytes at `pos`.
    fn read_exact_at(&self, mut buf: &mut [u8], mut pos: u64) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.read_at(buf, pos)?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            buf = &mut buf[n..];
            pos += n as u64;
        }
        Ok(())
    }
}

/// A writable memory mapping of a file's first bytes.
pub trait MapMut: Send + Sync + fmt::Debug {
    /// The mapped bytes.
    fn bytes(&self) -> &[u8];
    /// The mapped bytes, for writing.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// Writes the mapped bytes back to the file durably (msync).
    fn flush(&self) -> io::Result<()>;
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

#[derive(Debug)]
struct RealFile(File);

#[derive(Debug)]
struct RealMap(memmap2::MmapMut);

impl Vfs for RealFs {
    fn supports_locks(&self) -> bool {
        true
    }

    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn VFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        Ok(Arc::new(RealFile(file)))
    }

    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn VFile>> {
        Ok(Arc::new(RealFile(File::open(path)?)))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }
}

impl VFile for RealFile {
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        self.0.read_at(buf, pos)
    }

    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.0.write_all_at(buf, pos)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let range =
            |n: u64| nix::libc::off_t::try_from(n).map_err(|_| io::Error::other("range too large"));
        match nix::fcntl::fallocate(
            self.0.as_raw_fd(),
            nix::fcntl::FallocateFlags::empty(),
            range(offset)?,
            range(len)?,
        ) {
            Ok(()) => Ok(()),
            Err(nix::errno::Errno::EOPNOTSUPP) => {
                // No fallocate here: writing zeros allocates the blocks too.
                // The range holds zeros already (the callers allocate fresh
                // preallocated space), so nothing is overwritten.
                let zeros = vec![0u8; 64 << 10];
                let (mut pos, end) = (offset, offset + len);
                while pos < end {
                    let n = (end - pos).min(zeros.len() as u64) as usize;
                    self.0.write_all_at(&zeros[..n], pos)?;
                    pos += n as u64;
                }
                Ok(())
            }
            Err(e) => Err(io::Error::from(e)),
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn write_back(&self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let range = |n: u64| {
            nix::libc::off64_t::try_from(n).map_err(|_| io::Error::other("range too large"))
        };
        let flags = nix::libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | nix::libc::SYNC_FILE_RANGE_WRITE
            | nix::libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: a system call on this file's open descriptor, with no
        // memory of ours.
        #[allow(unsafe_code)]
        let done = unsafe {
            nix::libc::sync_file_range(self.0.as_raw_fd(), range(offset)?, range(len)?, flags)
        };
        nix::errno::Errno::result(done)
            .map(drop)
            .map_err(io::Error::from)
    }

    fn map_mut(&self, len: u64) -> io::Result<Box<dyn MapMut>> {
        let len = usize::try_from(len).map_err(|_| io::Error::other("mapping too large"))?;
        // SAFETY: the mapped file is an index that only this process writes
        // (the partition's writer lock guarantees a single writer), and it is
        // never truncated while mapped: `Index` drops the map before `set_len`.
        // Readers in other processes map it read-only and tolerate any bytes.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(&self.0)? };
        Ok(Box::new(RealMap(map)))
    }

    fn as_file(&self) -> Option<&File> {
        Some(&self.0)
    }

    fn set_modified_ms(&self, ms: i64) -> io::Result<()> {
        let at = match u64::try_from(ms) {
            Ok(ms) => std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
            Err(_) => std::time::UNIX_EPOCH,
        };
        self.0.set_modified(at)
    }

    fn modified_ms(&self) -> io::Result<i64> {
        let modified = self.0.metadata()?.modified()?;
        Ok(match modified.duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        })
    }
}

impl MapMut for RealMap {
    fn bytes(&self) -> &[u8] {
        &self.0
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }

    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }
}
