//! Clients across a broker restart: a following consumer reconnects and
//! resumes where it was, saying so.

mod common;

use std::time::Duration;

use common::{produce_to, BrokerProc, Proc};

const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_following_consumer_survives_a_broker_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = BrokerProc::start(dir.path(), &[]);
    let addr = broker.addr.clone();
    produce_to(&addr, "t", "1\n2\n3\n", &[]);
    let consumer = Proc::spawn("klog-consume", &["-b", &addr, "-t", "t", "-u"]);
    assert_eq!(consumer.take_lines(3, WAIT), ["1", "2", "3"]);
    assert!(broker.terminate().success());
    std::thread::sleep(Duration::from_millis(500));
    let broker = BrokerProc::start(dir.path(), &["--listen", &addr]);
    produce_to(&broker.addr, "t", "4\n5\n", &[]);
    assert_eq!(
        consumer.take_lines(2, WAIT),
        ["4", "5"],
        "resumed where it was, nothing twice"
    );
    consumer.wait_stderr("resuming t [0] at offset 3", |_| true, WAIT);
    let said = consumer.stderr_lines().join("\n");
    assert!(said.contains("reconnecting"), "{said}");
}

/// A producer whose broker dies (kill -9) and comes back sends the batches
/// that were not acknowledged again on a new connection, within their
/// delivery deadline: every record arrives (some maybe twice).
#[test]
fn a_producer_sends_again_what_a_broken_connection_left_unacknowledged() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut broker = BrokerProc::start(dir.path(), &[]);
    let addr = broker.addr.clone();
    produce_to(&addr, "t", "0\n", &[]);
    let mut producer = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-produce"))
        .args([
            "-b",
            &addr,
            "-t",
            "t",
            "--linger",
            "5ms",
            "--message-timeout",
            "20s",
        ])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = producer.stdin.take().unwrap();
    // Ends early if the producer does (then the test fails below).
    let writer = std::thread::spawn(move || {
        for i in 1..=3000 {
            if writeln!(input, "{i}").is_err() {
                return;
            }
            if i % 10 == 0 {
                let _ = input.flush();
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    });
    std::thread::sleep(Duration::from_millis(400));
    broker.kill9();
    std::thread::sleep(Duration::from_millis(300));
    let broker = BrokerProc::start(dir.path(), &["--listen", &addr]);
    writer.join().unwrap();
    let out = producer.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let got = common::consume_from(&broker.addr, "t", &[]);
    let seen: std::collections::BTreeSet<u64> = got.lines().map(|l| l.parse().unwrap()).collect();
    let missing: Vec<u64> = (0..=3000).filter(|i| !seen.contains(i)).collect();
    assert!(
        missing.is_empty(),
        "lost {} records: {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
}

/// SIGINT while a follower waits for its broker to come back is a clean
/// end, exit 0, with no blame on the broker.
#[test]
fn sigint_while_reconnecting_is_a_clean_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = BrokerProc::start(dir.path(), &[]);
    produce_to(&broker.addr, "t", "1\n", &[]);
    let mut consumer = Proc::spawn("klog-consume", &["-b", &broker.addr, "-t", "t", "-u"]);
    assert_eq!(consumer.take_lines(1, WAIT), ["1"]);
    broker.kill9();
    consumer.wait_stderr("reconnecting", |_| true, WAIT);
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(consumer.child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = consumer.child.wait().unwrap();
    let said = consumer.stderr_lines().join("\n");
    assert_eq!(status.code(), Some(0), "{status}: {said}");
    // No error line (an OS error's own words, "os error 104", are not one).
    assert!(!said.lines().any(|l| l.starts_with("error")), "{said}");
}
