//! A replica damaged on disk heals from its peers, with no operator.
//!
//! A single copy found damaged at open stays offline until `klog-recover`
//! (its records exist nowhere else: cutting them is the operator's
//! decision). A replica's records exist on its peers, so the broker does
//! at open what `klog-recover` would: it cuts the log before the first
//! damaged batch (saving the cut bytes beside the segment as `.corrupt`,
//! quarantining later segments), and marks the replica
//! ([`crate::storage::refetch`]). The mark keeps it from leading, or from
//! counting as in sync, until it has fetched the lost records again from
//! a whole leader ([`super::decide`]: it leaves the ISR at its first
//! look; the leader takes it back once it holds everything below the
//! high watermark, and the mark goes).

use std::path::Path;

use crate::broker::shared::Shared;
use crate::error::{Error, Result};
use crate::storage::log::{Log, LogConfig, OpenOptions};
use crate::storage::recover::{self, RecoverOptions};
use crate::storage::refetch::{self, Refetch};

impl Shared {
    /// Heals replica `topic`-`partition`, which opening found `damaged`:
    /// cuts it as `klog-recover` does, marks it, and opens it again.
    pub(in crate::broker) fn heal(
        &self,
        topic: &str,
        partition: u32,
        damaged: &Error,
        config: LogConfig,
        options: OpenOptions,
    ) -> Result<Log> {
        let vfs = &*self.config.vfs;
        let dir = self.store.partition_dir(topic, partition);
        let recover_options = RecoverOptions {
            full: false,
            dry_run: false,
            automatic: false,
            trust_last: false,
            index_interval_bytes: config.index_interval_bytes,
        };
        let point = recover::read_recovery_point(vfs, &dir);
        let report = recover::recover_partition(vfs, &dir, point, &recover_options)?;
        let mark = refetch::mark_if_damaged(vfs, &dir, &report)?;
        let cut_at = mark.map_or_else(|| report.next_offset().unwrap_or(0), |m| m.cut_at);
        self.log(format_args!(
            "{topic}-{partition} was damaged ({damaged}): cut to offset {cut_at}, the cut bytes \
             saved beside the segment as .corrupt and {} later segment(s) quarantined; this \
             replica refetches the rest from its leader, and leads again only once back in sync",
            report.quarantined.len()
        ));
        Log::open(self.config.vfs.clone(), &dir, config, options)
    }

    /// The refetch mark of a replica's log in `dir`; one that cannot be
    /// read counts as a mark (the reading that loses nothing).
    pub(in crate::broker) fn refetch_mark(&self, dir: &Path) -> Option<Refetch> {
        refetch::read(&*self.config.vfs, dir).unwrap_or_else(|e| {
            self.log(format_args!(
                "cannot read the refetch mark in {}: {e} (taken as marked)",
                dir.display()
            ));
            Some(Refetch {
                cut_at: 0,
                left_isr: false,
            })
        })
    }
}
