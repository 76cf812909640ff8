//! Brokers and group members on a ZooKeeper registry when ZooKeeper stops
//! answering or never comes back: they end promptly on a signal, fail
//! clearly, do not grow, and say when their id was taken (the real
//! binaries against a real ZooKeeper server; skipped with a printed line
//! without one).

mod common;

use std::time::{Duration, Instant};

use common::zk::ZkServer;
use common::{input, produce_to, BrokerProc, Proc};

const WAIT: Duration = Duration::from_secs(30);
/// What "promptly" means here: the project's tools end within a second
/// of a signal; this allows three.
const PROMPT: Duration = Duration::from_secs(3);

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

/// Waits for `child` to exit, at most `bound`: the time it took, or
/// `None` if it was still running (then it is killed).
fn time_exit(child: &mut std::process::Child, bound: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < bound {
        if child.try_wait().unwrap().is_some() {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A status line of /proc/PID/status, as a number.
fn status(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A broker on a ZooKeeper registry holding topic `t` of 4 partitions
/// with records 1..=100, and a group member that has consumed them.
fn member_consuming(
    server: &ZkServer,
    chroot: &str,
    session: &str,
) -> (BrokerProc, Proc, tempfile::TempDir) {
    let registry = server.address(chroot);
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &["--registry", &registry, "--partitions", "4"]);
    produce_to(&broker.addr, "t", &input(1, 100), &[]);
    let member = Proc::spawn(
        "klog-consume",
        &[
            "-G",
            "g",
            "--registry",
            &registry,
            "-t",
            "t",
            "--session-timeout",
            session,
        ],
    );
    assert_eq!(member.take_lines(100, WAIT).len(), 100);
    (broker, member, dir)
}

/// SIGINT to a member `after` the ZooKeeper server stopped answering.
fn sigint_while_zookeeper_is_paused(after: Duration) {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (_broker, mut member, _dir) = member_consuming(&server, "/sigint", "10s");
    server.pause();
    std::thread::sleep(after);
    signal(member.child.id(), nix::sys::signal::Signal::SIGINT);
    let took = time_exit(&mut member.child, Duration::from_secs(60));
    server.resume();
    assert!(
        took.is_some_and(|t| t < PROMPT),
        "klog-consume -G ended {took:?} after SIGINT, ZooKeeper paused {after:?} before:\n{}",
        member.stderr_lines().join("\n")
    );
}

/// ZooKeeper stopped 2 s ago: the client still thinks it is connected,
/// but the ensemble has not answered for more than a third of the
/// session timeout (3.3 s of 10 s) soon, so every look at the session
/// asks it first.
#[test]
fn sigint_ends_a_member_promptly_just_after_zookeeper_stops_answering() {
    sigint_while_zookeeper_is_paused(Duration::from_secs(2));
}

/// ZooKeeper stopped 9 s ago: the member's connection is in doubt.
#[test]
fn sigint_ends_a_member_promptly_while_disconnected_from_zookeeper() {
    sigint_while_zookeeper_is_paused(Duration::from_secs(9));
}

/// ZooKeeper stopped 25 s ago, past 1.4 session timeouts: the client gave
/// its session up and the member tries to join again, with no ensemble.
#[test]
fn sigint_ends_a_member_promptly_when_the_ensemble_never_comes_back() {
    sigint_while_zookeeper_is_paused(Duration::from_secs(25));
}

/// SIGTERM to a broker `after` its ZooKeeper stopped answering.
fn sigterm_broker_while_zookeeper_is_paused(after: Duration) {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let registry = server.address("/sigterm");
    let dir = tempfile::tempdir().unwrap();
    let mut broker = BrokerProc::start(dir.path(), &["--registry", &registry]);
    produce_to(&broker.addr, "t", &input(1, 10), &[]);
    server.pause();
    std::thread::sleep(after);
    signal(broker.child.id(), nix::sys::signal::Signal::SIGTERM);
    let took = time_exit(&mut broker.child, Duration::from_secs(60));
    server.resume();
    assert!(
        took.is_some_and(|t| t < PROMPT),
        "klog-broker ended {took:?} after SIGTERM, ZooKeeper paused {after:?} before:\n{}",
        broker.log().join("\n")
    );
}

#[test]
fn sigterm_ends_a_broker_promptly_while_disconnected_from_zookeeper() {
    sigterm_broker_while_zookeeper_is_paused(Duration::from_secs(9));
}

#[test]
fn sigterm_ends_a_broker_promptly_when_its_session_is_gone_and_zookeeper_is_down() {
    sigterm_broker_while_zookeeper_is_paused(Duration::from_secs(25));
}

/// A broker started while its ZooKeeper does not answer fails with a
/// clear error, within its connect deadline.
#[test]
fn a_broker_started_while_zookeeper_is_down_fails_clearly() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let registry = server.address("/down");
    server.pause();
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-broker"))
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--registry", &registry])
        .output()
        .unwrap();
    let took = started.elapsed();
    server.resume();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(took < Duration::from_secs(15), "took {took:?}: {stderr}");
    assert!(stderr.contains("registry"), "{stderr}");
}

/// A group member through repeated ZooKeeper outages, each longer than
/// its session timeout (so each ends in a new session): its threads and
/// memory must not grow with each one.
#[test]
fn a_member_does_not_grow_across_zookeeper_outages() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let (broker, member, _dir) = member_consuming(&server, "/cycles", "1s");
    let pid = member.child.id();
    let mut samples = Vec::new();
    let mut next = 101;
    for cycle in 0..8 {
        server.pause();
        std::thread::sleep(Duration::from_millis(2500));
        server.resume();
        // It consumes again (a new session, a new share).
        produce_to(&broker.addr, "t", &input(next, next + 9), &[]);
        next += 10;
        member.take_lines(10, WAIT);
        std::thread::sleep(Duration::from_millis(500));
        let sample = (status(pid, "Threads:"), status(pid, "VmRSS:"));
        eprintln!("cycle {cycle}: threads {}, rss {} KiB", sample.0, sample.1);
        samples.push(sample);
    }
    let lost = member
        .stderr_lines()
        .iter()
        .filter(|l| l.contains("lost its session"))
        .count();
    assert!(
        lost >= 4,
        "only {lost} sessions were lost: the outages did not test renewal"
    );
    let (first, last) = (samples[1], samples[samples.len() - 1]);
    assert!(
        last.0 <= first.0 + 1,
        "threads grew from {} to {} over {} outages: {samples:?}\n{}",
        first.0,
        last.0,
        samples.len() - 1,
        member.stderr_lines().join("\n")
    );
}

/// Broker A stops (SIGSTOP) past its session timeout; broker B, with the
/// same broker id, registers meanwhile; A runs again. A cannot register
/// again (the id is B's, held by a live session): it must say so (the
/// keeper's doc: "said on stderr"), not serve on silently unregistered.
#[test]
fn a_broker_whose_id_was_taken_while_it_was_expired_says_so() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let registry = server.address("/dup");
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = BrokerProc::start(a_dir.path(), &["--registry", &registry]);
    let id = std::fs::read_to_string(a_dir.path().join("broker-id")).unwrap();
    std::fs::write(b_dir.path().join("broker-id"), &id).unwrap();
    signal(a.child.id(), nix::sys::signal::Signal::SIGSTOP);
    // B is refused while A's session lives, then registers.
    let started = Instant::now();
    let b = loop {
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "B never registered"
        );
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-broker"))
            .args([
                "--data-dir",
                b_dir.path().to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--registry", &registry])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = out;
        std::thread::sleep(Duration::from_secs(2));
        if child.try_wait().unwrap().is_none() {
            break child;
        }
    };
    let mut b = scopeguard(b);
    let before = a.log().len();
    signal(a.child.id(), nix::sys::signal::Signal::SIGCONT);
    // A finds its session expired, and its id taken.
    std::thread::sleep(Duration::from_secs(8));
    let log = a.log()[before..].to_vec();
    let exited = a.child.try_wait().unwrap();
    if exited.is_none() {
        // It serves on: records produced to it directly are taken.
        produce_to(&a.addr, "u", &input(1, 3), &[]);
    }
    let _ = b.0.kill();
    assert!(
        exited.is_some() || log.iter().any(|l| l.contains(id.trim())),
        "broker A ({}) serves on (it took records just now), not registered, and said nothing \
         since it ran again: {log:?}",
        id.trim()
    );
}

/// Kills the child when dropped.
struct Guard(std::process::Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
fn scopeguard(child: std::process::Child) -> Guard {
    Guard(child)
}

/// Two brokers create the same topics at the same moment: one placement
/// holds for each, both brokers agree with it, and every record produced
/// through the registry is consumed through it.
#[test]
fn two_brokers_creating_the_same_topic_at_once_agree() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let registry = server.address("/race");
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = BrokerProc::start(a_dir.path(), &["--registry", &registry]);
    let b = BrokerProc::start(b_dir.path(), &["--registry", &registry]);
    let topics: Vec<String> = (0..8).map(|i| format!("race{i}")).collect();
    let barrier = std::sync::Barrier::new(2);
    let (a_addr, b_addr) = (a.addr.clone(), b.addr.clone());
    let counts = std::thread::scope(|s| {
        let (topics, barrier) = (&topics, &barrier);
        let run = move |addr: &str| {
            let mut conn = klog::client::Connection::connect(addr).unwrap();
            barrier.wait();
            topics
                .iter()
                .map(|t| conn.create_topic(t, 4).map_err(|e| e.to_string()))
                .collect::<Vec<_>>()
        };
        let ta = s.spawn(move || run(&a_addr));
        let tb = s.spawn(move || run(&b_addr));
        (ta.join().unwrap(), tb.join().unwrap())
    });
    assert_eq!(
        counts.0, counts.1,
        "the brokers disagree on the partition counts"
    );
    for topic in &topics {
        common::bin("klog-produce")
            .args(["--registry", &registry, "-t", topic, "-q"])
            .write_stdin(input(1, 40))
            .timeout(Duration::from_secs(60))
            .assert()
            .success();
        let got = common::consume_registry(&registry, topic, &[]);
        let mut got: Vec<u64> = got.lines().map(|l| l.parse().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(
            got,
            (1..=40).collect::<Vec<_>>(),
            "{topic}: {:?} {:?}",
            a.log(),
            b.log()
        );
    }
}
