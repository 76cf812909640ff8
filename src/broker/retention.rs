//! Retention: every `--retention-check-interval`, each partition deletes
//! the segments its retention policy lets go. They leave the log under the
//! partition's lock; their files are unlinked, and the directory synced,
//! after it is let go, so that appends do not wait for the disk. Each
//! partition also forgets the idempotent producers silent longer than
//! `--producer-id-expiration`.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::shared::Shared;

/// Deletes expired segments every retention check interval.
pub(super) fn retention(shared: &Shared) {
    let interval = Duration::from_millis(shared.config.retention_check_interval_ms.max(1));
    let mut next = Instant::now() + interval;
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100).min(interval));
        if Instant::now() < next {
            continue;
        }
        next = Instant::now() + interval;
        for p in shared.all_partitions() {
            expire_producers(shared, &p);
            let expired = p.lock().take_expired(crate::clock::now_ms());
            let deleted = expired.delete();
            match deleted {
                Ok(d) if !d.is_empty() => shared.log(format_args!(
                    "Retention deleted {} segments of {}-{} (first offsets {:?})",
                    d.len(),
                    p.topic,
                    p.partition,
                    d
                )),
                Ok(_) => {}
                Err(e) => shared.log(format_args!(
                    "retention of {}-{} failed: {e}",
                    p.topic, p.partition
                )),
            }
        }
    }
}

/// Forgets `p`'s producers silent past the expiry, counting them.
fn expire_producers(shared: &Shared, p: &super::shared::Partition) {
    let idle = i64::try_from(shared.config.producer_id_expiration_ms).unwrap_or(i64::MAX);
    match p.lock().expire_producers(crate::clock::now_ms(), idle) {
        Ok(n) => {
            shared
                .producers_expired
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        Err(e) => shared.log(format_args!(
            "producer expiry of {}-{} failed: {e}",
            p.topic, p.partition
        )),
    }
}
