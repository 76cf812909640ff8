//! Routing in a cluster: which broker serves each partition of a topic,
//! and a producer that sends each record to its partition's broker.
//!
//! A partition goes to its *leader*: the one its replication state names
//! ([`crate::coord::PartitionState`]) when it has a state, else the broker
//! its placement names (a topic of one replica has no state). A state
//! that names no leader (offline), or a leader that is not registered (it
//! died and nobody has taken its place yet), is `leader_not_available`
//! for now: a client looks again a little later ([`retriable`]).

use std::sync::Arc;

use crate::client::connection::Connection;
use crate::client::offset::Extent;
use crate::client::{Connections, Locate};
use crate::coord::{BrokerInfo, Placement, Registry};
use crate::error::{Error, Result};
use crate::protocol::ErrorCode;

mod cluster;
mod txn;

pub use cluster::ClusterProducer;

/// The address of the leader of each partition of `topic` (see the
/// module's docs); the first partition without one is the error. With
/// `create`, a topic nobody placed yet is created (and placed) through a
/// live broker first.
pub fn route(registry: &dyn Registry, topic: &str, create: bool) -> Result<Vec<String>> {
    leaders(registry, topic, create)?.into_iter().collect()
}

/// The address of the leader of each partition of `topic`, or why that
/// partition has none now; the outer error when the topic has no
/// placement (or, with `create`, cannot be created) or the registry
/// cannot be read.
pub fn leaders(registry: &dyn Registry, topic: &str, create: bool) -> Result<Vec<Result<String>>> {
    let (brokers, placement) = placed(registry, topic, create)?;
    Ok((0..placement.brokers.len() as u32)
        .map(|p| leader_of(registry, &brokers, &placement, p))
        .collect())
}

/// The live brokers and the placement of `topic` (created first with
/// `create`).
fn placed(
    registry: &dyn Registry,
    topic: &str,
    create: bool,
) -> Result<(Vec<BrokerInfo>, Placement)> {
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
    Ok((brokers, placement))
}

/// The address of the leader of partition `p` of `placement`'s topic.
fn leader_of(
    registry: &dyn Registry,
    brokers: &[BrokerInfo],
    placement: &Placement,
    p: u32,
) -> Result<String> {
    let topic = &placement.topic;
    let addr_of = |id: &str| brokers.iter().find(|b| b.id == id).map(BrokerInfo::addr);
    let Some((state, _)) = registry.partition_state(topic, p)? else {
        let id = placement
            .brokers
            .get(p as usize)
            .ok_or_else(|| Error::UnknownPartition {
                topic: topic.clone(),
                partition: p,
                count: placement.brokers.len() as u32,
            })?;
        return addr_of(id).ok_or_else(|| Error::BrokerDown {
            topic: topic.clone(),
            partition: p,
            broker: id.clone(),
        });
    };
    let why = match &state.leader {
        Some(leader) => match addr_of(leader) {
            Some(addr) => return Ok(addr),
            None => format!("its leader {leader} is not registered"),
        },
        None if state.isr.iter().any(|r| addr_of(r).is_some()) => format!(
            "its in-sync replicas are electing one (ISR {:?})",
            state.isr
        ),
        None => format!(
            "it is offline, no in-sync replica is alive to lead it (ISR {:?})",
            state.isr
        ),
    };
    Err(Error::Broker {
        code: ErrorCode::LeaderNotAvailable,
        message: format!("partition {p} of {topic:?} has no leader: {why}"),
    })
}

/// Whether `e`, met sending to or reading from a partition's broker (or
/// looking its leader up), says that the partition may be served
/// elsewhere, or soon: its leader moved or is being elected, its broker
/// went away, or its in-sync replicas are too few for now. A client
/// looks its leader up again and retries within its deadline.
pub fn retriable(e: &Error) -> bool {
    match e {
        Error::Broker { code, .. } => matches!(
            code,
            ErrorCode::NotLeader
                | ErrorCode::LeaderNotAvailable
                | ErrorCode::PartitionElsewhere
                | ErrorCode::NotEnoughReplicas
        ),
        Error::Network { .. } | Error::BrokerDown { .. } | Error::TimedOut { .. } => true,
        _ => false,
    }
}

/// The broker of each partition of `topic` for a group member: its leader
/// (see [`route`]) when the topic is placed, else the broker registered
/// for the topic (a broker that places nothing).
pub(crate) fn routes(
    registry: &dyn Registry,
    topic: &str,
    conns: &mut Connections,
) -> Result<Vec<String>> {
    if registry.placement(topic)?.is_some() {
        return route(registry, topic, false);
    }
    let broker = registered(registry, topic)?;
    let count = conns.with(&broker, |c| c.partitions(topic))?.len();
    Ok(vec![broker; count])
}

/// The partition count of `topic`: its placement's, else its registered
/// broker's. No partition's leader is needed.
pub(crate) fn partition_count(
    registry: &dyn Registry,
    topic: &str,
    conns: &mut Connections,
) -> Result<u32> {
    if let Some(placement) = registry.placement(topic)? {
        return Ok(placement.brokers.len() as u32);
    }
    let broker = registered(registry, topic)?;
    Ok(conns.with(&broker, |c| c.partitions(topic))?.len() as u32)
}

/// The address of a broker registered as holding `topic`.
fn registered(registry: &dyn Registry, topic: &str) -> Result<String> {
    Ok(registry
        .brokers()?
        .into_iter()
        .find(|b| b.topics.contains_key(topic))
        .ok_or_else(|| Error::NotInRegistry {
            topic: topic.to_string(),
            registry: registry.location(),
        })?
        .addr())
}

/// The (start, end) offsets of every partition, each from its broker; a
/// read_committed consumer's ends are the last stable offsets
/// ([`Connection::partitions_as`](crate::client::Connection::partitions_as)).
pub(crate) fn bounds(
    routes: &[String],
    topic: &str,
    conns: &mut Connections,
    read_committed: bool,
) -> Result<Vec<Extent>> {
    let mut out = vec![Extent::default(); routes.len()];
    let mut asked: Vec<&String> = Vec::new();
    for addr in routes {
        if asked.contains(&addr) {
            continue;
        }
        asked.push(addr);
        let read: Vec<u32> = (0..routes.len() as u32)
            .filter(|&p| routes[p as usize] == *addr)
            .collect();
        let offsets = conns.with(addr, |c| c.partitions_as(topic, read_committed, &read))?;
        for (p, route) in routes.iter().enumerate() {
            if route == addr {
                out[p] = offsets.get(p).copied().unwrap_or_default();
                // An offline partition has no end to wait for: say why.
                conns.with(addr, |c| c.check_online(topic, p as u32, out[p].start))?;
            }
        }
    }
    Ok(out)
}

/// Finds each partition's leader in a registry, for a consumer (which
/// knows brokers, not the registry).
#[derive(Debug)]
pub struct RegistryLocator {
    registry: Arc<dyn Registry>,
}

impl RegistryLocator {
    /// A locator that reads `registry`.
    pub fn new(registry: Arc<dyn Registry>) -> RegistryLocator {
        RegistryLocator { registry }
    }
}

impl Locate for RegistryLocator {
    fn leader(&self, topic: &str, partition: u32) -> Result<String> {
        let (brokers, placement) = placed(&*self.registry, topic, false)?;
        leader_of(&*self.registry, &brokers, &placement, partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Locate;
    use crate::coord::mem::MemRegistry;
    use crate::coord::{BrokerInfo, PartitionState, Placement};
    use std::sync::Arc;

    pub(super) fn broker(id: &str, port: u16) -> BrokerInfo {
        BrokerInfo {
            kafka: None,
            id: id.into(),
            host: "127.0.0.1".into(),
            port,
            pid: 1,
            topics: Default::default(),
            principal: None,
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

    fn state(leader: Option<&str>, epoch: u64, isr: &[&str]) -> PartitionState {
        PartitionState {
            leader: leader.map(str::to_string),
            leader_epoch: epoch,
            isr: isr.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_partition_with_a_state_goes_to_its_leader_not_its_preferred_broker() {
        let reg = MemRegistry::default();
        let _b1 = reg.register_broker(&broker("b1", 9001)).unwrap();
        let _b2 = reg.register_broker(&broker("b2", 9002)).unwrap();
        let b3 = reg.register_broker(&broker("b3", 9003)).unwrap();
        let ids = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let replicas = vec![ids(&["b1", "b2", "b3"]), ids(&["b2", "b3", "b1"])];
        assert!(reg
            .create_placement(&Placement::new("t", replicas))
            .unwrap());
        // No state yet: the placement's first replica.
        assert_eq!(
            route(&reg, "t", false).unwrap(),
            ["127.0.0.1:9001", "127.0.0.1:9002"]
        );
        let first = state(Some("b1"), 0, &["b1", "b2", "b3"]);
        assert!(reg.create_partition_state("t", 0, &first).unwrap());
        let moved = state(Some("b3"), 1, &["b3", "b2"]);
        assert!(reg.set_partition_state("t", 0, &moved, 0).unwrap());
        assert_eq!(
            route(&reg, "t", false).unwrap(),
            ["127.0.0.1:9003", "127.0.0.1:9002"]
        );
        // Its leader's registration gone: no leader for now (retryable).
        drop(b3);
        let found = leaders(&reg, "t", false).unwrap();
        assert_eq!(found[1].as_deref().unwrap(), "127.0.0.1:9002");
        let err = found[0].as_ref().unwrap_err();
        assert!(retriable(err), "{err}");
        assert_eq!(
            err.to_string(),
            "the broker says: partition 0 of \"t\" has no leader: its leader b3 is not \
             registered (leader_not_available)"
        );
        let err = route(&reg, "t", false).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Broker {
                    code: ErrorCode::LeaderNotAvailable,
                    ..
                }
            ),
            "{err}"
        );
        // Offline: the state names no leader.
        let offline = state(None, 1, &["b3"]);
        assert!(reg.set_partition_state("t", 0, &offline, 1).unwrap());
        let err = leaders(&reg, "t", false).unwrap().remove(0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the broker says: partition 0 of \"t\" has no leader: it is offline, no in-sync \
             replica is alive to lead it (ISR [\"b3\"]) (leader_not_available)"
        );
        let locator = RegistryLocator::new(Arc::new(reg));
        assert!(locator.leader("t", 0).is_err());
        assert_eq!(locator.leader("t", 1).unwrap(), "127.0.0.1:9002");
    }
}
