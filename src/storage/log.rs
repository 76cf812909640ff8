//! A partition's log: its ordered segments, appends, reads, rolls,
//! retention, flushing, and recovery on open.
//!
//! # Directory layout
//!
//! ```text
//! <topic>-<partition>/
//!   00000000000000000000.log        segment: header, then batches (crate::storage::segment)
//!   00000000000000000000.index      sparse offset index (crate::storage::index)
//!   00000000000000000000.timeindex  sparse time index
//!   00000000000000051200.log ...    next segment, named by its base offset
//!   recovery-point                  "klog-recovery-point 1\n<offset>\n": records below are durable
//!   leader-epochs                   leader epoch -> first offset (crate::storage::epoch)
//!   00000000000000051200.snapshot   producer state below that offset (crate::storage::producers)
//!   aborted-transactions            aborted transactions, for read_committed (crate::storage::log::aborted)
//!   cleaner-offset                  "klog-cleaner-offset 1\n<offset>\n": where the last clean's map ended (crate::storage::cleaner)
//!   *.cleaned.log, .index, .timeindex  a cleaned segment before its rename
//!   clean-shutdown                  present after a clean close; removed by the next writer
//!   .lock                           the writer's lock (an OFD lock), holding its pid
//!   quarantine/                     segments recovery set aside after a cut
//!   *.log.corrupt                   bytes recovery cut out of a segment
//! ```
//!
//! The paper's in-memory sorted list of segment base offsets is the
//! `BTreeMap` here; the last segment is the active one, the only one
//! appended to, and never deleted by retention.
//!
//! `tests/golden/partition/` pins this layout, byte for byte, for a closed
//! log of two segments; a diff there is a format change and needs a
//! version bump (for `recovery-point`, its first line).
//!
//! # Durability
//!
//! `flush` fdatasyncs the active segment, and the segments rolled since the
//! last flush (see `log::roll` for the order that keeps a power cut from
//! leaving a segment after a torn one); a roll itself syncs nothing. Under a
//! flush policy (`flush_messages`, `flush_interval_ms`) readers in
//! this process see only flushed records ([`Log::read`] stops at the flushed
//! end); without one, records are visible once appended. On open, a log
//! that was not closed cleanly is recovered from its recovery point
//! ([`crate::storage::recover`]); one closed cleanly is trusted up to the last
//! index entry of its active segment.
//!
//! # A follower's appends and truncation
//!
//! A follower appends the leader's batches unchanged, at the offsets the
//! leader gave them ([`Log::append_replicated`]): its segments hold the
//! same bytes as the leader's, and its epoch file the same epochs. Where
//! its log stops agreeing with the leader's, it cuts it
//! ([`Log::truncate_to`]), or empties it to start where the leader's
//! starts ([`Log::reset_to`]). Both are durable when they return: the cut
//! segment is fsynced and later ones removed with the directory fsynced
//! before the epoch file loses their epochs, and the recovery point, the
//! flushed and the visible offsets never stay above the cut; appends
//! gathered past the cut are dropped unwritten, and a [`PendingFlush`]
//! begun before is waited for and then void (`log::replica` says how).
//! A directory a reset left without segments (a crash) opens empty at
//! its recovery point.
//!
//! # Faults
//!
//! - **A failed write** (a full disk) undoes every append that had not
//!   reached the file: the segment is cut back to its last whole batch,
//!   and their offsets go to the next appends. Each append carries the
//!   log's undo epoch, so that an answer waiting for it can ask
//!   [`Log::fate`] whether its records are still the ones at its offsets.
//!   Until a write succeeds again, appends are written at once, so the
//!   producer gets the error itself.
//! - **A failed fsync** stops the log ([`Log::fail`]): Linux reports a
//!   writeback error once, so no later fsync may be believed. The active
//!   segment is cut back to its last durable size; writes, flushes and a
//!   clean close are refused until a reopen recovers the partition. A
//!   log's own fsync (a roll, a close) is believed only once every
//!   [`PendingFlush`] begun before it has synced, and none failed.
//!
//! A `Log` is not thread-safe; the caller serialises access (the broker
//! holds one lock per partition).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, IoContext, Result};
use crate::limits;
use crate::storage::epoch::Epochs;
use crate::storage::fs::{self, VFile, Vfs};
use crate::storage::index::{self, INDEX_ENTRY_BYTES_MAX};
use crate::storage::lock::DirLock;
use crate::storage::producers::ProducerState;
use crate::storage::record::Format;
use crate::storage::recover::{self, RecoverOptions, RecoveryReport};
use crate::storage::segment::{PreparedSegment, Segment};

pub mod aborted;
mod append;
pub(crate) mod clean;
mod epochs;
mod flush;
mod opening;
pub mod producers;
mod read;
mod replica;
mod roll;
pub mod start;

pub use append::{check_batch, check_keys, check_producer_batch, check_stored_batch};
pub use flush::{Fate, PendingFlush};
use flush::{OutsideSyncs, Undos};
pub use read::{offset_for_timestamp_in, Lookup};
pub use replica::ReplicaAppend;
pub(crate) use roll::adopt_rolled;
use roll::{record_recovery_point, Sealed};
pub use roll::{Publish, SegmentPrep};

/// How a log rolls, retains, flushes and checks.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Roll the active segment when it would exceed this size.
    pub segment_bytes: u64,
    /// Roll the active segment at the first append this long after its
    /// first record was appended.
    pub segment_age_ms: Option<u64>,
    /// Bytes of log between two index entries.
    pub index_interval_bytes: u32,
    /// Bytes preallocated for the active segment's offset index.
    pub index_bytes_max: u32,
    /// Delete old segments by retention (`cleanup.policy` holds `delete`).
    pub delete: bool,
    /// Compact the log (`cleanup.policy` holds `compact`:
    /// [`crate::storage::cleaner`]).
    pub compact: bool,
    /// Keep a tombstone this long after its segment was last written
    /// (`delete.retention.ms`).
    pub delete_retention_ms: u64,
    /// Leave segments written to more recently than this uncleaned
    /// (`min.compaction.lag.ms`).
    pub min_compaction_lag_ms: u64,
    /// Clean once this share of the cleanable log is dirty
    /// (`min.cleanable.dirty.ratio`).
    pub min_cleanable_dirty_ratio: f64,
    /// Delete segments whose newest record was appended this long ago.
    pub retention_ms: Option<u64>,
    /// Delete the oldest segments while the log is larger than this.
    pub retention_bytes: Option<u64>,
    /// fsync after this many records.
    pub flush_messages: Option<u64>,
    /// fsync when the oldest unflushed record is this old.
    pub flush_interval_ms: Option<u64>,
    /// Largest record accepted.
    pub record_bytes_max: u32,
    /// Readers in this process see only flushed records even without a
    /// flush policy of the log's own (the broker flushes from outside,
    /// through [`Log::begin_flush`], and exposes what is durable).
    pub visible_after_flush: bool,
    /// Gather appends in memory up to this many bytes and write them
    /// together (0: write each at once). Only with readers that see flushed
    /// records only; the gathered bytes are written at the latest by
    /// [`Log::write_pending`], a flush, a roll or a close.
    pub write_buffer_bytes: usize,
    /// Where new segments take their files from, zeroed and synced ahead
    /// (`klog-broker --preallocate`; [`crate::storage::spare`]).
    pub spares: Option<Arc<crate::storage::spare::Spares>>,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_bytes: limits::SEGMENT_BYTES_DEFAULT,
            segment_age_ms: None,
            index_interval_bytes: limits::INDEX_INTERVAL_BYTES_DEFAULT,
            index_bytes_max: limits::INDEX_BYTES_MAX_DEFAULT,
            delete: true,
            compact: false,
            delete_retention_ms: limits::DELETE_RETENTION_MS_DEFAULT,
            min_compaction_lag_ms: 0,
            min_cleanable_dirty_ratio: limits::MIN_CLEANABLE_DIRTY_RATIO_DEFAULT,
            retention_ms: Some(limits::RETENTION_MS_DEFAULT),
            retention_bytes: None,
            flush_messages: None,
            flush_interval_ms: None,
            record_bytes_max: limits::RECORD_BYTES_MAX_DEFAULT,
            visible_after_flush: false,
            write_buffer_bytes: 0,
            spares: None,
        }
    }
}

impl LogConfig {
    /// Checks the values against the limits.
    pub fn validate(&self) -> Result<()> {
        let range = limits::SEGMENT_BYTES_MIN..=limits::SEGMENT_BYTES_MAX;
        if !range.contains(&self.segment_bytes) {
            return Err(Error::Config(format!(
                "segment size {} is outside {}..={} bytes",
                self.segment_bytes,
                range.start(),
                range.end()
            )));
        }
        if self.record_bytes_max == 0 || self.record_bytes_max > limits::RECORD_BYTES_MAX_LIMIT {
            return Err(Error::Config(format!(
                "maximum record size {} is outside 1..={} bytes",
                self.record_bytes_max,
                limits::RECORD_BYTES_MAX_LIMIT
            )));
        }
        if (self.index_bytes_max as usize) < INDEX_ENTRY_BYTES_MAX {
            return Err(Error::Config("index size holds no entry".into()));
        }
        if self.index_bytes_max > limits::INDEX_BYTES_MAX_LIMIT {
            return Err(Error::Config(format!(
                "index size {} is over the limit of {} bytes",
                self.index_bytes_max,
                limits::INDEX_BYTES_MAX_LIMIT
            )));
        }
        if self.flush_messages == Some(0) {
            return Err(Error::Config("flush every 0 messages".into()));
        }
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            return Err(Error::Config(format!(
                "min.cleanable.dirty.ratio {} is outside 0..=1",
                self.min_cleanable_dirty_ratio
            )));
        }
        Ok(())
    }

    fn index_slots(&self) -> usize {
        self.index_bytes_max as usize / index::OFFSET_ENTRY_BYTES
    }

    fn hides_unflushed(&self) -> bool {
        self.visible_after_flush
            || self.flush_messages.is_some()
            || self.flush_interval_ms.is_some()
    }
}

/// Where the offsets of an appended batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the batch's first record.
    pub base_offset: u64,
    /// Offset of its last record.
    pub last_offset: u64,
    /// Records in it.
    pub record_count: u32,
    /// The log's undo epoch when it was appended (see [`Log::fate`]).
    pub epoch: u64,
}

/// A byte range of one segment file: whole batches (the last one possibly
/// cut by the byte budget), as a fetch sends them.
#[derive(Debug, Clone)]
pub struct FileSlice {
    /// The segment file.
    pub file: Arc<dyn VFile>,
    /// Its path.
    pub path: PathBuf,
    /// Position of the first byte.
    pub position: u64,
    /// Bytes in the slice.
    pub len: u64,
    /// Base offset of the first batch in the slice.
    pub first_batch_offset: u64,
    /// The format of its batches: a legacy slice is converted to Kafka
    /// batches before it is served ([`crate::storage::record::legacy::to_kafka`]).
    pub format: Format,
}

impl FileSlice {
    /// Reads the slice into `buf` (replacing its contents).
    pub fn read_into(&self, buf: &mut Vec<u8>) -> Result<()> {
        buf.resize(self.len as usize, 0);
        self.file
            .read_exact_at(buf, self.position)
            .ctx("read", &self.path)
    }
}

/// How to open a log.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// Open for appending: take the writer lock (if `lock`), recover, and
    /// map the active index. Otherwise a read-only view that changes nothing.
    pub writable: bool,
    /// Take the partition's writer lock (real file systems only).
    pub lock: bool,
}

/// A partition's log.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    vfs: Arc<dyn Vfs>,
    config: LogConfig,
    segments: BTreeMap<u64, Segment>,
    writable: bool,
    flushed_offset: u64,
    /// How far readers may see: every segment before the first, and this
    /// segment up to this size.
    visible: (u64, u64),
    unflushed_records: u64,
    oldest_unflushed_ms: Option<i64>,
    recovery: RecoveryReport,
    /// The oldest segment not durable whole and its size as of the last
    /// successful fsync: where a failed fsync cuts the log back to (the
    /// segments after it still have temporary names).
    durable: (u64, u64),
    /// Segments rolled and not yet durable whole, oldest first.
    sealed: VecDeque<Sealed>,
    /// The next segment's files, made ahead of the roll that needs them.
    prepared: Option<PreparedSegment>,
    /// A [`SegmentPrep`] is out.
    preparing: bool,
    /// The last number given to temporary segment files.
    temp_seq: u64,
    /// Segments renamed to their own names, and how many of those renames
    /// a directory fsync made durable: records in a renamed segment are
    /// shown only once it is.
    renames: u64,
    published: u64,
    /// The last recovery point written (and the lock of whoever writes one).
    recovery_written: Arc<Mutex<u64>>,
    /// The failed writes that undid gathered appends, for [`Log::fate`].
    undos: Undos,
    /// Why the log stopped (a failed fsync); it refuses all writes.
    failed: Option<String>,
    /// The fsyncs of [`PendingFlush`]es, outside the lock.
    outside: Arc<OutsideSyncs>,
    /// Truncations so far: a [`PendingFlush`] or a [`Publish`] begun before
    /// one speaks for records that may be gone, and shows nothing.
    truncations: Arc<AtomicU64>,
    /// A write failed and nothing was written since: appends go to the file
    /// at once, so that the next failure is the append's own error.
    write_failing: bool,
    /// The leader epoch stamped into appended batches.
    leader_epoch: u32,
    /// The partition's leader epochs (its epoch file).
    epochs: Epochs,
    /// The start DeleteRecords set ([`start`]), 0 if none.
    floor: u64,
    /// Its idempotent producers ([`producers`]), of a writable log.
    producers: ProducerState,
    /// An undo or a truncation took back batches `producers` counts.
    producers_stale: bool,
    /// Its aborted transactions ([`aborted`]), as `producers`.
    aborted: aborted::Aborted,
    /// Where the last clean's map ended ([`crate::storage::cleaner`]).
    cleaned_to: u64,
    _lock: Option<DirLock>,
}

impl Log {
    /// Opens the log in `dir` (which must exist), recovering it if it was
    /// not closed cleanly and `options.writable` is set. A writable open
    /// fails with [`Error::Damaged`] at damage other than a torn tail; a
    /// read-only one ends the log before it, and says where in
    /// [`RecoveryReport::damage`] ([`Log::recovery`]).
    pub fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        config: LogConfig,
        options: OpenOptions,
    ) -> Result<Log> {
        config.validate()?;
        let locked = options.writable && options.lock;
        let lock = locked.then(|| DirLock::acquire(dir)).transpose()?;
        let start = recover::start_before_recovery(&*vfs, dir)?;
        let (recovery, segments) = opening::recover_and_open(&vfs, dir, &config, options.writable)?;
        let epochs = recovery.epochs.clone();
        let leader_epoch = epochs.latest().map_or(0, |e| e.epoch);
        let floor = start::read(&*vfs, dir);
        let mut log = Log {
            dir: dir.to_path_buf(),
            vfs,
            config,
            segments,
            writable: options.writable,
            flushed_offset: 0,
            visible: (0, 0),
            unflushed_records: 0,
            oldest_unflushed_ms: None,
            recovery,
            durable: (0, 0),
            sealed: VecDeque::new(),
            prepared: None,
            preparing: false,
            temp_seq: 0,
            renames: 0,
            published: 0,
            recovery_written: Arc::default(),
            undos: Undos::default(),
            failed: None,
            outside: Arc::default(),
            truncations: Arc::default(),
            write_failing: false,
            leader_epoch,
            epochs,
            floor,
            producers: ProducerState::default(),
            producers_stale: false,
            aborted: Default::default(),
            cleaned_to: 0,
            _lock: lock,
        };
        if options.writable {
            log.start_writing(start)?;
        } else if log.segments.is_empty() {
            return Err(nothing_readable(dir, &log.recovery));
        }
        // Recovery made everything it kept durable.
        log.flushed_offset = log.next_offset();
        log.visible = (log.active().base_offset, log.active().size);
        log.durable = log.visible;
        // Cut below its start (klog-recover): the start comes down.
        log.lower_start_to_end()?;
        if options.writable {
            log.load_producers()?;
        }
        Ok(log)
    }

    /// Readies an opened log for appends: the next write is not a clean
    /// close's, and the active segment (a new one at `base` when none was
    /// kept) maps a writable index.
    fn start_writing(&mut self, base: u64) -> Result<()> {
        recover::clear_clean(&*self.vfs, &self.dir)?;
        self.cleaned_to = clean::read_checkpoint(&*self.vfs, &self.dir);
        let slots = self.config.index_slots();
        if self.segments.is_empty() {
            let segment = Segment::create(
                &self.vfs,
                &self.dir,
                base,
                slots,
                self.spares().map(|s| &**s),
            )?;
            self.segments.insert(base, segment);
            // A new log starts in its leader epoch (0 for a single copy); a
            // crash before this is written leaves an empty log without an
            // epoch file, which recovery gives one the same.
            self.epochs = Epochs::new();
            self.epochs.assign(self.leader_epoch, base);
            self.epochs.write(&*self.vfs, &self.dir)?;
        } else if let Some(end) = self.active().end {
            // A cleaned segment last (a crash while a cut was under way
            // left it so) is never appended to: its header's end says
            // where the log goes on, in a segment of its own.
            let segment = Segment::create(
                &self.vfs,
                &self.dir,
                end,
                slots,
                self.spares().map(|s| &**s),
            )?;
            self.segments.insert(end, segment);
        } else {
            if let Some(spares) = self.spares().cloned() {
                let seq = self.take_temp_seq();
                let [temp, ..] = crate::storage::segment::temp_paths(&self.dir, seq);
                self.active_mut().take_spare(&temp, &spares)?;
            }
            let vfs = Arc::clone(&self.vfs);
            self.active_mut().activate(&*vfs, slots)?;
        }
        // Never past the end (a cut by klog-recover): what is appended
        // there again is dirty, after a later restart too.
        if self.cleaned_to > self.next_offset() {
            self.cleaned_to = self.next_offset();
            clean::write_checkpoint(&*self.vfs, &self.dir, self.cleaned_to)?;
        }
        Ok(())
    }

    /// What recovery found and did when the log was opened.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Takes a topic's policy from `config` (its segment size and age,
    /// retention by age and size, and largest record: what a topic's
    /// configs set), keeping everything else this log was opened with. It
    /// counts from the next append, roll or retention check.
    pub fn set_policy(&mut self, config: &LogConfig) -> Result<()> {
        let mut next = self.config.clone();
        next.segment_bytes = config.segment_bytes;
        next.segment_age_ms = config.segment_age_ms;
        next.retention_ms = config.retention_ms;
        next.retention_bytes = config.retention_bytes;
        next.record_bytes_max = config.record_bytes_max;
        next.delete = config.delete;
        next.compact = config.compact;
        next.delete_retention_ms = config.delete_retention_ms;
        next.min_compaction_lag_ms = config.min_compaction_lag_ms;
        next.min_cleanable_dirty_ratio = config.min_cleanable_dirty_ratio;
        next.validate()?;
        self.config = next;
        Ok(())
    }

    /// The segments, oldest first.
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.segments.values()
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log has a segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log has a segment")
    }

    /// The number of truncations so far.
    pub(crate) fn truncations_now(&self) -> u64 {
        self.truncations.load(Ordering::SeqCst)
    }

    /// The first offset held.
    pub fn start_offset(&self) -> u64 {
        let first = self.segments.values().next().expect("a log has a segment");
        // DeleteRecords' start, never past the log's end (a log cut below
        // it starts at its end).
        first.base_offset.max(self.floor.min(self.next_offset()))
    }

    /// The offset the next record will get.
    pub fn next_offset(&self) -> u64 {
        self.active().next_offset
    }

    /// One past the last durable record (the recovery point in memory).
    pub fn flushed_offset(&self) -> u64 {
        self.flushed_offset
    }

    /// Bytes in all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size).sum()
    }

    /// One past the last record written to the files, durable or not (the
    /// appends gathered in memory excluded): what a follower may fetch.
    pub fn written_offset(&self) -> u64 {
        self.active().written_offset()
    }

    /// One past the last record readers may see.
    pub fn visible_offset(&self) -> u64 {
        if self.config.hides_unflushed() {
            self.flushed_offset
        } else {
            self.next_offset()
        }
    }

    /// The offset of the first record whose timestamp is at or after
    /// `timestamp_ms`, or `None` when there is none.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<u64>> {
        let found = read::offset_for_timestamp_in(|| self, timestamp_ms)?;
        Ok(found.map(|(offset, _)| offset))
    }

    /// Where a search for the first record at or after `timestamp_ms`
    /// starts: where the time index points in the first segment whose
    /// newest record is that late (`None`: no segment is).
    pub fn timestamp_scan_start(&self, timestamp_ms: i64) -> Option<u64> {
        let segment = self
            .segments
            .values()
            .find(|s| s.max_timestamp >= timestamp_ms)?;
        let start = index::last_where(segment.entries(), |e| e.max_timestamp < timestamp_ms)
            .map_or(segment.base_offset, |i| {
                segment.base_offset + u64::from(segment.entries()[i].relative_offset)
            });
        Some(start)
    }

    /// The largest record timestamp in the log, `None` while it is empty.
    pub fn max_timestamp(&self) -> Option<i64> {
        let max = self.segments.values().map(|s| s.max_timestamp).max()?;
        (max != i64::MIN).then_some(max)
    }

    /// Deletes whole segments from the front whose newest record was
    /// appended longer ago than the retention time (the append time, not
    /// the producer's timestamp, so replaying old records keeps them), or
    /// while the log exceeds the retention size; never the active segment.
    /// Returns the base offsets deleted. (A caller that holds a lock around
    /// the log takes them out under it with [`Log::take_expired`] and
    /// deletes them after letting go.)
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<Vec<u64>> {
        if !self.sealed.is_empty() {
            self.flush()?;
        }
        self.take_expired(now_ms).delete()
    }

    /// Takes out of the log the segments [`Log::apply_retention`] would
    /// delete, without touching a file: from now on the log starts after
    /// them. Their files go with [`Expired::delete`], which needs no access
    /// to the log (the unlinks and the directory fsync are slow; appends
    /// need not wait for them). A segment rolled and not yet durable is
    /// kept until a flush made it so ([`Log::apply_retention`] flushes
    /// first): the segments after it still have temporary names, and a
    /// power cut without it could leave the log no segment to start from.
    pub fn take_expired(&mut self, now_ms: i64) -> Expired {
        let mut segments = Vec::new();
        let mut total = self.size_bytes();
        // A stopped log keeps every file for the open that recovers it.
        let stopped = self.failed.is_some();
        while self.segments.len() > 1 && !stopped {
            let oldest = self.segments.values().next().expect("segment");
            let by_policy = self.config.delete;
            let expired = by_policy
                && self.config.retention_ms.is_some_and(|ms| {
                    oldest
                        .last_append_ms
                        .is_some_and(|t| now_ms.saturating_sub(t) > ms as i64)
                });
            let oversize = by_policy
                && self
                    .config
                    .retention_bytes
                    .is_some_and(|max| total - oldest.size >= max);
            let base = oldest.base_offset;
            // Wholly below the start DeleteRecords set.
            let deleted =
                (self.segments.range(base + 1..).next()).is_some_and(|(b, _)| *b <= self.floor);
            if !expired && !oversize && !deleted {
                break;
            }
            if self.sealed.front().is_some_and(|s| s.base == base) {
                // Not durable yet: the next flush needs it.
                break;
            }
            // The log's start never passes what readers may see: the next
            // segment's records must be shown (and so it is named) first.
            let next_base = self.segments.range(base + 1..).next().map(|(b, _)| *b);
            if next_base.is_none_or(|b| b > self.visible_offset()) {
                break;
            }
            let segment = self.segments.remove(&base).expect("segment");
            total -= segment.size;
            segments.push(segment);
        }
        Expired {
            vfs: Arc::clone(&self.vfs),
            dir: self.dir.clone(),
            segments,
        }
    }

    /// Flushes, trims the active index, and marks the log cleanly closed.
    pub fn close(mut self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        // A failed log is not marked clean: its next open recovers it.
        self.check_failed()?;
        self.flush()?;
        self.active_mut().deactivate()?;
        if let Some(prepared) = self.prepared.take() {
            prepared.discard(&*self.vfs);
        }
        self.snapshot_producers()?;
        let next = self.next_offset();
        record_recovery_point(&*self.vfs, &self.dir, &self.recovery_written, next)?;
        fs::write_atomic(&*self.vfs, &self.dir, recover::CLEAN_SHUTDOWN_FILE, b"")
    }
}

/// Segments retention took out of a log ([`Log::take_expired`]), whose
/// files are still to be deleted. A reader holding one of their files
/// open keeps reading it.
#[derive(Debug)]
#[must_use = "the segments' files stay until deleted"]
pub struct Expired {
    pub(super) vfs: Arc<dyn Vfs>,
    pub(super) dir: PathBuf,
    pub(super) segments: Vec<Segment>,
}

impl Expired {
    /// Deletes the segments' files, then syncs the directory; returns
    /// their base offsets. Files a crash leaves behind are old segments
    /// again at the next open, which the next retention deletes.
    pub fn delete(self) -> Result<Vec<u64>> {
        for segment in &self.segments {
            // The log goes first: an index left behind by a crash is an
            // orphan that recovery removes, while a log left without its
            // index is simply re-indexed.
            let (index, timeindex) = index::index_paths(&segment.path);
            for path in [&segment.path, &index, &timeindex] {
                match self.vfs.remove(path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(Error::io("remove", path, e))
                    }
                    _ => {}
                }
            }
        }
        if !self.segments.is_empty() {
            fs::sync_directory(&*self.vfs, &self.dir)?;
        }
        Ok(self.segments.iter().map(|s| s.base_offset).collect())
    }
}

/// Recovers the log in `dir` as opening it does: from its recovery point
/// after a crash, trusting the index of a cleanly closed (or only read)
/// log; a reader changes nothing.
fn recover_on_open(
    vfs: &dyn Vfs,
    dir: &Path,
    config: &LogConfig,
    writable: bool,
) -> Result<RecoveryReport> {
    let clean = recover::was_clean(vfs, dir);
    let recovery_point = if clean || !writable {
        u64::MAX
    } else {
        recover::read_recovery_point(vfs, dir)
    };
    // After an unclean stop (kill -9, a power cut), what lies below the
    // recovery point is scrubbed again soon (`storage::scrub`), and so is
    // what recovery reads (it does not check leader epochs as a walk
    // does): once recovery kept the log (a log it refuses is left as it
    // was). A new partition's empty log keeps its note.
    let forget = writable && !clean && holds_a_batch(vfs, dir);
    let options = RecoverOptions {
        full: false,
        dry_run: !writable,
        automatic: true,
        // After a clean close the index and the file length are trusted
        // (Kafka skips recovery when its clean-shutdown file is there): a
        // restart reads the tail after the last index entry, not the whole
        // active segment. A reader changes nothing and trusts the writer's
        // index the same way.
        trust_last: clean || !writable,
        index_interval_bytes: config.index_interval_bytes,
    };
    let report = recover::recover_partition(vfs, dir, recovery_point, &options)?;
    if forget {
        recover::forget_scrubbed(vfs, dir)?;
    }
    Ok(report)
}

/// Whether a segment in `dir` is longer than its header (or cannot be
/// looked at: then it may hold batches).
fn holds_a_batch(vfs: &dyn Vfs, dir: &Path) -> bool {
    let Ok(names) = vfs.list(dir) else {
        return true;
    };
    names.iter().filter(|n| n.ends_with(".log")).any(|name| {
        let path = dir.join(name);
        let len = vfs.open_read(&path).and_then(|f| f.len());
        len.map_or(true, |len| {
            len > crate::storage::segment::SEGMENT_HEADER_BYTES as u64
        })
    })
}

/// Why a reader finds no segment to read in `dir`: the damage its log
/// ends before (a reader reads up to it: here, nothing), or none at all.
fn nothing_readable(dir: &Path, recovery: &RecoveryReport) -> Error {
    match &recovery.damage {
        Some(damage) => damage.error(),
        None => recover::corrupt(dir, 0, "no readable segment"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_configuration_is_valid() {
        LogConfig::default().validate().unwrap();
    }

    #[test]
    fn a_configuration_outside_the_limits_is_refused() {
        type Change = fn(&mut LogConfig);
        let cases: [(&str, Change); 7] = [
            ("segment size", |c| {
                c.segment_bytes = limits::SEGMENT_BYTES_MIN - 1
            }),
            ("segment size", |c| {
                c.segment_bytes = limits::SEGMENT_BYTES_MAX + 1
            }),
            ("maximum record size", |c| c.record_bytes_max = 0),
            ("maximum record size", |c| {
                c.record_bytes_max = limits::RECORD_BYTES_MAX_LIMIT + 1
            }),
            ("holds no entry", |c| {
                c.index_bytes_max = INDEX_ENTRY_BYTES_MAX as u32 - 1
            }),
            ("index size", |c| {
                c.index_bytes_max = limits::INDEX_BYTES_MAX_LIMIT + 1
            }),
            ("0 messages", |c| c.flush_messages = Some(0)),
        ];
        for (what, change) in cases {
            let mut config = LogConfig::default();
            change(&mut config);
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains(what), "{what}: {err}");
        }
        let edges = LogConfig {
            segment_bytes: limits::SEGMENT_BYTES_MIN,
            record_bytes_max: limits::RECORD_BYTES_MAX_LIMIT,
            index_bytes_max: INDEX_ENTRY_BYTES_MAX as u32,
            flush_messages: Some(1),
            ..LogConfig::default()
        };
        edges.validate().unwrap();
    }

    #[test]
    fn readers_see_only_flushed_records_under_any_flush_policy() {
        assert!(!LogConfig::default().hides_unflushed());
        for config in [
            LogConfig {
                visible_after_flush: true,
                ..LogConfig::default()
            },
            LogConfig {
                flush_messages: Some(10),
                ..LogConfig::default()
            },
            LogConfig {
                flush_interval_ms: Some(10),
                ..LogConfig::default()
            },
        ] {
            assert!(config.hides_unflushed(), "{config:?}");
        }
    }
}
