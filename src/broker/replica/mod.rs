//! Replication: a partition of a topic placed with more than one replica
//! has a leader and followers (Kafka's design, 0.8 on; leader epochs as
//! KIP-101 and KIP-279 have them).
//!
//! # Roles
//!
//! The registry holds each replicated partition's state (leader, leader
//! epoch, in-sync replicas), changed only by compare-and-set on its
//! version. Every broker holding a replica runs the replica manager
//! ([`manager`]): every [`POLL`] (and at once when the registry's watches
//! fire) it reads the states of its partitions and the live brokers and
//! [`decide`]s its role in each:
//!
//! - **Leader**, only in an epoch it won itself by compare-and-set. It
//!   stamps its epoch into every batch it appends, answers producers and
//!   consumers, and serves followers every record it has written to its
//!   files, before its own fsync (Kafka's followers fetch from the log
//!   end): the two fsyncs overlap, and an acks=all answer waits about one
//!   fsync and a round trip, not two fsyncs in a row.
//! - **Follower** of the live leader the state names: it refuses producers
//!   and consumers (`not_leader`, naming the leader), truncates its log to
//!   where it stops agreeing with the leader's (by epoch, never by high
//!   watermark), and then fetches the leader's batches and appends them byte
//!   for byte, fsyncing before its next fetch.
//! - **Waiting**: its registry session is in doubt (others may be electing
//!   right now), or the leader is gone and this replica is not in sync.
//!
//! # Election
//!
//! When the leader's registration disappears (its directory lock released,
//! its ZooKeeper session expired), each live member of the ISR proposes
//! itself as leader one epoch up, with the dead removed from the ISR; the
//! version check lets exactly one win. With no ISR member alive the
//! partition is offline (no unclean election): the state keeps its last
//! ISR, and the first of them to come back takes it. A broker the state
//! still names after a restart takes a new epoch: it never resumes an old
//! one.
//!
//! # A replica that lost records
//!
//! A replica whose log was cut below what it held durably (damage found
//! at open, which the broker cuts itself: [`heal`]; or `klog-recover`)
//! is marked ([`crate::storage::refetch`]) and may lack acknowledged
//! records. It never leads and never proposes itself: in the ISR, it
//! leaves it by compare-and-set (a live leader keeps its epoch and
//! adopts the smaller ISR; otherwise nobody leads one epoch up and the
//! ISR's others elect one), unless it is the ISR's only member, which
//! keeps the partition offline; out of it, it follows. Its follower
//! cuts back to the start of a leader's batch its end falls inside
//! (recovery keeps the whole records of a damaged batch, or of a torn
//! one: any follower does this, marked for the while when it was not),
//! and the leader
//! takes it back in sync as any follower, once it holds everything below
//! the high watermark: then the mark goes. A torn tail is not marked: it
//! holds only bytes never fsynced, and no record is acknowledged before
//! it is durable on every in-sync replica.
//!
//! # In-sync replicas and the high watermark
//!
//! A follower's fetch offset means "durable here" (never past what the
//! leader wrote). The leader keeps each follower's [`Progress`]; the high
//! watermark is the lowest offset durable on every ISR member, the
//! leader's own fsynced end among them, and never moves backwards. A
//! follower may hold records its leader then loses in a crash before its
//! fsync: they were never acknowledged nor shown, and the follower cuts
//! them when it truncates to its next leader's epochs, or keeps them if it
//! leads. A new leader's watermark starts from what it learned
//! as a follower, which may lag its predecessor's; until it reaches the
//! offset where the new epoch began (past anything an earlier leader
//! showed) consumers get `leader_not_available` and retry (Kafka's
//! KIP-207), so no reader sees the end go backwards. Consumers read only below it, and an `acks=all`
//! produce is answered once it passes the request's records, while this
//! broker still leads in the epoch that appended them and the ISR has at
//! least `--min-insync-replicas` members (else `not_enough_replicas`). A
//! follower leaves the ISR when its registration is gone or it has not
//! caught up for `--replica-lag-time`; it joins again once it fetched, in
//! the leader's epoch, at or past the high watermark. Both by
//! compare-and-set.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::storage::refetch::Refetch;
use crate::sync::lock;

mod decide;
pub(super) mod follower;
pub(super) mod heal;
mod leader;
pub(super) mod manager;

pub(crate) use decide::{decide, high_watermark, isr_change, Decision, Facts, Progress};

/// How often the replica manager looks at the registry, at most.
pub(super) const POLL: Duration = Duration::from_millis(100);

/// Why a replica just opened serves nothing yet.
const FIRST_LOOK: &str = "it has not read its state in the registry yet";

/// A replica's role in its partition.
#[derive(Debug, Clone)]
pub(crate) enum Role {
    /// Serving nothing, for this reason.
    Waiting(String),
    /// Leading.
    Leader(Leading),
    /// Following `leader` in `epoch`.
    Follower {
        /// The leader's broker id.
        leader: String,
        /// Its epoch.
        epoch: u32,
    },
}

/// A leader's state.
#[derive(Debug, Clone)]
pub(crate) struct Leading {
    /// Its epoch.
    pub(crate) epoch: u32,
    /// The registry state's version that holds this epoch and ISR.
    pub(crate) version: u64,
    /// The in-sync replicas, this broker among them.
    pub(crate) isr: Vec<String>,
    /// The log's next offset when it took the lead: its epoch's first.
    pub(crate) epoch_start: u64,
    /// When it took the lead.
    pub(crate) since: Instant,
    /// Each follower's fetches in this epoch.
    pub(crate) progress: BTreeMap<String, Progress>,
}

/// A replicated partition's replication side.
#[derive(Debug)]
pub(crate) struct Replica {
    /// Its replicas, by broker id, the preferred leader first.
    pub(crate) replicas: Vec<String>,
    role: Mutex<Role>,
    /// Its log was cut below what it held durably (damage): it may not
    /// lead, nor stay in sync, until a leader takes it back in sync
    /// ([`crate::storage::refetch`]).
    pub(crate) refetch: Mutex<Option<Refetch>>,
    /// Held while a thread decides its role (the manager, or a produce
    /// settling a partition just opened): one decision at a time.
    pub(crate) deciding: Mutex<()>,
}

impl Replica {
    /// A replica among `replicas`, waiting for its first look at the
    /// registry; `refetch` when its log was cut below what it held.
    pub(crate) fn new(replicas: Vec<String>, refetch: Option<Refetch>) -> Replica {
        Replica {
            replicas,
            role: Mutex::new(Role::Waiting(FIRST_LOOK.into())),
            refetch: Mutex::new(refetch),
            deciding: Mutex::new(()),
        }
    }

    /// Whether it has not looked at its state in the registry yet (just
    /// opened).
    pub(crate) fn before_first_look(&self) -> bool {
        matches!(&*self.role(), Role::Waiting(why) if why == FIRST_LOOK)
    }

    /// Its role, locked. Taken after the partition's log lock, never
    /// before it.
    pub(crate) fn role(&self) -> MutexGuard<'_, Role> {
        lock(&self.role)
    }
}
