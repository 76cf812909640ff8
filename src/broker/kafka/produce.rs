//! Produce: each partition's Kafka batches are checked, all of them, and
//! then appended as sent, together under the partition's lock; the answer waits for every
//! partition of the request, as its `acks` asks (1: in the file; -1:
//! klog's `all`, durable on every in-sync replica; 0: no answer at all).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::kafka_code;
use crate::broker::connection::requests::produce_partition;
use crate::broker::connection::writer::{durable, stored};
use crate::broker::shared::{error_code, Appended, Partition, Shared};
use crate::kafka;
use crate::protocol::{self, ErrorCode};
use crate::storage::record::BatchHeader;

/// One partition's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Produced {
    /// Kafka's error code.
    pub(super) error: i16,
    /// The offset of the first record appended (-1 on error).
    pub(super) base_offset: i64,
    /// The partition's first offset (-1 on error).
    pub(super) log_start_offset: i64,
    /// Why, on error.
    pub(super) message: Option<String>,
}

impl Produced {
    fn failed(error: i16, message: String) -> Produced {
        Produced {
            error,
            base_offset: -1,
            log_start_offset: -1,
            message: Some(message),
        }
    }

    fn refused((code, msg): (ErrorCode, String)) -> Produced {
        Produced::failed(kafka_code(code), msg)
    }
}

/// A partition's produce once appended: its answer, or what it waits for.
#[derive(Debug)]
pub(super) enum Pending {
    /// Answered already (refused).
    Done(Produced),
    /// Appended; the answer depends on `acks`.
    Appended(Arc<Partition>, Appended),
}

/// Whether `acks` is one Kafka knows.
pub(super) fn valid_acks(acks: i16) -> bool {
    (-1..=1).contains(&acks)
}

/// Whether a transactional batch of producer `(id, epoch)` may open a
/// transaction in `topic [partition]`: the coordinator's answer (its
/// Kafka error when not).
pub(super) type Verify<'a> = &'a dyn Fn((i64, i16), &str, u32) -> Result<(), i16>;

/// How a produce's transactional batches are taken: `verify` asks the
/// coordinator about those that open a transaction; `refused`, when set,
/// refuses every one (a produce without a transactional id, as Kafka:
/// nobody may add records to a transaction without write on its id).
#[derive(Clone, Copy)]
pub(super) struct Transactional<'a> {
    pub(super) verify: Verify<'a>,
    pub(super) refused: Option<i16>,
}

/// Checks a partition's Kafka `records`, copies them into `scratch` (the
/// log stamps each batch's offset and epoch in place) and appends them, in
/// one go under the partition's lock. A transactional batch that would
/// open a transaction in the partition is first checked with `verify`
/// (KIP-890's check: a batch the coordinator knows no transaction of, a
/// client's error or a late retry after an abort, would leave one open
/// that nothing ends, and read_committed readers stuck below it).
pub(super) fn append(
    shared: &Arc<Shared>,
    (topic, partition): (&str, i32),
    records: Option<&[u8]>,
    (acks, txn): (i16, Transactional<'_>),
    scratch: &mut Vec<u8>,
) -> Pending {
    let Ok(partition) = u32::try_from(partition) else {
        let msg = format!("partition {partition} of {topic:?} does not exist");
        return Pending::Done(Produced::failed(kafka::UNKNOWN_TOPIC_OR_PARTITION, msg));
    };
    if let Err(e) = crate::storage::store::validate_topic(topic) {
        return Pending::Done(Produced::failed(
            kafka::INVALID_TOPIC_EXCEPTION,
            e.to_string(),
        ));
    }
    let p = match produce_partition(shared, topic, partition) {
        Ok(p) => p,
        Err(refusal) => return Pending::Done(Produced::refused(refusal)),
    };
    let records = records.unwrap_or_default();
    let mut headers = Vec::new();
    // The topic's max.message.bytes, or the broker's.
    let record_bytes_max = p.record_bytes_max.load(Ordering::Relaxed);
    let compacted = p.compacted.load(Ordering::Relaxed);
    let checked =
        kafka::records::check_produce(records, (record_bytes_max, compacted), &mut headers);
    match checked {
        Err(e) => return Pending::Done(Produced::failed(e.error_code, e.to_string())),
        Ok(()) if headers.is_empty() => {
            let msg = format!("{topic} [{partition}]: a produce without records");
            return Pending::Done(Produced::failed(kafka::CORRUPT_MESSAGE, msg));
        }
        Ok(()) => {}
    }
    if let Err(refused) = verify_transactions(&p, &headers, txn) {
        return Pending::Done(refused);
    }
    scratch.clear();
    scratch.extend_from_slice(records);
    match append_batches(shared, &p, acks as i8, scratch, &headers) {
        Ok(appended) => {
            shared.mark_dirty(&p, acks == -1);
            Pending::Appended(p, appended)
        }
        Err(refused) => Pending::Done(refused),
    }
}

/// Asks `verify` about each transactional batch of `headers` whose
/// producer has no transaction open in `p` in its epoch (the registry is
/// read with the partition's lock let go).
fn verify_transactions(
    p: &Partition,
    headers: &[BatchHeader],
    txn: Transactional<'_>,
) -> Result<(), Produced> {
    let transactional = headers.iter().any(BatchHeader::is_transactional);
    if let Some(code) = txn.refused.filter(|_| transactional) {
        let msg = format!(
            "{} [{}]: transactional batches without a transactional id",
            p.topic, p.partition
        );
        return Err(Produced::failed(code, msg));
    }
    let mut opening: Vec<(i64, i16)> = Vec::new();
    {
        let mut log = p.lock();
        for h in headers.iter().filter(|h| h.is_transactional()) {
            let state = log.producer_state().map_err(|e| {
                Produced::refused((
                    error_code(&e),
                    format!("{} [{}]: {e}", p.topic, p.partition),
                ))
            })?;
            let open = state
                .get(h.producer_id)
                .is_some_and(|s| s.epoch == h.producer_epoch && s.txn_first_offset.is_some());
            if !open && !opening.contains(&(h.producer_id, h.producer_epoch)) {
                opening.push((h.producer_id, h.producer_epoch));
            }
        }
    }
    for producer in opening {
        if let Err(code) = (txn.verify)(producer, &p.topic, p.partition) {
            let msg = format!(
                "{} [{}]: producer {} (epoch {}) has no transaction with this partition",
                p.topic, p.partition, producer.0, producer.1
            );
            return Err(Produced::failed(code, msg));
        }
    }
    Ok(())
}

/// Appends the checked Kafka batches in `batches` to `p`, one after the
/// other under its lock: their offsets are contiguous. `headers` are
/// theirs, one per batch: a retry of a batch the log holds is not appended
/// again, and is answered with the offsets the first one got; a batch
/// out of order refuses the rest (see [`crate::storage::producers`]).
fn append_batches(
    shared: &Shared,
    p: &Partition,
    acks: i8,
    batches: &mut [u8],
    headers: &[BatchHeader],
) -> Result<Appended, Produced> {
    let now = crate::clock::now_ms();
    let mut log = p.lock();
    let leader_epoch = p
        .may_append(acks, p.min_insync.load(Ordering::Relaxed))
        .map_err(Produced::refused)?;
    let mut appended: Option<Appended> = None;
    let mut rest = batches;
    for header in headers {
        let (batch, after) = rest.split_at_mut(header.total_bytes() as usize);
        rest = after;
        let produced = log.append_produced(batch, *header, now).map_err(|e| {
            let why = (
                error_code(&e),
                format!("{} [{}]: {e}", p.topic, p.partition),
            );
            Produced::refused(why)
        })?;
        if !produced.duplicate {
            shared.appends.fetch_add(1, Ordering::Relaxed);
        }
        // A duplicate still in this leader's log: durable, for acks=all,
        // once the in-sync replicas of its epoch now have it (the epoch it
        // was appended in may be over, its records kept).
        let this = Appended {
            base_offset: produced.info.base_offset,
            end_offset: produced.info.last_offset + 1,
            epoch: produced.info.epoch,
            leader_epoch,
        };
        let a = appended.get_or_insert(this);
        a.end_offset = a.end_offset.max(this.end_offset);
        a.epoch = a.epoch.max(this.epoch);
    }
    appended.ok_or_else(|| Produced::refused((ErrorCode::CorruptBatch, "no batch".into())))
}

/// The answer for a partition appended to: with acks=1 once its batches
/// are in the file, with acks=-1 once durable on the in-sync replicas (or
/// the deadline passed).
pub(super) fn settle(pending: &Pending, acks: i16, deadline: Instant) -> Produced {
    let (p, appended) = match pending {
        Pending::Done(answer) => return answer.clone(),
        Pending::Appended(p, appended) => (p, appended),
    };
    let outcome = if acks == i16::from(protocol::ACKS_ALL) {
        durable(p, appended, deadline)
    } else {
        let written = p.lock().write_pending();
        p.written();
        match (written, stored(p, appended)) {
            (_, Ok(base)) => Ok(base),
            (Err(e), Err(_)) => Err((error_code(&e), e.to_string())),
            (Ok(()), Err(why)) => Err(why),
        }
    };
    match outcome {
        Ok(base_offset) => Produced {
            error: kafka::NONE,
            base_offset: base_offset as i64,
            log_start_offset: p.lock().start_offset() as i64,
            message: None,
        },
        Err(refusal) => Produced::refused(refusal),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::broker::flusher::flush_partition;
    use crate::broker::replica::{Leading, Role};
    use crate::broker::testing::{batch_of, replicated_partition, shared};

    fn leading(epoch: u32, epoch_start: u64) -> Role {
        Role::Leader(Leading {
            epoch,
            version: 0,
            isr: vec!["broker-test".into()],
            epoch_start,
            since: Instant::now(),
            progress: BTreeMap::new(),
        })
    }

    /// A Kafka batch of one record `value` from producer `id`, epoch 0,
    /// sequence `first`.
    fn kafka_batch(id: i64, first: i32, value: &[u8]) -> Vec<u8> {
        let mut out = batch_of(value);
        crate::storage::record::set_producer(&mut out, id, 0, first);
        out
    }

    fn produce(shared: &Arc<Shared>, p: &Arc<Partition>, records: &[u8]) -> Produced {
        let no_txn = |_, _: &str, _| Err(kafka::INVALID_TXN_STATE);
        let pending = append(
            shared,
            ("t", 0),
            Some(records),
            (
                -1,
                Transactional {
                    verify: &no_txn,
                    refused: None,
                },
            ),
            &mut Vec::new(),
        );
        flush_partition(shared, p);
        settle(&pending, -1, Instant::now() + Duration::from_secs(5))
    }

    /// A retry reaching a leader that lost the partition and leads it again
    /// (nothing of its log cut) is answered as its first append, once
    /// replicated: it was refused NOT_LEADER for good (the answer spoke
    /// for the leader epoch of the first append), so the producer failed
    /// records that were stored.
    #[test]
    fn a_retry_after_leadership_came_back_is_answered_in_the_new_epoch() {
        let (_sim, shared) = shared();
        let p = replicated_partition(&shared, "t", &["broker-test"], leading(3, 0));
        let a = kafka_batch(5, 0, b"a");
        let first = produce(&shared, &p, &a);
        assert_eq!((first.error, first.base_offset), (kafka::NONE, 0));
        *p.replica.as_ref().unwrap().role() = leading(5, 1);
        let retry = produce(&shared, &p, &a);
        assert_eq!(
            (retry.error, retry.base_offset),
            (kafka::NONE, 0),
            "{retry:?}"
        );
        assert_eq!(p.lock().next_offset(), 1, "stored once");
    }
}
