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
//! - Offsets are *persistent*: a committed offset (the next offset the
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
//!   partition of the topic in order, the id of the broker that holds it,
//!   as [`crate::coord::place`] computes it.
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
}

/// Where a topic's partitions are: the broker id of each, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The topic.
    pub topic: String,
    /// Broker id of partition `i` at index `i`.
    pub brokers: Vec<String>,
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

    /// Every committed offset of `group`: (topic, partition, offset), in
    /// order; an offset that cannot be read is its error.
    fn offsets(&self, group: &str) -> Result<Vec<(String, u32, Result<u64>)>>;

    /// A topic's placement, if it has one.
    fn placement(&self, topic: &str) -> Result<Option<Placement>>;

    /// Stores `placement` unless the topic is placed already: `false` when
    /// another placement got there first (and stays).
    fn create_placement(&self, placement: &Placement) -> Result<bool>;

    /// This process's session with the registry.
    fn session(&self) -> SessionState {
        SessionState::Alive
    }

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
    /// live brokers `broker_ids`) unless it is placed already; returns the
    /// placement that holds.
    fn place_topic(
        &self,
        topic: &str,
        partition_count: u32,
        broker_ids: &[String],
    ) -> Result<Placement> {
        if let Some(p) = self.placement(topic)? {
            return Ok(p);
        }
        let placement = Placement {
            topic: topic.to_string(),
            brokers: crate::coord::spread::place(partition_count, broker_ids),
        };
        if placement.brokers.is_empty() {
            return Err(Error::NoLiveBroker {
                topic: topic.into(),
            });
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
    if placement.topic != topic || placement.brokers.is_empty() {
        return Err(Error::Corrupt {
            path,
            position: 0,
            reason: "names another topic, or no partition".into(),
        });
    }
    Ok(placement)
}

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
        reg.lose_next_placement(Placement {
            topic: "u".into(),
            brokers: ids(&["b9"]),
        });
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
