//! How partitions spread, as pure functions of sorted inputs: the
//! paper's Algorithm 1 spreads a topic's partitions over a group's
//! members, and a round-robin places a new topic's partitions on the live
//! brokers. Every member (every broker) computes the same answer from the
//! same inputs, so none needs a master to tell it.

use std::ops::Range;

use crate::error::{Error, Result};

/// The paper's Algorithm 1: with the partitions and members sorted,
/// member `index` of `member_count` takes a contiguous range; the first
/// `partition_count % member_count` members take one more. Returns the
/// partitions for `index` (none when there are more members than
/// partitions and it comes late).
pub fn assign(partition_count: u32, member_count: usize, index: usize) -> Range<u32> {
    if member_count == 0 || index >= member_count {
        return 0..0;
    }
    let (n, m, i) = (partition_count as usize, member_count, index);
    let base = n / m;
    let extra = n % m;
    let start = i * base + i.min(extra);
    let len = base + usize::from(i < extra);
    start as u32..(start + len) as u32
}

/// Round-robin placement of `partition_count` partitions of
/// `replication_factor` replicas each over the brokers `broker_ids`
/// (sorted here, so their order does not matter), as Kafka assigns
/// replicas: with the `n` brokers sorted by id, partition `p`'s replicas
/// are the `(p + i) mod n`-th for `i` in `0..replication_factor`, the
/// first being its preferred leader. So replicas are distinct, and
/// preferred leaders spread evenly. Returns the replicas of each partition
/// in order; more replicas than brokers (or none) is an error.
pub fn place(
    partition_count: u32,
    replication_factor: u32,
    broker_ids: &[String],
) -> Result<Vec<Vec<String>>> {
    let mut sorted = broker_ids.to_vec();
    sorted.sort();
    sorted.dedup();
    let (n, factor) = (sorted.len(), replication_factor as usize);
    if factor == 0 {
        return Err(Error::Config(
            "replication factor 0: a partition needs at least one replica".into(),
        ));
    }
    if factor > n {
        let verb = if n == 1 { "is" } else { "are" };
        let brokers = if factor == 1 { "broker" } else { "brokers" };
        return Err(Error::Config(format!(
            "replication factor {factor} needs {factor} live {brokers}, {n} {verb} registered"
        )));
    }
    Ok((0..partition_count as usize)
        .map(|p| (0..factor).map(|i| sorted[(p + i) % n].clone()).collect())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn assignment_table() {
        // (partitions, members) -> each member's range.
        let cases: &[(u32, usize, &[Range<u32>])] = &[
            (4, 0, &[]),
            (0, 3, &[0..0, 0..0, 0..0]),
            (4, 1, &[0..4]),
            (4, 2, &[0..2, 2..4]),
            (4, 3, &[0..2, 2..3, 3..4]),
            (4, 4, &[0..1, 1..2, 2..3, 3..4]),
            (4, 6, &[0..1, 1..2, 2..3, 3..4, 4..4, 4..4]),
            (10, 3, &[0..4, 4..7, 7..10]),
        ];
        for (partitions, members, expected) in cases {
            let got: Vec<_> = (0..*members)
                .map(|i| assign(*partitions, *members, i))
                .collect();
            assert_eq!(&got, expected, "{partitions} partitions, {members} members");
            // Every partition exactly once.
            let mut all: Vec<u32> = got.iter().flat_map(|r| r.clone()).collect();
            all.sort_unstable();
            let want: Vec<u32> = if *members == 0 {
                vec![]
            } else {
                (0..*partitions).collect()
            };
            assert_eq!(all, want);
        }
        assert_eq!(assign(4, 2, 5), 0..0);
    }

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// The first replica of each partition: its preferred leader.
    fn leaders(replicas: &[Vec<String>]) -> Vec<String> {
        replicas.iter().map(|r| r[0].clone()).collect()
    }

    #[test]
    fn placement_is_round_robin_over_the_sorted_brokers() {
        let one = |count, brokers: &[&str]| leaders(&place(count, 1, &ids(brokers)).unwrap());
        assert_eq!(one(5, &["b", "a"]), ids(&["a", "b", "a", "b", "a"]));
        assert_eq!(one(2, &["c", "a", "b"]), ids(&["a", "b"]));
        assert_eq!(one(0, &["a"]), ids(&[]));
        let err = place(3, 1, &[]).unwrap_err().to_string();
        assert_eq!(
            err,
            "replication factor 1 needs 1 live broker, 0 are registered"
        );
    }

    #[test]
    fn replicas_are_distinct_and_preferred_leaders_spread_round_robin() {
        for n in 3..=5 {
            let brokers: Vec<String> = (1..=n).rev().map(|i| format!("b{i}")).collect();
            let placed = place(2 * n as u32, 3, &brokers).unwrap();
            let sorted: Vec<String> = (1..=n).map(|i| format!("b{i}")).collect();
            for (p, replicas) in placed.iter().enumerate() {
                let want: Vec<String> = (0..3).map(|i| sorted[(p + i) % n].clone()).collect();
                assert_eq!(replicas, &want, "{n} brokers, partition {p}");
            }
            // Each broker leads exactly two of the 2n partitions.
            for b in &sorted {
                let led = leaders(&placed).iter().filter(|l| *l == b).count();
                assert_eq!(led, 2, "{n} brokers: {b} leads {led}");
            }
        }
        assert_eq!(
            place(3, 3, &ids(&["c", "a", "b"])).unwrap(),
            [
                ids(&["a", "b", "c"]),
                ids(&["b", "c", "a"]),
                ids(&["c", "a", "b"])
            ]
        );
    }

    #[test]
    fn more_replicas_than_live_brokers_is_refused_clearly() {
        let err = place(4, 3, &ids(&["b1", "b2"])).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            "replication factor 3 needs 3 live brokers, 2 are registered"
        );
        let err = place(4, 2, &ids(&["b1", "b1"])).unwrap_err().to_string();
        assert_eq!(
            err,
            "replication factor 2 needs 2 live brokers, 1 is registered"
        );
        assert!(place(1, 0, &ids(&["b1"])).is_err(), "no replica at all");
    }
}
