//! The replica manager: a thread that reads the registry's partition
//! states and the live brokers and makes each replicated partition's role
//! match ([`super::decide`]): it elects this broker when the state lets
//! it, steps down when it must, and as leader changes the ISR.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{decide, high_watermark, isr_change, Decision, Facts, Leading, Role, POLL};
use crate::broker::shared::{Partition, Shared};
use crate::coord::{PartitionState, Registry, SessionState};
use crate::error::Result;
use crate::storage::refetch::{self, Refetch};
use crate::sync::lock;

impl Shared {
    /// Creates a replicated partition's first state (the preferred leader
    /// in epoch 0, every replica in sync: all logs are empty), unless it
    /// has one; a failure is left to the replica manager, which tries
    /// again.
    pub(in crate::broker) fn create_state(&self, topic: &str, partition: u32, replicas: &[String]) {
        let Some(registry) = &self.registry else {
            return;
        };
        let state = PartitionState {
            leader: replicas.first().cloned(),
            leader_epoch: 0,
            isr: replicas.to_vec(),
        };
        if let Err(e) = registry.create_partition_state(topic, partition, &state) {
            self.log(format_args!(
                "cannot create the state of {topic}-{partition}: {e} (trying again)"
            ));
        }
    }

    /// Raises a partition's high watermark to what its ISR holds durably
    /// (its flushed offset for a single copy) and wakes its waiters when it
    /// moved.
    pub(in crate::broker) fn advance_high_watermark(&self, p: &Partition) {
        let durable = p.flushed_offset.load(Ordering::Acquire);
        let floor = p.high_watermark.load(Ordering::Acquire);
        let raise = |hw: u64| hw > floor && p.high_watermark.fetch_max(hw, Ordering::AcqRel) < hw;
        let raised = match &p.replica {
            None => raise(durable),
            // Raised while the role is held: a leader turned follower
            // (which takes the role to change it) cuts its log and lowers
            // the watermark only after, never between the look and the
            // raise.
            Some(replica) => match &*replica.role() {
                Role::Leader(l) => raise(high_watermark(l, &self.broker_id, durable, floor)),
                _ => false,
            },
        };
        if raised {
            p.waiters.wake_all();
        }
    }
}

/// How often the replica manager reads every placement again.
const PLACEMENTS_AGAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs the replica manager until the broker stops.
pub(in crate::broker) fn manage(shared: &Arc<Shared>) {
    let Some(registry) = shared.registry.clone() else {
        return;
    };
    let mut last_error = String::new();
    // Topics whose placement was read: a placement never changes, but a
    // topic deleted here may be created again.
    let mut placed = BTreeSet::new();
    let (mut deletions, mut looked) = (0, Instant::now());
    while !shared.stopping() {
        // Looked at afresh after a deletion here, and every few seconds (a
        // name deleted while it was held elsewhere).
        let deleted = shared.deletions.load(Ordering::Acquire);
        if deleted != deletions || looked.elapsed() > PLACEMENTS_AGAIN {
            placed.clear();
            (deletions, looked) = (deleted, Instant::now());
        }
        let seen = registry.changes();
        let error = match round(shared, &*registry, &mut placed) {
            Ok(()) => String::new(),
            Err(e) => e.to_string(),
        };
        super::follower::start_fetchers(shared);
        if !error.is_empty() && error != last_error {
            shared.log(format_args!("replica manager: {error}"));
        }
        last_error = error;
        let until = Instant::now() + POLL;
        while Instant::now() < until
            && registry.changes() == seen
            && !shared.nudge.swap(false, Ordering::AcqRel)
            && !shared.stopping()
        {
            std::thread::sleep(POLL / 10);
        }
    }
}

/// Before this broker registers: each replica whose log was cut (its
/// refetch mark) and that is still named in sync leaves the ISR, as its
/// first round would ([`Decision::Leave`]); alone in it, it stays, and
/// may not lead. Registered first, it would count as alive and in sync
/// until that round, and a peer healing its own damage could count on it
/// as whole. Nothing is changed while this broker's id is registered
/// already; a registry that cannot be read is said; the rounds go on.
pub(in crate::broker) fn leave_if_cut(shared: &Shared) {
    let Some(registry) = shared.registry.clone() else {
        return;
    };
    let cut = |p: &Arc<Partition>| {
        (p.replica.as_ref()).is_some_and(|r| lock(&r.refetch).is_some_and(|m| !m.left_isr))
    };
    let marked: Vec<Arc<Partition>> = shared.all_partitions().into_iter().filter(cut).collect();
    if marked.is_empty() {
        return;
    }
    let live = match registry.brokers() {
        Ok(brokers) => brokers.into_iter().map(|b| b.id).collect::<Vec<_>>(),
        Err(e) => {
            shared.log(format_args!(
                "cannot read the registry before registering: {e}"
            ));
            return;
        }
    };
    if live.contains(&shared.broker_id) {
        // Its id is held: by another process (a copy of this data
        // directory), which this one must not act for, or by this
        // broker's killed incarnation (on ZooKeeper, until its session
        // expires), which shows the replica alive in sync anyway. The
        // first round, once registered, leaves instead.
        return;
    }
    for p in marked {
        // A change that lost a race with another is tried again (alone in
        // the ISR, it never leaves: three looks).
        for _ in 0..3 {
            if let Err(e) = manage_partition(shared, &*registry, &p, &live, true) {
                shared.log(format_args!(
                    "{}-{}: cannot leave the ISR before registering: {e}",
                    p.topic, p.partition
                ));
                break;
            }
            if !cut(&p) {
                break;
            }
        }
    }
}

/// Why a replica serves nothing while this broker's registration or
/// registry session is not known alive: others may be electing.
const IN_DOUBT: &str = "this broker's registration is lapsed or its registry session in doubt";

/// Steps every replica that leads or follows down whenever this
/// broker's registry session is in doubt, on a thread of its own, until
/// the broker stops. The manager's round does so too, but only between
/// its calls to the registry, and one of those may wait a long time: on
/// ZooKeeper, a call made while the connection is down waits until the
/// session expires on the client, past the moment the ensemble expires
/// it and others may elect a new leader, while this one would go on
/// acknowledging. The client knows its connection is down well within
/// the session timeout.
pub(in crate::broker) fn watch_session(shared: &Shared) {
    let Some(registry) = shared.registry.clone() else {
        return;
    };
    while !shared.stopping() {
        if registry.session() != SessionState::Alive {
            for p in shared.all_partitions() {
                let serving =
                    (p.replica.as_ref()).is_some_and(|r| !matches!(*r.role(), Role::Waiting(_)));
                if serving {
                    set_role(shared, &p, Role::Waiting(IN_DOUBT.into()));
                }
            }
        }
        std::thread::sleep(POLL);
    }
}

/// One look at the registry: every replicated partition's role made to
/// match its state.
fn round(shared: &Shared, registry: &dyn Registry, placed: &mut BTreeSet<String>) -> Result<()> {
    let registered = keep_registered(shared, registry);
    // Cut off from the registry, the roles below still step down.
    let opened = open_placed_here(shared, registry, placed);
    let partitions: Vec<Arc<Partition>> = shared
        .all_partitions()
        .into_iter()
        .filter(|p| p.replica.is_some())
        .collect();
    if partitions.is_empty() {
        return opened;
    }
    let session_alive = registered && registry.session() == SessionState::Alive;
    let live = match registry.brokers() {
        Ok(brokers) => brokers.into_iter().map(|b| b.id).collect::<Vec<_>>(),
        Err(e) => {
            // Cut off from the registry: leaders stop acknowledging.
            for p in &partitions {
                let why = format!("this broker cannot read the registry: {e}");
                set_role(shared, p, Role::Waiting(why));
            }
            return Err(e);
        }
    };
    let mut first_error = opened.err();
    for p in &partitions {
        if let Err(e) = manage_partition(shared, registry, p, &live, session_alive) {
            first_error.get_or_insert(e);
        }
    }
    if session_alive {
        if let Err(e) = hand_over_offline(shared, registry, &live) {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Replicas this broker holds but could not open (their logs damaged
/// past what it can heal, or unreadable): each leaves the ISR, as a
/// replica whose log stopped does, so that a leader it was hands the
/// partition to the other in-sync replicas rather than staying named
/// while it serves nothing.
fn hand_over_offline(shared: &Shared, registry: &dyn Registry, live: &[String]) -> Result<()> {
    let offline: Vec<(String, u32)> = lock(&shared.offline).keys().cloned().collect();
    for (topic, partition) in offline {
        let Some((state, version)) = registry.partition_state(&topic, partition)? else {
            continue;
        };
        let facts = Facts {
            me: &shared.broker_id,
            state: &state,
            live,
            session_alive: true,
            cut: None,
            failed: true,
        };
        let Decision::Leave(next) = decide(&facts, &Role::Waiting("offline".into())) else {
            continue;
        };
        if registry.set_partition_state(&topic, partition, &next, version)? {
            shared.log(format_args!(
                "{topic}-{partition}: left the ISR (now {:?}, leader {:?}): it is offline here",
                next.isr, next.leader
            ));
        }
    }
    Ok(())
}

/// Checks this broker's registration (its lease, on a directory, which
/// the lease's own thread renews: [`crate::broker::lease`]); one that
/// expired (the broker was stopped past its lease: others may have taken
/// its partitions) is made again. `false`: it was not live until
/// now, so this round serves nothing.
fn keep_registered(shared: &Shared, registry: &dyn Registry) -> bool {
    let mut registered = lock(&shared.registered);
    let Some((entry, info)) = registered.as_mut() else {
        return true;
    };
    if let Some(held) = entry {
        let Err(e) = held.renew() else {
            return true;
        };
        shared.log(format_args!(
            "this broker's registration lapsed ({e}): registering again"
        ));
        // The old registration holds the id: let it go first.
        *entry = None;
    }
    match registry.register_broker(info) {
        Ok(held) => {
            *lock(&shared.lease) = held.renewer();
            *entry = Some(held);
        }
        Err(e) => shared.log(format_args!("cannot register again: {e} (trying again)")),
    }
    false
}

/// Opens the topics the registry places replicas of on this broker that
/// it does not serve yet: a follower must copy its leader's records
/// before any client asks it for them.
fn open_placed_here(
    shared: &Shared,
    registry: &dyn Registry,
    placed: &mut BTreeSet<String>,
) -> Result<()> {
    for topic in registry.topics()? {
        if placed.contains(&topic) || shared.read_topics().contains_key(&topic) {
            continue;
        }
        let Some(placement) = registry.placement(&topic)? else {
            continue;
        };
        let count = placement.brokers.len() as u32;
        let mine = (0..count).any(|p| {
            placement
                .replicas_of(p)
                .is_some_and(|r| r.len() > 1 && r.contains(&shared.broker_id))
        });
        if mine {
            shared.create_topic(&topic, count)?;
        }
        placed.insert(topic);
    }
    Ok(())
}

/// Makes one partition's role match its state; as leader, its ISR too.
fn manage_partition(
    shared: &Shared,
    registry: &dyn Registry,
    p: &Arc<Partition>,
    live: &[String],
    session_alive: bool,
) -> Result<()> {
    let Some(replica) = &p.replica else {
        return Ok(());
    };
    let _deciding = lock(&replica.deciding);
    if !session_alive {
        set_role(shared, p, Role::Waiting(IN_DOUBT.into()));
        return Ok(());
    }
    let Some((state, version)) = registry.partition_state(&p.topic, p.partition)? else {
        shared.create_state(&p.topic, p.partition, &replica.replicas);
        return Ok(());
    };
    let cut = refetch_cut(shared, p, &state)?;
    let facts = Facts {
        me: &shared.broker_id,
        state: &state,
        live,
        session_alive,
        cut,
        failed: p.failed.load(Ordering::Acquire),
    };
    let decision = decide(&facts, &replica.role());
    match decision {
        Decision::Stay => {
            adopt_shrunk_isr(shared, p, &state, version);
            lead(shared, registry, p, live)
        }
        Decision::Leave(next) => leave_isr(shared, registry, p, &next, (version, facts.failed)),
        Decision::Follow { leader, epoch } => {
            set_role(shared, p, Role::Follower { leader, epoch });
            Ok(())
        }
        Decision::Wait(why) => {
            set_role(shared, p, Role::Waiting(why));
            Ok(())
        }
        Decision::Elect(next) => {
            // Nobody leads while the election runs, this broker included.
            if matches!(*replica.role(), Role::Leader(_)) {
                set_role(shared, p, Role::Waiting("taking a new epoch".into()));
            }
            let leads = next.leader.as_deref() == Some(shared.broker_id.as_str());
            if registry.set_partition_state(&p.topic, p.partition, &next, version)? && leads {
                become_leader(shared, p, next, version + 1)?;
            }
            Ok(())
        }
    }
}

/// Leaves the ISR by compare-and-set ([`Decision::Leave`]): `next` at
/// `version`; `failed` when the log stopped (else it was cut).
fn leave_isr(
    shared: &Shared,
    registry: &dyn Registry,
    p: &Partition,
    next: &PartitionState,
    (version, failed): (u64, bool),
) -> Result<()> {
    let Some(replica) = &p.replica else {
        return Ok(());
    };
    if matches!(*replica.role(), Role::Leader(_)) {
        set_role(shared, p, Role::Waiting("leaving the ISR".into()));
    }
    if registry.set_partition_state(&p.topic, p.partition, next, version)? {
        let why = if failed {
            "its log stopped after a failed fsync"
        } else {
            "its log was cut below what it held, and it refetches from a replica in sync"
        };
        shared.log(format_args!(
            "{}-{}: left the ISR (now {:?}, leader {:?}): {why}",
            p.topic, p.partition, next.isr, next.leader
        ));
        refetch_cut(shared, p, next)?;
    }
    Ok(())
}

/// The cut of a replica whose log lost records it held (its refetch mark),
/// given the partition's `state`: `None` once a leader has taken it back
/// in sync (named in the ISR after it left it), when the mark goes. Notes,
/// durably, when it has left the ISR.
fn refetch_cut(shared: &Shared, p: &Partition, state: &PartitionState) -> Result<Option<u64>> {
    let Some(replica) = &p.replica else {
        return Ok(None);
    };
    let mut mark = lock(&replica.refetch);
    let Some(m) = *mark else {
        return Ok(None);
    };
    let in_isr = state.isr.contains(&shared.broker_id);
    let dir = shared.store.partition_dir(&p.topic, p.partition);
    let vfs = &*shared.config.vfs;
    match (in_isr, m.left_isr) {
        (true, true) => {
            refetch::remove(vfs, &dir)?;
            *mark = None;
            shared.log(format_args!(
                "{}-{} is whole again: back in sync, it holds what its cut at offset {} lost",
                p.topic, p.partition, m.cut_at
            ));
            return Ok(None);
        }
        (false, false) => {
            let left = Refetch {
                left_isr: true,
                ..m
            };
            refetch::write(vfs, &dir, &left)?;
            *mark = Some(left);
        }
        _ => {}
    }
    Ok(Some(m.cut_at))
}

/// A leader takes a state of its own epoch that another replica changed
/// (a replica whose log was cut leaving the ISR: [`Decision::Leave`]), so
/// that it counts that replica no more and takes it back once caught up.
fn adopt_shrunk_isr(shared: &Shared, p: &Partition, state: &PartitionState, version: u64) {
    let Some(replica) = &p.replica else {
        return;
    };
    let changed = match &*replica.role() {
        Role::Leader(l) => {
            l.version != version
                && u64::from(l.epoch) == state.leader_epoch
                && state.leader.as_deref() == Some(shared.broker_id.as_str())
        }
        _ => false,
    };
    if changed {
        adopt(shared, p, state, version);
        shared.advance_high_watermark(p);
        p.waiters.wake_all();
    }
}

/// Takes a role in a partition just opened at once, rather than at the
/// manager's next look: the produce that created its topic need not be
/// refused first. A failure is left to the manager.
pub(in crate::broker) fn settle(shared: &Shared, p: &Arc<Partition>) {
    let Some(registry) = &shared.registry else {
        return;
    };
    let Ok(brokers) = registry.brokers() else {
        return;
    };
    let live: Vec<String> = brokers.into_iter().map(|b| b.id).collect();
    let alive = registry.session() == SessionState::Alive;
    if let Err(e) = manage_partition(shared, &**registry, p, &live, alive) {
        shared.log(format_args!(
            "{}-{}: {e} (trying again)",
            p.topic, p.partition
        ));
    }
}

/// Changes a partition's role away from leading (or to another
/// follower's), under its log's lock so that no produce appends across
/// the change, and wakes its waiters: acks=all answers waiting in the old
/// role end.
fn set_role(shared: &Shared, p: &Partition, role: Role) {
    let log = p.lock();
    set_role_locked(shared, p, &log, role);
}

/// [`set_role`], its log's lock held by the caller (`_log`).
pub(super) fn set_role_locked(
    shared: &Shared,
    p: &Partition,
    _log: &crate::storage::log::Log,
    role: Role,
) {
    let Some(replica) = &p.replica else {
        return;
    };
    let mut current = replica.role();
    let same = match (&*current, &role) {
        (Role::Waiting(a), Role::Waiting(b)) => a == b,
        (
            Role::Follower {
                leader: a,
                epoch: x,
            },
            Role::Follower {
                leader: b,
                epoch: y,
            },
        ) => a == b && x == y,
        _ => false,
    };
    if same {
        return;
    }
    let (topic, partition) = (&p.topic, p.partition);
    match &role {
        Role::Waiting(why) => shared.log(format_args!("{topic}-{partition} serves nothing: {why}")),
        Role::Follower { leader, epoch } => shared.log(format_args!(
            "{topic}-{partition} follows {leader} in epoch {epoch}"
        )),
        Role::Leader(l) => shared.log(format_args!(
            "{topic}-{partition} is led here in epoch {} (ISR {:?})",
            l.epoch, l.isr
        )),
    }
    *current = role;
    drop(current);
    p.waiters.wake_all();
}

/// Takes the lead of a partition in the epoch this broker just won.
fn become_leader(
    shared: &Shared,
    p: &Partition,
    state: PartitionState,
    version: u64,
) -> Result<()> {
    let epoch = u32::try_from(state.leader_epoch).unwrap_or(u32::MAX);
    // Records deleted through an earlier leader (DeleteRecords) stay
    // deleted: their start is taken before anything is served.
    let start = match shared.registry.as_deref() {
        // Unreadable: it leads from its own start rather than not at all.
        Some(registry) => match crate::coord::log_start::get(registry, &p.topic, p.partition) {
            Ok(start) => start,
            Err(e) => {
                let (t, n) = (&p.topic, p.partition);
                shared.log(format_args!("{t}-{n} leads from its own log's start: {e}"));
                0
            }
        },
        None => 0,
    };
    {
        // One lock from the epoch's start to the role: no follower's
        // append comes between, so the epoch starts where it says.
        let mut log = p.lock();
        if start > log.start_offset() {
            let end = log.visible_offset();
            log.delete_records_before(start.min(end))?;
        }
        log.begin_epoch(epoch)?;
        let leading = Leading {
            epoch,
            version,
            isr: state.isr,
            epoch_start: log.next_offset(),
            since: Instant::now(),
            progress: Default::default(),
        };
        set_role_locked(shared, p, &log, Role::Leader(leading));
    }
    shared.advance_high_watermark(p);
    Ok(())
}

/// A leader's duty each round: the ISR changed by compare-and-set when a
/// member's registration is gone, it lags, or a replica caught up.
fn lead(shared: &Shared, registry: &dyn Registry, p: &Partition, live: &[String]) -> Result<()> {
    let Some(replica) = &p.replica else {
        return Ok(());
    };
    let (next, version) = {
        let mut role = replica.role();
        let Role::Leader(l) = &mut *role else {
            return Ok(());
        };
        let hw = p.high_watermark.load(Ordering::Acquire);
        let lag = shared.config.replica_lag_time;
        let facts = (shared.broker_id.as_str(), &replica.replicas[..], live);
        let Some(isr) = isr_change(l, facts, (hw, lag, Instant::now())) else {
            return Ok(());
        };
        // A member that joins holds the watermark from now on, before the
        // registry names it in sync (Kafka's maximal ISR): a replica the
        // registry calls in sync, which may be elected, holds everything
        // below the watermark. One that leaves holds it until it is out.
        for r in &isr {
            if !l.isr.contains(r) {
                l.isr.push(r.clone());
            }
        }
        let next = PartitionState {
            leader: Some(shared.broker_id.clone()),
            leader_epoch: u64::from(l.epoch),
            isr,
        };
        (next, l.version)
    };
    match registry.set_partition_state(&p.topic, p.partition, &next, version) {
        Ok(true) => adopt(shared, p, &next, version + 1),
        // Refused, or the answer lost (applied or not): the state as it
        // is now says which.
        Ok(false) => reconcile(shared, registry, p)?,
        Err(e) => {
            reconcile(shared, registry, p)?;
            return Err(e);
        }
    }
    shared.advance_high_watermark(p);
    // A smaller ISR can end acks=all waits (with not_enough_replicas).
    p.waiters.wake_all();
    Ok(())
}

/// Takes `state` (of version `version`) as the leader's ISR, if it still
/// leads in its epoch.
fn adopt(shared: &Shared, p: &Partition, state: &PartitionState, version: u64) {
    let Some(replica) = &p.replica else {
        return;
    };
    let mut role = replica.role();
    if let Role::Leader(l) = &mut *role {
        if u64::from(l.epoch) == state.leader_epoch {
            if l.isr != state.isr {
                shared.log(format_args!(
                    "{}-{}: ISR {:?} -> {:?}",
                    p.topic, p.partition, l.isr, state.isr
                ));
            }
            l.isr.clone_from(&state.isr);
            l.version = version;
        }
    }
}

/// After an ISR change refused or unanswered: reads the state again and,
/// when it still names this broker in its epoch, takes its ISR and
/// version (the change was made, or another of this leader's was);
/// otherwise steps down, and the next look decides again.
fn reconcile(shared: &Shared, registry: &dyn Registry, p: &Partition) -> Result<()> {
    let Some(replica) = &p.replica else {
        return Ok(());
    };
    let epoch = match &*replica.role() {
        Role::Leader(l) => l.epoch,
        _ => return Ok(()),
    };
    let now = registry.partition_state(&p.topic, p.partition)?;
    match now {
        Some((state, version))
            if state.leader.as_deref() == Some(shared.broker_id.as_str())
                && state.leader_epoch == u64::from(epoch) =>
        {
            adopt(shared, p, &state, version);
        }
        _ => set_role(
            shared,
            p,
            Role::Waiting("its state changed under it: deciding again".into()),
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Review 13: the leader's ISR changes against the registry.

    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::broker::flusher::flush_partition;
    use crate::broker::testing::{append, replicated_partition, shared_in};
    use crate::coord::mem::MemRegistry;
    use crate::coord::{BrokerInfo, Ephemeral, Lease, MemberInfo, Owner, Placement, Registry};
    use crate::storage::fs::sim::SimFs;

    const ME: &str = "broker-test";

    /// A registry in memory whose next change of a partition state runs
    /// `during` first (what other threads do while the change is in
    /// flight), and, when `ambiguous`, is applied and then reported as
    /// failed (a ZooKeeper connection lost with the `setData` in flight, a
    /// directory fsync failing after the version was taken).
    #[derive(Debug, Default)]
    struct Flaky {
        inner: MemRegistry,
        during: Mutex<Option<Hook>>,
        ambiguous: Mutex<bool>,
    }

    struct Hook(Box<dyn FnOnce() + Send>);

    impl std::fmt::Debug for Hook {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Hook")
        }
    }

    impl Registry for Flaky {
        fn location(&self) -> String {
            self.inner.location()
        }
        fn cluster_id(&self) -> Result<String> {
            self.inner.cluster_id()
        }
        fn register_broker(&self, info: &BrokerInfo) -> Result<Ephemeral> {
            self.inner.register_broker(info)
        }
        fn brokers(&self) -> Result<Vec<BrokerInfo>> {
            self.inner.brokers()
        }
        fn join(&self, group: &str, info: &MemberInfo, timeout: Duration) -> Result<Ephemeral> {
            self.inner.join(group, info, timeout)
        }
        fn sessions(&self, group: &str) -> Result<Vec<(MemberInfo, Lease)>> {
            self.inner.sessions(group)
        }
        fn groups(&self) -> Result<Vec<String>> {
            self.inner.groups()
        }
        fn claim(
            &self,
            group: &str,
            topic: &str,
            partition: u32,
            member: &str,
            timeout: Duration,
        ) -> Result<Option<Ephemeral>> {
            self.inner.claim(group, topic, partition, member, timeout)
        }
        fn owner(&self, group: &str, topic: &str, partition: u32) -> Option<Owner> {
            self.inner.owner(group, topic, partition)
        }
        fn committed(&self, group: &str, topic: &str, partition: u32) -> Result<Option<u64>> {
            self.inner.committed(group, topic, partition)
        }
        fn store_offset(
            &self,
            group: &str,
            topic: &str,
            partition: u32,
            offset: u64,
            owner: &Ephemeral,
        ) -> Result<()> {
            self.inner
                .store_offset(group, topic, partition, offset, owner)
        }
        fn reset_offset(
            &self,
            group: &str,
            topic: &str,
            partition: u32,
            offset: u64,
        ) -> Result<()> {
            self.inner.reset_offset(group, topic, partition, offset)
        }
        fn delete_offset(&self, group: &str, topic: &str, partition: u32) -> Result<bool> {
            self.inner.delete_offset(group, topic, partition)
        }
        fn offsets(&self, group: &str) -> Result<Vec<(String, u32, Result<u64>)>> {
            self.inner.offsets(group)
        }
        fn placement(&self, topic: &str) -> Result<Option<Placement>> {
            self.inner.placement(topic)
        }
        fn create_placement(&self, placement: &Placement) -> Result<bool> {
            self.inner.create_placement(placement)
        }
        fn replace_placement(&self, old: &Placement, new: &Placement) -> Result<bool> {
            self.inner.replace_placement(old, new)
        }
        fn topics(&self) -> Result<Vec<String>> {
            self.inner.topics()
        }
        fn remove_topic(&self, topic: &str) -> Result<()> {
            self.inner.remove_topic(topic)
        }
        fn config(&self, kind: &str, name: &str) -> Result<Option<Vec<u8>>> {
            self.inner.config(kind, name)
        }
        fn set_config(&self, kind: &str, name: &str, bytes: &[u8]) -> Result<()> {
            self.inner.set_config(kind, name, bytes)
        }
        fn update_config(
            &self,
            kind: &str,
            name: &str,
            change: crate::coord::registry::ConfigChange<'_>,
        ) -> Result<()> {
            self.inner.update_config(kind, name, change)
        }
        fn remove_config(&self, kind: &str, name: &str) -> Result<bool> {
            self.inner.remove_config(kind, name)
        }
        fn configs(&self, kind: &str) -> Result<Vec<String>> {
            self.inner.configs(kind)
        }
        fn partition_state(
            &self,
            topic: &str,
            partition: u32,
        ) -> Result<Option<(PartitionState, u64)>> {
            self.inner.partition_state(topic, partition)
        }
        fn create_partition_state(
            &self,
            topic: &str,
            partition: u32,
            state: &PartitionState,
        ) -> Result<bool> {
            self.inner.create_partition_state(topic, partition, state)
        }
        fn set_partition_state(
            &self,
            topic: &str,
            partition: u32,
            state: &PartitionState,
            expected_version: u64,
        ) -> Result<bool> {
            let during = lock(&self.during).take();
            if let Some(Hook(during)) = during {
                during();
            }
            let set = self
                .inner
                .set_partition_state(topic, partition, state, expected_version)?;
            if std::mem::take(&mut *lock(&self.ambiguous)) {
                return Err(crate::error::Error::Config(
                    "connection lost with the request in flight".into(),
                ));
            }
            Ok(set)
        }
    }

    /// A broker's shared state over a simulated disk with `registry`, and
    /// partition 0 of `t` (replicas me, b, c) led here in epoch 1 with
    /// ISR `isr` (the registry's state, version 0), 10 records durable.
    fn leading(isr: &[&str]) -> (Arc<SimFs>, Arc<Flaky>, Arc<Shared>, Arc<Partition>) {
        let registry = Arc::new(Flaky::default());
        let (sim, shared) = shared_in(registry.clone(), ME, isr, |c| c.min_insync_replicas = 2);
        let isr: Vec<String> = isr.iter().map(|s| s.to_string()).collect();
        let role = Role::Leader(Leading {
            epoch: 1,
            version: 0,
            isr,
            epoch_start: 0,
            since: Instant::now(),
            progress: BTreeMap::new(),
        });
        let p = replicated_partition(&shared, "t", &[ME, "b", "c"], role);
        p.lock().set_leader_epoch(1).unwrap();
        for _ in 0..10 {
            append(&p);
        }
        shared.mark_dirty(&p, true);
        flush_partition(&shared, &p);
        assert_eq!(p.flushed_offset.load(Ordering::Acquire), 10);
        (sim, registry, shared, p)
    }

    fn leader_isr(p: &Partition) -> Vec<String> {
        match &*p.replica.as_ref().unwrap().role() {
            Role::Leader(l) => l.isr.clone(),
            other => panic!("not leading: {other:?}"),
        }
    }

    fn progress_of(p: &Partition, who: &str) -> u64 {
        match &*p.replica.as_ref().unwrap().role() {
            Role::Leader(l) => l.progress.get(who).map_or(0, |g| g.offset),
            other => panic!("not leading: {other:?}"),
        }
    }

    fn live(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    /// A follower joins the ISR in the registry before the leader counts
    /// it in its high watermark: while the compare-and-set is in flight,
    /// the other follower fetches and the watermark passes what the
    /// joining one holds. Once the change is made, the registry names
    /// as in sync a replica that lacks records below the high watermark
    /// (acks=all answered for them): if the leader dies then, that
    /// replica can win the election, and acknowledged records are lost.
    /// Kafka counts a joining replica in its watermark from the moment it
    /// proposes it (the "maximal ISR" of KIP-497/AlterPartition).
    #[test]
    fn every_replica_the_registry_names_in_sync_holds_everything_below_the_high_watermark() {
        let (_sim, registry, shared, p) = leading(&[ME, "b"]);
        p.replica_fetched(&shared, "b", Some(1), 5).unwrap();
        p.replica_fetched(&shared, "c", Some(1), 5).unwrap();
        assert_eq!(p.high_watermark.load(Ordering::Acquire), 5);
        {
            let (shared, p) = (Arc::clone(&shared), Arc::clone(&p));
            *lock(&registry.during) = Some(Hook(Box::new(move || {
                // b's next fetch, while c's joining is in flight.
                p.replica_fetched(&shared, "b", Some(1), 10).unwrap();
            })));
        }
        manage_partition(&shared, &*registry, &p, &live(&["b", "c"]), true).unwrap();
        let (state, _) = registry.partition_state("t", 0).unwrap().unwrap();
        assert_eq!(state.isr, [ME, "b", "c"], "c joined");
        let hw = p.high_watermark.load(Ordering::Acquire);
        for r in state.isr.iter().filter(|r| *r != ME) {
            let held = progress_of(&p, r);
            assert!(
                held >= hw,
                "{r} is in sync in the registry but holds only {held}, below the high watermark {hw}"
            );
        }
    }

    /// A change of the ISR whose answer is lost (applied, reported as an
    /// error: the registry says to read the state again) leaves the
    /// leader with the old ISR and the old version; every later change
    /// fails its compare-and-set and is dropped without a word. Here c
    /// died: the registry dropped it, the leader never does, so its high
    /// watermark waits for c forever (acks=all times out, consumers see
    /// nothing new) until the broker restarts.
    #[test]
    fn an_isr_change_whose_answer_was_lost_is_not_the_last_one() {
        let (_sim, registry, shared, p) = leading(&[ME, "b", "c"]);
        p.replica_fetched(&shared, "b", Some(1), 10).unwrap();
        p.replica_fetched(&shared, "c", Some(1), 4).unwrap();
        *lock(&registry.ambiguous) = true;
        let c_dead = live(&["b"]);
        assert!(manage_partition(&shared, &*registry, &p, &c_dead, true).is_err());
        let (state, _) = registry.partition_state("t", 0).unwrap().unwrap();
        assert_eq!(state.isr, [ME, "b"], "applied, though reported as failed");
        for _ in 0..5 {
            manage_partition(&shared, &*registry, &p, &c_dead, true).unwrap();
        }
        assert_eq!(
            leader_isr(&p),
            [ME, "b"],
            "the leader's ISR is the registry's"
        );
        // b fetches again, at the end.
        p.replica_fetched(&shared, "b", Some(1), 10).unwrap();
        assert_eq!(
            p.high_watermark.load(Ordering::Acquire),
            10,
            "b holds all 10 and c is out: the watermark no longer waits for c"
        );
    }

    /// Issue 23: a replica whose log was cut below what it held leaves
    /// the ISR at its first look (the live leader keeps its epoch), notes
    /// that durably, never counts as whole while out, and drops its mark
    /// once the leader names it in sync again.
    #[test]
    fn a_cut_replica_leaves_the_isr_and_is_whole_once_taken_back() {
        let (sim, registry, shared, _) = leading(&[ME]);
        let following = Role::Follower {
            leader: "b".into(),
            epoch: 2,
        };
        let p = replicated_partition(&shared, "u", &[ME, "b", "c"], following);
        let dir = shared.store.partition_dir("u", 0);
        let mark = Refetch {
            cut_at: 7,
            left_isr: false,
        };
        refetch::write(&*sim, &dir, &mark).unwrap();
        *lock(&p.replica.as_ref().unwrap().refetch) = Some(mark);
        registry
            .create_placement(&Placement::new(
                "u",
                vec![[ME, "b", "c"].iter().map(|s| s.to_string()).collect()],
            ))
            .unwrap();
        let named = |isr: &[&str]| PartitionState {
            leader: Some("b".into()),
            leader_epoch: 2,
            isr: isr.iter().map(|s| s.to_string()).collect(),
        };
        assert!(registry
            .create_partition_state("u", 0, &named(&["b", ME, "c"]))
            .unwrap());
        let everyone = live(&["b", "c"]);
        manage_partition(&shared, &*registry, &p, &everyone, true).unwrap();
        let (state, version) = registry.partition_state("u", 0).unwrap().unwrap();
        assert_eq!(state, named(&["b", "c"]), "left, the leader kept its epoch");
        manage_partition(&shared, &*registry, &p, &everyone, true).unwrap();
        let left = refetch::read(&*sim, &dir).unwrap();
        assert_eq!(left.map(|m| m.left_isr), Some(true), "noted durably");
        assert!(matches!(
            &*p.replica.as_ref().unwrap().role(),
            Role::Follower { leader, epoch: 2 } if leader == "b"
        ));
        // Still out: the mark stays, whatever the rounds.
        manage_partition(&shared, &*registry, &p, &everyone, true).unwrap();
        assert!(refetch::read(&*sim, &dir).unwrap().is_some());
        // The leader takes it back.
        assert!(registry
            .set_partition_state("u", 0, &named(&["b", "c", ME]), version)
            .unwrap());
        manage_partition(&shared, &*registry, &p, &everyone, true).unwrap();
        assert_eq!(refetch::read(&*sim, &dir).unwrap(), None, "whole again");
        assert!(lock(&p.replica.as_ref().unwrap().refetch).is_none());
        let (state, _) = registry.partition_state("u", 0).unwrap().unwrap();
        assert_eq!(state, named(&["b", "c", ME]), "and it stays in");
    }

    /// A leader takes the smaller ISR another replica left in its epoch,
    /// and counts the one that left no more in its high watermark.
    #[test]
    fn a_leader_adopts_a_replica_leaving_its_isr() {
        let (_sim, registry, shared, p) = leading(&[ME, "b", "c"]);
        p.replica_fetched(&shared, "b", Some(1), 10).unwrap();
        p.replica_fetched(&shared, "c", Some(1), 3).unwrap();
        assert_eq!(p.high_watermark.load(Ordering::Acquire), 3);
        let left = PartitionState {
            leader: Some(ME.into()),
            leader_epoch: 1,
            isr: vec![ME.into(), "b".into()],
        };
        assert!(registry.set_partition_state("t", 0, &left, 0).unwrap());
        manage_partition(&shared, &*registry, &p, &live(&["b", "c"]), true).unwrap();
        assert_eq!(leader_isr(&p), [ME, "b"]);
        assert_eq!(
            p.high_watermark.load(Ordering::Acquire),
            10,
            "c, out of the ISR, no longer holds the watermark back"
        );
    }

    /// Issue 23, what was seen 2: a leader whose fsync failed (through
    /// the file-system seam) hands its partition over at its next look:
    /// nobody leads one epoch up, the other in-sync replicas elect.
    #[test]
    fn a_leader_whose_fsync_failed_hands_the_partition_over() {
        let (sim, registry, shared, p) = leading(&[ME, "b", "c"]);
        append(&p);
        shared.mark_dirty(&p, true);
        sim.fail_next_sync(|_| true);
        flush_partition(&shared, &p);
        assert!(p.failed.load(Ordering::Acquire), "the fsync failed");
        manage_partition(&shared, &*registry, &p, &live(&["b", "c"]), true).unwrap();
        let (state, _) = registry.partition_state("t", 0).unwrap().unwrap();
        assert_eq!(
            state,
            PartitionState {
                leader: None,
                leader_epoch: 2,
                isr: vec!["b".into(), "c".into()],
            }
        );
        assert!(matches!(
            &*p.replica.as_ref().unwrap().role(),
            Role::Waiting(_)
        ));
    }

    /// Issue 23, what was seen 2: a replica this broker could not open
    /// (kept offline) stayed leader in the registry, its followers looping
    /// on errors, though they held every record.
    #[test]
    fn a_replica_kept_offline_here_hands_the_partition_over() {
        let (_sim, registry, shared, _) = leading(&[ME]);
        let replicas: Vec<String> = [ME, "b", "c"].iter().map(|s| s.to_string()).collect();
        registry
            .create_placement(&Placement::new("d", vec![replicas.clone()]))
            .unwrap();
        let named = PartitionState {
            leader: Some(ME.into()),
            leader_epoch: 3,
            isr: replicas,
        };
        assert!(registry.create_partition_state("d", 0, &named).unwrap());
        lock(&shared.offline).insert(("d".into(), 0), "damaged".into());
        hand_over_offline(&shared, &*registry, &live(&["b", "c"])).unwrap();
        let (state, _) = registry.partition_state("d", 0).unwrap().unwrap();
        assert_eq!(
            state,
            PartitionState {
                leader: None,
                leader_epoch: 4,
                isr: vec!["b".into(), "c".into()],
            }
        );
    }

    /// A replica cut at open leaves the ISR before its broker registers
    /// ([`leave_if_cut`]); a change of the state that lost a race (another
    /// broker changed it first) is tried again rather than left to the
    /// first round, when the broker is registered and counts as alive.
    #[test]
    fn a_cut_replica_leaving_before_registering_tries_again_after_a_lost_race() {
        let (_sim, registry, shared, p) = leading(&[ME, "b", "c"]);
        *lock(&p.replica.as_ref().unwrap().refetch) = Some(Refetch {
            cut_at: 0,
            left_isr: false,
        });
        {
            let r = Arc::clone(&registry);
            *lock(&registry.during) = Some(Hook(Box::new(move || {
                // Another broker's change lands first: the version moves.
                let same = r.inner.partition_state("t", 0).unwrap().unwrap().0;
                assert!(r.inner.set_partition_state("t", 0, &same, 0).unwrap());
            })));
        }
        leave_if_cut(&shared);
        let (state, _) = registry.partition_state("t", 0).unwrap().unwrap();
        assert_eq!(state.isr, ["b", "c"], "left after the lost race: {state:?}");
    }
}
