//! Producer ids in blocks reserved in the registry, as Kafka's
//! ProducerIdManager reserved them in ZooKeeper: a broker takes a block
//! of [`BLOCK`] ids at once and hands them out one by one
//! (InitProducerId), so that no two brokers of a cluster, and no two runs
//! of one, ever hand out the same id. A partition tells an idempotent
//! producer's batches by its id ([`crate::storage::producers`]): two
//! producers sharing one would have one's batches refused, or taken for
//! the other's retries.
//!
//! # Format
//!
//! One registry configuration entry, kind [`KIND`], name [`NAME`]
//! (`config/producer-ids/block.json` in a directory,
//! `/config/producer-ids/block` on ZooKeeper), JSON, changed only by a
//! compare-and-set ([`Registry::update_config`]):
//!
//! | key | JSON | meaning |
//! |---|---|---|
//! | `version` | number, 1 | the format |
//! | `next` | number | the first id of the next block; only grows |
//!
//! ```json
//! {"version":1,"next":3000}
//! ```

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::coord::registry::Registry;
use crate::error::{Error, Result};

/// The registry's kind of configuration entry that holds the next block.
pub const KIND: &str = "producer-ids";

/// Its one entry's name.
pub const NAME: &str = "block";

/// Ids a reservation takes (Kafka's block size).
pub const BLOCK: i64 = 1000;

/// The format's version.
const VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Next {
    version: u32,
    next: i64,
}

/// Reserves the next block of ids.
pub fn reserve(registry: &dyn Registry) -> Result<Range<i64>> {
    let mut reserved = 0..0;
    registry.update_config(KIND, NAME, &mut |bytes| {
        let first = match bytes {
            None => 0,
            Some(b) => match serde_json::from_slice::<Next>(b) {
                Ok(n) if n.version == VERSION && n.next >= 0 => n.next,
                Ok(n) => {
                    return Err(Error::Config(format!(
                        "the registry's producer id block is {n:?} (klog reads version \
                         {VERSION}, a next id of 0 or more)"
                    )))
                }
                Err(e) => {
                    return Err(Error::Config(format!(
                        "the registry's producer id block does not parse ({e}): no broker \
                         hands out producer ids until config/producer-ids/{NAME}.json \
                         (/config/producer-ids/{NAME} on ZooKeeper) is repaired"
                    )))
                }
            },
        };
        let end = first
            .checked_add(BLOCK)
            .ok_or_else(|| Error::Config("the registry's producer ids are used up".to_string()))?;
        reserved = first..end;
        let next = Next {
            version: VERSION,
            next: end,
        };
        Ok(Some(serde_json::to_vec(&next).expect("numbers serialize")))
    })?;
    Ok(reserved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coord::DirRegistry;

    #[test]
    fn blocks_follow_one_another_and_never_overlap_across_threads() {
        let dir = tempfile::tempdir().unwrap();
        let registry = std::sync::Arc::new(DirRegistry::open(dir.path()).unwrap());
        assert_eq!(reserve(&*registry).unwrap(), 0..BLOCK);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let registry = std::sync::Arc::clone(&registry);
                std::thread::spawn(move || {
                    (0..5)
                        .map(|_| reserve(&*registry).unwrap().start)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut starts: Vec<i64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        starts.sort_unstable();
        let expected: Vec<i64> = (1..=20).map(|i| i * BLOCK).collect();
        assert_eq!(starts, expected);
    }

    #[test]
    fn a_damaged_entry_is_an_error_and_stays_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let registry = DirRegistry::open(dir.path()).unwrap();
        registry.set_config(KIND, NAME, b"{\"next\":").unwrap();
        let e = reserve(&registry).unwrap_err().to_string();
        assert!(e.contains("does not parse"), "{e}");
        assert_eq!(registry.config(KIND, NAME).unwrap().unwrap(), b"{\"next\":");
        registry
            .set_config(KIND, NAME, b"{\"version\":1,\"next\":-5}")
            .unwrap();
        assert!(reserve(&registry).is_err());
    }
}
