//! `klog-produce --audit-topic AUDIT`: stamps every record with its origin
//! and number, counts the records of each window, and publishes the counts
//! of the windows that changed at every window boundary and at the end
//! (the format: [`crate::tools::audit`]).
//!
//! The stamp allocates no header of its own per record: the `klog.seq`
//! header of the last record is taken back before the next is parsed, and
//! rewritten. (A record with headers is batched through one list of them:
//! that list is the cost per record of an audit.)
//!
//! Counts go at each window boundary; a record of a window that has
//! ended (read late, or with an older timestamp) sends its window's count
//! again within [`LATE_EVERY`]. A count that cannot be published (the
//! audit topic's broker is down) is said on stderr and sent again with
//! the next; the data goes on. Only the last counts, at the end, fail the
//! run when they cannot go.

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
const WINDOWS_KEPT_MAX: usize = 100_000;

/// How soon the count of an ended window that grew goes again.
const LATE_EVERY: i64 = 100;

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
    /// An ended window grew since the last publish, and when that was.
    late: bool,
    last_publish: i64,
    say: Say,
    /// Where counts go: the audit topic, opened on first use.
    options: Options,
    sink: Option<(Sink, Partitioner)>,
}

impl Auditor {
    /// An audit of the records `options` sends, published to
    /// `audit_topic` per window of `window_ms`, through the same brokers.
    pub(super) fn new(options: &Options, audit_topic: &str, window_ms: u64) -> Auditor {
        let mut rng = crate::random::XorShift::new(seed());
        rng.next();
        let mut audit = options.clone();
        audit.topic = audit_topic.to_string();
        audit.partition = None;
        audit.headers.clear();
        audit.acks = crate::protocol::ACKS_ALL;
        audit.report = None;
        audit.audit = None;
        // Counts are not part of the data's transactions: another id
        // would fence this one.
        audit.transaction = None;
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
            late: false,
            last_publish: now,
            say: Say {
                quiet: options.quiet,
            },
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
        let window = window_of(ts, self.window_ms);
        let entry = self.counts.entry(window).or_default();
        *entry = (entry.0 + 1, true);
        // Of a window that ended before the current one began.
        self.late |= window.saturating_add(self.window_ms as i64) < self.next_publish;
    }

    /// When the next counts are due.
    pub(super) fn due(&self) -> Instant {
        let next = match self.late {
            true => self.last_publish + LATE_EVERY,
            false => self.next_publish,
        };
        let left = next - crate::clock::now_ms();
        Instant::now() + Duration::from_millis(left.clamp(0, i64::MAX) as u64)
    }

    /// At a window boundary, or soon after an ended window grew:
    /// publishes the counts of the windows that changed and have ended,
    /// and sends them at once. A failure is said, and they go again next
    /// time.
    pub(super) fn publish_due(&mut self) {
        let now = crate::clock::now_ms();
        let w = self.window_ms as i64;
        if now < self.next_publish - w {
            // The clock stepped back past the current window.
            self.next_publish = window_of(now, self.window_ms) + w;
        }
        let late = self.late && now >= self.last_publish + LATE_EVERY;
        if now < self.next_publish && !late {
            return;
        }
        self.next_publish = window_of(now, self.window_ms) + w;
        if let Err(e) = self.publish(|window| window.saturating_add(w) <= now) {
            self.say
                .info(format_args!("{e:#}: sent again with the next counts"));
        }
    }

    /// Publishes the counts of the windows that changed and `ended`, and
    /// marks them published once they are sent.
    fn publish(&mut self, ended: impl Fn(i64) -> bool) -> anyhow::Result<()> {
        let now = crate::clock::now_ms();
        self.last_publish = now;
        let due: Vec<Count> = (self.counts.iter())
            .filter(|(&w, (_, changed))| *changed && ended(w))
            .map(|(&window, &(count, _))| Count {
                producer: self.id.clone(),
                host: self.host.clone(),
                topic: self.topic.clone(),
                window,
                window_ms: self.window_ms,
                count,
            })
            .collect();
        self.late = false;
        if !due.is_empty() {
            if let Err(e) = self.send(&due, now) {
                // Opened anew at the next boundary (not sooner: a broker
                // that is down would hold the data at every try).
                self.sink = None;
                return Err(e);
            }
        }
        for c in &due {
            if let Some((count, changed)) = self.counts.get_mut(&c.window) {
                *changed &= *count != c.count;
            }
        }
        while self.counts.len() > WINDOWS_KEPT_MAX {
            self.counts.pop_first();
        }
        Ok(())
    }

    /// Sends `counts` to the audit topic.
    fn send(&mut self, counts: &[Count], now: i64) -> anyhow::Result<()> {
        let topic = self.options.topic.clone();
        let context = || format!("cannot publish the audit to {topic:?}");
        let (sink, partitioner) = match &mut self.sink {
            Some(open) => open,
            none => {
                let sink = open_sink(&self.options, None).with_context(context)?;
                none.insert(with_partitioner(&self.options, sink)?)
            }
        };
        for count in counts {
            let record = ParsedRecord {
                key: Some(count.producer.as_bytes().to_vec()),
                value: serde_json::to_vec(count).expect("a count is JSON"),
                ..ParsedRecord::default()
            };
            let p = partitioner.partition(record.key.as_deref());
            sink.send(p, &record, &[], now).with_context(context)?;
        }
        sink.flush_batches(now).with_context(context)
    }

    /// Publishes what is left and waits for its acknowledgement.
    pub(super) fn finish(mut self, say: Say) -> anyhow::Result<()> {
        self.publish(|_| true)?;
        let Some((sink, _)) = self.sink.take() else {
            return Ok(());
        };
        let topic = self.options.topic.clone();
        sink.close(say)
            .1
            .with_context(|| format!("cannot publish the audit to {topic:?}"))
    }
}

/// A seed for the run's id: 8 bytes of /dev/urandom (the clock and the
/// process where it cannot be read).
fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if random.is_ok() {
        return u64::from_le_bytes(bytes);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 32) ^ 0x9E37_79B9_7F4A_7C15
}
