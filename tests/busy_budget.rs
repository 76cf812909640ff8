//! Issue 24: the process's room for decompressed records, held by other
//! batches for now, is a retriable condition (Kafka's listener answers
//! REQUEST_TIMED_OUT, and a producer retries). klog's own listener answers
//! it as `corrupt_batch`, which klog-produce does not retry: a producer's
//! sound compressed batch is refused as corrupt while others decompress.
//! The broker runs in this process, so that the test can hold the
//! process's budget (as four large batches being checked would).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use klog::broker::{Broker, BrokerConfig};
use klog::protocol::{self, ErrorCode, Reader};
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
    let mut stream = TcpStream::connect(handle.local_addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(&frame).unwrap();
    let mut head = [0u8; 4];
    stream.read_exact(&mut head).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(head) as usize];
    stream.read_exact(&mut body).unwrap();
    let answer = protocol::decode_response_header(&mut Reader::new(&body)).unwrap();
    drop(held);
    handle.stop();
    thread.join().unwrap().unwrap();
    assert_ne!(
        answer.error,
        ErrorCode::CorruptBatch,
        "a sound batch refused as corrupt: {}",
        answer.message
    );
}
