//! A data directory: topics, their partitions, and the logs behind them.
//!
//! # Layout
//!
//! ```text
//! <data-dir>/
//!   .lock                  the writer's lock, holding its pid (see crate::storage::lock)
//!   broker-id              the broker's id in a registry, stable across restarts
//!   <topic>-<partition>/   one directory per partition, partition from 0 (see crate::storage::log)
//!   <topic>.del            an empty file: the topic is being deleted (see Store::delete_topic)
//! ```
//!
//! Every writer takes the data directory's lock before anything else: a
//! broker (before it registers in a registry above all), an embedded
//! producer (`klog-produce --data-dir`) and `klog-recover` on a data
//! directory. So a second writer is refused with the first one's pid and
//! changes nothing: no topic appears beside a broker's, and no registry
//! entry is replaced. Readers take no lock.
//!
//! A topic exists when its partition directories do; its partition count is
//! how many there are, numbered `0..n` without a gap. A create makes them
//! from the last to partition 0, so the topic appears whole or not at all
//! (see [`Store::create_topic`]). Topic names match
//! `[A-Za-z0-9._-]{1,249}` and are neither `.` nor `..`, so a name can never
//! reach outside the data directory. A topic name may itself contain `-`:
//! the partition is the number after the last `-`. A topic with a
//! deletion marker does not exist, whatever of it is left on disk; the
//! marker goes once the last of its directories has.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};
use crate::limits::{PARTITIONS_MAX, TOPIC_NAME_BYTES_MAX};
use crate::storage::fs::{RealFs, Vfs};
use crate::storage::lock::DirLock;
use crate::storage::log::{Log, LogConfig, OpenOptions};
use crate::storage::segment::SEGMENT_HEADER_BYTES;

/// Checks a topic name against the naming rule.
pub fn validate_topic(name: &str) -> Result<()> {
    let fail = |reason| {
        Err(Error::InvalidTopic {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return fail("it is empty");
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return fail("it is longer than 249 characters");
    }
    if name == "." || name == ".." {
        return fail("'.' and '..' are not topic names");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return fail("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// The name of a partition's directory.
pub fn partition_dir_name(topic: &str, partition: u32) -> String {
    format!("{topic}-{partition}")
}

/// The topic and partition a directory name stands for, if it is one.
pub fn parse_partition_dir(name: &str) -> Option<(String, u32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    if partition.is_empty()
        || !partition.bytes().all(|b| b.is_ascii_digit())
        || partition.len() > 10
    {
        return None;
    }
    if partition.len() > 1 && partition.starts_with('0') {
        return None;
    }
    validate_topic(topic).ok()?;
    Some((topic.to_string(), partition.parse().ok()?))
}

/// The suffix of a topic's deletion marker in the data directory (short:
/// the longest topic's marker name fits in 255 bytes).
const DELETING: &str = ".del";

/// The topic a data directory entry marks as being deleted, if it is a
/// deletion marker.
fn deleting_topic(name: &str) -> Option<&str> {
    let topic = name.strip_suffix(DELETING)?;
    validate_topic(topic).ok().map(|()| topic)
}

/// Removes `path`, a file or a directory with all it holds.
fn remove_tree(vfs: &dyn Vfs, path: &Path) -> Result<()> {
    if vfs.remove(path).is_ok() {
        return Ok(());
    }
    for name in vfs.list(path).ctx("list", path)? {
        remove_tree(vfs, &path.join(name))?;
    }
    vfs.remove_dir(path).ctx("remove", path)
}

/// A data directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    vfs: Arc<dyn Vfs>,
}

impl Store {
    /// The data directory `dir` on the real file system (created on the
    /// first topic).
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store::with_vfs(dir, Arc::new(RealFs))
    }

    /// The data directory `dir` on `vfs`.
    pub fn with_vfs(dir: impl Into<PathBuf>, vfs: Arc<dyn Vfs>) -> Store {
        Store {
            dir: dir.into(),
            vfs,
        }
    }

    /// Takes the data directory's writer lock (creating the directory), or
    /// says who holds it; `None` on a file system without locks (the
    /// simulated one).
    pub fn lock(&self) -> Result<Option<DirLock>> {
        self.vfs
            .create_dir_all(&self.dir)
            .ctx("create", &self.dir)?;
        if !self.vfs.supports_locks() {
            return Ok(None);
        }
        DirLock::acquire(&self.dir).map(Some)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every topic and its partition count (a topic being deleted is
    /// none: [`Store::delete_topic`]).
    pub fn topics(&self) -> Result<BTreeMap<String, u32>> {
        let mut partitions: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        if !self.vfs.exists(&self.dir) {
            return Ok(BTreeMap::new());
        }
        let names = self.vfs.list(&self.dir).ctx("list", &self.dir)?;
        let deleting: Vec<&str> = names.iter().filter_map(|n| deleting_topic(n)).collect();
        for name in &names {
            if let Some((topic, p)) = parse_partition_dir(name) {
                if !deleting.contains(&topic.as_str()) {
                    partitions.entry(topic).or_default().push(p);
                }
            }
        }
        Ok(partitions
            .into_iter()
            .map(|(topic, mut ps)| {
                ps.sort_unstable();
                // Partitions count up from 0; a gap ends the topic there.
                let count = ps
                    .iter()
                    .enumerate()
                    .take_while(|(i, p)| *i as u32 == **p)
                    .count();
                (topic, count as u32)
            })
            .filter(|(_, count)| *count > 0)
            .collect())
    }

    /// The partition count of `topic`, or an error naming the directory.
    pub fn partition_count(&self, topic: &str) -> Result<u32> {
        validate_topic(topic)?;
        self.topics()?
            .get(topic)
            .copied()
            .ok_or_else(|| Error::UnknownTopic {
                topic: topic.to_string(),
                dir: self.dir.clone(),
            })
    }

    /// Creates `topic` with `partitions` partitions unless it exists;
    /// returns its partition count.
    ///
    /// All or nothing: the partitions are made from the last to the first,
    /// and a topic exists once its partition 0 does, so a failure (a full
    /// disk) or a power cut at any point leaves the whole topic or none of
    /// it. What a failed create made is removed; what a power cut left
    /// (directories of a topic without its partition 0, holding no record)
    /// is removed by the next create of that topic. Such a directory that
    /// holds records is never touched: the create is refused, naming it.
    pub fn create_topic(&self, topic: &str, partitions: u32) -> Result<u32> {
        validate_topic(topic)?;
        if partitions == 0 || partitions > PARTITIONS_MAX {
            return Err(Error::Config(format!(
                "a topic has from 1 to {PARTITIONS_MAX} partitions, not {partitions}"
            )));
        }
        if let Some(count) = self.topics()?.get(topic) {
            return Ok(*count);
        }
        self.vfs
            .create_dir_all(&self.dir)
            .ctx("create", &self.dir)?;
        if self
            .vfs
            .exists(&self.dir.join(format!("{topic}{DELETING}")))
        {
            // A deletion a crash interrupted: nothing of it comes back.
            self.finish_deletion(topic)?;
        }
        self.remove_leftovers(topic, 0)?;
        self.make_partitions(topic, 0, partitions)?;
        Ok(partitions)
    }

    /// Grows `topic` to `count` partitions (CreatePartitions); returns its
    /// count now (as it was, if it had as many).
    ///
    /// All or nothing, as [`Store::create_topic`]: the new partitions are
    /// made from the last to the first, the first new one once the others'
    /// entries are durable, so the count moves once, whole (a gap ends a
    /// topic). What a cut-short growth left past the count (directories
    /// holding no record) is removed first; one holding records refuses.
    pub fn add_partitions(&self, topic: &str, count: u32) -> Result<u32> {
        let have = self.partition_count(topic)?;
        if count <= have {
            return Ok(have);
        }
        if count > PARTITIONS_MAX {
            return Err(Error::Config(format!(
                "a topic has from 1 to {PARTITIONS_MAX} partitions, not {count}"
            )));
        }
        self.remove_leftovers(topic, have)?;
        self.make_partitions(topic, have, count)?;
        Ok(count)
    }

    /// Makes partitions `from..to` of `topic`, each with an empty segment,
    /// the last first and `from` last of all, after the others' entries
    /// are durable; on an error, removes what it made, `from` first.
    fn make_partitions(&self, topic: &str, from: u32, to: u32) -> Result<()> {
        let mut made = Vec::new();
        let created = (|| {
            for p in (from..to).rev() {
                if p == from && to - from > 1 {
                    // The others' entries are durable before the first
                    // new one's is made, whatever order the file system
                    // keeps.
                    self.vfs
                        .sync_dir(&self.dir)
                        .ctx("fsync directory", &self.dir)?;
                }
                let dir = self.partition_dir(topic, p);
                self.vfs.create_dir_all(&dir).ctx("create", &dir)?;
                made.push(dir.clone());
                // Whole as it is made: a scrub first reads it an interval
                // from now (the segment's creation syncs the directory).
                crate::storage::scrub::note_made(&*self.vfs, &dir, crate::clock::now_ms())?;
                // Every partition starts with an empty segment, so that
                // readers of a partition that has no record yet find an
                // empty log.
                let mut segment =
                    crate::storage::segment::Segment::create(&self.vfs, &dir, 0, 1, None)?;
                segment.deactivate()?;
            }
            self.vfs
                .sync_dir(&self.dir)
                .ctx("fsync directory", &self.dir)
        })();
        if let Err(e) = created {
            // The first new one first: the rest are past a gap then.
            for dir in made.iter().rev() {
                if self.remove_empty_partition(dir).is_err() {
                    break;
                }
            }
            let _ = self.vfs.sync_dir(&self.dir);
            return Err(e);
        }
        Ok(())
    }

    /// Deletes `topic`'s partitions, crash-safe: a marker file
    /// (`<topic>.del`) is made durable first, and from then on the
    /// topic is gone ([`Store::topics`] skips it) until its directories
    /// are removed and the marker with them. A power cut or an error
    /// midway leaves the marker, and [`Store::finish_deletions`] (at a
    /// broker's start) or the next creation of the topic finishes the job,
    /// so that no partition of the old topic is ever read again.
    pub fn delete_topic(&self, topic: &str) -> Result<()> {
        validate_topic(topic)?;
        let marker = self.dir.join(format!("{topic}{DELETING}"));
        self.vfs.open(&marker, true).ctx("create", &marker)?;
        self.vfs
            .sync_dir(&self.dir)
            .ctx("fsync directory", &self.dir)?;
        self.finish_deletion(topic)
    }

    /// The directories of `topic`'s partitions on disk, whether or not
    /// the topic is whole.
    pub fn partition_dirs_of(&self, topic: &str) -> Result<usize> {
        let names = self.vfs.list(&self.dir).ctx("list", &self.dir)?;
        let of = |n: &String| parse_partition_dir(n).is_some_and(|(t, _)| t == topic);
        Ok(names.iter().filter(|n| of(n)).count())
    }

    /// Finishes the deletions a crash or an error interrupted: the topics
    /// whose deletion it finished.
    pub fn finish_deletions(&self) -> Result<Vec<String>> {
        if !self.vfs.exists(&self.dir) {
            return Ok(Vec::new());
        }
        let names = self.vfs.list(&self.dir).ctx("list", &self.dir)?;
        let topics: Vec<String> = (names.iter())
            .filter_map(|n| deleting_topic(n).map(str::to_string))
            .collect();
        for topic in &topics {
            self.finish_deletion(topic)?;
        }
        Ok(topics)
    }

    /// Removes the directories of `topic`, then its deletion marker.
    fn finish_deletion(&self, topic: &str) -> Result<()> {
        let names = self.vfs.list(&self.dir).ctx("list", &self.dir)?;
        for name in names {
            if parse_partition_dir(&name).is_some_and(|(t, _)| t == topic) {
                remove_tree(&*self.vfs, &self.dir.join(name))?;
            }
        }
        self.vfs
            .sync_dir(&self.dir)
            .ctx("fsync directory", &self.dir)?;
        let marker = self.dir.join(format!("{topic}{DELETING}"));
        self.vfs.remove(&marker).ctx("remove", &marker)?;
        self.vfs
            .sync_dir(&self.dir)
            .ctx("fsync directory", &self.dir)
    }

    /// Partition directories in the data directory, whether or not their
    /// topic is whole: what a broker's files are counted by.
    pub fn partition_dirs(&self) -> Result<usize> {
        self.partition_dirs_besides("")
    }

    /// [`Store::partition_dirs`] of every topic but `topic`.
    pub fn partition_dirs_besides(&self, topic: &str) -> Result<usize> {
        if !self.vfs.exists(&self.dir) {
            return Ok(0);
        }
        let names = self.vfs.list(&self.dir).ctx("list", &self.dir)?;
        Ok(names
            .iter()
            .filter(|n| parse_partition_dir(n).is_some_and(|(t, _)| t != topic))
            .count())
    }

    /// Removes `topic`, just created and never written (no segment holds a
    /// record): partition 0 first, so that it stops existing before the
    /// rest goes. Refused, leaving it, if a segment holds records.
    pub fn remove_unwritten_topic(&self, topic: &str) -> Result<()> {
        let count = self.partition_count(topic)?;
        let dirs: Vec<PathBuf> = (0..count).map(|p| self.partition_dir(topic, p)).collect();
        for dir in &dirs {
            for name in self.vfs.list(dir).ctx("list", dir)? {
                let path = dir.join(&name);
                if name.ends_with(".log") && self.holds_records(&path)? {
                    return Err(Error::Config(format!("{} holds records", path.display())));
                }
            }
        }
        for dir in &dirs {
            self.remove_empty_partition(dir)?;
        }
        self.vfs
            .sync_dir(&self.dir)
            .ctx("fsync directory", &self.dir)
    }

    /// Removes the directories of `topic` from partition `from` on (past
    /// its count) that an interrupted create or growth left, or refuses if
    /// one holds more than an empty log.
    fn remove_leftovers(&self, topic: &str, from: u32) -> Result<()> {
        let names = self.vfs.list(&self.dir).ctx("list", &self.dir)?;
        let dirs: Vec<PathBuf> = names
            .iter()
            .filter(|n| parse_partition_dir(n).is_some_and(|(t, p)| t == topic && p >= from))
            .map(|n| self.dir.join(n))
            .collect();
        for dir in &dirs {
            if !self.holds_an_empty_log(dir)? {
                return Err(Error::Config(format!(
                    "topic {topic:?} cannot have partition {from} made: {} holds records, but the topic stops before it (a partition moved or removed by hand?); move it away, or put the missing partition back",
                    dir.display()
                )));
            }
        }
        for dir in &dirs {
            self.remove_empty_partition(dir)?;
        }
        Ok(())
    }

    /// Whether `dir` holds nothing but an empty log: segments of no
    /// record (a header at most) and their indexes.
    fn holds_an_empty_log(&self, dir: &Path) -> Result<bool> {
        for name in self.vfs.list(dir).ctx("list", dir)? {
            let path = dir.join(&name);
            let empty = if name.ends_with(".log") {
                !self.holds_records(&path)?
            } else {
                name.ends_with(".index")
                    || name.ends_with(".timeindex")
                    || name == crate::storage::scrub::SCRUBBED_FILE
            };
            if !empty {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether the segment at `path` holds more than its header (and the
    /// zeros of a spare it took, `klog-broker --preallocate`).
    fn holds_records(&self, path: &Path) -> Result<bool> {
        let file = self.vfs.open_read(path).ctx("open", path)?;
        let len = file.len().ctx("stat", path)?;
        let header = SEGMENT_HEADER_BYTES as u64;
        let zeros = crate::storage::fs::is_zero_range(&*file, header, len).ctx("read", path)?;
        Ok(len > header && !zeros)
    }

    /// Removes a partition directory holding an empty log.
    fn remove_empty_partition(&self, dir: &Path) -> Result<()> {
        for name in self.vfs.list(dir).ctx("list", dir)? {
            let path = dir.join(name);
            self.vfs.remove(&path).ctx("remove", &path)?;
        }
        self.vfs.remove_dir(dir).ctx("remove", dir)
    }

    /// The directory of a partition.
    pub fn partition_dir(&self, topic: &str, partition: u32) -> PathBuf {
        self.dir.join(partition_dir_name(topic, partition))
    }

    /// Opens a partition's log; the topic and partition must exist.
    pub fn open_log(
        &self,
        topic: &str,
        partition: u32,
        config: LogConfig,
        options: OpenOptions,
    ) -> Result<Log> {
        let count = self.partition_count(topic)?;
        if partition >= count {
            return Err(Error::UnknownPartition {
                topic: topic.to_string(),
                partition,
                count,
            });
        }
        Log::open(
            Arc::clone(&self.vfs),
            &self.partition_dir(topic, partition),
            config,
            options,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names() {
        for ok in ["t", "a.b_c-d", "A9", &"x".repeat(249)] {
            assert!(validate_topic(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "é",
            "a b",
            &"x".repeat(250),
            "a\0b",
        ] {
            assert!(validate_topic(bad).is_err(), "{bad:?}");
        }
    }

    /// A data directory on a simulated disk.
    /// Partition `p` of `topic`, opened for a test (no lock, small
    /// indexes).
    fn test_log(store: &Store, topic: &str, p: u32) -> Log {
        let options = OpenOptions {
            writable: true,
            lock: false,
        };
        let config = LogConfig {
            index_bytes_max: 4096,
            ..LogConfig::default()
        };
        store.open_log(topic, p, config, options).unwrap()
    }

    /// Appends one record to partition `p` of `topic`, and closes it.
    fn append_one(store: &Store, topic: &str, p: u32) {
        let mut log = test_log(store, topic, p);
        let mut b = crate::storage::record::BatchBuilder::new();
        b.push(0, None, &[], b"x");
        log.append(&mut b.finish().to_vec(), 0).unwrap();
        log.close().unwrap();
    }

    fn sim_store() -> (crate::storage::fs::sim::SimFs, Store) {
        let sim = crate::storage::fs::sim::SimFs::new();
        sim.create_dir_all_durable(Path::new("/data"));
        let store = Store::with_vfs("/data", Arc::new(sim.clone()));
        (sim, store)
    }

    /// A create that fails at any step (the disk gone at the n-th change:
    /// what is left can be neither undone nor finished) leaves the whole
    /// topic or none of it, never a topic of fewer partitions; the next
    /// create makes it whole, over what the failed one left.
    #[test]
    fn a_create_that_fails_at_any_step_leaves_the_whole_topic_or_none() {
        let mut failed = 0;
        for n in 0.. {
            let (sim, store) = sim_store();
            sim.cut_power_after(n);
            let created = store.create_topic("t", 4);
            let topics = store.topics().unwrap();
            assert!(
                matches!(topics.get("t"), None | Some(4)),
                "cut after {n}: {topics:?}"
            );
            sim.restore_power();
            assert_eq!(store.create_topic("t", 4).unwrap(), 4, "cut after {n}");
            assert_eq!(store.partition_dirs().unwrap(), 4, "cut after {n}");
            for p in 0..4 {
                let options = OpenOptions {
                    writable: true,
                    lock: false,
                };
                let config = LogConfig {
                    index_bytes_max: 4096,
                    write_buffer_bytes: 4096,
                    ..LogConfig::default()
                };
                let log = store.open_log("t", p, config, options);
                assert_eq!(log.unwrap().next_offset(), 0, "cut after {n}");
            }
            if created.is_ok() {
                break;
            }
            failed += 1;
        }
        assert!(failed > 8, "{failed}");
    }

    /// A power cut at any step of a create, the disk's unsynced entries
    /// lost, leaves the whole topic or none of it; what it left is removed
    /// by the next create, whatever count that one asks for.
    #[test]
    fn a_power_cut_at_any_step_of_a_create_leaves_the_whole_topic_or_none() {
        for n in 0.. {
            let (sim, store) = sim_store();
            sim.cut_power_after(n);
            let created = store.create_topic("t", 4).is_ok();
            sim.crash(&mut |_| 0);
            sim.restore_power();
            let survived = store.topics().unwrap().get("t").copied();
            assert!(
                matches!(survived, None | Some(4)),
                "cut after {n}: {survived:?}"
            );
            let want = survived.unwrap_or(3);
            assert_eq!(store.create_topic("t", 3).unwrap(), want, "cut after {n}");
            assert_eq!(
                store.partition_dirs().unwrap(),
                want as usize,
                "cut after {n}"
            );
            if created {
                assert_eq!(survived, Some(4), "a create that returned is durable");
                break;
            }
        }
    }

    /// A power cut at any step of a deletion leaves the whole topic, with
    /// its records, or none of it: once the deletion could have returned,
    /// nothing of it comes back, at the next start
    /// ([`Store::finish_deletions`]) or at a new creation of the name.
    #[test]
    fn a_power_cut_at_any_step_of_a_deletion_leaves_the_whole_topic_or_none() {
        let mut cut = 0;
        for n in 0.. {
            let (sim, store) = sim_store();
            store.create_topic("t", 3).unwrap();
            store.create_topic("other", 1).unwrap();
            for p in 0..3 {
                append_one(&store, "t", p);
            }
            sim.cut_power_after(n);
            let deleted = store.delete_topic("t").is_ok();
            sim.crash(&mut |_| 0);
            sim.restore_power();
            let seen = store.topics().unwrap();
            let whole = seen.get("t") == Some(&3);
            assert!(whole || !seen.contains_key("t"), "cut after {n}: {seen:?}");
            assert_eq!(seen.get("other"), Some(&1), "cut after {n}");
            store.finish_deletions().unwrap();
            let after = store.topics().unwrap();
            if whole {
                assert!(
                    !deleted,
                    "cut after {n}: a deletion that returned came back"
                );
                for p in 0..3 {
                    let next = test_log(&store, "t", p).next_offset();
                    assert_eq!(next, 1, "cut after {n}: its records");
                }
            } else {
                assert!(!after.contains_key("t"), "cut after {n}");
                assert_eq!(
                    store.partition_dirs_besides("other").unwrap(),
                    0,
                    "cut after {n}"
                );
                // A new topic of the name starts empty.
                assert_eq!(store.create_topic("t", 2).unwrap(), 2, "cut after {n}");
                let next = test_log(&store, "t", 0).next_offset();
                assert_eq!(next, 0, "cut after {n}");
            }
            if deleted {
                break;
            }
            cut += 1;
        }
        assert!(cut > 3, "{cut}");
    }

    /// A power cut at any step of a growth leaves the topic with its old
    /// count or its new one, its records kept; a growth that returned is
    /// durable; what a cut one left is removed by the next growth,
    /// whatever count that one asks for.
    #[test]
    fn a_power_cut_at_any_step_of_a_growth_leaves_the_old_count_or_the_new() {
        let mut cut = 0;
        for n in 0.. {
            let (sim, store) = sim_store();
            store.create_topic("t", 2).unwrap();
            append_one(&store, "t", 1);
            sim.cut_power_after(n);
            let grown = store.add_partitions("t", 5).is_ok();
            sim.crash(&mut |_| 0);
            sim.restore_power();
            let survived = store.topics().unwrap()["t"];
            assert!(matches!(survived, 2 | 5), "cut after {n}: {survived}");
            assert!(
                !grown || survived == 5,
                "cut after {n}: a growth that returned"
            );
            let want = survived.max(4);
            assert_eq!(store.add_partitions("t", 4).unwrap(), want, "cut after {n}");
            assert_eq!(
                store.partition_dirs().unwrap(),
                want as usize,
                "cut after {n}"
            );
            let next = test_log(&store, "t", 1).next_offset();
            assert_eq!(next, 1, "cut after {n}: its records");
            for p in 2..want {
                let next = test_log(&store, "t", p).next_offset();
                assert_eq!(next, 0, "cut after {n}: t-{p}");
            }
            if grown {
                break;
            }
            cut += 1;
        }
        assert!(cut > 5, "{cut}");
        let (_sim, store) = sim_store();
        assert!(matches!(
            store.add_partitions("none", 2),
            Err(Error::UnknownTopic { .. })
        ));
    }

    /// A deletion interrupted by an error is finished by the next
    /// creation of the name: the new topic holds nothing of the old one.
    #[test]
    fn a_creation_finishes_an_interrupted_deletion() {
        let (sim, store) = sim_store();
        store.create_topic("t", 4).unwrap();
        sim.cut_power_after(3);
        assert!(store.delete_topic("t").is_err());
        sim.restore_power();
        assert!(!store.topics().unwrap().contains_key("t"));
        assert_eq!(store.create_topic("t", 1).unwrap(), 1);
        assert_eq!(store.partition_dirs().unwrap(), 1);
        assert!(!sim.files().keys().any(|p| p.ends_with("t.del")));
    }

    /// Directories of a topic without its partition 0, holding empty logs
    /// (what an interrupted create leaves), are removed by the next create
    /// of that topic: it has the count that create asks for.
    #[test]
    fn a_create_removes_what_an_interrupted_one_left() {
        let (_sim, store) = sim_store();
        store.create_topic("t", 8).unwrap();
        store
            .remove_empty_partition(Path::new("/data/t-0"))
            .unwrap();
        assert_eq!(store.partition_dirs().unwrap(), 7);
        assert_eq!(store.create_topic("t", 4).unwrap(), 4);
        assert_eq!(store.topics().unwrap().get("t"), Some(&4));
        assert_eq!(store.partition_dirs().unwrap(), 4);
        assert_eq!(store.partition_dirs_besides("t").unwrap(), 0);
        store.remove_unwritten_topic("t").unwrap();
        assert_eq!(store.partition_dirs().unwrap(), 0);
    }

    /// A create that fails while it can still undo (a failed fsync of the
    /// data directory) leaves nothing of the topic.
    #[test]
    fn a_failed_create_leaves_nothing() {
        let (sim, store) = sim_store();
        sim.fail_next_sync(|p| p == Path::new("/data"));
        assert!(store.create_topic("t", 3).is_err());
        assert_eq!(store.topics().unwrap().len(), 0);
        assert_eq!(store.partition_dirs().unwrap(), 0);
        assert_eq!(
            store.vfs.list(Path::new("/data")).unwrap(),
            Vec::<String>::new()
        );
    }

    /// Directories of a topic without its partition 0 that hold records
    /// are not an interrupted create's: a create of that topic is refused,
    /// naming them, and leaves them as they are.
    #[test]
    fn a_create_over_partitions_holding_records_is_refused() {
        let (sim, store) = sim_store();
        store.create_topic("t", 2).unwrap();
        let segment = Path::new("/data/t-1/00000000000000000000.log");
        let mut bytes = sim.read(segment).unwrap();
        bytes.extend_from_slice(&[7; 100]);
        sim.write(segment, &bytes);
        store
            .remove_empty_partition(Path::new("/data/t-0"))
            .unwrap();
        assert_eq!(store.topics().unwrap().len(), 0);
        let err = store.create_topic("t", 2).unwrap_err().to_string();
        assert!(err.contains("/data/t-1 holds records"), "{err}");
        assert_eq!(sim.read(segment).unwrap(), bytes);
        assert!(!sim.files().keys().any(|p| p.starts_with("/data/t-0")));
    }

    #[test]
    fn partition_dirs() {
        assert_eq!(
            parse_partition_dir("my-topic-12"),
            Some(("my-topic".into(), 12))
        );
        assert_eq!(parse_partition_dir("t-0"), Some(("t".into(), 0)));
        for bad in ["t", "t-", "-1", "t-01", "t-x", "..-0", "t-99999999999"] {
            assert_eq!(parse_partition_dir(bad), None, "{bad}");
        }
    }
}
