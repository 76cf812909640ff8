//! JoinGroup (11) v0–5 and SyncGroup (14) v0–3: a rebalance's two round
//! trips. The protocol metadata and assignments they carry are opaque
//! bytes here; [`crate::kafka::consumer`] reads the consumer protocol's.

use super::array;
use crate::kafka::wire::{
    put_array_len, put_bytes, put_i16, put_i32, put_nullable_string, put_string, DecodeError,
    Decoder,
};

/// Least bytes of a `(string, bytes)` array element: two empty lengths.
const NAME_BYTES_MIN: usize = 2 + 4;

/// JoinGroup request: a member asks to join (or rejoin) a group, listing
/// the protocols it can use.
///
/// | version | body |
/// |---|---|
/// | 0 | `group_id string` · `session_timeout_ms int32` · `member_id string` · `protocol_type string` · `protocols [name string · metadata bytes]` |
/// | 1–4 | after `session_timeout_ms`: `rebalance_timeout_ms int32` |
/// | 5 | after `member_id`: `group_instance_id nullable string` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupRequest<'a> {
    /// The group id.
    pub group_id: &'a str,
    /// The member is dead after this long without a heartbeat.
    pub session_timeout_ms: i32,
    /// How long the coordinator waits for members to rejoin (v1+; -1 at
    /// v0, Kafka's default: the session timeout stands in).
    pub rebalance_timeout_ms: i32,
    /// The member id ("" on a first join).
    pub member_id: &'a str,
    /// The static member id (v5+; null before).
    pub group_instance_id: Option<&'a str>,
    /// The class of protocols ("consumer").
    pub protocol_type: &'a str,
    /// The protocols the member supports, in its order of preference.
    pub protocols: Vec<JoinGroupRequestProtocol<'a>>,
}

/// One protocol a joining member supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupRequestProtocol<'a> {
    /// The protocol name ("range", "roundrobin", ...).
    pub name: &'a str,
    /// The protocol metadata (for "consumer": a consumer protocol
    /// subscription).
    pub metadata: &'a [u8],
}

impl<'a> JoinGroupRequest<'a> {
    /// Decodes the body of `version` (0–5).
    pub fn decode(d: &mut Decoder<'a>, version: i16) -> Result<Self, DecodeError> {
        let group_id = d.string("group_id")?;
        let session_timeout_ms = d.i32("session_timeout_ms")?;
        let rebalance_timeout_ms = if version >= 1 {
            d.i32("rebalance_timeout_ms")?
        } else {
            -1
        };
        let member_id = d.string("member_id")?;
        let group_instance_id = if version >= 5 {
            d.nullable_string("group_instance_id")?
        } else {
            None
        };
        let protocol_type = d.string("protocol_type")?;
        let protocols = array(d, NAME_BYTES_MIN, "protocols", |d| {
            Ok(JoinGroupRequestProtocol {
                name: d.string("protocols.name")?,
                metadata: d.bytes("protocols.metadata")?,
            })
        })?;
        Ok(JoinGroupRequest {
            group_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            member_id,
            group_instance_id,
            protocol_type,
            protocols,
        })
    }
}

/// JoinGroup response: the generation, the chosen protocol, the leader,
/// and (for the leader only) every member's metadata.
///
/// | version | body |
/// |---|---|
/// | 0–1 | `error_code int16` · `generation_id int32` · `protocol_name string` · `leader string` · `member_id string` · `members [member_id string · metadata bytes]` |
/// | 2–4 | `throttle_time_ms int32` first |
/// | 5 | members: `member_id string` · `group_instance_id nullable string` · `metadata bytes` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse<'a> {
    /// Throttle time (v2+).
    pub throttle_time_ms: i32,
    /// The error code, or 0.
    pub error_code: i16,
    /// The generation of the group (-1 with an error).
    pub generation_id: i32,
    /// The protocol the coordinator chose.
    pub protocol_name: &'a str,
    /// The leader's member id.
    pub leader: &'a str,
    /// This member's id.
    pub member_id: &'a str,
    /// Every member with its metadata (empty for all but the leader).
    pub members: Vec<JoinGroupResponseMember<'a>>,
}

/// One member listed to the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponseMember<'a> {
    /// The member id.
    pub member_id: &'a str,
    /// Its static id (v5+).
    pub group_instance_id: Option<&'a str>,
    /// Its metadata for the chosen protocol.
    pub metadata: &'a [u8],
}

impl JoinGroupResponse<'_> {
    /// Appends the body of `version` (0–5) to `out`.
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        if version >= 2 {
            put_i32(out, self.throttle_time_ms);
        }
        put_i16(out, self.error_code);
        put_i32(out, self.generation_id);
        put_string(out, self.protocol_name);
        put_string(out, self.leader);
        put_string(out, self.member_id);
        put_array_len(out, self.members.len());
        for member in &self.members {
            put_string(out, member.member_id);
            if version >= 5 {
                put_nullable_string(out, member.group_instance_id);
            }
            put_bytes(out, member.metadata);
        }
    }
}

/// SyncGroup request: every member asks for its assignment; the leader's
/// carries everyone's.
///
/// | version | body |
/// |---|---|
/// | 0–2 | `group_id string` · `generation_id int32` · `member_id string` · `assignments [member_id string · assignment bytes]` |
/// | 3 | after `member_id`: `group_instance_id nullable string` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequest<'a> {
    /// The group id.
    pub group_id: &'a str,
    /// The generation the member joined.
    pub generation_id: i32,
    /// The member id.
    pub member_id: &'a str,
    /// The static member id (v3+; null before).
    pub group_instance_id: Option<&'a str>,
    /// The leader's assignment of every member (empty from followers).
    pub assignments: Vec<SyncGroupRequestAssignment<'a>>,
}

/// One member's assignment, as the leader sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequestAssignment<'a> {
    /// The member assigned.
    pub member_id: &'a str,
    /// Its assignment (for "consumer": a consumer protocol assignment).
    pub assignment: &'a [u8],
}

impl<'a> SyncGroupRequest<'a> {
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
        let assignments = array(d, NAME_BYTES_MIN, "assignments", |d| {
            Ok(SyncGroupRequestAssignment {
                member_id: d.string("assignments.member_id")?,
                assignment: d.bytes("assignments.assignment")?,
            })
        })?;
        Ok(SyncGroupRequest {
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            assignments,
        })
    }
}

/// SyncGroup response: `throttle_time_ms int32` (v1+) · `error_code int16`
/// · `assignment bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse<'a> {
    /// Throttle time (v1+).
    pub throttle_time_ms: i32,
    /// The error code, or 0.
    pub error_code: i16,
    /// This member's assignment.
    pub assignment: &'a [u8],
}

impl SyncGroupResponse<'_> {
    /// Appends the body of `version` (0–3) to `out`.
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        if version >= 1 {
            put_i32(out, self.throttle_time_ms);
        }
        put_i16(out, self.error_code);
        put_bytes(out, self.assignment);
    }
}
