//! Real Kafka clients against klog's Kafka listener (issue 14, items 1–4,
//! 6 without groups, 7): kcat (librdkafka 2.0), kafka-python 3.0 and
//! confluent-kafka 2.16 produce, consume and list metadata on a broker the
//! test starts; klog's own tools read and write the same records byte for
//! byte; hostile frames get an error or a close and leave the broker up.
//! Groups are in `tests/kafka_groups.rs`. Missing clients: see
//! `tests/common/kafka.rs`.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::kafka::{self, frame, KafkaBroker};
use common::{bin, consume_from, input, lines};

/// Item 1: `kcat -P` then `kcat -C` with kcat's offsets (`beginning`,
/// `-N`, `end`, an absolute offset of one partition) and its format
/// tokens; klog-consume reads the same records.
#[test]
fn kcat_produces_and_consumes_with_kafkas_offsets() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let broker = KafkaBroker::start(&[]);
    let k = broker.kcat(&kcat);
    k.produce("t1", lines(1000).as_bytes(), &[]);
    assert_eq!(k.consume("t1", &["-o", "beginning"]), lines(1000));
    assert_eq!(k.consume("t1", &["-o", "-5"]), input(996, 1000));
    assert_eq!(k.consume("t1", &["-o", "end"]), "");
    assert_eq!(k.consume("t1", &["-p", "0", "-o", "990"]), input(991, 1000));
    // A null key and no headers print as nothing.
    assert_eq!(
        k.consume("t1", &["-o", "-2", "-f", "%o %k %s %h\\n"]),
        "998  999 \n999  1000 \n"
    );
    assert_eq!(
        consume_from(broker.addr(), "t1", &[]),
        lines(1000),
        "klog-consume reads what kcat produced"
    );
    // Keys and headers, printed with kcat's tokens.
    k.produce("t2", b"a:1\nb:2\n", &["-K", ":", "-H", "h=x", "-H", "g=y"]);
    assert_eq!(
        k.consume("t2", &["-f", "%t %p %o %k %s %h %S\\n"]),
        "t2 0 0 a 1 h=x,g=y 1\nt2 0 1 b 2 h=x,g=y 1\n"
    );
    // `-o end` without -e waits at the end and prints only what comes next.
    let tail = k.spawn(&["-C", "-t", "t1", "-o", "end", "-u"]);
    tail.wait_stderr(
        "Reached end of topic t1 [0] at offset 1000",
        |_| true,
        Duration::from_secs(30),
    );
    k.produce("t1", b"1001\n", &[]);
    assert_eq!(tail.take_lines(1, Duration::from_secs(30)), ["1001"]);
}

/// Item 2: `kcat -L -J` lists the broker at its Kafka address and each
/// topic with its partitions, led by that broker, in sync.
/// One port, both protocols: kcat reaches the `--listen` port of a broker
/// started without `--kafka-listen` (whose metadata names that port), as
/// klog's tools do; and klog's tools reach a `--kafka-listen` port.
#[test]
fn kcat_and_klog_tools_share_either_port() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = common::BrokerProc::start(dir.path(), &[]);
    let k = kafka::Kcat::at(&kcat, &broker.addr);
    k.produce("t", lines(100).as_bytes(), &[]);
    assert_eq!(k.consume("t", &[]), lines(100));
    let listed = String::from_utf8(k.ok(&["-L", "-J"], b"")).unwrap();
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed["brokers"][0]["name"],
        broker.addr.as_str(),
        "{listed}"
    );
    common::produce_to(&broker.addr, "t", &input(101, 110), &[]);
    assert_eq!(consume_from(&broker.addr, "t", &[]), lines(110));
    assert_eq!(k.consume("t", &["-o", "-10"]), input(101, 110));
    let both = KafkaBroker::start(&[]);
    common::produce_to(&both.kafka, "u", &lines(10), &[]);
    assert_eq!(consume_from(&both.kafka, "u", &[]), lines(10));
    assert_eq!(both.kcat(&kcat).consume("u", &[]), lines(10));
}

#[test]
fn kcat_lists_the_broker_and_partitions_as_json() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let broker = KafkaBroker::start(&["--partitions", "3"]);
    let k = broker.kcat(&kcat);
    k.produce("three", b"x\n", &[]);
    let listing: serde_json::Value =
        serde_json::from_slice(&k.ok(&["-L", "-J"], b"")).expect("kcat -L -J prints JSON");
    let brokers = listing["brokers"].as_array().expect("brokers");
    assert_eq!(brokers.len(), 1, "{listing}");
    assert_eq!(brokers[0]["name"], broker.kafka.as_str(), "{listing}");
    let id = brokers[0]["id"].as_i64().expect("a broker id");
    let topics = listing["topics"].as_array().expect("topics");
    let three: Vec<_> = topics.iter().filter(|t| t["topic"] == "three").collect();
    assert_eq!(three.len(), 1, "{listing}");
    let partitions = three[0]["partitions"].as_array().expect("partitions");
    let mut numbers: Vec<i64> = partitions
        .iter()
        .map(|p| p["partition"].as_i64().unwrap())
        .collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [0, 1, 2], "{listing}");
    for p in partitions {
        assert_eq!(p["leader"].as_i64(), Some(id), "{p}");
        assert_eq!(p["replicas"], serde_json::json!([{ "id": id }]), "{p}");
        assert_eq!(p["isrs"], serde_json::json!([{ "id": id }]), "{p}");
        assert!(p.get("error").is_none(), "{p}");
    }
    // One topic asked by name.
    let one: serde_json::Value =
        serde_json::from_slice(&k.ok(&["-L", "-J", "-t", "three"], b"")).unwrap();
    assert_eq!(one["topics"].as_array().map(Vec::len), Some(1), "{one}");
    assert_eq!(
        one["topics"][0]["partitions"].as_array().map(Vec::len),
        Some(3)
    );
}

/// Lines `keyN:VALUE` whose values hold every byte but the newline (and
/// bytes that are not UTF-8), with the bytes klog-consume and kcat print
/// for them with `%k %s %h\n` and headers h=x, h2=y.
fn binary_lines() -> (Vec<u8>, Vec<u8>) {
    let (mut input, mut printed) = (Vec::new(), Vec::new());
    for i in 0..64u32 {
        let key = format!("key{i}").into_bytes();
        let value: Vec<u8> = (0..=255u8)
            .cycle()
            .skip(i as usize * 7)
            .take(1 + (i as usize * 37) % 300)
            .filter(|&b| b != b'\n')
            .collect();
        input.extend_from_slice(&key);
        input.push(b':');
        input.extend_from_slice(&value);
        input.push(b'\n');
        printed.extend_from_slice(&key);
        printed.push(b' ');
        printed.extend_from_slice(&value);
        printed.extend_from_slice(b" h=x,h2=y\n");
    }
    (input, printed)
}

/// Item 3: keys, headers and binary values survive kcat -P → klog-consume
/// and klog-produce → kcat -C, byte for byte.
#[test]
fn keys_headers_and_bytes_survive_both_ways() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let broker = KafkaBroker::start(&[]);
    let k = broker.kcat(&kcat);
    let (input, printed) = binary_lines();
    k.produce("from-kcat", &input, &["-K", ":", "-H", "h=x", "-H", "h2=y"]);
    let out = bin("klog-consume")
        .args(["-b", broker.addr(), "-t", "from-kcat", "-e", "-q"])
        .args(["-f", "%k %s %h\\n"])
        .timeout(kafka::CLIENT_TIMEOUT)
        .output()
        .unwrap();
    kafka::assert_ok("klog-consume", &out);
    assert!(out.stdout == printed, "kcat -P → klog-consume differs");
    bin("klog-produce")
        .args(["-b", broker.addr(), "-t", "from-klog", "-q", "-K", ":"])
        .args(["-H", "h=x", "-H", "h2=y"])
        .write_stdin(input.clone())
        .timeout(kafka::CLIENT_TIMEOUT)
        .assert()
        .success();
    let out = k.ok(&["-C", "-t", "from-klog", "-e", "-f", "%k %s %h\\n"], b"");
    assert!(out == printed, "klog-produce → kcat -C differs");
    // The offsets line up too: record N at offset N both ways.
    let offsets = k.consume("from-kcat", &["-f", "%o\\n"]);
    assert_eq!(
        offsets,
        (0..64).map(|o| format!("{o}\n")).collect::<String>()
    );
}

/// The codecs of the batches stored in `topic`'s partition 0 of `data`
/// (klog-dump's `compress_codec`), once `klog-dump --verify` found every
/// batch whole (its CRC32C, its records, decompressed).
fn stored_codecs(data: &std::path::Path, topic: &str) -> Vec<String> {
    let part = data.join(format!("{topic}-0"));
    let verify = bin("klog-dump")
        .arg("--verify")
        .arg(&part)
        .output()
        .unwrap();
    assert!(verify.status.success(), "{topic}: {verify:?}");
    let out = bin("klog-dump").arg("--json").arg(&part).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "batch")
        .map(|v| v["compress_codec"].as_str().unwrap().to_string())
        .collect()
}

/// `kcat -P -z CODEC` for each of Kafka's codecs: the broker stores the
/// batches as sent, compressed; klog-consume and `kcat -C` read the same
/// lines. librdkafka
/// before 2.11 sends gzip, snappy and lz4 only to a broker whose Produce
/// versions start at 0 (klog's start at 3) and says so in its `msg` debug
/// log; zstd it gates on Produce 7 and Fetch 10, which klog has: that one
/// must go compressed, whatever the version.
#[test]
fn kcat_produces_compressed_batches_of_every_codec() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let broker = KafkaBroker::start(&[]);
    let k = broker.kcat(&kcat);
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("z-{codec}");
        let args = ["-P", "-t", &topic, "-z", codec, "-d", "msg"];
        let out = k.run(&args, lines(5000).as_bytes());
        kafka::assert_ok(&format!("kcat -P -z {codec}"), &out);
        let log = String::from_utf8_lossy(&out.stderr);
        let compressed = log
            .lines()
            .any(|l| l.contains("Produce MessageSet") && l.ends_with(&format!(", {codec})")));
        let gated = log.contains(&format!("does not support compression type {codec}"));
        assert!(
            compressed || (gated && codec != "zstd"),
            "kcat -z {codec} sent no {codec} batch:\n{log}"
        );
        let stored = stored_codecs(&broker.data_dir(), &topic);
        // librdkafka sends a batch that its codec does not shrink (a first
        // batch of a record or two) uncompressed: every other is stored
        // compressed, as sent.
        let as_sent = if compressed {
            stored.iter().any(|c| c == codec) && stored.iter().all(|c| c == codec || c == "none")
        } else {
            stored.iter().all(|c| c == "none")
        };
        assert!(
            !stored.is_empty() && as_sent,
            "kcat -z {codec}: batches stored {stored:?}"
        );
        assert!(
            consume_from(broker.addr(), &topic, &[]) == lines(5000),
            "klog-consume reads what kcat -z {codec} produced"
        );
        assert!(
            k.consume(&topic, &[]) == lines(5000),
            "kcat -C reads what kcat -z {codec} produced"
        );
    }
}

/// confluent-kafka and kafka-python with `compression.type` of each codec:
/// the batches are stored compressed as sent, and klog-consume, `kcat -C`
/// and the producing client read the same records back.
#[test]
fn python_clients_produce_compressed_batches_of_every_codec() {
    let Some(python) = kafka::python() else {
        return;
    };
    let kcat = kafka::kcat_path();
    let broker = KafkaBroker::start(&[]);
    for lib in ["confluent-kafka", "kafka-python"] {
        for codec in ["gzip", "snappy", "lz4", "zstd"] {
            let topic = format!("{lib}-{codec}");
            let produce = [lib, "produce", &broker.kafka, &topic, "1", "300", codec];
            kafka::run_script(&python, "client.py", &produce);
            // kafka-python sends a batch uncompressed when the codec does
            // not make it smaller: stored as sent too.
            let stored = stored_codecs(&broker.data_dir(), &topic);
            assert!(
                stored.iter().any(|c| c == codec)
                    && stored.iter().all(|c| c == codec || c == "none"),
                "{lib} {codec}: batches stored {stored:?}"
            );
            let expected: String = (1..=300)
                .map(|i| format!("{} k{i} v{i} h=x,n={i}\n", i - 1))
                .collect();
            assert_eq!(
                consume_from(broker.addr(), &topic, &["-f", "%o %k %s %h\\n"]),
                expected,
                "klog-consume reads what {lib} produced with {codec}"
            );
            if let Some(kcat) = &kcat {
                let k = broker.kcat(kcat);
                assert_eq!(
                    k.consume(&topic, &["-f", "%o %k %s %h\\n"]),
                    expected,
                    "kcat reads what {lib} produced with {codec}"
                );
            }
            let consume = [lib, "consume", &broker.kafka, &topic, "300"];
            let read = kafka::run_script(&python, "client.py", &consume);
            assert_eq!(
                read,
                client_lines(1, 300, 0),
                "{lib} reads back what it produced with {codec}"
            );
        }
    }
}

/// Item 4: an idempotent kcat producer and kafka-python's default producer
/// (idempotent, acks=all) both deliver, once each.
#[test]
fn idempotent_producers_deliver() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let Some(python) = kafka::python() else {
        return;
    };
    let broker = KafkaBroker::start(&[]);
    let k = broker.kcat(&kcat);
    k.produce(
        "idem",
        lines(500).as_bytes(),
        &["-X", "enable.idempotence=true"],
    );
    assert_eq!(k.consume("idem", &[]), lines(500));
    kafka::run_script(
        &python,
        "client.py",
        &["kafka-python", "produce", &broker.kafka, "kp", "1", "200"],
    );
    let expected: String = (1..=200)
        .map(|i| format!("k{i} v{i} h=x,n={i}\n"))
        .collect();
    assert_eq!(k.consume("kp", &["-f", "%k %s %h\\n"]), expected);
}

/// What `client.py consume` prints for records `from..=to` of `produce`
/// at offsets from `offset` of partition 0.
fn client_lines(from: u32, to: u32, offset: u32) -> String {
    (from..=to)
        .map(|i| format!("0 {} k{i} v{i} h=x,n={i}\n", offset + i - from))
        .collect()
}

/// Item 6 without groups: each Python client produces and reads back with
/// assigned partitions; klog-consume reads the same records.
fn python_client_produces_and_consumes(python: &std::path::Path, lib: &str) {
    let broker = KafkaBroker::start(&[]);
    let topic = format!("py-{lib}");
    kafka::run_script(
        python,
        "client.py",
        &[lib, "produce", &broker.kafka, &topic, "1", "100"],
    );
    let read = kafka::run_script(
        python,
        "client.py",
        &[lib, "consume", &broker.kafka, &topic, "100"],
    );
    assert_eq!(
        read,
        client_lines(1, 100, 0),
        "{lib} reads back what it produced"
    );
    assert_eq!(
        consume_from(broker.addr(), &topic, &["-f", "%o %k %s %h\\n"]),
        (1..=100)
            .map(|i| format!("{} k{i} v{i} h=x,n={i}\n", i - 1))
            .collect::<String>(),
        "klog-consume reads what {lib} produced"
    );
}

#[test]
fn kafka_python_produces_and_consumes() {
    if let Some(python) = kafka::python() {
        python_client_produces_and_consumes(&python, "kafka-python");
    }
}

#[test]
fn confluent_kafka_produces_and_consumes() {
    if let Some(python) = kafka::python() {
        python_client_produces_and_consumes(&python, "confluent-kafka");
    }
}

/// Debian's kafka-python 2.0.2, where its virtual environment could be
/// made (optional: it does not import on Python 3.12 and later).
#[test]
fn kafka_python_2_produces_and_consumes() {
    if let Some(python) = kafka::python2() {
        python_client_produces_and_consumes(&python, "kafka-python");
    }
}

/// Sends `bytes` on a new connection and waits for the broker to answer
/// (the response frame's body) or close the connection (`None`). Fails if
/// it does neither within 10 s (the connection kept open and silent), or
/// sends a torn frame.
fn answer_or_close(kafka: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut stream = std::net::TcpStream::connect(kafka).expect("connect");
    let bound = Duration::from_secs(10);
    stream.set_read_timeout(Some(bound)).unwrap();
    // The broker may close before reading it all: a failed write is a close.
    let _ = stream.write_all(bytes);
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if got.len() >= 4 {
            let len = i32::from_be_bytes(got[..4].try_into().unwrap());
            assert!(len >= 4, "a response of length {len}");
            if got.len() >= 4 + len as usize {
                return Some(got[4..4 + len as usize].to_vec());
            }
        }
        match stream.read(&mut buf) {
            Ok(0) => {
                assert!(
                    got.is_empty(),
                    "closed in the middle of a response: {got:?}"
                );
                return None;
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
            Err(e) => panic!(
                "neither an answer nor a close after {:?}: {e}",
                started.elapsed()
            ),
        }
    }
}

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Frames no client would send, each naming what it tries.
fn hostile_frames() -> Vec<(&'static str, Vec<u8>)> {
    let huge = i32::MAX.to_be_bytes();
    let fetch_v4_huge_partitions = [
        &(-1i32).to_be_bytes()[..], // replica_id
        &0i32.to_be_bytes(),        // max_wait_ms
        &0i32.to_be_bytes(),        // min_bytes
        &1_000_000i32.to_be_bytes(),
        &[0],                // isolation_level
        &1i32.to_be_bytes(), // one topic
        &2i16.to_be_bytes(),
        b"t1",
        &huge, // partitions
    ]
    .concat();
    let produce_v7_negative_records = [
        &(-1i16).to_be_bytes()[..], // transactional_id null
        &1i16.to_be_bytes(),        // acks
        &1000i32.to_be_bytes(),
        &1i32.to_be_bytes(),
        &2i16.to_be_bytes(),
        b"t1",
        &1i32.to_be_bytes(),
        &0i32.to_be_bytes(),    // partition 0
        &(-2i32).to_be_bytes(), // records length
    ]
    .concat();
    let produce_v3_records_past_the_frame = [
        &(-1i16).to_be_bytes()[..],
        &1i16.to_be_bytes(),
        &1000i32.to_be_bytes(),
        &1i32.to_be_bytes(),
        &2i16.to_be_bytes(),
        b"t1",
        &1i32.to_be_bytes(),
        &0i32.to_be_bytes(),
        &huge, // records length
        &[0; 16],
    ]
    .concat();
    let mut torn_client_id = frame(3, 1, 7, &[]);
    torn_client_id[12..14].copy_from_slice(&0x7fffi16.to_be_bytes());
    vec![
        ("Metadata v1, i32::MAX topics", frame(3, 1, 1, &huge)),
        (
            "Metadata v1, a topic name of length -5",
            frame(3, 1, 2, &[0, 0, 0, 1, 0xff, 0xfb]),
        ),
        (
            "Produce v3, i32::MAX topics",
            frame(
                0,
                3,
                3,
                &[&(-1i16).to_be_bytes()[..], &[0, 1], &[0, 0, 3, 0xe8], &huge].concat(),
            ),
        ),
        (
            "Produce v7, records of length -2",
            frame(0, 7, 4, &produce_v7_negative_records),
        ),
        (
            "Produce v3, records past the frame",
            frame(0, 3, 5, &produce_v3_records_past_the_frame),
        ),
        (
            "Fetch v4, i32::MAX partitions",
            frame(1, 4, 6, &fetch_v4_huge_partitions),
        ),
        ("a client id longer than the frame", torn_client_id),
        (
            "ApiVersions v3, a varint that never ends",
            frame(18, 3, 8, &[0xff; 12]),
        ),
        (
            "ApiVersions v3, a huge compact string",
            frame(18, 3, 9, &[0xff, 0xff, 0xff, 0xff, 0x0f, b'x']),
        ),
        (
            "JoinGroup v5, i32::MAX protocols",
            frame(
                11,
                5,
                10,
                &[
                    &[0, 1, b'g'][..],
                    &[0, 0, 0x17, 0x70],
                    &[0, 0, 0x17, 0x70],
                    &[0, 0],
                    &[0xff, 0xff],
                    &[0, 8],
                    b"consumer",
                    &huge,
                ]
                .concat(),
            ),
        ),
        ("an unknown API key", frame(999, 0, 11, &[1, 2, 3])),
        (
            "a negative frame length",
            [&(-1i32).to_be_bytes()[..], &[0; 16]].concat(),
        ),
        (
            "a 2 GiB frame length",
            [&huge[..], &frame(18, 0, 12, &[])[4..]].concat(),
        ),
        (
            "a frame shorter than a header",
            [&3i32.to_be_bytes()[..], &[0, 18, 0]].concat(),
        ),
        ("an empty frame", 0i32.to_be_bytes().to_vec()),
        (
            "a truncated frame",
            frame(3, 1, 13, &[0, 0, 0, 1, 0, 2, b't'])[..12].to_vec(),
        ),
    ]
}

/// Item 7: hostile frames (huge counts, negative lengths, truncated frames,
/// an oversized length, random bytes) get an answer or a close, never a
/// hang; the broker stays up, small, and serves kcat afterwards.
#[test]
fn hostile_frames_get_an_error_or_a_close_and_the_broker_serves_on() {
    let Some(kcat) = kafka::kcat_path() else {
        return;
    };
    let mut broker = KafkaBroker::start(&["--request-timeout", "1s"]);
    // The framing this test writes is right: ApiVersions v0 is answered
    // with the same correlation id and no error; v99 with error 35 in the
    // v0 shape, so that a client retries with a version it knows.
    for (version, error) in [(0i16, 0i16), (99, 35)] {
        let answer = answer_or_close(&broker.kafka, &frame(18, version, 4242, &[]))
            .unwrap_or_else(|| panic!("ApiVersions v{version} was not answered"));
        assert_eq!(answer[..4], 4242i32.to_be_bytes(), "correlation id");
        assert_eq!(
            answer[4..6],
            error.to_be_bytes(),
            "ApiVersions v{version}'s error"
        );
    }
    for (what, bytes) in hostile_frames() {
        let started = Instant::now();
        if let Some(answer) = answer_or_close(&broker.kafka, &bytes) {
            // Only a frame with a whole header may be answered, with its id.
            assert!(
                bytes.len() >= 12 && answer[..4] == bytes[8..12],
                "{what}: {answer:?}"
            );
        }
        broker.assert_running();
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "{what}: closed after {took:?}"
        );
    }
    // Random bodies behind a valid length, some behind a real API's header.
    let mut random = Random(0x9E37_79B9_7F4A_7C15);
    for i in 0..300 {
        let len = (random.next() % 200) as usize;
        let bytes = if i % 2 == 0 {
            let mut body = random.bytes(len);
            let api = [0i16, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18, 22][i / 2 % 13];
            let version = (random.next() % 8) as i16;
            let mut out = frame(api, version, i as i32, &[]);
            out.append(&mut body);
            let total = (out.len() - 4) as i32;
            out[..4].copy_from_slice(&total.to_be_bytes());
            out
        } else {
            [&(len as i32).to_be_bytes()[..], &random.bytes(len)].concat()
        };
        answer_or_close(&broker.kafka, &bytes);
    }
    broker.assert_running();
    // Half a frame, the connection left open: closed after --request-timeout.
    let mut stream = std::net::TcpStream::connect(&broker.kafka).unwrap();
    stream
        .write_all(&frame(3, 1, 1, &[0, 0, 0, 0])[..9])
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let read = stream.read(&mut buf);
    assert!(
        matches!(read, Ok(0))
            || read
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "half a frame: {read:?} after {:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "closed after {:?}",
        started.elapsed()
    );
    broker.assert_running();
    let rss_kib = broker.broker.rss_kib();
    assert!(
        rss_kib < 200 * 1024,
        "the broker holds {rss_kib} KiB after hostile frames"
    );
    // And it still serves a real client.
    let k = broker.kcat(&kcat);
    k.produce("after", lines(10).as_bytes(), &[]);
    assert_eq!(k.consume("after", &[]), lines(10));
    assert!(!k.ok(&["-L", "-J"], b"").is_empty());
}
