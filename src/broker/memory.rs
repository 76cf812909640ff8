//! The broker-wide bound on request bytes held in memory
//! (`--max-queued-request-bytes`, Kafka's `queued.max.request.bytes`).
//!
//! A connection reads small frames into its own fixed buffer. A frame too
//! large for that buffer first reserves its whole length here, all at once
//! and in arrival order; while the bytes are not free, the connection waits
//! without reading, and TCP pushes back on its peer. All or nothing, so two
//! large requests can never each hold half of what both need. The bytes
//! come back when the frame has been handled. Memory then follows the bytes
//! that actually arrive (see `connection::frames`), never ahead of them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::sync::lock;

/// How often a waiter looks at the broker's stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Request bytes the broker may hold in memory at once, handed out in
/// arrival order.
#[derive(Debug)]
pub(super) struct RequestMemory {
    total: u64,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug)]
struct State {
    free: u64,
    /// Tickets of the waiters, first come first served.
    queue: VecDeque<u64>,
    next_ticket: u64,
}

/// Bytes taken from a [`RequestMemory`], given back on drop.
#[derive(Debug)]
pub(super) struct Reservation<'a> {
    memory: &'a RequestMemory,
    bytes: u64,
}

impl RequestMemory {
    /// A bound of `total` bytes.
    pub(super) fn new(total: u64) -> RequestMemory {
        RequestMemory {
            total,
            state: Mutex::new(State {
                free: total,
                queue: VecDeque::new(),
                next_ticket: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// Takes `bytes` (at most the whole bound), waiting behind earlier
    /// waiters until they are free. `None` when `stop` is set first.
    pub(super) fn reserve(&self, bytes: u64, stop: &AtomicBool) -> Option<Reservation<'_>> {
        let bytes = bytes.min(self.total);
        let mut state = lock(&self.state);
        if state.queue.is_empty() && state.free >= bytes {
            state.free -= bytes;
            return Some(Reservation {
                memory: self,
                bytes,
            });
        }
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push_back(ticket);
        loop {
            if stop.load(Ordering::Relaxed) {
                state.queue.retain(|&t| t != ticket);
                drop(state);
                self.freed.notify_all();
                return None;
            }
            if state.queue.front() == Some(&ticket) && state.free >= bytes {
                state.queue.pop_front();
                state.free -= bytes;
                drop(state);
                // The next in line may fit in what is left.
                self.freed.notify_all();
                return Some(Reservation {
                    memory: self,
                    bytes,
                });
            }
            state = match self.freed.wait_timeout(state, STOP_CHECK) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Bytes not reserved now.
    #[cfg(test)]
    pub(super) fn free(&self) -> u64 {
        lock(&self.state).free
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        lock(&self.memory.state).free += self.bytes;
        self.memory.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;

    #[test]
    fn bytes_are_taken_and_given_back() {
        let memory = RequestMemory::new(100);
        let stop = AtomicBool::new(false);
        let a = memory.reserve(60, &stop).unwrap();
        let b = memory.reserve(40, &stop).unwrap();
        assert_eq!(memory.free(), 0);
        drop(a);
        assert_eq!(memory.free(), 60);
        drop(b);
        assert_eq!(memory.free(), 100);
        let whole = memory.reserve(1000, &stop).unwrap();
        assert_eq!(memory.free(), 0, "more than the bound takes the bound");
        drop(whole);
    }

    #[test]
    fn a_reservation_that_does_not_fit_waits_until_bytes_come_back() {
        let memory = Arc::new(RequestMemory::new(100));
        let stop = Arc::new(AtomicBool::new(false));
        let held = memory.reserve(70, &stop).unwrap();
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let (memory, stop) = (Arc::clone(&memory), Arc::clone(&stop));
            std::thread::spawn(move || {
                let got = memory.reserve(50, &stop).is_some();
                tx.send(got).unwrap();
            })
        };
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "50 bytes do not fit in 30"
        );
        drop(held);
        assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap());
        waiter.join().unwrap();
        assert_eq!(memory.free(), 100);
    }

    #[test]
    fn waiters_are_served_in_arrival_order_and_stop_ends_a_wait() {
        let memory = Arc::new(RequestMemory::new(100));
        let stop = Arc::new(AtomicBool::new(false));
        let held = memory.reserve(90, &stop).unwrap();
        let (tx, rx) = mpsc::channel();
        let big = {
            let (memory, stop, tx) = (Arc::clone(&memory), Arc::clone(&stop), tx.clone());
            std::thread::spawn(move || {
                let r = memory.reserve(100, &stop);
                tx.send(("big", r.is_some())).unwrap();
            })
        };
        // The big one is first in line.
        while lock(&memory.state).queue.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let small = {
            let (memory, stop) = (Arc::clone(&memory), Arc::clone(&stop));
            std::thread::spawn(move || {
                let r = memory.reserve(5, &stop);
                tx.send(("small", r.is_some())).unwrap();
            })
        };
        // Five bytes are free, but the small one waits behind the big one.
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        stop.store(true, Ordering::Relaxed);
        let mut ended = [
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        ];
        ended.sort();
        assert_eq!(ended, [("big", false), ("small", false)]);
        big.join().unwrap();
        small.join().unwrap();
        drop(held);
        assert_eq!(memory.free(), 100);
        assert!(lock(&memory.state).queue.is_empty());
    }
}
