//! Scrubbing: reading back every batch a log holds, each record's CRC
//! checked, to find the rot a disk leaves where no open looks.
//!
//! Opening a log checks only what follows its recovery point
//! ([`crate::storage::recover`]): the batches below were whole when they
//! were made durable, and re-reading a large log at every start would
//! keep a broker from serving for minutes. A byte that flips later in a
//! rolled segment (bit rot, a bad sector, a stray write) is found by
//! nobody until a consumer or a follower trips over it. A scrub walks the
//! log's segments outside its lock, at a paced rate, as `klog-dump
//! --verify` would; what it finds is confirmed under the lock before
//! anyone acts on it ([`confirm`]), since a follower's truncation may
//! have rewritten the bytes under the walk.
//!
//! What to do with damage is the caller's: a broker heals a replica from
//! its peers, and reports a single copy's (see `klog-broker`'s scrub).
//!
//! # The file
//!
//! `scrubbed` in the partition directory says when a scrub last found the
//! whole log whole, so that a restart does not read every log again
//! before its time. Text, written whole (temporary file, fsync, rename,
//! directory fsync); `tests/golden/scrubbed` pins it:
//!
//! ```text
//! klog-scrubbed 1        format and version
//! at 1764633600000       when the walk began, ms since the Unix epoch
//! ```
//!
//! A new partition's directory gets one as it is made ([`note_made`], not
//! synced): an empty log is whole, and every batch appended since is
//! checked on its way in, so its first walk comes an interval later, not
//! while a producer fills it (a crash before its first batch keeps it;
//! one after forgets it, as below).
//!
//! A file that is missing or does not parse means never: the partition is
//! scrubbed at its next look. A writable open after an unclean stop
//! (kill -9, a power cut: no `clean-shutdown` file) of a log holding
//! batches removes it (recovery does not check what a walk does), so that
//! such a start is followed by a scrub; so does a walk that finds damage
//! (a restart walks it again soon, whatever the interval).

use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};
use crate::storage::batches::FileBatches;
use crate::storage::epoch::Epochs;
use crate::storage::files::SegmentFile;
use crate::storage::fs::{self, Vfs};
use crate::storage::log::Log;
use crate::storage::record::{BatchHeader, Format};
use crate::storage::recover::{self, Damage};
use crate::storage::segment::SEGMENT_HEADER_BYTES;

pub use crate::storage::recover::SCRUBBED_FILE;
const SCRUBBED_HEADER: &str = "klog-scrubbed 1";

/// The bytes of the `scrubbed` file for a walk begun at `at_ms`.
pub fn encode_scrubbed(at_ms: i64) -> Vec<u8> {
    format!("{SCRUBBED_HEADER}\nat {at_ms}\n").into_bytes()
}

/// When the walk the `scrubbed` file's `text` notes began; `None` when it
/// is not such a file.
pub fn decode_scrubbed(text: &str) -> Option<i64> {
    let mut lines = text.lines();
    (lines.next()? == SCRUBBED_HEADER).then_some(())?;
    let at = lines.next()?.strip_prefix("at ")?.parse().ok()?;
    lines.next().is_none().then_some(at)
}

/// When a scrub last found the log in `dir` whole, if it ever did.
pub fn read_scrubbed(vfs: &dyn Vfs, dir: &Path) -> Option<i64> {
    decode_scrubbed(&fs::read_small(vfs, &dir.join(SCRUBBED_FILE))?)
}

/// Notes, durably, that a walk of the log in `dir` begun at `at_ms` found
/// it whole.
pub fn write_scrubbed(vfs: &dyn Vfs, dir: &Path, at_ms: i64) -> Result<()> {
    fs::write_atomic(vfs, dir, SCRUBBED_FILE, &encode_scrubbed(at_ms))
}

/// Notes that the log in `dir`, made empty at `at_ms`, was whole then: a
/// scrub first walks it an interval later (every batch appended since was
/// checked on its way in). Not synced: a power cut that loses the note,
/// or tears it, costs an early walk (an unreadable note is none).
pub fn note_made(vfs: &dyn Vfs, dir: &Path, at_ms: i64) -> Result<()> {
    let path = dir.join(SCRUBBED_FILE);
    let file = vfs.open(&path, true).ctx("create", &path)?;
    file.set_len(0).ctx("truncate", &path)?;
    file.write_all_at(&encode_scrubbed(at_ms), 0)
        .ctx("write", &path)
}

pub use crate::storage::recover::forget_scrubbed;

/// One segment's bytes as they had reached its file when the scrub
/// looked: the range a walk may judge.
#[derive(Debug, Clone)]
pub struct Extent {
    /// The partition directory.
    pub dir: PathBuf,
    /// The segment's first offset.
    pub base_offset: u64,
    /// The segment file.
    pub path: PathBuf,
    /// Its file, held while the walk reads it (opened again if it is
    /// not cached: see [`crate::storage::files`]).
    file: SegmentFile,
    /// The format of its batches.
    format: Format,
    /// Where its bytes end (appends gathered in memory excluded).
    pub end: u64,
    /// A cleaned segment's end offset.
    cleaned_end: Option<u64>,
    /// Below which offset its batches may skip offsets.
    skips_below: Option<u64>,
    /// The log's truncations then: another since makes any finding void.
    truncations: u64,
    /// The log's leader epochs then: each batch's must be the one its
    /// base offset is in (a Kafka batch's epoch is not under its CRC32C).
    epochs: Epochs,
}

impl Log {
    /// Every segment's extent, oldest first: what a scrub walks.
    pub fn extents(&self) -> Vec<Extent> {
        let truncations = self.truncations_now();
        self.segments()
            .map(|s| Extent {
                dir: self.dir().to_path_buf(),
                base_offset: s.base_offset,
                path: s.path.clone(),
                file: s.file_handle(),
                format: s.format,
                end: s.written_size(),
                cleaned_end: s.end,
                skips_below: s.skips_below(),
                truncations,
                epochs: self.epochs().clone(),
            })
            .collect()
    }
}

impl Extent {
    /// Whether a batch may start at its base offset when `next` is where
    /// the one before ended ([`crate::storage::batches::follows`]).
    fn follows(&self, header: &crate::storage::record::BatchHeader, next: u64) -> bool {
        let (base, end) = (header.base_offset, header.next_offset());
        crate::storage::batches::follows(self.skips_below, next, base, end)
    }

    /// Whether the batch's leader epoch is the one the log's epoch file
    /// gives its base offset (a legacy magic 1 batch, before epochs, reads
    /// as 0; a log without epochs takes any).
    fn epoch_fits(&self, header: &BatchHeader) -> bool {
        match self.epochs.epoch_at(header.base_offset) {
            Some(epoch) => epoch == header.leader_epoch,
            None => self.epochs.entries().is_empty() || header.leader_epoch == 0,
        }
    }

    /// Saves its bytes from `position` on beside the segment (as
    /// `.corrupt`), before a cut there: see
    /// [`crate::storage::recover::save_cut_bytes`].
    pub fn save_from(&self, vfs: &dyn Vfs, position: u64) -> Result<PathBuf> {
        let file = self.file.open().ctx("open segment", &self.path)?;
        recover::save_cut_bytes(vfs, file, &self.path, self.end, position)
    }
}

/// Walks `extent`'s batches and their records; the first damage, if
/// any. `pace` is told the bytes of each batch walked, and stops the walk
/// when it answers `false` (the walk then finds nothing).
pub fn check(extent: &Extent, pace: &mut dyn FnMut(u64) -> bool) -> Result<Option<Damage>> {
    let start = SEGMENT_HEADER_BYTES as u64;
    check_from(extent, (start, extent.base_offset), pace)
}

/// [`check`] from the batch at `position`, whose first offset is `next`.
fn check_from(
    extent: &Extent,
    (position, mut next): (u64, u64),
    pace: &mut dyn FnMut(u64) -> bool,
) -> Result<Option<Damage>> {
    let file = extent.file.open().ctx("open segment", &extent.path)?;
    let mut walk = FileBatches::new(&*file, extent.format, position, extent.end, BATCH_BYTES_MAX);
    loop {
        let step = walk.next_batch().ctx("read", &extent.path)?;
        let (position, reason) = match step {
            None => return Ok(None),
            Some(Err(stop)) => (stop.position, stop.error.to_string()),
            Some(Ok((position, batch))) => {
                let header = batch.header;
                let checked = batch.check_stored(RECORD_BYTES_MAX_LIMIT);
                match checked {
                    Err(e) => (position, e.to_string()),
                    Ok(()) if !extent.follows(&header, next) => (
                        position,
                        format!(
                            "batch at offset {}, where offset {next} was expected",
                            header.base_offset
                        ),
                    ),
                    Ok(()) if !extent.epoch_fits(&header) => (
                        position,
                        format!(
                            "batch of leader epoch {}, where the epoch file has {}",
                            header.leader_epoch,
                            extent.epochs.epoch_at(header.base_offset).unwrap_or(0)
                        ),
                    ),
                    Ok(()) => {
                        next = header.next_offset();
                        if !pace(header.total_bytes()) {
                            return Ok(None);
                        }
                        continue;
                    }
                }
            }
        };
        return Ok(Some(Damage {
            dir: extent.dir.clone(),
            segment: extent.path.clone(),
            position,
            offset: next,
            reason,
        }));
    }
}

/// Whether `damage`, found by a walk of `extent` outside the lock, is in
/// `log` as it is now (the caller holds its lock): the log has not been
/// truncated since, still holds the segment, and the damaged batch is
/// still found damaged the same way. Only that batch is read again: the
/// bytes before it are rewritten by nothing but a truncation, and a walk
/// of the whole segment under the lock (up to a segment's size, unpaced)
/// would stop the partition's producers and fetchers meanwhile.
pub fn confirm(log: &Log, extent: &Extent, damage: &Damage) -> Result<bool> {
    if log.truncations_now() != extent.truncations {
        return Ok(false);
    }
    // A segment the cleaner replaced meanwhile (same name, another file)
    // is not the one walked.
    let Some(now) = log.extents().into_iter().find(|e| {
        e.base_offset == extent.base_offset
            && e.path == extent.path
            && e.cleaned_end == extent.cleaned_end
    }) else {
        return Ok(false);
    };
    let found = check_from(&now, (damage.position, damage.offset), &mut |_| false)?;
    Ok(found.as_ref() == Some(damage))
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::fs::VFile;
    use crate::storage::log::{LogConfig, OpenOptions};
    use crate::storage::record::BatchBuilder;

    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: 4096,
            index_bytes_max: 4096,
            ..LogConfig::default()
        }
    }

    fn writable() -> OpenOptions {
        OpenOptions {
            writable: true,
            lock: false,
        }
    }

    /// A log in `/p` of 40 batches of one 200-byte record each, rolled
    /// into several segments, all written.
    fn log_of_batches(sim: &Arc<SimFs>) -> Log {
        sim.create_dir_all_durable(Path::new("/p"));
        let vfs: Arc<dyn Vfs> = sim.clone();
        let mut log = Log::open(vfs, Path::new("/p"), config(), writable()).unwrap();
        for i in 0..40u8 {
            let mut b = BatchBuilder::new();
            b.push(1_000 + i64::from(i), None, &[], &[b'a' + i % 26; 200]);
            log.append(b.finish(), 0).unwrap();
        }
        log.flush().unwrap();
        log
    }

    /// Flips a bit of the first record of `extent`'s second batch: its
    /// position, and the offset the damage starts at.
    fn rot(sim: &SimFs, extent: &Extent) -> (u64, u64) {
        let bytes = sim.read(&extent.path).unwrap();
        let mut walk = crate::storage::batches::Batches::new(
            Format::Kafka,
            &bytes[SEGMENT_HEADER_BYTES..],
            BATCH_BYTES_MAX,
        );
        let (first, batch) = walk.next().unwrap().unwrap();
        let second = first + batch.total_bytes() as u64 + SEGMENT_HEADER_BYTES as u64;
        let at = second + 100;
        overwrite(sim, &extent.path, at, &[bytes[at as usize] ^ 0x04]);
        (second, batch.header.next_offset())
    }

    /// Writes `bytes` at `at` in the file itself, as rot does (not a new
    /// file under the name).
    fn overwrite(sim: &SimFs, path: &Path, at: u64, bytes: &[u8]) {
        let file = sim.open(path, false).unwrap();
        file.write_all_at(bytes, at).unwrap();
    }

    #[test]
    fn a_whole_log_has_no_damage_and_every_byte_is_paced() {
        let sim = Arc::new(SimFs::new());
        let log = log_of_batches(&sim);
        let extents = log.extents();
        assert!(extents.len() > 2, "rolled: {extents:?}");
        let mut paced = 0;
        for e in &extents {
            assert_eq!(
                check(e, &mut |n| {
                    paced += n;
                    true
                })
                .unwrap(),
                None
            );
        }
        let held: u64 = extents
            .iter()
            .map(|e| e.end - SEGMENT_HEADER_BYTES as u64)
            .sum();
        assert_eq!(paced, held, "every batch walked");
    }

    /// Rot in a rolled segment, below anything an open checks: found at
    /// the damaged batch, the offset before it kept.
    #[test]
    fn rot_in_a_rolled_segment_is_found_at_its_batch() {
        let sim = Arc::new(SimFs::new());
        let log = log_of_batches(&sim);
        let extents = log.extents();
        let victim = &extents[1];
        let (position, offset) = rot(&sim, victim);
        let found = check(victim, &mut |_| true).unwrap().expect("damage");
        assert_eq!((found.position, found.offset), (position, offset));
        assert_eq!(found.segment, victim.path);
        assert!(found.reason.contains("crc mismatch"), "{}", found.reason);
        assert!(confirm(&log, victim, &found).unwrap(), "still there");
        for other in extents.iter().filter(|e| e.path != victim.path) {
            assert_eq!(check(other, &mut |_| true).unwrap(), None);
        }
    }

    /// A walk that raced a truncation saw bytes being rewritten: what it
    /// found is void, whatever the file holds now.
    /// The two fields of a Kafka batch its CRC32C leaves out (the log
    /// stamps them): a base offset or a leader epoch rotted is found too,
    /// against the offsets before it and the epoch file.
    #[test]
    fn rot_in_a_stamped_field_is_found_at_its_batch() {
        for (field, at) in [("offset", 7usize), ("epoch", 14)] {
            let sim = Arc::new(SimFs::new());
            let log = log_of_batches(&sim);
            let victim = &log.extents()[1];
            let bytes = sim.read(&victim.path).unwrap();
            let first = crate::storage::record::Batch::decode(
                Format::Kafka,
                &bytes[SEGMENT_HEADER_BYTES..],
                BATCH_BYTES_MAX,
            )
            .unwrap();
            let second = SEGMENT_HEADER_BYTES + first.total_bytes();
            let byte = second + at;
            overwrite(&sim, &victim.path, byte as u64, &[bytes[byte] ^ 0x10]);
            let found = check(victim, &mut |_| true).unwrap().expect(field);
            assert_eq!(found.position, second as u64, "{field}: {found:?}");
            assert_eq!(found.offset, first.header.next_offset(), "{field}");
            assert!(found.reason.contains(field), "{field}: {}", found.reason);
        }
    }

    #[test]
    fn a_finding_of_a_walk_a_truncation_overtook_is_not_confirmed() {
        let sim = Arc::new(SimFs::new());
        let mut log = log_of_batches(&sim);
        let extents = log.extents();
        let victim = extents[1].clone();
        let (_, offset) = rot(&sim, &victim);
        let found = check(&victim, &mut |_| true).unwrap().expect("damage");
        log.truncate_to(offset + 1).unwrap();
        assert!(!confirm(&log, &victim, &found).unwrap());
    }

    /// Damage the walk saw that the file no longer holds (the bytes were
    /// rewritten whole) is not confirmed.
    #[test]
    fn damage_gone_from_the_file_is_not_confirmed() {
        let sim = Arc::new(SimFs::new());
        let log = log_of_batches(&sim);
        let victim = log.extents()[1].clone();
        let whole = sim.read(&victim.path).unwrap();
        rot(&sim, &victim);
        let found = check(&victim, &mut |_| true).unwrap().expect("damage");
        overwrite(&sim, &victim.path, 0, &whole);
        assert!(!confirm(&log, &victim, &found).unwrap());
    }

    #[test]
    fn the_scrubbed_file_round_trips_and_anything_else_means_never() {
        let sim = SimFs::new();
        sim.create_dir_all_durable(Path::new("/p"));
        assert_eq!(read_scrubbed(&sim, Path::new("/p")), None);
        write_scrubbed(&sim, Path::new("/p"), 1_764_633_600_000).unwrap();
        assert_eq!(
            read_scrubbed(&sim, Path::new("/p")),
            Some(1_764_633_600_000)
        );
        for bad in [
            "",
            "klog-scrubbed 1\n",
            "klog-scrubbed 2\nat 5\n",
            "klog-scrubbed 1\nat x\n",
            "klog-scrubbed 1\nat 5\nmore\n",
        ] {
            assert_eq!(decode_scrubbed(bad), None, "{bad:?}");
        }
    }

    /// A start after a clean close keeps the note; one after an unclean
    /// stop forgets it, so that the log is scrubbed again soon.
    #[test]
    fn an_unclean_stop_forgets_the_scrub() {
        let sim = Arc::new(SimFs::new());
        let dir = Path::new("/p");
        let log = log_of_batches(&sim);
        write_scrubbed(&*sim, dir, 5).unwrap();
        log.close().unwrap();
        let vfs: Arc<dyn Vfs> = sim.clone();
        let log = Log::open(Arc::clone(&vfs), dir, config(), writable()).unwrap();
        assert_eq!(read_scrubbed(&*sim, dir), Some(5), "closed cleanly");
        drop(log);
        let reader = OpenOptions {
            writable: false,
            lock: false,
        };
        drop(Log::open(Arc::clone(&vfs), dir, config(), reader).unwrap());
        assert_eq!(
            read_scrubbed(&*sim, dir),
            Some(5),
            "a reader changes nothing"
        );
        drop(Log::open(vfs, dir, config(), writable()).unwrap());
        assert_eq!(read_scrubbed(&*sim, dir), None, "not closed cleanly");
    }

    /// A new partition is noted whole as it is made, and an unclean stop
    /// before any batch keeps the note (nothing to walk). One after
    /// batches forgets it, whatever the recovery point: a log that never
    /// rolled has none, and its recovery, reading every batch, does not
    /// check their leader epochs against the epoch file as a walk does.
    #[test]
    fn a_new_partition_keeps_its_note_until_it_holds_batches() {
        let sim = Arc::new(SimFs::new());
        let vfs: Arc<dyn Vfs> = sim.clone();
        let store = crate::storage::store::Store::with_vfs("/d", Arc::clone(&vfs));
        store.create_topic("t", 1).unwrap();
        let dir = store.partition_dir("t", 0);
        let made = read_scrubbed(&*sim, &dir).expect("noted as it was made");
        assert!(
            (crate::clock::now_ms() - made).abs() < 60_000,
            "now: {made}"
        );
        let big = LogConfig::default();
        drop(store.open_log("t", 0, big.clone(), writable()).unwrap());
        let mut log = store.open_log("t", 0, big.clone(), writable()).unwrap();
        assert_eq!(read_scrubbed(&*sim, &dir), Some(made), "empty: kept");
        let mut b = BatchBuilder::new();
        b.push(1_000, None, &[], b"v");
        log.append(b.finish(), 0).unwrap();
        log.flush().unwrap();
        drop(log);
        drop(store.open_log("t", 0, big, writable()).unwrap());
        assert_eq!(read_scrubbed(&*sim, &dir), None, "batches: walked soon");
    }

    /// A simulated disk that counts the bytes read from it.
    #[derive(Debug)]
    struct Counting {
        sim: Arc<SimFs>,
        read: Arc<std::sync::atomic::AtomicU64>,
    }

    #[derive(Debug)]
    struct CountingFile {
        file: Arc<dyn VFile>,
        read: Arc<std::sync::atomic::AtomicU64>,
    }

    impl Vfs for Counting {
        fn open(&self, path: &Path, create: bool) -> std::io::Result<Arc<dyn VFile>> {
            let file = self.sim.open(path, create)?;
            let read = Arc::clone(&self.read);
            Ok(Arc::new(CountingFile { file, read }))
        }
        fn open_read(&self, path: &Path) -> std::io::Result<Arc<dyn VFile>> {
            let file = self.sim.open_read(path)?;
            let read = Arc::clone(&self.read);
            Ok(Arc::new(CountingFile { file, read }))
        }
        fn exists(&self, path: &Path) -> bool {
            self.sim.exists(path)
        }
        fn remove(&self, path: &Path) -> std::io::Result<()> {
            self.sim.remove(path)
        }
        fn remove_dir(&self, dir: &Path) -> std::io::Result<()> {
            self.sim.remove_dir(dir)
        }
        fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
            self.sim.rename(from, to)
        }
        fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
            self.sim.sync_dir(dir)
        }
        fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
            self.sim.create_dir_all(dir)
        }
        fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
            self.sim.list(dir)
        }
    }

    impl VFile for CountingFile {
        fn read_at(&self, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
            let n = self.file.read_at(buf, pos)?;
            self.read
                .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            Ok(n)
        }
        fn write_all_at(&self, buf: &[u8], pos: u64) -> std::io::Result<()> {
            self.file.write_all_at(buf, pos)
        }
        fn len(&self) -> std::io::Result<u64> {
            self.file.len()
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.file.set_len(len)
        }
        fn allocate(&self, offset: u64, len: u64) -> std::io::Result<()> {
            self.file.allocate(offset, len)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.file.sync_data()
        }
        fn map_mut(&self, len: u64) -> std::io::Result<Box<dyn crate::storage::fs::MapMut>> {
            self.file.map_mut(len)
        }
        fn as_file(&self) -> Option<&std::fs::File> {
            None
        }
        fn modified_ms(&self) -> std::io::Result<i64> {
            self.file.modified_ms()
        }

        fn set_modified_ms(&self, ms: i64) -> std::io::Result<()> {
            self.file.set_modified_ms(ms)
        }
    }

    /// Review of issue 23 (the scrub): confirming damage, which the
    /// broker does under the partition's log lock, walked the whole
    /// segment again from its start, unpaced: up to a segment's size
    /// (1 GiB by default) read and CRC-checked while no producer or
    /// fetcher of the partition could go on. It reads the damaged batch
    /// again, not the segment: here the damage is in the last batch of an
    /// 8 MiB segment.
    #[test]
    fn confirming_damage_reads_the_damaged_batch_not_the_segment() {
        let sim = Arc::new(SimFs::new());
        sim.create_dir_all_durable(Path::new("/p"));
        let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counting = Counting {
            sim: Arc::clone(&sim),
            read: Arc::clone(&read),
        };
        let config = LogConfig {
            segment_bytes: 64 << 20,
            ..LogConfig::default()
        };
        let mut log = Log::open(Arc::new(counting), Path::new("/p"), config, writable()).unwrap();
        for i in 0..512u32 {
            let mut b = BatchBuilder::new();
            b.push(
                1_000 + i64::from(i),
                None,
                &[],
                &[b'a' + (i % 26) as u8; 16 << 10],
            );
            log.append(b.finish(), 0).unwrap();
        }
        log.flush().unwrap();
        let extent = log.extents().pop().unwrap();
        assert!(extent.end > 8 << 20, "{}", extent.end);
        overwrite(&sim, &extent.path, extent.end - 100, &[0xff]);
        let found = check(&extent, &mut |_| true).unwrap().expect("damage");
        assert_eq!(found.offset, 511);
        let before = read.load(std::sync::atomic::Ordering::Relaxed);
        assert!(confirm(&log, &extent, &found).unwrap());
        let under_lock = read.load(std::sync::atomic::Ordering::Relaxed) - before;
        assert!(
            under_lock <= 1 << 20,
            "{under_lock} bytes read to confirm damage in one batch of {} bytes",
            16 << 10
        );
    }

    /// A pace that answers `false` stops the walk before the damage.
    #[test]
    fn a_stopped_pace_stops_the_walk() {
        let sim = Arc::new(SimFs::new());
        let log = log_of_batches(&sim);
        let victim = log.extents()[1].clone();
        rot(&sim, &victim);
        assert_eq!(check(&victim, &mut |_| false).unwrap(), None);
    }
}
