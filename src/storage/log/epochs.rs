//! The log's leader epoch: stamped into every batch it appends, raised
//! (never lowered) by whoever makes this replica a leader, and recorded in
//! the partition's epoch file ([`crate::storage::epoch`]) when the first
//! batch of a new epoch is appended, before that batch is written.

use crate::error::{Error, Result};
use crate::storage::epoch::Epochs;

use super::Log;

impl Log {
    /// The leader epoch stamped into the batches appended from now on: on
    /// open, the latest in the epoch file (0 for a new log or a single
    /// copy), so a reopened log never goes back to an older epoch.
    pub fn leader_epoch(&self) -> u32 {
        self.leader_epoch
    }

    /// Raises the leader epoch for the batches appended from now on. The
    /// epoch file records it with the first of them. Lowering it is an
    /// error (a leader of an older epoch must not write after a newer one).
    pub fn set_leader_epoch(&mut self, epoch: u32) -> Result<()> {
        if epoch < self.leader_epoch {
            return Err(Error::Config(format!(
                "{}: leader epoch {epoch} is below the log's epoch {}; an epoch never goes back",
                self.dir.display(),
                self.leader_epoch
            )));
        }
        self.leader_epoch = epoch;
        Ok(())
    }

    /// Starts leading in `epoch` (a replica that just won it): raises the
    /// log's epoch and records it in the epoch file at the log's end,
    /// durably, before any batch of it, so that a follower asking where
    /// its own latest epoch ends gets this log's answer (the largest epoch
    /// at or below it, ending where this one starts) even before the new
    /// leader appended anything (Kafka's leader epoch cache).
    pub fn begin_epoch(&mut self, epoch: u32) -> Result<()> {
        self.set_leader_epoch(epoch)?;
        let end = self.next_offset();
        self.record_epoch(epoch, end)
    }

    /// The partition's leader epochs, as in its epoch file.
    pub fn epochs(&self) -> &Epochs {
        &self.epochs
    }

    /// Kafka's OffsetsForLeaderEpoch on this log: the largest epoch at or
    /// below `epoch` and where it ends here (see
    /// [`Epochs::end_offset_for_epoch`]; the latest epoch ends at the next
    /// offset).
    pub fn end_offset_for_epoch(&self, epoch: u32) -> Option<(u32, u64)> {
        self.epochs.end_offset_for_epoch(epoch, self.next_offset())
    }

    /// Before a batch of leader epoch `epoch` is written at `base_offset`:
    /// when that epoch is new to the file, records it there, durably, first.
    pub(super) fn record_epoch(&mut self, epoch: u32, base_offset: u64) -> Result<()> {
        if self.epochs.latest().is_some_and(|e| e.epoch >= epoch) {
            return Ok(());
        }
        let mut epochs = self.epochs.clone();
        epochs.assign(epoch, base_offset);
        epochs.write(&*self.vfs, &self.dir)?;
        self.epochs = epochs;
        Ok(())
    }
}
