//! The partitions a broker serves and the state its threads share: the
//! topics (created on first use, placed over the cluster's brokers when
//! there is a registry), and the flusher's list of partitions to flush.
//! Those who wait for a partition's records wait on the partition itself
//! ([`super::watch`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use super::memory::RequestMemory;
use super::replica::Replica;
use super::watch::Waiters;
use super::BrokerConfig;
use crate::coord::{BrokerInfo, Ephemeral, Registry};
use crate::error::{Error, Result};
use crate::limits;
use crate::protocol::ErrorCode;
use crate::storage::log::{Log, OpenOptions};
use crate::storage::record::DecodeError;
use crate::storage::store::Store;
use crate::sync::lock;

/// Appends a partition gathers before writing them to its segment file;
/// the connection writes them out sooner, before it acknowledges them.
pub(super) const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// One partition served by the broker.
#[derive(Debug)]
pub(super) struct Partition {
    pub(super) topic: String,
    pub(super) partition: u32,
    pub(super) log: Mutex<Log>,
    /// One past the last durable record here.
    pub(super) flushed_offset: AtomicU64,
    /// One past the last record consumers may see and acks=all answers
    /// count as stored: the flushed offset for a single copy; for a
    /// replicated partition, the lowest durable end of its in-sync
    /// replicas ([`super::replica`]). Never moves backwards.
    pub(super) high_watermark: AtomicU64,
    /// Its replication, when the topic has more than one replica.
    pub(super) replica: Option<Replica>,
    /// A failed fsync stopped the partition (see [`Log::fail`]).
    pub(super) failed: AtomicBool,
    /// Those waiting for its records to become visible or durable; a flush
    /// wakes them.
    pub(super) waiters: Arc<Waiters>,
    /// Followers waiting for records written to the file (the leader
    /// serves them before its fsync): a write of gathered appends wakes
    /// them ([`Partition::written`]), and they watch [`Partition::waiters`]
    /// too.
    pub(super) written_waiters: Arc<Waiters>,
    /// When the flusher last began to flush it (the group commit window).
    pub(super) flush_begun: Mutex<Option<Instant>>,
    /// The in-sync replicas an acks=all produce needs: the broker's, or
    /// the topic's `min.insync.replicas` ([`super::topic_configs`]).
    pub(super) min_insync: AtomicU32,
    /// The largest record a produce may carry: the log's
    /// `record_bytes_max`, read without its lock.
    pub(super) record_bytes_max: AtomicU32,
    /// The log is compacted: a produce takes records with keys only.
    pub(super) compacted: AtomicBool,
}

impl Partition {
    /// Serves `log` as partition `partition` of `topic`, one of the
    /// replicas of `replica` (or a single copy).
    pub(super) fn replicated(
        topic: &str,
        partition: u32,
        log: Log,
        replica: Option<Replica>,
    ) -> Partition {
        // A replica learns its high watermark from its leader, or computes
        // it as leader: until then it shows nothing it has not confirmed.
        let high_watermark = if replica.is_some() {
            0
        } else {
            log.flushed_offset()
        };
        Partition {
            topic: topic.to_string(),
            partition,
            flushed_offset: AtomicU64::new(log.flushed_offset()),
            high_watermark: AtomicU64::new(high_watermark),
            replica,
            failed: AtomicBool::new(false),
            waiters: Arc::default(),
            written_waiters: Arc::default(),
            flush_begun: Mutex::new(None),
            min_insync: AtomicU32::new(1),
            record_bytes_max: AtomicU32::new(log.config().record_bytes_max),
            compacted: AtomicBool::new(log.config().compact),
            log: Mutex::new(log),
        }
    }

    /// The partition's log, locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, Log> {
        lock(&self.log)
    }

    /// Appends were written to the file: followers may fetch them now.
    pub(super) fn written(&self) {
        if self.replica.is_some() {
            self.written_waiters.wake_all();
        }
    }
}

pub(in crate::broker) use super::appended::Appended;
mod dirty;
pub(super) use dirty::{key, Dirty, DirtyEntry};

/// How a broker holds a partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Held {
    /// Not here: placed on other brokers.
    Elsewhere,
    /// The one copy.
    Single,
    /// One of these replicas (more than one), this broker among them.
    Replica(Vec<String>),
}

impl Held {
    /// How broker `me` holds each partition of `placement`.
    pub(super) fn all(placement: &crate::coord::Placement, me: &str) -> Vec<Held> {
        (0..placement.brokers.len() as u32)
            .map(|p| match placement.replicas_of(p) {
                Some(r) if !r.iter().any(|b| b == me) => Held::Elsewhere,
                Some(r) if r.len() > 1 => Held::Replica(r.to_vec()),
                _ => Held::Single,
            })
            .collect()
    }
}

/// Each topic's partitions, `None` for those placed on another broker (or
/// offline).
pub(super) type Topics = BTreeMap<String, Vec<Option<Arc<Partition>>>>;

/// Files an open partition holds at most: its lock, its active segment
/// with its two indexes, and the next segment made ahead of a roll with
/// its two. Sealed segments' files are opened when read, and kept open
/// within a bound of their own ([`crate::storage::files::capacity`]).
const FILES_PER_PARTITION: u64 = 7;

/// Files kept for what is not a partition or a connection: the listeners,
/// the registry, the data directory's lock, a follower's connections.
const FILES_SPARE: u64 = 256;

/// The most Kafka group members a broker holds: each holds a registry
/// entry and the claims of its partitions, open files of a directory
/// registry (two kept for each). A sixteenth of the open-file limit, from
/// 16 to 5,000.
pub(super) fn kafka_members_max() -> usize {
    (limits::open_files_max() / 16).clamp(16, 5000) as usize
}

/// Files kept for sealed segments' cached files and Kafka group members.
fn files_beside_partitions() -> u64 {
    (crate::storage::files::capacity() + 2 * kafka_members_max()) as u64
}

/// Files a connection holds at most: its socket, the clone a shutdown
/// stops it through, its writer's clone, and under TLS the pair of sockets
/// between it and its TLS pump.
const FILES_PER_CONNECTION: u64 = 5;

/// What every thread shares.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) config: BrokerConfig,
    pub(super) store: Store,
    /// Each topic's partitions, `None` for those placed on another broker.
    pub(super) topics: RwLock<Topics>,
    /// This broker's id in the registry (stable across restarts).
    pub(super) broker_id: String,
    pub(super) registry: Option<Arc<dyn Registry>>,
    /// Serialises topic creation.
    pub(super) creating: Mutex<()>,
    pub(super) dirty: Mutex<Dirty>,
    pub(super) dirty_changed: Condvar,
    pub(super) stop: AtomicBool,
    pub(super) connections: AtomicUsize,
    /// The bound on request bytes held in memory.
    pub(super) request_memory: RequestMemory,
    /// Batches appended, and fsyncs that made them durable.
    pub(super) appends: AtomicU64,
    pub(super) fsyncs: AtomicU64,
    /// Clones of open sockets, to stop their readers at shutdown.
    pub(super) sockets: Mutex<HashMap<u64, std::net::TcpStream>>,
    /// This broker's registry entry, rewritten when its topics change.
    /// (`None` for the entry while its lapsed registration is not made
    /// again.)
    pub(super) registered: Mutex<Option<(Option<Ephemeral>, BrokerInfo)>>,
    /// What renews the lease of that entry, on the lease's own thread
    /// ([`super::lease`]): held apart from `registered`, which waits for
    /// registry writes.
    pub(super) lease: Mutex<Option<crate::coord::Renewer>>,
    /// Partitions that could not be opened (damaged), and why.
    pub(super) offline: Mutex<BTreeMap<(String, u32), String>>,
    /// Asks the replica manager to look at the registry now (a topic with
    /// replicas was opened).
    pub(super) nudge: AtomicBool,
    /// The follower threads, by the leader they fetch from.
    pub(super) fetchers: Mutex<HashMap<String, std::thread::JoinHandle<()>>>,
    /// The bound on lines about what peers do ([`Shared::log_peer`]).
    pub(super) peer_lines: crate::diag::Throttle,
    /// The ACLs (with `--authorize`).
    pub(super) authorizer: crate::coord::acl::Cache,
    /// What `--metrics-listen` serves.
    pub(super) metrics: super::metrics::Metrics,
    /// Each open topic's configs as last read from the registry.
    pub(super) topic_configs: crate::coord::topic_config::Cache,
    /// When a request for a partition past a topic's count last made this
    /// broker read its placement ([`super::topic_grow`]).
    pub(super) grow_looks: Mutex<HashMap<String, Instant>>,
    /// The dynamic broker configs as last read (`None`: not yet).
    pub(super) broker_configs: Mutex<Option<crate::coord::broker_config::Layers>>,
    /// Topics deleted here so far: a name seen before may be placed anew.
    pub(super) deletions: AtomicU64,
    /// Held by the one round of deletions running ([`super::topic_delete`]):
    /// a DeleteTopics answer and the reloads never work on one deletion
    /// at once.
    pub(super) deleting: Mutex<()>,
    /// The producer ids it hands out.
    pub(super) producer_ids: super::producer_ids::ProducerIds,
    /// Idempotent producers the partitions forgot as expired.
    pub(super) producers_expired: AtomicU64,
    /// The committed offsets of the offsets topic's partitions it leads.
    pub(super) offsets: super::offsets::slots::OffsetsStore,
    /// Itself, once shared (for what must outlive a call: the group
    /// coordinator's own offset requests).
    pub(super) me: std::sync::OnceLock<std::sync::Weak<Shared>>,
}

impl Shared {
    /// The state of a broker with no topic open yet.
    pub(super) fn new(
        config: BrokerConfig,
        store: Store,
        registry: Option<Arc<dyn Registry>>,
        broker_id: String,
    ) -> Shared {
        Shared {
            broker_id,
            store,
            topics: RwLock::new(BTreeMap::new()),
            creating: Mutex::new(()),
            dirty: Mutex::new(Dirty::default()),
            dirty_changed: Condvar::new(),
            stop: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            request_memory: RequestMemory::new(config.queued_request_bytes_max),
            appends: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            sockets: Mutex::new(HashMap::new()),
            registered: Mutex::new(None),
            lease: Mutex::new(None),
            offline: Mutex::new(BTreeMap::new()),
            fetchers: Mutex::new(HashMap::new()),
            nudge: AtomicBool::new(false),
            peer_lines: crate::diag::Throttle::new(limits::PEER_LOG_LINES_PER_SECOND),
            authorizer: crate::coord::acl::Cache::default(),
            metrics: super::metrics::Metrics::default(),
            topic_configs: Default::default(),
            broker_configs: Mutex::new(None),
            grow_looks: Mutex::new(HashMap::new()),
            deletions: AtomicU64::new(0),
            deleting: Mutex::new(()),
            producer_ids: super::producer_ids::ProducerIds::new(registry.clone()),
            producers_expired: AtomicU64::new(0),
            offsets: Default::default(),
            me: std::sync::OnceLock::new(),
            registry,
            config,
        }
    }

    /// Shared, knowing itself ([`Shared::me`]).
    pub(super) fn into_arc(self) -> Arc<Shared> {
        let shared = Arc::new(self);
        let _ = shared.me.set(Arc::downgrade(&shared));
        shared
    }

    /// The topics, to read (taken even when another thread panicked
    /// holding them, like [`lock`]).
    pub(super) fn read_topics(&self) -> RwLockReadGuard<'_, Topics> {
        self.topics.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The topics, to change.
    pub(super) fn write_topics(&self) -> RwLockWriteGuard<'_, Topics> {
        self.topics.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Prints a line of the broker's log on stderr (unless `quiet`).
    pub(super) fn log(&self, msg: std::fmt::Arguments<'_>) {
        if !self.config.quiet {
            crate::diag::line(format_args!("% {msg}"));
        }
    }

    /// Prints a line about what a peer did (a connection closed, a request
    /// refused): at most [`limits::PEER_LOG_LINES_PER_SECOND`] a second,
    /// the rest counted and the count said before the next one.
    pub(super) fn log_peer(&self, msg: std::fmt::Arguments<'_>) {
        if self.config.quiet {
            return;
        }
        if let Some(dropped) = self.peer_lines.admit(std::time::Instant::now()) {
            self.say_dropped(dropped);
            crate::diag::line(format_args!("% {msg}"));
        }
    }

    /// Says how many lines about peers were not written, if any.
    pub(super) fn say_dropped(&self, dropped: u64) {
        if dropped > 0 && !self.config.quiet {
            crate::diag::line(format_args!(
                "% {} about peers not written (at most {} a second are)",
                crate::human::count(dropped, "more line"),
                limits::PEER_LOG_LINES_PER_SECOND
            ));
        }
    }

    pub(super) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || crate::stop::stopping()
    }

    pub(super) fn partition(
        &self,
        topic: &str,
        partition: u32,
    ) -> std::result::Result<Arc<Partition>, (ErrorCode, String)> {
        let found = {
            let topics = self.read_topics();
            // The common case, without copying the topic's partition list.
            if let Some(Some(Some(p))) =
                topics.get(topic).map(|parts| parts.get(partition as usize))
            {
                return Ok(Arc::clone(p));
            }
            topics.get(topic).cloned()
        };
        let parts = match found {
            Some(parts) => parts,
            None => {
                // Another broker of the cluster may have created it.
                let placed = self
                    .registry
                    .as_ref()
                    .and_then(|r| r.placement(topic).ok().flatten());
                let Some(placement) = placed else {
                    return Err((
                        ErrorCode::UnknownTopic,
                        format!("topic {topic:?} does not exist"),
                    ));
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
            // Grown elsewhere (CreatePartitions) since this broker read it.
            None if self.grow_when_asked(topic) => self.partition(topic, partition),
            None => Err((
                ErrorCode::UnknownPartition,
                format!(
                    "partition {partition} of topic {topic:?} does not exist (it has {})",
                    crate::human::count(parts.len() as u64, "partition")
                ),
            )),
        }
    }

    /// Which partitions of a topic of `count` this broker holds, and the
    /// replicas of each it holds: all of them, a single copy each, without
    /// a registry; with one, those placed on it (placing the topic over
    /// the live brokers first, with the broker's replication factor, if
    /// nobody has).
    pub(super) fn placed_here(&self, topic: &str, count: u32, rf: u32) -> Result<(u32, Vec<Held>)> {
        let Some(registry) = &self.registry else {
            return Ok((count, vec![Held::Single; count as usize]));
        };
        let live: Vec<String> = registry.brokers()?.into_iter().map(|b| b.id).collect();
        let placement = registry.place_topic_replicated(topic, count, rf, &live)?;
        let held = Held::all(&placement, &self.broker_id);
        Ok((placement.brokers.len() as u32, held))
    }

    /// Whether `topic` exists: open here, or placed in the registry.
    pub(super) fn topic_exists(&self, topic: &str) -> bool {
        self.read_topics().contains_key(topic)
            || self
                .registry
                .as_ref()
                .is_some_and(|r| r.placement(topic).ok().flatten().is_some())
    }

    /// Creates `topic` (or finds it); returns its partition count and
    /// whether it existed.
    /// The offsets topic is made only by [`super::offsets`], compacted;
    /// here, only once it is placed (another broker made it).
    pub(super) fn create_topic(&self, topic: &str, partitions: u32) -> Result<(u32, bool)> {
        let internal = crate::coord::offsets_topic::OFFSETS_TOPIC;
        if topic == internal && !self.topic_exists(topic) {
            return Err(Error::InvalidTopic {
                name: topic.to_string(),
                reason: "internal: made by the brokers at a group's first commit",
            });
        }
        self.create_topic_replicated(topic, partitions, self.config.replication_factor)
    }

    /// [`Shared::create_topic`] with `replication_factor` replicas of each
    /// partition (with a registry; one copy without).
    pub(super) fn create_topic_replicated(
        &self,
        topic: &str,
        partitions: u32,
        replication_factor: u32,
    ) -> Result<(u32, bool)> {
        crate::storage::store::validate_topic(topic)?;
        let _creating = lock(&self.creating);
        if let Some(parts) = self.read_topics().get(topic) {
            return Ok((parts.len() as u32, true));
        }
        if let Some(registry) = self.registry.as_deref() {
            if let Some(d) = crate::coord::topic_delete::get(registry, topic)? {
                let brokers = d.brokers.into_iter().collect::<Vec<_>>().join(", ");
                let topic = topic.to_string();
                return Err(Error::TopicDeleting { topic, brokers });
            }
        }
        let topics = self.read_topics().len();
        if topics >= limits::TOPICS_MAX {
            return Err(Error::TooMany {
                what: "topics",
                count: topics as u64 + 1,
                limit: limits::TOPICS_MAX as u64,
            });
        }
        let on_disk = self.store.partition_count(topic).ok();
        let count = on_disk.unwrap_or(partitions);
        self.room_for(topic, count)?;
        let (placed, mine) = self.placed_here(topic, count, replication_factor)?;
        if placed != count {
            self.room_for(topic, placed)?;
        }
        // On disk already, it may have fewer (grown while this broker
        // was down).
        self.store.create_topic(topic, placed)?;
        let count = self.store.add_partitions(topic, placed)?;
        let opened = match self.open_topic(topic, &mine) {
            Ok(opened) => opened,
            Err(e) => {
                // A topic made here that cannot be opened (no file left to
                // open) goes again, whole: none of it stays to stop the
                // broker's next start.
                if on_disk.is_none() {
                    if let Err(undo) = self.store.remove_unwritten_topic(topic) {
                        self.log(format_args!("cannot remove topic {topic} again: {undo}"));
                    }
                }
                return Err(e);
            }
        };
        let held: Vec<u32> = (0..count)
            .filter(|p| mine.get(*p as usize).is_some_and(|h| *h != Held::Elsewhere))
            .collect();
        self.write_topics().insert(topic.to_string(), opened);
        if held.len() as u32 == count {
            self.log(format_args!(
                "Created topic {topic} with {}",
                crate::human::count(u64::from(count), "partition")
            ));
        } else {
            self.log(format_args!(
                "Created topic {topic} with {}, serving {held:?}",
                crate::human::count(u64::from(count), "partition")
            ));
        }
        self.update_registry();
        Ok((count, false))
    }

    /// Whether the data directory has room for `topic` with `partitions`,
    /// counted on disk (every partition directory of the other topics,
    /// served or not: offline, placed elsewhere), within `--max-partitions`
    /// and within the files this process may open: a data directory the
    /// broker wrote, it must be able to open again.
    pub(super) fn room_for(&self, topic: &str, partitions: u32) -> Result<()> {
        let others = self.store.partition_dirs_besides(topic)?;
        let count = others + partitions as usize;
        if count > self.config.partitions_max {
            return Err(Error::TooMany {
                what: "partitions in the data directory (--max-partitions)",
                count: count as u64,
                limit: self.config.partitions_max as u64,
            });
        }
        let files = limits::open_files_max();
        // Partitions first: a connection refused for want of a file is
        // one client's retry, a partition that cannot open is a broker
        // that cannot start.
        let others = FILES_SPARE + files_beside_partitions();
        let fit = files.saturating_sub(others) / FILES_PER_PARTITION;
        if count as u64 > fit {
            return Err(Error::TooMany {
                what: "partitions for this process's open-file limit (ulimit -n)",
                count: count as u64,
                limit: fit,
            });
        }
        Ok(())
    }

    /// The connections the process's open-file limit leaves room for,
    /// beside the files of the partitions served, of the sealed segments
    /// cached and of what is neither: a connection refused is one client's
    /// retry; a roll that cannot create its files stops a partition.
    pub(super) fn connections_room(&self) -> usize {
        let partitions = self.read_topics().values().flatten().flatten().count() as u64;
        let reserved = FILES_SPARE + files_beside_partitions() + partitions * FILES_PER_PARTITION;
        let room = limits::open_files_max().saturating_sub(reserved) / FILES_PER_CONNECTION;
        usize::try_from(room).unwrap_or(usize::MAX)
    }

    /// The log config and minimum in-sync replicas `topic`'s partitions
    /// open with here: the broker's, with the topic's configs from the
    /// registry ([`super::topic_configs`]). While they cannot be read (and
    /// were not before), the topic keeps every segment: its retention may
    /// be longer than the broker's; as while the dynamic broker configs
    /// cannot be read.
    fn log_config(&self, topic: &str) -> (crate::storage::log::LogConfig, u32) {
        if let Some(registry) = self.registry.as_deref() {
            match crate::coord::topic_config::read(registry, topic) {
                Ok(overrides) => _ = self.topic_configs.set(topic, overrides),
                Err(e) => self.log(format_args!("topic {topic} keeps every segment: {e}")),
            }
        }
        let known = self.topic_configs.get(topic);
        let unread = known.is_none() && self.registry.is_some();
        let (base, base_min) = self.base_config();
        let (mut config, min_insync) = known.unwrap_or_default().apply(&base, base_min);
        if unread {
            config.retention_ms = None;
            config.retention_bytes = None;
        }
        config.visible_after_flush = true;
        config.write_buffer_bytes = WRITE_BUFFER_BYTES;
        config.flush_messages = None;
        config.flush_interval_ms = None;
        (config, min_insync)
    }

    pub(super) fn open_topic(
        &self,
        topic: &str,
        mine: &[Held],
    ) -> Result<Vec<Option<Arc<Partition>>>> {
        let (config, min_insync) = self.log_config(topic);
        let options = OpenOptions {
            writable: true,
            lock: self.config.vfs.supports_locks(),
        };
        let mut parts = Vec::with_capacity(mine.len());
        for (p, held) in mine.iter().enumerate() {
            let p = p as u32;
            if *held == Held::Elsewhere {
                parts.push(None);
                continue;
            }
            // A replica heals from its peers; a single copy waits.
            let opened = match held {
                Held::Replica(_) => self.open_replica(topic, p, config.clone(), options),
                _ => self.store.open_log(topic, p, config.clone(), options),
            };
            let log = match opened {
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
            let replica = match held {
                Held::Replica(replicas) => {
                    self.create_state(topic, p, replicas);
                    self.nudge.store(true, Ordering::Release);
                    let mark = self.refetch_mark(&self.store.partition_dir(topic, p));
                    Some(Replica::new(replicas.clone(), mark))
                }
                _ => None,
            };
            let partition = Partition::replicated(topic, p, log, replica);
            partition.min_insync.store(min_insync, Ordering::Relaxed);
            parts.push(Some(Arc::new(partition)));
        }
        Ok(parts)
    }

    /// Marks a partition as having unflushed appends (`urgent`: an acks=all
    /// request waits for it).
    pub(super) fn mark_dirty(&self, p: &Arc<Partition>, urgent: bool) {
        if lock(&self.dirty).mark(p, urgent) {
            self.dirty_changed.notify_one();
        }
    }

    /// Tells the background threads to stop (at a shutdown): the flusher
    /// and the others that look at `stop`, and the spares' zeroing.
    pub(super) fn stop_background(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.dirty_changed.notify_all();
        if let Some(spares) = &self.config.log.spares {
            spares.stop();
        }
    }

    /// Wakes everyone waiting on any partition (at a shutdown).
    pub(super) fn wake_all_waiters(&self) {
        for p in self.all_partitions() {
            p.waiters.wake_all();
        }
    }

    /// Rewrites this broker's registry entry with its topics.
    pub(super) fn update_registry(&self) {
        let mut registered = lock(&self.registered);
        if let Some((Some(entry), info)) = registered.as_mut() {
            let topics = self.read_topics();
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
    pub(super) fn is_offline(&self, topic: &str, partition: u32) -> bool {
        lock(&self.offline).contains_key(&(topic.to_string(), partition))
    }

    /// How many partitions this broker serves.
    pub(super) fn served_count(&self) -> usize {
        self.read_topics().values().flatten().flatten().count()
    }

    pub(super) fn all_partitions(&self) -> Vec<Arc<Partition>> {
        let topics = self.read_topics();
        topics.values().flatten().flatten().cloned().collect()
    }
}

/// The error code and message a client gets for a library error.
pub(super) fn error_code(e: &Error) -> ErrorCode {
    match e {
        Error::InvalidTopic { .. } => ErrorCode::InvalidTopic,
        Error::UnknownTopic { .. } => ErrorCode::UnknownTopic,
        Error::UnknownPartition { .. } => ErrorCode::UnknownPartition,
        Error::InvalidBatch(DecodeError::TooLarge { what: "record", .. })
        | Error::TooLarge { what: "record", .. } => ErrorCode::RecordTooLarge,
        // The room for decompressed records is held now: sent again (as
        // Kafka's REQUEST_TIMED_OUT), it goes.
        Error::InvalidBatch(DecodeError::Busy { .. }) => ErrorCode::Timeout,
        Error::InvalidBatch(_) => ErrorCode::CorruptBatch,
        Error::DiskFull { .. } => ErrorCode::DiskFull,
        Error::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        Error::ProducerRefused { code, .. } => *code,
        // Retried: the name is free once every copy is deleted.
        Error::TopicDeleting { .. } => ErrorCode::LeaderNotAvailable,
        Error::TooLarge { .. } | Error::TooMany { .. } => ErrorCode::LimitReached,
        // The registry's failures to place a topic were configuration
        // errors once, and answer as they did.
        Error::Config(_)
        | Error::NoLiveBroker { .. }
        | Error::Vanished { .. }
        | Error::Encode { .. } => ErrorCode::InvalidRequest,
        _ => ErrorCode::StorageError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::testing::{partition, shared};

    #[test]
    fn a_partition_not_served_says_why() {
        let (_sim, shared) = shared();
        partition(&shared, "t");
        let code = |topic, p| shared.partition(topic, p).err().map(|(code, _)| code);
        assert_eq!(code("t", 0), None);
        assert_eq!(code("t", 1), Some(ErrorCode::UnknownPartition));
        assert_eq!(code("none", 0), Some(ErrorCode::UnknownTopic));
        // Held but not served: offline here, or placed on another broker.
        shared.write_topics().insert("d".into(), vec![None, None]);
        lock(&shared.offline).insert(("d".into(), 0), "damaged".into());
        assert_eq!(code("d", 0), Some(ErrorCode::StorageError));
        assert_eq!(code("d", 1), Some(ErrorCode::PartitionElsewhere));
        let why = shared.partition("d", 0).err().map(|(_, why)| why);
        assert_eq!(why.as_deref(), Some("damaged"));
        assert!(shared.is_offline("d", 0) && !shared.is_offline("d", 1));
    }

    #[test]
    fn library_errors_map_to_the_codes_clients_act_on() {
        let too_large = |what| Error::TooLarge {
            what,
            size: 2,
            limit: 1,
        };
        assert_eq!(error_code(&too_large("record")), ErrorCode::RecordTooLarge);
        assert_eq!(error_code(&too_large("batch")), ErrorCode::LimitReached);
        let too_many = Error::TooMany {
            what: "topics",
            count: 10_001,
            limit: 10_000,
        };
        assert_eq!(error_code(&too_many), ErrorCode::LimitReached);
        assert_eq!(
            too_many.to_string(),
            "10001 topics would pass the limit of 10000"
        );
        assert_eq!(
            error_code(&Error::Config("x".into())),
            ErrorCode::InvalidRequest
        );
        let full = Error::DiskFull {
            op: "append to",
            path: "/d".into(),
        };
        assert_eq!(error_code(&full), ErrorCode::DiskFull);
        let stopped = Error::StorageFailed {
            dir: "/d".into(),
            reason: "EIO".into(),
        };
        assert_eq!(error_code(&stopped), ErrorCode::StorageError);
    }
}
