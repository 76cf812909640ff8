//! klog-consume's read_committed (its default, as kcat's) on logs that
//! put it to the test: more aborted transactions than one fetch tells, a
//! producer whose aborted transaction is followed by committed ones, a
//! consumer that stops after every record and resumes, and a group whose
//! committed offset is above the last stable offset.

mod common;

use std::path::Path;
use std::time::Duration;

use common::txn::{batch_at, batch_of, end_txn, open_partition, write_transactions};
use common::{bin, consume_from, kafka, BrokerProc};
use klog::client::{Connection, Consumer, ConsumerConfig, ConsumerPartition};
use klog::storage::log::Log;

fn add(log: &mut Log, id: i64, seq: i32, values: &[&str]) {
    log.append(&mut batch_of(id, seq, values), 1_000).unwrap();
}

/// Partition t-0 of `data`: producer 9's transaction from offset 0,
/// aborted at the end; before that, `rounds` rounds of producer 8's
/// one-record transaction, aborted, and producer 7's three-record one,
/// committed; then producer 8's committed "after-0" and "after-1", and a
/// plain "last". Returns the values a read_committed reader gets, in
/// order.
fn write_rounds(data: &Path, rounds: i32) -> Vec<String> {
    let mut log = open_partition(data, "t");
    add(&mut log, 9, 0, &["long"]);
    let mut committed = Vec::new();
    for i in 0..rounds {
        add(&mut log, 8, i, &[&format!("a-{i}")]);
        end_txn(&mut log, 8, false);
        let values: Vec<String> = (0..3).map(|j| format!("c-{i}-{j}")).collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        add(&mut log, 7, 3 * i, &values);
        end_txn(&mut log, 7, true);
        committed.extend(values.iter().map(|v| v.to_string()));
    }
    end_txn(&mut log, 9, false);
    add(&mut log, 8, rounds, &["after-0", "after-1"]);
    end_txn(&mut log, 8, true);
    add(&mut log, -1, 0, &["last"]);
    log.close().unwrap();
    committed.extend(["after-0", "after-1", "last"].map(String::from));
    committed
}

/// 1,101 aborted transactions, more than a fetch's answer lists (1,000),
/// one of them open from the first offset to the last: klog-consume
/// reads every committed record once, none aborted, with fetches of any
/// size, as kcat does.
#[test]
fn more_aborted_transactions_than_a_fetch_tells() {
    let dir = tempfile::tempdir().unwrap();
    let committed = write_rounds(dir.path(), 1100);
    let expected: String = committed.iter().map(|v| format!("{v}\n")).collect();
    let broker = BrokerProc::start(dir.path(), &["--kafka-listen", "127.0.0.1:0"]);
    assert_eq!(consume_from(&broker.addr, "t", &[]), expected);
    let small = consume_from(&broker.addr, "t", &["--fetch-bytes", "1"]);
    assert_eq!(small, expected, "a batch a fetch");
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let kafka_addr = broker.kafka_addr();
    assert_eq!(
        kafka::Kcat::at(&kcat, &kafka_addr).consume("t", &[]),
        expected,
        "kcat"
    );
}

/// A consumer whose caller takes one record a poll resumes inside the
/// answer it holds, knowing which producers' transactions it had seen
/// end: producer 8's committed records after its aborted transactions
/// are handed out, its aborted ones never.
#[test]
fn a_consumer_that_stops_after_every_record_resumes_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let committed = write_rounds(dir.path(), 40);
    let broker = BrokerProc::start(dir.path(), &[]);
    let extent = Connection::connect(&broker.addr)
        .unwrap()
        .partitions_as("t", true, &[0])
        .unwrap()[0];
    let part = ConsumerPartition {
        partition: 0,
        offset: 0,
        stop_at: Some(extent.stable),
    };
    let config = ConsumerConfig::default();
    let mut consumer = Consumer::start(&broker.addr, "t", vec![part], config).unwrap();
    let mut read = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !consumer.done() && std::time::Instant::now() < deadline {
        let polled = consumer.poll(Duration::from_millis(200), |_, r| {
            read.push(String::from_utf8(r.value.to_vec()).unwrap());
            Ok(false)
        });
        polled.unwrap();
    }
    assert_eq!(read, committed);
}

/// A group's committed offset above the last stable offset (a
/// read_uncommitted member, or a reset to the end, put it there) is
/// where a read_committed member resumes, once the transaction before it
/// ends: not "past the end of the log", not reset to the beginning. An
/// offset up to the high watermark is a start for -o too.
#[test]
fn a_group_resumes_above_the_last_stable_offset_without_rewinding() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write_transactions(&data);
    let registry = dir.path().join("registry");
    let broker = BrokerProc::start(&data, &["--registry", registry.to_str().unwrap()]);
    let group = |args: &[&str]| {
        let out = bin("klog-consume")
            .args(["-b", &broker.addr, "-t", "t", "-e", "-G", "g"])
            .args(args)
            .timeout(Duration::from_secs(60))
            .assert()
            .success();
        let out = out.get_output();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("resetting"), "{stderr}");
        String::from_utf8(out.stdout.clone()).unwrap()
    };
    let uncommitted = ["--isolation-level", "read_uncommitted"];
    assert_eq!(group(&uncommitted).lines().count(), 5, "every record, to 7");
    assert_eq!(
        group(&[]),
        "",
        "read_committed: offset 7, above the last stable 6"
    );
    assert_eq!(group(&uncommitted), "", "the group's offset is still 7");
    // A reset to the end counts from where the group's members read to.
    let reset = |args: &[&str]| {
        let out = bin("klog-consume")
            .args([
                "-b",
                &broker.addr,
                "-t",
                "t",
                "-G",
                "g",
                "-J",
                "--reset-offsets",
                "end",
            ])
            .args(args)
            .assert()
            .success();
        let line = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        let reset: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        reset["offset"].clone()
    };
    assert_eq!(reset(&[]), 6, "read_committed: the last stable offset");
    assert_eq!(
        reset(&uncommitted),
        7,
        "read_uncommitted: the high watermark"
    );
    assert_eq!(consume_from(&broker.addr, "t", &["-o", "7"]), "");
    let out = bin("klog-consume")
        .args(["-b", &broker.addr, "-t", "t", "-e", "-o", "8"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("offset 8 is out of range"), "{stderr}");
}

/// klog-bench consume counts every record up to the end (it measures the
/// log, not transactions): a transaction left open does not hold it, and
/// asking for more records than the topic holds (markers take offsets
/// and hold none) is a clear error, not a wait.
#[test]
fn klog_bench_consumes_past_an_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    write_transactions(dir.path());
    let broker = BrokerProc::start(dir.path(), &[]);
    let bench = |n: &str| {
        bin("klog-bench")
            .args(["consume", "-b", &broker.addr, "-t", "t", "-n", n, "-q"])
            .timeout(Duration::from_secs(60))
            .assert()
    };
    let out = bench("5").success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.starts_with("5 records consumed"), "{stdout}");
    let out = bench("7").code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("holds 5 records, fewer than the 7"),
        "{stderr}"
    );
}

/// A read_committed consumer started by time at a record past a
/// transaction still open starts at its end, as on Kafka: kcat (whose
/// ListOffsets by time is answered -1 then) and klog-consume both end at
/// once with `-e`, and read_uncommitted ones read the record.
#[test]
fn a_start_by_time_past_an_open_transaction_is_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_partition(dir.path(), "t");
    for (id, at, value) in [(-1, 1_000, "a"), (9, 2_000, "open"), (-1, 3_000, "b")] {
        log.append(&mut batch_at(id, 0, at, &[value]), 1_000)
            .unwrap();
    }
    log.close().unwrap();
    let broker = BrokerProc::start(dir.path(), &["--kafka-listen", "127.0.0.1:0"]);
    let uncommitted = ["--isolation-level", "read_uncommitted"];
    let klog = |args: &[&str]| consume_from(&broker.addr, "t", &[&["-o", "@3000"], args].concat());
    assert_eq!(klog(&[]), "");
    assert_eq!(klog(&uncommitted), "b\n");
    assert_eq!(consume_from(&broker.addr, "t", &["-o", "@1000"]), "a\n");
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let kafka_addr = broker.kafka_addr();
    let k = kafka::Kcat::at(&kcat, &kafka_addr);
    assert_eq!(
        k.consume("t", &["-p", "0", "-o", "s@3000"]),
        "",
        "kcat read_committed"
    );
    let ru = [
        "-p",
        "0",
        "-o",
        "s@3000",
        "-X",
        "isolation.level=read_uncommitted",
    ];
    assert_eq!(k.consume("t", &ru), "b\n", "kcat read_uncommitted");
    assert_eq!(k.consume("t", &["-p", "0", "-o", "s@1000"]), "a\n");
}
