//! A registry for a test on either backend: a directory in a temp dir, or
//! a chroot of a real standalone ZooKeeper server (see [`super::zk`]),
//! removed or killed when the test ends however it ends.
//!
//! A test gives [`TestRegistry::spec`] to the binaries' `--registry` and
//! looks at what they left through the `Registry` trait
//! ([`TestRegistry::open`], [`TestRegistry::open_read_only`]), never by
//! reading the backend's files or znodes, so one scenario runs on both.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use klog::coord::zk::{ZkMode, ZkSession};
use klog::coord::Registry;
use klog::error::{Error, ZkCause};

use super::zk::ZkServer;

/// The chroot of a test's registry on its ZooKeeper server.
const CHROOT: &str = "/klog";
/// The deadline of each call of a [`TestRegistry::zk_session`].
const ZK_DEADLINE: Duration = Duration::from_secs(10);

/// Where a test's registry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A directory of files (the default backend).
    Dir,
    /// A ZooKeeper server of the test's own.
    Zk,
}

/// What holds a test registry.
enum Holder {
    Dir(tempfile::TempDir),
    Zk(ZkServer),
}

/// A registry of one test, on a backend.
pub struct TestRegistry {
    holder: Holder,
    spec: String,
}

impl TestRegistry {
    /// A fresh, empty registry on `backend`; `None` (after printing a
    /// `skipped:` line) when the backend is ZooKeeper and it is not
    /// installed.
    pub fn start(backend: Backend) -> Option<TestRegistry> {
        let (holder, spec) = match backend {
            Backend::Dir => {
                let dir = tempfile::tempdir().expect("temp dir");
                let spec = dir.path().join("registry").to_str().unwrap().to_string();
                (Holder::Dir(dir), spec)
            }
            Backend::Zk => {
                let server = ZkServer::start()?;
                let spec = server.address(CHROOT);
                (Holder::Zk(server), spec)
            }
        };
        Some(TestRegistry { holder, spec })
    }

    /// The `--registry` argument: a directory or `zk://127.0.0.1:PORT/klog`.
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// The registry, read-write, with the session timeout of a broker.
    pub fn open(&self) -> Arc<dyn Registry> {
        klog::coord::open(&self.spec, klog::coord::SESSION_TIMEOUT).expect("open the registry")
    }

    /// The registry, only to look at it.
    pub fn open_read_only(&self) -> Arc<dyn Registry> {
        klog::coord::open_read_only(&self.spec).expect("open the registry read-only")
    }

    /// The registry, only to look at it, with the committed offsets of
    /// the offsets topic (asked of its brokers).
    pub fn offsets(&self) -> Arc<dyn Registry> {
        klog::coord::offsets_topic::open_read_only(&self.spec).expect("open the registry read-only")
    }

    /// The registry's directory, on the directory backend.
    pub fn dir(&self) -> Option<&Path> {
        match self.holder {
            Holder::Dir(_) => Some(Path::new(&self.spec)),
            Holder::Zk(_) => None,
        }
    }

    /// The ZooKeeper server, on that backend (to pause it).
    pub fn zk_server(&self) -> Option<&ZkServer> {
        match &self.holder {
            Holder::Dir(_) => None,
            Holder::Zk(server) => Some(server),
        }
    }

    /// A session under the registry's chroot, on the ZooKeeper backend (to
    /// write what no klog process would).
    pub fn zk_session(&self) -> Option<ZkSession> {
        match self.holder {
            Holder::Dir(_) => None,
            Holder::Zk(_) => {
                let session =
                    ZkSession::connect(&self.spec, klog::coord::SESSION_TIMEOUT, ZK_DEADLINE)
                        .expect("a ZooKeeper session");
                Some(session)
            }
        }
    }
}

/// Makes the persistent znode `path` (and its parents) hold `data`,
/// whatever it held before.
pub fn put_znode(session: &ZkSession, path: &str, data: &[u8]) {
    let parent = &path[..path.rfind('/').expect("an absolute path")];
    if !parent.is_empty() {
        session
            .create_all(parent, ZK_DEADLINE)
            .expect("create the parents");
    }
    match session.create(path, data, ZkMode::Persistent, ZK_DEADLINE) {
        Ok(_) => {}
        Err(Error::ZooKeeper {
            cause: ZkCause::NodeExists,
            ..
        }) => {
            let (_, stat) = session.get(path, ZK_DEADLINE).expect("read the znode");
            session
                .set(path, data, stat.version, ZK_DEADLINE)
                .expect("set the znode");
        }
        Err(e) => panic!("create {path}: {e}"),
    }
}
