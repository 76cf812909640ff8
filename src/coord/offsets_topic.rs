//! Committed offsets as records of an internal compacted topic,
//! `__consumer_offsets`, as Kafka 0.8.2 moved them out of ZooKeeper (a
//! znode write per partition per commit made ZooKeeper a hotspot): a
//! commit is an append, the latest record of each key is the committed
//! offset, and compaction keeps only that.
//!
//! This module is the topic's record format and the table its records
//! build ([`OffsetsTable`]); which broker serves a group's partition of
//! the topic is the broker's.
//!
//! # Records
//!
//! Kafka's own layout (its `OffsetCommitKey` and `OffsetCommitValue`
//! schemas), so that a tool that reads Kafka's offsets topic reads this
//! one. Integers big-endian; a string is an `int16` length and UTF-8.
//!
//! Key (version 1; version 0 is the same fields):
//!
//! | field | type | meaning |
//! |---|---|---|
//! | version | int16 | `1` (`0` read too; `2` is a group's metadata, which klog skips) |
//! | group | string | the consumer group |
//! | topic | string | the topic |
//! | partition | int32 | the partition, `0 ≤ p` |
//!
//! Value (version 3, written; versions 0 to 3 read):
//!
//! | field | type | versions | meaning |
//! |---|---|---|---|
//! | version | int16 | all | `3` |
//! | offset | int64 | all | the next offset to read, `≥ 0`; `-1`: none, the record holds a claim's generation alone (a fence) |
//! | leader_epoch | int32 | 3 | the epoch of the record before it, `-1` unknown |
//! | metadata | string | all | the committer's note |
//! | commit_timestamp | int64 | all | when it was committed (ms since the epoch) |
//! | expire_timestamp | int64 | 1 | read and ignored |
//!
//! A null value (a tombstone) deletes the key's committed offset.
//!
//! The commit's fence travels in a record header, `klog.generation`: the
//! generation (8 bytes, big-endian) of the committer's claim of the
//! partition in the registry. A commit of a generation below the one
//! stored is refused ([`OffsetsTable::check`]); a record without the
//! header (Kafka's) reads as generation 0. A second header,
//! `klog.cluster`, names the registry that issued the generation: its
//! cluster id (ASCII). A fence of another cluster's (a registry rebuilt
//! from nothing since, which issues generations from the start again)
//! fences nothing: the registry's current claim replaces it. A record
//! without it fences whatever the registry.
//!
//! `tests/golden/offsets-topic/` pins a key, a value and a record.
//!
//! # Partitions
//!
//! A group's records go to partition `abs(hash(group)) % partitions`,
//! `hash` Java's `String.hashCode` over the group id's UTF-16 code units,
//! as Kafka places them ([`partition_of`]).

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::kafka::wire::{put_i16, put_i32, put_i64, put_string, DecodeError, Decoder};
use crate::limits;
use crate::storage::batches::Batches;
use crate::storage::log::{FileSlice, Log};
use crate::storage::record::Decompressed;

/// A decoder's result: what does not decode says which field and why.
type Decoded<T> = std::result::Result<T, DecodeError>;

/// The topic's name.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// How a broker's refusal to carry a group's damaged registry offsets
/// over begins (the hint of `klog-consume` looks for it).
pub const CARRY_OVER_REFUSED: &str = "cannot carry group";
/// Whether `e` is a broker's refusal to carry a group's registry
/// offsets over because one does not parse ([`CARRY_OVER_REFUSED`]).
pub fn is_carry_over_refused(e: &Error) -> bool {
    matches!(e, Error::Broker { message, .. } if message.starts_with(CARRY_OVER_REFUSED))
}

/// The record header holding a commit's claim generation.
pub const GENERATION_HEADER: &str = "klog.generation";
/// The record header holding the cluster id of the registry that issued
/// the generation.
pub const CLUSTER_HEADER: &str = "klog.cluster";
/// The key version written.
const KEY_VERSION: i16 = 1;
/// The value version written.
const VALUE_VERSION: i16 = 3;

/// A group's committed offset of one partition, as the topic holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The next offset to read (`None`: none yet; the record is a new
    /// claim's fence).
    pub offset: Option<u64>,
    /// The leader epoch of the record before it (`-1`: unknown).
    pub leader_epoch: i32,
    /// The committer's note.
    pub metadata: String,
    /// When it was committed, ms since the epoch.
    pub timestamp_ms: i64,
    /// The generation of the committer's claim (0: none given).
    pub generation: u64,
    /// The cluster id of the registry that issued `generation` (`None`:
    /// not said, by Kafka or a klog before it said it).
    pub cluster: Option<String>,
}

/// What a key names: a group's partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffsetKey {
    /// The consumer group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
}

/// Encodes the record key of `key`.
pub fn encode_key(key: &OffsetKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + key.group.len() + key.topic.len());
    put_i16(&mut out, KEY_VERSION);
    put_string(&mut out, &key.group);
    put_string(&mut out, &key.topic);
    put_i32(&mut out, key.partition as i32);
    out
}

/// Encodes the record value of `committed` (its generation goes in the
/// record's header: [`encode_generation`]).
pub fn encode_value(committed: &Committed) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + committed.metadata.len());
    put_i16(&mut out, VALUE_VERSION);
    put_i64(&mut out, committed.offset.map_or(-1, |o| o as i64));
    put_i32(&mut out, committed.leader_epoch);
    put_string(&mut out, &committed.metadata);
    put_i64(&mut out, committed.timestamp_ms);
    out
}

/// The `klog.generation` header's value.
pub fn encode_generation(generation: u64) -> [u8; 8] {
    generation.to_be_bytes()
}

/// Decodes a record key: `None` for a key of another kind (a group's
/// metadata, version 2), an error for one that does not decode.
pub fn decode_key(bytes: &[u8]) -> Decoded<Option<OffsetKey>> {
    let mut d = Decoder::new(bytes);
    let version = d.i16("offsets key version").map_err(corrupt)?;
    match version {
        0 | 1 => {}
        2 => return Ok(None),
        v => return Err(corrupt(format!("offsets key version {v} is unknown"))),
    }
    let group = d.string("offsets key group").map_err(corrupt)?;
    let topic = d.string("offsets key topic").map_err(corrupt)?;
    let partition = d.i32("offsets key partition").map_err(corrupt)?;
    d.finish("offsets key").map_err(corrupt)?;
    let partition = u32::try_from(partition)
        .map_err(|_| corrupt(format!("offsets key partition {partition} is negative")))?;
    Ok(Some(OffsetKey {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
    }))
}

/// Decodes a record value (versions 0 to 3), with the generation from
/// the record's `klog.generation` header (`None`: 0).
pub fn decode_value(bytes: &[u8], generation: Option<&[u8]>) -> Decoded<Committed> {
    let mut d = Decoder::new(bytes);
    let version = d.i16("offsets value version").map_err(corrupt)?;
    if !(0..=3).contains(&version) {
        return Err(corrupt(format!(
            "offsets value version {version} is unknown"
        )));
    }
    let offset = d.i64("offsets value offset").map_err(corrupt)?;
    let offset = match offset {
        -1 => None,
        o => Some(
            u64::try_from(o)
                .map_err(|_| corrupt(format!("offsets value offset {o} is negative")))?,
        ),
    };
    let leader_epoch = match version {
        3 => d.i32("offsets value leader epoch").map_err(corrupt)?,
        _ => -1,
    };
    let metadata = d.string("offsets value metadata").map_err(corrupt)?;
    let timestamp_ms = d.i64("offsets value commit timestamp").map_err(corrupt)?;
    if version == 1 {
        d.i64("offsets value expire timestamp").map_err(corrupt)?;
    }
    d.finish("offsets value").map_err(corrupt)?;
    let generation = match generation {
        None => 0,
        Some(g) => u64::from_be_bytes(
            g.try_into()
                .map_err(|_| corrupt(format!("{GENERATION_HEADER} of {} bytes, not 8", g.len())))?,
        ),
    };
    Ok(Committed {
        offset,
        leader_epoch,
        metadata: metadata.to_string(),
        timestamp_ms,
        generation,
        cluster: None,
    })
}

fn corrupt(why: impl std::fmt::Display) -> DecodeError {
    DecodeError(format!("{OFFSETS_TOPIC}: {why}"))
}

/// The partition of the offsets topic holding `group`'s commits, of
/// `partitions` (more than 0): Kafka's placement.
pub fn partition_of(group: &str, partitions: u32) -> u32 {
    let hash = group.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    // Kafka's Utils.abs: i32::MIN maps to 0, not to itself.
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs as u32 % partitions.max(1)
}

/// The committed offsets one or more partitions of the topic hold: each
/// key's latest record, applied in offset order.
#[derive(Debug, Default, Clone)]
pub struct OffsetsTable {
    committed: HashMap<OffsetKey, Committed>,
    /// Records [`replay`] passed over: they do not decode.
    skipped: u64,
}

impl OffsetsTable {
    /// An empty table.
    pub fn new() -> OffsetsTable {
        OffsetsTable::default()
    }

    /// Applies a record of the topic, read in offset order: a commit, or
    /// a tombstone (`value` `None`) that deletes. A key of another kind
    /// is passed over; bytes that do not decode are an error, the table
    /// unchanged.
    pub fn apply(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        generation: Option<&[u8]>,
        cluster: Option<&[u8]>,
    ) -> Decoded<()> {
        let Some(key) = decode_key(key)? else {
            return Ok(());
        };
        match value {
            None => {
                self.committed.remove(&key);
            }
            Some(value) => {
                let mut committed = decode_value(value, generation)?;
                committed.cluster = match cluster {
                    None => None,
                    Some(id) => Some(
                        std::str::from_utf8(id)
                            .ok()
                            .filter(|id| crate::coord::cluster_id::valid(id))
                            .ok_or_else(|| corrupt(format!("{CLUSTER_HEADER} is no cluster id")))?
                            .to_string(),
                    ),
                };
                self.committed.insert(key, committed);
            }
        }
        Ok(())
    }

    /// The committed offset of `key`, if any.
    pub fn get(&self, key: &OffsetKey) -> Option<&Committed> {
        self.committed.get(key)
    }

    /// Sets `key`'s record as the latest (`None`: a tombstone), as
    /// [`OffsetsTable::apply`] of its bytes would.
    pub fn set(&mut self, key: OffsetKey, committed: Option<Committed>) {
        match committed {
            Some(c) => self.committed.insert(key, c),
            None => self.committed.remove(&key),
        };
    }

    /// Whether `group` has any record here (a fence counts).
    pub fn has_group(&self, group: &str) -> bool {
        self.committed.keys().any(|k| k.group == group)
    }

    /// The generation that fences `key` for the claims of the registry
    /// whose cluster id is `cluster`: the stored one, unless another
    /// cluster's registry issued it (`None`: no fence).
    pub fn fence(&self, key: &OffsetKey, cluster: Option<&str>) -> Option<u64> {
        let c = self.committed.get(key)?;
        let foreign = matches!((c.cluster.as_deref(), cluster), (Some(a), Some(b)) if a != b);
        (!foreign).then_some(c.generation)
    }

    /// Whether a commit of `generation`, issued by the registry of cluster
    /// `cluster`, for `key` may be written: not if a later generation's
    /// commit fences it ([`OffsetsTable::fence`], [`Error::Fenced`]).
    pub fn check(&self, key: &OffsetKey, generation: u64, cluster: Option<&str>) -> Result<()> {
        match self.fence(key, cluster) {
            Some(current) if current > generation => Err(Error::Fenced {
                what: format!(
                    "the claim of {} [{}] in group {}",
                    key.topic, key.partition, key.group
                ),
                generation,
                current,
            }),
            _ => Ok(()),
        }
    }

    /// Every committed offset of `group`, by topic and partition.
    pub fn group(&self, group: &str) -> Vec<(String, u32, u64)> {
        let mut out: Vec<_> = self
            .committed
            .iter()
            .filter(|(k, _)| k.group == group)
            .filter_map(|(k, c)| Some((k.topic.clone(), k.partition, c.offset?)))
            .collect();
        out.sort();
        out
    }

    /// The groups with a committed offset, sorted.
    pub fn groups(&self) -> Vec<String> {
        let mut out: Vec<String> = self.committed.keys().map(|k| k.group.clone()).collect();
        out.sort();
        out.dedup();
        out
    }

    /// How many records [`replay`] passed over because they do not
    /// decode (written by no broker: a client cannot produce to the topic).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// How many committed offsets it holds.
    pub fn len(&self) -> usize {
        self.committed.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.committed.is_empty()
    }
}

/// The table the records of `log` (a partition of the offsets topic)
/// build, from its start to its end; control batches are passed over, and
/// so is a record whose key or value does not decode (counted:
/// [`OffsetsTable::skipped`]). A batch that does not read is an error
/// naming it.
pub fn replay(log: &Log) -> Result<OffsetsTable> {
    let mut table = OffsetsTable::new();
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    let mut scratch = Decompressed::default();
    while let Some(slice) = log.read(offset, 1 << 20)? {
        slice.read_into(&mut buf)?;
        for step in Batches::new(slice.format, &buf, limits::BATCH_BYTES_MAX) {
            let (at, batch) = step.map_err(|e| corrupt_at(&slice, e.position, &e.error))?;
            let bad = |e: &dyn std::fmt::Display| corrupt_at(&slice, at, e);
            let next = batch.header.next_offset();
            if !batch.header.is_control() {
                let records = batch
                    .records_in(&mut scratch, u32::MAX)
                    .map_err(|e| bad(&e))?;
                for r in records {
                    let r = r.map_err(|e| bad(&e))?;
                    let header = |name: &str| {
                        r.headers()
                            .find(|(k, _)| *k == name.as_bytes())
                            .map(|(_, v)| v)
                    };
                    let generation = header(GENERATION_HEADER);
                    let cluster = header(CLUSTER_HEADER);
                    let value = (!r.null_value).then_some(r.value);
                    let key = r.key.unwrap_or_default();
                    // One record that does not decode is its own loss,
                    // not its partition's: passed over, and counted.
                    if table.apply(key, value, generation, cluster).is_err() {
                        table.skipped += 1;
                    }
                }
            }
            offset = next;
        }
    }
    Ok(table)
}

/// A batch of the slice at `at` (bytes into it) that does not read.
fn corrupt_at(slice: &FileSlice, at: u64, why: &dyn std::fmt::Display) -> Error {
    Error::Corrupt {
        path: slice.path.clone(),
        position: slice.position + at,
        reason: why.to_string(),
    }
}

mod registry;
pub use registry::{open_read_only, LocalOffsets, TopicRegistry, OFFSETS_TIMEOUT};

#[cfg(test)]
mod tests;
