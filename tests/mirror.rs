//! Issue 30: a mirror as pipes that loses nothing. A source cluster
//! (three brokers, two partitions, replication factor 3) is fed numbers
//! throughout; a mirror, `klog-consume --registry A -G mirror -J
//! --commit-from FIFO | klog-produce --registry B -J --report FIFO`,
//! copies them into a destination cluster (three brokers, replication
//! factor 3). The mirror's producer is killed (SIGKILL) with records in
//! its buffer, then the destination's leader, then the source's; the
//! mirror is started again after each kill of its own. In the end every
//! number fed is in the destination (at least once; with
//! `--transactional-id`, exactly once), and the group committed the
//! source to its end.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::registry::Backend;

const TOPIC: &str = "t";

/// How a test's mirror differs from the plain one.
#[derive(Clone, Copy)]
struct Extra<'a> {
    /// Its producer's extra arguments.
    producer: &'a [&'a str],
    /// Its consumer's --commit-interval.
    commit_interval: &'a str,
    /// How long its producer lives before a kill.
    before_kill: Duration,
    /// Its consumer is killed too (SIGKILL, before the producer): it
    /// commits nothing on the way out.
    kill_consumer: bool,
}

impl Default for Extra<'_> {
    fn default() -> Self {
        Extra {
            producer: &[],
            commit_interval: "100ms",
            before_kill: Duration::ZERO,
            kill_consumer: false,
        }
    }
}

/// The two processes of a mirror, joined by a pipe and a FIFO; killed
/// when dropped.
struct Mirror {
    consumer: Child,
    producer: Child,
}

impl Mirror {
    /// Starts the mirror from registry `from` to `to`, its
    /// acknowledgements through `fifo`, stderr appended to `logs`, as
    /// `extra` says.
    fn start(from: &str, to: &str, (fifo, logs): (&Path, &Path), extra: Extra) -> Mirror {
        let log = |name: &str| {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(logs.join(name))
                .unwrap();
            Stdio::from(file)
        };
        let fifo = fifo.to_str().unwrap();
        let mut consumer = Command::new(assert_cmd::cargo::cargo_bin("klog-consume"));
        consumer.args(["--registry", from, "-t", TOPIC, "-G", "mirror", "-J"]);
        consumer.args([
            "--commit-from",
            fifo,
            "--commit-interval",
            extra.commit_interval,
        ]);
        common::default_signals(&mut consumer);
        let mut consumer = consumer
            .stdout(Stdio::piped())
            .stderr(log("consumer.log"))
            .spawn()
            .unwrap();
        let mut producer = Command::new(assert_cmd::cargo::cargo_bin("klog-produce"));
        producer.args(["--registry", to, "-t", TOPIC, "-J", "--report", fifo]);
        // Records wait in its buffer: a kill loses them there.
        producer.args(["--linger", "300ms", "--message-timeout", "60s"]);
        producer.args(extra.producer);
        common::default_signals(&mut producer);
        let producer = producer
            .stdin(Stdio::from(consumer.stdout.take().unwrap()))
            .stdout(Stdio::null())
            .stderr(log("producer.log"))
            .spawn()
            .unwrap();
        Mirror { consumer, producer }
    }

    /// Kills its producer (SIGKILL) and waits for its consumer to end
    /// (its output and its acknowledgements break).
    fn kill_producer(mut self, consumer_too: bool) {
        if consumer_too {
            self.consumer.kill().unwrap();
        }
        self.producer.kill().unwrap();
        self.producer.wait().unwrap();
        wait_exit(&mut self.consumer, "the mirror's consumer ends");
    }

    /// Stops it as a user does (SIGTERM to the consumer, which closes its
    /// output: the producer delivers what it holds and ends); both exit 0.
    fn stop(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.consumer.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let consumer = wait_exit(&mut self.consumer, "the mirror's consumer ends");
        let producer = wait_exit(&mut self.producer, "the mirror's producer ends");
        assert!(
            consumer.success() && producer.success(),
            "{consumer} {producer}"
        );
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = self.consumer.kill();
        let _ = self.producer.kill();
        let _ = self.consumer.wait();
        let _ = self.producer.wait();
    }
}

fn wait_exit(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < until, "{what}: still running");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The values in the destination topic.
fn mirrored(to: &str) -> BTreeSet<u64> {
    common::consume_registry(to, TOPIC, &["-f", "%s\\n"])
        .lines()
        .map(|l| l.parse().expect("a number"))
        .collect()
}

/// Kills `cluster`'s leader of partition 0 (SIGKILL) while `feeder`
/// feeds the source, and starts it again once another broker leads.
fn kill_leader(cluster: &mut Cluster, feeder: &mut common::Feeder) {
    let bound = Duration::from_secs(30);
    let state = cluster.wait_leader(TOPIC, 0, bound);
    let leader = cluster.slot_of(state.leader.as_deref().unwrap());
    cluster.kill9(leader);
    cluster.wait_new_epoch(TOPIC, 0, state.epoch, None, bound);
    feeder.feed_more(300, bound);
    cluster.restart(leader);
    feeder.feed_more(200, bound);
}

/// How many records the destination's read_committed readers see (0
/// before the topic exists).
fn committed_count(to: &str) -> usize {
    let out = common::bin("klog-consume")
        .args(["--registry", to, "-t", TOPIC, "-e", "-q"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    out.stdout.iter().filter(|&&b| b == b'\n').count()
}

fn logs(dir: &Path) -> String {
    ["consumer.log", "producer.log"]
        .iter()
        .map(|n| std::fs::read_to_string(dir.join(n)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[test]
fn a_mirror_loses_nothing_when_its_producer_or_either_clusters_leader_dies() {
    mirror_under_faults(Extra::default(), |_, _, _, _| {});
}

/// With transactions (`--transactional-id`), the same faults store each
/// number once: the destination's read_committed readers see every
/// number fed exactly once, and the audit reconciles with none lost and
/// none duplicated.
#[test]
fn a_transactional_mirror_stores_each_record_once_when_its_producer_or_either_clusters_leader_dies()
{
    // The consumer commits seldom, and the producer lives long enough to
    // store records: each restart reads again records the destination
    // holds (without transactions, they would be stored twice).
    let extra = Extra {
        producer: &["--transactional-id", "mirror-a"],
        commit_interval: "1h",
        before_kill: Duration::from_secs(1),
        kill_consumer: true,
    };
    mirror_under_faults(extra, |to, fed, rows, logs| {
        let values = common::consume_registry(to, TOPIC, &["-f", "%s\\n"]);
        let mut seen = BTreeSet::new();
        let twice: Vec<&str> = values.lines().filter(|v| !seen.insert(*v)).collect();
        assert!(
            twice.is_empty(),
            "{} numbers stored twice, first {:?}",
            twice.len(),
            &twice[..twice.len().min(10)]
        );
        assert_eq!(seen.len() as u64, fed);
        for row in rows {
            assert_eq!(row["duplicated"].as_u64(), Some(0), "{row}");
        }
        // The consumers killed printed again what the destination held.
        assert!(
            logs.contains("stored before by a committed transaction"),
            "{logs}"
        );
    });
}

/// Feeds a source cluster while a mirror (its producer given `extra`)
/// copies it into a destination of three brokers, killing the mirror's
/// producer twice, the destination's leader once and the source's leader
/// once (both replicate three times); checks that every
/// number fed arrived and the audit reconciles with none lost, then
/// `check`s the destination's registry, the count fed, the
/// destination's audit rows and the mirror's stderr.
fn mirror_under_faults(extra: Extra, check: impl FnOnce(&str, u64, &[serde_json::Value], &str)) {
    let replicated = [
        "--replication-factor",
        "3",
        "--partitions",
        "2",
        "--session-timeout",
        "2s",
        "--replica-lag-time",
        "2s",
    ];
    let mut source = Cluster::start(Backend::Dir, 3, &replicated).unwrap();
    let mut dest = Cluster::three_fast(&[]);
    let dir = tempfile::tempdir().unwrap();
    let fifo: PathBuf = dir.path().join("acks");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut feed = common::Proc::spawn_with_stdin(
        "klog-produce",
        &[
            "--registry",
            source.spec(),
            "-t",
            TOPIC,
            "--linger",
            "5ms",
            "--audit-topic",
            "audit",
            "--audit-window",
            "1s",
        ],
        Stdio::piped(),
    );
    let mut feeder = common::Feeder::start(feed.child.stdin.take().unwrap());
    let bound = Duration::from_secs(30);
    feeder.feed_more(200, bound);
    let (from, to) = (source.spec().to_string(), dest.spec().to_string());
    let (from, to) = (from.as_str(), to.as_str());

    // The mirror's producer dies with records in its buffer, twice.
    for _ in 0..2 {
        let before = committed_count(to);
        let mirror = Mirror::start(from, to, (&fifo, dir.path()), extra);
        feeder.feed_more(300, bound);
        std::thread::sleep(extra.before_kill);
        if extra.kill_consumer {
            // Killed once the destination holds more than before: what it
            // stored, the consumer prints again.
            let until = Instant::now() + bound;
            while committed_count(to) <= before && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        mirror.kill_producer(extra.kill_consumer);
    }
    // The destination's leader dies under the mirror.
    let mirror = Mirror::start(from, to, (&fifo, dir.path()), extra);
    feeder.feed_more(200, bound);
    kill_leader(&mut dest, &mut feeder);
    // The source's leader dies under the mirror (and under the feed).
    kill_leader(&mut source, &mut feeder);
    feeder.finish();
    drop(feed.child.stdin.take());
    let fed_ok = wait_exit(&mut feed.child, "the source's producer ends");
    assert!(fed_ok.success(), "{:?}", feed.stderr_lines());
    let fed = feeder.fed();

    let until = Instant::now() + Duration::from_secs(60);
    let missing = loop {
        let have = mirrored(to);
        let missing: Vec<u64> = (1..=fed).filter(|n| !have.contains(n)).collect();
        if missing.is_empty() || Instant::now() > until {
            break missing;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        missing.is_empty(),
        "{} of {fed} numbers never reached the destination, first {:?}\n{}",
        missing.len(),
        &missing[..missing.len().min(10)],
        logs(dir.path())
    );
    eprintln!("{fed} numbers mirrored\n{}", logs(dir.path()));
    mirror.stop();
    // The group committed the source to its end: nothing is left for it.
    let left = common::consume_registry(from, TOPIC, &["-G", "mirror"]);
    assert_eq!(left, "", "{}", logs(dir.path()));
    // The audit, mirrored too, reconciles on both sides: nothing lost.
    let counts = common::consume_registry(from, "audit", &["-J"]);
    common::bin("klog-produce")
        .args(["--registry", to, "-t", "audit", "-J", "-q"])
        .write_stdin(counts)
        .assert()
        .success();
    let mut rows_to = Vec::new();
    for registry in [from, to] {
        let out = common::bin("klog-consume")
            .args([
                "--registry",
                registry,
                "--audit",
                "audit",
                "--audit-grace",
                "0s",
                "-J",
            ])
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{registry}: {text}");
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let sent: u64 = rows.iter().map(|r| r["sent"].as_u64().unwrap_or(0)).sum();
        let lost: u64 = rows.iter().map(|r| r["lost"].as_u64().unwrap()).sum();
        assert_eq!((sent, lost), (fed, 0), "{registry}: {text}");
        rows_to = rows;
    }
    check(to, fed, &rows_to, &logs(dir.path()));
}

/// A producer whose report is a FIFO nobody reads waits for its reader,
/// and a stop signal ends that wait (it never blocks in open).
#[test]
fn a_report_fifo_without_a_reader_does_not_hold_a_producer_past_its_signal() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("acks");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut producer = Command::new(assert_cmd::cargo::cargo_bin("klog-produce"));
    producer.args([
        "-b",
        "127.0.0.1:9",
        "-t",
        TOPIC,
        "--report",
        fifo.to_str().unwrap(),
    ]);
    common::default_signals(&mut producer);
    let mut producer = producer
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        producer.try_wait().unwrap().is_none(),
        "it waits for a reader"
    );
    let pid = nix::unistd::Pid::from_raw(producer.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = wait_exit(&mut producer, "the producer ends on its signal");
    assert!(!status.success());
    let mut said = String::new();
    std::io::Read::read_to_string(&mut producer.stderr.take().unwrap(), &mut said).unwrap();
    assert!(said.contains("no reader"), "{said}");
}

/// `--source-partition`: each `-J` record goes to the partition its
/// envelope names; one naming a partition the topic lacks, or none, is
/// refused and said, and the rest still go.
#[test]
fn source_partition_keeps_each_records_partition() {
    let data = tempfile::tempdir().unwrap();
    let broker = common::BrokerProc::start(data.path(), &["--partitions", "4"]);
    let envelope = |p: u32, v: &str| {
        format!("{{\"topic\":\"s\",\"partition\":{p},\"offset\":1,\"payload\":\"{v}\"}}\n")
    };
    let input = envelope(2, "two")
        + &envelope(3, "three")
        + &envelope(9, "nine")
        + "{\"payload\":\"none\"}\n"
        + &envelope(2, "two-again");
    let out = common::bin("klog-produce")
        .args(["-b", &broker.addr, "-t", TOPIC, "-J", "--source-partition"])
        .write_stdin(input)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("line 3: --source-partition: \"t\" has no partition 9"),
        "{said}"
    );
    assert!(
        said.contains("line 4: --source-partition: its envelope names no"),
        "{said}"
    );
    let got = common::consume_from(&broker.addr, TOPIC, &["-f", "%p %s\\n"]);
    let mut lines: Vec<&str> = got.lines().collect();
    lines.sort();
    assert_eq!(lines, vec!["2 two", "2 two-again", "3 three"]);
}
