//! A broker's configs on the wire: DescribeConfigs shows them (its
//! command line, and the topic-level defaults set at runtime, marked
//! `DYNAMIC_DEFAULT_BROKER_CONFIG` for the cluster's and
//! `DYNAMIC_BROKER_CONFIG` for its own); AlterConfigs and
//! IncrementalAlterConfigs set those defaults
//! ([`crate::coord::broker_config`]) for the cluster (the resource named
//! "", Kafka's `--entity-default`) or one broker (its node id), which
//! needs alter on the cluster and a registry to keep them in. The broker
//! answering takes a change before it answers; every other broker within
//! a second.

use super::access::Access;
use super::configs_common::{refused, topic_configs, Edit, Mode, Shown};
use super::Kafka;
use crate::broker::shared::Shared;
use crate::coord::acl::{Operation, ResourceType, CLUSTER};
use crate::coord::broker_config;
use crate::coord::topic_config::TopicConfig;
use crate::kafka::admin_topics::config;
use crate::kafka::{self};

/// The configs of this broker.
pub(super) fn shown(shared: &Shared, kafka: &Kafka) -> Vec<Shown> {
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
    // The topic configs a broker sets the defaults of, by their broker
    // names; a topic's own overrides aside.
    for mut shown in topic_configs(shared, &TopicConfig::new()) {
        match broker_config::broker_name(shown.name) {
            Some(name) => shown.name = name,
            None => continue,
        }
        configs.push(shown);
    }
    configs
}

/// The cluster's default (the broker resource named "", as Kafka's
/// `--entity-default --describe` shows it): each config it sets, as last
/// read.
pub(super) fn shown_default(shared: &Shared) -> Vec<Shown> {
    let layers = crate::sync::lock(&shared.broker_configs).clone();
    let default = layers.map(|l| l.default).unwrap_or_default();
    let set = default.overrides().iter();
    set.filter_map(|(topic_name, value)| {
        let name = broker_config::broker_name(topic_name)?;
        let kind = crate::coord::topic_config::SETTABLE
            .iter()
            .find(|(n, _)| n == topic_name);
        Some(Shown {
            name,
            value: value.clone(),
            kind: match kind.map(|(_, k)| *k) {
                Some(crate::coord::topic_config::Type::Long) => config::LONG,
                Some(crate::coord::topic_config::Type::List) => config::LIST,
                _ => config::INT,
            },
            source: config::DYNAMIC_DEFAULT_BROKER_CONFIG,
            read_only: false,
        })
    })
    .collect()
}

/// Checks and (unless `validate_only`) changes the dynamic configs of
/// broker `name` ("" for the cluster's default): Ok, or the error and
/// why.
pub(super) fn alter(
    shared: &Shared,
    access: &Access<'_>,
    name: &str,
    mode: Mode,
    edit: Edit<'_>,
) -> Result<(), (i16, String)> {
    if !access.allows(Operation::Alter, ResourceType::Cluster, CLUSTER) {
        let why = "not allowed to alter the cluster".to_string();
        return Err((kafka::CLUSTER_AUTHORIZATION_FAILED, why));
    }
    let Some(registry) = shared.registry.as_deref() else {
        let why = "a broker's configs set at runtime live in the registry, and this broker has \
                   none (start it with --registry): its configs are its command line";
        return Err((kafka::INVALID_CONFIG, why.into()));
    };
    let entry = entry_of(shared, name)?;
    let c = &shared.config;
    let mut checked = |config: &mut TopicConfig| {
        edit(config)?;
        let (log, _) = config.apply(&c.log, c.min_insync_replicas);
        log.validate().map_err(|e| e.to_string())
    };
    let outcome = if mode.validate_only {
        let mut config = mode.start(broker_config::read(registry, &entry))?;
        checked(&mut config)
    } else {
        let store = match mode.replaces {
            true => broker_config::replace,
            false => broker_config::change,
        };
        store(registry, &entry, &mut checked)
            .map_err(refused)?
            .map(|_| ())
    };
    outcome.map_err(|why| (kafka::INVALID_CONFIG, why))?;
    if !mode.validate_only {
        // Taken here before the answer; the other brokers reload them.
        match super::super::topic_configs::refresh_broker(shared) {
            Ok(_) => super::super::topic_configs::reapply(shared),
            Err(e) => shared.log(format_args!("keeping the broker configs: {e}")),
        }
    }
    Ok(())
}

/// The registry entry of broker resource `name`: the default's for "",
/// a registered broker's node id for its own.
fn entry_of(shared: &Shared, name: &str) -> Result<String, (i16, String)> {
    if name.is_empty() {
        return Ok(broker_config::DEFAULT.to_string());
    }
    let node: i32 = (name.parse().ok())
        .filter(|n: &i32| n.to_string() == name)
        .ok_or_else(|| {
            let why = format!("broker {name:?}: a broker is named by its node id, or \"\" for all");
            (kafka::INVALID_REQUEST, why)
        })?;
    let registry = shared.registry.as_deref().expect("checked");
    let brokers = registry.brokers().map_err(refused)?;
    if !brokers.iter().any(|b| super::node_id(&b.id) == node) {
        let why = format!("no live broker has node id {node}");
        return Err((kafka::INVALID_REQUEST, why));
    }
    Ok(node.to_string())
}
