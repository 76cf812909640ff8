//! The independent checker of `examples/nemesis.sh`: after the soak, with
//! every broker stopped, it reads each replica's log from its files
//! (read-only, through the library's read API, every batch's and record's
//! CRC checked) and judges what the clients were told against what the
//! replicas hold, trusting nothing the brokers say about themselves.
//!
//! ```sh
//! cargo run --release --example nemesis_check -- [--duplicates-allowed] WORK [TOPIC]
//! ```
//!
//! `WORK` is the soak's directory: `data*/` (the brokers' data
//! directories), `acks.jsonl` (the producer's `--report`: every record a
//! leader acknowledged with `--acks all`), `consumed` (the consumer's
//! `partition offset value` lines, printed as it read, throughout the
//! soak) and `events` (the nemesis's faults and the leader changes it saw,
//! one per line, its first word the kind). `TOPIC` defaults to `t`.
//!
//! Violations, each counted, the first few printed:
//!
//! 1. **lost**: an acknowledged record that no replica holds at its offset
//!    with its value, and **missing**: one that some replica does not;
//! 2. **conflicting offsets**: an offset that two replicas hold with
//!    different values;
//! 3. **consumer mismatches**: a line the consumer printed whose offset
//!    a replica holds with another value, or none holds (it saw a value
//!    that later changed or vanished), and a consumer offset that did not
//!    increase (printed twice, or went back);
//! 4. **duplicates**: a value a replica holds at two offsets (a record
//!    stored twice: the producer is idempotent by default, so that none
//!    is; `--duplicates-allowed` counts them without calling them
//!    violations, for a producer run with `--no-idempotence`);
//! 5. **damage left**: a replica whose log still holds damage (found by
//!    opening it, or by reading it: a batch whose CRC fails ends what it
//!    holds), or a refetch mark (the soak ends once every ISR is full:
//!    every replica healed).
//!
//! Exit 0 when there is none, 1 otherwise, 2 when the files cannot be
//! read.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use klog::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};
use klog::storage::fs::RealFs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::Batch;
use klog::storage::refetch;

/// Records by partition, each as (offset, value), in the order read.
type ByPartition = BTreeMap<u32, Vec<(u64, Vec<u8>)>>;

/// How many examples of each violation are printed.
const EXAMPLES_MAX: usize = 5;

/// One replica of one partition: its records by offset, in order.
struct Replica {
    /// The data directory's name (`data0`...).
    name: String,
    records: Vec<(u64, Vec<u8>)>,
}

impl Replica {
    fn get(&self, offset: u64) -> Option<&[u8]> {
        self.records
            .binary_search_by_key(&offset, |(o, _)| *o)
            .ok()
            .map(|i| self.records[i].1.as_slice())
    }

    fn end(&self) -> u64 {
        self.records.last().map_or(0, |(o, _)| o + 1)
    }
}

/// The violations found, counted and with a few examples each.
#[derive(Default)]
struct Verdict {
    lost: Vec<String>,
    lost_count: u64,
    missing: Vec<String>,
    missing_count: u64,
    conflicts: Vec<String>,
    conflict_count: u64,
    mismatches: Vec<String>,
    mismatch_count: u64,
    duplicates: Vec<String>,
    duplicate_count: u64,
    /// Duplicates are counted, and no violation.
    duplicates_allowed: bool,
    damage: Vec<String>,
}

impl Verdict {
    fn note(list: &mut Vec<String>, count: &mut u64, what: String) {
        *count += 1;
        if list.len() < EXAMPLES_MAX {
            list.push(what);
        }
    }

    fn clean(&self) -> bool {
        self.lost_count == 0
            && self.missing_count == 0
            && self.conflict_count == 0
            && self.mismatch_count == 0
            && (self.duplicate_count == 0 || self.duplicates_allowed)
            && self.damage.is_empty()
    }
}

/// Figures for the closing lines.
#[derive(Default)]
struct Figures {
    acknowledged: u64,
    checked: u64,
    consumed: u64,
    offsets_shared: u64,
    records_held: u64,
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let duplicates_allowed = args.first().is_some_and(|a| a == "--duplicates-allowed");
    if duplicates_allowed {
        args.remove(0);
    }
    if args.is_empty() || args.len() > 2 {
        eprintln!("usage: nemesis_check [--duplicates-allowed] WORK [TOPIC]");
        return ExitCode::from(2);
    }
    let topic = args.get(1).map_or("t", String::as_str);
    match run(Path::new(&args[0]), topic, duplicates_allowed) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(work: &Path, topic: &str, duplicates_allowed: bool) -> anyhow::Result<bool> {
    let data_dirs = data_dirs(work)?;
    let acks = read_acks(&work.join("acks.jsonl"), topic)?;
    let consumed = read_consumed(&work.join("consumed"))?;
    let partitions = partitions(&data_dirs, topic)?;
    let mut verdict = Verdict {
        duplicates_allowed,
        ..Verdict::default()
    };
    let mut figures = Figures::default();
    for &p in &partitions {
        let mut replicas = Vec::new();
        for dir in &data_dirs {
            let replica = read_replica(dir, &dir.join(format!("{topic}-{p}")), &mut verdict)?;
            figures.records_held += replica.records.len() as u64;
            replicas.push(replica);
        }
        let ends: Vec<String> = replicas
            .iter()
            .map(|r| format!("{} {}", r.name, r.end()))
            .collect();
        println!("% {topic}-{p}: replicas end at {}", ends.join(", "));
        check_conflicts(p, &replicas, &mut verdict, &mut figures);
        check_duplicates(p, &replicas, &mut verdict);
        let no_acks = Vec::new();
        for (offset, value) in acks.get(&p).unwrap_or(&no_acks) {
            figures.acknowledged += 1;
            check_ack(p, *offset, value, &replicas, &mut verdict);
            figures.checked += 1;
        }
        let no_lines = Vec::new();
        let lines = consumed.get(&p).unwrap_or(&no_lines);
        figures.consumed += lines.len() as u64;
        check_consumed(p, lines, &replicas, &mut verdict);
    }
    for p in acks.keys().chain(consumed.keys()) {
        if !partitions.contains(p) {
            bail!("{topic}-{p} was acknowledged or consumed, and no replica has a directory");
        }
    }
    print_events(&work.join("events"))?;
    print_figures(&figures, &verdict, data_dirs.len(), partitions.len());
    Ok(verdict.clean())
}

/// The soak's data directories, `data*`, sorted.
fn data_dirs(work: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in fs::read_dir(work).with_context(|| format!("read {}", work.display()))? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with("data") && entry.path().is_dir() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    if dirs.len() < 2 {
        bail!(
            "{} holds {} data directories: no replicas to compare",
            work.display(),
            dirs.len()
        );
    }
    Ok(dirs)
}

/// The partitions of `topic` any data directory holds.
fn partitions(data_dirs: &[PathBuf], topic: &str) -> anyhow::Result<Vec<u32>> {
    let mut found = std::collections::BTreeSet::new();
    let prefix = format!("{topic}-");
    for dir in data_dirs {
        for entry in fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if let Some(p) = name.strip_prefix(&prefix).and_then(|p| p.parse().ok()) {
                found.insert(p);
            }
        }
    }
    if found.is_empty() {
        bail!("no data directory holds a partition of {topic}");
    }
    Ok(found.into_iter().collect())
}

/// Every record of the log in `dir` from its start, each batch decoded
/// whole and each record's CRC checked; a replica with no directory holds
/// nothing. Damage that ends the log early, and a refetch mark, are noted.
fn read_replica(data_dir: &Path, dir: &Path, verdict: &mut Verdict) -> anyhow::Result<Replica> {
    let name = data_dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut replica = Replica {
        name,
        records: Vec::new(),
    };
    if !dir.exists() {
        return Ok(replica);
    }
    let options = OpenOptions {
        writable: false,
        lock: false,
    };
    let log = Log::open(Arc::new(RealFs), dir, LogConfig::default(), options)
        .with_context(|| format!("open {}", dir.display()))?;
    if let Some(damage) = &log.recovery().damage {
        verdict
            .damage
            .push(format!("{}: {}", dir.display(), damage.error()));
    }
    if let Some(mark) = refetch::read(&RealFs, dir)? {
        verdict.damage.push(format!(
            "{}: still marked for refetch ({mark:?})",
            dir.display()
        ));
    }
    if let Err(e) = read_records(&log, &mut replica.records) {
        // A reader stops there; what follows counts as not held.
        verdict.damage.push(format!("{}: {e:#}", dir.display()));
    }
    Ok(replica)
}

/// Appends every record of `log` to `records`, up to its end or the first
/// batch or record whose CRC fails.
fn read_records(log: &Log, records: &mut Vec<(u64, Vec<u8>)>) -> anyhow::Result<()> {
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    while let Some(slice) = log.read(offset, 1 << 20)? {
        slice.read_into(&mut buf)?;
        let mut at = 0;
        while let Ok(batch) = Batch::decode(slice.format, &buf[at..], BATCH_BYTES_MAX) {
            at += batch.total_bytes();
            if batch.header.base_offset < offset {
                continue;
            }
            for record in batch.records(RECORD_BYTES_MAX_LIMIT) {
                let record = record.with_context(|| format!("the batch at offset {offset}"))?;
                records.push((record.offset, record.value.to_vec()));
            }
            offset = batch.header.last_offset() + 1;
        }
        if at == 0 {
            bail!("no whole batch at offset {offset}");
        }
    }
    Ok(())
}

/// (2): no offset held by two replicas with different values.
fn check_conflicts(p: u32, replicas: &[Replica], verdict: &mut Verdict, figures: &mut Figures) {
    let mut at = vec![0usize; replicas.len()];
    // A merge of the replicas' sorted record lists, one offset at a time.
    loop {
        let next = replicas
            .iter()
            .zip(&at)
            .filter_map(|(r, &i)| r.records.get(i).map(|(o, _)| *o))
            .min();
        let Some(offset) = next else { break };
        let mut held: Vec<(&str, &[u8])> = Vec::new();
        for (r, i) in replicas.iter().zip(at.iter_mut()) {
            if let Some((o, v)) = r.records.get(*i) {
                if *o == offset {
                    held.push((r.name.as_str(), v.as_slice()));
                    *i += 1;
                }
            }
        }
        if held.len() > 1 {
            figures.offsets_shared += 1;
            if held.iter().any(|(_, v)| *v != held[0].1) {
                let all: Vec<String> = held
                    .iter()
                    .map(|(n, v)| format!("{n}={}", show(v)))
                    .collect();
                let what = format!("p{p} offset {offset}: {}", all.join(" "));
                Verdict::note(&mut verdict.conflicts, &mut verdict.conflict_count, what);
            }
        }
    }
}

/// (4): no replica holds a value at two offsets.
fn check_duplicates(p: u32, replicas: &[Replica], verdict: &mut Verdict) {
    for r in replicas {
        let mut first_at = std::collections::HashMap::with_capacity(r.records.len());
        for (offset, value) in &r.records {
            if let Some(first) = first_at.insert(value.as_slice(), *offset) {
                let what = format!(
                    "p{p} {}: {} at offsets {first} and {offset}",
                    r.name,
                    show(value)
                );
                Verdict::note(&mut verdict.duplicates, &mut verdict.duplicate_count, what);
            }
        }
    }
}

/// (1): an acknowledged record is held at its offset, with its value, by
/// every replica.
fn check_ack(p: u32, offset: u64, value: &[u8], replicas: &[Replica], verdict: &mut Verdict) {
    let wrong: Vec<String> = replicas
        .iter()
        .filter(|r| r.get(offset) != Some(value))
        .map(|r| format!("{}={}", r.name, r.get(offset).map_or("(none)".into(), show)))
        .collect();
    let what = || {
        format!(
            "p{p} offset {offset} acknowledged {}: {}",
            show(value),
            wrong.join(" ")
        )
    };
    if wrong.len() == replicas.len() {
        Verdict::note(&mut verdict.lost, &mut verdict.lost_count, what());
    } else if !wrong.is_empty() {
        Verdict::note(&mut verdict.missing, &mut verdict.missing_count, what());
    }
}

/// (3): every line the consumer printed is what the replicas hold, and its
/// offsets only increase.
fn check_consumed(p: u32, lines: &[(u64, Vec<u8>)], replicas: &[Replica], verdict: &mut Verdict) {
    let mut last: Option<u64> = None;
    for (offset, value) in lines {
        if last.is_some_and(|l| *offset <= l) {
            let what = format!(
                "p{p}: offset {offset} printed after offset {}",
                last.unwrap_or(0)
            );
            Verdict::note(&mut verdict.mismatches, &mut verdict.mismatch_count, what);
        }
        last = Some(*offset);
        // Another value, or none anywhere (a replica that lacks it is
        // counted as missing, when it was acknowledged).
        let held: Vec<Option<&[u8]>> = replicas.iter().map(|r| r.get(*offset)).collect();
        let other = held
            .iter()
            .any(|v| v.is_some_and(|v| v != value.as_slice()));
        if other || held.iter().all(Option::is_none) {
            let wrong: Vec<String> = replicas
                .iter()
                .zip(&held)
                .map(|(r, v)| format!("{}={}", r.name, v.map_or("(none)".into(), show)))
                .collect();
            let what = format!(
                "p{p} offset {offset} consumed {}: {}",
                show(value),
                wrong.join(" ")
            );
            Verdict::note(&mut verdict.mismatches, &mut verdict.mismatch_count, what);
        }
    }
}

/// The producer's report: each acknowledged record of `topic` by
/// partition, as (offset, value). A last line cut short (the producer
/// killed while writing it) is left out and said.
fn read_acks(path: &Path, topic: &str) -> anyhow::Result<ByPartition> {
    use base64::Engine;
    let text = fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut acks = ByPartition::new();
    for (n, line) in complete_lines(&text, path) {
        let ack: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{n}: not a JSON line", path.display()))?;
        let field = |name: &str| ack[name].clone();
        if field("topic").as_str() != Some(topic) {
            continue;
        }
        let (Some(p), Some(offset), Some(value)) = (
            field("partition").as_u64(),
            field("offset").as_u64(),
            field("value").as_str().map(str::to_string),
        ) else {
            bail!("{}:{n}: no partition, offset or value", path.display());
        };
        let value = if field("value_encoding").as_str() == Some("base64") {
            base64::engine::general_purpose::STANDARD.decode(value)?
        } else {
            value.into_bytes()
        };
        acks.entry(u32::try_from(p)?)
            .or_default()
            .push((offset, value));
    }
    Ok(acks)
}

/// The consumer's `partition offset value` lines, by partition.
fn read_consumed(path: &Path) -> anyhow::Result<ByPartition> {
    let text = fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut consumed = ByPartition::new();
    for (n, line) in complete_lines(&text, path) {
        let mut words = line.splitn(3, ' ');
        let (Some(p), Some(offset), Some(value)) = (words.next(), words.next(), words.next())
        else {
            bail!(
                "{}:{n}: not `partition offset value`: {line:?}",
                path.display()
            );
        };
        let p: u32 = p
            .parse()
            .with_context(|| format!("{}:{n}", path.display()))?;
        let offset: u64 = offset
            .parse()
            .with_context(|| format!("{}:{n}", path.display()))?;
        consumed
            .entry(p)
            .or_default()
            .push((offset, value.as_bytes().to_vec()));
    }
    Ok(consumed)
}

/// The lines of `text` that end in a newline, numbered from 1.
fn complete_lines<'a>(text: &'a str, path: &Path) -> impl Iterator<Item = (usize, &'a str)> {
    let whole = match text.rfind('\n') {
        Some(end) => &text[..end + 1],
        None => "",
    };
    if whole.len() < text.len() {
        println!(
            "% {}: its last line is cut short, and left out",
            path.display()
        );
    }
    whole.lines().enumerate().map(|(i, l)| (i + 1, l))
}

/// Counts the nemesis's events by kind (the first word of each line).
fn print_events(path: &Path) -> anyhow::Result<()> {
    let text = fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for line in text.lines() {
        if let Some(kind) = line.split_whitespace().next() {
            *kinds.entry(kind).or_default() += 1;
        }
    }
    let leader_changes = kinds.remove("leader").unwrap_or(0);
    let faults: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!("% leader changes: {leader_changes}");
    println!(
        "% faults: {}",
        if faults.is_empty() {
            "none".into()
        } else {
            faults.join(", ")
        }
    );
    Ok(())
}

fn print_figures(figures: &Figures, verdict: &Verdict, replicas: usize, partitions: usize) {
    println!(
        "% replicas read: {replicas} of each of {partitions} partition(s), {} records held, {} offsets held by more than one",
        figures.records_held, figures.offsets_shared
    );
    println!("% records acknowledged: {}", figures.acknowledged);
    println!("% records checked on every replica: {}", figures.checked);
    println!("% lost (held by no replica): {}", verdict.lost_count);
    println!("% missing from a replica: {}", verdict.missing_count);
    println!("% conflicting offsets: {}", verdict.conflict_count);
    println!("% consumer lines: {}", figures.consumed);
    println!("% consumer mismatches: {}", verdict.mismatch_count);
    let allowed = match verdict.duplicates_allowed {
        true => " (allowed)",
        false => "",
    };
    println!(
        "% values held twice by a replica: {}{allowed}",
        verdict.duplicate_count
    );
    println!(
        "% replicas left damaged or marked: {}",
        verdict.damage.len()
    );
    let lists = [
        ("lost", &verdict.lost),
        ("missing", &verdict.missing),
        ("conflicting", &verdict.conflicts),
        ("consumer mismatch", &verdict.mismatches),
        ("duplicate", &verdict.duplicates),
        ("damage left", &verdict.damage),
    ];
    for (what, list) in lists {
        for example in list {
            match what == "duplicate" && verdict.duplicates_allowed {
                true => println!("% {what}: {example}"),
                false => eprintln!("error: {what}: {example}"),
            }
        }
    }
    if verdict.clean() {
        println!("% no violation");
    }
}

/// A value as text, for a message.
fn show(value: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(value))
}
