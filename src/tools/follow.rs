//! The engine of `klog-consume`: following a topic like `tail -f` and
//! printing its records, from a local data directory (embedded mode), from
//! a broker or a registry's brokers, or as a member of a consumer group.
//!
//! Every mode prints through one printer, which counts records against
//! `-c` and flushes stdout whenever the source has nothing new, so that a
//! reader of a pipe sees records as they come without a write per record.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::client::offset::{resolve_in, Extent, OffsetSpec};
use crate::client::{Connections, Consumer, ConsumerConfig, ConsumerPartition};
use crate::storage::fs::{RealFs, Vfs};
use crate::storage::record::Record;
use crate::storage::store::Store;

use super::consume::{self, Envelope, Format, PartitionReader};

mod group;
use super::Say;
pub use group::reset_offsets;

/// What `klog-consume` is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Topic to read.
    pub topic: String,
    /// Partitions to read (all when empty).
    pub partitions: Vec<u32>,
    /// Where to start.
    pub offset: OffsetSpec,
    /// Stop when every partition reaches the end offset it had at start.
    pub exit_at_end: bool,
    /// Stop after this many records.
    pub records_max: Option<u64>,
    /// How records are printed.
    pub output: Output,
    /// Flush stdout after every record.
    pub unbuffered: bool,
    /// How a broker's partitions are fetched (`--fetch-bytes`,
    /// `--fetch-response-bytes`).
    pub fetch: ConsumerConfig,
    /// Consume as a member of a consumer group.
    pub group: Option<GroupOptions>,
    /// Find each partition's broker in this registry.
    pub registry: Option<PathBuf>,
    /// The broker to read from (and, for a group, the one to use when the
    /// registry names none for the topic).
    pub broker: String,
    /// Embedded mode: read the logs of this data directory directly.
    pub data_dir: Option<PathBuf>,
    /// Only print errors.
    pub quiet: bool,
}

/// How records are printed: `-f` or `-J`.
#[derive(Debug, Clone)]
pub enum Output {
    /// In a format of kcat's tokens.
    Format(Format),
    /// One JSON envelope per line.
    Json,
}

/// Consuming as a member of a consumer group (`-G`).
#[derive(Debug, Clone)]
pub struct GroupOptions {
    /// The group's name.
    pub group: String,
    /// The registry of groups and brokers.
    pub registry: PathBuf,
    /// How often offsets are committed (and at rebalances and exit).
    pub commit_interval_ms: u64,
    /// Whether offsets are committed at all.
    pub commit: bool,
    /// The longest a change in the group goes unnoticed.
    pub session_timeout_ms: u64,
    /// Commit a record only once it is acknowledged in this report of a
    /// producer's (`--commit-from`: see [`super::commit_from`]).
    pub commit_from: Option<PathBuf>,
}

/// One partition followed in embedded mode.
struct Follow {
    partition: u32,
    reader: PartitionReader,
    /// End offset at start, for -e.
    end_offset: u64,
    reported_end: bool,
    /// Damage the partition's log ends before (at `end_offset`): a
    /// single copy offline until `klog-recover`, whose whole batches before
    /// it are read, and then it is reported.
    damage: Option<crate::storage::recover::Damage>,
}

impl Follow {
    /// Fails, once what was printed is flushed, when the reader reached
    /// the damage its log ends before.
    fn check_damage(&self, topic: &str, printer: &mut Printer<'_>) -> anyhow::Result<()> {
        let Some(damage) = self.damage.as_ref() else {
            return Ok(());
        };
        if self.reader.next_offset() < self.end_offset {
            return Ok(());
        }
        printer.out.flush().context("cannot write to stdout")?;
        Err(anyhow::Error::new(damage.error()))
            .with_context(|| format!("cannot read {topic} [{}]", self.partition))
    }
}

/// Where records come from: local logs, or a broker.
enum Source {
    Embedded(Vec<Follow>),
    Remote(Box<Consumer>, Vec<(u32, u64)>),
}

/// Prints records as `-f` or `-J` says, counting them against `-c`.
struct Printer<'a> {
    options: &'a Options,
    out: BufWriter<io::StdoutLock<'static>>,
    printed: u64,
    limit: u64,
    json_line: Vec<u8>,
    /// Where records go instead of stdout ([`read_to_end`]).
    tap: Option<Tap<'a>>,
}

/// What takes the records of [`read_to_end`]: each with its partition.
pub type Tap<'a> = &'a mut dyn FnMut(u32, &Record<'_>) -> crate::Result<()>;

impl Printer<'_> {
    /// Prints a record; false once the count is reached.
    fn print(&mut self, partition: u32, r: &Record<'_>) -> crate::Result<bool> {
        if self.printed >= self.limit {
            return Ok(false);
        }
        if let Some(tap) = &mut self.tap {
            tap(partition, r)?;
            self.printed += 1;
            return Ok(self.printed < self.limit);
        }
        let topic = self.options.topic.as_str();
        match &self.options.output {
            Output::Json => {
                self.json_line.clear();
                serde_json::to_writer(&mut self.json_line, &Envelope::of(topic, partition, r))
                    .expect("json");
                self.json_line.push(b'\n');
                self.out.write_all(&self.json_line).map_err(write_error)?;
            }
            Output::Format(format) => format
                .write(&mut self.out, topic, partition, r)
                .map_err(write_error)?,
        }
        if self.options.unbuffered {
            self.out.flush().map_err(write_error)?;
        }
        self.printed += 1;
        Ok(self.printed < self.limit)
    }
}

/// Prints the records `options` asks for, following the topic until the
/// count or the end is reached (or a stop signal comes: a clean end, also
/// while a broker is being waited on).
pub fn run(options: &Options) -> anyhow::Result<()> {
    match follow(options) {
        Err(e) if crate::stop::stopping() && e.chain().any(is_stopped) => Ok(()),
        other => other,
    }
}

/// Whether an error says a stop signal came while waiting on a broker.
fn is_stopped(e: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        e.downcast_ref::<crate::Error>(),
        Some(crate::Error::Stopped { .. })
    )
}

fn follow(options: &Options) -> anyhow::Result<()> {
    let say = Say {
        quiet: options.quiet,
    };
    if let Some(group) = &options.group {
        return group::follow_group(options, group, say);
    }
    follow_with(options, &mut new_printer(options), say)
}

/// Hands every record of `options.topic` up to the end it has now (from
/// `options.offset`, of `options.partitions`) to `tap`, nothing to stdout:
/// what `klog-consume --audit` reads.
pub fn read_to_end(options: &Options, tap: Tap<'_>) -> anyhow::Result<()> {
    let options = Options {
        exit_at_end: true,
        records_max: None,
        group: None,
        // Its reader's ends and moves are not the caller's to say.
        quiet: true,
        ..options.clone()
    };
    let say = Say {
        quiet: options.quiet,
    };
    let mut printer = new_printer(&options);
    printer.tap = Some(tap);
    follow_with(&options, &mut printer, say)
}

/// Follows `options.topic` (not as a group) into `printer`.
fn follow_with(options: &Options, printer: &mut Printer<'_>, say: Say) -> anyhow::Result<()> {
    let mut source = match &options.data_dir {
        Some(dir) => Source::Embedded(open_embedded(options, dir)?),
        None => open_remote_patiently(options, say)?,
    };
    match &mut source {
        Source::Embedded(follows) => follow_embedded(options, follows, printer, say)?,
        Source::Remote(consumer, ends) => follow_remote(options, consumer, ends, printer, say)?,
    }
    printer.out.flush().context("cannot write to stdout")?;
    Ok(())
}

fn open_embedded(options: &Options, dir: &std::path::Path) -> anyhow::Result<Vec<Follow>> {
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let store = Store::with_vfs(dir, Arc::clone(&vfs));
    let count = store.partition_count(&options.topic)?;
    let mut follows = Vec::new();
    for p in chosen_partitions(options, count)? {
        let name = format!("{} [{p}]", options.topic);
        let log =
            consume::open_read_only(Arc::clone(&vfs), &store.partition_dir(&options.topic, p))
                .with_context(|| format!("cannot read {name}"))?;
        let start = consume::resolve(&log, options.offset, &name)?;
        let reader = PartitionReader::new(Arc::clone(&vfs), &log, start)?;
        follows.push(Follow {
            partition: p,
            reader,
            end_offset: log.next_offset(),
            reported_end: false,
            damage: log.recovery().damage.clone(),
        });
    }
    Ok(follows)
}

/// The partitions `-p` names (all by default), each checked to exist.
fn chosen_partitions(options: &Options, count: u32) -> anyhow::Result<Vec<u32>> {
    if options.partitions.is_empty() {
        return Ok((0..count).collect());
    }
    for &p in &options.partitions {
        if p >= count {
            anyhow::bail!(crate::Error::UnknownPartition {
                topic: options.topic.clone(),
                partition: p,
                count
            });
        }
    }
    Ok(options.partitions.clone())
}

/// Each partition's broker: `-b` for all, or its leader in the registry
/// (with the locator that finds it again when it moves).
#[allow(clippy::type_complexity)]
fn remote_routes(
    options: &Options,
    conns: &mut Connections,
) -> anyhow::Result<(Vec<String>, Option<Arc<dyn crate::client::Locate>>)> {
    let Some(dir) = &options.registry else {
        let count = conns
            .with(&options.broker, |c| c.partitions(&options.topic))
            .with_context(|| {
                format!(
                    "cannot read topic {:?} from {}",
                    options.topic, options.broker
                )
            })?
            .len();
        return Ok((vec![options.broker.clone(); count], None));
    };
    let registry = crate::coord::open(dir, crate::coord::SESSION_TIMEOUT)
        .with_context(|| format!("cannot open the registry {}", dir.display()))?;
    let routes = crate::coord::route(&*registry, &options.topic, false).with_context(|| {
        format!(
            "cannot read topic {:?} through {}",
            options.topic,
            dir.display()
        )
    })?;
    Ok((
        routes,
        Some(Arc::new(crate::coord::RegistryLocator::new(registry))),
    ))
}

/// How long a consumer with a registry keeps looking for the leaders of
/// its partitions when it starts (a leader just killed, a topic whose
/// partitions have none yet).
const LEADERS_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// [`open_remote`], tried again while it fails for a reason a moving
/// leader explains (a broker that does not lead the partition, has no
/// leader for it, does not know the topic yet, or does not answer), with
/// a registry to look the leaders up in again, for [`LEADERS_PATIENCE`].
fn open_remote_patiently(options: &Options, say: Say) -> anyhow::Result<Source> {
    let deadline = std::time::Instant::now() + LEADERS_PATIENCE;
    let mut said = false;
    loop {
        let e = match open_remote(options) {
            Ok(source) => return Ok(source),
            Err(e) => e,
        };
        let patient = options.registry.is_some()
            && std::time::Instant::now() < deadline
            && !crate::stop::stopping()
            && leaders_may_explain(&e, || placed(options));
        if !patient {
            return Err(e);
        }
        if !said {
            say.info(format_args!("{e:#}: looking for the leaders again"));
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Whether the topic is placed in the consumer's registry (a broker that
/// does not know it yet has not opened it yet).
fn placed(options: &Options) -> bool {
    let Some(dir) = &options.registry else {
        return false;
    };
    crate::coord::open_read_only(dir)
        .and_then(|r| r.placement(&options.topic))
        .is_ok_and(|p| p.is_some())
}

/// Whether a failure to start reading can be a leader moving (`placed`:
/// whether the topic exists in the registry, asked only for a broker's
/// `unknown_topic`).
fn leaders_may_explain(e: &anyhow::Error, placed: impl Fn() -> bool) -> bool {
    use crate::protocol::ErrorCode;
    e.chain()
        .any(|cause| match cause.downcast_ref::<crate::Error>() {
            Some(crate::Error::Broker {
                code: ErrorCode::UnknownTopic,
                ..
            }) => placed(),
            Some(crate::Error::Broker { code, .. }) => matches!(
                code,
                ErrorCode::NotLeader
                    | ErrorCode::LeaderNotAvailable
                    | ErrorCode::PartitionElsewhere
            ),
            Some(crate::Error::Network { .. } | crate::Error::BrokerDown { .. }) => true,
            _ => false,
        })
}

fn open_remote(options: &Options) -> anyhow::Result<Source> {
    let mut conns = Connections::new();
    let (routes, locator) = remote_routes(options, &mut conns)?;
    // Each broker's offsets of the topic's partitions.
    let mut offsets: std::collections::HashMap<&str, Vec<Extent>> = Default::default();
    let mut parts = Vec::new();
    let mut ends = Vec::new();
    let chosen = chosen_partitions(options, routes.len() as u32)?;
    for &p in &chosen {
        let addr = routes[p as usize].as_str();
        if !offsets.contains_key(addr) {
            let read: Vec<u32> = chosen
                .iter()
                .copied()
                .filter(|&q| routes[q as usize] == addr)
                .collect();
            let rc = options.fetch.read_committed;
            let held = conns
                .with(addr, |c| c.partitions_as(&options.topic, rc, &read))
                .with_context(|| format!("cannot read topic {:?} from {addr}", options.topic))?;
            offsets.insert(addr, held);
        }
        let extent = offsets[addr].get(p as usize).copied().unwrap_or_default();
        conns
            .with(addr, |c| c.check_online(&options.topic, p, extent.start))
            .with_context(|| format!("partition {p} of {:?} is offline", options.topic))?;
        if extent.start == crate::protocol::ELSEWHERE {
            return Err(crate::Error::Broker {
                code: crate::protocol::ErrorCode::PartitionElsewhere,
                message: format!(
                    "partition {p} of {:?} is served by another broker of the cluster",
                    options.topic
                ),
            })
            .context("use --registry REGISTRY to find each partition's broker");
        }
        let name = format!("{} [{p}]", options.topic);
        let offset = resolve_in(extent, options.offset, &name, |ts| {
            conns.with(addr, |c| c.list_offsets(&options.topic, p, ts))
        })?;
        let part = ConsumerPartition {
            partition: p,
            offset,
            stop_at: options.exit_at_end.then_some(extent.stable),
        };
        parts.push((addr.to_string(), part));
        ends.push((p, extent.stable));
    }
    let consumer = match locator {
        // Each partition follows its leader when it moves.
        Some(locator) => Consumer::start_located(&parts, &options.topic, options.fetch, locator)?,
        None => Consumer::start_on(&parts, &options.topic, options.fetch)?,
    };
    Ok(Source::Remote(Box::new(consumer), ends))
}

fn follow_embedded(
    options: &Options,
    follows: &mut [Follow],
    printer: &mut Printer<'_>,
    say: Say,
) -> anyhow::Result<()> {
    while printer.printed < printer.limit && !crate::stop::stopping() {
        let mut progressed = false;
        for f in follows.iter_mut() {
            f.check_damage(&options.topic, printer)?;
            let stop_at = if options.exit_at_end {
                f.end_offset
            } else {
                u64::MAX
            };
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
            let n = n.with_context(|| format!("cannot read {} [{partition}]", options.topic))?;
            progressed |= n > 0;
            f.check_damage(&options.topic, printer)?;
            if let Some((from, to)) = f.reader.take_skipped() {
                say.info(format_args!(
                    "{} [{partition}]: offsets {from} to {} were deleted before they were read; \
                     going on at offset {to}",
                    options.topic,
                    to - 1
                ));
            }
            if printer.printed >= printer.limit {
                return Ok(());
            }
        }
        for f in follows.iter_mut() {
            if options.exit_at_end && !f.reported_end && f.reader.next_offset() >= f.end_offset {
                f.reported_end = true;
                say.info(format_args!(
                    "Reached end of topic {} [{}] at offset {}",
                    options.topic, f.partition, f.end_offset
                ));
            }
        }
        if options.exit_at_end
            && follows
                .iter()
                .all(|f| f.reader.next_offset() >= f.end_offset)
        {
            return Ok(());
        }
        if !progressed {
            printer.out.flush().context("cannot write to stdout")?;
            if stdout_closed() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

fn new_printer(options: &Options) -> Printer<'_> {
    let stdout = io::stdout();
    let capacity = if stdout.is_terminal() {
        8 * 1024
    } else {
        256 * 1024
    };
    Printer {
        options,
        out: BufWriter::with_capacity(capacity, stdout.lock()),
        printed: 0,
        limit: options.records_max.unwrap_or(u64::MAX),
        json_line: Vec::new(),
        tap: None,
    }
}

fn follow_remote(
    options: &Options,
    consumer: &mut Consumer,
    ends: &[(u32, u64)],
    printer: &mut Printer<'_>,
    say: Say,
) -> anyhow::Result<()> {
    let mut reported = vec![false; ends.len()];
    let context = || format!("cannot read {} from {}", options.topic, options.broker);
    loop {
        if options.exit_at_end {
            for (i, &(p, end)) in ends.iter().enumerate() {
                let at = consumer
                    .partitions()
                    .iter()
                    .find(|c| c.partition == p)
                    .map_or(end, |c| c.offset);
                if !reported[i] && at >= end {
                    reported[i] = true;
                    say.info(format_args!(
                        "Reached end of topic {} [{p}] at offset {at}",
                        options.topic
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
        for notice in consumer.take_notices() {
            say.info(notice);
        }
        if n == 0 {
            printer.out.flush().context("cannot write to stdout")?;
            if stdout_closed() {
                return Ok(());
            }
        }
    }
}

/// Whether stdout is a pipe whose reader is gone (`| head`): noticed while
/// waiting for records, so that the tool ends at once rather than at the
/// next record's write. (A pipe with no reader polls as an error.)
fn stdout_closed() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let stdout = io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::POLLOUT)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

fn write_error(e: io::Error) -> crate::Error {
    crate::Error::io("write", "stdout", e)
}
