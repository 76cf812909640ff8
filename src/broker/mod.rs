//! `klog-broker`'s engine: the partitions of a data directory served over
//! TCP with the pull protocol ([`crate::protocol`]).
//!
//! # Threads
//!
//! ```text
//! accept ──▶ per connection: reader ──(bounded queue)──▶ writer ──▶ socket
//!                              │ appends under the partition's lock   │ sendfile from the segment
//!                              ▼                                      ▲
//!                           flusher (group commit) ── notifies ── waiting fetches and acks=all
//!                           retention (every --retention-check-interval)
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
//! `max_wait_ms` for records to become visible. Fetched records go from the
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
//! durable (the paper: "exposed only after it has been flushed"). Without a
//! flush policy it flushes continuously: while one fsync runs, appends
//! accumulate for the next, so every fsync commits a group; passes are at
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

use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::limits;
use crate::protocol::ErrorCode;
use crate::storage::log::{Log, LogConfig, OpenOptions};
use crate::storage::record::DecodeError;
use crate::storage::store::Store;
use crate::sync::lock;

mod connection;

/// How a broker runs.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// The data directory.
    pub data_dir: PathBuf,
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: String,
    /// Partitions of a topic created on first produce.
    pub partitions_default: u32,
    /// Each partition's log: segments, indexes, retention, record limit.
    pub log: LogConfig,
    /// Flush after this many records (`None`: continuously).
    pub flush_messages: Option<u64>,
    /// Flush when the oldest unflushed record is this old.
    pub flush_interval_ms: Option<u64>,
    /// How often retention runs.
    pub retention_check_interval_ms: u64,
    /// Largest request frame.
    pub request_bytes_max: u32,
    /// Connections served at once.
    pub connections_max: usize,
    /// Requests of one connection whose answers wait (acks=all, fetches).
    pub in_flight_max: usize,
    /// Time a peer has to finish a frame it started.
    pub request_timeout_ms: u64,
    /// The registry to join, if any.
    pub registry: Option<PathBuf>,
    /// Print no log lines (a benchmark's own broker).
    pub quiet: bool,
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
            partitions_default: 1,
            log: LogConfig::default(),
            flush_messages: None,
            flush_interval_ms: None,
            retention_check_interval_ms: 5 * 60 * 1000,
            request_bytes_max: limits::REQUEST_BYTES_MAX_DEFAULT,
            connections_max: limits::CONNECTIONS_MAX_DEFAULT,
            in_flight_max: limits::IN_FLIGHT_MAX_DEFAULT,
            request_timeout_ms: limits::REQUEST_TIMEOUT_MS_DEFAULT,
            registry: None,
            quiet: false,
            vfs: Arc::new(crate::storage::fs::RealFs),
        }
    }
}

/// One partition served by the broker.
#[derive(Debug)]
struct Partition {
    topic: String,
    partition: u32,
    log: Mutex<Log>,
    /// One past the last durable (and so visible) record.
    flushed: AtomicU64,
    /// A failed fsync stopped the partition (see [`Log::fail`]).
    failed: AtomicBool,
}

impl Partition {
    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Wakes the flusher: partitions with unflushed appends, and whether an
/// `acks=all` request waits on each.
#[derive(Debug, Default)]
struct Dirty {
    /// By the partition's address (no allocation per append).
    partitions: HashMap<usize, (Arc<Partition>, bool)>,
}

impl Dirty {
    /// Marks `p` (urgently, for acks=all). Returns whether that is news
    /// for the flusher: an entry already there is seen on its next pass,
    /// so it is woken only for news (a syscall saved per append).
    fn mark(&mut self, p: &Arc<Partition>, urgent: bool) -> bool {
        let mut news = false;
        let entry = self.partitions.entry(Arc::as_ptr(p) as usize).or_insert_with(|| {
            news = true;
            (Arc::clone(p), false)
        });
        news |= urgent && !entry.1;
        entry.1 |= urgent;
        news
    }
}

/// What every thread shares.
#[derive(Debug)]
struct Shared {
    config: BrokerConfig,
    store: Store,
    /// Each topic's partitions, `None` for those placed on another broker.
    topics: RwLock<BTreeMap<String, Vec<Option<Arc<Partition>>>>>,
    /// This broker's id in the registry (stable across restarts).
    broker_id: String,
    registry: Option<crate::coord::registry::Registry>,
    /// Serialises topic creation.
    creating: Mutex<()>,
    dirty: Mutex<Dirty>,
    dirty_changed: Condvar,
    /// Bumped whenever records become visible; waiters re-check.
    visible: Mutex<u64>,
    visible_changed: Condvar,
    stop: AtomicBool,
    connections: AtomicUsize,
    /// Batches appended, and fsyncs that made them durable.
    appends: AtomicU64,
    fsyncs: AtomicU64,
    /// Clones of open sockets, to stop their readers at shutdown.
    sockets: Mutex<HashMap<u64, TcpStream>>,
    /// This broker's registry entry, rewritten when its topics change.
    registered: Mutex<Option<(crate::coord::registry::Ephemeral, crate::coord::registry::BrokerInfo)>>,
    /// Partitions that could not be opened (damaged), and why.
    offline: Mutex<BTreeMap<(String, u32), String>>,
}

impl Shared {
    /// Prints a line of the broker's log on stderr (unless `quiet`).
    fn log(&self, msg: std::fmt::Arguments<'_>) {
        if !self.config.quiet {
            eprintln!("% {msg}");
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || crate::stop::stopping()
    }

    fn partition(&self, topic: &str, partition: u32) -> std::result::Result<Arc<Partition>, (ErrorCode, String)> {
        let found = {
            let topics = self.topics.read().unwrap_or_else(|p| p.into_inner());
            // The common case, without copying the topic's partition list.
            if let Some(Some(Some(p))) = topics.get(topic).map(|parts| parts.get(partition as usize)) {
                return Ok(Arc::clone(p));
            }
            topics.get(topic).cloned()
        };
        let parts = match found {
            Some(parts) => parts,
            None => {
                // Another broker of the cluster may have created it.
                let placed = self.registry.as_ref().and_then(|r| r.placement(topic).ok().flatten());
                let Some(placement) = placed else {
                    return Err((ErrorCode::UnknownTopic, format!("topic {topic:?} does not exist")));
                };
                if let Err(e) = self.create_topic(topic, placement.brokers.len() as u32) {
                    return Err((error_code(&e), e.to_string()));
                }
                return self.partition(topic, partition);
            }
        };
        if let Some(why) = lock(&self.offline).get(&(topic.to_string(), partition)) {
            return Err((ErrorCode::StorageError, why.clone()));
        }
        match parts.get(partition as usize) {
            Some(Some(p)) => Ok(Arc::clone(p)),
            Some(None) => {
                let holder = self
                    .registry
                    .as_ref()
                    .and_then(|r| r.placement(topic).ok().flatten())
                    .and_then(|p| p.brokers.get(partition as usize).cloned())
                    .unwrap_or_else(|| "another broker".into());
                Err((
                    ErrorCode::PartitionElsewhere,
                    format!("partition {partition} of topic {topic:?} is served by broker {holder}, not this one"),
                ))
            }
            None => Err((
                ErrorCode::UnknownPartition,
                format!(
                    "partition {partition} of topic {topic:?} does not exist (it has {} partitions)",
                    parts.len()
                ),
            )),
        }
    }

    /// Which partitions of a topic of `count` this broker serves: all of
    /// them without a registry; with one, those placed on it (placing the
    /// topic over the live brokers first if nobody has).
    fn placed_here(&self, topic: &str, count: u32) -> Result<(u32, Vec<bool>)> {
        let Some(registry) = &self.registry else {
            return Ok((count, vec![true; count as usize]));
        };
        let live: Vec<String> = registry.brokers()?.into_iter().map(|b| b.id).collect();
        let placement = registry.place_topic(topic, count, &live)?;
        let mine = placement.brokers.iter().map(|b| *b == self.broker_id).collect();
        Ok((placement.brokers.len() as u32, mine))
    }

    /// Creates `topic` (or finds it); returns its partition count and
    /// whether it existed.
    fn create_topic(&self, topic: &str, partitions: u32) -> Result<(u32, bool)> {
        crate::storage::store::validate_topic(topic)?;
        let _creating = lock(&self.creating);
        if let Some(parts) = self.topics.read().unwrap_or_else(|p| p.into_inner()).get(topic) {
            return Ok((parts.len() as u32, true));
        }
        let (topics, partitions_held) = {
            let t = self.topics.read().unwrap_or_else(|p| p.into_inner());
            (t.len(), t.values().flatten().flatten().count())
        };
        if topics >= limits::TOPICS_MAX {
            return Err(Error::TooLarge {
                what: "topic count",
                size: topics as u64 + 1,
                limit: limits::TOPICS_MAX as u64,
            });
        }
        if partitions_held + partitions as usize > limits::BROKER_PARTITIONS_MAX {
            return Err(Error::TooLarge {
                what: "partition count of the broker",
                size: (partitions_held + partitions as usize) as u64,
                limit: limits::BROKER_PARTITIONS_MAX as u64,
            });
        }
        let count = match self.store.partition_count(topic) {
            Ok(n) => n,
            Err(_) => partitions,
        };
        let (count, mine) = self.placed_here(topic, count)?;
        let count = self.store.create_topic(topic, count)?;
        let opened = self.open_topic(topic, &mine)?;
        let held: Vec<u32> = (0..count).filter(|p| mine.get(*p as usize) == Some(&true)).collect();
        self.topics
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(topic.to_string(), opened);
        if held.len() as u32 == count {
            self.log(format_args!("Created topic {topic} with {count} partitions"));
        } else {
            self.log(format_args!(
                "Created topic {topic} with {count} partitions, serving {held:?}"
            ));
        }
        self.update_registry();
        Ok((count, false))
    }

    fn open_topic(&self, topic: &str, mine: &[bool]) -> Result<Vec<Option<Arc<Partition>>>> {
        let mut config = self.config.log.clone();
        config.visible_after_flush = true;
        config.write_buffer_bytes = WRITE_BUFFER_BYTES;
        config.flush_messages = None;
        config.flush_interval_ms = None;
        let options = OpenOptions {
            writable: true,
            lock: self.config.vfs.supports_locks(),
        };
        let mut parts = Vec::with_capacity(mine.len());
        for (p, &here) in mine.iter().enumerate() {
            let p = p as u32;
            if !here {
                parts.push(None);
                continue;
            }
            let log = match self.store.open_log(topic, p, config.clone(), options) {
                Ok(log) => log,
                Err(e @ Error::Damaged { .. }) => {
                    // The others keep serving; this one waits for klog-recover.
                    self.log(format_args!("{topic}-{p} is offline: {e}"));
                    lock(&self.offline).insert((topic.to_string(), p), e.to_string());
                    parts.push(None);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if log.recovery().changed() {
                let r = log.recovery();
                self.log(format_args!(
                    "Recovered {topic}-{p}: {} segments kept, next offset {}, {} quarantined, {} leftovers removed",
                    r.segments.len(),
                    log.next_offset(),
                    r.quarantined.len(),
                    r.removed.len()
                ));
            }
            parts.push(Some(Arc::new(Partition {
                topic: topic.to_string(),
                partition: p,
                flushed: AtomicU64::new(log.flushed_offset()),
                failed: AtomicBool::new(false),
                log: Mutex::new(log),
            })));
        }
        Ok(parts)
    }

    /// Marks a partition as having unflushed appends (`urgent`: an acks=all
    /// request waits for it).
    fn mark_dirty(&self, p: &Arc<Partition>, urgent: bool) {
        if lock(&self.dirty).mark(p, urgent) {
            self.dirty_changed.notify_one();
        }
    }

    fn notify_visible(&self) {
        *lock(&self.visible) += 1;
        self.visible_changed.notify_all();
    }

    /// The visibility generation, to pass to [`Shared::wait_visible`].
    fn visible_generation(&self) -> u64 {
        *lock(&self.visible)
    }

    /// Waits until records become visible after `generation`, or `deadline`.
    fn wait_visible(&self, generation: u64, deadline: Instant) {
        let mut g = lock(&self.visible);
        while *g == generation {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            // Wake now and then to notice a shutdown.
            let wait = left.min(Duration::from_millis(200));
            g = self
                .visible_changed
                .wait_timeout(g, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Rewrites this broker's registry entry with its topics.
    fn update_registry(&self) {
        let mut registered = lock(&self.registered);
        if let Some((entry, info)) = registered.as_mut() {
            let topics = self.topics.read().unwrap_or_else(|p| p.into_inner());
            info.topics = topics
                .iter()
                .map(|(t, parts)| {
                    let held = parts.iter().flatten().map(|p| p.partition).collect();
                    (t.clone(), held)
                })
                .collect();
            if let Err(e) = entry.update(info) {
                self.log(format_args!("cannot update the registry: {e}"));
            }
        }
    }

    /// Whether a partition this broker holds could not be opened.
    fn is_offline(&self, topic: &str, partition: u32) -> bool {
        lock(&self.offline).contains_key(&(topic.to_string(), partition))
    }

    fn all_partitions(&self) -> Vec<Arc<Partition>> {
        let topics = self.topics.read().unwrap_or_else(|p| p.into_inner());
        topics.values().flatten().flatten().cloned().collect()
    }
}

/// The error code and message a client gets for a library error.
fn error_code(e: &Error) -> ErrorCode {
    match e {
        Error::InvalidTopic { .. } => ErrorCode::InvalidTopic,
        Error::UnknownTopic { .. } => ErrorCode::UnknownTopic,
        Error::UnknownPartition { .. } => ErrorCode::UnknownPartition,
        Error::InvalidBatch(DecodeError::TooLarge { what: "record", .. }) | Error::TooLarge { what: "record", .. } => {
            ErrorCode::RecordTooLarge
        }
        Error::InvalidBatch(_) => ErrorCode::CorruptBatch,
        Error::DiskFull { .. } => ErrorCode::DiskFull,
        Error::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        Error::TooLarge { .. } => ErrorCode::LimitReached,
        Error::Config(_) => ErrorCode::InvalidRequest,
        _ => ErrorCode::StorageError,
    }
}

/// A running broker's handle: its address, and a way to stop it.
#[derive(Debug, Clone)]
pub struct BrokerHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl BrokerHandle {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Asks it to shut down cleanly.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.dirty_changed.notify_all();
        self.shared.visible_changed.notify_all();
    }
}

/// A broker: its partitions opened (and recovered) and its socket bound.
#[derive(Debug)]
pub struct Broker {
    shared: Arc<Shared>,
    listener: TcpListener,
}

impl Broker {
    /// Opens every partition of the data directory (recovering any that
    /// was not closed cleanly) and binds the listening socket.
    pub fn open(config: BrokerConfig) -> anyhow::Result<Broker> {
        use anyhow::Context;
        config.log.validate()?;
        let store = Store::with_vfs(&config.data_dir, Arc::clone(&config.vfs));
        config
            .vfs
            .create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create the data directory {}", config.data_dir.display()))?;
        let listener =
            TcpListener::bind(&config.listen).with_context(|| format!("cannot listen on {}", config.listen))?;
        let registry = match &config.registry {
            Some(dir) => Some(
                crate::coord::registry::Registry::open(dir)
                    .with_context(|| format!("cannot open the registry {}", dir.display()))?,
            ),
            None => None,
        };
        let broker_id = stable_broker_id(&*config.vfs, &config.data_dir)?;
        let shared = Arc::new(Shared {
            broker_id,
            registry,
            store,
            topics: RwLock::new(BTreeMap::new()),
            creating: Mutex::new(()),
            dirty: Mutex::new(Dirty::default()),
            dirty_changed: Condvar::new(),
            visible: Mutex::new(0),
            visible_changed: Condvar::new(),
            stop: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            appends: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            sockets: Mutex::new(HashMap::new()),
            registered: Mutex::new(None),
            offline: Mutex::new(BTreeMap::new()),
            config,
        });
        // Register first: placing a topic counts the live brokers.
        if let Some(registry) = &shared.registry {
            let addr = listener.local_addr()?;
            let info = crate::coord::registry::BrokerInfo {
                id: shared.broker_id.clone(),
                host: addr.ip().to_string(),
                port: addr.port(),
                pid: std::process::id(),
                topics: BTreeMap::new(),
            };
            let entry = registry
                .register_broker(&info)
                .with_context(|| format!("cannot register in {}", registry.dir().display()))?;
            *lock(&shared.registered) = Some((entry, info));
        }
        let existing = shared.store.topics()?;
        for (topic, count) in existing {
            let (_, mine) = shared.placed_here(&topic, count)?;
            let parts = shared
                .open_topic(&topic, &mine)
                .with_context(|| format!("cannot open topic {topic}"))?;
            shared
                .topics
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(topic, parts);
        }
        shared.update_registry();
        Ok(Broker { shared, listener })
    }

    /// A handle to stop it and learn its address.
    pub fn handle(&self) -> std::io::Result<BrokerHandle> {
        Ok(BrokerHandle {
            shared: Arc::clone(&self.shared),
            addr: self.listener.local_addr()?,
        })
    }

    /// Serves until stopped (a handle's `stop`, or SIGTERM/SIGINT through
    /// [`crate::stop::STOP`]), then shuts down cleanly.
    pub fn run(self) -> anyhow::Result<()> {
        let shared = Arc::clone(&self.shared);
        let flusher = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("flusher".into())
                .spawn(move || flusher(&shared))?
        };
        let retention = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("retention".into())
                .spawn(move || retention(&shared))?
        };
        let connections = self.accept_loop()?;
        // Stop reading requests; writers answer what was read.
        for socket in lock(&shared.sockets).values() {
            let _ = socket.shutdown(std::net::Shutdown::Read);
        }
        for c in connections {
            let _ = c.join();
        }
        shared.stop.store(true, Ordering::Relaxed);
        shared.dirty_changed.notify_all();
        let _ = flusher.join();
        let _ = retention.join();
        // Partitions still marked unflushed are flushed by their close.
        lock(&shared.dirty).partitions.clear();
        shared.log(format_args!(
            "Appended {} batches with {} group-commit fsyncs",
            shared.appends.load(Ordering::Relaxed),
            shared.fsyncs.load(Ordering::Relaxed)
        ));
        let mut result = Ok(());
        let topics = std::mem::take(&mut *shared.topics.write().unwrap_or_else(|p| p.into_inner()));
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

    fn accept_loop(&self) -> anyhow::Result<Vec<std::thread::JoinHandle<()>>> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let shared = &self.shared;
        let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
        let mut next_id = 0u64;
        while !shared.stopping() {
            let mut fds = [PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(200u16)) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let (stream, peer) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) => {
                    shared.log(format_args!("accept failed: {e}"));
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            threads.retain(|t| !t.is_finished());
            if shared.connections.load(Ordering::Relaxed) >= shared.config.connections_max {
                shared.log(format_args!(
                    "refused {peer}: {} connections is the maximum (--max-connections)",
                    shared.config.connections_max
                ));
                drop(stream);
                continue;
            }
            next_id += 1;
            let id = next_id;
            if let Ok(clone) = stream.try_clone() {
                lock(&shared.sockets).insert(id, clone);
            }
            shared.connections.fetch_add(1, Ordering::Relaxed);
            let conn_shared = Arc::clone(shared);
            let spawned = std::thread::Builder::new().name(format!("conn-{id}")).spawn(move || {
                connection::serve(&conn_shared, stream, peer);
                lock(&conn_shared.sockets).remove(&id);
                conn_shared.connections.fetch_sub(1, Ordering::Relaxed);
            });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    shared.log(format_args!("cannot serve {peer}: {e}"));
                    lock(&shared.sockets).remove(&id);
                    shared.connections.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        Ok(threads)
    }
}

/// The broker's id, kept in `<data-dir>/broker-id` so that it survives
/// restarts (the registry places partitions by it).
fn stable_broker_id(vfs: &dyn crate::storage::fs::Vfs, data_dir: &std::path::Path) -> anyhow::Result<String> {
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
    let id = format!("broker-{nanos:x}");
    crate::storage::fs::write_atomic(vfs, data_dir, "broker-id", format!("{id}\n").as_bytes())?;
    Ok(id)
}

/// The flusher: group commits of every partition with unflushed appends.
fn flusher(shared: &Shared) {
    let config = &shared.config;
    loop {
        let due: Vec<Arc<Partition>> = {
            let mut dirty = lock(&shared.dirty);
            loop {
                let due = take_due(&mut dirty, config, crate::clock::now_ms());
                if !due.is_empty() {
                    break due;
                }
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                // With a policy, look again as time passes.
                let wait = Duration::from_millis(config.flush_interval_ms.map_or(100, |t| t.clamp(1, 100)));
                dirty = shared
                    .dirty_changed
                    .wait_timeout(dirty, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        };
        let pass = Instant::now();
        for p in due {
            flush_partition(shared, &p);
        }
        shared.notify_visible();
        // A pass quicker than the commit window waits out the rest of it,
        // so that the next fsync commits a larger group: fewer fsyncs for
        // the same records, at the cost of at most a window of visibility
        // latency. An acks=all request waiting ends the wait at once: its
        // producer is blocked, and more records will not come sooner.
        let mut dirty = lock(&shared.dirty);
        loop {
            let left = GROUP_COMMIT_WINDOW.saturating_sub(pass.elapsed());
            let urgent = dirty.partitions.values().any(|(_, urgent)| *urgent);
            if left.is_zero() || urgent || shared.stop.load(Ordering::Relaxed) {
                break;
            }
            dirty = shared
                .dirty_changed
                .wait_timeout(dirty, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Appends a partition gathers before writing them to its segment file;
/// the connection writes them out sooner, before it acknowledges them.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// The shortest time between two flush passes.
const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(3);

/// Takes out of `dirty` the partitions to flush now. Entries that an
/// earlier flush already covered go too: an entry left in the map keeps
/// the next append from waking the flusher (see [`Shared::mark_dirty`]).
fn take_due(dirty: &mut Dirty, config: &BrokerConfig, now_ms: i64) -> Vec<Arc<Partition>> {
    let mut due = Vec::new();
    dirty.partitions.retain(|_, (p, urgent)| {
        let log = p.lock();
        if log.unflushed().0 == 0 {
            return false;
        }
        if *urgent || flush_due(config, &log, now_ms) {
            due.push(Arc::clone(p));
            false
        } else {
            true
        }
    });
    due
}

/// Whether a partition's unflushed records are due under the flush policy.
fn flush_due(config: &BrokerConfig, log: &Log, now_ms: i64) -> bool {
    let (records, oldest) = log.unflushed();
    if records == 0 {
        return false;
    }
    match (config.flush_messages, config.flush_interval_ms) {
        (None, None) => true,
        (messages, interval) => {
            messages.is_some_and(|n| records >= n)
                || interval.is_some_and(|t| oldest.is_some_and(|o| now_ms.saturating_sub(o) >= t as i64))
        }
    }
}

/// Syncs a partition outside its lock and exposes what was synced.
fn flush_partition(shared: &Shared, p: &Arc<Partition>) {
    let begun = p.lock().begin_flush();
    let pending = match begun {
        Ok(Some(pending)) => pending,
        Ok(None) => return,
        Err(e) => {
            shared.log(format_args!("cannot flush {}-{}: {e}", p.topic, p.partition));
            return;
        }
    };
    match pending.sync() {
        Ok(()) => {
            shared.fsyncs.fetch_add(1, Ordering::Relaxed);
            p.lock().complete_flush(&pending);
            p.flushed.fetch_max(pending.next_offset(), Ordering::AcqRel);
        }
        Err(e) => {
            // Never retried: a later fsync could succeed for pages the
            // kernel already dropped. The partition stops; acks=all waiters
            // and new produces get a storage error; a restart recovers it.
            let e = p.lock().fail(&e);
            p.failed.store(true, Ordering::Release);
            shared.log(format_args!("{}-{} stopped: {e}", p.topic, p.partition));
        }
    }
}

/// Deletes expired segments every retention check interval.
fn retention(shared: &Shared) {
    let interval = Duration::from_millis(shared.config.retention_check_interval_ms.max(1));
    let mut next = Instant::now() + interval;
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100).min(interval));
        if Instant::now() < next {
            continue;
        }
        next = Instant::now() + interval;
        for p in shared.all_partitions() {
            let deleted = p.lock().apply_retention(crate::clock::now_ms());
            match deleted {
                Ok(d) if !d.is_empty() => shared.log(format_args!(
                    "Retention deleted {} segments of {}-{} (first offsets {:?})",
                    d.len(),
                    p.topic,
                    p.partition,
                    d
                )),
                Ok(_) => {}
                Err(e) => shared.log(format_args!("retention of {}-{} failed: {e}", p.topic, p.partition)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::fs::Vfs;
    use crate::storage::record::BatchBuilder;

    fn partition() -> Arc<Partition> {
        let vfs: Arc<dyn Vfs> = Arc::new(SimFs::new());
        let dir = std::path::Path::new("/t-0");
        vfs.create_dir_all(dir).unwrap();
        let config = LogConfig {
            visible_after_flush: true,
            index_bytes_max: 4096,
            ..LogConfig::default()
        };
        let options = OpenOptions {
            writable: true,
            lock: false,
        };
        let log = Log::open(vfs, dir, config, options).unwrap();
        Arc::new(Partition {
            topic: "t".into(),
            partition: 0,
            flushed: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            log: Mutex::new(log),
        })
    }

    fn append(p: &Partition) {
        let mut b = BatchBuilder::new();
        b.push(0, None, &[], b"x");
        p.lock().append(&mut b.finish().to_vec(), 0).unwrap();
    }

    #[test]
    fn entries_an_earlier_flush_covered_leave_the_dirty_map() {
        let config = BrokerConfig::new("/unused", "127.0.0.1:0");
        let p = partition();
        let mut dirty = Dirty::default();
        // Appended and marked: due at once (no policy: flush continuously).
        append(&p);
        dirty.mark(&p, false);
        assert_eq!(take_due(&mut dirty, &config, 0).len(), 1);
        // An append marks it again, then a flush (begun before the mark
        // was seen) covers that append: the entry must go, or the next
        // append would find it present and not wake the flusher.
        append(&p);
        dirty.mark(&p, false);
        let pending = p.lock().begin_flush().unwrap().unwrap();
        pending.sync().unwrap();
        p.lock().complete_flush(&pending);
        assert!(take_due(&mut dirty, &config, 0).is_empty());
        assert!(
            dirty.partitions.is_empty(),
            "a covered entry stays and silences the next append"
        );
    }

    #[test]
    fn under_a_policy_entries_wait_unless_urgent() {
        let mut config = BrokerConfig::new("/unused", "127.0.0.1:0");
        config.flush_messages = Some(100);
        let p = partition();
        let mut dirty = Dirty::default();
        append(&p);
        dirty.mark(&p, false);
        assert!(take_due(&mut dirty, &config, 0).is_empty());
        assert_eq!(dirty.partitions.len(), 1, "kept until due");
        assert!(dirty.mark(&p, true), "urgency is news for the flusher");
        assert_eq!(take_due(&mut dirty, &config, 0).len(), 1, "acks=all cannot wait");
    }
}
