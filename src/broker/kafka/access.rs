//! The ACLs on Kafka's wire (with `--authorize`): what each request needs,
//! and the answer of a request refused, with Kafka's codes
//! (TOPIC_AUTHORIZATION_FAILED per topic, GROUP_AUTHORIZATION_FAILED,
//! CLUSTER_AUTHORIZATION_FAILED).
//!
//! | request | needs |
//! |---|---|
//! | Produce | write on each topic |
//! | Fetch | read on each topic (cluster_action for a replica's) |
//! | ListOffsets, Metadata | describe on each topic (Metadata of every topic lists those described); auto-creation: create on the cluster or the topic |
//! | FindCoordinator, OffsetFetch | describe on the group (and on each topic) |
//! | JoinGroup, SyncGroup, Heartbeat, LeaveGroup | read on the group |
//! | OffsetCommit | read on the group and on each topic |
//! | InitProducerId | write on the transactional id; without one, write on some topic |
//! | FindCoordinator of a transactional id | describe on it |
//! | AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn | write on the transactional id, and see [`super::txn`] |
//! | Produce of a transaction's batch | write on its transactional id, and on the topic |
//! | DescribeAcls, DescribeUserScramCredentials | describe on the cluster |
//! | CreateAcls, DeleteAcls, AlterUserScramCredentials | alter on the cluster |
//! | ListGroups, DescribeGroups, DeleteGroups, OffsetDelete | see [`super::group_admin`] |
//! | CreateTopics, DescribeCluster | see [`super::topics_admin`] |
//! | DeleteTopics | delete on each topic ([`super::topics_delete`]) |
//! | DeleteRecords | delete on each topic ([`super::records_delete`]) |
//! | CreatePartitions | alter on each topic ([`super::partitions_create`]) |
//! | DescribeConfigs, AlterConfigs, IncrementalAlterConfigs | see [`super::configs_admin`] |
//! | OffsetForLeaderEpoch | describe on each topic |

use crate::broker::auth::Session;
use crate::broker::shared::Shared;
use crate::coord::acl::{Operation, ResourceType, CLUSTER};
use crate::kafka;

/// What a connection may do: its session, or everything (no session).
#[derive(Clone, Copy)]
pub(super) struct Access<'a> {
    shared: &'a Shared,
    session: Option<&'a Session>,
}

impl<'a> Access<'a> {
    pub(super) fn new(shared: &'a Shared, session: Option<&'a Session>) -> Access<'a> {
        Access { shared, session }
    }

    /// Whether `operation` on the resource is allowed.
    pub(super) fn allows(&self, operation: Operation, resource: ResourceType, name: &str) -> bool {
        self.session
            .is_none_or(|s| s.allows(self.shared, operation, (resource, name)))
    }

    /// The operations the client may do on the resource, as Kafka's
    /// `authorized_operations` say them: a bit per ACL operation code, of
    /// those klog's ACLs know that apply to the resource's type.
    pub(super) fn operations(&self, resource: ResourceType, name: &str) -> i32 {
        use crate::kafka::admin::code;
        let applying: &[(Operation, i8)] = match resource {
            ResourceType::Topic => &[
                (Operation::Read, code::READ),
                (Operation::Write, code::WRITE),
                (Operation::Create, code::CREATE),
                (Operation::Delete, code::DELETE),
                (Operation::Alter, code::ALTER),
                (Operation::Describe, code::DESCRIBE),
            ],
            ResourceType::Group => &[
                (Operation::Read, code::READ),
                (Operation::Delete, code::DELETE),
                (Operation::Describe, code::DESCRIBE),
            ],
            ResourceType::Cluster => &[
                (Operation::Create, code::CREATE),
                (Operation::Alter, code::ALTER),
                (Operation::Describe, code::DESCRIBE),
                (Operation::ClusterAction, code::CLUSTER_ACTION),
            ],
            ResourceType::TransactionalId => &[
                (Operation::Write, code::WRITE),
                (Operation::Describe, code::DESCRIBE),
            ],
        };
        applying
            .iter()
            .filter(|(op, _)| self.allows(*op, resource, name))
            .fold(0, |bits, (_, c)| bits | 1 << c)
    }

    /// TOPIC_AUTHORIZATION_FAILED unless `operation` on the topic is allowed.
    pub(super) fn topic(&self, operation: Operation, topic: &str) -> Option<i16> {
        (!self.allows(operation, ResourceType::Topic, topic))
            .then_some(kafka::TOPIC_AUTHORIZATION_FAILED)
    }

    /// GROUP_AUTHORIZATION_FAILED unless `operation` on the group is allowed.
    pub(super) fn group(&self, operation: Operation, group: &str) -> Option<i16> {
        (!self.allows(operation, ResourceType::Group, group))
            .then_some(kafka::GROUP_AUTHORIZATION_FAILED)
    }

    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless `operation` on the
    /// transactional id is allowed.
    pub(super) fn transactional_id(&self, operation: Operation, id: &str) -> Option<i16> {
        (!self.allows(operation, ResourceType::TransactionalId, id))
            .then_some(kafka::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    }

    /// UNKNOWN_TOPIC_OR_PARTITION for a produce to a missing topic the
    /// client may not create (a produce would create it).
    pub(super) fn missing(&self, topic: &str) -> Option<i16> {
        let creates = self.allows(Operation::Create, ResourceType::Cluster, CLUSTER)
            || self.allows(Operation::Create, ResourceType::Topic, topic);
        (!creates && !self.shared.topic_exists(topic)).then_some(kafka::UNKNOWN_TOPIC_OR_PARTITION)
    }

    /// Who the client is: its session's principal, `User:ANONYMOUS` without.
    pub(super) fn principal(&self) -> &'a str {
        self.session
            .map_or("User:ANONYMOUS", |s| s.principal.as_str())
    }

    /// Whether the broker checks ACLs (`--authorize`).
    pub(super) fn authorizes(&self) -> bool {
        self.shared.config.security.authorize
    }

    /// The broker's registry, if it has one.
    pub(super) fn registry(&self) -> Option<&'a dyn crate::coord::Registry> {
        self.shared.registry.as_deref()
    }

    /// Whether the connection may write to some topic (an idempotent
    /// producer's InitProducerId).
    pub(super) fn writes_somewhere(&self) -> bool {
        self.session.is_none_or(|s| {
            crate::broker::auth::allows_any(self.shared, &s.principal, Operation::Write)
        })
    }
}

impl std::fmt::Debug for Access<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access").finish_non_exhaustive()
    }
}
