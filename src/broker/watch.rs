//! Waiting for a partition: each partition keeps the list of those who
//! wait for its records to become visible or durable (a long-poll fetch,
//! an acks=all answer), and a flush of that partition wakes them, and
//! nobody else.
//!
//! A waiter registers a [`Watch`] on the partitions it waits for *before*
//! it looks at them, so that a flush between its look and its wait still
//! wakes it (the wake is kept until the next wait). A wait ends when a
//! watched partition changes, at the deadline, or after at most
//! [`WAIT_SLICE`] (to notice a shutdown): callers look again in a loop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::sync::lock;

/// The longest one wait lasts before its caller looks again (at a
/// shutdown, say).
pub(super) const WAIT_SLICE: Duration = Duration::from_millis(200);

/// One waiter: woken by any partition it watches.
#[derive(Debug, Default)]
pub(super) struct Waker {
    woken: Mutex<bool>,
    changed: Condvar,
}

impl Waker {
    fn wake(&self) {
        *lock(&self.woken) = true;
        self.changed.notify_one();
    }
}

/// The waiters of one partition.
#[derive(Debug, Default)]
pub(super) struct Waiters {
    list: Mutex<Vec<Arc<Waker>>>,
    /// Those among them that wait for the partition's durable records (a
    /// consumer's fetch, an acks=all answer), not a follower's fetch, which
    /// is served what is written.
    for_durable: AtomicUsize,
}

impl Waiters {
    /// Wakes every waiter of the partition.
    pub(super) fn wake_all(&self) {
        for waker in lock(&self.list).iter() {
            waker.wake();
        }
    }

    /// Waiters registered now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        lock(&self.list).len()
    }

    /// Whether anyone waits for the partition's records to become durable
    /// now (a follower's fetch does not count).
    pub(super) fn any_for_durable(&self) -> bool {
        self.for_durable.load(Ordering::Acquire) > 0
    }
}

/// A waiter registered on some partitions (their [`Waiters`]) until
/// dropped.
#[derive(Debug)]
pub(super) struct Watch {
    waker: Arc<Waker>,
    partitions: Vec<Arc<Waiters>>,
    /// It waits for durable records ([`Waiters::any_for_durable`]).
    for_durable: bool,
}

impl Watch {
    /// Registers a waiter with each of the partitions' `waiters`, one that
    /// waits for their durable records.
    pub(super) fn new(partitions: Vec<Arc<Waiters>>) -> Watch {
        Watch::registered(partitions, true)
    }

    /// [`Watch::new`] for a follower's fetch, served records before they
    /// are durable: its wait hurries no flush.
    pub(super) fn for_follower(partitions: Vec<Arc<Waiters>>) -> Watch {
        Watch::registered(partitions, false)
    }

    fn registered(partitions: Vec<Arc<Waiters>>, for_durable: bool) -> Watch {
        let waker = Arc::new(Waker::default());
        for waiters in &partitions {
            lock(&waiters.list).push(Arc::clone(&waker));
            if for_durable {
                waiters.for_durable.fetch_add(1, Ordering::AcqRel);
            }
        }
        Watch {
            waker,
            partitions,
            for_durable,
        }
    }

    /// Whether a wake is pending (the next wait returns at once).
    #[cfg(test)]
    pub(super) fn woken(&self) -> bool {
        *lock(&self.waker.woken)
    }

    /// Waits until a watched partition changed since the last wait (or
    /// since the watch began), `deadline` passes, or [`WAIT_SLICE`] does.
    pub(super) fn wait(&self, deadline: Instant) {
        let mut woken = lock(&self.waker.woken);
        if !*woken {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            woken = self
                .waker
                .changed
                .wait_timeout(woken, left.min(WAIT_SLICE))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *woken = false;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        for waiters in &self.partitions {
            lock(&waiters.list).retain(|w| !Arc::ptr_eq(w, &self.waker));
            if self.for_durable {
                waiters.for_durable.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}
