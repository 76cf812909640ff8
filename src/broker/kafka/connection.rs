//! One Kafka client's connection: frames in, each request handled and
//! answered before the next is read (Kafka's own order), answers out.
//! A request that does not decode closes the connection, as Kafka's
//! broker does; an ApiVersions request of a version it does not know is
//! answered in the v0 shape with error 35, so that the client retries
//! with one it does.

use crate::net::Stream;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::handlers::{self, ConnState, Unanswered};
use super::Kafka;
use crate::broker::auth::Session;
use crate::broker::connection::frames::{FrameError, FrameReader};
use crate::broker::send::send_slice;
use crate::broker::shared::Shared;
use crate::kafka::api_key;
use crate::kafka::request::{decode_request, RequestError};
use crate::storage::log::FileSlice;

/// The connection's frames, read within the broker's bounds (its socket's
/// write timeout set too).
fn frames<'a>(shared: &'a Shared, stream: &'a Stream) -> FrameReader<'a> {
    let _ = stream.set_nodelay(true);
    let timeout = Duration::from_millis(shared.config.request_timeout_ms.max(1));
    let _ = stream.set_write_timeout(Some(timeout));
    crate::broker::connection::frame_reader(shared, stream, timeout).kafka()
}

/// Serves one Kafka connection until the peer closes it, it breaks the
/// protocol, or the broker stops.
pub(super) fn serve(
    shared: &Arc<Shared>,
    kafka: &Kafka,
    stream: Stream,
    peer: SocketAddr,
    principal: Option<String>,
) {
    let mut reader = frames(shared, &stream);
    let mut state = ConnState {
        session: Some(Session::new(shared, principal)),
        ..ConnState::default()
    };
    let mut unanswered: Vec<Unanswered> = Vec::new();
    loop {
        // Produces read together are appended together and answered in
        // order once no request is left in the buffer: their appends
        // share the flusher's next fsync. Any other request waits for
        // the answers before it.
        let held = unanswered.len() >= UNANSWERED_MAX;
        if !unanswered.is_empty() && (held || !reader.has_frame()) {
            if let Err(e) = answer_produces(&stream, &mut unanswered, &mut state.out) {
                return broken(shared, peer, &e);
            }
        }
        reader.set_bytes_max(bytes_max(shared, &state));
        let body = match reader.next() {
            Ok(body) => body,
            Err(e) => {
                let _ = answer_produces(&stream, &mut unanswered, &mut state.out);
                return end(shared, e, peer);
            }
        };
        state.out.clear();
        // Any other request waits for the produces' answers, which leave
        // before it is handled: a fetch's wait or a join's rebalance must
        // not hold them up.
        if !unanswered.is_empty() && api_key_of(body) != Some(api_key::PRODUCE) {
            if let Err(e) = answer_produces(&stream, &mut unanswered, &mut state.out) {
                return broken(shared, peer, &e);
            }
        }
        match answer(shared, kafka, body, peer, &mut state) {
            Err(why) => {
                let _ = answer_produces(&stream, &mut unanswered, &mut state.out);
                shared.log_peer(format_args!("{peer}: closing the Kafka connection: {why}"));
                return;
            }
            Ok(Some(produce)) => {
                unanswered.push(produce);
                shrink(&mut state);
                continue;
            }
            Ok(None) => {}
        }
        if let Some(why) = state.failed_unanswered.take() {
            let _ = answer_produces(&stream, &mut unanswered, &mut state.out);
            shared.log_peer(format_args!("{peer}: closing the Kafka connection: {why}"));
            return;
        }
        let written = write_answer(&stream, &state.out, &mut state.sends);
        state.held.clear();
        if let Err(e) = written {
            return broken(shared, peer, &e);
        }
        if closing(shared, peer, &mut state) {
            return;
        }
        shrink(&mut state);
    }
}

/// Whether the connection closes after the answer just written (a
/// refused SASL login), said.
fn closing(shared: &Shared, peer: SocketAddr, state: &mut ConnState<'_>) -> bool {
    let Some(why) = state.closing.take() else {
        return false;
    };
    shared.log_peer(format_args!("{peer}: closing the Kafka connection: {why}"));
    true
}

/// Why a request may not be served before the client has logged in (as
/// Kafka's broker, the connection then closes): only ApiVersions and
/// SASL's own requests are.
fn unauthenticated(state: &ConnState<'_>, body: &[u8]) -> Option<String> {
    if state.session.as_ref().is_none_or(|s| s.ready()) {
        return None;
    }
    let key = api_key_of(body)?;
    let allowed = [
        api_key::API_VERSIONS,
        api_key::SASL_HANDSHAKE,
        api_key::SASL_AUTHENTICATE,
    ];
    (!allowed.contains(&key)).then(|| {
        format!(
            "a {} request before SASL authentication",
            crate::kafka::api_name(key)
        )
    })
}

/// The largest request the connection may send now (see the klog
/// listener's).
fn bytes_max(shared: &Shared, state: &ConnState<'_>) -> u32 {
    match state.session.as_ref().is_some_and(|s| !s.ready()) {
        true => crate::broker::connection::UNAUTHENTICATED_BYTES_MAX
            .min(shared.config.request_bytes_max),
        false => shared.config.request_bytes_max,
    }
}

/// A large request's or answer's buffers go back after it, on every path;
/// small ones are kept.
fn shrink(state: &mut ConnState<'_>) {
    crate::broker::shrink(&mut state.out);
    crate::broker::shrink(&mut state.scratch);
}

/// Writes an answer: `out`, with each of `sends` (a segment's byte range,
/// and where in `out` it goes) sent from its file with `sendfile` in
/// between; `sends` is emptied either way.
fn write_answer(
    stream: &Stream,
    out: &[u8],
    sends: &mut Vec<(usize, FileSlice)>,
) -> std::io::Result<()> {
    let mut written = 0;
    for (at, slice) in sends.drain(..) {
        (&*stream).write_all(&out[written..at])?;
        send_slice(stream, &slice)?;
        written = at;
    }
    (&*stream).write_all(&out[written..])
}

/// The API key a request frame's body starts with.
fn api_key_of(body: &[u8]) -> Option<i16> {
    Some(i16::from_be_bytes(body.get(..2)?.try_into().ok()?))
}

/// Produces appended together before their answers leave, at most.
const UNANSWERED_MAX: usize = 64;

/// Answers the produces appended and not yet answered, in order, with one
/// write.
fn answer_produces(
    stream: &Stream,
    unanswered: &mut Vec<Unanswered>,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    if unanswered.is_empty() {
        return Ok(());
    }
    out.clear();
    for u in unanswered.drain(..) {
        handlers::answer_produce(u, out);
    }
    let sent = (&*stream).write_all(out);
    out.clear();
    crate::broker::shrink(out);
    sent
}

/// The peer stopped reading: say so unless it simply went away.
fn broken(shared: &Shared, peer: SocketAddr, e: &std::io::Error) {
    if !matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
    ) {
        shared.log_peer(format_args!("{peer}: cannot send a Kafka response: {e}"));
    }
}

/// Decodes a request and writes its answer in `state.out`, or returns a
/// produce whose answer waits (none at all for acks=0); an error ends the
/// connection.
fn answer<'s>(
    shared: &'s Arc<Shared>,
    kafka: &Kafka,
    body: &[u8],
    peer: SocketAddr,
    state: &mut ConnState<'s>,
) -> Result<Option<Unanswered>, String> {
    if let Some(why) = unauthenticated(state, body) {
        return Err(why);
    }
    match decode_request(body) {
        Ok((header, request)) => {
            let api = crate::kafka::api_name(header.api_key);
            let _timer = shared.metrics.request("kafka", api);
            Ok(handlers::handle(
                shared, kafka, &header, request, peer, state,
            ))
        }
        Err(RequestError::Unsupported {
            api_key: api_key::API_VERSIONS,
            correlation_id,
            ..
        }) => {
            crate::kafka::response::api_versions_unsupported(&mut state.out, correlation_id);
            Ok(None)
        }
        Err(RequestError::Unsupported {
            api_key,
            api_version,
            ..
        }) => Err(format!(
            "API {api_key} version {api_version} is not supported (see ApiVersions)"
        )),
        Err(RequestError::Invalid { error, .. }) => Err(format!("invalid request: {error}")),
    }
}

/// Ends the connection over a frame that could not be read, saying why.
fn end(shared: &Shared, e: FrameError, peer: SocketAddr) {
    let why = match e {
        FrameError::Closed | FrameError::Stopped => return,
        FrameError::Io(e) => {
            if matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ) {
                return;
            }
            e.to_string()
        }
        FrameError::Garbage(why) => why,
        FrameError::TooLarge(len, _) => crate::broker::connection::too_large(shared, len),
        FrameError::Idle => format!(
            "idle for {} ms (--idle-timeout)",
            shared.config.idle_timeout_ms
        ),
        FrameError::NoMemory => format!(
            "the broker's request memory (--max-queued-request-bytes, {} bytes) stayed full for the request timeout",
            shared.config.queued_request_bytes_max
        ),
        FrameError::Timeout => format!(
            "a frame was not completed within the request timeout of {} ms",
            shared.config.request_timeout_ms
        ),
    };
    shared.log_peer(format_args!("{peer}: closing the Kafka connection: {why}"));
}
