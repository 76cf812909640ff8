//! The log's side of the cleaner ([`crate::storage::cleaner`]): where its
//! dirty part starts, and the swap of cleaned segments into its map.

use std::sync::Arc;

use std::path::Path;

use super::{Expired, Log};
use crate::error::Result;
use crate::storage::fs::{self, Vfs};
use crate::storage::index::IndexEntry;
use crate::storage::segment::{log_file_name, Segment};

/// The partition's file that says where the last clean's map ended.
pub(crate) const CHECKPOINT_FILE: &str = "cleaner-offset";

/// The first line of [`CHECKPOINT_FILE`].
const CHECKPOINT_MAGIC: &str = "klog-cleaner-offset 1";

/// The dirty start in `dir`'s checkpoint (0 when there is none).
pub(crate) fn read_checkpoint(vfs: &dyn Vfs, dir: &Path) -> u64 {
    fs::read_small(vfs, &dir.join(CHECKPOINT_FILE))
        .and_then(|text| {
            let (magic, rest) = text.split_once('\n')?;
            (magic == CHECKPOINT_MAGIC).then_some(())?;
            rest.trim_end().parse().ok()
        })
        .unwrap_or(0)
}

/// Records `offset` as where the last clean's map ended.
pub(crate) fn write_checkpoint(vfs: &dyn Vfs, dir: &Path, offset: u64) -> Result<()> {
    let text = format!("{CHECKPOINT_MAGIC}\n{offset}\n");
    fs::write_atomic(vfs, dir, CHECKPOINT_FILE, text.as_bytes())
}

/// One cleaned segment, written and durable under its temporary names.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) base: u64,
    pub(crate) end: u64,
    /// The segments it replaces: base offset and size as read.
    pub(crate) sources: Vec<(u64, u64)>,
    pub(crate) size: u64,
    pub(crate) max_timestamp: i64,
    pub(crate) entries: Vec<IndexEntry>,
    pub(crate) first_append_ms: Option<i64>,
    pub(crate) last_append_ms: Option<i64>,
}

impl Log {
    /// Where the log's dirty part starts: where the last clean's map
    /// ended, never below the log's start.
    pub fn cleaned_to(&self) -> u64 {
        self.cleaned_to.max(self.start_offset())
    }

    pub(crate) fn set_cleaned_to(&mut self, offset: u64) {
        self.cleaned_to = self.cleaned_to.max(offset);
    }

    pub(crate) fn vfs(&self) -> Arc<dyn Vfs> {
        Arc::clone(&self.vfs)
    }

    /// Base offsets of the segments rolled and not yet durable whole.
    pub(crate) fn sealed_bases(&self) -> Vec<u64> {
        self.sealed.iter().map(|s| s.base).collect()
    }

    /// Puts the cleaned segments of `groups`, renamed to their names, in
    /// place of the segments each replaces: those others than the first
    /// (whose names it took) are returned, for their files to go.
    pub(crate) fn swap_in(&mut self, groups: &[Group]) -> Result<Expired> {
        let mut replaced = Vec::new();
        for g in groups {
            // Opened before the map changes: a failure leaves no hole.
            let path = self.dir.join(log_file_name(g.base));
            let mut segment = Segment::open(&self.vfs, &path, self.writable)?;
            for (base, _) in &g.sources {
                let old = self.segments.remove(base).expect("checked to be there");
                if *base != g.base {
                    replaced.push(old);
                }
            }
            segment.set_extent(g.size, g.end, g.max_timestamp, g.entries.clone());
            segment.first_append_ms = g.first_append_ms;
            segment.last_append_ms = g.last_append_ms;
            self.segments.insert(g.base, segment);
        }
        Ok(Expired {
            vfs: Arc::clone(&self.vfs),
            dir: self.dir.clone(),
            segments: replaced,
        })
    }
}
