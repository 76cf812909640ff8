//! OffsetForLeaderEpoch (23), as Kafka's consumers send it to find where a
//! leader epoch they fetched in ends (KIP-320: a consumer whose position
//! lies past that end knows the log was truncated under it after a
//! failover), declared once (`message!`, [`super::message`]) from its
//! schema.
//!
//! | API | key | versions | flexible from |
//! |---|---:|---|---:|
//! | OffsetForLeaderEpoch | 23 | 0–4 | 4 |

use super::api_key::*;
use super::message::{message, messages};

message! {
    /// A partition asked about.
    pub struct OffsetForLeaderPartition {
        /// The partition.
        partition: i32 [0],
        /// The leader epoch the client knows (v2+), -1 for none.
        current_leader_epoch: i32 [2] = -1,
        /// The epoch whose end is asked for.
        leader_epoch: i32 [0],
    }
}

message! {
    /// A topic asked about.
    pub struct OffsetForLeaderTopic<'a> {
        /// The topic.
        topic: &'a str [0],
        /// Its partitions.
        partitions: Vec<OffsetForLeaderPartition> [0],
    }
}

message! {
    /// OffsetForLeaderEpoch's request (`OffsetForLeaderEpochRequest.json`).
    pub struct OffsetForLeaderEpochRequest<'a> {
        /// The asking broker (v3+): -1 for a consumer, -2 for the default.
        replica_id: i32 [3] = -2,
        /// The topics.
        topics: Vec<OffsetForLeaderTopic<'a>> [0],
    }
}

message! {
    /// Where an epoch ends in a partition.
    pub struct EpochEndOffset {
        /// The error code, or 0.
        error_code: i16 [0],
        /// The partition.
        partition: i32 [0],
        /// The largest epoch at or below the one asked (v1+), -1 for none.
        leader_epoch: i32 [1] = -1,
        /// Where it ends (the next epoch's first offset, or the log's
        /// end for the latest), -1 for none.
        end_offset: i64 [0] = -1,
    }
}

message! {
    /// A topic of the response.
    pub struct OffsetForLeaderTopicResult {
        /// The topic.
        topic: String [0],
        /// Its partitions.
        partitions: Vec<EpochEndOffset> [0],
    }
}

message! {
    /// OffsetForLeaderEpoch's response.
    pub struct OffsetForLeaderEpochResponse {
        /// Throttling (v2+), always 0.
        throttle_time_ms: i32 [2],
        /// Each topic asked about, in order.
        topics: Vec<OffsetForLeaderTopicResult> [0],
    }
}

messages! {
    OffsetForLeaderEpochRequest<'a> = OFFSET_FOR_LEADER_EPOCH, 4;
    OffsetForLeaderEpochResponse = OFFSET_FOR_LEADER_EPOCH, 4;
}
