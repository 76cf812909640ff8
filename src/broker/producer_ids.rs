//! The producer ids a broker hands out, to Kafka clients (InitProducerId)
//! and to klog's own producers: from blocks reserved in the registry
//! ([`crate::coord::producer_ids`]), so that no two brokers of a cluster,
//! nor two runs of one, hand out the same id. A broker without a registry
//! starts at a random point of 2^62 (std's randomly keyed hasher over the
//! time and the process id), where two runs' ids meet with a chance of
//! about (ids handed out) / 2^62.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::coord::{producer_ids, Registry};
use crate::error::Result;
use crate::sync::lock;

/// Hands out producer ids.
#[derive(Debug)]
pub(crate) struct ProducerIds {
    registry: Option<Arc<dyn Registry>>,
    /// What is left of the block in hand.
    block: Mutex<Range<i64>>,
}

impl ProducerIds {
    /// Ids from `registry`'s blocks, or from a random start without one.
    pub(crate) fn new(registry: Option<Arc<dyn Registry>>) -> ProducerIds {
        ProducerIds {
            registry,
            block: Mutex::new(0..0),
        }
    }

    /// The next id: from the block in hand, or a block reserved now (the
    /// registry's error when it cannot reserve one).
    pub(crate) fn next(&self) -> Result<i64> {
        let mut block = lock(&self.block);
        if block.is_empty() {
            *block = match &self.registry {
                Some(registry) => producer_ids::reserve(&**registry)?,
                None => random_start()..i64::MAX,
            };
        }
        let id = block.start;
        block.start += 1;
        Ok(id)
    }
}

fn random_start() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_i64(crate::clock::now_ms());
    hasher.write_u32(std::process::id());
    (hasher.finish() >> 2) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_brokers_on_one_registry_never_hand_out_the_same_id() {
        let dir = tempfile::tempdir().unwrap();
        let registry: Arc<dyn Registry> =
            Arc::new(crate::coord::DirRegistry::open(dir.path()).unwrap());
        let a = ProducerIds::new(Some(Arc::clone(&registry)));
        let b = ProducerIds::new(Some(Arc::clone(&registry)));
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2_500 {
            assert!(seen.insert(a.next().unwrap()));
            assert!(seen.insert(b.next().unwrap()));
        }
        // A broker that restarts takes a new block.
        let again = ProducerIds::new(Some(registry));
        assert!(seen.insert(again.next().unwrap()));
        assert_eq!(again.next().unwrap(), 6 * producer_ids::BLOCK + 1);
    }

    #[test]
    fn without_a_registry_ids_start_at_a_random_point() {
        let starts: std::collections::HashSet<i64> = (0..100)
            .map(|_| ProducerIds::new(None).next().unwrap())
            .collect();
        assert!(starts.len() > 95, "{}", starts.len());
        assert!(starts.iter().all(|s| *s >= 0));
    }
}
