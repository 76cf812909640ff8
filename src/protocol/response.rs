//! Responses: their header (a correlation id, an error code and its
//! message), the writers the broker uses and the decoders the client uses.
//! Their bodies are in the table of [`crate::protocol`].

use super::frame::{put, Reader};
use super::{ErrorCode, ProtocolError, Result};

/// Starts a response frame in `out` (cleared); [`finish_frame`](super::finish_frame) sets its length.
pub fn start_response(out: &mut Vec<u8>, correlation_id: u32, error: ErrorCode, message: &str) {
    out.clear();
    begin_response(out, correlation_id, error, message);
}

/// Starts a response frame at the end of `out`, after the frames already
/// there; returns where it starts, for [`finish_frame`](super::finish_frame) on `out[start..]`.
pub fn begin_response(
    out: &mut Vec<u8>,
    correlation_id: u32,
    error: ErrorCode,
    message: &str,
) -> usize {
    let start = out.len();
    put::u32(out, 0);
    put::u32(out, correlation_id);
    put::u16(out, error as u16);
    put::message(out, message);
    start
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
    put::message(out, message);
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
        if n > r.buffer_len() / 16 {
            return Err(ProtocolError(format!(
                "{n} partitions do not fit the frame"
            )));
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
    use crate::protocol::finish_frame;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    // Golden frames: a change here is a protocol change, and needs the
    // module docs and a version bump.
    #[test]
    fn golden_responses() {
        let mut out = Vec::new();
        start_response(&mut out, 7, ErrorCode::None, "");
        put::u64(&mut out, 1000);
        finish_frame(&mut out);
        assert_eq!(
            hex(&out),
            "1000000007000000000000 00e803000000000000".replace(' ', "")
        );
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
}
