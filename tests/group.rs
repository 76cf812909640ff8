//! Consumer groups through the real binaries, on both registry backends:
//! brokers registered in a registry (a directory, or a chroot of a real
//! ZooKeeper server), and `klog-consume -G` members joining, dying and
//! sharing partitions. Each scenario runs once per backend (its
//! `..._on_a_directory` and `..._on_zookeeper` tests; the second says
//! `skipped:` when ZooKeeper is not installed), and looks at what the
//! binaries left in the registry through the `Registry` trait. Damaged
//! registry files are the directory's own; garbage znodes ZooKeeper's.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::registry::{put_znode, Backend, TestRegistry};
use common::{bin, lines, produce_to, BrokerProc, Proc};
use predicates::prelude::*;

const WAIT: Duration = Duration::from_secs(30);

/// Runs each scenario (a function of the backend) as two tests: one on a
/// directory registry, one on a ZooKeeper server of its own.
macro_rules! on_both_backends {
    ($($scenario:ident: $on_dir:ident, $on_zk:ident;)+) => {$(
        #[test]
        fn $on_dir() {
            $scenario(Backend::Dir);
        }

        #[test]
        fn $on_zk() {
            $scenario(Backend::Zk);
        }
    )+};
}

on_both_backends! {
    partitions_share_out_two_two_then_two_one_one:
        partitions_share_out_two_two_then_two_one_one_on_a_directory,
        partitions_share_out_two_two_then_two_one_one_on_zookeeper;
    a_killed_members_partitions_move_and_nothing_is_lost:
        a_killed_members_partitions_move_and_nothing_is_lost_on_a_directory,
        a_killed_members_partitions_move_and_nothing_is_lost_on_zookeeper;
    two_groups_each_receive_every_record:
        two_groups_each_receive_every_record_on_a_directory,
        two_groups_each_receive_every_record_on_zookeeper;
    two_brokers_on_one_registry_share_a_topic:
        two_brokers_on_one_registry_share_a_topic_on_a_directory,
        two_brokers_on_one_registry_share_a_topic_on_zookeeper;
    a_silent_member_is_taken_over_and_rejoins_when_it_wakes:
        a_silent_member_is_taken_over_and_rejoins_when_it_wakes_on_a_directory,
        a_silent_member_is_taken_over_and_rejoins_when_it_wakes_on_zookeeper;
    a_group_commits_only_what_reached_stdout:
        a_group_commits_only_what_reached_stdout_on_a_directory,
        a_group_commits_only_what_reached_stdout_on_zookeeper;
    a_committed_offset_past_the_log_end_is_reset_by_the_o_policy:
        a_committed_offset_past_the_log_end_is_reset_by_the_o_policy_on_a_directory,
        a_committed_offset_past_the_log_end_is_reset_by_the_o_policy_on_zookeeper;
    reset_offsets_sets_the_groups_offsets_only_while_it_has_no_live_member:
        reset_offsets_sets_the_groups_offsets_only_while_it_has_no_live_member_on_a_directory,
        reset_offsets_sets_the_groups_offsets_only_while_it_has_no_live_member_on_zookeeper;
    o_stored_without_commits_names_the_partitions_that_have_none:
        o_stored_without_commits_names_the_partitions_that_have_none_on_a_directory,
        o_stored_without_commits_names_the_partitions_that_have_none_on_zookeeper;
    a_group_on_a_topic_not_in_the_registry_says_so_or_waits_for_it:
        a_group_on_a_topic_not_in_the_registry_says_so_or_waits_for_it_on_a_directory,
        a_group_on_a_topic_not_in_the_registry_says_so_or_waits_for_it_on_zookeeper;
}

/// A broker on `dir/data` registered in `registry`, creating topics of
/// `partitions` partitions.
fn registered_broker(
    registry: &TestRegistry,
    dir: &std::path::Path,
    partitions: u32,
) -> BrokerProc {
    BrokerProc::start(
        &dir.join("data"),
        &[
            "--registry",
            registry.spec(),
            "--partitions",
            &partitions.to_string(),
        ],
    )
}

/// Reads `topic` to its end as a member of `group`, returning the records
/// (numbers) it printed, sorted.
fn read_as_group(reg: &str, group: &str, extra: &[&str]) -> Vec<u64> {
    let out = bin("klog-consume")
        .args(["-t", "t", "-G", group, "--registry", reg, "-e", "-q"])
        .args(extra)
        .timeout(WAIT)
        .assert()
        .success();
    let mut got: Vec<u64> = String::from_utf8_lossy(&out.get_output().stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    got.sort_unstable();
    got
}

/// A member of `group`, with a session timeout of 1s unless `extra` names
/// one.
fn member(registry: &str, group: &str, extra: &[&str]) -> Proc {
    let mut args = vec!["-t", "t", "-G", group, "--registry", registry, "-u"];
    if !extra.contains(&"--session-timeout") {
        args.extend_from_slice(&["--session-timeout", "1s"]);
    }
    args.extend_from_slice(extra);
    Proc::spawn("klog-consume", &args)
}

/// The partitions a member's last "owns" line names.
fn owned(line: &str) -> BTreeSet<u32> {
    line.split("t [")
        .skip(1)
        .filter_map(|s| s.split(']').next()?.parse().ok())
        .collect()
}

/// The member an "owns" line is about.
fn owner_named(line: &str) -> &str {
    line.split("member ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap_or_default()
}

fn owns_count(n: usize) -> impl Fn(&str) -> bool {
    move |l: &str| owned(l).len() == n
}

fn partitions_share_out_two_two_then_two_one_one(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 4);
    let reg = registry.spec();
    produce_to(&broker.addr, "t", &lines(100), &[]);
    let a = member(reg, "g", &[]);
    a.wait_stderr("owns", owns_count(4), WAIT);
    let b = member(reg, "g", &[]);
    let la = a.wait_stderr("owns", owns_count(2), WAIT);
    let lb = b.wait_stderr("owns", owns_count(2), WAIT);
    assert!(owned(&la).is_disjoint(&owned(&lb)), "{la} / {lb}");
    let c = member(reg, "g", &[]);
    // Member ids are host-pid-nanos: c's sorts last as a rule, first when
    // the pids passed a power of ten (c then keeps two).
    let one_or_two = |l: &str| (1..=2).contains(&owned(l).len());
    let lc = c.wait_stderr("owns", one_or_two, WAIT);
    // 2/1/1: the first member in id order keeps two, and the registry says
    // so. A member's last line may predate the rebalance it is in (it let
    // its partitions go and has not claimed them again yet): wait until
    // each partition's owner in the registry is the member whose last line
    // names it.
    let r = registry.open_read_only();
    let deadline = Instant::now() + WAIT;
    loop {
        let shares: Vec<(String, BTreeSet<u32>)> = [&a, &b, &c]
            .iter()
            .map(|m| {
                let line = m
                    .stderr_lines()
                    .into_iter()
                    .rfind(|l| l.contains("owns"))
                    .unwrap();
                (owner_named(&line).to_string(), owned(&line))
            })
            .collect();
        let mut counts: Vec<usize> = shares.iter().map(|(_, s)| s.len()).collect();
        counts.sort_unstable();
        let union: BTreeSet<u32> = shares.iter().flat_map(|(_, s)| s).copied().collect();
        // Each partition has exactly one owner in the registry: the member
        // that consumes it.
        let owners: Vec<Option<String>> = (0..4)
            .map(|p| r.owner("g", "t", p).map(|o| o.member))
            .collect();
        let agree = shares.iter().all(|(member, partitions)| {
            partitions
                .iter()
                .all(|&p| owners[p as usize].as_deref() == Some(member.as_str()))
        });
        if counts == [1, 1, 2] && union.len() == 4 && agree {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{shares:?}, in the registry {owners:?} ({lc})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kill -9 a member: its partitions move to the other within its session
/// timeout and 2 s (at once on a directory, whose locks die with their
/// process; after the session timeout on ZooKeeper), and nothing is lost.
fn a_killed_members_partitions_move_and_nothing_is_lost(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 2);
    let reg = registry.spec();
    // Paced so that it is deterministic: the first member reads and
    // commits a first part, is frozen, and only then comes the rest.
    let first_part: String = (0..1000).map(|i| format!("r{i}\n")).collect();
    produce_to(&broker.addr, "t", &first_part, &[]);
    // The killed member's session outlives its freeze below, and bounds
    // how long its partitions take to move once it is dead.
    let session = Duration::from_secs(8);
    let fmt = [
        "-f",
        "%p %o %s\\n",
        "--commit-interval",
        "50ms",
        "--session-timeout",
        "8s",
    ];
    let mut a = member(reg, "g", &fmt);
    a.wait_stderr("owns", owns_count(2), WAIT);
    let first = a.take_lines(1000, WAIT);
    let r = registry.offsets();
    let deadline = Instant::now() + WAIT;
    let committed = || -> u64 {
        (0..2)
            .map(|p| r.committed("g", "t", p).unwrap().unwrap_or(0))
            .sum()
    };
    while committed() < 1000 {
        assert!(Instant::now() < deadline, "a committed {}", committed());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Freeze it (alive, within its session), produce the rest, let a
    // second member join (it waits: the first still owns everything),
    // then kill -9 the first.
    signal(&a, nix::sys::signal::Signal::SIGSTOP);
    let frozen = Instant::now();
    let _continue = Continue(vec![a.child.id()]);
    let rest: String = (1000..200_000).map(|i| format!("r{i}\n")).collect();
    produce_to(&broker.addr, "t", &rest, &[]);
    let mut with_exit = fmt.to_vec();
    with_exit.push("-e");
    let b = member(reg, "g", &with_exit);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        b.stderr_lines().iter().all(|l| !l.contains("owns t")),
        "{:?}",
        b.stderr_lines()
    );
    assert!(
        frozen.elapsed() < session,
        "the first member was frozen for {:?}, past its session: the scenario is void",
        frozen.elapsed()
    );
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let killed = Instant::now();
    // The survivor takes both partitions in time and reads to the end.
    b.wait_stderr("owns", owns_count(2), session + WAIT);
    let moved = killed.elapsed();
    assert!(
        moved <= session + Duration::from_secs(2),
        "the killed member's partitions moved after {moved:?}"
    );
    let printed_b = b.all_lines(Duration::from_secs(120));
    let printed_a: Vec<String> = first.into_iter().chain(a.all_lines(WAIT)).collect();
    let starts: BTreeMap<u32, u64> = {
        let line = b
            .stderr_lines()
            .into_iter()
            .rfind(|l| l.contains("owns"))
            .unwrap();
        line.split("t [")
            .skip(1)
            .map(|s| {
                let p: u32 = s.split(']').next().unwrap().parse().unwrap();
                let o: u64 = s
                    .split("from offset ")
                    .nth(1)
                    .unwrap()
                    .split(',')
                    .next()
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                (p, o)
            })
            .collect()
    };
    let parse = |l: &String| {
        let mut f = l.split(' ');
        let p: u32 = f.next().unwrap().parse().unwrap();
        let o: u64 = f.next().unwrap().parse().unwrap();
        (p, o, f.next().unwrap().to_string())
    };
    let from_a: BTreeSet<(u32, u64)> = printed_a.iter().map(|l| (parse(l).0, parse(l).1)).collect();
    let from_b: BTreeSet<(u32, u64)> = printed_b.iter().map(|l| (parse(l).0, parse(l).1)).collect();
    let union: BTreeSet<(u32, u64)> = from_a.union(&from_b).copied().collect();
    assert_eq!(union.len(), 200_000, "every record reached the group");
    // Duplicates only at or after where the survivor resumed: the last
    // offset the killed member committed.
    assert!(
        starts.values().any(|&o| o > 0),
        "the killed member had committed: {starts:?}"
    );
    assert_eq!(
        from_a.len(),
        1000,
        "the killed member read the first part only"
    );
    for &(p, o) in from_a.intersection(&from_b) {
        assert!(
            o >= starts[&p],
            "duplicate {p}/{o} before the committed {}",
            starts[&p]
        );
    }
}

fn two_groups_each_receive_every_record(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 3);
    let reg = registry.spec();
    produce_to(&broker.addr, "t", &lines(3000), &[]);
    for group in ["one", "two"] {
        assert_eq!(
            read_as_group(reg, group, &[]),
            (1..=3000).collect::<Vec<_>>(),
            "group {group}"
        );
    }
    // Committed at exit: running again finds nothing new.
    assert!(read_as_group(reg, "one", &["-o", "stored"]).is_empty());
    // The registry shows both groups at the end of every partition.
    let out = bin("klog-dump")
        .args(["--registry", reg, "--json"])
        .assert()
        .success();
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.get_output().stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.iter().filter(|v| v["type"] == "broker").count(), 1);
    let offsets: Vec<_> = lines.iter().filter(|v| v["type"] == "offset").collect();
    assert_eq!(offsets.len(), 6, "{lines:?}");
    assert!(
        offsets.iter().all(|v| v["lag"] == 0 && v["end"] == 1000),
        "{offsets:?}"
    );
    bin("klog-dump")
        .args(["--registry", reg])
        .assert()
        .success()
        .stdout(predicate::str::contains("committed").and(predicate::str::contains("lag")));
}

/// Consuming `topic` as a member of group g fails with exit code 1 and an
/// error that names `name` and says `reason`.
fn refused_naming(reg: &str, (topic, group): (&str, &str), name: &str, reason: &str) {
    bin("klog-consume")
        .args(["-t", topic, "-G", group, "--registry", reg, "-e"])
        .timeout(WAIT)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(name).and(predicate::str::contains(reason)));
}

/// `klog-dump --registry` shows a damaged registry without panicking.
fn dump_does_not_panic(reg: &str) {
    let out = bin("klog-dump")
        .args(["--registry", reg])
        .timeout(WAIT)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 1)) && !stderr.contains("panicked"),
        "{:?}: {stderr}",
        out.status
    );
}

/// The journal of a partition's committed offsets in the registry, whose
/// offsets directory is `dir`: in the directory of the highest claim
/// generation (`0` when there is none yet, created).
fn offset_file(dir: &std::path::Path) -> std::path::PathBuf {
    let top = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
                .max()
        })
        .unwrap_or_default()
        .unwrap_or(0);
    let generation = dir.join(top.to_string());
    std::fs::create_dir_all(&generation).unwrap();
    generation.join("offsets.log")
}

/// Damaged registry files, the directory backend's own failure (see
/// `garbage_znodes_are_errors_or_ignored_never_a_panic` for ZooKeeper's):
/// a member entry that is not JSON, or whose process is gone, is ignored;
/// a committed offset or a placement that does not parse is an error
/// naming its file.
#[test]
fn damaged_registry_files_are_errors_or_ignored_never_a_panic() {
    let registry = TestRegistry::start(Backend::Dir).expect("a directory registry");
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 1);
    let reg = registry.spec();
    let files = registry.dir().unwrap();
    produce_to(&broker.addr, "t", &lines(10), &[]);
    // A member entry that is not JSON, and one whose process is gone.
    let members = files.join("consumers/g");
    std::fs::create_dir_all(&members).unwrap();
    std::fs::write(members.join("ghost.json"), b"{not json").unwrap();
    std::fs::write(members.join("ghost.lock"), b"").unwrap();
    let out = bin("klog-consume")
        .args(["-t", "t", "-G", "g", "--registry", reg, "-e", "-q"])
        .timeout(WAIT)
        .assert()
        .success();
    assert_eq!(out.get_output().stdout.len(), lines(10).len());
    // A committed offset in the registry that does not parse, of a group
    // not carried over to the offsets topic yet: an error naming the file
    // (the broker refuses to carry it over).
    for (group, bad) in [
        ("h0", &b""[..]),
        ("h1", b"klog-offset 1\n"),
        ("h", b"garbage"),
    ] {
        let offsets = format!("offsets/{group}/t-0");
        std::fs::write(offset_file(&files.join(&offsets)), bad).unwrap();
        refused_naming(reg, ("t", group), &offsets, "not a committed offset");
    }
    // The operator does what the hint says, and the group reads again.
    let hint = "set it again (klog-consume -t TOPIC -G GROUP --registry REGISTRY --reset-offsets";
    bin("klog-consume")
        .args(["-t", "t", "-G", "h", "--registry", reg, "-e"])
        .timeout(WAIT)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(hint));
    bin("klog-consume")
        .args(["-t", "t", "-G", "h", "--registry", reg])
        .args(["--reset-offsets", "beginning"])
        .timeout(WAIT)
        .assert()
        .success()
        .stderr(predicate::str::contains("the reset replaces it"));
    let out = bin("klog-consume")
        .args(["-t", "t", "-G", "h", "--registry", reg, "-e", "-q"])
        .timeout(WAIT)
        .assert()
        .success();
    assert_eq!(out.get_output().stdout.len(), lines(10).len());
    std::fs::write(offset_file(&files.join("offsets/g/t-0")), b"garbage").unwrap();
    dump_does_not_panic(reg);
    // A placement that does not parse: an error naming the file.
    std::fs::create_dir_all(files.join("topics")).unwrap();
    std::fs::write(files.join("topics/u.json"), b"{not json").unwrap();
    refused_naming(reg, ("u", "g"), "topics/u.json", "not a placement");
    // -o stored without a group is a usage mistake, said clearly.
    bin("klog-consume")
        .args(["-b", &broker.addr, "-t", "t", "-o", "stored", "-e"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("needs a group (-G"));
}

/// Garbage znodes, written by no klog process, ZooKeeper's counterpart of
/// damaged files: a member or a broker whose JSON does not parse is
/// ignored; a committed offset or a placement that does not parse is an
/// error naming its znode.
#[test]
fn garbage_znodes_are_errors_or_ignored_never_a_panic() {
    let Some(registry) = TestRegistry::start(Backend::Zk) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 1);
    let reg = registry.spec();
    produce_to(&broker.addr, "t", &lines(10), &[]);
    let session = registry.zk_session().unwrap();
    put_znode(&session, "/consumers/g/ids/ghost", b"{not json");
    put_znode(&session, "/brokers/ids/ghost", b"{not json");
    let out = bin("klog-consume")
        .args(["-t", "t", "-G", "g", "--registry", reg, "-e", "-q"])
        .timeout(WAIT)
        .assert()
        .success();
    assert_eq!(out.get_output().stdout.len(), lines(10).len());
    // A committed offset that does not parse, of a group not carried over
    // to the offsets topic yet: an error naming the znode.
    for (group, bad) in [
        ("h0", &b""[..]),
        ("h1", b"klog-offset 1\n"),
        ("h2", b"garbage"),
    ] {
        put_znode(&session, &format!("/consumers/{group}/offsets/t/0"), bad);
        let znode = format!("{reg}/consumers/{group}/offsets/t/0");
        refused_naming(reg, ("t", group), &znode, "not a committed offset");
    }
    dump_does_not_panic(reg);
    // A placement that does not parse: an error naming the znode.
    put_znode(&session, "/brokers/topics/u", b"{not json");
    refused_naming(
        reg,
        ("u", "g"),
        &format!("{reg}/brokers/topics/u"),
        "not a placement",
    );
}

fn two_brokers_on_one_registry_share_a_topic(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let reg = registry.spec();
    let one = BrokerProc::start(
        &dir.path().join("one"),
        &["--registry", reg, "--partitions", "4"],
    );
    let two = BrokerProc::start(
        &dir.path().join("two"),
        &["--registry", reg, "--partitions", "4"],
    );
    // Produced through the registry: each record goes to its partition's broker.
    bin("klog-produce")
        .args(["--registry", reg, "-t", "t", "-q"])
        .write_stdin(lines(10_000))
        .assert()
        .success();
    let r = registry.open_read_only();
    let placement = r.placement("t").unwrap().unwrap();
    assert_eq!(placement.brokers.len(), 4);
    let brokers = r.brokers().unwrap();
    assert_eq!(brokers.len(), 2);
    for b in &brokers {
        assert_eq!(b.topics["t"].len(), 2, "{b:?}");
    }
    // Both brokers hold records.
    for (b, data) in [(&one, "one"), (&two, "two")] {
        let held: u64 = (0..4)
            .filter_map(|p| {
                let dir = dir.path().join(data).join(format!("t-{p}"));
                std::fs::metadata(dir.join(".lock")).ok()?;
                Some(
                    std::fs::metadata(dir.join("00000000000000000000.log"))
                        .ok()?
                        .len(),
                )
            })
            .sum();
        assert!(held > 10_000, "broker {} holds {held} bytes", b.addr);
    }
    // A broker never serves a partition placed on the other.
    let elsewhere = (0..4)
        .find(|&p| {
            brokers
                .iter()
                .find(|b| b.id == placement.brokers[p])
                .unwrap()
                .addr()
                != one.addr
        })
        .unwrap();
    bin("klog-consume")
        .args([
            "-b",
            &one.addr,
            "-t",
            "t",
            "-p",
            &elsewhere.to_string(),
            "-e",
        ])
        .timeout(WAIT)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("partition_elsewhere"));
    // Read back through the registry, and by one group.
    let mut all: Vec<u64> = common::consume_registry(reg, "t", &[])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (1..=10_000).collect::<Vec<_>>());
    assert_eq!(
        read_as_group(reg, "g", &[]),
        (1..=10_000).collect::<Vec<_>>()
    );
    drop(two);
}

/// Continues every child it names when the test ends however it ends, so
/// that a child stopped with SIGSTOP is never left stopped; each `Proc`
/// then kills its child. Declared after the `Proc`s, it is dropped first.
struct Continue(Vec<u32>);

impl Drop for Continue {
    fn drop(&mut self) {
        for &pid in &self.0 {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
        }
    }
}

/// Sets a flag when the test ends however it ends (stops a helper thread).
struct Raise(Arc<AtomicBool>);

impl Drop for Raise {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn signal(proc: &Proc, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(proc.child.id() as i32);
    nix::sys::signal::kill(pid, signal).unwrap();
}

/// Reads the group's committed offsets of partitions 0 and 1 every 20 ms
/// until `stop`, through the library, read-only.
fn sample_offsets(
    registry: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<[Option<u64>; 2]>> {
    std::thread::spawn(move || {
        let r = klog::coord::offsets_topic::open_read_only(&registry).unwrap();
        let mut samples = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let at = |p| r.committed("g", "t", p).unwrap();
            samples.push([at(0), at(1)]);
            std::thread::sleep(Duration::from_millis(20));
        }
        samples
    })
}

/// Issues 10 and 12: a member that is alive but silent (SIGSTOP) for twice
/// its session timeout (its lease runs out on a directory, its session
/// expires on ZooKeeper) loses its partitions to the other within the
/// timeout and 2 s; when it wakes it drops them without committing and
/// rejoins, still running; every record is delivered and committed offsets
/// never go back.
fn a_silent_member_is_taken_over_and_rejoins_when_it_wakes(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 2);
    let reg = registry.spec();
    produce_to(&broker.addr, "t", "first\n", &["-p", "0"]);
    produce_to(&broker.addr, "t", "first\n", &["-p", "1"]);
    let session = Duration::from_secs(2);
    let args = [
        "--session-timeout",
        "2s",
        "--commit-interval",
        "200ms",
        "-f",
        "%p %o\\n",
    ];
    let spawn = || {
        let mut all = vec!["-t", "t", "-G", "g", "--registry", reg, "-u"];
        all.extend_from_slice(&args);
        Proc::spawn("klog-consume", &all)
    };
    let mut a = spawn();
    a.wait_stderr("owns", owns_count(2), WAIT);
    let mut b = spawn();
    a.wait_stderr("owns", owns_count(1), WAIT);
    b.wait_stderr("owns", owns_count(1), WAIT);
    let _continue = Continue(vec![a.child.id(), b.child.id()]);
    // Records flow all along: 40 records every 100 ms, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let _stop = Raise(Arc::clone(&stop));
    let produced = Arc::new(Mutex::new(2u64));
    let producer = {
        let (addr, stop, produced) = (
            broker.addr.clone(),
            Arc::clone(&stop),
            Arc::clone(&produced),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                produce_to(&addr, "t", &lines(40), &[]);
                *produced.lock().unwrap() += 40;
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let sampling = Arc::new(AtomicBool::new(false));
    let _sampling = Raise(Arc::clone(&sampling));
    let sampler = sample_offsets(reg.to_string(), Arc::clone(&sampling));
    std::thread::sleep(Duration::from_millis(500));
    // b falls silent for twice its session timeout.
    signal(&b, nix::sys::signal::Signal::SIGSTOP);
    let stopped = Instant::now();
    a.wait_stderr("owns", owns_count(2), session + Duration::from_secs(4));
    let took_over = stopped.elapsed();
    assert!(
        took_over <= session + Duration::from_secs(2),
        "a took over after {took_over:?}"
    );
    std::thread::sleep((2 * session).saturating_sub(stopped.elapsed()));
    signal(&b, nix::sys::signal::Signal::SIGCONT);
    b.wait_stderr("silent longer than its session timeout", |_| true, WAIT);
    // b rejoins and the two share the partitions again.
    b.wait_stderr("owns", owns_count(1), WAIT);
    a.wait_stderr("owns", owns_count(1), WAIT);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let total = *produced.lock().unwrap();
    // Every record reaches the group.
    let mut seen: BTreeSet<(u32, u64)> = BTreeSet::new();
    let deadline = Instant::now() + WAIT;
    while (seen.len() as u64) < total {
        assert!(
            Instant::now() < deadline,
            "{} of {total} records delivered",
            seen.len()
        );
        for m in [&a, &b] {
            while let Ok(line) = m.lines.try_recv() {
                let (p, o) = line.split_once(' ').unwrap();
                seen.insert((p.parse().unwrap(), o.parse().unwrap()));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(seen.len() as u64, total);
    // Neither member gave up.
    for (name, m) in [("a", &mut a), ("b", &mut b)] {
        let exited = m.child.try_wait().unwrap();
        assert!(
            exited.is_none(),
            "{name}: {exited:?} {:?}",
            m.stderr_lines()
        );
    }
    // Committed offsets never went back.
    std::thread::sleep(Duration::from_millis(500));
    sampling.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap();
    assert!(samples.len() > 100, "{} samples", samples.len());
    for p in 0..2 {
        let series: Vec<u64> = samples.iter().filter_map(|s| s[p]).collect();
        assert!(
            series.windows(2).all(|w| w[0] <= w[1]),
            "partition {p}'s committed offset went back: {series:?}"
        );
        assert!(
            series.last() > Some(&1),
            "partition {p} was committed: {series:?}"
        );
    }
}

/// A child process that is killed when the test ends however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 11: a group commits only records that reached stdout. The member
/// reads everything into its output buffer and then blocks writing it to
/// a pipe nobody reads; killed there, the group's committed offset must
/// not pass what the pipe received.
fn a_group_commits_only_what_reached_stdout(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 1);
    let reg = registry.spec();
    // 1500 lines of about 100 bytes: more than a pipe holds (64 KiB),
    // less than the member's output buffer (256 KiB).
    let input: String = (0..1500).map(|i| format!("{i:099}\n")).collect();
    produce_to(&broker.addr, "t", &input, &[]);
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-consume"))
        .args(["-t", "t", "-G", "g", "--registry", reg, "-e", "-q"])
        .args(["--commit-interval", "1h", "-f", "%o %s\\n"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    std::thread::sleep(Duration::from_secs(3));
    let r = registry.offsets();
    let committed = r.committed("g", "t", 0).unwrap().unwrap_or(0);
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.0.stdout.take().unwrap(), &mut out).unwrap();
    let delivered = out.lines().count() as u64;
    assert!(delivered < 1500, "the pipe took everything: {delivered}");
    assert!(
        committed <= delivered,
        "committed {committed} but only {delivered} records reached stdout"
    );
}

/// kcat's properties steer a member as librdkafka's do: `-X
/// auto.offset.reset=latest` starts a partition the group never committed
/// at its end, and `-X enable.auto.commit=false` leaves the group's
/// offsets as they were, so the next member reads the same records again.
#[test]
fn kcat_properties_choose_where_a_group_starts_and_whether_it_commits() {
    let registry = TestRegistry::start(Backend::Dir).expect("a directory registry");
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 1);
    let reg = registry.spec();
    produce_to(&broker.addr, "t", &lines(10), &[]);
    let latest = read_as_group(reg, "g", &["-X", "auto.offset.reset=LATEST"]);
    assert_eq!(latest, Vec::<u64>::new());
    let committed = |group| registry.offsets().committed(group, "t", 0).unwrap();
    assert_eq!(committed("g"), Some(10));
    let all: Vec<u64> = (1..=10).collect();
    let peek = [
        "-X",
        "enable.auto.commit=false",
        "-X",
        "auto.offset.reset=earliest",
    ];
    assert_eq!(read_as_group(reg, "h", &peek), all);
    assert_eq!(committed("h"), None, "nothing committed");
    assert_eq!(read_as_group(reg, "h", &["--no-commit"]), all);
    assert_eq!(committed("h"), None);
    assert_eq!(
        read_as_group(reg, "h", &["-X", "enable.auto.commit=true"]),
        all
    );
    assert_eq!(committed("h"), Some(10));
    assert_eq!(read_as_group(reg, "h", &[]), Vec::<u64>::new());
}

/// Issue 11: a committed offset past the end of the log (the topic was
/// recreated, recovery cut it) is reset by the `-o` policy, and says so.
fn a_committed_offset_past_the_log_end_is_reset_by_the_o_policy(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 1);
    let reg = registry.spec();
    produce_to(&broker.addr, "t", &lines(10), &[]);
    for (policy, printed, to) in [("beginning", lines(10), 0), ("end", String::new(), 10)] {
        let offsets = klog::coord::offsets_topic::TopicRegistry::wrap(registry.open());
        offsets.reset_offset("g", "t", 0, 1000).unwrap();
        let out = bin("klog-consume")
            .args(["-t", "t", "-G", "g", "--registry", reg, "-e", "-o", policy])
            .timeout(WAIT)
            .assert()
            .success();
        let out = out.get_output();
        assert_eq!(String::from_utf8_lossy(&out.stdout), printed, "-o {policy}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = format!(
            "% Group g: t [0]: committed offset 1000 is past the end of the log (10); \
             resetting to {to} by -o {policy}"
        );
        assert!(stderr.contains(&said), "{stderr}");
        let r = registry.offsets();
        assert_eq!(r.committed("g", "t", 0).unwrap(), Some(10));
    }
}

/// Issue 11: `--reset-offsets` sets a group's committed offsets (like
/// `kafka-consumer-groups --reset-offsets`), resolved against the
/// brokers, and is refused while the group has a live member.
fn reset_offsets_sets_the_groups_offsets_only_while_it_has_no_live_member(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 2);
    let reg = registry.spec();
    produce_to(&broker.addr, "t", &lines(60), &["-p", "0"]);
    produce_to(&broker.addr, "t", &lines(40), &["-p", "1"]);
    assert_eq!(read_as_group(reg, "g", &[]).len(), 100);
    let r = registry.offsets();
    let committed = || [0, 1].map(|p| r.committed("g", "t", p).unwrap().unwrap());
    assert_eq!(committed(), [60, 40]);
    let reset = |spec: &str, extra: &[&str]| {
        bin("klog-consume")
            .args([
                "-t",
                "t",
                "-G",
                "g",
                "--registry",
                reg,
                "--reset-offsets",
                spec,
            ])
            .args(extra)
            .timeout(WAIT)
            .assert()
    };
    let table = reset("beginning", &[]).success();
    let text = String::from_utf8_lossy(&table.get_output().stdout).into_owned();
    assert!(text.contains("before") && text.contains("60"), "{text}");
    assert_eq!(committed(), [0, 0]);
    for (spec, want) in [("end", [60, 40]), ("-5", [55, 35]), ("30", [30, 30])] {
        let out = reset(spec, &["-J"]).success();
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.get_output().stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[1]["offset"], want[1], "{spec}: {lines:?}");
        assert_eq!(committed(), want, "{spec}");
    }
    // A timestamp after every record: the end.
    reset("@2999-01-01T00:00:00Z", &["-q"]).success();
    assert_eq!(committed(), [60, 40]);
    // Out of one partition's range: an error, and nothing changes.
    reset("50", &[])
        .code(1)
        .stderr(predicate::str::contains("out of range for t [1]"));
    assert_eq!(committed(), [60, 40]);
    // A live member: refused.
    let m = member(reg, "g", &[]);
    m.wait_stderr("owns", owns_count(2), WAIT);
    reset("beginning", &[])
        .code(1)
        .stderr(predicate::str::contains("group g has live members"));
    assert_eq!(committed(), [60, 40]);
    drop(m);
}

/// `-o stored` insists on the group's committed offsets: with none, it is
/// an error naming the partitions that have none.
fn o_stored_without_commits_names_the_partitions_that_have_none(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let reg = registry.spec();
    let broker = registered_broker(&registry, dir.path(), 3);
    produce_to(&broker.addr, "t", &lines(30), &[]);
    // Group g has a committed offset for every partition; group h none.
    bin("klog-consume")
        .args([
            "-t",
            "t",
            "-G",
            "g",
            "--registry",
            reg,
            "--reset-offsets",
            "beginning",
        ])
        .assert()
        .success();
    let out = bin("klog-consume")
        .args([
            "-t",
            "t",
            "-G",
            "h",
            "--registry",
            reg,
            "-e",
            "-o",
            "stored",
        ])
        .timeout(WAIT)
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("group \"h\" has no committed offset for t [0], t [1], t [2]"),
        "{stderr}"
    );
    assert!(out.get_output().stdout.is_empty(), "nothing was read");
    // With commits for every partition, it reads from them.
    assert_eq!(read_as_group(reg, "g", &["-o", "stored"]).len(), 30);
}

/// `-G` on a topic no registered broker holds says so; without `-e` it
/// waits for the topic to appear, as a consumer does.
fn a_group_on_a_topic_not_in_the_registry_says_so_or_waits_for_it(backend: Backend) {
    let Some(registry) = TestRegistry::start(backend) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let reg = registry.spec();
    let _broker = BrokerProc::start(&dir.path().join("data"), &["--registry", reg]);
    bin("klog-consume")
        .args(["-t", "t", "-G", "g", "--registry", reg, "-e"])
        .timeout(WAIT)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("topic \"t\" is not in the registry")
                .and(predicate::str::contains("9092").not()),
        );
    let waiting = member(reg, "g", &[]);
    waiting.wait_stderr("Waiting for topic t", |_| true, WAIT);
    // Produced through the registry: the topic is placed there before the
    // broker serves it, and the member must wait through that too.
    bin("klog-produce")
        .args(["-t", "t", "--registry", reg, "-q"])
        .write_stdin("arrived\n")
        .assert()
        .success();
    let got = waiting.take_lines(1, WAIT);
    assert_eq!(got, ["arrived"]);
}

/// `-G` with `-b` and no `--registry` (kcat's `-b BROKER -G GROUP`): the
/// group lives in the broker's registry, the same one `--registry` names,
/// so that both kinds of member share it; a broker without a registry,
/// and one whose registry directory is on another host, are refused with
/// what to do.
#[test]
fn a_group_given_only_a_broker_lives_in_the_brokers_registry() {
    let registry = TestRegistry::start(Backend::Dir).expect("a directory registry");
    let dir = tempfile::tempdir().unwrap();
    let broker = registered_broker(&registry, dir.path(), 2);
    produce_to(&broker.addr, "t", &lines(10), &[]);
    let out = bin("klog-consume")
        .args(["-b", &broker.addr, "-t", "t", "-G", "g", "-e", "-q"])
        .timeout(WAIT)
        .assert()
        .success();
    assert_eq!(out.get_output().stdout.len(), lines(10).len());
    // Committed in the broker's registry: a member naming it reads nothing
    // more.
    assert!(read_as_group(registry.spec(), "g", &[]).is_empty());
    let reg = klog::coord::offsets_topic::open_read_only(registry.spec()).unwrap();
    let committed: u64 = (0..2)
        .map(|p| reg.committed("g", "t", p).unwrap().unwrap_or(0))
        .sum();
    assert_eq!(committed, 10);
    // Both: a usage error.
    bin("klog-consume")
        .args(["-b", &broker.addr, "--registry", registry.spec()])
        .args(["-t", "t", "-G", "g", "-e"])
        .assert()
        .code(2);
    // A broker without a registry.
    let alone = BrokerProc::start(&dir.path().join("alone"), &[]);
    bin("klog-consume")
        .args(["-b", &alone.addr, "-t", "t", "-G", "g", "-e"])
        .timeout(WAIT)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("keeps no registry"));
}
