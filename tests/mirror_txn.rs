//! Issue 30's exactly-once mirror, step by step: a transactional
//! producer (`klog-produce --transactional-id`) fed `-J` envelopes stores
//! each source record once, whether the envelopes come again in the same
//! run (a consumer that printed them again after a rebalance) or in a
//! later one (a consumer that resumed below what the destination holds),
//! and stops at a record it cannot send rather than commit past it.

mod common;

use common::cluster::Cluster;
use common::registry::Backend;

/// `-J` envelopes of source `s` partition 0, offsets `from..to`, each
/// value its offset.
fn envelopes(from: u64, to: u64) -> String {
    (from..to)
        .map(|o| {
            format!(
                "{{\"topic\":\"s\",\"partition\":0,\"offset\":{o},\"key\":null,\"payload\":\"{o}\"}}\n"
            )
        })
        .collect()
}

/// Runs a transactional producer of `input` into topic `t` of `registry`
/// with extra `args`: its exit code, its stderr and its report.
fn produce(registry: &str, input: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("acks");
    let out = common::bin("klog-produce")
        .args(["--registry", registry, "-t", "t", "-J"])
        .args(["--transactional-id", "mirror-s", "--report"])
        .arg(&report)
        .args(args)
        .write_stdin(input.to_string())
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    let report = std::fs::read_to_string(&report).unwrap_or_default();
    (out.status.code(), said, report)
}

/// The values the destination's read_committed readers see, in order.
fn stored(registry: &str) -> Vec<u64> {
    common::consume_registry(registry, "t", &["-f", "%s\\n"])
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

#[test]
fn envelopes_handed_again_are_stored_once_in_the_same_run_and_the_next() {
    let dest = Cluster::start(Backend::Dir, 1, &[]).unwrap();
    let registry = dest.spec();
    // 0..100, then 50..100 again while the first transaction is open.
    let input = envelopes(0, 100) + &envelopes(50, 100);
    let (code, said, report) = produce(registry, &input, &["--transaction-interval", "10s"]);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(stored(registry), (0..100).collect::<Vec<_>>(), "{said}");
    assert!(
        said.contains("Sent 100 records to t (0 failed, 50 records stored before"),
        "{said}"
    );
    // Each record's line once, when its transaction committed.
    assert_eq!(report.lines().count(), 100, "{report}");
    // Again, from 0 to 150: the first 100 are stored (said in the report,
    // so that a consumer commits past them), the rest go.
    let (code, said, report) = produce(registry, &envelopes(0, 150), &[]);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(stored(registry), (0..150).collect::<Vec<_>>(), "{said}");
    let before = report
        .lines()
        .filter(|l| l.contains("\"stored_before\":true"))
        .count();
    assert_eq!((before, report.lines().count()), (100, 150), "{report}");
}

#[test]
fn a_record_it_cannot_send_stops_it_before_any_later_one_commits() {
    let dest = Cluster::start(Backend::Dir, 1, &[]).unwrap();
    let registry = dest.spec();
    let big = format!(
        "{{\"topic\":\"s\",\"partition\":0,\"offset\":10,\"key\":null,\"payload\":\"{}\"}}\n",
        "x".repeat(2000)
    );
    let input = envelopes(0, 10) + &big + &envelopes(11, 20);
    let (code, said, _) = produce(registry, &input, &["--max-record-bytes", "1KiB"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("does not go past a record"), "{said}");
    // What came before it is stored; nothing after it.
    assert_eq!(stored(registry), (0..10).collect::<Vec<_>>(), "{said}");
    // Started again with the same input, it stops at the same record.
    let (code, said, _) = produce(registry, &input, &["--max-record-bytes", "1KiB"]);
    assert_eq!(code, Some(1), "{said}");
    assert_eq!(stored(registry), (0..10).collect::<Vec<_>>(), "{said}");
}
