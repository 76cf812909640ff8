//! An in-memory [`Vfs`] that can lose power, kill its process, fail a sync
//! and fill up.
//!
//! Each file keeps two versions of its bytes: what the process sees (the page
//! cache), and what an `fsync` last made durable (the disk). Each directory
//! likewise keeps its entries as the process sees them and as the last
//! directory fsync made them, and a directory is itself an entry of its
//! parent: it is durable only once its parent was fsynced after it was
//! created (the root, a path without a parent, always is).
//!
//! # Crashes
//!
//! [`SimFs::crash`] is a power cut. It throws away everything not durable:
//! every directory not durable (or inside one that is not), every file whose
//! entry is not durable or whose directory did not survive, and every byte
//! not synced, except that a file only appended to since its last fsync may
//! keep any prefix of the appended bytes (the disk wrote some pages of the
//! page cache, not others).
//!
//! [`SimFs::crash_process`] is a `kill -9` of the process: the page cache
//! survives, so every file keeps the bytes the process saw and nothing
//! becomes durable. Both kinds of crash kill the process: every handle
//! opened before (files and maps) fails every later operation with an error
//! ("process crashed"), and a map dropped afterwards writes nothing back, so
//! a dead process's threads cannot change anything. Handles opened after the
//! crash work normally. One deviation from a real kernel: stores into a map
//! reach the file only when the map is flushed or dropped, so a process
//! crash loses the stores made since (a kernel keeps them in the page cache).
//!
//! [`SimFs::cut_power_after`] makes every change after the first `n` fail, as
//! if the machine stopped there mid-operation; [`SimFs::crash`] then decides
//! what the disk kept. Together they cut an operation at each of its writes.
//!
//! # A failed fsync
//!
//! [`SimFs::fail_next_sync`] makes the next sync of a matching path fail with
//! `EIO`, modelled on what Linux does when writeback fails: the dirty pages
//! that could not be written are marked clean anyway. The process still
//! reads the bytes it wrote, but the disk never gets them, and the *next*
//! fsync of the file reports success without writing them, because nothing
//! is dirty any more: only bytes written after the failure become durable at
//! later syncs, and a file that grew keeps zeros (or its old durable bytes)
//! where the lost bytes were. Retrying the fsync is therefore no remedy: a
//! log must take a failed fsync as fatal, and recover from what the disk
//! has. A failed directory sync changes nothing and is not remembered.
//!
//! # A full disk
//!
//! [`SimFs::set_capacity`] bounds the bytes allocated by all live files (the
//! files a directory lists; a removed file frees its space at once). Space is
//! allocated in blocks of [`SIM_BLOCK_BYTES`]: a write allocates the blocks it
//! covers, [`VFile::allocate`] the blocks of its range, and a store through a
//! map the blocks it dirties, when the map writes back; growth by `set_len` is
//! sparse and allocates nothing, and shrinking frees the blocks past the new
//! end. A write, or an allocation, that would pass the capacity fails with
//! `ENOSPC` and changes nothing. A store through a map cannot fail that way:
//! on a real file system it is a `SIGBUS`; here it is allocated anyway and
//! counted by [`SimFs::map_faults`], which a test asserts stays 0. A power
//! cut keeps the blocks of the bytes that survive.
//!
//! This is the seam the power-loss tests cut through; production code uses
//! [`super::RealFs`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;

use super::{MapMut, VFile, Vfs};
use crate::sync::lock;

mod open;
pub use open::HeldOpen;
use open::OpenHold;

/// The allocation unit of [`SimFs`]'s capacity accounting.
pub const SIM_BLOCK_BYTES: u64 = 4096;

#[derive(Debug, Default)]
struct Inode {
    /// The bytes as the process sees them (the page cache).
    data: Vec<u8>,
    /// The bytes on the disk.
    durable: Vec<u8>,
    /// `lost[i]`: byte `i` of `data` was dirty when a sync failed, was
    /// marked clean, and was not written since: no sync will write it. May
    /// be shorter than `data` (missing means false).
    lost: Vec<bool>,
    /// Allocated blocks.
    blocks: BTreeSet<u64>,
    /// Whether a directory entry names the inode (its blocks count against
    /// the capacity).
    linked: bool,
    modified_ms: i64,
}

impl Inode {
    /// What a sync writes: `data`, except where bytes were lost.
    fn image(&self) -> Vec<u8> {
        let mut image = self.data.clone();
        for (i, _) in self.lost.iter().enumerate().filter(|(_, lost)| **lost) {
            if let Some(b) = image.get_mut(i) {
                *b = self.durable.get(i).copied().unwrap_or(0);
            }
        }
        image
    }

    /// A sync failed: every dirty byte is marked clean without reaching
    /// the disk.
    fn lose_dirty(&mut self) {
        self.lost.resize(self.data.len(), false);
        for (i, lost) in self.lost.iter_mut().enumerate() {
            if self.durable.get(i) != Some(&self.data[i]) {
                *lost = true;
            }
        }
    }

    /// Bytes `start..end` were written: dirty again.
    fn written(&mut self, start: usize, end: usize) {
        let end = end.min(self.lost.len());
        if start < end {
            self.lost[start..end].fill(false);
        }
    }

    /// Blocks covering `start..end` not yet allocated.
    fn missing_blocks(&self, start: u64, end: u64) -> Vec<u64> {
        if start >= end {
            return Vec::new();
        }
        (start / SIM_BLOCK_BYTES..end.div_ceil(SIM_BLOCK_BYTES))
            .filter(|b| !self.blocks.contains(b))
            .collect()
    }

    /// Frees the blocks wholly past `len`; returns how many.
    fn free_blocks_past(&mut self, len: u64) -> u64 {
        let kept = len.div_ceil(SIM_BLOCK_BYTES);
        let freed = self.blocks.split_off(&kept);
        freed.len() as u64
    }
}

type InodeRef = Arc<Mutex<Inode>>;

#[derive(Debug, Default)]
struct State {
    /// Directories as the process sees them.
    dirs: BTreeSet<PathBuf>,
    /// Directories whose entry in their parent was fsynced (and roots).
    durable_dirs: BTreeSet<PathBuf>,
    /// Entries as the process sees them.
    live: BTreeMap<PathBuf, InodeRef>,
    /// Entries as the last fsync of their directory left them.
    durable: BTreeMap<PathBuf, InodeRef>,
}

/// Which paths the next failed sync is for.
struct SyncFault(Box<dyn Fn(&Path) -> bool + Send + Sync>);

impl fmt::Debug for SyncFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SyncFault")
    }
}

/// Bytes allocated, and how many may be.
#[derive(Debug, Default)]
struct Space {
    capacity: Option<u64>,
    used: u64,
}

/// What every handle shares: the change budget, the clock, the process's
/// life, the armed faults and the space.
#[derive(Debug)]
struct Power {
    changes: AtomicU64,
    budget: AtomicU64,
    /// The simulated wall clock that stamps modification times.
    clock_ms: AtomicI64,
    /// Incremented by each crash; a handle of an older epoch is dead.
    epoch: AtomicU64,
    sync_fault: Mutex<Option<SyncFault>>,
    open_fault: Mutex<Option<SyncFault>>,
    open_hold: Mutex<Option<OpenHold>>,
    space: Mutex<Space>,
    map_faults: AtomicU64,
}

impl Default for Power {
    fn default() -> Power {
        Power {
            changes: AtomicU64::new(0),
            budget: AtomicU64::new(u64::MAX),
            clock_ms: AtomicI64::new(0),
            epoch: AtomicU64::new(0),
            sync_fault: Mutex::new(None),
            open_fault: Mutex::new(None),
            open_hold: Mutex::new(None),
            space: Mutex::new(Space::default()),
            map_faults: AtomicU64::new(0),
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

    /// Fails when the handle of `epoch` belongs to a crashed process.
    fn alive(&self, epoch: u64) -> io::Result<()> {
        if self.epoch.load(Ordering::SeqCst) != epoch {
            return Err(io::Error::other("process crashed"));
        }
        Ok(())
    }

    /// Consumes the armed sync fault when it is for `path`.
    fn sync_fails(&self, path: &Path) -> io::Result<()> {
        let mut fault = lock(&self.sync_fault);
        if fault.as_ref().is_some_and(|f| (f.0)(path)) {
            *fault = None;
            return Err(io::Error::from_raw_os_error(Errno::EIO as i32));
        }
        Ok(())
    }

    /// Takes `blocks` blocks of space, or fails with ENOSPC taking none.
    fn reserve(&self, blocks: usize) -> io::Result<()> {
        let mut space = lock(&self.space);
        let used = space.used + blocks as u64 * SIM_BLOCK_BYTES;
        if space.capacity.is_some_and(|c| used > c) {
            return Err(io::Error::from_raw_os_error(Errno::ENOSPC as i32));
        }
        space.used = used;
        Ok(())
    }

    /// Gives back `blocks` blocks.
    fn release(&self, blocks: u64) {
        let mut space = lock(&self.space);
        space.used = space.used.saturating_sub(blocks * SIM_BLOCK_BYTES);
    }
}

/// An in-memory file system that can simulate a power cut, a killed
/// process, a failed fsync and a full disk.
#[derive(Debug, Default, Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
    power: Arc<Power>,
}

#[derive(Debug)]
struct SimFile {
    inode: InodeRef,
    power: Arc<Power>,
    /// The path it was opened by (what sync faults match).
    path: PathBuf,
    epoch: u64,
}

#[derive(Debug)]
struct SimMap {
    inode: InodeRef,
    power: Arc<Power>,
    path: PathBuf,
    epoch: u64,
    buf: Vec<u8>,
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

/// Whether `dir` survives a power cut: it and every ancestor are durable
/// entries of their parents.
fn survives(dir: &Path, durable_dirs: &BTreeSet<PathBuf>) -> bool {
    match dir.parent() {
        None => true,
        Some(parent) => durable_dirs.contains(dir) && survives(parent, durable_dirs),
    }
}

impl SimFs {
    /// An empty file system.
    pub fn new() -> SimFs {
        SimFs::default()
    }

    /// Cuts the power: every directory reverts to its durable entries, and a
    /// directory not durable in its parent disappears with all it holds;
    /// every surviving file reverts to its durable bytes, plus, for a file
    /// only appended to since, a prefix of the appended bytes chosen by
    /// `keep(appended_len)`. The process dies too: handles opened before
    /// fail from now on (see [`SimFs::crash_process`]).
    pub fn crash(&self, keep: &mut dyn FnMut(usize) -> usize) {
        let mut state = lock(&self.state);
        self.power.epoch.fetch_add(1, Ordering::SeqCst);
        let State {
            dirs,
            durable_dirs,
            live,
            durable,
        } = &mut *state;
        for inode in live.values() {
            lock(inode).linked = false;
        }
        let kept: BTreeSet<PathBuf> = durable_dirs
            .iter()
            .filter(|d| survives(d, durable_dirs))
            .cloned()
            .collect();
        *durable_dirs = kept;
        *dirs = durable_dirs.clone();
        durable.retain(|p, _| p.parent().is_some_and(|d| dirs.contains(d)));
        let mut seen = BTreeSet::new();
        let mut used = 0;
        for inode in durable.values() {
            if !seen.insert(Arc::as_ptr(inode) as usize) {
                continue;
            }
            let mut inode = lock(inode);
            let image = inode.image();
            let durable_bytes = &inode.durable;
            let appended_only =
                image.len() > durable_bytes.len() && image.starts_with(durable_bytes);
            let mut next = durable_bytes.clone();
            if appended_only {
                let extra = &image[durable_bytes.len()..];
                let n = keep(extra.len()).min(extra.len());
                next.extend_from_slice(&extra[..n]);
            }
            inode.free_blocks_past(next.len() as u64);
            inode.data = next.clone();
            inode.durable = next;
            inode.lost.clear();
            inode.linked = true;
            used += inode.blocks.len() as u64 * SIM_BLOCK_BYTES;
        }
        *live = durable.clone();
        lock(&self.power.space).used = used;
    }

    /// Kills the process (`kill -9`): every file keeps the bytes the process
    /// saw (the page cache survives), nothing becomes durable that was not,
    /// and every handle opened before — files and maps — fails every later
    /// operation with an error, so that the dead process's threads change
    /// nothing; a map dropped from now on writes nothing back. Handles
    /// opened afterwards work normally. A power cut ([`SimFs::crash`]) may
    /// follow, and then drops all that was not durable.
    pub fn crash_process(&self) {
        let _state = lock(&self.state);
        self.power.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Creates a directory and its ancestors durably, as if their parents
    /// had been fsynced long ago: setup for tests whose subject is not the
    /// directory's own durability. Counts no change.
    pub fn create_dir_all_durable(&self, dir: &Path) {
        let mut state = lock(&self.state);
        for ancestor in dir.ancestors() {
            state.dirs.insert(ancestor.to_path_buf());
            state.durable_dirs.insert(ancestor.to_path_buf());
        }
    }

    /// Lets the next `n` changes (writes, truncations, syncs, creations,
    /// renames, removals) happen and fails every one after them, until
    /// [`SimFs::restore_power`].
    pub fn cut_power_after(&self, n: u64) {
        let done = self.power.changes.load(Ordering::SeqCst);
        self.power
            .budget
            .store(done.saturating_add(n), Ordering::SeqCst);
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

    /// Makes the next sync whose path satisfies `matches` fail with `EIO`:
    /// a file's `sync_data`, a map's `flush` (matched by the file's path as
    /// it was opened), or a `sync_dir` (matched by the directory). The
    /// fault fires once; arming another replaces it. A failed file sync
    /// marks the dirty bytes clean without writing them (see the module
    /// documentation): the next sync of the file succeeds without them.
    pub fn fail_next_sync(&self, matches: impl Fn(&Path) -> bool + Send + Sync + 'static) {
        *lock(&self.power.sync_fault) = Some(SyncFault(Box::new(matches)));
    }

    /// Bounds the bytes allocated by all live files (`None`: no bound).
    /// Lowering it below what is allocated frees nothing; it only refuses
    /// allocations until files shrink or are removed.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        lock(&self.power.space).capacity = capacity;
    }

    /// Bytes allocated by all live files (a multiple of [`SIM_BLOCK_BYTES`]).
    pub fn allocated(&self) -> u64 {
        lock(&self.power.space).used
    }

    /// Stores through a map that reached a block not allocated while the
    /// capacity left no room for it: on a real file system, each is a
    /// `SIGBUS` that kills the process.
    pub fn map_faults(&self) -> u64 {
        self.power.map_faults.load(Ordering::SeqCst)
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

    /// Replaces a file's bytes, durably (for tests that damage files). Its
    /// blocks are allocated whatever the capacity; its directory's own
    /// durability is unchanged.
    pub fn write(&self, path: &Path, bytes: &[u8]) {
        let mut state = lock(&self.state);
        let blocks: BTreeSet<u64> = (0..(bytes.len() as u64).div_ceil(SIM_BLOCK_BYTES)).collect();
        lock(&self.power.space).used += blocks.len() as u64 * SIM_BLOCK_BYTES;
        let inode = Arc::new(Mutex::new(Inode {
            data: bytes.to_vec(),
            durable: bytes.to_vec(),
            blocks,
            linked: true,
            modified_ms: self.power.clock_ms.load(Ordering::SeqCst),
            ..Inode::default()
        }));
        if let Some(old) = state.live.insert(path.to_path_buf(), inode.clone()) {
            self.unlink(&old);
        }
        state.durable.insert(path.to_path_buf(), inode);
    }

    /// An inode lost its name: its blocks no longer count.
    fn unlink(&self, inode: &InodeRef) {
        let mut inode = lock(inode);
        if inode.linked {
            inode.linked = false;
            self.power.release(inode.blocks.len() as u64);
        }
    }

    fn handle(&self, inode: InodeRef, path: &Path) -> Arc<dyn VFile> {
        Arc::new(SimFile {
            inode,
            power: Arc::clone(&self.power),
            path: path.to_path_buf(),
            epoch: self.power.epoch.load(Ordering::SeqCst),
        })
    }
}

impl Vfs for SimFs {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn VFile>> {
        self.power.hold_open(path);
        self.power.open_fails(path)?;
        let mut state = lock(&self.state);
        if let Some(inode) = state.live.get(path) {
            return Ok(self.handle(inode.clone(), path));
        }
        let parent = path.parent().unwrap_or(Path::new(""));
        if !create || !state.dirs.contains(parent) {
            return Err(not_found(path));
        }
        self.power.spend()?;
        let inode = InodeRef::default();
        {
            let mut new = lock(&inode);
            new.modified_ms = self.power.clock_ms.load(Ordering::SeqCst);
            new.linked = true;
        }
        state.live.insert(path.to_path_buf(), inode.clone());
        Ok(self.handle(inode, path))
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
        let inode = state.live.remove(path).ok_or_else(|| not_found(path))?;
        self.unlink(&inode);
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        self.power.spend()?;
        let mut state = lock(&self.state);
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let inside = |p: &PathBuf| p.parent() == Some(dir);
        if state.live.keys().any(inside) || state.dirs.iter().any(inside) {
            return Err(Errno::ENOTEMPTY.into());
        }
        state.dirs.remove(dir);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.power.spend()?;
        let mut state = lock(&self.state);
        let inode = state.live.remove(from).ok_or_else(|| not_found(from))?;
        if let Some(old) = state.live.insert(to.to_path_buf(), inode.clone()) {
            if !Arc::ptr_eq(&old, &inode) {
                self.unlink(&old);
            }
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.power.open_fails(dir)?;
        self.power.spend()?;
        let mut state = lock(&self.state);
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        self.power.sync_fails(dir)?;
        let in_dir = |p: &PathBuf| p.parent() == Some(dir);
        let State {
            dirs,
            durable_dirs,
            live,
            durable,
        } = &mut *state;
        durable.retain(|p, _| !in_dir(p));
        for (path, inode) in live.iter().filter(|(p, _)| in_dir(p)) {
            durable.insert(path.clone(), inode.clone());
        }
        durable_dirs.retain(|d| !in_dir(d) || dirs.contains(d));
        durable_dirs.extend(dirs.iter().filter(|d| in_dir(d)).cloned());
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.power.spend()?;
        let mut state = lock(&self.state);
        for ancestor in dir.ancestors() {
            state.dirs.insert(ancestor.to_path_buf());
            if ancestor.parent().is_none() {
                state.durable_dirs.insert(ancestor.to_path_buf());
            }
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

impl SimFile {
    fn alive(&self) -> io::Result<()> {
        self.power.alive(self.epoch)
    }

    /// Takes the blocks covering `start..end` (for a linked inode, against
    /// the capacity).
    fn allocate_range(&self, inode: &mut Inode, start: u64, end: u64) -> io::Result<()> {
        let missing = inode.missing_blocks(start, end);
        if inode.linked {
            self.power.reserve(missing.len())?;
        }
        inode.blocks.extend(missing);
        Ok(())
    }
}

impl VFile for SimFile {
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        self.alive()?;
        let inode = lock(&self.inode);
        let start = (pos as usize).min(inode.data.len());
        let n = buf.len().min(inode.data.len() - start);
        buf[..n].copy_from_slice(&inode.data[start..start + n]);
        Ok(n)
    }

    fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.alive()?;
        self.power.spend()?;
        let mut inode = lock(&self.inode);
        let end = pos as usize + buf.len();
        self.allocate_range(&mut inode, pos, end as u64)?;
        inode.modified_ms = self.power.clock_ms.load(Ordering::SeqCst);
        if inode.data.len() < end {
            inode.data.resize(end, 0);
        }
        inode.data[pos as usize..end].copy_from_slice(buf);
        inode.written(pos as usize, end);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        self.alive()?;
        Ok(lock(&self.inode).data.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.alive()?;
        self.power.spend()?;
        let mut inode = lock(&self.inode);
        inode.modified_ms = self.power.clock_ms.load(Ordering::SeqCst);
        inode.data.resize(len as usize, 0);
        inode.lost.truncate(len as usize);
        let freed = inode.free_blocks_past(len);
        if inode.linked {
            self.power.release(freed);
        }
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.alive()?;
        self.power.spend()?;
        let mut inode = lock(&self.inode);
        let end = offset + len;
        self.allocate_range(&mut inode, offset, end)?;
        if (inode.data.len() as u64) < end {
            inode.modified_ms = self.power.clock_ms.load(Ordering::SeqCst);
            inode.data.resize(end as usize, 0);
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.alive()?;
        self.power.spend()?;
        let mut inode = lock(&self.inode);
        if let Err(e) = self.power.sync_fails(&self.path) {
            inode.lose_dirty();
            return Err(e);
        }
        inode.durable = inode.image();
        Ok(())
    }

    fn map_mut(&self, len: u64) -> io::Result<Box<dyn MapMut>> {
        self.alive()?;
        let inode = lock(&self.inode);
        if (inode.data.len() as u64) < len {
            return Err(io::Error::other("map beyond the end of the file"));
        }
        let buf = inode.data[..len as usize].to_vec();
        Ok(Box::new(SimMap {
            inode: self.inode.clone(),
            power: Arc::clone(&self.power),
            path: self.path.clone(),
            epoch: self.epoch,
            buf,
        }))
    }

    fn as_file(&self) -> Option<&std::fs::File> {
        None
    }

    fn modified_ms(&self) -> io::Result<i64> {
        self.alive()?;
        Ok(lock(&self.inode).modified_ms)
    }

    fn set_modified_ms(&self, ms: i64) -> io::Result<()> {
        self.alive()?;
        lock(&self.inode).modified_ms = ms;
        Ok(())
    }
}

impl SimMap {
    /// Copies the stored bytes into the page cache, allocating the blocks
    /// they dirty (a store the capacity has no room for is a map fault).
    fn write_back(&self, inode: &mut Inode) {
        let n = self.buf.len().min(inode.data.len());
        // Block by block, byte by byte only where a block differs: a map
        // is mostly what it was (a test's index maps are megabytes).
        let changed: Vec<usize> = (0..n)
            .step_by(SIM_BLOCK_BYTES as usize)
            .map(|start| start..(start + SIM_BLOCK_BYTES as usize).min(n))
            .filter(|r| inode.data[r.clone()] != self.buf[r.clone()])
            .flat_map(|r| r.filter(|&i| inode.data[i] != self.buf[i]))
            .collect();
        for &i in &changed {
            let block = i as u64 / SIM_BLOCK_BYTES;
            if !inode.blocks.contains(&block) {
                if inode.linked && self.power.reserve(1).is_err() {
                    self.power.map_faults.fetch_add(1, Ordering::SeqCst);
                    lock(&self.power.space).used += SIM_BLOCK_BYTES;
                }
                inode.blocks.insert(block);
            }
            inode.data[i] = self.buf[i];
            inode.written(i, i + 1);
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
        self.power.alive(self.epoch)?;
        self.power.spend()?;
        let mut inode = lock(&self.inode);
        self.write_back(&mut inode);
        if let Err(e) = self.power.sync_fails(&self.path) {
            inode.lose_dirty();
            return Err(e);
        }
        inode.durable = inode.image();
        Ok(())
    }
}

impl Drop for SimMap {
    fn drop(&mut self) {
        // Stores into a mapping reach the page cache as they happen; a map
        // dropped after its process died changes nothing (the crash already
        // decided what the page cache holds).
        if self.power.alive(self.epoch).is_ok() {
            let mut inode = lock(&self.inode);
            self.write_back(&mut inode);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_os_error(e: &io::Error) -> Option<i32> {
        e.raw_os_error()
    }

    /// A file system with a durable directory `/d`.
    fn fs_with_dir() -> (SimFs, &'static Path) {
        let fs = SimFs::new();
        let dir = Path::new("/d");
        fs.create_dir_all_durable(dir);
        (fs, dir)
    }

    #[test]
    fn a_process_crash_keeps_the_page_cache_and_a_power_cut_after_it_drops_what_was_not_synced() {
        let (fs, dir) = fs_with_dir();
        let path = dir.join("f");
        let file = fs.open(&path, true).unwrap();
        file.write_all_at(b"synced", 0).unwrap();
        file.sync_data().unwrap();
        fs.sync_dir(dir).unwrap();
        file.write_all_at(b" cached", 6).unwrap();
        fs.crash_process();
        assert_eq!(
            fs.read(&path).unwrap(),
            b"synced cached",
            "the page cache survives a kill"
        );
        let reopened = fs.open(&path, false).unwrap();
        let mut buf = vec![0; 13];
        reopened.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(buf, b"synced cached");
        // Nothing became durable: a power cut now keeps only the synced bytes.
        fs.crash(&mut |_| 0);
        assert_eq!(fs.read(&path).unwrap(), b"synced");
    }

    #[test]
    fn handles_opened_before_a_process_crash_fail_and_their_maps_write_nothing_back() {
        let (fs, dir) = fs_with_dir();
        let path = dir.join("f");
        let file = fs.open(&path, true).unwrap();
        file.set_len(8).unwrap();
        let mut map = file.map_mut(8).unwrap();
        map.bytes_mut()[0] = 7;
        let reader = fs.open_read(&path).unwrap();
        fs.crash_process();
        let dead = |r: io::Result<()>| assert_eq!(r.unwrap_err().to_string(), "process crashed");
        dead(file.write_all_at(b"x", 0));
        dead(file.set_len(0));
        dead(file.sync_data());
        dead(file.allocate(0, 4096));
        dead(file.len().map(drop));
        dead(file.modified_ms().map(drop));
        dead(file.map_mut(8).map(drop));
        dead(reader.read_at(&mut [0; 4], 0).map(drop));
        dead(map.flush());
        drop(map);
        assert_eq!(
            fs.read(&path).unwrap(),
            [0; 8],
            "a dead process's map wrote back"
        );
        // Handles opened after the crash work.
        let file = fs.open(&path, false).unwrap();
        file.write_all_at(b"alive", 0).unwrap();
        let mut map = file.map_mut(8).unwrap();
        map.bytes_mut()[7] = 9;
        drop(map);
        assert_eq!(fs.read(&path).unwrap(), b"alive\0\0\x09");
    }

    /// Writes `dir/f`, durable in its directory (not the directory itself).
    fn write_durable_file(fs: &SimFs, dir: &Path) {
        let file = fs.open(&dir.join("f"), true).unwrap();
        file.write_all_at(b"bytes", 0).unwrap();
        file.sync_data().unwrap();
        fs.sync_dir(dir).unwrap();
    }

    #[test]
    fn a_directory_not_synced_in_its_parent_disappears_at_a_power_cut_with_its_files() {
        let fs = SimFs::new();
        let (kept, lost) = (Path::new("/data/kept"), Path::new("/data/lost"));
        fs.create_dir_all(kept).unwrap();
        fs.create_dir_all(lost).unwrap();
        for dir in [kept, lost] {
            write_durable_file(&fs, dir);
        }
        // The files are durable in their directories, but no directory is
        // durable in its parent.
        fs.crash(&mut |_| 0);
        assert!(
            !fs.exists(Path::new("/data")),
            "/data was never synced in its parent"
        );
        assert!(fs.files().is_empty(), "files in a lost directory are lost");
        // `/` is always there.
        assert!(fs.list(Path::new("/")).unwrap().is_empty());

        // Syncing `/` alone keeps `/data` but not the directories in it.
        fs.create_dir_all(kept).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        fs.crash(&mut |_| 0);
        assert!(fs.exists(Path::new("/data")) && !fs.exists(kept));

        fs.create_dir_all(kept).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        fs.sync_dir(Path::new("/data")).unwrap();
        fs.create_dir_all(lost).unwrap();
        for dir in [kept, lost] {
            write_durable_file(&fs, dir);
        }
        fs.crash(&mut |_| 0);
        assert!(fs.exists(kept));
        assert!(!fs.exists(lost), "created after its parent's last fsync");
        assert_eq!(fs.files().keys().collect::<Vec<_>>(), [&kept.join("f")]);
        assert_eq!(fs.list(Path::new("/data")).unwrap(), ["kept"]);
    }

    #[test]
    fn a_failed_sync_reports_eio_and_the_next_sync_lies_about_the_lost_bytes() {
        let (fs, dir) = fs_with_dir();
        let path = dir.join("f.log");
        let other = dir.join("g.log");
        let file = fs.open(&path, true).unwrap();
        let unmatched = fs.open(&other, true).unwrap();
        fs.sync_dir(dir).unwrap();
        file.write_all_at(b"aaaa", 0).unwrap();
        file.sync_data().unwrap();
        fs.fail_next_sync(|p| p.ends_with("f.log"));
        unmatched.write_all_at(b"x", 0).unwrap();
        unmatched.sync_data().unwrap();
        file.write_all_at(b"bbbb", 4).unwrap();
        let err = file.sync_data().unwrap_err();
        assert_eq!(raw_os_error(&err), Some(Errno::EIO as i32));
        // The process still reads what it wrote; the disk never gets it.
        assert_eq!(fs.read(&path).unwrap(), b"aaaabbbb");
        file.write_all_at(b"cc", 8).unwrap();
        file.sync_data().unwrap();
        file.sync_data().unwrap();
        fs.crash(&mut |n| n);
        assert_eq!(
            fs.read(&path).unwrap(),
            b"aaaa\0\0\0\0cc",
            "the lost bytes stay lost"
        );
        assert_eq!(
            fs.read(&other).unwrap(),
            b"x",
            "the fault was for f.log only"
        );
        // The fault fired once.
        let file = fs.open(&path, false).unwrap();
        file.write_all_at(b"dddd", 4).unwrap();
        file.sync_data().unwrap();
        fs.crash(&mut |_| 0);
        assert_eq!(fs.read(&path).unwrap(), b"aaaaddddcc");
        // A failed directory sync makes no entry durable.
        fs.open(&dir.join("new"), true).unwrap();
        fs.fail_next_sync(|p| p == Path::new("/d"));
        let err = fs.sync_dir(dir).unwrap_err();
        assert_eq!(raw_os_error(&err), Some(Errno::EIO as i32));
        fs.crash(&mut |_| 0);
        assert!(!fs.exists(&dir.join("new")));
    }

    #[test]
    fn a_full_disk_refuses_writes_and_allocations_until_space_is_freed() {
        let (fs, dir) = fs_with_dir();
        let block = SIM_BLOCK_BYTES;
        fs.set_capacity(Some(4 * block));
        let a = fs.open(&dir.join("a"), true).unwrap();
        let b = fs.open(&dir.join("b"), true).unwrap();
        a.write_all_at(&vec![1; 3 * block as usize], 0).unwrap();
        // Sparse growth allocates nothing.
        b.set_len(100 * block).unwrap();
        assert_eq!(fs.allocated(), 3 * block);
        b.allocate(0, block).unwrap();
        let enospc = |r: io::Result<()>| {
            assert_eq!(raw_os_error(&r.unwrap_err()), Some(Errno::ENOSPC as i32))
        };
        enospc(b.write_all_at(b"x", block));
        enospc(b.allocate(block, 1));
        enospc(a.write_all_at(&[2; 10], 3 * block - 5));
        assert_eq!(
            fs.read(&dir.join("a")).unwrap(),
            vec![1; 3 * block as usize],
            "nothing changed"
        );
        assert_eq!(fs.read(&dir.join("b")).unwrap().len() as u64, 100 * block);
        // Rewriting allocated blocks needs no room.
        a.write_all_at(&[3; 10], 0).unwrap();
        // Truncating frees the blocks past the end; removing frees them all.
        a.set_len(block + 1).unwrap();
        assert_eq!(fs.allocated(), 3 * block);
        b.write_all_at(b"x", block).unwrap();
        enospc(b.write_all_at(b"x", 2 * block));
        fs.remove(&dir.join("a")).unwrap();
        assert_eq!(fs.allocated(), 2 * block);
        b.allocate(2 * block, 2 * block).unwrap();
        enospc(b.allocate(4 * block, 1));
        fs.set_capacity(None);
        b.allocate(4 * block, 1).unwrap();
        assert_eq!(fs.map_faults(), 0);
    }

    #[test]
    fn a_store_through_a_map_into_an_unallocated_block_of_a_full_disk_is_a_map_fault() {
        let (fs, dir) = fs_with_dir();
        fs.set_capacity(Some(SIM_BLOCK_BYTES));
        let file = fs.open(&dir.join("i"), true).unwrap();
        file.set_len(2 * SIM_BLOCK_BYTES).unwrap();
        file.allocate(0, SIM_BLOCK_BYTES).unwrap();
        let mut map = file.map_mut(2 * SIM_BLOCK_BYTES).unwrap();
        map.bytes_mut()[0] = 1;
        map.flush().unwrap();
        assert_eq!(fs.map_faults(), 0, "the block was allocated");
        map.bytes_mut()[SIM_BLOCK_BYTES as usize] = 1;
        drop(map);
        assert_eq!(fs.map_faults(), 1, "a SIGBUS on a real file system");
    }
}
