use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::limits;
use crate::storage::batches::Batches;
use crate::storage::fs::sim::SimFs;
use crate::storage::log::{LogConfig, OpenOptions};
use crate::storage::record::{BatchBuilder, Codec, Decompressed};

const DIR: &str = "/p";
const DAY_MS: i64 = 24 * 3600 * 1000;
/// The time the log is written at; cleaned a week later.
const T0: i64 = 1_700_000_000_000;
const NOW: i64 = T0 + 7 * DAY_MS;

/// One record as read: (key, value; `None` a tombstone).
type Rec = (Option<Vec<u8>>, Option<Vec<u8>>);

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        retention_ms: None,
        delete: false,
        compact: true,
        ..LogConfig::default()
    }
}

fn open(sim: &SimFs) -> Log {
    open_with(sim, config())
}

fn open_with(sim: &SimFs, config: LogConfig) -> Log {
    let options = OpenOptions {
        writable: true,
        lock: false,
    };
    Log::open(Arc::new(sim.clone()), Path::new(DIR), config, options).unwrap()
}

/// Appends `records` as one batch (compressed with `codec`) at `at_ms`.
/// A record to append: key and value, either null.
type New<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

fn append(log: &mut Log, codec: Codec, records: &[New<'_>], at_ms: i64) {
    let mut b = BatchBuilder::compressed(codec, None);
    for (key, value) in records {
        b.push_nullable(at_ms, *key, &[], *value);
    }
    log.append(&mut b.finish().to_vec(), at_ms).unwrap();
}

/// A log of 10 keys updated `rounds` times each (others in the first half), in batches of one to three
/// records (some compressed), with a record without a key, key 3 deleted
/// long ago and key 4 deleted lately, over several segments; then one
/// more segment, so that all of it is closed.
fn write_log(sim: &SimFs, rounds: u32) -> Log {
    sim.create_dir_all_durable(Path::new(DIR));
    sim.set_clock_ms(T0);
    let mut log = open(sim);
    let codecs = [Codec::None, Codec::Gzip, Codec::None, Codec::Lz4];
    for round in 0..rounds {
        // The keys of the first half are others than the second's.
        let era = if round < rounds / 2 { "a" } else { "k" };
        for k in 0..10u32 {
            let key = format!("{era}{k}");
            let value = format!("v{k}-{round}");
            let n = 1 + (round + k) as usize % 3;
            let records: Vec<_> = (0..n)
                .map(|_| (Some(key.as_bytes()), Some(value.as_bytes())))
                .collect();
            append(&mut log, codecs[(round + k) as usize % 4], &records, T0);
        }
        if round == 5 {
            // Written before the topic was compacted: a compacted log
            // takes records with keys only.
            let deleting = LogConfig {
                compact: false,
                ..config()
            };
            log.set_policy(&deleting).unwrap();
            append(&mut log, Codec::None, &[(None, Some(b"no key"))], T0);
            log.set_policy(&config()).unwrap();
            append(&mut log, Codec::None, &[(Some(b"k3"), None)], T0);
            append(&mut log, Codec::None, &[(Some(b"gone"), Some(b"v"))], T0);
        }
        if round == 6 {
            append(&mut log, Codec::None, &[(Some(b"gone"), None)], T0);
        }
    }
    // Key 3 written again after its delete, key 5 deleted lately.
    sim.set_clock_ms(NOW - 1000);
    append(&mut log, Codec::None, &[(Some(b"k5"), None)], NOW - 1000);
    log.roll().unwrap();
    append(
        &mut log,
        Codec::None,
        &[(Some(b"tail"), Some(b"t"))],
        NOW - 1000,
    );
    log.flush().unwrap();
    log
}

/// Every record from the log's start: offset, key and value.
fn read_all(log: &Log) -> BTreeMap<u64, Rec> {
    let mut out = BTreeMap::new();
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    let mut scratch = Decompressed::default();
    while let Some(slice) = log.read(offset, 1 << 20).unwrap() {
        slice.read_into(&mut buf).unwrap();
        for step in Batches::new(slice.format, &buf, limits::BATCH_BYTES_MAX) {
            let (_, batch) = step.unwrap();
            let records = batch.records_in(&mut scratch, u32::MAX).unwrap();
            for r in records {
                let r = r.unwrap();
                let value = (!r.null_value).then(|| r.value.to_vec());
                assert!(out
                    .insert(r.offset, (r.key.map(<[u8]>::to_vec), value))
                    .is_none());
            }
            offset = batch.header.next_offset();
        }
    }
    out
}

/// The table a consumer from the start builds: each key's latest value,
/// deleted keys out.
fn table(records: &BTreeMap<u64, Rec>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut table = BTreeMap::new();
    for (key, value) in records.values() {
        let Some(key) = key else { continue };
        match value {
            Some(v) => table.insert(key.clone(), v.clone()),
            None => table.remove(key),
        };
    }
    table
}

/// One pass, committed and finished; what it replaced (bytes before, after).
fn clean(log: &mut Log, map: &mut OffsetMap) -> Option<(u64, u64)> {
    clean_at(log, map, NOW)
}

/// [`clean`] at `now_ms`.
fn clean_at(log: &mut Log, map: &mut OffsetMap, now_ms: i64) -> Option<(u64, u64)> {
    let plan = log.clean_plan(u64::MAX, now_ms).unwrap()?;
    let cleaned = plan.run(map, &mut |_| true).unwrap()?;
    let sizes = cleaned.sizes();
    let swapped = log.commit_clean(cleaned).unwrap();
    assert!(swapped.swapped());
    swapped.finish().unwrap();
    Some(sizes)
}

/// Checks that `after` is `before` compacted: every record kept is the
/// one at its offset before, the table is the same, below `cleaned` no
/// key appears twice, and the tombstones left are those of `tombstones`.
fn check_compacted(
    before: &BTreeMap<u64, Rec>,
    after: &BTreeMap<u64, Rec>,
    cleaned: u64,
    tombstones: &[&[u8]],
) {
    for (offset, record) in after {
        assert_eq!(before.get(offset), Some(record), "offset {offset}");
    }
    assert_eq!(table(after), table(before));
    let mut seen = std::collections::HashSet::new();
    for (offset, (key, _)) in after.range(..cleaned) {
        if let Some(key) = key {
            assert!(
                seen.insert(key.clone()),
                "{key:?} twice below {cleaned}, at {offset}"
            );
        }
    }
    assert!(
        after.values().any(|(k, _)| k.is_none()),
        "the record without a key stays"
    );
    let left: Vec<_> = after
        .values()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| k.clone().unwrap())
        .collect();
    assert_eq!(left, tombstones);
}

/// The tombstones a first clean keeps: k3's is not its key's latest,
/// k5's is young, and gone's, written a week before, stays too: a
/// tombstone never goes at the first clean that sees it.
const FIRST: &[&[u8]] = &[b"gone", b"k5"];

#[test]
fn keys_updated_many_times_keep_only_their_latest_record() {
    let sim = SimFs::new();
    let mut log = write_log(&sim, 60);
    let before = read_all(&log);
    let next = log.next_offset();
    let mut map = OffsetMap::with_memory(1 << 20);
    let (bytes_before, bytes_after) = clean(&mut log, &mut map).unwrap();
    assert!(
        bytes_after * 10 < bytes_before,
        "{bytes_before} -> {bytes_after}"
    );
    let after = read_all(&log);
    check_compacted(&before, &after, log.cleaned_to(), FIRST);
    assert_eq!(log.cleaned_to(), log.segments().last().unwrap().base_offset);
    assert_eq!(log.next_offset(), next, "offsets never change");
    // Nothing more to do until more is written.
    assert!(clean(&mut log, &mut map).is_none());
    // Written again, cleaned again two days later: the tombstones, cleaned
    // a day before, go with the keys they deleted.
    append(&mut log, Codec::None, &[(Some(b"k0"), Some(b"again"))], NOW);
    log.roll().unwrap();
    append(&mut log, Codec::None, &[(Some(b"tail"), Some(b"t"))], NOW);
    let before = read_all(&log);
    clean_at(&mut log, &mut map, NOW + 2 * DAY_MS).unwrap();
    let after = read_all(&log);
    check_compacted(&before, &after, log.cleaned_to(), &[]);
    assert_eq!(
        table(&after).get(b"k0".as_slice()),
        Some(&b"again".to_vec())
    );
    // A clean close and a power cut both open the same log.
    log.close().unwrap();
    let log = open(&sim);
    assert_eq!(read_all(&log), after);
    assert_eq!(log.cleaned_to(), log.segments().last().unwrap().base_offset);
    sim.crash(&mut |n| n);
    assert_eq!(read_all(&open(&sim)), after);
}

#[test]
fn a_small_map_cleans_in_several_passes_to_the_same_table() {
    let sim = SimFs::new();
    let mut log = write_log(&sim, 60);
    let before = read_all(&log);
    let segments = log.segments().count();
    // Room for 12 keys: the first pass maps the first half's and stops
    // in the second's.
    let mut map = OffsetMap::with_memory(14 * SLOT_BYTES);
    let mut passes = 0;
    while clean(&mut log, &mut map).is_some() {
        passes += 1;
        let after = read_all(&log);
        assert_eq!(table(&after), table(&before), "after pass {passes}");
        assert!(passes < 10);
    }
    assert_eq!(passes, 2);
    assert!(
        log.segments().count() < segments,
        "segments cleaned again are cleaned together"
    );
    let after = read_all(&log);
    check_compacted(&before, &after, log.cleaned_to(), FIRST);
}

#[test]
fn a_clean_whose_segments_changed_meanwhile_commits_nothing() {
    let sim = SimFs::new();
    let mut log = write_log(&sim, 60);
    let before = read_all(&log);
    let plan = log.clean_plan(u64::MAX, NOW).unwrap().unwrap();
    let cleaned = plan
        .run(&mut OffsetMap::with_memory(1 << 20), &mut |_| true)
        .unwrap()
        .unwrap();
    // DeleteRecords and retention take the first segment meanwhile.
    let second = log.segments().nth(1).unwrap().base_offset;
    log.delete_records_before(second).unwrap();
    let expired = log.take_expired(NOW);
    expired.delete().unwrap();
    let swapped = log.commit_clean(cleaned).unwrap();
    assert!(!swapped.swapped());
    swapped.finish().unwrap();
    let files = sim.files();
    assert!(
        files
            .keys()
            .all(|p| !p.to_string_lossy().contains(".cleaned.")),
        "{files:?}"
    );
    let after = read_all(&log);
    assert_eq!(
        after,
        before
            .range(second..)
            .map(|(o, r)| (*o, r.clone()))
            .collect()
    );
}

#[test]
fn a_stopped_pass_leaves_nothing_behind() {
    let sim = SimFs::new();
    let log = write_log(&sim, 60);
    let plan = log.clean_plan(u64::MAX, NOW).unwrap().unwrap();
    let mut budget = 20_000u64;
    let mut pace = |bytes: u64| {
        budget = budget.saturating_sub(bytes);
        budget > 0
    };
    assert!(plan
        .run(&mut OffsetMap::with_memory(1 << 20), &mut pace)
        .unwrap()
        .is_none());
    assert!(sim
        .files()
        .keys()
        .all(|p| !p.to_string_lossy().contains(".cleaned.")));
}

/// A file system holding `sim`'s files, durably, with their times.
fn copy(sim: &SimFs) -> SimFs {
    let copy = SimFs::new();
    copy.create_dir_all_durable(Path::new(DIR));
    for (path, bytes) in sim.files() {
        copy.write(&path, &bytes);
        let ms = sim.open_read(&path).unwrap().modified_ms().unwrap();
        copy.open(&path, false)
            .unwrap()
            .set_modified_ms(ms)
            .unwrap();
    }
    copy.set_clock_ms(NOW);
    copy
}

#[test]
fn a_power_cut_at_any_step_of_a_clean_leaves_the_old_log_or_the_cleaned_one() {
    let written = SimFs::new();
    let reference = write_log(&written, 14);
    let before = read_all(&reference);
    let next = reference.next_offset();
    reference.close().unwrap();
    let mut steps = 0;
    let mut replaced_left = false;
    for n in 0.. {
        let sim = copy(&written);
        let mut log = open(&sim);
        // Segments of a megabyte from now on: the pass cleans them together.
        let merged = LogConfig {
            segment_bytes: 1 << 20,
            ..config()
        };
        log.set_policy(&merged).unwrap();
        sim.cut_power_after(n);
        let done = (|| -> Result<bool> {
            let Some(plan) = log.clean_plan(u64::MAX, NOW)? else {
                return Ok(false);
            };
            let Some(cleaned) = plan.run(&mut OffsetMap::with_memory(1 << 20), &mut |_| true)?
            else {
                return Ok(false);
            };
            log.commit_clean(cleaned)?.finish()?;
            Ok(true)
        })();
        drop(log);
        sim.crash(&mut |len| len / 2);
        sim.restore_power();
        let log = open(&sim);
        let after = read_all(&log);
        replaced_left |= log
            .recovery()
            .removed
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "log"));
        for (offset, record) in &after {
            assert_eq!(
                before.get(offset),
                Some(record),
                "cut after {n}: offset {offset}"
            );
        }
        assert_eq!(table(&after), table(&before), "cut after {n}");
        assert_eq!(log.next_offset(), next, "cut after {n}");
        let names: Vec<String> = sim
            .files()
            .keys()
            .map(|p| p.display().to_string())
            .collect();
        assert!(
            names.iter().all(|p| !p.contains(".cleaned.")),
            "cut after {n}: {names:?}"
        );
        if matches!(done, Ok(true)) {
            check_compacted(&before, &after, log.cleaned_to(), FIRST);
            steps = n;
            break;
        }
    }
    assert!(steps > 10, "{steps} steps");
    assert!(
        replaced_left,
        "some cut left replaced segments for the open to remove"
    );
}

#[test]
fn retention_by_time_goes_past_an_empty_cleaned_segment_after_a_restart() {
    let sim = SimFs::new();
    let mut log = write_log(&sim, 60);
    clean(&mut log, &mut OffsetMap::with_memory(1 << 20)).unwrap();
    log.close().unwrap();
    let mut log = open(&sim);
    let empty = crate::storage::segment::SEGMENT_HEADER_BYTES as u64;
    assert!(
        log.segments().any(|s| s.end.is_some() && s.size == empty),
        "a cleaned segment with no batch left"
    );
    let both = LogConfig {
        delete: true,
        retention_ms: Some(DAY_MS as u64),
        ..config()
    };
    log.set_policy(&both).unwrap();
    let gone = log.take_expired(NOW + 30 * DAY_MS).delete().unwrap();
    assert_eq!(log.segments().count(), 1, "all but the active: {gone:?}");
}

/// Copies `leader`'s batches into `follower` from its next offset on, as
/// a replica fetcher does, until the leader has no more.
fn replicate(leader: &Log, follower: &mut Log) {
    let mut buf = Vec::new();
    while let Some(slice) = leader.read(follower.next_offset(), 4096).unwrap() {
        slice.read_into(&mut buf).unwrap();
        follower.append_replicated(&buf, NOW).unwrap();
    }
}

/// An empty log on a file system of its own.
fn empty_log() -> (SimFs, Log) {
    let sim = SimFs::new();
    sim.create_dir_all_durable(Path::new(DIR));
    sim.set_clock_ms(NOW);
    let log = open(&sim);
    (sim, log)
}

/// A follower takes the gaps of its leader's cleaned log: the same
/// records at the same offsets, ending where the leader ends, after a
/// power cut too; it cleans by itself to the same table.
#[test]
fn a_follower_copies_a_cleaned_log_gaps_and_all() {
    let sim = SimFs::new();
    let mut leader = write_log(&sim, 60);
    let before = read_all(&leader);
    let mut map = OffsetMap::with_memory(1 << 20);
    clean(&mut leader, &mut map).unwrap();
    let cleaned = read_all(&leader);
    assert!(cleaned.len() * 4 < before.len(), "{}", cleaned.len());
    let (follower_sim, mut follower) = empty_log();
    replicate(&leader, &mut follower);
    assert_eq!(follower.next_offset(), leader.next_offset());
    assert_eq!(read_all(&follower), cleaned);
    assert!(follower.segments().any(|s| s.gaps && s.end.is_none()));
    follower.flush().unwrap();
    follower_sim.crash(&mut |_| 0);
    let mut follower = open(&follower_sim);
    assert_eq!(read_all(&follower), cleaned);
    assert_eq!(follower.next_offset(), leader.next_offset());
    // Appends after a restart, and a roll, keep taking gaps.
    append(
        &mut leader,
        Codec::None,
        &[(Some(b"k1"), Some(b"new"))],
        NOW,
    );
    leader.roll().unwrap();
    append(
        &mut leader,
        Codec::None,
        &[(Some(b"k2"), Some(b"new"))],
        NOW,
    );
    replicate(&leader, &mut follower);
    assert_eq!(read_all(&follower), read_all(&leader));
    // The follower's own clean keeps the table.
    follower.roll().unwrap();
    follower.flush().unwrap();
    clean(&mut follower, &mut map).unwrap();
    assert_eq!(table(&read_all(&follower)), table(&read_all(&leader)));
    follower.close().unwrap();
    assert_eq!(
        table(&read_all(&open(&follower_sim))),
        table(&read_all(&leader))
    );
}

/// A truncation to an offset in a gap leaves the log ending at the last
/// batch before it, in a copied segment and in a cleaned one (whose end
/// goes from its header first: a power cut after the cut opens the log
/// where the cut left it, not at the cleaned segment's old end).
#[test]
fn a_truncation_into_a_gap_ends_the_log_at_the_batch_before() {
    let sim = SimFs::new();
    let mut leader = write_log(&sim, 60);
    let mut map = OffsetMap::with_memory(1 << 20);
    clean(&mut leader, &mut map).unwrap();
    // A follower indexing every batch but a segment's first.
    let (follower_sim, _) = empty_log();
    let every_batch = LogConfig {
        index_interval_bytes: 1,
        ..config()
    };
    let mut follower = open_with(&follower_sim, every_batch.clone());
    replicate(&leader, &mut follower);
    follower.flush().unwrap();
    let mut indexed_gaps = 0;
    let logs = [
        (&leader, &sim, config()),
        (&follower, &follower_sim, every_batch),
    ];
    for (log, sim, config) in logs {
        let spans = batch_spans(log);
        let gaps: Vec<(u64, u64)> = spans
            .windows(2)
            .map(|w| (w[0].1, w[1].0))
            .filter(|(end, next_base)| end < next_base)
            .collect();
        // The first gap, and the first before a batch the index names
        // (where the batch before it ends is not in the index).
        let indexed = |base: u64| {
            log.segments().any(|s| {
                s.entries
                    .iter()
                    .any(|e| s.base_offset + u64::from(e.relative_offset) == base)
            })
        };
        let before_indexed = gaps.iter().find(|(_, next_base)| indexed(*next_base));
        let chosen = [gaps.first(), before_indexed].into_iter().flatten();
        // Into the gap, and at the batch after it.
        let cuts = chosen.flat_map(|&(end, next_base)| [(end, next_base - 1), (end, next_base)]);
        for (end, cut) in cuts {
            let sim = copy(sim);
            let mut log = open_with(&sim, config.clone());
            let whole = read_all(&log);
            assert_eq!(log.truncate_to(cut).unwrap(), end);
            assert_eq!(log.next_offset(), end);
            let kept = read_all(&log);
            let expected: BTreeMap<u64, Rec> =
                whole.range(..end).map(|(o, r)| (*o, r.clone())).collect();
            assert_eq!(kept, expected);
            sim.crash(&mut |_| 0);
            let mut reopened = open_with(&sim, config.clone());
            assert_eq!(reopened.next_offset(), end, "after a power cut");
            assert_eq!(read_all(&reopened), kept);
            // Appended to again from there.
            append(
                &mut reopened,
                Codec::None,
                &[(Some(b"k9"), Some(b"x"))],
                NOW,
            );
            assert_eq!(read_all(&reopened).keys().last(), Some(&end));
        }
        indexed_gaps += usize::from(before_indexed.is_some());
    }
    assert!(indexed_gaps > 0, "a gap before an indexed batch");
}

/// The offsets of each batch of `log`: its base and one past its last.
fn batch_spans(log: &Log) -> Vec<(u64, u64)> {
    let mut spans = Vec::new();
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    while let Some(slice) = log.read(offset, 1 << 20).unwrap() {
        slice.read_into(&mut buf).unwrap();
        for step in Batches::new(slice.format, &buf, limits::BATCH_BYTES_MAX) {
            let h = step.unwrap().1.header;
            spans.push((h.base_offset, h.next_offset()));
            offset = h.next_offset();
        }
    }
    spans
}

/// A full disk while a pass writes, and a cleaned segment whose fsync
/// fails (EIO): the pass fails, leaves no file behind and changes
/// nothing; with room again, a clean succeeds.
#[test]
fn a_full_disk_or_a_failed_fsync_fails_the_pass_and_changes_nothing() {
    let sim = SimFs::new();
    let mut log = write_log(&sim, 30);
    let before = read_all(&log);
    let files_before: Vec<PathBuf> = sim.files().into_keys().collect();
    let mut map = OffsetMap::with_memory(1 << 20);
    let cleaned_file = |p: &Path| p.to_string_lossy().contains(".cleaned.");
    for fault in ["full", "eio"] {
        match fault {
            "full" => sim.set_capacity(Some(sim.allocated())),
            _ => sim.fail_next_sync(cleaned_file),
        }
        let plan = log.clean_plan(u64::MAX, NOW).unwrap().unwrap();
        let err = plan.run(&mut map, &mut |_| true).unwrap_err();
        assert!(
            matches!(
                (fault, &err),
                ("full", crate::error::Error::DiskFull { .. })
                    | ("eio", crate::error::Error::Io { .. })
            ),
            "{fault}: {err}"
        );
        sim.set_capacity(None);
        let files: Vec<PathBuf> = sim.files().into_keys().collect();
        assert_eq!(files, files_before, "{fault}: no file left behind");
        assert_eq!(read_all(&log), before, "{fault}");
        assert!(!log.failed(), "{fault}: a failed pass stops nothing");
    }
    clean(&mut log, &mut map).unwrap();
    assert_eq!(table(&read_all(&log)), table(&before));
}

/// The directory's fsync fails while cleaned segments are swapped in:
/// the log stops (only a reopen can tell what the directory holds), and a
/// power cut then opens the old log or the cleaned one, the same table.
#[test]
fn a_failed_directory_fsync_while_swapping_stops_the_log_and_loses_nothing() {
    let sim = SimFs::new();
    let mut log = write_log(&sim, 30);
    let before = read_all(&log);
    let mut map = OffsetMap::with_memory(1 << 20);
    let plan = log.clean_plan(u64::MAX, NOW).unwrap().unwrap();
    let cleaned = plan.run(&mut map, &mut |_| true).unwrap().unwrap();
    sim.fail_next_sync(|p| p == Path::new(DIR));
    assert!(log.commit_clean(cleaned).is_err());
    assert!(log.failed());
    drop(log);
    sim.crash(&mut |_| 0);
    let log = open(&sim);
    let after = read_all(&log);
    assert_eq!(table(&after), table(&before));
    for (offset, record) in &after {
        assert_eq!(before.get(offset), Some(record), "offset {offset}");
    }
}

/// A truncation below where the last clean's map ended lowers the dirty
/// start on disk too: records appended again there are dirty after a
/// restart (a tombstone fetched again stays its retention).
#[test]
fn a_truncation_below_the_cleaned_point_makes_what_follows_dirty_after_a_restart() {
    let sim = SimFs::new();
    let mut log = write_log(&sim, 30);
    let mut map = OffsetMap::with_memory(1 << 20);
    clean(&mut log, &mut map).unwrap();
    let cleaned_to = log.cleaned_to();
    let cut = log.truncate_to(cleaned_to / 2).unwrap();
    let mut k = 0;
    while log.next_offset() <= cleaned_to {
        let key = format!("k{}", k % 10);
        let records = [(Some(key.as_bytes()), Some(b"again".as_slice()))];
        append(&mut log, Codec::None, &records, NOW);
        k += 1;
    }
    log.close().unwrap();
    let log = open(&sim);
    assert!(log.cleaned_to() <= cut, "{} > {cut}", log.cleaned_to());
}

/// The first cleaned segment of a cleaned log, and the segments after it.
fn first_cleaned(log: &Log) -> (u64, u64, Vec<PathBuf>) {
    let first = log.segments().find(|s| s.end.is_some()).unwrap();
    let later = log.segments().filter(|s| s.base_offset > first.base_offset);
    let later = later.map(|s| s.path.clone()).collect();
    (first.base_offset, first.end.unwrap(), later)
}

/// A crash while a cut was under way, after the segments past a cleaned
/// one went and before its header lost its end: the next open goes on
/// at that end, in a new segment, and never appends inside the cleaned
/// one (its records would read as damage).
#[test]
fn a_cleaned_segment_left_last_is_followed_by_a_new_segment() {
    let sim = SimFs::new();
    let mut log = write_log(&sim, 30);
    let mut map = OffsetMap::with_memory(1 << 20);
    clean(&mut log, &mut map).unwrap();
    let (_, end, later) = first_cleaned(&log);
    let kept: BTreeMap<u64, Rec> = read_all(&log)
        .range(..end)
        .map(|(o, r)| (*o, r.clone()))
        .collect();
    log.close().unwrap();
    for path in later {
        for p in [
            path.clone(),
            path.with_extension("index"),
            path.with_extension("timeindex"),
        ] {
            sim.remove(&p).unwrap();
        }
    }
    fs::sync_directory(&sim, Path::new(DIR)).unwrap();
    let mut log = open(&sim);
    assert_eq!(log.next_offset(), end);
    append(&mut log, Codec::None, &[(Some(b"k1"), Some(b"after"))], NOW);
    log.flush().unwrap();
    sim.crash(&mut |_| 0);
    let log = open(&sim);
    let mut expected = kept;
    expected.insert(end, (Some(b"k1".to_vec()), Some(b"after".to_vec())));
    assert_eq!(read_all(&log), expected);
    assert!(log.recovery().segments.iter().all(|s| s.problem.is_none()));
}

/// Damage in a cleaned segment, cut by recovery as `klog-recover` does:
/// the log goes on from the cut, not from the segment's old end (a
/// replica refetches what followed), and what is appended there next
/// reads back whole after a power cut.
#[test]
fn a_cut_of_a_damaged_cleaned_segment_ends_the_log_at_the_cut() {
    let sim = SimFs::new();
    let mut log = write_log(&sim, 30);
    let mut map = OffsetMap::with_memory(1 << 20);
    clean(&mut log, &mut map).unwrap();
    // A cleaned segment of two batches or more, and its middle batch.
    let spans = batch_spans(&log);
    let (path, in_segment) = log
        .segments()
        .filter_map(|s| {
            let end = s.end?;
            let inside: Vec<(u64, u64)> = (spans.iter().copied())
                .filter(|(b, n)| *b >= s.base_offset && *n <= end)
                .collect();
            (inside.len() >= 2).then(|| (s.path.clone(), inside))
        })
        .next()
        .unwrap();
    let (damaged_at, _) = in_segment[in_segment.len() / 2];
    // Where the batch before it ends: where the log goes on.
    let kept_end = in_segment[in_segment.len() / 2 - 1].1;
    log.close().unwrap();
    // Flip a byte of the middle batch's records.
    let mut bytes = sim.read(&path).unwrap();
    let position = {
        let mut at = crate::storage::segment::SEGMENT_HEADER_BYTES;
        loop {
            let h =
                crate::storage::record::BatchHeader::decode(Format::Kafka, &bytes[at..], u32::MAX)
                    .unwrap();
            if h.base_offset == damaged_at {
                break at + h.total_bytes() as usize - 1;
            }
            at += h.total_bytes() as usize;
        }
    };
    bytes[position] ^= 0xff;
    sim.write(&path, &bytes);
    // A reader opens it (klog-consume --data-dir), ending before the
    // damage, and changes nothing.
    let read_only = OpenOptions {
        writable: false,
        lock: false,
    };
    let reader = Log::open(Arc::new(sim.clone()), Path::new(DIR), config(), read_only).unwrap();
    assert!(reader.recovery().damaged());
    drop(reader);
    let options = crate::storage::recover::RecoverOptions {
        full: true,
        dry_run: false,
        automatic: false,
        trust_last: false,
        index_interval_bytes: 256,
    };
    crate::storage::recover::recover_partition(&sim, Path::new(DIR), 0, &options).unwrap();
    let mut log = open(&sim);
    assert_eq!(log.next_offset(), kept_end, "the log goes on from the cut");
    append(&mut log, Codec::None, &[(Some(b"k1"), Some(b"after"))], NOW);
    log.flush().unwrap();
    sim.crash(&mut |_| 0);
    let log = open(&sim);
    assert_eq!(
        read_all(&log).get(&kept_end),
        Some(&(Some(b"k1".to_vec()), Some(b"after".to_vec())))
    );
    assert!(log.recovery().segments.iter().all(|s| s.problem.is_none()));
}
