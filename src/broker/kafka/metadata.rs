//! Metadata and ListOffsets: the brokers Kafka clients can reach, each
//! topic's partitions with their leader, replicas and ISR (the registry's,
//! with replication), and offsets by position or time.

use super::access::Access;
use super::{kafka_code, node_id, Kafka};
use crate::broker::connection::requests::record_at;
use crate::broker::shared::{error_code, Shared};
use crate::coord::acl::{Operation, ResourceType, CLUSTER};
use crate::coord::{BrokerInfo, Placement, Registry};
use crate::kafka;

/// A broker as Metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Node {
    pub(super) node_id: i32,
    pub(super) host: String,
    pub(super) port: i32,
}

/// A partition as Metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PartitionMeta {
    pub(super) error: i16,
    pub(super) partition: i32,
    /// The leader's node id, -1 when it has none now.
    pub(super) leader: i32,
    /// The leader's epoch, -1 when unknown (no registry).
    pub(super) epoch: i32,
    pub(super) replicas: Vec<i32>,
    pub(super) isr: Vec<i32>,
}

/// A topic as Metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TopicMeta {
    pub(super) error: i16,
    pub(super) name: String,
    pub(super) partitions: Vec<PartitionMeta>,
}

/// A Metadata answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cluster {
    pub(super) brokers: Vec<Node>,
    pub(super) controller: i32,
    pub(super) topics: Vec<TopicMeta>,
}

/// The cluster as Kafka clients see it: the topics `asked` (all with
/// `None`), creating those missing when `create`.
pub(super) fn metadata(
    shared: &Shared,
    kafka: &Kafka,
    asked: Option<Vec<&str>>,
    (create, access): (bool, Access<'_>),
) -> Cluster {
    let registry = shared.registry.as_deref();
    let live = registry.and_then(|r| r.brokers().ok()).unwrap_or_default();
    let mut brokers: Vec<Node> = live.iter().filter_map(kafka_node).collect();
    let me = Node {
        node_id: kafka.node_id,
        host: kafka.advertised.0.clone(),
        port: i32::from(kafka.advertised.1),
    };
    if !brokers.iter().any(|b| b.node_id == me.node_id) {
        brokers.push(me);
    }
    let describes = |name: &str| access.topic(Operation::Describe, name).is_none();
    let names: Vec<String> = match asked {
        Some(names) => names.into_iter().map(str::to_string).collect(),
        None => all_topics(shared, registry)
            .into_iter()
            .filter(|t| describes(t))
            .collect(),
    };
    let topics = names
        .into_iter()
        .map(|name| {
            if let Some(error) = access.topic(Operation::Describe, &name) {
                let partitions = Vec::new();
                return TopicMeta {
                    error,
                    name,
                    partitions,
                };
            }
            let creates = access.allows(Operation::Create, ResourceType::Cluster, CLUSTER)
                || access.allows(Operation::Create, ResourceType::Topic, &name);
            topic_meta(shared, registry, (&live, &brokers), name, create && creates)
        })
        .collect();
    Cluster {
        brokers,
        controller: kafka.node_id,
        topics,
    }
}

/// A registered broker with a Kafka listener, as a node.
pub(super) fn kafka_node(b: &BrokerInfo) -> Option<Node> {
    let (host, port) = b.kafka.as_deref()?.rsplit_once(':')?;
    Some(Node {
        node_id: node_id(&b.id),
        host: host.to_string(),
        port: port.parse().ok()?,
    })
}

/// Every topic: the registry's placed ones and this broker's own.
fn all_topics(shared: &Shared, registry: Option<&dyn Registry>) -> Vec<String> {
    let mut names: Vec<String> = shared.read_topics().keys().cloned().collect();
    if let Some(placed) = registry.and_then(|r| r.topics().ok()) {
        names.extend(placed);
    }
    names.sort();
    names.dedup();
    names
}

/// One topic's metadata.
fn topic_meta(
    shared: &Shared,
    registry: Option<&dyn Registry>,
    (live, nodes): (&[BrokerInfo], &[Node]),
    name: String,
    create: bool,
) -> TopicMeta {
    let failed = |error: i16, name: String| TopicMeta {
        error,
        name,
        partitions: Vec::new(),
    };
    if crate::storage::store::validate_topic(&name).is_err() {
        return failed(kafka::INVALID_TOPIC_EXCEPTION, name);
    }
    let known = match registry {
        Some(r) => r.placement(&name).ok().flatten().is_some(),
        None => shared.read_topics().contains_key(&name),
    };
    if !known {
        if !create || !shared.config.auto_create_topics {
            return failed(kafka::UNKNOWN_TOPIC_OR_PARTITION, name);
        }
        if let Err(e) = shared.create_topic(&name, shared.config.partitions_default) {
            shared.log_peer(format_args!(
                "cannot create topic {name} for a Kafka client: {e}"
            ));
            return failed(kafka_code(error_code(&e)), name);
        }
    }
    let partitions = match registry {
        Some(r) => match r.placement(&name) {
            Ok(Some(placement)) => placed_partitions(r, &placement, live, nodes),
            _ => return failed(kafka::LEADER_NOT_AVAILABLE, name),
        },
        None => own_partitions(shared, &name, nodes[0].node_id),
    };
    TopicMeta {
        error: kafka::NONE,
        name,
        partitions,
    }
}

/// A topic's partitions on a broker without a registry: all its own.
fn own_partitions(shared: &Shared, name: &str, me: i32) -> Vec<PartitionMeta> {
    let count = shared.read_topics().get(name).map_or(0, Vec::len);
    (0..count as u32)
        .map(|p| PartitionMeta {
            error: if shared.is_offline(name, p) {
                kafka::KAFKA_STORAGE_ERROR
            } else {
                kafka::NONE
            },
            partition: p as i32,
            leader: me,
            epoch: -1,
            replicas: vec![me],
            isr: vec![me],
        })
        .collect()
}

/// A placed topic's partitions: the leader, replicas and ISR the registry
/// names; a leader that is not live with a Kafka listener is none.
fn placed_partitions(
    registry: &dyn Registry,
    placement: &Placement,
    live: &[BrokerInfo],
    nodes: &[Node],
) -> Vec<PartitionMeta> {
    let reachable = |id: &str| {
        let n = node_id(id);
        (live.iter().any(|b| b.id == id) && nodes.iter().any(|b| b.node_id == n)).then_some(n)
    };
    let ids = |ids: &[String]| ids.iter().map(|id| node_id(id)).collect::<Vec<i32>>();
    (0..placement.brokers.len() as u32)
        .map(|p| {
            let replicas: Vec<String> = match placement.replicas_of(p) {
                Some(r) => r.to_vec(),
                None => placement
                    .brokers
                    .get(p as usize)
                    .cloned()
                    .into_iter()
                    .collect(),
            };
            let (leader, isr, epoch) = match registry.partition_state(&placement.topic, p) {
                Ok(Some((state, _))) => (
                    state.leader,
                    state.isr,
                    i32::try_from(state.leader_epoch).unwrap_or(-1),
                ),
                _ => (
                    placement.brokers.get(p as usize).cloned(),
                    replicas.clone(),
                    -1,
                ),
            };
            let leader = leader.as_deref().and_then(reachable);
            PartitionMeta {
                error: if leader.is_some() {
                    kafka::NONE
                } else {
                    kafka::LEADER_NOT_AVAILABLE
                },
                partition: p as i32,
                leader: leader.unwrap_or(-1),
                epoch,
                replicas: ids(&replicas),
                isr: ids(&isr),
            }
        })
        .collect()
}

/// A partition's ListOffsets answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Listed {
    pub(super) error: i16,
    pub(super) offset: i64,
    /// The found record's own timestamp (-1 for the start and the end).
    pub(super) timestamp: i64,
    /// The leader epoch of the offset, -1 when unknown.
    pub(super) epoch: i32,
}

impl Listed {
    pub(super) fn none(error: i16) -> Listed {
        Listed {
            error,
            offset: -1,
            timestamp: -1,
            epoch: -1,
        }
    }
}

/// ListOffsets for one partition (see [`crate::kafka::list_offsets`] for
/// what `at` asks): the offset, the found record's timestamp and the
/// offset's leader epoch. A client's leader epoch (`current`, -1 for
/// none) is checked as a fetch's is: an older one is fenced, a newer one
/// unknown here yet.
pub(super) fn list_offset(
    shared: &Shared,
    topic: &str,
    (partition, current): (i32, i32),
    (at, read_committed): (i64, bool),
) -> Listed {
    use crate::kafka::list_offsets as lo;
    let Ok(partition) = u32::try_from(partition) else {
        return Listed::none(kafka::UNKNOWN_TOPIC_OR_PARTITION);
    };
    let part = match shared.partition(topic, partition) {
        Ok(part) => part,
        Err((code, _)) => return Listed::none(kafka_code(code)),
    };
    if let Err((code, _)) = part.check_client_epoch(u32::try_from(current).ok()) {
        return Listed::none(kafka_code(code));
    }
    let by_time = at >= 0 || at == lo::MAX_TIMESTAMP;
    let at = match at {
        lo::EARLIEST_LOCAL => lo::EARLIEST,
        // No tiered storage, and no record without a timestamp has the
        // largest one.
        lo::LATEST_TIERED => return Listed::none(kafka::NONE),
        lo::MAX_TIMESTAMP => match part.lock().max_timestamp() {
            Some(ts) if ts >= 0 => ts,
            _ => return Listed::none(kafka::NONE),
        },
        at if at < lo::EARLIEST => return Listed::none(kafka::INVALID_REQUEST),
        at => at,
    };
    match record_at(shared, topic, partition, at) {
        Ok((mut offset, timestamp)) => {
            // A read_committed consumer's end is the last stable offset,
            // and a record found by time at or past it is none yet (as
            // Kafka answers: -1).
            if read_committed && (at == lo::LATEST || by_time) {
                let stable = match part.lock().last_stable_offset() {
                    Ok(stable) => stable as i64,
                    Err(e) => return Listed::none(kafka_code(error_code(&e))),
                };
                if at == lo::LATEST {
                    offset = offset.min(stable);
                } else if offset >= stable {
                    return Listed::none(kafka::NONE);
                }
            }
            let epochs = |log: &crate::storage::log::Log| match at {
                lo::LATEST => log.epochs().epoch_at(u64::MAX),
                _ => u64::try_from(offset)
                    .ok()
                    .and_then(|o| log.epochs().epoch_at(o)),
            };
            let epoch = epochs(&part.lock());
            Listed {
                error: kafka::NONE,
                offset,
                timestamp,
                epoch: epoch.and_then(|e| i32::try_from(e).ok()).unwrap_or(-1),
            }
        }
        Err((code, _)) => Listed::none(kafka_code(code)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::flusher::flush_partition;
    use crate::broker::testing::{one_record_at, partition, shared};
    use crate::kafka::list_offsets as lo;

    /// For a read_committed consumer, ListOffsets' latest is the last
    /// stable offset, and a record found by time (or the largest time) at
    /// or past it is none yet (-1, as on Kafka), one before it found;
    /// read_uncommitted sees to the high watermark.
    #[test]
    fn a_read_committed_list_by_time_stops_at_the_last_stable_offset() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        {
            let mut log = p.lock();
            log.append(&mut one_record_at(-1, 1_000), 1_000).unwrap(); // 0
            log.append(&mut one_record_at(20, 2_000), 1_000).unwrap(); // 1: open
            log.append(&mut one_record_at(-1, 3_000), 1_000).unwrap(); // 2
        }
        flush_partition(&shared, &p);
        let listed = |at, read_committed| {
            let l = list_offset(&shared, "t", (0, -1), (at, read_committed));
            assert_eq!(l.error, kafka::NONE);
            l.offset
        };
        let uncommitted =
            [1_000, 2_000, 3_000, lo::MAX_TIMESTAMP, lo::LATEST].map(|at| listed(at, false));
        assert_eq!(uncommitted, [0, 1, 2, 2, 3]);
        let committed =
            [1_000, 2_000, 3_000, lo::MAX_TIMESTAMP, lo::LATEST].map(|at| listed(at, true));
        assert_eq!(committed, [0, -1, -1, -1, 1]);
        assert_eq!(listed(lo::EARLIEST, true), 0);
    }
}
