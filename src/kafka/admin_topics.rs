//! The topic and cluster admin APIs, as Kafka's admin clients send them
//! (`create_topics`, `describe_configs`, `describe_cluster`), each declared
//! once (`message!`, [`super::message`]) from its schema.
//!
//! | API | key | versions | flexible from |
//! |---|---:|---|---:|
//! | CreateTopics | 19 | 0–6 | 5 |
//! | DeleteTopics | 20 | 0–6 | 4 |
//! | DescribeConfigs | 32 | 0–4 | 4 |
//! | AlterConfigs | 33 | 0–2 | 2 |
//! | IncrementalAlterConfigs | 44 | 0–1 | 1 |
//! | DescribeCluster | 60 | 0–1 | 0 |
//!
//! A config's source and type, as Kafka's `ConfigSource` and `ConfigType`
//! number them, are the constants of [`config`].

use super::api_key::*;
use super::message::{message, messages};

/// The numbers of a config's source, type and resource on the wire.
pub mod config {
    /// ConfigSource DYNAMIC_TOPIC_CONFIG: the topic's own (the registry).
    pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
    /// ConfigSource DYNAMIC_BROKER_CONFIG: a broker's own, set at runtime.
    pub const DYNAMIC_BROKER_CONFIG: i8 = 2;
    /// ConfigSource DYNAMIC_DEFAULT_BROKER_CONFIG: every broker's, set at
    /// runtime.
    pub const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
    /// ConfigSource STATIC_BROKER_CONFIG: the broker's command line.
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    /// ConfigSource DEFAULT_CONFIG.
    pub const DEFAULT_CONFIG: i8 = 5;
    /// ConfigType STRING.
    pub const STRING: i8 = 2;
    /// ConfigType INT.
    pub const INT: i8 = 3;
    /// ConfigType LONG.
    pub const LONG: i8 = 5;
    /// ConfigType DOUBLE.
    pub const DOUBLE: i8 = 6;
    /// ConfigType LIST.
    pub const LIST: i8 = 7;
    /// ConfigType BOOLEAN.
    pub const BOOLEAN: i8 = 1;
    /// ConfigResource TOPIC.
    pub const TOPIC: i8 = 2;
    /// ConfigResource BROKER.
    pub const BROKER: i8 = 4;
    /// AlterConfigOp SET (IncrementalAlterConfigs).
    pub const SET: i8 = 0;
    /// AlterConfigOp DELETE: back to the broker's value.
    pub const DELETE: i8 = 1;
    /// AlterConfigOp APPEND, to a list.
    pub const APPEND: i8 = 2;
    /// AlterConfigOp SUBTRACT, from a list.
    pub const SUBTRACT: i8 = 3;
}

message! {
    /// A replica assignment asked for (CreateTopics).
    pub struct CreatableReplicaAssignment {
        /// The partition.
        partition_index: i32 [0],
        /// Its replicas' broker ids.
        broker_ids: Vec<i32> [0],
    }
}

message! {
    /// A config asked for (CreateTopics).
    pub struct CreatableTopicConfig<'a> {
        /// The config's name.
        name: &'a str [0],
        /// Its value, or null.
        value: Option<&'a str> [0],
    }
}

message! {
    /// A topic to create.
    pub struct CreatableTopic<'a> {
        /// The topic.
        name: &'a str [0],
        /// Its partitions, or -1 for the broker's default.
        num_partitions: i32 [0],
        /// Its replication factor, or -1 for the broker's default.
        replication_factor: i16 [0],
        /// Manual replica assignments (klog places replicas itself).
        assignments: Vec<CreatableReplicaAssignment> [0],
        /// Its configs.
        configs: Vec<CreatableTopicConfig<'a>> [0],
    }
}

message! {
    /// CreateTopics' request (`CreateTopicsRequest.json`).
    pub struct CreateTopicsRequest<'a> {
        /// The topics to create.
        topics: Vec<CreatableTopic<'a>> [0],
        /// How long to wait for the creation, in milliseconds.
        timeout_ms: i32 [0],
        /// Check only, create nothing (v1+).
        validate_only: bool [1],
    }
}

message! {
    /// A config of a created topic (v5+).
    pub struct CreatableTopicConfigs {
        /// Its name.
        name: String [5],
        /// Its value.
        value: Option<String> [5],
        /// Whether it cannot be changed.
        read_only: bool [5],
        /// Where the value comes from ([`config`]).
        config_source: i8 [5] = -1,
        /// Whether its value is secret.
        is_sensitive: bool [5],
    }
}

message! {
    /// One topic's creation.
    pub struct CreatableTopicResult {
        /// The topic.
        name: String [0],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message (v1+), or null.
        error_message: Option<String> [1],
        /// Its partitions (v5+), -1 on an error.
        num_partitions: i32 [5] = -1,
        /// Its replication factor (v5+), -1 on an error.
        replication_factor: i16 [5] = -1,
        /// Its configs (v5+), or null.
        configs: Option<Vec<CreatableTopicConfigs>> [5],
    }
}

message! {
    /// CreateTopics' response.
    pub struct CreateTopicsResponse {
        /// Throttling (v2+), always 0.
        throttle_time_ms: i32 [2],
        /// Each topic asked for, in order.
        topics: Vec<CreatableTopicResult> [0],
    }
}

message! {
    /// A resource whose configs are asked for.
    pub struct DescribeConfigsResource<'a> {
        /// Its type ([`config::TOPIC`], [`config::BROKER`]).
        resource_type: i8 [0],
        /// Its name (a topic, a broker's node id).
        resource_name: &'a str [0],
        /// The configs asked for, or null for all.
        configuration_keys: Option<Vec<&'a str>> [0],
    }
}

message! {
    /// DescribeConfigs' request (`DescribeConfigsRequest.json`).
    pub struct DescribeConfigsRequest<'a> {
        /// The resources.
        resources: Vec<DescribeConfigsResource<'a>> [0],
        /// Whether to answer each config's synonyms (v1+).
        include_synonyms: bool [1],
        /// Whether to answer each config's documentation (v3+).
        include_documentation: bool [3],
    }
}

message! {
    /// A synonym of a config (v1+): klog answers none.
    pub struct DescribeConfigsSynonym {
        /// Its name.
        name: String [1],
        /// Its value.
        value: Option<String> [1],
        /// Its source.
        source: i8 [1],
    }
}

message! {
    /// A config of a resource.
    pub struct DescribeConfigsResourceResult {
        /// Its name.
        name: String [0],
        /// Its value.
        value: Option<String> [0],
        /// Whether it cannot be changed.
        read_only: bool [0],
        /// Whether it is the default (v0 only).
        is_default: bool [0, 0],
        /// Where the value comes from (v1+, [`config`]).
        config_source: i8 [1] = -1,
        /// Whether its value is secret.
        is_sensitive: bool [0],
        /// Its synonyms (v1+).
        synonyms: Vec<DescribeConfigsSynonym> [1],
        /// Its type (v3+, [`config`]).
        config_type: i8 [3],
        /// Its documentation (v3+), or null.
        documentation: Option<String> [3],
    }
}

message! {
    /// One resource's configs.
    pub struct DescribeConfigsResult {
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
        /// The resource's type.
        resource_type: i8 [0],
        /// The resource's name.
        resource_name: String [0],
        /// Its configs.
        configs: Vec<DescribeConfigsResourceResult> [0],
    }
}

message! {
    /// DescribeConfigs' response.
    pub struct DescribeConfigsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// Each resource asked for, in order.
        results: Vec<DescribeConfigsResult> [0],
    }
}

message! {
    /// DescribeCluster's request (`DescribeClusterRequest.json`).
    pub struct DescribeClusterRequest {
        /// Whether to answer the operations the client may do.
        include_cluster_authorized_operations: bool [0],
        /// Which endpoints (v1+): 1, the brokers.
        endpoint_type: i8 [1] = 1,
    }
}

message! {
    /// A broker DescribeCluster lists.
    pub struct DescribeClusterBroker {
        /// Its node id.
        broker_id: i32 [0],
        /// Its host.
        host: String [0],
        /// Its port.
        port: i32 [0],
        /// Its rack, or null.
        rack: Option<String> [0],
    }
}

message! {
    /// DescribeCluster's response.
    pub struct DescribeClusterResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
        /// The endpoints listed (v1+): 1, the brokers.
        endpoint_type: i8 [1] = 1,
        /// The cluster's id.
        cluster_id: String [0],
        /// The controller's node id, -1 for none.
        controller_id: i32 [0] = -1,
        /// The live brokers.
        brokers: Vec<DescribeClusterBroker> [0],
        /// The operations the client may do: i32::MIN, not given.
        cluster_authorized_operations: i32 [0] = i32::MIN,
    }
}

message! {
    /// A resource whose configs AlterConfigs replaces, all at once.
    pub struct AlterConfigsResource<'a> {
        /// Its type ([`config::TOPIC`], [`config::BROKER`]).
        resource_type: i8 [0],
        /// Its name.
        resource_name: &'a str [0],
        /// Its configs from now on (name and value: the shape of
        /// CreateTopics' configs); any other goes back to the broker's.
        configs: Vec<CreatableTopicConfig<'a>> [0],
    }
}

message! {
    /// AlterConfigs' request (`AlterConfigsRequest.json`).
    pub struct AlterConfigsRequest<'a> {
        /// The resources.
        resources: Vec<AlterConfigsResource<'a>> [0],
        /// Check only, change nothing.
        validate_only: bool [0],
    }
}

message! {
    /// One resource's change (AlterConfigs and IncrementalAlterConfigs).
    pub struct AlterConfigsResourceResponse {
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message, or null.
        error_message: Option<String> [0],
        /// The resource's type.
        resource_type: i8 [0],
        /// The resource's name.
        resource_name: String [0],
    }
}

message! {
    /// AlterConfigs' response.
    pub struct AlterConfigsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// Each resource asked for, in order.
        responses: Vec<AlterConfigsResourceResponse> [0],
    }
}

message! {
    /// One change of IncrementalAlterConfigs.
    pub struct AlterableConfig<'a> {
        /// The config's name.
        name: &'a str [0],
        /// What to do ([`config::SET`], [`config::DELETE`],
        /// [`config::APPEND`], [`config::SUBTRACT`]).
        config_operation: i8 [0],
        /// The value, or null.
        value: Option<&'a str> [0],
    }
}

message! {
    /// A resource whose configs IncrementalAlterConfigs changes.
    pub struct IncrementalAlterConfigsResource<'a> {
        /// Its type.
        resource_type: i8 [0],
        /// Its name.
        resource_name: &'a str [0],
        /// The changes, in order.
        configs: Vec<AlterableConfig<'a>> [0],
    }
}

message! {
    /// IncrementalAlterConfigs' request (`IncrementalAlterConfigsRequest.json`).
    pub struct IncrementalAlterConfigsRequest<'a> {
        /// The resources.
        resources: Vec<IncrementalAlterConfigsResource<'a>> [0],
        /// Check only, change nothing.
        validate_only: bool [0],
    }
}

message! {
    /// IncrementalAlterConfigs' response.
    pub struct IncrementalAlterConfigsResponse {
        /// Throttling, always 0.
        throttle_time_ms: i32 [0],
        /// Each resource asked for, in order.
        responses: Vec<AlterConfigsResourceResponse> [0],
    }
}

message! {
    /// A topic to delete (v6+): by name, or by id (klog has no topic ids).
    pub struct DeleteTopicState<'a> {
        /// The topic's name, or null to name it by id.
        name: Option<&'a str> [6] nullable 6,
        /// The topic's id.
        topic_id: super::metadata::Uuid [6],
    }
}

message! {
    /// DeleteTopics' request (`DeleteTopicsRequest.json`).
    pub struct DeleteTopicsRequest<'a> {
        /// The topics to delete (v6+).
        topics: Vec<DeleteTopicState<'a>> [6],
        /// The names of the topics to delete (v0–5).
        topic_names: Vec<&'a str> [0, 5],
        /// How long to wait for the deletions to complete, in milliseconds.
        timeout_ms: i32 [0],
    }
}

message! {
    /// One topic's deletion.
    pub struct DeletableTopicResult {
        /// The topic's name (null for one named by an unknown id, v6+).
        name: Option<String> [0] nullable 6,
        /// The topic's id (v6+): the zero id.
        topic_id: super::metadata::Uuid [6],
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error message (v5+), or null.
        error_message: Option<String> [5],
    }
}

message! {
    /// DeleteTopics' response.
    pub struct DeleteTopicsResponse {
        /// Throttling (v1+), always 0.
        throttle_time_ms: i32 [1],
        /// Each topic asked for, in order.
        responses: Vec<DeletableTopicResult> [0],
    }
}

messages! {
    DeleteTopicsRequest<'a> = DELETE_TOPICS, 4;
    DeleteTopicsResponse = DELETE_TOPICS, 4;
    AlterConfigsRequest<'a> = ALTER_CONFIGS, 2;
    AlterConfigsResponse = ALTER_CONFIGS, 2;
    IncrementalAlterConfigsRequest<'a> = INCREMENTAL_ALTER_CONFIGS, 1;
    IncrementalAlterConfigsResponse = INCREMENTAL_ALTER_CONFIGS, 1;
    CreateTopicsRequest<'a> = CREATE_TOPICS, 5;
    CreateTopicsResponse = CREATE_TOPICS, 5;
    DescribeConfigsRequest<'a> = DESCRIBE_CONFIGS, 4;
    DescribeConfigsResponse = DESCRIBE_CONFIGS, 4;
    DescribeClusterRequest = DESCRIBE_CLUSTER, 0;
    DescribeClusterResponse = DESCRIBE_CLUSTER, 0;
}
