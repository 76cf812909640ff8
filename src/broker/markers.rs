//! Writing a transaction's markers: the commit or abort control batch its
//! coordinator writes to each partition of the transaction
//! ([`crate::storage::record::control`]), on the partition's leader, and
//! durable there as `acks=all` records are before the transaction counts
//! as complete. A partition this broker leads takes it here
//! ([`write_here`]); another's leader is asked over klog's protocol
//! (write_txn_marker, [`crate::protocol`]), with the cluster permission
//! a follower has.
//!
//! A marker carries the producer's epoch and the transaction's
//! coordinator epoch ([`crate::coord::transactions`]): the partition
//! refuses one older than it has seen (`producer_fenced`), so that a
//! coordinator that wakes late cannot end a later transaction.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::connection::writer::durable;
use super::shared::{error_code, Appended, Shared};
use crate::client::Connection;
use crate::protocol::{ErrorCode, TxnMarker};
use crate::storage::record::control::Marker;

/// A refusal: the error code and why.
type Refusal = (ErrorCode, String);

/// Writes `m` to its partition, which this broker must lead, and waits
/// until it is durable on the in-sync replicas (or `deadline`).
pub(crate) fn write_here(shared: &Shared, m: &TxnMarker, deadline: Instant) -> Result<(), Refusal> {
    let p = shared.partition(&m.topic, m.partition)?;
    let marker = Marker {
        commit: m.commit,
        coordinator_epoch: m.coordinator_epoch,
    };
    let appended = {
        let mut log = p.lock();
        let min_isr = p.min_insync.load(Ordering::Relaxed);
        let leader_epoch = p.may_append(crate::protocol::ACKS_ALL, min_isr)?;
        let now = crate::clock::now_ms();
        let info = log
            .append_marker((m.producer_id, m.producer_epoch), marker, now)
            .map_err(|e| {
                (
                    error_code(&e),
                    format!("{} [{}]: {e}", m.topic, m.partition),
                )
            })?;
        Appended {
            base_offset: info.base_offset,
            end_offset: info.last_offset + 1,
            epoch: info.epoch,
            leader_epoch,
        }
    };
    shared.mark_dirty(&p, true);
    durable(&p, &appended, deadline).map(drop)
}

/// Writes the markers of a transaction to each of its `partitions`, here
/// or on their leaders, each durable before this returns `Ok`; a leader
/// that moves or is not known yet is asked again until `deadline`. A
/// fenced marker stops it: another coordinator took the transaction over.
pub(crate) fn write_all(
    shared: &Shared,
    partitions: &BTreeSet<(String, u32)>,
    (producer_id, producer_epoch): (i64, i16),
    marker: Marker,
    deadline: Instant,
) -> Result<(), Refusal> {
    for (topic, partition) in partitions {
        let m = TxnMarker {
            topic: topic.clone(),
            partition: *partition,
            producer_id,
            producer_epoch,
            commit: marker.commit,
            coordinator_epoch: marker.coordinator_epoch,
        };
        loop {
            let written = match leader_elsewhere(shared, topic, *partition) {
                None => write_here(shared, &m, deadline),
                Some(Ok(addr)) => write_there(&addr, &m, deadline),
                Some(Err(refusal)) => Err(refusal),
            };
            match written {
                Ok(()) => break,
                // Deleted since it was added: no reader is left to tell
                // (Kafka skips those too).
                Err((ErrorCode::UnknownTopic | ErrorCode::UnknownPartition, _)) => break,
                Err((ErrorCode::ProducerFenced, why)) => {
                    return Err((ErrorCode::ProducerFenced, why))
                }
                Err(refusal) if Instant::now() >= deadline => return Err(refusal),
                Err(_) => std::thread::sleep(RETRY_BACKOFF),
            }
        }
    }
    Ok(())
}

/// How long a marker waits before it asks a partition's leader again.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// The native address of the partition's leader when another broker
/// leads it; `None` when this one does (or it has one copy, here).
fn leader_elsewhere(
    shared: &Shared,
    topic: &str,
    partition: u32,
) -> Option<Result<String, Refusal>> {
    let registry = shared.registry.as_ref()?;
    let leader = match registry.partition_state(topic, partition) {
        Ok(Some((state, _))) => state.leader,
        // Not replicated: the broker that holds its one copy.
        Ok(None) => match registry.placement(topic) {
            Ok(Some(placed)) => placed
                .replicas_of(partition)
                .and_then(|r| r.first().cloned()),
            // Not placed (or no longer): this broker says what it knows.
            Ok(None) => return None,
            Err(e) => return Some(Err((error_code(&e), e.to_string()))),
        },
        Err(e) => return Some(Err((error_code(&e), e.to_string()))),
    };
    let Some(leader) = leader else {
        let why = format!("{topic} [{partition}] has no leader");
        return Some(Err((ErrorCode::LeaderNotAvailable, why)));
    };
    if leader == shared.broker_id {
        return None;
    }
    let brokers = match registry.brokers() {
        Ok(brokers) => brokers,
        Err(e) => return Some(Err((error_code(&e), e.to_string()))),
    };
    Some(
        brokers
            .into_iter()
            .find(|b| b.id == leader)
            .map(|b| b.addr())
            .ok_or_else(|| {
                let why =
                    format!("the leader of {topic} [{partition}], {leader}, is not registered");
                (ErrorCode::LeaderNotAvailable, why)
            }),
    )
}

/// Asks the broker at `addr` to write `m`, waiting until `deadline`.
fn write_there(addr: &str, m: &TxnMarker, deadline: Instant) -> Result<(), Refusal> {
    let left = deadline.saturating_duration_since(Instant::now());
    let refused = |e: crate::error::Error| {
        let code = match &e {
            crate::error::Error::Broker { code, .. } => *code,
            other => error_code(other),
        };
        (code, format!("{addr}: {e}"))
    };
    let mut connection =
        Connection::connect_timeout(addr, left.max(RETRY_BACKOFF)).map_err(refused)?;
    connection.write_txn_marker(m).map_err(refused)
}
