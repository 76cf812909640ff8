//! Issue 24: a data directory written before klog stored Kafka's
//! RecordBatch v2 (the frozen golden partition `tests/golden/legacy/`,
//! klog's own magic 2 batches) under a broker of this build: read by both
//! protocols, its legacy batches converted at the edge; new appends go to
//! a new segment in Kafka's format; klog-dump verifies it all clean.

mod common;

use std::path::Path;

use common::kafka::{self};
use common::{bin, consume_from, produce_to, BrokerProc};

/// Copies the frozen legacy partition into `data` as topic `golden`.
fn legacy_partition(data: &Path) -> std::path::PathBuf {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/legacy/partition");
    let part = data.join("golden-0");
    std::fs::create_dir_all(&part).unwrap();
    for entry in std::fs::read_dir(golden).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), part.join(entry.file_name())).unwrap();
    }
    part
}

/// Each stored record's offset and value length, as `%o %S`.
const GOLDEN: &str = "0 11\n1 7\n2 256\n3 0\n4 12\n5 7\n6 7\n7 6\n8 5\n";

#[test]
fn a_legacy_partition_is_read_by_both_protocols_and_takes_appends_in_kafkas_format() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let part = legacy_partition(&data);
    let broker = BrokerProc::start(&data, &["--kafka-listen", "127.0.0.1:0"]);
    let kafka_addr = broker
        .log()
        .iter()
        .find_map(|l| l.strip_prefix("% Listening for Kafka clients on "))
        .map(str::to_string)
        .expect("a Kafka listener");
    let format = ["-f", "%o %S\\n"];
    assert_eq!(consume_from(&broker.addr, "golden", &format), GOLDEN);
    if let Some(kcat) = kafka::kcat_path() {
        let out = std::process::Command::new(&kcat)
            .args(["-b", &kafka_addr, "-C", "-t", "golden", "-e", "-q"])
            .args(["-f", "%o %S %k\\n"])
            .output()
            .unwrap();
        kafka::assert_ok("kcat -C of a legacy partition", &out);
        let read = String::from_utf8_lossy(&out.stdout);
        let offsets: Vec<&str> = read.lines().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(
            offsets,
            ["0", "1", "2", "3", "4", "5", "6", "7", "8"],
            "{read}"
        );
        assert!(read.starts_with("0 11 user-42\n"), "{read}");
    }
    produce_to(&broker.addr, "golden", "new one\nnew two\n", &[]);
    let read = consume_from(&broker.addr, "golden", &format);
    assert_eq!(read, format!("{GOLDEN}9 7\n10 7\n"));
    drop(broker);
    // The new records went to a segment of their own, in Kafka's format.
    let dump = bin("klog-dump").arg("--json").arg(&part).output().unwrap();
    let formats: Vec<(u64, String)> = String::from_utf8_lossy(&dump.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "batch")
        .map(|v| {
            let base = v["base_offset"].as_u64().unwrap();
            (base, v["format"].as_str().unwrap().to_string())
        })
        .collect();
    let legacy = |base| (base, "klog".to_string());
    assert_eq!(
        formats,
        [
            legacy(0),
            legacy(4),
            legacy(5),
            legacy(7),
            legacy(8),
            (9, "kafka".to_string())
        ]
    );
    assert!(part.join("00000000000000000009.log").exists());
    bin("klog-dump").arg("--verify").arg(&part).assert().code(0);
}
