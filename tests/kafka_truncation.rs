//! KIP-320 as Kafka's clients use it against klog: a librdkafka consumer
//! (confluent-kafka) that holds a position in a leader epoch checks it
//! with OffsetForLeaderEpoch, and one whose epoch ended below its
//! position is told the log was truncated and reads on from where the
//! epoch ended, nothing skipped. klog elects no replica out of sync, so a
//! consumer never reads records a failover takes back (it reads to the
//! high watermark); the position here claims an offset in the old epoch
//! that only the new one reached, as a consumer of an unclean Kafka
//! cluster would hold.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka;

const BOUND: Duration = Duration::from_secs(30);

fn produce(bootstrap: &str, topic: &str) {
    let done = kafka::admin("confluent-kafka", bootstrap, &["produce", topic, "0", "1"]);
    assert_eq!(done, ["ok"]);
}

/// Five records in the first leader's epoch, a failover, five in the
/// next: a consumer placed at offset 8 "in the first epoch" is told of
/// the truncation (`auto.offset.reset=error`) or reads on from 5, where
/// that epoch ended; one placed at 8 in the new epoch reads 8 and 9
/// without a word.
#[test]
fn a_librdkafka_consumer_detects_a_truncation_after_a_failover() {
    let Some(python) = kafka::python() else {
        return;
    };
    let mut cluster = Cluster::with_kafka(2, &[]).unwrap();
    let first = cluster.kafka_addr(0);
    let created = kafka::admin("confluent-kafka", &first, &["create", "tr", "1", "2"]);
    assert_eq!(created, ["ok"]);
    cluster.wait_full_isr("tr", 0, BOUND);
    for _ in 0..5 {
        produce(&first, "tr");
    }
    cluster.wait_same_end("tr", 0, BOUND);
    let old = cluster.wait_leader("tr", 0, BOUND);
    let leads = cluster.slot_of(old.leader.as_deref().unwrap());
    cluster.kill9(leads);
    let new = cluster.wait_new_epoch("tr", 0, old.epoch, None, BOUND);
    let survivor = cluster.kafka_addr(1 - leads);
    common::eventually("the new leader serves", BOUND, || {
        kafka::earliest_latest(&survivor, "tr") == (0, 5)
    });
    for _ in 0..5 {
        produce(&survivor, "tr");
    }
    let read = |epoch: u64, reset: &str, count: &str| {
        let epoch = epoch.to_string();
        let args = [survivor.as_str(), "tr", "8", epoch.as_str(), reset, count];
        kafka::run_script(&python, "truncation.py", &args)
    };
    let (old_epoch, new_epoch) = (old.epoch, new.epoch);
    // Told (librdkafka's error is the reset's, its words the
    // truncation's): the consumer stops there.
    let told = read(old_epoch, "error", "1");
    let expected = format!(
        "error _AUTO_OFFSET_RESET Partition log truncation detected at offset 8 \
         (leader epoch {old_epoch}): broker end offset is 5 (offset leader epoch {old_epoch})"
    );
    assert!(told.starts_with(&expected), "{told}");
    assert_eq!(told.lines().count(), 1, "{told}");
    // Or it reads on from where its epoch ended: 5, not 0 (a reset to
    // the earliest) nor 8 (no check).
    let moved = read(old_epoch, "earliest", "5");
    let expected: String = (5..10)
        .map(|o| format!("offset {o} {new_epoch}\n"))
        .collect();
    assert_eq!(moved, expected);
    let on_the_log = read(new_epoch, "error", "2");
    assert_eq!(
        on_the_log,
        format!("offset 8 {new_epoch}\noffset 9 {new_epoch}\n")
    );
}

/// Fetch v12 through a broker (the crate builds the request and reads the
/// answer, its records sent from the file): a consumer on the log gets
/// records; one whose last fetched epoch the log cannot place is told
/// OFFSET_OUT_OF_RANGE (and resets), not the tag's default, which
/// clients ignore and ask again.
#[test]
fn a_v12_fetch_answers_records_or_out_of_range() {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    use km::fetch_request as q;
    let broker = kafka::KafkaBroker::start(&[]);
    broker.produce_lines("b", 3);
    let fetch = |offset: i64, last_fetched_epoch: i32| {
        let r = km::FetchRequest::default()
            .with_replica_id(km::BrokerId(-1))
            .with_max_wait_ms(100)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![q::FetchTopic::default()
                .with_topic(km::TopicName(StrBytes::from_static_str("b")))
                .with_partitions(vec![q::FetchPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_last_fetched_epoch(last_fetched_epoch)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(1 << 20)])]);
        let mut stream = std::net::TcpStream::connect(&broker.kafka).unwrap();
        let got: km::FetchResponse = kafka::call_flexible(&mut stream, (1, 12), &r);
        let p = &got.responses[0].partitions[0];
        let records = p.records.as_ref().map_or(0, |r| r.len());
        let diverging = (p.diverging_epoch.epoch, p.diverging_epoch.end_offset);
        (p.error_code, p.high_watermark, diverging, records > 0)
    };
    assert_eq!(fetch(0, -1), (0, 3, (-1, -1), true));
    assert_eq!(fetch(1, 0), (0, 3, (-1, -1), true), "epoch 0 holds 0..3");
    assert_eq!(fetch(3, 9), (1, -1, (-1, -1), false), "OFFSET_OUT_OF_RANGE");
}
