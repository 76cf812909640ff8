//! The offsets journal against what an adversarial review of its first
//! version found (each test failed then): fenced writes, damaged records,
//! failed fsyncs, stuck I/O, the largest offsets. Each names the guarantee
//! it checks.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::journal::{self, Kind, Record, HEADER, JOURNAL, RECORD_LEN};
use super::offset;
use super::sync::Syncer;
use super::{stall, DirRegistry};
use crate::coord::Registry;
use crate::error::Error;

const T: Duration = Duration::from_secs(10);

fn commit(dir: &Path, generation: u64, offset: u64) -> crate::error::Result<bool> {
    offset::write(dir, generation, offset, || Ok(()), &Arc::default())
}

fn late(generation: u64, offset: u64) -> [u8; RECORD_LEN] {
    Record {
        kind: Kind::Commit,
        generation,
        offset: Some(offset),
    }
    .encode()
}

/// A member of generation 1 passes its fence and opens its journal, then
/// stops. The claim of generation 2 seals the journal and renames `1/` to
/// `2/` (the first steps of `offset::adopt`); the stopped member runs
/// again and its write lands in the moved journal *before* the claim
/// reads it. The write says nothing (it follows the seal), and its writer
/// is told so: "never seen once its partition was taken over", and never
/// adopted when it was answered "fenced".
#[test]
fn a_late_write_between_the_move_and_the_carry_is_not_adopted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    assert!(offset::adopt(&dir, 1, false).unwrap());
    assert!(commit(&dir, 1, 10).unwrap());
    let mut held = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("1").join(JOURNAL))
        .unwrap();
    // Claim 2, the steps of adopt before its read: the seal, the move.
    journal::seal(&dir.join("1").join(JOURNAL), 2).unwrap();
    std::fs::rename(dir.join("1"), dir.join("2")).unwrap();
    held.write_all(&late(1, 500)).unwrap();
    // Claim 2 goes on as adopt does after its rename.
    assert!(offset::adopt(&dir, 2, false).unwrap());
    assert_eq!(offset::read(&dir).unwrap(), Some(10));
}

/// The writer's side of the seal: an append that lands after a later
/// claim's seal is answered fenced, even while the journal is still at its
/// name.
#[test]
fn an_append_after_a_seal_is_fenced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    assert!(offset::adopt(&dir, 1, false).unwrap());
    assert!(commit(&dir, 1, 10).unwrap());
    journal::seal(&dir.join("1").join(JOURNAL), 2).unwrap();
    assert!(!commit(&dir, 1, 11).unwrap(), "acknowledged after the seal");
    assert_eq!(offset::read(&dir).unwrap(), Some(10));
}

/// The same through the registry, no simulated step. A member stopped
/// with its journal open is taken over by a real `claim`; its write runs
/// again only once the directory has moved (`2/` exists), and keeps
/// landing until the claim returns. Any of those writes seen breaks the
/// fencing guarantee.
#[test]
fn a_late_write_after_the_move_is_never_seen_by_the_claim_that_moved_it() {
    for attempt in 0..5 {
        let tmp = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(tmp.path()).unwrap();
        let short = Duration::from_millis(300);
        let a = reg.claim("g", "t", 0, "a", short).unwrap().unwrap();
        reg.commit("g", "t", 0, 10, &a).unwrap();
        let offsets = tmp.path().join("offsets/g/t-0");
        let mut held = std::fs::OpenOptions::new()
            .append(true)
            .open(offsets.join("1").join(JOURNAL))
            .unwrap();
        std::thread::sleep(2 * short);
        let done = AtomicBool::new(false);
        let b = std::thread::scope(|s| {
            let (offsets, done) = (&offsets, &done);
            s.spawn(move || {
                while !offsets.join("2").exists() && !done.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
                while !done.load(Ordering::SeqCst) {
                    let _ = held.write_all(&late(1, 500));
                }
            });
            let b = reg.claim("g", "t", 0, "b", T);
            done.store(true, Ordering::SeqCst);
            b
        });
        let b = b.unwrap().expect("a's lease ran out");
        let seen = reg.committed("g", "t", 0).unwrap();
        assert_eq!(
            seen,
            Some(10),
            "attempt {attempt}: a write made after the directory moved is the committed offset"
        );
        drop((a, b));
    }
}

/// The journal's only record (the adopt record a claim
/// rewrote durably, or the record a compaction left) is damaged by the
/// disk: it cannot be a write torn by a power cut (it was fsynced before
/// the rename), yet the reader skips it and says "nothing committed",
/// not an error: the group silently restarts from `-o`
/// (auto.offset.reset), and the next claim makes the loss permanent by
/// carrying "none" over. A damaged journal is an error naming its file.
#[test]
fn a_damaged_sole_record_is_an_error_not_a_silent_none() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(tmp.path()).unwrap();
    let a = reg.claim("g", "t", 0, "a", T).unwrap().unwrap();
    reg.commit("g", "t", 0, 4_000, &a).unwrap();
    drop(a);
    // The next claim carries 4,000 into a journal of one (adopt) record.
    let b = reg.claim("g", "t", 0, "b", T).unwrap().unwrap();
    drop(b);
    let path = tmp.path().join("offsets/g/t-0/2").join(JOURNAL);
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), HEADER.len() + RECORD_LEN);
    bytes[HEADER.len() + 22] ^= 0x01; // one bit of the offset
    std::fs::write(&path, &bytes).unwrap();
    let read = reg.committed("g", "t", 0);
    let c = reg.claim("g", "t", 0, "c", T);
    let after = reg.committed("g", "t", 0);
    assert!(
        matches!(read, Err(Error::Corrupt { .. })),
        "damaged sole record read as {read:?}; then a claim {} and the offset is {after:?}",
        if matches!(c, Ok(Some(_))) {
            "succeeded"
        } else {
            "failed"
        }
    );
}

/// A variant: megabytes of garbage after a valid header (no
/// record at all checks) read as "no committed offset", not an error.
#[test]
fn a_journal_of_garbage_after_its_header_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    assert!(offset::adopt(&dir, 1, false).unwrap());
    assert!(commit(&dir, 1, 77).unwrap());
    let path = dir.join("1").join(JOURNAL);
    let mut bytes = std::fs::read(&path).unwrap();
    let mut x: u32 = 0x1234_5678;
    for b in bytes[HEADER.len()..].iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    bytes.extend((0..(3 << 20)).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    std::fs::write(&path, &bytes).unwrap();
    let read = offset::read(&dir);
    assert!(
        matches!(read, Err(Error::Corrupt { .. })),
        "3 MiB of garbage after the header read as {read:?}"
    );
}

/// "An operator's reset is durable when it returns": a reset whose fsync
/// fails is an error. The journal is swapped, at the reset's fence, for a
/// file whose fsync fails (/dev/null: EINVAL; an EIO from a failing disk
/// takes the same path).
#[test]
fn a_reset_whose_fsync_failed_does_not_return_ok() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(tmp.path()).unwrap();
    let offsets = tmp.path().join("offsets/g/t-0");
    let stalled = stall::next_commit(&offsets);
    let reset = std::thread::scope(|s| {
        let r = &reg;
        let reset = s.spawn(move || r.reset_offset("g", "t", 0, 42));
        stalled.wait_reached();
        let top = offset::top(&offsets).unwrap().unwrap();
        let path = offsets.join(top.to_string()).join(JOURNAL);
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/dev/null", &path).unwrap();
        stalled.release();
        reset.join().unwrap()
    });
    assert!(
        reset.is_err(),
        "the reset returned Ok though the fsync that makes it durable failed"
    );
}

/// "Nothing is locked across a step that can stall, so a stuck member
/// stops nobody ... the others' partitions are never touched" (offset.rs):
/// one commit stuck in I/O (a FIFO for a journal) stops no commit of
/// another partition in the same process (the Kafka coordinator commits
/// for every group of a broker), not even one whose path hashed alike
/// (the first version held 16 process-wide locks across its I/O).
#[test]
fn a_commit_stuck_in_io_stops_no_other_partition() {
    fn stripe_of(path: &Path) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(path, &mut h);
        std::hash::Hasher::finish(&h) % 16
    }
    let tmp = tempfile::tempdir().unwrap();
    let reg = DirRegistry::open(tmp.path()).unwrap();
    let journal_of =
        |p: u32| -> PathBuf { tmp.path().join(format!("offsets/g/t-{p}/1")).join(JOURNAL) };
    let stuck = reg.claim("g", "t", 0, "a", T).unwrap().unwrap();
    let other = (1..200)
        .find(|&p| stripe_of(&journal_of(p)) == stripe_of(&journal_of(0)))
        .unwrap();
    let b = reg.claim("g", "t", other, "b", T).unwrap().unwrap();
    // Partition 0's journal: I/O that does not return until a reader comes.
    std::fs::remove_file(journal_of(0)).unwrap();
    // Not a child process: a fork holds this process's lock files open a
    // moment, and the other tests' claims see them held.
    nix::unistd::mkfifo(&journal_of(0), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let finished = std::thread::scope(|s| {
        let r = &reg;
        // (store_offset: `commit` reads the offset first, outside the lock.)
        s.spawn(move || r.store_offset("g", "t", 0, 1, &stuck));
        std::thread::sleep(Duration::from_millis(200));
        let (tx, rx) = std::sync::mpsc::channel();
        s.spawn(move || tx.send(r.commit("g", "t", other, 5, &b).is_ok()));
        let finished = rx.recv_timeout(Duration::from_secs(3));
        // Unstick partition 0 (a reader and a writer on the FIFO, kept
        // open so that no later open of it blocks), then let all end.
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(journal_of(0))
            .unwrap();
        std::mem::forget(fifo);
        finished
    });
    assert_eq!(
        finished,
        Ok(true),
        "a commit of partition {other} waited on partition 0's stuck I/O"
    );
}

/// The largest offset a log holds is `i64::MAX` (Kafka's offsets are
/// `int64`): a commit past it is refused, never stored as the journal's
/// "none".
#[test]
fn an_offset_past_i64_max_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    assert!(offset::adopt(&dir, 1, false).unwrap());
    assert!(commit(&dir, 1, i64::MAX as u64).unwrap());
    assert!(matches!(commit(&dir, 1, u64::MAX), Err(Error::Config(_))));
    assert_eq!(offset::read(&dir).unwrap(), Some(i64::MAX as u64));
}

/// Commits of one partition from several threads of one process racing
/// the owner's compaction: the committed offset is one of the last ones (a
/// record a compaction drops always belongs to a commit concurrent with
/// it, so the register stays linearizable).
#[test]
fn concurrent_commits_racing_compaction_keep_the_last() {
    for _ in 0..2 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        assert!(offset::adopt(&dir, 1, false).unwrap());
        let syncer: Arc<Syncer> = Arc::default();
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (dir, syncer, barrier) = (&dir, &syncer, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for i in 0..1_500u64 {
                        let o = t * 1_000_000 + i;
                        assert!(offset::write(dir, 1, o, || Ok(()), syncer).unwrap());
                    }
                });
            }
        });
        // Every thread's last commit is acknowledged after all its others:
        // the committed offset is one of the four last ones.
        let seen = offset::read(&dir).unwrap().unwrap();
        assert_eq!(
            seen % 1_000_000,
            1_499,
            "a later acknowledged commit was lost: {seen}"
        );
    }
}

/// A late write through a journal held open across a whole takeover
/// lands in the journal the adopt rewrite replaced, never after the adopt
/// record in the live one.
#[test]
fn a_late_write_never_lands_after_the_adopt_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    assert!(offset::adopt(&dir, 1, false).unwrap());
    assert!(commit(&dir, 1, 10).unwrap());
    let mut held = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("1").join(JOURNAL))
        .unwrap();
    assert!(offset::adopt(&dir, 2, false).unwrap());
    held.write_all(&late(1, 500)).unwrap();
    let bytes = std::fs::read(dir.join("2").join(JOURNAL)).unwrap();
    let state = journal::fold(Path::new("j"), &bytes).unwrap();
    assert_eq!(
        bytes.len(),
        HEADER.len() + RECORD_LEN,
        "not in the live journal"
    );
    assert_eq!(state.offset, Some(10));
}

/// A commit stopped after its write and before it reads back (a stuck
/// disk), while a later claim seals, moves and adopts the journal: the
/// commit's record came before the seal, so the claim adopts it, and the
/// commit is answered that it counts. What is acknowledged is what is
/// adopted (the first fix answered it "fenced" once the journal had
/// moved, though the claim had adopted it).
#[test]
fn a_commit_stopped_after_its_write_is_answered_as_the_next_claim_adopts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    assert!(offset::adopt(&dir, 1, false).unwrap());
    assert!(commit(&dir, 1, 10).unwrap());
    let stalled = stall::next_commit(&dir.join("1").join("offsets.written"));
    let answered = std::thread::scope(|s| {
        let d = &dir;
        let late = s.spawn(move || commit(d, 1, 11));
        stalled.wait_reached();
        assert!(offset::adopt(&dir, 2, false).unwrap());
        stalled.release();
        late.join().unwrap()
    });
    assert!(answered.unwrap(), "adopted, so acknowledged");
    assert_eq!(offset::read(&dir).unwrap(), Some(11));
}

/// A claim's commits to one journal run one at a time in its process (a
/// rewrite never replaces a record it did not read): a commit stopped
/// after its write holds up the next commit of that journal, and no other.
#[test]
fn a_stopped_commit_holds_up_its_own_journal_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("t-0"), tmp.path().join("t-1"));
    assert!(offset::adopt(&a, 1, false).unwrap());
    assert!(offset::adopt(&b, 1, false).unwrap());
    let stalled = stall::next_commit(&a.join("1").join("offsets.written"));
    std::thread::scope(|s| {
        let (a, b) = (&a, &b);
        let first = s.spawn(move || commit(a, 1, 5));
        stalled.wait_reached();
        let (tx, rx) = std::sync::mpsc::channel();
        let tx2 = tx.clone();
        s.spawn(move || tx.send(("other", commit(b, 1, 7).unwrap())));
        s.spawn(move || tx2.send(("same", commit(a, 1, 6).unwrap())));
        let done = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(
            done,
            ("other", true),
            "another journal's commit is not held up"
        );
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the same journal's next commit waits"
        );
        stalled.release();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            ("same", true)
        );
        assert!(first.join().unwrap().unwrap());
    });
    assert_eq!(offset::read(&a).unwrap(), Some(6));
}
