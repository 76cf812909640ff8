//! The topic and cluster admin APIs on the wire: CreateTopics,
//! DescribeConfigs and DescribeCluster ([`crate::kafka::admin_topics`]).
//!
//! | request | needs |
//! |---|---|
//! | CreateTopics | create on the cluster or on the topic |
//! | DescribeConfigs | describe on the topic; on the cluster for a broker |
//! | DescribeCluster | nothing (as Metadata) |
//!
//! A topic's configs are the broker's (its command line): klog has no
//! per-topic configs yet, so CreateTopics refuses a topic with configs
//! (INVALID_CONFIG, saying what the broker applies) and DescribeConfigs
//! answers every config read-only, from `STATIC_BROKER_CONFIG`.

use super::access::Access;
use super::metadata::metadata;
use super::Kafka;
use crate::broker::shared::{error_code, Shared};
use crate::coord::acl::{Operation, ResourceType, CLUSTER};
use crate::kafka::admin_topics::*;
use crate::kafka::{self};

/// A config as klog has it: name, value, type ([`config`]).
type Config = (&'static str, String, i8);

/// The configs every topic has: the broker's.
fn topic_configs(shared: &Shared) -> Vec<Config> {
    let c = &shared.config;
    let log = &c.log;
    let long = |v: Option<u64>| v.map_or(i64::MAX, |v| v.min(i64::MAX as u64) as i64);
    vec![
        ("cleanup.policy", "delete".into(), config::STRING),
        ("compression.type", "producer".into(), config::STRING),
        (
            "retention.ms",
            log.retention_ms.map_or(-1, |v| long(Some(v))).to_string(),
            config::LONG,
        ),
        (
            "retention.bytes",
            log.retention_bytes
                .map_or(-1, |v| long(Some(v)))
                .to_string(),
            config::LONG,
        ),
        ("segment.bytes", log.segment_bytes.to_string(), config::INT),
        (
            "segment.ms",
            long(log.segment_age_ms).to_string(),
            config::LONG,
        ),
        (
            "segment.index.bytes",
            log.index_bytes_max.to_string(),
            config::INT,
        ),
        (
            "index.interval.bytes",
            log.index_interval_bytes.to_string(),
            config::INT,
        ),
        (
            "max.message.bytes",
            log.record_bytes_max.to_string(),
            config::INT,
        ),
        (
            "min.insync.replicas",
            c.min_insync_replicas.to_string(),
            config::INT,
        ),
        (
            "flush.messages",
            long(c.flush_messages).to_string(),
            config::LONG,
        ),
        (
            "flush.ms",
            long(c.flush_interval_ms).to_string(),
            config::LONG,
        ),
        (
            "message.timestamp.type",
            "CreateTime".into(),
            config::STRING,
        ),
    ]
}

/// The configs of this broker.
fn broker_configs(shared: &Shared, kafka: &Kafka) -> Vec<Config> {
    let c = &shared.config;
    let (host, port) = &kafka.advertised;
    let mut configs = vec![
        ("broker.id", kafka.node_id.to_string(), config::INT),
        (
            "advertised.listeners",
            format!("PLAINTEXT://{host}:{port}"),
            config::STRING,
        ),
        (
            "num.partitions",
            c.partitions_default.to_string(),
            config::INT,
        ),
        (
            "default.replication.factor",
            c.replication_factor.to_string(),
            config::INT,
        ),
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            config::BOOLEAN,
        ),
        ("log.dirs", c.data_dir.display().to_string(), config::STRING),
    ];
    // A topic config's broker-wide name.
    for (name, value, kind) in topic_configs(shared) {
        let broker_name = match name {
            "retention.ms" => "log.retention.ms",
            "retention.bytes" => "log.retention.bytes",
            "segment.bytes" => "log.segment.bytes",
            "segment.ms" => "log.roll.ms",
            "max.message.bytes" => "message.max.bytes",
            "min.insync.replicas" => "min.insync.replicas",
            "cleanup.policy" => "log.cleanup.policy",
            _ => continue,
        };
        configs.push((broker_name, value, kind));
    }
    configs
}

/// The configs of a created topic, as CreateTopics v5+ answers them.
fn created_configs(shared: &Shared) -> Vec<CreatableTopicConfigs> {
    topic_configs(shared)
        .into_iter()
        .map(|(name, value, _)| CreatableTopicConfigs {
            name: name.into(),
            value: Some(value),
            read_only: true,
            config_source: config::STATIC_BROKER_CONFIG,
            is_sensitive: false,
        })
        .collect()
}

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
                Ok((partitions, rf)) => CreatableTopicResult {
                    name: t.name.into(),
                    error_code: kafka::NONE,
                    error_message: None,
                    num_partitions: partitions as i32,
                    replication_factor: rf as i16,
                    configs: Some(created_configs(shared)),
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

/// Checks and (unless `validate_only`) creates one topic: its partition
/// count and replication factor, or the error and why.
fn create_one(
    shared: &Shared,
    access: &Access<'_>,
    t: &CreatableTopic<'_>,
    validate_only: bool,
) -> Result<(u32, u32), (i16, String)> {
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
    let (partitions, rf) = counts(shared, t)?;
    if !t.assignments.is_empty() {
        let why = "klog places replicas itself: manual replica assignments are not supported";
        return Err((kafka::INVALID_REPLICA_ASSIGNMENT, why.into()));
    }
    if let Some(config) = t.configs.first() {
        let why = format!(
            "klog has no per-topic configs yet ({} given): every topic has the broker's, \
             which DescribeConfigs shows",
            config.name
        );
        return Err((kafka::INVALID_CONFIG, why));
    }
    if shared.topic_exists(name) {
        return Err((
            kafka::TOPIC_ALREADY_EXISTS,
            format!("topic {name:?} exists"),
        ));
    }
    if validate_only {
        return Ok((partitions, rf));
    }
    match shared.create_topic_replicated(name, partitions, rf) {
        Ok((_, true)) => Err((
            kafka::TOPIC_ALREADY_EXISTS,
            format!("topic {name:?} exists"),
        )),
        Ok((count, false)) => Ok((count, rf)),
        Err(e) => Err((super::kafka_code(error_code(&e)), e.to_string())),
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

/// DescribeConfigs: each resource's configs, in order.
pub(super) fn describe_configs(
    shared: &Shared,
    kafka: &Kafka,
    access: &Access<'_>,
    r: &DescribeConfigsRequest<'_>,
    version: i16,
) -> DescribeConfigsResponse {
    let results = r
        .resources
        .iter()
        .map(|res| {
            let configs = resource_configs(shared, kafka, access, res);
            let (error_code, error_message, configs) = match configs {
                Ok(configs) => (kafka::NONE, None, configs),
                Err((code, why)) => (code, Some(why), Vec::new()),
            };
            let wanted = |name: &str| {
                res.configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.contains(&name))
            };
            DescribeConfigsResult {
                error_code,
                error_message,
                resource_type: res.resource_type,
                resource_name: res.resource_name.into(),
                configs: configs
                    .into_iter()
                    .filter(|(name, _, _)| wanted(name))
                    .map(|(name, value, kind)| DescribeConfigsResourceResult {
                        name: name.into(),
                        value: Some(value),
                        read_only: true,
                        is_default: false,
                        config_source: config::STATIC_BROKER_CONFIG,
                        is_sensitive: false,
                        synonyms: Vec::new(),
                        config_type: if version >= 3 { kind } else { 0 },
                        documentation: None,
                    })
                    .collect(),
            }
        })
        .collect();
    DescribeConfigsResponse {
        throttle_time_ms: 0,
        results,
    }
}

/// The configs of one resource, or the error and why.
fn resource_configs(
    shared: &Shared,
    kafka: &Kafka,
    access: &Access<'_>,
    res: &DescribeConfigsResource<'_>,
) -> Result<Vec<Config>, (i16, String)> {
    let name = res.resource_name;
    match res.resource_type {
        config::TOPIC => {
            if let Some(denied) = access.topic(Operation::Describe, name) {
                return Err((denied, format!("not allowed to describe topic {name:?}")));
            }
            if !shared.topic_exists(name) {
                let why = format!("topic {name:?} does not exist");
                return Err((kafka::UNKNOWN_TOPIC_OR_PARTITION, why));
            }
            Ok(topic_configs(shared))
        }
        config::BROKER => {
            if !access.allows(Operation::Describe, ResourceType::Cluster, CLUSTER) {
                let why = "not allowed to describe the cluster".to_string();
                return Err((kafka::CLUSTER_AUTHORIZATION_FAILED, why));
            }
            if !name.is_empty() && name != kafka.node_id.to_string() {
                let why = format!("this is broker {}, not {name}: ask that one", kafka.node_id);
                return Err((kafka::INVALID_REQUEST, why));
            }
            Ok(broker_configs(shared, kafka))
        }
        other => {
            let why = format!("klog describes the configs of topics (2) and brokers (4), not of resource type {other}");
            Err((kafka::INVALID_REQUEST, why))
        }
    }
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
