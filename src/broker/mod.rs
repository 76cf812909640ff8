//! `klog-broker`'s engine: the partitions of a data directory served over
//! TCP with the pull protocol ([`crate::protocol`]).
//!
//! # Threads
//!
//! ```text
//! accept ──▶ per connection: reader ──(bounded queue)──▶ writer ──▶ socket
//!                              │ appends under the partition's lock   │ sendfile from the segment
//!                              ▼                                      ▲
//!                           flushers (group commit, up to 4 in parallel) ── wake ── the waiters
//!                           retention (every --retention-check-interval)      of the flushed partition
//!                           scrub (every --scrub-interval, paced by --scrub-rate)
//! ```
//!
//! A connection's reader decodes requests in order and does the cheap work
//! at once: a produce is appended to its partition under that partition's
//! mutex (appends to one partition are serialised; other partitions and all
//! fetches go on). An answer that needs no wait, while nothing before it
//! waits, is written by the reader itself, together with the others of the
//! requests it read in one go. Any other answer goes to the connection's
//! queue, which holds at most `--max-in-flight` entries: when it is full
//! the reader stops reading, and TCP pushes back on the client. The writer
//! answers the queue in order: a ready answer is written; an `acks=all`
//! answer waits until the flusher has made its records durable; a fetch is
//! evaluated when its turn comes and, with nothing to send, waits up to its
//! `wait_ms_max` for records to become visible. Fetched records go from the
//! segment file to the socket with `sendfile`: the broker never copies them
//! through user space, and the partition's lock is held only to find the
//! byte range.
//!
//! A partition gathers its appends in memory (up to 256 KiB) and writes
//! them to its segment file together: before the reader sends any answer
//! about them, before a flush, and when the gathered bytes fill up. So
//! `acks=1` still means "in the file" (the page cache, which survives the
//! broker's death), and a write syscall carries many requests.
//!
//! # Durability and visibility
//!
//! The flusher fsyncs partitions with unflushed appends outside their locks
//! and then exposes what it synced: consumers see a record only once it is
//! durable (the paper: "exposed only after it has been flushed"), and only
//! the fetches and acks=all answers waiting on that partition are woken.
//! Different partitions are fsynced in parallel by a small pool (at most
//! 4 threads, grown only while that many partitions wait at once); one
//! partition is flushed by one thread at a time. Without a flush policy it
//! flushes continuously: while one fsync runs, appends accumulate for the
//! next, so every fsync commits a group; a partition's flushes begin at
//! least 3 ms apart unless an `acks=all` request waits. With
//! `--flush-messages N` or `--flush-interval T` it waits for N records or T
//! time, unless an `acks=all` request is waiting. `acks=1` answers after the
//! append, `acks=0` never answers.
//!
//! # Faults
//!
//! A write that fails (a full disk) undoes the appends gathered with it:
//! their answers check each append's fate ([`crate::storage::log::Log::fate`]), so
//! an acks=1 connection whose records were undone closes without answers,
//! an acks=all request gets `disk_full`, and later appends get `disk_full`
//! until there is room. A failed fsync stops the partition: acks=all
//! waiters and produces get `storage_error`, and a restart recovers it. A
//! partition whose damage is not a torn tail is offline from the start
//! (`storage_error` naming `klog-recover`, metadata offsets
//! [`crate::protocol::OFFLINE`]); the others serve.
//!
//! # Shutdown
//!
//! On SIGTERM or SIGINT the broker stops accepting, stops reading requests,
//! lets every writer answer what its reader had taken (waiting fetches end
//! at once with what there is), flushes every partition, and closes each log
//! with its clean-shutdown marker. After `kill -9`, the next start recovers
//! every log before listening.
//!
//! # Rooms
//!
//! - `shared`: the partitions served and the state every thread shares
//! - `listener`: accepts connections and gives each a thread
//! - `connection`: a connection's reader (frames in, requests handled) and
//!   writer (answers out, fetched records sent with `sendfile`)
//! - `flusher`: group commits, and what they make visible
//! - `watch`: those who wait for a partition's records, woken by its flushes
//! - `retention`: deletes the segments retention lets go
//! - `scrub`: reads every log back, CRCs checked, and heals the damage
//!   it finds in replicas
//! - `lease`: renews this broker's registration on a thread of its own
//! - `replica`: replication's roles, elections, ISR and high watermark

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::coord::BrokerInfo;
use crate::limits;
use crate::storage::lock::DirLock;
use crate::storage::log::LogConfig;
use crate::storage::spare::Spares;
use crate::storage::store::Store;
use crate::sync::lock;
use shared::Shared;

mod appended;
pub mod auth;
mod cleaner;
mod connection;
mod flusher;
mod kafka;
mod lease;
mod listener;
mod markers;
mod memory;
pub(crate) mod metrics;
mod offsets;
mod producer_ids;
mod replica;
mod retention;
mod scrape;
mod scrub;
mod send;
mod shared;
mod sniff;
mod topic_configs;
mod topic_delete;
mod topic_grow;
use sniff::Protocol;
#[cfg(test)]
mod testing;
mod watch;

pub use cleaner::CleanerConfig;

/// How a broker runs.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// The data directory.
    pub data_dir: PathBuf,
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: String,
    /// Address of the Kafka listener (`--kafka-listen`), if any.
    pub kafka_listen: Option<String>,
    /// Where to serve metrics for Prometheus (`GET /metrics`), if anywhere.
    pub metrics_listen: Option<String>,
    /// `host:port` Kafka clients are told to connect to (default: the
    /// Kafka listener's own address).
    pub kafka_advertised: Option<String>,
    /// Partitions of a topic created on first produce.
    pub partitions_default: u32,
    /// Whether a topic is created when a client first produces to it or
    /// asks for its metadata (Kafka's `auto.create.topics.enable`); a
    /// create that names its partition count is made either way.
    pub auto_create_topics: bool,
    /// Partition directories the data directory may hold, counted on disk
    /// (a topic whose creation would pass it is refused).
    pub partitions_max: usize,
    /// Each partition's log: segments, indexes, retention, record limit.
    pub log: LogConfig,
    /// Give new segments files zeroed and synced ahead
    /// (`--preallocate`, [`crate::storage::spare`]): spares of the size of
    /// `log.segment_bytes`.
    pub preallocate: bool,
    /// Flush after this many records (`None`: continuously).
    pub flush_messages: Option<u64>,
    /// Flush when the oldest unflushed record is this old.
    pub flush_interval_ms: Option<u64>,
    /// How often retention runs.
    pub retention_check_interval_ms: u64,
    /// How the log cleaner runs (compacted topics).
    pub cleaner: CleanerConfig,
    /// How long a partition keeps an idempotent producer it has had no
    /// batch from ([`crate::storage::producers`]).
    pub producer_id_expiration_ms: u64,
    /// How often each partition's log is read back whole, CRCs checked
    /// (`None`: never); the first time soon after it opens.
    pub scrub_interval: Option<std::time::Duration>,
    /// Bytes a second a scrub reads, at most.
    pub scrub_rate_bytes: u64,
    /// Largest request frame.
    pub request_bytes_max: u32,
    /// Request bytes held in memory at once, over all connections (at
    /// least `request_bytes_max`, or the largest request could never be
    /// read).
    pub queued_request_bytes_max: u64,
    /// Connections served at once.
    pub connections_max: usize,
    /// Requests of one connection whose answers wait (acks=all, fetches).
    pub in_flight_max: usize,
    /// Time a peer has to finish a frame it started.
    pub request_timeout_ms: u64,
    /// Time a connection may stay idle between requests before it is closed.
    pub idle_timeout_ms: u64,
    /// The registry to join, if any.
    pub registry: Option<PathBuf>,
    /// Replicas of each partition of the topics this broker places (1: a
    /// single copy; more need a registry).
    pub replication_factor: u32,
    /// Partitions of the offsets topic, when this broker creates it.
    pub offsets_topic_partitions: u32,
    /// Replicas of each partition of the offsets topic, when this broker
    /// creates it (at most the live brokers).
    pub offsets_topic_replication_factor: u32,
    /// acks=all is refused while a partition's ISR has fewer members.
    pub min_insync_replicas: u32,
    /// A follower not caught up for this long leaves the ISR.
    pub replica_lag_time: std::time::Duration,
    /// The broker's session with the registry: silent (stopped) this long,
    /// it is taken for dead and its partitions get new leaders.
    pub session_timeout: std::time::Duration,
    /// Print no log lines (a benchmark's own broker).
    pub quiet: bool,
    /// TLS and SASL on both listeners.
    pub security: auth::Security,
    /// The file system the data directory is on: the real one, or a
    /// simulated one whose power a test can cut.
    pub vfs: Arc<dyn crate::storage::fs::Vfs>,
}

impl BrokerConfig {
    /// Defaults for everything but the data directory and address.
    pub fn new(data_dir: impl Into<PathBuf>, listen: impl Into<String>) -> BrokerConfig {
        BrokerConfig {
            data_dir: data_dir.into(),
            listen: listen.into(),
            kafka_listen: None,
            metrics_listen: None,
            kafka_advertised: None,
            partitions_default: 1,
            auto_create_topics: true,
            security: auth::Security::default(),
            partitions_max: limits::BROKER_PARTITIONS_MAX,
            log: LogConfig::default(),
            preallocate: false,
            flush_messages: None,
            flush_interval_ms: None,
            retention_check_interval_ms: 5 * 60 * 1000,
            cleaner: CleanerConfig::default(),
            producer_id_expiration_ms: 86_400_000,
            scrub_interval: Some(std::time::Duration::from_secs(24 * 3600)),
            scrub_rate_bytes: 64 << 20,
            request_bytes_max: limits::REQUEST_BYTES_MAX_DEFAULT,
            queued_request_bytes_max: limits::QUEUED_REQUEST_BYTES_MAX_DEFAULT,
            connections_max: limits::CONNECTIONS_MAX_DEFAULT,
            in_flight_max: limits::IN_FLIGHT_MAX_DEFAULT,
            request_timeout_ms: limits::REQUEST_TIMEOUT_MS_DEFAULT,
            idle_timeout_ms: limits::IDLE_TIMEOUT_MS_DEFAULT,
            registry: None,
            replication_factor: 1,
            offsets_topic_partitions: 8,
            offsets_topic_replication_factor: 3,
            min_insync_replicas: 1,
            replica_lag_time: std::time::Duration::from_secs(10),
            session_timeout: crate::coord::SESSION_TIMEOUT,
            quiet: false,
            vfs: Arc::new(crate::storage::fs::RealFs),
        }
    }
}

/// Gives back a buffer's room when it holds more than a connection keeps
/// idle (64 KiB); an empty buffer is left as it is otherwise.
pub(crate) fn shrink(buf: &mut Vec<u8>) {
    if buf.capacity() > IDLE_BUFFER_BYTES_MAX {
        *buf = Vec::new();
    }
}

/// Room a connection's buffer keeps between requests, at most.
const IDLE_BUFFER_BYTES_MAX: usize = 64 * 1024;

/// A running broker's handle: its address, and a way to stop it.
#[derive(Debug, Clone)]
pub struct BrokerHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
    kafka_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
}

impl BrokerHandle {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address its Kafka listener listens on, if it has one.
    pub fn kafka_addr(&self) -> Option<SocketAddr> {
        self.kafka_addr
    }

    /// The address it serves metrics on, if it does.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Asks it to shut down cleanly.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.dirty_changed.notify_all();
        self.shared.wake_all_waiters();
    }
}

/// A broker: its partitions opened (and recovered) and its socket bound.
#[derive(Debug)]
pub struct Broker {
    shared: Arc<Shared>,
    listener: TcpListener,
    /// The Kafka listener (`--kafka-listen`), if any.
    kafka_listener: Option<TcpListener>,
    /// The metrics listener (`--metrics-listen`), if any.
    metrics_listener: Option<TcpListener>,
    /// What Kafka clients of either listener share.
    kafka: Arc<kafka::KafkaSide>,
    /// The data directory's lock, held until the broker is dropped: one
    /// broker per data directory (none on a file system without locks).
    _data_lock: Option<DirLock>,
}

impl Broker {
    /// Opens every partition of the data directory (recovering any that
    /// was not closed cleanly) and binds the listening socket.
    pub fn open(mut config: BrokerConfig) -> anyhow::Result<Broker> {
        use anyhow::Context;
        config.log.validate()?;
        let store = Store::with_vfs(&config.data_dir, Arc::clone(&config.vfs));
        let data_lock = take_data_dir(&store, &mut config)?;
        let listener = TcpListener::bind(&config.listen)
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let kafka_listener = match &config.kafka_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .with_context(|| format!("cannot listen for Kafka clients on {addr}"))?,
            ),
            None => None,
        };
        let metrics_listener = match &config.metrics_listen {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .with_context(|| format!("cannot serve metrics on {addr}"))?,
            ),
            None => None,
        };
        // Kafka clients reach either listener (`sniff`); they are told the
        // Kafka listener's address, else this one's.
        let kafka_addr = match &kafka_listener {
            Some(l) => kafka::advertised(&config, l.local_addr()?, true)?,
            None => kafka::advertised(&config, listener.local_addr()?, false)?,
        };
        let registry = match &config.registry {
            Some(dir) => Some(
                crate::coord::open(dir, config.session_timeout)
                    .with_context(|| format!("cannot open the registry {}", dir.display()))?,
            ),
            None => None,
        };
        let broker_id = stable_broker_id(&*config.vfs, &config.data_dir)?;
        let shared = Shared::new(config, store, registry, broker_id).into_arc();
        // The replicas of placed topics open before this broker registers:
        // one found cut at open (healed, or its tail lost) leaves the ISR
        // first, so that no peer ever sees it alive and in sync, and counts
        // on it as whole (to cut its own damage: `scrub`). A topic not
        // placed yet opens after: placing it counts the live brokers.
        topic_delete::at_start(&shared)?;
        // Before any topic opens: its retention may be set at runtime.
        if let Err(e) = topic_configs::refresh_broker(&shared) {
            shared.log(format_args!(
                "keeping every segment until the broker configs read: {e}"
            ));
        }
        open_existing_topics(&shared, true)?;
        replica::manager::leave_if_cut(&shared);
        register(&shared, listener.local_addr()?, kafka_addr.clone())?;
        open_existing_topics(&shared, false)?;
        shared.update_registry();
        Ok(Broker {
            shared,
            listener,
            kafka: Arc::new(kafka::KafkaSide::new(kafka_addr.clone())),
            kafka_listener,
            metrics_listener,
            _data_lock: data_lock,
        })
    }

    /// A handle to stop it and learn its address.
    pub fn handle(&self) -> std::io::Result<BrokerHandle> {
        Ok(BrokerHandle {
            shared: Arc::clone(&self.shared),
            addr: self.listener.local_addr()?,
            kafka_addr: match &self.kafka_listener {
                Some(l) => Some(l.local_addr()?),
                None => None,
            },
            metrics_addr: match &self.metrics_listener {
                Some(l) => Some(l.local_addr()?),
                None => None,
            },
        })
    }

    /// Serves until stopped (a handle's `stop`, or SIGTERM/SIGINT through
    /// [`crate::stop::STOP`]), then shuts down cleanly.
    pub fn run(self) -> anyhow::Result<()> {
        let shared = Arc::clone(&self.shared);
        let background: [(&str, Background); 9] = [
            ("flusher", |s| flusher::flusher(s)),
            ("retention", |s| retention::retention(s)),
            ("scrub", |s| scrub::scrub(s)),
            ("replica-manager", replica::manager::manage),
            ("session-watch", |s| replica::manager::watch_session(s)),
            ("lease", |s| lease::keep_lease(s)),
            ("acls", |s| auth::reload_acls(s)),
            ("topic-configs", |s| topic_configs::reload(s)),
            ("preallocate", |s| zero_spares(s)),
        ];
        let mut threads = cleaner::spawn(&shared)?;
        if let Some(listener) = self.metrics_listener {
            let shared = Arc::clone(&shared);
            let thread = std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || scrape::serve(&shared, &listener))?;
            threads.push(thread);
        }
        for (name, body) in background {
            let shared = Arc::clone(&shared);
            let thread = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || body(&shared))?;
            threads.push(thread);
        }
        if self.kafka_listener.is_some() || shared.registry.is_some() {
            self.kafka.start(&shared);
        }
        let serve = |home| {
            let side = Arc::clone(&self.kafka);
            move |shared: &Arc<Shared>, stream, peer, principal| {
                listener::serve_either(shared, (&side, home), stream, peer, principal);
            }
        };
        let kafka = match self.kafka_listener {
            Some(l) => Some(listener::spawn_accept(&shared, l, serve(Protocol::Kafka))?),
            None => None,
        };
        let mut connections =
            listener::accept_loop(&shared, &self.listener, serve(Protocol::Klog))?;
        if let Some(kafka) = kafka {
            connections.extend(kafka.join().unwrap_or_default());
        }
        // Members waiting in a Kafka join answer at once; their entries go.
        self.kafka.shutdown();
        // Stop reading requests; writers answer what was read.
        for socket in lock(&shared.sockets).values() {
            let _ = socket.shutdown(std::net::Shutdown::Read);
        }
        for c in connections {
            let _ = c.join();
        }
        shared.stop_background();
        for thread in threads {
            let _ = thread.join();
        }
        replica::follower::join_fetchers(&shared);
        // Partitions still marked unflushed are flushed by their close.
        lock(&shared.dirty).partitions.clear();
        shared.say_dropped(shared.peer_lines.dropped());
        shared.log(format_args!(
            "Appended {} batches with {} group-commit fsyncs",
            shared.appends.load(Ordering::Relaxed),
            shared.fsyncs.load(Ordering::Relaxed)
        ));
        close_partitions(&shared)
    }
}

/// The body of one of the broker's background threads.
type Background = fn(&Arc<Shared>);

/// Enters this broker in the registry, if there is one.
fn register(shared: &Shared, addr: SocketAddr, kafka: Option<(String, u16)>) -> anyhow::Result<()> {
    use anyhow::Context;
    let Some(registry) = &shared.registry else {
        return Ok(());
    };
    let info = BrokerInfo {
        id: shared.broker_id.clone(),
        host: addr.ip().to_string(),
        port: addr.port(),
        pid: std::process::id(),
        topics: BTreeMap::new(),
        kafka: kafka.map(|(host, port)| format!("{host}:{port}")),
        principal: shared.config.security.principal.clone(),
    };
    let entry = registry
        .register_broker(&info)
        .with_context(|| format!("cannot register in {}", registry.location()))?;
    *lock(&shared.lease) = entry.renewer();
    *lock(&shared.registered) = Some((Some(entry), info));
    Ok(())
}

/// Opens (and recovers) the partitions of the data directory's topics that
/// this broker serves and has not opened yet; with `placed`, only those of
/// topics the registry has placed.
/// Locks the data directory, before anything else is done, above all
/// before the broker registers: a second broker on it must not replace the
/// live one's registry entry. Then its spares (`--preallocate`) are this
/// broker's to keep.
fn take_data_dir(store: &Store, config: &mut BrokerConfig) -> anyhow::Result<Option<DirLock>> {
    use anyhow::Context;
    let data_lock = store.lock().with_context(|| {
        format!(
            "cannot serve the data directory {}",
            config.data_dir.display()
        )
    })?;
    if config.preallocate {
        let vfs = Arc::clone(&config.vfs);
        let spares = Spares::open(vfs, &config.data_dir, config.log.segment_bytes)?;
        config.log.spares = Some(spares);
    }
    Ok(data_lock)
}

/// Keeps a spare segment file ready (`--preallocate`) until the broker
/// stops.
fn zero_spares(shared: &Shared) {
    if let Some(spares) = &shared.config.log.spares {
        spares.run(|message| shared.log(message));
    }
}

fn open_existing_topics(shared: &Shared, placed: bool) -> anyhow::Result<()> {
    use anyhow::Context;
    let existing = shared.store.topics()?;
    for (topic, count) in existing {
        if shared.read_topics().contains_key(&topic) {
            continue;
        }
        if let (true, Some(registry)) = (placed, &shared.registry) {
            if registry.placement(&topic)?.is_none() {
                continue;
            }
        }
        if let Some(registry) = &shared.registry {
            // Being deleted (a marker that does not parse too): the
            // reloads delete this copy.
            if !matches!(
                crate::coord::topic_delete::get(&**registry, &topic),
                Ok(None)
            ) {
                continue;
            }
        }
        let (_, mut mine) = shared.placed_here(&topic, count, shared.config.replication_factor)?;
        if mine.len() as u32 > count {
            // Grown (CreatePartitions) while this broker was down; past its
            // limits, it serves the partitions it had (said), and the
            // reloads say why it does not grow.
            let grown = (shared.room_for(&topic, mine.len() as u32))
                .and_then(|()| shared.store.add_partitions(&topic, mine.len() as u32));
            if let Err(e) = grown {
                shared.log(format_args!("topic {topic} keeps {count} partitions: {e}"));
                mine.truncate(count as usize);
            }
        }
        let parts = shared
            .open_topic(&topic, &mine)
            .with_context(|| format!("cannot open topic {topic}"))?;
        shared.write_topics().insert(topic, parts);
    }
    Ok(())
}

/// Closes every partition's log with its clean-shutdown marker; a
/// partition some thread still holds is left to the next start's recovery.
fn close_partitions(shared: &Shared) -> anyhow::Result<()> {
    let mut result = Ok(());
    let topics = std::mem::take(&mut *shared.write_topics());
    for (topic, parts) in topics {
        for p in parts.into_iter().flatten() {
            let Ok(p) = Arc::try_unwrap(p) else {
                shared.log(format_args!(
                    "{topic}: partition still in use at shutdown; left to recovery"
                ));
                continue;
            };
            let log = p.log.into_inner().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = log.close() {
                shared.log(format_args!("cannot close {topic}-{}: {e}", p.partition));
                result = Err(e.into());
            }
        }
    }
    result
}

/// The broker's id, kept in `<data-dir>/broker-id` so that it survives
/// restarts (the registry places partitions by it).
fn stable_broker_id(
    vfs: &dyn crate::storage::fs::Vfs,
    data_dir: &std::path::Path,
) -> anyhow::Result<String> {
    use anyhow::Context;
    let path = data_dir.join("broker-id");
    if let Some(text) = crate::storage::fs::read_small(vfs, &path) {
        let id = text.trim().to_string();
        crate::storage::store::validate_topic(&id)
            .with_context(|| format!("{} holds no valid broker id", path.display()))?;
        return Ok(id);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id = new_broker_id(nanos);
    crate::storage::fs::write_atomic(vfs, data_dir, "broker-id", format!("{id}\n").as_bytes())?;
    Ok(id)
}

/// A new broker id: the time it was made, then 32 random bits, so that
/// brokers started in the same clock tick (a coarse clock, a script
/// starting several at once) never share one.
fn new_broker_id(nanos: u128) -> String {
    use ring::rand::SecureRandom;
    let mut salt = [0u8; 4];
    // Without the system's generator, the process id still tells apart
    // brokers of one host.
    if ring::rand::SystemRandom::new().fill(&mut salt).is_err() {
        salt = std::process::id().to_be_bytes();
    }
    format!("broker-{nanos:x}{:08x}", u32::from_be_bytes(salt))
}

#[cfg(test)]
mod tests {
    #[test]
    fn brokers_made_in_one_clock_tick_get_different_ids() {
        let ids: std::collections::BTreeSet<String> =
            (0..64).map(|_| super::new_broker_id(0x1234)).collect();
        assert_eq!(ids.len(), 64, "{ids:?}");
        assert!(ids.iter().all(|id| id.starts_with("broker-1234")));
    }
}
