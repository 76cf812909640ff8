//! The group APIs on the wire: FindCoordinator, JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch, decoded by
//! [`crate::kafka::group`] and answered by the [`Coordinator`].

use std::time::Duration;

use super::access::Access;
use super::group::{eager_protocol, Coordinator, Join, Sync};
use super::Kafka;
use crate::coord::acl::Operation;
use crate::kafka::consumer::ConsumerProtocolSubscription;
use crate::kafka::group::*;
use crate::kafka::header::RequestHeader;
use crate::kafka::response::frame_message;
use crate::kafka::{self};

/// The group request, answered in `out`.
#[derive(Debug)]
pub(super) enum GroupRequest<'a> {
    FindCoordinator(FindCoordinatorRequest<'a>),
    JoinGroup(JoinGroupRequest<'a>),
    SyncGroup(SyncGroupRequest<'a>),
    Heartbeat(HeartbeatRequest<'a>),
    LeaveGroup(LeaveGroupRequest<'a>),
    OffsetCommit(OffsetCommitRequest<'a>),
    OffsetFetch(OffsetFetchRequest<'a>),
}

/// Answers a group request in `out`, in the request's version.
pub(super) fn handle(
    kafka: &Kafka,
    header: &RequestHeader<'_>,
    request: GroupRequest<'_>,
    access: Access<'_>,
    out: &mut Vec<u8>,
) {
    let (id, version) = (header.correlation_id, header.api_version);
    if let Some(denied) = group_denied(&request, version, access) {
        return refuse(header, &request, denied, out);
    }
    let c = &kafka.coordinator;
    match request {
        GroupRequest::FindCoordinator(r) => find_coordinator(kafka, &r, access, (version, id), out),
        GroupRequest::JoinGroup(r) => join_group(c, header, &r, out),
        GroupRequest::SyncGroup(r) => sync_group(c, &r, version, id, out),
        GroupRequest::Heartbeat(r) => {
            let error_code = c.heartbeat(r.group_id, r.member_id, r.generation_id);
            let response = HeartbeatResponse {
                throttle_time_ms: 0,
                error_code,
            };
            frame_message(out, id, version, &response);
        }
        GroupRequest::LeaveGroup(r) => {
            // v3+: several members, each answered on its own (a static
            // member named by its instance id alone is not known here).
            let members: Vec<MemberResponse<'_>> = r
                .members
                .iter()
                .map(|m| MemberResponse {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    error_code: c.leave(r.group_id, m.member_id),
                })
                .collect();
            let error_code = match version {
                0..=2 => c.leave(r.group_id, r.member_id),
                _ => kafka::NONE,
            };
            let response = LeaveGroupResponse {
                throttle_time_ms: 0,
                error_code,
                members,
            };
            frame_message(out, id, version, &response);
        }
        GroupRequest::OffsetCommit(r) => offset_commit(c, &r, access, (version, id), out),
        GroupRequest::OffsetFetch(r) => offset_fetch(c, &r, access, (version, id), out),
    }
}

/// GROUP_AUTHORIZATION_FAILED unless the request's group allows it.
fn group_denied(request: &GroupRequest<'_>, version: i16, access: Access<'_>) -> Option<i16> {
    let (op, group) = match request {
        // v4 asks for several keys: each is checked on its own.
        GroupRequest::FindCoordinator(r) if r.key_type == 0 && r.coordinator_keys.is_empty() => {
            (Operation::Describe, r.key)
        }
        GroupRequest::FindCoordinator(_) => return None,
        GroupRequest::JoinGroup(r) => (Operation::Read, r.group_id),
        GroupRequest::SyncGroup(r) => (Operation::Read, r.group_id),
        GroupRequest::Heartbeat(r) => (Operation::Read, r.group_id),
        GroupRequest::LeaveGroup(r) => (Operation::Read, r.group_id),
        GroupRequest::OffsetCommit(r) => (Operation::Read, r.group_id),
        // v8 asks for several groups: each is checked on its own.
        GroupRequest::OffsetFetch(_) if version >= 8 => return None,
        GroupRequest::OffsetFetch(r) => (Operation::Describe, r.group_id),
    };
    access.group(op, group)
}

/// The answer of a group request refused with `error_code`.
fn refuse(
    header: &RequestHeader<'_>,
    request: &GroupRequest<'_>,
    error_code: i16,
    out: &mut Vec<u8>,
) {
    let (id, version) = (header.correlation_id, header.api_version);
    match request {
        GroupRequest::FindCoordinator(_) => {
            let response = FindCoordinatorResponse {
                throttle_time_ms: 0,
                error_code,
                error_message: Some("Group authorization failed."),
                node_id: -1,
                host: "",
                port: -1,
                coordinators: Vec::new(),
            };
            frame_message(out, id, version, &response);
        }
        GroupRequest::JoinGroup(r) => {
            let response = join_refused(version, r.member_id, error_code);
            frame_message(out, id, version, &response);
        }
        GroupRequest::SyncGroup(r) => {
            let response = SyncGroupResponse {
                throttle_time_ms: 0,
                error_code,
                protocol_type: r.protocol_type,
                protocol_name: r.protocol_name,
                assignment: &[],
            };
            frame_message(out, id, version, &response);
        }
        GroupRequest::Heartbeat(_) => {
            let response = HeartbeatResponse {
                throttle_time_ms: 0,
                error_code,
            };
            frame_message(out, id, version, &response);
        }
        GroupRequest::LeaveGroup(_) => {
            let response = LeaveGroupResponse {
                throttle_time_ms: 0,
                error_code,
                members: Vec::new(),
            };
            frame_message(out, id, version, &response);
        }
        GroupRequest::OffsetCommit(r) => {
            commit_answer(r, &mut |_, _| error_code, (version, id), out)
        }
        GroupRequest::OffsetFetch(r) => {
            let topics = fetch_topics(r, &mut |_, p| partition(p, -1, error_code));
            let response = OffsetFetchResponse {
                throttle_time_ms: 0,
                topics,
                error_code,
                groups: Vec::new(),
            };
            frame_message(out, id, version, &response);
        }
    }
}

/// FindCoordinator: this broker, for every group but one whose leader
/// assigns and another broker coordinates (transactions have none); in
/// v4, each key asked, each checked against the ACLs on its own.
fn find_coordinator(
    kafka: &Kafka,
    r: &FindCoordinatorRequest<'_>,
    access: Access<'_>,
    (version, id): (i16, i32),
    out: &mut Vec<u8>,
) {
    let answer = |key: &str| key_coordinator(kafka, access, r.key_type, key);
    let mut response = FindCoordinatorResponse {
        throttle_time_ms: 0,
        error_code: kafka::NONE,
        error_message: None,
        node_id: -1,
        host: "",
        port: -1,
        coordinators: Vec::new(),
    };
    // Each key looks at the registry: each distinct one once, and at most
    // as many as a DescribeGroups names (INVALID_REQUEST past them).
    let answers = super::group_admin::once_each(&r.coordinator_keys, |k| Ok(answer(k)));
    let nodes: Vec<_> = r
        .coordinator_keys
        .iter()
        .map(|k| match &answers[k] {
            Ok(found) => found.clone(),
            Err(code) => (*code, Some("too many keys in one request"), None),
        })
        .collect();
    let single = (version < 4).then(|| answer(r.key));
    if let Some((error_code, error_message, node)) = &single {
        response.error_code = *error_code;
        response.error_message = *error_message;
        if let Some(n) = node {
            (response.node_id, response.host, response.port) = (n.node_id, &n.host, n.port);
        }
    }
    response.coordinators = r
        .coordinator_keys
        .iter()
        .zip(&nodes)
        .map(
            |(key, (error_code, error_message, node))| kafka::group::Coordinator {
                key,
                node_id: node.as_ref().map_or(-1, |n| n.node_id),
                host: node.as_ref().map_or("", |n| &n.host),
                port: node.as_ref().map_or(-1, |n| n.port),
                error_code: *error_code,
                error_message: *error_message,
            },
        )
        .collect();
    frame_message(out, id, version, &response);
}

/// One key's FindCoordinator answer: (error, message, coordinator).
fn key_coordinator(
    kafka: &Kafka,
    access: Access<'_>,
    key_type: i8,
    key: &str,
) -> (i16, Option<&'static str>, Option<super::metadata::Node>) {
    let me = || super::metadata::Node {
        node_id: kafka.node_id,
        host: kafka.advertised.0.clone(),
        port: i32::from(kafka.advertised.1),
    };
    // Every broker coordinates every transactional id (`transactions`).
    match key_type {
        0 => {}
        1 if crate::coord::transactions::entry_name(key).is_some() => {
            return match access.transactional_id(Operation::Describe, key) {
                Some(denied) => (denied, Some("Transactional id authorization failed."), None),
                None => (kafka::NONE, None, Some(me())),
            };
        }
        1 => {
            return (
                kafka::INVALID_REQUEST,
                Some("a transactional id of 1 to 249 bytes"),
                None,
            )
        }
        _ => return (kafka::INVALID_REQUEST, Some("key type 0 or 1"), None),
    }
    if let Some(denied) = access.group(Operation::Describe, key) {
        return (denied, Some("Group authorization failed."), None);
    }
    let node = match kafka.coordinator.coordinator_of(key) {
        Some(b) => super::metadata::kafka_node(&b),
        None => None,
    };
    (kafka::NONE, None, Some(node.unwrap_or_else(me)))
}

/// JoinGroup: the member's protocols and subscription, then the
/// coordinator's answer (which may wait for the rebalance).
fn join_group(
    c: &Coordinator,
    header: &RequestHeader<'_>,
    r: &JoinGroupRequest<'_>,
    out: &mut Vec<u8>,
) {
    let (id, version) = (header.correlation_id, header.api_version);
    let refuse = |out: &mut Vec<u8>, error_code: i16| {
        let response = join_refused(version, r.member_id, error_code);
        frame_message(out, id, version, &response);
    };
    let Some(join) = join_of(header, r) else {
        return refuse(out, kafka::INCONSISTENT_GROUP_PROTOCOL);
    };
    let joined = c.join(join);
    let members = joined
        .members
        .iter()
        .map(|(member_id, metadata)| JoinGroupResponseMember {
            member_id,
            group_instance_id: None,
            metadata,
        })
        .collect();
    let ok = joined.error == kafka::NONE;
    let response = JoinGroupResponse {
        throttle_time_ms: 0,
        error_code: joined.error,
        generation_id: joined.generation,
        protocol_type: ok.then_some(r.protocol_type),
        protocol_name: match ok {
            true => Some(&joined.protocol),
            false => no_protocol(version),
        },
        leader: &joined.leader_id,
        skip_assignment: false,
        member_id: &joined.member_id,
        members,
    };
    frame_message(out, id, version, &response);
}

/// A JoinGroup answer's protocol name with an error: null from v7, empty
/// before (where it cannot be null).
fn no_protocol(version: i16) -> Option<&'static str> {
    (version < 7).then_some("")
}

/// The JoinGroup answer of `version` that refuses `member_id` with
/// `error_code`.
fn join_refused(version: i16, member_id: &str, error_code: i16) -> JoinGroupResponse<'_> {
    JoinGroupResponse {
        throttle_time_ms: 0,
        error_code,
        generation_id: -1,
        protocol_type: None,
        protocol_name: no_protocol(version),
        leader: "",
        skip_assignment: false,
        member_id,
        members: Vec::new(),
    }
}

/// The JoinGroup request as the coordinator takes it: the protocols (the
/// broker's where it runs one the member offers) and the subscription's
/// topics and owned partitions; `None` for a request that is not a
/// consumer's (INCONSISTENT_GROUP_PROTOCOL).
fn join_of(header: &RequestHeader<'_>, r: &JoinGroupRequest<'_>) -> Option<Join> {
    if r.protocol_type != "consumer" {
        return None;
    }
    let names: Vec<&str> = r.protocols.iter().map(|p| p.name).collect();
    // The broker assigns where it runs an assignor the member offers; the
    // group's leader assigns otherwise (its first protocol's subscription
    // says the topics).
    let broker_assigns = eager_protocol(&names);
    let offered = r
        .protocols
        .iter()
        .filter(|p| broker_assigns.is_none_or(|b| b == p.name));
    let first = offered.clone().next()?;
    let subscription = ConsumerProtocolSubscription::decode(first.metadata).ok()?;
    let owned = subscription.owned_partitions.iter().flat_map(|tp| {
        let partitions = tp.partitions.iter().filter_map(|&p| u32::try_from(p).ok());
        partitions.map(|p| (tp.topic.to_string(), p))
    });
    let ms = |v: i32| Duration::from_millis(u64::try_from(v).unwrap_or(0));
    let version = header.api_version;
    Some(Join {
        group: r.group_id.to_string(),
        member_id: r.member_id.to_string(),
        client_id: header.client_id.unwrap_or_default().to_string(),
        session_timeout: ms(r.session_timeout_ms),
        rebalance_timeout: (version >= 1).then(|| ms(r.rebalance_timeout_ms)),
        topics: subscription.topics.iter().map(|t| t.to_string()).collect(),
        member_id_required: version >= 4,
        protocols: offered
            .map(|p| (p.name.to_string(), p.metadata.to_vec()))
            .collect(),
        leader_assigns: broker_assigns.is_none(),
        owned: owned.collect(),
    })
}

/// SyncGroup: the member's partitions, as the consumer protocol's
/// assignment.
fn sync_group(c: &Coordinator, r: &SyncGroupRequest<'_>, version: i16, id: i32, out: &mut Vec<u8>) {
    let synced = c.sync(&Sync {
        group: r.group_id.to_string(),
        member_id: r.member_id.to_string(),
        generation: r.generation_id,
        assignments: r
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.to_vec()))
            .collect(),
    });
    let assignment = match synced.raw {
        Some(raw) => raw,
        None if synced.error == kafka::NONE => super::group::assignment(&synced.assignment),
        None => Vec::new(),
    };
    // v5 names the group's protocol both ways: the member's, as it
    // joined with them.
    let response = SyncGroupResponse {
        throttle_time_ms: 0,
        error_code: synced.error,
        protocol_type: r.protocol_type,
        protocol_name: r.protocol_name,
        assignment: &assignment,
    };
    frame_message(out, id, version, &response);
}

fn offset_commit(
    c: &Coordinator,
    r: &OffsetCommitRequest<'_>,
    access: Access<'_>,
    (version, id): (i16, i32),
    out: &mut Vec<u8>,
) {
    // Partitions of topics the client may not read are not committed.
    let denied = |topic: &str| access.topic(Operation::Read, topic);
    let offsets: Vec<(String, i32, i64)> = r
        .topics
        .iter()
        .filter(|t| denied(t.name).is_none())
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index, p.committed_offset))
        })
        .collect();
    let mut errors = c
        .commit(r.group_id, r.member_id, r.generation_id, &offsets)
        .into_iter();
    let mut error_of = |topic: &str, _partition: i32| match denied(topic) {
        Some(code) => code,
        None => errors.next().unwrap_or(kafka::UNKNOWN_SERVER_ERROR),
    };
    commit_answer(r, &mut error_of, (version, id), out);
}

/// An OffsetCommit answer, each partition's error from `error_of`.
fn commit_answer(
    r: &OffsetCommitRequest<'_>,
    error_of: &mut dyn FnMut(&str, i32) -> i16,
    (version, id): (i16, i32),
    out: &mut Vec<u8>,
) {
    let topics = r
        .topics
        .iter()
        .map(|t| OffsetCommitResponseTopic {
            name: t.name,
            partitions: t
                .partitions
                .iter()
                .map(|p| OffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: error_of(t.name, p.partition_index),
                })
                .collect(),
        })
        .collect();
    let response = OffsetCommitResponse {
        throttle_time_ms: 0,
        topics,
    };
    frame_message(out, id, version, &response);
}

/// The topics of an OffsetFetch answer for the topics asked, each
/// partition from `part_of`.
fn fetch_topics<'r>(
    r: &OffsetFetchRequest<'r>,
    part_of: &mut dyn FnMut(&str, i32) -> OffsetFetchResponsePartition<'static>,
) -> Vec<OffsetFetchResponseTopic<'r>> {
    let Some(topics) = &r.topics else {
        return Vec::new();
    };
    topics
        .iter()
        .map(|t| OffsetFetchResponseTopic {
            name: t.name,
            partitions: t
                .partition_indexes
                .iter()
                .map(|&p| part_of(t.name, p))
                .collect(),
        })
        .collect()
}

/// OffsetFetch: the committed offsets of the group asked (v1–7) or of
/// each group asked (v8; each checked against the ACLs on its own, the
/// first [`super::group_admin::GROUPS_PER_REQUEST_MAX`] of them, the rest
/// INVALID_REQUEST).
fn offset_fetch(
    c: &Coordinator,
    r: &OffsetFetchRequest<'_>,
    access: Access<'_>,
    (version, id): (i16, i32),
    out: &mut Vec<u8>,
) {
    if version < 8 {
        let found = group_offsets(c, access, r.group_id, r.topics.as_deref(), r.require_stable);
        let response = OffsetFetchResponse {
            throttle_time_ms: 0,
            topics: found.topics(),
            error_code: found.error_code,
            groups: Vec::new(),
        };
        return frame_message(out, id, version, &response);
    }
    let found: Vec<GroupOffsets> = (r.groups.iter().enumerate())
        .map(|(i, g)| {
            let refused = match i < super::group_admin::GROUPS_PER_REQUEST_MAX {
                true => access.group(Operation::Describe, g.group_id),
                false => Some(kafka::INVALID_REQUEST),
            };
            match refused {
                Some(error_code) => GroupOffsets {
                    topics: Vec::new(),
                    error_code,
                },
                None => group_offsets(c, access, g.group_id, g.topics.as_deref(), r.require_stable),
            }
        })
        .collect();
    let groups = (r.groups.iter().zip(&found))
        .map(|(g, found)| OffsetFetchResponseGroup {
            group_id: g.group_id,
            topics: found.topics(),
            error_code: found.error_code,
        })
        .collect();
    let response = OffsetFetchResponse {
        throttle_time_ms: 0,
        topics: Vec::new(),
        error_code: kafka::NONE,
        groups,
    };
    frame_message(out, id, version, &response);
}

/// One group's committed offsets, as OffsetFetch answers them.
struct GroupOffsets {
    /// Each topic and its partitions' answers.
    topics: Vec<(String, Vec<OffsetFetchResponsePartition<'static>>)>,
    /// The group's error, or 0.
    error_code: i16,
}

impl GroupOffsets {
    fn topics(&self) -> Vec<OffsetFetchResponseTopic<'_>> {
        (self.topics.iter())
            .map(|(name, partitions)| OffsetFetchResponseTopic {
                name,
                partitions: partitions.clone(),
            })
            .collect()
    }
}

/// The committed offsets of `group` in the partitions of `topics` (those
/// the ACLs let the client describe; the others refused each), or in
/// every topic it committed when `topics` is null; `stable`: the
/// client asks for stable offsets (`require_stable`).
fn group_offsets(
    c: &Coordinator,
    access: Access<'_>,
    group: &str,
    topics: Option<&[OffsetFetchRequestTopic<'_>]>,
    stable: bool,
) -> GroupOffsets {
    let denied = |topic: &str| access.topic(Operation::Describe, topic);
    let Some(topics) = topics else {
        return match c.fetch_all_offsets(group) {
            Ok(mut all) => {
                all.retain(|(topic, _, _)| denied(topic).is_none());
                GroupOffsets {
                    topics: by_topic(all),
                    error_code: kafka::NONE,
                }
            }
            Err(error_code) => GroupOffsets {
                topics: Vec::new(),
                error_code,
            },
        };
    };
    let asked: Vec<(String, i32)> = (topics.iter())
        .filter(|t| denied(t.name).is_none())
        .flat_map(|t| t.partition_indexes.iter().map(|&p| (t.name.to_string(), p)))
        .collect();
    let mut found = c.fetch_offsets(group, &asked, stable).into_iter();
    let topics = (topics.iter())
        .map(|t| {
            let refused = denied(t.name);
            let partitions = (t.partition_indexes.iter())
                .map(|&p| match refused {
                    Some(code) => partition(p, -1, code),
                    None => {
                        let (offset, error) =
                            found.next().unwrap_or((-1, kafka::UNKNOWN_SERVER_ERROR));
                        partition(p, offset, error)
                    }
                })
                .collect();
            (t.name.to_string(), partitions)
        })
        .collect();
    GroupOffsets {
        topics,
        error_code: kafka::NONE,
    }
}

/// One partition of an OffsetFetch answer: klog keeps no leader epoch and
/// no metadata with a committed offset.
fn partition(
    partition_index: i32,
    committed_offset: i64,
    error_code: i16,
) -> OffsetFetchResponsePartition<'static> {
    OffsetFetchResponsePartition {
        partition_index,
        committed_offset,
        committed_leader_epoch: -1,
        metadata: Some(""),
        error_code,
    }
}

/// A group's committed `(topic, partition, offset)`s, as the registry
/// lists them (a topic's together), as an answer's topics.
fn by_topic(
    all: Vec<(String, i32, i64)>,
) -> Vec<(String, Vec<OffsetFetchResponsePartition<'static>>)> {
    let mut topics: Vec<(String, Vec<OffsetFetchResponsePartition<'static>>)> = Vec::new();
    for (topic, p, offset) in all {
        let part = partition(p, offset, kafka::NONE);
        match topics.last_mut() {
            Some((name, partitions)) if *name == topic => partitions.push(part),
            _ => topics.push((topic, vec![part])),
        }
    }
    topics
}
