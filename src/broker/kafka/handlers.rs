//! Each Kafka request, decoded, handled and answered in the request's
//! version: the wire types of [`crate::kafka`] on one side, the broker's
//! logs and registry on the other.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::access::Access;
use super::fetch::{self, Ask, Limits};
use super::groups::{handle as group, GroupRequest as G};
use super::metadata::{list_offset, metadata, Listed, PartitionMeta};
use super::produce::{self, Pending, Produced};
use super::txn::handle as txn;
use super::Kafka;
use super::{
    acls, configs_admin, epochs, group_admin, partitions_create, records_delete, scram,
    topics_admin, topics_delete,
};
use crate::broker::auth::Session;
use crate::broker::memory::Held;
use crate::broker::send::Records;
use crate::broker::shared::Shared;
use crate::coord::acl::{Operation, ResourceType, CLUSTER};
use crate::kafka::header::RequestHeader;
use crate::kafka::metadata::OPERATIONS_NOT_ASKED;
use crate::kafka::request::{
    ApiVersionsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest, ProduceRequest, Request,
};
use crate::kafka::response::{self as resp, frame, frame_message};
use crate::kafka::{self};
use crate::storage::log::FileSlice;

/// Kafka client names and versions a broker remembers (and logs) at most.
const CLIENTS_SEEN_MAX: usize = 1000;

/// What a connection keeps between requests, borrowing from the broker's
/// [`Shared`] for `'s`.
#[derive(Debug, Default)]
pub(super) struct ConnState<'s> {
    /// The answer being written.
    pub(super) out: Vec<u8>,
    /// Records converted on their way in or out.
    pub(super) scratch: Vec<u8>,
    /// A fetch answer's records that go from their segment files after
    /// `out`'s bytes up to each position.
    pub(super) sends: Vec<(usize, FileSlice)>,
    /// The request memory a fetch answer's converted records took: given
    /// back once the answer is written (or the connection ends), not when
    /// they are copied into `out`, so a reader that stops reading holds
    /// them within the bound.
    pub(super) held: Vec<Held<'s>>,
    /// Why an acks=0 produce failed: it has no answer to say so, so the
    /// connection closes (as Kafka's broker does) and the client notices.
    pub(super) failed_unanswered: Option<String>,
    /// Who the client is (see [`crate::broker::auth`]).
    pub(super) session: Option<Session>,
    /// Why the connection closes once the answer in `out` is written.
    pub(super) closing: Option<String>,
}

/// Handles a request and writes its answer (if it has one) in
/// `state.out`; a produce whose answer must wait is returned instead.
pub(super) fn handle<'s>(
    shared: &'s Arc<Shared>,
    kafka: &Kafka,
    header: &RequestHeader<'_>,
    request: Request<'_>,
    peer: SocketAddr,
    state: &mut ConnState<'s>,
) -> Option<Unanswered> {
    let (id, version) = (header.correlation_id, header.api_version);
    let access = Access::new(shared, state.session.as_ref());
    let out = &mut state.out;
    match request {
        Request::ApiVersions(r) => {
            note_client(shared, kafka, peer, &r);
            frame(out, id, |out| {
                resp::ApiVersionsResponse::new(kafka::NONE).encode(version, out)
            });
        }
        Request::Metadata(r) => answer_metadata(shared, kafka, &r, access, (version, id), out),
        Request::Produce(r) => return produce_request(shared, kafka, &r, version, id, state),
        Request::Fetch(r) => fetch_request(shared, &r, version, id, state),
        Request::ListOffsets(r) => list_offsets(shared, &r, access, (version, id), out),
        r @ (Request::InitProducerId(_)
        | Request::AddPartitionsToTxn(_)
        | Request::AddOffsetsToTxn(_)
        | Request::EndTxn(_)
        | Request::TxnOffsetCommit(_)) => txn(shared, kafka, r, access, (version, id), out),
        Request::SaslHandshake(r) => sasl_handshake(shared, r.mechanism, version, id, state),
        Request::SaslAuthenticate(r) => {
            sasl_authenticate(shared, peer, r.auth_bytes, version, id, state)
        }
        Request::FindCoordinator(r) => group(kafka, header, G::FindCoordinator(r), access, out),
        Request::JoinGroup(r) => group(kafka, header, G::JoinGroup(r), access, out),
        Request::SyncGroup(r) => group(kafka, header, G::SyncGroup(r), access, out),
        Request::Heartbeat(r) => group(kafka, header, G::Heartbeat(r), access, out),
        Request::LeaveGroup(r) => group(kafka, header, G::LeaveGroup(r), access, out),
        Request::OffsetCommit(r) => group(kafka, header, G::OffsetCommit(r), access, out),
        Request::OffsetFetch(r) => group(kafka, header, G::OffsetFetch(r), access, out),
        Request::OffsetForLeaderEpoch(r) => {
            frame_message(out, id, version, &epochs::answer(shared, &access, &r))
        }
        Request::CreateTopics(_)
        | Request::DescribeConfigs(_)
        | Request::DescribeCluster(_)
        | Request::ListGroups(_)
        | Request::DescribeGroups(_)
        | Request::DeleteGroups(_)
        | Request::OffsetDelete(_) => admin(shared, kafka, request, &access, (version, id), out),
        Request::DescribeAcls(r) => frame_message(out, id, version, &acls::describe(&access, &r)),
        Request::DescribeUserScramCredentials(r) => {
            frame_message(out, id, version, &scram::describe(&access, &r))
        }
        Request::DeleteRecords(_) | Request::DeleteTopics(_) | Request::CreatePartitions(_) => {
            topic_change(shared, request, &access, (peer, version, id), out)
        }
        Request::CreateAcls(_)
        | Request::DeleteAcls(_)
        | Request::AlterUserScramCredentials(_)
        | Request::AlterConfigs(_)
        | Request::IncrementalAlterConfigs(_) => {
            admin_change(shared, kafka, (request, header), access, (peer, out))
        }
    }
    None
}

/// Answers an admin request about topics, groups or the cluster.
fn admin(
    shared: &Shared,
    kafka: &Kafka,
    request: Request<'_>,
    access: &Access<'_>,
    (version, id): (i16, i32),
    out: &mut Vec<u8>,
) {
    let access = *access;
    match request {
        Request::CreateTopics(r) => {
            let answer = topics_admin::create(shared, &access, &r);
            frame_message(out, id, version, &answer);
        }
        Request::DescribeConfigs(r) => {
            let answer = configs_admin::describe(shared, kafka, &access, &r, version);
            frame_message(out, id, version, &answer);
        }
        Request::DescribeCluster(_) => {
            let answer = topics_admin::describe_cluster(shared, kafka, &access);
            frame_message(out, id, version, &answer);
        }
        Request::ListGroups(r) => {
            frame_message(out, id, version, &group_admin::list(kafka, &access, &r))
        }
        Request::DescribeGroups(r) => {
            let mut views = Vec::new();
            let answer = group_admin::describe(kafka, &access, &r, &mut views);
            frame_message(out, id, version, &answer);
        }
        Request::DeleteGroups(r) => {
            frame_message(out, id, version, &group_admin::delete(kafka, &access, &r))
        }
        Request::OffsetDelete(r) => {
            let answer = group_admin::delete_offsets(kafka, &access, &r);
            frame_message(out, id, version, &answer);
        }
        _ => unreachable!("handle() passes admin requests only"),
    }
}

/// Answers a request that deletes records or topics or adds partitions,
/// said in the log with who asked and what became of it.
fn topic_change(
    shared: &Shared,
    request: Request<'_>,
    access: &Access<'_>,
    (peer, version, id): (SocketAddr, i16, i32),
    out: &mut Vec<u8>,
) {
    let api = match &request {
        Request::DeleteRecords(_) => "DeleteRecords",
        Request::CreatePartitions(_) => "CreatePartitions",
        _ => "DeleteTopics",
    };
    let (done, refused) = match request {
        Request::DeleteRecords(r) => {
            let response = records_delete::delete(shared, access, &r);
            frame_message(out, id, version, &response);
            let partitions = response.topics.iter().flat_map(|t| &t.partitions);
            count(partitions.map(|p| p.error_code))
        }
        Request::DeleteTopics(r) => {
            let response = topics_delete::delete(shared, access, &r, version);
            frame_message(out, id, version, &response);
            count(response.responses.iter().map(|r| r.error_code))
        }
        Request::CreatePartitions(r) => {
            let response = partitions_create::create(shared, access, &r);
            frame_message(out, id, version, &response);
            count(response.results.iter().map(|r| r.error_code))
        }
        _ => return,
    };
    shared.log_peer(format_args!(
        "{peer}: {} {api}: {done} done, {refused} refused",
        access.principal()
    ));
}

/// A request that changes the registry's ACLs, users or topic configs: one at a time on
/// this broker (each reads, changes and writes an entry), and said in the
/// log with who asked and what became of it.
fn admin_change(
    shared: &Shared,
    kafka: &Kafka,
    (request, header): (Request<'_>, &RequestHeader<'_>),
    access: Access<'_>,
    (peer, out): (SocketAddr, &mut Vec<u8>),
) {
    let (id, version) = (header.correlation_id, header.api_version);
    let _one = crate::sync::lock(&kafka.admin);
    let acls_changed = matches!(request, Request::CreateAcls(_) | Request::DeleteAcls(_));
    let (done, refused) = match request {
        Request::CreateAcls(r) => {
            let response = acls::create(&access, &r);
            frame_message(out, id, version, &response);
            count(response.results.iter().map(|r| r.error_code))
        }
        Request::DeleteAcls(r) => {
            let response = acls::delete(&access, &r);
            frame_message(out, id, version, &response);
            let codes = response.filter_results.iter().flat_map(|f| {
                std::iter::once(f.error_code).chain(f.matching_acls.iter().map(|m| m.error_code))
            });
            count(codes)
        }
        Request::AlterUserScramCredentials(r) => {
            let response = scram::alter(&access, &r);
            frame_message(out, id, version, &response);
            count(response.results.iter().map(|r| r.error_code))
        }
        Request::AlterConfigs(r) => {
            let response = configs_admin::alter(shared, &access, &r);
            frame_message(out, id, version, &response);
            count(response.responses.iter().map(|r| r.error_code))
        }
        Request::IncrementalAlterConfigs(r) => {
            let response = configs_admin::alter_incrementally(shared, &access, &r);
            frame_message(out, id, version, &response);
            count(response.responses.iter().map(|r| r.error_code))
        }
        _ => return,
    };
    // As Kafka's authorizer does, this broker's cache takes the change
    // before the answer goes (the others reload within a second).
    if let (true, Some(registry)) = (acls_changed && done > 0, shared.registry.as_deref()) {
        if let Ok(acls) = crate::coord::acl::load(registry) {
            shared.authorizer.set(acls);
        }
    }
    shared.log_peer(format_args!(
        "{peer}: {} {}: {done} done, {refused} refused",
        access.principal(),
        kafka::api_name(header.api_key)
    ));
}

/// How many of `codes` are success and how many errors.
fn count(codes: impl Iterator<Item = i16>) -> (usize, usize) {
    codes.fold((0, 0), |(ok, no), c| {
        if c == kafka::NONE {
            (ok + 1, no)
        } else {
            (ok, no + 1)
        }
    })
}

/// Logs a client's software name and version, once per broker.
fn note_client(shared: &Shared, kafka: &Kafka, peer: SocketAddr, r: &ApiVersionsRequest<'_>) {
    if r.client_software_name.is_empty() {
        return;
    }
    let key = (
        r.client_software_name.to_string(),
        r.client_software_version.to_string(),
    );
    // Each name and version is said once, of a bounded number: a client
    // that makes up new ones costs neither memory nor log lines.
    let mut seen = crate::sync::lock(&kafka.clients_seen);
    let new = seen.len() < CLIENTS_SEEN_MAX && seen.insert(key);
    drop(seen);
    if new {
        shared.log_peer(format_args!(
            "{peer}: Kafka client {} {}",
            r.client_software_name, r.client_software_version
        ));
    }
}

fn answer_metadata(
    shared: &Shared,
    kafka: &Kafka,
    r: &MetadataRequest<'_>,
    access: Access<'_>,
    (version, id): (i16, i32),
    out: &mut Vec<u8>,
) {
    // v0: an empty list means every topic; v1+: a null one does. Topics
    // are created when asked for before v4, and with v4's flag. A topic
    // asked for by id alone (v10+) is unknown: klog has no topic ids.
    let (by_name, by_id): (Vec<_>, Vec<_>) = match &r.topics {
        Some(t) => t.iter().partition(|t| t.name.is_some()),
        None => (Vec::new(), Vec::new()),
    };
    let asked = match &r.topics {
        Some(t) if t.is_empty() && version == 0 => None,
        Some(_) => Some(by_name.iter().filter_map(|t| t.name).collect()),
        None => None,
    };
    let create = r.allow_auto_topic_creation;
    let cluster = metadata(shared, kafka, asked, (create, access));
    let operations = |asked: bool, resource, name: &str| match asked {
        true => access.operations(resource, name),
        false => OPERATIONS_NOT_ASKED,
    };
    let mut topics: Vec<resp::MetadataResponseTopic<'_>> = cluster
        .topics
        .iter()
        .map(|t| resp::MetadataResponseTopic {
            error_code: t.error,
            name: Some(&t.name),
            topic_id: [0; 16],
            is_internal: false,
            partitions: t.partitions.iter().map(partition_answer).collect(),
            topic_authorized_operations: operations(
                r.include_topic_authorized_operations && t.error == kafka::NONE,
                ResourceType::Topic,
                &t.name,
            ),
        })
        .collect();
    topics.extend(by_id.iter().map(|t| unknown_id(t.topic_id)));
    let response = resp::MetadataResponse {
        throttle_time_ms: 0,
        brokers: cluster
            .brokers
            .iter()
            .map(|b| resp::MetadataResponseBroker {
                node_id: b.node_id,
                host: &b.host,
                port: b.port,
                rack: None,
            })
            .collect(),
        cluster_id: Some("klog"),
        controller_id: cluster.controller,
        topics,
        cluster_authorized_operations: operations(
            r.include_cluster_authorized_operations,
            ResourceType::Cluster,
            CLUSTER,
        ),
    };
    frame_message(out, id, version, &response);
}

/// A topic asked for by an id: klog's topics have none.
fn unknown_id(topic_id: [u8; 16]) -> resp::MetadataResponseTopic<'static> {
    resp::MetadataResponseTopic {
        error_code: kafka::UNKNOWN_TOPIC_ID,
        name: None,
        topic_id,
        is_internal: false,
        partitions: Vec::new(),
        topic_authorized_operations: OPERATIONS_NOT_ASKED,
    }
}

fn partition_answer(p: &PartitionMeta) -> resp::MetadataResponsePartition {
    resp::MetadataResponsePartition {
        error_code: p.error,
        partition_index: p.partition,
        leader_id: p.leader,
        leader_epoch: p.epoch,
        replica_nodes: p.replicas.clone(),
        isr_nodes: p.isr.clone(),
        offline_replicas: Vec::new(),
    }
}

/// A produce whose partitions are appended and whose answer waits: for
/// the file (acks=1) or the in-sync replicas (acks=-1).
#[derive(Debug)]
pub(super) struct Unanswered {
    id: i32,
    version: i16,
    acks: i16,
    deadline: Instant,
    topics: Vec<(String, Vec<(i32, Pending)>)>,
}

/// A produce: every partition appended, its answer left to
/// [`answer_produce`] (none for acks=0).
fn produce_request(
    shared: &Arc<Shared>,
    kafka: &Kafka,
    r: &ProduceRequest<'_>,
    version: i16,
    id: i32,
    state: &mut ConnState<'_>,
) -> Option<Unanswered> {
    let wait = u64::try_from(r.timeout_ms).unwrap_or(0);
    let deadline =
        Instant::now() + Duration::from_millis(wait.min(shared.config.request_timeout_ms));
    // A transaction's records are durable on every in-sync replica, as
    // Kafka's producers send them (acks=all).
    let access = Access::new(shared, state.session.as_ref());
    let refusal = if !produce::valid_acks(r.acks) || r.transactional_id.is_some() && r.acks != -1 {
        Some(kafka::INVALID_REQUIRED_ACKS)
    } else {
        // A transaction's batches need write on its transactional id.
        r.transactional_id
            .and_then(|txn| access.transactional_id(Operation::Write, txn))
    };
    let verify = |producer, topic: &str, partition| match r.transactional_id {
        Some(txn) => kafka
            .transactions
            .verify(shared, txn, producer, (topic, partition)),
        None => Err(kafka::INVALID_TXN_STATE),
    };
    let txn = produce::Transactional {
        verify: &verify,
        refused: (r.transactional_id.is_none())
            .then_some(kafka::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    };
    let mut topics = Vec::with_capacity(r.topic_data.len());
    for t in &r.topic_data {
        let refusal = refusal
            .or_else(|| access.topic(Operation::Write, t.name))
            .or_else(|| access.missing(t.name));
        let parts = t.partition_data.iter().map(|p| {
            let pending = match refusal {
                Some(error) => Pending::Done(Produced {
                    error,
                    base_offset: -1,
                    log_start_offset: -1,
                    message: None,
                }),
                None => produce::append(
                    shared,
                    (t.name, p.index),
                    p.records,
                    (r.acks, txn),
                    &mut state.scratch,
                ),
            };
            (p.index, pending)
        });
        topics.push((t.name.to_string(), parts.collect()));
    }
    if r.acks == 0 {
        state.failed_unanswered = first_failure(&topics);
    }
    (r.acks != 0).then_some(Unanswered {
        id,
        version,
        acks: r.acks,
        deadline,
        topics,
    })
}

/// The first partition of a produce refused at once, and why.
fn first_failure(topics: &[(String, Vec<(i32, Pending)>)]) -> Option<String> {
    topics.iter().find_map(|(name, parts)| {
        parts.iter().find_map(|(index, pending)| match pending {
            Pending::Done(p) if p.error != kafka::NONE => Some(format!(
                "an acks=0 produce to {name} [{index}] failed (Kafka error {}): {}",
                p.error,
                p.message.as_deref().unwrap_or("refused")
            )),
            _ => None,
        })
    })
}

/// Answers a produce in `out`, once each of its partitions is settled.
pub(super) fn answer_produce(u: Unanswered, out: &mut Vec<u8>) {
    let mut responses = Vec::with_capacity(u.topics.len());
    for (name, parts) in &u.topics {
        let answered = parts.iter().map(|(index, pending)| {
            let done = produce::settle(pending, u.acks, u.deadline);
            resp::PartitionProduceResponse {
                index: *index,
                error_code: done.error,
                base_offset: done.base_offset,
                log_append_time_ms: -1,
                log_start_offset: done.log_start_offset,
                error_message: done.message,
            }
        });
        responses.push(resp::TopicProduceResponse {
            name,
            partition_responses: answered.collect(),
        });
    }
    let response = resp::ProduceResponse {
        responses,
        throttle_time_ms: 0,
    };
    frame(out, u.id, |out| {
        // The response header v1 of a flexible version: its empty tags.
        if crate::kafka::header::is_flexible(kafka::api_key::PRODUCE, u.version) {
            crate::kafka::wire::put_empty_tagged_fields(out);
        }
        response.encode(u.version, out)
    });
}

/// A fetch, sessionless: every partition it names, none forgotten.
fn fetch_request<'s>(
    shared: &'s Shared,
    r: &FetchRequest<'_>,
    version: i16,
    id: i32,
    state: &mut ConnState<'s>,
) {
    let access = Access::new(shared, state.session.as_ref());
    // A broker's fetch (replica_id 0 or more) needs cluster_action.
    let replica = r.replica_id >= 0
        && !access.allows(Operation::ClusterAction, ResourceType::Cluster, CLUSTER);
    let asks: Vec<Ask<'_>> = r
        .topics
        .iter()
        .flat_map(|t| {
            let denied = match replica {
                true => Some(kafka::CLUSTER_AUTHORIZATION_FAILED),
                false => access.topic(Operation::Read, t.topic),
            };
            t.partitions.iter().map(move |p| Ask {
                topic: t.topic,
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: p.last_fetched_epoch,
                denied,
            })
        })
        .collect();
    let limits = Limits {
        max_wait_ms: r.max_wait_ms,
        min_bytes: r.min_bytes,
        max_bytes: r.max_bytes,
        read_committed: r.isolation_level == 1,
    };
    let fetched = fetch::fetch(shared, &asks, limits);
    let elsewhere = fetched
        .iter()
        .map(|f| match &f.records {
            Records::File(slice) => slice.len,
            Records::Converted { .. } | Records::Empty => 0,
        })
        .sum();
    let mut gaps = Vec::new();
    encode_fetch(r, &fetched, |response| {
        resp::frame_sized(&mut state.out, id, elsewhere, |out| {
            // The response header v1 of a flexible version: its empty tags.
            if crate::kafka::header::is_flexible(kafka::api_key::FETCH, version) {
                crate::kafka::wire::put_empty_tagged_fields(out);
            }
            response.encode_with(version, out, &mut gaps)
        })
    });
    let mut files = Vec::new();
    for f in fetched {
        match f.records {
            Records::File(slice) => files.push(slice),
            Records::Converted { held, .. } => state.held.push(held),
            Records::Empty => {}
        }
    }
    state.sends.extend(gaps.into_iter().zip(files));
}

/// The response to fetch `r` of the partitions `fetched`, handed to `f`.
fn encode_fetch(
    r: &FetchRequest<'_>,
    fetched: &[fetch::Fetched],
    f: impl FnOnce(&resp::FetchResponse<'_>),
) {
    let mut parts = fetched.iter();
    let responses = r
        .topics
        .iter()
        .map(|t| resp::FetchableTopicResponse {
            topic: t.topic,
            partitions: t
                .partitions
                .iter()
                .zip(parts.by_ref())
                .map(|(p, f)| resp::PartitionData {
                    partition_index: p.partition,
                    error_code: f.error,
                    high_watermark: f.high_watermark,
                    last_stable_offset: f.last_stable_offset,
                    log_start_offset: f.log_start_offset,
                    aborted_transactions: Some(
                        f.aborted
                            .iter()
                            .map(|t| resp::AbortedTransaction {
                                producer_id: t.producer_id,
                                first_offset: t.first_offset as i64,
                            })
                            .collect(),
                    ),
                    preferred_read_replica: -1,
                    diverging_epoch: f.diverging_epoch,
                    records: match &f.records {
                        Records::Converted { bytes, .. } => bytes,
                        Records::File(_) | Records::Empty => &[],
                    },
                    records_after: match &f.records {
                        Records::File(slice) => slice.len,
                        Records::Converted { .. } | Records::Empty => 0,
                    },
                })
                .collect(),
        })
        .collect();
    let response = resp::FetchResponse {
        throttle_time_ms: 0,
        error_code: kafka::NONE,
        session_id: 0,
        responses,
    };
    f(&response);
}

fn list_offsets(
    shared: &Shared,
    r: &ListOffsetsRequest<'_>,
    access: Access<'_>,
    (version, id): (i16, i32),
    out: &mut Vec<u8>,
) {
    let topics = r
        .topics
        .iter()
        .map(|t| resp::ListOffsetsTopicResponse {
            name: t.name,
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let found = match access.topic(Operation::Describe, t.name) {
                        Some(denied) => Listed::none(denied),
                        None => list_offset(
                            shared,
                            t.name,
                            (p.partition_index, p.current_leader_epoch),
                            (p.timestamp, r.isolation_level == 1),
                        ),
                    };
                    resp::ListOffsetsPartitionResponse {
                        partition_index: p.partition_index,
                        error_code: found.error,
                        timestamp: found.timestamp,
                        offset: found.offset,
                        leader_epoch: found.epoch,
                    }
                })
                .collect(),
        })
        .collect();
    let response = resp::ListOffsetsResponse {
        throttle_time_ms: 0,
        topics,
    };
    frame_message(out, id, version, &response);
}

/// Answers a SaslHandshake; a mechanism not taken closes the connection
/// after the answer.
fn sasl_handshake(
    shared: &Shared,
    mechanism: &str,
    version: i16,
    id: i32,
    state: &mut ConnState<'_>,
) {
    let Some(session) = state.session.as_mut() else {
        return;
    };
    let (mechanisms, mut result) = session.handshake(shared, mechanism);
    if version == 0 && result.is_ok() {
        let why = "SaslHandshake v0 (SASL messages without Kafka's framing) is not supported: use v1 and SaslAuthenticate";
        result = Err((crate::error::ErrorCode::IllegalSaslState, why.to_string()));
    }
    let error_code = match result {
        Ok(()) => kafka::NONE,
        Err((code, why)) => {
            state.closing = Some(why);
            kafka_sasl_code(code)
        }
    };
    let response = resp::SaslHandshakeResponse {
        error_code,
        mechanisms,
    };
    frame(&mut state.out, id, |out| response.encode(version, out));
}

/// Answers a SaslAuthenticate; a refusal closes the connection after the
/// answer.
fn sasl_authenticate(
    shared: &Shared,
    peer: SocketAddr,
    message: &[u8],
    version: i16,
    id: i32,
    state: &mut ConnState<'_>,
) {
    let Some(session) = state.session.as_mut() else {
        return;
    };
    let (error_code, error_message, auth_bytes) = match session.authenticate(shared, peer, message)
    {
        Ok(auth_bytes) => (kafka::NONE, None, auth_bytes),
        Err((code, why)) => {
            state.closing = Some(why.clone());
            (kafka_sasl_code(code), Some(why), Vec::new())
        }
    };
    let response = crate::kafka::sasl::SaslAuthenticateResponse {
        error_code,
        error_message,
        auth_bytes: &auth_bytes,
        session_lifetime_ms: 0,
    };
    frame_message(&mut state.out, id, version, &response);
}

/// Kafka's code for a SASL refusal.
fn kafka_sasl_code(code: crate::error::ErrorCode) -> i16 {
    use crate::error::ErrorCode as E;
    match code {
        E::UnsupportedSaslMechanism => kafka::UNSUPPORTED_SASL_MECHANISM,
        E::IllegalSaslState => kafka::ILLEGAL_SASL_STATE,
        _ => kafka::SASL_AUTHENTICATION_FAILED,
    }
}
