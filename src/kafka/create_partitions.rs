//! CreatePartitions, as Kafka's admin clients send it
//! (`create_partitions`, kafkajs's `createPartitions`), declared once
//! (`message!`, [`super::message`]) from its schema.
//!
//! | API | key | versions | flexible from |
//! |---|---:|---|---:|
//! | CreatePartitions | 37 | 0–3 | 2 |

use super::api_key::*;
use super::message::{message, messages};

message! {
    /// The replicas of one new partition.
    pub struct CreatePartitionsAssignment {
        /// Their brokers' node ids, the preferred leader first.
        broker_ids: Vec<i32> [0],
    }
}

message! {
    /// A topic to grow.
    pub struct CreatePartitionsTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partition count after.
        count: i32 [0],
        /// The new partitions' replicas, or null for the broker's choice.
        assignments: Option<Vec<CreatePartitionsAssignment>> [0],
    }
}

message! {
    /// CreatePartitions' request (`CreatePartitionsRequest.json`).
    pub struct CreatePartitionsRequest<'a> {
        /// The topics.
        topics: Vec<CreatePartitionsTopic<'a>> [0],
        /// How long to wait for the partitions, in milliseconds.
        timeout_ms: i32 [0],
        /// Check only, change nothing.
        validate_only: bool [0],
    }
}

message! {
    /// One topic's answer.
    pub struct CreatePartitionsTopicResult {
        /// The topic.
        name: String [0],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
    }
}

message! {
    /// CreatePartitions' response.
    pub struct CreatePartitionsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// Each topic asked for, in order.
        results: Vec<CreatePartitionsTopicResult> [0],
    }
}

messages! {
    CreatePartitionsRequest<'a> = CREATE_PARTITIONS, 2;
    CreatePartitionsResponse = CREATE_PARTITIONS, 2;
}
