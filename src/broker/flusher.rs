//! The flusher: group commits. It fsyncs each partition with unflushed
//! appends outside the partition's lock, then exposes what it synced, and
//! wakes whoever waits for records to become visible or durable.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shared::{Dirty, Partition, Shared};
use super::BrokerConfig;
use crate::storage::log::Log;
use crate::sync::lock;

/// The flusher: group commits of every partition with unflushed appends,
/// until the broker stops.
pub(super) fn flusher(shared: &Shared) {
    while let Some(due) = wait_for_due(shared) {
        let pass = Instant::now();
        for p in due {
            flush_partition(shared, &p);
        }
        shared.notify_visible();
        wait_out_window(shared, pass);
    }
}

/// Waits until some partitions are due for a flush, and takes them; `None`
/// once the broker stops with nothing due.
fn wait_for_due(shared: &Shared) -> Option<Vec<Arc<Partition>>> {
    let config = &shared.config;
    let mut dirty = lock(&shared.dirty);
    loop {
        let due = take_due(&mut dirty, config, crate::clock::now_ms());
        if !due.is_empty() {
            return Some(due);
        }
        if shared.stop.load(Ordering::Relaxed) {
            return None;
        }
        // With a policy, look again as time passes.
        let wait = Duration::from_millis(config.flush_interval_ms.map_or(100, |t| t.clamp(1, 100)));
        dirty = shared
            .dirty_changed
            .wait_timeout(dirty, wait)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// A pass quicker than the commit window waits out the rest of it, so that
/// the next fsync commits a larger group: fewer fsyncs for the same
/// records, at the cost of at most a window of visibility latency. An
/// acks=all request waiting ends the wait at once: its producer is
/// blocked, and more records will not come sooner.
fn wait_out_window(shared: &Shared, pass: Instant) {
    let mut dirty = lock(&shared.dirty);
    loop {
        let left = GROUP_COMMIT_WINDOW.saturating_sub(pass.elapsed());
        let urgent = dirty.partitions.values().any(|(_, urgent)| *urgent);
        if left.is_zero() || urgent || shared.stop.load(Ordering::Relaxed) {
            return;
        }
        dirty = shared
            .dirty_changed
            .wait_timeout(dirty, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// The shortest time between two flush passes.
const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(3);

/// Takes out of `dirty` the partitions to flush now. Entries that an
/// earlier flush already covered go too: an entry left in the map keeps
/// the next append from waking the flusher (see [`Shared::mark_dirty`]).
fn take_due(dirty: &mut Dirty, config: &BrokerConfig, now_ms: i64) -> Vec<Arc<Partition>> {
    let mut due = Vec::new();
    dirty.partitions.retain(|_, (p, urgent)| {
        let log = p.lock();
        if log.unflushed().0 == 0 {
            return false;
        }
        if *urgent || flush_due(config, &log, now_ms) {
            due.push(Arc::clone(p));
            false
        } else {
            true
        }
    });
    due
}

/// Whether a partition's unflushed records are due under the flush policy.
fn flush_due(config: &BrokerConfig, log: &Log, now_ms: i64) -> bool {
    let (records, oldest) = log.unflushed();
    if records == 0 {
        return false;
    }
    match (config.flush_messages, config.flush_interval_ms) {
        (None, None) => true,
        (messages, interval) => {
            messages.is_some_and(|n| records >= n)
                || interval
                    .is_some_and(|t| oldest.is_some_and(|o| now_ms.saturating_sub(o) >= t as i64))
        }
    }
}

/// Syncs a partition outside its lock and exposes what was synced.
pub(super) fn flush_partition(shared: &Shared, p: &Arc<Partition>) {
    let begun = p.lock().begin_flush();
    let flush = match begun {
        Ok(Some(flush)) => flush,
        Ok(None) => return,
        Err(e) => {
            shared.log(format_args!(
                "cannot flush {}-{}: {e}",
                p.topic, p.partition
            ));
            return;
        }
    };
    match flush.sync() {
        Ok(()) => {
            shared.fsyncs.fetch_add(1, Ordering::Relaxed);
            p.lock().complete_flush(&flush);
            p.flushed_offset
                .fetch_max(flush.next_offset(), Ordering::AcqRel);
        }
        Err(e) => {
            // Never retried: a later fsync could succeed for pages the
            // kernel already dropped. The partition stops; acks=all waiters
            // and new produces get a storage error; a restart recovers it.
            let e = p.lock().fail(&e);
            p.failed.store(true, Ordering::Release);
            shared.log(format_args!("{}-{} stopped: {e}", p.topic, p.partition));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::testing::{append, partition, shared};

    #[test]
    fn entries_an_earlier_flush_covered_leave_the_dirty_map() {
        let config = BrokerConfig::new("/unused", "127.0.0.1:0");
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        let mut dirty = Dirty::default();
        // Appended and marked: due at once (no policy: flush continuously).
        append(&p);
        dirty.mark(&p, false);
        assert_eq!(take_due(&mut dirty, &config, 0).len(), 1);
        // An append marks it again, then a flush (begun before the mark
        // was seen) covers that append: the entry must go, or the next
        // append would find it present and not wake the flusher.
        append(&p);
        dirty.mark(&p, false);
        let flush = p.lock().begin_flush().unwrap().unwrap();
        flush.sync().unwrap();
        p.lock().complete_flush(&flush);
        assert!(take_due(&mut dirty, &config, 0).is_empty());
        assert!(
            dirty.partitions.is_empty(),
            "a covered entry stays and silences the next append"
        );
    }

    #[test]
    fn under_a_policy_entries_wait_unless_urgent() {
        let mut config = BrokerConfig::new("/unused", "127.0.0.1:0");
        config.flush_messages = Some(100);
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        let mut dirty = Dirty::default();
        append(&p);
        dirty.mark(&p, false);
        assert!(take_due(&mut dirty, &config, 0).is_empty());
        assert_eq!(dirty.partitions.len(), 1, "kept until due");
        assert!(dirty.mark(&p, true), "urgency is news for the flusher");
        assert_eq!(
            take_due(&mut dirty, &config, 0).len(),
            1,
            "acks=all cannot wait"
        );
    }

    #[test]
    fn under_a_time_policy_records_are_due_once_the_oldest_is_that_old() {
        let mut config = BrokerConfig::new("/unused", "127.0.0.1:0");
        config.flush_interval_ms = Some(100);
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        assert!(!flush_due(&config, &p.lock(), 1000), "nothing to flush");
        p.lock()
            .append(&mut crate::broker::testing::batch(), 1000)
            .unwrap();
        assert!(!flush_due(&config, &p.lock(), 1099));
        assert!(flush_due(&config, &p.lock(), 1100));
        config.flush_interval_ms = None;
        assert!(
            flush_due(&config, &p.lock(), 1000),
            "without a policy: at once"
        );
    }
}
