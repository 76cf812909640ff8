//! The coordinator's thread: every tick it drops members silent past
//! their session timeout, completes rebalances whose deadline passed,
//! renews the registry leases of the others and of their claims, and
//! starts a rebalance when the registry no longer looks as it did when a
//! member synced.

use std::collections::BTreeMap;
use std::sync::Weak;
use std::time::Instant;

use super::state::{Group, View};
use super::{view, Coordinator};
use crate::coord::group::{lost, transient};

/// The thread's loop: it holds the coordinator only while it looks after
/// the groups, and ends when the coordinator stops or is gone.
pub(super) fn run(coordinator: Weak<Coordinator>) {
    loop {
        let Some(c) = coordinator.upgrade() else {
            return;
        };
        if c.stopping() {
            return;
        }
        c.tick(Instant::now());
        c.settle_coordinators(Instant::now());
        let pause = c.config.tick;
        drop(c);
        std::thread::sleep(pause);
    }
}

impl Coordinator {
    /// Looks after every group once.
    pub(super) fn tick(&self, now: Instant) {
        let mut groups = self.groups();
        let mut changed = false;
        for (name, group) in groups.iter_mut() {
            let silent: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| m.silent(now))
                .map(|(id, _)| id.clone())
                .collect();
            for id in &silent {
                changed |= group.remove(id, now);
            }
            if group.ready(now) {
                group.complete();
                changed = true;
            }
            changed |= self.renew(name, group, now);
            changed |= self.look(name, group, now);
        }
        for group in groups.values_mut() {
            group.pending.retain(|_, lapses| *lapses > now);
        }
        groups.retain(|_, g| !g.is_empty());
        if changed {
            self.changed.notify_all();
        }
    }

    /// Renews the registry leases of the group's members and their claims,
    /// each when a third of its session timeout has passed since the last
    /// (as a ZooKeeper client pings), or at once after a commit of its was
    /// fenced: a few registry calls a session for each member, not one
    /// every tick. A claim lost (taken over while the
    /// broker was stopped, say) makes its member give everything up and
    /// the group rebalance; an entry lost is entered again. Whether
    /// anything changed.
    fn renew(&self, name: &str, group: &mut Group, now: Instant) -> bool {
        let mut rebalance = false;
        let classic = group.classic.is_some();
        for (id, member) in group.members.iter_mut() {
            // Due a third of a session after the last renewal that
            // worked: one that failed, or an entry not yet entered again,
            // is tried at the next tick.
            let due = now.saturating_duration_since(member.renewed) >= member.session_timeout / 3;
            if !due && !member.recheck && member.entry.is_some() {
                continue;
            }
            member.recheck = false;
            let renewed = member.entry.as_ref().map(|entry| entry.renew());
            if matches!(renewed, Some(Ok(()))) {
                member.renewed = now;
            }
            let entry_lost = match &renewed {
                Some(result) => result.as_ref().is_err_and(lost),
                None => true,
            };
            if entry_lost {
                member.entry = None;
                member.release();
                rebalance = true;
                let info = self.member_info(id, &member.topics, classic);
                // Entered again at a later tick if this fails.
                member.entry = self.registry.join(name, &info, member.session_timeout).ok();
            }
            // A claim in a commit is renewed by the commit.
            let claim_lost = member.claims.iter().any(|c| {
                c.owner
                    .try_lock()
                    .is_ok_and(|owner| owner.renew().is_err_and(|e| lost(&e)))
            });
            if claim_lost {
                member.release();
                rebalance = true;
            }
        }
        if rebalance {
            group.start_rebalance(now);
        }
        rebalance
    }

    /// Starts a rebalance when a synced member's topics no longer look as
    /// they did at its sync (subscribers, partition count). Whether it did.
    fn look(&self, name: &str, group: &mut Group, now: Instant) -> bool {
        if group.rebalance.is_some() {
            return false;
        }
        let mut views: BTreeMap<&str, Option<View>> = BTreeMap::new();
        let mut moved = false;
        for member in group.members.values() {
            for (topic, seen) in &member.seen {
                let now_seen = views.entry(topic).or_insert_with(|| {
                    match view(self, name, topic) {
                        Ok(v) => Some(v),
                        // Looked at again at the next tick.
                        Err(e) if transient(&e) => None,
                        Err(_) => None,
                    }
                });
                moved |= now_seen.as_ref().is_some_and(|v| v != seen);
            }
        }
        if moved {
            group.start_rebalance(now);
        }
        moved
    }
}
