//! Clients of the pull protocol ([`crate::protocol`]): a connection for
//! single requests, a [`Producer`] and a [`Consumer`].
//!
//! The producer batches records per partition (by count and bytes; the
//! caller decides when a partial batch has lingered long enough), keeps up
//! to `in_flight_max` produce requests on the wire at once, and counts
//! each record as delivered only when the broker acknowledged it (with
//! `acks=0`, when it was sent). A record that could not be delivered (by
//! its delivery deadline) is counted as failed and its error kept: nothing
//! is dropped silently.
//!
//! Every network call has a deadline, and a stop signal ends any wait on
//! a broker within a tenth of a second (see [`connection`]).
//!
//! The consumer fetches ahead: a thread keeps one fetch in flight for all
//! the partitions it reads and queues up to `prefetch` responses while the
//! caller handles earlier ones. Every record's CRC is checked before it is
//! handed out, and records before the wanted offset (a fetch starts at a
//! batch boundary) are skipped.
//!
//! The rooms: [`connection`] (one request at a time, and the per-broker
//! pool), [`producer`], [`report`] (the acknowledged records, one JSON line
//! each), [`consumer`], [`partitioner`] (Kafka's murmur2 choice of
//! partition) and [`offset`] (where a consumer starts). The
//! client knows brokers, not the registry: routing through the registry
//! and the members of consumer groups are one floor up, in `crate::coord`.

pub(crate) mod acks;
pub mod connection;
pub mod consumer;
pub mod offset;
mod offsets;
pub mod partitioner;
pub mod producer;
pub mod report;
mod sasl;

pub use connection::{connect, Connection, Connections, PartitionOffsets};
pub use consumer::{Consumer, ConsumerConfig, ConsumerPartition, Locate};
pub use producer::{
    BatchOptions, ParsedRecord, Producer, ProducerConfig, ProducerSummary, Source, Sources,
};
pub use report::AckReport;
