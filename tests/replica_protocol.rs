//! The protocol a follower speaks, through a real broker: fetch version 3
//! (a replica id, the leader epoch each side believes current) and
//! offsets_for_leader_epoch (api 5, Kafka's OffsetsForLeaderEpoch), on a
//! partition written in several leader epochs before the broker starts;
//! and fetch versions 1 and 2 answered in the bytes they always were.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{BrokerProc, Raw};
use klog::client::Connection;
use klog::error::Error;
use klog::protocol::{self, put, ErrorCode, FetchPartition, FetchWant, Reader};
use klog::storage::fs::RealFs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::{Batch, BatchBuilder};

/// Partition `t` [0] in `data`: offsets 0-1 in epoch 0, 2-4 in epoch 2,
/// 5 in epoch 5 (the epochs a leader of each wrote).
fn seed_epochs(data: &Path) {
    let options = OpenOptions {
        writable: true,
        lock: true,
    };
    let dir = data.join("t-0");
    std::fs::create_dir_all(&dir).unwrap();
    let mut log =
        Log::open(Arc::new(RealFs), &dir, LogConfig::default(), options).expect("a new partition");
    for (epoch, values) in [(0, &["a", "b"][..]), (2, &["c", "d", "e"]), (5, &["f"])] {
        log.set_leader_epoch(epoch).unwrap();
        let mut b = BatchBuilder::new();
        for v in values {
            b.push(1_000, None, &[], v.as_bytes());
        }
        log.append(&mut b.finish().to_vec(), 1_000).unwrap();
    }
    log.close().unwrap();
}

const WANT: FetchWant = FetchWant {
    wait_ms_max: 0,
    bytes_min: 0,
    response_bytes_max: 1 << 20,
};

fn ask(topic: &str, offset: u64, leader_epoch: Option<u32>) -> FetchPartition {
    FetchPartition {
        topic: topic.into(),
        partition: 0,
        offset,
        bytes_max: 1 << 20,
        leader_epoch,
    }
}

/// Every record's (offset, leader epoch of its batch, value) in `records`.
fn records_of(records: &[u8]) -> Vec<(u64, u32, String)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let batch = Batch::decode(
            klog::storage::record::Format::Kafka,
            &records[at..],
            1 << 20,
        )
        .unwrap();
        for r in batch.records(1 << 20) {
            let r = r.unwrap();
            let value = String::from_utf8(r.value.to_vec()).unwrap();
            out.push((r.offset, batch.header.leader_epoch, value));
        }
        at += batch.total_bytes();
    }
    out
}

#[test]
fn offsets_for_leader_epoch_answers_where_each_epoch_ends() {
    let dir = tempfile::tempdir().unwrap();
    seed_epochs(dir.path());
    let broker = BrokerProc::start(dir.path(), &[]);
    let mut c = Connection::connect(&broker.addr).unwrap();
    let ends: Vec<_> = (0..=6)
        .map(|epoch| c.offsets_for_leader_epoch("t", 0, None, epoch).unwrap())
        .collect();
    assert_eq!(
        ends,
        [
            Some((0, 2)),
            Some((0, 2)),
            Some((2, 5)),
            Some((2, 5)),
            Some((2, 5)),
            Some((5, 6)),
            None
        ],
        "the largest epoch at or below the one asked, and where it ends; the latest at the log's end"
    );
    assert_eq!(
        c.offsets_for_leader_epoch("t", 0, Some(5), 2).unwrap(),
        Some((2, 5)),
        "a current epoch is carried (not checked by this broker yet)"
    );
    for (topic, partition, code) in [
        ("none", 0, ErrorCode::UnknownTopic),
        ("t", 3, ErrorCode::UnknownPartition),
    ] {
        let err = c
            .offsets_for_leader_epoch(topic, partition, None, 0)
            .unwrap_err();
        assert!(
            matches!(&err, Error::Broker { code: got, .. } if *got == code),
            "{topic} [{partition}]: {err}"
        );
    }
}

#[test]
fn a_version_3_fetch_answers_with_the_partitions_leader_epoch() {
    let dir = tempfile::tempdir().unwrap();
    seed_epochs(dir.path());
    let broker = BrokerProc::start(dir.path(), &[]);
    let mut c = Connection::connect(&broker.addr).unwrap();
    // A consumer's version 3 fetch (no replica id): a single copy has no
    // followers, and refuses a replica's fetch.
    let parts = c
        .replica_fetch("", WANT, &[ask("t", 0, Some(5)), ask("none", 0, None)])
        .unwrap();
    let t = &parts[0];
    assert_eq!(
        (t.error, t.start_offset, t.end_offset),
        (ErrorCode::None, 0, 6)
    );
    assert_eq!(t.leader_epoch, Some(5), "the log's current leader epoch");
    let got = records_of(t.records);
    let want: Vec<(u64, u32, String)> = [(0, 0, "a"), (1, 0, "b"), (2, 2, "c"), (3, 2, "d")]
        .into_iter()
        .chain([(4, 2, "e"), (5, 5, "f")])
        .map(|(o, e, v)| (o, e, v.to_string()))
        .collect();
    assert_eq!(got, want, "the batches as written, each with its epoch");
    let none = &parts[1];
    assert_eq!(
        (none.error, none.leader_epoch),
        (ErrorCode::UnknownTopic, None)
    );
    // A consumer's version 3 (no replica id) gets the same.
    let consumer = c.replica_fetch("", WANT, &[ask("t", 5, None)]).unwrap();
    assert_eq!(
        (
            consumer[0].leader_epoch,
            records_of(consumer[0].records).len()
        ),
        (Some(5), 1)
    );
}

/// The body of a fetch response to `frame`, after its header.
fn fetch_answer(raw: &mut Raw, frame: &[u8]) -> Vec<u8> {
    let (code, msg, body) = raw.call(frame);
    assert_eq!(code, ErrorCode::None, "{msg}");
    body
}

/// A consumer's fetch (version 4) and a replica's (version 5) answer the
/// same bytes but for the epoch; versions 1 to 3, whose readers expect
/// klog's legacy batches, are refused saying why, and the connection goes
/// on.
#[test]
fn fetch_versions_4_and_5_answer_alike_and_older_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    seed_epochs(dir.path());
    let broker = BrokerProc::start(dir.path(), &[]);
    let mut raw = Raw::connect(&broker.addr);
    let mut frame = Vec::new();
    protocol::replica_fetch_request(&mut frame, 1, "", WANT, &[ask("t", 2, Some(5))]);
    assert_eq!(&frame[4..8], [1, 0, 5, 0], "a replica sends version 5");
    let v5 = fetch_answer(&mut raw, &frame);
    protocol::fetch_request(&mut frame, 2, WANT, &[ask("t", 2, None)]);
    assert_eq!(&frame[4..8], [1, 0, 4, 0], "a consumer sends version 4");
    let v4 = fetch_answer(&mut raw, &frame);
    for old in 1..=3u8 {
        let mut old_frame = frame.clone();
        old_frame[6] = old;
        let (code, msg, _) = raw.call(&old_frame);
        assert_eq!(code, ErrorCode::UnsupportedRequest, "version {old}: {msg}");
        assert!(msg.contains("RecordBatch v2"), "{msg}");
    }

    // Version 4's partition, field by field.
    let mut r = Reader::new(&v4);
    assert_eq!(r.u16("count").unwrap(), 1);
    assert_eq!(r.str("topic").unwrap(), "t");
    assert_eq!(r.u32("partition").unwrap(), 0);
    assert_eq!(r.u16("error").unwrap(), 0);
    assert_eq!(r.str("message").unwrap(), "");
    assert_eq!(r.u64("start_offset").unwrap(), 0);
    assert_eq!(r.u64("end_offset").unwrap(), 6);
    let records = r.bytes("records").unwrap();
    r.finish("version 4 answer").unwrap();
    assert_eq!(records_of(records).len(), 4);

    // Version 5 is the same with the epoch after end_offset.
    let at = 2 + (2 + 1) + 4 + 2 + 2 + 8 + 8;
    let mut expected = v4[..at].to_vec();
    put::i64(&mut expected, 5);
    expected.extend_from_slice(&v4[at..]);
    assert_eq!(v5, expected);
    let parts = protocol::decode_fetch_response(&mut Reader::new(&v4), 4).unwrap();
    assert_eq!(parts[0].leader_epoch, None, "version 4 carries no epoch");
}

#[test]
fn hostile_epochs_and_replica_ids_are_invalid_requests_and_the_connection_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    seed_epochs(dir.path());
    let broker = BrokerProc::start(dir.path(), &[]);
    let mut raw = Raw::connect(&broker.addr);
    let mut frame = Vec::new();
    // The epoch is the fetch's last 8 bytes.
    for bad in [-2i64, i64::from(u32::MAX) + 1, i64::MIN] {
        protocol::replica_fetch_request(&mut frame, 1, "b2", WANT, &[ask("t", 0, Some(1))]);
        let end = frame.len();
        frame[end - 8..].copy_from_slice(&bad.to_le_bytes());
        let (code, msg, _) = raw.call(&frame);
        assert_eq!(code, ErrorCode::InvalidRequest, "epoch {bad}: {msg}");
        assert!(msg.contains("leader_epoch"), "{msg}");
    }
    let long_id = "b".repeat(klog::limits::BROKER_ID_BYTES_MAX + 1);
    protocol::replica_fetch_request(&mut frame, 2, &long_id, WANT, &[ask("t", 0, None)]);
    let (code, msg, _) = raw.call(&frame);
    assert_eq!(code, ErrorCode::InvalidRequest, "{msg}");
    protocol::offsets_for_leader_epoch_request(&mut frame, 3, "t", 0, Some(1), 0);
    let at = frame.len() - 12;
    frame[at..at + 8].copy_from_slice(&(-5i64).to_le_bytes());
    let (code, msg, _) = raw.call(&frame);
    assert_eq!(code, ErrorCode::InvalidRequest, "{msg}");
    // Still served.
    protocol::offsets_for_leader_epoch_request(&mut frame, 4, "t", 0, None, 2);
    let (code, msg, body) = raw.call(&frame);
    assert_eq!(code, ErrorCode::None, "{msg}");
    let end = protocol::decode_epoch_end(&mut Reader::new(&body)).unwrap();
    assert_eq!(end, Some((2, 5)));
}
