//! Transfer: a fetch answered when its turn comes, its records sent from
//! the segment file to the socket with `sendfile`. The broker never copies
//! them through user space, and a partition's lock is held only to find
//! the byte range.

use crate::net::Stream;
use std::io;
use std::time::Instant;

use super::{flush_out, FetchAsked};
use crate::broker::send::{records_of, send_slice, Records};
use crate::broker::shared::{error_code, Partition, Shared};
use crate::limits;
use crate::protocol::{self, put, ErrorCode, FetchPartition};

/// One partition's part of a fetch response.
struct Part<'a> {
    header: Vec<u8>,
    records: Option<Records<'a>>,
}

impl Part<'_> {
    fn holds_memory(&self) -> bool {
        self.records.as_ref().is_some_and(Records::holds_memory)
    }
}

/// Answers a fetch: waits up to `deadline` for `bytes_min` visible bytes
/// (or an error, or a stop), then writes the answer, in the request's
/// version, and its records (at most `response_bytes_max` of them, but
/// one batch) with `sendfile`.
pub(super) fn fetch(
    shared: &Shared,
    stream: &Stream,
    correlation_id: u32,
    deadline: Instant,
    asked: &FetchAsked,
) -> io::Result<()> {
    let budget = u64::from(asked.response_bytes_max).min(limits::FETCH_RESPONSE_BYTES_MAX);
    let (version, bytes_min) = (asked.version, asked.bytes_min);
    let replica = !asked.replica_id.is_empty();
    let read_committed = asked.read_committed;
    // A follower's fetch is checked against the leader's epoch and counts
    // as its progress once, when it comes.
    let refused: Vec<Refusal> = if replica {
        asked
            .partitions
            .iter()
            .map(|a| {
                shared
                    .partition(&a.topic, a.partition)
                    .and_then(|p| {
                        p.replica_fetched(shared, &asked.replica_id, a.leader_epoch, a.offset)
                    })
                    .err()
            })
            .collect()
    } else {
        Vec::new()
    };
    let asked = &asked.partitions[..];
    // Registered before the first look: a flush after it wakes the wait.
    let watch = shared.watch_fetch_by(asked, replica);
    let parts = loop {
        let how = (version, replica, read_committed);
        let (parts, bytes, errors) = gather(shared, how, (asked, &refused), budget);
        let done = bytes >= u64::from(bytes_min)
            || errors
            || Instant::now() >= deadline
            || shared.stopping();
        if done {
            break parts;
        }
        watch.wait(deadline);
    };
    drop(watch);
    send_parts(stream, correlation_id, &parts)
}

/// Answers a consumer's fetch at once when it need not wait (its records
/// are there, or an error): the reader's, while its writer is idle, which
/// spares a thread switch per fetch. `Ok(false)`, having written nothing,
/// when it must wait: the writer's then ([`fetch`]). A follower's fetch,
/// which counts as its progress once, is always the writer's.
pub(super) fn fetch_now(
    shared: &Shared,
    stream: &Stream,
    correlation_id: u32,
    asked: &FetchAsked,
) -> io::Result<bool> {
    if !asked.replica_id.is_empty() {
        return Ok(false);
    }
    let budget = u64::from(asked.response_bytes_max).min(limits::FETCH_RESPONSE_BYTES_MAX);
    let how = (asked.version, false, asked.read_committed);
    let (parts, bytes, errors) = gather_with(shared, how, (&asked.partitions, &[]), budget, false);
    if bytes < u64::from(asked.bytes_min) && !errors && !shared.stopping() {
        return Ok(false);
    }
    send_parts(stream, correlation_id, &parts)?;
    Ok(true)
}

/// Writes a fetch's answer: its head and each partition's header, and the
/// records with `sendfile`.
fn send_parts(stream: &Stream, correlation_id: u32, parts: &[Part<'_>]) -> io::Result<()> {
    let body_bytes = parts
        .iter()
        .map(|p| p.header.len() as u64 + p.records.as_ref().map_or(0, Records::len))
        .sum::<u64>();
    let mut head = response_head(correlation_id, parts.len() as u16, body_bytes)?;
    // Headers gather until records follow: one write before each sendfile.
    for part in parts {
        head.extend_from_slice(&part.header);
        match &part.records {
            Some(Records::File(slice)) => {
                flush_out(stream, &mut head)?;
                send_slice(stream, slice)?;
            }
            Some(Records::Converted { bytes, .. }) => head.extend_from_slice(bytes),
            Some(Records::Empty) | None => {}
        }
    }
    flush_out(stream, &mut head)
}

/// The head of a fetch answer of `count` partitions, whose headers and
/// records (`body_bytes` of them) follow it. Its length is known before
/// the records are read: they go out from the file.
fn response_head(correlation_id: u32, count: u16, body_bytes: u64) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    protocol::start_response(&mut head, correlation_id, ErrorCode::None, "");
    put::u16(&mut head, count);
    let total = head.len() as u64 + body_bytes;
    let frame_len = u32::try_from(total - protocol::LENGTH_BYTES as u64)
        .map_err(|_| io::Error::other("fetch response over 4 GiB"))?;
    head[..protocol::LENGTH_BYTES].copy_from_slice(&frame_len.to_le_bytes());
    Ok(head)
}

/// Finds each partition's byte range within the response's `budget`, and
/// writes its header in `version`; returns the parts, their bytes, and
/// whether any partition had an error (those `refused` by the replica
/// checks have theirs).
/// A partition may pass its own `bytes_max` by one whole batch, but only
/// the first partition with records may pass what is left of the
/// response's budget (by one whole batch), so that a fetch always
/// progresses and a response never carries more than its budget and a
/// batch.
fn gather<'s>(
    shared: &'s Shared,
    how: (u16, bool, bool),
    asked: (&[FetchPartition], &[Refusal]),
    budget: u64,
) -> (Vec<Part<'s>>, u64, bool) {
    gather_with(shared, how, asked, budget, true)
}

/// [`gather`], waiting for request memory to convert a legacy segment's
/// batches only when `memory_wait` (the reader's try, [`fetch_now`], does
/// not: the writer, which answers if it cannot, would wait again).
fn gather_with<'s>(
    shared: &'s Shared,
    (version, replica, read_committed): (u16, bool, bool),
    (asked, refused): (&[FetchPartition], &[Refusal]),
    budget: u64,
    memory_wait: bool,
) -> (Vec<Part<'s>>, u64, bool) {
    let mut parts = Vec::with_capacity(asked.len());
    let (mut bytes, mut errors) = (0u64, false);
    // A partition named again gets no records (see the Kafka fetch's
    // gather): each records answer holds its segment's file open.
    let mut seen: std::collections::HashMap<(&str, u32), Extent> = Default::default();
    for (i, a) in asked.iter().enumerate() {
        if let Some(&extent) = seen.get(&(a.topic.as_str(), a.partition)) {
            let none = (ErrorCode::None, "");
            push_part(&mut parts, version, a, none, (extent, &[]), None);
            continue;
        }
        // Past the response's budget, the other partitions wait for the
        // next fetch.
        let left = budget.saturating_sub(bytes);
        let budget_bytes = u64::from(a.bytes_max).min(left);
        let (mut epoch, mut stable, mut aborted) = (None, 0, Vec::new());
        let found = match refused.get(i).cloned().flatten() {
            Some(refusal) => Err(refusal),
            None => shared
                .partition(&a.topic, a.partition)
                .and_then(|p| locate(&p, a, (version, replica, read_committed), budget_bytes)),
        };
        let (code, msg, start, end, slice) = match found {
            Err((code, msg)) => (code, msg, 0, 0, None),
            Ok(located) => {
                epoch = located.leader_epoch;
                (stable, aborted) = (located.stable, located.aborted);
                let (start, end) = (located.start, located.end);
                // The batch headers are read with the lock let go: on a
                // cold page cache they are slow, and appends need not wait.
                // A partition that takes no bytes converts nothing; only
                // a fetch that holds no memory waits for some.
                let wait = memory_wait && !parts.iter().any(Part::holds_memory);
                let found = located
                    .lookup
                    .and_then(|l| l.map_or(Ok(None), |l| l.find()))
                    .map(|slice| slice.filter(|_| budget_bytes > 0))
                    .and_then(|slice| slice.map(|s| records_of(shared, s, wait)).transpose());
                match found {
                    // A first batch over what is left of the budget goes
                    // only in a response that has no records yet.
                    Ok(Some(slice)) if bytes > 0 && slice.len() > left => {
                        (ErrorCode::None, String::new(), start, end, None)
                    }
                    Ok(slice) => (ErrorCode::None, String::new(), start, end, slice),
                    Err(e) => (error_code(&e), e.to_string(), start, end, None),
                }
            }
        };
        errors |= code != ErrorCode::None;
        bytes += slice.as_ref().map_or(0, Records::len);
        if code == ErrorCode::None {
            seen.insert((a.topic.as_str(), a.partition), (start, end, epoch, stable));
        }
        let extent = ((start, end, epoch, stable), &aborted[..]);
        push_part(&mut parts, version, a, (code, &msg), extent, slice);
    }
    (parts, bytes, errors)
}

/// A partition's start, end, leader epoch and last stable offset in a
/// fetch's answer.
type Extent = (u64, u64, Option<u32>, u64);

/// Adds a partition's part to a fetch's answer: its head, then its
/// records.
fn push_part<'s>(
    parts: &mut Vec<Part<'s>>,
    version: u16,
    a: &FetchPartition,
    (error, message): (ErrorCode, &str),
    ((start_offset, end_offset, leader_epoch, stable), aborted): (Extent, &[(i64, u64)]),
    records: Option<Records<'s>>,
) {
    let mut header = Vec::new();
    let head = protocol::FetchPartitionHead {
        topic: &a.topic,
        partition: a.partition,
        error,
        message,
        start_offset,
        end_offset,
        leader_epoch,
        stable: (stable, aborted),
        records_len: records.as_ref().map_or(0, Records::len) as u32,
    };
    protocol::put_fetch_partition(&mut header, version, &head);
    parts.push(Part { header, records });
}

/// Why a replica check refused a partition of a fetch, if it did.
type Refusal = Option<(ErrorCode, String)>;

/// Where a partition's records for a fetch are, found under its lock.
struct Located {
    start: u64,
    /// The end the answer reports: what consumers may read (the high
    /// watermark of a replicated partition).
    end: u64,
    leader_epoch: Option<u32>,
    /// The last stable offset (at most `end`).
    stable: u64,
    /// A read_committed consumer's: the aborted transactions among the
    /// records, `(producer_id, first_offset)`.
    aborted: Vec<(i64, u64)>,
    lookup: crate::error::Result<Option<crate::storage::log::Lookup>>,
}

/// Finds where `a`'s records are in `p`: for a consumer, below what it
/// may read (only from a leader; a read_committed one, below the last
/// stable offset, with the aborted transactions among them); for a
/// follower, everything written here, durable or not (see
/// [`crate::storage::log::Log::locate_written`]).
fn locate(
    p: &Partition,
    a: &FetchPartition,
    (version, replica, read_committed): (u16, bool, bool),
    budget_bytes: u64,
) -> std::result::Result<Located, (ErrorCode, String)> {
    let mut log = p.lock();
    let storage = |e: crate::error::Error| (error_code(&e), e.to_string());
    let (end, stable, aborted, lookup) = if replica {
        let hw = p.high_watermark.load(std::sync::atomic::Ordering::Acquire);
        (
            hw,
            hw,
            Vec::new(),
            log.locate_written(a.offset, budget_bytes),
        )
    } else {
        let end = p.readable_end(&log)?;
        // Only version 6 answers it (it may rebuild the producers' state).
        let stable = match version >= protocol::FETCH_VERSION_COMMITTED {
            true => log.last_stable_offset().map_err(storage)?.min(end),
            false => end,
        };
        let (aborted, below) = match read_committed {
            true => log.aborted_for_fetch(a.offset, stable),
            false => (Vec::new(), end),
        };
        let aborted = aborted
            .iter()
            .map(|t| (t.producer_id, t.first_offset))
            .collect();
        (
            end,
            stable,
            aborted,
            log.locate_below(a.offset, budget_bytes, below),
        )
    };
    Ok(Located {
        start: log.start_offset(),
        end,
        leader_epoch: Some(log.leader_epoch()),
        stable,
        aborted,
        lookup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::flusher::flush_partition;
    use crate::broker::testing::{append, batch_of, partition, shared};
    use crate::protocol::Reader;

    #[test]
    fn the_head_counts_the_bytes_that_follow_it() {
        let head = response_head(6, 2, 1000).unwrap();
        let len = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
        assert_eq!(len, head.len() - protocol::LENGTH_BYTES + 1000);
        let mut r = Reader::new(&head[4..]);
        let header = protocol::decode_response_header(&mut r).unwrap();
        assert_eq!((header.correlation_id, header.error), (6, ErrorCode::None));
        assert_eq!(r.u16("count").unwrap(), 2);
        assert!(
            response_head(6, 2, 1 << 32).is_err(),
            "a frame's length is a u32"
        );
    }

    /// Fetch version 6, read_committed: records below the last stable
    /// offset, which each partition's answer gives with the aborted
    /// transactions among them; read_uncommitted, to the high watermark.
    #[test]
    fn a_read_committed_fetch_stops_at_the_last_stable_offset() {
        use crate::broker::testing::one_record;
        use crate::storage::record::control::Marker;
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        {
            let mut log = p.lock();
            for id in [-1, 20, 21, -1] {
                log.append(&mut one_record(id), 1_000).unwrap(); // 0, 1, 2, 3
            }
            let abort = Marker {
                commit: false,
                coordinator_epoch: 0,
            };
            log.append_marker((20, 0), abort, 1_000).unwrap(); // 4
        }
        flush_partition(&shared, &p);
        let asked = [FetchPartition {
            topic: "t".into(),
            partition: 0,
            offset: 0,
            bytes_max: 1 << 20,
            leader_epoch: None,
        }];
        let answer = |read_committed| {
            let (parts, bytes, _) =
                gather(&shared, (6, false, read_committed), (&asked, &[]), 1 << 30);
            let mut body = 1u16.to_le_bytes().to_vec();
            body.extend_from_slice(&parts[0].header);
            body.resize(body.len() + bytes as usize, 0);
            let decoded = protocol::decode_fetch_response(&mut Reader::new(&body), 6).unwrap();
            (decoded[0].end_offset, decoded[0].stable.clone(), bytes)
        };
        let (end, stable, all) = answer(false);
        assert_eq!((end, stable), (5, Some((2, vec![]))));
        let (end, stable, committed) = answer(true);
        assert_eq!((end, stable), (5, Some((2, vec![(20, 1)]))));
        let one = one_record(-1).len() as u64;
        assert_eq!(committed, 2 * one, "batches 0 and 1 only");
        assert!(all > 4 * one, "every batch and the marker: {all}");
    }

    /// Replicas pipeline: a follower is served what its leader wrote and
    /// has not fsynced yet (so the two fsyncs overlap), a consumer only
    /// what is durable on the in-sync replicas; nothing still gathered in
    /// memory goes to either.
    #[test]
    fn a_follower_is_served_records_written_before_their_fsync_and_a_consumer_is_not() {
        let (_sim, shared) = shared();
        let p = crate::broker::testing::led_partition(&shared, "t", &["b"]);
        append(&p);
        let asked = [FetchPartition {
            leader_epoch: Some(0),
            ..crate::broker::testing::ask("t", 0)
        }];
        let bytes = |replica| {
            let (_, bytes, errors) = gather(&shared, (3, replica, false), (&asked, &[]), 1 << 30);
            assert!(!errors, "nothing past what is in the file is looked for");
            bytes
        };
        assert_eq!(bytes(true), 0, "gathered in memory: not even a follower's");
        p.lock().write_pending().unwrap();
        assert_eq!(
            p.flushed_offset.load(std::sync::atomic::Ordering::Acquire),
            0
        );
        let written = bytes(true);
        assert!(written > 0, "written, not durable: the follower's");
        assert_eq!(bytes(false), 0, "not the consumer's");
        flush_partition(&shared, &p);
        p.replica_fetched(&shared, "b", Some(0), 1).unwrap();
        assert_eq!(bytes(false), written, "durable on both: the consumer's");
        // A stopped log (its file may be cut back to what is durable)
        // serves its followers nothing.
        let e = std::io::Error::other("injected");
        p.lock().fail(&crate::error::Error::io(
            "fsync",
            std::path::PathBuf::from("/x"),
            e,
        ));
        let (_, _, errors) = gather(&shared, (3, true, false), (&asked, &[]), 1 << 30);
        assert!(errors);
    }

    #[test]
    fn a_partition_named_again_in_a_fetch_gets_no_records() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        append(&p);
        flush_partition(&shared, &p);
        let ask = |offset| FetchPartition {
            topic: "t".into(),
            partition: 0,
            offset,
            bytes_max: 1 << 20,
            leader_epoch: None,
        };
        let asked = [ask(0), ask(1), ask(0)];
        let (parts, bytes, errors) = gather(&shared, (2, false, false), (&asked, &[]), 1 << 30);
        assert!(bytes > 0 && !errors);
        assert!(parts[0].records.is_some());
        assert!(parts[1..].iter().all(|p| p.records.is_none()));
        assert_eq!(parts[1].header, parts[2].header, "heads of no records");
    }

    #[test]
    fn gather_finds_visible_records_within_each_budget() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        let ask = |offset, bytes_max| FetchPartition {
            topic: "t".into(),
            partition: 0,
            offset,
            bytes_max,
            leader_epoch: None,
        };
        let (_, bytes, errors) = gather(
            &shared,
            (2, false, false),
            (&[ask(0, 1 << 20)], &[]),
            1 << 30,
        );
        assert_eq!((bytes, errors), (0, false), "not visible before its flush");
        flush_partition(&shared, &p);
        let (parts, bytes, errors) = gather(
            &shared,
            (2, false, false),
            (&[ask(0, 1 << 20), ask(0, 0)], &[]),
            1 << 30,
        );
        assert!(bytes > 0 && !errors);
        assert!(parts[0].records.is_some());
        assert!(
            parts[1].records.is_none(),
            "a budget of nothing reads nothing"
        );
        let unknown = FetchPartition {
            topic: "none".into(),
            ..ask(0, 1)
        };
        let (parts, _, errors) = gather(&shared, (2, false, false), (&[unknown], &[]), 1 << 30);
        assert!(errors);
        let mut r = Reader::new(&parts[0].header);
        let (_, _, code) = (
            r.str("topic").unwrap(),
            r.u32("partition").unwrap(),
            r.u16("error").unwrap(),
        );
        assert_eq!(code, ErrorCode::UnknownTopic as u16);
    }

    #[test]
    fn a_response_carries_its_budget_and_only_its_first_records_may_pass_it() {
        let (_sim, shared) = shared();
        let (a, b) = (partition(&shared, "a"), partition(&shared, "b"));
        for p in [&a, &b] {
            p.lock().append(&mut batch_of(&[7; 1000]), 0).unwrap();
            flush_partition(&shared, p);
        }
        let ask = |topic: &str| FetchPartition {
            topic: topic.into(),
            partition: 0,
            offset: 0,
            bytes_max: 1 << 20,
            leader_epoch: None,
        };
        let lens = |budget| {
            let (parts, bytes, errors) = gather(
                &shared,
                (2, false, false),
                (&[ask("a"), ask("b")], &[]),
                budget,
            );
            assert!(!errors);
            let lens: Vec<u64> = parts
                .iter()
                .map(|p| p.records.as_ref().map_or(0, Records::len))
                .collect();
            assert_eq!(bytes, lens.iter().sum::<u64>());
            lens
        };
        let batch = lens(1 << 30)[0];
        assert!(batch > 1000, "{batch}");
        assert_eq!(lens(1 << 30), [batch, batch]);
        assert_eq!(lens(2 * batch), [batch, batch], "the budget itself fits");
        assert_eq!(
            lens(2 * batch - 1),
            [batch, 0],
            "the second batch would pass the budget"
        );
        assert_eq!(
            lens(1),
            [batch, 0],
            "the first batch goes whatever the budget: the fetch progresses"
        );
        let (parts, _, _) = gather(&shared, (2, false, false), (&[ask("a"), ask("b")], &[]), 0);
        assert!(
            parts.iter().all(|p| p.records.is_none()),
            "no budget, no records"
        );
    }
}
