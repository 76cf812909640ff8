//! `klog-recover`: fsck for a log.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use crate::storage::fs::RealFs;
use crate::storage::lock::PartitionLock;
use crate::storage::log::LogConfig;
use crate::storage::recover::{self, RecoverOptions, RecoveryReport};
use crate::storage::store;

/// Verifies every record's length and CRC, truncates each log at its first
/// bad record (saving the cut bytes beside it), and rebuilds indexes.
/// Exit 0 clean, 3 repaired, 4 damage left (--dry-run), 1 refused or I/O error.
#[derive(Debug, Parser)]
#[command(name = "klog-recover", version, about, long_about = None)]
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

/// The partition directories named by `paths` (data directories expand to
/// their partitions), in order.
pub fn partition_dirs(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        anyhow::ensure!(meta.is_dir(), "{} is not a directory", path.display());
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if store::parse_partition_dir(name).is_some() || has_segments(path) {
            dirs.push(path.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot list {}", path.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| store::parse_partition_dir(n).is_some())
            })
            .map(|e| e.path())
            .collect();
        found.sort();
        dirs.extend(found);
    }
    Ok(dirs)
}

fn has_segments(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()).any(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| crate::storage::segment::parse_log_file_name(n).is_some())
            })
        })
        .unwrap_or(false)
}

/// Describes one segment's outcome in a line.
pub fn describe(seg: &recover::SegmentReport, dry_run: bool) -> String {
    let name = seg
        .path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let verb = if dry_run { "would truncate" } else { "truncated" };
    let mut line = match &seg.problem {
        None => format!("{name}: {} records valid", seg.records_valid),
        Some(p) => format!(
            "{name}: {} records valid, {verb} {} bytes at position {} ({} at offset {})",
            seg.records_valid, seg.truncated_bytes, p.position, p.reason, p.offset
        ),
    };
    if let Some(saved) = &seg.saved_to {
        line.push_str(&format!(", cut bytes saved to {}", saved.display()));
    }
    if let Some(why) = &seg.index_problem {
        let verb = if dry_run { "would rebuild" } else { "rebuilt" };
        line.push_str(&format!(", index {verb} ({why})"));
    }
    line
}

/// Runs `klog-recover`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let say = crate::tools::Say { quiet: args.quiet };
    let defaults = LogConfig::default();
    let options = RecoverOptions {
        full: args.full,
        dry_run: args.dry_run,
        automatic: false,
        trust_last: false,
        index_interval_bytes: defaults.index_interval_bytes,
    };
    let mut changed = false;
    for dir in partition_dirs(&args.paths)? {
        let report = recover_one(&dir, &options).with_context(|| format!("cannot recover {}", dir.display()))?;
        changed |= report.changed();
        print_report(&dir, &report, &args, say)?;
    }
    if !changed && !args.full {
        say.info("clean from each recovery point on; --full also checks the segments before it");
    }
    Ok(ExitCode::from(match (changed, args.dry_run) {
        (false, _) => 0,
        (true, false) => super::EXIT_REPAIRED,
        (true, true) => super::EXIT_CORRUPT,
    }))
}

fn recover_one(dir: &Path, options: &RecoverOptions) -> anyhow::Result<RecoveryReport> {
    // Holding the writer lock keeps a broker or producer from starting on
    // the partition while it is repaired, and refuses a partition in use.
    let _lock = if options.dry_run {
        None
    } else {
        Some(PartitionLock::acquire(dir)?)
    };
    if options.dry_run {
        if let Some(pid) = crate::storage::lock::holder(dir) {
            anyhow::bail!("{} is locked by pid {pid}", dir.display());
        }
    }
    let point = if options.full {
        0
    } else {
        recover::read_recovery_point(&RealFs, dir)
    };
    Ok(recover::recover_partition(&RealFs, dir, point, options)?)
}

fn print_report(dir: &Path, report: &RecoveryReport, args: &Args, say: crate::tools::Say) -> anyhow::Result<()> {
    if args.json {
        for seg in &report.segments {
            println!("{}", serde_json::to_string(seg)?);
        }
        for q in &report.quarantined {
            println!("{}", serde_json::json!({"path": q, "quarantined": true}));
        }
        return Ok(());
    }
    say.info(format_args!("{}", dir.display()));
    for seg in &report.segments {
        println!("{}", describe(seg, args.dry_run));
    }
    let verb = if args.dry_run { "would move" } else { "moved" };
    for q in &report.quarantined {
        println!("{}: after a cut, {verb} into {}/", q.display(), recover::QUARANTINE_DIR);
    }
    let verb = if args.dry_run { "would remove" } else { "removed" };
    for r in &report.removed {
        println!("{}: leftover file, {verb}", r.display());
    }
    Ok(())
}
