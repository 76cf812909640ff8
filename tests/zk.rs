//! The blocking ZooKeeper session (`klog::coord::zk::ZkSession`) against a
//! real ZooKeeper server (Debian's `zookeeper` package; skipped with a
//! printed line when it is not installed, failed with `KLOG_REQUIRE_ZK=1`).

mod common;

use std::time::{Duration, Instant};

use common::zk::ZkServer;
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
