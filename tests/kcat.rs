//! What a kcat user reaches for first (issue 15, items 13, 15, 16): the
//! metadata list `-L`, client settings by Kafka's property names `-X`,
//! kcat's format tokens and modes (`%K`, `%R`, `-K`, `-D`, `-Z`), and
//! kcat's file arguments (one record per file; `-l` for delimited files).

mod common;

use std::time::{Duration, Instant};

use common::{bin, consume, consume_from, produce, BrokerProc};
use predicates::prelude::*;
use serde_json::Value;

/// The JSON objects of an NDJSON output.
fn objects(out: &[u8]) -> Vec<Value> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// The objects of one `type`.
fn of_type<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["type"] == kind).collect()
}

/// Runs a tool and returns its stdout, asserting success.
fn stdout(tool: &str, args: &[&str]) -> Vec<u8> {
    let out = bin(tool)
        .args(args)
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    out.get_output().stdout.clone()
}

/// Three records: key "key1" value "hello"; no key, value "x"; key "k",
/// empty value.
fn three_records(data: &std::path::Path) {
    produce(data, "t", "key1:hello\n", &["-K", ":"]);
    produce(data, "t", "x\n", &[]);
    produce(data, "t", "k:\n", &["-K", ":"]);
}

#[test]
fn format_tokens_key_length_and_binary_payload_length() {
    let dir = tempfile::tempdir().unwrap();
    three_records(dir.path());
    assert_eq!(
        consume(dir.path(), "t", &["-f", "%K %k|%S %s\\n"]),
        "4 key1|5 hello\n-1 |1 x\n1 k|0 \n",
        "%K is the key's length, -1 without a key"
    );
    let data = dir.path().to_str().unwrap();
    let raw = stdout(
        "klog-consume",
        &["--data-dir", data, "-t", "t", "-e", "-q", "-f", "%R%s"],
    );
    assert_eq!(
        raw, b"\x00\x00\x00\x05hello\x00\x00\x00\x01x\x00\x00\x00\x00",
        "%R is the payload's length, 4 bytes big-endian"
    );
}

#[test]
fn key_and_message_delimiters_and_null_as_kcat() {
    let dir = tempfile::tempdir().unwrap();
    three_records(dir.path());
    assert_eq!(
        consume(dir.path(), "t", &["-K", "\\t", "-D", ";"]),
        "key1\thello;\tx;k\t;",
        "-K prints key DELIM value, -D ends each record"
    );
    assert_eq!(consume(dir.path(), "t", &["-D", "\\0"]), "hello\0x\0\0");
    assert_eq!(
        consume(dir.path(), "t", &["-Z", "-K", "="]),
        "key1=hello\nNULL=x\nk=\n",
        "-Z prints NULL for a null (absent) key, as kcat; an empty value stays empty"
    );
    assert_eq!(
        consume(dir.path(), "t", &["-Z", "-f", "[%k] [%s]\\n"]),
        "[key1] [hello]\n[NULL] [x]\n[k] []\n"
    );
    // -K and -D shape the default format: with -f or -J they are a
    // mistake, said.
    let data = dir.path().to_str().unwrap();
    for extra in [&["-f", "%s"][..], &["-J"]] {
        bin("klog-consume")
            .args(["--data-dir", data, "-t", "t", "-e", "-K", ":"])
            .args(extra)
            .assert()
            .code(2);
    }
}

/// Batches in a partition, as `klog-dump` counts them (one line per batch).
fn batches(data: &std::path::Path, topic: &str) -> usize {
    let out = stdout(
        "klog-dump",
        &[data.join(format!("{topic}-0")).to_str().unwrap()],
    );
    String::from_utf8(out)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .count()
}

#[test]
fn dash_x_sets_producer_settings_by_kafka_names_and_the_later_wins() {
    let dir = tempfile::tempdir().unwrap();
    let input = "1\n2\n3\n";
    produce(dir.path(), "one", input, &["-X", "batch.num.messages=1"]);
    assert_eq!(batches(dir.path(), "one"), 3, "a batch per record");
    produce(
        dir.path(),
        "flag-last",
        input,
        &["-X", "batch.num.messages=1", "--batch", "1000"],
    );
    assert_eq!(
        batches(dir.path(), "flag-last"),
        1,
        "the later --batch wins"
    );
    produce(
        dir.path(),
        "x-last",
        input,
        &["--batch", "1000", "-X", "batch.num.messages=1"],
    );
    assert_eq!(batches(dir.path(), "x-last"), 3, "the later -X wins");
    produce(
        dir.path(),
        "ignored",
        input,
        &[
            "-X",
            "client.id=kcat",
            "-X",
            "linger.ms=5",
            "-X",
            "acks=all",
        ],
    );
    assert_eq!(consume(dir.path(), "ignored", &[]), input);
}

#[test]
fn dash_x_names_the_broker_and_acks() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(&dir.path().join("data"), &[]);
    let servers = format!("bootstrap.servers={}", broker.addr);
    bin("klog-produce")
        .args(["-X", &servers, "-X", "request.required.acks=0", "-t", "t"])
        .env_remove("KLOG_BROKER")
        .write_stdin("a\nb\n")
        .timeout(Duration::from_secs(60))
        .assert()
        .success()
        .stderr(predicate::str::contains("not acknowledged: --acks 0"));
    // Nothing acknowledged: wait until both records are visible.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while consume_from(&broker.addr, "t", &[]) != "a\nb\n" {
        assert!(
            std::time::Instant::now() < deadline,
            "the records never became visible"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let list = format!("metadata.broker.list={}", broker.addr);
    for fetch in [
        "fetch.max.bytes=1",
        "max.partition.fetch.bytes=1",
        "fetch.message.max.bytes=1",
    ] {
        let out = stdout(
            "klog-consume",
            &["-X", &list, "-X", fetch, "-t", "t", "-e", "-q"],
        );
        assert_eq!(
            out, b"a\nb\n",
            "{fetch}: one batch per fetch still reads all"
        );
    }
    // --fetch-bytes is the flag behind them.
    assert_eq!(
        consume_from(
            &broker.addr,
            "t",
            &["--fetch-bytes", "1", "--fetch-response-bytes", "1"]
        ),
        "a\nb\n"
    );
}

#[test]
fn dash_x_message_timeout_bounds_a_delivery() {
    // A broker that takes connections and never answers: the record fails
    // at its deadline (30s without -X).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let started = Instant::now();
    bin("klog-produce")
        .args(["-b", &addr, "-t", "t", "-X", "message.timeout.ms=300"])
        .write_stdin("a\n")
        .timeout(Duration::from_secs(60))
        .assert()
        .code(1);
    drop(silent);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn dash_x_mistakes_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("klog-produce", "no.such.thing=1", "linger.ms"),
        ("klog-consume", "no.such.thing=1", "fetch.max.bytes"),
        ("klog-produce", "linger.ms=soon", "linger.ms"),
        ("klog-produce", "batch.num.messages=0", "batch.num.messages"),
        ("klog-produce", "acks=2", "acks"),
        (
            "klog-consume",
            "session.timeout.ms=-1",
            "session.timeout.ms",
        ),
        ("klog-produce", "security.protocol=TLS", "security.protocol"),
        ("klog-consume", "sasl.mechanism=GSSAPI", "sasl.mechanism"),
        ("klog-produce", "linger.ms", "property=value"),
        (
            "klog-consume",
            "bootstrap.servers=a:1,b:2",
            "bootstrap.servers",
        ),
    ];
    for (tool, x, said) in cases {
        bin(tool)
            .args(["--data-dir", data, "-t", "t", "-X", x])
            .args(if *tool == "klog-produce" {
                &[][..]
            } else {
                &["-e"]
            })
            .write_stdin("a\n")
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*said));
    }
    // A group needs its registry, also named by -X.
    bin("klog-consume")
        .args(["--data-dir", data, "-t", "t", "-X", "group.id=g"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--registry"));
    // A group's name is checked as -G checks it, and called a group's.
    for group in [["-G", "../x"], ["-X", "group.id=../x"]] {
        bin("klog-consume")
            .args(["--registry", data, "-t", "t"])
            .args(group)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("invalid group name \"../x\""));
    }
}

#[test]
fn dash_l_sends_each_file_as_one_record_and_files_are_split_like_stdin_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let one = dir.path().join("one.txt");
    let two = dir.path().join("two.bin");
    let empty = dir.path().join("empty");
    std::fs::write(&one, "a\nb\n").unwrap();
    std::fs::write(&two, [0u8, 1, 2, b'\n', 255]).unwrap();
    std::fs::write(&empty, "").unwrap();
    bin("klog-produce")
        .args(["--data-dir", data.to_str().unwrap(), "-t", "files", "-l"])
        .args([&one, &empty, &two])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "Sent 2 records to files (0 failed)",
        ));
    let json = objects(&stdout(
        "klog-consume",
        &[
            "--data-dir",
            data.to_str().unwrap(),
            "-t",
            "files",
            "-e",
            "-J",
        ],
    ));
    assert_eq!(json.len(), 2, "{json:?}");
    assert_eq!(json[0]["payload"], "a\nb\n");
    assert_eq!(json[1]["payload"], "AAECCv8=", "{json:?}");
    assert_eq!(json[1]["payload_encoding"], "base64");
    bin("klog-produce")
        .args(["--data-dir", data.to_str().unwrap(), "-t", "lines"])
        .args([&one, &empty])
        .assert()
        .success();
    assert_eq!(consume(&data, "lines", &[]), "a\nb\n");
    // A file over --max-record-bytes is refused whole, and the rest sent.
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b'x'; 5000]).unwrap();
    bin("klog-produce")
        .args(["--data-dir", data.to_str().unwrap(), "-t", "big", "-l"])
        .args(["--max-record-bytes", "4KiB"])
        .args([&big, &one])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("longer than 4096 bytes")
                .and(predicate::str::contains("Sent 1 record to big (1 failed)")),
        );
    assert_eq!(consume(&data, "big", &["-c", "1"]), "a\nb\n\n");
}

#[test]
fn dash_l_lists_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "a", &common::lines(10), &["--partitions", "2"]);
    produce(dir.path(), "b", "x\n", &[]);
    let data = dir.path().to_str().unwrap();
    let json = objects(&stdout("klog-consume", &["-L", "-J", "--data-dir", data]));
    let parts = of_type(&json, "partition");
    assert_eq!(parts.len(), 3, "{json:?}");
    let total: u64 = parts
        .iter()
        .filter(|p| p["topic"] == "a")
        .map(|p| p["end_offset"].as_u64().unwrap() - p["start_offset"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 10);
    assert_eq!(of_type(&json, "topic").len(), 2);
    // -t restricts; the table is for humans; klog-produce -L says the same.
    let json = objects(&stdout(
        "klog-produce",
        &["-L", "-J", "--data-dir", data, "-t", "b"],
    ));
    let parts = of_type(&json, "partition");
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0]["end_offset"], 1);
    let table = String::from_utf8(stdout("klog-consume", &["-L", "--data-dir", data])).unwrap();
    assert!(table.contains("topic") && table.contains("end"), "{table}");
    bin("klog-consume")
        .args(["-L", "--data-dir", data, "-t", "nope"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("nope"));
}

#[test]
fn dash_l_lists_a_broker_and_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("registry");
    let reg = registry.to_str().unwrap();
    let one = BrokerProc::start(
        &dir.path().join("one"),
        &["--registry", reg, "--partitions", "2"],
    );
    let two = BrokerProc::start(
        &dir.path().join("two"),
        &["--registry", reg, "--partitions", "2"],
    );
    bin("klog-produce")
        .args(["--registry", reg, "-t", "t", "-q"])
        .write_stdin(common::lines(100))
        .assert()
        .success();
    let json = objects(&stdout("klog-consume", &["-L", "-J", "--registry", reg]));
    let brokers = of_type(&json, "broker");
    assert_eq!(brokers.len(), 2, "{json:?}");
    let addrs: Vec<&str> = brokers
        .iter()
        .map(|b| b["addr"].as_str().unwrap())
        .collect();
    assert!(addrs.contains(&one.addr.as_str()) && addrs.contains(&two.addr.as_str()));
    let parts = of_type(&json, "partition");
    assert_eq!(parts.len(), 2, "{json:?}");
    assert_ne!(parts[0]["leader"], parts[1]["leader"], "one partition each");
    let mut total = 0;
    for p in &parts {
        assert_eq!(p["replicas"], serde_json::json!([p["leader"]]));
        assert_eq!(p["isr"], serde_json::json!([p["leader"]]));
        total += p["end_offset"].as_u64().unwrap();
        // The leader's own answer agrees; the other broker says elsewhere.
        let leader = brokers.iter().find(|b| b["id"] == p["leader"]).unwrap();
        let addr = leader["addr"].as_str().unwrap();
        let other = if addr == one.addr {
            &two.addr
        } else {
            &one.addr
        };
        for (at, state) in [(addr, "online"), (other.as_str(), "elsewhere")] {
            let json = objects(&stdout("klog-produce", &["-L", "-J", "-b", at, "-t", "t"]));
            let same = of_type(&json, "partition")
                .into_iter()
                .find(|q| q["partition"] == p["partition"])
                .cloned()
                .unwrap();
            assert_eq!(same["state"], state, "{same}");
            if state == "online" {
                assert_eq!(same["end_offset"], p["end_offset"]);
            }
        }
    }
    assert_eq!(total, 100);
    let table = String::from_utf8(stdout("klog-consume", &["-L", "-b", &one.addr])).unwrap();
    assert!(
        table.contains(&one.addr) && table.contains("elsewhere"),
        "{table}"
    );
}
