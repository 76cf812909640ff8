//! The registry: the paper's four ZooKeeper registries as a directory of
//! plain files, shared by the brokers and consumers of one host.
//!
//! # Layout
//!
//! ```text
//! <registry>/brokers/<broker-id>.lock          --> (flock held by the live broker)
//! <registry>/brokers/<broker-id>.json          --> {"id", "host", "port", "pid", "topics": {"t": [0, 2]}}
//! <registry>/consumers/<group>/<member>.lock   --> (flock held by the live member)
//! <registry>/consumers/<group>/<member>.json   --> {"member", "pid", "host", "topics": ["t"]}
//! <registry>/owners/<group>/<topic>-<p>.lock   --> <member> (flock held by the owner)
//! <registry>/offsets/<group>/<topic>-<p>       --> "klog-offset 1\n<offset>\n"
//! <registry>/topics/<topic>.json               --> {"topic": "t", "brokers": ["<broker-id>", ...]}
//! ```
//!
//! `tests/golden/registry/` pins these files' contents; a diff there is a
//! format change and needs a version bump (for offsets, the first line).
//!
//! # Placement (a cluster of brokers)
//!
//! `topics/<topic>.json` is persistent: it names, for each partition of the
//! topic in order, the id of the broker that holds it. The broker that
//! creates the topic writes it once, atomically (a temporary file linked
//! into place, which fails if another got there first, and then the first
//! one wins), placing partition `p` on the `p mod n`-th of the `n` live
//! brokers sorted by id: round-robin, so partitions spread evenly and the
//! same inputs always give the same placement. A broker's id is stable
//! across restarts (kept in `<data-dir>/broker-id`), so a restarted broker
//! serves its partitions again. A broker serves only the partitions placed
//! on it; clients read the placement to find each partition's broker.
//!
//! Names are topic names and ids of `[A-Za-z0-9._-]`, so no entry can name
//! a path outside the registry.
//!
//! # Ephemeral entries are locks
//!
//! Brokers, members and owners are *ephemeral*: an entry exists while an
//! exclusive `flock` on its `.lock` file is held. The kernel releases a
//! `flock` when its process dies, `kill -9` included, so an entry vanishes
//! the instant its process does, with no clock and no session to expire;
//! and two processes can never hold the same lock, so two members can
//! never both own a partition. (A lease, the alternative, needs synchronised
//! clocks and leaves a window in which a slow owner and its successor both
//! believe they own.) The price: a registry serves the processes of one
//! host on a local file system (`flock` over NFS is not reliable), and a
//! process that is stopped but alive (SIGSTOP) keeps its entries until it
//! dies. A `.json` beside a lock says who holds it; it is replaced
//! atomically, and one whose lock is free is stale and is removed by
//! whoever finds it. A new entry's lock is taken, and given its name,
//! before its `.json` appears, so no reader can mistake a new entry for a
//! dead one.
//!
//! # Offsets are persistent
//!
//! A committed offset (the next offset the group will read) is written to a
//! temporary file, fsynced, renamed over the old one, and the directory
//! fsynced. Only the partition's owner commits, while holding the owner's
//! lock; a commit never lowers the stored offset. A file that does not
//! parse is an error that names it, never a silent restart from elsewhere.
//!
//! # Change notification
//!
//! Members poll the registry (a directory listing and a few small reads)
//! every `poll` interval: cheap, and with no busy loop.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{RealFs, Vfs};

/// Magic first line of an offset file.
const OFFSET_MAGIC: &str = "klog-offset 1";

/// A registry directory.
#[derive(Debug, Clone)]
pub struct Registry {
    dir: PathBuf,
}

/// A broker's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    /// Unique id.
    pub id: String,
    /// Host to connect to.
    pub host: String,
    /// Port to connect to.
    pub port: u16,
    /// Its process.
    pub pid: u32,
    /// Topics it serves, each with the partitions it holds.
    pub topics: BTreeMap<String, Vec<u32>>,
}

impl BrokerInfo {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// A group member's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberInfo {
    /// Unique id; members are ordered by it.
    pub member: String,
    /// Its process.
    pub pid: u32,
    /// Topics it subscribes to.
    pub topics: Vec<String>,
}

/// A held ephemeral entry: the entry exists while this lives.
#[derive(Debug)]
pub struct Ephemeral {
    _lock: Flock<File>,
    lock_path: PathBuf,
    info_path: Option<PathBuf>,
}

impl Ephemeral {
    /// Replaces the entry's description, atomically.
    pub fn update<T: Serialize>(&self, info: &T) -> Result<()> {
        if let Some(path) = &self.info_path {
            write_json(path, info)?;
        }
        Ok(())
    }
}

impl Drop for Ephemeral {
    fn drop(&mut self) {
        // Leaving cleanly: remove the entry (the lock goes with the file).
        if let Some(info) = &self.info_path {
            let _ = std::fs::remove_file(info);
            let _ = std::fs::remove_file(&self.lock_path);
        }
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec(value).map_err(|e| Error::Config(e.to_string()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("entry");
    crate::storage::fs::write_atomic(&RealFs, dir, name, &bytes)
}

/// Whether the flock on `path` is held by some process now.
fn is_held(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    Flock::lock(file, FlockArg::LockSharedNonblock).is_err()
}

/// Opens (creating) `path` and takes its exclusive flock without waiting.
fn try_lock(path: &Path) -> Result<Option<Flock<File>>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .ctx("open", path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(Error::io("lock", path, e.into())),
    }
}

/// Checks a name used in a registry path.
fn check_name(kind: &'static str, name: &str) -> Result<()> {
    crate::storage::store::validate_topic(name).map_err(|_| Error::Config(format!("invalid {kind} name {name:?}")))
}

impl Registry {
    /// Opens (creating) the registry in `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Registry> {
        let dir = dir.into();
        for sub in ["brokers", "consumers", "owners", "offsets", "topics"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).ctx("create", &d)?;
        }
        Ok(Registry { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Registers an ephemeral entry `<dir>/<id>.{lock,json}`.
    fn register<T: Serialize>(&self, dir: &Path, id: &str, info: &T) -> Result<Ephemeral> {
        std::fs::create_dir_all(dir).ctx("create", dir)?;
        // Lock first under a temporary name, give the lock its name, and
        // only then write the description that readers list: a reader that
        // finds the description always finds the lock held.
        let tmp = dir.join(format!(".{id}.lock.tmp"));
        let lock = try_lock(&tmp)?.ok_or_else(|| Error::Config(format!("{} is in use", tmp.display())))?;
        let lock_path = dir.join(format!("{id}.lock"));
        let info_path = dir.join(format!("{id}.json"));
        std::fs::rename(&tmp, &lock_path).ctx("rename", &tmp)?;
        write_json(&info_path, info)?;
        Ok(Ephemeral {
            _lock: lock,
            lock_path,
            info_path: Some(info_path),
        })
    }

    /// Live entries of `dir`, removing the stale ones found.
    fn live<T: for<'de> Deserialize<'de>>(&self, dir: &Path) -> Result<Vec<T>> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(out);
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
            .collect();
        names.sort();
        for name in names {
            let id = name.trim_end_matches(".json");
            let lock = dir.join(format!("{id}.lock"));
            let info = dir.join(&name);
            if !is_held(&lock) {
                // Its process is gone: a stale entry.
                let _ = std::fs::remove_file(&info);
                let _ = std::fs::remove_file(&lock);
                continue;
            }
            // A description that does not parse is ignored (it is being
            // replaced, or damaged); the lock alone keeps the entry alive.
            if let Ok(text) = std::fs::read(&info) {
                if let Ok(v) = serde_json::from_slice(&text) {
                    out.push(v);
                }
            }
        }
        Ok(out)
    }

    /// Registers a broker.
    pub fn register_broker(&self, info: &BrokerInfo) -> Result<Ephemeral> {
        check_name("broker", &info.id)?;
        self.register(&self.dir.join("brokers"), &info.id, info)
    }

    /// The live brokers, by id.
    pub fn brokers(&self) -> Result<Vec<BrokerInfo>> {
        self.live(&self.dir.join("brokers"))
    }

    /// Joins `group` as `member`.
    pub fn join(&self, group: &str, info: &MemberInfo) -> Result<Ephemeral> {
        check_name("group", group)?;
        check_name("member", &info.member)?;
        self.register(&self.dir.join("consumers").join(group), &info.member, info)
    }

    /// The live members of `group`, ordered by id.
    pub fn members(&self, group: &str) -> Result<Vec<MemberInfo>> {
        check_name("group", group)?;
        let mut m: Vec<MemberInfo> = self.live(&self.dir.join("consumers").join(group))?;
        m.sort_by(|a, b| a.member.cmp(&b.member));
        Ok(m)
    }

    /// The groups that have members or committed offsets.
    pub fn groups(&self) -> Result<Vec<String>> {
        let mut groups = std::collections::BTreeSet::new();
        for sub in ["consumers", "offsets", "owners"] {
            if let Ok(entries) = std::fs::read_dir(self.dir.join(sub)) {
                groups.extend(entries.filter_map(|e| e.ok()?.file_name().into_string().ok()));
            }
        }
        Ok(groups.into_iter().filter(|g| check_name("group", g).is_ok()).collect())
    }

    fn owner_path(&self, group: &str, topic: &str, partition: u32) -> PathBuf {
        self.dir.join("owners").join(group).join(format!(
            "{}.lock",
            crate::storage::store::partition_dir_name(topic, partition)
        ))
    }

    /// Claims a partition for `member`: `None` when another member owns it.
    pub fn claim(&self, group: &str, topic: &str, partition: u32, member: &str) -> Result<Option<Ephemeral>> {
        check_name("group", group)?;
        check_name("topic", topic)?;
        let path = self.owner_path(group, topic, partition);
        let dir = path.parent().expect("owner dir");
        std::fs::create_dir_all(dir).ctx("create", dir)?;
        let Some(mut lock) = try_lock(&path)? else {
            return Ok(None);
        };
        lock.set_len(0).ctx("truncate", &path)?;
        lock.seek(SeekFrom::Start(0)).ctx("seek", &path)?;
        lock.write_all(member.as_bytes()).ctx("write", &path)?;
        Ok(Some(Ephemeral {
            _lock: lock,
            lock_path: path,
            // Owner lock files stay: a claim reuses the file.
            info_path: None,
        }))
    }

    /// The owner of a partition now, if any.
    pub fn owner(&self, group: &str, topic: &str, partition: u32) -> Option<String> {
        let path = self.owner_path(group, topic, partition);
        if !is_held(&path) {
            return None;
        }
        let mut text = String::new();
        File::open(&path).ok()?.read_to_string(&mut text).ok()?;
        Some(if text.is_empty() { "?".into() } else { text })
    }

    fn offset_path(&self, group: &str, topic: &str, partition: u32) -> PathBuf {
        self.dir
            .join("offsets")
            .join(group)
            .join(crate::storage::store::partition_dir_name(topic, partition))
    }

    /// The group's committed offset for a partition (the next offset to
    /// read), `None` when it has none.
    pub fn committed(&self, group: &str, topic: &str, partition: u32) -> Result<Option<u64>> {
        check_name("group", group)?;
        let path = self.offset_path(group, topic, partition);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let mut lines = text.lines();
        let offset = match (lines.next(), lines.next().map(|l| l.parse::<u64>()), lines.next()) {
            (Some(OFFSET_MAGIC), Some(Ok(o)), None) => o,
            _ => {
                return Err(Error::Corrupt {
                    path,
                    position: 0,
                    reason: format!("not a committed offset ({OFFSET_MAGIC:?}, then a number)"),
                })
            }
        };
        Ok(Some(offset))
    }

    /// Commits `offset` for a partition the caller owns (`_owner` proves
    /// it). A lower offset than the stored one is ignored.
    pub fn commit(&self, group: &str, topic: &str, partition: u32, offset: u64, _owner: &Ephemeral) -> Result<()> {
        if self.committed(group, topic, partition)?.is_some_and(|c| c >= offset) {
            return Ok(());
        }
        let path = self.offset_path(group, topic, partition);
        let dir = path.parent().expect("offsets dir");
        std::fs::create_dir_all(dir).ctx("create", dir)?;
        let name = path.file_name().and_then(|n| n.to_str()).expect("name");
        let text = format!("{OFFSET_MAGIC}\n{offset}\n");
        crate::storage::fs::write_atomic(&RealFs as &dyn Vfs, dir, name, text.as_bytes())
    }

    /// Every committed offset of `group`: (topic, partition, offset).
    pub fn offsets(&self, group: &str) -> Result<Vec<(String, u32, Result<u64>)>> {
        let dir = self.dir.join("offsets").join(group);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for name in entries.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
            if let Some((topic, p)) = crate::storage::store::parse_partition_dir(&name) {
                let offset = self
                    .committed(group, &topic, p)
                    .and_then(|o| o.ok_or_else(|| Error::Config("vanished".into())));
                out.push((topic, p, offset));
            }
        }
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        Ok(out)
    }
}

/// Where a topic's partitions are: the broker id of each, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The topic.
    pub topic: String,
    /// Broker id of partition `i` at index `i`.
    pub brokers: Vec<String>,
}

/// Round-robin placement of `partitions` over `brokers` (sorted by id).
pub fn place(partitions: u32, brokers: &[String]) -> Vec<String> {
    let mut sorted = brokers.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Vec::new();
    }
    (0..partitions as usize)
        .map(|p| sorted[p % sorted.len()].clone())
        .collect()
}

impl Registry {
    fn placement_path(&self, topic: &str) -> PathBuf {
        self.dir.join("topics").join(format!("{topic}.json"))
    }

    /// A topic's placement, if it has one.
    pub fn placement(&self, topic: &str) -> Result<Option<Placement>> {
        check_name("topic", topic)?;
        let path = self.placement_path(topic);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let placement: Placement = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
            path: path.clone(),
            position: 0,
            reason: format!("not a placement: {e}"),
        })?;
        if placement.topic != topic || placement.brokers.is_empty() {
            return Err(Error::Corrupt {
                path,
                position: 0,
                reason: "names another topic, or no partition".into(),
            });
        }
        Ok(Some(placement))
    }

    /// Places `topic` (`partitions` partitions over `brokers`) unless it is
    /// placed already; returns the placement that holds.
    pub fn place_topic(&self, topic: &str, partitions: u32, brokers: &[String]) -> Result<Placement> {
        if let Some(p) = self.placement(topic)? {
            return Ok(p);
        }
        let placement = Placement {
            topic: topic.to_string(),
            brokers: place(partitions, brokers),
        };
        if placement.brokers.is_empty() {
            return Err(Error::Config(format!("no live broker to place topic {topic:?} on")));
        }
        let path = self.placement_path(topic);
        let dir = path.parent().expect("topics dir");
        let tmp = dir.join(format!(".{topic}.{}.tmp", std::process::id()));
        let bytes = serde_json::to_vec(&placement).map_err(|e| Error::Config(e.to_string()))?;
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
                RealFs.sync_dir(dir).ctx("fsync directory", dir)?;
                Ok(placement)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => self
                .placement(topic)?
                .ok_or_else(|| Error::Config(format!("placement of {topic:?} vanished"))),
            Err(e) => Err(Error::io("link", &path, e)),
        }
    }
}

/// The paper's Algorithm 1, as a pure function: with the partitions and
/// members sorted, member `index` of `members` takes a contiguous range;
/// the first `partitions % members` members take one more. Returns the
/// partitions for `index` (none when there are more members than
/// partitions and it comes late).
pub fn assign(partitions: u32, members: usize, index: usize) -> std::ops::Range<u32> {
    if members == 0 || index >= members {
        return 0..0;
    }
    let (n, m, i) = (partitions as usize, members, index);
    let base = n / m;
    let extra = n % m;
    let start = i * base + i.min(extra);
    let len = base + usize::from(i < extra);
    start as u32..(start + len) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn assignment_table() {
        // (partitions, members) -> each member's range.
        let cases: &[(u32, usize, &[std::ops::Range<u32>])] = &[
            (4, 0, &[]),
            (0, 3, &[0..0, 0..0, 0..0]),
            (4, 1, &[0..4]),
            (4, 2, &[0..2, 2..4]),
            (4, 3, &[0..2, 2..3, 3..4]),
            (4, 4, &[0..1, 1..2, 2..3, 3..4]),
            (4, 6, &[0..1, 1..2, 2..3, 3..4, 4..4, 4..4]),
            (10, 3, &[0..4, 4..7, 7..10]),
        ];
        for (partitions, members, expected) in cases {
            let got: Vec<_> = (0..*members).map(|i| assign(*partitions, *members, i)).collect();
            assert_eq!(&got, expected, "{partitions} partitions, {members} members");
            // Every partition exactly once.
            let mut all: Vec<u32> = got.iter().flat_map(|r| r.clone()).collect();
            all.sort_unstable();
            let want: Vec<u32> = if *members == 0 {
                vec![]
            } else {
                (0..*partitions).collect()
            };
            assert_eq!(all, want);
        }
        assert_eq!(assign(4, 2, 5), 0..0);
    }

    #[test]
    fn a_member_joining_while_others_list_the_group_is_never_taken_for_dead() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(dir.path()).unwrap();
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
                };
                let entry = reg.join("g", &info).unwrap();
                let names: Vec<_> = reg.members("g").unwrap().into_iter().map(|m| m.member).collect();
                assert_eq!(names, std::slice::from_ref(&info.member), "joined member {i} vanished");
                drop(entry);
            }
        });
    }

    #[test]
    fn ownership_is_exclusive_and_released_with_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(dir.path()).unwrap();
        let a = reg.claim("g", "t", 0, "a").unwrap().unwrap();
        assert!(reg.claim("g", "t", 0, "b").unwrap().is_none());
        assert_eq!(reg.owner("g", "t", 0).as_deref(), Some("a"));
        reg.commit("g", "t", 0, 10, &a).unwrap();
        reg.commit("g", "t", 0, 5, &a).unwrap();
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(10), "never lower");
        drop(a);
        assert_eq!(reg.owner("g", "t", 0), None);
        assert!(reg.claim("g", "t", 0, "b").unwrap().is_some());
    }

    #[test]
    fn members_vanish_with_their_entries_and_garbage_is_no_panic() {
        let dir = tempfile::tempdir().unwrap();
        let reg = Registry::open(dir.path()).unwrap();
        let info = |m: &str| MemberInfo {
            member: m.into(),
            pid: 1,
            topics: vec!["t".into()],
        };
        let b = reg.join("g", &info("b")).unwrap();
        let a = reg.join("g", &info("a")).unwrap();
        let names: Vec<_> = reg.members("g").unwrap().into_iter().map(|m| m.member).collect();
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
        let off = dir.path().join("offsets/g");
        std::fs::create_dir_all(&off).unwrap();
        for bad in [&b""[..], b"klog-offset 1\n", b"klog-offset 1\nx\n", b"{\"json\": 1}"] {
            std::fs::write(off.join("t-3"), bad).unwrap();
            let err = reg.committed("g", "t", 3).unwrap_err().to_string();
            assert!(err.contains("t-3"), "{err}");
        }
    }
}
