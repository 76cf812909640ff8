//! The broker's lease: its registration renewed on a thread of its own.
//!
//! On a directory registry a broker is live while it holds its entry's
//! lock and renews its lease (the lock file's mtime) within its session
//! timeout. The renewal is a `stat` and a `futimens` of a file it holds
//! open; this thread does nothing else, and takes no lock a slow path
//! holds: not the registration (rewritten with an fsync when topics
//! change), not a partition's log, not a round of the replica manager
//! (which waits on the registry and on logs). So a broker that works
//! slowly keeps its lease; only one whose process does not run (stopped,
//! frozen) loses it, and the replica manager, seeing it lapsed, registers
//! again. A lease that has lapsed is never renewed here: it stays lapsed
//! until the broker registers again.

use std::time::{Duration, Instant};

use super::shared::Shared;
use crate::sync::lock;

/// How often the lease is renewed: ten times per session timeout, within
/// these bounds.
const RENEW_MIN: Duration = Duration::from_millis(10);
const RENEW_MAX: Duration = Duration::from_secs(1);

/// Renews this broker's lease until the broker stops. A renewal that
/// fails is left to the replica manager, which says so and registers
/// again.
pub(super) fn keep_lease(shared: &Shared) {
    let every = (shared.config.session_timeout / 10).clamp(RENEW_MIN, RENEW_MAX);
    while !shared.stopping() {
        // The lock is held only to take the renewer.
        let renewer = lock(&shared.lease).clone();
        if let Some(renew) = renewer {
            let _ = renew.renew();
        }
        let until = Instant::now() + every;
        while Instant::now() < until && !shared.stopping() {
            std::thread::sleep(RENEW_MIN.min(until - Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::*;
    use crate::broker::testing::{partition, shared_with};
    use crate::coord::{BrokerInfo, DirRegistry, Registry};

    /// A broker whose registration is being rewritten (its lock held, as
    /// during an fsync) and whose partition's log is locked, past three
    /// session timeouts, stays registered: the lease thread needs
    /// neither.
    #[test]
    fn a_broker_stuck_on_its_registration_and_logs_keeps_its_lease() {
        let dir = tempfile::tempdir().unwrap();
        // Long enough that a loaded machine (CI beside other builds) still
        // schedules the renewing thread within it; it lapses at once when
        // renewing waits on the registration held below.
        let lease = Duration::from_millis(1500);
        let registry = DirRegistry::open(dir.path())
            .unwrap()
            .with_broker_lease(lease);
        let (_sim, shared) = shared_with(|c| c.session_timeout = lease);
        let info = BrokerInfo {
            kafka: None,
            id: "broker-test".into(),
            host: "127.0.0.1".into(),
            port: 9,
            pid: std::process::id(),
            topics: Default::default(),
            principal: None,
        };
        let entry = registry.register_broker(&info).unwrap();
        *lock(&shared.lease) = entry.renewer();
        *lock(&shared.registered) = Some((Some(entry), info));
        let p = partition(&shared, "t");
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || keep_lease(&shared))
        };
        let live = || {
            let brokers = registry.brokers().unwrap();
            brokers.iter().any(|b| b.id == "broker-test")
        };
        {
            let _registration = lock(&shared.registered);
            let _log = p.lock();
            let until = Instant::now() + lease * 3;
            while Instant::now() < until {
                assert!(live(), "the lease lapsed while the broker was busy");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        shared.stop.store(true, Ordering::Relaxed);
        thread.join().unwrap();
    }
}
