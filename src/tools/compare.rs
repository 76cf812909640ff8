//! `klog-dump --compare`: the replicas of one partition, side by side. A
//! follower appends its leader's batches byte for byte at the same offsets
//! ([`crate::broker`]'s replication), so below the high watermark every
//! replica holds the same batches, header and records, whatever its segment
//! files' boundaries (each broker rolls its own). This walks every
//! replica's batches in offset order, in step, and finds the first offset
//! where they differ: a batch whose bytes are not the same (named by its
//! first differing record, or its base offset when the header differs), or
//! a replica that ends while the others go on.
//!
//! Below the high watermark (given, else the lowest end of the replicas) a
//! difference is a problem: a committed record that is not the same
//! everywhere. At or above it a difference is expected, an uncommitted
//! tail that the next leader's epoch truncates, and is only a note. A
//! replica whose log stops at damage (a bad batch header, a broken offset
//! sequence, a segment header that is not one) is a problem too, wherever
//! it stops; a torn tail (a batch being written, zeros a crash left) is
//! just where that replica ends.
//!
//! Replicas of a compacted log (a segment with gaps, cleaned or copied:
//! [`crate::storage::segment`]) clean each on its own, so below the high
//! watermark their batches may differ in presence. From where their
//! batches stop being the same, the walk goes batch by batch in base
//! offset order, and only a record two replicas both hold at an offset,
//! in batches both kept (the same base offset), and hold differently is a
//! difference (a batch or a record one of them cleaned away is not).
//!
//! Each replica is read a chunk at a time ([`fs::RANGE_CHUNK_BYTES`], or one
//! whole batch when larger) into a buffer of its own: memory is bounded by
//! the number of replicas times the largest batch. The replicas compared
//! start at the highest of their first offsets (retention deletes each
//! one's head on its own schedule). Each replica's leader epoch file is
//! shown as it is; `klog-dump --verify` checks it against its own log.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};
use crate::storage::batches::Batches;
use crate::storage::epoch::{EpochEntry, Epochs};
use crate::storage::fs::{self, VFile, Vfs};
use crate::storage::record::{legacy, Batch, BatchHeader, Codec, DecodeError, Format};
use crate::storage::{lock, recover, segment};

mod compacted;
mod print;
use compacted::in_step_compacted;
use print::{print_json, print_text};

/// How a replica's log ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// At the end of its last segment.
    Clean,
    /// At a torn tail: a batch being written, or zeros a crash left.
    Torn(String),
    /// At damage: bytes no writer leaves, or a broken offset sequence.
    Damaged(String),
}

impl Tail {
    /// `clean`, `torn` or `damaged`.
    pub fn name(&self) -> &'static str {
        match self {
            Tail::Clean => "clean",
            Tail::Torn(_) => "torn",
            Tail::Damaged(_) => "damaged",
        }
    }

    /// What stopped the walk, unless it ended cleanly.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Tail::Clean => None,
            Tail::Torn(why) | Tail::Damaged(why) => Some(why),
        }
    }
}

/// One replica, as read.
#[derive(Debug, Clone)]
pub struct Replica {
    /// Its partition directory.
    pub path: PathBuf,
    /// Its first offset (its first segment's base).
    pub start_offset: u64,
    /// One past its last whole batch.
    pub end_offset: u64,
    /// How its log ends.
    pub tail: Tail,
    /// Its leader epoch file's entries, or why there are none (missing,
    /// damaged).
    pub epochs: std::result::Result<Vec<EpochEntry>, String>,
    /// The process writing it, if one is (a running broker).
    pub writer_pid: Option<u32>,
}

/// The first place where the replicas differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The first offset that is not the same on every replica.
    pub offset: u64,
    /// Who differs and how.
    pub what: String,
}

/// What comparing the replicas found.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Each replica, in the order given.
    pub replicas: Vec<Replica>,
    /// The offset the comparison started at: the highest first offset.
    pub compared_from: u64,
    /// Below it the replicas must be identical.
    pub high_watermark: u64,
    /// Whether the high watermark was given (else: the lowest end).
    pub high_watermark_given: bool,
    /// The first difference, if any (or, when they all end together below
    /// the high watermark, where they end).
    pub difference: Option<Difference>,
    /// A replica holds compacted segments (with gaps): each replica cleans
    /// on its own, so their batches below the high watermark may differ;
    /// the records two of them hold at an offset may not.
    pub compacted: bool,
}

impl Comparison {
    /// Whether the first difference is below the high watermark.
    pub fn below_high_watermark(&self) -> bool {
        self.difference
            .as_ref()
            .is_some_and(|d| d.offset < self.high_watermark)
    }

    /// The problems found: a difference below the high watermark, and
    /// each replica that stops at damage.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(d) = self
            .difference
            .as_ref()
            .filter(|_| self.below_high_watermark())
        {
            problems.push(format!(
                "the replicas differ at offset {}, below the high watermark {}: {}",
                d.offset, self.high_watermark, d.what
            ));
        }
        for r in &self.replicas {
            if let Tail::Damaged(why) = &r.tail {
                problems.push(format!(
                    "{}: damaged at offset {}: {why}",
                    r.path.display(),
                    r.end_offset
                ));
            }
        }
        problems
    }
}

/// What to print.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The high watermark (default: the lowest end of the replicas).
    pub high_watermark: Option<u64>,
    /// One JSON object per line.
    pub json: bool,
    /// Only errors and problems.
    pub quiet: bool,
}

/// Compares the replicas in `dirs` and prints what it found: a table (or
/// JSON lines) and the verdict on stdout, problems and notes on stderr.
/// Returns the number of problems.
pub fn run(vfs: &dyn Vfs, dirs: &[PathBuf], options: &Options) -> anyhow::Result<usize> {
    let comparison = compare(vfs, dirs, options.high_watermark)?;
    let say = super::Say {
        quiet: options.quiet,
    };
    for r in &comparison.replicas {
        if let Some(pid) = r.writer_pid {
            say.info(format_args!(
                "{} is being written by pid {pid}: its tail may still move",
                r.path.display()
            ));
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if options.json {
        print_json(&mut out, &comparison)?;
    } else {
        print_text(&mut out, &comparison)?;
    }
    out.flush()?;
    if let Some(d) = comparison.difference.as_ref() {
        if !comparison.below_high_watermark() {
            say.info(format_args!(
                "note: the replicas differ at offset {}, at or above the high watermark {} (an uncommitted tail, expected): {}",
                d.offset, comparison.high_watermark, d.what
            ));
        }
    }
    let problems = comparison.problems();
    for p in &problems {
        crate::diag::line(format_args!("problem: {p}"));
    }
    Ok(problems.len())
}

/// Compares the replicas in `dirs` (partition directories of the same
/// partition, two or more): below `high_watermark`, else below the
/// lowest end.
pub fn compare(vfs: &dyn Vfs, dirs: &[PathBuf], high_watermark: Option<u64>) -> Result<Comparison> {
    if dirs.len() < 2 {
        return Err(Error::Config(format!(
            "a comparison needs two replicas or more, not {}",
            dirs.len()
        )));
    }
    let mut walks = dirs
        .iter()
        .map(|d| Walk::open(vfs, d))
        .collect::<Result<Vec<_>>>()?;
    for w in &mut walks {
        w.fill()?;
    }
    let compared_from = walks.iter().map(Walk::end).max().unwrap_or(0);
    for w in &mut walks {
        w.skip_below(compared_from)?;
    }
    let mut difference = in_step(&mut walks, compared_from)?;
    for w in &mut walks {
        w.drain()?;
    }
    let lowest_end = walks.iter().map(Walk::end).min().unwrap_or(0);
    let high_watermark_given = high_watermark.is_some();
    let high_watermark = high_watermark.unwrap_or(lowest_end);
    if difference.is_none() && lowest_end < high_watermark {
        difference = Some(Difference {
            offset: lowest_end,
            what: format!("every replica ends at {lowest_end}"),
        });
    }
    let compacted = walks.iter().any(|w| w.compacted);
    let replicas = walks
        .into_iter()
        .map(|w| w.into_replica(vfs))
        .collect::<Result<Vec<_>>>()?;
    Ok(Comparison {
        replicas,
        compared_from,
        high_watermark,
        high_watermark_given,
        difference,
        compacted,
    })
}

/// Walks the replicas in step from `from` until their batches differ or
/// they all end.
fn in_step(walks: &mut [Walk<'_>], from: u64) -> Result<Option<Difference>> {
    let mut at = from;
    loop {
        for w in walks.iter_mut() {
            w.fill()?;
        }
        let first = walks[0].head();
        if !walks.iter().all(|w| w.head() == first) && walks.iter().any(|w| w.compacted) {
            return in_step_compacted(walks);
        }
        if !walks.iter().all(|w| w.head() == first) {
            // A follower holds a legacy leader's batches as a fetch served
            // them, converted: compare them as Kafka batches.
            let kafka: Vec<Option<Vec<u8>>> =
                walks.iter().map(|w| w.head().map(kafka_form)).collect();
            if !kafka.iter().all(|h| h.is_some() && *h == kafka[0]) {
                let heads: Vec<Option<Stored<'_>>> = kafka
                    .iter()
                    .map(|h| h.as_deref().map(|b| (Format::Kafka, b)))
                    .collect();
                return Ok(differ(walks, &heads, at));
            }
        }
        let Some(next) = first.and_then(header).map(|h| h.next_offset()) else {
            return Ok(None);
        };
        at = next;
        for w in walks.iter_mut() {
            w.advance();
        }
    }
}

/// A stored batch's bytes and their format: two replicas hold the same
/// batch when both are equal.
type Stored<'a> = (Format, &'a [u8]);

/// A stored batch as a fetch serves it: a legacy one converted to a Kafka
/// batch (which a follower of a legacy leader holds); one that does not
/// convert (damaged) as it is.
fn kafka_form((format, batch): Stored<'_>) -> Vec<u8> {
    let mut kafka = Vec::new();
    match format {
        Format::Legacy if legacy::to_kafka(batch, &mut kafka).is_ok() => kafka,
        _ => batch.to_vec(),
    }
}

/// The batch header of whole, judged batch bytes.
fn header((format, batch): Stored<'_>) -> Option<BatchHeader> {
    BatchHeader::decode(format, batch, BATCH_BYTES_MAX).ok()
}

/// Where the replicas' next batches (`heads`, at offset `at`) differ, if
/// they do: the largest group of equal replicas against each other group.
fn differ(walks: &[Walk<'_>], heads: &[Option<Stored<'_>>], at: u64) -> Option<Difference> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, head) in heads.iter().enumerate() {
        match groups.iter_mut().find(|g| heads[g[0]] == *head) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    if groups.len() == 1 {
        return None;
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
    let names = |g: &[usize]| {
        let names: Vec<String> = g
            .iter()
            .map(|&i| walks[i].dir.display().to_string())
            .collect();
        names.join(", ")
    };
    let majority = &groups[0];
    let mut found: Option<Difference> = None;
    for other in &groups[1..] {
        let (ours, theirs) = (names(majority), names(other));
        let (offset, what) = match (heads[majority[0]], heads[other[0]]) {
            (Some(a), Some(b)) => {
                let (offset, how) = first_difference(a, b, at, (&ours, &theirs));
                (offset, format!("{theirs} against {ours}: {how}"))
            }
            (Some(_), None) => {
                let tail = walks[other[0]].tail_said();
                (at, format!("{theirs} ends there ({tail}), {ours} goes on"))
            }
            (None, _) => (at, format!("{theirs} goes on past where {ours} ends")),
        };
        if found.as_ref().is_none_or(|f| offset < f.offset) {
            found = Some(Difference { offset, what });
        }
    }
    found
}

/// The first offset where two different batches at `at` differ, and how:
/// their base offsets, their headers (at the base offset), or the first
/// record whose bytes differ or that does not decode. `names` are the
/// holders of `a` and `b`, for the message.
fn first_difference(
    (fa, a): Stored<'_>,
    (fb, b): Stored<'_>,
    at: u64,
    names: (&str, &str),
) -> (u64, String) {
    let (Ok(x), Ok(y)) = (
        Batch::decode(fa, a, BATCH_BYTES_MAX),
        Batch::decode(fb, b, BATCH_BYTES_MAX),
    ) else {
        return (at, "other bytes".into());
    };
    if fa != fb {
        let how = format!(
            "the batch at offset {} is stored in {} format against {}",
            x.header.base_offset,
            fb.name(),
            fa.name()
        );
        return (x.header.base_offset.min(y.header.base_offset), how);
    }
    let (hx, hy) = (x.header, y.header);
    if hx.base_offset != hy.base_offset {
        return (
            hx.base_offset.min(hy.base_offset),
            format!(
                "a batch at offset {} against one at offset {}",
                hy.base_offset, hx.base_offset
            ),
        );
    }
    if hx.codec() != Codec::None || hy.codec() != Codec::None {
        // Compressed records are compared as the bytes they are.
        return (hx.base_offset, header_difference(&hx, &hy));
    }
    let mut rx = x.records(RECORD_BYTES_MAX_LIMIT);
    let mut ry = y.records(RECORD_BYTES_MAX_LIMIT);
    let mut offset = hx.base_offset;
    loop {
        let (px, py) = (rx.position_in_batch(), ry.position_in_batch());
        match (rx.next(), ry.next()) {
            (None, None) => break,
            (Some(Ok(_)), Some(Ok(_)))
                if a[px..rx.position_in_batch()] == b[py..ry.position_in_batch()] =>
            {
                offset += 1;
            }
            (ex, ey) => {
                let said = |r: Option<std::result::Result<_, DecodeError>>, whose: &str| match r {
                    Some(Err(e)) => format!("; {whose}'s does not decode ({e})"),
                    None => format!("; {whose}'s batch has no record {offset}"),
                    Some(Ok(_)) => String::new(),
                };
                let (ours, theirs) = (said(ex, names.0), said(ey, names.1));
                return (offset, format!("record {offset} differs{theirs}{ours}"));
            }
        }
    }
    (hx.base_offset, header_difference(&hx, &hy))
}

/// How two batch headers with the same base offset differ, in words.
fn header_difference(x: &BatchHeader, y: &BatchHeader) -> String {
    let mut fields = Vec::new();
    let pairs: [(&str, i128, i128); 7] = [
        ("leader epoch", x.leader_epoch.into(), y.leader_epoch.into()),
        ("record count", x.record_count.into(), y.record_count.into()),
        ("batch length", x.batch_length.into(), y.batch_length.into()),
        (
            "base timestamp",
            x.base_timestamp.into(),
            y.base_timestamp.into(),
        ),
        (
            "max timestamp",
            x.max_timestamp.into(),
            y.max_timestamp.into(),
        ),
        ("magic", x.magic.into(), y.magic.into()),
        ("attributes", x.attributes.into(), y.attributes.into()),
    ];
    for (name, a, b) in pairs {
        if a != b {
            fields.push(format!("{name} {b} against {a}"));
        }
    }
    if fields.is_empty() {
        fields.push("batch header bytes".into());
    }
    format!(
        "the batch at offset {} differs: {}",
        x.base_offset,
        fields.join(", ")
    )
}

/// What the head of one walk is.
enum Head {
    /// A whole batch with a valid header.
    Batch,
    /// The end of the segment's bytes.
    SegmentEnd,
    /// More bytes needed: at least this many from the head on.
    Need(u64),
    /// The walk stops here.
    Stop(Tail),
}

/// One replica's batches in offset order across its segments, read a
/// chunk at a time into a buffer of its own.
struct Walk<'v> {
    vfs: &'v dyn Vfs,
    dir: PathBuf,
    segments: std::vec::IntoIter<(u64, PathBuf)>,
    /// The segment being read, its path and length.
    file: Option<(std::sync::Arc<dyn VFile>, PathBuf, u64)>,
    /// The format of its batches.
    format: Format,
    /// Bytes of that segment from `buf_position` on.
    buf: Vec<u8>,
    buf_position: u64,
    /// Where the head batch starts in `buf`.
    at: usize,
    /// The first segment's base offset.
    start_offset: Option<u64>,
    /// The offset the head batch starts at: one past the last batch
    /// passed.
    next_offset: Option<u64>,
    /// How the walk ended, once it has.
    ended: Option<Tail>,
    /// Below which offset the segment's batches may skip offsets.
    skips_below: Option<u64>,
    /// The end of the last cleaned segment read: segments based below it
    /// are ones it replaced, which a crash left behind.
    cleaned_end: Option<u64>,
    /// It holds a segment with gaps (compacted).
    compacted: bool,
}

impl<'v> Walk<'v> {
    fn open(vfs: &'v dyn Vfs, dir: &Path) -> Result<Walk<'v>> {
        let (segments, _) = recover::list_partition(vfs, dir)?;
        Ok(Walk {
            vfs,
            dir: dir.to_path_buf(),
            segments: segments.into_iter(),
            file: None,
            format: Format::Kafka,
            buf: Vec::new(),
            buf_position: 0,
            at: 0,
            start_offset: None,
            next_offset: None,
            ended: None,
            skips_below: None,
            cleaned_end: None,
            compacted: false,
        })
    }

    /// One past the last batch passed (or where the log starts).
    fn end(&self) -> u64 {
        self.next_offset.or(self.start_offset).unwrap_or(0)
    }

    /// The head batch's bytes, once [`Walk::fill`] found one.
    fn head(&self) -> Option<Stored<'_>> {
        if self.ended.is_some() {
            return None;
        }
        let rest = &self.buf[self.at..];
        header((self.format, rest)).map(|h| (self.format, &rest[..h.total_bytes() as usize]))
    }

    /// Passes the head batch.
    fn advance(&mut self) {
        if let Some(h) = self.head().and_then(header) {
            self.at += h.total_bytes() as usize;
            self.next_offset = Some(h.next_offset());
        }
    }

    /// Passes every batch that ends at or below `from`.
    fn skip_below(&mut self, from: u64) -> Result<()> {
        self.fill()?;
        while let Some(h) = self.head().and_then(header) {
            if h.next_offset() > from {
                break;
            }
            self.advance();
            self.fill()?;
        }
        Ok(())
    }

    /// Passes every batch to the end of the log.
    fn drain(&mut self) -> Result<()> {
        self.fill()?;
        while self.head().is_some() {
            self.advance();
            self.fill()?;
        }
        Ok(())
    }

    /// How the walk ended, said for a message.
    fn tail_said(&self) -> String {
        match &self.ended {
            Some(Tail::Clean) | None => "the end of its log".into(),
            Some(t) => format!("{}: {}", t.name(), t.reason().unwrap_or("")),
        }
    }

    /// Makes the head a whole batch in the buffer, or ends the walk.
    fn fill(&mut self) -> Result<()> {
        while self.ended.is_none() {
            let Some(len) = self.file.as_ref().map(|(_, _, len)| *len) else {
                self.open_next()?;
                continue;
            };
            let position = self.buf_position + self.at as u64;
            match self.judge_head(len) {
                Head::Batch => return Ok(()),
                Head::SegmentEnd => {
                    self.file = None;
                    // A cleaned segment stands for the offsets to its end.
                    if let (Some(end), Some(next)) = (self.cleaned_end, self.next_offset) {
                        self.next_offset = Some(next.max(end));
                    }
                }
                Head::Need(bytes) => self.read_from(position, bytes)?,
                Head::Stop(tail) => self.ended = Some(tail),
            }
        }
        Ok(())
    }

    /// What the head of the current segment (of `len` bytes) is.
    fn judge_head(&self, len: u64) -> Head {
        let path = self
            .file
            .as_ref()
            .map_or(Path::new(""), |(_, p, _)| p.as_path());
        let position = self.buf_position + self.at as u64;
        let held_end = self.buf_position + self.buf.len() as u64;
        let rest = &self.buf[self.at..];
        match Batches::new(self.format, rest, BATCH_BYTES_MAX).next() {
            None if position >= len => Head::SegmentEnd,
            None => Head::Need(fs::RANGE_CHUNK_BYTES),
            Some(Ok((_, batch))) => match self.next_offset {
                Some(expected)
                    if !crate::storage::batches::follows(
                        self.skips_below,
                        expected,
                        batch.header.base_offset,
                        batch.header.next_offset(),
                    ) =>
                {
                    Head::Stop(Tail::Damaged(format!(
                        "{}: position {position}: a batch at offset {}, expected {expected}",
                        path.display(),
                        batch.header.base_offset
                    )))
                }
                _ => Head::Batch,
            },
            Some(Err(stop)) => match stop.error {
                DecodeError::Truncated { needed_bytes, .. } if held_end < len => {
                    Head::Need(needed_bytes.max(fs::RANGE_CHUNK_BYTES))
                }
                _ => {
                    let why = format!(
                        "{}: position {position}: {} bytes not a whole batch ({})",
                        path.display(),
                        len - position,
                        stop.error
                    );
                    Head::Stop(match stop.is_torn_tail() {
                        true => Tail::Torn(why),
                        false => Tail::Damaged(why),
                    })
                }
            },
        }
    }

    /// Reads up to `bytes` of the current segment from `position` into
    /// the buffer, which then starts there.
    fn read_from(&mut self, position: u64, bytes: u64) -> Result<()> {
        let (file, path, len) = self.file.as_ref().expect("a segment open");
        let want = bytes.min(len - position) as usize;
        self.buf.resize(want, 0);
        file.read_exact_at(&mut self.buf, position)
            .ctx("read", path)?;
        self.buf_position = position;
        self.at = 0;
        Ok(())
    }

    /// Opens the next segment, or ends the walk after the last.
    fn open_next(&mut self) -> Result<()> {
        let Some((_, path)) = self.segments.next() else {
            self.ended = Some(Tail::Clean);
            return Ok(());
        };
        let file = self.vfs.open_read(&path).ctx("open", &path)?;
        let len = file.len().ctx("stat", &path)?;
        let mut head = [0u8; segment::SEGMENT_HEADER_BYTES];
        let n = file.read_at(&mut head, 0).ctx("read", &path)?;
        let base = match segment::read_header(&head[..n]) {
            Ok(h) if self.cleaned_end.is_some_and(|end| h.base_offset < end) => {
                // Replaced by the cleaned segment before it.
                return Ok(());
            }
            Ok(h) => {
                self.format = h.format;
                self.skips_below = h.skips_below();
                self.compacted |= h.gaps;
                if h.end.is_some() {
                    self.cleaned_end = h.end;
                }
                h.base_offset
            }
            Err(why) => {
                let why = format!("{}: position 0: {why}", path.display());
                self.ended = Some(Tail::Damaged(why));
                return Ok(());
            }
        };
        // A segment with gaps may start past where the one before ends.
        let past_gap = self.skips_below == Some(u64::MAX);
        if let Some(expected) = self
            .next_offset
            .filter(|&e| e != base && !(past_gap && base > e))
        {
            let why = format!(
                "{}: starts at offset {base}, expected {expected}",
                path.display()
            );
            self.ended = Some(Tail::Damaged(why));
            return Ok(());
        }
        self.start_offset.get_or_insert(base);
        self.next_offset = Some(self.next_offset.unwrap_or(base).max(base));
        self.buf.clear();
        self.buf_position = segment::SEGMENT_HEADER_BYTES as u64;
        self.at = 0;
        self.file = Some((file, path, len));
        Ok(())
    }

    /// The replica as read, with its epoch file.
    fn into_replica(self, vfs: &dyn Vfs) -> Result<Replica> {
        let epochs = match Epochs::read(vfs, &self.dir)? {
            None => Err("missing".to_string()),
            Some(Err(why)) => Err(why),
            Some(Ok(e)) => Ok(e.entries().to_vec()),
        };
        Ok(Replica {
            start_offset: self.start_offset.unwrap_or(0),
            end_offset: self.end(),
            tail: self.ended.clone().unwrap_or(Tail::Clean),
            epochs,
            writer_pid: lock::holder(&self.dir),
            path: self.dir,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::log::{Log, LogConfig, OpenOptions};
    use crate::storage::record::{self, BatchBuilder};

    const WRITE: OpenOptions = OpenOptions {
        writable: true,
        lock: false,
    };

    /// A batch as a leader stores it: records `base..base + n`, value
    /// `v<offset>` (or `changed` at offset `changed.0`), of `epoch`.
    fn batch(base: u64, n: u64, epoch: u32, changed: Option<(u64, &str)>) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for o in base..base + n {
            let value = match changed {
                Some((at, v)) if at == o => v.to_string(),
                _ => format!("v{o:04}-{}", "x".repeat(40)),
            };
            b.push(1000 + o as i64, None, &[], value.as_bytes());
        }
        let mut bytes = b.finish().to_vec();
        record::stamp(&mut bytes, base, epoch);
        bytes
    }

    /// The batches of offsets `0..end`, 10 records each, epoch 1 below 30
    /// and 2 from there.
    fn batches(end: u64, changed: Option<(u64, &str)>) -> Vec<u8> {
        let mut bytes = Vec::new();
        for base in (0..end).step_by(10) {
            let epoch = if base < 30 { 1 } else { 2 };
            bytes.extend(batch(base, 10.min(end - base), epoch, changed));
        }
        bytes
    }

    /// A replica at `/data/<name>/t-0` holding `bytes` (whole batches from
    /// offset 0), in segments of at most `segment_bytes`.
    fn replica(sim: &SimFs, name: &str, bytes: &[u8], segment_bytes: u64) -> PathBuf {
        let dir = PathBuf::from(format!("/data/{name}/t-0"));
        sim.create_dir_all_durable(&dir);
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        let config = LogConfig {
            segment_bytes,
            index_interval_bytes: 200,
            index_bytes_max: 4096,
            retention_ms: None,
            ..LogConfig::default()
        };
        let mut log = Log::open(vfs, &dir, config, WRITE).unwrap();
        // One batch at a time: a segment rolls only between appends.
        let mut at = 0;
        while at < bytes.len() {
            let len = BatchHeader::decode(Format::Kafka, &bytes[at..], BATCH_BYTES_MAX)
                .unwrap()
                .total_bytes() as usize;
            log.append_replicated(&bytes[at..at + len], 0).unwrap();
            at += len;
        }
        log.close().unwrap();
        dir
    }

    fn segments(sim: &SimFs, dir: &Path) -> usize {
        recover::list_partition(sim, dir).unwrap().0.len()
    }

    #[test]
    fn replicas_with_other_segment_boundaries_are_identical() {
        let sim = SimFs::new();
        let a = replica(&sim, "a", &batches(100, None), 4096);
        let b = replica(&sim, "b", &batches(100, None), 1 << 20);
        assert!(segments(&sim, &a) > 1 && segments(&sim, &b) == 1);
        let c = compare(&sim, &[a, b], None).unwrap();
        assert_eq!(c.difference, None);
        assert_eq!((c.high_watermark, c.compared_from), (100, 0));
        assert!(c.problems().is_empty());
        for r in &c.replicas {
            assert_eq!(
                (r.start_offset, r.end_offset, &r.tail),
                (0, 100, &Tail::Clean)
            );
            let epochs: Vec<(u32, u64)> = r
                .epochs
                .as_ref()
                .unwrap()
                .iter()
                .map(|e| (e.epoch, e.start_offset))
                .collect();
            assert_eq!(epochs, [(1, 0), (2, 30)]);
        }
    }

    /// Replicas of a compacted log: a gap is no damage; replicas that
    /// cleaned apart differ below the high watermark without a problem.
    #[test]
    fn compacted_replicas_take_gaps_and_may_differ() {
        let sim = SimFs::new();
        let all = batches(100, None);
        let batch_bytes = all.len() / 10;
        // Offsets 30..40 compacted away.
        let mut gapped = all[..3 * batch_bytes].to_vec();
        gapped.extend_from_slice(&all[4 * batch_bytes..]);
        let a = replica(&sim, "a", &gapped, 4096);
        let b = replica(&sim, "b", &gapped, 1 << 20);
        let c = replica(&sim, "c", &all, 4096);
        let same = compare(&sim, &[a.clone(), b], None).unwrap();
        assert_eq!(same.difference, None);
        assert!(same.compacted && same.problems().is_empty());
        assert!(same
            .replicas
            .iter()
            .all(|r| r.tail == Tail::Clean && r.end_offset == 100));
        // One holds what the other's cleaner took: they agree.
        let apart = compare(&sim, &[a.clone(), c], Some(100)).unwrap();
        assert_eq!(apart.difference, None);
        assert!(apart.compacted && apart.problems().is_empty());
        // A record that differs at an offset both hold: a problem, found
        // past the batches that differ in presence.
        let changed = format!("v0057-{}", "y".repeat(40));
        let all_changed = batches(100, Some((57, &changed)));
        let mut changed_gapped = all_changed[..3 * batch_bytes].to_vec();
        changed_gapped.extend_from_slice(&all_changed[5 * batch_bytes..]);
        let d = replica(&sim, "d", &changed_gapped, 4096);
        let clash = compare(&sim, &[a, d], Some(100)).unwrap();
        let found = clash.difference.as_ref().unwrap();
        assert_eq!(found.offset, 57, "{found:?}");
        assert!(found.what.contains("record 57 differs"), "{found:?}");
        assert_eq!(clash.problems().len(), 1);
    }

    #[test]
    fn a_changed_record_is_named_by_its_offset_whoever_holds_it() {
        let sim = SimFs::new();
        let good = batches(100, None);
        let a = replica(&sim, "a", &good, 4096);
        // The same length: only the record's bytes differ, not the header.
        let changed = format!("v0057-{}", "y".repeat(40));
        let b = replica(&sim, "b", &batches(100, Some((57, &changed))), 1 << 20);
        let c = replica(&sim, "c", &good, 8192);
        for dirs in [[&a, &b, &c], [&b, &a, &c]] {
            let dirs: Vec<PathBuf> = dirs.into_iter().cloned().collect();
            let found = compare(&sim, &dirs, None).unwrap();
            let d = found.difference.clone().unwrap();
            assert_eq!(d.offset, 57, "{d:?}");
            assert!(
                d.what
                    .starts_with("/data/b/t-0 against /data/a/t-0, /data/c/t-0")
                    || d.what
                        .starts_with("/data/b/t-0 against /data/c/t-0, /data/a/t-0")
                    || d.what
                        .starts_with("/data/b/t-0 against /data/a/t-0, /data/c/t-0"),
                "{d:?}"
            );
            assert!(d.what.contains("record 57 differs"), "{d:?}");
            assert!(found.below_high_watermark());
            assert_eq!(found.problems().len(), 1);
        }
        // Above a given high watermark it is a tail, not a problem.
        let found = compare(&sim, &[a, b], Some(57)).unwrap();
        assert_eq!(found.difference.as_ref().unwrap().offset, 57);
        assert!(found.problems().is_empty());
    }

    #[test]
    fn a_replica_that_ends_early_differs_where_it_ends() {
        let sim = SimFs::new();
        let a = replica(&sim, "a", &batches(100, None), 4096);
        let b = replica(&sim, "b", &batches(60, None), 4096);
        let dirs = [a, b];
        // The lowest end is the default high watermark: an uncommitted tail.
        let c = compare(&sim, &dirs, None).unwrap();
        let d = c.difference.clone().unwrap();
        assert_eq!((d.offset, c.high_watermark), (60, 60));
        assert!(d.what.contains("/data/b/t-0 ends there"), "{d:?}");
        assert!(!c.below_high_watermark() && c.problems().is_empty());
        let ends: Vec<u64> = c.replicas.iter().map(|r| r.end_offset).collect();
        assert_eq!(ends, [100, 60]);
        // A high watermark past its end: a problem.
        let c = compare(&sim, &dirs, Some(100)).unwrap();
        assert_eq!(c.difference.as_ref().unwrap().offset, 60);
        assert!(c.problems()[0].contains("offset 60, below the high watermark 100"));
        // Every replica ends below the high watermark: a problem too.
        let c = replica(&sim, "c", &batches(60, None), 1 << 20);
        let c = compare(&sim, &[dirs[1].clone(), c], Some(70)).unwrap();
        assert_eq!(c.difference.as_ref().unwrap().offset, 60);
        assert_eq!(c.problems().len(), 1);
    }

    #[test]
    fn another_leader_epoch_differs_at_the_batch_base() {
        let sim = SimFs::new();
        let a = replica(&sim, "a", &batches(50, None), 4096);
        let mut other = batches(40, None);
        other.extend(batch(40, 10, 3, None));
        let b = replica(&sim, "b", &other, 4096);
        let d = compare(&sim, &[a, b], None).unwrap().difference.unwrap();
        assert_eq!(d.offset, 40);
        assert!(d.what.contains("leader epoch 3 against 2"), "{d:?}");
    }

    #[test]
    fn a_torn_tail_ends_a_replica_and_damage_is_a_problem() {
        let sim = SimFs::new();
        let a = replica(&sim, "a", &batches(50, None), 1 << 20);
        let b = replica(&sim, "b", &batches(50, None), 1 << 20);
        let segment = b.join(segment::log_file_name(0));
        let file = sim.open(&segment, false).unwrap();
        let len = file.len().unwrap();
        // Half of a next batch: torn.
        file.write_all_at(&batch(50, 10, 2, None)[..30], len)
            .unwrap();
        let c = compare(&sim, &[a.clone(), b.clone()], None).unwrap();
        assert_eq!(c.difference, None, "the torn batch is not read");
        assert_eq!(c.replicas[1].tail.name(), "torn");
        assert!(c.problems().is_empty());
        // The header of the batch at 40 damaged: the replica ends at 40,
        // damaged, and that is a problem even at the lowest end.
        let at = len - batch(40, 10, 2, None).len() as u64;
        file.write_all_at(&[0xff], at + 20).unwrap();
        let c = compare(&sim, &[a, b], None).unwrap();
        assert_eq!(c.replicas[1].end_offset, 40);
        assert_eq!(c.replicas[1].tail.name(), "damaged");
        assert_eq!(c.high_watermark, 40);
        let problems = c.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("damaged at offset 40"), "{problems:?}");
    }

    #[test]
    fn replicas_are_compared_from_the_highest_start() {
        let sim = SimFs::new();
        let a = replica(&sim, "a", &batches(100, None), 4096);
        let b = PathBuf::from("/data/b/t-0");
        sim.create_dir_all_durable(&b);
        let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
        let config = LogConfig {
            index_bytes_max: 4096,
            retention_ms: None,
            ..LogConfig::default()
        };
        let mut log = Log::open(vfs, &b, config, WRITE).unwrap();
        log.reset_to(30).unwrap();
        let tail: Vec<u8> = batches(100, None)[batches(30, None).len()..].to_vec();
        log.append_replicated(&tail, 0).unwrap();
        log.close().unwrap();
        let c = compare(&sim, &[a, b], None).unwrap();
        assert_eq!(c.compared_from, 30);
        assert_eq!(c.difference, None);
        assert_eq!(c.replicas[1].start_offset, 30);
    }
}
