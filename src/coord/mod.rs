//! Coordination: the registry through which brokers and consumer-group
//! members find each other (the paper's broker, consumer, ownership and
//! offset registries), the pure decisions taken from it (Algorithm 1's
//! partition assignment, the round-robin placement of a topic), and the
//! two processes that act on them through clients of the brokers: a member
//! of a consumer group ([`group`]) and a producer routed to each
//! partition's broker ([`route`](mod@route)).
//!
//! [`Registry`] is the trait every caller holds, as an `Arc<dyn
//! Registry>`; [`dir::DirRegistry`] is its backend on a directory of one
//! host. A second backend adds a module beside `dir` and an opener beside
//! [`open`]. [`zk`] is the blocking ZooKeeper session the ZooKeeper
//! backend will be built on.

pub mod dir;
pub mod group;
#[cfg(test)]
pub(crate) mod mem;
pub mod registry;
pub mod route;
pub mod spread;
pub mod zk;

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::Result;

pub use dir::DirRegistry;
pub use registry::{BrokerInfo, Ephemeral, Held, Lease, MemberInfo, Owner, Placement, Registry};
pub use route::{route, ClusterProducer};
pub use spread::{assign, place};

/// Opens (creating) the registry directory `dir`, for a caller that only
/// needs the [`Registry`].
pub fn open(dir: impl Into<PathBuf>) -> Result<Arc<dyn Registry>> {
    Ok(Arc::new(DirRegistry::open(dir)?))
}

/// Opens the registry at `dir` only to look at it (see
/// [`DirRegistry::open_read_only`]).
pub fn open_read_only(dir: impl Into<PathBuf>) -> Arc<dyn Registry> {
    Arc::new(DirRegistry::open_read_only(dir))
}
