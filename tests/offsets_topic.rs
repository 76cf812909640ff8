//! Committed offsets in the offsets topic, `__consumer_offsets` (issue
//! 28): groups commit there, klog's members and Kafka clients alike; the
//! registry keeps membership and ownership, and its old offsets are
//! carried over once; commits go on through a failover of the topic's
//! leader and a ZooKeeper outage; a member that lost its claim cannot
//! commit, however late.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka::{kcat_path, KafkaBroker};
use common::registry::{Backend, TestRegistry};
use common::{bin, produce_to, BrokerProc};
use klog::coord::offsets_topic::{partition_of, TopicRegistry, OFFSETS_TOPIC};
use klog::error::{Error, ErrorCode};
use klog::protocol::{CommitMode, OffsetCommit};

/// Bound on each step.
const BOUND: Duration = Duration::from_secs(60);

fn lines(n: u64) -> String {
    (0..n).map(|i| format!("{i}\n")).collect()
}

/// Asserts that a broker refused an offset request `commit_fenced`.
fn assert_fenced<T: std::fmt::Debug>(answer: &klog::Result<T>) {
    assert!(
        matches!(
            answer,
            Err(Error::Broker {
                code: ErrorCode::CommitFenced,
                ..
            })
        ),
        "{answer:?}"
    );
}

/// How many records a `klog-consume -G group -e` member reads.
fn read_as_group(registry: &str, group: &str) -> usize {
    let out = bin("klog-consume")
        .args(["-t", "t", "-G", group, "--registry", registry, "-e", "-q"])
        .timeout(BOUND)
        .assert()
        .success();
    out.get_output()
        .stdout
        .iter()
        .filter(|b| **b == b'\n')
        .count()
}

#[test]
fn groups_commit_to_the_offsets_topic_and_registry_offsets_are_carried_over_once() {
    let broker = KafkaBroker::with_registry(&["--partitions", "1"]);
    let reg = broker.registry.clone().unwrap();
    produce_to(broker.addr(), "t", &lines(10), &[]);
    // Committed before the offsets topic existed: in the registry.
    let raw = klog::coord::open(&reg, klog::coord::SESSION_TIMEOUT).unwrap();
    raw.reset_offset("old", "t", 0, 4).unwrap();
    assert_eq!(read_as_group(&reg, "old"), 6, "carried over: from offset 4");
    assert_eq!(read_as_group(&reg, "new"), 10);
    assert_eq!(read_as_group(&reg, "new"), 0, "committed");
    let topic = klog::coord::offsets_topic::open_read_only(&reg).unwrap();
    assert_eq!(
        raw.committed("new", "t", 0).unwrap(),
        None,
        "not in the registry"
    );
    assert_eq!(topic.committed("new", "t", 0).unwrap(), Some(10));
    assert_eq!(
        raw.committed("old", "t", 0).unwrap(),
        Some(4),
        "left as it was"
    );
    assert_eq!(topic.committed("old", "t", 0).unwrap(), Some(10));
    // Carried over once: the registry's offsets are not read again.
    raw.reset_offset("old", "t", 0, 2).unwrap();
    assert_eq!(read_as_group(&reg, "old"), 0);
    // The records are the topic's, readable like any other's.
    let out = bin("klog-consume")
        .args([
            "-b",
            broker.addr(),
            "-t",
            OFFSETS_TOPIC,
            "-e",
            "-q",
            "-f",
            "%p\n",
        ])
        .timeout(BOUND)
        .assert()
        .success();
    let parts = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let at = |g| partition_of(g, 8).to_string();
    assert!(parts.lines().any(|p| p == at("new")), "{parts}");
    // Kafka's OffsetCommit and OffsetFetch go there too.
    let Some(kcat) = kcat_path() else {
        return;
    };
    let k = broker.kcat(&kcat);
    let args = ["-G", "kc", "-X", "auto.offset.reset=earliest", "-e", "t"];
    assert_eq!(k.ok(&args, b"").iter().filter(|b| **b == b'\n').count(), 10);
    assert_eq!(
        raw.committed("kc", "t", 0).unwrap(),
        None,
        "not in the registry"
    );
    assert_eq!(topic.committed("kc", "t", 0).unwrap(), Some(10));
    assert!(
        k.ok(&args, b"").is_empty(),
        "kcat fetched its group's offset"
    );
    assert_eq!(read_as_group(&reg, "kc"), 0, "one group for both kinds");
}

/// A claim's first word is its fence: from then on a commit of an older
/// claim (a member paused past its lease) is refused, before and after the
/// broker restarts and reads the topic again.
#[test]
fn a_late_commit_of_a_claim_taken_over_is_refused_even_after_a_restart() {
    let registry = TestRegistry::start(Backend::Dir).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = ["--registry", registry.spec(), "--partitions", "1"];
    let mut broker = BrokerProc::start(&data, &args);
    produce_to(&broker.addr, "t", &lines(10), &[]);
    let r = TopicRegistry::wrap(registry.open());
    let lease = Duration::from_millis(300);
    let paused = r.claim("g", "t", 0, "paused", lease).unwrap().unwrap();
    r.commit("g", "t", 0, 5, &paused).unwrap();
    std::thread::sleep(lease * 2);
    let next = r.claim("g", "t", 0, "next", BOUND).unwrap().unwrap();
    assert!(next.generation() > paused.generation());
    let late = r.commit("g", "t", 0, 9, &paused);
    let current = next.generation();
    assert!(
        matches!(late, Err(Error::Fenced { current: c, .. }) if c == current),
        "{late:?}"
    );
    assert_eq!(r.committed("g", "t", 0).unwrap(), Some(5));
    r.commit("g", "t", 0, 7, &next).unwrap();
    broker.terminate();
    let broker = BrokerProc::start(&data, &args);
    let late = r.commit("g", "t", 0, 10, &paused);
    assert!(matches!(late, Err(Error::Fenced { .. })), "{late:?}");
    r.commit("g", "t", 0, 8, &next).unwrap();
    assert_eq!(r.committed("g", "t", 0).unwrap(), Some(8));
    drop(broker);
}

/// A registry rebuilt from nothing (ZooKeeper's data lost, a directory
/// made again) issues generations from the start, below the fences the
/// topic holds: they were another cluster id's, so its claims take the
/// groups over with the offsets stored before, and fence each other as
/// ever.
#[test]
fn a_rebuilt_registry_takes_its_groups_over_with_their_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (data, reg) = (dir.path().join("data"), dir.path().join("registry"));
    let reg = reg.to_str().unwrap();
    let args = ["--registry", reg, "--partitions", "1"];
    let mut broker = BrokerProc::start(&data, &args);
    produce_to(&broker.addr, "t", &lines(10), &[]);
    let open = || {
        let registry = klog::coord::DirRegistry::open(reg).unwrap();
        TopicRegistry::wrap(std::sync::Arc::new(registry))
    };
    let r = open();
    let lease = Duration::from_millis(300);
    for _ in 0..3 {
        let claim = r.claim("g", "t", 0, "m", lease).unwrap().unwrap();
        r.commit("g", "t", 0, 5, &claim).unwrap();
        drop(claim);
        std::thread::sleep(lease * 2);
    }
    let before = r.claim("g", "t", 0, "m", lease).unwrap().unwrap();
    let fenced_at = before.generation();
    drop((r, before));
    broker.terminate();
    std::fs::remove_dir_all(reg).unwrap();
    let _broker = BrokerProc::start(&data, &args);
    let r = open();
    let paused = r.claim("g", "t", 0, "paused", lease).unwrap().unwrap();
    assert!(
        paused.generation() < fenced_at,
        "the generations start again"
    );
    assert_eq!(r.committed("g", "t", 0).unwrap(), Some(5));
    r.commit("g", "t", 0, 7, &paused).unwrap();
    assert_eq!(r.committed("g", "t", 0).unwrap(), Some(7));
    // Its claims fence each other as ever.
    std::thread::sleep(lease * 2);
    let next = r.claim("g", "t", 0, "next", BOUND).unwrap().unwrap();
    let late = r.commit("g", "t", 0, 9, &paused);
    let current = next.generation();
    assert!(
        matches!(late, Err(Error::Fenced { current: c, .. }) if c == current),
        "{late:?}"
    );
    assert_eq!(r.committed("g", "t", 0).unwrap(), Some(7));
}

/// A client's generation is believed only when the registry says it is a
/// current claim; a deleted offset keeps its fence; no client writes the
/// topic but its brokers.
#[test]
fn made_up_generations_deleted_offsets_and_produces_cannot_go_round_the_fence() {
    let registry = TestRegistry::start(Backend::Dir).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let args = ["--registry", registry.spec(), "--partitions", "1"];
    let broker = BrokerProc::start(&dir.path().join("data"), &args);
    produce_to(&broker.addr, "t", &lines(10), &[]);
    let r = TopicRegistry::wrap(registry.open());
    let lease = Duration::from_millis(300);
    let paused = r.claim("g", "t", 0, "paused", lease).unwrap().unwrap();
    r.commit("g", "t", 0, 5, &paused).unwrap();
    // A generation no claim has, sent as it is: refused, nothing stored.
    let mut c = klog::client::Connection::connect(&broker.addr).unwrap();
    let forged = OffsetCommit {
        group: "g".into(),
        topic: "t".into(),
        partition: 0,
        offset: 1,
        generation: u64::MAX,
        mode: CommitMode::Reset,
    };
    assert_fenced(&c.offset_commit(&forged));
    assert_eq!(r.committed("g", "t", 0).unwrap(), Some(5));
    // Taken over, then deleted: the paused member's commit stays refused.
    std::thread::sleep(lease * 2);
    let next = r.claim("g", "t", 0, "next", BOUND).unwrap().unwrap();
    let taken = next.generation();
    drop(next);
    assert!(r.delete_offset("g", "t", 0).unwrap());
    assert_eq!(r.committed("g", "t", 0).unwrap(), None);
    // The delete's own claim is the fence now, later than `next`'s.
    let late = r.commit("g", "t", 0, 9, &paused);
    assert!(
        matches!(late, Err(Error::Fenced { current, .. }) if current > taken),
        "{late:?}"
    );
    assert_eq!(r.committed("g", "t", 0).unwrap(), None);
    // Only its brokers write the offsets topic.
    bin("klog-produce")
        .args(["-b", &broker.addr, "-t", OFFSETS_TOPIC, "-q"])
        .write_stdin("x\n")
        .timeout(BOUND)
        .assert()
        .failure()
        .stderr(predicates::str::contains("internal"));
}

/// Offsets in a registry that do not parse, of a group not carried over
/// yet, on two topics: doing what the error says for each in turn repairs
/// both (the reset of the one is not refused for good for the other), and
/// they hold up no topic's deletion.
#[test]
fn damaged_registry_offsets_are_reset_in_turn_and_hold_up_no_deletion() {
    let broker = KafkaBroker::with_registry(&["--partitions", "1"]);
    let reg = broker.registry.clone().unwrap();
    for topic in ["t", "u", "v"] {
        produce_to(broker.addr(), topic, &lines(10), &[]);
    }
    // Another group's commits make the offsets topic.
    assert_eq!(read_as_group(&reg, "first"), 10);
    for (group, topic) in [("two", "t"), ("two", "u"), ("other", "v")] {
        let journal = std::path::Path::new(&reg).join(format!("offsets/{group}/{topic}-0/0"));
        std::fs::create_dir_all(&journal).unwrap();
        std::fs::write(journal.join("offsets.log"), b"garbage").unwrap();
    }
    if common::kafka::python().is_some() {
        let admin = |args: &[&str]| common::kafka::admin("confluent-kafka", &broker.kafka, args);
        assert_eq!(admin(&["delete-topic", "v"]), ["ok"]);
        // Deleted to its end: the name is free again.
        assert_eq!(admin(&["create", "v", "1", "1"]), ["ok"]);
    }
    let reset = |topic: &str| {
        bin("klog-consume")
            .args(["-t", topic, "-G", "two", "--registry", &reg])
            .args(["--reset-offsets", "beginning"])
            .timeout(BOUND)
            .output()
            .unwrap()
    };
    let first = reset("t");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        !first.status.success() && stderr.contains("two/u-0"),
        "{stderr}"
    );
    for topic in ["u", "t"] {
        let done = reset(topic);
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(done.status.success(), "{topic}: {stderr}");
    }
    assert_eq!(read_as_group(&reg, "two"), 10);
}

/// Kafka's admin clients cannot delete the offsets topic nor change its
/// partition count (which places the groups).
#[test]
fn admin_clients_cannot_delete_or_grow_the_offsets_topic() {
    let Some(_python) = common::kafka::python() else {
        return;
    };
    let broker = KafkaBroker::with_registry(&["--partitions", "1"]);
    let reg = broker.registry.clone().unwrap();
    produce_to(broker.addr(), "t", &lines(3), &[]);
    assert_eq!(read_as_group(&reg, "g"), 3);
    let admin = |args: &[&str]| common::kafka::admin("confluent-kafka", &broker.kafka, args);
    assert_eq!(
        admin(&["delete-topic", OFFSETS_TOPIC]),
        ["error POLICY_VIOLATION"]
    );
    assert_eq!(
        admin(&["add-partitions", OFFSETS_TOPIC, "20"]),
        ["error POLICY_VIOLATION"]
    );
    assert_eq!(
        read_as_group(&reg, "g"),
        0,
        "the group's offsets are where they were"
    );
}

/// A group commits on while the leader of its partition of the offsets
/// topic is killed: a new leader serves the same offsets.
#[test]
fn a_group_commits_through_a_failover_of_its_offsets_leader() {
    let mut cluster = Cluster::three_fast(&["--offsets-topic-partitions", "2"]);
    let produce = |cluster: &Cluster, n: u64| {
        bin("klog-produce")
            .args([
                "--registry",
                cluster.spec(),
                "-t",
                "t",
                "-q",
                "--acks",
                "all",
            ])
            .write_stdin(lines(n))
            .timeout(BOUND)
            .assert()
            .success();
    };
    produce(&cluster, 100);
    let reg = cluster.spec().to_string();
    assert_eq!(read_as_group(&reg, "g"), 100);
    let p = partition_of("g", 2);
    cluster.wait_full_isr(OFFSETS_TOPIC, p, BOUND);
    let state = cluster.wait_leader(OFFSETS_TOPIC, p, BOUND);
    let leads = cluster.slot_of(state.leader.as_deref().unwrap());
    cluster.kill9(leads);
    produce(&cluster, 50);
    assert_eq!(
        read_as_group(&reg, "g"),
        50,
        "the commit survived its leader"
    );
    assert_eq!(
        read_as_group(&reg, "g"),
        0,
        "and the new leader took commits"
    );
    let moved = cluster.wait_leader(OFFSETS_TOPIC, p, BOUND);
    assert_ne!(moved.leader, state.leader);
    let topic = klog::coord::offsets_topic::open_read_only(&reg).unwrap();
    assert_eq!(topic.committed("g", "t", 0).unwrap(), Some(150));
}

/// Commits need no registry: while ZooKeeper answers nothing, a member
/// that holds its claim commits on.
#[test]
fn commits_go_on_while_zookeeper_answers_nothing() {
    let Some(registry) = TestRegistry::start(Backend::Zk) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let args = ["--registry", registry.spec(), "--partitions", "1"];
    let broker = BrokerProc::start(&dir.path().join("data"), &args);
    produce_to(&broker.addr, "t", &lines(10), &[]);
    let r = TopicRegistry::wrap(registry.open());
    let claim = r.claim("g", "t", 0, "m", BOUND).unwrap().unwrap();
    r.commit("g", "t", 0, 1, &claim).unwrap();
    let zk = registry.zk_server().unwrap();
    zk.pause();
    // A fence of a generation the broker has not seen asks the registry,
    // which answers nothing: that request waits, and only it.
    let addr = broker.addr.clone();
    let asking = std::thread::spawn(move || {
        let fence = OffsetCommit {
            group: "g".into(),
            topic: "other".into(),
            partition: 0,
            offset: 0,
            generation: 1 << 40,
            mode: CommitMode::Fence,
        };
        klog::client::Connection::connect(&addr).and_then(|mut c| c.offset_commit(&fence))
    });
    // So does a group new to the partition, whose registry offsets are
    // read to be carried over.
    let fresh = (0..)
        .map(|i| format!("fresh-{i}"))
        .find(|f| partition_of(f, 8) == partition_of("g", 8))
        .unwrap();
    let addr = broker.addr.clone();
    let carrying = std::thread::spawn(move || {
        let fetch = klog::protocol::OffsetFetch {
            group: fresh,
            topic: None,
            partition: None,
        };
        klog::client::Connection::connect(&addr).and_then(|mut c| c.offset_fetch(&fetch))
    });
    std::thread::sleep(Duration::from_millis(500));
    let beside = r.commit("g", "t", 0, 2, &claim);
    let waited = asking.is_finished() || carrying.is_finished();
    // An outage of a few seconds, a commit every second of it.
    let during: Vec<_> = (3..=4)
        .map(|o| {
            std::thread::sleep(Duration::from_secs(1));
            r.commit("g", "t", 0, o, &claim)
        })
        .collect();
    let fetched = r.committed("g", "t", 0);
    zk.resume();
    assert!(beside.is_ok(), "{beside:?}");
    assert!(
        !waited,
        "a commit waited for another request's registry read"
    );
    assert!(during.iter().all(Result::is_ok), "{during:?}");
    assert_eq!(fetched.unwrap(), Some(4));
    // A generation no claim has: refused, once the registry answers.
    assert_fenced(&asking.join().unwrap());
    let carried = carrying.join().unwrap();
    assert!(carried.is_ok(), "{carried:?}");
    drop(broker);
}
