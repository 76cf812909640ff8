//! Clients follow a partition's leader when it moves (issue 13): three
//! brokers with `--replication-factor 3 --min-insync-replicas 1`, a
//! producer writing numbers with acks=1 through the registry, and the
//! leader of partition 0 killed with SIGKILL. The producer goes on to the
//! new leader without exiting (its stderr says so), and a consumer
//! started before the kill reads from the new leader, never an offset
//! twice and never going back. On a directory registry and on ZooKeeper
//! (skipped with a printed line when ZooKeeper is not installed).
//!
//! What replication keeps across the kill (every acknowledged record, at
//! its offset, on every replica) is `tests/replication.rs`'s to check.

mod common;

use std::io::Write;
use std::time::Duration;

use common::registry::{Backend, TestRegistry};
use common::{eventually, input, BrokerProc, Proc};

/// `klog-dump --registry R --json`, one JSON value per line.
fn dump(registry: &str) -> Vec<serde_json::Value> {
    let out = common::bin("klog-dump")
        .args(["--registry", registry, "--json"])
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The state of partition `p` of topic `t` as klog-dump shows it.
fn state(registry: &str, p: u64) -> Option<serde_json::Value> {
    dump(registry)
        .into_iter()
        .find(|l| l["type"] == "partition" && l["topic"] == "t" && l["partition"] == p)
}

/// The pid of the broker `id`, as klog-dump shows it.
fn pid_of(registry: &str, id: &str) -> u64 {
    dump(registry)
        .into_iter()
        .find(|l| l["type"] == "broker" && l["id"] == id)
        .and_then(|l| l["pid"].as_u64())
        .unwrap_or_else(|| panic!("broker {id} is not registered"))
}

/// Writes the numbers `from..=to` to the producer's stdin, a few at a
/// time, so that batches keep going while the leader changes.
fn feed(producer: &mut Proc, from: u64, to: u64) {
    let stdin = producer.child.stdin.as_mut().expect("stdin");
    for chunk in (from..=to).collect::<Vec<_>>().chunks(10) {
        let lines = input(chunk[0], chunk[chunk.len() - 1]);
        stdin
            .write_all(lines.as_bytes())
            .expect("the producer reads");
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `offset value` lines as the consumer prints them with `-f '%o %s\n'`.
fn parse(line: &str) -> (u64, u64) {
    let (offset, value) = line.split_once(' ').expect("offset and value");
    (offset.parse().unwrap(), value.parse().unwrap())
}

fn producer_and_consumer_follow_the_new_leader(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let spec = registry.spec().to_string();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let args = [
        "--registry",
        &spec,
        "--replication-factor",
        "3",
        "--min-insync-replicas",
        "1",
        "--partitions",
        "3",
    ];
    let mut brokers: Vec<BrokerProc> = dirs
        .iter()
        .map(|d| BrokerProc::start(d.path(), &args))
        .collect();
    eventually("three brokers registered", Duration::from_secs(30), || {
        dump(&spec).iter().filter(|l| l["type"] == "broker").count() == 3
    });

    let produce_args = [
        "--registry",
        &spec,
        "-t",
        "t",
        "--acks",
        "1",
        "--message-timeout",
        "90s",
    ];
    let mut producer =
        Proc::spawn_with_stdin("klog-produce", &produce_args, std::process::Stdio::piped());
    feed(&mut producer, 1, 200);
    eventually("partition 0 has a state", Duration::from_secs(30), || {
        state(&spec, 0).is_some_and(|s| s["leader"].is_string())
    });
    let mut consumer = Proc::spawn(
        "klog-consume",
        &[
            "--registry",
            &spec,
            "-t",
            "t",
            "-p",
            "0",
            "-o",
            "beginning",
            "-f",
            "%o %s\n",
        ],
    );
    // It looks its leader up and connects at once; it prints nothing yet.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        consumer.child.try_wait().unwrap().is_none(),
        "{:?}",
        consumer.stderr_lines()
    );

    // Kill partition 0's leader while its followers are still in sync
    // (within --replica-lag-time of the topic's creation).
    let before = state(&spec, 0).unwrap();
    let leader = before["leader"].as_str().unwrap().to_string();
    assert_eq!(before["isr"].as_array().unwrap().len(), 3, "{before}");
    let pid = pid_of(&spec, &leader);
    let victim = brokers
        .iter()
        .position(|b| u64::from(b.child.id()) == pid)
        .unwrap();
    brokers[victim].kill9();

    feed(&mut producer, 201, 400);
    assert!(
        producer.child.try_wait().unwrap().is_none(),
        "the producer exited when the leader died: {:?}",
        producer.stderr_lines()
    );
    eventually(
        "a new leader of partition 0",
        Duration::from_secs(60),
        || {
            state(&spec, 0)
                .is_some_and(|s| s["leader"].is_string() && s["leader"] != leader.as_str())
        },
    );
    feed(&mut producer, 401, 500);
    drop(producer.child.stdin.take());
    let status = producer.child.wait().unwrap();
    // Its last line may still be on its way through the stderr reader.
    producer.wait_stderr("Sent ", |_| true, Duration::from_secs(10));
    let said = producer.stderr_lines();
    assert!(status.success(), "{status}: {said:?}");
    assert!(
        said.iter()
            .any(|l| l.contains("t [0]: sending to") && l.contains("its leader")),
        "the producer says it moved: {said:?}"
    );
    assert!(
        said.iter()
            .any(|l| l.contains("Sent 500 records to t (0 failed)")),
        "{said:?}"
    );

    // The consumer reads what the new leader got after the kill.
    let mut read: Vec<(u64, u64)> = Vec::new();
    eventually(
        "the consumer reads from the new leader",
        Duration::from_secs(90),
        || {
            while let Ok(line) = consumer.lines.try_recv() {
                read.push(parse(&line));
            }
            read.iter().any(|&(_, n)| n > 200)
        },
    );
    let offsets: Vec<u64> = read.iter().map(|&(o, _)| o).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "no offset twice, none going back: {offsets:?}"
    );
    let notices = consumer.stderr_lines();
    eprintln!(
        "DEBUG producer: {said:#?}\nconsumer: {notices:#?}\nread: {:?}",
        &read[..read.len().min(5)]
    );
    assert!(
        notices
            .iter()
            .any(|l| l.contains("t [0]: fetching from") && l.contains("its leader")),
        "the consumer says it moved: {notices:?}"
    );
}

#[test]
fn producer_and_consumer_follow_a_killed_leaders_successor_in_a_directory() {
    producer_and_consumer_follow_the_new_leader(Backend::Dir);
}

#[test]
fn producer_and_consumer_follow_a_killed_leaders_successor_on_zookeeper() {
    producer_and_consumer_follow_the_new_leader(Backend::Zk);
}
