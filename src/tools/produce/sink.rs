//! Where `klog-produce` sends records: a local data directory, one
//! broker, or each partition's leader through a registry.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{EmbeddedProducer, Options};
use crate::client::{AckReport, Connection, ParsedRecord, Producer, ProducerConfig};
use crate::coord::ClusterProducer;
use crate::storage::store::Store;
use crate::tools::Say;

/// Where records go: a local data directory or a broker.
pub(super) enum Sink {
    Embedded(EmbeddedProducer),
    Remote(Producer),
    /// Each partition's leader, through the registry.
    Cluster(Box<ClusterProducer>),
}

/// The sink `options` asks for: a data directory, a registry's brokers, or
/// one broker.
/// Acknowledged records are written to `report`, if any.
pub(super) fn open_sink(
    options: &Options,
    report: Option<&'static AckReport>,
) -> anyhow::Result<Sink> {
    let topic = &options.topic;
    if let Some(dir) = &options.data_dir {
        let producer = EmbeddedProducer::new(
            Store::new(dir),
            topic,
            options.partitions,
            options.log.clone(),
            options.batch,
        )
        .with_context(|| format!("cannot produce to topic {topic:?} in {}", dir.display()))?;
        return Ok(Sink::Embedded(producer));
    }
    let delivery_timeout = Duration::from_millis(options.message_timeout_ms);
    let request_timeout_ms = options.request_timeout_ms.min(options.message_timeout_ms);
    let remote = ProducerConfig {
        acks: options.acks,
        // The broker waits for durability no longer than the request (as
        // Kafka's producer sends its request.timeout.ms), nor the record.
        timeout_ms: u32::try_from(request_timeout_ms).unwrap_or(u32::MAX),
        batch: options.batch,
        record_bytes_max: options.log.record_bytes_max,
        delivery_timeout,
        request_timeout: Duration::from_millis(request_timeout_ms),
        report,
        idempotent: options.idempotent,
        transactional_id: (options.transaction.as_ref())
            .map(|t| &*Box::leak(t.id.clone().into_boxed_str())),
        transaction_timeout_ms: (options.transaction.as_ref()).map_or(60_000, |t| t.timeout_ms),
        ..ProducerConfig::default()
    };
    if let Some(dir) = &options.registry {
        let registry = crate::coord::open(dir, crate::coord::SESSION_TIMEOUT)
            .with_context(|| format!("cannot open the registry {}", dir.display()))?;
        let cluster = ClusterProducer::connect(registry, topic, remote).with_context(|| {
            format!(
                "cannot produce to topic {topic:?} through {}",
                dir.display()
            )
        })?;
        return Ok(Sink::Cluster(Box::new(cluster)));
    }
    let producer = Producer::connect(&options.broker, topic, remote)
        .with_context(|| format!("cannot produce to topic {topic:?} on {}", options.broker))?;
    Ok(Sink::Remote(producer))
}

impl Sink {
    pub(super) fn partitions(&self) -> u32 {
        match self {
            Sink::Embedded(p) => p.partitions(),
            Sink::Remote(p) => p.partitions(),
            Sink::Cluster(p) => p.partitions(),
        }
    }

    pub(super) fn send(
        &mut self,
        partition: u32,
        record: &ParsedRecord,
        headers: &[(&[u8], &[u8])],
        now: i64,
    ) -> crate::Result<()> {
        match self {
            Sink::Embedded(p) => p.send(partition, record, headers, now),
            Sink::Remote(p) => p.send(partition, record, headers, now),
            Sink::Cluster(p) => p.send(partition, record, headers, now),
        }
    }

    pub(super) fn flush_batches(&mut self, now: i64) -> crate::Result<()> {
        match self {
            Sink::Embedded(p) => p.flush_batches(now),
            Sink::Remote(p) => p.flush_batches(),
            Sink::Cluster(p) => p.flush_batches(),
        }
    }

    /// When the oldest partial batch got its first record.
    fn oldest_batch(&self) -> Option<Instant> {
        match self {
            Sink::Embedded(p) => p.oldest_batch(),
            Sink::Remote(p) => p.oldest_batch(),
            Sink::Cluster(p) => p.oldest_batch(),
        }
    }

    /// When something is due: the partial batches `linger` after the
    /// oldest of them got its first record; through a registry, also a
    /// look at batches given back (a partition's leader moved), and the
    /// open transaction's commit, `interval` after it began.
    pub(super) fn due(&self, (linger, interval): (Duration, Duration)) -> Option<Instant> {
        let batches = self.oldest_batch().map(|opened| opened + linger);
        match self {
            Sink::Cluster(p) => (batches.into_iter())
                .chain(p.next_tick())
                .chain(p.transaction_due(interval))
                .min(),
            _ => batches,
        }
    }

    /// Does what is due (see [`Sink::due`]).
    pub(super) fn on_due(&mut self, (linger, interval): (Duration, Duration)) -> crate::Result<()> {
        if let Sink::Cluster(p) = self {
            if p.transaction_due(interval)
                .is_some_and(|due| due <= Instant::now())
            {
                return p.commit();
            }
        }
        // Woken for something else (the audit's window), partial batches
        // whose linger has not passed wait on.
        let lingering = (self.oldest_batch()).is_none_or(|o| o + linger > Instant::now());
        match self {
            Sink::Cluster(p) if lingering => p.tick(),
            _ if lingering => Ok(()),
            _ => self.flush_batches(crate::clock::now_ms()),
        }
    }

    /// Whether `record`'s source is stored already by a committed
    /// transaction (then it is not sent; see
    /// [`ClusterProducer::stored_before`]).
    pub(super) fn stored_before(&mut self, record: &ParsedRecord) -> crate::Result<bool> {
        match (self, &record.source) {
            (Sink::Cluster(p), Some(source)) => p.stored_before(source),
            _ => Ok(false),
        }
    }

    /// Says what a cluster producer has to say (a partition's leader
    /// moved).
    pub(super) fn tell(&mut self, say: Say) {
        if let Sink::Cluster(p) = self {
            for notice in p.take_notices() {
                say.info(notice);
            }
        }
    }

    /// Sends what is left; returns the records delivered in all and how
    /// it ended.
    pub(super) fn close(mut self, say: Say) -> (u64, crate::Result<()>) {
        let finished = match &mut self {
            // A transactional one finishes as it commits, or aborts.
            Sink::Cluster(p) if !p.transactional() => p.finish(),
            _ => Ok(()),
        };
        self.tell(say);
        match self {
            Sink::Embedded(p) => {
                let before = p.delivered;
                match p.close() {
                    Ok(n) => (n, Ok(())),
                    Err(e) => (before, Err(e)),
                }
            }
            Sink::Remote(p) => {
                let (summary, result) = p.close();
                say_resent(&summary);
                (summary.delivered, result)
            }
            Sink::Cluster(p) => {
                let (summary, result) = p.close();
                say_resent(&summary);
                (summary.delivered, finished.and(result))
            }
        }
    }
}

/// Says that batches went again after a connection broke: at least once,
/// unless numbered.
fn say_resent(summary: &crate::client::ProducerSummary) {
    if summary.resent > 0 {
        crate::diag::line(format_args!(
            "% {} sent again (a connection broke, or a partition's leader moved): {}",
            crate::human::count(summary.resent, "request"),
            match summary.idempotent {
                true => "numbered, their records were stored once",
                false => "their records may appear twice",
            }
        ));
    }
}

impl super::Run {
    /// Follows a topic that grows: once the looker saw more partitions
    /// than the sink sends to, the old sink delivers what it held (so
    /// that no record overtakes one sent before it to the same
    /// partition) and a new one sends over every partition. Not with
    /// `--acks 0` (nothing would say that the broker took what the old
    /// connection sent) nor `-p` (one partition either way). Per record:
    /// an atomic load and a compare.
    pub(super) fn look_for_growth(&mut self, options: &Options, say: Say) -> anyhow::Result<()> {
        let Some((sink, _)) = &self.sink else {
            return Ok(());
        };
        let Some(looker) = &self.looker else {
            if !self.looking {
                self.looking = true;
                let follows =
                    options.acks != crate::protocol::ACKS_NONE && options.partition.is_none();
                self.looker = follows.then(|| Looker::start(sink, options)).flatten();
            }
            return Ok(());
        };
        let count = looker.count();
        if count <= sink.partitions() {
            return Ok(());
        }
        let (old, _) = self.sink.take().expect("looked at");
        let (delivered, closed) = old.close(say);
        self.delivered += delivered;
        closed.context("cannot deliver the batches sent before the topic grew")?;
        say.info(format_args!(
            "{} has grown to {count} partitions: sending over all of them",
            options.topic
        ));
        let sink = open_sink(options, self.report)?;
        self.sink = Some(super::with_partitioner(options, sink)?);
        Ok(())
    }
}

/// Where a looker asks for the partition count.
enum Source {
    /// A broker, by address, and how long it may take to answer.
    Broker(String, Duration),
    /// The registry's placement.
    Registry(Arc<dyn crate::coord::Registry>),
}

impl Source {
    fn count(&self, topic: &str) -> Option<u32> {
        match self {
            Source::Broker(addr, timeout) => {
                let mut c = Connection::connect_timeout(addr, *timeout).ok()?;
                u32::try_from(c.partitions(topic).ok()?.len()).ok()
            }
            Source::Registry(registry) => {
                let placement = registry.placement(topic).ok()??;
                u32::try_from(placement.brokers.len()).ok()
            }
        }
    }
}

/// Asks for the topic's partition count every `--metadata-refresh` on a
/// thread of its own, so that a broker or a registry slow to answer holds
/// up no record; the sending side reads the last count it got.
pub(super) struct Looker {
    count: Arc<AtomicU32>,
    /// Dropped with the looker: its thread then ends.
    _stop: mpsc::Sender<()>,
}

impl Looker {
    /// A looker of `sink`'s broker or registry (none in embedded mode, or
    /// when no thread can be started: the count then stays).
    fn start(sink: &Sink, options: &Options) -> Option<Looker> {
        let timeout = options.request_timeout_ms.min(options.message_timeout_ms);
        let source = match sink {
            Sink::Embedded(_) => return None,
            Sink::Remote(_) => {
                Source::Broker(options.broker.clone(), Duration::from_millis(timeout))
            }
            Sink::Cluster(p) => Source::Registry(Arc::clone(&p.registry)),
        };
        let refresh = Duration::from_millis(options.metadata_refresh_ms);
        let topic = options.topic.clone();
        let count = Arc::new(AtomicU32::new(0));
        let seen = Arc::clone(&count);
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("metadata".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(refresh) {
                    if let Some(n) = source.count(&topic) {
                        seen.store(n, Ordering::Relaxed);
                    }
                }
            })
            .ok()?;
        Some(Looker { count, _stop: stop })
    }

    /// The last count seen, 0 before any.
    fn count(&self) -> u32 {
        self.count.load(Ordering::Relaxed)
    }
}
