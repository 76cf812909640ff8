//! The tables of the offsets topic's partitions a broker leads, kept
//! between requests ([`super`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::broker::appended::Appended;
use crate::coord::offsets_topic::OffsetsTable;
use crate::sync::lock;

/// The tables of the partitions this broker leads.
#[derive(Debug, Default)]
pub(in crate::broker) struct OffsetsStore {
    partitions: Mutex<HashMap<u32, Arc<Mutex<Loaded>>>>,
}

/// One partition's table, as of a leader epoch.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    /// The leadership it was read in (`None`: not read yet; `Some(None)`:
    /// a single copy).
    pub(super) epoch: Option<Option<u32>>,
    pub(super) table: OffsetsTable,
    /// The cluster id of the registry as the table was read (`None`: the
    /// broker has none): records of another's fence nothing.
    pub(super) cluster: Option<String>,
    /// Groups whose registry offsets were looked at in this leadership.
    pub(super) carried: HashSet<String>,
    /// The last records written, which a later answer waits for too.
    pub(super) last: Option<Appended>,
}

impl OffsetsStore {
    pub(super) fn slot(&self, partition: u32) -> Arc<Mutex<Loaded>> {
        Arc::clone(lock(&self.partitions).entry(partition).or_default())
    }
}
