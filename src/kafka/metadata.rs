//! Metadata (3), declared once (`message!`, [`super::message`]) from its
//! schema, in every version up to Kafka 4's.
//!
//! | API | key | versions | flexible from |
//! |---|---:|---|---:|
//! | Metadata | 3 | 0–12 | 9 |
//!
//! What the versions add, and what klog answers: v1 racks (none),
//! `is_internal` (false) and the controller (the broker asked); v2 the
//! cluster id (`klog`); v3 throttling (0); v4 `allow_auto_topic_creation`;
//! v5 offline replicas (none: a replica klog cannot reach is out of the
//! ISR instead); v7 each partition's leader epoch (the registry's, so
//! that a client validates its position after a failover with
//! OffsetForLeaderEpoch, KIP-320); v8 authorized operations, computed
//! from the ACLs when asked for; v9 the flexible encoding; v10 topic ids
//! (klog has none: the zero id; a topic asked for by id alone is
//! `UNKNOWN_TOPIC_ID`); v11 drops the cluster's authorized operations
//! (DescribeCluster has them); v12 lets a topic's name be null.
//!
//! In v0 an empty topic list asks for every topic; from v1 a null one
//! does (null is refused in v0, and a null topic name before v10).

use super::api_key::*;
use super::message::{message, messages};

/// A topic id (`uuid`): 16 bytes, all zero for none.
pub type Uuid = [u8; 16];

/// The authorized operations of a version that has them, not asked for
/// (the schema's default, `-2147483648`).
pub const OPERATIONS_NOT_ASKED: i32 = i32::MIN;

message! {
    /// A topic asked for.
    pub struct MetadataRequestTopic<'a> {
        /// Its id (v10+; zero when asked for by name).
        topic_id: Uuid [10],
        /// Its name (null from v10: asked for by id).
        name: Option<&'a str> [0] nullable 10,
    }
}

message! {
    /// Metadata's request (`MetadataRequest.json`).
    pub struct MetadataRequest<'a> {
        /// The topics asked for; null (v1+) asks for every topic, and so
        /// does an empty list in v0.
        topics: Option<Vec<MetadataRequestTopic<'a>>> [0] nullable 1,
        /// Whether a missing topic is created (v4+; before, it is).
        allow_auto_topic_creation: bool [4] = true,
        /// Whether the cluster's authorized operations are asked for (v8–10).
        include_cluster_authorized_operations: bool [8, 10],
        /// Whether each topic's authorized operations are asked for (v8+).
        include_topic_authorized_operations: bool [8],
    }
}

message! {
    /// A broker of the cluster.
    pub struct MetadataResponseBroker<'a> {
        /// Its id.
        node_id: i32 [0],
        /// Its host.
        host: &'a str [0],
        /// Its port.
        port: i32 [0],
        /// Its rack (v1+).
        rack: Option<&'a str> [1],
    }
}

message! {
    /// A partition of a topic.
    pub struct MetadataResponsePartition {
        /// The error code, or 0.
        error_code: i16 [0],
        /// The partition.
        partition_index: i32 [0],
        /// Its leader's broker id, -1 for none.
        leader_id: i32 [0],
        /// The leader's epoch (v7+), -1 when unknown.
        leader_epoch: i32 [7] = -1,
        /// The brokers holding a replica.
        replica_nodes: Vec<i32> [0],
        /// The in-sync replicas.
        isr_nodes: Vec<i32> [0],
        /// The replicas offline (v5+).
        offline_replicas: Vec<i32> [5],
    }
}

message! {
    /// A topic of the answer.
    pub struct MetadataResponseTopic<'a> {
        /// The error code, or 0.
        error_code: i16 [0],
        /// Its name (null from v12 for a topic asked for by an unknown id).
        name: Option<&'a str> [0],
        /// Its id (v10+; zero: klog has none).
        topic_id: Uuid [10],
        /// Whether it is internal (v1+).
        is_internal: bool [1],
        /// Its partitions.
        partitions: Vec<MetadataResponsePartition> [0],
        /// What the client may do to it (v8+): a bit per ACL operation.
        topic_authorized_operations: i32 [8] = OPERATIONS_NOT_ASKED,
    }
}

message! {
    /// Metadata's response (`MetadataResponse.json`).
    pub struct MetadataResponse<'a> {
        /// How long the client was throttled, in milliseconds (v3+).
        throttle_time_ms: i32 [3],
        /// Each broker of the cluster.
        brokers: Vec<MetadataResponseBroker<'a>> [0],
        /// The cluster's id (v2+).
        cluster_id: Option<&'a str> [2],
        /// The controller's broker id (v1+), -1 for none.
        controller_id: i32 [1] = -1,
        /// Each topic of the answer.
        topics: Vec<MetadataResponseTopic<'a>> [0],
        /// What the client may do to the cluster (v8–10).
        cluster_authorized_operations: i32 [8, 10] = OPERATIONS_NOT_ASKED,
    }
}

messages! {
    MetadataRequest<'a> = METADATA, 9;
    MetadataResponse<'a> = METADATA, 9;
}
