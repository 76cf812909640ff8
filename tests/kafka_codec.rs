//! The hand-written Kafka codec (`klog::kafka`) against the `kafka-protocol`
//! crate, for every API and version in `klog::kafka::response::SUPPORTED`:
//! the crate encodes requests (every field the version has set to a value
//! other than its default, several topics and partitions) that klog must
//! decode to the same fields, and decodes the responses klog encodes to the
//! same fields, with no byte left over.
//!
//! Then a long seeded mutation test of `decode_request` on valid frames
//! (flipped bytes, truncations, huge counts, negative lengths, random
//! bytes): it never panics, and the bytes it allocates stay within a small
//! multiple of the frame's length, whatever count the frame claims. The
//! crate itself is never fed hostile bytes: its decoders can abort.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use klog::kafka::api_key::*;
use klog::kafka::message::Message;
use klog::kafka::request::{decode_request, Request, RequestError};
use klog::kafka::response::{self as kres, SUPPORTED};
use klog::random::XorShift;

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_owned())
}

fn topic(x: &str) -> km::TopicName {
    km::TopicName(s(x))
}

/// A request frame's bytes (without the length), as the crate writes it.
fn request_frame<R: Encodable + HeaderVersion>(key: i16, version: i16, request: &R) -> Vec<u8> {
    let mut header = km::RequestHeader::default()
        .with_request_api_key(key)
        .with_request_api_version(version)
        .with_correlation_id(0x0102_0304 + i32::from(version))
        .with_client_id(Some(s("differential-client")));
    if R::header_version(version) >= 2 {
        header = header.with_unknown_tagged_field(3, s("header-tag").into_bytes());
    }
    let mut out = Vec::new();
    header.encode(&mut out, R::header_version(version)).unwrap();
    request.encode(&mut out, version).unwrap();
    out
}

fn decoded(frame: &[u8], key: i16, version: i16) -> Request<'_> {
    let (header, request) = decode_request(frame)
        .unwrap_or_else(|e| panic!("api {key} v{version}: klog refuses the crate's frame: {e}"));
    assert_eq!(header.api_key, key);
    assert_eq!(header.api_version, version);
    assert_eq!(header.correlation_id, 0x0102_0304 + i32::from(version));
    assert_eq!(header.client_id, Some("differential-client"));
    request
}

fn versions(key: i16) -> std::ops::RangeInclusive<i16> {
    let (min, max) = kres::supported(key).expect("in the table");
    min..=max
}

/// A record batch's bytes: opaque to the codec, so any bytes do (the
/// crate's `Bytes` is reached through `StrBytes`, hence ASCII).
fn records(tag: &str) -> kafka_protocol::protocol::StrBytes {
    s(&format!("records of {tag}: \x00\x01\x7f"))
}

// ---------------------------------------------------------------- requests

fn produce_request(version: i16) -> km::ProduceRequest {
    let partition = |index: i32, data: Option<&str>| {
        km::produce_request::PartitionProduceData::default()
            .with_index(index)
            .with_records(data.map(|d| records(d).into_bytes()))
    };
    km::ProduceRequest::default()
        .with_transactional_id(Some(km::TransactionalId(s(&format!("tx-{version}")))))
        .with_acks(-1)
        .with_timeout_ms(30_001)
        .with_topic_data(vec![
            km::produce_request::TopicProduceData::default()
                .with_name(topic("alpha"))
                .with_partition_data(vec![partition(0, Some("a0")), partition(7, Some("a7"))]),
            km::produce_request::TopicProduceData::default()
                .with_name(topic("beta"))
                .with_partition_data(vec![partition(3, None)]),
        ])
}

#[test]
fn produce_requests_decode_as_the_crate_encodes_them() {
    for version in versions(PRODUCE) {
        let theirs = produce_request(version);
        let frame = request_frame(PRODUCE, version, &theirs);
        let Request::Produce(ours) = decoded(&frame, PRODUCE, version) else {
            panic!("not a produce")
        };
        assert_eq!(ours.transactional_id, Some(&*format!("tx-{version}")));
        assert_eq!(ours.acks, theirs.acks);
        assert_eq!(ours.timeout_ms, theirs.timeout_ms);
        assert_eq!(ours.topic_data.len(), theirs.topic_data.len());
        for (o, t) in ours.topic_data.iter().zip(&theirs.topic_data) {
            assert_eq!(o.name, &*t.name.0);
            let t: Vec<_> = t
                .partition_data
                .iter()
                .map(|p| (p.index, p.records.as_deref()))
                .collect();
            let o: Vec<_> = o
                .partition_data
                .iter()
                .map(|p| (p.index, p.records))
                .collect();
            assert_eq!(o, t, "v{version}");
        }
    }
}

fn fetch_request(version: i16) -> km::FetchRequest {
    let partition = |p: i32| {
        let mut fp = km::fetch_request::FetchPartition::default()
            .with_partition(p)
            .with_fetch_offset(1_000_000_007 + i64::from(p))
            .with_partition_max_bytes(1_048_576 + p);
        if version >= 9 {
            fp = fp.with_current_leader_epoch(40 + p);
        }
        if version >= 12 {
            fp = fp.with_last_fetched_epoch(30 + p);
        }
        if version >= 5 {
            fp = fp.with_log_start_offset(12 + i64::from(p));
        }
        fp
    };
    let mut r = km::FetchRequest::default()
        .with_replica_id(km::BrokerId(-1))
        .with_max_wait_ms(501)
        .with_min_bytes(17)
        .with_max_bytes(52_428_801)
        .with_isolation_level(1)
        .with_topics(vec![
            km::fetch_request::FetchTopic::default()
                .with_topic(topic("alpha"))
                .with_partitions(vec![partition(0), partition(5)]),
            km::fetch_request::FetchTopic::default()
                .with_topic(topic("beta"))
                .with_partitions(vec![partition(2)]),
        ]);
    if version >= 7 {
        r = r
            .with_session_id(99)
            .with_session_epoch(3)
            .with_forgotten_topics_data(vec![
                km::fetch_request::ForgottenTopic::default()
                    .with_topic(topic("gamma"))
                    .with_partitions(vec![1, 4]),
                km::fetch_request::ForgottenTopic::default().with_topic(topic("delta")),
            ]);
    }
    if version >= 11 {
        r = r.with_rack_id(s("rack-b"));
    }
    r
}

#[test]
fn fetch_requests_decode_as_the_crate_encodes_them() {
    for version in versions(FETCH) {
        let theirs = fetch_request(version);
        let frame = request_frame(FETCH, version, &theirs);
        let Request::Fetch(ours) = decoded(&frame, FETCH, version) else {
            panic!("not a fetch")
        };
        assert_eq!(ours.replica_id, theirs.replica_id.0);
        assert_eq!(
            (
                ours.max_wait_ms,
                ours.min_bytes,
                ours.max_bytes,
                ours.isolation_level
            ),
            (
                theirs.max_wait_ms,
                theirs.min_bytes,
                theirs.max_bytes,
                theirs.isolation_level
            )
        );
        assert_eq!(
            (ours.session_id, ours.session_epoch),
            (theirs.session_id, theirs.session_epoch),
            "v{version}"
        );
        assert_eq!(ours.rack_id, &*theirs.rack_id);
        assert_eq!(ours.topics.len(), theirs.topics.len());
        for (o, t) in ours.topics.iter().zip(&theirs.topics) {
            assert_eq!(o.topic, &*t.topic.0);
            let t: Vec<_> = t
                .partitions
                .iter()
                .map(|p| {
                    let epoch = p.current_leader_epoch;
                    (
                        p.partition,
                        (epoch, p.last_fetched_epoch),
                        p.fetch_offset,
                        p.log_start_offset,
                        p.partition_max_bytes,
                    )
                })
                .collect();
            let o: Vec<_> = o
                .partitions
                .iter()
                .map(|p| {
                    let epoch = p.current_leader_epoch;
                    (
                        p.partition,
                        (epoch, p.last_fetched_epoch),
                        p.fetch_offset,
                        p.log_start_offset,
                        p.partition_max_bytes,
                    )
                })
                .collect();
            assert_eq!(o, t, "v{version}");
        }
        let t: Vec<_> = theirs
            .forgotten_topics_data
            .iter()
            .map(|f| (&*f.topic.0, f.partitions.clone()))
            .collect();
        let o: Vec<_> = ours
            .forgotten_topics_data
            .iter()
            .map(|f| (f.topic, f.partitions.clone()))
            .collect();
        assert_eq!(o, t, "v{version}");
    }
}

fn list_offsets_request(version: i16) -> km::ListOffsetsRequest {
    let partition = |p: i32, at: i64| {
        let p = km::list_offsets_request::ListOffsetsPartition::default()
            .with_partition_index(p)
            .with_timestamp(at);
        if version >= 4 {
            p.with_current_leader_epoch(9)
        } else {
            p
        }
    };
    let mut r = km::ListOffsetsRequest::default()
        .with_replica_id(km::BrokerId(-1))
        .with_topics(vec![
            km::list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic("alpha"))
                .with_partitions(vec![partition(0, -2), partition(1, -1)]),
            km::list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic("beta"))
                .with_partitions(vec![partition(6, 1_700_000_000_123), partition(7, -3)]),
        ]);
    if version >= 2 {
        r = r.with_isolation_level(1);
    }
    if version >= 10 {
        r = r.with_timeout_ms(3000);
    }
    r
}

#[test]
fn list_offsets_requests_decode_as_the_crate_encodes_them() {
    for version in versions(LIST_OFFSETS) {
        let theirs = list_offsets_request(version);
        let frame = request_frame(LIST_OFFSETS, version, &theirs);
        let Request::ListOffsets(ours) = decoded(&frame, LIST_OFFSETS, version) else {
            panic!("not a list offsets")
        };
        assert_eq!(ours.replica_id, theirs.replica_id.0);
        assert_eq!(ours.isolation_level, theirs.isolation_level);
        assert_eq!(ours.timeout_ms, theirs.timeout_ms);
        let t: Vec<_> = theirs
            .topics
            .iter()
            .map(|t| {
                let p: Vec<_> = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.current_leader_epoch, p.timestamp))
                    .collect();
                (&*t.name.0, p)
            })
            .collect();
        let o: Vec<_> = ours
            .topics
            .iter()
            .map(|t| {
                let p: Vec<_> = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.current_leader_epoch, p.timestamp))
                    .collect();
                (t.name, p)
            })
            .collect();
        assert_eq!(o, t, "v{version}");
    }
}

fn metadata_request(version: i16, topics: Option<&[&str]>) -> km::MetadataRequest {
    let topics = topics.map(|names| {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let t = km::metadata_request::MetadataRequestTopic::default();
                // From v10 a topic may be asked for by id alone.
                match (version >= 10, i) {
                    (true, 1) => t.with_topic_id(uuid(0x5a)),
                    _ => t.with_name(Some(topic(n))),
                }
            })
            .collect()
    });
    let mut r = km::MetadataRequest::default().with_topics(topics);
    if version >= 4 {
        r = r.with_allow_auto_topic_creation(false);
    }
    if (8..=10).contains(&version) {
        r = r.with_include_cluster_authorized_operations(true);
    }
    if version >= 8 {
        r = r.with_include_topic_authorized_operations(true);
    }
    r
}

fn uuid(byte: u8) -> uuid::Uuid {
    uuid::Uuid::from_bytes([byte; 16])
}

#[test]
fn metadata_requests_decode_as_the_crate_encodes_them() {
    for version in versions(METADATA) {
        let mut cases: Vec<Option<&[&str]>> = vec![Some(&["alpha", "beta", "gamma"]), Some(&[])];
        if version >= 1 {
            cases.push(None);
        }
        for case in cases {
            let theirs = metadata_request(version, case);
            let frame = request_frame(METADATA, version, &theirs);
            let Request::Metadata(ours) = decoded(&frame, METADATA, version) else {
                panic!("not a metadata")
            };
            let o = ours
                .topics
                .as_ref()
                .map(|t| t.iter().map(|t| (t.topic_id, t.name)).collect::<Vec<_>>());
            let t = theirs.topics.as_ref().map(|t| {
                t.iter()
                    .map(|t| (*t.topic_id.as_bytes(), t.name.as_ref().map(|n| &*n.0)))
                    .collect::<Vec<_>>()
            });
            assert_eq!(o, t, "v{version}");
            assert_eq!(
                (
                    ours.allow_auto_topic_creation,
                    ours.include_cluster_authorized_operations,
                    ours.include_topic_authorized_operations
                ),
                (
                    theirs.allow_auto_topic_creation,
                    theirs.include_cluster_authorized_operations,
                    theirs.include_topic_authorized_operations
                ),
                "v{version}"
            );
        }
    }
}

#[test]
fn api_versions_requests_decode_as_the_crate_encodes_them() {
    for version in versions(API_VERSIONS) {
        let mut theirs = km::ApiVersionsRequest::default();
        if version >= 3 {
            theirs = theirs
                .with_client_software_name(s("kcat-librdkafka"))
                .with_client_software_version(s("2.0.2"))
                .with_unknown_tagged_field(9, s("body-tag").into_bytes());
        }
        let frame = request_frame(API_VERSIONS, version, &theirs);
        let Request::ApiVersions(ours) = decoded(&frame, API_VERSIONS, version) else {
            panic!("not an api versions")
        };
        assert_eq!(ours.client_software_name, &*theirs.client_software_name);
        assert_eq!(
            ours.client_software_version,
            &*theirs.client_software_version
        );
    }
}

#[test]
fn init_producer_id_requests_decode_as_the_crate_encodes_them() {
    for version in versions(INIT_PRODUCER_ID) {
        for tx in [None, Some("tx-7")] {
            let mut theirs = km::InitProducerIdRequest::default()
                .with_transactional_id(tx.map(|t| km::TransactionalId(s(t))))
                .with_transaction_timeout_ms(60_013);
            if version >= 3 {
                theirs = theirs
                    .with_producer_id(km::ProducerId(77))
                    .with_producer_epoch(5);
            }
            let frame = request_frame(INIT_PRODUCER_ID, version, &theirs);
            let Request::InitProducerId(ours) = decoded(&frame, INIT_PRODUCER_ID, version) else {
                panic!("not an init producer id")
            };
            assert_eq!(ours.transactional_id, tx);
            assert_eq!(ours.transaction_timeout_ms, 60_013);
            let producer = if version >= 3 { (77, 5) } else { (-1, -1) };
            assert_eq!((ours.producer_id, ours.producer_epoch), producer);
        }
    }
}

#[test]
fn unsupported_versions_and_apis_still_yield_the_header() {
    // A client newer than klog may open with an ApiVersions version klog
    // has not heard of (flexible, header v2): v5, written as v4 is.
    let mut frame = request_frame(API_VERSIONS, 4, &km::ApiVersionsRequest::default());
    frame[2..4].copy_from_slice(&5i16.to_be_bytes());
    match decode_request(&frame) {
        Err(RequestError::Unsupported {
            api_key: API_VERSIONS,
            api_version: 5,
            correlation_id,
            client_id,
        }) => {
            assert_eq!(correlation_id, 0x0102_0304 + 4);
            assert_eq!(client_id.as_deref(), Some("differential-client"));
        }
        other => panic!("{other:?}"),
    }
    for (key, version) in [
        (PRODUCE, 2),
        (PRODUCE, 12),
        (FETCH, 3),
        (FETCH, 13),
        (METADATA, 13),
    ] {
        let mut frame = Vec::new();
        let header = km::RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_client_id(Some(s("c")));
        header.encode(&mut frame, 1).unwrap();
        assert!(
            matches!(decode_request(&frame), Err(RequestError::Unsupported { api_key, api_version, .. }) if api_key == key && api_version == version),
            "{key} v{version}"
        );
    }
    // An API key nobody knows (but a well-formed header).
    let mut frame = request_frame(API_VERSIONS, 0, &km::ApiVersionsRequest::default());
    frame[..2].copy_from_slice(&999i16.to_be_bytes());
    assert!(matches!(
        decode_request(&frame),
        Err(RequestError::Unsupported { api_key: 999, .. })
    ));
    // A truncated header has no ids; a bad body keeps them.
    assert!(matches!(
        decode_request(&frame[..5]),
        Err(RequestError::Invalid {
            correlation_id: None,
            ..
        })
    ));
    let mut frame = request_frame(INIT_PRODUCER_ID, 1, &km::InitProducerIdRequest::default());
    frame.pop();
    assert!(matches!(
        decode_request(&frame),
        Err(RequestError::Invalid {
            api_key: Some(INIT_PRODUCER_ID),
            correlation_id: Some(_),
            ..
        })
    ));
    // A trailing byte is refused.
    let mut frame = request_frame(INIT_PRODUCER_ID, 1, &km::InitProducerIdRequest::default());
    frame.push(0);
    assert!(matches!(
        decode_request(&frame),
        Err(RequestError::Invalid { .. })
    ));
}

// --------------------------------------------------------------- responses

/// The crate's decoding of a body klog encoded, which must use every byte.
fn theirs<D: Decodable>(body: &[u8], version: i16) -> D {
    let mut rest = body;
    let decoded = D::decode(&mut rest, version).unwrap();
    assert!(
        rest.is_empty(),
        "v{version}: {} bytes left over",
        rest.len()
    );
    decoded
}

#[test]
fn api_versions_responses_decode_in_the_crate_with_empty_tags() {
    for version in versions(API_VERSIONS) {
        let mut ours = kres::ApiVersionsResponse::new(0);
        ours.throttle_time_ms = if version >= 1 { 5 } else { 0 };
        let mut body = Vec::new();
        ours.encode(version, &mut body);
        let t: km::ApiVersionsResponse = theirs(&body, version);
        assert_eq!(t.error_code, 0);
        assert_eq!(t.throttle_time_ms, ours.throttle_time_ms);
        let keys: Vec<_> = t
            .api_keys
            .iter()
            .map(|a| (a.api_key, a.min_version, a.max_version))
            .collect();
        let table: Vec<_> = SUPPORTED
            .iter()
            .map(|a| (a.api_key, a.min_version, a.max_version))
            .collect();
        assert_eq!(keys, table, "v{version}");
        assert!(t.unknown_tagged_fields.is_empty());
        assert!(t.supported_features.is_empty() && t.finalized_features.is_empty());
        assert!(t
            .api_keys
            .iter()
            .all(|a| a.unknown_tagged_fields.is_empty()));
    }
    // The answer to an unsupported version: a whole frame, header v0, body v0.
    let mut out = Vec::new();
    kres::api_versions_unsupported(&mut out, 41);
    assert_eq!(
        i32::from_be_bytes(out[..4].try_into().unwrap()) as usize,
        out.len() - 4
    );
    let mut rest = &out[4..];
    let header = km::ResponseHeader::decode(&mut rest, 0).unwrap();
    assert_eq!(header.correlation_id, 41);
    let t: km::ApiVersionsResponse = theirs(rest, 0);
    assert_eq!(t.error_code, 35);
    assert_eq!(t.api_keys.len(), SUPPORTED.len());
}

fn produce_response() -> kres::ProduceResponse<'static> {
    let partition = |index, error_code, base_offset| kres::PartitionProduceResponse {
        index,
        error_code,
        base_offset,
        log_append_time_ms: -1,
        log_start_offset: 11,
        error_message: (error_code != 0).then(|| format!("refused {index}")),
    };
    kres::ProduceResponse {
        responses: vec![
            kres::TopicProduceResponse {
                name: "alpha",
                partition_responses: vec![partition(0, 0, 1_000), partition(4, 0, 2_000)],
            },
            kres::TopicProduceResponse {
                name: "beta",
                partition_responses: vec![partition(1, 3, -1)],
            },
        ],
        throttle_time_ms: 9,
    }
}

#[test]
fn produce_responses_decode_in_the_crate() {
    for version in versions(PRODUCE) {
        let ours = produce_response();
        let mut body = Vec::new();
        ours.encode(version, &mut body);
        let t: km::ProduceResponse = theirs(&body, version);
        assert_eq!(t.throttle_time_ms, 9);
        let t: Vec<_> = t
            .responses
            .iter()
            .map(|t| {
                let p: Vec<_> = t
                    .partition_responses
                    .iter()
                    .map(|p| {
                        (
                            p.index,
                            p.error_code,
                            p.base_offset,
                            p.log_append_time_ms,
                            p.log_start_offset,
                            p.error_message.as_ref().map(|m| m.to_string()),
                            p.record_errors.len(),
                        )
                    })
                    .collect();
                (t.name.0.to_string(), p)
            })
            .collect();
        let o: Vec<_> = ours
            .responses
            .iter()
            .map(|t| {
                let p: Vec<_> = t
                    .partition_responses
                    .iter()
                    .map(|p| {
                        let start = if version >= 5 { p.log_start_offset } else { -1 };
                        let message = p.error_message.clone().filter(|_| version >= 8);
                        (
                            p.index,
                            p.error_code,
                            p.base_offset,
                            p.log_append_time_ms,
                            start,
                            message,
                            0,
                        )
                    })
                    .collect();
                (t.name.to_owned(), p)
            })
            .collect();
        assert_eq!(o, t, "v{version}");
    }
}

fn fetch_response(records: &[u8]) -> kres::FetchResponse<'_> {
    let partition = |partition_index, error_code, aborted| kres::PartitionData {
        partition_index,
        error_code,
        high_watermark: 5_000 + i64::from(partition_index),
        last_stable_offset: 4_000,
        log_start_offset: 100,
        aborted_transactions: aborted,
        preferred_read_replica: 2,
        diverging_epoch: (partition_index == 1).then_some((6, 4_321)),
        records,
        records_after: 0,
    };
    let aborted = Some(vec![kres::AbortedTransaction {
        producer_id: 77,
        first_offset: 4_100,
    }]);
    kres::FetchResponse {
        throttle_time_ms: 3,
        error_code: 0,
        session_id: 0,
        responses: vec![
            kres::FetchableTopicResponse {
                topic: "alpha",
                partitions: vec![partition(0, 0, Some(Vec::new())), partition(1, 1, None)],
            },
            kres::FetchableTopicResponse {
                topic: "beta",
                partitions: vec![partition(2, 0, aborted)],
            },
        ],
    }
}

#[test]
fn fetch_responses_decode_in_the_crate() {
    let records = b"batch bytes \x00\xff\x80 as they are";
    for version in versions(FETCH) {
        let mut ours = fetch_response(records);
        if version >= 7 {
            ours.error_code = 0;
            ours.session_id = 0;
        }
        let mut body = Vec::new();
        ours.encode(version, &mut body);
        let t: km::FetchResponse = theirs(&body, version);
        assert_eq!((t.throttle_time_ms, t.error_code, t.session_id), (3, 0, 0));
        assert_eq!(t.responses.len(), 2);
        for (o, t) in ours.responses.iter().zip(&t.responses) {
            assert_eq!(o.topic, &*t.topic.0);
            assert_eq!(o.partitions.len(), t.partitions.len());
            for (o, t) in o.partitions.iter().zip(&t.partitions) {
                assert_eq!(
                    (
                        o.partition_index,
                        o.error_code,
                        o.high_watermark,
                        o.last_stable_offset
                    ),
                    (
                        t.partition_index,
                        t.error_code,
                        t.high_watermark,
                        t.last_stable_offset
                    )
                );
                let start = if version >= 5 { o.log_start_offset } else { -1 };
                assert_eq!(t.log_start_offset, start, "v{version}");
                let replica = if version >= 11 {
                    o.preferred_read_replica
                } else {
                    -1
                };
                assert_eq!(t.preferred_read_replica.0, replica, "v{version}");
                let diverging = (t.diverging_epoch.epoch, t.diverging_epoch.end_offset);
                let expected = match o.diverging_epoch {
                    Some(d) if version >= 12 => d,
                    _ => (-1, -1),
                };
                assert_eq!(diverging, expected, "v{version}");
                let ta = t.aborted_transactions.as_ref().map(|a| {
                    a.iter()
                        .map(|a| (a.producer_id.0, a.first_offset))
                        .collect::<Vec<_>>()
                });
                let oa = o.aborted_transactions.as_ref().map(|a| {
                    a.iter()
                        .map(|a| (a.producer_id, a.first_offset))
                        .collect::<Vec<_>>()
                });
                assert_eq!(oa, ta, "v{version}");
                assert_eq!(t.records.as_deref(), Some(&records[..]));
            }
        }
    }
    // Version 7's session fields carry their values.
    let mut ours = fetch_response(records);
    ours.error_code = 42;
    ours.session_id = 12;
    let mut body = Vec::new();
    ours.encode(7, &mut body);
    let t: km::FetchResponse = theirs(&body, 7);
    assert_eq!((t.error_code, t.session_id), (42, 12));
}

#[test]
fn list_offsets_responses_decode_in_the_crate() {
    for version in versions(LIST_OFFSETS) {
        let partition = |partition_index, error_code, offset| kres::ListOffsetsPartitionResponse {
            partition_index,
            error_code,
            timestamp: 1_700_000_000_456,
            offset,
            leader_epoch: if version >= 4 { 6 } else { -1 },
        };
        let ours = kres::ListOffsetsResponse {
            throttle_time_ms: if version >= 2 { 4 } else { 0 },
            topics: vec![
                kres::ListOffsetsTopicResponse {
                    name: "alpha",
                    partitions: vec![partition(0, 0, 10), partition(1, 0, 20)],
                },
                kres::ListOffsetsTopicResponse {
                    name: "beta",
                    partitions: vec![partition(9, 3, -1)],
                },
            ],
        };
        let mut body = Vec::new();
        ours.encode(version, &mut body);
        let t: km::ListOffsetsResponse = theirs(&body, version);
        assert_eq!(t.throttle_time_ms, ours.throttle_time_ms);
        let t: Vec<_> = t
            .topics
            .iter()
            .map(|t| {
                let p: Vec<_> = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let at = (p.timestamp, p.offset, p.leader_epoch);
                        (p.partition_index, p.error_code, at)
                    })
                    .collect();
                (t.name.0.to_string(), p)
            })
            .collect();
        let o: Vec<_> = ours
            .topics
            .iter()
            .map(|t| {
                let p: Vec<_> = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let at = (p.timestamp, p.offset, p.leader_epoch);
                        (p.partition_index, p.error_code, at)
                    })
                    .collect();
                (t.name.to_owned(), p)
            })
            .collect();
        assert_eq!(o, t, "v{version}");
    }
}

fn metadata_response(version: i16) -> kres::MetadataResponse<'static> {
    let partition = |partition_index, leader_id| kres::MetadataResponsePartition {
        error_code: if leader_id < 0 { 5 } else { 0 },
        partition_index,
        leader_id,
        leader_epoch: if version >= 7 {
            40 + partition_index
        } else {
            -1
        },
        replica_nodes: vec![1, 2, 3],
        isr_nodes: vec![leader_id.max(1), 3],
        offline_replicas: if version >= 5 { vec![2] } else { vec![] },
    };
    let operations = |bits| if version >= 8 { bits } else { i32::MIN };
    kres::MetadataResponse {
        throttle_time_ms: if version >= 3 { 8 } else { 0 },
        brokers: vec![
            kres::MetadataResponseBroker {
                node_id: 1,
                host: "127.0.0.1",
                port: 9092,
                rack: (version >= 1).then_some("rack-a"),
            },
            kres::MetadataResponseBroker {
                node_id: 2,
                host: "broker-two.example",
                port: 19092,
                rack: None,
            },
        ],
        cluster_id: (version >= 2).then_some("klog-cluster"),
        controller_id: if version >= 1 { 2 } else { -1 },
        topics: vec![
            kres::MetadataResponseTopic {
                error_code: 0,
                name: Some("alpha"),
                topic_id: if version >= 10 { [7; 16] } else { [0; 16] },
                is_internal: version >= 1,
                partitions: vec![partition(0, 1), partition(1, -1)],
                topic_authorized_operations: operations(0b1_0111_1000),
            },
            kres::MetadataResponseTopic {
                error_code: 3,
                name: (version < 12).then_some("missing"),
                topic_id: [0; 16],
                is_internal: false,
                partitions: vec![],
                topic_authorized_operations: i32::MIN,
            },
        ],
        cluster_authorized_operations: if (8..=10).contains(&version) {
            0b1010
        } else {
            i32::MIN
        },
    }
}

#[test]
fn metadata_responses_decode_in_the_crate() {
    for version in versions(METADATA) {
        let ours = metadata_response(version);
        let mut body = Vec::new();
        ours.encode(version, &mut body);
        let t: km::MetadataResponse = theirs(&body, version);
        assert_eq!(t.throttle_time_ms, ours.throttle_time_ms);
        assert_eq!(t.controller_id.0, ours.controller_id);
        assert_eq!(t.cluster_id.as_deref(), ours.cluster_id);
        assert_eq!(
            t.cluster_authorized_operations,
            ours.cluster_authorized_operations
        );
        let tb: Vec<_> = t
            .brokers
            .iter()
            .map(|b| (b.node_id.0, &*b.host, b.port, b.rack.as_deref()))
            .collect();
        let ob: Vec<_> = ours
            .brokers
            .iter()
            .map(|b| (b.node_id, b.host, b.port, b.rack))
            .collect();
        assert_eq!(ob, tb, "v{version}");
        assert_eq!(t.topics.len(), ours.topics.len());
        for (o, t) in ours.topics.iter().zip(&t.topics) {
            assert_eq!(
                (
                    o.error_code,
                    o.name,
                    o.topic_id,
                    o.is_internal,
                    o.topic_authorized_operations
                ),
                (
                    t.error_code,
                    t.name.as_ref().map(|n| &*n.0),
                    *t.topic_id.as_bytes(),
                    t.is_internal,
                    t.topic_authorized_operations
                ),
                "v{version}"
            );
            let tp: Vec<_> = t
                .partitions
                .iter()
                .map(|p| {
                    let replicas: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
                    let isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
                    let offline: Vec<i32> = p.offline_replicas.iter().map(|b| b.0).collect();
                    (
                        p.error_code,
                        p.partition_index,
                        p.leader_id.0,
                        p.leader_epoch,
                        replicas,
                        isr,
                        offline,
                    )
                })
                .collect();
            let op: Vec<_> = o
                .partitions
                .iter()
                .map(|p| {
                    let (replicas, isr) = (p.replica_nodes.clone(), p.isr_nodes.clone());
                    let offline = p.offline_replicas.clone();
                    let (index, leader, epoch) = (p.partition_index, p.leader_id, p.leader_epoch);
                    (p.error_code, index, leader, epoch, replicas, isr, offline)
                })
                .collect();
            assert_eq!(op, tp, "v{version}");
        }
    }
}

#[test]
fn init_producer_id_responses_decode_in_the_crate() {
    for version in versions(INIT_PRODUCER_ID) {
        let ours = klog::kafka::txn::InitProducerIdResponse {
            throttle_time_ms: 6,
            error_code: 53,
            producer_id: 0x0123_4567_89ab,
            producer_epoch: 7,
        };
        let mut body = Vec::new();
        ours.encode(version, &mut body);
        let t: km::InitProducerIdResponse = theirs(&body, version);
        assert_eq!(
            (
                t.throttle_time_ms,
                t.error_code,
                t.producer_id.0,
                t.producer_epoch
            ),
            (6, 53, 0x0123_4567_89ab, 7)
        );
    }
}

#[test]
fn a_frame_is_its_length_the_header_v0_and_the_body() {
    let mut out = vec![9, 9];
    kres::frame(&mut out, -5, |out| out.extend_from_slice(b"body"));
    assert_eq!(&out[..2], &[9, 9]);
    assert_eq!(&out[2..6], &8i32.to_be_bytes());
    assert_eq!(&out[6..10], &(-5i32).to_be_bytes());
    assert_eq!(&out[10..], b"body");
}

// ------------------------------------------------------- hostile frames

/// Counts the bytes the current thread asks for while it is watched, and
/// otherwise is the system allocator.
struct Counting;

thread_local! {
    static WATCHED: Cell<bool> = const { Cell::new(false) };
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    let _ = WATCHED.try_with(|w| {
        if w.get() {
            let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(bytes)));
        }
    });
}

// SAFETY: every call goes to `System` unchanged; the wrapper only adds the
// sizes asked for to a const-initialized thread-local, which allocates
// nothing itself.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes a decode of a frame of `len` bytes may allocate: a small
/// multiple of the frame (each vector's elements are at most eight times
/// their smallest wire size, and a failing decode holds one vector too many
/// per level), plus an error message.
fn allocation_bound(len: usize) -> usize {
    40 * len + 2048
}

/// What decoding `frame` gave, after checking that it neither panicked nor
/// allocated past [`allocation_bound`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Request,
    Unsupported,
    Invalid,
}

fn decode_checked(frame: &[u8], why: &dyn Fn() -> String) -> Outcome {
    WATCHED.with(|w| w.set(true));
    ALLOCATED.with(|a| a.set(0));
    let result = std::panic::catch_unwind(|| match decode_request(frame) {
        Ok(_) => Outcome::Request,
        Err(RequestError::Unsupported { .. }) => Outcome::Unsupported,
        Err(RequestError::Invalid { .. }) => Outcome::Invalid,
    });
    WATCHED.with(|w| w.set(false));
    let allocated = ALLOCATED.with(Cell::get);
    let outcome = result.unwrap_or_else(|_| panic!("decode_request panicked: {}", why()));
    assert!(
        allocated <= allocation_bound(frame.len()),
        "decode_request allocated {allocated} bytes for a frame of {} bytes: {}",
        frame.len(),
        why()
    );
    outcome
}

/// Valid frames of every API and version in the table, and ApiVersions v4.
fn seed_frames() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for v in versions(PRODUCE) {
        seeds.push(request_frame(PRODUCE, v, &produce_request(v)));
    }
    for v in versions(FETCH) {
        seeds.push(request_frame(FETCH, v, &fetch_request(v)));
    }
    for v in versions(LIST_OFFSETS) {
        seeds.push(request_frame(LIST_OFFSETS, v, &list_offsets_request(v)));
    }
    for v in versions(METADATA) {
        let topics: Option<&[&str]> = if v >= 1 { None } else { Some(&[]) };
        seeds.push(request_frame(
            METADATA,
            v,
            &metadata_request(v, Some(&["a", "bb"])),
        ));
        seeds.push(request_frame(METADATA, v, &metadata_request(v, topics)));
    }
    for v in 0..=4 {
        let mut r = km::ApiVersionsRequest::default();
        if v >= 3 {
            r = r
                .with_client_software_name(s("k"))
                .with_client_software_version(s("1"));
        }
        seeds.push(request_frame(API_VERSIONS, v, &r));
    }
    for v in versions(INIT_PRODUCER_ID) {
        let r = km::InitProducerIdRequest::default().with_transaction_timeout_ms(1);
        seeds.push(request_frame(INIT_PRODUCER_ID, v, &r));
    }
    for v in versions(ADD_PARTITIONS_TO_TXN) {
        seeds.push(request_frame(
            ADD_PARTITIONS_TO_TXN,
            v,
            &add_partitions_request(),
        ));
    }
    for v in versions(TXN_OFFSET_COMMIT) {
        seeds.push(request_frame(
            TXN_OFFSET_COMMIT,
            v,
            &txn_offset_commit_request(v),
        ));
    }
    for v in versions(END_TXN) {
        seeds.push(request_frame(END_TXN, v, &end_txn_request()));
    }
    seeds.extend(admin_seeds());
    seeds
}

/// The admin APIs' requests (declared through `klog::kafka::message`), in
/// the versions the crate writes.
fn admin_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let creation = km::create_acls_request::AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(s("t"))
        .with_principal(s("User:a"))
        .with_host(s("*"))
        .with_operation(3)
        .with_permission_type(3);
    let filter = km::delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    for v in 1..=3 {
        let r = km::CreateAclsRequest::default().with_creations(vec![creation.clone(); 2]);
        seeds.push(request_frame(CREATE_ACLS, v, &r));
        let r = km::DeleteAclsRequest::default().with_filters(vec![filter.clone(); 2]);
        seeds.push(request_frame(DELETE_ACLS, v, &r));
        let r = km::DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(Some(s("t")));
        seeds.push(request_frame(DESCRIBE_ACLS, v, &r));
    }
    let user = km::describe_user_scram_credentials_request::UserName::default().with_name(s("u"));
    let r = km::DescribeUserScramCredentialsRequest::default().with_users(Some(vec![user; 2]));
    seeds.push(request_frame(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, &r));
    let upsertion = km::alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
        .with_name(s("u"))
        .with_mechanism(1)
        .with_iterations(4096)
        .with_salt(s("salt").into_bytes())
        .with_salted_password(s("0123456789abcdef0123456789abcdef").into_bytes());
    let r = km::AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion; 2]);
    seeds.push(request_frame(ALTER_USER_SCRAM_CREDENTIALS, 0, &r));
    seeds
}

fn hex(frame: &[u8]) -> String {
    frame.iter().map(|b| format!("{b:02x}")).collect()
}

/// Numbers a hostile frame likes: huge, negative, off by one.
const HOSTILE_I32: [i32; 7] = [i32::MAX, i32::MIN, -1, -2, 0x7fff_fff0, 0x0001_0000, 0x100];
const HOSTILE_I16: [i16; 5] = [i16::MAX, i16::MIN, -1, -2, 0x100];

fn put_at(frame: &mut [u8], at: usize, bytes: &[u8]) {
    let end = (at + bytes.len()).min(frame.len());
    frame[at..end].copy_from_slice(&bytes[..end - at]);
}

/// One mutation of `seed` into `out`.
fn mutate(rng: &mut XorShift, seed: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(seed);
    let mut pick = |n: usize| (rng.next() % n.max(1) as u64) as usize;
    let rounds = 1 + pick(3);
    for _ in 0..rounds {
        let at = pick(out.len());
        match pick(8) {
            0 => {
                if let Some(b) = out.get_mut(at) {
                    *b ^= 1 + pick(255) as u8;
                }
            }
            1 => out.truncate(at),
            2 if !out.is_empty() => {
                put_at(out, at, &HOSTILE_I32[pick(HOSTILE_I32.len())].to_be_bytes())
            }
            3 if !out.is_empty() => {
                put_at(out, at, &HOSTILE_I16[pick(HOSTILE_I16.len())].to_be_bytes())
            }
            4 if !out.is_empty() => {
                let varints: [&[u8]; 3] = [
                    &[0xff; 5],
                    &[0xff, 0xff, 0xff, 0xff, 0x0f],
                    &[0x80, 0x80, 0x80, 0x80, 0x80],
                ];
                put_at(out, at, varints[pick(3)]);
            }
            5 => {
                // Random bytes behind the seed's api key and version, so
                // that the body decoders see them.
                out.truncate(4.min(out.len()));
                let n = pick(96);
                out.extend((0..n).map(|_| pick(256) as u8));
            }
            6 => {
                let n = 1 + pick(8);
                let bytes: Vec<u8> = (0..n).map(|_| pick(256) as u8).collect();
                out.splice(at..at, bytes);
            }
            _ => {
                if let Some(b) = out.get_mut(at) {
                    *b = [0x00, 0xff, 0x7f, 0x80][pick(4)];
                }
            }
        }
    }
}

#[test]
fn every_seed_decodes_and_every_truncation_or_hostile_number_is_refused_or_bounded() {
    for seed in seed_frames() {
        let whole = decode_checked(&seed, &|| hex(&seed));
        assert_ne!(whole, Outcome::Invalid, "{}", hex(&seed));
        for cut in 0..seed.len() {
            let frame = &seed[..cut];
            let outcome = decode_checked(frame, &|| format!("cut at {cut}: {}", hex(&seed)));
            if whole == Outcome::Request {
                assert_eq!(outcome, Outcome::Invalid, "cut at {cut}: {}", hex(&seed));
            }
        }
        let mut frame = seed.clone();
        for at in 0..seed.len() {
            for n in HOSTILE_I32 {
                frame.copy_from_slice(&seed);
                put_at(&mut frame, at, &n.to_be_bytes());
                decode_checked(&frame, &|| format!("{n} at {at}: {}", hex(&seed)));
            }
            for n in HOSTILE_I16 {
                frame.copy_from_slice(&seed);
                put_at(&mut frame, at, &n.to_be_bytes());
                decode_checked(&frame, &|| format!("{n} at {at}: {}", hex(&seed)));
            }
        }
    }
}

/// Seeded and reproducible: `KLOG_KAFKA_FUZZ_SEED` and
/// `KLOG_KAFKA_FUZZ_CASES` override the defaults.
#[test]
fn millions_of_mutated_frames_never_panic_nor_allocate_past_their_size() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let seed = env("KLOG_KAFKA_FUZZ_SEED", 0x6b61_666b_6121);
    let cases = env("KLOG_KAFKA_FUZZ_CASES", 2_000_000);
    let seeds = seed_frames();
    let mut rng = XorShift::new(seed);
    let mut frame = Vec::new();
    let mut outcomes = [0u64; 3];
    for case in 0..cases {
        let origin = &seeds[(rng.next() % seeds.len() as u64) as usize];
        mutate(&mut rng, origin, &mut frame);
        let outcome = decode_checked(&frame, &|| {
            format!("seed {seed:#x} case {case}: frame {}", hex(&frame))
        });
        outcomes[outcome as usize] += 1;
    }
    eprintln!(
        "{cases} mutated frames (seed {seed:#x}): [request, unsupported, invalid] = {outcomes:?}"
    );
    // The mutations reach every outcome: none of the three is rare.
    for n in outcomes {
        assert!(n * 100 > cases, "{outcomes:?}");
    }
}

/// A Produce v3 request frame (header v1) naming `entries` partitions of
/// one topic, each with null records.
fn produce_of_empty_partitions(entries: usize) -> Vec<u8> {
    let mut frame = Vec::new();
    frame.extend_from_slice(&PRODUCE.to_be_bytes());
    frame.extend_from_slice(&3i16.to_be_bytes());
    frame.extend_from_slice(&7i32.to_be_bytes());
    frame.extend_from_slice(&1i16.to_be_bytes());
    frame.push(b'c');
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    frame.extend_from_slice(&1i16.to_be_bytes());
    frame.extend_from_slice(&1000i32.to_be_bytes());
    frame.extend_from_slice(&1i32.to_be_bytes());
    frame.extend_from_slice(&1i16.to_be_bytes());
    frame.push(b't');
    frame.extend_from_slice(&(entries as i32).to_be_bytes());
    for index in 0..entries {
        frame.extend_from_slice(&(index as i32).to_be_bytes());
        frame.extend_from_slice(&(-1i32).to_be_bytes());
    }
    frame
}

/// The work and the answer a request makes grow with its entries, not its
/// bytes: a request of more than `ELEMENTS_MAX` array elements in all is
/// invalid (a 48 MB produce of 6 million empty partitions made a 132 MB
/// answer and over a gigabyte of heap).
#[test]
fn a_request_of_more_than_elements_max_entries_is_invalid() {
    use klog::kafka::wire::ELEMENTS_MAX;
    let most = produce_of_empty_partitions(ELEMENTS_MAX - 1);
    match decode_request(&most) {
        Ok((_, Request::Produce(p))) => {
            assert_eq!(p.topic_data[0].partition_data.len(), ELEMENTS_MAX - 1)
        }
        other => panic!("{other:?}"),
    }
    let over = produce_of_empty_partitions(ELEMENTS_MAX);
    match decode_request(&over) {
        Err(RequestError::Invalid {
            api_key: Some(PRODUCE),
            error,
            ..
        }) => assert!(error.to_string().contains("entries in all"), "{error}"),
        other => panic!("{other:?}"),
    }
}

/// A fetch answer whose records go from files after its other bytes (the
/// broker's `sendfile`): the bytes sent, with the records inserted where
/// `encode_with` says, are the answer encoded with the records inline.
#[test]
fn a_fetch_answer_with_records_sent_after_is_the_one_with_them_inline() {
    let records = b"0123456789 some record batches";
    for version in versions(FETCH) {
        let inline = fetch_response(records);
        let mut whole = Vec::new();
        kres::frame(&mut whole, 7, |out| inline.encode(version, out));
        let mut after = fetch_response(&[]);
        for t in &mut after.responses {
            for p in &mut t.partitions {
                p.records_after = records.len() as u64;
            }
        }
        let partitions: usize = after.responses.iter().map(|t| t.partitions.len()).sum();
        let mut out = Vec::new();
        let mut gaps = Vec::new();
        let elsewhere = (partitions * records.len()) as u64;
        kres::frame_sized(&mut out, 7, elsewhere, |o| {
            after.encode_with(version, o, &mut gaps)
        });
        assert_eq!(gaps.len(), partitions, "v{version}");
        let mut sent = Vec::new();
        let mut written = 0;
        for at in gaps {
            sent.extend_from_slice(&out[written..at]);
            sent.extend_from_slice(records);
            written = at;
        }
        sent.extend_from_slice(&out[written..]);
        assert_eq!(sent, whole, "v{version}");
    }
}

/// A Fetch's counts are bounded at the fewest bytes of their elements in
/// the version decoded: before v12 a topic takes 6 (a name's int16 and a
/// count's int32), so 10 topics do not fit in 30 bytes; a partition of
/// v11 takes 28.
#[test]
fn a_fetch_count_is_bounded_at_its_versions_fewest_bytes() {
    use klog::kafka::request::FetchRequest;
    use klog::kafka::wire::Decoder;
    let head = |topics: i32| {
        let mut body = Vec::new();
        for v in [-1i32, 500, 1, 1 << 20] {
            body.extend_from_slice(&v.to_be_bytes());
        }
        body.push(0);
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&(-1i32).to_be_bytes());
        body.extend_from_slice(&topics.to_be_bytes());
        body
    };
    let mut body = head(10);
    body.extend_from_slice(&[0u8; 30]);
    let err = FetchRequest::decode(&mut Decoder::new(&body), 11).unwrap_err();
    assert!(err.0.contains("count 10 of at least 6 bytes"), "{err}");
    // One topic "t" claiming 2 partitions with room for one of v11.
    let mut body = head(1);
    body.extend_from_slice(&[0, 1, b't']);
    body.extend_from_slice(&2i32.to_be_bytes());
    body.extend_from_slice(&[0u8; 28 + 27]);
    let err = FetchRequest::decode(&mut Decoder::new(&body), 11).unwrap_err();
    assert!(err.0.contains("count 2 of at least 28 bytes"), "{err}");
}

// ---- the transactional APIs (klog::kafka::txn) -----------------------------

fn add_partitions_request() -> km::AddPartitionsToTxnRequest {
    let topic = km::add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
        .with_name(topic("t-1"))
        .with_partitions(vec![0, 7]);
    km::AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(km::TransactionalId(s("tx-9")))
        .with_v3_and_below_producer_id(km::ProducerId(41))
        .with_v3_and_below_producer_epoch(3)
        .with_v3_and_below_topics(vec![topic])
}

fn end_txn_request() -> km::EndTxnRequest {
    km::EndTxnRequest::default()
        .with_transactional_id(km::TransactionalId(s("tx-9")))
        .with_producer_id(km::ProducerId(41))
        .with_producer_epoch(3)
        .with_committed(true)
}

fn txn_offset_commit_request(version: i16) -> km::TxnOffsetCommitRequest {
    use km::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    let mut partition = TxnOffsetCommitRequestPartition::default()
        .with_partition_index(2)
        .with_committed_offset(1234)
        .with_committed_metadata(Some(s("m")));
    if version >= 2 {
        partition = partition.with_committed_leader_epoch(6);
    }
    let mut r = km::TxnOffsetCommitRequest::default()
        .with_transactional_id(km::TransactionalId(s("tx-9")))
        .with_group_id(km::GroupId(s("g")))
        .with_producer_id(km::ProducerId(41))
        .with_producer_epoch(3)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic("t-1"))
            .with_partitions(vec![partition])]);
    if version >= 3 {
        r = r
            .with_generation_id(8)
            .with_member_id(s("member-1"))
            .with_group_instance_id(Some(s("static")));
    }
    r
}

#[test]
fn transactional_requests_decode_as_the_crate_encodes_them() {
    for v in versions(ADD_PARTITIONS_TO_TXN) {
        let frame = request_frame(ADD_PARTITIONS_TO_TXN, v, &add_partitions_request());
        let Request::AddPartitionsToTxn(r) = decoded(&frame, ADD_PARTITIONS_TO_TXN, v) else {
            panic!("not AddPartitionsToTxn")
        };
        assert_eq!(
            (r.transactional_id, r.producer_id, r.producer_epoch),
            ("tx-9", 41, 3)
        );
        assert_eq!(
            (r.topics[0].name, &r.topics[0].partitions[..]),
            ("t-1", &[0, 7][..])
        );
    }
    for v in versions(ADD_OFFSETS_TO_TXN) {
        let theirs = km::AddOffsetsToTxnRequest::default()
            .with_transactional_id(km::TransactionalId(s("tx-9")))
            .with_producer_id(km::ProducerId(41))
            .with_producer_epoch(3)
            .with_group_id(km::GroupId(s("g")));
        let frame = request_frame(ADD_OFFSETS_TO_TXN, v, &theirs);
        let Request::AddOffsetsToTxn(r) = decoded(&frame, ADD_OFFSETS_TO_TXN, v) else {
            panic!("not AddOffsetsToTxn")
        };
        assert_eq!(
            (
                r.transactional_id,
                r.producer_id,
                r.producer_epoch,
                r.group_id
            ),
            ("tx-9", 41, 3, "g")
        );
    }
    for v in versions(END_TXN) {
        let frame = request_frame(END_TXN, v, &end_txn_request());
        let Request::EndTxn(r) = decoded(&frame, END_TXN, v) else {
            panic!("not EndTxn")
        };
        assert_eq!(
            (
                r.transactional_id,
                r.producer_id,
                r.producer_epoch,
                r.committed
            ),
            ("tx-9", 41, 3, true)
        );
    }
    for v in versions(TXN_OFFSET_COMMIT) {
        let frame = request_frame(TXN_OFFSET_COMMIT, v, &txn_offset_commit_request(v));
        let Request::TxnOffsetCommit(r) = decoded(&frame, TXN_OFFSET_COMMIT, v) else {
            panic!("not TxnOffsetCommit")
        };
        assert_eq!(
            (
                r.transactional_id,
                r.group_id,
                r.producer_id,
                r.producer_epoch
            ),
            ("tx-9", "g", 41, 3)
        );
        let member = if v >= 3 {
            (8, "member-1", Some("static"))
        } else {
            (-1, "", None)
        };
        assert_eq!(
            (r.generation_id, r.member_id, r.group_instance_id),
            member,
            "v{v}"
        );
        let p = &r.topics[0].partitions[0];
        let epoch = if v >= 2 { 6 } else { -1 };
        assert_eq!(
            (
                r.topics[0].name,
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch,
                p.committed_metadata
            ),
            ("t-1", 2, 1234, epoch, Some("m"))
        );
    }
}

#[test]
fn transactional_responses_decode_in_the_crate() {
    use klog::kafka::txn::*;
    let results = || {
        vec![TxnTopicResult {
            name: "t-1",
            results_by_partition: vec![TxnPartitionResult {
                partition_index: 7,
                partition_error_code: 51,
            }],
        }]
    };
    for v in versions(ADD_PARTITIONS_TO_TXN) {
        let mut body = Vec::new();
        let ours = AddPartitionsToTxnResponse {
            throttle_time_ms: 4,
            results_by_topic: results(),
        };
        ours.encode(v, &mut body);
        let t: km::AddPartitionsToTxnResponse = theirs(&body, v);
        let topic = &t.results_by_topic_v3_and_below[0];
        let p = &topic.results_by_partition[0];
        assert_eq!(
            (
                t.throttle_time_ms,
                &*topic.name.0,
                p.partition_index,
                p.partition_error_code
            ),
            (4, "t-1", 7, 51)
        );
    }
    for v in versions(TXN_OFFSET_COMMIT) {
        let mut body = Vec::new();
        let ours = TxnOffsetCommitResponse {
            throttle_time_ms: 4,
            topics: results(),
        };
        ours.encode(v, &mut body);
        let t: km::TxnOffsetCommitResponse = theirs(&body, v);
        let p = &t.topics[0].partitions[0];
        assert_eq!(
            (
                t.throttle_time_ms,
                &*t.topics[0].name.0,
                p.partition_index,
                p.error_code
            ),
            (4, "t-1", 7, 51)
        );
    }
    for v in versions(END_TXN) {
        let mut body = Vec::new();
        let ours = TxnErrorResponse {
            throttle_time_ms: 4,
            error_code: 48,
        };
        ours.encode(v, &mut body);
        let end: km::EndTxnResponse = theirs(&body, v);
        assert_eq!((end.throttle_time_ms, end.error_code), (4, 48));
        let add: km::AddOffsetsToTxnResponse = theirs(&body, v);
        assert_eq!((add.throttle_time_ms, add.error_code), (4, 48));
    }
}
