//! The binaries as a user runs them: embedded produce and consume, dump,
//! recover, and their errors.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::{bin, consume, lines, produce};
use predicates::prelude::*;

#[test]
fn a_million_lines_come_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let input = lines(1_000_000);
    produce(dir.path(), "t", &input, &[]);
    assert_eq!(consume(dir.path(), "t", &[]), input);
}

#[test]
fn keys_headers_formats_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    produce(
        dir.path(),
        "k",
        "a:1\nb:2\na:3\nc:4\n",
        &["-K", ":", "-H", "src=test", "--partitions", "4"],
    );
    // Every record of one key lands in one partition, in order.
    let all = consume(dir.path(), "k", &["-f", "%k=%s p%p\\n"]);
    let a: Vec<&str> = all.lines().filter(|l| l.starts_with("a=")).collect();
    assert_eq!(a.len(), 2);
    assert_eq!(a[0].split(' ').nth(1), a[1].split(' ').nth(1));
    assert!(a[0].starts_with("a=1") && a[1].starts_with("a=3"));
    let json = consume(dir.path(), "k", &["-J", "-c", "1"]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["headers"], serde_json::json!(["src", "test"]));
    assert!(v["ts"].as_i64().unwrap() > 0);

    produce(dir.path(), "n", &lines(100), &[]);
    assert_eq!(consume(dir.path(), "n", &["-o", "-3"]), "98\n99\n100\n");
    assert_eq!(
        consume(dir.path(), "n", &["-o", "10", "-c", "2"]),
        "11\n12\n"
    );
    assert_eq!(consume(dir.path(), "n", &["-o", "end"]), "");
    bin("klog-consume")
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "-t",
            "n",
            "-o",
            "500",
            "-e",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("offset 500 is out of range").and(
            predicate::str::contains("starts at offset 0 and ends at 100"),
        ));
}

#[test]
fn json_envelopes_produce_back_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    produce(
        dir.path(),
        "a",
        "k1\tv1\nk2\tv2\n",
        &["-K", "\\t", "-H", "h=1"],
    );
    let dumped = consume(dir.path(), "a", &["-J"]);
    produce(dir.path(), "b", &dumped, &["-J"]);
    let again = consume(dir.path(), "b", &["-J"]);
    assert_eq!(dumped.replace("\"topic\":\"a\"", "\"topic\":\"b\""), again);
    // Bytes that are not UTF-8 go through the envelope in base64 and come
    // back the same: NUL-delimited records with a binary key and value.
    let data = dir.path().to_str().unwrap();
    let binary: Vec<u8> = b"\xff\xfe:\x80\x81\x00plain:text\x00\xc3(:\x00".to_vec();
    bin("klog-produce")
        .args([
            "--data-dir",
            data,
            "-t",
            "bin",
            "-D",
            "\\0",
            "-K",
            ":",
            "-q",
        ])
        .write_stdin(binary.clone())
        .assert()
        .success();
    let dumped = consume(dir.path(), "bin", &["-J"]);
    assert!(
        dumped.contains("\"payload_encoding\":\"base64\""),
        "{dumped}"
    );
    produce(dir.path(), "bin2", &dumped, &["-J"]);
    let raw = |topic: &str| {
        let out = bin("klog-consume")
            .args([
                "--data-dir",
                data,
                "-t",
                topic,
                "-e",
                "-q",
                "-f",
                "%k:%s\\0",
            ])
            .assert()
            .success();
        out.get_output().stdout.clone()
    };
    assert_eq!(raw("bin"), binary);
    assert_eq!(raw("bin2"), binary);
    // A bad envelope names its record number, and exits 1.
    bin("klog-produce")
        .args(["--data-dir", dir.path().to_str().unwrap(), "-t", "b", "-J"])
        .write_stdin("{\"payload\":\"ok\"}\nnot json\n")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("line 2").and(predicate::str::contains("(1 failed)")));
}

#[test]
fn bad_topic_names_are_refused_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(250);
    for name in ["../x", "a/b", ".", "..", "", long.as_str(), "é"] {
        bin("klog-produce")
            .args(["--data-dir", dir.path().to_str().unwrap(), "-t", name])
            .write_stdin("x\n")
            .assert()
            .code(2)
            .stderr(predicate::str::contains("invalid topic name"));
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(!dir.path().parent().unwrap().join("x-0").exists());
}

#[test]
fn a_second_writer_is_refused_with_the_holders_pid() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "t", "1\n", &[]);
    let lock = klog::storage::lock::DirLock::acquire(&dir.path().join("t-0")).unwrap();
    bin("klog-produce")
        .args(["--data-dir", dir.path().to_str().unwrap(), "-t", "t"])
        .write_stdin("2\n")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "locked by pid {}",
            std::process::id()
        )));
    // Readers are unaffected.
    assert_eq!(consume(dir.path(), "t", &[]), "1\n");
    drop(lock);
    produce(dir.path(), "t", "2\n", &[]);
    assert_eq!(consume(dir.path(), "t", &[]), "1\n2\n");
}

#[test]
fn closing_stdout_early_is_a_clean_exit() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "t", &lines(100_000), &[]);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-consume"))
        .args(["--data-dir", dir.path().to_str().unwrap(), "-t", "t"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut first = Vec::new();
    for _ in 0..3 {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        first.push(line);
    }
    drop(reader);
    let out = child.wait_with_output().unwrap();
    assert_eq!(first, ["1\n", "2\n", "3\n"]);
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn a_flipped_byte_is_found_cut_and_saved() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let input: String = (0..20_000).map(|i| format!("record-{i:06}\n")).collect();
    produce(
        data,
        "t",
        &input,
        &["--segment-bytes", "64KiB", "--batch", "50"],
    );
    let part = data.join("t-0");
    let first = part.join("00000000000000000000.log");
    let mut bytes = std::fs::read(&first).unwrap();
    // Damage the value of record 1000: it sits inside the first segment.
    let at = bytes
        .windows(13)
        .position(|w| w == b"record-001000")
        .unwrap();
    bytes[at + 3] ^= 0x20;
    std::fs::write(&first, &bytes).unwrap();
    let segments_before = std::fs::read_dir(&part)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .ends_with(".log")
        })
        .count();
    assert!(segments_before > 2);

    bin("klog-dump")
        .args(["--verify", part.to_str().unwrap()])
        .assert()
        .code(3)
        .stderr(
            predicate::str::contains("crc mismatch").and(predicate::str::contains("offset 1000")),
        );
    bin("klog-recover")
        .args(["--full", "--dry-run", part.to_str().unwrap()])
        .assert()
        .code(4);
    bin("klog-recover")
        .args(["--full", part.to_str().unwrap()])
        .assert()
        .code(3)
        .stdout(
            predicate::str::is_match(
                r"(?m)^t-0/00000000000000000000\.log: 1000 records valid, truncated \d+ bytes at position \d+ \(batch crc mismatch.* at offset 1000\), cut bytes saved to .*00000000000000000000\.log\.corrupt",
            )
            .unwrap(),
        );
    let kept = consume(data, "t", &[]);
    assert_eq!(
        kept,
        input
            .lines()
            .take(1000)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    let saved = std::fs::read(part.join("00000000000000000000.log.corrupt")).unwrap();
    assert_eq!(&saved[..], &bytes[bytes.len() - saved.len()..]);
    assert!(std::fs::read_dir(part.join("quarantine")).unwrap().count() >= segments_before - 1);
    bin("klog-recover")
        .args(["--full", part.to_str().unwrap()])
        .assert()
        .code(0);
    bin("klog-dump")
        .args(["--verify", part.to_str().unwrap()])
        .assert()
        .code(0);
    // The log goes on at the next offset.
    produce(data, "t", "after\n", &[]);
    assert_eq!(
        consume(data, "t", &["-o", "-1", "-f", "%o %s\\n"]),
        "1000 after\n"
    );
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    bin("klog-consume")
        .args(["--help"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("--offset"));
    bin("klog-dump").args(["--version"]).assert().code(0);
    bin("klog-consume")
        .args(["-t", "t", "--data-dir", "d", "-f", "%q"])
        .assert()
        .code(2);
    bin("klog-produce")
        .args(["-t", "t", "--data-dir", "d", "--batch-bytes", "12XB"])
        .assert()
        .code(2);
}

#[test]
fn unknown_topics_and_partitions_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    produce(dir.path(), "t", "1\n", &[]);
    bin("klog-consume")
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "-t",
            "nope",
            "-e",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("does not exist"));
    bin("klog-consume")
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "-t",
            "t",
            "-p",
            "3",
            "-e",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("partition 3"));
}

#[test]
fn a_following_consumer_sees_appends_across_segment_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    produce(dir.path(), "t", "first\n", &["--segment-bytes", "4KiB"]);
    let follower = common::Proc::spawn("klog-consume", &["--data-dir", data, "-t", "t", "-u"]);
    assert_eq!(follower.take_lines(1, Duration::from_secs(20)), ["first"]);
    // Several runs of a writer, each rolling segments of 4 KiB while the
    // follower reads.
    let mut expected = Vec::new();
    for run in 0..3 {
        let input: String = (0..2_000).map(|i| format!("run{run}-{i}\n")).collect();
        expected.extend((0..2_000).map(|i| format!("run{run}-{i}")));
        produce(
            dir.path(),
            "t",
            &input,
            &["--segment-bytes", "4KiB", "--batch", "7"],
        );
    }
    let segments = std::fs::read_dir(dir.path().join("t-0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    assert!(
        segments > 20,
        "{segments} segments: the writer should have rolled"
    );
    assert_eq!(
        follower.take_lines(expected.len(), Duration::from_secs(60)),
        expected
    );
}

/// Every limit of the record format is checked before a record is built:
/// too many headers (from `-H` or from a `-J` envelope) is an error that
/// names the limit, never a panic, and nothing is appended.
#[test]
fn more_headers_than_the_format_holds_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let mut flags: Vec<String> = vec!["--data-dir".into(), data.into(), "-t".into(), "t".into()];
    for _ in 0..1025 {
        flags.extend(["-H".into(), "a=b".into()]);
    }
    bin("klog-produce")
        .args(&flags)
        .write_stdin("x\n")
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "1025 headers in a record would pass the limit of 1024",
        ))
        .stderr(predicate::str::contains("panicked").not());
    let headers: Vec<String> = (0..1025)
        .flat_map(|_| ["\"a\"".to_string(), "\"b\"".to_string()])
        .collect();
    let envelope = format!(
        "{{\"payload\":\"x\",\"headers\":[{}]}}\n",
        headers.join(",")
    );
    bin("klog-produce")
        .args(["--data-dir", data, "-t", "t", "-J"])
        .write_stdin(envelope)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("1025 headers in a record"))
        .stderr(predicate::str::contains("panicked").not());
    let out = bin("klog-consume")
        .args(["--data-dir", data, "-t", "t", "-e", "-q"])
        .assert()
        .success();
    assert!(out.get_output().stdout.is_empty(), "nothing was appended");
}

/// `klog-dump --registry` only looks: it creates no directory and removes
/// no entry, not even a stale one (its owner may be starting).
#[test]
fn klog_dump_registry_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let reg = dir.path().join("reg");
    std::fs::create_dir_all(reg.join("brokers")).unwrap();
    let stale = r#"{"id":"b1","host":"127.0.0.1","port":1,"pid":1,"topics":{}}"#;
    std::fs::write(reg.join("brokers").join("b1.json"), stale).unwrap();
    std::fs::write(reg.join("brokers").join("b1.lock"), "").unwrap();
    let listing = || {
        let mut names: Vec<String> = walkdir(&reg);
        names.sort();
        names
    };
    let before = listing();
    bin("klog-dump")
        .args(["--registry", reg.to_str().unwrap()])
        .assert()
        .success();
    bin("klog-dump")
        .args(["--json", "--registry", reg.to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(listing(), before);
}

fn walkdir(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        out.push(entry.path().display().to_string());
        if entry.path().is_dir() {
            out.extend(walkdir(&entry.path()));
        }
    }
    out
}

/// A broker registered in a registry, serving topic `t` (2 partitions,
/// 100 records) that group `g` has read to the end (`-G g -e`), and a
/// live member of group `live` owning both partitions, committing
/// nothing: what `klog-dump --registry` and `klog-consume -L --registry`
/// look at. Everything stops when it is dropped (the member first).
struct Cluster {
    _live: common::Proc,
    _broker: common::BrokerProc,
    _data: tempfile::TempDir,
}

fn cluster(registry: &str) -> Cluster {
    let data = tempfile::tempdir().unwrap();
    let broker = common::BrokerProc::start(
        &data.path().join("data"),
        &["--registry", registry, "--partitions", "2"],
    );
    bin("klog-produce")
        .args(["--registry", registry, "-t", "t", "-q"])
        .write_stdin(lines(100))
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    let read = common::consume_registry(registry, "t", &["-G", "g"]);
    assert_eq!(read.lines().count(), 100, "{read}");
    let live = common::Proc::spawn(
        "klog-consume",
        &[
            "-t",
            "t",
            "-G",
            "live",
            "--registry",
            registry,
            "-o",
            "end",
            "--commit-interval",
            "1h",
        ],
    );
    live.wait_stderr(
        " owns ",
        |l| l.contains("t [0]") && l.contains("t [1]"),
        Duration::from_secs(60),
    );
    Cluster {
        _live: live,
        _broker: broker,
        _data: data,
    }
}

/// Runs `name` with `args`, which must succeed; its stdout.
fn stdout_of(name: &str, args: &[&str]) -> String {
    let out = bin(name)
        .args(args)
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// The cells of a tool's tables, row by row (header rows too), with the
/// cells that name a process or a moment (ids, addresses, pids, members,
/// generations, leases) replaced by what they are, `-` kept: the shape a
/// directory and ZooKeeper must share.
fn table_shape(text: &str) -> Vec<Vec<String>> {
    let anonymous = [
        "broker",
        "address",
        "pid",
        "member",
        "owner",
        "generation",
        "lease",
        "leader",
        "replicas",
        "isr",
    ];
    let mut header: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        if !line.starts_with('│') {
            continue;
        }
        let cells: Vec<String> = line
            .split(['│', '┆'])
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect();
        let is_header = cells.first().is_some_and(|c| {
            ["broker", "group", "topic"].contains(&c.as_str())
                && cells.iter().all(|c| !c.chars().any(|c| c.is_ascii_digit()))
        });
        if is_header {
            header = cells.clone();
            rows.push(cells);
            continue;
        }
        let row = cells
            .into_iter()
            .enumerate()
            .map(|(i, cell)| {
                let column = header.get(i).map_or("", String::as_str);
                if cell != "-" && anonymous.contains(&column) {
                    format!("<{column}>")
                } else {
                    cell
                }
            })
            .collect();
        rows.push(row);
    }
    rows
}

/// JSON lines with the fields that name a process or a moment replaced
/// by their name (nulls kept).
fn json_shape(text: &str) -> Vec<serde_json::Value> {
    let anonymous = [
        "id",
        "port",
        "pid",
        "member",
        "generation",
        "lease_age_ms",
        "session_timeout_ms",
        "addr",
        "leader",
        "replicas",
        "isr",
    ];
    text.lines()
        .map(|line| {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            for field in anonymous {
                // A lease's fields are null on ZooKeeper, which keeps none.
                let lease = field.contains("_ms");
                if let Some(v) = value.get_mut(field).filter(|v| lease || !v.is_null()) {
                    *v = serde_json::json!(format!("<{field}>"));
                }
            }
            value
        })
        .collect()
}

/// ZooKeeper's count of znodes, from its `srvr` reply.
fn znodes(server: &common::zk::ZkServer) -> u64 {
    let reply = server.srvr();
    reply
        .lines()
        .find_map(|l| l.strip_prefix("Node count: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no node count in {reply:?}"))
}

/// `klog-dump --registry zk://...` shows what it shows for a directory:
/// the same tables (columns and rows, but for ids, addresses, pids,
/// generations and leases) and the same JSON lines; and it only looks: a
/// dump of a chroot nobody used creates no znode.
#[test]
fn klog_dump_shows_a_zookeeper_registry_as_a_directory() {
    let Some(server) = common::zk::ZkServer::start() else {
        return;
    };
    let unused = server.address("/never-used");
    let before = znodes(&server);
    for extra in [&[][..], &["--json"]] {
        let out = stdout_of("klog-dump", &[&["--registry", &unused][..], extra].concat());
        assert!(!out.contains("broker-"), "{out}");
    }
    assert_eq!(znodes(&server), before, "a look created znodes");

    let dir = tempfile::tempdir().unwrap();
    let directory = dir.path().join("registry");
    let directory = directory.to_str().unwrap();
    let zookeeper = server.address("/dump");
    let mut shapes = Vec::new();
    for registry in [directory, zookeeper.as_str()] {
        let _cluster = cluster(registry);
        let tables = stdout_of("klog-dump", &["--registry", registry]);
        let json = stdout_of("klog-dump", &["--registry", registry, "--json"]);
        shapes.push((table_shape(&tables), json_shape(&json), tables, json));
    }
    let (directory, zookeeper) = (&shapes[0], &shapes[1]);
    assert_eq!(directory.0, zookeeper.0, "{}\n{}", directory.2, zookeeper.2);
    assert_eq!(directory.1, zookeeper.1);
    // ZooKeeper keeps no lease: an entry lives while its holder's session
    // does, whose timeout the registry does not know. The dump says so,
    // and never shows its own session's timeout as the holder's.
    for table in [&directory.2, &zookeeper.2] {
        let leases = table.matches("s/").count();
        let sessions = table.matches("zk session").count();
        if std::ptr::eq(table, &zookeeper.2) {
            assert_eq!((leases, sessions), (0, 3), "{table}");
        } else {
            assert_eq!((leases, sessions), (3, 0), "{table}");
        }
    }
    // (The offsets topic's configs line is a topic's, with no lease.)
    let leased = |l: &&str| !l.contains("\"offset\"") && !l.contains("\"topic_configs\"");
    for line in zookeeper.3.lines().filter(leased) {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        if line["type"] != "broker" {
            assert!(line["session_timeout_ms"].is_null(), "{line}");
            assert!(line["lease_age_ms"].is_null(), "{line}");
            assert_eq!(line["expired"], false, "{line}");
        }
    }
    // What both show: the broker, the live member owning both partitions
    // with nothing committed, and g's offsets at the end.
    let rows: Vec<String> = zookeeper.0.iter().map(|r| r.join(" ")).collect();
    for row in [
        "<broker> <address> <pid> __consumer_offsets [0, 1, 2, 3, 4, 5, 6, 7], t [0, 1]",
        "live <member> <pid> t <lease>",
        "g t 0 - - - 50 50 0",
        "g t 1 - - - 50 50 0",
        "live t 0 <owner> <generation> <lease> none 50 ?",
        "live t 1 <owner> <generation> <lease> none 50 ?",
    ] {
        assert!(rows.contains(&row.to_string()), "{row:?} in {rows:#?}");
    }
}

/// `klog-consume -L --registry zk://...` lists the cluster as it does for
/// a directory: the same brokers, topics, partitions, leaders and offsets,
/// as tables and as JSON.
#[test]
fn klog_consume_lists_a_zookeeper_cluster_as_a_directory() {
    let Some(server) = common::zk::ZkServer::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let directory = dir.path().join("registry");
    let directory = directory.to_str().unwrap();
    let zookeeper = server.address("/list");
    let mut shapes = Vec::new();
    for registry in [directory, zookeeper.as_str()] {
        let _cluster = cluster(registry);
        let tables = stdout_of("klog-consume", &["-L", "--registry", registry]);
        let json = stdout_of("klog-consume", &["-L", "--registry", registry, "-J"]);
        shapes.push((table_shape(&tables), json_shape(&json), tables));
    }
    let (directory, zookeeper) = (&shapes[0], &shapes[1]);
    assert_eq!(directory.0, zookeeper.0, "{}\n{}", directory.2, zookeeper.2);
    assert_eq!(directory.1, zookeeper.1);
    let rows: Vec<String> = zookeeper.0.iter().map(|r| r.join(" ")).collect();
    for row in [
        "<broker> <address>",
        "t 0 <leader> <replicas> <isr> 0 50",
        "t 1 <leader> <replicas> <isr> 0 50",
    ] {
        assert!(rows.contains(&row.to_string()), "{row:?} in {rows:#?}");
    }
}

/// A ZooKeeper that is not there (nothing listens; something listens and
/// never answers) is an error within seconds, exit 1, that names the
/// address and says what to check; never a hang.
#[test]
fn an_absent_zookeeper_is_an_error_within_seconds() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = format!("zk://{}/klog", silent.local_addr().unwrap());
    for address in ["zk://127.0.0.1:1/klog", silent.as_str()] {
        for run in [&["klog-dump"][..], &["klog-consume", "-L"]] {
            let started = std::time::Instant::now();
            bin(run[0])
                .args(&run[1..])
                .args(["--registry", address])
                .timeout(Duration::from_secs(30))
                .assert()
                .code(1)
                .stderr(
                    predicate::str::starts_with("error: ")
                        .and(predicate::str::contains(address))
                        .and(predicate::str::contains("hint: is ZooKeeper running")),
                );
            let took = started.elapsed();
            assert!(took < Duration::from_secs(6), "{run:?} {address}: {took:?}");
        }
    }
}
