//! The transactional producer's requests (init_producer_id version 2,
//! add_to_txn, txn_offset_commit, end_txn) and produce version 3, which
//! names the transaction a batch belongs to. The bytes are in the table of
//! [`crate::protocol`]; the broker answers them with the coordinator that
//! Kafka clients use, over the same registry entries
//! ([`crate::coord::transactions`]), so that a transactional id is one
//! whichever protocol its producer speaks.

use super::frame::{finish_frame, put, Reader};
use super::{ApiKey, ProtocolError, Result};

/// The init_producer_id version that carries a transactional id.
pub const INIT_VERSION_TXN: u16 = 2;
/// The produce version that carries a transactional id.
pub const PRODUCE_VERSION_TXN: u16 = 3;
/// The longest transactional id (Kafka's coordinator keeps names of
/// 249 bytes at most, as a topic's).
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = 249;
/// The longest transaction timeout, in milliseconds (Kafka's
/// `transaction.max.timeout.ms` default, 15 minutes).
pub const TXN_TIMEOUT_MS_MAX: u32 = 900_000;
/// Partitions (or offsets) in one add_to_txn or txn_offset_commit, at
/// most: a transaction holds no more ([`crate::coord::transactions`]).
pub const TXN_PARTITIONS_MAX: usize = 1_000;

/// A producer of a transactional id: its id and epoch, as init gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnProducer {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
}

/// A transactional request's body, after the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnRequest {
    /// A producer id and a new epoch for a transactional id: every older
    /// instance of it is fenced, its open transaction aborted.
    Init {
        /// The transactional id.
        transactional_id: String,
        /// An open transaction older than this is aborted.
        timeout_ms: u32,
    },
    /// Partitions (and a group's offsets) join the producer's
    /// transaction, which begins with the first.
    Add {
        /// Whose transaction.
        producer: TxnProducer,
        /// The partitions its batches go to.
        partitions: Vec<(String, u32)>,
    },
    /// A group's offsets, committed with the transaction (the group
    /// joins it).
    OffsetCommit {
        /// Whose transaction.
        producer: TxnProducer,
        /// The group.
        group: String,
        /// `(topic, partition, offset)`: the next offset the group reads.
        offsets: Vec<(String, u32, u64)>,
    },
    /// Commits or aborts the transaction.
    End {
        /// Whose transaction.
        producer: TxnProducer,
        /// Commit (`true`) or abort.
        commit: bool,
    },
}

/// Encodes a transactional request.
pub fn txn_request(out: &mut Vec<u8>, correlation_id: u32, request: &TxnRequest) {
    out.clear();
    let (api, version) = match request {
        TxnRequest::Init { .. } => (ApiKey::InitProducerId, INIT_VERSION_TXN),
        TxnRequest::Add { .. } => (ApiKey::AddToTxn, 1),
        TxnRequest::OffsetCommit { .. } => (ApiKey::TxnOffsetCommit, 1),
        TxnRequest::End { .. } => (ApiKey::EndTxn, 1),
    };
    // The request header, as every request's.
    put::u32(out, 0);
    put::u16(out, api as u16);
    put::u16(out, version);
    put::u32(out, correlation_id);
    match request {
        TxnRequest::Init {
            transactional_id,
            timeout_ms,
        } => {
            put::str(out, transactional_id);
            put::u32(out, *timeout_ms);
        }
        TxnRequest::Add {
            producer,
            partitions,
        } => {
            put_producer(out, producer);
            put::u16(out, partitions.len() as u16);
            for (topic, partition) in partitions {
                put::str(out, topic);
                put::u32(out, *partition);
            }
        }
        TxnRequest::OffsetCommit {
            producer,
            group,
            offsets,
        } => {
            put_producer(out, producer);
            put::str(out, group);
            put::u16(out, offsets.len() as u16);
            for (topic, partition, offset) in offsets {
                put::str(out, topic);
                put::u32(out, *partition);
                put::u64(out, *offset);
            }
        }
        TxnRequest::End { producer, commit } => {
            put_producer(out, producer);
            put::i8(out, i8::from(*commit));
        }
    }
    finish_frame(out);
}

fn put_producer(out: &mut Vec<u8>, p: &TxnProducer) {
    put::str(out, &p.transactional_id);
    put::i64(out, p.producer_id);
    put::u16(out, p.epoch as u16);
}

/// A transactional id: 1 to [`TRANSACTIONAL_ID_BYTES_MAX`] bytes of
/// UTF-8 (the registry escapes what a file name cannot hold).
fn transactional_id(r: &mut Reader<'_>) -> Result<String> {
    let id = r.str_ref("transactional_id")?;
    if id.is_empty() || id.len() > TRANSACTIONAL_ID_BYTES_MAX {
        return Err(ProtocolError(format!(
            "a transactional id of {} bytes (1 to {TRANSACTIONAL_ID_BYTES_MAX})",
            id.len()
        )));
    }
    Ok(id.to_string())
}

fn producer(r: &mut Reader<'_>) -> Result<TxnProducer> {
    let transactional_id = transactional_id(r)?;
    let producer_id = r.i64("producer_id")?;
    let epoch = r.u16("producer_epoch")?;
    if producer_id < 0 || epoch > i16::MAX as u16 {
        return Err(ProtocolError(format!(
            "producer {producer_id} epoch {epoch}"
        )));
    }
    Ok(TxnProducer {
        transactional_id,
        producer_id,
        epoch: epoch as i16,
    })
}

/// A count of entries of at least `bytes_min` bytes each: one the frame
/// cannot hold, or past [`TXN_PARTITIONS_MAX`], allocates nothing.
fn count(r: &mut Reader<'_>, bytes_min: usize) -> Result<usize> {
    let count = r.u16("count")? as usize;
    if count > TXN_PARTITIONS_MAX || count > r.left() / bytes_min {
        return Err(ProtocolError(format!(
            "{count} partitions in {} bytes (at most {TXN_PARTITIONS_MAX})",
            r.left()
        )));
    }
    Ok(count)
}

/// A topic and partition of a transaction.
fn topic_partition(r: &mut Reader<'_>) -> Result<(String, u32)> {
    let topic = r.str_ref("topic")?;
    crate::storage::store::validate_topic(topic)
        .map_err(|e| ProtocolError(format!("topic {topic:?}: {e}")))?;
    let partition = r.u32("partition")?;
    if partition > i32::MAX as u32 {
        return Err(ProtocolError(format!(
            "partition {partition} is past 2^31 - 1"
        )));
    }
    Ok((topic.to_string(), partition))
}

/// Decodes the body of a transactional request of `api` (init_producer_id
/// of version [`INIT_VERSION_TXN`] or more, add_to_txn,
/// txn_offset_commit, end_txn).
pub(super) fn decode(api: ApiKey, r: &mut Reader<'_>) -> Result<TxnRequest> {
    Ok(match api {
        ApiKey::InitProducerId => {
            let transactional_id = transactional_id(r)?;
            let timeout_ms = r.u32("timeout_ms")?;
            if !(1..=TXN_TIMEOUT_MS_MAX).contains(&timeout_ms) {
                return Err(ProtocolError(format!(
                    "a transaction timeout of {timeout_ms} ms (1 to {TXN_TIMEOUT_MS_MAX})"
                )));
            }
            TxnRequest::Init {
                transactional_id,
                timeout_ms,
            }
        }
        ApiKey::AddToTxn => {
            let producer = producer(r)?;
            let n = count(r, 2 + 1 + 4)?;
            let mut partitions = Vec::with_capacity(n);
            for _ in 0..n {
                partitions.push(topic_partition(r)?);
            }
            TxnRequest::Add {
                producer,
                partitions,
            }
        }
        ApiKey::TxnOffsetCommit => decode_offset_commit(r)?,
        ApiKey::EndTxn => {
            let producer = producer(r)?;
            let commit = match r.i8("commit")? {
                0 => false,
                1 => true,
                c => return Err(ProtocolError(format!("commit {c} is not 0 or 1"))),
            };
            TxnRequest::End { producer, commit }
        }
        other => {
            return Err(ProtocolError(format!(
                "{other:?} is no transactional request"
            )))
        }
    })
}

/// Decodes a txn_offset_commit body.
fn decode_offset_commit(r: &mut Reader<'_>) -> Result<TxnRequest> {
    let producer = producer(r)?;
    let group = super::offsets::group(r)?;
    let n = count(r, 2 + 1 + 4 + 8)?;
    let mut offsets = Vec::with_capacity(n);
    for _ in 0..n {
        let (topic, partition) = topic_partition(r)?;
        let offset = r.u64("offset")?;
        if offset > i64::MAX as u64 {
            return Err(ProtocolError(format!("offset {offset} is past 2^63 - 1")));
        }
        offsets.push((topic, partition, offset));
    }
    Ok(TxnRequest::OffsetCommit {
        producer,
        group,
        offsets,
    })
}

/// A produce of version [`PRODUCE_VERSION_TXN`]: its transactional id, or
/// none (empty).
pub(super) fn produce_transactional_id<'a>(r: &mut Reader<'a>) -> Result<&'a str> {
    let id = r.str_ref("transactional_id")?;
    if id.len() > TRANSACTIONAL_ID_BYTES_MAX {
        return Err(ProtocolError(format!(
            "a transactional id of {} bytes (at most {TRANSACTIONAL_ID_BYTES_MAX})",
            id.len()
        )));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{decode_request, Request, LENGTH_BYTES};

    fn producer() -> TxnProducer {
        TxnProducer {
            transactional_id: "mirror-a".into(),
            producer_id: 7,
            epoch: 3,
        }
    }

    fn decoded(request: &TxnRequest) -> std::result::Result<TxnRequest, String> {
        let mut out = Vec::new();
        txn_request(&mut out, 5, request);
        match decode_request(&out[LENGTH_BYTES..]) {
            Ok((_, Request::Txn(t))) => Ok(t),
            Ok((_, other)) => Err(format!("{other:?}")),
            Err(e) => Err(format!("{e:?}")),
        }
    }

    #[test]
    fn each_request_decodes_as_sent_and_bad_fields_are_refused() {
        let good = [
            TxnRequest::Init {
                transactional_id: "mirror-a".into(),
                timeout_ms: 60_000,
            },
            TxnRequest::Add {
                producer: producer(),
                partitions: vec![("t".into(), 0), ("u".into(), 3)],
            },
            TxnRequest::OffsetCommit {
                producer: producer(),
                group: "g".into(),
                offsets: vec![("t".into(), 1, 42)],
            },
            TxnRequest::End {
                producer: producer(),
                commit: true,
            },
        ];
        for r in &good {
            assert_eq!(decoded(r).as_ref(), Ok(r), "{r:?}");
        }
        let bad = [
            TxnRequest::Init {
                transactional_id: String::new(),
                timeout_ms: 60_000,
            },
            TxnRequest::Init {
                transactional_id: "x".repeat(250),
                timeout_ms: 60_000,
            },
            TxnRequest::Init {
                transactional_id: "t".into(),
                timeout_ms: 0,
            },
            TxnRequest::Init {
                transactional_id: "t".into(),
                timeout_ms: TXN_TIMEOUT_MS_MAX + 1,
            },
            TxnRequest::Add {
                producer: TxnProducer {
                    producer_id: -1,
                    ..producer()
                },
                partitions: vec![],
            },
            TxnRequest::Add {
                producer: producer(),
                partitions: vec![("../x".into(), 0)],
            },
            TxnRequest::Add {
                producer: producer(),
                partitions: vec![("t".into(), 1 << 31)],
            },
            TxnRequest::Add {
                producer: producer(),
                partitions: vec![("t".into(), 0); TXN_PARTITIONS_MAX + 1],
            },
            TxnRequest::OffsetCommit {
                producer: producer(),
                group: "..".into(),
                offsets: vec![],
            },
            TxnRequest::OffsetCommit {
                producer: producer(),
                group: "g".into(),
                offsets: vec![("t".into(), 0, u64::MAX)],
            },
        ];
        for r in &bad {
            assert!(decoded(r).is_err(), "{r:?} decoded");
        }
        // A count the frame cannot hold is refused before allocating.
        let mut out = Vec::new();
        txn_request(&mut out, 5, &good[1]);
        let at = out.len() - (2 + 1 + 4) * 2 - 2;
        out[at..at + 2].copy_from_slice(&900u16.to_le_bytes());
        assert!(decode_request(&out[LENGTH_BYTES..]).is_err());
        // A commit byte other than 0 or 1.
        txn_request(&mut out, 5, &good[3]);
        *out.last_mut().unwrap() = 2;
        assert!(decode_request(&out[LENGTH_BYTES..]).is_err());
    }

    #[test]
    fn golden_end_txn() {
        let mut out = Vec::new();
        txn_request(
            &mut out,
            9,
            &TxnRequest::End {
                producer: TxnProducer {
                    transactional_id: "m".into(),
                    producer_id: 2,
                    epoch: 1,
                },
                commit: true,
            },
        );
        let hex: String = out.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "16000000\
             0f000100\
             09000000\
             01006d\
             0200000000000000\
             0100\
             01"
        );
    }
}
