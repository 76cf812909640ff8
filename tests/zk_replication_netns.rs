//! Replication under network partitions (issue 13), on ZooKeeper, with
//! every process on a host of its own network namespace
//! (`tests/common/netns.rs`): ZooKeeper on host 0, three `klog-broker`s
//! (`--replication-factor 3 --min-insync-replicas 2 --session-timeout 2s
//! --replica-lag-time 3s`) on hosts 1 to 3, and the clients on host 4: a
//! `klog-produce --registry --acks all --report FILE` fed numbers for the
//! whole run (and, where said, a `klog-consume --registry`). A thread on
//! ZooKeeper's host, which no cut touches, records every change of the
//! partition's state (leader, epoch, ISR) with the time it saw it, and
//! another the time each acknowledged record appeared in the report.
//!
//! - **A leader cut off from ZooKeeper** but still reached by its
//!   followers and the clients stops acknowledging within its session
//!   timeout: no record the report shows after the cut plus the session
//!   timeout plus [`MARGIN`] lies in a batch of its epoch, and a producer
//!   writing to it directly then gets nothing acknowledged. The others
//!   elect a new leader, and the producer goes on there.
//! - **A follower cut off from its leader** (it still reaches ZooKeeper)
//!   is out of the ISR in the registry within `--replica-lag-time` plus
//!   [`MARGIN`], the leader keeping its epoch; the producer goes on with
//!   the two left, and the follower is back in sync once healed.
//! - **A client cut off from the leader** (its host drops the leader's
//!   packets), while the leader loses ZooKeeper too, so that the others
//!   elect a new one: the producer and the consumer on that host fail over
//!   to the new leader and deliver.
//!
//! After each, the network is healed, the replicas catch up, and every
//! record in the producer's report is on every replica at its offset (no
//! acknowledged record lost), with the same bytes; the producer delivered
//! everything it was fed. The directory backend has no network, so these
//! run on ZooKeeper only. Skipped with a printed `skipped:` line where
//! namespaces, `nft` or ZooKeeper are missing (`KLOG_REQUIRE_NETNS=1`,
//! `KLOG_REQUIRE_ZK=1` fail instead).

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::cluster::{Replica, State};
use common::netns::{Host, Net};
use common::zk::ZkServer;
use common::{BrokerProc, Proc};
use klog::storage::record::Batch;

const TOPIC: &str = "t";
/// The brokers' session timeout and replica lag time, as flags and as
/// durations.
const SESSION: &str = "2s";
const SESSION_TIMEOUT: Duration = Duration::from_secs(2);
const LAG: &str = "3s";
const LAG_TIME: Duration = Duration::from_secs(3);
/// What a bound on a reaction allows past the timeout it follows from: a
/// few rounds of the replica manager and of ZooKeeper's ticks.
const MARGIN: Duration = Duration::from_secs(1);
/// The clients' request timeout (`--request-timeout`, their default).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The bound on every other wait: far above what any step needs.
const WAIT: Duration = Duration::from_secs(30);
/// The hosts: ZooKeeper's (with the state watch), the three brokers', and
/// the clients'.
const ZK: usize = 0;
const BROKER_HOSTS: [usize; 3] = [1, 2, 3];
const CLIENT: usize = 4;

/// A record the producer was told is stored: (offset, value).
type Acked = (u64, String);

#[test]
fn a_leader_cut_off_from_zookeeper_stops_acknowledging_within_its_session_timeout() {
    let Some(mut scene) = Scene::start() else {
        return;
    };
    let (mut load, before, leader) = led_under_load(&scene);
    load.feed_more(50);

    scene.net.cut_from(scene.brokers[leader].host, ZK);
    let cut_at = Instant::now();
    let deadline = cut_at + SESSION_TIMEOUT + MARGIN;
    // Looked at before the election: it steps down first.
    let stepped_down = scene
        .wait_said(leader, "t-0 serves nothing", WAIT)
        .saturating_duration_since(cut_at);
    let old_leader = before.leader.clone();
    let (elected_at, after) = scene.watch.wait_timed("a new leader", WAIT, |s| {
        s.epoch > before.epoch && s.leader.is_some() && s.leader != old_leader
    });
    let elected = elected_at.saturating_duration_since(cut_at);
    // Before its session can expire on the server, and so before the
    // others may elect a new leader.
    assert!(
        stepped_down < SESSION_TIMEOUT && stepped_down < elected,
        "the leader cut off from ZooKeeper stepped down {stepped_down:?} after the cut, past \
         its session timeout ({SESSION}) or the new leader's election {elected:?} after the \
         cut; it said {:#?}",
        scene.log(leader)
    );
    // Past the deadline, the cut-off leader is asked directly.
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
    let probe = scene.probe(leader);
    load.feed_more(100);

    scene.net.heal(scene.brokers[leader].host);
    scene.watch.wait("every broker back in the ISR", WAIT, |s| {
        s.epoch == after.epoch && s.isr.len() == 3
    });
    let Finished { acked, seen, said } = load.finish();
    let replicas = scene.settle();
    check_acked(&replicas, &acked, &said);
    check_acked(&replicas, &probe, &said);
    // A record lies in a batch of the epoch of the leader that appended it.
    let late: Vec<&Acked> = seen
        .iter()
        .filter(|(at, _)| *at > deadline)
        .map(|(_, a)| a)
        .chain(&probe)
        .filter(|(offset, _)| epoch_at(&replicas[0], *offset) <= before.epoch)
        .collect();
    assert!(
        late.is_empty(),
        "the leader cut off from ZooKeeper acknowledged {} records after its session timeout \
         plus {MARGIN:?} (first {:?}); it said {:#?}",
        late.len(),
        late.first(),
        scene.log(leader)
    );
    let last_old = seen
        .iter()
        .filter(|(_, (offset, _))| epoch_at(&replicas[0], *offset) <= before.epoch)
        .map(|(at, _)| at.saturating_duration_since(cut_at))
        .max();
    println!(
        "the cut-off leader stepped down {:?} and acknowledged last {last_old:?} after the cut, \
         the new leader was elected {elected:?} after it; {} records acknowledged; the cut-off \
         leader said {:#?}",
        stepped_down,
        acked.len(),
        scene.said(leader, "serves nothing")
    );
}

#[test]
fn a_follower_cut_off_from_its_leader_leaves_the_isr_within_the_lag_time() {
    let Some(mut scene) = Scene::start() else {
        return;
    };
    let (mut load, before, leader) = led_under_load(&scene);
    let follower = (leader + 1) % 3;
    let follower_id = scene.brokers[follower].id.clone();
    load.feed_more(50);

    scene
        .net
        .cut_from(scene.brokers[follower].host, scene.brokers[leader].host);
    let cut_at = Instant::now();
    let shrunk = scene
        .watch
        .wait("the cut-off follower out of the ISR", WAIT, |s| {
            !s.isr.contains(&follower_id)
        });
    let left = cut_at.elapsed();
    assert!(
        left <= LAG_TIME + MARGIN,
        "the follower left the ISR {left:?} after the cut, past {LAG} plus {MARGIN:?}"
    );
    assert_eq!(
        (shrunk.leader.as_deref(), shrunk.epoch, shrunk.isr.len()),
        (before.leader.as_deref(), before.epoch, 2),
        "the leader keeps its epoch and the other follower; states seen {:?}",
        scene.watch.seen()
    );
    // The two left acknowledge on their own.
    let acked_then = load.acked_count();
    load.feed_more(100);
    load.wait_acked(acked_then + 100);

    scene.net.heal(scene.brokers[follower].host);
    scene.watch.wait("the follower back in the ISR", WAIT, |s| {
        s.isr.contains(&follower_id)
    });
    let states = scene.watch.seen();
    let from = states.iter().position(|s| *s == before).unwrap();
    assert!(
        states[from..]
            .iter()
            .all(|s| s.leader == before.leader && s.epoch == before.epoch),
        "the leader kept its epoch from the cut to the follower's return: {states:?}"
    );
    let Finished { acked, said, .. } = load.finish();
    let replicas = scene.settle();
    check_acked(&replicas, &acked, &said);
    println!(
        "the follower left the ISR {left:?} after the cut; {} records acknowledged",
        acked.len()
    );
}

#[test]
fn a_client_cut_off_from_the_leader_fails_over_to_the_new_leader_and_delivers() {
    let Some(mut scene) = Scene::start() else {
        return;
    };
    let (mut load, before, leader) = led_under_load(&scene);
    let consumer = Consumer::start(&scene);
    load.feed_more(50);
    consumer.wait_read(&load.acked(), WAIT);

    let leader_host = scene.brokers[leader].host;
    scene.net.cut_from(CLIENT, leader_host);
    scene.net.cut_from(leader_host, ZK);
    let cut_at = Instant::now();
    let after = scene
        .watch
        .wait("a new leader", WAIT, |s| s.epoch > before.epoch);
    let fed = load.fed();
    // Records fed after the cut, acknowledged by the new leader.
    let delivered = load.wait_value_acked(fed + 1);
    let failed_over = cut_at.elapsed();
    // A request to the leader unanswered for the request timeout gives
    // its connection up; by then the new leader is elected.
    assert!(
        failed_over < REQUEST_TIMEOUT + SESSION_TIMEOUT + MARGIN,
        "the producer delivered through the new leader {failed_over:?} after the cut"
    );
    load.feed_more(100);
    consumer.wait_read(&load.acked(), WAIT);
    let read_at = cut_at.elapsed();

    scene.net.heal(CLIENT);
    scene.net.heal(leader_host);
    scene.watch.wait("every broker back in the ISR", WAIT, |s| {
        s.epoch == after.epoch && s.isr.len() == 3
    });
    let Finished { acked, said, .. } = load.finish();
    consumer.wait_read(&acked, WAIT);
    let read = consumer.stop();
    let replicas = scene.settle();
    check_acked(&replicas, &acked, &said);
    assert!(
        epoch_at(&replicas[0], delivered) > before.epoch,
        "a record fed after the cut was acknowledged in the new leader's epoch"
    );
    check_read(&replicas[0], &read);
    println!(
        "the producer delivered through the new leader {failed_over:?} after the cut and the \
         consumer read everything acknowledged {read_at:?} after it; {} records acknowledged, \
         {} read",
        acked.len(),
        read.len()
    );
}

/// The network, ZooKeeper, the three brokers and the state watch of one
/// test, stopped when dropped (the watch first, the network last).
struct Scene {
    watch: StateWatch,
    brokers: Vec<Broker>,
    registry: String,
    _zk: ZkServer,
    net: Net,
}

/// One broker: its process, its data directory and id, and its host.
struct Broker {
    /// Declared before `dir`: stopped before its data goes.
    process: Option<BrokerProc>,
    dir: tempfile::TempDir,
    id: String,
    host: usize,
    addr: String,
    /// Its stderr, once stopped.
    past: Vec<String>,
}

impl Scene {
    /// The network, ZooKeeper and three registered brokers; `None` (a
    /// `skipped:` line printed) where namespaces or ZooKeeper are missing.
    fn start() -> Option<Scene> {
        let net = Net::new(5)?;
        let zk = ZkServer::start_in(net.host(ZK))?;
        let registry = zk.address("/klog");
        let brokers = BROKER_HOSTS
            .iter()
            .map(|&h| Broker::start(net.host(h), h, &registry))
            .collect();
        let watch = StateWatch::start(net.host(ZK), &registry);
        Some(Scene {
            watch,
            brokers,
            registry,
            _zk: zk,
            net,
        })
    }

    /// The slot of the broker `id`.
    fn slot_of(&self, id: &str) -> usize {
        self.brokers
            .iter()
            .position(|b| b.id == id)
            .unwrap_or_else(|| panic!("no broker {id}"))
    }

    /// Broker `slot`'s stderr.
    fn log(&self, slot: usize) -> Vec<String> {
        let b = &self.brokers[slot];
        b.process
            .as_ref()
            .map_or_else(|| b.past.clone(), BrokerProc::log)
    }

    /// Broker `slot`'s stderr lines containing `text`.
    fn said(&self, slot: usize, text: &str) -> Vec<String> {
        self.log(slot)
            .into_iter()
            .filter(|l| l.contains(text))
            .collect()
    }

    /// Waits until broker `slot` says a line containing `text`; returns
    /// when it was seen.
    fn wait_said(&self, slot: usize, text: &str, bound: Duration) -> Instant {
        let started = Instant::now();
        while self.said(slot, text).is_empty() {
            assert!(
                started.elapsed() < bound,
                "broker {slot} did not say {text:?} within {bound:?}: {:#?}",
                self.log(slot)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Instant::now()
    }

    /// Produces a few records with acks=all straight to broker `slot`
    /// from the clients' host, giving up after a short delivery timeout;
    /// returns what it acknowledged.
    fn probe(&self, slot: usize) -> Vec<Acked> {
        let report = tempfile::NamedTempFile::new().unwrap();
        let command = self
            .net
            .host(CLIENT)
            .command(assert_cmd::cargo::cargo_bin("klog-produce"));
        let args = [
            "-b",
            &self.brokers[slot].addr,
            "-t",
            TOPIC,
            "-q",
            "--acks",
            "all",
            "--message-timeout",
            "2s",
            "--report",
            report.path().to_str().unwrap(),
        ];
        let output = assert_cmd::Command::from_std(command)
            .args(args)
            .write_stdin("probe-1\nprobe-2\nprobe-3\n")
            .timeout(WAIT)
            .output()
            .expect("run klog-produce inside a namespace");
        let acked = read_report(report.path());
        println!(
            "a producer writing straight to broker {}: {}, {} acknowledged; it said {:?}",
            self.brokers[slot].id,
            output.status,
            acked.len(),
            String::from_utf8_lossy(&output.stderr)
        );
        acked
    }

    /// Waits until the replicas end alike, stops the brokers (SIGTERM)
    /// and reads their logs, by slot.
    fn settle(&mut self) -> Vec<Replica> {
        let started = Instant::now();
        loop {
            let replicas: Vec<Replica> = self.brokers.iter().map(Broker::replica).collect();
            if replicas.windows(2).all(|w| w[0].end() == w[1].end()) {
                break;
            }
            assert!(
                started.elapsed() < WAIT,
                "the replicas did not catch up: ends {:?}",
                replicas.iter().map(Replica::end).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        for b in &mut self.brokers {
            let mut process = b.process.take().expect("the broker runs");
            let status = process.terminate();
            b.past = process.log();
            assert!(
                status.success(),
                "broker {} exited {status}: {:?}",
                b.id,
                process.log()
            );
        }
        self.brokers.iter().map(Broker::replica).collect()
    }
}

impl Broker {
    fn start(host: &Host, index: usize, registry: &str) -> Broker {
        let dir = tempfile::tempdir().unwrap();
        let listen = format!("{}:0", host.addr());
        let process = BrokerProc::start_command(
            host.command(assert_cmd::cargo::cargo_bin("klog-broker")),
            dir.path(),
            &[
                "--registry",
                registry,
                "--listen",
                &listen,
                "--replication-factor",
                "3",
                "--min-insync-replicas",
                "2",
                "--session-timeout",
                SESSION,
                "--replica-lag-time",
                LAG,
            ],
        );
        let id = std::fs::read_to_string(dir.path().join("broker-id"))
            .expect("the broker wrote its id")
            .trim()
            .to_string();
        Broker {
            addr: process.addr.clone(),
            process: Some(process),
            dir,
            id,
            host: index,
            past: Vec::new(),
        }
    }

    /// Its log of `t-0`, read through the library (read-only, no lock: it
    /// may run).
    fn replica(&self) -> Replica {
        common::cluster::replica_in(&self.dir.path().join(format!("{TOPIC}-0")))
    }
}

/// A producer feeding the scene 50 records, the partition's state once
/// its leader acknowledged them with every broker in the ISR
/// ([`leading_with_full_isr`]), and that leader's slot.
fn led_under_load(scene: &Scene) -> (Load, State, usize) {
    let load = Load::start(scene);
    load.feed_more(50);
    let before = leading_with_full_isr(scene, &load);
    let leader = scene.slot_of(before.leader.as_deref().unwrap());
    (load, before, leader)
}

/// The partition's state once its leader acknowledged records (the
/// state it leads in: a broker takes a new epoch when it first leads)
/// and every broker is in its ISR.
fn leading_with_full_isr(scene: &Scene, load: &Load) -> State {
    load.wait_acked(1);
    // The state that leader wrote is seen within a look of the watch.
    std::thread::sleep(Duration::from_millis(200));
    scene.watch.wait("every broker in the ISR", WAIT, |s| {
        s.leader.is_some() && s.isr.len() == 3
    })
}

/// The leader epoch stamped on the batch that holds `offset`.
fn epoch_at(replica: &Replica, offset: u64) -> u64 {
    let batch = replica
        .batches
        .iter()
        .find(|b| b.base_offset <= offset && offset <= b.last_offset)
        .unwrap_or_else(|| panic!("no batch holds offset {offset}"));
    let decoded = Batch::decode(
        klog::storage::record::Format::Kafka,
        &batch.bytes,
        klog::limits::BATCH_BYTES_MAX,
    )
    .expect("a whole batch");
    u64::from(decoded.header.leader_epoch)
}

/// Every acknowledged record on every replica at its offset, each value
/// acknowledged once, and stored twice only if the producer (`said`, its
/// stderr) sent a batch again; the replicas' offsets run from 0 without
/// a gap.
fn check_acked(replicas: &[Replica], acked: &[Acked], said: &[String]) {
    let mut values = HashMap::new();
    for (offset, value) in acked {
        if let Some(earlier) = values.insert(value.clone(), *offset) {
            panic!("{value:?} acknowledged twice: at {earlier} and at {offset}");
        }
        for (slot, r) in replicas.iter().enumerate() {
            let held = r.records.get(*offset as usize);
            assert_eq!(
                held.map(|(o, v)| (*o, v.as_slice())),
                Some((*offset, value.as_bytes())),
                "replica {slot}: acknowledged {value:?} at offset {offset}"
            );
        }
    }
    for (slot, r) in replicas.iter().enumerate() {
        for (i, (offset, _)) in r.records.iter().enumerate() {
            assert_eq!(*offset, i as u64, "replica {slot}: offsets without a gap");
        }
    }
    // A batch whose answer was lost is sent again (klog-produce has no
    // idempotence) and may be stored twice: the producer says so.
    let mut stored = HashMap::new();
    let twice: Vec<(u64, u64)> = replicas[0]
        .records
        .iter()
        .filter_map(|(offset, value)| {
            stored
                .insert(value.as_slice(), *offset)
                .map(|e| (e, *offset))
        })
        .collect();
    assert!(
        twice.is_empty() || said.iter().any(|l| l.contains("sent again")),
        "{} values stored twice (first at offsets {:?}), and no batch was sent again: {said:?}",
        twice.len(),
        twice.first()
    );
}

/// What a consumer read, each record the replica holds at that offset,
/// offsets only going up.
fn check_read(replica: &Replica, read: &[Acked]) {
    for w in read.windows(2) {
        assert!(w[0].0 < w[1].0, "the consumer went back: {w:?}");
    }
    for (offset, value) in read {
        let held = replica
            .records
            .get(*offset as usize)
            .map(|(_, v)| v.as_slice());
        assert_eq!(held, Some(value.as_bytes()), "read at offset {offset}");
    }
}

/// The report's whole lines as (offset, value).
fn read_report(path: &Path) -> Vec<Acked> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    whole.lines().map(parse_report_line).collect()
}

fn parse_report_line(line: &str) -> Acked {
    let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
    assert_eq!(
        (v["topic"].as_str(), v["partition"].as_u64()),
        (Some(TOPIC), Some(0)),
        "{line}"
    );
    (
        v["offset"].as_u64().unwrap(),
        v["value"].as_str().unwrap().to_string(),
    )
}

/// The partition's state as a thread on ZooKeeper's host reads it every
/// 20 ms through a session of its own, each change once, with when it
/// was seen; stopped and joined when dropped.
struct StateWatch {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<(Instant, State)>>>,
    thread: Option<JoinHandle<()>>,
}

impl StateWatch {
    fn start(host: &Host, registry: &str) -> StateWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let registry = registry.to_string();
        let (stopped, history) = (Arc::clone(&stop), Arc::clone(&seen));
        let thread = host.spawn_inside(move || {
            let reg = klog::coord::open_read_only(&registry)
                .unwrap_or_else(|e| panic!("cannot open {registry}: {e}"));
            while !stopped.load(Ordering::Relaxed) {
                // A look that fails is only a sample missed.
                if let Ok(Some((state, _))) = reg.partition_state(TOPIC, 0) {
                    let state = State::from(state);
                    let mut seen = history.lock().unwrap();
                    if seen.last().is_none_or(|(_, s)| *s != state) {
                        seen.push((Instant::now(), state));
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        StateWatch {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Every state seen, in order.
    fn seen(&self) -> Vec<State> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Waits until a state seen from now on (the last one seen included)
    /// satisfies `ok`, and returns it.
    fn wait(&self, what: &str, bound: Duration, ok: impl Fn(&State) -> bool) -> State {
        self.wait_timed(what, bound, ok).1
    }

    /// [`StateWatch::wait`], also saying when the state was first seen.
    fn wait_timed(
        &self,
        what: &str,
        bound: Duration,
        ok: impl Fn(&State) -> bool,
    ) -> (Instant, State) {
        let started = Instant::now();
        let from = self.seen.lock().unwrap().len().saturating_sub(1);
        loop {
            let found = self.seen.lock().unwrap()[from..]
                .iter()
                .find(|(_, s)| ok(s))
                .cloned();
            if let Some(found) = found {
                return found;
            }
            let ended = self.thread.as_ref().is_none_or(JoinHandle::is_finished);
            assert!(!ended, "the state watch ended (it says why above)");
            assert!(
                started.elapsed() < bound,
                "{what}: not within {bound:?}; states seen {:?}",
                self.seen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for StateWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A `klog-produce --registry --acks all --report` on the clients' host,
/// fed the numbers 1, 2, 3... by a thread, a few every 10 ms, until
/// [`Load::finish`]; another thread notes when each line of its report
/// appeared.
struct Load {
    producer: Proc,
    report: Arc<tempfile::NamedTempFile>,
    /// Stops the watcher.
    stop: Arc<AtomicBool>,
    feeder: common::Feeder,
    seen: Arc<Mutex<Vec<(Instant, Acked)>>>,
    watcher: Option<JoinHandle<()>>,
}

impl Load {
    fn start(scene: &Scene) -> Load {
        let report = Arc::new(tempfile::NamedTempFile::new().unwrap());
        let mut command = scene
            .net
            .host(CLIENT)
            .command(assert_cmd::cargo::cargo_bin("klog-produce"));
        command.args([
            "--registry",
            &scene.registry,
            "-t",
            TOPIC,
            "--acks",
            "all",
            "--linger",
            "10ms",
            "--message-timeout",
            "60s",
            "--request-timeout",
            "5s",
            "--report",
            report.path().to_str().unwrap(),
        ]);
        let mut producer = Proc::spawn_command(command, Stdio::piped());
        let feeder = common::Feeder::start(producer.child.stdin.take().expect("stdin"));
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let watcher = {
            let (stop, seen, report) = (Arc::clone(&stop), Arc::clone(&seen), Arc::clone(&report));
            std::thread::spawn(move || loop {
                let done = stop.load(Ordering::Relaxed);
                let lines = read_report(report.path());
                let now = Instant::now();
                let mut seen = seen.lock().unwrap();
                let new = lines[seen.len()..].to_vec();
                seen.extend(new.into_iter().map(|a| (now, a)));
                drop(seen);
                if done {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            })
        };
        Load {
            producer,
            report,
            stop,
            feeder,
            seen,
            watcher: Some(watcher),
        }
    }

    /// The numbers fed so far.
    fn fed(&self) -> u64 {
        self.feeder.fed()
    }

    /// Waits until `n` more numbers were fed.
    fn feed_more(&self, n: u64) {
        self.feeder.feed_more(n, WAIT);
    }

    /// The acknowledged records so far.
    fn acked(&self) -> Vec<Acked> {
        read_report(self.report.path())
    }

    fn acked_count(&self) -> usize {
        self.acked().len()
    }

    /// Waits until `n` records are acknowledged.
    fn wait_acked(&self, n: usize) {
        let what = format!(
            "{n} records acknowledged; the producer said {:?}",
            self.producer.stderr_lines()
        );
        common::eventually(&what, WAIT, || self.acked_count() >= n);
    }

    /// Waits until the value `value` is acknowledged, and returns its
    /// offset.
    fn wait_value_acked(&self, value: u64) -> u64 {
        let value = value.to_string();
        let started = Instant::now();
        loop {
            if let Some((offset, _)) = self.acked().into_iter().find(|(_, v)| *v == value) {
                return offset;
            }
            assert!(
                started.elapsed() < WAIT,
                "{value} not acknowledged within {WAIT:?}; the producer said {:?}",
                self.producer.stderr_lines()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops feeding, closes the producer's input and waits for it, which
    /// must deliver every record fed.
    fn finish(&mut self) -> Finished {
        self.stop.store(true, Ordering::Relaxed);
        self.feeder.finish();
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.producer.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                started.elapsed() < WAIT * 2,
                "the producer did not end: {:?}",
                self.producer.stderr_lines()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        self.watcher.take().unwrap().join().unwrap();
        // Its stderr reader may be a line behind the exit.
        std::thread::sleep(Duration::from_millis(100));
        let said = self.producer.stderr_lines();
        let fed = self.fed();
        assert!(
            status.success()
                && said
                    .iter()
                    .any(|l| l.contains(&format!("Sent {fed} records to t (0 failed)"))),
            "the producer delivered every record fed: {status}: {said:?}"
        );
        let acked = self.acked();
        assert_eq!(acked.len() as u64, fed, "the report lists every record");
        Finished {
            acked,
            seen: self.seen.lock().unwrap().clone(),
            said,
        }
    }
}

/// What a [`Load`] did.
struct Finished {
    /// The acknowledged records.
    acked: Vec<Acked>,
    /// When each appeared in the report.
    seen: Vec<(Instant, Acked)>,
    /// The producer's stderr.
    said: Vec<String>,
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A `klog-consume --registry` of `t-0` on the clients' host, printing
/// `offset value`.
struct Consumer {
    process: Proc,
    read: Mutex<Vec<Acked>>,
}

impl Consumer {
    fn start(scene: &Scene) -> Consumer {
        let mut command = scene
            .net
            .host(CLIENT)
            .command(assert_cmd::cargo::cargo_bin("klog-consume"));
        command.args([
            "--registry",
            &scene.registry,
            "-t",
            TOPIC,
            "-o",
            "beginning",
            "-u",
            "-f",
            "%o %s\n",
            "--request-timeout",
            "5s",
        ]);
        Consumer {
            process: Proc::spawn_command(command, Stdio::null()),
            read: Mutex::new(Vec::new()),
        }
    }

    /// Waits until it read every one of `acked`.
    fn wait_read(&self, acked: &[Acked], bound: Duration) {
        let started = Instant::now();
        loop {
            let mut read = self.read.lock().unwrap();
            while let Ok(line) = self.process.lines.try_recv() {
                let (offset, value) = line.split_once(' ').expect("offset value");
                read.push((offset.parse().unwrap(), value.to_string()));
            }
            let values: std::collections::HashSet<&str> =
                read.iter().map(|r| r.1.as_str()).collect();
            let missing = acked
                .iter()
                .filter(|a| !values.contains(a.1.as_str()))
                .count();
            if missing == 0 {
                return;
            }
            assert!(
                started.elapsed() < bound,
                "the consumer did not read {missing} acknowledged records within {bound:?}; it \
                 said {:?}",
                self.process.stderr_lines()
            );
            drop(read);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops it; returns what it read.
    fn stop(self) -> Vec<Acked> {
        self.read.into_inner().unwrap()
    }
}
