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
use std::sync::atomic::Ordering;

use super::manager::set_role_locked;
use super::{decide, Decision, Facts, Role};
use crate::broker::shared::{Partition, Shared};
use crate::coord::SessionState;
use crate::error::{Error, Result};
use crate::storage::log::{Log, LogConfig, OpenOptions};
use crate::storage::recover::{self, Damage, RecoverOptions};
use crate::storage::refetch::{self, Refetch};
use crate::storage::scrub::{self, Extent};
use crate::sync::lock;

/// How recent a follower's fetch must be for its leader to count on it
/// as whole before a cut (its fetches come at least every 500 ms: see
/// `follower::FETCH_WAIT`).
const FRESH: std::time::Duration = std::time::Duration::from_secs(2);

/// What became of damage a scrub found in a served replica
/// ([`Shared::heal_running`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::broker) enum Healing {
    /// Cut before the damage, marked: it refetches from a replica in sync.
    Cut,
    /// No other replica in sync is alive to refetch from: nothing cut,
    /// the damage stays (to be tried again).
    NoPeer,
    /// Not in the log as it is now (a truncation rewrote the bytes under
    /// the scrub, or retention deleted the segment).
    Gone,
}

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
        // Where and what, without the advice a single copy's error gives
        // (`run klog-recover`): this replica needs no operator.
        let what = match damaged {
            Error::Damaged {
                segment,
                position,
                offset,
                reason,
                ..
            } => format!(
                "{} at byte {position} (offset {offset}): {reason}",
                segment.display()
            ),
            other => other.to_string(),
        };
        self.log(format_args!(
            "{topic}-{partition} was damaged ({what}): cut to offset {cut_at}, the cut bytes \
             saved beside the segment as .corrupt and {} later segment(s) quarantined; this \
             replica refetches the rest from its leader, and leads again only once back in sync",
            report.quarantined.len()
        ));
        Log::open(self.config.vfs.clone(), &dir, config, options)
    }

    /// Heals a replica `p` while it serves, a scrub having found `damage`
    /// in `extent` of its log: when another replica in sync is alive (it
    /// holds every record below the high watermark), leaves the ISR first
    /// (by compare-and-set: a leader hands over), stops serving, saves the
    /// bytes from the damaged batch to the segment's end as `.corrupt`,
    /// marks the replica (before the cut, as at open), and cuts its log
    /// before the damaged batch; it then refetches from the leader. Alone
    /// in sync, it cuts nothing: the records past the damage exist nowhere
    /// else. Leaving before the cut is what keeps two replicas damaged at
    /// once from both cutting, each counting on the other as whole.
    pub(in crate::broker) fn heal_running(
        &self,
        p: &Partition,
        extent: &Extent,
        damage: &Damage,
    ) -> Result<Healing> {
        let Some(replica) = &p.replica else {
            return Ok(Healing::NoPeer);
        };
        let _deciding = lock(&replica.deciding);
        if !scrub::confirm(&p.lock(), extent, damage)? {
            return Ok(Healing::Gone);
        }
        let offset = damage.offset;
        if !self.leave_isr_to_cut(p, offset)? {
            return Ok(Healing::NoPeer);
        }
        let mut log = p.lock();
        // Out of the ISR now, whatever comes: a needless leave is undone
        // once the leader takes it back in sync.
        if !scrub::confirm(&log, extent, damage)? {
            return Ok(Healing::Gone);
        }
        let (topic, partition) = (&p.topic, p.partition);
        let why = format!("its log is damaged at offset {offset}: refetching from there");
        set_role_locked(self, p, &log, Role::Waiting(why));
        let vfs = &*self.config.vfs;
        // Everything the cut removes from the damaged segment is saved:
        // what was appended since the walk too, gathered appends written.
        log.flush()?;
        let now = (log.extents().into_iter()).find(|e| e.path == extent.path);
        // A copy that cannot be made (a full disk, EIO) must not keep the
        // damage: the replica in sync it left the ISR to holds the records.
        let saved = match (now.as_ref().unwrap_or(extent)).save_from(vfs, damage.position) {
            Ok(path) => format!("saved as {}", path.display()),
            Err(e) => format!("not saved ({e}): a replica in sync holds them"),
        };
        let mark = {
            let mut held = lock(&replica.refetch);
            let mark = Refetch {
                cut_at: held.map_or(offset, |m| m.cut_at.min(offset)),
                left_isr: held.is_some_and(|m| m.left_isr),
            };
            refetch::write(vfs, &damage.dir, &mark)?;
            *held = Some(mark);
            mark
        };
        let cut = log.truncate_before_damage(damage);
        p.flushed_offset
            .store(log.flushed_offset(), Ordering::Release);
        p.high_watermark
            .fetch_min(log.next_offset(), Ordering::AcqRel);
        cut?;
        self.log(format_args!(
            "{topic}-{partition} is damaged at offset {offset} ({}, position {}: {}): cut \
             there, the bytes from the damaged batch on {saved}; this replica refetches \
             the rest from its leader, and leads again only once back in sync (marked cut \
             at {})",
            damage.segment.display(),
            damage.position,
            damage.reason,
            mark.cut_at
        ));
        Ok(Healing::Cut)
    }

    /// Before a cut of `p`'s log at `offset`: whether another replica the
    /// registry names in sync is alive, this one having left the ISR by
    /// compare-and-set when it was in it (as a cut replica's manager
    /// would: [`Decision::Leave`]; a leader stops serving first). `false`
    /// when nobody else is, or the change was refused (tried again).
    fn leave_isr_to_cut(&self, p: &Partition, offset: u64) -> Result<bool> {
        let (Some(registry), Some(replica)) = (&self.registry, &p.replica) else {
            return Ok(false);
        };
        let Some((state, version)) = registry.partition_state(&p.topic, p.partition)? else {
            return Ok(false);
        };
        let live: Vec<String> = registry.brokers()?.into_iter().map(|b| b.id).collect();
        let me = &self.broker_id;
        let peer = (state.isr.iter()).any(|r| r != me && live.contains(r));
        if !peer || !self.peer_fetching(p, &live) || registry.session() != SessionState::Alive {
            return Ok(false);
        }
        if !state.isr.contains(me) {
            return Ok(true);
        }
        let facts = Facts {
            me,
            state: &state,
            live: &live,
            session_alive: true,
            cut: Some(offset),
            failed: false,
        };
        let role = replica.role().clone();
        let Decision::Leave(next) = decide(&facts, &role) else {
            return Ok(false);
        };
        if matches!(role, Role::Leader(_)) {
            let why = format!("its log is damaged at offset {offset}: leaving the ISR");
            set_role_locked(self, p, &p.lock(), Role::Waiting(why));
        }
        let left = registry.set_partition_state(&p.topic, p.partition, &next, version)?;
        if left {
            self.log(format_args!(
                "{}-{}: left the ISR (now {:?}, leader {:?}) to cut its damaged log",
                p.topic, p.partition, next.isr, next.leader
            ));
        }
        Ok(left)
    }

    /// For a leader, whether a live member of its ISR has fetched, in its
    /// epoch and within [`FRESH`], at or past the high watermark: it holds
    /// every acknowledged record by its own fetches, not by the registry
    /// alone (on ZooKeeper a killed broker's registration outlives it by a
    /// session, and its restarted incarnation may have been cut at open).
    /// A follower counts on the leader the registry names.
    fn peer_fetching(&self, p: &Partition, live: &[String]) -> bool {
        let Some(replica) = &p.replica else {
            return false;
        };
        let Role::Leader(l) = &*replica.role() else {
            return true;
        };
        let hw = p.high_watermark.load(Ordering::Acquire);
        let me = &self.broker_id;
        let fresh = |r: &String| {
            (l.progress.get(r)).is_some_and(|g| g.offset >= hw && g.fetched_at.elapsed() <= FRESH)
        };
        (l.isr.iter()).any(|r| r != me && live.contains(r) && fresh(r))
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
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;
    use crate::broker::replica::{Leading, Progress};
    use crate::broker::testing::{batch_of, replicated_partition, shared, shared_in};
    use crate::storage::fs::sim::SimFs;
    use crate::storage::segment::SEGMENT_HEADER_BYTES;

    const ME: &str = "broker-test";

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

    /// A broker's shared state over a simulated disk, with a registry in
    /// memory where `live` are registered, and partition 0 of `t`
    /// (replicas this broker, b, c) led here in epoch 1 with ISR `isr`,
    /// holding 40 batches in rolled segments of 4 KiB, all durable.
    fn serving(isr: &[&str], live: &[&str]) -> Serving {
        let registry = Arc::new(crate::coord::mem::MemRegistry::default());
        let registered: Vec<&str> = [ME].iter().chain(live).copied().collect();
        serving_as(ME, &registry, isr, &registered)
    }

    /// [`serving`] as broker `me` of a registry shared with others, where
    /// it registers `register`; the partition's state (led by [`ME`] in
    /// epoch 1 with ISR `isr`) is made by the first to come. `me` leads
    /// when it is [`ME`], and follows it otherwise.
    fn serving_as(
        me: &str,
        registry: &Arc<crate::coord::mem::MemRegistry>,
        isr: &[&str],
        register: &[&str],
    ) -> Serving {
        use crate::coord::{BrokerInfo, Registry};
        let (sim, shared) = shared_in(registry.clone(), me, isr, |c| c.log.segment_bytes = 4096);
        let isr: Vec<String> = isr.iter().map(|s| s.to_string()).collect();
        let held = register.iter().map(|id| {
            let info = BrokerInfo {
                id: id.to_string(),
                host: "127.0.0.1".into(),
                port: 1,
                pid: 1,
                topics: Default::default(),
                kafka: None,
                principal: None,
            };
            registry.register_broker(&info).unwrap()
        });
        let held = held.collect();
        let role = if me == ME {
            // Each peer in sync fetched just now, holding all 40.
            let now = Instant::now();
            let fetched = |r: &String| (r.clone(), Progress::fetched(None, 40, 40, now));
            let progress = isr.iter().filter(|r| *r != ME).map(fetched).collect();
            Role::Leader(Leading {
                epoch: 1,
                version: 0,
                isr,
                epoch_start: 0,
                since: now,
                progress,
            })
        } else {
            Role::Follower {
                leader: ME.into(),
                epoch: 1,
            }
        };
        let p = replicated_partition(&shared, "t", &[ME, "b", "c"], role);
        {
            let mut log = p.lock();
            log.set_leader_epoch(1).unwrap();
            for i in 0..40u8 {
                log.append(&mut batch_of(&[b'a' + i % 26; 200]), 0).unwrap();
            }
            log.flush().unwrap();
            p.flushed_offset
                .store(log.flushed_offset(), Ordering::Release);
            p.high_watermark
                .store(log.flushed_offset(), Ordering::Release);
        }
        // The directories durable too, as long after their creation.
        let dir = shared.store.partition_dir("t", 0);
        sim.create_dir_all_durable(&dir);
        for d in [dir.parent().unwrap(), &dir] {
            crate::storage::fs::sync_directory(&*sim, d).unwrap();
        }
        Serving {
            sim,
            shared,
            p,
            _held: held,
        }
    }

    struct Serving {
        sim: Arc<SimFs>,
        shared: Arc<Shared>,
        p: Arc<Partition>,
        _held: Vec<crate::coord::Ephemeral>,
    }

    /// Flips a byte of the second batch of `p`'s first (rolled) segment, in
    /// place; what a scrub then finds, and in which extent.
    fn rot(sim: &SimFs, p: &Partition) -> (Extent, Damage) {
        let extents = p.lock().extents();
        assert!(extents.len() > 2, "rolled: {extents:?}");
        let first = extents[0].clone();
        let at = (SEGMENT_HEADER_BYTES + batch_of(&[0; 200]).len() + 120) as u64;
        let byte = sim.read(&first.path).unwrap()[at as usize];
        let file = crate::storage::fs::Vfs::open(sim, &first.path, false).unwrap();
        file.write_all_at(&[byte ^ 0x10], at).unwrap();
        // On the disk: rot survives a power cut.
        file.sync_data().unwrap();
        let damage = scrub::check(&first, &mut |_| true)
            .unwrap()
            .expect("damage");
        assert_eq!(damage.offset, 1, "the second batch");
        (first, damage)
    }

    /// Issue 23, "heal", for damage a scrub finds while the replica serves
    /// (below the recovery point, where no open looks): with another
    /// replica in sync alive, it stops serving, saves the bytes from the
    /// damaged batch on as `.corrupt`, is marked cut there, and its log
    /// ends before the damaged batch, the watermark with it.
    #[test]
    fn a_replica_damaged_while_it_serves_is_cut_before_the_damage_and_marked() {
        let s = serving(&[ME, "b"], &["b"]);
        let (extent, damage) = rot(&s.sim, &s.p);
        let before = s.sim.read(&extent.path).unwrap();
        let healed = s.shared.heal_running(&s.p, &extent, &damage).unwrap();
        assert_eq!(healed, Healing::Cut);
        let log = s.p.lock();
        assert_eq!(log.next_offset(), 1, "cut before the damaged batch");
        assert!(s.p.high_watermark.load(Ordering::Acquire) <= 1);
        assert!(s.p.flushed_offset.load(Ordering::Acquire) <= 1);
        let dir = s.shared.store.partition_dir("t", 0);
        let mark = refetch::read(&*s.sim, &dir).unwrap();
        assert_eq!(mark.map(|m| m.cut_at), Some(1));
        assert_eq!(*lock(&s.p.replica.as_ref().unwrap().refetch), mark);
        let saved = s.sim.read(&extent.path.with_extension("log.corrupt"));
        assert_eq!(saved.as_deref(), Some(&before[damage.position as usize..]));
        let role = s.p.replica.as_ref().unwrap().role().clone();
        assert!(matches!(role, Role::Waiting(_)), "{role:?}");
    }

    /// Alone in sync (the other in-sync replica is not alive), a damaged
    /// replica cuts nothing: the records past the damage exist nowhere
    /// else that could lead. It keeps serving them, unmarked.
    #[test]
    fn a_damaged_replica_alone_in_sync_cuts_nothing() {
        for (isr, live) in [(&[ME][..], &["b", "c"][..]), (&[ME, "b"][..], &["c"][..])] {
            let s = serving(isr, live);
            let (extent, damage) = rot(&s.sim, &s.p);
            let healed = s.shared.heal_running(&s.p, &extent, &damage).unwrap();
            assert_eq!(healed, Healing::NoPeer, "ISR {isr:?}, live {live:?}");
            assert_eq!(s.p.lock().next_offset(), 40);
            let dir = s.shared.store.partition_dir("t", 0);
            assert_eq!(refetch::read(&*s.sim, &dir).unwrap(), None);
            let role = s.p.replica.as_ref().unwrap().role().clone();
            assert!(matches!(role, Role::Leader(_)), "{role:?}");
        }
    }

    /// Review of issue 23 (the scrub): two replicas in sync, each found
    /// damaged by its own scrub at about the same time (both scrubs run
    /// soon after the brokers start, as after a host-wide power cut). Each
    /// asked the registry whether another replica in sync is alive, saw
    /// the other (which had not left the ISR yet: the manager does that
    /// at its next round), and cut: the records past both cuts were whole
    /// on one replica or the other, and are now on neither (the later
    /// segments deleted), the partition offline until an operator takes
    /// the loss. A replica leaves the ISR before it cuts, so the second
    /// finds nobody in sync to refetch from.
    #[test]
    fn two_replicas_damaged_at_once_do_not_both_cut() {
        let registry = Arc::new(crate::coord::mem::MemRegistry::default());
        let a = serving_as(ME, &registry, &[ME, "b"], &[ME]);
        let b = serving_as("b", &registry, &[ME, "b"], &["b"]);
        let (extent_a, damage_a) = rot(&a.sim, &a.p);
        let (extent_b, damage_b) = rot(&b.sim, &b.p);
        let healed_a = a.shared.heal_running(&a.p, &extent_a, &damage_a).unwrap();
        let healed_b = b.shared.heal_running(&b.p, &extent_b, &damage_b).unwrap();
        let ends = (a.p.lock().next_offset(), b.p.lock().next_offset());
        assert!(
            ends.0 == 40 || ends.1 == 40,
            "both cut ({healed_a:?}, {healed_b:?}): ends {ends:?}, records 1..40 on no replica"
        );
        let (state, _) = crate::coord::Registry::partition_state(&*registry, "t", 0)
            .unwrap()
            .unwrap();
        assert_eq!(state.isr, ["b"], "the one that cut left the ISR first");
    }

    /// Review of issue 23 (the scrub): damage a replica alone in sync
    /// cannot heal stays pending, tried again every second; each walk of
    /// the partition once its interval passed found it again and queued
    /// it once more, so the list (and the registry reads of each retry)
    /// grew by one an interval for as long as no peer came: with
    /// `--scrub-interval 1s`, 3,600 entries and 7,200 registry reads a
    /// second after an hour.
    #[test]
    fn damage_that_cannot_heal_yet_is_pending_once() {
        let s = serving(&[ME], &["b", "c"]);
        rot(&s.sim, &s.p);
        let mut scrubber = crate::broker::scrub::Scrubber::default();
        for _ in 0..3 {
            assert!(scrubber.tick(&s.shared, std::time::Duration::ZERO));
        }
        assert_eq!(scrubber.pending.len(), 1);
        assert_eq!(s.p.lock().next_offset(), 40, "alone in sync: nothing cut");
    }

    /// A log made empty was whole when it was made, and every batch since
    /// was checked on its way in: its first walk comes an interval after
    /// its making. It used to come a second after, reading a new topic back
    /// at `--scrub-rate` while it filled (7 % of the CPU samples of
    /// `klog-bench produce --brokers 3 --replication-factor 3`).
    #[test]
    fn a_new_log_is_walked_an_interval_after_it_was_made() {
        use crate::broker::scrub::Scrubber;
        use std::time::Duration;
        let s = serving(&[ME], &["b", "c"]);
        rot(&s.sim, &s.p);
        let mut scrubber = Scrubber::default();
        assert!(scrubber.tick(&s.shared, Duration::from_secs(3600)));
        assert!(scrubber.pending.is_empty(), "walked a log made just now");
        assert!(scrubber.tick(&s.shared, Duration::ZERO));
        assert_eq!(
            scrubber.pending.len(),
            1,
            "walked once its interval ran out"
        );
    }

    /// Review of 9b71a21 (the `scrubbed` note): a walk that found damage
    /// left the note of the last whole pass in place, so a broker
    /// restarted before that note's interval ran out (with a longer
    /// `--scrub-interval`, or its clock stepped back) walked the damaged
    /// log no more: damage a replica could not heal yet, pending in memory
    /// only, was forgotten for up to a whole interval (a day by default)
    /// while the replica served. A walk that finds damage removes the note.
    #[test]
    fn a_walk_that_finds_damage_forgets_the_last_whole_pass() {
        use crate::broker::scrub::Scrubber;
        use std::time::Duration;
        let s = serving(&[ME], &["b", "c"]);
        let dir = s.shared.store.partition_dir("t", 0);
        let two_hours_ago = crate::clock::now_ms() - 2 * 3_600_000;
        scrub::write_scrubbed(&*s.sim, &dir, two_hours_ago).unwrap();
        rot(&s.sim, &s.p);
        let mut scrubber = Scrubber::default();
        assert!(scrubber.tick(&s.shared, Duration::from_secs(3600)));
        assert_eq!(scrubber.pending.len(), 1, "found, alone in sync");
        // Restarted, its pending damage forgotten, scrubbing once a day.
        let mut restarted = Scrubber::default();
        assert!(restarted.tick(&s.shared, Duration::from_secs(24 * 3600)));
        assert_eq!(restarted.pending.len(), 1, "the damaged log walked again");
    }

    /// Finding of the review of issue 23: a replica healed at open (cut
    /// and marked) was named in the ISR, and alive, from its registration
    /// until its manager's first round took it out; a replica that lost
    /// its unflushed tail (marked: it ends before its recovery point)
    /// likewise. After a host-wide power cut every broker restarts with
    /// the old ISR; a leader whose scrub found rot (pending, retried every
    /// second while its peers were down) saw the marked peer alive in the
    /// ISR in that window, left the ISR to it and cut: the peer, marked,
    /// may not lead, and the records past both cuts were on no replica.
    /// Now a marked replica leaves the ISR as its broker opens, before it
    /// registers ([`super::super::manager::leave_if_cut`]; the order is
    /// pinned by `tests/replica_sim.rs`): the leader then finds no whole
    /// peer, and cuts nothing.
    #[test]
    fn a_replica_does_not_cut_while_its_only_peer_in_sync_is_marked() {
        let registry = Arc::new(crate::coord::mem::MemRegistry::default());
        let a = serving_as(ME, &registry, &[ME, "b"], &[ME]);
        // b opens before it registers.
        let b = serving_as("b", &registry, &[ME, "b"], &[]);
        {
            // b was healed at open: cut at 1, marked, not out of the ISR yet.
            let mark = Refetch {
                cut_at: 1,
                left_isr: false,
            };
            let dir = b.shared.store.partition_dir("t", 0);
            refetch::write(&*b.sim, &dir, &mark).unwrap();
            *lock(&b.p.replica.as_ref().unwrap().refetch) = Some(mark);
            b.p.lock().truncate_to(1).unwrap();
        }
        super::super::manager::leave_if_cut(&b.shared);
        let state = crate::coord::Registry::partition_state(&*registry, "t", 0);
        assert_eq!(state.unwrap().unwrap().0.isr, [ME], "b left");
        let b_info = crate::coord::BrokerInfo {
            id: "b".into(),
            host: "127.0.0.1".into(),
            port: 1,
            pid: 1,
            topics: Default::default(),
            kafka: None,
            principal: None,
        };
        let _b_live = crate::coord::Registry::register_broker(&*registry, &b_info).unwrap();
        let (extent, damage) = rot(&a.sim, &a.p);
        let healed = a.shared.heal_running(&a.p, &extent, &damage).unwrap();
        assert_eq!(
            (healed, a.p.lock().next_offset()),
            (Healing::NoPeer, 40),
            "its only peer in sync is cut at 1 and marked: records 1..40 on no replica"
        );
    }

    /// Damage a scrub saw that a truncation since overtook is not acted
    /// on: the bytes under the walk may have been rewritten.
    #[test]
    fn damage_a_truncation_overtook_is_left_alone() {
        let s = serving(&[ME, "b"], &["b"]);
        let (extent, damage) = rot(&s.sim, &s.p);
        s.p.lock().truncate_to(30).unwrap();
        let healed = s.shared.heal_running(&s.p, &extent, &damage).unwrap();
        assert_eq!(healed, Healing::Gone);
        assert_eq!(s.p.lock().next_offset(), 30);
    }

    /// The power goes after every count of changes healing a serving
    /// replica makes; the broker starts again. Whenever its log lost
    /// records, it is marked cut at or below its end (it may not lead,
    /// and refetches); otherwise its log still holds the damage, for the
    /// next scrub to find.
    #[test]
    fn a_replica_cut_while_serving_is_marked_whenever_the_power_goes() {
        for n in 0.. {
            let s = serving(&[ME, "b"], &["b"]);
            let (extent, damage) = rot(&s.sim, &s.p);
            s.sim.cut_power_after(n);
            let done = s.shared.heal_running(&s.p, &extent, &damage).is_ok();
            s.sim.crash(&mut |_| 0);
            s.sim.restore_power();
            let log = open_as_broker(&s.shared);
            let dir = s.shared.store.partition_dir("t", 0);
            let mark = refetch::read(&*s.sim, &dir).unwrap();
            let end = log.next_offset();
            if end < 40 {
                assert!(
                    mark.is_some_and(|m| m.cut_at <= end),
                    "ends at {end} after {n} changes, marked {mark:?}"
                );
            } else {
                let extents = log.extents();
                let found = scrub::check(&extents[0], &mut |_| true).unwrap();
                assert_eq!(found.map(|d| d.offset), Some(1), "{n} changes");
            }
            if done {
                assert_eq!(end, 1, "healed");
                break;
            }
        }
    }

    /// Review of issue 23: a cut made while serving saved the damaged
    /// segment's bytes only up to where the walk had seen it end; what the
    /// active segment got since (appended after the walk, or gathered in
    /// memory) was cut and saved nowhere. Now all of it is saved.
    #[test]
    fn a_cut_in_the_active_segment_saves_what_came_after_the_walk() {
        let s = serving(&[ME, "b"], &["b"]);
        let active = s.p.lock().extents().pop().unwrap();
        let at = (SEGMENT_HEADER_BYTES + 120) as u64;
        let byte = s.sim.read(&active.path).unwrap()[at as usize];
        let file = crate::storage::fs::Vfs::open(&*s.sim, &active.path, false).unwrap();
        file.write_all_at(&[byte ^ 0x10], at).unwrap();
        let damage = scrub::check(&active, &mut |_| true)
            .unwrap()
            .expect("damage");
        for i in 0..3u8 {
            s.p.lock()
                .append(&mut batch_of(&[b'z' - i; 100]), 0)
                .unwrap();
        }
        s.p.lock().flush().unwrap();
        let before = s.sim.read(&active.path).unwrap();
        assert!(before.len() as u64 > active.end, "appended after the walk");
        let healed = s.shared.heal_running(&s.p, &active, &damage).unwrap();
        assert_eq!(healed, Healing::Cut);
        let saved = s.sim.read(&active.path.with_extension("log.corrupt"));
        assert_eq!(saved.as_deref(), Some(&before[damage.position as usize..]));
    }

    /// A leader counts on a peer as whole only by its fresh fetches: one
    /// the registry names alive and in sync, whose last fetch is older
    /// than [`FRESH`] (a killed broker's registration lingering on
    /// ZooKeeper, its restart maybe cut at open), or behind the high
    /// watermark, is no peer to cut for.
    #[test]
    fn a_leader_cuts_only_for_a_peer_whose_fetches_hold_the_watermark() {
        for (offset, age) in [(40, FRESH * 2), (39, std::time::Duration::ZERO)] {
            let s = serving(&[ME, "b"], &["b"]);
            if let Role::Leader(l) = &mut *s.p.replica.as_ref().unwrap().role() {
                let at = Instant::now().checked_sub(age).unwrap();
                l.progress
                    .insert("b".into(), Progress::fetched(None, offset, 40, at));
            }
            let (extent, damage) = rot(&s.sim, &s.p);
            let healed = s.shared.heal_running(&s.p, &extent, &damage).unwrap();
            assert_eq!(healed, Healing::NoPeer, "b at {offset}, {age:?} ago");
            assert_eq!(s.p.lock().next_offset(), 40, "nothing cut");
        }
    }

    /// A copy of the cut bytes that fails (EIO on its fsync here; a full
    /// disk alike) does not keep the damage in the log: the replica has
    /// left the ISR to a peer whose fetches hold the records, so it is
    /// marked and cut all the same, and nothing is left half-saved.
    #[test]
    fn a_copy_that_fails_does_not_keep_the_damage() {
        let s = serving(&[ME, "b"], &["b"]);
        let (extent, damage) = rot(&s.sim, &s.p);
        s.sim
            .fail_next_sync(|path| path.to_string_lossy().contains(".corrupt"));
        let healed = s.shared.heal_running(&s.p, &extent, &damage).unwrap();
        assert_eq!(healed, Healing::Cut);
        assert_eq!(s.p.lock().next_offset(), 1, "cut before the damaged batch");
        let dir = s.shared.store.partition_dir("t", 0);
        assert_eq!(
            refetch::read(&*s.sim, &dir).unwrap().map(|m| m.cut_at),
            Some(1)
        );
        assert_eq!(s.sim.read(&extent.path.with_extension("log.corrupt")), None);
    }
}
