//! Requests: their header, the decoded [`Request`], an encoder for each
//! (the client's side) and [`decode_request`] (the broker's). Their bodies
//! are in the table of [`crate::protocol`].

use std::ops::Range;

use super::frame::{finish_frame, put, Reader};
use super::{
    ApiKey, ProtocolError, Result, ACKS_ALL, ACKS_LEADER, ACKS_NONE, FETCH_PARTITIONS_MAX,
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
        /// Longest wait for `bytes_min`.
        wait_ms_max: u32,
        /// Bytes worth answering with before `wait_ms_max`.
        bytes_min: u32,
        /// Bytes of records in the whole response, at most (but one batch).
        response_bytes_max: u32,
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
}

/// Starts a request frame in `out` (cleared); [`finish_frame`] sets its length.
pub fn start_request(out: &mut Vec<u8>, api: ApiKey, correlation_id: u32) {
    out.clear();
    begin_request(out, api, correlation_id);
}

/// Starts a request frame at the end of `out`, after the frames already
/// there; returns where it starts, for [`finish_frame`] on `out[start..]`.
fn begin_request(out: &mut Vec<u8>, api: ApiKey, correlation_id: u32) -> usize {
    let start = out.len();
    put::u32(out, 0);
    put::u16(out, api as u16);
    put::u16(out, api.version());
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
    let start = begin_request(out, ApiKey::Produce, correlation_id);
    out.push(acks as u8);
    put::u32(out, timeout_ms);
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

/// Encodes a fetch request.
pub fn fetch_request(
    out: &mut Vec<u8>,
    correlation_id: u32,
    want: FetchWant,
    parts: &[FetchPartition],
) {
    start_request(out, ApiKey::Fetch, correlation_id);
    put::u32(out, want.wait_ms_max);
    put::u32(out, want.bytes_min);
    put::u32(out, want.response_bytes_max);
    put::u16(out, parts.len() as u16);
    for p in parts {
        put::str(out, &p.topic);
        put::u32(out, p.partition);
        put::u64(out, p.offset);
        put::u32(out, p.bytes_max);
    }
    finish_frame(out);
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

/// A fetched topic's name: no longer than a topic's can be, as the answer
/// repeats it.
fn fetch_topic(r: &mut Reader<'_>) -> Result<String> {
    let topic = r.str("topic")?;
    if topic.len() > limits::TOPIC_NAME_BYTES_MAX {
        return Err(ProtocolError(format!(
            "a topic name of {} bytes (at most {})",
            topic.len(),
            limits::TOPIC_NAME_BYTES_MAX
        )));
    }
    Ok(topic)
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
    if !(ApiKey::VERSION..=api.version()).contains(&header.api_version) {
        return Err(RequestError::Unsupported(format!(
            "{api:?} version {} is not supported (this broker speaks versions {} to {})",
            header.api_version,
            ApiKey::VERSION,
            api.version()
        )));
    }
    let mut r = Reader::at(body, REQUEST_HEADER_BYTES);
    let request = decode_body(api, header.api_version, &mut r).map_err(RequestError::Invalid)?;
    r.finish("request").map_err(RequestError::Invalid)?;
    Ok((header, request))
}

fn decode_body<'a>(api: ApiKey, version: u16, r: &mut Reader<'a>) -> Result<Request<'a>> {
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
            let wait_ms_max = r.u32("wait_ms_max")?;
            let bytes_min = r.u32("bytes_min")?;
            let response_bytes_max = match version {
                1 => limits::FETCH_RESPONSE_BYTES_DEFAULT,
                _ => r.u32("response_bytes_max")?,
            };
            let count = r.u16("count")? as usize;
            if count > FETCH_PARTITIONS_MAX {
                return Err(ProtocolError(format!("{count} partitions in one fetch")));
            }
            let mut partitions = Vec::with_capacity(count);
            for _ in 0..count {
                partitions.push(FetchPartition {
                    topic: fetch_topic(r)?,
                    partition: r.u32("partition")?,
                    offset: r.u64("offset")?,
                    bytes_max: r.u32("bytes_max")?,
                });
            }
            Request::Fetch {
                wait_ms_max,
                bytes_min,
                response_bytes_max,
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
            bytes_max: 1 << 20,
        }];
        let want = FetchWant {
            wait_ms_max: 500,
            bytes_min: 1,
            response_bytes_max: 1 << 30,
        };
        fetch_request(&mut out, 8, want, &parts);
        assert_eq!(
            hex(&out),
            "2a000000010002000800000\
             0f40100000100000000000040010002006162010000000201000000000000\
             00001000"
        );
        assert_eq!(
            decode_request(&out[4..]).unwrap().1,
            Request::Fetch {
                wait_ms_max: 500,
                bytes_min: 1,
                response_bytes_max: 1 << 30,
                partitions: parts.to_vec()
            }
        );

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

    #[test]
    fn a_version_1_fetch_gets_the_default_budget_and_long_topics_are_refused() {
        let parts = [FetchPartition {
            topic: "ab".into(),
            partition: 1,
            offset: 258,
            bytes_max: 1 << 20,
        }];
        let want = FetchWant {
            wait_ms_max: 500,
            bytes_min: 1,
            response_bytes_max: 77,
        };
        let mut out = Vec::new();
        fetch_request(&mut out, 8, want, &parts);
        // Version 1: the same without the budget.
        let mut v1 = out.clone();
        v1[6] = 1;
        v1.drain(20..24);
        finish_frame(&mut v1);
        assert_eq!(
            decode_request(&v1[4..]).unwrap().1,
            Request::Fetch {
                wait_ms_max: 500,
                bytes_min: 1,
                response_bytes_max: limits::FETCH_RESPONSE_BYTES_DEFAULT,
                partitions: parts.to_vec()
            }
        );
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
        create_topic_request(&mut out, 1, "x", 1);
        out.push(0);
        assert!(matches!(
            decode_request(&out[4..]),
            Err(RequestError::Invalid(_))
        ));
    }
}
