//! Retention: every `--retention-check-interval`, each partition deletes
//! the segments its retention policy lets go.

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
            let deleted = p.lock().apply_retention(crate::clock::now_ms());
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
