//! `klog-produce`: records from stdin (or files) into a topic, like `kcat -P`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::client::BatchOptions;
use crate::limits;
use crate::storage::log::LogConfig;
use crate::storage::record::Codec;
use crate::tools::produce::{self, ParseOptions};

use super::config::{self, Property, Setting};

/// Reads records from stdin (or FILEs), one per line by default (-l: one
/// record per FILE), and appends them to a topic.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "klog-produce",
    version,
    about = super::help::PRODUCE_ABOUT,
    long_about = None,
    after_help = super::help::after_help(&super::help::PRODUCE)
)]
pub struct Args {
    /// Topic to produce to (created on first use, with --partitions).
    #[arg(short = 't', long = "topic", value_parser = super::topic_arg, required_unless_present = "list")]
    pub topic: Option<String>,
    /// Fixed partition (default: hash of the key, round-robin without one).
    #[arg(short = 'p', long = "partition", value_name = "N", value_parser = super::count_in::<u32>(0, u64::from(u32::MAX)))]
    pub partition: Option<u32>,
    /// With -J: each record goes to the partition its envelope names (its
    /// source's), as a mirror keeps partitions; a record whose envelope
    /// names none (topic, partition and offset), or a partition the topic
    /// lacks, is refused (% line N, exit 1 at the end).
    #[arg(
        long = "source-partition",
        requires = "json",
        conflicts_with = "partition"
    )]
    pub source_partition: bool,
    /// Split each record at the first DELIM into key and value.
    #[arg(short = 'K', value_name = "DELIM", value_parser = super::delimiter_arg, conflicts_with_all = ["key", "json"])]
    pub key_delimiter: Option<super::Delimiter>,
    /// Fixed key for every record.
    #[arg(short = 'k', long = "key", value_name = "KEY", conflicts_with = "json")]
    pub key: Option<String>,
    /// Record delimiter (escapes: \n \t \0 \xNN).
    #[arg(short = 'D', value_name = "DELIM", default_value = "\\n", value_parser = super::delimiter_arg)]
    pub delimiter: super::Delimiter,
    /// Header added to every record (repeatable).
    #[arg(short = 'H', value_name = "NAME=VALUE", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,
    /// Input records are the JSON envelopes that klog-consume -J prints.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Send an empty value as null, as kcat's -Z: a tombstone, which
    /// deletes its key from a compacted topic (`key:` with -K). With -J, a
    /// null payload is always null.
    #[arg(short = 'Z')]
    pub null_empty: bool,
    /// Compress each batch with this codec, as kcat's -z: none, gzip,
    /// snappy, lz4 or zstd. Batches are stored as sent, compressed, and
    /// every consumer (klog's and Kafka's) reads them.
    #[arg(short = 'z', long = "compression", value_name = "CODEC", default_value = "none", value_parser = super::codec_arg)]
    pub compression: Codec,
    /// The codec's compression level (gzip 1 to 9, zstd 1 to 22; lz4 and
    /// snappy take none): -X compression.level.
    #[arg(
        long = "compression-level",
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub compression_level: Option<i32>,
    /// Records per batch at most (librdkafka's batch.num.messages, and its
    /// default): with --batch-bytes, what one request carries. An
    /// idempotent producer has five batches of a partition in flight at
    /// most, so large batches keep it fast.
    #[arg(long = "batch", value_name = "N", default_value_t = 10_000, value_parser = super::count_in::<u32>(1, u64::from(limits::BATCH_RECORDS_MAX)))]
    pub batch_records: u32,
    /// Bytes per batch.
    #[arg(long = "batch-bytes", value_name = "SIZE", default_value = "1MiB", value_parser = super::size_arg)]
    pub batch_bytes: u64,
    /// The most a batch waits after its first record before it is
    /// written, whatever the input does.
    #[arg(long = "linger", value_name = "DURATION", default_value = "100ms", value_parser = super::duration_arg)]
    pub linger_ms: u64,
    /// Acknowledgements: 0 (none), 1 (appended), all (durable). With
    /// --registry, a batch refused because its partition's leader moved
    /// (or has too few in-sync replicas), or whose connection broke, is
    /// sent again to the leader within --message-timeout: with no
    /// idempotence, a record may then appear twice.
    #[arg(long = "acks", value_name = "0|1|all", default_value = "all", value_parser = super::acks_arg)]
    pub acks: i8,
    /// With --acks all the producer is idempotent (as Kafka's since 3.0):
    /// it takes a producer id and numbers its batches, so that a batch
    /// sent again (a broken connection, a moved leader) is stored once,
    /// and batches keep their order. This turns that off
    /// (-X enable.idempotence=false).
    #[arg(long = "no-idempotence")]
    pub no_idempotence: bool,
    /// -X enable.idempotence=true: asked for, so --acks must be all.
    #[arg(skip)]
    pub idempotence_asked: bool,
    /// Delivery deadline: a record the broker has not acknowledged this
    /// long after it was read counts as failed (connecting included; exit
    /// 1). SIGINT or SIGTERM gives what was sent half a second more, a
    /// second signal ends at once.
    #[arg(long = "message-timeout", value_name = "DURATION", default_value = "30s", value_parser = super::timeout_arg)]
    pub message_timeout_ms: u64,
    /// A request a broker leaves unanswered this long (it hangs, or is
    /// stopped) gives that connection up: its batches go again, to their
    /// partitions' leaders looked up again, within --message-timeout
    /// (a record may then appear twice). The broker waits for acks=all
    /// no longer either. Batches of other brokers never wait for it.
    #[arg(long = "request-timeout", value_name = "DURATION", default_value = "5s", value_parser = super::timeout_arg)]
    pub request_timeout_ms: u64,
    /// How often the topic's partition count is asked again (of the
    /// broker, or the registry): once the topic grew (CreatePartitions),
    /// what was sent is delivered and the records that follow go over
    /// every partition (a key's partition may then change, as in Kafka;
    /// not with --acks 0 nor -p).
    #[arg(long = "metadata-refresh", value_name = "DURATION", default_value = "5m", value_parser = super::timeout_arg)]
    pub metadata_refresh_ms: u64,
    /// Embedded mode: partitions of a topic this command creates (with a
    /// broker, the broker's --partitions applies).
    #[arg(long = "partitions", value_name = "N", default_value_t = 1, value_parser = super::count_in::<u32>(1, u64::from(limits::PARTITIONS_MAX)))]
    pub partitions: u32,
    /// The broker to send to.
    #[arg(
        short = 'b',
        long = "broker",
        value_name = "HOST[:PORT]",
        default_value = "127.0.0.1:9092",
        env = "KLOG_BROKER",
        value_parser = super::broker_arg
    )]
    pub broker: String,
    /// Embedded mode: append to the logs in this data directory directly,
    /// with no broker (takes each partition's writer lock).
    #[arg(long = "data-dir", value_name = "DIR", env = "KLOG_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Find each partition's broker in this registry (a cluster of
    /// brokers) instead of sending everything to -b: a directory (one
    /// host) or a ZooKeeper ensemble, zk://HOST:PORT[,HOST:PORT...]/CHROOT
    /// (many hosts).
    #[arg(long = "registry", value_name = "REGISTRY", env = "KLOG_REGISTRY", value_parser = super::registry_arg)]
    pub registry: Option<PathBuf>,
    /// Embedded mode: segment size at which a log rolls.
    #[arg(long = "segment-bytes", value_name = "SIZE", default_value = "1GiB", value_parser = super::segment_size_arg)]
    pub segment_bytes: u64,
    /// Largest record accepted.
    #[arg(long = "max-record-bytes", value_name = "SIZE", default_value = "1MiB", value_parser = super::record_size_arg)]
    pub record_bytes_max: u64,
    /// A client setting by its Kafka property name, in Kafka's units
    /// (repeatable): bootstrap.servers (-b), batch.num.messages (--batch),
    /// batch.size (--batch-bytes), linger.ms (--linger), acks (--acks),
    /// compression.type or compression.codec (-z), compression.level
    /// (--compression-level),
    /// message.timeout.ms or delivery.timeout.ms (--message-timeout),
    /// request.timeout.ms (--request-timeout), message.max.bytes
    /// (--max-record-bytes), topic.metadata.refresh.interval.ms or
    /// metadata.max.age.ms (--metadata-refresh); client.id is accepted and
    /// ignored. Of a flag and a property for the same setting, the later
    /// on the command line wins.
    #[arg(short = 'X', value_name = "NAME=VALUE", value_parser = config::property_arg)]
    pub config: Vec<Property>,
    /// List the brokers, topics and partitions (leader, replicas, in-sync
    /// replicas, start and end offsets) and exit, like kcat -L: of the
    /// broker (-b), the cluster (--registry) or the data directory
    /// (--data-dir); -t for one topic, -J for JSON. With --registry, each
    /// partition's leader, replicas and in-sync replicas are those of its
    /// replication state, and its end offset the leader's high watermark;
    /// each leader gets 1s in all to answer (all asked at once): a silent
    /// one's partitions are unreachable and a % line on stderr names it.
    #[arg(short = 'L', long = "list")]
    pub list: bool,
    /// Send each FILE as one record, as kcat does with file arguments
    /// (without -l, FILEs are split at the delimiter like stdin, which is
    /// what kcat's own -l does).
    #[arg(short = 'l', long = "file-per-record")]
    pub file_per_record: bool,
    /// Write each record a broker acknowledged to FILE as it is
    /// acknowledged, one JSON line each: {"topic","partition","offset",
    /// "value"} (a value that is not UTF-8 in base64, with
    /// "value_encoding":"base64"), flushed with each answer. With --acks
    /// all, every record in FILE is stored on every in-sync replica at that
    /// offset. With -J, a record whose envelope names its topic, partition
    /// and offset has them in "source" (klog-consume --commit-from reads
    /// them: a mirror that loses nothing). Needs a broker (-b or
    /// --registry) and --acks 1 or all.
    #[arg(long = "report", value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Audit (the paper's): stamp every record with headers naming its
    /// origin (klog.host, klog.producer: this run's id) and its number
    /// (klog.seq), count the records per window of their timestamps, and
    /// publish each window's count to TOPIC, one JSON record per window:
    /// {"producer","host","topic","window","window_ms","count"}, at every
    /// window boundary and at the end (a window again when it grows).
    /// klog-consume --audit TOPIC reconciles them.
    #[arg(long = "audit-topic", value_name = "TOPIC", value_parser = super::topic_arg, conflicts_with = "data_dir")]
    pub audit_topic: Option<String>,
    /// The audit's window, aligned to the wall clock (minutes, by
    /// default).
    #[arg(long = "audit-window", value_name = "DURATION", default_value = "1m", value_parser = window_arg, requires = "audit_topic")]
    pub audit_window_ms: u64,
    /// Transactional, exactly once (-X transactional.id): the batches go
    /// in transactions of this id, each committed every
    /// --transaction-interval and at the end, once all its records are on
    /// every in-sync replica; read_committed consumers see a
    /// transaction's records all or none. Starting fences every earlier
    /// instance of the id and aborts its open transaction. With -J, each
    /// transaction also commits its records' source offsets to the
    /// destination's group of this name, and a record whose source offset
    /// a committed transaction holds is not sent again (a mirror that
    /// stores each record once; --report then says "stored_before"). The
    /// --report lists a record once its transaction committed. Needs
    /// --registry and --acks all; one instance per id.
    #[arg(long = "transactional-id", value_name = "ID", value_parser = super::group_arg)]
    pub transactional_id: Option<String>,
    /// How long a transaction stays open: it commits this long after its
    /// first batch went (and sooner when its report lines pass 16 MiB).
    #[arg(long = "transaction-interval", value_name = "DURATION", default_value = "100ms", value_parser = super::duration_arg)]
    pub transaction_interval_ms: u64,
    /// A transaction the coordinator has seen open this long is aborted,
    /// and the producer fenced (-X transaction.timeout.ms; 1ms to 15m).
    #[arg(long = "transaction-timeout", value_name = "DURATION", default_value = "60s", value_parser = transaction_timeout_arg)]
    pub transaction_timeout_ms: u64,
    /// Only print errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// Files to read instead of stdin, split like stdin (with -l, each one
    /// record; an empty one is then skipped); "-" is stdin.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// kcat's producer mode: accepted, as this tool produces.
    #[arg(short = 'P')]
    pub producer_mode: bool,
    /// kcat's consumer mode: refused, with the tool that consumes.
    #[arg(short = 'C', hide = true)]
    pub consumer_mode: bool,
}

/// The `-X` properties klog-produce takes.
fn settings() -> Vec<Setting<Args>> {
    let mut settings = batch_settings();
    settings.extend(delivery_settings());
    settings.extend(transaction_settings());
    settings
}

/// The `-X` properties of klog-produce's transactions.
fn transaction_settings() -> Vec<Setting<Args>> {
    vec![
        Setting {
            names: &["transactional.id"],
            flag: "transactional_id",
            set: |a, v| {
                a.transactional_id = Some(super::group_arg(v)?);
                Ok(())
            },
        },
        Setting {
            names: &["transaction.timeout.ms"],
            flag: "transaction_timeout_ms",
            set: |a, v| {
                let ms = config::ms(v)?;
                a.transaction_timeout_ms = transaction_timeout_arg(&format!("{ms}ms"))?;
                Ok(())
            },
        },
    ]
}

/// The `-X` properties of klog-produce's batches (and its broker).
fn batch_settings() -> Vec<Setting<Args>> {
    vec![
        Setting {
            names: &["bootstrap.servers", "metadata.broker.list"],
            flag: "broker",
            set: |a, v| {
                a.broker = super::servers_arg(v)?;
                Ok(())
            },
        },
        Setting {
            names: &["batch.num.messages"],
            flag: "batch_records",
            set: |a, v| {
                let n = config::bytes(v, u64::from(limits::BATCH_RECORDS_MAX)).map_err(|_| {
                    format!(
                        "{v:?} is not a count from 1 to {}",
                        limits::BATCH_RECORDS_MAX
                    )
                })?;
                {
                    a.batch_records = n as u32;
                    Ok(())
                }
            },
        },
        Setting {
            names: &["compression.type", "compression.codec"],
            flag: "compression",
            set: |a, v| {
                a.compression = super::codec_arg(v)?;
                Ok(())
            },
        },
        Setting {
            names: &["compression.level"],
            flag: "compression_level",
            set: |a, v| {
                let level = v
                    .parse::<i32>()
                    .map_err(|_| format!("{v:?} is not a compression level"))?;
                a.compression_level = Some(level);
                Ok(())
            },
        },
        Setting {
            names: &["batch.size"],
            flag: "batch_bytes",
            set: |a, v| {
                a.batch_bytes = config::bytes(v, u64::from(limits::BATCH_BYTES_MAX))?;
                Ok(())
            },
        },
    ]
}

/// The `-X` properties of klog-produce's delivery.
fn delivery_settings() -> Vec<Setting<Args>> {
    vec![
        Setting {
            names: &["linger.ms", "queue.buffering.max.ms"],
            flag: "linger_ms",
            set: |a, v| {
                a.linger_ms = config::ms(v)?;
                Ok(())
            },
        },
        Setting {
            names: &["acks", "request.required.acks"],
            flag: "acks",
            set: |a, v| {
                a.acks = super::acks_arg(v)?;
                Ok(())
            },
        },
        Setting {
            names: &["enable.idempotence"],
            flag: "no_idempotence",
            set: |a, v| {
                a.no_idempotence = !config::boolean(v)?;
                a.idempotence_asked = !a.no_idempotence;
                Ok(())
            },
        },
        Setting {
            names: &["message.timeout.ms", "delivery.timeout.ms"],
            flag: "message_timeout_ms",
            set: |a, v| {
                a.message_timeout_ms = config::ms_above_zero(v, "a message timeout")?;
                Ok(())
            },
        },
        Setting {
            names: &["topic.metadata.refresh.interval.ms", "metadata.max.age.ms"],
            flag: "metadata_refresh_ms",
            set: |a, v| {
                a.metadata_refresh_ms = config::ms_above_zero(v, "a metadata refresh")?;
                Ok(())
            },
        },
        Setting {
            names: &["request.timeout.ms"],
            flag: "request_timeout_ms",
            set: |a, v| {
                a.request_timeout_ms = config::ms_above_zero(v, "a request timeout")?;
                Ok(())
            },
        },
        Setting {
            names: &["message.max.bytes"],
            flag: "record_bytes_max",
            set: |a, v| {
                let max = u64::from(limits::RECORD_BYTES_MAX_LIMIT);
                {
                    a.record_bytes_max = config::bytes(v, max)?;
                    Ok(())
                }
            },
        },
    ]
}

/// A delivery deadline: a duration of at least 1ms.
fn parse_header(s: &str) -> Result<(String, String), String> {
    let (n, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    Ok((n.to_string(), v.to_string()))
}

/// Applies `-X` to the arguments, and says what it ignored.
fn configure(args: &mut Args, matches: &clap::ArgMatches) -> Result<config::Applied, super::Usage> {
    let properties = std::mem::take(&mut args.config);
    let applied = config::apply(args, &properties, matches, &settings())?;
    applied.say(args.quiet);
    applied
        .secure()
        .map_err(|e| super::Usage(format!("{e:#}")))?;
    Ok(applied)
}

/// A compression level is one the codec takes (librdkafka's -1 is its
/// default).
fn check_level(args: &mut Args) -> Result<(), super::Usage> {
    let Some(level) = args.compression_level else {
        return Ok(());
    };
    if level == -1 {
        args.compression_level = None;
        return Ok(());
    }
    match args.compression.levels() {
        Some(levels) if levels.contains(&level) => Ok(()),
        Some(levels) => Err(super::Usage(format!(
            "compression level {level} for {}: it takes {} to {} (or -1, its default)",
            args.compression,
            levels.start(),
            levels.end()
        ))),
        None => Err(super::Usage(format!(
            "compression level {level}: {} takes no level (-z gzip or zstd do)",
            args.compression
        ))),
    }
}

/// Idempotence asked for (`-X enable.idempotence=true`) needs `--acks
/// all`, as Kafka's producer refuses it otherwise: a batch only the
/// leader took may be lost, and with it the numbers after it.
fn check_idempotence(args: &Args) -> Result<(), super::Usage> {
    if args.idempotence_asked && args.acks != crate::protocol::ACKS_ALL {
        return Err(super::Usage(
            "enable.idempotence=true needs --acks all (-X acks=all)".into(),
        ));
    }
    Ok(())
}

/// A transactional producer sends through a registry, with acks all and
/// idempotence (its batches are numbered).
fn check_transactional(args: &Args) -> Result<(), super::Usage> {
    let Some(id) = &args.transactional_id else {
        return Ok(());
    };
    let why = if args.registry.is_none() {
        "needs --registry (the cluster's registry: its transaction's partitions and its \
         group's offsets are found there)"
    } else if args.acks != crate::protocol::ACKS_ALL {
        "needs --acks all: a transaction's records are on every in-sync replica before it commits"
    } else if args.no_idempotence {
        "numbers its batches: not with --no-idempotence"
    } else if args.transaction_interval_ms >= args.transaction_timeout_ms {
        "needs a --transaction-interval shorter than its --transaction-timeout (each \
         transaction would time out)"
    } else {
        return Ok(());
    };
    Err(super::Usage(format!("--transactional-id {id:?} {why}")))
}

/// `--report` lists what brokers acknowledged: with a broker, and acks.
fn check_report(args: &Args) -> Result<(), super::Usage> {
    if args.report.is_none() {
        return Ok(());
    }
    if args.data_dir.is_some() {
        return Err(super::Usage(
            "--report lists what brokers acknowledged: it needs -b or --registry, not --data-dir"
                .into(),
        ));
    }
    if args.acks == crate::protocol::ACKS_NONE {
        return Err(super::Usage(
            "--report lists acknowledged records, and with --acks 0 none is: use --acks 1 or all"
                .into(),
        ));
    }
    Ok(())
}

/// Runs `klog-produce`; `matches` tell a flag from the environment.
pub fn run(mut args: Args, matches: &clap::ArgMatches) -> anyhow::Result<ExitCode> {
    if args.consumer_mode {
        return Err(super::Usage(
            "klog-produce produces (kcat -P); to consume (kcat -C), run klog-consume".into(),
        )
        .into());
    }
    let applied = configure(&mut args, matches)?;
    super::choose_target(matches, &applied, &mut args.data_dir, &mut args.registry)?;
    check_report(&args)?;
    check_idempotence(&args)?;
    check_transactional(&args)?;
    check_level(&mut args)?;
    super::handle_signals(|| {})?;
    if args.list {
        crate::tools::list::run(&crate::tools::list::Options {
            topic: args.topic,
            broker: args.broker,
            data_dir: args.data_dir,
            registry: args.registry,
            json: args.json,
            quiet: args.quiet,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let transaction = transaction_options(&mut args);
    let options = produce::Options {
        topic: args.topic.expect("clap requires -t without -L"),
        partition: args.partition,
        parse: ParseOptions {
            key_delimiter: args.key_delimiter.map(|d| d.0),
            key: args.key.map(String::into_bytes),
            json: args.json,
            null_empty: args.null_empty,
        },
        delimiter: args.delimiter.0,
        headers: args.headers,
        batch: BatchOptions {
            records_max: args.batch_records,
            bytes_max: usize::try_from(args.batch_bytes).unwrap_or(usize::MAX),
            codec: args.compression,
            level: args.compression_level,
        },
        linger_ms: args.linger_ms,
        acks: args.acks,
        idempotent: args.acks == crate::protocol::ACKS_ALL && !args.no_idempotence,
        message_timeout_ms: args.message_timeout_ms,
        request_timeout_ms: args.request_timeout_ms,
        metadata_refresh_ms: args.metadata_refresh_ms,
        partitions: args.partitions,
        broker: args.broker,
        data_dir: args.data_dir,
        registry: args.registry,
        log: LogConfig {
            segment_bytes: args.segment_bytes,
            record_bytes_max: u32::try_from(args.record_bytes_max).unwrap_or(u32::MAX),
            ..LogConfig::default()
        },
        quiet: args.quiet,
        files: args.files,
        whole_files: args.file_per_record,
        report: args.report,
        source_partition: args.source_partition,
        audit: args.audit_topic.map(|topic| (topic, args.audit_window_ms)),
        transaction,
    };
    produce::run(&options)?;
    Ok(ExitCode::SUCCESS)
}

/// The transaction's settings, when `--transactional-id` is given.
fn transaction_options(args: &mut Args) -> Option<produce::TransactionOptions> {
    (args.transactional_id.take()).map(|id| produce::TransactionOptions {
        id,
        interval_ms: args.transaction_interval_ms,
        timeout_ms: u32::try_from(args.transaction_timeout_ms).unwrap_or(u32::MAX),
    })
}

/// A clap value parser for `--transaction-timeout`: 1ms to 15 minutes
/// (Kafka's `transaction.max.timeout.ms` default).
fn transaction_timeout_arg(s: &str) -> Result<u64, String> {
    let max = u64::from(crate::protocol::TXN_TIMEOUT_MS_MAX);
    match crate::human::parse_duration_ms(s)? {
        ms if (1..=max).contains(&ms) => Ok(ms),
        _ => Err(format!("a transaction timeout of {s:?}: give 1ms to 15m")),
    }
}

/// A clap value parser for `--audit-window`: 100ms at least.
fn window_arg(s: &str) -> Result<u64, String> {
    match crate::human::parse_duration_ms(s)? {
        ms if ms < 100 => Err(format!(
            "an audit window of {s:?} is too short: give 100ms or more"
        )),
        ms => Ok(ms),
    }
}
