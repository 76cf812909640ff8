//! The transactional producer's APIs, declared once from their schemas
//! (`message!`): InitProducerId (22) v0–3, AddPartitionsToTxn (24) v0–3,
//! AddOffsetsToTxn (25) v0–3, EndTxn (26) v0–3 and TxnOffsetCommit (28)
//! v0–3. InitProducerId v2, the others' v3, are flexible.
//!
//! Versions past these are Kafka's own brokers' (AddPartitionsToTxn v4+
//! batches transactions for a partition leader's check, KIP-890) or add
//! the TRANSACTION_ABORTABLE error and per-transaction epoch bumps
//! (KIP-890 part 2), which klog's coordinator does not do.

use crate::kafka::api_key::{
    ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, END_TXN, INIT_PRODUCER_ID, TXN_OFFSET_COMMIT,
};
use crate::kafka::message::{message, messages};

message! {
    /// InitProducerId request: an id for an idempotent producer, or the id
    /// and a new epoch for a transactional one (fencing its older
    /// instances).
    pub struct InitProducerIdRequest<'a> {
        /// The transactional id, or null for an idempotent producer.
        transactional_id: Option<&'a str> [0],
        /// The transaction timeout, in milliseconds.
        transaction_timeout_ms: i32 [0],
        /// The producer id the client has, or -1 (v3+, KIP-360).
        producer_id: i64 [3] = -1,
        /// Its epoch, or -1 (v3+).
        producer_epoch: i16 [3] = -1,
    }
}

message! {
    /// InitProducerId response.
    pub struct InitProducerIdResponse {
        /// Throttle time.
        throttle_time_ms: i32 [0],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The producer id, or -1.
        producer_id: i64 [0],
        /// Its epoch, or -1.
        producer_epoch: i16 [0],
    }
}

message! {
    /// A topic's partitions added to a transaction.
    pub struct TxnTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions.
        partitions: Vec<i32> [0],
    }
}

message! {
    /// AddPartitionsToTxn request (v0–3: a client's, one transaction).
    pub struct AddPartitionsToTxnRequest<'a> {
        /// The transactional id.
        transactional_id: &'a str [0],
        /// Its producer id.
        producer_id: i64 [0],
        /// Its epoch.
        producer_epoch: i16 [0],
        /// The partitions to add.
        topics: Vec<TxnTopic<'a>> [0],
    }
}

message! {
    /// A partition's answer.
    pub struct TxnPartitionResult {
        /// The partition.
        partition_index: i32 [0],
        /// The error code, or 0.
        partition_error_code: i16 [0],
    }
}

message! {
    /// A topic's answers.
    pub struct TxnTopicResult<'a> {
        /// The topic.
        name: &'a str [0],
        /// Each partition's.
        results_by_partition: Vec<TxnPartitionResult> [0],
    }
}

message! {
    /// AddPartitionsToTxn response (v0–3).
    pub struct AddPartitionsToTxnResponse<'a> {
        /// Throttle time.
        throttle_time_ms: i32 [0],
        /// Each topic's answers.
        results_by_topic: Vec<TxnTopicResult<'a>> [0],
    }
}

message! {
    /// AddOffsetsToTxn request: the transaction will commit offsets of
    /// `group_id` (TxnOffsetCommit).
    pub struct AddOffsetsToTxnRequest<'a> {
        /// The transactional id.
        transactional_id: &'a str [0],
        /// Its producer id.
        producer_id: i64 [0],
        /// Its epoch.
        producer_epoch: i16 [0],
        /// The consumer group.
        group_id: &'a str [0],
    }
}

message! {
    /// The answer of AddOffsetsToTxn and of EndTxn (v0–3).
    pub struct TxnErrorResponse {
        /// Throttle time.
        throttle_time_ms: i32 [0],
        /// The error code, or 0.
        error_code: i16 [0],
    }
}

message! {
    /// EndTxn request: commit or abort the transaction.
    pub struct EndTxnRequest<'a> {
        /// The transactional id.
        transactional_id: &'a str [0],
        /// Its producer id.
        producer_id: i64 [0],
        /// Its epoch.
        producer_epoch: i16 [0],
        /// Commit (true) or abort.
        committed: bool [0],
    }
}

message! {
    /// A partition's offset committed in a transaction.
    pub struct TxnOffsetPartition<'a> {
        /// The partition.
        partition_index: i32 [0],
        /// The offset.
        committed_offset: i64 [0],
        /// The leader epoch of the record before it (v2+), or -1.
        committed_leader_epoch: i32 [2] = -1,
        /// The client's metadata.
        committed_metadata: Option<&'a str> [0],
    }
}

message! {
    /// A topic's offsets committed in a transaction.
    pub struct TxnOffsetTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions' offsets.
        partitions: Vec<TxnOffsetPartition<'a>> [0],
    }
}

message! {
    /// TxnOffsetCommit request: a consumer group's offsets, committed when
    /// the transaction is.
    pub struct TxnOffsetCommitRequest<'a> {
        /// The transactional id.
        transactional_id: &'a str [0],
        /// The consumer group.
        group_id: &'a str [0],
        /// The producer id.
        producer_id: i64 [0],
        /// Its epoch.
        producer_epoch: i16 [0],
        /// The member's generation (v3+), or -1.
        generation_id: i32 [3] = -1,
        /// The member id (v3+), or empty.
        member_id: &'a str [3],
        /// The static member id (v3+), or null.
        group_instance_id: Option<&'a str> [3],
        /// The offsets.
        topics: Vec<TxnOffsetTopic<'a>> [0],
    }
}

message! {
    /// TxnOffsetCommit response: each partition's error.
    pub struct TxnOffsetCommitResponse<'a> {
        /// Throttle time.
        throttle_time_ms: i32 [0],
        /// Each topic's answers.
        topics: Vec<TxnTopicResult<'a>> [0],
    }
}

messages! {
    InitProducerIdRequest<'a> = INIT_PRODUCER_ID, 2;
    InitProducerIdResponse = INIT_PRODUCER_ID, 2;
    AddPartitionsToTxnRequest<'a> = ADD_PARTITIONS_TO_TXN, 3;
    AddPartitionsToTxnResponse<'a> = ADD_PARTITIONS_TO_TXN, 3;
    AddOffsetsToTxnRequest<'a> = ADD_OFFSETS_TO_TXN, 3;
    // EndTxn's answer has AddOffsetsToTxn's fields, flexible from the same
    // version.
    TxnErrorResponse = ADD_OFFSETS_TO_TXN, 3;
    EndTxnRequest<'a> = END_TXN, 3;
    TxnOffsetCommitRequest<'a> = TXN_OFFSET_COMMIT, 3;
    TxnOffsetCommitResponse<'a> = TXN_OFFSET_COMMIT, 3;
}
