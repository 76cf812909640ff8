//! The next segment's files, made ahead of the roll that needs them,
//! under temporary names (see [`crate::storage::log`]'s "Order on disk").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{encode_gaps_header, encode_header};
use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{VFile, Vfs};
use crate::storage::index::SegmentIndex;
use crate::storage::record::Format;
use crate::storage::spare::Spares;

/// Paths (`.log`, `.index`, `.timeindex`) of the segment files made ahead
/// of a roll, or by it, under temporary names: `next-<seq>.log` and so on,
/// which are no segment's name. A segment keeps them until its bytes and
/// those of every segment before it are durable (`Segment::publish`).
/// Opening the log adopts such a segment when it continues the log (a
/// killed writer left it; the page cache kept what came before it) and
/// removes it otherwise (a power cut tore what came before it: none of its
/// records was ever shown or called durable), so that a segment never
/// follows a torn one (a gap that opening a log refuses).
pub fn temp_paths(dir: &Path, seq: u64) -> [PathBuf; 3] {
    ["log", "index", "timeindex"].map(|ext| dir.join(format!("next-{seq}.{ext}")))
}

/// The number of the temporary segment file name `name` (`next-<seq>.log`).
pub fn parse_temp_log_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("next-")?.strip_suffix(".log")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The files of the next segment, made ahead of a roll, outside the log's
/// lock: created under temporary names, the index preallocated and
/// mapped. A roll only writes its header and appends to it.
#[derive(Debug)]
pub struct PreparedSegment {
    pub(super) seq: u64,
    pub(super) path: PathBuf,
    pub(super) file: Arc<dyn VFile>,
    pub(super) index: SegmentIndex,
    /// Bytes of zeros the file holds, written and synced (a spare's), or 0.
    pub(super) zeroed: u64,
}

impl PreparedSegment {
    /// Creates the files (`temp_paths(dir, seq)`), with an index of
    /// `index_slots` slots: the log file a spare of `spares` when one is
    /// ready, else empty. Nothing is synced: the segment's data is, at its
    /// first flush, before it takes its own name.
    pub fn create(
        vfs: &dyn Vfs,
        dir: &Path,
        seq: u64,
        index_slots: usize,
        spares: Option<&Spares>,
    ) -> Result<PreparedSegment> {
        let [path, ..] = temp_paths(dir, seq);
        let made = (|| {
            let (file, zeroed) = create_log_file(vfs, &path, spares)?;
            let index = SegmentIndex::create(vfs, &path, Vec::new(), index_slots)?;
            Ok(PreparedSegment {
                seq,
                path: path.clone(),
                file,
                index,
                zeroed,
            })
        })();
        if made.is_err() {
            remove_files(vfs, &temp_paths(dir, seq));
        }
        made
    }

    /// Writes the header of the segment starting at `base_offset`, one
    /// that takes gaps with `gaps` (to the page cache: the segment's
    /// first flush syncs it). A failure (a full disk) leaves the files as
    /// they were, ready for another try.
    pub fn head(&self, base_offset: u64, gaps: bool) -> Result<()> {
        let header = match gaps {
            true => encode_gaps_header(base_offset),
            false => encode_header(base_offset, Format::Kafka),
        };
        if let Err(e) = self.file.write_all_at(&header, 0) {
            let _ = self.file.set_len(0);
            return Err(Error::io("write", &self.path, e));
        }
        Ok(())
    }

    /// Removes its files (best effort: recovery removes what is left).
    pub fn discard(self, vfs: &dyn Vfs) {
        let dir = self.path.parent().unwrap_or(Path::new(""));
        let paths = temp_paths(dir, self.seq);
        drop(self);
        remove_files(vfs, &paths);
    }
}

/// Creates the segment file `path`: a spare of `spares` moved there, when
/// one is ready (with its size), else an empty file (0).
pub(super) fn create_log_file(
    vfs: &dyn Vfs,
    path: &Path,
    spares: Option<&Spares>,
) -> Result<(Arc<dyn VFile>, u64)> {
    if let Some(zeroed) = spares.and_then(|s| s.take(path)) {
        let file = vfs.open(path, false).ctx("open segment", path)?;
        return Ok((file, zeroed));
    }
    let file = vfs.open(path, true).ctx("create segment", path)?;
    file.set_len(0).ctx("truncate", path)?;
    Ok((file, 0))
}

fn remove_files(vfs: &dyn Vfs, paths: &[PathBuf]) {
    for path in paths {
        let _ = vfs.remove(path);
    }
}
