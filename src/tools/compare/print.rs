//! `klog-dump --compare`'s table, JSON lines and verdict.

use std::io::Write;

use serde_json::json;

use super::Comparison;
use crate::storage::epoch::EpochEntry;

/// `1@0, 3@120`: each epoch at its start offset; or why there are none.
fn epochs_cell(epochs: &std::result::Result<Vec<EpochEntry>, String>) -> String {
    match epochs {
        Ok(e) if e.is_empty() => "none".into(),
        Ok(e) => {
            let each: Vec<String> = e
                .iter()
                .map(|e| format!("{}@{}", e.epoch, e.start_offset))
                .collect();
            each.join(", ")
        }
        Err(why) => why.clone(),
    }
}

/// The verdict, in one line.
fn verdict(c: &Comparison) -> String {
    let high_watermark = match c.high_watermark_given {
        true => format!("the high watermark {}", c.high_watermark),
        false => format!("the high watermark {}, the lowest end", c.high_watermark),
    };
    match &c.difference {
        Some(d) if c.below_high_watermark() => format!(
            "the replicas differ at offset {}, below {high_watermark}",
            d.offset
        ),
        _ if c.compacted => format!(
            "{} compacted replicas agree below offset {} ({high_watermark}), compared from offset \
             {}: each cleans on its own, and every record two of them hold at an offset is the same",
            c.replicas.len(),
            c.high_watermark,
            c.compared_from
        ),
        _ => format!(
            "{} replicas identical below offset {} ({high_watermark}), compared from offset {}",
            c.replicas.len(),
            c.high_watermark,
            c.compared_from
        ),
    }
}

pub(super) fn print_text(out: &mut impl Write, c: &Comparison) -> anyhow::Result<()> {
    let mut t = crate::tools::table(&["replica", "start", "end", "tail", "leader epochs"]);
    for r in &c.replicas {
        let tail = match r.tail.reason() {
            Some(why) => format!("{}: {why}", r.tail.name()),
            None => r.tail.name().to_string(),
        };
        t.add_row([
            r.path.display().to_string(),
            r.start_offset.to_string(),
            r.end_offset.to_string(),
            tail,
            epochs_cell(&r.epochs),
        ]);
    }
    writeln!(out, "{t}")?;
    writeln!(out, "{}", verdict(c))?;
    Ok(())
}

pub(super) fn print_json(out: &mut impl Write, c: &Comparison) -> anyhow::Result<()> {
    for r in &c.replicas {
        let epochs: Option<Vec<[u64; 2]>> = r.epochs.as_ref().ok().map(|e| {
            e.iter()
                .map(|e| [u64::from(e.epoch), e.start_offset])
                .collect()
        });
        let line = json!({"type": "replica", "path": r.path, "start_offset": r.start_offset,
            "end_offset": r.end_offset, "tail": r.tail.name(), "tail_reason": r.tail.reason(),
            "leader_epochs": epochs, "leader_epochs_error": r.epochs.as_ref().err(),
            "writer_pid": r.writer_pid});
        writeln!(out, "{line}")?;
    }
    let d = c.difference.as_ref();
    let line = json!({"type": "comparison", "replicas": c.replicas.len(),
        "compared_from": c.compared_from, "high_watermark": c.high_watermark,
        "high_watermark_from": if c.high_watermark_given { "given" } else { "lowest end" },
        "identical": c.problems().is_empty(),
        "first_difference": d.map(|d| d.offset),
        "below_high_watermark": d.map(|_| c.below_high_watermark()),
        "compacted": c.compacted,
        "difference": d.map(|d| &d.what)});
    writeln!(out, "{line}")?;
    Ok(())
}
