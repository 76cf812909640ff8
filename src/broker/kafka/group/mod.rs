//! The Kafka group coordinator (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, OffsetCommit, OffsetFetch) over klog's registry, so that
//! Kafka clients and `klog-consume -G` members share one group, its
//! partitions and its committed offsets.
//!
//! # Every broker coordinates every group the broker assigns
//!
//! Algorithm 1 needs no master: every member computes its own share from
//! the registry's sorted members and the topic's partition count, and
//! claims it there. So FindCoordinator answers "this broker" for every
//! such group, and each broker's coordinator speaks for the Kafka members that
//! connected to it. A Kafka member is entered in the registry group at its
//! first join (`MemberInfo { member, pid: the broker's, topics }`, with its
//! session timeout as the lease), so `klog-consume -G` members count it,
//! and it counts them.
//!
//! # The protocol, eager, and the broker assigns
//!
//! So it is for a member that offers `range` or `roundrobin` (the
//! protocol answered is the first of those it offered). A member that
//! offers only other assignors is in a group whose leader assigns, with
//! Kafka's classic protocol and one coordinator (the `classic` module);
//! the two kinds never share a group.
//!
//! - **Join**: a new member gets its id (`{client_id}-{random}`, made a
//!   registry name) in the first answer; from JoinGroup v4 on, that answer
//!   is MEMBER_ID_REQUIRED (KIP-394) and the member enters when it joins
//!   again with the id, within its session timeout: a client that retries a
//!   join whose answer it lost leaves no phantom member. A join gives up
//!   the member's partitions (their claims are dropped) and starts a
//!   rebalance if none is under way; the answer waits until every Kafka
//!   member of the group on this broker has rejoined, or the longest
//!   rebalance timeout passed (those that did not are dropped), and then
//!   the generation moves on. Every member is told that the leader is
//!   [`LEADER_ID`], not itself, and gets no member list: clients never run
//!   an assignor.
//! - **Sync**: the member's share of each subscribed topic, Algorithm 1
//!   ([`crate::coord::assign`]) over the group's live registry members
//!   subscribed to it, sorted by [`crate::coord::group::subscribers`] as a
//!   `klog-consume -G` member sorts them, and the topic's partition count
//!   (its registry placement, else the broker's own count). Each partition
//!   is claimed in the registry before it is handed out; a claim still held
//!   by a member that has not yet noticed the change is waited for (every
//!   claim let go, a random backoff, a new look) until the rebalance
//!   timeout, then the answer is REBALANCE_IN_PROGRESS and the member
//!   rejoins. So no partition is given while another holds it.
//! - **Heartbeat**: REBALANCE_IN_PROGRESS while a rebalance is under way.
//!   One starts when a member joins or leaves here, when one falls silent
//!   past its session timeout (dropped), and when the registry no longer
//!   looks as it did when a member synced (a subscriber came or went on
//!   any broker, a partition count changed).
//! - **OffsetCommit**: through [`Registry::commit`] (the broker's registry
//!   with its offsets in the offsets topic:
//!   [`crate::coord::offsets_topic::TopicRegistry`]) with the member's claim
//!   of the partition, so fenced as klog members' commits are. A commit of
//!   a client outside the group (generation -1, no member id) claims the
//!   partition for the moment, and is refused while a member holds it.
//! - **OffsetFetch**: [`Registry::committed`], the entries `klog-consume
//!   -G` reads.
//!
//! A thread looks after the groups every `tick`: it renews the registry
//! leases of the members that are not silent and of their claims, drops
//! silent members, completes rebalances whose deadline passed, and starts a
//! rebalance when the registry changed. Calls block at most a rebalance
//! timeout, and end at once (COORDINATOR_NOT_AVAILABLE) when the broker
//! stops.
//!
//! Wire types are the codec's: this module takes and answers plain values,
//! and the listener converts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::coord::{MemberInfo, Registry};
use crate::error::Error;
use crate::random::XorShift;
use crate::sync::lock;

mod classic;
mod describe;
mod offsets;
mod state;
mod sync;
mod tick;

pub(crate) use describe::{assignment, GroupView};
use state::{Classic, Group, Member};

// Kafka's error codes, as the codec names them.
pub(crate) use crate::kafka::{
    COORDINATOR_NOT_AVAILABLE, GROUP_MAX_SIZE_REACHED, ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL, INVALID_GROUP_ID, INVALID_REQUEST, INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED, NONE, NOT_COORDINATOR, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
    UNKNOWN_SERVER_ERROR, UNKNOWN_TOPIC_OR_PARTITION,
};

/// The leader every member of a group the broker assigns is told of: the
/// coordinator itself, so that no client runs an assignor.
pub(crate) const LEADER_ID: &str = "klog-coordinator";

/// The most bytes of protocol metadata (or of an assignment) one member
/// of a group whose leader assigns may have the broker keep.
pub(crate) const MEMBER_METADATA_BYTES_MAX: usize = 1024 * 1024;

/// The most bytes of protocol metadata and assignments the broker keeps
/// for all the members of groups whose leaders assign.
pub(crate) const CLASSIC_BYTES_MAX: usize = 64 * 1024 * 1024;

/// The assignors the broker runs for a member that offers one (Algorithm
/// 1 stands for both): eager ones, since a join gives up every partition.
pub(crate) const EAGER_PROTOCOLS: [&str; 2] = ["range", "roundrobin"];

/// The protocol the broker assigns with, among the names the member
/// offered (its preference order kept): the first it runs; `None` when it
/// runs none of them, and the group's leader assigns.
pub(crate) fn eager_protocol<'a>(offered: &[&'a str]) -> Option<&'a str> {
    offered
        .iter()
        .copied()
        .find(|p| EAGER_PROTOCOLS.contains(p))
}

/// The coordinator's bounds and pace.
#[derive(Debug, Clone)]
pub(crate) struct CoordinatorConfig {
    /// How often the groups are looked after (leases, silence, registry
    /// changes).
    pub(crate) tick: Duration,
    /// The shortest session timeout a member may ask for.
    pub(crate) session_timeout_min: Duration,
    /// The longest session timeout a member may ask for.
    pub(crate) session_timeout_max: Duration,
    /// The longest a join or sync waits, whatever the member asks.
    pub(crate) rebalance_timeout_max: Duration,
    /// The most Kafka members of one group on this broker.
    pub(crate) members_max: usize,
    /// The most groups with Kafka members on this broker.
    pub(crate) groups_max: usize,
    /// The most Kafka members on this broker, over all groups (each holds
    /// a registry entry, an open file of a directory registry).
    pub(crate) members_total_max: usize,
    /// This broker's id: the registry entries of members of a group whose
    /// leader assigns name it, so that every broker sends such a group's
    /// members here.
    pub(crate) broker_id: String,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            tick: Duration::from_millis(200),
            session_timeout_min: Duration::from_secs(1),
            session_timeout_max: Duration::from_secs(30 * 60),
            rebalance_timeout_max: Duration::from_secs(5 * 60),
            members_max: 1000,
            groups_max: 1000,
            members_total_max: 5000,
            broker_id: String::new(),
        }
    }
}

/// A JoinGroup request, decoded.
#[derive(Debug, Clone)]
pub(crate) struct Join {
    pub(crate) group: String,
    /// Empty on a member's first join.
    pub(crate) member_id: String,
    pub(crate) client_id: String,
    pub(crate) session_timeout: Duration,
    /// `None` in a v0 request: the session timeout stands for it.
    pub(crate) rebalance_timeout: Option<Duration>,
    /// The subscribed topics (from the embedded subscription).
    pub(crate) topics: Vec<String>,
    /// A new member gets its id with MEMBER_ID_REQUIRED and enters when it
    /// joins with it (JoinGroup v4 and later, KIP-394).
    pub(crate) member_id_required: bool,
    /// The protocols it offers (name, metadata), in its order of
    /// preference; where the broker assigns, only the one it chose.
    pub(crate) protocols: Vec<(String, Vec<u8>)>,
    /// Whether the group's leader assigns: the member offered no
    /// protocol the broker runs ([`eager_protocol`]).
    pub(crate) leader_assigns: bool,
    /// The partitions it still owns as it joins (a cooperative member's,
    /// KIP-429): their claims are kept.
    pub(crate) owned: Vec<(String, u32)>,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Joined {
    pub(crate) error: i16,
    pub(crate) generation: i32,
    pub(crate) member_id: String,
    /// The group's protocol.
    pub(crate) protocol: String,
    /// [`LEADER_ID`] where the broker assigns, else the leader's id.
    pub(crate) leader_id: String,
    /// The members and their metadata, for the leader of a group whose
    /// leader assigns; else empty.
    pub(crate) members: Vec<(String, Vec<u8>)>,
}

/// A SyncGroup request, decoded.
#[derive(Debug, Clone)]
pub(crate) struct Sync {
    pub(crate) group: String,
    pub(crate) member_id: String,
    pub(crate) generation: i32,
    /// The leader's assignment of each member (empty from the others).
    pub(crate) assignments: Vec<(String, Vec<u8>)>,
}

/// A SyncGroup answer: the member's partitions of each subscribed topic,
/// and where the group's leader assigns, the bytes it sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Synced {
    pub(crate) error: i16,
    pub(crate) assignment: Vec<(String, Vec<i32>)>,
    pub(crate) raw: Option<Vec<u8>>,
}

/// A topic's partition count as the broker knows it (its own store), for
/// a topic the registry has no placement of.
pub(crate) type PartitionCount = dyn Fn(&str) -> Option<u32> + Send + std::marker::Sync;

/// The group coordinator of one broker, shared by its Kafka connections'
/// threads (see the module's docs).
pub(crate) struct Coordinator {
    registry: Arc<dyn Registry>,
    log: Box<dyn Fn(std::fmt::Arguments<'_>) + Send + std::marker::Sync>,
    partition_count: Box<PartitionCount>,
    stopping: Box<dyn Fn() -> bool + Send + std::marker::Sync>,
    config: CoordinatorConfig,
    groups: Mutex<BTreeMap<String, Group>>,
    /// Signalled when a group's members or generation change.
    changed: Condvar,
    closed: AtomicBool,
    random: Mutex<XorShift>,
    ticker: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("registry", &self.registry.location())
            .field("config", &self.config)
            .field("groups", &lock(&self.groups).len())
            .finish_non_exhaustive()
    }
}

impl Coordinator {
    /// A coordinator over `registry`, with its thread that looks after the
    /// groups; `partition_count` answers for topics the registry has not
    /// placed, `stopping` says when the broker stops, and `log` writes a
    /// line to the broker's log.
    pub(crate) fn start(
        registry: Arc<dyn Registry>,
        partition_count: impl Fn(&str) -> Option<u32> + Send + std::marker::Sync + 'static,
        stopping: impl Fn() -> bool + Send + std::marker::Sync + 'static,
        log: impl Fn(std::fmt::Arguments<'_>) + Send + std::marker::Sync + 'static,
        config: CoordinatorConfig,
    ) -> std::io::Result<Arc<Coordinator>> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let coordinator = Arc::new(Coordinator {
            registry,
            log: Box::new(log),
            partition_count: Box::new(partition_count),
            stopping: Box::new(stopping),
            config,
            groups: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
            closed: AtomicBool::new(false),
            random: Mutex::new(XorShift::new(nanos ^ u64::from(std::process::id()) << 32)),
            ticker: Mutex::new(None),
        });
        let weak = Arc::downgrade(&coordinator);
        let ticker = std::thread::Builder::new()
            .name("kafka-groups".into())
            .spawn(move || tick::run(weak))?;
        *lock(&coordinator.ticker) = Some(ticker);
        Ok(coordinator)
    }

    /// Stops: waiting calls answer COORDINATOR_NOT_AVAILABLE, the thread
    /// ends, and every member's registry entry and claim is let go.
    pub(crate) fn shutdown(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.changed.notify_all();
        if let Some(ticker) = lock(&self.ticker).take() {
            let _ = ticker.join();
        }
        lock(&self.groups).clear();
    }

    fn stopping(&self) -> bool {
        self.closed.load(Ordering::Relaxed) || (self.stopping)() || crate::stop::stopping()
    }

    fn groups(&self) -> MutexGuard<'_, BTreeMap<String, Group>> {
        lock(&self.groups)
    }

    /// A fresh member id for `client_id`: the client id made a registry
    /// name (at most 64 characters, `kafka` when empty), a dash, and 16
    /// random hex digits.
    fn new_member_id(&self, client_id: &str) -> String {
        let mut name: String = client_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        if name.is_empty() {
            name.push_str("kafka");
        }
        format!("{name}-{:016x}", lock(&self.random).next())
    }

    /// JoinGroup (see the module's docs): blocks until the rebalance the
    /// join starts or takes part in completes.
    pub(crate) fn join(&self, join: Join) -> Joined {
        let answer = |error: i16, member_id: &str| Joined {
            error,
            generation: -1,
            member_id: member_id.to_string(),
            protocol: String::new(),
            leader_id: String::new(),
            members: Vec::new(),
        };
        if crate::coord::registry::check_name("group", &join.group).is_err() {
            return answer(INVALID_GROUP_ID, &join.member_id);
        }
        let timeouts = self.config.session_timeout_min..=self.config.session_timeout_max;
        if !timeouts.contains(&join.session_timeout) {
            return answer(INVALID_SESSION_TIMEOUT, &join.member_id);
        }
        let (size, seen) = (classic::metadata_bytes(&join), self.registry_view(&join));
        if join.leader_assigns && size > MEMBER_METADATA_BYTES_MAX {
            (self.log)(format_args!(
                "group {}: refused a join of client {:?}: its protocols' metadata takes {size} \
                 bytes, more than the {MEMBER_METADATA_BYTES_MAX} a member may",
                join.group, join.client_id
            ));
            return answer(INVALID_REQUEST, &join.member_id);
        }
        let mut groups = self.groups();
        // A stopping coordinator has let its members go: a client told of
        // an unknown member would start over with a new id, where it
        // should look for the group's next coordinator.
        if self.stopping() {
            return answer(COORDINATOR_NOT_AVAILABLE, &join.member_id);
        }
        if join.member_id.is_empty() && join.member_id_required {
            let given = self.give_member_id(&mut groups, &join);
            return match given {
                Ok(id) => answer(MEMBER_ID_REQUIRED, &id),
                Err(error) => answer(error, ""),
            };
        }
        let member_id = match self.enter(&mut groups, &join, seen) {
            Ok(id) => id,
            Err(error) => return answer(error, &join.member_id),
        };
        self.changed.notify_all();
        let (groups, result) = self.await_generation(groups, &join.group, &member_id);
        match (result, groups.get(&join.group)) {
            (Ok(generation), Some(group)) => {
                let (protocol, leader_id, members) = group.join_answer(&member_id, &join);
                Joined {
                    generation,
                    protocol,
                    leader_id,
                    members,
                    ..answer(NONE, &member_id)
                }
            }
            (Ok(_), None) => answer(UNKNOWN_MEMBER_ID, &member_id),
            (Err(error), _) => answer(error, &member_id),
        }
    }

    /// Enters the joining member in its group (a new one in the registry
    /// too), gives up its partitions, and starts a rebalance: its id.
    fn enter(
        &self,
        groups: &mut BTreeMap<String, Group>,
        join: &Join,
        seen: Result<classic::RegistryView, i16>,
    ) -> Result<String, i16> {
        let now = Instant::now();
        if join.member_id.is_empty() {
            self.room_for_a_member(groups, &join.group)?;
        }
        self.check_mode(groups, join, seen?)?;
        self.room_for_metadata(groups, join)?;
        let group = groups.entry(join.group.clone()).or_default();
        if group.members.is_empty() {
            group.classic = join.leader_assigns.then(Classic::default);
        }
        let classic = group.classic.is_some();
        let protocols = if classic {
            join.protocols.clone()
        } else {
            Vec::new()
        };
        let topics = topics_of(join);
        let rebalance_timeout = join
            .rebalance_timeout
            .unwrap_or(join.session_timeout)
            .min(self.config.rebalance_timeout_max);
        let given = group.pending.remove(&join.member_id).is_some();
        let id = if join.member_id.is_empty() || given {
            if group.members.len() >= self.config.members_max {
                return Err(GROUP_MAX_SIZE_REACHED);
            }
            let given = given.then_some(join.member_id.as_str());
            let (id, entry) = self.enter_registry(join, &topics, given, classic)?;
            let mut member = Member::new(Some(entry), join.session_timeout, rebalance_timeout, now);
            member.topics = topics;
            member.protocols = protocols;
            member.client_id.clone_from(&join.client_id);
            group.members.insert(id.clone(), member);
            id
        } else {
            let Some(member) = group.members.get_mut(&join.member_id) else {
                return Err(UNKNOWN_MEMBER_ID);
            };
            if member.topics != topics {
                let info = self.member_info(&join.member_id, &topics, classic);
                if let Some(entry) = &member.entry {
                    entry.update(&info).map_err(|e| error_code(&e))?;
                }
            }
            member.topics = topics;
            member.protocols = protocols;
            member.session_timeout = join.session_timeout;
            member.rebalance_timeout = rebalance_timeout;
            join.member_id.clone()
        };
        group.start_rebalance(now);
        let member = group.members.get_mut(&id).expect("entered above");
        member.release_except(if classic { &join.owned } else { &[] });
        member.rejoined = true;
        member.generation = None;
        member.busy += 1;
        member.last_seen = now;
        Ok(id)
    }

    /// Whether a new member of `group` fits the broker's bounds: groups,
    /// members of one group and over all groups, ids given and not yet
    /// joined with counted as members.
    fn room_for_a_member(&self, groups: &BTreeMap<String, Group>, group: &str) -> Result<(), i16> {
        let live = groups.values().filter(|g| !g.is_empty());
        let (count, members) = live.fold((0, 0), |(n, m), g| (n + 1, m + g.size()));
        let this = groups.get(group);
        let new_group = this.is_none_or(Group::is_empty);
        if members >= self.config.members_total_max
            || (new_group && count >= self.config.groups_max)
            || this.is_some_and(|g| g.size() >= self.config.members_max)
        {
            return Err(GROUP_MAX_SIZE_REACHED);
        }
        Ok(())
    }

    /// Gives a new member of `join.group` its id, to join with within its
    /// session timeout (KIP-394).
    fn give_member_id(
        &self,
        groups: &mut BTreeMap<String, Group>,
        join: &Join,
    ) -> Result<String, i16> {
        self.room_for_a_member(groups, &join.group)?;
        let id = self.new_member_id(&join.client_id);
        let deadline = Instant::now() + join.session_timeout;
        let group = groups.entry(join.group.clone()).or_default();
        group.pending.insert(id.clone(), deadline);
        Ok(id)
    }

    /// A member's registry entry; `classic` where the group's leader
    /// assigns (the entry names this broker then).
    fn member_info(&self, member: &str, topics: &[String], classic: bool) -> MemberInfo {
        MemberInfo {
            member: member.to_string(),
            pid: std::process::id(),
            topics: topics.to_vec(),
            coordinator: classic.then(|| self.config.broker_id.clone()),
        }
    }

    /// A new member's id (`given` with MEMBER_ID_REQUIRED, else drawn,
    /// and drawn again if taken) and its entry in the registry group.
    fn enter_registry(
        &self,
        join: &Join,
        topics: &[String],
        given: Option<&str>,
        classic: bool,
    ) -> Result<(String, crate::coord::Ephemeral), i16> {
        let mut tries = 0;
        loop {
            let id = given.map_or_else(|| self.new_member_id(&join.client_id), str::to_string);
            let info = self.member_info(&id, topics, classic);
            match self.registry.join(&join.group, &info, join.session_timeout) {
                Ok(entry) => return Ok((id, entry)),
                Err(Error::InUse { .. }) if given.is_none() && tries < 3 => tries += 1,
                Err(e) => return Err(error_code(&e)),
            }
        }
    }

    /// Waits until `member`'s rebalance completes (completing it when it
    /// may), with the groups' lock held again: its generation, or the
    /// error to answer.
    fn await_generation<'a>(
        &'a self,
        mut groups: MutexGuard<'a, BTreeMap<String, Group>>,
        group_id: &str,
        member_id: &str,
    ) -> (MutexGuard<'a, BTreeMap<String, Group>>, Result<i32, i16>) {
        loop {
            let now = Instant::now();
            let Some(group) = groups.get_mut(group_id) else {
                return (groups, Err(UNKNOWN_MEMBER_ID));
            };
            let result = match group.members.get(member_id) {
                None => Some(Err(UNKNOWN_MEMBER_ID)),
                Some(_) if self.stopping() => Some(Err(COORDINATOR_NOT_AVAILABLE)),
                Some(m) => m.generation.map(Ok),
            };
            if let Some(result) = result {
                if let Some(member) = group.members.get_mut(member_id) {
                    member.busy -= 1;
                    member.last_seen = now;
                }
                return (groups, result);
            }
            if group.ready(now) {
                group.complete();
                self.changed.notify_all();
                continue;
            }
            let left = group.rebalance.map_or(self.config.tick, |d| d - now);
            let nap = left.min(self.config.tick).max(Duration::from_millis(1));
            groups = self
                .changed
                .wait_timeout(groups, nap)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Heartbeat: 0 while the member is in the group's current generation
    /// and no rebalance is under way; else what the member must do.
    pub(crate) fn heartbeat(&self, group: &str, member_id: &str, generation: i32) -> i16 {
        let mut groups = self.groups();
        let Some(group) = groups.get_mut(group) else {
            return UNKNOWN_MEMBER_ID;
        };
        let rebalancing = group.rebalance.is_some();
        let current = group.generation;
        let Some(member) = group.members.get_mut(member_id) else {
            return UNKNOWN_MEMBER_ID;
        };
        member.last_seen = Instant::now();
        if rebalancing {
            REBALANCE_IN_PROGRESS
        } else if generation != current || member.generation != Some(current) {
            ILLEGAL_GENERATION
        } else {
            NONE
        }
    }

    /// LeaveGroup: drops the member (its registry entry and claims); the
    /// others rebalance without it.
    pub(crate) fn leave(&self, group_id: &str, member_id: &str) -> i16 {
        let mut groups = self.groups();
        let Some(group) = groups.get_mut(group_id) else {
            return UNKNOWN_MEMBER_ID;
        };
        // A member given its id and not yet joined leaves its place.
        let pending = group.pending.remove(member_id).is_some();
        if !pending && !group.remove(member_id, Instant::now()) {
            return UNKNOWN_MEMBER_ID;
        }
        if group.is_empty() {
            groups.remove(group_id);
        }
        self.changed.notify_all();
        NONE
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        // The thread holds only a weak reference: it ends at its next tick.
        self.closed.store(true, Ordering::Relaxed);
    }
}

/// A join's subscribed topics that are topic names, sorted, distinct.
fn topics_of(join: &Join) -> Vec<String> {
    let mut topics: Vec<String> = join
        .topics
        .iter()
        .filter(|t| crate::storage::store::validate_topic(t).is_ok())
        .cloned()
        .collect();
    topics.sort();
    topics.dedup();
    topics
}

/// The Kafka error for a registry error: a member's claim or entry lost
/// to a later one (ILLEGAL_GENERATION) or to silence (UNKNOWN_MEMBER_ID);
/// a registry that does not answer now (COORDINATOR_NOT_AVAILABLE).
fn error_code(e: &Error) -> i16 {
    match e {
        Error::Fenced { .. } => ILLEGAL_GENERATION,
        Error::Expired { .. } | Error::SessionLost { .. } | Error::NotInGroup { .. } => {
            UNKNOWN_MEMBER_ID
        }
        e if crate::coord::group::transient(e) || crate::coord::group::lost(e) => {
            COORDINATOR_NOT_AVAILABLE
        }
        Error::Config(_) => UNKNOWN_TOPIC_OR_PARTITION,
        _ => UNKNOWN_SERVER_ERROR,
    }
}

/// What the registry answers for the topics of a group now: the live
/// subscribers of `topic`, sorted by id, and its partition count (the
/// placement's, else the broker's, else 0).
fn view(coordinator: &Coordinator, group: &str, topic: &str) -> crate::Result<state::View> {
    let members = crate::coord::group::subscribers(&*coordinator.registry, group, topic)?;
    Ok((members, coordinator.partitions_of(topic)?))
}

impl Coordinator {
    /// The partition count of `topic`: its placement's, else the broker's,
    /// else 0 (no such topic).
    fn partitions_of(&self, topic: &str) -> crate::Result<u32> {
        Ok(match self.registry.placement(topic)? {
            Some(p) => p.brokers.len() as u32,
            None => (self.partition_count)(topic).unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests;
