//! Reading a log: where the bytes from an offset on are, found in two
//! steps so that a caller holding a lock around the log needs it only for
//! the first. [`Log::locate`] takes from the log what the lookup needs
//! (each candidate segment's file, where its index puts the scan's start,
//! and how far readers may see); [`Lookup::find`] reads the batch headers
//! from the file, which on a cold page cache is the slow part, and needs
//! no access to the log. A segment that retention deletes meanwhile is
//! still read through the file handle taken.

use std::path::PathBuf;
use std::sync::Arc;

use super::{FileSlice, Log};
use crate::error::{Error, Result};
use crate::limits;
use crate::storage::batches::{BatchAt, Batches};
use crate::storage::fs::VFile;
use crate::storage::record::{DecodeError, Decompressed, Format};
use crate::storage::recover;
use crate::storage::segment::SEGMENT_HEADER_BYTES;

/// Where a read from an offset finds its bytes: taken under the log's
/// lock by [`Log::locate`], read by [`Lookup::find`] with the lock let go.
#[derive(Debug, Clone)]
pub struct Lookup {
    offset: u64,
    bytes_max: u64,
    /// Records from this offset on are not read, though visible (a
    /// replicated partition's high watermark, a batch boundary).
    cap: Option<u64>,
    /// The segment holding the offset, and the one after it (the offset
    /// may be the end of the first): at most two.
    candidates: Vec<Candidate>,
}

/// One segment a lookup scans: its file, from where, and up to where
/// readers may see.
#[derive(Debug, Clone)]
struct Candidate {
    file: Arc<dyn VFile>,
    path: PathBuf,
    format: Format,
    /// Below which offset its batches may skip offsets.
    skips_below: Option<u64>,
    /// Where the scan starts, and the offset of the batch there.
    start: (u64, u64),
    limit: u64,
}

impl Lookup {
    /// Reads the batch headers from the scan's start to the batch holding
    /// the offset: whole batches from there up to the byte budget, but at
    /// least one, within what readers may see. `None` when there is none.
    pub fn find(&self) -> Result<Option<FileSlice>> {
        for c in &self.candidates {
            let found = c
                .at()
                .find(c.start, self.offset, c.limit, limits::BATCH_BYTES_MAX)?;
            if let Some((position, header)) = found {
                let budget = self.bytes_max.max(header.total_bytes());
                let limit = match self.cap {
                    Some(cap) if header.base_offset >= cap => return Ok(None),
                    Some(cap) => {
                        self.cap_position(c, (position, header.base_offset), cap, budget)?
                    }
                    None => c.limit,
                };
                let len = (limit - position).min(budget);
                return Ok(Some(FileSlice {
                    file: Arc::clone(&c.file),
                    path: c.path.clone(),
                    position,
                    len,
                    first_batch_offset: header.base_offset,
                    format: c.format,
                }));
            }
        }
        Ok(None)
    }
}

impl Lookup {
    /// Where the records of segment `c` below `cap` end, scanning batch
    /// headers from `position` (a batch before the cap) over no more than
    /// the read's `budget`: the end of the batch holding `cap - 1` when it
    /// ends within it, else the segment's limit (every byte the read may
    /// take is then below the cap). The scan costs a header read per batch
    /// the read returns, never a walk to a distant cap.
    fn cap_position(
        &self,
        c: &Candidate,
        (position, first): (u64, u64),
        cap: u64,
        budget: u64,
    ) -> Result<u64> {
        let last = c.at().find(
            (position, first),
            cap - 1,
            c.limit.min(position.saturating_add(budget)),
            limits::BATCH_BYTES_MAX,
        )?;
        Ok(last.map_or(c.limit, |(at, header)| at + header.total_bytes()))
    }
}

impl Candidate {
    fn at(&self) -> BatchAt<'_> {
        BatchAt {
            file: &*self.file,
            path: &self.path,
            format: self.format,
            skips_below: self.skips_below,
        }
    }
}

impl Log {
    /// The bytes from the batch holding `offset` on, within one segment:
    /// whole batches up to `bytes_max`, but at least one whole batch (so a
    /// reader always progresses), stopping at the visible end. `Ok(None)`
    /// when `offset` is the end of the log.
    pub fn read(&self, offset: u64, bytes_max: u64) -> Result<Option<FileSlice>> {
        match self.locate(offset, bytes_max)? {
            Some(lookup) => lookup.find(),
            None => Ok(None),
        }
    }

    /// The first step of [`Log::read`], reading nothing from a file: what
    /// [`Lookup::find`] needs to find the bytes. `Ok(None)` when `offset`
    /// is the visible end; an error when it is outside the log.
    pub fn locate(&self, offset: u64, bytes_max: u64) -> Result<Option<Lookup>> {
        self.locate_below(offset, bytes_max, u64::MAX)
    }

    /// [`Log::locate`] for a reader who may see only records below `cap`
    /// (a batch boundary: a replicated partition's high watermark), though
    /// more are visible: `Ok(None)` from the cap to the visible end, which
    /// is a wait, not an error.
    pub fn locate_below(&self, offset: u64, bytes_max: u64, cap: u64) -> Result<Option<Lookup>> {
        self.locate_within(
            offset,
            bytes_max,
            cap,
            (self.visible_offset(), self.visible),
        )
    }

    /// [`Log::locate`] for a follower of this log (its leader serves it
    /// before its own fsync, as Kafka's leaders serve their log end): every
    /// record written to the files, durable or not, but none still gathered
    /// in memory (a failed write may yet undo those and give their offsets
    /// to others). A write is never taken back once made; only a crash
    /// before the fsync may lose it, and nothing is acknowledged or shown
    /// to consumers before it is durable on the in-sync replicas.
    /// A stopped log serves nothing (its file may have been cut back to
    /// what is durable).
    pub fn locate_written(&self, offset: u64, bytes_max: u64) -> Result<Option<Lookup>> {
        if let Some(reason) = &self.failed {
            return Err(Error::StorageFailed {
                dir: self.dir.clone(),
                reason: reason.clone(),
            });
        }
        let active = self.active();
        let written = (active.base_offset, active.written_size());
        self.locate_within(
            offset,
            bytes_max,
            u64::MAX,
            (active.written_offset(), written),
        )
    }

    /// [`Log::locate_below`] up to `end`, whose last bytes are the first
    /// `size` of the segment at `base` (`extent`).
    fn locate_within(
        &self,
        offset: u64,
        bytes_max: u64,
        cap: u64,
        (end, extent): (u64, (u64, u64)),
    ) -> Result<Option<Lookup>> {
        let start = self.start_offset();
        if offset < start || offset > end {
            return Err(Error::OffsetOutOfRange { offset, start, end });
        }
        if offset == end || offset >= cap {
            return Ok(None);
        }
        let (visible_base, visible_size) = extent;
        // The segment holding the offset, and the first one after it with
        // a batch: the offset may be at the end of the first, or past its
        // last batch (a cleaned segment's gap), and cleaned segments may
        // hold no batch at all.
        let after = (self.segments.range(offset + 1..))
            .find(|(_, s)| s.size > SEGMENT_HEADER_BYTES as u64 || s.base_offset == visible_base);
        let candidates = self
            .segments
            .range(..=offset)
            .rev()
            .take(1)
            .chain(after)
            .map(|(_, segment)| segment)
            // Segments past the visible one hold nothing readers may see.
            .take_while(|segment| segment.base_offset <= visible_base)
            .map(|segment| -> Result<Candidate> {
                Ok(Candidate {
                    file: segment.file()?,
                    path: segment.path.clone(),
                    format: segment.format,
                    skips_below: segment.skips_below(),
                    start: segment.scan_start(offset),
                    limit: if segment.base_offset < visible_base {
                        segment.size
                    } else {
                        visible_size
                    },
                })
            })
            .collect::<Result<_>>()?;
        Ok(Some(Lookup {
            offset,
            bytes_max,
            cap: (cap < end).then_some(cap),
            candidates,
        }))
    }
}

/// The offset of the first record at or after `timestamp_ms` among those
/// readers may see, or `None`. `log` gives the log, locked if others share
/// it: it is held only to find where each chunk lies, and the chunk is
/// read from its file after (a cold page cache costs no one else).
pub fn offset_for_timestamp_in<L: std::ops::Deref<Target = Log>>(
    log: impl Fn() -> L,
    timestamp_ms: i64,
) -> Result<Option<(u64, i64)>> {
    let Some(mut offset) = log().timestamp_scan_start(timestamp_ms) else {
        return Ok(None);
    };
    // Never below the start DeleteRecords moved (its records are gone).
    offset = offset.max(log().start_offset());
    let mut buf = Vec::new();
    let mut scratch = Decompressed::default();
    loop {
        let lookup = match log().locate(offset, 1 << 20) {
            Ok(Some(lookup)) => lookup,
            // The end, or retention took the segment meanwhile.
            Ok(None) | Err(Error::OffsetOutOfRange { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(slice) = lookup.find()? else {
            return Ok(None);
        };
        slice.read_into(&mut buf)?;
        let from = offset;
        // A batch the read's byte budget cut is read again from its offset.
        for step in Batches::new(slice.format, &buf, limits::BATCH_BYTES_MAX) {
            let Ok((at, batch)) = step else {
                break;
            };
            if batch.header.max_timestamp >= timestamp_ms {
                // Busy (the room for decompressed records is held now) is
                // no damage.
                let corrupt = |e: DecodeError| match e {
                    DecodeError::Busy { .. } => Error::InvalidBatch(e),
                    e => recover::corrupt(&slice.path, slice.position + at, e.to_string()),
                };
                let records = batch
                    .records_in(&mut scratch, limits::RECORD_BYTES_MAX_LIMIT)
                    .map_err(corrupt)?;
                for r in records {
                    let r = r.map_err(corrupt)?;
                    if r.offset >= from && r.timestamp >= timestamp_ms {
                        return Ok(Some((r.offset, r.timestamp)));
                    }
                }
            }
            offset = batch.header.next_offset();
        }
        if offset == from {
            // Not one whole batch: damaged, said by the reads' checks.
            return Ok(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::log::{LogConfig, OpenOptions};
    use crate::storage::record::BatchBuilder;

    /// A log of 40 one-record batches over several segments.
    fn log(sim: &SimFs) -> Log {
        let dir = Path::new("/p");
        sim.create_dir_all_durable(dir);
        let config = LogConfig {
            segment_bytes: 4096,
            retention_ms: None,
            ..LogConfig::default()
        };
        let options = OpenOptions {
            writable: true,
            lock: false,
        };
        let mut log = Log::open(Arc::new(sim.clone()), dir, config, options).unwrap();
        for i in 0..40u8 {
            let mut b = BatchBuilder::new();
            b.push(0, None, &[], &[i; 200]);
            log.append(&mut b.finish().to_vec(), 0).unwrap();
        }
        log.flush().unwrap();
        assert!(log.segments().count() > 1);
        log
    }

    /// The offsets of the batches in a read's bytes.
    fn offsets(log: &Log, offset: u64, bytes_max: u64, cap: u64) -> Vec<u64> {
        let Some(lookup) = log.locate_below(offset, bytes_max, cap).unwrap() else {
            return Vec::new();
        };
        let Some(slice) = lookup.find().unwrap() else {
            return Vec::new();
        };
        let mut bytes = Vec::new();
        slice.read_into(&mut bytes).unwrap();
        crate::storage::batches::Batches::new(slice.format, &bytes, limits::BATCH_BYTES_MAX)
            .map(|b| b.unwrap().1.header.base_offset)
            .collect()
    }

    #[test]
    fn a_read_below_a_cap_stops_at_the_cap_and_waits_from_it() {
        let sim = SimFs::new();
        let log = log(&sim);
        assert_eq!(offsets(&log, 0, 1 << 20, 5), [0, 1, 2, 3, 4]);
        assert_eq!(offsets(&log, 3, 1 << 20, 5), [3, 4]);
        assert!(
            offsets(&log, 5, 1 << 20, 5).is_empty(),
            "at the cap: a wait"
        );
        assert!(
            offsets(&log, 7, 1 << 20, 5).is_empty(),
            "past it, below the end: a wait"
        );
        assert!(
            log.locate_below(41, 1 << 20, 5).is_err(),
            "past the end: out of range"
        );
        // A small budget still reads at least one whole batch, and a cap in
        // a later segment leaves a read of this one whole.
        assert_eq!(offsets(&log, 0, 1, 5), [0]);
        let first_segment = offsets(&log, 0, 1 << 20, 40);
        assert_eq!(offsets(&log, 0, 1 << 20, 39), first_segment);
        assert!(!first_segment.contains(&39));
        let last = *first_segment.last().unwrap();
        assert_eq!(
            offsets(&log, 0, 1 << 20, last),
            first_segment[..first_segment.len() - 1]
        );
    }
}
