//! `klog-broker --metrics-listen` (issue 27): Prometheus' text format at
//! `GET /metrics`, accepted by Debian's `promtool check metrics`, scraped
//! by a real Prometheus server, and moving as records flow; a scraper that
//! sends nothing, or too much, stops nobody.
//!
//! Debian's `prometheus` (with `promtool`) is installed by `bash .ci/test`;
//! without it these tests print `skipped:` (or fail with
//! `KLOG_REQUIRE_KAFKA_CLIENTS=1`, as CI runs them).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{bin, lines, BrokerProc, Proc};

/// Debian's `prometheus` package's binary, `name` (prometheus, promtool).
fn prometheus_tool(name: &str) -> Option<PathBuf> {
    let found = Path::new("/usr/bin").join(name);
    if found.is_file() {
        return Some(found);
    }
    if std::env::var(common::kafka::REQUIRE).is_ok_and(|v| v == "1") {
        panic!("{name} is missing: apt-get install prometheus (bash .ci/test does)");
    }
    eprintln!("skipped: {name} is missing (apt-get install prometheus, or bash .ci/test)");
    None
}

/// A broker serving metrics, and the address of its metrics endpoint.
fn broker(dir: &Path, extra: &[&str]) -> (BrokerProc, String) {
    let mut args = vec!["--metrics-listen", "127.0.0.1:0", "--partitions", "2"];
    args.extend_from_slice(extra);
    let broker = BrokerProc::start(dir, &args);
    let at = broker
        .log()
        .iter()
        .find_map(|l| l.strip_prefix("% Serving metrics on http://"))
        .and_then(|l| l.strip_suffix("/metrics"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no metrics line: {:?}", broker.log()));
    (broker, at)
}

/// The body of `GET path` at `at`.
fn get(at: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(at).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {at}\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The sum of a metric's samples whose line contains every one of `with`.
fn sum(metrics: &str, name: &str, with: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| with.iter().all(|w| l.contains(w)))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

fn produce(broker: &BrokerProc, topic: &str, n: u64) {
    bin("klog-produce")
        .args(["-b", &broker.addr, "-t", topic, "-q"])
        .write_stdin(lines(n))
        .timeout(Duration::from_secs(60))
        .assert()
        .success();
}

#[test]
fn promtool_accepts_the_metrics_and_they_move_with_the_records() {
    let Some(promtool) = prometheus_tool("promtool") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (broker, at) = broker(dir.path(), &[]);
    produce(&broker, "t1", 100);
    let first = get(&at, "/metrics");
    let mut check = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check
        .stdin
        .take()
        .unwrap()
        .write_all(first.as_bytes())
        .unwrap();
    let checked = check.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    let end = |m: &str| sum(m, "klog_partition_log_end_offset", &["topic=\"t1\""]);
    assert_eq!(end(&first), 100.0, "{first}");
    let produces = |m: &str| {
        sum(
            m,
            "klog_requests_total",
            &["api=\"Produce\"", "listener=\"klog\""],
        )
    };
    assert!(produces(&first) >= 1.0);
    assert_eq!(sum(&first, "klog_partition_under_replicated", &[]), 0.0);
    produce(&broker, "t1", 50);
    let second = get(&at, "/metrics");
    assert_eq!(end(&second), 150.0);
    assert!(produces(&second) > produces(&first));
    assert!(sum(&second, "klog_fsyncs_total", &[]) >= 1.0);
}

/// A scraper that connects and sends nothing, or sends a request head
/// past 8 KiB, is dropped; the next scrape is answered.
#[test]
fn a_silent_or_flooding_scraper_stops_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, at) = broker(dir.path(), &[]);
    let _silent = TcpStream::connect(&at).unwrap();
    let mut flood = TcpStream::connect(&at).unwrap();
    let _ = flood.write_all(&vec![b'a'; 64 * 1024]);
    let started = std::time::Instant::now();
    let body = get(&at, "/metrics");
    assert!(body.contains("klog_connections"), "{body}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let mut other = TcpStream::connect(&at).unwrap();
    write!(other, "GET /nope HTTP/1.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    other.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
}

/// A real Prometheus server scrapes the broker every second; its query
/// API sees the log end move as records flow.
#[test]
fn prometheus_scrapes_the_broker() {
    let Some(prometheus) = prometheus_tool("prometheus") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (broker, at) = broker(&dir.path().join("data"), &[]);
    produce(&broker, "t1", 100);
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: klog\n    static_configs:\n      - targets: ['{at}']\n"
        ),
    )
    .unwrap();
    // Prometheus takes no port 0: a free port, found and let go.
    let web = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut command = Command::new(&prometheus);
    command.args([
        &format!("--config.file={}", config.display()),
        &format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()),
        &format!("--web.listen-address={web}"),
    ]);
    let _server = Proc::spawn_command(command, Stdio::null());
    let query = |q: &str| -> Option<f64> {
        let mut stream = TcpStream::connect(web).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(stream, "GET /api/v1/query?query={q} HTTP/1.0\r\n\r\n").ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        let json: serde_json::Value =
            serde_json::from_str(answer.split_once("\r\n\r\n")?.1).ok()?;
        json["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    };
    let ends = "sum(klog_partition_log_end_offset)";
    common::eventually(
        "Prometheus sees 100 records",
        Duration::from_secs(60),
        || query(ends) == Some(100.0),
    );
    produce(&broker, "t1", 20);
    common::eventually(
        "Prometheus sees 120 records",
        Duration::from_secs(60),
        || query(ends) == Some(120.0),
    );
}

/// A partition forgets an idempotent producer silent past
/// `--producer-id-expiration` (by its batches' timestamps, here 2023's,
/// and by the broker's clock, here a second):
/// a retry of its old batch is then stored anew (it is not known), as on
/// Kafka. The gauge counts the producers a partition knows, the counter
/// those forgotten.
#[test]
fn an_expired_producer_is_forgotten_and_counted() {
    use common::kafka::{idempotent_batch, produce_v3};
    let dir = tempfile::tempdir().unwrap();
    let extra = [
        "--kafka-listen",
        "127.0.0.1:0",
        "--producer-id-expiration",
        "1s",
        "--retention-check-interval",
        "100ms",
    ];
    let (broker, at) = broker(dir.path(), &extra);
    let kafka = broker
        .log()
        .iter()
        .find_map(|l| l.strip_prefix("% Listening for Kafka clients on "))
        .map(str::to_string)
        .unwrap();
    let mut s = TcpStream::connect(&kafka).unwrap();
    assert_eq!(
        produce_v3(&mut s, "x", &idempotent_batch(701, 0, 0, 3)),
        (0, 0)
    );
    let known = |body: &str| sum(body, "klog_partition_producers", &["topic=\"x\""]);
    let expired = |body: &str| sum(body, "klog_producers_expired_total", &[]);
    let mut body = get(&at, "/metrics");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while expired(&body) < 1.0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        body = get(&at, "/metrics");
    }
    assert_eq!((known(&body), expired(&body)), (0.0, 1.0), "{body}");
    let retry = idempotent_batch(701, 0, 0, 3);
    let stored = produce_v3(&mut s, "x", &retry);
    assert_eq!(stored, (0, 3), "not known: stored anew");
    // A producer of records stamped an hour from now stays.
    let mut b = klog::storage::record::BatchBuilder::new();
    b.push(klog::clock::now_ms() + 3_600_000, None, &[], b"later");
    let mut now = b.finish().to_vec();
    klog::storage::record::set_producer(&mut now, 702, 0, 0);
    assert_eq!(produce_v3(&mut s, "x", &now), (0, 6));
    // 701 is forgotten again, a second after its batch; 702 stays.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(known(&get(&at, "/metrics")), 1.0);
}

/// With `--preallocate`, segments given a spare and those made with none
/// ready are counted.
#[test]
fn preallocated_segments_and_misses_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    // A spare takes a second to zero: the second partition opens long
    // before the next one is ready.
    let extra = ["--preallocate", "--segment-bytes", "32MiB"];
    let (broker, at) = broker(dir.path(), &extra);
    let spare = dir.path().join("preallocated").join("spare-0");
    common::eventually("the first spare", Duration::from_secs(30), || {
        spare.exists()
    });
    // Two partitions, one spare: one new segment takes it, one misses.
    produce(&broker, "t", 10);
    let body = get(&at, "/metrics");
    let taken = sum(&body, "klog_preallocated_segments_total", &[]);
    let missed = sum(&body, "klog_preallocate_misses_total", &[]);
    assert_eq!((taken, missed), (1.0, 1.0), "{body}");
}
