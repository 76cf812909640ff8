//! What the coordinator knows of a group's Kafka members on this broker:
//! their generation, who has rejoined during a rebalance, the registry
//! entries and claims it holds for each, and where a client's assignor
//! assigns, the classic protocol's leader and assignments. Only the
//! coordinator's lock reaches it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::coord::Ephemeral;

/// A partition claimed in the registry for a member.
#[derive(Debug)]
pub(super) struct Claim {
    pub(super) topic: String,
    pub(super) partition: u32,
    /// Shared with a commit in flight, which runs outside the groups'
    /// lock: the claim is released when both are done with it. (A mutex,
    /// since a handle is not `Sync`; a commit renews the lease itself.)
    pub(super) owner: Arc<Mutex<Ephemeral>>,
}

/// What Algorithm 1 was computed on for one topic: its subscribers, sorted
/// by id, and its partition count.
pub(super) type View = (Vec<String>, u32);

/// A Kafka member of a group, as this broker holds it.
#[derive(Debug)]
pub(super) struct Member {
    pub(super) session_timeout: Duration,
    pub(super) rebalance_timeout: Duration,
    /// Subscribed topics, sorted, distinct.
    pub(super) topics: Vec<String>,
    /// Its entry in the registry group; `None` only while it is entered
    /// again after its lease was lost.
    pub(super) entry: Option<Ephemeral>,
    /// Partitions it holds since its last sync.
    pub(super) claims: Vec<Claim>,
    /// Its assignment in its generation, once synced.
    pub(super) assignment: Option<Vec<(String, Vec<i32>)>>,
    /// What each subscribed topic looked like when it synced.
    pub(super) seen: BTreeMap<String, View>,
    /// The generation it is in; `None` from its join until the rebalance
    /// completes.
    pub(super) generation: Option<i32>,
    /// It joined during the rebalance under way (else it is dropped when
    /// the rebalance completes).
    pub(super) rejoined: bool,
    /// Calls of its under way (a join or sync waiting): not silent.
    pub(super) busy: u32,
    /// When it last called.
    pub(super) last_seen: Instant,
    /// When its lease and its claims' were last renewed.
    pub(super) renewed: Instant,
    /// A commit found a claim of its fenced: the next tick renews (and so
    /// checks) them, whenever they were last renewed.
    pub(super) recheck: bool,
    /// In a group whose leader assigns: the protocols it offered at its
    /// last join (name, metadata), in its order of preference.
    pub(super) protocols: Vec<(String, Vec<u8>)>,
    /// In a group whose leader assigns: its assignment's bytes, as the
    /// leader sent them, once synced.
    pub(super) raw: Option<Vec<u8>>,
    /// Its client id, at its last join.
    pub(super) client_id: String,
}

impl Member {
    /// A new member with its registry `entry`, joining at `now`.
    pub(super) fn new(
        entry: Option<Ephemeral>,
        session_timeout: Duration,
        rebalance_timeout: Duration,
        now: Instant,
    ) -> Member {
        Member {
            session_timeout,
            rebalance_timeout,
            topics: Vec::new(),
            entry,
            claims: Vec::new(),
            assignment: None,
            seen: BTreeMap::new(),
            generation: None,
            rejoined: true,
            busy: 0,
            last_seen: now,
            renewed: now,
            recheck: false,
            protocols: Vec::new(),
            raw: None,
            client_id: String::new(),
        }
    }

    /// Gives up what it holds, as an eager member does when it rejoins.
    pub(super) fn release(&mut self) {
        self.release_except(&[]);
    }

    /// Gives up what it holds but the claims of `owned`, the partitions a
    /// cooperative member still owns as it rejoins (KIP-429): it goes on
    /// consuming and committing them through the rebalance.
    pub(super) fn release_except(&mut self, owned: &[(String, u32)]) {
        self.claims.retain(|c| {
            owned
                .iter()
                .any(|(t, p)| *t == c.topic && *p == c.partition)
        });
        self.assignment = None;
        self.raw = None;
        self.seen.clear();
    }

    /// Whether it has been silent past its session timeout: a member in a
    /// call, or waiting for a rebalance it joined, is not silent.
    pub(super) fn silent(&self, now: Instant) -> bool {
        let waiting = self.rejoined && self.generation.is_none();
        self.busy == 0
            && !waiting
            && now.saturating_duration_since(self.last_seen) > self.session_timeout
    }
}

/// A group's Kafka members on this broker.
#[derive(Debug, Default)]
pub(super) struct Group {
    /// The last completed generation (0: none yet).
    pub(super) generation: i32,
    pub(super) members: BTreeMap<String, Member>,
    /// The deadline of the rebalance under way, if one is.
    pub(super) rebalance: Option<Instant>,
    /// Ids given with MEMBER_ID_REQUIRED, not yet joined with, and when
    /// each lapses.
    pub(super) pending: BTreeMap<String, Instant>,
    /// The classic protocol's state, where the group's leader (a Kafka
    /// client's assignor) assigns; `None` where the broker does.
    pub(super) classic: Option<Classic>,
}

/// A group whose leader assigns: what the classic protocol keeps.
#[derive(Debug, Default)]
pub(super) struct Classic {
    /// The protocol chosen when the last rebalance completed.
    pub(super) protocol: String,
    /// The leader's member id, chosen then.
    pub(super) leader: String,
    /// The leader's assignments in the current generation, by member;
    /// `None` until the leader syncs.
    pub(super) assignments: Option<BTreeMap<String, Vec<u8>>>,
    /// When the registry was last looked at for another broker that
    /// coordinates the group too.
    pub(super) checked: Option<Instant>,
}

impl Classic {
    /// The bytes it keeps: the leader's assignments.
    pub(super) fn bytes(&self) -> usize {
        let assignments = self.assignments.iter().flatten();
        assignments.map(|(id, a)| id.len() + a.len()).sum()
    }
}

impl Member {
    /// The bytes of protocol metadata and assignment it keeps.
    pub(super) fn kept_bytes(&self) -> usize {
        let protocols = self.protocols.iter().map(|(n, m)| n.len() + m.len());
        protocols.sum::<usize>() + self.raw.as_ref().map_or(0, Vec::len)
    }
}

impl Classic {
    /// Kafka's choice of a protocol: every member votes for the first it
    /// offered that every member offers, and the most votes win (ties to
    /// the first name). `None` when no protocol is common to all.
    pub(super) fn vote(members: &BTreeMap<String, Member>) -> Option<String> {
        let common = |name: &str| {
            members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        };
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in members.values() {
            if let Some((name, _)) = member.protocols.iter().find(|(n, _)| common(n)) {
                *votes.entry(name).or_default() += 1;
            }
        }
        let most = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|(_, n)| *n == most)
            .map(|(name, _)| name.to_string())
    }
}

impl Group {
    /// Members, and ids given to members to come.
    pub(super) fn size(&self) -> usize {
        self.members.len() + self.pending.len()
    }

    /// Whether it has neither members nor members to come.
    pub(super) fn is_empty(&self) -> bool {
        self.size() == 0
    }

    /// Starts a rebalance unless one is under way: every member must
    /// rejoin before the longest rebalance timeout among them passes.
    pub(super) fn start_rebalance(&mut self, now: Instant) {
        if self.rebalance.is_some() {
            return;
        }
        let longest = self.members.values().map(|m| m.rebalance_timeout).max();
        self.rebalance = Some(now + longest.unwrap_or_default());
        for member in self.members.values_mut() {
            member.rejoined = false;
        }
    }

    /// Whether the rebalance under way may complete: every member has
    /// rejoined, or its deadline passed.
    pub(super) fn ready(&self, now: Instant) -> bool {
        self.rebalance
            .is_some_and(|deadline| now >= deadline || self.members.values().all(|m| m.rejoined))
    }

    /// Completes the rebalance under way: members that did not rejoin are
    /// dropped (their entries and claims with them), and the others enter
    /// the next generation.
    pub(super) fn complete(&mut self) {
        self.members.retain(|_, m| m.rejoined);
        self.generation = if self.generation == i32::MAX {
            1
        } else {
            self.generation + 1
        };
        for member in self.members.values_mut() {
            member.generation = Some(self.generation);
        }
        self.rebalance = None;
        let members = &self.members;
        if let Some(classic) = &mut self.classic {
            classic.protocol = Classic::vote(members).unwrap_or_default();
            if !members.contains_key(&classic.leader) {
                classic.leader = members.keys().next().cloned().unwrap_or_default();
            }
            classic.assignments = None;
        }
    }

    /// Drops `member` (its entry and claims), and makes the others
    /// rebalance without it: `false` if it was not a member.
    pub(super) fn remove(&mut self, member: &str, now: Instant) -> bool {
        if self.members.remove(member).is_none() {
            return false;
        }
        if !self.members.is_empty() {
            self.start_rebalance(now);
        }
        true
    }
}
