//! A producer routed by a cluster producer (one floor up, which knows
//! each partition's leader): it gives back the requests its broker
//! refuses for a reason a leader elsewhere would not have, and those a
//! broken connection left unanswered, rather than failing them or
//! connecting again.

use std::time::Instant;

use super::{Producer, ProducerConfig};
use crate::client::acks::{Acks, Orphan, Waiting};
use crate::client::connection::{connect_with, until, CONNECT_TIMEOUT};
use crate::client::Sources;
use crate::error::{Error, Result};
use crate::protocol;
use crate::sync::lock;

impl Producer {
    /// Connects to `addr` for a producer that routes each partition of
    /// `topic` (of `partitions`, as the caller knows them) to its leader
    /// (one floor up), within the request timeout and asking nothing (a
    /// broker that hangs holds nobody up here): a request whose answer
    /// says the broker does not lead its partition now (`not_leader`,
    /// `leader_not_available`, `partition_elsewhere`) or has too few
    /// in-sync replicas (`not_enough_replicas`) is not failed but given
    /// back ([`Producer::take_orphans`]), and so is every request waiting
    /// when the connection breaks or its broker is silent past the request
    /// timeout: this producer never connects again.
    pub(crate) fn connect_routed(
        addr: &str,
        topic: &str,
        partitions: u32,
        config: ProducerConfig,
    ) -> Result<Producer> {
        let wait = config.request_timeout.min(CONNECT_TIMEOUT);
        let stream = connect_with(addr, &mut until(addr, wait))?;
        let producer = Producer::on(stream, addr, topic, partitions, config, 0)?;
        lock(&producer.state.acks).routed = true;
        Ok(producer)
    }

    /// Routed: sends `batch` (of `records`, from `sources`, the first of
    /// them batched at `opened`) to `partition`, the partition's batch of
    /// that ordinal.
    pub(crate) fn send_encoded(
        &mut self,
        (partition, ordinal): (u32, u64),
        (batch, sources): (&[u8], Sources),
        records: u64,
        opened: Instant,
    ) -> Result<()> {
        self.wait_for_room(None)?;
        self.next_id = self.next_id.wrapping_add(1);
        let start = self.out.len();
        let c = &self.config;
        protocol::append_txn_produce_request(
            &mut self.out,
            self.next_id,
            (c.acks, c.timeout_ms, c.transactional_id),
            &self.topic,
            partition,
            batch,
        );
        let deadline = opened + self.config.delivery_timeout;
        let batch = (batch.len(), sources);
        self.enqueued(start, (partition, ordinal), records, deadline, batch)
    }

    /// Routed: sends again a request another producer gave back (its
    /// records may be appended twice), keeping its deadline.
    /// `again`: it was sent before (else it was parked unsent, and is not
    /// counted as sent again).
    pub(crate) fn adopt(&mut self, waiting: Waiting, again: bool) -> Result<()> {
        self.wait_for_room(None)?;
        self.next_id = self.next_id.wrapping_add(1);
        let start = self.out.len();
        let c = &self.config;
        let batch = &waiting.request[waiting.batch_at..];
        protocol::append_txn_produce_request(
            &mut self.out,
            self.next_id,
            (c.acks, c.timeout_ms, c.transactional_id),
            &self.topic,
            waiting.partition,
            batch,
        );
        self.resent += u64::from(again);
        let place = (waiting.partition, waiting.ordinal);
        let records = waiting.records;
        let batch = (batch.len(), waiting.sources);
        self.enqueued(start, place, records, waiting.deadline, batch)
    }

    /// Routed: the partitions of the requests that failed for good (the
    /// broker refused them for a reason a leader elsewhere would share)
    /// since the last call.
    pub(crate) fn take_failed_partitions(&mut self) -> Vec<u32> {
        std::mem::take(&mut lock(&self.state.acks).failed_partitions)
    }

    /// Routed: the requests given back since the last call (all those
    /// waiting, once the connection broke).
    pub(crate) fn take_orphans(&mut self) -> Vec<Orphan> {
        // Once broken, everything waiting goes back: also a request
        // queued after the reader found the break (between a look at the
        // room and the send), which nothing would write.
        if lock(&self.state.acks).broken {
            self.orphan_all();
        }
        std::mem::take(&mut lock(&self.state.acks).orphans)
    }

    /// Routed: the ordinal of the oldest batch of `partition` it holds
    /// unresolved (waiting for its answer, or given back and not yet
    /// taken), if any.
    pub(crate) fn oldest_open(&self, partition: u32) -> Option<u64> {
        let acks = lock(&self.state.acks);
        let waiting = acks.waiting.iter();
        let given_back = acks.orphans.iter().map(|o| &o.waiting);
        waiting
            .chain(given_back)
            .filter(|w| w.partition == partition)
            .map(|w| w.ordinal)
            .min()
    }

    /// Routed: whether its window has room for one more request now (by
    /// count and by bytes), so that sending waits for nothing; a producer
    /// whose connection broke has none.
    pub(crate) fn has_room(&self) -> bool {
        let acks = lock(&self.state.acks);
        !self.dead
            && !acks.broken
            && acks.waiting.len() < self.config.in_flight_max.max(1)
            && acks.waiting_bytes < super::IN_FLIGHT_BYTES_MAX
    }

    /// Routed: whether its connection broke (it sends nothing more).
    pub(crate) fn dead(&self) -> bool {
        self.dead
    }

    /// Whether requests wait for their answers.
    pub(crate) fn in_flight(&self) -> bool {
        !lock(&self.state.acks).waiting.is_empty()
    }

    /// Routed: writes what is held back and waits until every request is
    /// answered (or given back), or the connection broke.
    pub(crate) fn drain(&mut self) -> Result<()> {
        self.write_out()?;
        let mut acks = lock(&self.state.acks);
        while !acks.waiting.is_empty() && !acks.broken {
            if !self.out.is_empty() {
                drop(acks);
                self.write_out()?;
                acks = lock(&self.state.acks);
            }
            acks.sender_waits = true;
            acks = self
                .state
                .changed
                .wait_timeout(acks, crate::client::connection::TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        acks.sender_waits = false;
        Ok(())
    }

    /// Routed (with acks): writes as much of what is held back as the
    /// socket takes now, without waiting; the rest stays held back for
    /// the next write. A broker that takes nothing (it hangs, or is
    /// stopped) thus holds up no other broker's partitions: its oldest
    /// request's timeout gives the connection up. A write that fails
    /// breaks the connection: every request waiting is given back.
    pub(super) fn write_some(&mut self) -> Result<()> {
        use nix::sys::socket::{send, MsgFlags};
        use std::os::fd::AsRawFd;
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        while !self.out.is_empty() && !self.dead {
            match send(self.stream.as_raw_fd(), &self.out, flags) {
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(_) => {
                    lock(&self.state.acks).broken = true;
                    self.orphan_all();
                }
            }
        }
        if self.out.is_empty() {
            self.unsent = (0, 0);
        }
        Ok(())
    }

    /// Routed, the connection broke: every request waiting is given back
    /// (a request the broker had appended before the break is appended
    /// twice once sent again: at least once), and nothing more is sent.
    pub(super) fn orphan_all(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.dead = true;
        self.out.clear();
        self.unsent = (0, 0);
        let mut acks = lock(&self.state.acks);
        acks.waiting_bytes = 0;
        let Acks {
            waiting, orphans, ..
        } = &mut *acks;
        orphans.extend(waiting.drain(..).map(|waiting| Orphan {
            waiting,
            why: Error::Network {
                op: "send to",
                addr: self.addr.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "the connection broke before the answer",
                ),
            },
            sent_before: true,
        }));
    }
}
