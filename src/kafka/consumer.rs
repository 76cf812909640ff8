//! The embedded consumer protocol: the bytes a consumer puts in its
//! JoinGroup protocol metadata (a subscription) and the leader puts in its
//! SyncGroup assignments (an assignment), when the group's protocol type is
//! "consumer". The broker reads the subscriptions to assign partitions
//! itself and writes each member's assignment.
//!
//! Both start with a `version int16`, then the fields of Kafka's
//! `ConsumerProtocolSubscription.json` / `ConsumerProtocolAssignment.json`
//! at that version (non-flexible types: `int16`-length strings, `int32`
//! lengths for bytes and arrays):
//!
//! | message | version | fields after `version` |
//! |---|---|---|
//! | subscription | 0 | `topics [string]` · `user_data nullable bytes` |
//! | subscription | 1 | then `owned_partitions [topic string · partitions [int32]]` |
//! | subscription | 2 | then `generation_id int32` |
//! | subscription | 3 | then `rack_id nullable string` |
//! | assignment | 0–3 | `assigned_partitions [topic string · partitions [int32]]` · `user_data nullable bytes` |
//!
//! As Kafka's `ConsumerProtocol` does, a version above 3 is read as 3 (a
//! newer version only appends fields) and bytes after the fields are
//! ignored; a negative version is an error. Counts are checked against the
//! bytes left before anything is allocated. Encoding writes the struct's
//! version, capped to 0–3.

use super::group::array;
use super::wire::{
    put_array_len, put_i16, put_i32, put_nullable_bytes, put_nullable_string, put_string,
    DecodeError, Decoder,
};

/// The newest version of both messages this module knows.
pub const CONSUMER_PROTOCOL_VERSION_MAX: i16 = 3;

/// A consumer's subscription, carried in JoinGroup protocol metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerProtocolSubscription<'a> {
    /// The version the member wrote (may exceed 3).
    pub version: i16,
    /// The topics subscribed to.
    pub topics: Vec<&'a str>,
    /// The assignor's user data.
    pub user_data: Option<&'a [u8]>,
    /// The partitions the member owns (v1+; empty before).
    pub owned_partitions: Vec<TopicPartition<'a>>,
    /// The generation the member last joined (v2+; -1 before).
    pub generation_id: i32,
    /// The member's rack (v3+; null before).
    pub rack_id: Option<&'a str>,
}

/// A topic and some of its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartition<'a> {
    /// The topic name.
    pub topic: &'a str,
    /// Its partitions.
    pub partitions: Vec<i32>,
}

/// A member's assignment, carried in SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerProtocolAssignment<'a> {
    /// The version written (may exceed 3 when decoded).
    pub version: i16,
    /// The partitions assigned, by topic.
    pub assigned_partitions: Vec<TopicPartition<'a>>,
    /// The assignor's user data.
    pub user_data: Option<&'a [u8]>,
}

/// Least bytes of a `(topic string, partitions [int32])` element.
const TOPIC_PARTITION_BYTES_MIN: usize = 2 + 4;

impl<'a> ConsumerProtocolSubscription<'a> {
    /// Decodes a subscription from JoinGroup metadata.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut d = Decoder::new(bytes);
        let version = read_version(&mut d, "subscription")?;
        let topics = array(&mut d, 2, "subscription.topics", |d| {
            d.string("subscription.topics")
        })?;
        let user_data = d.nullable_bytes("subscription.user_data")?;
        let owned_partitions = if version >= 1 {
            topic_partitions(&mut d, "subscription.owned_partitions")?
        } else {
            Vec::new()
        };
        let generation_id = if version >= 2 {
            d.i32("subscription.generation_id")?
        } else {
            -1
        };
        let rack_id = if version >= 3 {
            d.nullable_string("subscription.rack_id")?
        } else {
            None
        };
        Ok(ConsumerProtocolSubscription {
            version,
            topics,
            user_data,
            owned_partitions,
            generation_id,
            rack_id,
        })
    }

    /// Appends the subscription to `out` at its version (capped to 0–3).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let version = self.version.clamp(0, CONSUMER_PROTOCOL_VERSION_MAX);
        put_i16(out, version);
        put_array_len(out, self.topics.len());
        for topic in &self.topics {
            put_string(out, topic);
        }
        put_nullable_bytes(out, self.user_data);
        if version >= 1 {
            put_topic_partitions(out, &self.owned_partitions);
        }
        if version >= 2 {
            put_i32(out, self.generation_id);
        }
        if version >= 3 {
            put_nullable_string(out, self.rack_id);
        }
    }
}

impl<'a> ConsumerProtocolAssignment<'a> {
    /// Decodes an assignment from a SyncGroup request or response.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut d = Decoder::new(bytes);
        let version = read_version(&mut d, "assignment")?;
        let assigned_partitions = topic_partitions(&mut d, "assignment.assigned_partitions")?;
        let user_data = d.nullable_bytes("assignment.user_data")?;
        Ok(ConsumerProtocolAssignment {
            version,
            assigned_partitions,
            user_data,
        })
    }

    /// Appends the assignment to `out` at its version (capped to 0–3).
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_i16(out, self.version.clamp(0, CONSUMER_PROTOCOL_VERSION_MAX));
        put_topic_partitions(out, &self.assigned_partitions);
        put_nullable_bytes(out, self.user_data);
    }
}

/// The version, refused when negative (Kafka: "unsupported version").
fn read_version(d: &mut Decoder<'_>, what: &str) -> Result<i16, DecodeError> {
    let version = d.i16(what)?;
    if version < 0 {
        return Err(DecodeError(format!(
            "{what}: version {version} is negative"
        )));
    }
    Ok(version)
}

fn topic_partitions<'a>(
    d: &mut Decoder<'a>,
    what: &str,
) -> Result<Vec<TopicPartition<'a>>, DecodeError> {
    array(d, TOPIC_PARTITION_BYTES_MIN, what, |d| {
        let topic = d.string(what)?;
        let partitions = array(d, 4, what, |d| d.i32(what))?;
        Ok(TopicPartition { topic, partitions })
    })
}

fn put_topic_partitions(out: &mut Vec<u8>, topics: &[TopicPartition<'_>]) {
    put_array_len(out, topics.len());
    for topic in topics {
        put_string(out, topic.topic);
        put_array_len(out, topic.partitions.len());
        for &partition in &topic.partitions {
            put_i32(out, partition);
        }
    }
}
