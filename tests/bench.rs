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

/// `fsync` alone, and at a rate (each write timed to its durability);
/// its file removed either way, a rate of 0 refused.
#[test]
fn fsync_times_the_disk_alone_and_at_a_rate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    bin("klog-bench")
        .args(["fsync", "-n", "20", "--dir", d])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(r"^20 fsyncs of 10240-byte appends, [0-9.]+ fsyncs/sec")
                .unwrap(),
        );
    let run = [
        "fsync", "-n", "300", "-s", "208", "--rate", "20000", "--dir", d,
    ];
    bin("klog-bench")
        .args(run)
        .assert()
        .success()
        .stdout(predicate::str::is_match(r"^300 writes of 208-byte appends at 20000/sec \([0-9.]+ writes/sec, [0-9]+ fdatasyncs back to back\), each durable at the end of the first begun after it: [0-9.]+ ms avg, [0-9.]+ ms max, [0-9.]+ ms 50th, [0-9.]+ ms 95th, [0-9.]+ ms 99th, [0-9.]+ ms 99.9th.\n$").unwrap());
    let out = bin("klog-bench")
        .args(run)
        .args(["--overwrite", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["type"], "fsync_rate", "{v}");
    assert_eq!(
        (&v["records"], &v["rate"]),
        (&300.into(), &20000.into()),
        "{v}"
    );
    assert_eq!(
        (&v["append_bytes"], &v["overwrite"]),
        (&208.into(), &true.into())
    );
    let fsyncs = v["fsyncs"].as_u64().unwrap();
    assert!((1..=300).contains(&fsyncs), "{v}");
    assert!(v["latency_ms_p50"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "its file removed"
    );
    bin("klog-bench")
        .args(["fsync", "--rate", "0"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--rate"));
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

/// Processes whose command line names `dir` (a cluster's brokers keep
/// their data and registry under it): the test's guard kills any left when
/// it ends, however it ends, and the test checks there are none.
struct Leftovers<'a>(&'a std::path::Path);

impl Leftovers<'_> {
    fn pids(&self) -> Vec<i32> {
        let needle = self.0.to_str().unwrap().as_bytes();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
            })
            .collect()
    }

    /// Fails when a process still names the directory, or it is not empty.
    fn assert_none(&self) {
        let pids = self.pids();
        assert!(pids.is_empty(), "processes left running: {pids:?}");
        let left: Vec<_> = std::fs::read_dir(self.0)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(left.is_empty(), "files left behind: {left:?}");
    }
}

impl Drop for Leftovers<'_> {
    fn drop(&mut self) {
        for pid in self.pids() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The JSON a cluster run prints says what the registry held: the topic
/// placed on 3 replicas with 3 brokers live and every replica still in
/// sync at the end.
fn assert_replicated_3(v: &serde_json::Value) {
    assert_eq!(v["brokers"], 3, "{v}");
    assert_eq!(v["replication_factor"], 3, "{v}");
    assert_eq!(v["min_insync_replicas"], 2, "{v}");
    assert_eq!(v["in_sync_replicas_min"], 3, "{v}");
}

/// `--brokers 3 --replication-factor 3`: a cluster of its own (child
/// brokers, a directory registry), measured through the partitions'
/// leaders, reported with its shape, and gone when the run ends.
#[test]
fn a_cluster_of_its_own_replicates_every_record_and_says_its_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let leftovers = Leftovers(tmp.path());
    let cluster = ["--brokers", "3", "--replication-factor", "3"];
    let run = |args: &[&str]| -> serde_json::Value {
        let out = bin("klog-bench")
            .env("TMPDIR", tmp.path())
            .args(args)
            .args(cluster)
            .args(["-q", "--json"])
            .assert()
            .success();
        leftovers.assert_none();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    // Two partitions: two leaders to route to.
    let v = run(&[
        "produce",
        "-n",
        "3000",
        "--batch",
        "50",
        "--acks",
        "all",
        "--partitions",
        "2",
    ]);
    assert_eq!(v["records"], 3000, "every record acknowledged: {v}");
    assert_replicated_3(&v);
    // Single copies over a cluster: each partition's one broker serves it.
    let out = bin("klog-bench")
        .env("TMPDIR", tmp.path())
        .args([
            "produce",
            "-n",
            "1000",
            "--partitions",
            "2",
            "--brokers",
            "2",
        ])
        .args(["-q", "--json"])
        .assert()
        .success();
    leftovers.assert_none();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["records"], 1000, "{v}");
    assert_eq!(
        (
            &v["brokers"],
            &v["replication_factor"],
            &v["min_insync_replicas"]
        ),
        (&2.into(), &1.into(), &1.into()),
        "{v}"
    );
    // A consumer reads below the high watermark: what every in-sync
    // replica holds.
    let v = run(&["consume", "-n", "3000"]);
    assert_eq!(v["records"], 3000, "every record consumed: {v}");
    assert_replicated_3(&v);
    let v = run(&["latency", "-n", "2000", "--rate", "4000"]);
    assert_eq!(v["records"], 2000, "{v}");
    assert!(v["latency_ms_p99"].as_f64().unwrap() > 0.0, "{v}");
    assert_replicated_3(&v);
    // The paper's bytes per record are one replica's, acks=1 or not.
    let out = bin("klog-bench")
        .env("TMPDIR", tmp.path())
        .args(["paper", "-n", "20000", "-q", "--json"])
        .args(cluster)
        .assert()
        .success();
    leftovers.assert_none();
    let overhead: Vec<(u64, f64)> = String::from_utf8_lossy(&out.get_output().stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "overhead")
        .map(|v| {
            (
                v["batch"].as_u64().unwrap(),
                v["bytes_per_record"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(overhead.len(), 2, "{overhead:?}");
    for (batch, bytes) in overhead {
        let (low, high) = if batch == 1 {
            (60.0, 80.0)
        } else {
            (5.0, 15.0)
        };
        assert!(
            (low..high).contains(&bytes),
            "batch {batch}: {bytes} bytes of overhead per record"
        );
    }
    // Shapes that cannot work are usage errors, said before anything runs.
    for (args, why) in [
        (
            &["produce", "--brokers", "2", "--replication-factor", "3"][..],
            "more than --brokers 2",
        ),
        (
            &["produce", "--replication-factor", "2"],
            "--replication-factor 2 needs --brokers",
        ),
        (
            &[
                "produce",
                "--brokers",
                "3",
                "--replication-factor",
                "3",
                "--min-insync-replicas",
                "4",
            ],
            "more than --replication-factor 3",
        ),
        (&["produce", "--brokers", "0"], "--brokers"),
        (
            &["produce", "--brokers", "3", "-b", "127.0.0.1:9"],
            "give one of them",
        ),
    ] {
        bin("klog-bench")
            .env("TMPDIR", tmp.path())
            .env_remove("KLOG_BROKER")
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(why));
    }
    // A flag beats the environment: --brokers over KLOG_BROKER.
    bin("klog-bench")
        .env("TMPDIR", tmp.path())
        .env("KLOG_BROKER", "127.0.0.1:9")
        .args(["produce", "-n", "100", "--brokers", "1", "-q"])
        .assert()
        .success();
    leftovers.assert_none();
}

/// SIGINT in the middle of a cluster run: klog-bench stops its brokers
/// and removes their directories, and ends cleanly.
#[test]
fn sigint_stops_and_removes_the_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let leftovers = Leftovers(tmp.path());
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-bench"));
    command.env("TMPDIR", tmp.path()).args([
        "produce",
        "-n",
        "1000000000",
        "--brokers",
        "3",
        "--replication-factor",
        "3",
        "--acks",
        "all",
    ]);
    let mut bench = common::Proc::spawn_command(command, std::process::Stdio::null());
    bench.wait_stderr(
        "in-sync replicas",
        |_| true,
        std::time::Duration::from_secs(60),
    );
    assert!(!leftovers.pids().is_empty(), "the brokers run as processes");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pid = nix::unistd::Pid::from_raw(bench.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = bench.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "klog-bench still runs 15 s after SIGINT: {:?}",
            bench.stderr_lines()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{:?}", bench.stderr_lines());
    leftovers.assert_none();
}
