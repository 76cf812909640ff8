//! `klog-produce --audit-topic AUDIT`: stamps every record with its origin
//! and number, counts the records of each window, and publishes the counts
//! of the windows that changed at every window boundary and at the end
//! (the format: [`crate::tools::audit`]).
//!
//! The stamp costs no allocation per record: the `klog.seq` header of the
//! last record is taken back before the next is parsed, and rewritten.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::sink::{open_sink, Sink};
use super::{with_partitioner, Options};
use crate::client::partitioner::Partitioner;
use crate::client::ParsedRecord;
use crate::tools::audit::{window_of, Count, HOST_HEADER, PRODUCER_HEADER, SEQ_HEADER};
use crate::tools::Say;

/// Windows a run keeps counting at most (a clock stepping back and forth
/// makes more): past this, the oldest is forgotten once published.
const WINDOWS_KEPT_MAX: usize = 10_000;

/// A producer run's audit (see the module doc).
pub(super) struct Auditor {
    id: String,
    host: String,
    topic: String,
    window_ms: u64,
    /// By window start: the records counted, and whether the count
    /// changed since it was published.
    counts: BTreeMap<i64, (u64, bool)>,
    next_seq: u64,
    /// The `klog.seq` header taken back from the last record.
    spare: Option<(Vec<u8>, Vec<u8>)>,
    /// The next window boundary (ms since the epoch): counts go then.
    next_publish: i64,
    /// Where counts go: the audit topic, opened on first use.
    options: Options,
    sink: Option<(Sink, Partitioner)>,
}

impl Auditor {
    /// An audit of the records `options` sends, published to
    /// `audit_topic` per window of `window_ms`, through the same brokers.
    pub(super) fn new(options: &Options, audit_topic: &str, window_ms: u64) -> Auditor {
        let mut rng = crate::random::XorShift::new(seed());
        let mut audit = options.clone();
        audit.topic = audit_topic.to_string();
        audit.partition = None;
        audit.headers.clear();
        audit.acks = crate::protocol::ACKS_ALL;
        audit.report = None;
        audit.audit = None;
        let now = crate::clock::now_ms();
        Auditor {
            id: format!("{:016x}", rng.next()),
            host: crate::tools::audit::host_name(),
            topic: options.topic.clone(),
            window_ms: window_ms.max(1),
            counts: BTreeMap::new(),
            next_seq: 0,
            spare: None,
            next_publish: window_of(now, window_ms) + window_ms as i64,
            options: audit,
            sink: None,
        }
    }

    /// The headers every record gets: its host and producer run.
    pub(super) fn fixed_headers(&self) -> [(String, String); 2] {
        [
            (HOST_HEADER.into(), self.host.clone()),
            (PRODUCER_HEADER.into(), self.id.clone()),
        ]
    }

    /// Takes back the `klog.seq` header of the last record stamped, before
    /// the next is parsed into `record`.
    pub(super) fn recycle(&mut self, record: &mut ParsedRecord) {
        if record
            .headers
            .last()
            .is_some_and(|(n, _)| n == SEQ_HEADER.as_bytes())
        {
            self.spare = record.headers.pop();
        }
    }

    /// Stamps `record` with its number (replacing audit headers it came
    /// with: a `-J` envelope of another producer's record is this run's
    /// now).
    pub(super) fn stamp(&mut self, record: &mut ParsedRecord) {
        let ours = [HOST_HEADER, PRODUCER_HEADER, SEQ_HEADER].map(str::as_bytes);
        record
            .headers
            .retain(|(n, _)| !ours.contains(&n.as_slice()));
        let (mut name, mut value) = self.spare.take().unwrap_or_default();
        name.clear();
        name.extend_from_slice(SEQ_HEADER.as_bytes());
        value.clear();
        let _ = write!(value, "{}", self.next_seq);
        record.headers.push((name, value));
        self.next_seq += 1;
    }

    /// Counts a record of timestamp `ts` handed to the batches.
    pub(super) fn counted(&mut self, ts: i64) {
        let entry = self
            .counts
            .entry(window_of(ts, self.window_ms))
            .or_default();
        *entry = (entry.0 + 1, true);
    }

    /// When the next counts are due.
    pub(super) fn due(&self) -> Instant {
        let left = self.next_publish - crate::clock::now_ms();
        Instant::now() + Duration::from_millis(left.clamp(0, i64::MAX) as u64)
    }

    /// At a window boundary (or `all`, at the end): publishes the counts
    /// of the windows that changed and have ended (all of them, at the
    /// end), and sends them at once.
    pub(super) fn publish_due(&mut self, all: bool) -> anyhow::Result<()> {
        let now = crate::clock::now_ms();
        if !all && now < self.next_publish {
            return Ok(());
        }
        self.next_publish = window_of(now, self.window_ms) + self.window_ms as i64;
        let due: Vec<Count> = (self.counts.iter_mut())
            .filter(|(w, (_, changed))| *changed && (all || **w + self.window_ms as i64 <= now))
            .map(|(&window, (count, changed))| {
                *changed = false;
                Count {
                    producer: self.id.clone(),
                    host: self.host.clone(),
                    topic: self.topic.clone(),
                    window,
                    window_ms: self.window_ms,
                    count: *count,
                }
            })
            .collect();
        while self.counts.len() > WINDOWS_KEPT_MAX {
            self.counts.pop_first();
        }
        if due.is_empty() {
            return Ok(());
        }
        let (sink, partitioner) = match &mut self.sink {
            Some(open) => open,
            none => none.insert(with_partitioner(
                &self.options,
                open_sink(&self.options, None)?,
            )?),
        };
        let topic = &self.options.topic;
        for count in &due {
            let record = ParsedRecord {
                key: Some(count.producer.as_bytes().to_vec()),
                value: serde_json::to_vec(count).expect("a count is JSON"),
                ..ParsedRecord::default()
            };
            let p = partitioner.partition(record.key.as_deref());
            sink.send(p, &record, &[], now)
                .with_context(|| format!("cannot publish the audit to {topic:?}"))?;
        }
        sink.flush_batches(now)
            .with_context(|| format!("cannot publish the audit to {topic:?}"))
    }

    /// Publishes what is left and waits for its acknowledgement.
    pub(super) fn finish(mut self, say: Say) -> anyhow::Result<()> {
        self.publish_due(true)?;
        let Some((sink, _)) = self.sink.take() else {
            return Ok(());
        };
        let topic = self.options.topic.clone();
        sink.close(say)
            .1
            .with_context(|| format!("cannot publish the audit to {topic:?}"))
    }
}

/// A seed for the run's id: the clock and the process.
fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32) ^ 0x9E37_79B9_7F4A_7C15
}
