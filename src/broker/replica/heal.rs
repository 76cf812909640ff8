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
    /// Opens the log of replica `topic`-`partition` as the broker does:
    /// damage found at open is healed ([`Shared::heal`]); a log that opens
    /// ending before its recovery point (the offset it had recorded as
    /// durable: its newest segment files lost, or a truncation cut short
    /// by a crash) is marked as cut there, since it may lack acknowledged
    /// records.
    pub(in crate::broker) fn open_replica(
        &self,
        topic: &str,
        partition: u32,
        config: LogConfig,
        options: OpenOptions,
    ) -> Result<Log> {
        let vfs = &*self.config.vfs;
        let dir = self.store.partition_dir(topic, partition);
        let durable = recover::read_recovery_point(vfs, &dir);
        let log = match self
            .store
            .open_log(topic, partition, config.clone(), options)
        {
            Err(e @ Error::Damaged { .. }) => self.heal(topic, partition, &e, config, options)?,
            other => other?,
        };
        let end = log.next_offset();
        if end < durable && refetch::read(vfs, &dir).ok().flatten().is_none() {
            let mark = Refetch {
                cut_at: end,
                left_isr: false,
            };
            refetch::write(vfs, &dir, &mark)?;
            self.log(format_args!(
                "{topic}-{partition} ends at offset {end}, before offset {durable} it had recorded \
                 as durable (files lost): this replica refetches the rest from its leader, and \
                 leads again only once back in sync"
            ));
        }
        Ok(log)
    }

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
        // The mark before the cut (a cut is durable at once: a mark
        // written after it could be lost, and the log would look whole).
        let point = recover::read_recovery_point(vfs, &dir);
        let (report, mark) = refetch::recover_marked(vfs, &dir, point, &recover_options)?;
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::Shared;
    use crate::broker::testing::{batch_of, shared};
    use crate::error::Error;
    use crate::storage::log::OpenOptions;

    /// A replica's log of t-0 holding 6 batches of epoch 1, closed
    /// cleanly-enough, with one byte flipped inside the batch at offset 2
    /// (whole batches after it: damage, not a torn tail). Returns the
    /// partition directory.
    fn damaged_replica(sim: &crate::storage::fs::sim::SimFs, shared: &Shared) -> PathBuf {
        shared.store.create_topic("t", 1).unwrap();
        let config = shared.config.log.clone();
        let options = OpenOptions {
            writable: true,
            lock: false,
        };
        let mut log = shared.store.open_log("t", 0, config, options).unwrap();
        log.set_leader_epoch(1).unwrap();
        for i in 0..6u8 {
            log.append(&mut batch_of(&[b'a' + i; 40]), 0).unwrap();
        }
        log.flush().unwrap();
        drop(log);
        let dir = shared.store.partition_dir("t", 0);
        let seg = dir.join("00000000000000000000.log");
        let mut bytes = sim.read(&seg).unwrap();
        let at = bytes.windows(40).position(|w| w == [b'c'; 40]).unwrap();
        bytes[at + 20] ^= 0x20;
        sim.write(&seg, &bytes);
        // All of it durable, as after a sync long ago.
        for (path, bytes) in sim.files() {
            sim.create_dir_all_durable(path.parent().unwrap());
            sim.write(&path, &bytes);
        }
        dir
    }

    /// Opens t-0 as the broker does: damage found at open is healed.
    fn open_as_broker(shared: &Shared) -> crate::storage::log::Log {
        let options = OpenOptions {
            writable: true,
            lock: false,
        };
        let config = shared.config.log.clone();
        match shared.store.open_log("t", 0, config.clone(), options) {
            Err(e @ Error::Damaged { .. }) => shared.heal("t", 0, &e, config, options).unwrap(),
            other => other.unwrap(),
        }
    }

    /// Review of issue 23: heal cut the log (durably: `.corrupt` saved,
    /// the segment truncated) before it wrote the refetch mark. A broker
    /// stopped between the two (a failed write, kill -9, a power cut)
    /// restarted with a log that opens clean and no mark: the cut replica
    /// counted as whole, could lead, and its followers truncated the
    /// records it lost. Here the power goes after every count of changes
    /// heal makes, and the broker starts again.
    #[test]
    fn a_replica_cut_at_open_stays_marked_whenever_the_broker_stops() {
        for n in 0.. {
            let (sim, shared) = shared();
            let dir = damaged_replica(&sim, &shared);
            let options = OpenOptions {
                writable: true,
                lock: false,
            };
            let config = shared.config.log.clone();
            let damaged = match shared.store.open_log("t", 0, config.clone(), options) {
                Err(e @ Error::Damaged { .. }) => e,
                other => panic!(
                    "the flipped byte is damage: {:?}",
                    other.map(|l| l.next_offset())
                ),
            };
            sim.cut_power_after(n);
            let healed = shared.heal("t", 0, &damaged, config, options);
            let done = healed.is_ok();
            drop(healed);
            sim.crash(&mut |_| 0);
            sim.restore_power();
            let log = open_as_broker(&shared);
            assert_eq!(
                log.next_offset(),
                2,
                "cut before the damaged batch ({n} changes)"
            );
            assert!(
                shared.refetch_mark(&dir).is_some(),
                "power cut after {n} changes: the log was cut at 2 (offsets 2..6 lost) and \
                 nothing says so"
            );
            if done {
                break;
            }
        }
    }

    /// Review of issue 23: a replica whose newest segment files were lost
    /// (fsck, a bad sector in the directory) opened as a whole log ending
    /// before its recovery point, unmarked: it could lead without those
    /// records. Opened as the broker opens a replica, it is marked.
    #[test]
    fn a_replica_that_lost_its_newest_segments_is_marked() {
        let (sim, shared) = shared();
        shared.store.create_topic("t", 1).unwrap();
        let options = OpenOptions {
            writable: true,
            lock: false,
        };
        let mut config = shared.config.log.clone();
        config.segment_bytes = crate::limits::SEGMENT_BYTES_MIN;
        let mut log = shared
            .store
            .open_log("t", 0, config.clone(), options)
            .unwrap();
        log.set_leader_epoch(1).unwrap();
        while log.segments().count() < 4 {
            log.append(&mut batch_of(&[b'v'; 1000]), 0).unwrap();
            log.flush().unwrap();
        }
        let end = log.next_offset();
        drop(log);
        let dir = shared.store.partition_dir("t", 0);
        let durable = crate::storage::recover::read_recovery_point(&*sim, &dir);
        let mut logs: Vec<_> = sim
            .files()
            .into_keys()
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        for seg in &logs[logs.len() - 2..] {
            for ext in ["log", "index", "timeindex"] {
                let path = seg.with_extension(ext);
                if sim.read(&path).is_some() {
                    crate::storage::fs::Vfs::remove(&*sim, &path).unwrap();
                }
            }
        }
        let log = shared.open_replica("t", 0, config, options).unwrap();
        let mark = crate::storage::refetch::read(&*sim, &dir).unwrap();
        assert!(log.next_offset() < durable, "the newest segments were lost");
        assert_eq!(
            mark.map(|m| m.cut_at),
            Some(log.next_offset()),
            "durable up to {end}, it opens ending at {}: unmarked",
            log.next_offset()
        );
    }
}
