//! Groups whose leader assigns: Kafka's classic protocol, for members that
//! offer no assignor the broker runs (kafkajs's `RoundRobinAssigner`,
//! `sticky`, `cooperative-sticky`, a custom one).
//!
//! - **Join**: the coordinator chooses a protocol every member offers (as
//!   Kafka does: each member votes for the first such protocol it listed,
//!   the most votes win), keeps the group's leader while it stays (else
//!   takes the first member by id), and answers the leader with every
//!   member's metadata for that protocol.
//! - **Sync**: the leader's SyncGroup carries each member's assignment;
//!   every member's sync waits for it (at most its rebalance timeout, then
//!   REBALANCE_IN_PROGRESS and a new rebalance) and gets its own bytes as
//!   the leader sent them. The partitions in them are claimed in the
//!   registry first, as where the broker assigns: no partition is handed
//!   to a member while another holds it, and commits are fenced by the
//!   claims.
//! - **Cooperative rebalancing** (KIP-429): a member that rejoins keeps
//!   the claims of the partitions its subscription says it still owns,
//!   and a partition its new assignment leaves out stays claimed until it
//!   rejoins, so that it can commit it as it gives it up.
//!
//! Such a group belongs to Kafka clients on one broker. Its members'
//! registry entries name that broker ([`crate::coord::MemberInfo`]'s
//! `coordinator`): `klog-consume -G` refuses to join it, FindCoordinator on
//! any broker answers that broker, and a join elsewhere is answered
//! NOT_COORDINATOR. Two brokers that took the same group at once settle
//! on the one whose id sorts first: the other looks at the registry every
//! second, makes its members rejoin, and sends them there.
//!
//! A member's protocol metadata (and the assignment the leader gives it)
//! may take at most 1 MiB, and the broker keeps at most 64 MiB of them
//! over all such groups: a join past either is refused (INVALID_REQUEST,
//! GROUP_MAX_SIZE_REACHED) with a line in the log. The registry is read
//! before the coordinator's lock is taken, never under it.
//!
//! A member that offers only the broker's assignors
//! cannot join it, nor can such a member of a group the broker assigns:
//! INCONSISTENT_GROUP_PROTOCOL, and a line in the broker's log says why.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::state::Group;
use super::sync::{failed, Ask, Settled};
use super::{
    error_code, Coordinator, Join, Sync, Synced, CLASSIC_BYTES_MAX, COORDINATOR_NOT_AVAILABLE,
    GROUP_MAX_SIZE_REACHED, INCONSISTENT_GROUP_PROTOCOL, LEADER_ID, MEMBER_METADATA_BYTES_MAX,
    NONE, NOT_COORDINATOR, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
};
use crate::coord::registry::check_name;
use crate::coord::{BrokerInfo, MemberInfo};

/// How often a group whose leader assigns looks for another broker that
/// coordinates it too.
const RECHECK: Duration = Duration::from_secs(1);

/// What the registry says of a joining member's group, read before the
/// coordinator's lock is taken: its members, and the live brokers when
/// another broker's members are among them.
#[derive(Debug)]
pub(super) struct RegistryView {
    members: Vec<MemberInfo>,
    live: Vec<String>,
}

/// The bytes of a join's protocols (names and metadata).
pub(super) fn metadata_bytes(join: &Join) -> usize {
    join.protocols.iter().map(|(n, m)| n.len() + m.len()).sum()
}
use crate::kafka::consumer::ConsumerProtocolAssignment;

impl Group {
    /// A join's answer in the completed generation: the protocol, the
    /// leader, and for the leader of a group whose leader assigns, every
    /// member's metadata for the protocol.
    pub(super) fn join_answer(
        &self,
        member_id: &str,
        join: &Join,
    ) -> (String, String, Vec<(String, Vec<u8>)>) {
        let Some(classic) = &self.classic else {
            let protocol = join.protocols.first().map(|(name, _)| name.clone());
            return (protocol.unwrap_or_default(), LEADER_ID.into(), Vec::new());
        };
        let members = if classic.leader == member_id {
            let metadata = |protocols: &[(String, Vec<u8>)]| {
                let found = protocols.iter().find(|(n, _)| *n == classic.protocol);
                found.map(|(_, m)| m.clone()).unwrap_or_default()
            };
            self.members
                .iter()
                .map(|(id, m)| (id.clone(), metadata(&m.protocols)))
                .collect()
        } else {
            Vec::new()
        };
        (classic.protocol.clone(), classic.leader.clone(), members)
    }
}

/// Who joins, for the log: the member's id, else its client's.
fn who(join: &Join) -> String {
    if join.member_id.is_empty() {
        format!("a new member of client {:?}", join.client_id)
    } else {
        format!("member {}", join.member_id)
    }
}

fn names(protocols: &[(String, Vec<u8>)]) -> String {
    let names: Vec<&str> = protocols.iter().map(|(n, _)| n.as_str()).collect();
    names.join(", ")
}

impl Coordinator {
    /// Whether `join` fits its group: the same kind of assignment as the
    /// group's other members here, a protocol in common with them where
    /// the leader assigns, and the registry's members (see the module's
    /// docs). A member refused NOT_COORDINATOR leaves the group here.
    pub(super) fn check_mode(
        &self,
        groups: &mut BTreeMap<String, Group>,
        join: &Join,
        seen: RegistryView,
    ) -> Result<(), i16> {
        let local = groups.get(&join.group);
        let others = local.map_or(0, |g| {
            g.members.keys().filter(|id| **id != join.member_id).count()
        });
        if let Some(group) = local.filter(|_| others > 0) {
            self.check_local(group, join)?;
        }
        let checked = self.check_registry(local, join, &seen);
        if checked == Err(NOT_COORDINATOR) {
            if let Some(group) = groups.get_mut(&join.group) {
                group.remove(&join.member_id, Instant::now());
            }
        }
        checked
    }

    /// The join against the group's other members on this broker.
    fn check_local(&self, group: &Group, join: &Join) -> Result<(), i16> {
        let (g, who) = (&join.group, who(join));
        match &group.classic {
            None if join.leader_assigns => {
                (self.log)(format_args!(
                    "group {g}: refused {who}: it offers only assignors the broker does not \
                     run ({}), but the broker assigns this group's partitions (range, \
                     roundrobin)",
                    names(&join.protocols)
                ));
                Err(INCONSISTENT_GROUP_PROTOCOL)
            }
            Some(classic) if !join.leader_assigns => {
                (self.log)(format_args!(
                    "group {g}: refused {who}: it offers only the broker's assignors ({}), \
                     but this group's leader assigns its partitions (protocol {:?})",
                    names(&join.protocols),
                    classic.protocol
                ));
                Err(INCONSISTENT_GROUP_PROTOCOL)
            }
            Some(_) => {
                let others = group
                    .members
                    .iter()
                    .filter(|(id, _)| **id != join.member_id);
                let mut common = join.protocols.iter().map(|(n, _)| n);
                let all = |name: &String| {
                    let mut others = others.clone();
                    others.all(|(_, m)| m.protocols.iter().any(|(n, _)| n == name))
                };
                if common.any(all) {
                    return Ok(());
                }
                (self.log)(format_args!(
                    "group {g}: refused {who}: none of its assignors ({}) is offered by every \
                     other member",
                    names(&join.protocols)
                ));
                Err(INCONSISTENT_GROUP_PROTOCOL)
            }
            None => Ok(()),
        }
    }

    /// The join against the group's registry members that are not this
    /// broker's: klog members, and Kafka members coordinated elsewhere.
    fn check_registry(
        &self,
        local: Option<&Group>,
        join: &Join,
        seen: &RegistryView,
    ) -> Result<(), i16> {
        let members = &seen.members;
        let ours = |id: &str| local.is_some_and(|g| g.members.contains_key(id));
        let settled_here = local.is_some_and(|g| g.members.keys().any(|id| *id != join.member_id));
        let me = &self.config.broker_id;
        let (g, who) = (&join.group, who(join));
        for m in members.iter().filter(|m| !ours(&m.member)) {
            match (&m.coordinator, join.leader_assigns) {
                (None, false) => {}
                (Some(b), true) if b == me => {}
                (Some(b), true) => {
                    // Another broker coordinates the group: the one whose
                    // id sorts first keeps it.
                    let defer = !settled_here || b < me;
                    if defer && seen.live.contains(b) {
                        return Err(NOT_COORDINATOR);
                    }
                }
                (None, true) => {
                    (self.log)(format_args!(
                        "group {g}: refused {who}: the group has members whose partitions klog \
                         assigns (member {}), and its assignors ({}) cannot share them",
                        m.member,
                        names(&join.protocols)
                    ));
                    return Err(INCONSISTENT_GROUP_PROTOCOL);
                }
                (Some(_), false) => {
                    (self.log)(format_args!(
                        "group {g}: refused {who}: the group's leader assigns its partitions \
                         (member {}), and the broker's assignors cannot share them",
                        m.member
                    ));
                    return Err(INCONSISTENT_GROUP_PROTOCOL);
                }
            }
        }
        Ok(())
    }

    /// What the registry says of `join`'s group (see [`RegistryView`]).
    pub(super) fn registry_view(&self, join: &Join) -> Result<RegistryView, i16> {
        let members = self
            .registry
            .members(&join.group)
            .map_err(|e| error_code(&e))?;
        let me = &self.config.broker_id;
        let foreign = members
            .iter()
            .any(|m| m.coordinator.as_ref().is_some_and(|b| b != me));
        let live = if foreign {
            let brokers = self.registry.brokers().map_err(|e| error_code(&e))?;
            brokers.into_iter().map(|b| b.id).collect()
        } else {
            Vec::new()
        };
        Ok(RegistryView { members, live })
    }

    /// Whether a joining member of a group whose leader assigns fits the
    /// bytes the broker keeps for such members ([`CLASSIC_BYTES_MAX`]).
    pub(super) fn room_for_metadata(
        &self,
        groups: &BTreeMap<String, Group>,
        join: &Join,
    ) -> Result<(), i16> {
        if !join.leader_assigns {
            return Ok(());
        }
        let kept: usize = groups
            .values()
            .map(|g| {
                let members = g.members.values().map(|m| m.kept_bytes()).sum::<usize>();
                members + g.classic.as_ref().map_or(0, |c| c.bytes())
            })
            .sum();
        let old = groups
            .get(&join.group)
            .and_then(|g| g.members.get(&join.member_id))
            .map_or(0, |m| m.kept_bytes());
        if kept - old.min(kept) + metadata_bytes(join) <= CLASSIC_BYTES_MAX {
            return Ok(());
        }
        (self.log)(format_args!(
            "group {}: refused {}: the members of groups whose leaders assign keep {kept} bytes \
             of metadata here, and {CLASSIC_BYTES_MAX} is all the broker keeps",
            join.group,
            who(join)
        ));
        Err(GROUP_MAX_SIZE_REACHED)
    }

    /// Looks, at most every [`RECHECK`], whether another live broker
    /// coordinates a group whose leader assigns and sorts before this one
    /// (two took it at once): then the group rebalances, and each member
    /// that rejoins here is sent there (NOT_COORDINATOR).
    pub(super) fn settle_coordinators(&self, now: Instant) {
        let due: Vec<String> = {
            let mut groups = self.groups();
            let classic = groups.iter_mut().filter_map(|(name, g)| {
                let c = g.classic.as_mut()?;
                let due = c
                    .checked
                    .is_none_or(|t| now.saturating_duration_since(t) >= RECHECK);
                due.then(|| {
                    c.checked = Some(now);
                    name.clone()
                })
            });
            classic.collect()
        };
        let me = &self.config.broker_id;
        for name in due {
            let first = self.coordinator_of(&name).map(|b| b.id);
            if first.is_none_or(|b| b >= *me) {
                continue;
            }
            if let Some(group) = self.groups().get_mut(&name) {
                if group.rebalance.is_none() && !group.members.is_empty() {
                    group.start_rebalance(now);
                    self.changed.notify_all();
                }
            }
        }
    }

    /// The registry's live broker `id`, if it is one.
    fn live_broker(&self, id: &str) -> Option<BrokerInfo> {
        let brokers = self.registry.brokers().ok()?;
        brokers.into_iter().find(|b| b.id == id)
    }

    /// The broker that coordinates `group`, where its leader assigns and
    /// another live broker holds it (see the module's docs): for
    /// FindCoordinator; `None` for this broker.
    pub(crate) fn coordinator_of(&self, group: &str) -> Option<BrokerInfo> {
        let members = self.registry.members(group).ok()?;
        let me = &self.config.broker_id;
        let mut held: Vec<&String> = members
            .iter()
            .filter_map(|m| m.coordinator.as_ref())
            .collect();
        held.sort();
        held.dedup();
        if held.first().is_none_or(|b| *b == me) {
            return None;
        }
        held.into_iter().find_map(|b| self.live_broker(b))
    }

    /// SyncGroup where the leader assigns (see the module's docs).
    pub(super) fn sync_classic(&self, sync: &Sync, ask: &Ask) -> Synced {
        let settled = self.await_assignment(sync, ask).and_then(|raw| {
            let wanted = self.assigned_partitions(&sync.group, &raw);
            let held: Vec<(String, u32)> = {
                let groups = self.groups();
                let member = groups
                    .get(&sync.group)
                    .and_then(|g| g.members.get(&sync.member_id));
                member.map_or_else(Vec::new, |m| {
                    m.claims
                        .iter()
                        .map(|c| (c.topic.clone(), c.partition))
                        .collect()
                })
            };
            let new: Vec<(String, u32)> = wanted
                .iter()
                .filter(|p| !held.contains(p))
                .cloned()
                .collect();
            let settled = self.settle(sync, ask, &mut || self.claim_all(sync, ask, &new))?;
            Ok((settled, wanted, raw))
        });
        let mut groups = self.groups();
        let group = groups.get_mut(&sync.group);
        let current = group
            .as_ref()
            .is_some_and(|g| g.rebalance.is_none() && g.generation == sync.generation);
        let Some(member) = group.and_then(|g| g.members.get_mut(&sync.member_id)) else {
            return failed(UNKNOWN_MEMBER_ID);
        };
        member.busy -= 1;
        member.last_seen = Instant::now();
        match settled {
            Ok((settled, wanted, raw)) if current && member.generation == Some(sync.generation) => {
                member.claims.extend(settled.claims);
                let assignment = by_topic(&wanted);
                member.assignment = Some(assignment.clone());
                member.raw = Some(raw.clone());
                Synced {
                    error: NONE,
                    assignment,
                    raw: Some(raw),
                }
            }
            Ok(_) => failed(REBALANCE_IN_PROGRESS),
            Err(error) => failed(error),
        }
    }

    /// Keeps the leader's assignments (once a generation), then waits for
    /// them: the member's bytes (empty if the leader gave it none).
    fn await_assignment(&self, sync: &Sync, ask: &Ask) -> Result<Vec<u8>, i16> {
        let mut groups = self.groups();
        if let Some(group) = groups.get_mut(&sync.group) {
            let members = &group.members;
            let current = group.rebalance.is_none() && group.generation == sync.generation;
            if let Some(classic) = group.classic.as_mut().filter(|_| current) {
                if classic.leader == sync.member_id && classic.assignments.is_none() {
                    let given = sync.assignments.iter();
                    let known = given.filter(|(id, a)| {
                        members.contains_key(id) && a.len() <= MEMBER_METADATA_BYTES_MAX
                    });
                    let kept: BTreeMap<String, Vec<u8>> = known.cloned().collect();
                    let bytes: usize = kept.iter().map(|(id, a)| id.len() + a.len()).sum();
                    if kept.len() < sync.assignments.len() || bytes > CLASSIC_BYTES_MAX / 4 {
                        (self.log)(format_args!(
                            "group {}: the leader's assignments ({bytes} bytes) name members \
                             not in the group or pass the bytes the broker keeps: the members \
                             left out get none",
                            sync.group
                        ));
                    }
                    classic.assignments = Some(if bytes > CLASSIC_BYTES_MAX / 4 {
                        BTreeMap::new()
                    } else {
                        kept
                    });
                    self.changed.notify_all();
                }
            }
        }
        loop {
            if self.stopping() {
                return Err(COORDINATOR_NOT_AVAILABLE);
            }
            let now = Instant::now();
            let Some(group) = groups.get_mut(&sync.group) else {
                return Err(UNKNOWN_MEMBER_ID);
            };
            if !group.members.contains_key(&sync.member_id) {
                return Err(UNKNOWN_MEMBER_ID);
            }
            if group.rebalance.is_some() || group.generation != sync.generation {
                return Err(REBALANCE_IN_PROGRESS);
            }
            let assignments = group.classic.as_ref().and_then(|c| c.assignments.as_ref());
            if let Some(assignments) = assignments {
                return Ok(assignments
                    .get(&sync.member_id)
                    .cloned()
                    .unwrap_or_default());
            }
            if now >= ask.deadline {
                // The leader did not assign in time: the group starts over.
                group.start_rebalance(now);
                self.changed.notify_all();
                return Err(REBALANCE_IN_PROGRESS);
            }
            let nap = (ask.deadline - now).min(self.config.tick);
            groups = self
                .changed
                .wait_timeout(groups, nap.max(Duration::from_millis(1)))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// The partitions of a consumer protocol assignment that exist (a
    /// registry name, a partition the topic has), each once; none if the
    /// bytes are not an assignment.
    fn assigned_partitions(&self, group: &str, raw: &[u8]) -> Vec<(String, u32)> {
        if raw.is_empty() {
            return Vec::new();
        }
        let assignment = match ConsumerProtocolAssignment::decode(raw) {
            Ok(assignment) => assignment,
            Err(e) => {
                (self.log)(format_args!(
                    "group {group}: the leader's assignment is not the consumer protocol's \
                     ({e}): its partitions are not claimed"
                ));
                return Vec::new();
            }
        };
        let mut partitions = Vec::new();
        for tp in &assignment.assigned_partitions {
            if check_name("topic", tp.topic).is_err() {
                continue;
            }
            let count = self.partitions_of(tp.topic).unwrap_or(0);
            for &p in &tp.partitions {
                let Some(p) = u32::try_from(p).ok().filter(|p| *p < count) else {
                    continue;
                };
                if !partitions.contains(&(tp.topic.to_string(), p)) {
                    partitions.push((tp.topic.to_string(), p));
                }
            }
        }
        partitions
    }

    /// One round of claims of `partitions`: `None` when one is another's
    /// (then nothing of them is held).
    fn claim_all(
        &self,
        sync: &Sync,
        ask: &Ask,
        partitions: &[(String, u32)],
    ) -> crate::Result<Option<Settled>> {
        let mut settled = Settled::default();
        for (topic, partition) in partitions {
            let Some(claim) = self.claim(sync, ask, topic, *partition)? else {
                return Ok(None);
            };
            settled.claims.push(claim);
        }
        Ok(Some(settled))
    }
}

/// Partitions grouped by topic, in order.
fn by_topic(partitions: &[(String, u32)]) -> Vec<(String, Vec<i32>)> {
    let mut topics: Vec<(String, Vec<i32>)> = Vec::new();
    for (topic, p) in partitions {
        match topics.iter_mut().find(|(t, _)| t == topic) {
            Some((_, ps)) => ps.push(*p as i32),
            None => topics.push((topic.clone(), vec![*p as i32])),
        }
    }
    topics
}

#[cfg(test)]
#[path = "classic_tests.rs"]
mod tests;
