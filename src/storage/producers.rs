//! Producer state: what a partition knows of its idempotent producers, so
//! that a batch a producer sends again (its answer was lost: a timeout, a
//! broken connection, a leader that died) is stored once, and a batch that
//! would leave a hole in a producer's numbering is refused.
//!
//! An idempotent producer (librdkafka's `enable.idempotence`, kafka-python
//! 3's default, `klog-produce --acks all`) gets a producer id and numbers
//! the records it sends to each partition: a batch carries the producer
//! id, its epoch and the sequence number of its first record
//! ([`crate::storage::record`]). It keeps at most five batches in flight
//! per partition and sends a batch again, with the same numbers, when it
//! has no answer.
//!
//! The state is a function of the log: [`ProducerState::apply`] takes each
//! stored batch's header, in offset order, on the leader as it appends, on
//! a follower as it copies, and at open over the log's tail. Per producer
//! it keeps the epoch, the time of its last batch and its last
//! [`BATCHES_REMEMBERED`] batches (sequence range, offsets, CRC32C).
//! Whoever replays the same batches gets the same state: a replica that
//! becomes leader, a broker that restarts, knows what the old leader knew
//! of every batch it still holds.
//!
//! # Transactions
//!
//! A transactional producer's batches (the `transactional` attribute) open
//! a transaction in the partition at the first one's offset; the commit or
//! abort marker its coordinator writes ([`crate::storage::record::control`],
//! [`ProducerState::apply_marker`]) closes it. The first offset of the
//! oldest open transaction is the partition's first unstable offset
//! ([`ProducerState::first_unstable_offset`]): read_committed consumers
//! read below it (the last stable offset). An abort yields the
//! transaction's [`AbortedTxn`], which the log keeps for read_committed
//! fetches (`crate::storage::log::aborted`). A producer with an open
//! transaction neither expires nor is forgotten to make room.
//!
//! # Kafka's rules ([`ProducerState::check`], a leader's, before it appends)
//!
//! | the batch | verdict |
//! | --- | --- |
//! | no producer id (-1) | append |
//! | a producer the partition does not know | append, whatever its sequence (as Kafka since 2.5: its state expired, or its batches are before the log's start) |
//! | an epoch older than the producer's | [`Verdict::Fenced`] (`INVALID_PRODUCER_EPOCH`) |
//! | not transactional, from a producer with an open transaction, whatever its epoch | [`Verdict::InvalidTxnState`] (`INVALID_TXN_STATE`): a write outside the transaction, which a newer epoch must not let fence it (its markers would be refused, and the partition's last stable offset held for ever) |
//! | a newer epoch, sequence 0 | append (the producer bumped its epoch) |
//! | a newer epoch, another sequence | [`Verdict::OutOfOrder`] |
//! | the producer's epoch, no batch of it since a marker began that epoch, another sequence than 0 | [`Verdict::OutOfOrder`] |
//! | the same sequence range and CRC32C as one of the last five | [`Verdict::Duplicate`], answered with the first copy's offsets |
//! | the sequence after the producer's last | append |
//! | anything else | [`Verdict::OutOfOrder`] (`OUT_OF_ORDER_SEQUENCE_NUMBER`) |
//!
//! A marker ([`ProducerState::check_marker`]) of an epoch older than the
//! producer's is [`Verdict::Fenced`], one of a coordinator epoch older
//! than the producer's last marker's [`Verdict::CoordinatorFenced`] (a
//! coordinator's late marker, after another finished the transaction and
//! the producer began the next); any other is appended.
//!
//! Kafka calls a batch a duplicate on its numbers alone; klog also wants
//! its bytes: a batch numbered as a stored one but holding other records
//! is not that batch, and is refused (out of order) rather than dropped.
//! Sequences wrap from `i32::MAX` to 0, as Kafka's do.
//!
//! State is bounded: at most [`PRODUCERS_MAX`] producers per partition (a
//! new one beyond that forgets the one whose last batch is oldest in the
//! log) and [`ProducerState::expire`] forgets those silent longer than the
//! expiry (Kafka's `producer.id.expiration.ms`), by their batches'
//! timestamps and by the broker's clock when it took them (a producer of
//! records stamped long ago stays while it sends).
//!
//! # Snapshot files
//!
//! `<offset>.snapshot` (the offset zero-padded to 20 digits, as a
//! segment's name) holds the state of the batches below that offset, so
//! that an open reads only the log after it. Written at a roll and at a
//! clean close ([`crate::storage::log`]), atomically (a temporary file,
//! fsynced, renamed). Big-endian, as Kafka's:
//!
//! | field | type | |
//! | --- | --- | --- |
//! | crc | u32 | CRC32C of every byte after it |
//! | version | i16 | 2 (1: without `aborted` and `txn_first_offset`, 1 batch or more) |
//! | offset | u64 | the state is that of the batches below it (the name's) |
//! | aborted | u64 | the aborted transactions whose markers are below it, all in the log's file of them (`crate::storage::log::aborted`) |
//! | producers | u32 | at most [`PRODUCERS_MAX`] (and those with open transactions); then, ascending by id, each: |
//! | · producer_id | i64 | ≥ 0 |
//! | · epoch | i16 | ≥ 0 |
//! | · last_timestamp | i64 | its last batch's largest timestamp |
//! | · txn_first_offset | i64 | the first offset of its open transaction, -1: none |
//! | · coordinator_epoch | i32 | its last marker's, -1: none |
//! | · batches | u8 | 0 to [`BATCHES_REMEMBERED`] (0: a marker began its epoch); then, oldest first, each: |
//! | · · first_sequence | i32 | |
//! | · · last_sequence | i32 | |
//! | · · base_offset | u64 | below the snapshot's offset |
//! | · · last_offset_delta | u32 | |
//! | · · crc | u32 | the batch's CRC32C |
//!
//! A snapshot that does not decode whole (torn by a power cut, damaged) is
//! ignored: the state is rebuilt from an older one, or from the log's
//! first batch.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::storage::record::control::Marker;
use crate::storage::record::BatchHeader;

/// Batches remembered per producer: the most a Kafka producer keeps in
/// flight to one partition.
pub const BATCHES_REMEMBERED: usize = 5;

/// Producers remembered per partition (Kafka has no such bound, only the
/// expiry): enough for as many producers writing to one partition at once
/// as a cluster meets, small enough that a snapshot stays under 1.4 MB.
pub const PRODUCERS_MAX: usize = 10_000;

/// The snapshot format's version.
const SNAPSHOT_VERSION: i16 = 2;

/// Bytes of a snapshot before its producers (version 1's had no
/// `aborted`).
const SNAPSHOT_HEADER_BYTES: usize = 4 + 2 + 8 + 8 + 4;
const SNAPSHOT_V1_HEADER_BYTES: usize = SNAPSHOT_HEADER_BYTES - 8;
const PRODUCER_BYTES: usize = 8 + 2 + 8 + 8 + 4 + 1;
const BATCH_BYTES: usize = 4 + 4 + 8 + 4 + 4;

/// The largest snapshot: every producer with every batch.
pub const SNAPSHOT_BYTES_MAX: usize =
    SNAPSHOT_HEADER_BYTES + PRODUCERS_MAX * (PRODUCER_BYTES + BATCHES_REMEMBERED * BATCH_BYTES);

/// One stored batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequencedBatch {
    /// The sequence number of its first record.
    pub first_sequence: i32,
    /// The sequence number of its last record.
    pub last_sequence: i32,
    /// Its first offset.
    pub base_offset: u64,
    /// Its last offset.
    pub last_offset: u64,
    /// Its CRC32C.
    pub crc: u32,
}

/// What a partition knows of one producer.
#[derive(Debug, Clone)]
pub struct Producer {
    /// Its epoch (its last batch's).
    pub epoch: i16,
    /// Its last batch's largest timestamp.
    pub last_timestamp: i64,
    /// Its last batches in this epoch, oldest first (none when a marker
    /// began the epoch).
    pub batches: VecDeque<SequencedBatch>,
    /// The first offset of its open transaction here, if one is open.
    pub txn_first_offset: Option<u64>,
    /// The coordinator epoch of its last marker here (-1: none).
    pub coordinator_epoch: i32,
    /// The broker's clock when it last took a batch of it, or loaded the
    /// state (not in snapshots, and not compared: no replica's is
    /// another's): [`ProducerState::expire`] keeps a producer that sends,
    /// whatever its records' timestamps.
    pub appended_ms: i64,
}

/// The state a log's batches make: the broker's clock is not part of it.
impl PartialEq for Producer {
    fn eq(&self, other: &Producer) -> bool {
        self.epoch == other.epoch
            && self.last_timestamp == other.last_timestamp
            && self.batches == other.batches
            && self.txn_first_offset == other.txn_first_offset
            && self.coordinator_epoch == other.coordinator_epoch
    }
}

impl Eq for Producer {}

impl Producer {
    /// The sequence its next batch must start at.
    fn next_sequence(&self) -> i32 {
        self.batches.back().map_or(0, |b| after(b.last_sequence))
    }

    /// The offset of its last batch in the log (0: none since a marker).
    fn last_offset(&self) -> u64 {
        self.batches.back().map_or(0, |b| b.last_offset)
    }
}

/// A transaction aborted in a partition: read_committed consumers skip
/// this producer's records from `first_offset` to `last_offset` (its abort
/// marker's offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The transaction's producer.
    pub producer_id: i64,
    /// The offset of its first batch here.
    pub first_offset: u64,
    /// The offset of its abort marker.
    pub last_offset: u64,
}

/// What to do with a producer's batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Append it.
    Append,
    /// A retry of a batch stored at these offsets: answer as for it.
    Duplicate {
        /// Its first offset.
        base_offset: u64,
        /// Its last offset.
        last_offset: u64,
    },
    /// An epoch older than the producer's.
    Fenced {
        /// The producer's epoch.
        current: i16,
    },
    /// A sequence that does not follow the producer's last.
    OutOfOrder {
        /// The sequence expected (0 for a new epoch).
        expected: i32,
    },
    /// A batch outside a transaction from a producer with one open here.
    InvalidTxnState,
    /// A marker of a coordinator epoch older than the producer's last.
    CoordinatorFenced {
        /// The producer's last marker's coordinator epoch.
        current: i32,
    },
}

/// The sequence after `last` (wrapping), as a producer numbers its next
/// batch.
pub fn after(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

/// The sequence of the last record of a batch of `count` records
/// starting at `first` (wrapping).
pub fn last_sequence(first: i32, count: u32) -> i32 {
    let last = i64::from(first) + i64::from(count.max(1)) - 1;
    (last % (i64::from(i32::MAX) + 1)) as i32
}

/// The idempotent producers of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerState {
    by_id: HashMap<i64, Producer>,
    /// The open transactions: (first offset, producer id).
    open: BTreeSet<(u64, i64)>,
}

impl ProducerState {
    /// Producers known.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether no producer is known.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// What is known of producer `id`.
    pub fn get(&self, id: i64) -> Option<&Producer> {
        self.by_id.get(&id)
    }

    /// The producers known, ascending by id.
    pub fn producers(&self) -> Vec<(i64, &Producer)> {
        let mut all: Vec<_> = self.by_id.iter().map(|(id, p)| (*id, p)).collect();
        all.sort_unstable_by_key(|(id, _)| *id);
        all
    }

    /// What a leader does with a producer's batch `h` (see the module's
    /// table).
    pub fn check(&self, h: &BatchHeader) -> Verdict {
        if h.producer_id < 0 {
            return Verdict::Append;
        }
        let Some(producer) = self.by_id.get(&h.producer_id) else {
            return Verdict::Append;
        };
        if h.producer_epoch < producer.epoch {
            return Verdict::Fenced {
                current: producer.epoch,
            };
        }
        if !h.is_transactional() && producer.txn_first_offset.is_some() {
            return Verdict::InvalidTxnState;
        }
        if h.producer_epoch > producer.epoch {
            return if h.base_sequence == 0 {
                Verdict::Append
            } else {
                Verdict::OutOfOrder { expected: 0 }
            };
        }
        let last = last_sequence(h.base_sequence, h.record_count);
        let stored = producer
            .batches
            .iter()
            .find(|b| b.first_sequence == h.base_sequence && b.last_sequence == last);
        let expected = producer.next_sequence();
        match stored {
            Some(b) if b.crc == h.crc => Verdict::Duplicate {
                base_offset: b.base_offset,
                last_offset: b.last_offset,
            },
            _ if h.base_sequence == expected => Verdict::Append,
            _ => Verdict::OutOfOrder { expected },
        }
    }

    /// What a leader does with a marker of producer `id` at `epoch` from
    /// a coordinator at `coordinator_epoch`: one older than the producer's
    /// epoch is fenced, one older than its last marker's coordinator
    /// epoch too (a coordinator's late marker after another took over);
    /// any other is appended.
    pub fn check_marker(&self, id: i64, epoch: i16, coordinator_epoch: i32) -> Verdict {
        match self.by_id.get(&id) {
            Some(p) if epoch < p.epoch => Verdict::Fenced { current: p.epoch },
            Some(p) if coordinator_epoch < p.coordinator_epoch => Verdict::CoordinatorFenced {
                current: p.coordinator_epoch,
            },
            _ => Verdict::Append,
        }
    }

    /// The first offset of the oldest open transaction: read_committed
    /// consumers read below it.
    pub fn first_unstable_offset(&self) -> Option<u64> {
        self.open.first().map(|(offset, _)| *offset)
    }

    /// The open transactions, oldest first: (first offset, producer id).
    pub fn open_transactions(&self) -> impl Iterator<Item = (u64, i64)> + '_ {
        self.open.iter().copied()
    }

    /// Takes the stored marker batch `h` (its offset final), which closes
    /// its producer's open transaction: the transaction, when it aborted
    /// one. A marker of a newer epoch begins that epoch (its sequences
    /// start again at 0).
    pub fn apply_marker(&mut self, h: &BatchHeader, marker: Marker) -> Option<AbortedTxn> {
        if h.producer_id < 0 || h.producer_epoch < 0 {
            return None;
        }
        self.make_room_for(h.producer_id);
        let producer = self.by_id.entry(h.producer_id).or_insert(Producer {
            epoch: h.producer_epoch,
            last_timestamp: h.max_timestamp,
            batches: VecDeque::new(),
            txn_first_offset: None,
            coordinator_epoch: -1,
            appended_ms: 0,
        });
        if producer.epoch != h.producer_epoch {
            producer.epoch = h.producer_epoch;
            producer.batches.clear();
        }
        producer.last_timestamp = h.max_timestamp;
        producer.appended_ms = crate::clock::now_ms();
        producer.coordinator_epoch = producer.coordinator_epoch.max(marker.coordinator_epoch);
        let first_offset = producer.txn_first_offset.take()?;
        self.open.remove(&(first_offset, h.producer_id));
        (!marker.commit).then_some(AbortedTxn {
            producer_id: h.producer_id,
            first_offset,
            last_offset: h.base_offset,
        })
    }

    /// Forgets the most silent producer when a new one, `id`, would pass
    /// [`PRODUCERS_MAX`].
    fn make_room_for(&mut self, id: i64) {
        if !self.by_id.contains_key(&id) && self.by_id.len() >= PRODUCERS_MAX {
            self.forget_the_most_silent();
        }
    }

    /// Takes the stored batch `h` (its offsets final) into the state. A
    /// batch with a producer id but no epoch or sequence (a leader refuses
    /// those; an old log may hold one) is not a producer's.
    pub fn apply(&mut self, h: &BatchHeader) {
        if h.producer_id < 0 || h.producer_epoch < 0 || h.base_sequence < 0 {
            return;
        }
        let batch = SequencedBatch {
            first_sequence: h.base_sequence,
            last_sequence: last_sequence(h.base_sequence, h.record_count),
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            crc: h.crc,
        };
        self.make_room_for(h.producer_id);
        let producer = self.by_id.entry(h.producer_id).or_insert(Producer {
            epoch: h.producer_epoch,
            last_timestamp: h.max_timestamp,
            batches: VecDeque::with_capacity(BATCHES_REMEMBERED),
            txn_first_offset: None,
            coordinator_epoch: -1,
            appended_ms: 0,
        });
        if producer.epoch != h.producer_epoch {
            producer.epoch = h.producer_epoch;
            producer.batches.clear();
        }
        if producer.batches.len() == BATCHES_REMEMBERED {
            producer.batches.pop_front();
        }
        producer.batches.push_back(batch);
        if h.is_transactional() && producer.txn_first_offset.is_none() {
            producer.txn_first_offset = Some(h.base_offset);
            self.open.insert((h.base_offset, h.producer_id));
        }
        producer.last_timestamp = h.max_timestamp;
        // One clock read per batch (no system call: the vDSO's).
        producer.appended_ms = crate::clock::now_ms();
    }

    /// Forgets the producer whose last batch is oldest in the log, of
    /// those without an open transaction (the coordinator ends those, by
    /// their timeout if not before).
    fn forget_the_most_silent(&mut self) {
        let silent = self
            .by_id
            .iter()
            .filter(|(_, p)| p.txn_first_offset.is_none())
            .min_by_key(|(_, p)| p.last_offset())
            .map(|(id, _)| *id);
        if let Some(id) = silent {
            self.by_id.remove(&id);
        }
    }

    /// Forgets the producers whose last batch is older than `now_ms -
    /// idle_ms`, by its timestamps (as Kafka's) and by the broker's clock
    /// when it took it (records stamped long ago, a copy of an old topic,
    /// do not make an active producer's retry a stranger's); returns how
    /// many.
    pub fn expire(&mut self, now_ms: i64, idle_ms: i64) -> usize {
        let before = self.by_id.len();
        let horizon = now_ms.saturating_sub(idle_ms);
        self.by_id.retain(|_, p| {
            p.txn_first_offset.is_some() || p.last_timestamp.max(p.appended_ms) >= horizon
        });
        before - self.by_id.len()
    }

    /// The snapshot of this state as of `offset`, with `aborted`
    /// transactions below it (see the module's table).
    pub fn encode_snapshot(&self, offset: u64, aborted: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(SNAPSHOT_HEADER_BYTES + self.by_id.len() * 64);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&aborted.to_be_bytes());
        out.extend_from_slice(&(self.by_id.len() as u32).to_be_bytes());
        for (id, p) in self.producers() {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&p.epoch.to_be_bytes());
            out.extend_from_slice(&p.last_timestamp.to_be_bytes());
            let txn = p.txn_first_offset.map_or(-1, |o| o as i64);
            out.extend_from_slice(&txn.to_be_bytes());
            out.extend_from_slice(&p.coordinator_epoch.to_be_bytes());
            out.push(p.batches.len() as u8);
            for b in &p.batches {
                out.extend_from_slice(&b.first_sequence.to_be_bytes());
                out.extend_from_slice(&b.last_sequence.to_be_bytes());
                out.extend_from_slice(&b.base_offset.to_be_bytes());
                let delta = (b.last_offset - b.base_offset) as u32;
                out.extend_from_slice(&delta.to_be_bytes());
                out.extend_from_slice(&b.crc.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out[4..]);
        out[..4].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes a snapshot: its offset, its count of aborted transactions
    /// and its state, or why it is not one.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, String> {
        if bytes.len() < SNAPSHOT_V1_HEADER_BYTES || bytes.len() > SNAPSHOT_BYTES_MAX {
            return Err(format!("a snapshot of {} bytes", bytes.len()));
        }
        let mut r = Reader { bytes, at: 0 };
        let crc = r.u32()?;
        if crc != crc32c::crc32c(&bytes[4..]) {
            return Err("its CRC32C does not match".into());
        }
        let version = r.i16()?;
        if version != SNAPSHOT_VERSION && version != 1 {
            return Err(format!("version {version}"));
        }
        let offset = r.u64()?;
        let aborted = if version == 1 { 0 } else { r.u64()? };
        let count = r.u32()? as usize;
        if count > SNAPSHOT_BYTES_MAX / PRODUCER_BYTES {
            return Err(format!("{count} producers"));
        }
        let mut state = ProducerState::default();
        for _ in 0..count {
            let (id, producer) = decode_producer(&mut r, offset, version)?;
            if let Some(first) = producer.txn_first_offset {
                state.open.insert((first, id));
            }
            if state.by_id.insert(id, producer).is_some() {
                return Err(format!("producer {id} twice"));
            }
        }
        if r.at != bytes.len() {
            return Err("bytes after its last producer".into());
        }
        Ok(Snapshot {
            offset,
            aborted,
            state,
        })
    }
}

/// A decoded snapshot.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The offset it is the state at.
    pub offset: u64,
    /// The aborted transactions whose markers are below it.
    pub aborted: u64,
    /// The state.
    pub state: ProducerState,
}

fn decode_producer(
    r: &mut Reader<'_>,
    offset: u64,
    version: i16,
) -> Result<(i64, Producer), String> {
    let id = r.i64()?;
    let epoch = r.i16()?;
    let last_timestamp = r.i64()?;
    let (txn, coordinator_epoch) = match version {
        1 => (-1, -1),
        _ => (r.i64()?, r.i32()?),
    };
    let n = r.u8()? as usize;
    let fewest = usize::from(version == 1);
    if id < 0
        || epoch < 0
        || n < fewest
        || n > BATCHES_REMEMBERED
        || txn < -1
        || coordinator_epoch < -1
    {
        return Err(format!("producer {id}: epoch {epoch}, {n} batches"));
    }
    let txn_first_offset = u64::try_from(txn).ok();
    if txn_first_offset.is_some_and(|t| t >= offset) {
        return Err(format!("producer {id}: a transaction from offset {txn}"));
    }
    let mut batches = VecDeque::with_capacity(n);
    for _ in 0..n {
        let first_sequence = r.i32()?;
        let last_sequence = r.i32()?;
        let base_offset = r.u64()?;
        let last_offset = base_offset.saturating_add(u64::from(r.u32()?));
        let crc = r.u32()?;
        if first_sequence < 0 || last_sequence < 0 || last_offset >= offset {
            return Err(format!("producer {id}: a batch at offset {base_offset}"));
        }
        batches.push_back(SequencedBatch {
            first_sequence,
            last_sequence,
            base_offset,
            last_offset,
            crc,
        });
    }
    let producer = Producer {
        epoch,
        last_timestamp,
        batches,
        txn_first_offset,
        coordinator_epoch,
        // Loaded now: its idle time starts now.
        appended_ms: crate::clock::now_ms(),
    };
    Ok((id, producer))
}

/// Big-endian fields from a byte slice, each refused past its end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let field = self
            .bytes
            .get(self.at..self.at + N)
            .ok_or("it ends inside a field")?;
        self.at += N;
        Ok(field.try_into().expect("N bytes"))
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take::<1>()?[0])
    }

    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take()?))
    }

    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take()?))
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.take()?))
    }

    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_be_bytes(self.take()?))
    }
}

#[cfg(test)]
mod tests;
