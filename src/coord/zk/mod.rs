//! A blocking session with a ZooKeeper ensemble, for the registry's
//! ZooKeeper backend.
//!
//! The client is [`zookeeper_client`] (asynchronous). The rest of klog runs
//! on std threads, so a [`ZkSession`] owns one background thread driving a
//! current-thread tokio runtime, and each call hands a future to it and
//! waits for the answer, never longer than the deadline the caller gives.
//!
//! # Address
//!
//! `zk://HOST:PORT[,HOST:PORT...]/CHROOT`, parsed by [`ZkAddress::parse`]:
//! the servers of the ensemble, then the znode under which every path of
//! the session lives. The chroot is created (with `mkdir -p` semantics, as
//! persistent znodes) when the session opens, so a fresh ensemble needs no
//! preparation.
//!
//! # Lifetime
//!
//! Dropping a [`ZkSession`] closes the ZooKeeper session, so its ephemeral
//! znodes vanish at once, and only then stops the runtime thread: a
//! runtime stopped first would leave the session open on the server, and
//! its ephemerals would linger for a whole session timeout. Both waits are
//! bounded ([`CLOSE_WAIT`]).

mod entry;
mod registry;

pub use registry::ZkRegistry;

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use crate::error::{Error, Result, ZkCause};

/// How long dropping a session waits for the server to confirm the close,
/// and then for the runtime thread to end.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// How often a waiting call looks whether the process is stopping.
const STOP_LOOK: Duration = Duration::from_millis(50);
/// The least a call waits once the process is stopping: enough for a
/// server that answers.
const STOP_WAIT_MIN: Duration = Duration::from_millis(200);

/// The parts of a `zk://` address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkAddress {
    /// The servers, as `host:port` joined by commas.
    pub hosts: String,
    /// The chroot: an absolute znode path, not `/` itself.
    pub chroot: String,
}

impl ZkAddress {
    /// Parses `zk://HOST:PORT[,HOST:PORT...]/CHROOT`. Every server needs a
    /// port, and the chroot is required (klog's tree never sits at the
    /// root of an ensemble other programs share).
    pub fn parse(address: &str) -> Result<ZkAddress> {
        let bad =
            |why: &str| Error::Config(format!("invalid ZooKeeper address {address:?}: {why}"));
        let rest = address
            .strip_prefix("zk://")
            .ok_or_else(|| bad("it must start with zk://"))?;
        let (hosts, chroot) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => return Err(bad("a chroot is missing, as in zk://127.0.0.1:2181/klog")),
        };
        if hosts.is_empty() {
            return Err(bad("no server is named, as in zk://127.0.0.1:2181/klog"));
        }
        for host in hosts.split(',') {
            let port = host
                .rsplit_once(':')
                .map(|(name, port)| (name, port.parse::<u16>()));
            match port {
                Some((name, Ok(port))) if !name.is_empty() && port > 0 => {}
                _ => return Err(bad(&format!("server {host:?} is not HOST:PORT"))),
            }
        }
        if chroot == "/" {
            return Err(bad("a chroot is missing, as in zk://127.0.0.1:2181/klog"));
        }
        for part in chroot[1..].split('/') {
            if part.is_empty() || part == "." || part == ".." || part.contains('\0') {
                return Err(bad(&format!(
                    "the chroot {chroot:?} has an empty, . or .. part"
                )));
            }
        }
        Ok(ZkAddress {
            hosts: hosts.to_string(),
            chroot: chroot.to_string(),
        })
    }
}

impl fmt::Display for ZkAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "zk://{}{}", self.hosts, self.chroot)
    }
}

/// Whether a created znode outlives the session that created it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZkMode {
    /// Stays until it is deleted.
    Persistent,
    /// Vanishes when the session that created it closes or expires.
    Ephemeral,
}

/// What ZooKeeper says about a znode, the part klog uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZkStat {
    /// The data's version: 0 at creation, one more at each set.
    pub version: i32,
    /// The session that owns an ephemeral znode; 0 for a persistent one.
    pub ephemeral_owner: i64,
    /// The zxid of the transaction that created the znode.
    pub created_zxid: i64,
    /// The zxid of the transaction that last set its data.
    pub modified_zxid: i64,
    /// How many children it has.
    pub children: i32,
}

impl From<&zk::Stat> for ZkStat {
    fn from(stat: &zk::Stat) -> ZkStat {
        ZkStat {
            version: stat.version,
            ephemeral_owner: stat.ephemeral_owner,
            created_zxid: stat.czxid,
            modified_zxid: stat.mzxid,
            children: stat.num_children,
        }
    }
}

/// A session's state, as klog acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZkState {
    /// Connected to a server of the ensemble: the session is confirmed.
    Connected,
    /// Not connected: the session may still live on the ensemble, or may
    /// have expired there without this client knowing yet.
    Disconnected,
    /// Expired, closed, or refused: its ephemerals are gone, and no call
    /// on it can succeed any more.
    Ended,
}

/// One operation of a [`ZkSession::multi`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZkOp {
    /// Passes only if `path`'s version is `version`.
    Check {
        /// The znode.
        path: String,
        /// Its expected version.
        version: i32,
    },
    /// Creates `path` holding `data`.
    Create {
        /// The znode; its parent must exist.
        path: String,
        /// Its data.
        data: Vec<u8>,
        /// Persistent or ephemeral.
        mode: ZkMode,
    },
    /// Replaces `path`'s data, if its version is `version` (any with `None`).
    Set {
        /// The znode.
        path: String,
        /// Its new data.
        data: Vec<u8>,
        /// Its expected version.
        version: Option<i32>,
    },
    /// Deletes `path`, if its version is `version` (any with `None`).
    Delete {
        /// The znode.
        path: String,
        /// Its expected version.
        version: Option<i32>,
    },
}

impl ZkOp {
    /// The znode the operation concerns.
    pub fn path(&self) -> &str {
        match self {
            ZkOp::Check { path, .. }
            | ZkOp::Create { path, .. }
            | ZkOp::Set { path, .. }
            | ZkOp::Delete { path, .. } => path,
        }
    }
}

/// What a session's watches have seen: a counter bumped by every watch
/// that fires and by every change of the connection (a reconnect may have
/// hidden changes), shared by the successive sessions of one registry;
/// and the paths watched now, so that a path is watched once however often
/// it is read.
#[derive(Debug, Clone, Default)]
pub struct ZkWatches {
    changes: Arc<AtomicU64>,
    armed: Arc<Mutex<HashSet<String>>>,
}

impl ZkWatches {
    /// Watches counting into `changes`.
    pub fn new(changes: Arc<AtomicU64>) -> ZkWatches {
        ZkWatches {
            changes,
            armed: Arc::default(),
        }
    }

    /// The count of changes seen so far.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    fn bump(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
    }
}

/// One session with a ZooKeeper ensemble, under its chroot, with blocking
/// calls. Every path is absolute within the chroot (`/brokers/ids/1`).
pub struct ZkSession {
    address: ZkAddress,
    /// The chrooted client; `None` only while dropping.
    client: Option<zk::Client>,
    watches: ZkWatches,
    runtime: Runtime,
}

impl fmt::Debug for ZkSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkSession")
            .field("address", &self.address.to_string())
            .field("session_id", &format_args!("{:#x}", self.session_id()))
            .finish()
    }
}

impl ZkSession {
    /// Connects to the ensemble of `address` (`zk://HOST:PORT,.../CHROOT`)
    /// with a session that expires after `session_timeout` of silence (the
    /// server may narrow it to its bounds), and creates the chroot if it is
    /// missing. Fails if no server answers within `deadline`.
    pub fn connect(address: &str, session_timeout: Duration, deadline: Duration) -> Result<Self> {
        ZkSession::connect_with(
            address,
            session_timeout,
            deadline,
            ZkWatches::default(),
            true,
        )
    }

    /// [`ZkSession::connect`], counting changes into `watches` (every
    /// change of the connection's state and every watch that fires), and
    /// creating the chroot only if `create_chroot`.
    pub fn connect_with(
        address: &str,
        session_timeout: Duration,
        deadline: Duration,
        watches: ZkWatches,
        create_chroot: bool,
    ) -> Result<Self> {
        let address = ZkAddress::parse(address)?;
        let runtime = Runtime::start()?;
        let hosts = address.hosts.clone();
        let chroot = address.chroot.clone();
        let what = address.to_string();
        let client = runtime.run("connect to", &what, deadline, async move {
            // Each server gets its share of the deadline, so that a first
            // one that drops packets leaves time to try the others.
            let servers = u32::try_from(hosts.split(',').count()).unwrap_or(1).max(1);
            let per_server = (deadline / servers).max(Duration::from_millis(500));
            let client = zk::Client::connector()
                .with_session_timeout(session_timeout)
                .with_connection_timeout(per_server)
                .connect(&hosts)
                .await?;
            if create_chroot {
                client.mkdir(&chroot, &persistent()).await?;
            }
            client
                .chroot(chroot)
                .map_err(|_| zk::Error::BadArguments(&"invalid chroot"))
        });
        let client = client.map_err(|e| match e {
            // The client says only "timeout": say who did not answer.
            Error::ZooKeeper {
                op,
                path,
                cause: ZkCause::ConnectionLoss(_),
            } => Error::ZooKeeper {
                op,
                path,
                cause: ZkCause::ConnectionLoss(format!(
                    "no server answered within {} ms",
                    deadline.as_millis()
                )),
            },
            other => other,
        })?;
        // Every change of the connection counts as a change of the tree:
        // while disconnected, watches may have missed events.
        let mut states = client.state_watcher();
        let counted = watches.clone();
        runtime.handle.spawn(async move {
            loop {
                let state = states.changed().await;
                counted.bump();
                if state.is_terminated() {
                    // The session's watches died with it.
                    crate::sync::lock(&counted.armed).clear();
                    break;
                }
            }
        });
        Ok(ZkSession {
            address,
            client: Some(client),
            watches,
            runtime,
        })
    }

    /// The session's state now.
    pub fn state(&self) -> ZkState {
        match self.client.as_ref().map(zk::Client::state) {
            Some(zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly) => {
                ZkState::Connected
            }
            Some(zk::SessionState::Disconnected) => ZkState::Disconnected,
            _ => ZkState::Ended,
        }
    }

    /// When the ensemble last answered a call of this session (its own
    /// pings aside).
    pub fn last_answer(&self) -> Instant {
        *crate::sync::lock(&self.runtime.answered)
    }

    /// Asks the ensemble something small, to confirm the session is alive
    /// now (a process that was stopped cannot know without asking).
    pub fn confirm(&self, deadline: Duration) -> Result<()> {
        self.exists("/", deadline).map(drop)
    }

    /// The watches this session counts into.
    pub fn watches(&self) -> &ZkWatches {
        &self.watches
    }

    /// The address the session was opened with.
    pub fn address(&self) -> &ZkAddress {
        &self.address
    }

    /// The session's id, as ZooKeeper stores it in the
    /// [`ZkStat::ephemeral_owner`] of the ephemerals it creates.
    pub fn session_id(&self) -> i64 {
        self.client
            .as_ref()
            .map_or(0, |client| client.session_id().0)
    }

    /// The session timeout the server granted.
    pub fn session_timeout(&self) -> Duration {
        self.client
            .as_ref()
            .map_or(Duration::ZERO, zk::Client::session_timeout)
    }

    fn client(&self) -> zk::Client {
        self.client.clone().expect("the client lives until drop")
    }

    /// Creates the znode `path` holding `data`; its parent must exist.
    pub fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: ZkMode,
        deadline: Duration,
    ) -> Result<ZkStat> {
        let (client, owned, data) = (self.client(), path.to_string(), data.to_vec());
        self.runtime.run("create", path, deadline, async move {
            let (stat, _) = client.create(&owned, &data, &options_of(mode)).await?;
            Ok(ZkStat::from(&stat))
        })
    }

    /// Creates `path` and every missing ancestor as persistent znodes with
    /// no data; an existing one is left as it is.
    pub fn create_all(&self, path: &str, deadline: Duration) -> Result<()> {
        let (client, owned) = (self.client(), path.to_string());
        self.runtime.run("create", path, deadline, async move {
            client.mkdir(&owned, &persistent()).await
        })
    }

    /// The data of `path` and its stat.
    pub fn get(&self, path: &str, deadline: Duration) -> Result<(Vec<u8>, ZkStat)> {
        let (client, owned) = (self.client(), path.to_string());
        self.runtime.run("get", path, deadline, async move {
            let (data, stat) = client.get_data(&owned).await?;
            Ok((data, ZkStat::from(&stat)))
        })
    }

    /// Replaces the data of `path` if its version is still `version`
    /// (otherwise [`ZkCause::BadVersion`]), returning the new stat.
    pub fn set(&self, path: &str, data: &[u8], version: i32, deadline: Duration) -> Result<ZkStat> {
        let (client, owned, data) = (self.client(), path.to_string(), data.to_vec());
        self.runtime.run("set", path, deadline, async move {
            let stat = client.set_data(&owned, &data, Some(version)).await?;
            Ok(ZkStat::from(&stat))
        })
    }

    /// Deletes `path` if its version is still `version` (otherwise
    /// [`ZkCause::BadVersion`]) and it has no children.
    pub fn delete(&self, path: &str, version: i32, deadline: Duration) -> Result<()> {
        let (client, owned) = (self.client(), path.to_string());
        self.runtime.run("delete", path, deadline, async move {
            client.delete(&owned, Some(version)).await
        })
    }

    /// The names of the children of `path`, sorted.
    pub fn children(&self, path: &str, deadline: Duration) -> Result<Vec<String>> {
        let (client, owned) = (self.client(), path.to_string());
        let mut names = self
            .runtime
            .run("list children of", path, deadline, async move {
                client.list_children(&owned).await
            })?;
        names.sort();
        Ok(names)
    }
}

impl ZkSession {
    /// Stops the session's thread for `pause`, as a stopped process is
    /// stopped (SIGSTOP), for tests of what follows: no ping reaches the
    /// ensemble meanwhile, so a pause longer than the session timeout
    /// expires the session, which the client learns once it runs again.
    /// Returns at once.
    pub fn stall(&self, pause: Duration) {
        self.runtime
            .handle
            .spawn(async move { std::thread::sleep(pause) });
    }

    /// The names of the children of `path`, sorted, and a watch on them
    /// armed by the same read (unless one is armed already): when a child
    /// comes or goes, the session's change count moves. A missing `path`
    /// is [`ZkCause::NoNode`], and its creation is watched.
    pub fn children_watched(&self, path: &str, deadline: Duration) -> Result<Vec<String>> {
        let armed = !crate::sync::lock(&self.watches.armed).insert(path.to_string());
        if armed {
            return self.children(path, deadline);
        }
        let (client, owned, watches) = (self.client(), path.to_string(), self.watches.clone());
        let listed = self
            .runtime
            .run("list children of", path, deadline, async move {
                // A missing znode is watched for its creation instead.
                let (names, watcher) = match client.get_and_watch_children(&owned).await {
                    Ok((names, _, watcher)) => (names, watcher),
                    Err(zk::Error::NoNode) => match client.check_and_watch_stat(&owned).await? {
                        (None, watcher) => (Vec::new(), watcher),
                        (Some(_), watcher) => {
                            // Created meanwhile: its creation is the change.
                            drop(watcher);
                            watches.bump();
                            crate::sync::lock(&watches.armed).remove(&owned);
                            return Err(zk::Error::NoNode);
                        }
                    },
                    Err(e) => return Err(e),
                };
                tokio::spawn(async move {
                    let _ = watcher.changed().await;
                    crate::sync::lock(&watches.armed).remove(&owned);
                    watches.bump();
                });
                Ok(names)
            });
        match listed {
            Ok(mut names) => {
                names.sort();
                Ok(names)
            }
            Err(e) => {
                crate::sync::lock(&self.watches.armed).remove(path);
                Err(e)
            }
        }
    }

    /// The stat of `path`, `None` if it does not exist.
    pub fn exists(&self, path: &str, deadline: Duration) -> Result<Option<ZkStat>> {
        let (client, owned) = (self.client(), path.to_string());
        self.runtime.run("stat", path, deadline, async move {
            let stat = client.check_stat(&owned).await?;
            Ok(stat.as_ref().map(ZkStat::from))
        })
    }

    /// Applies `ops` atomically: all of them, or none. A failure names
    /// the path of the operation that failed, with its cause.
    pub fn multi(&self, ops: &[ZkOp], deadline: Duration) -> Result<()> {
        let (client, owned) = (self.client(), ops.to_vec());
        let failed_at = Arc::new(Mutex::new(None::<usize>));
        let at = Arc::clone(&failed_at);
        let result = self.runtime.run("multi", "", deadline, async move {
            let mut writer = client.new_multi_writer();
            for op in &owned {
                match op {
                    ZkOp::Check { path, version } => writer.add_check_version(path, *version)?,
                    ZkOp::Create { path, data, mode } => {
                        writer.add_create(path, data, &options_of(*mode))?;
                    }
                    ZkOp::Set {
                        path,
                        data,
                        version,
                    } => writer.add_set_data(path, data, *version)?,
                    ZkOp::Delete { path, version } => writer.add_delete(path, *version)?,
                }
            }
            match writer.commit().await {
                Ok(_) => Ok(()),
                Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                    *crate::sync::lock(&at) = Some(index);
                    Err(source)
                }
                Err(zk::MultiWriteError::RequestFailed { source }) => Err(source),
            }
        });
        result.map_err(|e| match (e, *crate::sync::lock(&failed_at)) {
            (Error::ZooKeeper { op, cause, .. }, Some(i)) if i < ops.len() => Error::ZooKeeper {
                op,
                path: ops[i].path().to_string(),
                cause,
            },
            (e, _) => e,
        })
    }
}

impl Drop for ZkSession {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let mut state = client.state_watcher();
        // Dropping the last client sends the close request; the runtime
        // must still run to deliver it and to see the server's answer.
        drop(client);
        let closed = async move {
            while !state.peek_state().is_terminated() {
                state.changed().await;
            }
            Ok::<(), zk::Error>(())
        };
        let _ = self
            .runtime
            .run("close", &self.address.to_string(), CLOSE_WAIT, closed);
        self.runtime.stop(CLOSE_WAIT);
    }
}

/// Options of a persistent znode open to everyone (klog's registry has no
/// ACLs; the ensemble's network is its boundary).
fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Options of a znode of `mode`, open to everyone.
fn options_of(mode: ZkMode) -> zk::CreateOptions<'static> {
    match mode {
        ZkMode::Persistent => persistent(),
        ZkMode::Ephemeral => zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
    }
}

/// The background thread and its current-thread runtime.
#[derive(Debug)]
struct Runtime {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// When the last call was answered.
    answered: Mutex<Instant>,
}

impl Runtime {
    fn start() -> Result<Runtime> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|reason| Error::Spawn { reason })?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("zookeeper".into())
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .map_err(|reason| Error::Spawn { reason })?;
        Ok(Runtime {
            handle,
            stop: Some(stop),
            thread: Some(thread),
            answered: Mutex::new(Instant::now()),
        })
    }

    /// Runs `work` on the runtime thread and waits for its answer, at most
    /// `deadline`; a failure names `op` and `path`.
    fn run<T, F>(&self, op: &'static str, path: &str, deadline: Duration, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = std::result::Result<T, zk::Error>> + Send + 'static,
    {
        let (answer, answered) = mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = answer.send(tokio::time::timeout(deadline, work).await);
        });
        let waited_ms = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX);
        let failed = |cause| Error::ZooKeeper {
            op,
            path: path.to_string(),
            cause,
        };
        // The runtime enforces the deadline; the margin covers a runtime
        // thread that stopped answering at all. A process asked to stop
        // gives up once its grace is over (after a short wait, so that a
        // close still reaches a server that answers).
        let started = Instant::now();
        let waited = loop {
            match answered.recv_timeout(STOP_LOOK) {
                Err(mpsc::RecvTimeoutError::Timeout)
                    if started.elapsed() < deadline + Duration::from_secs(1)
                        && !(crate::stop::grace_over() && started.elapsed() >= STOP_WAIT_MIN) => {}
                other => break other,
            }
        };
        match waited {
            Ok(Ok(Ok(value))) => {
                *crate::sync::lock(&self.answered) = Instant::now();
                Ok(value)
            }
            Ok(Ok(Err(error))) => Err(failed(cause_of(error))),
            Ok(Err(_)) | Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(failed(ZkCause::Deadline { waited_ms }))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(failed(ZkCause::Other(
                "the ZooKeeper client thread stopped".to_string(),
            ))),
        }
    }

    /// Stops the runtime thread, waiting for it at most `wait`.
    fn stop(&mut self, wait: Duration) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(thread) = self.thread.take() else {
            return;
        };
        let started = Instant::now();
        while !thread.is_finished() && started.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(5));
        }
        if thread.is_finished() {
            let _ = thread.join();
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop(CLOSE_WAIT);
    }
}

/// The words for a client error.
fn cause_of(error: zk::Error) -> ZkCause {
    match &error {
        zk::Error::NoNode => ZkCause::NoNode,
        zk::Error::NodeExists => ZkCause::NodeExists,
        zk::Error::BadVersion => ZkCause::BadVersion,
        zk::Error::NotEmpty => ZkCause::NotEmpty,
        zk::Error::NoChildrenForEphemerals => ZkCause::EphemeralParent,
        zk::Error::SessionExpired => ZkCause::SessionExpired,
        zk::Error::ClientClosed => ZkCause::Closed,
        // What breaks a connection (the session layer words a silent
        // server as a custom error): the session may live on.
        zk::Error::ConnectionLoss => ZkCause::ConnectionLoss(
            "the connection broke before the answer (it may have been applied)".into(),
        ),
        zk::Error::Custom(_) => ZkCause::ConnectionLoss(error.to_string()),
        zk::Error::Timeout => ZkCause::ConnectionLoss("no answer in time".into()),
        zk::Error::NoHosts => ZkCause::ConnectionLoss("no server to connect to".into()),
        zk::Error::Throttled => ZkCause::ConnectionLoss("the server is overloaded".into()),
        zk::Error::SessionMoved => {
            ZkCause::ConnectionLoss("the session moved to another server".into())
        }
        other => ZkCause::Other(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_servers_and_chroot() {
        let address = ZkAddress::parse("zk://a:2181,b:2182/klog/test").unwrap();
        assert_eq!(address.hosts, "a:2181,b:2182");
        assert_eq!(address.chroot, "/klog/test");
        assert_eq!(address.to_string(), "zk://a:2181,b:2182/klog/test");
    }

    #[test]
    fn refuses_malformed_addresses_with_the_reason() {
        for (bad, why) in [
            ("a:2181/klog", "must start with zk://"),
            ("zk://a:2181", "chroot is missing"),
            ("zk://a:2181/", "chroot is missing"),
            ("zk:///klog", "no server"),
            ("zk://a/klog", "is not HOST:PORT"),
            ("zk://a:0/klog", "is not HOST:PORT"),
            ("zk://a:2181,/klog", "is not HOST:PORT"),
            ("zk://a:2181/klog//x", "empty, . or .."),
            ("zk://a:2181/klog/", "empty, . or .."),
            ("zk://a:2181/klog/..", "empty, . or .."),
        ] {
            let error = ZkAddress::parse(bad).unwrap_err().to_string();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }
}
