//! OffsetCommit and OffsetFetch, on the registry's offset entries: the
//! ones `klog-consume -G` commits and resumes from. As with Kafka, a
//! commit stores the offset it names, lower or higher (a consumer that
//! seeks back, an offset reset), fenced by the member's claim.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{
    error_code, Coordinator, ILLEGAL_GENERATION, INVALID_GROUP_ID, INVALID_REQUEST, NONE,
    REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, UNKNOWN_TOPIC_OR_PARTITION,
};
use crate::coord::registry::check_name;
use crate::coord::transactions;
use crate::coord::Ephemeral;
use crate::kafka::UNSTABLE_OFFSET_COMMIT;
use crate::sync::lock;

/// The member named in the claim a commit from outside the group takes
/// for the moment of its write.
const OUTSIDER: &str = "kafka-offset-commit";
/// That claim's lease (held for a few system calls).
const OUTSIDER_LEASE: Duration = Duration::from_secs(10);

/// A partition of a request: its topic and index, checked to be a
/// registry name and a partition number.
fn partition_of(topic: &str, partition: i32) -> Option<u32> {
    let valid = check_name("topic", topic).is_ok();
    u32::try_from(partition).ok().filter(|_| valid)
}

impl Coordinator {
    /// OffsetCommit: each `(topic, partition, offset)`'s error, in order.
    /// A member commits with its claim of the partition (fenced as every
    /// registry commit is); a client outside the group (`generation` -1,
    /// no member id) claims the partition for the moment, and is refused
    /// (REBALANCE_IN_PROGRESS) while a member holds it.
    pub(crate) fn commit(
        &self,
        group: &str,
        member_id: &str,
        generation: i32,
        offsets: &[(String, i32, i64)],
    ) -> Vec<i16> {
        if check_name("group", group).is_err() {
            return vec![INVALID_GROUP_ID; offsets.len()];
        }
        if generation == -1 && member_id.is_empty() {
            return offsets
                .iter()
                .map(|(t, p, o)| self.commit_outside(group, t, *p, *o))
                .collect();
        }
        let owners = match self.owners(group, member_id, generation, offsets) {
            Ok(owners) => owners,
            Err(error) => return vec![error; offsets.len()],
        };
        // The registry's writes (an fsync each) run outside the lock.
        let codes: Vec<i16> = offsets
            .iter()
            .zip(owners)
            .map(|((topic, partition, offset), owner)| {
                let (partition, owner) = match (partition_of(topic, *partition), owner) {
                    (Some(p), Ok(owner)) => (p, owner),
                    (None, _) => return UNKNOWN_TOPIC_OR_PARTITION,
                    (_, Err(error)) => return error,
                };
                let Ok(offset) = u64::try_from(*offset) else {
                    return INVALID_REQUEST;
                };
                let owner = lock(&owner);
                // Kafka stores what it is given, lower or higher.
                match self
                    .registry
                    .store_offset(group, topic, partition, offset, &owner)
                {
                    Ok(()) => NONE,
                    Err(e) => error_code(&e),
                }
            })
            .collect();
        if codes.contains(&ILLEGAL_GENERATION) {
            // A claim taken over: the tick checks them all at once.
            let mut groups = self.groups();
            if let Some(m) = groups
                .get_mut(group)
                .and_then(|g| g.members.get_mut(member_id))
            {
                m.recheck = true;
            }
        }
        codes
    }

    /// The member's claim of each partition of `offsets`, or the error to
    /// answer for it: the member's generation must be the group's, and the
    /// partition its own since its sync.
    #[allow(clippy::type_complexity)]
    fn owners(
        &self,
        group: &str,
        member_id: &str,
        generation: i32,
        offsets: &[(String, i32, i64)],
    ) -> Result<Vec<Result<Arc<Mutex<Ephemeral>>, i16>>, i16> {
        let mut groups = self.groups();
        let group = groups.get_mut(group).ok_or(UNKNOWN_MEMBER_ID)?;
        let current = group.generation;
        let member = group.members.get_mut(member_id).ok_or(UNKNOWN_MEMBER_ID)?;
        member.last_seen = Instant::now();
        if generation != current || member.generation != Some(current) {
            return Err(ILLEGAL_GENERATION);
        }
        // Not synced yet in this generation: it must finish its rebalance.
        let unowned = if member.assignment.is_none() {
            REBALANCE_IN_PROGRESS
        } else {
            ILLEGAL_GENERATION
        };
        Ok(offsets
            .iter()
            .map(|(topic, partition, _)| {
                let claim = member
                    .claims
                    .iter()
                    .find(|c| c.topic == *topic && i64::from(c.partition) == i64::from(*partition));
                claim.map(|c| Arc::clone(&c.owner)).ok_or(unowned)
            })
            .collect())
    }

    /// A commit from outside the group: claims the partition, commits,
    /// lets go. Only for a partition that exists, as Kafka: a client must
    /// not make registry entries for topics and partitions made up.
    fn commit_outside(&self, group: &str, topic: &str, partition: i32, offset: i64) -> i16 {
        let Some(partition) = partition_of(topic, partition) else {
            return UNKNOWN_TOPIC_OR_PARTITION;
        };
        match self.partitions_of(topic) {
            Ok(count) if partition < count => {}
            Ok(_) => return UNKNOWN_TOPIC_OR_PARTITION,
            Err(e) => return error_code(&e),
        }
        let Ok(offset) = u64::try_from(offset) else {
            return INVALID_REQUEST;
        };
        let claim = self
            .registry
            .claim(group, topic, partition, OUTSIDER, OUTSIDER_LEASE);
        match claim {
            Ok(Some(owner)) => match self
                .registry
                .store_offset(group, topic, partition, offset, &owner)
            {
                Ok(()) => NONE,
                Err(e) => error_code(&e),
            },
            Ok(None) => REBALANCE_IN_PROGRESS,
            Err(e) => error_code(&e),
        }
    }

    /// OffsetFetch: each `(topic, partition)`'s committed offset (-1 when
    /// the group has none) and error, in order, with those committed by
    /// transactions and not yet written ([`transactions::group_view`]).
    /// `stable` (`require_stable`): a partition an open transaction holds
    /// an offset of is UNSTABLE_OFFSET_COMMIT, which clients ask again.
    pub(crate) fn fetch_offsets(
        &self,
        group: &str,
        partitions: &[(String, i32)],
        stable: bool,
    ) -> Vec<(i64, i16)> {
        if check_name("group", group).is_err() {
            return vec![(-1, INVALID_GROUP_ID); partitions.len()];
        }
        let view = match self.transactions_of(group) {
            Ok(view) => view,
            Err(code) => return vec![(-1, code); partitions.len()],
        };
        partitions
            .iter()
            .map(|(topic, partition)| {
                let Some(p) = partition_of(topic, *partition) else {
                    return (-1, UNKNOWN_TOPIC_OR_PARTITION);
                };
                if stable && view.unstable(topic, p) {
                    return (-1, UNSTABLE_OFFSET_COMMIT);
                }
                match self.registry.committed(group, topic, p) {
                    Ok(stored) => match view.offset(topic, p, stored) {
                        Some(offset) => (i64::try_from(offset).unwrap_or(i64::MAX), NONE),
                        None => (-1, NONE),
                    },
                    Err(e) => (-1, error_code(&e)),
                }
            })
            .collect()
    }

    /// OffsetFetch of every topic (a request with no topic list): each
    /// committed `(topic, partition, offset)` of the group, or the error.
    pub(crate) fn fetch_all_offsets(&self, group: &str) -> Result<Vec<(String, i32, i64)>, i16> {
        if check_name("group", group).is_err() {
            return Err(INVALID_GROUP_ID);
        }
        let view = self.transactions_of(group)?;
        let stored = self.registry.offsets(group).map_err(|e| error_code(&e))?;
        let mut offsets: BTreeMap<(String, u32), u64> = view.committed.clone();
        for (topic, partition, offset) in stored {
            if let Ok(offset) = offset {
                let held = view.offset(&topic, partition, Some(offset));
                offsets.insert((topic, partition), held.unwrap_or(offset));
            }
        }
        Ok(offsets
            .into_iter()
            .filter_map(|((topic, partition), offset)| {
                let partition = i32::try_from(partition).ok()?;
                let offset = i64::try_from(offset).ok()?;
                Some((topic, partition, offset))
            })
            .collect())
    }

    /// What the transactions hold of `group`'s offsets.
    fn transactions_of(&self, group: &str) -> Result<transactions::GroupView, i16> {
        let entries = transactions::all(&*self.registry).map_err(|e| error_code(&e))?;
        Ok(transactions::group_view(&entries, group))
    }

    /// Writes an offset a transaction committed to `group`: with the claim
    /// of the member here that holds the partition, or a claim of its own
    /// when no member does. Never lowers the group's offset. Whether it is
    /// written (`false`: a member of another broker holds the partition,
    /// and writes it there).
    pub(crate) fn write_committed(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
        offset: u64,
    ) -> crate::Result<bool> {
        let held = self.groups().get(group).and_then(|g| {
            let mut claims = g.members.values().flat_map(|m| &m.claims);
            (claims.find(|c| c.topic == topic && c.partition == partition))
                .map(|c| Arc::clone(&c.owner))
        });
        if let Some(owner) = held {
            let owner = lock(&owner);
            self.registry
                .commit(group, topic, partition, offset, &owner)?;
            return Ok(true);
        }
        if self.registry.owner(group, topic, partition).is_some() {
            return Ok(false);
        }
        let claim = self
            .registry
            .claim(group, topic, partition, OUTSIDER, OUTSIDER_LEASE)?;
        match claim {
            Some(owner) => {
                self.registry
                    .commit(group, topic, partition, offset, &owner)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
