//! Where each partition's log starts once DeleteRecords moved it, kept in
//! the registry so that it outlives its leader: a replica that becomes
//! leader takes it before it serves anything
//! (`klog-broker`'s replica manager), and so no record deleted and
//! acknowledged as such shows again after a failover.
//!
//! # Format
//!
//! One registry configuration entry of kind [`KIND`] per topic with a
//! moved start (`config/log-starts/<topic>.json` in a directory,
//! `/config/log-starts/<topic>` on ZooKeeper), JSON:
//!
//! | key | JSON | meaning |
//! |---|---|---|
//! | `version` | number, 1 | the format |
//! | `starts` | object: partition (a decimal string) → offset | each moved partition's start; it only grows |
//!
//! ```json
//! {"version":1,"starts":{"0":1200,"3":17}}
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::coord::registry::Registry;
use crate::error::{Error, Result};

/// The registry's kind of configuration entry that holds log starts.
pub const KIND: &str = "log-starts";

/// The format's version.
const VERSION: u32 = 1;

/// A topic's moved log starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Starts {
    version: u32,
    starts: BTreeMap<u32, u64>,
}

fn parse(topic: &str, bytes: &[u8]) -> Result<Starts> {
    match serde_json::from_slice::<Starts>(bytes) {
        Ok(s) if s.version == VERSION => Ok(s),
        Ok(s) => Err(Error::Config(format!(
            "the log starts of topic {topic:?} are of version {} (klog reads {VERSION})",
            s.version
        ))),
        Err(e) => Err(Error::Config(format!(
            "the log starts of topic {topic:?} do not parse ({e}): a leader elected meanwhile \
             serves from its own log's start (deleted records may show again), and no records \
             of the topic can be deleted until config/log-starts/{topic}.json \
             (/config/log-starts/{topic} on ZooKeeper) is removed or repaired"
        ))),
    }
}

/// Raises `partition`'s start to `offset` (never lowers it): the start
/// stored. An entry that does not parse is an error, left as it is: it
/// holds the other partitions' starts.
pub fn raise(registry: &dyn Registry, topic: &str, partition: u32, offset: u64) -> Result<u64> {
    let mut stored = offset;
    registry.update_config(KIND, topic, &mut |bytes| {
        let mut starts = match bytes {
            Some(b) => parse(topic, b)?,
            None => Starts {
                version: VERSION,
                starts: BTreeMap::new(),
            },
        };
        let start = starts.starts.entry(partition).or_insert(0);
        *start = (*start).max(offset);
        stored = *start;
        Ok(Some(
            serde_json::to_vec(&starts).expect("numbers serialize"),
        ))
    })?;
    Ok(stored)
}

/// `partition`'s start as stored (0: never moved).
pub fn get(registry: &dyn Registry, topic: &str, partition: u32) -> Result<u64> {
    match registry.config(KIND, topic)? {
        None => Ok(0),
        Some(bytes) => Ok(parse(topic, &bytes)?
            .starts
            .get(&partition)
            .copied()
            .unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coord::mem::MemRegistry;

    #[test]
    fn a_start_only_grows_and_a_damaged_entry_is_kept() {
        let registry = MemRegistry::default();
        assert_eq!(get(&registry, "t", 0).unwrap(), 0);
        assert_eq!(raise(&registry, "t", 0, 12).unwrap(), 12);
        assert_eq!(raise(&registry, "t", 0, 5).unwrap(), 12);
        assert_eq!(raise(&registry, "t", 3, 7).unwrap(), 7);
        assert_eq!(
            (
                get(&registry, "t", 0).unwrap(),
                get(&registry, "t", 3).unwrap()
            ),
            (12, 7)
        );
        let bytes = registry.config(KIND, "t").unwrap().unwrap();
        assert_eq!(bytes, br#"{"version":1,"starts":{"0":12,"3":7}}"#);
        registry.set_config(KIND, "t", b"{").unwrap();
        let e = get(&registry, "t", 0).unwrap_err().to_string();
        assert!(e.contains("removed or repaired"), "{e}");
        // Not rewritten: it holds the other partitions' starts.
        assert!(raise(&registry, "t", 0, 9).is_err());
        assert_eq!(registry.config(KIND, "t").unwrap().unwrap(), b"{");
    }
}
