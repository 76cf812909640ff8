//! How far a member may commit what it handed out: by default up to its
//! position (what it handed to the application is done with), or less
//! when a record is done with only once something else says so (a
//! mirror's consumer commits a source record only once the destination
//! acknowledged the record made from it: `klog-consume --commit-from`).

use std::sync::Arc;

/// What a member may commit of the records it handed out.
pub trait Committable: Send + Sync + std::fmt::Debug {
    /// The offset of `partition` to commit when the member's next offset
    /// to hand out is `position`: at most `position`.
    fn committable(&self, partition: u32, position: u64) -> u64;

    /// The member gave `partition` up (a rebalance, a lost session): what
    /// it handed out of it and was not committed is another owner's to
    /// hand out again.
    fn released(&self, partition: u32);
}

/// The offsets to commit of `positions` (partition, next offset to hand
/// out), as `committable` allows.
pub(super) fn limit(
    committable: &Option<Arc<dyn Committable>>,
    mut positions: Vec<(u32, u64)>,
) -> Vec<(u32, u64)> {
    if let Some(c) = committable {
        for (p, o) in &mut positions {
            *o = c.committable(*p, *o);
        }
    }
    positions
}

/// Tells `committable` that the member gave `partitions` up.
pub(super) fn released(
    committable: &Option<Arc<dyn Committable>>,
    partitions: impl Iterator<Item = u32>,
) {
    if let Some(c) = committable {
        partitions.for_each(|p| c.released(p));
    }
}
