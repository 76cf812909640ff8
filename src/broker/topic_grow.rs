//! A topic's partitions added while brokers run (CreatePartitions,
//! [`crate::coord::partitions_add`]). The broker that answers grows its
//! copy before it answers; every other broker holding the topic reads
//! its placement again every second (with the topic configs' reload) and
//! grows its copy when the placement has more partitions; a broker asked
//! for a partition past those it knows reads the placement at once; and a
//! broker that was down grows its copy when it opens the topic. Growing
//! makes the new partitions on disk, all or nothing
//! ([`crate::storage::store::Store::add_partitions`]), and opens those
//! placed here; the old partitions serve on meanwhile, unchanged.

use std::time::{Duration, Instant};

use super::shared::{Held, Shared};
use crate::error::Result;
use crate::sync::lock;

/// How often a request for a partition past a topic's count makes the
/// broker read the topic's placement again, at most: a client asking for
/// partition 9999 again and again costs no registry read each time.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

impl Shared {
    /// Grows `topic`, open here, to `mine.len()` partitions, held as
    /// `mine` says: makes the new ones on disk and opens those held here.
    /// `false` when it had as many (or is not open here).
    pub(super) fn grow_topic(&self, topic: &str, mine: &[Held]) -> Result<bool> {
        let _creating = lock(&self.creating);
        let Some(have) = self.read_topics().get(topic).map(Vec::len) else {
            return Ok(false);
        };
        let count = mine.len();
        if count <= have {
            return Ok(false);
        }
        self.room_for(topic, count as u32)?;
        self.store.add_partitions(topic, count as u32)?;
        let new: Vec<Held> = (0..count)
            .map(|p| match p < have {
                true => Held::Elsewhere,
                false => mine[p].clone(),
            })
            .collect();
        let opened = self.open_topic(topic, &new)?;
        if let Some(parts) = self.write_topics().get_mut(topic) {
            parts.extend(opened.into_iter().skip(have));
        }
        let served: Vec<usize> = (have..count)
            .filter(|p| mine[*p] != Held::Elsewhere)
            .collect();
        self.log(format_args!(
            "Topic {topic} grew from {have} to {count} partitions, serving {served:?} of the new ones"
        ));
        self.update_registry();
        Ok(true)
    }

    /// Grows `topic` (open here) to the partitions its placement has now,
    /// if more: whether it grew.
    pub(super) fn grow_as_placed(&self, topic: &str) -> Result<bool> {
        let Some(registry) = self.registry.as_deref() else {
            return Ok(false);
        };
        let Some(have) = self.read_topics().get(topic).map(Vec::len) else {
            return Ok(false);
        };
        match registry.placement(topic)? {
            Some(placement) if placement.brokers.len() > have => {
                self.grow_topic(topic, &Held::all(&placement, &self.broker_id))
            }
            _ => Ok(false),
        }
    }

    /// Grows `topic` (open here) as placed, asked for a partition past its
    /// count: at most once every [`LOOK_AGAIN`] per topic (the reloads
    /// grow it meanwhile). Whether it grew; an error is the reloads' to
    /// say.
    pub(super) fn grow_when_asked(&self, topic: &str) -> bool {
        let now = Instant::now();
        {
            let mut looks = lock(&self.grow_looks);
            if looks
                .get(topic)
                .is_some_and(|t| now.duration_since(*t) < LOOK_AGAIN)
            {
                return false;
            }
            // Only topics looked at within the interval stay.
            looks.retain(|_, t| now.duration_since(*t) < LOOK_AGAIN);
            looks.insert(topic.to_string(), now);
        }
        self.grow_as_placed(topic).unwrap_or(false)
    }
}
