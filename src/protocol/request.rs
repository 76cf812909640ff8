//! Requests: their header, the decoded [`Request`], an encoder for each
//! (the client's side) and [`decode_request`] (the broker's). Their bodies
//! are in the table of [`crate::protocol`].

use std::ops::Range;

use super::frame::{finish_frame, put, Reader};
use super::{
    ApiKey, ProtocolError, Result, ACKS_ALL, ACKS_LEADER, ACKS_NONE, FETCH_PARTITIONS_MAX,
    FETCH_VERSION_COMMITTED, FETCH_VERSION_CONSUMER, FETCH_VERSION_MIN, FETCH_VERSION_REPLICA,
    REQUEST_HEADER_BYTES,
};
use crate::limits;

/// A request's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// The request type, as sent.
    pub api_key: u16,
    /// Its version.
    pub api_version: u16,
    /// Echoed in the response.
    pub correlation_id: u32,
}

/// One partition of a fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// First offset wanted.
    pub offset: u64,
    /// Byte budget for this partition.
    pub bytes_max: u32,
    /// The leader epoch the fetcher believes current (`None`: not
    /// checked). Sent from fetch version 3 on
    /// ([`replica_fetch_request`]); [`fetch_request`] sends none.
    pub leader_epoch: Option<u32>,
}

/// A decoded request, borrowing from its frame where that saves an
/// allocation per request on the produce path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// Append a batch.
    Produce {
        /// 0, 1 or -1 (all).
        acks: i8,
        /// How long acks=all may wait.
        timeout_ms: u32,
        /// Topic.
        topic: &'a str,
        /// Partition.
        partition: u32,
        /// The transaction its batch belongs to (version 3; empty: none).
        transactional_id: &'a str,
        /// Where the batch lies in the frame body (the broker appends it
        /// from there, rewriting only its header).
        records: Range<usize>,
    },
    /// Read batches.
    Fetch {
        /// Longest wait for `bytes_min`.
        wait_ms_max: u32,
        /// Bytes worth answering with before `wait_ms_max`.
        bytes_min: u32,
        /// Bytes of records in the whole response, at most (but one batch).
        response_bytes_max: u32,
        /// The fetching broker's id; empty for a consumer (and before
        /// version 3).
        replica_id: &'a str,
        /// A consumer that reads committed records only (version 6).
        read_committed: bool,
        /// What to read.
        partitions: Vec<FetchPartition>,
    },
    /// Find an offset.
    ListOffsets {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
        /// [`EARLIEST`](super::EARLIEST), [`LATEST`](super::LATEST) or a timestamp.
        at: i64,
    },
    /// Describe topics (all when empty).
    Metadata {
        /// Topics asked about.
        topics: Vec<String>,
    },
    /// Create a topic.
    CreateTopic {
        /// Topic.
        topic: String,
        /// Partitions.
        partitions: u32,
    },
    /// Where a leader epoch ends on this broker (Kafka's
    /// OffsetsForLeaderEpoch).
    OffsetsForLeaderEpoch {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
        /// The leader epoch the sender believes current (`None`: not
        /// checked).
        current_leader_epoch: Option<u32>,
        /// The epoch asked about: the sender's log ends in it.
        leader_epoch: u32,
    },
    /// Which SASL mechanism the client will use.
    SaslHandshake {
        /// Its name.
        mechanism: String,
    },
    /// The client's next SASL message.
    SaslAuthenticate {
        /// The message.
        message: Vec<u8>,
    },
    /// Which registry coordinates the broker's groups.
    Registry,
    /// A producer id for an idempotent producer.
    InitProducerId,
    /// A transactional producer's request (init_producer_id version 2,
    /// add_to_txn, txn_offset_commit, end_txn).
    Txn(super::TxnRequest),
    /// A transaction marker for a partition this broker leads.
    WriteTxnMarker(TxnMarker),
    /// Writes a group's committed offset.
    OffsetCommit(super::OffsetCommit),
    /// Reads a group's committed offsets.
    OffsetFetch(super::OffsetFetch),
}

/// A transaction marker a coordinator asks a partition's leader to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMarker {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// The transaction's producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// Commit, or abort.
    pub commit: bool,
    /// The coordinator's epoch for the transaction.
    pub coordinator_epoch: i32,
}

/// Starts a request frame in `out` (cleared); [`finish_frame`] sets its length.
pub fn start_request(out: &mut Vec<u8>, api: ApiKey, correlation_id: u32) {
    out.clear();
    begin_request(out, api, correlation_id);
}

/// Starts a request frame at the end of `out`, after the frames already
/// there; returns where it starts, for [`finish_frame`] on `out[start..]`.
fn begin_request(out: &mut Vec<u8>, api: ApiKey, correlation_id: u32) -> usize {
    begin_request_version(out, api, api.version(), correlation_id)
}

/// [`begin_request`] of an older `version` of the request.
pub(super) fn begin_request_version(
    out: &mut Vec<u8>,
    api: ApiKey,
    version: u16,
    correlation_id: u32,
) -> usize {
    let start = out.len();
    put::u32(out, 0);
    put::u16(out, api as u16);
    put::u16(out, version);
    put::u32(out, correlation_id);
    start
}

/// Encodes a produce request around `batch` (`out` cleared first).
pub fn produce_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    acks: i8,
    timeout_ms: u32,
    topic: &str,
    partition: u32,
    batch: &[u8],
) {
    out.clear();
    append_produce_request(
        out,
        correlation_id,
        acks,
        timeout_ms,
        topic,
        partition,
        batch,
    );
}

/// Appends a produce request around `batch` to the frames already in
/// `out` (a producer sending several at once).
pub fn append_produce_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    acks: i8,
    timeout_ms: u32,
    topic: &str,
    partition: u32,
    batch: &[u8],
) {
    append_txn_produce_request(
        out,
        correlation_id,
        (acks, timeout_ms, None),
        topic,
        partition,
        batch,
    );
}

/// Appends a produce request around `batch` of a transaction's producer
/// (`transactional_id`, sent in version 3; `None`: version 2, which
/// every broker since the batch format reads).
pub fn append_txn_produce_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    (acks, timeout_ms, transactional_id): (i8, u32, Option<&str>),
    topic: &str,
    partition: u32,
    batch: &[u8],
) {
    let version = match transactional_id {
        Some(_) => super::PRODUCE_VERSION_TXN,
        None => super::PRODUCE_VERSION_KAFKA,
    };
    let start = begin_request_version(out, ApiKey::Produce, version, correlation_id);
    out.push(acks as u8);
    put::u32(out, timeout_ms);
    if let Some(id) = transactional_id {
        put::str(out, id);
    }
    put::str(out, topic);
    put::u32(out, partition);
    put::bytes(out, batch);
    finish_frame(&mut out[start..]);
}

/// The response a fetch asks for: how long it may wait for how many bytes,
/// and how many bytes of records it carries at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchWant {
    /// Longest wait for `bytes_min`.
    pub wait_ms_max: u32,
    /// Bytes worth answering with before `wait_ms_max`.
    pub bytes_min: u32,
    /// Bytes of records in the whole response, at most (but one batch).
    pub response_bytes_max: u32,
}

/// Encodes a consumer's fetch request, in version
/// [`FETCH_VERSION_CONSUMER`] (2), which every broker since the response
/// budget reads: it carries no replica id and no leader epochs, so each
/// partition's `leader_epoch` must be `None` (a consumer that checks
/// epochs sends [`replica_fetch_request`] with an empty replica id). Its
/// response decodes with [`decode_fetch_response`](super::decode_fetch_response)
/// of that version.
pub fn fetch_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    want: FetchWant,
    parts: &[FetchPartition],
) {
    debug_assert!(
        parts.iter().all(|p| p.leader_epoch.is_none()),
        "fetch version 2 carries no leader epoch: use replica_fetch_request"
    );
    out.clear();
    begin_request_version(out, ApiKey::Fetch, FETCH_VERSION_CONSUMER, correlation_id);
    put_fetch_body(out, (None, None), want, parts);
    finish_frame(out);
}

/// Encodes a fetch request of version 3: from the broker `replica_id`
/// (a follower; empty for a consumer), with each partition's leader epoch.
/// Its response decodes with [`decode_fetch_response`](super::decode_fetch_response)
/// of version 3 and carries each partition's leader epoch.
pub fn replica_fetch_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    replica_id: &str,
    want: FetchWant,
    parts: &[FetchPartition],
) {
    out.clear();
    begin_request_version(out, ApiKey::Fetch, FETCH_VERSION_REPLICA, correlation_id);
    put_fetch_body(out, (Some(replica_id), None), want, parts);
    finish_frame(out);
}

/// Encodes a consumer's fetch of committed records only, in version
/// [`FETCH_VERSION_COMMITTED`]: version 5's fields (an empty replica id,
/// each partition's leader epoch or none) and isolation read_committed.
/// Its response decodes with [`decode_fetch_response`](super::decode_fetch_response)
/// of that version, and carries each partition's last stable offset and
/// aborted transactions.
pub fn committed_fetch_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    want: FetchWant,
    parts: &[FetchPartition],
) {
    out.clear();
    begin_request_version(out, ApiKey::Fetch, FETCH_VERSION_COMMITTED, correlation_id);
    put_fetch_body(out, (Some(""), Some(1)), want, parts);
    finish_frame(out);
}

/// A fetch's body: with a replica id and epochs (version 5) or without
/// (version 4), and an isolation level (version 6).
fn put_fetch_body(
    out: &mut Vec<u8>,
    (replica_id, isolation): (Option<&str>, Option<i8>),
    want: FetchWant,
    parts: &[FetchPartition],
) {
    put::u32(out, want.wait_ms_max);
    put::u32(out, want.bytes_min);
    put::u32(out, want.response_bytes_max);
    if let Some(id) = replica_id {
        put::str(out, id);
    }
    if let Some(isolation) = isolation {
        put::i8(out, isolation);
    }
    put::u16(out, parts.len() as u16);
    for p in parts {
        put::str(out, &p.topic);
        put::u32(out, p.partition);
        put::u64(out, p.offset);
        put::u32(out, p.bytes_max);
        if replica_id.is_some() {
            put::epoch(out, p.leader_epoch);
        }
    }
}

/// Encodes a list_offsets request.
pub fn list_offsets_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    topic: &str,
    partition: u32,
    at: i64,
) {
    start_request(out, ApiKey::ListOffsets, correlation_id);
    put::str(out, topic);
    put::u32(out, partition);
    put::i64(out, at);
    finish_frame(out);
}

/// Encodes a metadata request.
pub fn metadata_request(out: &mut Vec<u8>, correlation_id: u32, topics: &[&str]) {
    start_request(out, ApiKey::Metadata, correlation_id);
    put::u16(out, topics.len() as u16);
    for t in topics {
        put::str(out, t);
    }
    finish_frame(out);
}

/// Encodes a create_topic request.
pub fn create_topic_request(out: &mut Vec<u8>, correlation_id: u32, topic: &str, partitions: u32) {
    start_request(out, ApiKey::CreateTopic, correlation_id);
    put::str(out, topic);
    put::u32(out, partitions);
    finish_frame(out);
}

/// Encodes an offsets_for_leader_epoch request: where `epoch` (or the
/// largest epoch below it) ends on the broker, from a sender that believes
/// `current` is the partition's leader epoch (`None`: not checked).
pub fn offsets_for_leader_epoch_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    topic: &str,
    partition: u32,
    current: Option<u32>,
    epoch: u32,
) {
    start_request(out, ApiKey::OffsetsForLeaderEpoch, correlation_id);
    put::str(out, topic);
    put::u32(out, partition);
    put::epoch(out, current);
    put::u32(out, epoch);
    finish_frame(out);
}

/// Encodes a sasl_handshake request.
pub fn sasl_handshake_request(out: &mut Vec<u8>, correlation_id: u32, mechanism: &str) {
    start_request(out, ApiKey::SaslHandshake, correlation_id);
    put::str(out, mechanism);
    finish_frame(out);
}

/// Encodes a sasl_authenticate request.
pub fn sasl_authenticate_request(out: &mut Vec<u8>, correlation_id: u32, message: &[u8]) {
    start_request(out, ApiKey::SaslAuthenticate, correlation_id);
    put::bytes(out, message);
    finish_frame(out);
}

/// Encodes a registry request.
pub fn registry_request(out: &mut Vec<u8>, correlation_id: u32) {
    start_request(out, ApiKey::Registry, correlation_id);
    finish_frame(out);
}

/// Encodes an init_producer_id request.
pub fn init_producer_id_request(out: &mut Vec<u8>, correlation_id: u32) {
    // Version 1: an idempotent producer's (version 2 names a transaction).
    out.clear();
    begin_request_version(out, ApiKey::InitProducerId, 1, correlation_id);
    finish_frame(out);
}

/// Encodes a write_txn_marker request.
pub fn write_txn_marker_request(out: &mut Vec<u8>, correlation_id: u32, m: &TxnMarker) {
    start_request(out, ApiKey::WriteTxnMarker, correlation_id);
    put::str(out, &m.topic);
    put::u32(out, m.partition);
    put::i64(out, m.producer_id);
    put::u16(out, m.producer_epoch as u16);
    out.push(u8::from(m.commit));
    put::u32(out, m.coordinator_epoch as u32);
    finish_frame(out);
}

/// Encodes an offset_commit request.
pub fn offset_commit_request(out: &mut Vec<u8>, correlation_id: u32, c: &super::OffsetCommit) {
    start_request(out, ApiKey::OffsetCommit, correlation_id);
    put::str(out, &c.group);
    put::str(out, &c.topic);
    put::u32(out, c.partition);
    put::u64(out, c.offset);
    put::u64(out, c.generation);
    put::i8(out, c.mode as i8);
    finish_frame(out);
}

/// Encodes an offset_fetch request.
pub fn offset_fetch_request(out: &mut Vec<u8>, correlation_id: u32, f: &super::OffsetFetch) {
    start_request(out, ApiKey::OffsetFetch, correlation_id);
    put::str(out, &f.group);
    put::str(out, f.topic.as_deref().unwrap_or(""));
    put::u32(out, f.partition.unwrap_or(super::offsets::EVERY_PARTITION));
    finish_frame(out);
}

/// The longest SASL message a broker reads (a SCRAM message is under 300
/// bytes; Kafka's own bound on an unauthenticated request is 512 KiB).
pub const SASL_MESSAGE_BYTES_MAX: usize = 64 * 1024;

/// A name of at most `bytes_max` bytes, checked before it is copied out
/// of the frame.
fn bounded_str<'a>(r: &mut Reader<'a>, what: &str, bytes_max: usize) -> Result<&'a str> {
    let s = r.str_ref(what)?;
    if s.len() > bytes_max {
        return Err(ProtocolError(format!(
            "a {what} of {} bytes (at most {bytes_max})",
            s.len()
        )));
    }
    Ok(s)
}

/// A fetched topic's name: no longer than a topic's can be, as the answer
/// repeats it.
fn fetch_topic(r: &mut Reader<'_>) -> Result<String> {
    bounded_str(r, "topic name", limits::TOPIC_NAME_BYTES_MAX).map(str::to_owned)
}

/// Decodes a request header from a frame body (the bytes after the length).
pub fn decode_request_header(body: &[u8]) -> Result<RequestHeader> {
    let mut r = Reader::new(body);
    Ok(RequestHeader {
        api_key: r.u16("api_key")?,
        api_version: r.u16("api_version")?,
        correlation_id: r.u32("correlation_id")?,
    })
}

/// Why a request could not be decoded: an unsupported type or version (the
/// connection goes on), or malformed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// Unknown api key or version.
    Unsupported(String),
    /// Bytes that do not decode.
    Invalid(ProtocolError),
}

/// Decodes a request from a frame body (the bytes after the length).
pub fn decode_request(
    body: &[u8],
) -> std::result::Result<(RequestHeader, Request<'_>), RequestError> {
    let header = decode_request_header(body).map_err(RequestError::Invalid)?;
    let Some(api) = ApiKey::from_u16(header.api_key) else {
        return Err(RequestError::Unsupported(format!(
            "unknown request type {}",
            header.api_key
        )));
    };
    if !(api.min_version()..=api.version()).contains(&header.api_version) {
        let old = api == ApiKey::Fetch && header.api_version < FETCH_VERSION_MIN;
        let why = match old {
            true => ": it reads klog's legacy batches, and this broker serves Kafka's RecordBatch v2 (upgrade the client)",
            false => "",
        };
        return Err(RequestError::Unsupported(format!(
            "{api:?} version {} is not supported (this broker speaks versions {} to {}){why}",
            header.api_version,
            api.min_version(),
            api.version()
        )));
    }
    let mut r = Reader::at(body, REQUEST_HEADER_BYTES);
    let request = decode_body(api, header.api_version, &mut r).map_err(RequestError::Invalid)?;
    r.finish("request").map_err(RequestError::Invalid)?;
    Ok((header, request))
}

/// A write_txn_marker's body.
fn decode_marker(r: &mut Reader<'_>) -> Result<TxnMarker> {
    let m = TxnMarker {
        topic: fetch_topic(r)?,
        partition: r.u32("partition")?,
        producer_id: r.i64("producer_id")?,
        producer_epoch: r.u16("producer_epoch")? as i16,
        commit: r.i8("commit")? != 0,
        coordinator_epoch: r.u32("coordinator_epoch")? as i32,
    };
    if m.producer_id < 0 || m.producer_epoch < 0 || m.coordinator_epoch < 0 {
        return Err(ProtocolError(format!("a marker of {m:?}")));
    }
    Ok(m)
}

fn decode_body<'a>(api: ApiKey, version: u16, r: &mut Reader<'a>) -> Result<Request<'a>> {
    Ok(match api {
        ApiKey::Produce => Request::Produce {
            acks: match r.i8("acks")? {
                a @ (ACKS_NONE | ACKS_LEADER | ACKS_ALL) => a,
                a => return Err(ProtocolError(format!("acks {a} is not 0, 1 or -1"))),
            },
            timeout_ms: r.u32("timeout_ms")?,
            transactional_id: match version >= super::PRODUCE_VERSION_TXN {
                true => super::txn::produce_transactional_id(r)?,
                false => "",
            },
            topic: r.str_ref("topic")?,
            partition: r.u32("partition")?,
            records: r.bytes_range("records")?,
        },
        ApiKey::Fetch => decode_fetch(version, r)?,
        ApiKey::ListOffsets => Request::ListOffsets {
            topic: r.str("topic")?,
            partition: r.u32("partition")?,
            at: r.i64("at")?,
        },
        ApiKey::Metadata => {
            let count = r.u16("count")? as usize;
            let mut topics = Vec::with_capacity(count.min(1024));
            for _ in 0..count {
                topics.push(r.str("topic")?);
            }
            Request::Metadata { topics }
        }
        ApiKey::CreateTopic => Request::CreateTopic {
            topic: r.str("topic")?,
            partitions: r.u32("partitions")?,
        },
        ApiKey::OffsetsForLeaderEpoch => Request::OffsetsForLeaderEpoch {
            topic: fetch_topic(r)?,
            partition: r.u32("partition")?,
            current_leader_epoch: r.epoch("current_leader_epoch")?,
            leader_epoch: r.u32("leader_epoch")?,
        },
        ApiKey::SaslHandshake => Request::SaslHandshake {
            mechanism: bounded_str(r, "mechanism", 64)?.to_string(),
        },
        ApiKey::Registry => Request::Registry,
        ApiKey::InitProducerId if version < super::INIT_VERSION_TXN => Request::InitProducerId,
        ApiKey::InitProducerId | ApiKey::AddToTxn | ApiKey::TxnOffsetCommit | ApiKey::EndTxn => {
            Request::Txn(super::txn::decode(api, r)?)
        }
        ApiKey::WriteTxnMarker => Request::WriteTxnMarker(decode_marker(r)?),
        ApiKey::OffsetCommit => Request::OffsetCommit(super::offsets::decode_commit(r)?),
        ApiKey::OffsetFetch => Request::OffsetFetch(super::offsets::decode_fetch(r)?),
        ApiKey::SaslAuthenticate => {
            let message = r.bytes("message")?;
            if message.len() > SASL_MESSAGE_BYTES_MAX {
                return Err(ProtocolError(format!(
                    "a SASL message of {} bytes (at most {SASL_MESSAGE_BYTES_MAX})",
                    message.len()
                )));
            }
            Request::SaslAuthenticate {
                message: message.to_vec(),
            }
        }
    })
}

/// Decodes a fetch body of `version` 4 (a consumer's) or 5 (with a
/// replica id and leader epochs).
fn decode_fetch<'a>(version: u16, r: &mut Reader<'a>) -> Result<Request<'a>> {
    let replica = version >= FETCH_VERSION_REPLICA;
    let wait_ms_max = r.u32("wait_ms_max")?;
    let bytes_min = r.u32("bytes_min")?;
    let response_bytes_max = r.u32("response_bytes_max")?;
    let replica_id = match replica {
        false => "",
        true => bounded_str(r, "replica_id", limits::BROKER_ID_BYTES_MAX)?,
    };
    let read_committed = match version >= FETCH_VERSION_COMMITTED {
        false => false,
        true => match r.i8("isolation")? {
            0 => false,
            // A follower copies everything: read_committed is a consumer's.
            1 if replica_id.is_empty() => true,
            other => {
                return Err(ProtocolError(format!(
                    "isolation {other} (0 read_uncommitted, 1 read_committed of a consumer)"
                )))
            }
        },
    };
    let count = r.u16("count")? as usize;
    if count > FETCH_PARTITIONS_MAX {
        return Err(ProtocolError(format!("{count} partitions in one fetch")));
    }
    // Each partition takes at least its fixed fields: a count the frame
    // cannot hold allocates nothing.
    let part_bytes_min = if replica {
        2 + 4 + 8 + 4 + 8
    } else {
        2 + 4 + 8 + 4
    };
    let mut partitions = Vec::with_capacity(count.min(r.left() / part_bytes_min));
    for _ in 0..count {
        partitions.push(FetchPartition {
            topic: fetch_topic(r)?,
            partition: r.u32("partition")?,
            offset: r.u64("offset")?,
            bytes_max: r.u32("bytes_max")?,
            leader_epoch: match replica {
                false => None,
                true => r.epoch("leader_epoch")?,
            },
        });
    }
    Ok(Request::Fetch {
        wait_ms_max,
        bytes_min,
        response_bytes_max,
        read_committed,
        replica_id,
        partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::LATEST;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    // Golden frames: a change here is a protocol change, and needs the
    // module docs and a version bump.
    #[test]
    fn golden_requests() {
        let mut out = Vec::new();
        produce_request(&mut out, 7, ACKS_ALL, 30_000, "t", 2, b"BATCH");
        assert_eq!(
            hex(&out),
            "1d000000\
             00000200\
             07000000\
             ff\
             30750000\
             010074\
             02000000\
             050000004241544348"
        );
        // Appended after another frame, the same bytes.
        let mut two = out.clone();
        append_produce_request(&mut two, 7, ACKS_ALL, 30_000, "t", 2, b"BATCH");
        assert_eq!(two, [out.clone(), out.clone()].concat());
        let (h, req) = decode_request(&out[4..]).unwrap();
        assert_eq!(h.correlation_id, 7);
        let Request::Produce { records, .. } = req else {
            panic!()
        };
        assert_eq!(&out[4..][records], b"BATCH");

        let parts = [FetchPartition {
            topic: "ab".into(),
            partition: 1,
            offset: 258,
            bytes_max: 1 << 20,
            leader_epoch: None,
        }];
        let want = FetchWant {
            wait_ms_max: 500,
            bytes_min: 1,
            response_bytes_max: 1 << 30,
        };
        fetch_request(&mut out, 8, want, &parts);
        assert_eq!(
            hex(&out),
            "2a000000010004000800000\
             0f40100000100000000000040010002006162010000000201000000000000\
             00001000"
        );
        assert_eq!(
            decode_request(&out[4..]).unwrap().1,
            Request::Fetch {
                wait_ms_max: 500,
                bytes_min: 1,
                response_bytes_max: 1 << 30,
                replica_id: "",
                read_committed: false,
                partitions: parts.to_vec()
            }
        );
        // Version 6, read_committed: version 5's fields with an empty
        // replica id, then the isolation level.
        committed_fetch_request(&mut out, 8, want, &parts);
        assert_eq!(
            hex(&out),
            "35000000 0100 0600 08000000 f4010000 01000000 00000040 0000 01 0100 \
             0200 6162 01000000 0201000000000000 00001000 ffffffffffffffff"
                .replace(' ', "")
        );
        let (h, fetch) = decode_request(&out[4..]).unwrap();
        assert_eq!(h.api_version, FETCH_VERSION_COMMITTED);
        assert!(matches!(
            fetch,
            Request::Fetch {
                read_committed: true,
                replica_id: "",
                ..
            }
        ));
        // Isolation 2, or read_committed for a follower: invalid.
        let isolation_at = 4 + REQUEST_HEADER_BYTES + 12 + 2;
        let mut bad = out.clone();
        bad[isolation_at] = 2;
        assert!(decode_request(&bad[4..]).is_err());

        list_offsets_request(&mut out, 9, "t", 0, LATEST);
        assert_eq!(
            hex(&out),
            "17000000020001000900000001007400000000ffffffffffffffff"
        );
        metadata_request(&mut out, 10, &["x"]);
        assert_eq!(
            hex(&out),
            "0d000000030001000a00000001000100 78".replace(' ', "")
        );
        create_topic_request(&mut out, 11, "x", 4);
        assert_eq!(hex(&out), "0f000000040001000b00000001007804000000");
        assert!(matches!(
            decode_request(&out[4..]).unwrap().1,
            Request::CreateTopic { partitions: 4, .. }
        ));
    }

    /// Fetch versions 1 to 3 read klog's legacy batches: refused, saying
    /// so, not answered with bytes their reader would take for damage.
    #[test]
    fn fetches_older_than_version_4_are_refused_and_long_topics_too() {
        let parts = [FetchPartition {
            topic: "ab".into(),
            partition: 1,
            offset: 258,
            bytes_max: 1 << 20,
            leader_epoch: None,
        }];
        let want = FetchWant {
            wait_ms_max: 500,
            bytes_min: 1,
            response_bytes_max: 77,
        };
        let mut out = Vec::new();
        fetch_request(&mut out, 8, want, &parts);
        assert_eq!(out[6], 4, "a consumer sends version 4");
        for old in 1..=3 {
            let mut v = out.clone();
            v[6] = old;
            match decode_request(&v[4..]) {
                Err(RequestError::Unsupported(why)) => {
                    assert!(why.contains("RecordBatch v2"), "{why}")
                }
                other => panic!("version {old}: {other:?}"),
            }
        }
        let long = [FetchPartition {
            topic: "x".repeat(limits::TOPIC_NAME_BYTES_MAX + 1),
            ..parts[0].clone()
        }];
        fetch_request(&mut out, 8, want, &long);
        assert!(matches!(
            decode_request(&out[4..]),
            Err(RequestError::Invalid(_))
        ));
    }

    /// A follower's fetch of two partitions, one with an epoch.
    fn replica_fetch_frame(replica_id: &str) -> (Vec<u8>, [FetchPartition; 2]) {
        let parts = [
            FetchPartition {
                topic: "ab".into(),
                partition: 1,
                offset: 258,
                bytes_max: 1 << 20,
                leader_epoch: Some(7),
            },
            FetchPartition {
                topic: "c".into(),
                partition: 0,
                offset: 0,
                bytes_max: 9,
                leader_epoch: None,
            },
        ];
        let want = FetchWant {
            wait_ms_max: 500,
            bytes_min: 1,
            response_bytes_max: 1 << 30,
        };
        let mut out = Vec::new();
        replica_fetch_request(&mut out, 8, replica_id, want, &parts);
        (out, parts)
    }

    // Golden frames of the replication requests, as the module docs give
    // them.
    #[test]
    fn golden_replication_requests() {
        let (out, parts) = replica_fetch_frame("b2");
        assert_eq!(
            hex(&out),
            "51000000 0100 0500 08000000 \
             f4010000 01000000 00000040 0200 6232 0200 \
             0200 6162 01000000 0201000000000000 00001000 0700000000000000 \
             0100 63 00000000 0000000000000000 09000000 ffffffffffffffff"
                .replace(' ', "")
        );
        assert_eq!(
            decode_request(&out[4..]).unwrap(),
            (
                RequestHeader {
                    api_key: 1,
                    api_version: 5,
                    correlation_id: 8
                },
                Request::Fetch {
                    wait_ms_max: 500,
                    bytes_min: 1,
                    response_bytes_max: 1 << 30,
                    replica_id: "b2",
                    read_committed: false,
                    partitions: parts.to_vec()
                }
            )
        );
        let mut out = Vec::new();
        offsets_for_leader_epoch_request(&mut out, 12, "t", 3, Some(9), 4);
        assert_eq!(
            hex(&out),
            "1b000000 0500 0100 0c000000 0100 74 03000000 0900000000000000 04000000"
                .replace(' ', "")
        );
        assert_eq!(
            decode_request(&out[4..]).unwrap().1,
            Request::OffsetsForLeaderEpoch {
                topic: "t".into(),
                partition: 3,
                current_leader_epoch: Some(9),
                leader_epoch: 4
            }
        );
        offsets_for_leader_epoch_request(&mut out, 12, "t", 3, None, u32::MAX);
        assert_eq!(
            decode_request(&out[4..]).unwrap().1,
            Request::OffsetsForLeaderEpoch {
                topic: "t".into(),
                partition: 3,
                current_leader_epoch: None,
                leader_epoch: u32::MAX
            },
            "-1: not checked; the largest epoch there is"
        );
    }

    #[test]
    fn a_replication_request_cut_anywhere_is_invalid_and_whole_decodes() {
        let mut epoch_end = Vec::new();
        offsets_for_leader_epoch_request(&mut epoch_end, 1, "topic", 0, Some(1), 2);
        for frame in [
            replica_fetch_frame("b2").0,
            replica_fetch_frame("").0,
            epoch_end,
        ] {
            let body = &frame[4..];
            for len in 0..body.len() {
                assert!(
                    matches!(decode_request(&body[..len]), Err(RequestError::Invalid(_))),
                    "cut at {len} of {}",
                    body.len()
                );
            }
            assert!(decode_request(body).is_ok());
            let mut longer = body.to_vec();
            longer.push(0);
            assert!(matches!(
                decode_request(&longer),
                Err(RequestError::Invalid(_))
            ));
        }
    }

    #[test]
    fn epochs_outside_minus_1_to_u32_max_and_long_replica_ids_are_invalid() {
        let invalid = |frame: &[u8]| match decode_request(&frame[4..]) {
            Err(RequestError::Invalid(e)) => e.0,
            other => panic!("{other:?}"),
        };
        let (frame, _) = replica_fetch_frame("b2");
        // The first partition's epoch ends where the second partition
        // starts, 3 + 4 + 8 + 4 + 8 bytes before the frame ends.
        let at = frame.len() - 27 - 8;
        assert_eq!(frame[at..at + 8], 7i64.to_le_bytes());
        for bad in [-2i64, i64::MIN, i64::from(u32::MAX) + 1, i64::MAX] {
            let mut frame = frame.clone();
            frame[at..at + 8].copy_from_slice(&bad.to_le_bytes());
            let why = invalid(&frame);
            assert!(why.contains(&format!("leader_epoch {bad}")), "{why}");
        }
        let mut top = frame.clone();
        top[at..at + 8].copy_from_slice(&i64::from(u32::MAX).to_le_bytes());
        assert!(decode_request(&top[4..]).is_ok(), "u32::MAX is an epoch");

        let id = "b".repeat(limits::BROKER_ID_BYTES_MAX);
        assert!(decode_request(&replica_fetch_frame(&id).0[4..]).is_ok());
        let id = "b".repeat(limits::BROKER_ID_BYTES_MAX + 1);
        let why = invalid(&replica_fetch_frame(&id).0);
        assert!(why.contains("replica_id of 250 bytes"), "{why}");

        let mut frame = Vec::new();
        offsets_for_leader_epoch_request(&mut frame, 1, "t", 0, Some(1), 2);
        let at = frame.len() - 12;
        frame[at..at + 8].copy_from_slice(&(-3i64).to_le_bytes());
        assert!(invalid(&frame).contains("current_leader_epoch -3"));
        let long = "t".repeat(limits::TOPIC_NAME_BYTES_MAX + 1);
        offsets_for_leader_epoch_request(&mut frame, 1, &long, 0, None, 2);
        invalid(&frame);
    }

    #[test]
    fn a_fetch_count_past_the_frame_is_invalid() {
        let (mut frame, _) = replica_fetch_frame("");
        // The count sits after the header, three u32s and the empty id.
        let at = 4 + REQUEST_HEADER_BYTES + 12 + 2;
        frame[at..at + 2].copy_from_slice(&(FETCH_PARTITIONS_MAX as u16).to_le_bytes());
        assert!(matches!(
            decode_request(&frame[4..]),
            Err(RequestError::Invalid(_))
        ));
    }

    #[test]
    fn unknown_types_and_versions_are_unsupported_not_invalid() {
        let mut out = Vec::new();
        create_topic_request(&mut out, 1, "x", 1);
        out[4] = 99;
        assert!(matches!(
            decode_request(&out[4..]),
            Err(RequestError::Unsupported(_))
        ));
        create_topic_request(&mut out, 1, "x", 1);
        out[6] = 2;
        assert!(matches!(
            decode_request(&out[4..]),
            Err(RequestError::Unsupported(_))
        ));
        let (mut out, _) = replica_fetch_frame("b2");
        out[6] = 7;
        assert!(matches!(
            decode_request(&out[4..]),
            Err(RequestError::Unsupported(_))
        ));
        create_topic_request(&mut out, 1, "x", 1);
        out.push(0);
        assert!(matches!(
            decode_request(&out[4..]),
            Err(RequestError::Invalid(_))
        ));
    }
}
