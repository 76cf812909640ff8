//! FindCoordinator (10) v0–2, Heartbeat (12) v0–3 and LeaveGroup (13)
//! v0–1: the small messages around a group's membership.

use crate::kafka::wire::{put_i16, put_i32, put_nullable_string, put_string, DecodeError, Decoder};

/// FindCoordinator request: which broker coordinates the group (or
/// transactional id) `key`.
///
/// | version | body |
/// |---|---|
/// | 0 | `key string` |
/// | 1–2 | `key string` · `key_type int8` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorRequest<'a> {
    /// The coordinator key: a group id, or a transactional id.
    pub key: &'a str,
    /// 0 = group, 1 = transaction (v1+; 0 at v0).
    pub key_type: i8,
}

impl<'a> FindCoordinatorRequest<'a> {
    /// Decodes the body of `version` (0–2).
    pub fn decode(d: &mut Decoder<'a>, version: i16) -> Result<Self, DecodeError> {
        let key = d.string("key")?;
        let key_type = if version >= 1 { d.i8("key_type")? } else { 0 };
        Ok(FindCoordinatorRequest { key, key_type })
    }
}

/// FindCoordinator response: the coordinator's node id, host and port.
///
/// | version | body |
/// |---|---|
/// | 0 | `error_code int16` · `node_id int32` · `host string` · `port int32` |
/// | 1–2 | `throttle_time_ms int32` · `error_code int16` · `error_message nullable string` · `node_id int32` · `host string` · `port int32` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCoordinatorResponse<'a> {
    /// Throttle time (v1+).
    pub throttle_time_ms: i32,
    /// The error code, or 0.
    pub error_code: i16,
    /// The error message, or null (v1+).
    pub error_message: Option<&'a str>,
    /// The coordinator's node id.
    pub node_id: i32,
    /// The coordinator's host name.
    pub host: &'a str,
    /// The coordinator's port.
    pub port: i32,
}

impl FindCoordinatorResponse<'_> {
    /// Appends the body of `version` (0–2) to `out`.
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        if version >= 1 {
            put_i32(out, self.throttle_time_ms);
        }
        put_i16(out, self.error_code);
        if version >= 1 {
            put_nullable_string(out, self.error_message);
        }
        put_i32(out, self.node_id);
        put_string(out, self.host);
        put_i32(out, self.port);
    }
}

/// Heartbeat request: a member says it is alive in `generation_id`.
///
/// | version | body |
/// |---|---|
/// | 0–2 | `group_id string` · `generation_id int32` · `member_id string` |
/// | 3 | the same · `group_instance_id nullable string` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest<'a> {
    /// The group id.
    pub group_id: &'a str,
    /// The generation the member believes it is in.
    pub generation_id: i32,
    /// The member id the coordinator gave.
    pub member_id: &'a str,
    /// The static member id (v3+; null before).
    pub group_instance_id: Option<&'a str>,
}

impl<'a> HeartbeatRequest<'a> {
    /// Decodes the body of `version` (0–3).
    pub fn decode(d: &mut Decoder<'a>, version: i16) -> Result<Self, DecodeError> {
        let group_id = d.string("group_id")?;
        let generation_id = d.i32("generation_id")?;
        let member_id = d.string("member_id")?;
        let group_instance_id = if version >= 3 {
            d.nullable_string("group_instance_id")?
        } else {
            None
        };
        Ok(HeartbeatRequest {
            group_id,
            generation_id,
            member_id,
            group_instance_id,
        })
    }
}

/// Heartbeat response (also the shape of LeaveGroup v0–1's):
/// `throttle_time_ms int32` (v1+) · `error_code int16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatResponse {
    /// Throttle time (v1+).
    pub throttle_time_ms: i32,
    /// The error code, or 0: 27 (rebalance in progress) asks the member
    /// to join again.
    pub error_code: i16,
}

impl HeartbeatResponse {
    /// Appends the body of `version` (0–3) to `out`.
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        if version >= 1 {
            put_i32(out, self.throttle_time_ms);
        }
        put_i16(out, self.error_code);
    }
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
