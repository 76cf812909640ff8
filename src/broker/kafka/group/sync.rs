//! SyncGroup: the member's share by Algorithm 1, claimed in the registry
//! before it is handed out.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::state::{Claim, View};
use super::{
    error_code, view, Coordinator, Sync, Synced, COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION,
    NONE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
};
use crate::coord::assign;
use crate::sync::lock;

/// The first wait after a conflict, before it doubles (as a `klog-consume
/// -G` member waits).
const BACKOFF_BASE_MS: u64 = 20;
/// How many times the wait doubles at most (to 640 ms).
const BACKOFF_DOUBLINGS_MAX: u32 = 5;
/// The longest nap of a backoff, between looks for a stop or a rebalance.
const NAP_STEP: Duration = Duration::from_millis(20);

/// A member's share, claimed.
#[derive(Debug, Default)]
pub(super) struct Settled {
    pub(super) claims: Vec<Claim>,
    pub(super) assignment: Vec<(String, Vec<i32>)>,
    pub(super) seen: BTreeMap<String, View>,
}

/// What a sync works with, copied out of the lock.
#[derive(Debug)]
pub(super) struct Ask {
    pub(super) topics: Vec<String>,
    pub(super) session_timeout: Duration,
    pub(super) deadline: Instant,
    /// Whether the group's leader assigns.
    pub(super) classic: bool,
}

impl Coordinator {
    /// SyncGroup: the member's partitions of each subscribed topic, each
    /// claimed for it in the registry (see the module's docs). Waits up to
    /// the member's rebalance timeout for claims others still hold.
    pub(crate) fn sync(&self, sync: &Sync) -> Synced {
        let ask = match self.begin_sync(sync) {
            Ok(ask) => ask,
            Err(answer) => return answer,
        };
        if ask.classic {
            return self.sync_classic(sync, &ask);
        }
        let settled = self.settle(sync, &ask, &mut || self.try_claim(sync, &ask));
        let mut groups = self.groups();
        let group = groups.get_mut(&sync.group);
        let current = group.as_ref().is_some_and(|g| g.rebalance.is_none())
            && group
                .as_ref()
                .is_some_and(|g| g.generation == sync.generation);
        let Some(member) = group.and_then(|g| g.members.get_mut(&sync.member_id)) else {
            return failed(UNKNOWN_MEMBER_ID);
        };
        member.busy -= 1;
        member.last_seen = Instant::now();
        match settled {
            Ok(settled) if current && member.generation == Some(sync.generation) => {
                member.claims = settled.claims;
                member.seen = settled.seen;
                member.assignment = Some(settled.assignment.clone());
                Synced {
                    error: NONE,
                    assignment: settled.assignment,
                    raw: None,
                }
            }
            Ok(_) => failed(REBALANCE_IN_PROGRESS),
            Err(error) => failed(error),
        }
    }

    /// Checks the member's generation and marks it busy: what it asks
    /// for, or the answer (an error, or the assignment it already has).
    fn begin_sync(&self, sync: &Sync) -> Result<Ask, Synced> {
        let now = Instant::now();
        let mut groups = self.groups();
        let Some(group) = groups.get_mut(&sync.group) else {
            return Err(failed(UNKNOWN_MEMBER_ID));
        };
        let (rebalancing, current) = (group.rebalance.is_some(), group.generation);
        let Some(member) = group.members.get_mut(&sync.member_id) else {
            return Err(failed(UNKNOWN_MEMBER_ID));
        };
        member.last_seen = now;
        if rebalancing {
            return Err(failed(REBALANCE_IN_PROGRESS));
        }
        if sync.generation != current || member.generation != Some(current) {
            return Err(failed(ILLEGAL_GENERATION));
        }
        if let Some(assignment) = &member.assignment {
            // A sync asked again: the same answer.
            return Err(Synced {
                error: NONE,
                assignment: assignment.clone(),
                raw: member.raw.clone(),
            });
        }
        member.busy += 1;
        Ok(Ask {
            topics: member.topics.clone(),
            session_timeout: member.session_timeout,
            deadline: now + member.rebalance_timeout,
            classic: group.classic.is_some(),
        })
    }

    /// Claims the member's share (one round of claims: `try_claim`),
    /// backing off and looking again after each conflict, until it holds
    /// it, the group moves on (REBALANCE_IN_PROGRESS), the deadline passes
    /// (the same) or the broker stops.
    pub(super) fn settle(
        &self,
        sync: &Sync,
        ask: &Ask,
        try_claim: &mut dyn FnMut() -> crate::Result<Option<Settled>>,
    ) -> Result<Settled, i16> {
        let mut attempt = 0u32;
        loop {
            if self.stopping() {
                return Err(COORDINATOR_NOT_AVAILABLE);
            }
            if !self.still_current(sync) {
                return Err(REBALANCE_IN_PROGRESS);
            }
            match try_claim() {
                Ok(Some(settled)) => return Ok(settled),
                Ok(None) => {}
                Err(e) if crate::coord::group::transient(&e) => {}
                Err(e) => return Err(error_code(&e)),
            }
            attempt += 1;
            let mut left = self.backoff(attempt);
            if Instant::now() + left >= ask.deadline {
                return Err(REBALANCE_IN_PROGRESS);
            }
            while !left.is_zero() {
                if self.stopping() || !self.still_current(sync) {
                    break;
                }
                let nap = left.min(NAP_STEP);
                std::thread::sleep(nap);
                left -= nap;
            }
        }
    }

    /// Whether the group is still in the sync's generation, with no
    /// rebalance under way.
    pub(super) fn still_current(&self, sync: &Sync) -> bool {
        self.groups()
            .get(&sync.group)
            .is_some_and(|g| g.rebalance.is_none() && g.generation == sync.generation)
    }

    /// One look and one round of claims: `None` when a partition of the
    /// share is still another's (then nothing is held), or the member is
    /// not listed in the registry (its entry is being renewed).
    fn try_claim(&self, sync: &Sync, ask: &Ask) -> crate::Result<Option<Settled>> {
        let mut settled = Settled::default();
        for topic in &ask.topics {
            let (members, count) = view(self, &sync.group, topic)?;
            let Some(index) = members.iter().position(|m| *m == sync.member_id) else {
                return Ok(None);
            };
            let share = assign(count, members.len(), index);
            for partition in share.clone() {
                let Some(claim) = self.claim(sync, ask, topic, partition)? else {
                    // Let go of everything: no one waits on us.
                    return Ok(None);
                };
                settled.claims.push(claim);
            }
            if !share.is_empty() {
                let partitions = share.map(|p| p as i32).collect();
                settled.assignment.push((topic.clone(), partitions));
            }
            settled.seen.insert(topic.clone(), (members, count));
        }
        Ok(Some(settled))
    }

    /// Claims `topic [partition]` in the registry for the syncing member:
    /// `None` while another member holds it.
    pub(super) fn claim(
        &self,
        sync: &Sync,
        ask: &Ask,
        topic: &str,
        partition: u32,
    ) -> crate::Result<Option<Claim>> {
        let owner = self.registry.claim(
            &sync.group,
            topic,
            partition,
            &sync.member_id,
            ask.session_timeout,
        )?;
        Ok(owner.map(|owner| Claim {
            topic: topic.to_string(),
            partition,
            owner: Arc::new(Mutex::new(owner)),
        }))
    }

    /// The random wait after conflict number `attempt` (from 1): a base
    /// that doubles from 40 ms to 640 ms, plus a random part below it.
    fn backoff(&self, attempt: u32) -> Duration {
        let base_ms = BACKOFF_BASE_MS << attempt.min(BACKOFF_DOUBLINGS_MAX);
        Duration::from_millis(base_ms + lock(&self.random).next() % base_ms)
    }
}

/// A sync's answer with `error` and no partitions.
pub(super) fn failed(error: i16) -> Synced {
    Synced {
        error,
        assignment: Vec::new(),
        raw: None,
    }
}
