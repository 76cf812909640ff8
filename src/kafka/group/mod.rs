//! The group and offset APIs: requests decoded from a frame body and
//! responses encoded into one, at the versions klog's Kafka listener
//! serves, each declared once from its schema ([`crate::kafka::message`]).
//!
//! | API (key) | versions | request | response |
//! |---|---|---|---|
//! | FindCoordinator (10) | 0–4 | [`FindCoordinatorRequest`] | [`FindCoordinatorResponse`] |
//! | JoinGroup (11) | 0–9 | [`JoinGroupRequest`] | [`JoinGroupResponse`] |
//! | Heartbeat (12) | 0–4 | [`HeartbeatRequest`] | [`HeartbeatResponse`] |
//! | LeaveGroup (13) | 0–5 | [`LeaveGroupRequest`] | [`LeaveGroupResponse`] |
//! | SyncGroup (14) | 0–5 | [`SyncGroupRequest`] | [`SyncGroupResponse`] |
//! | OffsetCommit (8) | 2–8 | [`OffsetCommitRequest`] | [`OffsetCommitResponse`] |
//! | OffsetFetch (9) | 1–8 | [`OffsetFetchRequest`] | [`OffsetFetchResponse`] |
//!
//! Each struct's fields are the fields of Kafka's message schema
//! (`clients/src/main/resources/common/message/*.json`) present at some
//! version in that range, in snake_case; a field absent at the decoded
//! version holds the schema's default (-1 for a timeout, an epoch or a
//! retention, null for an instance id). A response's `encode` writes the
//! fields of the version asked and leaves out the others.
//!
//! Decoding borrows strings and bytes from the frame. Every array's count
//! is checked against the bytes left before its `Vec` is allocated (each
//! element needs at least its fixed-size fields), so a hostile count costs
//! an error, never memory. The bytes inside JoinGroup metadata and
//! SyncGroup assignments are the consumer protocol's, decoded apart by
//! [`crate::kafka::consumer`].

mod coordinator;
mod join;
mod offsets;

pub use coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest,
    HeartbeatResponse, LeaveGroupRequest, LeaveGroupResponse, MemberIdentity, MemberResponse,
};
pub use join::{
    JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse, JoinGroupResponseMember,
    SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse,
};
pub use offsets::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchResponse,
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};

use crate::kafka::wire::{DecodeError, Decoder};

/// Decodes an `int32`-counted array whose elements take at least
/// `element_bytes_min` bytes each: the count is refused before anything
/// is allocated when that many elements cannot fit in the bytes left.
pub(in crate::kafka) fn array<'a, T>(
    d: &mut Decoder<'a>,
    element_bytes_min: usize,
    what: &str,
    element: impl FnMut(&mut Decoder<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let count = d.array_len(element_bytes_min, what)?;
    elements(d, count, element)
}

fn elements<'a, T>(
    d: &mut Decoder<'a>,
    count: usize,
    mut element: impl FnMut(&mut Decoder<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(element(d)?);
    }
    Ok(out)
}
