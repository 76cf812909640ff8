//! Kafka clients whose own assignor shares out a group's partitions
//! (issue 27): kafkajs with its defaults (its `RoundRobinAssigner`), and
//! librdkafka's cooperative rebalancing (KIP-429), get Kafka's classic
//! protocol: a leader among them assigns, the broker passes the
//! assignments on (claiming each partition in the registry first) and
//! keeps the committed offsets. Such a group is theirs alone: klog's
//! members, and Kafka members the broker assigns, are refused with a line
//! that says why.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::cluster::Cluster;
use common::kafka::{self, KafkaBroker};
use common::registry::Backend;
use common::{bin, lines};

/// How long a client script may run.
const CLIENT: Duration = Duration::from_secs(150);

/// The registry's committed offset of each partition of `topic`.
fn committed(broker: &KafkaBroker, group: &str, topic: &str, partitions: u32) -> Vec<Option<u64>> {
    let registry =
        klog::coord::offsets_topic::open_read_only(broker.registry.as_deref().unwrap()).unwrap();
    (0..partitions)
        .map(|p| registry.committed(group, topic, p).unwrap())
        .collect()
}

/// The next offset of each partition of `records` ([partition, offset, value]).
fn ends(records: &[serde_json::Value], partitions: u32) -> Vec<Option<u64>> {
    let mut ends = vec![None; partitions as usize];
    for r in records {
        let (p, offset) = (r[0].as_u64().unwrap() as usize, r[1].as_u64().unwrap());
        ends[p] = ends[p].max(Some(offset + 1));
    }
    ends
}

/// The values of `records`, each once.
fn values(records: &[serde_json::Value]) -> BTreeSet<u64> {
    records
        .iter()
        .map(|r| r[2].as_str().unwrap().parse().unwrap())
        .collect()
}

/// The last line of a script's output, as JSON.
fn summary(out: &str) -> serde_json::Value {
    let last = out.lines().last().unwrap_or_else(|| panic!("no output"));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// kafkajs's consumers with their defaults form a group, the leader's
/// RoundRobinAssigner shares out the partitions, every record is read,
/// and the offsets they commit are the registry's (before, every join was
/// refused INCONSISTENT_GROUP_PROTOCOL).
#[test]
fn kafkajs_consumers_with_their_defaults_share_a_group() {
    let Some(kafkajs) = kafka::kafkajs() else {
        return;
    };
    let broker = KafkaBroker::with_registry(&["--partitions", "4"]);
    broker.produce_lines("t1", 1000);
    let args = [broker.kafka.as_str(), "t1", "g1", "1000", "2"];
    let out = kafka::run_node(&kafkajs, "kafkajs_group.js", &args, CLIENT);
    let summary = summary(&out);
    let members = summary["members"].as_array().unwrap();
    let mut owned = BTreeMap::new();
    for m in members {
        assert_eq!(m["protocol"], "RoundRobinAssigner", "{summary}");
        for p in m["assignment"].as_array().unwrap() {
            *owned.entry(p.as_u64().unwrap()).or_insert(0) += 1;
        }
    }
    let once: BTreeMap<u64, i32> = (0..4).map(|p| (p, 1)).collect();
    assert_eq!(
        owned, once,
        "each partition owned by one member: {members:?}"
    );
    let records = summary["records"].as_array().unwrap();
    assert_eq!(values(records), (1..=1000).collect(), "every record read");
    assert_eq!(
        committed(&broker, "g1", "t1", 4),
        ends(records, 4),
        "what they read is committed"
    );
}

/// confluent-kafka members with `partition.assignment.strategy=
/// cooperative-sticky` hand partitions over incrementally as a member
/// comes and goes: none owned twice (the script checks after every
/// assign and revoke), the first member gives up only what the second
/// gets, commits of partitions being given up succeed (their claims stay
/// until the member rejoins), nothing is lost.
#[test]
fn cooperative_sticky_members_hand_partitions_over() {
    let Some(python) = kafka::python() else {
        return;
    };
    let broker = KafkaBroker::with_registry(&["--partitions", "4"]);
    broker.produce_lines("t1", 3000);
    let args = [broker.kafka.as_str(), "t1", "g1", "3000"];
    let summary = summary(&kafka::run_script(&python, "cooperative.py", &args));
    let history = summary["history"].as_array().unwrap();
    let first_revoke = history
        .iter()
        .find(|h| h[0] == "a" && h[1] == "revoke" && !h[2].as_array().unwrap().is_empty())
        .unwrap_or_else(|| panic!("a never gave a partition up: {history:?}"));
    let given_up = first_revoke[2].as_array().unwrap().len();
    assert!(
        (1..4).contains(&given_up),
        "a gives up some partitions, not all (eager): {history:?}"
    );
    let records = summary["records"].as_array().unwrap();
    assert_eq!(values(records), (1..=3000).collect(), "every record read");
    assert_eq!(
        committed(&broker, "g1", "t1", 4),
        ends(records, 4),
        "what they read is committed"
    );
}

/// A group of kcat members whose leader assigns (cooperative-sticky) is
/// theirs: `klog-consume -G` refuses to join it and says why, and a kcat
/// offering only the broker's assignors is refused with a line in the
/// broker's log.
#[test]
fn a_group_whose_leader_assigns_is_kafka_clients_alone() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let broker = KafkaBroker::with_registry(&["--partitions", "2"]);
    broker.produce_lines("t1", 100);
    let k = broker.kcat(&kcat);
    let strategy = "partition.assignment.strategy=cooperative-sticky";
    let _member = k.spawn(&["-G", "g1", "-X", strategy, "t1"]);
    let registry =
        klog::coord::offsets_topic::open_read_only(broker.registry.as_deref().unwrap()).unwrap();
    common::eventually("kcat joins g1", Duration::from_secs(30), || {
        let members = registry.members("g1").unwrap_or_default();
        members.iter().any(|m| m.coordinator.is_some())
    });
    let out = bin("klog-consume")
        .args(["-t", "t1", "-G", "g1", "--registry"])
        .arg(broker.registry.as_deref().unwrap())
        .args(["-e", "-q"])
        .timeout(kafka::CLIENT_TIMEOUT)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "klog-consume joined: {stderr}");
    assert!(
        stderr.contains("Kafka clients whose own assignor"),
        "says why: {stderr}"
    );
    let _range = k.spawn(&[
        "-G",
        "g1",
        "-X",
        "partition.assignment.strategy=range",
        "t1",
    ]);
    broker
        .broker
        .wait_for_log("group g1: refused", Duration::from_secs(30));
}

/// kafkajs consumers that start on two brokers of a cluster end in one
/// group, coordinated by one broker (FindCoordinator names it, the other
/// answers NOT_COORDINATOR, and a group two brokers took at once settles
/// on one): each partition owned once, every record read.
#[test]
fn kafkajs_consumers_on_two_brokers_form_one_group() {
    let Some(kafkajs) = kafka::kafkajs() else {
        return;
    };
    let args = ["--kafka-listen", "127.0.0.1:0", "--partitions", "4"];
    let cluster = Cluster::start(Backend::Dir, 2, &args).unwrap();
    let kafka_of = |slot: usize| {
        let log = cluster.log(slot);
        let line = log
            .iter()
            .find_map(|l| l.strip_prefix("% Listening for Kafka clients on "));
        line.map(str::to_string).unwrap()
    };
    let both = format!("{},{}", kafka_of(0), kafka_of(1));
    let registry = klog::coord::open_read_only(cluster.spec()).unwrap();
    let placed = || registry.placement("t1").unwrap().is_some();
    // The topic, placed over both brokers: produced through each's share.
    let k = kafka::Kcat::at(&kafka::kcat_path().unwrap(), &kafka_of(0));
    k.produce("t1", lines(400).as_bytes(), &[]);
    assert!(placed());
    let args = [both.as_str(), "t1", "g1", "400", "2"];
    let out = kafka::run_node(&kafkajs, "kafkajs_group.js", &args, CLIENT);
    let summary = summary(&out);
    let mut owned = BTreeMap::new();
    for m in summary["members"].as_array().unwrap() {
        for p in m["assignment"].as_array().unwrap() {
            *owned.entry(p.as_u64().unwrap()).or_insert(0) += 1;
        }
    }
    let once: BTreeMap<u64, i32> = (0..4).map(|p| (p, 1)).collect();
    assert_eq!(owned, once, "{summary}");
    let records = summary["records"].as_array().unwrap();
    assert_eq!(values(records), (1..=400).collect(), "every record read");
    let coordinators: BTreeSet<String> = registry
        .members("g1")
        .unwrap()
        .into_iter()
        .filter_map(|m| m.coordinator)
        .collect();
    assert!(coordinators.len() <= 1, "one coordinator: {coordinators:?}");
}
