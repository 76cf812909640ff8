//! FindCoordinator (10) v0–4 and Heartbeat (12) v0–4, declared once from
//! their schemas (`message!`), and LeaveGroup (13) v0–1: the small
//! messages around a group's membership. FindCoordinator v4 asks for
//! several keys at once and is answered with one coordinator each (its
//! single key's fields are gone); v3 and Heartbeat v4 are flexible.

use crate::kafka::api_key::{FIND_COORDINATOR, HEARTBEAT};
use crate::kafka::message::{message, messages};
use crate::kafka::wire::{put_i16, put_i32, DecodeError, Decoder};

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

messages! {
    FindCoordinatorRequest<'a> = FIND_COORDINATOR, 3;
    FindCoordinatorResponse<'a> = FIND_COORDINATOR, 3;
    HeartbeatRequest<'a> = HEARTBEAT, 4;
    HeartbeatResponse = HEARTBEAT, 4;
}

/// LeaveGroup request: `group_id string` · `member_id string` (v0–1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupRequest<'a> {
    /// The group to leave.
    pub group_id: &'a str,
    /// The member leaving it.
    pub member_id: &'a str,
}

impl<'a> LeaveGroupRequest<'a> {
    /// Decodes the body of `version` (0–1).
    pub fn decode(d: &mut Decoder<'a>, _version: i16) -> Result<Self, DecodeError> {
        let group_id = d.string("group_id")?;
        let member_id = d.string("member_id")?;
        Ok(LeaveGroupRequest {
            group_id,
            member_id,
        })
    }
}

/// LeaveGroup response: `throttle_time_ms int32` (v1+) · `error_code int16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    /// Throttle time (v1+).
    pub throttle_time_ms: i32,
    /// The error code, or 0.
    pub error_code: i16,
}

impl LeaveGroupResponse {
    /// Appends the body of `version` (0–1) to `out`.
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        if version >= 1 {
            put_i32(out, self.throttle_time_ms);
        }
        put_i16(out, self.error_code);
    }
}
