//! The writer: answers out, in the order the reader queued them. A ready
//! answer is written; an acks=all answer waits until the flusher has made
//! its records durable; a fetch is evaluated when its turn comes.
//! Answers that are ready together leave in one write.

use crate::net::Stream;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::Instant;

use super::transfer::fetch;
use super::{broken, error_into, flush_out, produced_into, Appended, QueuedAnswer};
use crate::broker::shared::{Partition, Shared};
use crate::broker::watch::Watch;
use crate::protocol::ErrorCode;
use crate::storage::log::Fate;

/// Answers the connection's queued answers in order, until the reader is
/// done and the queue empty, or the peer stops reading.
pub(super) fn write_responses(
    shared: &Shared,
    stream: Stream,
    rx: Receiver<QueuedAnswer>,
    peer: SocketAddr,
    queued_count: &AtomicUsize,
) {
    let mut writer = Writer {
        shared,
        stream: &stream,
        queued_count,
        out: Vec::new(),
        answers_in_out: 0,
    };
    loop {
        let written = match writer.next(&rx) {
            Ok(Some(queued)) => writer.answer(queued),
            Ok(None) => {
                if let Err(e) = writer.flush() {
                    broken(shared, &stream, peer, e);
                }
                return;
            }
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            return broken(shared, &stream, peer, e);
        }
    }
}

/// A connection's writer and the answers it has gathered.
struct Writer<'a> {
    shared: &'a Shared,
    stream: &'a Stream,
    /// The reader's count of answers queued and not yet written.
    queued_count: &'a AtomicUsize,
    /// Answers gathered and not yet written, and how many.
    out: Vec<u8>,
    answers_in_out: usize,
}

impl Writer<'_> {
    /// Writes the gathered answers, which takes them off the reader's
    /// count of queued ones.
    fn flush(&mut self) -> io::Result<()> {
        flush_out(self.stream, &mut self.out)?;
        self.queued_count
            .fetch_sub(std::mem::take(&mut self.answers_in_out), Ordering::AcqRel);
        Ok(())
    }

    /// The next queued answer (`None`: the reader is done). While answers
    /// are gathered it does not wait: with nothing queued, it writes them
    /// out first.
    fn next(&mut self, rx: &Receiver<QueuedAnswer>) -> io::Result<Option<QueuedAnswer>> {
        loop {
            if self.out.is_empty() {
                return Ok(rx.recv().ok());
            }
            match rx.try_recv() {
                Ok(queued) => return Ok(Some(queued)),
                Err(mpsc::TryRecvError::Empty) => self.flush()?,
                Err(mpsc::TryRecvError::Disconnected) => return Ok(None),
            }
        }
    }

    /// Answers one queued answer.
    fn answer(&mut self, queued: QueuedAnswer) -> io::Result<()> {
        match queued {
            QueuedAnswer::Ready(frame) => {
                self.out.extend_from_slice(&frame);
                self.answers_in_out += 1;
            }
            QueuedAnswer::Durable {
                correlation_id,
                partition,
                appended,
                deadline,
            } => {
                // Earlier answers do not wait for this one's fsync.
                if partition.high_watermark.load(Ordering::Acquire) < appended.end_offset {
                    self.flush()?;
                }
                await_durable(
                    &mut self.out,
                    correlation_id,
                    &partition,
                    &appended,
                    deadline,
                );
                self.answers_in_out += 1;
            }
            QueuedAnswer::Fetch {
                correlation_id,
                deadline,
                asked,
            } => {
                self.flush()?;
                fetch(self.shared, self.stream, correlation_id, deadline, &asked)?;
                self.queued_count.fetch_sub(1, Ordering::AcqRel);
            }
        }
        Ok(())
    }
}

/// Waits until `appended` is durable, or the partition fails, or the
/// deadline passes, and appends the answer that says which to `out`.
pub(super) fn await_durable(
    out: &mut Vec<u8>,
    correlation_id: u32,
    p: &Partition,
    appended: &Appended,
    deadline: Instant,
) {
    match durable(p, appended, deadline) {
        Ok(base_offset) => produced_into(out, correlation_id, base_offset),
        Err((code, msg)) => error_into(out, correlation_id, code, &msg),
    }
}

/// Waits until `appended` is durable (the base offset), or the partition
/// fails, or the deadline passes (why not).
pub(in crate::broker) fn durable(
    p: &Partition,
    appended: &Appended,
    deadline: Instant,
) -> Result<u64, (ErrorCode, String)> {
    let Appended {
        base_offset,
        end_offset,
        leader_epoch,
        ..
    } = *appended;
    let min_isr = p.min_insync.load(Ordering::Relaxed);
    let name = || format!("{} [{}]", p.topic, p.partition);
    // Registered before the first look, so that a flush after it wakes
    // the wait below; made only when the answer is not ready at once.
    let mut watch = None;
    loop {
        if p.failed.load(Ordering::Acquire) {
            let why = p
                .lock()
                .write_pending()
                .err()
                .map_or_else(String::new, |e| e.to_string());
            let msg = format!(
                "{}: records from offset {base_offset} are not durable: {why}",
                name()
            );
            return Err((ErrorCode::StorageError, msg));
        }
        let complete = p.high_watermark.load(Ordering::Acquire) >= end_offset;
        if let Some(refusal) = p.acks_all_refusal(leader_epoch, base_offset, min_isr, complete) {
            return Err(refusal);
        }
        if complete {
            return stored(p, appended);
        }
        if Instant::now() >= deadline {
            let msg = format!(
                "{}: records from offset {base_offset} appended but not yet durable within the timeout",
                name()
            );
            return Err((ErrorCode::Timeout, msg));
        }
        match &watch {
            Some(watch) => Watch::wait(watch, deadline),
            None => watch = Some(Watch::new(vec![Arc::clone(&p.waiters)])),
        }
    }
}

/// For records below the high watermark: were they still ours when they
/// were written (their base offset)? A failed write may have undone ours
/// and given the offsets to later appends.
pub(in crate::broker) fn stored(
    p: &Partition,
    appended: &Appended,
) -> Result<u64, (ErrorCode, String)> {
    let base_offset = appended.base_offset;
    let name = || format!("{} [{}]", p.topic, p.partition);
    match p.lock().fate(appended.epoch, appended.end_offset - 1) {
        Fate::InFile => Ok(base_offset),
        Fate::Undone => Err((
            ErrorCode::DiskFull,
            format!(
                "{}: records from offset {base_offset} were not stored: disk full",
                name()
            ),
        )),
        Fate::Gathered | Fate::Unknown => Err((
            ErrorCode::Timeout,
            format!(
                "{}: whether records from offset {base_offset} were stored is unknown",
                name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::flusher::flush_partition;
    use crate::broker::testing::{answers, append, partition, shared};
    use crate::protocol::Reader;

    fn appended(info: &crate::storage::log::AppendInfo) -> Appended {
        Appended {
            base_offset: info.base_offset,
            end_offset: info.last_offset + 1,
            epoch: info.epoch,
            leader_epoch: None,
        }
    }

    /// The one answer an acks=all producer trusts never speaks for records
    /// a failed write undid (their offsets went to later appends): it is
    /// disk_full, not success.
    #[test]
    fn an_acks_all_answer_for_records_a_failed_write_undid_is_disk_full() {
        use crate::broker::testing::batch_of;
        let (sim, shared) = shared();
        let p = partition(&shared, "t");
        // Gathered in memory; the disk has no block left for its bytes.
        sim.set_capacity(Some(sim.allocated()));
        let info = p.lock().append(&mut batch_of(&[7; 64 * 1024]), 0).unwrap();
        flush_partition(&shared, &p);
        sim.set_capacity(None);
        // Room again: a later append takes the same offsets and is flushed.
        let later = append(&p);
        assert_eq!(
            later.base_offset, info.base_offset,
            "the offsets were reused"
        );
        flush_partition(&shared, &p);
        let soon = Instant::now() + std::time::Duration::from_millis(20);
        let mut out = Vec::new();
        await_durable(&mut out, 9, &p, &appended(&info), soon);
        let got = answers(&out);
        assert_eq!(got[0].1, ErrorCode::DiskFull, "{got:?}");
    }

    #[test]
    fn an_acks_all_answer_waits_for_durability_and_says_what_became_of_the_records() {
        let (_sim, shared) = shared();
        let p = partition(&shared, "t");
        append(&p);
        let info = append(&p);
        let soon = Instant::now() + std::time::Duration::from_millis(20);
        let mut out = Vec::new();
        await_durable(&mut out, 1, &p, &appended(&info), soon);
        flush_partition(&shared, &p);
        await_durable(&mut out, 2, &p, &appended(&info), soon);
        p.failed.store(true, Ordering::Release);
        await_durable(&mut out, 3, &p, &appended(&info), soon);
        let got = answers(&out);
        assert_eq!(got[0].1, ErrorCode::Timeout, "not durable by the deadline");
        assert_eq!(got[1].1, ErrorCode::None);
        assert_eq!(Reader::new(&got[1].2).u64("base_offset").unwrap(), 1);
        assert_eq!(
            got[2].1,
            ErrorCode::StorageError,
            "a failed fsync stops the partition"
        );
    }
}
