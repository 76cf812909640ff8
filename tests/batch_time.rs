//! Issue 24: a producer's batch was stored with whatever timestamp type
//! its attributes say. Kafka's broker rewrites a CreateTime topic's batch
//! to CreateTime (and its maxTimestamp from the records); klog stores a
//! producer's LogAppendTime flag and maxTimestamp as sent, so a Kafka
//! consumer (which then reads every record's timestamp as the batch's
//! maxTimestamp) and klog-consume (which reads the record deltas) disagree
//! about the same records.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use klog::broker::{Broker, BrokerConfig};
use klog::protocol::{self, ErrorCode, Reader};
use klog::storage::record::BatchBuilder;

#[test]
fn kcat_and_klog_consume_read_the_same_timestamps_of_a_batch_flagged_log_append_time() {
    let Ok(kcat) = which_kcat() else {
        panic!("kcat is needed");
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
    if answer.error != ErrorCode::None {
        handle.stop();
        thread.join().unwrap().unwrap();
        return; // refused: fine
    }
    let kafka = handle.kafka_addr().unwrap().to_string();
    let out = std::process::Command::new(kcat)
        .args(["-b", &kafka, "-C", "-t", "t", "-e", "-q", "-f", "%T %s\\n"])
        .output()
        .unwrap();
    let theirs = String::from_utf8_lossy(&out.stdout).to_string();
    let ours = std::process::Command::new(env!("CARGO_BIN_EXE_klog-consume"))
        .args([
            "-b",
            &handle.local_addr().to_string(),
            "-t",
            "t",
            "-e",
            "-q",
        ])
        .args(["-f", "%T %s\\n"])
        .output()
        .unwrap();
    let ours = String::from_utf8_lossy(&ours.stdout).to_string();
    handle.stop();
    thread.join().unwrap().unwrap();
    assert_eq!(theirs, ours, "kcat against klog-consume");
}

fn which_kcat() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("kcat"))
                .find(|p| p.is_file())
        })
        .ok_or(())
}
