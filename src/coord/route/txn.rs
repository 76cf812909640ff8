//! A cluster producer's transactions (`klog-produce --transactional-id`):
//! its batches go in transactions, each committed with the source offsets
//! of its records, so that a mirror stores each source record once.
//!
//! # A transaction
//!
//! - **Init**, once, at connect: the transactional id's producer id and a
//!   new epoch. Every older instance of the id is fenced from then on,
//!   and its open transaction aborted (or its prepared one finished) by
//!   the coordinator first.
//! - **Join**: before a partition's first batch of a transaction goes,
//!   the partition joins it (add_to_txn). The sources of the batch's
//!   records (a `-J` envelope's topic, partition and offset) are noted:
//!   each source partition's next offset.
//! - **Commit**, every `--transaction-interval` and at the end: every
//!   batch sent is acknowledged first (on every in-sync replica), then
//!   the noted source offsets are committed with the transaction to the
//!   destination's group named as the transactional id
//!   (txn_offset_commit), then the transaction commits (end_txn). Only
//!   then does the report of acknowledged records get its lines.
//! - **Abort**: a batch that fails, or a step refused, aborts the
//!   transaction; its records count as failed, and the producer stops.
//!
//! # Resuming
//!
//! A record whose source offset is below the offset the destination's
//! group holds for its source partition was stored by a committed
//! transaction of an earlier instance: it is not sent again (its report
//! line says `stored_before`). A mirror's consumer that commits only
//! acknowledged records (`--commit-from`) resumes at or below that offset,
//! never above: records from an aborted transaction are sent again, and
//! those of a committed one are not.
//!
//! One instance per transactional id: two mirrors of one source
//! partition, each with its own id, would both store it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::{Connection, ProducerConfig, Source, Sources};
use crate::coord::{transactions, Registry};
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::{TxnProducer, TxnRequest};

/// The first wait before a coordinator is asked again; it doubles up to
/// [`BACKOFF_MAX`].
const BACKOFF: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Source partitions whose resume offset is remembered, at most (a
/// mirror of more starts over, asking the registry again).
const RESUME_MAX: usize = 100_000;

/// A transactional producer's state.
#[derive(Debug)]
pub(super) struct Txn {
    registry: Arc<dyn Registry>,
    /// The destination's committed offsets (its offsets topic).
    offsets: Arc<dyn Registry>,
    producer: TxnProducer,
    config: ProducerConfig,
    /// The partitions of the topic in the open transaction.
    joined: Vec<bool>,
    /// Each source partition's next offset, of the records in the open
    /// transaction.
    sources: BTreeMap<(Arc<str>, u32), u64>,
    /// Records in the open transaction.
    pub(super) records: u64,
    /// When the open transaction sent its first batch.
    pub(super) began: Option<Instant>,
    /// A connection to a coordinator (any live broker), and where in the
    /// registry's list of brokers the next one is looked for (past one
    /// that failed: a broker that hangs is not asked again and again).
    coordinator: Option<Connection>,
    next_broker: usize,
    /// Each source partition's offset below which its records are
    /// stored already (committed by a transaction).
    resume: HashMap<(Arc<str>, u32), u64>,
    /// Each source partition's offset below which its records were
    /// handed to this producer (a consumer that prints records again,
    /// after a rebalance, hands them twice).
    handed: HashMap<(Arc<str>, u32), u64>,
    /// Records of the transactions committed.
    pub(super) committed_records: u64,
}

/// What a record's source says of it (see [`Txn::seen`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    /// Not stored yet: it goes.
    New,
    /// Stored by a committed transaction.
    Committed,
    /// Handed before in this run, in a transaction not committed yet.
    Pending,
}

/// Whether a coordinator's refusal goes away if asked again.
fn passing(e: &Error) -> bool {
    match e {
        Error::Broker { code, .. } => matches!(
            code,
            ErrorCode::ConcurrentTransactions
                | ErrorCode::CoordinatorNotAvailable
                | ErrorCode::ShuttingDown
                | ErrorCode::Timeout
        ),
        other => super::retriable(other),
    }
}

impl Txn {
    /// Inits `config`'s transactional id through a live broker of
    /// `registry`, for `partitions` partitions.
    pub(super) fn init(
        registry: Arc<dyn Registry>,
        config: ProducerConfig,
        partitions: u32,
    ) -> Result<Txn> {
        let id = config.transactional_id.unwrap_or_default();
        let offsets = crate::coord::offsets_topic::TopicRegistry::wrap(Arc::clone(&registry));
        let mut txn = Txn {
            registry,
            offsets,
            producer: TxnProducer {
                transactional_id: id.to_string(),
                producer_id: -1,
                epoch: -1,
            },
            config,
            joined: vec![false; partitions as usize],
            sources: BTreeMap::new(),
            records: 0,
            began: None,
            coordinator: None,
            // Instances spread over the brokers.
            next_broker: std::process::id() as usize,
            resume: HashMap::new(),
            handed: HashMap::new(),
            committed_records: 0,
        };
        let init = TxnRequest::Init {
            transactional_id: id.to_string(),
            timeout_ms: config.transaction_timeout_ms,
        };
        let (producer_id, epoch) = txn.call(&init)?.ok_or_else(|| Error::Broker {
            code: ErrorCode::InvalidRequest,
            message: "init_producer_id answered no producer id".into(),
        })?;
        txn.producer.producer_id = producer_id;
        txn.producer.epoch = epoch;
        Ok(txn)
    }

    /// The producer id and epoch its batches carry.
    pub(super) fn producer(&self) -> (i64, i16) {
        (self.producer.producer_id, self.producer.epoch)
    }

    /// Asks a coordinator, again and again while its refusal passes (see
    /// [`passing`]) or no broker answers, backing off from 50 ms to 1 s,
    /// until the delivery timeout or a stop signal's grace ends.
    fn call(&mut self, request: &TxnRequest) -> Result<Option<(i64, i16)>> {
        let deadline = Instant::now() + self.config.delivery_timeout;
        let mut backoff = BACKOFF;
        loop {
            let answer = match self.connection() {
                Ok(c) => c.txn(request),
                Err(e) => Err(e),
            };
            let e = match answer {
                Ok(answer) => return Ok(answer),
                Err(e) if passing(&e) => e,
                Err(e) => return Err(e),
            };
            // A broker that failed is left for the next one.
            self.coordinator = None;
            self.next_broker += 1;
            pause(&mut backoff, deadline, e)?;
        }
    }

    /// The coordinator's connection: to the first live broker that takes
    /// one (the brokers are tried in turn from a changing start).
    fn connection(&mut self) -> Result<&mut Connection> {
        if self.coordinator.is_none() {
            let brokers = self.registry.brokers()?;
            let start = self.next_broker;
            let mut last = Error::NoBroker {
                registry: self.registry.location(),
            };
            for i in 0..brokers.len() {
                let broker = &brokers[(start + i) % brokers.len()];
                match Connection::connect_timeout(&broker.addr(), self.config.request_timeout) {
                    Ok(c) => {
                        self.coordinator = Some(c);
                        self.next_broker = start + i;
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            if self.coordinator.is_none() {
                return Err(last);
            }
        }
        Ok(self.coordinator.as_mut().expect("connected"))
    }

    /// `topic [partition]`'s batch of `records` from `sources` is about to
    /// go: the partition joins the open transaction (which begins) unless
    /// it has already, and the sources are noted.
    pub(super) fn join(
        &mut self,
        (topic, partition): (&str, u32),
        records: u64,
        sources: &Sources,
    ) -> Result<()> {
        let p = partition as usize;
        if !self.joined.get(p).copied().unwrap_or(true) {
            let add = TxnRequest::Add {
                producer: self.producer.clone(),
                partitions: vec![(topic.to_string(), partition)],
            };
            self.call(&add)?;
            self.joined[p] = true;
        }
        self.began.get_or_insert_with(Instant::now);
        self.records += records;
        for s in sources.iter().flatten() {
            let next = self
                .sources
                .entry((Arc::clone(&s.topic), s.partition))
                .or_default();
            *next = (*next).max(s.offset + 1);
        }
        Ok(())
    }

    /// Commits the open transaction, every batch of it acknowledged: its
    /// source offsets, then the transaction. Nothing to do when none is
    /// open.
    pub(super) fn commit(&mut self) -> Result<()> {
        if self.began.is_none() {
            return Ok(());
        }
        if !self.sources.is_empty() {
            let offsets: Vec<(String, u32, u64)> = (self.sources.iter())
                .map(|((topic, p), next)| (topic.to_string(), *p, *next))
                .collect();
            for chunk in offsets.chunks(crate::protocol::TXN_PARTITIONS_MAX) {
                let commit = TxnRequest::OffsetCommit {
                    producer: self.producer.clone(),
                    group: self.producer.transactional_id.clone(),
                    offsets: chunk.to_vec(),
                };
                self.call(&commit)?;
            }
        }
        let end = TxnRequest::End {
            producer: self.producer.clone(),
            commit: true,
        };
        self.call(&end)?;
        for ((topic, p), next) in std::mem::take(&mut self.sources) {
            let at = self.resume.entry((topic, p)).or_default();
            *at = (*at).max(next);
        }
        self.committed_records += self.records;
        self.reset();
        Ok(())
    }

    /// Aborts the open transaction (as far as a coordinator answers: one
    /// that does not aborts it at its timeout, or the next instance's
    /// init does).
    pub(super) fn abort(&mut self) {
        if self.began.is_some() {
            let end = TxnRequest::End {
                producer: self.producer.clone(),
                commit: false,
            };
            let _ = self.call(&end);
        }
        self.sources.clear();
        self.reset();
    }

    fn reset(&mut self) {
        self.joined.iter_mut().for_each(|j| *j = false);
        self.records = 0;
        self.began = None;
    }

    /// What is known of the record from `source`: stored already, when
    /// its offset is below the one the destination's group holds for its
    /// partition (committed by a transaction of this id; asked of the
    /// registry the first time a source partition is seen, with the
    /// offsets of committed transactions not yet written to the group);
    /// pending, when below the offset handed last from its partition in
    /// this run; else new, and handed from now on.
    pub(super) fn seen(&mut self, source: &Source) -> Result<Seen> {
        let key = (Arc::clone(&source.topic), source.partition);
        let at = self.resume_at(&key)?;
        let handed = self.handed.entry(key).or_default();
        Ok(if source.offset < at {
            Seen::Committed
        } else if source.offset < *handed {
            Seen::Pending
        } else {
            *handed = source.offset + 1;
            Seen::New
        })
    }

    /// The offset below which `key`'s records are stored.
    fn resume_at(&mut self, key: &(Arc<str>, u32)) -> Result<u64> {
        if let Some(&at) = self.resume.get(key) {
            return Ok(at);
        }
        if self.resume.len() >= RESUME_MAX || self.handed.len() >= RESUME_MAX {
            // What an open transaction holds is kept: a record of it
            // handed again must not go twice.
            let resume = std::mem::take(&mut self.resume);
            (self.handed).retain(|k, handed| *handed > resume.get(k).copied().unwrap_or(0));
        }
        // The offsets registry reads the entries through the registry it
        // wraps, and the group's offsets from the offsets topic.
        let group = &self.producer.transactional_id;
        let committed = transactions::committed_offset(&*self.offsets, group, &key.0, key.1)?;
        let at = committed.unwrap_or(0);
        self.resume.insert(key.clone(), at);
        Ok(at)
    }

    /// When the open transaction is due to commit, `interval` after it
    /// began.
    pub(super) fn due(&self, interval: Duration) -> Option<Instant> {
        self.began.map(|b| b + interval)
    }
}

impl super::ClusterProducer {
    /// `result`, noted: transactional, an error breaks the open
    /// transaction (a record of it may be lost), which then aborts
    /// rather than commits.
    pub(super) fn noted<T>(&mut self, result: Result<T>) -> Result<T> {
        if let (Err(e), Some(_)) = (&result, &self.txn) {
            self.broken
                .get_or_insert_with(|| format!("the transaction broke: {e}"));
        }
        result
    }

    /// Commits the open transaction (see the module): every batch sent is
    /// acknowledged first; a record that failed, or a step refused,
    /// aborts it instead, and the producer sends nothing more. Then the
    /// report gets the transaction's lines. Nothing to do when not
    /// transactional, or when no transaction is open.
    pub fn commit(&mut self) -> Result<()> {
        if let Some(why) = self.broken.clone() {
            if self.txn.as_ref().is_some_and(|t| t.began.is_some()) {
                self.abort_open();
            }
            return Err(Error::Broker {
                code: ErrorCode::InvalidTxnState,
                message: format!("{}: {why}", self.topic),
            });
        }
        if self
            .txn
            .as_ref()
            .is_none_or(|t| t.began.is_none() && !self.flush_pending())
        {
            return self.finish();
        }
        let mut done = self.finish();
        if done.is_ok() && self.failures() > self.failures_committed {
            done = Err(Error::Broker {
                code: ErrorCode::InvalidTxnState,
                message: format!("{}: a batch of the transaction failed", self.topic),
            });
        }
        let txn = self.txn.as_mut().expect("transactional");
        let done = done.and_then(|()| txn.commit());
        match done {
            Ok(()) => {
                self.failures_committed = self.failures();
                if let Some(report) = self.config.report {
                    report.release();
                }
                Ok(())
            }
            Err(e) => {
                self.abort_open();
                self.broken = Some(format!("a transaction was aborted: {e}"));
                Err(e)
            }
        }
    }

    /// Aborts the open transaction once every batch sent is answered (an
    /// abort marker written before a batch of it lands would leave that
    /// batch's transaction open in its partition); the batches not sent
    /// never go, and the report's lines held are dropped.
    fn abort_open(&mut self) {
        for (_, producer) in &mut self.producers {
            let _ = producer.drain();
        }
        self.collect();
        self.parked.clear();
        if let Some(txn) = &mut self.txn {
            txn.abort();
        }
        if let Some(report) = self.config.report {
            report.discard();
        }
    }

    /// Why it takes nothing more, if its transaction broke.
    pub(super) fn whole(&self) -> Result<()> {
        match &self.broken {
            Some(why) => Err(Error::Broker {
                code: ErrorCode::InvalidTxnState,
                message: why.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Whether its batches go in transactions.
    pub fn transactional(&self) -> bool {
        self.txn.is_some()
    }

    /// Whether partial batches wait to go (they join the transaction
    /// when they do).
    fn flush_pending(&self) -> bool {
        self.batches.oldest().is_some()
    }

    /// Failures so far: records failed here, and requests failed at a
    /// broker.
    fn failures(&self) -> u64 {
        self.failed + self.failed_requests
    }

    /// When the open transaction is due to commit: `interval` after its
    /// first batch went, or now when the report's held lines pass
    /// 16 MiB.
    pub fn transaction_due(&self, interval: Duration) -> Option<Instant> {
        let due = self.txn.as_ref()?.due(interval)?;
        let held = self.config.report.map_or(0, |r| r.held_bytes());
        Some(match held > HELD_BYTES_MAX {
            true => Instant::now(),
            false => due,
        })
    }

    /// Whether the record from `source` is stored already by a committed
    /// transaction of this transactional id (see the module): when so,
    /// the report gets its `stored_before` line, and it is not sent.
    pub fn stored_before(&mut self, source: &Source) -> Result<bool> {
        let Some(txn) = &mut self.txn else {
            return Ok(false);
        };
        let seen = txn.seen(source)?;
        if let Some(report) = self.config.report.filter(|_| seen == Seen::Committed) {
            report.stored_before(source);
        }
        // A record handed twice is not reported twice: the first one's
        // line comes when its transaction commits.
        Ok(seen != Seen::New)
    }
}

/// Bytes of report lines a transaction holds before it commits early.
const HELD_BYTES_MAX: usize = 16 << 20;

/// An idempotent producer's id, from a live broker of `registry`, as
/// Kafka's producers ask a broker: it checks that the principal may
/// write, and hands ids out of the registry's blocks, so that the client
/// needs no write access to the registry nor uses a block up. Each broker
/// is asked in turn (within the request timeout), again and again
/// (backing off from 50 ms to 1 s) while none answers (a cluster that
/// restarts), until the delivery timeout or a stop signal.
pub(super) fn producer_id(registry: &dyn Registry, config: &ProducerConfig) -> Result<(i64, i16)> {
    let deadline = Instant::now() + config.delivery_timeout;
    let mut backoff = BACKOFF;
    loop {
        let mut last = None;
        for broker in registry.brokers()? {
            let asked =
                crate::client::Connection::connect_timeout(&broker.addr(), config.request_timeout)
                    .and_then(|mut c| c.init_producer_id());
            match asked {
                Ok(id) => return Ok(id),
                Err(e) if super::retriable(&e) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        let e = last.unwrap_or_else(|| Error::NoBroker {
            registry: registry.location(),
        });
        pause(&mut backoff, deadline, e)?;
    }
}

/// Waits `backoff` before asking again, and doubles it up to
/// [`BACKOFF_MAX`]; `e` when the wait would pass `deadline`, or a stop
/// signal's grace ends.
fn pause(backoff: &mut Duration, deadline: Instant, e: Error) -> Result<()> {
    let wake = Instant::now() + *backoff;
    if wake >= deadline {
        return Err(e);
    }
    while Instant::now() < wake {
        if crate::stop::grace_over() {
            return Err(e);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    *backoff = (*backoff * 2).min(BACKOFF_MAX);
    Ok(())
}
