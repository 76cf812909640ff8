//! Per-topic configs (issue 27) through every admin client in CI:
//! confluent-kafka, kafka-python, aiokafka and kafkajs create topics with
//! configs, change them (AlterConfigs; IncrementalAlterConfigs where the
//! client has it) and read them back (DescribeConfigs); bad names and
//! values are refused. In a cluster, a change made through one broker
//! counts on every broker that holds the topic, without a restart:
//! `max.message.bytes`, `min.insync.replicas`, and retention by size with
//! `segment.bytes`; `klog-dump --registry` shows them.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka::{self, KafkaBroker};

/// An admin client's lines ([`kafka::admin`]).
fn run(client: &str, bootstrap: &str, args: &[&str]) -> Vec<String> {
    kafka::admin(client, bootstrap, args)
}

/// The value `configs` gives `name`, and whether it is the topic's own
/// (the clients that say so).
fn value_of(configs: &[String], name: &str) -> Option<(String, bool)> {
    let line = configs
        .iter()
        .find_map(|c| c.strip_prefix(&format!("{name}=")))?;
    let (value, dynamic) = match line.strip_suffix(" dynamic") {
        Some(v) => (v, true),
        None => (line, false),
    };
    Some((value.to_string(), dynamic))
}

/// Whether `client` says which configs are the topic's own.
fn says_source(client: &str) -> bool {
    matches!(client, "confluent-kafka" | "kafka-python")
}

#[test]
fn every_admin_client_creates_alters_and_describes_a_topics_configs() {
    if kafka::python().is_none() || kafka::kafkajs().is_none() {
        return;
    }
    let args = ["--auto-create-topics", "false", "--retention", "2d"];
    let broker = KafkaBroker::with_registry(&args);
    let at = broker.kafka.as_str();
    let broker_retention = "172800000";
    for client in ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"] {
        let topic = format!("c-{client}");
        let create = ["create", &topic, "1", "1", "retention.ms=3600000"];
        assert_eq!(run(client, at, &create), ["ok"], "{client}");
        let configs = run(client, at, &["configs", &topic]);
        let retention = value_of(&configs, "retention.ms").unwrap();
        assert_eq!(retention.0, "3600000", "{client}: {configs:?}");
        assert_eq!(retention.1, says_source(client), "{client}: {configs:?}");
        let bytes = value_of(&configs, "retention.bytes").unwrap();
        assert_eq!(bytes, ("-1".into(), false), "{client}: the broker's");

        // AlterConfigs: the topic's configs become those named (kafka-python
        // adds the others it finds changed, as it does against Kafka).
        let alter = ["alter", &topic, "retention.bytes=1048576"];
        assert_eq!(run(client, at, &alter), ["ok"], "{client}");
        let configs = run(client, at, &["configs", &topic]);
        let bytes = value_of(&configs, "retention.bytes").unwrap();
        assert_eq!(bytes.0, "1048576", "{client}: {configs:?}");
        let retention = value_of(&configs, "retention.ms").unwrap().0;
        let kept = if client == "kafka-python" {
            "3600000"
        } else {
            broker_retention
        };
        assert_eq!(retention, kept, "{client}: {configs:?}");

        // Refused, and nothing changed.
        for bad in [
            "retention.ms=-5",
            "segment.bytes=10",
            "no.such.config=1",
            "flush.ms=10",
        ] {
            if client == "kafka-python"
                && !bad.starts_with("retention")
                && !bad.starts_with("segment")
            {
                // kafka-python refuses a name that is not changeable itself.
                continue;
            }
            let refused = run(client, at, &["alter", &topic, bad]);
            let said = refused.join(" ");
            assert!(
                said.starts_with("error INVALID_CONFIG") || said == "error 40",
                "{client} {bad}: {refused:?}"
            );
        }
        let configs = run(client, at, &["configs", &topic]);
        assert_eq!(
            value_of(&configs, "retention.bytes").unwrap().0,
            "1048576",
            "{client}"
        );
        let bad_create = [
            "create",
            &format!("{topic}-bad"),
            "1",
            "1",
            "cleanup.policy=compacted",
        ];
        let refused = run(client, at, &bad_create).join(" ");
        assert!(
            refused.starts_with("error INVALID_CONFIG"),
            "{client}: {refused}"
        );
        // A compacted topic, as Kafka names it.
        let compacted = format!("{topic}-table");
        let policy = "cleanup.policy=compact,delete";
        run(client, at, &["create", &compacted, "1", "1", policy]);
        let configs = run(client, at, &["configs", &compacted]);
        let (value, _) = value_of(&configs, "cleanup.policy").unwrap();
        assert_eq!(value, "compact,delete", "{client}");
    }
    // IncrementalAlterConfigs: one config set, another deleted, the rest kept.
    for client in ["confluent-kafka", "kafka-python"] {
        let topic = format!("c-{client}");
        let set = ["set", &topic, "segment.ms=60000", "-retention.bytes"];
        assert_eq!(run(client, at, &set), ["ok"], "{client}");
        let configs = run(client, at, &["configs", &topic]);
        assert_eq!(
            value_of(&configs, "segment.ms").unwrap(),
            ("60000".into(), true)
        );
        assert_eq!(
            value_of(&configs, "retention.bytes").unwrap(),
            ("-1".into(), false)
        );
        let refused = run(client, at, &["set", &topic, "min.insync.replicas=0"]);
        assert!(
            refused[0].starts_with("error INVALID_CONFIG"),
            "{client}: {refused:?}"
        );
    }
}

#[test]
fn without_a_registry_a_topic_keeps_the_brokers_configs() {
    let Some(_) = kafka::python() else {
        return;
    };
    let broker = KafkaBroker::start(&[]);
    let at = broker.kafka.as_str();
    let client = "confluent-kafka";
    let refused = run(client, at, &["create", "t", "1", "1", "retention.ms=1000"]);
    assert_eq!(refused, ["error INVALID_CONFIG"]);
    assert_eq!(run(client, at, &["create", "t", "1", "1"]), ["ok"]);
    assert_eq!(
        run(client, at, &["alter", "t", "retention.ms=1000"]),
        ["error INVALID_CONFIG"]
    );
}

/// Produces a record of `bytes` to `topic`'s `partition` through
/// `bootstrap` until the answer is `want` (a change takes up to a second
/// to reach every broker).
fn answers(bootstrap: &str, (topic, partition): (&str, u32), bytes: usize, want: &str) {
    let (p, n) = (partition.to_string(), bytes.to_string());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let last = run("confluent-kafka", bootstrap, &["produce", topic, &p, &n]);
        if last == [want] {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{topic}-{partition}: a record of {bytes} bytes is answered {last:?}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_change_through_one_broker_counts_on_every_broker_without_a_restart() {
    let Some(_) = kafka::python() else {
        return;
    };
    let cluster = Cluster::with_kafka(2, &["--retention-check-interval", "200ms"]).unwrap();
    let at = |slot| cluster.kafka_addr(slot);
    let (first, second) = (at(0), at(1));
    let c = "confluent-kafka";
    assert_eq!(run(c, &first, &["create", "live", "2", "2"]), ["ok"]);
    for p in 0..2 {
        cluster.wait_full_isr("live", p, Duration::from_secs(30));
        answers(&second, ("live", p), 2000, "ok");
    }
    // Each partition's leader takes the change made through the first.
    let smaller = ["set", "live", "max.message.bytes=1000"];
    assert_eq!(run(c, &first, &smaller), ["ok"]);
    for p in 0..2 {
        answers(&second, ("live", p), 2000, "error MSG_SIZE_TOO_LARGE");
        answers(&second, ("live", p), 500, "ok");
    }
    let more = ["set", "live", "min.insync.replicas=3"];
    assert_eq!(run(c, &second, &more), ["ok"]);
    for p in 0..2 {
        answers(&first, ("live", p), 500, "error NOT_ENOUGH_REPLICAS");
    }
    // klog-dump --registry shows the topic's own configs.
    let dump = common::bin("klog-dump")
        .args(["--registry", cluster.spec(), "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    let line = text
        .lines()
        .find(|l| l.contains(r#""type":"topic_configs""#));
    let line: serde_json::Value = serde_json::from_str(line.unwrap()).unwrap();
    assert_eq!(line["topic"], "live");
    let want = serde_json::json!({"max.message.bytes": "1000", "min.insync.replicas": "3"});
    assert_eq!(line["configs"], want, "{text}");
    let back = ["set", "live", "-min.insync.replicas", "-max.message.bytes"];
    assert_eq!(run(c, &first, &back), ["ok"]);
    for p in 0..2 {
        answers(&first, ("live", p), 2000, "ok");
    }
    // Small segments, kept to one: the log's start moves on both replicas.
    let small = ["set", "live", "segment.bytes=4096", "retention.bytes=4096"];
    assert_eq!(run(c, &first, &small), ["ok"]);
    let earliest = |bootstrap: &str| {
        let line = run(c, bootstrap, &["list-offsets", "live", "earliest"]);
        line[0].split(' ').nth(1).unwrap().parse::<i64>().unwrap()
    };
    common::eventually("the log start moves", Duration::from_secs(30), || {
        answers(&first, ("live", 0), 1000, "ok");
        earliest(&first) > 0
    });
    // Every replica deleted its old segments (each broker's own files).
    common::eventually(
        "each replica keeps a few segments",
        Duration::from_secs(30),
        || {
            (0..2).all(|slot| {
                let dir = cluster.data_dir(slot).join("live-0");
                let logs = std::fs::read_dir(&dir).map_or(usize::MAX, |entries| {
                    let names = entries.filter_map(|e| e.ok()?.file_name().into_string().ok());
                    names.filter(|n| n.ends_with(".log")).count()
                });
                logs <= 3
            })
        },
    );
}

/// A CreateTopics refused after its configs were stored leaves none for
/// the next topic of the name; a damaged entry is repaired by setting the
/// configs again, as its error says.
#[test]
fn a_refused_create_leaves_no_configs_and_a_damaged_entry_is_set_again() {
    if kafka::python().is_none() {
        return;
    }
    let broker = KafkaBroker::with_registry(&["--max-partitions", "2"]);
    let at = broker.kafka.as_str();
    let c = "confluent-kafka";
    let refused = run(
        c,
        at,
        &["create", "ghost", "3", "1", "max.message.bytes=100"],
    );
    assert_eq!(refused, ["error POLICY_VIOLATION"]);
    let registry = klog::coord::open_read_only(broker.registry.as_deref().unwrap()).unwrap();
    assert_eq!(registry.config("topics", "ghost").unwrap(), None);
    assert_eq!(run(c, at, &["create", "ghost", "1", "1"]), ["ok"]);
    assert_eq!(run(c, at, &["produce", "ghost", "0", "500"]), ["ok"]);

    let entry =
        std::path::Path::new(broker.registry.as_deref().unwrap()).join("config/topics/ghost.json");
    std::fs::write(&entry, b"{damaged").unwrap();
    let said = run(c, at, &["configs", "ghost"]);
    assert_eq!(said, ["error INVALID_REQUEST"], "DescribeConfigs says it");
    assert_eq!(run(c, at, &["alter", "ghost", "retention.ms=5000"]), ["ok"]);
    let configs = run(c, at, &["configs", "ghost"]);
    let retention = value_of(&configs, "retention.ms").unwrap();
    assert_eq!(retention, ("5000".into(), true));
}

/// What `sources` says of `name` ("VALUE SOURCE"), through `bootstrap`.
fn source_of(bootstrap: &str, resource: (&str, &str), name: &str) -> String {
    let lines = run(
        "confluent-kafka",
        bootstrap,
        &["sources", resource.0, resource.1],
    );
    let prefix = format!("{name}=");
    let line = lines.iter().find_map(|l| l.strip_prefix(&prefix));
    line.unwrap_or_else(|| panic!("no {name} in {lines:?}"))
        .to_string()
}

/// Waits (up to 15 s) until `bootstrap` shows `name` of `resource` as
/// `want`: a broker other than the one that took the change learns of it
/// from the registry's watch a moment later. Fails with what it showed.
fn shown_soon(bootstrap: &str, resource: (&str, &str), name: &str, want: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let shown = source_of(bootstrap, resource, name);
        if shown == want || std::time::Instant::now() > deadline {
            assert_eq!(shown, want, "{name} of {resource:?}");
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sets (or with no value deletes) `name` in the cluster's default broker
/// configs through `bootstrap`, as `kafka-configs.sh --entity-type brokers
/// --entity-default` does (IncrementalAlterConfigs v1 of the broker
/// resource named ""; the Python clients and kafkajs name a broker by its
/// id only): the answer's error code.
fn set_default(bootstrap: &str, name: &str, value: Option<&str>) -> i16 {
    set_broker(bootstrap, ("", false), name, value)
}

/// [`set_default`] of broker resource `broker`, or only checked.
fn set_broker(
    bootstrap: &str,
    (broker, validate_only): (&str, bool),
    name: &str,
    value: Option<&str>,
) -> i16 {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    use km::incremental_alter_configs_request as q;
    let str = |s: &str| StrBytes::from_string(s.to_string());
    let change = q::AlterableConfig::default()
        .with_name(str(name))
        .with_config_operation(if value.is_some() { 0 } else { 1 })
        .with_value(value.map(str));
    let r = km::IncrementalAlterConfigsRequest::default()
        .with_resources(vec![q::AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(str(broker))
            .with_configs(vec![change])])
        .with_validate_only(validate_only);
    let mut stream = std::net::TcpStream::connect(bootstrap).unwrap();
    let answer: km::IncrementalAlterConfigsResponse =
        kafka::call_flexible(&mut stream, (44, 1), &r);
    answer.responses[0].error_code
}

/// The cluster's default broker configs as DescribeConfigs of the broker
/// resource "" answers them (`kafka-configs.sh --entity-default
/// --describe`): (name, value, source).
fn describe_default(bootstrap: &str) -> Vec<(String, String, i8)> {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    let r = km::DescribeConfigsRequest::default().with_resources(vec![
        km::describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str(""))
            .with_configuration_keys(None),
    ]);
    let mut stream = std::net::TcpStream::connect(bootstrap).unwrap();
    let answer: km::DescribeConfigsResponse = kafka::call_flexible(&mut stream, (32, 4), &r);
    let result = &answer.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    (result.configs.iter())
        .map(|c| {
            let value = c.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
            (c.name.to_string(), value, c.config_source)
        })
        .collect()
}

/// Dynamic broker configs (`kafka-configs.sh --entity-type brokers`): the
/// cluster's default and one broker's own, set through any broker by
/// each Python client, count on every broker for every topic without
/// configs of its own, without a restart; a broker's own wins over the
/// default, a topic's own over both; the sources say which; a config
/// that is the command line's is refused.
#[test]
fn broker_configs_set_at_runtime_count_on_every_broker() {
    if kafka::python().is_none() {
        return;
    }
    let cluster = Cluster::with_kafka(2, &[]).unwrap();
    let (first, second) = (cluster.kafka_addr(0), cluster.kafka_addr(1));
    let c = "confluent-kafka";
    assert_eq!(run(c, &first, &["create", "dyn", "2", "1"]), ["ok"]);
    let second_node = source_of(&second, ("broker", ""), "broker.id");
    let second_node = second_node.split(' ').next().unwrap().to_string();
    // The partition the second broker leads.
    let leaders = run(c, &first, &["partitions", "dyn"]);
    let on_second = (leaders.iter())
        .find_map(|l| l.strip_suffix(&format!(" {second_node}")))
        .map(|p| p.parse::<u32>().unwrap())
        .unwrap_or_else(|| panic!("{leaders:?}"));
    let on_first = 1 - on_second;
    for p in 0..2 {
        answers(&first, ("dyn", p), 3000, "ok");
    }
    // The cluster's default, through the first broker.
    assert_eq!(set_default(&first, "message.max.bytes", Some("2000")), 0);
    for p in 0..2 {
        answers(&second, ("dyn", p), 3000, "error MSG_SIZE_TOO_LARGE");
    }
    shown_soon(
        &second,
        ("topic", "dyn"),
        "max.message.bytes",
        "2000 DYNAMIC_DEFAULT_BROKER_CONFIG",
    );
    shown_soon(
        &second,
        ("broker", ""),
        "message.max.bytes",
        "2000 DYNAMIC_DEFAULT_BROKER_CONFIG",
    );
    // klog-dump --registry shows the entry, as brokers name the configs.
    let dump = common::bin("klog-dump")
        .args(["--registry", cluster.spec(), "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&dump.stdout);
    let line = (text.lines()).find(|l| l.contains(r#""type":"broker_configs""#));
    let line: serde_json::Value = serde_json::from_str(line.unwrap()).unwrap();
    assert_eq!(line["broker"], "default", "{text}");
    assert_eq!(
        line["configs"],
        serde_json::json!({"message.max.bytes": "2000"})
    );
    // The second broker's own, through the first (librdkafka).
    let own = ["broker-set", &second_node, "message.max.bytes=5000"];
    assert_eq!(run(c, &first, &own), ["ok"]);
    answers(&first, ("dyn", on_second), 3000, "ok");
    answers(&first, ("dyn", on_first), 3000, "error MSG_SIZE_TOO_LARGE");
    shown_soon(
        &second,
        ("broker", ""),
        "message.max.bytes",
        "5000 DYNAMIC_BROKER_CONFIG",
    );
    // A topic's own wins.
    let topic = ["set", "dyn", "max.message.bytes=100000"];
    assert_eq!(run(c, &first, &topic), ["ok"]);
    answers(&first, ("dyn", on_first), 3000, "ok");
    assert_eq!(
        source_of(&first, ("topic", "dyn"), "max.message.bytes"),
        "100000 DYNAMIC_TOPIC_CONFIG"
    );
    // Refused: the command line's configs, values out of range, brokers
    // that are not there.
    for (client, args, want) in [
        (
            c,
            [&second_node, "log.dirs=/elsewhere"],
            "error INVALID_CONFIG",
        ),
        (
            c,
            [&second_node, "log.segment.bytes=10"],
            "error INVALID_CONFIG",
        ),
    ] {
        let args = [&["broker-set"][..], &args].concat();
        assert_eq!(run(client, &first, &args), [want], "{client} {args:?}");
    }
    let no_such = set_broker(&first, ("12345", false), "log.retention.ms", Some("1"));
    assert_eq!(no_such, 42, "no such broker");
    let padded = format!("0{second_node}");
    let padded = set_broker(&first, (&padded, false), "log.roll.ms", Some("9"));
    assert_eq!(padded, 42, "a node id as it is written");
    // Checked only: nothing stored.
    let checked = set_broker(&first, ("", true), "log.retention.ms", Some("5"));
    assert_eq!(checked, 0);
    let entry = std::path::Path::new(cluster.spec()).join("config/brokers/default.json");
    let stored = std::fs::read_to_string(&entry).unwrap();
    assert!(!stored.contains("log.retention.ms"), "{stored}");
    // min.insync.replicas by default: acks=all to a topic of two replicas
    // is refused by its leader, whichever broker it is.
    assert_eq!(run(c, &first, &["create", "two", "2", "2"]), ["ok"]);
    for p in 0..2 {
        cluster.wait_full_isr("two", p, Duration::from_secs(30));
        answers(&first, ("two", p), 10, "ok");
    }
    assert_eq!(set_default(&first, "min.insync.replicas", Some("3")), 0);
    for p in 0..2 {
        answers(&first, ("two", p), 10, "error NOT_ENOUGH_REPLICAS");
    }
    assert_eq!(set_default(&first, "min.insync.replicas", None), 0);
    for p in 0..2 {
        answers(&first, ("two", p), 10, "ok");
    }
    // kafka-python and aiokafka (AlterConfigs: the entry becomes what it
    // names) set the second broker's own retention.
    let set = ["broker-set", &second_node, "log.retention.ms=3600000"];
    assert_eq!(run("kafka-python", &first, &set), ["ok"]);
    shown_soon(
        &second,
        ("topic", "dyn"),
        "retention.ms",
        "3600000 DYNAMIC_BROKER_CONFIG",
    );
    let aio = ["broker-set", &second_node, "log.retention.ms=7200000"];
    assert_eq!(run("aiokafka", &first, &aio), ["ok"]);
    shown_soon(
        &second,
        ("topic", "dyn"),
        "retention.ms",
        "7200000 DYNAMIC_BROKER_CONFIG",
    );
    // Replaced: the second broker's own message.max.bytes is gone.
    let want = "2000 DYNAMIC_DEFAULT_BROKER_CONFIG";
    shown_soon(&second, ("broker", ""), "message.max.bytes", want);
    // The cluster's default, as Kafka's tool describes it.
    let default = describe_default(&first);
    assert_eq!(
        default,
        [("message.max.bytes".to_string(), "2000".to_string(), 3)]
    );
    // A damaged entry refuses an edit (it would drop the retention it
    // held), and AlterConfigs, as its error says, replaces it.
    let own =
        std::path::Path::new(cluster.spec()).join(format!("config/brokers/{second_node}.json"));
    std::fs::write(&own, "{\"version\":1,").unwrap();
    let edit = ["broker-set", &second_node, "message.max.bytes=6000"];
    assert_eq!(run(c, &first, &edit), ["error INVALID_CONFIG"]);
    assert_eq!(std::fs::read_to_string(&own).unwrap(), "{\"version\":1,");
    let whole = ["broker-set", &second_node, "log.retention.ms=7200000"];
    assert_eq!(run("aiokafka", &first, &whole), ["ok"]);
    shown_soon(
        &second,
        ("topic", "dyn"),
        "retention.ms",
        "7200000 DYNAMIC_BROKER_CONFIG",
    );
    // Back to the command line's.
    assert_eq!(set_default(&first, "message.max.bytes", None), 0);
    let shown = source_of(&first, ("broker", ""), "message.max.bytes");
    assert!(shown.ends_with(" STATIC_BROKER_CONFIG"), "{shown}");
}
