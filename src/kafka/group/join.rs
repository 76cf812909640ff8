//! JoinGroup (11) v0–9 and SyncGroup (14) v0–5, declared once from their
//! schemas (`message!`): a rebalance's two round trips. The protocol
//! metadata and assignments they carry are opaque bytes here;
//! [`crate::kafka::consumer`] reads the consumer protocol's.
//!
//! What the versions add: JoinGroup v1 the rebalance timeout, v2 throttling,
//! v4 `MEMBER_ID_REQUIRED` (KIP-394), v5 static members' instance ids, v6
//! the flexible form, v7 the protocol type in the answer (and a null
//! protocol name with an error), v8 a reason (ignored), v9 `skip_assignment`
//! (KIP-814: always false, klog has no static leaders); SyncGroup v3
//! instance ids, v4 the flexible form, v5 the protocol type and name both
//! ways.

use crate::kafka::api_key::{JOIN_GROUP, SYNC_GROUP};
use crate::kafka::message::{message, messages};

message! {
    /// One protocol a joining member supports.
    pub struct JoinGroupRequestProtocol<'a> {
        /// The protocol name ("range", "roundrobin", ...).
        name: &'a str [0],
        /// The protocol metadata (for "consumer": a consumer protocol
        /// subscription).
        metadata: &'a [u8] [0],
    }
}

message! {
    /// JoinGroup request: a member asks to join (or rejoin) a group,
    /// listing the protocols it can use.
    pub struct JoinGroupRequest<'a> {
        /// The group id.
        group_id: &'a str [0],
        /// The member is dead after this long without a heartbeat.
        session_timeout_ms: i32 [0],
        /// How long the coordinator waits for members to rejoin (v1+; -1
        /// at v0, Kafka's default: the session timeout stands in).
        rebalance_timeout_ms: i32 [1] = -1,
        /// The member id ("" on a first join).
        member_id: &'a str [0],
        /// The static member id (v5+; null before).
        group_instance_id: Option<&'a str> [5],
        /// The class of protocols ("consumer").
        protocol_type: &'a str [0],
        /// The protocols the member supports, in its order of preference.
        protocols: Vec<JoinGroupRequestProtocol<'a>> [0],
        /// Why it joins (v8+), for the broker's log.
        reason: Option<&'a str> [8],
    }
}

message! {
    /// One member listed to the leader.
    pub struct JoinGroupResponseMember<'a> {
        /// The member id.
        member_id: &'a str [0],
        /// Its static id (v5+).
        group_instance_id: Option<&'a str> [5],
        /// Its metadata for the chosen protocol.
        metadata: &'a [u8] [0],
    }
}

message! {
    /// JoinGroup response: the generation, the chosen protocol, the
    /// leader, and (for the leader only) every member's metadata.
    pub struct JoinGroupResponse<'a> {
        /// Throttle time (v2+).
        throttle_time_ms: i32 [2],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The generation of the group (-1 with an error).
        generation_id: i32 [0] = -1,
        /// The group's protocol type (v7+; null with an error).
        protocol_type: Option<&'a str> [7],
        /// The protocol the coordinator chose (null from v7 with an
        /// error; empty before).
        protocol_name: Option<&'a str> [0],
        /// The leader's member id.
        leader: &'a str [0],
        /// Whether the leader skips computing the assignment (v9+).
        skip_assignment: bool [9],
        /// This member's id.
        member_id: &'a str [0],
        /// Every member with its metadata (empty for all but the leader).
        members: Vec<JoinGroupResponseMember<'a>> [0],
    }
}

message! {
    /// One member's assignment, as the leader sends it.
    pub struct SyncGroupRequestAssignment<'a> {
        /// The member assigned.
        member_id: &'a str [0],
        /// Its assignment (for "consumer": a consumer protocol assignment).
        assignment: &'a [u8] [0],
    }
}

message! {
    /// SyncGroup request: every member asks for its assignment; the
    /// leader's carries everyone's.
    pub struct SyncGroupRequest<'a> {
        /// The group id.
        group_id: &'a str [0],
        /// The generation the member joined.
        generation_id: i32 [0],
        /// The member id.
        member_id: &'a str [0],
        /// The static member id (v3+; null before).
        group_instance_id: Option<&'a str> [3],
        /// The group's protocol type as the member knows it (v5+).
        protocol_type: Option<&'a str> [5],
        /// The group's protocol as the member knows it (v5+).
        protocol_name: Option<&'a str> [5],
        /// The leader's assignment of every member (empty from followers).
        assignments: Vec<SyncGroupRequestAssignment<'a>> [0],
    }
}

message! {
    /// SyncGroup response: this member's assignment.
    pub struct SyncGroupResponse<'a> {
        /// Throttle time (v1+).
        throttle_time_ms: i32 [1],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The group's protocol type (v5+).
        protocol_type: Option<&'a str> [5],
        /// The group's protocol (v5+).
        protocol_name: Option<&'a str> [5],
        /// This member's assignment.
        assignment: &'a [u8] [0],
    }
}

messages! {
    JoinGroupRequest<'a> = JOIN_GROUP, 6;
    JoinGroupResponse<'a> = JOIN_GROUP, 6;
    SyncGroupRequest<'a> = SYNC_GROUP, 4;
    SyncGroupResponse<'a> = SYNC_GROUP, 4;
}
