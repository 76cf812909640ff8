//! Real Kafka clients against a broker's Kafka listener (issue 14): Debian's
//! `kcat`, and the Python clients (kafka-python, confluent-kafka) of the
//! virtual environment `bash .ci/test` makes under `target/`.
//!
//! Where a client is missing, [`kcat`] and [`python`] print a `skipped:`
//! line and return `None` (the test then passes without running), unless
//! `KLOG_REQUIRE_KAFKA_CLIENTS=1` (as `.ci/test` sets it): then they panic,
//! so CI never passes without running these tests.
//!
//! Every client runs with a deadline and is killed when it passes, or when
//! the test ends however it ends ([`Kcat::spawn`] returns a [`Proc`]).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use super::{BrokerProc, Proc};

/// The environment variable that turns a missing client into a failure.
pub const REQUIRE: &str = "KLOG_REQUIRE_KAFKA_CLIENTS";

/// How long one client command may run before it is killed.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Says a client is missing: a `skipped:` line, or a panic when required.
fn missing<T>(what: &str, hint: &str) -> Option<T> {
    if std::env::var(REQUIRE).is_ok_and(|v| v == "1") {
        panic!("{what} is missing and {REQUIRE}=1: {hint}");
    }
    eprintln!("skipped: {what} is missing ({hint})");
    None
}

/// The kcat binary: `$KLOG_KCAT`, or `kcat` on the `PATH`.
pub fn kcat_path() -> Option<PathBuf> {
    let name = std::env::var("KLOG_KCAT").unwrap_or_else(|_| "kcat".to_string());
    let found = if name.contains('/') {
        Some(PathBuf::from(&name)).filter(|p| p.is_file())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(&name))
                .find(|p| p.is_file())
        })
    };
    found.or_else(|| missing("kcat", "apt-get install kcat, or run bash .ci/test"))
}

/// The checkout's `target/` (where `.ci/test` makes the virtual
/// environments, whatever `CARGO_TARGET_DIR` says).
fn checkout_target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target")
}

/// Whether `python` imports `modules` (with the versions `check` asserts).
fn imports(python: &Path, check: &str) -> bool {
    std::process::Command::new(python)
        .args(["-c", check])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Python of the virtual environment with kafka-python 3.0.12 (and
/// the packages of its codecs) and confluent-kafka 2.16.1:
/// `$KLOG_KAFKA_VENV/bin/python`, or
/// `target/kafka-venv/bin/python` of the checkout.
pub fn python() -> Option<PathBuf> {
    let venv = std::env::var_os("KLOG_KAFKA_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| checkout_target().join("kafka-venv"));
    let python = venv.join("bin/python");
    let check = "import kafka, confluent_kafka, kafka.codec as c; \
                 assert kafka.__version__ == '3.0.12'; \
                 assert confluent_kafka.__version__ == '2.16.1'; \
                 assert c.has_snappy() and c.has_lz4() and c.has_zstd()";
    if imports(&python, check) {
        return Some(python);
    }
    missing(
        &format!(
            "{} with kafka-python 3.0.12 and confluent-kafka 2.16.1",
            python.display()
        ),
        "run bash .ci/test, which makes it",
    )
}

/// The Python of the optional virtual environment with kafka-python 2.0.2
/// (Debian's version): `target/kafka-python2-venv`. Never required: that
/// version does not import on Python 3.12 and later.
pub fn python2() -> Option<PathBuf> {
    let python = checkout_target().join("kafka-python2-venv/bin/python");
    if imports(&python, "import kafka; assert kafka.__version__ == '2.0.2'") {
        return Some(python);
    }
    eprintln!(
        "skipped: {} with kafka-python 2.0.2 is missing (bash .ci/test makes it where it can)",
        python.display()
    );
    None
}

/// Node.js with kafkajs 2.2.4: `node` on the `PATH`, and the
/// `node_modules` directory `bash .ci/test` installs kafkajs into,
/// `target/kafkajs/node_modules` of the checkout.
pub fn kafkajs() -> Option<(PathBuf, PathBuf)> {
    let modules = checkout_target().join("kafkajs/node_modules");
    let node = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("node"))
            .find(|p| p.is_file())
    });
    let version = std::fs::read_to_string(modules.join("kafkajs/package.json")).ok();
    let pinned = version.is_some_and(|v| v.contains("\"version\": \"2.2.4\""));
    match node {
        Some(node) if pinned => Some((node, modules)),
        _ => missing(
            &format!("node with kafkajs 2.2.4 in {}", modules.display()),
            "run bash .ci/test, which installs it",
        ),
    }
}

/// Runs `tests/kafka/SCRIPT` with node and kafkajs and `args`, killed
/// after `timeout`; fails unless it succeeds; returns its stdout.
pub fn run_node(
    kafkajs: &(PathBuf, PathBuf),
    name: &str,
    args: &[&str],
    timeout: Duration,
) -> String {
    let mut command = std::process::Command::new(&kafkajs.0);
    command
        .env("NODE_PATH", &kafkajs.1)
        .arg(script(name))
        .args(args);
    let out = run_bounded(command, b"", timeout);
    assert_ok(&format!("{name} {}", args.join(" ")), &out);
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The path of a Python client script under `tests/kafka/`.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kafka")
        .join(name)
}

/// Runs `command` with `stdin` for at most `timeout` (then kills it and
/// fails, showing what it said).
pub fn run_bounded(command: std::process::Command, stdin: &[u8], timeout: Duration) -> Output {
    let what = format!("{command:?}");
    let started = Instant::now();
    let out = assert_cmd::Command::from_std(command)
        .write_stdin(stdin.to_vec())
        .timeout(timeout)
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    if out.status.code().is_none() && started.elapsed() >= timeout {
        panic!(
            "{what} did not end within {timeout:?} (killed); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Fails unless `out` is a success, showing `what` ran and its stderr.
pub fn assert_ok(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}); stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A broker with a Kafka listener, on port 0 of 127.0.0.1 for both
/// protocols, in a temp data directory (and registry) removed at the end.
pub struct KafkaBroker {
    /// The broker (killed when this is dropped).
    pub broker: BrokerProc,
    /// The Kafka listener's address, `127.0.0.1:PORT`.
    pub kafka: String,
    /// The registry directory, when started with one.
    pub registry: Option<String>,
    // Dropped after the broker (fields drop in order).
    dir: tempfile::TempDir,
}

impl KafkaBroker {
    /// A broker with extra `args` and no registry.
    pub fn start(args: &[&str]) -> KafkaBroker {
        KafkaBroker::start_in(tempfile::tempdir().expect("temp dir"), None, args)
    }

    /// A broker joined to a registry directory of its own (for groups).
    pub fn with_registry(args: &[&str]) -> KafkaBroker {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = dir.path().join("registry").to_str().unwrap().to_string();
        KafkaBroker::start_in(dir, Some(registry), args)
    }

    fn start_in(dir: tempfile::TempDir, registry: Option<String>, args: &[&str]) -> KafkaBroker {
        let mut all = vec!["--kafka-listen", "127.0.0.1:0"];
        if let Some(registry) = &registry {
            all.extend_from_slice(&["--registry", registry]);
        }
        all.extend_from_slice(args);
        let broker = BrokerProc::start(&dir.path().join("data"), &all);
        // Printed before "% Listening on", which start() waited for.
        let kafka = broker
            .log()
            .iter()
            .find_map(|l| l.strip_prefix("% Listening for Kafka clients on "))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no Kafka listener line: {:?}", broker.log()));
        KafkaBroker {
            broker,
            kafka,
            registry,
            dir,
        }
    }

    /// The native listener's address (for klog's own tools).
    pub fn addr(&self) -> &str {
        &self.broker.addr
    }

    /// Produces `1..=n` to `topic` with `klog-produce` (fails unless it
    /// succeeds).
    pub fn produce_lines(&self, topic: &str, n: u64) {
        super::bin("klog-produce")
            .args(["-b", self.addr(), "-t", topic, "-q"])
            .write_stdin(super::lines(n))
            .timeout(CLIENT_TIMEOUT)
            .assert()
            .success();
    }

    /// The broker's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Fails unless the broker still runs, showing its log.
    pub fn assert_running(&mut self) {
        let status = self.broker.child.try_wait().expect("try_wait");
        assert!(
            status.is_none(),
            "the broker exited ({status:?}): {:?}",
            self.broker.log()
        );
    }

    /// A kcat pointed at this broker's Kafka listener.
    pub fn kcat(&self, kcat: &Path) -> Kcat {
        Kcat {
            path: kcat.to_path_buf(),
            bootstrap: self.kafka.clone(),
        }
    }
}

/// kcat, bound to one broker (`-b`).
#[derive(Debug, Clone)]
pub struct Kcat {
    path: PathBuf,
    bootstrap: String,
}

impl Kcat {
    /// A kcat pointed at `bootstrap`.
    pub fn at(kcat: &Path, bootstrap: &str) -> Kcat {
        Kcat {
            path: kcat.to_path_buf(),
            bootstrap: bootstrap.to_string(),
        }
    }

    /// The command `kcat -b BOOTSTRAP ARGS...`.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(&self.path);
        command.args(["-b", &self.bootstrap]).args(args);
        command
    }

    /// Runs kcat with `args` and `stdin`, killed after [`CLIENT_TIMEOUT`].
    pub fn run(&self, args: &[&str], stdin: &[u8]) -> Output {
        run_bounded(self.command(args), stdin, CLIENT_TIMEOUT)
    }

    /// Runs kcat, fails unless it succeeds, and returns its stdout.
    pub fn ok(&self, args: &[&str], stdin: &[u8]) -> Vec<u8> {
        let out = self.run(args, stdin);
        assert_ok(&format!("kcat {}", args.join(" ")), &out);
        out.stdout
    }

    /// `kcat -P -t TOPIC EXTRA...` of `input`, with a delivery deadline
    /// kcat reports itself (its default is 5 minutes).
    pub fn produce(&self, topic: &str, input: &[u8], extra: &[&str]) {
        let mut args = vec!["-P", "-t", topic, "-X", "message.timeout.ms=30000"];
        args.extend_from_slice(extra);
        self.ok(&args, input);
    }

    /// `kcat -C -t TOPIC -e EXTRA...`: stdout as a string.
    pub fn consume(&self, topic: &str, extra: &[&str]) -> String {
        let mut args = vec!["-C", "-t", topic, "-e"];
        args.extend_from_slice(extra);
        String::from_utf8(self.ok(&args, b"")).expect("UTF-8 output")
    }

    /// Starts a long-running kcat (killed when the test ends).
    pub fn spawn(&self, args: &[&str]) -> Proc {
        Proc::spawn_command(self.command(args), std::process::Stdio::null())
    }
}

/// Runs `tests/kafka/SCRIPT` with `python` and `args`, killed after
/// [`CLIENT_TIMEOUT`]; fails unless it succeeds; returns its stdout.
pub fn run_script(python: &Path, name: &str, args: &[&str]) -> String {
    let mut command = std::process::Command::new(python);
    command.arg(script(name)).args(args);
    let out = run_bounded(command, b"", CLIENT_TIMEOUT);
    assert_ok(&format!("{name} {}", args.join(" ")), &out);
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// An admin client's lines: `admin_clients.py CLIENT` for the Python
/// clients, `kafkajs_admin.js` for `kafkajs`.
pub fn admin(client: &str, bootstrap: &str, args: &[&str]) -> Vec<String> {
    let out = if client == "kafkajs" {
        let node = kafkajs().unwrap();
        let mut all = vec![bootstrap];
        all.extend_from_slice(args);
        run_node(&node, "kafkajs_admin.js", &all, CLIENT_TIMEOUT)
    } else {
        let mut all = vec![client, bootstrap];
        all.extend_from_slice(args);
        run_script(&python().unwrap(), "admin_clients.py", &all)
    };
    out.lines().map(str::to_string).collect()
}

/// Sends `request` as API `key` in the flexible `version` (request header
/// v2, written by the `kafka-protocol` crate) on `stream` and reads its
/// answer (after the response header v1), which must use every byte.
pub fn call_flexible<R, A>(
    stream: &mut std::net::TcpStream,
    (key, version): (i16, i16),
    request: &R,
) -> A
where
    R: kafka_protocol::protocol::Encodable,
    A: kafka_protocol::protocol::Decodable,
{
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    use std::io::{Read, Write};
    let header = km::RequestHeader::default()
        .with_request_api_key(key)
        .with_request_api_version(version)
        .with_correlation_id(9)
        .with_client_id(Some(StrBytes::from_static_str("flexible")));
    let mut body = Vec::new();
    header.encode(&mut body, 2).unwrap();
    request.encode(&mut body, version).unwrap();
    stream
        .write_all(&(body.len() as i32).to_be_bytes())
        .unwrap();
    stream.write_all(&body).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .expect("a response within the bound");
    let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut answer).expect("a whole response");
    let mut rest = &answer[..];
    km::ResponseHeader::decode(&mut rest, 1).unwrap();
    let decoded = A::decode(&mut rest, version).unwrap();
    assert!(rest.is_empty(), "{} bytes left over", rest.len());
    decoded
}

/// Partition 0's earliest and latest offsets of `topic`, as
/// confluent-kafka lists them.
pub fn earliest_latest(bootstrap: &str, topic: &str) -> (i64, i64) {
    let lines = admin(
        "confluent-kafka",
        bootstrap,
        &["list-offsets", topic, "earliest", "latest"],
    );
    let at = |i: usize| lines[i].split(' ').nth(1).unwrap().parse::<i64>().unwrap();
    (at(0), at(1))
}

/// A Produce v3 request body: no transactional id, `acks`, `timeout_ms`,
/// and `records` for partition 0 of `topic`.
pub fn produce_v3_body(topic: &str, acks: i16, timeout_ms: i32, records: &[u8]) -> Vec<u8> {
    let mut body = (-1i16).to_be_bytes().to_vec();
    body.extend_from_slice(&acks.to_be_bytes());
    body.extend_from_slice(&timeout_ms.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&(records.len() as i32).to_be_bytes());
    body.extend_from_slice(records);
    body
}

/// A Kafka request frame: big-endian length, request header v1 (api key,
/// version, correlation id, client id "klog-test"), then `body`.
pub fn frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let client_id = b"klog-test";
    let len = 2 + 2 + 4 + 2 + client_id.len() + body.len();
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&(len as i32).to_be_bytes());
    out.extend_from_slice(&api_key.to_be_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    out.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    out.extend_from_slice(client_id);
    out.extend_from_slice(body);
    out
}

/// A Kafka batch of `count` records (`"r<seq>"`) from idempotent producer
/// `id` at `epoch`, numbered from sequence `first`.
pub fn idempotent_batch(id: i64, epoch: i16, first: i32, count: i32) -> Vec<u8> {
    idempotent_batch_of(id, epoch, first, count, "r")
}

/// [`idempotent_batch`] with records `"<prefix><seq>"`.
pub fn idempotent_batch_of(id: i64, epoch: i16, first: i32, count: i32, prefix: &str) -> Vec<u8> {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: first + i,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(format!("{prefix}{}", first + i).into_bytes().into()),
            headers: Default::default(),
        })
        .collect();
    let mut out = Vec::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut out, &records, &options).unwrap();
    out
}

/// Sends a Produce v3 of `records` to `topic` [0] with acks=all and
/// returns the answer's (error code, base offset).
pub fn produce_v3(stream: &mut std::net::TcpStream, topic: &str, records: &[u8]) -> (i16, i64) {
    use std::io::{Read, Write};
    let body = produce_v3_body(topic, -1, 10_000, records);
    stream.write_all(&frame(0, 3, 21, &body)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .expect("an answer within the bound");
    let mut answer = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut answer).expect("a whole answer");
    // Correlation id, one topic and its name, one partition: its index,
    // error code, base offset.
    let at = 4 + 4 + 2 + topic.len() + 4 + 4;
    let error = i16::from_be_bytes(answer[at..at + 2].try_into().unwrap());
    let base = i64::from_be_bytes(answer[at + 2..at + 10].try_into().unwrap());
    (error, base)
}

/// librdkafka's properties for `user` over SASL_PLAINTEXT with `mechanism`
/// (a JSON object, as the Python scripts take it in `KLOG_SECURITY`).
pub fn login(mechanism: &str, user: &str, password: &str) -> String {
    serde_json::json!({
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    })
    .to_string()
}

/// `klog-broker --registry REGISTRY ARGS...` (a user or ACL command) with
/// `stdin`: its stdout, the command checked.
pub fn klog_broker(registry: &str, args: &[&str], stdin: &str) -> String {
    let out = super::bin("klog-broker")
        .args(["--registry", registry])
        .args(args)
        .write_stdin(stdin.to_string())
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "klog-broker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
