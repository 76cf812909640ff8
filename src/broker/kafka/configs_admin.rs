//! The configs APIs on the wire: DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs ([`crate::kafka::admin_topics`]).
//!
//! | request | needs |
//! |---|---|
//! | DescribeConfigs | describe on the topic; on the cluster for a broker |
//! | AlterConfigs, IncrementalAlterConfigs | alter on the topic (Kafka's `AlterConfigs` operation); on the cluster for a broker |
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
//! broker's topic-level defaults are set at runtime too, for the cluster
//! or one broker ([`super::configs_broker`]); its other configs are its
//! command line.
//!
//! A request names at most [`RESOURCES_MAX`] resources (each costs a
//! registry read or write, and a DescribeConfigs answer a dozen configs);
//! the others are answered `INVALID_REQUEST`.

use super::access::Access;
use super::configs_common::{refused, topic_configs, Edit, Mode, Shown};
use super::Kafka;
use crate::broker::shared::Shared;
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
            // The broker's under them, as stored now.
            crate::broker::topic_configs::refresh_broker(shared).map_err(refused)?;
            Ok(topic_configs(shared, &overrides))
        }
        config::BROKER => {
            if !access.allows(Operation::Describe, ResourceType::Cluster, CLUSTER) {
                let why = "not allowed to describe the cluster".to_string();
                return Err((kafka::CLUSTER_AUTHORIZATION_FAILED, why));
            }
            // As stored now: one that does not parse says so.
            crate::broker::topic_configs::refresh_broker(shared).map_err(refused)?;
            if name.is_empty() {
                return Ok(super::configs_broker::shown_default(shared));
            }
            if name != kafka.node_id.to_string() {
                let why = format!("this is broker {}, not {name}: ask that one", kafka.node_id);
                return Err((kafka::INVALID_REQUEST, why));
            }
            Ok(super::configs_broker::shown(shared, kafka))
        }
        other => {
            let why = format!("klog describes the configs of topics (2) and brokers (4), not of resource type {other}");
            Err((kafka::INVALID_REQUEST, why))
        }
    }
}

/// Checks and (unless `validate_only`) makes one resource's change: the
/// resource's answer.
fn alter_one(
    shared: &Shared,
    access: &Access<'_>,
    (kind, name): (i8, &str),
    (mode, index): (Mode, usize),
    edit: Edit<'_>,
) -> AlterConfigsResourceResponse {
    let outcome = match index < RESOURCES_MAX {
        true => alter_topic(shared, access, (kind, name), mode, edit),
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
    mode: Mode,
    edit: Edit<'_>,
) -> Result<(), (i16, String)> {
    match kind {
        config::TOPIC => {}
        config::BROKER => {
            return super::configs_broker::alter(shared, access, name, mode, edit);
        }
        other => {
            let why =
                format!("klog changes the configs of topics (2) and brokers (4), not of resource type {other}");
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
    let (base, base_min) = shared.base_config();
    let mut checked = |config: &mut TopicConfig| {
        edit(config)?;
        // Checked with this broker's own configs under them.
        let (log, _) = config.apply(&base, base_min);
        log.validate().map_err(|e| e.to_string())
    };
    let outcome = if mode.validate_only {
        let mut config = mode.start(topic_config::read(registry, name))?;
        checked(&mut config)
    } else {
        let store = match mode.replaces {
            true => topic_config::replace,
            false => topic_config::change,
        };
        store(registry, name, &mut checked)
            .map_err(refused)?
            .map(|_| ())
    };
    outcome.map_err(|why| (kafka::INVALID_CONFIG, why))?;
    if !mode.validate_only {
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
    (keys, mode): (Vec<(i8, &str)>, Mode),
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
            alter_one(shared, access, key, (mode, i), &mut one)
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
        let kind = r.resources[i].resource_type;
        for c in &r.resources[i].configs {
            let name = config_name(kind, c.name)?;
            match c.value {
                Some(value) => next.set(name, value)?,
                None => next.remove(name)?,
            }
        }
        *config = next;
        Ok(())
    };
    AlterConfigsResponse {
        throttle_time_ms: 0,
        responses: alter_each(shared, access, (keys, mode(r.validate_only, true)), &edit),
    }
}

/// How a change is made ([`Mode`]).
fn mode(validate_only: bool, replaces: bool) -> Mode {
    Mode {
        validate_only,
        replaces,
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
        let kind = r.resources[i].resource_type;
        for c in &r.resources[i].configs {
            if !names.insert(c.name) {
                return Err(format!("config {} is changed twice", c.name));
            }
            apply_op(config, config_name(kind, c.name)?, c)?;
        }
        Ok(())
    };
    IncrementalAlterConfigsResponse {
        throttle_time_ms: 0,
        responses: alter_each(shared, access, (keys, mode(r.validate_only, false)), &edit),
    }
}

/// The topic config a request's config `name` of a resource of `kind`
/// changes: the name itself for a topic, the topic config a broker's is
/// the default of ([`crate::coord::broker_config`]) for a broker.
fn config_name(kind: i8, name: &str) -> Result<&str, String> {
    if kind != config::BROKER {
        return Ok(name);
    }
    crate::coord::broker_config::topic_name(name).ok_or_else(|| {
        let settable: Vec<&str> = (crate::coord::broker_config::NAMES.iter())
            .map(|(b, _)| *b)
            .collect();
        format!(
            "{name} is not set at runtime: a broker's other configs are its command line \
             (klog-broker --help); these are: {}",
            settable.join(", ")
        )
    })
}

/// One change of IncrementalAlterConfigs
/// (`name`: the topic config it changes).
fn apply_op(config: &mut TopicConfig, name: &str, c: &AlterableConfig<'_>) -> Result<(), String> {
    let value = || c.value.ok_or_else(|| format!("{} with no value", c.name));
    match c.config_operation {
        config::SET => config.set(name, value()?),
        config::DELETE => config.remove(name),
        op @ (config::APPEND | config::SUBTRACT) => {
            let is_list = topic_config::SETTABLE.contains(&(name, Type::List));
            if !is_list {
                return Err(format!(
                    "{} is not a list: APPEND and SUBTRACT change lists",
                    c.name
                ));
            }
            let now = config.get(name).unwrap_or("delete").to_string();
            let mut items: Vec<&str> = now.split(',').map(str::trim).collect();
            for item in value()?.split(',').map(str::trim) {
                items.retain(|i| *i != item);
                if op == config::APPEND {
                    items.push(item);
                }
            }
            config.set(name, &items.join(","))
        }
        other => Err(format!(
            "config operation {other}: klog knows SET (0), DELETE (1), APPEND (2) and SUBTRACT (3)"
        )),
    }
}
