//! The consumer: fetches ahead on a thread of its own, checks every
//! record's CRC, and hands records out from the wanted offset on.
//!
//! # Leaders that move
//!
//! A consumer started with a [`Locate`] (a cluster whose partitions have
//! leaders) follows them: a fetcher whose broker answers for a partition
//! that it does not lead it (`not_leader`, `leader_not_available`,
//! `partition_elsewhere`), or whose connection breaks, gives the
//! partition back; the consumer asks the locator for its leader (again and
//! again, backing off, while there is none) and fetches it there from the
//! next offset it has not handed out. Every record below that offset is
//! skipped, so a leader change never hands an offset out twice and never
//! goes back. A new leader whose log ends before that offset (it had not
//! copied all of it) is waited for: the partition is given back and
//! looked up again until it has caught up.
//!
//! # Isolation
//!
//! A read_committed consumer (the default, as kcat's) fetches with
//! klog's fetch version 6: its records end at each partition's last
//! stable offset (before the first transaction still open), and the
//! batches of aborted transactions are passed over (see `aborted`). A
//! read_uncommitted one reads every record up to the high watermark.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::connection::{
    connect_for_fetch, older_broker, protocol_error, Connection, REQUEST_TIMEOUT,
};
use crate::error::{Error, Result};
use crate::limits;
use crate::limits::BATCH_BYTES_MAX;
use crate::protocol::{self, ErrorCode, Reader};
use crate::storage::batches::Batches;
use crate::storage::record::{Decompressed, Format, Record};
use crate::sync::lock;

mod aborted;
mod fetcher;

use aborted::AbortedTxns;
use fetcher::{Fetched, Fetcher, Inbox, Spare};

/// A partition a consumer reads.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerPartition {
    /// Partition number.
    pub partition: u32,
    /// Next offset to hand out.
    pub offset: u64,
    /// Stop before this offset (`-e`), if set.
    pub stop_at: Option<u64>,
}

/// How a consumer fetches. It holds at most `prefetch` + 2 fetch answers
/// at once (those fetched ahead, the one arriving and the one handed
/// out), each at most `response_bytes_max` of records and one batch, and
/// the buffers of two answers handed out, to read the next into.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerConfig {
    /// Bytes per partition per fetch.
    pub fetch_bytes_max: u32,
    /// Bytes of records per fetch answer, over all its partitions (the
    /// broker cuts this to its own maximum).
    pub response_bytes_max: u32,
    /// How long a fetch at the end of the log waits for records.
    pub wait_ms_max: u32,
    /// Responses fetched ahead of the caller.
    pub prefetch: usize,
    /// Largest record accepted.
    pub record_bytes_max: u32,
    /// How long a fetch waits for its answer beyond `wait_ms_max` (and a
    /// connection to be accepted): a broker silent that long (it hangs,
    /// or is stopped) loses the connection; following leaders, its
    /// partitions are looked up again (Kafka's `request.timeout.ms`).
    pub request_timeout: Duration,
    /// Read committed records only (Kafka's `isolation.level`
    /// read_committed; see the module's docs), else every record.
    pub read_committed: bool,
}

impl ConsumerConfig {
    /// The fetch version its requests are sent, and their answers read, in.
    pub(super) fn fetch_version(&self) -> u16 {
        match self.read_committed {
            true => protocol::FETCH_VERSION_COMMITTED,
            false => protocol::FETCH_VERSION_CONSUMER,
        }
    }
}

impl Default for ConsumerConfig {
    fn default() -> ConsumerConfig {
        ConsumerConfig {
            fetch_bytes_max: 1 << 20,
            response_bytes_max: limits::FETCH_RESPONSE_BYTES_DEFAULT,
            wait_ms_max: 500,
            prefetch: 4,
            record_bytes_max: limits::RECORD_BYTES_MAX_LIMIT,
            request_timeout: Duration::from_millis(limits::CLIENT_REQUEST_TIMEOUT_MS_DEFAULT),
            read_committed: true,
        }
    }
}

/// Finds the broker that leads a partition now (in a cluster, from its
/// registry: the client knows brokers, not the registry).
pub trait Locate: std::fmt::Debug + Send + Sync {
    /// The address of the broker that leads `partition` of `topic` now,
    /// or why none does.
    fn leader(&self, topic: &str, partition: u32) -> Result<String>;
}

/// The side of a consumer that follows leaders (see the module's docs).
#[derive(Debug)]
struct Located {
    locator: Arc<dyn Locate>,
    tx: SyncSender<Fetched>,
    config: ConsumerConfig,
    /// Each running fetcher's broker and inbox.
    fetchers: Vec<(String, Arc<Mutex<Inbox>>)>,
    /// Partitions without a broker now, the code that lost them, and
    /// since when they are lost.
    lost: Vec<(u32, ErrorCode, Instant)>,
    /// Partitions that moved to another broker in this run.
    moved: Vec<u32>,
    /// The last notice said of each partition lost, so as not to repeat it.
    said: Vec<(u32, String)>,
    next_try: Instant,
    backoff: Duration,
}

/// The first wait before looking a lost partition up again; it doubles
/// up to [`RELOCATE_BACKOFF_MAX`] while the partition keeps coming back.
const RELOCATE_BACKOFF: Duration = Duration::from_millis(50);
const RELOCATE_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Whether a fetcher that follows leaders gives a partition back for an
/// answer with `code`.
fn gives_back(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::NotLeader
            | ErrorCode::LeaderNotAvailable
            | ErrorCode::PartitionElsewhere
            | ErrorCode::OffsetOutOfRange
    )
}

/// Reads partitions of one topic from a broker, fetching ahead.
#[derive(Debug)]
pub struct Consumer {
    topic: String,
    addr: String,
    partitions: Vec<ConsumerPartition>,
    responses: Receiver<Fetched>,
    record_bytes_max: u32,
    /// The fetch version of its answers.
    fetch_version: u16,
    /// The records of a compressed batch, decompressed.
    scratch: Decompressed<'static>,
    /// A response not yet handed out whole, and where to resume in it.
    current: Option<Resume>,
    /// What the fetchers have to say (a broker went away, reconnected).
    notices: Arc<Mutex<Vec<String>>>,
    /// Set when the consumer is dropped: its fetchers stop reconnecting.
    closed: Arc<AtomicBool>,
    /// Following leaders, with a locator.
    located: Option<Located>,
    /// Buffers of answers handed out, for the fetchers to reuse.
    spare: Arc<Spare>,
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

impl Consumer {
    /// Starts fetching `partitions` of `topic` from the broker at `addr`.
    pub fn start(
        addr: &str,
        topic: &str,
        partitions: Vec<ConsumerPartition>,
        config: ConsumerConfig,
    ) -> Result<Consumer> {
        let on: Vec<_> = partitions
            .into_iter()
            .map(|p| (addr.to_string(), p))
            .collect();
        Consumer::start_on(&on, topic, config)
    }

    /// Starts fetching partitions of `topic`, each from the broker whose
    /// address it comes with (a cluster): one fetch-ahead thread per
    /// broker, their responses handed out as they come.
    pub fn start_on(
        parts: &[(String, ConsumerPartition)],
        topic: &str,
        config: ConsumerConfig,
    ) -> Result<Consumer> {
        Consumer::start_with(parts, topic, config, None)
    }

    /// Starts fetching partitions of `topic` as [`Consumer::start_on`]
    /// does, and follows their leaders through `locator` when they move
    /// (see the module's docs).
    pub fn start_located(
        parts: &[(String, ConsumerPartition)],
        topic: &str,
        config: ConsumerConfig,
        locator: Arc<dyn Locate>,
    ) -> Result<Consumer> {
        Consumer::start_with(parts, topic, config, Some(locator))
    }

    fn start_with(
        parts: &[(String, ConsumerPartition)],
        topic: &str,
        config: ConsumerConfig,
        locator: Option<Arc<dyn Locate>>,
    ) -> Result<Consumer> {
        let mut brokers: Vec<(String, Vec<ConsumerPartition>)> = Vec::new();
        for (addr, part) in parts {
            match brokers.iter_mut().find(|(a, _)| a == addr) {
                Some((_, held)) => held.push(*part),
                None => brokers.push((addr.clone(), vec![*part])),
            }
        }
        let (tx, rx) = mpsc::sync_channel(config.prefetch.max(1));
        let mut consumer = Consumer {
            topic: topic.to_string(),
            addr: brokers
                .iter()
                .map(|(a, _)| a.as_str())
                .collect::<Vec<_>>()
                .join(","),
            partitions: parts.iter().map(|(_, p)| *p).collect(),
            responses: rx,
            record_bytes_max: config.record_bytes_max,
            fetch_version: config.fetch_version(),
            scratch: Decompressed::default(),
            current: None,
            spare: Arc::default(),
            notices: Arc::new(Mutex::new(Vec::new())),
            closed: Arc::new(AtomicBool::new(false)),
            located: locator.map(|locator| Located {
                locator,
                tx: tx.clone(),
                config,
                fetchers: Vec::new(),
                lost: Vec::new(),
                moved: Vec::new(),
                said: Vec::new(),
                next_try: Instant::now(),
                backoff: RELOCATE_BACKOFF,
            }),
        };
        for (addr, partitions) in brokers {
            let inbox = consumer.spawn_fetcher(&addr, partitions, config, tx.clone())?;
            if let Some(l) = &mut consumer.located {
                l.fetchers.push((addr, inbox));
            }
        }
        Ok(consumer)
    }

    /// Starts a fetcher of `partitions` from the broker at `addr`.
    fn spawn_fetcher(
        &self,
        addr: &str,
        partitions: Vec<ConsumerPartition>,
        config: ConsumerConfig,
        tx: SyncSender<Fetched>,
    ) -> Result<Arc<Mutex<Inbox>>> {
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let fetcher = Fetcher {
            stream: connect_for_fetch(addr, config.request_timeout)?,
            addr: addr.to_string(),
            topic: self.topic.clone(),
            partitions,
            config,
            tx,
            notices: Arc::clone(&self.notices),
            closed: Arc::clone(&self.closed),
            inbox: Arc::clone(&inbox),
            located: self.located.is_some(),
            spare: Arc::clone(&self.spare),
        };
        std::thread::Builder::new()
            .name("fetch".into())
            .spawn(move || fetcher.run())
            .map_err(|reason| Error::Spawn { reason })?;
        Ok(inbox)
    }

    /// What happened since the last call that a user should hear of (a
    /// broker went away; reconnected, resuming at these offsets).
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.notices))
    }

    /// The partitions and their next offsets.
    pub fn partitions(&self) -> &[ConsumerPartition] {
        &self.partitions
    }

    /// Whether every partition reached its `stop_at`.
    pub fn done(&self) -> bool {
        self.partitions
            .iter()
            .all(|p| p.stop_at.is_some_and(|s| p.offset >= s))
    }

    /// The response being handed out (with where to resume in it), else
    /// the next one fetched within `timeout`. A partition a fetcher gave
    /// back is looked up (`None` then).
    fn next_response(&mut self, timeout: Duration) -> Result<Option<Resume>> {
        if let Some(current) = self.current.take() {
            return Ok(Some(current));
        }
        let timeout = match &self.located {
            Some(l) if !l.lost.is_empty() => {
                timeout.min(l.next_try.saturating_duration_since(Instant::now()))
            }
            _ => timeout,
        };
        match self.responses.recv_timeout(timeout) {
            Ok(Fetched::Answer(r)) => Ok(Some(Resume {
                frame: r?,
                part: 0,
                at: 0,
                aborted: None,
            })),
            Ok(Fetched::Lost(partition, code, why)) => {
                self.lose(partition, code, &why)?;
                Ok(None)
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            // Its fetchers stopped for the signal, not for a fault.
            Err(RecvTimeoutError::Disconnected) if crate::stop::stopping() => Err(Error::Stopped {
                addr: self.addr.clone(),
            }),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Protocol {
                addr: self.addr.clone(),
                reason: "the fetcher stopped".into(),
            }),
        }
    }

    /// Notes that a fetcher gave `partition` back (`code` and `why` say
    /// why), to look its leader up after a backoff that grows while
    /// partitions keep coming back. An offset out of range is an error
    /// unless the partition moved in this run (its new leader has not
    /// caught up yet).
    fn lose(&mut self, partition: u32, code: ErrorCode, why: &str) -> Result<()> {
        let Some(l) = &mut self.located else {
            return Ok(());
        };
        let Some(state) = reading(&mut self.partitions, partition) else {
            return Ok(());
        };
        if state.stop_at.is_some_and(|s| state.offset >= s) {
            return Ok(());
        }
        if code == ErrorCode::OffsetOutOfRange && !l.moved.contains(&partition) {
            return Err(Error::Broker {
                code,
                message: why.to_string(),
            });
        }
        let now = Instant::now();
        if l.lost.is_empty() && l.next_try + RELOCATE_BACKOFF_MAX * 5 < now {
            // The last move is long past: this one is looked up at once.
            l.backoff = RELOCATE_BACKOFF;
        }
        l.lost.push((partition, code, now));
        l.next_try = now + l.backoff;
        l.backoff = (l.backoff * 2).min(RELOCATE_BACKOFF_MAX);
        let notice = format!(
            "{} [{partition}]: {why}; looking for its leader, to resume at offset {}",
            self.topic, state.offset
        );
        say_once(&mut l.said, &mut lock(&self.notices), partition, notice);
        Ok(())
    }

    /// Looks the lost partitions up (once their backoff is over) and
    /// fetches each from its leader, from the next offset not handed out.
    /// A read to an end (`-e`) gives up on a partition still without a
    /// leader after [`REQUEST_TIMEOUT`].
    fn relocate(&mut self) -> Result<()> {
        let Some(l) = &mut self.located else {
            return Ok(());
        };
        if l.lost.is_empty() || Instant::now() < l.next_try {
            return Ok(());
        }
        let lost = std::mem::take(&mut l.lost);
        let bounded = self.partitions.iter().any(|p| p.stop_at.is_some());
        let mut still = Vec::new();
        for (partition, code, since) in lost {
            let Some(part) = reading(&mut self.partitions, partition).copied() else {
                continue;
            };
            let locator = Arc::clone(&self.located.as_ref().expect("located").locator);
            let found = locator
                .leader(&self.topic, partition)
                .and_then(|addr| self.fetch_from(&addr, part).map(|()| addr));
            let l = self.located.as_mut().expect("located");
            match found {
                Ok(addr) => {
                    if !l.moved.contains(&partition) {
                        l.moved.push(partition);
                    }
                    l.said.retain(|(p, _)| *p != partition);
                    lock(&self.notices).push(format!(
                        "{} [{partition}]: fetching from {addr}, its leader, from offset {}",
                        self.topic, part.offset
                    ));
                }
                Err(e) if bounded && since.elapsed() >= REQUEST_TIMEOUT => return Err(e),
                Err(e) => {
                    let notice =
                        format!("{} [{partition}]: no leader to fetch from: {e}", self.topic);
                    say_once(&mut l.said, &mut lock(&self.notices), partition, notice);
                    still.push((partition, code, since));
                }
            }
        }
        let l = self.located.as_mut().expect("located");
        if !still.is_empty() {
            l.lost = still;
            l.next_try = Instant::now() + l.backoff;
            l.backoff = (l.backoff * 2).min(RELOCATE_BACKOFF_MAX);
        }
        Ok(())
    }

    /// Fetches `part` from the broker at `addr`: through its running
    /// fetcher, else a new one.
    fn fetch_from(&mut self, addr: &str, part: ConsumerPartition) -> Result<()> {
        let l = self.located.as_mut().expect("located");
        l.fetchers.retain(|(_, inbox)| !lock(inbox).gone);
        if let Some((_, inbox)) = l.fetchers.iter().find(|(a, _)| a == addr) {
            let mut inbox = lock(inbox);
            if !inbox.gone {
                inbox.added.push(part);
                return Ok(());
            }
        }
        let (config, tx) = (l.config, l.tx.clone());
        let inbox = self.spawn_fetcher(addr, vec![part], config, tx)?;
        let l = self.located.as_mut().expect("located");
        l.fetchers.push((addr.to_string(), inbox));
        Ok(())
    }

    /// Hands out records of the fetched responses (waiting up to `timeout`
    /// for one) to `each`, at or after the wanted offsets, every CRC
    /// checked, until `each` returns false or the response is used up.
    /// When `each` stops early, the next call resumes after the last
    /// record handed out. Returns the records handed out.
    pub fn poll(
        &mut self,
        timeout: Duration,
        mut each: impl FnMut(u32, &Record<'_>) -> Result<bool>,
    ) -> Result<u64> {
        self.relocate()?;
        let Some(resume) = self.next_response(timeout)? else {
            return Ok(0);
        };
        let (frame, first_part, first_at) = (resume.frame, resume.part, resume.at);
        let mut resumed = resume.aborted;
        let parts = fetched_parts(&self.addr, &frame, self.fetch_version)?;
        let mut handed = 0;
        let mut stop = None;
        for (index, part) in parts.iter().enumerate().skip(first_part) {
            if part.error != ErrorCode::None {
                self.failed_part(part)?;
                continue;
            }
            let (start, mut aborted) = match index == first_part {
                true => (first_at, resumed.take().unwrap_or_else(|| aborted_of(part))),
                false => (0, aborted_of(part)),
            };
            let stopped = self.hand_out(part, (start, &mut aborted), &mut handed, &mut each)?;
            if let Some(at) = stopped {
                stop = Some((index, at, aborted));
                break;
            }
        }
        drop(parts);
        match stop {
            // The batch resumed at is judged again, to the same answer.
            Some((part, at, aborted)) => {
                self.current = Some(Resume {
                    frame,
                    part,
                    at,
                    aborted: Some(aborted),
                })
            }
            None => self.spare.give(frame),
        }
        Ok(handed)
    }

    /// Hands out the records of one partition's answer from its batch at
    /// byte `start` on (`aborted`: the aborted transactions as they are
    /// there), counting them in `handed`; where `each` stopped, if it did
    /// (that batch's position: resumed there, its records before the
    /// partition's offset skipped).
    fn hand_out(
        &mut self,
        part: &protocol::FetchedPartition<'_>,
        (start, aborted): (usize, &mut AbortedTxns),
        handed: &mut u64,
        each: &mut impl FnMut(u32, &Record<'_>) -> Result<bool>,
    ) -> Result<Option<usize>> {
        let Some(state) = reading(&mut self.partitions, part.partition) else {
            return Ok(None);
        };
        let batches = Batches::resume(Format::Kafka, part.records, start, BATCH_BYTES_MAX);
        for step in batches {
            let (at, batch) = match step {
                Ok(found) => found,
                // The byte budget cut the last batch: fetched again next time.
                Err(stop) if stop.is_truncated() && stop.position > 0 => break,
                Err(stop) => {
                    let (addr, topic) = (&self.addr, &self.topic);
                    return Err(fetched(addr, topic, part.partition, "batch", stop.error));
                }
            };
            // A transaction's marker is no record, and a read_committed
            // consumer passes over the batches of aborted transactions
            // (all of them read in order: markers end them).
            if aborted.passes_over(&batch.header) {
                state.offset = state.offset.max(batch.header.next_offset());
                continue;
            }
            let failed = |e| fetched(&self.addr, &self.topic, part.partition, "record", e);
            let records = batch
                .records_in(&mut self.scratch, self.record_bytes_max)
                .map_err(failed)?;
            for record in records {
                let record = record.map_err(failed)?;
                if record.offset < state.offset || state.stop_at.is_some_and(|s| record.offset >= s)
                {
                    continue;
                }
                state.offset = record.offset + 1;
                *handed += 1;
                if !each(part.partition, &record)? {
                    return Ok(Some(at as usize));
                }
            }
        }
        Ok(None)
    }

    /// A partition of a response that failed: passed over when its fetcher
    /// gave it back (looked up once that is read) or went on at the log's
    /// start, else the broker's error.
    fn failed_part(&mut self, part: &protocol::FetchedPartition<'_>) -> Result<()> {
        if self.skipped_deleted(part) || self.located.is_some() && gives_back(part.error) {
            return Ok(());
        }
        Err(Error::Broker {
            code: part.error,
            message: part.message.clone(),
        })
    }

    /// Whether `part` says the records at its partition's next offset
    /// were deleted (retention): then it goes on at the log's start, and
    /// says which offsets it never read.
    fn skipped_deleted(&mut self, part: &protocol::FetchedPartition<'_>) -> bool {
        let Some(state) = deleted_before_read(&mut self.partitions, part) else {
            return false;
        };
        let notice = format!(
            "{} [{}]: offsets {} to {} were deleted before they were read; going on at offset {}",
            self.topic,
            part.partition,
            state.offset,
            part.start_offset - 1,
            part.start_offset
        );
        lock(&self.notices).push(notice);
        state.offset = part.start_offset;
        true
    }
}

/// The state of `part`'s partition, if the answer says the records at
/// its next offset were deleted (retention): the offset is out of range,
/// below the log's start.
fn deleted_before_read<'p>(
    partitions: &'p mut [ConsumerPartition],
    part: &protocol::FetchedPartition<'_>,
) -> Option<&'p mut ConsumerPartition> {
    if part.error != ErrorCode::OffsetOutOfRange {
        return None;
    }
    reading(partitions, part.partition).filter(|state| state.offset < part.start_offset)
}

/// The state of `partition` among those read, if it is one.
fn reading(partitions: &mut [ConsumerPartition], partition: u32) -> Option<&mut ConsumerPartition> {
    partitions.iter_mut().find(|p| p.partition == partition)
}

/// Adds `notice` of `partition` to `notices` unless it was the last thing
/// said of it (`said`: the last notice of each partition).
pub(crate) fn say_once(
    said: &mut Vec<(u32, String)>,
    notices: &mut Vec<String>,
    partition: u32,
    notice: String,
) {
    match said.iter_mut().find(|(p, _)| *p == partition) {
        Some((_, last)) if *last == notice => return,
        Some((_, last)) => last.clone_from(&notice),
        None => said.push((partition, notice.clone())),
    }
    notices.push(notice);
}

/// A fetch response not handed out whole, and where to resume in it: the
/// partition's index in the response, a batch's byte position, and the
/// aborted transactions as they stood when it stopped there (judging that
/// batch again gives the same answer; `None`: from the partition's
/// answer).
#[derive(Debug)]
struct Resume {
    frame: Vec<u8>,
    part: usize,
    at: usize,
    aborted: Option<AbortedTxns>,
}

/// The aborted transactions of a partition's answer (none unless it is
/// a read_committed one).
fn aborted_of(part: &protocol::FetchedPartition<'_>) -> AbortedTxns {
    let list = part.stable.as_ref().map_or(&[][..], |(_, list)| list);
    AbortedTxns::new(list)
}

/// The partitions of a fetch response of `version`, once its header says
/// it succeeded.
fn fetched_parts<'f>(
    addr: &str,
    frame: &'f [u8],
    version: u16,
) -> Result<Vec<protocol::FetchedPartition<'f>>> {
    let mut r = Reader::new(frame);
    let header = protocol::decode_response_header(&mut r).map_err(|e| protocol_error(addr, e))?;
    Connection::check(&header).map_err(|e| match version {
        protocol::FETCH_VERSION_COMMITTED => older_broker(e, addr),
        _ => e,
    })?;
    protocol::decode_fetch_response(&mut r, version).map_err(|e| protocol_error(addr, e))
}

/// A fetched batch or record of `topic` [`partition`] that does not decode.
fn fetched(
    addr: &str,
    topic: &str,
    partition: u32,
    what: &str,
    e: impl std::fmt::Display,
) -> Error {
    Error::Protocol {
        addr: addr.to_string(),
        reason: format!("{topic} [{partition}]: fetched {what}: {e}"),
    }
}
