//! A data directory: topics, their partitions, and the logs behind them.
//!
//! # Layout
//!
//! ```text
//! <data-dir>/
//!   .lock                  the writer's lock, holding its pid (see crate::storage::lock)
//!   broker-id              the broker's id in a registry, stable across restarts
//!   <topic>-<partition>/   one directory per partition, partition from 0 (see crate::storage::log)
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
//! how many there are, numbered `0..n` without a gap. Topic names match
//! `[A-Za-z0-9._-]{1,249}` and are neither `.` nor `..`, so a name can never
//! reach outside the data directory. A topic name may itself contain `-`:
//! the partition is the number after the last `-`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};
use crate::limits::{PARTITIONS_MAX, TOPIC_NAME_BYTES_MAX};
use crate::storage::fs::{RealFs, Vfs};
use crate::storage::lock::DirLock;
use crate::storage::log::{Log, LogConfig, OpenOptions};

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

    /// Every topic and its partition count.
    pub fn topics(&self) -> Result<BTreeMap<String, u32>> {
        let mut partitions: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        if !self.vfs.exists(&self.dir) {
            return Ok(BTreeMap::new());
        }
        for name in self.vfs.list(&self.dir).ctx("list", &self.dir)? {
            if let Some((topic, p)) = parse_partition_dir(&name) {
                partitions.entry(topic).or_default().push(p);
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
        for p in 0..partitions {
            let dir = self.partition_dir(topic, p);
            self.vfs.create_dir_all(&dir).ctx("create", &dir)?;
            // Every partition starts with an empty segment, so that readers
            // of a partition that has no record yet find an empty log.
            let mut segment = crate::storage::segment::Segment::create(&*self.vfs, &dir, 0, 1)?;
            segment.deactivate()?;
        }
        self.vfs
            .sync_dir(&self.dir)
            .ctx("fsync directory", &self.dir)?;
        Ok(partitions)
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
