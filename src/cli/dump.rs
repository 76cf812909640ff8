//! `klog-dump`: segments, indexes and partitions in readable form, like
//! `kafka-dump-log.sh`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use crate::tools::dump::{self, Dumper};

/// Prints the batches (or records) of segment files, the entries of index
/// files, or whole partition and data directories with a summary table.
/// Exit 3 when a problem is found (CRC, length, offset sequence, index,
/// trailing bytes).
#[derive(Debug, Parser)]
#[command(name = "klog-dump", version, about, long_about = None)]
pub struct Args {
    /// `.log`, `.index` or `.timeindex` files, partition directories or data
    /// directories.
    #[arg(value_name = "PATH", required_unless_present = "registry")]
    pub paths: Vec<PathBuf>,
    /// Show a registry instead: brokers, groups, members, partition owners,
    /// committed offsets and lag.
    #[arg(long = "registry", value_name = "DIR", conflicts_with_all = ["paths", "records", "print_data", "verify"])]
    pub registry: Option<PathBuf>,
    /// One line per record instead of per batch.
    #[arg(long = "records")]
    pub records: bool,
    /// Print keys, values and headers too (implies --records).
    #[arg(long = "print-data")]
    pub print_data: bool,
    /// Check the indexes against the log and every CRC; print only problems
    /// and the summary.
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
        dump_registry(dir, args.json).with_context(|| format!("cannot show the registry {}", dir.display()))?;
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
        dump_path(&mut dumper, path).with_context(|| format!("cannot dump {}", path.display()))?;
    }
    dumper.finish()?;
    Ok(ExitCode::from(if dumper.problems() > 0 {
        super::EXIT_REPAIRED
    } else {
        0
    }))
}

fn dump_path(dumper: &mut Dumper, path: &Path) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        for dir in super::recover::partition_dirs(&[path.to_path_buf()])? {
            dumper.partition(&dir)?;
        }
        return Ok(());
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("log") => dumper.segment_file(path),
        Some("index") | Some("timeindex") => dumper.index_file(path),
        _ => anyhow::bail!("not a .log, .index or .timeindex file, nor a directory"),
    }
}

/// One row of the registry's offsets: a group's committed offset and lag.
struct OffsetRow {
    group: String,
    topic: String,
    partition: u32,
    committed: Result<u64, String>,
    end: Option<u64>,
    owner: Option<String>,
}

/// Prints a registry: brokers, then per group its members, owners,
/// committed offsets and lag (end offset minus committed, from a broker
/// that serves the topic).
fn dump_registry(dir: &Path, json: bool) -> anyhow::Result<()> {
    use std::collections::BTreeMap;
    use std::io::Write;

    use serde_json::json;

    if !dir.join("brokers").is_dir() {
        anyhow::bail!("not a registry (no brokers/ inside)");
    }
    let registry = crate::coord::open(dir)?;
    let brokers = registry.brokers()?;
    // End offsets, asked of the broker that holds each partition.
    let mut conns = crate::client::Connections::new();
    let mut asked: BTreeMap<(String, String), Option<crate::client::PartitionOffsets>> = BTreeMap::new();
    let mut end_of = |topic: &str, partition: u32| -> Option<u64> {
        let broker = brokers
            .iter()
            .find(|b| b.topics.get(topic).is_some_and(|held| held.contains(&partition)))?;
        let offsets = asked
            .entry((broker.id.clone(), topic.to_string()))
            .or_insert_with(|| conns.with(&broker.addr(), |c| c.partitions(topic)).ok());
        offsets.as_ref()?.get(partition as usize).map(|o| o.1)
    };
    let mut members = Vec::new();
    let mut rows = Vec::new();
    for group in registry.groups()? {
        for m in registry.members(&group)? {
            members.push((group.clone(), m));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (topic, partition, committed) in registry.offsets(&group)? {
            seen.insert((topic.clone(), partition));
            rows.push(OffsetRow {
                owner: registry.owner(&group, &topic, partition),
                end: end_of(&topic, partition),
                group: group.clone(),
                topic,
                partition,
                committed: committed.map_err(|e| e.to_string()),
            });
        }
        // Owned partitions with nothing committed yet.
        for (topic, count) in brokers.iter().flat_map(|b| b.topics.iter()) {
            for &p in count {
                if seen.contains(&(topic.clone(), p)) {
                    continue;
                }
                if let Some(owner) = registry.owner(&group, topic, p) {
                    seen.insert((topic.clone(), p));
                    rows.push(OffsetRow {
                        group: group.clone(),
                        topic: topic.clone(),
                        partition: p,
                        committed: Err("none".into()),
                        end: end_of(topic, p),
                        owner: Some(owner),
                    });
                }
            }
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json {
        for b in &brokers {
            writeln!(
                out,
                "{}",
                json!({"type": "broker", "id": b.id, "host": b.host, "port": b.port, "pid": b.pid, "topics": b.topics})
            )?;
        }
        for (group, m) in &members {
            writeln!(
                out,
                "{}",
                json!({"type": "member", "group": group, "member": m.member, "pid": m.pid, "topics": m.topics})
            )?;
        }
        for r in &rows {
            if let Some(owner) = &r.owner {
                writeln!(
                    out,
                    "{}",
                    json!({"type": "owner", "group": r.group, "topic": r.topic, "partition": r.partition, "member": owner})
                )?;
            }
            if let Ok(c) = r.committed {
                writeln!(
                    out,
                    "{}",
                    json!({"type": "offset", "group": r.group, "topic": r.topic, "partition": r.partition,
                    "committed": c, "end": r.end, "lag": r.end.map(|e| e.saturating_sub(c))})
                )?;
            }
        }
        return Ok(());
    }
    let table = |header: &[&str]| {
        let mut t = comfy_table::Table::new();
        t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        if std::env::var_os("NO_COLOR").is_some() {
            t.force_no_tty();
        }
        t.set_header(header.to_vec());
        t
    };
    let mut t = table(&["broker", "address", "pid", "topics [partitions held]"]);
    for b in &brokers {
        let topics: Vec<String> = b.topics.iter().map(|(t, n)| format!("{t} {n:?}")).collect();
        t.add_row([b.id.clone(), b.addr(), b.pid.to_string(), topics.join(", ")]);
    }
    writeln!(out, "{t}")?;
    let mut t = table(&["group", "member", "pid", "topics"]);
    for (group, m) in &members {
        t.add_row([group.clone(), m.member.clone(), m.pid.to_string(), m.topics.join(", ")]);
    }
    writeln!(out, "{t}")?;
    let mut t = table(&["group", "topic", "partition", "owner", "committed", "end", "lag"]);
    for r in &rows {
        let committed = match &r.committed {
            Ok(c) => c.to_string(),
            Err(e) => e.clone(),
        };
        let lag = match (&r.committed, r.end) {
            (Ok(c), Some(e)) => e.saturating_sub(*c).to_string(),
            _ => "?".into(),
        };
        t.add_row([
            r.group.clone(),
            r.topic.clone(),
            r.partition.to_string(),
            r.owner.clone().unwrap_or_else(|| "-".into()),
            committed,
            r.end.map_or_else(|| "?".into(), |e| e.to_string()),
            lag,
        ]);
    }
    writeln!(out, "{t}")?;
    Ok(())
}
