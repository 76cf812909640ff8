//! Findings of a review of the Kafka listener (issue 14), each a request a
//! hostile or careless Kafka client can send, through a raw `TcpStream`
//! against a broker the test starts.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::bin;
use common::kafka::{
    self, call_flexible, frame, idempotent_batch, idempotent_batch_of, produce_v3, KafkaBroker,
};

/// A Fetch v4 body: one topic, `partitions` entries of (partition,
/// fetch offset, partition max bytes), no wait.
fn fetch_v4(topic: &str, max_bytes: i32, partitions: &[(i32, i64, i32)]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
    body.extend_from_slice(&0i32.to_be_bytes()); // max wait
    body.extend_from_slice(&1i32.to_be_bytes()); // min bytes
    body.extend_from_slice(&max_bytes.to_be_bytes());
    body.push(0); // isolation level
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    body.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
    for &(partition, offset, max) in partitions {
        body.extend_from_slice(&partition.to_be_bytes());
        body.extend_from_slice(&offset.to_be_bytes());
        body.extend_from_slice(&max.to_be_bytes());
    }
    body
}

/// Reads one response frame's body, failing past `bound`.
fn response(stream: &mut TcpStream, bound: Duration) -> Vec<u8> {
    stream.set_read_timeout(Some(bound)).unwrap();
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .expect("a response within the bound");
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).expect("a whole response");
    body
}

/// The records bytes of each partition of a Fetch v4 response of one
/// topic, in order.
fn fetched_bytes(body: &[u8]) -> Vec<i32> {
    let i32_at = |at: usize| i32::from_be_bytes(body[at..at + 4].try_into().unwrap());
    let i16_at = |at: usize| i16::from_be_bytes(body[at..at + 2].try_into().unwrap());
    // correlation id, throttle time, topic count, topic name.
    let mut at = 4 + 4;
    assert_eq!(i32_at(at), 1, "one topic");
    at += 4;
    at += 2 + i16_at(at) as usize;
    let count = i32_at(at);
    at += 4;
    let mut out = Vec::new();
    for _ in 0..count {
        // partition, error, high watermark, last stable offset.
        assert_eq!(i16_at(at + 4), 0, "no error");
        at += 4 + 2 + 8 + 8;
        let aborted = i32_at(at);
        at += 4 + 16 * aborted.max(0) as usize;
        let len = i32_at(at);
        at += 4 + len.max(0) as usize;
        out.push(len);
    }
    out
}

/// A fetch naming a partition many times after the response is full
/// (max_bytes 1: the first entry takes one whole batch) is answered at
/// once: a partition whose batch cannot go in the response is not read
/// and converted only to be thrown away. (It was: 30000 entries over a
/// 900 kB batch made the connection's thread read and convert 27 GB,
/// about 90 s of CPU in a debug build, for a 480 kB request.)
#[test]
fn a_fetch_past_its_byte_budget_reads_no_more_batches() {
    let broker = KafkaBroker::start(&[]);
    let big = "x".repeat(900_000) + "\n";
    bin("klog-produce")
        .args(["-b", broker.addr(), "-t", "big", "-q"])
        .write_stdin(big)
        .timeout(kafka::CLIENT_TIMEOUT)
        .assert()
        .success();
    let mut stream = TcpStream::connect(&broker.kafka).unwrap();
    let entries = vec![(0, 0, 1 << 20); 30_000];
    let started = Instant::now();
    stream
        .write_all(&frame(1, 4, 7, &fetch_v4("big", 1, &entries)))
        .unwrap();
    let body = response(&mut stream, Duration::from_secs(20));
    let took = started.elapsed();
    let sizes = fetched_bytes(&body);
    assert_eq!(sizes.len(), entries.len());
    assert!(
        sizes[0] > 900_000,
        "the first entry has the batch: {}",
        sizes[0]
    );
    assert!(sizes[1..].iter().all(|&n| n == 0), "the others are empty");
    assert!(took < Duration::from_secs(20), "answered in {took:?}");
}

/// A fetch's records were held in memory (read from the segment, then
/// converted), taken from the broker's request memory
/// (`--max-queued-request-bytes`): with 2 MiB of it, a fetch of 8
/// partitions of 600 kB each got at most half of it. Since klog stores
/// Kafka's batches, they go from the page cache with `sendfile` and hold
/// none of it (tests/zero_copy.rs counts the heap): the whole 4.8 MB come
/// back at once, within the fetch's own bounds. (A reserve of twice the
/// fetch's budget, taken for a conversion that no longer happens, kept
/// a consumer from ever reading a large legacy batch.)
#[test]
fn a_fetch_of_more_than_the_request_memory_is_answered_whole() {
    let broker = KafkaBroker::start(&[
        "--partitions",
        "8",
        "--max-request-bytes",
        "1MiB",
        "--max-queued-request-bytes",
        "2MiB",
    ]);
    let record = "y".repeat(60_000);
    for p in 0..8 {
        let lines = format!("{record}\n").repeat(10);
        bin("klog-produce")
            .args([
                "-b",
                broker.addr(),
                "-t",
                "wide",
                "-q",
                "-p",
                &p.to_string(),
            ])
            .write_stdin(lines)
            .timeout(kafka::CLIENT_TIMEOUT)
            .assert()
            .success();
    }
    let mut stream = TcpStream::connect(&broker.kafka).unwrap();
    let entries: Vec<(i32, i64, i32)> = (0..8).map(|p| (p, 0, 10 << 20)).collect();
    stream
        .write_all(&frame(1, 4, 9, &fetch_v4("wide", 100 << 20, &entries)))
        .unwrap();
    let sizes = fetched_bytes(&response(&mut stream, Duration::from_secs(20)));
    let total: i64 = sizes.iter().map(|&n| i64::from(n)).sum();
    assert!(
        total >= 8 * 600_000,
        "every partition's records: {total} bytes in {sizes:?}"
    );
}

/// A fetch whose own frame is large (it names many partitions, so the
/// frame's bytes came out of the request memory) and whose max_bytes
/// asks for the whole request memory is answered at once: it does not
/// wait for memory its own frame holds until the request timeout. (It
/// did: with 1 MiB of request memory, a 128 kB fetch of one record was
/// answered after the whole --request-timeout, 30 s by default, past
/// the clients' own request timeouts.)
#[test]
fn a_large_fetch_frame_does_not_wait_for_its_own_memory() {
    let broker = KafkaBroker::start(&[
        "--max-request-bytes",
        "1MiB",
        "--max-queued-request-bytes",
        "1MiB",
        "--request-timeout",
        "20s",
    ]);
    bin("klog-produce")
        .args(["-b", broker.addr(), "-t", "own", "-q"])
        .write_stdin("one record\n")
        .timeout(kafka::CLIENT_TIMEOUT)
        .assert()
        .success();
    let mut stream = TcpStream::connect(&broker.kafka).unwrap();
    let entries = vec![(0, 0, 1 << 20); 8_000];
    let request = frame(1, 4, 11, &fetch_v4("own", 100 << 20, &entries));
    assert!(request.len() > 100_000, "a frame past the 64 KiB buffer");
    let started = Instant::now();
    stream.write_all(&request).unwrap();
    let sizes = fetched_bytes(&response(&mut stream, Duration::from_secs(30)));
    let took = started.elapsed();
    assert_eq!(sizes.len(), entries.len());
    assert!(sizes[0] > 0, "the record comes back");
    assert!(took < Duration::from_secs(10), "answered in {took:?}");
}

/// A produce with acks=0 gets no answer, so a failed one closes the
/// connection, as Kafka's broker does: the client notices and reconnects
/// (it was dropped without a word, and the client went on sending).
#[test]
fn a_failed_acks_0_produce_closes_the_connection() {
    let broker = KafkaBroker::start(&[]);
    let mut stream = TcpStream::connect(&broker.kafka).unwrap();
    // Produce v3: no transactional id, acks 0, timeout, one topic whose
    // name klog refuses, one partition with a few bytes of records.
    let mut body = Vec::new();
    body.extend_from_slice(&(-1i16).to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&1000i32.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    let topic = b"no such/topic";
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic);
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&4i32.to_be_bytes());
    body.extend_from_slice(&[0, 0, 0, 0]);
    stream.write_all(&frame(0, 3, 11, &body)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut byte = [0u8; 1];
    let read = stream.read(&mut byte);
    assert!(
        matches!(read, Ok(0)),
        "the connection is closed, without an answer: {read:?}"
    );
}

/// An idempotent producer sends a batch again when its answer is lost; the
/// partition stores it once and answers the retry with the first one's
/// offsets (it was stored twice: InitProducerId handed out ids that no
/// partition looked at). Producers are told apart by id, batches by
/// sequence range; a batch without a producer is always appended; an
/// older epoch than the producer's last is refused.
#[test]
fn an_idempotent_producers_retry_is_stored_once() {
    let broker = KafkaBroker::start(&[]);
    let mut stream = TcpStream::connect(&broker.kafka).unwrap();
    let a = idempotent_batch(77, 0, 0, 3);
    assert_eq!(produce_v3(&mut stream, "t", &a), (0, 0));
    assert_eq!(produce_v3(&mut stream, "t", &a), (0, 0), "a retry");
    let b = idempotent_batch(77, 0, 3, 2);
    assert_eq!(produce_v3(&mut stream, "t", &b), (0, 3));
    // The retry of the first comes late, on another connection.
    let mut again = TcpStream::connect(&broker.kafka).unwrap();
    assert_eq!(produce_v3(&mut again, "t", &a), (0, 0), "a late retry");
    assert_eq!(produce_v3(&mut again, "t", &b), (0, 3));
    // Another producer's batch with the same numbers is its own.
    let other = idempotent_batch(78, 0, 0, 3);
    assert_eq!(produce_v3(&mut stream, "t", &other), (0, 5));
    // Without a producer id, nothing is taken for a retry.
    let plain = idempotent_batch(-1, -1, -1, 1);
    assert_eq!(produce_v3(&mut stream, "t", &plain), (0, 8));
    assert_eq!(produce_v3(&mut stream, "t", &plain), (0, 9));
    // A new epoch starts afresh; the old one is fenced.
    let bumped = idempotent_batch(77, 1, 0, 3);
    assert_eq!(produce_v3(&mut stream, "t", &bumped), (0, 10));
    let (error, _) = produce_v3(&mut stream, "t", &idempotent_batch(77, 0, 5, 1));
    assert_eq!(error, 47, "INVALID_PRODUCER_EPOCH");
    let stored = bin("klog-consume")
        .args(["-b", broker.addr(), "-t", "t", "-e", "-q", "-f", "%o %s\\n"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&stored.stdout),
        "0 r0\n1 r1\n2 r2\n3 r3\n4 r4\n5 r0\n6 r1\n7 r2\n8 r-1\n9 r-1\n10 r0\n11 r1\n12 r2\n"
    );
}

/// A batch is a retry only if it is the batch sent before, byte for byte,
/// not merely one with the same producer, epoch and sequence range: such a
/// batch, other records under numbers seen before, was answered with the
/// earlier batch's offsets and dropped (records acknowledged and lost).
/// It is refused now, OUT_OF_ORDER_SEQUENCE_NUMBER (the numbers do not
/// follow the producer's last), and nothing of it is stored; the retry of
/// the first is still a retry.
#[test]
fn a_batch_with_a_retrys_numbers_but_other_records_is_refused_not_dropped() {
    let broker = KafkaBroker::start(&[]);
    let mut stream = TcpStream::connect(&broker.kafka).unwrap();
    let first = idempotent_batch(91, 0, 0, 2);
    assert_eq!(produce_v3(&mut stream, "n", &first), (0, 0));
    let other = idempotent_batch_of(91, 0, 0, 2, "other-");
    assert_eq!(
        produce_v3(&mut stream, "n", &other),
        (45, -1),
        "not a retry"
    );
    assert_eq!(produce_v3(&mut stream, "n", &first), (0, 0), "a retry");
    let next = idempotent_batch_of(91, 0, 2, 2, "other-");
    assert_eq!(produce_v3(&mut stream, "n", &next), (0, 2));
    let stored = bin("klog-consume")
        .args(["-b", broker.addr(), "-t", "n", "-e", "-q", "-f", "%o %s\\n"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&stored.stdout),
        "0 r0\n1 r1\n2 other-2\n3 other-3\n"
    );
}

/// The peak resident memory of process `pid`, in kB.
fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// A produce naming 6 million empty partitions (a 48 MB frame) is refused
/// as a whole: its answer alone would be 132 MB, and handling it took
/// the broker past a gigabyte of heap (1,169,248 kB peak).
#[test]
fn a_produce_of_millions_of_partitions_does_not_balloon_the_broker() {
    let broker = KafkaBroker::start(&[]);
    let entries = 6_000_000usize;
    let mut body = Vec::with_capacity(19 + entries * 8);
    body.extend_from_slice(&(-1i16).to_be_bytes());
    body.extend_from_slice(&1i16.to_be_bytes());
    body.extend_from_slice(&30_000i32.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&1i16.to_be_bytes());
    body.push(b't');
    body.extend_from_slice(&(entries as i32).to_be_bytes());
    for index in 0..entries as i32 {
        body.extend_from_slice(&index.to_be_bytes());
        body.extend_from_slice(&(-1i32).to_be_bytes());
    }
    let mut stream = TcpStream::connect(&broker.kafka).unwrap();
    // The broker may close before it has read the whole frame.
    let _ = stream.write_all(&frame(0, 3, 31, &body));
    drop(body);
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    assert!(
        read.is_ok() && answer.len() < 1 << 20,
        "refused with a short answer or a close: {read:?}, {} bytes",
        answer.len()
    );
    let peak = peak_rss_kb(broker.broker.child.id());
    assert!(
        peak < 400_000,
        "the broker's peak resident memory: {peak} kB"
    );
}

/// Issue 27: ListOffsets by time answers the offset of the first record at
/// or after that time with that record's own timestamp (aiokafka's
/// `offsets_for_times` showed -1; Java's `offsetsForTimes` throws on a
/// negative one); the start and the end are answered with timestamp -1,
/// and a time past every record with offset -1 and timestamp -1.
#[test]
fn list_offsets_by_time_answers_the_records_timestamp() {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    let b = KafkaBroker::start(&[]);
    common::produce_to(b.addr(), "t", "a\nb\nc\n", &[]);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    common::produce_to(b.addr(), "t", "d\ne\n", &[]);
    let mut stream = TcpStream::connect(&b.kafka).unwrap();
    let mut ask = |timestamp: i64| {
        let partition = km::list_offsets_request::ListOffsetsPartition::default()
            .with_partition_index(0)
            .with_timestamp(timestamp);
        let topic = km::list_offsets_request::ListOffsetsTopic::default()
            .with_name(km::TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![partition]);
        let request = km::ListOffsetsRequest::default()
            .with_replica_id(km::BrokerId(-1))
            .with_topics(vec![topic]);
        let mut body = Vec::new();
        request.encode(&mut body, 1).unwrap();
        stream.write_all(&frame(2, 1, 7, &body)).unwrap();
        let answer = response(&mut stream, Duration::from_secs(20));
        let mut rest = &answer[4..];
        let r = km::ListOffsetsResponse::decode(&mut rest, 1).unwrap();
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "{timestamp}");
        (p.offset, p.timestamp)
    };
    assert_eq!(ask(-2), (0, -1), "the start");
    assert_eq!(ask(-1), (5, -1), "the end");
    let (offset, timestamp) = ask(0);
    assert_eq!(offset, 0);
    assert!(timestamp > 0 && timestamp <= before, "{timestamp}");
    let (offset, timestamp) = ask(before);
    assert_eq!(offset, 3, "the first record produced after {before}");
    assert!(timestamp >= before, "{timestamp} < {before}");
    assert_eq!(ask(before + 3_600_000), (-1, -1), "past every record");
}

/// Issue 26's review: a fetch that names one partition again and again
/// (at offsets in as many sealed segments) is answered once for it, the
/// repeats empty, as Kafka's broker keeps one ask per partition: each
/// answer held its segment's file open until written, and 1,050 asks held
/// the broker's last descriptors, which stopped another topic's partition.
#[test]
fn a_fetch_naming_a_partition_again_is_answered_once_for_it() {
    let broker = KafkaBroker::start(&["--segment-bytes", "4KiB"]);
    let lines: String = (0..40).map(|i| format!("{i:01000}\n")).collect();
    bin("klog-produce")
        .args(["-b", broker.addr(), "-t", "w", "-q", "--batch", "1"])
        .write_stdin(lines)
        .timeout(kafka::CLIENT_TIMEOUT)
        .assert()
        .success();
    let mut stream = TcpStream::connect(&broker.kafka).unwrap();
    let entries: Vec<(i32, i64, i32)> = (0..3).flat_map(|_| (0..40).map(|o| (0, o, 1))).collect();
    stream
        .write_all(&frame(1, 4, 7, &fetch_v4("w", 1 << 20, &entries)))
        .unwrap();
    let sizes = fetched_bytes(&response(&mut stream, Duration::from_secs(20)));
    assert_eq!(sizes.len(), entries.len());
    assert!(sizes[0] > 1000, "the first ask has a batch: {}", sizes[0]);
    assert!(sizes[1..].iter().all(|&n| n == 0), "{sizes:?}");
}

/// FindCoordinator v4 (several keys at once, flexible: header v2, as the
/// crate writes it) is answered with each key's coordinator: this broker
/// for each group and each transactional id (every broker coordinates
/// every transaction: their state is in the registry).
#[test]
fn find_coordinator_v4_answers_each_key() {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    let b = KafkaBroker::start(&[]);
    let mut stream = TcpStream::connect(&b.kafka).unwrap();
    let mut ask = |key_type: i8| {
        let request = km::FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(vec![
                StrBytes::from_static_str("ga"),
                StrBytes::from_static_str("gb"),
            ]);
        let r: km::FindCoordinatorResponse = call_flexible(&mut stream, (10, 4), &request);
        r.coordinators
            .iter()
            .map(|c| (c.key.to_string(), c.error_code, c.port))
            .collect::<Vec<_>>()
    };
    let port: i32 = b.kafka.rsplit_once(':').unwrap().1.parse().unwrap();
    let groups = ask(0);
    assert_eq!(
        groups,
        [("ga".to_string(), 0, port), ("gb".to_string(), 0, port)]
    );
    // Past 1,000 distinct keys, each other key is refused, and none costs
    // a look at the registry.
    let many: Vec<StrBytes> = (0..1_001)
        .map(|i| StrBytes::from_string(format!("g{i}")))
        .collect();
    let request = km::FindCoordinatorRequest::default().with_coordinator_keys(many);
    let mut other = TcpStream::connect(&b.kafka).unwrap();
    let r: km::FindCoordinatorResponse = call_flexible(&mut other, (10, 4), &request);
    let errors: Vec<i16> = r.coordinators.iter().map(|c| c.error_code).collect();
    assert_eq!(errors.len(), 1_001);
    assert!(errors[..1_000].iter().all(|&e| e == 0));
    assert_eq!(errors[1_000], 42, "INVALID_REQUEST past the bound");
    let transactions = ask(1);
    assert_eq!(
        transactions,
        [("ga".to_string(), 0, port), ("gb".to_string(), 0, port)]
    );
}

/// LeaveGroup v3+ lets several members go at once, each answered on its
/// own (members the group does not know: UNKNOWN_MEMBER_ID each, the
/// request itself without error); v4+ is flexible.
#[test]
fn leave_group_v5_answers_each_member() {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    let b = KafkaBroker::start(&[]);
    let mut stream = TcpStream::connect(&b.kafka).unwrap();
    let member = |id: &'static str| {
        km::leave_group_request::MemberIdentity::default()
            .with_member_id(StrBytes::from_static_str(id))
            .with_group_instance_id(None)
    };
    let request = km::LeaveGroupRequest::default()
        .with_group_id(km::GroupId(StrBytes::from_static_str("lg")))
        .with_members(vec![member("m-1"), member("m-2")]);
    let r: km::LeaveGroupResponse = call_flexible(&mut stream, (13, 5), &request);
    assert_eq!(r.error_code, 0);
    let members: Vec<_> = r
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.error_code))
        .collect();
    assert_eq!(members, [("m-1".into(), 25), ("m-2".to_string(), 25)]);
}

/// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs answer at
/// most 1,000 resources of one request (each costs a registry read or
/// write; a describe, a dozen configs): those past it are refused, and a
/// request of 100,000 copies of one topic does not make a response of
/// tens of megabytes.
#[test]
fn config_requests_answer_at_most_1000_resources() {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    let b = KafkaBroker::start(&[]);
    kafka::run_script(
        &match kafka::python() {
            Some(p) => p,
            None => return,
        },
        "admin_clients.py",
        &["confluent-kafka", &b.kafka, "create", "t", "1", "1"],
    );
    let resource = km::describe_configs_request::DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_static_str("t"))
        .with_configuration_keys(None);
    let request = km::DescribeConfigsRequest::default().with_resources(vec![resource; 1_001]);
    let mut stream = TcpStream::connect(&b.kafka).unwrap();
    let r: km::DescribeConfigsResponse = call_flexible(&mut stream, (32, 4), &request);
    let errors: Vec<i16> = r.results.iter().map(|r| r.error_code).collect();
    assert_eq!(errors.len(), 1_001);
    assert!(
        errors[..1_000].iter().all(|&e| e == 0),
        "{:?}",
        &errors[..3]
    );
    assert_eq!(errors[1_000], 42, "INVALID_REQUEST past the bound");
    assert!(r.results[1_000].configs.is_empty());
    let alter = km::incremental_alter_configs_request::AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_static_str("none"));
    let request = km::IncrementalAlterConfigsRequest::default().with_resources(vec![alter; 1_001]);
    let r: km::IncrementalAlterConfigsResponse = call_flexible(&mut stream, (44, 1), &request);
    let errors: Vec<i16> = r.responses.iter().map(|r| r.error_code).collect();
    // Named more than once: each refused as Kafka does.
    assert!(errors.iter().all(|&e| e == 42), "{:?}", &errors[..3]);
}
