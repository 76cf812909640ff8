//! Diagnostics on stderr that never panic: a `%` line, a problem or an
//! error written to a closed stderr (`klog-produce ... 2>&1 | head`) is
//! lost, and the tool goes on to its exit code. (`eprintln!` panics on a
//! failed write.)

use std::fmt;
use std::io::Write;

/// Writes `args` and a newline to stderr, ignoring a failure.
pub fn line(args: fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// Writes `text` to stderr as it is, ignoring a failure.
pub fn text(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A bound on lines of one kind (what peers cause: a flood of hostile
/// connections must not flood the log): at most `per_second` are written
/// each second, the rest counted, and the count said before the next line
/// written, or at the end ([`Throttle::dropped`]).
#[derive(Debug)]
pub struct Throttle {
    per_second: u32,
    state: std::sync::Mutex<ThrottleState>,
}

#[derive(Debug, Default)]
struct ThrottleState {
    /// When the current second began, and lines written in it.
    window: Option<std::time::Instant>,
    written: u32,
    /// Lines not written since the last one that was.
    dropped: u64,
}

impl Throttle {
    /// At most `per_second` lines a second.
    pub fn new(per_second: u32) -> Throttle {
        Throttle {
            per_second,
            state: std::sync::Mutex::new(ThrottleState::default()),
        }
    }

    /// Whether a line may be written at `now`: `Some(n)`, `n` lines having
    /// been dropped since the last one written (to be said first), or
    /// `None`: drop it.
    pub fn admit(&self, now: std::time::Instant) -> Option<u64> {
        let mut s = crate::sync::lock(&self.state);
        let new_window = s
            .window
            .is_none_or(|w| now.duration_since(w) >= std::time::Duration::from_secs(1));
        if new_window {
            s.window = Some(now);
            s.written = 0;
        }
        if s.written < self.per_second {
            s.written += 1;
            Some(std::mem::take(&mut s.dropped))
        } else {
            s.dropped += 1;
            None
        }
    }

    /// Lines dropped since the last one written, now forgotten.
    pub fn dropped(&self) -> u64 {
        std::mem::take(&mut crate::sync::lock(&self.state).dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Within a second, `per_second` lines pass and the rest are counted;
    /// the first line of a later second says how many, once.
    #[test]
    fn a_throttle_passes_so_many_lines_a_second_and_counts_the_rest() {
        let t = Throttle::new(3);
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let first: Vec<_> = (0..10).map(|i| t.admit(at(i * 90))).collect();
        assert_eq!(first[..3], [Some(0); 3]);
        assert_eq!(first[3..], [None; 7]);
        assert_eq!(t.admit(at(1000)), Some(7));
        assert_eq!(t.admit(at(1001)), Some(0));
        assert_eq!(t.admit(at(1002)), Some(0));
        assert_eq!(t.admit(at(1003)), None);
        assert_eq!(t.dropped(), 1);
        assert_eq!(t.dropped(), 0);
        assert_eq!(t.admit(at(1999)), None);
        assert_eq!(t.admit(at(2000)), Some(1));
    }
}
