//! The random wait of a group member after a conflict over a claim.

use std::time::Duration;

use crate::random::XorShift;

/// The first wait after a conflict, before it doubles.
pub(super) const BACKOFF_BASE_MS: u64 = 20;
/// How many times the wait doubles at most (to 640 ms).
const BACKOFF_DOUBLINGS_MAX: u32 = 5;

/// The random wait after a conflict: a base that doubles with each
/// attempt, from 40 ms up to 640 ms, plus a random part below the base,
/// so that members that collided do not collide again in step.
#[derive(Debug)]
pub(super) struct Backoff {
    random: XorShift,
}

impl Backoff {
    pub(super) fn new(seed: u64) -> Backoff {
        Backoff {
            random: XorShift::new(seed),
        }
    }

    /// The wait before retrying after conflict number `attempt` (from 1).
    pub(super) fn next(&mut self, attempt: u32) -> Duration {
        let base_ms = BACKOFF_BASE_MS << attempt.min(BACKOFF_DOUBLINGS_MAX);
        Duration::from_millis(base_ms + self.random.next() % base_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_bound_with_jitter_below_the_base() {
        // Seed 0 too: an xorshift state of 0 would stay 0, with no jitter.
        for seed in [0, 1, 2, 4242, u64::from(u32::MAX)] {
            let mut backoff = Backoff::new(seed);
            let mut jitters = std::collections::BTreeSet::new();
            for attempt in 1..=12u32 {
                let base_ms = 20 << attempt.min(5);
                let d = backoff.next(attempt).as_millis() as u64;
                assert!(
                    (base_ms..2 * base_ms).contains(&d),
                    "seed {seed}, attempt {attempt}: {d} ms"
                );
                jitters.insert(d - base_ms);
            }
            assert!(
                jitters.len() > 6,
                "seed {seed}: the random part hardly changes: {jitters:?}"
            );
        }
    }
}
