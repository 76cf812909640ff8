//! DeleteRecords (issue 27) through every admin client in CI: the
//! records before an offset are gone for every reader (Kafka's consumers
//! and klog's), the partition's start moves, offsets stay, and a start
//! past the high watermark is refused. In a cluster, the start outlives
//! its leader: after a failover the new leader serves from it.

mod common;

use std::time::Duration;

use kafka_protocol::messages as km;
use kafka_protocol::protocol::StrBytes;

use common::cluster::Cluster;
use common::kafka::{self, KafkaBroker};

/// An admin client's lines ([`kafka::admin`]).
fn run(client: &str, bootstrap: &str, args: &[&str]) -> Vec<String> {
    kafka::admin(client, bootstrap, args)
}

/// Partition 0's earliest and latest offsets ([`kafka::earliest_latest`]).
fn offsets(bootstrap: &str, topic: &str) -> (i64, i64) {
    kafka::earliest_latest(bootstrap, topic)
}

fn produce(bootstrap: &str, topic: &str, n: usize) {
    for _ in 0..n {
        assert_eq!(
            run("confluent-kafka", bootstrap, &["produce", topic, "0", "10"]),
            ["ok"]
        );
    }
}

#[test]
fn every_admin_client_deletes_records_and_readers_start_after_them() {
    if kafka::python().is_none() || kafka::kafkajs().is_none() {
        return;
    }
    let broker = KafkaBroker::with_registry(&["--auto-create-topics", "false"]);
    let at = broker.kafka.as_str();
    for (i, client) in ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"]
        .iter()
        .enumerate()
    {
        let topic = format!("r-{client}");
        assert_eq!(run(client, at, &["create", &topic, "1", "1"]), ["ok"]);
        produce(at, &topic, 10);
        let before = (6 + i).to_string();
        assert_eq!(
            run(client, at, &["delete-records", &topic, "0", &before]),
            [format!("ok {before}")],
            "{client}"
        );
        assert_eq!(offsets(at, &topic), (6 + i as i64, 10), "{client}");
        // Lower: nothing changes; past the high watermark: refused.
        let lower = run(client, at, &["delete-records", &topic, "0", "2"]);
        assert_eq!(lower, [format!("ok {before}")], "{client}");
        let past = run(client, at, &["delete-records", &topic, "0", "11"]);
        assert!(
            past[0].starts_with("error OFFSET_OUT_OF_RANGE"),
            "{client}: {past:?}"
        );
        // klog's consumer from the beginning starts at the new start.
        let out = common::bin("klog-consume")
            .args([
                "-b",
                broker.addr(),
                "-t",
                &topic,
                "-o",
                "beginning",
                "-e",
                "-f",
                "%o\\n",
            ])
            .output()
            .unwrap();
        let first = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .map(str::to_string);
        assert_eq!(first, Some(before.clone()), "{client}");
    }
    // -1: everything below the high watermark.
    let topic = "r-confluent-kafka";
    assert_eq!(
        run("confluent-kafka", at, &["delete-records", topic, "0", "-1"]),
        ["ok 10"]
    );
    assert_eq!(offsets(at, topic), (10, 10));
    let unknown = run("confluent-kafka", at, &["delete-records", "none", "0", "1"]);
    // librdkafka finds no such partition in its metadata first.
    assert!(
        ["error _NOENT", "error UNKNOWN_TOPIC_OR_PART"].contains(&unknown[0].as_str()),
        "{unknown:?}"
    );
}

#[test]
fn deleted_records_stay_deleted_after_a_failover() {
    if kafka::python().is_none() {
        return;
    }
    let mut cluster = Cluster::with_kafka(2, &[]).unwrap();
    let at = |cluster: &Cluster, slot: usize| cluster.kafka_addr(slot);
    let first = at(&cluster, 0);
    let c = "confluent-kafka";
    assert_eq!(run(c, &first, &["create", "dr", "1", "2"]), ["ok"]);
    cluster.wait_full_isr("dr", 0, Duration::from_secs(30));
    produce(&first, "dr", 8);
    cluster.wait_same_end("dr", 0, Duration::from_secs(30));
    assert_eq!(
        run(c, &first, &["delete-records", "dr", "0", "5"]),
        ["ok 5"]
    );
    let leader = cluster.wait_leader("dr", 0, Duration::from_secs(30));
    let leader_slot = cluster.slot_of(leader.leader.as_deref().unwrap());
    let other = 1 - leader_slot;
    cluster.kill9(leader_slot);
    cluster.wait_new_epoch("dr", 0, leader.epoch, None, Duration::from_secs(30));
    let survivor = at(&cluster, other);
    common::eventually(
        "the new leader serves from the start",
        Duration::from_secs(30),
        || offsets(&survivor, "dr") == (5, 8),
    );
}

/// DeleteRecords v2 (built and read by the `kafka-protocol` crate) to
/// `bootstrap`: each (partition, offset) of `topic` asked, answered as
/// (partition, low watermark, error code).
fn delete_records_v2(bootstrap: &str, topic: &str, asked: &[(i32, i64)]) -> Vec<(i32, i64, i16)> {
    use km::delete_records_request as dq;
    let partitions = (asked.iter())
        .map(|&(p, o)| {
            dq::DeleteRecordsPartition::default()
                .with_partition_index(p)
                .with_offset(o)
        })
        .collect();
    let request = km::DeleteRecordsRequest::default()
        .with_topics(vec![dq::DeleteRecordsTopic::default()
            .with_name(km::TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(partitions)])
        .with_timeout_ms(5000);
    let mut stream = std::net::TcpStream::connect(bootstrap).unwrap();
    let response: km::DeleteRecordsResponse = kafka::call_flexible(&mut stream, (21, 2), &request);
    (response.topics[0].partitions.iter())
        .map(|p| (p.partition_index, p.low_watermark, p.error_code))
        .collect()
}

/// Refused, each with Kafka's code: a follower's (NOT_LEADER_OR_FOLLOWER),
/// a partition that does not exist, a negative offset other than -1, one
/// past the high watermark, and the partitions past 1,000 in one request.
#[test]
fn delete_records_refuses_what_it_cannot_do() {
    let cluster = Cluster::with_kafka(2, &[]).unwrap();
    let first = cluster.kafka_addr(0);
    if kafka::python().is_none() {
        return;
    }
    assert_eq!(
        run("confluent-kafka", &first, &["create", "nr", "1", "2"]),
        ["ok"]
    );
    cluster.wait_full_isr("nr", 0, Duration::from_secs(30));
    produce(&first, "nr", 3);
    cluster.wait_same_end("nr", 0, Duration::from_secs(30));
    let leader = cluster.wait_leader("nr", 0, Duration::from_secs(30));
    let leads = cluster.slot_of(leader.leader.as_deref().unwrap());
    let (at_leader, at_follower) = (cluster.kafka_addr(leads), cluster.kafka_addr(1 - leads));
    assert_eq!(
        delete_records_v2(&at_follower, "nr", &[(0, 1)]),
        [(0, -1, 6)]
    );
    let refused = delete_records_v2(&at_leader, "nr", &[(7, 1), (-1, 1), (0, -5), (0, 4)]);
    assert_eq!(refused, [(7, -1, 3), (-1, -1, 3), (0, -1, 1), (0, -1, 1)]);
    assert_eq!(delete_records_v2(&at_leader, "nr", &[(0, 1)]), [(0, 1, 0)]);
    let many: Vec<(i32, i64)> = (0..1_001).map(|_| (0, 1)).collect();
    let answered = delete_records_v2(&at_leader, "nr", &many);
    assert_eq!(answered.len(), 1_001);
    assert!(answered[..1_000].iter().all(|a| *a == (0, 1, 0)));
    assert_eq!(
        answered[1_000],
        (0, -1, 42),
        "INVALID_REQUEST past the bound"
    );
}
