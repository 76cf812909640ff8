//! The flusher: group commits. It fsyncs each partition with unflushed
//! appends outside the partition's lock, then exposes what it synced, and
//! wakes whoever waits on that partition for records to become visible or
//! durable.
//!
//! Up to min([`FLUSH_THREADS_MAX`], partitions served) threads flush
//! different partitions in parallel (the flusher thread starts its helpers
//! as partitions come), so that one partition's slow fsync does not make
//! the others wait their turn. Each partition is flushed by one thread at a
//! time ([`Dirty::in_flight`]): a flusher thread, or a connection's reader
//! whose client waits for its acks=all append and has sent nothing more
//! ([`flush_here`], which spares two thread switches per acknowledgement).
//!
//! The group commit is adaptive: a flush that someone waits for (an
//! acks=all request, a consumer's fetch at the end) begins as soon as the
//! partition's previous flush ends, and appends that come meanwhile go into
//! the next; one that nobody waits for gathers for [`GROUP_COMMIT_WINDOW`]. No thread takes a partition's lock while it
//! holds the dirty set's: a partition busy with slow file work holds up
//! its own flush, never the others' appends or flushes.
//!
//! A roll syncs nothing under the partition's lock: the flush after it
//! syncs the rolled segment (its data and its trimmed index), gives each
//! new segment its own name once everything before it is durable, and
//! shows its records only after a directory fsync made that name durable
//! ([`crate::storage::log::Publish`]), all outside the lock. A partition
//! nearing a roll has its next segment's files made ahead, outside the lock
//! too, so that the roll only writes a header.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shared::{key, Dirty, Partition, Shared};
use super::BrokerConfig;
use crate::storage::log::{Log, PendingFlush, SegmentPrep};
use crate::sync::lock;

/// The most threads that fsync partitions at once.
pub(super) const FLUSH_THREADS_MAX: usize = 4;

/// The shortest time between the beginnings of two flushes of one
/// partition that nobody waits for: such a flush waits out the rest of
/// it, so that the next fsync commits a larger group (fewer fsyncs leave
/// the cores to appends: acks=1 producers gain about a sixth with it on
/// two cores). Someone waiting ends the wait at once (the group commit is
/// adaptive): an acks=all request, whose producer is blocked, and a fetch
/// waiting for the records (a consumer at the end, a follower), which is
/// latency. The flush then starts as soon as the partition's previous one
/// ends, and appends that come meanwhile go into the next.
const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(3);

/// The flusher: group commits of every partition with unflushed appends,
/// with up to min([`FLUSH_THREADS_MAX`], partitions served) threads, until
/// the broker stops.
pub(super) fn flusher(shared: &Shared) {
    std::thread::scope(|scope| {
        let mut threads = 1;
        while let Some(p) = next_due(shared) {
            if threads < FLUSH_THREADS_MAX.min(shared.served_count()) {
                let helper = std::thread::Builder::new()
                    .name(format!("flusher-{threads}"))
                    .spawn_scoped(scope, || flush_while_due(shared));
                match helper {
                    Ok(_) => threads += 1,
                    Err(e) => shared.log(format_args!("cannot start a flusher thread: {e}")),
                }
            }
            flush_taken(shared, &p);
        }
    });
}

/// A helper of the flusher: flushes partitions until the broker stops.
fn flush_while_due(shared: &Shared) {
    while let Some(p) = next_due(shared) {
        flush_taken(shared, &p);
    }
}

/// Flushes a partition taken by [`next_due`] or [`flush_here`], and gives
/// it back. Marked again meanwhile, it is the flusher's: woken, as a
/// thread other than the flusher's own may have flushed it.
fn flush_taken(shared: &Shared, p: &Arc<Partition>) {
    flush_partition(shared, p);
    let mut dirty = lock(&shared.dirty);
    dirty.in_flight.remove(&key(p));
    let again = dirty.partitions.contains_key(&key(p));
    drop(dirty);
    if again {
        shared.dirty_changed.notify_one();
    }
}

/// Flushes `p` on the caller's thread, if it has unflushed appends and no
/// other thread flushes it now (as a flusher thread would take it, but
/// without waking one): a connection whose client waits for them.
/// Returns whether it flushed.
pub(super) fn flush_here(shared: &Shared, p: &Arc<Partition>) -> bool {
    let mut dirty = lock(&shared.dirty);
    let k = key(p);
    if dirty.in_flight.contains(&k) || dirty.partitions.remove(&k).is_none() {
        return false;
    }
    dirty.in_flight.insert(k);
    drop(dirty);
    *lock(&p.flush_begun) = Some(Instant::now());
    flush_taken(shared, p);
    true
}

/// Makes a partition's next segment ahead of its roll (`prep`, taken when
/// the flush began), with its lock let go: the roll then only writes a
/// header. A failure is no harm: the roll makes the segment itself.
fn prepare_next_segment(shared: &Shared, p: &Partition, prep: &SegmentPrep) {
    let made = prep.create();
    if let Err(e) = p.lock().give_prepared(made) {
        shared.log(format_args!(
            "cannot make the next segment of {}-{} ahead: {e}",
            p.topic, p.partition
        ));
    }
}

/// Waits until some partition is due for a flush, and takes it (it is in
/// flight until [`flush_taken`] gives it back); `None` once the broker
/// stops with nothing due.
fn next_due(shared: &Shared) -> Option<Arc<Partition>> {
    let config = &shared.config;
    let policy = config.flush_messages.is_some() || config.flush_interval_ms.is_some();
    let mut dirty = lock(&shared.dirty);
    loop {
        let now = Instant::now();
        let (taken, wait) = take_next(&mut dirty, now);
        if let Some((p, urgent)) = taken {
            if urgent || !policy {
                return Some(p);
            }
            // Only the log knows whether its records are due under the
            // policy: look with the dirty set unlocked.
            drop(dirty);
            let due = flush_due(config, &p.lock(), crate::clock::now_ms());
            dirty = lock(&shared.dirty);
            if due {
                return Some(p);
            }
            put_back(&mut dirty, p, now + policy_recheck(config));
            continue;
        }
        if shared.stop.load(Ordering::Relaxed) {
            return None;
        }
        dirty = shared
            .dirty_changed
            .wait_timeout(dirty, wait.min(policy_recheck(config)))
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// How often a partition that a flush policy holds back is looked at.
fn policy_recheck(config: &BrokerConfig) -> Duration {
    Duration::from_millis(config.flush_interval_ms.map_or(100, |t| t.clamp(1, 100)))
}

/// Takes out of `dirty` the partition to flush now that was marked
/// longest ago (and whether an acks=all request waits on it), marking it
/// in flight and noting when its flush began; otherwise says how long
/// until one may be due.
fn take_next(dirty: &mut Dirty, now: Instant) -> (Option<(Arc<Partition>, bool)>, Duration) {
    let mut wait = Duration::from_millis(100);
    let mut found: Option<(usize, Instant)> = None;
    for (k, entry) in &dirty.partitions {
        if dirty.in_flight.contains(k) || found.is_some_and(|(_, m)| m <= entry.marked) {
            continue;
        }
        let left = due_in(entry, now);
        if left.is_zero() {
            found = Some((*k, entry.marked));
        } else {
            wait = wait.min(left);
        }
    }
    let Some((k, _)) = found else {
        return (None, wait);
    };
    let entry = dirty.partitions.remove(&k).expect("found in the map");
    dirty.in_flight.insert(k);
    *lock(&entry.partition.flush_begun) = Some(now);
    (Some((entry.partition, entry.urgent)), Duration::ZERO)
}

/// How long until a marked partition may be flushed: at once when an
/// acks=all request waits, or anyone waits on the partition (a fetch) and
/// nothing put it off (a flush policy, a retry's pause); otherwise after
/// the group commit window since its last flush began, and after the time
/// a flush policy set.
fn due_in(entry: &super::shared::DirtyEntry, now: Instant) -> Duration {
    let waited = entry.not_before.is_none() && entry.partition.waiters.any_for_durable();
    if entry.urgent || waited {
        return Duration::ZERO;
    }
    let begun = *lock(&entry.partition.flush_begun);
    let window_left = begun.map_or(Duration::ZERO, |b| {
        GROUP_COMMIT_WINDOW.saturating_sub(now.saturating_duration_since(b))
    });
    let policy_left = entry
        .not_before
        .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
    window_left.max(policy_left)
}

/// Puts back a partition that was not due, to be looked at again at
/// `not_before`; an append that marked it meanwhile keeps its urgency.
fn put_back(dirty: &mut Dirty, p: Arc<Partition>, not_before: Instant) {
    let k = key(&p);
    dirty.in_flight.remove(&k);
    let entry = dirty
        .partitions
        .entry(k)
        .or_insert_with(|| super::shared::DirtyEntry {
            partition: p,
            urgent: false,
            not_before: None,
            marked: Instant::now(),
        });
    if !entry.urgent {
        entry.not_before = Some(not_before);
    }
}

/// Marks `p` to be flushed again in a little while (not at once, even for
/// an acks=all request: what failed may take that long to come back).
fn try_again_soon(shared: &Shared, p: &Arc<Partition>) {
    let mut dirty = lock(&shared.dirty);
    let entry = dirty
        .partitions
        .entry(key(p))
        .or_insert_with(|| super::shared::DirtyEntry {
            partition: Arc::clone(p),
            urgent: false,
            not_before: None,
            marked: Instant::now(),
        });
    entry.urgent = false;
    entry.not_before = Some(Instant::now() + Duration::from_millis(100));
    drop(dirty);
    shared.dirty_changed.notify_one();
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

/// A flush that could not begin: said, and when an fsync outside the lock
/// that failed stopped the log, its waiters must hear it now, not at
/// their deadline.
fn cannot_begin(shared: &Shared, p: &Partition, e: &crate::error::Error) {
    shared.log(format_args!(
        "cannot flush {}-{}: {e}",
        p.topic, p.partition
    ));
    if p.lock().failed() {
        p.failed.store(true, Ordering::Release);
        p.waiters.wake_all();
    }
}

/// Syncs a partition outside its lock and exposes what was synced; then
/// makes its next segment ahead of its roll, when it nears one.
pub(super) fn flush_partition(shared: &Shared, p: &Arc<Partition>) {
    let (begun, prep) = {
        let mut log = p.lock();
        (log.begin_flush(), log.segment_to_prepare())
    };
    // Rarely (the active segment is half full and nothing is made ahead):
    // one more lock, to hand the files over, once the flush is synced. A
    // flush begun and not synced never waits for the lock: a truncation
    // holds it while it waits for that very sync.
    match begun {
        Ok(Some(flush)) => sync_and_show(shared, p, &flush),
        Ok(None) => {}
        Err(e) => cannot_begin(shared, p, &e),
    }
    if let Some(prep) = prep {
        prepare_next_segment(shared, p, &prep);
    }
}

/// Syncs a flush begun under `p`'s lock, outside it, and shows what it
/// synced; a failure stops the partition (or, without a descriptor left,
/// puts the flush off).
fn sync_and_show(shared: &Shared, p: &Arc<Partition>, flush: &PendingFlush) {
    // Written: followers fetch it while this broker fsyncs it.
    p.written();
    let began = std::time::Instant::now();
    let synced = flush.sync().and_then(|()| {
        shared.metrics.flushed(began.elapsed());
        shared.fsyncs.fetch_add(1, Ordering::Relaxed);
        let mut log = p.lock();
        let completed = log.complete_flush(flush);
        if let Ok(None) = completed {
            raise_flushed(p, &log);
        }
        completed
    });
    let shown = match synced {
        Ok(None) => Ok(()),
        // The flush gave segments their own names: the records are shown
        // once the directory fsync made the names durable.
        Ok(Some(publish)) => publish.sync().map(|()| {
            let mut log = p.lock();
            log.complete_publish(&publish);
            raise_flushed(p, &log);
        }),
        Err(e) => Err(e),
    };
    match shown {
        Ok(()) => {
            shared.advance_high_watermark(p);
            // Followers fetch what is durable here, above the watermark.
            p.waiters.wake_all();
        }
        // No descriptor left to open the recovery point's temporary file or
        // the directory with: no fsync failed, so the flush goes again.
        Err(e) if crate::storage::files::out_of_descriptors(&e) => {
            shared.log_peer(format_args!(
                "{}-{}: cannot make its records durable now, trying again: {e}",
                p.topic, p.partition
            ));
            try_again_soon(shared, p);
        }
        Err(e) => {
            // Never retried: a later fsync could succeed for pages the
            // kernel already dropped. The partition stops; acks=all waiters
            // and new produces get a storage error; a restart recovers it.
            let e = p.lock().fail(&e);
            p.failed.store(true, Ordering::Release);
            p.waiters.wake_all();
            shared.log(format_args!("{}-{} stopped: {e}", p.topic, p.partition));
        }
    }
}

/// Raises the partition's durable end to what its log shows as durable,
/// holding the log's lock (`log`): a truncation, which lowers that end
/// under the same lock, cannot come between the log's answer and the
/// raise (which would put the durable end past the cut, over offsets to
/// be written again). The log's own end moves only with a flush it
/// completed: never for one a truncation voided, nor once it failed.
fn raise_flushed(p: &Partition, log: &Log) {
    p.flushed_offset
        .fetch_max(log.flushed_offset(), Ordering::AcqRel);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::testing::{append, partition, shared, shared_with};
    use crate::broker::watch::{Watch, WAIT_SLICE};

    /// Takes what `take_next` gives now, as a flusher thread does.
    fn take(shared: &Shared) -> Option<Arc<Partition>> {
        take_next(&mut lock(&shared.dirty), Instant::now())
            .0
            .map(|(p, _)| p)
    }

    #[test]
    fn a_partition_is_flushed_by_one_thread_at_a_time_and_an_append_meanwhile_waits_for_it() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        shared.mark_dirty(&p, true);
        let taken = take(&shared).expect("due at once");
        // Appended and marked again while the flush runs: not taken twice.
        append(&p);
        shared.mark_dirty(&p, true);
        assert!(take(&shared).is_none(), "in flight");
        assert!(!lock(&shared.dirty).any_waiting());
        flush_taken(&shared, &taken);
        assert_eq!(p.flushed_offset.load(Ordering::Acquire), 2);
        let again = take(&shared).expect("the mark made meanwhile is kept");
        flush_taken(&shared, &again);
        assert!(take(&shared).is_none() && lock(&shared.dirty).partitions.is_empty());
    }

    /// No descriptor left to open the recovery point's temporary file
    /// (EMFILE) when a flush makes a rolled segment's name durable: no
    /// fsync failed, so the partition goes on, and its flush is tried again
    /// a little later, which shows the records.
    #[test]
    fn a_publish_without_a_descriptor_left_is_tried_again_not_a_stop() {
        let (sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        p.lock().roll().unwrap();
        append(&p);
        sim.fail_next_open(|path| path.to_string_lossy().contains("recovery-point"));
        shared.mark_dirty(&p, true);
        let taken = take(&shared).expect("due at once");
        flush_taken(&shared, &taken);
        assert!(!p.failed.load(Ordering::Acquire) && !p.lock().failed());
        assert_eq!(p.flushed_offset.load(Ordering::Acquire), 0, "not shown yet");
        assert!(take(&shared).is_none(), "not at once");
        std::thread::sleep(Duration::from_millis(150));
        let again = take(&shared).expect("tried again");
        flush_taken(&shared, &again);
        assert_eq!(p.flushed_offset.load(Ordering::Acquire), 2);
    }

    #[test]
    fn the_partition_marked_longest_ago_is_flushed_first() {
        let (_sim, shared) = shared();
        let parts: Vec<_> = (0..8)
            .map(|i| partition(&shared, &format!("t{i}")))
            .collect();
        for p in &parts {
            append(p);
            shared.mark_dirty(p, true);
            std::thread::sleep(Duration::from_millis(1));
        }
        for p in &parts {
            let taken = take(&shared).expect("due");
            assert_eq!(taken.topic, p.topic, "in the order they were marked");
            // Marked again at once: it goes to the back of the line.
            append(p);
            shared.mark_dirty(p, true);
            flush_taken(&shared, &taken);
        }
        let again = take(&shared).expect("due");
        assert_eq!(again.topic, "t0", "the first marked again, not a newer one");
    }

    /// A partition flushed once (its window begun) and appended to and
    /// marked again since, by an acks=1 producer.
    fn flushed_and_marked_again(shared: &Shared) -> Arc<Partition> {
        let p = partition(shared, "t");
        append(&p);
        shared.mark_dirty(&p, false);
        let taken = take(shared).expect("never flushed: due");
        flush_taken(shared, &taken);
        append(&p);
        shared.mark_dirty(&p, false);
        p
    }

    #[test]
    fn a_flush_begun_within_the_window_waits_unless_urgent() {
        let (_sim, shared) = shared();
        let p = flushed_and_marked_again(&shared);
        let (none, wait) = take_next(&mut lock(&shared.dirty), Instant::now());
        assert!(none.is_none(), "within the group commit window");
        assert!(wait <= GROUP_COMMIT_WINDOW && !wait.is_zero());
        shared.mark_dirty(&p, true);
        assert!(take(&shared).is_some(), "acks=all cannot wait");
    }

    /// A consumer's fetch waiting on the partition is latency: its
    /// records' flush does not wait out the window either, and the fetch's
    /// wait itself wakes the flusher. A follower's does neither: it is
    /// served what is written.
    #[test]
    fn a_flush_that_a_fetch_waits_for_does_not_wait_out_the_window() {
        let (_sim, shared) = shared();
        let p = flushed_and_marked_again(&shared);
        assert!(take(&shared).is_none(), "within the window, nobody waits");
        let asked = [crate::broker::testing::ask("t", 2)];
        let follower = shared.watch_fetch_by(&asked, true);
        assert!(
            take(&shared).is_none(),
            "a follower is served what is written"
        );
        follower.wait(Instant::now());
        assert!(take(&shared).is_none(), "nor does its wait hurry the flush");
        let watch = shared.watch_fetch(&asked);
        let taken = take(&shared).expect("a consumer's fetch waits on it");
        flush_taken(&shared, &taken);
        append(&p);
        shared.mark_dirty(&p, false);
        assert!(take(&shared).is_some(), "it still waits");
        drop(watch);
        flush_taken(&shared, &p);
        append(&p);
        shared.mark_dirty(&p, false);
        assert!(take(&shared).is_none(), "nobody waits again");
        shared.watch_fetch(&asked).wait(Instant::now());
        let dirty = lock(&shared.dirty);
        assert!(dirty.partitions.values().all(|e| e.urgent), "hurried");
    }

    /// A fetch's wait keeps a pause the flusher took after a failure (no
    /// descriptor left): it does not make the flush due at once.
    #[test]
    fn a_waiting_fetch_keeps_the_pause_after_a_failure() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        try_again_soon(&shared, &p);
        let asked = [crate::broker::testing::ask("t", 0)];
        let watch = shared.watch_fetch(&asked);
        watch.wait(Instant::now());
        assert!(take(&shared).is_none(), "paused");
        let dirty = lock(&shared.dirty);
        assert!(dirty
            .partitions
            .values()
            .all(|e| !e.urgent && e.not_before.is_some()));
    }

    /// A thread other than the flusher's (a connection's reader) that
    /// flushed a partition marked again meanwhile wakes the flusher: the
    /// mark is not left to its next timeout.
    #[test]
    fn a_flush_on_another_thread_wakes_the_flusher_for_a_mark_made_meanwhile() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        shared.mark_dirty(&p, true);
        let mut dirty = lock(&shared.dirty);
        dirty.partitions.remove(&key(&p));
        dirty.in_flight.insert(key(&p));
        drop(dirty);
        // Marked while nobody waits: that wake is gone.
        append(&p);
        shared.mark_dirty(&p, true);
        let woken = std::thread::scope(|s| {
            let waiting = s.spawn(|| {
                let dirty = lock(&shared.dirty);
                let woken = shared
                    .dirty_changed
                    .wait_timeout(dirty, Duration::from_secs(5))
                    .unwrap();
                !woken.1.timed_out()
            });
            std::thread::sleep(Duration::from_millis(100));
            flush_taken(&shared, &p);
            waiting.join().unwrap()
        });
        assert!(woken);
    }

    /// A flush policy keeps its meaning for readers: they wait for it (and
    /// the flusher does not spin over a partition they wait on).
    #[test]
    fn under_a_policy_a_waiting_fetch_does_not_hurry_the_flush() {
        let (_sim, shared) = shared_with(|c| c.flush_messages = Some(100));
        let p = partition(&shared, "t");
        append(&p);
        shared.mark_dirty(&p, false);
        let asked = [crate::broker::testing::ask("t", 0)];
        let watch = shared.watch_fetch(&asked);
        watch.wait(Instant::now());
        shared.stop.store(true, Ordering::Relaxed);
        assert!(next_due(&shared).is_none(), "1 record of 100: not due");
        let dirty = lock(&shared.dirty);
        let entry = dirty.partitions.values().next().expect("kept until due");
        assert!(!entry.urgent && entry.not_before.is_some());
    }

    #[test]
    fn under_a_policy_entries_wait_until_due_unless_urgent() {
        let (_sim, shared) = shared_with(|c| c.flush_messages = Some(100));
        let p = partition(&shared, "t");
        append(&p);
        shared.mark_dirty(&p, false);
        shared.stop.store(true, Ordering::Relaxed);
        assert!(next_due(&shared).is_none(), "1 record of 100: not due");
        let dirty = lock(&shared.dirty);
        let entry = dirty.partitions.values().next().expect("kept until due");
        assert!(entry.not_before.is_some() && dirty.in_flight.is_empty());
        drop(dirty);
        shared.mark_dirty(&p, true);
        assert!(next_due(&shared).is_some(), "acks=all cannot wait");
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

    /// A partition whose lock is held (a slow roll, say) holds up nobody
    /// else: an acks=all append to another partition is made durable
    /// meanwhile. (The flusher used to take every dirty partition's lock
    /// while it held the dirty set's, and each append marks its partition
    /// there: one locked partition stopped every producer and every flush.)
    #[test]
    fn a_partition_held_locked_does_not_hold_up_another_partitions_flush() {
        let (_sim, shared) = shared();
        let (a, b) = (partition(&shared, "a"), partition(&shared, "b"));
        append(&b);
        shared.mark_dirty(&b, true);
        let held = b.lock();
        let flusher = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || flusher(&shared))
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let producer = {
            let (shared, a) = (Arc::clone(&shared), Arc::clone(&a));
            std::thread::spawn(move || {
                append(&a);
                shared.mark_dirty(&a, true);
                let watch = Watch::new(vec![Arc::clone(&a.waiters)]);
                let deadline = Instant::now() + Duration::from_secs(10);
                while a.flushed_offset.load(Ordering::Acquire) < 1 && Instant::now() < deadline {
                    watch.wait(deadline);
                }
                let _ = tx.send(a.flushed_offset.load(Ordering::Acquire));
            })
        };
        // Whatever happens, b is let go, so that every thread ends.
        let durable = rx.recv_timeout(Duration::from_secs(10));
        drop(held);
        producer.join().unwrap();
        shared.stop.store(true, Ordering::Relaxed);
        shared.dirty_changed.notify_all();
        flusher.join().unwrap();
        assert_eq!(durable, Ok(1), "a's append waited for b's lock");
        assert_eq!(
            b.flushed_offset.load(Ordering::Acquire),
            1,
            "b flushed once let go"
        );
    }

    #[test]
    fn a_waiter_is_woken_by_a_flush_of_its_partition_even_one_before_it_waits() {
        let (_sim, shared) = shared();
        let a = partition(&shared, "a");
        let watch = Watch::new(vec![Arc::clone(&a.waiters)]);
        append(&a);
        // The flush lands between the waiter's look and its wait.
        flush_partition(&shared, &a);
        let far = Instant::now() + Duration::from_secs(3600);
        let begun = Instant::now();
        watch.wait(far);
        assert!(
            begun.elapsed() < WAIT_SLICE,
            "the wake before the wait was kept"
        );
        assert_eq!(a.flushed_offset.load(Ordering::Acquire), 1);
        drop(watch);
        assert_eq!(a.waiters.len(), 0, "a dropped watch leaves no waiter");
    }

    #[test]
    fn a_flush_of_one_partition_wakes_only_its_own_waiters() {
        let (_sim, shared) = shared();
        let (a, b) = (partition(&shared, "a"), partition(&shared, "b"));
        let on_a = Watch::new(vec![Arc::clone(&a.waiters)]);
        let on_both = Watch::new(vec![Arc::clone(&a.waiters), Arc::clone(&b.waiters)]);
        append(&b);
        flush_partition(&shared, &b);
        assert!(!on_a.woken(), "b's flush is none of a's business");
        assert!(on_both.woken());
        append(&a);
        flush_partition(&shared, &a);
        assert!(on_a.woken());
        assert_eq!((a.waiters.len(), b.waiters.len()), (2, 1));
    }

    /// A flush that nears a roll makes the next segment's files after its
    /// sync, never between beginning and syncing: a truncation (a leader
    /// turned follower cutting its log) holds the partition's lock while
    /// it waits for the syncs begun before it, and a flush waiting for
    /// that lock to hand the files over would never sync.
    #[test]
    fn a_truncation_while_a_flush_makes_the_next_segment_ahead_does_not_deadlock() {
        use std::sync::mpsc::channel;
        let (sim, shared) = crate::broker::testing::shared_with(|c| c.log.segment_bytes = 8192);
        let p = partition(&shared, "t");
        // The creation of the next segment's files (`next-*`) is held.
        let hold = sim.hold_next_open(|path| {
            path.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("next-"))
        });
        // Past half the segment: its flush makes the next one ahead.
        p.lock()
            .append(&mut crate::broker::testing::batch_of(&[7; 5000]), 0)
            .unwrap();
        let flusher = {
            let (shared, p) = (Arc::clone(&shared), Arc::clone(&p));
            std::thread::spawn(move || flush_partition(&shared, &p))
        };
        hold.held
            .recv_timeout(Duration::from_secs(5))
            .expect("the flush makes the next segment ahead");
        let (cut_tx, cut_rx) = channel();
        let cutter = Arc::clone(&p);
        std::thread::spawn(move || {
            let cut = cutter.lock().truncate_to(0);
            let _ = cut_tx.send(cut.is_ok());
        });
        // The truncation holds the lock (or is done) before the flush asks
        // for it.
        let mut cut = cut_rx.try_recv();
        while cut.is_err() && p.log.try_lock().is_ok() {
            std::thread::sleep(Duration::from_millis(1));
            cut = cut_rx.try_recv();
        }
        hold.go.send(()).unwrap();
        let cut = cut.or_else(|_| cut_rx.recv_timeout(Duration::from_secs(5)));
        assert_eq!(
            cut,
            Ok(true),
            "deadlocked: the truncation waits for a sync whose flush waits for its lock"
        );
        flusher.join().unwrap();
    }
}
