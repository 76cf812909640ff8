//! Transactions on klog's own protocol (issue 30's exactly-once mirror
//! builds on them): init_producer_id with a transactional id, add_to_txn,
//! txn_offset_commit, end_txn and produce version 3, answered by the same
//! coordinator as Kafka's clients. Raw frames, so that the test says
//! exactly what a producer sends.

mod common;

use klog::protocol::{self, ErrorCode, TxnProducer, TxnRequest};
use klog::storage::record::{self, BatchBuilder};

use common::{BrokerProc, Raw};

/// A transactional batch of `values` from `p`, its first sequence `seq`.
fn batch(p: &TxnProducer, seq: i32, values: &[&str]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for v in values {
        b.push(1_700_000_000_000, None, &[], v.as_bytes());
    }
    let mut bytes = b.finish_numbered((p.producer_id, p.epoch, seq)).to_vec();
    record::set_transactional(&mut bytes);
    bytes
}

/// Sends `request`; its error, message and body.
fn txn(raw: &mut Raw, request: &TxnRequest) -> (ErrorCode, String, Vec<u8>) {
    let mut frame = Vec::new();
    protocol::txn_request(&mut frame, 1, request);
    raw.call(&frame)
}

/// Inits `id`: its producer.
fn init(raw: &mut Raw, id: &str) -> TxnProducer {
    let (code, msg, body) = txn(
        raw,
        &TxnRequest::Init {
            transactional_id: id.into(),
            timeout_ms: 60_000,
        },
    );
    assert_eq!(code, ErrorCode::None, "{msg}");
    let mut r = protocol::Reader::new(&body);
    TxnProducer {
        transactional_id: id.into(),
        producer_id: r.i64("id").unwrap(),
        epoch: r.u16("epoch").unwrap() as i16,
    }
}

/// Produces `batch` to `topic` [0] in `txn` (none: version 2).
fn produce(raw: &mut Raw, txn: Option<&str>, topic: &str, batch: &[u8]) -> (ErrorCode, String) {
    let mut frame = Vec::new();
    protocol::append_txn_produce_request(&mut frame, 2, (-1, 10_000, txn), topic, 0, batch);
    let (code, msg, _) = raw.call(&frame);
    (code, msg)
}

fn add(raw: &mut Raw, p: &TxnProducer, topic: &str) -> ErrorCode {
    let request = TxnRequest::Add {
        producer: p.clone(),
        partitions: vec![(topic.into(), 0)],
    };
    txn(raw, &request).0
}

fn end(raw: &mut Raw, p: &TxnProducer, commit: bool) -> (ErrorCode, String) {
    let request = TxnRequest::End {
        producer: p.clone(),
        commit,
    };
    let (code, msg, _) = txn(raw, &request);
    (code, msg)
}

/// A committed transaction is read (read_committed, klog-consume's
/// default), an aborted one is not; a batch outside a transaction, one
/// sent without its transactional id and one of a fenced epoch are
/// refused; offsets committed with a transaction reach the group.
#[test]
fn a_native_producer_commits_aborts_and_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("registry");
    let registry_arg = registry.to_str().unwrap();
    let broker = BrokerProc::start(&dir.path().join("data"), &["--registry", registry_arg]);
    let mut raw = Raw::connect(&broker.addr);
    common::produce_to(&broker.addr, "t", "", &[]);
    let p = init(&mut raw, "mirror");

    // Not added to the transaction: refused, and nothing is stored.
    let (code, msg) = produce(&mut raw, Some("mirror"), "t", &batch(&p, 0, &["x"]));
    assert_eq!(code, ErrorCode::InvalidTxnState, "{msg}");
    // A transactional batch without its id (produce version 2).
    let (code, _) = produce(&mut raw, None, "t", &batch(&p, 0, &["x"]));
    assert_eq!(code, ErrorCode::CorruptBatch);

    assert_eq!(add(&mut raw, &p, "t"), ErrorCode::None);
    let (code, msg) = produce(&mut raw, Some("mirror"), "t", &batch(&p, 0, &["a", "b"]));
    assert_eq!(code, ErrorCode::None, "{msg}");
    let offsets = TxnRequest::OffsetCommit {
        producer: p.clone(),
        group: "mirror-g".into(),
        offsets: vec![("src".into(), 0, 42)],
    };
    assert_eq!(txn(&mut raw, &offsets).0, ErrorCode::None);
    // Open: a read_committed reader sees nothing yet.
    assert_eq!(
        common::consume_from(&broker.addr, "t", &["-f", "%s\\n"]),
        ""
    );
    assert_eq!(end(&mut raw, &p, true).0, ErrorCode::None);
    assert_eq!(
        common::consume_from(&broker.addr, "t", &["-f", "%s\\n"]),
        "a\nb\n"
    );

    // The next transaction aborts: its records stay unread, and a batch
    // of it still on its way when the abort marker was written is
    // refused (the abort bumped the epoch), not appended after the
    // marker where no coordinator would ever end it.
    assert_eq!(add(&mut raw, &p, "t"), ErrorCode::None);
    let (code, msg) = produce(&mut raw, Some("mirror"), "t", &batch(&p, 2, &["gone"]));
    assert_eq!(code, ErrorCode::None, "{msg}");
    assert_eq!(end(&mut raw, &p, false).0, ErrorCode::None);
    let (code, msg) = produce(&mut raw, Some("mirror"), "t", &batch(&p, 3, &["late"]));
    assert_eq!(code, ErrorCode::ProducerFenced, "{msg}");
    assert_eq!(add(&mut raw, &p, "t"), ErrorCode::ProducerFenced);
    assert_eq!(
        common::consume_from(&broker.addr, "t", &["-f", "%s\\n"]),
        "a\nb\n"
    );

    // A new instance fences this one: its steps and batches are refused.
    let p = init(&mut raw, "mirror");
    assert_eq!(add(&mut raw, &p, "t"), ErrorCode::None);
    let newer = init(&mut Raw::connect(&broker.addr), "mirror");
    assert!(newer.epoch > p.epoch);
    let (code, msg) = produce(&mut raw, Some("mirror"), "t", &batch(&p, 3, &["zombie"]));
    assert_eq!(code, ErrorCode::ProducerFenced, "{msg}");
    assert_eq!(end(&mut raw, &p, true).0, ErrorCode::ProducerFenced);
    assert_eq!(
        common::consume_from(
            &broker.addr,
            "t",
            &["-f", "%s\\n", "-X", "isolation.level=read_uncommitted"]
        ),
        "a\nb\ngone\n"
    );

    // The transaction's offset reached its group.
    let registry = klog::coord::open(&registry, std::time::Duration::from_secs(10)).unwrap();
    let registry = klog::coord::offsets_topic::TopicRegistry::wrap(registry);
    assert_eq!(registry.committed("mirror-g", "src", 0).unwrap(), Some(42));
}

/// Bytes no client library would send are refused with the reason, and
/// the connection stays usable.
#[test]
fn bad_transactional_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    let mut raw = Raw::connect(&broker.addr);
    let nobody = TxnProducer {
        transactional_id: "never-inited".into(),
        producer_id: 5,
        epoch: 0,
    };
    assert_eq!(
        add(&mut raw, &nobody, "t"),
        ErrorCode::InvalidProducerIdMapping
    );
    let p = init(&mut raw, "t1");
    // End with nothing open.
    assert_eq!(end(&mut raw, &p, true).0, ErrorCode::InvalidTxnState);
    // A timeout out of bounds does not decode.
    let mut frame = Vec::new();
    protocol::txn_request(
        &mut frame,
        1,
        &TxnRequest::Init {
            transactional_id: "t2".into(),
            timeout_ms: 0,
        },
    );
    let (code, msg, _) = raw.call(&frame);
    assert_eq!(code, ErrorCode::InvalidRequest, "{msg}");
    let p = init(&mut raw, "t1");
    assert_eq!(add(&mut raw, &p, "t"), ErrorCode::None);
    // acks 1 for a transaction's batch.
    let mut frame = Vec::new();
    let b = batch(&p, 0, &["a"]);
    protocol::append_txn_produce_request(&mut frame, 2, (1, 10_000, Some("t1")), "t", 0, &b);
    let (code, msg, _) = raw.call(&frame);
    assert_eq!(code, ErrorCode::InvalidRequest, "{msg}");
}
