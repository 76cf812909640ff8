//! Coordination: the registry through which brokers and consumer-group
//! members find each other (the paper's broker, consumer, ownership and
//! offset registries, plus each topic's placement and each partition's
//! replication state, changed by compare-and-set), the pure decisions
//! taken from it (Algorithm 1's partition assignment, the round-robin
//! placement of a topic's replicas), and the
//! two processes that act on them through clients of the brokers: a member
//! of a consumer group ([`group`]) and a producer routed to each
//! partition's broker ([`route`](mod@route)).
//!
//! [`Registry`] is the trait every caller holds, as an `Arc<dyn
//! Registry>`; [`dir::DirRegistry`] is its backend on a directory of one
//! host, and [`zk::ZkRegistry`] its backend on a ZooKeeper ensemble, for
//! many hosts. [`open`] opens either, by the form of its address.

pub mod acl;
pub mod broker_config;
pub(crate) mod cluster_id;
pub mod dir;
pub mod group;
pub mod log_start;
#[cfg(test)]
pub(crate) mod mem;
pub mod offsets_topic;
pub mod partitions_add;
pub mod producer_ids;
pub mod registry;
pub mod route;
pub mod spread;
pub mod topic_config;
pub mod topic_delete;
pub mod transactions;
pub mod zk;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;

pub use dir::DirRegistry;
pub use registry::{
    BrokerInfo, Ephemeral, Held, Lease, MemberInfo, Owner, PartitionState, Placement, Registry,
    Renewer, SessionState,
};
pub use route::{leaders, retriable, route, ClusterProducer, RegistryLocator};
pub use spread::{assign, place};
pub use zk::ZkRegistry;

/// The session timeout of a process that does not choose one (a broker,
/// a producer): a silent one loses its entries after this long.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The ZooKeeper address in `registry`, if it is one (`zk://...`).
pub fn zk_address(registry: &Path) -> Option<&str> {
    registry.to_str().filter(|r| r.starts_with("zk://"))
}

/// Opens the registry `registry`: a ZooKeeper ensemble
/// (`zk://HOST:PORT[,HOST:PORT...]/CHROOT`, with a session of
/// `session_timeout`), or else a directory, created if missing.
pub fn open(registry: impl AsRef<Path>, session_timeout: Duration) -> Result<Arc<dyn Registry>> {
    let registry = registry.as_ref();
    Ok(match zk_address(registry) {
        Some(address) => Arc::new(ZkRegistry::open(address, session_timeout)?),
        None => Arc::new(DirRegistry::open(registry)?.with_broker_lease(session_timeout)),
    })
}

/// Opens the registry `registry` only to look at it: creates nothing and
/// changes nothing (see [`DirRegistry::open_read_only`]).
pub fn open_read_only(registry: impl AsRef<Path>) -> Result<Arc<dyn Registry>> {
    let registry = registry.as_ref();
    Ok(match zk_address(registry) {
        Some(address) => Arc::new(ZkRegistry::open_read_only(address, SESSION_TIMEOUT)?),
        None => Arc::new(DirRegistry::open_read_only(registry)),
    })
}
