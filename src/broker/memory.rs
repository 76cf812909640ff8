//! The broker-wide bound on request bytes held in memory
//! (`--max-queued-request-bytes`, Kafka's `queued.max.request.bytes`).
//!
//! A connection reads small frames into its own fixed buffer. A frame too
//! large for it grows the buffer as its bytes arrive, and takes each growth
//! from here first; while the bytes are not free, the connection waits in
//! arrival order without reading, and TCP pushes back on its peer. So a
//! peer that announces a huge frame and sends little costs little, one that
//! sends a lot costs at most the bound over all connections, and a wait
//! ends by the frame's deadline (`--request-timeout`): memory held by
//! frames that stall comes back when they time out. The bytes come back
//! when the frame has been handled.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

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

/// How a [`RequestMemory::take`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Taken {
    /// The bytes are the caller's, to [`give`](RequestMemory::give) back.
    Yes,
    /// Not free by the deadline.
    TimedOut,
    /// The broker stops.
    Stopped,
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
    /// waiters until they are free, the `deadline` passes or `stop` is set.
    pub(super) fn take(&self, bytes: u64, stop: &AtomicBool, deadline: Instant) -> Taken {
        let bytes = bytes.min(self.total);
        let mut state = lock(&self.state);
        if state.queue.is_empty() && state.free >= bytes {
            state.free -= bytes;
            return Taken::Yes;
        }
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push_back(ticket);
        loop {
            let now = Instant::now();
            let gave_up = if stop.load(Ordering::Relaxed) {
                Some(Taken::Stopped)
            } else if now >= deadline {
                Some(Taken::TimedOut)
            } else {
                None
            };
            if let Some(why) = gave_up {
                state.queue.retain(|&t| t != ticket);
                drop(state);
                self.freed.notify_all();
                return why;
            }
            if state.queue.front() == Some(&ticket) && state.free >= bytes {
                state.queue.pop_front();
                state.free -= bytes;
                drop(state);
                // The next in line may fit in what is left.
                self.freed.notify_all();
                return Taken::Yes;
            }
            let wait = STOP_CHECK.min(deadline - now);
            state = match self.freed.wait_timeout(state, wait) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// The bound.
    pub(super) fn total(&self) -> u64 {
        self.total
    }

    /// Gives back `bytes` taken before.
    pub(super) fn give(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut state = lock(&self.state);
        state.free = (state.free + bytes).min(self.total);
        drop(state);
        self.freed.notify_all();
    }

    /// Bytes not taken now.
    #[cfg(test)]
    pub(super) fn free(&self) -> u64 {
        lock(&self.state).free
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[test]
    fn bytes_are_taken_and_given_back() {
        let memory = RequestMemory::new(100);
        let stop = AtomicBool::new(false);
        assert_eq!(memory.take(60, &stop, later()), Taken::Yes);
        assert_eq!(memory.take(40, &stop, later()), Taken::Yes);
        assert_eq!(memory.free(), 0);
        memory.give(60);
        assert_eq!(memory.free(), 60);
        memory.give(40);
        assert_eq!(memory.free(), 100);
        assert_eq!(memory.take(1000, &stop, later()), Taken::Yes);
        assert_eq!(memory.free(), 0, "more than the bound takes the bound");
    }

    #[test]
    fn a_take_that_does_not_fit_waits_until_bytes_come_back_or_its_deadline() {
        let memory = Arc::new(RequestMemory::new(100));
        let stop = Arc::new(AtomicBool::new(false));
        assert_eq!(memory.take(70, &stop, later()), Taken::Yes);
        let soon = Instant::now() + Duration::from_millis(100);
        assert_eq!(memory.take(50, &stop, soon), Taken::TimedOut);
        assert!(lock(&memory.state).queue.is_empty(), "it left the queue");
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let (memory, stop) = (Arc::clone(&memory), Arc::clone(&stop));
            std::thread::spawn(move || tx.send(memory.take(50, &stop, later())).unwrap())
        };
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "50 bytes do not fit in 30"
        );
        memory.give(70);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            Taken::Yes
        );
        waiter.join().unwrap();
        assert_eq!(memory.free(), 50);
    }

    #[test]
    fn waiters_are_served_in_arrival_order_and_stop_ends_a_wait() {
        let memory = Arc::new(RequestMemory::new(100));
        let stop = Arc::new(AtomicBool::new(false));
        assert_eq!(memory.take(90, &stop, later()), Taken::Yes);
        let (tx, rx) = mpsc::channel();
        let big = {
            let (memory, stop, tx) = (Arc::clone(&memory), Arc::clone(&stop), tx.clone());
            std::thread::spawn(move || tx.send(("big", memory.take(100, &stop, later()))).unwrap())
        };
        // The big one is first in line.
        while lock(&memory.state).queue.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let small = {
            let (memory, stop) = (Arc::clone(&memory), Arc::clone(&stop));
            std::thread::spawn(move || tx.send(("small", memory.take(5, &stop, later()))).unwrap())
        };
        // Five bytes are free, but the small one waits behind the big one.
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        stop.store(true, Ordering::Relaxed);
        let mut ended = [
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
        ];
        ended.sort_by_key(|(name, _)| *name);
        assert_eq!(ended, [("big", Taken::Stopped), ("small", Taken::Stopped)]);
        big.join().unwrap();
        small.join().unwrap();
        assert_eq!(memory.free(), 10);
        assert!(lock(&memory.state).queue.is_empty());
    }
}

/// Bytes taken from a [`RequestMemory`], given back when this is dropped.
#[derive(Debug)]
pub(super) struct Held<'a> {
    pub(super) memory: &'a RequestMemory,
    pub(super) bytes: u64,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.memory.give(self.bytes);
    }
}
