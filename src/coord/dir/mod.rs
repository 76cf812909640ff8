//! The directory backend of the [`Registry`]: the paper's four ZooKeeper
//! registries as a directory of plain files, shared by the brokers and
//! consumers of one host.
//!
//! # Layout
//!
//! ```text
//! <registry>/brokers/<broker-id>@<inc>.lock          --> "klog-lease 1\n<session timeout ms>\n" (lock held by the live broker; mtime = lease; empty before replication: no lease)
//! <registry>/brokers/<broker-id>@<inc>.json          --> {"id", "host", "port", "pid", "topics": {"t": [0, 2]}}
//! <registry>/consumers/<group>/<member>@<inc>.lock   --> "klog-lease 1\n<session timeout ms>\n" (lock held by the live member; mtime = lease)
//! <registry>/consumers/<group>/<member>@<inc>.json   --> {"member", "pid", "topics": ["t"]}
//! <registry>/owners/<group>/<topic>-<p>/<generation> --> {"member", "generation", "session_timeout_ms"} (lock held by the owner; mtime = lease)
//! <registry>/offsets/<group>/<topic>-<p>/<generation>/offsets.log --> "klog-offsets v1\n", then 24-byte records (see `journal`)
//! <registry>/topics/<topic>.json                     --> {"topic": "t", "brokers": ["<broker-id>", ...], "replicas": [["<broker-id>", ...], ...]}
//! <registry>/topics/.lock                            --> empty (locked while a placement is replaced or removed)
//! <registry>/states/<topic>-<p>/<version>            --> {"leader": "<broker-id>", "leader_epoch": 3, "isr": ["<broker-id>", ...]}
//! <registry>/states/<topic>-<p>/<version>.<writer>   --> the state of <version>, taken by <writer>'s change (transient)
//! <registry>/states/<topic>-<p>/.<writer>.new        --> the state <writer> proposes (transient; locked by its writer)
//! ```
//!
//! `<inc>` is the registration's incarnation, unique to it (see
//! `entry`); `tests/golden/registry/` pins these files'
//! contents; a diff there is a format change and needs a version bump
//! (for offsets and leases, the first line).
//!
//! # Placement (a cluster of brokers)
//!
//! `topics/<topic>.json` is persistent. The broker that creates the topic
//! writes it once, atomically (a temporary file linked into place, which
//! fails if another got there first, and then the first one wins),
//! placing partition `p`'s `N` replicas on the `(p + i) mod n`-th of the
//! `n` live brokers sorted by id, for `i` in `0..N`, the first being its
//! preferred leader (`brokers[p]`): round-robin, so replicas are distinct,
//! leaders spread evenly and the same inputs always give the same
//! placement. `replicas` is written only when `N > 1`; a placement without
//! it (every placement before replication) has one replica per partition,
//! the broker in `brokers`. A broker's id is stable across
//! restarts (kept in `<data-dir>/broker-id`), so a restarted broker serves
//! its partitions again. A broker serves only the partitions placed on
//! it; clients read the placement to find each partition's broker.
//! CreatePartitions replaces a placement with one of more partitions (the
//! old ones' replicas unchanged), by compare-and-set: under the lock of
//! `topics/.lock`, only if the file still holds what the change read, by
//! renaming a fsynced temporary file over it.
//!
//! Names are topic names and ids of `[A-Za-z0-9._-]`, so no entry can name
//! a path outside the registry (and `@` never occurs in an id).
//!
//! # Partition states change by compare-and-set
//!
//! `states/<topic>-<p>/` holds the partition's state (leader, leader
//! epoch, ISR) in the file named by its version, created once (the whole
//! directory is renamed into place holding `0`: the first create wins).
//! A change from version `v` names its proposal `.<writer>.new`, fsynced,
//! then *takes* `v` by renaming `<v>` to `<v>.<writer>` (of the writers
//! that read `v`, exactly one can), and renames its proposal to `<v+1>`.
//! A version's name is created once and never again, so a writer stopped
//! for any time before it takes `v` finds it gone and writes nothing; a
//! writer stopped after taking it has decided the change, which readers
//! read from its proposal and the next writer finishes. No lock is held
//! across any of it (`state`).
//!
//! # Ephemeral entries are locks, plus a lease for silence
//!
//! Brokers, members and owners are *ephemeral*: an entry exists while
//! an exclusive lock on its file is held (an open-file-description lock,
//! see `storage::lock`, which others test without taking). The kernel
//! releases it when its process dies, `kill -9` included, so an entry
//! vanishes the instant its process does; and two processes can never
//! hold the same lock. A process that is stopped but alive (SIGSTOP,
//! stuck I/O) keeps its locks, so members and owners also hold a lease:
//! the lock file's mtime, renewed by the holder, judged by the others
//! against the session timeout the holder wrote there. The lease needs the
//! clocks of the processes to agree, which on one host they do. The price
//! of locks: a registry serves the processes of one host on a local file
//! system (file locks over NFS are not reliable).
//!
//! Brokers' and members' entries are per incarnation, and a stale one is
//! removed only under the lock of the very file removed
//! (`entry`); owners are claims by generation, taken
//! without any shared lock (`owner`).
//!
//! # Offsets are persistent
//!
//! A committed offset (the next offset the group will read) is written to a
//! temporary file and fsynced, renamed over the old one once the commit's
//! fence holds, and the directory fsynced. It lives in a directory named by
//! the claim generation that may write it, which each new claim renames to
//! its own generation: a late write of an earlier owner then names a
//! directory that is gone, so no lock is held across a commit, and a member
//! stuck inside one stops nobody (`offset`). A commit never
//! lowers the stored offset. A file that does not parse is an error that
//! names it, never a silent restart from elsewhere.

mod entry;
mod journal;
#[cfg(test)]
mod journal_tests;
mod offset;
mod owner;
#[cfg(test)]
pub(crate) mod stall;
mod state;
mod sync;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a configuration change waits for another's lock.
const CONFIG_LOCK_WAIT: Duration = Duration::from_secs(10);

use crate::coord::registry::{
    check_name, encode_state, placed_partition, to_json, BrokerInfo, Ephemeral, Lease, MemberInfo,
    Owner, PartitionState, Placement, Registry,
};
use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{RealFs, Vfs};
use crate::storage::store::{parse_partition_dir, partition_dir_name};

/// The member named in the claim an offset reset takes for its write.
const RESET_MEMBER: &str = "offset-reset";
/// The lease of that claim (held for a few system calls).
const RESET_LEASE: Duration = Duration::from_secs(10);

/// A registry directory.
#[derive(Debug, Clone)]
pub struct DirRegistry {
    dir: PathBuf,
    /// Opened only to look (`klog-dump --registry`): nothing is created and
    /// stale entries are skipped, not removed.
    read_only: bool,
    /// The lease of a broker's registration: a broker that has not renewed
    /// it for this long is not listed as live (it may be stopped).
    broker_lease: Duration,
    /// Fsyncs the offsets journals commits appended to.
    syncer: Arc<sync::Syncer>,
}

/// Writes `path` atomically.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("entry");
    crate::storage::fs::write_atomic(&RealFs, parent, name, bytes)
}

impl DirRegistry {
    /// Opens (creating) the registry in `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<DirRegistry> {
        let dir = dir.into();
        for sub in [
            "brokers",
            "consumers",
            "owners",
            "offsets",
            "topics",
            "states",
        ] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).ctx("create", &d)?;
        }
        Ok(DirRegistry {
            dir,
            read_only: false,
            broker_lease: crate::coord::SESSION_TIMEOUT,
            syncer: Arc::default(),
        })
    }

    /// The same, whose brokers' registrations last `lease` unrenewed.
    pub fn with_broker_lease(self, lease: Duration) -> DirRegistry {
        DirRegistry {
            broker_lease: lease,
            ..self
        }
    }

    /// Refuses a change to a registry opened only to look at it.
    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::Config(format!(
                "the registry {} was opened read-only",
                self.dir.display()
            )));
        }
        Ok(())
    }

    /// Opens the registry in `dir` only to look at it: creates nothing,
    /// removes nothing (a stale entry is skipped), and writes nothing.
    pub fn open_read_only(dir: impl Into<PathBuf>) -> DirRegistry {
        DirRegistry {
            dir: dir.into(),
            read_only: true,
            broker_lease: crate::coord::SESSION_TIMEOUT,
            syncer: Arc::default(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The owners directory of a partition.
    fn owner_dir(&self, group: &str, topic: &str, partition: u32) -> PathBuf {
        self.dir
            .join("owners")
            .join(group)
            .join(partition_dir_name(topic, partition))
    }

    /// Stores `offset` for the partition whose offsets directory is
    /// `offsets`, fenced by `claim`.
    fn write_offset(&self, claim: &owner::Claim, offsets: &Path, offset: u64) -> Result<()> {
        let fence = || claim.check_and_renew();
        if offset::write(offsets, claim.generation(), offset, fence, &self.syncer)? {
            return Ok(());
        }
        Err(claim.taken_over(offset::top(offsets).ok().flatten()))
    }

    /// Takes `topic [partition]`'s claim in `group` for a reset or a
    /// deletion of its offset, as a member would (a claim and the change
    /// never interleave, and a member stopped before it can no longer
    /// write), and moves the offset to it: the claim and the offsets'
    /// directory. [`Error::GroupActive`] while a member owns it.
    fn claim_for_reset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> Result<(owner::Claim, PathBuf)> {
        self.writable()?;
        check_name("group", group)?;
        check_name("topic", topic)?;
        let dir = self.owner_dir(group, topic, partition);

        let busy = |o: Option<Owner>| Error::GroupActive {
            group: group.to_string(),
            members: match o {
                Some(o) => format!("member {} owns {topic} [{partition}]", o.member),
                None => format!("a member claimed {topic} [{partition}] meanwhile"),
            },
        };
        if let Some(o) = owner::current(&dir) {
            return Err(busy(Some(o)));
        }
        // The reset takes the partition's claim for its write, as a member
        // would: a claim and the reset never interleave, and a member
        // stopped before the reset can no longer write.
        let what = format!("the offset reset of {topic} [{partition}] in group {group}");
        let Some(claim) = owner::claim(&dir, what, RESET_MEMBER, RESET_LEASE, false)? else {
            return Err(busy(owner::current(&dir)));
        };
        let offsets = self.offset_path(group, topic, partition);
        if !offset::adopt(&offsets, claim.generation(), true)? {
            return Err(busy(owner::current(&dir)));
        }
        Ok((claim, offsets))
    }

    /// The offsets directory of a partition.
    fn offset_path(&self, group: &str, topic: &str, partition: u32) -> PathBuf {
        self.dir
            .join("offsets")
            .join(group)
            .join(partition_dir_name(topic, partition))
    }

    fn placement_path(&self, topic: &str) -> PathBuf {
        self.dir.join("topics").join(format!("{topic}.json"))
    }

    /// The state directory of a partition.
    fn state_dir(&self, topic: &str, partition: u32) -> PathBuf {
        self.dir
            .join("states")
            .join(partition_dir_name(topic, partition))
    }
}

/// Makes a registry directory's entries durable.
/// Takes the lock file at `path` (waiting up to [`CONFIG_LOCK_WAIT`]):
/// one change at a time across processes, released when its file
/// closes, however the holder ends.
fn hold(path: &Path) -> Result<crate::storage::lock::FileLock> {
    let deadline = std::time::Instant::now() + CONFIG_LOCK_WAIT;
    loop {
        if let Some(held) = crate::storage::lock::try_lock(path)? {
            return Ok(held);
        }
        if std::time::Instant::now() >= deadline {
            return Err(Error::Config(format!(
                "{} is held by another change for over {} s",
                path.display(),
                CONFIG_LOCK_WAIT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The cluster id in `path`, if there is one; one that is not an id is
/// an error naming the file.
fn read_cluster_id(path: &Path) -> Result<Option<String>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("read", path),
    };
    let id = String::from_utf8_lossy(&bytes).trim().to_string();
    if !crate::coord::cluster_id::valid(&id) {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            position: 0,
            reason: format!(
                "not a cluster id (1 to 64 ASCII letters, digits, '-' and '_'): {}",
                crate::coord::cluster_id::DAMAGED_HINT
            ),
        });
    }
    Ok(Some(id))
}

fn sync_dir(dir: &Path) -> Result<()> {
    RealFs.sync_dir(dir).ctx("fsync directory", dir)
}

impl Registry for DirRegistry {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    /// In `cluster-id`, made under a temporary name and linked to its own,
    /// which never replaces: two processes making one at once agree on
    /// the first.
    fn cluster_id(&self) -> Result<String> {
        let path = self.dir.join("cluster-id");
        if let Some(id) = read_cluster_id(&path)? {
            return Ok(id);
        }
        self.writable()?;
        let tmp = self
            .dir
            .join(format!(".cluster-id.{}", entry::incarnation()));
        let made = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            std::io::Write::write_all(
                &mut file,
                format!("{}\n", crate::coord::cluster_id::new()).as_bytes(),
            )?;
            file.sync_all()?;
            match std::fs::hard_link(&tmp, &path) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
                _ => Ok(()),
            }
        })();
        let _ = std::fs::remove_file(&tmp);
        made.ctx("make", &path)?;
        sync_dir(&self.dir)?;
        read_cluster_id(&path)?.ok_or_else(|| Error::Vanished {
            what: path.display().to_string(),
        })
    }

    fn register_broker(&self, info: &BrokerInfo) -> Result<Ephemeral> {
        self.writable()?;
        check_name("broker", &info.id)?;
        let what = format!("broker {}", info.id);
        entry::register(
            &self.dir.join("brokers"),
            &info.id,
            &to_json(info)?,
            what,
            Some(self.broker_lease),
        )
    }

    fn brokers(&self) -> Result<Vec<BrokerInfo>> {
        let live = entry::live(&self.dir.join("brokers"), self.read_only);
        // A broker silent past its lease (stopped) is not live: its
        // partitions' followers elect another leader.
        let live = live
            .into_iter()
            .filter(|(_, lease): &(BrokerInfo, Lease)| !lease.expired());
        Ok(live.map(|(b, _)| b).collect())
    }

    fn join(&self, group: &str, info: &MemberInfo, session_timeout: Duration) -> Result<Ephemeral> {
        self.writable()?;
        check_name("group", group)?;
        check_name("member", &info.member)?;
        entry::register(
            &self.dir.join("consumers").join(group),
            &info.member,
            &to_json(info)?,
            format!("member {} of group {group}", info.member),
            Some(session_timeout),
        )
    }

    fn sessions(&self, group: &str) -> Result<Vec<(MemberInfo, Lease)>> {
        check_name("group", group)?;
        let mut m: Vec<(MemberInfo, Lease)> =
            entry::live(&self.dir.join("consumers").join(group), self.read_only);
        m.sort_by(|a, b| a.0.member.cmp(&b.0.member));
        Ok(m)
    }

    fn groups(&self) -> Result<Vec<String>> {
        let mut groups = std::collections::BTreeSet::new();
        for sub in ["consumers", "offsets", "owners"] {
            if let Ok(entries) = std::fs::read_dir(self.dir.join(sub)) {
                groups.extend(entries.filter_map(|e| e.ok()?.file_name().into_string().ok()));
            }
        }
        Ok(groups
            .into_iter()
            .filter(|g| check_name("group", g).is_ok())
            .collect())
    }

    fn claim(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        member: &str,
        session_timeout: Duration,
    ) -> Result<Option<Ephemeral>> {
        self.writable()?;
        check_name("group", group)?;
        check_name("topic", topic)?;
        let what = format!("the claim of {topic} [{partition}] in group {group}");
        let dir = self.owner_dir(group, topic, partition);
        let Some(claim) = owner::claim(&dir, what, member, session_timeout, true)? else {
            return Ok(None);
        };
        // Superseded before it could move the offsets: not a claim.
        if !offset::adopt(
            &self.offset_path(group, topic, partition),
            claim.generation(),
            false,
        )? {
            return Ok(None);
        }
        Ok(Some(Ephemeral::new(claim)))
    }

    fn owner(&self, group: &str, topic: &str, partition: u32) -> Option<Owner> {
        owner::current(&self.owner_dir(group, topic, partition))
    }

    fn committed(&self, group: &str, topic: &str, partition: u32) -> Result<Option<u64>> {
        check_name("group", group)?;
        offset::read(&self.offset_path(group, topic, partition))
    }

    fn store_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        owner: &Ephemeral,
    ) -> Result<()> {
        self.writable()?;
        check_name("group", group)?;
        let claim = owner::claim_of(owner, &self.owner_dir(group, topic, partition))?;
        self.write_offset(claim, &self.offset_path(group, topic, partition), offset)
    }

    fn reset_offset(&self, group: &str, topic: &str, partition: u32, offset: u64) -> Result<()> {
        let (claim, offsets) = self.claim_for_reset(group, topic, partition)?;
        self.write_offset(&claim, &offsets, offset)?;
        // An operator's reset is durable when it returns.
        let journal = offsets
            .join(claim.generation().to_string())
            .join(journal::JOURNAL);
        self.syncer.sync_one(&journal)
    }

    fn delete_offset(&self, group: &str, topic: &str, partition: u32) -> Result<bool> {
        let (claim, offsets) = self.claim_for_reset(group, topic, partition)?;
        let removed = offset::remove(&offsets, claim.generation())?;
        drop(claim);
        Ok(removed)
    }

    fn offsets(&self, group: &str) -> Result<Vec<(String, u32, Result<u64>)>> {
        check_name("group", group)?;
        let group_dir = self.dir.join("offsets").join(group);
        let Ok(entries) = std::fs::read_dir(&group_dir) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let names = entries.filter_map(|e| e.ok()?.file_name().into_string().ok());
        for name in names.filter(|n| !n.starts_with('.')) {
            if let Some((topic, p)) = parse_partition_dir(&name) {
                // Claimed, and nothing committed yet: no offset.
                match self.committed(group, &topic, p) {
                    Ok(None) => {}
                    offset => out.push((topic, p, offset.map(Option::unwrap_or_default))),
                }
            }
        }
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        Ok(out)
    }

    fn placement(&self, topic: &str) -> Result<Option<Placement>> {
        check_name("topic", topic)?;
        let path = self.placement_path(topic);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let placement = crate::coord::registry::parse_placement(path, topic, &bytes)?;
        Ok(Some(placement))
    }

    fn create_placement(&self, placement: &Placement) -> Result<bool> {
        self.writable()?;
        let topic = &placement.topic;
        let path = self.placement_path(topic);
        let topics_dir = path.parent().expect("topics dir");
        let tmp = topics_dir.join(format!(".{topic}.{}.tmp", std::process::id()));
        let bytes = to_json(placement)?;
        {
            let mut f = File::create(&tmp).ctx("create", &tmp)?;
            f.write_all(&bytes).ctx("write", &tmp)?;
            f.sync_all().ctx("fsync", &tmp)?;
        }
        // Linking fails if the name exists: the first placement wins.
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                RealFs
                    .sync_dir(topics_dir)
                    .ctx("fsync directory", topics_dir)?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(Error::io("link", &path, e)),
        }
    }

    fn replace_placement(&self, old: &Placement, new: &Placement) -> Result<bool> {
        self.writable()?;
        let topic = &old.topic;
        if new.topic != *topic {
            return Ok(false);
        }
        let path = self.placement_path(topic);
        let topics_dir = path.parent().expect("topics dir");
        // Changes and removals of placements, one at a time.
        let _held = hold(&topics_dir.join(".lock"))?;
        if self.placement(topic)?.as_ref() != Some(old) {
            return Ok(false);
        }
        let tmp = topics_dir.join(format!(".{topic}.{}.tmp", std::process::id()));
        let bytes = to_json(new)?;
        {
            let mut f = File::create(&tmp).ctx("create", &tmp)?;
            f.write_all(&bytes).ctx("write", &tmp)?;
            f.sync_all().ctx("fsync", &tmp)?;
        }
        std::fs::rename(&tmp, &path).ctx("rename", &path)?;
        sync_dir(topics_dir)?;
        Ok(true)
    }

    fn config(&self, kind: &str, name: &str) -> Result<Option<Vec<u8>>> {
        check_name("configuration entry", name)?;
        let path = self
            .dir
            .join("config")
            .join(kind)
            .join(format!("{name}.json"));
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("read", &path, e)),
        }
    }

    fn set_config(&self, kind: &str, name: &str, bytes: &[u8]) -> Result<()> {
        self.writable()?;
        check_name("configuration entry", name)?;
        let dir = self.dir.join("config").join(kind);
        std::fs::create_dir_all(&dir).ctx("create", &dir)?;
        let path = dir.join(format!("{name}.json"));
        // Short and unique: a name near the length bound fits, and two
        // writers of one process never share a file.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{}.{write}.tmp", std::process::id()));
        {
            let mut f = File::create(&tmp).ctx("create", &tmp)?;
            f.write_all(bytes).ctx("write", &tmp)?;
            f.sync_all().ctx("fsync", &tmp)?;
        }
        std::fs::rename(&tmp, &path).ctx("rename", &path)?;
        RealFs.sync_dir(&dir).ctx("fsync directory", &dir)
    }

    fn update_config(
        &self,
        kind: &str,
        name: &str,
        change: crate::coord::registry::ConfigChange<'_>,
    ) -> Result<()> {
        self.writable()?;
        check_name("configuration entry", name)?;
        let dir = self.dir.join("config").join(kind);
        std::fs::create_dir_all(&dir).ctx("create", &dir)?;
        // One change of a kind at a time, across processes.
        let _held = hold(&dir.join(".lock"))?;
        let stored = self.config(kind, name)?;
        match change(stored.as_deref())? {
            Some(bytes) => self.set_config(kind, name, &bytes),
            None => self.remove_config(kind, name).map(drop),
        }
    }

    fn remove_config(&self, kind: &str, name: &str) -> Result<bool> {
        self.writable()?;
        check_name("configuration entry", name)?;
        let dir = self.dir.join("config").join(kind);
        let path = dir.join(format!("{name}.json"));
        match std::fs::remove_file(&path) {
            Ok(()) => RealFs
                .sync_dir(&dir)
                .ctx("fsync directory", &dir)
                .map(|()| true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("remove", &path, e)),
        }
    }

    fn configs(&self, kind: &str) -> Result<Vec<String>> {
        let dir = self.dir.join("config").join(kind);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("list", &dir, e)),
        };
        let names = entries.filter_map(|e| e.ok()?.file_name().into_string().ok());
        let mut out: Vec<String> = names
            .filter_map(|n| Some(n.strip_suffix(".json")?.to_string()))
            .filter(|n| check_name("configuration entry", n).is_ok())
            .collect();
        out.sort();
        Ok(out)
    }

    fn topics(&self) -> Result<Vec<String>> {
        let dir = self.dir.join("topics");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("list", &dir, e)),
        };
        let names = entries.filter_map(|e| e.ok()?.file_name().into_string().ok());
        let mut topics: Vec<String> = names
            .filter_map(|n| Some(n.strip_suffix(".json")?.to_string()))
            .filter(|t| check_name("topic", t).is_ok())
            .collect();
        topics.sort();
        Ok(topics)
    }

    fn remove_topic(&self, topic: &str) -> Result<()> {
        self.writable()?;
        check_name("topic", topic)?;
        let path = self.placement_path(topic);
        let topics_dir = self.dir.join("topics");
        if std::fs::metadata(&path).is_ok() {
            // Not while a change of it is being written.
            let _held = hold(&topics_dir.join(".lock"))?;
            match std::fs::remove_file(&path) {
                Ok(()) => sync_dir(&topics_dir)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove", &path, e)),
            }
        }
        let states = self.dir.join("states");
        let entries = match std::fs::read_dir(&states) {
            Ok(entries) => entries.filter_map(|e| e.ok()).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io("list", &states, e)),
        };
        for entry in entries {
            let name = entry.file_name().into_string().unwrap_or_default();
            if parse_partition_dir(&name).is_some_and(|(t, _)| t == topic) {
                let dir = entry.path();
                std::fs::remove_dir_all(&dir).ctx("remove", &dir)?;
                sync_dir(&states)?;
            }
        }
        self.remove_config(crate::coord::topic_config::KIND, topic)?;
        Ok(())
    }

    fn partition_state(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<Option<(PartitionState, u64)>> {
        check_name("topic", topic)?;
        state::read(&self.state_dir(topic, partition))
    }

    fn create_partition_state(
        &self,
        topic: &str,
        partition: u32,
        state: &PartitionState,
    ) -> Result<bool> {
        self.writable()?;
        check_name("topic", topic)?;
        let bytes = encode_state(state)?;
        placed_partition(self, topic, partition)?;
        let name = partition_dir_name(topic, partition);
        state::create(&self.dir.join("states"), &name, &bytes)
    }

    fn set_partition_state(
        &self,
        topic: &str,
        partition: u32,
        state: &PartitionState,
        expected_version: u64,
    ) -> Result<bool> {
        self.writable()?;
        check_name("topic", topic)?;
        let bytes = encode_state(state)?;
        let what = format!("partition {partition} of {topic:?}");
        state::set(
            &self.state_dir(topic, partition),
            &bytes,
            expected_version,
            &what,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The session timeout of the tests' entries.
    const T: std::time::Duration = std::time::Duration::from_secs(10);

    #[test]
    fn a_registry_opened_to_look_refuses_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open_read_only(dir.path().join("reg"));
        let info = MemberInfo {
            member: "m".into(),
            pid: 1,
            topics: vec!["t".into()],
            coordinator: None,
        };
        assert!(reg.join("g", &info, T).is_err());
        assert!(reg.claim("g", "t", 0, "m", T).is_err());
        assert!(reg.brokers().unwrap().is_empty());
        assert!(!dir.path().join("reg").exists(), "nothing was created");
    }

    /// Made once by whichever process asks first, the same for every
    /// other; a damaged one is an error naming its file.
    #[test]
    fn the_cluster_id_is_made_once_and_agreed_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reg");
        let ids: Vec<String> = std::thread::scope(|s| {
            let asks: Vec<_> = (0..4)
                .map(|_| s.spawn(|| DirRegistry::open(&path).unwrap().cluster_id().unwrap()))
                .collect();
            asks.into_iter().map(|a| a.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
        let reader = DirRegistry::open_read_only(&path);
        assert_eq!(reader.cluster_id().unwrap(), ids[0]);
        let other = DirRegistry::open(dir.path().join("other")).unwrap();
        assert_ne!(other.cluster_id().unwrap(), ids[0]);
        std::fs::write(path.join("cluster-id"), b"a/b\n").unwrap();
        let damaged = DirRegistry::open(&path).unwrap().cluster_id().unwrap_err();
        assert!(damaged.to_string().contains("cluster-id"), "{damaged}");
        let none = DirRegistry::open_read_only(dir.path().join("none"));
        assert!(
            none.cluster_id().is_err(),
            "a read-only registry makes none"
        );
    }

    #[test]
    fn a_member_joining_while_others_list_the_group_is_never_taken_for_dead() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        /// Stops the reader however the test ends (a failed assertion too).
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        std::thread::scope(|s| {
            // Another member's view of the group, read over and over: it
            // removes entries whose lock is free.
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = reg.members("g");
                }
            });
            let _stop = Stop(&stop);
            for i in 0..300 {
                let info = MemberInfo {
                    member: format!("m{i}"),
                    pid: 1,
                    topics: vec!["t".into()],
                    coordinator: None,
                };
                let entry = reg.join("g", &info, T).unwrap();
                let names: Vec<_> = reg
                    .members("g")
                    .unwrap()
                    .into_iter()
                    .map(|m| m.member)
                    .collect();
                assert_eq!(
                    names,
                    std::slice::from_ref(&info.member),
                    "joined member {i} vanished"
                );
                drop(entry);
            }
        });
    }

    #[test]
    fn ownership_is_exclusive_and_released_with_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let a = reg.claim("g", "t", 0, "a", T).unwrap().unwrap();
        assert!(reg.claim("g", "t", 0, "b", T).unwrap().is_none());
        assert_eq!(
            reg.owner("g", "t", 0).map(|o| o.member).as_deref(),
            Some("a")
        );
        reg.commit("g", "t", 0, 10, &a).unwrap();
        reg.commit("g", "t", 0, 5, &a).unwrap();
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(10), "never lower");
        drop(a);
        assert_eq!(reg.owner("g", "t", 0), None);
        assert!(reg.claim("g", "t", 0, "b", T).unwrap().is_some());
    }

    #[test]
    fn members_vanish_with_their_entries_and_garbage_is_no_panic() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let info = |m: &str| MemberInfo {
            member: m.into(),
            pid: 1,
            topics: vec!["t".into()],
            coordinator: None,
        };
        let b = reg.join("g", &info("b"), T).unwrap();
        let a = reg.join("g", &info("a"), T).unwrap();
        let names: Vec<_> = reg
            .members("g")
            .unwrap()
            .into_iter()
            .map(|m| m.member)
            .collect();
        assert_eq!(names, ["a", "b"]);
        drop(a);
        assert_eq!(reg.members("g").unwrap().len(), 1);
        // A stale entry (no lock held) and a garbage one are not members.
        let g = dir.path().join("consumers/g");
        std::fs::write(g.join("ghost.json"), b"{}").unwrap();
        std::fs::write(g.join("ghost.lock"), b"").unwrap();
        b.update(&"not a member").unwrap();
        assert!(reg.members("g").unwrap().is_empty());
        assert!(!g.join("ghost.json").exists(), "stale entries are removed");
        // Offsets that do not parse are errors naming the file.
        let off = dir.path().join("offsets/g/t-3/0");
        std::fs::create_dir_all(&off).unwrap();
        for bad in [
            &b""[..],
            b"klog-offset 1\n",
            b"klog-offset 1\nx\n",
            b"{\"json\": 1}",
        ] {
            std::fs::write(off.join("offset"), bad).unwrap();
            let err = reg.committed("g", "t", 3).unwrap_err().to_string();
            assert!(err.contains("t-3/0/offset"), "{err}");
        }
        // An offset file of the layout before claim generations, too.
        std::fs::write(dir.path().join("offsets/g/t-4"), b"klog-offset 1\n5\n").unwrap();
        let err = reg.committed("g", "t", 4).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("offsets/g/t-4"), "{err}");
    }

    fn broker_info(id: &str, port: u16) -> BrokerInfo {
        BrokerInfo {
            kafka: None,
            id: id.into(),
            host: "127.0.0.1".into(),
            port,
            pid: 1,
            topics: Default::default(),
            principal: None,
        }
    }

    /// Issue 10 item 4: a second registrant of a live entry's id (a second
    /// broker on the same data directory) neither replaces the live entry
    /// nor, when it leaves, erases it.
    #[test]
    fn a_second_registrant_of_a_live_id_is_refused_and_erases_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let live = reg.register_broker(&broker_info("b1", 1)).unwrap();
        let second = reg.register_broker(&broker_info("b1", 2));
        assert!(matches!(second, Err(Error::InUse { .. })), "{second:?}");
        drop(second);
        let ports: Vec<u16> = reg.brokers().unwrap().iter().map(|b| b.port).collect();
        assert_eq!(ports, [1], "the live entry stays, unchanged");
        drop(live);
        assert!(reg.brokers().unwrap().is_empty());
        // Its id is free again.
        let again = reg.register_broker(&broker_info("b1", 3)).unwrap();
        let ports: Vec<u16> = reg.brokers().unwrap().iter().map(|b| b.port).collect();
        assert_eq!(ports, [3]);
        drop(again);
    }

    /// A dead incarnation's entry being removed by another process's
    /// scan (which holds its lock while it removes it) does not hold the
    /// id: the broker restarting then registers (it was refused "in use",
    /// tests/replication.rs all_replicas_die_in_a_directory in CI).
    #[test]
    fn an_entry_being_removed_as_stale_does_not_refuse_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let brokers = dir.path().join("brokers");
        std::fs::create_dir_all(&brokers).unwrap();
        let lock = brokers.join("b1@1-2-0.lock");
        let json = brokers.join("b1@1-2-0.json");
        std::fs::write(&lock, b"").unwrap();
        std::fs::write(&json, serde_json::to_vec(&broker_info("b1", 1)).unwrap()).unwrap();
        // The cleaner: it holds the stale lock a moment, then removes it.
        let held = crate::storage::lock::try_lock_existing(&lock)
            .unwrap()
            .unwrap();
        let cleaner = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            std::fs::remove_file(&json).unwrap();
            std::fs::remove_file(&lock).unwrap();
            drop(held);
        });
        let registered = reg.register_broker(&broker_info("b1", 2));
        cleaner.join().unwrap();
        let live = registered.expect("the id is free once the stale entry is gone");
        let ports: Vec<u16> = reg.brokers().unwrap().iter().map(|b| b.port).collect();
        assert_eq!(ports, [2]);
        drop(live);
    }

    /// Makes the lease in `path` look last renewed `ago` ago, as if its
    /// holder had been stopped that long.
    fn silence(path: &Path, ago: Duration) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(std::time::SystemTime::now() - ago)
            .unwrap();
    }

    /// Issue 10: a silent owner's partition is taken over with a new
    /// generation, and its late commits are refused.
    #[test]
    fn a_silent_owner_is_taken_over_and_its_stale_commits_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let short = Duration::from_millis(500);
        let a = reg.claim("g", "t", 0, "a", short).unwrap().unwrap();
        assert_eq!(a.generation(), 1);
        reg.commit("g", "t", 0, 10, &a).unwrap();
        assert!(
            reg.claim("g", "t", 0, "b", T).unwrap().is_none(),
            "a is alive"
        );
        // a falls silent past its timeout: b takes over.
        silence(&dir.path().join("owners/g/t-0/1"), Duration::from_secs(2));
        let owner = reg.owner("g", "t", 0).unwrap();
        assert_eq!((owner.member.as_str(), owner.generation), ("a", 1));
        assert!(owner.lease.expired(), "{owner:?}");
        let b = reg.claim("g", "t", 0, "b", T).unwrap().unwrap();
        assert_eq!(b.generation(), 2);
        let owner = reg.owner("g", "t", 0).unwrap();
        assert_eq!((owner.member.as_str(), owner.generation), ("b", 2));
        // a wakes up: its commit, even of a higher offset, is refused.
        let err = reg.commit("g", "t", 0, 99, &a).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Fenced {
                    generation: 1,
                    current: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(matches!(a.renew(), Err(Error::Fenced { .. })));
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(10));
        reg.commit("g", "t", 0, 20, &b).unwrap();
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(20));
        // a leaves: its superseded claim goes; b's stays.
        drop(a);
        assert!(!dir.path().join("owners/g/t-0/1").exists());
        drop(b);
        assert_eq!(reg.owner("g", "t", 0), None);
        // The next claim's generation is higher still.
        let c = reg.claim("g", "t", 0, "c", T).unwrap().unwrap();
        assert_eq!(c.generation(), 3);
        let names: Vec<_> = std::fs::read_dir(dir.path().join("owners/g/t-0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(names, ["3"], "history is cleaned up");
        let offsets: Vec<_> = std::fs::read_dir(dir.path().join("offsets/g/t-0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(offsets, ["3"], "the offsets moved with each claim");
    }

    /// Issue 10 item 10: a member stuck inside a commit, past its fence
    /// and before its write, neither keeps its partitions past its lease
    /// nor stops the others claiming and committing; when it runs again,
    /// its write, of a higher offset than the new owner's, is refused.
    #[test]
    fn a_member_stuck_inside_a_commit_is_taken_over_and_its_late_write_refused() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let short = Duration::from_millis(500);
        let a0 = reg.claim("g", "t", 0, "a", short).unwrap().unwrap();
        let a1 = reg.claim("g", "t", 1, "a", short).unwrap().unwrap();
        reg.commit("g", "t", 0, 10, &a0).unwrap();
        let stalled = stall::next_commit(dir.path());
        std::thread::scope(|s| {
            let r = &reg;
            let late = s.spawn(move || r.commit("g", "t", 0, 99, &a0));
            stalled.wait_reached();
            // a stays stuck past its session timeout.
            for p in 0..2 {
                silence(&dir.path().join(format!("owners/g/t-{p}/1")), 2 * short);
            }
            // b takes both partitions over and commits, a still stuck.
            let b0 = reg.claim("g", "t", 0, "b", T).unwrap();
            let b0 = b0.expect("a stuck commit must not keep its partition");
            let b1 = reg.claim("g", "t", 1, "b", T).unwrap().unwrap();
            assert_eq!((b0.generation(), b1.generation()), (2, 2));
            reg.commit("g", "t", 0, 20, &b0).unwrap();
            reg.commit("g", "t", 1, 7, &b1).unwrap();
            assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(20));
            // a runs again: its write, higher, is refused and not seen.
            stalled.release();
            let err = late.join().unwrap().unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::Fenced {
                        generation: 1,
                        current: 2,
                        ..
                    }
                ),
                "{err}"
            );
            assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(20));
            reg.commit("g", "t", 0, 21, &b0).unwrap();
            assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(21));
            assert!(matches!(a1.renew(), Err(Error::Fenced { .. })));
        });
    }

    #[test]
    fn a_commit_is_fsynced_soon_after_and_a_reset_before_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let a = reg.claim("g", "t", 0, "a", T).unwrap().unwrap();
        let journal = dir.path().join("offsets/g/t-0/1/offsets.log");
        reg.commit("g", "t", 0, 5, &a).unwrap();
        assert!(reg.syncer.is_dirty(&journal));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while reg.syncer.is_dirty(&journal) {
            assert!(std::time::Instant::now() < deadline, "never fsynced");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(a);
        reg.reset_offset("g", "t", 0, 2).unwrap();
        let journal = dir.path().join("offsets/g/t-0/2/offsets.log");
        assert!(!reg.syncer.is_dirty(&journal), "a reset is durable at once");
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(2));
    }

    #[test]
    fn an_owner_whose_lease_ran_out_cannot_commit_even_unclaimed() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let a = reg
            .claim("g", "t", 0, "a", Duration::from_millis(500))
            .unwrap()
            .unwrap();
        silence(&dir.path().join("owners/g/t-0/1"), Duration::from_secs(2));
        let err = reg.commit("g", "t", 0, 5, &a).unwrap_err();
        assert!(matches!(err, Error::Expired { .. }), "{err}");
        assert_eq!(reg.committed("g", "t", 0).unwrap(), None);
        let left: Vec<_> = std::fs::read_dir(dir.path().join("offsets/g/t-0/1"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["offsets.log"], "no temporary file stays");
    }

    #[test]
    fn a_silent_member_is_not_in_the_group_and_learns_it_when_it_renews() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let info = |m: &str| MemberInfo {
            member: m.into(),
            pid: 1,
            topics: vec!["t".into()],
            coordinator: None,
        };
        let a = reg
            .join("g", &info("a"), Duration::from_millis(500))
            .unwrap();
        let _b = reg.join("g", &info("b"), T).unwrap();
        a.renew().unwrap();
        let lock = std::fs::read_dir(dir.path().join("consumers/g"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_str().unwrap().contains("/a@") && p.extension().unwrap() == "lock")
            .unwrap();
        silence(&lock, Duration::from_secs(2));
        let names: Vec<_> = reg
            .members("g")
            .unwrap()
            .into_iter()
            .map(|m| m.member)
            .collect();
        assert_eq!(names, ["b"]);
        let sessions = reg.sessions("g").unwrap();
        assert_eq!(sessions.len(), 2, "its process lives");
        assert!(sessions[0].1.expired() && !sessions[1].1.expired());
        assert!(matches!(a.renew(), Err(Error::Expired { .. })));
        // Joining again under the same id, once the old entry is left.
        assert!(matches!(
            reg.join("g", &info("a"), T),
            Err(Error::InUse { .. })
        ));
        drop(a);
        let _a = reg.join("g", &info("a"), T).unwrap();
        assert_eq!(reg.members("g").unwrap().len(), 2);
    }

    #[test]
    fn an_offset_is_reset_only_while_no_live_member_owns_the_partition() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let a = reg.claim("g", "t", 0, "a", T).unwrap().unwrap();
        reg.commit("g", "t", 0, 10, &a).unwrap();
        let err = reg.reset_offset("g", "t", 0, 3).unwrap_err();
        assert!(matches!(err, Error::GroupActive { .. }), "{err}");
        assert!(err.to_string().contains("member a owns t [0]"), "{err}");
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(10));
        drop(a);
        reg.reset_offset("g", "t", 0, 3).unwrap();
        assert_eq!(
            reg.committed("g", "t", 0).unwrap(),
            Some(3),
            "lower is allowed"
        );
        assert!(DirRegistry::open_read_only(dir.path())
            .reset_offset("g", "t", 0, 1)
            .is_err());
    }

    /// A deletion is fenced as a reset is (the same claim): refused while
    /// a member owns the partition.
    #[test]
    fn an_offset_is_deleted_only_while_no_live_member_owns_the_partition() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let a = reg.claim("g", "t", 0, "a", T).unwrap().unwrap();
        reg.commit("g", "t", 0, 10, &a).unwrap();
        let err = reg.delete_offset("g", "t", 0).unwrap_err();
        assert!(matches!(err, Error::GroupActive { .. }), "{err}");
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(10));
        drop(a);
        assert!(reg.delete_offset("g", "t", 0).unwrap(), "it had one");
        assert_eq!(reg.committed("g", "t", 0).unwrap(), None);
        assert_eq!(reg.owner("g", "t", 0), None, "no owner left behind");
        assert!(!reg.delete_offset("g", "t", 0).unwrap(), "none left");
        assert!(!reg.delete_offset("g", "t", 1).unwrap(), "never had one");
    }

    #[test]
    fn a_placement_is_written_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let ids = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let first = Placement::new("t", vec![ids(&["b1"]), ids(&["b2"])]);
        assert!(reg.create_placement(&first).unwrap());
        let second = Placement::new("t", vec![ids(&["b3"])]);
        assert!(
            !reg.create_placement(&second).unwrap(),
            "the first placement wins"
        );
        assert_eq!(reg.placement("t").unwrap(), Some(first));
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("topics"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["t.json"], "no temporary file stays");
    }

    #[test]
    fn replicas_are_placed_round_robin_once_and_too_many_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let brokers = |n: usize| (1..=n).rev().map(|i| format!("b{i}")).collect::<Vec<_>>();
        let err = reg
            .place_topic_replicated("r", 2, 3, &brokers(2))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "replication factor 3 needs 3 live brokers, 2 are registered"
        );
        assert_eq!(reg.placement("r").unwrap(), None, "nothing is placed");
        for n in 3..=5 {
            let topic = format!("t{n}");
            let placed = reg
                .place_topic_replicated(&topic, 6, 3, &brokers(n))
                .unwrap();
            let read = reg.placement(&topic).unwrap().unwrap();
            assert_eq!(read, placed);
            let sorted: Vec<String> = (1..=n).map(|i| format!("b{i}")).collect();
            for p in 0..6 {
                let want: Vec<String> = (0..3).map(|i| sorted[(p + i) % n].clone()).collect();
                assert_eq!(
                    read.replicas_of(p as u32).unwrap(),
                    want,
                    "{n} brokers, [{p}]"
                );
                assert_eq!(read.brokers[p], sorted[p % n]);
            }
            let later = reg
                .place_topic_replicated(&topic, 1, 1, &brokers(1))
                .unwrap();
            assert_eq!(later, placed, "written once");
        }
        assert_eq!(reg.topics().unwrap(), ["t3", "t4", "t5"]);
        // Replicas that do not match the leaders, or repeat a broker.
        for bad in [
            r#"{"topic":"x","brokers":["b1"],"replicas":[["b2","b1"]]}"#,
            r#"{"topic":"x","brokers":["b1"],"replicas":[["b1","b1"]]}"#,
            r#"{"topic":"x","brokers":["b1","b2"],"replicas":[["b1","b2"]]}"#,
            r#"{"topic":"x","brokers":["b1"],"replicas":[["b1","../b"]]}"#,
        ] {
            std::fs::write(dir.path().join("topics/x.json"), bad).unwrap();
            let err = reg.placement("x").unwrap_err();
            assert!(matches!(err, Error::Corrupt { .. }), "{bad}: {err}");
            assert!(err.to_string().contains("topics/x.json"), "{err}");
        }
    }
}
