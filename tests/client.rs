//! The clients against a broker that stops answering (SIGSTOP), and under
//! signals: every network call has a deadline, a produce fails its records
//! after `--message-timeout`, SIGINT ends a tool within a second (a second
//! one at once), and `--linger` is the age of a batch, not an idle time.

mod common;

use std::io::Write;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{produce_to, BrokerProc, Proc};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// A process stopped with SIGSTOP until this is dropped (also when the
/// test fails), so that nothing is left stopped.
struct Paused(Pid);

impl Paused {
    /// Returns once every thread of `child` is stopped: SIGSTOP is sent
    /// at once but taken by each thread at its next return from the
    /// kernel, and a thread that had not yet taken it could still answer.
    fn stop(child: &Child) -> Paused {
        let pid = Pid::from_raw(child.id() as i32);
        kill(pid, Signal::SIGSTOP).unwrap();
        let paused = Paused(pid);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !all_threads_stopped(child.id()) {
            assert!(Instant::now() < deadline, "SIGSTOP not taken");
            std::thread::sleep(Duration::from_millis(5));
        }
        paused
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGCONT);
    }
}

/// Whether every thread of process `pid` is stopped (state T in
/// /proc/PID/task/TID/stat, after the command name in parentheses).
fn all_threads_stopped(pid: u32) -> bool {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks.into_iter().all(|task| {
        let stat = std::fs::read_to_string(task.unwrap().path().join("stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or("").trim_start();
        state.starts_with('T') || state.starts_with('t')
    })
}

fn signal(child: &Child, sig: Signal) {
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
}

/// Bytes received and not yet read on the IPv4 TCP connections whose
/// local port is `port` (from /proc/net/tcp), whether or not their peer
/// has closed its side since.
fn unread_at(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let mut unread = 0;
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let local_port = fields[1].rsplit(':').next().unwrap();
        // Not the listening socket (0A), whose queue is of connections.
        if u16::from_str_radix(local_port, 16) == Ok(port) && fields[3] != "0A" {
            let rx = fields[4].rsplit(':').next().unwrap();
            unread += u64::from_str_radix(rx, 16).unwrap();
        }
    }
    unread
}

/// Waits for `child` to exit, failing the test after `timeout`.
fn exit_within(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "still running after {timeout:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `klog-produce` with `args` after `-b ADDR -t t`, its stdin a pipe the
/// test writes.
fn producer(addr: &str, args: &[&str]) -> (Proc, std::process::ChildStdin) {
    let mut all = vec!["-b", addr, "-t", "t"];
    all.extend_from_slice(args);
    let mut p = Proc::spawn_with_stdin("klog-produce", &all, Stdio::piped());
    let stdin = p.child.stdin.take().unwrap();
    (p, stdin)
}

fn has_line(p: &Proc, text: &str) -> bool {
    p.stderr_lines().iter().any(|l| l == text)
}

#[test]
fn a_produce_to_a_stopped_broker_fails_its_record_after_the_message_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    let _paused = Paused::stop(&broker.child);
    let (mut p, mut stdin) = producer(&broker.addr, &["--message-timeout", "2s"]);
    let started = Instant::now();
    stdin.write_all(b"y\n").unwrap();
    drop(stdin);
    let status = exit_within(&mut p.child, Duration::from_secs(20));
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(100)); // the last stderr lines
    assert_eq!(status.code(), Some(1), "{:?}", p.stderr_lines());
    assert!(
        has_line(&p, "% Sent 0 records to t (1 failed)"),
        "{:?}",
        p.stderr_lines()
    );
    assert!(
        took >= Duration::from_millis(1900),
        "failed before its deadline: {took:?}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// A producer with `args` that delivered "a" (after "first", which
/// created the topic), its stdin still open.
fn delivered_one(broker: &BrokerProc, args: &[&str]) -> (Proc, std::process::ChildStdin) {
    produce_to(&broker.addr, "t", "first\n", &[]);
    let (p, mut stdin) = producer(&broker.addr, args);
    stdin.write_all(b"a\n").unwrap();
    stdin.flush().unwrap();
    // "a" goes after its 100ms linger and is acknowledged.
    let consumer = Proc::spawn("klog-consume", &["-b", &broker.addr, "-t", "t", "-u", "-q"]);
    assert_eq!(
        consumer.take_lines(2, Duration::from_secs(10)),
        ["first", "a"]
    );
    // Its acknowledgement leaves right after it is visible.
    std::thread::sleep(Duration::from_millis(300));
    (p, stdin)
}

#[test]
fn records_in_flight_to_a_broker_that_stops_fail_after_the_message_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    let (mut p, mut stdin) = delivered_one(&broker, &["--message-timeout", "2s"]);
    let _paused = Paused::stop(&broker.child);
    let started = Instant::now();
    stdin.write_all(b"b\n").unwrap();
    drop(stdin);
    let status = exit_within(&mut p.child, Duration::from_secs(20));
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(status.code(), Some(1), "{:?}", p.stderr_lines());
    assert!(
        has_line(&p, "% Sent 1 record to t (1 failed)"),
        "{:?}",
        p.stderr_lines()
    );
    assert!(took >= Duration::from_millis(1900), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn sigint_ends_a_produce_whose_records_a_stopped_broker_holds() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    let (mut p, mut stdin) = delivered_one(&broker, &[]);
    let _paused = Paused::stop(&broker.child);
    stdin.write_all(b"b\n").unwrap();
    stdin.flush().unwrap();
    // "b" is sent after its linger, and waits for its acknowledgement.
    std::thread::sleep(Duration::from_secs(1));
    sigint_ends_with(&mut p, "% Sent 1 record to t (1 failed)");
    drop(stdin);
}

#[test]
fn sigint_ends_a_produce_waiting_on_a_stopped_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    let _paused = Paused::stop(&broker.child);
    let (mut p, mut stdin) = producer(&broker.addr, &[]);
    stdin.write_all(b"y\n").unwrap();
    drop(stdin);
    std::thread::sleep(Duration::from_secs(1));
    sigint_ends_with(&mut p, "% Sent 0 records to t (1 failed)");
    assert!(
        !p.stderr_lines().iter().any(|l| l.contains("panicked")),
        "{:?}",
        p.stderr_lines()
    );
}

#[test]
fn a_second_sigint_ends_a_tool_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    let (mut p, mut stdin) = producer(&broker.addr, &[]);
    // Connected, with the partition's leader known: its first record is
    // stored. The next one then waits for an acknowledgement the stopped
    // broker never sends, and the first signal gives that wait its grace
    // (a tool blocked on a connection or on metadata ends at its next
    // tick instead, which a loaded machine can make come before the
    // second signal).
    stdin.write_all(b"x\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let stored = || {
        let out = common::bin("klog-consume")
            .args(["-b", &broker.addr, "-t", "t", "-e", "-q"])
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap();
        out.stdout == b"x\n"
    };
    while !stored() {
        assert!(Instant::now() < deadline, "the first record is not stored");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _paused = Paused::stop(&broker.child);
    stdin.write_all(b"y\n").unwrap();
    drop(stdin);
    // The second record is sent: its request waits, unread, at the
    // stopped broker.
    let port: u16 = broker.addr.rsplit(':').next().unwrap().parse().unwrap();
    while unread_at(port) == 0 {
        assert!(
            Instant::now() < deadline,
            "the second record is not sent: {:?} {:?}",
            p.child.try_wait(),
            p.stderr_lines()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let signalled = Instant::now();
    signal(&p.child, Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(20));
    signal(&p.child, Signal::SIGINT);
    let status = exit_within(&mut p.child, Duration::from_secs(20));
    assert!(signalled.elapsed() < Duration::from_secs(5));
    // The first signal alone ends it with exit 1 (a record failed); a
    // death by SIGINT says the second one cut that short.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(Signal::SIGINT as i32),
        "{status:?} {:?}",
        p.stderr_lines()
    );
}

#[test]
fn sigint_ends_a_consume_waiting_on_a_stopped_broker_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    produce_to(&broker.addr, "t", "a\n", &[]);
    // Following when the broker stops, and starting while it is stopped.
    let mut following = Proc::spawn("klog-consume", &["-b", &broker.addr, "-t", "t", "-u"]);
    assert_eq!(following.take_lines(1, Duration::from_secs(10)), ["a"]);
    let _paused = Paused::stop(&broker.child);
    let mut starting = Proc::spawn("klog-consume", &["-b", &broker.addr, "-t", "t"]);
    std::thread::sleep(Duration::from_secs(1));
    for p in [&mut following, &mut starting] {
        let signalled = Instant::now();
        signal(&p.child, Signal::SIGINT);
        let status = exit_within(&mut p.child, Duration::from_secs(20));
        let took = signalled.elapsed();
        std::thread::sleep(Duration::from_millis(100));
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert_eq!(status.code(), Some(0), "{:?}", p.stderr_lines());
        assert!(
            !p.stderr_lines().iter().any(|l| l.starts_with("error")),
            "{:?}",
            p.stderr_lines()
        );
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `tail -f app.log | klog-produce`: a trickle of 20 lines a second, the
/// pipe kept open, is visible to a consumer within linger + 200 ms, and
/// each record carries its own time.
#[test]
fn a_trickle_is_visible_within_the_linger_and_each_record_has_its_own_time() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    produce_to(&broker.addr, "t", "first\n", &[]);
    let consumer = Proc::spawn(
        "klog-consume",
        &[
            "-b",
            &broker.addr,
            "-t",
            "t",
            "-o",
            "end",
            "-u",
            "-q",
            "-f",
            "%T %s\\n",
        ],
    );
    let (_p, mut stdin) = producer(&broker.addr, &["--linger", "500ms", "-q"]);
    // Both ends running: a first line goes through.
    stdin.write_all(b"warm\n").unwrap();
    stdin.flush().unwrap();
    let warm = consumer.take_lines(1, Duration::from_secs(20));
    assert!(warm[0].ends_with(" warm"), "{warm:?}");
    let lines = 40;
    let writer = std::thread::spawn(move || {
        let start = Instant::now();
        let mut written = Vec::new();
        for i in 0..lines {
            let at = start + Duration::from_millis(50 * i);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            let wall = now_ms();
            let instant = Instant::now();
            stdin.write_all(format!("line{i}\n").as_bytes()).unwrap();
            stdin.flush().unwrap();
            written.push((instant, wall));
        }
        // The pipe stays open until every line was seen.
        std::thread::sleep(Duration::from_secs(3));
        drop(stdin);
        written
    });
    let mut seen = Vec::new();
    for i in 0..lines {
        let line = consumer
            .lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("line{i} not seen: {e}"));
        seen.push((Instant::now(), now_ms(), line));
    }
    let written = writer.join().unwrap();
    let mut last_ts = 0;
    let mut late = Duration::ZERO;
    for (i, ((wrote, wrote_ms), (saw, saw_ms, line))) in written.iter().zip(&seen).enumerate() {
        let (ts, value) = line.split_once(' ').unwrap();
        assert_eq!(value, format!("line{i}"));
        let ts: i64 = ts.parse().unwrap();
        late = late.max(saw.duration_since(*wrote));
        assert!(
            *wrote_ms <= ts && ts <= *saw_ms,
            "line{i}: stamped {ts}, written at {wrote_ms}, seen at {saw_ms}"
        );
        assert!(ts >= last_ts, "line{i}: {ts} before {last_ts}");
        last_ts = ts;
    }
    println!("the latest line became visible {late:?} after it was written");
    assert!(
        late <= Duration::from_millis(700),
        "a line became visible {late:?} after it was written"
    );
}

/// Sends SIGINT to a producer and checks that it ended within a few
/// seconds (a loaded machine: the point is that it ends), exit 1, saying
/// `sent`.
fn sigint_ends_with(p: &mut Proc, sent: &str) {
    let signalled = Instant::now();
    signal(&p.child, Signal::SIGINT);
    let status = exit_within(&mut p.child, Duration::from_secs(20));
    let took = signalled.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(status.code(), Some(1), "{:?}", p.stderr_lines());
    assert!(has_line(p, sent), "{:?}", p.stderr_lines());
}
