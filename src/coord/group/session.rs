//! A member's session: its id, and the errors that say the session (or
//! a claim made in it) was lost, or only that the registry was late.

use crate::error::{Error, ZkCause};

/// Whether `e` says that the session or a claim was lost.
pub(crate) fn lost(e: &Error) -> bool {
    matches!(
        e,
        Error::Expired { .. }
            | Error::Fenced { .. }
            | Error::SessionLost { .. }
            | Error::ZooKeeper {
                cause: ZkCause::SessionExpired | ZkCause::Closed,
                ..
            }
    )
}

/// Whether `e` says only that the registry did not answer in time (a
/// ZooKeeper connection broke, or the ensemble is electing a leader): the
/// step is tried again later, and nothing is given up.
pub(crate) fn transient(e: &Error) -> bool {
    matches!(
        e,
        Error::ZooKeeper {
            cause: ZkCause::ConnectionLoss(_) | ZkCause::Deadline { .. },
            ..
        }
    )
}

/// A unique member id: host-pid-nanos.
pub(super) fn member_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let host =
        std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "host".into());
    let host: String = host
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("{host}-{}-{nanos:09}", std::process::id())
}
