//! `klog-dump`: segments, indexes and partitions in readable form, like
//! `kafka-dump-log.sh`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use crate::tools::dump::{self, Dumper};
use crate::tools::registry_dump;

/// Prints the batches (or records) of segment files, the entries of index
/// files, or whole partition and data directories with a summary table.
/// Exit 3 when a problem is found (CRC, length, offset sequence, index,
/// trailing bytes).
#[derive(Debug, Parser)]
#[command(
    name = "klog-dump",
    version,
    about = super::help::DUMP_ABOUT,
    long_about = None,
    after_help = super::help::after_help(&super::help::DUMP)
)]
pub struct Args {
    /// `.log`, `.index` or `.timeindex` files, partition directories or data
    /// directories.
    #[arg(value_name = "PATH", required_unless_present = "registry")]
    pub paths: Vec<PathBuf>,
    /// Show a registry instead: brokers, groups, members, partition owners,
    /// committed offsets and lag. A directory or a ZooKeeper ensemble,
    /// zk://HOST:PORT[,HOST:PORT...]/CHROOT; only read: nothing is created
    /// or changed.
    #[arg(long = "registry", value_name = "REGISTRY", value_parser = super::registry_arg, conflicts_with_all = ["paths", "records", "print_data", "verify"])]
    pub registry: Option<PathBuf>,
    /// One line per record instead of per batch.
    #[arg(long = "records")]
    pub records: bool,
    /// Print keys, values and headers too (implies --records).
    #[arg(long = "print-data")]
    pub print_data: bool,
    /// Check the indexes and the leader epoch file against the log, and
    /// every CRC; print only problems and the summary.
    #[arg(long = "verify")]
    pub verify: bool,
    /// One JSON object per line.
    #[arg(long = "json")]
    pub json: bool,
    /// Only print errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
}

/// Runs `klog-dump`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.registry {
        registry_dump::show(dir, args.json)
            .with_context(|| format!("cannot show the registry {}", dir.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut dumper = Dumper::new(dump::Options {
        records: args.records || args.print_data,
        print_data: args.print_data,
        verify: args.verify,
        json: args.json,
        quiet: args.quiet,
    });
    for path in &args.paths {
        dumper
            .path(path)
            .with_context(|| format!("cannot dump {}", path.display()))?;
    }
    dumper.finish()?;
    Ok(ExitCode::from(if dumper.problems() > 0 {
        super::EXIT_REPAIRED
    } else {
        0
    }))
}
