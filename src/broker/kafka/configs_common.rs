//! What the configs APIs share ([`super::configs_admin`],
//! [`super::configs_broker`]): a config as DescribeConfigs shows it, a
//! topic's configs on this broker, and a change's edit and errors.

use crate::broker::shared::{error_code, Shared};
use crate::coord::topic_config::{self, TopicConfig, Type};
use crate::kafka::admin_topics::config;

/// A config as DescribeConfigs shows it.
pub(super) struct Shown {
    pub(super) name: &'static str,
    pub(super) value: String,
    pub(super) kind: i8,
    pub(super) source: i8,
    pub(super) read_only: bool,
}

/// The configs of a topic with `overrides` on this broker.
pub(super) fn topic_configs(shared: &Shared, overrides: &TopicConfig) -> Vec<Shown> {
    let c = &shared.config;
    let (base, base_min) = shared.base_config();
    let (log, min_insync) = overrides.apply(&base, base_min);
    let layers = crate::sync::lock(&shared.broker_configs).clone();
    let long = |v: Option<u64>| v.map_or(-1, |v| v.min(i64::MAX as u64) as i64);
    let forever = |v: Option<u64>| v.map_or(i64::MAX, |v| v.min(i64::MAX as u64) as i64);
    let listed = [
        ("cleanup.policy", cleanup_policy(&log).into()),
        ("delete.retention.ms", log.delete_retention_ms.to_string()),
        (
            "min.compaction.lag.ms",
            log.min_compaction_lag_ms.to_string(),
        ),
        (
            "min.cleanable.dirty.ratio",
            log.min_cleanable_dirty_ratio.to_string(),
        ),
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
                Some(Type::Double) => config::DOUBLE,
                None if name.starts_with("flush") => config::LONG,
                None if name.contains("bytes") => config::INT,
                None => config::STRING,
            };
            let at_runtime = layers.as_ref().and_then(|l| l.sets(name));
            let source = match (overrides.get(name), at_runtime) {
                (Some(_), _) => config::DYNAMIC_TOPIC_CONFIG,
                (None, Some(true)) => config::DYNAMIC_BROKER_CONFIG,
                (None, Some(false)) => config::DYNAMIC_DEFAULT_BROKER_CONFIG,
                (None, None) => config::STATIC_BROKER_CONFIG,
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

/// A log's `cleanup.policy`, as Kafka names it.
pub(super) fn cleanup_policy(log: &crate::storage::log::LogConfig) -> &'static str {
    match (log.compact, log.delete) {
        (true, true) => "compact,delete",
        (true, false) => "compact",
        _ => "delete",
    }
}

/// A registry error as a resource's error code and message.
pub(super) fn refused(e: crate::error::Error) -> (i16, String) {
    (super::kafka_code(error_code(&e)), e.to_string())
}

/// An edit of a topic's overrides, or why it is refused.
pub(super) type Edit<'e> = &'e mut dyn FnMut(&mut TopicConfig) -> Result<(), String>;

/// How a change is made: checked only or stored, and whether it replaces
/// the whole entry (AlterConfigs; an entry that does not parse is
/// replaced) or edits it (IncrementalAlterConfigs; such an entry refuses
/// it).
#[derive(Debug, Clone, Copy)]
pub(super) struct Mode {
    pub(super) validate_only: bool,
    pub(super) replaces: bool,
}

impl Mode {
    /// The overrides a change checked only starts from: those `read`
    /// found, or none where they do not parse and the change replaces
    /// them.
    pub(super) fn start(
        &self,
        read: crate::error::Result<TopicConfig>,
    ) -> Result<TopicConfig, (i16, String)> {
        match read {
            Ok(config) => Ok(config),
            Err(crate::error::Error::Config(_)) if self.replaces => Ok(TopicConfig::new()),
            Err(e) => Err(refused(e)),
        }
    }
}
