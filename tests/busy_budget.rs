//! Issue 24: the process's room for decompressed records, held by other
//! batches for now, is a retriable condition (Kafka's listener answers
//! REQUEST_TIMED_OUT, and a producer retries). klog's own listener answers
//! it as `corrupt_batch`, which klog-produce does not retry: a producer's
//! sound compressed batch is refused as corrupt while others decompress.
//! The broker runs in this process, so that the test can hold the
//! process's budget (as four large batches being checked would).

mod common;

use common::Raw;
use klog::broker::{Broker, BrokerConfig};
use klog::protocol::{self, ErrorCode};
use klog::storage::record::compression::{decompress, Decompressed, PROCESS};
use klog::storage::record::{BatchBuilder, Codec};

#[test]
fn a_native_produce_of_a_compressed_batch_while_the_budget_is_held_is_not_corrupt() {
    let data = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig::new(data.path(), "127.0.0.1:0");
    config.quiet = true;
    let broker = Broker::open(config).expect("the broker opens");
    let handle = broker.handle().unwrap();
    let thread = std::thread::spawn(move || broker.run());

    // Batches being checked elsewhere hold the whole budget: raw snappy
    // blocks, each of which takes exactly what it says it holds.
    let max = klog::storage::record::compression::DECOMPRESSED_BYTES_MAX;
    let mut held = Vec::new();
    while PROCESS.held() < max {
        let n = (max - PROCESS.held()).min(klog::limits::BATCH_BYTES_MAX as usize);
        let block = snap::raw::Encoder::new()
            .compress_vec(&vec![0u8; n])
            .unwrap();
        let mut d = Decompressed::default();
        decompress(Codec::Snappy, &block, &mut d).unwrap();
        held.push(d);
    }
    assert_eq!(PROCESS.held(), max, "the budget is held");

    let mut b = BatchBuilder::compressed(Codec::Zstd, None);
    b.push(1, None, &[], b"a sound record");
    let batch = b.finish().to_vec();
    let mut frame = Vec::new();
    protocol::produce_request(&mut frame, 1, 1, 5000, "t", 0, &batch);
    let (error, message, _) = Raw::connect(&handle.local_addr().to_string()).call(&frame);
    drop(held);
    handle.stop();
    thread.join().unwrap().unwrap();
    assert_eq!(
        error,
        ErrorCode::Timeout,
        "a sound batch, while the budget is held: {message}"
    );
}
