//! The transactional APIs on Kafka's wire: InitProducerId (idempotent or
//! transactional), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
//! TxnOffsetCommit, answered by the coordinator ([`super::transactions`]).
//!
//! | request | needs (with `--authorize`) |
//! |---|---|
//! | InitProducerId | write on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer's, write on some topic |
//! | AddPartitionsToTxn | write on the transactional id, and on each topic (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED) |
//! | AddOffsetsToTxn, TxnOffsetCommit | write on the transactional id, read on the group (and on each topic) |
//! | EndTxn | write on the transactional id, and its producer id and epoch |

use super::access::Access;
use super::Kafka;
use crate::broker::shared::Shared;
use crate::coord::acl::Operation;
use crate::kafka::request::Request;
use crate::kafka::response::frame_message;
use crate::kafka::txn::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, EndTxnRequest,
    InitProducerIdRequest, InitProducerIdResponse, TxnErrorResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse, TxnPartitionResult, TxnTopicResult,
};
use crate::kafka::{self as k};

/// A transactional request, decoded.
enum TxnRequest<'a> {
    InitProducerId(InitProducerIdRequest<'a>),
    AddPartitions(AddPartitionsToTxnRequest<'a>),
    AddOffsets(AddOffsetsToTxnRequest<'a>),
    End(EndTxnRequest<'a>),
    OffsetCommit(TxnOffsetCommitRequest<'a>),
}

impl<'a> TxnRequest<'a> {
    /// The transactional request `r` is, or `r` when it is another.
    fn of(r: Request<'a>) -> Result<TxnRequest<'a>, Request<'a>> {
        Ok(match r {
            Request::InitProducerId(r) => TxnRequest::InitProducerId(r),
            Request::AddPartitionsToTxn(r) => TxnRequest::AddPartitions(r),
            Request::AddOffsetsToTxn(r) => TxnRequest::AddOffsets(r),
            Request::EndTxn(r) => TxnRequest::End(r),
            Request::TxnOffsetCommit(r) => TxnRequest::OffsetCommit(r),
            other => return Err(other),
        })
    }
}

/// Answers a transactional request into `out` (any other request is
/// not this module's, and is left unanswered).
pub(super) fn handle(
    shared: &Shared,
    kafka: &Kafka,
    request: Request<'_>,
    access: Access<'_>,
    (version, id): (i16, i32),
    out: &mut Vec<u8>,
) {
    let Ok(request) = TxnRequest::of(request) else {
        return;
    };
    let t = &kafka.transactions;
    let error = |error_code: i16| TxnErrorResponse {
        throttle_time_ms: 0,
        error_code,
    };
    match request {
        TxnRequest::InitProducerId(r) => {
            let response = init_producer_id(shared, kafka, &r, access);
            frame_message(out, id, version, &response);
        }
        TxnRequest::AddPartitions(r) => {
            let response = add_partitions(shared, kafka, &r, access);
            frame_message(out, id, version, &response);
        }
        TxnRequest::AddOffsets(r) => {
            let producer = (r.producer_id, r.producer_epoch);
            let denied = access.transactional_id(Operation::Write, r.transactional_id);
            let code = match denied.or_else(|| access.group(Operation::Read, r.group_id)) {
                Some(denied) => denied,
                None => code_of(t.add(
                    shared,
                    r.transactional_id,
                    producer,
                    (&[], &[r.group_id.to_string()]),
                )),
            };
            frame_message(out, id, version, &error(code));
        }
        TxnRequest::End(r) => {
            let producer = (r.producer_id, r.producer_epoch);
            let code = match access.transactional_id(Operation::Write, r.transactional_id) {
                Some(denied) => denied,
                None => code_of(t.end(shared, r.transactional_id, producer, r.committed)),
            };
            frame_message(out, id, version, &error(code));
        }
        TxnRequest::OffsetCommit(r) => {
            let response = offset_commit(shared, kafka, &r, access);
            frame_message(out, id, version, &response);
        }
    }
}

/// NONE, or the step's error.
fn code_of(step: Result<(), i16>) -> i16 {
    step.err().unwrap_or(k::NONE)
}

/// InitProducerId: an idempotent producer's id from the broker's block
/// ([`crate::coord::producer_ids`]; a registry that cannot give a new
/// block answers COORDINATOR_NOT_AVAILABLE, which clients retry), or a
/// transactional producer's id and new epoch from the coordinator.
fn init_producer_id(
    shared: &Shared,
    kafka: &Kafka,
    r: &InitProducerIdRequest<'_>,
    access: Access<'_>,
) -> InitProducerIdResponse {
    let answer = |error_code, (producer_id, producer_epoch)| InitProducerIdResponse {
        throttle_time_ms: 0,
        error_code,
        producer_id,
        producer_epoch,
    };
    let denied = match r.transactional_id {
        Some(txn) => access.transactional_id(Operation::Write, txn),
        None => (!access.writes_somewhere()).then_some(k::CLUSTER_AUTHORIZATION_FAILED),
    };
    if let Some(code) = denied {
        return answer(code, (-1, -1));
    }
    let given = match r.transactional_id {
        Some(txn) => {
            let current = (r.producer_id, r.producer_epoch);
            kafka
                .transactions
                .init(shared, txn, r.transaction_timeout_ms, current)
        }
        // An idempotent producer gets a new id, whatever id it names (as
        // Kafka: bumping a named id's epoch would let any client fence any
        // producer whose id it knows).
        None => shared.producer_ids.next().map(|id| (id, 0)).map_err(|e| {
            shared.log_peer(format_args!("no producer id to hand out: {e}"));
            k::COORDINATOR_NOT_AVAILABLE
        }),
    };
    match given {
        Ok(producer) => answer(k::NONE, producer),
        Err(code) => answer(code, (-1, -1)),
    }
}

/// AddPartitionsToTxn: each partition's answer, all of them one error
/// (or OPERATION_NOT_ATTEMPTED beside the partitions refused).
fn add_partitions<'r>(
    shared: &Shared,
    kafka: &Kafka,
    r: &AddPartitionsToTxnRequest<'r>,
    access: Access<'_>,
) -> AddPartitionsToTxnResponse<'r> {
    let mut partitions = Vec::new();
    let mut refused = Vec::new();
    let txn_denied = access.transactional_id(Operation::Write, r.transactional_id);
    for t in &r.topics {
        for p in &t.partitions {
            let code = match txn_denied.or_else(|| access.topic(Operation::Write, t.name)) {
                Some(denied) => denied,
                None => match u32::try_from(*p)
                    .ok()
                    .filter(|p| exists(shared, t.name, *p))
                {
                    Some(p) => {
                        partitions.push((t.name.to_string(), p));
                        k::NONE
                    }
                    None => k::UNKNOWN_TOPIC_OR_PARTITION,
                },
            };
            refused.push(code);
        }
    }
    let all = if txn_denied.is_some() {
        txn_denied
    } else if refused.iter().any(|c| *c != k::NONE) {
        None
    } else {
        let producer = (r.producer_id, r.producer_epoch);
        Some(code_of(kafka.transactions.add(
            shared,
            r.transactional_id,
            producer,
            (&partitions, &[]),
        )))
    };
    let mut codes = refused.into_iter();
    let results = r
        .topics
        .iter()
        .map(|t| TxnTopicResult {
            name: t.name,
            results_by_partition: t
                .partitions
                .iter()
                .zip(codes.by_ref())
                .map(|(p, own)| TxnPartitionResult {
                    partition_index: *p,
                    partition_error_code: match all {
                        Some(code) => code,
                        None if own == k::NONE => k::OPERATION_NOT_ATTEMPTED,
                        None => own,
                    },
                })
                .collect(),
        })
        .collect();
    AddPartitionsToTxnResponse {
        throttle_time_ms: 0,
        results_by_topic: results,
    }
}

/// Whether `topic [partition]` exists (here or on the cluster).
fn exists(shared: &Shared, topic: &str, partition: u32) -> bool {
    use crate::protocol::ErrorCode as E;
    match shared.partition(topic, partition) {
        Ok(_) => true,
        Err((code, _)) => !matches!(code, E::UnknownTopic | E::UnknownPartition),
    }
}

/// TxnOffsetCommit: the offsets, each answered with one error.
fn offset_commit<'r>(
    shared: &Shared,
    kafka: &Kafka,
    r: &TxnOffsetCommitRequest<'r>,
    access: Access<'_>,
) -> TxnOffsetCommitResponse<'r> {
    let mut offsets = Vec::new();
    let (mut bad, mut missing) = (false, false);
    for t in &r.topics {
        for p in &t.partitions {
            match (
                u32::try_from(p.partition_index),
                u64::try_from(p.committed_offset),
            ) {
                // Only a partition that exists: no registry entries for
                // made-up ones (as a commit from outside a group).
                (Ok(partition), Ok(offset)) if exists(shared, t.name, partition) => {
                    offsets.push((t.name.to_string(), partition, offset))
                }
                (Ok(_), Ok(_)) => missing = true,
                _ => bad = true,
            }
        }
    }
    let code = if let Some(denied) = access.transactional_id(Operation::Write, r.transactional_id) {
        denied
    } else if let Some(denied) = access.group(Operation::Read, r.group_id) {
        denied
    } else if let Some(denied) = r
        .topics
        .iter()
        .find_map(|t| access.topic(Operation::Read, t.name))
    {
        denied
    } else if bad {
        k::INVALID_REQUEST
    } else if missing {
        k::UNKNOWN_TOPIC_OR_PARTITION
    } else {
        let producer = (r.producer_id, r.producer_epoch);
        let member = (r.group_id, r.member_id, r.generation_id);
        code_of(kafka.transactions.add_offsets(
            shared,
            r.transactional_id,
            producer,
            member,
            &offsets,
        ))
    };
    TxnOffsetCommitResponse {
        throttle_time_ms: 0,
        topics: r
            .topics
            .iter()
            .map(|t| TxnTopicResult {
                name: t.name,
                results_by_partition: t
                    .partitions
                    .iter()
                    .map(|p| TxnPartitionResult {
                        partition_index: p.partition_index,
                        partition_error_code: code,
                    })
                    .collect(),
            })
            .collect(),
    }
}
