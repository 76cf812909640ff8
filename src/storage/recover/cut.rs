//! Cutting a segment where its scan stopped: judging the cut bytes (zeros,
//! a short write, pages a power cut lost, or damage), saving them when
//! they may be data, and cutting.

use std::ops::Range;
use std::path::{Path, PathBuf};

use super::scan::{Scan, SegmentFile, Stopped};
use super::{problem, SegmentReport};
use crate::error::{IoContext, Result};
use crate::limits::BATCH_BYTES_MAX;
use crate::storage::fs::{self, VFile, RANGE_CHUNK_BYTES};
use crate::storage::record::{legacy, BatchHeader, DecodeError, Format};

const LEGACY_HEADER_BYTES: usize = legacy::BATCH_HEADER_BYTES;

/// The page size the torn-page rule assumes (the smallest Linux uses).
const PAGE_BYTES: u64 = 4096;

/// Cuts the segment where its scan stopped (or says where it would, and
/// why), keeping the whole records of a torn batch.
pub(super) fn cut(
    seg: &SegmentFile<'_>,
    scan: &mut Scan,
    stopped: &Stopped,
    report: &mut SegmentReport,
) -> Result<()> {
    let cut = Cut::plan(seg, stopped)?;
    // The cut is judged with the whole records a writer keeps of the batch
    // (by rewriting its header). A reader's open changes nothing and reads
    // whole batches only, so its log ends at the batch: it counts none of
    // them (`klog-consume -e` would wait for ever for them otherwise).
    let reader = seg.options.dry_run && seg.options.automatic;
    let (kept_count, end) = if reader {
        (0, cut.position)
    } else {
        (stopped.kept.count, cut.new_len)
    };
    report.problem = Some(problem(
        scan.next_offset + u64::from(kept_count),
        end,
        cut.reason(&stopped.stop.error),
        cut.torn(),
    ));
    report.truncated_bytes = seg.len - end;
    // Opening a log cuts a torn tail of its last segment and nothing else:
    // the caller refuses the partition instead.
    let allowed = !seg.options.automatic || (seg.last && cut.torn());
    // A cleaned segment cut short no longer stands for the offsets up to
    // its end: the log goes on from the cut (a replica refetches what
    // followed), and its header says so first, before the cut. A cut
    // not made (a dry run, a reader's open) leaves the header, and the
    // report, as they are.
    if !seg.options.dry_run && allowed {
        if report.end.take().is_some() {
            let header = crate::storage::segment::encode_gaps_header(report.base_offset);
            seg.file.write_all_at(&header, 0).ctx("write", seg.path)?;
            seg.file.sync_data().ctx("fsync", seg.path)?;
        }
        cut.apply(seg, report)?;
    }
    if let Some((_, header)) = cut.patched.filter(|_| !reader) {
        scan.keep(cut.position, &header, cut.new_len - cut.position)
            .expect("the records of a batch that already passed the checks of keep");
    }
    Ok(())
}

/// Where a segment is cut, and what the cut bytes are.
#[derive(Debug)]
struct Cut {
    /// Position of the batch the scan stopped at.
    position: u64,
    /// The segment's length after the cut: the batch's position, or the end
    /// of the records kept of it.
    new_len: u64,
    /// The batch's header rewritten to cover just the records kept, if any
    /// are.
    patched: Option<([u8; LEGACY_HEADER_BYTES], BatchHeader)>,
    /// The cut bytes are all zeros.
    zeros: bool,
    /// The file ends inside the batch: a short write.
    short: bool,
    /// The batch runs into zero pages at the end of the file: a torn
    /// write (see [`torn_pages`]).
    lost_pages: bool,
}

impl Cut {
    /// Judges the cut at the stop.
    fn plan(seg: &SegmentFile<'_>, stopped: &Stopped) -> Result<Cut> {
        let Stopped {
            stop,
            kept,
            whole_batch,
            ends_early,
        } = stopped;
        let mut new_len = stop.position;
        let mut patched = None;
        // Only a legacy batch keeps some of its records (each has a CRC).
        if kept.count > 0 {
            assert_eq!(seg.format, Format::Legacy, "records kept of a Kafka batch");
            let mut h = [0u8; LEGACY_HEADER_BYTES];
            seg.read_exact_at(&mut h, stop.position)?;
            let records_bytes = u32::try_from(kept.bytes).expect("records of one batch fit u32");
            legacy::set_batch_extent(&mut h, kept.count, records_bytes, kept.max_timestamp);
            let header =
                BatchHeader::decode(Format::Legacy, &h, BATCH_BYTES_MAX).expect("patched header");
            new_len = stop.position + header.header_bytes() as u64 + kept.bytes;
            patched = Some((h, header));
        }
        // The walk judged the bytes from the batch on; when records of it
        // are kept, the cut starts after them.
        let zeros = if new_len == stop.position {
            stop.zeros
        } else {
            fs::is_zero_range(&*seg.file, new_len, seg.len).ctx("read", seg.path)?
        };
        // A walk that stops at a batch running past the end of the file
        // read its header whole and within the format's limit: the bytes
        // cut are fewer than a batch can hold, never a whole run of them.
        let short = !whole_batch && stop.is_truncated();
        // A batch that ends before the zeros did not lose its pages to them.
        let lost_pages =
            !zeros && !short && !ends_early && torn_pages(seg, stop.position, new_len)?;
        Ok(Cut {
            position: stop.position,
            new_len,
            patched,
            zeros,
            short,
            lost_pages,
        })
    }

    /// Whether the cut bytes are a torn tail (a normal crash) rather than
    /// damage.
    fn torn(&self) -> bool {
        self.zeros || self.short || self.lost_pages
    }

    /// Why the bytes are cut, for the report.
    fn reason(&self, error: &DecodeError) -> String {
        if self.zeros {
            "zero-filled tail".to_string()
        } else if self.lost_pages {
            format!("{error} (its last pages are zeros: a torn write)")
        } else {
            error.to_string()
        }
    }

    /// Saves the cut bytes when they may be data, then cuts.
    fn apply(&self, seg: &SegmentFile<'_>, report: &mut SegmentReport) -> Result<()> {
        // Bytes that are more than zeros or a short write are kept aside,
        // torn pages included: a torn write is the likely story, not the
        // only one.
        if !(self.zeros || self.short) {
            report.saved_to = Some(save_cut(seg, self.new_len)?);
        }
        // Cut first, then rewrite the torn batch's header: if this is
        // interrupted between the two, the next run finds the same torn
        // batch and does the same.
        seg.file.set_len(self.new_len).ctx("truncate", seg.path)?;
        if let Some((h, header)) = &self.patched {
            seg.file
                .write_all_at(&h[..header.header_bytes()], self.position)
                .ctx("write", seg.path)?;
        }
        seg.file.sync_data().ctx("fsync", seg.path)
    }
}

/// Whether the bad batch at `position` is the last thing in the file and
/// its first bad part (the record at `bad_position`, or the header itself)
/// runs into zeros that start at a page boundary and go on to the end of
/// the file: what a power cut leaves when the file's length reached the
/// disk before its last pages did (ext4 and XFS with delayed allocation).
/// A bad record that ends before the zeros is not explained by a lost page
/// (a record may legitimately end in zeros): that is damage.
///
/// What this cannot tell apart: damage inside the very record that runs
/// into a lost page. Only a durable mark of the flushed end would.
fn torn_pages(seg: &SegmentFile<'_>, position: u64, bad_position: u64) -> Result<bool> {
    let Some(last_non_zero) = last_non_zero_byte(seg, position)? else {
        return Ok(true);
    };
    let header_bytes = seg.format.header_bytes();
    let mut h = vec![0u8; header_bytes];
    let n = seg.read_at(&mut h, position)?;
    let bad = match BatchHeader::decode(seg.format, &h[..n], BATCH_BYTES_MAX) {
        Ok(_) if seg.format == Format::Legacy => {
            let mut prefix = [0u8; 5];
            let n = seg.read_at(&mut prefix, bad_position)?;
            bad_position..record_end(&prefix[..n], bad_position)
        }
        // One CRC32C covers a Kafka batch: any of it may be the bad part.
        Ok(header) => position..position + header.total_bytes(),
        Err(_) => position..position + header_bytes as u64,
    };
    Ok(runs_into_lost_pages(bad, last_non_zero, seg.len))
}

/// The torn-page rule on what was read: whether the bad bytes `bad` start
/// before, and run past, the page boundary where the zeros after
/// `last_non_zero` begin, in a file of `len` bytes.
fn runs_into_lost_pages(bad: Range<u64>, last_non_zero: u64, len: u64) -> bool {
    // The zeros reach back over a page boundary (bytes just before it may
    // be zeros that were written).
    let boundary = (last_non_zero + 1).div_ceil(PAGE_BYTES) * PAGE_BYTES;
    bad.start < boundary && boundary < bad.end.min(len)
}

/// Where the record at `at` ends by its length prefix (LEB128), of which
/// `prefix` holds the first bytes, or just past `at` when the prefix
/// cannot be read.
fn record_end(prefix: &[u8], at: u64) -> u64 {
    let mut length = 0u64;
    for (i, &byte) in prefix.iter().take(5).enumerate() {
        length |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return (at + i as u64 + 1).saturating_add(length);
        }
    }
    at + 1
}

/// The position of the last non-zero byte from `from` to the end of the
/// segment, if any.
fn last_non_zero_byte(seg: &SegmentFile<'_>, from: u64) -> Result<Option<u64>> {
    let mut buf = vec![0u8; RANGE_CHUNK_BYTES.min(seg.len - from) as usize];
    let mut end = seg.len;
    while end > from {
        let start = end.saturating_sub(RANGE_CHUNK_BYTES).max(from);
        let n = (end - start) as usize;
        seg.read_exact_at(&mut buf[..n], start)?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b != 0) {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

/// Saves the segment's bytes from `from` to its end beside it as
/// `<segment>.corrupt` (or `.corrupt.1`, ...: never over an earlier save),
/// durably, before the segment is cut. A run killed after saving and before
/// cutting finds its earlier save holding the same bytes and reuses it, so
/// that running again ends in the same files.
pub(super) fn save_cut(seg: &SegmentFile<'_>, from: u64) -> Result<PathBuf> {
    let vfs = seg.vfs;
    let dir = seg.path.parent().unwrap_or(Path::new("."));
    let base = PathBuf::from(format!("{}.corrupt", seg.path.display()));
    let candidates = std::iter::once(base.clone())
        .chain((1u32..).map(|n| PathBuf::from(format!("{}.{n}", base.display()))));
    for target in candidates {
        if !vfs.exists(&target) {
            let tmp = PathBuf::from(format!("{}.tmp", target.display()));
            let out = vfs.open(&tmp, true).ctx("create", &tmp)?;
            out.set_len(0).ctx("truncate", &tmp)?;
            copy_range(seg, from, &*out, &tmp)?;
            out.sync_data().ctx("fsync", &tmp)?;
            vfs.rename(&tmp, &target).ctx("rename", &tmp)?;
            fs::sync_directory(vfs, dir)?;
            return Ok(target);
        }
        if same_bytes(seg, from, &target)? {
            return Ok(target);
        }
    }
    unreachable!("an unbounded sequence of names")
}

/// Copies the segment's bytes from `from` to its end to the start of `out`.
fn copy_range(seg: &SegmentFile<'_>, from: u64, out: &dyn VFile, target: &Path) -> Result<()> {
    let mut buf = vec![0u8; RANGE_CHUNK_BYTES.min(seg.len - from) as usize];
    let mut at = from;
    while at < seg.len {
        let n = RANGE_CHUNK_BYTES.min(seg.len - at) as usize;
        seg.read_exact_at(&mut buf[..n], at)?;
        out.write_all_at(&buf[..n], at - from)
            .ctx("write", target)?;
        at += n as u64;
    }
    Ok(())
}

/// Whether the file `other` holds exactly the segment's bytes from `from`
/// to its end.
fn same_bytes(seg: &SegmentFile<'_>, from: u64, other: &Path) -> Result<bool> {
    let Ok(theirs) = seg.vfs.open_read(other) else {
        return Ok(false);
    };
    if theirs.len().ctx("stat", other)? != seg.len - from {
        return Ok(false);
    }
    let chunk = RANGE_CHUNK_BYTES.min(seg.len - from) as usize;
    let (mut a, mut b) = (vec![0u8; chunk], vec![0u8; chunk]);
    let mut at = from;
    while at < seg.len {
        let n = RANGE_CHUNK_BYTES.min(seg.len - at) as usize;
        seg.read_exact_at(&mut a[..n], at)?;
        theirs
            .read_exact_at(&mut b[..n], at - from)
            .ctx("read", other)?;
        if a[..n] != b[..n] {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

// Mutation testing (`cargo mutants -f src/storage/recover/cut.rs -C --lib
// -- storage::`) kills every mutant of this file but three, which are
// equivalent: they change how many bytes a loop takes at a time, not which
// bytes it copies or compares.
// - `copy_range` and `same_bytes`: `seg.len / at` for `seg.len - at` (the
//   chunk's length). Every position is past the segment header (`at` is at
//   least 24), so the quotient is at least 1 and never more than the bytes
//   left: the same bytes, in smaller chunks.
// - `same_bytes`: `seg.len + from` for `seg.len - from` (the buffers'
//   length): longer buffers, of which only each chunk is compared.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::fs::Vfs;
    // Recovery of legacy segments, whose records each have a CRC: a torn
    // batch keeps its whole records.
    use crate::storage::record::legacy::{set_base_offset, BatchBuilder};
    use crate::storage::recover::{recover_partition, RecoverOptions};
    use crate::storage::segment::encode_header;

    const DIR: &str = "/d/t-0";
    const SEGMENT: &str = "/d/t-0/00000000000000000000.log";

    fn options(automatic: bool) -> RecoverOptions {
        RecoverOptions {
            full: true,
            dry_run: true,
            automatic,
            trust_last: false,
            index_interval_bytes: 4096,
        }
    }

    /// A simulated file system holding the segment `bytes`.
    fn sim_with(bytes: &[u8]) -> SimFs {
        let sim = SimFs::new();
        sim.create_dir_all_durable(Path::new(DIR));
        sim.write(Path::new(SEGMENT), bytes);
        sim
    }

    /// Runs `f` on the segment of `sim` opened as recovery opens it.
    fn with_segment<T>(
        sim: &SimFs,
        options: &RecoverOptions,
        f: impl FnOnce(&SegmentFile<'_>) -> T,
    ) -> T {
        let path = Path::new(SEGMENT);
        let file = sim.open(path, false).unwrap();
        let len = file.len().unwrap();
        f(&SegmentFile {
            vfs: sim,
            file,
            path,
            len,
            format: Format::Legacy,
            options,
            last: true,
        })
    }

    /// `len` bytes that differ from their neighbours, none zero.
    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i % 251) as u8 ^ seed | 1)
            .collect::<Vec<u8>>()
    }

    #[test]
    fn cut_bytes_past_one_chunk_are_saved_whole() {
        let len = 2 * RANGE_CHUNK_BYTES as usize + 1000;
        let bytes = pattern(len, 0);
        let sim = sim_with(&bytes);
        let saved = with_segment(&sim, &options(false), |seg| save_cut(seg, 100)).unwrap();
        assert_eq!(saved, PathBuf::from(format!("{SEGMENT}.corrupt")));
        assert!(sim.read(&saved).unwrap() == bytes[100..], "the saved bytes");
    }

    /// A rerun finds the bytes it saved before being killed and reuses
    /// the file; a file of other bytes (of the same length or not, the
    /// difference in the first chunk or a later one) is never written
    /// over nor taken for them.
    #[test]
    fn a_rerun_reuses_an_earlier_save_only_of_the_same_bytes() {
        let len = RANGE_CHUNK_BYTES as usize + 5000;
        let bytes = pattern(len, 0);
        let from = 200;
        let cut = &bytes[from..];
        let mut late = cut.to_vec();
        late[RANGE_CHUNK_BYTES as usize + 10] ^= 0x40;
        let mut early = cut.to_vec();
        early[7] ^= 0x40;
        let cases: [(&str, &[u8], bool); 5] = [
            ("the same bytes", cut, true),
            ("other bytes in the second chunk", &late, false),
            ("other bytes in the first chunk", &early, false),
            ("one byte short", &cut[..cut.len() - 1], false),
            ("one byte more", &[cut, &[1]].concat(), false),
        ];
        for (what, earlier, reused) in cases {
            let sim = sim_with(&bytes);
            let first = PathBuf::from(format!("{SEGMENT}.corrupt"));
            sim.write(&first, earlier);
            let saved = with_segment(&sim, &options(false), |seg| save_cut(seg, from as u64));
            let saved = saved.unwrap();
            let expected = if reused {
                first.clone()
            } else {
                PathBuf::from(format!("{SEGMENT}.corrupt.1"))
            };
            assert_eq!(saved, expected, "{what}");
            assert!(sim.read(&saved).unwrap() == cut, "{what}: the saved bytes");
            assert!(
                sim.read(&first).unwrap() == earlier,
                "{what}: the earlier save is kept"
            );
        }
    }

    /// A damaged batch header (which does not decode) at `position`,
    /// `header_bytes_written` of it non-zero, then zeros to the end of a
    /// file of three pages.
    fn bad_header_then_zeros(position: usize, header_bytes_written: usize) -> SimFs {
        let mut bytes = pattern(position + header_bytes_written, 0x20);
        bytes.resize(3 * PAGE_BYTES as usize, 0);
        sim_with(&bytes)
    }

    #[test]
    fn a_damaged_header_is_a_torn_write_only_if_it_runs_into_the_zero_pages() {
        let header = LEGACY_HEADER_BYTES;
        let page = PAGE_BYTES as usize;
        // Written up to the page boundary, the rest of the header in the
        // zero pages: a torn write.
        let sim = bad_header_then_zeros(page - 20, 20);
        let torn = with_segment(&sim, &options(false), |seg| {
            torn_pages(seg, (page - 20) as u64, 0)
        });
        assert!(torn.unwrap(), "the header runs into the zero pages");
        // Written whole, ending before the zero pages: damage.
        let sim = bad_header_then_zeros(page - 2 * header, header);
        let torn = with_segment(&sim, &options(false), |seg| {
            torn_pages(seg, (page - 2 * header) as u64, 0)
        });
        assert!(!torn.unwrap(), "the header ends before the zero pages");
    }

    /// Nothing but zeros from the batch on, which the walk calls a
    /// zero-filled tail before this is asked: a torn write all the same.
    #[test]
    fn nothing_but_zeros_from_the_batch_on_is_a_torn_write() {
        let sim = bad_header_then_zeros(100, 0);
        let torn = with_segment(&sim, &options(false), |seg| torn_pages(seg, 100, 100));
        assert!(torn.unwrap());
    }

    /// A batch of `count` records of 20 bytes each, the first at `base`.
    fn batch(base: u64, count: u32) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for i in 0..count {
            b.push(i64::from(i), None, &[], &[b'v'; 20]);
        }
        let bytes = b.finish();
        set_base_offset(bytes, base);
        bytes.to_vec()
    }

    /// A writer's open (not a dry run) of the segment `bytes`.
    fn writer_open(bytes: &[u8]) -> (SimFs, Result<crate::storage::recover::RecoveryReport>) {
        let sim = sim_with(bytes);
        let writer = RecoverOptions {
            dry_run: false,
            ..options(true)
        };
        let report = recover_partition(&sim, Path::new(DIR), 0, &writer);
        (sim, report)
    }

    /// The segment header and a batch of offsets 0-2; then `last`.
    fn after_one_batch(last: &[u8]) -> (Vec<u8>, usize) {
        let mut bytes = encode_header(0, Format::Legacy).to_vec();
        bytes.extend_from_slice(&batch(0, 3));
        let at = bytes.len();
        bytes.extend_from_slice(last);
        (bytes, at)
    }

    /// A last batch whole in length whose records after the second are
    /// zeros: a zero-filled tail after the records kept (nothing saved).
    #[test]
    fn zeros_after_the_whole_records_of_the_last_batch_are_a_zero_filled_tail() {
        let mut last = batch(3, 5);
        let header = BatchHeader::decode(Format::Legacy, &last, BATCH_BYTES_MAX).unwrap();
        let kept = batch(3, 2).len();
        last[kept..].fill(0);
        let (bytes, at) = after_one_batch(&last);
        let (_sim, report) = writer_open(&bytes);
        let seg = &report.unwrap().segments[0];
        let problem = seg.problem.as_ref().unwrap();
        assert_eq!(problem.reason, "zero-filled tail");
        assert_eq!((seg.next_offset, seg.saved_to.as_ref()), (5, None));
        assert_eq!(seg.bytes_valid, (at + kept) as u64);
        assert!(header.total_bytes() as usize == last.len());
    }

    /// A last batch whole in length whose last pages are zeros, from
    /// inside one of its records: a torn write, cut after the whole
    /// records (and saved: the likely story, not the only one).
    #[test]
    fn a_last_batch_running_into_zero_pages_is_a_torn_write() {
        let mut b = BatchBuilder::new();
        for i in 0..20 {
            b.push(i, None, &[], &[b'v'; 400]);
        }
        let last = b.finish();
        set_base_offset(last, 3);
        let (mut bytes, _) = after_one_batch(last);
        let boundary = (bytes.len() - 1) / PAGE_BYTES as usize * PAGE_BYTES as usize;
        bytes[boundary..].fill(0);
        let (_sim, report) = writer_open(&bytes);
        let seg = &report.unwrap().segments[0];
        let problem = seg.problem.as_ref().unwrap();
        assert!(problem.torn_tail && problem.reason.ends_with("a torn write)"));
        assert!(seg.saved_to.is_some() && seg.next_offset > 3);
    }

    /// A last batch whose header is damaged (not cut short, no zero pages)
    /// is damage: a writer's open refuses it.
    #[test]
    fn a_damaged_header_of_the_last_batch_is_damage() {
        let mut last = batch(3, 2);
        let header = BatchHeader::decode(Format::Legacy, &last, BATCH_BYTES_MAX).unwrap();
        last[header.header_bytes() - 5] ^= 0x55;
        let (bytes, _) = after_one_batch(&last);
        let (sim, report) = writer_open(&bytes);
        assert!(report.is_err(), "{report:?}");
        assert!(sim.read(Path::new(SEGMENT)).unwrap() == bytes);
    }

    /// Recovery reports where it cuts a batch torn inside its third
    /// record: klog-recover keeps its first two records, a reader (which
    /// reads whole batches) none of it; each says which offset is the
    /// first not kept, its position, and how many bytes go.
    #[test]
    fn the_report_of_a_torn_batch_gives_the_offset_position_and_bytes_cut() {
        let first = batch(0, 3);
        let torn = batch(3, 5);
        let header = BatchHeader::decode(Format::Legacy, &torn, BATCH_BYTES_MAX).unwrap();
        let two = batch(3, 2);
        let two_records = two.len() - header.header_bytes();
        let mut bytes = encode_header(0, Format::Legacy).to_vec();
        bytes.extend_from_slice(&first);
        let at = bytes.len() as u64;
        bytes.extend_from_slice(&torn[..header.header_bytes() + two_records + 3]);
        let len = bytes.len() as u64;
        let kept_end = at + (header.header_bytes() + two_records) as u64;
        for (automatic, offset, position) in [(false, 5, kept_end), (true, 3, at)] {
            let sim = sim_with(&bytes);
            let report = recover_partition(&sim, Path::new(DIR), 0, &options(automatic)).unwrap();
            let seg = &report.segments[0];
            let problem = seg.problem.as_ref().expect("a problem");
            let what = if automatic {
                "a reader"
            } else {
                "klog-recover"
            };
            assert_eq!(
                (problem.offset, problem.position, seg.truncated_bytes),
                (offset, position, len - position),
                "{what}: {problem:?}"
            );
            assert!(problem.torn_tail, "{what}");
            assert_eq!(seg.next_offset, offset, "{what}");
            assert_eq!(seg.bytes_valid, position, "{what}");
        }
    }

    /// A segment of three batches (offsets 0-2, 3-4, 5-6) whose second has
    /// its first record damaged; the position of that batch.
    fn damaged_in_the_middle() -> (Vec<u8>, u64) {
        let mut bytes = encode_header(0, Format::Legacy).to_vec();
        bytes.extend_from_slice(&batch(0, 3));
        let at = bytes.len();
        let second = batch(3, 2);
        let header = BatchHeader::decode(Format::Legacy, &second, BATCH_BYTES_MAX).unwrap();
        bytes.extend_from_slice(&second);
        bytes[at + header.header_bytes() + 4] ^= 0x55;
        bytes.extend_from_slice(&batch(5, 2));
        (bytes, at as u64)
    }

    /// Damage with whole batches after it: a writer's open refuses it and
    /// changes nothing; klog-recover cuts it, saving the cut bytes first.
    #[test]
    fn klog_recover_cuts_damage_and_saves_it_where_a_writer_refuses() {
        let (bytes, at) = damaged_in_the_middle();
        let sim = sim_with(&bytes);
        let writer = RecoverOptions {
            dry_run: false,
            ..options(true)
        };
        let refused = recover_partition(&sim, Path::new(DIR), 0, &writer);
        assert!(refused.is_err(), "{refused:?}");
        assert!(
            sim.read(Path::new(SEGMENT)).unwrap() == bytes,
            "a refusal writes"
        );
        let klog_recover = RecoverOptions {
            dry_run: false,
            ..options(false)
        };
        let report = recover_partition(&sim, Path::new(DIR), 0, &klog_recover).unwrap();
        let seg = &report.segments[0];
        let saved = PathBuf::from(format!("{SEGMENT}.corrupt"));
        assert_eq!(seg.saved_to.as_ref(), Some(&saved));
        assert_eq!((seg.bytes_valid, seg.next_offset), (at, 3));
        assert!(sim.read(Path::new(SEGMENT)).unwrap() == bytes[..at as usize]);
        assert!(sim.read(&saved).unwrap() == bytes[at as usize..]);
    }

    /// A writer's open cuts a torn last batch after its whole records and
    /// rewrites its header to cover just them: no bytes saved (a short
    /// write is no data).
    #[test]
    fn a_writer_keeps_the_whole_records_of_a_torn_last_batch() {
        let torn = batch(3, 5);
        let header = BatchHeader::decode(Format::Legacy, &torn, BATCH_BYTES_MAX).unwrap();
        let two_records = batch(3, 2).len() - header.header_bytes();
        let mut bytes = encode_header(0, Format::Legacy).to_vec();
        bytes.extend_from_slice(&batch(0, 3));
        let at = bytes.len();
        let kept_end = at + header.header_bytes() + two_records;
        bytes.extend_from_slice(&torn[..kept_end - at + 3]);
        let sim = sim_with(&bytes);
        let writer = RecoverOptions {
            dry_run: false,
            ..options(true)
        };
        let report = recover_partition(&sim, Path::new(DIR), 0, &writer).unwrap();
        let seg = &report.segments[0];
        assert_eq!(seg.saved_to, None);
        assert_eq!((seg.next_offset, seg.bytes_valid), (5, kept_end as u64));
        let after = sim.read(Path::new(SEGMENT)).unwrap();
        assert_eq!(after.len(), kept_end);
        let patched = BatchHeader::decode(Format::Legacy, &after[at..], BATCH_BYTES_MAX).unwrap();
        assert_eq!(patched.record_count, 2);
        assert_eq!(patched.total_bytes(), (kept_end - at) as u64);
    }

    #[test]
    fn a_bad_record_that_runs_into_the_zero_pages_is_a_torn_write() {
        // Non-zero bytes up to 5000: the zeros start at the page boundary
        // 8192 (the bytes from 5001 to 8191 may be zeros that were written).
        let len = 12_288;
        assert!(
            runs_into_lost_pages(6000..9000, 5000, len),
            "across the boundary"
        );
        assert!(runs_into_lost_pages(8191..8193, 5000, len), "just across");
        assert!(
            runs_into_lost_pages(4000..20_000, 5000, len),
            "past the end of the file"
        );
    }

    #[test]
    fn a_bad_record_that_ends_before_the_zero_pages_is_damage() {
        let len = 12_288;
        // A record may legitimately end in zeros: ending at or before the
        // boundary, it is not explained by a lost page.
        assert!(!runs_into_lost_pages(6000..8000, 5000, len));
        assert!(!runs_into_lost_pages(6000..8192, 5000, len));
        // Starting in the zero pages: the bad part is not the one a lost
        // page cut.
        assert!(!runs_into_lost_pages(8192..9000, 5000, len));
        // No whole zero page at the end: the boundary is the file's end.
        assert!(!runs_into_lost_pages(11_000..13_000, 12_000, len));
    }

    #[test]
    fn the_zero_pages_start_at_the_page_after_the_last_non_zero_byte() {
        let len = 3 * PAGE_BYTES;
        // The last non-zero byte is the last of its page: the zeros start
        // at the next page.
        assert!(runs_into_lost_pages(4000..4097, PAGE_BYTES - 1, len));
        assert!(!runs_into_lost_pages(4000..4096, PAGE_BYTES - 1, len));
        // ... or the first of a page: they start at the page after.
        assert!(runs_into_lost_pages(8000..8193, PAGE_BYTES, len));
        assert!(!runs_into_lost_pages(4000..4097, PAGE_BYTES, len));
    }

    #[test]
    fn a_record_ends_where_its_length_prefix_says() {
        assert_eq!(record_end(&[5, 0xff], 100), 106, "one-byte prefix");
        assert_eq!(
            record_end(&[0x80 | 1, 2], 100),
            100 + 2 + 257,
            "two-byte prefix"
        );
        assert_eq!(record_end(&[0x80, 0x80, 0x80, 0x80, 1], 0), 5 + (1 << 28));
        assert_eq!(record_end(&[0x80, 0x80], 100), 101, "a prefix cut short");
        assert_eq!(record_end(&[0xff; 5], 100), 101, "longer than a u32 prefix");
        assert_eq!(record_end(&[], 100), 101, "nothing to read");
    }

    fn judged(zeros: bool, short: bool, lost_pages: bool) -> Cut {
        Cut {
            position: 24,
            new_len: 24,
            patched: None,
            zeros,
            short,
            lost_pages,
        }
    }

    #[test]
    fn zeros_a_short_write_or_lost_pages_are_torn_and_say_so() {
        let error = DecodeError::Malformed("record: length too small");
        assert!(!judged(false, false, false).torn());
        assert_eq!(
            judged(false, false, false).reason(&error),
            error.to_string()
        );
        for (zeros, short, lost_pages) in [
            (true, false, false),
            (false, true, false),
            (false, false, true),
        ] {
            assert!(
                judged(zeros, short, lost_pages).torn(),
                "{zeros} {short} {lost_pages}"
            );
        }
        assert_eq!(judged(true, true, false).reason(&error), "zero-filled tail");
        let reason = judged(false, false, true).reason(&error);
        assert!(
            reason.starts_with(&error.to_string()) && reason.ends_with("a torn write)"),
            "{reason}"
        );
        assert_eq!(judged(false, true, false).reason(&error), error.to_string());
    }
}
