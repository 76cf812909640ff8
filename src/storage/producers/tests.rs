use super::*;
use crate::storage::record::Format;

/// The header of a stored batch of `count` records at `base_offset`
/// from producer `id`, `epoch`, numbered from `first`.
fn batch(id: i64, epoch: i16, first: i32, count: u32, base_offset: u64) -> BatchHeader {
    BatchHeader {
        format: Format::Kafka,
        base_offset,
        batch_length: 0,
        magic: 2,
        attributes: 0,
        last_offset_delta: count - 1,
        record_count: count,
        base_timestamp: 1_000,
        max_timestamp: 1_000 + base_offset as i64,
        leader_epoch: 0,
        crc: 0xc0ffee,
        producer_id: id,
        producer_epoch: epoch,
        base_sequence: first,
    }
}

/// The snapshot of `state` at `offset`, with no aborted transactions.
fn snap(offset: u64, state: ProducerState) -> Result<Snapshot, String> {
    Ok(Snapshot {
        offset,
        aborted: 0,
        state,
    })
}

fn dup(base_offset: u64, last_offset: u64) -> Verdict {
    Verdict::Duplicate {
        base_offset,
        last_offset,
    }
}

#[test]
fn a_retry_is_a_duplicate_of_the_first_copy_and_the_next_sequence_appends() {
    let mut s = ProducerState::default();
    let a = batch(7, 0, 0, 3, 100);
    assert_eq!(s.check(&a), Verdict::Append);
    s.apply(&a);
    assert_eq!(s.check(&batch(7, 0, 0, 3, 999)), dup(100, 102));
    let b = batch(7, 0, 3, 2, 103);
    assert_eq!(s.check(&b), Verdict::Append);
    s.apply(&b);
    assert_eq!(s.check(&a), dup(100, 102));
    assert_eq!(s.check(&b), dup(103, 104));
    // Without a producer id nothing is remembered or matched.
    let none = batch(-1, -1, -1, 3, 105);
    s.apply(&none);
    assert_eq!(s.check(&none), Verdict::Append);
    assert_eq!(s.len(), 1);
}

#[test]
fn a_gap_or_a_range_not_stored_is_out_of_order() {
    let mut s = ProducerState::default();
    s.apply(&batch(7, 0, 0, 3, 100));
    assert_eq!(
        s.check(&batch(7, 0, 4, 1, 0)),
        Verdict::OutOfOrder { expected: 3 }
    );
    assert_eq!(
        s.check(&batch(7, 0, 0, 2, 0)),
        Verdict::OutOfOrder { expected: 3 }
    );
    // The same numbers, other records: not the batch stored.
    let other = BatchHeader {
        crc: 1,
        ..batch(7, 0, 0, 3, 0)
    };
    assert_eq!(s.check(&other), Verdict::OutOfOrder { expected: 3 });
}

/// As Kafka since 2.5 (KIP-360): a producer whose state expired, or whose
/// batches are all before the log's start, starts afresh wherever its
/// numbers are; librdkafka takes UNKNOWN_PRODUCER_ID on a retry as fatal.
#[test]
fn an_unknown_producer_starts_at_any_sequence() {
    let s = ProducerState::default();
    assert_eq!(s.check(&batch(7, 0, 0, 1, 0)), Verdict::Append);
    assert_eq!(s.check(&batch(7, 0, 5, 1, 0)), Verdict::Append);
}

/// A batch with a producer id and a negative epoch or sequence (a leader
/// refuses it; an old log may hold one) is no producer's: it would make
/// every snapshot after it unreadable.
#[test]
fn a_producer_id_without_epoch_or_sequence_is_not_applied() {
    let mut s = ProducerState::default();
    s.apply(&batch(7, -1, 0, 1, 0));
    s.apply(&batch(8, 0, -1, 1, 1));
    assert!(s.is_empty());
    let bytes = s.encode_snapshot(2, 0);
    assert_eq!(ProducerState::decode_snapshot(&bytes), snap(2, s));
}

#[test]
fn only_the_last_five_batches_are_remembered() {
    let mut s = ProducerState::default();
    for i in 0..6 {
        s.apply(&batch(7, 0, i * 10, 10, i as u64 * 10));
    }
    assert_eq!(
        s.check(&batch(7, 0, 0, 10, 0)),
        Verdict::OutOfOrder { expected: 60 }
    );
    for i in 1..6u64 {
        assert_eq!(
            s.check(&batch(7, 0, i as i32 * 10, 10, 0)),
            dup(i * 10, i * 10 + 9)
        );
    }
}

#[test]
fn epochs_fence_older_ones_and_a_new_one_starts_at_zero() {
    let mut s = ProducerState::default();
    s.apply(&batch(7, 1, 0, 3, 100));
    assert_eq!(
        s.check(&batch(7, 0, 3, 1, 0)),
        Verdict::Fenced { current: 1 }
    );
    assert_eq!(
        s.check(&batch(7, 2, 3, 1, 0)),
        Verdict::OutOfOrder { expected: 0 }
    );
    assert_eq!(s.check(&batch(7, 2, 0, 3, 0)), Verdict::Append);
    s.apply(&batch(7, 2, 0, 3, 200));
    assert_eq!(s.check(&batch(7, 2, 0, 3, 0)), dup(200, 202));
    assert_eq!(s.get(7).unwrap().batches.len(), 1);
}

#[test]
fn sequences_wrap_past_i32_max() {
    let mut s = ProducerState::default();
    let wrapping = batch(7, 0, i32::MAX - 1, 4, 100);
    s.apply(&wrapping);
    assert_eq!(s.get(7).unwrap().batches[0].last_sequence, 1);
    assert_eq!(s.check(&wrapping), dup(100, 103));
    assert_eq!(s.check(&batch(7, 0, 2, 1, 0)), Verdict::Append);
    let mut t = ProducerState::default();
    t.apply(&batch(8, 0, i32::MAX, 1, 0));
    assert_eq!(t.check(&batch(8, 0, 0, 1, 0)), Verdict::Append);
}

#[test]
fn the_producers_are_bounded_and_the_one_oldest_in_the_log_goes() {
    let mut s = ProducerState::default();
    for id in 0..PRODUCERS_MAX as i64 {
        s.apply(&batch(id, 0, 0, 1, id as u64));
    }
    // Producer 0 appends again: producer 1 is now the most silent.
    s.apply(&batch(0, 0, 1, 1, 5000));
    s.apply(&batch(99_999, 0, 0, 1, 6000));
    assert_eq!(s.len(), PRODUCERS_MAX);
    assert!(s.get(1).is_none());
    assert!(s.get(0).is_some() && s.get(2).is_some() && s.get(99_999).is_some());
}

#[test]
fn producers_silent_past_the_expiry_are_forgotten() {
    let now = crate::clock::now_ms();
    let hour = 3_600_000;
    let mut s = ProducerState::default();
    s.apply(&batch(1, 0, 0, 1, 0)); // last timestamp 1000: long ago
    let mut recent = batch(2, 0, 0, 1, 0);
    recent.max_timestamp = now + 2 * hour;
    s.apply(&recent);
    assert_eq!(s.expire(now, 600), 0, "both just taken");
    assert_eq!(s.expire(now + 2 * hour, 600), 1, "silent an hour");
    assert!(s.get(1).is_none() && s.get(2).is_some());
    assert_eq!(s.expire(now + 2 * hour, 600), 0);
    // Records stamped long ago (a copy of an old topic): a producer that
    // sends stays, and a retry of its batch is still a retry, however
    // often the expiry runs.
    s.apply(&batch(3, 0, 0, 1, 600));
    for _ in 0..3 {
        assert_eq!(s.expire(crate::clock::now_ms(), 60_000), 0);
    }
    let retry = batch(3, 0, 0, 1, 600);
    assert!(matches!(s.check(&retry), Verdict::Duplicate { .. }));
    assert_eq!(s.expire(now + 2 * hour, 60_000), 1, "then silent: 3 goes");
    let snapshot = ProducerState::decode_snapshot(&sample().encode_snapshot(100, 0));
    let mut loaded = snapshot.unwrap().state;
    let n = loaded.len();
    assert!(n > 0);
    assert_eq!(
        loaded.expire(crate::clock::now_ms(), 60_000),
        0,
        "loaded now"
    );
    assert_eq!(loaded.expire(now + 2 * hour, 60_000), n);
}

fn sample() -> ProducerState {
    let mut s = ProducerState::default();
    for i in 0..7 {
        s.apply(&batch(42, 3, i * 2, 2, 10 + i as u64 * 2));
    }
    s.apply(&batch(7, 0, i32::MAX, 2, 30));
    s
}

#[test]
fn a_snapshot_reads_back_as_the_state_it_was_written_from() {
    let s = sample();
    let bytes = s.encode_snapshot(32, 0);
    assert_eq!(ProducerState::decode_snapshot(&bytes), snap(32, s));
    let empty = ProducerState::default().encode_snapshot(0, 0);
    assert_eq!(empty.len(), SNAPSHOT_HEADER_BYTES);
    assert_eq!(
        ProducerState::decode_snapshot(&empty),
        snap(0, ProducerState::default())
    );
}

/// Every byte flipped, every length cut: refused, never a panic, never a
/// state the snapshot did not hold.
#[test]
fn a_damaged_or_torn_snapshot_is_refused() {
    let bytes = sample().encode_snapshot(32, 0);
    for at in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[at] ^= 0x10;
        assert!(ProducerState::decode_snapshot(&bad).is_err(), "byte {at}");
        assert!(
            ProducerState::decode_snapshot(&bytes[..at]).is_err(),
            "{at} bytes"
        );
    }
    let mut long = bytes.clone();
    long.push(0);
    assert!(ProducerState::decode_snapshot(&long).is_err());
    assert!(ProducerState::decode_snapshot(&vec![0; SNAPSHOT_BYTES_MAX + 1]).is_err());
}

/// A snapshot whose CRC32C matches but whose fields lie (a batch at or
/// past its offset, a count past the limit) is refused too.
#[test]
fn a_snapshot_with_a_valid_crc_and_impossible_fields_is_refused() {
    let reseal = |mut b: Vec<u8>| {
        let crc = crc32c::crc32c(&b[4..]);
        b[..4].copy_from_slice(&crc.to_be_bytes());
        b
    };
    // Offset 31: the batch at 30..31 is not below it.
    let mut b = sample().encode_snapshot(32, 0);
    b[6..14].copy_from_slice(&31u64.to_be_bytes());
    assert!(ProducerState::decode_snapshot(&reseal(b)).is_err());
    let mut b = sample().encode_snapshot(32, 0);
    b[22..26].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(ProducerState::decode_snapshot(&reseal(b)).is_err());
    // An open transaction from offset 32: not below it.
    let mut s = sample();
    s.apply(&txn(batch(5, 0, 0, 1, 31)));
    let mut b = s.encode_snapshot(32, 0);
    let at = SNAPSHOT_HEADER_BYTES + 8 + 2 + 8;
    assert_eq!(
        b[at..at + 8],
        31u64.to_be_bytes(),
        "producer 5's transaction"
    );
    b[at..at + 8].copy_from_slice(&32u64.to_be_bytes());
    assert!(ProducerState::decode_snapshot(&reseal(b)).is_err());
}

#[test]
fn the_largest_state_fits_the_largest_snapshot() {
    let mut s = ProducerState::default();
    for id in 0..PRODUCERS_MAX as i64 {
        for i in 0..BATCHES_REMEMBERED as i32 {
            s.apply(&batch(id, 0, i, 1, id as u64 * 10 + i as u64));
        }
    }
    let bytes = s.encode_snapshot(1 << 20, 0);
    assert_eq!(bytes.len(), SNAPSHOT_BYTES_MAX);
    assert_eq!(ProducerState::decode_snapshot(&bytes).unwrap().state, s);
}

/// `h` as a transactional producer's batch.
fn txn(h: BatchHeader) -> BatchHeader {
    BatchHeader {
        attributes: crate::storage::record::ATTR_TRANSACTIONAL,
        ..h
    }
}

/// The header of producer `id`'s marker at `offset`, of `epoch`.
fn marker_at(id: i64, epoch: i16, offset: u64) -> BatchHeader {
    BatchHeader {
        attributes: crate::storage::record::ATTR_TRANSACTIONAL
            | crate::storage::record::ATTR_CONTROL,
        base_sequence: -1,
        ..batch(id, epoch, 0, 1, offset)
    }
}

fn ends(commit: bool) -> Marker {
    Marker {
        commit,
        coordinator_epoch: 0,
    }
}

/// A marker of a coordinator epoch older than the producer's last
/// marker's is fenced: a coordinator's late marker, after another broker
/// finished the transaction, must not end the producer's next one.
#[test]
fn a_late_marker_of_an_older_coordinator_is_fenced() {
    let mut s = ProducerState::default();
    s.apply(&txn(batch(2, 0, 0, 1, 0)));
    let taken_over = Marker {
        commit: true,
        coordinator_epoch: 5,
    };
    s.apply_marker(&marker_at(2, 0, 1), taken_over);
    s.apply(&txn(batch(2, 0, 1, 1, 2)));
    assert_eq!(
        s.check_marker(2, 0, 4),
        Verdict::CoordinatorFenced { current: 5 }
    );
    assert_eq!(s.check_marker(2, 0, 5), Verdict::Append);
    assert_eq!(s.check_marker(2, 0, 6), Verdict::Append);
    let read = ProducerState::decode_snapshot(&s.encode_snapshot(3, 0)).unwrap();
    assert_eq!(read.state.get(2).unwrap().coordinator_epoch, 5);
}

/// A transaction is open from its first batch to its marker: the first
/// unstable offset is the oldest open one's first offset, and an abort
/// yields the transaction.
#[test]
fn a_marker_closes_the_transaction_its_first_batch_opened() {
    let mut s = ProducerState::default();
    s.apply(&batch(1, 0, 0, 2, 0));
    assert_eq!(s.first_unstable_offset(), None, "not transactional");
    s.apply(&txn(batch(2, 0, 0, 2, 2)));
    s.apply(&txn(batch(3, 0, 0, 1, 4)));
    s.apply(&txn(batch(2, 0, 2, 2, 5)));
    assert_eq!(s.first_unstable_offset(), Some(2));
    assert_eq!(s.open_transactions().collect::<Vec<_>>(), [(2, 2), (4, 3)]);
    assert_eq!(
        s.apply_marker(&marker_at(2, 0, 7), ends(true)),
        None,
        "committed"
    );
    assert_eq!(s.first_unstable_offset(), Some(4));
    let aborted = s.apply_marker(&marker_at(3, 0, 8), ends(false));
    let expected = AbortedTxn {
        producer_id: 3,
        first_offset: 4,
        last_offset: 8,
    };
    assert_eq!(aborted, Some(expected));
    assert_eq!(s.first_unstable_offset(), None);
    // A second marker finds no transaction open.
    assert_eq!(s.apply_marker(&marker_at(3, 0, 9), ends(false)), None);
    // The sequence goes on across transactions of one epoch.
    assert_eq!(s.check(&txn(batch(2, 0, 4, 1, 10))), Verdict::Append);
}

/// Kafka's rules around transactions: no plain batch while one is open, a
/// marker older than the producer's epoch is fenced, and a marker of a
/// newer epoch (the coordinator fenced a zombie) starts its sequences
/// again at 0.
#[test]
fn a_transaction_has_its_own_rules() {
    let mut s = ProducerState::default();
    s.apply(&txn(batch(2, 1, 0, 2, 0)));
    assert_eq!(s.check(&batch(2, 1, 2, 1, 2)), Verdict::InvalidTxnState);
    // A plain batch of a newer epoch (any client that knows the producer
    // id) fences no open transaction.
    assert_eq!(s.check(&batch(2, 2, 0, 1, 2)), Verdict::InvalidTxnState);
    assert_eq!(s.check(&txn(batch(2, 1, 2, 1, 2))), Verdict::Append);
    let retry = txn(batch(2, 1, 0, 2, 9));
    assert!(matches!(s.check(&retry), Verdict::Duplicate { .. }));
    assert_eq!(s.check_marker(2, 0, 0), Verdict::Fenced { current: 1 });
    assert_eq!(s.check_marker(2, 1, 0), Verdict::Append);
    assert_eq!(s.check_marker(99, 0, 0), Verdict::Append, "unknown");
    assert!(s.apply_marker(&marker_at(2, 2, 2), ends(false)).is_some());
    assert_eq!(s.get(2).unwrap().epoch, 2);
    assert_eq!(
        s.check(&batch(2, 1, 2, 1, 3)),
        Verdict::Fenced { current: 2 }
    );
    assert_eq!(
        s.check(&txn(batch(2, 2, 5, 1, 3))),
        Verdict::OutOfOrder { expected: 0 }
    );
    assert_eq!(s.check(&txn(batch(2, 2, 0, 1, 3))), Verdict::Append);
    // A marker of a producer never seen: known from then on, at its epoch.
    assert_eq!(s.apply_marker(&marker_at(5, 4, 4), ends(true)), None);
    assert_eq!(
        s.check(&batch(5, 3, 0, 1, 5)),
        Verdict::Fenced { current: 4 }
    );
}

/// A producer with an open transaction neither expires nor is forgotten
/// to make room: its abort would find nothing to abort.
#[test]
fn an_open_transaction_keeps_its_producer() {
    let mut s = ProducerState::default();
    s.apply(&txn(batch(1, 0, 0, 1, 0)));
    s.apply(&batch(2, 0, 0, 1, 1));
    let far = crate::clock::now_ms() + 1_000_000;
    assert_eq!(s.expire(far, 1), 1);
    assert!(s.get(1).is_some() && s.get(2).is_none());
    for id in 10..10 + PRODUCERS_MAX as i64 {
        s.apply(&batch(id, 0, 0, 1, id as u64));
    }
    assert_eq!(s.len(), PRODUCERS_MAX);
    assert!(s.get(1).is_some(), "the most silent, but open");
    assert_eq!(s.first_unstable_offset(), Some(0));
}

/// A snapshot keeps open transactions and producers whose epoch a
/// marker began; it reads back as the state it was written from.
#[test]
fn a_snapshot_keeps_open_transactions() {
    let mut s = sample();
    s.apply(&txn(batch(5, 0, 0, 1, 31)));
    s.apply_marker(&marker_at(6, 3, 32), ends(true));
    let bytes = s.encode_snapshot(33, 4);
    let read = ProducerState::decode_snapshot(&bytes).unwrap();
    assert_eq!((read.offset, read.aborted), (33, 4));
    assert_eq!(read.state.first_unstable_offset(), Some(31));
    assert_eq!(read.state, s);
}
