//! The tables of the offsets topic's partitions a broker leads, kept
//! between requests ([`super`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use crate::broker::appended::Appended;
use crate::coord::offsets_topic::OffsetsTable;
use crate::sync::lock;

/// The tables of the partitions this broker leads.
#[derive(Debug, Default)]
pub(in crate::broker) struct OffsetsStore {
    partitions: Mutex<HashMap<u32, Arc<Mutex<Loaded>>>>,
    /// The cluster id of the broker's registry, read at the first need
    /// (a registry rebuilt under a running broker is seen at its restart).
    cluster: OnceLock<String>,
}

/// One partition's table, as of a leader epoch.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    /// The leadership it was read in (`None`: not read yet; `Some(None)`:
    /// a single copy).
    pub(super) epoch: Option<Option<u32>>,
    pub(super) table: OffsetsTable,
    /// Groups whose registry offsets were looked at in this leadership.
    pub(super) carried: HashSet<String>,
    /// The last records written, which a later answer waits for too.
    pub(super) last: Option<Appended>,
}

impl OffsetsStore {
    pub(super) fn slot(&self, partition: u32) -> Arc<Mutex<Loaded>> {
        Arc::clone(lock(&self.partitions).entry(partition).or_default())
    }

    /// The registry's cluster id, `read` at the first ask.
    pub(super) fn cluster_id(
        &self,
        read: impl FnOnce() -> crate::Result<String>,
    ) -> crate::Result<String> {
        if let Some(id) = self.cluster.get() {
            return Ok(id.clone());
        }
        let id = read()?;
        Ok(self.cluster.get_or_init(|| id).clone())
    }
}
