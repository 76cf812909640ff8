//! The Kafka wire protocol, sans-I/O: enough of it for Kafka's own clients
//! (kcat and librdkafka, kafka-python, kafkajs) to produce, fetch, list
//! metadata and consume in groups on klog's logs.
//!
//! This module encodes into and decodes from byte slices; the broker's
//! Kafka listener does the I/O. It is hand-written rather than taken from
//! a crate so that no frame, however hostile, panics the broker or makes
//! it allocate more than the frame's own size: every length and count is
//! checked against the bytes left before anything is allocated
//! ([`wire`]). The `kafka-protocol` crate checks it in a differential test
//! (`tests/kafka_codec.rs`).
//!
//! # Frames
//!
//! Every message on a connection is a frame: an `int32` length (big-endian,
//! like every Kafka integer), then that many bytes. A request's bytes are a
//! request header, then the request's body; a response's are a response
//! header, then the body.
//!
//! | frame | bytes |
//! |---|---|
//! | request | `length int32` · request header v1 or v2 · body |
//! | response | `length int32` · response header v0 (`correlation_id int32`) · body |
//!
//! The headers and their versions are in [`header`], the primitive types
//! in [`wire`]. The group and offset APIs are in [`group`], and the
//! consumer protocol their JoinGroup metadata and SyncGroup assignments
//! carry in [`consumer`]. A request header is v2 (v1 with `tagged_fields`) in a
//! flexible version, v1 otherwise. A flexible version also writes its
//! strings, bytes and arrays in the compact forms and ends every structure
//! with `tagged_fields`. klog answers ApiVersions (even v3) with the
//! response header v0, by Kafka's rule, and the admin APIs' flexible
//! versions with v1; the tag sections it writes are always empty
//! (librdkafka before 2.2 skips tagged fields wrongly).
//!
//! A client may send several requests before it reads their responses;
//! they are answered in order, each with its request's `correlation_id`.
//! A Produce with `acks` 0 gets no response at all.
//!
//! # APIs and versions
//!
//! | API | key | klog | Kafka | flexible from | why not Kafka's newest |
//! |---|---:|---|---|---:|---|
//! | Produce | 0 | 3–11 | 0–11 | 9 | — (v8's per-record errors are always empty: a batch is taken or refused whole, and the partition's `error_message` says why; v10–11's hint of the new leader on `NOT_LEADER`, KIP-951, is not given: the client asks Metadata) |
//! | Fetch | 1 | 4–12 | 0–17 | 12 | v13+ name topics by id, and klog has no topic ids (v12's `diverging_epoch` is answered; its hint of the current leader on `NOT_LEADER`, tag 1, is not: the client asks Metadata) |
//! | ListOffsets | 2 | 1–10 | 0–10 | 6 | — |
//! | Metadata | 3 | 0–12 | 0–12 | 9 | — (topic ids are the zero id) |
//! | OffsetCommit | 8 | 2–8 | 0–9 | 8 | v9 carries the new consumer protocol's member epochs (KIP-848), which klog does not speak |
//! | OffsetFetch | 9 | 1–8 | 0–9 | 6 | v9 carries the new consumer protocol's member epochs (KIP-848) (v8's groups are answered each on its own, the first 1,000 of a request) |
//! | FindCoordinator | 10 | 0–4 | 0–6 | 3 | v5–6 answer transaction versions and share coordinators: klog has neither |
//! | JoinGroup | 11 | 0–9 | 0–9 | 6 | — (v9's `skip_assignment` is always false: no static members) |
//! | Heartbeat | 12 | 0–4 | 0–4 | 4 | — |
//! | LeaveGroup | 13 | 0–5 | 0–5 | 4 | — (a static member, named by its instance id alone, is unknown: no static membership yet) |
//! | SyncGroup | 14 | 0–5 | 0–5 | 4 | — |
//! | DescribeGroups | 15 | 0–5 | 0–5 | 5 | — |
//! | ListGroups | 16 | 0–5 | 0–5 | 3 | — |
//! | SaslHandshake | 17 | 1 | 0–1 | — | v0 sends SASL unframed: refused |
//! | ApiVersions | 18 | 0–4 | 0–4 | 3 | — |
//! | CreateTopics | 19 | 0–6 | 0–7 | 5 | v7 answers each topic's id: klog has no topic ids |
//! | DeleteTopics | 20 | 0–6 | 0–6 | 4 | — (a topic named by id is unknown: klog has no topic ids) |
//! | DeleteRecords | 21 | 0–2 | 0–2 | 2 | — |
//! | InitProducerId | 22 | 0–3 | 0–5 | 2 | v4 adds TRANSACTION_ABORTABLE, v5 per-transaction epoch bumps (KIP-890), which klog's coordinator does not do |
//! | AddPartitionsToTxn | 24 | 0–3 | 0–5 | 3 | v4+ are brokers' (KIP-890's check by a partition's leader) |
//! | AddOffsetsToTxn | 25 | 0–3 | 0–4 | 3 | v4 adds TRANSACTION_ABORTABLE (KIP-890) |
//! | EndTxn | 26 | 0–3 | 0–5 | 3 | v4 adds TRANSACTION_ABORTABLE, v5 per-transaction epoch bumps (KIP-890) |
//! | TxnOffsetCommit | 28 | 0–3 | 0–4 | 3 | v4 adds TRANSACTION_ABORTABLE (KIP-890) |
//! | OffsetForLeaderEpoch | 23 | 0–4 | 0–4 | 4 | — |
//! | DescribeAcls, CreateAcls, DeleteAcls | 29–31 | 0–3 | 0–3 | 2 | — |
//! | DescribeConfigs | 32 | 0–4 | 0–4 | 4 | — |
//! | AlterConfigs | 33 | 0–2 | 0–2 | 2 | — (topic configs, and a broker's topic-level defaults; its other configs are its command line) |
//! | SaslAuthenticate | 36 | 0–2 | 0–2 | 2 | — |
//! | CreatePartitions | 37 | 0–3 | 0–3 | 2 | — |
//! | DeleteGroups | 42 | 0–2 | 0–2 | 2 | — |
//! | IncrementalAlterConfigs | 44 | 0–1 | 0–1 | 1 | — (as AlterConfigs) |
//! | OffsetDelete | 47 | 0 | 0 | — | — |
//! | DescribeUserScramCredentials, AlterUserScramCredentials | 50–51 | 0 | 0 | 0 | — |
//! | DescribeCluster | 60 | 0–1 | 0–1 | 0 | — |
//!
//! Not answered (ApiVersions does not list them, so clients refuse before
//! they ask; README's "What klog does not do"): WriteTxnMarkers (27,
//! brokers' own: klog's write their markers over klog's protocol),
//! DescribeTransactions and ListTransactions (65–66), and the new
//! consumer and share group protocols (KIP-848, KIP-932). "Kafka" is the
//! `validVersions` of Kafka's message schemas (its 4.0 development
//! branch); the oldest versions there that klog lacks (Produce v0–2,
//! Fetch v0–3, ListOffsets v0, OffsetCommit v0–1, OffsetFetch v0) are
//! those Kafka 4 removed (KIP-896).
//!
//! The admin APIs ([`admin`], [`admin_groups`], [`admin_topics`],
//! [`create_partitions`], [`delete_records`]), OffsetForLeaderEpoch
//! ([`epochs`]), Metadata ([`metadata`]), ListOffsets ([`list_offsets`]) and Fetch's request are declared once each
//! ([`message`]) and answered with the response header v1 in their
//! flexible versions.
//!
//! CreateTopics stops at v6: v7 answers each topic's id (a UUID), and klog
//! has no topic ids yet (Metadata answers the zero id from v10, as Kafka
//! does for a topic it cannot name by id).
//!
//! Only the versions the codec implements are advertised (the response
//! module's `supported` is the one source of that table). A request of an
//! unknown API or version still yields its header, so that the broker can
//! answer an ApiVersions request of a newer version with
//! [`UNSUPPORTED_VERSION`] in the v0 shape (the client then retries with a
//! version from the table) and close the connection on any other.
//!
//! # Error codes
//!
//! Kafka's numbers, as constants: [`NONE`] (0) is success.

pub mod admin;
pub mod admin_groups;
pub mod admin_topics;
pub mod consumer;
pub mod create_partitions;
pub mod delete_records;
pub mod epochs;
pub mod group;
pub mod header;
pub mod list_offsets;
pub mod message;
pub mod metadata;
pub mod records;
pub mod request;
pub mod response;
pub mod sasl;
pub mod txn;
pub mod wire;

/// Kafka's API keys (`ApiKeys`) of the APIs klog implements or answers.
pub mod api_key {
    /// Produce.
    pub const PRODUCE: i16 = 0;
    /// Fetch.
    pub const FETCH: i16 = 1;
    /// ListOffsets.
    pub const LIST_OFFSETS: i16 = 2;
    /// Metadata.
    pub const METADATA: i16 = 3;
    /// OffsetCommit.
    pub const OFFSET_COMMIT: i16 = 8;
    /// OffsetFetch.
    pub const OFFSET_FETCH: i16 = 9;
    /// FindCoordinator.
    pub const FIND_COORDINATOR: i16 = 10;
    /// JoinGroup.
    pub const JOIN_GROUP: i16 = 11;
    /// Heartbeat.
    pub const HEARTBEAT: i16 = 12;
    /// LeaveGroup.
    pub const LEAVE_GROUP: i16 = 13;
    /// SyncGroup.
    pub const SYNC_GROUP: i16 = 14;
    /// DescribeGroups.
    pub const DESCRIBE_GROUPS: i16 = 15;
    /// ListGroups.
    pub const LIST_GROUPS: i16 = 16;
    /// SaslHandshake.
    pub const SASL_HANDSHAKE: i16 = 17;
    /// ApiVersions.
    pub const API_VERSIONS: i16 = 18;
    /// CreateTopics.
    pub const CREATE_TOPICS: i16 = 19;
    /// DeleteTopics.
    pub const DELETE_TOPICS: i16 = 20;
    /// DeleteRecords.
    pub const DELETE_RECORDS: i16 = 21;
    /// InitProducerId.
    pub const INIT_PRODUCER_ID: i16 = 22;
    /// OffsetForLeaderEpoch.
    pub const OFFSET_FOR_LEADER_EPOCH: i16 = 23;
    /// AddPartitionsToTxn.
    pub const ADD_PARTITIONS_TO_TXN: i16 = 24;
    /// AddOffsetsToTxn.
    pub const ADD_OFFSETS_TO_TXN: i16 = 25;
    /// EndTxn.
    pub const END_TXN: i16 = 26;
    /// TxnOffsetCommit.
    pub const TXN_OFFSET_COMMIT: i16 = 28;
    /// DescribeAcls.
    pub const DESCRIBE_ACLS: i16 = 29;
    /// CreateAcls.
    pub const CREATE_ACLS: i16 = 30;
    /// DeleteAcls.
    pub const DELETE_ACLS: i16 = 31;
    /// SaslAuthenticate.
    pub const SASL_AUTHENTICATE: i16 = 36;
    /// CreatePartitions.
    pub const CREATE_PARTITIONS: i16 = 37;
    /// DescribeConfigs.
    pub const DESCRIBE_CONFIGS: i16 = 32;
    /// AlterConfigs.
    pub const ALTER_CONFIGS: i16 = 33;
    /// DeleteGroups.
    pub const DELETE_GROUPS: i16 = 42;
    /// IncrementalAlterConfigs.
    pub const INCREMENTAL_ALTER_CONFIGS: i16 = 44;
    /// OffsetDelete.
    pub const OFFSET_DELETE: i16 = 47;
    /// DescribeUserScramCredentials.
    pub const DESCRIBE_USER_SCRAM_CREDENTIALS: i16 = 50;
    /// AlterUserScramCredentials.
    pub const ALTER_USER_SCRAM_CREDENTIALS: i16 = 51;
    /// DescribeCluster.
    pub const DESCRIBE_CLUSTER: i16 = 60;
}

/// The name of an API (Kafka's, as in its message schemas), for messages;
/// "an unknown API" for a key not known to this codec.
pub fn api_name(api_key: i16) -> &'static str {
    use api_key::*;
    match api_key {
        PRODUCE => "Produce",
        FETCH => "Fetch",
        LIST_OFFSETS => "ListOffsets",
        METADATA => "Metadata",
        OFFSET_COMMIT => "OffsetCommit",
        OFFSET_FETCH => "OffsetFetch",
        FIND_COORDINATOR => "FindCoordinator",
        JOIN_GROUP => "JoinGroup",
        HEARTBEAT => "Heartbeat",
        LEAVE_GROUP => "LeaveGroup",
        SYNC_GROUP => "SyncGroup",
        DESCRIBE_GROUPS => "DescribeGroups",
        LIST_GROUPS => "ListGroups",
        DELETE_GROUPS => "DeleteGroups",
        OFFSET_DELETE => "OffsetDelete",
        SASL_HANDSHAKE => "SaslHandshake",
        API_VERSIONS => "ApiVersions",
        CREATE_TOPICS => "CreateTopics",
        DELETE_TOPICS => "DeleteTopics",
        DELETE_RECORDS => "DeleteRecords",
        CREATE_PARTITIONS => "CreatePartitions",
        DESCRIBE_CONFIGS => "DescribeConfigs",
        ALTER_CONFIGS => "AlterConfigs",
        INCREMENTAL_ALTER_CONFIGS => "IncrementalAlterConfigs",
        DESCRIBE_CLUSTER => "DescribeCluster",
        INIT_PRODUCER_ID => "InitProducerId",
        ADD_PARTITIONS_TO_TXN => "AddPartitionsToTxn",
        ADD_OFFSETS_TO_TXN => "AddOffsetsToTxn",
        END_TXN => "EndTxn",
        TXN_OFFSET_COMMIT => "TxnOffsetCommit",
        OFFSET_FOR_LEADER_EPOCH => "OffsetForLeaderEpoch",
        SASL_AUTHENTICATE => "SaslAuthenticate",
        DESCRIBE_ACLS => "DescribeAcls",
        CREATE_ACLS => "CreateAcls",
        DELETE_ACLS => "DeleteAcls",
        DESCRIBE_USER_SCRAM_CREDENTIALS => "DescribeUserScramCredentials",
        ALTER_USER_SCRAM_CREDENTIALS => "AlterUserScramCredentials",
        _ => "an unknown API",
    }
}

/// No error.
pub const NONE: i16 = 0;
/// The server experienced an unexpected error.
pub const UNKNOWN_SERVER_ERROR: i16 = -1;
/// The requested offset is outside the partition's log.
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
/// A record or batch failed its CRC or other checks.
pub const CORRUPT_MESSAGE: i16 = 2;
/// No such topic or partition on this server.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// The partition has no leader now (a leader election is under way).
pub const LEADER_NOT_AVAILABLE: i16 = 5;
/// This server is not the partition's leader.
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// The request timed out (acks=all: not durable in time).
pub const REQUEST_TIMED_OUT: i16 = 7;
/// A record or batch is larger than the server accepts.
pub const MESSAGE_TOO_LARGE: i16 = 10;
/// The committed offset's metadata is too long.
pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
/// The coordinator is loading its state: retry.
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
/// The group coordinator is not available.
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// This server is not the group's coordinator.
pub const NOT_COORDINATOR: i16 = 16;
/// The topic name is not valid.
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// The produce request's records exceed the server's bound.
pub const RECORD_LIST_TOO_LARGE: i16 = 18;
/// Fewer in-sync replicas than required.
pub const NOT_ENOUGH_REPLICAS: i16 = 19;
/// Appended, but fewer in-sync replicas than required.
pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
/// `acks` is not 0, 1 or -1.
pub const INVALID_REQUIRED_ACKS: i16 = 21;
/// The member's generation is not the group's.
pub const ILLEGAL_GENERATION: i16 = 22;
/// The member's protocols match none of the group's.
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
/// The group id is empty or otherwise invalid.
pub const INVALID_GROUP_ID: i16 = 24;
/// The member id is not known to the coordinator.
pub const UNKNOWN_MEMBER_ID: i16 = 25;
/// The session timeout is outside the coordinator's range.
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
/// The group is rebalancing: rejoin.
pub const REBALANCE_IN_PROGRESS: i16 = 27;
/// The API version is not supported.
pub const UNSUPPORTED_VERSION: i16 = 35;
/// A transaction still open holds the group's offset of the partition:
/// ask again (OffsetFetch with `require_stable`).
pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
/// The request does not decode or breaks the protocol.
pub const INVALID_REQUEST: i16 = 42;
/// The record format is older than this server accepts (magic below 2).
pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
/// A policy of the server refused the request.
pub const POLICY_VIOLATION: i16 = 44;
/// The ACLs do not allow the client this on the topic.
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// The ACLs do not allow the client this on the group.
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
/// The ACLs do not allow the client this on the cluster.
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
/// The broker does not take the SASL mechanism asked for.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// A request out of turn in the SASL exchange.
pub const ILLEGAL_SASL_STATE: i16 = 34;
/// No authorizer: the broker runs without `--authorize`.
pub const SECURITY_DISABLED: i16 = 54;
/// The named resource (a user) does not exist.
pub const RESOURCE_NOT_FOUND: i16 = 91;
/// A user (or one of its credentials) is named twice in one request.
pub const DUPLICATE_RESOURCE: i16 = 92;
/// A SCRAM user name is empty or a credential unacceptable.
pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;
/// SASL refused the client's credentials.
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// The batch's producer epoch is older than the producer's last: another
/// instance of the producer took over.
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
/// A batch whose sequence does not follow its producer's last.
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// A transactional request its transaction's state does not allow.
pub const INVALID_TXN_STATE: i16 = 48;
/// The producer id is not the transactional id's.
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
/// The transaction timeout is not within the broker's bounds.
pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
/// The transaction is being committed or aborted: retry.
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
/// Another instance of the transactional producer took over.
pub const PRODUCER_FENCED: i16 = 90;
/// Not tried: another part of the request failed.
pub const OPERATION_NOT_ATTEMPTED: i16 = 55;
/// The client may not use that transactional id.
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
/// The server could not read or write its files.
pub const KAFKA_STORAGE_ERROR: i16 = 56;
/// The group does not exist.
pub const GROUP_ID_NOT_FOUND: i16 = 69;
/// The topic exists already.
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
/// The partition count is not valid.
pub const INVALID_PARTITIONS: i16 = 37;
/// The replication factor is not valid (more than the live brokers).
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
/// The replica assignment is not valid.
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
/// The configuration is not valid.
pub const INVALID_CONFIG: i16 = 40;
/// The group has members: it cannot be deleted.
pub const NON_EMPTY_GROUP: i16 = 68;
/// A member of the group reads the topic: its offsets cannot be deleted.
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
/// The request's leader epoch is older than the partition's.
pub const FENCED_LEADER_EPOCH: i16 = 74;
/// The request's leader epoch is newer than this server knows.
pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
/// A new member is given its id, to join again with (KIP-394).
pub const MEMBER_ID_REQUIRED: i16 = 79;
/// The group holds as many members as a coordinator takes.
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
/// The batch is compressed with a codec this server does not support.
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
/// A record is invalid (transactional or control batches here).
pub const INVALID_RECORD: i16 = 87;
/// No topic has the id asked for (klog's topics have none).
pub const UNKNOWN_TOPIC_ID: i16 = 100;
