//! Issue 13: replication under failures, through the binaries. Three
//! `klog-broker`s on 127.0.0.1 with `--replication-factor 3
//! --min-insync-replicas 2`, a `klog-produce --acks all --report FILE`
//! writing numbers, brokers killed (SIGKILL), frozen (SIGSTOP) and started
//! again; then the acknowledged records (the report) are checked against
//! every replica's log, read back with the library:
//!
//! - every acknowledged record is on every replica, at its acknowledged
//!   offset; no value is acknowledged twice; offsets run 0..end with no
//!   gap; the replicas are byte-identical batch by batch below the high
//!   watermark (where they all end once caught up);
//! - a consumer running throughout never saw an offset of a partition go
//!   backwards, read nothing that later disappeared, and delivered every
//!   acknowledged value.
//!
//! Each scenario runs on a directory registry and, where said, on
//! ZooKeeper (skipped with a printed line when it is not installed).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use common::cluster::{Cluster, Replica, StoredBatch};
use common::registry::Backend;
use common::Proc;

const TOPIC: &str = "t";
/// A broker silent this long is replaced (lease or ZooKeeper session).
const SESSION: &str = "2s";
/// Bounds of the waits: an election, a return to the ISR, a catch-up.
const ELECTION: Duration = Duration::from_secs(20);
const CATCH_UP: Duration = Duration::from_secs(30);

/// The brokers' flags: RF 3, min ISR 2, `partitions` per topic, short
/// session and lag times.
fn broker_args(partitions: &'static str) -> Vec<&'static str> {
    vec![
        "--replication-factor",
        "3",
        "--min-insync-replicas",
        "2",
        "--partitions",
        partitions,
        "--session-timeout",
        SESSION,
        "--replica-lag-time",
        "3s",
    ]
}

/// A record the producer was told is stored: (partition, offset, value).
type Acked = (u32, u64, String);

/// A `klog-produce --acks all --report` through the registry, fed the
/// numbers 1, 2, 3... by a thread of its own, a few every 10 ms, until
/// [`Load::finish`].
struct Load {
    producer: Proc,
    report: tempfile::NamedTempFile,
    feeder: common::Feeder,
}

impl Load {
    fn start(cluster: &Cluster, message_timeout: &str) -> Load {
        let report = tempfile::NamedTempFile::new().unwrap();
        let args = [
            "--registry",
            cluster.spec(),
            "-t",
            TOPIC,
            "--acks",
            "all",
            "--linger",
            "10ms",
            "--message-timeout",
            message_timeout,
            "--report",
            report.path().to_str().unwrap(),
        ];
        let mut producer =
            Proc::spawn_with_stdin("klog-produce", &args, std::process::Stdio::piped());
        let feeder = common::Feeder::start(producer.child.stdin.take().expect("stdin"));
        Load {
            producer,
            report,
            feeder,
        }
    }

    /// The numbers fed so far.
    fn fed(&self) -> u64 {
        self.feeder.fed()
    }

    /// Waits until `n` more numbers were fed.
    fn feed_more(&self, n: u64) {
        self.feeder.feed_more(n, Duration::from_secs(30));
    }

    /// Stops feeding, closes the producer's input and waits for it to
    /// end; returns its exit status and stderr.
    fn finish(&mut self) -> (std::process::ExitStatus, Vec<String>) {
        self.feeder.finish();
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = self.producer.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the producer did not end: {:?}",
                self.producer.stderr_lines()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // Its stderr reader may be a line behind the exit.
        std::thread::sleep(Duration::from_millis(100));
        (status, self.producer.stderr_lines())
    }

    /// The acknowledged records in the report, in the order written.
    fn acked(&self) -> Vec<Acked> {
        read_report(self.report.path())
    }
}

/// The report's lines as (partition, offset, value).
fn read_report(path: &Path) -> Vec<Acked> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            assert_eq!(v["topic"], TOPIC, "{l}");
            (
                v["partition"].as_u64().unwrap() as u32,
                v["offset"].as_u64().unwrap(),
                v["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A `klog-consume` of every partition through the registry from the
/// beginning, printing `partition offset value`.
fn consumer(cluster: &Cluster) -> Proc {
    Proc::spawn(
        "klog-consume",
        &[
            "--registry",
            cluster.spec(),
            "-t",
            TOPIC,
            "-o",
            "beginning",
            "-u",
            "-f",
            "%p %o %s\n",
        ],
    )
}

/// A [`consumer`] that printed its first record, and what it printed so
/// far. One that fails while it starts (klog-consume looks for leaders
/// again for 30 s when it starts, which a test's cluster may outlast) is
/// started again, a few times.
fn started_consumer(cluster: &Cluster) -> (Proc, Vec<Acked>) {
    let mut failures = Vec::new();
    while failures.len() < 5 {
        let c = consumer(cluster);
        let mut read = Vec::new();
        cluster.wait("the consumer reads or fails", CATCH_UP, || {
            consumed(&c, &mut read);
            !read.is_empty() || c.stderr_lines().iter().any(|l| l.starts_with("error"))
        });
        if !read.is_empty() {
            return (c, read);
        }
        failures.push(c.stderr_lines());
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("the consumer did not start: {failures:?}");
}

/// What a consumer printed so far, as (partition, offset, value).
fn consumed(consumer: &Proc, into: &mut Vec<Acked>) {
    while let Ok(line) = consumer.lines.try_recv() {
        let mut parts = line.splitn(3, ' ');
        let p = parts.next().unwrap().parse().unwrap();
        let o = parts.next().unwrap().parse().unwrap();
        into.push((p, o, parts.next().unwrap_or_default().to_string()));
    }
}

/// Waits until the consumer printed every acknowledged value.
fn wait_consumed(
    cluster: &Cluster,
    consumer: &Proc,
    mut read: Vec<Acked>,
    acked: &[Acked],
) -> Vec<Acked> {
    let started = std::time::Instant::now();
    loop {
        consumed(consumer, &mut read);
        let seen: std::collections::HashSet<&str> = read.iter().map(|r| r.2.as_str()).collect();
        let missing: Vec<&Acked> = acked
            .iter()
            .filter(|a| !seen.contains(a.2.as_str()))
            .collect();
        if missing.is_empty() {
            return read;
        }
        if started.elapsed() > CATCH_UP {
            let mut ends: BTreeMap<u32, u64> = BTreeMap::new();
            for (p, o, _) in &read {
                ends.insert(*p, *o);
            }
            cluster.fail(&format!(
                "the consumer did not deliver {} acknowledged values (first {:?}); it read up \
                 to {ends:?}; its stderr: {:?}",
                missing.len(),
                &missing[..missing.len().min(5)],
                consumer.stderr_lines()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Checks one partition's replicas (by slot, after their brokers
/// stopped) against the acknowledged records: each acknowledged record at
/// its offset on every replica, offsets without a gap, batches
/// byte-identical below the high watermark (the lowest end). Returns how
/// many acknowledged values also appear at another offset (sent again:
/// at least once).
fn check_replicas(partition: u32, replicas: &[Replica], acked: &[Acked]) -> usize {
    let hw = replicas.iter().map(Replica::end).min().unwrap();
    for (slot, r) in replicas.iter().enumerate() {
        for (i, (offset, _)) in r.records.iter().enumerate() {
            assert_eq!(
                *offset, i as u64,
                "replica {slot} of partition {partition}: offsets 0..end without a gap"
            );
        }
        let ours = &r.batches_below(hw);
        let first = &replicas[0].batches_below(hw);
        assert!(
            ours == first,
            "partition {partition}: replica {slot} differs from replica 0 below the high \
             watermark {hw}: {} and {} batches, first differing at base offset {:?}",
            ours.len(),
            first.len(),
            ours.iter()
                .zip(first.iter())
                .find(|(a, b)| a != b)
                .map(|(a, _)| a.base_offset)
        );
    }
    let mut duplicates = 0;
    for (_, offset, value) in acked.iter().filter(|a| a.0 == partition) {
        assert!(
            *offset < hw,
            "acknowledged offset {offset} is past the high watermark {hw}"
        );
        for (slot, r) in replicas.iter().enumerate() {
            let held = r.records.get(*offset as usize).map(|(_, v)| v.as_slice());
            assert_eq!(
                held,
                Some(value.as_bytes()),
                "partition {partition}, replica {slot}: acknowledged {value:?} at offset {offset}"
            );
        }
        let copies = replicas[0]
            .records
            .iter()
            .filter(|(_, v)| v == value.as_bytes())
            .count();
        duplicates += usize::from(copies > 1);
    }
    duplicates
}

/// No value acknowledged twice, and no offset acknowledged for two values.
fn check_report_unique(acked: &[Acked]) {
    let mut values = HashMap::new();
    let mut offsets = HashMap::new();
    for (p, o, v) in acked {
        if let Some(earlier) = values.insert(v.clone(), (*p, *o)) {
            panic!("{v:?} acknowledged twice: at {earlier:?} and at ({p}, {o})");
        }
        if let Some(other) = offsets.insert((*p, *o), v.clone()) {
            panic!("offset {o} of partition {p} acknowledged for {other:?} and for {v:?}");
        }
    }
}

/// Checks what a consumer printed: per partition, offsets only going up;
/// each record it read is the one the replicas hold at that offset; and
/// every acknowledged value among them.
fn check_consumed(read: &[Acked], replicas: &BTreeMap<u32, Vec<Replica>>, acked: &[Acked]) {
    let mut last: HashMap<u32, u64> = HashMap::new();
    for (p, o, v) in read {
        if let Some(before) = last.insert(*p, *o) {
            assert!(
                *o > before,
                "the consumer went back from offset {before} to {o} of partition {p}"
            );
        }
        let held = replicas[p][0].records.get(*o as usize);
        assert_eq!(
            held.map(|(_, v)| v.as_slice()),
            Some(v.as_bytes()),
            "the consumer read {v:?} at offset {o} of partition {p}, which the log does not keep"
        );
    }
    let seen: std::collections::HashSet<&str> = read.iter().map(|r| r.2.as_str()).collect();
    let missing: Vec<&Acked> = acked
        .iter()
        .filter(|a| !seen.contains(a.2.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged, never consumed: {missing:?}"
    );
}

/// Stops the load and the consumer, waits for full ISRs and caught-up
/// replicas, stops the brokers and checks everything (see the module
/// doc). Returns the acknowledged records.
fn settle_and_check(
    cluster: &mut Cluster,
    load: &mut Load,
    consumer: Option<(Proc, Vec<Acked>)>,
    partitions: u32,
) -> Vec<Acked> {
    let (acked, said) = finish_load(load);
    check_settled(cluster, &acked, &said, consumer, partitions);
    acked
}

/// Ends the load, which must have delivered every record it was fed;
/// returns the acknowledged records and the producer's stderr.
fn finish_load(load: &mut Load) -> (Vec<Acked>, Vec<String>) {
    let (status, said) = load.finish();
    assert!(status.success(), "the producer failed: {status}: {said:?}");
    let acked = load.acked();
    let fed = load.fed();
    assert!(
        said.iter()
            .any(|l| l.contains(&format!("Sent {fed} records to t (0 failed)"))),
        "every record fed was acknowledged: {said:?}"
    );
    assert_eq!(
        acked.len() as u64,
        fed,
        "the report lists every acknowledged record"
    );
    (acked, said)
}

/// Waits for full ISRs and caught-up replicas, and for the consumer to
/// deliver every acknowledged record; stops the brokers and checks the
/// replicas and what the consumer read against `acked` (`said`: the
/// producer's stderr).
fn check_settled(
    cluster: &mut Cluster,
    acked: &[Acked],
    said: &[String],
    consumer: Option<(Proc, Vec<Acked>)>,
    partitions: u32,
) {
    check_report_unique(acked);
    for p in 0..partitions {
        cluster.wait_full_isr(TOPIC, p, CATCH_UP);
        cluster.wait_same_end(TOPIC, p, CATCH_UP);
    }
    let read = consumer.map(|(c, read)| {
        let read = wait_consumed(cluster, &c, read, acked);
        drop(c);
        read
    });
    cluster.terminate_all();
    let replicas: BTreeMap<u32, Vec<Replica>> = (0..partitions)
        .map(|p| {
            (
                p,
                (0..cluster.len())
                    .map(|s| cluster.replica(s, TOPIC, p))
                    .collect(),
            )
        })
        .collect();
    let mut duplicates = 0;
    for (p, r) in &replicas {
        duplicates += check_replicas(*p, r, acked);
    }
    if duplicates > 0 {
        // Without idempotence a batch whose answer was lost is sent again
        // and may be stored twice: the producer says so.
        assert!(
            said.iter().any(|l| l.contains("sent again")),
            "{duplicates} acknowledged values stored twice, and no batch was sent again: {said:?}"
        );
    }
    if let Some(read) = read {
        check_consumed(&read, &replicas, acked);
    }
    eprintln!(
        "checked: {} acknowledged records, {duplicates} also stored at another offset (sent again)",
        acked.len()
    );
}

/// The leader of partition 0 and its slot.
fn leader_of(cluster: &Cluster, partition: u32) -> (usize, u64) {
    let s = cluster.wait_leader(TOPIC, partition, ELECTION);
    (cluster.slot_of(s.leader.as_deref().unwrap()), s.epoch)
}

fn failover_under_load(backend: Backend) {
    let Some(mut cluster) = Cluster::start(backend, 3, &broker_args("2")) else {
        return;
    };
    let mut load = Load::start(&cluster, "60s");
    load.feed_more(50);
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    cluster.wait_full_isr(TOPIC, 1, CATCH_UP);
    let (consumer, mut read) = started_consumer(&cluster);
    for round in 0..5 {
        let (victim, epoch) = leader_of(&cluster, 0);
        load.feed_more(20);
        // The followers fall behind (frozen well within the session
        // timeout), then the leader dies with records they lack: none of
        // them may have been acknowledged.
        let followers: Vec<usize> = (0..3).filter(|&s| s != victim).collect();
        followers.iter().for_each(|&s| cluster.freeze(s));
        load.feed_more(20);
        cluster.kill9(victim);
        followers.iter().for_each(|&s| cluster.thaw(s));
        let now = cluster.wait_new_epoch(TOPIC, 0, epoch, None, ELECTION);
        eprintln!("round {round}: killed {}, now {now:?}", cluster.id(victim));
        load.feed_more(20);
        cluster.restart(victim);
        cluster.wait_in_isr(TOPIC, 0, victim, CATCH_UP);
        consumed(&consumer, &mut read);
    }
    load.feed_more(20);
    settle_and_check(&mut cluster, &mut load, Some((consumer, read)), 2);
}

#[test]
fn failover_under_load_in_a_directory() {
    failover_under_load(Backend::Dir);
}

#[test]
fn failover_under_load_on_zookeeper() {
    failover_under_load(Backend::Zk);
}

/// `--report` lists each acknowledged record at its offset (one broker,
/// no replication), and is refused where nothing is acknowledged.
#[test]
fn the_report_lists_each_acknowledged_record_at_its_offset() {
    let data = tempfile::tempdir().unwrap();
    let broker = common::BrokerProc::start(data.path(), &[]);
    let report = tempfile::NamedTempFile::new().unwrap();
    let path = report.path().to_str().unwrap();
    common::produce_to(&broker.addr, TOPIC, "a\nb\n", &["--report", path]);
    common::produce_to(
        &broker.addr,
        TOPIC,
        "c\n",
        &["--report", path, "--acks", "1"],
    );
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        "{\"topic\":\"t\",\"partition\":0,\"offset\":2,\"value\":\"c\"}\n",
        "the file is written anew by each run"
    );
    common::produce_to(&broker.addr, TOPIC, "d\ne\n", &["--report", path]);
    assert_eq!(
        read_report(report.path()),
        vec![(0, 3, "d".to_string()), (0, 4, "e".to_string())]
    );
    for refused in [
        vec!["--data-dir", data.path().to_str().unwrap()],
        vec!["-b", &broker.addr, "--acks", "0"],
    ] {
        let out = common::bin("klog-produce")
            .args(["-t", TOPIC, "--report", path])
            .args(&refused)
            .write_stdin("x\n")
            .assert()
            .code(2);
        let said = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(said.contains("--report"), "{said}");
    }
}

/// The zombie leader: frozen (SIGSTOP) past the session timeout while
/// producing, replaced, then thawed (SIGCONT). Its followers are frozen
/// just before it, so that it holds records they lack (appended, never
/// acknowledged): on return it acknowledges none of them, truncates that
/// divergent tail (its stderr says so) and ends byte-identical to the
/// others.
fn a_zombie_leader(backend: Backend) {
    let Some(mut cluster) = Cluster::start(backend, 3, &broker_args("1")) else {
        return;
    };
    let mut load = Load::start(&cluster, "60s");
    load.feed_more(50);
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    let (consumer, mut read) = started_consumer(&cluster);
    let (zombie, epoch) = leader_of(&cluster, 0);
    let followers: Vec<usize> = (0..3).filter(|&s| s != zombie).collect();
    followers.iter().for_each(|&s| cluster.freeze(s));
    load.feed_more(30);
    cluster.freeze(zombie);
    followers.iter().for_each(|&s| cluster.thaw(s));
    let now = cluster.wait_new_epoch(TOPIC, 0, epoch, Some(zombie), ELECTION);
    eprintln!("froze {}, now {now:?}", cluster.id(zombie));
    load.feed_more(30);
    let acked_before_return = load.acked().len();
    cluster.thaw(zombie);
    let truncated = format!("{TOPIC}-0: truncated from");
    cluster.wait(
        "the old leader truncates its divergent tail",
        CATCH_UP,
        || cluster.log(zombie).iter().any(|l| l.contains(&truncated)),
    );
    cluster.wait_in_isr(TOPIC, 0, zombie, CATCH_UP);
    load.feed_more(30);
    consumed(&consumer, &mut read);
    let said = cluster.log(zombie);
    let acked = settle_and_check(&mut cluster, &mut load, Some((consumer, read)), 1);
    assert!(
        acked.len() > acked_before_return,
        "records went on after its return"
    );
    let line = said.iter().find(|l| l.contains(&truncated)).unwrap();
    eprintln!("the zombie said: {line}");
}

#[test]
fn a_zombie_leader_in_a_directory() {
    a_zombie_leader(Backend::Dir);
}

#[test]
fn a_zombie_leader_on_zookeeper() {
    a_zombie_leader(Backend::Zk);
}

/// All replicas die: the three brokers killed (SIGKILL) under acks=all,
/// one after the other, and started again in each of a few orders.
/// Every acknowledged record survives: on the leader elected (and every
/// replica), and read back by a consumer.
fn all_replicas_die(backend: Backend) {
    let Some(mut cluster) = Cluster::start(backend, 3, &broker_args("1")) else {
        return;
    };
    let mut load = Load::start(&cluster, "90s");
    load.feed_more(50);
    for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0]] {
        cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
        let (_, epoch) = leader_of(&cluster, 0);
        load.feed_more(30);
        for slot in 0..3 {
            cluster.kill9(slot);
        }
        for slot in order {
            cluster.restart(slot);
            std::thread::sleep(Duration::from_millis(300));
        }
        let now = cluster.wait_new_epoch(TOPIC, 0, epoch, None, ELECTION);
        eprintln!("restarted in the order {order:?}: {now:?}");
        load.feed_more(30);
    }
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    let (consumer, read) = started_consumer(&cluster);
    settle_and_check(&mut cluster, &mut load, Some((consumer, read)), 1);
}

#[test]
fn all_replicas_die_in_a_directory() {
    all_replicas_die(Backend::Dir);
}

#[test]
fn all_replicas_die_on_zookeeper() {
    all_replicas_die(Backend::Zk);
}

/// The slots other than `slot`.
fn others(slot: usize) -> Vec<usize> {
    (0..3).filter(|&s| s != slot).collect()
}

/// Waits until the ISR of partition 0 is exactly `slots`.
fn wait_isr(cluster: &Cluster, slots: &[usize]) {
    let mut wanted: Vec<String> = slots.iter().map(|&s| cluster.id(s).to_string()).collect();
    wanted.sort();
    cluster.wait(&format!("the ISR of t-0 is {wanted:?}"), ELECTION, || {
        cluster.state(TOPIC, 0).is_some_and(|s| {
            let mut isr = s.isr.clone();
            isr.sort();
            isr == wanted
        })
    });
}

/// Kill two followers: acks=all is refused (`not enough replicas`) once
/// the ISR is the leader alone; then the leader dies too, and the two
/// followers return: neither leads (no unclean election: the first one
/// killed lacks records acknowledged after it died), until the leader
/// returns, with everything it acknowledged.
#[test]
fn the_isr_shrinking_to_one_and_that_one_dying_is_refused_by_min_isr() {
    let mut cluster = Cluster::start(Backend::Dir, 3, &broker_args("1")).expect("a directory");
    let mut load = Load::start(&cluster, "3s");
    load.feed_more(50);
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    let (leader, _) = leader_of(&cluster, 0);
    let [first, second] = others(leader)[..] else {
        unreachable!()
    };
    cluster.kill9(first);
    wait_isr(&cluster, &[leader, second]);
    let fed_at_shrink = load.fed();
    load.feed_more(50);
    cluster.kill9(second);
    wait_isr(&cluster, &[leader]);
    load.feed_more(50);
    let (status, said) = load.finish();
    assert!(
        !status.success(),
        "acks=all with one in-sync replica: {said:?}"
    );
    assert!(
        said.iter().any(|l| l.contains("not enough replicas")),
        "the producer is told why: {said:?}"
    );
    let acked = load.acked();
    assert!(
        acked
            .iter()
            .any(|a| a.2.parse::<u64>().unwrap() > fed_at_shrink),
        "records were acknowledged with two in-sync replicas: {said:?}"
    );
    cluster.kill9(leader);
    cluster.restart(first);
    cluster.restart(second);
    // Offline, not led by a replica that may lack acknowledged records.
    let until = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < until {
        let state = cluster.state(TOPIC, 0);
        assert!(
            state.as_ref().is_none_or(|s| s.leader.is_none()),
            "an out-of-sync replica leads: {state:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.restart(leader);
    let now = cluster.wait_leader(TOPIC, 0, ELECTION);
    assert_eq!(now.leader.as_deref(), Some(cluster.id(leader)), "{now:?}");
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    let consumer = started_consumer(&cluster);
    check_settled(&mut cluster, &acked, &said, Some(consumer), 1);
}

/// KIP-101's scenario: with the third replica dead, records are
/// acknowledged by the leader and one follower; the follower restarts
/// (knowing at best an old high watermark) and is back in the ISR, then
/// the leader dies: the follower leads, with every acknowledged record.
#[test]
fn a_follower_never_truncates_to_a_stale_high_watermark() {
    let mut cluster = Cluster::start(Backend::Dir, 3, &broker_args("1")).expect("a directory");
    let mut load = Load::start(&cluster, "30s");
    load.feed_more(50);
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    let (leader, epoch) = leader_of(&cluster, 0);
    let [follower, third] = others(leader)[..] else {
        unreachable!()
    };
    cluster.kill9(third);
    wait_isr(&cluster, &[leader, follower]);
    load.feed_more(100);
    let (acked, said) = finish_load(&mut load);
    // Every acknowledged record is on the follower (acks=all, ISR of
    // two): after its restart it keeps them all, whatever high
    // watermark it knows.
    let acked_end = acked.iter().map(|a| a.1 + 1).max().unwrap();
    cluster.kill9(follower);
    cluster.restart(follower);
    // It follows again (and truncates, if it does, before its first
    // fetch), then it is in the ISR.
    cluster.wait_said(follower, "t-0 follows", CATCH_UP);
    cluster.wait_in_isr(TOPIC, 0, follower, CATCH_UP);
    for line in cluster.log(follower) {
        let Some(cut) = line
            .split(" to ")
            .nth(1)
            .filter(|_| line.contains("truncated from"))
        else {
            continue;
        };
        let to: u64 = cut.split(',').next().unwrap().trim().parse().unwrap();
        assert!(
            to >= acked_end,
            "the follower truncated below {acked_end}: {line}"
        );
    }
    cluster.kill9(leader);
    let now = cluster.wait_new_epoch(TOPIC, 0, epoch, None, ELECTION);
    assert_eq!(now.leader.as_deref(), Some(cluster.id(follower)), "{now:?}");
    let held = cluster.replica(follower, TOPIC, 0);
    for (_, offset, value) in &acked {
        let at = held
            .records
            .get(*offset as usize)
            .map(|(_, v)| v.as_slice());
        assert_eq!(
            at,
            Some(value.as_bytes()),
            "the new leader lost offset {offset}"
        );
    }
    cluster.restart(leader);
    cluster.restart(third);
    let consumer = started_consumer(&cluster);
    check_settled(&mut cluster, &acked, &said, Some(consumer), 1);
}

/// KIP-279's scenario: two leader changes in quick succession, each
/// leader killed while its followers lag (frozen just before), the first
/// one back before the second dies: every replica ends byte-identical
/// below the high watermark, and no acknowledged record is lost.
#[test]
fn logs_diverging_after_two_failovers_in_quick_succession() {
    let mut cluster = Cluster::start(Backend::Dir, 3, &broker_args("1")).expect("a directory");
    let mut load = Load::start(&cluster, "60s");
    load.feed_more(50);
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    let (consumer, read) = started_consumer(&cluster);
    for _ in 0..2 {
        let (victim, epoch) = leader_of(&cluster, 0);
        let lagging = others(victim);
        lagging.iter().for_each(|&s| cluster.freeze(s));
        load.feed_more(20);
        cluster.kill9(victim);
        lagging.iter().for_each(|&s| cluster.thaw(s));
        let now = cluster.wait_new_epoch(TOPIC, 0, epoch, None, ELECTION);
        eprintln!("killed {}, now {now:?}", cluster.id(victim));
        cluster.restart(victim);
        load.feed_more(10);
    }
    load.feed_more(30);
    settle_and_check(&mut cluster, &mut load, Some((consumer, read)), 1);
}

/// The last ISR member losing an unflushed tail: with the third replica
/// dead, the follower frozen, the leader appends records it cannot
/// acknowledge and is killed; the follower, the last in-sync replica,
/// leads without them. Only unacknowledged records vanish, and no offset
/// is acknowledged for two different records.
fn the_last_isr_member_losing_an_unflushed_tail(backend: Backend) {
    let Some(mut cluster) = Cluster::start(backend, 3, &broker_args("1")) else {
        return;
    };
    let mut load = Load::start(&cluster, "60s");
    load.feed_more(50);
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    let (leader, epoch) = leader_of(&cluster, 0);
    let [follower, third] = others(leader)[..] else {
        unreachable!()
    };
    cluster.kill9(third);
    wait_isr(&cluster, &[leader, follower]);
    load.feed_more(30);
    cluster.freeze(follower);
    load.feed_more(30);
    cluster.kill9(leader);
    cluster.thaw(follower);
    let now = cluster.wait_new_epoch(TOPIC, 0, epoch, None, ELECTION);
    assert_eq!(now.leader.as_deref(), Some(cluster.id(follower)), "{now:?}");
    cluster.restart(leader);
    cluster.restart(third);
    load.feed_more(30);
    let acked = settle_and_check(&mut cluster, &mut load, None, 1);
    let said = cluster.log(leader);
    let cut = said.iter().find(|l| l.contains("t-0: truncated from"));
    eprintln!("{} acknowledged; the old leader said: {cut:?}", acked.len());
}

#[test]
fn the_last_isr_member_losing_an_unflushed_tail_in_a_directory() {
    the_last_isr_member_losing_an_unflushed_tail(Backend::Dir);
}

#[test]
fn the_last_isr_member_losing_an_unflushed_tail_on_zookeeper() {
    the_last_isr_member_losing_an_unflushed_tail(Backend::Zk);
}

/// A consumer started while a partition has no leader (its leader killed,
/// the followers frozen so that none is elected yet) waits for one instead
/// of exiting, and reads everything once a follower takes the lead.
#[test]
fn a_consumer_started_while_a_partition_has_no_leader_waits_for_one() {
    let Some(mut cluster) = Cluster::start(Backend::Dir, 3, &broker_args("1")) else {
        return;
    };
    common::bin("klog-produce")
        .args(["--registry", cluster.spec(), "-t", TOPIC, "--acks", "all"])
        .write_stdin(common::input(1, 100))
        .timeout(ELECTION)
        .assert()
        .success();
    let (leader, _) = leader_of(&cluster, 0);
    let followers: Vec<usize> = (0..3).filter(|s| *s != leader).collect();
    for &f in &followers {
        cluster.freeze(f);
    }
    cluster.kill9(leader);
    let reader = Proc::spawn(
        "klog-consume",
        &[
            "--registry",
            cluster.spec(),
            "-t",
            TOPIC,
            "-e",
            "-f",
            "%s\n",
        ],
    );
    std::thread::sleep(Duration::from_millis(1500));
    for &f in &followers {
        cluster.thaw(f);
    }
    let read = reader.all_lines(CATCH_UP);
    let stderr = reader.stderr_lines();
    assert_eq!(
        read,
        common::numbers(1, 100),
        "every record, once: {stderr:?}"
    );
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("looking for the leaders again")),
        "it said it waited: {stderr:?}"
    );
}

/// Flips one byte in the middle of a batch of `slot`'s log of t-0, in
/// its last segment and with whole batches after it: damage, not a torn
/// tail. Returns the offset of the damaged batch.
fn damage_middle_batch(cluster: &Cluster, slot: usize) -> u64 {
    let held = cluster.replica(slot, TOPIC, 0);
    damage_batch(cluster, slot, &held.batches[held.batches.len() / 2])
}

/// The segment files of `slot`'s log of t-0, oldest first.
fn segment_files(cluster: &Cluster, slot: usize) -> Vec<std::path::PathBuf> {
    let dir = cluster.data_dir(slot).join(format!("{TOPIC}-0"));
    let mut segments: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .filter(|p| p.file_stem().is_some_and(|s| s.len() == 20))
        .collect();
    segments.sort();
    segments
}

/// Flips one byte near the end of `victim`, a batch of `slot`'s log of
/// t-0, in the segment that holds it. Returns its offset.
fn damage_batch(cluster: &Cluster, slot: usize, victim: &StoredBatch) -> u64 {
    let segments = segment_files(cluster, slot);
    for path in segments.iter().rev() {
        let bytes = std::fs::read(path).unwrap();
        let Some(at) = bytes
            .windows(victim.bytes.len())
            .position(|w| w == victim.bytes.as_slice())
        else {
            continue;
        };
        // In place, as rot is (a broker may be reading the file).
        let at = at + victim.bytes.len() - 2;
        let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &[bytes[at] ^ 0x20], at as u64).unwrap();
        return victim.base_offset;
    }
    panic!("batch at {} not found in {segments:?}", victim.base_offset);
}

/// Issue 23, what was seen 1: RF 3, records acknowledged with acks=all,
/// every replica in sync; all three brokers die at once; one byte flips
/// in the leader's log, well below the high watermark; (with `recover`,
/// the operator runs `klog-recover` on it, as the broker used to advise);
/// the damaged broker starts first, then the others. The damaged replica
/// may not lead (it lost acknowledged records): it leaves the ISR, a
/// whole replica leads, and it refetches what it lost. Afterwards every
/// acknowledged record is on all three replicas at its offset, and the
/// partition is online without anyone running `klog-recover`.
fn a_damaged_replica_heals_from_its_peers(backend: Backend, recover: bool) {
    let Some(mut cluster) = Cluster::start(backend, 3, &broker_args("1")) else {
        return;
    };
    let mut load = Load::start(&cluster, "60s");
    load.feed_more(400);
    let (acked, said) = finish_load(&mut load);
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    cluster.wait_same_end(TOPIC, 0, CATCH_UP);
    let (leader, epoch) = leader_of(&cluster, 0);
    for slot in 0..3 {
        cluster.kill9(slot);
    }
    let damaged = damage_middle_batch(&cluster, leader);
    let mut recovered = None;
    if recover {
        let dir = cluster.data_dir(leader).join(format!("{TOPIC}-0"));
        let out = common::bin("klog-recover")
            .arg(&dir)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "klog-recover repaired: {said}");
        recovered = Some(said);
    }
    cluster.restart(leader);
    std::thread::sleep(Duration::from_millis(500));
    for slot in others(leader) {
        cluster.restart(slot);
    }
    let now = cluster.wait_new_epoch(TOPIC, 0, epoch, None, ELECTION);
    assert_ne!(
        now.leader.as_deref(),
        Some(cluster.id(leader)),
        "the replica damaged at offset {damaged} leads: {now:?}"
    );
    check_settled(&mut cluster, &acked, &said, None, 1);
    if let Some(said) = recovered {
        assert!(
            said.contains("refetch"),
            "klog-recover says the broker refetches the cut range: {said}"
        );
    } else {
        let log = cluster.log(leader).join("\n");
        assert!(
            log.contains("refetch"),
            "the damaged broker says it refetches: {log}"
        );
        // It heals by itself: it does not send the operator to klog-recover.
        assert!(
            !log.contains("run `klog-recover"),
            "the damaged broker asks for no operator: {log}"
        );
    }
}

#[test]
fn a_damaged_replica_heals_from_its_peers_in_a_directory() {
    a_damaged_replica_heals_from_its_peers(Backend::Dir, false);
}

#[test]
fn a_damaged_replica_repaired_by_klog_recover_heals_from_its_peers() {
    a_damaged_replica_heals_from_its_peers(Backend::Dir, true);
}

#[test]
fn a_damaged_replica_heals_from_its_peers_on_zookeeper() {
    a_damaged_replica_heals_from_its_peers(Backend::Zk, false);
}

/// Finding of the nemesis soak (`examples/nemesis.sh`, fault `rot`): a
/// follower killed (-9) whose log is damaged in a rolled segment, before
/// its last index entry (one byte flipped: bit rot in bytes it had
/// fsynced and reported durable), was not healed. Opening after an
/// unclean stop trusts segments wholly below the recovery point
/// (`storage::recover`, "What is trusted"), so the replica rejoined the
/// ISR holding a batch whose CRC fails, could lead, and then served it,
/// though two whole copies exist. Now the broker's scrub reads every log
/// back soon after it opens (`--scrub-interval`), finds the damage, cuts
/// the replica before it, and refetches. Here: RF 3, 16 KiB segments,
/// 2000 records acknowledged, every replica in sync, a follower killed, a
/// byte flipped in the middle of its first segment, the follower started
/// again: it says it cut and refetches, and then every replica holds every
/// acknowledged record, identical (failed before: `a record whose CRC
/// holds: CrcMismatch` reading the follower's log back).
#[test]
fn a_replica_damaged_in_a_rolled_segment_heals_from_its_peers() {
    let Some((mut cluster, acked, said)) = rolled_and_in_sync(&[]) else {
        return;
    };
    let (leader, _) = leader_of(&cluster, 0);
    let follower = others(leader)[0];
    let victim = batch_in_first_segment(&cluster, follower);
    cluster.kill9(follower);
    let damaged = damage_batch(&cluster, follower, &victim);
    cluster.restart(follower);
    cluster.wait_said(follower, "Listening", ELECTION);
    eprintln!("flipped a byte of the batch at offset {damaged}, in the first segment");
    cluster.wait_said(follower, "refetches the rest from its leader", ELECTION);
    check_settled(&mut cluster, &acked, &said, None, 1);
}

/// A batch in the middle of the first segment of broker `slot`'s t-0,
/// which has rolled.
fn batch_in_first_segment(cluster: &Cluster, slot: usize) -> StoredBatch {
    let segments = segment_files(cluster, slot);
    assert!(segments.len() > 1, "a rolled segment: {segments:?}");
    let second: u64 = segments[1]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let held = cluster.replica(slot, TOPIC, 0);
    let first = held.batches_below(second);
    first[first.len() / 2].clone()
}

/// Issue 23, "hand over", for damage found while a leader serves: RF 3,
/// 16 KiB segments, a scrub every second, 2000 records acknowledged, every
/// replica in sync; one byte flips in the middle of the leader's first
/// (rolled) segment while it runs. Its scrub finds the damage: it cuts its
/// log there, a whole replica takes the lead in a new epoch, and the
/// damaged one refetches; then every replica holds every acknowledged
/// record at its offset, identical. Without the scrub the leader serves
/// the damaged batch, and its followers, once one of them restarts, cannot
/// copy it.
#[test]
fn a_leader_damaged_while_it_serves_hands_over_and_heals() {
    let Some((mut cluster, acked, said)) = rolled_and_in_sync(&["--scrub-interval", "1s"]) else {
        return;
    };
    let (leader, epoch) = leader_of(&cluster, 0);
    let victim = batch_in_first_segment(&cluster, leader);
    let damaged = damage_batch(&cluster, leader, &victim);
    eprintln!("flipped a byte of the leader's batch at offset {damaged}");
    cluster.wait_said(leader, "refetches the rest from its leader", ELECTION);
    let state = cluster.wait_new_epoch(TOPIC, 0, epoch, Some(leader), ELECTION);
    eprintln!("{state:?} took over");
    check_settled(&mut cluster, &acked, &said, None, 1);
}

/// Three brokers (RF 3, 16 KiB segments, extra `args`) on a directory
/// registry, 2000 records acknowledged with acks=all, every replica of
/// t-0 in sync and at the same end; the records acknowledged and what the
/// producer said. `None` where the test is skipped.
fn rolled_and_in_sync(args: &[&'static str]) -> Option<(Cluster, Vec<Acked>, Vec<String>)> {
    let mut all = broker_args("1");
    all.extend(["--segment-bytes", "16KiB"]);
    all.extend(args);
    let cluster = Cluster::start(Backend::Dir, 3, &all)?;
    let mut load = Load::start(&cluster, "60s");
    load.feed_more(2000);
    let (acked, said) = finish_load(&mut load);
    cluster.wait_full_isr(TOPIC, 0, CATCH_UP);
    cluster.wait_same_end(TOPIC, 0, CATCH_UP);
    Some((cluster, acked, said))
}
