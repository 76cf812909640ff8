//! The groups as admin clients see them (ListGroups, DescribeGroups) and
//! change them (DeleteGroups, OffsetDelete), over the registry: every
//! group with members, claims or committed offsets, klog's members and
//! Kafka's alike.
//!
//! - **State**: `Stable` while it has live members (`PreparingRebalance`
//!   while a rebalance of its Kafka members here is under way), `Empty`
//!   with committed offsets and no member, `Dead` with neither.
//! - **Members**: every live registry member; a Kafka member of this
//!   broker with its client id and the metadata and assignment it has, a
//!   member elsewhere (a `klog-consume -G` member, a Kafka member of
//!   another broker) with its subscription and the partitions it claims.
//! - **Listing**: a group whose leader assigns is listed by the broker
//!   that coordinates it; any other by the live broker with a Kafka
//!   listener whose id sorts first (or this one, without a registry of
//!   brokers), so that an admin client that asks every broker sees each
//!   group once.
//! - **Deletion**: a group's committed offsets, and a partition's, go
//!   only while no member holds them (NON_EMPTY_GROUP,
//!   GROUP_SUBSCRIBED_TO_TOPIC), each fenced by the partition's claim as
//!   an offset reset is.

use super::{
    error_code, Coordinator, COORDINATOR_NOT_AVAILABLE, NONE, NOT_COORDINATOR,
    UNKNOWN_TOPIC_OR_PARTITION,
};
use crate::coord::registry::check_name;
use crate::error::Error;
use crate::kafka::consumer::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicPartition,
};
use crate::kafka::{GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC, NON_EMPTY_GROUP};

/// A group as DescribeGroups answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupView {
    pub(crate) state: &'static str,
    /// "consumer", or empty for a dead group.
    pub(crate) protocol_type: &'static str,
    /// The assignor's name, or empty.
    pub(crate) protocol: String,
    pub(crate) members: Vec<MemberView>,
}

/// A member as DescribeGroups answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberView {
    pub(crate) member_id: String,
    pub(crate) client_id: String,
    /// A consumer protocol subscription.
    pub(crate) metadata: Vec<u8>,
    /// A consumer protocol assignment.
    pub(crate) assignment: Vec<u8>,
}

/// A consumer protocol subscription of `topics`.
fn subscription(topics: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    ConsumerProtocolSubscription {
        version: 0,
        topics: topics.iter().map(String::as_str).collect(),
        user_data: None,
        owned_partitions: Vec::new(),
        generation_id: -1,
        rack_id: None,
    }
    .encode(&mut out);
    out
}

/// A consumer protocol assignment of `partitions`, by topic.
pub(crate) fn assignment(partitions: &[(String, Vec<i32>)]) -> Vec<u8> {
    let mut out = Vec::new();
    ConsumerProtocolAssignment {
        version: 0,
        assigned_partitions: partitions
            .iter()
            .map(|(topic, partitions)| TopicPartition {
                topic,
                partitions: partitions.clone(),
            })
            .collect(),
        user_data: None,
    }
    .encode(&mut out);
    out
}

impl Coordinator {
    /// Whether this broker lists `group` in ListGroups (see the module's
    /// docs).
    pub(crate) fn lists(&self, group: &str) -> bool {
        let members = self.registry.members(group).unwrap_or_default();
        let me = &self.config.broker_id;
        if let Some(b) = members.iter().find_map(|m| m.coordinator.as_ref()) {
            return b == me || self.coordinator_of(group).is_none();
        }
        let brokers = self.registry.brokers().unwrap_or_default();
        let first = brokers
            .iter()
            .filter(|b| b.kafka.is_some())
            .map(|b| &b.id)
            .min();
        first.is_none_or(|first| first == me)
    }

    /// Every group of the registry, with its state.
    pub(crate) fn list(&self) -> Result<Vec<(String, &'static str)>, i16> {
        let groups = self.registry.groups().map_err(|e| error_code(&e))?;
        Ok(groups
            .into_iter()
            .filter(|g| self.lists(g))
            .filter_map(|g| {
                // A group deleted leaves no trace Kafka's clients see.
                let state = self.describe(&g).ok()?.state;
                (state != "Dead").then_some((g, state))
            })
            .collect())
    }

    /// DescribeGroups of one group (see the module's docs).
    pub(crate) fn describe(&self, group: &str) -> Result<GroupView, i16> {
        if check_name("group", group).is_err() {
            return Ok(dead());
        }
        if self.coordinator_of(group).is_some() {
            return Err(NOT_COORDINATOR);
        }
        let registered = self.registry.members(group).map_err(|e| error_code(&e))?;
        let groups = self.groups();
        let local = groups.get(group);
        let mut members = Vec::new();
        for m in &registered {
            let here = local.and_then(|g| g.members.get(&m.member));
            members.push(match here {
                Some(member) => {
                    let protocol = local.and_then(|g| g.classic.as_ref()).map(|c| &c.protocol);
                    let metadata = protocol.and_then(|p| {
                        let found = member.protocols.iter().find(|(n, _)| n == p);
                        found.map(|(_, metadata)| metadata.clone())
                    });
                    let partitions = member.assignment.clone().unwrap_or_default();
                    MemberView {
                        member_id: m.member.clone(),
                        client_id: member.client_id.clone(),
                        metadata: metadata.unwrap_or_else(|| subscription(&m.topics)),
                        assignment: member
                            .raw
                            .clone()
                            .unwrap_or_else(|| assignment(&partitions)),
                    }
                }
                None => MemberView {
                    member_id: m.member.clone(),
                    client_id: String::new(),
                    metadata: subscription(&m.topics),
                    assignment: Vec::new(),
                },
            });
        }
        let rebalancing = local.is_some_and(|g| g.rebalance.is_some());
        let protocol = local
            .and_then(|g| g.classic.as_ref())
            .map(|c| c.protocol.clone());
        drop(groups);
        // The partitions each member elsewhere claims.
        for (view, m) in members.iter_mut().zip(&registered) {
            if view.assignment.is_empty() {
                view.assignment = assignment(&self.claimed(group, &m.member, &m.topics));
            }
        }
        if members.is_empty() {
            let offsets = self.registry.offsets(group).map_err(|e| error_code(&e))?;
            return Ok(if offsets.is_empty() { dead() } else { empty() });
        }
        Ok(GroupView {
            state: if rebalancing {
                "PreparingRebalance"
            } else {
                "Stable"
            },
            protocol_type: "consumer",
            protocol: protocol.unwrap_or_else(|| "range".to_string()),
            members,
        })
    }

    /// The partitions of `topics` the registry says `member` claims.
    fn claimed(&self, group: &str, member: &str, topics: &[String]) -> Vec<(String, Vec<i32>)> {
        let mut out = Vec::new();
        for topic in topics {
            let count = self.partitions_of(topic).unwrap_or(0);
            let owned: Vec<i32> = (0..count)
                .filter(|&p| {
                    let owner = self.registry.owner(group, topic, p);
                    owner.is_some_and(|o| o.member == member && !o.lease.expired())
                })
                .map(|p| p as i32)
                .collect();
            if !owned.is_empty() {
                out.push((topic.clone(), owned));
            }
        }
        out
    }

    /// DeleteGroups of one group: its committed offsets go, while it has
    /// no member.
    pub(crate) fn delete_group(&self, group: &str) -> i16 {
        if check_name("group", group).is_err() {
            return GROUP_ID_NOT_FOUND;
        }
        if self.coordinator_of(group).is_some() {
            return NOT_COORDINATOR;
        }
        let here = self.groups().get(group).is_some_and(|g| !g.is_empty());
        let members = self.registry.members(group);
        match members {
            Ok(m) if m.is_empty() && !here => {}
            Ok(_) => return NON_EMPTY_GROUP,
            Err(e) => return error_code(&e),
        }
        // Those of transactions not yet written go first, never to come
        // back after the group's.
        if let Err(e) =
            crate::coord::transactions::forget_committed(&*self.registry, group, (None, None))
        {
            return error_code(&e);
        }
        let offsets = match self.registry.offsets(group) {
            Ok(offsets) if offsets.is_empty() => return GROUP_ID_NOT_FOUND,
            Ok(offsets) => offsets,
            Err(e) => return error_code(&e),
        };
        for (topic, partition, _) in offsets {
            match self.registry.delete_offset(group, &topic, partition) {
                Ok(_) => {}
                Err(Error::GroupActive { .. }) => return NON_EMPTY_GROUP,
                Err(e) => return error_code(&e),
            }
        }
        NONE
    }

    /// OffsetDelete: the group's error, and each partition's.
    pub(crate) fn delete_offsets(&self, group: &str, asked: &[(String, i32)]) -> (i16, Vec<i16>) {
        let whole = |error: i16| (error, vec![error; asked.len()]);
        if check_name("group", group).is_err() {
            return whole(GROUP_ID_NOT_FOUND);
        }
        if self.coordinator_of(group).is_some() {
            return whole(NOT_COORDINATOR);
        }
        let known = self.registry.groups().map(|g| g.iter().any(|g| g == group));
        let members = match (known, self.registry.members(group)) {
            (Ok(false), _) => return whole(GROUP_ID_NOT_FOUND),
            (Ok(true), Ok(members)) => members,
            (Err(e), _) | (_, Err(e)) => return whole(error_code(&e)),
        };
        // Partition counts, looked up once a topic.
        let mut counts: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let codes = asked
            .iter()
            .map(|(topic, partition)| {
                if members.iter().any(|m| m.topics.contains(topic)) {
                    return GROUP_SUBSCRIBED_TO_TOPIC;
                }
                if check_name("topic", topic).is_err() {
                    return UNKNOWN_TOPIC_OR_PARTITION;
                }
                let count = *counts
                    .entry(topic)
                    .or_insert_with(|| self.partitions_of(topic).unwrap_or(0));
                // Only a partition that exists, as a commit from outside
                // the group: no registry entries for partitions made up.
                let Some(p) = u32::try_from(*partition).ok().filter(|p| *p < count) else {
                    return UNKNOWN_TOPIC_OR_PARTITION;
                };
                // Those of transactions not yet written go too.
                let forgotten = (Some(topic.as_str()), Some(p));
                let forget = crate::coord::transactions::forget_committed;
                if let Err(e) = forget(&*self.registry, group, forgotten) {
                    return error_code(&e);
                }
                match self.registry.committed(group, topic, p) {
                    Ok(None) => return NONE,
                    Ok(Some(_)) => {}
                    Err(e) => return error_code(&e),
                }
                match self.registry.delete_offset(group, topic, p) {
                    Ok(_) => NONE,
                    Err(Error::GroupActive { .. }) => GROUP_SUBSCRIBED_TO_TOPIC,
                    Err(e) if crate::coord::group::transient(&e) => COORDINATOR_NOT_AVAILABLE,
                    Err(e) => error_code(&e),
                }
            })
            .collect();
        (NONE, codes)
    }
}

fn dead() -> GroupView {
    GroupView {
        state: "Dead",
        protocol_type: "",
        protocol: String::new(),
        members: Vec::new(),
    }
}

fn empty() -> GroupView {
    GroupView {
        state: "Empty",
        protocol_type: "consumer",
        protocol: String::new(),
        members: Vec::new(),
    }
}
