//! The engines behind the binaries: embedded produce and consume on a local
//! data directory, the segment dumper, and the benchmarks. The command line
//! (`crate::cli`) parses flags and calls these.

pub mod bench;
pub mod consume;
pub mod dump;
pub mod produce;
