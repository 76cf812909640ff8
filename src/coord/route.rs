//! Routing in a cluster: which broker serves each partition of a topic,
//! from the registry's placement, and a producer that sends each record to
//! its partition's broker.

use crate::client::connection::Connection;
use crate::client::{ParsedRecord, Producer, ProducerConfig, ProducerSummary};
use crate::coord::Registry;
use crate::error::{Error, Result};
use crate::protocol::ErrorCode;

/// The address of the broker of each partition of `topic`, from the
/// registry's placement. With `create`, a topic nobody placed yet is
/// created (and placed) through a live broker first.
pub fn route(registry: &dyn Registry, topic: &str, create: bool) -> Result<Vec<String>> {
    let brokers = registry.brokers()?;
    if brokers.is_empty() {
        return Err(Error::NoBroker {
            registry: registry.location(),
        });
    }
    let placement = match registry.placement(topic)? {
        Some(p) => p,
        None if create => {
            Connection::connect(&brokers[0].addr())?.create_topic(topic, 0)?;
            registry.placement(topic)?.ok_or_else(|| Error::Unplaced {
                topic: topic.into(),
            })?
        }
        None => {
            return Err(Error::Broker {
                code: ErrorCode::UnknownTopic,
                message: format!("topic {topic:?} is not placed in {}", registry.location()),
            })
        }
    };
    placement
        .brokers
        .iter()
        .enumerate()
        .map(|(p, id)| {
            let broker = brokers.iter().find(|b| b.id == *id);
            broker.map(|b| b.addr()).ok_or_else(|| Error::BrokerDown {
                topic: topic.into(),
                partition: p as u32,
                broker: id.clone(),
            })
        })
        .collect()
}

/// Sends records to a topic whose partitions several brokers hold: one
/// [`Producer`] per broker, each record routed to its partition's broker.
#[derive(Debug)]
pub struct ClusterProducer {
    producers: Vec<Producer>,
    /// Index into `producers` of each partition's broker.
    route: Vec<usize>,
}

impl ClusterProducer {
    /// Connects to the broker of every partition of `topic`, as the
    /// registry places them (creating the topic if nobody has).
    pub fn connect(
        registry: &dyn crate::coord::Registry,
        topic: &str,
        config: ProducerConfig,
    ) -> Result<ClusterProducer> {
        let addrs = route(registry, topic, true)?;
        let mut distinct: Vec<String> = addrs.clone();
        distinct.sort();
        distinct.dedup();
        let mut producers = Vec::new();
        for addr in &distinct {
            producers.push(Producer::connect(addr, topic, config)?);
        }
        let route = addrs
            .iter()
            .map(|a| distinct.iter().position(|d| d == a).expect("listed"))
            .collect();
        Ok(ClusterProducer { producers, route })
    }

    /// The topic's partition count.
    pub fn partitions(&self) -> u32 {
        self.route.len() as u32
    }

    /// Adds a record to its partition's batch on that partition's broker.
    pub fn send(
        &mut self,
        partition: u32,
        record: &ParsedRecord,
        headers: &[(&[u8], &[u8])],
        now: i64,
    ) -> Result<()> {
        let Some(&i) = self.route.get(partition as usize) else {
            return Err(Error::Config(format!(
                "partition {partition} does not exist"
            )));
        };
        self.producers[i].send(partition, record, headers, now)
    }

    /// Sends every partial batch.
    pub fn flush_batches(&mut self) -> Result<()> {
        self.producers
            .iter_mut()
            .try_for_each(Producer::flush_batches)
    }

    /// Closes every broker's producer: the summed counts and the first error.
    pub fn close(self) -> (ProducerSummary, Result<()>) {
        let mut total = ProducerSummary::default();
        let mut result = Ok(());
        for p in self.producers {
            let (s, r) = p.close();
            total.delivered += s.delivered;
            total.failed += s.failed;
            total.latency.merge(&s.latency);
            result = result.and(r);
        }
        (total, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coord::mem::MemRegistry;
    use crate::coord::{BrokerInfo, Placement};

    fn broker(id: &str, port: u16) -> BrokerInfo {
        BrokerInfo {
            id: id.into(),
            host: "127.0.0.1".into(),
            port,
            pid: 1,
            topics: Default::default(),
        }
    }

    #[test]
    fn each_partition_goes_to_the_live_broker_it_is_placed_on() {
        let reg = MemRegistry::default();
        let err = route(&reg, "t", false).unwrap_err();
        assert!(matches!(err, Error::NoBroker { .. }), "{err}");
        assert_eq!(err.to_string(), "no broker is registered in memory");

        let _one = reg.register_broker(&broker("b1", 9001)).unwrap();
        let two = reg.register_broker(&broker("b2", 9002)).unwrap();
        let err = route(&reg, "t", false).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Broker {
                    code: ErrorCode::UnknownTopic,
                    ..
                }
            ),
            "{err}"
        );

        let ids = ["b1", "b2", "b1"].map(|b| vec![b.to_string()]).to_vec();
        let placement = Placement::new("t", ids);
        assert!(reg.create_placement(&placement).unwrap());
        let addrs = route(&reg, "t", false).unwrap();
        assert_eq!(
            addrs,
            ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9001"]
        );

        drop(two);
        let err = route(&reg, "t", false).unwrap_err();
        assert!(
            matches!(err, Error::BrokerDown { partition: 1, .. }),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "partition 1 of \"t\" is placed on broker b2, which is not running"
        );
    }
}
