//! The registry on ZooKeeper under faults found in review, each against
//! real ZooKeeper servers. A TCP proxy between one
//! registry and the server loses the server's replies (the requests still
//! reach it), as an asymmetric partition or a connection that breaks after
//! the request went out does.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::zk::ZkServer;
use klog::coord::{Registry, SessionState, ZkRegistry};

/// A TCP proxy to a ZooKeeper server that can lose every reply.
struct LossyProxy {
    port: u16,
    mute: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl LossyProxy {
    fn start(target_port: u16) -> LossyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mute = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (m, c) = (Arc::clone(&mute), Arc::clone(&conns));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target_port)) else {
                    continue;
                };
                {
                    let mut conns = c.lock().unwrap();
                    conns.push(client.try_clone().unwrap());
                    conns.push(server.try_clone().unwrap());
                }
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 8192];
                    while let Ok(n @ 1..) = c_in.read(&mut buf) {
                        if s_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = s_out.shutdown(Shutdown::Both);
                });
                let (mut s_in, mut c_out, mute) = (server, client, Arc::clone(&m));
                std::thread::spawn(move || {
                    let mut buf = [0u8; 8192];
                    while let Ok(n @ 1..) = s_in.read(&mut buf) {
                        if mute.load(Ordering::Acquire) {
                            continue; // the reply is lost
                        }
                        if c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = c_out.shutdown(Shutdown::Both);
                });
            }
        });
        LossyProxy { port, mute, conns }
    }

    fn address(&self, chroot: &str) -> String {
        format!("zk://127.0.0.1:{}{chroot}", self.port)
    }

    /// From now on, every reply of the server is lost.
    fn lose_replies(&self) {
        self.mute.store(true, Ordering::Release);
    }

    /// Replies pass again; the connections that lost some are broken (their
    /// framing is gone), so the client connects again.
    fn heal(&self) {
        self.mute.store(false, Ordering::Release);
        for conn in self.conns.lock().unwrap().drain(..) {
            let _ = conn.shutdown(Shutdown::Both);
        }
    }
}

/// Waits up to 20 s for `done`, failing with `what`.
fn eventually(what: &str, done: impl FnMut() -> bool) {
    common::eventually(what, Duration::from_secs(20), done);
}

/// Member a releases partition 0 (a rebalance); the delete reaches the
/// ensemble and is applied, but its reply is lost, so a's registry keeps it
/// as a delete "left undone" to retry. Member b, assigned the partition,
/// claims it at once. a's session lives on (the ensemble heard from it all
/// along) and its connection comes back: the retried delete must not remove
/// b's claim (it did when it deleted by path and version, every owner
/// znode being at version 0: b's commits were fenced while it consumed,
/// and the partition was free for a second member to claim).
#[test]
fn a_retried_delete_whose_first_try_went_through_never_removes_the_next_owners_claim() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let session = Duration::from_secs(10);
    let proxy = LossyProxy::start(server.port);
    let a_reg = ZkRegistry::open(&proxy.address("/doomed"), session).unwrap();
    let b_reg = ZkRegistry::open(&server.address("/doomed"), session).unwrap();

    let a = a_reg.claim("g", "t", 0, "a", session).unwrap().unwrap();
    a_reg.commit("g", "t", 0, 5, &a).unwrap();

    proxy.lose_replies();
    let released = Instant::now();
    let dropper = std::thread::spawn(move || drop(a));
    eventually("a's delete reached the ensemble", || {
        b_reg.owner("g", "t", 0).is_none()
    });
    let b = b_reg.claim("g", "t", 0, "b", session).unwrap().unwrap();
    dropper.join().unwrap();
    // Within a's session timeout: its session is alive on the ensemble.
    std::thread::sleep(Duration::from_secs(3));
    proxy.heal();
    assert!(released.elapsed() < Duration::from_secs(8));
    eventually("a's session is confirmed again", || {
        a_reg.session() == SessionState::Alive
    });
    // Time for a's keeper to retry what it owes.
    std::thread::sleep(Duration::from_secs(2));

    let owner = b_reg.owner("g", "t", 0).map(|o| o.member);
    let commit = b_reg.commit("g", "t", 0, 9, &b);
    assert!(
        owner.as_deref() == Some("b") && commit.is_ok(),
        "b's live claim was removed by a's retried delete: owner now {owner:?}, \
         b's commit: {commit:?}"
    );
    // Anyone may claim the partition b still consumes.
    assert!(
        a_reg.claim("g", "t", 0, "c", session).unwrap().is_none(),
        "a second member claimed the partition b holds"
    );
}

/// ZooKeeper loses its quorum for longer than a member's session timeout
/// (two of three servers die), then comes back. The member's client gives
/// its session up meanwhile (it heard nothing for 1.4 times the timeout),
/// but the ensemble restores every session when a leader is elected again,
/// with a fresh timeout: the member's old entry, under the same member id,
/// lives on for one more session timeout. The member must ride this out
/// (wait, as it waits for an owner that has not let go yet) and go on
/// consuming (it exited, with "held by another live session").
#[test]
fn a_member_rides_out_a_quorum_loss_longer_than_its_session_timeout() {
    let Some(mut ensemble) = common::zk::ZkEnsemble::start(3) else {
        return;
    };
    let registry = ensemble.address("/quorum-loss");
    let dir = tempfile::tempdir().unwrap();
    let broker = common::BrokerProc::start(dir.path(), &["--registry", &registry]);
    let (input, numbers) = (common::input, common::numbers);
    common::produce_to(&broker.addr, "t", &input(1, 100), &[]);
    let mut member = common::Proc::spawn(
        "klog-consume",
        &[
            "-G",
            "g",
            "--registry",
            &registry,
            "-t",
            "t",
            "--session-timeout",
            "3s",
        ],
    );
    let wait = Duration::from_secs(30);
    assert_eq!(member.take_lines(100, wait), numbers(1, 100));

    let leader = ensemble.wait_for_leader(wait);
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    ensemble.kill(others[0]);
    ensemble.kill(leader);
    std::thread::sleep(Duration::from_secs(7));
    ensemble.restart(others[0]);
    ensemble.wait_for_leader(wait);
    common::produce_to(&broker.addr, "t", &input(101, 200), &[]);

    let mut got = Vec::new();
    let deadline = Instant::now() + wait;
    // Records it handed out but had not committed before it lost its
    // session may come again (at least once); 101..=200 must come.
    let has_all = |got: &Vec<String>| numbers(101, 200).iter().all(|n| got.contains(n));
    while !has_all(&got) && Instant::now() < deadline {
        got.extend(member.lines.try_iter());
        if let Ok(Some(status)) = member.child.try_wait() {
            std::thread::sleep(Duration::from_millis(200));
            panic!(
                "the member exited ({status}) after ZooKeeper came back:\n{}",
                member.stderr_lines().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        has_all(&got),
        "the member handed out {} records after ZooKeeper came back:\n{}",
        got.len(),
        member.stderr_lines().join("\n")
    );
}
