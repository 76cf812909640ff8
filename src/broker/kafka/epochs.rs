//! OffsetForLeaderEpoch on Kafka's wire ([`crate::kafka::epochs`]): where
//! a leader epoch ends in a partition this broker leads, from the log's
//! epochs (the same answer a follower gets on klog's wire). Needs describe
//! on each topic. A client that names its current epoch is refused
//! FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH unless it is the leader's;
//! an epoch older than the log's first is answered -1, -1.

use super::access::Access;
use super::kafka_code;
use crate::broker::shared::Shared;
use crate::coord::acl::Operation;
use crate::kafka::epochs::*;
use crate::kafka::{self};

/// OffsetForLeaderEpoch: each partition's epoch end, in order.
pub(super) fn answer(
    shared: &Shared,
    access: &Access<'_>,
    r: &OffsetForLeaderEpochRequest<'_>,
) -> OffsetForLeaderEpochResponse {
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let denied = access.topic(Operation::Describe, t.topic);
            OffsetForLeaderTopicResult {
                topic: t.topic.to_string(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| match denied {
                        Some(error_code) => failed(p.partition, error_code),
                        None => epoch_end(shared, t.topic, p),
                    })
                    .collect(),
            }
        })
        .collect();
    OffsetForLeaderEpochResponse {
        throttle_time_ms: 0,
        topics,
    }
}

/// One partition's answer.
fn epoch_end(shared: &Shared, topic: &str, p: &OffsetForLeaderPartition) -> EpochEndOffset {
    let (Ok(index), Ok(asked)) = (u32::try_from(p.partition), u32::try_from(p.leader_epoch)) else {
        return failed(p.partition, kafka::UNKNOWN_TOPIC_OR_PARTITION);
    };
    let current = u32::try_from(p.current_leader_epoch).ok();
    let found = shared
        .partition(topic, index)
        .and_then(|part| part.client_epoch_end(current, asked));
    match found {
        Ok(Some((epoch, end))) => EpochEndOffset {
            error_code: kafka::NONE,
            partition: p.partition,
            leader_epoch: epoch as i32,
            end_offset: end as i64,
        },
        Ok(None) => EpochEndOffset {
            error_code: kafka::NONE,
            ..failed(p.partition, kafka::NONE)
        },
        Err((code, _)) => failed(p.partition, kafka_code(code)),
    }
}

fn failed(partition: i32, error_code: i16) -> EpochEndOffset {
    EpochEndOffset {
        error_code,
        partition,
        leader_epoch: -1,
        end_offset: -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::testing::{append, partition, shared};

    fn asked(
        partition: i32,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> OffsetForLeaderPartition {
        OffsetForLeaderPartition {
            partition,
            current_leader_epoch,
            leader_epoch,
        }
    }

    /// Where each epoch ends: an older epoch where the next begins, the
    /// latest at the log's end; a partition or topic that does not exist
    /// is refused.
    #[test]
    fn an_epoch_ends_where_the_next_begins_and_the_latest_at_the_log_end() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        p.lock().set_leader_epoch(3).unwrap();
        append(&p);
        let next = p.lock().next_offset() as i64;
        let access = Access::new(&shared, None);
        let request = OffsetForLeaderEpochRequest {
            replica_id: -1,
            topics: vec![
                OffsetForLeaderTopic {
                    topic: "t",
                    partitions: vec![asked(0, -1, 2), asked(0, 3, 3), asked(1, -1, 0)],
                },
                OffsetForLeaderTopic {
                    topic: "u",
                    partitions: vec![asked(0, -1, 0)],
                },
            ],
        };
        let answer = answer(&shared, &access, &request);
        let got: Vec<(i16, i32, i64)> = answer
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|e| (e.error_code, e.leader_epoch, e.end_offset))
            .collect();
        assert_eq!(
            got,
            [
                (kafka::NONE, 0, 1),
                (kafka::NONE, 3, next),
                (kafka::UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
                (kafka::UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            ]
        );
    }
}
