//! Requests as the reader handles them: a produce is appended at once and
//! a list_offsets, metadata or create_topic request answered at once; a
//! fetch, and the answer to an acks=all produce, wait their turn with the
//! writer.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{error_into, produced_into, Answer, Appended, FetchAsked, QueuedAnswer, ReaderState};
use crate::broker::auth::Session;
use crate::broker::shared::{error_code, Partition, Shared};
use crate::protocol::{self, put, ErrorCode, Request, RequestError, TopicMetadata};
use crate::storage::log::{offset_for_timestamp_in, AppendInfo};
use crate::storage::record::{legacy, DecodeError};

/// Handles a request: the work that belongs in the reader (appends, and
/// the quick answers). `None`: no answer at all (acks=0, or a frame whose
/// header does not decode).
pub(super) fn handle(
    shared: &Arc<Shared>,
    body: &mut [u8],
    peer: SocketAddr,
    state: &mut ReaderState,
) -> Option<Answer> {
    let header = protocol::decode_request_header(body).ok()?;
    let api = protocol::ApiKey::name_of(header.api_key);
    let _timer = shared.metrics.request("klog", api);
    let correlation_id = header.correlation_id;
    let Some(request) = decode(shared, body, peer, correlation_id, state) else {
        return Some(Answer::Now);
    };
    match request {
        Request::Produce {
            acks,
            timeout_ms,
            topic,
            partition,
            transactional_id,
            records,
        } => {
            // The topic leaves the frame, which the append rewrites.
            state.topic.clear();
            state.topic.push_str(topic);
            state.transactional_id.clear();
            state.transactional_id.push_str(transactional_id);
            let request = ProduceRequest {
                correlation_id,
                acks,
                timeout_ms,
                partition,
            };
            if header.api_version >= protocol::PRODUCE_VERSION_KAFKA {
                return produce(shared, &request, &mut body[records], peer, state);
            }
            // An older producer's legacy batch, stored as Kafka's.
            let mut converted = Vec::new();
            match legacy::to_kafka(&body[records.clone()], &mut converted) {
                Ok(done) if done == records.len() => {
                    produce(shared, &request, &mut converted, peer, state)
                }
                Ok(_) => {
                    let why = DecodeError::Malformed("batch: trailing bytes");
                    refuse_batch(shared, &request, peer, state, why)
                }
                Err(why) => refuse_batch(shared, &request, peer, state, why),
            }
        }
        fetch @ Request::Fetch { .. } => {
            queued_fetch(shared, (header.api_version, correlation_id), fetch)
        }
        Request::Txn(txn) => {
            let coordinators = state.coordinators.as_deref();
            super::txn::answer(
                shared,
                coordinators,
                &mut state.answer,
                correlation_id,
                &txn,
            );
            Some(Answer::Now)
        }
        quick => {
            let session = state.session.as_ref();
            answer_now(shared, session, &mut state.answer, correlation_id, quick);
            Some(Answer::Now)
        }
    }
}

/// A fetch, answered once its records come or its wait ends (`None`
/// for another request).
fn queued_fetch(
    shared: &Shared,
    (version, correlation_id): (u16, u32),
    fetch: Request<'_>,
) -> Option<Answer> {
    let Request::Fetch {
        wait_ms_max,
        bytes_min,
        response_bytes_max,
        replica_id,
        read_committed,
        partitions,
    } = fetch
    else {
        return None;
    };
    Some(Answer::Later(QueuedAnswer::Fetch {
        correlation_id,
        deadline: client_deadline(shared, wait_ms_max),
        asked: FetchAsked {
            version,
            replica_id: replica_id.to_string(),
            read_committed,
            bytes_min,
            response_bytes_max,
            partitions,
        },
    }))
}

/// Answers a request that needs no wait (list_offsets, metadata,
/// create_topic, offsets_for_leader_epoch) in `out`.
fn answer_now(
    shared: &Shared,
    session: Option<&Session>,
    out: &mut Vec<u8>,
    correlation_id: u32,
    request: Request<'_>,
) {
    match request {
        Request::ListOffsets {
            topic,
            partition,
            at,
        } => list_offsets(shared, out, correlation_id, &topic, partition, at),
        Request::Metadata { topics } => metadata(shared, session, out, correlation_id, &topics),
        Request::CreateTopic { topic, partitions } => {
            create_topic(shared, out, correlation_id, &topic, partitions)
        }
        Request::OffsetsForLeaderEpoch {
            topic,
            partition,
            current_leader_epoch,
            leader_epoch,
        } => {
            let epochs = (current_leader_epoch, leader_epoch);
            offsets_for_leader_epoch(shared, out, correlation_id, (&topic, partition), epochs)
        }
        Request::Registry => registry(shared, out, correlation_id),
        Request::InitProducerId => init_producer_id(shared, out, correlation_id),
        Request::WriteTxnMarker(marker) => {
            let timeout = std::time::Duration::from_millis(shared.config.request_timeout_ms);
            let deadline = std::time::Instant::now() + timeout;
            match crate::broker::markers::write_here(shared, &marker, deadline) {
                Ok(()) => {
                    let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
                    protocol::finish_frame(&mut out[start..]);
                }
                Err((code, msg)) => error_into(out, correlation_id, code, &msg),
            }
        }
        Request::OffsetCommit(c) => match crate::broker::offsets::commit(shared, &c) {
            Ok(before) => {
                let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
                protocol::put_commit_response(out, before);
                protocol::finish_frame(&mut out[start..]);
            }
            Err((code, msg)) => error_into(out, correlation_id, code, &msg),
        },
        Request::OffsetFetch(f) => match crate::broker::offsets::fetch(shared, &f) {
            Ok(offsets) => {
                let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
                protocol::put_offsets_response(out, &offsets);
                protocol::finish_frame(&mut out[start..]);
            }
            Err((code, msg)) => error_into(out, correlation_id, code, &msg),
        },
        Request::Produce { .. }
        | Request::Fetch { .. }
        | Request::Txn(_)
        | Request::SaslHandshake { .. }
        | Request::SaslAuthenticate { .. } => {
            unreachable!("the reader handles produce, fetch, transactions and SASL itself")
        }
    }
}

/// SASL's and the ACLs' part of a request: SASL's own requests answered,
/// any other refused until the client has logged in (the connection then
/// closes), and one the ACLs refuse answered with why. Whether it was
/// answered here (false: the request is for [`handle`]).
fn admit(
    shared: &Shared,
    peer: SocketAddr,
    state: &mut ReaderState,
    correlation_id: u32,
    request: &Request<'_>,
) -> bool {
    match request {
        Request::SaslHandshake { mechanism } => {
            sasl_handshake(shared, state, correlation_id, mechanism)
        }
        Request::SaslAuthenticate { message } => {
            sasl_authenticate(shared, peer, state, correlation_id, message)
        }
        _ if state.session.as_ref().is_none_or(|s| s.ready()) => {
            let Some(session) = state.session.as_mut() else {
                return false;
            };
            let Some(denied) = super::access::authorize(shared, session, request) else {
                return false;
            };
            error_into(
                &mut state.answer,
                correlation_id,
                ErrorCode::AuthorizationFailed,
                &denied,
            );
            if matches!(request, Request::Produce { acks: 0, .. }) {
                // No answer is read: the connection closes, as Kafka's.
                state.closing = Some(denied);
            }
        }
        _ => {
            let why = "this broker requires SASL authentication first (-X security.protocol=sasl_plaintext or sasl_ssl, -X sasl.mechanisms, -X sasl.username, -X sasl.password)";
            error_into(
                &mut state.answer,
                correlation_id,
                ErrorCode::IllegalSaslState,
                why,
            );
            state.closing = Some("a request before SASL authentication".into());
        }
    }
    true
}

/// Answers a sasl_handshake: the mechanisms taken, with the error of one
/// that is not (the connection then closes).
fn sasl_handshake(shared: &Shared, state: &mut ReaderState, correlation_id: u32, mechanism: &str) {
    let Some(session) = state.session.as_mut() else {
        return;
    };
    let (taken, result) = session.handshake(shared, mechanism);
    let (code, why) = result.err().unwrap_or((ErrorCode::None, String::new()));
    let out = &mut state.answer;
    let start = protocol::begin_response(out, correlation_id, code, &why);
    put::u16(out, taken.len() as u16);
    for name in taken {
        put::str(out, name);
    }
    protocol::finish_frame(&mut out[start..]);
    if code != ErrorCode::None {
        state.closing = Some(why);
    }
}

/// Answers a sasl_authenticate: the broker's next message, or the refusal
/// (the connection then closes).
fn sasl_authenticate(
    shared: &Shared,
    peer: SocketAddr,
    state: &mut ReaderState,
    correlation_id: u32,
    message: &[u8],
) {
    let Some(session) = state.session.as_mut() else {
        return;
    };
    let out = &mut state.answer;
    match session.authenticate(shared, peer, message) {
        Ok(answer) => {
            let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
            put::bytes(out, &answer);
            protocol::finish_frame(&mut out[start..]);
        }
        Err((code, why)) => {
            error_into(out, correlation_id, code, &why);
            state.closing = Some(why);
        }
    }
}

/// Decodes a request, and gives it to handle unless SASL's part answered
/// it ([`admit`]). One that does not decode is answered at once, in
/// the answers held, and the connection goes on (its frame was whole),
/// unless the client has not logged in yet.
fn decode<'a>(
    shared: &Shared,
    body: &'a [u8],
    peer: SocketAddr,
    correlation_id: u32,
    state: &mut ReaderState,
) -> Option<Request<'a>> {
    let decoded = decode_or_answer(shared, body, peer, correlation_id, &mut state.answer);
    let Some(request) = decoded else {
        if state.session.as_ref().is_some_and(|s| !s.ready()) {
            state.closing = Some("a request that does not decode before SASL".into());
        }
        return None;
    };
    (!admit(shared, peer, state, correlation_id, &request)).then_some(request)
}

/// Decodes a request; one that does not decode is answered in `out`.
fn decode_or_answer<'a>(
    shared: &Shared,
    body: &'a [u8],
    peer: SocketAddr,
    correlation_id: u32,
    out: &mut Vec<u8>,
) -> Option<Request<'a>> {
    match protocol::decode_request(body) {
        Ok((_, request)) => Some(request),
        Err(RequestError::Unsupported(msg)) => {
            shared.log_peer(format_args!("{peer}: {msg}"));
            error_into(out, correlation_id, ErrorCode::UnsupportedRequest, &msg);
            None
        }
        Err(RequestError::Invalid(e)) => {
            shared.log_peer(format_args!("{peer}: invalid request: {e}"));
            error_into(out, correlation_id, ErrorCode::InvalidRequest, &e.0);
            None
        }
    }
}

/// A produce request's fields besides its topic and batch.
struct ProduceRequest {
    correlation_id: u32,
    acks: i8,
    timeout_ms: u32,
    partition: u32,
}

/// Appends a produce request's batch to its partition (creating its topic
/// if there is none), and answers as its `acks` asks.
fn produce(
    shared: &Arc<Shared>,
    request: &ProduceRequest,
    batch: &mut [u8],
    peer: SocketAddr,
    state: &mut ReaderState,
) -> Option<Answer> {
    let (topic, partition) = (state.topic.as_str(), request.partition);
    let p = match produce_partition(shared, topic, partition) {
        Ok(p) => p,
        Err((code, msg)) => {
            return refuse(shared, request, topic, peer, &mut state.answer, code, &msg)
        }
    };
    let coordinators = state.coordinators.as_deref();
    let in_txn = (&*p, &state.transactional_id[..]);
    let in_txn = match super::txn::check_produce(shared, coordinators, in_txn, batch) {
        Ok(true) if request.acks != protocol::ACKS_ALL => {
            let msg = format!("{topic} [{partition}]: a transaction's batch goes with acks all");
            let code = ErrorCode::InvalidRequest;
            return refuse(shared, request, topic, peer, &mut state.answer, code, &msg);
        }
        Ok(in_txn) => in_txn,
        Err((code, msg)) => {
            return refuse(shared, request, topic, peer, &mut state.answer, code, &msg)
        }
    };
    let appended = {
        let mut log = p.lock();
        let now = crate::clock::now_ms();
        match p.may_append(request.acks, p.min_insync.load(Ordering::Relaxed)) {
            Ok(epoch) => match in_txn {
                true => log.produce_in_transaction(batch, now),
                false => log.produce(batch, now),
            }
            .map(|produced| (produced.info, epoch)),
            Err((code, msg)) => {
                drop(log);
                return refuse(shared, request, topic, peer, &mut state.answer, code, &msg);
            }
        }
    };
    match appended {
        Ok((info, epoch)) => acknowledge(shared, request, &p, (&info, epoch), state),
        Err(e) => {
            let code = error_code(&e);
            if code == ErrorCode::StorageError {
                shared.log_peer(format_args!(
                    "{peer}: append to {topic}-{partition} failed: {e}"
                ));
            }
            let msg = format!("{topic} [{partition}]: {e}");
            refuse(shared, request, topic, peer, &mut state.answer, code, &msg)
        }
    }
}

/// Refuses a produce whose batch does not decode.
fn refuse_batch(
    shared: &Arc<Shared>,
    request: &ProduceRequest,
    peer: SocketAddr,
    state: &mut ReaderState,
    why: DecodeError,
) -> Option<Answer> {
    let (topic, partition) = (state.topic.clone(), request.partition);
    let e = crate::error::Error::InvalidBatch(why);
    let msg = format!("{topic} [{partition}]: {e}");
    refuse(
        shared,
        request,
        &topic,
        peer,
        &mut state.answer,
        error_code(&e),
        &msg,
    )
}

/// The partition a produce request appends to; a topic that does not
/// exist is created with the broker's `--partitions`.
pub(in crate::broker) fn produce_partition(
    shared: &Shared,
    topic: &str,
    partition: u32,
) -> std::result::Result<Arc<Partition>, (ErrorCode, String)> {
    if topic == crate::coord::offsets_topic::OFFSETS_TOPIC {
        let why = format!("{topic} is internal: its brokers write it, as groups commit offsets");
        return Err((ErrorCode::InvalidTopic, why));
    }
    let p = match shared.partition(topic, partition) {
        Err((ErrorCode::UnknownTopic, msg)) if !shared.config.auto_create_topics => {
            return Err((ErrorCode::UnknownTopic, no_auto_create(&msg)))
        }
        Err((ErrorCode::UnknownTopic, _)) => {
            if let Err(e) = shared.create_topic(topic, shared.config.partitions_default) {
                return Err((error_code(&e), e.to_string()));
            }
            shared.partition(topic, partition)
        }
        found => found,
    }?;
    if p.replica.as_ref().is_some_and(|r| r.before_first_look()) {
        crate::broker::replica::manager::settle(shared, &p);
    }
    Ok(p)
}

/// Answers a produce request that failed; with acks=0 there is no answer,
/// and the failure goes to the broker's log.
fn refuse(
    shared: &Shared,
    request: &ProduceRequest,
    topic: &str,
    peer: SocketAddr,
    out: &mut Vec<u8>,
    code: ErrorCode,
    msg: &str,
) -> Option<Answer> {
    if request.acks == protocol::ACKS_NONE {
        let partition = request.partition;
        shared.log_peer(format_args!(
            "{peer}: produce to {topic} [{partition}] (acks=0) failed: {msg}"
        ));
        None
    } else {
        error_into(out, request.correlation_id, code, msg);
        Some(Answer::Now)
    }
}

/// After an append: tells the flusher, and answers as `acks` asks.
fn acknowledge(
    shared: &Shared,
    request: &ProduceRequest,
    p: &Arc<Partition>,
    (info, leader_epoch): (&AppendInfo, Option<u32>),
    state: &mut ReaderState,
) -> Option<Answer> {
    // The reader's own answers (acks=1) need their records in the file
    // first. An acks=all answer checks its records' fate itself, when
    // durable.
    if request.acks == protocol::ACKS_LEADER {
        state.note_unsettled(p, info.epoch, info.last_offset);
    }
    shared.appends.fetch_add(1, Ordering::Relaxed);
    shared.mark_dirty(p, request.acks == protocol::ACKS_ALL);
    match request.acks {
        protocol::ACKS_NONE => None,
        protocol::ACKS_LEADER => {
            produced_into(&mut state.answer, request.correlation_id, info.base_offset);
            Some(Answer::Now)
        }
        _ => Some(Answer::Later(QueuedAnswer::Durable {
            correlation_id: request.correlation_id,
            partition: Arc::clone(p),
            appended: Appended {
                base_offset: info.base_offset,
                end_offset: info.last_offset + 1,
                epoch: info.epoch,
                leader_epoch,
            },
            deadline: client_deadline(shared, request.timeout_ms),
        })),
    }
}

/// When a wait a client chose (a fetch's `wait_ms_max`, an acks=all
/// `timeout_ms`) ends: never later than the broker's `--request-timeout`,
/// so no client can park a request for weeks.
fn client_deadline(shared: &Shared, wait_ms: u32) -> Instant {
    let ms = u64::from(wait_ms).min(shared.config.request_timeout_ms);
    Instant::now() + Duration::from_millis(ms)
}

/// Answers a list_offsets request in `out`.
fn list_offsets(
    shared: &Shared,
    out: &mut Vec<u8>,
    correlation_id: u32,
    topic: &str,
    partition: u32,
    at: i64,
) {
    match offset_at(shared, topic, partition, at) {
        Ok(offset) => {
            let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
            put::i64(out, offset);
            protocol::finish_frame(&mut out[start..]);
        }
        Err((code, msg)) => error_into(out, correlation_id, code, &msg),
    }
}

/// The offset a list_offsets request asks for: the log's start
/// ([`protocol::EARLIEST`]), its end as readers see it
/// ([`protocol::LATEST`]), or the first record at or after a timestamp
/// (-1 when none is).
pub(in crate::broker) fn offset_at(
    shared: &Shared,
    topic: &str,
    partition: u32,
    at: i64,
) -> std::result::Result<i64, (ErrorCode, String)> {
    record_at(shared, topic, partition, at).map(|(offset, _)| offset)
}

/// [`offset_at`], with the timestamp of the record found by a timestamp
/// (-1 for the start and the end, and when none is found), as Kafka's
/// ListOffsets answers.
pub(in crate::broker) fn record_at(
    shared: &Shared,
    topic: &str,
    partition: u32,
    at: i64,
) -> std::result::Result<(i64, i64), (ErrorCode, String)> {
    let p = shared.partition(topic, partition)?;
    let end = p.readable_end(&p.lock())?;
    let found = match at {
        protocol::EARLIEST => Ok((p.lock().start_offset() as i64, -1)),
        protocol::LATEST => Ok((end as i64, -1)),
        // The lock is held only to find each chunk: the file is read after.
        ts if ts >= 0 => offset_for_timestamp_in(|| p.lock(), ts).map(|o| {
            o.filter(|&(o, _)| o < end)
                .map_or((-1, -1), |(o, t)| (o as i64, t))
        }),
        other => {
            let msg = format!("list_offsets at {other}");
            return Err((ErrorCode::InvalidRequest, msg));
        }
    };
    found.map_err(|e| (error_code(&e), e.to_string()))
}

/// Answers an offsets_for_leader_epoch request in `out`: where epoch
/// `asked` (or the largest epoch below it) ends in the partition's log,
/// for a follower in epoch `current` (refused unless this broker leads
/// in it, for a replica: [`crate::broker::shared::Partition::epoch_end`]).
fn offsets_for_leader_epoch(
    shared: &Shared,
    out: &mut Vec<u8>,
    correlation_id: u32,
    (topic, partition): (&str, u32),
    (current, asked): (Option<u32>, u32),
) {
    let found = shared
        .partition(topic, partition)
        .and_then(|p| p.epoch_end(current, asked));
    let found = match found {
        Ok(found) => found,
        Err((code, msg)) => return error_into(out, correlation_id, code, &msg),
    };
    let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
    protocol::put_epoch_end(out, found);
    protocol::finish_frame(&mut out[start..]);
}

/// Answers a metadata request in `out`: the topics asked about, or all.
/// Answers a registry request: the broker's registry, as a client on its
/// host can open it (a directory's absolute path), empty for none.
fn registry(shared: &Shared, out: &mut Vec<u8>, correlation_id: u32) {
    let location = shared.registry.as_ref().map(|r| r.location());
    let location = match location {
        Some(l) if !l.starts_with("zk://") => std::fs::canonicalize(&l)
            .map(|p| p.display().to_string())
            .unwrap_or(l),
        l => l.unwrap_or_default(),
    };
    let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
    put::str(out, &location);
    protocol::finish_frame(&mut out[start..]);
}

/// Answers an init_producer_id: the next id of the broker's block
/// ([`crate::broker::producer_ids`]), or why there is none (the registry
/// could not give a block: `leader_not_available`, which clients retry).
fn init_producer_id(shared: &Shared, out: &mut Vec<u8>, correlation_id: u32) {
    match shared.producer_ids.next() {
        Ok(id) => {
            let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
            put::i64(out, id);
            put::u16(out, 0);
            protocol::finish_frame(&mut out[start..]);
        }
        Err(e) => {
            let msg = format!("no producer id to hand out: {e}");
            shared.log_peer(format_args!("{msg}"));
            error_into(out, correlation_id, ErrorCode::LeaderNotAvailable, &msg);
        }
    }
}

fn metadata(
    shared: &Shared,
    session: Option<&Session>,
    out: &mut Vec<u8>,
    correlation_id: u32,
    asked: &[String],
) {
    use crate::coord::acl::{Operation, ResourceType};
    let describes = |name: &str| {
        session.is_none_or(|s| s.allows(shared, Operation::Describe, (ResourceType::Topic, name)))
    };
    let names: Vec<String> = if asked.is_empty() {
        let all = shared.read_topics().keys().cloned().collect::<Vec<_>>();
        all.into_iter().filter(|t| describes(t)).collect()
    } else {
        asked.to_vec()
    };
    let start = protocol::begin_response(out, correlation_id, ErrorCode::None, "");
    put::u16(out, names.len().min(u16::MAX as usize) as u16);
    for name in names.iter().take(u16::MAX as usize) {
        let topic = match describes(name) {
            true => topic_metadata(shared, name),
            false => TopicMetadata {
                topic: name.clone(),
                error: ErrorCode::AuthorizationFailed,
                message: format!("may not describe topic {name:?}"),
                partitions: Vec::new(),
            },
        };
        protocol::put_topic_metadata(out, &topic);
    }
    protocol::finish_frame(&mut out[start..]);
}

/// One topic of a metadata answer.
fn topic_metadata(shared: &Shared, name: &str) -> TopicMetadata {
    let mut parts = shared.read_topics().get(name).cloned();
    if parts.is_none() && shared.registry.is_some() {
        // Placed by another broker, never asked for here: opened, as a
        // produce or fetch would, so that a group member that turns to
        // this broker for a partition placed on it finds it.
        let _ = shared.partition(name, 0);
        parts = shared.read_topics().get(name).cloned();
    }
    let Some(parts) = parts else {
        return TopicMetadata {
            topic: name.to_string(),
            error: ErrorCode::UnknownTopic,
            message: format!("topic {name:?} does not exist"),
            partitions: Vec::new(),
        };
    };
    let offsets = parts.iter().enumerate().map(|(i, p)| match p {
        Some(p) => {
            let log = p.lock();
            match p.readable_end(&log) {
                Ok(end) => (log.start_offset(), end),
                // A replica that does not lead: clients go to its leader.
                Err(_) => (protocol::ELSEWHERE, protocol::ELSEWHERE),
            }
        }
        None if shared.is_offline(name, i as u32) => (protocol::OFFLINE, protocol::OFFLINE),
        // Served by another broker: the registry says which.
        None => (protocol::ELSEWHERE, protocol::ELSEWHERE),
    });
    TopicMetadata {
        topic: name.to_string(),
        error: ErrorCode::None,
        message: String::new(),
        partitions: offsets.collect(),
    }
}

/// Why a topic that does not exist was not created.
pub(in crate::broker) fn no_auto_create(unknown: &str) -> String {
    format!("{unknown}, and this broker creates topics only when asked with a partition count (--auto-create-topics false)")
}

/// Answers a create_topic request in `out`: the topic's partition count,
/// with `topic_exists` when it was there already.
fn create_topic(
    shared: &Shared,
    out: &mut Vec<u8>,
    correlation_id: u32,
    topic: &str,
    partitions: u32,
) {
    // A count of 0 asks for the broker's own: a client creating the topic
    // it produces to, which is auto-creation.
    let partitions = match partitions {
        0 if !shared.config.auto_create_topics && !shared.topic_exists(topic) => {
            let msg = no_auto_create(&format!("topic {topic:?} does not exist"));
            return error_into(out, correlation_id, ErrorCode::UnknownTopic, &msg);
        }
        0 => shared.config.partitions_default,
        n => n,
    };
    match shared.create_topic(topic, partitions) {
        Ok((count, existed)) => {
            let (code, msg) = if existed {
                (
                    ErrorCode::TopicExists,
                    format!("topic {topic:?} exists with {count} partitions"),
                )
            } else {
                (ErrorCode::None, String::new())
            };
            let start = protocol::begin_response(out, correlation_id, code, &msg);
            put::u32(out, count);
            protocol::finish_frame(&mut out[start..]);
        }
        Err(e) => error_into(out, correlation_id, error_code(&e), &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::testing::{answers, batch, shared};
    use crate::protocol::{FetchPartition, Reader};
    use crate::sync::lock;

    fn peer() -> SocketAddr {
        "127.0.0.1:1".parse().unwrap()
    }

    /// A produce (either protocol's) to a topic that does not exist
    /// creates it, unless auto-creation is off: then it is refused as
    /// unknown, saying why, and nothing is made.
    #[test]
    fn a_produce_creates_a_topic_only_with_auto_creation() {
        let (_sim, off) = crate::broker::testing::shared_with(|c| c.auto_create_topics = false);
        let Err((code, msg)) = produce_partition(&off, "new", 0) else {
            panic!("created");
        };
        assert_eq!(code, ErrorCode::UnknownTopic);
        assert!(msg.contains("--auto-create-topics false"), "{msg}");
        assert!(off.store.topics().unwrap().is_empty());
        let (_sim, on) = shared();
        assert!(produce_partition(&on, "new", 0).is_ok());
        assert_eq!(on.store.topics().unwrap().get("new"), Some(&1));
    }

    /// Handles one request frame as the reader does.
    fn send(shared: &Arc<Shared>, frame: &[u8], state: &mut ReaderState) -> Option<Answer> {
        let mut body = frame[protocol::LENGTH_BYTES..].to_vec();
        handle(shared, &mut body, peer(), state)
    }

    fn produce_frame(id: u32, acks: i8, topic: &str, partition: u32) -> Vec<u8> {
        let mut frame = Vec::new();
        protocol::produce_request(&mut frame, id, acks, 1000, topic, partition, &batch());
        frame
    }

    #[test]
    fn acks_1_is_answered_at_once_with_its_offset_and_left_to_settle() {
        let (_sim, shared) = shared();
        let mut state = ReaderState::default();
        for id in [1, 2] {
            let answer = send(
                &shared,
                &produce_frame(id, protocol::ACKS_LEADER, "t", 0),
                &mut state,
            );
            assert!(matches!(answer, Some(Answer::Now)));
        }
        let got = answers(&state.answer);
        assert_eq!(got.len(), 2, "the answers gather");
        for (i, (id, error, body)) in got.into_iter().enumerate() {
            assert_eq!((id, error), (i as u32 + 1, ErrorCode::None));
            assert_eq!(Reader::new(&body).u64("base_offset").unwrap(), i as u64);
        }
        assert_eq!(state.unsettled.len(), 1, "one partition, one epoch");
        assert_eq!(state.unsettled[0].last_offset, 1);
        assert_eq!(shared.appends.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn acks_all_waits_for_the_writer_and_wakes_the_flusher_urgently() {
        let (_sim, shared) = shared();
        let mut state = ReaderState::default();
        let answer = send(
            &shared,
            &produce_frame(3, protocol::ACKS_ALL, "t", 0),
            &mut state,
        );
        let Some(Answer::Later(QueuedAnswer::Durable {
            correlation_id,
            appended,
            ..
        })) = answer
        else {
            panic!("acks=all is answered by the writer")
        };
        assert_eq!(
            (correlation_id, appended.base_offset, appended.end_offset),
            (3, 0, 1)
        );
        assert!(state.answer.is_empty() && state.unsettled.is_empty());
        let dirty = lock(&shared.dirty);
        assert!(dirty.partitions.values().all(|e| e.urgent));
        assert_eq!(dirty.partitions.len(), 1);
    }

    #[test]
    fn acks_0_is_never_answered_even_when_it_fails() {
        let (_sim, shared) = shared();
        let mut state = ReaderState::default();
        assert!(send(
            &shared,
            &produce_frame(1, protocol::ACKS_NONE, "t", 0),
            &mut state
        )
        .is_none());
        // Partition 5 of a topic of one: refused, and still no answer.
        assert!(send(
            &shared,
            &produce_frame(2, protocol::ACKS_NONE, "t", 5),
            &mut state
        )
        .is_none());
        assert!(state.answer.is_empty());
        let mut state = ReaderState::default();
        send(
            &shared,
            &produce_frame(3, protocol::ACKS_LEADER, "t", 5),
            &mut state,
        );
        assert_eq!(answers(&state.answer)[0].1, ErrorCode::UnknownPartition);
    }

    #[test]
    fn a_produce_creates_its_topic_with_the_default_partitions() {
        let (_sim, shared) = shared();
        assert!(shared.partition("new", 0).is_err());
        let mut state = ReaderState::default();
        send(
            &shared,
            &produce_frame(1, protocol::ACKS_LEADER, "new", 0),
            &mut state,
        );
        assert_eq!(answers(&state.answer)[0].1, ErrorCode::None);
        assert!(shared.partition("new", 0).is_ok());
    }

    #[test]
    fn requests_that_do_not_decode_are_answered_and_the_connection_goes_on() {
        let (_sim, shared) = shared();
        let mut state = ReaderState::default();
        let mut frame = Vec::new();
        protocol::create_topic_request(&mut frame, 4, "t", 1);
        frame[4] = 99;
        assert!(matches!(
            send(&shared, &frame, &mut state),
            Some(Answer::Now)
        ));
        frame[4] = 4;
        frame.push(0);
        assert!(matches!(
            send(&shared, &frame, &mut state),
            Some(Answer::Now)
        ));
        let codes: Vec<_> = answers(&state.answer)
            .into_iter()
            .map(|a| (a.0, a.1))
            .collect();
        assert_eq!(
            codes,
            [
                (4, ErrorCode::UnsupportedRequest),
                (4, ErrorCode::InvalidRequest)
            ]
        );
    }

    #[test]
    fn a_fetch_is_left_to_the_writer() {
        let (_sim, shared) = shared();
        let mut state = ReaderState::default();
        let mut asked = [FetchPartition {
            topic: "t".into(),
            partition: 0,
            offset: 5,
            bytes_max: 100,
            leader_epoch: None,
        }];
        let mut frame = Vec::new();
        // A wait shorter than the request timeout is kept as asked.
        let wait_ms = (shared.config.request_timeout_ms / 2) as u32;
        protocol::fetch_request(
            &mut frame,
            9,
            protocol::FetchWant {
                wait_ms_max: wait_ms,
                bytes_min: 10,
                response_bytes_max: 1 << 30,
            },
            &asked,
        );
        let answer = send(&shared, &frame, &mut state);
        let Some(Answer::Later(QueuedAnswer::Fetch {
            correlation_id,
            deadline,
            asked: got,
        })) = answer
        else {
            panic!("a fetch waits its turn")
        };
        assert_eq!(
            (correlation_id, got.version, got.replica_id.as_str()),
            (9, 4, "")
        );
        assert_eq!(
            (got.bytes_min, got.response_bytes_max, got.partitions),
            (10, 1 << 30, asked.to_vec())
        );
        let asked_wait = Duration::from_millis(u64::from(wait_ms));
        assert!(deadline > Instant::now() + asked_wait - Duration::from_secs(2));
        assert!(deadline <= Instant::now() + asked_wait);
        // A follower's fetch: its id and epochs reach the writer as sent.
        asked[0].leader_epoch = Some(7);
        let want = protocol::FetchWant {
            wait_ms_max: 0,
            bytes_min: 1,
            response_bytes_max: 5,
        };
        protocol::replica_fetch_request(&mut frame, 10, "b2", want, &asked);
        let Some(Answer::Later(QueuedAnswer::Fetch { asked: got, .. })) =
            send(&shared, &frame, &mut state)
        else {
            panic!("a fetch waits its turn")
        };
        assert_eq!(
            (got.version, got.replica_id.as_str(), got.partitions),
            (5, "b2", asked.to_vec())
        );
    }

    #[test]
    fn offsets_for_leader_epoch_answers_from_the_log_and_refuses_what_it_lacks() {
        let (_sim, shared) = shared();
        let p = crate::broker::testing::partition(&shared, "t");
        crate::broker::testing::append(&p);
        p.lock().set_leader_epoch(3).unwrap();
        crate::broker::testing::append(&p);
        let mut state = ReaderState::default();
        let mut frame = Vec::new();
        for (id, (topic, partition, epoch)) in [("t", 0, 2), ("t", 0, 4), ("u", 0, 0), ("t", 1, 0)]
            .into_iter()
            .enumerate()
        {
            protocol::offsets_for_leader_epoch_request(
                &mut frame, id as u32, topic, partition, None, epoch,
            );
            assert!(matches!(
                send(&shared, &frame, &mut state),
                Some(Answer::Now)
            ));
        }
        let got: Vec<_> = answers(&state.answer)
            .into_iter()
            .map(|(_, code, body)| {
                let end = (code == ErrorCode::None)
                    .then(|| protocol::decode_epoch_end(&mut Reader::new(&body)).unwrap());
                (code, end)
            })
            .collect();
        let next = p.lock().next_offset();
        assert_eq!(
            got,
            [
                (ErrorCode::None, Some(Some((0, 1)))),
                (ErrorCode::None, Some(None)),
                (ErrorCode::UnknownTopic, None),
                (ErrorCode::UnknownPartition, None),
            ],
            "epoch 2: epoch 0, ending where 3 starts; 4 is newer than the log ({next})"
        );
    }

    /// Review 13: a broker that just won epoch 3 has appended nothing in
    /// it yet. A follower whose log ends in epoch 2 (it copied batches of
    /// epoch 2 this leader never got) asks where epoch 2 ends: the answer
    /// must be epoch 1, ending at this log's end (as Kafka answers, the
    /// leader's cache holding its own epoch from the moment it leads).
    /// Before, the leader recorded its epoch only with its first batch,
    /// answered "no epoch in common", and the follower emptied its whole
    /// log, acknowledged records included (see `tests/epoch_truncation.rs`).
    #[test]
    fn a_new_leader_without_a_batch_in_its_epoch_answers_an_older_epoch_it_holds() {
        let (_sim, shared) = shared();
        let p = crate::broker::testing::partition(&shared, "t");
        p.lock().set_leader_epoch(1).unwrap();
        crate::broker::testing::append(&p);
        crate::broker::testing::append(&p);
        // Elected in epoch 3 (epoch 2 was another broker's): nothing
        // appended yet, the epoch begun as the replica manager does.
        p.lock().begin_epoch(3).unwrap();
        let next = p.lock().next_offset();
        assert_eq!(next, 2);
        let mut state = ReaderState::default();
        let mut frame = Vec::new();
        protocol::offsets_for_leader_epoch_request(&mut frame, 1, "t", 0, Some(3), 2);
        send(&shared, &frame, &mut state);
        let got = answers(&state.answer);
        assert_eq!(got[0].1, ErrorCode::None);
        let end = protocol::decode_epoch_end(&mut Reader::new(&got[0].2)).unwrap();
        assert_eq!(
            end,
            Some((1, next)),
            "epoch 2 is not in this log: epoch 1 is the largest below it, and it ends at the log's end"
        );
    }

    #[test]
    fn create_topic_answers_the_count_and_whether_it_existed() {
        let (_sim, shared) = shared();
        let mut state = ReaderState::default();
        let mut frame = Vec::new();
        protocol::create_topic_request(&mut frame, 1, "t", 3);
        send(&shared, &frame, &mut state);
        protocol::create_topic_request(&mut frame, 2, "t", 5);
        send(&shared, &frame, &mut state);
        let got = answers(&state.answer);
        assert_eq!(
            (got[0].1, got[1].1),
            (ErrorCode::None, ErrorCode::TopicExists)
        );
        for (_, _, body) in got {
            assert_eq!(Reader::new(&body).u32("partitions").unwrap(), 3);
        }
    }

    #[test]
    fn metadata_and_list_offsets_see_only_visible_records() {
        let (_sim, shared) = shared();
        let mut state = ReaderState::default();
        send(
            &shared,
            &produce_frame(1, protocol::ACKS_LEADER, "t", 0),
            &mut state,
        );
        let mut out = Vec::new();
        metadata(
            &shared,
            None,
            &mut out,
            2,
            &["t".to_string(), "none".to_string()],
        );
        list_offsets(&shared, &mut out, 3, "t", 0, protocol::LATEST);
        let got = answers(&out);
        let mut r = Reader::new(&got[0].2);
        let topics = protocol::decode_metadata_response(&mut r).unwrap();
        assert_eq!(topics[0].partitions, [(0, 0)], "appended, not yet flushed");
        assert_eq!(topics[1].error, ErrorCode::UnknownTopic);
        assert_eq!(Reader::new(&got[1].2).i64("offset").unwrap(), 0);
    }
}
