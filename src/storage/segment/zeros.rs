//! A segment's zeros: the spare file it was given ahead of its appends
//! ([`crate::storage::spare`]) goes on in zeros past its last batch until
//! they are cut, at its roll and at its log's clean close.

use std::path::Path;

use super::{encode_header, Segment, SEGMENT_HEADER_BYTES};
use crate::error::{IoContext, Result};
use crate::storage::fs::{self, VFile};
use crate::storage::record::Format;
use crate::storage::spare::Spares;

impl Segment {
    /// Gives an empty segment, about to be appended to, a spare's file in
    /// place of its own (which a topic's creation made empty), when one is
    /// ready: the spare is moved to `temp`, headed, synced, and renamed
    /// over the segment's file, and the directory synced, so that what is
    /// appended after is durable under the segment's name. A crash at any
    /// point leaves an empty segment. A step before the rename that fails
    /// leaves the segment's own file as it was; the directory's fsync
    /// failing is an error.
    pub(crate) fn take_spare(&mut self, temp: &Path, spares: &Spares) -> Result<()> {
        let empty = self.is_empty() && self.size == SEGMENT_HEADER_BYTES as u64;
        let plain = self.format == Format::Kafka && !self.gaps && self.end.is_none();
        if !empty || !plain || self.temp.is_some() || self.zeroed > 0 {
            return Ok(());
        }
        let Some(zeroed) = spares.take(temp) else {
            return Ok(());
        };
        let vfs = std::sync::Arc::clone(&self.vfs);
        let swapped = (|| {
            let file = vfs.open(temp, false).ctx("open segment", temp)?;
            let header = encode_header(self.base_offset, Format::Kafka);
            file.write_all_at(&header, 0).ctx("write", temp)?;
            file.sync_data().ctx("fsync", temp)?;
            vfs.rename(temp, &self.path).ctx("rename", temp)?;
            Ok::<_, crate::error::Error>(file)
        })();
        let Ok(file) = swapped else {
            let _ = vfs.remove(temp);
            return Ok(());
        };
        self.key.forget();
        self.held = Some(file);
        self.zeroed = zeroed;
        // The new name is durable before any append to the file is.
        let dir = self.path.parent().unwrap_or(Path::new("."));
        fs::sync_directory(&*vfs, dir)
    }

    /// Where the segment's batches end, when its file goes on in zeros
    /// given to it ahead of its appends (which were all written): where
    /// [`cut_zeros`] cuts it.
    pub(crate) fn zeros_past_end(&self) -> Option<u64> {
        (self.unwritten.is_empty() && self.zeroed > self.size).then_some(self.size)
    }

    /// Stops being the active segment: cuts its zeros and trims and syncs
    /// the index (a segment that is not being appended to keeps a trimmed
    /// index, and no zeros).
    pub fn deactivate(&mut self) -> Result<()> {
        self.write_pending()?;
        if let Some(size) = self.zeros_past_end() {
            let file = self.file()?;
            cut_zeros(&*file, &self.path, size)?;
            self.zeroed = 0;
        }
        if let Some(mut index) = self.index.take() {
            index.trim()?;
        }
        Ok(())
    }
}

/// Cuts the zeros past `size`, the end of a segment's batches, from its
/// `file`, durably: unless a cut got there first (the file is no longer),
/// since a log is cut only after the syncs under way are done.
pub(crate) fn cut_zeros(file: &dyn VFile, path: &Path, size: u64) -> Result<()> {
    if file.len().ctx("stat", path)? > size {
        file.set_len(size).ctx("truncate", path)?;
    }
    file.sync_data().ctx("fsync", path)
}
