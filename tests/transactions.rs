//! Transactions in the log as users meet them: commit and abort markers
//! (control batches) and open transactions in `klog-dump`, and consumers
//! that never hand a marker out as a record.

mod common;

use std::path::Path;

use common::kafka::{self, Kcat};
use common::txn::{batch_of, write_transactions};
use common::{bin, consume, consume_from, BrokerProc};

/// klog-dump shows each marker as Kafka's dump does, and the transaction
/// still open; --verify finds nothing wrong with control batches.
#[test]
fn klog_dump_shows_markers_and_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    write_transactions(dir.path());
    let part = dir.path().join("t-0");
    let part = part.to_str().unwrap();
    let out = bin("klog-dump").args(["--records", part]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let markers: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("endTxnMarker"))
        .collect();
    assert_eq!(markers.len(), 2, "{text}");
    assert!(
        markers[0].starts_with("| offset: 4 ")
            && markers[0].ends_with("endTxnMarker: COMMIT coordinatorEpoch: 3")
    );
    assert!(
        markers[1].starts_with("| offset: 5 ")
            && markers[1].ends_with("endTxnMarker: ABORT coordinatorEpoch: 3")
    );
    assert!(
        text.contains("isTransactional: true isControl: true"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l == "openTransaction: producerId: 9 firstOffset: 6"),
        "{text}"
    );
    let json = bin("klog-dump")
        .args(["--json", "--records", part])
        .output()
        .unwrap();
    let json = String::from_utf8(json.stdout).unwrap();
    assert!(json.contains(r#""end_txn_marker":"ABORT""#), "{json}");
    assert!(
        json.contains(r#"{"first_offset":6,"producer_id":9,"type":"open_transaction"}"#),
        "{json}"
    );
    bin("klog-dump").args(["--verify", part]).assert().code(0);
}

/// A consumer never hands a marker out as a record. read_committed (the
/// default of klog-consume, as of kcat) reads no aborted record and none
/// from the first transaction still open on (its end for -e, -o end and
/// -o -N); read_uncommitted reads every transaction's records; so does
/// a data directory read directly.
#[test]
fn consumers_pass_over_markers_and_read_what_their_isolation_allows() {
    let dir = tempfile::tempdir().unwrap();
    write_transactions(dir.path());
    let all = "0 plain\n1 committed\n2 aborted\n3 plain-2\n6 open\n";
    let committed = "0 plain\n1 committed\n3 plain-2\n";
    let f = ["-f", "%o %s\\n"];
    assert_eq!(consume(dir.path(), "t", &f), all);
    let data = dir.path().to_str().unwrap();
    let refused = [
        "--data-dir",
        data,
        "-t",
        "t",
        "-e",
        "-X",
        "isolation.level=read_committed",
    ];
    let out = bin("klog-consume").args(refused).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("read_committed needs a broker"), "{stderr}");
    let broker = BrokerProc::start(&dir.path().join("."), &["--kafka-listen", "127.0.0.1:0"]);
    let klog = |args: &[&str]| consume_from(&broker.addr, "t", &[&f[..], args].concat());
    assert_eq!(klog(&[]), committed, "read_committed by default");
    let uncommitted = ["-X", "isolation.level=READ_UNCOMMITTED"];
    assert_eq!(klog(&uncommitted), all, "read_uncommitted");
    assert_eq!(klog(&["--isolation-level", "read_committed"]), committed);
    // The end of a read_committed consumer is the last stable offset (6).
    assert_eq!(klog(&["-o", "-3"]), "3 plain-2\n", "-o -3: offsets 3 to 5");
    assert_eq!(klog(&["-o", "end"]), "");
    let uncommitted_tail = [&uncommitted[..], &["-o", "-3"]].concat();
    assert_eq!(klog(&uncommitted_tail), "6 open\n", "offsets 4 to 6");
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let kafka_addr = broker.kafka_addr();
    let k = Kcat::at(&kcat, &kafka_addr);
    let uncommitted = ["-X", "isolation.level=read_uncommitted", "-f", "%o %s\\n"];
    assert_eq!(k.consume("t", &uncommitted), all, "read_uncommitted");
    // librdkafka's default is read_committed.
    assert_eq!(
        k.consume("t", &f),
        committed,
        "read_committed: no aborted record, none past the open transaction"
    );
}

/// `transactional.py MODE TOPIC ARGS...` against the Kafka listener at
/// `bootstrap`: its stdout's lines.
fn txn_script(python: &Path, bootstrap: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec![bootstrap];
    all.extend_from_slice(args);
    let out = kafka::run_script(python, "transactional.py", &all);
    out.lines().map(str::to_string).collect()
}

/// confluent-kafka's transactional producer: a committed transaction is
/// read by a read_committed consumer, an aborted one never; both are in
/// the log, with their markers, for a read_uncommitted reader.
#[test]
fn confluent_kafka_commits_and_aborts_transactions() {
    let Some(python) = kafka::python() else {
        return;
    };
    let broker = kafka::KafkaBroker::start(&[]);
    let run = |args: &[&str]| txn_script(&python, &broker.kafka, args);
    assert_eq!(run(&["commit", "t", "app-1", "a", "5"]), ["committed"]);
    assert_eq!(run(&["abort", "t", "app-1", "b", "4"]), ["aborted"]);
    assert_eq!(run(&["commit", "t", "app-1", "c", "3"]), ["committed"]);
    let read = run(&["read", "t", "8"]);
    let expected: Vec<String> = (0..5)
        .map(|i| format!("a-{i}"))
        .chain((0..3).map(|i| format!("c-{i}")))
        .collect();
    assert_eq!(read, expected, "read_committed: the committed, in order");
    let committed = consume_from(broker.addr(), "t", &[]);
    assert_eq!(
        committed.lines().collect::<Vec<_>>(),
        expected,
        "klog-consume"
    );
    // read_uncommitted reads the aborted records too, and no marker.
    let all = consume_from(
        broker.addr(),
        "t",
        &["--isolation-level", "read_uncommitted"],
    );
    assert_eq!(all.lines().count(), 12, "{all}");
    assert!(all.contains("b-3"));
}

/// Two producers' transactions open together, their batches interleaved
/// in one partition, a third of each one's aborted; then one left open
/// (with a timeout longer than the reads' deadline), and more of both
/// kinds after it: klog-consume reads what kcat reads (both
/// read_committed, to the open transaction), also when each fetch ends
/// inside a transaction (1 KiB fetches), every committed value before it
/// once; read_uncommitted reads every value.
#[test]
fn klog_consume_reads_committed_records_as_kcat_does() {
    let (Some(python), Some(kcat)) = (kafka::python(), kafka::kcat_path()) else {
        return;
    };
    let broker = kafka::KafkaBroker::start(&[]);
    let (txns, n) = (12, 40);
    let overlap = |txn: &str, txns: usize| {
        let args = ["overlap", "t", txn, &txns.to_string(), &n.to_string()];
        assert_eq!(txn_script(&python, &broker.kafka, &args), ["done"]);
    };
    overlap("app", txns);
    let _open = spawn_txn(
        &python,
        &broker.kafka,
        &["open", "t", "app-o", "o", "5"],
        "600000",
    );
    overlap("later", 3);
    let expected: std::collections::BTreeSet<String> = [("a", 1), ("b", 2)]
        .iter()
        .flat_map(|&(id, aborts)| {
            (0..txns)
                .filter(move |t| t % 3 != aborts)
                .map(move |t| (id, t))
        })
        .flat_map(|(id, t)| (0..n).map(move |i| format!("{id}-{t}-{i}")))
        .collect();
    let by_kcat = Kcat::at(&kcat, &broker.kafka).consume("t", &[]);
    let by_klog = consume_from(broker.addr(), "t", &[]);
    assert_eq!(by_klog, by_kcat, "klog-consume and kcat");
    let small = consume_from(broker.addr(), "t", &["--fetch-bytes", "1KiB"]);
    assert_eq!(small, by_kcat, "1 KiB fetches");
    let read: Vec<&str> = by_klog.lines().collect();
    let unique: std::collections::BTreeSet<String> = read.iter().map(|v| v.to_string()).collect();
    assert_eq!(
        (read.len(), unique),
        (expected.len(), expected),
        "each committed value before the open transaction once"
    );
    let turns = read.windows(2).filter(|w| w[0][..1] != w[1][..1]).count();
    assert!(
        turns > 2,
        "the producers' transactions interleave: {turns} turns"
    );
    let all = consume_from(
        broker.addr(),
        "t",
        &["--isolation-level", "read_uncommitted"],
    );
    assert_eq!(
        all.lines().count(),
        2 * txns * n + 5 + 2 * 3 * n,
        "read_uncommitted"
    );
}

/// kafka-python's transactional producer and read_committed consumer:
/// the committed transaction is read, the aborted one is not.
#[test]
fn kafka_python_commits_and_aborts_transactions() {
    let Some(python) = kafka::python() else {
        return;
    };
    let broker = kafka::KafkaBroker::start(&[]);
    let out = kafka::run_script(&python, "transactional_kp.py", &[&broker.kafka, "t"]);
    assert_eq!(out, "c-0\nc-1\nc-2\n");
    assert_eq!(consume_from(broker.addr(), "t", &[]), out, "klog-consume");
    let uncommitted = ["-X", "isolation.level=read_uncommitted"];
    assert_eq!(
        consume_from(broker.addr(), "t", &uncommitted)
            .lines()
            .count(),
        5
    );
}

/// A second producer of one transactional id fences the first: the
/// first's commit is refused, its records never read committed; the
/// second's transaction commits.
#[test]
fn a_zombie_transactional_producer_is_fenced() {
    let Some(python) = kafka::python() else {
        return;
    };
    let broker = kafka::KafkaBroker::start(&[]);
    let lines = txn_script(&python, &broker.kafka, &["zombie", "t", "app-z"]);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("fenced: "), "{lines:?}");
    assert_eq!(lines[1], "second committed");
    let read = txn_script(&python, &broker.kafka, &["read", "t", "2"]);
    assert_eq!(read, ["second-0", "second-1"]);
}

/// `transactional.py` with `args` against the Kafka listener at
/// `bootstrap`, running (killed when dropped), its stdin a pipe.
fn spawn_txn(python: &Path, bootstrap: &str, args: &[&str], timeout_ms: &str) -> common::Proc {
    let mut command = std::process::Command::new(python);
    command
        .arg(kafka::script("transactional.py"))
        .arg(bootstrap)
        .args(args)
        .env("TXN_TIMEOUT_MS", timeout_ms);
    let p = common::Proc::spawn_command(command, std::process::Stdio::piped());
    let said = p.take_lines(1, std::time::Duration::from_secs(60));
    assert_eq!(said, ["open"], "{:?}", p.stderr_lines());
    p
}

/// A broker whose topic t holds a transaction of `txn`, with a timeout
/// of `timeout_ms`, that its producer (killed) left open.
fn left_open(python: &Path, txn: &str, timeout_ms: &str) -> kafka::KafkaBroker {
    let broker = kafka::KafkaBroker::start(&[]);
    let args = ["open", "t", txn, "dead", "3"];
    drop(spawn_txn(python, &broker.kafka, &args, timeout_ms));
    broker
}

/// A producer that dies with its transaction open: the transaction is
/// aborted once its timeout passes (the epoch bumped), and read_committed
/// readers get past it; `klog-dump` shows the abort.
#[test]
fn an_open_transaction_past_its_timeout_is_aborted() {
    let Some(python) = kafka::python() else {
        return;
    };
    let broker = left_open(&python, "app-t", "2000");
    let run = |args: &[&str]| txn_script(&python, &broker.kafka, args);
    assert_eq!(run(&["commit", "t", "app-u", "u", "2"]), ["committed"]);
    // Held below the open transaction until it is aborted.
    assert_eq!(run(&["read", "t", "2"]), ["u-0", "u-1"]);
    let text = dump_records(&broker.data_dir().join("t-0"));
    assert!(text.contains("endTxnMarker: ABORT"), "{text}");
    assert!(!text.contains("openTransaction"), "{text}");
}

/// A new instance of a producer whose predecessor died in a transaction
/// aborts that transaction as it starts, without waiting for its timeout.
#[test]
fn a_new_instance_aborts_its_predecessors_open_transaction() {
    let Some(python) = kafka::python() else {
        return;
    };
    let broker = left_open(&python, "app-n", "60000");
    let run = |args: &[&str]| txn_script(&python, &broker.kafka, args);
    assert_eq!(run(&["commit", "t", "app-n", "new", "2"]), ["committed"]);
    assert_eq!(run(&["read", "t", "2"]), ["new-0", "new-1"]);
}

/// The broker that coordinates a transaction, and leads its partition,
/// is killed between the transaction's records and its commit: the
/// producer commits through another broker, which finds the transaction
/// in the registry; read_committed readers get every record once.
#[test]
fn a_transaction_outlives_its_coordinator() {
    use common::cluster::Cluster;
    let Some(python) = kafka::python() else {
        return;
    };
    let bound = std::time::Duration::from_secs(60);
    let mut cluster = Cluster::with_kafka(3, &["--replication-factor", "3"]).unwrap();
    // The topic, made by a plain record, led by broker 0's slot or
    // another; the producer's coordinator is the broker it asks first.
    kafka::Kcat::at(&kafka::kcat_path().unwrap(), &cluster.kafka_addr(0)).produce(
        "t",
        b"seed\n",
        &[],
    );
    cluster.wait_full_isr("t", 0, bound);
    let leader = cluster.wait_leader("t", 0, bound);
    let leads = cluster.slot_of(leader.leader.as_deref().unwrap());
    let bootstrap = cluster.kafka_addr(leads);
    let others: Vec<String> = (0..3)
        .filter(|s| *s != leads)
        .map(|s| cluster.kafka_addr(s))
        .collect();
    let all = format!("{bootstrap},{}", others.join(","));
    let mut held = spawn_txn(&python, &all, &["held", "t", "app-c", "v", "5"], "60000");
    cluster.kill9(leads);
    cluster.wait_new_epoch("t", 0, leader.epoch, None, bound);
    use std::io::Write;
    held.child
        .stdin
        .take()
        .unwrap()
        .write_all(b"commit\n")
        .unwrap();
    let said = held.take_lines(1, std::time::Duration::from_secs(90));
    assert_eq!(said, ["committed"], "{:?}", held.stderr_lines());
    let read = txn_script(&python, &others[0], &["read", "t", "6"]);
    let values: Vec<String> = std::iter::once("seed".to_string())
        .chain((0..5).map(|i| format!("v-{i}")))
        .collect();
    assert_eq!(read, values);
}

/// With `--authorize`, a transactional id is a resource of its own, as on
/// Kafka: a user that may write to the topic but not to the transactional
/// id is refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED (it cannot fence
/// another application's producer); an ACL on the id's prefix lets it
/// commit, and an id outside the prefix stays refused.
#[test]
fn a_transactional_id_needs_an_acl_of_its_own() {
    let Some(python) = kafka::python() else {
        return;
    };
    let flags = [
        "--sasl-mechanisms",
        "SCRAM-SHA-512",
        "--authorize",
        "--super-users",
        "User:admin",
    ];
    let broker = kafka::KafkaBroker::with_registry(&flags);
    let registry = broker.registry.clone().unwrap();
    kafka::klog_broker(&registry, &["user", "add", "tx"], "t-secret\n");
    for operation in ["write", "create"] {
        let allow = ["acl", "add", "--allow", "User:tx", "--topic", "t"];
        kafka::klog_broker(
            &registry,
            &[&allow[..], &["--operation", operation]].concat(),
            "",
        );
    }
    let tx = kafka::login("SCRAM-SHA-512", "tx", "t-secret");
    let run = |txn: &str| {
        let mut command = std::process::Command::new(&python);
        command
            .arg(kafka::script("transactional.py"))
            .args([&broker.kafka, "commit", "t", txn, "v", "2"])
            .env("KLOG_SECURITY", &tx);
        let out = kafka::run_bounded(command, b"", std::time::Duration::from_secs(90));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let refused = "refused: TRANSACTIONAL_ID_AUTHORIZATION_FAILED";
    assert_eq!(run("app-1"), refused);
    let allow = ["acl", "add", "--allow", "User:tx", "--operation", "write"];
    let id = ["--transactional-id", "app-", "--prefixed"];
    kafka::klog_broker(&registry, &[&allow[..], &id[..]].concat(), "");
    // The broker loads the new ACLs within a moment.
    common::eventually(
        "the transactional id's ACL",
        std::time::Duration::from_secs(30),
        || run("app-1") == "committed",
    );
    assert_eq!(run("other-1"), refused);
}

/// A transactional batch without a transactional id is refused
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka refuses it (one the
/// coordinator knows no transaction of, a partition not added, is
/// INVALID_TXN_STATE): it would leave a transaction open that nothing
/// ends, and read_committed readers stuck below it.
#[test]
fn a_transactional_batch_outside_any_transaction_is_refused() {
    let broker = kafka::KafkaBroker::start(&[]);
    broker.produce_lines("t", 1);
    let mut s = std::net::TcpStream::connect(&broker.kafka).unwrap();
    let (code, _) = kafka::produce_v3(&mut s, "t", &batch_of(77, 0, &["stray"]));
    // Without a transactional id, as Kafka: nobody adds records to a
    // transaction (another's open one too) without write on its id.
    assert_eq!(code, 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED");
    assert_eq!(consume_from(broker.addr(), "t", &[]), "1\n");
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let k = Kcat::at(&kcat, &broker.kafka);
    assert_eq!(k.consume("t", &[]), "1\n", "read_committed is not held");
}

/// A broker restarted after a producer's transaction was left open
/// aborts it once its timeout passes, with no Kafka client connected to
/// it since (the coordinator starts with the broker).
#[test]
fn a_restarted_broker_aborts_a_transaction_left_open() {
    let Some(python) = kafka::python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = ["--kafka-listen", "127.0.0.1:0"];
    let mut broker = BrokerProc::start(&data, &args);
    let kafka_addr = broker.kafka_addr();
    drop(spawn_txn(
        &python,
        &kafka_addr,
        &["open", "t", "app-r", "dead", "2"],
        "2000",
    ));
    broker.kill9();
    let _again = BrokerProc::start(&data, &args);
    let part = data.join("t-0");
    common::eventually(
        "the abort marker",
        std::time::Duration::from_secs(30),
        || dump_records(&part).contains("endTxnMarker: ABORT"),
    );
}

/// `klog-dump --records` of a partition directory: its stdout.
fn dump_records(part: &Path) -> String {
    let out = bin("klog-dump")
        .args(["--records", part.to_str().unwrap()])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}
