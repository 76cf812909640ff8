//! Per-topic configs on a broker ([`crate::coord::topic_config`]): read
//! from the registry when a topic opens here, and again every [`RELOAD`],
//! so that a change made through any broker (AlterConfigs,
//! IncrementalAlterConfigs) counts on every broker that holds the topic
//! within about a second, without a restart. A topic's partitions take
//! it at once: retention at the next check, the segment size and age at
//! the next append, `min.insync.replicas` and `max.message.bytes` at the
//! next produce.
//!
//! A registry that cannot be read, or an entry that does not parse,
//! leaves each topic with the configs it had (said in the log, once per
//! change of the reason).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::shared::Shared;
use crate::coord::topic_config;

/// How often a broker reads its topics' configs again.
pub(super) const RELOAD: Duration = Duration::from_secs(1);

/// Reads `topic`'s overrides from the registry and, if they changed,
/// applies them to its partitions here: whether they changed, or the
/// error that kept the old ones.
pub(super) fn refresh(shared: &Shared, topic: &str) -> crate::error::Result<bool> {
    let Some(registry) = shared.registry.as_deref() else {
        return Ok(false);
    };
    let config = topic_config::read(registry, topic)?;
    if !shared.topic_configs.set(topic, config.clone()) {
        return Ok(false);
    }
    let c = &shared.config;
    let (log, min_insync) = config.apply(&c.log, c.min_insync_replicas);
    let parts = shared.read_topics().get(topic).cloned().unwrap_or_default();
    for p in parts.into_iter().flatten() {
        let mut l = p.lock();
        if let Err(e) = l.set_policy(&log) {
            // Checked when stored: a broker whose own flags clash with them.
            shared.log(format_args!(
                "{}-{}: keeps its configs: {e}",
                p.topic, p.partition
            ));
            continue;
        }
        p.record_bytes_max
            .store(l.config().record_bytes_max, Ordering::Relaxed);
        p.min_insync.store(min_insync, Ordering::Relaxed);
    }
    let shown: Vec<String> = (config.overrides().iter())
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    let shown = if shown.is_empty() {
        "the broker's".to_string()
    } else {
        shown.join(", ")
    };
    shared.log(format_args!("topic {topic} now has configs {shown}"));
    Ok(true)
}

/// Reads every open topic's configs every [`RELOAD`] until the broker
/// stops (with a registry), and deletes the topics marked for deletion
/// here ([`super::topic_delete`]).
pub(super) fn reload(shared: &Shared) {
    if shared.registry.is_none() {
        return;
    }
    let mut said: HashMap<String, String> = HashMap::new();
    let mut deleting_said = String::new();
    while !shared.stopping() {
        let deleted = super::topic_delete::round(shared).map_err(|e| e.to_string());
        let why = deleted.err().unwrap_or_default();
        if !why.is_empty() && why != deleting_said {
            shared.log(format_args!("cannot delete a topic: {why}"));
        }
        deleting_said = why;
        let topics: Vec<String> = shared.read_topics().keys().cloned().collect();
        for topic in topics {
            match refresh(shared, &topic) {
                Ok(_) => {
                    said.remove(&topic);
                }
                Err(e) => {
                    let why = e.to_string();
                    if said.get(&topic) != Some(&why) {
                        shared.log(format_args!("topic {topic} keeps its configs: {why}"));
                        said.insert(topic, why);
                    }
                }
            }
        }
        let deadline = Instant::now() + RELOAD;
        while !shared.stopping() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
