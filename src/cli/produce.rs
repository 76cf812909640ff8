//! `klog-produce`: records from stdin (or files) into a topic, like `kcat -P`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::client::BatchOptions;
use crate::limits;
use crate::storage::log::LogConfig;
use crate::tools::produce::{self, ParseOptions};

/// Reads records from stdin (or FILEs), one per line by default, and
/// appends them to a topic.
#[derive(Debug, Parser)]
#[command(
    name = "klog-produce",
    version,
    about = super::help::PRODUCE_ABOUT,
    long_about = None,
    after_help = super::help::after_help(&super::help::PRODUCE)
)]
pub struct Args {
    /// Topic to produce to (created on first use, with --partitions).
    #[arg(short = 't', long = "topic", value_parser = super::topic_arg)]
    pub topic: String,
    /// Fixed partition (default: hash of the key, round-robin without one).
    #[arg(short = 'p', long = "partition")]
    pub partition: Option<u32>,
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
    /// Records per batch.
    #[arg(long = "batch", value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::BATCH_RECORDS_MAX)))]
    pub batch_records: u32,
    /// Bytes per batch.
    #[arg(long = "batch-bytes", value_name = "SIZE", default_value = "1MiB", value_parser = super::size_arg)]
    pub batch_bytes: u64,
    /// The most a batch waits after its first record before it is
    /// written, whatever the input does.
    #[arg(long = "linger", value_name = "DURATION", default_value = "100ms", value_parser = super::duration_arg)]
    pub linger_ms: u64,
    /// Acknowledgements: 0 (none), 1 (appended), all (durable).
    #[arg(long = "acks", value_name = "0|1|all", default_value = "all", value_parser = super::acks_arg)]
    pub acks: i8,
    /// Delivery deadline: a record the broker has not acknowledged this
    /// long after it was read counts as failed (connecting included; exit
    /// 1). SIGINT or SIGTERM gives what was sent half a second more, a
    /// second signal ends at once.
    #[arg(long = "message-timeout", value_name = "DURATION", default_value = "30s", value_parser = message_timeout_arg)]
    pub message_timeout_ms: u64,
    /// Embedded mode: partitions of a topic this command creates (with a
    /// broker, the broker's --partitions applies).
    #[arg(long = "partitions", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::PARTITIONS_MAX)))]
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
    /// brokers) instead of sending everything to -b.
    #[arg(long = "registry", value_name = "DIR", env = "KLOG_REGISTRY")]
    pub registry: Option<PathBuf>,
    /// Embedded mode: segment size at which a log rolls.
    #[arg(long = "segment-bytes", value_name = "SIZE", default_value = "1GiB", value_parser = super::segment_size_arg)]
    pub segment_bytes: u64,
    /// Largest record accepted.
    #[arg(long = "max-record-bytes", value_name = "SIZE", default_value = "1MiB", value_parser = super::record_size_arg)]
    pub record_bytes_max: u64,
    /// Only print errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// Files to read instead of stdin ("-" is stdin).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// A delivery deadline: a duration of at least 1ms.
fn message_timeout_arg(s: &str) -> Result<u64, String> {
    match super::duration_arg(s)? {
        0 => Err("a message timeout must be longer than 0".into()),
        ms => Ok(ms),
    }
}

fn parse_header(s: &str) -> Result<(String, String), String> {
    let (n, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    Ok((n.to_string(), v.to_string()))
}

/// Runs `klog-produce`; `matches` tell a flag from the environment.
pub fn run(mut args: Args, matches: &clap::ArgMatches) -> anyhow::Result<ExitCode> {
    super::choose_target(matches, &mut args.data_dir, &mut args.registry)?;
    super::handle_signals(|| {})?;
    let options = produce::Options {
        topic: args.topic,
        partition: args.partition,
        parse: ParseOptions {
            key_delimiter: args.key_delimiter.map(|d| d.0),
            key: args.key.map(String::into_bytes),
            json: args.json,
        },
        delimiter: args.delimiter.0,
        headers: args.headers,
        batch: BatchOptions {
            records_max: args.batch_records,
            bytes_max: usize::try_from(args.batch_bytes).unwrap_or(usize::MAX),
        },
        linger_ms: args.linger_ms,
        acks: args.acks,
        message_timeout_ms: args.message_timeout_ms,
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
    };
    produce::run(&options)?;
    Ok(ExitCode::SUCCESS)
}
