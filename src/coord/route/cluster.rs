//! The cluster producer: records batched per partition, each batch sent
//! to its partition's leader, and sent again to the next leader when the
//! old one gives it back.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{leaders, retriable};
use crate::client::acks::{Orphan, Waiting};
use crate::client::consumer::say_once;
use crate::client::producer::Batches;
use crate::client::{ParsedRecord, Producer, ProducerConfig, ProducerSummary};
use crate::coord::Registry;
use crate::error::{Error, Result};
use crate::protocol::ErrorCode;
use crate::storage::producers::BATCHES_REMEMBERED;

/// Sends records to a topic whose partitions several brokers lead: the
/// records are batched per partition here, and each batch goes to its
/// partition's leader through one routed [`Producer`] per broker.
///
/// # Retries
///
/// A batch whose broker answers that it does not lead the partition now
/// (`not_leader`, `leader_not_available`, `partition_elsewhere`), or has
/// too few in-sync replicas for `acks=all` (`not_enough_replicas`), or
/// whose connection breaks or is refused, is not failed: its partition's
/// leader is looked up in the registry again (at once, then backing off
/// from 50 ms to 1 s while there is none) and the batch goes there, until
/// its delivery deadline ([`ProducerConfig::delivery_timeout`]); past it,
/// its records fail with the last reason. Batches of a partition that has
/// no leader now wait here, in order.
///
/// Idempotent ([`ProducerConfig::idempotent`]), the batches carry a
/// producer id (from the registry's blocks) and each partition's sequence
/// numbers: a batch the old leader had appended before it answered (or
/// before the connection broke) is answered by the new leader with the
/// first copy's offsets, not appended again; batches given back go again
/// in their order, and no batch goes while the fifth before it is not
/// answered (the partition remembers a producer's last five). Without, a
/// batch sent again may be appended twice, and may land after a later
/// one of the same partition.
#[derive(Debug)]
pub struct ClusterProducer {
    pub(crate) registry: Arc<dyn Registry>,
    pub(crate) topic: String,
    pub(super) config: ProducerConfig,
    pub(super) batches: Batches,
    /// A routed producer per broker in use, by address.
    pub(super) producers: Vec<(String, Producer)>,
    /// Each partition's leader, `None` while it must be looked up.
    route: Vec<Option<String>>,
    /// Batches waiting for their partition's leader, in order.
    pub(super) parked: VecDeque<Orphan>,
    /// When the registry may be read again for them, and the wait after.
    next_lookup: Instant,
    backoff: Duration,
    /// When the wait last grew: trouble that ended long before starts
    /// the wait over from [`LOOKUP_BACKOFF`].
    backed_off: Option<Instant>,
    /// Batches went out since the last look at the answers.
    unwatched: bool,
    /// Records that failed here (their deadline passed while parked).
    pub(super) failed: u64,
    /// The first error to report.
    error: Option<Error>,
    /// What the producers of brokers that went away delivered.
    retired: ProducerSummary,
    /// The last notice of each partition, and those not yet taken.
    said: Vec<(u32, String)>,
    notices: Vec<String>,
    /// Numbered: the partitions of which a batch failed for good. The
    /// partition would refuse every batch after it (out of order), so
    /// they fail at once rather than at their deadlines; the first such
    /// error is told at the end (the other partitions' batches go on).
    gapped: Vec<bool>,
    gap_error: Option<Error>,
    /// Requests that failed for good at a broker.
    pub(super) failed_requests: u64,
    /// Transactional: the open transaction, and the failures seen when
    /// the last one committed (one more aborts the open one).
    pub(super) txn: Option<Box<super::txn::Txn>>,
    pub(super) failures_committed: u64,
    /// Why the producer stopped (transactional: its open transaction
    /// aborts).
    pub(super) broken: Option<String>,
}

/// The first wait before the registry is read again for a partition with
/// no leader; it doubles up to [`LOOKUP_BACKOFF_MAX`].
const LOOKUP_BACKOFF: Duration = Duration::from_millis(50);
const LOOKUP_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Bytes of batches parked (waiting for a leader, or for room at one) at
/// most: past them, sending waits.
const PARKED_BYTES_MAX: usize = 32 << 20;

impl ClusterProducer {
    /// Finds the leader of every partition of `topic` in `registry`
    /// (creating the topic if nobody has) and connects to those it finds;
    /// a partition without one now is looked up again when its first
    /// batch goes.
    pub fn connect(
        registry: Arc<dyn Registry>,
        topic: &str,
        config: ProducerConfig,
    ) -> Result<ClusterProducer> {
        let config = config.checked();
        let found = leaders(&*registry, topic, true)?;
        let count = found.len() as u32;
        let mut cluster = ClusterProducer {
            registry,
            topic: topic.to_string(),
            config,
            batches: Batches::for_producer(topic, count, &config),
            producers: Vec::new(),
            route: vec![None; count as usize],
            parked: VecDeque::new(),
            next_lookup: Instant::now(),
            backoff: LOOKUP_BACKOFF,
            backed_off: None,
            unwatched: false,
            failed: 0,
            error: None,
            retired: ProducerSummary::default(),
            said: Vec::new(),
            notices: Vec::new(),
            gapped: vec![false; count as usize],
            gap_error: None,
            failed_requests: 0,
            txn: None,
            failures_committed: 0,
            broken: None,
        };
        if config.transactional_id.is_some() {
            let txn = super::txn::Txn::init(Arc::clone(&cluster.registry), config, count)?;
            let (id, epoch) = txn.producer();
            cluster.batches.number_transactional(id, epoch);
            cluster.txn = Some(Box::new(txn));
            if let Some(report) = config.report {
                report.hold();
            }
        } else if config.idempotent {
            let (id, epoch) = super::txn::producer_id(&*cluster.registry, &config)?;
            cluster.batches.number(id, epoch);
        }
        for (p, addr) in found.into_iter().enumerate() {
            let Ok(addr) = addr else { continue };
            match cluster.producer_for(&addr) {
                Ok(_) => cluster.route[p] = Some(addr),
                Err(e) if retriable(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(cluster)
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.batches.partitions()
    }

    /// When the oldest batch not yet sent got its first record.
    pub fn oldest_batch(&self) -> Option<Instant> {
        self.batches.oldest()
    }

    /// When [`ClusterProducer::tick`] is due: while batches wait for a
    /// leader, or answers may give batches back.
    pub fn next_tick(&self) -> Option<Instant> {
        if !self.parked.is_empty() {
            // Room at a leader may come with any answer; a lookup is due
            // only for partitions without a known leader (a lookup due
            // for none would be due at once for ever, and starve the
            // input).
            let soon = Instant::now() + crate::client::connection::TICK;
            let lookup =
                (self.parked.iter()).any(|o| self.route[o.waiting.partition as usize].is_none());
            return Some(if lookup {
                self.next_lookup.min(soon)
            } else {
                soon
            });
        }
        self.unwatched
            .then(|| Instant::now() + crate::client::connection::TICK)
    }

    /// What happened that a user should hear of (a partition's leader
    /// moved), since the last call.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Adds a record to its partition's batch, sending the batch to the
    /// partition's leader when it is full.
    pub fn send(
        &mut self,
        partition: u32,
        record: &ParsedRecord,
        headers: &[(&[u8], &[u8])],
        now: i64,
    ) -> Result<()> {
        self.whole()?;
        match self.send_record(partition, record, headers, now) {
            // This record only, refused before it joined a batch: the
            // caller stops or goes on.
            refused @ Err(Error::TooLarge { .. } | Error::TooMany { .. }) => refused,
            sent => self.noted(sent),
        }
    }

    /// [`ClusterProducer::send`], once the producer is known whole.
    fn send_record(
        &mut self,
        partition: u32,
        record: &ParsedRecord,
        headers: &[(&[u8], &[u8])],
        now: i64,
    ) -> Result<()> {
        let admitted = self.batches.admit(partition, record, headers, now)?;
        if admitted.ship_first {
            self.ship(partition)?;
        }
        if self.batches.push(partition, record, &admitted) {
            self.ship(partition)?;
        }
        Ok(())
    }

    /// Sends every partial batch, and the batches given back to their
    /// leaders, when due.
    pub fn flush_batches(&mut self) -> Result<()> {
        let mut flushed = Ok(());
        for p in 0..self.partitions() {
            flushed = flushed.and_then(|()| self.ship(p));
        }
        for (_, producer) in &mut self.producers {
            flushed = flushed.and_then(|()| producer.flush_batches());
        }
        let flushed = flushed.and_then(|()| self.tick());
        self.noted(flushed)
    }

    /// Takes the batches the brokers gave back, and sends those waiting
    /// for a leader to it once the registry names one (when due).
    pub fn tick(&mut self) -> Result<()> {
        self.collect();
        if !self.producers.iter().any(|(_, p)| p.in_flight()) {
            self.unwatched = false;
        }
        let looked = self
            .retry()
            .and_then(|()| self.error.take().map_or(Ok(()), Err));
        self.noted(looked)
    }

    /// Sends the batch of `partition` to its leader, or parks it while
    /// the partition has no known leader or batches waiting for one.
    fn ship(&mut self, partition: u32) -> Result<()> {
        if self.batches.batch(partition).is_empty() {
            return Ok(());
        }
        // A transaction that broke takes no more batches.
        self.whole()?;
        self.collect();
        self.retry()?;
        let records = u64::from(self.batches.batch(partition).len());
        let opened = self.batches.opened(partition).unwrap_or_else(Instant::now);
        let waits = self.parked.iter().any(|o| o.waiting.partition == partition);
        let ordinal = self.batches.ordinal(partition);
        let open = self.in_window(partition, ordinal, None);
        let leader = match &self.route[partition as usize] {
            Some(addr) if !waits => self.producers.iter_mut().find(|(a, _)| a == addr),
            _ => None,
        };
        // A leader whose window is full (it is slow, or silent) is not
        // waited for here: the batch waits for room, parked, and the
        // other partitions go on.
        let why = match &leader {
            Some((addr, producer)) if !producer.has_room() => Some(no_room(addr)),
            Some(_) if !open => Some(unanswered(partition)),
            Some(_) => None,
            None => Some(no_leader_yet(&self.topic, partition)),
        };
        let place = (partition, ordinal);
        let sources = self.batches.take_sources(partition);
        if let Some(txn) = &mut self.txn {
            txn.join((&self.topic, partition), records, &sources)?;
        }
        let batch = self.batches.finish(partition);
        match (leader, why) {
            (Some((_, producer)), None) => {
                producer.send_encoded(place, (batch, sources), records, opened)?;
                self.unwatched = true;
            }
            (_, why) => {
                let deadline = opened + self.config.delivery_timeout;
                self.parked.push_back(Orphan {
                    waiting: Waiting::unsent(place, records, deadline, batch, sources),
                    why: why.unwrap_or_else(|| no_leader_yet(&self.topic, partition)),
                    sent_before: false,
                });
            }
        }
        self.batches.clear(partition);
        self.fail_gapped();
        self.hold_back()?;
        self.error.take().map_or(Ok(()), Err)
    }

    /// Waits while the parked batches hold more than [`PARKED_BYTES_MAX`]
    /// (Kafka's `buffer.memory` blocking `send`): they find a leader or
    /// room, or their deadline passes, or a stop signal's grace ends.
    fn hold_back(&mut self) -> Result<()> {
        let parked = |c: &ClusterProducer| -> usize {
            c.parked.iter().map(|o| o.waiting.batch().len()).sum()
        };
        while !self.parked.is_empty()
            && parked(self) > PARKED_BYTES_MAX
            && !crate::stop::grace_over()
        {
            std::thread::sleep(Duration::from_millis(10));
            self.collect();
            self.retry()?;
        }
        Ok(())
    }

    /// Parks the batches each broker gave back (their partition's leader
    /// is looked up again), and retires the producers of brokers whose
    /// connection broke, keeping what they delivered.
    pub(super) fn collect(&mut self) {
        let parked = self.parked.len();
        let numbered = self.batches.numbered();
        for (addr, producer) in &mut self.producers {
            for p in producer.take_failed_partitions() {
                self.gapped[p as usize] |= numbered;
                self.failed_requests += 1;
            }
            for orphan in producer.take_orphans() {
                let p = orphan.waiting.partition;
                if self.route[p as usize].as_ref() == Some(addr) {
                    self.route[p as usize] = None;
                }
                let notice = format!(
                    "{} [{p}]: {}: looking for its leader",
                    self.topic, orphan.why
                );
                say_once(&mut self.said, &mut self.notices, p, notice);
                self.parked.push_back(orphan);
            }
        }
        // Given back: their leader is looked up again after a wait.
        if self.parked.len() > parked {
            self.back_off();
        }
        while let Some(i) = self.producers.iter().position(|(_, p)| p.dead()) {
            let (addr, producer) = self.producers.swap_remove(i);
            for route in &mut self.route {
                if route.as_ref() == Some(&addr) {
                    *route = None;
                }
            }
            let (summary, result) = producer.close();
            add(&mut self.retired, &summary);
            if let Err(e) = result {
                self.error.get_or_insert(e);
            }
        }
        self.fail_gapped();
    }

    /// Fails the parked batches of the partitions with a gap (see
    /// `gapped`) at once.
    fn fail_gapped(&mut self) {
        let gapped = |o: &Orphan| self.gapped[o.waiting.partition as usize];
        if !self.parked.iter().any(gapped) {
            return;
        }
        let (doomed, live): (VecDeque<Orphan>, VecDeque<Orphan>) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(gapped);
        self.parked = live;
        for orphan in doomed {
            self.failed += orphan.waiting.records;
            let p = orphan.waiting.partition;
            self.gap_error.get_or_insert(Error::Broker {
                code: ErrorCode::OutOfOrderSequence,
                message: format!(
                    "{} [{p}]: a batch before this one failed, and the partition takes none \
                     that does not follow the last it holds",
                    self.topic
                ),
            });
        }
    }

    /// Fails the parked batches past their deadline, then, when due, looks
    /// the leaders of the partitions of those left up and sends them
    /// there, in order.
    fn retry(&mut self) -> Result<()> {
        self.expire();
        // Those waiting for room at a known leader need no lookup.
        for p in self.parked_partitions() {
            let Some(addr) = self.route[p as usize].clone() else {
                continue;
            };
            let room = self
                .producers
                .iter()
                .any(|(a, producer)| *a == addr && producer.has_room());
            if room {
                self.send_parked(p, addr)?;
            }
        }
        let now = Instant::now();
        let waiting: Vec<u32> = self
            .parked_partitions()
            .into_iter()
            .filter(|&p| self.route[p as usize].is_none())
            .collect();
        if waiting.is_empty() || now < self.next_lookup {
            return Ok(());
        }
        let found = match leaders(&*self.registry, &self.topic, false) {
            Ok(found) => found,
            Err(e) => {
                for &p in &waiting {
                    let notice = format!("{} [{p}]: cannot look up its leader: {e}", self.topic);
                    say_once(&mut self.said, &mut self.notices, p, notice);
                }
                self.back_off();
                return Ok(());
            }
        };
        for p in waiting {
            let addr = match found.get(p as usize) {
                Some(Ok(addr)) => addr.clone(),
                Some(Err(e)) => {
                    let notice = format!("{} [{p}]: {e}", self.topic);
                    say_once(&mut self.said, &mut self.notices, p, notice);
                    self.blame(p, e);
                    continue;
                }
                None => continue,
            };
            self.send_parked(p, addr)?;
        }
        if !self.parked.is_empty() {
            self.back_off();
        }
        Ok(())
    }

    /// Sends the parked batches of `partition` to `addr`, its leader now,
    /// in order (they stay parked if it cannot be reached).
    fn send_parked(&mut self, partition: u32, addr: String) -> Result<()> {
        let i = match self.producer_for(&addr) {
            Ok(i) => i,
            Err(e) if retriable(&e) => {
                let cause =
                    std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s}"));
                let notice = format!(
                    "{} [{partition}]: its leader {addr}: {e}{cause}",
                    self.topic
                );
                say_once(&mut self.said, &mut self.notices, partition, notice);
                self.blame(partition, &e);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if !self.producers[i].1.has_room() {
            // Nothing goes now: the parked batches are not even looked at.
            return Ok(());
        }
        let (mine, rest): (VecDeque<Orphan>, VecDeque<Orphan>) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|o| o.waiting.partition == partition);
        self.parked = rest;
        // Given back by several brokers, they may have been parked out of
        // their order.
        let mut mine = Vec::from(mine);
        mine.sort_by_key(|o| o.waiting.ordinal);
        let mut mine = mine.into_iter().peekable();
        let first = mine.peek().map(|o| o.waiting.ordinal);
        let mut again = 0;
        // In their order, as many as its window takes now (and, numbered,
        // as the partition remembers); the rest wait, in order.
        while self.producers[i].1.has_room() {
            let Some(orphan) =
                mine.next_if(|o| self.in_window(partition, o.waiting.ordinal, first))
            else {
                break;
            };
            again += usize::from(orphan.sent_before);
            self.producers[i]
                .1
                .adopt(orphan.waiting, orphan.sent_before)?;
        }
        for mut orphan in mine {
            if !matches!(orphan.why, Error::TimedOut { .. }) {
                orphan.why = no_room(&addr);
            }
            self.parked.push_back(orphan);
        }
        self.unwatched = true;
        self.sending_to(partition, addr, again);
        Ok(())
    }

    /// Notes `addr` as the leader of `partition`, which the parked batches
    /// went to (`again` of them sent before), and tells of it when it
    /// moved or batches went again.
    fn sending_to(&mut self, partition: u32, addr: String, again: usize) {
        let moved = self.route[partition as usize].as_ref() != Some(&addr);
        let again = match again {
            0 => String::new(),
            n => format!(
                "; {} sent again{}",
                crate::human::count(n as u64, "batch"),
                match self.batches.numbered() {
                    true => " (numbered: stored once)",
                    false => ": their records may appear twice",
                }
            ),
        };
        if moved || !again.is_empty() {
            let notice = format!(
                "{} [{partition}]: sending to {addr}, its leader{again}",
                self.topic
            );
            self.said.retain(|(p, _)| *p != partition);
            self.notices.push(notice);
        }
        self.route[partition as usize] = Some(addr);
    }

    /// Whether the batch of `partition` of `ordinal` may go now: always,
    /// unless numbered; then only while it is one of the
    /// [`BATCHES_REMEMBERED`] from the oldest batch of the partition not
    /// yet answered (in flight at any broker, given back, parked, or
    /// `taken` from the parked to be sent), so that a batch sent again is
    /// always one the partition can tell it holds (Kafka's producer keeps
    /// at most five batches of a partition in flight for the same reason).
    fn in_window(&self, partition: u32, ordinal: u64, taken: Option<u64>) -> bool {
        if !self.batches.numbered() {
            return true;
        }
        let parked = self.parked.iter().map(|o| &o.waiting);
        let parked = parked
            .filter(|w| w.partition == partition)
            .map(|w| w.ordinal);
        let flying = self
            .producers
            .iter()
            .filter_map(|(_, p)| p.oldest_open(partition));
        let oldest = parked.chain(flying).chain(taken).min();
        oldest.is_none_or(|oldest| ordinal < oldest + BATCHES_REMEMBERED as u64)
    }

    /// The partitions of the parked batches, each once.
    fn parked_partitions(&self) -> Vec<u32> {
        let mut waiting: Vec<u32> = self.parked.iter().map(|o| o.waiting.partition).collect();
        waiting.sort_unstable();
        waiting.dedup();
        waiting
    }

    /// The index of the routed producer of the broker at `addr`,
    /// connecting to it first if there is none.
    fn producer_for(&mut self, addr: &str) -> Result<usize> {
        if let Some(i) = self.producers.iter().position(|(a, _)| a == addr) {
            return Ok(i);
        }
        let partitions = self.partitions();
        let producer = Producer::connect_routed(addr, &self.topic, partitions, self.config)?;
        self.producers.push((addr.to_string(), producer));
        Ok(self.producers.len() - 1)
    }

    /// Notes `why` as the reason the parked batches of `partition` wait
    /// (unless a leader refused them for too few in-sync replicas, which
    /// stays their reason).
    fn blame(&mut self, partition: u32, why: &Error) {
        for orphan in self.parked.iter_mut() {
            let keep = matches!(
                orphan.why,
                Error::Broker {
                    code: ErrorCode::NotEnoughReplicas,
                    ..
                }
            );
            if orphan.waiting.partition == partition && !keep {
                orphan.why = Error::Broker {
                    code: ErrorCode::LeaderNotAvailable,
                    message: why.to_string(),
                };
            }
        }
    }

    /// The next lookup waits, longer each time while the trouble lasts (as
    /// Kafka's `retry.backoff.ms`), from the shortest again after a quiet
    /// spell of twice the longest; a wait running is neither put off nor
    /// grown (one refusal's batches come back over several looks).
    fn back_off(&mut self) {
        let now = Instant::now();
        if self.next_lookup > now {
            return;
        }
        let quiet = self
            .backed_off
            .is_none_or(|at| now.saturating_duration_since(at) > 2 * LOOKUP_BACKOFF_MAX);
        if quiet {
            self.backoff = LOOKUP_BACKOFF;
        }
        self.backed_off = Some(now);
        self.next_lookup = now + self.backoff;
        self.backoff = (self.backoff * 2).min(LOOKUP_BACKOFF_MAX);
    }

    /// Fails the parked batches whose deadline passed, with their last
    /// reason.
    fn expire(&mut self) {
        let now = Instant::now();
        if !self.parked.iter().any(|o| o.waiting.deadline <= now) {
            return;
        }
        let (late, live): (VecDeque<Orphan>, VecDeque<Orphan>) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|o| o.waiting.deadline <= now);
        self.parked = live;
        for orphan in late {
            self.failed += orphan.waiting.records;
            self.gapped[orphan.waiting.partition as usize] |= self.batches.numbered();
            let waited_ms = self.config.delivery_timeout.as_millis() as u64;
            let e = undelivered(&self.topic, orphan, waited_ms);
            self.error.get_or_insert(e);
        }
        self.fail_gapped();
    }

    /// Sends every partial batch and waits for every acknowledgement,
    /// sending the batches given back to their leaders within their
    /// deadline (a stop signal's grace ends the wait). The notices it
    /// gathers can be taken before [`ClusterProducer::close`].
    pub fn finish(&mut self) -> Result<()> {
        let mut result = self.flush_batches();
        while result.is_ok() {
            for (_, producer) in &mut self.producers {
                result = result.and(producer.drain());
            }
            self.collect();
            if self.parked.is_empty() || crate::stop::grace_over() {
                break;
            }
            while Instant::now() < self.next_lookup && !crate::stop::grace_over() {
                std::thread::sleep(Duration::from_millis(10));
            }
            result = result.and(self.retry());
        }
        let left: u64 = self.parked.iter().map(|o| o.waiting.records).sum();
        if let Some(first) = self.parked.pop_front() {
            // Stopped by a signal, or an error, before they found a leader.
            self.failed += left;
            self.parked.clear();
            self.error.get_or_insert(undelivered(&self.topic, first, 0));
        }
        let gap = self.gap_error.take().map_or(Ok(()), Err);
        result.and(self.error.take().map_or(Ok(()), Err)).and(gap)
    }

    /// Finishes (see [`ClusterProducer::finish`]) and closes every
    /// broker's producer: the summed counts and the first error. A
    /// transactional producer commits its open transaction (or aborts it,
    /// when anything failed).
    pub fn close(mut self) -> (ProducerSummary, Result<()>) {
        let mut result = match self.txn.is_some() {
            true => self.commit(),
            false => self.finish(),
        };
        let mut total = std::mem::take(&mut self.retired);
        total.failed += self.failed;
        total.idempotent = self.batches.numbered();
        for (_, producer) in self.producers {
            let (s, r) = producer.close();
            add(&mut total, &s);
            result = result.and(r);
        }
        // Transactional: delivered once committed (acknowledged, then
        // aborted: not delivered).
        if let Some(txn) = &self.txn {
            total.failed += total.delivered.saturating_sub(txn.committed_records);
            total.delivered = txn.committed_records;
        }
        (total, result)
    }
}

/// Adds a producer's counts to `total`.
fn add(total: &mut ProducerSummary, summary: &ProducerSummary) {
    total.delivered += summary.delivered;
    total.failed += summary.failed;
    total.resent += summary.resent;
    total.latency.merge(&summary.latency);
}

/// Why a batch parked waits for its leader at `addr`: its window is full
/// (the leader is slow, or silent).
fn no_room(addr: &str) -> Error {
    Error::Broker {
        code: ErrorCode::Timeout,
        message: format!("its leader {addr} has not answered the requests before it"),
    }
}

/// Why a numbered batch parked before it was sent waits: the batches of
/// its partition before it are not all answered yet.
fn unanswered(partition: u32) -> Error {
    Error::Broker {
        code: ErrorCode::Timeout,
        message: format!(
            "{BATCHES_REMEMBERED} batches of partition {partition} before it are not answered yet"
        ),
    }
}

/// Why a batch parked before it was sent waits: its partition has no
/// known leader yet.
fn no_leader_yet(topic: &str, partition: u32) -> Error {
    Error::Broker {
        code: ErrorCode::LeaderNotAvailable,
        message: format!("partition {partition} of {topic:?} has no known leader yet"),
    }
}

/// The error of a batch that found no leader to take it (within
/// `waited_ms`, when it is its deadline that passed): `not_enough_replicas`
/// as the leader said it; anything else says what it waited for.
fn undelivered(topic: &str, orphan: Orphan, waited_ms: u64) -> Error {
    let p = orphan.waiting.partition;
    match orphan.why {
        e @ Error::Broker {
            code: ErrorCode::NotEnoughReplicas,
            ..
        } => e,
        why => {
            let (code, last) = match why {
                Error::Broker { code, message } => (code, message),
                other => (ErrorCode::LeaderNotAvailable, other.to_string()),
            };
            let within = match waited_ms {
                0 => String::new(),
                ms => format!(" within the delivery timeout of {ms} ms"),
            };
            Error::Broker {
                code,
                message: format!("{topic} [{p}]: no leader took its records{within}; last: {last}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::producer::silent_broker;
    use crate::coord::mem::MemRegistry;
    use crate::coord::route::tests::broker;
    use crate::coord::Placement;

    /// A producer of topic "t" (one partition, placed on a broker nobody
    /// listens for: it connects to nobody).
    fn unconnected(config: ProducerConfig) -> ClusterProducer {
        let reg = MemRegistry::default();
        // Nothing listens on port 9: the producer connects to nobody.
        std::mem::forget(reg.register_broker(&broker("b1", 9)).unwrap());
        let placement = Placement::new("t", vec![vec!["b1".to_string()]]);
        assert!(reg.create_placement(&placement).unwrap());
        ClusterProducer::connect(Arc::new(reg), "t", config).unwrap()
    }

    /// Review of d0e7608: the batches one refusal gives back come in over
    /// several looks at the answers (each answer is read as it arrives,
    /// up to `in_flight_max` = 256 requests on the wire), and each look
    /// doubled the wait and put the lookup off again from then: five looks
    /// of one leader move waited 800 ms after the last of them for the
    /// first lookup, where Kafka waits `retry.backoff.ms` once per attempt.
    /// The wait grows per lookup that found no leader taking the batches,
    /// not per answer; a wait running is neither put off nor grown.
    #[test]
    fn the_batches_one_refusal_gives_back_share_one_wait() {
        let mut c = unconnected(ProducerConfig::default());
        let first = Instant::now();
        // One refusal's answers, seen by five looks.
        for _ in 0..5 {
            c.back_off();
        }
        let waits = c.next_lookup.saturating_duration_since(first);
        assert!(
            waits <= LOOKUP_BACKOFF + Duration::from_millis(20),
            "the first lookup waits {waits:?}"
        );
        // The lookup ran and found nobody better: the next wait is longer.
        c.next_lookup = Instant::now();
        let looked = Instant::now();
        c.back_off();
        let waits = c.next_lookup.saturating_duration_since(looked);
        assert!(waits >= 2 * LOOKUP_BACKOFF, "the second waits {waits:?}");
    }

    /// An unconnected producer (see [`unconnected`]) of two partitions,
    /// numbered.
    fn two_numbered_partitions() -> ClusterProducer {
        let config = ProducerConfig::default();
        let mut c = unconnected(config);
        c.batches = Batches::new("t", 2, config.batch, config.record_bytes_max);
        c.batches.number(9, 0);
        c.gapped = vec![false; 2];
        c.route = vec![None; 2];
        c
    }

    /// Parks a batch of `records` for `(partition, ordinal)`, sent before,
    /// due by `deadline`.
    fn park(c: &mut ClusterProducer, place: (u32, u64), records: u64, deadline: Instant) {
        let waiting = Waiting::unsent(place, records, deadline, b"batch", Vec::new());
        c.parked.push_back(Orphan {
            why: no_leader_yet("t", place.0),
            waiting,
            sent_before: true,
        });
    }

    /// Numbered, the window holds across brokers: with the partition's
    /// first batch unanswered at its old leader, the new leader gets the
    /// four after it at once, though its connection would take a fifth,
    /// and the fifth waits, parked, until the first is answered.
    #[test]
    fn a_numbered_batch_waits_for_the_fifth_before_it_at_another_broker() {
        let ((old, old_end), (new, new_end)) = (silent_broker(), silent_broker());
        let reg = MemRegistry::default();
        for (id, addr) in [("a", &old), ("b", &new)] {
            let port = addr.rsplit_once(':').unwrap().1.parse().unwrap();
            std::mem::forget(reg.register_broker(&broker(id, port)).unwrap());
        }
        let placement = Placement::new("t", vec![vec!["a".to_string(), "b".to_string()]]);
        assert!(reg.create_placement(&placement).unwrap());
        let mut config = ProducerConfig::default();
        config.batch.records_max = 1;
        let mut c = ClusterProducer::connect(Arc::new(reg), "t", config).unwrap();
        // Numbered (a broker would give the id; these answer nothing).
        c.batches.number(9, 0);
        let record = ParsedRecord {
            value: b"v".to_vec(),
            null_value: false,
            ..ParsedRecord::default()
        };
        c.send(0, &record, &[], 0).unwrap();
        // The leader moved (as a lookup would find it).
        c.route[0] = Some(new.clone());
        c.producer_for(&new).unwrap();
        for _ in 0..5 {
            c.send(0, &record, &[], 0).unwrap();
        }
        let at = |c: &ClusterProducer, addr: &str| {
            let (_, producer) = c.producers.iter().find(|(a, _)| a == addr).unwrap();
            producer.oldest_open(0)
        };
        assert_eq!(at(&c, &old), Some(0));
        assert_eq!(at(&c, &new), Some(1), "the four after the first went");
        let (_, producer) = c.producers.iter().find(|(a, _)| *a == new).unwrap();
        assert!(producer.has_room(), "its connection would take one more");
        let parked: Vec<u64> = c.parked.iter().map(|o| o.waiting.ordinal).collect();
        assert_eq!(parked, [5], "the fifth after the first waits");
        c.tick().unwrap();
        assert_eq!(c.parked.len(), 1, "and keeps waiting");
        for connection in [old_end, new_end] {
            let stream = connection.recv().unwrap();
            stream.shutdown(std::net::Shutdown::Both).unwrap();
        }
        drop(c);
    }

    /// Numbered, a batch goes only while it is one of the five from the
    /// oldest of its partition not yet answered: a sixth waits, however
    /// many the window of the connection would take.
    #[test]
    fn numbered_batches_go_no_further_than_five_past_the_oldest_unanswered() {
        let mut c = unconnected(ProducerConfig::default());
        c.batches.number(9, 0);
        let deadline = Instant::now() + Duration::from_secs(60);
        park(&mut c, (0, 3), 1, deadline);
        assert!(c.in_window(0, 7, None), "the fifth from the oldest");
        assert!(!c.in_window(0, 8, None), "the sixth");
        assert!(c.in_window(1, 8, None), "another partition's");
        assert!(!c.in_window(0, 7, Some(2)), "one taken to be sent is older");
        park(&mut c, (0, 1), 1, deadline);
        assert!(!c.in_window(0, 6, None), "the oldest is older now");
        c.parked.clear();
        assert!(c.in_window(0, 1_000, None), "nothing unanswered");
        let plain = unconnected(ProducerConfig::default());
        assert!(!plain.batches.numbered());
        assert!(plain.in_window(0, 1_000, Some(0)), "not numbered: any");
    }

    /// Numbered, once a batch of a partition failed for good (here its
    /// deadline passed, parked), the partition's later batches fail at
    /// once: they could only be refused as out of order until their own
    /// deadlines. Another partition's batch waits on.
    #[test]
    fn after_a_numbered_batch_fails_its_partitions_later_batches_fail_at_once() {
        let mut c = two_numbered_partitions();
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        for (place, deadline) in [((0, 0), now), ((0, 1), later), ((1, 0), later)] {
            park(&mut c, place, 10, deadline);
        }
        assert!(c.tick().is_err());
        assert_eq!(c.failed, 20, "both of partition 0");
        let left: Vec<(u32, u64)> = (c.parked.iter())
            .map(|o| (o.waiting.partition, o.waiting.ordinal))
            .collect();
        assert_eq!(left, [(1, 0)]);
        // A batch of partition 0 built after the gap fails at once too.
        let record = ParsedRecord {
            value: b"v".to_vec(),
            null_value: false,
            ..ParsedRecord::default()
        };
        c.send(0, &record, &[], 0).unwrap();
        c.flush_batches().unwrap();
        assert_eq!(c.failed, 21);
        assert!(c.gap_error.is_some(), "told at the end");
    }

    /// A gap in one partition leaves the other partitions' batches to go
    /// on at the end: partition 1's parked batch is tried until its
    /// deadline, not failed with partition 0's.
    #[test]
    fn a_gap_in_one_partition_leaves_anothers_batches_to_go_on() {
        let mut c = two_numbered_partitions();
        c.gapped[0] = true;
        let soon = Instant::now() + Duration::from_millis(500);
        park(&mut c, (1, 0), 10, soon);
        let record = ParsedRecord {
            value: b"v".to_vec(),
            null_value: false,
            ..ParsedRecord::default()
        };
        c.send(0, &record, &[], 0).unwrap();
        let started = Instant::now();
        assert!(c.finish().is_err());
        assert!(started.elapsed() >= Duration::from_millis(400), "tried");
        assert_eq!(c.failed, 11);
    }

    /// Idempotent, the producer id is asked of the registry's brokers
    /// again and again while none answers (a cluster that restarts), up
    /// to the delivery timeout, as batches wait for a leader.
    #[test]
    fn the_producer_id_is_asked_again_while_no_broker_answers() {
        let config = ProducerConfig {
            idempotent: true,
            delivery_timeout: Duration::from_millis(400),
            ..ProducerConfig::default()
        };
        let started = Instant::now();
        let reg = MemRegistry::default();
        std::mem::forget(reg.register_broker(&broker("b1", 9)).unwrap());
        let placement = Placement::new("t", vec![vec!["b1".to_string()]]);
        assert!(reg.create_placement(&placement).unwrap());
        let refused = ClusterProducer::connect(Arc::new(reg), "t", config);
        assert!(matches!(refused, Err(Error::Network { .. })), "{refused:?}");
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "asked again"
        );
    }
}
