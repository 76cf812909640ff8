//! The pull protocol between clients and `klog-broker`: frames, requests,
//! responses and error codes.
//!
//! This module is sans-I/O: it encodes into and decodes from byte slices.
//! The broker (`crate::broker`) and the client (`crate::client`) do the I/O.
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
//! `i8`/`i64` are two's complement.
//!
//! # Requests (all version 1)
//!
//! | api_key | request        | body                                                                   |
//! |--------:|----------------|------------------------------------------------------------------------|
//! | 0 | produce      | `acks i8` (0, 1, -1 = all) · `timeout_ms u32` · `topic str` · `partition u32` · `records bytes` (one batch, `crate::storage::record`) |
//! | 1 | fetch        | `max_wait_ms u32` · `min_bytes u32` · `count u16` · count × (`topic str` · `partition u32` · `offset u64` · `max_bytes u32`) |
//! | 2 | list_offsets | `topic str` · `partition u32` · `at i64` (-2 earliest, -1 latest, ≥ 0 the first record at or after this timestamp, ms) |
//! | 3 | metadata     | `count u16` · count × `topic str` (0 topics: every topic)              |
//! | 4 | create_topic | `topic str` · `partitions u32` (0: the broker's `--partitions`)        |
//!
//! # Responses (bodies after `error` and `message`)
//!
//! | request      | body                                                                       |
//! |--------------|----------------------------------------------------------------------------|
//! | produce      | `base_offset u64` (offset of the batch's first record). `acks` 0: no response at all |
//! | fetch        | `count u16` · count × (`topic str` · `partition u32` · `error u16` · `message str` · `start_offset u64` · `end_offset u64` · `records bytes`) |
//! | list_offsets | `offset i64` (-1: no record at or after the timestamp)                     |
//! | metadata     | `count u16` · count × (`topic str` · `error u16` · `message str` · `partitions u32` · partitions × (`start_offset u64` · `end_offset u64`)) |
//! | create_topic | `partitions u32` (also sent with `topic_exists`, giving the existing count) |
//!
//! In a cluster, a metadata partition that the answering broker does not
//! serve reports both offsets as `2^64 - 1` ([`ELSEWHERE`]), and requests
//! for it get `partition_elsewhere`. A partition the broker holds but
//! cannot serve (damaged) reports `2^64 - 2` ([`OFFLINE`]), and requests for
//! it get `storage_error` saying why.
//!
//! A fetch partition's `records` are whole batches copied from a segment
//! with `sendfile`, starting with the batch that holds `offset` (so the
//! first records may precede it: the client skips them), at least one whole
//! batch when any is visible, even over `max_bytes`; the byte budget may cut
//! the last batch short, and the client fetches it again from its offset. `end_offset` is one past the last record a consumer may see
//! (the high watermark: records are visible once durable under the flush
//! policy). A fetch with no visible record waits up to `max_wait_ms` for
//! `min_bytes` to arrive.
//!
//! # Errors
//!
//! The codes of [`ErrorCode`]; `message` says what was wrong in words. A
//! request with an unknown `api_key` or `api_version` is answered with
//! `unsupported_request`, and the connection stays open.
//!
//! # Version history
//!
//! - version 1 of every request: the first.
//! - error code 17 `disk_full`; metadata offsets `2^64 - 2` ([`OFFLINE`]) for
//!   a partition the broker holds but cannot serve. Older clients read the
//!   first as an unknown error and the second as a partition to fetch,
//!   which answers `storage_error`.

pub use crate::error::ErrorCode;
use std::ops::Range;

/// Bytes of a frame's length prefix.
pub const LENGTH_BYTES: usize = 4;
/// Bytes of a request header after the length: api key, version, correlation id.
pub const REQUEST_HEADER_BYTES: usize = 8;
/// Bytes of a response header after the length, before the message text.
pub const RESPONSE_HEADER_BYTES: usize = 6;
/// Partitions in one fetch request, at most.
pub const FETCH_PARTITIONS_MAX: usize = 10_000;

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
}

impl ApiKey {
    /// The version of each request this build speaks.
    pub const VERSION: u16 = 1;

    fn from_u16(v: u16) -> Option<ApiKey> {
        Some(match v {
            0 => ApiKey::Produce,
            1 => ApiKey::Fetch,
            2 => ApiKey::ListOffsets,
            3 => ApiKey::Metadata,
            4 => ApiKey::CreateTopic,
            _ => return None,
        })
    }
}

/// Bytes from a peer that break the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolError(pub String);

type Result<T> = std::result::Result<T, ProtocolError>;

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
    pub max_bytes: u32,
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
        /// Where the batch lies in the frame body (the broker appends it
        /// from there, rewriting only its header).
        records: Range<usize>,
    },
    /// Read batches.
    Fetch {
        /// Longest wait for `min_bytes`.
        max_wait_ms: u32,
        /// Bytes worth answering with before `max_wait_ms`.
        min_bytes: u32,
        /// What to read.
        partitions: Vec<FetchPartition>,
    },
    /// Find an offset.
    ListOffsets {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
        /// [`EARLIEST`], [`LATEST`] or a timestamp.
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
}

/// Reads fields from a frame body, every length checked against what is left.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.buf.len() - self.pos < n {
            return Err(ProtocolError(format!(
                "{what}: needs {n} bytes at position {}, {} left",
                self.pos,
                self.buf.len() - self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A `u16`.
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2, what)?.try_into().expect("2")))
    }

    /// A `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("4")))
    }

    /// A `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("8")))
    }

    /// An `i64`.
    pub fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(self.u64(what)? as i64)
    }

    /// An `i8`.
    pub fn i8(&mut self, what: &str) -> Result<i8> {
        Ok(self.take(1, what)?[0] as i8)
    }

    /// A `str`.
    pub fn str(&mut self, what: &str) -> Result<String> {
        self.str_ref(what).map(str::to_owned)
    }

    /// A `str`, borrowed from the buffer.
    pub fn str_ref(&mut self, what: &str) -> Result<&'a str> {
        let n = self.u16(what)? as usize;
        let bytes = self.take(n, what)?;
        std::str::from_utf8(bytes).map_err(|_| ProtocolError(format!("{what}: not UTF-8")))
    }

    /// A `bytes`, as its range in the buffer.
    pub fn bytes_range(&mut self, what: &str) -> Result<Range<usize>> {
        let n = self.u32(what)? as usize;
        let start = self.pos;
        self.take(n, what)?;
        Ok(start..start + n)
    }

    /// A `bytes`.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let r = self.bytes_range(what)?;
        Ok(&self.buf[r])
    }

    /// Fails unless every byte was read.
    pub fn finish(&self, what: &str) -> Result<()> {
        if self.pos != self.buf.len() {
            return Err(ProtocolError(format!(
                "{what}: {} trailing bytes",
                self.buf.len() - self.pos
            )));
        }
        Ok(())
    }
}

/// Appends fields to a frame.
pub mod put {
    /// A `u16`.
    pub fn u16(out: &mut Vec<u8>, v: u16) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// A `u32`.
    pub fn u32(out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// A `u64`.
    pub fn u64(out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// An `i64`.
    pub fn i64(out: &mut Vec<u8>, v: i64) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    /// A `str` (cut to 65,535 bytes at a character boundary).
    pub fn str(out: &mut Vec<u8>, s: &str) {
        let mut end = s.len().min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        u16(out, end as u16);
        out.extend_from_slice(&s.as_bytes()[..end]);
    }
    /// A `bytes`.
    pub fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        u32(out, b.len() as u32);
        out.extend_from_slice(b);
    }
}

/// Starts a request frame in `out` (cleared); [`finish_frame`] sets its length.
pub fn start_request(out: &mut Vec<u8>, api: ApiKey, correlation_id: u32) {
    out.clear();
    put::u32(out, 0);
    put::u16(out, api as u16);
    put::u16(out, ApiKey::VERSION);
    put::u32(out, correlation_id);
}

/// Starts a response frame in `out` (cleared); [`finish_frame`] sets its length.
pub fn start_response(out: &mut Vec<u8>, correlation_id: u32, error: ErrorCode, message: &str) {
    out.clear();
    begin_response(out, correlation_id, error, message);
}

/// Starts a response frame at the end of `out`, after the frames already
/// there; returns where it starts, for [`finish_frame`] on `out[start..]`.
pub fn begin_response(out: &mut Vec<u8>, correlation_id: u32, error: ErrorCode, message: &str) -> usize {
    let start = out.len();
    put::u32(out, 0);
    put::u32(out, correlation_id);
    put::u16(out, error as u16);
    put::str(out, message);
    start
}

/// Writes the frame's length into its first four bytes.
pub fn finish_frame(frame: &mut [u8]) {
    let len = (frame.len() - LENGTH_BYTES) as u32;
    frame[..LENGTH_BYTES].copy_from_slice(&len.to_le_bytes());
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
    append_produce_request(out, correlation_id, acks, timeout_ms, topic, partition, batch);
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
    let start = out.len();
    put::u32(out, 0);
    put::u16(out, ApiKey::Produce as u16);
    put::u16(out, ApiKey::VERSION);
    put::u32(out, correlation_id);
    out.push(acks as u8);
    put::u32(out, timeout_ms);
    put::str(out, topic);
    put::u32(out, partition);
    put::bytes(out, batch);
    finish_frame(&mut out[start..]);
}

/// Encodes a fetch request.
pub fn fetch_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    max_wait_ms: u32,
    min_bytes: u32,
    parts: &[FetchPartition],
) {
    start_request(out, ApiKey::Fetch, correlation_id);
    put::u32(out, max_wait_ms);
    put::u32(out, min_bytes);
    put::u16(out, parts.len() as u16);
    for p in parts {
        put::str(out, &p.topic);
        put::u32(out, p.partition);
        put::u64(out, p.offset);
        put::u32(out, p.max_bytes);
    }
    finish_frame(out);
}

/// Encodes a list_offsets request.
pub fn list_offsets_request(out: &mut Vec<u8>, correlation_id: u32, topic: &str, partition: u32, at: i64) {
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
pub fn decode_request(body: &[u8]) -> std::result::Result<(RequestHeader, Request<'_>), RequestError> {
    let header = decode_request_header(body).map_err(RequestError::Invalid)?;
    let Some(api) = ApiKey::from_u16(header.api_key) else {
        return Err(RequestError::Unsupported(format!(
            "unknown request type {}",
            header.api_key
        )));
    };
    if header.api_version != ApiKey::VERSION {
        return Err(RequestError::Unsupported(format!(
            "{api:?} version {} is not supported (this broker speaks version {})",
            header.api_version,
            ApiKey::VERSION
        )));
    }
    let mut r = Reader::new(body);
    r.pos = REQUEST_HEADER_BYTES;
    let request = decode_body(api, &mut r).map_err(RequestError::Invalid)?;
    r.finish("request").map_err(RequestError::Invalid)?;
    Ok((header, request))
}

fn decode_body<'a>(api: ApiKey, r: &mut Reader<'a>) -> Result<Request<'a>> {
    Ok(match api {
        ApiKey::Produce => Request::Produce {
            acks: match r.i8("acks")? {
                a @ (ACKS_NONE | ACKS_LEADER | ACKS_ALL) => a,
                a => return Err(ProtocolError(format!("acks {a} is not 0, 1 or -1"))),
            },
            timeout_ms: r.u32("timeout_ms")?,
            topic: r.str_ref("topic")?,
            partition: r.u32("partition")?,
            records: r.bytes_range("records")?,
        },
        ApiKey::Fetch => {
            let max_wait_ms = r.u32("max_wait_ms")?;
            let min_bytes = r.u32("min_bytes")?;
            let count = r.u16("count")? as usize;
            if count > FETCH_PARTITIONS_MAX {
                return Err(ProtocolError(format!("{count} partitions in one fetch")));
            }
            let mut partitions = Vec::with_capacity(count);
            for _ in 0..count {
                partitions.push(FetchPartition {
                    topic: r.str("topic")?,
                    partition: r.u32("partition")?,
                    offset: r.u64("offset")?,
                    max_bytes: r.u32("max_bytes")?,
                });
            }
            Request::Fetch {
                max_wait_ms,
                min_bytes,
                partitions,
            }
        }
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
    })
}

/// A response's header: its correlation id and top-level error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHeader {
    /// The request's correlation id.
    pub correlation_id: u32,
    /// The error code.
    pub error: ErrorCode,
    /// The error code as sent.
    pub error_raw: u16,
    /// What was wrong, in words.
    pub message: String,
}

/// Decodes a response's header, leaving `r` at the body.
pub fn decode_response_header(r: &mut Reader<'_>) -> Result<ResponseHeader> {
    let correlation_id = r.u32("correlation_id")?;
    let error_raw = r.u16("error")?;
    Ok(ResponseHeader {
        correlation_id,
        error: ErrorCode::from_u16(error_raw),
        error_raw,
        message: r.str("message")?,
    })
}

/// One partition of a fetch response, its records borrowed from the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition<'a> {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// Error for this partition.
    pub error: ErrorCode,
    /// What was wrong.
    pub message: String,
    /// First offset held.
    pub start_offset: u64,
    /// One past the last visible offset.
    pub end_offset: u64,
    /// Whole batches, as stored.
    pub records: &'a [u8],
}

/// Writes the header of one fetch-response partition; its `records_len`
/// bytes of records follow (sent with `sendfile` by the broker).
#[allow(clippy::too_many_arguments)]
pub fn put_fetch_partition(
    out: &mut Vec<u8>,
    topic: &str,
    partition: u32,
    error: ErrorCode,
    message: &str,
    start_offset: u64,
    end_offset: u64,
    records_len: u32,
) {
    put::str(out, topic);
    put::u32(out, partition);
    put::u16(out, error as u16);
    put::str(out, message);
    put::u64(out, start_offset);
    put::u64(out, end_offset);
    put::u32(out, records_len);
}

/// Decodes a fetch response body.
pub fn decode_fetch_response<'a>(r: &mut Reader<'a>) -> Result<Vec<FetchedPartition<'a>>> {
    let count = r.u16("count")? as usize;
    let mut parts = Vec::with_capacity(count);
    for _ in 0..count {
        let topic = r.str("topic")?;
        let partition = r.u32("partition")?;
        let error = ErrorCode::from_u16(r.u16("error")?);
        let message = r.str("message")?;
        parts.push(FetchedPartition {
            topic,
            partition,
            error,
            message,
            start_offset: r.u64("start_offset")?,
            end_offset: r.u64("end_offset")?,
            records: r.bytes("records")?,
        });
    }
    r.finish("fetch response")?;
    Ok(parts)
}

/// One topic of a metadata response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Topic.
    pub topic: String,
    /// Error for this topic.
    pub error: ErrorCode,
    /// What was wrong.
    pub message: String,
    /// (start, end) offsets of each partition.
    pub partitions: Vec<(u64, u64)>,
}

/// Writes one topic of a metadata response.
pub fn put_topic_metadata(out: &mut Vec<u8>, t: &TopicMetadata) {
    put::str(out, &t.topic);
    put::u16(out, t.error as u16);
    put::str(out, &t.message);
    put::u32(out, t.partitions.len() as u32);
    for &(start, end) in &t.partitions {
        put::u64(out, start);
        put::u64(out, end);
    }
}

/// Decodes a metadata response body.
pub fn decode_metadata_response(r: &mut Reader<'_>) -> Result<Vec<TopicMetadata>> {
    let count = r.u16("count")? as usize;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let topic = r.str("topic")?;
        let error = ErrorCode::from_u16(r.u16("error")?);
        let message = r.str("message")?;
        let n = r.u32("partitions")? as usize;
        if n > r.buf.len() / 16 {
            return Err(ProtocolError(format!("{n} partitions do not fit the frame")));
        }
        let mut partitions = Vec::with_capacity(n);
        for _ in 0..n {
            partitions.push((r.u64("start_offset")?, r.u64("end_offset")?));
        }
        topics.push(TopicMetadata {
            topic,
            error,
            message,
            partitions,
        });
    }
    r.finish("metadata response")?;
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

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
             00000100\
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
            max_bytes: 1 << 20,
        }];
        fetch_request(&mut out, 8, 500, 1, &parts);
        assert_eq!(
            hex(&out),
            "26000000010001000800000\
             0f401000001000000010002006162010000000201000000000000\
             00001000"
        );
        assert_eq!(
            decode_request(&out[4..]).unwrap().1,
            Request::Fetch {
                max_wait_ms: 500,
                min_bytes: 1,
                partitions: parts.to_vec()
            }
        );

        list_offsets_request(&mut out, 9, "t", 0, LATEST);
        assert_eq!(hex(&out), "17000000020001000900000001007400000000ffffffffffffffff");
        metadata_request(&mut out, 10, &["x"]);
        assert_eq!(hex(&out), "0d000000030001000a00000001000100 78".replace(' ', ""));
        create_topic_request(&mut out, 11, "x", 4);
        assert_eq!(hex(&out), "0f000000040001000b00000001007804000000");
        assert!(matches!(
            decode_request(&out[4..]).unwrap().1,
            Request::CreateTopic { partitions: 4, .. }
        ));
    }

    #[test]
    fn golden_responses() {
        let mut out = Vec::new();
        start_response(&mut out, 7, ErrorCode::None, "");
        put::u64(&mut out, 1000);
        finish_frame(&mut out);
        assert_eq!(hex(&out), "1000000007000000000000 00e803000000000000".replace(' ', ""));
        start_response(&mut out, 9, ErrorCode::UnknownTopic, "no");
        finish_frame(&mut out);
        assert_eq!(hex(&out), "0a0000000900000004000200 6e6f".replace(' ', ""));
        let mut r = Reader::new(&out[4..]);
        let h = decode_response_header(&mut r).unwrap();
        assert_eq!(
            (h.correlation_id, h.error, h.message.as_str()),
            (9, ErrorCode::UnknownTopic, "no")
        );

        start_response(&mut out, 1, ErrorCode::None, "");
        put::u16(&mut out, 1);
        put_fetch_partition(&mut out, "t", 0, ErrorCode::None, "", 5, 9, 3);
        out.extend_from_slice(b"abc");
        finish_frame(&mut out);
        let mut r = Reader::new(&out[4..]);
        decode_response_header(&mut r).unwrap();
        let parts = decode_fetch_response(&mut r).unwrap();
        assert_eq!(
            (parts[0].start_offset, parts[0].end_offset, parts[0].records),
            (5, 9, &b"abc"[..])
        );
    }

    #[test]
    fn unknown_types_and_versions_are_unsupported_not_invalid() {
        let mut out = Vec::new();
        create_topic_request(&mut out, 1, "x", 1);
        out[4] = 99;
        assert!(matches!(decode_request(&out[4..]), Err(RequestError::Unsupported(_))));
        create_topic_request(&mut out, 1, "x", 1);
        out[6] = 2;
        assert!(matches!(decode_request(&out[4..]), Err(RequestError::Unsupported(_))));
        create_topic_request(&mut out, 1, "x", 1);
        out.push(0);
        assert!(matches!(decode_request(&out[4..]), Err(RequestError::Invalid(_))));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut state = 0x1234_5678_9ABC_DEF1u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut valid = Vec::new();
        fetch_request(
            &mut valid,
            1,
            1,
            1,
            &[FetchPartition {
                topic: "t".into(),
                partition: 0,
                offset: 0,
                max_bytes: 1,
            }],
        );
        for round in 0..50_000 {
            let mut buf = if round % 2 == 0 {
                valid[4..].to_vec()
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
                let _ = decode_fetch_response(&mut r);
                let mut r = Reader::new(&buf);
                r.pos = at;
                let _ = decode_metadata_response(&mut r);
            }
        }
    }
}
