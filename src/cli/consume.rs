//! `klog-consume`: records of a topic to stdout, like `kcat -C`.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

use crate::client::group::{GroupConfig, GroupMember};
use crate::client::offset::{resolve_in, OffsetSpec};
use crate::client::{Connections, Consumer, ConsumerConfig, ConsumerPartition};
use crate::storage::fs::{RealFs, Vfs};
use crate::storage::record::Record;
use crate::storage::store::Store;
use crate::tools::consume::{self, Envelope, Format, PartitionReader};

/// Prints the records of a topic, and keeps following new ones like
/// `tail -f` unless -e or -c says when to stop.
#[derive(Debug, Parser)]
#[command(name = "klog-consume", version, about, long_about = None)]
pub struct Args {
    /// Topic to read.
    #[arg(short = 't', long = "topic", value_parser = super::topic_arg)]
    pub topic: String,
    /// Partitions to read (default: all).
    #[arg(short = 'p', long = "partition", value_name = "N[,N..]", value_delimiter = ',')]
    pub partitions: Vec<u32>,
    /// Where to start: beginning, end, N, -N (N before the end), @TIMESTAMP
    /// (ms since the epoch, or RFC 3339).
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
    pub count: Option<u64>,
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
    #[arg(short = 'G', long = "group", value_name = "GROUP", requires = "registry", conflicts_with_all = ["partitions", "data_dir"], value_parser = super::topic_arg)]
    pub group: Option<String>,
    /// The registry of consumer groups and brokers (a directory).
    #[arg(long = "registry", value_name = "DIR", env = "KLOG_REGISTRY")]
    pub registry: Option<PathBuf>,
    /// With -G: commit offsets this often (and at rebalances and exit).
    #[arg(long = "commit-interval", value_name = "DURATION", default_value = "5s", value_parser = super::duration_arg)]
    pub commit_interval_ms: u64,
    /// With -G: the longest a change in the group (a member joining or
    /// dying) goes unnoticed; members look at the registry ten times per
    /// timeout. A member that dies leaves the group at once.
    #[arg(long = "session-timeout", value_name = "DURATION", default_value = "10s", value_parser = super::duration_arg)]
    pub session_timeout_ms: u64,
    /// The broker to read from.
    #[arg(
        short = 'b',
        long = "broker",
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:9092",
        env = "KLOG_BROKER"
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

struct Follow {
    partition: u32,
    reader: PartitionReader,
    /// End offset at start, for -e.
    end: u64,
    reported_end: bool,
}

/// Where records come from: local logs, or a broker.
enum Source {
    Embedded(Vec<Follow>),
    Remote(Consumer, Vec<(u32, u64)>),
}

/// Prints records as `-f` or `-J` says, counting them against `-c`.
struct Printer<'a> {
    args: &'a Args,
    out: BufWriter<io::StdoutLock<'static>>,
    printed: u64,
    limit: u64,
    json_line: Vec<u8>,
}

impl Printer<'_> {
    /// Prints a record; false once the count is reached.
    fn print(&mut self, partition: u32, r: &Record<'_>) -> crate::Result<bool> {
        if self.printed >= self.limit {
            return Ok(false);
        }
        let topic = self.args.topic.as_str();
        if self.args.json {
            self.json_line.clear();
            serde_json::to_writer(&mut self.json_line, &Envelope::of(topic, partition, r)).expect("json");
            self.json_line.push(b'\n');
            self.out.write_all(&self.json_line).map_err(write_error)?;
        } else {
            self.args
                .format
                .write(&mut self.out, topic, partition, r)
                .map_err(write_error)?;
        }
        if self.args.unbuffered {
            self.out.flush().map_err(write_error)?;
        }
        self.printed += 1;
        Ok(self.printed < self.limit)
    }
}

/// Runs `klog-consume`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    super::handle_signals(|| {})?;
    let say = super::Say { quiet: args.quiet };
    if args.group.is_some() {
        return follow_group(&args, say);
    }
    let mut source = match &args.data_dir {
        Some(dir) => Source::Embedded(open_embedded(&args, dir)?),
        None => open_remote(&args)?,
    };
    let mut printer = new_printer(&args);
    match &mut source {
        Source::Embedded(follows) => follow_embedded(&args, follows, &mut printer, say)?,
        Source::Remote(consumer, ends) => follow_remote(&args, consumer, ends, &mut printer, say)?,
    }
    printer.out.flush().context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

fn open_embedded(args: &Args, dir: &std::path::Path) -> anyhow::Result<Vec<Follow>> {
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let store = Store::with_vfs(dir, Arc::clone(&vfs));
    let count = store.partition_count(&args.topic)?;
    let mut follows = Vec::new();
    for p in chosen_partitions(args, count)? {
        let name = format!("{} [{p}]", args.topic);
        let log = consume::open_read_only(Arc::clone(&vfs), &store.partition_dir(&args.topic, p))
            .with_context(|| format!("cannot read {name}"))?;
        let start = consume::resolve(&log, args.offset, &name)?;
        let reader = PartitionReader::new(Arc::clone(&vfs), &log, start)?;
        follows.push(Follow {
            partition: p,
            reader,
            end: log.next_offset(),
            reported_end: false,
        });
    }
    Ok(follows)
}

/// The partitions `-p` names (all by default), each checked to exist.
fn chosen_partitions(args: &Args, count: u32) -> anyhow::Result<Vec<u32>> {
    if args.partitions.is_empty() {
        return Ok((0..count).collect());
    }
    for &p in &args.partitions {
        if p >= count {
            anyhow::bail!(crate::Error::UnknownPartition {
                topic: args.topic.clone(),
                partition: p,
                count
            });
        }
    }
    Ok(args.partitions.clone())
}

fn open_remote(args: &Args) -> anyhow::Result<Source> {
    let mut conns = Connections::new();
    // Each partition's broker: -b for all, or the registry's placement.
    let routes: Vec<String> = match &args.registry {
        Some(dir) => {
            let registry =
                crate::coord::open(dir).with_context(|| format!("cannot open the registry {}", dir.display()))?;
            crate::client::route(&*registry, &args.topic, false)
                .with_context(|| format!("cannot read topic {:?} through {}", args.topic, dir.display()))?
        }
        None => {
            let count = conns
                .with(&args.broker, |c| c.partitions(&args.topic))
                .with_context(|| format!("cannot read topic {:?} from {}", args.topic, args.broker))?
                .len();
            vec![args.broker.clone(); count]
        }
    };
    // Each broker's (start, end) offsets of the topic's partitions.
    let mut offsets: std::collections::HashMap<&str, crate::client::PartitionOffsets> = Default::default();
    let mut parts = Vec::new();
    let mut ends = Vec::new();
    for p in chosen_partitions(args, routes.len() as u32)? {
        let addr = routes[p as usize].as_str();
        if !offsets.contains_key(addr) {
            let held = conns
                .with(addr, |c| c.partitions(&args.topic))
                .with_context(|| format!("cannot read topic {:?} from {addr}", args.topic))?;
            offsets.insert(addr, held);
        }
        let (start, end) = offsets[addr].get(p as usize).copied().unwrap_or((0, 0));
        conns
            .with(addr, |c| c.check_online(&args.topic, p, start))
            .with_context(|| format!("partition {p} of {:?} is offline", args.topic))?;
        if start == crate::protocol::ELSEWHERE {
            return Err(crate::Error::Broker {
                code: crate::protocol::ErrorCode::PartitionElsewhere,
                message: format!(
                    "partition {p} of {:?} is served by another broker of the cluster",
                    args.topic
                ),
            })
            .context("use --registry DIR to find each partition's broker");
        }
        let name = format!("{} [{p}]", args.topic);
        let offset = resolve_in(start, end, args.offset, &name, |ts| {
            conns.with(addr, |c| c.list_offsets(&args.topic, p, ts))
        })?;
        let part = ConsumerPartition {
            partition: p,
            offset,
            stop_at: args.exit_at_end.then_some(end),
        };
        parts.push((addr.to_string(), part));
        ends.push((p, end));
    }
    let consumer = Consumer::start_on(&parts, &args.topic, ConsumerConfig::default())?;
    Ok(Source::Remote(consumer, ends))
}

fn follow_embedded(
    args: &Args,
    follows: &mut [Follow],
    printer: &mut Printer<'_>,
    say: super::Say,
) -> anyhow::Result<()> {
    while printer.printed < printer.limit && !crate::stop::stopping() {
        let mut progressed = false;
        for f in follows.iter_mut() {
            let stop_at = if args.exit_at_end { f.end } else { u64::MAX };
            if f.reader.next_offset() >= stop_at {
                continue;
            }
            let partition = f.partition;
            let n = f.reader.poll(consume::FETCH_BYTES_DEFAULT, |r| {
                if r.offset >= stop_at {
                    return Ok(false);
                }
                printer.print(partition, r)
            });
            let n = n.with_context(|| format!("cannot read {} [{partition}]", args.topic))?;
            progressed |= n > 0;
            if printer.printed >= printer.limit {
                return Ok(());
            }
        }
        for f in follows.iter_mut() {
            if args.exit_at_end && !f.reported_end && f.reader.next_offset() >= f.end {
                f.reported_end = true;
                say.info(format_args!(
                    "Reached end of topic {} [{}] at offset {}",
                    args.topic, f.partition, f.end
                ));
            }
        }
        if args.exit_at_end && follows.iter().all(|f| f.reader.next_offset() >= f.end) {
            return Ok(());
        }
        if !progressed {
            printer.out.flush().context("cannot write to stdout")?;
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

fn new_printer(args: &Args) -> Printer<'_> {
    let stdout = io::stdout();
    let capacity = if stdout.is_terminal() { 8 * 1024 } else { 256 * 1024 };
    Printer {
        args,
        out: BufWriter::with_capacity(capacity, stdout.lock()),
        printed: 0,
        limit: args.count.unwrap_or(u64::MAX),
        json_line: Vec::new(),
    }
}

/// "member M owns t [0] from offset 5, t [1] from offset 0" (or "owns no partition").
fn describe(member: &GroupMember, topic: &str) -> String {
    let owned: Vec<String> = member
        .positions()
        .iter()
        .map(|(p, o)| format!("{topic} [{p}] from offset {o}"))
        .collect();
    if owned.is_empty() {
        format!("member {} owns no partition of {topic}", member.member())
    } else {
        format!("member {} owns {}", member.member(), owned.join(", "))
    }
}

/// Consumes as a member of a consumer group (`-G`).
fn follow_group(args: &Args, say: super::Say) -> anyhow::Result<ExitCode> {
    let group = args.group.clone().expect("-G");
    let dir = args.registry.as_ref().expect("--registry");
    let registry = crate::coord::open(dir).with_context(|| format!("cannot open the registry {}", dir.display()))?;
    let config = GroupConfig {
        group: group.clone(),
        topic: args.topic.clone(),
        reset: args.offset,
        commit_interval: Duration::from_millis(args.commit_interval_ms),
        poll_interval: Duration::from_millis((args.session_timeout_ms / 10).clamp(20, 1000)),
        exit_at_end: args.exit_at_end,
        fallback_broker: args.broker.clone(),
    };
    let mut member = GroupMember::join(registry, config)
        .with_context(|| format!("cannot join group {group:?} for topic {:?}", args.topic))?;
    say.info(format_args!("Group {group}: {}", describe(&member, &args.topic)));
    let mut printer = new_printer(args);
    while printer.printed < printer.limit && !crate::stop::stopping() && !member.done()? {
        if member.needs_rebalance()? {
            printer.out.flush().context("cannot write to stdout")?;
            member.rebalance()?;
            say.info(format_args!("Group {group}: {}", describe(&member, &args.topic)));
        }
        if member.commit_due() {
            printer.out.flush().context("cannot write to stdout")?;
            member.commit()?;
        }
        // At most a slice of records per turn, so that commits and
        // rebalances keep their pace however fast records come.
        let mut turn = 0;
        let n = member.poll(Duration::from_millis(100), |p, r| {
            turn += 1;
            Ok(printer.print(p, r)? && turn < 1024)
        })?;
        if n == 0 {
            printer.out.flush().context("cannot write to stdout")?;
        }
    }
    printer.out.flush().context("cannot write to stdout")?;
    member.close()?;
    Ok(ExitCode::SUCCESS)
}

fn follow_remote(
    args: &Args,
    consumer: &mut Consumer,
    ends: &[(u32, u64)],
    printer: &mut Printer<'_>,
    say: super::Say,
) -> anyhow::Result<()> {
    let mut reported = vec![false; ends.len()];
    let context = || format!("cannot read {} from {}", args.topic, args.broker);
    loop {
        if args.exit_at_end {
            for (i, &(p, end)) in ends.iter().enumerate() {
                let at = consumer
                    .partitions()
                    .iter()
                    .find(|c| c.partition == p)
                    .map_or(end, |c| c.offset);
                if !reported[i] && at >= end {
                    reported[i] = true;
                    say.info(format_args!(
                        "Reached end of topic {} [{p}] at offset {end}",
                        args.topic
                    ));
                }
            }
            if consumer.done() {
                return Ok(());
            }
        }
        if printer.printed >= printer.limit || crate::stop::stopping() {
            return Ok(());
        }
        let n = consumer
            .poll(Duration::from_millis(100), |p, r| printer.print(p, r))
            .with_context(context)?;
        if n == 0 {
            printer.out.flush().context("cannot write to stdout")?;
        }
    }
}

fn write_error(e: io::Error) -> crate::Error {
    crate::Error::io("write", "stdout", e)
}
