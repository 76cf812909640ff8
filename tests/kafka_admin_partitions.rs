//! CreatePartitions (issue 27) through every admin client in CI
//! (confluent-kafka, kafka-python, aiokafka, kafkajs): a topic grows,
//! its new partitions take records at once, and it never shrinks. In a
//! cluster, every broker holding the topic grows its copy, and a broker
//! that was down when the topic grew grows its copy when it starts and
//! follows the new partitions' leaders.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka::{self, KafkaBroker};

/// An admin client's lines ([`kafka::admin`]).
fn run(client: &str, bootstrap: &str, args: &[&str]) -> Vec<String> {
    kafka::admin(client, bootstrap, args)
}

/// The partitions Metadata shows of `topic`, each with a leader (none
/// without one).
fn led_partitions(bootstrap: &str, topic: &str) -> usize {
    let lines = run("confluent-kafka", bootstrap, &["partitions", topic]);
    lines.iter().filter(|l| !l.ends_with(" -1")).count()
}

#[test]
fn every_admin_client_adds_partitions_that_take_records_at_once() {
    if kafka::python().is_none() || kafka::kafkajs().is_none() {
        return;
    }
    let broker = KafkaBroker::with_registry(&["--auto-create-topics", "false"]);
    let at = broker.kafka.as_str();
    let c = "confluent-kafka";
    for client in ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"] {
        let topic = format!("g-{client}");
        assert_eq!(run(c, at, &["create", &topic, "2", "1"]), ["ok"]);
        assert_eq!(run(c, at, &["produce", &topic, "0", "10"]), ["ok"]);
        let checked = run(client, at, &["add-partitions", &topic, "4", "validate"]);
        assert_eq!(checked, ["ok"], "{client}");
        assert_eq!(led_partitions(at, &topic), 2, "{client}: validate only");
        assert_eq!(
            common::partition_dirs(&broker.data_dir(), &topic),
            2,
            "{client}"
        );
        let grown = run(client, at, &["add-partitions", &topic, "4"]);
        assert_eq!(grown, ["ok"], "{client}");
        assert_eq!(led_partitions(at, &topic), 4, "{client}");
        assert_eq!(
            common::partition_dirs(&broker.data_dir(), &topic),
            4,
            "{client}"
        );
        for p in ["2", "3"] {
            let produced = run(c, at, &["produce", &topic, p, "10"]);
            assert_eq!(produced, ["ok"], "{client}: partition {p}");
        }
        for fewer_or_same in ["3", "4"] {
            let refused = run(client, at, &["add-partitions", &topic, fewer_or_same]);
            assert_eq!(refused, ["error INVALID_PARTITIONS"], "{client}");
        }
        let none = run(client, at, &["add-partitions", "no-such-topic", "3"]);
        assert!(
            none[0].starts_with("error UNKNOWN_TOPIC"),
            "{client}: {none:?}"
        );
        assert_eq!(led_partitions(at, &topic), 4, "{client}: unchanged");
    }
    // The old partition's record stayed where it was.
    for client in ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"] {
        let (start, end) = kafka::earliest_latest(at, &format!("g-{client}"));
        assert_eq!(
            (start, end),
            (0, 1),
            "{client}: partition 0 holds its record"
        );
    }
}

/// Grows `topic` to `count` with the new partitions' replicas `lists`
/// (node ids), as Kafka's admin tool sends it (CreatePartitions v2): the
/// answer's error code.
fn grow_assigned(bootstrap: &str, topic: &str, count: i32, lists: &[Vec<i32>]) -> i16 {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    use km::create_partitions_request as q;
    let assignments = (lists.iter())
        .map(|ids| {
            let ids = ids.iter().map(|id| km::BrokerId(*id)).collect();
            q::CreatePartitionsAssignment::default().with_broker_ids(ids)
        })
        .collect();
    let r = km::CreatePartitionsRequest::default()
        .with_topics(vec![q::CreatePartitionsTopic::default()
            .with_name(km::TopicName(StrBytes::from_string(topic.to_string())))
            .with_count(count)
            .with_assignments(Some(assignments))])
        .with_timeout_ms(10_000);
    let mut stream = std::net::TcpStream::connect(bootstrap).unwrap();
    let answer: km::CreatePartitionsResponse = kafka::call_flexible(&mut stream, (37, 2), &r);
    answer.results[0].error_code
}

/// A growth past the broker's limits (`--max-partitions`) is refused
/// before anything is written, checked only or not: the topic keeps its
/// partitions in the registry and on disk, and the broker starts again.
#[test]
fn a_growth_past_the_brokers_limits_writes_nothing() {
    if kafka::python().is_none() {
        return;
    }
    let broker = KafkaBroker::with_registry(&["--max-partitions", "5"]);
    let at = broker.kafka.as_str();
    let c = "confluent-kafka";
    assert_eq!(run(c, at, &["create", "big", "2", "1"]), ["ok"]);
    for validate in [&["validate"][..], &[]] {
        let args = [&["add-partitions", "big", "20"][..], validate].concat();
        let refused = run(c, at, &args);
        assert_eq!(refused, ["error POLICY_VIOLATION"], "{validate:?}");
    }
    assert_eq!(led_partitions(at, "big"), 2);
    let registry = klog::coord::open_read_only(broker.registry.as_deref().unwrap()).unwrap();
    assert_eq!(registry.placement("big").unwrap().unwrap().brokers.len(), 2);
    assert_eq!(common::partition_dirs(&broker.data_dir(), "big"), 2);
    assert_eq!(run(c, at, &["add-partitions", "big", "5"]), ["ok"]);
}

/// Without a registry, the replicas asked for must be this broker, one
/// list for each new partition.
#[test]
fn without_a_registry_the_brokers_copy_grows() {
    if kafka::python().is_none() {
        return;
    }
    let broker = KafkaBroker::start(&[]);
    let at = broker.kafka.as_str();
    let c = "confluent-kafka";
    assert_eq!(run(c, at, &["create", "solo", "1", "1"]), ["ok"]);
    assert_eq!(run(c, at, &["add-partitions", "solo", "3"]), ["ok"]);
    assert_eq!(common::partition_dirs(&broker.data_dir(), "solo"), 3);
    assert_eq!(led_partitions(at, "solo"), 3);
    assert_eq!(run(c, at, &["produce", "solo", "2", "10"]), ["ok"]);
    let refused = run(c, at, &["add-partitions", "solo", "2"]);
    assert_eq!(refused, ["error INVALID_PARTITIONS"]);
    // Replicas asked for: this broker, one list a new partition.
    let me = run(c, at, &["sources", "broker", ""]);
    let me: i32 = (me.iter())
        .find_map(|l| {
            l.strip_prefix("broker.id=")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap();
    assert_eq!(
        grow_assigned(at, "solo", 5, &[vec![me]]),
        39,
        "one list for two"
    );
    assert_eq!(
        grow_assigned(at, "solo", 4, &[vec![me + 1]]),
        39,
        "another broker"
    );
    assert_eq!(grow_assigned(at, "solo", 5, &[vec![me], vec![me]]), 0);
    assert_eq!(led_partitions(at, "solo"), 5);
}

/// Three brokers, replicas on each: the topic grows on every broker that
/// runs, and on one that stopped answering as it grew (and died) once it
/// starts again, which then follows each new partition until it is in
/// sync.
#[test]
fn a_broker_down_when_a_topic_grows_grows_its_copy_when_it_starts() {
    if kafka::python().is_none() {
        return;
    }
    let mut cluster = Cluster::with_kafka(3, &[]).unwrap();
    let first = cluster.kafka_addr(0);
    let c = "confluent-kafka";
    assert_eq!(run(c, &first, &["create", "wide", "1", "3"]), ["ok"]);
    cluster.wait_full_isr("wide", 0, Duration::from_secs(30));
    assert_eq!(run(c, &first, &["produce", "wide", "0", "10"]), ["ok"]);
    // Every broker holds it (and so grows only by reading the placement).
    cluster.wait_same_end("wide", 0, Duration::from_secs(30));
    common::eventually("every broker holds it", Duration::from_secs(30), || {
        (0..3).all(|slot| cluster.replica(slot, "wide", 0).end() == 1)
    });
    // Stopped, not yet known to be gone: the new partitions are placed on
    // it too. Then it dies.
    cluster.freeze(2);
    assert_eq!(run(c, &first, &["add-partitions", "wide", "4"]), ["ok"]);
    cluster.kill9(2);
    common::eventually("the running brokers grow", Duration::from_secs(30), || {
        (0..2).all(|slot| common::partition_dirs(cluster.data_dir(slot), "wide") == 4)
    });
    assert_eq!(
        common::partition_dirs(cluster.data_dir(2), "wide"),
        1,
        "down"
    );
    common::eventually("each partition is led", Duration::from_secs(60), || {
        led_partitions(&first, "wide") == 4
    });
    for p in ["0", "1", "2", "3"] {
        assert_eq!(run(c, &first, &["produce", "wide", p, "10"]), ["ok"], "{p}");
    }
    cluster.restart(2);
    for p in 0..4 {
        cluster.wait_full_isr("wide", p, Duration::from_secs(60));
        let replicas = cluster.wait_same_end("wide", p, Duration::from_secs(30));
        let want = if p == 0 { 2 } else { 1 };
        assert_eq!(
            replicas[2].end(),
            want,
            "partition {p}: its records, copied"
        );
    }
    assert_eq!(common::partition_dirs(cluster.data_dir(2), "wide"), 4);
}

/// One copy of each partition, spread over two brokers: the broker that
/// did not answer grows its copy by reading the placement (nothing asks
/// it for the new partitions first), and then serves those placed on it.
#[test]
fn every_broker_reads_the_placement_and_grows_its_copy() {
    if kafka::python().is_none() {
        return;
    }
    let cluster = Cluster::with_kafka(2, &[]).unwrap();
    let first = cluster.kafka_addr(0);
    let c = "confluent-kafka";
    assert_eq!(run(c, &first, &["create", "spread", "2", "1"]), ["ok"]);
    // A produce to each partition opens it on its broker.
    for p in ["0", "1"] {
        assert_eq!(
            run(c, &first, &["produce", "spread", p, "10"]),
            ["ok"],
            "{p}"
        );
    }
    assert!((0..2).all(|slot| common::partition_dirs(cluster.data_dir(slot), "spread") == 2));
    // The answer waits for each new partition's broker to serve it.
    assert_eq!(run(c, &first, &["add-partitions", "spread", "4"]), ["ok"]);
    for slot in 0..2 {
        assert_eq!(
            common::partition_dirs(cluster.data_dir(slot), "spread"),
            4,
            "{slot}"
        );
    }
    assert_eq!(led_partitions(&first, "spread"), 4);
    for p in ["0", "1", "2", "3"] {
        assert_eq!(
            run(c, &first, &["produce", "spread", p, "10"]),
            ["ok"],
            "{p}"
        );
    }
}

/// A klog consumer group member reading a topic that grows takes the new
/// partitions at its next look (they may be on a broker that never
/// opened the topic) and reads their records, without exiting.
#[test]
fn a_klog_group_member_reads_the_new_partitions() {
    if kafka::python().is_none() {
        return;
    }
    let cluster = Cluster::with_kafka(2, &[]).unwrap();
    let first = cluster.kafka_addr(0);
    let c = "confluent-kafka";
    assert_eq!(run(c, &first, &["create", "h", "1", "1"]), ["ok"]);
    let args = ["-t", "h", "-G", "grow", "--registry", cluster.spec(), "-u"];
    let member = common::Proc::spawn("klog-consume", &args);
    assert_eq!(run(c, &first, &["produce", "h", "0", "4"]), ["ok"]);
    assert_eq!(member.take_lines(1, Duration::from_secs(30)), ["xxxx"]);
    assert_eq!(run(c, &first, &["add-partitions", "h", "3"]), ["ok"]);
    // It takes them before anything else asks for them.
    let long = Duration::from_secs(60);
    member.wait_stderr("owns", |l| l.contains("h [2]"), long);
    for p in ["1", "2"] {
        assert_eq!(run(c, &first, &["produce", "h", p, "4"]), ["ok"], "{p}");
    }
    let read = member.take_lines(2, Duration::from_secs(60));
    assert_eq!(read, ["xxxx", "xxxx"], "{:?}", member.stderr_lines());
}

/// A running klog-produce finds the partitions added while it runs (at
/// its next `--metadata-refresh`) and sends over all of them; what it
/// sent before is delivered first, and nothing is lost.
#[test]
fn a_running_klog_produce_sends_to_the_partitions_added() {
    klog_produce_follows_a_growth(false);
}

/// The same through a registry: the partition count is the placement's.
#[test]
fn a_running_klog_produce_sends_to_the_partitions_added_through_a_registry() {
    klog_produce_follows_a_growth(true);
}

fn klog_produce_follows_a_growth(through_registry: bool) {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    if kafka::python().is_none() {
        return;
    }
    let broker = match through_registry {
        true => KafkaBroker::with_registry(&[]),
        false => KafkaBroker::start(&[]),
    };
    let at = broker.kafka.as_str();
    let created = run("confluent-kafka", at, &["create", "live", "1", "1"]);
    assert_eq!(created, ["ok"]);
    let mut args = vec!["-t", "live", "--metadata-refresh", "100ms"];
    match &broker.registry {
        Some(registry) => args.extend(["--registry", registry.as_str()]),
        None => args.extend(["-b", broker.addr()]),
    }
    let mut producer =
        common::Proc::spawn_with_stdin("klog-produce", &args, std::process::Stdio::piped());
    feed(&mut producer, 1, 100, 20);
    assert_eq!(
        run("confluent-kafka", at, &["add-partitions", "live", "3"]),
        ["ok"]
    );
    std::thread::sleep(Duration::from_millis(300));
    feed(&mut producer, 101, 400, 20);
    let said = finished(producer);
    assert!(
        said.iter()
            .any(|l| l == "% live has grown to 3 partitions: sending over all of them"),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|l| l.contains("Sent 400 records to live (0 failed)")),
        "{said:?}"
    );
    let k = broker.kcat(&kcat);
    let read = k.consume("live", &["-o", "beginning", "-f", "%p %s\\n"]);
    let mut values: Vec<u64> = Vec::new();
    let mut partitions = std::collections::BTreeSet::new();
    for line in read.lines() {
        let (p, v) = line.split_once(' ').unwrap();
        partitions.insert(p.to_string());
        values.push(v.parse().unwrap());
    }
    values.sort_unstable();
    assert_eq!(values, (1..=400).collect::<Vec<u64>>(), "each once");
    assert_eq!(partitions.len(), 3, "every partition took records");
}

/// What the old sink held (a long linger) reaches partition 0 before the
/// records sent after the growth: partition 0 reads in the order sent.
#[test]
fn the_records_held_before_a_growth_come_first() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    if kafka::python().is_none() {
        return;
    }
    let broker = KafkaBroker::start(&[]);
    let at = broker.kafka.as_str();
    assert_eq!(
        run("confluent-kafka", at, &["create", "held", "1", "1"]),
        ["ok"]
    );
    let args = [
        "-t",
        "held",
        "-b",
        broker.addr(),
        "--metadata-refresh",
        "100ms",
        "--linger",
        "20s",
        "--message-timeout",
        "60s",
    ];
    let mut producer =
        common::Proc::spawn_with_stdin("klog-produce", &args, std::process::Stdio::piped());
    feed(&mut producer, 1, 1, 0);
    std::thread::sleep(Duration::from_millis(200));
    feed(&mut producer, 2, 100, 0);
    assert_eq!(
        run("confluent-kafka", at, &["add-partitions", "held", "3"]),
        ["ok"]
    );
    std::thread::sleep(Duration::from_millis(300));
    feed(&mut producer, 101, 400, 0);
    let said = finished(producer);
    assert!(
        said.iter().any(|l| l.contains("held has grown to 3")),
        "{said:?}"
    );
    let read = broker
        .kcat(&kcat)
        .consume("held", &["-o", "beginning", "-p", "0", "-f", "%s\\n"]);
    let p0: Vec<u64> = read.lines().map(|l| l.parse().unwrap()).collect();
    assert!(p0.len() > 100, "{p0:?}");
    assert!(
        p0.windows(2).all(|w| w[0] < w[1]),
        "partition 0 out of order: {p0:?}"
    );
}

/// Writes the numbers `from..=to` to `producer`'s stdin, a line each,
/// pausing 10 ms every `every` lines (0: never).
fn feed(producer: &mut common::Proc, from: u64, to: u64, every: u64) {
    use std::io::Write;
    let stdin = producer.child.stdin.as_mut().expect("stdin");
    for n in from..=to {
        stdin.write_all(format!("{n}\n").as_bytes()).unwrap();
        if every > 0 && n % every == 0 {
            stdin.flush().unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    stdin.flush().unwrap();
}

/// Closes `producer`'s stdin and gives what it said, once it exited
/// successfully.
fn finished(mut producer: common::Proc) -> Vec<String> {
    drop(producer.child.stdin.take());
    let status = producer.child.wait().unwrap();
    producer.wait_stderr("Sent ", |_| true, Duration::from_secs(10));
    let said = producer.stderr_lines();
    assert!(status.success(), "{status}: {said:?}");
    said
}
