//! Many hosts for real (issue 12): ZooKeeper, a broker and the two members
//! of a consumer group each run in a network namespace of their own
//! (`tests/common/netns.rs`), and member A's host is cut off, then healed.
//!
//! Hosts: 0 runs ZooKeeper, 1 member A, 2 member B, 3 the broker, the
//! producer and a thread that watches the group's committed offsets. While
//! A is cut off, it hands out nothing; its session expires on the server
//! and B takes all four partitions, delivering what is produced meanwhile.
//! Once healed, A learns its session expired, drops its partitions without
//! committing and joins again, and the group splits 2/2. At the end every
//! record was delivered, a record delivered by both members was one A
//! handed out before the cut (at-least-once redelivery of what it had not
//! committed), and no committed offset ever went backwards.
//!
//! A is cut off two ways: its whole host (it reaches nothing), and from
//! ZooKeeper's host only (it still reaches the broker, so only the member's
//! own care keeps it from handing records out while its session is in
//! doubt). Skipped with a printed line where namespaces or ZooKeeper are
//! not available (`KLOG_REQUIRE_NETNS=1`, `KLOG_REQUIRE_ZK=1` fail instead).

mod common;

use std::collections::BTreeSet;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::netns::{Host, Net};
use common::zk::ZkServer;
use common::{BrokerProc, Proc};
use klog::coord::offsets_topic::TopicRegistry;
use klog::coord::Registry;

/// The bound on every wait of the test: far above what any step needs.
const WAIT: Duration = Duration::from_secs(20);
/// The members' session timeout.
const SESSION_TIMEOUT: &str = "4s";
const PARTITIONS: u32 = 4;
/// Records produced at each step, `PARTITIONS` times a round number.
const STEP: u64 = 200;
/// The hosts: ZooKeeper's, member A's, member B's, and the broker's (with
/// the producer and the offset watch), which is never cut.
const ZK: usize = 0;
const A: usize = 1;
const B: usize = 2;
const SERVERS: usize = 3;

/// How member A is cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Its whole host: it reaches neither ZooKeeper nor the broker.
    Host,
    /// From ZooKeeper's host only: it still fetches from the broker.
    FromZooKeeper,
}

#[test]
fn a_member_whose_host_is_cut_off_loses_its_partitions_and_rejoins_once_healed() {
    cut_and_heal(Cut::Host);
}

#[test]
fn a_member_cut_off_from_zookeeper_only_hands_out_nothing_though_it_reaches_the_broker() {
    cut_and_heal(Cut::FromZooKeeper);
}

fn cut_and_heal(cut: Cut) {
    // Declared first, dropped last: everything in it stops before.
    let Some(net) = Net::new(4) else {
        return;
    };
    let Some(zk) = ZkServer::start_in(net.host(ZK)) else {
        return;
    };
    let started = Instant::now();
    let registry = zk.address("/netns");
    let data = tempfile::tempdir().unwrap();
    let servers = net.host(SERVERS);
    let listen = format!("{}:0", servers.addr());
    let broker = BrokerProc::start_command(
        servers.command(assert_cmd::cargo::cargo_bin("klog-broker")),
        data.path(),
        &[
            "--registry",
            &registry,
            "--partitions",
            "4",
            "--listen",
            &listen,
        ],
    );
    let mut run = Run {
        servers,
        broker: broker.addr.clone(),
        offsets: OffsetWatch::start(servers, &registry),
        a: member_in(net.host(A), &registry),
        b: member_in(net.host(B), &registry),
        got: Delivered::default(),
    };
    run.produce(1);
    wait_owns(&run.a, 2);
    wait_owns(&run.b, 2);
    run.deliver(1);
    // Committed, then handed out and not committed yet: the second step is
    // A's to lose at the cut, and B's to deliver again.
    run.offsets.wait_at(1);
    run.produce(2);
    run.deliver(2);
    let before_cut: BTreeSet<u64> = run.got.a.iter().copied().collect();
    let times = run.cut_off(&net, cut);
    run.check(&before_cut);
    println!(
        "{cut:?}: {times}; {} records delivered by both (of {} A handed out before the cut); \
         committed offsets seen {:?}; {:?} in all",
        run.got.twice().len(),
        before_cut.len(),
        run.offsets.seen(),
        started.elapsed()
    );
}

/// The processes of one run of the scenario, and what they delivered.
struct Run<'n> {
    servers: &'n Host,
    /// The broker's address.
    broker: String,
    offsets: OffsetWatch,
    a: Proc,
    b: Proc,
    got: Delivered,
}

impl Run<'_> {
    /// Produces step `k`'s records (from 1: `1..=STEP`, then on).
    fn produce(&self, k: u64) {
        produce_in(self.servers, &self.broker, (k - 1) * STEP + 1, k * STEP);
    }

    /// Waits until every record of the steps up to `k` was delivered.
    fn deliver(&mut self, k: u64) {
        self.got.until_all(&self.a, &self.b, 1, k * STEP);
    }

    /// Cuts A off, checks that it hands out nothing while B takes over its
    /// partitions and delivers step 3, heals it, and sees it join again
    /// and the group deliver step 4. Says how long each part took.
    fn cut_off(&mut self, net: &Net, cut: Cut) -> String {
        // A has handed out all it will before the cut: nothing is left in
        // its buffers.
        let handed_out = self.got.a.len();
        match cut {
            Cut::Host => net.cut(A),
            Cut::FromZooKeeper => net.cut_from(A, ZK),
        }
        let cut_at = Instant::now();
        self.a
            .wait_stderr("lost touch with the registry", |_| true, WAIT);
        let in_doubt = cut_at.elapsed();
        // Only now: whatever A reaches (with Cut::FromZooKeeper, the
        // broker) it must not hand out.
        self.produce(3);
        wait_owns(&self.b, 4);
        let moved = cut_at.elapsed();
        self.deliver(3);
        std::thread::sleep(Duration::from_millis(500));
        self.got.drain(&self.a, &self.b);
        assert_eq!(
            self.got.a.len(),
            handed_out,
            "A handed out records while cut off: {:?}",
            &self.got.a[handed_out..]
        );

        // B commits all of it: a late commit of A's would go backwards.
        self.offsets.wait_at(3);
        net.heal(A);
        let healed_at = Instant::now();
        self.a.wait_stderr("lost its session", |_| true, WAIT);
        wait_owns(&self.a, 2);
        wait_owns(&self.b, 2);
        let rejoined = healed_at.elapsed();
        self.produce(4);
        self.deliver(4);
        format!(
            "A in doubt {in_doubt:?} after the cut, B owned all {PARTITIONS} partitions \
             {moved:?} after it; A rejoined and the group split 2/2 {rejoined:?} after the heal"
        )
    }

    /// At the end: every record committed, no committed offset ever went
    /// backwards, a record delivered by both members was one A handed out
    /// before the cut, and neither member reported an error.
    fn check(&mut self, before_cut: &BTreeSet<u64>) {
        self.offsets.wait_at(4);
        let seen = self.offsets.stop();
        for (p, seen) in seen.iter().enumerate() {
            assert!(
                seen.windows(2).all(|w| w[0] <= w[1]),
                "partition {p}'s committed offset went backwards: {seen:?}"
            );
        }
        let late: Vec<u64> = self.got.twice().difference(before_cut).copied().collect();
        assert!(
            late.is_empty(),
            "delivered by both members, not handed out by A before the cut: {late:?}"
        );
        for (name, p) in [("A", &self.a), ("B", &self.b)] {
            let said = p.stderr_lines();
            assert!(
                !said.iter().any(|l| l.contains("rror")),
                "{name} said {said:#?}"
            );
            println!("{name} said:\n{}", said.join("\n"));
        }
    }
}

/// A member of group `g` of topic `t` inside `host`.
fn member_in(host: &Host, registry: &str) -> Proc {
    let mut command = host.command(assert_cmd::cargo::cargo_bin("klog-consume"));
    command.args(["-G", "g", "--registry", registry, "-t", "t"]);
    command.args([
        "--session-timeout",
        SESSION_TIMEOUT,
        "--commit-interval",
        "2s",
    ]);
    Proc::spawn_command(command, Stdio::null())
}

/// Waits until `member`'s last `owns` line lists `n` partitions.
fn wait_owns(member: &Proc, n: usize) {
    member.wait_stderr(" owns ", |l| l.matches("t [").count() == n, WAIT);
}

/// Produces the numbers `from..=to` to topic `t` of the broker at `addr`
/// from inside `host`.
fn produce_in(host: &Host, addr: &str, from: u64, to: u64) {
    let input: String = (from..=to).map(|n| format!("{n}\n")).collect();
    let command = host.command(assert_cmd::cargo::cargo_bin("klog-produce"));
    let output: Output = assert_cmd::Command::from_std(command)
        .args(["-b", addr, "-t", "t", "-q"])
        .write_stdin(input)
        .timeout(WAIT)
        .output()
        .expect("run klog-produce inside a namespace");
    assert!(
        output.status.success(),
        "producing {from}..={to}: {}; stderr {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// What each member printed so far, in order.
#[derive(Debug, Default)]
struct Delivered {
    a: Vec<u64>,
    b: Vec<u64>,
}

impl Delivered {
    /// Adds what the members printed since the last look.
    fn drain(&mut self, a: &Proc, b: &Proc) {
        let number = |l: String| {
            l.parse::<u64>()
                .unwrap_or_else(|_| panic!("not a record: {l:?}"))
        };
        self.a.extend(a.lines.try_iter().map(number));
        self.b.extend(b.lines.try_iter().map(number));
    }

    /// Waits until the two members together delivered every one of
    /// `from..=to`.
    fn until_all(&mut self, a: &Proc, b: &Proc, from: u64, to: u64) {
        let deadline = Instant::now() + WAIT;
        loop {
            self.drain(a, b);
            let all: BTreeSet<u64> = self.a.iter().chain(&self.b).copied().collect();
            let missing: Vec<u64> = (from..=to).filter(|n| !all.contains(n)).collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {from}..={to} never delivered within {WAIT:?} (first {:?}); \
                 A said {:#?}\nB said {:#?}",
                missing.len(),
                &missing[..missing.len().min(10)],
                a.stderr_lines(),
                b.stderr_lines()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The records both members delivered.
    fn twice(&self) -> BTreeSet<u64> {
        let a: BTreeSet<u64> = self.a.iter().copied().collect();
        self.b.iter().copied().filter(|n| a.contains(n)).collect()
    }
}

/// Group `g`'s committed offsets of topic `t`, read every 50 ms through a
/// registry session of its own, from a thread inside a host; stopped and
/// joined when dropped.
struct OffsetWatch {
    stop: Arc<AtomicBool>,
    /// Each partition's committed offsets, each change once, in order.
    seen: Arc<Mutex<Vec<Vec<u64>>>>,
    thread: Option<JoinHandle<()>>,
}

impl OffsetWatch {
    fn start(host: &Host, registry: &str) -> OffsetWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(vec![Vec::new(); PARTITIONS as usize]));
        let registry = registry.to_string();
        let (stopped, history) = (Arc::clone(&stop), Arc::clone(&seen));
        let thread = host.spawn_inside(move || {
            let reg = klog::coord::open(&registry, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("cannot open {registry}: {e}"));
            // Committed offsets are the offsets topic's, asked of its
            // leader (a look that fails within a second is a sample missed).
            let reg = TopicRegistry::new(reg, Duration::from_secs(1));
            while !stopped.load(Ordering::Relaxed) {
                for p in 0..PARTITIONS {
                    // A look that fails is only a sample missed.
                    if let Ok(Some(offset)) = reg.committed("g", "t", p) {
                        let mut seen = history.lock().unwrap();
                        let seen = &mut seen[p as usize];
                        if seen.last() != Some(&offset) {
                            seen.push(offset);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        OffsetWatch {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Each partition's last committed offset seen (0 for none).
    fn lasts(&self) -> Vec<u64> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .map(|s| s.last().copied().unwrap_or(0))
            .collect()
    }

    /// What it saw so far.
    fn seen(&self) -> Vec<Vec<u64>> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until every partition's last committed offset seen is the end
    /// of step `k` (records go round-robin).
    fn wait_at(&self, k: u64) {
        let ends = vec![k * STEP / u64::from(PARTITIONS); PARTITIONS as usize];
        let deadline = Instant::now() + WAIT;
        while self.lasts() != ends && Instant::now() < deadline {
            let ended = self.thread.as_ref().is_none_or(JoinHandle::is_finished);
            assert!(!ended, "the offset watch ended (it says why above)");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            self.lasts(),
            ends,
            "committed offsets; seen {:?}",
            self.seen()
        );
    }

    /// Stops the thread and waits for it (it panicked if it could not
    /// open the registry: the test fails saying so); returns what it saw.
    fn stop(&mut self) -> Vec<Vec<u64>> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() && !std::thread::panicking() {
                panic!("the offset watch failed");
            }
        }
        self.seen()
    }
}

impl Drop for OffsetWatch {
    fn drop(&mut self) {
        self.stop();
    }
}
