//! Issue 23, "hand over", for a failed fsync through the file-system
//! seam: three brokers in this process, each over a simulated disk of
//! its own (`BrokerConfig::vfs`), sharing a registry directory, and real
//! `klog-produce --registry --acks all` processes as the clients. The
//! leader's next fsync fails: its partition stops there (a restart
//! recovers it), so it must give up the lead to the other in-sync
//! replicas at once, rather than stay named leader while it acknowledges
//! nothing; the producer goes on through the new leader.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use klog::broker::{Broker, BrokerConfig, BrokerHandle};
use klog::storage::fs::sim::SimFs;

use common::bin;

/// A broker of this process over a simulated disk.
struct Node {
    sim: Arc<SimFs>,
    id: String,
    handle: BrokerHandle,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl Node {
    fn start(registry: &Path) -> Node {
        let sim = Arc::new(SimFs::new());
        let mut config = BrokerConfig::new("/data", "127.0.0.1:0");
        config.vfs = sim.clone();
        config.quiet = std::env::var_os("KLOG_TEST_VERBOSE").is_none();
        config.log.index_bytes_max = 4096;
        config.registry = Some(registry.to_path_buf());
        config.replication_factor = 3;
        config.min_insync_replicas = 2;
        config.session_timeout = Duration::from_secs(2);
        config.replica_lag_time = Duration::from_secs(3);
        let broker = Broker::open(config).expect("the broker opens");
        let handle = broker.handle().unwrap();
        let id = String::new();
        let thread = Some(std::thread::spawn(move || broker.run()));
        Node {
            sim,
            id,
            handle,
            thread,
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.handle.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Produces `from..to` (one number a line) to topic t through the
/// registry, acks=all; whether every record was acknowledged.
fn produce(registry: &Path, from: u64, to: u64) -> std::process::Output {
    let input: String = (from..to).map(|i| format!("{i}\n")).collect();
    bin("klog-produce")
        .args(["--registry", registry.to_str().unwrap(), "-t", "t"])
        .args(["--acks", "all", "-X", "message.timeout.ms=30000"])
        .write_stdin(input)
        .output()
        .unwrap()
}

/// Waits up to `bound` for `done`.
fn wait(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < bound, "{what} (waited {bound:?})");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_leader_whose_fsync_fails_hands_over_and_the_producer_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("registry");
    std::fs::create_dir(&registry).unwrap();
    let mut nodes: Vec<Node> = (0..3).map(|_| Node::start(&registry)).collect();
    let view = klog::coord::open_read_only(&registry).unwrap();
    for node in &mut nodes {
        let addr = node.handle.local_addr().to_string();
        node.id = view
            .brokers()
            .unwrap()
            .into_iter()
            .find(|b| b.addr() == addr)
            .expect("registered")
            .id;
    }
    let first = produce(&registry, 0, 200);
    assert!(first.status.success(), "{first:?}");
    let state = || view.partition_state("t", 0).unwrap().map(|(s, _)| s);
    wait("every replica in sync", Duration::from_secs(20), || {
        state().is_some_and(|s| s.isr.len() == 3)
    });
    let before = state().unwrap();
    let leader = before.leader.clone().unwrap();
    let failing = nodes.iter().find(|n| n.id == leader).unwrap();
    failing
        .sim
        .fail_next_sync(|path| path.to_string_lossy().contains("t-0"));
    // The failed fsync comes with the next records' flush.
    let second = produce(&registry, 200, 400);
    assert!(second.status.success(), "{second:?}");
    // Refused, it looked the leader up again after a growing wait, not
    // at once in a loop (647 requests sent again in under a second).
    let said = String::from_utf8_lossy(&second.stderr);
    let again: u64 = said
        .lines()
        .find_map(|l| l.strip_prefix("% ")?.split_once(" requests sent again"))
        .map_or(0, |(n, _)| n.parse().unwrap());
    assert!(again <= 20, "{again} requests sent again: {said}");
    let after = state().unwrap();
    assert!(
        after.leader.as_deref() != Some(leader.as_str()) && !after.isr.contains(&leader),
        "the leader whose fsync failed handed over and left the ISR: {before:?} then {after:?}"
    );
    assert!(after.leader_epoch > before.leader_epoch, "{after:?}");
    let read = bin("klog-consume")
        .args([
            "--registry",
            registry.to_str().unwrap(),
            "-t",
            "t",
            "-e",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(read.status.success(), "{read:?}");
    let read: std::collections::BTreeSet<u64> = String::from_utf8(read.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let missing: Vec<u64> = (0..400).filter(|i| !read.contains(i)).collect();
    assert!(missing.is_empty(), "acknowledged, not read: {missing:?}");
}
