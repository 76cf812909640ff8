//! The topic and cluster admin APIs on the wire: CreateTopics and
//! DescribeCluster ([`crate::kafka::admin_topics`]); the configs APIs are
//! in [`super::configs_admin`].
//!
//! | request | needs |
//! |---|---|
//! | CreateTopics | create on the cluster or on the topic |
//! | DescribeCluster | nothing (as Metadata) |
//!
//! A topic created with configs has them stored in the registry
//! ([`crate::coord::topic_config`]) before it is placed, so that every
//! broker opens its partitions with them; a config klog does not set per
//! topic, or a value out of range, refuses the topic (INVALID_CONFIG,
//! saying why).

use super::access::Access;
use super::configs_common::topic_configs;
use super::metadata::metadata;
use super::Kafka;
use crate::broker::shared::{error_code, Shared};
use crate::coord::acl::{Operation, ResourceType, CLUSTER};
use crate::coord::topic_config::{self, TopicConfig};
use crate::kafka::admin_topics::*;
use crate::kafka::{self};

/// CreateTopics: each topic's result, in order.
pub(super) fn create(
    shared: &Shared,
    access: &Access<'_>,
    r: &CreateTopicsRequest<'_>,
) -> CreateTopicsResponse {
    let mut named: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for t in &r.topics {
        *named.entry(t.name).or_default() += 1;
    }
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let outcome = if named.get(t.name).is_some_and(|n| *n > 1) {
                Err((
                    kafka::INVALID_REQUEST,
                    format!("topic {:?} is named more than once", t.name),
                ))
            } else {
                create_one(shared, access, t, r.validate_only)
            };
            match outcome {
                Ok((partitions, rf, overrides)) => CreatableTopicResult {
                    name: t.name.into(),
                    error_code: kafka::NONE,
                    error_message: None,
                    num_partitions: partitions as i32,
                    replication_factor: rf as i16,
                    configs: Some(created_configs(shared, &overrides)),
                },
                Err((error_code, message)) => CreatableTopicResult {
                    name: t.name.into(),
                    error_code,
                    error_message: Some(message),
                    num_partitions: -1,
                    replication_factor: -1,
                    configs: None,
                },
            }
        })
        .collect();
    CreateTopicsResponse {
        throttle_time_ms: 0,
        topics,
    }
}

/// The configs of a created topic, as CreateTopics v5+ answers them.
fn created_configs(shared: &Shared, overrides: &TopicConfig) -> Vec<CreatableTopicConfigs> {
    topic_configs(shared, overrides)
        .into_iter()
        .map(|shown| CreatableTopicConfigs {
            name: shown.name.into(),
            value: Some(shown.value),
            read_only: shown.read_only,
            config_source: shown.source,
            is_sensitive: false,
        })
        .collect()
}

/// A topic's configs asked for, checked.
fn asked_configs(shared: &Shared, t: &CreatableTopic<'_>) -> Result<TopicConfig, (i16, String)> {
    let mut overrides = TopicConfig::new();
    let mut names = std::collections::HashSet::new();
    for c in &t.configs {
        if !names.insert(c.name) {
            let why = format!("config {} is given twice", c.name);
            return Err((kafka::INVALID_REQUEST, why));
        }
        // A null value asks for the broker's.
        let checked = match c.value {
            Some(value) => overrides.set(c.name, value),
            None => overrides.remove(c.name),
        };
        checked.map_err(|why| (kafka::INVALID_CONFIG, why))?;
    }
    let (base, base_min) = shared.base_config();
    let (log, _) = overrides.apply(&base, base_min);
    log.validate()
        .map_err(|e| (kafka::INVALID_CONFIG, e.to_string()))?;
    if !overrides.is_empty() && shared.registry.is_none() {
        let why = "a topic's configs live in the registry, and this broker has none \
                   (start it with --registry): every topic has the broker's";
        return Err((kafka::INVALID_CONFIG, why.into()));
    }
    Ok(overrides)
}

/// Checks and (unless `validate_only`) creates one topic: its partition
/// count, replication factor and configs, or the error and why.
fn create_one(
    shared: &Shared,
    access: &Access<'_>,
    t: &CreatableTopic<'_>,
    validate_only: bool,
) -> Result<(u32, u32, TopicConfig), (i16, String)> {
    let name = t.name;
    let creates = access.allows(Operation::Create, ResourceType::Cluster, CLUSTER)
        || access.allows(Operation::Create, ResourceType::Topic, name);
    if !creates {
        let why = format!("not allowed to create topic {name:?}");
        return Err((kafka::TOPIC_AUTHORIZATION_FAILED, why));
    }
    if let Err(e) = crate::storage::store::validate_topic(name) {
        return Err((kafka::INVALID_TOPIC_EXCEPTION, e.to_string()));
    }
    exists(shared, name)?;
    let (partitions, rf) = counts(shared, t)?;
    if !t.assignments.is_empty() {
        let why = "klog places replicas itself: manual replica assignments are not supported";
        return Err((kafka::INVALID_REPLICA_ASSIGNMENT, why.into()));
    }
    let overrides = asked_configs(shared, t)?;
    if validate_only {
        return Ok((partitions, rf, overrides));
    }
    let refused = |e: crate::error::Error| match e {
        // As Kafka answers a topic marked for deletion.
        crate::error::Error::TopicDeleting { .. } => (kafka::TOPIC_ALREADY_EXISTS, e.to_string()),
        e => (super::kafka_code(error_code(&e)), e.to_string()),
    };
    if let Some(registry) = shared.registry.as_deref() {
        // Stored before the topic is placed, as Kafka did in ZooKeeper, so
        // that every broker opens it with them (one left by a topic not
        // created after all is replaced by the next creation's).
        let stored = topic_config::replace(registry, name, &mut |c| {
            *c = overrides.clone();
            Ok(())
        });
        stored
            .map_err(refused)?
            .map_err(|why| (kafka::INVALID_CONFIG, why))?;
    }
    match shared.create_topic_replicated(name, partitions, rf) {
        Ok((_, true)) => Err((
            kafka::TOPIC_ALREADY_EXISTS,
            format!("topic {name:?} exists"),
        )),
        Ok((count, false)) => Ok((count, rf, overrides)),
        Err(e) => {
            // Not created: its configs must not wait for the next topic of
            // the name (an auto-created one would take them).
            if let Some(registry) = shared.registry.as_deref() {
                if let Err(undo) = registry.remove_config(topic_config::KIND, name) {
                    shared.log(format_args!(
                        "cannot remove the configs of topic {name}: {undo}"
                    ));
                }
            }
            Err(refused(e))
        }
    }
}

/// TOPIC_ALREADY_EXISTS for a topic that exists, or is being deleted (as
/// Kafka answers a topic marked for deletion).
fn exists(shared: &Shared, name: &str) -> Result<(), (i16, String)> {
    if shared.topic_exists(name) {
        return Err((
            kafka::TOPIC_ALREADY_EXISTS,
            format!("topic {name:?} exists"),
        ));
    }
    let Some(registry) = shared.registry.as_deref() else {
        return Ok(());
    };
    match crate::coord::topic_delete::get(registry, name) {
        Ok(None) => Ok(()),
        Ok(Some(d)) => {
            let brokers = d.brokers.into_iter().collect::<Vec<_>>().join(", ");
            let e = crate::error::Error::TopicDeleting {
                topic: name.into(),
                brokers,
            };
            Err((kafka::TOPIC_ALREADY_EXISTS, e.to_string()))
        }
        // A marker that does not parse: a deletion nobody finishes.
        Err(e) => Err((kafka::TOPIC_ALREADY_EXISTS, e.to_string())),
    }
}

/// The partition count and replication factor of a topic to create (-1:
/// the broker's), checked against the live brokers.
fn counts(shared: &Shared, t: &CreatableTopic<'_>) -> Result<(u32, u32), (i16, String)> {
    let c = &shared.config;
    let partitions = match t.num_partitions {
        -1 => c.partitions_default,
        n if (1..=crate::limits::PARTITIONS_MAX as i32).contains(&n) => n as u32,
        n => {
            let max = crate::limits::PARTITIONS_MAX;
            let why = format!("{n} partitions: between 1 and {max}");
            return Err((kafka::INVALID_PARTITIONS, why));
        }
    };
    let rf = match t.replication_factor {
        -1 => c.replication_factor,
        n if n >= 1 => n as u32,
        n => {
            return Err((
                kafka::INVALID_REPLICATION_FACTOR,
                format!("{n} replicas: at least 1"),
            ))
        }
    };
    let live = match &shared.registry {
        Some(registry) => registry.brokers().map_or(0, |b| b.len() as u32),
        None => 1,
    };
    if rf > live {
        let brokers = crate::human::count(u64::from(live), "live broker");
        let why = format!("{rf} replicas of each partition, and {brokers} to hold them");
        return Err((kafka::INVALID_REPLICATION_FACTOR, why));
    }
    Ok((partitions, rf))
}

/// DescribeCluster: the brokers Metadata lists.
pub(super) fn describe_cluster(
    shared: &Shared,
    kafka: &Kafka,
    access: &Access<'_>,
) -> DescribeClusterResponse {
    let cluster = metadata(shared, kafka, Some(Vec::new()), (false, *access));
    DescribeClusterResponse {
        throttle_time_ms: 0,
        error_code: kafka::NONE,
        error_message: None,
        endpoint_type: 1,
        cluster_id: "klog".into(),
        controller_id: cluster.controller,
        brokers: cluster
            .brokers
            .into_iter()
            .map(|b| DescribeClusterBroker {
                broker_id: b.node_id,
                host: b.host,
                port: b.port,
                rack: None,
            })
            .collect(),
        cluster_authorized_operations: i32::MIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::testing::shared;

    fn topic(name: &str) -> CreatableTopic<'_> {
        CreatableTopic {
            name,
            num_partitions: 2,
            replication_factor: -1,
            assignments: Vec::new(),
            configs: Vec::new(),
        }
    }

    /// A topic named twice in one request is refused, both times, and
    /// the others are created; a check that takes a set, not a scan of
    /// the request for each topic (found by review: 80,000 names took
    /// two minutes).
    #[test]
    fn a_topic_named_twice_is_refused_and_the_others_are_created() {
        let (_sim, shared) = shared();
        let access = Access::new(&shared, None);
        let request = CreateTopicsRequest {
            topics: vec![topic("a"), topic("b"), topic("a")],
            timeout_ms: 1000,
            validate_only: false,
        };
        let answer = create(&shared, &access, &request);
        let codes: Vec<i16> = answer.topics.iter().map(|t| t.error_code).collect();
        let twice = kafka::INVALID_REQUEST;
        assert_eq!(codes, [twice, kafka::NONE, twice]);
        assert!(shared.topic_exists("b") && !shared.topic_exists("a"));
        let many: Vec<String> = (0..50_000).map(|i| format!("bad!{i}")).collect();
        let request = CreateTopicsRequest {
            topics: many.iter().map(|n| topic(n)).collect(),
            timeout_ms: 1000,
            validate_only: true,
        };
        let answer = create(&shared, &access, &request);
        assert!(answer
            .topics
            .iter()
            .all(|t| t.error_code == kafka::INVALID_TOPIC_EXCEPTION));
        // A validate-only create is judged as a create would be.
        let mut huge = topic("huge");
        huge.num_partitions = i32::MAX;
        let request = CreateTopicsRequest {
            topics: vec![huge],
            timeout_ms: 1000,
            validate_only: true,
        };
        let answer = create(&shared, &access, &request);
        assert_eq!(answer.topics[0].error_code, kafka::INVALID_PARTITIONS);
    }
}
