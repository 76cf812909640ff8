//! Requests: [`decode_request`] turns a frame's bytes (without its length)
//! into its header and a [`Request`] borrowing from the frame.
//!
//! Each request is a struct named after Kafka's message schema
//! (`clients/src/main/resources/common/message/*Request.json`), with the
//! schema's field names in snake_case, in wire order; a field absent from
//! the version read holds the schema's default. Only the versions of
//! [`super::response::supported`] decode; the bodies, per version
//! (`[..]` is an array of the structure inside, `?` nullable):
//!
//! | request | versions | body |
//! |---|---|---|
//! | Produce | 3–7 | `transactional_id string?` · `acks int16` · `timeout_ms int32` · `topic_data [name string · partition_data [index int32 · records bytes?]]` |
//! | Fetch | 4–12 | `replica_id int32` · `max_wait_ms int32` · `min_bytes int32` · `max_bytes int32` · `isolation_level int8` · `session_id int32` (7+) · `session_epoch int32` (7+) · `topics [topic string · partitions [partition int32 · current_leader_epoch int32 (9+) · fetch_offset int64 · last_fetched_epoch int32 (12+) · log_start_offset int64 (5+) · partition_max_bytes int32]]` · `forgotten_topics_data [topic string · partitions [int32]]` (7+) · `rack_id string` (11+); 12 flexible (compact forms, tagged fields skipped) |
//! | ApiVersions | 0–3 | nothing; v3 (flexible): `client_software_name compact_string` · `client_software_version compact_string` · `tagged_fields` |
//! | SaslHandshake | 0–1 | `mechanism string` (the broker refuses v0, whose SASL messages follow unframed; librdkafka asks that v0 be listed before it uses v1) |
//! | SaslAuthenticate | 0–1 | `auth_bytes bytes` |
//! | OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup | 2–8, 1–8, 0–4, 0–9, 0–4, 0–5, 0–5 | in [`super::group`], each declared once from its schema |
//! | DescribeAcls, CreateAcls, DeleteAcls, DescribeUserScramCredentials, AlterUserScramCredentials | 0–3, 0–3, 0–3, 0, 0 | in [`super::admin`], each declared once from its schema |
//! | DescribeGroups, ListGroups, DeleteGroups, OffsetDelete | 0–5, 0–5, 0–2, 0 | in [`super::admin_groups`], each declared once from its schema |
//! | OffsetForLeaderEpoch | 0–4 | in [`super::epochs`], declared once from its schema |
//! | InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit | 0–3 each | in [`super::txn`], each declared once from its schema |
//! | Metadata, ListOffsets | 0–12, 1–10 | in [`super::metadata`] and [`super::list_offsets`], each declared once from its schema |
//! | CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster | 0–6, 0–6, 0–4, 0–2, 0–1, 0–1 | in [`super::admin_topics`], each declared once from its schema |
//!
//! A request must use every byte of its frame (but AlterUserScramCredentials
//! may end with a second `tagged_fields`, as librdkafka writes it). Every count is checked
//! against the bytes left before its vector is allocated ([`super::wire`]),
//! so a request's vectors take at most a small multiple of its frame's
//! bytes.

use super::admin;
use super::admin_groups;
use super::admin_topics;
use super::api_key::*;
use super::epochs;
use super::group::{
    FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest,
};
use super::header::RequestHeader;
pub use super::list_offsets::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use super::message::{message, messages, Message};
pub use super::metadata::{MetadataRequest, MetadataRequestTopic};
use super::response::supported;
use super::txn;
use super::wire::{DecodeError, Decoder, Result};

/// A decoded request, one variant per API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// Produce (0).
    Produce(ProduceRequest<'a>),
    /// Fetch (1).
    Fetch(FetchRequest<'a>),
    /// ListOffsets (2).
    ListOffsets(ListOffsetsRequest<'a>),
    /// Metadata (3).
    Metadata(MetadataRequest<'a>),
    /// OffsetCommit (8).
    OffsetCommit(OffsetCommitRequest<'a>),
    /// OffsetFetch (9).
    OffsetFetch(OffsetFetchRequest<'a>),
    /// FindCoordinator (10).
    FindCoordinator(FindCoordinatorRequest<'a>),
    /// JoinGroup (11).
    JoinGroup(JoinGroupRequest<'a>),
    /// Heartbeat (12).
    Heartbeat(HeartbeatRequest<'a>),
    /// LeaveGroup (13).
    LeaveGroup(LeaveGroupRequest<'a>),
    /// SyncGroup (14).
    SyncGroup(SyncGroupRequest<'a>),
    /// ApiVersions (18).
    ApiVersions(ApiVersionsRequest<'a>),
    /// InitProducerId (22).
    InitProducerId(txn::InitProducerIdRequest<'a>),
    /// AddPartitionsToTxn (24).
    AddPartitionsToTxn(txn::AddPartitionsToTxnRequest<'a>),
    /// AddOffsetsToTxn (25).
    AddOffsetsToTxn(txn::AddOffsetsToTxnRequest<'a>),
    /// EndTxn (26).
    EndTxn(txn::EndTxnRequest<'a>),
    /// TxnOffsetCommit (28).
    TxnOffsetCommit(txn::TxnOffsetCommitRequest<'a>),
    /// SaslHandshake (17).
    SaslHandshake(SaslHandshakeRequest<'a>),
    /// SaslAuthenticate (36).
    SaslAuthenticate(super::sasl::SaslAuthenticateRequest<'a>),
    /// OffsetForLeaderEpoch (23).
    OffsetForLeaderEpoch(epochs::OffsetForLeaderEpochRequest<'a>),
    /// CreateTopics (19).
    CreateTopics(admin_topics::CreateTopicsRequest<'a>),
    /// DeleteTopics (20).
    DeleteTopics(admin_topics::DeleteTopicsRequest<'a>),
    /// DeleteRecords (21).
    DeleteRecords(super::delete_records::DeleteRecordsRequest<'a>),
    /// CreatePartitions (37).
    CreatePartitions(super::create_partitions::CreatePartitionsRequest<'a>),
    /// DescribeConfigs (32).
    DescribeConfigs(admin_topics::DescribeConfigsRequest<'a>),
    /// AlterConfigs (33).
    AlterConfigs(admin_topics::AlterConfigsRequest<'a>),
    /// IncrementalAlterConfigs (44).
    IncrementalAlterConfigs(admin_topics::IncrementalAlterConfigsRequest<'a>),
    /// DescribeCluster (60).
    DescribeCluster(admin_topics::DescribeClusterRequest),
    /// DescribeGroups (15).
    DescribeGroups(admin_groups::DescribeGroupsRequest<'a>),
    /// ListGroups (16).
    ListGroups(admin_groups::ListGroupsRequest<'a>),
    /// DeleteGroups (42).
    DeleteGroups(admin_groups::DeleteGroupsRequest<'a>),
    /// OffsetDelete (47).
    OffsetDelete(admin_groups::OffsetDeleteRequest<'a>),
    /// DescribeAcls (29).
    DescribeAcls(admin::AclFilter<'a>),
    /// CreateAcls (30).
    CreateAcls(admin::CreateAclsRequest<'a>),
    /// DeleteAcls (31).
    DeleteAcls(admin::DeleteAclsRequest<'a>),
    /// DescribeUserScramCredentials (50).
    DescribeUserScramCredentials(admin::DescribeUserScramCredentialsRequest<'a>),
    /// AlterUserScramCredentials (51).
    AlterUserScramCredentials(admin::AlterUserScramCredentialsRequest<'a>),
}

/// Why a frame is not a request this codec answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The API or its version is not implemented; the header was read, so
    /// that the broker can answer ApiVersions (in the v0 shape, error 35)
    /// and close the connection on any other.
    #[error("api key {api_key} version {api_version} is not supported")]
    Unsupported {
        /// The request's API key.
        api_key: i16,
        /// The request's API version.
        api_version: i16,
        /// The request's correlation id.
        correlation_id: i32,
        /// The request's client id.
        client_id: Option<String>,
    },
    /// The frame does not decode: its header (then both ids are `None`)
    /// or its body.
    #[error("{error}")]
    Invalid {
        /// The API key, when the header could be read.
        api_key: Option<i16>,
        /// The correlation id, when the header could be read.
        correlation_id: Option<i32>,
        /// What did not decode.
        error: DecodeError,
    },
}

/// Decodes a request frame's bytes (without its 4-byte length): its header,
/// then its body in the header's version.
pub fn decode_request(body: &[u8]) -> Result<(RequestHeader<'_>, Request<'_>), RequestError> {
    let mut d = Decoder::new(body);
    let header = RequestHeader::decode(&mut d).map_err(|error| RequestError::Invalid {
        api_key: None,
        correlation_id: None,
        error,
    })?;
    let unsupported = || RequestError::Unsupported {
        api_key: header.api_key,
        api_version: header.api_version,
        correlation_id: header.correlation_id,
        client_id: header.client_id.map(str::to_owned),
    };
    match supported(header.api_key) {
        Some((min, max)) if (min..=max).contains(&header.api_version) => {}
        _ => return Err(unsupported()),
    }
    let invalid = |error| RequestError::Invalid {
        api_key: Some(header.api_key),
        correlation_id: Some(header.correlation_id),
        error,
    };
    header.decode_tags(&mut d).map_err(invalid)?;
    let request = match decode_body(header.api_key, header.api_version, &mut d) {
        Some(Ok(request)) => request,
        Some(Err(error)) => return Err(invalid(error)),
        None => return Err(unsupported()),
    };
    if header.api_key == ALTER_USER_SCRAM_CREDENTIALS && d.remaining() > 0 {
        // librdkafka (2.16) ends this request with a second, empty
        // `tagged_fields`, which Kafka's broker never reads.
        d.tagged_fields("AlterUserScramCredentials trailing tagged_fields")
            .map_err(invalid)?;
    }
    if let Request::Metadata(MetadataRequest { topics: None, .. }) = &request {
        // librdkafka (2.16) asks for every topic in a flexible version
        // with 3 bytes after the body (the room it kept for the topic
        // count), which Kafka's broker never reads. The frame bounds them.
        if header.api_version >= 9 && d.remaining() <= 4 {
            return Ok((header, request));
        }
    }
    d.finish("request").map_err(invalid)?;
    Ok((header, request))
}

/// The body of a request of `api_key` at `version` (a supported one);
/// `None` for an API this codec has no decoder for.
fn decode_body<'a>(api_key: i16, version: i16, d: &mut Decoder<'a>) -> Option<Result<Request<'a>>> {
    Some(match api_key {
        PRODUCE => ProduceRequest::decode(d, version).map(Request::Produce),
        FETCH => <FetchRequest as Message>::decode(d, version).map(Request::Fetch),
        LIST_OFFSETS => {
            <ListOffsetsRequest as Message>::decode(d, version).map(Request::ListOffsets)
        }
        METADATA => <MetadataRequest as Message>::decode(d, version).map(Request::Metadata),
        OFFSET_COMMIT => {
            <OffsetCommitRequest as Message>::decode(d, version).map(Request::OffsetCommit)
        }
        OFFSET_FETCH => {
            <OffsetFetchRequest as Message>::decode(d, version).map(Request::OffsetFetch)
        }
        FIND_COORDINATOR => {
            <FindCoordinatorRequest as Message>::decode(d, version).map(Request::FindCoordinator)
        }
        JOIN_GROUP => <JoinGroupRequest as Message>::decode(d, version).map(Request::JoinGroup),
        HEARTBEAT => <HeartbeatRequest as Message>::decode(d, version).map(Request::Heartbeat),
        LEAVE_GROUP => <LeaveGroupRequest as Message>::decode(d, version).map(Request::LeaveGroup),
        SYNC_GROUP => <SyncGroupRequest as Message>::decode(d, version).map(Request::SyncGroup),
        API_VERSIONS => ApiVersionsRequest::decode(d, version).map(Request::ApiVersions),
        INIT_PRODUCER_ID => Message::decode(d, version).map(Request::InitProducerId),
        ADD_PARTITIONS_TO_TXN => Message::decode(d, version).map(Request::AddPartitionsToTxn),
        ADD_OFFSETS_TO_TXN => Message::decode(d, version).map(Request::AddOffsetsToTxn),
        END_TXN => Message::decode(d, version).map(Request::EndTxn),
        TXN_OFFSET_COMMIT => Message::decode(d, version).map(Request::TxnOffsetCommit),
        SASL_HANDSHAKE => SaslHandshakeRequest::decode(d, version).map(Request::SaslHandshake),
        SASL_AUTHENTICATE => Message::decode(d, version).map(Request::SaslAuthenticate),
        CREATE_TOPICS => Message::decode(d, version).map(Request::CreateTopics),
        DELETE_TOPICS => Message::decode(d, version).map(Request::DeleteTopics),
        DELETE_RECORDS => Message::decode(d, version).map(Request::DeleteRecords),
        CREATE_PARTITIONS => Message::decode(d, version).map(Request::CreatePartitions),
        OFFSET_FOR_LEADER_EPOCH => Message::decode(d, version).map(Request::OffsetForLeaderEpoch),
        DESCRIBE_CONFIGS => Message::decode(d, version).map(Request::DescribeConfigs),
        ALTER_CONFIGS => Message::decode(d, version).map(Request::AlterConfigs),
        INCREMENTAL_ALTER_CONFIGS => {
            Message::decode(d, version).map(Request::IncrementalAlterConfigs)
        }
        DESCRIBE_CLUSTER => Message::decode(d, version).map(Request::DescribeCluster),
        DESCRIBE_GROUPS => Message::decode(d, version).map(Request::DescribeGroups),
        LIST_GROUPS => Message::decode(d, version).map(Request::ListGroups),
        DELETE_GROUPS => Message::decode(d, version).map(Request::DeleteGroups),
        OFFSET_DELETE => Message::decode(d, version).map(Request::OffsetDelete),
        DESCRIBE_ACLS => Message::decode(d, version).map(Request::DescribeAcls),
        CREATE_ACLS => Message::decode(d, version).map(Request::CreateAcls),
        DELETE_ACLS => Message::decode(d, version).map(Request::DeleteAcls),
        DESCRIBE_USER_SCRAM_CREDENTIALS => {
            Message::decode(d, version).map(Request::DescribeUserScramCredentials)
        }
        ALTER_USER_SCRAM_CREDENTIALS => {
            Message::decode(d, version).map(Request::AlterUserScramCredentials)
        }
        _ => return None,
    })
}

/// Produce (`ProduceRequest.json`), versions 3–11.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRequest<'a> {
    /// The transactional id, or null when the producer is not transactional.
    pub transactional_id: Option<&'a str>,
    /// 0: no response; 1: the leader appended; -1: every in-sync replica.
    pub acks: i16,
    /// How long to wait for the acknowledgments, in milliseconds.
    pub timeout_ms: i32,
    /// Each topic to produce to.
    pub topic_data: Vec<TopicProduceData<'a>>,
}

/// A topic of a [`ProduceRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicProduceData<'a> {
    /// The topic name.
    pub name: &'a str,
    /// Each partition to produce to.
    pub partition_data: Vec<PartitionProduceData<'a>>,
}

/// A partition of a [`TopicProduceData`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProduceData<'a> {
    /// The partition index.
    pub index: i32,
    /// The record batches (RecordBatch v2), as sent.
    pub records: Option<&'a [u8]>,
}

impl<'a> ProduceRequest<'a> {
    /// Decodes a Produce body of `version` (3–11; 9+ is flexible: compact
    /// forms and tagged fields, none of which klog knows).
    pub fn decode(d: &mut Decoder<'a>, version: i16) -> Result<ProduceRequest<'a>> {
        if !super::header::is_flexible(PRODUCE, version) {
            return Ok(ProduceRequest {
                transactional_id: d.nullable_string("produce transactional_id")?,
                acks: d.i16("produce acks")?,
                timeout_ms: d.i32("produce timeout_ms")?,
                topic_data: d.array(6, "produce topic_data", |d| {
                    Ok(TopicProduceData {
                        name: d.string("produce topic name")?,
                        partition_data: d.array(8, "produce partition_data", |d| {
                            Ok(PartitionProduceData {
                                index: d.i32("produce partition index")?,
                                records: d.nullable_bytes("produce records")?,
                            })
                        })?,
                    })
                })?,
            });
        }
        let request = ProduceRequest {
            transactional_id: d.compact_nullable_string("produce transactional_id")?,
            acks: d.i16("produce acks")?,
            timeout_ms: d.i32("produce timeout_ms")?,
            topic_data: d.compact_array(3, "produce topic_data", |d| {
                let topic = TopicProduceData {
                    name: d.compact_string("produce topic name")?,
                    partition_data: d.compact_array(6, "produce partition_data", |d| {
                        let partition = PartitionProduceData {
                            index: d.i32("produce partition index")?,
                            records: d.compact_nullable_bytes("produce records")?,
                        };
                        d.tagged_fields("produce partition tagged_fields")?;
                        Ok(partition)
                    })?,
                };
                d.tagged_fields("produce topic tagged_fields")?;
                Ok(topic)
            })?,
        };
        d.tagged_fields("produce tagged_fields")?;
        Ok(request)
    }
}

message! {
    /// A partition of a [`FetchTopic`].
    pub struct FetchPartition {
        /// The partition index.
        partition: i32 [0],
        /// The leader epoch the consumer knows (v9+; -1 when absent).
        current_leader_epoch: i32 [9] = -1,
        /// The offset to fetch from.
        fetch_offset: i64 [0],
        /// The epoch of the last record the client fetched (v12+; -1 when
        /// absent): the broker says where the log diverged from it.
        last_fetched_epoch: i32 [12] = -1,
        /// A follower's log start offset (v5+; -1 when absent).
        log_start_offset: i64 [5] = -1,
        /// The most bytes of records of this partition.
        partition_max_bytes: i32 [0],
    }
}

message! {
    /// A topic of a [`FetchRequest`].
    pub struct FetchTopic<'a> {
        /// The topic name.
        topic: &'a str [0],
        /// The partitions to fetch.
        partitions: Vec<FetchPartition> [0],
    }
}

message! {
    /// A topic of [`FetchRequest::forgotten_topics_data`] (v7+).
    pub struct ForgottenTopic<'a> {
        /// The topic name.
        topic: &'a str [0],
        /// The partitions to forget.
        partitions: Vec<i32> [0],
    }
}

message! {
    /// Fetch (`FetchRequest.json`), versions 4–12 (12 is flexible: its
    /// tagged fields, the cluster id among them, are skipped).
    pub struct FetchRequest<'a> {
        /// The broker id of a follower, or -1 for a consumer.
        replica_id: i32 [0],
        /// The longest wait for `min_bytes`, in milliseconds.
        max_wait_ms: i32 [0],
        /// The fewest bytes worth answering (else wait).
        min_bytes: i32 [0],
        /// The most bytes of records in the response.
        max_bytes: i32 [0],
        /// 0: read uncommitted; 1: read committed.
        isolation_level: i8 [0],
        /// The fetch session id (v7+; 0: none).
        session_id: i32 [7],
        /// The fetch session epoch (v7+; -1 when absent).
        session_epoch: i32 [7] = -1,
        /// The topics to fetch.
        topics: Vec<FetchTopic<'a>> [0],
        /// Partitions to drop from the fetch session (v7+).
        forgotten_topics_data: Vec<ForgottenTopic<'a>> [7],
        /// The consumer's rack (v11+; empty when absent).
        rack_id: &'a str [11],
    }
}

messages! {
    FetchRequest<'a> = FETCH, 12;
}

/// ApiVersions (`ApiVersionsRequest.json`), versions 0–3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersionsRequest<'a> {
    /// The client's software name (v3+; empty when absent).
    pub client_software_name: &'a str,
    /// The client's software version (v3+; empty when absent).
    pub client_software_version: &'a str,
}

impl<'a> ApiVersionsRequest<'a> {
    /// Decodes an ApiVersions body of `version` (0–3; v3 is flexible).
    pub fn decode(d: &mut Decoder<'a>, version: i16) -> Result<ApiVersionsRequest<'a>> {
        if version < 3 {
            return Ok(ApiVersionsRequest {
                client_software_name: "",
                client_software_version: "",
            });
        }
        let request = ApiVersionsRequest {
            client_software_name: d.compact_string("api_versions client_software_name")?,
            client_software_version: d.compact_string("api_versions client_software_version")?,
        };
        d.tagged_fields("api_versions tagged_fields")?;
        Ok(request)
    }
}

/// SaslHandshake (`SaslHandshakeRequest.json`), versions 0–1 (the
/// broker refuses version 0, whose SASL messages follow without Kafka's
/// framing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaslHandshakeRequest<'a> {
    /// The mechanism the client will use.
    pub mechanism: &'a str,
}

impl<'a> SaslHandshakeRequest<'a> {
    /// Decodes a SaslHandshake body of `version` (0–1).
    pub fn decode(d: &mut Decoder<'a>, _version: i16) -> Result<SaslHandshakeRequest<'a>> {
        Ok(SaslHandshakeRequest {
            mechanism: d.string("sasl_handshake mechanism")?,
        })
    }
}
