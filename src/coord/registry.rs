//! The registry: the paper's four ZooKeeper registries (brokers,
//! consumers, ownership, offsets) and the placement of each topic, as a
//! trait that each backend implements. The directory of
//! [`crate::coord::dir`] is the first backend.
//!
//! # What every backend promises
//!
//! - Brokers, members and owners are *ephemeral*: an entry exists while
//!   its [`Ephemeral`] handle lives, and vanishes when the handle is
//!   dropped or its process dies, `kill -9` included. Each registration
//!   is an incarnation of its own: a second registrant of a live id is
//!   refused, and never replaces nor removes the live entry.
//! - Members and owners also hold a *lease* (their session): an entry
//!   whose holder has not renewed it ([`Ephemeral::renew`]) for longer
//!   than its session timeout is *expired*. An expired member is not
//!   listed by [`Registry::members`], and an expired owner's partition
//!   may be claimed by another member. So a process that is alive but
//!   silent (stopped, stuck in I/O) loses what it held, as a dead one
//!   does, only later. A renewal after the lease ran out fails with
//!   [`Error::Expired`]: the holder must let go and join again.
//! - Each claim of a partition has a *generation*, higher than every
//!   earlier claim's ([`Ephemeral::generation`]); in ZooKeeper it is the
//!   zxid that created the owner znode (its version restarts at 0 with
//!   every claim). At most one claim is *current* (the highest
//!   generation) and no two live processes hold the current claim.
//! - Offsets are *persistent* (groups of brokers keep theirs in the
//!   offsets topic instead, through
//!   [`crate::coord::offsets_topic::TopicRegistry`], which keeps these
//!   promises): a committed offset (the next offset the
//!   group will read) survives every process. Only the partition's owner
//!   commits, with its claim's handle, and the commit is *fenced*: it is
//!   stored only if that claim is still the current one and its lease has
//!   not run out, atomically with the check (in ZooKeeper, a `multi` that
//!   checks the owner znode's version, sent in the claiming session);
//!   otherwise it is refused with [`Error::Fenced`], [`Error::Expired`] or
//!   [`Error::SessionLost`]. A commit never lowers the
//!   stored offset, but [`Registry::reset_offset`] sets any offset while no
//!   live member owns the partition. An offset that does not parse is an
//!   error that names it, never a silent restart from elsewhere.
//! - No member can hold up another: a member stopped anywhere (SIGSTOP,
//!   stuck I/O), inside a commit too, blocks no claim and no commit of any
//!   partition; its own are taken over once its lease runs out, and a
//!   commit of its that runs later, stalled past its check, is refused all
//!   the same.
//! - A topic's placement is persistent and written once: the first
//!   placement wins, and every later one reads it. It names, for each
//!   partition of the topic in order, its replicas (distinct broker ids,
//!   the preferred leader first), as [`crate::coord::place`] computes
//!   them. A placement stored before replication names one broker per
//!   partition and reads as one replica each.
//! - A partition's state ([`PartitionState`]: leader, leader epoch, ISR)
//!   is persistent, created once (the first create wins) and then changed
//!   only by compare-and-set on its version: a write that names a version
//!   other than the current one is refused and leaves nothing behind, so
//!   of two writers that read the same version exactly one wins. Versions
//!   start at 0 and grow by one with each change; a version once replaced
//!   never becomes current again, however late a stale writer runs. No
//!   writer can hold up another: a writer stopped anywhere in a change
//!   stops no read and no other change.
//! - Names (topics, groups, members, broker ids) are of `[A-Za-z0-9._-]`,
//!   so no name can reach outside the registry, whatever it is stored in.
//!
//! # Change notification and sessions
//!
//! Members look at the registry (a listing and a few small reads) every
//! `poll` interval, and at once when [`Registry::changes`] moves: a count
//! that a backend with watches (ZooKeeper) bumps whenever a watched
//! listing changes or its connection does. The directory backend has no
//! watches: its count never moves, and polling alone finds changes.
//!
//! [`Registry::session`] says whether this process's session with the
//! registry is confirmed ([`SessionState::Alive`]), in doubt
//! ([`SessionState::Suspended`]: disconnected, so what it holds may be
//! taken by others at any moment) or gone ([`SessionState::Lost`]: every
//! ephemeral entry of the session is gone). A member hands out no record
//! while its session is in doubt, and drops everything, commits nothing
//! and joins again once it is lost. The directory backend has no session
//! (its leases stand for one): it is always alive.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A broker's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    /// Unique id.
    pub id: String,
    /// Host to connect to.
    pub host: String,
    /// Port to connect to.
    pub port: u16,
    /// Its process.
    pub pid: u32,
    /// Topics it serves, each with the partitions it holds.
    pub topics: BTreeMap<String, Vec<u32>>,
    /// Where Kafka clients reach it (`--kafka-advertised`, else the
    /// Kafka listener's address), when it has a Kafka listener.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<String>,
    /// The principal it shows other brokers (`User:NAME`), where brokers
    /// prove who they are: a follower's fetches must come from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
}

impl BrokerInfo {
    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// A group member's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberInfo {
    /// Unique id; members are ordered by it.
    pub member: String,
    /// Its process.
    pub pid: u32,
    /// Topics it subscribes to.
    pub topics: Vec<String>,
    /// A Kafka member of a group whose leader (a client's assignor)
    /// assigns the partitions: the id of the broker that coordinates the
    /// group. Such a group is Kafka clients' alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<String>,
}

/// Where a topic's partitions are: the replicas of each, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The topic.
    pub topic: String,
    /// Broker id of partition `i`'s preferred leader (its first replica)
    /// at index `i`: the one broker of each partition before replication.
    pub brokers: Vec<String>,
    /// The replicas of partition `i` at index `i`, distinct, the preferred
    /// leader first. Stored only when some partition has more than one: a
    /// placement without them (all placements before replication) has one
    /// replica per partition, the broker in `brokers`, and reads so.
    #[serde(default, skip_serializing_if = "one_replica_each")]
    pub replicas: Vec<Vec<String>>,
}

/// Whether a placement's replicas are one per partition (or not given):
/// then they are not stored, and the placement's bytes are those of a
/// placement before replication.
fn one_replica_each(replicas: &[Vec<String>]) -> bool {
    replicas.iter().all(|r| r.len() <= 1)
}

impl Placement {
    /// The placement of `topic` whose partition `i` has the replicas
    /// `replicas[i]`, each list non-empty, the preferred leader first.
    pub fn new(topic: &str, replicas: Vec<Vec<String>>) -> Placement {
        let brokers = replicas
            .iter()
            .map(|r| r.first().expect("a partition has a replica").clone())
            .collect();
        Placement {
            topic: topic.to_string(),
            brokers,
            replicas,
        }
    }

    /// The replicas of `partition`, the preferred leader first; `None`
    /// outside the topic.
    pub fn replicas_of(&self, partition: u32) -> Option<&[String]> {
        let p = partition as usize;
        match self.replicas.get(p) {
            Some(r) if !r.is_empty() => Some(r),
            _ => self.brokers.get(p).map(std::slice::from_ref),
        }
    }

    /// How many replicas its partitions have (the most of any).
    pub fn replication_factor(&self) -> usize {
        (0..self.brokers.len() as u32)
            .filter_map(|p| self.replicas_of(p).map(<[String]>::len))
            .max()
            .unwrap_or(0)
    }
}

/// The state of a partition's replication: who leads it, in which epoch,
/// and which replicas are in sync. Stored as JSON,
/// `{"leader":"b1","leader_epoch":3,"isr":["b1","b2"]}` (`"leader":null`
/// while it is offline), and changed only by compare-and-set on its
/// version ([`Registry::set_partition_state`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// The broker id of its leader; `None`: offline (no in-sync replica
    /// is alive to lead it).
    pub leader: Option<String>,
    /// The leader's epoch: each new leader takes a higher one.
    pub leader_epoch: u64,
    /// The in-sync replicas, by broker id.
    pub isr: Vec<String>,
}

/// An entry's lease: how long it lives unrenewed, and how long ago it was
/// last renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The session timeout its holder asked for.
    pub timeout: Duration,
    /// Time since its last renewal (zero if the clock went back).
    pub age: Duration,
}

impl Lease {
    /// Whether its holder has been silent longer than its timeout.
    pub fn expired(&self) -> bool {
        self.age > self.timeout
    }
}

/// The current claim of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The member that holds it.
    pub member: String,
    /// The claim's generation.
    pub generation: u64,
    /// Its lease (expired: the partition may be taken over).
    pub lease: Lease,
}

/// What keeps an ephemeral entry alive in its backend (a held file lock, a
/// session's node): the entry exists while this lives. Dropping it
/// removes the entry.
pub trait Held: fmt::Debug + Send {
    /// Replaces the entry's description with `json`, atomically. An entry
    /// with no description (an owner) ignores it.
    fn update(&self, json: &[u8]) -> Result<()>;

    /// Renews the entry's lease. [`Error::Expired`] when the lease ran out
    /// before this renewal, [`Error::Fenced`] when a later claim replaced
    /// this one: in both cases others may have taken what it held, and
    /// the holder must let it go. An entry with no lease (a broker) has
    /// nothing to renew.
    fn renew(&self) -> Result<()>;

    /// The generation of an owner's claim, higher than every earlier
    /// claim's; 0 for other entries.
    fn generation(&self) -> u64;

    /// What renews the entry's lease as [`Held::renew`] does, on its own
    /// (it shares nothing with the entry's other uses, so that a thread
    /// of its own can renew while the entry is being rewritten); `None`
    /// when the backend keeps no lease (ZooKeeper's client sends its own
    /// heartbeats).
    fn renewer(&self) -> Option<Renewer> {
        None
    }

    /// Whether the entry still lives as far as this process knows without
    /// asking the registry: `false` once the session it was created in is
    /// gone, even if a new session replaced it. A backend without
    /// sessions answers `true`.
    fn current(&self) -> bool {
        true
    }

    /// The concrete handle, so that a backend can recognise its own.
    fn as_any(&self) -> &dyn Any;
}

/// Renews one ephemeral entry's lease (see [`Held::renewer`]).
#[derive(Clone)]
pub struct Renewer(Arc<dyn Fn() -> Result<()> + Send + Sync>);

impl Renewer {
    /// A renewer that runs `renew`.
    pub fn new(renew: impl Fn() -> Result<()> + Send + Sync + 'static) -> Renewer {
        Renewer(Arc::new(renew))
    }

    /// Renews the lease (see [`Held::renew`]).
    pub fn renew(&self) -> Result<()> {
        (self.0)()
    }
}

impl fmt::Debug for Renewer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Renewer")
    }
}

/// A held ephemeral entry (a broker, a member, an owner), whatever the
/// backend: the entry exists while this lives.
#[derive(Debug)]
pub struct Ephemeral(Box<dyn Held>);

impl Ephemeral {
    /// Wraps a backend's handle.
    pub fn new(held: impl Held + 'static) -> Ephemeral {
        Ephemeral(Box::new(held))
    }

    /// Replaces the entry's description, atomically.
    pub fn update<T: Serialize>(&self, info: &T) -> Result<()> {
        self.0.update(&to_json(info)?)
    }

    /// Renews the entry's lease (see [`Held::renew`]).
    pub fn renew(&self) -> Result<()> {
        self.0.renew()
    }

    /// The generation of an owner's claim; 0 for other entries.
    pub fn generation(&self) -> u64 {
        self.0.generation()
    }

    /// What renews the entry's lease on its own (see [`Held::renewer`]).
    pub fn renewer(&self) -> Option<Renewer> {
        self.0.renewer()
    }

    /// The backend's handle.
    pub fn held(&self) -> &dyn Held {
        &*self.0
    }
}

/// This process's session with a registry (see the module's docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Confirmed: what the session holds is its own.
    Alive,
    /// In doubt (disconnected): what it holds may be taken by others.
    Suspended,
    /// Gone: every ephemeral entry of the session is gone.
    Lost,
}

/// A registry: brokers, group members, partition owners, committed
/// offsets and topic placements, shared by every process of a cluster.
/// Callers hold it as an `Arc<dyn Registry>`; see the module's promises.
pub trait Registry: fmt::Debug + Send + Sync {
    /// Where the registry is, for messages (a directory's path).
    fn location(&self) -> String;

    /// The cluster's id, as Kafka's `/cluster/id`: made at random by the
    /// first process that asks, then the same for as long as the registry
    /// lives. A registry rebuilt from nothing (ZooKeeper's data lost, the
    /// directory made again) gets another, which tells what it issues
    /// (claims' generations, from the start again) from what the one
    /// before it did.
    fn cluster_id(&self) -> Result<String>;

    /// Registers a broker, until the handle is dropped (a broker has no
    /// lease: only its process's death ends it). [`Error::InUse`] while a
    /// live broker holds the id.
    fn register_broker(&self, info: &BrokerInfo) -> Result<Ephemeral>;

    /// The live brokers, by id.
    fn brokers(&self) -> Result<Vec<BrokerInfo>>;

    /// Joins `group` as `info.member` with a lease of `session_timeout`,
    /// until the handle is dropped. [`Error::InUse`] while a live member
    /// holds the id.
    fn join(&self, group: &str, info: &MemberInfo, session_timeout: Duration) -> Result<Ephemeral>;

    /// The members of `group` whose process lives, expired ones included,
    /// with their leases, ordered by id.
    fn sessions(&self, group: &str) -> Result<Vec<(MemberInfo, Lease)>>;

    /// The groups that have members, owners or committed offsets.
    fn groups(&self) -> Result<Vec<String>>;

    /// Claims a partition for `member` with a lease of `session_timeout`,
    /// until the handle is dropped: `None` when another member's claim is
    /// current and neither dead nor expired, or another claimer took it
    /// first. A claim never waits on another member, not even one stopped
    /// inside a commit. Taking over an expired claim makes a new
    /// generation, which fences the old owner's commits, late ones too.
    fn claim(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        member: &str,
        session_timeout: Duration,
    ) -> Result<Option<Ephemeral>>;

    /// The current claim of a partition whose holder lives (its lease may
    /// have expired), if any.
    fn owner(&self, group: &str, topic: &str, partition: u32) -> Option<Owner>;

    /// The group's committed offset for a partition (the next offset to
    /// read), `None` when it has none.
    fn committed(&self, group: &str, topic: &str, partition: u32) -> Result<Option<u64>>;

    /// Stores `offset` for a partition as it is, durably, fenced: only if
    /// `owner` (the caller's claim of that partition) is still current and
    /// its lease has not run out, else [`Error::Fenced`] or
    /// [`Error::Expired`]. Renews the claim's lease. Callers use
    /// [`Registry::commit`], which never lowers the stored offset.
    fn store_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        owner: &Ephemeral,
    ) -> Result<()>;

    /// Sets a partition's committed offset to `offset`, lower or higher,
    /// durably; refused with [`Error::GroupActive`] while a member whose
    /// process lives holds the partition's current claim (expired or not).
    /// The check and the write are atomic with respect to claims (the
    /// directory backend takes a claim of its own for the write).
    fn reset_offset(&self, group: &str, topic: &str, partition: u32, offset: u64) -> Result<()>;

    /// Deletes `group`'s committed offset of `topic [partition]`, fenced
    /// as [`Registry::reset_offset`] is: only while no member owns the
    /// partition ([`Error::GroupActive`] otherwise). Whether it had one.
    fn delete_offset(&self, group: &str, topic: &str, partition: u32) -> Result<bool>;

    /// Every committed offset of `group`: (topic, partition, offset), in
    /// order; an offset that cannot be read is its error.
    fn offsets(&self, group: &str) -> Result<Vec<(String, u32, Result<u64>)>>;

    /// A topic's placement, if it has one.
    fn placement(&self, topic: &str) -> Result<Option<Placement>>;

    /// Stores `placement` unless the topic is placed already: `false` when
    /// another placement got there first (and stays).
    fn create_placement(&self, placement: &Placement) -> Result<bool>;

    /// Replaces the topic's placement with `new` (more partitions:
    /// CreatePartitions) if the one stored is still `old`, durably:
    /// `false` when it is not (changed, or the topic removed), and then
    /// nothing was written. An error from the backend says nothing of
    /// whether it was applied: read the placement again.
    fn replace_placement(&self, old: &Placement, new: &Placement) -> Result<bool>;

    /// This process's session with the registry.
    fn session(&self) -> SessionState {
        SessionState::Alive
    }

    /// A configuration entry of `kind` (`users`: a user's SCRAM
    /// credentials), as stored; `None` when there is none. Kafka keeps
    /// them under `/config/KIND/NAME` in ZooKeeper, and so does klog.
    fn config(&self, kind: &str, name: &str) -> Result<Option<Vec<u8>>>;

    /// Writes a configuration entry, replacing any before it.
    fn set_config(&self, kind: &str, name: &str, bytes: &[u8]) -> Result<()>;

    /// Changes a configuration entry with no other change through this
    /// method in between, on any host: `change` is given the entry as
    /// stored (`None`: none) and says what to store (`None`: remove it).
    /// On ZooKeeper it may run again, on what another change left, when
    /// that change got in first (a compare-and-set on the znode's
    /// version); on a directory, a lock file per kind orders the changes.
    fn update_config(&self, kind: &str, name: &str, change: ConfigChange<'_>) -> Result<()>;

    /// Removes a configuration entry; whether there was one.
    fn remove_config(&self, kind: &str, name: &str) -> Result<bool>;

    /// The names of `kind`'s configuration entries, sorted.
    fn configs(&self, kind: &str) -> Result<Vec<String>>;

    /// The topics that have a placement, in order.
    fn topics(&self) -> Result<Vec<String>>;

    /// Removes a topic: its placement first (from then on it is not
    /// placed, and no partition state can be made for it), then its
    /// partitions' states and its configs. Removing what is not there is
    /// no error, so a removal cut short is finished by the next.
    fn remove_topic(&self, topic: &str) -> Result<()>;

    /// A partition's state and its version, if it has one. A state that
    /// does not parse is an error that names it.
    fn partition_state(&self, topic: &str, partition: u32)
        -> Result<Option<(PartitionState, u64)>>;

    /// Stores `state` as the partition's first state, version 0, durably,
    /// unless it has one already: `false` when another create got there
    /// first (and stays). The topic must be placed and the partition in
    /// it. An error from the backend says nothing of whether it was
    /// applied: read the state again.
    fn create_partition_state(
        &self,
        topic: &str,
        partition: u32,
        state: &PartitionState,
    ) -> Result<bool>;

    /// Replaces the partition's state with `state` if its version is still
    /// `expected_version`, durably, the new one being `expected_version +
    /// 1`: `false` when someone changed it first, and then nothing was
    /// written. A partition with no state is an error. An error from the
    /// backend (a connection lost with the request in flight) says nothing
    /// of whether it was applied: read the state again.
    fn set_partition_state(
        &self,
        topic: &str,
        partition: u32,
        state: &PartitionState,
        expected_version: u64,
    ) -> Result<bool>;

    /// A count that moves when a watched listing (brokers, a group's
    /// members) or the session's connection changes; it never moves in a
    /// backend without watches.
    fn changes(&self) -> u64 {
        0
    }

    /// The live members of `group` whose lease has not expired, ordered by
    /// id: the group as a rebalance sees it.
    fn members(&self, group: &str) -> Result<Vec<MemberInfo>> {
        let sessions = self.sessions(group)?.into_iter();
        Ok(sessions
            .filter(|(_, lease)| !lease.expired())
            .map(|(m, _)| m)
            .collect())
    }

    /// Commits `offset` for a partition the caller owns (`owner` is its
    /// claim). A lower offset than the stored one is ignored, so that a
    /// late commit never sends the group back.
    fn commit(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        owner: &Ephemeral,
    ) -> Result<()> {
        if self
            .committed(group, topic, partition)?
            .is_some_and(|c| c >= offset)
        {
            return Ok(());
        }
        self.store_offset(group, topic, partition, offset, owner)
    }

    /// Places `topic` (`partition_count` partitions round-robin over the
    /// live brokers `broker_ids`, one replica each) unless it is placed
    /// already; returns the placement that holds.
    fn place_topic(
        &self,
        topic: &str,
        partition_count: u32,
        broker_ids: &[String],
    ) -> Result<Placement> {
        self.place_topic_replicated(topic, partition_count, 1, broker_ids)
    }

    /// Places `topic` (`partition_count` partitions of
    /// `replication_factor` replicas each, round-robin over the live
    /// brokers `broker_ids`, see [`crate::coord::place`]) unless it is
    /// placed already; returns the placement that holds, whatever its
    /// replication factor. More replicas than live brokers is an error.
    fn place_topic_replicated(
        &self,
        topic: &str,
        partition_count: u32,
        replication_factor: u32,
        broker_ids: &[String],
    ) -> Result<Placement> {
        if let Some(p) = self.placement(topic)? {
            return Ok(p);
        }
        if broker_ids.is_empty() {
            return Err(Error::NoLiveBroker {
                topic: topic.into(),
            });
        }
        let replicas =
            crate::coord::spread::place(partition_count, replication_factor, broker_ids)?;
        let placement = Placement::new(topic, replicas);
        if placement.brokers.is_empty() {
            return Err(Error::Config(format!(
                "topic {topic:?} needs at least one partition to be placed"
            )));
        }
        if self.create_placement(&placement)? {
            return Ok(placement);
        }
        // Another placement won: it holds.
        self.placement(topic)?.ok_or_else(|| Error::Vanished {
            what: format!("placement of {topic:?}"),
        })
    }
}

/// An entry's description as JSON, the form every backend stores.
pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|source| Error::Encode {
        what: "a registry entry",
        source,
    })
}

/// The first line of a committed offset's bytes (a file, a znode).
const OFFSET_MAGIC: &str = "klog-offset 1";

/// A committed offset as every backend stores it:
/// `klog-offset 1\n<offset>\n`.
pub(crate) fn encode_offset(offset: u64) -> Vec<u8> {
    format!("{OFFSET_MAGIC}\n{offset}\n").into_bytes()
}

/// Parses a committed offset's bytes (see [`encode_offset`]); `path` names
/// where they were in the error.
pub(crate) fn parse_offset(path: std::path::PathBuf, bytes: &[u8]) -> Result<u64> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.lines();
    match (
        lines.next(),
        lines.next().map(|l| l.parse::<u64>()),
        lines.next(),
    ) {
        (Some(OFFSET_MAGIC), Some(Ok(o)), None) => Ok(o),
        _ => Err(Error::Corrupt {
            path,
            position: 0,
            reason: format!("not a committed offset ({OFFSET_MAGIC:?}, then a number)"),
        }),
    }
}

/// Parses a placement's JSON, which must name `topic` and at least one
/// partition; `path` names where it was in the error.
pub(crate) fn parse_placement(
    path: std::path::PathBuf,
    topic: &str,
    bytes: &[u8],
) -> Result<Placement> {
    let placement: Placement = serde_json::from_slice(bytes).map_err(|e| Error::Corrupt {
        path: path.clone(),
        position: 0,
        reason: format!("not a placement: {e}"),
    })?;
    let corrupt = |reason: String| Error::Corrupt {
        path: path.clone(),
        position: 0,
        reason,
    };
    if placement.topic != topic || placement.brokers.is_empty() {
        return Err(corrupt("names another topic, or no partition".into()));
    }
    if placement.replicas.is_empty() {
        // Stored before replication: one replica per partition.
        let replicas = placement.brokers.iter().map(|b| vec![b.clone()]).collect();
        return Ok(Placement::new(topic, replicas));
    }
    if placement.replicas.len() != placement.brokers.len() {
        return Err(corrupt(format!(
            "names {} partitions' leaders but {} partitions' replicas",
            placement.brokers.len(),
            placement.replicas.len()
        )));
    }
    for (p, (replicas, leader)) in placement
        .replicas
        .iter()
        .zip(&placement.brokers)
        .enumerate()
    {
        let mut distinct = replicas.clone();
        distinct.sort();
        distinct.dedup();
        if replicas.first() != Some(leader)
            || distinct.len() != replicas.len()
            || replicas.iter().any(|r| check_name("broker", r).is_err())
        {
            return Err(corrupt(format!(
                "partition {p}'s replicas {replicas:?} are not distinct broker ids led by its \
                 preferred leader {leader:?}"
            )));
        }
    }
    Ok(placement)
}

/// The most bytes of a partition state's JSON (a few broker ids).
pub(crate) const STATE_BYTES_MAX: usize = 64 * 1024;

/// A partition state as every backend stores it (see
/// [`PartitionState`]); names that are not broker ids, and a state past
/// [`STATE_BYTES_MAX`], are refused.
pub(crate) fn encode_state(state: &PartitionState) -> Result<Vec<u8>> {
    for id in state.leader.iter().chain(&state.isr) {
        check_name("broker", id)?;
    }
    let bytes = to_json(state)?;
    if bytes.len() > STATE_BYTES_MAX {
        return Err(Error::TooLarge {
            what: "a partition state",
            size: bytes.len() as u64,
            limit: STATE_BYTES_MAX as u64,
        });
    }
    Ok(bytes)
}

/// Parses a partition state's bytes (see [`encode_state`]); `path` names
/// where they were in the error.
pub(crate) fn parse_state(path: std::path::PathBuf, bytes: &[u8]) -> Result<PartitionState> {
    let corrupt = |reason: String| Error::Corrupt {
        path: path.clone(),
        position: 0,
        reason,
    };
    if bytes.len() > STATE_BYTES_MAX {
        return Err(corrupt(format!(
            "not a partition state: over {STATE_BYTES_MAX} bytes"
        )));
    }
    let state: PartitionState = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(format!("not a partition state: {e}")))?;
    if let Some(id) = state
        .leader
        .iter()
        .chain(&state.isr)
        .find(|id| check_name("broker", id).is_err())
    {
        return Err(corrupt(format!(
            "not a partition state: {id:?} is not a broker id"
        )));
    }
    Ok(state)
}

/// The placement of `topic` if `partition` is in it: a partition's state
/// is created only for a partition that is placed.
pub(crate) fn placed_partition(
    registry: &(impl Registry + ?Sized),
    topic: &str,
    partition: u32,
) -> Result<Placement> {
    let Some(placement) = registry.placement(topic)? else {
        return Err(Error::Config(format!(
            "topic {topic:?} is not placed in the registry {}: a partition's state needs \
             its placement first",
            registry.location()
        )));
    };
    if partition as usize >= placement.brokers.len() {
        return Err(Error::UnknownPartition {
            topic: topic.to_string(),
            partition,
            count: placement.brokers.len() as u32,
        });
    }
    Ok(placement)
}

/// What [`Registry::update_config`] does to an entry: given it as stored,
/// what to store instead (`None`: remove it). It runs while the entry is
/// held (a lock, or a version read), so it must not call the registry.
pub type ConfigChange<'a> = &'a mut dyn FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>>;

/// Checks a name used in the registry (a topic, a group, a member, a
/// broker id): a name given by the configuration, so a bad one is
/// [`Error::Config`].
pub(crate) fn check_name(kind: &'static str, name: &str) -> Result<()> {
    crate::storage::store::validate_topic(name)
        .map_err(|_| Error::Config(format!("invalid {kind} name {name:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The session timeout of the tests' entries.
    const T: std::time::Duration = std::time::Duration::from_secs(10);
    use crate::coord::mem::MemRegistry;

    #[test]
    fn a_commit_never_lowers_the_stored_offset() {
        let reg = MemRegistry::default();
        let owner = reg.claim("g", "t", 0, "a", T).unwrap().unwrap();
        reg.commit("g", "t", 0, 10, &owner).unwrap();
        reg.commit("g", "t", 0, 5, &owner).unwrap();
        reg.commit("g", "t", 0, 10, &owner).unwrap();
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(10));
        assert_eq!(
            reg.stores(),
            1,
            "neither the lower nor the equal offset is stored"
        );
        reg.commit("g", "t", 0, 11, &owner).unwrap();
        assert_eq!(reg.committed("g", "t", 0).unwrap(), Some(11));
    }

    #[test]
    fn the_first_placement_wins_and_no_broker_places_nothing() {
        let reg = MemRegistry::default();
        let ids = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let err = reg.place_topic("t", 2, &[]).unwrap_err();
        assert!(matches!(err, Error::NoLiveBroker { .. }), "{err}");
        assert_eq!(err.to_string(), "no live broker to place topic \"t\" on");
        assert_eq!(reg.placement("t").unwrap(), None);
        let first = reg.place_topic("t", 3, &ids(&["b2", "b1"])).unwrap();
        assert_eq!(first.brokers, ids(&["b1", "b2", "b1"]));
        // A later placer, with other brokers and another count, reads it.
        let later = reg.place_topic("t", 1, &ids(&["b3"])).unwrap();
        assert_eq!(later, first);
        // One that loses the race to store it reads the winner's.
        reg.lose_next_placement(Placement::new("u", vec![ids(&["b9"])]));
        let lost = reg.place_topic("u", 2, &ids(&["b1"])).unwrap();
        assert_eq!(lost.brokers, ids(&["b9"]));
    }

    #[test]
    fn names_outside_the_alphabet_are_configuration_errors() {
        for bad in ["", "a/b", "..", "a b"] {
            let err = check_name("group", bad).unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{bad:?}: {err}");
        }
        check_name("group", "g-1.x_y").unwrap();
    }
}
