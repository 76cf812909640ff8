//! Transactions on klog's protocol: init_producer_id with a transactional
//! id, add_to_txn, txn_offset_commit and end_txn, answered by the
//! coordinator Kafka clients use ([`Txns`], the Kafka side's), and the
//! check of a produce's transactional batch (version 3) before it is
//! appended. One transactional id is one producer whichever protocol its
//! instances speak: each epoch fences the ones before.
//!
//! | request | needs (with `--authorize`) |
//! |---|---|
//! | init_producer_id (version 2), end_txn | write on the transactional id |
//! | add_to_txn | write on the transactional id and on each topic |
//! | txn_offset_commit | write on the transactional id, read on the group and each topic |
//! | produce version 3 | write on the transactional id (and the topic's, as any produce) |

use std::sync::Arc;

use crate::broker::auth::Session;
use crate::broker::shared::{Partition, Shared};
use crate::kafka as k;
use crate::protocol::{self, ErrorCode, TxnProducer, TxnRequest};

/// What a step of the coordinator answers: Kafka's error code, or go on.
pub(crate) type Step<T> = Result<T, i16>;

/// A transaction coordinator (the Kafka side's), as klog's protocol asks
/// it.
pub(crate) trait Txns: Send + Sync {
    /// InitProducerId: the id's producer id and a new epoch.
    fn init(&self, shared: &Shared, id: &str, timeout_ms: i32) -> Step<(i64, i16)>;
    /// Partitions and groups join the producer's transaction.
    fn add(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        joining: (&[(String, u32)], &[String]),
    ) -> Step<()>;
    /// A group's offsets, committed with the transaction, from outside
    /// the group.
    fn offsets(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        group: &str,
        offsets: &[(String, u32, u64)],
    ) -> Step<()>;
    /// EndTxn; an abort also bumps the producer's epoch, fencing a batch
    /// of the aborted transaction still on its way (klog's producer stops
    /// at an abort).
    fn end(&self, shared: &Shared, id: &str, producer: (i64, i16), commit: bool) -> Step<()>;
    /// Whether the producer's open transaction holds `topic [partition]`.
    fn verify(
        &self,
        shared: &Shared,
        id: &str,
        producer: (i64, i16),
        partition: (&str, u32),
    ) -> Step<()>;
}

/// Where a connection finds the coordinator: started at the first
/// request that needs it, as for Kafka's clients.
pub(crate) trait Coordinators: Send + Sync {
    /// The coordinator, or why there is none (the broker stops).
    fn transactions(&self, shared: &Arc<Shared>) -> Result<Arc<dyn Txns>, String>;
}

/// The error klog's protocol answers for a Kafka code of the coordinator.
fn native(code: i16) -> ErrorCode {
    match code {
        k::PRODUCER_FENCED | k::INVALID_PRODUCER_EPOCH => ErrorCode::ProducerFenced,
        k::INVALID_TXN_STATE => ErrorCode::InvalidTxnState,
        k::CONCURRENT_TRANSACTIONS => ErrorCode::ConcurrentTransactions,
        k::COORDINATOR_NOT_AVAILABLE => ErrorCode::CoordinatorNotAvailable,
        k::INVALID_PRODUCER_ID_MAPPING => ErrorCode::InvalidProducerIdMapping,
        k::INVALID_TRANSACTION_TIMEOUT => ErrorCode::InvalidTransactionTimeout,
        k::INVALID_REQUEST | k::INVALID_GROUP_ID => ErrorCode::InvalidRequest,
        k::TRANSACTIONAL_ID_AUTHORIZATION_FAILED | k::GROUP_AUTHORIZATION_FAILED => {
            ErrorCode::AuthorizationFailed
        }
        k::ILLEGAL_GENERATION | k::UNKNOWN_MEMBER_ID => ErrorCode::CommitFenced,
        _ => ErrorCode::Unknown,
    }
}

/// Why the coordinator refused, in words.
fn refusal(code: i16, id: &str) -> (ErrorCode, String) {
    let native = native(code);
    let why = match native {
        ErrorCode::ProducerFenced => "a newer instance of the producer took over",
        ErrorCode::InvalidTxnState => "the transaction's state does not allow this step",
        ErrorCode::ConcurrentTransactions => "its last transaction is still being completed",
        ErrorCode::CoordinatorNotAvailable => "the coordinator cannot reach the registry",
        ErrorCode::InvalidProducerIdMapping => "no such producer of it: init it first",
        ErrorCode::InvalidTransactionTimeout => "the transaction timeout is out of bounds",
        _ => "refused",
    };
    (native, format!("transactional id {id:?}: {why} ({native})"))
}

/// Answers a transactional request in `out`.
pub(super) fn answer(
    shared: &Arc<Shared>,
    coordinators: Option<&dyn Coordinators>,
    out: &mut Vec<u8>,
    correlation_id: u32,
    request: &TxnRequest,
) {
    let txns = match coordinators.map(|c| c.transactions(shared)) {
        Some(Ok(txns)) => txns,
        Some(Err(why)) => {
            let msg = format!("no transaction coordinator: {why}");
            return super::error_into(
                out,
                correlation_id,
                ErrorCode::CoordinatorNotAvailable,
                &msg,
            );
        }
        None => {
            let msg = "this connection has no transaction coordinator";
            return super::error_into(out, correlation_id, ErrorCode::CoordinatorNotAvailable, msg);
        }
    };
    let answered = match request {
        TxnRequest::Init {
            transactional_id,
            timeout_ms,
        } => {
            let timeout = i32::try_from(*timeout_ms).unwrap_or(i32::MAX);
            (txns.init(shared, transactional_id, timeout))
                .map(Some)
                .map_err(|c| refusal(c, transactional_id))
        }
        TxnRequest::Add {
            producer,
            partitions,
        } => step(producer, |id, p| txns.add(shared, id, p, (partitions, &[]))),
        TxnRequest::OffsetCommit {
            producer,
            group,
            offsets,
        } => step(producer, |id, p| {
            txns.add(shared, id, p, (&[], std::slice::from_ref(group)))?;
            txns.offsets(shared, id, p, group, offsets)
        }),
        TxnRequest::End { producer, commit } => {
            step(producer, |id, p| txns.end(shared, id, p, *commit))
        }
    };
    match answered {
        Ok(id) => {
            let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
            if let Some((producer_id, epoch)) = id {
                protocol::put::i64(out, producer_id);
                protocol::put::u16(out, epoch as u16);
            }
            protocol::finish_frame(&mut out[start..]);
        }
        Err((code, msg)) => super::error_into(out, correlation_id, code, &msg),
    }
}

/// A step of `producer`'s transaction, its refusal in words.
fn step(
    producer: &TxnProducer,
    f: impl FnOnce(&str, (i64, i16)) -> Step<()>,
) -> Result<Option<(i64, i16)>, (ErrorCode, String)> {
    let id = &producer.transactional_id;
    f(id, (producer.producer_id, producer.epoch))
        .map(|()| None)
        .map_err(|c| refusal(c, id))
}

/// The ACLs' part of a transactional request (see the module doc).
pub(super) fn denied(shared: &Shared, session: &Session, request: &TxnRequest) -> Option<String> {
    use crate::coord::acl::{Operation as Op, ResourceType as R};
    let who = &session.principal;
    let id = match request {
        TxnRequest::Init {
            transactional_id, ..
        } => transactional_id,
        TxnRequest::Add { producer, .. }
        | TxnRequest::OffsetCommit { producer, .. }
        | TxnRequest::End { producer, .. } => &producer.transactional_id,
    };
    if !session.allows(shared, Op::Write, (R::TransactionalId, id)) {
        return Some(format!("{who} may not write transactional id {id:?}"));
    }
    let (topics, topic_op): (Vec<&str>, _) = match request {
        TxnRequest::Add { partitions, .. } => {
            (partitions.iter().map(|(t, _)| &t[..]).collect(), Op::Write)
        }
        TxnRequest::OffsetCommit { group, offsets, .. } => {
            if !session.allows(shared, Op::Read, (R::Group, group)) {
                return Some(format!("{who} may not read group {group:?}"));
            }
            (offsets.iter().map(|(t, _, _)| &t[..]).collect(), Op::Read)
        }
        _ => (Vec::new(), Op::Write),
    };
    (topics.into_iter())
        .find(|t| !session.allows(shared, topic_op, (R::Topic, t)))
        .map(|t| format!("{who} may not {topic_op:?} topic {t:?}"))
}

/// The ACLs' part of a produce of the transaction `id` (empty: none).
pub(super) fn produce_denied(shared: &Shared, session: &Session, id: &str) -> Option<String> {
    use crate::coord::acl::{Operation as Op, ResourceType as R};
    let writes = id.is_empty() || session.allows(shared, Op::Write, (R::TransactionalId, id));
    (!writes).then(|| {
        format!(
            "{} may not write transactional id {id:?}",
            session.principal
        )
    })
}

/// Checks a produce's `batch` for `p` from the transaction
/// `transactional_id` (empty: none): a transactional batch whose producer
/// has no transaction open in `p` must be one its coordinator holds
/// `p` in (asked with the partition's lock let go). Whether it may be
/// appended as a transaction's (`Ok(false)`: it is not transactional).
pub(super) fn check_produce(
    shared: &Arc<Shared>,
    coordinators: Option<&dyn Coordinators>,
    (p, transactional_id): (&Partition, &str),
    batch: &[u8],
) -> Result<bool, (ErrorCode, String)> {
    use crate::storage::record::{BatchHeader, Format};
    let Ok(header) = BatchHeader::decode(Format::Kafka, batch, u32::MAX) else {
        // The append says what is wrong with it.
        return Ok(false);
    };
    if !header.is_transactional() || transactional_id.is_empty() {
        return Ok(false);
    }
    let producer = (header.producer_id, header.producer_epoch);
    let open = (p.lock().transaction_open(producer))
        .map_err(|e| (crate::broker::shared::error_code(&e), e.to_string()))?;
    if open {
        return Ok(true);
    }
    let txns = coordinators
        .map(|c| c.transactions(shared))
        .transpose()
        .map_err(|why| (ErrorCode::CoordinatorNotAvailable, why))?
        .ok_or_else(|| {
            let why = "this connection has no transaction coordinator";
            (ErrorCode::CoordinatorNotAvailable, why.to_string())
        })?;
    let partition = (&p.topic[..], p.partition);
    match txns.verify(shared, transactional_id, producer, partition) {
        Ok(()) => Ok(true),
        Err(code) => {
            let (native, why) = refusal(code, transactional_id);
            let msg = format!(
                "{} [{}]: producer {} (epoch {}) has no transaction with this partition: {why}",
                p.topic, p.partition, producer.0, producer.1
            );
            Err((native, msg))
        }
    }
}
