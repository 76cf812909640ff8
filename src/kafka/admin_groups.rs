//! The group admin APIs, as Kafka's admin clients send them
//! (`list_consumer_groups`, `describe_consumer_groups`,
//! `delete_consumer_groups`, `delete_consumer_group_offsets`), each
//! declared once (`message!`, [`super::message`]) from its schema.
//!
//! | API | key | versions | flexible from |
//! |---|---:|---|---:|
//! | DescribeGroups | 15 | 0–5 | 5 |
//! | ListGroups | 16 | 0–5 | 3 |
//! | DeleteGroups | 42 | 0–2 | 2 |
//! | OffsetDelete | 47 | 0 | — |

use super::api_key::*;
use super::message::{message, messages};

message! {
    /// ListGroups' request (`ListGroupsRequest.json`).
    pub struct ListGroupsRequest<'a> {
        /// Only groups in these states (v4+; empty: any).
        states_filter: Vec<&'a str> [4],
        /// Only groups of these types (v5+; empty: any).
        types_filter: Vec<&'a str> [5],
    }
}

message! {
    /// A group ListGroups lists.
    pub struct ListedGroup {
        /// The group id.
        group_id: String [0],
        /// Its protocol type ("consumer").
        protocol_type: String [0],
        /// Its state (v4+): Empty, Stable, PreparingRebalance.
        group_state: String [4],
        /// Its type (v5+): "classic".
        group_type: String [5],
    }
}

message! {
    /// ListGroups' response.
    pub struct ListGroupsResponse {
        /// Throttling (v1+), always 0.
        throttle_time_ms: i32 [1],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The groups.
        groups: Vec<ListedGroup> [0],
    }
}

message! {
    /// DescribeGroups' request (`DescribeGroupsRequest.json`).
    pub struct DescribeGroupsRequest<'a> {
        /// The groups to describe.
        groups: Vec<&'a str> [0],
        /// Whether to answer the operations the client may do (v3+).
        include_authorized_operations: bool [3],
    }
}

message! {
    /// A member of a described group.
    pub struct DescribedGroupMember<'a> {
        /// The member id.
        member_id: String [0],
        /// Its static id (v4+), always null.
        group_instance_id: Option<String> [4],
        /// Its client id.
        client_id: String [0],
        /// Its client's host.
        client_host: String [0],
        /// Its metadata (a consumer protocol subscription).
        member_metadata: &'a [u8] [0],
        /// Its assignment (a consumer protocol assignment).
        member_assignment: &'a [u8] [0],
    }
}

message! {
    /// A described group.
    pub struct DescribedGroup<'a> {
        /// The error code, or 0.
        error_code: i16 [0],
        /// The group id.
        group_id: String [0],
        /// Its state: Dead (no such group), Empty, Stable, PreparingRebalance.
        group_state: String [0],
        /// Its protocol type ("consumer"), or empty.
        protocol_type: String [0],
        /// Its protocol (the assignor's name), or empty.
        protocol_data: String [0],
        /// Its members.
        members: Vec<DescribedGroupMember<'a>> [0],
        /// The operations the client may do (v3+): i32::MIN, not given.
        authorized_operations: i32 [3] = i32::MIN,
    }
}

message! {
    /// DescribeGroups' response.
    pub struct DescribeGroupsResponse<'a> {
        /// Throttling (v1+), always 0.
        throttle_time_ms: i32 [1],
        /// Each group asked for, in order.
        groups: Vec<DescribedGroup<'a>> [0],
    }
}

message! {
    /// DeleteGroups' request (`DeleteGroupsRequest.json`).
    pub struct DeleteGroupsRequest<'a> {
        /// The groups to delete.
        groups_names: Vec<&'a str> [0],
    }
}

message! {
    /// One group's deletion.
    pub struct DeletableGroupResult {
        /// The group id.
        group_id: String [0],
        /// The error code (NON_EMPTY_GROUP while it has members), or 0.
        error_code: i16 [0],
    }
}

message! {
    /// DeleteGroups' response.
    pub struct DeleteGroupsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// Each group asked for, in order.
        results: Vec<DeletableGroupResult> [0],
    }
}

message! {
    /// A partition named in OffsetDelete's request.
    pub struct OffsetDeleteRequestPartition {
        /// The partition.
        partition_index: i32 [0],
    }
}

message! {
    /// A topic of OffsetDelete's request.
    pub struct OffsetDeleteRequestTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions whose committed offsets go.
        partitions: Vec<OffsetDeleteRequestPartition> [0],
    }
}

message! {
    /// OffsetDelete's request (`OffsetDeleteRequest.json`).
    pub struct OffsetDeleteRequest<'a> {
        /// The group.
        group_id: &'a str [0],
        /// The topics.
        topics: Vec<OffsetDeleteRequestTopic<'a>> [0],
    }
}

message! {
    /// One partition's deletion.
    pub struct OffsetDeleteResponsePartition {
        /// The partition.
        partition_index: i32 [0],
        /// The error code (GROUP_SUBSCRIBED_TO_TOPIC while a member reads
        /// the topic), or 0.
        error_code: i16 [0],
    }
}

message! {
    /// A topic of OffsetDelete's response.
    pub struct OffsetDeleteResponseTopic {
        /// The topic.
        name: String [0],
        /// Its partitions.
        partitions: Vec<OffsetDeleteResponsePartition> [0],
    }
}

message! {
    /// OffsetDelete's response.
    pub struct OffsetDeleteResponse {
        /// The error for the whole group, or 0.
        error_code: i16 [0],
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// Each topic asked for.
        topics: Vec<OffsetDeleteResponseTopic> [0],
    }
}

messages! {
    ListGroupsRequest<'a> = LIST_GROUPS, 3;
    ListGroupsResponse = LIST_GROUPS, 3;
    DescribeGroupsRequest<'a> = DESCRIBE_GROUPS, 5;
    DescribeGroupsResponse<'a> = DESCRIBE_GROUPS, 5;
    DeleteGroupsRequest<'a> = DELETE_GROUPS, 2;
    DeleteGroupsResponse = DELETE_GROUPS, 2;
    OffsetDeleteRequest<'a> = OFFSET_DELETE, 32767;
    OffsetDeleteResponse = OFFSET_DELETE, 32767;
}
