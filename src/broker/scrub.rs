//! The scrub (`--scrub-interval`, `--scrub-rate`): every partition's log
//! is read back whole, each record's CRC checked
//! ([`crate::storage::scrub`]), once an interval, at a paced rate,
//! outside the log's lock: the first time soon after it opens, unless its
//! `scrubbed` file says a scrub found it whole less than an interval ago
//! (or that it was made, empty, then: a new partition's note).
//!
//! Damage found in a replica heals it from its peers
//! ([`Shared::heal_running`]): cut before the damaged batch (the bytes
//! saved as `.corrupt`), marked, out of the ISR, refetched. While no other
//! replica in sync is alive it cuts nothing, says so, and tries again
//! every second. Damage in a single copy is reported once: its records
//! exist nowhere else, and cutting them is the operator's decision
//! (`klog-recover --full`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::replica::heal::Healing;
use super::shared::{Partition, Shared};
use crate::storage::recover::Damage;
use crate::storage::scrub::{self, Extent};

/// How often the scrub looks for partitions due, and retries damage it
/// could not heal yet.
const TICK: Duration = Duration::from_secs(1);

/// Damage found and not healed yet.
type Pending = Vec<(Arc<Partition>, Extent, Damage)>;

/// Scrubs every partition once an interval (`None`: never).
pub(super) fn scrub(shared: &Shared) {
    let Some(interval) = shared.config.scrub_interval else {
        return;
    };
    let mut scrubber = Scrubber::default();
    while !shared.stopping() {
        if !scrubber.tick(shared, interval) {
            return;
        }
        sleep_unless_stopping(shared, TICK);
    }
}

/// What the scrub remembers from one tick to the next.
#[derive(Default)]
pub(super) struct Scrubber {
    /// When each partition was last walked whole (`None`: never).
    scrubbed: BTreeMap<(String, u32), Option<Instant>>,
    /// Damage already said (segment, position).
    said: BTreeSet<(PathBuf, u64)>,
    /// Damage found and not healed yet, tried again each tick.
    pub(super) pending: Pending,
}

impl Scrubber {
    /// Tries the pending damage again, and walks the partitions due
    /// (those with damage pending are not: walking them again would only
    /// find it again); `false` when the broker is stopping.
    pub(super) fn tick(&mut self, shared: &Shared, interval: Duration) -> bool {
        let said = &mut self.said;
        self.pending.retain(|(p, extent, damage)| {
            !shared.stopping() && !settled(shared, p, extent, damage, said)
        });
        for p in shared.all_partitions() {
            let key = (p.topic.clone(), p.partition);
            let last = *(self.scrubbed.entry(key.clone())).or_insert_with(|| noted(shared, &p));
            let recent = last.is_some_and(|at| at.elapsed() < interval);
            if recent || self.pending.iter().any(|(q, ..)| Arc::ptr_eq(q, &p)) {
                continue;
            }
            let begun_ms = crate::clock::now_ms();
            match scrub_partition(shared, &p) {
                Walked::Whole => note(shared, &p, Some(begun_ms)),
                Walked::Damaged(found) => {
                    let (extent, damage) = *found;
                    note(shared, &p, None);
                    if !settled(shared, &p, &extent, &damage, &mut self.said) {
                        self.pending.push((p, extent, damage));
                    }
                }
                // Stopping, or a read error (said): tried again next tick.
                Walked::Stopped => continue,
            }
            self.scrubbed.insert(key, Some(Instant::now()));
            if shared.stopping() {
                return false;
            }
        }
        true
    }
}

/// When a scrub last found `p`'s log whole, by its `scrubbed` file (a
/// restart does not read every log again before its time).
fn noted(shared: &Shared, p: &Partition) -> Option<Instant> {
    let dir = shared.store.partition_dir(&p.topic, p.partition);
    let at_ms = scrub::read_scrubbed(&*shared.config.vfs, &dir)?;
    let age = crate::clock::now_ms().saturating_sub(at_ms).max(0);
    Instant::now().checked_sub(Duration::from_millis(age as u64))
}

/// Notes that a walk of `p` begun at `Some(ms)` found it whole; `None`:
/// found damage (the last whole pass is forgotten, and a restart walks it
/// again soon, whatever its interval).
fn note(shared: &Shared, p: &Partition, whole: Option<i64>) {
    let dir = shared.store.partition_dir(&p.topic, p.partition);
    let vfs = &*shared.config.vfs;
    let noted = match whole {
        Some(begun_ms) => scrub::write_scrubbed(vfs, &dir, begun_ms),
        None => scrub::forget_scrubbed(vfs, &dir),
    };
    if let Err(e) = noted {
        shared.log(format_args!(
            "{}-{}: cannot note the scrub: {e}",
            p.topic, p.partition
        ));
    }
}

/// What a walk of a partition's segments found.
enum Walked {
    Whole,
    /// The first damage, in that extent.
    Damaged(Box<(Extent, Damage)>),
    /// The broker is stopping, or a read failed (said).
    Stopped,
}

/// Walks `p`'s segments, paced.
fn scrub_partition(shared: &Shared, p: &Partition) -> Walked {
    let extents = p.lock().extents();
    let mut pace = Pace::new(shared.config.scrub_rate_bytes);
    for extent in extents {
        let found = scrub::check(&extent, &mut |n| pace.spend(n, shared));
        if shared.stopping() {
            return Walked::Stopped;
        }
        match found {
            Ok(Some(damage)) => return Walked::Damaged(Box::new((extent, damage))),
            Ok(None) => {}
            // Retention or a truncation removed the segment meanwhile.
            Err(_) if !p.lock().segments().any(|s| s.path == extent.path) => {}
            Err(e) => {
                shared.log(format_args!(
                    "{}-{}: the scrub could not read {}: {e}",
                    p.topic,
                    p.partition,
                    extent.path.display()
                ));
                return Walked::Stopped;
            }
        }
    }
    Walked::Whole
}

/// Acts on `damage`: heals a replica, reports a single copy (once).
/// Whether nothing is left to do (healed, gone, or a single copy's).
fn settled(
    shared: &Shared,
    p: &Partition,
    extent: &Extent,
    damage: &Damage,
    said: &mut BTreeSet<(PathBuf, u64)>,
) -> bool {
    let first = said.insert((damage.segment.clone(), damage.position));
    if p.replica.is_none() {
        if first {
            shared.log(format_args!(
                "{}-{} is damaged at offset {} ({}, position {}: {}): this is its only copy, \
                 and consumers stop there; `klog-dump --verify {}` shows it, and \
                 `klog-recover --full {}` (the broker stopped) cuts the log there, saving the \
                 cut bytes and moving later segments to quarantine/",
                p.topic,
                p.partition,
                damage.offset,
                damage.segment.display(),
                damage.position,
                damage.reason,
                damage.dir.display(),
                damage.dir.display()
            ));
        }
        return true;
    }
    match shared.heal_running(p, extent, damage) {
        Ok(Healing::Cut | Healing::Gone) => true,
        Ok(Healing::NoPeer) => {
            if first {
                shared.log(format_args!(
                    "{}-{} is damaged at offset {} ({}, position {}: {}): no other replica in \
                     sync is alive to refetch from, so it cuts nothing yet and serves on \
                     (trying again every second)",
                    p.topic,
                    p.partition,
                    damage.offset,
                    damage.segment.display(),
                    damage.position,
                    damage.reason
                ));
            }
            false
        }
        Err(e) => {
            if first {
                shared.log(format_args!(
                    "{}-{} is damaged at offset {}, and healing it failed: {e} (trying again)",
                    p.topic, p.partition, damage.offset
                ));
            }
            false
        }
    }
}

/// A walk's pace: at most `rate` bytes a second since it began.
pub(super) struct Pace {
    rate: u64,
    begun: Instant,
    bytes: u64,
}

impl Pace {
    pub(super) fn new(rate: u64) -> Pace {
        Pace {
            rate: rate.max(1),
            begun: Instant::now(),
            bytes: 0,
        }
    }

    /// Counts `n` bytes walked, sleeping while ahead of the rate; `false`
    /// when the broker is stopping.
    pub(super) fn spend(&mut self, n: u64, shared: &Shared) -> bool {
        self.bytes += n;
        let due = Duration::from_secs_f64(self.bytes as f64 / self.rate as f64);
        let ahead = due.saturating_sub(self.begun.elapsed());
        sleep_unless_stopping(shared, ahead);
        !shared.stopping()
    }
}

/// Sleeps `d`, waking early when the broker stops.
pub(super) fn sleep_unless_stopping(shared: &Shared, d: Duration) {
    let until = Instant::now() + d;
    while !shared.stopping() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}
