//! Producing: turning input bytes into records, choosing partitions, and
//! appending batches, here to a local data directory (embedded mode).
//!
//! Input is split into records at a delimiter (default `\n`; a final
//! record without one counts too). Each record may be split into key and
//! value at the first key delimiter (`-K`), or parsed as the JSON envelope
//! that `klog-consume -J` prints (`-J`). A record that cannot be parsed
//! (or is over a limit) is said with its line number, counted failed, and
//! the rest is still sent. With `-l` each input file is one record instead.
//!
//! Each record is stamped with the time its last bytes were read (a `-J`
//! envelope's own `ts` wins), one clock read per read of input, not per
//! record. The partial batches are written `--linger` after the oldest
//! of them got its first record, however the input trickles. A broker is
//! first asked when the first record is there, so
//! that a record that cannot be delivered (the broker is silent past
//! `--message-timeout`) counts as failed like any other.
//!
//! # Partitioner
//!
//! With a key, the partition is `(murmur2(key) & 0x7fffffff) % partitions`,
//! Kafka's default partitioner (murmur2 with seed `0x9747b28c`), so a key
//! lands in the partition a Kafka client would choose. Without a key,
//! records go round-robin. A fixed partition (`-p`) overrides both.

use std::io::{self, Read};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::client::partitioner::Partitioner;
use crate::client::producer::Batches;
use crate::client::{AckReport, BatchOptions, ParsedRecord};
use crate::error::{Error, Result};
use crate::storage::lock::DirLock;
use crate::storage::log::{Log, LogConfig, OpenOptions};
use crate::storage::store::Store;

mod audit;
mod parse;
mod sink;
use audit::Auditor;
pub use parse::{parse_envelope, parse_record, ParseOptions};
use sink::{open_sink, Sink};

use super::input::{ChannelReader, FileRecords, Records};
use super::Say;

/// Splits a byte stream into records at a delimiter, through one buffer.
#[derive(Debug)]
pub struct RecordSplitter<R> {
    input: R,
    delimiter: Vec<u8>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    record_bytes_max: usize,
    /// Inside a record found too long: its bytes are dropped up to the
    /// next delimiter.
    skipping: bool,
    /// Number of the record last returned (or refused), from 1.
    pub number: u64,
}

const READ_CHUNK_BYTES: usize = 1 << 20;

impl<R: Read> RecordSplitter<R> {
    /// Splits `input` at `delimiter`; a record longer than `record_bytes_max` is
    /// an error (so memory stays bounded whatever the input).
    pub fn new(input: R, delimiter: Vec<u8>, record_bytes_max: usize) -> Self {
        assert!(!delimiter.is_empty());
        RecordSplitter {
            input,
            delimiter,
            buf: vec![0; READ_CHUNK_BYTES],
            start: 0,
            end: 0,
            eof: false,
            record_bytes_max,
            skipping: false,
            number: 0,
        }
    }

    fn find(&self, from: usize) -> Option<usize> {
        let hay = &self.buf[from..self.end];
        let d = &self.delimiter;
        if d.len() == 1 {
            return hay.iter().position(|&b| b == d[0]).map(|i| from + i);
        }
        hay.windows(d.len())
            .position(|w| w == d.as_slice())
            .map(|i| from + i)
    }

    /// The input being split.
    pub fn input(&self) -> &R {
        &self.input
    }

    /// The input being split, to change how it reads.
    pub fn input_mut(&mut self) -> &mut R {
        &mut self.input
    }

    /// The next record, or `None` at the end of the input. A record longer
    /// than the limit is an `InvalidData` error, and the next call goes on
    /// after it (its bytes are dropped, never held).
    pub fn next_record(&mut self) -> io::Result<Option<&[u8]>> {
        let mut searched = self.start;
        loop {
            if self.skipping {
                match self.find(self.start) {
                    Some(at) => {
                        self.start = at + self.delimiter.len();
                        self.skipping = false;
                        searched = self.start;
                    }
                    // Keep what may be the start of a delimiter.
                    None => {
                        self.start = self
                            .end
                            .saturating_sub(self.delimiter.len() - 1)
                            .max(self.start)
                    }
                }
            }
            if let Some(at) = self.find(searched).filter(|_| !self.skipping) {
                let record = self.start..at;
                self.start = at + self.delimiter.len();
                self.number += 1;
                return Ok(Some(&self.buf[record]));
            }
            if self.eof {
                if self.start == self.end || self.skipping {
                    return Ok(None);
                }
                let record = self.start..self.end;
                self.start = self.end;
                self.number += 1;
                return Ok(Some(&self.buf[record]));
            }
            let held = self.end - self.start;
            if !self.skipping && held > self.record_bytes_max + self.delimiter.len() {
                self.number += 1;
                self.skipping = true;
                self.start = self.end.saturating_sub(self.delimiter.len() - 1);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "longer than {} bytes (--max-record-bytes)",
                        self.record_bytes_max
                    ),
                ));
            }
            searched = (self.end - self.start).saturating_sub(self.delimiter.len() - 1);
            // Move the partial record to the front, grow if it fills the buffer.
            self.buf.copy_within(self.start..self.end, 0);
            self.end = held;
            self.start = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let n = match self.input.read(&mut self.buf[self.end..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.eof = n == 0;
            self.end += n;
        }
    }
}

/// What a produce run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProduceSummary {
    /// Records appended.
    pub delivered: u64,
    /// Records read but not appended.
    pub failed: u64,
}

/// Appends records to the partitions of one topic of a local data
/// directory, one batch builder per partition.
#[derive(Debug)]
pub struct EmbeddedProducer {
    /// The data directory's writer lock, held while this lives.
    _lock: Option<DirLock>,
    store: Store,
    topic: String,
    config: LogConfig,
    logs: Vec<Option<Log>>,
    batches: Batches,
    /// Records appended so far.
    pub delivered: u64,
}

impl EmbeddedProducer {
    /// Takes `store`'s writer lock and opens (creating with `partitions` if
    /// absent) `topic` in it.
    pub fn new(
        store: Store,
        topic: &str,
        partitions: u32,
        config: LogConfig,
        batch: BatchOptions,
    ) -> Result<Self> {
        let lock = store.lock()?;
        let count = store.create_topic(topic, partitions)?;
        Ok(EmbeddedProducer {
            _lock: lock,
            store,
            topic: topic.to_string(),
            batches: Batches::new(topic, count, batch, config.record_bytes_max),
            config,
            logs: (0..count).map(|_| None).collect(),
            delivered: 0,
        })
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.logs.len() as u32
    }

    /// Adds a record to its partition's batch, appending the batch when full.
    pub fn send(
        &mut self,
        partition: u32,
        record: &ParsedRecord,
        fixed_headers: &[(&[u8], &[u8])],
        now: i64,
    ) -> Result<()> {
        let admitted = self.batches.admit(partition, record, fixed_headers, now)?;
        if admitted.ship_first {
            self.flush_partition(partition, now)?;
        }
        if self.batches.push(partition, record, &admitted) {
            self.flush_partition(partition, now)?;
        }
        Ok(())
    }

    fn flush_partition(&mut self, partition: u32, now: i64) -> Result<()> {
        let p = partition as usize;
        if self.batches.batch(partition).is_empty() {
            return Ok(());
        }
        if self.logs[p].is_none() {
            let options = OpenOptions {
                writable: true,
                lock: true,
            };
            self.logs[p] =
                Some(
                    self.store
                        .open_log(&self.topic, partition, self.config.clone(), options)?,
                );
        }
        let log = self.logs[p].as_mut().expect("opened");
        let info = log.append(self.batches.batch(partition).finish(), now)?;
        self.batches.clear(partition);
        self.delivered += u64::from(info.record_count);
        log.maybe_flush(now)?;
        Ok(())
    }

    /// Appends every partial batch (the linger time has passed).
    pub fn flush_batches(&mut self, now: i64) -> Result<()> {
        for p in 0..self.partitions() {
            self.flush_partition(p, now)?;
        }
        Ok(())
    }

    /// Records waiting in batches.
    pub fn batched_records(&self) -> u64 {
        self.batches.records()
    }

    /// When the oldest batch not yet appended got its first record.
    pub fn oldest_batch(&self) -> Option<Instant> {
        self.batches.oldest()
    }

    /// Appends every partial batch, then flushes and closes every log.
    pub fn close(mut self) -> Result<u64> {
        self.flush_batches(crate::clock::now_ms())?;
        for log in self.logs.into_iter().flatten() {
            log.close()?;
        }
        Ok(self.delivered)
    }
}

/// What `klog-produce` is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Topic to produce to.
    pub topic: String,
    /// Fixed partition (default: hash of the key, round-robin without one).
    pub partition: Option<u32>,
    /// How input records become keys, values and headers.
    pub parse: ParseOptions,
    /// Record delimiter.
    pub delimiter: Vec<u8>,
    /// Headers added to every record, as (name, value).
    pub headers: Vec<(String, String)>,
    /// When a batch is full.
    pub batch: BatchOptions,
    /// The most a partial batch waits after its first record.
    pub linger_ms: u64,
    /// Acknowledgements asked of a broker: 0, 1 or -1 (all).
    pub acks: i8,
    /// Idempotent: batches numbered, stored once when sent again.
    pub idempotent: bool,
    /// A record not acknowledged this long after it was read counts as
    /// failed (connecting to the broker included).
    pub message_timeout_ms: u64,
    /// A request a broker has not answered this long is sent again (to
    /// the partition's leader, looked up again), within the message
    /// timeout.
    pub request_timeout_ms: u64,
    /// How often the topic's partition count is asked again (not in
    /// embedded mode), in ms.
    pub metadata_refresh_ms: u64,
    /// Embedded mode: partitions of a topic this run creates.
    pub partitions: u32,
    /// The broker to send to (without `data_dir` and `registry`).
    pub broker: String,
    /// Embedded mode: append to the logs of this data directory directly.
    pub data_dir: Option<PathBuf>,
    /// Find each partition's broker in this registry.
    pub registry: Option<PathBuf>,
    /// The logs' configuration in embedded mode; its `record_bytes_max`
    /// bounds records in every mode.
    pub log: LogConfig,
    /// Only print errors.
    pub quiet: bool,
    /// Files to read instead of stdin (`-` is stdin).
    pub files: Vec<PathBuf>,
    /// Each file is one record (kcat's default for file arguments); else
    /// files are split at the delimiter as stdin is (kcat's `-l`).
    pub whole_files: bool,
    /// Write each acknowledged record to this file, one JSON line each
    /// (see [`crate::client::report`]).
    pub report: Option<PathBuf>,
    /// `-J`: each record goes to the partition its envelope names.
    pub source_partition: bool,
    /// Transactional: the transactional id, the interval between commits
    /// and the transaction timeout, in ms (`--transactional-id`).
    pub transaction: Option<TransactionOptions>,
    /// Stamp every record and publish counts per window to this topic,
    /// with this window in ms (see [`crate::tools::audit`]).
    pub audit: Option<(String, u64)>,
}

/// Sends the input to the topic (through a broker, a registry's brokers,
/// or straight into a data directory) and reports how many records went.
pub fn run(options: &Options) -> anyhow::Result<()> {
    let say = Say {
        quiet: options.quiet,
    };
    options.log.validate()?;
    // Created before any input is read, so that a path that cannot be
    // written is said at once. Leaked: the producers' configuration,
    // which names it, is `Copy` (one per run of the tool).
    let report: Option<&'static AckReport> = match &options.report {
        Some(path) => Some(Box::leak(Box::new(
            AckReport::create(path, &options.topic)
                .with_context(|| format!("cannot write the report {}", path.display()))?,
        ))),
        None => None,
    };
    // A data directory is opened at once (a lock held by another writer
    // is reported before any input is read); a broker when a record is
    // there to send.
    let sink = match options.data_dir {
        Some(_) => Some(open_sink(options, None)?),
        None => None,
    };
    let sent = send_input(options, say, sink, report);
    let reported = report.map_or(Ok(()), AckReport::finish);
    sent?;
    reported.context("the report of acknowledged records is incomplete")?;
    Ok(())
}

/// A transactional producer's settings (`--transactional-id`).
#[derive(Debug, Clone)]
pub struct TransactionOptions {
    /// The transactional id (also the destination's group that keeps the
    /// source offsets).
    pub id: String,
    /// How long a transaction stays open before it commits.
    pub interval_ms: u64,
    /// An open transaction older than this is aborted by the coordinator.
    pub timeout_ms: u32,
}

/// What a run handed over, and where to.
struct Run {
    /// The sink and its partitioner: opened with the first record (at
    /// once in embedded mode).
    sink: Option<(Sink, Partitioner)>,
    /// Records handed to the sink (delivered or not).
    handed: u64,
    /// Records that could not be parsed or were too long, never handed.
    refused: u64,
    /// Records not sent because a committed transaction stored them.
    stored_before: u64,
    /// Where acknowledged records are written.
    report: Option<&'static AckReport>,
    /// Records delivered by sinks closed when the topic grew.
    delivered: u64,
    /// What asks for the topic's partition count, once a sink is open
    /// (none in embedded mode).
    looker: Option<sink::Looker>,
    /// Whether the looker was started.
    looking: bool,
    /// The audit (`--audit-topic`).
    audit: Option<Auditor>,
}

impl Run {
    /// A run into `sink`, or into the one `options` asks for, opened on
    /// first use.
    fn new(
        options: &Options,
        sink: Option<Sink>,
        report: Option<&'static AckReport>,
    ) -> anyhow::Result<Run> {
        let mut run = Run {
            sink: None,
            handed: 0,
            refused: 0,
            stored_before: 0,
            report,
            delivered: 0,
            looker: None,
            looking: false,
            audit: (options.audit.as_ref()).map(|(topic, ms)| Auditor::new(options, topic, *ms)),
        };
        if let Some(sink) = sink {
            run.sink = Some(with_partitioner(options, sink)?);
        }
        Ok(run)
    }

    /// Parses `raw` into `record`, stamped for the audit if there is one
    /// (its header taken back from the last record first).
    fn parse(
        &mut self,
        raw: &[u8],
        options: &ParseOptions,
        record: &mut ParsedRecord,
    ) -> std::result::Result<(), String> {
        if let Some(audit) = &mut self.audit {
            audit.recycle(record);
        }
        parse_record(raw, options, record)?;
        if let Some(audit) = &mut self.audit {
            audit.stamp(record);
        }
        Ok(())
    }

    /// Does what is due: the linger time passed (partial batches are
    /// written, or the batches a moved leader gave back looked at), or a
    /// window of the audit ended.
    fn on_due(&mut self, linger: (Duration, Duration), say: Say) -> anyhow::Result<()> {
        if let Some((sink, _)) = &mut self.sink {
            let done = sink.on_due(linger);
            sink.tell(say);
            done?;
        }
        if let Some(audit) = &mut self.audit {
            audit.publish_due();
        }
        Ok(())
    }

    /// When something is due: the sink's partial batches (see
    /// [`Sink::due`]), or the audit's counts.
    fn due(&self, linger: (Duration, Duration)) -> Option<Instant> {
        let sink = self.sink.as_ref().and_then(|(sink, _)| sink.due(linger));
        let audit = self.audit.as_ref().map(Auditor::due);
        sink.into_iter().chain(audit).min()
    }

    /// The partition `record` goes to, opening the sink on first use, or
    /// `None` when it does not go: its partition is refused (said, and
    /// counted), or a committed transaction stored it before.
    fn partition_of(
        &mut self,
        options: &Options,
        record: &ParsedRecord,
        label: impl FnOnce() -> String,
    ) -> anyhow::Result<Option<u32>> {
        let (sink, keyed) = self.sink_for(options, record.key.as_deref())?;
        let partition = match placed(options, record, keyed, sink.partitions()) {
            Ok(p) => p,
            Err(why) => {
                self.handed -= 1;
                refuse(self, label(), why);
                return Ok(None);
            }
        };
        if sink.stored_before(record)? {
            self.handed -= 1;
            self.stored_before += 1;
            return Ok(None);
        }
        Ok(Some(partition))
    }

    /// Whether the run goes on: a transactional one stops at a record it
    /// refused, as its later records would commit offsets past it.
    fn go_on(&self, options: &Options) -> anyhow::Result<()> {
        if options.transaction.is_some() && self.refused > 0 {
            anyhow::bail!(
                "a transactional producer does not go past a record it cannot send \
                 (--transactional-id): it stops there"
            );
        }
        Ok(())
    }

    /// The sink, opened on first use, and the partition for `key`.
    #[inline]
    fn sink_for(
        &mut self,
        options: &Options,
        key: Option<&[u8]>,
    ) -> anyhow::Result<(&mut Sink, u32)> {
        if self.sink.is_none() {
            self.sink = Some(with_partitioner(options, open_sink(options, self.report)?)?);
        }
        let (sink, partitioner) = self.sink.as_mut().expect("opened");
        Ok((sink, partitioner.partition(key)))
    }
}

/// `sink` and a partitioner over its partitions, once `-p` is checked.
fn with_partitioner(options: &Options, sink: Sink) -> anyhow::Result<(Sink, Partitioner)> {
    let count = sink.partitions();
    if let Some(p) = options.partition.filter(|&p| p >= count) {
        anyhow::bail!(Error::UnknownPartition {
            topic: options.topic.clone(),
            partition: p,
            count
        });
    }
    Ok((sink, Partitioner::new(count, options.partition)))
}

/// Sends the input to `sink` (opened on the first record when `None`),
/// closes it, and reports: every record read and not delivered counts as
/// failed.
fn send_input(
    options: &Options,
    say: Say,
    sink: Option<Sink>,
    report: Option<&'static AckReport>,
) -> anyhow::Result<()> {
    let mut run = Run::new(options, sink, report)?;
    let record_bytes_max = options.log.record_bytes_max as usize;
    let mut outcome = if options.whole_files && !options.files.is_empty() {
        let files = options.files.clone();
        let mut records = FileRecords::open(files, record_bytes_max, options.quiet)?;
        produce_all(options, &mut records, &mut run)
    } else {
        let reader = ChannelReader::open(options.files.clone(), options.delimiter.clone())?;
        let delimiter = options.delimiter.clone();
        let mut records = RecordSplitter::new(reader, delimiter, record_bytes_max);
        produce_all(options, &mut records, &mut run)
    };
    if outcome.is_ok() && run.sink.is_none() && !crate::stop::stopping() {
        // No record at all: the broker is still asked, so that the topic
        // exists and a wrong address is reported.
        outcome = run.sink_for(options, None).map(|_| ());
    }
    let (delivered, closed) = match run.sink {
        Some((sink, _)) => sink.close(say),
        None => (0, Ok(())),
    };
    // The last counts go once the records are delivered.
    let audited = run.audit.map_or(Ok(()), |audit| audit.finish(say));
    let delivered = run.delivered + delivered;
    let failed = run.handed.saturating_sub(delivered) + run.refused;
    // With acks 0 the broker says nothing: a record sent is not known to
    // have arrived.
    let unknown = if options.acks == crate::protocol::ACKS_NONE && options.data_dir.is_none() {
        " (sent, not acknowledged: --acks 0)"
    } else {
        ""
    };
    let before = match run.stored_before {
        0 => String::new(),
        n => format!(
            ", {} stored before by a committed transaction",
            crate::human::count(n, "record")
        ),
    };
    say.info(format_args!(
        "Sent {} to {}{unknown} ({failed} failed{before})",
        crate::human::count(delivered, "record"),
        options.topic
    ));
    outcome?;
    closed.context("cannot deliver the last batches")?;
    audited?;
    if failed > 0 {
        let verb = if failed == 1 { "was" } else { "were" };
        anyhow::bail!(
            "{} {verb} not delivered",
            crate::human::count(failed, "record")
        );
    }
    Ok(())
}

/// The partition of `record`: `keyed` (by its key, or fixed), or with
/// `--source-partition` the one its envelope names, when the topic (of
/// `count` partitions) has it.
fn placed(
    options: &Options,
    record: &ParsedRecord,
    keyed: u32,
    count: u32,
) -> std::result::Result<u32, String> {
    if !options.source_partition {
        return Ok(keyed);
    }
    match &record.source {
        Some(s) if s.partition < count => Ok(s.partition),
        Some(s) => Err(format!(
            "--source-partition: {:?} has no partition {} ({count} partitions)",
            options.topic, s.partition
        )),
        None => Err("--source-partition: its envelope names no topic, partition and offset".into()),
    }
}

/// Says that a record of the input is refused and why (`% line 7: ...`,
/// `% record 7: ...` with a delimiter other than a newline, `% FILE: ...`
/// for a file sent whole), and counts it failed.
fn refuse(run: &mut Run, what: impl std::fmt::Display, why: impl std::fmt::Display) {
    run.refused += 1;
    crate::diag::line(format_args!("% {what}: {why}"));
}

impl Records for RecordSplitter<ChannelReader> {
    fn next_record(&mut self) -> io::Result<Option<&[u8]>> {
        RecordSplitter::next_record(self)
    }

    fn label(&self) -> String {
        let unit = if self.delimiter == b"\n" {
            "line"
        } else {
            "record"
        };
        format!("{unit} {}", self.number)
    }

    fn read_at_ms(&self) -> i64 {
        self.input.read_at_ms()
    }

    fn set_due(&mut self, due: Option<Instant>) {
        self.input.set_due(due);
    }
}

/// Splits the input into records and sends each to its partition, writing
/// the partial batches `linger` after the oldest of them got its first
/// record.
fn produce_all(options: &Options, records: &mut impl Records, run: &mut Run) -> anyhow::Result<()> {
    let audited = run.audit.as_ref().map(Auditor::fixed_headers);
    let headers: Vec<(&[u8], &[u8])> = (options.headers.iter())
        .chain(audited.iter().flatten())
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
        .collect();
    // Partial batches wait `linger`; an open transaction, its interval.
    let interval = (options.transaction.as_ref()).map_or(0, |t| t.interval_ms);
    let linger = (
        Duration::from_millis(options.linger_ms),
        Duration::from_millis(interval),
    );
    let say = Say {
        quiet: options.quiet,
    };
    let mut record = ParsedRecord::default();
    loop {
        run.go_on(options)?;
        let raw = match records.next_record() {
            Ok(Some(raw)) => raw,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                run.on_due(linger, say)?;
                records.set_due(run.due(linger));
                continue;
            }
            // A record too long, or an input that cannot be read: said,
            // counted failed, and the rest is still sent.
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                refuse(run, records.label(), e);
                continue;
            }
            Err(e) => {
                run.refused += 1;
                crate::diag::line(format_args!("% {e}"));
                continue;
            }
        };
        if let Err(e) = run.parse(raw, &options.parse, &mut record) {
            refuse(run, records.label(), e);
            continue;
        }
        let now = records.read_at_ms();
        run.handed += 1;
        run.look_for_growth(options, say)?;
        let Some(partition) = run.partition_of(options, &record, || records.label())? else {
            continue;
        };
        let (sink, _) = run.sink.as_mut().expect("opened");
        match sink.send(partition, &record, &headers, now) {
            Ok(()) => {}
            // Over a limit of the format: this record only.
            Err(e @ (Error::TooLarge { .. } | Error::TooMany { .. })) => {
                run.handed -= 1;
                refuse(run, records.label(), e);
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("{} not delivered", records.label())),
        }
        sink.tell(say);
        if let Some(audit) = &mut run.audit {
            audit.counted(record.timestamp.unwrap_or(now));
            audit.publish_due();
        }
        records.set_due(run.due(linger));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Source;
    use crate::storage::record::Codec;
    use base64::Engine as _;

    #[test]
    fn splitter_handles_multibyte_delimiters_across_reads() {
        struct Slow<'a>(&'a [u8]);
        impl Read for Slow<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = buf.len().min(self.0.len()).min(3);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut s = RecordSplitter::new(Slow(b"ab::cd::::e"), b"::".to_vec(), 100);
        let mut out = Vec::new();
        while let Some(r) = s.next_record().unwrap() {
            out.push(r.to_vec());
        }
        assert_eq!(
            out,
            vec![b"ab".to_vec(), b"cd".to_vec(), b"".to_vec(), b"e".to_vec()]
        );
    }

    #[test]
    fn splitter_bounds_memory_and_goes_on_after_a_record_too_long() {
        let input = vec![b'x'; 10_000];
        let mut s = RecordSplitter::new(&input[..], b"\n".to_vec(), 100);
        assert!(s.next_record().is_err());
        assert!(s.next_record().unwrap().is_none(), "its tail is dropped");
        let mut input = b"a::".to_vec();
        input.extend(std::iter::repeat_n(b'x', 3 << 20));
        input.extend_from_slice(b"::b::");
        input.extend(std::iter::repeat_n(b'y', 300));
        input.extend_from_slice(b":::c");
        let mut s = RecordSplitter::new(&input[..], b"::".to_vec(), 100);
        assert_eq!(s.next_record().unwrap(), Some(&b"a"[..]));
        assert!(s.next_record().is_err());
        assert_eq!(s.number, 2);
        assert!(s.buf.len() <= 4 << 20, "{} bytes held", s.buf.len());
        assert_eq!(s.next_record().unwrap(), Some(&b"b"[..]));
        // Over the limit but held whole: the producer's check refuses it.
        assert_eq!(s.next_record().unwrap().map(<[u8]>::len), Some(300));
        assert_eq!(s.next_record().unwrap(), Some(&b":c"[..]));
        assert_eq!(s.number, 5);
        assert!(s.next_record().unwrap().is_none());
    }

    #[test]
    fn envelopes() {
        let r = parse_envelope(br#"{"key":"k","payload":"v","ts":5,"headers":["a","b"]}"#).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(r.value, b"v");
        assert_eq!(r.timestamp, Some(5));
        assert_eq!(r.headers, vec![(b"a".to_vec(), b"b".to_vec())]);
        assert!(parse_envelope(b"{").is_err());
        assert!(parse_envelope(br#"{"headers":["a"]}"#).is_err());
        assert!(parse_envelope(br#"[1]"#).is_err());
    }

    /// An envelope's topic, partition and offset are its record's source
    /// when all three are there, each of its type; else it has none.
    #[test]
    fn an_envelopes_coordinates_are_its_source() {
        let r = parse_envelope(br#"{"topic":"s","partition":2,"offset":9,"payload":"v"}"#);
        let source = Source {
            topic: "s".into(),
            partition: 2,
            offset: 9,
        };
        assert_eq!(r.unwrap().source, Some(source));
        for other in [
            &br#"{"topic":"s","offset":9,"payload":"v"}"#[..],
            br#"{"topic":1,"partition":2,"offset":9}"#,
            br#"{"topic":"s","partition":-2,"offset":9}"#,
            br#"{"topic":"s","partition":4294967296,"offset":9}"#,
            br#"{"topic":"s","partition":2,"offset":"9"}"#,
        ] {
            assert_eq!(parse_envelope(other).unwrap().source, None);
        }
    }

    /// Random envelopes, well-formed JSON with hostile values and plain
    /// garbage, are refused or batched: never a panic.
    #[test]
    fn random_envelopes_never_panic() {
        let mut rng = crate::random::XorShift::new(0x5EED_0001);
        let pieces = [
            "\"key\":\"k\"",
            "\"key\":null",
            "\"key\":7",
            "\"payload\":\"v\"",
            "\"payload\":\"Zh==\",\"payload_encoding\":\"base64\"",
            "\"payload_encoding\":\"rot13\"",
            "\"ts\":-9223372036854775808",
            "\"ts\":9223372036854775807",
            "\"ts\":1e300",
            "\"ts\":\"now\"",
            "\"headers\":[\"a\"]",
            "\"headers\":[\"a\",\"b\"]",
            "\"headers\":[1,2]",
            "\"headers\":{}",
            "\"headers_encoding\":\"base64\"",
        ];
        let batch = BatchOptions {
            records_max: 4,
            bytes_max: 1 << 16,
            codec: Codec::None,
            level: None,
        };
        let mut batches = crate::client::producer::Batches::new("t", 2, batch, 1 << 10);
        for round in 0..20_000 {
            let line = if round % 5 == 0 {
                (0..rng.next() % 40)
                    .map(|_| (rng.next() % 256) as u8)
                    .collect::<Vec<u8>>()
            } else {
                let fields: Vec<&str> = (0..rng.next() % 5)
                    .map(|_| pieces[rng.next() as usize % pieces.len()])
                    .collect();
                format!("{{{}}}", fields.join(",")).into_bytes()
            };
            let Ok(record) = parse_envelope(&line) else {
                continue;
            };
            let partition = (rng.next() % 3) as u32;
            let now = rng.next() as i64;
            match batches.admit(partition, &record, &[], now) {
                Ok(admitted) => {
                    if admitted.ship_first || batches.push(partition, &record, &admitted) {
                        batches.clear(partition);
                    }
                }
                Err(_) => continue,
            }
        }
    }

    #[test]
    fn base64_fields_are_canonical_rfc_4648() {
        let all: Vec<u8> = (0..=255).collect();
        let coded = base64::engine::general_purpose::STANDARD.encode(&all);
        let line = format!(r#"{{"payload":"{coded}","payload_encoding":"base64"}}"#);
        assert_eq!(parse_envelope(line.as_bytes()).unwrap().value, all);
        let r = parse_envelope(br#"{"payload":"Zm9vYg==","payload_encoding":"base64"}"#).unwrap();
        assert_eq!(r.value, b"foob");
        // Short padding, bad characters, data after padding, and trailing
        // bits that are not zero ("Zh==" would also decode to "f").
        for bad in ["Zg=", "Z===", "Zg==Zg==", "Zm9*", "é", "Zh=="] {
            let line = format!(r#"{{"payload":"{bad}","payload_encoding":"base64"}}"#);
            assert!(parse_envelope(line.as_bytes()).is_err(), "{bad}");
        }
    }
}
