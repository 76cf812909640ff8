//! A registry whose committed offsets live in the offsets topic: every
//! other entry (brokers, members, claims, placements, configs) is the
//! registry's, and a group's offsets are asked of the broker that leads
//! the group's partition of the topic (offset_commit and offset_fetch,
//! [`crate::protocol`]), found through the registry and asked again
//! elsewhere while leadership moves, until [`TopicRegistry`]'s timeout.
//!
//! What the registry promises of offsets ([`crate::coord::registry`])
//! holds, fenced by the topic instead of a registry write:
//!
//! - A claim's first act is a fence: its generation, written to the
//!   topic before [`Registry::claim`] returns it. From then on, a commit
//!   of any older claim is refused ([`Error::Fenced`]), wherever and
//!   however late it arrives. A commit that lands between a new claim and
//!   its fence is one the new owner reads: as if committed just before.
//! - A commit never lowers the stored offset; a reset or a delete takes a
//!   claim of its own first, and is refused ([`Error::GroupActive`])
//!   while a member holds the partition.
//! - A commit needs no registry write, nor read: while the registry is
//!   unreachable, a member that holds its claims commits on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{partition_of, OFFSETS_TOPIC};
use crate::client::Connection;
use crate::coord::registry::{ConfigChange, Registry};
use crate::coord::{BrokerInfo, Ephemeral, Lease, MemberInfo, Owner, PartitionState, Placement};
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::{CommitMode, OffsetCommit, OffsetFetch};
use crate::sync::lock;

/// How long a request for offsets is asked again while the topic's
/// leadership moves (a leader's election takes a session timeout).
pub const OFFSETS_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a request waits before it asks again.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Connections kept open, at most (each to a broker).
const IDLE_CONNECTIONS_MAX: usize = 8;

/// The member name a reset or a delete claims a partition under.
const RESET_MEMBER: &str = "offsets-reset";

/// The offsets topic's requests answered in this process, by a broker
/// that leads the group's partition: `None` where it does not (the
/// request then goes over the network to the leader).
pub trait LocalOffsets: std::fmt::Debug + Send + Sync {
    /// An offset_commit, answered here.
    fn commit(&self, commit: &OffsetCommit) -> Option<Result<Option<u64>>>;
    /// An offset_fetch, answered here.
    fn fetch(&self, fetch: &OffsetFetch) -> Option<Result<Vec<(String, u32, u64)>>>;
}

/// A registry whose committed offsets live in the offsets topic (see the
/// module).
#[derive(Debug)]
pub struct TopicRegistry {
    inner: Arc<dyn Registry>,
    /// A broker's own answers, asked first.
    local: Option<Arc<dyn LocalOffsets>>,
    timeout: Duration,
    /// Where each partition of the topic was led, as last asked.
    leaders: Mutex<Option<Vec<Result<String>>>>,
    /// Connections not in use, by address.
    idle: Mutex<Vec<(String, Connection)>>,
}

impl TopicRegistry {
    /// `inner`, with its committed offsets in the offsets topic.
    pub fn wrap(inner: Arc<dyn Registry>) -> Arc<dyn Registry> {
        Arc::new(TopicRegistry::new(inner, OFFSETS_TIMEOUT))
    }

    /// [`TopicRegistry::wrap`] asking again for up to `timeout`.
    pub fn new(inner: Arc<dyn Registry>, timeout: Duration) -> TopicRegistry {
        TopicRegistry {
            inner,
            local: None,
            timeout,
            leaders: Mutex::new(None),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// [`TopicRegistry::wrap`] in a broker, which answers requests for
    /// the partitions it leads itself.
    pub fn in_broker(inner: Arc<dyn Registry>, local: Arc<dyn LocalOffsets>) -> Arc<dyn Registry> {
        let mut r = TopicRegistry::new(inner, OFFSETS_TIMEOUT);
        r.local = Some(local);
        Arc::new(r)
    }

    /// The registry underneath.
    pub fn inner(&self) -> &Arc<dyn Registry> {
        &self.inner
    }

    /// Runs `ask` on a connection to the leader of `group`'s partition of
    /// the topic, again on the new leader while it moves, until the
    /// timeout.
    fn ask<T>(
        &self,
        group: &str,
        here: &mut dyn FnMut(&dyn LocalOffsets) -> Option<Result<T>>,
        ask: &mut dyn FnMut(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let local = self.local.as_deref().and_then(&mut *here);
            let answer = local.unwrap_or_else(|| {
                self.target(group).and_then(|addr| {
                    let mut c = self.connection(&addr)?;
                    let answer = ask(&mut c);
                    if !matches!(answer, Err(Error::Network { .. } | Error::TimedOut { .. })) {
                        self.put_back(addr, c);
                    }
                    answer
                })
            });
            match answer {
                Err(e) if again(&e) && Instant::now() < deadline => {
                    *lock(&self.leaders) = None;
                    std::thread::sleep(RETRY_BACKOFF);
                }
                answer => return answer,
            }
        }
    }

    /// The broker to ask for `group`'s offsets: its partition's leader, or
    /// any live broker while the topic is not placed (it creates it).
    fn target(&self, group: &str) -> Result<String> {
        let mut leaders = lock(&self.leaders);
        if leaders.is_none() {
            *leaders = match self.inner.placement(OFFSETS_TOPIC)? {
                Some(_) => Some(crate::coord::leaders(&*self.inner, OFFSETS_TOPIC, false)?),
                None => None,
            };
        }
        match leaders.as_ref() {
            Some(all) => match &all[partition_of(group, all.len() as u32) as usize] {
                Ok(addr) => Ok(addr.clone()),
                Err(e) => Err(Error::Broker {
                    code: ErrorCode::LeaderNotAvailable,
                    message: e.to_string(),
                }),
            },
            None => {
                let mut brokers = self.inner.brokers()?;
                brokers.sort_by(|a, b| a.id.cmp(&b.id));
                brokers
                    .first()
                    .map(BrokerInfo::addr)
                    .ok_or_else(|| Error::NoBroker {
                        registry: self.inner.location(),
                    })
            }
        }
    }

    fn connection(&self, addr: &str) -> Result<Connection> {
        let mut idle = lock(&self.idle);
        match idle.iter().position(|(a, _)| a == addr) {
            Some(at) => Ok(idle.swap_remove(at).1),
            None => {
                drop(idle);
                Connection::connect_timeout(addr, self.timeout)
            }
        }
    }

    fn put_back(&self, addr: String, c: Connection) {
        let mut idle = lock(&self.idle);
        if idle.len() < IDLE_CONNECTIONS_MAX {
            idle.push((addr, c));
        }
    }

    /// Writes a committed offset as `mode` asks, with `generation`; the
    /// offset stored before.
    fn write(
        &self,
        key: (&str, &str, u32),
        offset: u64,
        generation: u64,
        mode: CommitMode,
    ) -> Result<Option<u64>> {
        let (group, topic, partition) = key;
        let commit = OffsetCommit {
            group: group.to_string(),
            topic: topic.to_string(),
            partition,
            offset,
            generation,
            mode,
        };
        let written = self.ask(group, &mut |l| l.commit(&commit), &mut |c| {
            c.offset_commit(&commit)
        });
        written.map_err(|e| match e {
            Error::Broker {
                code: ErrorCode::CommitFenced,
                message,
            } => Error::Fenced {
                what: format!("the claim of {topic} [{partition}] in group {group}"),
                generation,
                // commit_fenced's message ends with the current one.
                current: message
                    .rsplit(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
            },
            e => e,
        })
    }

    /// Writes `offset` as `mode` asks, fenced by `owner`'s claim (one
    /// this process knows it lost is refused first).
    fn fenced_write(
        &self,
        key: (&str, &str, u32),
        offset: u64,
        owner: &Ephemeral,
        mode: CommitMode,
    ) -> Result<()> {
        let (group, topic, partition) = key;
        if !owner.held().current() {
            return Err(Error::SessionLost {
                what: format!("the claim of {topic} [{partition}] in group {group}"),
                registry: self.inner.location(),
            });
        }
        self.write(key, offset, owner.generation(), mode).map(drop)
    }

    /// Runs `change` holding a claim of the partition of its own: refused
    /// while a member holds it.
    fn unowned<T>(
        &self,
        key: (&str, &str, u32),
        change: impl FnOnce(u64) -> Result<T>,
    ) -> Result<T> {
        let (group, topic, partition) = key;
        let timeout = Duration::from_secs(10);
        match self
            .inner
            .claim(group, topic, partition, RESET_MEMBER, timeout)?
        {
            Some(claim) => change(claim.generation()),
            None => Err(Error::GroupActive {
                group: group.to_string(),
                members: match self.inner.owner(group, topic, partition) {
                    Some(o) => format!("member {} holds {topic} [{partition}]", o.member),
                    None => format!("a member holds {topic} [{partition}]"),
                },
            }),
        }
    }
}

/// Opens the registry `registry` only to look at it
/// ([`crate::coord::open_read_only`]), with its committed offsets read
/// from the offsets topic.
pub fn open_read_only(registry: impl AsRef<std::path::Path>) -> Result<Arc<dyn Registry>> {
    Ok(TopicRegistry::wrap(crate::coord::open_read_only(registry)?))
}

/// Whether a request for offsets may succeed elsewhere or soon.
fn again(e: &Error) -> bool {
    crate::coord::retriable(e)
        || matches!(
            e,
            Error::NoBroker { .. }
                | Error::Broker {
                    code: ErrorCode::UnknownTopic
                        | ErrorCode::UnknownPartition
                        | ErrorCode::ShuttingDown
                        | ErrorCode::Timeout,
                    ..
                }
        )
}

impl Registry for TopicRegistry {
    fn location(&self) -> String {
        self.inner.location()
    }

    fn cluster_id(&self) -> Result<String> {
        self.inner.cluster_id()
    }

    fn register_broker(&self, info: &BrokerInfo) -> Result<Ephemeral> {
        self.inner.register_broker(info)
    }

    fn brokers(&self) -> Result<Vec<BrokerInfo>> {
        self.inner.brokers()
    }

    fn join(&self, group: &str, info: &MemberInfo, session_timeout: Duration) -> Result<Ephemeral> {
        self.inner.join(group, info, session_timeout)
    }

    fn sessions(&self, group: &str) -> Result<Vec<(MemberInfo, Lease)>> {
        self.inner.sessions(group)
    }

    fn groups(&self) -> Result<Vec<String>> {
        self.inner.groups()
    }

    /// The registry's claim, then its fence in the topic: a claim whose
    /// fence cannot be written is let go.
    fn claim(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        member: &str,
        session_timeout: Duration,
    ) -> Result<Option<Ephemeral>> {
        let Some(claim) = self
            .inner
            .claim(group, topic, partition, member, session_timeout)?
        else {
            return Ok(None);
        };
        self.write(
            (group, topic, partition),
            0,
            claim.generation(),
            CommitMode::Fence,
        )?;
        Ok(Some(claim))
    }

    fn owner(&self, group: &str, topic: &str, partition: u32) -> Option<Owner> {
        self.inner.owner(group, topic, partition)
    }

    fn committed(&self, group: &str, topic: &str, partition: u32) -> Result<Option<u64>> {
        let fetch = OffsetFetch {
            group: group.to_string(),
            topic: Some(topic.to_string()),
            partition: Some(partition),
        };
        let found = self.ask(group, &mut |l| l.fetch(&fetch), &mut |c| {
            c.offset_fetch(&fetch)
        })?;
        Ok(found.first().map(|(_, _, offset)| *offset))
    }

    /// Stores the offset in the topic as it is, fenced by the claim's
    /// generation there (a claim this process knows it lost is refused
    /// first).
    fn store_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        owner: &Ephemeral,
    ) -> Result<()> {
        self.fenced_write((group, topic, partition), offset, owner, CommitMode::Reset)
    }

    /// [`Registry::store_offset`] in one request, which never lowers.
    fn commit(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        owner: &Ephemeral,
    ) -> Result<()> {
        self.fenced_write((group, topic, partition), offset, owner, CommitMode::Commit)
    }

    /// Resets the offset in the topic; a registry entry that does not
    /// parse and keeps the partition from being claimed is set too, as
    /// the registry resets it.
    fn reset_offset(&self, group: &str, topic: &str, partition: u32, offset: u64) -> Result<()> {
        let key = (group, topic, partition);
        let reset = |generation| self.write(key, offset, generation, CommitMode::Reset);
        match self.unowned(key, reset) {
            // The registry's own offset is damaged: repaired there first.
            // So is it when the broker refuses to carry the group over for
            // a damaged offset (this one, or another, which its own reset
            // repairs next: the group is carried over then).
            Err(e) if matches!(e, Error::Corrupt { .. }) || super::is_carry_over_refused(&e) => {
                self.inner.reset_offset(group, topic, partition, offset)?;
                self.unowned(key, reset).map(drop)
            }
            done => done.map(drop),
        }
    }

    /// Deletes the offset in the topic, and the registry's, so that no
    /// later carrying over brings it back.
    fn delete_offset(&self, group: &str, topic: &str, partition: u32) -> Result<bool> {
        let key = (group, topic, partition);
        let in_registry = self.inner.delete_offset(group, topic, partition)?;
        let before = self.unowned(key, |generation| {
            self.write(key, 0, generation, CommitMode::Delete)
        });
        match before {
            Ok(before) => Ok(in_registry || before.is_some()),
            // Refused for another damaged offset of a group not carried
            // over: the topic holds none of its records, so the registry's
            // was the only one.
            Err(e) if super::is_carry_over_refused(&e) => Ok(in_registry),
            Err(e) => Err(e),
        }
    }

    fn offsets(&self, group: &str) -> Result<Vec<(String, u32, Result<u64>)>> {
        let fetch = OffsetFetch {
            group: group.to_string(),
            topic: None,
            partition: None,
        };
        let found = self.ask(group, &mut |l| l.fetch(&fetch), &mut |c| {
            c.offset_fetch(&fetch)
        });
        match found {
            Ok(found) => Ok(found.into_iter().map(|(t, p, o)| (t, p, Ok(o))).collect()),
            // A group not carried over, for an offset of it that does not
            // parse: the registry's are its offsets still, each damaged
            // one an error of its own (a topic's deletion, a listing, go
            // on past it).
            Err(e) if super::is_carry_over_refused(&e) => self.inner.offsets(group),
            Err(e) => Err(e),
        }
    }

    fn placement(&self, topic: &str) -> Result<Option<Placement>> {
        self.inner.placement(topic)
    }

    fn create_placement(&self, placement: &Placement) -> Result<bool> {
        self.inner.create_placement(placement)
    }

    fn replace_placement(&self, old: &Placement, new: &Placement) -> Result<bool> {
        self.inner.replace_placement(old, new)
    }

    fn session(&self) -> crate::coord::SessionState {
        self.inner.session()
    }

    fn config(&self, kind: &str, name: &str) -> Result<Option<Vec<u8>>> {
        self.inner.config(kind, name)
    }

    fn set_config(&self, kind: &str, name: &str, bytes: &[u8]) -> Result<()> {
        self.inner.set_config(kind, name, bytes)
    }

    fn update_config(&self, kind: &str, name: &str, change: ConfigChange<'_>) -> Result<()> {
        self.inner.update_config(kind, name, change)
    }

    fn remove_config(&self, kind: &str, name: &str) -> Result<bool> {
        self.inner.remove_config(kind, name)
    }

    fn configs(&self, kind: &str) -> Result<Vec<String>> {
        self.inner.configs(kind)
    }

    fn topics(&self) -> Result<Vec<String>> {
        self.inner.topics()
    }

    fn remove_topic(&self, topic: &str) -> Result<()> {
        self.inner.remove_topic(topic)
    }

    fn partition_state(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<Option<(PartitionState, u64)>> {
        self.inner.partition_state(topic, partition)
    }

    fn create_partition_state(
        &self,
        topic: &str,
        partition: u32,
        state: &PartitionState,
    ) -> Result<bool> {
        self.inner.create_partition_state(topic, partition, state)
    }

    fn set_partition_state(
        &self,
        topic: &str,
        partition: u32,
        state: &PartitionState,
        expected_version: u64,
    ) -> Result<bool> {
        self.inner
            .set_partition_state(topic, partition, state, expected_version)
    }

    fn changes(&self) -> u64 {
        self.inner.changes()
    }
}
