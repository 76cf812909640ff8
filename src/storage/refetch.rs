//! A replica's mark that its log lost records it once held durably, and
//! must fetch them again from a whole replica before it counts as in sync
//! (the idea of Kafka's KIP-966: a replica that may have lost part of its
//! log is not eligible to lead while a whole one lives).
//!
//! Recovery cuts a damaged log at its first bad batch ([`super::recover`]).
//! A torn tail is not marked: it holds only bytes that were never fsynced,
//! and no record is acknowledged before it is durable on every in-sync
//! replica, so cutting it loses nothing acknowledged. Damage is different:
//! the batches cut (and the segments quarantined after them) may hold
//! acknowledged records. A replicated partition so cut must not lead, nor
//! let others count it as in sync, until it has refetched them; the broker
//! (which heals a damaged replica at open) and `klog-recover` write this
//! mark when they cut damage, durably before the cut ([`recover_marked`]:
//! a cut is durable at once, and a log cut without its mark looks whole),
//! and the broker's replica manager reads it:
//! the replica leaves the in-sync set, follows a whole leader, and drops
//! the mark once that leader has taken it back into the set (which it does
//! only for a replica holding everything below its high watermark).
//!
//! # The file
//!
//! `refetch` in the partition directory, text, written whole (temporary
//! file, fsync, rename, directory fsync):
//!
//! ```text
//! klog-refetch 1     format and version
//! cut 17000          the log's end offset after the cut
//! left               (only once it has left the in-sync set since)
//! ```
//!
//! A file that does not parse is read as a mark that has not left the
//! in-sync set: the reading that can lose nothing. A single-copy partition
//! ignores the mark (it has nobody to refetch from).

use std::path::Path;

use crate::error::{IoContext, Result};
use crate::storage::fs::{self, Vfs};
use crate::storage::recover::{self, RecoverOptions, RecoveryReport};

/// The mark's file name, in the partition directory.
pub const REFETCH_FILE: &str = "refetch";
const REFETCH_HEADER: &str = "klog-refetch 1";
/// More than this is not a mark this version wrote.
const REFETCH_FILE_BYTES_MAX: u64 = 4096;

/// A replica's log was cut below what it held durably.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refetch {
    /// The log's end offset after the cut.
    pub cut_at: u64,
    /// It has left the in-sync set since the cut: being named in sync
    /// again means a leader took it back.
    pub left_isr: bool,
}

impl Refetch {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut text = format!("{REFETCH_HEADER}\ncut {}\n", self.cut_at);
        if self.left_isr {
            text.push_str("left\n");
        }
        text.into_bytes()
    }

    /// Decodes the file's bytes; `None` when they are not a mark this
    /// version wrote.
    pub fn decode(bytes: &[u8]) -> Option<Refetch> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        (lines.next()? == REFETCH_HEADER).then_some(())?;
        let cut_at = lines.next()?.strip_prefix("cut ")?.parse().ok()?;
        let left_isr = match lines.next() {
            None => false,
            Some("left") => true,
            Some(_) => return None,
        };
        lines
            .next()
            .is_none()
            .then_some(Refetch { cut_at, left_isr })
    }
}

/// The mark of the partition in `dir`, if it has one (a file that does
/// not parse is a mark cut at 0 that has not left the in-sync set).
pub fn read(vfs: &dyn Vfs, dir: &Path) -> Result<Option<Refetch>> {
    let path = dir.join(REFETCH_FILE);
    if !vfs.exists(&path) {
        return Ok(None);
    }
    let file = vfs.open(&path, false).ctx("open", &path)?;
    let len = file
        .len()
        .ctx("stat", &path)?
        .min(REFETCH_FILE_BYTES_MAX + 1);
    let mut bytes = vec![0u8; len as usize];
    file.read_exact_at(&mut bytes, 0).ctx("read", &path)?;
    let unknown = Refetch {
        cut_at: 0,
        left_isr: false,
    };
    Ok(Some(Refetch::decode(&bytes).unwrap_or(unknown)))
}

/// Writes the mark of the partition in `dir`, durably.
pub fn write(vfs: &dyn Vfs, dir: &Path, mark: &Refetch) -> Result<()> {
    fs::write_atomic(vfs, dir, REFETCH_FILE, &mark.encode())
}

/// After a recovery of the partition in `dir` that `report` describes:
/// when it cut damage (not only a torn tail), marks the partition, durably,
/// and returns the mark. Its cut is where the log now ends.
pub fn mark_if_damaged(
    vfs: &dyn Vfs,
    dir: &Path,
    report: &RecoveryReport,
) -> Result<Option<Refetch>> {
    if !report.damaged() {
        return Ok(None);
    }
    let mark = Refetch {
        cut_at: report.next_offset().unwrap_or(0),
        left_isr: false,
    };
    write(vfs, dir, &mark)?;
    Ok(Some(mark))
}

/// Recovers the partition in `dir` as [`recover::recover_partition`]
/// does, and marks it when that cuts damage: the mark first, durably,
/// when a dry run finds damage to cut, then the cut, then the mark of
/// where the log now ends. A cut is durable as soon as it is made: a mark
/// written only after it is lost to a crash, a power cut or a failed write
/// in between, and the log then looks whole (it opens clean), so the
/// replica may lead without the records it lost.
pub fn recover_marked(
    vfs: &dyn Vfs,
    dir: &Path,
    recovery_point: u64,
    options: &RecoverOptions,
) -> Result<(RecoveryReport, Option<Refetch>)> {
    if options.dry_run {
        return Ok((
            recover::recover_partition(vfs, dir, recovery_point, options)?,
            None,
        ));
    }
    let dry = RecoverOptions {
        dry_run: true,
        ..*options
    };
    let planned = recover::recover_partition(vfs, dir, recovery_point, &dry)?;
    if planned.damaged() {
        let first = Refetch {
            cut_at: planned.next_offset().unwrap_or(0),
            left_isr: false,
        };
        write(vfs, dir, &first)?;
    }
    let report = recover::recover_partition(vfs, dir, recovery_point, options)?;
    let mark = mark_if_damaged(vfs, dir, &report)?;
    Ok((report, mark))
}

/// Removes the mark of the partition in `dir`, durably (no power cut
/// brings it back, nor leaves it half written).
pub fn remove(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    let path = dir.join(REFETCH_FILE);
    if vfs.exists(&path) {
        vfs.remove(&path).ctx("remove", &path)?;
        fs::sync_directory(vfs, dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::log::{Log, LogConfig, OpenOptions};
    use crate::storage::record::BatchBuilder;

    #[test]
    fn a_mark_reads_back_as_written_and_is_gone_once_removed() {
        let sim = SimFs::new();
        let dir = Path::new("/p");
        sim.create_dir_all_durable(dir);
        assert_eq!(read(&sim, dir).unwrap(), None);
        for mark in [
            Refetch {
                cut_at: 17000,
                left_isr: false,
            },
            Refetch {
                cut_at: 17000,
                left_isr: true,
            },
        ] {
            write(&sim, dir, &mark).unwrap();
            assert_eq!(read(&sim, dir).unwrap(), Some(mark));
        }
        remove(&sim, dir).unwrap();
        assert_eq!(read(&sim, dir).unwrap(), None);
    }

    #[test]
    fn a_mark_that_does_not_parse_has_not_left_the_isr() {
        let sim = SimFs::new();
        let dir = Path::new("/p");
        sim.create_dir_all_durable(dir);
        for bytes in [
            &b""[..],
            b"klog-refetch 1\ncut x\n",
            b"klog-refetch 2\ncut 5\nleft\n",
            b"klog-refetch 1\ncut 5\nleft\nmore\n",
            b"klog-refetch 1\ncut 5\nright\n",
        ] {
            fs::write_atomic(&sim, dir, REFETCH_FILE, bytes).unwrap();
            let mark = read(&sim, dir).unwrap().expect("a mark");
            assert!(!mark.left_isr, "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    /// A replica's log in `/p` holding 6 batches of epoch 1, durable, with
    /// one byte flipped inside the batch at offset 2 (whole batches after
    /// it: damage, not a torn tail).
    fn config() -> LogConfig {
        LogConfig {
            index_bytes_max: 4096,
            ..LogConfig::default()
        }
    }

    fn damaged_replica(sim: &Arc<SimFs>) -> &'static Path {
        let dir = Path::new("/p");
        sim.create_dir_all_durable(dir);
        let options = OpenOptions {
            writable: true,
            lock: false,
        };
        let mut log = Log::open(sim.clone(), dir, config(), options).unwrap();
        log.set_leader_epoch(1).unwrap();
        for i in 0..6u8 {
            let mut b = BatchBuilder::new();
            b.push(0, None, &[], &[b'a' + i; 40]);
            log.append(&mut b.finish().to_vec(), 0).unwrap();
        }
        log.flush().unwrap();
        drop(log);
        let seg = dir.join("00000000000000000000.log");
        let mut bytes = sim.read(&seg).unwrap();
        let at = bytes.windows(40).position(|w| w == [b'c'; 40]).unwrap();
        bytes[at + 20] ^= 0x20;
        sim.write(&seg, &bytes);
        for (path, bytes) in sim.files() {
            sim.write(&path, &bytes);
        }
        dir
    }

    /// Review of issue 23: the broker's heal and klog-recover cut a
    /// replica's damaged log (durably) and only then wrote its mark. Power
    /// lost between the two (or a failed write, a kill) left a log that
    /// opens clean and no mark: the replica counted as whole and could
    /// lead without offsets 2..6, its followers truncating them. Whenever
    /// the power goes, either nothing is cut or the mark is there.
    #[test]
    fn a_cut_is_never_durable_before_its_mark() {
        let options = RecoverOptions {
            full: false,
            dry_run: false,
            automatic: false,
            trust_last: false,
            index_interval_bytes: LogConfig::default().index_interval_bytes,
        };
        for n in 0.. {
            let sim = Arc::new(SimFs::new());
            let dir = damaged_replica(&sim);
            sim.cut_power_after(n);
            let done = recover_marked(&*sim, dir, 0, &options).is_ok();
            sim.crash(&mut |_| 0);
            sim.restore_power();
            let reader = OpenOptions {
                writable: false,
                lock: false,
            };
            let opened = Log::open(sim.clone(), dir, config(), reader);
            // A reader stops at damage it finds (and says so): cut means
            // the log ends at 2 with no damage left to find.
            let cut =
                opened.is_ok_and(|log| log.next_offset() == 2 && log.recovery().damage.is_none());
            let marked = read(&*sim, dir).unwrap().is_some();
            assert!(
                marked || !cut,
                "power cut after {n} changes: the log was cut at 2 and nothing says so"
            );
            if done {
                assert!(cut && marked, "recovered and marked");
                break;
            }
        }
    }

    #[test]
    fn the_file_is_the_documented_text() {
        let mark = Refetch {
            cut_at: 17000,
            left_isr: true,
        };
        assert_eq!(mark.encode(), b"klog-refetch 1\ncut 17000\nleft\n");
    }
}
