//! `klog-broker`: serves a data directory's topics over TCP.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::broker::{Broker, BrokerConfig};
use crate::limits;
use crate::storage::log::LogConfig;

/// Serves the topics of a data directory to producers and consumers over
/// TCP (the pull protocol), with zero-copy fetches and group-committed
/// fsyncs.
#[derive(Debug, Parser)]
#[command(
    name = "klog-broker",
    version,
    about = super::help::BROKER_ABOUT,
    long_about = None,
    after_help = super::help::after_help(&super::help::BROKER)
)]
pub struct Args {
    /// The data directory (created if missing).
    #[arg(
        long = "data-dir",
        value_name = "DIR",
        default_value = "./klog-data",
        env = "KLOG_BROKER_DATA_DIR"
    )]
    pub data_dir: PathBuf,
    /// Address to listen on; port 0 picks a free port. It serves klog's
    /// protocol and Kafka's (each connection's first request says which):
    /// kcat -b 127.0.0.1 reaches a broker started with the defaults.
    #[arg(long = "listen", value_name = "HOST:PORT", default_value = "127.0.0.1:9092", value_parser = super::listen_arg)]
    pub listen: String,
    /// Also listen on this address (both protocols too), and tell Kafka
    /// clients to connect here: the Kafka wire protocol (produce, fetch,
    /// metadata, list offsets, consumer groups, admin) on the same logs
    /// and registry.
    #[arg(long = "kafka-listen", value_name = "HOST:PORT", value_parser = super::listen_arg)]
    pub kafka_listen: Option<String>,
    /// The address Kafka clients are told to connect to (default: the
    /// --kafka-listen address, else the --listen one; needed when that is
    /// a wildcard such as 0.0.0.0).
    #[arg(long = "kafka-advertised", value_name = "HOST:PORT", value_parser = super::listen_arg)]
    pub kafka_advertised: Option<String>,
    /// Serve metrics for Prometheus at http://HOST:PORT/metrics:
    /// requests and their latency per API, each partition's offsets and
    /// in-sync replicas, groups' lag, connections, flush times.
    #[arg(long = "metrics-listen", value_name = "HOST:PORT", value_parser = super::listen_arg)]
    pub metrics_listen: Option<String>,
    /// Partitions of a topic created on first produce.
    #[arg(long = "partitions", value_name = "N", default_value_t = 1, value_parser = super::count_in::<u32>(1, u64::from(limits::PARTITIONS_MAX)))]
    pub partitions: u32,
    /// Create a topic when a client first produces to it or asks for its
    /// metadata (Kafka's auto.create.topics.enable). With false, such a
    /// client is told the topic does not exist; a create that names its
    /// partition count (an admin's) is still made.
    #[arg(long = "auto-create-topics", value_name = "BOOL", default_value = "true", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub auto_create_topics: bool,
    /// Partition directories the data directory may hold, over all topics,
    /// counted on disk (served, offline or placed elsewhere: each holds
    /// files the broker opens); a topic that would pass it is not created.
    #[arg(long = "max-partitions", value_name = "N", default_value_t = limits::BROKER_PARTITIONS_MAX as u64, value_parser = super::count_in::<u64>(1, 1_000_000))]
    pub partitions_max: u64,
    /// Segment size at which a log rolls (at least 4KiB).
    #[arg(long = "segment-bytes", value_name = "SIZE", default_value = "1GiB", value_parser = super::segment_size_arg)]
    pub segment_bytes: u64,
    /// Give new segments files of --segment-bytes zeros, written and synced
    /// ahead (32MiB a second, by a thread of their own), so that an fsync
    /// of appends commits no file system journal. Every segment is written
    /// twice; one spare is kept in DATA_DIR/preallocated (while the disk has
    /// twice its size free), and one more per partition near its roll or
    /// new.
    #[arg(long = "preallocate")]
    pub preallocate: bool,
    /// A segment older than this rolls at the next append.
    #[arg(long = "segment-age", value_name = "DURATION", value_parser = super::duration_arg)]
    pub segment_age_ms: Option<u64>,
    /// Bytes of log between two index entries.
    #[arg(long = "index-interval-bytes", value_name = "SIZE", default_value = "4096", value_parser = super::size_arg)]
    pub index_interval_bytes: u64,
    /// Delete segments whose newest record was appended longer ago than this.
    #[arg(long = "retention", value_name = "DURATION", default_value = "7d", value_parser = super::duration_arg)]
    pub retention_ms: u64,
    /// Delete the oldest segments while a partition is larger than this.
    #[arg(long = "retention-bytes", value_name = "SIZE", value_parser = super::size_arg)]
    pub retention_bytes: Option<u64>,
    /// How often retention runs.
    #[arg(long = "retention-check-interval", value_name = "DURATION", default_value = "5m", value_parser = super::duration_arg)]
    pub retention_check_interval_ms: u64,
    /// How topics without a cleanup.policy of their own let old records
    /// go: delete (whole segments, by --retention and --retention-bytes),
    /// compact (keep each key's latest record), or compact,delete.
    #[arg(long = "log-cleanup-policy", value_name = "POLICY", default_value = "delete", value_parser = cleanup_policy_arg)]
    pub cleanup_policy: String,
    /// Threads that compact topics (0: none).
    #[arg(long = "log-cleaner-threads", value_name = "N", default_value_t = 1, value_parser = super::count_in::<usize>(0, 64))]
    pub cleaner_threads: usize,
    /// Memory of the cleaner's key map, all threads together (24 bytes a
    /// key; a partition with more keys than fit is cleaned in several
    /// passes).
    #[arg(long = "log-cleaner-memory", value_name = "SIZE", default_value = "128MiB", value_parser = super::size_arg)]
    pub cleaner_memory: u64,
    /// Bytes a second the cleaner reads, at most (default: no bound).
    #[arg(long = "log-cleaner-io-bytes-per-second", value_name = "SIZE", value_parser = rate_arg)]
    pub cleaner_io_rate: Option<u64>,
    /// How long a cleaner thread with nothing to clean waits before it
    /// looks again.
    #[arg(long = "log-cleaner-backoff", value_name = "DURATION", default_value = "15s", value_parser = super::duration_arg)]
    pub cleaner_backoff_ms: u64,
    /// How long a compacted topic keeps a tombstone (a null value) after
    /// its segment was last written (topic config delete.retention.ms).
    #[arg(long = "log-cleaner-delete-retention", value_name = "DURATION", default_value = "1d", value_parser = super::duration_arg)]
    pub delete_retention_ms: u64,
    /// The dirty share of a compacted partition's closed segments that
    /// makes it worth a clean (topic config min.cleanable.dirty.ratio).
    #[arg(long = "log-cleaner-min-cleanable-ratio", value_name = "RATIO", default_value = "0.5", value_parser = ratio_arg)]
    pub min_cleanable_ratio: f64,
    /// Leave records younger than this uncompacted (topic config
    /// min.compaction.lag.ms).
    #[arg(long = "log-cleaner-min-compaction-lag", value_name = "DURATION", default_value = "0ms", value_parser = super::duration_arg)]
    pub min_compaction_lag_ms: u64,
    /// Forget an idempotent producer a partition has had no batch from for
    /// this long (Kafka's producer.id.expiration.ms), by its batches'
    /// timestamps and by the broker's clock when it took them (records
    /// stamped long ago keep a producer that sends), at the retention
    /// checks: its next batch starts it afresh, whatever its sequence.
    #[arg(long = "producer-id-expiration", value_name = "DURATION", default_value = "1d", value_parser = super::duration_arg)]
    pub producer_id_expiration_ms: u64,
    /// Read every partition's log back whole, each record's CRC checked,
    /// this often (a new partition's first an interval after it is made:
    /// its batches were checked on their way in), and soon after an
    /// unclean stop or the first open of a log no scrub has noted (0:
    /// never). Damage found in a replica is cut and
    /// refetched from its peers; in a single copy, it is reported.
    #[arg(long = "scrub-interval", value_name = "DURATION", default_value = "1d", value_parser = super::duration_arg)]
    pub scrub_interval_ms: u64,
    /// Bytes a second the scrub reads, at most.
    #[arg(long = "scrub-rate", value_name = "SIZE", default_value = "64MiB", value_parser = rate_arg)]
    pub scrub_rate_bytes: u64,
    /// Flush a partition after this many records. Without this and
    /// --flush-interval the broker flushes continuously, committing every
    /// group of appends with one fsync. Consumers see only flushed records.
    #[arg(long = "flush-messages", value_name = "N", value_parser = super::count_in::<u64>(1, u64::MAX))]
    pub flush_messages: Option<u64>,
    /// Flush a partition when its oldest unflushed record is this old.
    #[arg(long = "flush-interval", value_name = "DURATION", value_parser = super::duration_arg)]
    pub flush_interval_ms: Option<u64>,
    /// Largest record accepted.
    #[arg(long = "max-record-bytes", value_name = "SIZE", default_value = "1MiB", value_parser = super::record_size_arg)]
    pub record_bytes_max: u64,
    /// Largest request accepted (checked before allocating).
    #[arg(long = "max-request-bytes", value_name = "SIZE", default_value = "100MiB", value_parser = super::size_arg)]
    pub request_bytes_max: u64,
    /// Request bytes held in memory at once over all connections (Kafka's
    /// queued.max.request.bytes). A request larger than its connection's
    /// 64KiB buffer takes its bytes from this bound as they arrive; while
    /// it is full the connection waits, unread, up to --request-timeout.
    /// A Kafka fetch's records, read and converted, come from it too (at
    /// most half of it per answer). At least --max-request-bytes.
    #[arg(long = "max-queued-request-bytes", value_name = "SIZE", default_value = "512MiB", value_parser = super::size_arg)]
    pub queued_request_bytes_max: u64,
    /// Connections served at once; one over the cap is closed at once.
    #[arg(long = "max-connections", value_name = "N", default_value_t = limits::CONNECTIONS_MAX_DEFAULT as u64, value_parser = super::count_in::<u64>(1, 1_000_000))]
    pub connections_max: u64,
    /// Requests of one connection whose answers wait (acks=all for an
    /// fsync, fetches for records); past it the broker stops reading that
    /// connection until they are answered. Answers that need no wait go
    /// out as requests are read.
    #[arg(long = "max-in-flight", value_name = "N", default_value_t = limits::IN_FLIGHT_MAX_DEFAULT as u64, value_parser = super::count_in::<u64>(1, 4096))]
    pub in_flight_max: u64,
    /// A peer that starts a frame and does not finish it in this time is
    /// disconnected; the waits clients ask for (a fetch's wait for records,
    /// an acks=all timeout) end by this time too.
    #[arg(long = "request-timeout", value_name = "DURATION", default_value = "30s", value_parser = super::timeout_arg)]
    pub request_timeout_ms: u64,
    /// A connection idle this long between requests is closed, so that idle
    /// sockets cannot hold every slot of --max-connections.
    #[arg(long = "idle-timeout", value_name = "DURATION", default_value = "10m", value_parser = super::timeout_arg)]
    pub idle_timeout_ms: u64,
    /// Join this registry: register the broker and its topics there, for
    /// consumer groups (klog-consume -G) and clients with --registry to
    /// find. A directory (a cluster on one host) or a ZooKeeper ensemble,
    /// zk://HOST:PORT[,HOST:PORT...]/CHROOT (many hosts; the chroot is
    /// created on first use).
    #[arg(long = "registry", value_name = "REGISTRY", env = "KLOG_REGISTRY", value_parser = super::registry_arg)]
    pub registry: Option<PathBuf>,
    /// Replicas of each partition of the topics this broker creates (needs
    /// --registry and as many live brokers): one leader and followers that
    /// copy its log; a partition survives the loss of any minority of its
    /// replicas with no acknowledged (acks=all) record lost.
    #[arg(long = "replication-factor", value_name = "N", default_value_t = 1, value_parser = super::count_in::<u32>(1, 16))]
    pub replication_factor: u32,
    /// Partitions of the offsets topic (__consumer_offsets, where groups
    /// commit), when this broker is the one that creates it.
    #[arg(long = "offsets-topic-partitions", value_name = "N", default_value_t = 8, value_parser = super::count_in::<u32>(1, 1024))]
    pub offsets_topic_partitions: u32,
    /// Replicas of each partition of the offsets topic, when this broker
    /// creates it: at most the live brokers (commits then need two in
    /// sync where there are two).
    #[arg(long = "offsets-topic-replication-factor", value_name = "N", default_value_t = 3, value_parser = super::count_in::<u32>(1, 16))]
    pub offsets_topic_replication_factor: u32,
    /// acks=all produces are refused (not_enough_replicas) while fewer
    /// replicas than this are in sync. Default: 2, or 1 with
    /// --replication-factor 1.
    #[arg(long = "min-insync-replicas", value_name = "N", value_parser = super::count_in::<u32>(1, 16))]
    pub min_insync_replicas: Option<u32>,
    /// A follower that has not caught up with its leader for this long
    /// leaves the in-sync replicas (it joins again once it catches up).
    #[arg(long = "replica-lag-time", value_name = "DURATION", default_value = "10s", value_parser = super::timeout_arg)]
    pub replica_lag_time_ms: u64,
    /// The broker's session with the registry: a broker silent this long
    /// (stopped, cut off) is taken for dead, its registration lapses and
    /// its partitions get new leaders; it registers again when it runs.
    #[arg(long = "session-timeout", value_name = "DURATION", default_value = "10s", value_parser = super::timeout_arg)]
    pub session_timeout_ms: u64,
    /// Only print errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// TLS and SASL.
    #[command(flatten)]
    pub security: super::security::SecurityArgs,
    /// Manage the registry's users instead of serving.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What `klog-broker` does instead of serving.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Add, remove or list SASL users (SCRAM credentials in --registry).
    #[command(subcommand)]
    User(super::security::UserCommand),
    /// Add, remove or list ACLs (in --registry; they count with
    /// --authorize).
    #[command(subcommand)]
    Acl(super::security::AclCommand),
}

/// Checks and sets the replication flags.
fn replication(args: &Args, config: &mut BrokerConfig) -> anyhow::Result<()> {
    if args.replication_factor > 1 && args.registry.is_none() {
        return Err(super::Usage(format!(
            "--replication-factor {} needs --registry: replicas live on several brokers",
            args.replication_factor
        ))
        .into());
    }
    let min_isr = args
        .min_insync_replicas
        .unwrap_or(args.replication_factor.min(2));
    if min_isr > args.replication_factor {
        return Err(super::Usage(format!(
            "--min-insync-replicas {min_isr} is more than --replication-factor {}: acks=all could never succeed",
            args.replication_factor
        ))
        .into());
    }
    config.replication_factor = args.replication_factor;
    config.min_insync_replicas = min_isr;
    config.replica_lag_time = std::time::Duration::from_millis(args.replica_lag_time_ms);
    Ok(())
}

/// Says loudly (even with -q) when a listener is reachable from beyond
/// this host and nothing authenticates a client (neither SASL nor client
/// certificates).
fn warn_if_open(addrs: impl Iterator<Item = std::net::SocketAddr>, authenticated: bool) {
    if authenticated {
        return;
    }
    for addr in addrs.filter(|a| !a.ip().is_loopback()) {
        crate::diag::line(format_args!(
            "% WARNING: listening on {addr}, beyond this host, with no authentication: anyone who reaches it can read and write every topic"
        ));
    }
}

/// Raises the soft limit of open files to the hard one: each partition
/// holds files open, and a data directory the broker wrote must open again
/// whatever the shell's default (often 1024) is.
fn raise_open_file_limit(say: &crate::tools::Say) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => say.info(format_args!(
                "Raised the open-file limit from {soft} to {hard}"
            )),
            Err(e) => crate::diag::line(format_args!(
                "% cannot raise the open-file limit from {soft} to {hard}: {e}"
            )),
        }
    }
}

/// The log config of topics without configs of their own, from the flags.
fn log_config(args: &Args) -> Result<LogConfig, super::Usage> {
    Ok(LogConfig {
        segment_bytes: args.segment_bytes,
        segment_age_ms: args.segment_age_ms,
        index_interval_bytes: u32::try_from(args.index_interval_bytes)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                super::Usage("--index-interval-bytes must be between 1 and 4GiB".into())
            })?,
        retention_ms: Some(args.retention_ms),
        retention_bytes: args.retention_bytes,
        record_bytes_max: u32::try_from(args.record_bytes_max).unwrap_or(u32::MAX),
        compact: args.cleanup_policy.contains("compact"),
        delete: args.cleanup_policy.contains("delete"),
        delete_retention_ms: args.delete_retention_ms,
        min_cleanable_dirty_ratio: args.min_cleanable_ratio,
        min_compaction_lag_ms: args.min_compaction_lag_ms,
        ..LogConfig::default()
    })
}

/// How the cleaner runs, from the flags.
fn cleaner_config(args: &Args) -> crate::broker::CleanerConfig {
    crate::broker::CleanerConfig {
        threads: args.cleaner_threads,
        memory_bytes: args.cleaner_memory,
        io_bytes_per_second: args.cleaner_io_rate,
        backoff: Duration::from_millis(args.cleaner_backoff_ms),
    }
}

/// A `cleanup.policy`, in canonical form.
fn cleanup_policy_arg(s: &str) -> Result<String, String> {
    let mut config = crate::coord::topic_config::TopicConfig::new();
    config.set("cleanup.policy", s)?;
    Ok(config.get("cleanup.policy").unwrap_or("delete").to_string())
}

/// A share from 0 to 1.
fn ratio_arg(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{s:?} is not a number from 0 to 1")),
    }
}

/// A clap value parser for `--scrub-rate` and
/// `--log-cleaner-io-bytes-per-second`: a size above zero.
fn rate_arg(s: &str) -> Result<u64, String> {
    match super::size_arg(s)? {
        0 => Err(format!("{s:?} reads nothing: the rate must be above 0")),
        n => Ok(n),
    }
}

/// Runs `klog-broker`: serves, or runs its command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match &args.command {
        Some(Command::User(user)) => super::security::run_user(args.registry.as_deref(), user),
        Some(Command::Acl(acl)) => super::security::run_acl(args.registry.as_deref(), acl),
        None => serve(args),
    }
}

/// Serves the data directory until a stop signal.
fn serve(args: Args) -> anyhow::Result<ExitCode> {
    super::handle_signals(|| {})?;
    let say = crate::tools::Say { quiet: args.quiet };
    let log = log_config(&args)?;
    let mut config = BrokerConfig::new(&args.data_dir, &args.listen);
    config.kafka_listen = args.kafka_listen.clone();
    config.kafka_advertised = args.kafka_advertised.clone();
    config.metrics_listen = args.metrics_listen.clone();
    config.partitions_default = args.partitions;
    config.auto_create_topics = args.auto_create_topics;
    config.partitions_max = args.partitions_max as usize;
    config.log = log;
    config.preallocate = args.preallocate;
    config.flush_messages = args.flush_messages;
    config.flush_interval_ms = args.flush_interval_ms;
    config.retention_check_interval_ms = args.retention_check_interval_ms;
    config.cleaner = cleaner_config(&args);
    config.producer_id_expiration_ms = args.producer_id_expiration_ms;
    config.scrub_interval =
        (args.scrub_interval_ms > 0).then(|| Duration::from_millis(args.scrub_interval_ms));
    config.scrub_rate_bytes = args.scrub_rate_bytes;
    config.request_bytes_max = u32::try_from(args.request_bytes_max)
        .ok()
        .filter(|&n| n as usize >= crate::protocol::REQUEST_HEADER_BYTES)
        .ok_or_else(|| {
            super::Usage("--max-request-bytes must be between 8 bytes and 4GiB".into())
        })?;
    if args.queued_request_bytes_max < u64::from(config.request_bytes_max) {
        return Err(super::Usage(format!(
            "--max-queued-request-bytes ({}) is smaller than --max-request-bytes ({}): the largest request could never be read",
            args.queued_request_bytes_max,
            config.request_bytes_max
        ))
        .into());
    }
    config.queued_request_bytes_max = args.queued_request_bytes_max;
    config.connections_max = args.connections_max as usize;
    config.in_flight_max = args.in_flight_max as usize;
    config.request_timeout_ms = args.request_timeout_ms;
    config.idle_timeout_ms = args.idle_timeout_ms;
    config.registry = args.registry.clone();
    replication(&args, &mut config)?;
    config.offsets_topic_partitions = args.offsets_topic_partitions;
    config.offsets_topic_replication_factor = args.offsets_topic_replication_factor;
    config.session_timeout = std::time::Duration::from_millis(args.session_timeout_ms);
    config.quiet = args.quiet;
    config.security = args.security.apply()?;
    raise_open_file_limit(&say);
    let broker = Broker::open(config)?;
    announce(&say, &broker.handle()?, &args);
    broker.run()?;
    say.info("Shut down cleanly");
    Ok(ExitCode::SUCCESS)
}

/// Says where the broker listens, and warns of a listener beyond this host
/// that authenticates nobody.
fn announce(say: &crate::tools::Say, handle: &crate::broker::BrokerHandle, args: &Args) {
    if let Some(kafka) = handle.kafka_addr() {
        say.info(format_args!("Listening for Kafka clients on {kafka}"));
    }
    if let Some(metrics) = handle.metrics_addr() {
        say.info(format_args!("Serving metrics on http://{metrics}/metrics"));
    }
    let authenticated =
        args.security.sasl_mechanisms.is_some() || args.security.tls_client_ca.is_some();
    let listeners = std::iter::once(handle.local_addr()).chain(handle.kafka_addr());
    warn_if_open(listeners, authenticated);
    // Scripts and tests wait for this line (not printed with -q).
    say.info(format_args!("Listening on {}", handle.local_addr()));
}
