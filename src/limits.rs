//! Every bound and default of klog, in one place.
//!
//! A limit that a file, a socket or a flag can push against is named here with
//! its unit last (`record_bytes_max`), and the relations between limits are
//! checked at compile time, so that a change to one cannot silently break
//! another (TigerBeetle's `constants.zig`). Lengths read from disk or from the
//! network are compared with these before anything is allocated.

/// Largest encoded record (length prefix, CRC and body) accepted by default.
pub const RECORD_BYTES_MAX_DEFAULT: u32 = 1024 * 1024;

/// Hard ceiling on `--max-record-bytes`: a record must fit in a segment.
pub const RECORD_BYTES_MAX_LIMIT: u32 = 64 * 1024 * 1024;

/// Largest batch (header plus records) accepted anywhere. A batch holds at
/// least one record, so it must be able to carry the largest record.
pub const BATCH_BYTES_MAX: u32 = 128 * 1024 * 1024;

/// Most records in one batch.
pub const BATCH_RECORDS_MAX: u32 = 1 << 20;

/// Default size at which the active segment rolls.
pub const SEGMENT_BYTES_DEFAULT: u64 = 1024 * 1024 * 1024;

/// Smallest allowed `--segment-bytes`.
pub const SEGMENT_BYTES_MIN: u64 = 4 * 1024;

/// Largest allowed `--segment-bytes`: index positions are `u32`.
pub const SEGMENT_BYTES_MAX: u64 = u32::MAX as u64;

/// Default number of log bytes between two sparse index entries.
pub const INDEX_INTERVAL_BYTES_DEFAULT: u32 = 4096;

/// Bytes preallocated for each memory-mapped index file of the active
/// segment; trimmed to the used length when the segment rolls.
pub const INDEX_BYTES_MAX_DEFAULT: u32 = 10 * 1024 * 1024;

/// The largest index file read or preallocated: a longer one read from disk
/// is damaged (and rebuilt), never loaded.
pub const INDEX_BYTES_MAX_LIMIT: u32 = 64 * 1024 * 1024;

/// Default largest request a broker reads (checked before allocating).
pub const REQUEST_BYTES_MAX_DEFAULT: u32 = 100 * 1024 * 1024;

/// Default request bytes a broker holds in memory at once, over all its
/// connections (Kafka's `queued.max.request.bytes`).
pub const QUEUED_REQUEST_BYTES_MAX_DEFAULT: u64 = 512 * 1024 * 1024;

/// Default connections a broker serves at once.
pub const CONNECTIONS_MAX_DEFAULT: usize = 1024;

/// Default requests of one connection read ahead of their responses.
pub const IN_FLIGHT_MAX_DEFAULT: usize = 256;

/// Default time a peer has to finish sending a frame it started.
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 30_000;

/// Default delivery deadline of a client's record (Kafka's
/// `delivery.timeout.ms`, librdkafka's `message.timeout.ms`).
pub const DELIVERY_TIMEOUT_MS_DEFAULT: u64 = 30_000;

/// Default time a client waits for the answer to one request before it
/// gives that connection up, looks the leader up again and sends again
/// (Kafka's `request.timeout.ms`): well below the delivery deadline, so
/// that a broker that hangs (stopped, stuck) costs a record one request
/// timeout, not its whole delivery deadline.
pub const CLIENT_REQUEST_TIMEOUT_MS_DEFAULT: u64 = 5_000;
const _: () = assert!(CLIENT_REQUEST_TIMEOUT_MS_DEFAULT * 4 <= DELIVERY_TIMEOUT_MS_DEFAULT);

/// Default time a connection may stay idle between requests.
pub const IDLE_TIMEOUT_MS_DEFAULT: u64 = 10 * 60 * 1000;

/// Lines a broker writes a second about what peers do (connections closed,
/// requests refused); the rest are counted, and the count written.
pub const PEER_LOG_LINES_PER_SECOND: u32 = 20;

/// Files this process may have open (its soft `RLIMIT_NOFILE`; unlimited
/// when it cannot be read).
pub fn open_files_max() -> u64 {
    use nix::sys::resource::{getrlimit, Resource};
    getrlimit(Resource::RLIMIT_NOFILE).map_or(u64::MAX, |(soft, _)| soft)
}

/// Topics a broker holds at most.
pub const TOPICS_MAX: usize = 10_000;

/// Partitions a broker holds at most, over all topics (each holds open
/// files: its segments, its active indexes and its lock).
pub const BROKER_PARTITIONS_MAX: usize = 10_000;

/// Bytes of records one fetch response carries at most, over all its
/// partitions, whatever budget the fetch asks for (plus one batch, so that
/// a fetch always progresses).
pub const FETCH_RESPONSE_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// Default byte budget of a fetch response, over all its partitions
/// (Kafka's `fetch.max.bytes`); a client asks for it in each fetch.
pub const FETCH_RESPONSE_BYTES_DEFAULT: u32 = 50 * 1024 * 1024;

/// Default retention by time: seven days, as in the paper.
pub const RETENTION_MS_DEFAULT: u64 = 7 * 24 * 3600 * 1000;

/// How long a compacted topic keeps a tombstone (`delete.retention.ms`,
/// Kafka's default: a day).
pub const DELETE_RETENTION_MS_DEFAULT: u64 = 24 * 3600 * 1000;

/// The dirty share of a compacted log that makes it worth a clean
/// (`min.cleanable.dirty.ratio`, Kafka's default).
pub const MIN_CLEANABLE_DIRTY_RATIO_DEFAULT: f64 = 0.5;

/// Memory of the cleaner's key map, all threads together
/// (`--log-cleaner-memory`, Kafka's `log.cleaner.dedupe.buffer.size`).
pub const CLEANER_MEMORY_DEFAULT: u64 = 128 << 20;

/// Most partitions a topic may have.
pub const PARTITIONS_MAX: u32 = 10_000;

/// Longest topic name (Kafka's limit).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Longest broker id: broker ids follow the naming rule of topics (they
/// name registry entries), so the same bound.
pub const BROKER_ID_BYTES_MAX: usize = TOPIC_NAME_BYTES_MAX;

/// The longest consumer group id a broker reads in klog's protocol (a
/// topic name's bound: a group's name is a registry name too).
pub const GROUP_ID_BYTES_MAX: usize = TOPIC_NAME_BYTES_MAX;

/// The most committed offsets (group, topic and partition keys) a
/// partition of the offsets topic holds: each takes a few hundred bytes
/// of its leader's memory.
pub const COMMITTED_OFFSETS_MAX: usize = 250_000;

/// Most headers on one record.
pub const HEADERS_PER_RECORD_MAX: u32 = 1024;

const _: () = assert!(RECORD_BYTES_MAX_DEFAULT <= RECORD_BYTES_MAX_LIMIT);
const _: () = assert!(REQUEST_BYTES_MAX_DEFAULT as u64 <= QUEUED_REQUEST_BYTES_MAX_DEFAULT);
const _: () = assert!(INDEX_BYTES_MAX_DEFAULT <= INDEX_BYTES_MAX_LIMIT);
const _: () = assert!(FETCH_RESPONSE_BYTES_MAX + BATCH_BYTES_MAX as u64 <= u32::MAX as u64);
const _: () = assert!(BATCH_BYTES_MAX <= REQUEST_BYTES_MAX_DEFAULT + 64 * 1024 * 1024);
const _: () = assert!((RECORD_BYTES_MAX_LIMIT as u64) < BATCH_BYTES_MAX as u64);
const _: () = assert!((BATCH_BYTES_MAX as u64) < SEGMENT_BYTES_MAX);
const _: () = assert!(SEGMENT_BYTES_MIN <= SEGMENT_BYTES_DEFAULT);
const _: () = assert!(SEGMENT_BYTES_DEFAULT <= SEGMENT_BYTES_MAX);
const _: () = assert!((INDEX_INTERVAL_BYTES_DEFAULT as u64) <= SEGMENT_BYTES_MIN);
