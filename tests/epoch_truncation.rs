//! A follower's truncation by leader epoch across leaders that have not
//! written in their epoch yet (found by the review of issue 13), through
//! the binaries: three brokers on 127.0.0.1 (port 0) with a directory
//! registry, temp dirs, every broker stopped on drop. It failed before the
//! fix (a new leader records its epoch when it takes the lead).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{bin, eventually, BrokerProc};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

/// Three brokers of one directory registry, topic `t` of one partition
/// with three replicas; the followers' leases and lag time long enough
/// that a broker stopped for a few seconds stays registered and in sync.
struct Cluster {
    brokers: Vec<Option<BrokerProc>>,
    registry: String,
    dir: tempfile::TempDir,
}

const ARGS: [&str; 8] = [
    "--replication-factor",
    "3",
    "--min-insync-replicas",
    "1",
    "--session-timeout",
    "60s",
    "--replica-lag-time",
    "60s",
];

impl Cluster {
    fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let registry = dir.path().join("registry").to_str().unwrap().to_string();
        let mut cluster = Cluster {
            brokers: Vec::new(),
            registry,
            dir,
        };
        for i in 0..3 {
            let b = cluster.start_broker(i);
            cluster.brokers.push(Some(b));
        }
        eventually("three brokers registered", Duration::from_secs(30), || {
            of_type(&cluster.dump(), "broker").len() == 3
        });
        cluster
    }

    fn start_broker(&self, i: usize) -> BrokerProc {
        let mut args = vec!["--registry", &self.registry];
        args.extend(ARGS);
        BrokerProc::start(&self.data(i), &args)
    }

    fn data(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("d{i}"))
    }

    /// Broker `i`'s replica of partition 0 of `t`.
    fn replica(&self, i: usize) -> PathBuf {
        self.data(i).join("t-0")
    }

    fn broker(&self, i: usize) -> &BrokerProc {
        self.brokers[i].as_ref().expect("running")
    }

    fn signal(&self, i: usize, signal: Signal) {
        let pid = Pid::from_raw(self.broker(i).child.id() as i32);
        kill(pid, signal).unwrap();
    }

    fn kill9(&mut self, i: usize) {
        self.brokers[i].take().expect("running").kill9();
    }

    fn dump(&self) -> String {
        let out = bin("klog-dump")
            .args(["--registry", &self.registry, "--json"])
            .timeout(Duration::from_secs(60))
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    }

    /// Partition 0's state: (leader's index, epoch, ISR size, high
    /// watermark).
    fn state(&self) -> Option<(usize, u64, usize, Option<u64>)> {
        let json = self.dump();
        let p = of_type(&json, "partition").into_iter().next()?;
        let leader = p["leader"].as_str()?.to_string();
        let id_of = |i: usize| std::fs::read_to_string(self.data(i).join("broker-id")).ok();
        let index = (0..3).find(|&i| id_of(i).is_some_and(|id| id.trim() == leader))?;
        Some((
            index,
            p["leader_epoch"].as_u64()?,
            p["isr"].as_array()?.len(),
            p["high_watermark"].as_u64(),
        ))
    }

    fn produce(&self, input: &str, acks: &str) -> std::process::Output {
        bin("klog-produce")
            .args(["--registry", &self.registry, "-t", "t", "--acks", acks])
            .args(["--batch", "10", "--linger", "10ms", "-q"])
            .write_stdin(input.to_string())
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A stopped broker must run again to die of its SIGKILL cleanly.
        for b in self.brokers.iter().flatten() {
            let _ = kill(Pid::from_raw(b.child.id() as i32), Signal::SIGCONT);
        }
    }
}

fn of_type(text: &str, kind: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == kind)
        .collect()
}

fn values(from: u64, to: u64) -> String {
    (from..to).map(|i| format!("value-{i:03}\n")).collect()
}

/// The leader epochs in a replica's epoch file.
fn epochs(replica: &Path) -> Vec<u32> {
    match klog::storage::epoch::Epochs::read(&klog::storage::fs::RealFs, replica) {
        Ok(Some(Ok(e))) => e.entries().iter().map(|e| e.epoch).collect(),
        _ => Vec::new(),
    }
}

/// A follower whose log ends in an epoch its new leader has no batch of
/// empties its whole log, acknowledged records included, while it is in
/// the ISR.
///
/// 1. 100 records acks=all in epoch 1 (leader L1), on all three.
/// 2. L1 is killed; X leads epoch 2 (ISR X, Y). Y is stopped (SIGSTOP,
///    well within its lease and the lag time: it stays in the ISR).
/// 3. 10 records acks=1 to X: batches of epoch 2. L1 comes back, follows
///    X and copies them: L1's log ends in epoch 2.
/// 4. L1 is stopped, X killed, Y resumed: Y (in sync) takes epoch 3 with
///    ISR {Y, L1}. Y's epoch file ends with epoch 1: it never got a
///    batch of epoch 2, and records epoch 3 only with its first batch.
/// 5. L1 resumes and follows Y: it asks where epoch 2 ends. Before the
///    fix Y answered "no such epoch" (it recorded epoch 3 only with its
///    first batch) and L1 truncated to its log's start: "truncated from
///    110 to 0". Now Y records epoch 3 when it takes the lead and answers
///    epoch 1 ending at 100 (Kafka's answer), and L1 cuts only the 10
///    records of epoch 2 Y never had.
///
/// L1 is in the ISR with an empty log until it copied Y's again: if Y
/// dies then, L1 is elected with (part of) nothing, the 100
/// acknowledged records are gone, and the next produce reuses their
/// offsets. (L1 also keeps its high watermark of 100 over an empty log:
/// as leader it would show and acknowledge records nobody copied.)
#[test]
fn a_follower_never_truncates_below_the_acknowledged_records() {
    let mut c = Cluster::start();
    eventually(
        "the first record is delivered",
        Duration::from_secs(60),
        || c.produce(&values(0, 1), "all").status.success(),
    );
    let out = c.produce(&values(1, 100), "all");
    assert!(out.status.success(), "{out:?}");
    eventually(
        "100 records in sync on all three",
        Duration::from_secs(60),
        || {
            c.state()
                .is_some_and(|(_, _, isr, hw)| isr == 3 && hw == Some(100))
        },
    );
    let (l1, epoch1, _, _) = c.state().unwrap();

    c.kill9(l1);
    let mut next = None;
    eventually("a new leader", Duration::from_secs(60), || {
        next = c.state().filter(|s| s.1 > epoch1 && s.0 != l1);
        next.is_some()
    });
    let (x, epoch2, _, _) = next.unwrap();
    let y = (0..3).find(|&i| i != l1 && i != x).unwrap();
    c.signal(y, Signal::SIGSTOP);
    // y's fetch parked at x (a long-poll of 500 ms) is answered, empty,
    // before anything of epoch 2 exists: y has no answer of x's waiting
    // in its socket to append when it runs again.
    std::thread::sleep(Duration::from_secs(2));

    let out = c.produce(&values(100, 110), "1");
    assert!(out.status.success(), "{out:?}");
    c.brokers[l1] = Some(c.start_broker(l1));
    eventually(
        "the old leader copied batches of the new epoch",
        Duration::from_secs(60),
        || epochs(&c.replica(l1)).contains(&(epoch2 as u32)),
    );
    assert!(
        !epochs(&c.replica(y)).contains(&(epoch2 as u32)),
        "y was stopped before any batch of epoch {epoch2}"
    );

    eventually(
        "the old leader back in the ISR",
        Duration::from_secs(60),
        || c.state().is_some_and(|s| s.0 == x && s.2 == 3),
    );
    c.signal(l1, Signal::SIGSTOP);
    c.kill9(x);
    c.signal(y, Signal::SIGCONT);
    eventually(
        "y leads, with the old leader in its ISR",
        Duration::from_secs(60),
        || {
            c.state()
                .is_some_and(|s| s.0 == y && s.1 > epoch2 && s.2 == 2)
        },
    );
    assert!(
        !epochs(&c.replica(y)).contains(&(epoch2 as u32)),
        "y leads without a batch of epoch {epoch2}"
    );
    c.signal(l1, Signal::SIGCONT);
    let line = c
        .broker(l1)
        .wait_for_log("truncated from", Duration::from_secs(30));
    let to: u64 = line
        .split(" to ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        to >= 100,
        "a replica in the ISR cut its log below the 100 acknowledged records: {line}"
    );
}
