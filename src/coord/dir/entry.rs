//! The ephemeral entries of brokers and members in a registry directory.
//!
//! Each registration is an *incarnation* of its own:
//! `<id>@<incarnation>.lock` and `<id>@<incarnation>.json`, with an
//! incarnation (`<pid>-<nanos>-<sequence>`) that no other registration
//! ever has. A registrant never replaces another's file, so a second
//! registrant of a live id (a second broker started on the same data
//! directory) cannot take over the live entry, and when it leaves it
//! removes only its own files. It is refused as soon as it sees the live
//! incarnation; two registrants racing for a free id may both be refused,
//! never both accepted.
//!
//! The lock file is locked by its holder for life (death detection at
//! once, `kill -9` included) and holds its lease, `klog-lease 1\n<session
//! timeout in ms>\n` (a broker's is empty: no lease). Its mtime is the
//! lease's last renewal: a holder silent for longer than its timeout is
//! expired (see [`crate::coord::registry`]).
//!
//! A stale entry (its lock free) is removed by whoever lists it, and only
//! while holding the lock of the very lock file it removes (checked to be
//! the file at that name), so a process that still holds it is never
//! erased, and nothing of another incarnation is touched.

use std::any::Any;
use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;

use crate::coord::registry::{Ephemeral, Held, Lease, Renewer};
use crate::error::{Error, IoContext, Result};
use crate::storage::lock::{is_locked, try_lock, try_lock_existing, FileLock};

/// Magic first line of a lock file that holds a lease.
const LEASE_MAGIC: &str = "klog-lease 1";
/// The most of a lease or owner file that is read (they are tiny).
pub(super) const SMALL_FILE_BYTES_MAX: u64 = 4096;

/// A held entry: its lock, its files, and its lease.
#[derive(Debug)]
pub(super) struct Entry {
    lock: FileLock,
    lock_path: PathBuf,
    info_path: PathBuf,
    /// For messages: "member m of group g".
    what: String,
    /// `None`: no lease (a broker).
    timeout: Option<Duration>,
}

impl Held for Entry {
    fn update(&self, json: &[u8]) -> Result<()> {
        super::write_file(&self.info_path, json)
    }

    fn renew(&self) -> Result<()> {
        match self.timeout {
            Some(timeout) => renew_lease(self.lock.file(), &self.lock_path, timeout, &self.what),
            None => Ok(()),
        }
    }

    fn generation(&self) -> u64 {
        0
    }

    fn renewer(&self) -> Option<Renewer> {
        let timeout = self.timeout?;
        // Its own handle of the lock file (the lock is the entry's: the
        // handle only touches the lease's mtime).
        let file = self.lock.file().try_clone().ok()?;
        let (path, what) = (self.lock_path.clone(), self.what.clone());
        Some(Renewer::new(move || {
            renew_lease(&file, &path, timeout, &what)
        }))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // Leaving: the description first, so that a reader never finds a
        // description without its lock; the lock file is ours alone.
        let _ = std::fs::remove_file(&self.info_path);
        let _ = std::fs::remove_file(&self.lock_path);
    }
}

/// A name no other registration has: pid, time, and a sequence number
/// within the process.
pub(super) fn incarnation() -> String {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos}-{sequence}", std::process::id())
}

/// Time since the last renewal recorded in `meta` (zero if the clock went
/// back).
pub(super) fn lease_age(meta: &Metadata) -> Duration {
    meta.modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .unwrap_or_default()
}

/// Checks that the lease held in `file` has not run out, then renews it.
pub(super) fn renew_lease(file: &File, path: &Path, timeout: Duration, what: &str) -> Result<()> {
    let age = lease_age(&file.metadata().ctx("stat", path)?);
    if age > timeout {
        return Err(Error::Expired {
            what: what.to_string(),
            silent_ms: age.as_millis() as u64,
            timeout_ms: timeout.as_millis() as u64,
        });
    }
    file.set_modified(SystemTime::now())
        .ctx("renew the lease of", path)
}

/// Reads at most [`SMALL_FILE_BYTES_MAX`] bytes of `file`.
pub(super) fn read_small(file: &File) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(SMALL_FILE_BYTES_MAX)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// The lease in the lock file at `path`; a lock file without one (a
/// broker's, or damaged) never expires.
fn lease_of(path: &Path) -> Option<Lease> {
    let file = File::open(path).ok()?;
    let age = lease_age(&file.metadata().ok()?);
    let text = String::from_utf8(read_small(&file)?).ok()?;
    let mut lines = text.lines();
    let timeout = match (lines.next(), lines.next().map(str::parse::<u64>)) {
        (Some(LEASE_MAGIC), Some(Ok(ms))) => Duration::from_millis(ms),
        _ => Duration::MAX,
    };
    Some(Lease { timeout, age })
}

/// Registers `<entry_dir>/<id>@<incarnation>`, with a lease of `timeout`
/// if any; [`Error::InUse`] while another incarnation of `id` lives.
pub(super) fn register(
    entry_dir: &Path,
    id: &str,
    json: &[u8],
    what: String,
    timeout: Option<Duration>,
) -> Result<Ephemeral> {
    std::fs::create_dir_all(entry_dir).ctx("create", entry_dir)?;
    let stem = format!("{id}@{}", incarnation());
    // Lock first under a temporary name, link the locked file to its
    // name (which fails rather than replace anything), and only then
    // write the description that readers list: a reader that finds the
    // description always finds the lock held.
    let tmp = entry_dir.join(format!(".{stem}.lock.tmp"));
    let lock = try_lock(&tmp)?.ok_or_else(|| Error::InUse { path: tmp.clone() })?;
    if let Some(t) = timeout {
        let lease = format!("{LEASE_MAGIC}\n{}\n", t.as_millis());
        lock.file()
            .write_all_at(lease.as_bytes(), 0)
            .ctx("write", &tmp)?;
    }
    let lock_path = entry_dir.join(format!("{stem}.lock"));
    let linked = std::fs::hard_link(&tmp, &lock_path);
    let _ = std::fs::remove_file(&tmp);
    linked.ctx("link", &lock_path)?;
    let entry = Entry {
        lock,
        lock_path,
        info_path: entry_dir.join(format!("{stem}.json")),
        what,
        timeout,
    };
    if let Some(other) = live_incarnation(entry_dir, id, &stem) {
        // Dropping `entry` removes our own files, nothing else.
        return Err(Error::InUse { path: other });
    }
    super::write_file(&entry.info_path, json)?;
    Ok(Ephemeral::new(entry))
}

/// The lock file of a live incarnation of `id` other than `own`.
fn live_incarnation(entry_dir: &Path, id: &str, own: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(entry_dir).ok()?;
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|name| {
            let stem = name.strip_suffix(".lock")?;
            let (of, _) = stem.split_once('@')?;
            (of == id && stem != own).then(|| entry_dir.join(&name))
        })
        .find(|path| held_for_good(path))
}

/// Whether the lock on `path` is held by its owner, not by a process
/// removing it as stale: a remover holds the lock only while it deletes
/// the file, so a lock still held, on a file still there, after
/// [`REMOVAL_GRACE`] is an owner's.
fn held_for_good(path: &Path) -> bool {
    let started = std::time::Instant::now();
    loop {
        if !is_locked(path) || !path.exists() {
            return false;
        }
        if started.elapsed() >= REMOVAL_GRACE {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How long a stale entry's remover may hold its lock (a few syscalls;
/// the rest is room for a loaded machine's scheduler).
const REMOVAL_GRACE: Duration = Duration::from_millis(500);

/// The entries of `entry_dir` whose lock is held, with their lease, in
/// name order; a description that does not parse is skipped (it is being
/// replaced, or damaged: the lock alone keeps the entry alive). Stale
/// entries and debris are removed unless `read_only`.
pub(super) fn live<T: DeserializeOwned>(entry_dir: &Path, read_only: bool) -> Vec<(T, Lease)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(entry_dir) else {
        return out;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    for name in &names {
        let Some(stem) = name.strip_suffix(".json").filter(|s| !s.starts_with('.')) else {
            // A lock with no description: its holder died before writing
            // one or while leaving, or is writing it now (then its lock is
            // held and it stays). A temporary lock file (`.*.lock.tmp`) is
            // left alone: it is created before it is locked, so it cannot
            // be told from debris.
            let stem = name.strip_suffix(".lock").filter(|s| !s.starts_with('.'));
            if let Some(stem) = stem.filter(|_| !read_only) {
                if !entry_dir.join(format!("{stem}.json")).exists() {
                    remove_stale(&entry_dir.join(name), &[]);
                }
            }
            continue;
        };
        let lock = entry_dir.join(format!("{stem}.lock"));
        let info = entry_dir.join(name);
        if !is_locked(&lock) {
            if !read_only {
                remove_stale(&lock, &[info]);
            }
            continue;
        }
        // An entry of the format before incarnations is not listed.
        let (Some(lease), true) = (lease_of(&lock), stem.contains('@')) else {
            continue;
        };
        let parsed = std::fs::read(&info)
            .ok()
            .and_then(|text| serde_json::from_slice(&text).ok());
        if let Some(v) = parsed {
            out.push((v, lease));
        }
    }
    out
}

/// Removes a stale entry: the lock file `lock_path` and the files `with`,
/// while holding the lock of the very file at `lock_path`. A file whose
/// lock a process holds is left, and so are its companions. A companion
/// whose lock file is gone is removed: a live entry's lock file exists
/// before its description appears and until after it disappears.
pub(super) fn remove_stale(lock_path: &Path, with: &[PathBuf]) {
    let held = match try_lock_existing(lock_path) {
        Ok(Some(held)) => held,
        Ok(None) if !lock_path.exists() => {
            for path in with {
                let _ = std::fs::remove_file(path);
            }
            return;
        }
        _ => return,
    };
    let same = match (held.file().metadata(), std::fs::metadata(lock_path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    if same {
        for path in with {
            let _ = std::fs::remove_file(path);
        }
        let _ = std::fs::remove_file(lock_path);
    }
}
