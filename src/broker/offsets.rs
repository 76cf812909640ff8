//! Committed offsets in the offsets topic, `__consumer_offsets`
//! ([`crate::coord::offsets_topic`]): the broker that leads a group's
//! partition of it answers the group's offset_commit and offset_fetch
//! requests ([`crate::protocol`]) from a table it builds by reading the
//! partition, and writes each commit as a record of it, durable on the
//! partition's in-sync replicas (`acks=all`) before the answer.
//!
//! - **The topic** is created at the first request that needs it, by the
//!   broker that gets it: `--offsets-topic-partitions` partitions,
//!   `--offsets-topic-replication-factor` replicas (at most the live
//!   brokers), `cleanup.policy=compact`, `min.insync.replicas` 2 where
//!   it keeps 3 replicas or more (one broker down stops no commit), 1
//!   below. It is a topic like any other:
//!   replicated, compacted by the cleaner, readable by consumers.
//! - **The table** of a partition is built again whenever this broker's
//!   leadership of it changes (a new leader epoch): read from the log's
//!   start to its end, each key's last record. Only the leader writes, one
//!   request at a time per partition: a check and its append are atomic.
//! - **Fencing**: every record carries the generation of the committer's
//!   claim of the partition in the registry. A claim's first word is a
//!   fence (a record of its generation); a commit, reset or delete of an
//!   older generation than the one stored is refused (`commit_fenced`).
//!   So a member that lost a partition never commits past the claim that
//!   took it over, however late its commit arrives, on any leader.
//! - **Carried over**: a group with no record here has its offsets read
//!   from the registry (where klog kept them before) once, and written as
//!   records, before its first request is answered; the registry's are
//!   never read again for it. A registry that cannot be read then refuses
//!   the request (the client asks again).
//! - **Bounds**: at most [`limits::COMMITTED_OFFSETS_MAX`] keys a
//!   partition; a commit that would add one past that is refused
//!   `limit_reached`.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::connection::writer::durable;
use super::shared::{error_code, Appended, Partition, Shared};
use crate::coord::offsets_topic::TopicRegistry;
use crate::coord::offsets_topic::{
    encode_generation, encode_key, encode_value, partition_of, replay, Committed, OffsetKey,
    OffsetsTable, CARRY_OVER_REFUSED, CLUSTER_HEADER, GENERATION_HEADER, OFFSETS_TOPIC,
};
use crate::limits;
use crate::protocol::{CommitMode, ErrorCode, OffsetCommit, OffsetFetch, ACKS_ALL};
use crate::storage::record::BatchBuilder;
use crate::sync::lock;

pub(in crate::broker) mod slots;

use slots::Loaded;

/// The most groups a partition's table remembers having carried over
/// (or found nothing to carry) in a leadership.
const CARRIED_GROUPS_MAX: usize = 100_000;

/// A refusal: the error code and why.
type Refusal = (ErrorCode, String);

/// A record to write: a key and its value (`None`: a tombstone).
type Write = (OffsetKey, Option<Committed>);

/// Answers an offset_commit: the offset stored before.
pub(super) fn commit(shared: &Shared, c: &OffsetCommit) -> Result<Option<u64>, Refusal> {
    let deadline = deadline(shared);
    let (part, slot) = group_partition(shared, &c.group)?;
    let key = OffsetKey {
        group: c.group.clone(),
        topic: c.topic.clone(),
        partition: c.partition,
    };
    let replaced = matches!(c.mode, CommitMode::Reset | CommitMode::Delete).then_some(&key);
    // The registry's current claim, read only when the request needs it
    // and never under the table's lock: a registry that hangs stalls this
    // request only, not the partition's other commits.
    let mut claim = Claim::Unread;
    let mut loaded = loop {
        let loaded = ready(shared, (&part, &slot), (&c.group, replaced), deadline)?;
        let cluster = loaded.cluster.as_deref();
        if claim == Claim::Unread && needs_claim(&loaded.table, &key, c.generation, cluster) {
            drop(loaded);
            claim = current_claim(shared, &key);
            continue;
        }
        break loaded;
    };
    let before = loaded.table.get(&key).and_then(|s| s.offset);
    let write = planned(&loaded.table, (&key, loaded.cluster.as_deref()), c, claim)?;
    let writes: Vec<Write> = write.map(|w| (key, w)).into_iter().collect();
    // Nothing to write (the offset is there already): the answer still
    // waits for the records before it, which a retry may be asking after.
    write_records(shared, &part, &mut loaded, writes)?;
    let last = loaded.last;
    drop(loaded);
    settle(&part, &slot, last, deadline)?;
    Ok(before)
}

/// Whether a request of `generation` for `key` is believed only if the
/// registry's current claim has it: it is newer than the one stored.
fn needs_claim(
    table: &OffsetsTable,
    key: &OffsetKey,
    generation: u64,
    cluster: Option<&str>,
) -> bool {
    table.fence(key, cluster).is_none_or(|f| f < generation)
}

/// The cluster id of the broker's registry (`None`: it has none), read
/// at each new leadership of a partition: a registry rebuilt, or its id
/// mended, is seen at the next one.
fn cluster_id(shared: &Shared) -> Result<Option<String>, Refusal> {
    let Some(registry) = shared.registry.as_deref() else {
        return Ok(None);
    };
    let id = registry.cluster_id();
    id.map(Some).map_err(|e| (error_code(&e), e.to_string()))
}

/// What the registry says of a key's claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// Not asked (yet): believes no generation.
    Unread,
    /// The broker has no registry: every generation is believed.
    NoRegistry,
    /// The current claim's generation, if there is a claim.
    Current(Option<u64>),
}

/// The registry's current claim of `key`.
fn current_claim(shared: &Shared, key: &OffsetKey) -> Claim {
    let Some(registry) = shared.registry.as_deref() else {
        return Claim::NoRegistry;
    };
    let owner = registry.owner(&key.group, &key.topic, key.partition);
    Claim::Current(owner.map(|o| o.generation))
}

/// What a commit writes for `key` (`None`: nothing; `Some(None)`: a
/// tombstone), or why it is refused: a later claim's generation is
/// stored, or its generation is newer than the one stored and is not
/// `claim`, the registry's current claim's, read when [`needs_claim`]
/// (only a claim's fence brings one in).
fn planned(
    table: &OffsetsTable,
    (key, cluster): (&OffsetKey, Option<&str>),
    c: &OffsetCommit,
    claim: Claim,
) -> Result<Option<Option<Committed>>, Refusal> {
    let fenced = |why: String| (ErrorCode::CommitFenced, why);
    table
        .check(key, c.generation, cluster)
        .map_err(|e| fenced(e.to_string()))?;
    let stored = table.get(key);
    let before = stored.and_then(|s| s.offset);
    let generation = c.generation;
    if needs_claim(table, key, generation, cluster) {
        let current = match claim {
            Claim::NoRegistry => Some(generation),
            Claim::Current(current) => current,
            Claim::Unread => None,
        };
        if current != Some(generation) {
            // The message ends with the current generation (0: none).
            let now = current.unwrap_or(0);
            return Err(fenced(format!(
                "generation {generation} of {} [{}] in group {} is no claim the registry holds: the current is {now}",
                key.topic, key.partition, key.group
            )));
        }
    }
    // The fence moves to this generation: a newer one, the first of this
    // cluster's registry (one rebuilt since the stored record), or the
    // same, said of its cluster at last (a record of an older build).
    let moves =
        stored.is_none_or(|s| s.generation != generation || s.cluster.as_deref() != cluster);
    let record = |offset| committed(offset, generation, cluster);
    let write = match c.mode {
        CommitMode::Commit if before.is_some_and(|b| b >= c.offset) => {
            moves.then(|| record(before))
        }
        CommitMode::Commit | CommitMode::Reset => Some(record(Some(c.offset))),
        CommitMode::Fence => moves.then(|| record(before)),
        // A deleted offset keeps its fence: a record with no offset.
        CommitMode::Delete if before.is_none() && !moves => None,
        CommitMode::Delete => Some(record(None)),
    };
    if stored.is_none() && write.is_some() && table.len() >= limits::COMMITTED_OFFSETS_MAX {
        let why = format!(
            "{OFFSETS_TOPIC} holds {} committed offsets in this partition, the most it holds",
            limits::COMMITTED_OFFSETS_MAX
        );
        return Err((ErrorCode::LimitReached, why));
    }
    Ok(write.map(Some))
}

/// Waits until `last` is durable; a failure other than time running out
/// (the records were taken back: a full disk, a failed write, a lost
/// leadership) has the table read again from the log at its next use.
fn settle(
    part: &Partition,
    slot: &Mutex<Loaded>,
    last: Option<Appended>,
    deadline: Instant,
) -> Result<(), Refusal> {
    let Some(last) = last else {
        return Ok(());
    };
    match durable(part, &last, deadline) {
        Ok(_) => Ok(()),
        Err((ErrorCode::Timeout, why)) => Err((ErrorCode::Timeout, why)),
        Err(refusal) => {
            lock(slot).epoch = None;
            Err(refusal)
        }
    }
}

/// Answers an offset_fetch: (topic, partition, offset), sorted.
pub(super) fn fetch(shared: &Shared, f: &OffsetFetch) -> Result<Vec<(String, u32, u64)>, Refusal> {
    let deadline = deadline(shared);
    let (part, slot) = group_partition(shared, &f.group)?;
    let loaded = ready(shared, (&part, &slot), (&f.group, None), deadline)?;
    let offsets: Vec<_> = loaded
        .table
        .group(&f.group)
        .into_iter()
        .filter(|(t, p, _)| {
            f.topic.as_ref().is_none_or(|want| want == t)
                && f.partition.is_none_or(|want| want == *p)
        })
        .collect();
    let last = loaded.last;
    drop(loaded);
    settle(&part, &slot, last, deadline)?;
    Ok(offsets)
}

fn deadline(shared: &Shared) -> Instant {
    Instant::now() + Duration::from_millis(shared.config.request_timeout_ms)
}

fn committed(offset: Option<u64>, generation: u64, cluster: Option<&str>) -> Committed {
    Committed {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        timestamp_ms: crate::clock::now_ms(),
        generation,
        cluster: cluster.map(str::to_string),
    }
}

/// The partition of the offsets topic holding `group`, which this broker
/// must lead, and its table's slot; the topic is created first if no
/// broker did yet.
fn group_partition(
    shared: &Shared,
    group: &str,
) -> Result<(Arc<Partition>, Arc<Mutex<Loaded>>), Refusal> {
    // The topics' lock is let go before a creation takes it to write.
    let open = shared
        .read_topics()
        .get(OFFSETS_TOPIC)
        .map(|p| p.len() as u32);
    let count = match open {
        Some(count) => count,
        None => create(shared)?,
    };
    let p = partition_of(group, count);
    let part = shared.partition(OFFSETS_TOPIC, p)?;
    Ok((part, shared.offsets.slot(p)))
}

/// Opens the offsets topic here, placing it first (compacted) when no
/// broker has; its partition count.
fn create(shared: &Shared) -> Result<u32, Refusal> {
    let refused = |e: crate::error::Error| (error_code(&e), e.to_string());
    let config = &shared.config;
    let mut rf = 1;
    if let Some(registry) = shared.registry.as_deref() {
        let live = registry.brokers().map_err(refused)?.len() as u32;
        rf = config.offsets_topic_replication_factor.min(live).max(1);
        // Commits wait for two copies where three are kept: one broker
        // down stops no commit.
        let min_isr = if rf >= 3 { "2" } else { "1" };
        if registry
            .placement(OFFSETS_TOPIC)
            .map_err(refused)?
            .is_none()
        {
            crate::coord::topic_config::replace(registry, OFFSETS_TOPIC, &mut |c| {
                c.set("cleanup.policy", "compact")?;
                c.set("min.insync.replicas", min_isr)
            })
            .map_err(refused)?
            .map_err(|why| (ErrorCode::InvalidRequest, why))?;
        }
    } else {
        let mut compact = crate::coord::topic_config::TopicConfig::new();
        compact
            .set("cleanup.policy", "compact")
            .and_then(|()| compact.set("min.insync.replicas", "1"))
            .map_err(|why| (ErrorCode::InvalidRequest, why))?;
        shared.topic_configs.set(OFFSETS_TOPIC, compact);
    }
    let (count, _) = shared
        .create_topic_replicated(OFFSETS_TOPIC, config.offsets_topic_partitions, rf)
        .map_err(refused)?;
    Ok(count)
}

/// The partition's table, read again if this broker's leadership changed
/// since, with `group`'s registry offsets carried over. The registry (its
/// cluster id at a new leadership, a group's offsets to carry over) is
/// read, and a new leader's log waited for, with the table's lock let go:
/// a registry that hangs or a log not yet durable stalls this request,
/// not the partition's other groups.
fn ready<'s>(
    shared: &Shared,
    (part, slot): (&Arc<Partition>, &'s Mutex<Loaded>),
    (group, replaced): (&str, Option<&OffsetKey>),
    deadline: Instant,
) -> Result<MutexGuard<'s, Loaded>, Refusal> {
    let mut read = None;
    let mut cluster = None;
    for _ in 0..READY_ROUNDS_MAX {
        let mut loaded = lock(slot);
        match current(shared, part, &mut loaded, &mut cluster)? {
            Rebuild::Done => {}
            Rebuild::ReadCluster => {
                drop(loaded);
                cluster = Some(cluster_id(shared));
                continue;
            }
            Rebuild::Wait(tail) => {
                drop(loaded);
                // Flushed at once: the answers that wait are acks=all ones.
                shared.mark_dirty(part, true);
                durable(part, &tail, deadline)?;
                continue;
            }
        }
        if loaded.carried.contains(group) {
            return Ok(loaded);
        }
        let registry = shared.registry.as_deref();
        let offsets = match (registry, &read) {
            (Some(_), _) if loaded.table.has_group(group) => Vec::new(),
            (None, _) => Vec::new(),
            (Some(_), Some(offsets)) => {
                carried_writes(offsets, group, replaced, loaded.cluster.as_deref())?
            }
            (Some(registry), None) => {
                drop(loaded);
                read = Some(registry.offsets(group));
                continue;
            }
        };
        // The answer waits for these records too (`last`), with the lock
        // let go: a failure has the table read again, and this again.
        write_records(shared, part, &mut loaded, offsets)?;
        if loaded.carried.len() >= CARRIED_GROUPS_MAX {
            // Names asked after by clients, most of no group: looking at
            // the registry again costs a read, remembering them memory.
            loaded.carried.clear();
        }
        loaded.carried.insert(group.to_string());
        return Ok(loaded);
    }
    let why = format!(
        "{OFFSETS_TOPIC} [{}]: its leadership keeps moving",
        part.partition
    );
    Err((ErrorCode::NotLeader, why))
}

/// The most rounds of [`ready`]: each reads the registry or waits once.
const READY_ROUNDS_MAX: usize = 6;

/// What [`current`] needs before it reads a table again.
enum Rebuild {
    /// The table is current.
    Done,
    /// The registry's cluster id, read afresh for the new leadership.
    ReadCluster,
    /// These records (the log to its end) durable on the in-sync replicas.
    Wait(Appended),
}

/// Reads the partition's table again if this broker's leadership of it
/// changed since it was read: with the registry's cluster id read afresh
/// (`cluster`, taken), and once every record the log holds is durable on
/// the in-sync replicas (a new leader may hold an old one's last records,
/// not yet everywhere; a single copy, records not yet flushed, which no
/// read shows), so that the table holds the whole log, and nothing it
/// answers from can be lost.
fn current(
    shared: &Shared,
    part: &Arc<Partition>,
    loaded: &mut Loaded,
    cluster: &mut Option<Result<Option<String>, Refusal>>,
) -> Result<Rebuild, Refusal> {
    let min_isr = part.min_insync.load(Ordering::Relaxed);
    let epoch = part.may_append(ACKS_ALL, min_isr)?;
    if loaded.epoch == Some(epoch) {
        return Ok(Rebuild::Done);
    }
    let log = part.lock();
    let end = log.next_offset();
    if end > part.high_watermark.load(Ordering::Acquire) {
        return Ok(Rebuild::Wait(Appended {
            base_offset: end - 1,
            end_offset: end,
            epoch: log.undo_epoch(),
            leader_epoch: epoch,
        }));
    }
    let Some(cluster) = cluster.take() else {
        return Ok(Rebuild::ReadCluster);
    };
    let cluster = cluster?;
    let table = replay(&log).map_err(|e| (error_code(&e), e.to_string()))?;
    if table.skipped() > 0 {
        let (n, p) = (table.skipped(), part.partition);
        shared.log(format_args!(
            "{OFFSETS_TOPIC} [{p}]: passed over {n} records that do not decode"
        ));
    }
    *loaded = Loaded {
        epoch: Some(epoch),
        table,
        cluster,
        carried: HashSet::new(),
        last: None,
    };
    Ok(Rebuild::Done)
}

/// The registry's offsets of a group.
type RegistryOffsets = crate::Result<Vec<(String, u32, crate::Result<u64>)>>;

/// The records that carry `group`'s registry offsets, `read`, over (a
/// group with no record in the table yet). An offset that does not
/// parse refuses the request, naming it (never a silent start from
/// elsewhere), unless it is `replaced`'s, which the request resets or
/// deletes.
fn carried_writes(
    read: &RegistryOffsets,
    group: &str,
    replaced: Option<&OffsetKey>,
    cluster: Option<&str>,
) -> Result<Vec<Write>, Refusal> {
    let refused = |e: &crate::error::Error| {
        let why = format!("{CARRY_OVER_REFUSED} {group}'s offsets over from the registry: {e}");
        (ErrorCode::StorageError, why)
    };
    let mut writes = Vec::new();
    for (topic, partition, offset) in read.as_ref().map_err(refused)? {
        let key = OffsetKey {
            group: group.to_string(),
            topic: topic.clone(),
            partition: *partition,
        };
        match offset {
            Ok(offset) => writes.push((key, Some(committed(Some(*offset), 0, cluster)))),
            Err(_) if replaced == Some(&key) => {}
            Err(e) => return Err(refused(e)),
        }
    }
    Ok(writes)
}

/// Appends `writes` as one batch to the partition, in the leadership the
/// table was read in, and applies them to the table; what to wait for.
fn write_records(
    shared: &Shared,
    part: &Arc<Partition>,
    loaded: &mut Loaded,
    writes: Vec<Write>,
) -> Result<Option<Appended>, Refusal> {
    if writes.is_empty() {
        return Ok(None);
    }
    let now = crate::clock::now_ms();
    let mut builder = BatchBuilder::new();
    for (key, value) in &writes {
        let k = encode_key(key);
        let generation = value.as_ref().map_or(0, |c| c.generation);
        let g = encode_generation(generation);
        let mut headers = vec![(GENERATION_HEADER.as_bytes(), g.as_slice())];
        if let Some(cluster) = value.as_ref().and_then(|c| c.cluster.as_deref()) {
            headers.push((CLUSTER_HEADER.as_bytes(), cluster.as_bytes()));
        }
        let v = value.as_ref().map(encode_value);
        builder.push_nullable(now, Some(&k), &headers, v.as_deref());
    }
    let appended = {
        let mut log = part.lock();
        let min_isr = part.min_insync.load(Ordering::Relaxed);
        let leader_epoch = part.may_append(ACKS_ALL, min_isr)?;
        if loaded.epoch != Some(leader_epoch) {
            let why = format!("{OFFSETS_TOPIC} [{}]: leadership moved", part.partition);
            return Err((ErrorCode::NotLeader, why));
        }
        let info = log
            .append(builder.finish(), now)
            .map_err(|e| (error_code(&e), e.to_string()))?;
        Appended {
            base_offset: info.base_offset,
            end_offset: info.last_offset + 1,
            epoch: info.epoch,
            leader_epoch,
        }
    };
    shared.mark_dirty(part, true);
    for (key, value) in writes {
        loaded.table.set(key, value);
    }
    loaded.last = Some(appended);
    Ok(Some(appended))
}

/// The broker's registry with its groups' offsets in the offsets topic,
/// answered here for the partitions this broker leads (and asked of
/// their leaders for the others); `None` without a registry.
pub(super) fn registry(shared: &Shared) -> Option<Arc<dyn crate::coord::Registry>> {
    let registry = Arc::clone(shared.registry.as_ref()?);
    let me = shared.me.get().cloned().unwrap_or_default();
    Some(TopicRegistry::in_broker(registry, Arc::new(Here(me))))
}

/// A broker's own answers for the groups whose partition of the offsets
/// topic it leads ([`crate::coord::offsets_topic::LocalOffsets`]): its
/// group coordinator asks without a connection (nor the credentials one
/// would need).
#[derive(Debug)]
pub(super) struct Here(pub(super) std::sync::Weak<Shared>);

impl Here {
    fn answer<T>(
        &self,
        answer: impl FnOnce(&Shared) -> Result<T, Refusal>,
    ) -> Option<crate::Result<T>> {
        let shared = self.0.upgrade()?;
        match answer(&shared) {
            Ok(answer) => Some(Ok(answer)),
            // Led elsewhere: asked there.
            Err((ErrorCode::PartitionElsewhere | ErrorCode::NotLeader, _)) => None,
            Err((code, message)) => Some(Err(crate::Error::Broker { code, message })),
        }
    }
}

impl crate::coord::offsets_topic::LocalOffsets for Here {
    fn commit(&self, c: &OffsetCommit) -> Option<crate::Result<Option<u64>>> {
        self.answer(|shared| commit(shared, c))
    }

    fn fetch(&self, f: &OffsetFetch) -> Option<crate::Result<Vec<(String, u32, u64)>>> {
        self.answer(|shared| fetch(shared, f))
    }
}

#[cfg(test)]
mod tests;
