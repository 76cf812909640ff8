//! Issue 30: the paper's audit. Producers run with `--audit-topic audit
//! --audit-window 1s` stamp their records and publish counts per window;
//! `klog-consume --audit audit` reconciles them against the data topic.
//! A record deliberately dropped (a producer with `--acks 0` killed with
//! it in its buffer, after the count of its window went out) is reported
//! lost for exactly its window and producer; counts hold across window
//! boundaries, records whose timestamps step back and forth, and producer
//! restarts.

mod common;

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

const AUDIT: &[&str] = &["--audit-topic", "audit", "--audit-window", "1s"];

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sleeps into the next second (a window of 1s), 100 ms past its start.
fn next_window() {
    let into = now_ms().rem_euclid(1000) as u64;
    std::thread::sleep(Duration::from_millis(1100 - into));
}

/// `klog-consume --audit audit -J`'s rows and exit code.
fn reconcile(addr: &str) -> (Vec<Value>, i32) {
    let out = common::bin("klog-consume")
        .args(["-b", addr, "--audit", "audit", "--audit-grace", "0s", "-J"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let rows = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON row"))
        .collect();
    (rows, out.status.code().unwrap_or(-1))
}

/// The counts published so far, as JSON (none while the audit topic is
/// not there yet).
fn counts(addr: &str) -> Vec<Value> {
    let out = common::bin("klog-consume")
        .args(["-b", addr, "-t", "audit", "-e", "-q", "-f", "%s\\n"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_dropped_record_is_lost_in_exactly_its_window_and_producer() {
    let data = tempfile::tempdir().unwrap();
    let broker = common::BrokerProc::start(data.path(), &[]);
    let addr = broker.addr.as_str();
    // A producer that delivers everything.
    let mut args = vec!["--acks", "all"];
    args.extend_from_slice(AUDIT);
    common::produce_to(addr, "t", "a1\na2\na3\n", &args);
    // A producer with acks 0 whose second window stays in its buffer
    // (batches of 5, a linger of a minute) and dies after its count went.
    let mut args = vec!["-b", addr, "-t", "t", "--acks", "0", "--batch", "5"];
    args.extend_from_slice(&["--linger", "60s"]);
    args.extend_from_slice(AUDIT);
    let mut p = common::Proc::spawn_with_stdin("klog-produce", &args, Stdio::piped());
    let mut stdin = p.child.stdin.take().unwrap();
    next_window();
    stdin.write_all(b"b1\nb2\nb3\nb4\nb5\n").unwrap();
    next_window();
    stdin.write_all(b"c1\nc2\nc3\n").unwrap();
    stdin.flush().unwrap();
    // The window of c1..c3, as its producer counted them.
    let mut lost_window = None;
    let bound = Duration::from_secs(30);
    common::eventually("the count of the window that dies goes out", bound, || {
        let all = counts(addr);
        let of_b =
            |c: &&Value| (all.iter()).any(|o| o["producer"] == c["producer"] && o["count"] == 5);
        let three = all.iter().filter(of_b).find(|c| c["count"] == 3);
        lost_window = three.map(|c| c["window"].clone());
        lost_window.is_some()
    });
    let lost_window = lost_window.unwrap();
    p.child.kill().unwrap();
    p.child.wait().unwrap();

    let (rows, code) = reconcile(addr);
    assert_eq!(code, 3, "{rows:?}");
    let bad: Vec<&Value> = rows.iter().filter(|r| r["status"] != "ok").collect();
    assert_eq!(bad.len(), 1, "{rows:?}");
    let lost = bad[0];
    assert_eq!(
        (
            &lost["window"],
            &lost["sent"],
            &lost["received"],
            &lost["lost"],
            &lost["status"]
        ),
        (
            &lost_window,
            &3.into(),
            &0.into(),
            &3.into(),
            &"lost".into()
        ),
        "{rows:?}"
    );
    let same: Vec<&Value> = rows
        .iter()
        .filter(|r| r["producer"] == lost["producer"])
        .collect();
    assert_eq!(same.len(), 2, "its earlier window reconciles: {rows:?}");
    let sent: u64 = rows.iter().map(|r| r["sent"].as_u64().unwrap()).sum();
    assert_eq!(sent, 3 + 5 + 3, "{rows:?}");
}

#[test]
fn counts_hold_across_windows_clock_steps_and_restarts() {
    let data = tempfile::tempdir().unwrap();
    let broker = common::BrokerProc::start(data.path(), &[]);
    let addr = broker.addr.as_str();
    // Records whose timestamps step back ten minutes, forward, and back;
    // the window ten minutes back is published (late, at once) with one
    // record, then grows to two.
    let now = now_ms();
    let envelope = |i: usize, ts: i64| format!("{{\"ts\":{ts},\"payload\":\"j{i}\"}}\n");
    let mut args = vec!["-b", addr, "-t", "t", "-J", "--linger", "10ms"];
    args.extend_from_slice(AUDIT);
    let mut p = common::Proc::spawn_with_stdin("klog-produce", &args, Stdio::piped());
    let mut stdin = p.child.stdin.take().unwrap();
    stdin
        .write_all((envelope(0, now - 600_000) + &envelope(1, now)).as_bytes())
        .unwrap();
    stdin.flush().unwrap();
    common::eventually(
        "the late window's first count goes",
        Duration::from_secs(20),
        || {
            counts(addr)
                .iter()
                .any(|c| c["count"] == 1 && c["window"].as_i64() < Some(now - 60_000))
        },
    );
    let rest = envelope(2, now - 600_000) + &envelope(3, now - 599_000);
    stdin.write_all(rest.as_bytes()).unwrap();
    drop(stdin);
    assert!(p.child.wait().unwrap().success(), "{:?}", p.stderr_lines());
    // A run across three windows, and the same command again (a restart:
    // another producer id).
    for _ in 0..2 {
        let mut p = common::Proc::spawn_with_stdin(
            "klog-produce",
            &[&["-b", addr, "-t", "t", "--linger", "10ms"][..], AUDIT].concat(),
            Stdio::piped(),
        );
        let mut stdin = p.child.stdin.take().unwrap();
        for w in 0..3 {
            stdin
                .write_all(format!("w{w}a\nw{w}b\n").as_bytes())
                .unwrap();
            stdin.flush().unwrap();
            next_window();
        }
        drop(stdin);
        assert!(p.child.wait().unwrap().success(), "{:?}", p.stderr_lines());
    }
    let (rows, code) = reconcile(addr);
    assert_eq!(code, 0, "{rows:?}");
    assert!(rows.iter().all(|r| r["status"] == "ok"), "{rows:?}");
    let producers: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["producer"].as_str().unwrap())
        .collect();
    assert_eq!(producers.len(), 3, "{rows:?}");
    let stepped: Vec<u64> = rows
        .iter()
        .filter(|r| r["window"].as_i64().unwrap() < now - 60_000)
        .map(|r| r["sent"].as_u64().unwrap())
        .collect();
    assert_eq!(
        stepped,
        vec![2, 1],
        "the windows ten minutes back: {rows:?}"
    );
    let sent: u64 = rows.iter().map(|r| r["sent"].as_u64().unwrap()).sum();
    let received: u64 = rows.iter().map(|r| r["received"].as_u64().unwrap()).sum();
    assert_eq!((sent, received), (4 + 12, 4 + 12), "{rows:?}");
}
