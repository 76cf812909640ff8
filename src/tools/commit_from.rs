//! `klog-consume -G GROUP -J --commit-from ACKS`: a group member that
//! commits a record's offset only once another cluster acknowledged the
//! record made from it, for a mirror that loses nothing:
//!
//! ```text
//! mkfifo acks
//! klog-consume --registry A -G mirror -t T -J --commit-from acks \
//!   | klog-produce --registry B -t T -J --report acks
//! ```
//!
//! `ACKS` is what `klog-produce --report` writes (see
//! [`crate::client::report`]): one JSON line per acknowledged record,
//! starting with the `source` it was made from (topic, partition and
//! offset of its envelope). A thread reads it (a FIFO until its writer
//! closes it; a regular file followed as it grows, from its start again
//! when it is written anew) and marks those offsets acknowledged. Only a
//! line's first 64 KiB are kept: the source comes first,
//! and the rest (the value) is skipped unread. For each partition the
//! member commits the first offset it printed that is not acknowledged
//! yet, or its position when every record it printed is: a producer
//! killed with records in its buffer, or a destination that never stored
//! them, leaves them uncommitted, and the group's next member prints them
//! again (at least once).
//!
//! A line of another topic is not this member's; a line with no `source`
//! is an error (its producer read no `-J` envelopes from here), and so is
//! a line that is not a report line. At most [`HELD_MAX`] printed records
//! are held (not acknowledged, or acknowledged behind one that is not):
//! then the member prints nothing more until the first is acknowledged,
//! as a producer's window fills. A record waiting longer than
//! [`STUCK_AFTER`] is named once on stderr ([`Acked::stuck`]): its
//! producer refused it (too large for the destination), or writes no
//! report here.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Seek};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::coord::group::Committable;
use crate::sync::lock;

/// Printed records held at most (16 bytes each).
pub const HELD_MAX: usize = 1 << 20;

/// How long a record waits for its acknowledgement before it is named.
pub const STUCK_AFTER: Duration = Duration::from_secs(30);

/// The bytes of a line kept: its `source` comes first.
const LINE_PREFIX_BYTES: usize = 64 * 1024;

/// The first bytes of a report line that has a source.
const SOURCE_FIRST: &[u8] = b"{\"source\":";

/// The first bytes of a followed file kept to see it written anew.
const HEAD_BYTES: usize = 256;

/// How often a regular file is looked at again at its end.
const TAIL_TICK: Duration = Duration::from_millis(50);

/// The records a member printed and which of them the destination
/// acknowledged (see the module doc).
#[derive(Debug)]
pub struct Acked {
    topic: String,
    path: PathBuf,
    /// A regular file, followed as it grows; else (a FIFO) read to its end.
    follow: bool,
    state: Mutex<State>,
    changed: Condvar,
}

/// Offsets printed, in order, each with whether it is acknowledged.
type Queue = VecDeque<(u64, bool)>;

#[derive(Debug, Default)]
struct State {
    /// By partition: the offsets printed and not committable yet, in the
    /// order printed (ascending), each with whether it is acknowledged;
    /// and since when the first has been first.
    printed: HashMap<u32, (Queue, Option<Instant>)>,
    /// Records printed and not acknowledged.
    unacked: usize,
    /// Records in `printed`.
    held: usize,
    /// The acknowledgements ended (the FIFO's writer closed it).
    ended: bool,
    /// Why they cannot be read, if so.
    error: Option<String>,
    /// By partition, the record last named by [`Acked::stuck`].
    named: HashMap<u32, u64>,
}

/// The source a report line starts with.
#[derive(serde::Deserialize)]
struct LineSource {
    topic: String,
    partition: u32,
    offset: u64,
}

/// A whole report line, to say why it has no source.
#[derive(serde::Deserialize)]
struct Line {
    #[allow(dead_code)]
    offset: u64,
}

impl Acked {
    /// Follows the acknowledgements in `path` for records of `topic`, in
    /// a thread of its own.
    pub fn follow(path: &Path, topic: &str) -> std::io::Result<Arc<Acked>> {
        // Said at once (the thread's open of a FIFO waits for its writer).
        std::fs::metadata(path)?;
        let acked = Arc::new(Acked::new(path, topic));
        let reader = Arc::clone(&acked);
        std::thread::Builder::new()
            .name("commit-from".into())
            .spawn(move || {
                let outcome = reader.read_all();
                let mut state = lock(&reader.state);
                match outcome {
                    Ok(()) => state.ended = true,
                    Err(why) => state.error = Some(why),
                }
                reader.changed.notify_all();
            })?;
        Ok(acked)
    }

    fn new(path: &Path, topic: &str) -> Acked {
        Acked {
            topic: topic.to_string(),
            path: path.to_path_buf(),
            follow: std::fs::metadata(path).is_ok_and(|m| m.is_file()),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    /// Notes that the record at `offset` of `partition` was printed.
    pub fn printed(&self, partition: u32, offset: u64) {
        let mut state = lock(&self.state);
        let state = &mut *state;
        let (queue, since) = state.printed.entry(partition).or_default();
        if queue.back().is_some_and(|&(last, _)| last >= offset) {
            // Printed again from an earlier offset (a reset): those after
            // it are waited for anew.
            let keep = queue.partition_point(|&(o, _)| o < offset);
            let dropped = queue.drain(keep..);
            state.held -= dropped.len();
            state.unacked -= dropped.filter(|&(_, acked)| !acked).count();
        }
        if queue.is_empty() {
            *since = Some(Instant::now());
        }
        queue.push_back((offset, false));
        state.unacked += 1;
        state.held += 1;
    }

    /// Marks `offset` of `partition` acknowledged (once, however often
    /// it comes: a batch sent twice is reported twice).
    fn ack(&self, partition: u32, offset: u64) {
        let mut state = lock(&self.state);
        let state = &mut *state;
        let Some((queue, since)) = state.printed.get_mut(&partition) else {
            return;
        };
        let Ok(i) = queue.binary_search_by_key(&offset, |&(o, _)| o) else {
            return;
        };
        if !queue[i].1 {
            queue[i].1 = true;
            state.unacked -= 1;
        }
        let before = queue.len();
        while queue.front().is_some_and(|&(_, acked)| acked) {
            queue.pop_front();
        }
        if queue.len() < before {
            *since = Some(Instant::now());
            state.held -= before - queue.len();
        }
        self.changed.notify_all();
    }

    /// Records printed and not acknowledged.
    pub fn unacked(&self) -> usize {
        lock(&self.state).unacked
    }

    /// Waits up to `wait` until fewer than [`HELD_MAX`] printed records
    /// are held; whether they are.
    pub fn room(&self, wait: Duration) -> bool {
        let state = lock(&self.state);
        let (state, _) = self
            .changed
            .wait_timeout_while(state, wait, |s| {
                s.held >= HELD_MAX && !s.ended && s.error.is_none()
            })
            .unwrap_or_else(|e| e.into_inner());
        state.held < HELD_MAX
    }

    /// The first record, if any, waiting for its acknowledgement longer
    /// than [`STUCK_AFTER`] and not named before: (partition, offset).
    pub fn stuck(&self) -> Option<(u32, u64)> {
        let mut state = lock(&self.state);
        let state = &mut *state;
        let stuck = state.printed.iter().find_map(|(&p, (queue, since))| {
            let first = queue.front().map(|&(o, _)| (p, o))?;
            let long = since.is_some_and(|t| t.elapsed() >= STUCK_AFTER);
            (long && state.named.get(&p) != Some(&first.1)).then_some(first)
        })?;
        state.named.insert(stuck.0, stuck.1);
        Some(stuck)
    }

    /// Waits up to `wait` for the member's end: every record printed is
    /// acknowledged and, from a FIFO, its writer closed it (an
    /// acknowledgement sent twice then finds a reader); or the
    /// acknowledgements stopped. Whether that came.
    pub fn settled(&self, wait: Duration) -> bool {
        let fifo = !self.follow;
        let waiting = |s: &mut State| s.error.is_none() && !s.ended && (fifo || s.unacked > 0);
        let state = lock(&self.state);
        let (mut state, _) = self
            .changed
            .wait_timeout_while(state, wait, waiting)
            .unwrap_or_else(|e| e.into_inner());
        !waiting(&mut state)
    }

    /// Why the acknowledgements stopped, if they did: they cannot be
    /// read, or (`ended`) their writer closed them.
    pub fn stopped(&self) -> Option<String> {
        let state = lock(&self.state);
        match (&state.error, state.ended) {
            (Some(why), _) => Some(why.clone()),
            (None, true) => Some(format!(
                "the acknowledgements in {} ended (their producer closed them)",
                self.path.display()
            )),
            (None, false) => None,
        }
    }

    /// The file the acknowledgements come from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the acknowledgements until a FIFO's end; a regular file is
    /// followed as it grows (and from its start when it is written anew).
    fn read_all(&self) -> Result<(), String> {
        let at = |e: std::io::Error| format!("cannot read {}: {e}", self.path.display());
        let mut file = File::open(&self.path).map_err(at)?;
        let follow = self.follow;
        let mut input = BufReader::with_capacity(256 * 1024, file.try_clone().map_err(at)?);
        let (mut line, mut number, mut read) = (Vec::new(), 0u64, 0u64);
        // The file's first bytes, as read (see `rewritten`).
        let mut head = Vec::new();
        loop {
            let (n, whole) = read_line(&mut input, &mut line).map_err(at)?;
            if whole {
                let taken = self.take_line(&line);
                if taken.is_err() && follow && rewritten(&file, read, &head).map_err(at)? {
                    // Written anew under the reader: read from its start.
                    (read, number) = (0, 0);
                    head.clear();
                    file.seek(std::io::SeekFrom::Start(0)).map_err(at)?;
                    input = BufReader::with_capacity(256 * 1024, file.try_clone().map_err(at)?);
                    continue;
                }
                number += 1;
                taken.map_err(|why| format!("{} line {number}: {why}", self.path.display()))?;
                read += n;
                if head.len() < HEAD_BYTES {
                    let more = (HEAD_BYTES - head.len()).min(line.len());
                    head.extend_from_slice(&line[..more]);
                }
                continue;
            }
            if !follow {
                // A FIFO's end (a last line with no newline is not a
                // whole line: its writer died writing it).
                return Ok(());
            }
            // A regular file's end for now: the partial line is read again.
            std::thread::sleep(TAIL_TICK);
            if rewritten(&file, read + n, &head).map_err(at)? {
                (read, number) = (0, 0);
                head.clear();
            }
            file.seek(std::io::SeekFrom::Start(read)).map_err(at)?;
            input = BufReader::with_capacity(256 * 1024, file.try_clone().map_err(at)?);
        }
    }

    /// Takes one line of the report (its first bytes, at most
    /// [`LINE_PREFIX_BYTES`]).
    fn take_line(&self, line: &[u8]) -> Result<(), String> {
        let Some(rest) = line.strip_prefix(SOURCE_FIRST) else {
            let why = match serde_json::from_slice::<Line>(line) {
                Ok(_) => "it names no source record: its producer must read the envelopes \
                          of klog-consume -J, with -J"
                    .to_string(),
                Err(e) => format!("not a line of klog-produce --report: {e}"),
            };
            return Err(why);
        };
        let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<LineSource>();
        let source = match values.next() {
            Some(Ok(source)) => source,
            Some(Err(e)) => return Err(format!("not a line of klog-produce --report: {e}")),
            None => return Err("not a line of klog-produce --report: no source".into()),
        };
        if source.topic == self.topic {
            self.ack(source.partition, source.offset);
        }
        Ok(())
    }
}

/// Reads one line into `line`, keeping its first [`LINE_PREFIX_BYTES`]
/// and skipping the rest: the bytes read, and whether the line is whole
/// (it ended with a newline; else the input ended first).
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<(u64, bool)> {
    line.clear();
    let mut n = 0u64;
    loop {
        let buf = match input.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((n, false));
        }
        let (take, whole) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = LINE_PREFIX_BYTES.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        input.consume(take);
        n += take as u64;
        if whole {
            return Ok((n, true));
        }
    }
}

/// Whether a followed file was written anew (its producer started
/// again, truncating it) since `seen` bytes of it were read, `head` the
/// first of them: it is shorter now, or starts with other bytes (a new
/// run's first line names another offset of the destination's).
fn rewritten(file: &File, seen: u64, head: &[u8]) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    if file.metadata()?.len() < seen {
        return Ok(true);
    }
    let mut now = vec![0u8; head.len()];
    match file.read_exact_at(&mut now, 0) {
        // Cut short since its length was read.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(true),
        read => read.map(|()| now != head),
    }
}

impl Committable for Acked {
    fn committable(&self, partition: u32, position: u64) -> u64 {
        let state = lock(&self.state);
        let waiting = state.printed.get(&partition).and_then(|(q, _)| q.front());
        waiting.map_or(position, |&(offset, _)| offset.min(position))
    }

    fn released(&self, partition: u32) {
        let mut state = lock(&self.state);
        if let Some((queue, _)) = state.printed.remove(&partition) {
            state.held -= queue.len();
            state.unacked -= queue.iter().filter(|&&(_, acked)| !acked).count();
        }
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn line(topic: &str, partition: u32, offset: u64) -> String {
        format!(
            "{{\"source\":{{\"topic\":\"{topic}\",\"partition\":{partition},\"offset\":{offset}}},\
             \"topic\":\"d\",\"partition\":0,\"offset\":9,\"value\":\"v\"}}\n"
        )
    }

    fn settle(a: &Acked) -> usize {
        a.settled(Duration::from_secs(10));
        a.unacked()
    }

    /// A partition commits its first printed record not acknowledged,
    /// else its position; acknowledgements out of order, twice, of
    /// records never printed or of another partition change nothing else.
    #[test]
    fn the_first_unacknowledged_record_bounds_the_commit() {
        let a = Acked::new(Path::new("acks"), "t");
        assert_eq!(a.committable(0, 5), 5, "nothing printed");
        for o in [5, 6, 8] {
            a.printed(0, o);
        }
        a.printed(1, 0);
        assert_eq!((a.committable(0, 9), a.unacked()), (5, 4));
        a.ack(0, 6);
        a.ack(0, 6);
        a.ack(0, 7);
        a.ack(2, 5);
        assert_eq!((a.committable(0, 9), a.unacked()), (5, 3));
        assert_eq!(
            lock(&a.state).held,
            4,
            "acknowledged behind the first: held"
        );
        a.ack(0, 5);
        assert_eq!(a.committable(0, 9), 8);
        a.ack(0, 8);
        assert_eq!((a.committable(0, 9), a.unacked()), (9, 1));
        assert_eq!(a.committable(1, 1), 0);
        a.released(1);
        assert_eq!((a.committable(1, 1), a.unacked()), (1, 0));
        assert_eq!(lock(&a.state).held, 0);
    }

    /// Printed again from an earlier offset, the records after it wait
    /// for their acknowledgement anew, once each.
    #[test]
    fn printing_again_from_an_earlier_offset_waits_anew() {
        let a = Acked::new(Path::new("acks"), "t");
        for o in 10..15 {
            a.printed(0, o);
        }
        a.ack(0, 12);
        a.printed(0, 11);
        assert_eq!((a.committable(0, 12), a.unacked()), (10, 2));
        a.ack(0, 10);
        a.ack(0, 11);
        assert_eq!((a.committable(0, 12), a.unacked()), (12, 0));
    }

    /// A FIFO is read to its writer's end, and the member waits for that
    /// end; lines of another topic are not this member's; a line cut
    /// short by a dying writer is not taken; a line's value past its
    /// first bytes is skipped unread.
    #[test]
    fn a_fifo_is_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let a = Acked::follow(&path, "t").unwrap();
        for o in [7, 8, 9] {
            a.printed(3, o);
        }
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        write!(w, "{}{}", line("other", 3, 7), line("t", 3, 8)).unwrap();
        let long = line("t", 3, 9).replace("\"v\"", &format!("\"{}\"", "v".repeat(1 << 20)));
        w.write_all(long.as_bytes()).unwrap();
        w.write_all(line("t", 3, 7).trim_end().as_bytes()).unwrap();
        assert!(
            !a.settled(Duration::from_millis(200)),
            "the FIFO has not ended"
        );
        drop(w);
        assert_eq!(settle(&a), 1);
        assert!(a.stopped().unwrap().contains("ended"), "{:?}", a.stopped());
        assert_eq!(a.committable(3, 10), 7);
    }

    /// A regular file is followed as it grows, and from its start once it
    /// is written anew.
    #[test]
    fn a_file_is_followed_and_read_again_when_written_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        std::fs::write(&path, "").unwrap();
        let a = Acked::follow(&path, "t").unwrap();
        for o in 1..4 {
            a.printed(0, o);
        }
        std::fs::write(&path, line("t", 0, 1)).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(line("t", 0, 2).as_bytes()).unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while a.unacked() > 1 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(a.committable(0, 4), 3);
        // Written anew, as long as before: its first line is read.
        let anew = format!("{}{}", line("t", 0, 3), line("t", 0, 4));
        std::fs::write(&path, anew).unwrap();
        assert_eq!(settle(&a), 0);
        assert_eq!(a.committable(0, 4), 4);
        assert!(a.stopped().is_none(), "a file does not end");
    }

    /// A line with no source, or not a report line, stops the reading
    /// with its line number.
    #[test]
    fn a_line_it_cannot_use_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let no_source = "{\"topic\":\"t\",\"partition\":0,\"offset\":1,\"value\":\"v\"}\n";
        for (text, said) in [
            (
                format!("{}{no_source}", line("t", 0, 0)),
                "line 2: it names no source",
            ),
            (
                "[1,2]\n".to_string(),
                "line 1: not a line of klog-produce --report",
            ),
            (
                "{\"source\":3}\n".to_string(),
                "line 1: not a line of klog-produce --report",
            ),
        ] {
            let path = dir.path().join("acks");
            std::fs::write(&path, text).unwrap();
            let a = Acked::follow(&path, "t").unwrap();
            a.printed(0, 1);
            assert_eq!(settle(&a), 1);
            let why = a.stopped().unwrap();
            assert!(why.contains(said), "{why}");
        }
    }

    /// Room: the member waits once [`HELD_MAX`] records are held, also
    /// when all but the first are acknowledged, and goes on when the
    /// first is; a first record waiting long is named once.
    #[test]
    fn a_full_window_waits_for_its_first_record() {
        let a = Acked::new(Path::new("acks"), "t");
        for o in 0..HELD_MAX as u64 {
            a.printed(0, o);
        }
        for o in 1..HELD_MAX as u64 {
            a.ack(0, o);
        }
        assert!(!a.room(Duration::from_millis(10)));
        assert_eq!(a.stuck(), None, "not waiting long yet");
        lock(&a.state).printed.get_mut(&0).unwrap().1 = Instant::now().checked_sub(STUCK_AFTER);
        assert_eq!(a.stuck(), Some((0, 0)));
        assert_eq!(a.stuck(), None, "named once");
        a.ack(0, 0);
        assert!(a.room(Duration::ZERO));
        assert_eq!(lock(&a.state).held, 0);
    }
}
