//! Per-topic configs: Kafka's names and values, kept in the registry as
//! overrides of the brokers' command lines. Every broker that holds a
//! topic reads them when it opens it and again within a second of a
//! change, and applies them without a restart (`klog-broker`'s
//! `topic_configs`); Kafka clients change them with AlterConfigs and
//! IncrementalAlterConfigs and read them with DescribeConfigs.
//!
//! # Format
//!
//! A topic with overrides has one registry configuration entry of kind
//! [`KIND`] named after it (a directory registry's
//! `config/topics/<topic>.json`, ZooKeeper's
//! `/config/topics/<topic>`): a JSON object, as Kafka kept the same
//! entries in ZooKeeper.
//!
//! | key | JSON | meaning |
//! |---|---|---|
//! | `version` | number, 1 | the format |
//! | `config` | object of strings | each override: a name of the table below and its value, in the canonical form [`TopicConfig::set`] writes |
//!
//! ```json
//! {"version":1,"config":{"retention.ms":"3600000","segment.bytes":"1048576"}}
//! ```
//!
//! A topic without overrides has no entry. An entry that does not parse
//! is an error that names it: a broker keeps the configs it applied last,
//! and one that opens the topic meanwhile keeps every segment (no
//! retention) until it reads them; an edit of it is refused (it would
//! drop what it held), and a replacement (AlterConfigs, [`replace`])
//! repairs it. A name klog does not know (a newer klog's) is kept and
//! ignored.
//!
//! # The configs a topic sets
//!
//! | name | type | values | what it does in klog | broker flag it overrides |
//! |---|---|---|---|---|
//! | `retention.ms` | long | -1 (forever) or ≥ 0 | deletes segments whose newest record is older | `--retention` |
//! | `retention.bytes` | long | -1 (no bound) or ≥ 0 | deletes the oldest segments while the partition is larger | `--retention-bytes` |
//! | `segment.bytes` | int | 4096 to 2³¹−1 | rolls the active segment at this size | `--segment-bytes` |
//! | `segment.ms` | long | ≥ 1 | rolls it this long after its first record | `--segment-age` |
//! | `max.message.bytes` | int | 1 to 64 MiB | the largest record a produce may carry | `--max-record-bytes` |
//! | `min.insync.replicas` | int | ≥ 1 | the in-sync replicas an acks=all produce needs | `--min-insync-replicas` |
//! | `cleanup.policy` | list | `delete`, `compact`, `compact,delete` | how old records go: `delete` deletes whole segments by retention; `compact` keeps each key's latest record ([`crate::storage::cleaner`]); both do both | `--log-cleanup-policy` |
//! | `delete.retention.ms` | long | ≥ 0 | how long a compacted topic keeps a tombstone | — |
//! | `min.compaction.lag.ms` | long | ≥ 0 | how long a record stays uncompacted | — |
//! | `min.cleanable.dirty.ratio` | double | 0 to 1 | the dirty share of a compacted log that makes the cleaner clean it | — |
//!
//! The other configs DescribeConfigs shows (`flush.messages`, `flush.ms`,
//! `segment.index.bytes`, `index.interval.bytes`, `compression.type`,
//! `message.timestamp.type`) are the broker's: setting one is refused
//! with a message that says so.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::coord::registry::Registry;
use crate::error::{Error, Result};
use crate::limits;
use crate::storage::log::LogConfig;

/// The registry's kind of configuration entry that holds topic configs.
pub const KIND: &str = "topics";

/// The format's version.
const VERSION: u32 = 1;

/// The type of a config, as DescribeConfigs names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// A comma-separated list.
    List,
    /// A floating-point number.
    Double,
}

/// The configs a topic may set, and their types.
pub const SETTABLE: &[(&str, Type)] = &[
    ("cleanup.policy", Type::List),
    ("delete.retention.ms", Type::Long),
    ("max.message.bytes", Type::Int),
    ("min.cleanable.dirty.ratio", Type::Double),
    ("min.compaction.lag.ms", Type::Long),
    ("min.insync.replicas", Type::Int),
    ("retention.bytes", Type::Long),
    ("retention.ms", Type::Long),
    ("segment.bytes", Type::Int),
    ("segment.ms", Type::Long),
];

/// Topic configs DescribeConfigs shows that only the broker sets.
pub const BROKER_ONLY: &[(&str, &str)] = &[
    (
        "compression.type",
        "klog stores batches as producers send them",
    ),
    ("flush.messages", "set with klog-broker --flush-messages"),
    ("flush.ms", "set with klog-broker --flush-interval"),
    (
        "index.interval.bytes",
        "set with klog-broker --index-interval-bytes",
    ),
    (
        "message.timestamp.type",
        "klog keeps the producer's CreateTime",
    ),
    ("segment.index.bytes", "set with klog-broker --index-bytes"),
];

/// Whether `name` is a config a topic may set.
pub fn is_settable(name: &str) -> bool {
    SETTABLE.iter().any(|(n, _)| *n == name)
}

/// A topic's overrides, as the registry keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfig {
    version: u32,
    config: BTreeMap<String, String>,
}

impl Default for TopicConfig {
    fn default() -> TopicConfig {
        TopicConfig::new()
    }
}

impl TopicConfig {
    /// No overrides: the brokers' configs.
    pub fn new() -> TopicConfig {
        TopicConfig {
            version: VERSION,
            config: BTreeMap::new(),
        }
    }

    /// Parses a registry entry, checking every override.
    pub fn parse(bytes: &[u8]) -> std::result::Result<TopicConfig, String> {
        let parsed: TopicConfig = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if parsed.version != VERSION {
            return Err(format!("version {} (klog reads {VERSION})", parsed.version));
        }
        let mut checked = TopicConfig::new();
        for (name, value) in &parsed.config {
            if is_settable(name) {
                checked.set(name, value)?;
            } else {
                // A config a newer klog sets: kept, and ignored here.
                checked.config.insert(name.clone(), value.clone());
            }
        }
        Ok(checked)
    }

    /// The entry's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("strings serialize")
    }

    /// The overrides, by name.
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.config
    }

    /// The override of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.config.get(name).map(String::as_str)
    }

    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.config.is_empty()
    }

    /// Sets `name` to `value`, checked and in canonical form, or says
    /// why not.
    pub fn set(&mut self, name: &str, value: &str) -> std::result::Result<(), String> {
        let canonical = check(name, value)?;
        self.config.insert(name.to_string(), canonical);
        Ok(())
    }

    /// Removes the override of `name` (the broker's value counts again);
    /// a config no topic sets is refused.
    pub fn remove(&mut self, name: &str) -> std::result::Result<(), String> {
        settable(name)?;
        self.config.remove(name);
        Ok(())
    }

    /// The log config and minimum in-sync replicas of a topic with these
    /// overrides on a broker whose own are `log` and `min_insync`.
    pub fn apply(&self, log: &LogConfig, min_insync: u32) -> (LogConfig, u32) {
        let mut log = log.clone();
        let mut min_insync = min_insync;
        for (name, value) in &self.config {
            // Checked when set: the numbers parse and are in range.
            let number = value.parse::<i64>().unwrap_or(-1);
            let bound = u64::try_from(number).ok();
            match name.as_str() {
                "retention.ms" => log.retention_ms = bound,
                "retention.bytes" => log.retention_bytes = bound,
                "segment.bytes" => log.segment_bytes = bound.unwrap_or(log.segment_bytes),
                "segment.ms" => log.segment_age_ms = bound,
                "max.message.bytes" => {
                    log.record_bytes_max = u32::try_from(number).unwrap_or(log.record_bytes_max)
                }
                "min.insync.replicas" => {
                    min_insync = u32::try_from(number).unwrap_or(min_insync);
                }
                "cleanup.policy" => {
                    let policies: Vec<&str> = value.split(',').collect();
                    log.delete = policies.contains(&"delete");
                    log.compact = policies.contains(&"compact");
                }
                "delete.retention.ms" => {
                    log.delete_retention_ms = bound.unwrap_or(log.delete_retention_ms)
                }
                "min.compaction.lag.ms" => {
                    log.min_compaction_lag_ms = bound.unwrap_or(log.min_compaction_lag_ms)
                }
                "min.cleanable.dirty.ratio" => {
                    log.min_cleanable_dirty_ratio =
                        value.parse().unwrap_or(log.min_cleanable_dirty_ratio)
                }
                _ => {}
            }
        }
        (log, min_insync)
    }
}

/// Checks that `name` is a config a topic sets.
fn settable(name: &str) -> std::result::Result<Type, String> {
    if let Some((_, kind)) = SETTABLE.iter().find(|(n, _)| *n == name) {
        return Ok(*kind);
    }
    if let Some((_, why)) = BROKER_ONLY.iter().find(|(n, _)| *n == name) {
        return Err(format!("{name} is the broker's, not a topic's: {why}"));
    }
    Err(format!("klog has no topic config {name:?}"))
}

/// Checks `value` for config `name`: its canonical form, or why not.
fn check(name: &str, value: &str) -> std::result::Result<String, String> {
    let kind = settable(name)?;
    let value = value.trim();
    match kind {
        Type::List => return cleanup_policy(value),
        Type::Double => {
            return match value.parse::<f64>() {
                Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio.to_string()),
                _ => Err(format!("{name} {value:?} is not a number from 0 to 1")),
            }
        }
        Type::Int | Type::Long => {}
    }
    let number: i64 = value
        .parse()
        .map_err(|_| format!("{name} {value:?} is not a whole number"))?;
    let (min, max): (i64, i64) = match name {
        "retention.ms" | "retention.bytes" => (-1, i64::MAX),
        "delete.retention.ms" | "min.compaction.lag.ms" => (0, i64::MAX),
        "segment.bytes" => (limits::SEGMENT_BYTES_MIN as i64, i64::from(i32::MAX)),
        "segment.ms" => (1, i64::MAX),
        "max.message.bytes" => (1, i64::from(limits::RECORD_BYTES_MAX_LIMIT)),
        _ => (1, i64::from(i32::MAX)),
    };
    if !(min..=max).contains(&number) {
        return Err(format!("{name} {number} is outside {min}..={max}"));
    }
    Ok(number.to_string())
}

/// A `cleanup.policy` in canonical form: `delete`, `compact` or
/// `compact,delete` (Kafka's names, in any order, spaces allowed).
fn cleanup_policy(value: &str) -> std::result::Result<String, String> {
    let mut policies: Vec<&str> = value.split(',').map(str::trim).collect();
    policies.sort_unstable();
    policies.dedup();
    match policies[..] {
        ["delete"] | ["compact"] | ["compact", "delete"] => Ok(policies.join(",")),
        _ => Err(format!(
            "cleanup.policy {value:?}: \"delete\", \"compact\" or \"compact,delete\""
        )),
    }
}

/// Each open topic's overrides as a broker last read them.
#[derive(Debug, Default)]
pub struct Cache(Mutex<HashMap<String, TopicConfig>>);

impl Cache {
    /// `topic`'s overrides as last read, if they were.
    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(topic).cloned()
    }

    /// Forgets `topic` (deleted).
    pub fn forget(&self, topic: &str) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(topic);
    }

    /// Keeps `config` as `topic`'s: whether it differs from what was kept.
    pub fn set(&self, topic: &str, config: TopicConfig) -> bool {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(topic.to_string(), config.clone()) != Some(config)
    }
}

/// A topic's overrides in `registry` (none when it has no entry). An
/// entry that does not parse is an error that names it.
pub fn read(registry: &dyn Registry, topic: &str) -> Result<TopicConfig> {
    match registry.config(KIND, topic)? {
        None => Ok(TopicConfig::new()),
        Some(bytes) => TopicConfig::parse(&bytes).map_err(|why| damaged(registry, topic, &why)),
    }
}

/// Changes a topic's overrides in `registry` with `change` (compare and
/// set: a change made meanwhile elsewhere is read, not lost), and
/// answers them as stored. A change that is refused changes nothing.
///
/// An entry that does not parse (a damaged disk) refuses the change: an
/// edit of some configs would drop the others it held, and a retention
/// dropped is records deleted. [`replace`] replaces it, which is its
/// repair. A change refused, or one that changes nothing, writes nothing.
pub fn change(
    registry: &dyn Registry,
    topic: &str,
    change: &mut dyn FnMut(&mut TopicConfig) -> std::result::Result<(), String>,
) -> Result<std::result::Result<TopicConfig, String>> {
    change_entry(registry, &topic_entry(topic, false), change)
}

/// [`change`] that replaces the whole entry (AlterConfigs, CreateTopics):
/// `change` is given the overrides stored, or none where the entry does
/// not parse, which it replaces.
pub fn replace(
    registry: &dyn Registry,
    topic: &str,
    change: &mut dyn FnMut(&mut TopicConfig) -> std::result::Result<(), String>,
) -> Result<std::result::Result<TopicConfig, String>> {
    change_entry(registry, &topic_entry(topic, true), change)
}

/// A topic's entry of overrides.
fn topic_entry(topic: &str, repairs: bool) -> Entry<'_> {
    Entry {
        kind: KIND,
        name: topic,
        parse: &TopicConfig::parse,
        encode: &TopicConfig::to_bytes,
        repairs,
    }
}

/// A registry entry of overrides: its kind and name, and how its bytes
/// read and are written (a broker's entry names its configs otherwise:
/// [`crate::coord::broker_config`]).
pub(crate) struct Entry<'e> {
    pub(crate) kind: &'e str,
    pub(crate) name: &'e str,
    pub(crate) parse: &'e dyn Fn(&[u8]) -> std::result::Result<TopicConfig, String>,
    pub(crate) encode: &'e dyn Fn(&TopicConfig) -> Vec<u8>,
    /// Whether a change may replace an entry that does not parse (else it
    /// is refused, naming the entry).
    pub(crate) repairs: bool,
}

/// [`change`] of any entry of overrides.
pub(crate) fn change_entry(
    registry: &dyn Registry,
    entry: &Entry<'_>,
    change: &mut dyn FnMut(&mut TopicConfig) -> std::result::Result<(), String>,
) -> Result<std::result::Result<TopicConfig, String>> {
    let edit =
        |stored: Option<&[u8]>,
         change: &mut dyn FnMut(&mut TopicConfig) -> std::result::Result<(), String>| {
            let parsed = stored.map(|b| (entry.parse)(b));
            if let (Some(Err(why)), false) = (&parsed, entry.repairs) {
                let refused = Err(damaged_entry(entry, why));
                return (refused, true);
            }
            let before = parsed.and_then(|p| p.ok());
            let mut config = before.clone().unwrap_or_default();
            let outcome = change(&mut config).map(|()| config);
            // A damaged entry is rewritten even by a change that keeps nothing.
            let same = stored.is_none() || before.is_some();
            let unchanged = matches!(&outcome, Ok(c) if same && before.as_ref().unwrap_or(&TopicConfig::new()) == c);
            (outcome, unchanged)
        };
    // A first look, to write nothing for a refused or empty change.
    let (kind, name) = (entry.kind, entry.name);
    let (first, unchanged) = edit(registry.config(kind, name)?.as_deref(), change);
    if first.is_err() || unchanged {
        return Ok(first);
    }
    let mut outcome = first;
    registry.update_config(kind, name, &mut |stored| {
        outcome = edit(stored, change).0;
        Ok(match &outcome {
            Err(_) => stored.map(<[u8]>::to_vec),
            Ok(c) if c.is_empty() => None,
            Ok(c) => Some((entry.encode)(c)),
        })
    })?;
    Ok(outcome)
}

/// Why a change of the configs of `entry`, which do not parse (`why`),
/// is refused.
fn damaged_entry(entry: &Entry<'_>, why: &str) -> String {
    format!(
        "the stored {} configs of {:?} do not parse ({why}): a change of some would drop the \
         others, so set all of them again with AlterConfigs (alter_configs, kafkajs's \
         alterConfigs, kafka-configs.sh --alter without incremental changes), which replaces \
         the entry",
        entry.kind, entry.name
    )
}

/// The error of an entry that does not parse, and its repair.
fn damaged(registry: &dyn Registry, topic: &str, why: &str) -> Error {
    Error::Config(format!(
        "the configs of topic {topic:?} in registry {} do not parse ({why}); until they are set \
         again, its brokers keep what they applied, and one that opens it keeps every segment: \
         set all of them again with AlterConfigs (alter_configs, kafkajs's alterConfigs, \
         kafka-configs.sh --alter without incremental changes), which replaces the entry; any \
         config it does not name is the broker's again",
        registry.location()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_and_kept_in_canonical_form() {
        let mut c = TopicConfig::new();
        c.set("retention.ms", " 3600000 ").unwrap();
        c.set("retention.bytes", "-1").unwrap();
        assert_eq!(c.get("retention.ms"), Some("3600000"));
        for (name, value) in [
            ("retention.ms", "-2"),
            ("retention.ms", "soon"),
            ("segment.bytes", "100"),
            ("segment.bytes", "4294967296"),
            ("segment.ms", "0"),
            ("max.message.bytes", "0"),
            ("min.insync.replicas", "0"),
            ("cleanup.policy", "compacted"),
            ("cleanup.policy", ""),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("min.cleanable.dirty.ratio", "half"),
            ("delete.retention.ms", "-1"),
            ("flush.ms", "10"),
            ("no.such.config", "1"),
        ] {
            let before = c.clone();
            assert!(c.set(name, value).is_err(), "{name}={value}");
            assert_eq!(c, before, "a refused value changes nothing");
        }
        assert!(c.remove("flush.messages").unwrap_err().contains("broker"));
        c.remove("retention.ms").unwrap();
        assert_eq!(c.get("retention.ms"), None);
        for (value, canonical) in [
            ("compact", "compact"),
            ("delete, compact", "compact,delete"),
            ("compact,delete,compact", "compact,delete"),
        ] {
            c.set("cleanup.policy", value).unwrap();
            assert_eq!(c.get("cleanup.policy"), Some(canonical));
        }
        c.set("min.cleanable.dirty.ratio", "0.10").unwrap();
        assert_eq!(c.get("min.cleanable.dirty.ratio"), Some("0.1"));
    }

    #[test]
    fn overrides_apply_over_the_brokers_configs() {
        let mut c = TopicConfig::new();
        for (name, value) in [
            ("retention.ms", "-1"),
            ("retention.bytes", "1000000"),
            ("segment.bytes", "65536"),
            ("segment.ms", "60000"),
            ("max.message.bytes", "2048"),
            ("min.insync.replicas", "2"),
            ("cleanup.policy", "compact"),
            ("delete.retention.ms", "1000"),
            ("min.compaction.lag.ms", "2000"),
            ("min.cleanable.dirty.ratio", "0.25"),
        ] {
            c.set(name, value).unwrap();
        }
        let base = LogConfig::default();
        let (log, min_insync) = c.apply(&base, 1);
        assert!(log.compact && !log.delete);
        assert_eq!(
            (
                log.delete_retention_ms,
                log.min_compaction_lag_ms,
                log.min_cleanable_dirty_ratio
            ),
            (1000, 2000, 0.25)
        );
        c.set("cleanup.policy", "delete,compact").unwrap();
        let (both, _) = c.apply(&base, 1);
        assert!(both.compact && both.delete);
        assert_eq!(log.retention_ms, None);
        assert_eq!(log.retention_bytes, Some(1_000_000));
        assert_eq!(log.segment_bytes, 65536);
        assert_eq!(log.segment_age_ms, Some(60000));
        assert_eq!(log.record_bytes_max, 2048);
        assert_eq!(min_insync, 2);
        log.validate().unwrap();
        let (same, one) = TopicConfig::new().apply(&base, 1);
        assert_eq!(
            (same.retention_ms, same.segment_bytes, one),
            (base.retention_ms, base.segment_bytes, 1)
        );
    }

    #[test]
    fn an_entry_parses_back_and_a_bad_one_is_refused() {
        let mut c = TopicConfig::new();
        c.set("segment.bytes", "1048576").unwrap();
        let bytes = c.to_bytes();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"version":1,"config":{"segment.bytes":"1048576"}}"#
        );
        assert_eq!(TopicConfig::parse(&bytes).unwrap(), c);
        for bad in [
            &br#"{"version":2,"config":{}}"#[..],
            br#"{"version":1,"config":{"segment.bytes":"1"}}"#,
            b"{",
        ] {
            assert!(
                TopicConfig::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_change_is_stored_and_a_refused_one_changes_nothing() {
        let registry = crate::coord::mem::MemRegistry::default();
        let stored = change(&registry, "t", &mut |c| c.set("retention.ms", "5"))
            .unwrap()
            .unwrap();
        assert_eq!(read(&registry, "t").unwrap(), stored);
        let refused = change(&registry, "t", &mut |c| {
            c.set("retention.bytes", "7")?;
            c.set("segment.bytes", "1")
        })
        .unwrap();
        assert!(refused.is_err());
        assert_eq!(read(&registry, "t").unwrap(), stored);
        // The last override removed: no entry at all.
        change(&registry, "t", &mut |c| c.remove("retention.ms"))
            .unwrap()
            .unwrap();
        assert_eq!(registry.config(KIND, "t").unwrap(), None);
        registry.set_config(KIND, "t", b"{").unwrap();
        let e = read(&registry, "t").unwrap_err().to_string();
        assert!(e.contains("do not parse") && e.contains("alter"), "{e}");
        // An edit is refused (it would drop what the entry held) and
        // writes nothing; the advice works: AlterConfigs replaces it.
        let edit = change(&registry, "t", &mut |c| c.set("retention.ms", "1000"));
        assert!(edit.unwrap().unwrap_err().contains("AlterConfigs"));
        assert_eq!(registry.config(KIND, "t").unwrap().unwrap(), b"{");
        let repaired = replace(&registry, "t", &mut |c| c.set("retention.ms", "1000"));
        repaired.unwrap().unwrap();
        assert_eq!(
            read(&registry, "t").unwrap().get("retention.ms"),
            Some("1000")
        );
        // A name a newer klog sets is kept, and ignored.
        let newer = br#"{"version":1,"config":{"retention.ms":"5","newer.config":"x"}}"#;
        registry.set_config(KIND, "t", newer).unwrap();
        let c = read(&registry, "t").unwrap();
        assert_eq!(c.get("newer.config"), Some("x"));
        assert_eq!(c.apply(&LogConfig::default(), 1).0.retention_ms, Some(5));
    }

    #[test]
    fn a_refused_or_empty_change_writes_nothing() {
        let registry = crate::coord::mem::MemRegistry::default();
        change(&registry, "t", &mut |c| c.set("retention.ms", "5"))
            .unwrap()
            .unwrap();
        let writes = || registry.config_writes();
        let before = writes();
        let refused = change(&registry, "t", &mut |c| c.set("segment.bytes", "1")).unwrap();
        assert!(refused.is_err());
        change(&registry, "t", &mut |c| c.set("retention.ms", "5"))
            .unwrap()
            .unwrap();
        assert_eq!(writes(), before, "nothing written");
        change(&registry, "t", &mut |c| c.set("retention.ms", "6"))
            .unwrap()
            .unwrap();
        assert_eq!(writes(), before + 1);
    }
}
