//! The engine of `klog-recover`: finding the partition directories a path
//! names, repairing (or, in a dry run, judging) each with
//! [`crate::storage::recover`], and reporting what it did per segment, in
//! lines or JSON.
//!
//! A segment a writer rolled and did not name yet (`next-<seq>.log`, see
//! [`crate::storage::segment::temp_paths`]) is adopted or removed exactly
//! as the broker's writable open would (`storage::log::adopt_rolled`):
//! adopted under its own name when its header names the offset where the
//! recovered log ends (then recovered as its last segment), removed when it
//! has no whole header or names another offset (none of its records was
//! ever shown or called durable). So after `klog-recover` (exit 0 or 3),
//! `klog-dump --verify`, which calls such a segment a problem, finds none.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::human;
use crate::storage::epoch::EPOCH_FILE;
use crate::storage::fs::RealFs;
use crate::storage::lock::DirLock;
use crate::storage::log::LogConfig;
use crate::storage::recover::{self, RecoverOptions, RecoveryReport, SegmentReport};
use crate::storage::refetch;
use crate::storage::{segment, store};

use super::Say;

/// What `klog-recover` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Partition directories or data directories.
    pub paths: Vec<PathBuf>,
    /// Scan every segment, not just those from the recovery point on.
    pub full: bool,
    /// Change nothing; report what would be done.
    pub dry_run: bool,
    /// One JSON object per segment.
    pub json: bool,
    /// Only print errors.
    pub quiet: bool,
}

/// Recovers every partition that `options.paths` names, printing a report
/// of each; returns whether anything was changed (or, in a dry run, would
/// be).
pub fn run(options: &Options) -> anyhow::Result<bool> {
    let say = Say {
        quiet: options.quiet,
    };
    let defaults = LogConfig::default();
    let recover_options = RecoverOptions {
        full: options.full,
        dry_run: options.dry_run,
        automatic: false,
        trust_last: false,
        index_interval_bytes: defaults.index_interval_bytes,
    };
    // A data directory is repaired by one writer: not beside its broker.
    let _locks = lock_data_dirs(&options.paths, options.dry_run)?;
    let mut changed = false;
    let mut printing = true;
    for dir in partition_dirs(&options.paths)? {
        let outcome = recover_one(&dir, &recover_options)
            .with_context(|| format!("cannot recover {}", dir.display()))?;
        changed |= outcome.changed();
        if !options.dry_run {
            note_refetch(&dir, &outcome.report, say)?;
        }
        // A closed stdout (| head) ends the report, not the repair: the
        // exit code still says what was done.
        if printing {
            match print_report(&dir, &outcome, options, say) {
                Err(e) if is_broken_pipe(&e) => printing = false,
                other => other?,
            }
        }
    }
    if !changed && !options.full {
        say.info("clean from each recovery point on; --full also checks the segments before it");
    }
    Ok(changed)
}

/// After damage was cut from the partition in `dir` (and marked, before
/// the cut, by [`refetch::recover_marked`]: a replica refetches what was
/// cut from its leader before it may lead or count as in sync again):
/// for a replica, says so.
fn note_refetch(dir: &Path, report: &RecoveryReport, say: Say) -> anyhow::Result<()> {
    if !report.damaged() {
        return Ok(());
    }
    let cut_at = report.next_offset().unwrap_or(0);
    // Replicated partitions lead in epochs from 1 on; a single copy's
    // batches carry epoch 0.
    if report.epochs.latest().is_some_and(|e| e.epoch > 0) {
        say.info(format_args!(
            "{}: a replica: its broker refetches the records from offset {} from the partition's \
             leader, and leads or counts as in sync again only once it holds them",
            dir.display(),
            cut_at
        ));
    }
    Ok(())
}

/// The segments of the partition in `dir` that were rolled and not yet
/// named (`next-<seq>.log`, see [`crate::storage::segment::temp_paths`]):
/// neither recovery nor a reader reads them; the broker's writable open,
/// and `klog-recover`, adopt or remove them.
pub fn rolled_not_named(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| crate::storage::segment::parse_temp_log_name(n).is_some())
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Whether `e` is a write to a closed pipe.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The partition directories named by `paths` (data directories expand to
/// their partitions), in order; a directory that holds none is an error,
/// so that a typo never reads as "verified".
pub fn partition_dirs(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        anyhow::ensure!(meta.is_dir(), "{} is not a directory", path.display());
        if is_partition_dir(path) {
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
        anyhow::ensure!(
            !found.is_empty(),
            "no partition found in {} (a partition is a TOPIC-N directory of .log segments)",
            path.display()
        );
        found.sort();
        dirs.extend(found);
    }
    Ok(dirs)
}

/// Takes the lock of each data directory in `paths` (a dry run only
/// checks that no writer holds it), or says who holds it.
fn lock_data_dirs(paths: &[PathBuf], dry_run: bool) -> anyhow::Result<Vec<DirLock>> {
    let mut locks = Vec::new();
    for path in paths.iter().filter(|p| p.is_dir() && !is_partition_dir(p)) {
        // Says so when it holds no partition, before a lock file is made.
        partition_dirs(std::slice::from_ref(path))?;
        if !dry_run {
            locks.push(DirLock::acquire(path)?);
        } else if let Some(pid) = crate::storage::lock::holder(path) {
            anyhow::bail!("{} is locked by pid {pid}", path.display());
        }
    }
    Ok(locks)
}

/// Whether `path` is a partition directory rather than a data directory.
fn is_partition_dir(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    store::parse_partition_dir(name).is_some() || has_segments(path)
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

/// Describes one segment's outcome in a line that names its partition
/// (`topic-0/00000000000000000000.log: ...`). A segment trusted before the
/// recovery point is said to be not scanned, never valid.
pub fn describe(seg: &recover::SegmentReport, dry_run: bool) -> String {
    let name = segment_name(&seg.path);
    let verb = if dry_run {
        "would truncate"
    } else {
        "truncated"
    };
    let valid = human::count(seg.records_valid, "record");
    let mut line = match &seg.problem {
        None if !seg.scanned => format!(
            "{name}: not scanned, before the recovery point ({}; --full scans it)",
            human::count(seg.records_valid, "record")
        ),
        None => format!("{name}: {valid} valid"),
        Some(p) => format!(
            "{name}: {valid} valid, {verb} {} bytes at position {} ({} at offset {})",
            seg.truncated_bytes, p.position, p.reason, p.offset
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

/// A segment's file name after its partition's: `topic-0/00000000000000000000.log`.
fn segment_name(path: &Path) -> String {
    let name = |p: Option<&std::ffi::OsStr>| p.map(|n| n.to_string_lossy().into_owned());
    let partition = name(path.parent().and_then(Path::file_name)).unwrap_or_default();
    format!("{partition}/{}", name(path.file_name()).unwrap_or_default())
}

/// What `klog-recover` did to (or, in a dry run, would do to) one
/// partition.
#[derive(Debug)]
struct Outcome {
    /// Recovery of the segments it found named.
    report: RecoveryReport,
    /// The segments rolled and not yet named, and what became of each.
    rolled: Vec<Rolled>,
    /// Recovery of the segments it adopted, as their partition's last.
    adopted: Vec<SegmentReport>,
    /// Whether that recovery changed anything.
    adopted_changed: bool,
}

impl Outcome {
    /// Whether anything was (or would be) changed.
    fn changed(&self) -> bool {
        self.report.changed()
            || self.report.epoch_problem.is_some()
            || !self.rolled.is_empty()
            || self.adopted_changed
    }
}

/// A segment rolled and not yet named, and what became of it.
#[derive(Debug)]
struct Rolled {
    /// Its `next-<seq>.log` file.
    path: PathBuf,
    /// The base offset its header names, if it has a whole one.
    header_base: Option<u64>,
    /// The name it took (or would take), adopted; `None`: removed.
    adopted_as: Option<PathBuf>,
    /// Where the partition's log ends without it.
    end: Option<u64>,
}

/// The base offset the header of the segment file `path` names, if whole.
fn header_base(path: &Path) -> Option<u64> {
    use std::io::Read;
    let mut header = [0u8; segment::SEGMENT_HEADER_BYTES];
    let mut file = std::fs::File::open(path).ok()?;
    file.read_exact(&mut header).ok()?;
    segment::decode_header(&header).ok().map(|(base, _)| base)
}

/// Adopts or removes the segments rolled and not yet named as the
/// broker's writable open would, after `report`; `recover` recovers the
/// partition again. In a dry run, says what it would do: adopt the first
/// that continues the log, remove the others (unless one continues a
/// segment adopted before it, which only doing it shows).
fn adopt_or_remove(
    dir: &Path,
    report: RecoveryReport,
    dry_run: bool,
    recover: impl Fn() -> crate::Result<RecoveryReport>,
) -> anyhow::Result<Outcome> {
    let found = rolled_not_named(dir);
    let end = report.next_offset();
    let mut outcome = Outcome {
        rolled: Vec::new(),
        adopted: Vec::new(),
        adopted_changed: false,
        report,
    };
    if found.is_empty() {
        return Ok(outcome);
    }
    let bases: Vec<Option<u64>> = found.iter().map(|p| header_base(p)).collect();
    let named = |base: u64| dir.join(segment::log_file_name(base));
    if dry_run {
        let first = bases.iter().position(|b| b.is_some() && *b == end);
        for (i, (path, header_base)) in found.into_iter().zip(bases).enumerate() {
            let adopted_as = (Some(i) == first).then(|| named(end.unwrap_or_default()));
            outcome.rolled.push(Rolled {
                path,
                header_base,
                adopted_as,
                end,
            });
        }
        return Ok(outcome);
    }
    let before: Vec<u64> = outcome
        .report
        .segments
        .iter()
        .map(|s| s.base_offset)
        .collect();
    let after = crate::storage::log::adopt_rolled(&RealFs, dir, outcome.report.clone(), recover)?;
    let new: Vec<&SegmentReport> = after
        .segments
        .iter()
        .filter(|s| !before.contains(&s.base_offset))
        .collect();
    for (path, header_base) in found.into_iter().zip(bases) {
        let adopted_as = header_base
            .filter(|b| new.iter().any(|s| s.base_offset == *b))
            .map(named);
        outcome.rolled.push(Rolled {
            path,
            header_base,
            adopted_as,
            end: after.next_offset(),
        });
    }
    if !new.is_empty() {
        outcome.adopted = new.into_iter().cloned().collect();
        outcome.adopted_changed = after.changed() || after.epoch_problem.is_some();
    }
    Ok(outcome)
}

fn recover_one(dir: &Path, options: &RecoverOptions) -> anyhow::Result<Outcome> {
    // Holding the writer lock keeps a broker or producer from starting on
    // the partition while it is repaired, and refuses a partition in use.
    let _lock = if options.dry_run {
        None
    } else {
        Some(DirLock::acquire(dir)?)
    };
    if options.dry_run {
        if let Some(pid) = crate::storage::lock::holder(dir) {
            anyhow::bail!("{} is locked by pid {pid}", dir.display());
        }
    }
    let recover = || {
        let point = if options.full {
            0
        } else {
            recover::read_recovery_point(&RealFs, dir)
        };
        recover::recover_partition(&RealFs, dir, point, options)
    };
    // A replica's mark is written before the cut it records (see
    // refetch::recover_marked): the cut is durable at once.
    let point = if options.full {
        0
    } else {
        recover::read_recovery_point(&RealFs, dir)
    };
    let report = refetch::recover_marked(&RealFs, dir, point, options)?.0;
    adopt_or_remove(dir, report, options.dry_run, recover)
}

/// Describes what became of a segment rolled and not yet named.
fn describe_rolled(rolled: &Rolled, dry_run: bool) -> String {
    let name = segment_name(&rolled.path);
    let why = match (rolled.header_base, rolled.end) {
        (None, _) => "it has no whole header".to_string(),
        (Some(b), Some(end)) => format!("its header names offset {b}, the log ends at {end}"),
        (Some(b), None) => format!("its header names offset {b}, the log has no segment"),
    };
    let what = format!("{name}: a segment rolled and not yet named");
    match (&rolled.adopted_as, dry_run) {
        (Some(to), false) => format!(
            "{what} that continues the log: adopted as {}",
            segment_name(to)
        ),
        (Some(to), true) => format!(
            "{what} that continues the log: would be adopted as {}",
            segment_name(to)
        ),
        (None, false) => format!("{what} that does not continue the log ({why}): removed"),
        (None, true) if rolled.header_base.is_none() => {
            format!("{what} that does not continue the log ({why}): would be removed")
        }
        (None, true) => format!(
            "{what} that does not continue the log ({why}): would be removed, unless a segment adopted before it ends where it begins"
        ),
    }
}

fn print_report(dir: &Path, outcome: &Outcome, options: &Options, say: Say) -> anyhow::Result<()> {
    let report = &outcome.report;
    let mut out = std::io::stdout().lock();
    if options.json {
        for seg in &report.segments {
            writeln!(out, "{}", serde_json::to_string(seg)?)?;
        }
        for r in &outcome.rolled {
            let line = serde_json::json!({"path": r.path, "rolled": true,
                "header_base_offset": r.header_base, "adopted_as": r.adopted_as});
            writeln!(out, "{line}")?;
        }
        for seg in &outcome.adopted {
            writeln!(out, "{}", serde_json::to_string(seg)?)?;
        }
        for q in &report.quarantined {
            writeln!(
                out,
                "{}",
                serde_json::json!({"path": q, "quarantined": true})
            )?;
        }
        if let Some(problem) = &report.epoch_problem {
            let path = dir.join(EPOCH_FILE);
            let line = serde_json::json!({"path": path, "epoch_problem": problem});
            writeln!(out, "{line}")?;
        }
        return Ok(());
    }
    say.info(format_args!("{}", dir.display()));
    for seg in &report.segments {
        writeln!(out, "{}", describe(seg, options.dry_run))?;
    }
    let verb = if options.dry_run {
        "would move"
    } else {
        "moved"
    };
    for q in &report.quarantined {
        writeln!(
            out,
            "{}: after a cut, {verb} into {}/",
            segment_name(q),
            recover::QUARANTINE_DIR
        )?;
    }
    let verb = if options.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for r in &report.removed {
        writeln!(out, "{}: leftover file, {verb}", r.display())?;
    }
    if let Some(problem) = &report.epoch_problem {
        let dry = if options.dry_run {
            " (dry run: not written)"
        } else {
            ""
        };
        writeln!(out, "{}: {problem}{dry}", dir.display())?;
    }
    for rolled in &outcome.rolled {
        writeln!(out, "{}", describe_rolled(rolled, options.dry_run))?;
    }
    for seg in &outcome.adopted {
        writeln!(out, "{}", describe(seg, options.dry_run))?;
    }
    Ok(())
}
