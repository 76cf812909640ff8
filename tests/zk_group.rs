//! Consumer groups on a ZooKeeper registry when ZooKeeper itself fails:
//! real `klog-broker` and `klog-consume` processes, real ZooKeeper
//! servers (skipped with a printed line when ZooKeeper is not installed).

mod common;

use std::time::Duration;

use common::zk::{ZkEnsemble, ZkServer};
use common::{input, lines, numbers, produce_to, BrokerProc, Proc};

const WAIT: Duration = Duration::from_secs(30);

/// A ZooKeeper that stops answering (SIGSTOP) puts the member's session in
/// doubt: it hands out nothing until the session is confirmed again, then
/// goes on where it was, with nothing lost.
#[test]
fn a_member_hands_out_nothing_while_its_zookeeper_session_is_in_doubt() {
    let Some(server) = ZkServer::start() else {
        return;
    };
    let registry = server.address("/doubt");
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &["--registry", &registry]);
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
            "8s",
        ],
    );
    assert_eq!(member.take_lines(100, WAIT), numbers(1, 100));

    server.pause();
    member.wait_stderr("lost touch with the registry", |_| true, WAIT);
    // The broker serves without ZooKeeper; the member must not hand these
    // out while what it owns may be another's.
    produce_to(&broker.addr, "t", &input(101, 200), &[]);
    std::thread::sleep(Duration::from_secs(1));
    let early: Vec<String> = member.lines.try_iter().collect();
    server.resume();
    assert_eq!(early, Vec::<String>::new(), "handed out while in doubt");
    member.wait_stderr("session is confirmed again", |_| true, WAIT);
    assert_eq!(member.take_lines(100, WAIT), numbers(101, 200));
    let said = member.stderr_lines().join("\n");
    assert!(!said.contains("lost its session"), "{said}");
}

/// Killing the ZooKeeper leader of a 3-server ensemble while a group
/// consumes and a broker serves: sessions survive (no member loses its
/// session, no rebalance), and every record is delivered once.
#[test]
fn the_zookeeper_leader_dies_and_the_group_goes_on() {
    let Some(mut ensemble) = ZkEnsemble::start(3) else {
        return;
    };
    let registry = ensemble.address("/failover");
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &["--registry", &registry, "--partitions", "4"]);
    produce_to(&broker.addr, "t", &lines(400), &[]);
    let args = [
        "-G",
        "g",
        "--registry",
        &registry,
        "-t",
        "t",
        "--session-timeout",
        "6s",
    ];
    let (a, b) = (
        Proc::spawn("klog-consume", &args),
        Proc::spawn("klog-consume", &args),
    );
    let two = |l: &str| l.matches("t [").count() == 2;
    a.wait_stderr("Group g: member", two, WAIT);
    b.wait_stderr("Group g: member", two, WAIT);
    let rebalances = |p: &Proc| {
        let said = p.stderr_lines();
        said.iter()
            .filter(|l| l.contains("Group g: member"))
            .count()
    };
    let before = (rebalances(&a), rebalances(&b));

    let leader = ensemble.wait_for_leader(WAIT);
    ensemble.kill(leader);
    ensemble.wait_for_leader(WAIT);
    produce_to(&broker.addr, "t", &input(401, 800), &[]);
    let mut got: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    while got.len() < 800 && std::time::Instant::now() < deadline {
        got.extend(a.lines.try_iter());
        got.extend(b.lines.try_iter());
        std::thread::sleep(Duration::from_millis(50));
    }
    got.sort_by_key(|l| l.parse::<u64>().unwrap_or(u64::MAX));
    assert_eq!(got, numbers(1, 800), "every record once");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        (rebalances(&a), rebalances(&b)),
        before,
        "no rebalance: a {:?}\nb {:?}",
        a.stderr_lines(),
        b.stderr_lines()
    );
    for p in [&a, &b] {
        let said = p.stderr_lines().join("\n");
        assert!(!said.contains("lost its session"), "{said}");
    }
}
