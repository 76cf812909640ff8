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

use std::fmt;
use std::future::Future;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use crate::error::{Error, Result, ZkCause};

/// How long dropping a session waits for the server to confirm the close,
/// and then for the runtime thread to end.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);

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

/// One session with a ZooKeeper ensemble, under its chroot, with blocking
/// calls. Every path is absolute within the chroot (`/brokers/ids/1`).
pub struct ZkSession {
    address: ZkAddress,
    /// The chrooted client; `None` only while dropping.
    client: Option<zk::Client>,
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
        let address = ZkAddress::parse(address)?;
        let runtime = Runtime::start()?;
        let hosts = address.hosts.clone();
        let chroot = address.chroot.clone();
        let what = address.to_string();
        let client = runtime.run("connect to", &what, deadline, async move {
            let client = zk::Client::connector()
                .with_session_timeout(session_timeout)
                .with_connection_timeout(deadline)
                .connect(&hosts)
                .await?;
            client.mkdir(&chroot, &persistent()).await?;
            client
                .chroot(chroot)
                .map_err(|_| zk::Error::BadArguments(&"invalid chroot"))
        })?;
        Ok(ZkSession {
            address,
            client: Some(client),
            runtime,
        })
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
            let options = match mode {
                ZkMode::Persistent => persistent(),
                ZkMode::Ephemeral => zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
            };
            let (stat, _) = client.create(&owned, &data, &options).await?;
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

/// The background thread and its current-thread runtime.
#[derive(Debug)]
struct Runtime {
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
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
        // thread that stopped answering at all.
        match answered.recv_timeout(deadline + Duration::from_secs(1)) {
            Ok(Ok(Ok(value))) => Ok(value),
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
    match error {
        zk::Error::NoNode => ZkCause::NoNode,
        zk::Error::NodeExists => ZkCause::NodeExists,
        zk::Error::BadVersion => ZkCause::BadVersion,
        zk::Error::NotEmpty => ZkCause::NotEmpty,
        zk::Error::NoChildrenForEphemerals => ZkCause::EphemeralParent,
        zk::Error::SessionExpired => ZkCause::SessionExpired,
        zk::Error::ClientClosed => ZkCause::Closed,
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
