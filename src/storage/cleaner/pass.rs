//! One pass of the cleaner over a partition, outside the log's lock: the
//! offset map of its dirty records, then its closed segments rewritten
//! under temporary names (see [`super`] for what is kept and the order on
//! disk).

use std::cell::Cell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::map::OffsetMap;
use super::{cleaned_paths, CleanPlan, Cleaned, Group, Source};
use crate::error::{Error, IoContext, Result};
use crate::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};
use crate::storage::batches::FileBatches;
use crate::storage::fs::{VFile, Vfs};
use crate::storage::index::{IndexEntry, SegmentIndex};
use crate::storage::producers::AbortedTxn;
use crate::storage::record::{
    compression, Batch, Codec, DecodeError, Decompressed, Format, BATCH_HEADER_BYTES,
    BATCH_LENGTH_PREFIX_BYTES,
};
use crate::storage::segment::{encode_cleaned_header, SEGMENT_HEADER_BYTES};

/// Bytes gathered before a write to a cleaned segment.
const WRITE_BYTES: usize = 1 << 20;

/// Where a pass stopped being able to judge records: the offset map holds
/// the latest offset of each key seen from the dirty start up to `end`.
struct Mapped {
    end: u64,
}

/// Says whether a walk goes on, told the bytes of each batch read
/// (throttling sleeps in it; a stop answers `false`).
pub type Pace<'p> = dyn FnMut(u64) -> bool + 'p;

/// The aborted transactions of the plan, by producer: the ranges of
/// offsets from each one's first batch to its marker.
struct Aborts(HashMap<i64, Vec<(u64, u64)>>);

impl Aborts {
    fn new(txns: &[AbortedTxn]) -> Aborts {
        let mut by_producer: HashMap<i64, Vec<(u64, u64)>> = HashMap::new();
        for t in txns {
            by_producer
                .entry(t.producer_id)
                .or_default()
                .push((t.first_offset, t.last_offset));
        }
        for ranges in by_producer.values_mut() {
            ranges.sort_unstable();
        }
        Aborts(by_producer)
    }

    /// Whether a (data) batch of `producer` at `offset` belongs to an
    /// aborted transaction.
    fn holds(&self, producer: i64, offset: u64) -> bool {
        let Some(ranges) = self.0.get(&producer) else {
            return false;
        };
        let i = ranges.partition_point(|(first, _)| *first <= offset);
        i > 0 && offset <= ranges[i - 1].1
    }
}

impl CleanPlan {
    /// Runs the pass with `map` (cleared first): `Ok(None)` when there was
    /// nothing to clean or `pace` stopped it (the files it had written are
    /// removed).
    pub fn run(self, map: &mut OffsetMap, pace: &mut Pace<'_>) -> Result<Option<Cleaned>> {
        map.clear();
        let aborts = Aborts::new(&self.aborted);
        let mut scratch = Decompressed::default();
        let Some(mapped) = self.map(map, &aborts, &mut scratch, pace)? else {
            return Ok(None);
        };
        if mapped.end <= self.dirty_from {
            return Ok(None);
        }
        let mut groups = Vec::new();
        for sources in self.groups(mapped.end) {
            let writer = Writer {
                plan: &self,
                map,
                map_end: mapped.end,
                aborts: &aborts,
                fresh_tombstone: Cell::new(false),
            };
            match writer.write_group(sources, &mut scratch, pace) {
                Ok(Some(group)) => groups.push(group),
                Ok(None) => {
                    super::discard(&*self.vfs, &self.dir, &groups);
                    return Ok(None);
                }
                Err(e) => {
                    super::discard(&*self.vfs, &self.dir, &groups);
                    return Err(e);
                }
            }
        }
        Ok(Some(Cleaned {
            vfs: Arc::clone(&self.vfs),
            dir: self.dir.clone(),
            groups,
            map_end: mapped.end,
            truncations: self.truncations,
        }))
    }

    /// Puts the latest offset of every key from the dirty start on into
    /// `map`, until it is full: where it stopped. Control batches and
    /// aborted transactions put nothing (they supersede no record).
    fn map(
        &self,
        map: &mut OffsetMap,
        aborts: &Aborts,
        scratch: &mut Decompressed<'_>,
        pace: &mut Pace<'_>,
    ) -> Result<Option<Mapped>> {
        let dirty = self.sources.iter().filter(|s| s.end > self.dirty_from);
        let mut end = self.dirty_from;
        for source in dirty {
            let file = &*source.file;
            let mut walk = FileBatches::new(
                file,
                Format::Kafka,
                SEGMENT_HEADER_BYTES as u64,
                source.size,
                BATCH_BYTES_MAX,
            );
            while let Some(step) = walk.next_batch().ctx("read", &source.path)? {
                let (position, batch) =
                    step.map_err(|stop| damaged(source, stop.position, stop.error))?;
                if !pace(batch.total_bytes() as u64) {
                    return Ok(None);
                }
                let h = batch.header;
                if h.next_offset() <= self.dirty_from
                    || h.is_control()
                    || (h.is_transactional() && aborts.holds(h.producer_id, h.base_offset))
                {
                    continue;
                }
                let records = batch
                    .records_in(scratch, RECORD_BYTES_MAX_LIMIT)
                    .map_err(|e| damaged(source, position, e))?;
                for r in records {
                    let r = r.map_err(|e| damaged(source, position, e))?;
                    let Some(key) = r.key.filter(|_| r.offset >= self.dirty_from) else {
                        continue;
                    };
                    if !map.put(key, r.offset) {
                        return Ok(Some(Mapped { end: r.offset }));
                    }
                }
            }
            end = source.end;
        }
        Ok(Some(Mapped { end }))
    }

    /// The sources a pass mapped up to `map_end` rewrites, in groups that
    /// each become one segment: consecutive, no larger together than a
    /// segment, spanning fewer than 2^32 offsets, and all written before
    /// the tombstone horizon; a source written after it is cleaned alone
    /// (a cleaned segment's time is its newest source's: a tombstone
    /// merged again and again with younger records would never grow old).
    fn groups(&self, map_end: u64) -> Vec<&[Source]> {
        let n = self.sources.iter().take_while(|s| s.base < map_end).count();
        let old = |s: &Source| s.last_append_ms.unwrap_or(i64::MIN) < self.delete_horizon_ms;
        let mut groups = Vec::new();
        let mut rest = &self.sources[..n];
        while let Some(first) = rest.first() {
            let mut size = 0;
            let len = rest
                .iter()
                .take_while(|s| {
                    size += s.size;
                    let fits = size <= self.segment_bytes.max(first.size);
                    fits && s.end - first.base < u64::from(u32::MAX) && old(s) && old(first)
                })
                .count()
                .max(1);
            groups.push(&rest[..len]);
            rest = &rest[len..];
        }
        groups
    }
}

/// The rewrite of the sources of one group into a cleaned segment.
struct Writer<'w> {
    plan: &'w CleanPlan,
    map: &'w OffsetMap,
    map_end: u64,
    aborts: &'w Aborts,
    /// A tombstone from the dirty part was kept: the cleaned segment's
    /// time is the clean's, so that it stays at least the delete
    /// retention from now (as Kafka's delete horizon, set at the first
    /// clean that keeps it).
    fresh_tombstone: Cell<bool>,
}

/// A cleaned segment being written.
struct Output {
    path: PathBuf,
    file: Arc<dyn VFile>,
    base: u64,
    /// Bytes gathered, to be written at `size - pending.len()`.
    pending: Vec<u8>,
    size: u64,
    max_timestamp: i64,
    entries: Vec<IndexEntry>,
    bytes_since_index: u64,
}

impl Output {
    fn push(&mut self, batch: &[u8], header_at: &Batch<'_>, interval: u32) -> Result<()> {
        let mut header = header_at.header;
        header.batch_length = (batch.len() - BATCH_LENGTH_PREFIX_BYTES) as u32;
        if self.bytes_since_index >= u64::from(interval) {
            let entry = IndexEntry::for_batch(self.base, self.size, &header, self.max_timestamp)
                .map_err(Error::InvalidBatch)?;
            self.entries.push(entry);
            self.bytes_since_index = 0;
        }
        self.max_timestamp = self.max_timestamp.max(header.max_timestamp);
        self.pending.extend_from_slice(batch);
        self.size += batch.len() as u64;
        self.bytes_since_index += batch.len() as u64;
        if self.pending.len() >= WRITE_BYTES {
            self.write_pending()?;
        }
        Ok(())
    }

    fn write_pending(&mut self) -> Result<()> {
        let at = self.size - self.pending.len() as u64;
        self.file
            .write_all_at(&self.pending, at)
            .ctx("write", &self.path)?;
        self.pending.clear();
        Ok(())
    }
}

impl Writer<'_> {
    /// Writes the group's cleaned segment and its indexes, durably, under
    /// temporary names: `Ok(None)` when `pace` stopped it (what it wrote
    /// is removed).
    fn write_group(
        &self,
        sources: &[Source],
        scratch: &mut Decompressed<'_>,
        pace: &mut Pace<'_>,
    ) -> Result<Option<Group>> {
        let vfs = &*self.plan.vfs;
        let (base, end) = (sources[0].base, sources[sources.len() - 1].end);
        let [path, ..] = cleaned_paths(&self.plan.dir, base);
        let file = vfs.open(&path, true).ctx("create", &path)?;
        file.set_len(0).ctx("truncate", &path)?;
        let mut out = Output {
            path,
            file,
            base,
            pending: encode_cleaned_header(base, end).to_vec(),
            size: SEGMENT_HEADER_BYTES as u64,
            max_timestamp: i64::MIN,
            entries: Vec::new(),
            bytes_since_index: 0,
        };
        let group = Group {
            base,
            end,
            sources: sources.iter().map(|s| (s.base, s.size)).collect(),
            size: 0,
            max_timestamp: i64::MIN,
            entries: Vec::new(),
            first_append_ms: sources.iter().filter_map(|s| s.first_append_ms).min(),
            last_append_ms: sources.iter().filter_map(|s| s.last_append_ms).max(),
        };
        let written = (|| {
            for source in sources {
                if !self.rewrite(source, &mut out, scratch, pace)? {
                    return Ok(None);
                }
            }
            out.write_pending()?;
            let time = match self.fresh_tombstone.get() {
                true => Some(self.plan.now_ms),
                false => group.last_append_ms,
            };
            finish(vfs, &out, time).map(|()| Some(time))
        })();
        match written {
            Ok(Some(last_append_ms)) => Ok(Some(Group {
                size: out.size,
                max_timestamp: out.max_timestamp,
                entries: out.entries,
                last_append_ms,
                ..group
            })),
            stopped => {
                super::remove_cleaned(vfs, &self.plan.dir, base);
                stopped.map(|_| None)
            }
        }
    }

    /// Copies what `source` keeps into `out`: false when `pace` stopped.
    fn rewrite(
        &self,
        source: &Source,
        out: &mut Output,
        scratch: &mut Decompressed<'_>,
        pace: &mut Pace<'_>,
    ) -> Result<bool> {
        let file = &*source.file;
        let size = source.size;
        let mut walk = FileBatches::new(
            file,
            Format::Kafka,
            SEGMENT_HEADER_BYTES as u64,
            size,
            BATCH_BYTES_MAX,
        );
        // Tombstones go from a segment last written before the horizon.
        // Tombstones go from a segment cleaned before (never at the first
        // clean that sees them) and last written before the horizon.
        let tombstones_go = source.end <= self.plan.dirty_from
            && source
                .last_append_ms
                .is_some_and(|t| t < self.plan.delete_horizon_ms);
        let mut kept = Vec::new();
        let mut rebuilt = Vec::new();
        while let Some(step) = walk.next_batch().ctx("read", &source.path)? {
            let (position, batch) =
                step.map_err(|stop| damaged(source, stop.position, stop.error))?;
            if !pace(batch.total_bytes() as u64) {
                return Ok(false);
            }
            let interval = self.plan.index_interval_bytes;
            match self
                .filter(&batch, tombstones_go, scratch, &mut kept)
                .map_err(|e| damaged(source, position, e))?
            {
                None => out.push(batch.bytes(), &batch, interval)?,
                Some(0) => {}
                Some(count) => {
                    rebuild(&batch, &kept, count, &mut rebuilt);
                    out.push(&rebuilt, &batch, interval)?;
                }
            }
        }
        Ok(true)
    }

    /// What of `batch` stays: `None`, all of it (copied as it is), or the
    /// number of records kept, whose bytes are put in `kept`.
    fn filter(
        &self,
        batch: &Batch<'_>,
        tombstones_go: bool,
        scratch: &mut Decompressed<'_>,
        kept: &mut Vec<u8>,
    ) -> std::result::Result<Option<u32>, DecodeError> {
        let h = &batch.header;
        if h.is_control() {
            return Ok(None);
        }
        if h.is_transactional() && self.aborts.holds(h.producer_id, h.base_offset) {
            return Ok(Some(0));
        }
        kept.clear();
        let mut count = 0;
        let mut records = batch.records_in(scratch, RECORD_BYTES_MAX_LIMIT)?;
        loop {
            let (section, at) = records.section();
            let Some(r) = records.next() else {
                break;
            };
            let r = r?;
            if self.keeps(r.offset, r.key, r.null_value, tombstones_go) {
                kept.extend_from_slice(&section[at..at + r.encoded_bytes as usize]);
                count += 1;
            }
        }
        Ok((count < h.record_count).then_some(count))
    }

    /// Whether the record at `offset` stays: one past what the map saw,
    /// without a key, or its key's latest (unless a tombstone whose time
    /// is up).
    fn keeps(
        &self,
        offset: u64,
        key: Option<&[u8]>,
        null_value: bool,
        tombstones_go: bool,
    ) -> bool {
        if offset >= self.map_end {
            return true;
        }
        let Some(key) = key else {
            return true;
        };
        match self.map.get(key) {
            Some(latest) if latest > offset => false,
            _ if null_value && tombstones_go => false,
            _ => {
                if null_value && offset >= self.plan.dirty_from {
                    self.fresh_tombstone.set(true);
                }
                true
            }
        }
    }
}

/// Builds in `out` the batch `original` with only its `count` records
/// whose bytes are `records`: the same header (base offset, last offset
/// delta, timestamps, producer, sequence, epoch, attributes and codec),
/// with its length, count and CRC32C made right.
fn rebuild(original: &Batch<'_>, records: &[u8], count: u32, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&original.bytes()[..BATCH_HEADER_BYTES]);
    let codec = original.header.codec();
    if codec == Codec::None {
        out.extend_from_slice(records);
    } else {
        let mut compressed = Vec::new();
        compression::compress(codec, None, records, &mut compressed);
        out.extend_from_slice(&compressed);
    }
    let length = (out.len() - BATCH_LENGTH_PREFIX_BYTES) as u32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    out[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Makes the written segment durable with its time and its indexes.
fn finish(vfs: &dyn Vfs, out: &Output, last_append_ms: Option<i64>) -> Result<()> {
    if let Some(ms) = last_append_ms {
        // Retention by time goes by the segment's last append.
        out.file
            .set_modified_ms(ms)
            .ctx("set the time of", &out.path)?;
    }
    out.file.sync_data().ctx("fsync", &out.path)?;
    let mut index = SegmentIndex::create(vfs, &out.path, out.entries.clone(), 0)?;
    index.trim()
}

/// The error of a batch the cleaner cannot read: damage recovery and the
/// scrub judge, which the cleaner leaves alone.
fn damaged(source: &Source, position: u64, error: DecodeError) -> Error {
    if let DecodeError::Busy { .. } = error {
        // The room for decompressed records is held now: a later pass.
        return Error::InvalidBatch(error);
    }
    Error::Corrupt {
        path: source.path.clone(),
        position,
        reason: format!("the cleaner stops at it: {error}"),
    }
}
