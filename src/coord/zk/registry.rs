//! The ZooKeeper backend of the [`Registry`]: the paper's four registries
//! as znodes of an ensemble, shared by the brokers and consumers of many
//! hosts.
//!
//! # Layout
//!
//! Under the chroot of the address (`zk://HOST:PORT[,...]/CHROOT`, created
//! on first use), in the notation of Kafka's implementation docs:
//!
//! ```text
//! /brokers/ids/[id] --> {"id", "host", "port", "pid", "topics": {"t": [0, 2]}}      (ephemeral)
//! /brokers/topics/[topic] --> {"topic": "t", "brokers": ["<broker-id>", ...],
//!                              "replicas": [["<broker-id>", ...], ...]}            (persistent)
//! /brokers/topics/[topic]/partitions/[0...N]/state
//!                         --> {"leader": "<broker-id>", "leader_epoch", "isr": [...]} (persistent)
//! /consumers/[group]/ids/[member] --> {"member", "pid", "topics": ["t"]}             (ephemeral)
//! /consumers/[group]/owners/[topic]/[0...N] --> <member>                             (ephemeral)
//! /consumers/[group]/offsets/[topic]/[0...N] --> "klog-offset 1\n<offset>\n"         (persistent)
//! ```
//!
//! The JSON is the directory backend's (`crate::coord::dir`), and an
//! offset znode holds the same bytes as an offset file. The parents are
//! persistent znodes with no data, created when first needed.
//!
//! # Sessions, not leases
//!
//! Each process has one ZooKeeper session; its ephemeral znodes (its
//! brokers, members and claims) live while the session does, and the
//! ensemble ends a session whose process died or went silent for its
//! session timeout (the `--session-timeout` the process was given). So a
//! live entry is never expired here: a listed lease's age is zero.
//!
//! - Nothing is sequential: a create whose reply was lost is retried by
//!   reading the znode, and a znode of this session that carries this
//!   holder's data is adopted, not taken for a rival's (`entry`).
//! - A claim's generation is the zxid that created its owner znode, so each
//!   claim's is higher than every earlier one's.
//! - A commit is one `multi` in the claiming session: a check of the owner
//!   znode's version and the offset's write. A claim that was released,
//!   or lost with its session, cannot commit: the check fails, or the
//!   ensemble refuses the expired session's request.
//! - An offset reset is one `multi` too: it creates the owner znode (which
//!   fails while a member owns the partition), writes the offset, and
//!   deletes the owner znode.
//! - A topic's placement is created once: the first `create` wins. It
//!   has `replicas` only when a partition has more than one (else its
//!   bytes are those of a placement before replication).
//! - A partition's state is Kafka's own znode, created once (the first
//!   `create` wins) under its topic's placement znode, which must exist
//!   (so that no `create` of a state makes an empty placement znode). Its
//!   version is the znode's, and a change is a `setData` with the version
//!   the writer read: the ensemble applies it only if no other change came
//!   first, and refuses it with `BadVersion` otherwise.
//! - Listings of brokers and of a group's members arm a watch in the same
//!   read; a watch that fires, and every change of the connection, moves
//!   [`Registry::changes`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::entry::{Keeper, Kind, Sessions, ZkHeld};
use crate::coord::registry::{
    check_name, encode_offset, encode_state, parse_offset, parse_placement, parse_state,
    placed_partition, to_json, BrokerInfo, Ephemeral, Lease, MemberInfo, Owner, PartitionState,
    Placement, Registry, SessionState,
};
use crate::coord::zk::{ZkMode, ZkOp, ZkSession};
use crate::error::{Error, Result, ZkCause};

/// How many times a configuration change is tried against other writers.
const CONFIG_TRIES: usize = 100;

/// The member named in the owner znode an offset reset creates.
const RESET_MEMBER: &str = "offset-reset";

/// A registry on a ZooKeeper ensemble.
#[derive(Debug)]
pub struct ZkRegistry {
    sessions: Arc<Sessions>,
    /// Opened only to look (`klog-dump --registry`).
    read_only: bool,
    /// Declared last: stopped before the session closes.
    _keeper: Keeper,
}

/// Whether `e` is ZooKeeper's "no such znode".
fn no_node(e: &Error) -> bool {
    matches!(
        e,
        Error::ZooKeeper {
            cause: ZkCause::NoNode,
            ..
        }
    )
}

mod cluster_id;

impl ZkRegistry {
    /// Connects to the ensemble of `address` (`zk://HOST:PORT,.../CHROOT`)
    /// with a session of `session_timeout`, creating the chroot.
    pub fn open(address: &str, session_timeout: Duration) -> Result<ZkRegistry> {
        ZkRegistry::connect(address, session_timeout, false)
    }

    /// Connects only to look: creates nothing (a missing chroot reads as
    /// an empty registry) and refuses every change.
    pub fn open_read_only(address: &str, session_timeout: Duration) -> Result<ZkRegistry> {
        ZkRegistry::connect(address, session_timeout, true)
    }

    fn connect(address: &str, session_timeout: Duration, read_only: bool) -> Result<ZkRegistry> {
        let sessions = Sessions::open(address, session_timeout, !read_only)?;
        let keeper = Keeper::start(&sessions)?;
        Ok(ZkRegistry {
            sessions,
            read_only,
            _keeper: keeper,
        })
    }

    /// Stops the session's thread for `pause` (see [`ZkSession::stall`]),
    /// for tests of what follows a session's expiry: a pause longer than
    /// the session timeout loses every entry it held, and a new session
    /// replaces it.
    pub fn stall_session(&self, pause: Duration) {
        self.sessions.now().stall(pause);
    }

    /// Makes the next create of an entry lose its reply, as a connection
    /// that broke after the ensemble applied it does, for tests of the
    /// recovery: the create is looked at again, and adopted as this
    /// session's.
    pub fn lose_next_reply(&self) {
        self.sessions
            .lose_next_reply
            .store(true, std::sync::atomic::Ordering::Release);
    }

    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::Config(format!(
                "the registry {} was opened read-only",
                self.sessions.address
            )));
        }
        Ok(())
    }

    fn deadline(&self) -> Duration {
        self.sessions.deadline
    }

    /// A live session, for a read or a write.
    fn live(&self) -> Result<Arc<ZkSession>> {
        self.sessions.current()
    }

    /// `path` as a path for messages: the address, then the znode.
    fn named(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("{}{path}", self.sessions.address))
    }

    /// The children of `path`; none when it does not exist.
    fn children(&self, path: &str, watched: bool) -> Result<Vec<String>> {
        let session = self.live()?;
        let listed = if watched {
            session.children_watched(path, self.deadline())
        } else {
            session.children(path, self.deadline())
        };
        match listed {
            Err(e) if no_node(&e) => Ok(Vec::new()),
            other => other,
        }
    }

    /// Removes `path` and every znode below it; what is not there is no
    /// error.
    fn remove_tree(&self, path: &str) -> Result<()> {
        for child in self.children(path, false)? {
            self.remove_tree(&format!("{path}/{child}"))?;
        }
        match self.live()?.delete(path, -1, self.deadline()) {
            Err(e) if no_node(&e) => Ok(()),
            other => other,
        }
    }

    /// The data of `path`; `None` when it does not exist.
    fn data(&self, path: &str) -> Result<Option<(Vec<u8>, crate::coord::zk::ZkStat)>> {
        match self.live()?.get(path, self.deadline()) {
            Ok(got) => Ok(Some(got)),
            Err(e) if no_node(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The entries under `path` whose JSON parses (one that vanished or
    /// does not parse is skipped, as the directory backend skips garbage).
    fn entries<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>> {
        let mut out = Vec::new();
        for name in self.children(path, true)? {
            if let Some((bytes, _)) = self.data(&format!("{path}/{name}"))? {
                if let Ok(entry) = serde_json::from_slice(&bytes) {
                    out.push(entry);
                }
            }
        }
        Ok(out)
    }

    /// Creates `path`'s ancestors as persistent znodes.
    fn parents(&self, path: &str) -> Result<()> {
        let parent = &path[..path.rfind('/').unwrap_or(0)];
        self.live()?.create_all(parent, self.deadline())
    }

    /// Creates the ephemeral `path` for a broker or a member; refused
    /// clearly while another live session holds it.
    fn register(&self, path: &str, data: Vec<u8>, kind: Kind, what: String) -> Result<Ephemeral> {
        self.writable()?;
        self.parents(path)?;
        let id = data.clone();
        let created = self
            .sessions
            .create(path, &data, kind, what.clone(), |bytes| same_id(bytes, &id))?;
        created.map_err(|holder| Error::HeldElsewhere {
            what,
            holder: format!("ZooKeeper session {holder:#x}"),
            registry: self.sessions.address.clone(),
        })
    }

    /// The owner znode's path of `topic [partition]` in `group`, its
    /// parents made, and the live session, for a reset or a deletion of
    /// its offset.
    fn reset_owner(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> Result<(String, Arc<ZkSession>)> {
        self.writable()?;
        check_name("group", group)?;
        check_name("topic", topic)?;
        let owner = owner_path(group, topic, partition);
        self.parents(&owner)?;
        Ok((owner, self.live()?))
    }

    /// The error of a reset or deletion of an offset refused while a
    /// member owns its partition.
    fn active(&self, group: &str, topic: &str, partition: u32) -> Error {
        Error::GroupActive {
            group: group.into(),
            members: self
                .owner(group, topic, partition)
                .map_or_else(|| "a member".into(), |o| format!("member {}", o.member)),
        }
    }

    /// The offset write of a `multi`: a set, or a create when `exists` is
    /// false.
    fn offset_op(path: &str, offset: u64, exists: bool) -> ZkOp {
        let data = encode_offset(offset);
        if exists {
            ZkOp::Set {
                path: path.to_string(),
                data,
                version: None,
            }
        } else {
            ZkOp::Create {
                path: path.to_string(),
                data,
                mode: ZkMode::Persistent,
            }
        }
    }

    /// Applies `first`, then the offset's write, then `last`, as one
    /// `multi` in `session`: the write is a set if the offset znode exists
    /// and a create if not, looked at again if another writer raced it.
    fn write_offset(
        &self,
        session: &ZkSession,
        path: &str,
        offset: u64,
        first: &[ZkOp],
        last: &[ZkOp],
    ) -> Result<()> {
        self.parents(path)?;
        let mut exists = session.exists(path, self.deadline())?.is_some();
        for _ in 0..3 {
            let mut ops = first.to_vec();
            ops.push(ZkRegistry::offset_op(path, offset, exists));
            ops.extend_from_slice(last);
            match session.multi(&ops, self.deadline()) {
                Err(Error::ZooKeeper {
                    path: failed,
                    cause: cause @ (ZkCause::NoNode | ZkCause::NodeExists),
                    ..
                }) if failed == path => exists = cause == ZkCause::NodeExists,
                other => return other,
            }
        }
        Err(Error::Vanished {
            what: format!("the committed offset {path} (created and removed again and again)"),
        })
    }
}

/// Whether an entry's JSON names the same id as `ours` does (its `id` or
/// `member`): the same holder's entry.
fn same_id(bytes: &[u8], ours: &[u8]) -> bool {
    let id = |b: &[u8]| {
        let v: serde_json::Value = serde_json::from_slice(b).ok()?;
        let id = v.get("id").or_else(|| v.get("member"))?;
        Some(id.as_str()?.to_string())
    };
    id(bytes).is_some_and(|a| id(ours) == Some(a))
}

fn owner_path(group: &str, topic: &str, partition: u32) -> String {
    format!("/consumers/{group}/owners/{topic}/{partition}")
}

/// The ops that take the partition's owner znode for the moment of a reset
/// or a deletion of its offset (failing with NodeExists while a member
/// owns it), and give it back, in the same `multi`.
fn reset_claim(owner: &str) -> (ZkOp, ZkOp) {
    let claim = ZkOp::Create {
        path: owner.to_string(),
        data: RESET_MEMBER.as_bytes().to_vec(),
        mode: ZkMode::Ephemeral,
    };
    let release = ZkOp::Delete {
        path: owner.to_string(),
        version: None,
    };
    (claim, release)
}

fn offset_path(group: &str, topic: &str, partition: u32) -> String {
    format!("/consumers/{group}/offsets/{topic}/{partition}")
}

fn state_path(topic: &str, partition: u32) -> String {
    format!("/brokers/topics/{topic}/partitions/{partition}/state")
}

impl Registry for ZkRegistry {
    fn location(&self) -> String {
        self.sessions.address.clone()
    }

    fn cluster_id(&self) -> Result<String> {
        cluster_id::read_or_make(self)
    }

    fn register_broker(&self, info: &BrokerInfo) -> Result<Ephemeral> {
        check_name("broker", &info.id)?;
        let path = format!("/brokers/ids/{}", info.id);
        let what = format!("broker {}", info.id);
        self.register(&path, to_json(info)?, Kind::Broker, what)
    }

    fn brokers(&self) -> Result<Vec<BrokerInfo>> {
        self.entries("/brokers/ids")
    }

    fn join(&self, group: &str, info: &MemberInfo, _timeout: Duration) -> Result<Ephemeral> {
        check_name("group", group)?;
        check_name("member", &info.member)?;
        let path = format!("/consumers/{group}/ids/{}", info.member);
        let what = format!("member {} of group {group}", info.member);
        self.register(&path, to_json(info)?, Kind::Member, what)
    }

    fn sessions(&self, group: &str) -> Result<Vec<(MemberInfo, Lease)>> {
        check_name("group", group)?;
        let lease = Lease {
            timeout: self.live()?.session_timeout(),
            age: Duration::ZERO,
        };
        let members: Vec<MemberInfo> = self.entries(&format!("/consumers/{group}/ids"))?;
        Ok(members.into_iter().map(|m| (m, lease)).collect())
    }

    fn groups(&self) -> Result<Vec<String>> {
        self.children("/consumers", false)
    }

    fn claim(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        member: &str,
        _timeout: Duration,
    ) -> Result<Option<Ephemeral>> {
        self.writable()?;
        check_name("group", group)?;
        check_name("topic", topic)?;
        let path = owner_path(group, topic, partition);
        self.parents(&path)?;
        let what = format!("the claim of {topic} [{partition}] in group {group}");
        let created =
            self.sessions
                .create(&path, member.as_bytes(), Kind::Owner, what, |bytes| {
                    bytes == member.as_bytes()
                })?;
        Ok(created.ok())
    }

    fn owner(&self, group: &str, topic: &str, partition: u32) -> Option<Owner> {
        let (bytes, stat) = self
            .data(&owner_path(group, topic, partition))
            .ok()
            .flatten()?;
        Some(Owner {
            member: String::from_utf8_lossy(&bytes).into_owned(),
            generation: u64::try_from(stat.created_zxid).unwrap_or(0),
            lease: Lease {
                timeout: self.sessions.session_timeout,
                age: Duration::ZERO,
            },
        })
    }

    fn committed(&self, group: &str, topic: &str, partition: u32) -> Result<Option<u64>> {
        check_name("group", group)?;
        let path = offset_path(group, topic, partition);
        match self.data(&path)? {
            Some((bytes, _)) => parse_offset(self.named(&path), &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn store_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        offset: u64,
        owner: &Ephemeral,
    ) -> Result<()> {
        self.writable()?;
        let path = owner_path(group, topic, partition);
        let entry = match owner.held().as_any().downcast_ref::<ZkHeld>() {
            Some(held) if held.0.path == path => &held.0,
            _ => {
                return Err(Error::Config(format!(
                    "a commit of {topic} [{partition}] in group {group} with another entry's handle"
                )))
            }
        };
        // The claiming session sends the multi: once it is lost, the
        // ensemble refuses it whatever the check would say.
        let (session, version) = entry.session()?;
        let check = [ZkOp::Check {
            path: path.clone(),
            version,
        }];
        let written = self.write_offset(
            &session,
            &offset_path(group, topic, partition),
            offset,
            &check,
            &[],
        );
        match written {
            Err(Error::ZooKeeper {
                path: failed,
                cause: ZkCause::NoNode | ZkCause::BadVersion,
                ..
            }) if failed == path => Err(Error::Fenced {
                what: entry.what.clone(),
                generation: owner.generation(),
                current: self
                    .owner(group, topic, partition)
                    .map_or(0, |o| o.generation),
            }),
            Err(Error::ZooKeeper {
                cause: ZkCause::SessionExpired | ZkCause::Closed,
                ..
            }) => Err(Error::SessionLost {
                what: entry.what.clone(),
                registry: self.location(),
            }),
            other => other,
        }
    }

    fn reset_offset(&self, group: &str, topic: &str, partition: u32, offset: u64) -> Result<()> {
        let (owner, session) = self.reset_owner(group, topic, partition)?;
        let (claim, release) = reset_claim(&owner);
        let (claim, release) = ([claim], [release]);
        let path = offset_path(group, topic, partition);
        match self.write_offset(&session, &path, offset, &claim, &release) {
            Err(Error::ZooKeeper {
                path: failed,
                cause: ZkCause::NodeExists,
                ..
            }) if failed == owner => Err(self.active(group, topic, partition)),
            other => other,
        }
    }

    fn delete_offset(&self, group: &str, topic: &str, partition: u32) -> Result<bool> {
        let (owner, session) = self.reset_owner(group, topic, partition)?;
        let path = offset_path(group, topic, partition);
        // The owner znode for the moment of the deletion, as a reset takes
        // it: refused while a member owns the partition.
        let (claim, release) = reset_claim(&owner);
        let delete = ZkOp::Delete {
            path: path.clone(),
            version: None,
        };
        let ops = [claim, delete, release];
        match session.multi(&ops, self.deadline()) {
            Ok(()) => Ok(true),
            Err(Error::ZooKeeper {
                path: failed,
                cause: ZkCause::NoNode,
                ..
            }) if failed == path => Ok(false),
            Err(Error::ZooKeeper {
                path: failed,
                cause: ZkCause::NodeExists,
                ..
            }) if failed == owner => Err(self.active(group, topic, partition)),
            Err(e) => Err(e),
        }
    }

    fn offsets(&self, group: &str) -> Result<Vec<(String, u32, Result<u64>)>> {
        check_name("group", group)?;
        let base = format!("/consumers/{group}/offsets");
        let mut out = Vec::new();
        for topic in self.children(&base, false)? {
            for name in self.children(&format!("{base}/{topic}"), false)? {
                let Ok(partition) = name.parse::<u32>() else {
                    continue;
                };
                let path = format!("{base}/{topic}/{name}");
                if let Some((bytes, _)) = self.data(&path)? {
                    let offset = parse_offset(self.named(&path), &bytes);
                    out.push((topic.clone(), partition, offset));
                }
            }
        }
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        Ok(out)
    }

    fn placement(&self, topic: &str) -> Result<Option<Placement>> {
        check_name("topic", topic)?;
        let path = format!("/brokers/topics/{topic}");
        match self.data(&path)? {
            Some((bytes, _)) => parse_placement(self.named(&path), topic, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn create_placement(&self, placement: &Placement) -> Result<bool> {
        self.writable()?;
        check_name("topic", &placement.topic)?;
        let path = format!("/brokers/topics/{}", placement.topic);
        self.parents(&path)?;
        let bytes = to_json(placement)?;
        let session = self.live()?;
        match session.create(&path, &bytes, ZkMode::Persistent, self.deadline()) {
            Ok(_) => Ok(true),
            // A lost reply: the placement that holds is read back.
            Err(Error::ZooKeeper {
                cause: ZkCause::NodeExists | ZkCause::ConnectionLoss(_),
                ..
            }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn replace_placement(&self, old: &Placement, new: &Placement) -> Result<bool> {
        self.writable()?;
        check_name("topic", &old.topic)?;
        let path = format!("/brokers/topics/{}", old.topic);
        let Some((bytes, stat)) = self.data(&path)? else {
            return Ok(false);
        };
        let stored = parse_placement(self.named(&path), &old.topic, &bytes)?;
        if stored != *old || new.topic != old.topic {
            return Ok(false);
        }
        let session = self.live()?;
        match session.set(&path, &to_json(new)?, stat.version, self.deadline()) {
            Ok(_) => Ok(true),
            Err(Error::ZooKeeper {
                cause: ZkCause::NoNode | ZkCause::BadVersion,
                ..
            }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn config(&self, kind: &str, name: &str) -> Result<Option<Vec<u8>>> {
        check_name("configuration entry", name)?;
        Ok(self
            .data(&format!("/config/{kind}/{name}"))?
            .map(|(b, _)| b))
    }

    fn set_config(&self, kind: &str, name: &str, bytes: &[u8]) -> Result<()> {
        self.writable()?;
        check_name("configuration entry", name)?;
        let path = format!("/config/{kind}/{name}");
        self.parents(&path)?;
        let session = self.live()?;
        match session.create(&path, bytes, ZkMode::Persistent, self.deadline()) {
            Ok(_) => Ok(()),
            Err(Error::ZooKeeper {
                cause: ZkCause::NodeExists,
                ..
            }) => session.set(&path, bytes, -1, self.deadline()).map(|_| ()),
            Err(e) => Err(e),
        }
    }

    fn update_config(
        &self,
        kind: &str,
        name: &str,
        change: crate::coord::registry::ConfigChange<'_>,
    ) -> Result<()> {
        self.writable()?;
        check_name("configuration entry", name)?;
        let path = format!("/config/{kind}/{name}");
        self.parents(&path)?;
        // Each try reads the entry and its version, and writes only if
        // the version is still the one read; another writer in between
        // makes it read and change again.
        for _ in 0..CONFIG_TRIES {
            let read = self.data(&path)?;
            let next = change(read.as_ref().map(|(b, _)| b.as_slice()))?;
            let session = self.live()?;
            let done = match (read, next) {
                (None, None) => return Ok(()),
                (None, Some(bytes)) => session
                    .create(&path, &bytes, ZkMode::Persistent, self.deadline())
                    .map(drop),
                (Some((_, stat)), Some(bytes)) => session
                    .set(&path, &bytes, stat.version, self.deadline())
                    .map(drop),
                (Some((_, stat)), None) => session.delete(&path, stat.version, self.deadline()),
            };
            match done {
                Ok(()) => return Ok(()),
                Err(Error::ZooKeeper {
                    cause: ZkCause::NodeExists | ZkCause::NoNode | ZkCause::BadVersion,
                    ..
                }) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::Config(format!(
            "{path} changed under {CONFIG_TRIES} changes in a row: try again"
        )))
    }

    fn remove_config(&self, kind: &str, name: &str) -> Result<bool> {
        self.writable()?;
        check_name("configuration entry", name)?;
        match self
            .live()?
            .delete(&format!("/config/{kind}/{name}"), -1, self.deadline())
        {
            Ok(()) => Ok(true),
            Err(e) if no_node(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn configs(&self, kind: &str) -> Result<Vec<String>> {
        let mut names = self.children(&format!("/config/{kind}"), false)?;
        names.retain(|n| check_name("configuration entry", n).is_ok());
        names.sort();
        Ok(names)
    }

    fn topics(&self) -> Result<Vec<String>> {
        let mut topics = self.children("/brokers/topics", false)?;
        topics.retain(|t| check_name("topic", t).is_ok());
        Ok(topics)
    }

    fn remove_topic(&self, topic: &str) -> Result<()> {
        self.writable()?;
        check_name("topic", topic)?;
        // ZooKeeper removes a znode without children only: the states go
        // first, the placement last (a state made meanwhile is removed by
        // the next try).
        let root = format!("/brokers/topics/{topic}");
        let mut tries = 0;
        loop {
            match self.remove_tree(&root) {
                Err(Error::ZooKeeper {
                    cause: ZkCause::NotEmpty,
                    ..
                }) if tries < CONFIG_TRIES => tries += 1,
                other => break other?,
            }
        }
        self.remove_config(crate::coord::topic_config::KIND, topic)?;
        Ok(())
    }

    fn partition_state(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<Option<(PartitionState, u64)>> {
        check_name("topic", topic)?;
        let path = state_path(topic, partition);
        let Some((bytes, stat)) = self.data(&path)? else {
            return Ok(None);
        };
        let state = parse_state(self.named(&path), &bytes)?;
        Ok(Some((state, u64::try_from(stat.version).unwrap_or(0))))
    }

    fn create_partition_state(
        &self,
        topic: &str,
        partition: u32,
        state: &PartitionState,
    ) -> Result<bool> {
        self.writable()?;
        check_name("topic", topic)?;
        let bytes = encode_state(state)?;
        // The placement znode exists: the parents made here are below it.
        placed_partition(self, topic, partition)?;
        let path = state_path(topic, partition);
        self.parents(&path)?;
        match self
            .live()?
            .create(&path, &bytes, ZkMode::Persistent, self.deadline())
        {
            Ok(_) => Ok(true),
            Err(Error::ZooKeeper {
                cause: ZkCause::NodeExists,
                ..
            }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn set_partition_state(
        &self,
        topic: &str,
        partition: u32,
        state: &PartitionState,
        expected_version: u64,
    ) -> Result<bool> {
        self.writable()?;
        check_name("topic", topic)?;
        let bytes = encode_state(state)?;
        // A version past a znode's can never be its version.
        let Ok(version) = i32::try_from(expected_version) else {
            return Ok(false);
        };
        let path = state_path(topic, partition);
        match self.live()?.set(&path, &bytes, version, self.deadline()) {
            Ok(_) => Ok(true),
            Err(Error::ZooKeeper {
                cause: ZkCause::BadVersion,
                ..
            }) => Ok(false),
            Err(e) if no_node(&e) => Err(Error::Config(format!(
                "partition {partition} of {topic:?} has no state to change in {} (create it first)",
                self.location()
            ))),
            Err(e) => Err(e),
        }
    }

    fn session(&self) -> SessionState {
        self.sessions.state()
    }

    fn changes(&self) -> u64 {
        self.sessions.changes()
    }
}
