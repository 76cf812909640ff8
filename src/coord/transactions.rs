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
//! | `committed` | offsets of transactions committed here, not yet written to their groups (absent when none) |
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
//!
//! # A transaction's offsets
//!
//! TxnOffsetCommit keeps the offsets in `offsets`, where a group's
//! readers do not take them; a member's are taken only while it holds the
//! partition's claim in the group (KIP-447's fence: a producer whose
//! consumer lost the partition cannot commit it). A commit moves them to
//! `committed` as it completes, an abort drops them. From there each
//! broker writes them to the group's committed offsets (with the claim of
//! the member it coordinates that holds the partition, or a claim of its
//! own when no member does) and takes them out; until then the group's
//! readers take the higher of the group's offset and the committed one
//! ([`group_view`]), and a reader that asks for stable offsets is told
//! to wait while an open transaction holds one. A transaction's offset
//! never lowers a group's.

use std::collections::{BTreeMap, BTreeSet};

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
    /// Offsets of committed transactions not yet written to their groups.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub committed: BTreeSet<TxnOffset>,
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
            committed: BTreeSet::new(),
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
    /// partitions; a commit moves its offsets to `committed` (replacing
    /// an earlier one's of the same partition), an abort drops them.
    pub fn complete(&mut self, now_ms: i64) {
        let commit = self.state == TxnState::PrepareCommit;
        self.state = match commit {
            true => TxnState::CompleteCommit,
            false => TxnState::CompleteAbort,
        };
        self.partitions.clear();
        self.groups.clear();
        let offsets = std::mem::take(&mut self.offsets);
        if commit {
            for o in offsets {
                self.committed.retain(|c| !c.same_partition(&o));
                self.committed.insert(o);
            }
        }
        self.updated_ms = now_ms;
    }
}

impl TxnOffset {
    /// Whether it is `group`'s offset of `topic [partition]`.
    pub fn is(&self, group: &str, topic: &str, partition: u32) -> bool {
        (&self.group[..], &self.topic[..], self.partition) == (group, topic, partition)
    }

    fn same_partition(&self, other: &TxnOffset) -> bool {
        self.is(&other.group, &other.topic, other.partition)
    }
}

/// What the transactions hold of one group's offsets.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GroupView {
    /// The highest committed offset of each `(topic, partition)` not yet
    /// written to the group.
    pub committed: BTreeMap<(String, u32), u64>,
    /// The partitions an open or prepared transaction holds an offset of.
    pub pending: BTreeSet<(String, u32)>,
}

impl GroupView {
    /// The group's committed offset of `topic [partition]`, given the one
    /// it stores: the higher of the two.
    pub fn offset(&self, topic: &str, partition: u32, stored: Option<u64>) -> Option<u64> {
        let held = self.committed.get(&(topic.to_string(), partition)).copied();
        stored.max(held)
    }

    /// Whether an open transaction holds an offset of `topic [partition]`.
    pub fn unstable(&self, topic: &str, partition: u32) -> bool {
        self.pending.contains(&(topic.to_string(), partition))
    }
}

/// What `entries` hold of `group`'s offsets.
pub fn group_view(entries: &[TxnEntry], group: &str) -> GroupView {
    let mut view = GroupView::default();
    for e in entries {
        for o in e.committed.iter().filter(|o| o.group == group) {
            let at = view.committed.entry((o.topic.clone(), o.partition));
            let offset = at.or_insert(o.offset);
            *offset = (*offset).max(o.offset);
        }
        let open = e.state == TxnState::Ongoing || e.state.is_prepared();
        for o in e.offsets.iter().filter(|o| open && o.group == group) {
            view.pending.insert((o.topic.clone(), o.partition));
        }
    }
    view
}

/// `group`'s committed offset of `topic [partition]` with those
/// transactions committed and no broker wrote yet (see [`group_view`]).
/// The entries are read first: a broker writes their offsets to the
/// group, then takes them out of the entry, so an offset moving between
/// the two reads is in the second.
pub fn committed_offset(
    registry: &dyn Registry,
    group: &str,
    topic: &str,
    partition: u32,
) -> Result<Option<u64>> {
    let view = group_view(&all(registry)?, group);
    let stored = registry.committed(group, topic, partition)?;
    Ok(view.offset(topic, partition, stored))
}

/// Takes `done`, offsets written to their groups, out of `transactional_id`'s
/// committed ones (those a later commit replaced stay).
pub fn take_written(
    registry: &dyn Registry,
    transactional_id: &str,
    done: &[TxnOffset],
) -> Result<()> {
    update(registry, transactional_id, |stored| {
        let Some(mut e) = stored else {
            return Ok((None, ()));
        };
        let before = e.committed.len();
        e.committed.retain(|o| !done.contains(o));
        Ok(((e.committed.len() != before).then_some(e), ()))
    })
}

/// Drops the committed offsets of `group` (of `topic`, and of its
/// `partition`, alone when given) that no broker wrote yet: an operator's
/// reset or deletion of the group's offsets replaces them.
pub fn forget_committed(
    registry: &dyn Registry,
    group: &str,
    (topic, partition): (Option<&str>, Option<u32>),
) -> Result<()> {
    let dropped = |o: &TxnOffset| {
        o.group == group
            && topic.is_none_or(|t| o.topic == t)
            && partition.is_none_or(|p| o.partition == p)
    };
    for e in all(registry)? {
        if !e.committed.iter().any(dropped) {
            continue;
        }
        update(registry, &e.transactional_id, |stored| {
            let Some(mut s) = stored else {
                return Ok((None, ()));
            };
            s.committed.retain(|o| !dropped(o));
            Ok((Some(s), ()))
        })?;
    }
    Ok(())
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

    /// A group's committed offset is the higher of the one it stores and
    /// those transactions committed and no broker wrote yet; an open
    /// transaction's offsets are not, and make the partition unstable.
    #[test]
    fn a_groups_offset_takes_committed_transactions_only() {
        let registry = crate::coord::mem::MemRegistry::default();
        let offset = |group: &str, o| TxnOffset {
            group: group.into(),
            topic: "t".into(),
            partition: 0,
            offset: o,
            member: String::new(),
            generation: -1,
        };
        let mut e = TxnEntry::new("a", 1, 60_000, 0);
        e.committed.insert(offset("g", 42));
        e.offsets.insert(offset("g", 99));
        e.state = TxnState::Ongoing;
        update(&registry, "a", |_| Ok((Some(e.clone()), ()))).unwrap();
        assert_eq!(committed_offset(&registry, "g", "t", 0).unwrap(), Some(42));
        assert_eq!(committed_offset(&registry, "h", "t", 0).unwrap(), None);
        let view = group_view(&[e.clone()], "g");
        assert!(view.unstable("t", 0) && !view.unstable("t", 1));
        assert_eq!(view.offset("t", 0, Some(50)), Some(50), "never lower");
        e.complete(1);
        assert_eq!(e.state, TxnState::CompleteAbort);
        assert_eq!(
            e.committed,
            BTreeSet::from([offset("g", 42)]),
            "an abort drops its own"
        );
        forget_committed(&registry, "g", (Some("t"), Some(0))).unwrap();
        assert_eq!(committed_offset(&registry, "g", "t", 0).unwrap(), None);
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
