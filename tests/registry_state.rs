//! What `klog-dump --registry` shows of replicated topics, on both
//! registry backends: each partition that has a state, with its replicas,
//! leader, leader epoch and in-sync replicas, as a table and as JSON
//! lines; and that it only looks (a change a writer left unfinished is
//! shown, not finished). ZooKeeper's half is skipped with a printed line
//! when ZooKeeper is not installed.

mod common;

use std::time::Duration;

use common::registry::{Backend, TestRegistry};
use klog::coord::{PartitionState, Registry};

fn dump(registry: &str, json: bool) -> String {
    let mut args = vec!["--registry", registry];
    if json {
        args.push("--json");
    }
    let out = common::bin("klog-dump")
        .args(&args)
        .env("NO_COLOR", "1")
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// The rows of the tables with `cells` cells, trimmed.
fn rows(tables: &str, cells: usize) -> Vec<Vec<String>> {
    tables
        .lines()
        .map(|line| {
            line.split(['│', '┆'])
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|c| c.len() == cells)
        .collect()
}

/// The JSON lines of `type` partition.
fn partition_lines(json: &str) -> Vec<serde_json::Value> {
    json.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["type"] == "partition")
        .collect()
}

/// Places `t` (3 partitions, replicas on b1..b3), gives partition 0 a
/// state changed once and partition 2 an offline one; partition 1 has
/// none.
fn replicated(reg: &dyn Registry) {
    let ids: Vec<String> = ["b3", "b1", "b2"].map(String::from).to_vec();
    reg.place_topic_replicated("t", 3, 3, &ids).unwrap();
    let state = |leader: Option<&str>, epoch, isr: &[&str]| PartitionState {
        leader: leader.map(String::from),
        leader_epoch: epoch,
        isr: isr.iter().map(|s| s.to_string()).collect(),
    };
    let first = state(Some("b1"), 0, &["b1", "b2", "b3"]);
    assert!(reg.create_partition_state("t", 0, &first).unwrap());
    let failover = state(Some("b2"), 1, &["b2", "b3"]);
    assert!(reg.set_partition_state("t", 0, &failover, 0).unwrap());
    assert!(reg
        .create_partition_state("t", 2, &state(None, 4, &["b3"]))
        .unwrap());
}

fn shows_each_state(backend: Backend) {
    let Some(test) = TestRegistry::start(backend) else {
        return;
    };
    replicated(&*test.open());
    let tables = dump(test.spec(), false);
    // No broker runs: no leader answers with a high watermark.
    let unknown = "? (the leader b2 is not registered: not running)";
    assert_eq!(
        rows(&tables, 7),
        [
            [
                "topic",
                "partition",
                "replicas",
                "leader",
                "epoch",
                "isr",
                "high watermark"
            ],
            ["t", "0", "b1,b2,b3", "b2", "1", "b2,b3", unknown],
            [
                "t",
                "2",
                "b3,b1,b2",
                "offline",
                "4",
                "b3",
                "? (offline: no leader)"
            ],
        ],
        "{tables}"
    );
    let lines = partition_lines(&dump(test.spec(), true));
    assert_eq!(
        lines[0],
        serde_json::json!({"type": "partition", "topic": "t", "partition": 0,
            "replicas": ["b1", "b2", "b3"], "leader": "b2", "leader_epoch": 1,
            "isr": ["b2", "b3"], "version": 1, "high_watermark": null,
            "high_watermark_error": "the leader b2 is not registered: not running"})
    );
    assert_eq!(lines[1]["partition"], 2);
    assert!(lines[1]["leader"].is_null(), "{}", lines[1]);
    assert_eq!(lines.len(), 2, "partition 1 has no state");
}

#[test]
fn klog_dump_shows_each_partitions_leader_epoch_and_isr_in_a_directory() {
    shows_each_state(Backend::Dir);
}

#[test]
fn klog_dump_shows_each_partitions_leader_epoch_and_isr_on_zookeeper() {
    shows_each_state(Backend::Zk);
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A change whose writer died after taking its version is shown as made,
/// and left as it is; a file that is not a state is shown as its error.
#[test]
fn klog_dump_shows_an_unfinished_change_without_finishing_it_and_names_garbage() {
    let test = TestRegistry::start(Backend::Dir).unwrap();
    replicated(&*test.open());
    let partition = test.dir().unwrap().join("states/t-0");
    let proposal = br#"{"leader":"b3","leader_epoch":2,"isr":["b3"]}"#;
    std::fs::write(partition.join(".1-2-3.new"), proposal).unwrap();
    std::fs::rename(partition.join("1"), partition.join("1.1-2-3")).unwrap();
    std::fs::write(test.dir().unwrap().join("states/t-2/junk"), "x").unwrap();
    let before = names(&partition);
    let tables = dump(test.spec(), false);
    let rows = rows(&tables, 7);
    let unknown = "? (the leader b3 is not registered: not running)";
    assert_eq!(
        rows[1],
        ["t", "0", "b1,b2,b3", "b3", "2", "b3", unknown],
        "{tables}"
    );
    assert!(
        rows[2][3].contains("states/t-2/junk") && rows[2][3].contains("not a partition state"),
        "{tables}"
    );
    let lines = partition_lines(&dump(test.spec(), true));
    assert_eq!(lines[0]["version"], 2);
    assert!(lines[1]["error"].as_str().unwrap().contains("junk"));
    assert_eq!(names(&partition), before, "a look finishes nothing");
    // The next writer finishes it, from version 2.
    let reg = test.open();
    let next = PartitionState {
        leader: Some("b1".into()),
        leader_epoch: 3,
        isr: vec!["b1".into()],
    };
    assert!(!reg.set_partition_state("t", 0, &next, 1).unwrap());
    assert!(reg.set_partition_state("t", 0, &next, 2).unwrap());
    assert_eq!(names(&partition), ["3"]);
}

/// A topic deleted through the registry (`topic_delete::mark`, then each
/// broker's `done`) loses its placement, every partition's state, its
/// configs, its moved log starts and its groups' offsets, and nothing of
/// another topic whose name extends it; its name is free once the last
/// broker is done. Both backends.
fn deletes_a_topic_and_nothing_else(backend: Backend) {
    use klog::coord::{log_start, topic_config, topic_delete};
    let Some(test) = TestRegistry::start(backend) else {
        return;
    };
    let reg = test.open();
    replicated(&*reg);
    let ids: Vec<String> = ["b1", "b2"].map(String::from).to_vec();
    reg.place_topic_replicated("t-1", 2, 2, &ids).unwrap();
    let state = PartitionState {
        leader: Some("b1".into()),
        leader_epoch: 0,
        isr: ids.clone(),
    };
    assert!(reg.create_partition_state("t-1", 0, &state).unwrap());
    for topic in ["t", "t-1"] {
        let set = topic_config::change(&*reg, topic, &mut |c| c.set("retention.ms", "5"));
        set.unwrap().unwrap();
        log_start::raise(&*reg, topic, 0, 3).unwrap();
        reg.reset_offset("g", topic, 0, 7).unwrap();
    }
    let marked = topic_delete::mark(&*reg, "t").unwrap().unwrap();
    assert_eq!(
        marked.brokers.iter().collect::<Vec<_>>(),
        ["b1", "b2", "b3"]
    );
    assert!(reg.placement("t").unwrap().is_none());
    for p in 0..3 {
        assert!(reg.partition_state("t", p).unwrap().is_none(), "t-{p}");
    }
    assert_eq!(reg.config(topic_config::KIND, "t").unwrap(), None);
    assert_eq!(log_start::get(&*reg, "t", 0).unwrap(), 0);
    for b in ["b1", "b3"] {
        assert!(!topic_delete::done(&*reg, "t", b).unwrap());
    }
    assert_eq!(
        reg.committed("g", "t", 0).unwrap(),
        Some(7),
        "until the last"
    );
    assert!(topic_delete::done(&*reg, "t", "b2").unwrap());
    assert_eq!(reg.committed("g", "t", 0).unwrap(), None);
    assert!(topic_delete::pending(&*reg).unwrap().is_empty());
    // The other topic is whole.
    assert_eq!(reg.placement("t-1").unwrap().unwrap().brokers.len(), 2);
    assert_eq!(reg.partition_state("t-1", 0).unwrap().unwrap().0, state);
    assert!(reg.config(topic_config::KIND, "t-1").unwrap().is_some());
    assert_eq!(log_start::get(&*reg, "t-1", 0).unwrap(), 3);
    assert_eq!(reg.committed("g", "t-1", 0).unwrap(), Some(7));
}

#[test]
fn a_topic_deleted_in_a_directory_registry_leaves_nothing_and_takes_nothing_else() {
    deletes_a_topic_and_nothing_else(Backend::Dir);
}

#[test]
fn a_topic_deleted_on_zookeeper_leaves_nothing_and_takes_nothing_else() {
    deletes_a_topic_and_nothing_else(Backend::Zk);
}

/// A placement is replaced only while it is the one the change read
/// (CreatePartitions' compare-and-set), never after the topic was
/// removed, and keeps its old partitions' replicas. Both backends.
fn replaces_a_placement_by_compare_and_set(backend: Backend) {
    use klog::coord::partitions_add::{self, Refused};
    let Some(test) = TestRegistry::start(backend) else {
        return;
    };
    let reg = test.open();
    let ids: Vec<String> = ["b1", "b2", "b3"].map(String::from).to_vec();
    let _live: Vec<_> = (ids.iter())
        .map(|id| {
            let info = klog::coord::BrokerInfo {
                id: id.clone(),
                host: "127.0.0.1".into(),
                port: 1,
                pid: std::process::id(),
                topics: Default::default(),
                kafka: None,
                principal: None,
            };
            reg.register_broker(&info).unwrap()
        })
        .collect();
    let old = reg.place_topic_replicated("t", 2, 2, &ids).unwrap();
    let (grown, from) = partitions_add::add(&*reg, "t", 4, None, false)
        .unwrap()
        .unwrap();
    assert_eq!(from, 2);
    assert_eq!(reg.placement("t").unwrap().unwrap(), grown);
    assert_eq!(grown.brokers.len(), 4);
    for p in 0..2 {
        assert_eq!(grown.replicas_of(p), old.replicas_of(p), "partition {p}");
    }
    assert_eq!(grown.replicas_of(2).unwrap(), ["b3", "b1"]);
    // A change read before the growth writes nothing.
    let stale = partitions_add::grown(&old, 3, None, &ids).unwrap();
    assert!(!reg.replace_placement(&old, &stale).unwrap());
    assert_eq!(reg.placement("t").unwrap().unwrap(), grown);
    let fewer = partitions_add::add(&*reg, "t", 3, None, false).unwrap();
    assert!(matches!(fewer, Err(Refused::Count(_))), "{fewer:?}");
    // Removed, it stays removed.
    reg.remove_topic("t").unwrap();
    let more = partitions_add::grown(&grown, 5, None, &ids).unwrap();
    assert!(!reg.replace_placement(&grown, &more).unwrap());
    assert!(reg.placement("t").unwrap().is_none());
    assert!(reg.topics().unwrap().is_empty(), "{:?}", reg.topics());
}

#[test]
fn a_placement_in_a_directory_registry_grows_by_compare_and_set() {
    replaces_a_placement_by_compare_and_set(Backend::Dir);
}

#[test]
fn a_placement_on_zookeeper_grows_by_compare_and_set() {
    replaces_a_placement_by_compare_and_set(Backend::Zk);
}

/// Of growths racing from one placement, in threads of their own, exactly
/// one is written (a directory registry's lock orders them; ZooKeeper's
/// versions do).
fn one_of_racing_growths_wins(backend: Backend) {
    use klog::coord::partitions_add;
    let Some(test) = TestRegistry::start(backend) else {
        return;
    };
    let ids: Vec<String> = vec!["b1".into()];
    for round in 0..10 {
        let topic = format!("r{round}");
        let old = test.open().place_topic(&topic, 1, &ids).unwrap();
        let writers: Vec<_> = (0..4u32)
            .map(|i| {
                let (reg, old, ids) = (test.open(), old.clone(), ids.clone());
                std::thread::spawn(move || {
                    let new = partitions_add::grown(&old, 2 + i, None, &ids).unwrap();
                    reg.replace_placement(&old, &new).unwrap().then_some(new)
                })
            })
            .collect();
        let won: Vec<_> = writers
            .into_iter()
            .filter_map(|w| w.join().unwrap())
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        assert_eq!(
            test.open().placement(&topic).unwrap().as_ref(),
            Some(&won[0])
        );
    }
}

#[test]
fn of_growths_racing_in_a_directory_registry_one_wins() {
    one_of_racing_growths_wins(Backend::Dir);
}

#[test]
fn of_growths_racing_on_zookeeper_one_wins() {
    one_of_racing_growths_wins(Backend::Zk);
}
