//! Adding partitions to a placed topic (Kafka's CreatePartitions). The
//! old partitions keep their replicas; each new one gets the replicas
//! asked for, or else the round-robin of [`super::spread::place`] over the
//! live brokers continued where the topic stops (partition `p`'s replicas
//! are the `(p + i) mod n`-th of the `n` live brokers sorted by id), with
//! the topic's replication factor.
//!
//! The placement is replaced by compare-and-set
//! ([`Registry::replace_placement`]): of two growths at once, one wins,
//! and the other reads what it left and is judged against that (asking
//! for fewer partitions than the topic now has is refused). A partition
//! is never taken away: a topic's count only grows, so a key's partition
//! moves only when an operator asks for more.
//!
//! Brokers learn of the new partitions from the placement: each holding
//! the topic reads it again within a second
//! (`crate::broker::topic_grow`), and a broker asked for a partition it
//! does not know reads it at once.

use super::registry::{Placement, Registry};
use crate::error::{Error, Result};

/// Compare-and-set tries before a growth gives up (each lost try means
/// another growth of the same topic won).
const TRIES: usize = 10;

/// Why a growth is refused: Kafka's INVALID_PARTITIONS,
/// INVALID_REPLICA_ASSIGNMENT and INVALID_REPLICATION_FACTOR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The count asked for is not more than the topic has, or too many.
    Count(String),
    /// The replicas asked for do not fit the topic or the cluster.
    Assignment(String),
    /// Fewer live brokers than the topic's replication factor.
    ReplicationFactor(String),
}

/// The placement of `old`'s topic with `count` partitions: the new ones'
/// replicas are `assignment` (one list per new partition, the preferred
/// leader first) or the round-robin over `live`; or why not.
pub fn grown(
    old: &Placement,
    count: u32,
    assignment: Option<&[Vec<String>]>,
    live: &[String],
) -> std::result::Result<Placement, Refused> {
    let have = old.brokers.len() as u32;
    let topic = &old.topic;
    if count < have {
        return Err(Refused::Count(format!(
            "topic {topic:?} has {have} partitions, more than the {count} asked for: partitions are never taken away"
        )));
    }
    if count == have {
        return Err(Refused::Count(format!(
            "topic {topic:?} already has {have} partitions"
        )));
    }
    if count > crate::limits::PARTITIONS_MAX {
        let max = crate::limits::PARTITIONS_MAX;
        return Err(Refused::Count(format!(
            "a topic has at most {max} partitions, not {count}"
        )));
    }
    let rf = old.replication_factor().max(1) as u32;
    let added = match assignment {
        Some(asked) => check_assignment(asked, count - have, rf, live)?,
        None => {
            let all = super::spread::place(count, rf, live)
                .map_err(|e| Refused::ReplicationFactor(e.to_string()))?;
            all[have as usize..].to_vec()
        }
    };
    let mut replicas: Vec<Vec<String>> = (0..have)
        .map(|p| old.replicas_of(p).unwrap_or_default().to_vec())
        .collect();
    replicas.extend(added);
    Ok(Placement::new(topic, replicas))
}

/// Checks replicas asked for `new` partitions of a topic of `rf`
/// replicas each: each list `rf` distinct live brokers.
fn check_assignment(
    asked: &[Vec<String>],
    new: u32,
    rf: u32,
    live: &[String],
) -> std::result::Result<Vec<Vec<String>>, Refused> {
    if asked.len() != new as usize {
        return Err(Refused::Assignment(format!(
            "{} replica lists given for {new} new partitions",
            asked.len()
        )));
    }
    for replicas in asked {
        if replicas.len() != rf as usize {
            return Err(Refused::Assignment(format!(
                "the topic has {rf} replicas a partition, and {} were given for one",
                replicas.len()
            )));
        }
        let mut distinct = replicas.clone();
        distinct.sort();
        distinct.dedup();
        if distinct.len() != replicas.len() {
            return Err(Refused::Assignment(format!(
                "a broker is named twice in {replicas:?}"
            )));
        }
        if let Some(gone) = replicas.iter().find(|b| !live.contains(b)) {
            return Err(Refused::Assignment(format!(
                "broker {gone} is not a live broker of the cluster"
            )));
        }
    }
    Ok(asked.to_vec())
}

/// Grows `topic` to `count` partitions in the registry (unless
/// `validate_only`), as [`grown`] places them: the placement that holds
/// now and the count it grew from, or why not. A topic without a
/// placement is [`Error::UnknownTopic`].
pub fn add(
    registry: &dyn Registry,
    topic: &str,
    count: u32,
    assignment: Option<&[Vec<String>]>,
    validate_only: bool,
) -> Result<std::result::Result<(Placement, u32), Refused>> {
    let live: Vec<String> = registry.brokers()?.into_iter().map(|b| b.id).collect();
    for _ in 0..TRIES {
        let Some(old) = registry.placement(topic)? else {
            return Err(Error::UnknownTopic {
                topic: topic.into(),
                dir: registry.location().into(),
            });
        };
        let new = match grown(&old, count, assignment, &live) {
            Ok(new) => new,
            Err(refused) => return Ok(Err(refused)),
        };
        if validate_only || registry.replace_placement(&old, &new)? {
            return Ok(Ok((new, old.brokers.len() as u32)));
        }
    }
    Err(Error::Config(format!(
        "the placement of topic {topic:?} changed under {TRIES} tries in a row: try again"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coord::mem::MemRegistry;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// A registry with `brokers` registered (for good).
    fn registry(brokers: &[&str]) -> MemRegistry {
        let reg = MemRegistry::default();
        for id in brokers {
            let info = crate::coord::mem::broker_info(id);
            std::mem::forget(reg.register_broker(&info).unwrap());
        }
        reg
    }

    /// New partitions continue the round-robin; the old ones keep their
    /// replicas, even where the live brokers changed since.
    #[test]
    fn new_partitions_continue_the_round_robin_and_old_ones_stay() {
        let old = Placement::new("t", vec![ids(&["b9", "b1"]), ids(&["b1", "b9"])]);
        let live = ids(&["b3", "b1", "b2"]);
        let new = grown(&old, 5, None, &live).unwrap();
        assert_eq!(new.replicas_of(0).unwrap(), ids(&["b9", "b1"]));
        assert_eq!(new.replicas_of(1).unwrap(), ids(&["b1", "b9"]));
        assert_eq!(new.replicas_of(2).unwrap(), ids(&["b3", "b1"]));
        assert_eq!(new.replicas_of(3).unwrap(), ids(&["b1", "b2"]));
        assert_eq!(new.replicas_of(4).unwrap(), ids(&["b2", "b3"]));
        assert_eq!(new.brokers, ids(&["b9", "b1", "b3", "b1", "b2"]));
    }

    #[test]
    fn what_is_refused_and_why() {
        let old = Placement::new("t", vec![ids(&["b1", "b2"]); 2]);
        let live = ids(&["b1", "b2"]);
        let count = |n| grown(&old, n, None, &live).unwrap_err();
        assert!(matches!(count(2), Refused::Count(w) if w.contains("already has 2")));
        assert!(matches!(count(1), Refused::Count(w) if w.contains("never taken away")));
        assert!(matches!(count(10_001), Refused::Count(_)));
        let one_live = grown(&old, 3, None, &ids(&["b1"])).unwrap_err();
        assert!(
            matches!(one_live, Refused::ReplicationFactor(_)),
            "{one_live:?}"
        );
        let asked = |lists: &[&[&str]]| {
            let lists: Vec<Vec<String>> = lists.iter().map(|l| ids(l)).collect();
            grown(&old, 3, Some(&lists), &live)
        };
        assert!(matches!(asked(&[]), Err(Refused::Assignment(_))));
        assert!(matches!(asked(&[&["b1"]]), Err(Refused::Assignment(_))));
        assert!(matches!(
            asked(&[&["b1", "b1"]]),
            Err(Refused::Assignment(_))
        ));
        assert!(matches!(asked(&[&["b1", "b7"]]), Err(Refused::Assignment(w)) if w.contains("b7")));
        let ok = asked(&[&["b2", "b1"]]).unwrap();
        assert_eq!(ok.replicas_of(2).unwrap(), ids(&["b2", "b1"]));
    }

    /// Two growths from one placement: the second compare-and-set loses
    /// and is judged against the winner's placement.
    #[test]
    fn a_growth_that_loses_the_race_is_judged_against_the_winner() {
        let reg = registry(&["b1", "b2"]);
        reg.place_topic("t", 2, &ids(&["b1", "b2"])).unwrap();
        let old = reg.placement("t").unwrap().unwrap();
        let (first, from) = add(&reg, "t", 4, None, false).unwrap().unwrap();
        assert_eq!((reg.placement("t").unwrap().unwrap(), from), (first, 2));
        let stale = grown(&old, 3, None, &ids(&["b1", "b2"])).unwrap();
        assert!(
            !reg.replace_placement(&old, &stale).unwrap(),
            "changed since"
        );
        assert_eq!(reg.placement("t").unwrap().unwrap().brokers.len(), 4);
        assert!(matches!(
            add(&reg, "t", 3, None, false).unwrap(),
            Err(Refused::Count(_))
        ));
        let (checked, _) = add(&reg, "t", 6, None, true).unwrap().unwrap();
        assert_eq!(checked.brokers.len(), 6);
        assert_eq!(
            reg.placement("t").unwrap().unwrap().brokers.len(),
            4,
            "validate only"
        );
        assert!(matches!(
            add(&reg, "none", 3, None, false),
            Err(Error::UnknownTopic { .. })
        ));
    }
}
