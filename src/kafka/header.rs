//! Request and response headers.
//!
//! | header | bytes |
//! |---|---|
//! | request v1 | `api_key int16` · `api_version int16` · `correlation_id int32` · `client_id nullable_string` |
//! | request v2 | request v1 · `tagged_fields` (flexible versions) |
//! | response v0 | `correlation_id int32` |
//! | response v1 | response v0 · `tagged_fields` (flexible versions, but never ApiVersions) |
//!
//! `client_id` stays a (non-compact) `nullable_string` in v2, so the four
//! fields sit at the same place in every header version this codec meets:
//! a request of a version it does not know still yields them, and the
//! broker can answer it. ApiVersions is answered with the response header
//! v0 in every version, by Kafka's rule (a client must read it before it
//! knows which versions the broker speaks); the admin APIs' flexible
//! versions with v1 ([`super::response::frame_message`]).

use super::api_key::*;
use super::wire::{put_i32, Decoder, Result};

/// A request's header (v1 or v2), `client_id` borrowed from the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader<'a> {
    /// Which API (Kafka's `ApiKeys`).
    pub api_key: i16,
    /// The version of the API's request and response.
    pub api_version: i16,
    /// Echoed in the response, so that the client pairs them.
    pub correlation_id: i32,
    /// The client's name for itself, if it gave one.
    pub client_id: Option<&'a str>,
}

impl<'a> RequestHeader<'a> {
    /// Reads the four fields common to request headers v1 and v2; a v2
    /// header's `tagged_fields` are left to [`RequestHeader::decode_tags`].
    pub fn decode(d: &mut Decoder<'a>) -> Result<RequestHeader<'a>> {
        Ok(RequestHeader {
            api_key: d.i16("request header api_key")?,
            api_version: d.i16("request header api_version")?,
            correlation_id: d.i32("request header correlation_id")?,
            client_id: d.nullable_string("request header client_id")?,
        })
    }

    /// Skips the header's `tagged_fields` when its version is flexible
    /// (request header v2).
    pub fn decode_tags(&self, d: &mut Decoder<'a>) -> Result<()> {
        if is_flexible(self.api_key, self.api_version) {
            d.tagged_fields("request header tagged_fields")?;
        }
        Ok(())
    }
}

/// The first flexible version of each API klog implements or answers, from
/// Kafka's message schemas (`flexibleVersions`); `None` for an API not in
/// this list.
pub fn first_flexible_version(api_key: i16) -> Option<i16> {
    Some(match api_key {
        PRODUCE => 9,
        FETCH => 12,
        LIST_OFFSETS => 6,
        METADATA => 9,
        OFFSET_COMMIT => 8,
        OFFSET_FETCH => 6,
        FIND_COORDINATOR => 3,
        JOIN_GROUP => 6,
        HEARTBEAT => 4,
        LEAVE_GROUP => 4,
        SYNC_GROUP => 4,
        API_VERSIONS => 3,
        INIT_PRODUCER_ID => 2,
        ADD_PARTITIONS_TO_TXN | ADD_OFFSETS_TO_TXN | END_TXN | TXN_OFFSET_COMMIT => 3,
        SASL_AUTHENTICATE => 2,
        DESCRIBE_ACLS | CREATE_ACLS | DELETE_ACLS => 2,
        DESCRIBE_USER_SCRAM_CREDENTIALS | ALTER_USER_SCRAM_CREDENTIALS => 0,
        DESCRIBE_GROUPS => 5,
        LIST_GROUPS => 3,
        DELETE_GROUPS => 2,
        CREATE_TOPICS => 5,
        DELETE_TOPICS => 4,
        DELETE_RECORDS => 2,
        CREATE_PARTITIONS => 2,
        OFFSET_FOR_LEADER_EPOCH => 4,
        DESCRIBE_CONFIGS => 4,
        ALTER_CONFIGS => 2,
        INCREMENTAL_ALTER_CONFIGS => 1,
        DESCRIBE_CLUSTER => 0,
        _ => return None,
    })
}

/// Whether a request of `api_key` at `api_version` is flexible (compact
/// types, tagged fields, request header v2). An API missing from
/// [`first_flexible_version`] counts as not flexible.
pub fn is_flexible(api_key: i16, api_version: i16) -> bool {
    first_flexible_version(api_key).is_some_and(|first| api_version >= first)
}

/// Appends the response header v0: the request's `correlation_id`.
pub fn put_response_header(out: &mut Vec<u8>, correlation_id: i32) {
    put_i32(out, correlation_id);
}

#[cfg(test)]
mod tests {
    use super::super::wire::{put_i16, put_nullable_string, put_uvarint};
    use super::*;

    fn header(api_key: i16, api_version: i16, client_id: Option<&str>) -> Vec<u8> {
        let mut out = Vec::new();
        put_i16(&mut out, api_key);
        put_i16(&mut out, api_version);
        put_i32(&mut out, 0x0a0b0c0d);
        put_nullable_string(&mut out, client_id);
        out
    }

    #[test]
    fn a_v1_header_decodes_and_leaves_the_body() {
        let mut frame = header(3, 4, Some("kcat"));
        frame.push(0x42);
        let mut d = Decoder::new(&frame);
        let h = RequestHeader::decode(&mut d).unwrap();
        h.decode_tags(&mut d).unwrap();
        assert_eq!(
            h,
            RequestHeader {
                api_key: 3,
                api_version: 4,
                correlation_id: 0x0a0b0c0d,
                client_id: Some("kcat")
            }
        );
        assert_eq!(d.rest(), &[0x42]);
    }

    #[test]
    fn a_v2_header_skips_its_tags_and_a_v1_one_does_not() {
        let mut frame = header(API_VERSIONS, 3, None);
        // One tagged field (tag 7, 1 byte), then the body's first byte.
        frame.extend_from_slice(&[1, 7, 1, 0xee, 0x42]);
        let mut d = Decoder::new(&frame);
        let h = RequestHeader::decode(&mut d).unwrap();
        assert_eq!(h.client_id, None);
        h.decode_tags(&mut d).unwrap();
        assert_eq!(d.rest(), &[0x42]);

        let mut frame = header(API_VERSIONS, 2, None);
        put_uvarint(&mut frame, 0);
        let mut d = Decoder::new(&frame);
        RequestHeader::decode(&mut d)
            .unwrap()
            .decode_tags(&mut d)
            .unwrap();
        assert_eq!(d.remaining(), 1, "v2 has no tags in its header");
    }

    #[test]
    fn truncated_headers_name_the_field() {
        let frame = header(0, 7, Some("client"));
        for cut in 0..frame.len() {
            let e = RequestHeader::decode(&mut Decoder::new(&frame[..cut])).unwrap_err();
            assert!(e.0.starts_with("request header "), "{e}");
        }
    }

    #[test]
    fn flexible_versions_follow_the_schemas() {
        assert!(!is_flexible(API_VERSIONS, 2));
        assert!(is_flexible(API_VERSIONS, 3));
        assert!(is_flexible(API_VERSIONS, 4));
        assert!(!is_flexible(1, 11));
        assert!(is_flexible(1, 12));
        assert!(!is_flexible(999, 30));
        let mut out = Vec::new();
        put_response_header(&mut out, -7);
        assert_eq!(out, (-7i32).to_be_bytes());
    }
}
