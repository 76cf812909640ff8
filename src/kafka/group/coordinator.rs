//! FindCoordinator (10) v0–4, Heartbeat (12) v0–4 and LeaveGroup (13)
//! v0–5, declared once from their schemas (`message!`): the small
//! messages around a group's membership. FindCoordinator v4 asks for
//! several keys at once and is answered with one coordinator each (its
//! single key's fields are gone); LeaveGroup v3 lets several members go
//! at once, each answered on its own. FindCoordinator v3, Heartbeat v4
//! and LeaveGroup v4 are flexible.

use crate::kafka::api_key::{FIND_COORDINATOR, HEARTBEAT, LEAVE_GROUP};
use crate::kafka::message::{message, messages};

message! {
    /// FindCoordinator request: which broker coordinates the group (or
    /// transactional id) `key` (v0–3), or each of `coordinator_keys` (v4+).
    pub struct FindCoordinatorRequest<'a> {
        /// The coordinator key: a group id, or a transactional id (v0–3).
        key: &'a str [0, 3],
        /// 0 = group, 1 = transaction (v1+; 0 at v0).
        key_type: i8 [1],
        /// The keys (v4+).
        coordinator_keys: Vec<&'a str> [4],
    }
}

message! {
    /// One key's coordinator (FindCoordinator v4+).
    pub struct Coordinator<'a> {
        /// The key asked for.
        key: &'a str [0],
        /// The coordinator's node id, -1 for none.
        node_id: i32 [0],
        /// Its host.
        host: &'a str [0],
        /// Its port, -1 for none.
        port: i32 [0],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<&'a str> [0],
    }
}

message! {
    /// FindCoordinator response: the coordinator's node id, host and port
    /// (v0–3), or each key's (v4+).
    pub struct FindCoordinatorResponse<'a> {
        /// Throttle time (v1+).
        throttle_time_ms: i32 [1],
        /// The error code, or 0 (v0–3).
        error_code: i16 [0, 3],
        /// The error message, or null (v1–3).
        error_message: Option<&'a str> [1, 3],
        /// The coordinator's node id (v0–3).
        node_id: i32 [0, 3],
        /// The coordinator's host name (v0–3).
        host: &'a str [0, 3],
        /// The coordinator's port (v0–3).
        port: i32 [0, 3],
        /// Each key's coordinator (v4+).
        coordinators: Vec<Coordinator<'a>> [4],
    }
}

message! {
    /// Heartbeat request: a member says it is alive in `generation_id`.
    pub struct HeartbeatRequest<'a> {
        /// The group id.
        group_id: &'a str [0],
        /// The generation the member believes it is in.
        generation_id: i32 [0],
        /// The member id the coordinator gave.
        member_id: &'a str [0],
        /// The static member id (v3+; null before).
        group_instance_id: Option<&'a str> [3],
    }
}

message! {
    /// Heartbeat response.
    pub struct HeartbeatResponse {
        /// Throttle time (v1+).
        throttle_time_ms: i32 [1],
        /// The error code, or 0: 27 (rebalance in progress) asks the
        /// member to join again.
        error_code: i16 [0],
    }
}

message! {
    /// A member leaving (LeaveGroup v3+).
    pub struct MemberIdentity<'a> {
        /// Its member id.
        member_id: &'a str [0],
        /// Its static id, or null.
        group_instance_id: Option<&'a str> [0],
        /// Why it leaves (v5+), for the broker's log.
        reason: Option<&'a str> [5],
    }
}

message! {
    /// LeaveGroup request: a member (v0–2), or several (v3+), leave.
    pub struct LeaveGroupRequest<'a> {
        /// The group to leave.
        group_id: &'a str [0],
        /// The member leaving it (v0–2).
        member_id: &'a str [0, 2],
        /// The members leaving it (v3+).
        members: Vec<MemberIdentity<'a>> [3],
    }
}

message! {
    /// One member's answer (LeaveGroup v3+).
    pub struct MemberResponse<'a> {
        /// Its member id.
        member_id: &'a str [0],
        /// Its static id, or null.
        group_instance_id: Option<&'a str> [0],
        /// The error code, or 0.
        error_code: i16 [0],
    }
}

message! {
    /// LeaveGroup response.
    pub struct LeaveGroupResponse<'a> {
        /// Throttle time (v1+).
        throttle_time_ms: i32 [1],
        /// The error code, or 0 (v3+: each member's in `members`).
        error_code: i16 [0],
        /// Each member's answer (v3+).
        members: Vec<MemberResponse<'a>> [3],
    }
}

messages! {
    LeaveGroupRequest<'a> = LEAVE_GROUP, 4;
    LeaveGroupResponse<'a> = LEAVE_GROUP, 4;
    FindCoordinatorRequest<'a> = FIND_COORDINATOR, 3;
    FindCoordinatorResponse<'a> = FIND_COORDINATOR, 3;
    HeartbeatRequest<'a> = HEARTBEAT, 4;
    HeartbeatResponse = HEARTBEAT, 4;
}
