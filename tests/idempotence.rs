//! Idempotent producers across restarts and failovers (issue 25): a
//! partition's producer state is rebuilt from its log (snapshots and the
//! batches after them), on a broker that restarts and on a follower that
//! becomes leader, so that a retry of a batch the log holds is answered
//! with the first copy's offsets and stored once; a batch that does not
//! follow its producer's last is refused, as Kafka refuses it. Raw Kafka
//! Produce v3 frames, so that the test says exactly what is sent again.

mod common;

use std::net::TcpStream;
use std::time::Duration;

use common::cluster::Cluster;
use common::kafka::{idempotent_batch, idempotent_batch_of, produce_v3};
use common::BrokerProc;

const BOUND: Duration = Duration::from_secs(30);

/// Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER.
const OUT_OF_ORDER: i16 = 45;

/// A broker with a Kafka listener on `data`, and that listener's address.
fn broker(data: &std::path::Path) -> (BrokerProc, String) {
    let broker = BrokerProc::start(data, &["--kafka-listen", "127.0.0.1:0"]);
    let kafka = broker
        .log()
        .iter()
        .find_map(|l| l.strip_prefix("% Listening for Kafka clients on "))
        .map(str::to_string)
        .expect("a Kafka listener");
    (broker, kafka)
}

/// What partition 0 of `topic` holds, as `offset value` lines.
fn stored(addr: &str, topic: &str) -> String {
    common::consume_from(addr, topic, &["-f", "%o %s\\n"])
}

/// Batches of producer 501 that a broker took before it was killed (and,
/// later, stopped cleanly: the state then comes from the snapshot the
/// close wrote) are answered as before when sent again; a gap is refused;
/// a producer the partition does not know starts wherever its numbers are
/// (as on Kafka since 2.5).
#[test]
fn a_retry_after_a_broker_restart_is_stored_once_and_gaps_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, kafka) = broker(dir.path());
    let mut s = TcpStream::connect(&kafka).unwrap();
    let a = idempotent_batch(501, 0, 0, 3);
    let b = idempotent_batch(501, 0, 3, 2);
    assert_eq!(produce_v3(&mut s, "i", &a), (0, 0));
    assert_eq!(produce_v3(&mut s, "i", &b), (0, 3));
    first.kill9();

    let (mut second, kafka) = broker(dir.path());
    let mut s = TcpStream::connect(&kafka).unwrap();
    assert_eq!(produce_v3(&mut s, "i", &b), (0, 3), "b's retry");
    assert_eq!(produce_v3(&mut s, "i", &a), (0, 0), "a's retry");
    let gap = idempotent_batch(501, 0, 9, 1);
    assert_eq!(produce_v3(&mut s, "i", &gap), (OUT_OF_ORDER, -1));
    let stranger = idempotent_batch_of(502, 0, 4, 1, "s");
    assert_eq!(produce_v3(&mut s, "i", &stranger), (0, 5));
    let c = idempotent_batch(501, 0, 5, 1);
    assert_eq!(produce_v3(&mut s, "i", &c), (0, 6));
    assert!(second.terminate().success());

    let (third, kafka) = broker(dir.path());
    let mut s = TcpStream::connect(&kafka).unwrap();
    assert_eq!(produce_v3(&mut s, "i", &c), (0, 6), "c's retry");
    assert_eq!(produce_v3(&mut s, "i", &a), (0, 0), "a's retry");
    assert_eq!(produce_v3(&mut s, "i", &stranger), (0, 5), "its retry");
    let d = idempotent_batch(501, 0, 6, 1);
    assert_eq!(produce_v3(&mut s, "i", &d), (0, 7));
    assert_eq!(
        stored(&third.addr, "i"),
        "0 r0\n1 r1\n2 r2\n3 r3\n4 r4\n5 s4\n6 r5\n7 r6\n"
    );
}

/// Three replicas; producer 601's batches acknowledged by the leader
/// (acks=all: every in-sync replica has them) are answered as before by
/// the replica that leads after the leader is killed: the follower built
/// the same producer state as it copied them.
#[test]
fn a_retry_after_a_failover_is_answered_by_the_new_leader_with_the_first_offsets() {
    let mut cluster = Cluster::with_kafka(3, &["--replication-factor", "3"]).unwrap();
    // The topic is made by the first produce (to any broker); then the
    // leader takes the batches.
    let mut s = TcpStream::connect(cluster.kafka_addr(0)).unwrap();
    let _ = produce_v3(&mut s, "f", &idempotent_batch_of(-1, -1, -1, 1, "plain-"));
    cluster.wait_full_isr("f", 0, BOUND);
    let old = cluster.wait_leader("f", 0, BOUND);
    let leads = cluster.slot_of(old.leader.as_deref().unwrap());
    let mut s = TcpStream::connect(cluster.kafka_addr(leads)).unwrap();
    let base = produce_v3(&mut s, "f", &idempotent_batch_of(-1, -1, -1, 1, "plain-")).1;
    let a = idempotent_batch(601, 0, 0, 3);
    let b = idempotent_batch(601, 0, 3, 2);
    assert_eq!(produce_v3(&mut s, "f", &a), (0, base + 1));
    assert_eq!(produce_v3(&mut s, "f", &b), (0, base + 4));
    cluster.kill9(leads);
    let new = cluster.wait_new_epoch("f", 0, old.epoch, None, BOUND);
    let leads = cluster.slot_of(new.leader.as_deref().unwrap());
    let mut s = TcpStream::connect(cluster.kafka_addr(leads)).unwrap();
    common::eventually("the new leader answers b's retry", BOUND, || {
        produce_v3(&mut s, "f", &b) == (0, base + 4)
    });
    assert_eq!(produce_v3(&mut s, "f", &a), (0, base + 1), "a's retry");
    let gap = idempotent_batch(601, 0, 7, 1);
    assert_eq!(produce_v3(&mut s, "f", &gap), (OUT_OF_ORDER, -1));
    let c = idempotent_batch(601, 0, 5, 1);
    assert_eq!(produce_v3(&mut s, "f", &c), (0, base + 6));
    let read = stored(&cluster.addr(leads), "f");
    let ours: Vec<&str> = read.lines().filter(|l| l.contains(" r")).collect();
    let expected: Vec<String> = (0..6).map(|i| format!("{} r{i}", base + 1 + i)).collect();
    assert_eq!(ours, expected, "{read}");
}

/// InitProducerId v0 on `stream`: (error code, producer id, epoch).
fn init_producer_id(stream: &mut TcpStream) -> (i16, i64, i16) {
    use std::io::{Read, Write};
    let mut body = (-1i16).to_be_bytes().to_vec(); // no transactional id
    body.extend_from_slice(&60_000i32.to_be_bytes());
    stream
        .write_all(&common::kafka::frame(22, 0, 5, &body))
        .unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut answer).unwrap();
    // Correlation id, throttle time, then the fields.
    let error = i16::from_be_bytes(answer[8..10].try_into().unwrap());
    let id = i64::from_be_bytes(answer[10..18].try_into().unwrap());
    let epoch = i16::from_be_bytes(answer[18..20].try_into().unwrap());
    (error, id, epoch)
}

/// Two brokers of one registry hand out producer ids from blocks they
/// reserve there, to Kafka's InitProducerId and to klog's
/// init_producer_id: never the same id, also after a restart.
#[test]
fn brokers_of_one_registry_never_hand_out_the_same_producer_id() {
    use klog::coord::producer_ids::BLOCK;
    let mut cluster = Cluster::with_kafka(2, &[]).unwrap();
    let mut ids = std::collections::BTreeSet::new();
    for round in 0..2 {
        for slot in 0..2 {
            let mut s = TcpStream::connect(cluster.kafka_addr(slot)).unwrap();
            for _ in 0..3 {
                let (error, id, epoch) = init_producer_id(&mut s);
                assert_eq!((error, epoch), (0, 0));
                assert!(ids.insert(id), "round {round}: id {id} twice");
            }
        }
        if round == 0 {
            cluster.kill9(0);
            cluster.restart(0);
        }
    }
    // klog's own protocol hands them out from the same blocks.
    for slot in 0..2 {
        let mut conn = klog::client::connection::Connection::connect(&cluster.addr(slot)).unwrap();
        let (id, epoch) = conn.init_producer_id().unwrap();
        assert_eq!(epoch, 0);
        assert!(ids.insert(id), "id {id} twice");
    }
    // Blocks of the registry: the first three blocks, nothing random.
    assert!(ids.iter().all(|id| (0..3 * BLOCK).contains(id)), "{ids:?}");
}

/// librdkafka's idempotent producer (confluent-kafka) writing 3,000
/// values with acks=all through two failovers, each made so that the
/// producer must send again batches the new leader already has: one
/// follower is frozen (SIGSTOP, still in sync: acks=all answers wait for
/// it), the leader takes and replicates batches to the other follower
/// for half a second without answering, and is killed; the other
/// follower leads. Every value is stored exactly once, in order: the new
/// leader built the producer state as it copied the batches, and answers
/// their retries with the first copies' offsets. (Without that, the
/// retries are stored twice: the test fails.)
#[test]
fn librdkafkas_idempotent_producer_stores_each_record_once_across_failovers() {
    let Some(python) = common::kafka::python() else {
        return;
    };
    let args = ["--replication-factor", "3", "--partitions", "1"];
    let mut cluster = Cluster::with_kafka(3, &args).unwrap();
    let bootstrap: Vec<String> = (0..3).map(|s| cluster.kafka_addr(s)).collect();
    let mut s = TcpStream::connect(&bootstrap[0]).unwrap();
    let _ = produce_v3(&mut s, "x", &idempotent_batch_of(-1, -1, -1, 1, "plain-"));
    cluster.wait_full_isr("x", 0, BOUND);
    let count = 3_000u64;
    let mut command = std::process::Command::new(&python);
    command.arg(common::kafka::script("idempotent.py")).args([
        &bootstrap.join(","),
        "x",
        &count.to_string(),
        "true",
    ]);
    let mut producer = common::Proc::spawn_command(command, std::process::Stdio::null());
    for at in [800, 1900] {
        let sent = |l: &str| {
            l.strip_prefix("progress ")
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n >= at)
        };
        producer.wait_stderr("progress", sent, Duration::from_secs(60));
        kill_leader_holding_unanswered(&mut cluster, "x");
        cluster.wait_full_isr("x", 0, BOUND);
    }
    let acked = producer.all_lines(Duration::from_secs(180));
    let status = producer.child.try_wait();
    assert_eq!(
        acked.len() as u64,
        count,
        "every value acknowledged: {:?} {status:?}",
        producer.stderr_lines()
    );
    let new = cluster.wait_leader("x", 0, BOUND);
    let leads = cluster.slot_of(new.leader.as_deref().unwrap());
    let read = stored(&cluster.addr(leads), "x");
    let values: Vec<&str> = read
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, v)| v))
        .filter(|v| !v.starts_with("plain-"))
        .collect();
    let expected: Vec<String> = (0..count).map(|i| i.to_string()).collect();
    assert_eq!(values.len(), expected.len(), "stored once each");
    assert_eq!(values, expected, "in order");
}

/// klog's own produce request follows the same rules: a batch sent again
/// is answered with its first offset and stored once; a gap is
/// out_of_order_sequence; an older epoch producer_fenced.
#[test]
fn klogs_own_produce_request_follows_the_same_rules() {
    use klog::protocol::{self, ErrorCode};
    let dir = tempfile::tempdir().unwrap();
    let (broker, _) = broker(dir.path());
    let mut raw = common::Raw::connect(&broker.addr);
    let mut produce = |records: &[u8]| {
        let mut frame = Vec::new();
        protocol::produce_request(&mut frame, 9, -1, 10_000, "n", 0, records);
        let (code, message, body) = raw.call(&frame);
        let base =
            (code == ErrorCode::None).then(|| u64::from_le_bytes(body[..8].try_into().unwrap()));
        (code, base, message)
    };
    let (a, b) = (
        idempotent_batch(801, 1, 0, 3),
        idempotent_batch(801, 1, 3, 2),
    );
    assert_eq!(produce(&a).1, Some(0));
    assert_eq!(produce(&b).1, Some(3));
    assert_eq!(produce(&a).1, Some(0), "a retry");
    let (code, _, message) = produce(&idempotent_batch(801, 1, 9, 1));
    assert_eq!(code, ErrorCode::OutOfOrderSequence, "{message}");
    let (code, _, message) = produce(&idempotent_batch(801, 0, 5, 1));
    assert_eq!(code, ErrorCode::ProducerFenced, "{message}");
    assert_eq!(stored(&broker.addr, "n"), "0 r0\n1 r1\n2 r2\n3 r3\n4 r4\n");
}

/// Ends `feeder`'s input to `producer` (klog-produce) and waits for it to
/// end, which it must with exit 0; the numbers fed, and its stderr.
fn fed_and_ended(mut feeder: common::Feeder, producer: &mut common::Proc) -> (u64, Vec<String>) {
    feeder.finish();
    let fed = feeder.fed();
    common::eventually("klog-produce ends", Duration::from_secs(120), || {
        producer.child.try_wait().unwrap().is_some()
    });
    let status = producer.child.try_wait().unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let stderr = producer.stderr_lines();
    assert!(status.success(), "{status:?}: {stderr:?}");
    (fed, stderr)
}

/// A failover that makes producers send again batches the new leader
/// holds: a follower of `topic`'s partition 0 is frozen, so that the
/// leader replicates to the other and answers nothing (acks=all) for
/// half a second, then the leader is killed (-9); once another leads, the
/// follower thaws and the killed broker starts again.
fn kill_leader_holding_unanswered(cluster: &mut Cluster, topic: &str) {
    let old = cluster.wait_leader(topic, 0, BOUND);
    let leads = cluster.slot_of(old.leader.as_deref().unwrap());
    let frozen = (leads + 1) % 3;
    cluster.freeze(frozen);
    std::thread::sleep(Duration::from_millis(500));
    cluster.kill9(leads);
    cluster.wait_new_epoch(topic, 0, old.epoch, Some(frozen), BOUND);
    cluster.thaw(frozen);
    cluster.restart(leads);
}

/// Pipes numbers into `klog-produce --registry R --acks all` (and
/// `extra`) through `rounds` failovers of two kinds, in turn: the leader
/// killed (-9) after half a second of appends a frozen follower kept it
/// from answering (as in the librdkafka test above: the batches sent
/// again are ones the new leader holds), and the leader frozen (SIGSTOP)
/// until another leads, then thawed (a zombie: what it held unanswered
/// comes back refused, to go again after later batches queued for the
/// new leader). Returns the values stored, in order, and klog-produce's
/// stderr.
fn klog_produce_through_failovers(extra: &[&str], rounds: usize) -> (Vec<u64>, Vec<String>) {
    let mut cluster = Cluster::three_fast(&[]);
    let mut produce = vec![
        "--registry",
        cluster.spec(),
        "-t",
        "k",
        "--acks",
        "all",
        "--linger",
        "5ms",
        "--message-timeout",
        "90s",
    ];
    produce.extend_from_slice(extra);
    let mut producer =
        common::Proc::spawn_with_stdin("klog-produce", &produce, std::process::Stdio::piped());
    let feeder = common::Feeder::start(producer.child.stdin.take().expect("stdin"));
    feeder.feed_more(200, BOUND);
    cluster.wait_full_isr("k", 0, BOUND);
    for round in 0..rounds {
        feeder.feed_more(100, BOUND);
        if round % 2 == 0 {
            kill_leader_holding_unanswered(&mut cluster, "k");
        } else {
            let old = cluster.wait_leader("k", 0, BOUND);
            let leads = cluster.slot_of(old.leader.as_deref().unwrap());
            cluster.freeze(leads);
            cluster.wait_new_epoch("k", 0, old.epoch, Some(leads), BOUND);
            cluster.thaw(leads);
        }
        cluster.wait_full_isr("k", 0, BOUND);
    }
    feeder.feed_more(200, BOUND);
    let (fed, stderr) = fed_and_ended(feeder, &mut producer);
    let leader = cluster.wait_leader("k", 0, BOUND);
    let leads = cluster.slot_of(leader.leader.as_deref().unwrap());
    let read = stored(&cluster.addr(leads), "k");
    let values: Vec<u64> = read
        .lines()
        .filter_map(|l| l.split_once(' ')?.1.parse().ok())
        .collect();
    assert!(values.len() as u64 >= fed, "every line stored: {fed} fed");
    (values, stderr)
}

/// klog-produce is idempotent by default with --acks all: through twenty
/// failovers (ten leaders killed, ten frozen) that make it send batches
/// again which the new leader holds (it says so), each line is stored
/// once, in order. With --no-idempotence four such failovers store some
/// twice (so the test can fail).
#[test]
fn klog_produce_stores_each_line_once_across_failovers() {
    let (values, stderr) = klog_produce_through_failovers(&[], 20);
    let out_of_place = values
        .iter()
        .enumerate()
        .find(|(i, v)| **v != *i as u64 + 1)
        .map(|(i, v)| format!("offset {i} holds {v}"));
    assert_eq!(
        out_of_place,
        None,
        "each once, in order ({} stored)",
        values.len()
    );
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("sent again (numbered: stored once)")),
        "it did send again: {stderr:?}"
    );
    let (values, _) = klog_produce_through_failovers(&["--no-idempotence"], 4);
    let mut seen = std::collections::HashSet::new();
    let twice = values.iter().filter(|v| !seen.insert(**v)).count();
    assert!(twice > 0, "without idempotence some are stored twice");
}

/// The (producer id, epoch, base sequence) of each batch `klog-produce
/// -b` stores of five lines in batches of two, with `args`.
fn numbers_stored(args: &[&str]) -> Vec<(i64, i64, i64)> {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    let mut all = vec!["--batch", "2"];
    all.extend_from_slice(args);
    common::produce_to(&broker.addr, "n", "a\nb\nc\nd\ne\n", &all);
    let out = common::bin("klog-dump")
        .arg(dir.path().join("n-0"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lines = String::from_utf8(out.stdout).unwrap();
    let batches = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "batch");
    let number = |v: &serde_json::Value, k: &str| v[k].as_i64().unwrap();
    batches
        .map(|b| {
            let id = number(&b, "producer_id");
            (
                id,
                number(&b, "producer_epoch"),
                number(&b, "base_sequence"),
            )
        })
        .collect()
}

/// klog-produce numbers its batches with --acks all (the default): one
/// producer id, each partition's sequence following on; not with
/// --no-idempotence, -X enable.idempotence=false or --acks 1; and
/// enable.idempotence=true with --acks 1 is refused, as Kafka's producer
/// refuses it.
#[test]
fn klog_produce_numbers_its_batches_with_acks_all_unless_told_not_to() {
    let numbered = numbers_stored(&[]);
    let id = numbered[0].0;
    assert!(id >= 0, "{numbered:?}");
    assert_eq!(numbered, [(id, 0, 0), (id, 0, 2), (id, 0, 4)]);
    let plain = vec![(-1, -1, -1); 3];
    assert_eq!(numbers_stored(&["--no-idempotence"]), plain);
    assert_eq!(numbers_stored(&["-X", "enable.idempotence=false"]), plain);
    assert_eq!(numbers_stored(&["--acks", "1"]), plain);
    common::bin("klog-produce")
        .args(["-b", "127.0.0.1:1", "-t", "n", "--acks", "1"])
        .args(["-X", "enable.idempotence=true"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("needs --acks all"));
}

/// Pipes numbers into `klog-produce -b` (and `extra`) with a request
/// timeout of a second while its broker is frozen past it twice (the
/// producer gives the connection up and sends its requests again on a
/// new one while the first copies wait in the frozen broker's socket) and
/// killed (-9) and started again on its address twice; returns the values
/// stored, in order, and how many were fed.
fn klog_produce_b_through_freezes_and_restarts(extra: &[&str]) -> (Vec<u64>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = BrokerProc::start(dir.path(), &["--partitions", "1"]);
    let addr = broker.addr.clone();
    let mut produce = vec!["-b", &addr, "-t", "z", "--linger", "5ms"];
    produce.extend_from_slice(&["--request-timeout", "1s", "--message-timeout", "60s"]);
    produce.extend_from_slice(extra);
    let mut producer =
        common::Proc::spawn_with_stdin("klog-produce", &produce, std::process::Stdio::piped());
    let feeder = common::Feeder::start(producer.child.stdin.take().expect("stdin"));
    feeder.feed_more(200, BOUND);
    for round in 0..4 {
        if round % 2 == 0 {
            broker.signal(nix::sys::signal::Signal::SIGSTOP);
            std::thread::sleep(Duration::from_millis(2500));
            broker.signal(nix::sys::signal::Signal::SIGCONT);
        } else {
            broker.kill9();
            let args = ["--partitions", "1", "--listen", addr.as_str()];
            broker = BrokerProc::start(dir.path(), &args);
        }
        feeder.feed_more(200, BOUND);
    }
    let (fed, _) = fed_and_ended(feeder, &mut producer);
    let read = common::consume_from(&broker.addr, "z", &["-f", "%s\\n"]);
    let values = read.lines().filter_map(|l| l.parse().ok()).collect();
    (values, fed)
}

/// klog-produce -b, idempotent by default: through a broker frozen past
/// the request timeout and killed and restarted, each line is stored
/// once, in order; with --no-idempotence some are stored twice.
#[test]
fn klog_produce_b_stores_each_line_once_through_freezes_and_restarts() {
    let (values, fed) = klog_produce_b_through_freezes_and_restarts(&[]);
    let out_of_place = values
        .iter()
        .enumerate()
        .find(|(i, v)| **v != *i as u64 + 1)
        .map(|(i, v)| format!("offset {i} holds {v}"));
    assert_eq!(out_of_place, None, "{} stored of {fed}", values.len());
    assert_eq!(values.len() as u64, fed);
    let (values, _) = klog_produce_b_through_freezes_and_restarts(&["--no-idempotence"]);
    let mut seen = std::collections::HashSet::new();
    let twice = values.iter().filter(|v| !seen.insert(**v)).count();
    assert!(twice > 0, "without idempotence some are stored twice");
}

/// klog-produce --registry asks a broker for its producer id, as Kafka's
/// producers do (the broker checks that it may write): two runs take ids
/// of the one block the broker reserved, and write nothing to the
/// registry.
#[test]
fn klog_produce_with_a_registry_takes_its_id_from_a_broker() {
    let cluster =
        Cluster::start(common::registry::Backend::Dir, 1, &["--partitions", "1"]).unwrap();
    let block = std::path::Path::new(cluster.spec()).join("config/producer-ids/block.json");
    for run in ["first", "second"] {
        let out = common::bin("klog-produce")
            .args(["--registry", cluster.spec(), "-t", "r", "-q"])
            .write_stdin("a\n")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = std::fs::read_to_string(&block).expect("the broker reserved a block");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["next"].as_i64(),
            Some(1000),
            "{run} run: one block, {text}"
        );
    }
    let out = common::bin("klog-dump")
        .arg(cluster.data_dir(0).join("r-0"))
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut producers: Vec<i64> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "batch")
        .map(|v| v["producer_id"].as_i64().unwrap())
        .collect();
    producers.dedup();
    assert_eq!(producers.len(), 2, "two producers: {producers:?}");
    assert!(
        producers.iter().all(|id| (0..1000).contains(id)),
        "{producers:?}"
    );
}
