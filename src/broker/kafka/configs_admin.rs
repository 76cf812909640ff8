//! The configs APIs on the wire: DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs ([`crate::kafka::admin_topics`]).
//!
//! | request | needs |
//! |---|---|
//! | DescribeConfigs | describe on the topic; on the cluster for a broker |
//! | AlterConfigs, IncrementalAlterConfigs | alter on the topic (Kafka's `AlterConfigs` operation) |
//!
//! A topic's configs are the broker's command line with the topic's own
//! overrides, which live in the registry
//! ([`crate::coord::topic_config`]): DescribeConfigs reads them from there
//! (a change made through any broker shows at once), marks each override
//! `DYNAMIC_TOPIC_CONFIG`, and each config only the broker sets read-only.
//! A change is stored in the registry by compare-and-set, taken by this
//! broker before it answers, and by the others within a second. AlterConfigs
//! replaces a topic's overrides with those it names (Kafka's rule: any
//! other goes back to the broker's value); IncrementalAlterConfigs sets,
//! deletes, appends to or subtracts from one config at a time. A
//! broker's own configs are its command line: changing them is refused.
//!
//! A request names at most [`RESOURCES_MAX`] resources (each costs a
//! registry read or write, and a DescribeConfigs answer a dozen configs);
//! the others are answered `INVALID_REQUEST`.

use super::access::Access;
use super::Kafka;
use crate::broker::shared::{error_code, Shared};
use crate::coord::acl::{Operation, ResourceType, CLUSTER};
use crate::coord::topic_config::{self, TopicConfig, Type};
use crate::kafka::admin_topics::*;
use crate::kafka::{self};

/// Resources one request may name.
pub(super) const RESOURCES_MAX: usize = 1000;

/// Why a resource past [`RESOURCES_MAX`] is refused.
fn too_many() -> (i16, String) {
    let why = format!("a request names at most {RESOURCES_MAX} resources");
    (kafka::INVALID_REQUEST, why)
}

/// A config as DescribeConfigs shows it.
pub(super) struct Shown {
    pub(super) name: &'static str,
    pub(super) value: String,
    kind: i8,
    pub(super) source: i8,
    pub(super) read_only: bool,
}

/// The configs of a topic with `overrides` on this broker.
pub(super) fn topic_configs(shared: &Shared, overrides: &TopicConfig) -> Vec<Shown> {
    let c = &shared.config;
    let (log, min_insync) = overrides.apply(&c.log, c.min_insync_replicas);
    let long = |v: Option<u64>| v.map_or(-1, |v| v.min(i64::MAX as u64) as i64);
    let forever = |v: Option<u64>| v.map_or(i64::MAX, |v| v.min(i64::MAX as u64) as i64);
    let listed = [
        ("cleanup.policy", "delete".into()),
        ("compression.type", "producer".into()),
        ("retention.ms", long(log.retention_ms).to_string()),
        ("retention.bytes", long(log.retention_bytes).to_string()),
        ("segment.bytes", log.segment_bytes.to_string()),
        ("segment.ms", forever(log.segment_age_ms).to_string()),
        ("segment.index.bytes", log.index_bytes_max.to_string()),
        ("index.interval.bytes", log.index_interval_bytes.to_string()),
        ("max.message.bytes", log.record_bytes_max.to_string()),
        ("min.insync.replicas", min_insync.to_string()),
        ("flush.messages", forever(c.flush_messages).to_string()),
        ("flush.ms", forever(c.flush_interval_ms).to_string()),
        ("message.timestamp.type", "CreateTime".into()),
    ];
    listed
        .into_iter()
        .map(|(name, value)| {
            let kind = topic_config::SETTABLE.iter().find(|(n, _)| *n == name);
            let kind = match kind.map(|(_, k)| *k) {
                Some(Type::Int) => config::INT,
                Some(Type::Long) => config::LONG,
                Some(Type::List) => config::LIST,
                None if name.starts_with("flush") => config::LONG,
                None if name.contains("bytes") => config::INT,
                None => config::STRING,
            };
            let source = match overrides.get(name) {
                Some(_) => config::DYNAMIC_TOPIC_CONFIG,
                None => config::STATIC_BROKER_CONFIG,
            };
            let read_only = !topic_config::is_settable(name);
            Shown {
                name,
                value,
                kind,
                source,
                read_only,
            }
        })
        .collect()
}

/// The configs of this broker.
fn broker_configs(shared: &Shared, kafka: &Kafka) -> Vec<Shown> {
    let c = &shared.config;
    let (host, port) = &kafka.advertised;
    let own = [
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
    let mut configs: Vec<Shown> = own
        .into_iter()
        .map(|(name, value, kind)| Shown {
            name,
            value,
            kind,
            source: config::STATIC_BROKER_CONFIG,
            read_only: true,
        })
        .collect();
    // A topic config's broker-wide name.
    for mut shown in topic_configs(shared, &TopicConfig::new()) {
        shown.name = match shown.name {
            "retention.ms" => "log.retention.ms",
            "retention.bytes" => "log.retention.bytes",
            "segment.bytes" => "log.segment.bytes",
            "segment.ms" => "log.roll.ms",
            "max.message.bytes" => "message.max.bytes",
            "min.insync.replicas" => "min.insync.replicas",
            "cleanup.policy" => "log.cleanup.policy",
            _ => continue,
        };
        shown.read_only = true;
        configs.push(shown);
    }
    configs
}

/// DescribeConfigs: each resource's configs, in order.
pub(super) fn describe(
    shared: &Shared,
    kafka: &Kafka,
    access: &Access<'_>,
    r: &DescribeConfigsRequest<'_>,
    version: i16,
) -> DescribeConfigsResponse {
    let results = r
        .resources
        .iter()
        .enumerate()
        .map(|(i, res)| {
            let configs = match i < RESOURCES_MAX {
                true => resource_configs(shared, kafka, access, res),
                false => Err(too_many()),
            };
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
                    .filter(|shown| wanted(shown.name))
                    .map(|shown| DescribeConfigsResourceResult {
                        name: shown.name.into(),
                        value: Some(shown.value),
                        read_only: shown.read_only,
                        is_default: false,
                        config_source: shown.source,
                        is_sensitive: false,
                        synonyms: Vec::new(),
                        config_type: if version >= 3 { shown.kind } else { 0 },
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
) -> Result<Vec<Shown>, (i16, String)> {
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
            let overrides = match shared.registry.as_deref() {
                Some(registry) => topic_config::read(registry, name).map_err(refused)?,
                None => TopicConfig::new(),
            };
            Ok(topic_configs(shared, &overrides))
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

/// A registry error as a resource's error code and message.
fn refused(e: crate::error::Error) -> (i16, String) {
    (super::kafka_code(error_code(&e)), e.to_string())
}

/// An edit of a topic's overrides, or why it is refused.
type Edit<'e> = &'e mut dyn FnMut(&mut TopicConfig) -> Result<(), String>;

/// Checks and (unless `validate_only`) makes one resource's change: the
/// resource's answer.
fn alter_one(
    shared: &Shared,
    access: &Access<'_>,
    (kind, name): (i8, &str),
    (validate_only, index): (bool, usize),
    edit: Edit<'_>,
) -> AlterConfigsResourceResponse {
    let outcome = match index < RESOURCES_MAX {
        true => alter_topic(shared, access, (kind, name), validate_only, edit),
        false => Err(too_many()),
    };
    let (error_code, error_message) = match outcome {
        Ok(()) => (kafka::NONE, None),
        Err((code, why)) => (code, Some(why)),
    };
    AlterConfigsResourceResponse {
        error_code,
        error_message,
        resource_type: kind,
        resource_name: name.into(),
    }
}

fn alter_topic(
    shared: &Shared,
    access: &Access<'_>,
    (kind, name): (i8, &str),
    validate_only: bool,
    edit: Edit<'_>,
) -> Result<(), (i16, String)> {
    match kind {
        config::TOPIC => {}
        config::BROKER => {
            if !access.allows(Operation::Alter, ResourceType::Cluster, CLUSTER) {
                let why = "not allowed to alter the cluster".to_string();
                return Err((kafka::CLUSTER_AUTHORIZATION_FAILED, why));
            }
            let why = "a broker's configs are its command line (klog-broker --help); \
                       klog changes topics' configs only";
            return Err((kafka::INVALID_REQUEST, why.into()));
        }
        other => {
            let why =
                format!("klog changes the configs of topics (2), not of resource type {other}");
            return Err((kafka::INVALID_REQUEST, why));
        }
    }
    if let Some(denied) = access.topic(Operation::Alter, name) {
        return Err((denied, format!("not allowed to alter topic {name:?}")));
    }
    if !shared.topic_exists(name) {
        let why = format!("topic {name:?} does not exist");
        return Err((kafka::UNKNOWN_TOPIC_OR_PARTITION, why));
    }
    let Some(registry) = shared.registry.as_deref() else {
        let why = "a topic's configs live in the registry, and this broker has none \
                   (start it with --registry): every topic has the broker's";
        return Err((kafka::INVALID_CONFIG, why.into()));
    };
    let c = &shared.config;
    let mut checked = |config: &mut TopicConfig| {
        edit(config)?;
        // Checked with this broker's own configs under them.
        let (log, _) = config.apply(&c.log, c.min_insync_replicas);
        log.validate().map_err(|e| e.to_string())
    };
    let outcome = if validate_only {
        let mut config = topic_config::read(registry, name).map_err(refused)?;
        checked(&mut config)
    } else {
        let changed = topic_config::change(registry, name, &mut checked).map_err(refused)?;
        changed.map(|_| ())
    };
    outcome.map_err(|why| (kafka::INVALID_CONFIG, why))?;
    if !validate_only {
        // Taken here before the answer; the other brokers reload it.
        if let Err(e) = crate::broker::topic_configs::refresh(shared, name) {
            shared.log(format_args!("topic {name}: {e}"));
        }
    }
    Ok(())
}

/// The same resource named twice in one request: Kafka refuses each.
fn named_twice<'r>(resources: impl Iterator<Item = (i8, &'r str)>) -> Vec<(i8, &'r str)> {
    let mut seen = std::collections::HashMap::new();
    for key in resources {
        *seen.entry(key).or_insert(0) += 1;
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| k)
        .collect()
}

/// A resource named more than once: its answer.
fn twice(kind: i8, name: &str) -> AlterConfigsResourceResponse {
    AlterConfigsResourceResponse {
        error_code: kafka::INVALID_REQUEST,
        error_message: Some(format!("resource {name:?} is named more than once")),
        resource_type: kind,
        resource_name: name.into(),
    }
}

/// Each resource's answer, in order: `edit` changes the overrides of the
/// resource at an index (a resource named twice is refused).
fn alter_each(
    shared: &Shared,
    access: &Access<'_>,
    (keys, validate_only): (Vec<(i8, &str)>, bool),
    edit: &dyn Fn(usize, &mut TopicConfig) -> Result<(), String>,
) -> Vec<AlterConfigsResourceResponse> {
    let twice_named = named_twice(keys.iter().copied());
    keys.iter()
        .enumerate()
        .map(|(i, &key)| {
            if twice_named.contains(&key) {
                return twice(key.0, key.1);
            }
            let mut one = |config: &mut TopicConfig| edit(i, config);
            alter_one(shared, access, key, (validate_only, i), &mut one)
        })
        .collect()
}

/// AlterConfigs: each resource's overrides replaced by those it names.
pub(super) fn alter(
    shared: &Shared,
    access: &Access<'_>,
    r: &AlterConfigsRequest<'_>,
) -> AlterConfigsResponse {
    let keys = (r.resources.iter())
        .map(|res| (res.resource_type, res.resource_name))
        .collect();
    let edit = |i: usize, config: &mut TopicConfig| {
        let mut next = TopicConfig::new();
        for c in &r.resources[i].configs {
            match c.value {
                Some(value) => next.set(c.name, value)?,
                None => next.remove(c.name)?,
            }
        }
        *config = next;
        Ok(())
    };
    AlterConfigsResponse {
        throttle_time_ms: 0,
        responses: alter_each(shared, access, (keys, r.validate_only), &edit),
    }
}

/// IncrementalAlterConfigs: each resource's changes, made together or
/// not at all.
pub(super) fn alter_incrementally(
    shared: &Shared,
    access: &Access<'_>,
    r: &IncrementalAlterConfigsRequest<'_>,
) -> IncrementalAlterConfigsResponse {
    let keys = (r.resources.iter())
        .map(|res| (res.resource_type, res.resource_name))
        .collect();
    let edit = |i: usize, config: &mut TopicConfig| {
        let mut names = std::collections::HashSet::new();
        for c in &r.resources[i].configs {
            if !names.insert(c.name) {
                return Err(format!("config {} is changed twice", c.name));
            }
            apply_op(config, c)?;
        }
        Ok(())
    };
    IncrementalAlterConfigsResponse {
        throttle_time_ms: 0,
        responses: alter_each(shared, access, (keys, r.validate_only), &edit),
    }
}

/// One change of IncrementalAlterConfigs.
fn apply_op(config: &mut TopicConfig, c: &AlterableConfig<'_>) -> Result<(), String> {
    let value = || c.value.ok_or_else(|| format!("{} with no value", c.name));
    match c.config_operation {
        config::SET => config.set(c.name, value()?),
        config::DELETE => config.remove(c.name),
        op @ (config::APPEND | config::SUBTRACT) => {
            let is_list = topic_config::SETTABLE.contains(&(c.name, Type::List));
            if !is_list {
                return Err(format!(
                    "{} is not a list: APPEND and SUBTRACT change lists",
                    c.name
                ));
            }
            let now = config.get(c.name).unwrap_or("delete").to_string();
            let mut items: Vec<&str> = now.split(',').map(str::trim).collect();
            for item in value()?.split(',').map(str::trim) {
                items.retain(|i| *i != item);
                if op == config::APPEND {
                    items.push(item);
                }
            }
            config.set(c.name, &items.join(","))
        }
        other => Err(format!(
            "config operation {other}: klog knows SET (0), DELETE (1), APPEND (2) and SUBTRACT (3)"
        )),
    }
}
