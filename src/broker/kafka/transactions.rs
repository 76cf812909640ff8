//! The transaction coordinator: Kafka's transactional producer protocol
//! (InitProducerId with a transactional id, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit, EndTxn) over the registry's
//! transaction entries ([`crate::coord::transactions`]).
//!
//! Every broker coordinates every transactional id (FindCoordinator
//! answers "this broker", as for groups): each step is a compare-and-set
//! of the id's entry, so two brokers, or a zombie producer and its
//! successor, never both win one. EndTxn stores the prepared state, then
//! writes the markers to every partition ([`markers`]), each
//! durable on its in-sync replicas, commits the transaction's offsets,
//! and stores the completed state; it answers once the prepared state is
//! stored, as Kafka does, having tried to complete first.
//!
//! Each broker looks at every entry every [`TICK`]: an open transaction
//! past its timeout is aborted (its epoch bumped, fencing the producer),
//! and one left prepared longer than [`TAKEOVER`] (its coordinator died,
//! or cannot reach a leader) is completed by whoever sees it, under a
//! coordinator epoch of its own: the partitions refuse the markers of
//! the one before, should it wake. An id with no transaction for
//! [`EXPIRY_MS`] is removed (its next producer starts with a new id).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::group::Coordinator;
use crate::broker::markers;
use crate::broker::shared::Shared;
use crate::coord::transactions::{self, TxnEntry, TxnOffset, TxnState};
use crate::coord::Registry;
use crate::kafka as k;
use crate::storage::record::control::Marker;

/// How often each broker looks for transactions to time out or finish.
pub(crate) const TICK: Duration = Duration::from_secs(1);
/// How long a transaction stays prepared before another broker finishes
/// it.
pub(crate) const TAKEOVER: Duration = Duration::from_secs(10);
/// The longest transaction timeout a producer may ask (Kafka's
/// `transaction.max.timeout.ms` default).
pub(crate) const TIMEOUT_MAX_MS: i32 = 900_000;
/// The most partitions, and offsets, one transaction holds: its registry
/// entry stays under ZooKeeper's 1 MB a node with names of 249 bytes.
pub(crate) const PARTITIONS_MAX: usize = 1_000;
/// The longest group or member id a transaction keeps.
pub(crate) const NAME_BYTES_MAX: usize = 249;
/// How long a transactional id with no transaction is kept (Kafka's
/// `transactional.id.expiration.ms` default, 7 days).
pub(crate) const EXPIRY_MS: i64 = 7 * 24 * 3600 * 1000;

/// What a step of a request found: a Kafka error code, or go on.
type Step<T> = Result<T, i16>;

/// The coordinator of one broker.
pub(crate) struct Transactions {
    registry: Arc<dyn Registry>,
    /// The group coordinator, which commits a transaction's offsets.
    groups: Arc<Coordinator>,
}

/// klog's protocol asks the same coordinator ([`crate::broker::connection::txn`]).
impl crate::broker::connection::txn::Txns for Transactions {
    fn init(&self, shared: &Shared, id: &str, timeout_ms: i32) -> Step<(i64, i16)> {
        Transactions::init(self, shared, id, timeout_ms, (-1, -1))
    }

    fn add(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        joining: (&[(String, u32)], &[String]),
    ) -> Step<()> {
        Transactions::add(self, shared, id, producer, joining)
    }

    fn offsets(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        group: &str,
        offsets: &[(String, u32, u64)],
    ) -> Step<()> {
        self.add_offsets(shared, id, producer, (group, "", -1), offsets)
    }

    fn end(&self, shared: &Shared, id: &str, producer: (i64, i16), commit: bool) -> Step<()> {
        self.end_fenced(shared, id, producer, (commit, true))
    }

    fn verify(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        partition: (&str, u32),
    ) -> Step<()> {
        Transactions::verify(self, shared, id, producer, partition)
    }
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactions")
            .field("registry", &self.registry.location())
            .finish()
    }
}

/// The entry's producer must be `(id, epoch)`.
fn check_producer(e: &TxnEntry, (id, epoch): (i64, i16)) -> Step<()> {
    if e.producer_id != id {
        return Err(k::INVALID_PRODUCER_ID_MAPPING);
    }
    if e.epoch != epoch {
        return Err(k::PRODUCER_FENCED);
    }
    Ok(())
}

impl Transactions {
    pub(crate) fn new(registry: Arc<dyn Registry>, groups: Arc<Coordinator>) -> Transactions {
        Transactions { registry, groups }
    }

    /// Changes `id`'s entry by `change` (given the stored entry, or `None`):
    /// its answer; a registry that fails is COORDINATOR_NOT_AVAILABLE.
    fn update<T>(
        &self,
        shared: &Shared,
        id: &str,
        mut change: impl FnMut(Option<TxnEntry>) -> Step<(Option<TxnEntry>, T)>,
    ) -> Step<T> {
        let mut refused = None;
        let done = transactions::update(&*self.registry, id, |stored| {
            refused = None;
            match change(stored) {
                Ok(done) => Ok((done.0, Some(done.1))),
                Err(code) => {
                    refused = Some(code);
                    Ok((None, None))
                }
            }
        });
        match done {
            Ok(Some(answer)) => Ok(answer),
            Ok(None) => Err(refused.unwrap_or(k::UNKNOWN_SERVER_ERROR)),
            Err(e) => {
                shared.log_peer(format_args!("transaction {id:?}: the registry: {e}"));
                Err(k::COORDINATOR_NOT_AVAILABLE)
            }
        }
    }

    /// InitProducerId with a transactional id: its producer id and a new
    /// epoch, fencing every older instance. An open transaction is
    /// aborted first (under the new epoch); one being completed is
    /// finished first (or CONCURRENT_TRANSACTIONS, which clients retry).
    /// `current`: the id and epoch the client has (InitProducerId v3),
    /// `(-1, -1)` for none.
    pub(crate) fn init(
        &self,
        shared: &Shared,
        id: &str,
        timeout_ms: i32,
        current: (i64, i16),
    ) -> Step<(i64, i16)> {
        if !(1..=TIMEOUT_MAX_MS).contains(&timeout_ms) {
            return Err(k::INVALID_TRANSACTION_TIMEOUT);
        }
        // A new producer id is taken only for a new entry (or spent
        // epochs), then an aborted or finished transaction, a new epoch.
        let mut fresh = None;
        for _ in 0..4 {
            let now = crate::clock::now_ms();
            let step = self.update(shared, id, |stored| {
                init_step(stored, (id, timeout_ms, fresh, now), current)
            })?;
            match step {
                Init::Ready(pid, epoch) => return Ok((pid, epoch)),
                Init::Finish(entry) => {
                    if !self.complete(shared, &entry) {
                        return Err(k::CONCURRENT_TRANSACTIONS);
                    }
                }
                Init::Busy => return Err(k::CONCURRENT_TRANSACTIONS),
                Init::NeedId => {
                    fresh = Some(shared.producer_ids.next().map_err(|e| {
                        shared.log_peer(format_args!("no producer id to hand out: {e}"));
                        k::COORDINATOR_NOT_AVAILABLE
                    })?);
                }
            }
        }
        Err(k::CONCURRENT_TRANSACTIONS)
    }

    /// AddPartitionsToTxn (or AddOffsetsToTxn's `groups`): the transaction
    /// begins, or grows.
    pub(crate) fn add(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        (partitions, groups): (&[(String, u32)], &[String]),
    ) -> Step<()> {
        let now = crate::clock::now_ms();
        self.update(shared, id, |stored| {
            let mut e = stored.ok_or(k::INVALID_PRODUCER_ID_MAPPING)?;
            check_producer(&e, producer)?;
            if e.state.is_prepared() {
                return Err(k::CONCURRENT_TRANSACTIONS);
            }
            if e.state.is_idle() {
                e.state = TxnState::Ongoing;
                e.started_ms = now;
            }
            if groups.iter().any(|g| g.len() > NAME_BYTES_MAX) {
                return Err(k::INVALID_REQUEST);
            }
            e.partitions.extend(partitions.iter().cloned());
            e.groups.extend(groups.iter().cloned());
            if e.partitions.len() + e.groups.len() > PARTITIONS_MAX {
                return Err(k::INVALID_REQUEST);
            }
            e.updated_ms = now;
            Ok((Some(e), ()))
        })
    }

    /// TxnOffsetCommit: `group`'s offsets, committed with the transaction
    /// as its `member` of `generation` (or from outside the group: "",
    /// -1).
    pub(crate) fn add_offsets(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        (group, member, generation): (&str, &str, i32),
        offsets: &[(String, u32, u64)],
    ) -> Step<()> {
        if group.len() > NAME_BYTES_MAX || member.len() > NAME_BYTES_MAX {
            return Err(k::INVALID_REQUEST);
        }
        if crate::coord::registry::check_name("group", group).is_err() {
            return Err(k::INVALID_GROUP_ID);
        }
        self.member_holds((group, member, generation), offsets)?;
        self.update(shared, id, |stored| {
            let mut e = stored.ok_or(k::INVALID_PRODUCER_ID_MAPPING)?;
            check_producer(&e, producer)?;
            if e.state != TxnState::Ongoing || !e.groups.contains(group) {
                return Err(k::INVALID_TXN_STATE);
            }
            for (topic, partition, offset) in offsets {
                e.offsets.retain(|o| {
                    (&o.group[..], &o.topic[..], o.partition) != (group, topic, *partition)
                });
                e.offsets.insert(TxnOffset {
                    group: group.to_string(),
                    topic: topic.clone(),
                    partition: *partition,
                    offset: *offset,
                    member: member.to_string(),
                    generation,
                });
            }
            // Those committed and not yet written count too: an entry
            // stays under the registry's bound whatever its clients do.
            if e.offsets.len() + e.committed.len() > PARTITIONS_MAX {
                return Err(k::INVALID_REQUEST);
            }
            Ok((Some(e), ()))
        })
    }

    /// Whether producer `(id, epoch)` of `txn` has a transaction open with
    /// `topic [partition]` (a produce's first transactional batch there):
    /// its Kafka error when not.
    pub(crate) fn verify(
        &self,
        shared: &Shared,
        txn: &str,
        producer: (i64, i16),
        (topic, partition): (&str, u32),
    ) -> Step<()> {
        let e = match transactions::read(&*self.registry, txn) {
            Ok(Some(e)) => e,
            Ok(None) => return Err(k::INVALID_PRODUCER_ID_MAPPING),
            Err(e) => {
                shared.log_peer(format_args!("transaction {txn:?}: the registry: {e}"));
                return Err(k::COORDINATOR_NOT_AVAILABLE);
            }
        };
        check_producer(&e, producer).map_err(|code| match code {
            k::PRODUCER_FENCED => k::INVALID_PRODUCER_EPOCH,
            other => other,
        })?;
        let added = e.partitions.contains(&(topic.to_string(), partition));
        match e.state == TxnState::Ongoing && added {
            true => Ok(()),
            false => Err(k::INVALID_TXN_STATE),
        }
    }

    /// EndTxn: commit or abort. Answered once the prepared state is
    /// stored; the markers are written first if they can be.
    pub(crate) fn end(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        commit: bool,
    ) -> Step<()> {
        self.end_fenced(shared, id, producer, (commit, false))
    }

    /// [`Transactions::end`]; with `fence`, an abort also bumps the
    /// producer's epoch (as a timeout's does), so that its markers fence
    /// a batch of the aborted transaction still on its way: klog's
    /// producers stop at an abort, Kafka's go on in the same epoch.
    pub(crate) fn end_fenced(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        (commit, fence): (bool, bool),
    ) -> Step<()> {
        let now = crate::clock::now_ms();
        let prepared = self.update(shared, id, |stored| {
            let mut e = stored.ok_or(k::INVALID_PRODUCER_ID_MAPPING)?;
            check_producer(&e, producer)?;
            let done = if commit {
                TxnState::CompleteCommit
            } else {
                TxnState::CompleteAbort
            };
            match e.state {
                TxnState::Ongoing => {
                    if fence && !commit {
                        bump(&mut e);
                    }
                    e.prepare(commit, now);
                    Ok((Some(e.clone()), Some(e)))
                }
                // A retry of an end that went through.
                s if s == done => Ok((None, None)),
                s if s.is_prepared() => Err(k::CONCURRENT_TRANSACTIONS),
                _ => Err(k::INVALID_TXN_STATE),
            }
        })?;
        if let Some(entry) = prepared {
            self.complete(shared, &entry);
        }
        Ok(())
    }

    /// Writes a prepared transaction's markers and offsets, then stores it
    /// completed (unless another broker took it over meanwhile): whether
    /// it is complete.
    fn complete(&self, shared: &Shared, e: &TxnEntry) -> bool {
        let commit = e.state == TxnState::PrepareCommit;
        let marker = Marker {
            commit,
            coordinator_epoch: e.coordinator_epoch,
        };
        let timeout = Duration::from_millis(shared.config.request_timeout_ms);
        let deadline = Instant::now() + timeout;
        let producer = (e.producer_id, e.epoch);
        let id = &e.transactional_id;
        if let Err((code, why)) =
            markers::write_all(shared, &e.partitions, producer, marker, deadline)
        {
            shared.log_peer(format_args!(
                "transaction {id:?}: its markers ({code}): {why}"
            ));
            return false;
        }
        let now = crate::clock::now_ms();
        let stored = self.update(shared, id, |stored| match stored {
            Some(mut s) if s.coordinator_epoch == e.coordinator_epoch && s.state.is_prepared() => {
                s.complete(now);
                Ok((Some(s.clone()), Some(s)))
            }
            _ => Ok((None, None)),
        });
        match stored {
            Ok(Some(completed)) => {
                self.write_offsets(shared, &completed);
                true
            }
            _ => false,
        }
    }

    /// Writes the offsets `e`'s transactions committed to their groups,
    /// those this broker can (see [`Coordinator::write_committed`]), and
    /// takes them out of its entry.
    fn write_offsets(&self, shared: &Shared, e: &TxnEntry) {
        let id = &e.transactional_id;
        let mut done = Vec::new();
        for o in &e.committed {
            match (self.groups).write_committed(&o.group, &o.topic, o.partition, o.offset) {
                Ok(true) => done.push(o.clone()),
                Ok(false) => {}
                Err(err) => shared.log_peer(format_args!(
                    "transaction {id:?}: group {:?}: the offset of {} [{}]: {err}",
                    o.group, o.topic, o.partition
                )),
            }
        }
        if done.is_empty() {
            return;
        }
        if let Err(err) = transactions::take_written(&*self.registry, id, &done) {
            shared.log_peer(format_args!("transaction {id:?}: the registry: {err}"));
        }
    }

    /// Whether `member` (of `generation`) may commit `group`'s offsets of
    /// `offsets` in a transaction: it holds each partition's claim in
    /// the group (KIP-447: a producer whose consumer lost a partition
    /// cannot commit it). A commit from outside the group (-1, no member)
    /// is taken as Kafka takes it, unchecked.
    fn member_holds(
        &self,
        (group, member, generation): (&str, &str, i32),
        offsets: &[(String, u32, u64)],
    ) -> Step<()> {
        if generation < 0 && member.is_empty() {
            return Ok(());
        }
        for (topic, partition, _) in offsets {
            match self.registry.owner(group, topic, *partition) {
                Some(o) if o.member == member => {}
                Some(_) => return Err(k::ILLEGAL_GENERATION),
                None => return Err(k::UNKNOWN_MEMBER_ID),
            }
        }
        Ok(())
    }

    /// One look at every entry: aborts the transactions past their
    /// timeout, finishes those left prepared past [`TAKEOVER`].
    pub(crate) fn tick(&self, shared: &Shared) {
        let entries = match transactions::all(&*self.registry) {
            Ok(entries) => entries,
            Err(e) => {
                shared.log_peer(format_args!("transactions: the registry: {e}"));
                return;
            }
        };
        let now = crate::clock::now_ms();
        let takeover = TAKEOVER.as_millis() as i64;
        for e in entries {
            if !e.committed.is_empty() {
                // Those a member here, or none, holds the partition of.
                self.write_offsets(shared, &e);
            } else if e.state.is_idle() && now.saturating_sub(e.updated_ms) > EXPIRY_MS {
                self.expire(shared, &e);
                continue;
            }
            let stale = e.state.is_prepared() && now.saturating_sub(e.updated_ms) > takeover;
            if !(e.timed_out(now) || stale) {
                continue;
            }
            let seen = (e.state, e.coordinator_epoch, e.updated_ms);
            let taken = self.update(shared, &e.transactional_id, |stored| {
                let Some(mut s) = stored else {
                    return Ok((None, None));
                };
                if (s.state, s.coordinator_epoch, s.updated_ms) != seen {
                    return Ok((None, None));
                }
                if s.state == TxnState::Ongoing {
                    // Fenced: the producer learns at its next request.
                    bump(&mut s);
                    s.prepare(false, now);
                } else {
                    s.coordinator_epoch = s.coordinator_epoch.saturating_add(1);
                    s.updated_ms = now;
                }
                Ok((Some(s.clone()), Some(s)))
            });
            if let Ok(Some(entry)) = taken {
                let what = if seen.0 == TxnState::Ongoing {
                    "timed out, aborted"
                } else {
                    "finished here"
                };
                shared.log_peer(format_args!(
                    "transaction {:?}: {what}",
                    entry.transactional_id
                ));
                self.complete(shared, &entry);
            }
        }
    }
}

impl Transactions {
    /// Removes `e`'s entry, unless it changed since it was read.
    fn expire(&self, shared: &Shared, e: &TxnEntry) {
        let Some(name) = transactions::entry_name(&e.transactional_id) else {
            return;
        };
        let mut change = |stored: Option<&[u8]>| {
            let same = stored
                .and_then(|b| serde_json::from_slice::<TxnEntry>(b).ok())
                .is_some_and(|s| s == *e);
            Ok(if same {
                None
            } else {
                stored.map(<[u8]>::to_vec)
            })
        };
        if let Err(err) = self
            .registry
            .update_config(transactions::KIND, &name, &mut change)
        {
            shared.log_peer(format_args!(
                "transaction {:?}: the registry: {err}",
                e.transactional_id
            ));
        }
    }
}

/// What InitProducerId's step found.
enum Init {
    /// The producer id and its new epoch.
    Ready(i64, i16),
    /// A transaction to finish (aborted, or left prepared) before the
    /// new epoch.
    Finish(TxnEntry),
    /// A transaction being finished by another broker.
    Busy,
    /// A new producer id is needed (a new entry, or spent epochs).
    NeedId,
}

/// The next epoch, or a new producer id when the epoch is spent (as
/// Kafka does at `i16::MAX - 1`).
fn bump(e: &mut TxnEntry) {
    e.epoch = e.epoch.saturating_add(1);
}

/// InitProducerId's change of the stored entry: `fresh` is a producer id
/// for a new one (or one whose epochs are spent), [`Init::NeedId`] when
/// one is needed and there is none yet.
fn init_step(
    stored: Option<TxnEntry>,
    (id, timeout_ms, fresh, now): (&str, i32, Option<i64>, i64),
    (current_id, current_epoch): (i64, i16),
) -> Step<(Option<TxnEntry>, Init)> {
    let Some(mut e) = stored else {
        let Some(fresh) = fresh else {
            return Ok((None, Init::NeedId));
        };
        let e = TxnEntry::new(id, fresh, timeout_ms, now);
        return Ok((Some(e), Init::Ready(fresh, 0)));
    };
    // KIP-360: the client names the id and epoch it has; an older one is
    // fenced (its epoch, or the one before a timeout's abort bumped it).
    if current_id >= 0
        && (current_id != e.producer_id
            || (current_epoch != e.epoch && current_epoch.saturating_add(1) != e.epoch))
    {
        return Err(k::PRODUCER_FENCED);
    }
    match e.state {
        TxnState::Ongoing => {
            bump(&mut e);
            e.prepare(false, now);
            Ok((Some(e.clone()), Init::Finish(e)))
        }
        s if s.is_prepared() => {
            let stale = now.saturating_sub(e.updated_ms) > TAKEOVER.as_millis() as i64;
            if !stale {
                return Ok((None, Init::Busy));
            }
            e.coordinator_epoch = e.coordinator_epoch.saturating_add(1);
            e.updated_ms = now;
            Ok((Some(e.clone()), Init::Finish(e)))
        }
        _ => {
            if e.epoch >= i16::MAX - 1 {
                let Some(fresh) = fresh else {
                    return Ok((None, Init::NeedId));
                };
                e.producer_id = fresh;
                e.epoch = 0;
            } else {
                bump(&mut e);
            }
            e.state = TxnState::Empty;
            e.timeout_ms = timeout_ms;
            e.partitions = BTreeSet::new();
            e.updated_ms = now;
            let ready = Init::Ready(e.producer_id, e.epoch);
            Ok((Some(e), ready))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::testing::shared_with;

    /// A topic deleted while a transaction holds one of its partitions:
    /// its markers are skipped there (no reader is left), the transaction
    /// completes, and the producer goes on (a marker that could never be
    /// written left it prepared, and InitProducerId answered
    /// CONCURRENT_TRANSACTIONS for ever).
    #[test]
    fn a_transaction_over_a_deleted_topic_completes() {
        let (_sim, shared) = shared_with(|c| c.request_timeout_ms = 300);
        let dir = tempfile::tempdir().unwrap();
        let registry: Arc<dyn Registry> =
            Arc::new(crate::coord::DirRegistry::open(dir.path()).unwrap());
        let t = Transactions::new(Arc::clone(&registry), coordinator(&registry));
        let producer = t.init(&shared, "app", 60_000, (-1, -1)).unwrap();
        // Added while it existed; deleted since.
        t.add(&shared, "app", producer, (&[("gone".into(), 0)], &[]))
            .unwrap();
        assert_eq!(t.end(&shared, "app", producer, true), Ok(()));
        let e = transactions::read(&*registry, "app").unwrap().unwrap();
        assert_eq!(e.state, TxnState::CompleteCommit);
        assert_eq!(
            t.init(&shared, "app", 60_000, producer),
            Ok((producer.0, 1))
        );
    }

    /// A broker's group coordinator on `registry`, with no partition
    /// counts of its own.
    fn coordinator(registry: &Arc<dyn Registry>) -> Arc<Coordinator> {
        let count = |_: &str| None;
        Coordinator::start(
            Arc::clone(registry),
            count,
            || false,
            |_| {},
            Default::default(),
        )
        .unwrap()
    }

    /// Two brokers' group coordinators on one registry, this one's
    /// transactions, and a producer of transactional id `app`.
    struct Scene {
        _sim: Arc<crate::storage::fs::sim::SimFs>,
        shared: Arc<Shared>,
        registry: Arc<dyn Registry>,
        t: Transactions,
        other: Arc<Coordinator>,
        producer: (i64, i16),
    }

    fn two_brokers() -> Scene {
        let (_sim, shared) = shared_with(|_| {});
        let registry: Arc<dyn Registry> = Arc::new(crate::coord::mem::MemRegistry::default());
        let t = Transactions::new(Arc::clone(&registry), coordinator(&registry));
        let producer = t.init(&shared, "app", 60_000, (-1, -1)).unwrap();
        let other = coordinator(&registry);
        Scene {
            _sim,
            shared,
            registry,
            t,
            other,
            producer,
        }
    }

    /// A transaction's offsets, committed by a member whose partition is
    /// claimed on another broker: refused to anyone else (KIP-447),
    /// unstable while open, the group's (on every broker) once committed,
    /// and written to the group's offsets once the partition is free.
    #[test]
    fn offsets_of_a_transaction_are_the_groups_only_once_committed() {
        let scene = two_brokers();
        let (shared, registry, t, other) = (&scene.shared, &scene.registry, &scene.t, &scene.other);
        let producer = scene.producer;
        let claim = registry.claim("g", "t", 0, "m", Duration::from_secs(60));
        let claim = claim.unwrap().unwrap();
        t.add(shared, "app", producer, (&[], &["g".into()]))
            .unwrap();
        let at = |o| [("t".to_string(), 0, o)];
        let zombie = t.add_offsets(shared, "app", producer, ("g", "z", 1), &at(9));
        assert_eq!(zombie, Err(k::ILLEGAL_GENERATION));
        t.add_offsets(shared, "app", producer, ("g", "m", 1), &at(42))
            .unwrap();
        let asked = [("t".to_string(), 0)];
        assert_eq!(
            other.fetch_offsets("g", &asked, true),
            [(-1, k::UNSTABLE_OFFSET_COMMIT)]
        );
        assert_eq!(other.fetch_offsets("g", &asked, false), [(-1, k::NONE)]);
        assert_eq!(t.end(shared, "app", producer, true), Ok(()));
        for broker in [other, &t.groups] {
            assert_eq!(broker.fetch_offsets("g", &asked, true), [(42, k::NONE)]);
            assert_eq!(broker.fetch_all_offsets("g"), Ok(vec![("t".into(), 0, 42)]));
        }
        // The member's broker writes it, or any once the partition is free.
        assert_eq!(registry.committed("g", "t", 0).unwrap(), None);
        t.tick(shared);
        assert_eq!(registry.committed("g", "t", 0).unwrap(), None);
        drop(claim);
        t.tick(shared);
        assert_eq!(registry.committed("g", "t", 0).unwrap(), Some(42));
        let e = transactions::read(&**registry, "app").unwrap().unwrap();
        assert!(e.committed.is_empty(), "{e:?}");
        assert_eq!(other.fetch_offsets("g", &asked, true), [(42, k::NONE)]);
    }

    /// An aborted transaction's offsets are nobody's.
    #[test]
    fn offsets_of_an_aborted_transaction_are_dropped() {
        let scene = two_brokers();
        let (shared, registry, t, other) = (&scene.shared, &scene.registry, &scene.t, &scene.other);
        let producer = scene.producer;
        t.add(shared, "app", producer, (&[], &["g".into()]))
            .unwrap();
        let offsets = [("t".to_string(), 0, 42)];
        t.add_offsets(shared, "app", producer, ("g", "", -1), &offsets)
            .unwrap();
        assert_eq!(t.end(shared, "app", producer, false), Ok(()));
        t.tick(shared);
        let asked = [("t".to_string(), 0)];
        assert_eq!(other.fetch_offsets("g", &asked, true), [(-1, k::NONE)]);
        assert_eq!(registry.committed("g", "t", 0).unwrap(), None);
    }

    /// A transaction's offsets name a registry group, and its entry holds
    /// at most PARTITIONS_MAX of them, those committed and not yet written
    /// to their groups included.
    #[test]
    fn a_transactions_offsets_are_bounded() {
        let scene = two_brokers();
        let (shared, registry, t) = (&scene.shared, &scene.registry, &scene.t);
        let producer = scene.producer;
        let offsets = |range: std::ops::Range<u32>| -> Vec<(String, u32, u64)> {
            range.map(|p| ("t".to_string(), p, 1)).collect()
        };
        t.add(shared, "app", producer, (&[], &["g".into(), "a b".into()]))
            .unwrap();
        let bad = t.add_offsets(shared, "app", producer, ("a b", "", -1), &offsets(0..1));
        assert_eq!(bad, Err(k::INVALID_GROUP_ID));
        // Held by a member elsewhere: committed, not written.
        let long = Duration::from_secs(60);
        let _claims: Vec<_> = (0..600)
            .map(|p| registry.claim("g", "t", p, "m", long).unwrap().unwrap())
            .collect();
        t.add_offsets(shared, "app", producer, ("g", "m", 1), &offsets(0..600))
            .unwrap();
        assert_eq!(t.end(shared, "app", producer, true), Ok(()));
        t.add(shared, "app", producer, (&[], &["g".into()]))
            .unwrap();
        let outside = ("g", "", -1);
        let over = t.add_offsets(shared, "app", producer, outside, &offsets(600..1001));
        assert_eq!(over, Err(k::INVALID_REQUEST));
        t.add_offsets(shared, "app", producer, outside, &offsets(600..1000))
            .unwrap();
    }

    /// InitProducerId of a transactional id the registry has takes no new
    /// producer id (a client calling it in a loop spends none).
    #[test]
    fn an_existing_transactional_id_spends_no_producer_id() {
        let (_sim, shared) = shared_with(|_| {});
        let registry: Arc<dyn Registry> = Arc::new(crate::coord::mem::MemRegistry::default());
        let t = Transactions::new(Arc::clone(&registry), coordinator(&registry));
        let (id, _) = t.init(&shared, "app", 60_000, (-1, -1)).unwrap();
        for epoch in 1..5 {
            assert_eq!(t.init(&shared, "app", 60_000, (-1, -1)), Ok((id, epoch)));
        }
        let next = shared.producer_ids.next().unwrap();
        assert_eq!(next, id + 1, "four inits took no id");
    }
}
