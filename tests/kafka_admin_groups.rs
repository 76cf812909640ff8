//! The group admin APIs (issue 27) through every admin client in CI:
//! confluent-kafka, kafka-python, aiokafka and kafkajs list the groups,
//! describe them (state, members with their client ids and assignments,
//! klog's members included), and delete them and their offsets, which go
//! from the registry; a group with members, and a topic a member reads,
//! are refused.

mod common;

use std::time::Duration;

use common::kafka::{self, KafkaBroker};
use common::Proc;

/// An admin client: `admin_clients.py LIB` or `kafkajs_admin.js`.
enum Client {
    Python(std::path::PathBuf, &'static str),
    Node((std::path::PathBuf, std::path::PathBuf)),
}

impl Client {
    fn name(&self) -> &'static str {
        match self {
            Client::Python(_, lib) => lib,
            Client::Node(_) => "kafkajs",
        }
    }

    /// What the client prints for `args`, line by line.
    fn run(&self, broker: &KafkaBroker, args: &[&str]) -> Vec<String> {
        let out = match self {
            Client::Python(python, lib) => {
                let mut all = vec![*lib, broker.kafka.as_str()];
                all.extend_from_slice(args);
                kafka::run_script(python, "admin_clients.py", &all)
            }
            Client::Node(node) => {
                let mut all = vec![broker.kafka.as_str()];
                all.extend_from_slice(args);
                kafka::run_node(node, "kafkajs_admin.js", &all, kafka::CLIENT_TIMEOUT)
            }
        };
        out.lines().map(str::to_string).collect()
    }

    fn deletes(&self) -> bool {
        !matches!(self, Client::Python(_, "aiokafka"))
    }
}

/// Reads `topic` in `group` with kcat to the end, committing.
fn read_and_commit(broker: &KafkaBroker, kcat: &std::path::Path, group: &str, topic: &str) {
    let k = broker.kcat(kcat);
    k.ok(
        &["-G", group, "-X", "auto.offset.reset=earliest", "-e", topic],
        b"",
    );
}

#[test]
fn every_admin_client_lists_describes_and_deletes_groups() {
    let (Some(kcat), Some(python), Some(node)) =
        (kafka::kcat_path(), kafka::python(), kafka::kafkajs())
    else {
        return;
    };
    let broker = KafkaBroker::with_registry(&["--partitions", "2"]);
    broker.produce_lines("t1", 100);
    let registry_dir = broker.registry.clone().unwrap();
    let registry = klog::coord::offsets_topic::open_read_only(&registry_dir).unwrap();
    let k = broker.kcat(&kcat);
    let _kafka_member = k.spawn(&["-G", "live", "-X", "auto.offset.reset=earliest", "t1"]);
    let klog_args = ["-t", "t1", "-G", "klog", "--registry", &registry_dir];
    let _klog_member = Proc::spawn("klog-consume", &klog_args);
    common::eventually("both groups settle", Duration::from_secs(40), || {
        ["live", "klog"]
            .iter()
            .all(|g| (0..2).all(|p| registry.owner(g, "t1", p).is_some()))
    });
    let clients = [
        Client::Python(python.clone(), "confluent-kafka"),
        Client::Python(python.clone(), "kafka-python"),
        Client::Python(python, "aiokafka"),
        Client::Node(node),
    ];
    for client in &clients {
        let name = client.name();
        let done = format!("done-{name}");
        read_and_commit(&broker, &kcat, &done, "t1");
        assert!(registry.committed(&done, "t1", 0).unwrap().is_some());
        let listed = client.run(&broker, &["list"]);
        for g in ["live", "klog", done.as_str()] {
            assert!(
                listed.iter().any(|l| l == g),
                "{name} lists {g}: {listed:?}"
            );
        }
        let live = client.run(&broker, &["describe", "live"]);
        assert_eq!(live[0], "Stable 1", "{name}: {live:?}");
        assert!(
            live[1].starts_with("rdkafka"),
            "{name}: kcat's client id: {live:?}"
        );
        if name != "aiokafka" {
            assert!(
                live[1].ends_with(" t1:0,1"),
                "{name}: its assignment: {live:?}"
            );
            let klog = client.run(&broker, &["describe", "klog"]);
            assert_eq!(klog, ["Stable 1", " t1:0,1"], "{name}: the klog member");
        }
        let empty = client.run(&broker, &["describe", &done]);
        assert_eq!(empty, ["Empty 0"], "{name}: {empty:?}");
        if !client.deletes() {
            continue;
        }
        let refused = client.run(&broker, &["delete", "live"]);
        assert_eq!(refused, ["error NON_EMPTY_GROUP"], "{name}");
        assert!(
            registry.owner("live", "t1", 0).is_some(),
            "{name}: live still reads"
        );
        assert_eq!(client.run(&broker, &["delete", &done]), ["ok"], "{name}");
        assert_eq!(registry.committed(&done, "t1", 0).unwrap(), None, "{name}");
        assert_eq!(registry.committed(&done, "t1", 1).unwrap(), None, "{name}");
        let listed = client.run(&broker, &["list"]);
        assert!(
            !listed.contains(&done),
            "{name}: a deleted group is gone: {listed:?}"
        );
    }
    // OffsetDelete (kafka-python's delete_group_offsets).
    let python = Client::Python(kafka::python().unwrap(), "kafka-python");
    read_and_commit(&broker, &kcat, "part", "t1");
    let refused = python.run(&broker, &["delete-offsets", "live", "t1", "0"]);
    assert_eq!(refused, ["error GROUP_SUBSCRIBED_TO_TOPIC"]);
    let ok = python.run(&broker, &["delete-offsets", "part", "t1", "0"]);
    assert_eq!(ok, ["ok"]);
    assert_eq!(registry.committed("part", "t1", 0).unwrap(), None);
    assert!(
        registry.committed("part", "t1", 1).unwrap().is_some(),
        "only partition 0's"
    );
    let missing = python.run(&broker, &["delete-offsets", "nope", "t1", "0"]);
    assert_eq!(missing, ["error GROUP_ID_NOT_FOUND"]);
}

/// OffsetFetch v8 (built and read by the `kafka-protocol` crate) asks for
/// several groups at once, as Java's admin client batches them: each is
/// answered on its own (the partitions asked, or every one committed; a
/// group that committed nothing, nothing), and past 1,000 groups each is
/// refused INVALID_REQUEST.
#[test]
fn offset_fetch_v8_answers_each_group_of_one_request() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    use km::offset_fetch_request as q;
    let broker = KafkaBroker::with_registry(&["--partitions", "2"]);
    broker.produce_lines("t1", 10);
    read_and_commit(&broker, &kcat, "g1", "t1");
    let str = |s: &str| StrBytes::from_string(s.to_string());
    let group = |id: &str, topics: Option<&[i32]>| {
        q::OffsetFetchRequestGroup::default()
            .with_group_id(km::GroupId(str(id)))
            .with_topics(topics.map(|partitions| {
                vec![q::OffsetFetchRequestTopics::default()
                    .with_name(km::TopicName(str("t1")))
                    .with_partition_indexes(partitions.to_vec())]
            }))
    };
    let fetch = |groups: Vec<q::OffsetFetchRequestGroup>| {
        let r = km::OffsetFetchRequest::default().with_groups(groups);
        let mut stream = std::net::TcpStream::connect(&broker.kafka).unwrap();
        let answer: km::OffsetFetchResponse = kafka::call_flexible(&mut stream, (9, 8), &r);
        answer
            .groups
            .into_iter()
            .map(|g| {
                let offsets: Vec<(i32, i64, i16)> = (g.topics.iter())
                    .flat_map(|t| t.partitions.iter())
                    .map(|p| (p.partition_index, p.committed_offset, p.error_code))
                    .collect();
                (g.group_id.0.to_string(), offsets, g.error_code)
            })
            .collect::<Vec<_>>()
    };
    let (first, second) = {
        let lines = broker
            .kcat(&kcat)
            .ok(&["-C", "-t", "t1", "-e", "-f", "%p\n"], b"");
        let text = String::from_utf8(lines).unwrap();
        let count = |p: &str| text.lines().filter(|l| *l == p).count() as i64;
        (count("0"), count("1"))
    };
    let answered = fetch(vec![
        group("g1", Some(&[0, 1, 7])),
        group("g1", None),
        group("none", None),
        group("none", Some(&[0])),
    ]);
    assert_eq!(
        answered,
        [
            (
                "g1".to_string(),
                // A partition with no commit (none such, as Kafka answers
                // it too): -1.
                vec![(0, first, 0), (1, second, 0), (7, -1, 0)],
                0
            ),
            ("g1".to_string(), vec![(0, first, 0), (1, second, 0)], 0),
            ("none".to_string(), vec![], 0),
            ("none".to_string(), vec![(0, -1, 0)], 0),
        ]
    );
    let many: Vec<_> = (0..1_001).map(|_| group("none", None)).collect();
    let answered = fetch(many);
    assert_eq!(answered.len(), 1_001);
    assert!(answered[..1_000].iter().all(|g| g.2 == 0));
    assert_eq!(answered[1_000].2, 42, "INVALID_REQUEST past 1,000 groups");
}
