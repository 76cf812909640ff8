//! Responses: their header (a correlation id, an error code and its
//! message), the writers the broker uses and the decoders the client uses.
//! Their bodies are in the table of [`crate::protocol`].

use super::frame::{put, Reader};
use super::{ErrorCode, ProtocolError, Result, FETCH_VERSION_COMMITTED, FETCH_VERSION_REPLICA};

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
    /// The partition's current leader epoch as the broker knows it (a
    /// version 3 response; `None` before, and when it has none).
    pub leader_epoch: Option<u32>,
    /// The last stable offset and the aborted transactions among the
    /// records, `(producer_id, first_offset)` (a version 6 response).
    pub stable: Option<(u64, Vec<(i64, u64)>)>,
    /// Whole batches, as stored.
    pub records: &'a [u8],
}

/// The header of one fetch-response partition, as the broker writes it:
/// its `records_len` bytes of records follow (sent with `sendfile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPartitionHead<'a> {
    /// Topic.
    pub topic: &'a str,
    /// Partition.
    pub partition: u32,
    /// Error for this partition.
    pub error: ErrorCode,
    /// What was wrong.
    pub message: &'a str,
    /// First offset held.
    pub start_offset: u64,
    /// One past the last visible offset.
    pub end_offset: u64,
    /// The partition's current leader epoch (sent from version 5 on).
    pub leader_epoch: Option<u32>,
    /// The last stable offset and the aborted transactions among the
    /// records (sent in version 6).
    pub stable: (u64, &'a [(i64, u64)]),
    /// Bytes of records that follow.
    pub records_len: u32,
}

/// Writes the header of one partition of a fetch response of `version`
/// (that of its request): the leader epoch goes in version 3 only, so an
/// older client reads the bytes it always did.
pub fn put_fetch_partition(out: &mut Vec<u8>, version: u16, head: &FetchPartitionHead<'_>) {
    put::str(out, head.topic);
    put::u32(out, head.partition);
    put::u16(out, head.error as u16);
    put::message(out, head.message);
    put::u64(out, head.start_offset);
    put::u64(out, head.end_offset);
    if version >= FETCH_VERSION_REPLICA {
        put::epoch(out, head.leader_epoch);
    }
    if version >= FETCH_VERSION_COMMITTED {
        let (last_stable_offset, aborted) = head.stable;
        put::u64(out, last_stable_offset);
        put::u16(out, aborted.len() as u16);
        for (producer_id, first_offset) in aborted {
            put::i64(out, *producer_id);
            put::u64(out, *first_offset);
        }
    }
    put::u32(out, head.records_len);
}

/// Decodes the body of a fetch response to a request of `version`.
pub fn decode_fetch_response<'a>(
    r: &mut Reader<'a>,
    version: u16,
) -> Result<Vec<FetchedPartition<'a>>> {
    let count = r.u16("count")? as usize;
    // A partition takes at least its fixed fields: a count the frame
    // cannot hold allocates nothing.
    let mut parts = Vec::with_capacity(count.min(r.left() / (2 + 4 + 2 + 2 + 8 + 8 + 4)));
    for _ in 0..count {
        let topic = r.str("topic")?;
        let partition = r.u32("partition")?;
        let error = ErrorCode::from_u16(r.u16("error")?);
        let message = r.str("message")?;
        let start_offset = r.u64("start_offset")?;
        let end_offset = r.u64("end_offset")?;
        let leader_epoch = match version {
            v if v >= FETCH_VERSION_REPLICA => r.epoch("leader_epoch")?,
            _ => None,
        };
        let stable = match version >= FETCH_VERSION_COMMITTED {
            true => Some(decode_stable(r)?),
            false => None,
        };
        parts.push(FetchedPartition {
            topic,
            partition,
            error,
            message,
            start_offset,
            end_offset,
            leader_epoch,
            stable,
            records: r.bytes("records")?,
        });
    }
    r.finish("fetch response")?;
    Ok(parts)
}

/// A version 6 partition's last stable offset and aborted transactions;
/// a count the frame cannot hold allocates nothing.
fn decode_stable(r: &mut Reader<'_>) -> Result<(u64, Vec<(i64, u64)>)> {
    let last_stable_offset = r.u64("last_stable_offset")?;
    let count = r.u16("aborted_count")? as usize;
    let mut aborted = Vec::with_capacity(count.min(r.left() / 16));
    for _ in 0..count {
        aborted.push((r.i64("producer_id")?, r.u64("first_offset")?));
    }
    Ok((last_stable_offset, aborted))
}

/// Writes the body of an offsets_for_leader_epoch response: the largest
/// epoch at or below the one asked and the offset where it ends here, or
/// `None` (-1 and `2^64 - 1`, Kafka's undefined epoch and offset) when
/// the log has no such epoch.
pub fn put_epoch_end(out: &mut Vec<u8>, found: Option<(u32, u64)>) {
    put::epoch(out, found.map(|(epoch, _)| epoch));
    put::u64(out, found.map_or(u64::MAX, |(_, end)| end));
}

/// Decodes the body of an offsets_for_leader_epoch response: (epoch,
/// end offset), or `None` when the log has no epoch at or below the one
/// asked.
pub fn decode_epoch_end(r: &mut Reader<'_>) -> Result<Option<(u32, u64)>> {
    let epoch = r.epoch("leader_epoch")?;
    let end_offset = r.u64("end_offset")?;
    r.finish("offsets_for_leader_epoch response")?;
    Ok(epoch.map(|e| (e, end_offset)))
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
    use crate::protocol::{finish_frame, RESPONSE_HEADER_BYTES};

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
        let head = FetchPartitionHead {
            topic: "t",
            partition: 0,
            error: ErrorCode::None,
            message: "",
            start_offset: 5,
            end_offset: 9,
            leader_epoch: Some(4),
            stable: (9, &[]),
            records_len: 3,
        };
        put_fetch_partition(&mut out, 2, &head);
        out.extend_from_slice(b"abc");
        finish_frame(&mut out);
        let mut r = Reader::new(&out[4..]);
        decode_response_header(&mut r).unwrap();
        let parts = decode_fetch_response(&mut r, 2).unwrap();
        assert_eq!(
            (parts[0].start_offset, parts[0].end_offset, parts[0].records),
            (5, 9, &b"abc"[..])
        );
        assert_eq!(parts[0].leader_epoch, None, "version 2 carries no epoch");
    }

    /// A fetch answer of `version` with two partitions: one with records
    /// and epoch 4, one failed without an epoch.
    fn fetch_answer(version: u16) -> Vec<u8> {
        let mut out = Vec::new();
        start_response(&mut out, 1, ErrorCode::None, "");
        put::u16(&mut out, 2);
        let head = FetchPartitionHead {
            topic: "t",
            partition: 0,
            error: ErrorCode::None,
            message: "",
            start_offset: 5,
            end_offset: 9,
            leader_epoch: Some(4),
            stable: (8, &[(7, 6)]),
            records_len: 3,
        };
        put_fetch_partition(&mut out, version, &head);
        out.extend_from_slice(b"abc");
        let failed = FetchPartitionHead {
            topic: "u",
            error: ErrorCode::UnknownTopic,
            message: "no",
            start_offset: 0,
            end_offset: 0,
            leader_epoch: None,
            stable: (0, &[]),
            records_len: 0,
            ..head
        };
        put_fetch_partition(&mut out, version, &failed);
        finish_frame(&mut out);
        out
    }

    // A fetch answer's bytes in each version: version 4 as versions 1 and
    // 2 always were, version 5 (as 3) with the epoch after end_offset.
    #[test]
    fn golden_fetch_responses_of_each_version() {
        let v2 = "4d000000 01000000 0000 0000 0200 \
                  0100 74 00000000 0000 0000 0500000000000000 0900000000000000 03000000 616263 \
                  0100 75 00000000 0400 0200 6e6f 0000000000000000 0000000000000000 00000000";
        assert_eq!(hex(&fetch_answer(4)), v2.replace(' ', ""));
        let v3 = "5d000000 01000000 0000 0000 0200 \
                  0100 74 00000000 0000 0000 0500000000000000 0900000000000000 \
                  0400000000000000 03000000 616263 \
                  0100 75 00000000 0400 0200 6e6f 0000000000000000 0000000000000000 \
                  ffffffffffffffff 00000000";
        let out = fetch_answer(5);
        assert_eq!(hex(&out), v3.replace(' ', ""));
        let mut r = Reader::new(&out[4..]);
        decode_response_header(&mut r).unwrap();
        let parts = decode_fetch_response(&mut r, 5).unwrap();
        let got: Vec<_> = parts
            .iter()
            .map(|p| (p.topic.as_str(), p.error, p.leader_epoch, p.records))
            .collect();
        assert_eq!(
            got,
            [
                ("t", ErrorCode::None, Some(4), &b"abc"[..]),
                ("u", ErrorCode::UnknownTopic, None, &b""[..])
            ]
        );
        // Version 6: the last stable offset and the aborted transactions
        // after the epoch.
        let v6 = "81000000 01000000 0000 0000 0200 \
                  0100 74 00000000 0000 0000 0500000000000000 0900000000000000 \
                  0400000000000000 0800000000000000 0100 0700000000000000 0600000000000000 \
                  03000000 616263 \
                  0100 75 00000000 0400 0200 6e6f 0000000000000000 0000000000000000 \
                  ffffffffffffffff 0000000000000000 0000 00000000";
        let out = fetch_answer(6);
        assert_eq!(hex(&out), v6.replace(' ', ""));
        let mut r = Reader::new(&out[4..]);
        decode_response_header(&mut r).unwrap();
        let parts = decode_fetch_response(&mut r, 6).unwrap();
        assert_eq!(parts[0].stable, Some((8, vec![(7, 6)])));
        assert_eq!(
            (parts[1].stable.clone(), parts[0].records),
            (Some((0, vec![])), &b"abc"[..])
        );
        // Each version read as another does not decode.
        for (version, read_as) in [(4, 5), (5, 4), (5, 6)] {
            let out = fetch_answer(version);
            let mut r = Reader::new(&out[4..]);
            decode_response_header(&mut r).unwrap();
            assert!(decode_fetch_response(&mut r, read_as).is_err());
        }
    }

    #[test]
    fn a_response_cut_anywhere_or_with_a_bad_epoch_is_an_error() {
        for version in [4, 5, 6] {
            let out = fetch_answer(version);
            let body = &out[4 + RESPONSE_HEADER_BYTES + 2..];
            for len in 0..body.len() {
                let mut r = Reader::new(&body[..len]);
                assert!(
                    decode_fetch_response(&mut r, version).is_err(),
                    "cut at {len}"
                );
            }
            assert!(decode_fetch_response(&mut Reader::new(body), version).is_ok());
        }
        let out = fetch_answer(5);
        let at = 4 + RESPONSE_HEADER_BYTES + 2 + 2 + 2 + 1 + 4 + 2 + 2 + 8 + 8;
        assert_eq!(out[at..at + 8], 4i64.to_le_bytes());
        for bad in [-2i64, i64::from(u32::MAX) + 1] {
            let mut out = out.clone();
            out[at..at + 8].copy_from_slice(&bad.to_le_bytes());
            let mut r = Reader::at(&out[4..], RESPONSE_HEADER_BYTES + 2);
            let err = decode_fetch_response(&mut r, 5).unwrap_err();
            assert!(err.0.contains(&format!("leader_epoch {bad}")), "{err}");
        }
    }

    #[test]
    fn epoch_ends_round_trip_and_none_is_minus_1() {
        for found in [
            Some((0, 0)),
            Some((7, 1 << 40)),
            Some((u32::MAX, u64::MAX)),
            None,
        ] {
            let mut out = Vec::new();
            put_epoch_end(&mut out, found);
            assert_eq!(out.len(), 16);
            assert_eq!(decode_epoch_end(&mut Reader::new(&out)).unwrap(), found);
            for len in 0..out.len() {
                assert!(decode_epoch_end(&mut Reader::new(&out[..len])).is_err());
            }
            out.push(0);
            assert!(
                decode_epoch_end(&mut Reader::new(&out)).is_err(),
                "trailing"
            );
        }
        let mut none = Vec::new();
        put_epoch_end(&mut none, None);
        assert_eq!(hex(&none), "ffffffffffffffffffffffffffffffff");
        let mut bad = (-2i64).to_le_bytes().to_vec();
        bad.extend_from_slice(&0u64.to_le_bytes());
        assert!(decode_epoch_end(&mut Reader::new(&bad)).is_err());
    }
}
