//! DeleteTopics (issue 27) through every admin client in CI
//! (confluent-kafka, kafka-python, aiokafka, kafkajs): a topic is gone
//! from the broker, its files and the registry, and its name makes a new,
//! empty topic. In a cluster, a broker that is down when a topic is
//! deleted deletes its copy when it runs again, and the name cannot be
//! created meanwhile, so that no old record ever shows in a new topic of
//! the same name.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka::{self, KafkaBroker};
use common::registry::Backend;

/// An admin client's lines ([`kafka::admin`]).
fn run(client: &str, bootstrap: &str, args: &[&str]) -> Vec<String> {
    kafka::admin(client, bootstrap, args)
}

/// Partition 0's earliest and latest offsets ([`kafka::earliest_latest`]).
fn offsets(bootstrap: &str, topic: &str) -> (i64, i64) {
    kafka::earliest_latest(bootstrap, topic)
}

#[test]
fn every_admin_client_deletes_a_topic_and_its_name_makes_a_new_one() {
    if kafka::python().is_none() || kafka::kafkajs().is_none() {
        return;
    }
    let broker = KafkaBroker::with_registry(&["--auto-create-topics", "false"]);
    let at = broker.kafka.as_str();
    let registry = klog::coord::open_read_only(broker.registry.as_deref().unwrap()).unwrap();
    for client in ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"] {
        let topic = format!("d-{client}");
        let create = ["create", &topic, "2", "1", "retention.ms=3600000"];
        assert_eq!(run(client, at, &create), ["ok"], "{client}");
        assert_eq!(
            run("confluent-kafka", at, &["produce", &topic, "0", "10"]),
            ["ok"]
        );
        assert_eq!(offsets(at, &topic), (0, 1), "{client}");
        assert_eq!(
            run(client, at, &["delete-topic", &topic]),
            ["ok"],
            "{client}"
        );
        assert_eq!(
            common::partition_dirs(&broker.data_dir(), &topic),
            0,
            "{client}: files gone"
        );
        assert!(registry.placement(&topic).unwrap().is_none(), "{client}");
        assert!(
            registry.config("topics", &topic).unwrap().is_none(),
            "{client}: configs gone"
        );
        assert!(
            registry.configs("deleting").unwrap().is_empty(),
            "{client}: complete"
        );
        // Metadata for every topic (librdkafka's list_topics) leaves it out.
        let listed = run("confluent-kafka", at, &["topics"]);
        assert!(!listed.contains(&topic), "{client}: {listed:?}");
        let again = run(client, at, &["delete-topic", &topic]);
        assert!(
            again[0].starts_with("error UNKNOWN_TOPIC"),
            "{client}: {again:?}"
        );
        // The name makes a new topic, empty, with the broker's configs.
        assert_eq!(
            run(client, at, &["create", &topic, "1", "1"]),
            ["ok"],
            "{client}"
        );
        assert_eq!(
            offsets(at, &topic),
            (0, 0),
            "{client}: nothing of the old one"
        );
        let configs = run("confluent-kafka", at, &["configs", &topic]);
        assert!(
            configs.iter().any(|c| c == "retention.ms=604800000"),
            "{configs:?}"
        );
    }
}

#[test]
fn without_a_registry_the_brokers_copy_is_deleted() {
    if kafka::python().is_none() {
        return;
    }
    let broker = KafkaBroker::start(&[]);
    let at = broker.kafka.as_str();
    let c = "confluent-kafka";
    assert_eq!(run(c, at, &["create", "solo", "3", "1"]), ["ok"]);
    assert_eq!(run(c, at, &["produce", "solo", "2", "10"]), ["ok"]);
    assert_eq!(run(c, at, &["delete-topic", "solo"]), ["ok"]);
    assert_eq!(common::partition_dirs(&broker.data_dir(), "solo"), 0);
    assert!(!broker.data_dir().join("solo.del").exists());
    assert_eq!(run(c, at, &["create", "solo", "1", "1"]), ["ok"]);
    assert_eq!(offsets(at, "solo"), (0, 0));
}

#[test]
fn a_broker_down_at_a_deletion_deletes_its_copy_when_it_runs_and_the_name_waits_for_it() {
    if kafka::python().is_none() {
        return;
    }
    let mut cluster = Cluster::with_kafka(2, &[]).unwrap();
    let at = |cluster: &Cluster, slot: usize| cluster.kafka_addr(slot);
    let first = at(&cluster, 0);
    let c = "confluent-kafka";
    assert_eq!(run(c, &first, &["create", "gone", "1", "2"]), ["ok"]);
    cluster.wait_full_isr("gone", 0, Duration::from_secs(30));
    for _ in 0..3 {
        assert_eq!(run(c, &first, &["produce", "gone", "0", "10"]), ["ok"]);
    }
    cluster.wait_same_end("gone", 0, Duration::from_secs(30));
    cluster.kill9(1);
    // Out of the registry, and off the first broker; the second is down.
    let answer = run(c, &first, &["delete-topic", "gone", "1500"]);
    assert_eq!(answer, ["error REQUEST_TIMED_OUT"]);
    assert_eq!(common::partition_dirs(cluster.data_dir(0), "gone"), 0);
    assert_eq!(
        common::partition_dirs(cluster.data_dir(1), "gone"),
        1,
        "down: its copy stays"
    );
    let refused = run(c, &first, &["create", "gone", "1", "2"]);
    assert_eq!(refused, ["error TOPIC_ALREADY_EXISTS"], "the name waits");
    // A producer that would create it is refused meanwhile (the Kafka
    // listener speaks klog's protocol too).
    let produced = common::bin("klog-produce")
        .args(["-b", &first, "-t", "gone", "--message-timeout", "3s"])
        .write_stdin("late\n")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&produced.stderr);
    assert!(
        !produced.status.success() && said.contains("being deleted"),
        "{said}"
    );
    // Started again, the second deletes its copy before it serves it.
    cluster.restart(1);
    common::eventually("the deletion completes", Duration::from_secs(30), || {
        let registry = klog::coord::open_read_only(cluster.spec()).unwrap();
        registry.configs("deleting").unwrap().is_empty()
    });
    assert_eq!(common::partition_dirs(cluster.data_dir(1), "gone"), 0);
    assert_eq!(run(c, &first, &["create", "gone", "1", "2"]), ["ok"]);
    cluster.wait_full_isr("gone", 0, Duration::from_secs(30));
    let second = at(&cluster, 1);
    for bootstrap in [&first, &second] {
        assert_eq!(
            offsets(bootstrap, "gone"),
            (0, 0),
            "nothing of the old records"
        );
    }
}

/// A topic deleted and created again with replicas is followed again by
/// every broker of its new placement: both hold its log, both are in its
/// ISR, and acks=all with two in-sync replicas goes through.
#[test]
fn a_topic_created_again_is_followed_again() {
    if kafka::python().is_none() {
        return;
    }
    let args = [
        "--kafka-listen",
        "127.0.0.1:0",
        "--min-insync-replicas",
        "2",
        "--replication-factor",
        "2",
    ];
    let cluster = Cluster::start(Backend::Dir, 2, &args).unwrap();
    let first = cluster.kafka_addr(0);
    let c = "confluent-kafka";
    for name in ["a1", "b2"] {
        assert_eq!(run(c, &first, &["create", name, "1", "2"]), ["ok"]);
        cluster.wait_full_isr(name, 0, Duration::from_secs(30));
        assert_eq!(run(c, &first, &["produce", name, "0", "10"]), ["ok"]);
        assert_eq!(run(c, &first, &["delete-topic", name]), ["ok"]);
        assert_eq!(run(c, &first, &["create", name, "1", "2"]), ["ok"]);
        cluster.wait_full_isr(name, 0, Duration::from_secs(30));
        common::eventually("both brokers hold its log", Duration::from_secs(30), || {
            (0..2).all(|slot| common::partition_dirs(cluster.data_dir(slot), name) == 1)
        });
        assert_eq!(
            run(c, &first, &["produce", name, "0", "10"]),
            ["ok"],
            "{name}"
        );
        assert_eq!(offsets(&first, name), (0, 1), "{name}: only the new record");
    }
}
