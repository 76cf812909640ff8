//! The listener: accepts connections, at most `--max-connections` at once
//! (native and Kafka together), and serves each on a thread of its own
//! ([`super::connection`], [`super::kafka`]).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::shared::Shared;
use super::sniff::Protocol;
use crate::net::Stream;
use crate::sync::lock;

/// The next connection's id.
static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

/// Accepts connections until the broker stops; returns the threads of those
/// still being served, for the shutdown to wait on.
pub(super) fn accept_loop<F>(
    shared: &Arc<Shared>,
    listener: &TcpListener,
    serve: F,
) -> anyhow::Result<Vec<JoinHandle<()>>>
where
    F: Fn(&Arc<Shared>, Stream, SocketAddr, Option<String>) + Clone + Send + 'static,
{
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stopping() {
        if !wait_for_peer(listener)? {
            continue;
        }
        let (stream, peer) = match listener.accept() {
            Ok(s) => s,
            Err(e) => {
                shared.log_peer(format_args!("accept failed: {e}"));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        threads.retain(|t| !t.is_finished());
        if let Some(full) = full(shared) {
            shared.log_peer(format_args!("refused {peer}: {full}"));
            drop(stream);
            continue;
        }
        // Unique over the process's listeners: it keys `shared.sockets`.
        let id = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = spawn_connection(shared, stream, peer, id, serve.clone()) {
            threads.push(t);
        }
    }
    Ok(threads)
}

/// Accepts connections on `listener` on a thread of its own (the Kafka
/// listener), until the broker stops; the thread returns the connections'
/// threads, for the shutdown to wait on.
pub(super) fn spawn_accept<F>(
    shared: &Arc<Shared>,
    listener: TcpListener,
    serve: F,
) -> std::io::Result<JoinHandle<Vec<JoinHandle<()>>>>
where
    F: Fn(&Arc<Shared>, Stream, SocketAddr, Option<String>) + Clone + Send + 'static,
{
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("kafka-accept".into())
        .spawn(move || match accept_loop(&shared, &listener, serve) {
            Ok(threads) => threads,
            Err(e) => {
                shared.log(format_args!("the Kafka listener failed: {e}"));
                Vec::new()
            }
        })
}

/// Serves a connection in the protocol its first request speaks
/// ([`super::sniff`]): klog's or Kafka's, `home` (the listener's own)
/// unless plainly the other. A peer that sends nothing
/// within the idle timeout is closed, as is one that sends part of a
/// request header and then nothing for the request timeout.
pub(super) fn serve_either(
    shared: &Arc<Shared>,
    (kafka, home): (&Arc<super::kafka::KafkaSide>, Protocol),
    stream: Stream,
    peer: SocketAddr,
    principal: Option<String>,
) {
    use super::sniff::{first_bytes, protocol_of};
    let idle = Duration::from_millis(shared.config.idle_timeout_ms.max(1));
    let request = Duration::from_millis(shared.config.request_timeout_ms.max(1));
    match first_bytes(&stream, idle, request) {
        Ok(Some(first)) => match protocol_of(&first, home) {
            Protocol::Klog => {
                let coordinators =
                    Arc::clone(kafka) as Arc<dyn super::connection::txn::Coordinators>;
                super::connection::serve(shared, stream, (peer, principal), coordinators)
            }
            Protocol::Kafka => kafka.serve(shared, stream, peer, principal),
        },
        Ok(None) => {}
        Err(e) => shared.log_peer(format_args!("{peer}: {e}")),
    }
}

/// Why no further connection is served now, if none is: `--max-connections`
/// are, or all the open-file limit leaves room for.
fn full(shared: &Shared) -> Option<String> {
    let serving = shared.connections.load(Ordering::Relaxed);
    let max = shared.config.connections_max;
    if serving >= max {
        return Some(format!(
            "{max} connections is the maximum (--max-connections)"
        ));
    }
    let room = shared.connections_room();
    (serving >= room).then(|| {
        format!(
            "{room} connections is all the open-file limit leaves room for beside the partitions \
             (ulimit -n: {}; raise it for more)",
            crate::limits::open_files_max()
        )
    })
}

/// Waits a little for a peer to connect (false: none yet), so that the
/// loop notices a stop without a connection to wake it.
pub(super) fn wait_for_peer(listener: &TcpListener) -> anyhow::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(200u16)) {
        Ok(0) => Ok(false),
        Ok(_) => Ok(true),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Serves a connection on a thread of its own. Its socket is registered
/// while it lives, so that a shutdown can stop its reader.
fn spawn_connection<F>(
    shared: &Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    serve: F,
) -> Option<JoinHandle<()>>
where
    F: Fn(&Arc<Shared>, Stream, SocketAddr, Option<String>) + Send + 'static,
{
    if let Ok(clone) = stream.try_clone() {
        lock(&shared.sockets).insert(id, clone);
    }
    shared.connections.fetch_add(1, Ordering::Relaxed);
    let conn_shared = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name(format!("conn-{id}"))
        .spawn(move || {
            if let Some((stream, principal, pump)) = secure(&conn_shared, stream, peer) {
                serve(&conn_shared, stream, peer, principal);
                drop(pump.map(|p| p.join()));
            }
            lock(&conn_shared.sockets).remove(&id);
            conn_shared.connections.fetch_sub(1, Ordering::Relaxed);
        });
    match spawned {
        Ok(t) => Some(t),
        Err(e) => {
            shared.log_peer(format_args!("cannot serve {peer}: {e}"));
            lock(&shared.sockets).remove(&id);
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }
}

/// The connection as the broker serves it: over TLS when the broker has
/// it (the handshake done here, on the connection's own thread), with the
/// client certificate's principal and the TLS pump's thread; `None` when
/// the handshake failed (said, throttled).
fn secure(
    shared: &Shared,
    tcp: TcpStream,
    peer: SocketAddr,
) -> Option<(Stream, Option<String>, Option<JoinHandle<()>>)> {
    let Some(tls) = &shared.config.security.tls else {
        return Some((Stream::Tcp(tcp), None, None));
    };
    let stall = Duration::from_millis(shared.config.request_timeout_ms.max(1));
    match tls.accept(tcp, stall) {
        Ok(accepted) => Some((accepted.stream, accepted.principal, Some(accepted.pump))),
        Err(e) => {
            shared.log_peer(format_args!("{peer}: TLS handshake failed: {e}"));
            None
        }
    }
}
