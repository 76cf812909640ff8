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

/// A table holding one record of `key()`: generation `generation`,
/// issued by the registry of `cluster`.
fn table_with(generation: u64, cluster: Option<&str>) -> OffsetsTable {
    let mut table = OffsetsTable::new();
    table.set(key(), Some(committed(Some(5), generation, cluster)));
    table
}

fn key() -> OffsetKey {
    OffsetKey {
        group: "g".into(),
        topic: "t".into(),
        partition: 0,
    }
}

fn with(generation: u64, mode: CommitMode) -> OffsetCommit {
    OffsetCommit {
        generation,
        mode,
        ..request(7)
    }
}

/// The fence rules, request by request: an older generation of the same
/// registry is refused whatever the registry says now (its answer may be
/// stale, or have raced the takeover's fence); another registry's fence
/// (one rebuilt since) gives way to the current claim only; a record of
/// an older build is stamped with the cluster at its claim's next fence.
#[test]
fn fences_give_way_only_to_the_current_claim_of_another_cluster() {
    let current = |g| Claim::Current(Some(g));
    let ours = table_with(9, Some("new"));
    let late = planned(
        &ours,
        (&key(), Some("new")),
        &with(2, CommitMode::Commit),
        current(2),
    );
    assert!(
        matches!(late, Err((ErrorCode::CommitFenced, _))),
        "{late:?}"
    );
    let foreign = table_with(9, Some("old"));
    let taken = planned(
        &foreign,
        (&key(), Some("new")),
        &with(2, CommitMode::Fence),
        current(2),
    );
    let fence = taken.unwrap().unwrap().unwrap();
    assert_eq!((fence.offset, fence.generation), (Some(5), 2));
    assert_eq!(fence.cluster.as_deref(), Some("new"));
    let stale = planned(
        &foreign,
        (&key(), Some("new")),
        &with(2, CommitMode::Commit),
        current(3),
    );
    assert!(
        matches!(stale, Err((ErrorCode::CommitFenced, _))),
        "{stale:?}"
    );
    let older_build = table_with(9, None);
    let fence = planned(
        &older_build,
        (&key(), Some("new")),
        &with(9, CommitMode::Fence),
        current(9),
    );
    let stamped = fence.unwrap().unwrap().unwrap();
    assert_eq!(
        (stamped.generation, stamped.cluster.as_deref()),
        (9, Some("new"))
    );
    let late = planned(
        &older_build,
        (&key(), Some("new")),
        &with(8, CommitMode::Commit),
        current(8),
    );
    assert!(late.is_err(), "a record of an older build fences as ever");
}
