//! `klog-recover`: fsck for a log.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use crate::tools::recover;

/// Verifies every record's length and CRC, truncates each log at its first
/// bad record (saving the cut bytes beside it), and rebuilds indexes.
/// Exit 0 clean, 3 repaired, 4 damage left (--dry-run), 1 refused or I/O error.
#[derive(Debug, Parser)]
#[command(
    name = "klog-recover",
    version,
    about = super::help::RECOVER_ABOUT,
    long_about = None,
    after_help = super::help::after_help(&super::help::RECOVER)
)]
pub struct Args {
    /// Partition directories or data directories.
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,
    /// Scan every segment, not just those from the recovery point on.
    #[arg(long = "full")]
    pub full: bool,
    /// Change nothing; report what would be done.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
    /// One JSON object per segment.
    #[arg(long = "json")]
    pub json: bool,
    /// Only print errors.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
}

/// Runs `klog-recover`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = recover::Options {
        paths: args.paths,
        full: args.full,
        dry_run: args.dry_run,
        json: args.json,
        quiet: args.quiet,
    };
    let changed = recover::run(&options)?;
    Ok(ExitCode::from(match (changed, options.dry_run) {
        (false, _) => 0,
        (true, false) => super::EXIT_REPAIRED,
        (true, true) => super::EXIT_CORRUPT,
    }))
}
