//! DeleteRecords on the wire ([`crate::kafka::delete_records`]): each
//! partition needs delete on its topic and its leader here. The records
//! before the offset asked for (-1: the high watermark; past it:
//! `OFFSET_OUT_OF_RANGE`) go for readers at once, and their segments at
//! once too where whole ([`crate::storage::log::start`]). For a
//! replicated partition the new start is stored in the registry first
//! ([`crate::coord::log_start`]), and answered only if this broker still
//! leads in the same epoch after it: a replica elected later takes it
//! before it serves, so deleted records never show again after a
//! failover (the followers' own copies go when one leads).
//!
//! A request names at most [`PARTITIONS_MAX`] partitions (each can cost a
//! registry write); those past it are answered `INVALID_REQUEST`.

use std::sync::atomic::Ordering;

use super::access::Access;
use crate::broker::shared::{error_code, Partition, Shared};
use crate::coord::acl::Operation;
use crate::kafka::delete_records::*;
use crate::kafka::{self};

/// Partitions one request may name.
pub(super) const PARTITIONS_MAX: usize = 1000;

/// DeleteRecords: each partition's new start, in order.
pub(super) fn delete(
    shared: &Shared,
    access: &Access<'_>,
    r: &DeleteRecordsRequest<'_>,
) -> DeleteRecordsResponse {
    let mut named = 0;
    let topics = r
        .topics
        .iter()
        .map(|t| DeleteRecordsTopicResult {
            name: t.name.into(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    named += 1;
                    let outcome = match named <= PARTITIONS_MAX {
                        true => delete_one(shared, access, t.name, p),
                        false => Err(kafka::INVALID_REQUEST),
                    };
                    let (low_watermark, error_code) = match outcome {
                        Ok(start) => (start as i64, kafka::NONE),
                        Err(code) => (-1, code),
                    };
                    DeleteRecordsPartitionResult {
                        partition_index: p.partition_index,
                        low_watermark,
                        error_code,
                    }
                })
                .collect(),
        })
        .collect();
    DeleteRecordsResponse {
        throttle_time_ms: 0,
        topics,
    }
}

/// Moves one partition's start: the start, or the error code.
fn delete_one(
    shared: &Shared,
    access: &Access<'_>,
    topic: &str,
    asked: &DeleteRecordsPartition,
) -> Result<u64, i16> {
    if let Some(denied) = access.topic(Operation::Delete, topic) {
        return Err(denied);
    }
    if topic == crate::coord::offsets_topic::OFFSETS_TOPIC {
        return Err(kafka::POLICY_VIOLATION);
    }
    let code = |c| super::kafka_code(c);
    let partition =
        u32::try_from(asked.partition_index).map_err(|_| kafka::UNKNOWN_TOPIC_OR_PARTITION)?;
    let p = shared
        .partition(topic, partition)
        .map_err(|(c, _)| code(c))?;
    // This broker leads it, in this epoch (a single copy: always).
    let epoch = match &p.replica {
        Some(replica) => Some(p.leading(&replica.role()).map_err(|(c, _)| code(c))?.epoch),
        None => None,
    };
    let hw = p.high_watermark.load(Ordering::Acquire);
    let offset = match asked.offset {
        -1 => hw,
        o if o >= 0 && (o as u64) <= hw => o as u64,
        _ => return Err(kafka::OFFSET_OUT_OF_RANGE),
    };
    let mut offset = offset;
    if let (Some(epoch), Some(registry)) = (epoch, shared.registry.as_deref()) {
        let refused = |e: crate::error::Error| code(error_code(&e));
        // Leading before too: a topic deleted meanwhile gets no start.
        still_leading(registry, &p, &shared.broker_id, epoch)?;
        let stored = crate::coord::log_start::raise(registry, topic, partition, offset);
        // The start a next leader takes, if higher than asked.
        offset = stored.map_err(refused)?.min(hw);
        still_leading(registry, &p, &shared.broker_id, epoch)?;
    }
    let (start, expired) = {
        let mut log = p.lock();
        let start = log.delete_records_before(offset);
        // Whole segments below it go now, not at the next retention
        // check; their files after the lock is let go.
        let start = start.map_err(|e| code(error_code(&e)))?;
        (start, log.take_expired(crate::clock::now_ms()))
    };
    if let Err(e) = expired.delete() {
        shared.log(format_args!(
            "{topic}-{partition}: deleting old segments failed: {e}"
        ));
    }
    Ok(start)
}

/// NOT_LEADER_OR_FOLLOWER unless the registry still names this broker the
/// partition's leader in `epoch`: a leader elected before the start was
/// stored did not take it, and the client asks that one again.
fn still_leading(
    registry: &dyn crate::coord::Registry,
    p: &Partition,
    me: &str,
    epoch: u32,
) -> Result<(), i16> {
    let state = registry.partition_state(&p.topic, p.partition);
    match state {
        Ok(Some((s, _)))
            if s.leader.as_deref() == Some(me) && s.leader_epoch == u64::from(epoch) =>
        {
            Ok(())
        }
        Ok(_) => Err(kafka::NOT_LEADER_OR_FOLLOWER),
        Err(e) => Err(super::kafka_code(error_code(&e))),
    }
}
