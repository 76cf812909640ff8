//! The cleaner: log compaction (`cleanup.policy=compact`), which keeps the
//! latest record of each key below the active segment, so that a topic of
//! updates holds a table, not its history.
//!
//! # What a clean keeps
//!
//! A pass maps, in bounded memory ([`OffsetMap`]), each key to its latest
//! offset among the records from the log's *dirty start* (where the last
//! pass's map ended, kept in the file `cleaner-offset`) up to where the
//! map filled or the cleanable part ends. It then rewrites every closed
//! segment from the log's start up to where the map ended, keeping:
//!
//! - each record whose key the map holds at no later offset, or does not
//!   hold (already the latest since an earlier pass), and every record at
//!   or past where the map ended (not yet judged);
//! - records without a key (a compacted topic refuses them; those written
//!   before the topic was compacted are kept);
//! - tombstones (a null value) while they are young: a tombstone goes,
//!   with the records of its key before it, once it was cleaned before
//!   (below the dirty start) and the segment holding it was last written
//!   more than `delete.retention.ms` ago. The first clean that keeps a
//!   tombstone stamps its cleaned segment with the clean's time (Kafka's
//!   delete horizon, set at that clean), and a segment that young is
//!   cleaned alone, never merged: so a tombstone stays at least
//!   `delete.retention.ms` after compaction took the values before it,
//!   and a consumer that read one of them reads the delete too;
//! - control batches (transaction markers), whole; the records of aborted
//!   transactions go, and put nothing into the map.
//!
//! A batch keeps its boundaries and header: its base offset, last offset
//! delta, timestamps, producer id, epoch and sequence, leader epoch and
//! codec. One whose records all stay is copied byte for byte; one that
//! lost some is rebuilt with the rest (compressed again with its codec)
//! and a new CRC32C; one that lost all is dropped (Kafka keeps such a
//! batch empty when it is its producer's last; klog's producer state
//! comes from snapshots at rolls, which a clean leaves alone). Offsets
//! never change: the log gets gaps. The last batch a pass reads is never
//! emptied (its records are their keys' latest, and tombstones go only
//! from segments below the dirty start, which the last one a pass cleans
//! never is): a cleaned log still ends where it did, and a follower
//! copying it ends where its leader does (Kafka, whose tombstones may go
//! without new records, keeps such a batch empty: KAFKA-17076). The active segment, segments not yet
//! durable, legacy segments and what the caller may not clean (past the
//! high watermark, the last stable offset, `min.compaction.lag.ms`) are
//! never touched.
//!
//! Consecutive segments are cleaned together into one while their sizes
//! before cleaning add up to a segment's: a cleaned segment
//! ([`crate::storage::segment`]) names, in its header, the end of the
//! offsets it stands for.
//!
//! # Order on disk
//!
//! A pass writes each cleaned segment as `<base>.cleaned.log` with its
//! `.cleaned.index` and `.cleaned.timeindex`, and fsyncs all three,
//! outside the log's lock. Under the lock ([`Log::commit_clean`]), having
//! checked that the segments it read are all still there as they were
//! (no retention, truncation or failure meanwhile), it renames each
//! one's indexes and then its log over the first replaced segment's
//! names and fsyncs the directory, one cleaned segment after the other
//! in offset order, and only then removes the other replaced segments'
//! files ([`Swapped::finish`], outside the lock). A power cut
//! leaves:
//!
//! - before the log's rename is durable: the old segments (an index of
//!   the cleaned one beside the old log is judged by its invariants at
//!   the next open and rebuilt), and `.cleaned` files that the next open
//!   removes;
//! - after it: the cleaned segment, whose header's end covers the
//!   replaced segments still there, which the next open removes and a
//!   reader skips.
//!
//! Never a mix that loses a key's latest value or shows an offset twice.
//! A reader that holds a replaced segment's file keeps reading it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Result;
use crate::storage::fs::{self, VFile, Vfs};
use crate::storage::index;
use crate::storage::log::clean::{write_checkpoint, Group};
use crate::storage::log::{Expired, Log};
use crate::storage::producers::AbortedTxn;
use crate::storage::record::Format;
use crate::storage::segment::{cleaned_paths, log_file_name, Segment};

mod map;
mod pass;

pub use map::{OffsetMap, SLOT_BYTES};
pub use pass::Pace;

/// A closed segment a pass reads.
#[derive(Debug, Clone)]
struct Source {
    base: u64,
    /// One past the last offset it stands for: the next segment's base.
    end: u64,
    size: u64,
    file: Arc<dyn VFile>,
    path: PathBuf,
    first_append_ms: Option<i64>,
    last_append_ms: Option<i64>,
}

/// What a pass needs from the log, taken under its lock
/// ([`Log::clean_plan`]) and run outside it ([`CleanPlan::run`]).
#[derive(Debug)]
pub struct CleanPlan {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    sources: Vec<Source>,
    dirty_from: u64,
    aborted: Vec<AbortedTxn>,
    /// When the pass was planned.
    now_ms: i64,
    /// Tombstones in segments last written before this go.
    delete_horizon_ms: i64,
    segment_bytes: u64,
    index_interval_bytes: u32,
    truncations: u64,
}

impl CleanPlan {
    /// Bytes of the segments the pass may read.
    pub fn bytes(&self) -> u64 {
        self.sources.iter().map(|s| s.size).sum()
    }
}

/// The segments a pass wrote, to be swapped in by [`Log::commit_clean`]
/// (or [`Cleaned::discard`]ed).
#[derive(Debug)]
#[must_use = "cleaned segments are committed or discarded"]
pub struct Cleaned {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    groups: Vec<Group>,
    map_end: u64,
    truncations: u64,
}

impl Cleaned {
    /// Removes the files, committing nothing.
    pub fn discard(self) {
        discard(&*self.vfs, &self.dir, &self.groups);
    }

    /// Bytes of the segments it replaces, and of the cleaned ones.
    pub fn sizes(&self) -> (u64, u64) {
        let before = self.groups.iter().flat_map(|g| &g.sources).map(|s| s.1);
        let after = self.groups.iter().map(|g| g.size);
        (before.sum(), after.sum())
    }
}

fn discard(vfs: &dyn Vfs, dir: &Path, groups: &[Group]) {
    for g in groups {
        remove_cleaned(vfs, dir, g.base);
    }
}

/// Removes the cleaned files of `base` in `dir`, as far as it can (what
/// is left the next open removes).
fn remove_cleaned(vfs: &dyn Vfs, dir: &Path, base: u64) {
    for path in cleaned_paths(dir, base) {
        let _ = vfs.remove(&path);
    }
}

/// What a commit leaves to do outside the lock.
#[derive(Debug)]
#[must_use = "the replaced segments' files stay until finished"]
pub struct Swapped {
    replaced: Option<Expired>,
    checkpoint: Option<(Arc<dyn Vfs>, PathBuf, u64)>,
}

impl Swapped {
    /// Nothing was swapped.
    fn none() -> Swapped {
        Swapped {
            replaced: None,
            checkpoint: None,
        }
    }

    /// Whether the cleaned segments are in the log.
    pub fn swapped(&self) -> bool {
        self.checkpoint.is_some()
    }

    /// Removes the replaced segments' files and records the dirty start.
    pub fn finish(self) -> Result<()> {
        if let Some(replaced) = self.replaced {
            replaced.delete()?;
        }
        if let Some((vfs, dir, offset)) = self.checkpoint {
            write_checkpoint(&*vfs, &dir, offset)?;
        }
        Ok(())
    }
}

/// How much of a log a pass could clean, and how much of it is dirty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cleanable {
    /// Bytes of the closed segments a pass may read.
    pub bytes: u64,
    /// Bytes of those at or past the dirty start.
    pub dirty_bytes: u64,
}

impl Cleanable {
    /// The dirty share, 0 to 1.
    pub fn dirty_ratio(&self) -> f64 {
        if self.bytes == 0 {
            return 0.0;
        }
        self.dirty_bytes as f64 / self.bytes as f64
    }
}

impl Log {
    /// The segments a pass may clean when records from `upto` on may not
    /// be touched (the high watermark, the last stable offset) at
    /// `now_ms`: closed, durable, named, of Kafka's format, wholly below
    /// `upto`, and last written at least `min.compaction.lag.ms` ago.
    fn clean_sources(&self, upto: u64, now_ms: i64) -> Vec<&Segment> {
        let lag = i64::try_from(self.config().min_compaction_lag_ms).unwrap_or(i64::MAX);
        let not_durable = self.sealed_bases();
        let closed = self.segments().count().saturating_sub(1);
        let mut sources = Vec::new();
        for segment in self.segments().take(closed) {
            if segment.format == Format::Legacy {
                sources.clear();
                continue;
            }
            let young = segment
                .last_append_ms
                .is_some_and(|t| now_ms.saturating_sub(t) < lag);
            if segment.next_offset > upto
                || segment.temp.is_some()
                || not_durable.contains(&segment.base_offset)
                || young
            {
                break;
            }
            sources.push(segment);
        }
        sources
    }

    /// What a pass could clean now (see [`Log::clean_plan`]).
    pub fn cleanable(&self, upto: u64, now_ms: i64) -> Cleanable {
        let sources = self.clean_sources(upto, now_ms);
        let dirty_from = self.cleaned_to();
        Cleanable {
            bytes: sources.iter().map(|s| s.size).sum(),
            dirty_bytes: (sources.iter())
                .filter(|s| s.next_offset > dirty_from)
                .map(|s| s.size)
                .sum(),
        }
    }

    /// What a pass needs to clean the log below `upto` at `now_ms`
    /// (`None`: nothing is dirty there, the log is not compacted, or it
    /// stopped).
    pub fn clean_plan(&self, upto: u64, now_ms: i64) -> Result<Option<CleanPlan>> {
        if !self.config().compact || self.failed() {
            return Ok(None);
        }
        let dirty_from = self.cleaned_to();
        let mut sources = Vec::new();
        for s in self.clean_sources(upto, now_ms) {
            sources.push(Source {
                base: s.base_offset,
                end: s.next_offset,
                size: s.size,
                file: s.file()?,
                path: s.path.clone(),
                first_append_ms: s.first_append_ms,
                last_append_ms: s.last_append_ms,
            });
        }
        if sources.last().is_none_or(|s| s.end <= dirty_from) {
            return Ok(None);
        }
        let config = self.config();
        let retention = i64::try_from(config.delete_retention_ms).unwrap_or(i64::MAX);
        let (start, end) = (sources[0].base, sources[sources.len() - 1].end);
        Ok(Some(CleanPlan {
            vfs: self.vfs(),
            dir: self.dir().to_path_buf(),
            sources,
            dirty_from,
            aborted: self.aborted_transactions(start, end),
            now_ms,
            delete_horizon_ms: now_ms.saturating_sub(retention),
            segment_bytes: config.segment_bytes,
            index_interval_bytes: config.index_interval_bytes,
            truncations: self.truncations_now(),
        }))
    }

    /// Swaps the segments a pass cleaned into the log (see "Order on
    /// disk"), if the segments it read are all still there as they were;
    /// otherwise discards them. The replaced segments' files go with
    /// [`Swapped::finish`], outside the lock.
    pub fn commit_clean(&mut self, cleaned: Cleaned) -> Result<Swapped> {
        let unchanged = !self.failed()
            && cleaned.truncations == self.truncations_now()
            && cleaned
                .groups
                .iter()
                .flat_map(|g| &g.sources)
                .all(|(base, size)| {
                    self.segments()
                        .find(|s| s.base_offset == *base)
                        .is_some_and(|s| s.size == *size && s.temp.is_none())
                });
        if !unchanged {
            cleaned.discard();
            return Ok(Swapped::none());
        }
        let vfs = self.vfs();
        let dir = self.dir().to_path_buf();
        for (i, g) in cleaned.groups.iter().enumerate() {
            let [log, index, timeindex] = cleaned_paths(&dir, g.base);
            let target = dir.join(log_file_name(g.base));
            let (to_index, to_timeindex) = index::index_paths(&target);
            for (from, to) in [
                (&index, &to_index),
                (&timeindex, &to_timeindex),
                (&log, &target),
            ] {
                if let Err(e) = vfs.rename(from, to) {
                    // The groups renamed so far are swapped (their
                    // replaced files go at the next open); the rest go.
                    discard(&*vfs, &dir, &cleaned.groups[i..]);
                    let e = crate::error::Error::io("rename", from, e);
                    let _ = self.swap_in(&cleaned.groups[..i]);
                    return Err(self.fail(&e));
                }
            }
            // Each group durable before the next: a file system that keeps
            // renames out of order could otherwise keep a later group's
            // clean (a tombstone gone) without an earlier one's (the value
            // it deleted still there).
            if let Err(e) = fs::sync_directory(&*vfs, &dir) {
                discard(&*vfs, &dir, &cleaned.groups[i + 1..]);
                let _ = self.swap_in(&cleaned.groups[..=i]);
                return Err(self.fail(&e));
            }
        }
        let replaced = self.swap_in(&cleaned.groups).map_err(|e| self.fail(&e))?;
        self.set_cleaned_to(cleaned.map_end);
        Ok(Swapped {
            replaced: Some(replaced),
            checkpoint: Some((vfs, dir, cleaned.map_end)),
        })
    }
}

#[cfg(test)]
mod tests;
