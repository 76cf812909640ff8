//! The flusher's work list: partitions with unflushed appends, whether
//! someone waits for each (an acks=all request, a fetch), and the
//! partitions a flusher thread has in hand.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::{Partition, Shared};
use crate::broker::watch::Watch;
use crate::protocol::FetchPartition;
use crate::sync::lock;

/// Wakes the flusher: partitions with unflushed appends, and whether an
/// `acks=all` request waits on each. Its lock is never held while a
/// partition's is taken: a partition busy with slow file work must not
/// stop the others' appends (each marks its partition here).
#[derive(Debug, Default)]
pub(in crate::broker) struct Dirty {
    /// By the partition's address (no allocation per append).
    pub(in crate::broker) partitions: HashMap<usize, DirtyEntry>,
    /// Partitions a flusher thread is flushing now, by address: no other
    /// takes them until it is done.
    pub(in crate::broker) in_flight: HashSet<usize>,
}

/// A partition with unflushed appends.
#[derive(Debug)]
pub(in crate::broker) struct DirtyEntry {
    pub(in crate::broker) partition: Arc<Partition>,
    /// An acks=all request waits for it: flush at once.
    pub(in crate::broker) urgent: bool,
    /// Under a flush policy, when to look at it again (it was not due).
    pub(in crate::broker) not_before: Option<Instant>,
    /// When it was marked: the partition waiting longest is flushed first,
    /// so that none starves while others are marked again and again.
    pub(in crate::broker) marked: Instant,
}

impl Dirty {
    /// Marks `p` (urgently, for acks=all). Returns whether that is news
    /// for the flusher: an entry already there is seen on its next pass,
    /// so it is woken only for news (a syscall saved per append).
    pub(in crate::broker) fn mark(&mut self, p: &Arc<Partition>, urgent: bool) -> bool {
        let mut news = false;
        let entry = self.partitions.entry(key(p)).or_insert_with(|| {
            news = true;
            DirtyEntry {
                partition: Arc::clone(p),
                urgent: false,
                not_before: None,
                marked: Instant::now(),
            }
        });
        news |= urgent && !entry.urgent;
        entry.urgent |= urgent;
        if urgent {
            entry.not_before = None;
        }
        news
    }

    /// Makes an entry of `p` urgent (readers wait for its records);
    /// returns whether that is news for the flusher. A partition without
    /// an entry has nothing unflushed, or its flush runs now and wakes the
    /// readers when it is done.
    pub(in crate::broker) fn hurry(&mut self, p: &Arc<Partition>) -> bool {
        match self.partitions.get_mut(&key(p)) {
            // A pause after a failure (no descriptor left) is kept.
            Some(entry) if !entry.urgent && entry.not_before.is_none() => {
                entry.urgent = true;
                entry.not_before = None;
                true
            }
            _ => false,
        }
    }

    /// Whether any partition waits for a flush that no flusher thread has
    /// taken.
    #[cfg(test)]
    pub(in crate::broker) fn any_waiting(&self) -> bool {
        self.partitions.keys().any(|k| !self.in_flight.contains(k))
    }
}

/// A fetch's watch on the partitions it asks for (see
/// [`Shared::watch_fetch`]).
pub(in crate::broker) struct FetchWatch<'s> {
    shared: &'s Shared,
    watch: Watch,
    /// A consumer's: the partitions whose flush its wait hurries (none for
    /// a follower, served records before they are durable).
    partitions: Vec<Arc<Partition>>,
}

impl FetchWatch<'_> {
    /// Waits, as [`Watch::wait`] does, for a watched partition to change;
    /// first tells the flusher that a reader waits for their unflushed
    /// records.
    pub(in crate::broker) fn wait(&self, deadline: Instant) {
        self.shared.hurry(&self.partitions);
        self.watch.wait(deadline);
    }

    /// Whether a wake is pending.
    #[cfg(test)]
    pub(in crate::broker) fn woken(&self) -> bool {
        self.watch.woken()
    }
}

/// A partition's key in [`Dirty`]: its address.
pub(in crate::broker) fn key(p: &Arc<Partition>) -> usize {
    Arc::as_ptr(p) as usize
}

impl Shared {
    /// A watch on the partitions a fetch asks for that this broker
    /// serves (a fetch for any other is answered at once with its error).
    pub(in crate::broker) fn watch_fetch(&self, asked: &[FetchPartition]) -> FetchWatch<'_> {
        self.watch_fetch_by(asked, false)
    }

    /// [`Shared::watch_fetch`] for a fetch of a `follower`, which records
    /// written to the file wake too.
    pub(in crate::broker) fn watch_fetch_by(
        &self,
        asked: &[FetchPartition],
        follower: bool,
    ) -> FetchWatch<'_> {
        let topics = self.read_topics();
        let served: Vec<Arc<Partition>> = asked
            .iter()
            .filter_map(|a| {
                Some(Arc::clone(
                    topics.get(&a.topic)?.get(a.partition as usize)?.as_ref()?,
                ))
            })
            .collect();
        let watched = served.iter().flat_map(|p| {
            let written = follower.then(|| Arc::clone(&p.written_waiters));
            std::iter::once(Arc::clone(&p.waiters)).chain(written)
        });
        let watch = match follower {
            true => Watch::for_follower(watched.collect()),
            false => Watch::new(watched.collect()),
        };
        FetchWatch {
            shared: self,
            watch,
            partitions: if follower { Vec::new() } else { served },
        }
    }

    /// Readers wait for records appended to `partitions` but not yet
    /// durable: their flush is due at once, as for an acks=all request
    /// (the group commit's window only gathers records nobody waits for).
    /// A flush policy (`--flush-messages`, `--flush-interval`) keeps its
    /// meaning: readers of such a partition wait for it.
    fn hurry(&self, partitions: &[Arc<Partition>]) {
        if self.config.flush_messages.is_some() || self.config.flush_interval_ms.is_some() {
            return;
        }
        let mut news = false;
        let mut dirty = lock(&self.dirty);
        for p in partitions {
            news |= dirty.hurry(p);
        }
        drop(dirty);
        if news {
            self.dirty_changed.notify_one();
        }
    }
}
