//! Partition states (leader, leader epoch, ISR) in a registry directory,
//! changed only by compare-and-set on their version, with no lock that
//! one writer could hold against another.
//!
//! ```text
//! states/<topic>-<p>/<version>           --> {"leader": "b1", "leader_epoch": 3, "isr": ["b1", "b2"]}
//! states/<topic>-<p>/<version>.<writer>  --> the same: state <version>, taken by <writer>'s change
//! states/<topic>-<p>/.<writer>.new       --> the state <writer> proposes (locked while it lives)
//! states/<topic>-<p>/.<writer>.tmp       --> the same, while it is written
//! ```
//!
//! A state's files never change once named; `<writer>` is an incarnation
//! of its own (see `entry`), so no two changes share a name.
//!
//! # A version is replaced once, and never comes back
//!
//! The current state is the one file named by a bare number, its version.
//! A change from version `v` writes its state to `.<writer>.new`, fsyncs
//! it and the directory, and then *takes* `v`: it renames `<v>` to
//! `<v>.<writer>`. A rename of a name that is gone fails, so of the
//! writers that read `v` exactly one takes it, and the others, finding
//! `<v>` gone, remove their proposal and report that someone changed the
//! state first. Taking `v` decides the change: from then on the state is
//! version `v + 1`, the proposal. The writer then renames its proposal to
//! `<v+1>` and removes `<v>.<writer>`, fsyncing the directory in between.
//!
//! `<v>` is created once (a change from `v − 1` names it, or the create of
//! version 0), so a writer stopped for any time (SIGSTOP, stuck I/O) before
//! it takes `v` finds it gone when it runs again, however many versions
//! came and went meanwhile, and writes nothing. A scheme that linked its
//! proposal to `<v+1>` and removed old versions afterwards could not say
//! that: a stopped writer would find the name `<v+1>` free again.
//!
//! # No writer holds up another
//!
//! A writer stopped after taking `v` and before renaming its proposal
//! leaves `<v>.<writer>` beside `.<writer>.new`: version `v + 1`, decided.
//! Readers read it from the proposal, and the next writer finishes the
//! change for it (renames the proposal to `<v+1>`) before taking `v + 1`
//! itself; so does the first writer after a crash there. A finished change
//! leaves `<v>.<writer>` until its writer, or the next writer, removes it.
//!
//! Proposals are locked by their writer (an open-file-description lock,
//! released when it dies): a proposal that no taken version names and no
//! process holds is the debris of a writer that died, removed by the next
//! writer; a live writer's is never touched.
//!
//! # The first state
//!
//! `create` writes `<topic>-<p>` whole under a temporary name in
//! `states/` (a directory holding `0`, fsynced) and renames it into place:
//! a rename onto a directory that holds a state fails, so the first create
//! wins, and a partition's directory, once there, always holds a version
//! or a taken one (never removed), so a late create never replaces it.
//!
//! A file of another form, or a state that does not parse, is an error
//! that names it.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::entry::incarnation;
use crate::coord::registry::{parse_state, PartitionState, STATE_BYTES_MAX};
use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{RealFs, Vfs};
use crate::storage::lock::{try_lock, try_lock_existing};

/// How many times a reader or a writer looks again when a change renamed
/// what it was about to read (each retry means a change made meanwhile:
/// a bound against a storm, never reached in practice).
const MOVED_RETRIES_MAX: u32 = 100;

/// What a partition's state directory holds, by name.
#[derive(Debug, Default)]
struct Listing {
    /// Bare versions (one, but a listing that races a change may see two).
    versions: Vec<u64>,
    /// Taken versions, with the writer that took each.
    taken: Vec<(u64, String)>,
    /// The writers with a proposal (`.<writer>.new`).
    proposals: Vec<String>,
}

/// What the state is, as a listing sees it.
#[derive(Debug, PartialEq, Eq)]
enum Current {
    /// Version `v`, in `<v>`.
    Version(u64),
    /// Version `v + 1`, decided: `v` taken by `writer`, whose proposal
    /// holds it (unless the change was finished since the listing).
    Taken(u64, String),
}

/// Whether `name` is a writer's incarnation (`<pid>-<nanos>-<sequence>`).
fn is_writer(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit() || b == b'-')
}

/// A version as it names a file: decimal, no leading zero.
fn version_of(name: &str) -> Option<u64> {
    let v: u64 = name.parse().ok()?;
    (name.bytes().all(|b| b.is_ascii_digit()) && v.to_string() == name).then_some(v)
}

fn garbage(path: PathBuf) -> Error {
    Error::Corrupt {
        path,
        position: 0,
        reason: "not a partition state file (<version>, <version>.<writer>, .<writer>.new \
                 or .<writer>.tmp)"
            .into(),
    }
}

/// Lists the state directory `dir`; `None` when it does not exist.
fn list(dir: &Path) -> Result<Option<Listing>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let mut listing = Listing::default();
    for entry in entries {
        let entry = entry.ctx("list", dir)?;
        let Ok(name) = entry.file_name().into_string() else {
            return Err(garbage(entry.path()));
        };
        if let Some(v) = version_of(&name) {
            listing.versions.push(v);
        } else if let Some(w) = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".new"))
            .filter(|w| is_writer(w))
        {
            listing.proposals.push(w.to_string());
        } else if name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".tmp"))
            .is_some_and(is_writer)
        {
            // Being written, or debris of a writer that died writing it:
            // it cannot be told which (it is created before it is locked).
        } else {
            let (v, w) = name
                .split_once('.')
                .ok_or_else(|| garbage(dir.join(&name)))?;
            match version_of(v).filter(|_| is_writer(w)) {
                Some(v) => listing.taken.push((v, w.to_string())),
                None => return Err(garbage(dir.join(&name))),
            }
        }
    }
    Ok(Some(listing))
}

impl Listing {
    /// The state this listing shows: the highest of its bare versions and
    /// of its taken ones' successors. `None` when it shows neither (a
    /// listing that raced a rename can miss both names).
    fn current(&self) -> Option<Current> {
        let version = self.versions.iter().max().copied();
        let taken = self.taken.iter().max_by_key(|(v, _)| *v);
        match (version, taken) {
            (Some(v), Some((t, _))) if v > *t => Some(Current::Version(v)),
            (_, Some((t, w))) => Some(Current::Taken(*t, w.clone())),
            (Some(v), None) => Some(Current::Version(v)),
            (None, None) => None,
        }
    }
}

/// Reads a state file, `Ok(None)` when it is gone (renamed by a change).
fn read_file(path: &Path) -> Result<Option<PartitionState>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read", path, e)),
    };
    let mut bytes = Vec::new();
    file.take(STATE_BYTES_MAX as u64 + 1)
        .read_to_end(&mut bytes)
        .ctx("read", path)?;
    parse_state(path.to_path_buf(), &bytes).map(Some)
}

/// The partition's state in `dir` and its version, if it has one. Reads
/// only: a change a writer left unfinished is read from its proposal.
pub(super) fn read(dir: &Path) -> Result<Option<(PartitionState, u64)>> {
    let mut lost = LostProposal::default();
    for _ in 0..MOVED_RETRIES_MAX {
        let Some(listing) = list(dir)? else {
            return Ok(None);
        };
        let (path, version) = match listing.current() {
            Some(Current::Version(v)) => (dir.join(v.to_string()), v),
            Some(Current::Taken(v, w)) => {
                lost.seen(dir, v, &w)?;
                (dir.join(format!(".{w}.new")), next(dir, v)?)
            }
            // A state directory always holds a state: a listing that
            // raced a rename missed it.
            None => continue,
        };
        if let Some(state) = read_file(&path)? {
            return Ok(Some((state, version)));
        }
    }
    Err(moved_too_often(dir))
}

/// How many listings in a row showed the same taken version as the
/// state with its proposal gone: after a few, the proposal is lost (a
/// change renames it to the next version before anything else, so one
/// listing may miss that name while it races a rename, never several).
#[derive(Debug, Default)]
struct LostProposal {
    taken: Option<(u64, String)>,
    times: u32,
}

impl LostProposal {
    /// How many listings in a row make a lost proposal.
    const TIMES_MAX: u32 = 3;

    /// Notes that a listing showed `v`, taken by `writer`, as the state;
    /// an error once that has been so too often with no proposal.
    fn seen(&mut self, dir: &Path, v: u64, writer: &str) -> Result<()> {
        if self
            .taken
            .as_ref()
            .is_some_and(|(tv, tw)| *tv == v && tw == writer)
        {
            self.times += 1;
        } else {
            (self.taken, self.times) = (Some((v, writer.to_string())), 1);
        }
        if self.times > Self::TIMES_MAX && !dir.join(format!(".{writer}.new")).exists() {
            return Err(Error::Corrupt {
                path: dir.join(format!("{v}.{writer}")),
                position: 0,
                reason: format!(
                    "version {v} was taken by a change whose proposal .{writer}.new is missing, \
                     and no later version exists"
                ),
            });
        }
        Ok(())
    }
}

fn moved_too_often(dir: &Path) -> Error {
    Error::Vanished {
        what: format!(
            "the partition state in {} (changed again and again while read)",
            dir.display()
        ),
    }
}

/// The version after `v`.
fn next(dir: &Path, v: u64) -> Result<u64> {
    v.checked_add(1).ok_or_else(|| Error::Corrupt {
        path: dir.join(v.to_string()),
        position: 0,
        reason: "a partition state's version past the last one".into(),
    })
}

fn sync_dir(dir: &Path) -> Result<()> {
    RealFs.sync_dir(dir).ctx("fsync directory", dir)
}

/// Finishes the change that took `v` with `writer`'s proposal, then
/// removes the taken file; a no-op when the proposal is gone (renamed
/// once, by whoever finished the change first, which removes the taken
/// file, or the next writer does once it sees a later version).
fn finish(dir: &Path, v: u64, writer: &str) -> Result<()> {
    let proposal = dir.join(format!(".{writer}.new"));
    let target = dir.join(next(dir, v)?.to_string());
    match std::fs::rename(&proposal, &target) {
        Ok(()) => sync_dir(dir)?,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("rename", &proposal, e)),
    }
    let _ = std::fs::remove_file(dir.join(format!("{v}.{writer}")));
    Ok(())
}

/// The current version in `dir`, after finishing an unfinished change and
/// removing debris: taken files of finished changes, and proposals that
/// no taken version names and no live writer holds. `None`: no state.
fn settle(dir: &Path) -> Result<Option<u64>> {
    let mut lost = LostProposal::default();
    for _ in 0..MOVED_RETRIES_MAX {
        let Some(listing) = list(dir)? else {
            return Ok(None);
        };
        let current = match listing.current() {
            Some(Current::Version(v)) => v,
            Some(Current::Taken(v, w)) => {
                lost.seen(dir, v, &w)?;
                finish(dir, v, &w)?;
                continue;
            }
            None => continue,
        };
        for (v, w) in listing.taken.iter().filter(|(v, _)| *v < current) {
            let _ = std::fs::remove_file(dir.join(format!("{v}.{w}")));
        }
        for w in &listing.proposals {
            remove_dead_proposal(dir, w)?;
        }
        return Ok(Some(current));
    }
    Err(moved_too_often(dir))
}

/// Removes `writer`'s proposal if its writer is dead (its lock is free)
/// and it took no version: the debris of a writer that died before it
/// could take one. A taken version's proposal is its state, finished by
/// the next writer; a live writer's is its own.
fn remove_dead_proposal(dir: &Path, writer: &str) -> Result<()> {
    let path = dir.join(format!(".{writer}.new"));
    let Some(held) = try_lock_existing(&path)? else {
        return Ok(());
    };
    // Its writer is dead, so what it took (if anything) stays put: look
    // again, now that no listing can race its rename.
    let listing = list(dir)?.unwrap_or_default();
    if listing.taken.iter().any(|(_, w)| w == writer) {
        return Ok(());
    }
    let same = match (held.file().metadata(), std::fs::metadata(&path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    if same {
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}

/// A proposal, written, fsynced and locked by its writer while it lives.
#[derive(Debug)]
struct Proposal {
    _lock: crate::storage::lock::FileLock,
    path: PathBuf,
    writer: String,
}

/// Writes `bytes` as a proposal in `dir`.
fn propose(dir: &Path, bytes: &[u8]) -> Result<Proposal> {
    let writer = incarnation();
    let tmp = dir.join(format!(".{writer}.tmp"));
    let lock = try_lock(&tmp)?.ok_or_else(|| Error::InUse { path: tmp.clone() })?;
    let written = lock
        .file()
        .write_all_at(bytes, 0)
        .and_then(|()| lock.file().sync_all());
    let path = dir.join(format!(".{writer}.new"));
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io("write", &tmp, e));
    }
    // Named before `v` is taken: a taken version always has its proposal.
    if let Err(e) = sync_dir(dir) {
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    Ok(Proposal {
        _lock: lock,
        path,
        writer,
    })
}

/// Replaces the state in `dir` with `bytes` if its version is still
/// `expected`: `false` (nothing written) when it is not. A partition with
/// no state is an error.
pub(super) fn set(dir: &Path, bytes: &[u8], expected: u64, what: &str) -> Result<bool> {
    let Some(current) = settle(dir)? else {
        return Err(Error::Config(format!(
            "{what} has no state to change (create it first)"
        )));
    };
    if current != expected {
        return Ok(false);
    }
    let proposal = propose(dir, bytes)?;
    #[cfg(test)]
    super::stall::at_fence(&dir.join("take"));
    let taken = dir.join(format!("{expected}.{}", proposal.writer));
    match std::fs::rename(dir.join(expected.to_string()), &taken) {
        Ok(()) => {}
        // Taken by another writer first.
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let _ = std::fs::remove_file(&proposal.path);
            return Ok(false);
        }
        Err(e) => {
            let _ = std::fs::remove_file(&proposal.path);
            return Err(Error::io("rename", dir.join(expected.to_string()), e));
        }
    }
    // Decided: from here on, whatever happens, the state is the proposal.
    sync_dir(dir)?;
    #[cfg(test)]
    super::stall::at_fence(&dir.join("finish"));
    finish(dir, expected, &proposal.writer)?;
    Ok(true)
}

/// Creates the state directory `name` in `states` holding `bytes` as
/// version 0, unless it exists: `false` when another create got there
/// first.
pub(super) fn create(states: &Path, name: &str, bytes: &[u8]) -> Result<bool> {
    std::fs::create_dir_all(states).ctx("create", states)?;
    let target = states.join(name);
    if target.exists() {
        return Ok(false);
    }
    let tmp = states.join(format!(".{name}.{}.tmp", incarnation()));
    let built = build(&tmp, bytes);
    let renamed = built.and_then(|()| match std::fs::rename(&tmp, &target) {
        Ok(()) => Ok(true),
        // A directory with a state in it is never replaced.
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::DirectoryNotEmpty | ErrorKind::AlreadyExists
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(Error::io("rename", &tmp, e)),
    });
    let _ = std::fs::remove_dir_all(&tmp);
    if renamed? {
        sync_dir(states)?;
        return Ok(true);
    }
    Ok(false)
}

/// Builds a state directory at `tmp` holding `bytes` as version 0, all of
/// it fsynced.
fn build(tmp: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::create_dir(tmp).ctx("create", tmp)?;
    let first = tmp.join("0");
    let mut file = File::create_new(&first).ctx("create", &first)?;
    file.write_all(bytes).ctx("write", &first)?;
    file.sync_all().ctx("fsync", &first)?;
    sync_dir(tmp)
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::*;
    use crate::coord::dir::{stall, DirRegistry};
    use crate::coord::registry::{Placement, Registry};

    /// A registry whose topic `t` is placed (2 partitions).
    fn placed() -> (tempfile::TempDir, DirRegistry) {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let replicas = vec![
            vec!["b1".into(), "b2".into()],
            vec!["b2".into(), "b1".into()],
        ];
        assert!(reg
            .create_placement(&Placement::new("t", replicas))
            .unwrap());
        (dir, reg)
    }

    fn state(leader: &str, epoch: u64) -> PartitionState {
        PartitionState {
            leader: Some(leader.into()),
            leader_epoch: epoch,
            isr: vec![leader.into()],
        }
    }

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn of_writers_racing_from_the_same_version_exactly_one_wins_and_losers_leave_nothing() {
        let (dir, reg) = placed();
        assert!(reg.create_partition_state("t", 0, &state("b0", 0)).unwrap());
        let writers = 4;
        for round in 0..40u64 {
            let (_, version) = reg.partition_state("t", 0).unwrap().unwrap();
            assert_eq!(version, round, "one change per round");
            let barrier = Barrier::new(writers);
            let won: Vec<(usize, bool)> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..writers)
                    .map(|w| {
                        let (reg, barrier) = (&reg, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            let mine = state(&format!("b{w}"), round + 1);
                            (w, reg.set_partition_state("t", 0, &mine, version).unwrap())
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let winners: Vec<usize> = won.iter().filter(|(_, w)| *w).map(|(w, _)| *w).collect();
            assert_eq!(winners.len(), 1, "round {round}: {won:?}");
            let (now, version) = reg.partition_state("t", 0).unwrap().unwrap();
            assert_eq!(now, state(&format!("b{}", winners[0]), round + 1));
            assert_eq!(version, round + 1);
            assert_eq!(
                names(&dir.path().join("states/t-0")),
                [(round + 1).to_string()],
                "round {round}: the losers' proposals and the taken version are gone"
            );
        }
    }

    #[test]
    fn of_creates_racing_exactly_one_wins_and_the_others_leave_nothing() {
        for _ in 0..20 {
            let (dir, reg) = placed();
            let barrier = Barrier::new(4);
            let won: Vec<bool> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|w| {
                        let (reg, barrier) = (&reg, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            let mine = state(&format!("b{w}"), 0);
                            reg.create_partition_state("t", 1, &mine).unwrap()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
            let winner = won.iter().position(|w| *w).unwrap();
            let got = reg.partition_state("t", 1).unwrap();
            assert_eq!(got, Some((state(&format!("b{winner}"), 0), 0)));
            assert_eq!(names(&dir.path().join("states")), ["t-1"]);
            assert_eq!(names(&dir.path().join("states/t-1")), ["0"]);
        }
    }

    #[test]
    fn versions_grow_by_one_and_a_stale_or_unknown_version_is_refused() {
        let (_dir, reg) = placed();
        assert_eq!(reg.partition_state("t", 0).unwrap(), None);
        let err = reg
            .set_partition_state("t", 0, &state("b1", 1), 0)
            .unwrap_err();
        assert!(err.to_string().contains("no state"), "{err}");
        assert!(reg.create_partition_state("t", 0, &state("b1", 0)).unwrap());
        assert!(!reg.create_partition_state("t", 0, &state("b2", 0)).unwrap());
        for v in 0..5 {
            assert!(reg
                .set_partition_state("t", 0, &state("b1", v + 1), v)
                .unwrap());
            for stale in [v, v + 2, u64::MAX] {
                let refused = reg.set_partition_state("t", 0, &state("b2", 99), stale);
                assert!(
                    !refused.unwrap(),
                    "version {stale} is not the current {}",
                    v + 1
                );
            }
            assert_eq!(
                reg.partition_state("t", 0).unwrap(),
                Some((state("b1", v + 1), v + 1))
            );
        }
    }

    #[test]
    fn a_state_needs_its_partition_placed_and_valid_names() {
        let (_dir, reg) = placed();
        let err = reg
            .create_partition_state("u", 0, &state("b1", 0))
            .unwrap_err();
        assert!(err.to_string().contains("not placed"), "{err}");
        let err = reg
            .create_partition_state("t", 2, &state("b1", 0))
            .unwrap_err();
        assert!(
            matches!(err, Error::UnknownPartition { count: 2, .. }),
            "{err}"
        );
        let err = reg
            .create_partition_state("t", 0, &state("a/b", 0))
            .unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err}");
        let read_only = DirRegistry::open_read_only(reg.dir());
        assert!(read_only
            .create_partition_state("t", 0, &state("b1", 0))
            .is_err());
        assert_eq!(
            reg.partition_state("t", 0).unwrap(),
            None,
            "nothing written"
        );
    }

    /// A writer stopped after it read version 0 and before it took it,
    /// while others change the state twice (so that the name `1` is gone
    /// again): when it runs, it is refused and its state is never seen.
    #[test]
    fn a_writer_stopped_before_it_takes_its_version_is_refused_however_late_it_runs() {
        let (dir, reg) = placed();
        assert!(reg.create_partition_state("t", 0, &state("b1", 0)).unwrap());
        let partition = dir.path().join("states/t-0");
        let stalled = stall::next_commit(&partition.join("take"));
        std::thread::scope(|s| {
            let r = &reg;
            let late = s.spawn(move || r.set_partition_state("t", 0, &state("late", 1), 0));
            stalled.wait_reached();
            assert!(reg.set_partition_state("t", 0, &state("b2", 1), 0).unwrap());
            assert!(reg.set_partition_state("t", 0, &state("b1", 2), 1).unwrap());
            stalled.release();
            assert!(!late.join().unwrap().unwrap(), "a stale writer is refused");
        });
        assert_eq!(
            reg.partition_state("t", 0).unwrap(),
            Some((state("b1", 2), 2))
        );
        assert_eq!(names(&partition), ["2"], "the late proposal is removed");
    }

    /// A writer stopped after it took its version: its change is decided,
    /// read by the others, and finished by the next writer, which is not
    /// held up; when it runs again it learns it won.
    #[test]
    fn a_writer_stopped_after_it_took_its_version_holds_up_nobody() {
        let (dir, reg) = placed();
        assert!(reg.create_partition_state("t", 0, &state("b1", 0)).unwrap());
        let partition = dir.path().join("states/t-0");
        let stalled = stall::next_commit(&partition.join("finish"));
        std::thread::scope(|s| {
            let r = &reg;
            let slow = s.spawn(move || r.set_partition_state("t", 0, &state("slow", 1), 0));
            stalled.wait_reached();
            let look = DirRegistry::open_read_only(dir.path());
            assert_eq!(
                look.partition_state("t", 0).unwrap(),
                Some((state("slow", 1), 1)),
                "decided, read from its proposal"
            );
            assert!(!reg.set_partition_state("t", 0, &state("b2", 1), 0).unwrap());
            assert!(reg.set_partition_state("t", 0, &state("b2", 2), 1).unwrap());
            stalled.release();
            assert!(slow.join().unwrap().unwrap(), "its change was made");
        });
        assert_eq!(
            reg.partition_state("t", 0).unwrap(),
            Some((state("b2", 2), 2))
        );
        assert_eq!(names(&partition), ["2"]);
    }

    /// What `kill -9` leaves: a writer that took version 0 and died before
    /// renaming its proposal, and one that died before taking anything.
    #[test]
    fn a_change_left_by_a_dead_writer_is_read_and_finished_and_its_debris_removed() {
        let (dir, reg) = placed();
        assert!(reg.create_partition_state("t", 0, &state("b1", 0)).unwrap());
        let partition = dir.path().join("states/t-0");
        let proposal = |w: &str, s: &PartitionState| {
            let bytes = crate::coord::registry::encode_state(s).unwrap();
            std::fs::write(partition.join(format!(".{w}.new")), bytes).unwrap();
        };
        proposal("1-1-1", &state("dead", 1));
        std::fs::rename(partition.join("0"), partition.join("0.1-1-1")).unwrap();
        proposal("2-2-2", &state("never", 1));
        let look = DirRegistry::open_read_only(dir.path());
        assert_eq!(
            look.partition_state("t", 0).unwrap(),
            Some((state("dead", 1), 1))
        );
        assert_eq!(names(&partition).len(), 3, "a look changes nothing");
        assert!(!reg.set_partition_state("t", 0, &state("b2", 1), 0).unwrap());
        assert_eq!(names(&partition), ["1"], "finished, and the debris removed");
        assert!(reg.set_partition_state("t", 0, &state("b2", 2), 1).unwrap());
    }

    #[test]
    fn a_taken_version_whose_proposal_is_lost_is_an_error_naming_it() {
        let (dir, reg) = placed();
        assert!(reg.create_partition_state("t", 0, &state("b1", 0)).unwrap());
        let partition = dir.path().join("states/t-0");
        std::fs::rename(partition.join("0"), partition.join("0.1-1-1")).unwrap();
        for err in [
            reg.partition_state("t", 0).unwrap_err(),
            reg.set_partition_state("t", 0, &state("b2", 1), 1)
                .unwrap_err(),
        ] {
            assert!(matches!(err, Error::Corrupt { .. }), "{err}");
            let err = err.to_string();
            assert!(
                err.contains("t-0/0.1-1-1") && err.contains("missing"),
                "{err}"
            );
        }
        assert_eq!(names(&partition), ["0.1-1-1"], "nothing is removed");
    }

    #[test]
    fn a_file_that_is_not_a_state_is_an_error_naming_it() {
        let (dir, reg) = placed();
        assert!(reg.create_partition_state("t", 0, &state("b1", 0)).unwrap());
        let partition = dir.path().join("states/t-0");
        for (name, bytes) in [
            ("junk", &b"{}"[..]),
            ("01", b""),
            ("0.x", b""),
            (".x.new", b""),
        ] {
            std::fs::write(partition.join(name), bytes).unwrap();
            let err = reg.partition_state("t", 0).unwrap_err().to_string();
            assert!(err.contains(&format!("t-0/{name}")), "{name}: {err}");
            let err = reg.set_partition_state("t", 0, &state("b1", 1), 0);
            assert!(err.is_err(), "{name}");
            std::fs::remove_file(partition.join(name)).unwrap();
        }
        for bytes in [
            &b""[..],
            b"{\"leader\": 1}",
            b"{\"leader\": \"a/b\", \"leader_epoch\": 0, \"isr\": []}",
        ] {
            std::fs::write(partition.join("0"), bytes).unwrap();
            let err = reg.partition_state("t", 0).unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{err}");
            assert!(err.to_string().contains("t-0/0"), "{err}");
        }
        std::fs::write(partition.join("0"), vec![b' '; STATE_BYTES_MAX + 10]).unwrap();
        let err = reg.partition_state("t", 0).unwrap_err().to_string();
        assert!(err.contains("over 65536 bytes"), "{err}");
    }
}
