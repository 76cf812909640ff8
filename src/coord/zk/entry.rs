//! The ephemeral entries of the ZooKeeper backend (brokers, members,
//! owners) and the session they live in: the one session of a process,
//! renewed when it is lost, and the keeper thread that re-registers the
//! process's brokers in the new one and retries the deletes a broken
//! connection left undone.
//!
//! An entry is an ephemeral znode created by this process's session. Its
//! handle remembers the session it was created in: once that session is
//! lost, a member's or an owner's handle says so at its next renewal (the
//! znode is gone, others may hold what it held), while a broker's entry is
//! created again in the new session by the keeper. A create whose reply was
//! lost (the connection broke) is recognised afterwards by the znode's
//! owner session being ours, and adopted; a znode another live session owns
//! is never touched.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::coord::registry::{Ephemeral, Held, SessionState};
use crate::coord::zk::{ZkMode, ZkSession, ZkState, ZkWatches};
use crate::error::{Error, Result, ZkCause};
use crate::sync::lock;

/// How often the keeper looks at the session.
const KEEPER_TICK: Duration = Duration::from_millis(100);
/// The longest a handle's drop waits to delete its znode.
const DROP_DEADLINE: Duration = Duration::from_secs(2);
/// How many times a create looks again when its znode came and went
/// between the create and the read (a bound against a storm).
const CREATE_RETRIES_MAX: u32 = 10;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A broker: created again in each new session while its handle lives.
    Broker,
    /// A group member: lost with its session.
    Member,
    /// A partition's owner: lost with its session; its generation is the
    /// zxid that created it.
    Owner,
}

/// The session every call of a registry goes through, with what the
/// process holds in it.
#[derive(Debug)]
pub(super) struct Sessions {
    /// The address, as given.
    pub(super) address: String,
    pub(super) session_timeout: Duration,
    /// Each call's deadline.
    pub(super) deadline: Duration,
    /// Whether to create the chroot when a session opens.
    create_chroot: bool,
    /// Bumped by every watch and every change of connection, across
    /// sessions.
    changes: Arc<AtomicU64>,
    session: Mutex<Arc<ZkSession>>,
    /// The live handles of this process, by path.
    live: Mutex<HashMap<String, Weak<Entry>>>,
    /// Deletes a broken connection left undone (or whose reply it lost):
    /// (path, session, zxid that created the znode meant).
    doomed: Mutex<Vec<(String, i64, i64)>>,
    /// The next create's reply is lost (a fault for tests).
    pub(super) lose_next_reply: AtomicBool,
}

impl Sessions {
    /// Opens the first session.
    pub(super) fn open(
        address: &str,
        session_timeout: Duration,
        create_chroot: bool,
    ) -> Result<Arc<Sessions>> {
        let deadline = session_timeout.max(Duration::from_secs(2));
        let changes = Arc::new(AtomicU64::new(0));
        let watches = ZkWatches::new(Arc::clone(&changes));
        let session =
            ZkSession::connect_with(address, session_timeout, deadline, watches, create_chroot)?;
        Ok(Arc::new(Sessions {
            address: address.to_string(),
            session_timeout,
            deadline,
            create_chroot,
            changes,
            session: Mutex::new(Arc::new(session)),
            live: Mutex::default(),
            doomed: Mutex::default(),
            lose_next_reply: AtomicBool::new(false),
        }))
    }

    /// The session now, which may be lost.
    pub(super) fn now(&self) -> Arc<ZkSession> {
        Arc::clone(&lock(&self.session))
    }

    /// A live session: the current one, or a new one when it was lost
    /// (whose brokers the keeper registers again).
    pub(super) fn current(&self) -> Result<Arc<ZkSession>> {
        let mut session = lock(&self.session);
        if session.state() == ZkState::Ended {
            let watches = ZkWatches::new(Arc::clone(&self.changes));
            let fresh = ZkSession::connect_with(
                &self.address,
                self.session_timeout,
                self.deadline,
                watches,
                self.create_chroot,
            )?;
            *session = Arc::new(fresh);
            self.changes.fetch_add(1, Ordering::AcqRel);
        }
        Ok(Arc::clone(&session))
    }

    /// The state of the session, as a member acts on it. Connected is not
    /// enough for alive: a process stopped (SIGSTOP) past its session
    /// timeout still sees its old connection for a moment after it runs
    /// again. So when the ensemble has answered nothing for a third of the
    /// session timeout (its own ping interval), it is asked first.
    pub(super) fn state(&self) -> SessionState {
        let session = self.now();
        match session.state() {
            ZkState::Connected if session.last_answer().elapsed() < self.session_timeout / 3 => {
                SessionState::Alive
            }
            ZkState::Connected => match session.confirm(self.session_timeout / 3) {
                Ok(()) => SessionState::Alive,
                Err(Error::ZooKeeper {
                    cause: ZkCause::SessionExpired | ZkCause::Closed,
                    ..
                }) => SessionState::Lost,
                Err(_) if session.state() == ZkState::Ended => SessionState::Lost,
                Err(_) => SessionState::Suspended,
            },
            ZkState::Disconnected => SessionState::Suspended,
            ZkState::Ended => SessionState::Lost,
        }
    }

    /// The count of changes seen.
    pub(super) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Creates the ephemeral `path` holding `data` for a handle of `kind`
    /// named `what`: `None` when another live session holds it, or this
    /// process holds it under another handle. A znode of this session that
    /// no handle holds (a create whose reply was lost, a delete that did
    /// not go through) is adopted when `ours` says its data is this
    /// holder's.
    pub(super) fn create(
        self: &Arc<Self>,
        path: &str,
        data: &[u8],
        kind: Kind,
        what: String,
        ours: impl Fn(&[u8]) -> bool,
    ) -> Result<std::result::Result<Ephemeral, i64>> {
        self.flush_doomed();
        let session = self.current()?;
        let held_here = lock(&self.live)
            .get(path)
            .is_some_and(|e| e.strong_count() > 0);
        if held_here {
            return Ok(Err(session.session_id()));
        }
        for _ in 0..CREATE_RETRIES_MAX {
            let mut made = session.create(path, data, ZkMode::Ephemeral, self.deadline);
            if made.is_ok() && self.lose_next_reply.swap(false, Ordering::AcqRel) {
                made = Err(Error::ZooKeeper {
                    op: "create",
                    path: path.to_string(),
                    cause: ZkCause::ConnectionLoss("a lost reply (a fault for tests)".into()),
                });
            }
            let stat = match made {
                Ok(stat) => stat,
                Err(Error::ZooKeeper {
                    cause: ZkCause::NodeExists | ZkCause::ConnectionLoss(_),
                    ..
                }) => match session.get(path, self.deadline) {
                    Ok((bytes, stat))
                        if stat.ephemeral_owner == session.session_id() && ours(&bytes) =>
                    {
                        stat
                    }
                    Ok((_, stat)) => return Ok(Err(stat.ephemeral_owner)),
                    Err(Error::ZooKeeper {
                        cause: ZkCause::NoNode,
                        ..
                    }) => continue,
                    Err(e) => return Err(e),
                },
                Err(e) => return Err(e),
            };
            let entry = Arc::new(Entry {
                sessions: Arc::downgrade(self),
                path: path.to_string(),
                kind,
                what,
                generation: u64::try_from(stat.created_zxid).unwrap_or(0),
                held: Mutex::new(Incarnation {
                    session_id: session.session_id(),
                    version: stat.version,
                    created_zxid: stat.created_zxid,
                    said_held_by: 0,
                    data: data.to_vec(),
                }),
            });
            lock(&self.live).insert(path.to_string(), Arc::downgrade(&entry));
            // A delete still owed to an earlier znode at this path must not
            // remove this one.
            lock(&self.doomed).retain(|(doomed, _, _)| doomed != path);
            return Ok(Ok(Ephemeral::new(ZkHeld(entry))));
        }
        Err(Error::Vanished {
            what: format!("{path} (created and removed again and again)"),
        })
    }

    /// Retries the deletes a broken connection left undone, in the
    /// session they were meant for (a lost one took its znodes along). A
    /// delete whose first try went through with its reply lost must not
    /// remove the next holder's znode: only the very znode meant (this
    /// session's, created by the same zxid) is deleted, and once this
    /// session owns it, nobody else can replace it in between.
    fn flush_doomed(&self) {
        let doomed = std::mem::take(&mut *lock(&self.doomed));
        if doomed.is_empty() {
            return;
        }
        let session = self.now();
        let mut left = Vec::new();
        let broken = |e: &Error| {
            matches!(
                e,
                Error::ZooKeeper {
                    cause: ZkCause::ConnectionLoss(_) | ZkCause::Deadline { .. },
                    ..
                }
            )
        };
        for (path, session_id, created) in doomed {
            if session.session_id() != session_id || session.state() == ZkState::Ended {
                continue;
            }
            let stat = match session.exists(&path, DROP_DEADLINE) {
                Ok(Some(stat))
                    if stat.ephemeral_owner == session_id && stat.created_zxid == created =>
                {
                    stat
                }
                Err(e) if broken(&e) => {
                    left.push((path, session_id, created));
                    continue;
                }
                _ => continue,
            };
            match session.delete(&path, stat.version, DROP_DEADLINE) {
                Err(e) if broken(&e) => left.push((path, session_id, created)),
                _ => {}
            }
        }
        lock(&self.doomed).extend(left);
    }

    /// Whether a broker entry of this process lives.
    fn has_brokers(&self) -> bool {
        let live = lock(&self.live);
        live.values()
            .filter_map(Weak::upgrade)
            .any(|e| e.kind == Kind::Broker)
    }

    /// Registers again, in the current session, every live broker entry
    /// of a lost one. A broker id another live session took meanwhile is
    /// left to it (and said on stderr once per holder).
    fn reregister_brokers(&self) {
        let session = self.now();
        if session.state() != ZkState::Connected {
            return;
        }
        let brokers: Vec<Arc<Entry>> = lock(&self.live)
            .values()
            .filter_map(Weak::upgrade)
            .filter(|e| e.kind == Kind::Broker)
            .collect();
        for entry in brokers {
            let data = {
                let held = lock(&entry.held);
                if held.session_id == session.session_id() {
                    continue;
                }
                held.data.clone()
            };
            match session.create(&entry.path, &data, ZkMode::Ephemeral, self.deadline) {
                Ok(stat) => {
                    let mut held = lock(&entry.held);
                    held.session_id = session.session_id();
                    held.version = stat.version;
                    held.created_zxid = stat.created_zxid;
                    crate::diag::line(format_args!(
                        "% {} registered again in {} (its session had expired)",
                        entry.what, self.address
                    ));
                }
                Err(Error::ZooKeeper {
                    cause: ZkCause::NodeExists,
                    ..
                }) => {
                    if let Ok((_, stat)) = session.get(&entry.path, self.deadline) {
                        let mut held = lock(&entry.held);
                        if stat.ephemeral_owner == session.session_id() {
                            held.session_id = session.session_id();
                            held.version = stat.version;
                            held.created_zxid = stat.created_zxid;
                        } else if held.said_held_by != stat.ephemeral_owner {
                            held.said_held_by = stat.ephemeral_owner;
                            crate::diag::line(format_args!(
                                "% {} cannot register again in {}: another live session \
                                 ({:#x}) holds its id; it is not in the registry until that one \
                                 ends",
                                entry.what, self.address, stat.ephemeral_owner
                            ));
                        }
                    }
                }
                Err(_) => {}
            }
        }
    }
}

/// A running keeper: renews a lost session, registers the brokers again,
/// retries undone deletes. It ends when its registry is dropped.
#[derive(Debug)]
pub(super) struct Keeper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Keeper {
    /// Starts the keeper of `sessions`.
    pub(super) fn start(sessions: &Arc<Sessions>) -> Result<Keeper> {
        let stop = Arc::new(AtomicBool::new(false));
        let weak = Arc::downgrade(sessions);
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("zookeeper-keeper".into())
            .spawn(move || {
                while !stopping.load(Ordering::Acquire) {
                    std::thread::sleep(KEEPER_TICK);
                    let Some(sessions) = weak.upgrade() else {
                        return;
                    };
                    // A new session for the brokers to register in; members
                    // join a new one themselves, once they let go of what
                    // they held.
                    if sessions.now().state() == ZkState::Ended && sessions.has_brokers() {
                        // A failure is retried at the next tick.
                        let _ = sessions.current();
                    }
                    sessions.reregister_brokers();
                    sessions.flush_doomed();
                }
            })
            .map_err(|reason| Error::Spawn { reason })?;
        Ok(Keeper {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The session and version an entry's znode has now.
#[derive(Debug)]
struct Incarnation {
    session_id: i64,
    version: i32,
    /// The zxid that created the znode: which znode of the path it is.
    created_zxid: i64,
    /// The other session last said to hold a broker's id (said once).
    said_held_by: i64,
    /// Its data, to create it again in a new session (a broker).
    data: Vec<u8>,
}

/// A live entry of this process.
#[derive(Debug)]
pub(super) struct Entry {
    sessions: Weak<Sessions>,
    pub(super) path: String,
    kind: Kind,
    /// For messages: "broker 1", "member m of group g".
    pub(super) what: String,
    generation: u64,
    held: Mutex<Incarnation>,
}

impl Entry {
    /// The session of this entry, if it is the registry's current one and
    /// not lost: else the error its holder acts on.
    pub(super) fn session(&self) -> Result<(Arc<ZkSession>, i32)> {
        let sessions = self
            .sessions
            .upgrade()
            .ok_or_else(|| self.lost("(closed)"))?;
        let session = sessions.now();
        let held = lock(&self.held);
        if session.session_id() != held.session_id || session.state() == ZkState::Ended {
            return Err(self.lost(&sessions.address));
        }
        Ok((session, held.version))
    }

    fn lost(&self, registry: &str) -> Error {
        Error::SessionLost {
            what: self.what.clone(),
            registry: registry.to_string(),
        }
    }
}

/// The handle of an entry: the znode lives while it does.
#[derive(Debug)]
pub(super) struct ZkHeld(pub(super) Arc<Entry>);

impl Held for ZkHeld {
    fn update(&self, json: &[u8]) -> Result<()> {
        if self.0.kind == Kind::Owner {
            return Ok(());
        }
        lock(&self.0.held).data = json.to_vec();
        let Ok((session, version)) = self.0.session() else {
            // Not registered now: the keeper registers it with this data.
            return Ok(());
        };
        let Some(sessions) = self.0.sessions.upgrade() else {
            return Ok(());
        };
        let stat = session.set(&self.0.path, json, version, sessions.deadline)?;
        lock(&self.0.held).version = stat.version;
        Ok(())
    }

    fn renew(&self) -> Result<()> {
        match self.0.kind {
            // Registered again by the keeper when its session is lost.
            Kind::Broker => Ok(()),
            Kind::Member | Kind::Owner => self.0.session().map(drop),
        }
    }

    fn generation(&self) -> u64 {
        match self.0.kind {
            Kind::Owner => self.0.generation,
            Kind::Broker | Kind::Member => 0,
        }
    }

    fn current(&self) -> bool {
        self.0.kind == Kind::Broker || self.0.session().is_ok()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for ZkHeld {
    fn drop(&mut self) {
        let entry = &self.0;
        let Some(sessions) = entry.sessions.upgrade() else {
            return;
        };
        {
            let mut live = lock(&sessions.live);
            if live
                .get(&entry.path)
                .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(entry)))
            {
                live.remove(&entry.path);
            }
        }
        let Ok((session, version)) = entry.session() else {
            // Its session is gone, and the znode with it.
            return;
        };
        let held_id = session.session_id();
        let deleted = match session.state() {
            ZkState::Connected => session.delete(&entry.path, version, DROP_DEADLINE),
            _ => Err(Error::ZooKeeper {
                op: "delete",
                path: entry.path.clone(),
                cause: ZkCause::ConnectionLoss("disconnected".into()),
            }),
        };
        if let Err(Error::ZooKeeper {
            cause: ZkCause::ConnectionLoss(_) | ZkCause::Deadline { .. },
            ..
        }) = deleted
        {
            // Still ours while the session lives: delete it once the
            // connection is back (the keeper, or the next create).
            let created = lock(&entry.held).created_zxid;
            lock(&sessions.doomed).push((entry.path.clone(), held_id, created));
        }
    }
}
