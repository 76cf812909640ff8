//! Committed offsets in a registry directory, kept in a directory named by
//! the claim generation that may write them, and moved by each new claim.
//!
//! ```text
//! offsets/<group>/<topic>-<p>/<generation>/offsets.log  --> a journal (see `journal`)
//! offsets/<group>/<topic>-<p>/<generation>/offset       --> "klog-offset 1\n<offset>\n" (the layout before journals)
//! ```
//!
//! A claim of generation `n`, once its owner file is linked, *moves* the
//! partition's offsets to itself: appends a seal of generation `n` to the
//! highest generation's journal, renames that directory to `<n>`
//! (creating `<n>/` when there is none) and fsyncs its parent, then
//! starts `<n>/offsets.log` afresh with an adopt record that carries the
//! offset over (a rewrite: fsynced, renamed into place, `<n>/` fsynced).
//! A commit by the claim of generation `g` checks its fence (the claim is
//! still the current one and its lease has not run out, renewing it),
//! appends a record to `<g>/offsets.log`, reads back that no seal came
//! before it, and looks that the journal is still at that name: only then
//! is the commit acknowledged, and every later claim reads it. A write of
//! an earlier claim after the seal either finds no directory (and fails),
//! or lands after the seal, where a record of a lower generation says
//! nothing and its writer is told it was fenced, or lands in a journal
//! already replaced, where nobody reads it. So a member stopped anywhere in a commit (SIGSTOP,
//! stuck I/O), between its fence and its write included, can never make
//! an offset seen once its partition was taken over, however high it is;
//! and nothing is locked across a step that can stall, so a stuck member
//! stops nobody: its partitions are taken over when its lease runs out,
//! and the others' partitions are never touched.
//!
//! The offset moves with its directory, so a reader never sees it go
//! back, and a commit acknowledged before the move is carried with it (it
//! passed its fence before the claim was taken): the new owner, which
//! reads the committed offset after the move, resumes from it, never past
//! a record it was not given.
//!
//! Appends are not fsynced one by one: the registry's syncer fsyncs them
//! within `sync::INTERVAL` (see `sync` for what a power cut can lose),
//! and the owner rewrites its journal when it grows past
//! `journal::COMPACT_AT`.
//!
//! A reader takes the journal of the highest generation's directory
//! (none there: nothing committed yet). A directory below the highest is
//! debris of a claim that lost a race, removed by the next claim with the
//! temporary files of earlier owners.
//!
//! ZooKeeper needs none of this: there a commit is one `multi` that checks
//! the owner znode's version (the generation) and sets the offset znode.

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::entry::read_small;
use super::journal::{self, Appended, Kind, Record, COMPACT_AT, JOURNAL};
use super::owner::generations;
use super::sync::Syncer;
use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{RealFs, Vfs};

/// Name of the offset file in a generation's directory, in the layout
/// before journals (read, and replaced by a journal at the next claim).
const OFFSET_FILE: &str = "offset";
/// How many times a reader or a claim looks again when a claim moved the
/// directory it was about to use (each retry means a new claim: a bound
/// against a storm, never reached in practice).
const MOVED_RETRIES_MAX: u32 = 100;

/// The generations of the directories in the partition's offsets
/// directory `dir`, ascending; a file there is the layout before claim
/// generations, an error that names it.
fn generation_dirs(dir: &Path) -> Result<Vec<u64>> {
    generations(dir).map_err(|e| match e {
        Error::Io { source, .. } if source.kind() == ErrorKind::NotADirectory => Error::Corrupt {
            path: dir.to_path_buf(),
            position: 0,
            reason: format!(
                "not a committed offset directory: a file of the registry layout before claim \
                 generations (its offset belongs in {}/0/{OFFSET_FILE})",
                dir.display()
            ),
        },
        e => e,
    })
}

/// The highest generation holding the partition's offsets in `dir`.
pub(super) fn top(dir: &Path) -> Result<Option<u64>> {
    Ok(generation_dirs(dir)?.last().copied())
}

/// The committed offset in the partition's offsets directory `dir`, if
/// any.
pub(super) fn read(dir: &Path) -> Result<Option<u64>> {
    for _ in 0..MOVED_RETRIES_MAX {
        let Some(top) = top(dir)? else {
            return Ok(None);
        };
        let generation_dir = dir.join(top.to_string());
        match read_in(&generation_dir)? {
            Some(offset) => return Ok(offset),
            // Still there: nothing committed yet. Gone: moved by a claim
            // since the listing; look again.
            None if generation_dir.is_dir() => return Ok(None),
            None => {}
        }
    }
    Err(moved_too_often(dir))
}

/// The committed offset in a generation's directory: its journal's, or
/// else its offset file's (the layout before journals); `None` when it
/// has neither.
fn read_in(generation_dir: &Path) -> Result<Option<Option<u64>>> {
    if let Some(state) = journal::read(&generation_dir.join(JOURNAL))? {
        return Ok(Some(state.offset));
    }
    let path = generation_dir.join(OFFSET_FILE);
    match File::open(&path) {
        Ok(file) => {
            let bytes = read_small(&file).ok_or_else(|| Error::Vanished {
                what: path.display().to_string(),
            })?;
            parse(path, &bytes).map(|o| Some(Some(o)))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", &path, e)),
    }
}

fn moved_too_often(dir: &Path) -> Error {
    Error::Vanished {
        what: format!(
            "the committed offset in {} (moved by claim after claim)",
            dir.display()
        ),
    }
}

fn parse(path: PathBuf, bytes: &[u8]) -> Result<u64> {
    crate::coord::registry::parse_offset(path, bytes)
}

/// Stores `offset` as the committed offset of the claim of `generation`
/// in the partition's offsets directory `dir`, if `fence` passes just
/// before: a record appended to its journal, fsynced by `syncer` soon
/// after (see `sync`). `Ok(false)`: the generation's directory is gone,
/// moved by a later claim, and the commit is not acknowledged.
pub(super) fn write(
    dir: &Path,
    generation: u64,
    offset: u64,
    fence: impl FnOnce() -> Result<()>,
    syncer: &Arc<Syncer>,
) -> Result<bool> {
    let generation_dir = dir.join(generation.to_string());
    let path = generation_dir.join(JOURNAL);
    let record = Record {
        kind: Kind::Commit,
        generation,
        offset: Some(offset),
    };
    if offset > i64::MAX as u64 {
        return Err(Error::Config(format!(
            "offset {offset} is past the largest a log holds ({})",
            i64::MAX
        )));
    }
    fence()?;
    #[cfg(test)]
    super::stall::at_fence(&generation_dir);
    let held = journal::hold(&path);
    let _one = held.lock().unwrap_or_else(|e| e.into_inner());
    if syncer.take_failed(&path) {
        return rewrite_as_read_then(&path, &record, syncer);
    }
    match journal::append(&path, &record)? {
        Appended::Counts(len) if len > COMPACT_AT => {
            // Rewritten durably, or moved (and read by the claim that
            // did, after its seal).
            let state = journal::read(&path)?;
            match state {
                Some(state) if state.generation == generation && state.offset.is_some() => {
                    let kept = Record {
                        offset: state.offset,
                        ..record
                    };
                    rewrite_or_fail(&path, &kept, syncer).map(|_| true)
                }
                _ => Ok(true),
            }
        }
        Appended::Counts(_) => {
            syncer.mark(&path);
            Ok(true)
        }
        Appended::Fenced => Ok(false),
        // No journal in a directory of the layout before journals: its
        // first commit makes one.
        Appended::Gone if generation_dir.join(OFFSET_FILE).exists() => {
            rewrite_or_fail(&path, &record, syncer)
        }
        Appended::Gone => Ok(false),
    }
}

/// After an fsync of the journal at `path` failed: appends `record` (a
/// seal before it fences it as any append is) and rewrites the journal
/// durably as what it says then, which keeps a claim's seal's effect.
fn rewrite_as_read_then(path: &Path, record: &Record, syncer: &Syncer) -> Result<bool> {
    let counts = match journal::append(path, record)? {
        Appended::Counts(_) => true,
        Appended::Fenced | Appended::Gone => false,
    };
    let Some(state) = journal::read(path)? else {
        return Ok(false);
    };
    let kept = Record {
        kind: if state.offset.is_some() {
            Kind::Commit
        } else {
            Kind::Removed
        },
        generation: state.generation,
        offset: state.offset,
    };
    Ok(rewrite_or_fail(path, &kept, syncer)? && counts)
}

/// Rewrites the journal at `path` as `record`, durably, noting a failure
/// for the next commit to try again.
fn rewrite_or_fail(path: &Path, record: &Record, syncer: &Syncer) -> Result<bool> {
    journal::rewrite(path, record).inspect_err(|_| syncer.fail(path))
}

/// Moves the partition's committed offset in `dir` to the claim of
/// `generation`, just taken: `false` when a later claim has it already
/// (this one was superseded before it could). An offset that does not
/// parse is an error that names its file, unless `replace_damaged` (the
/// claim of a reset or a deletion, which replaces it): then it is carried
/// over as none.
pub(super) fn adopt(dir: &Path, generation: u64, replace_damaged: bool) -> Result<bool> {
    std::fs::create_dir_all(dir).ctx("create", dir)?;
    let target = dir.join(generation.to_string());
    for _ in 0..MOVED_RETRIES_MAX {
        let top = match top(dir)? {
            Some(top) => top,
            // Nothing yet. A listing may miss a directory renamed at that
            // instant: look once more before starting afresh.
            None if top(dir)?.is_none() => {
                match std::fs::create_dir(&target) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(Error::io("create", &target, e)),
                }
                sync_dirs(&[dir, dir.parent().unwrap_or(dir)])?;
                return carry(&target, generation, replace_damaged);
            }
            None => continue,
        };
        if top > generation {
            return Ok(false);
        }
        if top < generation {
            // Sealed first: a write of an earlier claim that lands after
            // the seal, through a journal it holds open, says nothing, and
            // its writer learns it was fenced.
            let sealed = journal::seal(&dir.join(top.to_string()).join(JOURNAL), generation)?;
            match std::fs::rename(dir.join(top.to_string()), &target) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io("rename", dir.join(top.to_string()), e)),
            }
            journal::reseal(&target.join(JOURNAL), sealed, generation)?;
        }
        // The directory's contents (an offset renamed into it just before
        // the move) and its new name.
        sync_dirs(&[&target, dir])?;
        if !carry(&target, generation, replace_damaged)? {
            return Ok(false);
        }
        remove_debris(dir, generation);
        return Ok(true);
    }
    Err(moved_too_often(dir))
}

/// Starts the journal of the claim of `generation` in its directory,
/// carrying over the offset found there (records of earlier claims, or an
/// offset file of the layout before journals): `false` when a later claim
/// moved the directory meanwhile.
fn carry(generation_dir: &Path, generation: u64, replace_damaged: bool) -> Result<bool> {
    let offset = match read_in(generation_dir) {
        Ok(offset) => offset.flatten(),
        Err(Error::Corrupt { .. }) if replace_damaged => None,
        Err(e) => return Err(e),
    };
    let adopt = Record {
        kind: Kind::Adopt,
        generation,
        offset,
    };
    if !journal::rewrite(&generation_dir.join(JOURNAL), &adopt)? {
        return Ok(false);
    }
    let legacy = generation_dir.join(OFFSET_FILE);
    match std::fs::remove_file(&legacy) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(Error::io("remove", &legacy, e)),
        _ => Ok(true),
    }
}

/// Removes the committed offset in `dir` of the claim of `generation`,
/// which has adopted it, durably: whether there was one.
pub(super) fn remove(dir: &Path, generation: u64) -> Result<bool> {
    let generation_dir = dir.join(generation.to_string());
    if read_in(&generation_dir)?.flatten().is_none() {
        return Ok(false);
    }
    let removed = Record {
        kind: Kind::Removed,
        generation,
        offset: None,
    };
    if journal::rewrite(&generation_dir.join(JOURNAL), &removed)? {
        return Ok(true);
    }
    Err(Error::Vanished {
        what: format!(
            "the committed offset in {} (taken by a claim meanwhile)",
            dir.display()
        ),
    })
}

fn sync_dirs(dirs: &[&Path]) -> Result<()> {
    for d in dirs {
        RealFs.sync_dir(d).ctx("fsync directory", d)?;
    }
    Ok(())
}

/// Removes the directories of generations below `generation` (claims that
/// lost a race) and the temporary files of earlier owners' commits in
/// `<generation>/`, which can never be renamed into place any more.
fn remove_debris(dir: &Path, generation: u64) {
    for g in generations(dir).unwrap_or_default() {
        if g < generation {
            let _ = std::fs::remove_dir_all(dir.join(g.to_string()));
        }
    }
    let own = dir.join(generation.to_string());
    let Ok(entries) = std::fs::read_dir(&own) else {
        return;
    };
    for name in entries.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
        if name.starts_with('.') && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(own.join(name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    fn commit(dir: &Path, generation: u64, offset: u64) -> Result<bool> {
        write(dir, generation, offset, || Ok(()), &Arc::default())
    }

    #[test]
    fn each_claim_moves_the_offset_and_an_earlier_claim_can_neither_write_nor_take_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        assert_eq!(read(&dir).unwrap(), None);
        assert!(adopt(&dir, 1, false).unwrap());
        assert_eq!(read(&dir).unwrap(), None, "claimed, nothing committed");
        assert!(commit(&dir, 1, 10).unwrap());
        // Generation 3 takes over: the offset moves with its directory.
        assert!(adopt(&dir, 3, false).unwrap());
        assert_eq!(names(&dir), ["3"]);
        assert_eq!(read(&dir).unwrap(), Some(10));
        // Generation 1 writes late, higher: gone, and nothing is seen.
        assert!(!commit(&dir, 1, 99).unwrap());
        // Generation 2, superseded before it could move it, gets nothing.
        assert!(!adopt(&dir, 2, false).unwrap());
        assert_eq!(read(&dir).unwrap(), Some(10));
        // A refused fence writes nothing and leaves nothing.
        let refused = write(
            &dir,
            3,
            11,
            || Err(Error::Config("fenced".into())),
            &Arc::default(),
        );
        assert!(refused.is_err());
        assert_eq!(names(&dir.join("3")), [JOURNAL]);
        assert_eq!(read(&dir).unwrap(), Some(10));
        assert!(commit(&dir, 3, 12).unwrap());
        assert_eq!(read(&dir).unwrap(), Some(12));
        assert!(remove(&dir, 3).unwrap());
        assert_eq!(read(&dir).unwrap(), None);
        assert!(!remove(&dir, 3).unwrap(), "nothing left to remove");
    }

    #[test]
    fn a_late_write_through_a_journal_held_open_across_the_move_is_never_seen() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        assert!(adopt(&dir, 1, false).unwrap());
        assert!(commit(&dir, 1, 10).unwrap());
        // Generation 1 opens its journal, passes its fence, and stops.
        let mut held = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("1").join(JOURNAL))
            .unwrap();
        assert!(adopt(&dir, 2, false).unwrap());
        assert!(commit(&dir, 2, 11).unwrap());
        let late = Record {
            kind: Kind::Commit,
            generation: 1,
            offset: Some(500),
        };
        std::io::Write::write_all(&mut held, &late.encode()).unwrap();
        assert_eq!(read(&dir).unwrap(), Some(11));
        // The next claim carries 11, never 500.
        assert!(adopt(&dir, 3, false).unwrap());
        assert_eq!(read(&dir).unwrap(), Some(11));
    }

    #[test]
    fn the_owner_rewrites_a_long_journal_and_keeps_its_last_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        assert!(adopt(&dir, 1, false).unwrap());
        let path = dir.join("1").join(JOURNAL);
        let mut longest = 0;
        for offset in 1..=3000 {
            assert!(commit(&dir, 1, offset).unwrap());
            longest = longest.max(std::fs::metadata(&path).unwrap().len());
        }
        assert!(longest <= COMPACT_AT + journal::RECORD_LEN as u64);
        assert!(std::fs::metadata(&path).unwrap().len() < longest);
        assert_eq!(read(&dir).unwrap(), Some(3000));
        assert_eq!(names(&dir.join("1")), [JOURNAL], "no temporary file left");
    }

    #[test]
    fn the_layout_before_journals_is_read_and_carried_into_one() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        std::fs::create_dir_all(dir.join("4")).unwrap();
        std::fs::write(dir.join("4").join(OFFSET_FILE), "klog-offset 1\n7\n").unwrap();
        assert_eq!(read(&dir).unwrap(), Some(7));
        // A commit of the claim that holds it makes a journal.
        assert!(commit(&dir, 4, 8).unwrap());
        assert_eq!(read(&dir).unwrap(), Some(8));
        std::fs::write(dir.join("4").join(OFFSET_FILE), "klog-offset 1\n9\n").unwrap();
        std::fs::remove_file(dir.join("4").join(JOURNAL)).unwrap();
        assert!(adopt(&dir, 5, false).unwrap());
        assert_eq!(names(&dir.join("5")), [JOURNAL]);
        assert_eq!(read(&dir).unwrap(), Some(9));
    }

    #[test]
    fn debris_of_lost_races_is_never_read_and_the_next_claim_removes_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        assert!(adopt(&dir, 4, false).unwrap());
        assert!(commit(&dir, 4, 7).unwrap());
        // A lower generation's directory, with an offset in it, and an
        // earlier owner's temporary file: neither counts.
        std::fs::create_dir_all(dir.join("2")).unwrap();
        std::fs::write(dir.join("2/offset"), "klog-offset 1\n99\n").unwrap();
        std::fs::write(dir.join("4/.offsets.log.x.tmp"), "klog-offsets v1\n").unwrap();
        assert_eq!(read(&dir).unwrap(), Some(7));
        assert!(adopt(&dir, 5, false).unwrap());
        assert_eq!(names(&dir), ["5"]);
        assert_eq!(names(&dir.join("5")), [JOURNAL]);
        assert_eq!(read(&dir).unwrap(), Some(7));
    }
}
