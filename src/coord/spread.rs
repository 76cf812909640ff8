//! How partitions spread, as pure functions of sorted inputs: the
//! paper's Algorithm 1 spreads a topic's partitions over a group's
//! members, and a round-robin places a new topic's partitions on the live
//! brokers. Every member (every broker) computes the same answer from the
//! same inputs, so none needs a master to tell it.

use std::ops::Range;

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

/// Round-robin placement of `partition_count` partitions over the brokers
/// `broker_ids` (sorted here, so their order does not matter): partition
/// `p` goes to the `p mod n`-th of the `n` brokers. Returns the broker id
/// of each partition in order; none when there is no broker.
pub fn place(partition_count: u32, broker_ids: &[String]) -> Vec<String> {
    let mut sorted = broker_ids.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Vec::new();
    }
    (0..partition_count as usize)
        .map(|p| sorted[p % sorted.len()].clone())
        .collect()
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

    #[test]
    fn placement_is_round_robin_over_the_sorted_brokers() {
        let ids = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(place(5, &ids(&["b", "a"])), ids(&["a", "b", "a", "b", "a"]));
        assert_eq!(place(2, &ids(&["c", "a", "b"])), ids(&["a", "b"]));
        assert_eq!(place(0, &ids(&["a"])), ids(&[]));
        assert!(place(3, &[]).is_empty(), "no broker, no placement");
    }
}
