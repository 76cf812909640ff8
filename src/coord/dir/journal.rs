//! A partition's committed offsets in a registry directory: a journal the
//! owner appends a record to per commit, with no fsync on the way (an
//! fsync within [`super::sync::INTERVAL`], by the registry's syncer), so
//! that a member commits thousands of times a second.
//!
//! ```text
//! offsets.log := header record*
//! header      := "klog-offsets v1\n"                            16 bytes
//! record      := crc:u32 kind:u32 generation:u64 offset:u64     24 bytes, big-endian
//!   crc         CRC-32 (IEEE, as crc32fast) of the record's other 20 bytes
//!   kind        1 commit: `offset` is committed
//!               2 adopt: the first record of the claim of `generation`,
//!                 carrying the offset over (u64::MAX: none)
//!               3 removed: the group has no offset for the partition
//!               4 seal: the claim of `generation` takes the journal over
//!                 (offset u64::MAX)
//!   generation  the claim generation that wrote it
//! ```
//!
//! The committed offset is what the records say, in file order, keeping
//! only those of the highest generation seen so far: a record of a lower
//! generation after a higher one's (a seal's) is a late write of a claim
//! already taken over (a member stopped between its fence and its write,
//! holding the file open while the directory moved), and is never seen.
//! A writer reads back what comes before its record and counts its write
//! only when no later generation's record does; a claim seals (durably)
//! the very file it then reads; so a write is acknowledged exactly when
//! the next claim adopts it. A claim's own writes and rewrites of its
//! journal run one at a time in its process ([`hold`]), so that a rewrite
//! never replaces a record it did not read. The first record (always written
//! by a rewrite, fsynced before the journal took its name) must check: a
//! journal whose first record does not is damaged, an error that names
//! it, never "nothing committed".
//!
//! A record that does not check (a write torn by a power cut, or the
//! zeros of blocks never written back) is skipped, and the records after
//! it are found again byte by byte: a power cut keeps some of the writes
//! not yet fsynced, in any order, and each record kept says an offset
//! committed by then, so what is read is a commit that was acknowledged,
//! never a mix. A new claim (or the owner, when the journal passes
//! [`COMPACT_AT`] bytes) rewrites the journal as its header and one
//! record: a temporary file, fsynced, renamed over it, its directory
//! fsynced.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::entry::incarnation;
use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{RealFs, Vfs};

/// The journal's name in a claim generation's directory.
pub(super) const JOURNAL: &str = "offsets.log";
/// Its first bytes.
pub(super) const HEADER: &[u8; 16] = b"klog-offsets v1\n";
/// A record's length.
pub(super) const RECORD_LEN: usize = 24;
/// The owner rewrites the journal when a commit leaves it longer than
/// this (about 1,360 commits): reading it stays cheap, and the rewrite's
/// two fsyncs are spread over that many commits.
pub(super) const COMPACT_AT: u64 = 32 * 1024;
/// A journal longer than this is not read (it is never let grow past
/// [`COMPACT_AT`] and a few late writes).
const READ_MAX: u64 = 16 << 20;
/// The `offset` of an adopt record that carries no offset.
const NONE: u64 = u64::MAX;

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// The offset committed.
    Commit = 1,
    /// A claim's first record, carrying the offset (if any) over.
    Adopt = 2,
    /// No offset any more.
    Removed = 3,
    /// A claim of `generation` is taking the journal over: records of
    /// lower generations after it are late writes, and say nothing.
    Seal = 4,
}

/// One record of a journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Record {
    pub kind: Kind,
    pub generation: u64,
    pub offset: Option<u64>,
}

impl Record {
    pub(super) fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[4..8].copy_from_slice(&(self.kind as u32).to_be_bytes());
        b[8..16].copy_from_slice(&self.generation.to_be_bytes());
        let offset = match (self.kind, self.offset) {
            (Kind::Removed | Kind::Seal, _) | (_, None) => NONE,
            (_, Some(o)) => o,
        };
        b[16..24].copy_from_slice(&offset.to_be_bytes());
        let crc = crc32fast::hash(&b[4..]);
        b[..4].copy_from_slice(&crc.to_be_bytes());
        b
    }

    /// The record in `b`, if it checks.
    fn decode(b: &[u8]) -> Option<Record> {
        let b: &[u8; RECORD_LEN] = b.get(..RECORD_LEN)?.try_into().ok()?;
        let word = |at: usize| u64::from_be_bytes(b[at..at + 8].try_into().unwrap_or_default());
        if u32::from_be_bytes([b[0], b[1], b[2], b[3]]) != crc32fast::hash(&b[4..]) {
            return None;
        }
        let kind = match u32::from_be_bytes([b[4], b[5], b[6], b[7]]) {
            1 => Kind::Commit,
            2 => Kind::Adopt,
            3 => Kind::Removed,
            4 => Kind::Seal,
            _ => return None,
        };
        let offset = match (kind, word(16)) {
            (Kind::Removed | Kind::Seal, _) | (Kind::Adopt, NONE) => None,
            (_, o) => Some(o),
        };
        Some(Record {
            kind,
            generation: word(8),
            offset,
        })
    }
}

/// A journal, read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct State {
    /// The highest generation of its records (0: none).
    pub generation: u64,
    /// The committed offset.
    pub offset: Option<u64>,
    /// Bytes that were no record (torn or never written back).
    pub skipped: u64,
}

impl State {
    /// Applies `r`: a record of a lower generation than one before it is
    /// a late write, and says nothing.
    fn apply(&mut self, r: Record) {
        if r.generation >= self.generation {
            self.generation = r.generation;
            if r.kind != Kind::Seal {
                self.offset = r.offset;
            }
        }
    }
}

/// Reads the journal's bytes; `path` names it in an error.
pub(super) fn fold(path: &Path, bytes: &[u8]) -> Result<State> {
    if bytes.get(..HEADER.len()) != Some(&HEADER[..]) {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            position: 0,
            reason: format!(
                "not a committed offsets journal (no {:?} header)",
                String::from_utf8_lossy(HEADER)
            ),
        });
    }
    // The first record was fsynced before the journal took its name (a
    // rewrite): no power cut tears it, and without it nothing says what
    // the journal holds.
    if Record::decode(&bytes[HEADER.len()..]).is_none() {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            position: HEADER.len() as u64,
            reason: "a committed offsets journal whose first record does not check".into(),
        });
    }
    let mut state = State::default();
    let mut at = HEADER.len();
    while at + RECORD_LEN <= bytes.len() {
        match Record::decode(&bytes[at..]) {
            Some(r) => {
                state.apply(r);
                at += RECORD_LEN;
            }
            None => {
                state.skipped += 1;
                at += 1;
            }
        }
    }
    state.skipped += (bytes.len() - at) as u64;
    Ok(state)
}

/// Reads the journal at `path`: `None` when there is none.
pub(super) fn read(path: &Path) -> Result<Option<State>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let mut bytes = Vec::new();
    file.take(READ_MAX + 1)
        .read_to_end(&mut bytes)
        .ctx("read", path)?;
    if bytes.len() as u64 > READ_MAX {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            position: READ_MAX,
            reason: format!("a committed offsets journal longer than {READ_MAX} bytes"),
        });
    }
    fold(path, &bytes).map(Some)
}

/// What became of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Appended {
    /// The record counts (no later generation's seal comes before it in
    /// the journal it went to): the journal is this long now.
    Counts(u64),
    /// A record of a later generation (a claim's seal) came first: the
    /// record says nothing.
    Fenced,
    /// No journal at that name (its directory was moved by a later claim,
    /// or there is none yet): nothing was written.
    Gone,
}

/// The lock of the journal at `path` in this process: a claim's commits
/// (and its rewrites of the journal) run one at a time, so that a rewrite
/// never replaces a record it did not read; other journals are never
/// held up. A claim's writers are all in the process that holds it.
pub(super) fn hold(path: &Path) -> Arc<Mutex<()>> {
    static LOCKS: Mutex<BTreeMap<PathBuf, Weak<Mutex<()>>>> = Mutex::new(BTreeMap::new());
    let mut locks = LOCKS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(held) = locks.get(path).and_then(Weak::upgrade) {
        return held;
    }
    if locks.len() >= 1024 {
        locks.retain(|_, held| held.strong_count() > 0);
    }
    let held = Arc::new(Mutex::new(()));
    locks.insert(path.to_path_buf(), Arc::downgrade(&held));
    held
}

/// Appends `record` to the journal at `path` (under its [`hold`]), and
/// says whether it counts: only when, once written, no record of a later
/// generation comes before it. A claim seals the journal it reads before
/// it reads it, so a record that counts is one the next claim adopts,
/// wherever the journal has moved meanwhile, and one that does not is
/// one it ignores.
pub(super) fn append(path: &Path, record: &Record) -> Result<Appended> {
    use std::io::Seek;
    let mut file = match OpenOptions::new().read(true).append(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Appended::Gone),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    file.write_all(&record.encode()).ctx("append to", path)?;
    #[cfg(test)]
    super::stall::at_fence(&path.with_extension("written"));
    let end = file.stream_position().ctx("look at", path)?;
    if sealed_before(&file, path, end.saturating_sub(RECORD_LEN as u64), record)? {
        return Ok(Appended::Fenced);
    }
    Ok(Appended::Counts(end))
}

/// Whether a record of a later generation than `record`'s comes before
/// byte `upto` of the journal `file`.
fn sealed_before(file: &File, path: &Path, upto: u64, record: &Record) -> Result<bool> {
    use std::os::unix::fs::FileExt;
    let len = upto.min(READ_MAX) as usize;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, 0).ctx("read", path)?;
    let state = fold(path, &bytes)?;
    Ok(state.generation > record.generation)
}

/// The file a journal is: its device and inode.
pub(super) type Identity = (u64, u64);

/// Seals the journal at `path` for the claim of `generation`, durably,
/// before the claim moves the journal's directory and reads it: a write
/// of an earlier claim that lands after the seal says nothing, and its
/// writer learns it was fenced. Which file was sealed (`None`: no journal
/// there, none needed).
pub(super) fn seal(path: &Path, generation: u64) -> Result<Option<Identity>> {
    use std::os::unix::fs::MetadataExt;
    let seal = Record {
        kind: Kind::Seal,
        generation,
        offset: None,
    };
    let mut file = match OpenOptions::new().append(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    file.write_all(&seal.encode()).ctx("append to", path)?;
    file.sync_data().ctx("fsync", path)?;
    let meta = file.metadata().ctx("look at", path)?;
    Ok(Some((meta.dev(), meta.ino())))
}

/// After the claim of `generation` moved the journal it sealed (`sealed`)
/// to `path`: seals the journal there too when it is another file (the
/// owner's rewrite replaced the sealed one just before the move).
pub(super) fn reseal(path: &Path, sealed: Option<Identity>, generation: u64) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let now = match std::fs::metadata(path) {
        Ok(meta) => Some((meta.dev(), meta.ino())),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("look at", path, e)),
    };
    if now.is_some() && now != sealed {
        seal(path, generation)?;
    }
    Ok(())
}

/// Replaces the journal at `path` with its header and `record`, durably:
/// `false` when its directory is gone (moved by a later claim).
pub(super) fn rewrite(path: &Path, record: &Record) -> Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{JOURNAL}.{}.tmp", incarnation()));
    let written = File::create_new(&tmp).and_then(|mut f| {
        let mut bytes = HEADER.to_vec();
        bytes.extend_from_slice(&record.encode());
        f.write_all(&bytes)?;
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
    match std::fs::rename(&tmp, path) {
        Ok(()) => {}
        // Moved since: the temporary file went with it, and the next
        // claim removes it.
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io("rename", &tmp, e));
        }
    }
    match RealFs.sync_dir(dir) {
        // Moved after the rename, which went with it: the claim that
        // moved it fsyncs it.
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(true),
        synced => synced.ctx("fsync directory", dir).map(|()| true),
    }
}

/// Rewrites the journal at `path` durably as what it says now (its
/// highest generation's offset), after an fsync of it failed: nothing when
/// it is gone (moved by a claim that rewrote it).
pub(super) fn rewrite_as_read(path: &Path) -> Result<()> {
    let held = hold(path);
    let _one = held.lock().unwrap_or_else(|e| e.into_inner());
    let Some(state) = read(path)? else {
        return Ok(());
    };
    let record = Record {
        kind: match state.offset {
            Some(_) => Kind::Commit,
            None => Kind::Removed,
        },
        generation: state.generation,
        offset: state.offset,
    };
    rewrite(path, &record).map(|_| ())
}

/// Makes the records appended to the journal at `path` durable (a journal
/// gone, moved by a claim that rewrote it durably, needs nothing).
pub(super) fn sync(path: &Path) -> std::io::Result<()> {
    match File::open(path) {
        Ok(f) => f.sync_data(),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: Kind, generation: u64, offset: Option<u64>) -> Record {
        Record {
            kind,
            generation,
            offset,
        }
    }

    fn journal(records: &[Record]) -> Vec<u8> {
        let mut b = HEADER.to_vec();
        for r in records {
            b.extend_from_slice(&r.encode());
        }
        b
    }

    fn state(bytes: &[u8]) -> State {
        fold(Path::new("j"), bytes).unwrap()
    }

    #[test]
    fn records_round_trip_and_a_damaged_one_does_not_check() {
        for r in [
            rec(Kind::Commit, 7, Some(4_294_967_301)),
            rec(Kind::Adopt, 1, None),
            rec(Kind::Adopt, 2, Some(0)),
            rec(Kind::Removed, 3, None),
            rec(Kind::Seal, 4, None),
        ] {
            let b = r.encode();
            assert_eq!(Record::decode(&b), Some(r));
            for i in 0..RECORD_LEN {
                let mut bad = b;
                bad[i] ^= 0x10;
                assert_eq!(Record::decode(&bad), None, "byte {i} flipped");
            }
        }
        assert_eq!(Record::decode(&[0u8; RECORD_LEN]), None, "zeros");
    }

    #[test]
    fn the_last_record_of_the_highest_generation_holds() {
        let s = state(&journal(&[
            rec(Kind::Adopt, 1, None),
            rec(Kind::Commit, 1, Some(5)),
            rec(Kind::Commit, 1, Some(9)),
        ]));
        assert_eq!((s.generation, s.offset, s.skipped), (1, Some(9), 0));
        // Kafka stores what it is given, lower too.
        let s = state(&journal(&[
            rec(Kind::Commit, 1, Some(9)),
            rec(Kind::Commit, 1, Some(3)),
        ]));
        assert_eq!(s.offset, Some(3));
        // A late write of a claim taken over says nothing, however high.
        let s = state(&journal(&[
            rec(Kind::Commit, 1, Some(9)),
            rec(Kind::Adopt, 2, Some(9)),
            rec(Kind::Commit, 1, Some(500)),
            rec(Kind::Commit, 2, Some(12)),
            rec(Kind::Commit, 1, Some(600)),
        ]));
        assert_eq!((s.generation, s.offset), (2, Some(12)));
        let s = state(&journal(&[
            rec(Kind::Commit, 2, Some(12)),
            rec(Kind::Removed, 2, None),
        ]));
        assert_eq!(s.offset, None);
        // A seal moves the generation on and keeps the offset.
        let s = state(&journal(&[
            rec(Kind::Commit, 1, Some(9)),
            rec(Kind::Seal, 2, None),
            rec(Kind::Commit, 1, Some(500)),
        ]));
        assert_eq!((s.generation, s.offset), (2, Some(9)));
        // Without a first record that checks, nothing says what it holds.
        assert!(fold(Path::new("j"), HEADER).is_err());
        let mut damaged = journal(&[rec(Kind::Adopt, 1, Some(4))]);
        damaged[HEADER.len() + 20] ^= 1;
        assert!(fold(Path::new("j"), &damaged).is_err());
    }

    #[test]
    fn what_a_power_cut_leaves_reads_as_an_acknowledged_commit() {
        let records: Vec<Record> = (1..=6).map(|o| rec(Kind::Commit, 1, Some(o))).collect();
        let whole = journal(&records);
        // A torn last record: the one before it.
        let s = state(&whole[..whole.len() - 7]);
        assert_eq!((s.offset, s.skipped), (Some(5), 17));
        // A record never written back (zeros, or half of it) with later
        // ones kept: those are found again, byte by byte.
        for hole in [vec![0u8; RECORD_LEN], records[2].encode()[..11].to_vec()] {
            let at = HEADER.len() + 2 * RECORD_LEN;
            let mut bytes = whole[..at].to_vec();
            bytes.extend_from_slice(&hole);
            bytes.extend_from_slice(&whole[at + RECORD_LEN..]);
            let s = state(&bytes);
            assert_eq!((s.offset, s.skipped), (Some(6), hole.len() as u64));
        }
        // Only the first records kept.
        assert_eq!(state(&whole[..HEADER.len() + RECORD_LEN]).offset, Some(1));
    }

    #[test]
    fn a_file_without_the_header_is_an_error_that_names_it() {
        for bad in [&b""[..], b"klog-offset 1\n5\n", &[0u8; 40]] {
            let err = fold(Path::new("offsets/g/t-0/1/offsets.log"), bad).unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{err}");
            assert!(err.to_string().contains("t-0/1/offsets.log"), "{err}");
        }
    }

    #[test]
    fn append_rewrite_and_a_moved_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("1");
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join(JOURNAL);
        assert_eq!(
            append(&path, &rec(Kind::Commit, 1, Some(3))).unwrap(),
            Appended::Gone
        );
        assert!(rewrite(&path, &rec(Kind::Adopt, 1, None)).unwrap());
        let len = append(&path, &rec(Kind::Commit, 1, Some(3))).unwrap();
        assert_eq!(
            len,
            Appended::Counts((HEADER.len() + 2 * RECORD_LEN) as u64)
        );
        assert_eq!(read(&path).unwrap().unwrap().offset, Some(3));
        assert!(rewrite(&path, &rec(Kind::Adopt, 1, Some(3))).unwrap());
        assert_eq!(
            std::fs::read(&path).unwrap().len(),
            HEADER.len() + RECORD_LEN
        );
        sync(&path).unwrap();
        // Moved: neither an append nor a rewrite lands, nor leaves a file.
        std::fs::rename(&dir, tmp.path().join("2")).unwrap();
        assert_eq!(
            append(&path, &rec(Kind::Commit, 1, Some(4))).unwrap(),
            Appended::Gone
        );
        assert!(!rewrite(&path, &rec(Kind::Commit, 1, Some(4))).unwrap());
        sync(&path).unwrap();
        assert!(!dir.exists());
    }
}
