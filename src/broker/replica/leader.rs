//! A replica's answers to clients and followers: who may append, what a
//! consumer may read (below the high watermark, from the leader only),
//! when an acks=all answer is a success, and a follower's fetch checked
//! against the leader's epoch and recorded as its progress.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{Leading, Progress, Role};
use crate::broker::shared::{Partition, Shared};
use crate::protocol::ErrorCode;

impl Partition {
    /// Whether a producer may append now (asked under the log's lock, so
    /// that no change of role passes between the answer and the append):
    /// a single copy always; a replica only as leader, and with `acks=all`
    /// only while the ISR has `min_isr` members. `Ok` carries the leader
    /// epoch the append is made in (`None` for a single copy).
    pub(in crate::broker) fn may_append(
        &self,
        acks: i8,
        min_isr: u32,
    ) -> std::result::Result<Option<u32>, (ErrorCode, String)> {
        let Some(replica) = &self.replica else {
            return Ok(None);
        };
        let role = replica.role();
        let l = self.leading(&role)?;
        if acks == crate::protocol::ACKS_ALL && (l.isr.len() as u64) < u64::from(min_isr) {
            return Err((
                ErrorCode::NotEnoughReplicas,
                format!(
                    "{} [{}]: not enough replicas: the in-sync replicas are {:?}, fewer than --min-insync-replicas {min_isr}",
                    self.topic, self.partition, l.isr
                ),
            ));
        }
        Ok(Some(l.epoch))
    }

    /// Why an acks=all answer for records appended in leader epoch
    /// `epoch` from `base_offset` cannot be a success, if it cannot: this
    /// broker no longer leads in that epoch (the records may or may not
    /// be kept), or, once they are below the high watermark, the ISR has
    /// fewer than `min_isr` members (they may be lost with this broker).
    pub(in crate::broker) fn acks_all_refusal(
        &self,
        epoch: Option<u32>,
        base_offset: u64,
        min_isr: u32,
        complete: bool,
    ) -> Option<(ErrorCode, String)> {
        let replica = self.replica.as_ref()?;
        let role = replica.role();
        let name = format!("{} [{}]", self.topic, self.partition);
        match &*role {
            Role::Leader(l) if Some(l.epoch) == epoch => {
                let short = (l.isr.len() as u64) < u64::from(min_isr);
                (complete && short).then(|| {
                    (
                        ErrorCode::NotEnoughReplicas,
                        format!(
                            "{name}: records from offset {base_offset} were appended, but the in-sync replicas shrank to {:?}, fewer than --min-insync-replicas {min_isr}: they may be lost",
                            l.isr
                        ),
                    )
                })
            }
            _ => Some((
                ErrorCode::NotLeader,
                format!(
                    "{name}: this broker stopped leading before records from offset {base_offset} were replicated: they may or may not be kept"
                ),
            )),
        }
    }

    /// The leader's state, or the error a client gets from a replica that
    /// does not lead.
    pub(in crate::broker) fn leading<'r>(
        &self,
        role: &'r Role,
    ) -> std::result::Result<&'r Leading, (ErrorCode, String)> {
        let name = || format!("{} [{}]", self.topic, self.partition);
        match role {
            Role::Leader(l) => Ok(l),
            Role::Follower { leader, epoch } => Err((
                ErrorCode::NotLeader,
                format!(
                    "{}: led by broker {leader} (epoch {epoch}), not this one",
                    name()
                ),
            )),
            Role::Waiting(why) => Err((
                ErrorCode::LeaderNotAvailable,
                format!("{}: no leader here: {why}", name()),
            )),
        }
    }
}

impl Partition {
    /// One past the last record a consumer may read here: the log's
    /// visible end for a single copy; for a replica, the high watermark,
    /// and only while it leads (a follower's records are read from its
    /// leader).
    pub(in crate::broker) fn readable_end(
        &self,
        log: &crate::storage::log::Log,
    ) -> std::result::Result<u64, (ErrorCode, String)> {
        let Some(replica) = &self.replica else {
            return Ok(log.visible_offset());
        };
        self.leading(&replica.role())?;
        let hw = self.high_watermark.load(Ordering::Acquire);
        Ok(hw.min(log.visible_offset()))
    }
}

impl Partition {
    /// A follower's fetch at `offset` in leader epoch `epoch`: refused
    /// unless `replica` is one of the partition's replicas and this broker
    /// leads in that very epoch (`fenced_epoch` for an older one: the
    /// follower follows a deposed leader; `unknown_epoch` for a newer one:
    /// this broker has not heard of it yet). Recorded as the follower's
    /// progress: it holds everything below `offset` durably.
    pub(in crate::broker) fn replica_fetched(
        &self,
        shared: &Shared,
        replica: &str,
        epoch: Option<u32>,
        offset: u64,
    ) -> std::result::Result<(), (ErrorCode, String)> {
        let name = || format!("{} [{}]", self.topic, self.partition);
        let Some(r) = &self.replica else {
            return Err((
                ErrorCode::InvalidRequest,
                format!(
                    "{}: a single copy has no followers (broker {replica} asked)",
                    name()
                ),
            ));
        };
        if !r.replicas.iter().any(|id| id == replica) || replica == shared.broker_id {
            return Err((
                ErrorCode::InvalidRequest,
                format!(
                    "{}: broker {replica} is not a follower of it ({:?})",
                    name(),
                    r.replicas
                ),
            ));
        }
        {
            let mut role = r.role();
            let leading_epoch = self.leading(&role)?.epoch;
            match epoch {
                Some(e) if e < leading_epoch => {
                    return Err((
                        ErrorCode::FencedEpoch,
                        format!(
                            "{}: epoch {e} is over, this leader is in epoch {leading_epoch}",
                            name()
                        ),
                    ))
                }
                Some(e) if e > leading_epoch => {
                    return Err((
                        ErrorCode::UnknownEpoch,
                        format!(
                            "{}: epoch {e} is not known here yet (epoch {leading_epoch})",
                            name()
                        ),
                    ))
                }
                Some(_) => {}
                None => {
                    return Err((
                        ErrorCode::InvalidRequest,
                        format!("{}: a follower's fetch must carry its leader epoch", name()),
                    ))
                }
            }
            let durable = self.flushed_offset.load(Ordering::Acquire);
            if let Role::Leader(l) = &mut *role {
                if offset <= durable {
                    let previous = l.progress.get(replica);
                    let progress = Progress::fetched(previous, offset, durable, Instant::now());
                    l.progress.insert(replica.to_string(), progress);
                }
            }
        }
        shared.advance_high_watermark(self);
        Ok(())
    }
}
