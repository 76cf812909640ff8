//! The command line's usage rules, through the binaries: what is a usage
//! error (exit 2, with a message that says how to write it right), and
//! what a tool says when it finds nothing to work on.

mod common;

use common::bin;
use predicates::prelude::*;

/// A bare number as a duration is refused: `--retention 7` once meant
/// 7 ms and deleted nearly every segment a second later.
#[test]
fn a_duration_needs_a_unit() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    for flag in [
        "--retention",
        "--segment-age",
        "--request-timeout",
        "--idle-timeout",
    ] {
        bin("klog-broker")
            .args(["--data-dir", data, "--listen", "127.0.0.1:0", flag, "7"])
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "\"7\" needs a unit: 7ms, 7s, 7m, 7h or 7d",
            ));
    }
    bin("klog-produce")
        .args(["--data-dir", data, "-t", "t", "--linger", "5"])
        .write_stdin("x\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("needs a unit"));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing was started"
    );
}

/// A directory holding no partition (a typo, the wrong directory) is not
/// "verified": the tools say that nothing was found and exit 1.
#[test]
fn a_directory_without_partitions_is_reported_not_verified() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("empty")).unwrap();
    std::fs::write(dir.path().join("empty/notes.txt"), "hello").unwrap();
    let empty = dir.path().join("empty");
    for args in [
        vec!["klog-dump", "--verify"],
        vec!["klog-dump"],
        vec!["klog-recover"],
        vec!["klog-recover", "--dry-run"],
    ] {
        bin(args[0])
            .args(&args[1..])
            .arg(&empty)
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!(
                "no partition found in {}",
                empty.display()
            )));
    }
    let mut entries: Vec<_> = std::fs::read_dir(&empty)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    entries.sort();
    assert_eq!(entries, ["notes.txt"], "nothing was created there");
}

/// `klog-recover` names each segment with its partition, and never calls
/// valid a segment it did not scan (one before the recovery point), where
/// `klog-dump --verify` finds damage.
#[test]
fn recover_names_partitions_and_claims_nothing_it_did_not_scan() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    // Damage in the first segment, long before the recovery point.
    damaged_log(dir.path(), &["--batch", "50"]);
    bin("klog-dump").args(["--verify", data]).assert().code(3);
    let out = bin("klog-recover")
        .args(["--dry-run", data])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let first_line = stdout.lines().next().unwrap_or_default();
    assert!(
        first_line.starts_with("t-0/00000000000000000000.log: not scanned"),
        "{stdout}"
    );
    assert!(!first_line.contains("valid"), "{stdout}");
    assert!(
        stdout.lines().all(|l| l.starts_with("t-0/")),
        "every line names its partition: {stdout}"
    );
    // --full scans it, and finds what klog-dump found.
    let out = bin("klog-recover")
        .args(["--dry-run", "--full", data])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("t-0/00000000000000000000.log: ")
            && stdout.lines().next().unwrap().contains("would truncate"),
        "{stdout}"
    );
    assert!(stdout.lines().all(|l| l.starts_with("t-0/")), "{stdout}");
}

/// `klog-dump --json` writes JSON lines only, each with a `type`, in one
/// key style (snake_case, as every other `--json` of klog).
#[test]
fn dump_json_is_json_lines_only_in_one_key_style() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let lines: String = (0..2000).map(|i| format!("k{i}\tv{i}\n")).collect();
    bin("klog-produce")
        .args([
            "--data-dir",
            data,
            "-t",
            "t",
            "-q",
            "-K",
            "\\t",
            "--batch",
            "10",
        ])
        .write_stdin(lines)
        .assert()
        .success();
    let seg = dir.path().join("t-0/00000000000000000000");
    let paths = [
        dir.path().to_path_buf(),
        seg.with_extension("log"),
        seg.with_extension("index"),
        seg.with_extension("timeindex"),
    ];
    let mut types = std::collections::BTreeSet::new();
    for path in &paths {
        let out = bin("klog-dump")
            .args(["--json", "--records", "--print-data"])
            .arg(path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{path:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(!stdout.is_empty(), "{path:?}");
        for line in stdout.lines() {
            let value: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {line:?} from {path:?}"));
            let object = value.as_object().expect("an object");
            types.insert(object["type"].as_str().expect("a type").to_string());
            for key in object.keys() {
                assert!(
                    key.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                    "{key:?} in {line}"
                );
            }
        }
    }
    let want = ["batch", "index", "record", "summary", "timeindex"];
    assert_eq!(types.into_iter().collect::<Vec<_>>(), want);
}

/// Runs a binary with its stderr a pipe already closed (`2>&1 | true`
/// after `true` is gone) and returns its exit status.
fn with_closed_stderr(name: &str, args: &[&str], stdin: &str) -> std::process::ExitStatus {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(assert_cmd::cargo::cargo_bin(name))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let mut input = child.stdin.take().unwrap();
    let _ = input.write_all(stdin.as_bytes());
    drop(input);
    child.wait().unwrap()
}

/// Diagnostics written to a closed stderr are lost, never a panic.
#[test]
fn a_closed_stderr_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let status = with_closed_stderr("klog-produce", &["--data-dir", data, "-t", "t"], "a\nb\n");
    assert_eq!(status.code(), Some(0), "klog-produce");
    let status = with_closed_stderr("klog-consume", &["--data-dir", data, "-t", "t", "-e"], "");
    assert_eq!(status.code(), Some(0), "klog-consume");
    let status = with_closed_stderr("klog-dump", &[data], "");
    assert_eq!(status.code(), Some(0), "klog-dump");
    let status = with_closed_stderr("klog-recover", &[data], "");
    assert_eq!(status.code(), Some(0), "klog-recover");
    // An error to say, and nowhere to say it: still its exit code.
    let status = with_closed_stderr("klog-consume", &["--data-dir", data, "-t", "none"], "");
    assert_eq!(status.code(), Some(1), "klog-consume of an unknown topic");
}

/// `-p 0,0` names partition 0 once: its records come once.
#[test]
fn a_partition_named_twice_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    bin("klog-produce")
        .args([
            "--data-dir",
            data,
            "-t",
            "t",
            "-q",
            "--partitions",
            "2",
            "-p",
            "0",
        ])
        .write_stdin("a\nb\n")
        .assert()
        .success();
    bin("klog-consume")
        .args(["--data-dir", data, "-t", "t", "-e", "-q", "-p", "0,0,1,0"])
        .assert()
        .success()
        .stdout("a\nb\n");
}

/// Mistakes in how a tool is called are usage errors (exit 2), in words,
/// with no internal prefix.
#[test]
fn usage_mistakes_exit_2_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let data = data.to_str().unwrap();
    let broker = |args: &[&str]| {
        bin("klog-broker")
            .args(["--data-dir", data])
            .args(args)
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(2)
    };
    broker(&["--listen", "nonsense"]).stderr(predicate::str::contains("nonsense"));
    broker(&["--listen", "127.0.0.1:0", "--segment-bytes", "1KiB"])
        .stderr(predicate::str::contains("4KiB"));
    broker(&["--listen", "127.0.0.1:0", "--max-record-bytes", "0"]);
    broker(&[
        "--listen",
        "127.0.0.1:0",
        "--max-request-bytes",
        "8MiB",
        "--max-queued-request-bytes",
        "4MiB",
    ]);
    bin("klog-consume")
        .args(["--data-dir", data, "-t", "t", "-o", "stored"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "-o stored needs a group (-G GROUP",
        ));
    bin("klog-produce")
        .args(["--data-dir", data, "-t", "t", "--segment-bytes", "1KiB"])
        .write_stdin("x\n")
        .assert()
        .code(2);
    // A transactional producer: through a registry, acks all, numbered;
    // its id names a group, and its timeout is Kafka's bounds.
    let produce = |args: &[&str]| {
        bin("klog-produce")
            .args(["-t", "t"])
            .args(args)
            .write_stdin("x\n")
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(2)
    };
    produce(&["-b", "127.0.0.1:1", "--transactional-id", "m"])
        .stderr(predicate::str::contains("needs --registry"));
    let registry = dir.path().join("r");
    let registry = registry.to_str().unwrap();
    let txn = ["--registry", registry, "--transactional-id", "m"];
    produce(&[&txn[..], &["--acks", "1"]].concat())
        .stderr(predicate::str::contains("needs --acks all"));
    produce(&[&txn[..], &["--no-idempotence"]].concat())
        .stderr(predicate::str::contains("--no-idempotence"));
    produce(&["--registry", registry, "--transactional-id", "a/b"]);
    produce(&[&txn[..], &["--transaction-timeout", "16m"]].concat())
        .stderr(predicate::str::contains("1ms to 15m"));
    produce(&["--registry", registry, "-X", "transaction.timeout.ms=0"]);
    produce(
        &[
            &txn[..],
            &[
                "--transaction-interval",
                "2s",
                "--transaction-timeout",
                "1s",
            ],
        ]
        .concat(),
    )
    .stderr(predicate::str::contains(
        "shorter than its --transaction-timeout",
    ));
    let out = bin("klog-broker")
        .args(["--data-dir", data, "--segment-bytes", "1KiB"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("invalid configuration"), "{stderr}");
}

/// `-b HOST` without a port means port 9092, as in kcat.
#[test]
fn a_broker_address_without_a_port_means_9092() {
    // A topic no broker holds: whether or not a broker listens on 9092,
    // the error names the address it went to.
    bin("klog-consume")
        .args(["-b", "127.0.0.1", "-t", "no-such-topic-d41d8cd98f", "-e"])
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("127.0.0.1:9092"));
}

/// Explicit flags beat the environment; two explicit modes at once are a
/// usage error; the broker's data directory has a variable of its own.
#[test]
fn explicit_flags_beat_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let env_data = dir.path().join("env-data");
    let env_reg = dir.path().join("env-reg");
    let broker = common::BrokerProc::start(&dir.path().join("served"), &[]);
    for (var, value) in [("KLOG_DATA_DIR", &env_data), ("KLOG_REGISTRY", &env_reg)] {
        bin("klog-produce")
            .env(var, value)
            .args(["-b", &broker.addr, "-t", "t", "-q"])
            .write_stdin(format!("{var}\n"))
            .assert()
            .success();
        bin("klog-consume")
            .env(var, value)
            .args(["-b", &broker.addr, "-t", "t", "-q", "-e", "-o", "-1"])
            .assert()
            .success()
            .stdout(format!("{var}\n"));
    }
    assert!(
        !env_data.exists() && !env_reg.exists(),
        "-b won over the environment"
    );
    let data = dir.path().join("d");
    let data = data.to_str().unwrap();
    for tool in ["klog-produce", "klog-consume"] {
        for conflict in [["--data-dir", data], ["--registry", data]] {
            bin(tool)
                .args(["-t", "t", "-b", &broker.addr])
                .args(conflict)
                .write_stdin("x\n")
                .assert()
                .code(2)
                .stderr(predicate::str::contains("-b"));
        }
    }
    // A data directory exported for the clients is not the broker's.
    let clients = dir.path().join("clients");
    let own = dir.path().join("broker-own");
    let mut second = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-broker"))
        .env("KLOG_DATA_DIR", &clients)
        .env("KLOG_BROKER_DATA_DIR", &own)
        .args(["--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(second.stderr.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let _ = second.kill();
    let _ = second.wait();
    assert!(line.starts_with("% Listening"), "{line}");
    assert!(
        own.exists() && !clients.exists(),
        "the broker took KLOG_BROKER_DATA_DIR"
    );
}

/// A group reads through its registry, named by --registry or by the
/// broker of -b: both, or --data-dir, beside -G is a usage error, and an
/// exported data directory does not get in its way.
#[test]
fn a_group_goes_with_the_registry_only() {
    let dir = tempfile::tempdir().unwrap();
    let reg = dir.path().join("reg");
    let reg = reg.to_str().unwrap();
    for other in [["-b", "127.0.0.1:1"], ["--data-dir", reg]] {
        bin("klog-consume")
            .args(["-t", "t", "-G", "g", "--registry", reg])
            .args(other)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "-G reads through the group's registry",
            ));
    }
    // Exported, the data directory is not a conflict: the group's registry
    // (holding no broker yet) is what is used.
    bin("klog-consume")
        .env("KLOG_DATA_DIR", dir.path())
        .args(["-t", "t", "-G", "g", "--registry", reg, "-e"])
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("group \"g\""));
}

/// Reads `n` lines of a following `klog-consume` with `args`, closes its
/// stdout (as `| head -n` does) and returns how it exited, waiting at most
/// 10 s (then it is killed: `None`).
fn head_of_follow(args: &[&str], n: usize) -> Option<std::process::ExitStatus> {
    use std::io::BufRead;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-consume"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    for _ in 0..n {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
    }
    drop(out);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// `klog-consume -t T | head -3` ends once head is gone, without waiting
/// for a record that may never come.
#[test]
fn a_follow_ends_when_its_reader_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = common::BrokerProc::start(&data, &[]);
    common::produce_to(&broker.addr, "t", "1\n2\n3\n4\n5\n", &[]);
    let status = head_of_follow(&["-b", &broker.addr, "-t", "t", "-u"], 3);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "remote");
    let reg = dir.path().join("reg");
    let embedded = dir.path().join("embedded");
    let embedded = embedded.to_str().unwrap();
    bin("klog-produce")
        .args(["--data-dir", embedded, "-t", "t", "-q"])
        .write_stdin("1\n2\n3\n4\n5\n")
        .assert()
        .success();
    let status = head_of_follow(&["--data-dir", embedded, "-t", "t", "-u"], 3);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "embedded");
    drop(broker);
    let broker = common::BrokerProc::start(&data, &["--registry", reg.to_str().unwrap()]);
    let status = head_of_follow(
        &[
            "-t",
            "t",
            "-G",
            "g",
            "--registry",
            reg.to_str().unwrap(),
            "-u",
        ],
        3,
    );
    assert_eq!(status.and_then(|s| s.code()), Some(0), "group");
    drop(broker);
}

/// With `--acks 0` and the broker gone mid-stream, the records after it
/// are failed, the exit is 1, and the `% Sent` line says nothing was
/// acknowledged (a broken socket is not a closed stdout).
#[test]
fn acks_0_to_a_broker_that_dies_exits_1_and_says_nothing_was_acknowledged() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut broker = common::BrokerProc::start(dir.path(), &[]);
    let mut producer = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-produce"))
        .args([
            "-b",
            &broker.addr,
            "-t",
            "z0",
            "--acks",
            "0",
            "--linger",
            "1ms",
        ])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = producer.stdin.take().unwrap();
    let lines: String = (0..2000).map(|i| format!("{i}\n")).collect();
    input.write_all(lines.as_bytes()).unwrap();
    input.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    broker.kill9();
    std::thread::sleep(std::time::Duration::from_millis(200));
    for _ in 0..20 {
        let _ = input.write_all(lines.as_bytes());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(input);
    let out = producer.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not acknowledged"), "{stderr}");
}

/// A bad record (no key delimiter, bad JSON, over the size limit) or an
/// unreadable file is said with its line, counted failed, and the rest is
/// still sent; the exit is 1 at the end.
#[test]
fn bad_input_is_reported_counted_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let data = data.to_str().unwrap();
    let produce = |topic: &str, args: &[&str], input: String| {
        bin("klog-produce")
            .args(["--data-dir", data, "-t", topic])
            .args(args)
            .write_stdin(input)
            .assert()
            .code(1)
    };
    produce("k", &["-K", ":"], "k1:a\nnokey\nk2:b\n".into()).stderr(
        predicate::str::contains("% line 2: no key delimiter")
            .and(predicate::str::contains("Sent 2 records to k (1 failed)")),
    );
    produce(
        "j",
        &["-J"],
        "{\"payload\":\"x\"}\nnot json\n{\"payload\":\"y\"}\n".into(),
    )
    .stderr(
        predicate::str::contains("% line 2: bad JSON")
            .and(predicate::str::contains("Sent 2 records to j (1 failed)")),
    );
    let long = format!("a\n{}\nb\n{}\nc", "x".repeat(3 << 20), "y".repeat(5000));
    produce("big", &["--max-record-bytes", "4KiB"], long).stderr(
        predicate::str::contains("% line 2: longer than 4096 bytes")
            .and(predicate::str::contains(
                "% line 4: record of 5009 bytes exceeds the limit",
            ))
            .and(predicate::str::contains("Sent 3 records to big (2 failed)")),
    );
    let file = dir.path().join("lines");
    std::fs::write(&file, "f1\nf2\n").unwrap();
    bin("klog-produce")
        .args(["--data-dir", data, "-t", "f", "/nonexistent/input"])
        .arg(&file)
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("% /nonexistent/input: cannot read")
                .and(predicate::str::contains("Sent 2 records to f (1 failed)")),
        );
    for (topic, want) in [
        ("k", "a\nb\n"),
        ("j", "x\ny\n"),
        ("big", "a\nb\nc\n"),
        ("f", "f1\nf2\n"),
    ] {
        bin("klog-consume")
            .args(["--data-dir", data, "-t", topic, "-e", "-q"])
            .assert()
            .success()
            .stdout(want);
    }
}

/// Messages in words: a broker that hangs up is said so, `-q` silences the
/// broker, and a benchmark that timed no latency prints none.
#[test]
fn messages_are_in_words() {
    // A "broker" that accepts and hangs up.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let hang_up = std::thread::spawn(move || {
        for conn in listener.incoming().take(1) {
            // Reads the request, then hangs up (no reset: it was read).
            let mut conn = conn.unwrap();
            let mut request = [0u8; 64];
            let _ = std::io::Read::read(&mut conn, &mut request);
            drop(conn);
        }
    });
    bin("klog-produce")
        .args(["-b", &addr, "-t", "t"])
        .write_stdin("x\n")
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("the broker closed the connection")
                .and(predicate::str::contains("fill whole buffer").not())
                .and(predicate::str::contains("end of file").not()),
        );
    hang_up.join().unwrap();
    // klog-broker -q says nothing (it prints its address without -q).
    let dir = tempfile::tempdir().unwrap();
    let broker = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-broker"))
        .args(["-q", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(broker.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = broker.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "-q is quiet");
    bin("klog-bench")
        .args(["consume", "-n", "2000", "-q"])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(
                r"^2000 records consumed, [0-9.]+ records/sec \([0-9.]+ MB/sec\)\.\n$",
            )
            .unwrap(),
        );
}

/// A number out of its range is said in words, not as a Rust range.
#[test]
fn counts_out_of_range_are_said_in_words() {
    let dir = tempfile::tempdir().unwrap();
    bin("klog-broker")
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--partitions",
            "0",
        ])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("from 1 to 10000, not 0")
                .and(predicate::str::contains("..=").not()),
        );
    bin("klog-bench")
        .args(["produce", "--in-flight", "70000"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("from 1 to 65536, not 70000"));
}

/// A file whose last line has no newline does not run into the next file's
/// first line.
#[test]
fn files_end_their_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let (one, two, empty) = (
        dir.path().join("1"),
        dir.path().join("2"),
        dir.path().join("e"),
    );
    std::fs::write(&one, "a\nfirst-file-last-line").unwrap();
    std::fs::write(&two, "second-file-first-line\n").unwrap();
    std::fs::write(&empty, "").unwrap();
    bin("klog-produce")
        .args(["--data-dir", data.to_str().unwrap(), "-t", "t", "-q"])
        .args([&one, &empty, &two])
        .assert()
        .success();
    bin("klog-consume")
        .args(["--data-dir", data.to_str().unwrap(), "-t", "t", "-e", "-q"])
        .assert()
        .success()
        .stdout("a\nfirst-file-last-line\nsecond-file-first-line\n");
}

/// `klog-recover ... | true`: the report is cut short, not the repair, and
/// the exit code still says the log was repaired.
#[test]
fn a_closed_stdout_does_not_hide_a_repair() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    damaged_log(dir.path(), &[]);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-recover"))
        .args(["--full", data])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    assert_eq!(child.wait().unwrap().code(), Some(3));
    bin("klog-dump").args(["--verify", data]).assert().code(0);
}

/// Two exported places for the records, without a flag to choose, are a
/// usage error; a timeout of zero is refused.
#[test]
fn two_exported_places_and_zero_timeouts_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    bin("klog-produce")
        .env("KLOG_BROKER", "127.0.0.1:1")
        .env("KLOG_DATA_DIR", dir.path())
        .args(["-t", "t"])
        .write_stdin("x\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "KLOG_BROKER and KLOG_DATA_DIR are both set",
        ));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
    for flag in ["--request-timeout", "--idle-timeout"] {
        bin("klog-broker")
            .args(["--data-dir", dir.path().to_str().unwrap(), flag, "0s"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("would time out at once"));
    }
}

/// Topic `t` in the data directory `data`, 3000 records in segments of
/// 16 KiB (produced with `args` too), and a byte flipped in the first
/// segment, long before the recovery point.
fn damaged_log(data: &std::path::Path, args: &[&str]) {
    let lines: String = (0..3000).map(|i| format!("{i}\n")).collect();
    bin("klog-produce")
        .args(["--data-dir", data.to_str().unwrap(), "-t", "t", "-q"])
        .args(["--segment-bytes", "16KiB"])
        .args(args)
        .write_stdin(lines)
        .assert()
        .success();
    let first = data.join("t-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&first).unwrap();
    bytes[200] ^= 0xff;
    std::fs::write(&first, bytes).unwrap();
}

/// A registry is a directory or `zk://HOST:PORT[,HOST:PORT...]/CHROOT`:
/// an address that tries to be the second and is not (no port, no
/// chroot, an empty chroot part, another scheme, `zk:/` for `zk://`) is a
/// usage error that says the form, in every binary and from
/// `KLOG_REGISTRY` too, and nothing is created (a typo never becomes a
/// directory named `zk:`), nothing is waited for.
#[test]
fn a_malformed_zookeeper_address_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let form = "zk://HOST:PORT[,HOST:PORT...]/CHROOT";
    for bad in [
        "zk://127.0.0.1/klog",
        "zk://127.0.0.1:2181",
        "zk://127.0.0.1:2181/",
        "zk://:2181/klog",
        "zk://127.0.0.1:2181,/klog",
        "zk://127.0.0.1:2181/a//b",
        "zk:/127.0.0.1:2181/klog",
        "zk:127.0.0.1:2181/klog",
        "zookeeper://127.0.0.1:2181/klog",
    ] {
        let runs: [&[&str]; 5] = [
            &["klog-broker", "--data-dir", data, "--listen", "127.0.0.1:0"],
            &["klog-produce", "-t", "t"],
            &["klog-consume", "-t", "t", "-G", "g", "-e"],
            &["klog-consume", "-L"],
            &["klog-dump"],
        ];
        for run in runs {
            bin(run[0])
                .current_dir(dir.path())
                .args(&run[1..])
                .args(["--registry", bad])
                .write_stdin("x\n")
                .timeout(std::time::Duration::from_secs(20))
                .assert()
                .code(2)
                .stderr(predicate::str::contains(bad).and(predicate::str::contains(form)));
        }
        bin("klog-consume")
            .current_dir(dir.path())
            .env("KLOG_REGISTRY", bad)
            .args(["-L"])
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(2)
            .stderr(predicate::str::contains(form));
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing was created"
    );
}

/// kcat's mode flags: `-P` to klog-produce and `-C` to klog-consume are
/// accepted (a kcat line pastes unchanged); the other mode is a usage
/// error naming the tool that does it.
#[test]
fn kcat_mode_flags_are_accepted_by_the_tool_of_that_mode() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    bin("klog-produce")
        .args(["-P", "--data-dir", data, "-t", "t", "-q"])
        .write_stdin("a\n")
        .assert()
        .success();
    bin("klog-consume")
        .args(["-C", "--data-dir", data, "-t", "t", "-e", "-q"])
        .assert()
        .success()
        .stdout("a\n");
    bin("klog-produce")
        .args(["-C", "--data-dir", data, "-t", "t"])
        .write_stdin("b\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("run klog-consume"));
    bin("klog-consume")
        .args(["-P", "--data-dir", data, "-t", "t", "-e"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("run klog-produce"));
    bin("klog-consume")
        .args([
            "--data-dir",
            data,
            "-t",
            "t",
            "-e",
            "-X",
            "auto.offset.reset=error",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("earliest or latest"));
}

/// A klog tool pointed at a Kafka broker's port (one that closes the
/// connection at klog's request, as Kafka does with a length it cannot
/// take) is told what it reached, not only that the connection closed.
#[test]
fn a_klog_tool_at_a_kafka_port_is_told_so() {
    let kafka = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = kafka.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in kafka.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut size = [0u8; 4];
            let _ = std::io::Read::read_exact(&mut conn, &mut size);
            // Kafka reads the size big-endian: klog's is little-endian,
            // far past socket.request.max.bytes.
            assert!(u32::from_be_bytes(size) > 100 * 1024 * 1024);
        }
    });
    bin("klog-consume")
        .args(["-b", &addr, "-t", "t", "-e", "--request-timeout", "2s"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "is a Kafka broker, not a klog one, use kcat",
        ));
}
