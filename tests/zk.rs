//! The blocking ZooKeeper session (`klog::coord::zk::ZkSession`) against a
//! real ZooKeeper server or a 3-server ensemble (Debian's `zookeeper`
//! package; skipped with a printed line when it is not installed, failed
//! with `KLOG_REQUIRE_ZK=1`), and the test harness's own promises: a failed
//! leader is replaced, a paused server stops answering, and whatever a test
//! starts is killed, paused or not.

mod common;

use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::zk::{ZkEnsemble, ZkServer};
use klog::coord::zk::{ZkMode, ZkSession};
use klog::error::{Error, ZkCause};

/// Each call's deadline.
const DEADLINE: Duration = Duration::from_secs(10);
/// Long enough that an ephemeral vanishing within a few seconds proves the
/// session was closed, not that it expired.
const SESSION: Duration = Duration::from_secs(20);

fn session(server: &ZkServer, chroot: &str) -> ZkSession {
    ZkSession::connect(&server.address(chroot), SESSION, DEADLINE).expect("connect")
}

/// The cause of a ZooKeeper failure, or a panic naming what came instead.
fn cause<T: std::fmt::Debug>(result: klog::error::Result<T>) -> ZkCause {
    match result {
        Err(Error::ZooKeeper { cause, .. }) => cause,
        other => panic!("expected a ZooKeeper failure, got {other:?}"),
    }
}

#[test]
fn create_get_and_set_with_a_version_refuse_a_stale_version() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let zk = session(&server, "/klog-test-versions");
    let made = zk
        .create("/t", b"one", ZkMode::Persistent, DEADLINE)
        .unwrap();
    assert_eq!((made.version, made.ephemeral_owner), (0, 0));
    assert_eq!(
        cause(zk.create("/t", b"again", ZkMode::Persistent, DEADLINE)),
        ZkCause::NodeExists
    );
    let (data, stat) = zk.get("/t", DEADLINE).unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"one"[..], 0));

    let set = zk.set("/t", b"two", 0, DEADLINE).unwrap();
    assert_eq!(set.version, 1);
    // Version 0 is stale now: refused, and the data stays.
    let stale = zk.set("/t", b"lost", 0, DEADLINE);
    let message = format!("{}", stale.as_ref().unwrap_err());
    assert_eq!(cause(stale), ZkCause::BadVersion);
    assert!(
        message.contains("ZooKeeper set /t: ") && message.contains("version"),
        "{message}"
    );
    assert_eq!(zk.get("/t", DEADLINE).unwrap().0, b"two");

    zk.create("/t/b", b"", ZkMode::Persistent, DEADLINE)
        .unwrap();
    zk.create("/t/a", b"", ZkMode::Persistent, DEADLINE)
        .unwrap();
    assert_eq!(zk.children("/t", DEADLINE).unwrap(), ["a", "b"]);
    assert_eq!(cause(zk.delete("/t/a", 1, DEADLINE)), ZkCause::BadVersion);
    zk.delete("/t/a", 0, DEADLINE).unwrap();
    assert_eq!(zk.children("/t", DEADLINE).unwrap(), ["b"]);
    assert_eq!(cause(zk.get("/t/a", DEADLINE)), ZkCause::NoNode);
}

#[test]
fn an_ephemeral_vanishes_when_its_session_is_dropped() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let owner = session(&server, "/klog-test-ephemeral");
    let watcher = session(&server, "/klog-test-ephemeral");
    assert_ne!(owner.session_id(), watcher.session_id());
    owner
        .create("/e", b"alive", ZkMode::Ephemeral, DEADLINE)
        .unwrap();
    let (data, stat) = watcher.get("/e", DEADLINE).unwrap();
    assert_eq!(data, b"alive");
    assert_eq!(stat.ephemeral_owner, owner.session_id());
    assert_eq!(
        cause(owner.create("/e/child", b"", ZkMode::Persistent, DEADLINE)),
        ZkCause::EphemeralParent
    );

    let dropped = Instant::now();
    drop(owner);
    loop {
        match watcher.get("/e", DEADLINE) {
            Err(Error::ZooKeeper {
                cause: ZkCause::NoNode,
                ..
            }) => break,
            Ok(_) => {}
            Err(other) => panic!("{other}"),
        }
        assert!(
            dropped.elapsed() < Duration::from_secs(3),
            "the ephemeral outlived its dropped session by 3 s (session timeout {SESSION:?})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_chroot_is_created_on_first_use_and_holds_every_path() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let deep = session(&server, "/klog-test-chroot/a/b");
    deep.create("/x", b"inside", ZkMode::Persistent, DEADLINE)
        .unwrap();
    assert_eq!(deep.children("/", DEADLINE).unwrap(), ["x"]);

    let above = session(&server, "/klog-test-chroot");
    assert_eq!(above.children("/", DEADLINE).unwrap(), ["a"]);
    assert_eq!(above.children("/a", DEADLINE).unwrap(), ["b"]);
    assert_eq!(above.get("/a/b/x", DEADLINE).unwrap().0, b"inside");
    assert_eq!(cause(above.get("/x", DEADLINE)), ZkCause::NoNode);
    // Opening an existing chroot again is no error.
    drop(session(&server, "/klog-test-chroot/a/b"));
}

#[test]
fn no_server_is_a_clear_error_within_the_deadline() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let port = server.port;
    drop(server);
    let started = Instant::now();
    let error = ZkSession::connect(
        &format!("zk://127.0.0.1:{port}/klog"),
        SESSION,
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "ZooKeeper connect to zk://127.0.0.1:{port}/klog: "
        )),
        "{message}"
    );
}

/// Calls `call` until it succeeds, for at most `bound`; panics with the
/// last failure after that.
fn retry<T>(bound: Duration, mut call: impl FnMut() -> klog::error::Result<T>) -> T {
    let started = Instant::now();
    loop {
        match call() {
            Ok(value) => return value,
            Err(error) if started.elapsed() < bound => {
                println!("retrying after {:?}: {error}", started.elapsed());
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("still failing after {bound:?}: {error}"),
        }
    }
}

/// Waits until `path` is gone for `zk`, at most `bound`.
fn wait_no_node(zk: &ZkSession, path: &str, bound: Duration, why: &str) {
    let started = Instant::now();
    loop {
        match zk.get(path, DEADLINE) {
            Err(Error::ZooKeeper {
                cause: ZkCause::NoNode,
                ..
            }) => return,
            Ok((_, stat)) => assert!(
                started.elapsed() < bound,
                "{path} (owner {:#x}) is still there {bound:?} after {why}",
                stat.ephemeral_owner
            ),
            Err(other) => panic!("{other}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts that process `pid` is gone: killed and reaped (a zombie still
/// has its `/proc` entry). If it is not, kills it so as to leave nothing
/// behind, then fails.
fn assert_gone(pid: u32, what: &str) {
    let proc = format!("/proc/{pid}");
    if Path::new(&proc).exists() {
        let stat = std::fs::read_to_string(format!("{proc}/stat")).unwrap_or_default();
        let status: Vec<&str> = stat.split_whitespace().take(3).collect();
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        panic!("{what}: process {pid} is still there: {status:?}");
    }
}

#[test]
fn a_session_keeps_its_id_and_its_ephemeral_when_the_leader_is_killed() {
    let starting = Instant::now();
    let Some(mut ensemble) = ZkEnsemble::start(3) else {
        return;
    };
    println!("the ensemble formed in {:?}", starting.elapsed());
    let old = ensemble.leader().expect("one leader once formed");
    for i in (0..3).filter(|&i| i != old) {
        assert_eq!(ensemble.mode(i).as_deref(), Some("follower"), "server {i}");
    }
    let address = ensemble.address("/klog-test-failover");
    assert_eq!(address.matches("127.0.0.1:").count(), 3, "{address}");
    let owner = ZkSession::connect(&address, SESSION, DEADLINE).expect("connect");
    let id = owner.session_id();
    owner
        .create("/e", b"alive", ZkMode::Ephemeral, DEADLINE)
        .unwrap();

    ensemble.kill(old);
    let killed = Instant::now();
    let new = ensemble.wait_for_leader(Duration::from_secs(10));
    assert_ne!(new, old);
    println!("a new leader (server {new}) after {:?}", killed.elapsed());
    // The session moves to a live server and keeps its id and ephemeral.
    let (data, stat) = retry(Duration::from_secs(10), || {
        owner.get("/e", Duration::from_secs(2))
    });
    println!(
        "the session answered again {:?} after the kill",
        killed.elapsed()
    );
    assert_eq!(data, b"alive");
    assert_eq!((owner.session_id(), stat.ephemeral_owner), (id, id));
    let other = ZkSession::connect(&address, SESSION, DEADLINE).expect("connect");
    assert_ne!(other.session_id(), id);
    assert_eq!(other.get("/e", DEADLINE).unwrap().1.ephemeral_owner, id);

    // The killed server comes back on the same port and data, as a
    // follower that has the ephemeral.
    ensemble.restart(old);
    assert_eq!(ensemble.mode(old).as_deref(), Some("follower"));
    let only = format!("zk://127.0.0.1:{}/klog-test-failover", ensemble.port(old));
    let back = ZkSession::connect(&only, SESSION, DEADLINE).expect("connect");
    assert_eq!(back.get("/e", DEADLINE).unwrap().1.ephemeral_owner, id);
}

#[test]
fn a_paused_leader_is_replaced_and_follows_when_resumed_and_drop_kills_a_paused_member() {
    let Some(mut ensemble) = ZkEnsemble::start(3) else {
        return;
    };
    let old = ensemble.leader().expect("one leader once formed");
    ensemble.pause(old);
    // It accepts connections (the kernel does) but answers nothing.
    assert_eq!(ensemble.srvr(old), "");
    let paused = Instant::now();
    let new = ensemble.wait_for_leader(Duration::from_secs(10));
    assert_ne!(new, old);
    println!(
        "a new leader (server {new}) {:?} after the pause",
        paused.elapsed()
    );
    ensemble.resume(old);
    assert_eq!(ensemble.wait_for_leader(Duration::from_secs(10)), new);
    assert_eq!(ensemble.mode(old).as_deref(), Some("follower"));

    ensemble.pause(new);
    let pids: Vec<u32> = (0..3).map(|i| ensemble.pid(i).expect("running")).collect();
    let dir = ensemble.dir().to_path_buf();
    drop(ensemble);
    for pid in pids {
        assert_gone(pid, "after the ensemble was dropped with a paused member");
    }
    assert!(!dir.exists(), "{} is left", dir.display());
}

#[test]
fn a_server_paused_past_the_session_timeout_expires_the_session() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let timeout = Duration::from_secs(1);
    let owner = ZkSession::connect(&server.address("/klog-test-pause"), timeout, DEADLINE)
        .expect("connect");
    assert_eq!(owner.session_timeout(), timeout);
    owner
        .create("/e", b"", ZkMode::Ephemeral, DEADLINE)
        .unwrap();
    server.pause();
    std::thread::sleep(3 * timeout);
    server.resume();
    let resumed = Instant::now();
    // The client gave up on the silent server: its session is expired.
    assert_eq!(
        cause(owner.get("/e", Duration::from_secs(5))),
        ZkCause::SessionExpired
    );
    // And the server expired it: its ephemeral is gone.
    let observer = session(&server, "/klog-test-pause");
    wait_no_node(&observer, "/e", Duration::from_secs(5), "the resume");
    println!(
        "the ephemeral was gone {:?} after the resume",
        resumed.elapsed()
    );
}

#[test]
fn dropping_a_paused_server_kills_and_reaps_it() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (pid, port) = (server.pid(), server.port);
    server.pause();
    drop(server);
    assert_gone(pid, "after the paused server was dropped");
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "port {port} still accepts connections"
    );
}

/// A first server that accepts connections and never answers leaves time
/// to reach the next one within the deadline.
#[test]
fn a_silent_server_first_in_the_list_leaves_time_for_the_next() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let address = format!("zk://127.0.0.1:{silent_port},127.0.0.1:{}/two", server.port);
    // The client picks its first server at random: a few tries meet the
    // silent one first.
    for _ in 0..4 {
        let session = ZkSession::connect(&address, SESSION, Duration::from_secs(4));
        assert!(session.is_ok(), "{:?}", session.err());
    }
    drop(silent);
}
