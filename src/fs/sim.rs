//! An in-memory [`Vfs`] that can lose power.
//!
//! Each file keeps two versions of its bytes: what the process sees, and what
//! an `fsync` last made durable. Each directory likewise keeps its entries as
//! the process sees them and as the last directory fsync made them. [`SimFs::crash`]
//! throws away everything not durable, as a power cut would, except that a
//! file only appended to since its last fsync may keep any prefix of the
//! appended bytes (the disk wrote some pages of the page cache, not others).
//! Directories themselves are durable as soon as they are created.
//!
//! [`SimFs::cut_power_after`] makes every change after the first `n` fail, as
//! if the machine stopped there mid-operation; [`SimFs::crash`] then decides
//! what the disk kept. Together they cut an operation at each of its writes.
//!
//! This is the seam the power-loss tests cut through; production code uses
//! [`super::RealFs`].

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{MapMut, VFile, Vfs};

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    modified_ms: i64,
}

type InodeRef = Arc<Mutex<Inode>>;

#[derive(Debug, Default)]
struct State {
    dirs: BTreeSet<PathBuf>,
    /// Entries as the process sees them.
    live: BTreeMap<PathBuf, InodeRef>,
    /// Entries as the last fsync of their directory left them.
    durable: BTreeMap<PathBuf, InodeRef>,
}

/// Counts changes and refuses them once the budget is spent.
#[derive(Debug)]
struct Power {
    changes: AtomicU64,
    budget: AtomicU64,
    /// The simulated wall clock that stamps modification times.
    clock_ms: AtomicI64,
}

impl Default for Power {
    fn default() -> Power {
        Power {
            changes: AtomicU64::new(0),
            budget: AtomicU64::new(u64::MAX),
            clock_ms: AtomicI64::new(0),
        }
    }
}

impl Power {
    /// Spends one change, or fails when the power is out.
    fn spend(&self) -> io::Result<()> {
        let n = self.changes.fetch_add(1, Ordering::SeqCst);
        if n >= self.budget.load(Ordering::SeqCst) {
            return Err(io::Error::other("simulated power cut"));
        }
        Ok(())
    }
}

/// An in-memory file system that can simulate a power cut.
#[derive(Debug, Default, Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
    power: Arc<Power>,
}

#[derive(Debug)]
struct SimFile {
    inode: InodeRef,
    power: Arc<Power>,
}

#[derive(Debug)]
struct SimMap {
    inode: InodeRef,
    power: Arc<Power>,
    buf: Vec<u8>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
}

impl SimFs {
    /// An empty file system.
    pub fn new() -> SimFs {
        SimFs::default()
    }

    /// Cuts the power: every file reverts to its durable bytes, plus, for a
    /// file only appended to since, a prefix of the appended bytes chosen by
    /// `keep(appended_len)`; every directory to its durable entries.
    /// Handles opened before the crash must not be used after it.
    pub fn crash(&self, keep: &mut dyn FnMut(usize) -> usize) {
        let mut state = lock(&self.state);
        let mut seen = BTreeSet::new();
        for inode in state.durable.values() {
            if !seen.insert(Arc::as_ptr(inode) as usize) {
                continue;
            }
            let mut inode = lock(inode);
            let Inode { data, durable, .. } = &mut *inode;
            let appended_only = data.len() > durable.len() && data.starts_with(durable);
            let mut next = durable.clone();
            if appended_only {
                let extra = &data[durable.len()..];
                let n = keep(extra.len()).min(extra.len());
                next.extend_from_slice(&extra[..n]);
            }
            *data = next.clone();
            *durable = next;
        }
        state.live = state.durable.clone();
    }

    /// Lets the next `n` changes (writes, truncations, syncs, creations,
    /// renames, removals) happen and fails every one after them, until
    /// [`SimFs::restore_power`].
    pub fn cut_power_after(&self, n: u64) {
        let done = self.power.changes.load(Ordering::SeqCst);
        self.power.budget.store(done.saturating_add(n), Ordering::SeqCst);
    }

    /// Sets the clock that stamps files' modification times.
    pub fn set_clock_ms(&self, now_ms: i64) {
        self.power.clock_ms.store(now_ms, Ordering::SeqCst);
    }

    /// Lifts the limit of [`SimFs::cut_power_after`].
    pub fn restore_power(&self) {
        self.power.budget.store(u64::MAX, Ordering::SeqCst);
    }

    /// Changes made so far (attempted ones included).
    pub fn changes(&self) -> u64 {
        self.power.changes.load(Ordering::SeqCst)
    }

    /// The bytes of a file as the process sees them.
    pub fn read(&self, path: &Path) -> Option<Vec<u8>> {
        let state = lock(&self.state);
        state.live.get(path).map(|i| lock(i).data.clone())
    }

    /// Every file as the process sees it, by path.
    pub fn files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let state = lock(&self.state);
        state
            .live
            .iter()
            .map(|(p, i)| (p.clone(), lock(i).data.clone()))
            .collect()
    }

    /// Replaces a file's bytes, durably (for tests that damage files).
    pub fn write(&self, path: &Path, bytes: &[u8]) {
        let mut state = lock(&self.state);
        let inode = Arc::new(Mutex::new(Inode {
            data: bytes.to_vec(),
            durable: bytes.to_vec(),
            modified_ms: self.power.clock_ms.load(Ordering::SeqCst),
        }));
        state.live.insert(path.to_path_buf(), inode.clone());
        state.durable.insert(path.to_path_buf(), inode);
    }
}

impl Vfs for SimFs {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn VFile>> {
        let mut state = lock(&self.state);
        let power = Arc::clone(&self.power);
        if let Some(inode) = state.live.get(path) {
            let inode = inode.clone();
            return Ok(Arc::new(SimFile { inode, power }));
        }
        let parent = path.parent().unwrap_or(Path::new(""));
        if !create || !state.dirs.contains(parent) {
            return Err(not_found(path));
        }
        self.power.spend()?;
        let inode = InodeRef::default();
        lock(&inode).modified_ms = self.power.clock_ms.load(Ordering::SeqCst);
        state.live.insert(path.to_path_buf(), inode.clone());
        Ok(Arc::new(SimFile { inode, power }))
    }

    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn VFile>> {
        self.open(path, false)
    }

    fn exists(&self, path: &Path) -> bool {
        let state = lock(&self.state);
        state.live.contains_key(path) || state.dirs.contains(path)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.power.spend()?;
        let mut state = lock(&self.state);
        state.live.remove(path).map(drop).ok_or_else(|| not_found(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.power.spend()?;
        let mut state = lock(&self.state);
        let inode = state.live.remove(from).ok_or_else(|| not_found(from))?;
        state.live.insert(to.to_path_buf(), inode);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.power.spend()?;
        let mut state = lock(&self.state);
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        let State { live, durable, .. } = &mut *state;
        durable.retain(|p, _| !in_dir(p));
        for (path, inode) in live.iter().filter(|(p, _)| in_dir(p)) {
            durable.insert(path.clone(), inode.clone());
        }
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.power.spend()?;
        let mut state = lock(&self.state);
        for ancestor in dir.ancestors() {
            state.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = lock(&self.state);
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let files = state.live.keys().filter(|p| p.parent() == Some(dir));
        let dirs = state.dirs.iter().filter(|p| p.parent() == Some(dir));
        Ok(files
            .chain(dirs)
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }
}

impl VFile for SimFile {
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        let inode = lock(&self.inode);
        let start = (pos as usize).min(inode.data.len());
        let n = buf.len().min(inode.data.len() - start);
        buf[..n].copy_from_slice(&inode.data[start..start + n]);
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.power.spend()?;
        let mut inode = lock(&self.inode);
        inode.modified_ms = self.power.clock_ms.load(Ordering::SeqCst);
        let end = pos as usize + buf.len();
        if inode.data.len() < end {
            inode.data.resize(end, 0);
        }
        inode.data[pos as usize..end].copy_from_slice(buf);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(lock(&self.inode).data.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.power.spend()?;
        let mut inode = lock(&self.inode);
        inode.modified_ms = self.power.clock_ms.load(Ordering::SeqCst);
        inode.data.resize(len as usize, 0);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.power.spend()?;
        let mut inode = lock(&self.inode);
        inode.durable = inode.data.clone();
        Ok(())
    }

    fn map_mut(&self, len: u64) -> io::Result<Box<dyn MapMut>> {
        let inode = lock(&self.inode);
        if (inode.data.len() as u64) < len {
            return Err(io::Error::other("map beyond the end of the file"));
        }
        let buf = inode.data[..len as usize].to_vec();
        Ok(Box::new(SimMap {
            inode: self.inode.clone(),
            power: Arc::clone(&self.power),
            buf,
        }))
    }

    fn as_file(&self) -> Option<&std::fs::File> {
        None
    }

    fn modified_ms(&self) -> io::Result<i64> {
        Ok(lock(&self.inode).modified_ms)
    }
}

impl SimMap {
    fn write_back(&self, durable: bool) {
        let mut inode = lock(&self.inode);
        let n = self.buf.len().min(inode.data.len());
        inode.data[..n].copy_from_slice(&self.buf[..n]);
        if durable {
            inode.durable = inode.data.clone();
        }
    }
}

impl MapMut for SimMap {
    fn bytes(&self) -> &[u8] {
        &self.buf
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn flush(&self) -> io::Result<()> {
        self.power.spend()?;
        self.write_back(true);
        Ok(())
    }
}

impl Drop for SimMap {
    fn drop(&mut self) {
        // Stores into a mapping reach the page cache as they happen; a map
        // dropped after the power went out changes nothing that matters,
        // since the crash reverts the file.
        self.write_back(false);
    }
}
