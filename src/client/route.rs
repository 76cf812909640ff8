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

        let ids = ["b1", "b2", "b1"].map(String::from).to_vec();
        let placement = Placement {
            topic: "t".into(),
            brokers: ids,
        };
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
