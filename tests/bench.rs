//! `klog-bench` through the binary, with small runs: the numbers are not
//! checked (that is what a benchmark is for), the output's shape is.

mod common;

use common::{bin, lines, produce_to, BrokerProc};
use predicates::prelude::*;

#[test]
fn produce_consume_and_latency_print_kafkas_line_or_json() {
    bin("klog-bench")
        .args(["produce", "-n", "20000", "-q"])
        .assert()
        .success()
        .stdout(predicate::str::is_match(r"^20000 records sent, [0-9.]+ records/sec \([0-9.]+ MB/sec\), [0-9.]+ ms avg latency, [0-9.]+ ms max latency, [0-9.]+ ms 50th, [0-9.]+ ms 95th, [0-9.]+ ms 99th, [0-9.]+ ms 99.9th.\n$").unwrap());
    let out = bin("klog-bench")
        .args(["consume", "-n", "20000", "-q", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["records"], 20000);
    assert!(
        v["records_per_sec"].is_number() && v["mb_per_sec"].is_number(),
        "{v}"
    );
    assert!(
        v.get("latency_ms_avg").is_none(),
        "a consume times no latency: {v}"
    );
    let out = bin("klog-bench")
        .args(["produce", "-n", "20000", "-q", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    for field in [
        "records_per_sec",
        "mb_per_sec",
        "latency_ms_avg",
        "latency_ms_max",
        "latency_ms_p50",
        "latency_ms_p95",
        "latency_ms_p99",
        "latency_ms_p999",
    ] {
        assert!(v[field].is_number(), "{field} in {v}");
    }
    let out = bin("klog-bench")
        .args(["latency", "-n", "5000", "--rate", "20000", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["records"], 5000);
    assert!(v["latency_ms_p99"].as_f64().unwrap() > 0.0, "{v}");
}

#[test]
fn paper_prints_the_table_beside_the_papers_figures() {
    bin("klog-bench")
        .args(["paper", "-n", "20000", "-q"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("400,000 records/s")
                .and(predicate::str::contains("produce, batch 1"))
                .and(predicate::str::contains(
                    "bytes of overhead per record, batch 50",
                )),
        );
}

#[test]
fn against_a_running_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    produce_to(&broker.addr, "data", &lines(3000), &[]);
    bin("klog-bench")
        .args([
            "consume",
            "-b",
            &broker.addr,
            "-t",
            "data",
            "-n",
            "3000",
            "-q",
        ])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("3000 records consumed"));
    // More than the topic holds: a clear error.
    bin("klog-bench")
        .args([
            "consume",
            "-b",
            &broker.addr,
            "-t",
            "data",
            "-n",
            "5000",
            "-q",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("holds 3000 records"));
}

#[test]
fn several_producers_over_several_partitions() {
    let out = bin("klog-bench")
        .args([
            "produce",
            "-n",
            "10001",
            "--producers",
            "3",
            "--partitions",
            "4",
            "--batch",
            "7",
            "--acks",
            "all",
            "-q",
            "--json",
        ])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        v["records"], 10001,
        "every record of every producer acknowledged"
    );
    // Values that cannot work are usage errors, said before anything runs.
    for (args, why) in [
        (&["produce", "--acks", "maybe"][..], "is not 0, 1 or all"),
        (&["produce", "--batch", "0"], "--batch"),
        (&["produce", "--in-flight", "0"], "--in-flight"),
        (&["produce", "--producers", "0"], "--producers"),
        (&["produce", "--partitions", "0"], "--partitions"),
        (&["consume", "--fetch-size", "0"], "from 1 byte to 4GiB - 1"),
        (
            &["consume", "--fetch-size", "8GiB"],
            "from 1 byte to 4GiB - 1",
        ),
        (&["latency", "-s", "4"], "under 8 bytes"),
        (&["latency", "--rate", "0"], "--rate"),
    ] {
        bin("klog-bench")
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why));
    }
}

/// The head-of-line workloads: fanout acknowledges every record over every
/// partition; roll times partition 0 while partition 1 rolls, and says how
/// much partition 1 took.
#[test]
fn fanout_and_roll_report_like_produce() {
    let out = bin("klog-bench")
        .args(["fanout", "-n", "3001", "--partitions", "8", "-q", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["records"], 3001, "{v}");
    assert_eq!(v["type"], "fanout");
    let out = bin("klog-bench")
        .args(["roll", "-n", "300", "--background-rate", "8MiB", "--json"])
        .assert()
        .success()
        .stderr(
            predicate::str::is_match(
                r"% partition 1 took [0-9.]+ MiB meanwhile \(segments of 1\.0 MiB\)",
            )
            .unwrap(),
        );
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["records"], 300, "{v}");
    assert!(v["latency_ms_p99"].as_f64().unwrap() > 0.0, "{v}");
    for (args, why) in [
        (
            &["roll", "--segment-bytes", "1KiB"][..],
            "a segment holds from 4KiB",
        ),
        (&["roll", "--acks", "maybe"], "is not 0, 1 or all"),
        (&["fanout", "--partitions", "0"], "--partitions"),
    ] {
        bin("klog-bench")
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why));
    }
}
