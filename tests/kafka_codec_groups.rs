//! The group and offset APIs of klog's Kafka codec (`klog::kafka::group`)
//! and the embedded consumer protocol (`klog::kafka::consumer`), checked
//! against the `kafka-protocol` crate: for every API and version klog
//! serves, the crate encodes a request with a non-default value in every
//! field of that version and klog decodes the same values; klog encodes a
//! response and the crate decodes the same values; the consumer protocol
//! goes both ways. Then hostile bytes: mutations and truncations of those
//! frames never panic a decoder, and no decode allocates more than a small
//! multiple of its input, however large the counts it reads.
//!
//! The crate is only ever fed well-formed bytes: its decoders abort on
//! hostile counts, which is why klog's codec is its own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt::Debug;

use kafka_protocol::messages as kp;
use kafka_protocol::messages::{BrokerId, GroupId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use klog::kafka::api_key::*;
use klog::kafka::consumer::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicPartition,
};
use klog::kafka::group::*;
use klog::kafka::message::Message;
use klog::kafka::request::{decode_request, Request, RequestError};
use klog::kafka::response::supported;
use klog::kafka::wire::{DecodeError, Decoder};
use klog::random::XorShift;

// ---- counting what a decode allocates -------------------------------------

/// The system allocator, counting the bytes each thread asks for, so that
/// a test can bound what one decode allocates (tests run in parallel, each
/// on its own thread).
struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // try_with: a thread being torn down has no counter left; its
    // allocations are not a decode's.
    let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(bytes)));
}

// SAFETY: every call is passed unchanged to `System`, which upholds
// `GlobalAlloc`'s contract; the counter is a thread-local `Cell` of a
// `usize` (const-initialised, no destructor), so counting never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Runs `f`, returning its result and the bytes this thread allocated
/// meanwhile.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATED.with(Cell::get);
    let out = f();
    (out, ALLOCATED.with(Cell::get) - before)
}

// ---- helpers ----------------------------------------------------------------

fn s(text: &'static str) -> StrBytes {
    StrBytes::from_static_str(text)
}

fn sv(text: Option<&'static str>) -> Option<StrBytes> {
    text.map(s)
}

/// The crate's encoding of `message` at `version`.
fn crate_encode<M: Encodable>(message: &M, version: i16) -> Vec<u8> {
    let mut out = Vec::new();
    message
        .encode(&mut out, version)
        .expect("the crate encodes");
    out
}

/// The crate's decoding of `body` at `version`, which must use every byte.
fn crate_decode<M: Decodable>(body: &[u8], version: i16) -> M {
    let mut buf = body;
    let message = M::decode(&mut buf, version).expect("the crate decodes klog's bytes");
    assert!(
        buf.is_empty(),
        "v{version}: {} bytes left by the crate",
        buf.len()
    );
    message
}

/// klog's decoding of a whole body.
fn klog_decode<'a, T>(
    body: &'a [u8],
    decode: impl FnOnce(&mut Decoder<'a>) -> Result<T, DecodeError>,
) -> T {
    let mut d = Decoder::new(body);
    let out = decode(&mut d).expect("klog decodes the crate's bytes");
    d.finish("body").expect("klog reads every byte");
    out
}

/// Both shapes of each message: every field set (several elements), and
/// the other extreme (nulls, empty arrays, negative numbers).
const FULL: bool = true;
const SPARSE: bool = false;

fn at<T>(version: i16, from: i16, value: T, default: T) -> T {
    if version >= from {
        value
    } else {
        default
    }
}

// ---- FindCoordinator (10) v0–4 ---------------------------------------------

fn find_coordinator_request(v: i16, full: bool) -> (Vec<u8>, FindCoordinatorRequest<'static>) {
    let key = if full { "grüppe-1" } else { "" };
    let key_type = at(v, 1, if full { 1 } else { 0 }, 0);
    let keys: Vec<&'static str> = match (v >= 4, full) {
        (true, true) => vec!["grüppe-1", "g2"],
        _ => Vec::new(),
    };
    let mut theirs = kp::FindCoordinatorRequest::default().with_key_type(key_type);
    if v >= 4 {
        theirs = theirs.with_coordinator_keys(keys.iter().map(|k| s(k)).collect());
    } else {
        theirs = theirs.with_key(s(key));
    }
    let ours = FindCoordinatorRequest {
        key: if v >= 4 { "" } else { key },
        key_type,
        coordinator_keys: keys,
    };
    (crate_encode(&theirs, v), ours)
}

#[test]
fn find_coordinator_requests_decode_as_the_crate_encodes_them() {
    for v in 0..=4 {
        for full in [FULL, SPARSE] {
            let (body, want) = find_coordinator_request(v, full);
            let got = klog_decode(&body, |d| FindCoordinatorRequest::decode(d, v));
            assert_eq!(got, want, "v{v}");
        }
    }
}

#[test]
fn find_coordinator_responses_decode_in_the_crate_as_klog_encodes_them() {
    for v in 0..=4 {
        for (message, error) in [(Some("not yet"), 15), (None, 0)] {
            let coordinator = Coordinator {
                key: "grüppe-1",
                node_id: 3,
                host: "broker-ü.local",
                port: 19092,
                error_code: error,
                error_message: message,
            };
            let ours = FindCoordinatorResponse {
                throttle_time_ms: 17,
                error_code: error,
                error_message: message,
                node_id: 3,
                host: "broker-ü.local",
                port: 19092,
                coordinators: vec![coordinator],
            };
            let mut body = Vec::new();
            ours.encode(v, &mut body);
            let got: kp::FindCoordinatorResponse = crate_decode(&body, v);
            let absent = kp::FindCoordinatorResponse::default();
            let want = if v >= 4 {
                let c = kp::find_coordinator_response::Coordinator::default()
                    .with_key(s("grüppe-1"))
                    .with_node_id(BrokerId(3))
                    .with_host(s("broker-ü.local"))
                    .with_port(19092)
                    .with_error_code(error)
                    .with_error_message(sv(message));
                kp::FindCoordinatorResponse::default()
                    .with_throttle_time_ms(17)
                    .with_coordinators(vec![c])
            } else {
                kp::FindCoordinatorResponse::default()
                    .with_throttle_time_ms(at(v, 1, 17, 0))
                    .with_error_code(error)
                    // Absent at v0: the crate's default there.
                    .with_error_message(at(v, 1, sv(message), absent.error_message.clone()))
                    .with_node_id(BrokerId(3))
                    .with_host(s("broker-ü.local"))
                    .with_port(19092)
            };
            assert_eq!(got, want, "v{v}");
        }
    }
}

// ---- JoinGroup (11) v0–9 ---------------------------------------------------

fn join_group_request(v: i16, full: bool) -> (Vec<u8>, JoinGroupRequest<'static>) {
    let instance = at(v, 5, full.then_some("instance-7"), None);
    let protocols: &[(&'static str, &'static [u8])] = if full {
        &[("range", b"\x00\x01range-meta"), ("roundrobin", b"")]
    } else {
        &[]
    };
    let theirs = kp::JoinGroupRequest::default()
        .with_group_id(GroupId(s("g1")))
        .with_session_timeout_ms(if full { 45_000 } else { -5 })
        .with_rebalance_timeout_ms(at(v, 1, 300_001, -1))
        .with_member_id(s(if full { "member-1-abc" } else { "" }))
        .with_group_instance_id(sv(instance))
        .with_protocol_type(s("consumer"))
        .with_reason(at(v, 8, full.then(|| s("rebalance: new topic")), None))
        .with_protocols(
            protocols
                .iter()
                .map(|&(name, metadata)| {
                    kp::join_group_request::JoinGroupRequestProtocol::default()
                        .with_name(s(name))
                        .with_metadata(metadata.into())
                })
                .collect(),
        );
    let ours = JoinGroupRequest {
        group_id: "g1",
        session_timeout_ms: if full { 45_000 } else { -5 },
        rebalance_timeout_ms: at(v, 1, 300_001, -1),
        member_id: if full { "member-1-abc" } else { "" },
        group_instance_id: instance,
        protocol_type: "consumer",
        protocols: protocols
            .iter()
            .map(|&(name, metadata)| JoinGroupRequestProtocol { name, metadata })
            .collect(),
        reason: at(v, 8, full.then_some("rebalance: new topic"), None),
    };
    (crate_encode(&theirs, v), ours)
}

#[test]
fn join_group_requests_decode_as_the_crate_encodes_them() {
    for v in 0..=9 {
        for full in [FULL, SPARSE] {
            let (body, want) = join_group_request(v, full);
            let got = klog_decode(&body, |d| JoinGroupRequest::decode(d, v));
            assert_eq!(got, want, "v{v}");
        }
    }
}

#[test]
fn join_group_responses_decode_in_the_crate_as_klog_encodes_them() {
    for v in 0..=9 {
        for full in [FULL, SPARSE] {
            let members: &[(&str, Option<&'static str>, &'static [u8])] = if full {
                &[("m-1", Some("i-1"), b"\x00\x03abc"), ("m-2", None, b"")]
            } else {
                &[]
            };
            let ours = JoinGroupResponse {
                throttle_time_ms: 9,
                error_code: if full { 0 } else { 27 },
                generation_id: if full { 12 } else { -1 },
                protocol_type: at(v, 7, full.then_some("consumer"), None),
                protocol_name: match (full, v >= 7) {
                    (true, _) => Some("range"),
                    (false, true) => None,
                    (false, false) => Some(""),
                },
                leader: "m-1",
                skip_assignment: false,
                member_id: "m-2",
                members: members
                    .iter()
                    .map(
                        |&(member_id, group_instance_id, metadata)| JoinGroupResponseMember {
                            member_id,
                            group_instance_id,
                            metadata,
                        },
                    )
                    .collect(),
            };
            let mut body = Vec::new();
            ours.encode(v, &mut body);
            let got: kp::JoinGroupResponse = crate_decode(&body, v);
            let want = kp::JoinGroupResponse::default()
                .with_throttle_time_ms(at(v, 2, 9, 0))
                .with_error_code(ours.error_code)
                .with_generation_id(ours.generation_id)
                .with_protocol_type(ours.protocol_type.map(s))
                .with_protocol_name(ours.protocol_name.map(s))
                .with_leader(s("m-1"))
                .with_member_id(s("m-2"))
                .with_members(
                    members
                        .iter()
                        .map(|&(member_id, instance, metadata)| {
                            kp::join_group_response::JoinGroupResponseMember::default()
                                .with_member_id(s(member_id))
                                .with_group_instance_id(at(v, 5, sv(instance), None))
                                .with_metadata(metadata.into())
                        })
                        .collect(),
                );
            assert_eq!(got, want, "v{v}");
        }
    }
}

// ---- SyncGroup (14) v0–5 ---------------------------------------------------

fn sync_group_request(v: i16, full: bool) -> (Vec<u8>, SyncGroupRequest<'static>) {
    let instance = at(v, 3, full.then_some("instance-2"), None);
    let assignments: &[(&'static str, &'static [u8])] = if full {
        &[("m-1", b"\x00\x00\x00\x00\x00\x01"), ("m-2", b"")]
    } else {
        &[]
    };
    let theirs = kp::SyncGroupRequest::default()
        .with_group_id(GroupId(s("g-sync")))
        .with_generation_id(if full { 4 } else { -1 })
        .with_member_id(s("m-1"))
        .with_group_instance_id(sv(instance))
        .with_protocol_type(at(v, 5, full.then(|| s("consumer")), None))
        .with_protocol_name(at(v, 5, full.then(|| s("range")), None))
        .with_assignments(
            assignments
                .iter()
                .map(|&(member_id, assignment)| {
                    kp::sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(s(member_id))
                        .with_assignment(assignment.into())
                })
                .collect(),
        );
    let ours = SyncGroupRequest {
        group_id: "g-sync",
        generation_id: if full { 4 } else { -1 },
        member_id: "m-1",
        group_instance_id: instance,
        protocol_type: at(v, 5, full.then_some("consumer"), None),
        protocol_name: at(v, 5, full.then_some("range"), None),
        assignments: assignments
            .iter()
            .map(|&(member_id, assignment)| SyncGroupRequestAssignment {
                member_id,
                assignment,
            })
            .collect(),
    };
    (crate_encode(&theirs, v), ours)
}

#[test]
fn sync_group_requests_decode_as_the_crate_encodes_them() {
    for v in 0..=5 {
        for full in [FULL, SPARSE] {
            let (body, want) = sync_group_request(v, full);
            let got = klog_decode(&body, |d| SyncGroupRequest::decode(d, v));
            assert_eq!(got, want, "v{v}");
        }
    }
}

#[test]
fn sync_group_responses_decode_in_the_crate_as_klog_encodes_them() {
    for v in 0..=5 {
        for assignment in [&b"\x00\x01\x00\x00\x00\x00"[..], b""] {
            let ours = SyncGroupResponse {
                throttle_time_ms: 33,
                error_code: 22,
                protocol_type: at(v, 5, Some("consumer"), None),
                protocol_name: at(v, 5, Some("range"), None),
                assignment,
            };
            let mut body = Vec::new();
            ours.encode(v, &mut body);
            let got: kp::SyncGroupResponse = crate_decode(&body, v);
            let want = kp::SyncGroupResponse::default()
                .with_throttle_time_ms(at(v, 1, 33, 0))
                .with_error_code(22)
                .with_protocol_type(ours.protocol_type.map(s))
                .with_protocol_name(ours.protocol_name.map(s))
                .with_assignment(assignment.to_vec().into());
            assert_eq!(got, want, "v{v}");
        }
    }
}

// ---- Heartbeat (12) v0–4 and LeaveGroup (13) v0–5 --------------------------

fn heartbeat_request(v: i16, full: bool) -> (Vec<u8>, HeartbeatRequest<'static>) {
    let instance = at(v, 3, full.then_some("instance-3"), None);
    let theirs = kp::HeartbeatRequest::default()
        .with_group_id(GroupId(s("g-hb")))
        .with_generation_id(if full { 77 } else { -1 })
        .with_member_id(s("m-9"))
        .with_group_instance_id(sv(instance));
    let ours = HeartbeatRequest {
        group_id: "g-hb",
        generation_id: if full { 77 } else { -1 },
        member_id: "m-9",
        group_instance_id: instance,
    };
    (crate_encode(&theirs, v), ours)
}

fn leave_group_request(v: i16, full: bool) -> (Vec<u8>, LeaveGroupRequest<'static>) {
    let member = if full { "member-leaving" } else { "" };
    let mut theirs = kp::LeaveGroupRequest::default().with_group_id(GroupId(s("g-leave")));
    let mut ours = LeaveGroupRequest {
        group_id: "g-leave",
        member_id: "",
        members: Vec::new(),
    };
    if v >= 3 {
        let reason = at(v, 5, full.then_some("shutting down"), None);
        theirs = theirs.with_members(vec![kp::leave_group_request::MemberIdentity::default()
            .with_member_id(s(member))
            .with_group_instance_id(full.then(|| s("instance-3")))
            .with_reason(reason.map(s))]);
        ours.members = vec![MemberIdentity {
            member_id: member,
            group_instance_id: full.then_some("instance-3"),
            reason,
        }];
    } else {
        theirs = theirs.with_member_id(s(member));
        ours.member_id = member;
    }
    (crate_encode(&theirs, v), ours)
}

#[test]
fn heartbeat_and_leave_group_requests_decode_as_the_crate_encodes_them() {
    for full in [FULL, SPARSE] {
        for v in 0..=4 {
            let (body, want) = heartbeat_request(v, full);
            let got = klog_decode(&body, |d| HeartbeatRequest::decode(d, v));
            assert_eq!(got, want, "heartbeat v{v}");
        }
        for v in 0..=5 {
            let (body, want) = leave_group_request(v, full);
            let got = klog_decode(&body, |d| LeaveGroupRequest::decode(d, v));
            assert_eq!(got, want, "leave v{v}");
        }
    }
}

#[test]
fn heartbeat_and_leave_group_responses_decode_in_the_crate_as_klog_encodes_them() {
    for v in 0..=4 {
        let mut body = Vec::new();
        let ours = HeartbeatResponse {
            throttle_time_ms: 5,
            error_code: 27,
        };
        ours.encode(v, &mut body);
        let got: kp::HeartbeatResponse = crate_decode(&body, v);
        let want = kp::HeartbeatResponse::default()
            .with_throttle_time_ms(at(v, 1, 5, 0))
            .with_error_code(27);
        assert_eq!(got, want, "heartbeat v{v}");
    }
    for v in 0..=5 {
        let mut body = Vec::new();
        let ours = LeaveGroupResponse {
            throttle_time_ms: 6,
            error_code: 25,
            members: vec![MemberResponse {
                member_id: "m-9",
                group_instance_id: None,
                error_code: 25,
            }],
        };
        ours.encode(v, &mut body);
        let got: kp::LeaveGroupResponse = crate_decode(&body, v);
        let mut want = kp::LeaveGroupResponse::default()
            .with_throttle_time_ms(at(v, 1, 6, 0))
            .with_error_code(25);
        if v >= 3 {
            want = want.with_members(vec![kp::leave_group_response::MemberResponse::default()
                .with_member_id(s("m-9"))
                .with_group_instance_id(None)
                .with_error_code(25)]);
        }
        assert_eq!(got, want, "leave v{v}");
    }
}

// ---- OffsetCommit (8) v2–8 -------------------------------------------------

type CommitRow = (i32, i64, i32, Option<&'static str>);

fn offset_commit_request(v: i16, full: bool) -> (Vec<u8>, OffsetCommitRequest<'static>) {
    let instance = at(v, 7, full.then_some("instance-c"), None);
    let topics: &[(&'static str, &[CommitRow])] = if full {
        &[
            (
                "t1",
                &[(0, 1_000_000_000_007, 5, Some("meta-ü")), (3, 0, -1, None)],
            ),
            ("t2", &[]),
        ]
    } else {
        &[]
    };
    let retention = at(v, 2, if v <= 4 { 86_400_000 } else { -1 }, -1);
    let theirs = kp::OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g-commit")))
        .with_generation_id_or_member_epoch(if full { 8 } else { -1 })
        .with_member_id(s(if full { "m-commit" } else { "" }))
        .with_group_instance_id(sv(instance))
        .with_retention_time_ms(retention)
        .with_topics(
            topics
                .iter()
                .map(|&(name, rows)| {
                    kp::offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s(name)))
                        .with_partitions(
                            rows.iter()
                                .map(|&(p, o, e, m)| {
                                    kp::offset_commit_request::OffsetCommitRequestPartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(o)
                                        .with_committed_leader_epoch(at(v, 6, e, -1))
                                        .with_committed_metadata(sv(m))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let ours = OffsetCommitRequest {
        group_id: "g-commit",
        generation_id: if full { 8 } else { -1 },
        member_id: if full { "m-commit" } else { "" },
        group_instance_id: instance,
        retention_time_ms: retention,
        topics: topics
            .iter()
            .map(|&(name, rows)| OffsetCommitRequestTopic {
                name,
                partitions: rows
                    .iter()
                    .map(|&(p, o, e, m)| OffsetCommitRequestPartition {
                        partition_index: p,
                        committed_offset: o,
                        committed_leader_epoch: at(v, 6, e, -1),
                        committed_metadata: m,
                    })
                    .collect(),
            })
            .collect(),
    };
    (crate_encode(&theirs, v), ours)
}

#[test]
fn offset_commit_requests_decode_as_the_crate_encodes_them() {
    for v in 2..=8 {
        for full in [FULL, SPARSE] {
            let (body, want) = offset_commit_request(v, full);
            let got = klog_decode(&body, |d| OffsetCommitRequest::decode(d, v));
            assert_eq!(got, want, "v{v}");
        }
    }
}

#[test]
fn offset_commit_responses_decode_in_the_crate_as_klog_encodes_them() {
    for v in 2..=8 {
        let ours = OffsetCommitResponse {
            throttle_time_ms: 44,
            topics: vec![
                OffsetCommitResponseTopic {
                    name: "t1",
                    partitions: vec![
                        OffsetCommitResponsePartition {
                            partition_index: 0,
                            error_code: 0,
                        },
                        OffsetCommitResponsePartition {
                            partition_index: 2,
                            error_code: 22,
                        },
                    ],
                },
                OffsetCommitResponseTopic {
                    name: "t2",
                    partitions: vec![],
                },
            ],
        };
        let mut body = Vec::new();
        ours.encode(v, &mut body);
        let got: kp::OffsetCommitResponse = crate_decode(&body, v);
        use kp::offset_commit_response::{
            OffsetCommitResponsePartition as P, OffsetCommitResponseTopic as T,
        };
        let want = kp::OffsetCommitResponse::default()
            .with_throttle_time_ms(at(v, 3, 44, 0))
            .with_topics(vec![
                T::default()
                    .with_name(TopicName(s("t1")))
                    .with_partitions(vec![
                        P::default().with_partition_index(0).with_error_code(0),
                        P::default().with_partition_index(2).with_error_code(22),
                    ]),
                T::default().with_name(TopicName(s("t2"))),
            ]);
        assert_eq!(got, want, "v{v}");
    }
}

// ---- OffsetFetch (9) v1–8 --------------------------------------------------

fn offset_fetch_request(v: i16, full: bool) -> (Vec<u8>, OffsetFetchRequest<'static>) {
    // Null topics (all partitions) exist from v2; v1's sparse case is an
    // empty array.
    let topics: Option<&[(&'static str, &[i32])]> = match (full, v) {
        (true, _) => Some(&[("t1", &[0, 5, 2_000_000_000]), ("t-empty", &[])]),
        (false, 1) => Some(&[]),
        (false, _) => None,
    };
    let theirs_topics = |topics: Option<&[(&'static str, &[i32])]>| {
        topics.map(|topics| {
            topics
                .iter()
                .map(|&(name, partitions)| {
                    kp::offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s(name)))
                        .with_partition_indexes(partitions.to_vec())
                })
                .collect()
        })
    };
    let ours_topics = |topics: Option<&[(&'static str, &[i32])]>| {
        topics.map(|topics| {
            topics
                .iter()
                .map(|&(name, partitions)| OffsetFetchRequestTopic {
                    name,
                    partition_indexes: partitions.to_vec(),
                })
                .collect::<Vec<_>>()
        })
    };
    let mut theirs = kp::OffsetFetchRequest::default().with_require_stable(v >= 7 && full);
    let mut ours = OffsetFetchRequest {
        group_id: "",
        topics: None,
        groups: Vec::new(),
        require_stable: v >= 7 && full,
    };
    if v < 8 {
        theirs = theirs
            .with_group_id(GroupId(s("g-fetch")))
            .with_topics(theirs_topics(topics));
        ours.group_id = "g-fetch";
        ours.topics = ours_topics(topics);
    } else {
        // Several groups: the topics asked, and every topic (null).
        use kp::offset_fetch_request::OffsetFetchRequestGroup as G;
        theirs = theirs.with_groups(vec![
            G::default()
                .with_group_id(GroupId(s("g-fetch")))
                .with_topics(topics.map(|topics| {
                    topics
                        .iter()
                        .map(|&(name, partitions)| {
                            kp::offset_fetch_request::OffsetFetchRequestTopics::default()
                                .with_name(TopicName(s(name)))
                                .with_partition_indexes(partitions.to_vec())
                        })
                        .collect()
                })),
            G::default()
                .with_group_id(GroupId(s("g-all")))
                .with_topics(None),
        ]);
        ours.groups = vec![
            OffsetFetchRequestGroup {
                group_id: "g-fetch",
                topics: ours_topics(topics),
            },
            OffsetFetchRequestGroup {
                group_id: "g-all",
                topics: None,
            },
        ];
    }
    (crate_encode(&theirs, v), ours)
}

#[test]
fn offset_fetch_requests_decode_as_the_crate_encodes_them() {
    for v in 1..=8 {
        for full in [FULL, SPARSE] {
            let (body, want) = offset_fetch_request(v, full);
            let got = klog_decode(&body, |d| OffsetFetchRequest::decode(d, v));
            assert_eq!(got, want, "v{v}");
        }
    }
}

#[test]
fn a_null_topic_list_is_refused_at_offset_fetch_v1_only() {
    // group_id "g" · topics null
    let body = [0, 1, b'g', 0xff, 0xff, 0xff, 0xff];
    let mut d = Decoder::new(&body);
    let error = OffsetFetchRequest::decode(&mut d, 1).unwrap_err();
    assert!(error.0.contains("topics"), "{error}");
    let mut d = Decoder::new(&body);
    assert_eq!(OffsetFetchRequest::decode(&mut d, 2).unwrap().topics, None);
}

fn offset_fetch_topics() -> Vec<OffsetFetchResponseTopic<'static>> {
    vec![
        OffsetFetchResponseTopic {
            name: "t1",
            partitions: vec![
                OffsetFetchResponsePartition {
                    partition_index: 1,
                    committed_offset: 4_000_000_000_001,
                    committed_leader_epoch: 9,
                    metadata: Some("m-ü"),
                    error_code: 0,
                },
                OffsetFetchResponsePartition {
                    partition_index: 2,
                    committed_offset: -1,
                    committed_leader_epoch: -1,
                    metadata: None,
                    error_code: 3,
                },
            ],
        },
        OffsetFetchResponseTopic {
            name: "t2",
            partitions: vec![],
        },
    ]
}

/// The crate's form of [`offset_fetch_topics`] in version `v`.
fn offset_fetch_topics_theirs(v: i16) -> Vec<kp::offset_fetch_response::OffsetFetchResponseTopic> {
    use kp::offset_fetch_response::{
        OffsetFetchResponsePartition as P, OffsetFetchResponseTopic as T,
    };
    vec![
        T::default()
            .with_name(TopicName(s("t1")))
            .with_partitions(vec![
                P::default()
                    .with_partition_index(1)
                    .with_committed_offset(4_000_000_000_001)
                    .with_committed_leader_epoch(at(v, 5, 9, -1))
                    .with_metadata(Some(s("m-ü")))
                    .with_error_code(0),
                P::default()
                    .with_partition_index(2)
                    .with_committed_offset(-1)
                    .with_committed_leader_epoch(-1)
                    .with_metadata(None)
                    .with_error_code(3),
            ]),
        T::default().with_name(TopicName(s("t2"))),
    ]
}

#[test]
fn offset_fetch_responses_decode_in_the_crate_as_klog_encodes_them() {
    for v in 1..=7 {
        let ours = OffsetFetchResponse {
            throttle_time_ms: 55,
            topics: offset_fetch_topics(),
            error_code: 16,
            groups: Vec::new(),
        };
        let mut body = Vec::new();
        ours.encode(v, &mut body);
        let got: kp::OffsetFetchResponse = crate_decode(&body, v);
        let want = kp::OffsetFetchResponse::default()
            .with_throttle_time_ms(at(v, 3, 55, 0))
            .with_error_code(at(v, 2, 16, 0))
            .with_topics(offset_fetch_topics_theirs(v));
        assert_eq!(got, want, "v{v}");
    }
}

/// v8 answers each group: its topics and its own error.
#[test]
fn offset_fetch_v8_responses_answer_each_group_in_the_crate() {
    let ours = OffsetFetchResponse {
        throttle_time_ms: 55,
        topics: Vec::new(),
        error_code: 0,
        groups: vec![
            OffsetFetchResponseGroup {
                group_id: "g-fetch",
                topics: offset_fetch_topics(),
                error_code: 0,
            },
            OffsetFetchResponseGroup {
                group_id: "g-refused",
                topics: Vec::new(),
                error_code: 30,
            },
        ],
    };
    let mut body = Vec::new();
    ours.encode(8, &mut body);
    let got: kp::OffsetFetchResponse = crate_decode(&body, 8);
    use kp::offset_fetch_response::OffsetFetchResponseGroup as G;
    let want = kp::OffsetFetchResponse::default()
        .with_throttle_time_ms(55)
        .with_groups(vec![
            G::default()
                .with_group_id(GroupId(s("g-fetch")))
                .with_topics(
                    offset_fetch_topics_theirs(8)
                        .into_iter()
                        .map(|t| {
                            use kp::offset_fetch_response::{
                                OffsetFetchResponsePartitions as P, OffsetFetchResponseTopics as T,
                            };
                            T::default().with_name(t.name).with_partitions(
                                t.partitions
                                    .into_iter()
                                    .map(|p| {
                                        P::default()
                                            .with_partition_index(p.partition_index)
                                            .with_committed_offset(p.committed_offset)
                                            .with_committed_leader_epoch(p.committed_leader_epoch)
                                            .with_metadata(p.metadata)
                                            .with_error_code(p.error_code)
                                    })
                                    .collect(),
                            )
                        })
                        .collect(),
                ),
            G::default()
                .with_group_id(GroupId(s("g-refused")))
                .with_error_code(30),
        ]);
    assert_eq!(got, want);
}

// ---- the consumer protocol, both ways ----------------------------------------

type Owned = &'static [(&'static str, &'static [i32])];

fn subscription_pair(
    v: i16,
    full: bool,
) -> (
    kp::ConsumerProtocolSubscription,
    ConsumerProtocolSubscription<'static>,
) {
    let topics: &[&'static str] = if full { &["t1", "tópico-2"] } else { &[] };
    let user_data: Option<&'static [u8]> = if full { Some(b"\x00\x01user") } else { None };
    let owned: Owned = if full {
        &[("t1", &[0, 3]), ("t9", &[])]
    } else {
        &[]
    };
    let owned = at(v, 1, owned, &[]);
    let generation_id = at(v, 2, if full { 42 } else { -7 }, -1);
    let rack_id = at(v, 3, full.then_some("rack-a"), None);
    let theirs = kp::ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|&t| s(t)).collect())
        .with_user_data(user_data.map(|u| u.into()))
        .with_owned_partitions(
            owned
                .iter()
                .map(|&(topic, partitions)| {
                    kp::consumer_protocol_subscription::TopicPartition::default()
                        .with_topic(TopicName(s(topic)))
                        .with_partitions(partitions.to_vec())
                })
                .collect(),
        )
        .with_generation_id(generation_id)
        .with_rack_id(sv(rack_id));
    let ours = ConsumerProtocolSubscription {
        version: v,
        topics: topics.to_vec(),
        user_data,
        owned_partitions: topic_partitions(owned),
        generation_id,
        rack_id,
    };
    (theirs, ours)
}

fn assignment_pair(
    v: i16,
    full: bool,
) -> (
    kp::ConsumerProtocolAssignment,
    ConsumerProtocolAssignment<'static>,
) {
    let assigned: Owned = if full {
        &[("t1", &[1, 2, 3]), ("t2", &[])]
    } else {
        &[]
    };
    let user_data: Option<&'static [u8]> = if full { Some(b"ud") } else { None };
    let theirs = kp::ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            assigned
                .iter()
                .map(|&(topic, partitions)| {
                    kp::consumer_protocol_assignment::TopicPartition::default()
                        .with_topic(TopicName(s(topic)))
                        .with_partitions(partitions.to_vec())
                })
                .collect(),
        )
        .with_user_data(user_data.map(|u| u.into()));
    let ours = ConsumerProtocolAssignment {
        version: v,
        assigned_partitions: topic_partitions(assigned),
        user_data,
    };
    (theirs, ours)
}

fn topic_partitions(rows: Owned) -> Vec<TopicPartition<'static>> {
    rows.iter()
        .map(|&(topic, partitions)| TopicPartition {
            topic,
            partitions: partitions.to_vec(),
        })
        .collect()
}

/// Kafka's `ConsumerProtocol` writes the version, then the message.
fn with_version<M: Encodable>(v: i16, message: &M) -> Vec<u8> {
    with_version_as(v, v, message)
}

/// The message encoded at `encoded`, said to be of version `said`.
fn with_version_as<M: Encodable>(said: i16, encoded: i16, message: &M) -> Vec<u8> {
    let mut out = said.to_be_bytes().to_vec();
    out.extend(crate_encode(message, encoded));
    out
}

#[test]
fn consumer_protocol_subscriptions_match_the_crate_both_ways() {
    for v in 0..=3 {
        for full in [FULL, SPARSE] {
            let (theirs, ours) = subscription_pair(v, full);
            let bytes = with_version(v, &theirs);
            assert_eq!(
                ConsumerProtocolSubscription::decode(&bytes).unwrap(),
                ours,
                "v{v}"
            );
            let mut encoded = Vec::new();
            ours.encode(&mut encoded);
            assert_eq!(encoded[..2], v.to_be_bytes(), "v{v}");
            let got: kp::ConsumerProtocolSubscription = crate_decode(&encoded[2..], v);
            assert_eq!(got, theirs, "v{v}");
        }
    }
}

#[test]
fn consumer_protocol_assignments_match_the_crate_both_ways() {
    for v in 0..=3 {
        for full in [FULL, SPARSE] {
            let (theirs, ours) = assignment_pair(v, full);
            let bytes = with_version(v, &theirs);
            assert_eq!(
                ConsumerProtocolAssignment::decode(&bytes).unwrap(),
                ours,
                "v{v}"
            );
            let mut encoded = Vec::new();
            ours.encode(&mut encoded);
            assert_eq!(encoded[..2], v.to_be_bytes(), "v{v}");
            let got: kp::ConsumerProtocolAssignment = crate_decode(&encoded[2..], v);
            assert_eq!(got, theirs, "v{v}");
        }
    }
}

#[test]
fn a_newer_consumer_protocol_version_is_read_as_3_and_its_extra_bytes_ignored() {
    let (theirs, mut ours) = subscription_pair(3, FULL);
    let mut bytes = with_version_as(5, 3, &theirs);
    bytes.extend_from_slice(b"\x00\x00\x00\x07 fields of v5");
    ours.version = 5;
    assert_eq!(ConsumerProtocolSubscription::decode(&bytes).unwrap(), ours);
    // Encoded back, it says version 3: what klog can write.
    let mut encoded = Vec::new();
    ours.encode(&mut encoded);
    assert_eq!(encoded[..2], 3i16.to_be_bytes());

    let (theirs, mut ours) = assignment_pair(3, FULL);
    let mut bytes = with_version_as(4, 3, &theirs);
    bytes.extend_from_slice(b"trailing");
    ours.version = 4;
    assert_eq!(ConsumerProtocolAssignment::decode(&bytes).unwrap(), ours);
}

#[test]
fn a_negative_consumer_protocol_version_is_an_error() {
    let (theirs, _) = assignment_pair(0, FULL);
    let mut bytes = with_version(0, &theirs);
    bytes[..2].copy_from_slice(&(-1i16).to_be_bytes());
    let error = ConsumerProtocolAssignment::decode(&bytes).unwrap_err();
    assert!(error.0.contains("version"), "{error}");
    let error = ConsumerProtocolSubscription::decode(&bytes).unwrap_err();
    assert!(error.0.contains("version"), "{error}");
}

// ---- through decode_request: the table and the dispatch ------------------------

/// A request frame (without its length): the crate's header v1, then `body`.
fn frame(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let header = kp::RequestHeader::default()
        .with_request_api_key(api_key)
        .with_request_api_version(version)
        .with_correlation_id(0x5eed_0000 + i32::from(version))
        .with_client_id(Some(s("groups-differential")));
    // A flexible version's header is v2 (v1 and tagged fields).
    let flexible = klog::kafka::header::is_flexible(api_key, version);
    let mut out = crate_encode(&header, if flexible { 2 } else { 1 });
    out.extend_from_slice(body);
    out
}

/// The request `decode_request` makes of `frame`, its header checked.
fn dispatched(frame: &[u8], api_key: i16, version: i16) -> Request<'_> {
    let (header, request) =
        decode_request(frame).unwrap_or_else(|e| panic!("api {api_key} v{version}: refused: {e}"));
    assert_eq!(
        (
            header.api_key,
            header.api_version,
            header.correlation_id,
            header.client_id
        ),
        (
            api_key,
            version,
            0x5eed_0000 + i32::from(version),
            Some("groups-differential")
        )
    );
    request
}

#[test]
fn the_table_advertises_exactly_the_group_versions_implemented() {
    let table = [
        (OFFSET_COMMIT, 2, 8),
        (OFFSET_FETCH, 1, 8),
        (FIND_COORDINATOR, 0, 4),
        (JOIN_GROUP, 0, 9),
        (HEARTBEAT, 0, 4),
        (LEAVE_GROUP, 0, 5),
        (SYNC_GROUP, 0, 5),
    ];
    for (api_key, min, max) in table {
        assert_eq!(supported(api_key), Some((min, max)), "api {api_key}");
        // Just outside the range: unsupported, the header still read.
        for version in [min - 1, max + 1] {
            let bytes = frame(api_key, version, b"");
            assert!(
                matches!(
                    decode_request(&bytes),
                    Err(RequestError::Unsupported { api_key: k, api_version: v, .. })
                        if k == api_key && v == version
                ),
                "api {api_key} v{version}"
            );
        }
    }
}

#[test]
fn decode_request_dispatches_every_group_api_and_version() {
    for full in [FULL, SPARSE] {
        for v in 0..=4 {
            let (body, want) = find_coordinator_request(v, full);
            let bytes = frame(FIND_COORDINATOR, v, &body);
            assert_eq!(
                dispatched(&bytes, FIND_COORDINATOR, v),
                Request::FindCoordinator(want)
            );
        }
        for v in 0..=9 {
            let (body, want) = join_group_request(v, full);
            let bytes = frame(JOIN_GROUP, v, &body);
            assert_eq!(dispatched(&bytes, JOIN_GROUP, v), Request::JoinGroup(want));
        }
        for v in 0..=5 {
            let (body, want) = sync_group_request(v, full);
            let bytes = frame(SYNC_GROUP, v, &body);
            assert_eq!(dispatched(&bytes, SYNC_GROUP, v), Request::SyncGroup(want));
        }
        for v in 0..=4 {
            let (body, want) = heartbeat_request(v, full);
            let bytes = frame(HEARTBEAT, v, &body);
            assert_eq!(dispatched(&bytes, HEARTBEAT, v), Request::Heartbeat(want));
        }
        for v in 0..=5 {
            let (body, want) = leave_group_request(v, full);
            let bytes = frame(LEAVE_GROUP, v, &body);
            assert_eq!(
                dispatched(&bytes, LEAVE_GROUP, v),
                Request::LeaveGroup(want)
            );
        }
        for v in 2..=8 {
            let (body, want) = offset_commit_request(v, full);
            let bytes = frame(OFFSET_COMMIT, v, &body);
            assert_eq!(
                dispatched(&bytes, OFFSET_COMMIT, v),
                Request::OffsetCommit(want)
            );
        }
        for v in 1..=8 {
            let (body, want) = offset_fetch_request(v, full);
            let bytes = frame(OFFSET_FETCH, v, &body);
            assert_eq!(
                dispatched(&bytes, OFFSET_FETCH, v),
                Request::OffsetFetch(want)
            );
        }
    }
}

#[test]
fn a_group_request_with_a_trailing_byte_is_invalid_and_keeps_its_ids() {
    let (mut body, _) = heartbeat_request(3, FULL);
    body.push(0);
    let bytes = frame(HEARTBEAT, 3, &body);
    assert!(matches!(
        decode_request(&bytes),
        Err(RequestError::Invalid {
            api_key: Some(HEARTBEAT),
            correlation_id: Some(_),
            ..
        })
    ));
}

// ---- hostile bytes -------------------------------------------------------------

/// A decoder of this file's messages at one version, with a valid body
/// to start mutating from.
struct Case {
    name: &'static str,
    version: i16,
    body: Vec<u8>,
    /// Decodes a body at a version: whether it decoded, every byte read.
    decode: fn(&[u8], i16) -> bool,
}

fn whole<'a, T: Debug>(
    body: &'a [u8],
    decode: impl FnOnce(&mut Decoder<'a>) -> Result<T, DecodeError>,
) -> bool {
    let mut d = Decoder::new(body);
    decode(&mut d).is_ok() && d.finish("body").is_ok()
}

/// Every decoder of this file, at every version.
fn corpus() -> Vec<Case> {
    let mut out = Vec::new();
    let mut add =
        |name, versions: std::ops::RangeInclusive<i16>, body: fn(i16) -> Vec<u8>, decode| {
            for version in versions {
                out.push(Case {
                    name,
                    version,
                    body: body(version),
                    decode,
                });
            }
        };
    add(
        "find_coordinator",
        0..=4,
        |v| find_coordinator_request(v, FULL).0,
        |b, v| whole(b, |d| FindCoordinatorRequest::decode(d, v)),
    );
    add(
        "join_group",
        0..=9,
        |v| join_group_request(v, FULL).0,
        |b, v| whole(b, |d| JoinGroupRequest::decode(d, v)),
    );
    add(
        "sync_group",
        0..=5,
        |v| sync_group_request(v, FULL).0,
        |b, v| whole(b, |d| SyncGroupRequest::decode(d, v)),
    );
    add(
        "heartbeat",
        0..=4,
        |v| heartbeat_request(v, FULL).0,
        |b, v| whole(b, |d| HeartbeatRequest::decode(d, v)),
    );
    add(
        "leave_group",
        0..=5,
        |v| leave_group_request(v, FULL).0,
        |b, v| whole(b, |d| LeaveGroupRequest::decode(d, v)),
    );
    add(
        "offset_commit",
        2..=8,
        |v| offset_commit_request(v, FULL).0,
        |b, v| whole(b, |d| OffsetCommitRequest::decode(d, v)),
    );
    add(
        "offset_fetch",
        1..=8,
        |v| offset_fetch_request(v, FULL).0,
        |b, v| whole(b, |d| OffsetFetchRequest::decode(d, v)),
    );
    add(
        "subscription",
        0..=3,
        |v| with_version(v, &subscription_pair(v, FULL).0),
        |b, _| ConsumerProtocolSubscription::decode(b).is_ok(),
    );
    add(
        "assignment",
        0..=3,
        |v| with_version(v, &assignment_pair(v, FULL).0),
        |b, _| ConsumerProtocolAssignment::decode(b).is_ok(),
    );
    out
}

/// The most a decode may allocate for `input_bytes` of input: the widest
/// element klog keeps per least wire bytes of it is a topic-partition pair
/// (40 bytes kept for 6 on the wire) or a borrowed string (16 for 2), so 8
/// times the input, plus a little for the errors' messages.
fn allocation_bytes_max(input_bytes: usize) -> usize {
    8 * input_bytes + 512
}

#[test]
fn every_valid_body_decodes_and_allocates_in_proportion_to_its_size() {
    for Case {
        name,
        version: v,
        body,
        decode,
    } in corpus()
    {
        let (ok, allocated) = allocated_by(|| decode(&body, v));
        assert!(ok, "{name} v{v} does not decode");
        assert!(
            allocated <= allocation_bytes_max(body.len()),
            "{name} v{v}: {allocated} bytes"
        );
    }
}

#[test]
fn a_huge_count_in_any_array_is_refused_without_allocating_for_it() {
    // Every 4-byte window of every valid body set to a huge count: wherever
    // it lands on an array's count, the array is refused before its Vec.
    for Case {
        name,
        version: v,
        body,
        decode,
    } in corpus()
    {
        for at in 0..body.len().saturating_sub(3) {
            for count in [65_536, 0x0100_0000, i32::MAX, -2, i32::MIN] {
                let mut hostile = body.clone();
                hostile[at..at + 4].copy_from_slice(&count.to_be_bytes());
                let (_, allocated) = allocated_by(|| decode(&hostile, v));
                assert!(
                    allocated <= allocation_bytes_max(hostile.len()),
                    "{name} v{v}: count {count} at {at} allocated {allocated} bytes"
                );
            }
        }
    }
}

#[test]
fn random_mutations_and_truncations_never_panic_a_decoder() {
    let seed = std::env::var("KLOG_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x6b6c_6f67_6772_7073);
    let rounds: usize = std::env::var("KLOG_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000);
    let mut random = XorShift::new(seed);
    let corpus = corpus();
    for round in 0..rounds {
        for Case {
            name,
            version: v,
            body,
            decode,
        } in &corpus
        {
            let hostile = mutate(body, &mut random);
            let (_, allocated) = allocated_by(|| decode(&hostile, *v));
            assert!(
                allocated <= allocation_bytes_max(hostile.len()),
                "{name} v{v} round {round} (seed {seed}): {allocated} bytes for {hostile:?}"
            );
        }
        // Pure noise, as long as a small frame.
        let len = (random.next() % 64) as usize;
        let noise: Vec<u8> = (0..len).map(|_| random.next() as u8).collect();
        for case in &corpus {
            (case.decode)(&noise, case.version);
        }
    }
}

/// One of: flip a few bytes, write an extreme `int16`/`int32` somewhere,
/// cut the tail, or append noise.
fn mutate(body: &[u8], random: &mut XorShift) -> Vec<u8> {
    let mut out = body.to_vec();
    let pick = |random: &mut XorShift, n: usize| (random.next() % n.max(1) as u64) as usize;
    match random.next() % 4 {
        0 => {
            for _ in 0..1 + pick(random, 4) {
                let at = pick(random, out.len());
                if let Some(byte) = out.get_mut(at) {
                    *byte = random.next() as u8;
                }
            }
        }
        1 => {
            let extremes: [&[u8]; 6] = [
                &[0x7f, 0xff, 0xff, 0xff],
                &[0xff, 0xff, 0xff, 0xff],
                &[0x80, 0x00, 0x00, 0x00],
                &[0x7f, 0xff],
                &[0xff, 0xfe],
                &[0x00, 0x00, 0x10, 0x00],
            ];
            let value = extremes[pick(random, extremes.len())];
            let at = pick(random, out.len().saturating_sub(value.len()) + 1);
            if at + value.len() <= out.len() {
                out[at..at + value.len()].copy_from_slice(value);
            }
        }
        2 => out.truncate(pick(random, out.len())),
        _ => {
            for _ in 0..pick(random, 16) {
                out.push(random.next() as u8);
            }
        }
    }
    out
}
