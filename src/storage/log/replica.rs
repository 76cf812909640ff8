//! A follower's side of replication, in the log: appending the leader's
//! batches as they are, and cutting the log back where it stops agreeing
//! with the leader's (KIP-101/279), or emptying it when the leader no
//! longer has what comes next.
//!
//! # A follower's appends
//!
//! [`Log::append_replicated`] writes the leader's batches byte for byte at
//! the offsets the leader gave them: no restamp, so that the follower's
//! segments hold the same batches as the leader's (segment rolls may
//! differ). Each batch is checked whole first, as a producer's is, and must
//! start at the log's next offset and carry an epoch no lower than the
//! latest in the epoch file; a new epoch is recorded there, durably, before
//! its first batch is written, as a leader's own appends do.
//!
//! A batch may also start past the next offset: the leader's cleaner took
//! the records between ([`crate::storage::cleaner`]). The follower then
//! writes into a segment that takes gaps
//! ([`crate::storage::segment`], version 3 with the gaps flag): its
//! active segment's header is rewritten so when it is empty, else it
//! rolls into a new one; the segments it rolls into after that take gaps
//! too. A gap wider than a segment spans (2^32 offsets) starts a segment
//! with gaps of its own at the batch, past where the one before ends. The epoch a batch starts is recorded from the log's end before
//! it, not from its base past a gap: never later than the leader's.
//!
//! A cut into a segment with gaps ends the log where the last batch kept
//! ends, which may be below the offset asked for (a cut in a gap); a cut
//! into a cleaned segment first rewrites its header without its end
//! (fsynced), then cuts. A power cut after the segments past it went and
//! before that rewrite leaves the cleaned segment last, whole (the cut not
//! made, as any a crash stops): the next open goes on at its end, in a new
//! segment, never inside it.
//!
//! # Truncation, and why it is durable when it returns
//!
//! [`Log::truncate_to`] first drops, unwritten, the appends gathered in
//! memory past the cut, then flushes the rest (so that every segment is
//! durable and under its own name), then:
//!
//! 1. removes the segments after the one holding the cut, newest first
//!    (the log file before its indexes), and fsyncs the directory: a crash
//!    between two removals leaves whole segments, never a gap;
//! 2. cuts that segment at the batch holding the cut and fsyncs it: no
//!    power cut afterwards brings a removed record back; its index entries
//!    past the cut go (the index is rewritten and synced);
//! 3. rewrites the epoch file without the epochs starting at or after the
//!    cut ([`crate::storage::epoch::Epochs::truncate_from`]), after the
//!    records: the file never lacks the epoch of a batch on disk;
//! 4. lowers the recovery point to the cut when it is past it.
//!
//! A failure after step 1 began stops the log ([`Log::fail`]): only a
//! reopen (recovery) can tell where it ends.
//!
//! [`Log::reset_to`] removes every segment (oldest first: a crash leaves a
//! log that starts later), fsyncs the directory, writes an empty epoch
//! file, writes the recovery point at the new start, and only then creates
//! the new, empty segment there. A crash before that leaves a directory
//! without segments, which opening starts again at its recovery point.
//!
//! # Flushes begun before a truncation
//!
//! A truncation waits for the fsyncs of the [`super::PendingFlush`]es
//! begun before it (they need no lock; [`Log::flush`] waits the same way),
//! then voids them: completing one shows nothing, and its next offset
//! reads 0; a [`super::Publish`] made before shows nothing either, and
//! writes no recovery point. Appends the truncation removed get
//! [`super::Fate::Undone`].

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{check_stored_batch, Log, LogConfig};
use crate::error::{Error, Result};
use crate::limits;
use crate::storage::epoch::Epochs;
use crate::storage::fs::{self, Vfs};
use crate::storage::index;
use crate::storage::record::{BatchHeader, Format};
use crate::storage::recover;
use crate::storage::recover::Damage;
use crate::storage::segment::Segment;
use crate::sync::lock;

/// What a follower's append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaAppend {
    /// Batches appended.
    pub batches: u32,
    /// Records in them.
    pub records: u64,
    /// The log's next offset after them.
    pub next_offset: u64,
}

impl Log {
    /// A follower's append: `batches` are zero or more whole Kafka batches
    /// exactly as the leader stored them (a leader serves its legacy
    /// segments converted). Each is checked whole (header, CRC32C, every
    /// record, the format's record size limit, like [`check_stored_batch`]:
    /// not the topic's, which a leader applied when it took the record); its base
    /// offset must not be below the log's next offset (else an error naming
    /// both offsets: an overlap), and may be past it (a gap its leader's
    /// cleaner left: the active segment becomes one that takes gaps, see
    /// the module's docs); its leader epoch must not be below the
    /// latest in the epoch file (else an error). A batch whose epoch is new
    /// is recorded in the epoch file, durably, before it is written, and
    /// raises the log's leader epoch to it. Bytes are written unchanged, so
    /// the follower's segment is byte-identical to the leader's for the same
    /// batches. Batches before a bad one stay appended; the error says which
    /// offset was refused. A trailing partial batch is an error.
    ///
    /// A damaged batch is [`Error::Corrupt`] (its `path` the partition
    /// directory, its `position` the batch's in `batches`); an overlap or
    /// a lower epoch is [`Error::Config`] (the caller's
    /// mistake, as a lower [`Log::set_leader_epoch`] is). After a failed
    /// write (a full disk) the appends gathered in memory are undone with
    /// it: [`Log::next_offset`] says how far the log goes.
    pub fn append_replicated(&mut self, batches: &[u8], now_ms: i64) -> Result<ReplicaAppend> {
        assert!(self.writable, "append to a read-only log");
        self.check_failed()?;
        let mut done = ReplicaAppend {
            batches: 0,
            records: 0,
            next_offset: self.next_offset(),
        };
        let mut position = 0;
        let mut result = Ok(());
        while position < batches.len() {
            match self.append_one_replicated(batches, position, now_ms) {
                Ok(header) => {
                    done.batches += 1;
                    done.records += u64::from(header.record_count);
                    position += header.total_bytes() as usize;
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.note_undo();
        if result.is_ok()
            && self.write_failing
            && self.active().written_offset() == self.next_offset()
        {
            self.write_failing = false;
        }
        done.next_offset = self.next_offset();
        result.map(|()| done)
    }

    /// Checks and appends the batch at `position` of `batches`.
    fn append_one_replicated(
        &mut self,
        batches: &[u8],
        position: usize,
        now_ms: i64,
    ) -> Result<BatchHeader> {
        let next = self.next_offset();
        let rest = &batches[position..];
        let header =
            BatchHeader::decode(Format::Kafka, rest, limits::BATCH_BYTES_MAX).map_err(|e| {
                let why = if e.is_truncated() {
                    format!("a partial batch ({e})")
                } else {
                    e.to_string()
                };
                self.refused(position, next, why)
            })?;
        let total = header.total_bytes() as usize;
        let Some(bytes) = rest.get(..total) else {
            let why = format!("a partial batch: {total} bytes long, {} given", rest.len());
            return Err(self.refused(position, next, why));
        };
        // The format's limit, not this topic's: a record its leader took
        // is copied whatever `max.message.bytes` says here now (lowered
        // since, or not yet raised on this broker).
        let limits = LogConfig {
            record_bytes_max: limits::RECORD_BYTES_MAX_LIMIT,
            ..LogConfig::default()
        };
        check_stored_batch(bytes, &limits)
            .map_err(|e| self.refused(position, next, e.to_string()))?;
        let span = self.check_place(&header, next)?;
        self.fresh_producers()?;
        if span > u64::from(u32::MAX) {
            // Further than a segment spans: a segment of its own.
            self.roll_past_gap(header.base_offset)?;
        } else {
            self.maybe_roll(total as u64, span, now_ms)?;
            if header.base_offset > next {
                // Its leader's cleaner took the records between.
                self.take_gaps()?;
            }
        }
        // A new epoch starts where this log ended before the batch, not at
        // its base past a gap: the leader's epoch began somewhere in the
        // gap, and an epoch file starting it later would answer a later
        // end for the epoch before (KIP-101), letting a replica keep an
        // uncommitted tail of it. Earlier only truncates what the leader's
        // cleaner took.
        self.record_epoch(header.leader_epoch, next)?;
        self.leader_epoch = self.leader_epoch.max(header.leader_epoch);
        self.write_to_active(bytes, &header, now_ms)?;
        Ok(header)
    }

    /// Checks that a replicated batch (its `header`) may come where the
    /// log's next offset is `next`: not below it (an overlap; past it is a
    /// gap its leader's cleaner left, taken), of an epoch no lower than the
    /// epoch file's latest. Returns the offsets it reaches past `next`.
    fn check_place(&self, header: &BatchHeader, next: u64) -> Result<u64> {
        if header.base_offset < next {
            return Err(Error::Config(format!(
                "{}: replicated batch at offset {} refused: the log's next offset is {next} \
                 (an overlap)",
                self.dir.display(),
                header.base_offset
            )));
        }
        if let Some(latest) = self
            .epochs
            .latest()
            .filter(|e| e.epoch > header.leader_epoch)
        {
            return Err(Error::Config(format!(
                "{}: replicated batch at offset {next} refused: its leader epoch {} is below \
                 epoch {} (from offset {}) in the epoch file",
                self.dir.display(),
                header.leader_epoch,
                latest.epoch,
                latest.start_offset
            )));
        }
        Ok(header.next_offset() - next)
    }

    /// The error for a replicated batch at `position` of the bytes given,
    /// at offset `next`, that does not decode.
    fn refused(&self, position: usize, next: u64, why: String) -> Error {
        Error::Corrupt {
            path: self.dir.clone(),
            position: position as u64,
            reason: format!("replicated batch at offset {next} refused: {why}"),
        }
    }

    /// Removes every record at or past `offset` (a cut inside a batch
    /// removes that whole batch), so that [`Log::next_offset`] becomes
    /// `offset` (or the base of the batch holding it); returns the new next
    /// offset. At or past the end no record is removed (the epoch file
    /// still loses an epoch starting at `offset` that has no batch, so that
    /// the leader's older epoch can follow there). Below
    /// [`Log::start_offset`] the log is emptied and starts again at
    /// `offset`, as [`Log::reset_to`] does.
    ///
    /// Durable when it returns: no power cut afterwards brings a removed
    /// record back (see the module's steps); the epoch file loses the
    /// epochs from the cut on; the recovery point, the flushed and the
    /// visible offsets are never above the cut. Appends gathered in memory
    /// past the cut are dropped unwritten. A [`super::PendingFlush`] still
    /// out is waited for (its fsync needs no lock), then void. The log's
    /// leader epoch is unchanged (a higher one may be set next).
    pub fn truncate_to(&mut self, offset: u64) -> Result<u64> {
        assert!(self.writable, "truncate a read-only log");
        self.settle_outside()?;
        if offset < self.segments_start() {
            self.reset_to(offset)?;
            return Ok(offset);
        }
        if offset >= self.next_offset() {
            self.truncate_epochs(offset)?;
            return Ok(self.next_offset());
        }
        // Gathered appends past the cut never reach the file; the rest,
        // and every rolled segment, are made durable under their names.
        let active = self.active_mut();
        let gathered_from = offset.max(active.written_offset());
        active.truncate_to(gathered_from)?;
        self.flush()?;
        match self.cut(offset) {
            Ok(next) => {
                self.lower_start_to_end()?;
                Ok(next)
            }
            Err(e) => Err(self.fail(&e)),
        }
    }

    /// Removes every record from `damage` on (found by a scrub:
    /// [`crate::storage::scrub`]), cutting its segment at the damaged
    /// batch's position without reading its header; as
    /// [`Log::truncate_to`] its offset otherwise (durable when it
    /// returns). Gathered appends are written first. Returns the new next
    /// offset.
    pub fn truncate_before_damage(&mut self, damage: &Damage) -> Result<u64> {
        assert!(self.writable, "truncate a read-only log");
        self.settle_outside()?;
        let held = self
            .segments
            .range(..=damage.offset)
            .next_back()
            .is_some_and(|(_, s)| s.path == damage.segment);
        if !held {
            return Err(Error::Corrupt {
                path: damage.segment.clone(),
                position: damage.position,
                reason: format!("no segment of this log holds offset {}", damage.offset),
            });
        }
        self.flush()?;
        match self.cut_at(damage.offset, Some(damage.position)) {
            Ok(next) => {
                self.lower_start_to_end()?;
                Ok(next)
            }
            Err(e) => Err(self.fail(&e)),
        }
    }

    /// Empties the log and starts it again at `offset` (a follower far
    /// behind a leader whose retention deleted what it needs); durable when
    /// it returns; the epoch file keeps no entry (the next batch's epoch
    /// starts it). A [`super::PendingFlush`] still out is waited for, then
    /// void; the log's leader epoch is unchanged.
    pub fn reset_to(&mut self, offset: u64) -> Result<()> {
        assert!(self.writable, "reset a read-only log");
        self.settle_outside()?;
        let segment = match self.reset_files(offset) {
            Ok(segment) => segment,
            Err(e) => return Err(self.fail(&e)),
        };
        self.segments = BTreeMap::from([(offset, segment)]);
        self.sealed.clear();
        self.epochs = Epochs::new();
        self.after_truncation(offset, 0);
        self.lower_start_to_end()
    }

    /// Refuses when the log stopped; waits for the fsyncs of the
    /// [`super::PendingFlush`]es out, and refuses when one failed.
    fn settle_outside(&mut self) -> Result<()> {
        self.check_failed()?;
        if self.outside.settled_failed() {
            self.check_failed()?;
        }
        Ok(())
    }

    /// Removes the segments after the one holding `offset` and cuts that
    /// one there (every segment durable and named: after a flush); then the
    /// epochs and the recovery point. Returns the new next offset.
    fn cut(&mut self, offset: u64) -> Result<u64> {
        self.cut_at(offset, None)
    }

    /// [`Log::cut`], the batch holding `offset` starting at `position` of
    /// its segment when the caller knows it.
    fn cut_at(&mut self, offset: u64, position: Option<u64>) -> Result<u64> {
        debug_assert!(self.sealed.is_empty(), "a cut after a flush");
        let base = *self
            .segments
            .range(..=offset)
            .next_back()
            .expect("the cut is at or past the start")
            .0;
        let later = self.segments.split_off(&(base + 1));
        let was_active = later.is_empty();
        // Newest first: a crash between two removals leaves whole segments.
        for (_, segment) in later.into_iter().rev() {
            remove_segment(&*self.vfs, segment)?;
        }
        if !was_active {
            fs::sync_directory(&*self.vfs, &self.dir)?;
        }
        let (vfs, slots) = (Arc::clone(&self.vfs), self.config.index_slots());
        // The cleaner's checkpoint first: lowered early is always safe,
        // and no crash after the cut leaves what is appended again there
        // counted as cleaned.
        if super::clean::read_checkpoint(&*vfs, &self.dir) > offset {
            super::clean::write_checkpoint(&*vfs, &self.dir, offset)?;
        }
        let segment = self.segments.get_mut(&base).expect("the cut segment");
        if segment.end.is_some() && offset < segment.next_offset {
            // A cleaned segment's end stops holding once it is cut: its
            // header first says so (an end left there would make its
            // next open start the log past the cut, skipping offsets).
            segment.allow_gaps()?;
        }
        let next = match position {
            Some(position) => segment.truncate_at(position, offset)?,
            None => segment.truncate_to(offset)?,
        };
        if !was_active {
            segment.activate(&*vfs, slots)?;
            if let Some(index) = &segment.index {
                index.flush()?;
            }
        }
        self.remove_snapshots_from(next + 1)?;
        self.truncate_epochs(next)?;
        self.lower_recovery_point(next)?;
        self.after_truncation(next, next);
        Ok(next)
    }

    /// The files of a reset: the old segments removed (oldest first),
    /// the directory synced, the epoch file emptied, the recovery point at
    /// `offset`, then the new segment there, durably.
    fn reset_files(&mut self, offset: u64) -> Result<Segment> {
        for segment in self.segments.values() {
            remove_files(&*self.vfs, &segment.path)?;
        }
        self.remove_snapshots_from(0)?;
        fs::sync_directory(&*self.vfs, &self.dir)?;
        Epochs::new().write(&*self.vfs, &self.dir)?;
        self.lower_recovery_point(offset)?;
        let slots = self.config.index_slots();
        Segment::create(
            &self.vfs,
            &self.dir,
            offset,
            slots,
            self.spares().map(|s| &**s),
        )
    }

    /// Removes the epochs starting at or after `offset` from the epoch
    /// file, durably, when there are any.
    fn truncate_epochs(&mut self, offset: u64) -> Result<()> {
        let mut epochs = self.epochs.clone();
        if epochs.truncate_from(offset) {
            epochs.write(&*self.vfs, &self.dir)?;
            self.epochs = epochs;
        }
        Ok(())
    }

    /// Counts a truncation to `offset` and brings the recovery point down
    /// to it (written only when the file's is past it), under the lock a
    /// [`super::Publish`] writes it under: one made before the truncation
    /// then writes none.
    fn lower_recovery_point(&mut self, offset: u64) -> Result<()> {
        // Records appended again past the cut are dirty, after a restart
        // too (else a tombstone fetched again could go at its first clean).
        self.cleaned_to = self.cleaned_to.min(offset);
        if super::clean::read_checkpoint(&*self.vfs, &self.dir) > offset {
            super::clean::write_checkpoint(&*self.vfs, &self.dir, offset)?;
        }
        let mut written = lock(&self.recovery_written);
        self.truncations.fetch_add(1, Ordering::SeqCst);
        if recover::read_recovery_point(&*self.vfs, &self.dir) > offset {
            recover::write_recovery_point(&*self.vfs, &self.dir, offset)?;
        }
        *written = (*written).min(offset);
        Ok(())
    }

    /// The log's bookkeeping after a truncation that left it durable and
    /// named whole, ending at `next`: the appends from `undone_from` on
    /// are undone.
    fn after_truncation(&mut self, next: u64, undone_from: u64) {
        let active = self.active();
        let end = (active.base_offset, active.size);
        self.flushed_offset = next;
        self.visible = end;
        self.durable = end;
        self.unflushed_records = 0;
        self.oldest_unflushed_ms = None;
        self.write_failing = false;
        self.published = self.renames;
        self.undos.note(undone_from, true);
        self.producers_stale = true;
    }
}

/// Removes a segment's files: the log first (an index left behind by a
/// crash is an orphan that recovery removes).
fn remove_segment(vfs: &dyn Vfs, segment: Segment) -> Result<()> {
    let path = segment.path.clone();
    // Its index maps go before its files.
    drop(segment);
    remove_files(vfs, &path)
}

/// Removes the files of the segment whose log is `path`, the log first.
fn remove_files(vfs: &dyn Vfs, path: &std::path::Path) -> Result<()> {
    let (offsets, times) = index::index_paths(path);
    for path in [path, &offsets, &times] {
        match vfs.remove(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("remove", path, e))
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::log::{LogConfig, OpenOptions};
    use crate::storage::record::{self, BatchBuilder};
    use std::path::Path;

    fn batch(base: u64, epoch: u32) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        b.push(1000 + base as i64, None, &[], b"v");
        b.push(1001 + base as i64, None, &[], b"w");
        let mut bytes = b.finish().to_vec();
        record::stamp(&mut bytes, base, epoch);
        bytes
    }

    fn log(sim: &SimFs) -> Log {
        let dir = Path::new("/p");
        sim.create_dir_all_durable(dir);
        let config = LogConfig {
            segment_bytes: 4096,
            retention_ms: None,
            visible_after_flush: true,
            write_buffer_bytes: 1 << 16,
            ..LogConfig::default()
        };
        let options = OpenOptions {
            writable: true,
            lock: false,
        };
        Log::open(Arc::new(sim.clone()), dir, config, options).unwrap()
    }

    /// Segments rolled and not yet durable (under temporary names) are
    /// made durable and named before the cut, so the cut meets a clean
    /// directory and leaves nothing to publish.
    #[test]
    fn a_cut_into_a_rolled_segment_not_yet_durable_leaves_all_durable_and_named() {
        let sim = SimFs::new();
        let mut log = log(&sim);
        for base in (0..12).step_by(2) {
            log.append_replicated(&batch(base, 1), 0).unwrap();
            if base % 4 == 2 {
                log.roll().unwrap();
            }
        }
        assert!(!log.sealed.is_empty(), "rolled segments wait for a flush");
        assert!(log.segments.values().any(|s| s.temp.is_some()));
        assert_eq!(log.truncate_to(5).unwrap(), 4);
        assert!(log.sealed.is_empty());
        assert!(log.segments.values().all(|s| s.temp.is_none()));
        assert_eq!(log.published, log.renames);
        assert_eq!(log.durable, log.visible);
        assert_eq!(log.visible, (4, log.active().size));
        assert_eq!(log.unflushed(), (0, None));
        let names = sim.files();
        assert!(
            names.keys().all(|p| !p.to_string_lossy().contains("next-")),
            "{:?}",
            names.keys()
        );
    }

    /// The leader's epoch 2 began at offset 2, whose first batches its
    /// cleaner took: the follower copies epoch 2's first batch left, at
    /// 10, and says epoch 1 ended no later than the leader's did (a later
    /// end would let a replica keep an uncommitted tail of epoch 1).
    #[test]
    fn an_epoch_begun_in_a_gap_starts_where_the_log_ended() {
        let sim = SimFs::new();
        let mut log = log(&sim);
        log.append_replicated(&batch(0, 1), 0).unwrap();
        log.append_replicated(&batch(10, 2), 0).unwrap();
        assert_eq!(log.next_offset(), 12);
        assert_eq!(log.end_offset_for_epoch(1), Some((1, 2)));
        assert_eq!(log.end_offset_for_epoch(2), Some((2, 12)));
    }

    #[test]
    fn damaged_bytes_are_corrupt_and_a_batch_out_of_place_is_the_callers_mistake() {
        let sim = SimFs::new();
        let mut log = log(&sim);
        log.append_replicated(&batch(0, 2), 0).unwrap();
        let mut damaged = batch(4, 2);
        damaged[40] ^= 1;
        let mut bytes = batch(2, 2);
        bytes.extend_from_slice(&damaged);
        match log.append_replicated(&bytes, 0).unwrap_err() {
            Error::Corrupt {
                position, reason, ..
            } => {
                assert_eq!(position, batch(2, 2).len() as u64);
                assert!(reason.contains("offset 4"), "{reason}");
            }
            e => panic!("{e}"),
        }
        assert_eq!(log.next_offset(), 4);
        for (bytes, needle) in [
            (batch(3, 2), "an overlap"),
            (batch(4, 1), "epoch 1 is below"),
        ] {
            match log.append_replicated(&bytes, 0).unwrap_err() {
                Error::Config(why) => assert!(why.contains(needle), "{why}"),
                e => panic!("{e}"),
            }
        }
        assert_eq!(log.next_offset(), 4);
    }

    /// A follower copies a record its leader took under a larger
    /// `max.message.bytes` than its own is now.
    #[test]
    fn a_follower_copies_a_record_larger_than_its_topics_limit() {
        let sim = SimFs::new();
        let mut log = log(&sim);
        let mut b = BatchBuilder::new();
        b.push(1000, None, &[], &vec![b'x'; 2000]);
        let mut bytes = b.finish().to_vec();
        record::stamp(&mut bytes, 0, 1);
        let mut lowered = log.config().clone();
        lowered.record_bytes_max = 1000;
        log.set_policy(&lowered).unwrap();
        log.append_replicated(&bytes, 0).unwrap();
        assert_eq!(log.next_offset(), 1);
    }
}
