//! Committed offsets in a registry directory, kept in a directory named by
//! the claim generation that may write them, and moved by each new claim.
//!
//! ```text
//! offsets/<group>/<topic>-<p>/<generation>/offset  --> "klog-offset 1\n<offset>\n"
//! ```
//!
//! A commit by the claim of generation `g` writes a temporary file in
//! `<g>/` and fsyncs it, checks its fence (the claim is still the current
//! one and its lease has not run out, renewing it), renames the file to
//! `<g>/offset`, and fsyncs `<g>/`. A claim of generation `n`, once its
//! owner file is linked, *moves* the partition's offsets to itself:
//! renames the directory of the highest generation to `<n>` (creating
//! `<n>/` when there is none), then fsyncs it and its parent. From that
//! rename on, every write of an earlier claim names a directory that no
//! longer exists and fails. So a member stopped anywhere in a commit
//! (SIGSTOP, stuck I/O), between its fence and its write included, can
//! never make an offset seen once its partition was taken over, however
//! high it is; and nothing is locked across a step that can stall, so a
//! stuck member stops nobody: its partitions are taken over when its
//! lease runs out, and the others' partitions are never touched.
//!
//! The offset moves with its directory and is never copied, so a reader
//! never sees it go back, and a commit that landed before the move is
//! carried with it (it passed its fence before the claim was taken): the
//! new owner, which reads the committed offset after the move, resumes
//! from it, never past a record it was not given.
//!
//! A reader takes the `offset` of the highest generation's directory
//! (none there: nothing committed yet). A directory below the highest is
//! debris of a claim that lost a race, empty, removed by the next claim
//! with the temporary files of earlier owners.
//!
//! ZooKeeper needs none of this: there a commit is one `multi` that checks
//! the owner znode's version (the generation) and sets the offset znode.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use super::entry::{incarnation, read_small};
use super::owner::generations;
use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{RealFs, Vfs};

/// Name of the offset file in a generation's directory.
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
        let path = generation_dir.join(OFFSET_FILE);
        match File::open(&path) {
            Ok(file) => {
                let bytes = read_small(&file).ok_or_else(|| Error::Vanished {
                    what: path.display().to_string(),
                })?;
                return parse(path, &bytes).map(Some);
            }
            // Still there: nothing committed yet. Gone: moved by a claim
            // since the listing; look again.
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if generation_dir.is_dir() {
                    return Ok(None);
                }
            }
            Err(e) => return Err(Error::io("read", &path, e)),
        }
    }
    Err(moved_too_often(dir))
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
/// before the write. `Ok(false)`: the generation's directory is gone,
/// moved by a later claim, and nothing was stored.
pub(super) fn write(
    dir: &Path,
    generation: u64,
    offset: u64,
    fence: impl FnOnce() -> Result<()>,
) -> Result<bool> {
    let generation_dir = dir.join(generation.to_string());
    let tmp = generation_dir.join(format!(".{OFFSET_FILE}.{}.tmp", incarnation()));
    // The slow part, fsync, before the fence is checked.
    let written = File::create_new(&tmp).and_then(|mut f| {
        f.write_all(&crate::coord::registry::encode_offset(offset))?;
        f.sync_all()
    });
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io("write", &tmp, e));
        }
    }
    if let Err(e) = fence() {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    #[cfg(test)]
    super::stall::at_fence(&generation_dir);
    match std::fs::rename(&tmp, generation_dir.join(OFFSET_FILE)) {
        Ok(()) => {}
        // Moved since the fence: the temporary file went with it, and the
        // next claim removes it.
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io("rename", &tmp, e));
        }
    }
    match RealFs.sync_dir(&generation_dir) {
        // Moved after the write, which went with it: the claim that moved
        // it fsyncs it.
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(true),
        synced => synced
            .ctx("fsync directory", &generation_dir)
            .map(|()| true),
    }
}

/// Moves the partition's committed offset in `dir` to the claim of
/// `generation`, just taken: `false` when a later claim has it already
/// (this one was superseded before it could).
pub(super) fn adopt(dir: &Path, generation: u64) -> Result<bool> {
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
                return Ok(true);
            }
            None => continue,
        };
        if top > generation {
            return Ok(false);
        }
        if top < generation {
            match std::fs::rename(dir.join(top.to_string()), &target) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io("rename", dir.join(top.to_string()), e)),
            }
        }
        // The directory's contents (an offset renamed into it just before
        // the move) and its new name.
        sync_dirs(&[&target, dir])?;
        remove_debris(dir, generation);
        return Ok(true);
    }
    Err(moved_too_often(dir))
}

/// Removes the committed offset in `dir` of the claim of `generation`,
/// which has adopted it: whether there was one.
pub(super) fn remove(dir: &Path, generation: u64) -> Result<bool> {
    let generation_dir = dir.join(generation.to_string());
    let file = generation_dir.join(OFFSET_FILE);
    match std::fs::remove_file(&file) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io("remove", &file, e)),
    }
    sync_dirs(&[&generation_dir])?;
    Ok(true)
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

    #[test]
    fn each_claim_moves_the_offset_and_an_earlier_claim_can_neither_write_nor_take_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        assert_eq!(read(&dir).unwrap(), None);
        assert!(adopt(&dir, 1).unwrap());
        assert_eq!(read(&dir).unwrap(), None, "claimed, nothing committed");
        assert!(write(&dir, 1, 10, || Ok(())).unwrap());
        // Generation 3 takes over: the offset moves, never copied.
        assert!(adopt(&dir, 3).unwrap());
        assert_eq!(names(&dir), ["3"]);
        assert_eq!(read(&dir).unwrap(), Some(10));
        // Generation 1 writes late, higher: gone, and nothing is seen.
        assert!(!write(&dir, 1, 99, || Ok(())).unwrap());
        // Generation 2, superseded before it could move it, gets nothing.
        assert!(!adopt(&dir, 2).unwrap());
        assert_eq!(read(&dir).unwrap(), Some(10));
        // A refused fence writes nothing and leaves nothing.
        let refused = write(&dir, 3, 11, || Err(Error::Config("fenced".into())));
        assert!(refused.is_err());
        assert_eq!(names(&dir.join("3")), ["offset"]);
        assert!(write(&dir, 3, 12, || Ok(())).unwrap());
        assert_eq!(read(&dir).unwrap(), Some(12));
    }

    #[test]
    fn debris_of_lost_races_is_never_read_and_the_next_claim_removes_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        assert!(adopt(&dir, 4).unwrap());
        assert!(write(&dir, 4, 7, || Ok(())).unwrap());
        // A lower generation's directory, with an offset in it, and an
        // earlier owner's temporary file: neither counts.
        std::fs::create_dir_all(dir.join("2")).unwrap();
        std::fs::write(dir.join("2/offset"), "klog-offset 1\n99\n").unwrap();
        std::fs::write(dir.join("4/.offset.x.tmp"), "klog-offset 1\n98\n").unwrap();
        assert_eq!(read(&dir).unwrap(), Some(7));
        assert!(adopt(&dir, 5).unwrap());
        assert_eq!(names(&dir), ["5"]);
        assert_eq!(names(&dir.join("5")), ["offset"]);
        assert_eq!(read(&dir).unwrap(), Some(7));
    }
}
