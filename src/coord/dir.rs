//! The directory backend of the [`Registry`]: the paper's four ZooKeeper
//! registries as a directory of plain files, shared by the brokers and
//! consumers of one host.
//!
//! # Layout
//!
//! ```text
//! <registry>/brokers/<broker-id>.lock          --> (lock held by the live broker)
//! <registry>/brokers/<broker-id>.json          --> {"id", "host", "port", "pid", "topics": {"t": [0, 2]}}
//! <registry>/consumers/<group>/<member>.lock   --> (lock held by the live member)
//! <registry>/consumers/<group>/<member>.json   --> {"member", "pid", "host", "topics": ["t"]}
//! <registry>/owners/<group>/<topic>-<p>.lock   --> <member> (lock held by the owner)
//! <registry>/offsets/<group>/<topic>-<p>       --> "klog-offset 1\n<offset>\n"
//! <registry>/topics/<topic>.json               --> {"topic": "t", "brokers": ["<broker-id>", ...]}
//! ```
//!
//! `tests/golden/registry/` pins these files' contents; a diff there is a
//! format change and needs a version bump (for offsets, the first line).
//!
//! # Placement (a cluster of brokers)
//!
//! `topics/<topic>.json` is persistent. The broker that creates the topic
//! writes it once, atomically (a temporary file linked into place, which
//! fails if another got there first, and then the first one wins),
//! placing partition `p` on the `p mod n`-th of the `n` live brokers
//! sorted by id: round-robin, so partitions spread evenly and the same
//! inputs always give the same placement. A broker's id is stable across
//! restarts (kept in `<data-dir>/broker-id`), so a restarted broker serves
//! its partitions again. A broker serves only the partitions placed on
//! it; clients read the placement to find each partition's broker.
//!
//! Names are topic names and ids of `[A-Za-z0-9._-]`, so no entry can name
//! a path outside the registry.
//!
//! # Ephemeral entries are locks
//!
//! Brokers, members and owners are *ephemeral*: an entry exists while an
//! exclusive lock on its `.lock` file is held (an open-file-description
//! lock, see `storage::lock`, which others test without taking). The
//! kernel releases it when its process dies, `kill -9` included, so an entry vanishes
//! the instant its process does, with no clock and no session to expire;
//! and two processes can never hold the same lock, so two members can
//! never both own a partition. (A lease, the alternative, needs synchronised
//! clocks and leaves a window in which a slow owner and its successor both
//! believe they own.) The price: a registry serves the processes of one
//! host on a local file system (file locks over NFS are not reliable), and a
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

use std::any::Any;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::coord::registry::{
    check_name, to_json, BrokerInfo, Ephemeral, Held, MemberInfo, Placement, Registry,
};
use crate::error::{Error, IoContext, Result};
use crate::storage::fs::{RealFs, Vfs};
use crate::storage::lock::{is_locked, try_lock, FileLock};
use crate::storage::store::{parse_partition_dir, partition_dir_name};

/// Magic first line of an offset file.
const OFFSET_MAGIC: &str = "klog-offset 1";

/// A registry directory.
#[derive(Debug, Clone)]
pub struct DirRegistry {
    dir: PathBuf,
    /// Opened only to look (`klog-dump --registry`): nothing is created and
    /// stale entries are skipped, not removed.
    read_only: bool,
}

/// A held entry of the directory: its lock, and the files to remove
/// when it is left.
#[derive(Debug)]
struct Lock {
    _lock: FileLock,
    lock_path: PathBuf,
    /// The entry's description; `None` for an owner, whose lock file
    /// stays (a later claim reuses it).
    info_path: Option<PathBuf>,
}

impl Held for Lock {
    fn update(&self, json: &[u8]) -> Result<()> {
        if let Some(path) = &self.info_path {
            write_file(path, json)?;
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Leaving cleanly: remove the entry (the lock goes with the file).
        if let Some(info) = &self.info_path {
            let _ = std::fs::remove_file(info);
            let _ = std::fs::remove_file(&self.lock_path);
        }
    }
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
        for sub in ["brokers", "consumers", "owners", "offsets", "topics"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).ctx("create", &d)?;
        }
        Ok(DirRegistry {
            dir,
            read_only: false,
        })
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
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Registers an ephemeral entry `<entry_dir>/<id>.{lock,json}`.
    fn register(&self, entry_dir: &Path, id: &str, json: &[u8]) -> Result<Ephemeral> {
        std::fs::create_dir_all(entry_dir).ctx("create", entry_dir)?;
        // Lock first under a temporary name, give the lock its name, and
        // only then write the description that readers list: a reader that
        // finds the description always finds the lock held.
        let tmp = entry_dir.join(format!(".{id}.lock.tmp"));
        let lock = try_lock(&tmp)?.ok_or_else(|| Error::InUse { path: tmp.clone() })?;
        let lock_path = entry_dir.join(format!("{id}.lock"));
        let info_path = entry_dir.join(format!("{id}.json"));
        std::fs::rename(&tmp, &lock_path).ctx("rename", &tmp)?;
        write_file(&info_path, json)?;
        Ok(Ephemeral::new(Lock {
            _lock: lock,
            lock_path,
            info_path: Some(info_path),
        }))
    }

    /// Live entries of `entry_dir`, removing the stale ones found.
    fn live<T: for<'de> Deserialize<'de>>(&self, entry_dir: &Path) -> Result<Vec<T>> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(entry_dir) else {
            return Ok(out);
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
            .collect();
        names.sort();
        for name in names {
            let id = name.trim_end_matches(".json");
            let lock = entry_dir.join(format!("{id}.lock"));
            let info = entry_dir.join(&name);
            if !is_locked(&lock) {
                // Its process is gone: a stale entry.
                if !self.read_only {
                    let _ = std::fs::remove_file(&info);
                    let _ = std::fs::remove_file(&lock);
                }
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

    fn owner_path(&self, group: &str, topic: &str, partition: u32) -> PathBuf {
        self.dir
            .join("owners")
            .join(group)
            .join(format!("{}.lock", partition_dir_name(topic, partition)))
    }

    fn offset_path(&self, group: &str, topic: &str, partition: u32) -> PathBuf {
        self.dir
            .join("offsets")
            .join(group)
            .join(partition_dir_name(topic, partition))
    }

    fn placement_path(&self, topic: &str) -> PathBuf {
        self.dir.join("topics").join(format!("{topic}.json"))
    }
}

impl Registry for DirRegistry {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn register_broker(&self, info: &BrokerInfo) -> Result<Ephemeral> {
        self.writable()?;
        check_name("broker", &info.id)?;
        self.register(&self.dir.join("brokers"), &info.id, &to_json(info)?)
    }

    fn brokers(&self) -> Result<Vec<BrokerInfo>> {
        self.live(&self.dir.join("brokers"))
    }

    fn join(&self, group: &str, info: &MemberInfo) -> Result<Ephemeral> {
        self.writable()?;
        check_name("group", group)?;
        check_name("member", &info.member)?;
        self.register(
            &self.dir.join("consumers").join(group),
            &info.member,
            &to_json(info)?,
        )
    }

    fn members(&self, group: &str) -> Result<Vec<MemberInfo>> {
        check_name("group", group)?;
        let mut m: Vec<MemberInfo> = self.live(&self.dir.join("consumers").join(group))?;
        m.sort_by(|a, b| a.member.cmp(&b.member));
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
    ) -> Result<Option<Ephemeral>> {
        self.writable()?;
        check_name("group", group)?;
        check_name("topic", topic)?;
        let path = self.owner_path(group, topic, partition);
        let owners_dir = path.parent().expect("owners dir");
        std::fs::create_dir_all(owners_dir).ctx("create", owners_dir)?;
        let Some(lock) = try_lock(&path)? else {
            return Ok(None);
        };
        lock.file().set_len(0).ctx("truncate", &path)?;
        lock.file()
            .write_all_at(member.as_bytes(), 0)
            .ctx("write", &path)?;
        Ok(Some(Ephemeral::new(Lock {
            _lock: lock,
            lock_path: path,
            info_path: None,
        })))
    }

    fn owner(&self, group: &str, topic: &str, partition: u32) -> Option<String> {
        let path = self.owner_path(group, topic, partition);
        if !is_locked(&path) {
            return None;
        }
        let mut text = String::new();
        File::open(&path).ok()?.read_to_string(&mut text).ok()?;
        Some(if text.is_empty() { "?".into() } else { text })
    }

    fn committed(&self, group: &str, topic: &str, partition: u32) -> Result<Option<u64>> {
        check_name("group", group)?;
        let path = self.offset_path(group, topic, partition);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let mut lines = text.lines();
        let offset = match (
            lines.next(),
            lines.next().map(|l| l.parse::<u64>()),
            lines.next(),
        ) {
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

    /// Holding the owner's lock is the proof of ownership: `_owner` is not
    /// read.
    fn store_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        _owner: &Ephemeral,
    ) -> Result<()> {
        self.writable()?;
        let path = self.offset_path(group, topic, partition);
        let offsets_dir = path.parent().expect("offsets dir");
        std::fs::create_dir_all(offsets_dir).ctx("create", offsets_dir)?;
        let name = path.file_name().and_then(|n| n.to_str()).expect("name");
        let text = format!("{OFFSET_MAGIC}\n{offset}\n");
        crate::storage::fs::write_atomic(&RealFs as &dyn Vfs, offsets_dir, name, text.as_bytes())
    }

    fn offsets(&self, group: &str) -> Result<Vec<(String, u32, Result<u64>)>> {
        let group_dir = self.dir.join("offsets").join(group);
        let Ok(entries) = std::fs::read_dir(&group_dir) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for name in entries.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
            if let Some((topic, p)) = parse_partition_dir(&name) {
                let offset = self.committed(group, &topic, p).and_then(|o| {
                    o.ok_or_else(|| Error::Vanished {
                        what: "the committed offset".into(),
                    })
                });
                out.push((topic, p, offset));
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_opened_to_look_refuses_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open_read_only(dir.path().join("reg"));
        let info = MemberInfo {
            member: "m".into(),
            pid: 1,
            topics: vec!["t".into()],
        };
        assert!(reg.join("g", &info).is_err());
        assert!(reg.claim("g", "t", 0, "m").is_err());
        assert!(reg.brokers().unwrap().is_empty());
        assert!(!dir.path().join("reg").exists(), "nothing was created");
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
                };
                let entry = reg.join("g", &info).unwrap();
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
        let reg = DirRegistry::open(dir.path()).unwrap();
        let info = |m: &str| MemberInfo {
            member: m.into(),
            pid: 1,
            topics: vec!["t".into()],
        };
        let b = reg.join("g", &info("b")).unwrap();
        let a = reg.join("g", &info("a")).unwrap();
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
        let off = dir.path().join("offsets/g");
        std::fs::create_dir_all(&off).unwrap();
        for bad in [
            &b""[..],
            b"klog-offset 1\n",
            b"klog-offset 1\nx\n",
            b"{\"json\": 1}",
        ] {
            std::fs::write(off.join("t-3"), bad).unwrap();
            let err = reg.committed("g", "t", 3).unwrap_err().to_string();
            assert!(err.contains("t-3"), "{err}");
        }
    }

    #[test]
    fn a_placement_is_written_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let reg = DirRegistry::open(dir.path()).unwrap();
        let ids = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let first = Placement {
            topic: "t".into(),
            brokers: ids(&["b1", "b2"]),
        };
        assert!(reg.create_placement(&first).unwrap());
        let second = Placement {
            topic: "t".into(),
            brokers: ids(&["b3"]),
        };
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
}
