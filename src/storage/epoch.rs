//! A partition's leader epochs (Kafka's `leader-epoch-checkpoint`): for
//! each leader epoch that wrote to the log, the first offset it wrote.
//!
//! Every batch carries the epoch of the leader that appended it
//! ([`crate::storage::record`], magic 2); this file is their index, so that
//! a replica can ask "where does my log stop agreeing with the leader's?"
//! without reading the batches ([`Epochs::end_offset_for_epoch`], Kafka's
//! OffsetsForLeaderEpoch, KIP-101 and KIP-279).
//!
//! # File
//!
//! `leader-epochs` in the partition directory, text, written whole by
//! [`crate::storage::fs::write_atomic`] (a temporary file, fsynced, renamed,
//! the directory fsynced):
//!
//! ```text
//! klog-leader-epochs 1      format and version
//! 2                         number of entries
//! 0 0                       epoch, start offset; epochs and offsets strictly increasing
//! 3 120
//! crc 1a2b3c4d              CRC32 (IEEE) of every byte before this line, 8 hex digits
//! ```
//!
//! `tests/golden/partition/leader-epochs` pins it.
//!
//! # When it is written, and why that is crash-safe
//!
//! A new log writes it with its first epoch (0 for a single copy) starting
//! at its first offset. The log writes it again when the first batch of a
//! new (higher) epoch is appended, *before* the batch is written: so every
//! epoch of a batch on disk has its entry, with a start at or before that
//! batch, and a single copy writes it once in its life. A power cut can
//! leave an entry whose start is past the log's end (its batch never
//! reached the disk); opening the log removes it. An entry starting at the
//! log's end is kept: its epoch has no batch yet, and the log goes on in it
//! (a restarted replica never goes back to an older epoch). A file that is
//! missing or does not decode is rebuilt from the batch headers by
//! recovery. Truncating the log removes the entries from the cut on
//! ([`Epochs::truncate_from`]).
//!
//! Magic 1 batches, written before epochs existed, read as epoch 0.

use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{self, Vfs};

/// Name of the epoch file in a partition directory.
pub const EPOCH_FILE: &str = "leader-epochs";

/// First line of the epoch file: its format and version.
const EPOCH_HEADER: &str = "klog-leader-epochs 1";

/// Largest epoch file read (about 40,000 epochs): a bigger one is damaged.
pub const EPOCH_FILE_BYTES_MAX: u64 = 1 << 20;

/// One leader epoch and the first offset written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: u32,
    /// The first offset a batch of that epoch holds.
    pub start_offset: u64,
}

/// A partition's leader epochs, oldest first: epochs and start offsets
/// both strictly increasing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Epochs {
    entries: Vec<EpochEntry>,
}

impl Epochs {
    /// No epoch yet (an empty log).
    pub fn new() -> Epochs {
        Epochs::default()
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest entry.
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// Records that `epoch` starts at `start_offset`: nothing when `epoch` is
    /// already the latest (or older: a batch of an older epoch after a newer
    /// one is not recorded; [`Epochs::check_next`] reports it). Entries that
    /// start at or after `start_offset` are dropped first (their batches
    /// were undone). Returns whether anything changed.
    pub fn assign(&mut self, epoch: u32, start_offset: u64) -> bool {
        if self.latest().is_some_and(|e| e.epoch >= epoch) {
            return false;
        }
        self.truncate_from(start_offset);
        if self.latest().is_some_and(|e| e.epoch >= epoch) {
            return false;
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// Removes the entries that start at or after `offset` (the log was
    /// cut there). Returns whether any was removed.
    pub fn truncate_from(&mut self, offset: u64) -> bool {
        let keep = self.entries.partition_point(|e| e.start_offset < offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// The epoch of the record at `offset`, by the entries: that of the
    /// last entry starting at or before it (`None` before the first).
    pub fn epoch_at(&self, offset: u64) -> Option<u32> {
        let i = self.entries.partition_point(|e| e.start_offset <= offset);
        i.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// Kafka's OffsetsForLeaderEpoch (KIP-101, KIP-279): for a replica whose
    /// log ends in `epoch`, the largest epoch here at or below it and the
    /// offset where that epoch ends here: the start of the next larger
    /// epoch, or `log_end` when it is the latest. `None` (Kafka's
    /// `UNDEFINED_EPOCH`) when there is no entry, or `epoch` is newer than
    /// the latest. An `epoch` older than the first entry answers itself and
    /// the first entry's start, as Kafka does: the replica truncates there.
    pub fn end_offset_for_epoch(&self, epoch: u32, log_end: u64) -> Option<(u32, u64)> {
        let latest = self.latest()?;
        if epoch == latest.epoch {
            return Some((epoch, log_end));
        }
        let higher = self.entries.partition_point(|e| e.epoch <= epoch);
        let next = self.entries.get(higher)?;
        let floor = higher
            .checked_sub(1)
            .map_or(epoch, |i| self.entries[i].epoch);
        Some((floor, next.start_offset))
    }

    /// Checks a batch of `epoch` at `base_offset` following the ones seen so
    /// far in a walk of the log, and records its epoch: an epoch lower than
    /// the last one seen is an error naming both.
    pub fn check_next(&mut self, epoch: u32, base_offset: u64) -> std::result::Result<(), String> {
        if let Some(latest) = self.latest().filter(|e| e.epoch > epoch) {
            return Err(format!(
                "batch at offset {base_offset} has leader epoch {epoch}, below epoch {} \
                 (from offset {})",
                latest.epoch, latest.start_offset
            ));
        }
        self.assign(epoch, base_offset);
        Ok(())
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut text = format!("{EPOCH_HEADER}\n{}\n", self.entries.len());
        for e in &self.entries {
            text.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
        }
        let crc = crc32fast::hash(text.as_bytes());
        text.push_str(&format!("crc {crc:08x}\n"));
        text.into_bytes()
    }

    /// Decodes the file's bytes, checking everything (header, count, order,
    /// CRC); the error says what is wrong.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Epochs, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not text".to_string())?;
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or("no CRC line")?;
        let (body, crc_line) = text.split_at(body_end);
        let stored = crc_line
            .strip_prefix("crc ")
            .and_then(|c| c.strip_suffix('\n'))
            .filter(|c| c.len() == 8)
            .and_then(|c| u32::from_str_radix(c, 16).ok())
            .ok_or("no CRC line")?;
        let computed = crc32fast::hash(body.as_bytes());
        if stored != computed {
            return Err(format!(
                "CRC mismatch: stored {stored:08x}, computed {computed:08x}"
            ));
        }
        let mut lines = body.lines();
        if lines.next() != Some(EPOCH_HEADER) {
            return Err(format!("first line is not {EPOCH_HEADER:?}"));
        }
        let count: usize = parse(lines.next(), "entry count")?;
        let mut epochs = Epochs::new();
        for line in lines {
            let mut fields = line.split(' ');
            let epoch = parse(fields.next(), "epoch")?;
            let start_offset = parse(fields.next(), "start offset")?;
            if fields.next().is_some() {
                return Err(format!("entry {line:?} has more than two fields"));
            }
            if epochs
                .latest()
                .is_some_and(|e| e.epoch >= epoch || e.start_offset >= start_offset)
            {
                return Err(format!("entry {line:?} does not follow the one before"));
            }
            epochs.entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        if epochs.entries.len() != count {
            return Err(format!(
                "{} entries, the count says {count}",
                epochs.entries.len()
            ));
        }
        Ok(epochs)
    }

    /// Reads the epoch file of the partition `dir`: `Ok(None)` when there
    /// is none, `Ok(Some(Err(why)))` when it does not decode.
    pub fn read(vfs: &dyn Vfs, dir: &Path) -> Result<Option<std::result::Result<Epochs, String>>> {
        let path = dir.join(EPOCH_FILE);
        let file = match vfs.open_read(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let len = file.len().ctx("stat", &path)?;
        if len > EPOCH_FILE_BYTES_MAX {
            return Ok(Some(Err(format!(
                "{len} bytes, over the limit of {EPOCH_FILE_BYTES_MAX}"
            ))));
        }
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, 0).ctx("read", &path)?;
        Ok(Some(Epochs::decode(&bytes)))
    }

    /// Writes the epoch file of the partition `dir`, atomically and durably.
    pub fn write(&self, vfs: &dyn Vfs, dir: &Path) -> Result<()> {
        fs::write_atomic(vfs, dir, EPOCH_FILE, &self.encode())
    }
}

fn parse<T: std::str::FromStr>(field: Option<&str>, what: &str) -> std::result::Result<T, String> {
    let field = field.ok_or_else(|| format!("{what} missing"))?;
    // Digits only: no sign, no spaces, no leading '+'.
    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} {field:?} is not a number"));
    }
    field
        .parse()
        .map_err(|_| format!("{what} {field:?} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epochs(entries: &[(u32, u64)]) -> Epochs {
        let mut e = Epochs::new();
        for &(epoch, start) in entries {
            assert!(e.assign(epoch, start), "({epoch}, {start})");
        }
        e
    }

    /// KIP-101's and KIP-279's examples, as Kafka's
    /// `LeaderEpochFileCacheTest` asks them.
    #[test]
    fn end_offset_for_epoch_answers_as_offsets_for_leader_epoch() {
        // Leader: epoch 0 from 0, epoch 1 from 10, epoch 3 from 20; log end 30.
        let leader = epochs(&[(0, 0), (1, 10), (3, 20)]);
        // The latest epoch ends at the log end.
        assert_eq!(leader.end_offset_for_epoch(3, 30), Some((3, 30)));
        // An epoch that ended: its own, up to the next one's start.
        assert_eq!(leader.end_offset_for_epoch(0, 30), Some((0, 10)));
        assert_eq!(leader.end_offset_for_epoch(1, 30), Some((1, 20)));
        // KIP-279: an epoch the leader never had (2): the largest below
        // it (1), ending where the next larger (3) starts.
        assert_eq!(leader.end_offset_for_epoch(2, 30), Some((1, 20)));
        // Newer than the latest: undefined.
        assert_eq!(leader.end_offset_for_epoch(4, 30), None);
        // Older than the first: itself, up to the first start (Kafka).
        let late = epochs(&[(5, 100), (7, 200)]);
        assert_eq!(late.end_offset_for_epoch(2, 300), Some((2, 100)));
        // No epochs: undefined.
        assert_eq!(Epochs::new().end_offset_for_epoch(0, 0), None);
    }

    /// KIP-101's scenario 1: a follower that lost its unflushed tail asks
    /// the new leader where its epoch ends and truncates there, not to its
    /// high watermark; scenario 2: diverged logs truncate to the leader's
    /// end of the follower's epoch.
    #[test]
    fn kip_101_scenarios_truncate_at_the_leaders_end_of_the_epoch() {
        // Scenario 1: A (leader, epoch 0) has offsets 0 and 1; B has 0 and 1
        // too. B becomes leader (epoch 1); A asks for its epoch 0.
        let b = epochs(&[(0, 0), (1, 2)]);
        assert_eq!(b.end_offset_for_epoch(0, 3), Some((0, 2)));
        // A keeps both records: 2 is where epoch 0 ends on B.
        // Scenario 2: A wrote offset 1 in epoch 0 and died before B got it;
        // B, leader in epoch 1, wrote its own offset 1. A asks for epoch 0.
        let b = epochs(&[(0, 0), (1, 1)]);
        assert_eq!(b.end_offset_for_epoch(0, 2), Some((0, 1)));
        // A truncates to 1, dropping its divergent record, then fetches B's.
    }

    #[test]
    fn assign_keeps_epochs_and_offsets_increasing() {
        let mut e = epochs(&[(0, 0), (2, 10)]);
        assert!(!e.assign(2, 15), "the same epoch again");
        assert!(!e.assign(1, 20), "an older epoch");
        // An epoch whose first batch was undone, then a newer one at the
        // same offset: the undone one goes.
        assert!(e.assign(3, 30));
        assert!(e.assign(4, 30));
        assert_eq!(e, epochs(&[(0, 0), (2, 10), (4, 30)]));
        assert_eq!(e.epoch_at(9), Some(0));
        assert_eq!(e.epoch_at(10), Some(2));
        assert_eq!(e.epoch_at(1000), Some(4));
    }

    #[test]
    fn truncation_removes_the_epochs_from_the_cut_on() {
        let mut e = epochs(&[(0, 0), (2, 10), (4, 30)]);
        assert!(!e.truncate_from(31));
        assert!(e.truncate_from(30));
        assert_eq!(e, epochs(&[(0, 0), (2, 10)]));
        assert!(e.truncate_from(5));
        assert_eq!(e, epochs(&[(0, 0)]));
        assert!(e.truncate_from(0));
        assert_eq!(e, Epochs::new());
    }

    #[test]
    fn the_file_round_trips_and_damage_is_named() {
        let e = epochs(&[(0, 0), (3, 120), (u32::MAX, u64::MAX)]);
        let bytes = e.encode();
        assert_eq!(Epochs::decode(&bytes).unwrap(), e);
        assert_eq!(
            Epochs::decode(&Epochs::new().encode()).unwrap(),
            Epochs::new()
        );
        for cut in 0..bytes.len() {
            assert!(Epochs::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x04;
            assert!(Epochs::decode(&damaged).is_err(), "flip in byte {i}");
        }
        let unordered = "klog-leader-epochs 1\n2\n3 10\n2 20\n";
        let crc = crc32fast::hash(unordered.as_bytes());
        let err = Epochs::decode(format!("{unordered}crc {crc:08x}\n").as_bytes()).unwrap_err();
        assert!(err.contains("does not follow"), "{err}");
    }

    #[test]
    fn a_walk_of_the_log_refuses_an_epoch_going_down() {
        let mut seen = Epochs::new();
        seen.check_next(0, 0).unwrap();
        seen.check_next(2, 5).unwrap();
        seen.check_next(2, 9).unwrap();
        let err = seen.check_next(1, 12).unwrap_err();
        assert!(
            err.contains("offset 12") && err.contains("below epoch 2"),
            "{err}"
        );
        assert_eq!(seen, epochs(&[(0, 0), (2, 5)]));
    }
}
