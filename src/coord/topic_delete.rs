//! Deleting a topic from a cluster, crash-safe at every step (as Kafka
//! did through `/admin/delete_topics/<topic>` in ZooKeeper): a deletion
//! marker names the brokers that still hold a copy; the topic leaves the
//! registry at once; each of those brokers deletes its copy and takes
//! its name off the marker; the last one removes the group offsets of the
//! topic and then the marker. While the marker stays, the name cannot be
//! created again, so that no broker ever serves an old copy as the new
//! topic's, and a broker that was down deletes its copy when it runs
//! again.
//!
//! # Format
//!
//! One registry configuration entry of kind [`KIND`] per topic being
//! deleted (`config/deleting/<topic>.json` in a directory,
//! `/config/deleting/<topic>` on ZooKeeper), JSON:
//!
//! | key | JSON | meaning |
//! |---|---|---|
//! | `version` | number, 1 | the format |
//! | `partitions` | number | the topic's partition count when it was marked |
//! | `brokers` | array of strings, sorted | the brokers that have not yet deleted their copy |
//!
//! ```json
//! {"version":1,"partitions":3,"brokers":["broker-1","broker-2"]}
//! ```

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::coord::registry::Registry;
use crate::error::{Error, Result};

/// The registry's kind of configuration entry that marks a deletion.
pub const KIND: &str = "deleting";

/// The format's version.
const VERSION: u32 = 1;

/// A topic's deletion in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deletion {
    version: u32,
    /// The partition count when it was marked.
    pub partitions: u32,
    /// The brokers that have not deleted their copy yet.
    pub brokers: BTreeSet<String>,
}

impl Deletion {
    fn parse(topic: &str, bytes: &[u8]) -> Result<Deletion> {
        let parsed: std::result::Result<Deletion, _> = serde_json::from_slice(bytes);
        match parsed {
            Ok(d) if d.version == VERSION => Ok(d),
            Ok(d) => Err(Error::Config(format!(
                "the deletion of topic {topic:?} is of version {} (klog reads {VERSION})",
                d.version
            ))),
            Err(e) => Err(Error::Config(format!(
                "the deletion marker of topic {topic:?} does not parse ({e}): while it stays, \
                 every broker deletes its copy of {topic:?} and the name cannot be created; once \
                 every broker that held the topic has run, remove config/deleting/{topic}.json \
                 from the registry (/config/deleting/{topic} on ZooKeeper)"
            ))),
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("strings serialize")
    }
}

/// Marks `topic` for deletion by every broker that may hold a copy (the
/// replicas its placement names, and every registered broker: a broker
/// asked for a topic makes its directories), added to a deletion already
/// marked, then removes it from the registry: the deletion, or `None` for
/// a topic neither placed nor being deleted.
///
/// A marker that does not parse (a damaged disk) is left as it is, and
/// the answer is its error: it may have named a broker that is down, so
/// it stays a deletion nobody finishes (every broker deletes its copy
/// while it stays, and the name cannot be created) until an operator
/// removes it once every broker that held the topic has run.
pub fn mark(registry: &dyn Registry, topic: &str) -> Result<Option<Deletion>> {
    let placement = registry.placement(topic)?;
    let registered: Vec<String> = registry.brokers()?.into_iter().map(|b| b.id).collect();
    let mut marked = None;
    registry.update_config(KIND, topic, &mut |stored| {
        let mut deletion = match (stored, &placement) {
            (Some(bytes), _) => Deletion::parse(topic, bytes)?,
            (None, Some(_)) => Deletion {
                version: VERSION,
                partitions: 0,
                brokers: BTreeSet::new(),
            },
            (None, None) => {
                marked = None;
                return Ok(None);
            }
        };
        if let Some(p) = &placement {
            deletion.partitions = deletion.partitions.max(p.brokers.len() as u32);
            deletion
                .brokers
                .extend(p.replicas.iter().flatten().cloned());
            deletion.brokers.extend(registered.iter().cloned());
        }
        marked = Some(deletion.clone());
        Ok(Some(deletion.to_bytes()))
    })?;
    if marked.is_some() {
        registry.remove_topic(topic)?;
        registry.remove_config(crate::coord::log_start::KIND, topic)?;
    }
    Ok(marked)
}

/// `topic`'s deletion, if it is being deleted.
pub fn get(registry: &dyn Registry, topic: &str) -> Result<Option<Deletion>> {
    match registry.config(KIND, topic)? {
        None => Ok(None),
        Some(bytes) => Deletion::parse(topic, &bytes).map(Some),
    }
}

/// The topics being deleted.
pub fn pending(registry: &dyn Registry) -> Result<Vec<String>> {
    registry.configs(KIND)
}

/// `broker` deleted its copy of `topic`: its name leaves the marker. The
/// last broker first removes the topic from the registry again (a state a
/// late broker made meanwhile), then its committed offsets in every group,
/// then the marker, so that a crash at any step leaves the marker to
/// finish it. Whether the deletion is complete.
pub fn done(registry: &dyn Registry, topic: &str, broker: &str) -> Result<bool> {
    let Some(deletion) = get(registry, topic)? else {
        return Ok(true);
    };
    let last = deletion.brokers.iter().all(|b| b == broker);
    if last {
        registry.remove_topic(topic)?;
        registry.remove_config(crate::coord::log_start::KIND, topic)?;
        for group in registry.groups()? {
            for (t, partition, _) in registry.offsets(&group)? {
                if t != topic {
                    continue;
                }
                // A partition a member still owns keeps the deletion
                // going: its offset must not skip records of a new topic
                // of the name (the error names the group's members).
                registry.delete_offset(&group, topic, partition)?;
            }
        }
    }
    let mut complete = false;
    registry.update_config(KIND, topic, &mut |stored| {
        let Some(bytes) = stored else {
            complete = true;
            return Ok(None);
        };
        let mut deletion = Deletion::parse(topic, bytes)?;
        deletion.brokers.remove(broker);
        // Only the broker that cleaned up after the others ends it.
        complete = deletion.brokers.is_empty() && last;
        if complete {
            return Ok(None);
        }
        if deletion.brokers.is_empty() {
            // Another broker marked here meanwhile and is gone: clean up next round.
            deletion.brokers.insert(broker.to_string());
        }
        Ok(Some(deletion.to_bytes()))
    })?;
    Ok(complete)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coord::mem::MemRegistry;
    use crate::coord::registry::Placement;

    fn placed(registry: &MemRegistry) {
        let replicas = vec![vec!["b1".to_string(), "b2".to_string()]; 2];
        let placement = Placement::new("t", replicas);
        assert!(registry.create_placement(&placement).unwrap());
    }

    #[test]
    fn a_deletion_ends_when_every_broker_that_held_the_topic_deleted_its_copy() {
        let registry = MemRegistry::default();
        placed(&registry);
        registry.reset_offset("g", "t", 1, 5).unwrap();
        let marked = mark(&registry, "t").unwrap().unwrap();
        assert_eq!(marked.partitions, 2);
        assert_eq!(marked.brokers.iter().collect::<Vec<_>>(), ["b1", "b2"]);
        assert_eq!(
            registry.placement("t").unwrap(),
            None,
            "out of the registry at once"
        );
        assert_eq!(pending(&registry).unwrap(), ["t"]);
        // Marked again (a retried request): the same deletion.
        assert_eq!(mark(&registry, "t").unwrap(), Some(marked));
        assert!(!done(&registry, "t", "b2").unwrap());
        assert_eq!(
            registry.committed("g", "t", 1).unwrap(),
            Some(5),
            "kept until the last"
        );
        assert!(done(&registry, "t", "b1").unwrap());
        assert_eq!(registry.committed("g", "t", 1).unwrap(), None);
        assert!(pending(&registry).unwrap().is_empty());
        assert_eq!(
            mark(&registry, "t").unwrap(),
            None,
            "nothing left to delete"
        );
    }

    #[test]
    fn a_damaged_marker_stays_and_says_how_to_end_it() {
        let registry = MemRegistry::default();
        placed(&registry);
        registry.set_config(KIND, "t", b"{").unwrap();
        let e = get(&registry, "t").unwrap_err().to_string();
        assert!(
            e.contains("does not parse") && e.contains("remove config/deleting/t.json"),
            "{e}"
        );
        // Marked again: refused, the marker kept as it is.
        assert!(mark(&registry, "t").is_err());
        assert_eq!(registry.config(KIND, "t").unwrap().unwrap(), b"{");
        assert!(done(&registry, "t", "b1").is_err());
        assert_eq!(registry.config(KIND, "t").unwrap().unwrap(), b"{");
    }

    #[test]
    fn every_registered_broker_is_named_and_an_owned_offset_keeps_it_going() {
        let registry = MemRegistry::default();
        placed(&registry);
        let info = crate::coord::mem::broker_info("b3");
        let _b3 = registry.register_broker(&info).unwrap();
        let member = crate::coord::MemberInfo {
            member: "m".into(),
            pid: 1,
            topics: vec!["t".into()],
            coordinator: None,
        };
        let _m = registry
            .join("g", &member, std::time::Duration::from_secs(10))
            .unwrap();
        registry.reset_offset("g", "t", 0, 4).unwrap();
        let claim = registry
            .claim("g", "t", 0, "m", std::time::Duration::from_secs(10))
            .unwrap();
        let marked = mark(&registry, "t").unwrap().unwrap();
        assert_eq!(
            marked.brokers.iter().collect::<Vec<_>>(),
            ["b1", "b2", "b3"]
        );
        for b in ["b1", "b2"] {
            assert!(!done(&registry, "t", b).unwrap());
        }
        let e = done(&registry, "t", "b3").unwrap_err();
        assert!(matches!(e, Error::GroupActive { .. }), "{e}");
        assert_eq!(pending(&registry).unwrap(), ["t"], "the name waits");
        drop(claim);
        assert!(done(&registry, "t", "b3").unwrap());
        assert_eq!(registry.committed("g", "t", 0).unwrap(), None);
    }
}
