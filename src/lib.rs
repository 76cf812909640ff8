//! klog: the distributed commit log of the Kafka paper (Kreps, Narkhede,
//! Rao, 2011), as a library and a toolkit of single-purpose binaries.
//!
//! A topic is split into partitions; each partition is a [`log::Log`]: an
//! append-only sequence of [`segment`] files of CRC-checked [`record`]
//! batches, with sparse memory-mapped offset and time [`index`]es. A
//! [`store::Store`] is a data directory of such logs. Crash [`recover`]y
//! cuts a log at its first damaged record.
//!
//! Where each byte format is specified:
//!
//! - batches and records: [`record`]
//! - segment files: [`segment`]
//! - index files: [`index`]
//! - a partition directory's files: [`log`]
//! - a data directory: [`store`]
//!
//! Every bound is in [`limits`]. All file I/O of a log goes through the
//! [`fs::Vfs`] seam, so that tests can cut the power anywhere.

#![deny(missing_docs)]

pub mod b64;
pub mod bench;
pub mod broker;
pub mod cli;
pub mod client;
pub mod consume;
pub mod dump;
pub mod error;
pub mod fs;
pub mod group;
pub mod index;
pub mod limits;
pub mod lock;
pub mod log;
pub mod produce;
pub mod protocol;
pub mod record;
pub mod recover;
pub mod registry;
pub mod segment;
pub mod store;

pub use error::{Error, Result};
