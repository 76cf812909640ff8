//! klog: the distributed commit log of the Kafka paper (Kreps, Narkhede,
//! Rao, 2011), as a library and a toolkit of single-purpose binaries.
//!
//! The crate is a house of floors; each imports only from its own floor and
//! those below it (`tests/house.rs` checks this on the source):
//!
//! | floor | folder | what lives there |
//! |---|---|---|
//! | 7 | [`cli`] | clap definitions of each binary and the `main` wrapper |
//! | 6 | [`tools`] | the engines behind the binaries: produce, follow (consume), dump, recover, registry dump, bench |
//! | 5 | [`broker`] | the server: listener, connections, flusher, retention |
//! | 4 | [`coord`] | the registry of brokers, members, owners and offsets; Algorithm 1 and the group member; routing through the registry |
//! | 3 | [`client`] | connection, producer, consumer, partitioner, where a consumer starts |
//! | 2 | [`protocol`] | klog's pull protocol, sans-I/O: frames, requests, responses |
//! | 2 | [`kafka`] | the Kafka wire protocol, sans-I/O: headers, requests, responses; a produce's record batches checked |
//! | 1 | [`storage`] | records, segments, indexes, logs, recovery, the data directory, the `Vfs` seam |
//! | 0 | the ground | [`error`], [`limits`], [`human`], [`clock`], [`stop`], [`stats`], [`sync`], [`random`] |
//!
//! Where each byte format is specified:
//!
//! - batches and records: [`storage::record`]
//! - segment files: [`storage::segment`]
//! - index files: [`storage::index`]
//! - a partition directory's files: [`storage::log`]
//! - a data directory: [`storage::store`]
//! - the wire: [`protocol`]
//! - the Kafka wire: [`kafka`]
//! - the registry directory: [`coord::dir`]
//!
//! Every bound is in [`limits`]. All file I/O of a log goes through the
//! [`storage::fs::Vfs`] seam, so that tests can cut the power anywhere.

#![deny(missing_docs)]

pub mod broker;
pub mod cli;
pub mod client;
pub mod clock;
pub mod coord;
pub mod diag;
pub mod error;
#[doc(hidden)]
pub mod fuzz;
pub mod human;
pub mod kafka;
pub mod limits;
pub mod net;
pub mod protocol;
pub mod random;
pub mod stats;
pub mod stop;
pub mod storage;
pub mod sync;
pub mod tools;

pub use error::{Error, Result};
