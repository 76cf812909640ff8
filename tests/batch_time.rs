//! Issue 24: a producer's batch was stored with whatever timestamp type
//! its attributes say. Kafka's broker rewrites a CreateTime topic's batch
//! to CreateTime (and its maxTimestamp from the records); klog stores a
//! producer's LogAppendTime flag and maxTimestamp as sent, so a Kafka
//! consumer (which then reads every record's timestamp as the batch's
//! maxTimestamp) and klog-consume (which reads the record deltas) disagree
//! about the same records.

mod common;

use std::process::Command;

use common::kafka::{assert_ok, kcat_path, run_bounded, CLIENT_TIMEOUT};
use common::Raw;
use klog::broker::{Broker, BrokerConfig};
use klog::protocol::{self, ErrorCode};
use klog::storage::record::BatchBuilder;

#[test]
fn kcat_and_klog_consume_read_the_same_timestamps_of_a_batch_flagged_log_append_time() {
    let Some(kcat) = kcat_path() else {
        return;
    };
    let data = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig::new(data.path(), "127.0.0.1:0");
    config.kafka_listen = Some("127.0.0.1:0".into());
    config.quiet = true;
    let broker = Broker::open(config).expect("the broker opens");
    let handle = broker.handle().unwrap();
    let thread = std::thread::spawn(move || broker.run());

    let mut b = BatchBuilder::new();
    for i in 0..3 {
        b.push(
            1_700_000_000_000 + i * 1000,
            None,
            &[],
            format!("v{i}").as_bytes(),
        );
    }
    let mut batch = b.finish().to_vec();
    // attributes |= LogAppendTime, CRC32C again: what a client may send.
    batch[22] |= 0x08;
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    let mut frame = Vec::new();
    protocol::produce_request(&mut frame, 1, 1, 5000, "t", 0, &batch);
    let (error, message, _) = Raw::connect(&handle.local_addr().to_string()).call(&frame);
    assert_eq!(error, ErrorCode::None, "{message}");
    let mut theirs = Command::new(kcat);
    let kafka = handle.kafka_addr().unwrap().to_string();
    theirs.args(["-b", &kafka, "-C", "-t", "t", "-e", "-q", "-f", "%T %s\\n"]);
    let mut ours = Command::new(env!("CARGO_BIN_EXE_klog-consume"));
    let addr = handle.local_addr().to_string();
    ours.args(["-b", &addr, "-t", "t", "-e", "-q", "-f", "%T %s\\n"]);
    let theirs = run_bounded(theirs, b"", CLIENT_TIMEOUT);
    let ours = run_bounded(ours, b"", CLIENT_TIMEOUT);
    handle.stop();
    thread.join().unwrap().unwrap();
    assert_ok("kcat -C", &theirs);
    assert_ok("klog-consume", &ours);
    let theirs = String::from_utf8_lossy(&theirs.stdout);
    let ours = String::from_utf8_lossy(&ours.stdout);
    assert_eq!(theirs.lines().count(), 3, "kcat read: {theirs}");
    assert_eq!(theirs, ours, "kcat against klog-consume");
}
