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

    /// Whether anyone waits on the partition now.
    pub(super) fn any(&self) -> bool {
        !lock(&self.list).is_empty()
    }
}

/// A waiter registered on some partitions (their [`Waiters`]) until
/// dropped.
#[derive(Debug)]
pub(super) struct Watch {
    waker: Arc<Waker>,
    partitions: Vec<Arc<Waiters>>,
}

impl Watch {
    /// Registers a waiter with each of the partitions' `waiters`.
    pub(super) fn new(partitions: Vec<Arc<Waiters>>) -> Watch {
        let waker = Arc::new(Waker::default());
        for waiters in &partitions {
            lock(&waiters.list).push(Arc::clone(&waker));
        }
        Watch { waker, partitions }
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
        }
    }
}
