//! The library's error type.
//!
//! Every variant is one sentence that names what failed and where (a path, an
//! offset, a limit), so that a binary can print it as it is, with `{:#}`, and
//! a user knows what to look at. Decoding errors of the byte formats have their
//! own small type, [`crate::storage::record::DecodeError`], because recovery branches on
//! "torn tail" versus "corruption".

use std::fmt;
use std::path::PathBuf;

/// Result with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong in the library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call on a file failed.
    #[error("{op} {path}")]
    Io {
        /// What was being done ("open", "read", "fsync", ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },

    /// A topic name breaks the naming rule.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopic {
        /// The name as given.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// A partition number outside the topic.
    #[error("partition {partition} of topic {topic:?} does not exist (it has {})", crate::human::count(u64::from(*.count), "partition"))]
    UnknownPartition {
        /// Topic name.
        topic: String,
        /// The partition asked for.
        partition: u32,
        /// How many partitions the topic has.
        count: u32,
    },

    /// A topic that does not exist.
    #[error("topic {topic:?} does not exist in {dir}")]
    UnknownTopic {
        /// Topic name.
        topic: String,
        /// The data directory looked in.
        dir: PathBuf,
    },

    /// A topic no broker of a registry holds.
    #[error("topic {topic:?} is not in the registry {registry} (no registered broker holds it)")]
    NotInRegistry {
        /// Topic name.
        topic: String,
        /// The registry looked in.
        registry: String,
    },

    /// A group asked to start at its committed offsets (`-o stored`) has
    /// none for some partitions.
    #[error("group {group:?} has no committed offset for {partitions}: -o stored insists on them (-o beginning or -o end says where to start without one)")]
    NoCommittedOffset {
        /// The group.
        group: String,
        /// The partitions without one, as `t [0], t [2]`.
        partitions: String,
    },

    /// Another process holds a directory's lock (a partition's writer, a
    /// data directory's broker).
    #[error("{path} is locked by {holder}")]
    Locked {
        /// The locked directory.
        path: PathBuf,
        /// Who holds it ("pid 1234", or "another process").
        holder: String,
    },

    /// A file's bytes are not what its format allows.
    #[error("{path}: corrupt at position {position}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte position of the problem in the file.
        position: u64,
        /// What is wrong.
        reason: String,
    },

    /// Opening a partition found damage that is not a torn tail of its
    /// active segment. Nothing was changed: cutting there could drop
    /// acknowledged records and reuse their offsets, so `klog-recover`
    /// decides.
    #[error(
        "partition {dir} is damaged and was left unchanged: {segment} at byte {position} \
         (offset {offset}): {reason}; run `klog-recover {dir}` to repair it \
         (`klog-recover --dry-run` shows what it would cut)"
    )]
    Damaged {
        /// The locked directory.
        dir: PathBuf,
        /// The damaged segment file.
        segment: PathBuf,
        /// Byte position of the damage in it.
        position: u64,
        /// The first offset that would be lost by a cut there.
        offset: u64,
        /// What is wrong.
        reason: String,
    },

    /// An fsync of the partition failed: what it covered may not be on disk,
    /// and a later fsync could report success for pages the kernel already
    /// dropped, so the partition accepts nothing until it is reopened and
    /// recovered.
    #[error(
        "partition {dir} stopped after a failed fsync ({reason}); \
         restart to recover it from its last durable record"
    )]
    StorageFailed {
        /// The locked directory.
        dir: PathBuf,
        /// What failed.
        reason: String,
    },

    /// The disk is full: the append was undone (nothing of it will appear),
    /// reads go on, and appends are accepted again once there is room.
    #[error("disk full: {op} {path}: no space left on the device")]
    DiskFull {
        /// What was being done ("append to", "allocate index", ...).
        op: &'static str,
        /// The file that could not grow.
        path: PathBuf,
    },

    /// Bytes handed to the library (a batch, a record) do not decode.
    #[error("invalid batch: {0}")]
    InvalidBatch(#[from] DecodeError),

    /// An offset outside the log.
    #[error("offset {offset} is out of range: the log starts at offset {start} and ends at {end}")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// The first offset held.
        start: u64,
        /// One past the last offset held.
        end: u64,
    },

    /// A value is larger than a configured limit.
    #[error("{what} of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },

    /// More of something than a bound of the broker allows.
    #[error("{count} {what} would pass the limit of {limit}")]
    TooMany {
        /// What there would be too many of ("topics").
        what: &'static str,
        /// How many there would be.
        count: u64,
        /// The limit.
        limit: u64,
    },

    /// A configuration value is unusable: a flag, a limit, or a name given
    /// to the library. Only for configuration; a failure at run time has a
    /// variant of its own.
    #[error("{0}")]
    Config(String),

    /// An idempotent producer's batch refused by its partition's producer
    /// state ([`crate::storage::producers`]): out of order, or from a
    /// fenced epoch.
    #[error("{reason}")]
    ProducerRefused {
        /// [`ErrorCode::OutOfOrderSequence`] or
        /// [`ErrorCode::ProducerFenced`].
        code: ErrorCode,
        /// Which producer, and what was expected.
        reason: String,
    },

    /// A thread could not be started (the system is out of threads or
    /// memory).
    #[error("cannot start a thread: {reason}")]
    Spawn {
        /// The operating system's reason. It is part of this message, not
        /// a cause of its own, so that one line says it all.
        reason: std::io::Error,
    },

    /// A thread of the library panicked; what it was doing is lost.
    #[error("{thread} panicked")]
    Panicked {
        /// Which thread ("the producer thread").
        thread: &'static str,
    },

    /// Records stopped arriving for longer than the reader waits.
    #[error("no record arrived for {waited_s} s")]
    Stalled {
        /// How long it waited, in seconds.
        waited_s: u64,
    },

    /// A registry entry could not be encoded as JSON.
    #[error("cannot encode {what}")]
    Encode {
        /// What was being encoded ("a registry entry").
        what: &'static str,
        /// The encoder's reason.
        source: serde_json::Error,
    },

    /// An entry the registry had a moment ago is gone (its holder removed
    /// it between two reads).
    #[error("{what} vanished")]
    Vanished {
        /// The entry, such as `placement of "t"`.
        what: String,
    },

    /// Another process is registering the same entry at this moment.
    #[error("{path} is in use")]
    InUse {
        /// The entry's lock file.
        path: PathBuf,
    },

    /// The registry lists no live broker at all.
    #[error("no broker is registered in {registry}")]
    NoBroker {
        /// Where the registry is (its directory).
        registry: String,
    },

    /// A topic cannot be placed: there is no live broker to place it on.
    #[error("no live broker to place topic {topic:?} on")]
    NoLiveBroker {
        /// The topic.
        topic: String,
    },

    /// A broker created a topic but the registry has no placement for it
    /// (the broker is not part of the cluster's registry).
    #[error("the broker created {topic:?} without placing it")]
    Unplaced {
        /// The topic.
        topic: String,
    },

    /// A topic is being deleted: its name cannot be created again until
    /// every broker that held it deleted its copy.
    #[error("topic {topic:?} is being deleted: broker(s) {brokers} have not deleted their copy yet (each does when it runs)")]
    TopicDeleting {
        /// The topic.
        topic: String,
        /// The brokers still to delete their copy.
        brokers: String,
    },

    /// A partition is placed on a broker that is not running now.
    #[error(
        "partition {partition} of {topic:?} is placed on broker {broker}, which is not running"
    )]
    BrokerDown {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The id of the broker it is placed on.
        broker: String,
    },

    /// A group member's registration is gone (its entry was removed, or
    /// its process was taken for dead), so it owns nothing any more.
    #[error("member {member} is not in group {group} any more")]
    NotInGroup {
        /// The member's id.
        member: String,
        /// The group.
        group: String,
    },

    /// A registry entry's holder was silent longer than its session
    /// timeout: others may have taken what it held, so it must let go.
    #[error("{what} expired: silent for {silent_ms} ms, longer than its session timeout of {timeout_ms} ms")]
    Expired {
        /// The entry ("member m of group g", "the claim of t \[0\]").
        what: String,
        /// How long it went unrenewed, in ms.
        silent_ms: u64,
        /// Its session timeout, in ms.
        timeout_ms: u64,
    },

    /// A registry entry was lost with the session that held it (the
    /// ZooKeeper session expired): others may hold what it held, so its
    /// holder must let go and join again.
    #[error("{what} was lost with its session in {registry}: others may hold it now")]
    SessionLost {
        /// The entry ("member m of group g", "the claim of t \[0\]").
        what: String,
        /// Where the registry is.
        registry: String,
    },

    /// An entry is held by another live session of the registry.
    #[error("{what} is held by another live session ({holder}) in {registry}")]
    HeldElsewhere {
        /// The entry ("broker 1", "member m of group g").
        what: String,
        /// The session that holds it.
        holder: String,
        /// Where the registry is.
        registry: String,
    },

    /// A claim of a partition was replaced by a later one: its holder's
    /// commits are refused.
    #[error("{what} was taken over: its generation {generation} is not the current {current}")]
    Fenced {
        /// The claim ("the claim of t \[0\] in group g").
        what: String,
        /// The claim's generation.
        generation: u64,
        /// The partition's current generation.
        current: u64,
    },

    /// A change that needs a group without live members (an offset reset)
    /// while it has some.
    #[error("group {group} has live members ({members}); stop them first")]
    GroupActive {
        /// The group.
        group: String,
        /// Who: "member m (pid 12)", ...
        members: String,
    },

    /// A broker could not be reached or the connection broke.
    #[error("{op} broker {addr}")]
    Network {
        /// What was being done ("connect to", "send to", "read from").
        op: &'static str,
        /// The broker's address.
        addr: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },

    /// A broker took no request or gave no answer within the deadline
    /// (it is stopped, overloaded or unreachable).
    #[error("{op} broker {addr}: no answer within {waited_ms} ms")]
    TimedOut {
        /// What was being done ("connect to", "send to", "read from").
        op: &'static str,
        /// The broker's address.
        addr: String,
        /// How long it waited, in milliseconds.
        waited_ms: u64,
    },

    /// A stop signal (SIGINT, SIGTERM) came while waiting on a broker.
    #[error("stopped by a signal while waiting on broker {addr}")]
    Stopped {
        /// The broker's address.
        addr: String,
    },

    /// A broker answered with an error.
    #[error("the broker says: {message} ({code})")]
    Broker {
        /// The error code.
        code: ErrorCode,
        /// What it said.
        message: String,
    },

    /// A broker's bytes broke the protocol.
    #[error("broker {addr} broke the protocol: {reason}")]
    Protocol {
        /// The broker's address.
        addr: String,
        /// What was wrong.
        reason: String,
    },

    /// A ZooKeeper operation failed: which one, on which znode (or
    /// ensemble, for a connection), and why in words.
    #[error("ZooKeeper {op} {path}: {cause}")]
    ZooKeeper {
        /// What was being done ("create", "get", "set", "delete",
        /// "list children of", "connect to").
        op: &'static str,
        /// The znode as the caller named it (under the session's chroot),
        /// or the ensemble's address for a connection.
        path: String,
        /// Why it failed; callers branch on it (a node that exists, a
        /// stale version).
        cause: ZkCause,
    },
}

/// Why a ZooKeeper operation failed, in the terms callers branch on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ZkCause {
    /// The znode (or its parent, for a create) does not exist.
    NoNode,
    /// A znode already exists at the path.
    NodeExists,
    /// The znode's version is not the one the caller expected: someone
    /// changed it since the caller read it.
    BadVersion,
    /// The znode has children, so it cannot be deleted.
    NotEmpty,
    /// The znode is ephemeral and cannot have children.
    EphemeralParent,
    /// The session expired: its ephemeral znodes are gone.
    SessionExpired,
    /// The session was closed by its owner.
    Closed,
    /// No server answered, or the connection broke before the answer came
    /// (the operation may or may not have been applied), in the client's
    /// words.
    ConnectionLoss(String),
    /// No answer within the deadline.
    Deadline {
        /// The deadline, in milliseconds.
        waited_ms: u64,
    },
    /// Anything else, as the client library words it.
    Other(String),
}

impl fmt::Display for ZkCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZkCause::NoNode => f.write_str("the node (or its parent) does not exist"),
            ZkCause::NodeExists => f.write_str("the node already exists"),
            ZkCause::BadVersion => {
                f.write_str("the node's version is not the expected one (it changed meanwhile)")
            }
            ZkCause::NotEmpty => f.write_str("the node has children"),
            ZkCause::EphemeralParent => f.write_str("an ephemeral node cannot have children"),
            ZkCause::SessionExpired => f.write_str("the session expired"),
            ZkCause::Closed => f.write_str("the session is closed"),
            ZkCause::ConnectionLoss(reason) => f.write_str(reason),
            ZkCause::Deadline { waited_ms } => write!(f, "no answer within {waited_ms} ms"),
            ZkCause::Other(reason) => f.write_str(reason),
        }
    }
}

impl Error {
    /// Wraps an I/O error with the operation and the path it concerned; a
    /// full disk becomes [`Error::DiskFull`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        if is_disk_full(&source) {
            return Error::DiskFull {
                op,
                path: path.into(),
            };
        }
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// Whether an I/O error says the device (or a quota) is full.
pub fn is_disk_full(e: &std::io::Error) -> bool {
    let enospc = nix::errno::Errno::ENOSPC as i32;
    let edquot = nix::errno::Errno::EDQUOT as i32;
    matches!(e.raw_os_error(), Some(c) if c == enospc || c == edquot)
}

/// Adds the operation and path to an `io::Result`.
pub(crate) trait IoContext<T> {
    /// Names the operation and the path of a failed I/O call.
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| Error::io(op, path, source))
    }
}

/// Why bytes do not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes end before the structure does: a torn write, or more to read.
    #[error("truncated: {what} needs {needed_bytes} bytes, {available_bytes} available")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed_bytes: u64,
        /// Bytes there.
        available_bytes: u64,
    },
    /// A checksum does not match: the bytes were damaged.
    #[error("{what} crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// "batch header" or "record".
        what: &'static str,
        /// The CRC in the bytes.
        stored: u32,
        /// The CRC of the bytes.
        computed: u32,
    },
    /// A length beyond a limit.
    #[error("{what} of {size_bytes} bytes exceeds the limit of {limit_bytes} bytes")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its claimed size.
        size_bytes: u64,
        /// The limit.
        limit_bytes: u64,
    },
    /// Bytes that no encoder writes.
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// A version or codec this build does not read (an old message
    /// format, a compression type Kafka does not define).
    #[error("unsupported {what} {value}")]
    Unsupported {
        /// "magic", "compression type".
        what: &'static str,
        /// Its value.
        value: i64,
    },
    /// Compressed records their codec cannot read: cut short, damaged, or
    /// not that codec.
    #[error("{codec} records do not decompress: {why}")]
    Compression {
        /// The codec's name.
        codec: &'static str,
        /// The codec's reason.
        why: String,
    },
    /// The process's room for decompressed records is held by other
    /// batches now; the same batch can succeed later.
    #[error(
        "{held_bytes} bytes of decompressed records are held for other batches now; try again"
    )]
    Busy {
        /// Bytes held.
        held_bytes: u64,
    },
}

impl DecodeError {
    /// True when more bytes could make the structure whole (a torn tail).
    pub fn is_truncated(&self) -> bool {
        matches!(self, DecodeError::Truncated { .. })
    }
}

macro_rules! error_codes {
    ($($(#[$doc:meta])* $name:ident = $code:literal, $text:literal;)*) => {
        /// Error codes of responses.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u16)]
        pub enum ErrorCode { $($(#[$doc])* $name = $code,)* }

        impl ErrorCode {
            /// The code for a number; unknown numbers are `Unknown`.
            pub fn from_u16(v: u16) -> ErrorCode {
                match v { $($code => ErrorCode::$name,)* _ => ErrorCode::Unknown }
            }

            /// The code's name, in snake case.
            pub fn name(self) -> &'static str {
                match self { $(ErrorCode::$name => $text,)* }
            }
        }
    };
}

error_codes! {
    /// Success.
    None = 0, "none";
    /// An error this build does not know.
    Unknown = 1, "unknown";
    /// The offset is outside the partition's log.
    OffsetOutOfRange = 2, "offset_out_of_range";
    /// A batch failed its checks (length, CRC, format).
    CorruptBatch = 3, "corrupt_batch";
    /// No such topic.
    UnknownTopic = 4, "unknown_topic";
    /// No such partition of the topic.
    UnknownPartition = 5, "unknown_partition";
    /// A record is larger than `--max-record-bytes`.
    RecordTooLarge = 6, "record_too_large";
    /// The request frame is larger than `--max-request-bytes`.
    RequestTooLarge = 7, "request_too_large";
    /// The topic name breaks the naming rule.
    InvalidTopic = 8, "invalid_topic";
    /// Unknown api key or version.
    UnsupportedRequest = 9, "unsupported_request";
    /// The request's bytes do not decode.
    InvalidRequest = 10, "invalid_request";
    /// acks=all: the records were not durable within the timeout.
    Timeout = 11, "timeout";
    /// The topic exists already.
    TopicExists = 12, "topic_exists";
    /// The broker could not read or write its files.
    StorageError = 13, "storage_error";
    /// The broker is shutting down.
    ShuttingDown = 14, "shutting_down";
    /// A bound of the broker was hit (connections, topics).
    LimitReached = 15, "limit_reached";
    /// The partition is placed on another broker of the cluster.
    PartitionElsewhere = 16, "partition_elsewhere";
    /// The broker's disk is full: the records were not stored (none of
    /// them will appear); appends are accepted again once there is room.
    DiskFull = 17, "disk_full";
    /// This broker holds the partition but does not lead it now; the
    /// message names the leader when the broker knows it.
    NotLeader = 18, "not_leader";
    /// The request's leader epoch is older than the partition's: the
    /// sender follows a deposed leader and must learn the new one.
    FencedEpoch = 19, "fenced_epoch";
    /// The request's leader epoch is newer than this broker knows yet:
    /// retry once it has caught up.
    UnknownEpoch = 20, "unknown_epoch";
    /// acks=all refused: fewer replicas are in sync than the partition's
    /// minimum (`--min-insync-replicas`).
    NotEnoughReplicas = 21, "not_enough_replicas";
    /// No in-sync replica is alive to lead the partition: it is offline
    /// until one comes back.
    LeaderNotAvailable = 22, "leader_not_available";
    /// SASL refused the client: an unknown user or a wrong password.
    SaslAuthenticationFailed = 23, "sasl_authentication_failed";
    /// The broker does not take that SASL mechanism (or none at all).
    UnsupportedSaslMechanism = 24, "unsupported_sasl_mechanism";
    /// A request other than SASL's before the client logged in, or SASL
    /// out of order.
    IllegalSaslState = 25, "illegal_sasl_state";
    /// The ACLs do not allow the client this request (a topic's, a
    /// group's or the cluster's; the message names which).
    AuthorizationFailed = 26, "authorization_failed";
    /// An idempotent producer's batch does not follow its last one (a
    /// gap, or numbers already used for other records): send the batches
    /// again in order, from the first not acknowledged.
    OutOfOrderSequence = 27, "out_of_order_sequence";
    /// An idempotent producer's batch from an epoch older than its last:
    /// another instance of the producer took over.
    ProducerFenced = 28, "producer_fenced";
    /// A transactional producer's request its transaction's state does
    /// not allow (a batch outside the transaction it has open).
    InvalidTxnState = 29, "invalid_txn_state";
    /// A committed offset's write by a claim that a later claim of the
    /// partition replaced (its generation is older than the one stored).
    CommitFenced = 30, "commit_fenced";
    /// The transactional id's last transaction is still being completed
    /// (its markers written): retry.
    ConcurrentTransactions = 31, "concurrent_transactions";
    /// The transaction coordinator cannot reach the registry now: retry.
    CoordinatorNotAvailable = 32, "coordinator_not_available";
    /// The transactional id has no such producer id: init it first.
    InvalidProducerIdMapping = 33, "invalid_producer_id_mapping";
    /// A transaction timeout outside 1 ms to 15 minutes.
    InvalidTransactionTimeout = 34, "invalid_transaction_timeout";
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
