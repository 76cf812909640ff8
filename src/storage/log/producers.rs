//! The log's producer state ([`crate::storage::producers`]): kept as
//! batches are appended (a leader's and a follower's alike), rebuilt at a
//! writable open from the newest snapshot and the log after it, and again
//! after an undo or a truncation took records back; snapshotted at a roll
//! and at a clean close.
//!
//! A snapshot is only ever used at or below the log's end: one past it (a
//! power cut lost the records it counted, a truncation removed them) is
//! deleted, at open and by the truncation itself, durably, before
//! anything is appended past its offset again. Each segment keeps the
//! snapshot at its base (as Kafka's do), so that a rebuild after a
//! truncation reads at most the segment it cut, and a torn newest one
//! falls back to the one before; those of segments retention deleted go at
//! the next roll, but the newest of them. Without a usable snapshot (a log
//! written before klog kept them) the state is rebuilt from the log's
//! first segment, once.

use std::path::Path;

use super::aborted::{self, Aborted};
use super::{AppendInfo, Log};
use crate::error::{Error, ErrorCode, IoContext, Result};
use crate::limits;
use crate::storage::fs::{self, Vfs};
use crate::storage::producers::{ProducerState, Snapshot, Verdict, SNAPSHOT_BYTES_MAX};
use crate::storage::record::control::{self, Marker};
use crate::storage::record::{BatchHeader, Format};

/// The error for a producer's batch `h` refused with `code`, saying `why`
/// (the caller says which partition).
fn refused(h: &BatchHeader, code: ErrorCode, why: String) -> Error {
    let (id, epoch, first) = (h.producer_id, h.producer_epoch, h.base_sequence);
    Error::ProducerRefused {
        code,
        reason: format!("producer {id}: the batch of epoch {epoch} from sequence {first} {why}"),
    }
}

/// The snapshot file of the state at `offset`.
pub fn snapshot_file_name(offset: u64) -> String {
    format!("{offset:020}.snapshot")
}

/// The offset a snapshot's file name says.
pub fn parse_snapshot_file_name(name: &str) -> Option<u64> {
    crate::storage::segment::parse_offset_file_name(name, ".snapshot")
}

/// The offsets of the snapshots in `dir`, ascending.
fn snapshots(vfs: &dyn Vfs, dir: &Path) -> Result<Vec<u64>> {
    let mut offsets: Vec<u64> = vfs
        .list(dir)
        .ctx("list", dir)?
        .iter()
        .filter_map(|n| parse_snapshot_file_name(n))
        .collect();
    offsets.sort_unstable();
    Ok(offsets)
}

/// The snapshot at `offset` of `dir`, if it reads whole.
fn read_snapshot(vfs: &dyn Vfs, dir: &Path, offset: u64) -> Option<Snapshot> {
    let file = vfs.open_read(&dir.join(snapshot_file_name(offset))).ok()?;
    let len = file.len().ok()?;
    if len > SNAPSHOT_BYTES_MAX as u64 {
        return None;
    }
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0).ok()?;
    ProducerState::decode_snapshot(&bytes)
        .ok()
        .filter(|s| s.offset == offset)
}

/// What became of a producer's batch ([`Log::append_produced`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Produced {
    /// Where its records are: where it was appended, or, for a retry,
    /// where the first copy was (its `epoch` the log's undo epoch now).
    pub info: AppendInfo,
    /// A retry of a batch the log holds: nothing was appended.
    pub duplicate: bool,
}

impl Log {
    /// [`Log::append_checked`] under Kafka's rules for idempotent producers
    /// ([`ProducerState::check`]): a retry of a batch the log holds is
    /// answered with the first copy's offsets, and appends nothing; a
    /// batch out of order, from a fenced epoch or an unknown producer is
    /// [`Error::ProducerRefused`].
    pub fn append_produced(
        &mut self,
        batch: &mut [u8],
        header: BatchHeader,
        now_ms: i64,
    ) -> Result<Produced> {
        let duplicate = |base_offset, last_offset, epoch| Produced {
            info: AppendInfo {
                base_offset,
                last_offset,
                record_count: header.record_count,
                epoch,
            },
            duplicate: true,
        };
        // Its CRC32C as stored: a retry is told by the stored one.
        let header = super::append::as_stored(batch, header);
        match self.check_producer(&header)? {
            Verdict::Append => self
                .append_checked(batch, header, now_ms)
                .map(|info| Produced {
                    info,
                    duplicate: false,
                }),
            Verdict::Duplicate {
                base_offset,
                last_offset,
            } => Ok(duplicate(base_offset, last_offset, self.undo_epoch())),
            Verdict::Fenced { current } => Err(refused(
                &header,
                ErrorCode::ProducerFenced,
                format!("is older than the producer's epoch {current}"),
            )),
            Verdict::OutOfOrder { expected } => Err(refused(
                &header,
                ErrorCode::OutOfOrderSequence,
                format!("does not follow: sequence {expected} was expected"),
            )),
            Verdict::CoordinatorFenced { current } => Err(refused(
                &header,
                ErrorCode::ProducerFenced,
                format!("comes after a marker of coordinator epoch {current}"),
            )),
            Verdict::InvalidTxnState => Err(refused(
                &header,
                ErrorCode::InvalidTxnState,
                "is outside a transaction, and one of it is open".into(),
            )),
        }
    }

    /// Appends the transaction marker of producer `(id, epoch)`, as its
    /// coordinator asks: the control batch that commits or aborts its
    /// open transaction here ([`control::marker_batch`]). A marker of an
    /// epoch older than the producer's is [`Error::ProducerRefused`]
    /// (fenced).
    pub fn append_marker(
        &mut self,
        (id, epoch): (i64, i16),
        marker: Marker,
        now_ms: i64,
    ) -> Result<super::AppendInfo> {
        self.check_failed()?;
        let coordinator = marker.coordinator_epoch;
        let why = match self.producer_state()?.check_marker(id, epoch, coordinator) {
            Verdict::Fenced { current } => format!("of epoch {epoch}, older than {current}"),
            Verdict::CoordinatorFenced { current } => {
                format!("of coordinator epoch {coordinator}, older than {current}")
            }
            _ => String::new(),
        };
        if !why.is_empty() {
            return Err(Error::ProducerRefused {
                code: ErrorCode::ProducerFenced,
                reason: format!("producer {id}: a marker {why}"),
            });
        }
        let mut batch = control::marker_batch((id, epoch), marker, now_ms);
        let header = BatchHeader::decode(Format::Kafka, &batch, limits::BATCH_BYTES_MAX)?;
        self.append_checked(&mut batch, header, now_ms)
    }

    /// The offset below which every transaction is decided (Kafka's last
    /// stable offset, before the high watermark bounds it): the first
    /// offset of the oldest open transaction, or the log's end; never
    /// below the log's start (DeleteRecords past an open transaction).
    pub fn last_stable_offset(&mut self) -> Result<u64> {
        let (start, end) = (self.start_offset(), self.next_offset());
        let unstable = self.producer_state()?.first_unstable_offset();
        Ok(unstable.unwrap_or(end).max(start))
    }

    /// [`Log::append`] under Kafka's rules for idempotent producers
    /// ([`Log::append_produced`]): a producer's batch from klog's own
    /// protocol, which has no transactions (a transactional batch is
    /// refused: no coordinator would ever end its transaction).
    pub fn produce(&mut self, batch: &mut [u8], now_ms: i64) -> Result<Produced> {
        let header = self.check_whole(batch)?;
        if header.is_transactional() {
            return Err(Error::InvalidBatch(crate::error::DecodeError::Malformed(
                "batch: transactional, and klog's protocol has no transactions (Kafka's has)",
            )));
        }
        self.append_produced(batch, header, now_ms)
    }

    /// [`Log::produce`] of a batch that may be transactional: its
    /// producer's transaction was checked with the coordinator by the
    /// caller (klog's produce version 3, as Kafka's produce).
    pub fn produce_in_transaction(&mut self, batch: &mut [u8], now_ms: i64) -> Result<Produced> {
        let header = self.check_whole(batch)?;
        self.append_produced(batch, header, now_ms)
    }

    /// Whether producer `(id, epoch)` has a transaction open here.
    pub fn transaction_open(&mut self, (id, epoch): (i64, i16)) -> Result<bool> {
        let state = self.producer_state()?;
        Ok((state.get(id)).is_some_and(|s| s.epoch == epoch && s.txn_first_offset.is_some()))
    }

    /// The log's producer state, rebuilt first when an undo or a
    /// truncation left it behind the log.
    pub fn producer_state(&mut self) -> Result<&ProducerState> {
        self.fresh_producers()?;
        Ok(&self.producers)
    }

    /// What a leader does with a producer's batch `header` now
    /// ([`ProducerState::check`]).
    pub fn check_producer(&mut self, header: &BatchHeader) -> Result<Verdict> {
        Ok(self.producer_state()?.check(header))
    }

    /// The count of undos so far: what [`Log::fate`] takes as the epoch of
    /// records known to be in the log now (a duplicate's first copy).
    pub fn undo_epoch(&self) -> u64 {
        self.undos.epoch()
    }

    /// The producers known (as of the last rebuild, when stale).
    pub fn producers_known(&self) -> usize {
        self.producers.len()
    }

    /// Forgets producers silent longer than `idle_ms` at `now_ms`; how many.
    pub fn expire_producers(&mut self, now_ms: i64, idle_ms: i64) -> Result<usize> {
        self.fresh_producers()?;
        Ok(self.producers.expire(now_ms, idle_ms))
    }

    /// Takes a batch just written (`bytes`, all of it) into the state.
    pub(super) fn apply_producer(&mut self, header: &BatchHeader, bytes: &[u8]) {
        debug_assert!(!self.producers_stale, "applied to a stale state");
        apply(&mut self.producers, &mut self.aborted, header, bytes);
    }

    /// Rebuilds the state when it is stale.
    pub(super) fn fresh_producers(&mut self) -> Result<()> {
        if self.producers_stale {
            if self.active().written_offset() < self.next_offset() {
                let written = self.active_mut().write_pending();
                self.note_undo();
                written?;
            }
            self.load_producers()?;
        }
        Ok(())
    }

    /// Builds the state, and the aborted transactions, from the newest
    /// usable snapshot and the log after it, deleting the snapshots past
    /// the log's end. The file of aborted transactions is believed when
    /// it holds the snapshot's count of them below its offset; if not, or
    /// with no snapshot, both come from the whole log.
    pub(super) fn load_producers(&mut self) -> Result<()> {
        let next = self.next_offset();
        self.remove_snapshots_from(next + 1)?;
        let (stored, torn) = aborted::read(&*self.vfs, &self.dir)?;
        let newest = snapshots(&*self.vfs, &self.dir)?
            .into_iter()
            .rev()
            .find_map(|offset| read_snapshot(&*self.vfs, &self.dir, offset));
        let file_entries = stored.len();
        let mut kept = stored;
        let (from, mut state) = match newest {
            Some(s) => {
                kept.retain(|a| a.last_offset < s.offset);
                if kept.len() as u64 == s.aborted {
                    (s.offset, s.state)
                } else {
                    kept.clear();
                    (0, ProducerState::default())
                }
            }
            None => {
                kept.clear();
                (0, ProducerState::default())
            }
        };
        let mut found = Aborted::loaded(kept, file_entries, torn);
        self.scan_producers((from, next), &mut state, &mut found)?;
        self.producers = state;
        self.aborted = found;
        self.producers_stale = false;
        Ok(())
    }

    /// Applies the batches from `from` to `to` (as written in the files)
    /// to `state` and `found`; a batch that does not decode (damage a
    /// scrub will find) ends it.
    fn scan_producers(
        &self,
        (from, to): (u64, u64),
        state: &mut ProducerState,
        found: &mut Aborted,
    ) -> Result<()> {
        let first = self.segments.range(..=from).next_back().map(|(b, _)| *b);
        let mut buf = Vec::new();
        for segment in self.segments.range(first.unwrap_or(0)..).map(|(_, s)| s) {
            if segment.format != Format::Kafka || segment.next_offset <= from {
                continue;
            }
            let file = segment.file()?;
            let (position, _) = segment.scan_start(from);
            let range = (position, segment.written_size());
            let offsets = (from, to);
            let into = (&mut *state, &mut *found);
            let on = scan_headers(&*file, range, offsets, (&mut buf, SCAN_CHUNK_BYTES), into)
                .ctx("read", &segment.path)?;
            if !on {
                break;
            }
        }
        Ok(())
    }

    /// Writes the snapshot of the state at the next offset (a roll's base,
    /// before the roll; a close's end), and deletes those below the log's
    /// first segment but the newest of them. A snapshot written before a
    /// roll that then fails stays: it is true of the records below it.
    pub(super) fn snapshot_producers(&mut self) -> Result<()> {
        self.fresh_producers()?;
        self.store_aborted()?;
        let offset = self.next_offset();
        let count = self.aborted.entries.len() as u64;
        let bytes = self.producers.encode_snapshot(offset, count);
        self.write_snapshot(offset, &bytes)?;
        let first = self.segments.keys().next().copied().unwrap_or(0);
        let all = snapshots(&*self.vfs, &self.dir)?;
        let below = all.iter().filter(|o| **o < first).count();
        for offset in &all[..below.saturating_sub(1)] {
            let path = self.dir.join(snapshot_file_name(*offset));
            self.vfs.remove(&path).ctx("remove", &path)?;
        }
        Ok(())
    }

    /// A temporary file, fsynced, renamed to the snapshot's name (a lost
    /// rename leaves the older snapshots, and the temporary file recovery
    /// removes).
    fn write_snapshot(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let path = self.dir.join(snapshot_file_name(offset));
        let tmp = self.dir.join(format!("{}.tmp", snapshot_file_name(offset)));
        let file = self.vfs.open(&tmp, true).ctx("create", &tmp)?;
        file.set_len(0).ctx("truncate", &tmp)?;
        file.write_all_at(bytes, 0).ctx("write", &tmp)?;
        file.sync_data().ctx("fsync", &tmp)?;
        self.vfs.rename(&tmp, &path).ctx("rename", &tmp)
    }

    /// Deletes the snapshots at `first` and past it, durably (the
    /// directory fsynced when there were any).
    pub(super) fn remove_snapshots_from(&self, first: u64) -> Result<()> {
        let past: Vec<u64> = snapshots(&*self.vfs, &self.dir)?
            .into_iter()
            .filter(|o| *o >= first)
            .collect();
        for o in &past {
            let path = self.dir.join(snapshot_file_name(*o));
            self.vfs.remove(&path).ctx("remove", &path)?;
        }
        if !past.is_empty() {
            fs::sync_directory(&*self.vfs, &self.dir)?;
        }
        Ok(())
    }
}

/// Bytes a header walk reads at a time.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// Takes the stored batch `header` (`bytes`: all of it, or at least all
/// of a control batch) into `state`, and the transaction its abort marker
/// ends into `aborted`.
fn apply(state: &mut ProducerState, aborted: &mut Aborted, header: &BatchHeader, bytes: &[u8]) {
    if !header.is_control() {
        state.apply(header);
    } else if let Some(marker) = control::marker_of(header, bytes) {
        if let Some(txn) = state.apply_marker(header, marker) {
            aborted.push(txn);
        }
    }
}

/// Applies the batches in `range` of `file` whose offsets are in
/// `from..to` to `state` and `aborted`, reading only headers (and control
/// batches whole), `chunk` bytes at a time into `buf`, jumping over each
/// batch's records, no CRC32C checked (the batches were checked as they
/// were appended, or by recovery; Kafka's rebuild trusts them too).
/// Whether the walk went to the end of the range (no bad or cut batch,
/// nothing at or past `to`).
fn scan_headers(
    file: &dyn crate::storage::fs::VFile,
    (position, end): (u64, u64),
    (from, to): (u64, u64),
    (buf, chunk): (&mut Vec<u8>, usize),
    (state, aborted): (&mut ProducerState, &mut Aborted),
) -> std::io::Result<bool> {
    let mut pos = position;
    while pos < end {
        let n = (end - pos).min(chunk as u64) as usize;
        buf.resize(n, 0);
        file.read_exact_at(buf, pos)?;
        let mut at = 0;
        while at < n {
            match BatchHeader::decode(Format::Kafka, &buf[at..], limits::BATCH_BYTES_MAX) {
                // A control batch across the chunk's end: read on from it.
                Ok(h) if h.is_control() && at + h.total_bytes() as usize > n && at > 0 => break,
                Ok(h) if pos + at as u64 + h.total_bytes() <= end && h.base_offset < to => {
                    let total = h.total_bytes() as usize;
                    let small = h.total_bytes() <= control::CONTROL_BATCH_BYTES_MAX;
                    // A control batch longer than the chunk is read whole.
                    let whole = h.is_control() && small && at + total > n;
                    if h.base_offset >= from && whole {
                        let mut bytes = vec![0; total];
                        file.read_exact_at(&mut bytes, pos + at as u64)?;
                        apply(state, aborted, &h, &bytes);
                    } else if h.base_offset >= from {
                        apply(state, aborted, &h, &buf[at..]);
                    }
                    at += total;
                }
                // A header across the chunk's end: read on from it.
                Err(e) if e.is_truncated() && at > 0 => break,
                _ => return Ok(false),
            }
        }
        pos += at as u64;
    }
    Ok(true)
}

#[cfg(test)]
mod tests;
