//! Where a benchmark's records go: one broker for every partition, or each
//! partition's leader in a cluster (read from the partitions' replication
//! states by [`super::cluster`]), a producer that sends each record to its
//! partition's broker, and a warm-up that proves every partition
//! acknowledges acks=all before a measurement starts.
//!
//! The cluster's own routed producer ([`crate::coord::ClusterProducer`])
//! routes by the registry's placement, not by the leader of the moment;
//! the benchmark routes by the leader it found, so that it measures the
//! replicated path and nothing else.

use crate::client::{Connections, ParsedRecord, Producer, ProducerConfig, ProducerSummary};
use crate::error::{Error, Result};

/// Which broker serves each partition of the measured topic.
#[derive(Debug, Clone)]
pub enum Route {
    /// One broker, for every partition (it creates the topic on first
    /// use).
    Broker(String),
    /// Each partition's leader, in partition order.
    Leaders(Vec<String>),
}

impl Route {
    /// A broker to ask about the topic (metadata, creating it).
    pub fn any(&self) -> &str {
        match self {
            Route::Broker(addr) => addr,
            Route::Leaders(addrs) => addrs.first().map_or("", String::as_str),
        }
    }

    /// The broker of `partition`.
    pub fn addr(&self, partition: u32) -> &str {
        match self {
            Route::Broker(addr) => addr,
            Route::Leaders(addrs) => addrs
                .get(partition as usize)
                .map_or_else(|| self.any(), String::as_str),
        }
    }

    /// The (start, end) offsets of every partition of `topic`, each as its
    /// own broker reports them (a follower does not: it names its leader).
    pub fn offsets(&self, topic: &str) -> Result<Vec<(u64, u64)>> {
        let mut conns = Connections::new();
        match self {
            Route::Broker(addr) => conns.with(addr, |c| c.partitions(topic)),
            Route::Leaders(addrs) => {
                let mut offsets = Vec::with_capacity(addrs.len());
                for (p, addr) in addrs.iter().enumerate() {
                    let all = conns.with(addr, |c| c.partitions(topic))?;
                    let Some(&here) = all.get(p) else {
                        return Err(Error::Config(format!(
                            "broker {addr} says topic {topic:?} has {} partitions, not {}",
                            all.len(),
                            addrs.len()
                        )));
                    };
                    offsets.push(here);
                }
                Ok(offsets)
            }
        }
    }
}

/// The value of a warm-up record.
const WARM_UP: &[u8] = b"klog-bench warm-up";

/// Sends one record to each partition of `topic` with acks=all and waits
/// for every acknowledgement: a leader acknowledges it once each follower
/// in its ISR fetched past it, so after this the followers are fetching
/// in the leader's epoch (a follower starts fetching some time after the
/// registry names its leader, and records sent meanwhile would wait for
/// it inside the measurement).
pub fn warm_up(route: &Route, topic: &str) -> Result<()> {
    let config = ProducerConfig {
        acks: crate::protocol::ACKS_ALL,
        ..ProducerConfig::default()
    };
    let mut sender = Sender::connect(route, topic, config)?;
    let record = ParsedRecord {
        key: None,
        value: WARM_UP.to_vec(),
        null_value: false,
        headers: Vec::new(),
        timestamp: None,
        source: None,
    };
    for p in 0..sender.partitions() {
        sender.send(p, &record, crate::clock::now_ms())?;
    }
    sender.flush_batches()?;
    let (summary, result) = sender.close();
    result?;
    if summary.failed > 0 {
        return Err(Error::Config(format!(
            "{} of the warm-up records to {topic:?} were not acknowledged",
            summary.failed
        )));
    }
    Ok(())
}

/// A producer per broker of a [`Route`], each record sent to its
/// partition's broker.
#[derive(Debug)]
pub struct Sender {
    producers: Vec<Producer>,
    /// Index into `producers` of each partition's broker (empty: all go
    /// to the only one).
    route: Vec<usize>,
}

impl Sender {
    /// Connects to the brokers of `route` for `topic` (one broker creates
    /// the topic if it does not exist).
    pub fn connect(route: &Route, topic: &str, config: ProducerConfig) -> Result<Sender> {
        match route {
            Route::Broker(addr) => Ok(Sender {
                producers: vec![Producer::connect(addr, topic, config)?],
                route: Vec::new(),
            }),
            Route::Leaders(addrs) => {
                let mut distinct: Vec<&String> = addrs.iter().collect();
                distinct.sort();
                distinct.dedup();
                let mut producers = Vec::with_capacity(distinct.len());
                for addr in &distinct {
                    producers.push(Producer::connect(addr, topic, config)?);
                }
                let route = addrs
                    .iter()
                    .map(|a| distinct.iter().position(|d| *d == a).unwrap_or(0))
                    .collect();
                Ok(Sender { producers, route })
            }
        }
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        if self.route.is_empty() {
            self.producers.first().map_or(0, Producer::partitions)
        } else {
            self.route.len() as u32
        }
    }

    /// Adds a record to its partition's batch on that partition's broker.
    pub fn send(&mut self, partition: u32, record: &ParsedRecord, now: i64) -> Result<()> {
        let i = self.route.get(partition as usize).copied().unwrap_or(0);
        match self.producers.get_mut(i) {
            Some(p) => p.send(partition, record, &[], now),
            None => Err(Error::Config(format!(
                "partition {partition} has no broker"
            ))),
        }
    }

    /// When the oldest batch not yet sent, of any broker's, got its first
    /// record.
    pub fn oldest_batch(&self) -> Option<std::time::Instant> {
        self.producers
            .iter()
            .filter_map(Producer::oldest_batch)
            .min()
    }

    /// Sends every partial batch.
    pub fn flush_batches(&mut self) -> Result<()> {
        self.producers
            .iter_mut()
            .try_for_each(Producer::flush_batches)
    }

    /// Closes every broker's producer: the summed counts and the first
    /// error.
    pub fn close(self) -> (ProducerSummary, Result<()>) {
        let mut total = ProducerSummary::default();
        let mut result = Ok(());
        for p in self.producers {
            let (s, r) = p.close();
            total.delivered += s.delivered;
            total.failed += s.failed;
            total.resent += s.resent;
            total.latency.merge(&s.latency);
            result = result.and(r);
        }
        (total, result)
    }
}
