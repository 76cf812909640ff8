//! The offsets topic's leader, over a simulated disk with no flusher of
//! its own: the tests flush when they choose.

use std::sync::Arc;

use super::*;
use crate::broker::flusher::flush_partition;
use crate::broker::testing::shared_with;

fn request(offset: u64) -> OffsetCommit {
    OffsetCommit {
        group: "g".into(),
        topic: "t".into(),
        partition: 0,
        offset,
        generation: 1,
        mode: CommitMode::Commit,
    }
}

/// `answer` run on `shared`, the offsets partition of group g flushed
/// until it returns.
fn flushed_while<T: Send>(shared: &Arc<Shared>, answer: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        let running = s.spawn(answer);
        while !running.is_finished() {
            if let Ok((part, _)) = group_partition(shared, "g") {
                flush_partition(shared, &part);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        running.join().unwrap()
    })
}

/// A table read again holds the log to its end: an answer drawn from
/// records not yet durable (a new leader's inheritance, here records
/// not yet flushed) waits until they are, like the commit that wrote them.
#[test]
fn an_answer_from_records_not_yet_durable_waits_for_them() {
    let (_sim, shared) = shared_with(|c| c.request_timeout_ms = 300);
    flushed_while(&shared, || commit(&shared, &request(5))).unwrap();
    // Written, not flushed: the commit's answer is a timeout.
    let late = commit(&shared, &request(9));
    assert!(matches!(late, Err((ErrorCode::Timeout, _))), "{late:?}");
    // Read again (a new leadership): the same commit, found in the
    // table, still waits for its record.
    let (_, slot) = group_partition(&shared, "g").unwrap();
    lock(&slot).epoch = None;
    let again = commit(&shared, &request(9));
    assert!(matches!(again, Err((ErrorCode::Timeout, _))), "{again:?}");
    let fetch = OffsetFetch {
        group: "g".into(),
        topic: None,
        partition: None,
    };
    lock(&slot).epoch = None;
    assert!(matches!(
        fetch_offsets(&shared, &fetch),
        Err((ErrorCode::Timeout, _))
    ));
    let fetched = flushed_while(&shared, || fetch_offsets(&shared, &fetch)).unwrap();
    assert_eq!(fetched, [("t".to_string(), 0, 9)]);
    assert_eq!(commit(&shared, &request(9)).unwrap(), Some(9));
}

fn fetch_offsets(shared: &Shared, f: &OffsetFetch) -> Result<Vec<(String, u32, u64)>, Refusal> {
    fetch(shared, f)
}
