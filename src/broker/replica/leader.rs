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
    /// a replica only as leader; with `acks=all` only while the ISR has
    /// `min_isr` members (a single copy's ISR is itself, as a topic of
    /// replication factor 1 is on Kafka). `Ok` carries the leader epoch
    /// the append is made in (`None` for a single copy).
    pub(in crate::broker) fn may_append(
        &self,
        acks: i8,
        min_isr: u32,
    ) -> std::result::Result<Option<u32>, (ErrorCode, String)> {
        let Some(replica) = &self.replica else {
            if acks == crate::protocol::ACKS_ALL && min_isr > 1 {
                return Err((
                    ErrorCode::NotEnoughReplicas,
                    format!(
                        "{} [{}]: not enough replicas: a single copy, fewer than min.insync.replicas {min_isr} (the topic's, or --min-insync-replicas)",
                        self.topic, self.partition
                    ),
                ));
            }
            return Ok(None);
        };
        let role = replica.role();
        let l = self.leading(&role)?;
        if acks == crate::protocol::ACKS_ALL && (l.isr.len() as u64) < u64::from(min_isr) {
            return Err((
                ErrorCode::NotEnoughReplicas,
                format!(
                    "{} [{}]: not enough replicas: the in-sync replicas are {:?}, fewer than min.insync.replicas {min_isr} (the topic's, or --min-insync-replicas)",
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
                            "{name}: records from offset {base_offset} were appended, but the in-sync replicas shrank to {:?}, fewer than min.insync.replicas {min_isr}: they may be lost",
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
    /// leader) and once its watermark has reached its epoch's start.
    pub(in crate::broker) fn readable_end(
        &self,
        log: &crate::storage::log::Log,
    ) -> std::result::Result<u64, (ErrorCode, String)> {
        let Some(replica) = &self.replica else {
            return Ok(log.visible_offset());
        };
        let role = replica.role();
        let l = self.leading(&role)?;
        let hw = self.high_watermark.load(Ordering::Acquire);
        // A new leader's watermark starts from what it learned as a
        // follower, which may lag its predecessor's: until it reaches the
        // epoch's first offset (past anything the old leader showed), it
        // shows nothing, so that no reader sees the end go backwards
        // (Kafka's KIP-207).
        if hw < l.epoch_start {
            return Err((
                ErrorCode::LeaderNotAvailable,
                format!(
                    "{} [{}]: the new leader (epoch {}) has not yet confirmed its high watermark (at {hw}, needs {}): retry",
                    self.topic, self.partition, l.epoch, l.epoch_start
                ),
            ));
        }
        Ok(hw.min(log.visible_offset()))
    }
}

impl Partition {
    /// Whether a follower that follows this broker in leader epoch `epoch`
    /// may be answered (its fetch, or where an epoch ends: Kafka's fenced
    /// OffsetsForLeaderEpoch, KIP-320): only while this broker leads in
    /// that very epoch. `fenced_epoch` for an older one (the follower
    /// follows a deposed leader), `unknown_epoch` for a newer one (this
    /// broker has not heard of it yet), `not_leader` or
    /// `leader_not_available` when it does not lead.
    pub(in crate::broker) fn check_epoch(
        &self,
        role: &Role,
        epoch: Option<u32>,
    ) -> std::result::Result<(), (ErrorCode, String)> {
        let name = || format!("{} [{}]", self.topic, self.partition);
        let leading_epoch = self.leading(role)?.epoch;
        match epoch {
            Some(e) if e < leading_epoch => Err((
                ErrorCode::FencedEpoch,
                format!(
                    "{}: epoch {e} is over, this leader is in epoch {leading_epoch}",
                    name()
                ),
            )),
            Some(e) if e > leading_epoch => Err((
                ErrorCode::UnknownEpoch,
                format!(
                    "{}: epoch {e} is not known here yet (epoch {leading_epoch})",
                    name()
                ),
            )),
            Some(_) => Ok(()),
            None => Err((
                ErrorCode::InvalidRequest,
                format!(
                    "{}: a follower's request must carry its leader epoch",
                    name()
                ),
            )),
        }
    }

    /// Checks the leader epoch a client (a Kafka consumer) names in its
    /// request: a replica's must be the epoch it leads in (see
    /// [`Partition::check_epoch`]); none (`None`), or a partition without
    /// replicas, passes.
    pub(in crate::broker) fn check_client_epoch(
        &self,
        current: Option<u32>,
    ) -> std::result::Result<(), (ErrorCode, String)> {
        match (&self.replica, current) {
            (Some(r), Some(_)) => self.check_epoch(&r.role(), current),
            _ => Ok(()),
        }
    }

    /// [`Partition::epoch_end`] for a client (a Kafka consumer): one that
    /// names no epoch of its own (`None`) is answered by the leader alone.
    pub(in crate::broker) fn client_epoch_end(
        &self,
        current: Option<u32>,
        asked: u32,
    ) -> std::result::Result<Option<(u32, u64)>, (ErrorCode, String)> {
        match (&self.replica, current) {
            (Some(r), None) => {
                let log = self.lock();
                self.leading(&r.role())?;
                Ok(log.end_offset_for_epoch(asked))
            }
            _ => self.epoch_end(current, asked),
        }
    }

    /// Where leader epoch `asked` (or the largest epoch below it) ends in
    /// this partition's log, for a follower in epoch `current` (checked
    /// by [`Partition::check_epoch`] for a replica; a single copy answers
    /// anyone), read under the log's lock.
    pub(in crate::broker) fn epoch_end(
        &self,
        current: Option<u32>,
        asked: u32,
    ) -> std::result::Result<Option<(u32, u64)>, (ErrorCode, String)> {
        let log = self.lock();
        if let Some(r) = &self.replica {
            self.check_epoch(&r.role(), current)?;
        }
        Ok(log.end_offset_for_epoch(asked))
    }
}

impl Partition {
    /// A follower's fetch at `offset` in leader epoch `epoch`: refused
    /// unless `replica` is one of the partition's replicas and this broker
    /// leads in that very epoch (`fenced_epoch` for an older one: the
    /// follower follows a deposed leader; `unknown_epoch` for a newer one:
    /// this broker has not heard of it yet). Recorded as the follower's
    /// progress: it holds everything below `offset` durably, which may be
    /// more than this broker has fsynced (never more than it wrote); the
    /// high watermark stays at most this broker's durable end.
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
        // A follower holds at most what was written here (it is served
        // that before this broker's fsync): a claim past it is no progress.
        let written = self.lock().written_offset();
        {
            let mut role = r.role();
            self.check_epoch(&role, epoch)?;
            let durable = self.flushed_offset.load(Ordering::Acquire);
            if let Role::Leader(l) = &mut *role {
                if offset <= written {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::broker::flusher::flush_partition;
    use crate::broker::testing::{batch, replicated_partition, shared};
    use crate::protocol::{ACKS_ALL, ACKS_LEADER};

    const ME: &str = "broker-test";

    fn leading(epoch: u32, isr: &[&str], epoch_start: u64) -> Role {
        Role::Leader(Leading {
            epoch,
            version: 0,
            isr: isr.iter().map(|s| s.to_string()).collect(),
            epoch_start,
            since: Instant::now(),
            progress: BTreeMap::new(),
        })
    }

    fn code<T>(r: std::result::Result<T, (ErrorCode, String)>) -> Option<ErrorCode> {
        r.err().map(|(code, _)| code)
    }

    #[test]
    fn only_a_leader_takes_appends_and_acks_all_needs_the_minimum_isr() {
        let (_sim, shared) = shared();
        let follower = Role::Follower {
            leader: "b".into(),
            epoch: 3,
        };
        let p = replicated_partition(&shared, "f", &[ME, "b"], follower);
        assert_eq!(
            code(p.may_append(ACKS_LEADER, 1)),
            Some(ErrorCode::NotLeader)
        );
        let p = replicated_partition(&shared, "w", &[ME, "b"], Role::Waiting("x".into()));
        assert_eq!(
            code(p.may_append(ACKS_LEADER, 1)),
            Some(ErrorCode::LeaderNotAvailable)
        );
        let p = replicated_partition(&shared, "l", &[ME, "b"], leading(4, &[ME], 0));
        assert_eq!(
            p.may_append(ACKS_LEADER, 2),
            Ok(Some(4)),
            "acks=1: the leader's log"
        );
        assert_eq!(
            code(p.may_append(ACKS_ALL, 2)),
            Some(ErrorCode::NotEnoughReplicas)
        );
        assert_eq!(p.may_append(ACKS_ALL, 1), Ok(Some(4)));
    }

    #[test]
    fn a_clients_leader_epoch_must_be_the_one_led_in_unless_it_names_none() {
        let (_sim, shared) = shared();
        let p = replicated_partition(&shared, "c", &[ME, "b"], leading(4, &[ME], 0));
        assert_eq!(p.check_client_epoch(None), Ok(()));
        assert_eq!(p.check_client_epoch(Some(4)), Ok(()));
        assert_eq!(
            code(p.check_client_epoch(Some(3))),
            Some(ErrorCode::FencedEpoch)
        );
        assert_eq!(
            code(p.check_client_epoch(Some(5))),
            Some(ErrorCode::UnknownEpoch)
        );
        let follower = Role::Follower {
            leader: "b".into(),
            epoch: 4,
        };
        let f = replicated_partition(&shared, "d", &[ME, "b"], follower);
        assert_eq!(
            code(f.check_client_epoch(Some(4))),
            Some(ErrorCode::NotLeader)
        );
    }

    /// A single copy is an ISR of one: acks=all is refused under a
    /// min.insync.replicas above 1, as on a Kafka topic of replication
    /// factor 1; acks=1 is taken.
    #[test]
    fn a_single_copy_refuses_acks_all_under_a_larger_min_insync() {
        let (_sim, shared) = shared();
        let p = crate::broker::testing::partition(&shared, "one");
        assert_eq!(p.may_append(ACKS_ALL, 1), Ok(None));
        assert_eq!(
            code(p.may_append(ACKS_ALL, 2)),
            Some(ErrorCode::NotEnoughReplicas)
        );
        assert_eq!(p.may_append(ACKS_LEADER, 2), Ok(None));
    }

    #[test]
    fn an_acks_all_answer_is_refused_once_leadership_moved_or_the_isr_shrank_below_the_minimum() {
        let (_sim, shared) = shared();
        let p = replicated_partition(&shared, "t", &[ME, "b"], leading(4, &[ME, "b"], 0));
        assert_eq!(
            p.acks_all_refusal(Some(4), 0, 2, false),
            None,
            "still waiting"
        );
        assert_eq!(p.acks_all_refusal(Some(4), 0, 2, true), None, "replicated");
        assert_eq!(
            p.acks_all_refusal(Some(3), 0, 2, false).map(|r| r.0),
            Some(ErrorCode::NotLeader),
            "appended in an epoch this broker no longer leads"
        );
        *p.replica.as_ref().unwrap().role() = leading(4, &[ME], 0);
        assert_eq!(
            p.acks_all_refusal(Some(4), 0, 2, true).map(|r| r.0),
            Some(ErrorCode::NotEnoughReplicas)
        );
    }

    #[test]
    fn a_followers_fetch_is_fenced_by_epoch_and_raises_the_high_watermark() {
        let (_sim, shared) = shared();
        let p = replicated_partition(&shared, "t", &[ME, "b", "c"], leading(4, &[ME, "b"], 0));
        for _ in 0..3 {
            p.lock().append(&mut batch(), 0).unwrap();
        }
        shared.mark_dirty(&p, true);
        flush_partition(&shared, &p);
        assert_eq!(p.flushed_offset.load(Ordering::Acquire), 3);
        assert_eq!(
            p.high_watermark.load(Ordering::Acquire),
            0,
            "b has not fetched"
        );
        let fetched = |who, epoch, offset| code(p.replica_fetched(&shared, who, epoch, offset));
        assert_eq!(fetched("b", Some(3), 2), Some(ErrorCode::FencedEpoch));
        assert_eq!(fetched("b", Some(5), 2), Some(ErrorCode::UnknownEpoch));
        assert_eq!(fetched("z", Some(4), 2), Some(ErrorCode::InvalidRequest));
        assert_eq!(fetched(ME, Some(4), 2), Some(ErrorCode::InvalidRequest));
        assert_eq!(
            p.high_watermark.load(Ordering::Acquire),
            0,
            "refused fetches count not"
        );
        assert_eq!(fetched("b", Some(4), 2), None);
        assert_eq!(p.high_watermark.load(Ordering::Acquire), 2);
        assert_eq!(fetched("c", Some(4), 3), None);
        assert_eq!(
            p.high_watermark.load(Ordering::Acquire),
            2,
            "c is not in the ISR: it does not hold the watermark up or down"
        );
        assert_eq!(fetched("b", Some(4), 1), None);
        assert_eq!(
            p.high_watermark.load(Ordering::Acquire),
            2,
            "never backwards"
        );
        assert_eq!(fetched("b", Some(4), 3), None);
        assert_eq!(p.high_watermark.load(Ordering::Acquire), 3);
    }

    /// A follower served records before the leader's fsync may hold them
    /// first: its progress counts, but the high watermark waits for the
    /// leader's own flush, and then moves at once. A claim past what the
    /// leader wrote is no progress.
    #[test]
    fn a_follower_ahead_of_the_leaders_fsync_waits_for_it_at_the_high_watermark() {
        let progress = |p: &Partition| match &*p.replica.as_ref().unwrap().role() {
            Role::Leader(l) => l.progress.get("b").map(|g| g.offset),
            _ => None,
        };
        let (_sim, shared) = shared();
        let p = replicated_partition(&shared, "t", &[ME, "b"], leading(4, &[ME, "b"], 0));
        for _ in 0..3 {
            p.lock().append(&mut batch(), 0).unwrap();
        }
        p.lock().write_pending().unwrap();
        p.lock().append(&mut batch(), 0).unwrap();
        p.replica_fetched(&shared, "b", Some(4), 4).unwrap();
        p.replica_fetched(&shared, "b", Some(4), 5).unwrap();
        assert!(progress(&p).is_none(), "4 is appended, not written");
        p.replica_fetched(&shared, "b", Some(4), 3).unwrap();
        assert_eq!(progress(&p), Some(3), "5 was never written here");
        assert_eq!(
            p.high_watermark.load(Ordering::Acquire),
            0,
            "not durable here"
        );
        shared.mark_dirty(&p, true);
        flush_partition(&shared, &p);
        assert_eq!(
            p.high_watermark.load(Ordering::Acquire),
            3,
            "4 is b's to fetch"
        );
    }

    #[test]
    fn a_new_leader_shows_nothing_until_its_watermark_reaches_its_epochs_start() {
        let (_sim, shared) = shared();
        let p = replicated_partition(&shared, "t", &[ME, "b"], leading(4, &[ME, "b"], 2));
        for _ in 0..3 {
            p.lock().append(&mut batch(), 0).unwrap();
        }
        flush_partition(&shared, &p);
        p.high_watermark.store(1, Ordering::Release);
        assert_eq!(
            code(p.readable_end(&p.lock())),
            Some(ErrorCode::LeaderNotAvailable)
        );
        p.replica_fetched(&shared, "b", Some(4), 2).unwrap();
        assert_eq!(p.readable_end(&p.lock()), Ok(2));
    }
}
