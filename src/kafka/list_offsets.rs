//! ListOffsets (2), declared once (`message!`, [`super::message`]) from
//! its schema, in every version Kafka 4 answers.
//!
//! | API | key | versions | flexible from |
//! |---|---:|---|---:|
//! | ListOffsets | 2 | 1–10 | 6 |
//!
//! A partition's `timestamp` asks for an offset: a time in milliseconds
//! (the first record at or after it, with its own timestamp), or one of
//! [`LATEST`] (-1: the end), [`EARLIEST`] (-2: the log's start),
//! [`MAX_TIMESTAMP`] (-3, v7+, KIP-734: the first record with the largest
//! timestamp, and that timestamp), [`EARLIEST_LOCAL`] (-4, v8+: the start
//! of what this broker holds, which is the log's start: klog keeps no
//! tiered storage) and [`LATEST_TIERED`] (-5, v9+: none here, so offset
//! and timestamp -1). v4 adds the client's leader epoch (checked as a
//! fetch's is) and the found offset's epoch; v2 the isolation level
//! (read_committed's latest offset is the last stable offset); v10 a timeout
//! for tiered storage (ignored). v0 (several offsets, no timestamps) is
//! gone from Kafka 4 and from klog.

use super::api_key::*;
use super::message::{message, messages};

/// The end of the log.
pub const LATEST: i64 = -1;
/// The start of the log.
pub const EARLIEST: i64 = -2;
/// The first record with the largest timestamp (v7+).
pub const MAX_TIMESTAMP: i64 = -3;
/// The start of the log held locally (v8+).
pub const EARLIEST_LOCAL: i64 = -4;
/// The end of the log in tiered storage (v9+).
pub const LATEST_TIERED: i64 = -5;

message! {
    /// A partition asked about.
    pub struct ListOffsetsPartition {
        /// The partition.
        partition_index: i32 [0],
        /// The leader epoch the client knows (v4+), -1 for none.
        current_leader_epoch: i32 [4] = -1,
        /// The time or the special value asked for.
        timestamp: i64 [0],
    }
}

message! {
    /// A topic asked about.
    pub struct ListOffsetsTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions.
        partitions: Vec<ListOffsetsPartition> [0],
    }
}

message! {
    /// ListOffsets' request (`ListOffsetsRequest.json`).
    pub struct ListOffsetsRequest<'a> {
        /// The asking broker, -1 for a consumer.
        replica_id: i32 [0],
        /// 0 read uncommitted, 1 read committed (v2+).
        isolation_level: i8 [2],
        /// The topics.
        topics: Vec<ListOffsetsTopic<'a>> [0],
        /// How long tiered storage may take (v10+).
        timeout_ms: i32 [10],
    }
}

message! {
    /// A partition's answer.
    pub struct ListOffsetsPartitionResponse {
        /// The partition.
        partition_index: i32 [0],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The found record's timestamp, -1 for none (or for the start
        /// and the end).
        timestamp: i64 [0] = -1,
        /// The offset found, -1 for none.
        offset: i64 [0] = -1,
        /// The leader epoch of that offset (v4+), -1 when unknown.
        leader_epoch: i32 [4] = -1,
    }
}

message! {
    /// A topic's answer.
    pub struct ListOffsetsTopicResponse<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions.
        partitions: Vec<ListOffsetsPartitionResponse> [0],
    }
}

message! {
    /// ListOffsets' response (`ListOffsetsResponse.json`).
    pub struct ListOffsetsResponse<'a> {
        /// How long the client was throttled, in milliseconds (v2+).
        throttle_time_ms: i32 [2],
        /// The topics.
        topics: Vec<ListOffsetsTopicResponse<'a>> [0],
    }
}

messages! {
    ListOffsetsRequest<'a> = LIST_OFFSETS, 6;
    ListOffsetsResponse<'a> = LIST_OFFSETS, 6;
}
