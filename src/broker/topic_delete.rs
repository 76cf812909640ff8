//! Deleting topics on a broker ([`crate::coord::topic_delete`]): a topic
//! the registry marks for deletion and names this broker in is taken out
//! of what the broker serves, its partitions stopped (an append that
//! comes after is refused; waiters are woken), its files removed
//! crash-safe ([`crate::storage::store::Store::delete_topic`]), and this
//! broker's name taken off the marker. The broker looks at start, before
//! it opens any topic, and every second after (with the topic configs'
//! reload), so that a broker that was down when a topic was deleted
//! deletes its copy before it could serve it again.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::Shared;
use crate::coord::topic_delete;
use crate::coord::Registry;
use crate::error::{Error, Result};
use crate::sync::lock;

/// Deletes `topic` here: out of the topics served, its partitions
/// stopped, its files removed (crash-safe), the broker's registry entry
/// rewritten.
pub(super) fn delete_here(shared: &Shared, topic: &str) -> Result<()> {
    // Not while the topic is being created or grown here.
    let _creating = lock(&shared.creating);
    let parts = shared.write_topics().remove(topic);
    let on_disk = shared.store.dir().exists() && shared.store.partition_dirs_of(topic)? > 0;
    if parts.is_none() && !on_disk {
        return Ok(());
    }
    let stopped = Error::Config(format!("topic {topic} was deleted"));
    for p in parts.into_iter().flatten().flatten() {
        // Under the log's lock: an append in progress ends first, and
        // none comes after (a late one would write into a new topic of
        // the same name).
        let _ = p.lock().fail(&stopped);
        p.failed.store(true, Ordering::Release);
        p.waiters.wake_all();
    }
    lock(&shared.offline).retain(|(t, _), _| t != topic);
    // The replica manager looks at the name afresh: it may be placed anew.
    shared.deletions.fetch_add(1, Ordering::AcqRel);
    shared.topic_configs.forget(topic);
    if on_disk {
        shared.store.delete_topic(topic)?;
    }
    shared.update_registry();
    Ok(())
}

/// At a broker's start, before it opens any topic: finishes the
/// deletions its data directory began
/// ([`crate::storage::store::Store::finish_deletions`]), then those the
/// registry marks, so that a copy of a topic deleted while the broker was
/// down is never opened again.
pub(super) fn at_start(shared: &Shared) -> Result<()> {
    for topic in shared.store.finish_deletions()? {
        shared.log(format_args!("Finished deleting topic {topic}"));
    }
    if let Err(e) = round(shared) {
        shared.log(format_args!("cannot finish the deletion of a topic: {e}"));
    }
    Ok(())
}

/// Deletes the topics the registry marks for deletion that name this
/// broker, and takes its name off their markers: the first error, after
/// trying every topic.
pub(super) fn round(shared: &Shared) -> Result<()> {
    let Some(registry) = shared.registry.as_deref() else {
        return Ok(());
    };
    let _one = lock(&shared.deleting);
    let mut first_error = None;
    for topic in topic_delete::pending(registry)? {
        let outcome = (|| {
            let names_me = match topic_delete::get(registry, &topic) {
                // An empty one (its last broker taken off by hand): any
                // broker finishes it.
                Ok(Some(d)) => d.brokers.is_empty() || d.brokers.contains(&shared.broker_id),
                Ok(None) => return Ok(()),
                // Damaged: every broker deletes its copy; the marker waits
                // for the topic to be deleted again (its error says so).
                Err(e) => {
                    delete_here(shared, &topic)?;
                    return Err(e);
                }
            };
            if !names_me {
                return Ok(());
            }
            // The marker's writer may have died before this.
            registry.remove_topic(&topic)?;
            delete_here(shared, &topic)?;
            // The group offsets deleted with it are the offsets topic's
            // (and any left in the registry), once it exists.
            let offsets = crate::coord::offsets_topic::OFFSETS_TOPIC;
            let by_topic = topic != offsets && registry.placement(offsets)?.is_some();
            let by_topic = by_topic.then(|| super::offsets::registry(shared)).flatten();
            let offsets: Arc<dyn Registry> = match (by_topic, &shared.registry) {
                (Some(r), _) => r,
                (None, Some(r)) => Arc::clone(r),
                (None, None) => return Ok(()),
            };
            if topic_delete::done(&*offsets, &topic, &shared.broker_id)? {
                shared.log(format_args!("Deleted topic {topic} from the cluster"));
            }
            Ok(())
        })();
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
