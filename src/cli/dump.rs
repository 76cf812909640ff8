//! `klog-dump`: segments, indexes and partitions in readable form, like
//! `kafka-dump-log.sh`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use crate::storage::fs::RealFs;
use crate::tools::compare;
use crate::tools::dump::{self, Dumper};
use crate::tools::registry_dump;

/// Prints the batches (or records) of segment files, the entries of index
/// files, or whole partition and data directories with a summary table;
/// or compares the replicas of a partition (`--compare`). Exit 3 when a
/// problem is found (CRC, length, offset sequence, index, trailing bytes;
/// replicas that differ below the high watermark).
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
    /// directories; with --compare, the partition directories of one
    /// partition's replicas.
    #[arg(value_name = "PATH", required_unless_present = "registry")]
    pub paths: Vec<PathBuf>,
    /// Show a registry instead: brokers, each replicated partition's
    /// replicas, leader, epoch, ISR and high watermark (asked of its
    /// leader), groups, members, partition owners, committed offsets and
    /// lag. A directory or a ZooKeeper ensemble,
    /// zk://HOST:PORT[,HOST:PORT...]/CHROOT; only read: nothing is created
    /// or changed. Each broker gets 1s in all to answer (all asked at
    /// once): a silent one's figures are ? and a % line on stderr names it.
    #[arg(long = "registry", value_name = "REGISTRY", value_parser = super::registry_arg, conflicts_with_all = ["paths", "records", "print_data", "verify"])]
    pub registry: Option<PathBuf>,
    /// Compare the replicas of one partition: each PATH is its directory on
    /// another broker (d1/t-0 d2/t-0 d3/t-0). Prints each replica's start,
    /// end, tail and leader epochs, and the first offset where they
    /// differ (a batch's bytes, or a replica ending early); exit 3 when that
    /// is below the high watermark, or a replica is damaged. Above it a
    /// difference is an uncommitted tail: a note.
    #[arg(long = "compare", conflicts_with_all = ["registry", "records", "print_data", "verify"])]
    pub compare: bool,
    /// With --compare: the offset below which the replicas must be
    /// identical (klog-dump --registry shows each partition's); default:
    /// the lowest end of the replicas.
    #[arg(long = "high-watermark", value_name = "OFFSET", requires = "compare")]
    pub high_watermark: Option<u64>,
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
    /// With --registry: how to reach the brokers, by kcat's security
    /// properties (security.protocol, ssl.ca.location,
    /// ssl.certificate.location, ssl.key.location, sasl.mechanisms,
    /// sasl.username, sasl.password).
    #[arg(short = 'X', value_name = "NAME=VALUE", value_parser = super::config::property_arg, requires = "registry")]
    pub config: Vec<super::config::Property>,
}

/// Runs `klog-dump`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut security = crate::net::security::Properties::default();
    for p in &args.config {
        security
            .set(&p.name, &p.value)
            .map_err(|why| super::Usage(format!("-X {}={}: {why}", p.name, p.value)))?;
    }
    if security.any() {
        let built = security
            .build()
            .map_err(|e| super::Usage(format!("{e:#}")))?;
        crate::net::security::set_client(built);
    }
    if let Some(dir) = &args.registry {
        registry_dump::show(dir, args.json, args.quiet)
            .with_context(|| format!("cannot show the registry {}", dir.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.compare {
        return compare(&args);
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

/// `--compare`: the replicas in `args.paths`, at least two.
fn compare(args: &Args) -> anyhow::Result<ExitCode> {
    if args.paths.len() < 2 {
        return Err(super::Usage(format!(
            "--compare needs the directories of two replicas or more, not {}: e.g. klog-dump --compare d1/t-0 d2/t-0 d3/t-0",
            args.paths.len()
        ))
        .into());
    }
    if let Some(path) = args.paths.iter().find(|p| !p.is_dir()) {
        anyhow::bail!(
            "{}: not a partition directory (--compare takes the directories of one partition's replicas, e.g. d1/t-0 d2/t-0)",
            path.display()
        );
    }
    let options = compare::Options {
        high_watermark: args.high_watermark,
        json: args.json,
        quiet: args.quiet,
    };
    let problems =
        compare::run(&RealFs, &args.paths, &options).context("cannot compare the replicas")?;
    Ok(ExitCode::from(if problems > 0 {
        super::EXIT_REPAIRED
    } else {
        0
    }))
}
