//! DeleteTopics on the wire ([`crate::kafka::admin_topics`]): each topic
//! needs delete on it. With a registry, a topic is marked for deletion and
//! leaves the registry at once; this broker deletes its copy before it
//! answers, the others within a second ([`crate::coord::topic_delete`]),
//! and the answer waits, up to the request's timeout, for every broker
//! that held the topic to have deleted its copy (`REQUEST_TIMED_OUT`
//! past it, as Kafka answers: the deletion goes on, and the name cannot
//! be created again until it is complete). Without a registry, the
//! broker's copy is deleted before the answer.
//!
//! A request names at most [`NAMED_MAX`] distinct topics (each costs
//! registry reads and writes); the others are answered `INVALID_REQUEST`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::access::Access;
use crate::broker::shared::{error_code, Shared};
use crate::broker::topic_delete;
use crate::coord::acl::Operation;
use crate::coord::topic_delete as marker;
use crate::kafka::admin_topics::*;
use crate::kafka::{self};

/// Distinct topics one request may delete.
pub(super) const NAMED_MAX: usize = 1000;

/// The longest an answer waits for the other brokers.
const WAIT_MAX: Duration = Duration::from_secs(30);

/// DeleteTopics: each topic's deletion, in order.
pub(super) fn delete(
    shared: &Shared,
    access: &Access<'_>,
    r: &DeleteTopicsRequest<'_>,
    version: i16,
) -> DeleteTopicsResponse {
    let asked: Vec<Option<&str>> = if version >= 6 {
        r.topics.iter().map(|t| t.name).collect()
    } else {
        r.topic_names.iter().map(|n| Some(*n)).collect()
    };
    let mut named: HashMap<&str, usize> = HashMap::new();
    for name in asked.iter().flatten() {
        *named.entry(name).or_default() += 1;
    }
    let distinct: Vec<&str> = {
        let mut seen = std::collections::HashSet::new();
        asked
            .iter()
            .flatten()
            .copied()
            .filter(|n| seen.insert(*n))
            .collect()
    };
    let allowed: std::collections::HashSet<&str> =
        distinct.iter().take(NAMED_MAX).copied().collect();
    let mut outcomes: Vec<Result<bool, (i16, String)>> = asked
        .iter()
        .map(|name| match name {
            None => Err((
                kafka::UNKNOWN_TOPIC_ID,
                "klog names topics by name: it has no topic ids".into(),
            )),
            Some(n) if named[n] > 1 => Err((
                kafka::INVALID_REQUEST,
                format!("topic {n:?} is named more than once"),
            )),
            Some(n) if !allowed.contains(n) => Err((
                kafka::INVALID_REQUEST,
                format!("a request deletes at most {NAMED_MAX} topics"),
            )),
            Some(n) => delete_one(shared, access, n),
        })
        .collect();
    let timeout = Duration::from_millis(r.timeout_ms.max(0) as u64).min(WAIT_MAX);
    wait_for_others(shared, &asked, &mut outcomes, Instant::now() + timeout);
    let responses = asked
        .iter()
        .zip(outcomes)
        .map(|(name, outcome)| {
            let (error_code, error_message) = match outcome {
                Ok(_) => (kafka::NONE, None),
                Err((code, why)) => (code, Some(why)),
            };
            DeletableTopicResult {
                name: name.map(str::to_string),
                topic_id: [0; 16],
                error_code,
                error_message,
            }
        })
        .collect();
    DeleteTopicsResponse {
        throttle_time_ms: 0,
        responses,
    }
}

/// Deletes one topic, or says why not: whether the answer waits for other
/// brokers.
fn delete_one(shared: &Shared, access: &Access<'_>, name: &str) -> Result<bool, (i16, String)> {
    if let Some(denied) = access.topic(Operation::Delete, name) {
        return Err((denied, format!("not allowed to delete topic {name:?}")));
    }
    let unknown = || {
        let why = format!("topic {name:?} does not exist");
        (kafka::UNKNOWN_TOPIC_OR_PARTITION, why)
    };
    if crate::storage::store::validate_topic(name).is_err() {
        return Err(unknown());
    }
    if name == crate::coord::offsets_topic::OFFSETS_TOPIC {
        let why = format!("{name} is internal: it holds every group's committed offsets");
        return Err((kafka::POLICY_VIOLATION, why));
    }
    let refused = |e: crate::error::Error| (super::kafka_code(error_code(&e)), e.to_string());
    let Some(registry) = shared.registry.as_deref() else {
        // One deletion at a time: a second of the same topic finds none.
        let _one = crate::sync::lock(&shared.deleting);
        if !shared.topic_exists(name) {
            return Err(unknown());
        }
        topic_delete::delete_here(shared, name).map_err(refused)?;
        shared.log(format_args!("Deleted topic {name}"));
        return Ok(false);
    };
    if marker::mark(registry, name).map_err(refused)?.is_none() {
        return Err(unknown());
    }
    // This broker's copy goes now; the others' within a second.
    if let Err(e) = topic_delete::round(shared) {
        shared.log(format_args!("cannot delete topic {name} here yet: {e}"));
    }
    Ok(true)
}

/// Waits until every marked topic's deletion is complete, or `deadline`:
/// those still going on are answered `REQUEST_TIMED_OUT`, naming the
/// brokers that have not deleted their copy.
fn wait_for_others(
    shared: &Shared,
    asked: &[Option<&str>],
    outcomes: &mut [Result<bool, (i16, String)>],
    deadline: Instant,
) {
    let Some(registry) = shared.registry.as_deref() else {
        return;
    };
    loop {
        let mut waiting = false;
        for (name, outcome) in asked.iter().zip(outcomes.iter_mut()) {
            let (Some(name), Ok(true)) = (name, &*outcome) else {
                continue;
            };
            match marker::get(registry, name) {
                Ok(None) => *outcome = Ok(false),
                Ok(Some(d)) if Instant::now() >= deadline => {
                    let brokers: Vec<String> = d.brokers.into_iter().collect();
                    let why = format!(
                        "topic {name:?} is deleted from the registry, and being deleted from broker(s) {} (each deletes its copy when it runs)",
                        brokers.join(", ")
                    );
                    *outcome = Err((kafka::REQUEST_TIMED_OUT, why));
                }
                Ok(Some(_)) => waiting = true,
                Err(e) => *outcome = Err((super::kafka_code(error_code(&e)), e.to_string())),
            }
        }
        if !waiting || shared.stopping() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
