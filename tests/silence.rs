//! Silence is a failure too: a leader frozen with SIGSTOP answers nothing
//! and closes nothing. Three `klog-broker`s on a directory registry with
//! `--session-timeout 2s`, RF 3 and four partitions; a `klog-produce
//! --acks all --report FILE` fed numbers without pause and a
//! `klog-consume` of every partition run throughout; the leader of
//! partition 0 is frozen. The clients' request timeout (`-X
//! request.timeout.ms`, 10 s here, so that a wait for it stands out from
//! the cluster's own pause) makes them look the leader up again:
//!
//! - acknowledgements of partition 0 resume within the session timeout
//!   plus the request timeout (plus slack), not after the delivery
//!   timeout;
//! - the partitions the frozen broker does not lead never go without an
//!   acknowledgement for longer than a few seconds (the time the leaders
//!   take to drop the frozen follower from their ISR under acks=all), far
//!   less than the request timeout: one stuck connection never holds the
//!   producer's other partitions;
//! - the consumer keeps printing, and reads partition 0 again within the
//!   same bound.
//!
//! A frozen leader must not hold up `klog-dump --registry` either: on an
//! RF 3 cluster whose session timeout (60 s) keeps the frozen broker
//! registered, the dump ends within a few seconds, exit 0, with
//! everything the registry and the live brokers said, and the frozen
//! broker's figures marked as not answered. Nor `klog-consume -L
//! --registry` (with `-J`, and `klog-produce -L`): within a few seconds,
//! exit 0, the frozen leader's partitions `unreachable`.
//!
//! The bounds are functional and generous, not a benchmark.

mod common;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::registry::Backend;
use common::Proc;

const TOPIC: &str = "t";
const PARTITIONS: u32 = 4;
/// The brokers' session timeout: a frozen leader is replaced after it.
const SESSION: Duration = Duration::from_secs(2);
/// The clients' request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Slack on top of an election plus a request timeout: a loaded machine.
const SLACK: Duration = Duration::from_secs(8);
/// The longest a partition the frozen broker does not lead may go without
/// an acknowledgement (or the consumer without a line): the leaders drop
/// the frozen follower from their ISR within the session timeout; well
/// below the request timeout.
const PAUSE_MAX: Duration = Duration::from_secs(6);
/// How long the leader stays frozen.
const FROZEN: Duration = Duration::from_secs(24);

/// When each partition's records were acknowledged (seen in the report)
/// or printed by the consumer, as seen by the test.
type Seen = Arc<Mutex<BTreeMap<u32, Vec<Instant>>>>;

/// Follows the producer's report file as it grows, noting when each
/// acknowledged record's line appeared, until `stop`.
fn follow_report(
    path: std::path::PathBuf,
    stop: Arc<AtomicBool>,
) -> (Seen, std::thread::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let thread = {
        let seen = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut input = std::io::BufReader::new(std::fs::File::open(path).unwrap());
            let mut line = String::new();
            while !stop.load(Ordering::Relaxed) {
                line.clear();
                match input.read_line(&mut line) {
                    Ok(n) if n > 0 && line.ends_with('\n') => {
                        let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
                        let p = v["partition"].as_u64().unwrap() as u32;
                        seen.lock()
                            .unwrap()
                            .entry(p)
                            .or_default()
                            .push(Instant::now());
                    }
                    Ok(0) => std::thread::sleep(Duration::from_millis(20)),
                    // Half a line: read on from where it stopped.
                    Ok(n) => {
                        let back = i64::try_from(n).unwrap();
                        std::io::Seek::seek(&mut input, std::io::SeekFrom::Current(-back)).unwrap();
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => panic!("reading the report: {e}"),
                }
            }
        })
    };
    (seen, thread)
}

/// The longest time in `from..until` without an instant of `times` (the
/// wait from `from` to the first one included).
fn longest_gap(times: &[Instant], from: Instant, until: Instant) -> Duration {
    let mut last = from;
    let mut gap = Duration::ZERO;
    for &t in times.iter().filter(|&&t| t > from && t <= until) {
        gap = gap.max(t - last);
        last = t;
    }
    gap.max(until.saturating_duration_since(last))
}

/// The first instant of `times` after `from`.
fn first_after(times: &[Instant], from: Instant) -> Option<Instant> {
    times.iter().copied().find(|&t| t > from)
}

/// Thaws the frozen broker however the test ends (the cluster then kills
/// every broker).
struct Thaw<'a>(&'a Cluster, usize);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        self.0.thaw(self.1);
    }
}

#[test]
fn a_frozen_leader_costs_its_partitions_an_election_and_a_request_timeout_and_no_one_else_anything()
{
    let session = format!("{}s", SESSION.as_secs());
    let partitions = PARTITIONS.to_string();
    let args = [
        "--replication-factor",
        "3",
        "--min-insync-replicas",
        "2",
        "--partitions",
        &partitions,
        "--session-timeout",
        &session,
        "--replica-lag-time",
        "2s",
    ];
    let Some(cluster) = Cluster::start(Backend::Dir, 3, &args) else {
        return;
    };
    let request_timeout = format!("request.timeout.ms={}", REQUEST_TIMEOUT.as_millis());
    let report = tempfile::NamedTempFile::new().unwrap();
    let produce_args = [
        "--registry",
        cluster.spec(),
        "-t",
        TOPIC,
        "--acks",
        "all",
        "--linger",
        "10ms",
        "--message-timeout",
        "60s",
        "-X",
        &request_timeout,
        "--report",
        report.path().to_str().unwrap(),
    ];
    let mut producer =
        Proc::spawn_with_stdin("klog-produce", &produce_args, std::process::Stdio::piped());
    let stop = Arc::new(AtomicBool::new(false));
    let mut feeder = common::Feeder::start(producer.child.stdin.take().unwrap());
    let (acked, follower) = follow_report(report.path().to_path_buf(), Arc::clone(&stop));
    // Stop feeding and following however the test ends.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _stop = Stop(Arc::clone(&stop));

    cluster.wait(
        "every partition acknowledged",
        Duration::from_secs(60),
        || acked.lock().unwrap().len() == PARTITIONS as usize,
    );
    for p in 0..PARTITIONS {
        cluster.wait_full_isr(TOPIC, p, Duration::from_secs(30));
    }
    let consumer = Proc::spawn(
        "klog-consume",
        &[
            "--registry",
            cluster.spec(),
            "-t",
            TOPIC,
            "-o",
            "end",
            "-u",
            "-f",
            "%p %o\n",
            "-X",
            &request_timeout,
        ],
    );
    let printed: Seen = Arc::default();
    let take_printed = || {
        while let Ok(line) = consumer.lines.try_recv() {
            let p = line.split(' ').next().unwrap().parse().unwrap();
            printed
                .lock()
                .unwrap()
                .entry(p)
                .or_default()
                .push(Instant::now());
        }
    };
    cluster.wait(
        "the consumer prints every partition",
        Duration::from_secs(30),
        || {
            take_printed();
            printed.lock().unwrap().len() == PARTITIONS as usize
        },
    );

    let leader = cluster.state(TOPIC, 0).unwrap().leader.unwrap();
    let frozen = cluster.slot_of(&leader);
    let others: Vec<u32> = (0..PARTITIONS)
        .filter(|&p| cluster.state(TOPIC, p).unwrap().leader.as_deref() != Some(&leader))
        .collect();
    assert!(
        !others.is_empty(),
        "the frozen broker leads every partition"
    );
    let froze_at = Instant::now();
    cluster.freeze(frozen);
    let thaw = Thaw(&cluster, frozen);
    eprintln!("froze {leader}, leader of partition 0; others: {others:?}");
    while froze_at.elapsed() < FROZEN {
        take_printed();
        std::thread::sleep(Duration::from_millis(50));
    }
    let until = Instant::now();
    drop(thaw);

    // Anything answered before the freeze is in the report within a
    // second; later acknowledgements of partition 0 come from its new
    // leader.
    let after = froze_at + Duration::from_secs(1);
    let bound = SESSION + REQUEST_TIMEOUT + SLACK;
    let acked = acked.lock().unwrap().clone();
    let printed = printed.lock().unwrap().clone();
    let resumed = first_after(&acked[&0], after).map(|t| t - froze_at);
    let read_again = printed
        .get(&0)
        .and_then(|times| first_after(times, after))
        .map(|t| t - froze_at);
    let pauses: Vec<(u32, Duration)> = others
        .iter()
        .map(|&p| (p, longest_gap(&acked[&p], froze_at, until)))
        .collect();
    let all_printed: Vec<Instant> = {
        let mut all: Vec<Instant> = printed.values().flatten().copied().collect();
        all.sort();
        all
    };
    let consumer_pause = longest_gap(&all_printed, froze_at, until);
    eprintln!(
        "partition 0 acknowledged again after {resumed:?}, read again after {read_again:?}; \
         longest pauses of the others: {pauses:?}, of the consumer: {consumer_pause:?}"
    );
    let fail = |why: String| -> ! {
        eprintln!("producer: {:?}", producer.stderr_lines());
        eprintln!("consumer: {:?}", consumer.stderr_lines());
        cluster.fail(&why)
    };
    if resumed.is_none_or(|r| r > bound) {
        fail(format!(
            "partition 0 acknowledged again after {resumed:?}, not within {bound:?}"
        ));
    }
    if read_again.is_none_or(|r| r > bound) {
        fail(format!(
            "partition 0 read again after {read_again:?}, not within {bound:?}"
        ));
    }
    for (p, pause) in &pauses {
        if *pause > PAUSE_MAX {
            fail(format!(
                "partition {p}, led elsewhere, went {pause:?} without an acknowledgement"
            ));
        }
    }
    if consumer_pause > PAUSE_MAX {
        fail(format!(
            "the consumer printed nothing for {consumer_pause:?}"
        ));
    }
    stop.store(true, Ordering::Relaxed);
    feeder.finish();
    follower.join().unwrap();
}

/// `BIN ARGS...`: how long it took (killed after 10 s), and its output.
fn timed(bin: &str, args: &[&str]) -> (Duration, std::process::Output) {
    let started = Instant::now();
    let out = common::bin(bin)
        .args(args)
        .env("NO_COLOR", "1")
        .timeout(Duration::from_secs(10))
        .output()
        .unwrap();
    (started.elapsed(), out)
}

/// The cells of the table rows of `tables` that have `cells` cells.
fn table_rows(tables: &str, cells: usize) -> Vec<Vec<String>> {
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

/// One run of a tool that looks at the cluster: its output, checked to
/// have ended well within [`LOOK_MAX`].
struct Look {
    stdout: String,
    stderr: String,
}

impl Look {
    /// Runs `BIN ARGS...` (the registry's spec appended), failing the test
    /// when it took longer than [`LOOK_MAX`] or did not succeed.
    fn run(cluster: &Cluster, bin: &str, args: &[&str]) -> Look {
        let mut all = args.to_vec();
        all.extend(["--registry", cluster.spec()]);
        let (took, out) = timed(bin, &all);
        let look = Look {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        let what = format!("{bin} {}", all.join(" "));
        if took > LOOK_MAX || !out.status.success() {
            look.fail(
                cluster,
                format!("{what} took {took:?} and ended {}", out.status),
            );
        }
        eprintln!("{what} took {took:?}:\n{}{}", look.stdout, look.stderr);
        look
    }

    /// Fails the test with `why` and this look's output.
    fn fail(&self, cluster: &Cluster, why: String) -> ! {
        cluster.fail(&format!(
            "{why}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        ))
    }

    /// The table rows of `cells` cells, each broker of `cluster` among
    /// those of `broker_cells`, and each partition of [`LOOKED_AT`] with
    /// its row (topic and partition first).
    fn rows(&self, cluster: &Cluster, broker_cells: usize, cells: usize) -> Vec<Vec<String>> {
        let brokers = table_rows(&self.stdout, broker_cells);
        for slot in 0..cluster.len() {
            if !brokers.iter().any(|r| r[0] == cluster.id(slot)) {
                self.fail(
                    cluster,
                    format!("broker {} is not listed", cluster.id(slot)),
                );
            }
        }
        let rows = table_rows(&self.stdout, cells);
        for topic in LOOKED_AT {
            for p in 0..3 {
                if !rows.iter().any(|r| r[0] == topic && r[1] == p.to_string()) {
                    self.fail(cluster, format!("no row for {topic}-{p}"));
                }
            }
        }
        rows
    }

    /// The JSON lines of stdout.
    fn json(&self) -> Vec<serde_json::Value> {
        (self.stdout.lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Fails unless stderr says once that `leader` did not answer.
    fn says_once_unanswered(&self, cluster: &Cluster, leader: &str) {
        let said = format!("% broker {leader} did not answer within 1s");
        if self.stderr.lines().filter(|l| l.starts_with(&said)).count() != 1 {
            self.fail(cluster, format!("stderr does not say {said:?} once"));
        }
    }
}

/// The bound on a look at a cluster with a frozen leader (a dump, a
/// listing): far below the request timeout a frozen broker used to cost
/// it, far above the second it may wait for one.
const LOOK_MAX: Duration = Duration::from_secs(3);

/// The topics of [`FrozenLeader`]'s cluster, 3 partitions each.
const LOOKED_AT: [&str; 2] = ["t", "u"];

/// An RF 3 cluster whose session timeout (60 s) keeps a frozen broker
/// registered, with 30 records in each of [`LOOKED_AT`] and every ISR
/// full, then the leader of t-0 frozen (thawed when this is dropped).
struct FrozenLeader {
    cluster: Cluster,
    /// The frozen broker's id.
    leader: String,
    /// The partitions it leads, as (topic, partition).
    led: Vec<(String, u32)>,
    slot: usize,
}

impl FrozenLeader {
    /// `None` where the test cannot run here.
    fn start() -> Option<FrozenLeader> {
        let args = [
            "--replication-factor",
            "3",
            "--partitions",
            "3",
            "--session-timeout",
            "60s",
        ];
        let cluster = Cluster::start(Backend::Dir, 3, &args)?;
        let input: String = (0..30).map(|i| format!("{i}\n")).collect();
        for topic in LOOKED_AT {
            common::eventually(
                &format!("records delivered to {topic}"),
                Duration::from_secs(60),
                || {
                    common::bin("klog-produce")
                        .args(["--registry", cluster.spec(), "-t", topic, "--acks", "all"])
                        .args(["-q", "--message-timeout", "10s"])
                        .write_stdin(input.clone())
                        .timeout(Duration::from_secs(60))
                        .output()
                        .unwrap()
                        .status
                        .success()
                },
            );
            for p in 0..3 {
                cluster.wait_full_isr(topic, p, Duration::from_secs(30));
            }
        }
        let leader = cluster.state("t", 0).unwrap().leader.unwrap();
        let led: Vec<(String, u32)> = LOOKED_AT
            .iter()
            .flat_map(|t| (0..3).map(move |p| (t.to_string(), p)))
            .filter(|(t, p)| cluster.state(t, *p).unwrap().leader.as_deref() == Some(&leader))
            .collect();
        let slot = cluster.slot_of(&leader);
        cluster.freeze(slot);
        eprintln!("froze {leader}, leader of {led:?}");
        Some(FrozenLeader {
            cluster,
            leader,
            led,
            slot,
        })
    }
}

impl Drop for FrozenLeader {
    fn drop(&mut self) {
        self.cluster.thaw(self.slot);
    }
}

#[test]
fn klog_dump_registry_answers_within_seconds_with_a_frozen_leader_and_marks_it() {
    let Some(frozen) = FrozenLeader::start() else {
        return;
    };
    let FrozenLeader {
        cluster,
        leader,
        led,
        ..
    } = &frozen;
    let look = Look::run(cluster, "klog-dump", &[]);
    for row in look.rows(cluster, 4, 7) {
        let (topic, p, high_watermark) = (&row[0], &row[1], &row[6]);
        if !LOOKED_AT.contains(&topic.as_str()) {
            continue;
        }
        let at = (topic.clone(), p.parse::<u32>().unwrap());
        if led.contains(&at) {
            let said = format!("? ({leader} did not answer within 1s)");
            if *high_watermark != said {
                look.fail(
                    cluster,
                    format!("{topic}-{p}'s high watermark is {high_watermark:?}, not {said:?}"),
                );
            }
        } else if high_watermark.parse::<u64>().is_err() {
            look.fail(
                cluster,
                format!("{topic}-{p}, led by a live broker, has no high watermark"),
            );
        }
    }
    look.says_once_unanswered(cluster, leader);

    let look = Look::run(cluster, "klog-dump", &["--json"]);
    let lines = look.json();
    for line in lines.iter().filter(|l| l["type"] == "broker") {
        let answered = &line["answered"];
        let wanted = line["id"] != leader.as_str();
        if *answered != wanted {
            look.fail(
                cluster,
                format!("broker line {line}: answered should be {wanted}"),
            );
        }
    }
    for line in lines.iter().filter(|l| l["type"] == "partition") {
        let at = (
            line["topic"].as_str().unwrap().to_string(),
            line["partition"].as_u64().unwrap() as u32,
        );
        if led.contains(&at) {
            let why = format!("{leader} did not answer within 1s");
            if !line["high_watermark"].is_null() || line["high_watermark_error"] != why.as_str() {
                look.fail(
                    cluster,
                    format!("partition line {line}: no high watermark, because {why:?}"),
                );
            }
        } else if !line["high_watermark"].is_u64() {
            look.fail(
                cluster,
                format!("partition line {line}, led by a live broker, has no high watermark"),
            );
        }
    }
}

#[test]
fn klog_consume_list_registry_answers_within_seconds_with_a_frozen_leader_and_marks_it() {
    let Some(frozen) = FrozenLeader::start() else {
        return;
    };
    let FrozenLeader {
        cluster,
        leader,
        led,
        ..
    } = &frozen;
    let why = format!("{leader} did not answer within 1s");
    let look = Look::run(cluster, "klog-consume", &["-L"]);
    // topic, partition, leader, replicas, isr, start, end
    for row in look.rows(cluster, 2, 7) {
        let (topic, p, start, end) = (&row[0], &row[1], &row[5], &row[6]);
        if !LOOKED_AT.contains(&topic.as_str()) {
            continue;
        }
        let at = (topic.clone(), p.parse::<u32>().unwrap());
        if led.contains(&at) {
            if (start.as_str(), end.as_str()) != ("-", "unreachable") || row[2] != *leader {
                look.fail(
                    cluster,
                    format!("{topic}-{p} is not marked unreachable: {row:?}"),
                );
            }
        } else if start.parse::<u64>().is_err() || end.parse::<u64>().is_err() {
            look.fail(
                cluster,
                format!("{topic}-{p}, led by a live broker, has no offsets: {row:?}"),
            );
        }
    }
    look.says_once_unanswered(cluster, leader);

    let look = Look::run(cluster, "klog-consume", &["-L", "-J"]);
    let lines = look.json();
    for line in lines.iter().filter(|l| l["type"] == "broker") {
        let wanted = line["id"] != leader.as_str();
        if line["answered"] != wanted {
            look.fail(
                cluster,
                format!("broker line {line}: answered should be {wanted}"),
            );
        }
    }
    let partitions: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["type"] == "partition").collect();
    if partitions.len() != 6 {
        look.fail(
            cluster,
            format!("{} partition lines, not 6", partitions.len()),
        );
    }
    for line in partitions {
        let at = (
            line["topic"].as_str().unwrap().to_string(),
            line["partition"].as_u64().unwrap() as u32,
        );
        if led.contains(&at) {
            if line["state"] != "unreachable"
                || !line["end_offset"].is_null()
                || line["error"] != why.as_str()
            {
                look.fail(
                    cluster,
                    format!("partition line {line}: unreachable, no offsets, because {why:?}"),
                );
            }
        } else if line["state"] != "online"
            || !line["end_offset"].is_u64()
            || !line["error"].is_null()
        {
            look.fail(
                cluster,
                format!("partition line {line}, led by a live broker, is not online with offsets"),
            );
        }
    }

    // klog-produce -L is the same listing.
    Look::run(cluster, "klog-produce", &["-L", "-q"]);
}
