//! Rolling a log with no fsync under its lock, and making rolled segments
//! durable outside it.
//!
//! A roll ([`Log::roll`]) writes the old segment's gathered appends to its
//! file and starts the new segment from files made ahead of it
//! ([`Log::segment_to_prepare`], [`SegmentPrep::create`], outside the lock)
//! or, when none was, made on the spot; it only writes the new segment's
//! header. The old segment is [`Sealed`]: its data and its index (trimmed
//! to its entries) are synced by the next flush, which a caller holding a
//! lock around the log runs outside it ([`super::PendingFlush::sync`]).
//!
//! # Order on disk
//!
//! A new segment keeps temporary names ([`crate::storage::segment::temp_paths`])
//! until its own bytes so far, and every byte of every segment before it,
//! are durable; only then does it take its own name ([`Log::record_durable`]),
//! and the records in it become visible only after a directory fsync made
//! that name durable ([`Publish`]), with the recovery point moved past the
//! segments before it. So whatever a power cut keeps, the log on disk is
//! whole segments, then at most one torn one, the last (what opening a log
//! repairs), then segments under temporary names: never a segment after a
//! torn one, which opening would have to refuse. Opening adopts a segment
//! under a temporary name that continues the log exactly (a killed writer
//! left it, and the page cache kept all before it: acks=1 records survive
//! a `kill -9`) and removes the others ([`adopt_rolled`]). No record
//! readers saw, or a producer was told is durable, is lost, and no offset
//! given to one is given again.
//!
//! A log with no flush policy (an embedded writer, whose readers in other
//! processes see records as soon as they are appended and find segments by
//! name) flushes at each roll instead, as it always did.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::Log;
use crate::error::{IoContext, Result};
use crate::storage::fs::{self, VFile, Vfs};
use crate::storage::index::SegmentIndex;
use crate::storage::recover;
use crate::storage::recover::RecoveryReport;
use crate::storage::segment::{self, PreparedSegment, Segment};
use crate::storage::spare::Spares;
use crate::sync::lock;

/// A segment that stopped being active at a roll and is not yet durable
/// whole: its last bytes and its index wait for a flush.
#[derive(Debug, Clone)]
pub(super) struct Sealed {
    /// Its base offset.
    pub(super) base: u64,
    file: Arc<dyn VFile>,
    path: PathBuf,
    /// Its index, preallocated and mapped until it is trimmed and synced
    /// (`None` from then on). Whoever syncs first trims it.
    index: Arc<Mutex<Option<SegmentIndex>>>,
    /// Where its batches end, when zeros given to it ahead follow them:
    /// its sync cuts them first ([`segment::cut_zeros`]).
    zeros_from: Option<u64>,
}

impl Sealed {
    /// Makes the segment durable whole (no lock around the log needed):
    /// its data, then its index, trimmed to its entries.
    pub(super) fn sync(&self) -> Result<()> {
        match self.zeros_from {
            Some(size) => segment::cut_zeros(&*self.file, &self.path, size)?,
            None => self.file.sync_data().ctx("fsync", &self.path)?,
        }
        let mut index = lock(&self.index);
        if let Some(mut trimmed) = index.take() {
            trimmed.trim()?;
        }
        Ok(())
    }
}

/// What making the next segment ahead of a roll needs, taken under the
/// log's lock ([`Log::segment_to_prepare`]); its files are made outside it
/// ([`SegmentPrep::create`]) and handed back with [`Log::give_prepared`].
#[derive(Debug)]
pub struct SegmentPrep {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    seq: u64,
    index_slots: usize,
    spares: Option<Arc<Spares>>,
}

impl SegmentPrep {
    /// Creates the next segment's files (no lock needed).
    pub fn create(&self) -> Result<PreparedSegment> {
        let spares = self.spares.as_deref();
        PreparedSegment::create(&*self.vfs, &self.dir, self.seq, self.index_slots, spares)
    }
}

/// The directory fsync that makes the names a flush gave its segments
/// durable (with the recovery point moved past the segments durable
/// whole), run outside the log's lock ([`Publish::sync`]); then
/// [`Log::complete_publish`] shows what the flush synced.
#[derive(Debug)]
#[must_use = "what the flush synced stays hidden until published"]
pub struct Publish {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    recovery_point: u64,
    written: Arc<Mutex<u64>>,
    /// The log's renames it covers.
    renames: u64,
    /// What it shows once synced: the flush's segment, size, next offset.
    shows: (u64, u64, u64),
    /// The log's truncations when it was made: after another, it shows
    /// nothing and writes no recovery point (both may be past the cut).
    truncations: u64,
    /// The log's truncations so far.
    log_truncations: Arc<AtomicU64>,
}

impl Publish {
    /// Syncs the directory, by writing the recovery point (or alone, when
    /// one as far on was written already). No lock needed.
    pub fn sync(&self) -> Result<()> {
        // Checked under the lock a truncation counts itself under.
        let mut last = lock(&self.written);
        let truncated = self.log_truncations.load(Ordering::SeqCst) != self.truncations;
        if self.recovery_point <= *last || truncated {
            return fs::sync_directory(&*self.vfs, &self.dir);
        }
        recover::write_recovery_point(&*self.vfs, &self.dir, self.recovery_point)?;
        *last = self.recovery_point;
        Ok(())
    }
}

/// Writes the recovery point `offset` of the log in `dir` (a temporary
/// file, fsynced, renamed, then the directory fsynced), unless one as far
/// on was (`written`: the last written, which also keeps two writers from
/// sharing the temporary file); then only syncs the directory.
pub(super) fn record_recovery_point(
    vfs: &dyn Vfs,
    dir: &std::path::Path,
    written: &Mutex<u64>,
    offset: u64,
) -> Result<()> {
    let mut last = lock(written);
    if offset <= *last {
        return fs::sync_directory(vfs, dir);
    }
    recover::write_recovery_point(vfs, dir, offset)?;
    *last = offset;
    Ok(())
}

impl Log {
    /// Starts a new active segment at the next offset (no-op on an empty
    /// active segment), with no fsync: the old one is synced, and its index
    /// trimmed, by the next flush. Fails, changing nothing, when the old
    /// segment's gathered appends or the new segment's header cannot be
    /// written (a full disk). The new segment takes gaps when the old one
    /// did ([`Segment::gaps`]).
    pub fn roll(&mut self) -> Result<()> {
        let gaps = self.active().gaps;
        self.roll_into(gaps)
    }

    /// Makes the active segment one whose batches may skip offsets (a
    /// follower's, copying its leader's cleaned batches): its header
    /// rewritten when it is empty, else a roll into a new one.
    pub(super) fn take_gaps(&mut self) -> Result<()> {
        let active = self.active();
        if active.gaps {
            return Ok(());
        }
        if active.is_empty() && active.format == crate::storage::record::Format::Kafka {
            return self.active_mut().allow_gaps();
        }
        self.roll_into(true)
    }

    /// Rolls, even an empty active segment, into a segment with gaps based
    /// at `base`, past the log's next offset by 2^32 offsets or more: the
    /// batch a follower copies there is further from the log's end than a
    /// segment spans (its leader's cleaner took all between). A segment
    /// with gaps may start past where the one before it ends.
    pub(super) fn roll_past_gap(&mut self, base: u64) -> Result<()> {
        assert!(base > self.next_offset(), "a roll past a gap goes forward");
        self.roll_to(Some(base), true)
    }

    /// [`Log::roll`], into a segment that takes gaps with `gaps`.
    fn roll_into(&mut self, gaps: bool) -> Result<()> {
        self.roll_to(None, gaps)
    }

    /// Rolls into a segment based at `base` (the next offset when `None`:
    /// not from an empty segment), taking gaps with `gaps`.
    fn roll_to(&mut self, base: Option<u64>, gaps: bool) -> Result<()> {
        self.check_failed()?;
        if base.is_none() && self.active().is_empty() {
            return Ok(());
        }
        // The flush that syncs the old segment must find all of it in the
        // file.
        let written = self.active_mut().write_pending();
        self.note_undo();
        written?;
        let base = base.unwrap_or(self.next_offset());
        self.snapshot_producers()?;
        // Held by the flush that syncs it, whatever the cache of sealed
        // segments' files closes: an fsync through a descriptor opened
        // after a failed writeback would not report it.
        let file = self.active().file()?;
        let segment = self.next_segment(base, gaps)?;
        let zeros_from = self.active().zeros_past_end();
        let index = self.active_mut().seal();
        let old = self.active();
        self.sealed.push_back(Sealed {
            base: old.base_offset,
            file,
            path: old.path.clone(),
            index: Arc::new(Mutex::new(index)),
            zeros_from,
        });
        self.segments.insert(base, segment);
        if !self.config.hides_unflushed() {
            self.visible = (base, self.active().size);
            self.flush()?;
        }
        Ok(())
    }

    /// The segment a roll starts at `base`: the one made ahead, or one made
    /// now, headed (taking gaps with `gaps`).
    fn next_segment(&mut self, base: u64, gaps: bool) -> Result<Segment> {
        let prepared = match self.prepared.take() {
            Some(prepared) => prepared,
            None => {
                let seq = self.take_temp_seq();
                let slots = self.config.index_slots();
                let spares = self.spares().map(|s| &**s);
                PreparedSegment::create(&*self.vfs, &self.dir, seq, slots, spares)?
            }
        };
        if let Err(e) = prepared.head(base, gaps) {
            // Kept for the next roll: a full disk may have room again.
            self.prepared = Some(prepared);
            return Err(e);
        }
        Ok(Segment::from_prepared(&self.vfs, prepared, base, gaps))
    }

    /// The spares its new segments take: the broker's, when a spare is
    /// no larger than its segments (a topic's own smaller `segment.bytes`
    /// would waste most of each).
    pub(super) fn spares(&self) -> Option<&Arc<Spares>> {
        let spares = self.config.spares.as_ref()?;
        (spares.bytes() <= self.config.segment_bytes).then_some(spares)
    }

    pub(super) fn take_temp_seq(&mut self) -> u64 {
        self.temp_seq += 1;
        self.temp_seq
    }

    /// What making the next segment ahead of a roll needs, when it is
    /// worth it now (the active segment is half full, or rolls by age) and
    /// none is made or being made. Whoever takes it hands the files back
    /// with [`Log::give_prepared`], made outside the lock.
    pub fn segment_to_prepare(&mut self) -> Option<SegmentPrep> {
        let active = self.active();
        let by_size = active.size.saturating_mul(2) >= self.config.segment_bytes;
        let soon = by_size || (self.config.segment_age_ms.is_some() && !active.is_empty());
        if !soon || !self.writable || self.failed.is_some() {
            return None;
        }
        if self.prepared.is_some() || self.preparing {
            return None;
        }
        self.preparing = true;
        Some(SegmentPrep {
            vfs: Arc::clone(&self.vfs),
            dir: self.dir.clone(),
            seq: self.take_temp_seq(),
            index_slots: self.config.index_slots(),
            // Not for a roll by age alone: a spare is a segment's size.
            spares: by_size.then(|| self.spares().cloned()).flatten(),
        })
    }

    /// Takes the next segment's files made from [`Log::segment_to_prepare`]
    /// for the next roll, or the error making them failed with (then the
    /// roll makes its own; the log goes on).
    pub fn give_prepared(&mut self, made: Result<PreparedSegment>) -> Result<()> {
        self.preparing = false;
        let prepared = made?;
        if self.failed.is_some() || self.prepared.is_some() {
            prepared.discard(&*self.vfs);
        } else {
            self.prepared = Some(prepared);
        }
        Ok(())
    }

    /// The oldest segment not durable whole: the oldest sealed one, or the
    /// active one. Every segment before it is durable, under its own name.
    pub(super) fn oldest_undurable(&self) -> u64 {
        self.sealed
            .front()
            .map_or(self.active().base_offset, |s| s.base)
    }

    /// Records what a flush made durable: the sealed segments `synced`
    /// (their bases) whole, and the segment `base` up to `size`. Each that
    /// has temporary names takes its own, oldest first, once every segment
    /// before it is durable (see "Order on disk").
    pub(super) fn record_durable(&mut self, synced: &[u64], base: u64, size: u64) -> Result<()> {
        while let Some(front) = self.sealed.front().map(|s| s.base) {
            if !synced.contains(&front) {
                break;
            }
            self.sealed.pop_front();
            self.publish_segment(front)?;
            self.durable = self.durable.max((self.oldest_undurable(), 0));
        }
        if self.oldest_undurable() == base {
            self.durable = self.durable.max((base, size));
            self.publish_segment(base)?;
        }
        Ok(())
    }

    /// Renames the segment `base` to its own name if it has a temporary one.
    fn publish_segment(&mut self, base: u64) -> Result<()> {
        let vfs = Arc::clone(&self.vfs);
        let dir = self.dir.clone();
        let Some(segment) = self.segments.get_mut(&base) else {
            return Ok(());
        };
        if segment.temp.is_some() {
            segment.publish(&*vfs, &dir)?;
            self.renames += 1;
        }
        Ok(())
    }

    /// A [`Publish`] for renames not yet made durable, showing the flush of
    /// segment `base` up to `size` and `next_offset` once synced; `None`
    /// when there is no such rename.
    pub(super) fn publish_task(&self, base: u64, size: u64, next_offset: u64) -> Option<Publish> {
        (self.renames != self.published).then(|| Publish {
            vfs: Arc::clone(&self.vfs),
            dir: self.dir.clone(),
            recovery_point: self.oldest_undurable(),
            written: Arc::clone(&self.recovery_written),
            renames: self.renames,
            shows: (base, size, next_offset),
            truncations: self.truncations_now(),
            log_truncations: Arc::clone(&self.truncations),
        })
    }

    /// Records a synced [`Publish`]: the flush it follows is shown (unless
    /// the log was truncated since).
    pub fn complete_publish(&mut self, publish: &Publish) {
        if self.failed.is_some() {
            return;
        }
        self.published = self.published.max(publish.renames);
        if publish.truncations != self.truncations_now() {
            return;
        }
        let (base, size, next_offset) = publish.shows;
        self.expose(base, size, next_offset);
    }

    /// Makes the renames made so far durable, under the lock (a flush of
    /// the log's own).
    pub(super) fn publish_now(&mut self) -> Result<()> {
        if let Some(publish) = self.publish_task(0, 0, 0) {
            publish.sync()?;
            self.published = publish.renames;
        }
        Ok(())
    }
}

/// Gives each segment a writer left under a temporary name its own name
/// when it continues the log exactly (its header names the offset where
/// the last segment recovery kept ends), and recovers it as the last
/// segment; removes every other (see "Order on disk"). For a writable open,
/// after `recovery`, which `recover` runs again after each adoption; and
/// for `klog-recover`, which so ends in the files the broker's open would.
pub(crate) fn adopt_rolled(
    vfs: &dyn Vfs,
    dir: &std::path::Path,
    mut recovery: RecoveryReport,
    recover: impl Fn() -> Result<RecoveryReport>,
) -> Result<RecoveryReport> {
    loop {
        let names = vfs.list(dir).ctx("list", dir)?;
        let mut temps: Vec<u64> = names
            .iter()
            .filter_map(|n| segment::parse_temp_log_name(n))
            .collect();
        if temps.is_empty() {
            return Ok(recovery);
        }
        temps.sort_unstable();
        let end = recovery.next_offset();
        let continues = temps.iter().copied().find(|&seq| {
            let [log, ..] = segment::temp_paths(dir, seq);
            end.is_some() && temp_base(vfs, &log) == end
        });
        let Some(seq) = continues else {
            for seq in temps {
                for path in segment::temp_paths(dir, seq) {
                    match vfs.remove(&path) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            return Err(crate::error::Error::io("remove", &path, e))
                        }
                        _ => {}
                    }
                }
            }
            fs::sync_directory(vfs, dir)?;
            return Ok(recovery);
        };
        let base = end.unwrap_or_default();
        let final_log = dir.join(segment::log_file_name(base));
        let (index, timeindex) = crate::storage::index::index_paths(&final_log);
        let [temp_log, temp_index, temp_timeindex] = segment::temp_paths(dir, seq);
        for (from, to) in [
            (&temp_index, &index),
            (&temp_timeindex, &timeindex),
            (&temp_log, &final_log),
        ] {
            if vfs.exists(from) {
                vfs.rename(from, to).ctx("rename", from)?;
            }
        }
        recovery = recover()?;
    }
}

/// The base offset the header of the segment file `path` names, if whole.
fn temp_base(vfs: &dyn Vfs, path: &std::path::Path) -> Option<u64> {
    let file = vfs.open_read(path).ok()?;
    let mut header = [0u8; segment::SEGMENT_HEADER_BYTES];
    file.read_exact_at(&mut header, 0).ok()?;
    segment::decode_header(&header).ok().map(|(base, _)| base)
}
