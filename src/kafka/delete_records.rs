//! DeleteRecords, as Kafka's admin clients send it (`delete_records`,
//! kafkajs's `deleteTopicRecords`), declared once (`message!`,
//! [`super::message`]) from its schema.
//!
//! | API | key | versions | flexible from |
//! |---|---:|---|---:|
//! | DeleteRecords | 21 | 0–2 | 2 |

use super::api_key::*;
use super::message::{message, messages};

message! {
    /// A partition whose records before an offset go.
    pub struct DeleteRecordsPartition {
        /// The partition.
        partition_index: i32 [0],
        /// The records before this offset go (-1: before the high
        /// watermark).
        offset: i64 [0],
    }
}

message! {
    /// A topic's partitions.
    pub struct DeleteRecordsTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions.
        partitions: Vec<DeleteRecordsPartition> [0],
    }
}

message! {
    /// DeleteRecords' request (`DeleteRecordsRequest.json`).
    pub struct DeleteRecordsRequest<'a> {
        /// The topics.
        topics: Vec<DeleteRecordsTopic<'a>> [0],
        /// How long to wait for the deletion, in milliseconds.
        timeout_ms: i32 [0],
    }
}

message! {
    /// One partition's answer.
    pub struct DeleteRecordsPartitionResult {
        /// The partition.
        partition_index: i32 [0],
        /// Its log start now, -1 on an error.
        low_watermark: i64 [0] = -1,
        /// The error code, or 0.
        error_code: i16 [0],
    }
}

message! {
    /// One topic's answers.
    pub struct DeleteRecordsTopicResult {
        /// The topic.
        name: String [0],
        /// Its partitions, in order.
        partitions: Vec<DeleteRecordsPartitionResult> [0],
    }
}

message! {
    /// DeleteRecords' response.
    pub struct DeleteRecordsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// Each topic asked for, in order.
        topics: Vec<DeleteRecordsTopicResult> [0],
    }
}

messages! {
    DeleteRecordsRequest<'a> = DELETE_RECORDS, 2;
    DeleteRecordsResponse = DELETE_RECORDS, 2;
}
