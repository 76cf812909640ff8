//! Flushing, and the bookkeeping of the faults a log survives (see
//! "Faults" in [`super`]): the undos of failed writes and what they mean
//! for an append's [`Fate`], the fsyncs run outside the log's lock, and the
//! stop after a failed fsync.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::roll::{Publish, Sealed};
use super::Log;
use crate::error::{Error, IoContext, Result};
use crate::storage::fs::VFile;

/// What became of an append whose answer waits: appends gathered in memory
/// are undone together when writing them fails (a full disk), and their
/// offsets go to the next appends; an answer must not speak for records
/// that were undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Its bytes are in the segment file.
    InFile,
    /// Still gathered in memory.
    Gathered,
    /// A failed write undid it; it will never appear.
    Undone,
    /// Too many undos since: the log no longer knows (answer nothing).
    Unknown,
}

/// Undos remembered for [`Log::fate`]; an answer older than this many
/// undos gets [`Fate::Unknown`].
const UNDOS_REMEMBERED: usize = 1024;

/// The undos a log remembers, for [`Log::fate`]. Each failed write that
/// undoes appends, and each truncation, starts a new epoch; an append
/// carries the epoch it was made in.
#[derive(Debug, Default)]
pub(super) struct Undos {
    /// Bumped by each undo.
    epoch: u64,
    /// For recent undos: the epoch each started, the first offset it
    /// undid, and whether it was a truncation (which removes records that
    /// were in the file, not only gathered ones).
    recent: VecDeque<(u64, u64, bool)>,
}

impl Undos {
    /// The epoch appends are made in now.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Notes an undo of the appends from offset `first_undone` on: of
    /// those gathered in memory (a failed write), or of all (`truncation`).
    pub(super) fn note(&mut self, first_undone: u64, truncation: bool) {
        self.epoch += 1;
        self.recent
            .push_back((self.epoch, first_undone, truncation));
        if self.recent.len() > UNDOS_REMEMBERED {
            self.recent.pop_front();
        }
    }

    /// What the undos say of the records up to `last_offset` appended in
    /// `epoch`: undone, unknown (too many undos since), or nothing (`None`:
    /// no undo took them back).
    fn fate(&self, epoch: u64, last_offset: u64) -> Option<Fate> {
        if epoch == self.epoch {
            return None;
        }
        // Of the failed writes, only the first undo after the append can
        // have undone it: if it did not, the records were in the file by
        // then. A truncation removes records from the file too.
        if !self.recent.iter().any(|(e, ..)| *e == epoch + 1) {
            return Some(Fate::Unknown);
        }
        self.recent
            .iter()
            .filter(|(e, _, truncation)| *e == epoch + 1 || (*e > epoch && *truncation))
            .any(|(_, from, _)| last_offset >= *from)
            .then_some(Fate::Undone)
    }
}

/// The fsyncs a log's [`PendingFlush`]es run outside its lock: how many
/// are begun and not yet done, and whether one failed.
///
/// Linux reports a writeback error to one fsync only: an fsync of the same
/// file under the lock (a roll, a close) that runs while an outside one
/// fails may "succeed" for the pages that were lost. So the log's own
/// fsync is believed only once no outside one is pending, and none failed.
#[derive(Debug, Default)]
pub(super) struct OutsideSyncs {
    /// (begun and not done, one failed).
    state: Mutex<(u32, bool)>,
    done: Condvar,
}

impl OutsideSyncs {
    fn state(&self) -> MutexGuard<'_, (u32, bool)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks one done (`failed` if it did), once.
    fn finish(&self, failed: bool) {
        let mut state = self.state();
        state.0 -= 1;
        state.1 |= failed;
        self.done.notify_all();
    }

    /// Waits until none is pending; whether one failed.
    pub(super) fn settled_failed(&self) -> bool {
        let mut state = self.state();
        while state.0 > 0 {
            state = self.done.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.1
    }
}

/// A flush begun under the log's lock and synced outside it, so that
/// appends go on while the disk works (the broker's group commit): the
/// active segment's data, and the segments rolled since the last flush
/// (their data and their indexes). The log counts it as pending from
/// [`Log::begin_flush`] until it is synced or dropped.
///
/// A truncation of the log ([`Log::truncate_to`], [`Log::reset_to`]) waits
/// for the syncs of the flushes begun before it, and voids them: their
/// [`Log::complete_flush`] shows nothing, and their
/// [`PendingFlush::next_offset`] is 0 (the truncation itself made what it
/// kept durable).
#[derive(Debug)]
pub struct PendingFlush {
    outside: Arc<OutsideSyncs>,
    /// The log's truncations so far, and when it began.
    truncations: (Arc<AtomicU64>, u64),
    /// Whether `sync` ran (and told `outside`).
    finished: AtomicBool,
    file: Arc<dyn VFile>,
    path: PathBuf,
    segment_base: u64,
    next_offset: u64,
    size: u64,
    /// The segments rolled before it began, oldest first.
    sealed: Vec<Sealed>,
}

impl PendingFlush {
    /// Makes the records it covers durable (fdatasync), the rolled segments
    /// first, oldest first; no lock needed.
    pub fn sync(&self) -> Result<()> {
        let synced = self
            .sealed
            .iter()
            .try_for_each(Sealed::sync)
            .and_then(|()| self.file.sync_data().ctx("fsync", &self.path));
        if !self.finished.swap(true, Ordering::SeqCst) {
            self.outside.finish(synced.is_err());
        }
        synced
    }

    /// One past the last record it covers; 0 once the log was truncated
    /// after it began (it speaks for no record any more).
    pub fn next_offset(&self) -> u64 {
        if self.is_void() {
            return 0;
        }
        self.next_offset
    }

    /// Whether the log was truncated after it began.
    fn is_void(&self) -> bool {
        self.truncations.0.load(Ordering::SeqCst) != self.truncations.1
    }
}

impl Drop for PendingFlush {
    fn drop(&mut self) {
        // Never synced: nothing to wait for.
        if !self.finished.swap(true, Ordering::SeqCst) {
            self.outside.finish(false);
        }
    }
}

impl Log {
    /// Records an undo the active segment did (a failed write): a new
    /// epoch, remembered with the first offset it undid.
    pub(super) fn note_undo(&mut self) {
        let Some(from) = self.active_mut().take_undone() else {
            return;
        };
        self.undos.note(from, false);
        self.producers_stale = true;
        self.write_failing = true;
        // Only appends past the last write are undone, never flushed ones.
        self.unflushed_records = self.next_offset() - self.flushed_offset;
        if self.unflushed_records == 0 {
            self.oldest_unflushed_ms = None;
        }
        if !self.config.hides_unflushed() {
            self.visible = (self.active().base_offset, self.active().size);
        }
    }

    /// What became of the records up to `last_offset` appended in `epoch`.
    pub fn fate(&self, epoch: u64, last_offset: u64) -> Fate {
        if self.failed.is_some() && last_offset >= self.flushed_offset {
            // Cut back to the last durable size by the failure.
            return Fate::Unknown;
        }
        if let Some(fate) = self.undos.fate(epoch, last_offset) {
            return fate;
        }
        if last_offset < self.active().written_offset() {
            Fate::InFile
        } else {
            Fate::Gathered
        }
    }

    /// Refuses when the log stopped, or an fsync outside the lock failed
    /// (which stops it now).
    pub(super) fn check_failed(&mut self) -> Result<()> {
        if self.failed.is_none() && self.outside.state().1 {
            let e = Error::io(
                "fsync",
                self.active().path.clone(),
                std::io::Error::other("an fsync outside the lock failed"),
            );
            return Err(self.fail(&e));
        }
        match &self.failed {
            Some(reason) => Err(Error::StorageFailed {
                dir: self.dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Whether a failed fsync stopped the log.
    pub fn failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Stops the log after a failed fsync (`error`): from now on it
    /// refuses every write, flush and close, and shows no more records.
    ///
    /// Linux reports a writeback error once: a later fsync can succeed
    /// while the pages it failed to write are gone, so retrying could
    /// acknowledge records that are not on disk (PostgreSQL's "fsyncgate").
    /// The oldest segment not durable whole is cut back to its last durable
    /// size, so that neither this process nor a recovery after a restart
    /// can take the bytes the failed fsync covered for durable ones (those
    /// after it still have temporary names, which recovery removes). A
    /// reopen (a restart) recovers the partition from there.
    pub fn fail(&mut self, error: &Error) -> Error {
        if self.failed.is_none() {
            let mut reason = error.to_string();
            if let Some(source) = std::error::Error::source(error) {
                reason = format!("{reason}: {source}");
            }
            let (base, size) = self.durable;
            if let Some(segment) = self.segments.get(&base) {
                let cut = segment
                    .file()
                    .and_then(|f| f.set_len(size).ctx("truncate", &segment.path));
                if let Err(e) = cut {
                    reason = format!("{reason}; cutting back to {size} bytes failed too: {e}");
                }
            }
            self.visible = self.visible.min(self.durable);
            self.failed = Some(reason);
        }
        Error::StorageFailed {
            dir: self.dir.clone(),
            reason: self.failed.clone().unwrap_or_default(),
        }
    }

    /// Makes every appended record durable: the segments rolled since the
    /// last flush (data and index), then the active one, each renamed to
    /// its own name once durable, with the directory synced.
    pub fn flush(&mut self) -> Result<()> {
        self.check_failed()?;
        if !self.flush_needed() {
            return Ok(());
        }
        let written = self.active_mut().write_pending();
        self.note_undo();
        written?;
        let active = self.active();
        let (base, size, next) = (active.base_offset, active.size, active.next_offset);
        let synced = self
            .sealed
            .iter()
            .try_for_each(Sealed::sync)
            .and_then(|()| active.file())
            .and_then(|file| file.sync_data().ctx("fsync", &active.path));
        if let Err(e) = synced {
            return Err(self.fail(&e));
        }
        // A flush synced outside the lock may fail meanwhile: then this
        // fsync's success says nothing about the pages it lost. Believe it
        // once those are done (they need no lock, so this cannot block them).
        if self.outside.settled_failed() {
            self.check_failed()?;
        }
        let sealed: Vec<u64> = self.sealed.iter().map(|s| s.base).collect();
        let published = self
            .record_durable(&sealed, base, size)
            .and_then(|()| self.publish_now());
        match published {
            // An open that found no descriptor (the recovery point's
            // temporary file, the directory): no fsync failed; the next
            // flush goes again.
            Err(e) if crate::storage::files::out_of_descriptors(&e) => return Err(e),
            Err(e) => return Err(self.fail(&e)),
            Ok(()) => {}
        }
        self.expose(base, size, next);
        Ok(())
    }

    /// Whether a flush has anything to do: records not durable, rolled
    /// segments not durable whole, or renames not yet made durable.
    fn flush_needed(&self) -> bool {
        self.flushed_offset < self.next_offset()
            || !self.sealed.is_empty()
            || self.active().temp.is_some()
            || self.renames != self.published
    }

    /// Shows readers the records before `next_offset`, durable up to the
    /// segment `base`'s first `size` bytes.
    pub(super) fn expose(&mut self, base: u64, size: u64, next_offset: u64) {
        self.flushed_offset = self.flushed_offset.max(next_offset);
        if self.config.hides_unflushed() {
            self.visible = self.visible.max((base, size));
        }
        if self.flushed_offset == self.next_offset() {
            self.unflushed_records = 0;
            self.oldest_unflushed_ms = None;
        }
    }

    /// Starts a flush of everything appended so far, to be synced outside
    /// the lock ([`PendingFlush::sync`]) and then completed
    /// ([`Log::complete_flush`]). `None` when there is nothing to flush.
    pub fn begin_flush(&mut self) -> Result<Option<PendingFlush>> {
        self.check_failed()?;
        if !self.flush_needed() {
            return Ok(None);
        }
        let written = self.active_mut().write_pending();
        self.note_undo();
        // An undone write still leaves what was written before it to sync.
        if written.is_err() && self.active().written_offset() != self.next_offset() {
            written?;
        }
        if !self.flush_needed() {
            return Ok(None);
        }
        let active = self.active();
        let file = active.file()?;
        self.outside.state().0 += 1;
        Ok(Some(PendingFlush {
            outside: Arc::clone(&self.outside),
            truncations: (Arc::clone(&self.truncations), self.truncations_now()),
            finished: AtomicBool::new(false),
            file,
            path: active.path.clone(),
            segment_base: active.base_offset,
            next_offset: active.next_offset,
            size: active.size,
            sealed: self.sealed.iter().cloned().collect(),
        }))
    }

    /// Writes the appends gathered in memory to the file (see
    /// [`LogConfig::write_buffer_bytes`](super::LogConfig::write_buffer_bytes)).
    pub fn write_pending(&mut self) -> Result<()> {
        self.check_failed()?;
        let written = self.active_mut().write_pending();
        self.note_undo();
        written
    }

    /// Records a synced flush. The segments it made durable take their own
    /// names; when one did (or one is still to be made durable), what the
    /// flush covers is shown only after the [`Publish`] returned is synced
    /// ([`Publish::sync`], outside the lock) and completed
    /// ([`Log::complete_publish`]); otherwise it is shown now. A failed
    /// rename stops the log.
    /// A flush begun before a truncation completes with `Ok(None)` and
    /// changes nothing.
    pub fn complete_flush(&mut self, flush: &PendingFlush) -> Result<Option<Publish>> {
        self.check_failed()?;
        if flush.is_void() {
            return Ok(None);
        }
        let synced: Vec<u64> = flush.sealed.iter().map(|s| s.base).collect();
        if let Err(e) = self.record_durable(&synced, flush.segment_base, flush.size) {
            return Err(self.fail(&e));
        }
        let publish = self.publish_task(flush.segment_base, flush.size, flush.next_offset);
        if publish.is_none() {
            self.expose(flush.segment_base, flush.size, flush.next_offset);
        }
        Ok(publish)
    }

    /// Records appended and not yet flushed, and when the oldest of them
    /// was appended.
    pub fn unflushed(&self) -> (u64, Option<i64>) {
        (
            self.next_offset() - self.flushed_offset,
            self.oldest_unflushed_ms,
        )
    }

    /// Flushes if the flush interval has passed since the oldest unflushed
    /// append. Returns whether it flushed.
    pub fn maybe_flush(&mut self, now_ms: i64) -> Result<bool> {
        let due = match (self.config.flush_interval_ms, self.oldest_unflushed_ms) {
            (Some(interval), Some(oldest)) => now_ms.saturating_sub(oldest) >= interval as i64,
            _ => false,
        };
        if due {
            self.flush()?;
        }
        Ok(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_no_undo_took_back_are_where_they_were() {
        let mut undos = Undos::default();
        assert_eq!(undos.fate(0, 10), None, "no undo at all");
        undos.note(20, false);
        assert_eq!(undos.epoch(), 1);
        assert_eq!(undos.fate(0, 19), None, "in the file before the undo");
        assert_eq!(undos.fate(1, 25), None, "appended after it");
    }

    #[test]
    fn the_first_undo_after_an_append_says_whether_it_took_it_back() {
        let mut undos = Undos::default();
        undos.note(20, false);
        assert_eq!(undos.fate(0, 20), Some(Fate::Undone));
        assert_eq!(undos.fate(0, 30), Some(Fate::Undone));
        // Later undos cannot reach it: undone appends are written at once
        // until a write succeeds, so it was in the file by then.
        undos.note(5, false);
        assert_eq!(undos.fate(0, 19), None);
        assert_eq!(undos.fate(1, 5), Some(Fate::Undone));
        assert_eq!(undos.fate(1, 4), None);
    }

    #[test]
    fn a_truncation_undoes_every_earlier_append_past_its_cut() {
        let mut undos = Undos::default();
        undos.note(50, false);
        undos.note(30, false);
        // Appended in epoch 0, in the file at the second undo: a failed
        // write could not have taken it back, a truncation does.
        assert_eq!(undos.fate(0, 40), None);
        undos.note(35, true);
        assert_eq!(undos.fate(0, 40), Some(Fate::Undone));
        assert_eq!(undos.fate(1, 40), Some(Fate::Undone));
        assert_eq!(undos.fate(2, 40), Some(Fate::Undone));
        assert_eq!(undos.fate(2, 34), None, "below the cut");
        assert_eq!(undos.fate(3, 40), None, "appended after it");
    }

    #[test]
    fn an_append_older_than_the_undos_remembered_has_an_unknown_fate() {
        let mut undos = Undos::default();
        for i in 0..=UNDOS_REMEMBERED as u64 {
            undos.note(1000 + i, false);
        }
        assert_eq!(undos.fate(0, 0), Some(Fate::Unknown), "forgotten");
        assert_eq!(undos.fate(1, 0), None, "the oldest remembered");
        assert_eq!(undos.fate(1, 1001), Some(Fate::Undone));
    }

    #[test]
    fn the_log_believes_its_own_fsync_only_once_none_outside_is_pending() {
        let outside = Arc::new(OutsideSyncs::default());
        assert!(!outside.settled_failed());
        outside.state().0 += 2;
        let waiter = {
            let outside = Arc::clone(&outside);
            std::thread::spawn(move || outside.settled_failed())
        };
        outside.finish(false);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiter.is_finished(), "one is still pending");
        outside.finish(true);
        assert!(waiter.join().unwrap(), "the failure outside is seen");
        assert!(outside.settled_failed(), "and remembered");
    }
}
