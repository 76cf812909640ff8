//! A consumer-group member: joins the group in the registry, takes its
//! share of a topic's partitions by the paper's rebalance, consumes them
//! from the group's committed offsets, and commits as it goes.
//!
//! # Rebalance (the paper's Algorithm 1, per member, with no master)
//!
//! 1. Commit what was handed to the application, and release every owned
//!    partition.
//! 2. Read the live members subscribed to the topic and the topic's
//!    partition count; sort both; with `j` this member's index, claim the
//!    contiguous range [`crate::coord::spread::assign`] gives it.
//! 3. If a partition is still owned by another member (which has not yet
//!    noticed the change), release everything, back off a random while
//!    and retry.
//! 4. Fetch each owned partition from its committed offset, or, for a
//!    partition the group never committed, from the `-o` start.
//!
//! Each member polls the registry and rebalances when the members or the
//! partition count change.
//!
//! # Sessions
//!
//! A member's entry and its claims hold leases of its session timeout,
//! renewed at every registry check ([`GroupMember::heartbeat`]). A member
//! that dies leaves at once (its locks go with it); one that is alive but
//! silent (stopped, stuck in I/O) for longer than its session timeout is
//! no longer listed, so the others rebalance without it and take its
//! partitions over with a new claim generation. When it runs again, its
//! next renewal or commit fails (expired, or fenced by the new
//! generation): it drops its partitions without committing, joins again
//! and rebalances ([`GroupMember::rejoin`]).
//!
//! # Delivery
//!
//! At least once. Offsets are committed after the records before them were
//! handed to the application (the caller flushes its output first),
//! every commit interval, at each rebalance and at a clean exit. A member
//! that dies, or is taken over, loses the records it handed out since its
//! last commit to the next owner, which delivers them again; never a gap.
//! A committed offset past the end of its partition (the topic was
//! recreated, or recovery cut the log) is reset by the `-o` policy, with a
//! notice ([`GroupMember::take_notices`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::offset::{resolve_in, Extent, OffsetSpec};
use crate::client::{Connections, Consumer, ConsumerConfig, ConsumerPartition};
use crate::coord::route::{bounds, partition_count, retriable, routes};
use crate::coord::transactions::committed_offset;
use crate::coord::{assign, Ephemeral, MemberInfo, Registry};
use crate::coord::{RegistryLocator, SessionState};
use crate::error::{Error, Result};
use crate::storage::record::Record;

mod backoff;
mod committable;
mod reset;
mod session;
use backoff::Backoff;
#[cfg(test)]
use backoff::BACKOFF_BASE_MS;
pub use committable::Committable;
use reset::spec_name;
pub use reset::{reset_offsets, OffsetReset};
use session::member_id;
pub(crate) use session::{lost, transient};

/// The longest a backing-off member sleeps before it looks for a stop
/// (SIGINT), so that it ends within a second however long it backs off.
const NAP_STEP: Duration = Duration::from_millis(20);

/// How a member behaves.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// The group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// Where a partition with no committed offset starts.
    pub reset: OffsetSpec,
    /// Commit at least this often.
    pub commit_interval: Duration,
    /// Commit at all (`false`: the group's offsets are left as they are).
    pub commit: bool,
    /// A member silent for longer loses its partitions.
    pub session_timeout: Duration,
    /// How often to look at the registry for changes.
    pub poll_interval: Duration,
    /// Stop at the end offsets the topic had when the member joined (`-e`).
    pub exit_at_end: bool,
    /// How the member's consumer fetches (sizes, prefetch).
    pub fetch: ConsumerConfig,
    /// How far it may commit what it handed out (`None`: up to its
    /// position).
    pub committable: Option<Arc<dyn Committable>>,
}

/// One member of a consumer group.
#[derive(Debug)]
pub struct GroupMember {
    config: GroupConfig,
    share: Share,
    /// The broker of each partition (all the same without a cluster).
    routes: Vec<String>,
    /// Connections to those brokers, kept between registry checks.
    conns: Connections,
    consumer: Option<Consumer>,
    /// End offsets when joining (for `-e`), by partition.
    ends: Vec<u64>,
    last_check: Instant,
    last_commit: Instant,
    last_heartbeat: Instant,
    /// The registry's change count at the last look.
    seen_changes: u64,
    /// The registry session was in doubt at the last look.
    was_suspended: bool,
    /// The session was lost (a lease expired, a commit was fenced): the
    /// member must drop its partitions without committing, and rejoin.
    lost: bool,
    /// `%` lines for the user (an offset reset).
    notices: Vec<String>,
}

/// A member as the registry knows it: its membership, the partitions it
/// owns, and what the group looked like when it claimed them. No broker is
/// involved, so the rebalance's decisions can be tested alone.
#[derive(Debug)]
struct Share {
    registry: Arc<dyn Registry>,
    group: String,
    topic: String,
    member: String,
    session_timeout: Duration,
    /// `None` only for the instant of joining again.
    entry: Option<Ephemeral>,
    owned: Vec<(u32, Ephemeral)>,
    /// What the last rebalance saw: subscribed members and partition count.
    seen: (Vec<String>, u32),
    backoff: Backoff,
    /// Times it found the session lost in a rebalance, and joined again.
    lost_rejoins: u64,
}

impl Share {
    /// Joins `group` as `member`, subscribed to `topic`, owning nothing.
    fn join(
        registry: Arc<dyn Registry>,
        group: &str,
        topic: &str,
        member: String,
        session_timeout: Duration,
    ) -> Result<Share> {
        let info = MemberInfo {
            member: member.clone(),
            pid: std::process::id(),
            topics: vec![topic.to_string()],
            coordinator: None,
        };
        let entry = registry.join(group, &info, session_timeout)?;
        Ok(Share {
            registry,
            group: group.to_string(),
            topic: topic.to_string(),
            member,
            session_timeout,
            entry: Some(entry),
            owned: Vec::new(),
            seen: (Vec::new(), 0),
            backoff: Backoff::new(u64::from(std::process::id())),
            lost_rejoins: 0,
        })
    }

    /// Renews the leases of the member's entry and of its claims: `false`
    /// when one of them was lost (expired, or taken over), so that the
    /// member must let everything go and rejoin.
    fn heartbeat(&self) -> Result<bool> {
        if self.entry.is_none() {
            return Ok(false);
        }
        let entries = self.entry.iter().chain(self.owned.iter().map(|(_, o)| o));
        for entry in entries {
            match entry.renew() {
                Ok(()) => {}
                Err(e) if lost(&e) => return Ok(false),
                Err(e) if transient(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Drops every claim without committing and the member's entry, and
    /// joins the group again under the same id.
    fn rejoin(&mut self) -> Result<()> {
        self.release();
        let info = MemberInfo {
            member: self.member.clone(),
            pid: std::process::id(),
            topics: vec![self.topic.clone()],
            coordinator: None,
        };
        // The old entry goes first: the same id cannot live twice.
        self.entry = None;
        let entry = self
            .registry
            .join(&self.group, &info, self.session_timeout)?;
        self.entry = Some(entry);
        self.seen = (Vec::new(), 0);
        Ok(())
    }

    /// The live members subscribed to the topic, ordered by id; an error
    /// when Kafka clients whose leader assigns partitions hold the group
    /// (Algorithm 1 cannot share it with their assignor).
    fn subscribers(&self) -> Result<Vec<String>> {
        let members = self.registry.members(&self.group)?;
        if let Some(kafka) = members.iter().find(|m| m.coordinator.is_some()) {
            return Err(Error::Config(format!(
                "group {:?} is used by Kafka clients whose own assignor shares out its \
                 partitions (member {}, coordinated by broker {}): klog members cannot \
                 share it; consume with another group",
                self.group,
                kafka.member,
                kafka.coordinator.as_deref().unwrap_or_default()
            )));
        }
        Ok(members
            .into_iter()
            .filter(|m| m.topics.contains(&self.topic))
            .map(|m| m.member)
            .collect())
    }

    /// Claims the range Algorithm 1 gives this member among `members` (the
    /// subscribers, sorted) over `partition_count` partitions. On a
    /// conflict it releases what it claimed and answers `false`.
    fn claim(&mut self, members: Vec<String>, partition_count: u32) -> Result<bool> {
        let Some(index) = members.iter().position(|m| *m == self.member) else {
            return Err(Error::NotInGroup {
                member: self.member.clone(),
                group: self.group.clone(),
            });
        };
        for p in assign(partition_count, members.len(), index) {
            let claim = self.registry.claim(
                &self.group,
                &self.topic,
                p,
                &self.member,
                self.session_timeout,
            )?;
            match claim {
                Some(owner) => self.owned.push((p, owner)),
                None => {
                    // Another member has not released it yet: hold
                    // nothing, so that it is not kept waiting on us.
                    self.release();
                    return Ok(false);
                }
            }
        }
        self.seen = (members, partition_count);
        Ok(true)
    }

    /// Claims this member's share, backing off a random while after each
    /// conflict (the paper's answer to one) and looking again, until it
    /// holds it or the process is stopping (then it holds nothing).
    /// `look` answers the subscribers and the partition count; `wait`
    /// sleeps, a nap of at most [`NAP_STEP`] at a time, with a look for a
    /// stop between naps.
    fn settle(
        &mut self,
        mut look: impl FnMut(&Share) -> Result<(Vec<String>, u32)>,
        mut wait: impl FnMut(Duration),
    ) -> Result<()> {
        let mut attempt = 0u32;
        loop {
            // Backing off keeps the member's session alive; if it was
            // lost meanwhile, join again. A registry that does not answer
            // is waited for as a conflict is.
            match self.try_settle(&mut look) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // Its own id may still be held by its previous session,
                // restored by an ensemble that lost its quorum for longer
                // than the session timeout: that one expires in turn.
                Err(e) if transient(&e) || lost(&e) || matches!(e, Error::HeldElsewhere { .. }) => {
                    self.release();
                }
                Err(e) => return Err(e),
            }
            attempt += 1;
            let mut left = self.backoff.next(attempt);
            loop {
                if crate::stop::stopping() {
                    return Ok(());
                }
                if left.is_zero() {
                    break;
                }
                let nap = left.min(NAP_STEP);
                wait(nap);
                left -= nap;
            }
        }
    }

    /// One attempt of [`Share::settle`]: joins again if the session was
    /// lost, looks, and claims; `false` on a conflict.
    fn try_settle(
        &mut self,
        look: &mut impl FnMut(&Share) -> Result<(Vec<String>, u32)>,
    ) -> Result<bool> {
        if !self.heartbeat()? {
            // Without an entry, joining again was asked for.
            self.lost_rejoins += u64::from(self.entry.is_some());
            self.rejoin()?;
        }
        let (members, partition_count) = look(self)?;
        self.claim(members, partition_count)
    }

    /// Commits the next offset of each partition in `positions` that this
    /// member owns; the others are not its to commit. `false` when a
    /// commit was refused because the member's claim was lost (expired,
    /// or taken over): it must not commit anything more.
    fn commit(&self, positions: &[(u32, u64)]) -> Result<bool> {
        for &(partition, offset) in positions {
            if let Some((_, owner)) = self.owned.iter().find(|(p, _)| *p == partition) {
                match self
                    .registry
                    .commit(&self.group, &self.topic, partition, offset, owner)
                {
                    Ok(()) => {}
                    Err(e) if lost(&e) => return Ok(false),
                    // Committed at the next turn.
                    Err(e) if transient(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(true)
    }

    /// Whether the group committed every partition up to its end in `ends`
    /// (by partition); a partition that had no record needs nothing.
    fn reached(&self, ends: &[u64]) -> Result<bool> {
        for (p, end) in ends.iter().enumerate() {
            let committed = self
                .registry
                .committed(&self.group, &self.topic, p as u32)?;
            if *end > 0 && committed.is_none_or(|c| c < *end) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Releases every owned partition.
    fn release(&mut self) {
        self.owned.clear();
    }
}

/// The live members of `group` subscribed to `topic`, ordered by id: the
/// members among which Algorithm 1 spreads the topic's partitions. Every
/// member of a group, whatever its client (a `klog-consume -G`, a Kafka
/// client through a broker's group coordinator), sorts them so.
pub fn subscribers(registry: &dyn Registry, group: &str, topic: &str) -> Result<Vec<String>> {
    let members = registry.members(group)?.into_iter();
    Ok(members
        .filter(|m| m.topics.iter().any(|t| t == topic))
        .map(|m| m.member)
        .collect())
}

/// With `-o stored`: an error naming the partitions of the topic for which
/// the group has no committed offset, if any.
fn insist_on_commits(registry: &dyn Registry, config: &GroupConfig, partitions: u32) -> Result<()> {
    let (group, topic) = (&config.group, &config.topic);
    let mut missing = Vec::new();
    for p in 0..partitions {
        if registry.committed(group, topic, p)?.is_none() {
            missing.push(format!("{topic} [{p}]"));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::NoCommittedOffset {
        group: group.clone(),
        partitions: missing.join(", "),
    })
}

/// The subscribed members and the topic's partition count, now.
fn look(
    share: &Share,
    config: &GroupConfig,
    conns: &mut Connections,
) -> Result<(Vec<String>, u32)> {
    let members = share.subscribers()?;
    let partition_count = partition_count(&*share.registry, &config.topic, conns)?;
    Ok((members, partition_count))
}

impl GroupMember {
    /// Joins `config.group` in `registry` and takes a first share.
    pub fn join(registry: Arc<dyn Registry>, config: GroupConfig) -> Result<GroupMember> {
        let (group, topic) = (&config.group, &config.topic);
        let share = Share::join(registry, group, topic, member_id(), config.session_timeout)?;
        let mut conns = Connections::new();
        let routes = routes(&*share.registry, &config.topic, &mut conns)?;
        if config.reset == OffsetSpec::Stored {
            insist_on_commits(&*share.registry, &config, routes.len() as u32)?;
        }
        let ends = bounds(
            &routes,
            &config.topic,
            &mut conns,
            config.fetch.read_committed,
        )?
        .into_iter()
        .map(|extent| extent.stable)
        .collect();
        let mut m = GroupMember {
            config,
            share,
            routes,
            conns,
            consumer: None,
            ends,
            last_check: Instant::now(),
            last_commit: Instant::now(),
            last_heartbeat: Instant::now(),
            seen_changes: 0,
            was_suspended: false,
            lost: false,
            notices: Vec::new(),
        };
        m.rebalance()?;
        Ok(m)
    }

    /// This member's id.
    pub fn member(&self) -> &str {
        &self.share.member
    }

    /// How many times a rebalance found its session lost (its commit, or
    /// its claims) and joined again: the caller says so, as it does when
    /// [`GroupMember::heartbeat`] finds it lost.
    pub fn lost_rejoins(&self) -> u64 {
        self.share.lost_rejoins
    }

    /// Each owned partition and the next offset it will hand out.
    pub fn positions(&self) -> Vec<(u32, u64)> {
        self.consumer
            .as_ref()
            .map(|c| {
                c.partitions()
                    .iter()
                    .map(|p| (p.partition, p.offset))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The `%` lines gathered since the last call (offset resets).
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Whether, with `-e`, this member has handed out every record of its
    /// partitions up to the ends the topic had when it joined. The caller
    /// then flushes its output and calls [`GroupMember::done`].
    pub fn caught_up(&self) -> bool {
        self.config.exit_at_end && self.consumer.as_ref().is_none_or(Consumer::done)
    }

    /// Once [`GroupMember::caught_up`] and the output flushed: commits, and
    /// says whether the group has consumed every partition to the end it
    /// had when this member joined (else the member waits for the others,
    /// or takes over the partitions of one that dies).
    /// A member that commits nothing cannot see how far the others got:
    /// it is done with its own partitions.
    pub fn done(&mut self) -> Result<bool> {
        self.commit()?;
        if self.lost || self.suspended() {
            return Ok(false);
        }
        if !self.config.commit {
            return Ok(true);
        }
        match self.share.reached(&self.ends) {
            Err(e) if transient(&e) => Ok(false),
            reached => reached,
        }
    }

    /// Whether the registry session is in doubt (disconnected): what the
    /// member owns may be another's by now, so it hands out nothing and
    /// commits nothing until the session is confirmed or lost. The first
    /// look after a change says so in a notice.
    fn suspended(&mut self) -> bool {
        let state = self.share.registry.session();
        let entries = self.share.entry.iter();
        let mut entries = entries.chain(self.share.owned.iter().map(|(_, o)| o));
        if state == SessionState::Lost || entries.any(|e| !e.held().current()) {
            // What it held is gone (a new session may have replaced the
            // one it held it in): nothing more is handed out, and the next
            // heartbeat joins again.
            self.lost = true;
        }
        let suspended = state == SessionState::Suspended;
        if suspended != self.was_suspended {
            self.was_suspended = suspended;
            self.notices.push(if suspended {
                format!(
                    "Group {}: lost touch with the registry {}: handing out nothing until \
                     the session is confirmed",
                    self.config.group,
                    self.share.registry.location()
                )
            } else {
                format!(
                    "Group {}: the registry session is confirmed again",
                    self.config.group
                )
            });
        }
        suspended
    }

    /// Renews the member's session (at most every poll interval): `false`
    /// when it was lost (its lease expired while it was silent, or a
    /// commit was refused); the caller then flushes its output and calls
    /// [`GroupMember::rejoin`].
    pub fn heartbeat(&mut self) -> Result<bool> {
        if self.share.registry.session() == SessionState::Lost {
            self.lost = true;
        }
        if !self.lost && self.last_heartbeat.elapsed() >= self.config.poll_interval {
            self.last_heartbeat = Instant::now();
            self.lost = !self.share.heartbeat()?;
        }
        Ok(!self.lost)
    }

    /// After a lost session: drops every partition without committing
    /// (another member may own it now), joins the group again, and takes
    /// a new share.
    pub fn rejoin(&mut self) -> Result<()> {
        self.release();
        // Settling joins again first, and waits for a registry that does
        // not answer.
        self.share.entry = None;
        self.lost = false;
        // A new session: the old one's doubt is over, not confirmed.
        self.was_suspended = false;
        self.settle()
    }

    /// Whether the group changed since the last rebalance: looked at every
    /// poll interval, and at once when the registry's watches saw a change.
    /// Never while the registry session is in doubt, nor once it is lost
    /// (the next heartbeat says so).
    pub fn needs_rebalance(&mut self) -> Result<bool> {
        let changes = self.share.registry.changes();
        if self.suspended()
            || self.lost
            || (self.last_check.elapsed() < self.config.poll_interval
                && changes == self.seen_changes)
        {
            return Ok(false);
        }
        self.last_check = Instant::now();
        // Read before the look: a change during it makes another look.
        self.seen_changes = changes;
        match look(&self.share, &self.config, &mut self.conns) {
            Ok(now) => Ok(now != self.share.seen),
            Err(e) if transient(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether a commit is due.
    pub fn commit_due(&self) -> bool {
        self.config.commit && self.last_commit.elapsed() >= self.config.commit_interval
    }

    /// Commits the next offset of every owned partition. The caller has
    /// handed every record before them to the application. A member whose
    /// session was lost commits nothing.
    pub fn commit(&mut self) -> Result<()> {
        if !self.config.commit {
            return Ok(());
        }
        if self.suspended() {
            // Committed once the session is confirmed; never if it is lost.
            return Ok(());
        }
        self.last_commit = Instant::now();
        if !self.lost {
            let positions = committable::limit(&self.config.committable, self.positions());
            self.lost = !self.share.commit(&positions)?;
        }
        Ok(())
    }

    /// Gives every partition up, fetching nothing more.
    fn release(&mut self) {
        let owned = self.share.owned.iter().map(|(p, _)| *p);
        committable::released(&self.config.committable, owned);
        self.consumer = None;
        self.share.release();
    }

    /// Commits, releases everything, and claims this member's share anew
    /// (after a lost session, commits nothing and joins again first,
    /// counted in [`GroupMember::lost_rejoins`]).
    pub fn rebalance(&mut self) -> Result<()> {
        self.commit()?;
        if self.lost {
            self.share.lost_rejoins += 1;
            return self.rejoin();
        }
        self.release();
        self.settle()
    }

    fn settle(&mut self) -> Result<()> {
        let mut attempt = 0;
        loop {
            let (config, conns) = (&self.config, &mut self.conns);
            self.share
                .settle(|share| look(share, config, conns), std::thread::sleep)?;
            self.last_check = Instant::now();
            // Stopped before it settled, it owns nothing and fetches nothing.
            match self.start_fetching() {
                Err(e) if (transient(&e) || retriable(&e)) && !crate::stop::stopping() => {
                    // Its committed offsets could not be read, or a
                    // partition's leader is moving: claimed again once the
                    // registry answers, or the partition has a leader.
                    self.release();
                    attempt += 1;
                    std::thread::sleep(self.share.backoff.next(attempt));
                }
                done => return done,
            }
        }
    }

    fn start_fetching(&mut self) -> Result<()> {
        if self.share.owned.is_empty() {
            return Ok(());
        }
        self.routes = routes(&*self.share.registry, &self.config.topic, &mut self.conns)?;
        let bounds = bounds(
            &self.routes,
            &self.config.topic,
            &mut self.conns,
            self.config.fetch.read_committed,
        )?;
        let mut parts = Vec::with_capacity(self.share.owned.len());
        let owned: Vec<u32> = self.share.owned.iter().map(|(p, _)| *p).collect();
        for p in owned {
            let addr = self.routes[p as usize].clone();
            let extent = bounds.get(p as usize).copied().unwrap_or_default();
            let offset = self.start_offset(p, &addr, extent)?;
            let stop_at = self
                .config
                .exit_at_end
                .then(|| self.ends.get(p as usize).copied().unwrap_or(extent.stable));
            let part = ConsumerPartition {
                partition: p,
                offset,
                stop_at,
            };
            parts.push((addr, part));
        }
        let (topic, fetch) = (&self.config.topic, self.config.fetch);
        self.consumer = Some(if self.share.registry.placement(topic)?.is_some() {
            // Each partition follows its leader when it moves.
            let locator = Arc::new(RegistryLocator::new(Arc::clone(&self.share.registry)));
            Consumer::start_located(&parts, topic, fetch, locator)?
        } else {
            Consumer::start_on(&parts, topic, fetch)?
        });
        Ok(())
    }

    /// Where partition `p` (of `extent`, on broker `addr`) resumes: the
    /// group's committed offset (above the last stable offset too: read
    /// from there once its transactions end); the `-o` policy when it has
    /// none, or when it is past the end of the log (with a notice).
    fn start_offset(&mut self, p: u32, addr: &str, extent: Extent) -> Result<u64> {
        let Extent { start, end, .. } = extent;
        let (group, topic) = (&self.config.group, &self.config.topic);
        // A Kafka transaction's committed offsets count, written or not.
        let committed = committed_offset(&*self.share.registry, group, topic, p)?;
        let spec = match self.config.reset {
            OffsetSpec::Stored => OffsetSpec::Beginning,
            other => other,
        };
        let name = format!("{topic} [{p}]");
        let reset = |conns: &mut Connections| {
            resolve_in(extent, spec, &name, |ts| {
                conns.with(addr, |c| c.list_offsets(topic, p, ts))
            })
        };
        Ok(match committed {
            // A committed offset retention has since passed starts at the
            // oldest record kept.
            Some(c) if c <= end => c.max(start),
            Some(c) => {
                let offset = reset(&mut self.conns)?;
                // Stored as it is, lower: the commits that follow would
                // never pass the old one.
                if let Some((_, owner)) = self.share.owned.iter().find(|(o, _)| *o == p) {
                    self.share
                        .registry
                        .store_offset(group, topic, p, offset, owner)?;
                }
                self.notices.push(format!(
                    "Group {group}: {name}: committed offset {c} is past the end of the log \
                     ({end}); resetting to {offset} by -o {}",
                    spec_name(spec)
                ));
                offset
            }
            None => reset(&mut self.conns)?,
        })
    }

    /// Waits up to `timeout` for records of the owned partitions and hands
    /// them to `each` (see [`Consumer::poll`]).
    pub fn poll(
        &mut self,
        timeout: Duration,
        each: impl FnMut(u32, &Record<'_>) -> Result<bool>,
    ) -> Result<u64> {
        if self.suspended() || self.lost {
            std::thread::sleep(timeout);
            return Ok(0);
        }
        match &mut self.consumer {
            Some(c) if !c.done() => c.poll(timeout, each),
            _ => {
                std::thread::sleep(timeout);
                Ok(0)
            }
        }
    }

    /// Commits (unless the session was lost) and leaves the group.
    pub fn close(mut self) -> Result<()> {
        let result = self.commit();
        self.release();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The session timeout of the tests' entries.
    const T: std::time::Duration = std::time::Duration::from_secs(10);
    use crate::coord::mem::MemRegistry;
    use crate::tools::bench::workload::OwnBroker;
    use std::time::SystemTime;

    /// A member of group `g` on topic `t` of two partitions, on a broker
    /// of its own registered in a registry in memory (a poll interval of
    /// 1 ms: every look for a rebalance asks the registry).
    fn member_of_two_partitions(
        commit: bool,
    ) -> ((OwnBroker, Ephemeral), MemRegistry, GroupMember) {
        let broker = OwnBroker::start(2, None).unwrap();
        let addr = broker.addr();
        let mut c = crate::client::Connection::connect(&addr).unwrap();
        c.create_topic("t", 2).unwrap();
        let reg = MemRegistry::default();
        let (host, port) = addr.rsplit_once(':').unwrap();
        let info = crate::coord::BrokerInfo {
            kafka: None,
            id: "b".into(),
            host: host.into(),
            port: port.parse().unwrap(),
            pid: 1,
            topics: [("t".to_string(), vec![0, 1])].into(),
            principal: None,
        };
        let registered = reg.register_broker(&info).unwrap();
        let config = GroupConfig {
            group: "g".into(),
            topic: "t".into(),
            reset: OffsetSpec::Beginning,
            commit_interval: Duration::from_secs(60),
            commit,
            session_timeout: T,
            poll_interval: Duration::from_millis(1),
            exit_at_end: false,
            fetch: Default::default(),
            committable: None,
        };
        let m = GroupMember::join(Arc::new(reg.clone()), config).unwrap();
        ((broker, registered), reg, m)
    }

    /// A session lost between the heartbeat and the look for a rebalance
    /// (a ZooKeeper session that expired while the member was stopped,
    /// found out in between) is left to the next heartbeat, which says it
    /// was lost.
    /// It was taken for a change of the group: the member rebalanced,
    /// joined again without a word, and `klog-consume` never said that it
    /// had dropped its partitions uncommitted (seen as a flaky test of a
    /// member stopped past its session on ZooKeeper).
    #[test]
    fn a_session_lost_after_the_heartbeat_is_no_rebalance_but_a_lost_heartbeat() {
        let (_broker, reg, mut m) = member_of_two_partitions(true);
        assert!(m.heartbeat().unwrap());
        std::thread::sleep(Duration::from_millis(5));
        reg.end_session();
        assert!(
            !m.needs_rebalance().unwrap(),
            "a lost session is no rebalance"
        );
        assert!(!m.heartbeat().unwrap(), "the heartbeat says it was lost");
    }

    /// When the commit of a rebalance finds the session lost, the member
    /// joins again there, and counts it so that `klog-consume` says so (it
    /// joined again silently).
    #[test]
    fn a_session_the_rebalance_finds_lost_is_counted() {
        let (_broker, reg, mut m) = member_of_two_partitions(true);
        assert!(m.heartbeat().unwrap());
        // Another member joins, and this one's claims lapse meanwhile.
        let _z = reg.join("g", &subscriber("zz", "t"), T).unwrap();
        for p in 0..2 {
            reg.silence(&format!("owners/g/t-{p}"));
        }
        std::thread::sleep(Duration::from_millis(5));
        assert!(m.needs_rebalance().unwrap());
        m.rebalance().unwrap();
        assert_eq!(m.lost_rejoins(), 1);
        assert!(m.heartbeat().unwrap(), "joined again");
    }

    /// With commits off (`--no-commit`), a rebalance's commit does not
    /// look at the session: the settle that finds it lost joins again
    /// there, and counts it, so that `klog-consume` says so (it said
    /// nothing).
    #[test]
    fn a_session_a_settle_finds_lost_is_counted() {
        let (_broker, reg, mut m) = member_of_two_partitions(false);
        assert!(m.heartbeat().unwrap());
        let _z = reg.join("g", &subscriber("zz", "t"), T).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(m.needs_rebalance().unwrap());
        reg.end_session();
        m.rebalance().unwrap();
        assert_eq!(m.lost_rejoins(), 1);
        assert!(m.heartbeat().unwrap(), "in its new session");
        assert_eq!(m.positions().len(), 2, "the other member is silent");
    }

    /// A member `name` of topic `topic`, to join with.
    fn subscriber(name: &str, topic: &str) -> MemberInfo {
        MemberInfo {
            member: name.into(),
            pid: 1,
            topics: vec![topic.into()],
            coordinator: None,
        }
    }

    /// A member `name` of group `g`, subscribed to topic `t`.
    fn share(reg: &MemRegistry, name: &str) -> Share {
        Share::join(Arc::new(reg.clone()), "g", "t", name.into(), T).unwrap()
    }

    fn owned(share: &Share) -> Vec<u32> {
        share.owned.iter().map(|(p, _)| *p).collect()
    }

    fn owners(reg: &MemRegistry, partition_count: u32) -> Vec<Option<String>> {
        (0..partition_count)
            .map(|p| reg.owner("g", "t", p).map(|o| o.member))
            .collect()
    }

    /// Claims with what the registry says now, over `partition_count`.
    fn claim_now(share: &mut Share, partition_count: u32) -> bool {
        let members = share.subscribers().unwrap();
        share.claim(members, partition_count).unwrap()
    }

    #[test]
    fn each_subscriber_claims_its_algorithm_1_range_in_id_order() {
        let reg = MemRegistry::default();
        // Joined out of id order; a member of another topic does not count.
        let mut c = share(&reg, "c");
        let mut a = share(&reg, "a");
        let _other = reg.join("g", &subscriber("b", "u"), T).unwrap();
        let mut b = share(&reg, "bb");
        assert_eq!(a.subscribers().unwrap(), ["a", "bb", "c"]);
        for s in [&mut c, &mut a, &mut b] {
            assert!(claim_now(s, 5));
        }
        assert_eq!(
            (owned(&a), owned(&b), owned(&c)),
            (vec![0, 1], vec![2, 3], vec![4])
        );
        let want = ["a", "a", "bb", "bb", "c"].map(|m| Some(m.to_string()));
        assert_eq!(owners(&reg, 5), want);
        assert_eq!(a.seen, (vec!["a".into(), "bb".into(), "c".into()], 5));
    }

    #[test]
    fn a_conflict_releases_what_was_claimed_and_a_rebalance_moves_the_share() {
        let reg = MemRegistry::default();
        let mut a = share(&reg, "a");
        assert!(claim_now(&mut a, 4));
        assert_eq!(owned(&a), [0, 1, 2, 3]);
        // b joins; a has not noticed yet, so b's range 2..4 is a's.
        let mut b = share(&reg, "b");
        assert!(!claim_now(&mut b, 4));
        assert!(owned(&b).is_empty());
        // b claimed nothing before the conflict: make it claim 2 and meet
        // a's 3, and check that it lets 2 go again.
        a.release();
        let three = reg.claim("g", "t", 3, "a", T).unwrap().unwrap();
        assert!(!claim_now(&mut b, 4));
        assert!(owned(&b).is_empty());
        assert_eq!(owners(&reg, 4), [None, None, None, Some("a".into())]);
        drop(three);
        // a rebalances to 0..2, then b takes 2..4.
        assert!(claim_now(&mut a, 4));
        assert!(claim_now(&mut b, 4));
        assert_eq!((owned(&a), owned(&b)), (vec![0, 1], vec![2, 3]));
        // b dies: a takes everything back.
        drop(b);
        a.release();
        assert!(claim_now(&mut a, 4));
        assert_eq!(owned(&a), [0, 1, 2, 3]);
    }

    #[test]
    fn settle_backs_off_until_the_old_owner_lets_go() {
        let reg = MemRegistry::default();
        let mut a = share(&reg, "a");
        // A member that left but has not released partition 1 yet.
        let mut late = Some(reg.claim("g", "t", 1, "gone", T).unwrap().unwrap());
        // The time waited after each attempt.
        let waits = std::cell::RefCell::new(Vec::new());
        let look = |s: &Share| {
            waits.borrow_mut().push(Duration::ZERO);
            Ok((s.subscribers()?, 2))
        };
        a.settle(look, |d| {
            let mut waits = waits.borrow_mut();
            *waits.last_mut().unwrap() += d;
            // It lets go while the second backoff runs.
            if waits.len() == 2 {
                late = None;
            }
        })
        .unwrap();
        assert!(late.is_none());
        assert_eq!(owned(&a), [0, 1]);
        let waits = waits.into_inner();
        assert_eq!(waits.len(), 3, "{waits:?}");
        for (attempt, d) in (1..).zip(&waits[..2]) {
            let base = Duration::from_millis(BACKOFF_BASE_MS << attempt);
            assert!(base <= *d && *d < 2 * base, "attempt {attempt}: {d:?}");
        }
    }

    /// A backoff is slept in naps short enough that a stop (SIGINT),
    /// checked between them, ends the member within a second, however
    /// long the backoff has grown.
    #[test]
    fn settle_backs_off_in_short_naps() {
        let reg = MemRegistry::default();
        let mut a = share(&reg, "a");
        let mut late = Some(reg.claim("g", "t", 0, "gone", T).unwrap().unwrap());
        let (mut naps, mut slept) = (Vec::new(), Duration::ZERO);
        a.settle(
            |s| Ok((s.subscribers()?, 1)),
            |d| {
                naps.push(d);
                slept += d;
                // Long enough for the backoff to reach its bound.
                if slept > Duration::from_secs(8) {
                    late = None;
                }
            },
        )
        .unwrap();
        assert_eq!(owned(&a), [0]);
        let longest = naps.iter().max().unwrap();
        assert!(
            *longest <= Duration::from_millis(100),
            "a nap of {longest:?}"
        );
    }

    #[test]
    fn a_member_commits_only_the_partitions_it_owns() {
        let reg = MemRegistry::default();
        let mut a = share(&reg, "a");
        let mut b = share(&reg, "b");
        assert!(claim_now(&mut a, 4));
        assert!(claim_now(&mut b, 4));
        // a was handed records of every partition (say, before a rebalance
        // took 2 and 3 away): only 0 and 1 are its to commit. The memory
        // registry panics on a commit without the partition's claim.
        a.commit(&[(0, 5), (1, 6), (2, 7), (3, 8)]).unwrap();
        let committed: Vec<_> = (0..4)
            .map(|p| reg.committed("g", "t", p).unwrap())
            .collect();
        assert_eq!(committed, [Some(5), Some(6), None, None]);
        b.commit(&[(3, 9)]).unwrap();
        assert_eq!(reg.committed("g", "t", 3).unwrap(), Some(9));
        // Released, it commits nothing.
        a.release();
        a.commit(&[(0, 50)]).unwrap();
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(5));
    }

    #[test]
    fn a_member_whose_entry_is_gone_is_not_in_the_group_any_more() {
        let reg = MemRegistry::default();
        let mut b = share(&reg, "b");
        assert!(claim_now(&mut b, 2));
        // Taken for dead: its entry is removed behind its back.
        reg.expire("consumers/g/b");
        b.release();
        let err = b.claim(b.subscribers().unwrap(), 2).unwrap_err();
        assert!(matches!(err, Error::NotInGroup { .. }), "{err}");
        assert_eq!(err.to_string(), "member b is not in group g any more");
        assert!(owned(&b).is_empty());
        assert_eq!(owners(&reg, 2), [None, None]);
    }

    #[test]
    fn a_silent_member_loses_its_partitions_and_its_stale_commits_are_refused() {
        let reg = MemRegistry::default();
        let mut a = share(&reg, "a");
        let mut b = share(&reg, "b");
        assert!(claim_now(&mut a, 2));
        assert!(claim_now(&mut b, 2));
        assert_eq!((owned(&a), owned(&b)), (vec![0], vec![1]));
        assert!(b.heartbeat().unwrap());
        // b falls silent: its entry and its claim expire, and a takes over.
        reg.silence("consumers/g/b");
        reg.silence("owners/g/t-1");
        assert_eq!(a.subscribers().unwrap(), ["a"]);
        a.release();
        assert!(claim_now(&mut a, 2));
        assert_eq!(owned(&a), [0, 1]);
        assert_eq!(reg.owner("g", "t", 1).unwrap().generation, 2);
        // b wakes up: it learns it was lost, and its commit is refused.
        assert!(!b.heartbeat().unwrap());
        assert!(!b.commit(&[(1, 50)]).unwrap());
        assert_eq!(reg.committed("g", "t", 1).unwrap(), None);
        assert!(a.commit(&[(1, 7)]).unwrap());
        // It joins again, owning nothing until it claims.
        b.rejoin().unwrap();
        assert!(owned(&b).is_empty());
        assert!(b.heartbeat().unwrap());
        assert_eq!(a.subscribers().unwrap(), ["a", "b"]);
        assert_eq!(reg.committed("g", "t", 1).unwrap(), Some(7));
    }

    /// Issue 10 item 10: while a member is stuck inside a commit (past its
    /// fence, before its write), the others settle without it: they take
    /// its partition over and keep their own; its late commit, of a
    /// higher offset, is refused, and it learns it was lost.
    #[test]
    fn a_member_stuck_inside_a_commit_does_not_stop_its_group() {
        use crate::coord::dir::{stall, DirRegistry};
        let dir = tempfile::tempdir().unwrap();
        let reg: Arc<dyn Registry> = Arc::new(DirRegistry::open(dir.path()).unwrap());
        let short = Duration::from_millis(500);
        let join = |name: &str, timeout| {
            Share::join(Arc::clone(&reg), "g", "t", name.into(), timeout).unwrap()
        };
        let (mut a, mut b) = (join("a", short), join("b", T));
        let members = vec!["a".to_string(), "b".to_string()];
        assert!(a.claim(members.clone(), 4).unwrap());
        assert!(b.claim(members, 4).unwrap());
        assert_eq!((owned(&a), owned(&b)), (vec![0, 1], vec![2, 3]));
        a.commit(&[(0, 10)]).unwrap();
        let stalled = stall::next_commit(dir.path());
        std::thread::scope(|s| {
            let late = s.spawn(move || (a.commit(&[(0, 99)]), a));
            stalled.wait_reached();
            // a stays stuck past its session timeout.
            let silent = SystemTime::now() - 2 * short;
            for entry in std::fs::read_dir(dir.path().join("consumers/g")).unwrap() {
                let path = entry.unwrap().path();
                if path.to_str().unwrap().contains("/a@") {
                    set_mtime(&path, silent);
                }
            }
            for p in 0..2 {
                set_mtime(&dir.path().join(format!("owners/g/t-{p}/1")), silent);
            }
            // b rebalances without a, and settles in a few tries.
            b.release();
            let mut tries = 0;
            b.settle(
                |s| Ok((s.subscribers()?, 4)),
                |_| {
                    tries += 1;
                    assert!(tries < 10, "b never settled while a was stuck");
                },
            )
            .unwrap();
            assert_eq!(owned(&b), [0, 1, 2, 3]);
            assert!(b.commit(&[(0, 20), (2, 5)]).unwrap());
            // a runs again: refused, and it knows it was lost.
            stalled.release();
            let (late, a) = late.join().unwrap();
            assert!(!late.unwrap(), "a's late commit was accepted");
            assert!(!a.heartbeat().unwrap());
            assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(20));
        });
    }

    fn set_mtime(path: &std::path::Path, at: SystemTime) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(at).unwrap();
    }

    #[test]
    fn the_group_is_done_when_every_partition_with_records_is_committed_to_its_end() {
        let reg = MemRegistry::default();
        let mut a = share(&reg, "a");
        assert!(claim_now(&mut a, 3));
        // Partition 0 had no record when a joined: it needs no commit.
        let ends = [0, 5, 3];
        assert!(!a.reached(&ends).unwrap());
        a.commit(&[(1, 5), (2, 2)]).unwrap();
        assert!(!a.reached(&ends).unwrap(), "partition 2 is one short");
        a.commit(&[(2, 3)]).unwrap();
        assert!(a.reached(&ends).unwrap());
    }
}
