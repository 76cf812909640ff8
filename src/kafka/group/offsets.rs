//! OffsetCommit (8) v2–8 and OffsetFetch (9) v1–8, declared once from
//! their schemas (`message!`): a group's committed positions, by topic
//! and partition.
//!
//! What the versions add: OffsetCommit v3 throttling, v5 drops the
//! retention time, v6 the committed leader epoch, v7 static members'
//! instance ids, v8 the flexible form; OffsetFetch v2 a null topic list
//! (every topic) and a top-level error, v3 throttling, v5 the committed
//! leader epoch, v6 the flexible form, v7 `require_stable` (klog has no
//! transactions: every committed offset is stable), v8 several groups in
//! one request. Not served: OffsetCommit v9 and OffsetFetch v9 (the new
//! consumer protocol's member epochs, KIP-848).
//!
//! Kafka's schema renamed `generation_id` `generation_id_or_member_epoch`
//! in v9 (KIP-848); at these versions it is the generation.

use crate::kafka::api_key::{OFFSET_COMMIT, OFFSET_FETCH};
use crate::kafka::message::{message, messages};

message! {
    /// One partition's commit.
    pub struct OffsetCommitRequestPartition<'a> {
        /// The partition.
        partition_index: i32 [0],
        /// The offset committed (the next one to read).
        committed_offset: i64 [0],
        /// The leader epoch of the last record read (v6+; -1 before).
        committed_leader_epoch: i32 [6] = -1,
        /// Client metadata, opaque.
        committed_metadata: Option<&'a str> [0],
    }
}

message! {
    /// One topic's commits.
    pub struct OffsetCommitRequestTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions.
        partitions: Vec<OffsetCommitRequestPartition<'a>> [0],
    }
}

message! {
    /// OffsetCommit request: a member commits positions for its partitions.
    pub struct OffsetCommitRequest<'a> {
        /// The group id.
        group_id: &'a str [0],
        /// The generation the member is in (-1: a commit from outside the
        /// group).
        generation_id: i32 [1] = -1,
        /// The member id ("" from outside the group).
        member_id: &'a str [1],
        /// The static member id (v7+; null before).
        group_instance_id: Option<&'a str> [7],
        /// How long the offsets are kept (v2–4; -1: the broker's default).
        retention_time_ms: i64 [2, 4] = -1,
        /// The commits.
        topics: Vec<OffsetCommitRequestTopic<'a>> [0],
    }
}

message! {
    /// One partition's answer.
    pub struct OffsetCommitResponsePartition {
        /// The partition.
        partition_index: i32 [0],
        /// The error code, or 0.
        error_code: i16 [0],
    }
}

message! {
    /// One topic's answers.
    pub struct OffsetCommitResponseTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions.
        partitions: Vec<OffsetCommitResponsePartition> [0],
    }
}

message! {
    /// OffsetCommit response: each partition's error.
    pub struct OffsetCommitResponse<'a> {
        /// Throttle time (v3+).
        throttle_time_ms: i32 [3],
        /// The answers.
        topics: Vec<OffsetCommitResponseTopic<'a>> [0],
    }
}

message! {
    /// One topic asked about.
    pub struct OffsetFetchRequestTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions.
        partition_indexes: Vec<i32> [0],
    }
}

message! {
    /// One group asked about (v8+; its fields are on every version it
    /// is, so they count toward its fewest bytes).
    pub struct OffsetFetchRequestGroup<'a> {
        /// The group id.
        group_id: &'a str [0],
        /// The topics asked about; null asks for every topic the group
        /// committed.
        topics: Option<Vec<OffsetFetchRequestTopic<'a>>> [0] nullable 0,
    }
}

message! {
    /// OffsetFetch request: a group's committed offsets (v8+: several
    /// groups').
    pub struct OffsetFetchRequest<'a> {
        /// The group id (v1–7).
        group_id: &'a str [0, 7],
        /// The topics asked about (v1–7); null (v2+) asks for every topic
        /// the group committed.
        topics: Option<Vec<OffsetFetchRequestTopic<'a>>> [0, 7] nullable 2,
        /// The groups asked about (v8+).
        groups: Vec<OffsetFetchRequestGroup<'a>> [8],
        /// Wait for pending transactional commits (v7+).
        require_stable: bool [7],
    }
}

message! {
    /// One partition's committed offset.
    pub struct OffsetFetchResponsePartition<'a> {
        /// The partition.
        partition_index: i32 [0],
        /// The committed offset, -1 for none.
        committed_offset: i64 [0],
        /// Its leader epoch (v5+), -1 for none.
        committed_leader_epoch: i32 [5] = -1,
        /// Its metadata.
        metadata: Option<&'a str> [0],
        /// The error code, or 0.
        error_code: i16 [0],
    }
}

message! {
    /// One topic's committed offsets.
    pub struct OffsetFetchResponseTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions.
        partitions: Vec<OffsetFetchResponsePartition<'a>> [0],
    }
}

message! {
    /// One group's answer (v8+).
    pub struct OffsetFetchResponseGroup<'a> {
        /// The group id.
        group_id: &'a str [0],
        /// The topics.
        topics: Vec<OffsetFetchResponseTopic<'a>> [0],
        /// The group's error, or 0.
        error_code: i16 [0],
    }
}

message! {
    /// OffsetFetch response.
    pub struct OffsetFetchResponse<'a> {
        /// Throttle time (v3+).
        throttle_time_ms: i32 [3],
        /// The topics (v1–7).
        topics: Vec<OffsetFetchResponseTopic<'a>> [0, 7],
        /// The group's error (v2–7), or 0.
        error_code: i16 [2, 7],
        /// Each group's answer (v8+).
        groups: Vec<OffsetFetchResponseGroup<'a>> [8],
    }
}

messages! {
    OffsetCommitRequest<'a> = OFFSET_COMMIT, 8;
    OffsetCommitResponse<'a> = OFFSET_COMMIT, 8;
    OffsetFetchRequest<'a> = OFFSET_FETCH, 6;
    OffsetFetchResponse<'a> = OFFSET_FETCH, 6;
}
