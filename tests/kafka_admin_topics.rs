//! The topic and cluster admin APIs (issue 27) through every admin client
//! in CI: confluent-kafka, kafka-python, aiokafka and kafkajs create topics
//! (validate-only too), are refused a topic that exists or more replicas
//! than brokers, describe a topic's configs (the broker's) and the
//! cluster; in a cluster, a topic created with replicas is placed with
//! them, and Metadata gives each partition's leader epoch, which a
//! failover moves.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka::{self, KafkaBroker};
use common::registry::Backend;

/// An admin client's lines ([`kafka::admin`]).
fn run(client: &str, bootstrap: &str, args: &[&str]) -> Vec<String> {
    kafka::admin(client, bootstrap, args)
}

const CLIENTS: [&str; 4] = ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"];

#[test]
fn every_admin_client_creates_topics_and_describes_configs_and_the_cluster() {
    if kafka::python().is_none() || kafka::kafkajs().is_none() {
        return;
    }
    let args = ["--partitions", "2", "--auto-create-topics", "false"];
    let broker = KafkaBroker::with_registry(&[&args[..], &["--retention", "2d"]].concat());
    let registry = klog::coord::open_read_only(broker.registry.as_deref().unwrap()).unwrap();
    let partitions = |topic: &str| registry.placement(topic).unwrap().map(|p| p.brokers.len());
    let at = broker.kafka.as_str();
    for client in CLIENTS {
        let topic = format!("t-{client}");
        let checked = run(client, at, &["create", &topic, "3", "1", "validate"]);
        assert_eq!(checked, ["ok"], "{client} validates");
        assert_eq!(
            partitions(&topic),
            None,
            "{client}: validate-only creates nothing"
        );
        assert_eq!(
            run(client, at, &["create", &topic, "3", "1"]),
            ["ok"],
            "{client}"
        );
        assert_eq!(partitions(&topic), Some(3), "{client}: 3 partitions");
        let again = run(client, at, &["create", &topic, "3", "1"]);
        assert_eq!(again, ["error TOPIC_ALREADY_EXISTS"], "{client}");
        let replicated = run(client, at, &["create", &format!("r-{client}"), "1", "2"]);
        assert_eq!(
            replicated,
            ["error INVALID_REPLICATION_FACTOR"],
            "{client}: one broker"
        );
        let configs = run(client, at, &["configs", &topic]);
        for want in ["retention.ms=172800000", "cleanup.policy=delete"] {
            assert!(
                configs.iter().any(|c| c == want),
                "{client}: {want} in {configs:?}"
            );
        }
        assert_eq!(run(client, at, &["cluster"]), [at], "{client}");
    }
    // Produced to and read back as any topic.
    let k = broker.kcat(&kafka::kcat_path().unwrap());
    k.produce("t-kafkajs", b"one\ntwo\n", &["-p", "2"]);
    assert_eq!(k.consume("t-kafkajs", &["-p", "2"]), "one\ntwo\n");
}

/// In a cluster of two, a topic created with two replicas has both on
/// every partition, each broker serves its share, and every broker lists
/// both in DescribeCluster.
#[test]
fn a_topic_created_with_replicas_is_placed_on_as_many_brokers() {
    let Some(python) = kafka::python() else {
        return;
    };
    let cluster = Cluster::start(Backend::Dir, 2, &["--kafka-listen", "127.0.0.1:0"]).unwrap();
    let (first, second) = (cluster.kafka_addr(0), cluster.kafka_addr(1));
    let created = kafka::run_script(
        &python,
        "admin_clients.py",
        &["confluent-kafka", &first, "create", "rt", "4", "2"],
    );
    assert_eq!(created.trim(), "ok");
    let registry = klog::coord::open_read_only(cluster.spec()).unwrap();
    let placement = registry.placement("rt").unwrap().unwrap();
    assert_eq!(placement.brokers.len(), 4);
    for p in 0..4 {
        let replicas = placement.replicas_of(p).unwrap();
        assert_eq!(replicas.len(), 2, "partition {p}: {replicas:?}");
    }
    let mut both = vec![first.clone(), second.clone()];
    both.sort();
    common::eventually("both brokers list both", Duration::from_secs(20), || {
        [&first, &second]
            .iter()
            .all(|at| run("kafka-python", at, &["cluster"]) == both)
    });
}

/// Metadata v12 (the request built and the answer read by the
/// `kafka-protocol` crate) on `bootstrap`: each partition of `topic` as
/// (partition, leader node id, leader epoch).
fn leader_epochs(bootstrap: &str, topic: &str) -> Vec<(i32, i32, i32)> {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    let name = km::TopicName(StrBytes::from_string(topic.to_string()));
    let request = km::MetadataRequest::default().with_topics(Some(vec![
        km::metadata_request::MetadataRequestTopic::default().with_name(Some(name)),
    ]));
    let mut stream = std::net::TcpStream::connect(bootstrap).unwrap();
    let response: km::MetadataResponse = kafka::call_flexible(&mut stream, (3, 12), &request);
    let topic = &response.topics[0];
    assert_eq!(topic.error_code, 0, "{response:?}");
    topic
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0, p.leader_epoch))
        .collect()
}

/// Metadata (v7+) gives each partition its leader epoch, the registry's,
/// and a failover moves it, so that a Kafka consumer checks its position
/// with OffsetForLeaderEpoch when the leader changes (KIP-320).
#[test]
fn metadata_gives_each_partition_its_leader_epoch_and_a_failover_moves_it() {
    let Some(python) = kafka::python() else {
        return;
    };
    let mut cluster = Cluster::with_kafka(2, &[]).unwrap();
    let (first, second) = (cluster.kafka_addr(0), cluster.kafka_addr(1));
    let created = kafka::run_script(
        &python,
        "admin_clients.py",
        &["confluent-kafka", &first, "create", "ep", "1", "2"],
    );
    assert_eq!(created.trim(), "ok");
    cluster.wait_leader("ep", 0, Duration::from_secs(30));
    cluster.wait_full_isr("ep", 0, Duration::from_secs(30));
    // The registry's epoch, as both brokers answer it (the first election
    // may still move it meanwhile).
    let mut state = cluster.state("ep", 0).unwrap();
    common::eventually(
        "Metadata's epoch is the registry's",
        Duration::from_secs(20),
        || {
            state = cluster.state("ep", 0).unwrap();
            [&first, &second].iter().all(|at| {
                let (_, node, epoch) = leader_epochs(at, "ep")[0];
                node >= 0 && i64::from(epoch) == state.epoch as i64
            })
        },
    );
    let leader = cluster.slot_of(state.leader.as_deref().unwrap());
    let survivor = if leader == 0 { &second } else { &first };
    cluster.kill9(leader);
    let moved = cluster.wait_new_epoch("ep", 0, state.epoch, None, Duration::from_secs(60));
    common::eventually("the new epoch in Metadata", Duration::from_secs(20), || {
        let (_, node, epoch) = leader_epochs(survivor, "ep")[0];
        node >= 0 && i64::from(epoch) == moved.epoch as i64
    });
}

/// ListOffsets as confluent-kafka's admin client asks it (v7+): the
/// largest timestamp (KIP-734) is the first record that has it, with that
/// timestamp, not the last record; a time gives the first record at or
/// after it with its own timestamp; each answer has the offset's leader
/// epoch.
#[test]
fn list_offsets_finds_the_largest_timestamp_and_gives_leader_epochs() {
    let Some(python) = kafka::python() else {
        return;
    };
    let broker = KafkaBroker::with_registry(&[]);
    let bootstrap = broker.kafka.as_str();
    let admin = |args: &[&str]| {
        let mut all = vec!["confluent-kafka", bootstrap];
        all.extend_from_slice(args);
        kafka::run_script(&python, "admin_clients.py", &all)
    };
    let times = "1700000001000,1700000005000,1700000003000,1700000005000,1700000002000";
    assert_eq!(admin(&["produce-at", "ts", times]).trim(), "ok");
    // A single copy's log is in leader epoch 0.
    let got = admin(&[
        "list-offsets",
        "ts",
        "max",
        "earliest",
        "latest",
        "1700000002500",
    ]);
    let want = [
        "max 1 1700000005000 0",
        "earliest 0 -1 0",
        "latest 5 -1 0",
        "1700000002500 1 1700000005000 0",
    ];
    // Past every record: none, and no epoch.
    let past = admin(&["list-offsets", "ts", "1700000009000"]);
    assert_eq!(past.trim(), "1700000009000 -1 -1 None");
    assert_eq!(got.lines().collect::<Vec<_>>(), want);
}
