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
//! whose `source` names the topic, partition and offset of the envelope
//! it was made from. A thread reads it (a FIFO until its writer closes
//! it; a regular file followed as it grows, from its start again when it
//! is truncated) and marks those offsets acknowledged. For each
//! partition the member commits the first offset it printed that is not
//! acknowledged yet, or its position when every record it printed is:
//! a producer killed with records in its buffer, or a destination that
//! never stored them, leaves them uncommitted, and the group's next
//! member prints them again (at least once).
//!
//! A line of another topic is not this member's; a line with no `source`
//! is an error (its producer read no `-J` envelopes from here), and so is
//! a line that is not a report line. At most [`UNACKED_MAX`] records
//! wait for their acknowledgement: then the member prints nothing more
//! until some are acknowledged, as a producer's window fills.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::coord::group::Committable;
use crate::sync::lock;

/// Records printed and not yet acknowledged at most: 16 bytes each.
pub const UNACKED_MAX: usize = 1 << 20;

/// The longest line read: a report line carries its record's value (a
/// record of 1 MiB at most, which JSON may write six times as long).
const LINE_BYTES_MAX: u64 = 8 << 20;

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
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// By partition: the offsets printed and not committable yet, in the
    /// order printed (ascending), each with whether it is acknowledged.
    printed: HashMap<u32, VecDeque<(u64, bool)>>,
    /// Records printed and not acknowledged.
    unacked: usize,
    /// The acknowledgements ended (the FIFO's writer closed it).
    ended: bool,
    /// Why they cannot be read, if so.
    error: Option<String>,
}

/// One line of the report: its source, if any.
#[derive(serde::Deserialize)]
struct Line {
    source: Option<LineSource>,
}

#[derive(serde::Deserialize)]
struct LineSource {
    topic: String,
    partition: u32,
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
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    /// Notes that the record at `offset` of `partition` was printed.
    pub fn printed(&self, partition: u32, offset: u64) {
        let mut state = lock(&self.state);
        let state = &mut *state;
        let queue = state.printed.entry(partition).or_default();
        if queue.back().is_some_and(|&(last, _)| last >= offset) {
            // Printed again from an earlier offset (a reset): those after
            // it are waited for anew.
            let keep = queue.partition_point(|&(o, _)| o < offset);
            let dropped = queue.drain(keep..).filter(|&(_, acked)| !acked).count();
            state.unacked -= dropped;
        }
        queue.push_back((offset, false));
        state.unacked += 1;
    }

    /// Marks `offset` of `partition` acknowledged (once, however often
    /// it comes: a batch sent twice is reported twice).
    fn ack(&self, partition: u32, offset: u64) {
        let mut state = lock(&self.state);
        let state = &mut *state;
        let Some(queue) = state.printed.get_mut(&partition) else {
            return;
        };
        let Ok(i) = queue.binary_search_by_key(&offset, |&(o, _)| o) else {
            return;
        };
        if !queue[i].1 {
            queue[i].1 = true;
            state.unacked -= 1;
        }
        while queue.front().is_some_and(|&(_, acked)| acked) {
            queue.pop_front();
        }
        self.changed.notify_all();
    }

    /// Records printed and not acknowledged.
    pub fn unacked(&self) -> usize {
        lock(&self.state).unacked
    }

    /// Waits up to `wait` until fewer than [`UNACKED_MAX`] records wait
    /// for their acknowledgement; whether they do.
    pub fn room(&self, wait: Duration) -> bool {
        let state = lock(&self.state);
        let (state, _) = self
            .changed
            .wait_timeout_while(state, wait, |s| {
                s.unacked >= UNACKED_MAX && !s.ended && s.error.is_none()
            })
            .unwrap_or_else(|e| e.into_inner());
        state.unacked < UNACKED_MAX
    }

    /// Waits until every record printed is acknowledged, the
    /// acknowledgements end, or `until`; the records still unacknowledged.
    pub fn settle(&self, until: Instant) -> usize {
        let mut state = lock(&self.state);
        while state.unacked > 0 && !state.ended && state.error.is_none() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = self
                .changed
                .wait_timeout(state, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        state.unacked
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

    /// Reads the acknowledgements until a FIFO's end; a regular file is
    /// followed as it grows (and from its start when it is truncated).
    fn read_all(&self) -> Result<(), String> {
        let at = |e: std::io::Error| format!("cannot read {}: {e}", self.path.display());
        let mut file = File::open(&self.path).map_err(at)?;
        let follow = file.metadata().map_err(at)?.is_file();
        let mut input = BufReader::with_capacity(256 * 1024, file.try_clone().map_err(at)?);
        let (mut line, mut number, mut read) = (Vec::new(), 0u64, 0u64);
        // The file's first bytes, as read (see `rewritten`).
        let mut head = Vec::new();
        loop {
            line.clear();
            let n = (&mut input)
                .take(LINE_BYTES_MAX + 1)
                .read_until(b'\n', &mut line)
                .map_err(at)?;
            if n > 0 && line.ends_with(b"\n") {
                number += 1;
                read += n as u64;
                if head.len() < HEAD_BYTES {
                    let more = (HEAD_BYTES - head.len()).min(line.len());
                    head.extend_from_slice(&line[..more]);
                }
                self.take_line(&line)
                    .map_err(|why| format!("{} line {number}: {why}", self.path.display()))?;
                continue;
            }
            if n as u64 > LINE_BYTES_MAX {
                let what = format!("{} line {}", self.path.display(), number + 1);
                return Err(format!("{what}: longer than {LINE_BYTES_MAX} bytes"));
            }
            if !follow {
                // A FIFO's end (a last line with no newline is not a
                // whole line: its writer died writing it).
                return Ok(());
            }
            // A regular file's end for now: the partial line is read again.
            std::thread::sleep(TAIL_TICK);
            if rewritten(&file, read + n as u64, &head).map_err(at)? {
                (read, number) = (0, 0);
                head.clear();
            }
            let start = read;
            file.seek(std::io::SeekFrom::Start(start)).map_err(at)?;
            input = BufReader::with_capacity(256 * 1024, file.try_clone().map_err(at)?);
        }
    }

    /// Takes one line of the report.
    fn take_line(&self, line: &[u8]) -> Result<(), String> {
        let parsed: Line = serde_json::from_slice(line)
            .map_err(|e| format!("not a line of klog-produce --report: {e}"))?;
        let Some(source) = parsed.source else {
            return Err(
                "it names no source record: its producer must read the envelopes \
                        of klog-consume -J, with -J"
                    .into(),
            );
        };
        if source.topic == self.topic {
            self.ack(source.partition, source.offset);
        }
        Ok(())
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
    file.read_exact_at(&mut now, 0)?;
    Ok(now != head)
}

impl Committable for Acked {
    fn committable(&self, partition: u32, position: u64) -> u64 {
        let state = lock(&self.state);
        let waiting = state.printed.get(&partition).and_then(|q| q.front());
        waiting.map_or(position, |&(offset, _)| offset.min(position))
    }

    fn released(&self, partition: u32) {
        let mut state = lock(&self.state);
        if let Some(queue) = state.printed.remove(&partition) {
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
            "{{\"topic\":\"d\",\"partition\":0,\"offset\":9,\"value\":\"v\",\
             \"source\":{{\"topic\":\"{topic}\",\"partition\":{partition},\"offset\":{offset}}}}}\n"
        )
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
        a.ack(0, 5);
        assert_eq!(a.committable(0, 9), 8);
        a.ack(0, 8);
        assert_eq!((a.committable(0, 9), a.unacked()), (9, 1));
        assert_eq!(a.committable(1, 1), 0);
        a.released(1);
        assert_eq!((a.committable(1, 1), a.unacked()), (1, 0));
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

    /// A FIFO is read to its writer's end; lines of another topic are not
    /// this member's; a line cut short by a dying writer is not taken.
    #[test]
    fn a_fifo_is_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let a = Acked::follow(&path, "t").unwrap();
        a.printed(3, 7);
        a.printed(3, 8);
        let mut w = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        write!(w, "{}{}", line("other", 3, 7), line("t", 3, 8)).unwrap();
        w.write_all(line("t", 3, 7).trim_end().as_bytes()).unwrap();
        drop(w);
        assert_eq!(a.settle(Instant::now() + Duration::from_secs(10)), 1);
        assert!(a.stopped().unwrap().contains("ended"), "{:?}", a.stopped());
        assert_eq!(a.committable(3, 9), 7);
    }

    /// A regular file is followed as it grows, and from its start once it
    /// is written anew.
    #[test]
    fn a_file_is_followed_and_read_again_when_written_anew() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks");
        std::fs::write(&path, line("t", 0, 1)).unwrap();
        let a = Acked::follow(&path, "t").unwrap();
        for o in 1..4 {
            a.printed(0, o);
        }
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
        // Written anew, longer than before: its first line is read.
        let anew = format!("{}{}", line("t", 0, 3), line("t", 0, 4));
        std::fs::write(&path, anew).unwrap();
        assert_eq!(a.settle(Instant::now() + Duration::from_secs(10)), 0);
        assert_eq!(a.committable(0, 4), 4);
        assert!(a.stopped().is_none(), "a file does not end");
    }

    /// A line with no source, or not a report line, stops the reading
    /// with its line number; so does one past the longest line.
    #[test]
    fn a_line_it_cannot_use_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        for (text, said) in [
            (
                format!("{}{{\"topic\":\"t\"}}\n", line("t", 0, 0)),
                "line 2: it names no source",
            ),
            (
                "[1,2]\n".to_string(),
                "line 1: not a line of klog-produce --report",
            ),
        ] {
            let path = dir.path().join("acks");
            std::fs::write(&path, text).unwrap();
            let a = Acked::follow(&path, "t").unwrap();
            a.printed(0, 1);
            assert_eq!(a.settle(Instant::now() + Duration::from_secs(10)), 1);
            let why = a.stopped().unwrap();
            assert!(why.contains(said), "{why}");
        }
        let path = dir.path().join("long");
        let long = vec![b'x'; LINE_BYTES_MAX as usize + 2];
        std::fs::write(&path, long).unwrap();
        let a = Acked::follow(&path, "t").unwrap();
        a.printed(0, 1);
        a.settle(Instant::now() + Duration::from_secs(10));
        let why = a.stopped().unwrap();
        assert!(why.contains("line 1: longer than"), "{why}");
    }

    /// Room: the member waits once [`UNACKED_MAX`] records wait, and goes
    /// on when one is acknowledged.
    #[test]
    fn a_full_window_waits_for_an_acknowledgement() {
        let a = Acked::new(Path::new("acks"), "t");
        for o in 0..UNACKED_MAX as u64 {
            a.printed(0, o);
        }
        assert!(!a.room(Duration::from_millis(10)));
        a.ack(0, 5);
        assert!(a.room(Duration::ZERO));
    }
}
