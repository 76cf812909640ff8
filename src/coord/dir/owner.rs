//! Claims of a partition in a registry directory: one file per
//! generation, and a mutex that makes a commit's fence and its write one
//! step with respect to claims.
//!
//! ```text
//! owners/<group>/<topic>-<p>/lock   --> (empty; locked for an instant by a claim, a commit or a reset)
//! owners/<group>/<topic>-<p>/<gen>  --> {"member":"m","generation":7,"session_timeout_ms":10000}
//! ```
//!
//! The claim of generation `gen` is the file named by that number, locked
//! by its holder for life; its mtime is the claim's lease, renewed by the
//! holder. The *current* claim is the highest generation. A claim, under
//! the mutex, takes the partition when the current claim's lock is free
//! (its holder died or left) or its lease has expired (its holder is
//! silent), by linking a new, already locked file at the next generation.
//! A commit, under the mutex, checks that its claim is still the current
//! one and that its lease has not run out, renews it, and only then
//! renames the new offset into place: so a claim and a commit never
//! interleave, and a silent member's late commit is refused once another
//! claimed its partition.
//!
//! The current claim's file stays when its holder leaves (unlocked, so the
//! partition is free) so that the next generation is higher; earlier
//! claims' files are removed by their holders when they leave, or by the
//! next claimer if their holder died, holding their lock.
//!
//! The mutex is only ever held for a few system calls, never across I/O
//! to a broker, but a process stopped inside it (SIGSTOP) holds it until
//! it runs again: claims then back off and retry, and commits of that
//! partition fail with [`Error::InUse`] after [`MUTEX_WAIT`].

use std::any::Any;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::entry::{incarnation, lease_age, read_small, remove_stale, renew_lease};
use crate::coord::registry::{to_json, Ephemeral, Held, Lease, Owner};
use crate::error::{Error, IoContext, Result};
use crate::storage::lock::{is_locked, try_lock, FileLock};

/// File name of a partition's mutex inside its owners directory.
const MUTEX_FILE: &str = "lock";
/// How long a commit or a reset waits for the partition's mutex.
pub(super) const MUTEX_WAIT: Duration = Duration::from_millis(200);

/// The content of a claim's file.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    member: String,
    generation: u64,
    session_timeout_ms: u64,
}

/// A held claim.
#[derive(Debug)]
pub(super) struct Claim {
    lock: FileLock,
    /// The partition's owners directory.
    dir: PathBuf,
    /// `dir/<generation>`.
    path: PathBuf,
    generation: u64,
    timeout: Duration,
    /// For messages: "the claim of t [0] in group g".
    what: String,
}

impl Claim {
    /// Checks that this claim is still the current one and that its lease
    /// has not run out, and renews it.
    fn check_and_renew(&self) -> Result<()> {
        let current = top_generation(&self.dir)?.unwrap_or(0);
        if current != self.generation {
            return Err(Error::Fenced {
                what: self.what.clone(),
                generation: self.generation,
                current,
            });
        }
        renew_lease(self.lock.file(), &self.path, self.timeout, &self.what)
    }
}

impl Held for Claim {
    fn update(&self, _json: &[u8]) -> Result<()> {
        Ok(())
    }

    fn renew(&self) -> Result<()> {
        self.check_and_renew()
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Superseded: the file is history, and its lock is ours. Current:
        // it stays, unlocked, so that the next generation is higher.
        if top_generation(&self.dir).is_ok_and(|top| top > Some(self.generation)) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The generations whose files are in `dir`, ascending.
fn generations(dir: &Path) -> Result<Vec<u64>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let mut out: Vec<u64> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| n.parse().ok())
        .collect();
    out.sort_unstable();
    Ok(out)
}

fn top_generation(dir: &Path) -> Result<Option<u64>> {
    Ok(generations(dir)?.last().copied())
}

/// The claim of `generation` in `dir` if a live process holds it.
fn read_claim(dir: &Path, generation: u64) -> Option<Owner> {
    let path = dir.join(generation.to_string());
    if !is_locked(&path) {
        return None;
    }
    let file = File::open(&path).ok()?;
    let age = lease_age(&file.metadata().ok()?);
    let record: Record = serde_json::from_slice(&read_small(&file)?).ok()?;
    Some(Owner {
        member: record.member,
        generation,
        lease: Lease {
            timeout: Duration::from_millis(record.session_timeout_ms),
            age,
        },
    })
}

/// The current claim of the partition whose owners directory is `dir`, if
/// a live process holds it.
pub(super) fn current(dir: &Path) -> Option<Owner> {
    read_claim(dir, top_generation(dir).ok()??)
}

/// Takes the partition's mutex; with `wait`, tries for up to
/// [`MUTEX_WAIT`]. `None` when another holds it.
fn mutex(dir: &Path, wait: bool) -> Result<Option<FileLock>> {
    let path = dir.join(MUTEX_FILE);
    let deadline = Instant::now() + MUTEX_WAIT;
    loop {
        if let Some(lock) = try_lock(&path)? {
            return Ok(Some(lock));
        }
        if !wait || Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Claims the partition whose owners directory is `dir` for `member` (see
/// [`crate::coord::Registry::claim`]).
pub(super) fn claim(
    dir: &Path,
    what: String,
    member: &str,
    timeout: Duration,
) -> Result<Option<Ephemeral>> {
    std::fs::create_dir_all(dir).ctx("create", dir)?;
    let Some(mutex) = mutex(dir, false)? else {
        return Ok(None);
    };
    let earlier = generations(dir)?;
    if let Some(&top) = earlier.last() {
        if read_claim(dir, top).is_some_and(|owner| !owner.lease.expired()) {
            return Ok(None);
        }
    }
    let generation = earlier.last().map_or(1, |top| top + 1);
    let record = Record {
        member: member.to_string(),
        generation,
        session_timeout_ms: timeout.as_millis() as u64,
    };
    // Locked and written before it gets its name: a reader that finds the
    // claim finds it held and whole.
    let tmp = dir.join(format!(".{generation}.{}.tmp", incarnation()));
    let lock = try_lock(&tmp)?.ok_or_else(|| Error::InUse { path: tmp.clone() })?;
    lock.file()
        .write_all_at(&to_json(&record)?, 0)
        .ctx("write", &tmp)?;
    let path = dir.join(generation.to_string());
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    linked.ctx("link", &path)?;
    drop(mutex);
    // Earlier claims whose holders are gone; a silent holder's stays
    // until it leaves.
    for g in earlier {
        remove_stale(&dir.join(g.to_string()), &[]);
    }
    Ok(Some(Ephemeral::new(Claim {
        lock,
        dir: dir.to_path_buf(),
        path,
        generation,
        timeout,
        what,
    })))
}

/// Runs `write` under the mutex of the partition whose owners directory is
/// `dir` if `owner` is its current claim and the claim's lease has not run
/// out (renewing it): the fence of a commit.
pub(super) fn fenced(
    owner: &Ephemeral,
    dir: &Path,
    write: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let claim = owner
        .held()
        .as_any()
        .downcast_ref::<Claim>()
        .filter(|c| c.dir == dir)
        .ok_or_else(|| {
            Error::Config(format!(
                "a commit needs the claim of its own partition ({})",
                dir.display()
            ))
        })?;
    let _mutex = mutex(dir, true)?.ok_or_else(|| Error::InUse {
        path: dir.join(MUTEX_FILE),
    })?;
    claim.check_and_renew()?;
    write()
}

/// Runs `write` under the mutex of the partition whose owners directory is
/// `dir` if no live process holds its current claim; else `busy(owner)`.
pub(super) fn unowned(
    dir: &Path,
    busy: impl FnOnce(Owner) -> Error,
    write: impl FnOnce() -> Result<()>,
) -> Result<()> {
    std::fs::create_dir_all(dir).ctx("create", dir)?;
    let _mutex = mutex(dir, true)?.ok_or_else(|| Error::InUse {
        path: dir.join(MUTEX_FILE),
    })?;
    if let Some(owner) = current(dir) {
        return Err(busy(owner));
    }
    write()
}
