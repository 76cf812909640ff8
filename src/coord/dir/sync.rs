//! The registry's syncer: fsyncs the offsets journals commits appended to
//! (see `journal`), all of them every [`INTERVAL`], on a thread of its own
//! that ends with the registry (which syncs what is left as it goes).
//!
//! So a commit is acknowledged once every process can read it (a crash of
//! any process, `kill -9` included, loses none), and durable within
//! [`INTERVAL`]: a power cut loses at most the commits of that last
//! moment, and the group reads those records again (at least once, as
//! with Kafka, which never fsyncs its offsets). A journal whose fsync
//! failed is rewritten whole, fsynced, by its next commit, or when the
//! registry goes: after a failed fsync the kernel may have dropped the
//! pages it could not write. An operator's reset fsyncs its journal before
//! it returns, and a failure is its error.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::journal;

/// How long a commit may stay in the page cache only.
pub(super) const INTERVAL: Duration = Duration::from_millis(100);

/// The journals to fsync, and those whose fsync failed.
#[derive(Debug, Default)]
pub(super) struct Syncer {
    state: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    dirty: BTreeSet<PathBuf>,
    failed: BTreeSet<PathBuf>,
    /// The thread is running.
    running: bool,
}

impl Syncer {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes that `journal` has records to fsync, starting the thread if
    /// it is not running.
    pub(super) fn mark(self: &Arc<Self>, journal: &Path) {
        let mut pending = self.pending();
        if !pending.dirty.contains(journal) {
            pending.dirty.insert(journal.to_path_buf());
        }
        if !pending.running {
            pending.running = true;
            let weak = Arc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name("klog-offset-sync".into())
                .spawn(move || run(weak));
            if spawned.is_err() {
                // No thread: the next commit tries again, and the
                // registry's drop syncs what is left.
                pending.running = false;
            }
        }
    }

    /// Whether `journal`'s last fsync failed (its next commit rewrites
    /// it), forgetting it.
    pub(super) fn take_failed(&self, journal: &Path) -> bool {
        let mut pending = self.pending();
        !pending.failed.is_empty() && pending.failed.remove(journal)
    }

    /// Puts `journal` back among the failed ones (its rewrite failed too).
    pub(super) fn fail(&self, journal: &Path) {
        self.pending().failed.insert(journal.to_path_buf());
    }

    /// Whether `journal` waits for its fsync.
    #[cfg(test)]
    pub(super) fn is_dirty(&self, journal: &Path) -> bool {
        self.pending().dirty.contains(journal)
    }

    /// Fsyncs `journal` now (an operator's reset is durable when it
    /// returns), whether or not it was marked.
    pub(super) fn sync_one(&self, journal: &Path) -> crate::error::Result<()> {
        self.pending().dirty.remove(journal);
        journal::sync(journal).map_err(|e| {
            self.fail(journal);
            crate::error::Error::io("fsync", journal, e)
        })
    }

    /// Fsyncs every journal marked since the last time.
    pub(super) fn sync_all(&self) {
        let dirty = std::mem::take(&mut self.pending().dirty);
        for path in dirty {
            if let Err(e) = journal::sync(&path) {
                crate::diag::line(format_args!(
                    "% klog: fsync of the committed offsets {} failed: {e}; its next commit \
                     rewrites them",
                    path.display()
                ));
                self.fail(&path);
            }
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.sync_all();
        // Nothing of this registry appends any more: a journal whose fsync
        // failed is rewritten whole, durably, as what it says now.
        let failed = std::mem::take(&mut self.pending().failed);
        for path in failed {
            if let Err(e) = journal::rewrite_as_read(&path) {
                crate::diag::line(format_args!(
                    "% klog: the committed offsets {} may not be durable: {e}",
                    path.display()
                ));
            }
        }
    }
}

fn run(syncer: Weak<Syncer>) {
    loop {
        std::thread::sleep(INTERVAL);
        let Some(syncer) = syncer.upgrade() else {
            return;
        };
        syncer.sync_all();
        let mut pending = syncer.pending();
        if pending.dirty.is_empty() {
            // Idle: the next commit starts another.
            pending.running = false;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_journals_are_synced_by_the_thread_and_at_the_end() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(journal::JOURNAL);
        std::fs::write(&path, journal::HEADER).unwrap();
        let syncer = Arc::new(Syncer::default());
        syncer.mark(&path);
        assert!(syncer.pending().running);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !syncer.pending().dirty.is_empty() {
            assert!(std::time::Instant::now() < deadline, "never synced");
            std::thread::sleep(Duration::from_millis(10));
        }
        // A journal that cannot be opened is a failed one, rewritten next.
        let unreadable = tmp.path().join("not-a-file");
        std::fs::create_dir(unreadable.join("")).unwrap();
        std::fs::write(unreadable.join(journal::JOURNAL), b"").unwrap();
        let bad = unreadable.join(journal::JOURNAL).join("x");
        syncer.pending().dirty.insert(bad.clone());
        syncer.sync_all();
        assert!(syncer.take_failed(&bad));
        assert!(!syncer.take_failed(&bad), "taken once");
    }
}
