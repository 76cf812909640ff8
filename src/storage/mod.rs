//! Storage: a partition's log on disk and everything that reads or
//! repairs it, with no network and no coordination.
//!
//! A [`log::Log`] is an append-only sequence of [`segment`] files of
//! CRC-checked [`record`] batches, with sparse memory-mapped offset and
//! time [`index`]es. Whoever goes through stored batches walks them with
//! [`batches`]. A [`store::Store`] is a data directory of such logs. Crash
//! [`recover`]y cuts a log at its first damaged record; a [`scrub`] finds
//! the rot recovery does not look for. A broker's [`spare`] segment files are zeroed ahead of the segments
//! that take them. Sealed segments' [`files`] are opened
//! when read, a bounded number kept open. Each log keeps
//! its leader [`epoch`]s and its idempotent [`producers`] beside its segments. All file I/O goes
//! through the [`fs::Vfs`] seam, so that tests can cut the power anywhere.

pub mod batches;
pub mod cleaner;
pub mod epoch;
pub mod files;
pub mod fs;
pub mod index;
pub mod lock;
pub mod log;
pub mod producers;
pub mod record;
pub mod recover;
pub mod refetch;
pub mod scrub;
pub mod segment;
pub mod spare;
pub mod store;
