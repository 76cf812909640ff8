//! Claims of a partition in a registry directory: one file per
//! generation, taken without any lock but the claim's own.
//!
//! ```text
//! owners/<group>/<topic>-<p>/<gen>  --> {"member":"m","generation":7,"session_timeout_ms":10000}
//! ```
//!
//! The claim of generation `gen` is the file named by that number, locked
//! by its holder for life; its mtime is the claim's lease, renewed by the
//! holder. The *current* claim is the highest generation. A claim takes
//! the partition when the current claim's lock is free (its holder died
//! or left) or its lease has expired (its holder is silent), by linking a
//! new, already locked file at the next generation: the link fails if
//! another claimer got there first, and a claimer that looked before a
//! later claim was taken, and so linked a generation below the current
//! one, sees it and gives up. Then it moves the partition's committed
//! offset to its generation ([`offset`](super::offset)), which fences
//! every later write of the claims before it. A commit checks that its
//! claim is still the current one and that its lease has not run out,
//! renews it, and writes into its generation's directory.
//!
//! No lock is shared between members, so a member stopped anywhere
//! (SIGSTOP, stuck I/O, inside a commit) holds up no claim and no commit
//! of any partition: its own partitions are taken over once its lease runs
//! out, and its late writes are refused.
//!
//! The current claim's file stays when its holder leaves (unlocked, so the
//! partition is free) so that the next generation is higher; earlier
//! claims' files are removed by their holders when they leave, or by the
//! next claimer if their holder died, holding their lock. The highest
//! file is never removed, so generations only grow.

use std::any::Any;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::entry::{incarnation, lease_age, read_small, remove_stale, renew_lease};
use crate::coord::registry::{to_json, Ephemeral, Held, Lease, Owner};
use crate::error::{Error, IoContext, Result};
use crate::storage::lock::{is_locked, try_lock, FileLock};

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
    /// Its generation.
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// Why a write of this claim found its directory gone: a claim of
    /// generation `current` (or higher) took the partition over; else the
    /// registry lost it some other way (removed by hand).
    pub(super) fn taken_over(&self, current: Option<u64>) -> Error {
        let owner_top = top_generation(&self.dir).ok().flatten();
        let current = current.max(owner_top).unwrap_or(0);
        if current > self.generation {
            return Error::Fenced {
                what: self.what.clone(),
                generation: self.generation,
                current,
            };
        }
        Error::Vanished {
            what: format!("the committed offset of {}", self.what),
        }
    }

    /// Checks that this claim is still the current one and that its lease
    /// has not run out, and renews it: the fence of a commit.
    pub(super) fn check_and_renew(&self) -> Result<()> {
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

/// The generations whose entries (files, or directories) are in `dir`,
/// ascending; none when `dir` does not exist.
pub(super) fn generations(dir: &Path) -> Result<Vec<u64>> {
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

/// Claims the partition whose owners directory is `dir` for `member` (see
/// [`crate::coord::Registry::claim`]): `None` when another's claim is
/// current and its holder lives (and, unless `take_expired`, also when its
/// lease has expired), or when another claimer got there first.
pub(super) fn claim(
    dir: &Path,
    what: String,
    member: &str,
    timeout: Duration,
    take_expired: bool,
) -> Result<Option<Claim>> {
    std::fs::create_dir_all(dir).ctx("create", dir)?;
    let earlier = generations(dir)?;
    if let Some(&top) = earlier.last() {
        if read_claim(dir, top).is_some_and(|owner| !take_expired || !owner.lease.expired()) {
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
    match linked {
        Ok(()) => {}
        // Another claimer took this generation first.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
        Err(e) => return Err(Error::io("link", &path, e)),
    }
    let claim = Claim {
        lock,
        dir: dir.to_path_buf(),
        path,
        generation,
        timeout,
        what,
    };
    // Looked before a later claim was taken (whose holder then removed
    // this generation's file as history): not current, so not a claim.
    // Dropping it removes the file again.
    if top_generation(dir)? != Some(generation) {
        return Ok(None);
    }
    // Earlier claims whose holders are gone; a silent holder's stays
    // until it leaves.
    for g in earlier {
        remove_stale(&dir.join(g.to_string()), &[]);
    }
    Ok(Some(claim))
}

/// The claim `owner` holds, if it is the claim of the partition whose
/// owners directory is `dir`.
pub(super) fn claim_of<'a>(owner: &'a Ephemeral, dir: &Path) -> Result<&'a Claim> {
    owner
        .held()
        .as_any()
        .downcast_ref::<Claim>()
        .filter(|c| c.dir == dir)
        .ok_or_else(|| {
            Error::Config(format!(
                "a commit needs the claim of its own partition ({})",
                dir.display()
            ))
        })
}
