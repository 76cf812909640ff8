//! CreatePartitions on the wire ([`crate::kafka::create_partitions`]):
//! each topic needs alter on it. With a registry, the topic's placement
//! grows by compare-and-set ([`crate::coord::partitions_add`]): the new
//! partitions' replicas are those asked for (node ids of live brokers,
//! as many as the topic's replication factor) or the round-robin over
//! the live brokers. This broker grows its copy before it answers, and
//! the answer waits, up to the request's timeout (at most
//! [`WAIT_MAX`]), for each new partition to be served by its preferred
//! leader; past it, the partitions are added all the same and come up as
//! their brokers read the placement (within a second), so the answer is
//! still a success, as Kafka's is once its controller wrote the change.
//! Without a registry, the broker's own copy grows.
//!
//! A topic's count only grows: fewer or as many partitions as it has is
//! `INVALID_PARTITIONS`. A request names at most [`TOPICS_MAX`] topics;
//! those past it, and a topic named twice, are `INVALID_REQUEST`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::access::Access;
use super::node_id;
use crate::broker::shared::{error_code, Held, Shared};
use crate::coord::acl::Operation;
use crate::coord::partitions_add::{self, Refused};
use crate::coord::{Placement, Registry};
use crate::kafka::create_partitions::*;
use crate::kafka::{self};

/// Topics one request may grow.
pub(super) const TOPICS_MAX: usize = 1000;

/// The longest an answer waits for the new partitions' brokers.
const WAIT_MAX: Duration = Duration::from_secs(10);

/// A topic's refusal: its error code and why.
type Refusal = (i16, String);

/// CreatePartitions: each topic's result, in order.
pub(super) fn create(
    shared: &Shared,
    access: &Access<'_>,
    r: &CreatePartitionsRequest<'_>,
) -> CreatePartitionsResponse {
    let mut named: HashMap<&str, usize> = HashMap::new();
    for t in &r.topics {
        *named.entry(t.name).or_default() += 1;
    }
    let deadline = Instant::now() + Duration::from_millis(r.timeout_ms.max(0) as u64).min(WAIT_MAX);
    let mut grown = Vec::new();
    let results: Vec<CreatePartitionsTopicResult> = (r.topics.iter().enumerate())
        .map(|(i, t)| {
            let outcome = if i >= TOPICS_MAX {
                Err((
                    kafka::INVALID_REQUEST,
                    format!("at most {TOPICS_MAX} topics a request"),
                ))
            } else if named.get(t.name).is_some_and(|n| *n > 1) {
                let why = format!("topic {:?} is named more than once", t.name);
                Err((kafka::INVALID_REQUEST, why))
            } else {
                grow_one(shared, access, t, r.validate_only)
            };
            let (error_code, error_message) = match outcome {
                Ok(Some(grown_from)) => {
                    grown.push(grown_from);
                    (kafka::NONE, None)
                }
                Ok(None) => (kafka::NONE, None),
                Err((code, why)) => (code, Some(why)),
            };
            CreatePartitionsTopicResult {
                name: t.name.into(),
                error_code,
                error_message,
            }
        })
        .collect();
    wait_served(shared, &grown, deadline);
    CreatePartitionsResponse {
        throttle_time_ms: 0,
        results,
    }
}

/// Checks and (unless `validate_only`) grows one topic: with a registry,
/// the placement it has now and the first new partition; or the error and
/// why.
fn grow_one(
    shared: &Shared,
    access: &Access<'_>,
    t: &CreatePartitionsTopic<'_>,
    validate_only: bool,
) -> Result<Option<(Placement, usize)>, Refusal> {
    if let Some(denied) = access.topic(Operation::Alter, t.name) {
        return Err((denied, format!("not allowed to alter topic {:?}", t.name)));
    }
    // A group's partition of the offsets topic follows from the count.
    if t.name == crate::coord::offsets_topic::OFFSETS_TOPIC {
        let why = format!("{} is internal: its partition count places groups", t.name);
        return Err((kafka::POLICY_VIOLATION, why));
    }
    let count = u32::try_from(t.count)
        .ok()
        .filter(|c| *c > 0)
        .ok_or_else(|| (kafka::INVALID_PARTITIONS, format!("{} partitions", t.count)))?;
    let asked: Option<Vec<&[i32]>> =
        (t.assignments.as_ref()).map(|a| a.iter().map(|r| r.broker_ids.as_slice()).collect());
    // Within this broker's limits (--max-partitions, open files) before
    // anything is written: a placement it could not open would stop it at
    // its next start.
    shared
        .room_for(t.name, count)
        .map_err(|e| refusal(t.name, &e))?;
    let Some(registry) = shared.registry.as_deref() else {
        return grow_alone(shared, t.name, count, asked, validate_only).map(|()| None);
    };
    let assignment = match &asked {
        Some(lists) => Some(broker_ids(registry, lists)?),
        None => None,
    };
    let (placement, from) = partitions_add::add(
        registry,
        t.name,
        count,
        assignment.as_deref(),
        validate_only,
    )
    .map_err(|e| refusal(t.name, &e))?
    .map_err(|refused| match refused {
        Refused::Count(why) => (kafka::INVALID_PARTITIONS, why),
        Refused::Assignment(why) => (kafka::INVALID_REPLICA_ASSIGNMENT, why),
        Refused::ReplicationFactor(why) => (kafka::INVALID_REPLICATION_FACTOR, why),
    })?;
    if validate_only {
        return Ok(None);
    }
    let mine = Held::all(&placement, &shared.broker_id);
    // Not open here, it opens with all its partitions when asked for.
    let open_here = shared.read_topics().contains_key(t.name);
    if open_here {
        shared
            .grow_topic(t.name, &mine)
            .map_err(|e| refusal(t.name, &e))?;
    }
    Ok(Some((placement, from as usize)))
}

/// The code and message of a library error growing `topic`.
fn refusal(topic: &str, e: &crate::error::Error) -> Refusal {
    match e {
        crate::error::Error::UnknownTopic { .. } => (
            kafka::UNKNOWN_TOPIC_OR_PARTITION,
            format!("topic {topic:?} does not exist"),
        ),
        e => (super::kafka_code(error_code(e)), e.to_string()),
    }
}

/// The klog ids of the brokers whose Kafka node ids are asked for.
fn broker_ids(registry: &dyn Registry, lists: &[&[i32]]) -> Result<Vec<Vec<String>>, Refusal> {
    let live = registry
        .brokers()
        .map_err(|e| (kafka::UNKNOWN_SERVER_ERROR, e.to_string()))?;
    let by_node: HashMap<i32, String> = live.into_iter().map(|b| (node_id(&b.id), b.id)).collect();
    lists
        .iter()
        .map(|ids| {
            ids.iter()
                .map(|n| {
                    by_node.get(n).cloned().ok_or_else(|| {
                        let why = format!("node {n} is not a live broker of the cluster");
                        (kafka::INVALID_REPLICA_ASSIGNMENT, why)
                    })
                })
                .collect()
        })
        .collect()
}

/// Grows a topic of a broker without a registry (its one copy of each
/// partition, so any replicas asked for must be this broker alone).
fn grow_alone(
    shared: &Shared,
    topic: &str,
    count: u32,
    asked: Option<Vec<&[i32]>>,
    validate_only: bool,
) -> Result<(), Refusal> {
    let me = node_id(&shared.broker_id);
    if let Some(lists) = &asked {
        if lists.iter().any(|ids| *ids != [me]) {
            let why = format!("this broker has no registry: each new partition's one replica is node {me}, itself");
            return Err((kafka::INVALID_REPLICA_ASSIGNMENT, why));
        }
    }
    let assignment: Option<Vec<Vec<String>>> =
        (asked.as_ref()).map(|lists| vec![vec![shared.broker_id.clone()]; lists.len()]);
    let have = match shared.read_topics().get(topic) {
        Some(parts) => parts.len() as u32,
        None => {
            let why = format!("topic {topic:?} does not exist");
            return Err((kafka::UNKNOWN_TOPIC_OR_PARTITION, why));
        }
    };
    let old = Placement::new(topic, vec![vec![shared.broker_id.clone()]; have as usize]);
    let me = std::slice::from_ref(&shared.broker_id);
    partitions_add::grown(&old, count, assignment.as_deref(), me).map_err(
        |refused| match refused {
            Refused::Count(why) => (kafka::INVALID_PARTITIONS, why),
            Refused::Assignment(why) | Refused::ReplicationFactor(why) => {
                (kafka::INVALID_REPLICA_ASSIGNMENT, why)
            }
        },
    )?;
    if !validate_only {
        let mine = vec![Held::Single; count as usize];
        shared
            .grow_topic(topic, &mine)
            .map_err(|e| refusal(topic, &e))?;
    }
    Ok(())
}

/// Waits until `deadline` for each new partition of `grown` (a topic's
/// placement, and its first new partition) to be served by its preferred
/// leader (named in that broker's registration), unless that broker is
/// down or does not hold the topic open, or this one stops.
fn wait_served(shared: &Shared, grown: &[(Placement, usize)], deadline: Instant) {
    let Some(registry) = shared.registry.as_deref() else {
        return;
    };
    let served = || -> bool {
        let Ok(brokers) = registry.brokers() else {
            return false;
        };
        grown.iter().all(|(placement, from)| {
            (*from..placement.brokers.len()).all(|p| {
                let leader = &placement.brokers[p];
                // A broker that does not hold the topic open opens it
                // whole when asked for it.
                let listed = brokers.iter().find(|b| &b.id == leader);
                let held = listed.and_then(|b| b.topics.get(&placement.topic));
                held.is_none_or(|held| held.contains(&(p as u32)))
            })
        })
    };
    while !grown.is_empty() && Instant::now() < deadline && !shared.stopping() && !served() {
        std::thread::sleep(Duration::from_millis(20));
    }
}
