//! The committed-offset requests (offset_commit, offset_fetch): a group's
//! offsets, kept in the offsets topic by the leader of the group's
//! partition of it ([`crate::coord::offsets_topic`]). The bytes are in
//! the table of [`crate::protocol`].

use super::frame::{put, Reader};
use super::{ProtocolError, Result};
use crate::limits;

/// What an offset_commit does to a group's committed offset of a
/// partition; each is refused (`commit_fenced`) when a later claim's
/// generation is stored for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum CommitMode {
    /// Stores the offset unless the stored one is higher: a commit never
    /// sends the group back.
    Commit = 0,
    /// Stores the generation alone (the offset is kept): a new claim's
    /// first word, so that every older claim's commit is refused from
    /// then on.
    Fence = 1,
    /// Stores the offset, lower or higher (an operator's reset).
    Reset = 2,
    /// Deletes the committed offset.
    Delete = 3,
}

/// An offset_commit request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommit {
    /// The consumer group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: u32,
    /// The next offset the group reads (ignored by a fence or a delete).
    pub offset: u64,
    /// The generation of the committer's claim of the partition.
    pub generation: u64,
    /// What to do.
    pub mode: CommitMode,
}

/// An offset_fetch request: a group's committed offsets, all of them or
/// those of one topic, or one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetch {
    /// The consumer group.
    pub group: String,
    /// The topic, or every topic (`None`, sent empty).
    pub topic: Option<String>,
    /// The partition, or every partition (`None`, sent as `2^32 - 1`).
    pub partition: Option<u32>,
}

/// `partition` of an offset_fetch for every partition.
pub(super) const EVERY_PARTITION: u32 = u32::MAX;

/// A group id of at most [`limits::GROUP_ID_BYTES_MAX`] bytes of a
/// registry name's characters (ASCII letters, digits, `.`, `_`, `-`; not
/// `.` or `..`): it names a registry's entries, and a directory's files.
pub(super) fn group(r: &mut Reader<'_>) -> Result<String> {
    let g = r.str_ref("group")?;
    if g.is_empty() || g.len() > limits::GROUP_ID_BYTES_MAX {
        return Err(ProtocolError(format!(
            "a group id of {} bytes (1 to {})",
            g.len(),
            limits::GROUP_ID_BYTES_MAX
        )));
    }
    name("group id", g)
}

/// A topic name of at most [`limits::TOPIC_NAME_BYTES_MAX`] bytes, of a
/// topic's characters (empty: none).
fn topic(r: &mut Reader<'_>) -> Result<String> {
    let t = r.str_ref("topic")?;
    if t.len() > limits::TOPIC_NAME_BYTES_MAX {
        return Err(ProtocolError(format!(
            "a topic name of {} bytes (at most {})",
            t.len(),
            limits::TOPIC_NAME_BYTES_MAX
        )));
    }
    if t.is_empty() {
        return Ok(String::new());
    }
    name("topic name", t)
}

/// `name`, if it is a valid topic (or registry) name.
fn name(what: &str, name: &str) -> Result<String> {
    crate::storage::store::validate_topic(name)
        .map_err(|_| ProtocolError(format!("{name:?} is no valid {what}: only ASCII letters, digits, '.', '_' and '-' (not '.' or '..')")))?;
    Ok(name.to_string())
}

/// Decodes an offset_commit body.
pub(super) fn decode_commit(r: &mut Reader<'_>) -> Result<OffsetCommit> {
    let group = group(r)?;
    let topic = topic(r)?;
    if topic.is_empty() {
        return Err(ProtocolError("an offset commit names no topic".into()));
    }
    let partition = r.u32("partition")?;
    if partition > i32::MAX as u32 {
        return Err(ProtocolError(format!(
            "partition {partition} is past 2^31 - 1"
        )));
    }
    let offset = r.u64("offset")?;
    if offset > i64::MAX as u64 {
        return Err(ProtocolError(format!("offset {offset} is past 2^63 - 1")));
    }
    let generation = r.u64("generation")?;
    let mode = match r.i8("mode")? {
        0 => CommitMode::Commit,
        1 => CommitMode::Fence,
        2 => CommitMode::Reset,
        3 => CommitMode::Delete,
        m => return Err(ProtocolError(format!("commit mode {m} is not 0 to 3"))),
    };
    Ok(OffsetCommit {
        group,
        topic,
        partition,
        offset,
        generation,
        mode,
    })
}

/// Decodes an offset_fetch body.
pub(super) fn decode_fetch(r: &mut Reader<'_>) -> Result<OffsetFetch> {
    let group = group(r)?;
    let topic = topic(r)?;
    let partition = r.u32("partition")?;
    Ok(OffsetFetch {
        group,
        topic: (!topic.is_empty()).then_some(topic),
        partition: (partition != EVERY_PARTITION).then_some(partition),
    })
}

/// The body of an offset_commit response: the offset stored before
/// (`None`: none).
pub fn put_commit_response(out: &mut Vec<u8>, before: Option<u64>) {
    put::i64(out, before.map_or(-1, |o| o as i64));
}

/// Decodes the body of an offset_commit response.
pub fn decode_commit_response(r: &mut Reader<'_>) -> Result<Option<u64>> {
    let before = r.i64("offset before")?;
    r.finish("offset_commit response")?;
    match before {
        -1 => Ok(None),
        b if b >= 0 => Ok(Some(b as u64)),
        b => Err(ProtocolError(format!("offset before {b}"))),
    }
}

/// The body of an offset_fetch response.
pub fn put_offsets_response(out: &mut Vec<u8>, offsets: &[(String, u32, u64)]) {
    put::u32(out, offsets.len() as u32);
    for (topic, partition, offset) in offsets {
        put::str(out, topic);
        put::u32(out, *partition);
        put::u64(out, *offset);
    }
}

/// Decodes the body of an offset_fetch response: (topic, partition,
/// offset), as many as the body holds (its count is checked against the
/// bytes before anything is allocated).
pub fn decode_offsets_response(r: &mut Reader<'_>) -> Result<Vec<(String, u32, u64)>> {
    let count = r.u32("count")? as usize;
    // Each entry takes at least 14 bytes: a count past that is a lie.
    if count > r.left() / 14 {
        return Err(ProtocolError(format!(
            "{count} offsets in {} bytes",
            r.left()
        )));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let topic = r.str("topic")?;
        let partition = r.u32("partition")?;
        let offset = r.u64("offset")?;
        out.push((topic, partition, offset));
    }
    r.finish("offset_fetch response")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        decode_request, offset_commit_request, offset_fetch_request, Request, LENGTH_BYTES,
    };

    #[test]
    fn commits_and_fetches_decode_as_sent_and_bad_fields_are_refused() {
        let c = OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
            offset: 42,
            generation: 7,
            mode: CommitMode::Fence,
        };
        let mut out = Vec::new();
        offset_commit_request(&mut out, 9, &c);
        let (_, request) = decode_request(&out[LENGTH_BYTES..]).unwrap();
        assert_eq!(request, Request::OffsetCommit(c.clone()));
        let f = OffsetFetch {
            group: "g".into(),
            topic: None,
            partition: None,
        };
        offset_fetch_request(&mut out, 9, &f);
        let (_, request) = decode_request(&out[LENGTH_BYTES..]).unwrap();
        assert_eq!(request, Request::OffsetFetch(f));
        for bad in [
            OffsetCommit {
                group: String::new(),
                ..c.clone()
            },
            OffsetCommit {
                group: "g".repeat(limits::GROUP_ID_BYTES_MAX + 1),
                ..c.clone()
            },
            OffsetCommit {
                topic: String::new(),
                ..c.clone()
            },
            OffsetCommit {
                offset: u64::MAX,
                ..c.clone()
            },
            OffsetCommit {
                partition: 1 << 31,
                ..c.clone()
            },
            // Names a directory registry would join onto its paths.
            OffsetCommit {
                group: "../../etc".into(),
                ..c.clone()
            },
            OffsetCommit {
                group: "..".into(),
                ..c.clone()
            },
            OffsetCommit {
                topic: "a/b".into(),
                ..c.clone()
            },
        ] {
            offset_commit_request(&mut out, 9, &bad);
            assert!(decode_request(&out[LENGTH_BYTES..]).is_err(), "{bad:?}");
        }
        for group in ["/abs", "..", "a b"] {
            let f = OffsetFetch {
                group: group.into(),
                topic: None,
                partition: None,
            };
            offset_fetch_request(&mut out, 9, &f);
            assert!(decode_request(&out[LENGTH_BYTES..]).is_err(), "{f:?}");
        }
        offset_commit_request(&mut out, 9, &c);
        *out.last_mut().unwrap() = 4;
        assert!(decode_request(&out[LENGTH_BYTES..]).is_err());
    }

    #[test]
    fn a_fetch_answer_whose_count_outruns_its_bytes_is_refused_before_allocating() {
        let mut out = Vec::new();
        put_offsets_response(&mut out, &[("t".into(), 1, 5), ("u".into(), 0, 9)]);
        let decoded = decode_offsets_response(&mut Reader::new(&out)).unwrap();
        assert_eq!(decoded, [("t".into(), 1, 5), ("u".into(), 0, 9)]);
        out[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_offsets_response(&mut Reader::new(&out)).is_err());
        let mut before = Vec::new();
        put_commit_response(&mut before, Some(12));
        assert_eq!(
            decode_commit_response(&mut Reader::new(&before)).unwrap(),
            Some(12)
        );
    }
}
