//! What a partition remembers of idempotent Kafka producers, so that a
//! batch a producer sends again (its answer was lost: a timeout, a broken
//! connection) is not stored twice.
//!
//! An idempotent producer (librdkafka's `enable.idempotence`, kafka-python
//! 3's default) gets a producer id from `InitProducerId` and numbers the
//! records it sends to each partition: a batch carries the producer id, its
//! epoch and the sequence number of its first record. It keeps at most five
//! batches in flight per partition, and sends a batch again, with the same
//! numbers, when it has no answer. So, as Kafka's broker does, a partition
//! keeps each producer's last [`BATCHES_REMEMBERED`] batches (their
//! sequence range, CRC32C and where they were appended): a batch with the
//! same producer, epoch and sequence range as one of them is a retry,
//! answered with the offsets the first one got, and not appended again,
//! if it is also the same batch (its CRC32C, over its producer fields and
//! records, is the same). Kafka trusts the numbers alone because it
//! refuses sequence gaps; klog does not, and a producer that numbers a
//! new batch with the numbers of one that failed (the Java producer does)
//! must not have its records dropped as a retry.
//!
//! Kept in memory, as a partition's own state: a broker that restarts, or
//! a replica that becomes leader, knows no producer, and (as Kafka does for
//! a producer it does not know) accepts any sequence, so a retry across a
//! restart or a failover can still be stored twice. Sequence gaps are not
//! refused (Kafka answers `OUT_OF_ORDER_SEQUENCE_NUMBER`): klog's Kafka
//! listener does not offer the epoch bump a client needs to recover from
//! that answer. A batch of an older epoch than the producer's last is
//! refused (`INVALID_PRODUCER_EPOCH`). At most [`PRODUCERS_REMEMBERED`]
//! producers are kept per partition; the one silent the longest is
//! forgotten first.

use std::collections::{HashMap, VecDeque};

/// Batches remembered per producer: the most a Kafka producer keeps in
/// flight to one partition.
pub(super) const BATCHES_REMEMBERED: usize = 5;

/// Producers remembered per partition.
pub(super) const PRODUCERS_REMEMBERED: usize = 1024;

/// A Kafka batch's producer fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sequenced {
    /// The producer id (-1: not an idempotent producer).
    pub(super) producer_id: i64,
    /// The producer's epoch.
    pub(super) epoch: i16,
    /// The sequence number of the batch's first record.
    pub(super) first: i32,
    /// Its records.
    pub(super) count: u32,
    /// The Kafka batch's CRC32C.
    pub(super) crc: u32,
}

impl From<&crate::storage::record::BatchHeader> for Sequenced {
    fn from(b: &crate::storage::record::BatchHeader) -> Sequenced {
        Sequenced {
            producer_id: b.producer_id,
            epoch: b.producer_epoch,
            first: b.base_sequence,
            count: b.record_count.max(1),
            crc: b.crc,
        }
    }
}

impl Sequenced {
    /// The sequence number of the batch's last record (sequences wrap
    /// from `i32::MAX` to 0, as Kafka's do).
    fn last(&self) -> i32 {
        let last = i64::from(self.first) + i64::from(self.count) - 1;
        (last % (i64::from(i32::MAX) + 1)) as i32
    }
}

/// What became of a batch before, as its producer's appender saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stored<A> {
    first: i32,
    last: i32,
    crc: u32,
    /// Where it went (offsets, the log's epoch then), for the answer.
    pub(super) appended: A,
}

impl<A> Stored<A> {
    /// Whether `batch` is the batch stored: the same numbers and bytes.
    fn is(&self, batch: &Sequenced) -> bool {
        self.first == batch.first && self.last == batch.last() && self.crc == batch.crc
    }
}

/// What to do with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict<A> {
    /// Append it (a new batch, or one without a producer).
    Append,
    /// A retry of a batch already appended there: answer as for it.
    Duplicate(A),
    /// From an older epoch than the producer's last (a fenced producer).
    Fenced {
        /// The producer's epoch now.
        current: i16,
    },
}

#[derive(Debug)]
struct Producer<A> {
    epoch: i16,
    batches: VecDeque<Stored<A>>,
    /// When it last appended, in this partition's count of appends.
    used: u64,
}

/// The idempotent producers of one partition. `A` is where a batch went
/// (the broker's append receipt).
#[derive(Debug)]
pub(crate) struct Producers<A> {
    by_id: HashMap<i64, Producer<A>>,
    appends: u64,
}

impl<A> Default for Producers<A> {
    fn default() -> Self {
        Producers {
            by_id: HashMap::new(),
            appends: 0,
        }
    }
}

impl<A: Copy> Producers<A> {
    /// What to do with `batch`. `still_there` says whether an earlier
    /// append is still in the log (not undone by a failed write or cut
    /// off by a truncation): a batch that is gone is not a duplicate.
    pub(super) fn check(&self, batch: &Sequenced, still_there: impl Fn(&A) -> bool) -> Verdict<A> {
        if batch.producer_id < 0 {
            return Verdict::Append;
        }
        let Some(producer) = self.by_id.get(&batch.producer_id) else {
            return Verdict::Append;
        };
        if batch.epoch < producer.epoch {
            return Verdict::Fenced {
                current: producer.epoch,
            };
        }
        if batch.epoch > producer.epoch {
            return Verdict::Append;
        }
        producer
            .batches
            .iter()
            .rev()
            .find(|s| s.is(batch))
            .filter(|s| still_there(&s.appended))
            .map_or(Verdict::Append, |s| Verdict::Duplicate(s.appended))
    }

    /// Remembers that `batch` was appended as `appended`.
    pub(super) fn record(&mut self, batch: &Sequenced, appended: A) {
        if batch.producer_id < 0 {
            return;
        }
        self.appends += 1;
        if !self.by_id.contains_key(&batch.producer_id) && self.by_id.len() >= PRODUCERS_REMEMBERED
        {
            self.forget_the_most_silent();
        }
        let producer = self.by_id.entry(batch.producer_id).or_insert(Producer {
            epoch: batch.epoch,
            batches: VecDeque::with_capacity(BATCHES_REMEMBERED),
            used: 0,
        });
        if batch.epoch != producer.epoch {
            producer.epoch = batch.epoch;
            producer.batches.clear();
        }
        // An earlier append of the same batch is gone (a failed write
        // undid it, a truncation cut it off): this one replaces it.
        producer.batches.retain(|s| !s.is(batch));
        if producer.batches.len() == BATCHES_REMEMBERED {
            producer.batches.pop_front();
        }
        producer.batches.push_back(Stored {
            first: batch.first,
            last: batch.last(),
            crc: batch.crc,
            appended,
        });
        producer.used = self.appends;
    }

    fn forget_the_most_silent(&mut self) {
        let silent = self
            .by_id
            .iter()
            .min_by_key(|(_, p)| p.used)
            .map(|(id, _)| *id);
        if let Some(id) = silent {
            self.by_id.remove(&id);
        }
    }

    /// Producers remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(producer_id: i64, epoch: i16, first: i32, count: u32) -> Sequenced {
        Sequenced {
            producer_id,
            epoch,
            first,
            count,
            crc: 0xc0ffee,
        }
    }

    fn there(_: &u64) -> bool {
        true
    }

    #[test]
    fn a_retried_batch_is_a_duplicate_of_the_first_and_others_are_appended() {
        let mut p = Producers::<u64>::default();
        let a = batch(7, 0, 0, 3);
        assert_eq!(p.check(&a, there), Verdict::Append);
        p.record(&a, 100);
        assert_eq!(p.check(&a, there), Verdict::Duplicate(100));
        let b = batch(7, 0, 3, 2);
        assert_eq!(p.check(&b, there), Verdict::Append);
        p.record(&b, 103);
        assert_eq!(p.check(&a, there), Verdict::Duplicate(100));
        assert_eq!(p.check(&b, there), Verdict::Duplicate(103));
        // The same numbers from another producer, or another range.
        assert_eq!(p.check(&batch(8, 0, 0, 3), there), Verdict::Append);
        assert_eq!(p.check(&batch(7, 0, 0, 2), there), Verdict::Append);
        // Without a producer id nothing is remembered or matched.
        let none = batch(-1, -1, -1, 3);
        p.record(&none, 200);
        assert_eq!(p.check(&none, there), Verdict::Append);
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut p = Producers::<u64>::default();
        for i in 0..6 {
            p.record(&batch(7, 0, i * 10, 10), i as u64);
        }
        assert_eq!(p.check(&batch(7, 0, 0, 10), there), Verdict::Append);
        for i in 1..6 {
            assert_eq!(
                p.check(&batch(7, 0, i * 10, 10), there),
                Verdict::Duplicate(i as u64)
            );
        }
    }

    #[test]
    fn a_batch_no_longer_in_the_log_is_not_a_duplicate() {
        let mut p = Producers::<u64>::default();
        p.record(&batch(7, 0, 0, 3), 100);
        assert_eq!(p.check(&batch(7, 0, 0, 3), |_| false), Verdict::Append);
    }

    /// A batch a failed write undid is appended again when retried; its
    /// next retry is a duplicate of that second append (the undone one,
    /// remembered first, was found first: the batch was stored again).
    #[test]
    fn a_retry_of_a_batch_appended_again_after_an_undo_is_a_duplicate() {
        let mut p = Producers::<u64>::default();
        let a = batch(7, 0, 0, 3);
        p.record(&a, 100);
        let undone = |at: &u64| *at != 100;
        assert_eq!(p.check(&a, undone), Verdict::Append);
        p.record(&a, 200);
        assert_eq!(p.check(&a, undone), Verdict::Duplicate(200));
    }

    /// Another batch under the numbers of one stored (other records, so
    /// another CRC32C) is not a retry, and both are remembered.
    #[test]
    fn a_batch_with_a_stored_ones_numbers_but_other_bytes_is_appended() {
        let mut p = Producers::<u64>::default();
        let a = batch(7, 0, 0, 3);
        let other = Sequenced { crc: 1, ..a };
        p.record(&a, 100);
        assert_eq!(p.check(&other, there), Verdict::Append);
        p.record(&other, 103);
        assert_eq!(p.check(&a, there), Verdict::Duplicate(100));
        assert_eq!(p.check(&other, there), Verdict::Duplicate(103));
    }

    #[test]
    fn epochs_fence_older_ones_and_a_new_one_starts_afresh() {
        let mut p = Producers::<u64>::default();
        p.record(&batch(7, 1, 0, 3), 100);
        assert_eq!(
            p.check(&batch(7, 0, 3, 1), there),
            Verdict::Fenced { current: 1 }
        );
        assert_eq!(p.check(&batch(7, 2, 0, 3), there), Verdict::Append);
        p.record(&batch(7, 2, 0, 3), 200);
        assert_eq!(p.check(&batch(7, 2, 0, 3), there), Verdict::Duplicate(200));
        assert_eq!(
            p.check(&batch(7, 1, 0, 3), there),
            Verdict::Fenced { current: 2 }
        );
    }

    #[test]
    fn sequences_wrap_past_i32_max() {
        let mut p = Producers::<u64>::default();
        let wrapping = batch(7, 0, i32::MAX - 1, 4);
        assert_eq!(wrapping.last(), 1);
        p.record(&wrapping, 100);
        assert_eq!(p.check(&wrapping, there), Verdict::Duplicate(100));
    }

    #[test]
    fn the_producers_remembered_are_bounded_and_the_most_silent_goes() {
        let mut p = Producers::<u64>::default();
        for id in 0..PRODUCERS_REMEMBERED as i64 {
            p.record(&batch(id, 0, 0, 1), id as u64);
        }
        // Producer 0 appends again: producer 1 is now the most silent.
        p.record(&batch(0, 0, 1, 1), 5000);
        p.record(&batch(99_999, 0, 0, 1), 6000);
        assert_eq!(p.len(), PRODUCERS_REMEMBERED);
        assert_eq!(p.check(&batch(1, 0, 0, 1), there), Verdict::Append);
        assert_eq!(p.check(&batch(0, 0, 1, 1), there), Verdict::Duplicate(5000));
        assert_eq!(
            p.check(&batch(99_999, 0, 0, 1), there),
            Verdict::Duplicate(6000)
        );
    }
}
