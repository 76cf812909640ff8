//! Offsets committed inside Kafka transactions (`send_offsets_to_transaction`):
//! a consume-transform-produce loop of confluent-kafka, its consumer and
//! producer started on different brokers, crashed and restarted, with
//! the consumer's broker killed in the middle, delivers each input to
//! the output exactly once.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::kafka::{self, Kcat};

/// Records in the input topic.
const TOTAL: usize = 300;

#[test]
fn a_consume_transform_produce_loop_delivers_each_input_once_across_failovers() {
    let (Some(python), Some(kcat)) = (kafka::python(), kafka::kcat_path()) else {
        return;
    };
    let bound = Duration::from_secs(60);
    let args = ["--replication-factor", "3", "--partitions", "2"];
    let mut cluster = Cluster::with_kafka(3, &args).unwrap();
    let inputs: String = (0..TOTAL).map(|i| format!("{i}\n")).collect();
    Kcat::at(&kcat, &cluster.kafka_addr(0)).produce("in", inputs.as_bytes(), &[]);
    // A crash after three transactions: the next instance resumes from
    // the offsets they committed.
    let first = spawn_loop(&python, &cluster, Some(3));
    let said = first.take_lines(3, Duration::from_secs(120));
    let last = said.last().map(String::as_str);
    assert_eq!(last, Some("committed 3"), "{:?}", first.stderr_lines());
    drop(first);
    let second = spawn_loop(&python, &cluster, None);
    let said = second.take_lines(2, Duration::from_secs(120));
    let expected = ["committed 1", "committed 2"];
    assert_eq!(said, expected, "{:?}", second.stderr_lines());
    // The consumer's first broker, likely its group's coordinator, dies.
    cluster.kill9(1);
    cluster.wait_leader("in", 0, bound);
    cluster.wait_leader("out", 0, bound);
    // Run until done: an instance stuck in a transaction ends itself, and
    // is replaced.
    let mut current = second;
    let mut instances = 2;
    loop {
        match next_line(&current, &cluster) {
            Some(line) if line.starts_with("committed") => continue,
            Some(line) => {
                assert_eq!(line, "done", "{:?}", current.stderr_lines());
                break;
            }
            None => {
                instances += 1;
                assert!(instances <= 6, "{:?}", current.stderr_lines());
                current = spawn_loop(&python, &cluster, None);
            }
        }
    }
    let out = Kcat::at(&kcat, &cluster.kafka_addr(0)).consume("out", &["-f", "%s\\n"]);
    let mut seen = std::collections::BTreeMap::new();
    for value in out.lines() {
        *seen.entry(value.to_string()).or_insert(0) += 1;
    }
    let twice: Vec<&String> = seen
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(v, _)| v)
        .collect();
    let missing: Vec<String> = (0..TOTAL)
        .map(|i| format!("out-{i}"))
        .filter(|v| !seen.contains_key(v))
        .collect();
    assert!(
        twice.is_empty() && missing.is_empty() && seen.len() == TOTAL,
        "each input once in the output: twice {twice:?}, missing {missing:?}"
    );
}

/// `ctp.py` over the running brokers, its consumer started from broker
/// 1 and its producer from broker 2 (when they run), ending itself after
/// `crash` transactions when given.
fn spawn_loop(python: &std::path::Path, cluster: &Cluster, crash: Option<u32>) -> common::Proc {
    let from = |first: usize| {
        let mut order = vec![first];
        order.extend((0..cluster.len()).filter(|s| *s != first));
        let live = order.into_iter().filter(|s| cluster.running(*s));
        live.map(|s| cluster.kafka_addr(s))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut command = std::process::Command::new(python);
    command.arg(kafka::script("ctp.py"));
    command.args([from(1), from(2)]);
    command.args(["in", "out", "g", "ctp-1", &TOTAL.to_string()]);
    command.args(crash.map(|n| n.to_string()));
    common::Proc::spawn_command(command, std::process::Stdio::null())
}

/// The loop's next line, `None` once it ended; the test fails with what
/// the loop and the brokers said when it says nothing for two minutes.
fn next_line(p: &common::Proc, cluster: &Cluster) -> Option<String> {
    use std::sync::mpsc::RecvTimeoutError;
    match p.lines.recv_timeout(Duration::from_secs(120)) {
        Ok(line) => Some(line),
        Err(RecvTimeoutError::Disconnected) => None,
        Err(RecvTimeoutError::Timeout) => {
            let logs: Vec<Vec<String>> = (0..cluster.len()).map(|s| cluster.log(s)).collect();
            panic!(
                "the loop said: {:?}\nthe brokers: {logs:#?}",
                p.stderr_lines()
            )
        }
    }
}
