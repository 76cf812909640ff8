//! The group admin APIs on the wire: ListGroups, DescribeGroups,
//! DeleteGroups and OffsetDelete ([`crate::kafka::admin_groups`]),
//! answered by the [`super::group::Coordinator`].
//!
//! | request | needs |
//! |---|---|
//! | ListGroups | describe on the cluster, else lists the groups the client may describe |
//! | DescribeGroups | describe on each group |
//! | DeleteGroups | delete on each group |
//! | OffsetDelete | delete on the group, read on each topic |

use std::collections::HashMap;

use super::access::Access;
use super::Kafka;

/// The most distinct groups one DescribeGroups, DeleteGroups or
/// FindCoordinator (v4) names;
/// past them, each other name is answered INVALID_REQUEST.
pub(super) const GROUPS_PER_REQUEST_MAX: usize = 1000;

/// Each distinct name of `names` answered once by `each` (the first
/// [`GROUPS_PER_REQUEST_MAX`] of them; INVALID_REQUEST past them).
pub(super) fn once_each<'n, T>(
    names: &[&'n str],
    mut each: impl FnMut(&str) -> Result<T, i16>,
) -> HashMap<&'n str, Result<T, i16>> {
    let mut answers = HashMap::new();
    for name in names {
        if answers.contains_key(name) {
            continue;
        }
        let answer = if answers.len() < GROUPS_PER_REQUEST_MAX {
            each(name)
        } else {
            Err(kafka::INVALID_REQUEST)
        };
        answers.insert(*name, answer);
    }
    answers
}
use crate::coord::acl::{Operation, ResourceType, CLUSTER};
use crate::kafka::admin_groups::*;
use crate::kafka::{self};

/// ListGroups: the groups this broker lists, in the states asked for.
pub(super) fn list(
    kafka: &Kafka,
    access: &Access<'_>,
    r: &ListGroupsRequest<'_>,
) -> ListGroupsResponse {
    let all = access.allows(Operation::Describe, ResourceType::Cluster, CLUSTER);
    let (error_code, found) = match kafka.coordinator.list() {
        Ok(found) => (kafka::NONE, found),
        Err(error) => (error, Vec::new()),
    };
    let wanted = |state: &str| {
        r.states_filter.is_empty()
            || r.states_filter
                .iter()
                .any(|s| s.eq_ignore_ascii_case(state))
    };
    let typed = r.types_filter.is_empty()
        || r.types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case("classic"));
    let groups = found
        .into_iter()
        .filter(|(g, state)| {
            typed && wanted(state) && (all || access.group(Operation::Describe, g).is_none())
        })
        .map(|(group_id, state)| ListedGroup {
            group_id,
            protocol_type: "consumer".to_string(),
            group_state: state.to_string(),
            group_type: "classic".to_string(),
        })
        .collect();
    ListGroupsResponse {
        throttle_time_ms: 0,
        error_code,
        groups,
    }
}

/// DescribeGroups: each group asked for, in order. `views` holds the
/// bytes the answer borrows.
pub(super) fn describe<'v>(
    kafka: &Kafka,
    access: &Access<'_>,
    r: &DescribeGroupsRequest<'_>,
    views: &'v mut Vec<(String, Result<super::group::GroupView, i16>)>,
) -> DescribeGroupsResponse<'v> {
    let mut distinct = once_each(&r.groups, |g| match access.group(Operation::Describe, g) {
        Some(denied) => Err(denied),
        None => kafka.coordinator.describe(g),
    });
    // Each name answered in order; a name repeated is described once, its
    // repeats answered INVALID_REQUEST (one request must not make an
    // answer of a group's members many times over).
    *views = r
        .groups
        .iter()
        .map(|g| {
            let view = distinct.remove(g).unwrap_or(Err(kafka::INVALID_REQUEST));
            (g.to_string(), view)
        })
        .collect();
    let groups = views
        .iter()
        .map(|(group_id, view)| match view {
            Ok(view) => DescribedGroup {
                error_code: kafka::NONE,
                group_id: group_id.clone(),
                group_state: view.state.to_string(),
                protocol_type: view.protocol_type.to_string(),
                protocol_data: view.protocol.clone(),
                members: view
                    .members
                    .iter()
                    .map(|m| DescribedGroupMember {
                        member_id: m.member_id.clone(),
                        group_instance_id: None,
                        client_id: m.client_id.clone(),
                        client_host: String::new(),
                        member_metadata: &m.metadata,
                        member_assignment: &m.assignment,
                    })
                    .collect(),
                authorized_operations: i32::MIN,
            },
            Err(error_code) => DescribedGroup {
                error_code: *error_code,
                group_id: group_id.clone(),
                group_state: String::new(),
                protocol_type: String::new(),
                protocol_data: String::new(),
                members: Vec::new(),
                authorized_operations: i32::MIN,
            },
        })
        .collect();
    DescribeGroupsResponse {
        throttle_time_ms: 0,
        groups,
    }
}

/// DeleteGroups: each group's result, in order.
pub(super) fn delete(
    kafka: &Kafka,
    access: &Access<'_>,
    r: &DeleteGroupsRequest<'_>,
) -> DeleteGroupsResponse {
    let codes = once_each(&r.groups_names, |g| {
        Err(access
            .group(Operation::Delete, g)
            .unwrap_or_else(|| kafka.coordinator.delete_group(g)))
    });
    let results = r
        .groups_names
        .iter()
        .map(|g| DeletableGroupResult {
            group_id: g.to_string(),
            error_code: codes.get(g).map_or(kafka::INVALID_REQUEST, |c| match c {
                Ok(()) => kafka::NONE,
                Err(code) => *code,
            }),
        })
        .collect();
    DeleteGroupsResponse {
        throttle_time_ms: 0,
        results,
    }
}

/// OffsetDelete: the group's error and each partition's.
pub(super) fn delete_offsets(
    kafka: &Kafka,
    access: &Access<'_>,
    r: &OffsetDeleteRequest<'_>,
) -> OffsetDeleteResponse {
    let denied = |topic: &str| access.topic(Operation::Read, topic);
    let asked: Vec<(String, i32)> = r
        .topics
        .iter()
        .filter(|t| denied(t.name).is_none())
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index))
        })
        .collect();
    let (error_code, codes) = match access.group(Operation::Delete, r.group_id) {
        Some(refused) => (refused, vec![refused; asked.len()]),
        None => kafka.coordinator.delete_offsets(r.group_id, &asked),
    };
    let mut codes = codes.into_iter();
    let topics = r
        .topics
        .iter()
        .map(|t| OffsetDeleteResponseTopic {
            name: t.name.to_string(),
            partitions: t
                .partitions
                .iter()
                .map(|p| OffsetDeleteResponsePartition {
                    partition_index: p.partition_index,
                    error_code: denied(t.name)
                        .unwrap_or_else(|| codes.next().unwrap_or(kafka::UNKNOWN_SERVER_ERROR)),
                })
                .collect(),
        })
        .collect();
    OffsetDeleteResponse {
        error_code,
        throttle_time_ms: 0,
        topics,
    }
}
