//! The partition's aborted transactions, for read_committed fetches: each
//! abort marker's transaction ([`AbortedTxn`]), which a consumer needs to
//! skip that producer's records from the transaction's first offset to
//! the marker (Kafka's `.txnindex`, one file per partition here).
//!
//! # File `aborted-transactions`
//!
//! Entries of 28 bytes, ascending by marker offset, big-endian:
//!
//! | field | type | |
//! | --- | --- | --- |
//! | producer_id | i64 | |
//! | first_offset | u64 | the transaction's first batch here |
//! | last_offset | u64 | its abort marker |
//! | crc | u32 | CRC32C of the 24 bytes before it |
//!
//! It is written when a producer snapshot is (a roll, a clean close),
//! fsynced before it: the entries new since are appended, or, when a
//! truncation or retention took some away, the file is written anew (a
//! temporary file, renamed). The snapshot counts the entries below its
//! offset; at open, the entries below the snapshot's offset are kept when
//! the file holds exactly that many whole ones, and the rest come again
//! from the markers after it, as the producer state does. A file that
//! does not agree with the snapshot (damaged, cut, removed) is rebuilt
//! from the whole log.
//!
//! So the file is a cache of what the log says: a power cut that tears it
//! costs a scan of the log's batch headers at the next open, never an
//! aborted transaction read as committed. The fsync keeps that scan rare.
//!
//! The entries are kept in memory (24 bytes each): retention removes
//! those whose markers are below the log's start at the next roll.

use std::path::Path;

use super::Log;
use crate::error::{IoContext, Result};
use crate::storage::fs::{self, Vfs};
pub use crate::storage::producers::AbortedTxn;

/// The file's name in the partition's directory.
pub const ABORTED_FILE: &str = "aborted-transactions";

/// Bytes of an entry.
const ENTRY_BYTES: usize = 8 + 8 + 8 + 4;

/// The most aborted transactions a read_committed fetch is told of, past
/// those open at its offset (which it is always told of): the fetch reads
/// below the first offset of the first one it is not told of.
pub const ABORTED_PER_FETCH: usize = 1000;

/// The aborted transactions of a writable log.
#[derive(Debug, Default)]
pub(super) struct Aborted {
    /// Ascending by marker offset.
    pub(super) entries: Vec<AbortedTxn>,
    /// How many of `entries` the file holds, as they are.
    stored: usize,
    /// The file holds something else than `entries[..stored]`: it is
    /// written anew.
    rewrite: bool,
}

impl Aborted {
    /// The entries an open kept, of a file of `file_entries` whole entries
    /// and `torn` bytes after them.
    pub(super) fn loaded(entries: Vec<AbortedTxn>, file_entries: usize, torn: bool) -> Aborted {
        let rewrite = torn || file_entries != entries.len();
        Aborted {
            stored: if rewrite { 0 } else { entries.len() },
            entries,
            rewrite,
        }
    }

    /// An abort marker appended (or found again at an open).
    pub(super) fn push(&mut self, txn: AbortedTxn) {
        self.entries.push(txn);
    }

    /// Forgets the transactions whose markers are at `end` or past it (a
    /// truncation), or below `start` (retention).
    pub(super) fn keep_between(&mut self, start: u64, end: u64) {
        let before = self.entries.len();
        self.entries
            .retain(|a| a.last_offset >= start && a.last_offset < end);
        if self.entries.len() != before {
            self.rewrite = true;
            self.stored = 0;
        }
    }

    /// The transactions that overlap offsets `from..to`: a read_committed
    /// fetch of those offsets skips their producers' records from each
    /// one's first offset.
    pub(super) fn between(&self, from: u64, to: u64) -> impl Iterator<Item = &AbortedTxn> {
        let first = self.entries.partition_point(|a| a.last_offset < from);
        self.entries[first..]
            .iter()
            .filter(move |a| a.first_offset < to)
    }

    /// [`Log::aborted_for_fetch`], telling at most `told_max` but those
    /// open at `from`.
    pub(super) fn for_fetch(&self, from: u64, to: u64, told_max: usize) -> (Vec<AbortedTxn>, u64) {
        let key = |a: &AbortedTxn| (a.first_offset, a.last_offset, a.producer_id);
        let open_at_from = self.between(from, to).filter(|a| a.first_offset <= from);
        let most = told_max.max(open_at_from.count());
        // The smallest first offsets, one more than told (a max-heap).
        let mut told = std::collections::BinaryHeap::new();
        for a in self.between(from, to) {
            told.push(key(a));
            if told.len() > most + 1 {
                told.pop();
            }
        }
        let mut told: Vec<_> = told.into_sorted_vec();
        let bound = if told.len() > most {
            told.pop().map_or(to, |(first, _, _)| first)
        } else {
            to
        };
        let list = told
            .into_iter()
            .map(|(first_offset, last_offset, producer_id)| AbortedTxn {
                producer_id,
                first_offset,
                last_offset,
            })
            .collect();
        (list, bound)
    }
}

fn encode(txn: &AbortedTxn, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(&txn.producer_id.to_be_bytes());
    out.extend_from_slice(&txn.first_offset.to_be_bytes());
    out.extend_from_slice(&txn.last_offset.to_be_bytes());
    let crc = crc32c::crc32c(&out[at..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// The file's whole entries up to the first that does not read (cut,
/// damaged), and whether bytes follow them. No file: none.
pub(super) fn read(vfs: &dyn Vfs, dir: &Path) -> Result<(Vec<AbortedTxn>, bool)> {
    let path = dir.join(ABORTED_FILE);
    if !vfs.exists(&path) {
        return Ok((Vec::new(), false));
    }
    let file = vfs.open_read(&path).ctx("open", &path)?;
    let len = file.len().ctx("stat", &path)?;
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0).ctx("read", &path)?;
    let mut entries = Vec::with_capacity(bytes.len() / ENTRY_BYTES);
    for e in bytes.chunks_exact(ENTRY_BYTES) {
        let field = |at: usize| u64::from_be_bytes(e[at..at + 8].try_into().expect("8 bytes"));
        let crc = u32::from_be_bytes(e[24..].try_into().expect("4 bytes"));
        let (producer_id, first_offset, last_offset) = (field(0) as i64, field(8), field(16));
        let sorted = entries
            .last()
            .is_none_or(|a: &AbortedTxn| a.last_offset < last_offset);
        if crc != crc32c::crc32c(&e[..24]) || first_offset > last_offset || !sorted {
            break;
        }
        entries.push(AbortedTxn {
            producer_id,
            first_offset,
            last_offset,
        });
    }
    let torn = entries.len() * ENTRY_BYTES != bytes.len();
    Ok((entries, torn))
}

impl Log {
    /// The aborted transactions that overlap offsets `from..to`, ascending
    /// by their markers' offsets.
    pub fn aborted_transactions(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        self.aborted.between(from, to).copied().collect()
    }

    /// What a read_committed fetch from `from` below `to` is told of: the
    /// aborted transactions that overlap those offsets, ascending by first
    /// offset, at most [`ABORTED_PER_FETCH`] but for those open at
    /// `from`, and the offset it reads below (`to`, or the first offset of
    /// the first transaction it is not told of). Memory is bounded by
    /// the list, whatever the aborts in the log.
    pub fn aborted_for_fetch(&self, from: u64, to: u64) -> (Vec<AbortedTxn>, u64) {
        self.aborted.for_fetch(from, to, ABORTED_PER_FETCH)
    }

    /// Makes the file hold every entry, durably, before a snapshot counts
    /// them; those below the log's start are dropped first.
    pub(super) fn store_aborted(&mut self) -> Result<()> {
        let start = self.start_offset();
        self.aborted.keep_between(start, u64::MAX);
        let a = &mut self.aborted;
        if !a.rewrite && a.stored == a.entries.len() {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity((a.entries.len() - a.stored) * ENTRY_BYTES);
        let new = if a.rewrite { 0 } else { a.stored };
        for txn in &a.entries[new..] {
            encode(txn, &mut bytes);
        }
        if new == 0 {
            fs::write_atomic(&*self.vfs, &self.dir, ABORTED_FILE, &bytes)?;
        } else {
            let path = self.dir.join(ABORTED_FILE);
            let file = self.vfs.open(&path, false).ctx("open", &path)?;
            let at = (new * ENTRY_BYTES) as u64;
            file.set_len(at).ctx("truncate", &path)?;
            file.write_all_at(&bytes, at).ctx("write", &path)?;
            file.sync_data().ctx("fsync", &path)?;
        }
        a.stored = a.entries.len();
        a.rewrite = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(producer_id: i64, first_offset: u64, last_offset: u64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset,
            last_offset,
        }
    }

    /// A fetch is told of the aborted transactions over its offsets, by
    /// first offset, up to its bound; past it, it reads below the first it
    /// is not told of; those open at its offset it is always told of.
    #[test]
    fn a_fetch_is_told_of_a_bounded_list_and_reads_no_further_than_it() {
        let mut a = Aborted::default();
        // (producer, first, marker), by marker.
        for t in [
            (1, 0, 4),
            (2, 2, 5),
            (3, 6, 8),
            (4, 3, 9),
            (5, 10, 12),
            (6, 11, 13),
        ] {
            a.push(txn(t.0, t.1, t.2));
        }
        let firsts = |l: &[AbortedTxn]| l.iter().map(|t| t.first_offset).collect::<Vec<_>>();
        let (list, bound) = a.for_fetch(0, 20, 100);
        assert_eq!((firsts(&list), bound), (vec![0, 2, 3, 6, 10, 11], 20));
        let (list, bound) = a.for_fetch(5, 20, 100);
        assert_eq!(
            (firsts(&list), bound),
            (vec![2, 3, 6, 10, 11], 20),
            "marker 5 is at 5"
        );
        let (list, bound) = a.for_fetch(0, 7, 100);
        assert_eq!((firsts(&list), bound), (vec![0, 2, 3, 6], 7));
        // Told of two: reads below the third's first offset.
        let (list, bound) = a.for_fetch(0, 20, 2);
        assert_eq!((firsts(&list), bound), (vec![0, 2], 3));
        // Three are open at offset 4: all three, whatever the bound.
        let (list, bound) = a.for_fetch(4, 20, 1);
        assert_eq!((firsts(&list), bound), (vec![0, 2, 3], 6));
        let (list, bound) = a.for_fetch(13, 20, 1);
        assert_eq!((firsts(&list), bound), (vec![11], 20));
    }
}
