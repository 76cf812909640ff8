//! `klog-consume`: records of a topic to stdout, like `kcat -C`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::client::offset::OffsetSpec;
use crate::client::ConsumerConfig;
use crate::limits;
use crate::tools::consume::Format;
use crate::tools::follow::{self, GroupOptions, Output};

use super::config::{self, Property, Setting};

/// Prints the records of a topic, and keeps following new ones like
/// `tail -f` unless -e or -c says when to stop.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "klog-consume",
    version,
    about = super::help::CONSUME_ABOUT,
    long_about = None,
    after_help = super::help::after_help(&super::help::CONSUME)
)]
pub struct Args {
    /// Topic to read.
    #[arg(short = 't', long = "topic", value_parser = super::topic_arg, required_unless_present_any = ["list", "audit"])]
    pub topic: Option<String>,
    /// Partitions to read (default: all).
    #[arg(
        short = 'p',
        long = "partition",
        value_name = "N[,N..]",
        value_delimiter = ','
    )]
    pub partitions: Vec<u32>,
    /// Where to start in each partition: beginning, end, N, -N (N before
    /// its end), @TIMESTAMP
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
    /// Output format: %s value, %k key, %S value length, %K key length
    /// (-1 without a key), %R value length as 4 bytes big-endian (kcat's
    /// binary framing), %t topic, %p partition, %o offset, %T timestamp
    /// (ms), %F timestamp (RFC 3339), %h headers; escapes \n \t \0 \xNN.
    /// Default: %s\n, or as -K and -D say.
    #[arg(
        short = 'f',
        long = "format",
        value_name = "FORMAT",
        conflicts_with = "json"
    )]
    pub format: Option<Format>,
    /// Print each record's key, DELIM, then its value (kcat's -K: the
    /// default format becomes %k DELIM %s and -D).
    #[arg(short = 'K', value_name = "DELIM", value_parser = super::delimiter_arg, conflicts_with_all = ["format", "json"])]
    pub key_delimiter: Option<super::Delimiter>,
    /// End each record with DELIM instead of a newline (kcat's -D;
    /// escapes \n \t \0 \xNN).
    #[arg(short = 'D', value_name = "DELIM", value_parser = super::delimiter_arg, conflicts_with_all = ["format", "json"])]
    pub delimiter: Option<super::Delimiter>,
    /// Print NULL for a null key or value (a tombstone), as kcat's -Z
    /// (%S of a null value is -1 either way); an empty key or value stays
    /// empty. -J always writes a null key or value as null.
    #[arg(short = 'Z')]
    pub null: bool,
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
    /// The group lives in --registry, or else in the registry of the
    /// broker given by -b (a directory it names must be on this host).
    #[arg(short = 'G', long = "group", value_name = "GROUP", conflicts_with = "partitions", value_parser = super::group_arg)]
    pub group: Option<String>,
    /// The registry of consumer groups and brokers: a directory (one host)
    /// or a ZooKeeper ensemble, zk://HOST:PORT[,HOST:PORT...]/CHROOT (many
    /// hosts). Without -G, read each partition from its broker there.
    #[arg(long = "registry", value_name = "REGISTRY", env = "KLOG_REGISTRY", value_parser = super::registry_arg)]
    pub registry: Option<PathBuf>,
    /// With -G: commit offsets this often (and at rebalances and exit).
    #[arg(long = "commit-interval", value_name = "DURATION", default_value = "5s", value_parser = super::duration_arg)]
    pub commit_interval_ms: u64,
    /// With -G: commit nothing (-X enable.auto.commit=false): the group's
    /// committed offsets stay as they were, and whoever owns a partition
    /// next starts where they say.
    #[arg(long = "no-commit", requires = "group")]
    pub no_commit: bool,
    /// Reconcile the audit (the paper's): read the counts producers
    /// published to TOPIC (klog-produce --audit-topic), then every data
    /// topic they name (-t: that one alone) to its end, and print per
    /// window, producer and topic what was sent, received, lost and
    /// duplicated, and its status (ok, lost, unaudited, open, expired): a
    /// table on a terminal, JSON lines otherwise (-J: always). Exit 3 when
    /// a closed window is neither ok nor expired (retention cut it).
    #[arg(long = "audit", value_name = "TOPIC", value_parser = super::topic_arg, conflicts_with_all = ["group", "reset_offsets", "records_max", "format", "list", "partitions", "offset"])]
    pub audit: Option<String>,
    /// With --audit: a window closes this long after its end (late
    /// records, counts still on their way); an open window is shown,
    /// never a failure.
    #[arg(long = "audit-grace", value_name = "DURATION", default_value = "1m", value_parser = super::duration_arg, requires = "audit")]
    pub audit_grace_ms: u64,
    /// With -G and -J: commit a record's offset only once a producer
    /// acknowledged the record made from it, as written by its `klog-produce
    /// -J --report ACKS` (a FIFO, or a file followed as it grows): a mirror
    /// that loses nothing. `mkfifo acks; klog-consume --registry A -G mirror
    /// -t T -J --commit-from acks | klog-produce --registry B -t T -J
    /// --report acks`. What was printed and not acknowledged is read again
    /// by the group (at least once; keep the producer's --acks all). A
    /// million printed records are held at most; one waiting longer than
    /// 30s is named on stderr. On exit, stdout is closed and the
    /// acknowledgements are waited for (60s at most; a second signal ends
    /// at once).
    #[arg(long = "commit-from", value_name = "ACKS", requires_all = ["group", "json"], conflicts_with = "no_commit")]
    pub commit_from: Option<PathBuf>,
    /// With -G: a member silent for longer (stopped, stuck) loses its
    /// partitions to the others, and its late commits are refused; when
    /// it wakes it rejoins. Members renew their session and look at the
    /// registry ten times per timeout; a member that dies leaves at once.
    #[arg(long = "session-timeout", value_name = "DURATION", default_value = "10s", value_parser = super::duration_arg)]
    pub session_timeout_ms: u64,
    /// With -G: set the group's committed offsets of every partition of
    /// the topic to SPEC (beginning, end, N, -N, @TIMESTAMP, resolved
    /// against the brokers; end and -N count from the last stable offset
    /// unless --isolation-level read_uncommitted), print them (-J: as JSON), and exit without
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
    /// Bytes fetched per partition per request (a batch larger than this
    /// still comes whole).
    #[arg(long = "fetch-bytes", value_name = "SIZE", default_value = "1MiB", value_parser = fetch_size_arg)]
    pub fetch_bytes: u32,
    /// Bytes of records per fetch answer, over all its partitions (the
    /// broker cuts this to its own maximum).
    #[arg(long = "fetch-response-bytes", value_name = "SIZE", default_value = "50MiB", value_parser = fetch_size_arg)]
    pub fetch_response_bytes: u32,
    /// A fetch a broker leaves unanswered this long past its wait for
    /// records (the broker hangs, or is stopped) gives that connection
    /// up: with --registry, its partitions' leaders are looked up again
    /// and read from where they were; partitions of other brokers never
    /// wait for it.
    #[arg(long = "request-timeout", value_name = "DURATION", default_value = "5s", value_parser = super::timeout_arg)]
    pub request_timeout_ms: u64,
    /// Which records to read (Kafka's isolation.level). read_committed
    /// (the default, as kcat's): records of committed transactions and of
    /// none, each partition up to its last stable offset (the first
    /// offset of a transaction still open), which is also its end for -e,
    /// -o end and -o -N. read_uncommitted: every record up to the high
    /// watermark, those of aborted and open transactions too. A data
    /// directory read directly (--data-dir) gives every record.
    #[arg(long = "isolation-level", value_name = "LEVEL", ignore_case = true)]
    pub isolation: Option<Isolation>,
    /// A client setting by its Kafka property name, in Kafka's units
    /// (repeatable): bootstrap.servers (-b), group.id (-G),
    /// session.timeout.ms, auto.commit.interval.ms, enable.auto.commit
    /// (false: --no-commit), auto.offset.reset (earliest or latest: -o
    /// beginning or end), fetch.max.bytes
    /// (--fetch-response-bytes), max.partition.fetch.bytes (--fetch-bytes),
    /// request.timeout.ms (--request-timeout), isolation.level
    /// (--isolation-level); client.id is accepted and
    /// ignored. Of a flag and a property for the
    /// same setting, the later on the command line wins.
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
    /// Only print errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// kcat's consumer mode: accepted, as this tool consumes.
    #[arg(short = 'C')]
    pub consumer_mode: bool,
    /// kcat's producer mode: refused, with the tool that produces.
    #[arg(short = 'P', hide = true)]
    pub producer_mode: bool,
}

/// Kafka's consumer isolation levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Isolation {
    /// Records of committed transactions, and those of none.
    #[value(name = "read_committed")]
    ReadCommitted,
    /// Every record.
    #[value(name = "read_uncommitted")]
    ReadUncommitted,
}

/// A fetch size: from 1 byte to the largest fetch answer.
fn fetch_size_arg(s: &str) -> Result<u32, String> {
    let n = super::size_arg(s)?;
    if !(1..=limits::FETCH_RESPONSE_BYTES_MAX).contains(&n) {
        return Err(format!(
            "a fetch takes from 1 byte to {} bytes, not {n}",
            limits::FETCH_RESPONSE_BYTES_MAX
        ));
    }
    Ok(n as u32)
}

/// The `-X` properties klog-consume takes.
fn settings() -> Vec<Setting<Args>> {
    let mut settings: Vec<Setting<Args>> = vec![
        Setting {
            names: &["bootstrap.servers", "metadata.broker.list"],
            flag: "broker",
            set: |a, v| {
                a.broker = super::servers_arg(v)?;
                Ok(())
            },
        },
        Setting {
            names: &["fetch.max.bytes"],
            flag: "fetch_response_bytes",
            set: |a, v| {
                a.fetch_response_bytes = config::bytes(v, limits::FETCH_RESPONSE_BYTES_MAX)? as u32;
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
            names: &["isolation.level"],
            flag: "isolation",
            set: |a, v| {
                a.isolation = Some(clap::ValueEnum::from_str(v, true).map_err(|_| {
                    format!("an isolation level is read_committed or read_uncommitted, not {v:?}")
                })?);
                Ok(())
            },
        },
        Setting {
            names: &["max.partition.fetch.bytes", "fetch.message.max.bytes"],
            flag: "fetch_bytes",
            set: |a, v| {
                a.fetch_bytes = config::bytes(v, limits::FETCH_RESPONSE_BYTES_MAX)? as u32;
                Ok(())
            },
        },
    ];
    settings.extend(group_settings());
    settings
}

/// The `-X` properties of a group member (-G).
fn group_settings() -> Vec<Setting<Args>> {
    vec![
        Setting {
            names: &["group.id"],
            flag: "group",
            set: |a, v| {
                a.group = Some(super::group_arg(v)?);
                Ok(())
            },
        },
        Setting {
            names: &["session.timeout.ms"],
            flag: "session_timeout_ms",
            set: |a, v| {
                a.session_timeout_ms = config::ms(v)?;
                Ok(())
            },
        },
        Setting {
            names: &["enable.auto.commit"],
            flag: "no_commit",
            set: |a, v| {
                a.no_commit = !config::boolean(v)?;
                Ok(())
            },
        },
        Setting {
            names: &["auto.offset.reset"],
            flag: "offset",
            set: |a, v| {
                a.offset = match v.to_ascii_lowercase().as_str() {
                    "earliest" | "smallest" | "beginning" => OffsetSpec::Beginning,
                    "latest" | "largest" | "end" => OffsetSpec::End,
                    _ => {
                        return Err(format!(
                            "klog starts at earliest or latest (-o beginning or end), not {v:?}"
                        ))
                    }
                };
                Ok(())
            },
        },
        Setting {
            names: &["auto.commit.interval.ms"],
            flag: "commit_interval_ms",
            set: |a, v| {
                a.commit_interval_ms = config::ms(v)?;
                Ok(())
            },
        },
    ]
}

/// How records are printed: -J, -f, or kcat's default shaped by -K, -D.
fn output(args: &Args) -> Output {
    if args.json {
        return Output::Json;
    }
    let format = args.format.clone().unwrap_or_else(|| {
        let delimiter = args.delimiter.as_ref().map_or(&b"\n"[..], |d| &d.0);
        Format::delimited(args.key_delimiter.as_ref().map(|d| &d.0[..]), delimiter)
    });
    Output::Format(format.with_null(args.null))
}

/// Checks what -X set that clap's rules could not see: a group reads
/// through a registry, and takes no -p.
fn check_group(args: &Args, applied: &config::Applied) -> Result<(), super::Usage> {
    if !applied.sets("group") {
        return Ok(());
    }
    if !args.partitions.is_empty() {
        return Err(super::Usage(
            "-X group.id (like -G) takes no -p: the group assigns the partitions".into(),
        ));
    }
    Ok(())
}

/// `-L`: lists what the chosen place holds, and exits.
fn list(
    mut args: Args,
    matches: &clap::ArgMatches,
    applied: &config::Applied,
) -> anyhow::Result<ExitCode> {
    super::choose_target(matches, applied, &mut args.data_dir, &mut args.registry)?;
    super::handle_signals(|| {})?;
    crate::tools::list::run(&crate::tools::list::Options {
        topic: args.topic,
        broker: args.broker,
        data_dir: args.data_dir,
        registry: args.registry,
        json: args.json,
        quiet: args.quiet,
    })?;
    Ok(ExitCode::SUCCESS)
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

/// Where the records are read from: a group reads through the registry,
/// whatever else is exported; otherwise -b, --registry or --data-dir.
fn choose_source(
    args: &mut Args,
    matches: &clap::ArgMatches,
    applied: &config::Applied,
) -> Result<(), super::Usage> {
    check_group(args, applied)?;
    if args.group.is_some() {
        // A group reads through the registry, whatever else is exported.
        let flag = |id| {
            matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
                || applied.sets(id)
        };
        if flag("data_dir") || (flag("broker") && args.registry.is_some()) {
            return Err(super::Usage(
                "-G reads through the group's registry: give --registry, or -b and the broker's \
                 registry is used; not both, and not --data-dir"
                    .into(),
            ));
        }
        args.data_dir = None;
    } else {
        super::choose_target(matches, applied, &mut args.data_dir, &mut args.registry)?;
    }
    if args.data_dir.is_some() && args.isolation == Some(Isolation::ReadCommitted) {
        return Err(super::Usage(
            "--data-dir reads the logs as they are, every record: read_committed needs a broker \
             (-b or --registry)"
                .into(),
        ));
    }
    if args.commit_from.is_some() && args.no_commit {
        return Err(super::Usage(
            "--commit-from commits what a producer acknowledged: not with \
             enable.auto.commit=false"
                .into(),
        ));
    }
    if args.offset == OffsetSpec::Stored && args.group.is_none() {
        return Err(super::Usage(
            "-o stored needs a group (-G GROUP --registry REGISTRY): it starts at the group's committed offsets".into(),
        ));
    }
    Ok(())
}

/// The registry that coordinates the groups of the broker at `broker`,
/// for `-G` without `--registry`.
fn registry_of(broker: &str) -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    let asked = crate::client::Connection::connect(broker).and_then(|mut c| c.registry());
    let location = asked
        .with_context(|| format!("cannot ask the broker at {broker} for its registry (-G)"))?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "the broker at {broker} keeps no registry, and a group (-G) lives in one: start \
                 the broker with --registry, or name the group's registry with --registry"
            )
        })?;
    let path = PathBuf::from(&location);
    if !location.starts_with("zk://") && !path.is_dir() {
        anyhow::bail!(
            "the broker at {broker} keeps its groups in the directory {location} on its host, \
             which is not on this one: run klog-consume there, or give the brokers a ZooKeeper \
             registry (--registry zk://HOST:PORT/CHROOT)"
        );
    }
    Ok(path)
}

/// Runs `klog-consume`; `matches` tell a flag from the environment.
pub fn run(mut args: Args, matches: &clap::ArgMatches) -> anyhow::Result<ExitCode> {
    if args.producer_mode {
        return Err(super::Usage(
            "klog-consume consumes (kcat -C); to produce (kcat -P), run klog-produce".into(),
        )
        .into());
    }
    let applied = configure(&mut args, matches)?;
    if args.list {
        return list(args, matches, &applied);
    }
    choose_source(&mut args, matches, &applied)?;
    super::handle_signals(|| {})?;
    let output = output(&args);
    if args.group.is_some() && args.registry.is_none() {
        args.registry = Some(registry_of(&args.broker)?);
    }
    let group = args.group.map(|group| GroupOptions {
        group,
        registry: args
            .registry
            .clone()
            .expect("-G has a registry: its own or the broker's"),
        commit_interval_ms: args.commit_interval_ms,
        commit: !args.no_commit,
        session_timeout_ms: args.session_timeout_ms,
        commit_from: args.commit_from.clone(),
    });
    let reset_offsets = args.reset_offsets;
    // A partition named twice (`-p 0,0`) is read once.
    let (mut partitions, mut named) = (args.partitions, std::collections::HashSet::new());
    partitions.retain(|p| named.insert(*p));
    let only_topic = args.topic.is_some();
    let options = follow::Options {
        output,
        topic: (args.topic)
            .or(args.audit.clone())
            .expect("clap requires -t without -L or --audit"),
        partitions,
        offset: args.offset,
        exit_at_end: args.exit_at_end,
        records_max: args.records_max,
        unbuffered: args.unbuffered,
        fetch: ConsumerConfig {
            fetch_bytes_max: args.fetch_bytes,
            response_bytes_max: args.fetch_response_bytes,
            request_timeout: std::time::Duration::from_millis(args.request_timeout_ms),
            read_committed: args.isolation != Some(Isolation::ReadUncommitted),
            ..ConsumerConfig::default()
        },
        group,
        registry: args.registry,
        broker: args.broker,
        data_dir: args.data_dir,
        quiet: args.quiet,
    };
    if let Some(audit) = &args.audit {
        let ok = crate::tools::reconcile::run(&options, audit, only_topic, args.audit_grace_ms)?;
        return Ok(ExitCode::from(if ok { 0 } else { 3 }));
    }
    match reset_offsets {
        Some(spec) => follow::reset_offsets(&options, spec)?,
        None => follow::run(&options)?,
    }
    Ok(ExitCode::SUCCESS)
}
