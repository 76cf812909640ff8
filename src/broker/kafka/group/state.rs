//! What the coordinator knows of a group's Kafka members on this broker:
//! their generation, who has rejoined during a rebalance, the registry
//! entries and claims it holds for each. Only the coordinator's lock
//! reaches it.

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
}

impl Member {
    /// Gives up what it holds, as an eager member does when it rejoins.
    pub(super) fn release(&mut self) {
        self.claims.clear();
        self.assignment = None;
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
