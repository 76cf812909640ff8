//! OffsetCommit (8) v2–7 and OffsetFetch (9) v1–5: a group's committed
//! positions, by topic and partition.

use super::{array, nullable_array};
use crate::kafka::wire::{
    put_array_len, put_i16, put_i32, put_i64, put_nullable_string, put_string, DecodeError, Decoder,
};

/// Least bytes of a `(name string, [..])` topic element: two empty lengths.
const TOPIC_BYTES_MIN: usize = 2 + 4;

/// OffsetCommit request: a member commits positions for its partitions.
///
/// | version | body |
/// |---|---|
/// | 2–4 | `group_id string` · `generation_id int32` · `member_id string` · `retention_time_ms int64` · `topics [name string · partitions [partition_index int32 · committed_offset int64 · committed_metadata nullable string]]` |
/// | 5–6 | no `retention_time_ms`; from 6 a partition has `committed_leader_epoch int32` after `committed_offset` |
/// | 7 | after `member_id`: `group_instance_id nullable string` |
///
/// Kafka's schema renamed `generation_id` `generation_id_or_member_epoch`
/// in v9 (KIP-848); at these versions it is the generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest<'a> {
    /// The group id.
    pub group_id: &'a str,
    /// The committer's generation (-1: a commit from outside any group
    /// generation, as a standalone consumer's).
    pub generation_id: i32,
    /// The committer's member id ("" outside a generation).
    pub member_id: &'a str,
    /// The static member id (v7+; null before).
    pub group_instance_id: Option<&'a str>,
    /// How long to keep the offsets (v2–4; -1, the broker's default, at
    /// v5+).
    pub retention_time_ms: i64,
    /// The positions to commit.
    pub topics: Vec<OffsetCommitRequestTopic<'a>>,
}

/// One topic's commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequestTopic<'a> {
    /// The topic name.
    pub name: &'a str,
    /// Its partitions' commits.
    pub partitions: Vec<OffsetCommitRequestPartition<'a>>,
}

/// One partition's commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequestPartition<'a> {
    /// The partition.
    pub partition_index: i32,
    /// The offset of the next record to consume.
    pub committed_offset: i64,
    /// The leader epoch of the last record consumed (v6+; -1 before).
    pub committed_leader_epoch: i32,
    /// Client metadata kept with the offset.
    pub committed_metadata: Option<&'a str>,
}

impl<'a> OffsetCommitRequest<'a> {
    /// Decodes the body of `version` (2–7).
    pub fn decode(d: &mut Decoder<'a>, version: i16) -> Result<Self, DecodeError> {
        let group_id = d.string("group_id")?;
        let generation_id = d.i32("generation_id")?;
        let member_id = d.string("member_id")?;
        let group_instance_id = if version >= 7 {
            d.nullable_string("group_instance_id")?
        } else {
            None
        };
        let retention_time_ms = if version <= 4 {
            d.i64("retention_time_ms")?
        } else {
            -1
        };
        // partition_index · committed_offset · [committed_leader_epoch] · metadata length.
        let partition_bytes_min = 4 + 8 + if version >= 6 { 4 } else { 0 } + 2;
        let topics = array(d, TOPIC_BYTES_MIN, "topics", |d| {
            let name = d.string("topics.name")?;
            let partitions = array(d, partition_bytes_min, "topics.partitions", |d| {
                commit_partition(d, version)
            })?;
            Ok(OffsetCommitRequestTopic { name, partitions })
        })?;
        Ok(OffsetCommitRequest {
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            retention_time_ms,
            topics,
        })
    }
}

fn commit_partition<'a>(
    d: &mut Decoder<'a>,
    version: i16,
) -> Result<OffsetCommitRequestPartition<'a>, DecodeError> {
    let partition_index = d.i32("partitions.partition_index")?;
    let committed_offset = d.i64("partitions.committed_offset")?;
    let committed_leader_epoch = if version >= 6 {
        d.i32("partitions.committed_leader_epoch")?
    } else {
        -1
    };
    let committed_metadata = d.nullable_string("partitions.committed_metadata")?;
    Ok(OffsetCommitRequestPartition {
        partition_index,
        committed_offset,
        committed_leader_epoch,
        committed_metadata,
    })
}

/// OffsetCommit response: an error code per partition.
///
/// | version | body |
/// |---|---|
/// | 2 | `topics [name string · partitions [partition_index int32 · error_code int16]]` |
/// | 3–7 | `throttle_time_ms int32` first |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitResponse<'a> {
    /// Throttle time (v3+).
    pub throttle_time_ms: i32,
    /// The result of each topic.
    pub topics: Vec<OffsetCommitResponseTopic<'a>>,
}

/// One topic's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitResponseTopic<'a> {
    /// The topic name.
    pub name: &'a str,
    /// Its partitions' results.
    pub partitions: Vec<OffsetCommitResponsePartition>,
}

/// One partition's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetCommitResponsePartition {
    /// The partition.
    pub partition_index: i32,
    /// The error code, or 0.
    pub error_code: i16,
}

impl OffsetCommitResponse<'_> {
    /// Appends the body of `version` (2–7) to `out`.
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        if version >= 3 {
            put_i32(out, self.throttle_time_ms);
        }
        put_array_len(out, self.topics.len());
        for topic in &self.topics {
            put_string(out, topic.name);
            put_array_len(out, topic.partitions.len());
            for partition in &topic.partitions {
                put_i32(out, partition.partition_index);
                put_i16(out, partition.error_code);
            }
        }
    }
}

/// OffsetFetch request: a group's committed positions.
///
/// | version | body |
/// |---|---|
/// | 1 | `group_id string` · `topics [name string · partition_indexes [int32]]` |
/// | 2–5 | the same, `topics` nullable: null asks for every committed partition |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchRequest<'a> {
    /// The group id.
    pub group_id: &'a str,
    /// The partitions asked for; `None` (v2+) for all the group has.
    pub topics: Option<Vec<OffsetFetchRequestTopic<'a>>>,
}

/// One topic's partitions asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchRequestTopic<'a> {
    /// The topic name.
    pub name: &'a str,
    /// The partitions.
    pub partition_indexes: Vec<i32>,
}

impl<'a> OffsetFetchRequest<'a> {
    /// Decodes the body of `version` (1–5); a null `topics` at v1 is an
    /// error, as it is to Kafka.
    pub fn decode(d: &mut Decoder<'a>, version: i16) -> Result<Self, DecodeError> {
        let group_id = d.string("group_id")?;
        let topic = |d: &mut Decoder<'a>| {
            let name = d.string("topics.name")?;
            let partition_indexes = array(d, 4, "topics.partition_indexes", |d| {
                d.i32("topics.partition_indexes")
            })?;
            Ok(OffsetFetchRequestTopic {
                name,
                partition_indexes,
            })
        };
        let topics = if version >= 2 {
            nullable_array(d, TOPIC_BYTES_MIN, "topics", topic)?
        } else {
            Some(array(d, TOPIC_BYTES_MIN, "topics", topic)?)
        };
        Ok(OffsetFetchRequest { group_id, topics })
    }
}

/// OffsetFetch response: each partition's committed offset (-1: none).
///
/// | version | body |
/// |---|---|
/// | 1 | `topics [name string · partitions [partition_index int32 · committed_offset int64 · metadata nullable string · error_code int16]]` |
/// | 2 | then `error_code int16` (the group's) |
/// | 3–4 | `throttle_time_ms int32` first |
/// | 5 | a partition has `committed_leader_epoch int32` after `committed_offset` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponse<'a> {
    /// Throttle time (v3+).
    pub throttle_time_ms: i32,
    /// The committed offsets, by topic.
    pub topics: Vec<OffsetFetchResponseTopic<'a>>,
    /// The group's error code (v2+), or 0.
    pub error_code: i16,
}

/// One topic's committed offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponseTopic<'a> {
    /// The topic name.
    pub name: &'a str,
    /// Its partitions.
    pub partitions: Vec<OffsetFetchResponsePartition<'a>>,
}

/// One partition's committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponsePartition<'a> {
    /// The partition.
    pub partition_index: i32,
    /// The committed offset, or -1 when none is.
    pub committed_offset: i64,
    /// The leader epoch committed with it (v5+), or -1.
    pub committed_leader_epoch: i32,
    /// The metadata committed with it.
    pub metadata: Option<&'a str>,
    /// The error code, or 0.
    pub error_code: i16,
}

impl OffsetFetchResponse<'_> {
    /// Appends the body of `version` (1–5) to `out`.
    pub fn encode(&self, version: i16, out: &mut Vec<u8>) {
        if version >= 3 {
            put_i32(out, self.throttle_time_ms);
        }
        put_array_len(out, self.topics.len());
        for topic in &self.topics {
            put_string(out, topic.name);
            put_array_len(out, topic.partitions.len());
            for partition in &topic.partitions {
                put_i32(out, partition.partition_index);
                put_i64(out, partition.committed_offset);
                if version >= 5 {
                    put_i32(out, partition.committed_leader_epoch);
                }
                put_nullable_string(out, partition.metadata);
                put_i16(out, partition.error_code);
            }
        }
        if version >= 2 {
            put_i16(out, self.error_code);
        }
    }
}
