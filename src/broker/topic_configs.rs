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
use crate::coord::broker_config::{self, Layers};
use crate::coord::topic_config;
use crate::storage::log::LogConfig;
use crate::sync::lock;

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
    let changed = shared.topic_configs.set(topic, config.clone());
    // Applied every time, changed or not: a partition opened while the
    // change was read (not yet served) takes it at the next reload.
    apply(shared, topic, &config, changed);
    if !changed {
        return Ok(false);
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

/// Applies `topic`'s overrides `config` (over the broker's, as they are
/// now) to its partitions here; `changed`: says a clash in the log.
fn apply(shared: &Shared, topic: &str, config: &topic_config::TopicConfig, changed: bool) {
    let (base, base_min) = shared.base_config();
    let (log, min_insync) = config.apply(&base, base_min);
    let parts = shared.read_topics().get(topic).cloned().unwrap_or_default();
    for p in parts.into_iter().flatten() {
        let mut l = p.lock();
        if let Err(e) = l.set_policy(&log) {
            // Checked when stored: a broker whose own flags clash with them.
            if changed {
                let (t, n) = (&p.topic, p.partition);
                shared.log(format_args!("{t}-{n}: keeps its configs: {e}"));
            }
            continue;
        }
        p.record_bytes_max
            .store(l.config().record_bytes_max, Ordering::Relaxed);
        p.compacted.store(l.config().compact, Ordering::Relaxed);
        p.min_insync.store(min_insync, Ordering::Relaxed);
    }
}

/// Applies every open topic's configs as last read (a change of the
/// broker's under them), reading nothing: a topic whose were never read
/// takes them at the next reload.
pub(super) fn reapply(shared: &Shared) {
    let topics: Vec<String> = shared.read_topics().keys().cloned().collect();
    for topic in topics {
        if let Some(config) = shared.topic_configs.get(&topic) {
            apply(shared, &topic, &config, false);
        }
    }
}

impl Shared {
    /// The configs of a topic without its own here: the command line's,
    /// with the dynamic broker configs over them
    /// ([`crate::coord::broker_config`]). While those were never read
    /// (with a registry), no segment is old or large enough to go: a
    /// retention set at runtime may be longer than the command line's.
    pub(super) fn base_config(&self) -> (LogConfig, u32) {
        let c = &self.config;
        match &*lock(&self.broker_configs) {
            Some(layers) => layers.apply(&c.log, c.min_insync_replicas),
            None if self.registry.is_some() => {
                let mut log = c.log.clone();
                (log.retention_ms, log.retention_bytes) = (None, None);
                (log, c.min_insync_replicas)
            }
            None => (c.log.clone(), c.min_insync_replicas),
        }
    }
}

/// Reads the dynamic broker configs from the registry (the cluster's
/// default and this broker's own) and keeps them: whether they changed
/// (said in the log), or the error that kept the old ones.
pub(super) fn refresh_broker(shared: &Shared) -> crate::error::Result<bool> {
    let Some(registry) = shared.registry.as_deref() else {
        return Ok(false);
    };
    let node = super::kafka::node_id(&shared.broker_id).to_string();
    let layers = Layers::read(registry, &node)?;
    let before = lock(&shared.broker_configs).replace(layers.clone());
    if before.as_ref() == Some(&layers) {
        return Ok(false);
    }
    if before.is_none() && layers == Layers::default() {
        // None at the first read: nothing to say.
        return Ok(true);
    }
    let shown = |c: &crate::coord::topic_config::TopicConfig| {
        let set: Vec<String> = (c.overrides().iter())
            .map(|(n, v)| format!("{}={v}", broker_config::broker_name(n).unwrap_or(n)))
            .collect();
        match set.is_empty() {
            true => "none".to_string(),
            false => set.join(", "),
        }
    };
    shared.log(format_args!(
        "dynamic broker configs: cluster default {}; this broker's own {}",
        shown(&layers.default),
        shown(&layers.own)
    ));
    Ok(true)
}

/// Reads every open topic's configs every [`RELOAD`] until the broker
/// stops (with a registry), grows the topics whose placement has more
/// partitions ([`super::topic_grow`]), and deletes the topics marked for
/// deletion here ([`super::topic_delete`]).
pub(super) fn reload(shared: &Shared) {
    if shared.registry.is_none() {
        return;
    }
    let mut said: HashMap<String, String> = HashMap::new();
    let mut grow_said: HashMap<String, String> = HashMap::new();
    let mut deleting_said = String::new();
    let mut broker_said = String::new();
    while !shared.stopping() {
        let deleted = super::topic_delete::round(shared).map_err(|e| e.to_string());
        let why = deleted.err().unwrap_or_default();
        if !why.is_empty() && why != deleting_said {
            shared.log(format_args!("cannot delete a topic: {why}"));
        }
        deleting_said = why;
        let why = refresh_broker(shared).err().map(|e| e.to_string());
        let why = why.unwrap_or_default();
        if !why.is_empty() && why != broker_said {
            shared.log(format_args!("keeping the broker configs: {why}"));
        }
        broker_said = why;
        let topics: Vec<String> = shared.read_topics().keys().cloned().collect();
        for topic in topics {
            match shared.grow_as_placed(&topic) {
                Ok(_) => _ = grow_said.remove(&topic),
                Err(e) => {
                    let why = e.to_string();
                    if grow_said.get(&topic) != Some(&why) {
                        shared.log(format_args!("topic {topic}: cannot add partitions: {why}"));
                        grow_said.insert(topic.clone(), why);
                    }
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::shared::Held;
    use crate::coord::mem::MemRegistry;
    use std::sync::Arc;

    /// A broker on a simulated disk, and its registry.
    fn broker() -> (
        Arc<crate::storage::fs::sim::SimFs>,
        Arc<Shared>,
        Arc<dyn crate::coord::Registry>,
    ) {
        let registry: Arc<dyn crate::coord::Registry> = Arc::new(MemRegistry::default());
        let (sim, shared) = crate::broker::testing::shared_in(
            Arc::clone(&registry),
            "broker-test",
            &["broker-test"],
            |_| {},
        );
        (sim, shared, registry)
    }

    /// A change that lands while a topic opens (after the open read the
    /// registry, before its partitions are served) reaches them at the
    /// next reload.
    #[test]
    fn a_change_made_while_a_topic_opens_reaches_its_partitions() {
        let (_sim, shared, registry) = broker();
        let set = |v: &str| {
            topic_config::change(&*registry, "u", &mut |c| c.set("max.message.bytes", v))
                .unwrap()
                .unwrap()
        };
        set("1000");
        shared.store.create_topic("u", 1).unwrap();
        let parts = shared.open_topic("u", &[Held::Single]).unwrap();
        set("5000");
        assert!(refresh(&shared, "u").unwrap(), "the reload saw the change");
        shared.write_topics().insert("u".into(), parts);
        assert!(!refresh(&shared, "u").unwrap(), "no change since");
        let p = shared.read_topics()["u"][0].clone().unwrap();
        assert_eq!(p.record_bytes_max.load(Ordering::Relaxed), 5000);
        assert_eq!(p.lock().config().record_bytes_max, 5000);
    }

    /// A topic whose configs cannot be read when it opens keeps every
    /// segment until they can be: they may keep records longer than the
    /// broker does.
    #[test]
    fn a_topic_whose_configs_cannot_be_read_keeps_every_segment() {
        let (_sim, shared, registry) = broker();
        registry
            .set_config(topic_config::KIND, "k", b"{damaged")
            .unwrap();
        shared.store.create_topic("k", 1).unwrap();
        let parts = shared.open_topic("k", &[Held::Single]).unwrap();
        let p = parts[0].clone().unwrap();
        assert_eq!(p.lock().config().retention_ms, None);
        assert_eq!(p.lock().config().retention_bytes, None);
        shared.write_topics().insert("k".into(), parts);
        assert!(refresh(&shared, "k").is_err());
        assert_eq!(p.lock().config().retention_ms, None, "still unread");
        topic_config::replace(&*registry, "k", &mut |c| c.set("retention.ms", "60000"))
            .unwrap()
            .unwrap();
        assert!(refresh(&shared, "k").unwrap());
        assert_eq!(p.lock().config().retention_ms, Some(60000));
    }

    /// The dynamic broker configs count once read (before, no segment
    /// goes for retention): this broker's own over the cluster's default,
    /// a topic's own over both.
    #[test]
    fn broker_configs_count_once_read_under_a_topics_own() {
        let (_sim, shared, registry) = broker();
        let set = |entry: &str, name: &str, value: &str| {
            broker_config::change(&*registry, entry, &mut |c| c.set(name, value))
                .unwrap()
                .unwrap()
        };
        set(broker_config::DEFAULT, "retention.ms", "60000");
        set(broker_config::DEFAULT, "max.message.bytes", "3000");
        assert_eq!(shared.base_config().0.retention_ms, None, "unread");
        assert!(refresh_broker(&shared).unwrap());
        assert!(!refresh_broker(&shared).unwrap(), "no change since");
        assert_eq!(shared.base_config().0.retention_ms, Some(60000));
        let node = crate::broker::kafka::node_id(&shared.broker_id).to_string();
        set(&node, "max.message.bytes", "2000");
        set("99", "max.message.bytes", "1000");
        shared.store.create_topic("u", 1).unwrap();
        let parts = shared.open_topic("u", &[Held::Single]).unwrap();
        shared.write_topics().insert("u".into(), parts);
        let p = shared.read_topics()["u"][0].clone().unwrap();
        assert_eq!(p.lock().config().record_bytes_max, 3000, "as read before");
        assert!(refresh_broker(&shared).unwrap());
        refresh(&shared, "u").unwrap();
        assert_eq!(p.record_bytes_max.load(Ordering::Relaxed), 2000, "its own");
        assert_eq!(p.min_insync.load(Ordering::Relaxed), 1);
        set(broker_config::DEFAULT, "min.insync.replicas", "3");
        assert!(refresh_broker(&shared).unwrap());
        reapply(&shared);
        assert_eq!(p.min_insync.load(Ordering::Relaxed), 3, "the default's");
        assert_eq!(p.lock().config().retention_ms, Some(60000), "the default");
        topic_config::change(&*registry, "u", &mut |c| c.set("max.message.bytes", "5000"))
            .unwrap()
            .unwrap();
        refresh(&shared, "u").unwrap();
        assert_eq!(
            p.record_bytes_max.load(Ordering::Relaxed),
            5000,
            "the topic's"
        );
    }
}
