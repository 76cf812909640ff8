//! The follower: one thread per leader this broker follows partitions of
//! (Kafka's replica fetcher). It fetches their batches with the pull
//! protocol itself (a fetch carrying this broker's id and the leader epoch
//! it follows), appends them byte for byte at the leader's offsets, and
//! fsyncs them before its next fetch, so that the offset a fetch asks for
//! means "durable here". Before its first fetch in an epoch it truncates
//! its log to where it stops agreeing with the leader's (KIP-101 and
//! KIP-279: OffsetsForLeaderEpoch, asked again with an older epoch until
//! both logs have the epoch), never to its high watermark.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::Role;
use crate::broker::shared::{Partition, Shared};
use crate::client::connection::Connection;
use crate::error::{Error, Result};
use crate::protocol::{self, ErrorCode, FetchPartition, FetchWant};
use crate::storage::record::Format;
use crate::storage::refetch::{self, Refetch};
use crate::sync::lock;

/// How long a fetch waits at the leader for records.
const FETCH_WAIT: Duration = Duration::from_millis(500);
/// A request to the leader that takes longer has failed.
const LEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes of records a fetch asks for per partition, and in all.
const PARTITION_BYTES: u32 = 8 << 20;
const RESPONSE_BYTES: u32 = 32 << 20;
/// The pause after a failure before the next attempt.
const BACKOFF: Duration = Duration::from_millis(100);

/// Starts a fetcher for each leader that partitions here follow and that
/// has none running (one that ended, having nothing left to follow, is
/// reaped).
pub(in crate::broker) fn start_fetchers(shared: &Arc<Shared>) {
    let mut leaders: Vec<String> = Vec::new();
    for p in shared.all_partitions() {
        if let Some(replica) = &p.replica {
            if let Role::Follower { leader, .. } = &*replica.role() {
                if !leaders.contains(leader) {
                    leaders.push(leader.clone());
                }
            }
        }
    }
    let mut fetchers = lock(&shared.fetchers);
    fetchers.retain(|_, handle| !handle.is_finished());
    for leader in leaders {
        if fetchers.contains_key(&leader) {
            continue;
        }
        let shared2 = Arc::clone(shared);
        let name = format!("fetch-{leader}");
        let who = leader.clone();
        match std::thread::Builder::new()
            .name(name)
            .spawn(move || fetch_from(&shared2, &who))
        {
            Ok(handle) => {
                fetchers.insert(leader, handle);
            }
            Err(e) => shared.log(format_args!("cannot start a fetcher for {leader}: {e}")),
        }
    }
}

/// Waits for every fetcher to end (at a shutdown).
pub(in crate::broker) fn join_fetchers(shared: &Shared) {
    let fetchers: Vec<_> = lock(&shared.fetchers).drain().map(|(_, h)| h).collect();
    for handle in fetchers {
        let _ = handle.join();
    }
}

/// A partition this fetcher follows, and the epoch it truncated for.
struct Followed {
    partition: Arc<Partition>,
    epoch: u32,
    truncated_for: Option<u32>,
    /// The last trouble said of it.
    said: Option<String>,
}

/// Follows `leader`'s partitions until none is left or the broker stops.
fn fetch_from(shared: &Shared, leader: &str) {
    let mut followed: HashMap<(String, u32), Followed> = HashMap::new();
    let mut connection: Option<Connection> = None;
    let mut last_error = String::new();
    while !shared.stopping() {
        if !refresh(shared, leader, &mut followed) {
            return;
        }
        let result = connection_to(shared, leader, &mut connection)
            .and_then(|c| fetch_once(shared, c, &mut followed));
        match result {
            Ok(()) => last_error.clear(),
            Err(e) => {
                connection = None;
                let text = e.to_string();
                if text != last_error {
                    shared.log(format_args!("following {leader}: {text}"));
                    last_error = text;
                }
                std::thread::sleep(BACKOFF);
            }
        }
    }
}

/// The partitions that follow `leader` now (`false`: none).
fn refresh(shared: &Shared, leader: &str, followed: &mut HashMap<(String, u32), Followed>) -> bool {
    let mut now = HashMap::new();
    for p in shared.all_partitions() {
        let Some(replica) = &p.replica else { continue };
        let epoch = match &*replica.role() {
            Role::Follower { leader: l, epoch } if l == leader => *epoch,
            _ => continue,
        };
        let key = (p.topic.clone(), p.partition);
        let truncated_for = followed
            .remove(&key)
            .filter(|f| f.epoch == epoch)
            .and_then(|f| f.truncated_for);
        now.insert(
            key,
            Followed {
                partition: Arc::clone(&p),
                epoch,
                truncated_for,
                said: None,
            },
        );
    }
    *followed = now;
    !followed.is_empty()
}

/// The connection to `leader`, made when there is none.
fn connection_to<'c>(
    shared: &Shared,
    leader: &str,
    connection: &'c mut Option<Connection>,
) -> Result<&'c mut Connection> {
    if connection.is_none() {
        let registry = shared
            .registry
            .as_ref()
            .ok_or_else(|| Error::Config("no registry".into()))?;
        let broker = registry
            .brokers()?
            .into_iter()
            .find(|b| b.id == leader)
            .ok_or_else(|| Error::Config(format!("broker {leader} is not registered")))?;
        *connection = Some(Connection::connect_timeout(&broker.addr(), LEADER_TIMEOUT)?);
    }
    Ok(connection.as_mut().expect("made above"))
}

/// Truncates each partition not yet truncated in its epoch, then fetches
/// once from the leader and appends and fsyncs what came.
fn fetch_once(
    shared: &Shared,
    connection: &mut Connection,
    followed: &mut HashMap<(String, u32), Followed>,
) -> Result<()> {
    // One partition's trouble (its truncation refused, its log failed)
    // is its own: the others go on, and the fetcher pauses once.
    let mut trouble = false;
    for f in followed.values_mut() {
        if f.truncated_for == Some(f.epoch) {
            continue;
        }
        match truncate(shared, connection, f) {
            Ok(true) => f.truncated_for = Some(f.epoch),
            // No longer following: the next look says what it does.
            Ok(false) => trouble = true,
            Err(e) if broken(&e) => return Err(e),
            Err(e) => trouble |= say(shared, f, &e),
        }
    }
    // Only partitions truncated in the epoch they follow are fetched: a
    // fetch offset tells the leader "durable here and agreeing with you".
    let asked: Vec<FetchPartition> = followed
        .values()
        .filter(|f| f.truncated_for == Some(f.epoch))
        .map(|f| FetchPartition {
            topic: f.partition.topic.clone(),
            partition: f.partition.partition,
            offset: f.partition.lock().next_offset(),
            bytes_max: PARTITION_BYTES,
            leader_epoch: Some(f.epoch),
        })
        .collect();
    if !asked.is_empty() {
        let want = FetchWant {
            wait_ms_max: FETCH_WAIT.as_millis() as u32,
            bytes_min: 1,
            response_bytes_max: RESPONSE_BYTES,
        };
        let fetched = connection.replica_fetch(&shared.broker_id, want, &asked)?;
        for part in fetched {
            let key = (part.topic.clone(), part.partition);
            let Some(f) = followed.get_mut(&key) else {
                continue;
            };
            let done = match part.error {
                ErrorCode::None => append(shared, f, part.records, part.end_offset),
                ErrorCode::OffsetOutOfRange => out_of_range(shared, f, part.start_offset),
                // The manager learns the new state; the fetcher follows it.
                _ => {
                    trouble = true;
                    Ok(())
                }
            };
            if let Err(e) = done {
                // Its log refused the leader's batches: ask again where
                // the logs part.
                f.truncated_for = None;
                trouble |= say(shared, f, &e);
            }
        }
    }
    if trouble || asked.is_empty() {
        std::thread::sleep(BACKOFF);
    }
    Ok(())
}

/// Whether an error is the connection's (the fetcher connects again), not
/// one partition's.
fn broken(e: &Error) -> bool {
    matches!(e, Error::Network { .. } | Error::Protocol { .. })
}

/// Says a partition's trouble once (until it changes); always `true`.
fn say(shared: &Shared, f: &mut Followed, e: &Error) -> bool {
    let text = e.to_string();
    if f.said.as_deref() != Some(text.as_str()) {
        shared.log(format_args!(
            "{}-{}: {text} (trying again)",
            f.partition.topic, f.partition.partition
        ));
        f.said = Some(text);
    }
    true
}

/// Appends a leader's whole batches unchanged and makes them durable; the
/// high watermark the leader sent is kept (below this log's end).
fn append(shared: &Shared, f: &Followed, records: &[u8], leader_hw: u64) -> Result<()> {
    let p = &f.partition;
    let whole = crate::storage::record::whole_batches_len(Format::Kafka, records);
    let marked = p
        .replica
        .as_ref()
        .is_some_and(|r| lock(&r.refetch).is_some());
    let mut log = p.lock();
    if !following(p, f.epoch) {
        return Ok(());
    }
    let from = already_held(&records[..whole], log.next_offset());
    let mut noted = None;
    if let Some(base) = straddled(&records[from..whole], log.next_offset()) {
        if !marked {
            // A replica in sync may have told the leader it holds the
            // records cut here: marked, durably, until the leader's batch
            // holds them again (a crash in between leaves a replica that
            // may not lead, and refetches).
            let mark = Refetch {
                cut_at: base,
                left_isr: false,
            };
            refetch::write(&*shared.config.vfs, &partition_dir(shared, p), &mark)?;
            noted = Some(mark);
        }
        let cut = log.truncate_to(base);
        p.flushed_offset
            .store(log.flushed_offset(), Ordering::Release);
        p.high_watermark
            .fetch_min(log.next_offset(), Ordering::AcqRel);
        if let Err(e) = cut {
            drop(log);
            return Err(still_marked(p, noted, e));
        }
    }
    if whole > from {
        newer_epoch(&records[from..whole], f.epoch).map_err(|why| Error::Corrupt {
            path: partition_dir(shared, p),
            position: 0,
            reason: why,
        })?;
        let appended = log
            .append_replicated(&records[from..whole], crate::clock::now_ms())
            .and_then(|_| log.flush());
        if let Err(e) = appended {
            drop(log);
            return Err(still_marked(p, noted, e));
        }
        p.flushed_offset
            .fetch_max(log.flushed_offset(), Ordering::AcqRel);
        shared.appends.fetch_add(1, Ordering::Relaxed);
    }
    if noted.is_some() {
        refetch::remove(&*shared.config.vfs, &partition_dir(shared, p))?;
    }
    let hw = leader_hw.min(log.next_offset());
    p.high_watermark.fetch_max(hw, Ordering::AcqRel);
    Ok(())
}

/// Refuses batches of a leader epoch newer than the one followed: the
/// leader stamped them with no epoch past its own, so such a field (which
/// a Kafka batch's CRC32C leaves out) was damaged on the way or on its
/// disk, and would raise this replica's epoch past its leader's.
fn newer_epoch(batches: &[u8], epoch: u32) -> std::result::Result<(), String> {
    use crate::storage::record::{BatchHeader, BATCH_HEADER_BYTES};
    let mut at = 0;
    while let Some(head) = batches.get(at..at + BATCH_HEADER_BYTES) {
        let Ok(h) = BatchHeader::decode(Format::Kafka, head, u32::MAX) else {
            return Ok(());
        };
        if h.leader_epoch > epoch {
            return Err(format!(
                "the leader's batch at offset {} says leader epoch {}, past the leader's {epoch}: \
                 damaged, not appended",
                h.base_offset, h.leader_epoch
            ));
        }
        at += h.total_bytes() as usize;
    }
    Ok(())
}

/// The directory of `p`'s log.
fn partition_dir(shared: &Shared, p: &Partition) -> std::path::PathBuf {
    shared.store.partition_dir(&p.topic, p.partition)
}

/// `e`, after a cut back to a leader's batch that could not be refilled:
/// the mark `noted` on disk is taken in memory too, so that the replica
/// leaves the ISR now rather than at its next start.
fn still_marked(p: &Partition, noted: Option<Refetch>, e: Error) -> Error {
    if let (Some(mark), Some(r)) = (noted, &p.replica) {
        lock(&r.refetch).get_or_insert(mark);
    }
    e
}

/// Where the batches this log does not hold yet begin in `records` (a
/// fetch answers from the batch holding its offset: one that ends at or
/// before `next` is skipped; one that straddles it is cut back to: see
/// [`straddled`]).
fn already_held(records: &[u8], next: u64) -> usize {
    use crate::storage::record::{BatchHeader, Format, BATCH_HEADER_BYTES};
    let mut position = 0;
    while let Some(head) = records.get(position..position + BATCH_HEADER_BYTES) {
        match BatchHeader::decode(Format::Kafka, head, u32::MAX) {
            Ok(h) if h.next_offset() <= next => position += h.total_bytes() as usize,
            _ => break,
        }
    }
    position.min(records.len())
}

/// Where the leader's first batch in `records` begins when this log's end
/// `next` falls inside it. Recovery keeps the whole records of a damaged
/// batch (a replica marked for a refetch: [`crate::storage::refetch`]) or
/// of a torn one (a power cut while a follower wrote it) under a header
/// of its own: the log must be cut back to where the leader's batch
/// begins, so that it is appended as the leader stored it; otherwise every
/// fetch answers the same batch, refused as an overlap, for ever.
fn straddled(records: &[u8], next: u64) -> Option<u64> {
    use crate::storage::record::{BatchHeader, Format, BATCH_HEADER_BYTES};
    let head = records.get(..BATCH_HEADER_BYTES)?;
    match BatchHeader::decode(Format::Kafka, head, u32::MAX) {
        Ok(h) if h.base_offset < next && next < h.next_offset() => Some(h.base_offset),
        _ => None,
    }
}

/// Whether `p` still follows in `epoch` (asked under its log's lock).
fn following(p: &Partition, epoch: u32) -> bool {
    p.replica
        .as_ref()
        .is_some_and(|r| matches!(&*r.role(), Role::Follower { epoch: e, .. } if *e == epoch))
}

/// The fetch offset is outside the leader's log: below its start (its
/// retention deleted what this replica needs), start again there; past
/// its end, truncate again.
fn out_of_range(shared: &Shared, f: &mut Followed, leader_start: u64) -> Result<()> {
    let p = &f.partition;
    let mut log = p.lock();
    if !following(p, f.epoch) {
        return Ok(());
    }
    if log.next_offset() < leader_start {
        shared.log(format_args!(
            "{}-{}: the leader's log starts at {leader_start}, past this replica's end {}: starting again there",
            p.topic,
            p.partition,
            log.next_offset()
        ));
        log.reset_to(leader_start)?;
        p.flushed_offset
            .store(log.flushed_offset(), Ordering::Release);
        p.high_watermark.fetch_min(leader_start, Ordering::AcqRel);
    } else {
        // Past the leader's end: ask again where the logs part, after a
        // pause (the leader may have lost records it had not fsynced).
        f.truncated_for = None;
        drop(log);
        std::thread::sleep(BACKOFF);
    }
    Ok(())
}

/// Truncates a partition's log to where it stops agreeing with the
/// leader's: the end of the latest epoch both logs have, at the lower of
/// the two ends (KIP-279).
fn truncate(shared: &Shared, connection: &mut Connection, f: &Followed) -> Result<bool> {
    let p = &f.partition;
    let (mut asked, end) = {
        let log = p.lock();
        let latest = log.epochs().latest().map_or(0, |e| e.epoch);
        (latest, log.next_offset())
    };
    let target = loop {
        let theirs =
            connection.offsets_for_leader_epoch(&p.topic, p.partition, Some(f.epoch), asked)?;
        let Some((epoch, their_end)) = theirs else {
            // The leader (checked to lead this very epoch, whose epoch
            // file starts it) knows no epoch at or below `asked`: every
            // batch of its log is of a later epoch, so nothing of this
            // log's (of `asked` or before) at or past the leader's start
            // is what the leader holds there; below its start is outside
            // its log (a fetch there is out of range, and resets this log
            // to the leader's start). Cut to the leader's start, never to
            // this log's own (KIP-279 cuts to the high watermark).
            let start = connection.list_offsets(&p.topic, p.partition, protocol::EARLIEST)?;
            break start.unwrap_or(0);
        };
        // Bound first: a guard in the match's head would live through
        // its arms, and the last one locks again.
        let ours = p.lock().end_offset_for_epoch(epoch);
        match ours {
            Some((mine, my_end)) if mine == epoch => break their_end.min(my_end),
            Some((mine, _)) if mine < asked => asked = mine,
            _ => break p.lock().start_offset(),
        }
    };
    let mut log = p.lock();
    if !following(p, f.epoch) {
        return Ok(false);
    }
    // At the end too: an epoch this replica began as leader and wrote no
    // batch in leaves the epoch file (the leader's older epochs follow).
    let target = target.min(log.next_offset());
    let cut = log.truncate_to(target)?;
    p.flushed_offset
        .store(log.flushed_offset(), Ordering::Release);
    // The watermark learned from a leader never passes this log's end: a
    // stale one would let this replica, once leader, answer acks=all for
    // new records at those offsets before any follower holds them.
    p.high_watermark.fetch_min(cut, Ordering::AcqRel);
    if cut < end {
        shared.log(format_args!(
            "{}-{}: truncated from {end} to {cut}, where it stops agreeing with the leader's log (epoch {})",
            p.topic, p.partition, f.epoch
        ));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    //! Review 13b: the follower's truncation against a leader on a socket.

    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;

    /// A batch of an epoch past the followed leader's is refused whole:
    /// the field is not under the batch's CRC32C.
    #[test]
    fn a_batch_of_an_epoch_past_the_leaders_is_not_appended() {
        let mut one = crate::broker::testing::batch_of(b"a");
        crate::storage::record::stamp(&mut one, 0, 5);
        let mut two = crate::broker::testing::batch_of(b"b");
        crate::storage::record::stamp(&mut two, 1, 6);
        let both = [one.clone(), two].concat();
        assert_eq!(newer_epoch(&one, 5), Ok(()));
        assert_eq!(newer_epoch(&both, 6), Ok(()));
        let err = newer_epoch(&both, 5).unwrap_err();
        assert!(err.contains("offset 1") && err.contains("epoch 6"), "{err}");
    }
    use crate::broker::testing::{batch, replicated_partition, shared};
    use crate::protocol::{self, Request};

    /// Where the fake leader's log starts (its answer to ListOffsets).
    const LEADER_START: u64 = 5;

    /// A leader on 127.0.0.1 port 0 that answers one connection: an
    /// error for every OffsetsForLeaderEpoch of topic `refused`; `answer`
    /// (an epoch and where it ends) to every other, running `during`
    /// before its first answer of that kind; every fetch is refused with `not_leader`, and
    /// its offsets are sent down `fetched`.
    fn fake_leader(
        refused: &'static str,
        answer: Option<(u32, u64)>,
        during: impl FnOnce() + Send + 'static,
        fetched: std::sync::mpsc::Sender<u64>,
    ) -> (String, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let handle = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut during = Some(during);
            loop {
                let mut len = [0u8; 4];
                if s.read_exact(&mut len).is_err() {
                    return;
                }
                let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
                s.read_exact(&mut body).unwrap();
                let (header, request) = protocol::decode_request(&body).unwrap();
                let mut out = Vec::new();
                match request {
                    Request::OffsetsForLeaderEpoch { topic, .. } if topic == refused => {
                        protocol::begin_response(
                            &mut out,
                            header.correlation_id,
                            ErrorCode::UnknownTopic,
                            "not here",
                        );
                    }
                    Request::OffsetsForLeaderEpoch { .. } => {
                        if let Some(f) = during.take() {
                            f();
                        }
                        protocol::begin_response(
                            &mut out,
                            header.correlation_id,
                            ErrorCode::None,
                            "",
                        );
                        protocol::put_epoch_end(&mut out, answer);
                    }
                    Request::ListOffsets { .. } => {
                        protocol::begin_response(
                            &mut out,
                            header.correlation_id,
                            ErrorCode::None,
                            "",
                        );
                        crate::protocol::put::i64(&mut out, LEADER_START as i64);
                    }
                    Request::Fetch { partitions, .. } => {
                        for part in &partitions {
                            let _ = fetched.send(part.offset);
                        }
                        protocol::begin_response(
                            &mut out,
                            header.correlation_id,
                            ErrorCode::NotLeader,
                            "fake leader",
                        );
                    }
                    other => panic!("unexpected request {other:?}"),
                }
                protocol::finish_frame(&mut out);
                if s.write_all(&out).is_err() {
                    return;
                }
            }
        });
        (addr, handle)
    }

    /// A follower whose log holds a tail its leader does not have (offset
    /// 2, epoch 1: the leader's epoch 1 ends at 2) must cut it before it
    /// fetches: a fetch at 3 tells the leader "I hold 0..3 durably", and
    /// the leader counts it for its high watermark and the ISR. If the
    /// follower's role flickers to Waiting (a registry read failing once,
    /// the leader's lease looking lapsed for one round) while its
    /// OffsetsForLeaderEpoch is in flight, `truncate` returns Ok without
    /// cutting, `fetch_once` marks the epoch truncated all the same, and
    /// once the role is back to the same leader and epoch the follower
    /// never truncates: it fetches at 3, past the divergence.
    #[test]
    fn a_truncation_skipped_while_the_role_flickered_is_not_marked_done() {
        let (_sim, shared) = shared();
        let following = || Role::Follower {
            leader: "L".into(),
            epoch: 2,
        };
        let p = replicated_partition(&shared, "t", &["broker-test", "L"], following());
        {
            let mut log = p.lock();
            log.set_leader_epoch(1).unwrap();
            for _ in 0..3 {
                log.append(&mut batch(), 0).unwrap();
            }
            log.flush().unwrap();
        }
        assert_eq!(p.lock().next_offset(), 3);
        let p2 = Arc::clone(&p);
        let flicker = move || {
            *p2.replica.as_ref().unwrap().role() = Role::Waiting("registry read failed".into());
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (addr, server) = fake_leader("", Some((1, 2)), flicker, tx);
        let mut connection = Connection::connect_timeout(&addr, LEADER_TIMEOUT).unwrap();
        let mut followed = HashMap::new();
        assert!(refresh(&shared, "L", &mut followed));
        // The flicker happens during this round's OffsetsForLeaderEpoch.
        let _ = fetch_once(&shared, &mut connection, &mut followed);
        // The manager's next round: the same leader, the same epoch.
        *p.replica.as_ref().unwrap().role() = following();
        assert!(refresh(&shared, "L", &mut followed));
        let _ = fetch_once(&shared, &mut connection, &mut followed);
        drop(connection);
        server.join().unwrap();
        let offsets: Vec<u64> = rx.try_iter().collect();
        assert_eq!(
            p.lock().next_offset(),
            2,
            "the follower kept offset 2, which its leader's log does not have, and fetched at {offsets:?}"
        );
        assert!(
            offsets.iter().all(|&o| o <= 2),
            "fetched past the divergence: {offsets:?}"
        );
    }

    /// A fetcher follows every partition it has of one leader. When the
    /// truncation of one of them fails (the leader answers an error for
    /// it: a topic it has not opened, a log of its that failed; or this
    /// replica's own log of it failed), `fetch_once` returns at the `?`
    /// before any fetch: the other partitions of that leader are not
    /// fetched either, for as long as the one fails. Their followers fall
    /// out of the ISR (acks=all with --min-insync-replicas 2 stops).
    #[test]
    fn a_partition_whose_truncation_fails_does_not_stop_the_others() {
        let (_sim, shared) = shared();
        let following = || Role::Follower {
            leader: "L".into(),
            epoch: 2,
        };
        let t = replicated_partition(&shared, "t", &["broker-test", "L"], following());
        let _u = replicated_partition(&shared, "u", &["broker-test", "L"], following());
        let (tx, rx) = std::sync::mpsc::channel();
        let (addr, server) = fake_leader("u", Some((0, 0)), || {}, tx);
        let mut connection = Connection::connect_timeout(&addr, LEADER_TIMEOUT).unwrap();
        let mut followed = HashMap::new();
        for _ in 0..3 {
            assert!(refresh(&shared, "L", &mut followed));
            let _ = fetch_once(&shared, &mut connection, &mut followed);
        }
        drop(connection);
        server.join().unwrap();
        let offsets: Vec<u64> = rx.try_iter().collect();
        assert_eq!(t.lock().next_offset(), 0);
        assert!(
            !offsets.is_empty(),
            "three rounds, and partition t-0 (whose truncation succeeds) was never fetched"
        );
    }

    /// A follower of 3 records (epoch 1) that learned the watermark 3,
    /// after `rounds` rounds with a leader answering where epoch 1 ends
    /// with `answer`; and the offsets it fetched at.
    fn follow(answer: Option<(u32, u64)>, rounds: usize) -> (Arc<Partition>, Vec<u64>) {
        let (_sim, shared) = shared();
        let following = Role::Follower {
            leader: "L".into(),
            epoch: 2,
        };
        let p = replicated_partition(&shared, "t", &["broker-test", "L"], following);
        {
            let mut log = p.lock();
            log.set_leader_epoch(1).unwrap();
            for _ in 0..3 {
                log.append(&mut batch(), 0).unwrap();
            }
            log.flush().unwrap();
        }
        p.high_watermark.store(3, Ordering::Release);
        let (tx, rx) = std::sync::mpsc::channel();
        let (addr, server) = fake_leader("", answer, || {}, tx);
        let mut connection = Connection::connect_timeout(&addr, LEADER_TIMEOUT).unwrap();
        let mut followed = HashMap::new();
        assert!(refresh(&shared, "L", &mut followed));
        for _ in 0..rounds {
            let _ = fetch_once(&shared, &mut connection, &mut followed);
        }
        drop(connection);
        server.join().unwrap();
        (p, rx.try_iter().collect())
    }

    /// Issue 23, what was seen 3: a leader that knows no epoch at or
    /// below the one asked answered "none", and the follower cut its log
    /// to its start: its whole log, while the ISR still counted it.
    #[test]
    fn a_follower_asking_an_epoch_its_leader_has_not_recorded_keeps_its_log() {
        let (p, _) = follow(None, 1);
        assert_eq!(p.lock().next_offset(), 3, "the follower's log was cut");
    }

    /// Review of issue 23: a fenced leader that knows no epoch at or below
    /// the follower's answers "none" when its log starts past everything
    /// of those epochs (a leader that was itself reset to a later start by
    /// retention: its epoch file begins there). The follower kept its log
    /// and asked again, for ever: it never fetched, so it never heard that
    /// the leader's log starts past its end (offset_out_of_range, then a
    /// reset to the leader's start), and never rejoined the ISR. Now it
    /// cuts to the leader's start (past its end here: nothing) and fetches.
    #[test]
    fn a_follower_whose_leader_knows_no_epoch_of_its_log_still_fetches() {
        let (p, fetched) = follow(None, 3);
        assert!(
            !fetched.is_empty(),
            "three rounds, and the follower never fetched: it cannot learn where the leader's \
             log starts"
        );
        assert_eq!(
            p.lock().next_offset(),
            3,
            "the leader's log starts at {LEADER_START}, past this log's end: nothing is cut"
        );
    }

    /// Issue 23, what was seen 4: a cut below the watermark learned from
    /// the leader left it there; as leader next, this replica would count
    /// new records at those offsets as held by the ISR at once.
    #[test]
    fn a_truncation_lowers_the_high_watermark_to_the_cut() {
        let (p, _) = follow(Some((1, 2)), 1);
        assert_eq!(p.lock().next_offset(), 2, "cut where the logs part");
        assert_eq!(
            p.high_watermark.load(Ordering::Acquire),
            2,
            "the watermark passes the log's end"
        );
    }

    /// Review of issue 23: a follower whose power was cut while it wrote
    /// one of the leader's batches of two records keeps, by recovery, the
    /// first record whole under a header of its own (a torn tail: no
    /// mark). Its log then ends inside the leader's batch, and every fetch
    /// answers that batch from its start: the append refused it as an
    /// overlap, the follower asked where the logs part (nowhere: the
    /// leader's epoch ends past it) and fetched the same batch again, for
    /// ever, never catching up nor rejoining the ISR. Only a replica
    /// marked for a refetch cut back to the batch's start.
    #[test]
    fn a_follower_that_kept_part_of_a_leader_batch_catches_up() {
        use crate::storage::record;
        let (sim, shared) = shared();
        let following = Role::Follower {
            leader: "L".into(),
            epoch: 2,
        };
        let p = replicated_partition(&shared, "t", &["broker-test", "L"], following);
        let mut first = crate::broker::testing::batch_of(b"x");
        record::stamp(&mut first, 0, 1);
        let mut two = {
            let mut b = crate::storage::record::BatchBuilder::new();
            b.push(0, None, &[], b"a");
            b.push(0, None, &[], b"b");
            b.finish().to_vec()
        };
        record::stamp(&mut two, 1, 1);
        // The first record of the leader's batch under a header of its own
        // (what recovery of a legacy segment keeps of a torn batch).
        let mut torn = crate::broker::testing::batch_of(b"a");
        record::stamp(&mut torn, 1, 1);
        {
            let mut log = p.lock();
            log.append_replicated(&first, 0).unwrap();
            log.append_replicated(&torn, 0).unwrap();
            log.flush().unwrap();
            assert_eq!(log.next_offset(), 2);
        }
        let f = Followed {
            partition: Arc::clone(&p),
            epoch: 2,
            truncated_for: Some(2),
            said: None,
        };
        // The leader answers a fetch at 2 from the batch holding it.
        for _ in 0..3 {
            let _ = append(&shared, &f, &two, 3);
        }
        assert_eq!(
            p.lock().next_offset(),
            3,
            "the follower never gets past offset 2"
        );
        let dir = shared.store.partition_dir("t", 0);
        assert_eq!(
            refetch::read(&*sim, &dir).unwrap(),
            None,
            "whole again: no mark left behind"
        );
        assert!(lock(&p.replica.as_ref().unwrap().refetch).is_none());
    }

    /// The same cut back, when the disk fails before the leader's batch is
    /// durable again: the log may now hold less than this replica told
    /// the leader, so it is marked (on disk and at once), and leaves the
    /// ISR rather than lead without those records.
    #[test]
    fn a_follower_cut_back_to_a_leader_batch_it_could_not_refill_is_marked() {
        use crate::storage::record;
        let (sim, shared) = shared();
        let following = Role::Follower {
            leader: "L".into(),
            epoch: 2,
        };
        let p = replicated_partition(&shared, "t", &["broker-test", "L"], following);
        let mut two = {
            let mut b = crate::storage::record::BatchBuilder::new();
            b.push(0, None, &[], b"a");
            b.push(0, None, &[], b"b");
            b.finish().to_vec()
        };
        record::stamp(&mut two, 0, 1);
        let mut torn = crate::broker::testing::batch_of(b"a");
        record::stamp(&mut torn, 0, 1);
        {
            let mut log = p.lock();
            log.append_replicated(&torn, 0).unwrap();
            log.flush().unwrap();
        }
        let f = Followed {
            partition: Arc::clone(&p),
            epoch: 2,
            truncated_for: Some(2),
            said: None,
        };
        sim.fail_next_sync(|path| path.extension().is_some_and(|x| x == "log"));
        assert!(append(&shared, &f, &two, 2).is_err());
        let dir = shared.store.partition_dir("t", 0);
        assert!(
            refetch::read(&*sim, &dir).unwrap().is_some(),
            "marked on disk"
        );
        assert!(
            lock(&p.replica.as_ref().unwrap().refetch).is_some(),
            "and now"
        );
    }
}
