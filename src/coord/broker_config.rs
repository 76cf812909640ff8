//! Dynamic broker configs: the topic-level defaults a broker's command
//! line sets, changed at runtime for every broker of the cluster or for
//! one (Kafka's `kafka-configs.sh --entity-type brokers --entity-default`
//! or `--entity-name ID`, AlterConfigs and IncrementalAlterConfigs of a
//! broker resource). They live in the registry; every broker reads them
//! at its start, before it opens any topic, and again every second, and
//! applies them to every topic without a restart. A topic's own configs
//! ([`super::topic_config`]) still win; a broker's own entry wins over the
//! cluster's default; both win over the command line.
//!
//! # Format
//!
//! Registry configuration entries of kind [`KIND`]: [`DEFAULT`] for the
//! cluster's default (a directory registry's
//! `config/brokers/default.json`, ZooKeeper's `/config/brokers/default`)
//! and a broker's Kafka node id for its own (`config/brokers/<node id>.json`),
//! each a JSON object as Kafka kept them in ZooKeeper:
//!
//! | key | JSON | meaning |
//! |---|---|---|
//! | `version` | number, 1 | the format |
//! | `config` | object of strings | each override: a broker config of the table below and its value, in canonical form |
//!
//! ```json
//! {"version":1,"config":{"log.retention.ms":"3600000"}}
//! ```
//!
//! An entry that does not parse is an error that names it: brokers keep
//! what they applied last, and a broker that starts meanwhile keeps every
//! segment (no retention) until it reads it; an edit of it is refused,
//! and a replacement ([`replace`], AlterConfigs) repairs it. A name klog
//! does not know is kept and ignored; a topic config's name (not also a
//! broker config's) makes the entry one that does not parse.
//!
//! # The configs set at runtime
//!
//! | broker config | topic config it is the default of | broker flag it overrides |
//! |---|---|---|
//! | `log.retention.ms` | `retention.ms` | `--retention` |
//! | `log.retention.bytes` | `retention.bytes` | `--retention-bytes` |
//! | `log.segment.bytes` | `segment.bytes` | `--segment-bytes` |
//! | `log.roll.ms` | `segment.ms` | `--segment-age` |
//! | `message.max.bytes` | `max.message.bytes` | `--max-record-bytes` |
//! | `min.insync.replicas` | `min.insync.replicas` | `--min-insync-replicas` |
//! | `log.cleanup.policy` | `cleanup.policy` (`delete`) | — |
//!
//! Values and ranges are the topic config's. Every other broker config
//! is the command line's, read-only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::registry::Registry;
use super::topic_config::{change_entry, Entry, TopicConfig};
use crate::error::{Error, Result};
use crate::storage::log::LogConfig;

/// The registry's kind of configuration entry that holds broker configs.
pub const KIND: &str = "brokers";

/// The entry of the cluster's default.
pub const DEFAULT: &str = "default";

/// Each broker config set at runtime, and the topic config it is the
/// default of.
pub const NAMES: &[(&str, &str)] = &[
    ("log.cleanup.policy", "cleanup.policy"),
    ("log.retention.bytes", "retention.bytes"),
    ("log.retention.ms", "retention.ms"),
    ("log.roll.ms", "segment.ms"),
    ("log.segment.bytes", "segment.bytes"),
    ("message.max.bytes", "max.message.bytes"),
    ("min.insync.replicas", "min.insync.replicas"),
];

/// The topic config a broker config is the default of, if it is set at
/// runtime.
pub fn topic_name(broker_name: &str) -> Option<&'static str> {
    NAMES
        .iter()
        .find(|(b, _)| *b == broker_name)
        .map(|(_, t)| *t)
}

/// The broker config that is the default of topic config `topic_name`.
pub fn broker_name(topic_name: &str) -> Option<&'static str> {
    NAMES
        .iter()
        .find(|(_, t)| *t == topic_name)
        .map(|(b, _)| *b)
}

/// What counts on one broker: the cluster's default and its own entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layers {
    /// The cluster's default ([`DEFAULT`]).
    pub default: TopicConfig,
    /// This broker's own (its node id's entry), over the default.
    pub own: TopicConfig,
}

impl Layers {
    /// Reads both entries of broker `node` (its Kafka node id).
    pub fn read(registry: &dyn Registry, node: &str) -> Result<Layers> {
        Ok(Layers {
            default: read(registry, DEFAULT)?,
            own: read(registry, node)?,
        })
    }

    /// The log config and minimum in-sync replicas a topic without
    /// configs of its own has on a broker whose command line says `log`
    /// and `min_insync`.
    pub fn apply(&self, log: &LogConfig, min_insync: u32) -> (LogConfig, u32) {
        let (log, min_insync) = self.default.apply(log, min_insync);
        self.own.apply(&log, min_insync)
    }

    /// Which layer sets topic config `name`: `Some(true)` this broker's
    /// own, `Some(false)` the default, `None` neither.
    pub fn sets(&self, name: &str) -> Option<bool> {
        match (self.own.get(name), self.default.get(name)) {
            (Some(_), _) => Some(true),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }
}

/// An entry as stored: broker configs' names.
#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    config: BTreeMap<String, String>,
}

/// Parses an entry into overrides named as topic configs, each checked.
pub fn parse(bytes: &[u8]) -> std::result::Result<TopicConfig, String> {
    let stored: Stored = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let topic_only = |n: &&String| topic_name(n).is_none() && super::topic_config::is_settable(n);
    if let Some(name) = stored.config.keys().find(topic_only) {
        // Only a broker config's name counts here; a topic config's would
        // be taken for one (and clash with it).
        let broker = broker_name(name).unwrap_or("no broker config");
        return Err(format!(
            "it names topic config {name}, not a broker config ({broker})"
        ));
    }
    let renamed = Stored {
        version: stored.version,
        config: (stored.config.into_iter())
            .map(|(name, value)| (topic_name(&name).map_or(name, str::to_string), value))
            .collect(),
    };
    TopicConfig::parse(&serde_json::to_vec(&renamed).expect("strings serialize"))
}

/// The bytes of an entry of `config` (named as topic configs).
pub fn encode(config: &TopicConfig) -> Vec<u8> {
    let stored = Stored {
        version: 1,
        config: (config.overrides().iter())
            .map(|(name, value)| (broker_name(name).unwrap_or(name).to_string(), value.clone()))
            .collect(),
    };
    serde_json::to_vec(&stored).expect("strings serialize")
}

/// The overrides of entry `name` ([`DEFAULT`] or a node id), named as
/// topic configs; none without an entry.
pub fn read(registry: &dyn Registry, name: &str) -> Result<TopicConfig> {
    match registry.config(KIND, name)? {
        None => Ok(TopicConfig::new()),
        Some(bytes) => parse(&bytes).map_err(|why| {
            Error::Config(format!(
                "the broker configs {name:?} in registry {} do not parse ({why}); until they are \
                 set again, brokers keep what they applied, and one that starts keeps every \
                 segment: set all of them again with AlterConfigs of the broker resource \
                 (kafka-configs.sh --entity-type brokers --alter without incremental changes), \
                 which replaces the entry; any config it does not name is the command line's \
                 again",
                registry.location()
            ))
        }),
    }
}

/// Changes entry `name` by compare-and-set, as
/// [`super::topic_config::change`] changes a topic's (an entry that does
/// not parse is refused: [`replace`] it).
pub fn change(
    registry: &dyn Registry,
    name: &str,
    change: &mut dyn FnMut(&mut TopicConfig) -> std::result::Result<(), String>,
) -> Result<std::result::Result<TopicConfig, String>> {
    change_entry(registry, &broker_entry(name, false), change)
}

/// [`change`] that replaces the whole entry (AlterConfigs), as
/// [`super::topic_config::replace`] does a topic's.
pub fn replace(
    registry: &dyn Registry,
    name: &str,
    change: &mut dyn FnMut(&mut TopicConfig) -> std::result::Result<(), String>,
) -> Result<std::result::Result<TopicConfig, String>> {
    change_entry(registry, &broker_entry(name, true), change)
}

/// A broker entry of overrides.
fn broker_entry(name: &str, repairs: bool) -> Entry<'_> {
    Entry {
        kind: KIND,
        name,
        parse: &parse,
        encode: &encode,
        repairs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coord::mem::MemRegistry;

    #[test]
    fn an_entry_names_broker_configs_and_reads_as_topic_configs() {
        let registry = MemRegistry::default();
        let stored = change(&registry, DEFAULT, &mut |c| c.set("retention.ms", "60000"))
            .unwrap()
            .unwrap();
        assert_eq!(stored.get("retention.ms"), Some("60000"));
        let bytes = registry.config(KIND, DEFAULT).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"version":1,"config":{"log.retention.ms":"60000"}}"#
        );
        assert_eq!(read(&registry, DEFAULT).unwrap(), stored);
        assert_eq!(read(&registry, "17").unwrap(), TopicConfig::new());
        let refused = change(&registry, DEFAULT, &mut |c| c.set("segment.bytes", "1"));
        assert!(refused.unwrap().is_err());
        assert_eq!(read(&registry, DEFAULT).unwrap(), stored, "unchanged");
        registry.set_config(KIND, "17", b"{").unwrap();
        assert!(read(&registry, "17")
            .unwrap_err()
            .to_string()
            .contains("do not parse"));
        // An unknown name is kept.
        let newer = br#"{"version":1,"config":{"log.x":"1","message.max.bytes":"1000"}}"#;
        let parsed = parse(newer).unwrap();
        assert_eq!(parsed.get("max.message.bytes"), Some("1000"));
        assert_eq!(encode(&parsed), newer.to_vec());
    }

    /// An entry that does not parse refuses an edit (which would drop
    /// what it held, a retention among them) and writes nothing; a
    /// replacement repairs it. A topic config's name in it is refused.
    #[test]
    fn a_damaged_entry_refuses_an_edit_and_a_replacement_repairs_it() {
        let registry = MemRegistry::default();
        registry.set_config(KIND, DEFAULT, b"{").unwrap();
        let edit = change(&registry, DEFAULT, &mut |c| c.set("max.message.bytes", "9"));
        let why = edit.unwrap().unwrap_err();
        assert!(
            why.contains("do not parse") && why.contains("AlterConfigs"),
            "{why}"
        );
        assert_eq!(registry.config(KIND, DEFAULT).unwrap().unwrap(), b"{");
        let mut whole = |c: &mut TopicConfig| {
            *c = TopicConfig::new();
            c.set("retention.ms", "-1")
        };
        let repaired = replace(&registry, DEFAULT, &mut whole).unwrap().unwrap();
        assert_eq!(read(&registry, DEFAULT).unwrap(), repaired);
        let clash = br#"{"version":1,"config":{"log.retention.ms":"-1","retention.ms":"1"}}"#;
        let shared_name = br#"{"version":1,"config":{"min.insync.replicas":"2"}}"#;
        assert_eq!(
            parse(shared_name).unwrap().get("min.insync.replicas"),
            Some("2")
        );
        let why = parse(clash).unwrap_err();
        assert!(
            why.contains("retention.ms") && why.contains("log.retention.ms"),
            "{why}"
        );
    }
}
