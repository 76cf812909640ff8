//! Responses: one struct per response, named after Kafka's message schema
//! (`*Response.json`) with its field names in snake_case, each with
//! `encode(version, out)` appending the body of that version; [`frame`]
//! wraps a body in its length and the response header v0.
//!
//! The bodies, per version (`[..]` is an array of the structure inside,
//! `?` nullable):
//!
//! | response | versions | body |
//! |---|---|---|
//! | Produce | 3–11 | `responses [name string · partition_responses [index int32 · error_code int16 · base_offset int64 · log_append_time_ms int64 · log_start_offset int64 (5+) · record_errors [] (8+) · error_message nullable string (8+)]]` · `throttle_time_ms int32`; 9+ flexible (compact forms, empty tagged fields) |
//! | Fetch | 4–12 | `throttle_time_ms int32` · `error_code int16` (7+) · `session_id int32` (7+) · `responses [topic string · partitions [partition_index int32 · error_code int16 · high_watermark int64 · last_stable_offset int64 · log_start_offset int64 (5+) · aborted_transactions [producer_id int64 · first_offset int64]? · preferred_read_replica int32 (11+) · records bytes]]`; 12 flexible (compact forms; a partition's tagged fields hold `diverging_epoch`, tag 0, when the log diverged from the client's `last_fetched_epoch`) |
//! | ApiVersions | 0–3 | `error_code int16` · `api_keys [api_key int16 · min_version int16 · max_version int16]` · `throttle_time_ms int32` (1+); v3 is flexible: compact array, and empty `tagged_fields` after each key and at the end |
//! | InitProducerId | 0–1 | `throttle_time_ms int32` · `error_code int16` · `producer_id int64` · `producer_epoch int16` |
//! | OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup | 2–8, 1–8, 0–4, 0–9, 0–4, 0–5, 0–5 | in [`super::group`], each declared once from its schema |
//!
//! An ApiVersions request of a version this codec does not implement is
//! answered in the v0 shape with [`UNSUPPORTED_VERSION`] and the whole
//! table ([`api_versions_unsupported`]), as Kafka's broker does, so that
//! the client retries with a version it finds there.

use super::api_key::*;
use super::header::put_response_header;
pub use super::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use super::message::Message;
pub use super::metadata::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use super::wire::{
    put_array, put_array_len, put_compact_array, put_compact_array_len,
    put_compact_nullable_string, put_compact_string, put_empty_tagged_fields, put_i16, put_i32,
    put_i64, put_nullable_string, put_string, put_uvarint,
};
use super::UNSUPPORTED_VERSION;

/// A version range of one API, as the ApiVersions response lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersion {
    /// The API key.
    pub api_key: i16,
    /// The oldest version implemented.
    pub min_version: i16,
    /// The newest version implemented.
    pub max_version: i16,
}

const fn api(api_key: i16, min_version: i16, max_version: i16) -> ApiVersion {
    ApiVersion {
        api_key,
        min_version,
        max_version,
    }
}

/// Every API and version range this codec decodes and encodes, in API key
/// order: the one source of [`supported`], of the ApiVersions answer and
/// of which requests [`super::request::decode_request`] accepts. A row is
/// added with its request's decoder and its response's encoder.
pub const SUPPORTED: &[ApiVersion] = &[
    api(PRODUCE, 3, 11),
    api(FETCH, 4, 12),
    api(LIST_OFFSETS, 1, 10),
    api(METADATA, 0, 12),
    api(OFFSET_COMMIT, 2, 8),
    api(OFFSET_FETCH, 1, 8),
    api(FIND_COORDINATOR, 0, 4),
    api(JOIN_GROUP, 0, 9),
    api(HEARTBEAT, 0, 4),
    api(LEAVE_GROUP, 0, 5),
    api(SYNC_GROUP, 0, 5),
    api(DESCRIBE_GROUPS, 0, 5),
    api(LIST_GROUPS, 0, 5),
    api(SASL_HANDSHAKE, 0, 1),
    api(API_VERSIONS, 0, 4),
    api(CREATE_TOPICS, 0, 6),
    api(DELETE_TOPICS, 0, 6),
    api(DELETE_RECORDS, 0, 2),
    api(INIT_PRODUCER_ID, 0, 3),
    api(OFFSET_FOR_LEADER_EPOCH, 0, 4),
    api(ADD_PARTITIONS_TO_TXN, 0, 3),
    api(ADD_OFFSETS_TO_TXN, 0, 3),
    api(END_TXN, 0, 3),
    api(TXN_OFFSET_COMMIT, 0, 3),
    api(DESCRIBE_ACLS, 0, 3),
    api(CREATE_ACLS, 0, 3),
    api(DELETE_ACLS, 0, 3),
    api(DESCRIBE_CONFIGS, 0, 4),
    api(ALTER_CONFIGS, 0, 2),
    api(SASL_AUTHENTICATE, 0, 2),
    api(CREATE_PARTITIONS, 0, 3),
    api(DELETE_GROUPS, 0, 2),
    api(INCREMENTAL_ALTER_CONFIGS, 0, 1),
    api(OFFSET_DELETE, 0, 0),
    api(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0),
    api(ALTER_USER_SCRAM_CREDENTIALS, 0, 0),
    api(DESCRIBE_CLUSTER, 0, 1),
];

/// The versions of `api_key` this codec implements, `(min, max)`; `None`
/// for an API it does not.
pub fn supported(api_key: i16) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|a| a.api_key == api_key)
        .map(|a| (a.min_version, a.max_version))
}

/// Appends a response frame: its 4-byte length, the response header v0
/// (`correlation_id`) and the body that `body` appends.
///
/// # Panics
///
/// When the body reaches 2 GiB, which no bounded response does.
pub fn frame(out: &mut Vec<u8>, correlation_id: i32, body: impl FnOnce(&mut Vec<u8>)) {
    frame_sized(out, correlation_id, 0, body);
}

/// [`frame`] of a body that `body` appends but for `elsewhere` bytes the
/// caller sends between them (a fetch's records, from a file).
///
/// # Panics
///
/// When the body reaches 2 GiB, which no bounded response does.
pub fn frame_sized(
    out: &mut Vec<u8>,
    correlation_id: i32,
    elsewhere: u64,
    body: impl FnOnce(&mut Vec<u8>),
) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    put_response_header(out, correlation_id);
    body(out);
    let len = (out.len() - start - 4) as u64 + elsewhere;
    let len = i32::try_from(len).expect("a response frame is below 2 GiB");
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// Appends a frame that answers with a declared message in `version`: the
/// response header v1 (with its empty `tagged_fields`) in a flexible
/// version, v0 otherwise.
pub fn frame_message<'a, M: Message<'a>>(
    out: &mut Vec<u8>,
    correlation_id: i32,
    version: i16,
    message: &M,
) {
    let v = M::version(version);
    frame(out, correlation_id, |out| {
        if v.flexible {
            put_empty_tagged_fields(out);
        }
        message.put(out, v);
    });
}

/// Appends the whole answer to an ApiVersions request of a version not
/// implemented: a frame with the v0 body, [`UNSUPPORTED_VERSION`] and the
/// table of [`SUPPORTED`].
pub fn api_versions_unsupported(out: &mut Vec<u8>, correlation_id: i32) {
    frame(out, correlation_id, |out| {
        ApiVersionsResponse::new(UNSUPPORTED_VERSION).encode(0, out);
    });
}

/// ApiVersions (`ApiVersionsResponse.json`), versions 0–3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersionsResponse {
    /// The error code, or 0.
    pub error_code: i16,
    /// The APIs and versions the broker implements.
    pub api_keys: Vec<ApiVersion>,
    /// How long the client was throttled, in milliseconds (v1+).
    pub throttle_time_ms: i32,
}

impl ApiVersionsResponse {
    /// The answer with `error_code` and the table of [`SUPPORTED`].
    pub fn new(error_code: i16) -> ApiVersionsResponse {
        ApiVersionsResponse {
            error_code,
            api_keys: SUPPORTED.to_vec(),
            throttle_time_ms: 0,
        }
    }

    /// Appends the body of `version`; v3 is flexible, its tag sections
    /// empty.
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        let flexible = version >= 3;
        put_i16(out, self.error_code);
        let each = |out: &mut Vec<u8>, a: &ApiVersion| {
            put_i16(out, a.api_key);
            put_i16(out, a.min_version);
            put_i16(out, a.max_version);
            if flexible {
                put_empty_tagged_fields(out);
            }
        };
        if flexible {
            put_compact_array(out, &self.api_keys, each);
        } else {
            put_array(out, &self.api_keys, each);
        }
        if version >= 1 {
            put_i32(out, self.throttle_time_ms);
        }
        if flexible {
            put_empty_tagged_fields(out);
        }
    }
}

/// Produce (`ProduceResponse.json`), versions 3–11.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceResponse<'a> {
    /// Each topic of the request.
    pub responses: Vec<TopicProduceResponse<'a>>,
    /// How long the client was throttled, in milliseconds.
    pub throttle_time_ms: i32,
}

/// A topic of a [`ProduceResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicProduceResponse<'a> {
    /// The topic name.
    pub name: &'a str,
    /// Each partition of the topic.
    pub partition_responses: Vec<PartitionProduceResponse>,
}

/// A partition of a [`TopicProduceResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProduceResponse {
    /// The partition index.
    pub index: i32,
    /// The error code, or 0.
    pub error_code: i16,
    /// The offset of the first record appended.
    pub base_offset: i64,
    /// The append time with LogAppendTime, else -1.
    pub log_append_time_ms: i64,
    /// The partition's log start offset (v5+).
    pub log_start_offset: i64,
    /// Why the error (v8+), or null.
    pub error_message: Option<String>,
}

impl ProduceResponse<'_> {
    /// Appends the body of `version` (3–11; 9+ is flexible, with empty
    /// tagged fields: no leader hint on NOT_LEADER, KIP-951). From v8 a
    /// partition says why it failed; `record_errors` is always empty (a
    /// batch is taken or refused whole).
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        let flexible = super::header::is_flexible(PRODUCE, version);
        let partition = |out: &mut Vec<u8>, p: &PartitionProduceResponse| {
            put_i32(out, p.index);
            put_i16(out, p.error_code);
            put_i64(out, p.base_offset);
            put_i64(out, p.log_append_time_ms);
            if version >= 5 {
                put_i64(out, p.log_start_offset);
            }
            match (version >= 8, flexible) {
                (false, _) => {}
                (true, false) => {
                    put_array_len(out, 0);
                    put_nullable_string(out, p.error_message.as_deref());
                }
                (true, true) => {
                    put_compact_array_len(out, 0);
                    put_compact_nullable_string(out, p.error_message.as_deref());
                    put_empty_tagged_fields(out);
                }
            }
        };
        let topic = |out: &mut Vec<u8>, t: &TopicProduceResponse<'_>| {
            if flexible {
                put_compact_string(out, t.name);
                put_compact_array(out, &t.partition_responses, partition);
                put_empty_tagged_fields(out);
            } else {
                put_string(out, t.name);
                put_array(out, &t.partition_responses, partition);
            }
        };
        match flexible {
            true => put_compact_array(out, &self.responses, topic),
            false => put_array(out, &self.responses, topic),
        }
        put_i32(out, self.throttle_time_ms);
        if flexible {
            put_empty_tagged_fields(out);
        }
    }
}

/// Fetch (`FetchResponse.json`), versions 4–12.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse<'a> {
    /// How long the client was throttled, in milliseconds.
    pub throttle_time_ms: i32,
    /// The error of the whole fetch (v7+).
    pub error_code: i16,
    /// The fetch session id (v7+; 0: sessionless).
    pub session_id: i32,
    /// Each topic of the response.
    pub responses: Vec<FetchableTopicResponse<'a>>,
}

/// A topic of a [`FetchResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchableTopicResponse<'a> {
    /// The topic name.
    pub topic: &'a str,
    /// Each partition of the topic.
    pub partitions: Vec<PartitionData<'a>>,
}

/// A partition of a [`FetchableTopicResponse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionData<'a> {
    /// The partition index.
    pub partition_index: i32,
    /// The error code, or 0.
    pub error_code: i16,
    /// One past the last offset a consumer may read.
    pub high_watermark: i64,
    /// The last stable offset (the high watermark without transactions).
    pub last_stable_offset: i64,
    /// The log start offset (v5+).
    pub log_start_offset: i64,
    /// The aborted transactions in the records (null or empty here).
    pub aborted_transactions: Option<Vec<AbortedTransaction>>,
    /// The replica to read from instead (v11+; -1: this one).
    pub preferred_read_replica: i32,
    /// Where the log diverged from the client's last fetched epoch
    /// (v12+): the largest epoch at or below it and that epoch's end;
    /// the client truncates there.
    pub diverging_epoch: Option<(i32, i64)>,
    /// Record batches (RecordBatch v2).
    pub records: &'a [u8],
    /// Bytes of record batches the caller sends right after this
    /// partition's encoded bytes, from a file (counted in the records'
    /// length, not written here: see [`FetchResponse::encode_with`]).
    pub records_after: u64,
}

/// An entry of [`PartitionData::aborted_transactions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTransaction {
    /// The producer of the aborted transaction.
    pub producer_id: i64,
    /// The first offset of the aborted transaction.
    pub first_offset: i64,
}

impl FetchResponse<'_> {
    /// Appends the body of `version` (4–12; 12 is flexible: compact
    /// forms, and tagged fields that are empty but for a partition's
    /// `diverging_epoch`).
    ///
    /// # Panics
    ///
    /// When a partition has `records_after`: use [`FetchResponse::encode_with`].
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        let mut gaps = Vec::new();
        self.encode_with(version, out, &mut gaps);
        assert!(gaps.is_empty(), "records after a partition: encode_with");
    }

    /// [`FetchResponse::encode`], noting in `gaps`, in partition order,
    /// where in `out` each partition's `records_after` go: the body is
    /// `out` with those bytes inserted there.
    pub fn encode_with(&self, version: i16, out: &mut Vec<u8>, gaps: &mut Vec<usize>) {
        let flexible = super::header::is_flexible(FETCH, version);
        put_i32(out, self.throttle_time_ms);
        if version >= 7 {
            put_i16(out, self.error_code);
            put_i32(out, self.session_id);
        }
        let mut partition = |out: &mut Vec<u8>, p: &PartitionData<'_>| {
            p.encode(version, flexible, out);
            if p.records_after > 0 {
                gaps.push(out.len());
            }
            if flexible {
                p.put_tags(out);
            }
        };
        if flexible {
            put_compact_array_len(out, self.responses.len());
            for t in &self.responses {
                put_compact_string(out, t.topic);
                put_compact_array(out, &t.partitions, &mut partition);
                put_empty_tagged_fields(out);
            }
            put_empty_tagged_fields(out);
        } else {
            put_array(out, &self.responses, |out, t| {
                put_string(out, t.topic);
                put_array(out, &t.partitions, &mut partition);
            });
        }
    }
}

impl PartitionData<'_> {
    /// The partition up to its records' bytes (and `records_after`).
    fn encode(&self, version: i16, flexible: bool, out: &mut Vec<u8>) {
        put_i32(out, self.partition_index);
        put_i16(out, self.error_code);
        put_i64(out, self.high_watermark);
        put_i64(out, self.last_stable_offset);
        if version >= 5 {
            put_i64(out, self.log_start_offset);
        }
        let aborted = |out: &mut Vec<u8>, a: &AbortedTransaction| {
            put_i64(out, a.producer_id);
            put_i64(out, a.first_offset);
            if flexible {
                put_empty_tagged_fields(out);
            }
        };
        match (&self.aborted_transactions, flexible) {
            (None, false) => super::wire::put_null_array(out),
            (None, true) => put_uvarint(out, 0),
            (Some(list), false) => put_array(out, list, aborted),
            (Some(list), true) => put_compact_array(out, list, aborted),
        }
        if version >= 11 {
            put_i32(out, self.preferred_read_replica);
        }
        let len = self.records.len() as u64 + self.records_after;
        if flexible {
            let len = u32::try_from(len + 1).expect("a fetch's records are below 4 GiB");
            put_uvarint(out, len);
        } else {
            put_i32(
                out,
                i32::try_from(len).expect("a fetch's records are below 2 GiB"),
            );
        }
        out.extend_from_slice(self.records);
    }

    /// A flexible version's tagged fields: `diverging_epoch` (tag 0, an
    /// `EpochEndOffset`: `epoch int32` · `end_offset int64` · its own
    /// empty tags) when there is one.
    fn put_tags(&self, out: &mut Vec<u8>) {
        let Some((epoch, end_offset)) = self.diverging_epoch else {
            return put_empty_tagged_fields(out);
        };
        put_uvarint(out, 1);
        put_uvarint(out, 0);
        put_uvarint(out, 4 + 8 + 1);
        put_i32(out, epoch);
        put_i64(out, end_offset);
        put_empty_tagged_fields(out);
    }
}

/// SaslHandshake (`SaslHandshakeResponse.json`), versions 0–1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslHandshakeResponse {
    /// The error code, or 0.
    pub error_code: i16,
    /// The mechanisms the broker takes.
    pub mechanisms: Vec<&'static str>,
}

impl SaslHandshakeResponse {
    /// Appends the body of `version` (0–1).
    pub fn encode(&self, _version: i16, out: &mut Vec<u8>) {
        put_i16(out, self.error_code);
        put_array(out, &self.mechanisms, |out, m| put_string(out, m));
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::Decoder;
    use super::*;

    #[test]
    fn an_unsupported_api_versions_gets_the_v0_shape_with_error_35() {
        let mut out = vec![0xaa];
        api_versions_unsupported(&mut out, 77);
        let mut d = Decoder::new(&out[1..]);
        let len = d.i32("len").unwrap();
        assert_eq!(len as usize, d.remaining());
        assert_eq!(d.i32("correlation_id").unwrap(), 77);
        assert_eq!(d.i16("error_code").unwrap(), UNSUPPORTED_VERSION);
        let n = d.array_len(6, "api_keys").unwrap();
        assert_eq!(n, SUPPORTED.len());
        for a in SUPPORTED {
            assert_eq!(d.i16("key").unwrap(), a.api_key);
            assert_eq!(d.i16("min").unwrap(), a.min_version);
            assert_eq!(d.i16("max").unwrap(), a.max_version);
        }
        d.finish("v0 has no throttle_time_ms").unwrap();
    }

    #[test]
    fn the_table_is_in_key_order_and_each_range_is_sane() {
        for w in SUPPORTED.windows(2) {
            assert!(w[0].api_key < w[1].api_key, "{w:?}");
        }
        for a in SUPPORTED {
            assert!(
                0 <= a.min_version && a.min_version <= a.max_version,
                "{a:?}"
            );
        }
        assert_eq!(supported(API_VERSIONS), Some((0, 4)));
        assert_eq!(supported(OFFSET_COMMIT), Some((2, 8)));
        assert_eq!(supported(ADD_PARTITIONS_TO_TXN), Some((0, 3)));
        // WriteTxnMarkers (27), brokers' own: not implemented, not advertised.
        assert_eq!(supported(27), None);
    }
}
