//! Routing in a cluster: which broker serves each partition of a topic,
//! from the registry's placement.

use crate::client::connection::Connection;
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
            registry
                .placement(topic)?
                .ok_or_else(|| Error::Unplaced { topic: topic.into() })?
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
