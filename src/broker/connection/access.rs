//! The ACLs' part of klog's requests (`--authorize`): which request a
//! client's principal may make, and why not. Metadata is filtered
//! instead, topic by topic.

use crate::broker::auth::Session;
use crate::broker::shared::Shared;
use crate::protocol::{self, Request};

/// Why the ACLs refuse a request (`None`: allowed). Metadata is
/// filtered instead (see [`super::requests`]).
pub(super) fn authorize(
    shared: &Shared,
    session: &mut Session,
    request: &Request<'_>,
) -> Option<String> {
    use crate::coord::acl::{Operation as Op, ResourceType as R, CLUSTER};
    let topic = |op: Op, topic: &str| {
        (!session.allows(shared, op, (R::Topic, topic)))
            .then(|| format!("{} may not {op} topic {topic:?}", session.principal))
    };
    match request {
        // A produce creates a missing topic: only with create.
        Request::Produce {
            topic: t,
            transactional_id: id,
            ..
        } => topic(Op::Write, t)
            .or_else(|| {
                let creates = session.allows(shared, Op::Create, (R::Cluster, CLUSTER))
                    || session.allows(shared, Op::Create, (R::Topic, t));
                (!creates && !shared.topic_exists(t))
                    .then(|| format!("{} may not create topic {t:?}", session.principal))
            })
            .or_else(|| super::txn::produce_denied(shared, session, id)),
        Request::Txn(t) => super::txn::denied(shared, session, t),
        Request::Fetch {
            replica_id: "",
            partitions,
            ..
        } => partitions.iter().find_map(|p| topic(Op::Read, &p.topic)),
        Request::Fetch { replica_id, .. } => session.may_replicate(shared, replica_id).err(),
        Request::ListOffsets { topic: t, .. } => topic(Op::Describe, t),
        // A follower asks it before it fetches: cluster_action will do.
        Request::OffsetsForLeaderEpoch { .. }
            if session.allows(shared, Op::ClusterAction, (R::Cluster, CLUSTER)) =>
        {
            None
        }
        Request::OffsetsForLeaderEpoch { topic: t, .. } => topic(Op::Describe, t),
        Request::CreateTopic { topic: t, .. } => {
            let cluster = session.allows(shared, Op::Create, (R::Cluster, CLUSTER));
            (!cluster && !session.allows(shared, Op::Create, (R::Topic, t)))
                .then(|| format!("{} may not create topic {t:?}", session.principal))
        }
        Request::Registry => (!session.allows(shared, Op::Describe, (R::Cluster, CLUSTER)))
            .then(|| format!("{} may not describe the cluster", session.principal)),
        Request::InitProducerId => {
            (!crate::broker::auth::allows_any(shared, &session.principal, Op::Write))
                .then(|| format!("{} may write to no topic", session.principal))
        }
        // A coordinator's, another broker: cluster_action.
        Request::WriteTxnMarker(_) => {
            (!session.allows(shared, Op::ClusterAction, (R::Cluster, CLUSTER)))
                .then(|| format!("{} may not write transaction markers", session.principal))
        }
        Request::OffsetCommit(_) | Request::OffsetFetch(_) => {
            offsets_denied(shared, session, request)
        }
        Request::Metadata { .. }
        | Request::SaslHandshake { .. }
        | Request::SaslAuthenticate { .. } => None,
    }
}

/// The ACLs' part of offset_commit and offset_fetch, as Kafka's: a
/// commit reads the group and the topic (a delete deletes in the group),
/// a fetch describes the group; a broker (cluster_action) asks for the
/// Kafka clients whose groups it coordinates.
fn offsets_denied(shared: &Shared, session: &Session, request: &Request<'_>) -> Option<String> {
    use crate::coord::acl::{Operation as Op, ResourceType as R, CLUSTER};
    if session.allows(shared, Op::ClusterAction, (R::Cluster, CLUSTER)) {
        return None;
    }
    let who = &session.principal;
    match request {
        Request::OffsetCommit(c) => {
            let op = match c.mode {
                protocol::CommitMode::Delete => Op::Delete,
                _ => Op::Read,
            };
            let member = session.allows(shared, op, (R::Group, &c.group))
                && session.allows(shared, Op::Read, (R::Topic, &c.topic));
            let (g, t) = (&c.group, &c.topic);
            (!member)
                .then(|| format!("{who} may not commit offsets of group {g:?} for topic {t:?}"))
        }
        Request::OffsetFetch(f) => (!session.allows(shared, Op::Describe, (R::Group, &f.group)))
            .then(|| format!("{who} may not describe group {:?}", f.group)),
        _ => None,
    }
}
