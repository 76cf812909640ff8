//! `klog-consume`: records of a topic to stdout, like `kcat -C`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::client::offset::OffsetSpec;
use crate::tools::consume::Format;
use crate::tools::follow::{self, GroupOptions, Output};

/// Prints the records of a topic, and keeps following new ones like
/// `tail -f` unless -e or -c says when to stop.
#[derive(Debug, Parser)]
#[command(
    name = "klog-consume",
    version,
    about = super::help::CONSUME_ABOUT,
    long_about = None,
    after_help = super::help::after_help(&super::help::CONSUME)
)]
pub struct Args {
    /// Topic to read.
    #[arg(short = 't', long = "topic", value_parser = super::topic_arg)]
    pub topic: String,
    /// Partitions to read (default: all).
    #[arg(
        short = 'p',
        long = "partition",
        value_name = "N[,N..]",
        value_delimiter = ','
    )]
    pub partitions: Vec<u32>,
    /// Where to start: beginning, end, N, -N (N before the end), @TIMESTAMP
    /// (ms since the epoch, or RFC 3339), stored (with -G: the group's
    /// committed offsets, required). With -G, where a partition the group
    /// never committed starts.
    #[arg(
        short = 'o',
        long = "offset",
        value_name = "SPEC",
        default_value = "beginning",
        allow_hyphen_values = true
    )]
    pub offset: OffsetSpec,
    /// Exit when every partition reaches the end offset it had at start.
    #[arg(short = 'e', long = "exit")]
    pub exit_at_end: bool,
    /// Stop after N records.
    #[arg(short = 'c', long = "count", value_name = "N")]
    pub records_max: Option<u64>,
    /// Output format: %s value, %k key, %S value length, %t topic,
    /// %p partition, %o offset, %T timestamp (ms), %F timestamp (RFC 3339),
    /// %h headers; escapes \n \t \0 \xNN.
    #[arg(
        short = 'f',
        long = "format",
        value_name = "FORMAT",
        default_value = "%s\\n",
        conflicts_with = "json"
    )]
    pub format: Format,
    /// One JSON envelope per line: topic, partition, offset, ts, headers,
    /// key, payload (bytes that are not UTF-8 in base64, marked by
    /// key_encoding, payload_encoding or headers_encoding).
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Flush stdout after every record.
    #[arg(short = 'u', long = "unbuffered")]
    pub unbuffered: bool,
    /// Consume as a member of this consumer group: the group's members
    /// share the topic's partitions, and resume at its committed offsets.
    #[arg(short = 'G', long = "group", value_name = "GROUP", requires = "registry", conflicts_with = "partitions", value_parser = super::topic_arg)]
    pub group: Option<String>,
    /// The registry of consumer groups and brokers (a directory).
    #[arg(long = "registry", value_name = "DIR", env = "KLOG_REGISTRY")]
    pub registry: Option<PathBuf>,
    /// With -G: commit offsets this often (and at rebalances and exit).
    #[arg(long = "commit-interval", value_name = "DURATION", default_value = "5s", value_parser = super::duration_arg)]
    pub commit_interval_ms: u64,
    /// With -G: a member silent for longer (stopped, stuck) loses its
    /// partitions to the others, and its late commits are refused; when
    /// it wakes it rejoins. Members renew their session and look at the
    /// registry ten times per timeout; a member that dies leaves at once.
    #[arg(long = "session-timeout", value_name = "DURATION", default_value = "10s", value_parser = super::duration_arg)]
    pub session_timeout_ms: u64,
    /// With -G: set the group's committed offsets of every partition of
    /// the topic to SPEC (beginning, end, N, -N, @TIMESTAMP, resolved
    /// against the brokers), print them (-J: as JSON), and exit without
    /// consuming; refused (exit 1) while the group has live members, like
    /// kafka-consumer-groups --reset-offsets.
    #[arg(
        long = "reset-offsets",
        value_name = "SPEC",
        requires = "group",
        allow_hyphen_values = true
    )]
    pub reset_offsets: Option<OffsetSpec>,
    /// The broker to read from.
    #[arg(
        short = 'b',
        long = "broker",
        value_name = "HOST[:PORT]",
        default_value = "127.0.0.1:9092",
        env = "KLOG_BROKER",
        value_parser = super::broker_arg
    )]
    pub broker: String,
    /// Embedded mode: read the logs in this data directory directly, with
    /// no broker (no lock is taken).
    #[arg(long = "data-dir", value_name = "DIR", env = "KLOG_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Only print errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
}

/// Runs `klog-consume`; `matches` tell a flag from the environment.
pub fn run(mut args: Args, matches: &clap::ArgMatches) -> anyhow::Result<ExitCode> {
    if args.group.is_some() {
        // A group reads through the registry, whatever else is exported.
        let flag = |id| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        if flag("broker") || flag("data_dir") {
            return Err(super::Usage(
                "-G reads through the registry (--registry): it does not go with -b or --data-dir"
                    .into(),
            )
            .into());
        }
        args.data_dir = None;
    } else {
        super::choose_target(matches, &mut args.data_dir, &mut args.registry)?;
    }
    if args.offset == OffsetSpec::Stored && args.group.is_none() {
        return Err(super::Usage(
            "-o stored needs a group (-G GROUP --registry DIR): it starts at the group's committed offsets".into(),
        )
        .into());
    }
    super::handle_signals(|| {})?;
    let group = args.group.map(|group| GroupOptions {
        group,
        registry: args
            .registry
            .clone()
            .expect("clap requires --registry with -G"),
        commit_interval_ms: args.commit_interval_ms,
        session_timeout_ms: args.session_timeout_ms,
    });
    let reset_offsets = args.reset_offsets;
    // A partition named twice (`-p 0,0`) is read once.
    let mut partitions = args.partitions;
    let mut named = std::collections::HashSet::new();
    partitions.retain(|p| named.insert(*p));
    let options = follow::Options {
        topic: args.topic,
        partitions,
        offset: args.offset,
        exit_at_end: args.exit_at_end,
        records_max: args.records_max,
        output: if args.json {
            Output::Json
        } else {
            Output::Format(args.format)
        },
        unbuffered: args.unbuffered,
        group,
        registry: args.registry,
        broker: args.broker,
        data_dir: args.data_dir,
        quiet: args.quiet,
    };
    match reset_offsets {
        Some(spec) => follow::reset_offsets(&options, spec)?,
        None => follow::run(&options)?,
    }
    Ok(ExitCode::SUCCESS)
}
