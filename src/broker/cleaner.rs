//! The log cleaner threads (`--log-cleaner-threads`): each picks, every
//! `--log-cleaner-backoff` or at once after a clean, the compacted
//! partition here whose cleanable log is the dirtiest share above its
//! `min.cleanable.dirty.ratio`, and cleans it
//! ([`crate::storage::cleaner`]): the plan under the partition's lock, the
//! pass outside it (at most `--log-cleaner-io-bytes-per-second`, stopping
//! when the broker stops), the swap under it again, the replaced files'
//! removal outside it. Appends, fetches and retention never wait for a
//! pass. A partition whose clean failed (a damaged segment, which the
//! scrub and `klog-recover` judge) is left alone for ten minutes. The key map takes `--log-cleaner-memory` shared among the
//! threads, allocated at a thread's first clean.
//!
//! A pass cleans below the high watermark and the last stable offset: a
//! record no consumer may read yet, or of an open transaction, is never
//! judged. Every replica cleans its own log, a follower below the high
//! watermark its leader told it: a follower copies its leader's cleaned
//! batches, gaps and all ([`crate::storage::log`]'s replication), and all
//! replicas keep, for each key, the same latest record, at the same
//! offset.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::scrub::{sleep_unless_stopping, Pace};
use super::shared::{Partition, Shared};
use crate::storage::cleaner::{CleanPlan, OffsetMap};
use crate::sync::lock;

/// The partitions being cleaned, by one thread each.
type Busy = Arc<Mutex<HashSet<(String, u32)>>>;

/// Starts the cleaner threads.
pub(super) fn spawn(shared: &Arc<Shared>) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let threads = shared.config.cleaner.threads;
    let busy = Busy::default();
    (0..threads)
        .map(|i| {
            let (shared, busy) = (Arc::clone(shared), Arc::clone(&busy));
            std::thread::Builder::new()
                .name(format!("cleaner-{i}"))
                .spawn(move || clean_forever(&shared, &busy))
        })
        .collect()
}

/// How the cleaner runs (the broker's flags).
#[derive(Debug, Clone)]
pub struct CleanerConfig {
    /// Threads (0: no compaction).
    pub threads: usize,
    /// Bytes of key map, all threads together.
    pub memory_bytes: u64,
    /// Bytes a second a pass reads at most (`None`: no bound).
    pub io_bytes_per_second: Option<u64>,
    /// How long a thread that found nothing to clean waits.
    pub backoff: Duration,
}

impl Default for CleanerConfig {
    fn default() -> CleanerConfig {
        CleanerConfig {
            threads: 1,
            memory_bytes: crate::limits::CLEANER_MEMORY_DEFAULT,
            io_bytes_per_second: None,
            backoff: Duration::from_secs(15),
        }
    }
}

/// How long a partition whose clean failed is left alone (a damaged
/// segment: the scrub and `klog-recover` judge it; the room for
/// decompressed records held: it frees).
const AFTER_FAILURE: Duration = Duration::from_secs(600);

fn clean_forever(shared: &Shared, busy: &Busy) {
    let mut map: Option<OffsetMap> = None;
    let mut failed: HashMap<(String, u32), Instant> = HashMap::new();
    while !shared.stopping() {
        failed.retain(|_, at| at.elapsed() < AFTER_FAILURE);
        let Some((p, plan)) = pick(shared, busy, &failed) else {
            sleep_unless_stopping(shared, shared.config.cleaner.backoff);
            continue;
        };
        let config = &shared.config.cleaner;
        let memory = config.memory_bytes / config.threads.max(1) as u64;
        let map = map.get_or_insert_with(|| OffsetMap::with_memory(memory as usize));
        let id = (p.topic.clone(), p.partition);
        let cleaned = clean(shared, &p, plan, map);
        lock(busy).remove(&id);
        if !cleaned {
            failed.insert(id, Instant::now());
            sleep_unless_stopping(shared, shared.config.cleaner.backoff);
        }
    }
}

/// The dirtiest partition due a clean, claimed in `busy`, and its plan.
fn pick(
    shared: &Shared,
    busy: &Busy,
    failed: &HashMap<(String, u32), Instant>,
) -> Option<(Arc<Partition>, CleanPlan)> {
    let now = crate::clock::now_ms();
    let mut best: Option<(f64, Arc<Partition>)> = None;
    for p in shared.all_partitions() {
        let id = (p.topic.clone(), p.partition);
        let left_alone = failed.contains_key(&id) || p.failed.load(Ordering::Relaxed);
        if left_alone || lock(busy).contains(&id) {
            continue;
        }
        let mut log = p.lock();
        if !log.config().compact {
            continue;
        }
        let Some(upto) = upto(&p, &mut log) else {
            continue;
        };
        let cleanable = log.cleanable(upto, now);
        let ratio = cleanable.dirty_ratio();
        if cleanable.dirty_bytes == 0 || ratio < log.config().min_cleanable_dirty_ratio {
            continue;
        }
        if best.as_ref().is_none_or(|(r, _)| ratio > *r) {
            best = Some((ratio, Arc::clone(&p)));
        }
    }
    let (_, p) = best?;
    let id = (p.topic.clone(), p.partition);
    if !lock(busy).insert(id.clone()) {
        // Another thread took it meanwhile.
        return None;
    }
    let planned = {
        let mut log = p.lock();
        upto(&p, &mut log).map(|upto| log.clean_plan(upto, now))
    };
    match planned {
        Some(Ok(Some(plan))) => return Some((p, plan)),
        Some(Err(e)) => shared.log(format_args!("{}-{}: no clean: {e}", p.topic, p.partition)),
        _ => {}
    }
    lock(busy).remove(&id);
    None
}

/// Where a clean of `p` stops: records from the high watermark or the
/// last stable offset on are not judged.
fn upto(p: &Partition, log: &mut crate::storage::log::Log) -> Option<u64> {
    let stable = log.last_stable_offset().ok()?;
    Some(stable.min(p.high_watermark.load(Ordering::Acquire)))
}

/// Runs `plan` on `p` and swaps its result in, saying what it did:
/// false when it failed.
fn clean(shared: &Shared, p: &Partition, plan: CleanPlan, map: &mut OffsetMap) -> bool {
    let began = Instant::now();
    let read = plan.bytes();
    let mut pace = Pace::new(
        shared
            .config
            .cleaner
            .io_bytes_per_second
            .unwrap_or(u64::MAX),
    );
    let ran = plan.run(map, &mut |n| pace.spend(n, shared));
    let failed = |e: crate::error::Error| {
        shared.log(format_args!(
            "{}-{}: clean failed, tried again in {} minutes: {e}",
            p.topic,
            p.partition,
            AFTER_FAILURE.as_secs() / 60
        ));
        false
    };
    let cleaned = match ran {
        Ok(Some(cleaned)) => cleaned,
        Ok(None) => return true,
        Err(e) => return failed(e),
    };
    let (before, after) = cleaned.sizes();
    let swapped = p.lock().commit_clean(cleaned);
    let done = swapped.and_then(|s| {
        let swapped = s.swapped();
        s.finish().map(|()| swapped)
    });
    match done {
        Ok(true) => {
            let secs = began.elapsed().as_secs_f64();
            shared.log(format_args!(
                "Cleaned {}-{}: {before} bytes of segments to {after} in {:.3} s ({:.1} MB/s read)",
                p.topic,
                p.partition,
                secs,
                read as f64 / 1e6 / secs.max(1e-9)
            ));
        }
        Ok(false) => {}
        Err(e) => return failed(e),
    }
    true
}
