//! Compacted replicas compared record by record (see [`super`]).

use super::{header, Difference, Walk};
use crate::error::Result;
use crate::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};
use crate::storage::record::Batch;

/// Walks compacted replicas from where their batches stop being the same
/// (each keeps the batches its own cleaner left, at their offsets), batch
/// by batch in base offset order: a record two replicas both hold at an
/// offset, in batches of the same base offset, must be the same in both.
/// A batch or a record one replica holds and another does not is no
/// difference (cleaned there); records in batches that start at other
/// offsets are not compared (batch boundaries are kept by a clean, so
/// replicas that agree have the same ones).
pub(super) fn in_step_compacted(walks: &mut [Walk<'_>]) -> Result<Option<Difference>> {
    loop {
        for w in walks.iter_mut() {
            w.fill()?;
        }
        let bases: Vec<Option<u64>> = walks
            .iter()
            .map(|w| w.head().and_then(header).map(|h| h.base_offset))
            .collect();
        let Some(lowest) = bases.iter().flatten().min().copied() else {
            return Ok(None);
        };
        let holders: Vec<usize> = (0..walks.len())
            .filter(|&i| bases[i] == Some(lowest))
            .collect();
        let records: Vec<Vec<(u64, u64)>> =
            holders.iter().map(|&i| fingerprints(&walks[i])).collect();
        // Every pair: a replica that cleaned a record away says nothing of
        // how the others hold it.
        for (j, ours) in records.iter().enumerate() {
            for (k, theirs) in records.iter().enumerate().skip(j + 1) {
                let clash = theirs.iter().find(|(o, f)| {
                    ours.binary_search_by_key(o, |(x, _)| *x)
                        .is_ok_and(|at| ours[at].1 != *f)
                });
                if let Some((offset, _)) = clash {
                    let (a, b) = (&walks[holders[j]].dir, &walks[holders[k]].dir);
                    return Ok(Some(Difference {
                        offset: *offset,
                        what: format!(
                            "{} against {}: record {offset} differs",
                            b.display(),
                            a.display()
                        ),
                    }));
                }
            }
        }
        for &i in &holders {
            walks[i].advance();
        }
    }
}

/// The records of a walk's head batch: each one's offset and a hash of
/// what it holds (timestamp, key, value, headers; 16 bytes a record, not a
/// copy), or none when they do not decode (the walk's damage is judged
/// apart).
fn fingerprints(walk: &Walk<'_>) -> Vec<(u64, u64)> {
    use std::hash::{Hash, Hasher};
    let Some((format, bytes)) = walk.head() else {
        return Vec::new();
    };
    let Ok(batch) = Batch::decode(format, bytes, BATCH_BYTES_MAX) else {
        return Vec::new();
    };
    let mut scratch = crate::storage::record::Decompressed::default();
    let Ok(records) = batch.records_in(&mut scratch, RECORD_BYTES_MAX_LIMIT) else {
        return Vec::new();
    };
    records
        .filter_map(|r| r.ok())
        .map(|r| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (r.timestamp, r.key, r.value, r.null_value).hash(&mut h);
            for header in r.headers() {
                header.hash(&mut h);
            }
            (r.offset, h.finish())
        })
        .collect()
}
