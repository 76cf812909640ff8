//! What one client can make a broker hold, bounded: topics created only
//! when the broker is told to (`--auto-create-topics`), partitions counted
//! on disk (`--max-partitions`), a topic created whole or not at all, and
//! the open-file limit a data directory needs.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::kafka::{self, frame, KafkaBroker};
use common::{bin, consume_from, produce_to, BrokerProc};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::Decodable;
use klog::client::Connection;

/// Whether `prlimit` (util-linux) is here; says so when it is not.
fn has_prlimit() -> bool {
    let here = std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_ok();
    if !here {
        println!("skipped: no prlimit (util-linux)");
    }
    here
}

/// The partition directories of `topic` in `data`.
fn partition_dirs(data: &Path, topic: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.rsplit_once('-').is_some_and(|(t, _)| t == topic))
        .collect();
    names.sort();
    names
}

/// `klog-produce` of one line to `topic`, which must fail (exit 1): its
/// stderr.
fn refused_produce(addr: &str, topic: &str) -> String {
    let out = bin("klog-produce")
        .args(["-b", addr, "-t", topic, "--message-timeout", "5s"])
        .write_stdin("a\n")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    stderr
}

/// A Kafka Metadata v4 request for `topic`, auto-creation allowed, and
/// the error code of its one topic in the answer.
fn kafka_metadata_error(kafka: &str, topic: &str) -> i16 {
    let mut body = 1i32.to_be_bytes().to_vec();
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    body.push(1); // allow_auto_topic_creation
    let mut stream = TcpStream::connect(kafka).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(&frame(3, 4, 9, &body)).unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut answer).unwrap();
    let mut rest = &answer[4..];
    let response = km::MetadataResponse::decode(&mut rest, 4).unwrap();
    assert_eq!(response.topics.len(), 1);
    response.topics[0].error_code
}

/// With `--auto-create-topics false`, neither a produce (klog's or
/// Kafka's) nor a metadata request creates a topic, and the client is told
/// why; a create that names its partition count is made.
#[test]
fn without_auto_create_a_topic_is_made_only_when_asked_with_a_count() {
    let broker = KafkaBroker::start(&["--auto-create-topics", "false"]);
    let data = broker.data_dir();
    let stderr = refused_produce(&broker.broker.addr, "t");
    assert!(stderr.contains("--auto-create-topics false"), "{stderr}");
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    assert_eq!(
        kafka_metadata_error(&broker.kafka, "k"),
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(partition_dirs(&data, "t"), Vec::<String>::new());
    assert_eq!(partition_dirs(&data, "k"), Vec::<String>::new());
    let mut conn = Connection::connect(&broker.broker.addr).unwrap();
    assert_eq!(conn.create_topic("t", 2).unwrap(), 2);
    produce_to(&broker.broker.addr, "t", "a\nb\n", &[]);
    assert_eq!(partition_dirs(&data, "t"), ["t-0", "t-1"]);
    // The default creates as before.
    let open = KafkaBroker::start(&[]);
    assert_eq!(kafka_metadata_error(&open.kafka, "k"), 0);
    assert_eq!(partition_dirs(&open.data_dir(), "k"), ["k-0"]);
    // Past a bound, a Kafka client is told it is the broker's policy.
    let bounded = KafkaBroker::start(&["--partitions", "3", "--max-partitions", "2"]);
    const POLICY_VIOLATION: i16 = 44;
    assert_eq!(kafka_metadata_error(&bounded.kafka, "k"), POLICY_VIOLATION);
    assert_eq!(
        partition_dirs(&bounded.data_dir(), "k"),
        Vec::<String>::new()
    );
}

/// `--max-partitions` counts partition directories on disk: one whose
/// log is damaged (offline, served by nobody) counts as much as a served
/// one, and a create that would pass the bound leaves nothing.
#[test]
fn max_partitions_counts_the_partitions_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = BrokerProc::start(dir.path(), &[]);
        let mut conn = Connection::connect(&broker.addr).unwrap();
        assert_eq!(conn.create_topic("a", 2).unwrap(), 2);
        produce_to(&broker.addr, "a", "x\n", &["-p", "1"]);
        produce_to(&broker.addr, "a", "y\n", &["-p", "1"]);
    }
    // A byte of a-1's first batch damaged, before its second: the broker
    // serves a-0 only, a-1 waits for klog-recover.
    let segment = dir.path().join("a-1/00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[24 + 61 + 3] ^= 0xff;
    std::fs::write(&segment, &bytes).unwrap();
    // (Killed: no clean shutdown, recovery reads it.)
    let _ = std::fs::remove_file(dir.path().join("a-1/clean-shutdown"));
    let broker = BrokerProc::start(dir.path(), &["--max-partitions", "3"]);
    let lines = broker.stderr.lock().unwrap().clone();
    assert!(
        lines.iter().any(|l| l.contains("a-1 is offline")),
        "{lines:?}"
    );
    let mut conn = Connection::connect(&broker.addr).unwrap();
    let err = conn.create_topic("b", 2).unwrap_err().to_string();
    assert!(err.contains("--max-partitions"), "{err}");
    assert_eq!(partition_dirs(dir.path(), "b"), Vec::<String>::new());
    assert_eq!(conn.create_topic("c", 1).unwrap(), 1);
}

/// A flood of connections that send what is not klog's protocol costs
/// the broker's log at most `PEER_LOG_LINES_PER_SECOND` lines a second:
/// every line not written is counted, and the count written (here at the
/// stop), so that the lines and the counts add up to the connections.
#[test]
fn a_flood_of_hostile_connections_is_counted_not_logged_line_by_line() {
    use klog::limits::PEER_LOG_LINES_PER_SECOND;
    const CONNECTIONS: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let mut broker = BrokerProc::start(dir.path(), &[]);
    let started = std::time::Instant::now();
    for _ in 0..CONNECTIONS {
        let mut s = TcpStream::connect(&broker.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        // Until the broker closes it, having said why.
        let _ = s.read_to_end(&mut Vec::new());
    }
    let seconds = started.elapsed().as_secs() + 2;
    assert!(broker.terminate().success());
    let log = broker.log();
    let written = log.iter().filter(|l| l.starts_with("% 127.0.0.1:")).count() as u64;
    let dropped: u64 = log
        .iter()
        .filter(|l| l.contains("about peers not written"))
        .map(|l| l[2..].split(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(written + dropped, CONNECTIONS, "{log:#?}");
    assert!(
        written <= u64::from(PEER_LOG_LINES_PER_SECOND) * seconds,
        "{written} lines in {seconds} s"
    );
}

/// Connections that each produced one large batch and then stay idle
/// hold no copy of it: the buffers of the produce path shrink back after
/// the request as every other path's do (a review found 95 MB kept per
/// idle connection).
#[test]
fn idle_kafka_connections_hold_no_copy_of_a_large_produce() {
    const CONNECTIONS: usize = 4;
    let broker = KafkaBroker::start(&["--max-record-bytes", "64MiB"]);
    let mut builder = klog::storage::record::BatchBuilder::new();
    builder.push(1_700_000_000_000, None, &[], &vec![b'v'; 60 << 20]);
    let batch = builder.finish().to_vec();
    let request = frame(0, 3, 5, &kafka::produce_v3_body("big", 1, 30_000, &batch));
    drop(builder);
    // Measured from the first produce on: what the partition itself keeps
    // (its write buffer) is not a connection's.
    let mut before = 0;
    let mut idle = Vec::new();
    for i in 0..CONNECTIONS {
        let mut s = TcpStream::connect(&broker.kafka).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(&request).unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
        s.read_exact(&mut answer).unwrap();
        // correlation id, one topic and its name, one partition: its error.
        let at = 4 + 4 + 2 + 3 + 4 + 4;
        assert_eq!(answer[at..at + 2], [0, 0], "produce failed: {answer:?}");
        idle.push(s);
        if i == 0 {
            // The answer leaves before the request's own buffer goes back:
            // the least of a moment's readings.
            before = (0..10)
                .map(|_| {
                    std::thread::sleep(Duration::from_millis(50));
                    broker.broker.rss_kib()
                })
                .min()
                .unwrap();
        }
    }
    let grown_mib = || broker.broker.rss_kib().saturating_sub(before) / 1024;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while grown_mib() >= 60 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        grown_mib() < 60,
        "{} more idle connections hold {} MiB more",
        CONNECTIONS - 1,
        grown_mib()
    );
}

/// A topic of more partitions than the broker's open-file limit can hold
/// open is refused before anything is made (and, were its opening to
/// fail anyway, removed again): nothing of it is left, and the broker
/// starts again on its data directory. As a review found it, the create
/// failed half way with "Too many open files", left every directory, and
/// the broker could not start again.
#[test]
fn a_topic_past_the_open_file_limit_leaves_nothing_and_the_broker_restarts() {
    if !has_prlimit() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let limited = |args: &[&str]| {
        let mut command = std::process::Command::new("prlimit");
        command
            .arg("--nofile=600:600")
            .arg(assert_cmd::cargo::cargo_bin("klog-broker"));
        BrokerProc::start_command(command, dir.path(), args)
    };
    {
        let broker = limited(&["--partitions", "200"]);
        let stderr = refused_produce(&broker.addr, "t");
        assert_eq!(
            partition_dirs(dir.path(), "t"),
            Vec::<String>::new(),
            "{stderr}"
        );
    }
    let broker = limited(&["--partitions", "20"]);
    produce_to(&broker.addr, "t", "a\n", &[]);
    assert_eq!(partition_dirs(dir.path(), "t").len(), 20);
}

/// A broker holds open the files of its active segments only: the sealed
/// ones are opened when read, and as many stay open as its open-file
/// limit leaves room for. Under a limit of 1,000 files, a partition of
/// 1,500 segments takes every record, serves them all, and opens again
/// after a `kill -9` and after a clean stop. As it was, every segment kept
/// its file open: the rolls failed with "Too many open files" once the
/// limit was reached, and a data directory past it could not be opened.
#[test]
fn a_partition_of_more_segments_than_open_files_writes_reads_and_reopens() {
    if !has_prlimit() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let limited = || {
        let mut command = std::process::Command::new("prlimit");
        command
            .arg("--nofile=1000:1000")
            .arg(assert_cmd::cargo::cargo_bin("klog-broker"));
        let args = ["--partitions", "1", "--segment-bytes", "4KiB"];
        BrokerProc::start_command(command, dir.path(), &args)
    };
    // Lines of 100 bytes, 20 to a batch: two batches (about 4 KiB) to a
    // segment.
    let lines: String = (0..60_000).map(|i| format!("{i:099}\n")).collect();
    let segments = |data: &Path| {
        std::fs::read_dir(data.join("t-0"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension() == Some("log".as_ref()))
            .count()
    };
    let mut broker = limited();
    produce_to(
        &broker.addr,
        "t",
        &lines,
        &["--batch", "20", "--acks", "all"],
    );
    assert!(segments(dir.path()) > 1_500, "{}", segments(dir.path()));
    assert_eq!(consume_from(&broker.addr, "t", &[]), lines);
    broker.kill9();
    let mut broker = limited();
    assert_eq!(consume_from(&broker.addr, "t", &[]), lines);
    assert!(broker.terminate().success());
    let broker = limited();
    assert_eq!(consume_from(&broker.addr, "t", &[]), lines);
}

/// Connections take only the open files the partitions leave: a flood
/// of idle connections past that is refused, said once, and the partition
/// still rolls (three new files each time) and makes its records durable.
/// As it was, the flood took every descriptor, and the next roll failed
/// with "Too many open files" and stopped the partition until a restart.
#[test]
fn a_flood_of_connections_leaves_the_partitions_their_open_files() {
    if !has_prlimit() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new("prlimit");
    command
        .arg("--nofile=800:800")
        .arg(assert_cmd::cargo::cargo_bin("klog-broker"));
    let args = ["--partitions", "1", "--segment-bytes", "4KiB"];
    let broker = BrokerProc::start_command(command, dir.path(), &args);
    produce_to(&broker.addr, "t", "first\n", &[]);
    let mut producer = common::Raw::connect(&broker.addr);
    // A broker out of descriptors accepts nothing more: its backlog fills.
    let addr = broker.addr.parse().unwrap();
    let flood: Vec<TcpStream> = (0..500)
        .map_while(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok())
        .collect();
    let said = broker.wait_for_log("refused", Duration::from_secs(30));
    assert!(said.contains("open-file limit"), "{said}");
    let mut frame = Vec::new();
    for i in 0..100u32 {
        let mut batch = klog::storage::record::BatchBuilder::new();
        batch.push(0, None, &[], format!("{i:0500}").as_bytes());
        klog::protocol::produce_request(&mut frame, i, -1, 10_000, "t", 0, batch.finish());
        let (error, message, _) = producer.call(&frame);
        assert_eq!(error, klog::protocol::ErrorCode::None, "{i}: {message}");
    }
    drop(flood);
    assert_eq!(consume_from(&broker.addr, "t", &[]).lines().count(), 101);
}

/// A listener reachable from beyond this host, with nothing to
/// authenticate clients, is said loudly at start (with -q too); a
/// loopback one is not.
#[test]
fn a_listener_beyond_this_host_is_said_to_have_no_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let open = BrokerProc::start(dir.path(), &["--listen", "0.0.0.0:0"]);
    let log = open.log();
    assert!(
        log.iter()
            .any(|l| l.starts_with("% WARNING: listening on 0.0.0.0:")
                && l.contains("no authentication")),
        "{log:?}"
    );
    drop(open);
    let local = BrokerProc::start(dir.path(), &[]);
    assert!(
        !local.log().iter().any(|l| l.contains("WARNING")),
        "{:?}",
        local.log()
    );
}

/// A connection whose first request header never comes whole (3 bytes,
/// then silence) is closed at the request timeout, said; neither
/// protocol's server ever sees it, and others are served meanwhile.
#[test]
fn a_peer_that_never_sends_a_whole_header_is_closed_at_the_request_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &["--request-timeout", "1s"]);
    let mut silent = TcpStream::connect(&broker.addr).unwrap();
    silent.write_all(&[0, 0, 0]).unwrap();
    produce_to(&broker.addr, "t", "a\n", &[]);
    assert_eq!(consume_from(&broker.addr, "t", &[]), "a\n");
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut byte = [0u8; 1];
    // Closed with its 3 bytes unread: a reset, or an end.
    let read = silent.read(&mut byte);
    assert!(
        matches!(&read, Ok(0))
            || read
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?}"
    );
    let said = broker.wait_for_log("(3 bytes of its header came)", Duration::from_secs(20));
    assert!(said.contains("127.0.0.1:"), "{said}");
}

/// Kafka group members take only the descriptors the open-file limit
/// keeps for them (each holds a registry entry and a claim, open files of
/// a directory registry): past that, a join is refused, and the broker
/// still rolls its partitions and answers. As a review found it, 622
/// members held 698 of 700 descriptors, and the broker could not make its
/// next segment.
#[test]
fn kafka_group_members_leave_the_partitions_their_open_files() {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::{GroupId, JoinGroupRequest, JoinGroupResponse};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    if !has_prlimit() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("registry");
    let mut command = std::process::Command::new("prlimit");
    command
        .arg("--nofile=700:700")
        .arg(assert_cmd::cargo::cargo_bin("klog-broker"));
    let args = [
        "--registry",
        registry.to_str().unwrap(),
        "--segment-bytes",
        "4KiB",
    ];
    let broker = BrokerProc::start_command(command, &dir.path().join("data"), &args);
    produce_to(&broker.addr, "t", "first\n", &[]);
    let mut stream = TcpStream::connect(&broker.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut join = |group: &str, member: &str| -> (i16, String) {
        let protocol = JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(b"\0\0\0\0\0\x01\0\x01t\0\0\0\0".to_vec().into());
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.into())))
            .with_session_timeout_ms(600_000)
            .with_rebalance_timeout_ms(1_000)
            .with_member_id(StrBytes::from_string(member.into()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![protocol]);
        let mut body = Vec::new();
        request.encode(&mut body, 4).unwrap();
        stream.write_all(&frame(11, 4, 1, &body)).unwrap();
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).unwrap();
        let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut answer).unwrap();
        let mut rest = &answer[4..];
        let r = <JoinGroupResponse as kafka_protocol::protocol::Decodable>::decode(&mut rest, 4)
            .unwrap();
        (r.error_code, r.member_id.to_string())
    };
    let (mut joined, mut refused) = (0, 0);
    for g in 0..400 {
        let group = format!("g{g}");
        let (code, id) = join(&group, "");
        let code = if code == 79 {
            join(&group, &id).0
        } else {
            code
        };
        match code {
            0 => joined += 1,
            _ => refused += 1,
        }
    }
    assert!(
        joined >= 16 && refused > 0,
        "{joined} joined, {refused} refused"
    );
    // The broker still makes segments (three files each) and answers.
    let lines: String = (0..2000).map(|i| format!("{i:0100}\n")).collect();
    produce_to(&broker.addr, "t", &lines, &["--batch", "20"]);
    assert_eq!(consume_from(&broker.addr, "t", &[]).lines().count(), 2001);
}
