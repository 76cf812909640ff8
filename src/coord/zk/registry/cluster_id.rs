//! The cluster id of a ZooKeeper registry ([`crate::coord::Registry::cluster_id`]).

use super::ZkRegistry;
use crate::coord::zk::{ZkCause, ZkMode};
use crate::error::{Error, Result};

/// In `/cluster/id`, as Kafka keeps its own (`{"version":"1",
/// "id":ID}`); the first create wins, and every process reads it back.
pub(super) fn read_or_make(registry: &ZkRegistry) -> Result<String> {
    let path = "/cluster/id";
    if registry.data(path)?.is_none() {
        registry.writable()?;
        registry.parents(path)?;
        let id = crate::coord::cluster_id::new();
        let json = serde_json::json!({"version": "1", "id": id}).to_string();
        let session = registry.live()?;
        match session.create(
            path,
            json.as_bytes(),
            ZkMode::Persistent,
            registry.deadline(),
        ) {
            // Made by another (or by this one, its reply lost): read back.
            Ok(_)
            | Err(Error::ZooKeeper {
                cause: ZkCause::NodeExists | ZkCause::ConnectionLoss(_),
                ..
            }) => {}
            Err(e) => return Err(e),
        }
    }
    let Some((bytes, _)) = registry.data(path)? else {
        return Err(Error::Vanished {
            what: registry.named(path).display().to_string(),
        });
    };
    let id = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| Some(v.get("id")?.as_str()?.to_string()))
        .filter(|id| crate::coord::cluster_id::valid(id));
    id.ok_or_else(|| Error::Corrupt {
        path: registry.named(path),
        position: 0,
        reason: format!(
            "not a cluster id ({{\"version\":\"1\",\"id\":ID}}): {}",
            crate::coord::cluster_id::DAMAGED_HINT
        ),
    })
}
