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
        let hw = match &p.replica {
            None => durable,
            Some(replica) => match &*replica.role() {
                Role::Leader(l) => high_watermark(l, &self.broker_id, durable, floor),
                _ => return,
            },
        };
        if hw > floor {
            p.high_watermark.fetch_max(hw, Ordering::AcqRel);
            p.waiters.wake_all();
        }
    }
}

/// Runs the replica manager until the broker stops.
pub(in crate::broker) fn manage(shared: &Arc<Shared>) {
    let Some(registry) = shared.registry.clone() else {
        return;
    };
    let mut last_error = String::new();
    // Topics whose placement was read: a placement never changes.
    let mut placed = BTreeSet::new();
    while !shared.stopping() {
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
    first_error.map_or(Ok(()), Err)
}

/// Renews this broker's registration (its lease, on a directory); one
/// that expired (the broker was stopped past its lease: others may have
/// taken its partitions) is made again. `false`: it was not live until
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
        Ok(held) => *entry = Some(held),
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
        let why = "this broker's registration is lapsed or its registry session in doubt";
        set_role(shared, p, Role::Waiting(why.into()));
        return Ok(());
    }
    let Some((state, version)) = registry.partition_state(&p.topic, p.partition)? else {
        shared.create_state(&p.topic, p.partition, &replica.replicas);
        return Ok(());
    };
    let facts = Facts {
        me: &shared.broker_id,
        state: &state,
        live,
        session_alive,
    };
    let decision = decide(&facts, &replica.role());
    match decision {
        Decision::Stay => lead(shared, registry, p, live),
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
    let Some(replica) = &p.replica else {
        return;
    };
    let _log = p.lock();
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
    let epoch_start = {
        let mut log = p.lock();
        log.set_leader_epoch(epoch)?;
        log.next_offset()
    };
    let leading = Leading {
        epoch,
        version,
        isr: state.isr,
        epoch_start,
        since: Instant::now(),
        progress: Default::default(),
    };
    set_role(shared, p, Role::Leader(leading));
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
        let role = replica.role();
        let Role::Leader(l) = &*role else {
            return Ok(());
        };
        let hw = p.high_watermark.load(Ordering::Acquire);
        let lag = shared.config.replica_lag_time;
        let facts = (shared.broker_id.as_str(), &replica.replicas[..], live);
        let Some(isr) = isr_change(l, facts, (hw, lag, Instant::now())) else {
            return Ok(());
        };
        let next = PartitionState {
            leader: Some(shared.broker_id.clone()),
            leader_epoch: u64::from(l.epoch),
            isr,
        };
        (next, l.version)
    };
    if !registry.set_partition_state(&p.topic, p.partition, &next, version)? {
        // Changed by another: the next round sees who leads now.
        return Ok(());
    }
    {
        let mut role = replica.role();
        if let Role::Leader(l) = &mut *role {
            if u64::from(l.epoch) == next.leader_epoch && l.version == version {
                shared.log(format_args!(
                    "{}-{}: ISR {:?} -> {:?}",
                    p.topic, p.partition, l.isr, next.isr
                ));
                l.isr = next.isr;
                l.version = version + 1;
            }
        }
    }
    shared.advance_high_watermark(p);
    // A smaller ISR can end acks=all waits (with not_enough_replicas).
    p.waiters.wake_all();
    Ok(())
}
