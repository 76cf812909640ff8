//! Setting a group's committed offsets while it has no live member
//! (`klog-consume -G GROUP --reset-offsets SPEC`).

use super::{bounds, routes, GroupConfig};
use crate::client::offset::{resolve_in, OffsetSpec};
use crate::client::Connections;
use crate::coord::offsets_topic::is_carry_over_refused;
use crate::coord::Registry;
use crate::error::{Error, Result};

/// A partition's committed offset before and after a reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetReset {
    /// The partition.
    pub partition: u32,
    /// The committed offset before, if any.
    pub before: Option<u64>,
    /// The committed offset now.
    pub offset: u64,
}

/// Sets the committed offset of every partition of `config.topic` in
/// `config.group` to where `spec` says (`beginning`, `end`, `N`, `-N`,
/// `@TIMESTAMP`), resolved against the brokers the registry knows (or the
/// fallback broker), as Kafka's `kafka-consumer-groups --reset-offsets`
/// does; for a read_committed group (`config.fetch`) the end is each
/// partition's last stable offset, as its members' is. Refused with [`Error::GroupActive`] while the group has a member
/// whose process lives; every partition is resolved before any is set.
pub fn reset_offsets(
    registry: &dyn Registry,
    config: &GroupConfig,
    spec: OffsetSpec,
) -> Result<Vec<OffsetReset>> {
    let (group, topic) = (&config.group, &config.topic);
    let sessions = registry.sessions(group)?;
    if !sessions.is_empty() {
        let members: Vec<String> = sessions
            .iter()
            .map(|(m, lease)| {
                let silent = if lease.expired() { ", silent" } else { "" };
                format!("member {} (pid {}{silent})", m.member, m.pid)
            })
            .collect();
        return Err(Error::GroupActive {
            group: group.clone(),
            members: members.join(", "),
        });
    }
    if spec == OffsetSpec::Stored {
        return Err(Error::Config(
            "offsets are reset to beginning, end, N, -N or @TIMESTAMP".into(),
        ));
    }
    let mut conns = Connections::new();
    let routes = routes(registry, topic, &mut conns)?;
    let bounds = bounds(&routes, topic, &mut conns, config.fetch.read_committed)?;
    let mut resets = Vec::with_capacity(bounds.len());
    for (p, (&extent, addr)) in (0u32..).zip(bounds.iter().zip(&routes)) {
        let name = format!("{topic} [{p}]");
        let offset = resolve_in(extent, spec, &name, |ts| {
            conns.with(addr, |c| c.list_offsets(topic, p, ts))
        })?;
        let before = match registry.committed(group, topic, p) {
            // Damaged: what the reset is for.
            Err(e) if matches!(e, Error::Corrupt { .. }) || is_carry_over_refused(&e) => {
                crate::diag::line(format_args!("% {e}: the reset replaces it"));
                None
            }
            before => before?,
        };
        resets.push(OffsetReset {
            partition: p,
            before,
            offset,
        });
    }
    // Offsets of transactions not yet written would be taken over these.
    crate::coord::transactions::forget_committed(registry, group, (Some(topic), None))?;
    for r in &resets {
        registry.reset_offset(group, topic, r.partition, r.offset)?;
    }
    Ok(resets)
}

/// An `-o` policy as the user wrote it.
pub(super) fn spec_name(spec: OffsetSpec) -> String {
    match spec {
        OffsetSpec::Beginning | OffsetSpec::Stored => "beginning".into(),
        OffsetSpec::End => "end".into(),
        OffsetSpec::Absolute(n) => n.to_string(),
        OffsetSpec::FromEnd(n) => format!("-{n}"),
        OffsetSpec::Timestamp(ts) => format!("@{ts}"),
    }
}
