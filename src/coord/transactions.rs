//! Transaction state in the registry: one entry per transactional id,
//! changed only by compare-and-set ([`Registry::update_config`]), so that
//! any broker can coordinate any transaction and one that dies leaves
//! nothing half done that another cannot finish.
//!
//! Kafka keeps this state in a replicated internal topic
//! (`__transaction_state`), led by one coordinator per transactional id.
//! klog keeps it where it keeps partition state, ACLs and producer id
//! blocks: the registry (a directory, or ZooKeeper), written a few times
//! per transaction (begin, prepare, complete), never per record. That
//! needs no coordinator election and no compaction, and survives any
//! broker's death; the cost, a registry write per transition, bounds a
//! transactional id to some hundreds of transactions a second, far above
//! a producer that commits every 100 ms.
//!
//! # Entry `config/transactions/NAME` (JSON)
//!
//! NAME is the transactional id, every byte outside `[A-Za-z0-9-]` written
//! `_XX` (hex), at most 249 bytes ([`entry_name`]).
//!
//! | field | |
//! | --- | --- |
//! | `transactional_id` | as the client names it |
//! | `producer_id`, `epoch` | the producer's; InitProducerId bumps the epoch, fencing older instances |
//! | `timeout_ms` | the client's `transaction.timeout.ms`: an open transaction older than it is aborted |
//! | `state` | `Empty`, `Ongoing`, `PrepareCommit`, `PrepareAbort`, `CompleteCommit`, `CompleteAbort` |
//! | `partitions` | `[topic, partition]` of the transaction |
//! | `groups` | the consumer groups whose offsets it commits (AddOffsetsToTxn) |
//! | `offsets` | those offsets, committed with it: `{group, topic, partition, offset, member, generation}` |
//! | `coordinator_epoch` | raised by each prepare and by each broker that takes over its completion; its markers carry it, and a partition refuses a marker older than one it has |
//! | `started_ms` | when it became `Ongoing` (wall clock) |
//! | `updated_ms` | its last change |
//!
//! # Transitions
//!
//! ```text
//! Empty / Complete* ──AddPartitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ─markers─▶ CompleteCommit
//!                                         │     ╰─EndTxn, timeout, InitProducerId─▶ PrepareAbort ─markers─▶ CompleteAbort
//! ```

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::Registry;
use crate::error::{Error, Result};

/// The registry's kind of transaction entries.
pub const KIND: &str = "transactions";

/// Where a transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    /// No transaction open (a new producer, or a new epoch).
    Empty,
    /// Open: partitions or offsets added.
    Ongoing,
    /// Committing: its markers are being written.
    PrepareCommit,
    /// Aborting: its markers are being written.
    PrepareAbort,
    /// Committed: every marker written.
    CompleteCommit,
    /// Aborted: every marker written.
    CompleteAbort,
}

impl TxnState {
    /// Whether a new transaction may begin from it.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    /// Whether markers are being written.
    pub fn is_prepared(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// An offset a transaction commits for a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TxnOffset {
    /// The consumer group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// The offset committed.
    pub offset: u64,
    /// The member that commits it ("" from outside the group).
    pub member: String,
    /// Its generation (-1 from outside the group).
    pub generation: i32,
}

/// A transactional id's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnEntry {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// Its transaction timeout.
    pub timeout_ms: i32,
    /// Where its transaction is.
    pub state: TxnState,
    /// The partitions of the transaction.
    pub partitions: BTreeSet<(String, u32)>,
    /// The groups whose offsets it commits.
    pub groups: BTreeSet<String>,
    /// Those offsets.
    pub offsets: BTreeSet<TxnOffset>,
    /// Raised by each prepare and each takeover; markers carry it.
    pub coordinator_epoch: i32,
    /// When the transaction became `Ongoing`.
    pub started_ms: i64,
    /// Its last change.
    pub updated_ms: i64,
}

impl TxnEntry {
    /// A new producer's entry.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> TxnEntry {
        TxnEntry {
            transactional_id: transactional_id.to_string(),
            producer_id,
            epoch: 0,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            offsets: BTreeSet::new(),
            coordinator_epoch: 0,
            started_ms: now_ms,
            updated_ms: now_ms,
        }
    }

    /// Whether it was open longer than its timeout at `now_ms`.
    pub fn timed_out(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing
            && now_ms.saturating_sub(self.started_ms) > i64::from(self.timeout_ms)
    }

    /// Moves it to `Prepare*` (`commit` or not) at `now_ms`, with a
    /// coordinator epoch of its own.
    pub fn prepare(&mut self, commit: bool, now_ms: i64) {
        self.state = match commit {
            true => TxnState::PrepareCommit,
            false => TxnState::PrepareAbort,
        };
        self.coordinator_epoch = self.coordinator_epoch.saturating_add(1);
        self.updated_ms = now_ms;
    }

    /// Moves a prepared transaction to `Complete*`, forgetting its
    /// partitions and offsets.
    pub fn complete(&mut self, now_ms: i64) {
        self.state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            _ => TxnState::CompleteAbort,
        };
        self.partitions.clear();
        self.groups.clear();
        self.offsets.clear();
        self.updated_ms = now_ms;
    }
}

/// The registry name of `transactional_id`'s entry: bytes outside
/// `[A-Za-z0-9-]` written `_XX`; `None` when empty or longer than 249
/// bytes so written.
pub fn entry_name(transactional_id: &str) -> Option<String> {
    let mut name = String::with_capacity(transactional_id.len());
    for b in transactional_id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            name.push(b as char);
        } else {
            name.push_str(&format!("_{b:02x}"));
        }
    }
    (!name.is_empty() && name.len() <= 249).then_some(name)
}

/// `transactional_id`'s entry, if it has one.
pub fn read(registry: &dyn Registry, transactional_id: &str) -> Result<Option<TxnEntry>> {
    let name = name_of(transactional_id)?;
    match registry.config(KIND, &name)? {
        Some(bytes) => parse(&bytes).map(Some),
        None => Ok(None),
    }
}

/// Every entry (those that do not parse are left out).
pub fn all(registry: &dyn Registry) -> Result<Vec<TxnEntry>> {
    let mut entries = Vec::new();
    for name in registry.configs(KIND)? {
        if let Some(bytes) = registry.config(KIND, &name)? {
            entries.extend(parse(&bytes).ok());
        }
    }
    Ok(entries)
}

/// Changes `transactional_id`'s entry with no other change in between:
/// `change` is given the entry as stored and says what to store (or
/// leaves it as it is, `Ok(None)`), and what to answer; on ZooKeeper it
/// may run again on what another change left.
pub fn update<T>(
    registry: &dyn Registry,
    transactional_id: &str,
    mut change: impl FnMut(Option<TxnEntry>) -> Result<(Option<TxnEntry>, T)>,
) -> Result<T> {
    let name = name_of(transactional_id)?;
    let mut answer = None;
    registry.update_config(KIND, &name, &mut |stored| {
        let entry = stored.map(parse).transpose()?;
        let kept = stored.map(<[u8]>::to_vec);
        let (new, a) = change(entry)?;
        answer = Some(a);
        match new {
            Some(e) => serde_json::to_vec(&e)
                .map(Some)
                .map_err(|e| Error::Config(format!("transaction entry: {e}"))),
            None => Ok(kept),
        }
    })?;
    Ok(answer.expect("update_config ran the change"))
}

fn name_of(transactional_id: &str) -> Result<String> {
    entry_name(transactional_id).ok_or_else(|| {
        Error::Config(format!(
            "transactional id {transactional_id:?}: empty, or too long"
        ))
    })
}

fn parse(bytes: &[u8]) -> Result<TxnEntry> {
    serde_json::from_slice(bytes).map_err(|e| Error::Config(format!("transaction entry: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_are_registry_names_and_never_shared() {
        assert_eq!(entry_name("app-1").as_deref(), Some("app-1"));
        assert_eq!(entry_name("a.b_c d").as_deref(), Some("a_2eb_5fc_20d"));
        assert_eq!(entry_name(".").as_deref(), Some("_2e"));
        assert_eq!(entry_name(""), None);
        assert_eq!(entry_name(&"x".repeat(250)), None);
        assert_eq!(entry_name("é").as_deref(), Some("_c3_a9"));
        let names: BTreeSet<_> = ["a_", "a_5f", "a._", "a"]
            .iter()
            .map(|id| entry_name(id).unwrap())
            .collect();
        assert_eq!(names.len(), 4);
        for id in ["a.b_c d", ".", "..", "é", "x/y"] {
            let name = entry_name(id).unwrap();
            assert!(
                crate::coord::registry::check_name("t", &name).is_ok(),
                "{name}"
            );
        }
    }

    #[test]
    fn an_update_stores_what_the_change_says_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let registry = crate::coord::DirRegistry::open(dir.path()).unwrap();
        assert_eq!(read(&registry, "t.x").unwrap(), None);
        let made = update(&registry, "t.x", |stored| {
            assert!(stored.is_none());
            Ok((Some(TxnEntry::new("t.x", 7, 60_000, 1)), 7))
        });
        assert_eq!(made.unwrap(), 7);
        let mut entry = read(&registry, "t.x").unwrap().unwrap();
        assert_eq!((entry.producer_id, entry.state), (7, TxnState::Empty));
        entry.partitions.insert(("t".into(), 3));
        entry.state = TxnState::Ongoing;
        let again = entry.clone();
        update(&registry, "t.x", |_| Ok((Some(again.clone()), ()))).unwrap();
        update(&registry, "t.x", |_| Ok((None, ()))).unwrap();
        assert_eq!(read(&registry, "t.x").unwrap(), Some(entry.clone()));
        assert_eq!(all(&registry).unwrap(), [entry]);
    }

    #[test]
    fn a_transaction_times_out_only_while_open() {
        let mut e = TxnEntry::new("t", 1, 1_000, 0);
        assert!(!e.timed_out(5_000));
        e.state = TxnState::Ongoing;
        assert!(!e.timed_out(1_000) && e.timed_out(1_001));
        e.prepare(false, 2_000);
        assert_eq!((e.state, e.coordinator_epoch), (TxnState::PrepareAbort, 1));
        assert!(!e.timed_out(9_000));
        e.partitions.insert(("t".into(), 0));
        e.complete(3_000);
        assert_eq!(e.state, TxnState::CompleteAbort);
        assert!(e.partitions.is_empty() && e.state.is_idle());
    }
}
