//! The pull protocol between clients and `klog-broker`: frames, requests,
//! responses and error codes.
//!
//! This module is sans-I/O: it encodes into and decodes from byte slices.
//! The broker (`crate::broker`) and the client (`crate::client`) do the I/O.
//! The code has three rooms, all re-exported here: `frame` (the field
//! reader and writers), `request` and `response`; this page holds the
//! whole wire, so that one reading gives every byte.
//!
//! # Frames
//!
//! Every message on a connection is a frame: a `u32` length, then that many
//! bytes. All integers are little-endian, like the record format, so that a
//! fetch can carry a segment's bytes unchanged.
//!
//! | frame    | bytes                                                                    |
//! |----------|--------------------------------------------------------------------------|
//! | request  | `length u32` · `api_key u16` · `api_version u16` · `correlation_id u32` · body |
//! | response | `length u32` · `correlation_id u32` · `error u16` · `message str` · body (only when `error` is 0) |
//!
//! A client may send several requests before reading responses; the broker
//! answers each connection's requests in the order it received them, and a
//! response carries its request's `correlation_id`. A request's `length` is
//! checked against the broker's `--max-request-bytes` before anything is
//! allocated; a longer one is answered with `request_too_large` (when its
//! header could be read) and the connection is closed, since what follows
//! cannot be trusted to be a frame.
//!
//! Types: `str` is `u16` length + UTF-8; `bytes` is `u32` length + bytes;
//! `i8`/`i64` are two's complement; `epoch` is an `i64` that is -1 (none:
//! not checked, or not known) or a leader epoch from 0 to `2^32 - 1`, and
//! any other value is `invalid_request`.
//!
//! # Requests (version 1; produce version 2; fetch versions 4 to 6)
//!
//! | api_key | request        | body                                                                   |
//! |--------:|----------------|------------------------------------------------------------------------|
//! | 0 | produce      | `acks i8` (0, 1, -1 = all) · `timeout_ms u32` · `transactional_id str` (version 3 only; empty: none) · `topic str` · `partition u32` · `records bytes` (one batch: Kafka's RecordBatch v2, [`crate::storage::record`]; in version 1, a legacy klog batch, [`crate::storage::record::legacy`], which the broker converts) |
//! | 1 | fetch        | `wait_ms_max u32` · `bytes_min u32` · `response_bytes_max u32` · `replica_id str` (version 5 on) · `isolation i8` (version 6: 0 read_uncommitted, 1 read_committed) · `count u16` · count × (`topic str` · `partition u32` · `offset u64` · `bytes_max u32` · `leader_epoch epoch` (version 5 on)) |
//! | 2 | list_offsets | `topic str` · `partition u32` · `at i64` (-2 earliest, -1 latest, ≥ 0 the first record at or after this timestamp, ms) |
//! | 3 | metadata     | `count u16` · count × `topic str` (0 topics: every topic)              |
//! | 4 | create_topic | `topic str` · `partitions u32` (0: the broker's `--partitions`)        |
//! | 5 | offsets_for_leader_epoch | `topic str` · `partition u32` · `current_leader_epoch epoch` · `leader_epoch u32` |
//! | 6 | sasl_handshake | `mechanism str` (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`) |
//! | 7 | sasl_authenticate | `message bytes` (the client's next SASL message) |
//! | 8 | registry     | nothing: which registry coordinates the broker's groups |
//! | 9 | init_producer_id | version 1: nothing (a producer id for an idempotent producer). Version 2: `transactional_id str` (1 to 249 bytes) · `timeout_ms u32` (1 to 900,000): the id's producer id and a new epoch ([`TxnRequest`]) |
//! | 10 | write_txn_marker | `topic str` · `partition u32` · `producer_id i64` · `producer_epoch u16` · `commit i8` (1 commit, 0 abort) · `coordinator_epoch u32`: a transaction coordinator's marker for the partition's leader ([`crate::storage::record::control`]) |
//! | 11 | offset_commit | `group str` (1 to 249 bytes) · `topic str` · `partition u32` · `offset u64` (below 2^63) · `generation u64` (the committer's claim of the partition in the registry) · `mode i8` (0 commit: never lowers the stored offset; 1 fence: stores the generation alone, a new claim's first word; 2 reset: any offset; 3 delete), to the leader of the group's partition of the offsets topic ([`crate::coord::offsets_topic`]) |
//! | 12 | offset_fetch | `group str` · `topic str` (empty: every topic) · `partition u32` (`2^32 - 1`: every partition) |
//! | 13 | add_to_txn | `transactional_id str` · `producer_id i64` · `producer_epoch u16` · `count u16` (at most 1,000) · count × (`topic str` · `partition u32`): partitions join the transaction, which begins with the first |
//! | 14 | txn_offset_commit | `transactional_id str` · `producer_id i64` · `producer_epoch u16` · `group str` · `count u16` (at most 1,000) · count × (`topic str` · `partition u32` · `offset u64`): the group joins the transaction, and its offsets are committed with it |
//! | 15 | end_txn | `transactional_id str` · `producer_id i64` · `producer_epoch u16` · `commit i8` (1 commit, 0 abort) |
//!
//! # Responses (bodies after `error` and `message`)
//!
//! | request      | body                                                                       |
//! |--------------|----------------------------------------------------------------------------|
//! | produce      | `base_offset u64` (offset of the batch's first record). `acks` 0: no response at all |
//! | fetch        | `count u16` · count × (`topic str` · `partition u32` · `error u16` · `message str` · `start_offset u64` · `end_offset u64` · `leader_epoch epoch` (version 5 on) · `last_stable_offset u64` · `aborted_count u16` · aborted_count × (`producer_id i64` · `first_offset u64`) (version 6) · `records bytes`: Kafka RecordBatch v2 batches) |
//! | list_offsets | `offset i64` (-1: no record at or after the timestamp)                     |
//! | metadata     | `count u16` · count × (`topic str` · `error u16` · `message str` · `partitions u32` · partitions × (`start_offset u64` · `end_offset u64`)) |
//! | create_topic | `partitions u32` (also sent with `topic_exists`, giving the existing count) |
//! | offsets_for_leader_epoch | `leader_epoch epoch` · `end_offset u64` (both -1, that is `2^64 - 1` for the offset, when the log has no epoch at or below the one asked) |
//! | sasl_handshake | `count u16` · count × `mechanism str` (those the broker takes; also sent with `unsupported_sasl_mechanism`) |
//! | sasl_authenticate | `message bytes` (the broker's next SASL message; after the last, the client is authenticated) |
//! | init_producer_id | `producer_id i64` · `producer_epoch u16` (0): an id no other producer of the cluster gets ([`crate::coord::producer_ids`]), for the producer fields of the batches it sends ([`crate::storage::producers`]). Refused `authorization_failed` to a client that may write to no topic |
//! | write_txn_marker | nothing: the marker is durable on the partition's in-sync replicas. Refused `authorization_failed` to a client without the cluster's cluster_action; `producer_fenced` when the producer's epoch, or its last marker's coordinator epoch, is newer |
//! | offset_commit | `before i64`: the offset stored before (-1: none), once the record is durable on the in-sync replicas of the offsets topic's partition. Refused `commit_fenced` when a later claim's generation is stored for the partition, or a newer one is not the registry's current claim (the message ends with the current generation, 0 for none); `not_leader`, `partition_elsewhere` or `leader_not_available` from a broker that does not lead the group's partition (the client looks the leader up in the registry); `authorization_failed` without the group's read (delete: delete) |
//! | init_producer_id (version 2) | as version 1. Refused `authorization_failed` without write on the transactional id; `concurrent_transactions` while its last transaction is being completed (retry); `coordinator_not_available` when the registry fails (retry) |
//! | add_to_txn, txn_offset_commit, end_txn | nothing, once the registry's entry for the transaction holds the change (end_txn: once the commit or abort is decided; its markers are written first where they can be, each durable on its partition's in-sync replicas). Refused `producer_fenced` to an older epoch, `invalid_producer_id_mapping` to another producer id, `invalid_txn_state` to a step the transaction's state does not allow, `authorization_failed` without write on the transactional id (and on each topic added; read on the group of txn_offset_commit) |
//! | offset_fetch | `count u32` · count × (`topic str` · `partition u32` · `offset u64`), sorted. Refused as offset_commit is, and without the group's describe |
//! | registry     | `registry str` (the broker's `--registry`: a directory's absolute path, on the broker's host, or a `zk://` address; empty when it has none). Refused `authorization_failed` to a client that may not describe the cluster |
//!
//! In a cluster, a metadata partition that the answering broker does not
//! serve reports both offsets as `2^64 - 1` ([`ELSEWHERE`]), and requests
//! for it get `partition_elsewhere`. A partition the broker holds but
//! cannot serve (damaged) reports `2^64 - 2` ([`OFFLINE`]), and requests for
//! it get `storage_error` saying why.
//!
//! A fetch partition's `records` are whole batches copied from a segment
//! with `sendfile` (a segment written before klog stored Kafka's format is
//! converted first, whole batches only), starting with the batch that holds `offset` (so the
//! first records may precede it: the client skips them); the byte budget
//! may cut the last batch short, and the client fetches it again from its
//! offset. A response carries at most `response_bytes_max` bytes of records
//! over all its partitions (and never more than the broker's
//! [`crate::limits::FETCH_RESPONSE_BYTES_MAX`]; version 1, which does not
//! send it, gets [`crate::limits::FETCH_RESPONSE_BYTES_DEFAULT`]), as Kafka's
//! `max_bytes`: the partitions after the budget is spent get no records.
//! Only the first partition with records may exceed its `bytes_max` and
//! the response's budget, by one whole batch, so that a fetch always
//! progresses; a client reading `response_bytes_max` therefore reads at
//! most [`fetch_response_frame_bytes`] of it. A message is at
//! most [`MESSAGE_BYTES_MAX`] bytes, and a fetch's topic names at most
//! [`crate::limits::TOPIC_NAME_BYTES_MAX`].
//! `end_offset` is one past the last record a consumer may see
//! (the high watermark: records are visible once durable under the flush
//! policy). A fetch with no visible record waits up to `wait_ms_max` for
//! `bytes_min` to arrive.
//!
//! # Authentication
//!
//! A broker started with `--sasl-mechanisms` takes nothing but
//! sasl_handshake and sasl_authenticate until a client has logged in:
//! any other request is answered `illegal_sasl_state` and the connection
//! closes. The client names its mechanism (sasl_handshake), then sends
//! the mechanism's messages one per sasl_authenticate, each answered with
//! the broker's, as Kafka's SaslHandshake v1 and SaslAuthenticate do
//! ([`crate::net::sasl`]). A refusal is `sasl_authentication_failed`,
//! after which the connection closes. Over TLS (`--tls-cert`), all of this
//! is inside the TLS connection.
//!
//! # Replication
//!
//! A follower is a consumer with a name: its fetch (version 5) says which
//! broker it is (`replica_id`, a broker id of at most
//! [`crate::limits::BROKER_ID_BYTES_MAX`] bytes; empty for a consumer) and,
//! per partition, the leader epoch it believes current; the answer gives
//! each partition's leader epoch as the answering broker knows it (-1 for
//! a partition it cannot serve). Each fetch is answered in the version it
//! was asked. Consumers send version 4 ([`fetch_request`]); followers, and
//! a consumer that checks epochs, version 5 ([`replica_fetch_request`]).
//!
//! A fetch of version 6 with `isolation` 1 (a consumer's, `klog-consume
//! -X isolation.level=read_committed`) is answered as Kafka answers
//! read_committed: its records end at the partition's last stable offset
//! (the first offset of the oldest transaction still open, at most the
//! high watermark), and each partition lists the aborted transactions
//! among them (producer id and first offset, at most
//! [`crate::storage::log::aborted::ABORTED_PER_FETCH`]), so that the consumer skips
//! an aborted transaction's records, each up to its producer's abort
//! marker. With `isolation` 0 the answer is version 5's, with the last
//! stable offset and no aborted list.
//!
//! offsets_for_leader_epoch is Kafka's OffsetsForLeaderEpoch (KIP-101,
//! KIP-279): a replica whose log ends in epoch `leader_epoch` asks where
//! that epoch ends on the leader, and truncates its log there before it
//! fetches. The answer is the largest epoch in the leader's log at or below
//! the one asked and the offset where it ends there (the start of the next
//! epoch; the latest epoch ends at the log's next offset, past records not
//! yet visible), or -1 when the log has no epoch at or below it or the one
//! asked is newer than its latest. Its errors are those of list_offsets.
//!
//! A request's `current_leader_epoch` (and a fetch partition's
//! `leader_epoch`) is the epoch the sender believes current, -1 when it
//! does not care: a broker that leads a newer epoch answers `fenced_epoch`,
//! one that knows only an older one `unknown_epoch`, and one that does not
//! lead the partition `not_leader`. This build carries them to the broker's
//! request handling unchecked; the broker's leader and follower roles check
//! them.
//!
//! # Errors
//!
//! The codes of [`ErrorCode`]; `message` says what was wrong in words. A
//! request with an unknown `api_key` or `api_version` is answered with
//! `unsupported_request`, and the connection stays open. A client reads a
//! code it does not know as `unknown` (1), with the broker's message.
//!
//! | code | name | meaning |
//! |---:|---|---|
//! | 0 | none | success |
//! | 1 | unknown | an error this build does not know |
//! | 2 | offset_out_of_range | the offset is outside the partition's log |
//! | 3 | corrupt_batch | a batch failed its checks (length, CRC, format) |
//! | 4 | unknown_topic | no such topic |
//! | 5 | unknown_partition | no such partition of the topic |
//! | 6 | record_too_large | a record is larger than `--max-record-bytes` |
//! | 7 | request_too_large | the request frame is larger than `--max-request-bytes` |
//! | 8 | invalid_topic | the topic name breaks the naming rule |
//! | 9 | unsupported_request | unknown api key or version |
//! | 10 | invalid_request | the request's bytes do not decode |
//! | 11 | timeout | acks=all: the records were not durable within the timeout |
//! | 12 | topic_exists | the topic exists already |
//! | 13 | storage_error | the broker could not read or write its files |
//! | 14 | shutting_down | the broker is shutting down |
//! | 15 | limit_reached | a bound of the broker was hit (connections, topics) |
//! | 16 | partition_elsewhere | the partition is placed on another broker of the cluster |
//! | 17 | disk_full | the broker's disk is full: the records were not stored |
//! | 18 | not_leader | this broker holds the partition but does not lead it now; the message names the leader when known |
//! | 19 | fenced_epoch | the request's leader epoch is older than the partition's: the sender follows a deposed leader |
//! | 20 | unknown_epoch | the request's leader epoch is newer than this broker knows yet: retry |
//! | 21 | not_enough_replicas | acks=all refused: fewer in-sync replicas than the minimum |
//! | 22 | leader_not_available | no in-sync replica is alive to lead: the partition is offline |
//! | 23 | sasl_authentication_failed | SASL refused the client: an unknown user or a wrong password |
//! | 24 | unsupported_sasl_mechanism | the broker does not take that SASL mechanism (or none at all) |
//! | 25 | illegal_sasl_state | a request other than SASL's before the client logged in, or SASL out of order |
//! | 26 | authorization_failed | the broker's ACLs (`--authorize`) do not allow the client this request; the message names the resource |
//! | 27 | out_of_order_sequence | an idempotent producer's batch does not follow its last (a gap, or numbers used for other records): send again in order from the first batch not acknowledged |
//! | 28 | producer_fenced | an idempotent producer's batch from an epoch older than its last: another instance took over |
//! | 29 | invalid_txn_state | a transactional producer's request its transaction's state does not allow (a batch outside the transaction it has open) |
//! | 30 | commit_fenced | an offset_commit by a claim of the partition that a later claim replaced: the member lost the partition |
//! | 31 | concurrent_transactions | the transactional id's last transaction is still being completed: retry |
//! | 32 | coordinator_not_available | the transaction coordinator cannot reach the registry now: retry |
//! | 33 | invalid_producer_id_mapping | the transactional id has no such producer id (init it first) |
//! | 34 | invalid_transaction_timeout | a transaction timeout outside 1 ms to 15 minutes |
//!
//! # Version history
//!
//! - version 1 of every request: the first.
//! - fetch version 2: `response_bytes_max`, the response's byte budget.
//!   The broker still reads version 1.
//! - error code 17 `disk_full`; metadata offsets `2^64 - 2` ([`OFFLINE`]) for
//!   a partition the broker holds but cannot serve. Older clients read the
//!   first as an unknown error and the second as a partition to fetch,
//!   which answers `storage_error`.
//! - replication (issue 13): fetch version 3, with `replica_id` and each
//!   partition's `leader_epoch` in the request and each partition's
//!   `leader_epoch` in the response; request 5 offsets_for_leader_epoch
//!   (version 1); error codes 18 `not_leader`, 19 `fenced_epoch`, 20
//!   `unknown_epoch`, 21 `not_enough_replicas`, 22 `leader_not_available`.
//!   The broker still reads fetch versions 1 and 2 and answers them in
//!   their own bytes; consumers keep sending version 2, so a new consumer
//!   reads from an older broker. Older clients read the new codes as
//!   `unknown`.
//! - authentication (issue 26): requests 6 sasl_handshake and 7
//!   sasl_authenticate (version 1); error codes 23 to 26. With
//!   `--authorize`, a metadata request for every topic lists only those
//!   the client may describe, and a named one it may not is
//!   `authorization_failed`.
//! - one batch format (issue 24): records are Kafka's RecordBatch v2 on
//!   both wires. Produce version 2 carries one; version 1 (a legacy klog
//!   batch) is still read and converted. Fetch versions 4 and 5 are
//!   versions 2 and 3 whose records are Kafka batches; versions 1 to 3,
//!   whose readers expect legacy batches, are answered
//!   `unsupported_request` saying so: upgrade clients and brokers together
//!   (a follower of an older build cannot fetch from a newer leader).
//! - transactions on klog's protocol (issue 30): init_producer_id version
//!   2 (a transactional id), requests 13 add_to_txn, 14 txn_offset_commit
//!   and 15 end_txn (version 1), produce version 3 (the batch's
//!   transactional id), error codes 31 to 34. A produce of a
//!   transactional batch (Kafka's attribute bit) must be of version 3,
//!   from a producer whose transaction holds the partition
//!   (`invalid_txn_state` otherwise). Producers that are not
//!   transactional keep sending versions 2 and 1.

pub use crate::error::ErrorCode;
use crate::limits;

mod frame;
mod offsets;
mod request;
mod response;
mod txn;

pub use frame::{finish_frame, put, Reader};
pub use offsets::{
    decode_commit_response, decode_offsets_response, put_commit_response, put_offsets_response,
    CommitMode, OffsetCommit, OffsetFetch,
};
pub use request::{
    append_produce_request, append_txn_produce_request, committed_fetch_request,
    create_topic_request, decode_request, decode_request_header, fetch_request,
    init_producer_id_request, list_offsets_request, metadata_request, offset_commit_request,
    offset_fetch_request, offsets_for_leader_epoch_request, produce_request, registry_request,
    replica_fetch_request, sasl_authenticate_request, sasl_handshake_request, start_request,
    write_txn_marker_request, FetchPartition, FetchWant, Request, RequestError, RequestHeader,
    TxnMarker, SASL_MESSAGE_BYTES_MAX,
};
pub use response::{
    begin_response, decode_epoch_end, decode_fetch_response, decode_metadata_response,
    decode_response_header, put_epoch_end, put_fetch_partition, put_topic_metadata, start_response,
    FetchPartitionHead, FetchedPartition, ResponseHeader, TopicMetadata,
};
pub use txn::{
    txn_request, TxnProducer, TxnRequest, INIT_VERSION_TXN, PRODUCE_VERSION_TXN,
    TRANSACTIONAL_ID_BYTES_MAX, TXN_PARTITIONS_MAX, TXN_TIMEOUT_MS_MAX,
};

/// Bytes of a frame's length prefix.
pub const LENGTH_BYTES: usize = 4;
/// Bytes of a request header after the length: api key, version, correlation id.
pub const REQUEST_HEADER_BYTES: usize = 8;
/// Bytes of a response header after the length, before the message text.
pub const RESPONSE_HEADER_BYTES: usize = 6;
/// Partitions in one fetch request, at most.
pub const FETCH_PARTITIONS_MAX: usize = 10_000;
/// Bytes of a response's message, at most (longer ones are cut).
pub const MESSAGE_BYTES_MAX: usize = 1024;

/// Bytes of a fetch response's head and its partitions' headers at most:
/// everything but the records.
const FETCH_RESPONSE_HEADERS_BYTES_MAX: u64 = {
    let head = RESPONSE_HEADER_BYTES + 2 + MESSAGE_BYTES_MAX + 2;
    let partition =
        2 + limits::TOPIC_NAME_BYTES_MAX + 4 + 2 + 2 + MESSAGE_BYTES_MAX + 8 + 8 + 8 + 4;
    (head + FETCH_PARTITIONS_MAX * partition) as u64
};

/// The longest frame body (after the length) a broker answers a fetch of
/// `response_bytes_max` with: the headers, the budget (cut to the
/// broker's [`limits::FETCH_RESPONSE_BYTES_MAX`]) and the one whole batch
/// the first partition with records may carry beyond it. A client reads no
/// longer fetch answer.
pub const fn fetch_response_frame_bytes(response_bytes_max: u32) -> u32 {
    let budget = if (response_bytes_max as u64) < limits::FETCH_RESPONSE_BYTES_MAX {
        response_bytes_max as u64
    } else {
        limits::FETCH_RESPONSE_BYTES_MAX
    };
    (FETCH_RESPONSE_HEADERS_BYTES_MAX + budget + limits::BATCH_BYTES_MAX as u64) as u32
}

// The longest fetch answer, whatever the budget asked, has a frame length.
const _: () = assert!(
    FETCH_RESPONSE_HEADERS_BYTES_MAX
        + limits::FETCH_RESPONSE_BYTES_MAX
        + limits::BATCH_BYTES_MAX as u64
        <= u32::MAX as u64
);
const _: () =
    assert!(limits::FETCH_RESPONSE_BYTES_DEFAULT as u64 <= limits::FETCH_RESPONSE_BYTES_MAX);

/// The fetch version a consumer sends ([`fetch_request`]): no replica id,
/// no leader epochs; records in Kafka's RecordBatch v2.
pub const FETCH_VERSION_CONSUMER: u16 = 4;

/// The fetch version that carries a replica id and leader epochs
/// ([`replica_fetch_request`]), and whose response carries each
/// partition's leader epoch; records in Kafka's RecordBatch v2.
pub const FETCH_VERSION_REPLICA: u16 = 5;

/// The fetch version of a consumer that reads committed records only
/// ([`committed_fetch_request`]): version 5's fields and an isolation
/// level; its response carries each partition's last stable offset and
/// the aborted transactions among its records.
pub const FETCH_VERSION_COMMITTED: u16 = 6;

/// The oldest fetch version a broker answers: older ones read klog's
/// legacy batches, which it no longer serves.
pub const FETCH_VERSION_MIN: u16 = FETCH_VERSION_CONSUMER;

/// The produce version whose batch is Kafka's RecordBatch v2 (version 1
/// carries a legacy batch, which the broker converts).
pub const PRODUCE_VERSION_KAFKA: u16 = 2;

/// An `epoch` field's value for none (not checked, or not known).
pub const NO_EPOCH: i64 = -1;

/// `acks` values.
pub const ACKS_NONE: i8 = 0;
/// Answer once appended.
pub const ACKS_LEADER: i8 = 1;
/// Answer once durable.
pub const ACKS_ALL: i8 = -1;

/// Both offsets of a metadata partition that this broker does not serve
/// (a cluster placed it on another broker; the registry says which).
pub const ELSEWHERE: u64 = u64::MAX;

/// Both offsets of a metadata partition that this broker holds but cannot
/// serve (damaged, waiting for `klog-recover`); requests for it get
/// `storage_error` with the reason.
pub const OFFLINE: u64 = u64::MAX - 1;

/// `at` of list_offsets: the first offset held.
pub const EARLIEST: i64 = -2;
/// `at` of list_offsets: one past the last visible offset.
pub const LATEST: i64 = -1;

/// The requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum ApiKey {
    /// Append a batch.
    Produce = 0,
    /// Read batches.
    Fetch = 1,
    /// Find an offset.
    ListOffsets = 2,
    /// Topics, partitions and offsets.
    Metadata = 3,
    /// Create a topic.
    CreateTopic = 4,
    /// Where a leader epoch ends (Kafka's OffsetsForLeaderEpoch).
    OffsetsForLeaderEpoch = 5,
    /// Which SASL mechanism the client will use.
    SaslHandshake = 6,
    /// One SASL message.
    SaslAuthenticate = 7,
    /// Which registry coordinates the broker's groups.
    Registry = 8,
    /// A producer id for an idempotent producer.
    InitProducerId = 9,
    /// A transaction marker, from its coordinator to a partition's leader.
    WriteTxnMarker = 10,
    /// A group's committed offset of a partition, written.
    OffsetCommit = 11,
    /// A group's committed offsets, read.
    OffsetFetch = 12,
    /// Partitions join a producer's transaction.
    AddToTxn = 13,
    /// A group's offsets, committed with a transaction.
    TxnOffsetCommit = 14,
    /// A transaction committed or aborted.
    EndTxn = 15,
}

impl ApiKey {
    /// The oldest version of most requests this build reads.
    pub const VERSION: u16 = 1;

    /// The oldest version of this request this build reads.
    pub const fn min_version(self) -> u16 {
        match self {
            ApiKey::Fetch => FETCH_VERSION_MIN,
            _ => ApiKey::VERSION,
        }
    }

    /// The newest version of this request, the one this build sends.
    pub const fn version(self) -> u16 {
        match self {
            ApiKey::Fetch => FETCH_VERSION_COMMITTED,
            ApiKey::Produce => PRODUCE_VERSION_TXN,
            ApiKey::InitProducerId => INIT_VERSION_TXN,
            _ => 1,
        }
    }

    /// Its name, for logs and metrics ("an unknown API" for another
    /// number).
    pub fn name_of(v: u16) -> &'static str {
        match ApiKey::from_u16(v) {
            Some(ApiKey::Produce) => "Produce",
            Some(ApiKey::Fetch) => "Fetch",
            Some(ApiKey::ListOffsets) => "ListOffsets",
            Some(ApiKey::Metadata) => "Metadata",
            Some(ApiKey::CreateTopic) => "CreateTopic",
            Some(ApiKey::OffsetsForLeaderEpoch) => "OffsetsForLeaderEpoch",
            Some(ApiKey::SaslHandshake) => "SaslHandshake",
            Some(ApiKey::SaslAuthenticate) => "SaslAuthenticate",
            Some(ApiKey::Registry) => "Registry",
            Some(ApiKey::InitProducerId) => "InitProducerId",
            Some(ApiKey::WriteTxnMarker) => "WriteTxnMarker",
            Some(ApiKey::OffsetCommit) => "OffsetCommit",
            Some(ApiKey::OffsetFetch) => "OffsetFetch",
            Some(ApiKey::AddToTxn) => "AddToTxn",
            Some(ApiKey::TxnOffsetCommit) => "TxnOffsetCommit",
            Some(ApiKey::EndTxn) => "EndTxn",
            None => "an unknown API",
        }
    }

    fn from_u16(v: u16) -> Option<ApiKey> {
        Some(match v {
            0 => ApiKey::Produce,
            1 => ApiKey::Fetch,
            2 => ApiKey::ListOffsets,
            3 => ApiKey::Metadata,
            4 => ApiKey::CreateTopic,
            5 => ApiKey::OffsetsForLeaderEpoch,
            6 => ApiKey::SaslHandshake,
            7 => ApiKey::SaslAuthenticate,
            8 => ApiKey::Registry,
            9 => ApiKey::InitProducerId,
            10 => ApiKey::WriteTxnMarker,
            11 => ApiKey::OffsetCommit,
            12 => ApiKey::OffsetFetch,
            13 => ApiKey::AddToTxn,
            14 => ApiKey::TxnOffsetCommit,
            15 => ApiKey::EndTxn,
            _ => return None,
        })
    }
}

/// Bytes from a peer that break the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolError(pub String);

type Result<T> = std::result::Result<T, ProtocolError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replication_error_codes_have_their_numbers_and_later_ones_are_unknown() {
        let names: Vec<_> = (16..=35).map(|c| ErrorCode::from_u16(c).name()).collect();
        assert_eq!(
            names,
            [
                "partition_elsewhere",
                "disk_full",
                "not_leader",
                "fenced_epoch",
                "unknown_epoch",
                "not_enough_replicas",
                "leader_not_available",
                "sasl_authentication_failed",
                "unsupported_sasl_mechanism",
                "illegal_sasl_state",
                "authorization_failed",
                "out_of_order_sequence",
                "producer_fenced",
                "invalid_txn_state",
                "commit_fenced",
                "concurrent_transactions",
                "coordinator_not_available",
                "invalid_producer_id_mapping",
                "invalid_transaction_timeout",
                "unknown"
            ]
        );
        // The module docs' table has every code, by number and name.
        let docs = include_str!("mod.rs");
        for code in 0..=34u16 {
            assert_eq!(ErrorCode::from_u16(code) as u16, code, "{code} round trips");
            let row = format!("//! | {code} | {} |", ErrorCode::from_u16(code).name());
            assert!(docs.contains(&row), "no row {row:?} in the error table");
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = crate::random::XorShift::new(0x1234_5678_9ABC_DEF1);
        let mut next = || rng.next();
        let want = FetchWant {
            wait_ms_max: 1,
            bytes_min: 1,
            response_bytes_max: 1,
        };
        let part = FetchPartition {
            topic: "t".into(),
            partition: 0,
            offset: 0,
            bytes_max: 1,
            leader_epoch: None,
        };
        let mut valid = Vec::new();
        fetch_request(&mut valid, 1, want, std::slice::from_ref(&part));
        let mut replica = Vec::new();
        let part = FetchPartition {
            leader_epoch: Some(3),
            ..part
        };
        replica_fetch_request(&mut replica, 1, "b1", want, &[part]);
        let mut epoch_end = Vec::new();
        offsets_for_leader_epoch_request(&mut epoch_end, 1, "t", 0, Some(2), 1);
        let valid = [valid, replica, epoch_end];
        for round in 0..50_000 {
            let mut buf = if round % 2 == 0 {
                valid[round / 2 % valid.len()][4..].to_vec()
            } else {
                (0..next() % 64).map(|_| next() as u8).collect()
            };
            for _ in 0..next() % 4 {
                if !buf.is_empty() {
                    let i = next() as usize % buf.len();
                    buf[i] = next() as u8;
                }
            }
            let _ = decode_request(&buf);
            let mut r = Reader::new(&buf);
            if decode_response_header(&mut r).is_ok() {
                let at = r.position();
                let _ = decode_fetch_response(&mut r, FETCH_VERSION_CONSUMER);
                let _ = decode_fetch_response(&mut Reader::at(&buf, at), FETCH_VERSION_REPLICA);
                let _ = decode_epoch_end(&mut Reader::at(&buf, at));
                let mut r = Reader::at(&buf, at);
                let _ = decode_metadata_response(&mut r);
            }
        }
    }
}
