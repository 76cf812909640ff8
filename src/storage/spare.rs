//! Spare segment files: zeros written and synced ahead of the segment that
//! takes one, so that the fsyncs of its appends change no block map and no
//! file size (`klog-broker --preallocate`).
//!
//! An `fdatasync` of an append that grows a file must also make its new
//! length and blocks durable: on ext4 and XFS a journal commit, which on
//! this project's disks took the median fsync from about 0.09 ms to 0.18
//! ms and most of its tail (`klog-bench fsync` against `--overwrite`).
//! Writing over blocks that are already written and synced needs none.
//! Kafka's `log.preallocate` gives a segment its length with
//! `fallocate`, whose blocks are unwritten extents: the first write to
//! each converts it, in the journal, so it does not help here.
//!
//! One thread per broker ([`Spares::run`]) keeps one spare ready in the
//! `preallocated/` directory of the data directory: it writes zeros to
//! `zeroing.tmp` at a paced rate ([`ZERO_RATE`], so a 1 GiB spare takes
//! about 32 s), syncs it and renames it `spare-<n>` (nothing there is
//! any partition's, so the directory needs no sync: a power cut leaves at
//! worst a spare that is not there, or a `.tmp` removed at the next
//! start). A segment made ahead of its roll, or a new log's first one,
//! takes the spare by renaming it to its own name (the same file system:
//! the zeros stay written) and appends over the zeros; the thread zeroes
//! the next. A segment that finds no spare ready is made as it always was.
//!
//! The zeros past a segment's last batch are what a crash leaves at the
//! end of a file anyway: opening a log cuts them from its last segment,
//! readers stop before them ([`crate::storage::batches`]). A segment is
//! cut to its last batch when it rolls, before the fsync that seals it
//! (a segment before the last one never ends in zeros), and when its log
//! closes cleanly.
//!
//! A spare costs the disk a segment's size (every segment is written
//! twice: zeros, then records), one per broker, plus one in each
//! partition whose active segment is past half full or is a new topic's
//! that took one, until its roll or its log's close cuts what its
//! batches do not use. Only a log whose segments are at least a spare's
//! size takes one. The thread zeroes a spare only while the disk has
//! twice its size free; a zeroing that fails (a full disk) removes its
//! file, says why, and tries again a minute later. Spares an earlier
//! broker left are removed at the start, not trusted.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::error::{IoContext, Result};
use crate::storage::fs::{self, Vfs};
use crate::sync::lock;

/// The directory of spares, in a data directory (no partition's name: it
/// has no `-<partition>`).
pub const SPARES_DIR: &str = "preallocated";
/// The file a spare is zeroed in, until it is synced.
const ZEROING: &str = "zeroing.tmp";
/// Bytes of zeros per write.
const CHUNK_BYTES: usize = 256 << 10;
/// Bytes of zeros a second, at most: above a busy partition's appends
/// (the benchmarks' 100,000 records a second are 21 MB). The zeroing still
/// slows the fsyncs of segments without a spare on this project's disks
/// (README, "Waiting for the disk"). A broker that appends faster for
/// long rolls some segments without a spare
/// (`klog_preallocate_misses_total`).
pub const ZERO_RATE: u64 = 32 << 20;
/// How long a zeroing that failed waits before it tries again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// The broker's spare segment file, kept ready by [`Spares::run`].
pub struct Spares {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    bytes: u64,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The spare ready to be taken.
    ready: Option<PathBuf>,
    /// The number of the next spare's name.
    next: u64,
    /// Spares taken so far.
    taken: u64,
    /// Segments made with no spare ready.
    missed: u64,
    stopped: bool,
}

impl fmt::Debug for Spares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spares")
            .field("dir", &self.dir)
            .field("bytes", &self.bytes)
            .field("state", &*lock(&self.state))
            .finish()
    }
}

impl Spares {
    /// Spares of `bytes` in `data_dir`'s [`SPARES_DIR`], which starts
    /// empty: what an earlier broker left there goes (a spare it gave a
    /// segment may be back under its old name after a power cut, holding
    /// that segment's batches).
    pub fn open(vfs: Arc<dyn Vfs>, data_dir: &Path, bytes: u64) -> Result<Arc<Spares>> {
        let dir = data_dir.join(SPARES_DIR);
        vfs.create_dir_all(&dir).ctx("create", &dir)?;
        for name in vfs.list(&dir).ctx("list", &dir)? {
            let path = dir.join(&name);
            vfs.remove(&path).ctx("remove", &path)?;
        }
        Ok(Arc::new(Spares {
            vfs,
            dir,
            bytes,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }))
    }

    /// The size of a spare.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether a spare is ready now.
    pub fn is_ready(&self) -> bool {
        lock(&self.state).ready.is_some()
    }

    /// How many spares segments have taken.
    pub fn taken(&self) -> u64 {
        lock(&self.state).taken
    }

    /// How many segments were made when no spare was ready (the thread
    /// did not keep up, or the disk had no room for one).
    pub fn missed(&self) -> u64 {
        lock(&self.state).missed
    }

    /// Moves the spare, if one is ready, to `to` (a segment's file, not
    /// yet there) and returns its size; the thread zeroes the next.
    pub fn take(&self, to: &Path) -> Option<u64> {
        let mut state = lock(&self.state);
        let Some(spare) = state.ready.take() else {
            state.missed += 1;
            return None;
        };
        self.changed.notify_all();
        match self.vfs.rename(&spare, to) {
            Ok(()) => {
                state.taken += 1;
                Some(self.bytes)
            }
            Err(_) => {
                let _ = self.vfs.remove(&spare);
                None
            }
        }
    }

    /// Stops [`Spares::run`] (a zeroing under way stops at its next
    /// write, and its file goes).
    pub fn stop(&self) {
        lock(&self.state).stopped = true;
        self.changed.notify_all();
    }

    /// Keeps a spare ready until [`Spares::stop`], saying with `say` why a
    /// zeroing failed.
    pub fn run(&self, say: impl Fn(fmt::Arguments<'_>)) {
        loop {
            let mut state = lock(&self.state);
            while !state.stopped && state.ready.is_some() {
                state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            drop(state);
            match self.fill() {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => self.failed(&e, &say),
            }
        }
    }

    /// Zeroes a spare now, unless one is ready; `false` once stopped. A
    /// zeroing that fails leaves no file behind.
    pub fn fill(&self) -> io::Result<bool> {
        let name = {
            let mut state = lock(&self.state);
            if state.stopped {
                return Ok(false);
            }
            if state.ready.is_some() {
                return Ok(true);
            }
            state.next += 1;
            format!("spare-{}", state.next - 1)
        };
        // A spare must leave the records room: never the last of the disk.
        if let Some(free) = fs::free_bytes(&self.dir).filter(|&f| f / 2 < self.bytes) {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!(
                    "{} MiB free, under twice a spare's {} MiB",
                    free >> 20,
                    self.bytes >> 20
                ),
            ));
        }
        let zeroing = self.dir.join(ZEROING);
        let made = self.zero(&zeroing).and_then(|whole| match whole {
            true => {
                let spare = self.dir.join(name);
                self.vfs.rename(&zeroing, &spare)?;
                lock(&self.state).ready = Some(spare);
                Ok(true)
            }
            false => Ok(false),
        });
        if !matches!(made, Ok(true)) {
            let _ = self.vfs.remove(&zeroing);
        }
        made
    }

    /// Writes the zeros of a spare to `path` and syncs them; `false` when
    /// stopped before the end. Paced ([`ZERO_RATE`]), a chunk at a time,
    /// each written back before the next: the disk never holds more than
    /// a chunk of them ahead of the fsyncs records wait for (one write of
    /// a whole spare left to the page cache stalled those for 0.4 s), and
    /// the one fsync at the end commits one journal transaction.
    fn zero(&self, path: &Path) -> io::Result<bool> {
        let file = self.vfs.open(path, true)?;
        file.set_len(0)?;
        let zeros = vec![0u8; CHUNK_BYTES];
        let began = std::time::Instant::now();
        let mut at = 0;
        while at < self.bytes {
            let n = (self.bytes - at).min(CHUNK_BYTES as u64);
            file.write_all_at(&zeros[..n as usize], at)?;
            file.write_back(at, n)?;
            at += n;
            let due = Duration::from_secs_f64(at as f64 / ZERO_RATE as f64);
            let state = lock(&self.state);
            let wait = due.saturating_sub(began.elapsed());
            let (state, _) = self
                .changed
                .wait_timeout_while(state, wait, |s| !s.stopped)
                .unwrap_or_else(|p| p.into_inner());
            if state.stopped {
                return Ok(false);
            }
        }
        file.sync_data()?;
        Ok(true)
    }

    /// A zeroing that failed: says so, and waits before the next try.
    fn failed(&self, e: &io::Error, say: &impl Fn(fmt::Arguments<'_>)) {
        say(format_args!(
            "cannot zero a spare segment in {}: {e}; trying again in {} s",
            self.dir.display(),
            RETRY_AFTER.as_secs()
        ));
        let state = lock(&self.state);
        let _ = self
            .changed
            .wait_timeout_while(state, RETRY_AFTER, |s| !s.stopped);
    }
}
