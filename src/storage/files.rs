//! The open files of sealed segments: opened when read, and kept open in
//! one cache per process, least recently used closed first.
//!
//! An active segment holds its file (and its two indexes) open: it is
//! appended to. A sealed segment is read by consumers that catch up and by
//! followers, then mostly never again; holding every segment's file open
//! would make the open-file limit (`ulimit -n`) a bound on how much log a
//! broker may keep, and a data directory it wrote past that bound one it
//! could not open again. So a sealed segment's file is looked up here by
//! the segment's key, and opened again by its path when it is not held;
//! the cache keeps at most [`capacity`] of them, an eighth of the
//! process's open-file limit (at least 16, at most 10,000). A reader keeps
//! the file it was given open for as long as it holds it (a `sendfile` in
//! progress), whatever the cache closes meanwhile.
//!
//! A file that cannot be opened for want of descriptors (`EMFILE`,
//! `ENFILE`) closes the older half of the cache and is tried once more.
//!
//! A segment's key is dropped from the cache when the segment and every
//! walk of it ([`crate::storage::scrub::Extent`]) are gone, so that a
//! segment retention removed does not hold its disk space through a
//! cached descriptor.

use std::io;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use lru::LruCache;

use crate::storage::fs::{VFile, Vfs};
use crate::sync::lock;

/// Sealed segment files a process keeps open at most: an eighth of its
/// open-file limit as it is at the first open, from 16 to 10,000.
pub fn capacity() -> usize {
    CACHE.capacity()
}

/// The cache of this process.
static CACHE: LazyLock<FileCache> = LazyLock::new(|| {
    let files = crate::limits::open_files_max() / 8;
    FileCache::new(files.clamp(16, 10_000) as usize)
});

/// The key of one segment's file in the cache: the cache forgets it when
/// the last holder of the key drops it.
#[derive(Debug)]
pub(crate) struct Key(u64);

impl Key {
    /// A key no other segment has.
    pub(crate) fn new() -> Arc<Key> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Arc::new(Key(NEXT.fetch_add(1, Ordering::Relaxed)))
    }

    /// The file of this key: the cached one, or one `open` gives (then
    /// cached).
    pub(crate) fn file(
        &self,
        open: impl Fn() -> io::Result<Arc<dyn VFile>>,
    ) -> io::Result<Arc<dyn VFile>> {
        CACHE.get(self.0, open)
    }

    /// Caches `file` as this key's (a segment just sealed: consumers and
    /// followers still read it).
    pub(crate) fn keep(&self, file: Arc<dyn VFile>) {
        CACHE.put(self.0, file);
    }

    /// Closes this key's cached file, if any (it is held elsewhere now).
    pub(crate) fn forget(&self) {
        CACHE.forget(self.0);
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        CACHE.forget(self.0);
    }
}

/// Open files by key, least recently used first out.
pub(crate) struct FileCache {
    open: Mutex<LruCache<u64, Arc<dyn VFile>>>,
}

impl FileCache {
    /// A cache of at most `capacity` files (at least one).
    pub(crate) fn new(capacity: usize) -> FileCache {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        FileCache {
            open: Mutex::new(LruCache::new(capacity)),
        }
    }

    fn capacity(&self) -> usize {
        lock(&self.open).cap().get()
    }

    /// The file of `key`, opened by `open` when it is not cached. The open
    /// runs outside the cache's lock (a slow disk stalls no other reader).
    pub(crate) fn get(
        &self,
        key: u64,
        open: impl Fn() -> io::Result<Arc<dyn VFile>>,
    ) -> io::Result<Arc<dyn VFile>> {
        if let Some(file) = lock(&self.open).get(&key) {
            return Ok(Arc::clone(file));
        }
        let file = match open() {
            Err(e) if no_descriptor(&e) => {
                self.shed();
                open()?
            }
            opened => opened?,
        };
        self.put(key, Arc::clone(&file));
        Ok(file)
    }

    /// Caches `file` as `key`'s, closing the least recently used file
    /// when the cache is full.
    pub(crate) fn put(&self, key: u64, file: Arc<dyn VFile>) {
        lock(&self.open).put(key, file);
    }

    /// Closes `key`'s cached file, if any.
    pub(crate) fn forget(&self, key: u64) {
        lock(&self.open).pop(&key);
    }

    /// Closes the least recently used half of the cached files.
    fn shed(&self) {
        let mut open = lock(&self.open);
        for _ in 0..open.len().div_ceil(2) {
            open.pop_lru();
        }
    }

    /// Closes every cached file.
    #[cfg(test)]
    pub(crate) fn clear(&self) {
        lock(&self.open).clear();
    }

    /// Files cached now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.open).len()
    }
}

impl std::fmt::Debug for FileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileCache")
            .field("capacity", &self.capacity())
            .finish()
    }
}

/// Whether `e`, or an error it was caused by, says the process (or the
/// system) had no descriptor left: an open that failed, before any write
/// or fsync, so that trying again later is safe.
pub fn out_of_descriptors(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(e) = at {
        if e.downcast_ref::<io::Error>().is_some_and(no_descriptor) {
            return true;
        }
        at = e.source();
    }
    false
}

fn no_descriptor(e: &io::Error) -> bool {
    let code = e.raw_os_error();
    code == Some(nix::libc::EMFILE) || code == Some(nix::libc::ENFILE)
}

/// A segment's file as a walk outside the log's lock holds it
/// (`Segment::file_handle`).
#[derive(Debug, Clone)]
pub struct SegmentFile {
    pub(crate) held: Option<Arc<dyn VFile>>,
    pub(crate) key: Arc<Key>,
    pub(crate) vfs: Arc<dyn Vfs>,
    pub(crate) path: PathBuf,
    pub(crate) writable: bool,
}

impl SegmentFile {
    /// The file: the one the segment held, or the cached one, or opened
    /// again.
    pub fn open(&self) -> std::io::Result<Arc<dyn VFile>> {
        let held = self.held.as_ref();
        held_or_cached(held, &self.key, &*self.vfs, &self.path, self.writable)
    }
}

/// `held`, or else the file of `key` among the cached files, opened
/// again when it is not cached.
pub(crate) fn held_or_cached(
    held: Option<&Arc<dyn VFile>>,
    key: &Key,
    vfs: &dyn Vfs,
    path: &Path,
    writable: bool,
) -> std::io::Result<Arc<dyn VFile>> {
    match held {
        Some(file) => Ok(Arc::clone(file)),
        None => key.file(|| open_file(vfs, path, writable)),
    }
}

/// Opens the segment file `path`: for reading and writing if `writable`.
pub(crate) fn open_file(
    vfs: &dyn Vfs,
    path: &Path,
    writable: bool,
) -> std::io::Result<Arc<dyn VFile>> {
    if writable {
        vfs.open(path, false)
    } else {
        vfs.open_read(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::fs::Vfs;
    use std::cell::Cell;
    use std::path::Path;

    fn sim_file(sim: &SimFs, name: &str) -> Arc<dyn VFile> {
        sim.create_dir_all(Path::new("/d")).unwrap();
        sim.open(&Path::new("/d").join(&name[1..]), true).unwrap()
    }

    #[test]
    fn the_least_recently_used_file_is_closed_first_and_opened_again_when_read() {
        let sim = SimFs::new();
        let cache = FileCache::new(2);
        let opens = Cell::new(0);
        let open = |name: &'static str| {
            let sim = &sim;
            let opens = &opens;
            move || {
                opens.set(opens.get() + 1);
                Ok(sim_file(sim, name))
            }
        };
        cache.get(1, open("/a")).unwrap();
        cache.get(2, open("/b")).unwrap();
        cache.get(1, open("/a")).unwrap();
        assert_eq!(opens.get(), 2, "the second read of /a is cached");
        cache.get(3, open("/c")).unwrap();
        assert_eq!(cache.len(), 2);
        cache.get(1, open("/a")).unwrap();
        assert_eq!(opens.get(), 3, "/a was read last: /b was closed for /c");
        cache.get(2, open("/b")).unwrap();
        assert_eq!(opens.get(), 4);
        cache.forget(2);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn out_of_descriptors_closes_half_the_cache_and_tries_again() {
        let sim = SimFs::new();
        let cache = FileCache::new(8);
        for key in 0..8 {
            cache.put(key, sim_file(&sim, "/x"));
        }
        let tries = Cell::new(0);
        let file = cache.get(9, || {
            tries.set(tries.get() + 1);
            if tries.get() == 1 {
                Err(io::Error::from_raw_os_error(nix::libc::EMFILE))
            } else {
                Ok(sim_file(&sim, "/y"))
            }
        });
        assert!(file.is_ok());
        assert_eq!(tries.get(), 2);
        assert_eq!(cache.len(), 5, "4 closed, the new one cached");
        let refused = cache.get(10, || Err(io::Error::from_raw_os_error(nix::libc::ENFILE)));
        assert_eq!(refused.unwrap_err().raw_os_error(), Some(nix::libc::ENFILE));
    }

    /// Held by the tests that clear the process's cache or count what it
    /// holds, so that one never runs while the other does.
    static PROCESS_CACHE: Mutex<()> = Mutex::new(());

    /// The descriptors this process holds on files in `dir`, and on
    /// those among them that are deleted.
    fn open_in(dir: &Path) -> (usize, usize) {
        let (mut open, mut deleted) = (0, 0);
        for fd in std::fs::read_dir("/proc/self/fd").unwrap() {
            let Ok(target) = std::fs::read_link(fd.unwrap().path()) else {
                continue;
            };
            if target.starts_with(dir) {
                open += 1;
                deleted += usize::from(target.to_string_lossy().ends_with(" (deleted)"));
            }
        }
        (open, deleted)
    }

    /// A log on a real disk, its sealed segments' files closed by the
    /// cache (as a full cache would): every record is still read, and the
    /// segments retention removes are closed with them, cached or not.
    #[test]
    fn sealed_segments_are_read_after_their_files_are_closed_and_closed_when_removed() {
        let _alone = PROCESS_CACHE.lock();
        use crate::storage::fs::RealFs;
        use crate::storage::log::{Log, LogConfig, OpenOptions};
        use crate::storage::record::BatchBuilder;
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            segment_bytes: 4096,
            retention_ms: None,
            retention_bytes: Some(4096),
            ..LogConfig::default()
        };
        let options = OpenOptions {
            writable: true,
            lock: true,
        };
        let mut log = Log::open(Arc::new(RealFs), dir.path(), config, options).unwrap();
        for i in 0..100u8 {
            let mut b = BatchBuilder::new();
            b.push(0, None, &[], &[i; 500]);
            log.append(&mut b.finish().to_vec(), 0).unwrap();
        }
        log.flush().unwrap();
        let segments = log.segments().count();
        assert!(segments > 10, "{segments}");
        CACHE.clear();
        for offset in 0..100u64 {
            let slice = log.read(offset, 1).unwrap().unwrap();
            let mut bytes = Vec::new();
            slice.read_into(&mut bytes).unwrap();
            let batch = crate::storage::batches::Batches::new(slice.format, &bytes, 1 << 20)
                .next()
                .unwrap()
                .unwrap()
                .1;
            assert_eq!(batch.header.base_offset, offset);
        }
        let (open, _) = open_in(dir.path());
        assert!(open >= segments, "the sealed ones read are cached: {open}");
        let removed = log.apply_retention(0).unwrap();
        assert!(removed.len() + 3 > segments, "{removed:?}");
        let (open_after, deleted) = open_in(dir.path());
        assert_eq!(deleted, 0, "no descriptor holds a removed segment");
        assert!(open_after + removed.len() <= open, "{open_after}");
    }

    #[test]
    fn a_key_dropped_closes_its_file() {
        let _alone = PROCESS_CACHE.lock();
        let sim = SimFs::new();
        let key = Key::new();
        let file = key.file(|| Ok(sim_file(&sim, "/k"))).unwrap();
        assert_eq!(Arc::strong_count(&file), 2, "held by the cache too");
        drop(key);
        assert_eq!(Arc::strong_count(&file), 1);
    }
}
