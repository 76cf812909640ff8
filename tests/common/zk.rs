//! Real ZooKeeper servers for a test: Debian's `zookeeper` package run from
//! a `zoo.cfg` in a temp dir on free 127.0.0.1 ports, either one standalone
//! server ([`ZkServer`]) or an ensemble of several on this host
//! ([`ZkEnsemble`]), killed and reaped when the test ends however it ends.
//!
//! Without the package, `start` prints a line saying the test was skipped
//! and returns `None`; with `KLOG_REQUIRE_ZK=1` it panics instead.
//! `KLOG_ZK_JAR` names another server jar (a missing one checks the skip).
//!
//! Each server writes its output to `server.log` in its directory. A start
//! that fails panics with the end of every log, and a test that panics
//! while a server or an ensemble is alive prints them when it is dropped.
//!
//! [`ZkServer::start_in`] runs a server inside a host of a network
//! namespace [`Net`](super::netns::Net), bound to the host's address, so
//! that the other hosts reach it; it is probed from a thread inside that
//! host.
//!
//! `pause` and `resume` send SIGSTOP and SIGCONT to the java process: the
//! server stops answering but closes nothing, as a server frozen by a long
//! GC pause or a stopped VM does. A paused server is still killed when it is
//! dropped: SIGKILL also ends a stopped process.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::netns::Host;

/// Where Debian's package puts the server.
const JAR: &str = "/usr/share/java/zookeeper.jar";
/// The logger binding the server needs on its class path.
const SLF4J: &str = "/usr/share/java/slf4j-simple.jar";
/// How long a start may take before it counts as failed.
const START_WAIT: Duration = Duration::from_secs(30);
/// How many times a start is tried on other ports.
const START_TRIES: usize = 5;
/// How long a `srvr` probe waits for each of connect, write and read
/// (3.8.0 can leave a probe hanging while it starts).
const PROBE_WAIT: Duration = Duration::from_millis(500);
/// How often a wait probes again.
const POLL: Duration = Duration::from_millis(50);
/// How much of a server's log a failure shows.
const TAIL_LINES: usize = 40;
/// How much of a server's log is searched for a port it cannot bind (a
/// starting server writes about 40 KiB).
const LOG_SCAN_BYTES: u64 = 4 << 20;
/// The ensemble's `initLimit` and `syncLimit`, in ticks of 200 ms: a
/// follower has 2 s to connect and sync to a new leader, and a leader
/// gives up on a follower (and a follower on its leader) after 1 s of
/// silence, short enough for a test and long enough for a loaded machine.
const INIT_LIMIT_TICKS: u32 = 10;
const SYNC_LIMIT_TICKS: u32 = 5;

/// A running standalone ZooKeeper server.
pub struct ZkServer {
    /// Declared before `dir`: the server is killed before its data is
    /// removed.
    process: ServerProcess,
    /// Its client port.
    pub port: u16,
    /// The address it binds: 127.0.0.1, or its host's.
    ip: Ipv4Addr,
    /// The namespace host it runs in, if not the test's own namespace.
    host: Option<Host>,
    dir: tempfile::TempDir,
}

impl ZkServer {
    /// Starts a server and waits until it serves (its `srvr` reply has a
    /// `Mode:` line), or returns `None` after printing why the test is
    /// skipped when ZooKeeper is not installed.
    pub fn start() -> Option<ZkServer> {
        let jar = server_jar()?;
        Some(start_on_free_ports("ZooKeeper did not start", || {
            ZkServer::try_start(&jar, None)
        }))
    }

    /// Starts a server inside `host` (`ip netns exec`, whose child is the
    /// java process itself), bound to the host's address, and waits until
    /// a probe from inside the host says it serves; `None` as
    /// [`ZkServer::start`].
    pub fn start_in(host: &Host) -> Option<ZkServer> {
        let jar = server_jar()?;
        Some(start_on_free_ports("ZooKeeper did not start", || {
            ZkServer::try_start(&jar, Some(host))
        }))
    }

    fn try_start(jar: &Path, host: Option<&Host>) -> Result<ZkServer, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (ip, port, java) = match host {
            None => (Ipv4Addr::LOCALHOST, free_ports(1)[0], Command::new("java")),
            Some(host) => {
                let ports = host.spawn_inside(|| free_ports(1)).join();
                let port = ports.map_err(|_| "no free port in the host")?[0];
                (host.addr(), port, host.command("java"))
            }
        };
        let data = dir.path().join("data");
        std::fs::create_dir(&data).map_err(|e| e.to_string())?;
        let cfg = dir.path().join("zoo.cfg");
        std::fs::write(&cfg, base_config(&data, ip, port)).map_err(|e| e.to_string())?;
        let log = dir.path().join("server.log");
        let process = ServerProcess::spawn(java, jar, &cfg, &log)?;
        // From here on, Drop kills the server whatever happens.
        let mut server = ZkServer {
            process,
            port,
            ip,
            host: host.cloned(),
            dir,
        };
        let serves = |server: &ZkServer| server.srvr().lines().any(|l| l.starts_with("Mode:"));
        poll(
            START_WAIT,
            "a srvr reply with a Mode: line",
            || match server.process.failed() {
                Some(why) => Err(why),
                None => Ok(serves(&server)),
            },
        )
        .map_err(|why| format!("{why}\n{}", tail(&log)))?;
        Ok(server)
    }

    /// The `srvr` four-letter word's reply, or "" if none came in time
    /// (asked from inside its host, if it runs in one).
    pub fn srvr(&self) -> String {
        let addr = SocketAddr::from((self.ip, self.port));
        match &self.host {
            None => srvr_at(addr),
            // A thread that cannot move in panics, saying why: no reply.
            Some(host) => host
                .spawn_inside(move || srvr_at(addr))
                .join()
                .unwrap_or_default(),
        }
    }

    /// The address of a session under `chroot` (`/klog-test-x`).
    pub fn address(&self, chroot: &str) -> String {
        format!("zk://{}:{}{chroot}", self.ip, self.port)
    }

    /// What the server printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The java process's id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Stops the server (SIGSTOP) and returns once it is stopped: it
    /// answers nothing until [`ZkServer::resume`].
    pub fn pause(&self) {
        self.process.pause();
    }

    /// Lets a paused server run again (SIGCONT).
    pub fn resume(&self) {
        self.process.resume();
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- ZooKeeper on port {}: the end of its log ---\n{}",
                self.port,
                tail(&self.dir.path().join("server.log"))
            );
        }
    }
}

/// ZooKeeper servers on this host forming one ensemble, each with its own
/// client, quorum and election port on 127.0.0.1 and its own data
/// directory. Servers are numbered from 0 here; server `i` has `myid`
/// `i + 1`.
pub struct ZkEnsemble {
    jar: PathBuf,
    members: Vec<Member>,
    /// Holds each member's directory; removed once every member is killed.
    dir: tempfile::TempDir,
}

/// One server of an ensemble.
struct Member {
    /// `None` while it is killed.
    process: Option<ServerProcess>,
    paused: bool,
    /// Its client port.
    port: u16,
    /// Its `zoo.cfg`, `server.log` and `data/` (holding `myid`).
    home: PathBuf,
}

impl ZkEnsemble {
    /// Starts `n` servers (at least 2) and waits until every one serves as
    /// the leader or a follower (its `srvr` reply says `Mode: leader` or
    /// `Mode: follower`), or returns `None` after printing why the test is
    /// skipped when ZooKeeper is not installed.
    pub fn start(n: usize) -> Option<ZkEnsemble> {
        assert!(
            n >= 2,
            "an ensemble has at least 2 servers (ZkServer is the standalone one)"
        );
        let jar = server_jar()?;
        Some(start_on_free_ports(
            "the ZooKeeper ensemble did not form",
            || ZkEnsemble::try_start(&jar, n),
        ))
    }

    fn try_start(jar: &Path, n: usize) -> Result<ZkEnsemble, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        // Client, quorum and election port of each server, all distinct.
        let ports = free_ports(3 * n);
        let peers: String = (0..n)
            .map(|i| {
                let (quorum, election) = (ports[3 * i + 1], ports[3 * i + 2]);
                format!("server.{}=127.0.0.1:{quorum}:{election}\n", i + 1)
            })
            .collect();
        let mut members = Vec::with_capacity(n);
        for i in 0..n {
            let home = dir.path().join(format!("server{}", i + 1));
            let data = home.join("data");
            std::fs::create_dir_all(&data).map_err(|e| e.to_string())?;
            std::fs::write(data.join("myid"), format!("{}\n", i + 1)).map_err(|e| e.to_string())?;
            let config = format!(
                "{}initLimit={INIT_LIMIT_TICKS}\nsyncLimit={SYNC_LIMIT_TICKS}\n{peers}",
                base_config(&data, Ipv4Addr::LOCALHOST, ports[3 * i])
            );
            std::fs::write(home.join("zoo.cfg"), config).map_err(|e| e.to_string())?;
            members.push(Member {
                process: None,
                paused: false,
                port: ports[3 * i],
                home,
            });
        }
        // From here on, Drop kills every server started whatever happens.
        let mut ensemble = ZkEnsemble {
            jar: jar.to_path_buf(),
            members,
            dir,
        };
        for i in 0..n {
            ensemble.spawn(i)?;
        }
        let all: Vec<usize> = (0..n).collect();
        ensemble.wait_serving(&all)?;
        Ok(ensemble)
    }

    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let member = &mut self.members[i];
        let cfg = member.home.join("zoo.cfg");
        let log = member.home.join("server.log");
        let java = Command::new("java");
        member.process = Some(ServerProcess::spawn(java, &self.jar, &cfg, &log)?);
        member.paused = false;
        Ok(())
    }

    /// Waits until each server of `which` serves as the leader or a
    /// follower; fails at once if one exits or cannot bind a port.
    fn wait_serving(&mut self, which: &[usize]) -> Result<(), String> {
        let waiting_for = format!("servers {which:?} to say Mode: leader or Mode: follower");
        poll(START_WAIT, &waiting_for, || {
            for &i in which {
                let failed = self.members[i]
                    .process
                    .as_mut()
                    .and_then(ServerProcess::failed);
                if let Some(why) = failed {
                    return Err(format!("server {i} (port {}): {why}", self.members[i].port));
                }
            }
            Ok(which.iter().all(|&i| serving(self.mode(i).as_deref())))
        })
        .map_err(|why| format!("{why}\n{}", self.tails()))
    }

    /// The address of a session under `chroot` that may use any server:
    /// `zk://127.0.0.1:P1,127.0.0.1:P2,.../chroot`.
    pub fn address(&self, chroot: &str) -> String {
        let hosts: Vec<String> = self
            .members
            .iter()
            .map(|member| format!("127.0.0.1:{}", member.port))
            .collect();
        format!("zk://{}{chroot}", hosts.join(","))
    }

    /// How many servers the ensemble has, killed ones included.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Server `i`'s client port.
    pub fn port(&self, i: usize) -> u16 {
        self.members[i].port
    }

    /// Server `i`'s java process id, unless it is killed.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].process.as_ref().map(ServerProcess::pid)
    }

    /// The directory holding every server's files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Server `i`'s `srvr` reply, or "" if none came in time.
    pub fn srvr(&self, i: usize) -> String {
        srvr(self.members[i].port)
    }

    /// What server `i`'s `srvr` says after `Mode: ` (`leader`, `follower`),
    /// or `None` when it does not say (killed, paused, not serving).
    pub fn mode(&self, i: usize) -> Option<String> {
        let member = &self.members[i];
        if member.process.is_none() || member.paused {
            return None;
        }
        mode(member.port)
    }

    /// The server whose `srvr` says `Mode: leader`, if exactly one does.
    pub fn leader(&self) -> Option<usize> {
        let leaders: Vec<usize> = (0..self.len())
            .filter(|&i| self.mode(i).as_deref() == Some("leader"))
            .collect();
        match leaders[..] {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Waits until the ensemble serves again: exactly one running server
    /// (neither killed nor paused) says `Mode: leader` and every other
    /// running one says `Mode: follower`. Returns the leader; panics with
    /// every server's mode and log after `timeout`.
    pub fn wait_for_leader(&self, timeout: Duration) -> usize {
        let started = Instant::now();
        loop {
            let modes: Vec<Option<String>> = (0..self.len()).map(|i| self.mode(i)).collect();
            let running =
                |i: &usize| self.members[*i].process.is_some() && !self.members[*i].paused;
            let leaders: Vec<usize> = (0..self.len())
                .filter(|&i| modes[i].as_deref() == Some("leader"))
                .collect();
            let settled = (0..self.len())
                .filter(running)
                .all(|i| serving(modes[i].as_deref()));
            if let ([leader], true) = (&leaders[..], settled) {
                return *leader;
            }
            assert!(
                started.elapsed() < timeout,
                "no single leader with every running server following within {timeout:?}: \
                 modes {modes:?}\n{}",
                self.tails()
            );
            std::thread::sleep(POLL);
        }
    }

    /// Kills server `i` (SIGKILL) and reaps it.
    pub fn kill(&mut self, i: usize) {
        let member = &mut self.members[i];
        let process = member.process.take();
        assert!(process.is_some(), "server {i} is already killed");
        drop(process);
        member.paused = false;
    }

    /// Starts killed server `i` again on the same ports and data, and
    /// waits until it serves as the leader or a follower.
    pub fn restart(&mut self, i: usize) {
        assert!(
            self.members[i].process.is_none(),
            "server {i} is running: kill it first"
        );
        if let Err(why) = self.spawn(i).and_then(|()| self.wait_serving(&[i])) {
            panic!("server {i} did not serve again: {why}");
        }
    }

    /// Stops server `i` (SIGSTOP) and returns once it is stopped.
    pub fn pause(&mut self, i: usize) {
        let member = &mut self.members[i];
        member.process.as_ref().expect("server is running").pause();
        member.paused = true;
    }

    /// Lets paused server `i` run again (SIGCONT).
    pub fn resume(&mut self, i: usize) {
        let member = &mut self.members[i];
        member.process.as_ref().expect("server is running").resume();
        member.paused = false;
    }

    /// The end of every server's log, for a failure message.
    pub fn tails(&self) -> String {
        let mut all = String::new();
        for (i, member) in self.members.iter().enumerate() {
            let log = member.home.join("server.log");
            all.push_str(&format!(
                "--- server {i} (port {}): the end of its log ---\n{}\n",
                member.port,
                tail(&log)
            ));
        }
        all
    }
}

impl Drop for ZkEnsemble {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.tails());
        }
        // Every server dies before the directory holding its data goes.
        for member in &mut self.members {
            member.process = None;
        }
    }
}

/// One java process running a ZooKeeper server; killed (SIGKILL, which
/// also ends a stopped process) and reaped when dropped.
struct ServerProcess {
    child: Child,
    log: PathBuf,
    /// Where this run's output starts in `log`.
    log_start: u64,
}

impl ServerProcess {
    /// Starts the server configured by `cfg` with `java` (a command that
    /// runs java, whose child is the java process), appending its output
    /// to `log` (a restarted server adds to the same log).
    fn spawn(
        mut java: Command,
        jar: &Path,
        cfg: &Path,
        log: &Path,
    ) -> Result<ServerProcess, String> {
        let mut out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let _ = writeln!(out, "=== the test starts this server ===");
        let log_start = out.metadata().map_or(0, |m| m.len());
        let child = java
            .arg("-Xmx128m")
            .arg("-cp")
            .arg(format!("{}:{SLF4J}", jar.display()))
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(cfg)
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(|e| e.to_string())?)
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot run java: {e}"))?;
        Ok(ServerProcess {
            child,
            log: log.to_path_buf(),
            log_start,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Why the server is gone or doomed: it exited, or it could not bind
    /// one of its ports. A server that cannot bind its election port still
    /// joins an ensemble by connecting out, and exits seconds later.
    fn failed(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => return Some(format!("the server exited ({status})")),
            Err(e) => return Some(format!("cannot wait for the server: {e}")),
        }
        let mut text = Vec::new();
        if let Ok(mut file) = std::fs::File::open(&self.log) {
            let _ = file.seek(SeekFrom::Start(self.log_start));
            let _ = file.take(LOG_SCAN_BYTES).read_to_end(&mut text);
        }
        let bind = String::from_utf8_lossy(&text)
            .lines()
            .find(|line| line.contains("Address already in use"))
            .map(|line| format!("the server cannot bind a port: {line}"));
        bind
    }

    /// Sends SIGSTOP and waits until the process is stopped (the signal
    /// takes effect when the kernel next schedules it).
    fn pause(&self) {
        let pid = self.pid();
        kill(Pid::from_raw(pid as i32), Signal::SIGSTOP).expect("SIGSTOP the ZooKeeper server");
        let started = Instant::now();
        while process_state(pid) != Some('T') {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "process {pid} is not stopped 5 s after SIGSTOP: {:?}",
                process_state(pid)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn resume(&self) {
        kill(Pid::from_raw(self.pid() as i32), Signal::SIGCONT)
            .expect("SIGCONT the ZooKeeper server");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server jar, or `None` after printing that the test is skipped (a
/// panic with `KLOG_REQUIRE_ZK=1`).
fn server_jar() -> Option<PathBuf> {
    let jar = std::env::var_os("KLOG_ZK_JAR").map_or_else(|| PathBuf::from(JAR), PathBuf::from);
    if jar.exists() {
        return Some(jar);
    }
    assert!(
        std::env::var("KLOG_REQUIRE_ZK").as_deref() != Ok("1"),
        "KLOG_REQUIRE_ZK=1 but {} is missing (apt-get install zookeeper)",
        jar.display()
    );
    println!("skipped: zookeeper is not installed (apt-get install zookeeper)");
    None
}

/// Runs `attempt` until it succeeds, at most [`START_TRIES`] times, and
/// panics with `failed` and the last reason. A port found free can be taken
/// by someone else before the server binds it; the server then exits, and
/// the next attempt takes other ports.
fn start_on_free_ports<T>(failed: &str, mut attempt: impl FnMut() -> Result<T, String>) -> T {
    let mut last = String::new();
    for _ in 0..START_TRIES {
        match attempt() {
            Ok(started) => return started,
            Err(why) => last = why,
        }
    }
    panic!("{failed}: {last}");
}

/// The `zoo.cfg` lines of a server on client `ip:port` keeping its data
/// in `data`: fast ticks, no admin server, every four-letter word allowed.
fn base_config(data: &Path, ip: Ipv4Addr, port: u16) -> String {
    format!(
        "tickTime=200\ndataDir={}\nclientPort={port}\nclientPortAddress={ip}\n\
         admin.enableServer=false\n4lw.commands.whitelist=*\nmaxSessionTimeout=60000\n",
        data.display()
    )
}

/// Calls `check` every [`POLL`] until it says done (`Ok(true)`) or fails;
/// fails itself, naming what it was `waiting_for`, after `wait`.
fn poll(
    wait: Duration,
    waiting_for: &str,
    mut check: impl FnMut() -> Result<bool, String>,
) -> Result<(), String> {
    let started = Instant::now();
    loop {
        if check()? {
            return Ok(());
        }
        if started.elapsed() >= wait {
            return Err(format!("waited {wait:?} for {waiting_for}"));
        }
        std::thread::sleep(POLL);
    }
}

/// Whether a `srvr` mode is one of a serving ensemble member.
fn serving(mode: Option<&str>) -> bool {
    matches!(mode, Some("leader" | "follower"))
}

/// The `srvr` four-letter word's reply from the server on 127.0.0.1
/// `port`, or "" if none came in time.
fn srvr(port: u16) -> String {
    srvr_at(SocketAddr::from((IpAddr::V4(Ipv4Addr::LOCALHOST), port)))
}

/// The `srvr` reply from the server at `addr`, or "" if none came in time.
fn srvr_at(addr: SocketAddr) -> String {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, PROBE_WAIT) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(PROBE_WAIT));
    let _ = stream.set_write_timeout(Some(PROBE_WAIT));
    if stream.write_all(b"srvr").is_err() {
        return String::new();
    }
    let mut reply = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

/// What the `srvr` reply from `port` says after `Mode: `, if it says.
fn mode(port: u16) -> Option<String> {
    srvr(port)
        .lines()
        .find_map(|line| line.strip_prefix("Mode:"))
        .map(|mode| mode.trim().to_string())
}

/// The state letter of process `pid` in `/proc/PID/stat` (`T` when
/// stopped), or `None` when there is no such process.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The last [`TAIL_LINES`] lines of `log` (read from its last 64 KiB),
/// without the line the server logs for each of the harness's probes.
fn tail(log: &Path) -> String {
    let mut text = Vec::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        let len = file.metadata().map_or(0, |m| m.len());
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
        let _ = file.take(64 * 1024).read_to_end(&mut text);
    }
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| !line.contains("Processing srvr command"))
        .collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
}

/// `n` distinct ports nobody listens on at this moment, all held at once
/// so that none comes twice. They are picked at random below the kernel's
/// ephemeral range (1024 to 32767 by default on Linux): connect() never
/// takes one of those as the local port of an outgoing connection, so only
/// another listener can take one before the server binds it, or while a
/// killed server is down. Without room there, the kernel picks.
fn free_ports(n: usize) -> Vec<u16> {
    let below = ephemeral_start().filter(|&start| start >= 2048);
    let mut listeners: Vec<TcpListener> = Vec::with_capacity(n);
    for _ in 0..100 * n {
        if listeners.len() == n {
            break;
        }
        let port = below.map_or(0, |start| {
            let span = u64::from(start - 1024);
            1024 + u16::try_from(random() % span).expect("below the range")
        });
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            listeners.push(listener);
        }
    }
    assert_eq!(listeners.len(), n, "no {n} free ports on 127.0.0.1");
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("local address").port())
        .collect()
}

/// The first port of the kernel's ephemeral range, if it says.
fn ephemeral_start() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// A random number (std's hasher keys are random per process, and each
/// `RandomState` differs).
fn random() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::process::id())
}
