//! A read_committed consumer's view of one fetched partition: which of
//! its batches belong to aborted transactions.
//!
//! A read_committed fetch (klog's fetch version 6) answers each partition
//! with its last stable offset and the aborted transactions among the
//! records it returns, each as `(producer_id, first_offset)`. The batches
//! are read in offset order: once a batch reaches an aborted
//! transaction's first offset, that producer's transactional batches are
//! of the aborted transaction, passed over, until its next control batch
//! (the transaction's abort marker). A producer has one transaction open
//! at a time, so its batches after that marker belong to later
//! transactions, and count again. This is how Kafka's consumers read
//! (KIP-98).

use std::collections::HashSet;

use crate::storage::record::BatchHeader;

/// The aborted transactions of one fetched partition, and which
/// producers' batches are of one now (see the module's docs).
#[derive(Debug, Clone, Default)]
pub(super) struct AbortedTxns {
    /// Aborted transactions not reached yet, by first offset, the last
    /// first (popped from the end).
    pending: Vec<(i64, u64)>,
    /// Producers inside an aborted transaction at the batch being read.
    open: HashSet<i64>,
}

impl AbortedTxns {
    /// The aborted transactions `(producer_id, first_offset)` of a
    /// partition's answer, in any order.
    pub(super) fn new(list: &[(i64, u64)]) -> AbortedTxns {
        let mut pending = list.to_vec();
        pending.sort_unstable_by_key(|&(pid, first)| (std::cmp::Reverse(first), pid));
        AbortedTxns {
            pending,
            open: HashSet::new(),
        }
    }

    /// Whether the batch with `header`, the next in offset order, is
    /// passed over: a batch of an aborted transaction, or a control batch
    /// (which ends its producer's aborted transaction, if any).
    pub(super) fn passes_over(&mut self, header: &BatchHeader) -> bool {
        while let Some(&(pid, first)) = self.pending.last() {
            if first > header.last_offset() {
                break;
            }
            self.open.insert(pid);
            self.pending.pop();
        }
        if header.is_control() {
            self.open.remove(&header.producer_id);
            return true;
        }
        header.is_transactional() && self.open.contains(&header.producer_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::record::{Format, ATTR_CONTROL, ATTR_TRANSACTIONAL};

    fn batch(producer_id: i64, base_offset: u64, count: u32, attributes: u16) -> BatchHeader {
        BatchHeader {
            format: Format::Kafka,
            base_offset,
            batch_length: 0,
            magic: 2,
            attributes,
            last_offset_delta: count - 1,
            record_count: count,
            base_timestamp: 0,
            max_timestamp: 0,
            leader_epoch: 0,
            crc: 0,
            producer_id,
            producer_epoch: 0,
            base_sequence: 0,
        }
    }

    const TXN: u16 = ATTR_TRANSACTIONAL;
    const MARKER: u16 = ATTR_TRANSACTIONAL | ATTR_CONTROL;

    /// Two producers interleaved: 7 aborts a transaction and then commits
    /// one; 8 commits while 7's aborted transaction is open; a plain
    /// batch of 7 in between is never passed over.
    #[test]
    fn only_the_batches_of_aborted_transactions_are_passed_over() {
        let mut aborted = AbortedTxns::new(&[(9, 100), (7, 4)]);
        let log = [
            (batch(7, 0, 2, TXN), false),
            (batch(-1, 2, 1, 0), false),
            (batch(7, 3, 1, MARKER), true),
            (batch(7, 4, 2, TXN), true),
            (batch(8, 6, 2, TXN), false),
            (batch(7, 8, 1, 0), false),
            (batch(7, 9, 2, TXN), true),
            (batch(8, 11, 1, MARKER), true),
            (batch(7, 12, 1, MARKER), true),
            (batch(7, 13, 3, TXN), false),
            (batch(7, 16, 1, MARKER), true),
        ];
        let passed: Vec<bool> = log.iter().map(|(b, _)| aborted.passes_over(b)).collect();
        let want: Vec<bool> = log.iter().map(|(_, skip)| *skip).collect();
        assert_eq!(passed, want);
    }

    /// A transaction aborted before the fetched records began is listed
    /// too (its first offset below the fetch's): its producer's batches
    /// are passed over from the first one read.
    #[test]
    fn a_transaction_that_began_before_the_fetch_is_passed_over_from_the_start() {
        let mut aborted = AbortedTxns::new(&[(4, 10)]);
        assert!(aborted.passes_over(&batch(4, 50, 5, TXN)));
        assert!(!aborted.passes_over(&batch(5, 55, 5, TXN)));
        assert!(aborted.passes_over(&batch(4, 60, 1, MARKER)));
        assert!(!aborted.passes_over(&batch(4, 61, 1, TXN)));
    }
}
