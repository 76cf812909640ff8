//! Fetch: a consumer's records, the segment's byte range as stored (Kafka
//! batches, as far as consumers may read: the high watermark), sent from
//! the file with `sendfile` after the answer's other bytes; only a legacy
//! segment's batches are read and converted to Kafka's. The answer waits while fewer than `min_bytes` are ready, up
//! to `max_wait_ms` (bounded by `--request-timeout`); it starts at the
//! batch holding the offset asked for and always carries at least one
//! whole batch of the first partition that has records, however small
//! the byte budgets.
//!
//! A client that names its leader epoch (v9+) is refused
//! FENCED_LEADER_EPOCH when it is older than the leader's and
//! UNKNOWN_LEADER_EPOCH when newer (KIP-320); one that names the epoch
//! of its last fetched record (v12) gets, instead of records, where the
//! log diverged from it when it did (the epoch's end is below its offset,
//! or the epoch is not the log's).

use std::time::{Duration, Instant};

use super::kafka_code;
use crate::broker::send::{records_of, Records};
use crate::broker::shared::{error_code, Shared};
use crate::kafka;
use crate::protocol::{ErrorCode, FetchPartition};

/// A partition a fetch asks for.
#[derive(Debug, Clone)]
pub(super) struct Ask<'a> {
    pub(super) topic: &'a str,
    pub(super) partition: i32,
    pub(super) fetch_offset: i64,
    pub(super) partition_max_bytes: i32,
    /// The leader epoch the client knows (-1: none): an older one is
    /// fenced, a newer one unknown (KIP-320).
    pub(super) current_leader_epoch: i32,
    /// The epoch of the last record the client fetched (-1: none; Fetch
    /// v12): where the log diverged from it is answered instead of records.
    pub(super) last_fetched_epoch: i32,
    /// The ACLs' refusal of this partition (Kafka's code), if they refuse.
    pub(super) denied: Option<i16>,
}

/// One partition's answer.
#[derive(Debug, Default)]
pub(super) struct Fetched<'s> {
    /// Kafka's error code.
    pub(super) error: i16,
    /// The end consumers may read to (-1 on error).
    pub(super) high_watermark: i64,
    /// The end read_committed consumers may read to: below the oldest
    /// open transaction (-1 on error).
    pub(super) last_stable_offset: i64,
    /// For read_committed, the aborted transactions over the records.
    pub(super) aborted: Vec<crate::storage::log::aborted::AbortedTxn>,
    /// The partition's first offset (-1 on error).
    pub(super) log_start_offset: i64,
    /// Kafka record batches: a segment's byte range, or converted ones.
    pub(super) records: Records<'s>,
    /// Where the log diverged from the client's last fetched epoch: the
    /// largest epoch at or below it and its end (-1, -1: an epoch newer
    /// than the log's, or a log without epochs).
    pub(super) diverging_epoch: Option<(i32, i64)>,
}

/// What a fetch asks besides its partitions.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) max_wait_ms: i32,
    pub(super) min_bytes: i32,
    pub(super) max_bytes: i32,
    /// `isolation_level` 1: records below the last stable offset only,
    /// with the aborted transactions among them.
    pub(super) read_committed: bool,
}

/// The most record bytes one Kafka fetch answers with (Kafka's broker
/// caps its answers too, at `fetch.max.bytes`); a client asks again.
const RESPONSE_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// Answers a fetch: waits up to its deadline for `min_bytes` (or an
/// error, or a stop), then returns each partition's part. Records go from
/// the page cache with `sendfile` and hold no memory; only a legacy
/// segment's, converted, hold request memory, which the conversion takes
/// itself ([`records_of`]: only the first may wait for it) and the
/// connection gives back once the answer is written.
pub(super) fn fetch<'s>(shared: &'s Shared, asks: &[Ask<'_>], limits: Limits) -> Vec<Fetched<'s>> {
    let wait = u64::try_from(limits.max_wait_ms)
        .unwrap_or(0)
        .min(shared.config.request_timeout_ms);
    let deadline = Instant::now() + Duration::from_millis(wait);
    let budget = u64::try_from(limits.max_bytes)
        .unwrap_or(0)
        .min(RESPONSE_BYTES_MAX);
    let bytes_min = u64::try_from(limits.min_bytes).unwrap_or(0);
    let watch = shared.watch_fetch(&watched(asks));
    loop {
        let parts = gather(shared, asks, budget, limits.read_committed);
        let bytes: u64 = parts.iter().map(|p| p.records.len()).sum();
        // An error, or a log that diverged from the client, is answered
        // at once.
        let errors = (parts.iter()).any(|p| p.error != kafka::NONE || p.diverging_epoch.is_some());
        if bytes >= bytes_min || errors || Instant::now() >= deadline || shared.stopping() {
            return parts;
        }
        drop(parts);
        watch.wait(deadline);
    }
}

/// The partitions of a fetch, as a watch of their flushes takes them.
fn watched(asks: &[Ask<'_>]) -> Vec<FetchPartition> {
    asks.iter()
        .filter_map(|a| {
            Some(FetchPartition {
                topic: a.topic.to_string(),
                partition: u32::try_from(a.partition).ok()?,
                offset: 0,
                bytes_max: 0,
                leader_epoch: None,
            })
        })
        .collect()
}

/// Each partition's records within the response's `budget`: a partition
/// may pass its own budget by one whole batch, and only the first
/// partition with records may pass what is left of the response's.
///
/// A partition asked for again in the same fetch is answered with no
/// records (Kafka's broker keeps one ask per partition): each records
/// answer holds its segment's file open until it is written, and one
/// fetch repeating a partition at the offsets of many sealed segments
/// would hold a descriptor per ask.
fn gather<'s>(
    shared: &'s Shared,
    asks: &[Ask<'_>],
    budget: u64,
    read_committed: bool,
) -> Vec<Fetched<'s>> {
    let mut parts: Vec<Fetched<'s>> = Vec::with_capacity(asks.len());
    let mut seen: std::collections::HashMap<(&str, i32), usize> = Default::default();
    let mut bytes = 0u64;
    for a in asks {
        if let Some(&first) = seen.get(&(a.topic, a.partition)) {
            let earlier = &parts[first];
            let again = Fetched {
                error: earlier.error,
                high_watermark: earlier.high_watermark,
                last_stable_offset: earlier.last_stable_offset,
                aborted: Vec::new(),
                log_start_offset: earlier.log_start_offset,
                records: Records::Empty,
                diverging_epoch: earlier.diverging_epoch,
            };
            parts.push(again);
            continue;
        }
        seen.insert((a.topic, a.partition), parts.len());
        let left = budget.saturating_sub(bytes);
        let own = u64::try_from(a.partition_max_bytes).unwrap_or(0);
        // Past the first records, a batch larger than what is left is not
        // even read: it could only be thrown away.
        // A broker that stops reads nothing more: its answer goes now.
        let fit = if shared.stopping() {
            Some(0)
        } else {
            (bytes > 0).then_some(left)
        };
        let wait = !parts.iter().any(|p: &Fetched<'_>| p.records.holds_memory());
        let budgets = (own.min(left), fit);
        let part = match read_partition(shared, a, budgets, (wait, read_committed)) {
            // Past the response's budget, only an empty response takes it.
            Ok(part) if bytes > 0 && part.records.len() > left => Fetched {
                records: Records::Empty,
                ..part
            },
            Ok(part) => part,
            Err((error, _msg)) => Fetched {
                error,
                high_watermark: -1,
                last_stable_offset: -1,
                aborted: Vec::new(),
                log_start_offset: -1,
                records: Records::Empty,
                diverging_epoch: None,
            },
        };
        bytes += part.records.len();
        parts.push(part);
    }
    parts
}

/// A partition's records from `a.fetch_offset`, about `bytes_max` of them
/// but at least one whole batch, converted to Kafka batches; none when
/// that batch (as stored) is larger than `fit`, or when converting it
/// takes request memory there is none of and it may not `wait`. Those of
/// a `read_committed` fetch end at the last stable offset, and come with
/// the aborted transactions among them.
fn read_partition<'s>(
    shared: &'s Shared,
    a: &Ask<'_>,
    (bytes_max, fit): (u64, Option<u64>),
    (wait, read_committed): (bool, bool),
) -> Result<Fetched<'s>, (i16, String)> {
    if let Some(code) = a.denied {
        return Err((code, format!("not authorized to read {:?}", a.topic)));
    }
    let coded = |(code, msg): (ErrorCode, String)| (kafka_code(code), msg);
    let partition = u32::try_from(a.partition).map_err(|_| {
        let msg = format!("partition {} of {:?} does not exist", a.partition, a.topic);
        (kafka::UNKNOWN_TOPIC_OR_PARTITION, msg)
    })?;
    let p = shared.partition(a.topic, partition).map_err(coded)?;
    let storage = |e: crate::error::Error| (kafka_code(error_code(&e)), e.to_string());
    let (start, end, stable, aborted, lookup) = {
        let mut log = p.lock();
        let end = p.readable_end(&log).map_err(coded)?;
        let stable = log.last_stable_offset().map_err(storage)?.min(end);
        let start = log.start_offset();
        p.check_client_epoch(u32::try_from(a.current_leader_epoch).ok())
            .map_err(coded)?;
        if let Some(diverged) = diverged(&log, a, start)? {
            return Ok(Fetched {
                error: kafka::NONE,
                high_watermark: end as i64,
                last_stable_offset: stable as i64,
                aborted: Vec::new(),
                log_start_offset: start as i64,
                records: Records::Empty,
                diverging_epoch: Some(diverged),
            });
        }
        let in_range = u64::try_from(a.fetch_offset).is_ok_and(|o| o >= start && o <= end);
        if !in_range {
            let msg = format!(
                "offset {} of {} [{partition}] is outside {start}..{end}",
                a.fetch_offset, a.topic
            );
            return Err((kafka::OFFSET_OUT_OF_RANGE, msg));
        }
        let (aborted, below) = match read_committed {
            true => log.aborted_for_fetch(a.fetch_offset as u64, stable),
            false => (Vec::new(), end),
        };
        let lookup = log.locate_below(a.fetch_offset as u64, bytes_max, below);
        (start, end, stable, aborted, lookup)
    };
    // The batch headers are read with the lock let go.
    let slice = lookup
        .and_then(|l| l.map_or(Ok(None), |l| l.find()))
        .map_err(storage)?;
    let slice = slice.filter(|s| fit.is_none_or(|fit| s.len <= fit));
    let records = match slice {
        Some(slice) => records_of(shared, slice, wait).map_err(storage)?,
        None => Records::Empty,
    };
    Ok(Fetched {
        error: kafka::NONE,
        high_watermark: end as i64,
        last_stable_offset: stable as i64,
        aborted,
        log_start_offset: start as i64,
        records,
        diverging_epoch: None,
    })
}

/// Where the log diverged from a client whose last fetched record was of
/// epoch `a.last_fetched_epoch`, as Kafka's leader answers it
/// (`Partition.readRecords`): the largest epoch here at or below that
/// one, and its end, when that epoch is older or ends before the offset
/// asked for (the client's records from there on are not this log's).
/// OFFSET_OUT_OF_RANGE when the log cannot place that epoch (newer than
/// its latest, or no epochs) or the offset is below the log's start, so
/// that the client resets instead of asking again. `None`: the client is
/// on the log.
fn diverged(
    log: &crate::storage::log::Log,
    a: &Ask<'_>,
    start: u64,
) -> Result<Option<(i32, i64)>, (i16, String)> {
    let Ok(last) = u32::try_from(a.last_fetched_epoch) else {
        return Ok(None);
    };
    let out_of_range = |why: String| Err((kafka::OFFSET_OUT_OF_RANGE, why));
    let Some((epoch, end)) = log.end_offset_for_epoch(last) else {
        return out_of_range(format!("the end of leader epoch {last} is not known here"));
    };
    if a.fetch_offset < start as i64 {
        let offset = a.fetch_offset;
        return out_of_range(format!("offset {offset} is below the log's start {start}"));
    }
    let off_the_log = epoch < last || (end as i64) < a.fetch_offset;
    Ok(off_the_log.then_some((epoch as i32, end as i64)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::testing::{append, one_record, partition, shared};
    use crate::storage::record::Format;

    fn ask(fetch_offset: i64, current_leader_epoch: i32, last_fetched_epoch: i32) -> Ask<'static> {
        Ask {
            topic: "t",
            partition: 0,
            fetch_offset,
            partition_max_bytes: 1 << 20,
            current_leader_epoch,
            last_fetched_epoch,
            denied: None,
        }
    }

    /// Topic t's partition 0: two records of epoch 0, then `later` of
    /// epoch 3, flushed.
    fn two_epochs(
        later: usize,
    ) -> (
        std::sync::Arc<crate::storage::fs::sim::SimFs>,
        std::sync::Arc<Shared>,
        std::sync::Arc<crate::broker::shared::Partition>,
    ) {
        let (sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        append(&p);
        p.lock().set_leader_epoch(3).unwrap();
        for _ in 0..later {
            append(&p);
        }
        crate::broker::flusher::flush_partition(&shared, &p);
        (sim, shared, p)
    }

    fn limits() -> Limits {
        Limits {
            max_wait_ms: 0,
            min_bytes: 0,
            max_bytes: 1 << 20,
            read_committed: false,
        }
    }

    /// The base offsets of the batches a fetch answered with.
    fn batch_offsets(f: &Fetched<'_>) -> Vec<u64> {
        let Records::File(slice) = &f.records else {
            return Vec::new();
        };
        let mut bytes = Vec::new();
        slice.read_into(&mut bytes).unwrap();
        let mut offsets = Vec::new();
        let mut rest = &bytes[..];
        while let Ok(b) = crate::storage::record::Batch::decode(Format::Kafka, rest, 1 << 20) {
            offsets.push(b.header.base_offset);
            rest = &rest[b.total_bytes()..];
        }
        offsets
    }

    /// read_committed: records below the last stable offset (the oldest
    /// open transaction's first), with the aborted transactions among
    /// them; read_uncommitted: to the high watermark, as before.
    #[test]
    fn read_committed_stops_at_the_oldest_open_transaction() {
        use crate::storage::record::control::Marker;
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        let abort = Marker {
            commit: false,
            coordinator_epoch: 0,
        };
        {
            let mut log = p.lock();
            for id in [-1, 20, 21, -1] {
                log.append(&mut one_record(id), 1_000).unwrap(); // 0, 1, 2, 3
            }
            log.append_marker((20, 0), abort, 1_000).unwrap(); // 4
        }
        crate::broker::flusher::flush_partition(&shared, &p);
        let committed = Limits {
            read_committed: true,
            ..limits()
        };
        let f = &fetch(&shared, &[ask(0, -1, -1)], limits())[0];
        assert_eq!((f.high_watermark, f.last_stable_offset), (5, 2));
        assert_eq!(batch_offsets(f), [0, 1, 2, 3, 4]);
        assert!(f.aborted.is_empty());
        let f = &fetch(&shared, &[ask(0, -1, -1)], committed)[0];
        assert_eq!((f.high_watermark, f.last_stable_offset), (5, 2));
        assert_eq!(batch_offsets(f), [0, 1]);
        let aborted: Vec<_> = f
            .aborted
            .iter()
            .map(|t| (t.producer_id, t.first_offset))
            .collect();
        assert_eq!(aborted, [(20, 1)]);
        let commit = Marker {
            commit: true,
            ..abort
        };
        p.lock().append_marker((21, 0), commit, 1_000).unwrap(); // 5
        crate::broker::flusher::flush_partition(&shared, &p);
        let f = &fetch(&shared, &[ask(2, -1, -1)], committed)[0];
        assert_eq!(f.last_stable_offset, 6);
        assert_eq!(batch_offsets(f), [2, 3, 4, 5]);
        assert_eq!(f.aborted.len(), 1, "20's abort marker is at 4");
        let f = &fetch(&shared, &[ask(5, -1, -1)], committed)[0];
        assert_eq!(batch_offsets(f), [5]);
        assert!(f.aborted.is_empty(), "20's abort is before offset 5");
    }

    /// Fetch v12: a client whose last fetched epoch the log does not hold
    /// up to its offset is told where the log diverged (the largest epoch
    /// at or below it, and its end), with no records; one on the log gets
    /// records.
    #[test]
    fn a_client_off_the_log_is_told_where_it_diverged() {
        let (_sim, shared, p) = two_epochs(1);
        let next = p.lock().next_offset() as i64;
        let asks = [
            // Epoch 0 ends at 2: a client at 2 in it is on the log...
            ask(2, -1, 0),
            // ... one at 3 in it holds a record the log does not.
            ask(3, -1, 0),
            // An epoch the log never had: the largest below it.
            ask(3, -1, 2),
            // The latest epoch, at the end.
            ask(next, -1, 3),
            // An epoch newer than the log's: out of range, as Kafka
            // answers one it cannot place.
            ask(next, -1, 5),
            // No epoch named: no check.
            ask(1, -1, -1),
        ];
        // One fetch each: a fetch answers a partition once.
        let got: Vec<_> = asks
            .iter()
            .map(|a| {
                let f = &fetch(&shared, std::slice::from_ref(a), limits())[0];
                (f.error, f.diverging_epoch, f.records.len() > 0)
            })
            .collect();
        assert_eq!(
            got,
            [
                (kafka::NONE, None, true),
                (kafka::NONE, Some((0, 2)), false),
                (kafka::NONE, Some((0, 2)), false),
                (kafka::NONE, None, false),
                (kafka::OFFSET_OUT_OF_RANGE, None, false),
                (kafka::NONE, None, true),
            ]
        );
    }

    /// A consumer that names a leader epoch (v9+) other than the
    /// leader's is refused: an older one fenced, a newer one unknown.
    #[test]
    fn a_consumer_in_another_leader_epoch_is_refused() {
        use crate::broker::replica::{Leading, Role};
        let (_sim, shared) = shared();
        let leading = Role::Leader(Leading {
            epoch: 4,
            version: 0,
            isr: vec!["broker-test".to_string()],
            epoch_start: 0,
            since: Instant::now(),
            progress: Default::default(),
        });
        crate::broker::testing::replicated_partition(&shared, "t", &["broker-test"], leading);
        let got: Vec<i16> = [3, 4, 5, -1]
            .iter()
            .map(|&epoch| fetch(&shared, &[ask(0, epoch, -1)], limits())[0].error)
            .collect();
        assert_eq!(
            got,
            [
                kafka::FENCED_LEADER_EPOCH,
                kafka::NONE,
                kafka::UNKNOWN_LEADER_EPOCH,
                kafka::NONE
            ]
        );
    }

    /// Kafka answers OFFSET_OUT_OF_RANGE when the last fetched epoch's end
    /// is not known (newer than the log's), and when the offset is below
    /// the log's start whatever the epochs: the default (-1, -1) tag is
    /// ignored by Java and kafka-python, which would ask again forever.
    #[test]
    fn an_unplaceable_epoch_or_an_offset_below_the_start_is_out_of_range() {
        let (_sim, shared, p) = two_epochs(3);
        let next = p.lock().next_offset() as i64;
        p.lock().delete_records_before(4).unwrap();
        let once = |a: Ask<'static>| {
            let f = &fetch(&shared, &[a], limits())[0];
            (f.error, f.diverging_epoch)
        };
        assert_eq!(once(ask(next, -1, 5)), (kafka::OFFSET_OUT_OF_RANGE, None));
        assert_eq!(
            once(ask(next + 100, -1, 5)),
            (kafka::OFFSET_OUT_OF_RANGE, None)
        );
        assert_eq!(once(ask(3, -1, 0)), (kafka::OFFSET_OUT_OF_RANGE, None));
        assert_eq!(once(ask(next, -1, 3)), (kafka::NONE, None));
    }

    /// A diverged log is answered at once, as Kafka's broker does, not
    /// after the fetch's wait for `min_bytes`.
    #[test]
    fn a_diverging_epoch_is_answered_at_once() {
        let (_sim, shared, _p) = two_epochs(1);
        let waiting = Limits {
            max_wait_ms: 30_000,
            min_bytes: 1,
            max_bytes: 1 << 20,
            read_committed: false,
        };
        let started = Instant::now();
        let got = &fetch(&shared, &[ask(3, -1, 0)], waiting)[0];
        assert_eq!(got.diverging_epoch, Some((0, 2)));
        // Far below the 30 s wait: a wait would end only at its deadline.
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}
