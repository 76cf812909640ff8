//! The process-wide stop flag: a signal handler sets it, and every long
//! loop (a broker, a follow, a benchmark) checks it and winds down cleanly.
//! The time of the stop is kept too, so that a client can give its last
//! answers a short grace and then give up: a tool ends within a second of
//! the signal, whatever its broker does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Set by a signal handler to ask long loops to stop.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// When the first stop was asked for.
static STOPPED_AT: OnceLock<Instant> = OnceLock::new();

/// How long a client still waits for answers already asked for once a stop
/// came (the acknowledgements of records sent): short enough that a tool
/// ends within a second of the signal.
pub const GRACE: Duration = Duration::from_millis(500);

/// Asks long loops to stop, and notes when.
pub fn stop() {
    STOPPED_AT.get_or_init(Instant::now);
    STOP.store(true, Ordering::Relaxed);
}

/// Whether a stop was asked for.
pub fn stopping() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Whether a stop was asked for at least [`GRACE`] ago (or with no time
/// noted: [`STOP`] set directly).
pub fn grace_over() -> bool {
    stopping() && STOPPED_AT.get().is_none_or(|at| at.elapsed() >= GRACE)
}
