//! Fetch: a consumer's records, the segment's byte range as stored (Kafka
//! batches, as far as consumers may read: the high watermark), sent from
//! the file with `sendfile` after the answer's other bytes; only a legacy
//! segment's batches are read and converted to Kafka's. The answer waits while fewer than `min_bytes` are ready, up
//! to `max_wait_ms` (bounded by `--request-timeout`); it starts at the
//! batch holding the offset asked for and always carries at least one
//! whole batch of the first partition that has records, however small
//! the byte budgets.

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
    /// The partition's first offset (-1 on error).
    pub(super) log_start_offset: i64,
    /// Kafka record batches: a segment's byte range, or converted ones.
    pub(super) records: Records<'s>,
}

/// What a fetch asks besides its partitions.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) max_wait_ms: i32,
    pub(super) min_bytes: i32,
    pub(super) max_bytes: i32,
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
        let parts = gather(shared, asks, budget);
        let bytes: u64 = parts.iter().map(|p| p.records.len()).sum();
        let errors = parts.iter().any(|p| p.error != kafka::NONE);
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
fn gather<'s>(shared: &'s Shared, asks: &[Ask<'_>], budget: u64) -> Vec<Fetched<'s>> {
    let mut parts: Vec<Fetched<'s>> = Vec::with_capacity(asks.len());
    let mut seen: std::collections::HashMap<(&str, i32), usize> = Default::default();
    let mut bytes = 0u64;
    for a in asks {
        if let Some(&first) = seen.get(&(a.topic, a.partition)) {
            let earlier = &parts[first];
            let again = Fetched {
                error: earlier.error,
                high_watermark: earlier.high_watermark,
                log_start_offset: earlier.log_start_offset,
                records: Records::Empty,
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
        let part = match read_partition(shared, a, (own.min(left), fit), wait) {
            // Past the response's budget, only an empty response takes it.
            Ok(part) if bytes > 0 && part.records.len() > left => Fetched {
                records: Records::Empty,
                ..part
            },
            Ok(part) => part,
            Err((error, _msg)) => Fetched {
                error,
                high_watermark: -1,
                log_start_offset: -1,
                records: Records::Empty,
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
/// takes request memory there is none of and it may not `wait`.
fn read_partition<'s>(
    shared: &'s Shared,
    a: &Ask<'_>,
    (bytes_max, fit): (u64, Option<u64>),
    wait: bool,
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
    let (start, end, lookup) = {
        let log = p.lock();
        let end = p.readable_end(&log).map_err(coded)?;
        let start = log.start_offset();
        let in_range = u64::try_from(a.fetch_offset).is_ok_and(|o| o >= start && o <= end);
        if !in_range {
            let msg = format!(
                "offset {} of {} [{partition}] is outside {start}..{end}",
                a.fetch_offset, a.topic
            );
            return Err((kafka::OFFSET_OUT_OF_RANGE, msg));
        }
        let lookup = log.locate_below(a.fetch_offset as u64, bytes_max, end);
        (start, end, lookup)
    };
    let storage = |e: crate::error::Error| (kafka_code(error_code(&e)), e.to_string());
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
        log_start_offset: start as i64,
        records,
    })
}
