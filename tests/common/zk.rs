//! A real standalone ZooKeeper server for a test: Debian's `zookeeper`
//! package run from a `zoo.cfg` in a temp dir on a free 127.0.0.1 port,
//! killed and reaped when the test ends however it ends.
//!
//! Without the package, [`ZkServer::start`] prints a line saying the test
//! was skipped and returns `None`; with `KLOG_REQUIRE_ZK=1` it panics
//! instead. `KLOG_ZK_JAR` names another server jar (a missing one checks
//! the skip).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package puts the server.
const JAR: &str = "/usr/share/java/zookeeper.jar";
/// The logger binding the server needs on its class path.
const SLF4J: &str = "/usr/share/java/slf4j-simple.jar";
/// How long a start may take before it counts as failed.
const START_WAIT: Duration = Duration::from_secs(30);

/// A running ZooKeeper server.
pub struct ZkServer {
    child: Child,
    /// Its client port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
}

impl ZkServer {
    /// Starts a server and waits until it serves (its `srvr` reply has a
    /// `Mode:` line), or returns `None` after printing why the test is
    /// skipped when ZooKeeper is not installed.
    pub fn start() -> Option<ZkServer> {
        let jar = std::env::var_os("KLOG_ZK_JAR").map_or_else(|| PathBuf::from(JAR), PathBuf::from);
        if !jar.exists() {
            assert!(
                std::env::var("KLOG_REQUIRE_ZK").as_deref() != Ok("1"),
                "KLOG_REQUIRE_ZK=1 but {} is missing (apt-get install zookeeper)",
                jar.display()
            );
            println!("skipped: zookeeper is not installed (apt-get install zookeeper)");
            return None;
        }
        let mut last = String::new();
        // A free port can be taken by someone else before the server binds
        // it; the server then exits, and another port is tried.
        for _ in 0..5 {
            match ZkServer::try_start(&jar) {
                Ok(server) => return Some(server),
                Err(why) => last = why,
            }
        }
        panic!("ZooKeeper did not start: {last}");
    }

    fn try_start(jar: &Path) -> Result<ZkServer, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let port = free_port();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).map_err(|e| e.to_string())?;
        let config = format!(
            "tickTime=200\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             admin.enableServer=false\n4lw.commands.whitelist=*\nmaxSessionTimeout=60000\n",
            data.display()
        );
        let cfg = dir.path().join("zoo.cfg");
        std::fs::write(&cfg, config).map_err(|e| e.to_string())?;
        let log =
            std::fs::File::create(dir.path().join("server.log")).map_err(|e| e.to_string())?;
        let child = Command::new("java")
            .arg("-Xmx128m")
            .arg("-cp")
            .arg(format!("{}:{SLF4J}", jar.display()))
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run java: {e}"))?;
        // From here on, Drop kills the server whatever happens.
        let mut server = ZkServer { child, port, dir };
        let started = Instant::now();
        while started.elapsed() < START_WAIT {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("the server exited ({status}): {}", server.log()));
            }
            if server.srvr().lines().any(|line| line.starts_with("Mode:")) {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "no Mode: in srvr within {START_WAIT:?}: {}",
            server.log()
        ))
    }

    /// The `srvr` four-letter word's reply, or "" if none came in time
    /// (3.8.0 can leave a probe hanging while it starts).
    pub fn srvr(&self) -> String {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
            return String::new();
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let _ = stream.set_write_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"srvr").is_err() {
            return String::new();
        }
        let mut reply = Vec::new();
        let _ = stream.take(64 * 1024).read_to_end(&mut reply);
        String::from_utf8_lossy(&reply).into_owned()
    }

    /// The address of a session under `chroot` (`/klog-test-x`).
    pub fn address(&self, chroot: &str) -> String {
        format!("zk://127.0.0.1:{}{chroot}", self.port)
    }

    /// What the server printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on at this moment.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local address").port()
}
