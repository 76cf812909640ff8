//! Consumer groups of Kafka clients on klog's Kafka listener (issue 14,
//! items 5 and 6 with groups): the broker is the group coordinator, its
//! committed offsets are the registry's, the same that `klog-consume -G`
//! uses, and Kafka members and klog members share one group's partitions.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::kafka::{self, KafkaBroker};
use common::{bin, input, lines, Proc};

/// How long a group may take to settle.
const SETTLE: Duration = Duration::from_secs(40);

/// The group's committed offset of `topic [partition]`, from the registry.
fn committed(broker: &KafkaBroker, group: &str, topic: &str, partition: u32) -> Option<u64> {
    let registry =
        klog::coord::offsets_topic::open_read_only(broker.registry.as_deref().unwrap()).unwrap();
    registry.committed(group, topic, partition).unwrap()
}

/// `klog-consume -G GROUP --registry R -t TOPIC -e`: what it prints.
fn klog_group_read(broker: &KafkaBroker, group: &str, topic: &str) -> String {
    let registry = broker.registry.as_deref().unwrap();
    let out = bin("klog-consume")
        .args(["-t", topic, "-G", group, "--registry", registry, "-e", "-q"])
        .timeout(kafka::CLIENT_TIMEOUT)
        .output()
        .unwrap();
    kafka::assert_ok("klog-consume -G", &out);
    String::from_utf8(out.stdout).unwrap()
}

/// Item 5: `kcat -G g1 t1` reads every record once and commits on exit; a
/// second run reads nothing, a third only what came since; klog-consume
/// in the same group finds the same committed offsets.
#[test]
fn kcat_group_reads_everything_once_and_commits() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let broker = KafkaBroker::with_registry(&["--partitions", "2"]);
    let k = broker.kcat(&kcat);
    k.produce("t1", lines(1000).as_bytes(), &[]);
    // Not -o: kcat -G -o overrides the committed offsets.
    let group = ["-G", "g1", "-X", "auto.offset.reset=earliest", "-e", "t1"];
    let read = || -> Vec<u64> {
        let out = String::from_utf8(k.ok(&group, b"")).unwrap();
        let mut numbers: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
        numbers.sort_unstable();
        numbers
    };
    assert_eq!(read(), (1..=1000).collect::<Vec<_>>(), "every record, once");
    let ends: Vec<u64> = (0..2)
        .map(|p| {
            let out = k.consume("t1", &["-p", &p.to_string(), "-o", "-1", "-f", "%o\\n"]);
            out.trim().parse::<u64>().map_or(0, |last| last + 1)
        })
        .collect();
    assert_eq!(ends.iter().sum::<u64>(), 1000);
    for (p, end) in ends.iter().enumerate() {
        let stored = committed(&broker, "g1", "t1", p as u32);
        assert_eq!(
            stored,
            Some(*end).filter(|&e| e > 0),
            "g1's committed offset of t1 [{p}]"
        );
    }
    assert_eq!(read(), Vec::<u64>::new(), "a second run reads nothing");
    k.produce("t1", input(1001, 1010).as_bytes(), &[]);
    assert_eq!(
        read(),
        (1001..=1010).collect::<Vec<_>>(),
        "then only what came"
    );
    assert_eq!(
        klog_group_read(&broker, "g1", "t1"),
        "",
        "klog-consume -G g1 resumes at kcat's commits"
    );
}

/// The partitions of `topic` a member's stderr line names ("t4 [0], t4 [2]").
fn named_partitions(line: &str, topic: &str) -> BTreeSet<u32> {
    line.split(&format!("{topic} ["))
        .skip(1)
        .filter_map(|s| s.split(']').next()?.parse().ok())
        .collect()
}

/// A member's current assignment as its last stderr line says: kcat's
/// "Group g rebalanced (memberid M): assigned: t4 [0]" (`None` while its
/// last says revoked), klog-consume's "member M owns t4 [1] from ...".
fn assignment(member: &Proc, topic: &str) -> Option<(usize, BTreeSet<u32>)> {
    let said = member.stderr_lines();
    let at = said
        .iter()
        .rposition(|l| l.contains("rebalanced (memberid") || l.contains(" owns "))?;
    let line = &said[at];
    if line.contains("rebalanced") && !line.contains("assigned:") {
        return None;
    }
    Some((at, named_partitions(line, topic)))
}

/// Waits until the members' assignments split `0..partitions` among them
/// with no partition twice, and stay so for a second; returns them.
fn settled(members: &[&Proc], topic: &str, partitions: u32) -> Vec<BTreeSet<u32>> {
    let started = Instant::now();
    let mut last: Option<Vec<(usize, BTreeSet<u32>)>> = None;
    let mut since = Instant::now();
    loop {
        let now: Option<Vec<_>> = members.iter().map(|m| assignment(m, topic)).collect();
        let split = now.as_ref().is_some_and(|sets| {
            let all: Vec<u32> = sets.iter().flat_map(|(_, s)| s.iter().copied()).collect();
            let distinct: BTreeSet<u32> = all.iter().copied().collect();
            all.len() == distinct.len() && distinct == (0..partitions).collect()
        });
        if !split || now != last {
            since = Instant::now();
            last = now;
        } else if since.elapsed() > Duration::from_secs(1) {
            return last.unwrap().into_iter().map(|(_, s)| s).collect();
        }
        if started.elapsed() > SETTLE {
            let said: Vec<Vec<String>> = members.iter().map(|m| m.stderr_lines()).collect();
            panic!("the group did not settle within {SETTLE:?}: {said:#?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One printed record: (partition, offset, value).
fn parse(line: &str) -> (u32, u64, u64) {
    let mut words = line.split(' ').map(|w| w.parse::<u64>().unwrap());
    let mut next = || {
        words
            .next()
            .unwrap_or_else(|| panic!("a short line {line:?}"))
    };
    (next() as u32, next(), next())
}

/// Item 5: a 4-partition topic shared by two `kcat -G` members and one
/// `klog-consume -G` member: every record reaches the group (no gap); once
/// the group has settled, each partition is read by one member only, the
/// one it is assigned to, and every record exactly once.
#[test]
fn kcat_and_klog_members_share_four_partitions() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let broker = KafkaBroker::with_registry(&["--partitions", "4"]);
    let registry = broker.registry.clone().unwrap();
    let k = broker.kcat(&kcat);
    // Record i of partition p has value p*1000 + offset + 1.
    for p in 0..4u64 {
        let records = input(p * 1000 + 1, p * 1000 + 50);
        k.produce("t4", records.as_bytes(), &["-p", &p.to_string()]);
    }
    let kcat_member = || {
        k.spawn(&[
            "-G",
            "g",
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "session.timeout.ms=6000",
            "-X",
            "heartbeat.interval.ms=300",
            "-u",
            "-f",
            "%p %o %s\\n",
            "t4",
        ])
    };
    let a = kcat_member();
    let b = kcat_member();
    let c = Proc::spawn(
        "klog-consume",
        &[
            "-t",
            "t4",
            "-G",
            "g",
            "--registry",
            &registry,
            "-u",
            "-f",
            "%p %o %s\\n",
            "--session-timeout",
            "6s",
            "--commit-interval",
            "200ms",
        ],
    );
    let members = [&a, &b, &c];
    let owned = settled(&members, "t4", 4);
    let before: Vec<usize> = members.iter().map(|m| m.stderr_lines().len()).collect();
    // Phase 2, with the group settled, through klog's own producer.
    for p in 0..4u64 {
        common::produce_to(
            broker.addr(),
            "t4",
            &input(p * 1000 + 51, p * 1000 + 100),
            &["-p", &p.to_string()],
        );
    }
    // Every record reaches the group: collect until all 400 are seen.
    let mut seen: BTreeMap<(u32, u64), Vec<usize>> = BTreeMap::new();
    let deadline = Instant::now() + SETTLE;
    while seen.len() < 400 {
        for (i, m) in members.iter().enumerate() {
            while let Ok(line) = m.lines.try_recv() {
                let (p, o, value) = parse(&line);
                assert_eq!(
                    value,
                    u64::from(p) * 1000 + o + 1,
                    "member {i} printed {line:?}"
                );
                seen.entry((p, o)).or_default().push(i);
            }
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = (0..4u32)
                .flat_map(|p| (0..100u64).map(move |o| (p, o)))
                .filter(|k| !seen.contains_key(k))
                .collect();
            panic!("records never read by the group: {missing:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // No rebalance happened while phase 2 was read.
    std::thread::sleep(Duration::from_millis(500));
    for (i, m) in members.iter().enumerate() {
        let after = m.stderr_lines();
        let new: Vec<&String> = after[before[i]..]
            .iter()
            .filter(|l| l.contains("rebalanced") || l.contains(" owns "))
            .collect();
        assert!(
            new.is_empty(),
            "member {i} rebalanced in a settled group: {new:?}"
        );
    }
    for ((p, o), readers) in &seen {
        if *o < 50 {
            continue;
        }
        let owner: Vec<usize> = (0..3).filter(|&i| owned[i].contains(p)).collect();
        assert_eq!(
            readers, &owner,
            "t4 [{p}] offset {o}: read by members {readers:?}, assigned to {owner:?} ({owned:?})"
        );
    }
}

/// Item 6 with groups: a Python client consumes 60 of 100 records as a
/// member and commits; the next member of the group resumes at 60; the
/// registry holds the offsets and klog-consume in the group reads nothing.
fn python_group_commits_and_resumes(python: &std::path::Path, lib: &str) {
    let broker = KafkaBroker::with_registry(&[]);
    let (topic, group) = (format!("pyg-{lib}"), format!("g-{lib}"));
    let run = |args: &[&str]| kafka::run_script(python, "client.py", args);
    run(&[lib, "produce", &broker.kafka, &topic, "1", "100"]);
    let expect = |from: u32, to: u32| -> String {
        (from..=to)
            .map(|i| format!("0 {} k{i} v{i} h=x,n={i}\n", i - 1))
            .collect()
    };
    let first = run(&[lib, "consume", &broker.kafka, &topic, "60", &group]);
    assert_eq!(first, expect(1, 60), "{lib}: the first member");
    assert_eq!(
        committed(&broker, &group, &topic, 0),
        Some(60),
        "{lib}'s commit"
    );
    let second = run(&[lib, "consume", &broker.kafka, &topic, "40", &group]);
    assert_eq!(second, expect(61, 100), "{lib}: the next member resumes");
    assert_eq!(committed(&broker, &group, &topic, 0), Some(100));
    assert_eq!(
        klog_group_read(&broker, &group, &topic),
        "",
        "klog-consume -G {group}"
    );
}

#[test]
fn kafka_python_group_commits_and_resumes() {
    if let Some(python) = kafka::python() {
        python_group_commits_and_resumes(&python, "kafka-python");
    }
}

#[test]
fn confluent_kafka_group_commits_and_resumes() {
    if let Some(python) = kafka::python() {
        python_group_commits_and_resumes(&python, "confluent-kafka");
    }
}

/// Debian's kafka-python 2.0.2, where its virtual environment exists.
#[test]
fn kafka_python_2_group_commits_and_resumes() {
    if let Some(python) = kafka::python2() {
        python_group_commits_and_resumes(&python, "kafka-python");
    }
}
