//! Issue 13, step 7: what the tools show of replication, through the
//! binaries, on a cluster of three brokers with a directory registry and
//! a topic of replication factor 3.
//!
//! - `klog-dump --registry` shows each partition's replicas, leader,
//!   leader epoch, ISR and high watermark (asked of the leader), and why
//!   there is none when the leader does not answer.
//! - `klog-consume -L --registry` shows the real leader, replicas and ISR.
//! - `klog-dump --compare DIR...` finds the replicas identical below the
//!   high watermark, and names the first offset where one differs: a
//!   changed byte of a record, a replica missing its tail.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{bin, eventually, BrokerProc};
use serde_json::Value;

/// Records produced: the first alone (it waits for the partition's first
/// leader), then the rest in batches of 10.
const RECORDS: u64 = 50;

/// Three brokers of one registry serving topic `t` (one partition, three
/// replicas) with [`RECORDS`] records `value-000`, `value-001`...,
/// replicated: its high watermark is [`RECORDS`] and its ISR all three.
/// Everything stops when it is dropped.
struct Cluster {
    brokers: Vec<BrokerProc>,
    registry: String,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let registry = dir.path().join("registry").to_str().unwrap().to_string();
        let brokers = (1..=3)
            .map(|i| {
                BrokerProc::start(
                    &dir.path().join(format!("d{i}")),
                    &["--registry", &registry, "--replication-factor", "3"],
                )
            })
            .collect();
        let cluster = Cluster {
            brokers,
            registry,
            dir,
        };
        // The partition gets its first leader a moment after the topic is
        // created: until then a produce is refused (leader_not_available).
        let mut refused = Vec::new();
        eventually(
            "the first record is delivered",
            Duration::from_secs(60),
            || {
                let out = cluster.produce(&value(0));
                refused.push(String::from_utf8_lossy(&out.stderr).into_owned());
                out.status.success()
            },
        );
        let rest: String = (1..RECORDS).map(value).collect();
        let out = cluster.produce(&rest);
        assert!(out.status.success(), "{out:?}");
        eventually(
            "the high watermark reaches the records produced, with all three in sync",
            Duration::from_secs(60),
            || {
                let p = &cluster.partition_line();
                p["high_watermark"] == RECORDS && p["isr"].as_array().is_some_and(|i| i.len() == 3)
            },
        );
        cluster
    }

    fn produce(&self, input: &str) -> std::process::Output {
        bin("klog-produce")
            .args(["--registry", &self.registry, "-t", "t", "--acks", "all"])
            .args(["--batch", "10", "--linger", "1s", "-q"])
            .write_stdin(input.to_string())
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap()
    }

    /// `klog-dump --registry --json`'s line of partition 0 of `t`.
    fn partition_line(&self) -> Value {
        let json = stdout("klog-dump", &["--registry", &self.registry, "--json"]);
        let lines = of_type(&json, "partition");
        assert_eq!(lines.len(), 1, "{json}");
        lines[0].clone()
    }

    /// The replica of partition 0 of `t` on broker `i` (1 to 3).
    fn replica(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("d{i}")).join("t-0")
    }

    /// Kills every broker at once (no failover between the kills).
    fn kill_all(&mut self) {
        for b in &mut self.brokers {
            b.child.kill().unwrap();
        }
        for b in &mut self.brokers {
            b.child.wait().unwrap();
        }
    }

    /// Stops every broker cleanly.
    fn stop(&mut self) {
        for b in &mut self.brokers {
            assert!(b.terminate().success());
        }
    }
}

fn value(i: u64) -> String {
    format!("value-{i:03}\n")
}

/// Runs `name` with `args`, which must succeed; its stdout.
fn stdout(name: &str, args: &[&str]) -> String {
    let out = bin(name)
        .args(args)
        .env("NO_COLOR", "1")
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// The JSON lines of `text` whose `type` is `kind`.
fn of_type(text: &str, kind: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == kind)
        .collect()
}

/// The rows of the tables in `text` with `cells` cells, trimmed.
fn rows(text: &str, cells: usize) -> Vec<Vec<String>> {
    text.lines()
        .map(|line| {
            line.split(['│', '┆'])
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|c| c.len() == cells)
        .collect()
}

/// `klog-dump --compare` of `dirs` with extra `args`: its exit code,
/// stdout and stderr.
fn compare(dirs: &[&Path], args: &[&str]) -> (i32, String, String) {
    let out = bin("klog-dump")
        .arg("--compare")
        .args(dirs)
        .args(args)
        .env("NO_COLOR", "1")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// The one segment of a replica.
fn segment(replica: &Path) -> PathBuf {
    replica.join("00000000000000000000.log")
}

/// Copies a partition directory's files into `to` (created).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn dump_registry_and_dash_l_show_the_leader_epoch_isr_and_high_watermark() {
    let mut cluster = Cluster::start();
    let p = cluster.partition_line();
    let replicas = p["replicas"].as_array().unwrap().clone();
    assert_eq!(replicas.len(), 3, "{p}");
    assert!(replicas.contains(&p["leader"]), "{p}");
    assert!(p["leader_epoch"].is_u64(), "{p}");
    let mut isr = p["isr"].as_array().unwrap().clone();
    let mut all = replicas.clone();
    isr.sort_by_key(|v| v.to_string());
    all.sort_by_key(|v| v.to_string());
    assert_eq!(isr, all, "{p}");
    assert!(p["high_watermark_error"].is_null(), "{p}");

    // The table: the state's columns, then the high watermark.
    let tables = stdout("klog-dump", &["--registry", &cluster.registry]);
    let joined = |v: &Value| {
        let ids: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        ids.join(",")
    };
    let epoch = p["leader_epoch"].to_string();
    let leader = p["leader"].as_str().unwrap();
    assert_eq!(
        rows(&tables, 7),
        [
            vec![
                "topic",
                "partition",
                "replicas",
                "leader",
                "epoch",
                "isr",
                "high watermark"
            ],
            vec![
                "t",
                "0",
                &joined(&p["replicas"]),
                leader,
                &epoch,
                &joined(&p["isr"]),
                "50"
            ],
        ],
        "{tables}"
    );

    // -L: the leader, replicas and ISR of the state, the end offset the
    // leader's high watermark; klog-produce -L says the same.
    for tool in ["klog-consume", "klog-produce"] {
        let json = stdout(tool, &["-L", "-J", "--registry", &cluster.registry]);
        let parts = of_type(&json, "partition");
        assert_eq!(parts.len(), 1, "{json}");
        let l = &parts[0];
        assert_eq!(l["leader"], p["leader"], "{l}");
        assert_eq!(l["replicas"], p["replicas"], "{l}");
        assert_eq!(l["isr"], p["isr"], "{l}");
        assert_eq!(l["end_offset"], RECORDS, "{l}");
        assert_eq!(l["state"], "online", "{l}");
    }
    let table = stdout("klog-consume", &["-L", "--registry", &cluster.registry]);
    assert!(
        rows(&table, 7).contains(&vec![
            "t".to_string(),
            "0".into(),
            leader.into(),
            joined(&p["replicas"]),
            joined(&p["isr"]),
            "0".into(),
            "50".into(),
        ]),
        "{table}"
    );

    // No broker runs any more: the state stays, with whichever leader it
    // last had, and the high watermark is unknown, the dump says why.
    cluster.kill_all();
    let p = cluster.partition_line();
    assert!(p["high_watermark"].is_null(), "{p}");
    let why = p["high_watermark_error"].as_str().unwrap();
    match p["leader"].as_str() {
        Some(leader) => assert!(
            why.contains(leader) && why.contains("not registered"),
            "{p}"
        ),
        None => assert!(why.contains("offline"), "{p}"),
    }
    let tables = stdout("klog-dump", &["--registry", &cluster.registry]);
    let row = &rows(&tables, 7)[1];
    assert_eq!(row[6], format!("? ({why})"), "{tables}");
}

#[test]
fn compare_finds_the_replicas_identical_then_names_the_first_difference() {
    let mut cluster = Cluster::start();
    cluster.stop();
    let (r1, r2, r3) = (cluster.replica(1), cluster.replica(2), cluster.replica(3));
    let replicas = [r1.as_path(), &r2, &r3];

    // Identical: below the lowest end by default, or the given watermark.
    for args in [&[][..], &["--high-watermark", "50"]] {
        let (code, out, err) = compare(&replicas, args);
        assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
        assert!(out.contains("identical below offset 50"), "{out}");
    }
    let (code, out, _) = compare(&replicas, &["--json"]);
    assert_eq!(code, 0);
    let found = of_type(&out, "comparison");
    assert_eq!(found.len(), 1, "{out}");
    assert_eq!(found[0]["identical"], true, "{out}");
    assert_eq!(found[0]["high_watermark"], RECORDS, "{out}");
    assert!(found[0]["first_difference"].is_null(), "{out}");
    let each = of_type(&out, "replica");
    assert_eq!(each.len(), 3, "{out}");
    for r in &each {
        assert_eq!(r["end_offset"], RECORDS, "{r}");
        assert!(!r["leader_epochs"].as_array().unwrap().is_empty(), "{r}");
    }

    // A replica missing its last batch: a problem below a high watermark
    // it does not reach, a note when it sets the watermark itself.
    let short = cluster.dir.path().join("short").join("t-0");
    copy_dir(&r3, &short);
    let batches = of_type(
        &stdout("klog-dump", &["--json", segment(&short).to_str().unwrap()]),
        "batch",
    );
    let last = batches.last().unwrap();
    let cut = last["base_offset"].as_u64().unwrap();
    assert!(cut > 1 && cut < RECORDS, "{batches:?}");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(segment(&short))
        .unwrap();
    file.set_len(last["position"].as_u64().unwrap()).unwrap();
    let with_short = [r1.as_path(), &r2, &short];
    let (code, out, err) = compare(&with_short, &["--high-watermark", "50"]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        err.contains(&format!("offset {cut}")) && err.contains(short.to_str().unwrap()),
        "{err}"
    );
    let (code, out, err) = compare(&with_short, &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(&format!("identical below offset {cut}")),
        "{out}"
    );
    assert!(
        err.contains("note:") && err.contains(&format!("offset {cut}")),
        "{err}"
    );
    let (_, out, _) = compare(&with_short, &["--json"]);
    let found = &of_type(&out, "comparison")[0];
    assert_eq!(found["first_difference"], cut, "{out}");
    assert_eq!(found["below_high_watermark"], false, "{out}");

    // One byte of record 37's value changed on one replica: its batch's
    // CRC32C no longer holds, and the replica ends at that batch.
    let hurt = batches
        .iter()
        .map(|b| b["base_offset"].as_u64().unwrap())
        .filter(|&base| base <= 37)
        .max()
        .unwrap();
    let bytes = std::fs::read(segment(&r2)).unwrap();
    let at = bytes
        .windows(9)
        .position(|w| w == b"value-037")
        .expect("record 37 in the segment");
    let mut changed = bytes.clone();
    changed[at + 8] = b'8';
    std::fs::write(segment(&r2), &changed).unwrap();
    let (code, out, err) = compare(&replicas, &[]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        err.contains(&format!("offset {hurt}"))
            && err.contains("crc mismatch")
            && err.contains(r2.to_str().unwrap()),
        "{err}"
    );
    let (code, out, _) = compare(&replicas, &["--json", "--high-watermark", "50"]);
    assert_eq!(code, 3);
    let found = &of_type(&out, "comparison")[0];
    assert_eq!(found["first_difference"], hurt, "{out}");
    assert_eq!(found["below_high_watermark"], true, "{out}");
    assert_eq!(found["identical"], false, "{out}");
}
